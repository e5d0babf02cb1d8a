//! What measuring one cell produced: every raw sample, the facts of how they were
//! obtained, and their summaries. Plain serde data so the store and the report can keep
//! and show it without knowing the runner.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smtlab_model::{SampleRecord, Summary};

use crate::config::RunConfig;

/// One calibration sample: how many iterations ran and how long they took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalibrationStep {
    pub iterations: u64,
    pub elapsed_ns: u64,
}

/// How the inner iteration count was chosen (measurement rule 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Iterations every warm-up and measured sample runs.
    pub iterations: u64,
    /// The instance fixed the count (`Instance::fixed_iterations`); nothing was tried.
    pub fixed: bool,
    /// Every calibration sample in order; one of them (usually the last) ran
    /// `iterations` and serves as `time(n)` for the linearity check.
    pub tried: Vec<CalibrationStep>,
    /// Whether `time(2n)` was within the tolerance of `2 * time(n)`. `None` when not
    /// checked: fixed iterations, or the check would not fit the time budget.
    pub linear: Option<bool>,
    /// `time(2n) / (2 * time(n))`; 1.0 is perfectly linear.
    pub linearity_ratio: Option<f64>,
}

/// The discarded warm-up (measurement rule 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warmup {
    pub samples: usize,
    /// Sum of the warm-up samples' own elapsed times.
    pub elapsed_ns: u64,
}

/// Why the runner stopped taking samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The CI half-width reached the target.
    Converged,
    /// `max_samples` were taken without converging.
    MaxSamples,
    /// The next sample would not have fitted the cell's time budget.
    TimeBudget,
}

/// A measured cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// Inner iterations of every measured sample.
    pub iterations: u64,
    pub calibration: Calibration,
    pub warmup: Warmup,
    /// Cost of one clock read, measured for this cell (or given in the config); for
    /// context, not subtracted (the benchmark's `overhead_ns` already counts its reads).
    pub clock_cost_ns: f64,
    /// Cost of one empty loop iteration; reported, not subtracted (benchmarks that know
    /// their loop put it in `RawSample::overhead_ns`).
    pub loop_cost_ns_per_iter: f64,
    /// Mean over samples of what was subtracted from `elapsed_ns` before dividing by the
    /// work: the benchmark's `overhead_ns` (its clock reads and loop). Zero for rates,
    /// which are not corrected.
    pub subtracted_ns_per_sample: f64,
    /// Every measured sample, in order. Calibration and warm-up are not included.
    pub samples: Vec<SampleRecord>,
    /// Statistics of the samples' values, in the benchmark's unit.
    pub summary: Summary,
    /// The CI target was met (`stop_reason == Converged`).
    pub converged: bool,
    pub stop_reason: StopReason,
    /// Work per CPU-second (same scale as the value), for rate benchmarks whose samples
    /// report CPU time (measurement rule 9). Compare with `summary` to see SMT sharing.
    pub cpu_rate: Option<Summary>,
    /// `RawSample::series` of the measured samples, concatenated in sample order.
    pub series: BTreeMap<String, Vec<f64>>,
    /// Start spread of the measured samples in nanoseconds (`max` is the worst).
    pub start_spread_ns: Option<Summary>,
    /// Wall time of the whole cell on the runner's clock.
    pub wall_ns: u64,
    /// The settings the cell was measured with.
    pub config: RunConfig,
}
