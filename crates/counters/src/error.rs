//! Errors, and the mapping from `perf_event_open` errno values to the one-line reasons
//! users see (measurement rule 12: say why, go on with what works).

use std::io;
use std::path::PathBuf;

use crate::sys::errno_name;

/// What an event needs from `perf_event_paranoid` when not root: it decides which
/// sysctl value the permission message suggests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Needs {
    /// User-mode counting of one's own threads: allowed up to paranoid 2.
    User,
    /// Kernel-mode counting: paranoid <= 1.
    Kernel,
    /// CPU-wide counting: paranoid <= 0.
    CpuWide,
    /// Raw tracepoint samples: paranoid <= -1.
    RawTracepoint,
}

impl Needs {
    fn sysctl_value(self) -> i32 {
        match self {
            Needs::User => 2,
            Needs::Kernel => 1,
            Needs::CpuWide => 0,
            Needs::RawTracepoint => -1,
        }
    }
}

/// Reads `/proc/sys/kernel/perf_event_paranoid`; `None` when it cannot be read
/// (a kernel without perf_event, or a sandbox hiding /proc/sys).
pub fn perf_event_paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Words the reason `perf_event_open` failed with `errno`, in the terms a user can act on.
pub(crate) fn classify(errno: i32, needs: Needs) -> String {
    let name = errno_name(errno);
    match errno {
        // The machine (CPU, PMU driver, hypervisor) does not provide the event.
        libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV => {
            format!("not supported on this machine ({name})")
        }
        libc::EACCES | libc::EPERM => {
            let paranoid =
                perf_event_paranoid().map_or_else(|| "unreadable".to_string(), |p| p.to_string());
            format!(
                "permission: perf_event_paranoid is {paranoid}; run as root or `sysctl kernel.perf_event_paranoid={}` ({name})",
                needs.sysctl_value()
            )
        }
        libc::EINVAL | libc::E2BIG => {
            format!("bad attribute: the kernel rejects this event's settings ({name})")
        }
        libc::EMFILE | libc::ENFILE => {
            format!("out of file descriptors ({name}); raise `ulimit -n`")
        }
        libc::ESRCH => format!("no such thread or process ({name})"),
        libc::EBUSY => format!("counter busy: another user holds it exclusively ({name})"),
        _ => format!("{name}: {}", io::Error::from_raw_os_error(errno)),
    }
}

/// Errors of this crate. Each names what failed.
#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    /// `perf_event_open` refused something the caller could not do without.
    #[error("perf_event_open {what}: {reason}")]
    Open {
        what: String,
        errno: i32,
        reason: String,
    },
    /// A read, ioctl or mmap on an open event, or reading a file, failed.
    /// The cause is shown in the message and is not a `source`, so it is printed once.
    #[error("{what}: {error}")]
    Io { what: String, error: io::Error },
    /// A file had unexpected content.
    #[error("{path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    /// The measurement cannot be done on this machine; the reason is one line meant to
    /// follow "skipped: ".
    #[error("{0}")]
    Unavailable(String),
    /// Calls in the wrong order (read before start, stop twice).
    #[error("counters: {0}")]
    State(String),
}

impl CounterError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> CounterError {
        CounterError::Io {
            what: what.into(),
            error: source,
        }
    }

    pub(crate) fn open(what: impl Into<String>, errno: i32, needs: Needs) -> CounterError {
        let reason = classify(errno, needs);
        CounterError::Open {
            what: what.into(),
            errno,
            reason,
        }
    }
}

/// A tracer's open refused with `errno`: a missing task or a descriptor limit is an
/// error about what was opened (`what`); anything else says tracing is unavailable, in
/// a line that starts with `unavailable` (else `what`).
pub(crate) fn open_error(what: String, errno: i32, unavailable: Option<&str>) -> CounterError {
    if matches!(errno, libc::ESRCH | libc::EMFILE | libc::ENFILE) {
        CounterError::open(what, errno, Needs::RawTracepoint)
    } else {
        let head = unavailable.unwrap_or(&what);
        CounterError::Unavailable(format!("{head}: {}", classify(errno, Needs::RawTracepoint)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_classes_match_the_design() {
        for e in [libc::ENOENT, libc::EOPNOTSUPP, libc::ENODEV] {
            let msg = classify(e, Needs::User);
            assert!(msg.starts_with("not supported on this machine"), "{msg}");
        }
        for e in [libc::EACCES, libc::EPERM] {
            let msg = classify(e, Needs::CpuWide);
            assert!(
                msg.starts_with("permission: perf_event_paranoid is "),
                "{msg}"
            );
            assert!(msg.contains("sysctl kernel.perf_event_paranoid=0"), "{msg}");
        }
        let msg = classify(libc::EINVAL, Needs::User);
        assert!(msg.starts_with("bad attribute"), "{msg}");
    }
}
