//! A cell's samples in brief: what readers that load no samples (`smtlab fleet`, over
//! thousands of runs) need of them, kept with the cell when it is saved. The fleet view
//! reads a cell's values (its steadiness: drift, spread), the CPUs its work ran on
//! (single-threaded or not), and a few metrics (a limit reached, lost load agents, a
//! server's served rate, errors and latency percentiles, a co-run partner's values);
//! nothing else of a sample.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::SampleRecord;
use crate::metrics::{corun, limit, web};

/// The metrics a digest keeps: those the fleet view and the advice read from samples.
pub const DIGEST_METRICS: [&str; 14] = [
    limit::RANGE_END,
    limit::CEILING,
    limit::LOAD_GENERATOR,
    web::AGENTS,
    web::AGENTS_LOST,
    web::REQUESTS_PER_S,
    web::ERRORS,
    web::UNSENT,
    web::LATENCY_P50_NS,
    web::LATENCY_P99_NS,
    web::LATENCY_P999_NS,
    corun::PARTNER_VALUE,
    corun::PARTNER_ALONE_VALUE,
    corun::PARTNER_SAMPLES,
];

/// A cell's samples in brief ([`SampleDigest::of`]); [`SampleDigest::samples`] gives
/// them back as far as it holds them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleDigest {
    /// Every sample's value, in order.
    pub values: Vec<f64>,
    /// The CPUs of the sample that ran on the most distinct CPUs (empty: none said).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub widest_cpus: Vec<u32>,
    /// Each metric of [`DIGEST_METRICS`] that some sample carries: every sample's value
    /// of it in order, `None` where a sample lacks it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, Vec<Option<f64>>>,
}

impl SampleDigest {
    pub fn of(samples: &[SampleRecord]) -> SampleDigest {
        let widest_cpus = samples
            .iter()
            .map(|s| {
                let mut c = s.cpus.clone();
                c.sort_unstable();
                c.dedup();
                c
            })
            .max_by_key(Vec::len)
            .unwrap_or_default();
        let metrics = DIGEST_METRICS
            .iter()
            .filter(|name| samples.iter().any(|s| s.metrics.contains_key(**name)))
            .map(|name| {
                let per: Vec<Option<f64>> = samples
                    .iter()
                    .map(|s| s.metrics.get(*name).copied())
                    .collect();
                (name.to_string(), per)
            })
            .collect();
        SampleDigest {
            values: samples.iter().map(|s| s.value).collect(),
            widest_cpus,
            metrics,
        }
    }

    /// The samples as far as the digest holds them: each with its value and its digest
    /// metrics, the first with the widest CPUs; no timing, work or other metrics.
    /// Enough for everything the fleet view reads (`CellResult::cpus_used`,
    /// `unsteady_reason`, `limit`, the advice's served rates and latencies).
    pub fn samples(&self) -> Vec<SampleRecord> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, &value)| SampleRecord {
                value,
                iterations: 0,
                elapsed_ns: 0,
                work: 0.0,
                cpu_ns: None,
                start_spread_ns: None,
                cpus: if i == 0 {
                    self.widest_cpus.clone()
                } else {
                    Vec::new()
                },
                metrics: self
                    .metrics
                    .iter()
                    .filter_map(|(k, per)| Some((k.clone(), (*per.get(i)?)?)))
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(value: f64, cpus: &[u32], metrics: &[(&str, f64)]) -> SampleRecord {
        SampleRecord {
            value,
            iterations: 10,
            elapsed_ns: 1_000,
            work: 10.0,
            cpu_ns: Some(900),
            start_spread_ns: None,
            cpus: cpus.to_vec(),
            metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    #[test]
    fn what_the_fleet_reads_survives_the_digest_and_nothing_else_is_kept() {
        let samples = vec![
            sample(10.0, &[0], &[(web::LATENCY_P99_NS, 5e6), ("wake_ns", 3.0)]),
            sample(12.0, &[0, 1, 1], &[(limit::CEILING, 64.0)]),
            sample(11.0, &[1], &[(web::LATENCY_P99_NS, 6e6)]),
        ];
        let d = SampleDigest::of(&samples);
        assert_eq!(d.values, [10.0, 12.0, 11.0]);
        assert_eq!(d.widest_cpus, [0, 1]);
        assert!(!d.metrics.contains_key("wake_ns"));
        assert_eq!(d.metrics[web::LATENCY_P99_NS], [Some(5e6), None, Some(6e6)]);
        // Through JSON, as the store keeps it.
        let back: SampleDigest = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        let thin = back.samples();
        assert_eq!(thin.len(), 3);
        assert_eq!(thin[1].metrics.get(limit::CEILING), Some(&64.0));
        assert!(!thin[1].metrics.contains_key(web::LATENCY_P99_NS));
        // What the cell's readers compute is the same from either.
        let cpus = |s: &[SampleRecord]| {
            s.iter()
                .map(|x| {
                    let mut c = x.cpus.clone();
                    c.sort_unstable();
                    c.dedup();
                    c.len()
                })
                .max()
        };
        assert_eq!(cpus(&thin), cpus(&samples));
        assert_eq!(
            crate::AtLimit::of_samples(&thin),
            crate::AtLimit::of_samples(&samples)
        );
        assert!(SampleDigest::of(&[]).samples().is_empty());
    }
}
