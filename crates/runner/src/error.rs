//! Why a cell could not be measured.

use std::fmt;

use smtlab_bench::BenchError;

/// Which step of a cell was running when something went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Calibration,
    LinearityCheck,
    Warmup,
    /// Measured sample, counted from 0.
    Sample(usize),
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Calibration => f.write_str("calibration"),
            Phase::LinearityCheck => f.write_str("linearity check"),
            Phase::Warmup => f.write_str("warm-up"),
            Phase::Sample(i) => write!(f, "sample {i}"),
        }
    }
}

/// Errors of [`crate::measure`]. Each names the benchmark and the phase at fault.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    // Not a `source`: the message says it already, so it is printed once.
    #[error("invalid run settings: {reason}")]
    Config { reason: smtlab_model::ConfigError },
    // The cause is shown in the message and is not a `source`, so it is printed once.
    #[error("{error} (during {phase})")]
    Bench { phase: Phase, error: BenchError },
    #[error("{bench}: {phase}: unusable sample: {reason}")]
    BadSample {
        bench: String,
        phase: Phase,
        reason: String,
    },
    #[error(
        "{bench}: calibration failed: {iterations} iterations still took {elapsed_ns} ns; \
         the benchmark does no measurable work"
    )]
    Calibration {
        bench: String,
        iterations: u64,
        elapsed_ns: u64,
    },
    #[error("{bench}: stopped by the observer during {phase}")]
    Stopped { bench: String, phase: Phase },
}
