//! The command's processes as the kernel sees them: the pipe its output comes through,
//! whether it has exited (without reaping it), its process tree, and the first task that
//! left the placement's CPUs.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use smtlab_model::CpuSet;

/// A pipe whose ends are closed on exec; the read end does not block (the command's
/// end blocks as usual).
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = smtlab_control::fork::pipe()?;
    smtlab_loadgen::sys::set_nonblocking(r.as_raw_fd(), true)?;
    Ok((r, w))
}

/// A descriptor that becomes readable when `pid` exits (Linux 5.3+), else `None` and the
/// wait falls back to polling.
pub(super) fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative result is a new descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether `pid` (our child) has exited, leaving it unreaped.
pub(super) fn exited(pid: libc::pid_t) -> bool {
    // SAFETY: siginfo_t is plain data; waitid only writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer; WNOWAIT leaves the child to be reaped later.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: after a successful waitid the pid field is set (0 when nothing exited).
    r == 0 && unsafe { info.si_pid() } != 0
}

/// Adds the descendants of `root` not yet in `known` (through `/proc/*/task/*/children`).
pub(super) fn tree(root: libc::pid_t, known: &mut Vec<libc::pid_t>) {
    let mut i = 0;
    if !known.contains(&root) {
        known.push(root);
    }
    while i < known.len() && known.len() <= 4096 {
        let pid = known[i] as u32;
        i += 1;
        for c in smtlab_control::coresched::children(std::path::Path::new("/proc"), pid) {
            let c = c as libc::pid_t;
            if !known.contains(&c) {
                known.push(c);
            }
        }
    }
}

/// A task seen outside the placement.
pub(super) struct Escape {
    pub(super) tid: libc::pid_t,
    /// The CPU it last ran on.
    pub(super) cpu: u32,
    /// Its affinity, when that is what left the placement.
    pub(super) affinity: Option<CpuSet>,
}

/// The first task of `pids` whose affinity is not within `cpus` or that last ran on a
/// CPU outside them.
pub(super) fn escaped(pids: &[libc::pid_t], cpus: &CpuSet) -> Option<Escape> {
    for &pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
                continue;
            };
            let Some(cpu) = smtlab_control::coresched::stat_field(&stat, 39).map(|c| c as u32)
            else {
                continue;
            };
            if let Ok(status) = std::fs::read_to_string(t.path().join("status"))
                && let Some(list) = status
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                && let Ok(allowed) = CpuSet::parse_list(list.trim())
                && !allowed.is_subset(cpus)
            {
                return Some(Escape {
                    tid,
                    cpu,
                    affinity: Some(allowed),
                });
            }
            if !cpus.contains(cpu) {
                return Some(Escape {
                    tid,
                    cpu,
                    affinity: None,
                });
            }
        }
    }
    None
}
