//! `smtlab smt`: the SMT and CPU hotplug state, and switching SMT off and on (the
//! uniprocessor state the measuring commands enter around a `1c1t-up` cell is in
//! [`crate::settings`]).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use smtlab_control::{SmtControl, SmtState, SmtSwitch, Sysfs};
use smtlab_model::CpuSet;

use super::{emit, json_text};
use crate::args::{SmtArgs, SmtWord};

#[derive(Serialize)]
struct StateJson<'a> {
    schema: &'static str,
    #[serde(flatten)]
    state: &'a SmtState,
    offline: Vec<u32>,
}

pub fn run(args: &SmtArgs, machine: &dyn smtlab_runner::machine::Machine) -> Result<()> {
    let sysfs = match &args.sysfs.sysfs {
        Some(dir) => Sysfs::at(dir),
        None => machine.sysfs(),
    };
    let Some(word) = args.switch else {
        let state = smtlab_control::state::read(&sysfs)?;
        if args.json {
            let offline = state.offline();
            return emit(&json_text(&StateJson {
                schema: "smtlab.smt/1",
                state: &state,
                offline,
            })?);
        }
        return emit(&describe(&state));
    };
    let on = word == SmtWord::On;
    let holds = args.hold.is_some() || !args.command.is_empty();
    let mut switch = if holds {
        SmtSwitch::new(sysfs)?
    } else {
        // The user's own lasting change: nothing to guard.
        let none = smtlab_control::guard::Protection {
            guardian: false,
            signals: false,
        };
        SmtSwitch::with_protection(sysfs, none)?
    };
    let was = control_word(switch.original()).to_string();
    switch.set(on)?;
    let now = switch.state()?;
    let summary = format!(
        "SMT {} (was {was}): CPUs online {}; {}",
        if on { "on" } else { "off" },
        list(&now.online),
        cores_line(&now)
    );
    if let Some(secs) = args.hold {
        if !(secs.is_finite() && secs >= 0.0) {
            bail!("--hold {secs}: expected a number of seconds, 0 or more");
        }
        eprintln!("{summary}\nholding for {secs} s, then back to {was} (Ctrl-C puts it back now)");
        std::thread::sleep(Duration::from_secs_f64(secs));
        switch.finish()?;
        eprintln!("SMT back to {was}");
        return Ok(());
    }
    if let Some((program, rest)) = args.command.split_first() {
        eprintln!("{summary}; running `{}`", args.command.join(" "));
        let status = std::process::Command::new(program)
            .args(rest)
            .status()
            .with_context(|| format!("cannot run {program:?}"));
        // Restore before reporting how the command ended.
        switch.finish()?;
        eprintln!("SMT back to {was}");
        let status = status?;
        if !status.success() {
            bail!("command `{}` ended with {status}", args.command.join(" "));
        }
        return Ok(());
    }
    switch.keep();
    emit(&format!("{summary}\n"))
}

fn control_word(state: &SmtState) -> &str {
    state.control.as_ref().map_or("absent", SmtControl::as_str)
}

fn list(cpus: &[u32]) -> String {
    if cpus.is_empty() {
        return "none".into();
    }
    cpus.iter().copied().collect::<CpuSet>().to_list_string()
}

fn cores_line(state: &SmtState) -> String {
    match state.threads_per_core() {
        None => "no cores online".into(),
        Some((lo, hi)) if lo == hi => format!(
            "{} cores x {lo} thread{} online",
            state.cores.len(),
            if lo == 1 { "" } else { "s" }
        ),
        Some((lo, hi)) => format!("{} cores, {lo}-{hi} threads online each", state.cores.len()),
    }
}

fn describe(state: &SmtState) -> String {
    let control = match &state.control {
        None => "absent (no smt/control: kernel before 4.19 or without CONFIG_HOTPLUG_SMT)".into(),
        Some(SmtControl::On) => "on (switch with `smtlab smt off`, as root)".into(),
        Some(SmtControl::Off) => "off (switch with `smtlab smt on`, as root)".into(),
        Some(SmtControl::ForceOff) => "forceoff (off until reboot: nosmt=force)".into(),
        Some(SmtControl::NotSupported) => {
            "notsupported (the CPU or hypervisor shows no SMT siblings; nothing to switch)".into()
        }
        Some(SmtControl::NotImplemented) => {
            "notimplemented (this kernel cannot switch SMT here)".into()
        }
        Some(SmtControl::Other(v)) => format!("{v} (not a value smtlab knows)"),
    };
    let active = match state.active {
        None => "unknown (no smt/active)",
        Some(true) => "yes (some core has more than one thread online)",
        Some(false) => "no (one thread online per core)",
    };
    format!(
        "SMT control  {control}\nSMT active   {active}\nCPUs online  {} (offline: {}; can go offline: {})\nCores        {}\n",
        list(&state.online),
        list(&state.offline()),
        list(&state.hotpluggable),
        cores_line(state),
    )
}
