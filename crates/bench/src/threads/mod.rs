//! Thread primitives [paper 002 s6]: what creating a thread, handing a mutex over,
//! waking a condition-variable waiter, contending on one atomic word and bouncing a
//! cache line between two CPUs cost on this machine, under a given placement.
//!
//! | benchmark           | value                                   | per-event series            |
//! |---------------------|-----------------------------------------|-----------------------------|
//! | `pthread-create`    | ns from `pthread_create` to child start | `create_return_ns`, `thread_start_ns` |
//! | `mutex-uncontended` | ns per lock+unlock pair                 |                             |
//! | `mutex-handoff`     | ns from unlock start to waiter running  | `unlock_ns`, `wake_ns`      |
//! | `condvar-signal`    | ns from signal start to waiter running  | `call_ns`, `wake_ns`        |
//! | `condvar-broadcast` | ns from broadcast start to waiter running | `call_ns`, `wake_ns`      |
//! | `cas-contention`    | Mops/s of successful compare-exchange   |                             |
//! | `c2c-latency`       | one-way cache-line latency, ns          |                             |
//!
//! Common rules for every module here:
//!
//! * **Clock.** Every timestamp is `CLOCK_MONOTONIC` read through `clock_gettime` (the
//!   vDSO), on every thread, so timestamps taken on different CPUs compare directly. The
//!   cost of one read is measured when an instance is prepared and reported as the
//!   `clock_read_ns` metric; an interval between two reads contains about one read's
//!   cost, which goes into [`RawSample::overhead_ns`] for the runner to subtract. Series
//!   and metrics are raw (nothing subtracted).
//! * **Threads.** Measurement threads are started per sample inside
//!   [`std::thread::scope`], so none outlives a sample. Each pins itself to its
//!   placement CPU (thread *i* to `placement.cpus[i]`) and verifies the affinity by
//!   reading it back; with the `os` placement nothing is pinned. [`RawSample::cpus`]
//!   holds the CPU each thread was running on at the end of its timed work.
//! * **No hangs.** Threads meet at a rendezvous that a failing thread (pinning refused)
//!   aborts, and every untimed wait gives up after [`WAIT_TIMEOUT`] with an error instead
//!   of hanging the run.
//! * **The runner's thread is never pinned**: a sample spawns its own pinned threads.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use smtlab_model::{BenchInfo, Direction, ParamInfo, ValueKind};

use crate::{BenchError, Benchmark, ParamError, Params, RawSample};

pub(crate) use crate::clock::{clock_cost_ns, now_ns, thread_cpu_ns};

pub mod c2c;
pub mod cas;
pub mod condvar;
pub mod create;
pub mod mutex;
mod pthread;

/// How long an untimed wait for another thread may last before the sample fails. Far
/// beyond any hand-off on a loaded machine, short enough that a broken run ends.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest `events` value accepted: 10^7 hand-offs is already minutes of work.
const MAX_EVENTS: u64 = 10_000_000;

/// The threads benchmarks of the catalog.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    vec![
        Box::new(create::PthreadCreate),
        Box::new(mutex::MutexUncontended),
        Box::new(mutex::MutexHandoff),
        Box::new(condvar::CondvarWake { broadcast: false }),
        Box::new(condvar::CondvarWake { broadcast: true }),
        Box::new(cas::CasContention),
        Box::new(c2c::C2cLatency),
    ]
}

/// Builds the catalog entry of one benchmark of this group: ns per event, lower is better
/// (`cas-contention` replaces the unit).
fn bench_info(name: &str, description: &str, origin: &str, params: Vec<ParamInfo>) -> BenchInfo {
    BenchInfo {
        name: name.into(),
        group: "threads".into(),
        unit: "ns".into(),
        direction: Direction::Lower,
        value_kind: ValueKind::TimePerOp,
        description: description.into(),
        origin: origin.into(),
        params,
        main_param: None,
        report: Default::default(),
    }
}

/// The `events` parameter of the distribution benchmarks (hand-off, condition variable).
fn events_param() -> ParamInfo {
    crate::params::declare(
        "events",
        "200",
        Some("50"),
        "hand-offs per sample; each one is timed and kept in the series \
               (paper 002 used 10^5 in total: repeat samples or raise this)",
    )
}

/// Reads and range-checks `events`.
fn events_from(params: &Params) -> Result<u64, ParamError> {
    params.get_u64_in(
        "events",
        1..=MAX_EVENTS,
        &format!("an integer from 1 to {MAX_EVENTS}"),
    )
}

/// Cost of one iteration of an empty counted loop that the optimiser cannot remove.
pub(crate) fn empty_loop_ns() -> f64 {
    const ITERS: u64 = 100_000;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = now_ns();
        for i in 0..ITERS {
            std::hint::black_box(i);
        }
        let t1 = now_ns();
        best = best.min(t1.saturating_sub(t0) as f64 / ITERS as f64);
    }
    best
}

/// Pins the calling thread (verified by reading the affinity back) unless unpinned.
fn pin(cpu: Option<u32>) -> Result<(), BenchError> {
    if let Some(cpu) = cpu {
        smtlab_placement::pin::pin_current_thread_to(cpu)?;
    }
    Ok(())
}

/// The CPU the calling thread runs on, or `u32::MAX` when the kernel does not say
/// (never the case on Linux since 2.6.19, but a bogus number beats a panic).
fn this_cpu() -> u32 {
    smtlab_placement::pin::current_cpu().unwrap_or(u32::MAX)
}

/// Why a wait for another thread ended without what it waited for.
#[derive(Debug)]
enum WaitError {
    /// Another thread failed and raised the abort flag; it reports its own error.
    Aborted,
    /// Nothing happened within [`WAIT_TIMEOUT`].
    TimedOut,
}

/// Waits until `ready()` holds. Spins first, because the other side usually answers
/// within microseconds and a spinning waiter reacts fastest; then yields so that two
/// threads sharing one CPU (the `os` placement) still make progress. Used only for
/// untimed waits.
fn wait_until(abort: &AtomicBool, mut ready: impl FnMut() -> bool) -> Result<(), WaitError> {
    const SPINS: u32 = 1 << 12;
    let mut spins = 0u32;
    let mut started: Option<Instant> = None;
    loop {
        if ready() {
            return Ok(());
        }
        if abort.load(Ordering::Relaxed) {
            return Err(WaitError::Aborted);
        }
        if spins < SPINS {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
            let t = *started.get_or_insert_with(Instant::now);
            if t.elapsed() > WAIT_TIMEOUT {
                return Err(WaitError::TimedOut);
            }
        }
    }
}

/// Turns a failed wait into the error a thread returns. `Aborted` becomes `None`: the
/// thread that aborted reports the real cause.
fn wait_failed(bench: &str, what: &str, e: WaitError) -> Option<BenchError> {
    match e {
        WaitError::Aborted => None,
        WaitError::TimedOut => Some(BenchError::check(
            bench,
            format!("{what} did not happen within {} s", WAIT_TIMEOUT.as_secs()),
        )),
    }
}

/// A start line for `n` threads that a failing thread can cancel: each thread calls
/// [`Rendezvous::arrive`] with whether its setup (pinning) succeeded; all return `Ok`
/// only when every thread arrived ready, so nobody waits forever for a thread that died.
struct Rendezvous {
    n: usize,
    arrived: AtomicUsize,
    abort: AtomicBool,
}

impl Rendezvous {
    fn new(n: usize) -> Self {
        Self {
            n,
            arrived: AtomicUsize::new(0),
            abort: AtomicBool::new(false),
        }
    }

    /// Marks this thread as arrived (`ok`) or failed (`!ok`) and waits for the others.
    fn arrive(&self, ok: bool) -> Result<(), WaitError> {
        if !ok {
            self.abort.store(true, Ordering::Relaxed);
        }
        self.arrived.fetch_add(1, Ordering::AcqRel);
        wait_until(&self.abort, || {
            self.arrived.load(Ordering::Acquire) >= self.n
        })?;
        if self.abort.load(Ordering::Relaxed) {
            return Err(WaitError::Aborted);
        }
        Ok(())
    }

    fn abort(&self) {
        self.abort.store(true, Ordering::Relaxed);
    }

    fn flag(&self) -> &AtomicBool {
        &self.abort
    }
}

/// Pins, then arrives at the rendezvous. On failure the pin error (or `None` when another
/// thread failed first) comes back for the thread to return.
fn pin_and_arrive(
    bench: &str,
    cpu: Option<u32>,
    start: &Rendezvous,
) -> Result<(), Option<BenchError>> {
    let pinned = pin(cpu);
    let arrived = start.arrive(pinned.is_ok());
    match (pinned, arrived) {
        (Err(e), _) => Err(Some(e)),
        (Ok(()), Ok(())) => Ok(()),
        (Ok(()), Err(e)) => Err(wait_failed(bench, "the start of the other threads", e)),
    }
}

/// Collects the results of a sample's threads: the first real error wins; a thread that
/// stopped only because another aborted (`Err(None)`) adds nothing.
fn first_error<T>(
    results: Vec<Result<T, Option<BenchError>>>,
    bench: &str,
) -> Result<Vec<T>, BenchError> {
    let mut out = Vec::with_capacity(results.len());
    let mut aborted = false;
    for r in results {
        match r {
            Ok(v) => out.push(v),
            Err(Some(e)) => return Err(e),
            Err(None) => aborted = true,
        }
    }
    if aborted {
        return Err(BenchError::check(
            bench,
            "a measurement thread stopped without saying why",
        ));
    }
    Ok(out)
}

/// Runs the two threads of a two-party benchmark in a scope and returns both results,
/// or the first real error. When the second thread cannot be started, the first is
/// released from the rendezvous before it is joined.
fn run_pair<A: Send, B: Send>(
    bench: &str,
    start: &Rendezvous,
    names: [&str; 2],
    first: impl FnOnce() -> Result<A, Option<BenchError>> + Send,
    second: impl FnOnce() -> Result<B, Option<BenchError>> + Send,
) -> Result<(A, B), BenchError> {
    let (a, b) = std::thread::scope(|s| {
        let ha = std::thread::Builder::new()
            .name(format!("smtlab-{}", names[0]))
            .spawn_scoped(s, first)
            .map_err(|e| spawn_error(bench, names[0], e))?;
        let hb = match std::thread::Builder::new()
            .name(format!("smtlab-{}", names[1]))
            .spawn_scoped(s, second)
        {
            Ok(h) => h,
            Err(e) => {
                start.abort();
                let _ = ha.join();
                return Err(spawn_error(bench, names[1], e));
            }
        };
        Ok((
            joined(bench, names[0], ha.join()),
            joined(bench, names[1], hb.join()),
        ))
    })?;
    match (a, b) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (Err(Some(e)), _) | (_, Err(Some(e))) => Err(e),
        _ => Err(BenchError::check(
            bench,
            "a measurement thread stopped without saying why",
        )),
    }
}

/// Maps a scoped thread's join result: a panic becomes an error naming the thread.
fn joined<T>(
    bench: &str,
    who: &str,
    r: std::thread::Result<Result<T, Option<BenchError>>>,
) -> Result<T, Option<BenchError>> {
    r.unwrap_or_else(|_| {
        Err(Some(BenchError::check(
            bench,
            format!("the {who} thread panicked"),
        )))
    })
}

/// Error for a thread that could not be started.
fn spawn_error(bench: &str, who: &str, source: io::Error) -> BenchError {
    BenchError::io(bench, format!("starting the {who} thread"), source)
}

/// Watches one thread's scheduler state through `/proc/self/task/TID/stat`, to confirm
/// that a waiter is really asleep in the kernel (state `S`) before it is woken: a waiter
/// still on its way into `futex_wait` would make the wake time look shorter than it is.
struct TaskState {
    file: File,
    buf: [u8; 1024],
}

impl TaskState {
    fn open(tid: libc::pid_t) -> io::Result<Self> {
        Ok(Self {
            file: File::open(format!("/proc/self/task/{tid}/stat"))?,
            buf: [0; 1024],
        })
    }

    /// The one-letter state (`R`, `S`, `D`, ...). Re-reading offset 0 of an open proc
    /// file regenerates it, which saves the open and close of every poll.
    fn state(&mut self) -> Option<u8> {
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        let text = &self.buf[..n];
        // The command name may itself contain ") ", so look for the last one.
        let close = text.iter().rposition(|&b| b == b')')?;
        text.get(close + 2).copied()
    }

    /// Polls until the thread sleeps, at most `budget`. False when it never did (still
    /// running, preempted, or the state unreadable).
    fn wait_sleeping(&mut self, budget: Duration) -> bool {
        let start = Instant::now();
        for polls in 0u32.. {
            match self.state() {
                Some(b'S') => return true,
                None => return false,
                Some(_) if start.elapsed() > budget => return false,
                // Entering futex_wait takes a microsecond or two: a few quick polls catch
                // it; after that, yield in case the waiter shares this CPU (`os`).
                Some(_) if polls < 8 => std::hint::spin_loop(),
                Some(_) => std::thread::yield_now(),
            }
        }
        false
    }
}

/// How long a waker polls for its waiter to fall asleep before it goes ahead anyway and
/// counts the event as unconfirmed.
const SLEEP_CONFIRM_BUDGET: Duration = Duration::from_millis(20);

/// Confirms that thread `tid` is asleep, through an optional [`TaskState`]; without
/// /proc it waits a fixed 50 µs (ample for entering `futex_wait`) and reports false.
fn confirm_sleeping(state: &mut Option<TaskState>) -> bool {
    match state {
        Some(s) => s.wait_sleeping(SLEEP_CONFIRM_BUDGET),
        None => {
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(50) {
                std::hint::spin_loop();
            }
            false
        }
    }
}

/// The mean of `xs`, 0 when empty.
fn mean(xs: &[f64]) -> f64 {
    smtlab_model::stats::mean(xs).unwrap_or(0.0)
}

/// `later - earlier` in ns as a signed float: cross-thread intervals can in principle
/// come out negative (a spurious wake-up before the signal) and are kept as measured.
fn interval_ns(earlier: u64, later: u64) -> f64 {
    later as i64 as f64 - earlier as i64 as f64
}

/// The sample of an event-latency benchmark from its two per-event series, each kept
/// whole and as its `_mean` metric: `call` (the caller's own call time) and `timed` (the
/// value, whose sum over non-negative intervals is the elapsed time).
fn event_sample(
    n: u64,
    clock_ns: f64,
    cpus: Vec<u32>,
    call: (&str, Vec<f64>),
    timed: (&str, Vec<f64>),
) -> RawSample {
    let mut s = RawSample {
        elapsed_ns: timed.1.iter().map(|&x| x.max(0.0)).sum::<f64>().round() as u64,
        work: n as f64,
        overhead_ns: (clock_ns * n as f64).round() as u64,
        cpus,
        ..RawSample::default()
    };
    s.metrics.insert("clock_read_ns".into(), clock_ns);
    for (key, series) in [call, timed] {
        s.metrics.insert(format!("{key}_mean"), mean(&series));
        s.series.insert(key.into(), series);
    }
    s
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Hand-built placements and a topology of the two CPUs the tests run on.

    use smtlab_model::{ResolvedPlacement, Topology};

    use crate::{BenchContext, Params};

    /// The first two CPUs this process may use, or `None` on a one-CPU machine (the
    /// multi-CPU tests then return early).
    pub fn two_cpus() -> Option<[u32; 2]> {
        let allowed = smtlab_placement::pin::get_affinity(0).ok()?;
        let mut it = allowed.iter();
        Some([it.next()?, it.next()?])
    }

    pub fn placement(cpus: &[u32]) -> ResolvedPlacement {
        smtlab_fixtures::build::placement_on(cpus)
    }

    /// One package whose cores each hold one of `cpus` (no SMT), like this KVM guest.
    pub fn topology(cpus: &[u32]) -> Topology {
        smtlab_fixtures::build::one_cpu_per_core(cpus)
    }

    /// Prepares `bench` with `params` on `cpus` (placement and topology built by hand).
    pub fn prepare(
        bench: &dyn crate::Benchmark,
        params: &[(&str, &str)],
        cpus: &[u32],
    ) -> Result<Box<dyn crate::Instance>, crate::BenchError> {
        let info = bench.info();
        let given: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let params = Params::resolve(&info, &given, true)?;
        let placement = placement(cpus);
        let topology = topology(cpus);
        let ctx = BenchContext {
            params: &params,
            placement: &placement,
            topology: &topology,
            client: None,
        };
        bench.prepare(&ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_catalog_is_complete_and_well_formed() {
        let names: Vec<String> = benchmarks().iter().map(|b| b.info().name).collect();
        assert_eq!(
            names,
            [
                "pthread-create",
                "mutex-uncontended",
                "mutex-handoff",
                "condvar-signal",
                "condvar-broadcast",
                "cas-contention",
                "c2c-latency"
            ]
        );
        for b in benchmarks() {
            let i = b.info();
            assert_eq!(i.group, "threads");
            assert!(i.origin.starts_with("paper 002"), "{}", i.origin);
            assert!(!i.description.is_empty());
        }
    }

    #[test]
    fn empty_loop_cost_is_small() {
        let l = empty_loop_ns();
        assert!(l.is_finite() && l < 1000.0, "{l}");
    }

    #[test]
    fn task_state_reads_own_thread_as_running() {
        let mut s = TaskState::open(smtlab_placement::pin::gettid()).unwrap();
        assert_eq!(s.state(), Some(b'R'));
    }

    #[test]
    fn events_out_of_range_names_the_parameter() {
        let p = Params::from_pairs([("events", "0")]);
        let e = events_from(&p).unwrap_err().to_string();
        assert!(e.contains("events=\"0\""), "{e}");
        let p = Params::from_pairs([("events", "many")]);
        assert!(events_from(&p).unwrap_err().to_string().contains("events"));
    }
}
