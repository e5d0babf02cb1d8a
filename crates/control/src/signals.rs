//! SIGINT, SIGTERM, SIGHUP and SIGQUIT: clean up first, then die of the signal as if
//! nothing had caught it.
//!
//! The handler only writes the signal number into a pipe (async-signal-safe); a
//! watcher thread reads it, runs every registered clean-up in ordinary thread context
//! (a guard's restore, the killing of smtlab's process trees, the removal of scratch
//! directories), puts the default action back and raises the signal again, so the exit
//! status and the shell's view ("Interrupted") stay what they would have been.
//!
//! One set of handlers serves the whole process: [`watch`] adds a clean-up for as long
//! as its [`Watcher`] lives (a guard's restore), [`clean_up_on_signals`] adds one for
//! the rest of the process (a command's scratch directories). When the last
//! [`Watcher`] goes and nothing was added for good, the previous signal actions are put
//! back and the thread ends.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::JoinHandle;

use crate::error::ControlError;

/// The signals that end smtlab cleanly (those `smtlab run` handles).
pub const SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = WRITE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write is async-signal-safe; a full pipe only loses a repeated signal.
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

enum Hook {
    /// A guard's restore: runs once.
    Once(Box<dyn FnOnce() + Send>),
    /// For the rest of the process.
    Always(fn()),
}

/// The installed handlers and their thread.
struct Installed {
    read_fd: libc::c_int,
    write_fd: libc::c_int,
    previous: Vec<(libc::c_int, libc::sigaction)>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct State {
    installed: Option<Installed>,
    hooks: Vec<(u64, Hook)>,
    /// Live watchers plus clean-ups added for good.
    users: usize,
    next_id: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    installed: None,
    hooks: Vec::new(),
    users: 0,
    next_id: 0,
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A clean-up registered by [`watch`]; dropping it removes the clean-up, and the signal
/// handlers when nothing else needs them.
pub struct Watcher {
    id: u64,
}

/// Runs `restore` on the watcher thread when one of the [`SIGNALS`] arrives, before
/// the process dies of it, for as long as the returned [`Watcher`] lives.
pub fn watch(restore: impl FnOnce() + Send + 'static) -> Result<Watcher, ControlError> {
    add(Hook::Once(Box::new(restore))).map(|id| Watcher { id })
}

/// Runs `clean_up` when one of the [`SIGNALS`] arrives, then dies of the signal, for
/// the rest of the process: for commands that have no other way of stopping on a signal.
pub fn clean_up_on_signals(clean_up: fn()) -> Result<(), ControlError> {
    add(Hook::Always(clean_up)).map(drop)
}

/// Registers `hook`, with the signal handlers installed first if they are not; its id.
fn add(hook: Hook) -> Result<u64, ControlError> {
    let mut s = state();
    install(&mut s)?;
    let id = s.next_id;
    s.next_id += 1;
    s.hooks.push((id, hook));
    s.users += 1;
    Ok(id)
}

fn install(s: &mut State) -> Result<(), ControlError> {
    if s.installed.is_some() {
        return Ok(());
    }
    let mut fds: [libc::c_int; 2] = [0; 2];
    // SAFETY: fds is a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(ControlError::Guardian(std::io::Error::last_os_error()));
    }
    let (read_fd, write_fd) = (fds[0], fds[1]);
    // The reading side blocks; only the handler's side must never block.
    // SAFETY: changing the flags of our own descriptor.
    unsafe { libc::fcntl(read_fd, libc::F_SETFL, 0) };
    let thread = std::thread::Builder::new()
        .name("smtlab-clean-up-on-signal".into())
        .spawn(move || run_on_signal(read_fd));
    let thread = match thread {
        Ok(t) => t,
        Err(e) => {
            // SAFETY: closing the descriptors pipe2 gave us.
            unsafe {
                libc::close(read_fd);
                libc::close(write_fd);
            }
            return Err(ControlError::Guardian(e));
        }
    };
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
    s.installed = Some(Installed {
        read_fd,
        write_fd,
        previous,
        thread: Some(thread),
    });
    Ok(())
}

/// The watcher thread: waits for a signal (or the end of the pipe), runs the clean-ups
/// and dies of the signal.
fn run_on_signal(read_fd: libc::c_int) {
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
        return; // end of file: nothing needs the handlers any more
    }
    // The hooks stay taken: the process is about to die.
    let hooks = std::mem::take(&mut state().hooks);
    for (_, hook) in hooks {
        match hook {
            Hook::Once(f) => f(),
            Hook::Always(f) => f(),
        }
    }
    let sig = byte as libc::c_int;
    // SAFETY: default action back, then the signal again, unblocked.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        // Not reached for the signals watched; be sure anyway.
        std::thread::sleep(std::time::Duration::from_secs(1));
        libc::_exit(128 + sig);
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let installed = {
            let mut s = state();
            s.hooks.retain(|(id, _)| *id != self.id);
            s.users = s.users.saturating_sub(1);
            if s.users == 0 {
                s.installed.take()
            } else {
                None
            }
        };
        let Some(mut i) = installed else { return };
        // SAFETY: restoring actions saved above and closing our own descriptors.
        unsafe {
            for (sig, old) in &i.previous {
                libc::sigaction(*sig, old, std::ptr::null_mut());
            }
            WRITE_FD.store(-1, Ordering::SeqCst);
            libc::close(i.write_fd);
        }
        if let Some(t) = i.thread.take() {
            let _ = t.join();
        }
        // SAFETY: our own descriptor, no longer read.
        unsafe { libc::close(i.read_fd) };
    }
}
