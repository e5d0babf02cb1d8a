//! What measuring one cell produced (every raw sample, the facts of how they were
//! obtained, their summaries) and the settings it was measured with. Plain serde data,
//! so the store and the report keep and show it without knowing the runner.

use std::collections::{BTreeMap, BTreeSet};

use crate::{SampleRecord, Summary};
use serde::{Deserialize, Serialize};

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
    /// Every calibration and linearity-check sample in order: the search, three
    /// samples at `iterations` (their median is `time(n)`), three at twice that
    /// (`time(2n)`), and the same again when the check failed and the count was
    /// searched once more.
    pub tried: Vec<CalibrationStep>,
    /// Whether `time(2n)` was within the tolerance of `2 * time(n)` (medians of three
    /// samples each). `Some(false)` after the search was redone and failed again: the
    /// cell's value is not trusted and outputs say so. `None` when not checked: fixed
    /// iterations, or the check would not fit the time budget.
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

named_enum! {
    /// Why the runner stopped taking samples, named as a person reads it.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum StopReason {
        /// The CI half-width reached the target.
        Converged = "converged",
        /// `max_samples` were taken without converging.
        MaxSamples = "max samples",
        /// The next sample would not have fitted the cell's time budget.
        TimeBudget = "time budget",
    }
}

named_enum! {
    fn words;
    /// Which limit of the measurement a figure reached, named as outputs name it.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum LimitKind {
        /// The end of a search's range.
        RangeEnd = "search range end",
        /// A ceiling the settings set (a parameter such as `max_conns`).
        Ceiling = "configured ceiling",
        /// What the load generator could offer.
        LoadGenerator = "load generator's limit",
    }
}

impl LimitKind {
    /// The metric a sample writes for this kind ([`crate::metrics::limit`]).
    pub fn metric(self) -> &'static str {
        use crate::metrics::limit;
        match self {
            LimitKind::RangeEnd => limit::RANGE_END,
            LimitKind::Ceiling => limit::CEILING,
            LimitKind::LoadGenerator => limit::LOAD_GENERATOR,
        }
    }
}

/// A cell whose figure reached a limit of the measurement in some of its samples (a
/// search's range end, a configured ceiling, the load generator's own limit): the
/// system could do at least (or, for lower-is-better figures, at most) this much, and
/// how much more is unknown. Such a figure is shown as a bound and never makes a
/// speed-up or an answer (`verdict`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AtLimit {
    pub kind: LimitKind,
    /// The limit, in the benchmark's unit.
    pub limit: f64,
    /// Measured samples that reached it.
    pub samples: usize,
}

impl AtLimit {
    /// The limit the samples report ([`crate::metrics::limit`]); the first kind found,
    /// in the order range end, ceiling, load generator. `None` when no sample reached
    /// one.
    pub fn of_samples(samples: &[SampleRecord]) -> Option<AtLimit> {
        LimitKind::ALL.into_iter().find_map(|kind| {
            let hits: Vec<f64> = samples
                .iter()
                .filter_map(|s| s.metrics.get(kind.metric()).copied())
                .collect();
            let limit = hits.first().copied()?;
            Some(AtLimit {
                kind,
                limit,
                samples: hits.len(),
            })
        })
    }

    /// `at least 64 (configured ceiling)`; `at most` for lower-is-better figures.
    pub fn bound_text(&self, direction: crate::Direction, value: &str) -> String {
        let side = match direction {
            crate::Direction::Higher => "at least",
            crate::Direction::Lower => "at most",
        };
        format!("{side} {value} ({})", self.kind.words())
    }
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
    /// The figure reached a limit of the measurement ([`AtLimit`]): it is a bound.
    /// `None` in results stored before it was kept (read again from the samples by
    /// [`CellResult::limit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_limit: Option<AtLimit>,
    /// When the cell was measured in several rounds (`--repeat`), one entry per round
    /// in order; `samples` and `summary` then pool all rounds, and `calibration` and
    /// `warmup` are the first round's. Empty for a single round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<Round>,
    /// What disturbed the cell's samples (steal, other processes, smtlab's other
    /// threads); `None` where it was not recorded (no machine to read it from, results
    /// from before it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbance: Option<crate::Disturbance>,
}

/// One round of a cell measured several times, each time from a fresh instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// Statistics of this round's samples alone.
    pub summary: Summary,
    pub converged: bool,
    /// Inner iterations of this round's samples (each round calibrates anew).
    pub iterations: u64,
    pub wall_ns: u64,
}

/// For independent samples from one distribution, the difference between the medians
/// of the two halves stays within about 2.5 CI half-widths 95% of the time; beyond this
/// many, the level itself moved.
pub const UNSTEADY_HALF_WIDTHS: f64 = 3.0;

/// Beyond this coefficient of variation (sample standard deviation / mean) a cell's
/// samples spread so widely that their mean is not a level the cell repeats at: a
/// steady benchmark spreads by a few percent, and a quarter of its mean means some
/// samples ran at a different speed from the others (other load, frequency changes).
pub const UNSTEADY_CV: f64 = 0.25;

impl CellResult {
    /// The limit the figure reached ([`AtLimit`]), as recorded or, for results stored
    /// before it was, as its samples say.
    pub fn limit(&self) -> Option<AtLimit> {
        self.at_limit.or_else(|| AtLimit::of_samples(&self.samples))
    }

    /// Why this cell's figure would likely not repeat, in a few words; `None` when it is
    /// steady. The reasons, in order: its rounds (`--repeat`) disagree beyond their own
    /// 95% intervals (two rounds' intervals do not overlap); its level drifted during the
    /// cell ([`CellResult::unsteady`]); its samples spread beyond [`UNSTEADY_CV`]. A
    /// comparison calls such a cell neither faster nor slower: a difference may be the
    /// cell's own wandering. (A calibration found not linear is not a reason here: on a
    /// busy machine the short calibration samples often are, while the measured samples
    /// agree; whether a calibration can be trusted is the runner's to say.)
    pub fn unsteady_reason(&self) -> Option<String> {
        if self.rounds.len() >= 2 {
            let lows = self
                .rounds
                .iter()
                .map(|r| r.summary.mean - r.summary.ci95_half_width);
            let highs = self
                .rounds
                .iter()
                .map(|r| r.summary.mean + r.summary.ci95_half_width);
            let top_low = lows.fold(f64::NEG_INFINITY, f64::max);
            let bottom_high = highs.fold(f64::INFINITY, f64::min);
            if top_low > bottom_high {
                return Some("rounds disagree".into());
            }
        }
        if let Some(d) = self.unsteady() {
            return Some(format!("drift {:.0}%", d * 100.0));
        }
        let s = &self.summary;
        if s.n >= 2 && s.mean != 0.0 && (s.stddev / s.mean).abs() > UNSTEADY_CV {
            return Some(format!("CV {:.0}%", 100.0 * (s.stddev / s.mean).abs()));
        }
        None
    }

    /// Why the cell is disturbed (`disturbed: steal 4.2%`): steal or other processes
    /// took more than [`crate::disturbance::DISTURBED_SHARE`] of its CPUs' time. `None`
    /// when it was not, or nothing was recorded.
    pub fn disturbed_reason(&self) -> Option<String> {
        let why = self.disturbance.as_ref()?.reason()?;
        Some(format!("disturbed: {why}"))
    }

    /// Why the cell's load came from fewer hosts than asked (`load from 1 of 2 agents:
    /// 1 lost`): a load agent was lost and the others sent its share, which may have
    /// made them the limit. `None` when every agent sent load in every sample.
    pub fn agents_lost_reason(&self) -> Option<String> {
        use crate::metrics::web;
        let metric = |name: &'static str| {
            let samples = self.samples.iter();
            samples.filter_map(move |s| s.metrics.get(name).copied())
        };
        let lost = metric(web::AGENTS_LOST).fold(0.0_f64, f64::max);
        if lost < 1.0 {
            return None;
        }
        // The fewest agents any sample's load came from.
        let left = metric(web::AGENTS).fold(f64::INFINITY, f64::min);
        Some(format!(
            "load from {left:.0} of {:.0} agents: {lost:.0} lost",
            left + lost
        ))
    }

    /// Why the cell's figure may not repeat or not be its own: [`Self::unsteady_reason`],
    /// [`Self::disturbed_reason`] and [`Self::agents_lost_reason`] together. What keeps
    /// a comparison from calling it faster or slower.
    pub fn hold_back_reason(&self) -> Option<String> {
        let reasons: Vec<String> = [
            self.unsteady_reason(),
            self.disturbed_reason(),
            self.agents_lost_reason(),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!reasons.is_empty()).then(|| reasons.join(", "))
    }

    /// How many distinct CPUs the cell's work ran on: the most any sample reports in
    /// [`crate::SampleRecord::cpus`] (each worker's CPU, and a helper process's where the
    /// benchmark has one). `None` when no sample says (unpinned work, a command run by
    /// `exec`, results from before the field was filled).
    pub fn cpus_used(&self) -> Option<usize> {
        self.samples
            .iter()
            .map(|s| s.cpus.iter().collect::<BTreeSet<_>>().len())
            .max()
            .filter(|n| *n > 0)
    }

    /// The measured values in sample order.
    pub fn values(&self) -> Vec<f64> {
        self.samples.iter().map(|s| s.value).collect()
    }

    /// How far the level moved between the first and second half of the samples
    /// ([`crate::stats::drift_rel`]); for pooled rounds, across the whole sequence.
    pub fn drift_rel(&self) -> Option<f64> {
        crate::stats::drift_rel(&self.values())
    }

    /// The drift ([`CellResult::drift_rel`]) when it is beyond what the cell's own
    /// confidence interval explains (more than [`UNSTEADY_HALF_WIDTHS`] half-widths) and
    /// beyond the convergence target: the machine changed speed during the cell, and a
    /// repetition will likely differ by about this much, not by the interval.
    pub fn unsteady(&self) -> Option<f64> {
        let drift = self.drift_rel()?;
        (drift > UNSTEADY_HALF_WIDTHS * self.summary.ci95_rel && drift > self.config.ci_target_rel)
            .then_some(drift)
    }

    /// The cell's interval met its target: the runner said converged, there are two
    /// samples or more (one sample has no interval), and the pooled interval is within
    /// `ci_target_rel` (rounds that each converged can pool into a wider one). What
    /// outputs call "converged".
    pub fn met_target(&self) -> bool {
        self.converged && self.summary.n >= 2 && self.summary.ci95_rel <= self.config.ci_target_rel
    }

    /// The lowest and highest of the rounds' medians; `None` below two rounds.
    pub fn round_median_range(&self) -> Option<(f64, f64)> {
        if self.rounds.len() < 2 {
            return None;
        }
        let medians: Vec<f64> = self.rounds.iter().map(|r| r.summary.median).collect();
        Some((crate::stats::min(&medians)?, crate::stats::max(&medians)?))
    }

    /// `(max - min)` of the rounds' medians relative to the pooled median: how much
    /// repetitions of this cell disagree. `None` below two rounds.
    pub fn rounds_spread_rel(&self) -> Option<f64> {
        let (lo, hi) = self.round_median_range()?;
        let all = self.summary.median;
        (all != 0.0).then(|| ((hi - lo) / all).abs())
    }
}

/// The fixed costs of timing, measured by the runner's clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Overheads {
    /// Cost of one clock read: the median over batches of back-to-back reads.
    pub clock_cost_ns: f64,
    /// Cost of one iteration of an empty loop (`black_box` on the counter).
    pub loop_cost_ns_per_iter: f64,
}

/// Settings for measuring one cell. Serialisable so results can say how they were made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Calibration aims for samples of about this length.
    pub target_sample_ns: u64,
    /// Samples taken before convergence is tested (unless the budget runs out first).
    pub min_samples: usize,
    /// Samples after which the runner stops even if not converged.
    pub max_samples: usize,
    /// Converged when the 95% CI half-width of the mean is at most this fraction of it.
    pub ci_target_rel: f64,
    /// Warm-up runs discarded samples until at least this much sample time has passed
    /// (and always at least one).
    pub warmup_ns: u64,
    /// Wall-time budget of the whole cell (calibration, warm-up and samples) on the
    /// runner's clock. A sample is only started if the previous one says it will end
    /// within the budget, so a cell overruns by at most one sample; at least one
    /// measured sample is always taken.
    pub max_cell_ns: u64,
    /// Cells whose samples are long by nature take at least this many measured samples
    /// (at most `max_samples`), the time budget stretched to fit them and one warm-up
    /// sample: cells whose instance fixes the sample (a workload's stretch of load:
    /// `Instance::fixed_iterations`) and cells whose samples take longer than the
    /// target on the runner's clock whatever the count (an SDET script per user, a task
    /// tree built outside the timed section). A budget sized for 10 ms
    /// samples would leave a 2 s sample alone, with no interval. 0 in results stored
    /// before the setting existed.
    #[serde(default)]
    pub long_min_samples: usize,
    /// Set by the quick preset; recorded so results say they are quick ones.
    pub quick: bool,
    /// Calibration flags the benchmark non-linear when `time(2n) / (2 time(n))`
    /// differs from 1 by more than this.
    pub linearity_tolerance: f64,
    /// Clock and loop costs measured once for a whole run; `None` measures them per
    /// cell (about a millisecond).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_overheads: Option<Overheads>,
    /// At most this many bytes of benchmark buffers held at once (a share of the
    /// machine's memory, chosen by the run's plan): a group of placements whose
    /// instances would hold more together is measured one placement after the other
    /// instead of interleaved. `None`: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_budget_bytes: Option<u64>,
    /// Record performance counters, `/proc/stat` time and syscall time with every cell
    /// (`--counters`); kept with the run so `--resume` counts the rest the same way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counters: bool,
    /// Named events counted with the counters (`--events LIST`, perf's syntax), kept
    /// for `--resume` as `counters` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter_events: Option<String>,
    /// The machine's peak DRAM bandwidth in 10^9 bytes/s (`--dram-peak`), for the
    /// bus utilisation of `--events dram`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_peak_gb_per_s: Option<f64>,
    /// Whether the placements of a group take their samples in turn (`run` interleaves
    /// unless `--no-interleave`), kept with the run so `--resume` measures the rest the
    /// same way. `None` in runs stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleave: Option<bool>,
    /// Rounds per cell (`--repeat`), kept for `--resume` as `interleave` is. `None` in
    /// runs stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<usize>,
}

impl Default for RunConfig {
    /// 10 ms samples, 3..30 of them until the CI is within 2%, 50 ms warm-up, 5 s per
    /// cell: any benchmark with samples under a second finishes in well under 10 s.
    /// Workload cells (fixed samples of load) take at least 5 samples whatever they last.
    fn default() -> Self {
        Self {
            target_sample_ns: 10_000_000,
            min_samples: 3,
            max_samples: 30,
            ci_target_rel: 0.02,
            warmup_ns: 50_000_000,
            max_cell_ns: 5_000_000_000,
            long_min_samples: 5,
            quick: false,
            linearity_tolerance: 0.2,
            known_overheads: None,
            memory_budget_bytes: None,
            counters: false,
            counter_events: None,
            dram_peak_gb_per_s: None,
            interleave: None,
            repeat: None,
        }
    }
}

impl RunConfig {
    /// A smoke-test preset: 2 ms samples, 3..5 of them, 5% CI target, 5 ms warm-up,
    /// 0.5 s per cell; workload cells take at least 3 samples.
    pub fn quick() -> Self {
        Self {
            target_sample_ns: 2_000_000,
            min_samples: 3,
            max_samples: 5,
            ci_target_rel: 0.05,
            warmup_ns: 5_000_000,
            max_cell_ns: 500_000_000,
            long_min_samples: 3,
            quick: true,
            ..Self::default()
        }
    }

    /// Measured samples a cell takes before its time budget may stop it: the minimum
    /// for long samples (within `max_samples`), else one.
    pub fn guaranteed_samples(&self, long_samples: bool) -> usize {
        if long_samples {
            self.long_min_samples.min(self.max_samples).max(1)
        } else {
            1
        }
    }

    /// Checks the settings are usable; the runner calls it before measuring.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.target_sample_ns == 0 {
            return Err(ConfigError::TargetSampleZero);
        }
        if self.min_samples == 0 {
            return Err(ConfigError::MinSamplesZero);
        }
        if self.max_samples < self.min_samples {
            return Err(ConfigError::MaxBelowMin {
                max_samples: self.max_samples,
                min_samples: self.min_samples,
            });
        }
        if !(self.ci_target_rel.is_finite() && self.ci_target_rel > 0.0) {
            return Err(ConfigError::CiTarget(self.ci_target_rel));
        }
        if !(self.linearity_tolerance.is_finite() && self.linearity_tolerance >= 0.0) {
            return Err(ConfigError::LinearityTolerance(self.linearity_tolerance));
        }
        if self.max_cell_ns == 0 {
            return Err(ConfigError::MaxCellZero);
        }
        if let Some(o) = self.known_overheads {
            let ok = |x: f64| x.is_finite() && x >= 0.0;
            if !ok(o.clock_cost_ns) || !ok(o.loop_cost_ns_per_iter) {
                return Err(ConfigError::Overheads(o));
            }
        }
        Ok(())
    }
}

/// Why [`RunConfig::validate`] refused the settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("target_sample_ns must be positive")]
    TargetSampleZero,
    #[error("min_samples must be at least 1")]
    MinSamplesZero,
    #[error("max_samples ({max_samples}) is below min_samples ({min_samples})")]
    MaxBelowMin {
        max_samples: usize,
        min_samples: usize,
    },
    #[error("ci_target_rel must be a positive fraction, got {0}")]
    CiTarget(f64),
    #[error("linearity_tolerance must be a non-negative fraction, got {0}")]
    LinearityTolerance(f64),
    #[error("max_cell_ns must be positive")]
    MaxCellZero,
    #[error("known_overheads must be non-negative, got {0:?}")]
    Overheads(Overheads),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        RunConfig::default().validate().unwrap();
        let q = RunConfig::quick();
        q.validate().unwrap();
        assert!(q.quick);
        assert!(q.max_cell_ns < RunConfig::default().max_cell_ns);
    }

    #[test]
    fn invalid_settings_are_named() {
        let cfg = RunConfig {
            min_samples: 5,
            max_samples: 2,
            ..RunConfig::default()
        };
        let msg = cfg.validate().unwrap_err().to_string();
        assert!(msg.contains("max_samples (2)"), "{msg}");
        let cfg = RunConfig {
            ci_target_rel: f64::NAN,
            ..RunConfig::default()
        };
        assert!(cfg.validate().is_err());
    }
}
