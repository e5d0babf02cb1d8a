//! `condvar-signal` and `condvar-broadcast` [paper 002 s6.3, Figures 12-14]: waking one
//! thread that waits on a `pthread_cond_t`.
//!
//! Per event the *signaller* (placement CPU 0) times its `pthread_cond_signal` or
//! `pthread_cond_broadcast` call (`call_ns`) and the *waiter* (CPU 1) takes a timestamp
//! as soon as its `pthread_cond_wait` returns, giving the time from the start of the
//! call to the waiter running again (`wake_ns`, the value). With one waiter both calls
//! wake the same thread; the paper measured both and found them nearly equal.
//!
//! Method, so that no wake-up is lost and the waiter really waits:
//!
//! 1. The waiter locks the mutex, publishes "waiting for event k" and calls
//!    `pthread_cond_wait` in the usual predicate loop (`while pred != k`).
//! 2. The signaller sees the flag, then locks the mutex. It can only get the mutex once
//!    the waiter has released it inside `pthread_cond_wait`, i.e. once the waiter is
//!    registered on the condition variable, so the signal cannot be lost. It sets the
//!    predicate to k and unlocks (outside the timed region, so the wake time holds no
//!    mutex hand-off of the signaller's making).
//! 3. It polls the waiter's `/proc/self/task/TID/stat` until the state reads `S`, i.e. the
//!    waiter sleeps in `futex_wait` rather than still being on its way there (events
//!    where this is not seen within 20 ms are counted in `unconfirmed_sleeps`).
//! 4. Timestamp, signal (or broadcast), timestamp. The waiter wakes, re-acquires the
//!    uncontended mutex inside `pthread_cond_wait`, and timestamps on return.
//!
//! A waiter that returns from `pthread_cond_wait` without the predicate set (a spurious
//! wake-up) waits again; such returns are counted in `spurious_wakeups`.
//!
//! Placements: as `mutex-handoff` (two CPUs, or `os` unpinned; one CPU is refused).

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use smtlab_model::BenchInfo;

use super::mutex::{Events, HandoffInstance};
use super::pthread::{PCond, PMutex};
use super::{
    Rendezvous, TaskState, bench_info, clock_cost_ns, confirm_sleeping, events_from, events_param,
    interval_ns, now_ns, pin_and_arrive, run_pair, this_cpu, wait_failed, wait_until,
};
use crate::{BenchContext, BenchError, Benchmark, Instance};
use smtlab_placement::pin::gettid;

/// `condvar-signal`, or `condvar-broadcast` when `broadcast`.
pub struct CondvarWake {
    pub broadcast: bool,
}

impl CondvarWake {
    fn name(&self) -> &'static str {
        if self.broadcast {
            "condvar-broadcast"
        } else {
            "condvar-signal"
        }
    }
}

impl Benchmark for CondvarWake {
    fn info(&self) -> BenchInfo {
        let call = if self.broadcast {
            "pthread_cond_broadcast"
        } else {
            "pthread_cond_signal"
        };
        bench_info(
            self.name(),
            &format!(
                "Condition variable wake-up with one waiter: mean ns from the start of \
                 {call} (placement CPU 0) until the waiter (CPU 1) returns from \
                 pthread_cond_wait; the call time is a metric, both kept per event. The \
                 waiter is confirmed asleep (/proc state S) before each call. Needs 2 \
                 CPUs, or the os placement (unpinned)."
            ),
            "paper 002 s6.3",
            vec![events_param()],
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let events = events_from(ctx.params)?;
        let cpus = super::mutex::two_thread_cpus(self.name(), ctx, "signaller", "waiter")?;
        let (bench, broadcast) = (self.name(), self.broadcast);
        Ok(Box::new(HandoffInstance {
            events,
            clock_ns: clock_cost_ns(),
            run: move |n| run_condvar(bench, broadcast, cpus, n),
        }))
    }
}

/// State shared by signaller and waiter; event numbers are 1-based, each counter on its
/// own cache line.
struct Shared {
    bench: &'static str,
    mutex: PMutex,
    cond: PCond,
    /// Waiter holds (or held) the mutex and waits for event k.
    waiting: CachePadded<AtomicU64>,
    /// The predicate: event k has been signalled. Written under the mutex.
    pred: CachePadded<AtomicU64>,
    /// Waiter has its timestamp for event k in `wake_ts`.
    done: CachePadded<AtomicU64>,
    wake_ts: CachePadded<AtomicU64>,
    spurious: AtomicU64,
    waiter_tid: AtomicI32,
    start: Rendezvous,
}

fn run_condvar(
    bench: &'static str,
    broadcast: bool,
    cpus: [Option<u32>; 2],
    n: u64,
) -> Result<Events, BenchError> {
    let io = |what: &str, source| BenchError::io(bench, what, source);
    let sh = Shared {
        bench,
        mutex: PMutex::new().map_err(|e| io("pthread_mutex_init", e))?,
        cond: PCond::new().map_err(|e| io("pthread_cond_init", e))?,
        waiting: CachePadded::new(AtomicU64::new(0)),
        pred: CachePadded::new(AtomicU64::new(0)),
        done: CachePadded::new(AtomicU64::new(0)),
        wake_ts: CachePadded::new(AtomicU64::new(0)),
        spurious: AtomicU64::new(0),
        waiter_tid: AtomicI32::new(0),
        start: Rendezvous::new(2),
    };
    let sh = &sh;
    let (signaller, waiter) = run_pair(
        bench,
        &sh.start,
        ["signaller", "waiter"],
        move || signaller(sh, broadcast, cpus[0], n),
        move || waiter(sh, cpus[1], n),
    )?;
    Ok(Events {
        call: (smtlab_model::metrics::threads::CALL_NS, signaller.0),
        wake_ns: signaller.1,
        unconfirmed: signaller.2,
        spurious: Some(sh.spurious.load(Ordering::Relaxed)),
        cpus: [signaller.3, waiter],
    })
}

type SignallerOut = (Vec<f64>, Vec<f64>, u64, u32);

fn signaller(
    sh: &Shared,
    broadcast: bool,
    cpu: Option<u32>,
    n: u64,
) -> Result<SignallerOut, Option<BenchError>> {
    pin_and_arrive(sh.bench, cpu, &sh.start)?;
    let abort = sh.start.flag();
    let fail = |what: &str, e| {
        sh.start.abort();
        // A waiter inside pthread_cond_wait only notices the abort when woken.
        sh.mutex.lock();
        sh.mutex.unlock();
        sh.cond.broadcast();
        wait_failed(sh.bench, what, e)
    };
    let mut state = TaskState::open(sh.waiter_tid.load(Ordering::Acquire)).ok();
    let cap = usize::try_from(n).unwrap_or(usize::MAX).min(1 << 24);
    let mut call_ns = Vec::with_capacity(cap);
    let mut wake_ns = Vec::with_capacity(cap);
    let mut unconfirmed = 0;
    for k in 1..=n {
        wait_until(abort, || sh.waiting.load(Ordering::Acquire) == k)
            .map_err(|e| fail("the waiter's wait", e))?;
        // Getting the mutex proves the waiter released it inside pthread_cond_wait.
        sh.mutex.lock();
        sh.pred.store(k, Ordering::Release);
        sh.mutex.unlock();
        if !confirm_sleeping(&mut state) {
            unconfirmed += 1;
        }
        let t0 = now_ns();
        if broadcast {
            sh.cond.broadcast();
        } else {
            sh.cond.signal();
        }
        let t1 = now_ns();
        wait_until(abort, || sh.done.load(Ordering::Acquire) == k)
            .map_err(|e| fail("the waiter's wake-up", e))?;
        let woke = sh.wake_ts.load(Ordering::Relaxed);
        call_ns.push(interval_ns(t0, t1));
        wake_ns.push(interval_ns(t0, woke));
    }
    Ok((call_ns, wake_ns, unconfirmed, this_cpu()))
}

fn waiter(sh: &Shared, cpu: Option<u32>, n: u64) -> Result<u32, Option<BenchError>> {
    sh.waiter_tid.store(gettid(), Ordering::Release);
    pin_and_arrive(sh.bench, cpu, &sh.start)?;
    let abort = sh.start.flag();
    for k in 1..=n {
        sh.mutex.lock();
        sh.waiting.store(k, Ordering::Release);
        let mut woke = 0;
        let mut returns = 0u64;
        while sh.pred.load(Ordering::Acquire) != k && !abort.load(Ordering::Relaxed) {
            sh.cond.wait(&sh.mutex);
            woke = now_ns();
            returns += 1;
        }
        sh.mutex.unlock();
        if abort.load(Ordering::Relaxed) {
            return Err(None);
        }
        if returns > 1 {
            sh.spurious.fetch_add(returns - 1, Ordering::Relaxed);
        }
        sh.wake_ts.store(woke, Ordering::Relaxed);
        sh.done.store(k, Ordering::Release);
    }
    Ok(this_cpu())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::testutil::{prepare, two_cpus};

    #[test]
    fn signal_and_broadcast_give_call_and_wake_times_per_event() {
        let Some(cpus) = two_cpus() else { return };
        for bench in [
            CondvarWake { broadcast: false },
            CondvarWake { broadcast: true },
        ] {
            let mut inst = prepare(&bench, &[("events", "20")], &cpus).unwrap();
            assert_eq!(inst.fixed_iterations(), Some(20));
            let s = inst.sample(20).unwrap();
            let name = bench.name();
            assert_eq!(s.cpus, cpus.to_vec(), "{name}");
            for key in ["call_ns", "wake_ns"] {
                let v = &s.series[key];
                assert_eq!(v.len(), 20, "{name} {key}");
                assert!(
                    v.iter().all(|x| x.is_finite() && *x > 0.0),
                    "{name} {key}: {v:?}"
                );
            }
            assert!(
                s.metrics["wake_ns_mean"] > s.metrics["clock_read_ns"],
                "{name}"
            );
            assert!(s.elapsed_ns > s.overhead_ns);
        }
    }

    #[test]
    fn one_cpu_is_refused_with_a_clear_message() {
        let Some([a, _]) = two_cpus() else { return };
        let e = prepare(&CondvarWake { broadcast: false }, &[], &[a])
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("condvar-signal: needs 2 CPUs"), "{e}");
    }
}
