//! `smtlab smt`'s text: the SMT and CPU hotplug state, and the one-line summary of a
//! switch.

use smtlab_control::{SmtControl, SmtSnapshot};
use smtlab_model::CpuSet;

pub fn control_word(state: &SmtSnapshot) -> &str {
    state.control.as_ref().map_or("absent", SmtControl::as_str)
}

pub fn list(cpus: &[u32]) -> String {
    if cpus.is_empty() {
        return "none".into();
    }
    cpus.iter().copied().collect::<CpuSet>().to_list_string()
}

pub fn cores_line(state: &SmtSnapshot) -> String {
    match state.threads_per_core() {
        None => "no cores online".into(),
        Some((lo, hi)) if lo == hi => format!(
            "{} cores x {} online",
            state.cores.len(),
            smtlab_model::unit::plural(lo, "thread")
        ),
        Some((lo, hi)) => format!("{} cores, {lo}-{hi} threads online each", state.cores.len()),
    }
}

pub fn describe(state: &SmtSnapshot) -> String {
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
