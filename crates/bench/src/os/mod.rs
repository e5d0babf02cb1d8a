//! OS latencies: the fourteen kernel API rows of paper 001 Table 1, measured the way
//! lmbench measures them (`lat_syscall`, `lat_select`, `lat_sig`, `lat_pipe`,
//! `lat_proc`), one operation per inner iteration, reported in nanoseconds per operation.
//!
//! | benchmark      | one iteration                                  | lmbench              |
//! |----------------|------------------------------------------------|----------------------|
//! | `null-syscall` | `syscall(SYS_getppid)`                         | `lat_syscall null`   |
//! | `read`         | read 1 byte from `/dev/zero`                   | `lat_syscall read`   |
//! | `write`        | write 1 byte to `/dev/null`                    | `lat_syscall write`  |
//! | `stat`         | `stat` of a temporary file                     | `lat_syscall stat`   |
//! | `fstat`        | `fstat` of the same file, open                 | `lat_syscall fstat`  |
//! | `open-close`   | `open(O_RDONLY)` + `close` of that file        | `lat_syscall open`   |
//! | `select-file`  | `select` for writing on 10 dups of a file fd   | `lat_select file`    |
//! | `select-tcp`   | `select` for writing on 10 loopback TCP sockets| `lat_select tcp`     |
//! | `sig-install`  | `sigaction(SIGUSR1)`                           | `lat_sig install`    |
//! | `sig-handler`  | signal to self, caught, minus sending cost     | `lat_sig catch`      |
//! | `pipe-latency` | one round trip through two pipes to a child    | `lat_pipe`           |
//! | `fork-exit`    | `fork` + child `_exit` + `wait4`               | `lat_proc fork`      |
//! | `fork-exec`    | `fork` + `execve("/bin/true")` + `wait4`       | `lat_proc exec`      |
//! | `fork-sh`      | `fork` + `/bin/sh -c /bin/true` + `wait4`      | `lat_proc shell`     |
//!
//! Each module documents its method and where it departs from lmbench.
//!
//! ## Process
//! The catalog's os benchmarks ([`benchmarks`]) measure in a lean child process of their
//! own ([`lean`]): the smtlab binary started again, single-threaded and small, runs the
//! benchmark's `prepare` and every sample and sends each [`RawSample`] back over a pipe.
//! Measured on a thread of the multi-threaded smtlab process, `read` and `write` would
//! pay the kernel's shared-descriptor-table path (1.3-1.5x a single-threaded process) and
//! `fork-exit` the copy of a large parent; lmbench's processes pay neither. Every sample
//! carries the metric `measuring_process_threads` (1 unless something went wrong).
//!
//! ## Placement
//! The measuring process is pinned to the placement's first CPU before `prepare`. The
//! measuring thread (whichever thread calls [`crate::Instance::sample`]: in the catalog,
//! the child's only thread) is pinned to that CPU for the duration of the sample and its
//! previous affinity is restored afterwards, so the caller's thread is left as it was. Benchmarks with a
//! second process (`pipe-latency` and the `fork-*` family) put it on the placement's
//! second CPU when there is one, else on the same CPU: `1c1t` measures the two processes
//! sharing one CPU, `1c2t` on SMT siblings, `2c1t` on two cores. The `os` placement pins
//! nothing. [`RawSample::cpus`] lists the measuring thread's CPU at the end of the
//! sample, then the child's.
//!
//! ## What is subtracted
//! [`RawSample::overhead_ns`] holds the measured cost of the two clock reads and of the
//! empty loop for the iterations run (well under 1% for every row here), except for
//! `sig-handler`, which, as lmbench does, also subtracts the cost of sending the signal
//! (see `signal.rs`). Both costs are measured here, on this module's own loop, and go
//! with every sample as [`RawSample::overhead_basis`], so the clock-read and empty-loop
//! figures printed beside a result are the ones that were subtracted (the runner's own
//! estimate, on a differently shaped loop, reads lower).
//!
//! Fork children run only async-signal-safe code (raw system calls, atomics on shared
//! memory, `execve`, `_exit`) with everything they need built before `fork`, since the
//! benchmarks also run in multithreaded processes (this crate's unit tests).

use std::ffi::CString;
use std::fs::File;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use smtlab_model::{BenchInfo, CpuSet, Direction, ParamInfo, ResolvedPlacement, ValueKind};
use smtlab_placement::pin;

use crate::clock::{now_ns, thread_cpu_ns};
use crate::{BenchError, Benchmark, RawSample};

mod child;
pub mod lean;
mod pipe;
mod process;
mod select;
mod signal;
mod syscalls;

/// Paper 001 Table 1 (LMbench kernel API latencies), in the paper's row order: our
/// benchmark name and the row label as the paper prints it.
pub const TABLE1: [(&str, &str); 14] = [
    ("null-syscall", "Simple syscall"),
    ("read", "Simple read"),
    ("write", "Simple write"),
    ("stat", "Simple stat"),
    ("fstat", "Simple fstat"),
    ("open-close", "Simple open/close"),
    ("select-file", "Select on 10 fd's"),
    ("select-tcp", "Select on 10 tcp fd's"),
    ("sig-install", "Signal handler installation"),
    ("sig-handler", "Signal handler overhead"),
    ("pipe-latency", "Pipe latency"),
    ("fork-exit", "Process fork+exit"),
    ("fork-exec", "Process fork+execve"),
    ("fork-sh", "Process fork+/bin/sh -c"),
];

/// The os benchmarks of the catalog, in paper 001 Table 1 order, each measured in a lean
/// child process ([`lean`]).
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    in_process_benchmarks()
        .into_iter()
        .map(|inner| Box::new(lean::Lean { inner }) as Box<dyn Benchmark>)
        .collect()
}

/// The same benchmarks measured on the calling thread, in the calling process: what the
/// lean child runs, and what this crate's unit tests sample directly.
pub(crate) fn in_process_benchmarks() -> Vec<Box<dyn Benchmark>> {
    let mut v = syscalls::benchmarks();
    v.extend(select::benchmarks());
    v.extend(signal::benchmarks());
    v.push(Box::new(pipe::PipeLatency));
    v.extend(process::benchmarks());
    v
}

/// The report section of an os benchmark: its row of paper 001 Table 1, whose label
/// assumes 10 descriptors for the select rows.
fn table1_section(name: &str) -> smtlab_model::ReportSection {
    let row = TABLE1.iter().find(|r| r.0 == name);
    let fds = ["select-file", "select-tcp"].contains(&name);
    smtlab_model::ReportSection::OsLatency {
        label: row.map_or(name, |r| r.1).into(),
        label_params: if fds {
            [("fds".to_string(), "10".to_string())].into()
        } else {
            Default::default()
        },
    }
}

/// The catalog entry of an os benchmark: nanoseconds per operation, lower is better.
fn info(name: &str, description: &str, origin: &str, params: Vec<ParamInfo>) -> BenchInfo {
    BenchInfo {
        name: name.into(),
        group: "os".into(),
        unit: "ns".into(),
        direction: Direction::Lower,
        value_kind: ValueKind::TimePerOp,
        description: description.into(),
        origin: format!("paper 001 Table 1; {origin}"),
        params,
        main_param: None,
        report: table1_section(name),
    }
}

pub(crate) fn last_os_error(bench: &str, what: impl Into<String>) -> BenchError {
    BenchError::io(bench, what, std::io::Error::last_os_error())
}

/// What every timed loop here costs besides its operations, measured once per process:
/// the smallest of a few batches, since interruptions only ever add time.
#[derive(Debug, Clone, Copy)]
struct LoopCost {
    /// Two clock reads (start and end of a sample).
    clock_pair_ns: f64,
    /// One turn of an empty counted loop whose counter the compiler cannot see through.
    per_iteration_ns: f64,
}

impl LoopCost {
    fn get() -> LoopCost {
        static COST: OnceLock<LoopCost> = OnceLock::new();
        *COST.get_or_init(|| {
            let mut clock = f64::INFINITY;
            let mut iteration = f64::INFINITY;
            // Many short batches: a single undisturbed one is enough for the minimum.
            for _ in 0..25 {
                const READS: u64 = 200;
                let t0 = now_ns();
                let mut last = t0;
                for _ in 0..READS {
                    last = std::hint::black_box(now_ns());
                }
                clock = clock.min(last.saturating_sub(t0) as f64 / READS as f64);

                const TURNS: u64 = 20_000;
                let t0 = now_ns();
                let mut i = 0u64;
                while std::hint::black_box(i) < TURNS {
                    i += 1;
                }
                let t1 = now_ns();
                iteration = iteration.min(t1.saturating_sub(t0) as f64 / TURNS as f64);
            }
            LoopCost {
                clock_pair_ns: 2.0 * clock,
                per_iteration_ns: iteration,
            }
        })
    }

    fn overhead_ns(&self, iterations: u64) -> u64 {
        (self.clock_pair_ns + self.per_iteration_ns * iterations as f64).round() as u64
    }

    /// The same costs in the runner's terms, reported with every sample so that the
    /// figures printed beside a result are the ones subtracted from it.
    fn basis(&self) -> smtlab_model::result::Overheads {
        smtlab_model::result::Overheads {
            clock_cost_ns: self.clock_pair_ns / 2.0,
            loop_cost_ns_per_iter: self.per_iteration_ns,
        }
    }
}

/// Pins the calling thread to one CPU until dropped, then restores the affinity it had,
/// so sampling leaves the runner's thread as it found it.
pub(crate) struct PinGuard {
    saved: Option<CpuSet>,
}

impl PinGuard {
    pub(crate) fn pin(cpu: Option<u32>) -> Result<PinGuard, BenchError> {
        let Some(cpu) = cpu else {
            return Ok(PinGuard { saved: None });
        };
        let saved = pin::get_affinity(0)?;
        let want: CpuSet = std::iter::once(cpu).collect();
        if saved == want {
            return Ok(PinGuard { saved: None });
        }
        pin::set_affinity(0, &want)?;
        Ok(PinGuard { saved: Some(saved) })
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // Best effort: the saved set was valid a moment ago; if a CPU went offline
            // meanwhile the thread simply stays pinned, which harms nothing.
            let _ = pin::set_affinity(0, saved);
        }
    }
}

/// Where the two parties of an os benchmark run: the measuring thread on the placement's
/// first CPU, a child process on its second (the first again when it has only one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cpus {
    parent: Option<u32>,
    child: Option<u32>,
}

impl Cpus {
    fn of(placement: &ResolvedPlacement) -> Cpus {
        Cpus {
            parent: placement.cpu_for_thread(0),
            child: placement.cpu_for_thread(1),
        }
    }
}

/// Elapsed and thread CPU time of one timed loop.
#[derive(Debug, Clone, Copy)]
struct Timed {
    elapsed_ns: u64,
    cpu_ns: u64,
}

/// Times `iterations` turns of `op` on the calling thread, wherever it runs.
fn run_timed<F>(iterations: u64, mut op: F) -> Result<Timed, BenchError>
where
    F: FnMut() -> Result<(), BenchError>,
{
    let cpu0 = thread_cpu_ns();
    let t0 = now_ns();
    let mut i = 0u64;
    while std::hint::black_box(i) < iterations {
        op()?;
        i += 1;
    }
    let t1 = now_ns();
    let cpu1 = thread_cpu_ns();
    Ok(Timed {
        elapsed_ns: t1.saturating_sub(t0),
        cpu_ns: cpu1.saturating_sub(cpu0),
    })
}

/// Times `iterations` turns of `op` pinned to `cpu` and fills a sample: elapsed time,
/// work = iterations, loop overhead, the thread's CPU time and the CPU it ended on.
fn time_loop<F>(cpu: Option<u32>, iterations: u64, op: F) -> Result<RawSample, BenchError>
where
    F: FnMut() -> Result<(), BenchError>,
{
    let _pin = PinGuard::pin(cpu)?;
    let t = run_timed(iterations, op)?;
    Ok(RawSample {
        elapsed_ns: t.elapsed_ns,
        work: iterations as f64,
        overhead_ns: LoopCost::get().overhead_ns(iterations),
        overhead_basis: Some(LoopCost::get().basis()),
        cpu_ns: Some(t.cpu_ns),
        cpus: pin::current_cpu().into_iter().collect(),
        ..RawSample::default()
    })
}

/// A file created for one instance (stat, fstat, open/close, select) and removed when
/// the instance is dropped.
struct TempFile {
    path: PathBuf,
    c_path: CString,
    file: File,
}

impl TempFile {
    fn create(bench: &str) -> Result<TempFile, BenchError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("smtlab-{bench}-{}-{n}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(BenchError::at_path(bench, "create", &path))?;
        let c_path = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
            BenchError::check(
                bench,
                format!(
                    "temporary path {} contains a NUL byte",
                    smtlab_model::quote::path(&path)
                ),
            )
        })?;
        Ok(TempFile { path, c_path, file })
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Retries a system call interrupted by a signal (another thread's handler, a debugger).
fn retry_eintr(mut call: impl FnMut() -> isize) -> isize {
    loop {
        let r = call();
        if r != -1 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return r;
        }
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    //! A hand-built two-CPU machine without SMT (like this KVM guest) and its `2c1t`
    //! placement, so the tests need neither sysfs nor the placement resolver.

    use smtlab_model::{ResolvedPlacement, Topology};

    use crate::{BenchContext, Params};

    pub fn topology() -> Topology {
        smtlab_fixtures::build::one_cpu_per_core(&[0, 1])
    }

    pub fn placement(cpus: &[u32]) -> ResolvedPlacement {
        smtlab_fixtures::build::placement_on(cpus)
    }

    /// Runs `f` with a context on CPUs `cpus` and the benchmark's default parameters.
    pub fn with_ctx<T>(
        info: &smtlab_model::BenchInfo,
        cpus: &[u32],
        f: impl FnOnce(&BenchContext<'_>) -> T,
    ) -> T {
        let params = Params::resolve(info, &[], false).expect("default parameters");
        let placement = placement(cpus);
        let topology = topology();
        f(&BenchContext {
            params: &params,
            placement: &placement,
            topology: &topology,
            client: None,
        })
    }

    /// Whether our child `pid` is gone and was waited for (waiting again finds no child).
    pub fn reaped(pid: libc::pid_t) -> bool {
        let mut status = 0;
        // SAFETY: non-blocking wait for our own (former) child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
    }

    /// Whether this machine lets us use CPUs 0 and 1 (tests skip the two-CPU checks
    /// elsewhere rather than fail).
    pub fn have_two_cpus() -> bool {
        smtlab_placement::pin::get_affinity(0)
            .map(|s| s.contains(0) && s.contains(1))
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Instance;

    #[test]
    fn table1_has_every_benchmark_once_in_catalog_order() {
        let names: Vec<String> = benchmarks().iter().map(|b| b.info().name).collect();
        let rows: Vec<&str> = TABLE1.iter().map(|r| r.0).collect();
        assert_eq!(names, rows);
        assert_eq!(TABLE1[0], ("null-syscall", "Simple syscall"));
        for b in benchmarks() {
            let i = b.info();
            assert_eq!(i.group, "os");
            assert_eq!(i.unit.to_string(), "ns");
            assert_eq!(i.direction, Direction::Lower);
            assert_eq!(i.value_kind, ValueKind::TimePerOp);
            assert!(i.origin.contains("paper 001 Table 1"), "{}", i.origin);
            let smtlab_model::ReportSection::OsLatency { label, .. } = &i.report else {
                panic!("{}: {:?}", i.name, i.report)
            };
            assert_eq!(TABLE1.iter().find(|r| r.0 == i.name).unwrap().1, label);
        }
    }

    /// Every benchmark prepares on CPUs [0, 1] and gives a sane sample (in this process;
    /// `tests/os_lean.rs` does the same through lean children).
    #[test]
    fn every_benchmark_samples_on_two_cpus() {
        if !testutil::have_two_cpus() {
            return;
        }
        for b in in_process_benchmarks() {
            let info = b.info();
            let iterations = if info.name.starts_with("fork") { 2 } else { 50 };
            let mut inst: Box<dyn Instance> = testutil::with_ctx(&info, &[0, 1], |ctx| {
                b.prepare(ctx)
                    .unwrap_or_else(|e| panic!("{}: prepare: {e}", info.name))
            });
            let s = inst
                .sample(iterations)
                .unwrap_or_else(|e| panic!("{}: sample: {e}", info.name));
            assert!(s.elapsed_ns > 0, "{}: {s:?}", info.name);
            assert_eq!(s.work, iterations as f64, "{}", info.name);
            assert!(s.overhead_ns < s.elapsed_ns, "{}: {s:?}", info.name);
            assert_eq!(s.cpus.first(), Some(&0), "{}: {s:?}", info.name);
            let per_op = (s.elapsed_ns - s.overhead_ns) as f64 / s.work;
            assert!(per_op.is_finite() && per_op > 0.0, "{}: {s:?}", info.name);
        }
    }

    #[test]
    fn sampling_restores_the_callers_affinity() {
        if !testutil::have_two_cpus() {
            return;
        }
        let before = pin::get_affinity(0).unwrap();
        let s = time_loop(Some(1), 10, || Ok(())).unwrap();
        assert_eq!(s.cpus, vec![1]);
        assert_eq!(pin::get_affinity(0).unwrap(), before);
    }

    #[test]
    fn temp_files_are_removed_on_drop() {
        let t = TempFile::create("test").unwrap();
        let path = t.path.clone();
        assert!(path.exists());
        drop(t);
        assert!(!path.exists());
    }

    #[test]
    fn the_reported_basis_is_what_was_subtracted() {
        let iterations = 1_000_000;
        let s = time_loop(None, iterations, || Ok(())).unwrap();
        let b = s
            .overhead_basis
            .expect("os samples say what they subtracted");
        let rebuilt = 2.0 * b.clock_cost_ns + b.loop_cost_ns_per_iter * iterations as f64;
        assert_eq!(s.overhead_ns, rebuilt.round() as u64, "{s:?}");
    }

    #[test]
    fn loop_cost_is_small_and_positive() {
        let c = LoopCost::get();
        assert!(
            c.clock_pair_ns > 0.0 && c.clock_pair_ns < 100_000.0,
            "{c:?}"
        );
        assert!(
            c.per_iteration_ns >= 0.0 && c.per_iteration_ns < 1_000.0,
            "{c:?}"
        );
    }
}
