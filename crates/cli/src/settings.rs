//! What every command settles the same way, in one place: the time, the stop flag, and
//! whether SMT can be switched here.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use smtlab_control::Sysfs;

/// Seconds since the Unix epoch (0 before it).
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The one stop flag: Ctrl-C, kill, a closed terminal and Ctrl-\ all set it, and the
/// session ends at its next event (the cells measured so far are kept).
pub fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("cannot install the signal handlers")?;
    }
    Ok(stop)
}

/// Why SMT cannot be switched here, if it cannot.
pub fn switch_refusal(sysfs: &Sysfs) -> Option<String> {
    let state = match smtlab_control::state::read(sysfs) {
        Ok(s) => s,
        Err(e) => return Some(e.to_string()),
    };
    let Some(control) = &state.control else {
        return Some("the kernel has no smt/control".into());
    };
    if let Some(e) = control.refusal() {
        return Some(e.to_string());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("switching SMT needs root".into());
    }
    None
}
