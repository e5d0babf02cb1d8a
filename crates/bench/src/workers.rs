//! Pinned worker threads started on a barrier, timed from the first start to the last
//! finish: the engine of every multi-threaded throughput benchmark.
//!
//! A [`WorkerPool`] starts its threads once, at prepare time, and keeps them for every
//! sample, so thread creation is never timed. Each worker
//!
//! 1. pins itself, inside the thread, to `placement.cpu_for_thread(i)` (affinity read back
//!    and the running CPU checked; any failure fails [`WorkerPool::start`]), or stays
//!    unpinned for the `os` placement;
//! 2. builds its private state with the factory closure *after* pinning, so the memory it
//!    first touches comes from the NUMA node of its CPU, and the state never crosses
//!    threads (it need not be `Send`);
//! 3. for each [`WorkerPool::run`], waits on a spin barrier with the other workers, reads
//!    the monotonic clock, runs [`WorkerState::run`], reads the clock again, then its thread
//!    CPU time and `sched_getcpu`, and only then checks its results
//!    ([`WorkerState::check`], not timed).
//!
//! The coordinator (the caller) sleeps on a channel during the run, so it takes no CPU
//! from the workers; only the last worker to finish wakes it (each puts its report in
//! its slot), so it never wakes in the middle of a sample onto a CPU where another
//! worker is still running, which on a placement over every CPU would stretch that
//! worker's time. The sample's elapsed time is last finish minus first start (paper
//! 002 s3.2, measurement rule 8), and the start spread is reported beside it.
//!
//! Dropping the pool tells every worker to stop and joins it. A panic in a worker's code is
//! caught and reported as an error, so the barrier never waits for a dead thread; should a
//! worker vanish anyway, the coordinator notices while waiting and poisons the barrier so
//! the others leave it, and the pool reports itself broken instead of hanging.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use smtlab_model::ResolvedPlacement;
use smtlab_model::placement::Named;
use smtlab_placement::pin::{self, PinError};

use crate::clock;
use crate::{BenchContext, BenchError, RawSample};

/// Most threads a pool starts: far beyond any machine's CPUs, low enough that a typo
/// (`threads=100000`) fails cleanly instead of exhausting the process.
pub const MAX_THREADS: usize = 8192;

/// What a worker's check found wrong: what was expected and what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WrongResult(pub String);

impl From<String> for WrongResult {
    fn from(s: String) -> Self {
        WrongResult(s)
    }
}

impl From<&str> for WrongResult {
    fn from(s: &str) -> Self {
        WrongResult(s.into())
    }
}

/// Per-thread state of a benchmark, built inside its worker thread.
pub trait WorkerState: 'static {
    /// Runs `iterations` inner iterations and returns the units of work done. Timed.
    fn run(&mut self, iterations: u64) -> f64;

    /// Verifies what the last [`WorkerState::run`] computed (not timed). The error says
    /// what was expected and what was found.
    fn check(&mut self, iterations: u64) -> Result<(), WrongResult> {
        let _ = iterations;
        Ok(())
    }
}

/// The thread-count sweep of the `full` suite on `all`: [`thread_counts`] up to the
/// machine's width. The full width itself is the base cell (`threads=auto` on `all`) when
/// the run measures `all`; the plan drops the duplicate then.
pub fn thread_sweep(suite: crate::Suite, topo: &smtlab_model::Topology) -> Vec<crate::SweepCell> {
    if suite != crate::Suite::Full {
        return Vec::new();
    }
    thread_counts(topo.cpus.len())
        .into_iter()
        .map(|t| crate::SweepCell {
            params: vec![("threads".into(), t.to_string())],
            placement: Some(Named::All.to_string()),
        })
        .collect()
}

/// Thread counts worth measuring up to `max`: 2^n and 2^n + 2^(n-1) (paper 002 s3.3),
/// i.e. 1, 2, 3, 4, 6, 8, 12, 16, 24, ..., with `max` itself always last. Empty for 0.
pub fn thread_counts(max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut p: usize = 1;
    while p <= max {
        v.push(p);
        if p >= 2 {
            let mid = p + p / 2;
            if mid <= max {
                v.push(mid);
            }
        }
        match p.checked_mul(2) {
            Some(n) => p = n,
            None => break,
        }
    }
    // The 1.5x step of 2^n sits between 2^n and 2^(n+1): keep the list ascending.
    v.sort_unstable();
    v.dedup();
    if max > 0 && v.last() != Some(&max) {
        v.push(max);
    }
    v
}

/// Threads a pool runs: `requested`, else the placement's width, else (for `os`) the CPUs
/// this process may use.
pub fn default_threads(placement: &ResolvedPlacement, requested: Option<usize>) -> usize {
    requested.unwrap_or_else(|| {
        if placement.pinned() {
            placement.width()
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }
    })
}

/// The `threads` parameter of a pool's benchmark, read by [`threads_param`].
pub(crate) fn threads_info() -> smtlab_model::ParamInfo {
    crate::params::declare(
        "threads",
        "auto",
        None,
        "worker threads; auto = one per CPU of the placement",
    )
}

/// Reads the `threads` parameter: `auto` (or absent) means the placement's width
/// ([`default_threads`]); otherwise a count from 1 to [`MAX_THREADS`].
pub fn threads_param(bench: &str, ctx: &BenchContext<'_>) -> Result<usize, BenchError> {
    let requested = match ctx.params.get_str("threads") {
        Err(_) => None,
        Ok(v) if v.eq_ignore_ascii_case("auto") => None,
        Ok(v) => match v.parse::<usize>() {
            Ok(n) if (1..=MAX_THREADS).contains(&n) => Some(n),
            _ => {
                let expected = format!("auto or a thread count from 1 to {MAX_THREADS}");
                return Err(crate::params::bad("threads", v, &expected));
            }
        },
    };
    let n = default_threads(ctx.placement, requested);
    if n == 0 {
        return Err(BenchError::unsupported(
            bench,
            format!("placement {} has no CPUs to run on", ctx.placement.name),
        ));
    }
    Ok(n)
}

/// Keeps each hot atomic on its own cache line, so arriving workers do not slow the
/// release flag down by bouncing a shared line.
#[repr(align(128))]
struct Padded<T>(T);

/// A reusable sense-counting barrier that spins (with `pause`) instead of sleeping, so
/// every worker leaves it within about a cache-line transfer of the release, not one
/// futex wake after another (the staggered wake-up paper 002 s3.3 describes).
struct SpinBarrier {
    n: usize,
    arrived: Padded<AtomicUsize>,
    generation: Padded<AtomicUsize>,
    /// Spins before yielding; 0 when there are more workers than CPUs, where spinning
    /// would only keep the late worker off its CPU.
    spins: u32,
    /// Set when the pool is dropped or broken: waiters give up instead of waiting for a
    /// worker that will never arrive.
    poisoned: AtomicBool,
}

impl SpinBarrier {
    fn new(n: usize, spin: bool) -> Self {
        Self {
            n,
            arrived: Padded(AtomicUsize::new(0)),
            generation: Padded(AtomicUsize::new(0)),
            spins: if spin { 1 << 20 } else { 0 },
            poisoned: AtomicBool::new(false),
        }
    }

    fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    /// Waits for all `n` workers; false when the barrier was poisoned meanwhile.
    fn wait(&self) -> bool {
        let generation = self.generation.0.load(Ordering::Acquire);
        if self.arrived.0.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            // Reset before releasing: nobody can arrive for the next round until the
            // generation moves, and the release orders the reset before it.
            self.arrived.0.store(0, Ordering::Relaxed);
            self.generation.0.fetch_add(1, Ordering::Release);
            return true;
        }
        let mut spun = 0u32;
        while self.generation.0.load(Ordering::Acquire) == generation {
            if self.poisoned.load(Ordering::Relaxed) {
                return false;
            }
            if spun < self.spins {
                std::hint::spin_loop();
                spun += 1;
            } else {
                std::thread::yield_now();
            }
        }
        true
    }
}

enum Cmd {
    Run(u64),
    Stop,
}

/// What one worker measured in one run.
struct Report {
    start_ns: u64,
    end_ns: u64,
    cpu_ns: u64,
    cpu: Option<u32>,
    work: f64,
}

struct Worker {
    cmd: Sender<Cmd>,
    join: Option<JoinHandle<()>>,
}

/// Where the workers leave their reports of one run: a slot each, and the count of those
/// still out; the worker that brings it to zero wakes the coordinator.
struct Reports {
    slots: std::sync::Mutex<Vec<Option<Result<Report, String>>>>,
    pending: AtomicUsize,
    done: Sender<()>,
}

impl Reports {
    fn put(&self, index: usize, report: Result<Report, String>) -> bool {
        if let Ok(mut slots) = self.slots.lock() {
            slots[index] = Some(report);
        }
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            return self.done.send(()).is_ok();
        }
        true
    }
}

/// Persistent, pinned worker threads running one benchmark's [`WorkerState`]s.
pub struct WorkerPool {
    bench: String,
    workers: Vec<Worker>,
    /// The CPU each worker was pinned to, `None` when unpinned.
    planned: Vec<Option<u32>>,
    reports: Arc<Reports>,
    all_done: Receiver<()>,
    barrier: Arc<SpinBarrier>,
    clock_cost_ns: f64,
}

impl WorkerPool {
    /// Starts `threads` workers (`None`: see [`default_threads`]) for benchmark `bench`,
    /// worker `i` pinned to `placement.cpu_for_thread(i)`, each building its state with
    /// `factory(i)` after pinning. Returns once every worker is pinned and ready, or with
    /// the first error after stopping the others.
    pub fn start<S, F>(
        bench: &str,
        placement: &ResolvedPlacement,
        threads: Option<usize>,
        factory: F,
    ) -> Result<Self, BenchError>
    where
        S: WorkerState,
        F: Fn(usize) -> Result<S, BenchError> + Send + Sync + 'static,
    {
        let n = default_threads(placement, threads);
        if n == 0 || n > MAX_THREADS {
            return Err(BenchError::unsupported(
                bench,
                format!(
                    "{n} worker threads on placement {}: expected 1 to {MAX_THREADS}",
                    placement.name
                ),
            ));
        }
        let cpus_available = if placement.pinned() {
            placement.width()
        } else {
            default_threads(placement, None)
        };
        let barrier = Arc::new(SpinBarrier::new(n, n <= cpus_available));
        let factory = Arc::new(factory);
        let (ready_tx, ready_rx) = channel::<(usize, Result<(), BenchError>)>();
        let (done_tx, all_done) = channel();
        let reports = Arc::new(Reports {
            slots: std::sync::Mutex::new((0..n).map(|_| None).collect()),
            pending: AtomicUsize::new(0),
            done: done_tx,
        });
        let planned: Vec<Option<u32>> = (0..n).map(|i| placement.cpu_for_thread(i)).collect();
        let mut pool = WorkerPool {
            bench: bench.into(),
            workers: Vec::with_capacity(n),
            planned: planned.clone(),
            reports: Arc::clone(&reports),
            all_done,
            barrier: Arc::clone(&barrier),
            clock_cost_ns: 0.0,
        };
        for (i, &cpu) in planned.iter().enumerate() {
            let (cmd_tx, cmd_rx) = channel();
            let barrier = Arc::clone(&barrier);
            let factory = Arc::clone(&factory);
            let ready = ready_tx.clone();
            let results = Arc::clone(&reports);
            let name = bench.to_string();
            let spawned = std::thread::Builder::new()
                .name(format!("smtlab-w{i}"))
                .spawn(move || {
                    worker_main(name, i, cpu, &*factory, &barrier, cmd_rx, ready, results);
                });
            match spawned {
                Ok(join) => pool.workers.push(Worker {
                    cmd: cmd_tx,
                    join: Some(join),
                }),
                Err(source) => {
                    return Err(BenchError::io(
                        bench,
                        format!("spawning worker thread {i} of {n}"),
                        source,
                    ));
                }
            }
        }
        drop(ready_tx);
        let mut first_error: Option<(usize, BenchError)> = None;
        for _ in 0..n {
            match ready_rx.recv() {
                Ok((_, Ok(()))) => {}
                Ok((i, Err(e))) => {
                    if first_error.as_ref().is_none_or(|(j, _)| i < *j) {
                        first_error = Some((i, e));
                    }
                }
                // Every worker sends exactly one ready message before it can exit.
                Err(_) => break,
            }
        }
        if let Some((_, e)) = first_error {
            return Err(e);
        }
        pool.clock_cost_ns = clock::clock_cost_ns();
        Ok(pool)
    }

    /// Number of workers.
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// Runs `iterations` on every worker at once and returns the timed sample, or the
    /// first worker's check failure. `overhead_ns` is one clock read: the only timing
    /// cost inside a worker's interval.
    pub fn run(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        // Workers only exit when told to; one that has is a broken pool, and sending the
        // others to the barrier would leave them waiting for it.
        if self.any_worker_exited() {
            return Err(self.dead_worker());
        }
        let n = self.workers.len();
        self.reports.pending.store(n, Ordering::Release);
        for w in &self.workers {
            if w.cmd.send(Cmd::Run(iterations)).is_err() {
                return Err(self.dead_worker());
            }
        }
        loop {
            match self.all_done.recv_timeout(Duration::from_millis(200)) {
                Ok(()) => break,
                Err(RecvTimeoutError::Timeout) if !self.any_worker_exited() => {}
                Err(_) => {
                    self.barrier.poison();
                    return Err(self.dead_worker());
                }
            }
        }
        let reports: Vec<Option<Result<Report, String>>> = match self.reports.slots.lock() {
            Ok(mut slots) => slots.iter_mut().map(Option::take).collect(),
            Err(_) => return Err(self.dead_worker()),
        };
        let mut ok = Vec::with_capacity(n);
        for (i, r) in reports.into_iter().enumerate() {
            match r {
                Some(Ok(rep)) => ok.push(rep),
                Some(Err(reason)) => {
                    return Err(BenchError::check(
                        self.bench.clone(),
                        format!("worker {i}: {reason}"),
                    ));
                }
                None => return Err(self.dead_worker()),
            }
        }
        let first_start = ok.iter().map(|r| r.start_ns).min().unwrap_or(0);
        let last_start = ok.iter().map(|r| r.start_ns).max().unwrap_or(0);
        let last_end = ok.iter().map(|r| r.end_ns).max().unwrap_or(0);
        let mut sample = RawSample {
            elapsed_ns: last_end.saturating_sub(first_start),
            work: ok.iter().map(|r| r.work).sum(),
            overhead_ns: self.clock_cost_ns.round() as u64,
            cpu_ns: Some(ok.iter().map(|r| r.cpu_ns).sum()),
            start_spread_ns: Some(last_start - first_start),
            cpus: ok.iter().filter_map(|r| r.cpu).collect(),
            ..RawSample::default()
        };
        if ok.len() > 1 {
            sample.series.insert(
                "worker_ns".into(),
                ok.iter()
                    .map(|r| r.end_ns.saturating_sub(r.start_ns) as f64)
                    .collect(),
            );
        }
        // A pinned thread cannot leave its CPU; if one did, the sample is not what the
        // placement says.
        for (r, want) in ok.iter().zip(&self.planned) {
            match (r.cpu, *want) {
                (Some(running), Some(wanted)) if running != wanted => {
                    return Err(BenchError::Pin(PinError::Running { wanted, running }));
                }
                _ => {}
            }
        }
        Ok(sample)
    }

    fn any_worker_exited(&self) -> bool {
        self.workers
            .iter()
            .any(|w| w.join.as_ref().is_none_or(|j| j.is_finished()))
    }

    fn dead_worker(&self) -> BenchError {
        BenchError::check(self.bench.clone(), "a worker thread exited unexpectedly")
    }
}

/// A pool is the instance of a benchmark whose sample is one [`WorkerPool::run`].
impl crate::Instance for WorkerPool {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        self.run(iterations)
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        self.barrier.poison();
        for w in &self.workers {
            // A worker that failed at start has already exited; nothing to tell it.
            let _ = w.cmd.send(Cmd::Stop);
        }
        for w in &mut self.workers {
            if let Some(j) = w.join.take() {
                let _ = j.join();
            }
        }
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

#[allow(clippy::too_many_arguments)]
fn worker_main<S, F>(
    bench: String,
    index: usize,
    cpu: Option<u32>,
    factory: &F,
    barrier: &SpinBarrier,
    cmds: Receiver<Cmd>,
    ready: Sender<(usize, Result<(), BenchError>)>,
    results: Arc<Reports>,
) where
    S: WorkerState,
    F: Fn(usize) -> Result<S, BenchError>,
{
    if let Some(Err(e)) = cpu.map(pin::pin_current_thread_to) {
        let _ = ready.send((index, Err(e.into())));
        return;
    }
    let mut state = match catch_unwind(AssertUnwindSafe(|| factory(index))) {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let _ = ready.send((index, Err(e)));
            return;
        }
        Err(p) => {
            let _ = ready.send((
                index,
                Err(BenchError::check(
                    bench,
                    format!("worker {index} panicked in setup: {}", panic_text(&*p)),
                )),
            ));
            return;
        }
    };
    if ready.send((index, Ok(()))).is_err() {
        return;
    }
    drop(ready);
    while let Ok(Cmd::Run(iterations)) = cmds.recv() {
        if !barrier.wait() {
            return;
        }
        let cpu0 = clock::thread_cpu_ns();
        let start_ns = clock::now_ns();
        let done = catch_unwind(AssertUnwindSafe(|| state.run(iterations)));
        let end_ns = clock::now_ns();
        let cpu1 = clock::thread_cpu_ns();
        let ran_on = pin::current_cpu();
        let report = match done {
            Ok(work) => match catch_unwind(AssertUnwindSafe(|| state.check(iterations))) {
                Ok(Ok(())) => Ok(Report {
                    start_ns,
                    end_ns,
                    cpu_ns: cpu1.saturating_sub(cpu0),
                    cpu: ran_on,
                    work,
                }),
                Ok(Err(wrong)) => Err(wrong.0),
                Err(p) => Err(format!("check panicked: {}", panic_text(&*p))),
            },
            Err(p) => Err(format!("panicked: {}", panic_text(&*p))),
        };
        if !results.put(index, report) {
            return;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A placement on exactly these CPUs, as the placement crate would resolve `cpus=...`.
    pub(crate) fn placement(cpus: &[u32]) -> ResolvedPlacement {
        smtlab_fixtures::build::placement_on(cpus)
    }

    /// A one-package topology of CPUs 0 and 1 without SMT, with a last-level cache of
    /// `llc` bytes when given (none described otherwise).
    pub(crate) fn topology(llc: Option<u64>) -> smtlab_model::Topology {
        let t = smtlab_fixtures::build::one_cpu_per_core(&[0, 1]);
        match llc {
            Some(size) => smtlab_fixtures::build::with_llc(t, size),
            None => t,
        }
    }

    pub(crate) fn context<'a>(
        params: &'a crate::Params,
        placement: &'a ResolvedPlacement,
        topology: &'a smtlab_model::Topology,
    ) -> BenchContext<'a> {
        BenchContext {
            params,
            placement,
            topology,
            client: None,
        }
    }

    /// The CPUs tests may use: 0, and 1 when this machine has it.
    pub(crate) fn test_cpus() -> Vec<u32> {
        let allowed = pin::get_affinity(0).expect("read affinity");
        let v: Vec<u32> = [0, 1]
            .into_iter()
            .filter(|&c| allowed.contains(c))
            .collect();
        assert!(!v.is_empty(), "tests need CPU 0 in the affinity mask");
        v
    }

    struct Spin {
        index: usize,
        acc: u64,
        dropped: Option<Arc<AtomicUsize>>,
        fail_check: bool,
        panic_on: Option<u64>,
    }

    impl WorkerState for Spin {
        fn run(&mut self, iterations: u64) -> f64 {
            assert!(self.panic_on != Some(iterations), "asked to panic");
            for i in 0..iterations {
                self.acc = std::hint::black_box(self.acc.wrapping_add(i ^ self.index as u64));
            }
            iterations as f64
        }
        fn check(&mut self, _: u64) -> Result<(), WrongResult> {
            if self.fail_check {
                Err(format!("worker state {} says no", self.index).into())
            } else {
                Ok(())
            }
        }
    }

    impl Drop for Spin {
        fn drop(&mut self) {
            if let Some(d) = &self.dropped {
                d.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    fn spin(index: usize) -> Spin {
        Spin {
            index,
            acc: 0,
            dropped: None,
            fail_check: false,
            panic_on: None,
        }
    }

    #[test]
    fn thread_counts_are_powers_and_midpoints() {
        assert_eq!(thread_counts(0), Vec::<usize>::new());
        assert_eq!(thread_counts(1), vec![1]);
        assert_eq!(thread_counts(2), vec![1, 2]);
        assert_eq!(thread_counts(3), vec![1, 2, 3]);
        assert_eq!(thread_counts(16), vec![1, 2, 3, 4, 6, 8, 12, 16]);
        assert_eq!(thread_counts(20), vec![1, 2, 3, 4, 6, 8, 12, 16, 20]);
        assert_eq!(thread_counts(24), vec![1, 2, 3, 4, 6, 8, 12, 16, 24]);
        assert_eq!(*thread_counts(usize::MAX).last().unwrap(), usize::MAX);
    }

    #[test]
    fn workers_run_pinned_on_the_placement_cpus_with_start_spread() {
        let cpus = test_cpus();
        let p = placement(&cpus);
        let mut pool = WorkerPool::start("test", &p, None, |i| Ok(spin(i))).unwrap();
        assert_eq!(pool.threads(), cpus.len());
        for _ in 0..3 {
            let s = pool.run(10_000).unwrap();
            assert_eq!(s.cpus, cpus, "workers ran on {:?}", s.cpus);
            assert_eq!(s.work, 10_000.0 * cpus.len() as f64);
            assert!(s.elapsed_ns > 0);
            let spread = s.start_spread_ns.unwrap();
            assert!(spread <= s.elapsed_ns, "spread {spread} > {}", s.elapsed_ns);
            assert!(s.cpu_ns.unwrap() > 0);
            if cpus.len() > 1 {
                assert_eq!(s.series["worker_ns"].len(), cpus.len());
            }
        }
        assert_eq!(
            pool.planned,
            cpus.iter().map(|&c| Some(c)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn more_threads_than_cpus_wrap_around() {
        let p = placement(&[0]);
        let mut pool = WorkerPool::start("test", &p, Some(3), |i| Ok(spin(i))).unwrap();
        let s = pool.run(1000).unwrap();
        assert_eq!(s.cpus, vec![0, 0, 0]);
        assert_eq!(s.work, 3000.0);
    }

    #[test]
    fn unpinned_workers_report_where_they_ran() {
        let mut p = placement(&[]);
        p.name = "os".into();
        let mut pool = WorkerPool::start("test", &p, Some(2), |i| Ok(spin(i))).unwrap();
        let s = pool.run(1000).unwrap();
        assert_eq!(s.cpus.len(), 2);
    }

    #[test]
    fn drop_stops_and_joins_every_worker() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let d = Arc::clone(&dropped);
        let p = placement(&test_cpus());
        let n = p.width();
        let mut pool = WorkerPool::start("test", &p, None, move |i| {
            let mut s = spin(i);
            s.dropped = Some(Arc::clone(&d));
            Ok(s)
        })
        .unwrap();
        pool.run(10).unwrap();
        drop(pool);
        // States are dropped by their threads as they exit; join waited for that.
        assert_eq!(dropped.load(Ordering::SeqCst), n);
    }

    #[test]
    fn pinning_to_a_cpu_we_cannot_use_fails_at_start() {
        let p = placement(&[100_000]);
        let built = Arc::new(AtomicBool::new(false));
        let b = Arc::clone(&built);
        let e = WorkerPool::start("test", &p, None, move |i| {
            b.store(true, Ordering::SeqCst);
            Ok(spin(i))
        })
        .err()
        .expect("pinning to CPU 100000 must fail");
        assert!(matches!(e, BenchError::Pin(_)), "{e}");
        assert!(e.to_string().contains("100000"), "{e}");
        assert!(!built.load(Ordering::SeqCst), "state built without pinning");
    }

    #[test]
    fn factory_errors_and_panics_fail_start_cleanly() {
        let p = placement(&test_cpus());
        let e = WorkerPool::start::<Spin, _>("test", &p, Some(2), |i| {
            if i == 1 {
                Err(BenchError::unsupported("test", "worker 1 cannot"))
            } else {
                Ok(spin(i))
            }
        })
        .err()
        .unwrap();
        assert!(e.to_string().contains("worker 1 cannot"));
        let e = WorkerPool::start::<Spin, _>("test", &p, Some(2), |_| panic!("boom"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("boom"), "{e}");
    }

    #[test]
    fn check_failures_and_panics_are_errors_and_the_pool_survives() {
        let p = placement(&test_cpus());
        let mut pool = WorkerPool::start("test", &p, Some(2), |i| {
            let mut s = spin(i);
            s.fail_check = i == 1;
            s.panic_on = Some(7);
            Ok(s)
        })
        .unwrap();
        let e = pool.run(5).unwrap_err();
        assert!(e.to_string().contains("worker 1"), "{e}");
        assert!(e.to_string().contains("says no"), "{e}");
        let e = pool.run(7).unwrap_err();
        assert!(e.to_string().contains("asked to panic"), "{e}");
        // Still usable: the barrier did not lose a thread.
        assert!(pool.run(5).is_err());
    }

    #[test]
    fn a_poisoned_barrier_releases_its_waiters() {
        for spin in [true, false] {
            let b = Arc::new(SpinBarrier::new(2, spin));
            let b2 = Arc::clone(&b);
            let waiter = std::thread::spawn(move || b2.wait());
            std::thread::sleep(std::time::Duration::from_millis(5));
            b.poison();
            assert!(!smtlab_fixtures::bounded::join(waiter, "a test thread"));
        }
        // Unpoisoned, it is reusable round after round.
        let b = Arc::new(SpinBarrier::new(2, false));
        let b2 = Arc::clone(&b);
        let t = std::thread::spawn(move || (0..100).all(|_| b2.wait()));
        assert!((0..100).all(|_| b.wait()));
        assert!(smtlab_fixtures::bounded::join(t, "a test thread"));
    }

    #[test]
    fn zero_threads_is_an_error() {
        let e = WorkerPool::start("test", &placement(&[0]), Some(0), |i| Ok(spin(i)))
            .err()
            .unwrap();
        assert!(e.to_string().contains("0 worker threads"), "{e}");
    }
}
