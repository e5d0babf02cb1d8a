//! Mutex costs [paper 002 s6.2, Figures 10-11].
//!
//! * `mutex-uncontended`: one thread (placement CPU 0) locks and unlocks a default
//!   `pthread_mutex_t` in a loop; the value is ns per lock+unlock pair. On Linux both
//!   calls stay in user space (one atomic each), so this is the futex fast path.
//! * `mutex-handoff`: a contended hand-off between two threads. The *holder* (placement
//!   CPU 0) holds the mutex while the *waiter* (CPU 1) blocks in `pthread_mutex_lock`;
//!   per event the holder times its `pthread_mutex_unlock` call (`unlock_ns`) and the
//!   waiter takes a timestamp as soon as its lock call returns, giving the time from the
//!   start of the unlock to the waiter running (`wake_ns`, the value).
//!
//! Making sure the waiter really sleeps. Before each unlock the waiter announces that it
//! is about to call lock, and the holder then polls the waiter's scheduler state in
//! `/proc/self/task/TID/stat` until it reads `S` (asleep in `futex_wait`): between the
//! announcement and the lock call nothing else can block. Otherwise the waiter could
//! still be on its way into the kernel, find the mutex free, and the "wake-up" would be
//! a few hundred nanoseconds of user-space work. Events where the sleep could not be
//! confirmed within 20 ms (or /proc is unreadable) are still measured and counted in
//! the `unconfirmed_sleeps` metric.
//!
//! Placements. The hand-off needs two CPUs: on a one-CPU placement it would measure the
//! scheduler's choice of when to switch threads, not a hand-off, so it is refused with an
//! error that says so. With more CPUs only the first two are used. With `os` the two
//! threads run unpinned (as in the paper, where the placement was "unknown").

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use smtlab_model::BenchInfo;

use super::pthread::PMutex;
use super::{
    Rendezvous, TaskState, bench_info, clock_cost_ns, confirm_sleeping, empty_loop_ns,
    event_sample, events_from, events_param, interval_ns, now_ns, pin_and_arrive, run_pair,
    spawn_error, this_cpu, wait_failed, wait_until,
};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample, sampled};
use smtlab_placement::pin::gettid;

const UNCONTENDED: &str = "mutex-uncontended";
const HANDOFF: &str = "mutex-handoff";

/// The `mutex-uncontended` benchmark.
pub struct MutexUncontended;

impl Benchmark for MutexUncontended {
    fn info(&self) -> BenchInfo {
        bench_info(
            UNCONTENDED,
            "pthread_mutex_lock + pthread_mutex_unlock of a default mutex by one thread \
             (placement CPU 0), ns per pair: the user-space fast path.",
            "paper 002 s6.2",
            vec![],
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let (cpu, clock_ns, loop_ns) = (
            ctx.placement.cpu_for_thread(0),
            clock_cost_ns(),
            empty_loop_ns(),
        );
        Ok(sampled(move |iterations| {
            let n = iterations.max(1);
            let (elapsed, ran_on) = std::thread::scope(|s| {
                let h = std::thread::Builder::new()
                    .name("smtlab-mutex".into())
                    .spawn_scoped(s, move || lock_loop(cpu, n))
                    .map_err(|e| spawn_error(UNCONTENDED, "locking", e))?;
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::check(
                        UNCONTENDED,
                        "the locking thread panicked",
                    ))
                })
            })?;
            let mut s = RawSample {
                elapsed_ns: elapsed,
                work: n as f64,
                overhead_ns: (clock_ns + loop_ns * n as f64).round() as u64,
                cpus: vec![ran_on],
                ..RawSample::default()
            };
            s.metrics.insert("clock_read_ns".into(), clock_ns);
            s.metrics.insert("empty_loop_ns".into(), loop_ns);
            Ok(s)
        }))
    }
}

fn lock_loop(cpu: Option<u32>, n: u64) -> Result<(u64, u32), BenchError> {
    super::pin(cpu)?;
    let m = PMutex::new()
        .map_err(|source| BenchError::io(UNCONTENDED, "pthread_mutex_init", source))?;
    let mut count = 0u64;
    let t0 = now_ns();
    for _ in 0..n {
        m.lock();
        // The counter is the critical section; black_box keeps the n increments from
        // being folded into one addition outside the loop.
        count = std::hint::black_box(count) + 1;
        m.unlock();
    }
    let t1 = now_ns();
    if count != n {
        return Err(BenchError::check(
            UNCONTENDED,
            format!("the counter reached {count}, expected {n}"),
        ));
    }
    Ok((t1.saturating_sub(t0), this_cpu()))
}

/// The `mutex-handoff` benchmark.
pub struct MutexHandoff;

impl Benchmark for MutexHandoff {
    fn info(&self) -> BenchInfo {
        bench_info(
            HANDOFF,
            "Contended pthread mutex hand-off: mean ns from the start of unlock in the \
             holder (placement CPU 0) until the waiter blocked in lock (CPU 1) runs; \
             the unlock call time is a metric, both kept per event. The waiter is \
             confirmed asleep (/proc state S) before each unlock. Needs 2 CPUs, or \
             the os placement (unpinned).",
            "paper 002 s6.2",
            vec![events_param()],
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let events = events_from(ctx.params)?;
        let cpus = two_thread_cpus(HANDOFF, ctx, "holder", "waiter")?;
        Ok(Box::new(HandoffInstance {
            events,
            clock_ns: clock_cost_ns(),
            run: move |n| run_handoff(cpus, n),
        }))
    }
}

/// CPUs of the two threads of a hand-off benchmark: the placement's first two, or none
/// for `os`. A one-CPU placement is refused (see the module comments).
pub(super) fn two_thread_cpus(
    bench: &str,
    ctx: &BenchContext<'_>,
    first: &str,
    second: &str,
) -> Result<[Option<u32>; 2], BenchError> {
    match ctx.placement.width() {
        0 => Ok([None, None]),
        1 => Err(BenchError::unsupported(
            bench,
            format!(
                "needs 2 CPUs (one for the {first}, one for the {second}) but placement {} \
                 has only CPU {}; use e.g. 2c1t, 1c2t or os (unpinned)",
                ctx.placement.name, ctx.placement.cpus[0]
            ),
        )),
        _ => Ok([
            ctx.placement.cpu_for_thread(0),
            ctx.placement.cpu_for_thread(1),
        ]),
    }
}

/// A prepared hand-off benchmark (this one, `condvar-signal`, `condvar-broadcast`):
/// `run` measures `n` events.
pub(super) struct HandoffInstance<F> {
    pub events: u64,
    pub clock_ns: f64,
    pub run: F,
}

impl<F: FnMut(u64) -> Result<Events, BenchError> + Send> Instance for HandoffInstance<F> {
    fn fixed_iterations(&self) -> Option<u64> {
        // Each event has untimed set-up (confirming the waiter sleeps) that calibration
        // on elapsed time cannot see; a fixed count keeps samples near their target.
        Some(self.events)
    }

    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let n = iterations.max(1);
        let ev = (self.run)(n)?;
        let mut s = event_sample(
            n,
            self.clock_ns,
            ev.cpus.to_vec(),
            ev.call,
            (smtlab_model::metrics::threads::WAKE_NS, ev.wake_ns),
        );
        s.metrics
            .insert("unconfirmed_sleeps".into(), ev.unconfirmed as f64);
        if let Some(spurious) = ev.spurious {
            s.metrics.insert("spurious_wakeups".into(), spurious as f64);
        }
        Ok(s)
    }
}

/// State shared by holder and waiter; the counters hold the number of the event
/// (1-based) each step has reached, each on its own cache line so that polling one does
/// not disturb the others.
struct Shared {
    mutex: PMutex,
    /// Holder holds the mutex for event k: the waiter may go and block.
    go: CachePadded<AtomicU64>,
    /// Waiter is about to call lock for event k.
    about: CachePadded<AtomicU64>,
    /// Waiter has its timestamp for event k in `wake_ts`.
    done: CachePadded<AtomicU64>,
    wake_ts: CachePadded<AtomicU64>,
    waiter_tid: AtomicI32,
    start: Rendezvous,
}

/// What a sample of a hand-off benchmark measured.
pub(super) struct Events {
    /// The timed call's metric name and its time per event.
    pub call: (&'static str, Vec<f64>),
    pub wake_ns: Vec<f64>,
    pub unconfirmed: u64,
    /// Returns from the wait without the event (condition variables only).
    pub spurious: Option<u64>,
    pub cpus: [u32; 2],
}

fn run_handoff(cpus: [Option<u32>; 2], n: u64) -> Result<Events, BenchError> {
    let sh = Shared {
        mutex: PMutex::new()
            .map_err(|source| BenchError::io(HANDOFF, "pthread_mutex_init", source))?,
        go: CachePadded::new(AtomicU64::new(0)),
        about: CachePadded::new(AtomicU64::new(0)),
        done: CachePadded::new(AtomicU64::new(0)),
        wake_ts: CachePadded::new(AtomicU64::new(0)),
        waiter_tid: AtomicI32::new(0),
        start: Rendezvous::new(2),
    };
    let sh = &sh;
    let (holder, waiter) = run_pair(
        HANDOFF,
        &sh.start,
        ["holder", "waiter"],
        move || holder(sh, cpus[0], n),
        move || waiter(sh, cpus[1], n),
    )?;
    Ok(Events {
        call: (smtlab_model::metrics::threads::UNLOCK_NS, holder.0),
        wake_ns: holder.1,
        unconfirmed: holder.2,
        spurious: None,
        cpus: [holder.3, waiter],
    })
}

type HolderOut = (Vec<f64>, Vec<f64>, u64, u32);

fn holder(sh: &Shared, cpu: Option<u32>, n: u64) -> Result<HolderOut, Option<BenchError>> {
    pin_and_arrive(HANDOFF, cpu, &sh.start)?;
    let abort = sh.start.flag();
    let fail = |what: &str, e| {
        sh.start.abort();
        wait_failed(HANDOFF, what, e)
    };
    let mut state = TaskState::open(sh.waiter_tid.load(Ordering::Acquire)).ok();
    let cap = usize::try_from(n).unwrap_or(usize::MAX).min(1 << 24);
    let mut unlock_ns = Vec::with_capacity(cap);
    let mut wake_ns = Vec::with_capacity(cap);
    let mut unconfirmed = 0;
    for k in 1..=n {
        sh.mutex.lock();
        sh.go.store(k, Ordering::Release);
        if let Err(e) = wait_until(abort, || sh.about.load(Ordering::Acquire) == k) {
            sh.mutex.unlock();
            return Err(fail("the waiter's lock call", e));
        }
        if !confirm_sleeping(&mut state) {
            unconfirmed += 1;
        }
        let t0 = now_ns();
        sh.mutex.unlock();
        let t1 = now_ns();
        wait_until(abort, || sh.done.load(Ordering::Acquire) == k)
            .map_err(|e| fail("the waiter's wake-up", e))?;
        let woke = sh.wake_ts.load(Ordering::Relaxed);
        unlock_ns.push(interval_ns(t0, t1));
        wake_ns.push(interval_ns(t0, woke));
    }
    Ok((unlock_ns, wake_ns, unconfirmed, this_cpu()))
}

fn waiter(sh: &Shared, cpu: Option<u32>, n: u64) -> Result<u32, Option<BenchError>> {
    sh.waiter_tid.store(gettid(), Ordering::Release);
    pin_and_arrive(HANDOFF, cpu, &sh.start)?;
    let abort = sh.start.flag();
    for k in 1..=n {
        wait_until(abort, || sh.go.load(Ordering::Acquire) == k).map_err(|e| {
            sh.start.abort();
            wait_failed(HANDOFF, "the holder's next event", e)
        })?;
        sh.about.store(k, Ordering::Release);
        sh.mutex.lock();
        let t = now_ns();
        sh.mutex.unlock();
        sh.wake_ts.store(t, Ordering::Relaxed);
        sh.done.store(k, Ordering::Release);
        if abort.load(Ordering::Relaxed) {
            return Err(None);
        }
    }
    Ok(this_cpu())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::testutil::{prepare, two_cpus};

    #[test]
    fn uncontended_pairs_cost_a_finite_positive_time() {
        let Some([a, b]) = two_cpus() else { return };
        let mut inst = prepare(&MutexUncontended, &[], &[a, b]).unwrap();
        let s = inst.sample(1000).unwrap();
        assert_eq!(s.work, 1000.0);
        assert_eq!(s.cpus, vec![a]);
        assert!(s.elapsed_ns > 0);
        let per = s.elapsed_ns as f64 / s.work;
        assert!(per.is_finite() && per > 0.0 && per < 100_000.0, "{per}");
    }

    #[test]
    fn handoff_gives_one_unlock_and_one_wake_time_per_event() {
        let Some(cpus) = two_cpus() else { return };
        let mut inst = prepare(&MutexHandoff, &[("events", "20")], &cpus).unwrap();
        assert_eq!(inst.fixed_iterations(), Some(20));
        let s = inst.sample(20).unwrap();
        assert_eq!(s.cpus, cpus.to_vec());
        assert_eq!(s.work, 20.0);
        for key in ["unlock_ns", "wake_ns"] {
            let v = &s.series[key];
            assert_eq!(v.len(), 20, "{key}");
            assert!(v.iter().all(|x| x.is_finite() && *x > 0.0), "{key}: {v:?}");
        }
        assert!(s.metrics["wake_ns_mean"] > 0.0);
        assert!(s.elapsed_ns > s.overhead_ns);
    }

    #[test]
    fn handoff_refuses_one_cpu_with_a_clear_message() {
        let Some([a, _]) = two_cpus() else { return };
        let e = prepare(&MutexHandoff, &[], &[a]).err().unwrap().to_string();
        assert!(e.starts_with("mutex-handoff: needs 2 CPUs"), "{e}");
    }

    #[test]
    fn handoff_runs_unpinned_under_os() {
        let mut inst = prepare(&MutexHandoff, &[], &[]).unwrap();
        let s = inst.sample(5).unwrap();
        assert_eq!(s.series["wake_ns"].len(), 5);
        assert_eq!(s.cpus.len(), 2);
    }
}
