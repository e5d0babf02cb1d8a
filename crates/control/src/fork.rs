//! Forking from smtlab, a multithreaded process, in one place: the guardian, the os
//! benchmarks' children and the built-in web server's pre-forked workers all fork here.
//!
//! After `fork` the child holds only the forking thread, and a lock another thread held
//! (the allocator's, stdio's, any `Mutex`) stays locked in the child forever. So the
//! child must run only what needs none of them, and must never return into the parent's
//! code: [`fork_with`] ends it with `_exit` of the status its function returns, without
//! the parent's destructors or `atexit` handlers.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Forks; the child runs `child` and exits with the status it returns (or never
/// returns, ending itself with `execve` or [`child_exit`]). Returns the child's pid to
/// the parent.
///
/// # Safety
/// `child` runs in a copy of this process that holds only the calling thread: it may
/// only do work that takes no lock another thread could have held at the fork
/// (async-signal-safe calls, or code the caller knows to be free of such locks), and it
/// must not unwind out of `child`.
// Inlined with the child's function into the caller, so that the child's whole path
// lies in one stretch of code: a forked child maps each code page it runs by a page
// fault (fork does not copy page-table entries of file mappings), and a fork
// benchmark's child that jumps across three functions paid three of them.
#[inline(always)]
pub unsafe fn fork_with(child: impl FnOnce() -> i32) -> io::Result<libc::pid_t> {
    // SAFETY: the caller guarantees what the child runs (see above); the child never
    // returns from here.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let code = child();
            child_exit(code)
        }
        pid => Ok(pid),
    }
}

/// A pipe for talking with a child, read end first: both ends closed on exec, so
/// children started by other threads never inherit them.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two new descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Ends a forked child at once with `code`: no destructors, no `atexit` handlers, no
/// flushing of buffers copied from the parent. Async-signal-safe.
#[inline(always)]
pub fn child_exit(code: i32) -> ! {
    // SAFETY: _exit is async-signal-safe, takes no pointers and never returns.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_exits_with_the_status_its_function_returns() {
        // SAFETY: the child only returns a number.
        let pid = unsafe { fork_with(|| 7) }.unwrap();
        let mut status = 0;
        // SAFETY: `status` is a live int the kernel writes; `pid` is our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(r, pid);
        assert!(libc::WIFEXITED(status), "{status:#x}");
        assert_eq!(libc::WEXITSTATUS(status), 7);
    }
}
