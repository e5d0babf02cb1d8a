//! How hard the runner tries: sample length, repetition bounds, convergence target,
//! warm-up and the time budget of one cell.

use serde::{Deserialize, Serialize};

use crate::clock::Overheads;
use crate::error::RunError;

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
    /// Set by the quick preset; recorded so results say they are quick ones.
    pub quick: bool,
    /// Calibration flags the benchmark non-linear when `time(2n) / (2 time(n))`
    /// differs from 1 by more than this.
    pub linearity_tolerance: f64,
    /// Clock and loop costs measured once for a whole run; `None` measures them per
    /// cell (about a millisecond).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_overheads: Option<Overheads>,
}

impl Default for RunConfig {
    /// 10 ms samples, 3..30 of them until the CI is within 2%, 50 ms warm-up, 5 s per
    /// cell: any benchmark with samples under a second finishes in well under 10 s.
    fn default() -> Self {
        Self {
            target_sample_ns: 10_000_000,
            min_samples: 3,
            max_samples: 30,
            ci_target_rel: 0.02,
            warmup_ns: 50_000_000,
            max_cell_ns: 5_000_000_000,
            quick: false,
            linearity_tolerance: 0.2,
            known_overheads: None,
        }
    }
}

impl RunConfig {
    /// A smoke-test preset: 2 ms samples, 3..5 of them, 5% CI target, 5 ms warm-up,
    /// 0.5 s per cell.
    pub fn quick() -> Self {
        Self {
            target_sample_ns: 2_000_000,
            min_samples: 3,
            max_samples: 5,
            ci_target_rel: 0.05,
            warmup_ns: 5_000_000,
            max_cell_ns: 500_000_000,
            quick: true,
            ..Self::default()
        }
    }

    /// Checks the settings are usable; `measure` calls it first.
    pub fn validate(&self) -> Result<(), RunError> {
        let bad = |reason: String| Err(RunError::Config { reason });
        if self.target_sample_ns == 0 {
            return bad("target_sample_ns must be positive".into());
        }
        if self.min_samples == 0 {
            return bad("min_samples must be at least 1".into());
        }
        if self.max_samples < self.min_samples {
            return bad(format!(
                "max_samples ({}) is below min_samples ({})",
                self.max_samples, self.min_samples
            ));
        }
        if !(self.ci_target_rel.is_finite() && self.ci_target_rel > 0.0) {
            return bad(format!(
                "ci_target_rel must be a positive fraction, got {}",
                self.ci_target_rel
            ));
        }
        if !(self.linearity_tolerance.is_finite() && self.linearity_tolerance >= 0.0) {
            return bad(format!(
                "linearity_tolerance must be a non-negative fraction, got {}",
                self.linearity_tolerance
            ));
        }
        if self.max_cell_ns == 0 {
            return bad("max_cell_ns must be positive".into());
        }
        if let Some(o) = self.known_overheads {
            let ok = |x: f64| x.is_finite() && x >= 0.0;
            if !ok(o.clock_cost_ns) || !ok(o.loop_cost_ns_per_iter) {
                return bad(format!("known_overheads must be non-negative, got {o:?}"));
            }
        }
        Ok(())
    }
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
