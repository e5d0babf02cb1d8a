//! SIGINT, SIGTERM and SIGHUP while a guard has changed something: restore first, then
//! die of the signal as if nothing had caught it.
//!
//! The handler only writes the signal number into a pipe (async-signal-safe); a
//! watcher thread reads it, runs the restore in ordinary thread context, puts the
//! default action back and raises the signal again, so the exit status and the shell's
//! view ("Interrupted") stay what they would have been. When the guard is done, the
//! previous signal actions are put back and the thread ends. One watcher per process.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread::JoinHandle;

use crate::error::ControlError;

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

static ACTIVE: AtomicBool = AtomicBool::new(false);
static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = WRITE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write is async-signal-safe; a full pipe only loses a repeated signal.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

/// The installed watcher; dropping it puts the previous actions back.
pub struct Watcher {
    read_fd: libc::c_int,
    write_fd: libc::c_int,
    previous: Vec<(libc::c_int, libc::sigaction)>,
    thread: Option<JoinHandle<()>>,
}

/// Installs the handlers; `restore` runs on the watcher thread when one of the signals
/// arrives, before the process dies of it.
pub fn watch(restore: impl FnOnce() + Send + 'static) -> Result<Watcher, ControlError> {
    if ACTIVE
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return Err(ControlError::Busy);
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        ACTIVE.store(false, Ordering::SeqCst);
        return Err(ControlError::Guardian(std::io::Error::last_os_error()));
    }
    let (read_fd, write_fd) = (fds[0], fds[1]);
    // The reading side blocks; only the handler's side must never block.
    unsafe { libc::fcntl(read_fd, libc::F_SETFL, 0) };
    WRITE_FD.store(write_fd, Ordering::SeqCst);
    let mut previous = Vec::new();
    for sig in SIGNALS {
        // SAFETY: plain sigaction calls with zeroed, then filled, structures.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old);
            // A signal the user chose to ignore (nohup) stays ignored.
            if old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            new.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(sig, &new, std::ptr::null_mut());
            previous.push((sig, old));
        }
    }
    let thread = std::thread::Builder::new()
        .name("smtlab-restore-on-signal".into())
        .spawn(move || {
            let mut byte = 0u8;
            loop {
                // SAFETY: reading one byte into a local.
                let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
                if n == 1 {
                    break;
                }
                if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return; // end of file: the guard is done
            }
            restore();
            let sig = byte as libc::c_int;
            // SAFETY: default action back, then the signal again, unblocked.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::kill(libc::getpid(), sig);
                // Not reached for the three signals watched; be sure anyway.
                std::thread::sleep(std::time::Duration::from_secs(1));
                libc::_exit(128 + sig);
            }
        });
    match thread {
        Ok(t) => Ok(Watcher {
            read_fd,
            write_fd,
            previous,
            thread: Some(t),
        }),
        Err(e) => {
            let w = Watcher {
                read_fd,
                write_fd,
                previous,
                thread: None,
            };
            drop(w);
            Err(ControlError::Guardian(e))
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // SAFETY: restoring actions saved above and closing our own descriptors.
        unsafe {
            for (sig, old) in &self.previous {
                libc::sigaction(*sig, old, std::ptr::null_mut());
            }
            WRITE_FD.store(-1, Ordering::SeqCst);
            libc::close(self.write_fd);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        unsafe { libc::close(self.read_fd) };
        ACTIVE.store(false, Ordering::SeqCst);
    }
}
