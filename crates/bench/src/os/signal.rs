//! Signal handler installation and overhead (lmbench `lat_sig install` / `catch`).
//!
//! * `sig-install`: one `sigaction(SIGUSR1)` per iteration, installing our action (handler,
//!   empty mask, no flags) and fetching the old one, as lmbench does. The action is built
//!   once before the timed loop: zeroing the whole `struct sigaction` on every call read
//!   about 10 ns (9%) above lmbench's `lat_sig install`, which only sets three fields.
//! * `sig-handler`: the cost of having a signal delivered and handled: the thread sends
//!   SIGUSR1 to itself, the kernel delivers it on the way back from that system call, a
//!   handler runs (it counts the signal) and `sigreturn` resumes the loop. Like lmbench,
//!   the cost of *sending* is subtracted: each sample also times the same number of
//!   sends of signal 0 (permission and target checks, nothing delivered) and reports that
//!   time as [`RawSample::overhead_ns`], so the value is delivery + handler + return, the
//!   quantity paper 001 calls "signal handler overhead". The metrics `send_ns` and
//!   `send_and_catch_ns` give both raw figures per signal.
//!
//! lmbench sends with `kill(getpid(), ...)`. In a multithreaded process the kernel may
//! deliver a process-directed signal to any thread that does not block it, so we use
//! `tgkill` to the measuring thread itself, which is what `kill` amounts to in lmbench's
//! single-threaded process. The handler counts in a thread-local counter and the count is
//! checked after each sample: every signal sent must have been caught.
//!
//! SIGUSR1's disposition is process-wide. Instances share one installation: the first
//! one live saves the previous action and installs ours, the last one restores it, so
//! the two benchmarks may run at once (tests do) without either ever leaving SIGUSR1 at
//! its default action, which would terminate the process.

use std::cell::Cell;
use std::sync::Mutex;

use super::{Cpus, LoopCost, PinGuard, info, last_os_error, run_timed, time_loop};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_model::BenchInfo;
use smtlab_placement::pin;

thread_local! {
    /// Signals caught on this thread. Const-initialised and without a destructor, so the
    /// handler's access is a plain TLS access (async-signal-safe).
    static CAUGHT: Cell<u64> = const { Cell::new(0) };
}

#[cfg(test)]
thread_local! {
    /// How often this thread built the action, so a test can see it is not rebuilt per
    /// timed call.
    static ACTIONS_BUILT: Cell<u64> = const { Cell::new(0) };
}

extern "C" fn on_sigusr1(_signal: libc::c_int) {
    CAUGHT.with(|c| c.set(c.get().wrapping_add(1)));
}

/// The action both benchmarks install: our handler, empty mask, no flags (lmbench's).
fn our_action() -> libc::sigaction {
    #[cfg(test)]
    ACTIONS_BUILT.with(|n| n.set(n.get() + 1));
    // SAFETY: sigaction is plain data; all zeroes is valid.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_sigusr1 as *const () as libc::sighandler_t;
    // SAFETY: a valid sigset_t to clear.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    sa.sa_flags = 0;
    sa
}

/// Live users of our SIGUSR1 handler and the action it replaced.
static SIGUSR1_USERS: Mutex<(usize, Option<libc::sigaction>)> = Mutex::new((0, None));

/// Keeps our SIGUSR1 handler installed while alive.
struct HandlerGuard;

impl HandlerGuard {
    fn acquire(bench: &str) -> Result<HandlerGuard, BenchError> {
        let mut users = SIGUSR1_USERS.lock().unwrap_or_else(|e| e.into_inner());
        if users.0 == 0 {
            let sa = our_action();
            // SAFETY: sigaction is plain data; all zeroes is valid.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: valid new and old action pointers.
            if unsafe { libc::sigaction(libc::SIGUSR1, &sa, &mut old) } != 0 {
                return Err(last_os_error(bench, "install a SIGUSR1 handler"));
            }
            users.1 = Some(old);
        }
        users.0 += 1;
        Ok(HandlerGuard)
    }
}

impl Drop for HandlerGuard {
    fn drop(&mut self) {
        let mut users = SIGUSR1_USERS.lock().unwrap_or_else(|e| e.into_inner());
        users.0 -= 1;
        if users.0 == 0
            && let Some(old) = users.1.take()
        {
            // SAFETY: restoring the action saved when the first user installed ours.
            unsafe { libc::sigaction(libc::SIGUSR1, &old, std::ptr::null_mut()) };
        }
    }
}

/// Unblocks SIGUSR1 in the calling thread until dropped, then restores the thread's
/// signal mask: a blocked signal would stay pending instead of being delivered.
struct Unblocked {
    old: libc::sigset_t,
}

impl Unblocked {
    fn new(bench: &str) -> Result<Unblocked, BenchError> {
        // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: sigset_t is plain data, and pthread_sigmask overwrites it before it is read.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid sigset pointers.
        let r = unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR1);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, &mut old)
        };
        if r != 0 {
            return Err(BenchError::io(
                bench,
                "unblock SIGUSR1",
                std::io::Error::from_raw_os_error(r),
            ));
        }
        Ok(Unblocked { old })
    }
}

impl Drop for Unblocked {
    fn drop(&mut self) {
        // SAFETY: restoring the mask saved in `new` on the same thread.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

smtlab_model::named_enum! {
    enum Kind {
        Install = "sig-install",
        Handler = "sig-handler",
    }
}

pub(super) fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    crate::boxed(Kind::ALL.map(|kind| Signal { kind }))
}

struct Signal {
    kind: Kind,
}

impl Benchmark for Signal {
    fn info(&self) -> BenchInfo {
        match self.kind {
            Kind::Install => info(
                "sig-install",
                "sigaction(2) installing a SIGUSR1 handler",
                "lmbench lat_sig install",
                vec![],
            ),
            Kind::Handler => info(
                "sig-handler",
                "SIGUSR1 sent to the thread itself and caught by a handler, minus the cost \
                 of sending (lmbench's signal handler overhead)",
                "lmbench lat_sig catch",
                vec![],
            ),
        }
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        Ok(Box::new(SignalInstance {
            kind: self.kind,
            cpu: Cpus::of(ctx.placement).parent,
            _handler: HandlerGuard::acquire(self.kind.name())?,
        }))
    }
}

struct SignalInstance {
    kind: Kind,
    cpu: Option<u32>,
    _handler: HandlerGuard,
}

impl Instance for SignalInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let name = self.kind.name();
        match self.kind {
            Kind::Install => {
                // SAFETY: sigaction is plain data; all zeroes is valid.
                let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
                let sa = our_action();
                time_loop(self.cpu, iterations, || {
                    // SAFETY: valid new and old action pointers; the action installed
                    // is the one the HandlerGuard keeps installed anyway.
                    if unsafe { libc::sigaction(libc::SIGUSR1, &sa, &mut old) } != 0 {
                        return Err(last_os_error(name, "sigaction(SIGUSR1)"));
                    }
                    Ok(())
                })
            }
            Kind::Handler => self.catch(iterations),
        }
    }
}

impl SignalInstance {
    fn catch(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let name = self.kind.name();
        let _pin = PinGuard::pin(self.cpu)?;
        let _unblocked = Unblocked::new(name)?;
        // SAFETY: getpid takes no arguments and cannot fail.
        let (pid, tid) = (unsafe { libc::getpid() }, pin::gettid());
        let send = |signal: libc::c_int| {
            // SAFETY: signalling our own thread; SIGUSR1 has our handler installed and
            // is unblocked, signal 0 only checks.
            let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal) };
            if r != 0 {
                return Err(last_os_error(name, format!("tgkill(self, {signal})")));
            }
            Ok(())
        };

        let sent = run_timed(iterations, || send(0))?;
        let before = CAUGHT.with(Cell::get);
        let caught = run_timed(iterations, || send(libc::SIGUSR1))?;
        let after = CAUGHT.with(Cell::get);
        let count = after.wrapping_sub(before);
        if count != iterations {
            return Err(BenchError::check(
                name,
                format!(
                    "sent {iterations} SIGUSR1 to this thread but the handler ran {count} times"
                ),
            ));
        }

        let per = |ns: u64| {
            if iterations == 0 {
                0.0
            } else {
                ns as f64 / iterations as f64
            }
        };
        let mut s = RawSample {
            elapsed_ns: caught.elapsed_ns,
            work: iterations as f64,
            // Both loops pay the same clock reads and loop turns, so subtracting the
            // send loop's whole time removes those too; lmbench clamps at zero likewise.
            overhead_ns: sent.elapsed_ns.min(caught.elapsed_ns),
            overhead_basis: Some(LoopCost::get().basis()),
            cpu_ns: Some(caught.cpu_ns),
            cpus: pin::current_cpu().into_iter().collect(),
            ..RawSample::default()
        };
        let loop_ns = LoopCost::get().overhead_ns(iterations);
        s.metrics.insert(
            "send_ns".into(),
            per(sent.elapsed_ns.saturating_sub(loop_ns)),
        );
        s.metrics.insert(
            "send_and_catch_ns".into(),
            per(caught.elapsed_ns.saturating_sub(loop_ns)),
        );
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::testutil;

    #[test]
    fn handler_catches_every_signal_and_sending_is_subtracted() {
        let b = Signal {
            kind: Kind::Handler,
        };
        let mut inst = testutil::with_ctx(&b.info(), &[0], |ctx| b.prepare(ctx).unwrap());
        let s = inst.sample(200).unwrap();
        assert_eq!(s.work, 200.0);
        assert!(s.overhead_ns > 0 && s.overhead_ns <= s.elapsed_ns, "{s:?}");
        assert!(
            s.metrics["send_and_catch_ns"] >= s.metrics["send_ns"],
            "{s:?}"
        );
    }

    #[test]
    fn install_builds_its_action_once_per_sample_not_per_call() {
        let b = Signal {
            kind: Kind::Install,
        };
        let mut inst = testutil::with_ctx(&b.info(), &[0], |ctx| b.prepare(ctx).unwrap());
        let before = ACTIONS_BUILT.with(Cell::get);
        let s = inst.sample(500).unwrap();
        let built = ACTIONS_BUILT.with(Cell::get) - before;
        assert_eq!(s.work, 500.0);
        assert!(
            built <= 1,
            "the action was built {built} times for 500 calls"
        );
    }

    #[test]
    fn sending_costs_go_with_the_loop_costs_they_were_measured_with() {
        let b = Signal {
            kind: Kind::Handler,
        };
        let mut inst = testutil::with_ctx(&b.info(), &[0], |ctx| b.prepare(ctx).unwrap());
        let s = inst.sample(50).unwrap();
        assert_eq!(s.overhead_basis, Some(LoopCost::get().basis()));
    }

    #[test]
    fn previous_action_is_restored_when_the_last_user_drops() {
        // Two users at once, as when both benchmarks are prepared in parallel tests.
        let a = HandlerGuard::acquire("t").unwrap();
        let b = HandlerGuard::acquire("t").unwrap();
        drop(a);
        // SAFETY: reading the current action only.
        let current = unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut cur);
            cur.sa_sigaction
        };
        assert_eq!(current, on_sigusr1 as *const () as libc::sighandler_t);
        drop(b);
        let users = SIGUSR1_USERS.lock().unwrap();
        // Other tests may hold it too; only when none does must the handler be gone.
        if users.0 == 0 {
            // SAFETY: reading the current action only.
            let current = unsafe {
                let mut cur: libc::sigaction = std::mem::zeroed();
                libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut cur);
                cur.sa_sigaction
            };
            assert_ne!(current, on_sigusr1 as *const () as libc::sighandler_t);
        }
    }
}
