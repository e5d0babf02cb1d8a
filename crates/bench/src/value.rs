//! From a raw sample to a value in the benchmark's unit.

use crate::RawSample;
use smtlab_model::ValueKind;

/// A sample's value and what was subtracted to get it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Value {
    pub value: f64,
    /// Nanoseconds taken off `elapsed_ns` (always 0 for rates).
    pub subtracted_ns: f64,
}

/// Why a raw sample has no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("elapsed time is 0 ns")]
    ZeroElapsed,
    #[error("work must be a positive finite number, got {0}")]
    BadWork(String),
    #[error("rate scale must be a positive finite number, got {0}")]
    BadScale(String),
}

/// The metric of a sample that states its value itself, in the benchmark's unit, rather
/// than leaving it to be computed from time and work: a command's wall time in seconds
/// or the number it printed (`exec`). The runner takes it as the value and does not keep
/// it among the sample's metrics.
pub const OWN_VALUE: &str = "value";

/// Computes a sample's value.
///
/// * A sample with the [`OWN_VALUE`] metric: that number, nothing subtracted.
/// * `Rate { scale }`: `work / (elapsed_ns / 1e9) / scale`, uncorrected: overheads are
///   part of what a throughput pays.
/// * `TimePerOp`: `(elapsed_ns - overhead_ns) / work`. By the bench contract
///   `RawSample::overhead_ns` already holds the sample's clock reads and empty-loop cost
///   (the benchmark knows how many it made), so the runner does not subtract its own
///   clock-cost figure a second time. The subtraction is capped at `elapsed_ns`, so a
///   value can reach 0 but never go negative.
pub fn sample_value(kind: ValueKind, raw: &RawSample) -> Result<Value, ValueError> {
    if let Some(&value) = raw.metrics.get(OWN_VALUE) {
        if !value.is_finite() {
            return Err(ValueError::BadWork(format!("own value {value}")));
        }
        return Ok(Value {
            value,
            subtracted_ns: 0.0,
        });
    }
    if raw.elapsed_ns == 0 {
        return Err(ValueError::ZeroElapsed);
    }
    if !(raw.work.is_finite() && raw.work > 0.0) {
        return Err(ValueError::BadWork(raw.work.to_string()));
    }
    let elapsed = raw.elapsed_ns as f64;
    match kind {
        ValueKind::Rate { scale } => {
            check_scale(scale)?;
            Ok(Value {
                value: raw.work / (elapsed / 1e9) / scale,
                subtracted_ns: 0.0,
            })
        }
        ValueKind::TimePerOp => {
            let subtracted = (raw.overhead_ns as f64).min(elapsed);
            Ok(Value {
                value: (elapsed - subtracted) / raw.work,
                subtracted_ns: subtracted,
            })
        }
    }
}

/// Work per CPU-second divided by the scale, for rate benchmarks whose sample carries a
/// non-zero CPU time; `None` otherwise.
pub fn cpu_rate(kind: ValueKind, raw: &RawSample) -> Option<f64> {
    let ValueKind::Rate { scale } = kind else {
        return None;
    };
    let cpu_ns = raw.cpu_ns.filter(|&c| c > 0)?;
    check_scale(scale).ok()?;
    (raw.work.is_finite() && raw.work > 0.0).then(|| raw.work / (cpu_ns as f64 / 1e9) / scale)
}

fn check_scale(scale: f64) -> Result<(), ValueError> {
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(ValueError::BadScale(scale.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(elapsed_ns: u64, work: f64, overhead_ns: u64, cpu_ns: Option<u64>) -> RawSample {
        RawSample {
            elapsed_ns,
            work,
            overhead_ns,
            cpu_ns,
            ..RawSample::default()
        }
    }

    #[test]
    fn rate_is_work_per_second_over_scale() {
        // 2e9 bytes in 0.5 s at scale 1e9 = 4 GB/s; overheads are not subtracted.
        let v = sample_value(
            ValueKind::Rate { scale: 1e9 },
            &raw(500_000_000, 2e9, 1_000, None),
        )
        .unwrap();
        assert_eq!(v.value, 4.0);
        assert_eq!(v.subtracted_ns, 0.0);
    }

    #[test]
    fn time_per_op_subtracts_the_samples_overhead() {
        // 10_000 ns elapsed, 520 ns of clock reads and loop: 9_480 ns over 100 ops.
        let v = sample_value(ValueKind::TimePerOp, &raw(10_000, 100.0, 520, None)).unwrap();
        assert_eq!(v.subtracted_ns, 520.0);
        assert!((v.value - 94.8).abs() < 1e-12);
    }

    #[test]
    fn subtraction_never_makes_a_negative_time() {
        let v = sample_value(ValueKind::TimePerOp, &raw(100, 10.0, 150, None)).unwrap();
        assert_eq!((v.value, v.subtracted_ns), (0.0, 100.0));
    }

    #[test]
    fn unusable_samples_are_errors() {
        let k = ValueKind::TimePerOp;
        assert_eq!(
            sample_value(k, &raw(0, 1.0, 0, None)),
            Err(ValueError::ZeroElapsed)
        );
        assert!(sample_value(k, &raw(10, 0.0, 0, None)).is_err());
        assert!(sample_value(k, &raw(10, f64::NAN, 0, None)).is_err());
        let bad_scale = ValueKind::Rate { scale: 0.0 };
        assert!(sample_value(bad_scale, &raw(10, 1.0, 0, None)).is_err());
    }

    #[test]
    fn cpu_rate_uses_cpu_time() {
        let k = ValueKind::Rate { scale: 1e6 };
        // 4e6 ops in 1 s wall on 2 CPUs busy all along: 2 Mops per CPU-second.
        let r = raw(1_000_000_000, 4e6, 0, Some(2_000_000_000));
        assert_eq!(sample_value(k, &r).unwrap().value, 4.0);
        assert_eq!(cpu_rate(k, &r), Some(2.0));
        assert_eq!(cpu_rate(k, &raw(10, 1.0, 0, None)), None);
        assert_eq!(cpu_rate(k, &raw(10, 1.0, 0, Some(0))), None);
        assert_eq!(cpu_rate(ValueKind::TimePerOp, &r), None);
    }
}
