//! # smtlab-runner
//!
//! Turns a prepared benchmark [`Instance`](smtlab_bench::Instance) into a measured
//! cell, following the measurement rules of DESIGN.md. One call does it all:
//!
//! ```text
//! measure(instance, info, &RunConfig::default(), &Monotonic, &mut NoopObserver)
//!     -> CellResult { samples, summary, converged, calibration, warmup, overheads, ... }
//! ```
//!
//! 1. **Overheads** ([`clock`]): the cost of a clock read and of an empty loop iteration
//!    are measured and reported; time-per-operation values have the benchmark's own
//!    `RawSample::overhead_ns` (its clock reads and loop, by the bench contract)
//!    subtracted, and the result says how much ([`smtlab_bench::value`]).
//! 2. **Calibration**: inner iterations grow from 1 until the median of three samples
//!    lasts about `target_sample_ns` (10 ms), then `time(2n)` is compared with
//!    `2 * time(n)` (medians of three each); a count that fails is searched again once,
//!    and a second failure is recorded as `linear: Some(false)` and shown with the value.
//! 3. **Warm-up**: discarded samples, counted and timed.
//! 4. **Repetition**: samples until the Student-t 95% CI of the mean is within 2% (3..30
//!    samples, and a 5 s budget per cell; cells whose samples are long by nature, a
//!    workload's stretch of load or one iteration over the target, take at least
//!    `long_min_samples`, the budget stretched for them);
//!    `converged` says whether it got there.
//! 5. **Summary** ([`stats`]): mean, median, quartiles, min/max, CI; CPU-time rates
//!    beside wall-time rates; start spread; concatenated event series.
//!
//! With `--counters`, [`counting::CellCounting`] is opened before the benchmark is
//! prepared and enabled around each measured sample: it counts the measured samples (perf events of
//! the process and everything it starts, `/proc/stat` time of the placement's CPUs,
//! syscall time where tracing is permitted).
//!
//! [`rounds::pool`] joins the rounds of a cell measured several times (`--repeat`), so
//! the disagreement between repetitions is shown beside the within-cell interval.
//!
//! [`session::Session`] is the one engine every command uses: it measures groups of
//! cells (client side, counters around each cell's own samples, rounds, interleaving:
//! one sample of each cell in turn, so their ratio is not skewed by the machine changing
//! speed between them) on a thread per cell and pushes records and skipped cells to its
//! observer as they are done. [`experiment`] measures groups of cells in each SMT state
//! ([`experiment::smt`], for every command) and plans the co-run groups of `corun` and
//! `penalty` and the rate curves of `util` as session cells. The benchmarks they measure
//! ([`exec::CommandBench`], [`corun::CoRun`], [`utilisation::OpenLoop`]) live in the
//! workloads crate.
//!
//! Everything asked of the machine (its topology, SMT control and CPU hotplug, the
//! clock, the counting backend, the environment, a cell's system state) goes through
//! one seam, [`machine::Machine`]: [`machine::RealMachine`] is this machine,
//! [`machine::FakeMachine`] a fake one with SMT siblings, so every command's path runs
//! in tests.
//!
//! The runner never prints: it pushes [`Event`]s to an [`Observer`]. Time comes from a
//! [`Clock`], so tests drive everything with a [`FakeClock`] and fake instances.
//! [`stats::ratio`] compares two cells (SMT yield) with a Fieller confidence interval.

pub mod catalog;
pub mod client;
pub mod clock;
pub mod config;
pub mod counting;
pub mod disturb;
pub mod error;
pub mod eta;
pub mod experiment;
pub mod machine;
mod measure;
pub mod observer;
pub mod plan;
pub mod rounds;
pub mod session;
pub mod spent;
/// Statistics live in the model crate so the report can use them; re-exported here.
pub use smtlab_model::stats;
/// The benchmarks that commands build (a user's command, a co-run pair, an open-loop
/// job) live with the workloads; re-exported here for the engine's callers.
pub use smtlab_workloads::{corun, exec, scratch, utilisation};

pub use clock::{Clock, FakeClock, Monotonic, Overheads, measure_overheads};
pub use config::RunConfig;
pub use error::{Phase, RunError};
pub use measure::{Measurement, measure};
pub use observer::{Event, NoopObserver, Observer, from_fn};
/// What measuring one cell produced: in the model crate, so the store and the report
/// read it without the runner.
pub use smtlab_model::result::{Calibration, CalibrationStep, CellResult, StopReason, Warmup};
