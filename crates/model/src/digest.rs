//! A cell's samples in brief: what readers that load no samples (`smtlab fleet`, over
//! thousands of runs) need of them, kept with the cell when it is saved. The fleet view
//! reads a cell's values (its steadiness: drift, spread), the CPUs its work ran on
//! (single-threaded or not), and a few metrics (a limit reached, lost load agents, a
//! server's served rate, errors and latency percentiles, a co-run partner's values),
//! and each per-event series' distribution in brief (several hosts' distributions on
//! one chart); nothing else of a sample.

use std::collections::{BTreeMap, BTreeSet};

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
    /// Each per-event series in brief ([`series_in_brief`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub series: BTreeMap<String, Vec<f64>>,
}

/// Points a series is kept at in a digest: every percentile, 0 to 100.
pub const SERIES_POINTS: usize = 101;

/// A per-event series in brief: the events themselves, sorted, up to
/// [`SERIES_POINTS`] of them; beyond, its percentiles 0, 1, ..., 100. Either way a
/// cumulative distribution drawn through the points is the series' own (to a
/// percentile); the event count is not kept.
pub fn series_in_brief(events: &[f64]) -> Vec<f64> {
    let sorted = crate::stats::sorted(events);
    if sorted.len() <= SERIES_POINTS {
        return sorted;
    }
    (0..SERIES_POINTS)
        .filter_map(|p| crate::stats::percentile_of_sorted(&sorted, p as f64))
        .collect()
}

impl SampleDigest {
    pub fn of(samples: &[SampleRecord]) -> SampleDigest {
        let widest_cpus = samples
            .iter()
            .map(|s| s.cpus.iter().copied().collect::<BTreeSet<u32>>())
            .max_by_key(BTreeSet::len)
            .unwrap_or_default()
            .into_iter()
            .collect();
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
            series: BTreeMap::new(),
        }
    }

    /// The digest with `series` (a cell's per-event series) kept in brief.
    pub fn with_series(mut self, series: &BTreeMap<String, Vec<f64>>) -> SampleDigest {
        self.series = series
            .iter()
            .filter(|(_, events)| !events.is_empty())
            .map(|(name, events)| (name.clone(), series_in_brief(events)))
            .collect();
        self
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

    #[test]
    fn a_series_is_kept_whole_up_to_a_hundred_and_one_events_then_as_percentiles() {
        let few: Vec<f64> = (0..50).rev().map(f64::from).collect();
        let many: Vec<f64> = (0..10_000).rev().map(f64::from).collect();
        let series = BTreeMap::from([
            ("few".to_string(), few.clone()),
            ("many".to_string(), many),
            ("none".to_string(), Vec::new()),
        ]);
        let d = SampleDigest::of(&[]).with_series(&series);
        assert_eq!(d.series["few"], crate::stats::sorted(&few));
        let m = &d.series["many"];
        assert_eq!(m.len(), SERIES_POINTS);
        assert_eq!((m[0], m[50], m[100]), (0.0, 4999.5, 9999.0));
        assert!(m.windows(2).all(|w| w[0] <= w[1]));
        assert!(!d.series.contains_key("none"));
    }
}
