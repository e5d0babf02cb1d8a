//! # smtlab-bench
//!
//! The benchmark catalog. Every experiment is one module implementing [`Benchmark`]:
//! it describes itself ([`BenchInfo`]: name, unit, direction, parameters) and, given a
//! resolved placement and its parameters, prepares an [`Instance`] whose
//! [`Instance::sample`] runs a requested number of inner iterations and returns one
//! [`RawSample`]: elapsed time, work done, CPU time, start spread and the CPUs the
//! workers ran on.
//!
//! Benchmarks only measure. Calibrating iteration counts, warm-up, repetition until
//! convergence and statistics live in the runner crate; printing in the CLI; storage in
//! the store. A benchmark never reads CLI arguments: it gets a [`BenchContext`].
//!
//! [`value`] is the contract between a sample and the engine: how a [`RawSample`]
//! becomes a value in the benchmark's unit (or states its own, [`value::OWN_VALUE`]).

use std::collections::BTreeMap;

use smtlab_model::{BenchInfo, ResolvedPlacement, Topology};

pub mod aim;
pub mod catalog;
pub mod client;
pub mod clock;
pub mod compute;
pub mod idle;
pub mod memory;
pub mod os;
pub mod params;
pub mod process;
pub mod taskpool;
pub mod threads;
pub mod value;
pub mod workers;

pub use params::{ParamError, Params};

/// One timed run of a prepared benchmark, before any statistics. Serializable because
/// the os benchmarks send it from their measurement process ([`os::lean`]).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RawSample {
    /// First worker start to last worker finish, in nanoseconds.
    pub elapsed_ns: u64,
    /// Units of work done: operations, bytes, round trips (the unit is the benchmark's).
    pub work: f64,
    /// Inner-loop overhead already known to be inside `elapsed_ns` (clock reads, empty
    /// loop), which the runner subtracts for time-per-operation values and reports.
    pub overhead_ns: u64,
    /// The clock-read and empty-loop costs `overhead_ns` was computed from, when the
    /// benchmark measured its own: the runner then reports these rather than its own
    /// measurement, so the figures shown beside a result are the ones subtracted.
    pub overhead_basis: Option<smtlab_model::result::Overheads>,
    /// Sum of the workers' CPU time over the timed section, when measured.
    pub cpu_ns: Option<u64>,
    /// Spread between the first and the last worker starting.
    pub start_spread_ns: Option<u64>,
    /// CPU each worker ran on (read at the end of its timed section), in worker order.
    pub cpus: Vec<u32>,
    /// Secondary figures for this sample (`failed_per_success`, `wake_ns_mean`, ...).
    pub metrics: BTreeMap<String, f64>,
    /// Per-event latencies for distribution plots (`create_return_ns`, `thread_start_ns`),
    /// each a list of nanoseconds.
    pub series: BTreeMap<String, Vec<f64>>,
    /// Wall time the sample spent waiting on work that is not its own (a co-run
    /// partner finishing its sample, which may be far longer than this sample): the
    /// runner does not charge it to the cell's budget, up to a few budgets more.
    #[serde(default)]
    pub waited_ns: u64,
}

/// Everything a benchmark may look at when it prepares.
#[derive(Debug, Clone, Copy)]
pub struct BenchContext<'a> {
    pub params: &'a Params,
    pub placement: &'a ResolvedPlacement,
    pub topology: &'a Topology,
    /// Where a server workload's client side runs (load generators, pgbench, chat
    /// clients): CPUs apart from the placement, chosen by the runner. `None` for
    /// benchmarks that have no client side.
    pub client: Option<&'a client::ClientSide>,
}

impl<'a> BenchContext<'a> {
    /// The client side that `bench`, a server workload, drives its load from; without
    /// one, the cell is unsupported with [`client::NEEDS_CLIENT_SIDE`] as the reason.
    pub fn client_side(&self, bench: &str) -> Result<&'a client::ClientSide, BenchError> {
        self.client
            .ok_or_else(|| BenchError::unsupported(bench, client::NEEDS_CLIENT_SIDE))
    }
}

/// Why a benchmark could not be prepared or sampled.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Param(#[from] ParamError),
    #[error("{bench}: {reason}")]
    Unsupported { bench: String, reason: String },
    /// The cause is part of the message (and so not also a `source()`, which would
    /// print it twice).
    #[error("{bench}: {what}: {error}")]
    Io {
        bench: String,
        what: String,
        error: std::io::Error,
    },
    #[error(transparent)]
    Pin(#[from] smtlab_placement::pin::PinError),
    #[error("{bench}: result check failed: {reason}")]
    Check { bench: String, reason: String },
}

/// The variants built from anything string-like, as most call sites have it.
impl BenchError {
    pub fn unsupported(bench: impl Into<String>, reason: impl Into<String>) -> BenchError {
        let (bench, reason) = (bench.into(), reason.into());
        BenchError::Unsupported { bench, reason }
    }

    pub fn io(
        bench: impl Into<String>,
        what: impl Into<String>,
        error: std::io::Error,
    ) -> BenchError {
        let (bench, what) = (bench.into(), what.into());
        BenchError::Io { bench, what, error }
    }

    /// The [`BenchError::Io`] of failing to `verb` the file or directory at `path`, for
    /// `map_err`.
    pub(crate) fn at_path(
        bench: &str,
        verb: &str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> BenchError {
        let what = format!("{verb} {}", smtlab_model::quote::path(path));
        move |error| BenchError::io(bench, what, error)
    }

    pub fn check(bench: impl Into<String>, reason: impl Into<String>) -> BenchError {
        let (bench, reason) = (bench.into(), reason.into());
        BenchError::Check { bench, reason }
    }
}

/// One experiment of the catalog.
pub trait Benchmark: Send + Sync {
    /// Name, unit, direction, parameters.
    fn info(&self) -> BenchInfo;

    /// Allocates buffers, starts pinned workers and children: everything that must not be
    /// timed. The returned instance is sampled repeatedly and dropped at the end (which
    /// must stop workers and reap children).
    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError>;

    /// Whether this benchmark drives a server from a client side pinned apart from the
    /// placement ([`BenchContext::client`]). The runner then finds the client CPUs and
    /// starts the [`client::ClientSide`] before counting begins.
    fn client_side(&self) -> bool {
        false
    }

    /// Whether its client side may run on other hosts, driven through smtlab agents
    /// (`--client-hosts`): the runner then starts no client side here, and a
    /// `1c1t-up` placement leaves the client nothing to lose.
    fn remote_clients(&self) -> bool {
        false
    }

    /// What this benchmark cannot do on this machine although it runs (a command it
    /// leaves out because it is not installed), one line each, for the caller to say
    /// once before measuring. Empty when nothing is missing.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether `suite` measures this benchmark at all (a long workload may stay out of
    /// `quick`). Its cells are its parameters at the suite's values (`ParamInfo::quick`
    /// in `quick`, the defaults otherwise) on every placement of the run, plus
    /// [`Benchmark::sweep`]. By default every suite but `quick` for AIM9's rows (they are
    /// many and each adds little to a first look), every suite for the rest.
    fn in_suite(&self, suite: Suite) -> bool {
        suite != Suite::Quick || !self.info().report.is_aim()
    }

    /// The extra cells `suite` measures beyond the base cells: the papers' sweeps (thread
    /// counts, working-set sizes, client counts, rooms). Each entry overrides some
    /// parameters and names a placement, or `None` for every placement of the run.
    fn sweep(&self, suite: Suite, topo: &Topology) -> Vec<SweepCell> {
        let _ = (suite, topo);
        Vec::new()
    }

    /// What a cell of this benchmark will cost, known before it is prepared, for the
    /// run's plan (`smtlab run --dry-run`) and its memory bound: the bytes a prepared
    /// instance holds, the length of a sample when the benchmark fixes it, and the time
    /// `prepare` takes. `ctx.client` is `None` here. The default says nothing is known:
    /// small buffers, calibrated samples, a quick `prepare`.
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<CellCost, BenchError> {
        let _ = ctx;
        Ok(CellCost::default())
    }
}

/// See [`Benchmark::cost`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CellCost {
    /// Bytes a prepared instance holds while it lives (buffers, rings, data sets in
    /// memory); 0 when small.
    pub memory_bytes: u64,
    /// Wall time of one sample when the benchmark fixes it (a workload's stretch of
    /// load); `None` when the runner calibrates it (or it cannot be told in advance).
    pub sample_ns: Option<u64>,
    /// The longest a fixed sample can take when its length varies (a confidence loop of
    /// a few to many passes), for the plan's bound; `None`: `sample_ns`.
    pub longest_sample_ns: Option<u64>,
    /// Time `prepare` and the end of the instance take (allocating and touching
    /// buffers, starting servers, loading data), about.
    pub setup_ns: u64,
}

smtlab_model::named_enum! {
    /// The suites of `smtlab run`, from a quick look to the papers' full sweeps.
    #[derive(Hash)]
    pub enum Suite {
        Quick = "quick",
        Default = "default",
        Full = "full",
    }
}

/// One extra cell of a suite (see [`Benchmark::sweep`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepCell {
    /// Parameters that differ from the suite's base values.
    pub params: Vec<(String, String)>,
    /// The placement, or `None` for every placement of the run.
    pub placement: Option<String>,
}

impl SweepCell {
    /// A sweep point on every placement of the run.
    pub fn everywhere(params: &[(&str, String)]) -> SweepCell {
        SweepCell {
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            placement: None,
        }
    }
}

/// `benchmarks` as the catalog holds them.
pub fn boxed<B: Benchmark + 'static>(
    benchmarks: impl IntoIterator<Item = B>,
) -> Vec<Box<dyn Benchmark>> {
    benchmarks
        .into_iter()
        .map(|b| Box::new(b) as Box<dyn Benchmark>)
        .collect()
}

/// A benchmark prepared for one placement and parameter set.
pub trait Instance: Send {
    /// Runs `iterations` inner iterations and times them.
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError>;

    /// Iterations a sample must run whatever the calibration says (e.g. one pass over a
    /// buffer for bandwidth tests where an iteration is already large). `None` lets the
    /// runner calibrate.
    fn fixed_iterations(&self) -> Option<u64> {
        None
    }
}

/// An instance whose sample is `sample`, a closure over what `prepare` made (its
/// buffers, its CPU, the result a sample must find).
pub(crate) fn sampled<F>(sample: F) -> Box<dyn Instance>
where
    F: FnMut(u64) -> Result<RawSample, BenchError> + Send + 'static,
{
    struct Sampled<F>(F);
    impl<F: FnMut(u64) -> Result<RawSample, BenchError> + Send> Instance for Sampled<F> {
        fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
            (self.0)(iterations)
        }
    }
    Box::new(Sampled(sample))
}

/// An instance with something that must outlive it (the server it drives, the client
/// side its load runs from): fields drop in declaration order, so the instance goes
/// first, then `held`.
pub struct Holding<T: Send> {
    pub instance: Box<dyn Instance>,
    pub held: T,
}

impl<T: Send> Instance for Holding<T> {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        self.instance.sample(iterations)
    }

    fn fixed_iterations(&self) -> Option<u64> {
        self.instance.fixed_iterations()
    }
}

impl std::str::FromStr for Suite {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Suite::parse(s)
            .ok_or_else(|| format!("unknown suite {s:?}: expected quick, default or full"))
    }
}
