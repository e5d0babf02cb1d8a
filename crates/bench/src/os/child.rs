//! Child processes for the os benchmarks: forking from a multithreaded process, pinning
//! the child, hearing from it without system calls, and always reaping it.
//!
//! After `fork` in a multithreaded process the child holds only the forking thread, and
//! any lock another thread held (the allocator's, stdio's) stays locked forever. So child
//! code here is restricted to async-signal-safe work prepared before the fork: raw
//! system calls through `syscall(2)`, atomics in a shared mapping, `execve`, `_exit`.

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

use smtlab_placement::pin::CpuMask;

use crate::BenchError;

/// Exit status of a child whose `sched_setaffinity` failed.
pub(super) const EXIT_PIN_FAILED: i32 = 121;
/// Exit status of a child whose `execve` failed (the shell's convention).
pub(super) const EXIT_EXEC_FAILED: i32 = 127;

/// A CPU mask built before `fork`, which the child applies to itself.
#[derive(Clone)]
pub(super) struct ChildPin {
    cpu: u32,
    mask: CpuMask,
}

impl ChildPin {
    /// The mask of `cpu`, or `None` when there is nothing to pin to (`os` placement).
    pub(super) fn to(bench: &str, cpu: Option<u32>) -> Result<Option<ChildPin>, BenchError> {
        let Some(cpu) = cpu else { return Ok(None) };
        let mask =
            CpuMask::of_cpu(cpu).map_err(|e| BenchError::unsupported(bench, e.to_string()))?;
        Ok(Some(ChildPin { cpu, mask }))
    }

    pub(super) fn cpu(&self) -> u32 {
        self.cpu
    }

    /// Pins the calling process (the child) to the CPU. Async-signal-safe.
    pub(super) fn apply(&self) -> bool {
        self.mask.apply(0).is_ok()
    }
}

/// The CPU the caller runs on, through the raw system call. Async-signal-safe.
pub(super) fn raw_getcpu() -> i32 {
    let mut cpu: libc::c_uint = 0;
    // SAFETY: raw getcpu with a valid output pointer; node and cache may be null.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &mut cpu as *mut libc::c_uint,
            std::ptr::null_mut::<libc::c_uint>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    if r == 0 { cpu as i32 } else { -1 }
}

/// Ends the child without running atexit handlers or flushing the parent's buffers.
pub(super) use smtlab_control::fork::child_exit;

/// Forks; the child runs `child`, which must be async-signal-safe and should end with
/// `execve` or `_exit` (one that returns anyway exits with status 126 rather than
/// continuing as a copy of the parent).
///
/// # Safety
/// `child` may only do async-signal-safe work (see the module documentation).
#[inline(always)]
pub(super) unsafe fn fork_with(child: impl FnOnce()) -> io::Result<libc::pid_t> {
    // SAFETY: the caller guarantees that the child only runs async-signal-safe code.
    unsafe {
        smtlab_control::fork::fork_with(|| {
            child();
            126
        })
    }
}

/// How a child ended and the CPU time it used.
pub(super) struct Exit {
    pub status: libc::c_int,
    pub cpu_ns: u64,
}

impl Exit {
    pub(super) fn code(&self) -> Option<i32> {
        libc::WIFEXITED(self.status).then(|| libc::WEXITSTATUS(self.status))
    }

    /// "exit status N" or "killed by signal N", for messages.
    pub(super) fn describe(&self) -> String {
        if libc::WIFEXITED(self.status) {
            format!("exit status {}", libc::WEXITSTATUS(self.status))
        } else if libc::WIFSIGNALED(self.status) {
            format!("killed by signal {}", libc::WTERMSIG(self.status))
        } else {
            format!("wait status {:#x}", self.status)
        }
    }
}

/// Waits for child `pid` (only that one: other threads may have children of their own)
/// and collects its CPU time, which `wait4` reports at no extra cost.
pub(super) fn wait_child(pid: libc::pid_t) -> io::Result<Exit> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; all zeroes is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to a status word and an rusage.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            let tv_ns =
                |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
            return Ok(Exit {
                status,
                cpu_ns: tv_ns(usage.ru_utime) + tv_ns(usage.ru_stime),
            });
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Kills and reaps child `pid`, ignoring errors: used on drop, where the child may
/// already be gone.
pub(super) fn kill_and_reap(pid: libc::pid_t) {
    // SAFETY: signalling and waiting for our own child; no memory is passed.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = wait_child(pid);
}

/// Fails when children cannot be waited for: with SIGCHLD ignored (or SA_NOCLDWAIT) the
/// kernel reaps them itself and `wait4` reports ECHILD instead of an exit status.
pub(super) fn check_children_reapable(bench: &str) -> Result<(), BenchError> {
    // SAFETY: sigaction is plain data; all zeroes is valid.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `old`.
    let r = unsafe { libc::sigaction(libc::SIGCHLD, std::ptr::null(), &mut old) };
    if r == 0 && (old.sa_sigaction == libc::SIG_IGN || old.sa_flags & libc::SA_NOCLDWAIT != 0) {
        return Err(BenchError::unsupported(
            bench,
            "SIGCHLD is ignored in this process, so the kernel reaps children \
                     itself and their exit cannot be waited for",
        ));
    }
    Ok(())
}

/// A page shared with forked children, so a child can report the CPU it ran on without
/// a pipe. Only the child asked to answer touches it: a shared page is not copied into
/// the child at fork, so reading it would cost every child a page fault that a bare
/// fork and exit does not pay.
pub(super) struct Mailbox {
    ptr: std::ptr::NonNull<MailboxData>,
}

#[repr(C)]
pub(super) struct MailboxData {
    pub cpu: AtomicI32,
}

// SAFETY: the mapping is owned by the Mailbox and only accessed through atomics.
unsafe impl Send for Mailbox {}

impl Mailbox {
    pub(super) fn new(bench: &str) -> Result<Mailbox, BenchError> {
        // SAFETY: an anonymous shared mapping with no address hint; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                std::mem::size_of::<MailboxData>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(super::last_os_error(
                bench,
                "mmap a page shared with children",
            ));
        }
        let ptr = std::ptr::NonNull::new(p.cast::<MailboxData>())
            .ok_or_else(|| BenchError::check(bench, "mmap returned a null page"))?;
        // The page arrives zero-filled, which is a valid MailboxData (atomics of 0).
        let m = Mailbox { ptr };
        m.get().cpu.store(-1, Ordering::Relaxed);
        Ok(m)
    }

    pub(super) fn get(&self) -> &MailboxData {
        // SAFETY: the mapping lives as long as self and holds a MailboxData.
        unsafe { self.ptr.as_ref() }
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping created in `new`, exactly once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), std::mem::size_of::<MailboxData>()) };
    }
}

/// An upper bound on the descriptors open now, for [`close_all_but`]'s fallback: the
/// soft RLIMIT_NOFILE, capped so the fallback loop stays short.
pub(super) fn fd_bound() -> i32 {
    // SAFETY: rlimit is plain data; getrlimit fills it.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a valid rlimit pointer.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        1024
    };
    soft.min(65_536) as i32
}

/// Closes every descriptor from 3 up except `keep` (stdin/out/err stay). Uses
/// `close_range` (Linux 5.9), else closes one by one below `bound`. Async-signal-safe.
pub(super) fn close_all_but(keep: &[i32], bound: i32) {
    let mut from: u32 = 3;
    let mut sorted = [i32::MAX; 4];
    let k = keep.len().min(sorted.len());
    sorted[..k].copy_from_slice(&keep[..k]);
    sorted.sort_unstable();
    for &fd in sorted.iter().filter(|&&fd| fd >= 3 && fd != i32::MAX) {
        close_range(from, fd as u32 - 1, bound);
        from = fd as u32 + 1;
    }
    close_range(from, u32::MAX, bound);
}

fn close_range(first: u32, last: u32, bound: i32) {
    if first > last {
        return;
    }
    // SAFETY: raw close_range with no flags; closing descriptors this child owns.
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
    if r != 0 {
        let end = (last as i64).min(bound as i64 - 1);
        let mut fd = first as i64;
        while fd <= end {
            // SAFETY: closing a descriptor number; EBADF for unused ones is harmless.
            unsafe { libc::close(fd as i32) };
            fd += 1;
        }
    }
}
