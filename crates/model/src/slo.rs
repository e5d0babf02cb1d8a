//! A latency target (`p99=5ms`): which percentile of a load's latencies must stay
//! within which time. Parsed once here, so the command line, the `web-slo` workload and
//! the report read a target the same way.

use serde::{Deserialize, Serialize};

/// A latency target: percentile `pct` of the latencies at most `max_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub pct: f64,
    pub max_ns: u64,
}

impl Slo {
    /// Parses `p99=5ms` (`p50`, `p90`, `p99`, `p99.9`; `us`, `ms` or `s`).
    pub fn parse(text: &str) -> Result<Slo, SloError> {
        Self::parse_text(text).map_err(SloError)
    }

    // The work of the public function above, its reason as text.
    fn parse_text(text: &str) -> Result<Slo, String> {
        let bad = || {
            format!(
                "{text:?}: expected a percentile and a time, e.g. p99=5ms, p99.9=20ms, p50=500us"
            )
        };
        let (p, t) = text.trim().split_once('=').ok_or_else(bad)?;
        let pct: f64 = p
            .trim()
            .strip_prefix('p')
            .and_then(|x| x.parse().ok())
            .filter(|x: &f64| *x > 0.0 && *x < 100.0)
            .ok_or_else(bad)?;
        let t = t.trim();
        let (num, scale) = if let Some(x) = t.strip_suffix("us") {
            (x, 1e3)
        } else if let Some(x) = t.strip_suffix("ms") {
            (x, 1e6)
        } else if let Some(x) = t.strip_suffix('s') {
            (x, 1e9)
        } else {
            return Err(bad());
        };
        let v: f64 = num.trim().parse().map_err(|_| bad())?;
        if !(v.is_finite() && v > 0.0 && v * scale < 60e9) {
            return Err(bad());
        }
        Ok(Slo {
            pct,
            max_ns: (v * scale) as u64,
        })
    }
}

/// A latency target that does not parse; the text says what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SloError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_their_unit_and_bad_ones_say_what_is_expected() {
        assert_eq!(
            Slo::parse("p99=5ms").unwrap(),
            Slo {
                pct: 99.0,
                max_ns: 5_000_000
            }
        );
        assert_eq!(Slo::parse("p99.9=20ms").unwrap().pct, 99.9);
        assert_eq!(Slo::parse("p50=500us").unwrap().max_ns, 500_000);
        assert_eq!(Slo::parse(" p90 = 1s ").unwrap().max_ns, 1_000_000_000);
        for bad in ["99=5ms", "p99", "p99=5", "p100=5ms", "p99=-1ms", "p99=fast"] {
            let e = Slo::parse(bad).unwrap_err().0;
            assert!(e.contains("expected a percentile and a time"), "{bad}: {e}");
        }
    }
}
