//! `smtlab smt`: the SMT and CPU hotplug state, and switching SMT off and on (the
//! uniprocessor state the measuring commands enter around a `1c1t-up` cell is in
//! [`crate::settings`]).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use smtlab_control::{SmtSnapshot, SmtSwitch, Sysfs};

use crate::args::{SmtArgs, SmtWord};
use crate::output::{emit, json_text};
use crate::render::smt::{control_word, cores_line, describe, list};

#[derive(Serialize)]
struct StateJson<'a> {
    schema: &'static str,
    #[serde(flatten)]
    state: &'a SmtSnapshot,
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
        crate::term::stderr_line(&format!(
            "{summary}\nholding for {secs} s, then back to {was} (Ctrl-C puts it back now)"
        ));
        std::thread::sleep(Duration::from_secs_f64(secs));
        switch.finish()?;
        crate::term::stderr_line(&format!("SMT back to {was}"));
        return Ok(());
    }
    if let Some((program, rest)) = args.command.split_first() {
        crate::term::stderr_line(&format!("{summary}; running `{}`", args.command.join(" ")));
        let status = std::process::Command::new(program)
            .args(rest)
            .status()
            .with_context(|| format!("cannot run {program:?}"));
        // Restore before reporting how the command ended.
        switch.finish()?;
        crate::term::stderr_line(&format!("SMT back to {was}"));
        let status = status?;
        if !status.success() {
            bail!("command `{}` ended with {status}", args.command.join(" "));
        }
        return Ok(());
    }
    switch.keep();
    emit(&format!("{summary}\n"))
}
