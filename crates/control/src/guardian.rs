//! The guardian: a forked process that puts the saved state back if smtlab dies.
//!
//! A guard's `Drop` cannot run after SIGKILL, an abort or the OOM killer. So before its
//! first change the guard forks a guardian that holds the read end of a pipe; only
//! smtlab holds the write end. The guardian blocks in `read`:
//!
//! * a byte `Q` means smtlab finished (and restored) normally: exit without touching
//!   anything;
//! * end-of-file without `Q` means every copy of the write end is closed, i.e. smtlab
//!   is gone: write the saved values back, then exit.
//!
//! The child of a multi-threaded process may only make async-signal-safe calls, so it
//! never allocates: the files and values to write are prepared before `fork` as a
//! [`Plan`], and the child uses only `read`, `open`, `write`, `close`, `setsid`,
//! `sigaction`-style `signal`, `dup2` and `_exit`. It leaves the terminal's process
//! group (Ctrl-C must not reach it before smtlab is gone), ignores SIGINT, SIGTERM and
//! SIGHUP, and closes every inherited descriptor but its pipe, so it holds no socket,
//! pipe or file of smtlab's open.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The writes that restore the saved state, in order (SMT control before CPUs: writing
/// `on` to `smt/control` brings every CPU online).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    writes: Vec<(CString, Vec<u8>)>,
}

impl Plan {
    pub fn push(&mut self, path: &Path, value: &str) {
        // Paths from sysfs never hold NUL; a path that did could not be opened anyway.
        if let Ok(p) = CString::new(path.as_os_str().as_bytes()) {
            self.writes.push((p, value.as_bytes().to_vec()));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

/// A running guardian. Dropping it (or [`Guardian::dismiss`]) tells it to exit without
/// restoring; [`Guardian::abandon`] closes the pipe as smtlab's death would.
#[derive(Debug)]
pub struct Guardian {
    write_fd: libc::c_int,
    pid: libc::pid_t,
}

impl Guardian {
    /// Forks the guardian for `plan`.
    pub fn spawn(plan: &Plan) -> io::Result<Guardian> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is a valid two-element array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let (read_fd, write_fd) = (fds[0], fds[1]);
        // SAFETY: the child only makes async-signal-safe calls (see `watch`) and never
        // returns into Rust code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = io::Error::last_os_error();
            unsafe {
                libc::close(read_fd);
                libc::close(write_fd);
            }
            return Err(e);
        }
        if pid == 0 {
            unsafe { watch(read_fd, write_fd, plan) }
        }
        // SAFETY: read_fd is ours and no longer needed here.
        unsafe { libc::close(read_fd) };
        Ok(Guardian { write_fd, pid })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Tells the guardian that everything was restored; it exits without writing.
    pub fn dismiss(mut self) {
        self.stop(true);
    }

    /// Closes the pipe without a word, as smtlab's death would: the guardian restores
    /// the plan and exits. Waits for it.
    pub fn abandon(mut self) {
        self.stop(false);
    }

    fn stop(&mut self, quietly: bool) {
        if self.write_fd < 0 {
            return;
        }
        unsafe {
            if quietly {
                let q = b'Q';
                libc::write(self.write_fd, (&q as *const u8).cast(), 1);
            }
            libc::close(self.write_fd);
        }
        self.write_fd = -1;
        let mut status = 0;
        loop {
            // SAFETY: pid is our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        self.stop(true);
    }
}

/// The guardian's whole life. Async-signal-safe calls only; never returns.
unsafe fn watch(read_fd: libc::c_int, write_fd: libc::c_int, plan: &Plan) -> ! {
    unsafe {
        libc::close(write_fd);
        libc::setsid();
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
        // Move the pipe above 0-2 (it may have landed there if smtlab's were closed),
        // then point 0-2 at /dev/null and close everything else.
        let fd = libc::fcntl(read_fd, libc::F_DUPFD, 3);
        let fd = if fd < 0 { read_fd } else { fd };
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for target in 0..3 {
                if target != fd {
                    libc::dup2(null, target);
                }
            }
        }
        close_all_but(fd);

        let mut byte = 0u8;
        loop {
            let n = libc::read(fd, (&mut byte as *mut u8).cast(), 1);
            if n == 1 && byte == b'Q' {
                libc::_exit(0);
            }
            if n == 0 {
                break;
            }
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n < 0 {
                break;
            }
        }
        for (path, value) in &plan.writes {
            let f = libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
            );
            if f >= 0 {
                libc::write(f, value.as_ptr().cast(), value.len());
                libc::close(f);
            }
        }
        libc::_exit(0)
    }
}

unsafe fn close_all_but(keep: libc::c_int) {
    unsafe {
        let lo = 3u32;
        let k = keep as u32;
        let ok = (k <= lo || libc::syscall(libc::SYS_close_range, lo, k - 1, 0) == 0)
            && libc::syscall(libc::SYS_close_range, k + 1, u32::MAX, 0) == 0;
        if !ok {
            // Kernels before 5.9: close one by one up to a generous bound.
            for fd in 3..65536 {
                if fd != keep {
                    libc::close(fd);
                }
            }
        }
    }
}
