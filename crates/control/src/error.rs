//! Errors of reading and changing the SMT and CPU hotplug state: each says in one line
//! which file or which state stopped it.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(
        "cannot switch SMT: smt/control is notsupported (the CPU or hypervisor shows no SMT siblings)"
    )]
    NotSupported,
    #[error(
        "cannot switch SMT: smt/control is forceoff (booted with nosmt=force; only a reboot brings SMT back)"
    )]
    ForceOff,
    #[error(
        "cannot switch SMT: smt/control is notimplemented (this kernel cannot switch SMT on this architecture)"
    )]
    NotImplemented,
    #[error("cannot switch SMT: {} does not exist (kernel older than 4.19 or built without CONFIG_HOTPLUG_SMT)", smtlab_model::quote::path(.path))]
    NoControl { path: PathBuf },
    #[error(
        "cannot switch SMT: smt/control reads {}, expected on, off, forceoff, notsupported or notimplemented",
        smtlab_model::quote::quoted(.value)
    )]
    UnknownControl { value: String },
    #[error("{what} needs root (it writes {}); run smtlab as root", smtlab_model::quote::path(.path))]
    NotRoot { what: String, path: PathBuf },
    #[error("{what}: {} is read-only (sysfs mounted read-only, as in most containers)", smtlab_model::quote::path(.path))]
    ReadOnly { what: String, path: PathBuf },
    #[error("cannot take CPU {cpu} offline: the kernel does not allow it (no {})", smtlab_model::quote::path(.path))]
    NotHotpluggable { cpu: u32, path: PathBuf },
    #[error("CPU {cpu} is not online, so it cannot be the one CPU left online (online: {online})")]
    CpuNotOnline { cpu: u32, online: String },
    #[error("another SMT or CPU hotplug change is already in progress in this process")]
    Busy,
    #[error("cannot start the guardian process that restores the system if smtlab dies: {0}")]
    Guardian(io::Error),
    // The cause is shown in the message and is not a `source`, so it is printed once.
    #[error("{what}: writing {value:?} to {} failed: {error}", smtlab_model::quote::path(.path))]
    Write {
        what: String,
        path: PathBuf,
        value: String,
        error: io::Error,
    },
    // The cause is shown in the message and is not a `source`, so it is printed once.
    #[error("cannot read {}: {error}", smtlab_model::quote::path(.path))]
    Read { path: PathBuf, error: io::Error },
    #[error("{}: {reason}", smtlab_model::quote::path(.path))]
    Parse { path: PathBuf, reason: String },
    #[error("could not restore {0}")]
    Restore(String),
}

/// Turns a failed write into the error that says why: not root, read-only sysfs, or the
/// kernel's own refusal.
pub(crate) fn write_error(
    what: &str,
    path: PathBuf,
    value: &str,
    source: io::Error,
    euid: u32,
) -> ControlError {
    let what = what.to_string();
    match source.raw_os_error() {
        Some(libc::EROFS) => ControlError::ReadOnly { what, path },
        Some(libc::EACCES) | Some(libc::EPERM) if euid != 0 => ControlError::NotRoot { what, path },
        _ => ControlError::Write {
            what,
            path,
            value: value.to_string(),
            error: source,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_failures_say_why() {
        let p = PathBuf::from("/sys/devices/system/cpu/smt/control");
        let e = |errno, euid| {
            write_error(
                "switching SMT off",
                p.clone(),
                "off",
                io::Error::from_raw_os_error(errno),
                euid,
            )
            .to_string()
        };
        assert!(e(libc::EROFS, 0).contains("read-only"));
        assert!(e(libc::EACCES, 1000).contains("needs root"));
        // Root refused: the kernel's own reason, with the value and the file.
        let root = e(libc::EPERM, 0);
        assert!(
            root.contains("writing \"off\"") && root.contains("smt/control"),
            "{root}"
        );
        assert!(e(libc::EBUSY, 0).contains("busy"));
    }
}
