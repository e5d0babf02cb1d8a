//! The curve of a peak search over load points (`nfs-sfs search=peak`, SPEC SFS 3.0's
//! curve): per point the requested and achieved operations per second and the mean and
//! p99 response times, averaged over the cell's samples, read from the metrics the
//! workload writes ([`smtlab_model::metrics::nfs`]). The terminal rows and the HTML
//! table both come from [`curve`], so they agree. A cell is recognised by its metrics,
//! not by its benchmark's name.

use maud::{Markup, html};
use smtlab_model::metrics::nfs::{self as keys, PointField};
use smtlab_model::{CellRecord, stats};

use crate::fmt::num;
use crate::html_workloads::cells::metric_values;

/// One load point of a cell, its figures averaged over the samples that have it.
#[derive(Debug, Clone, PartialEq)]
pub struct PointFigures {
    /// Its place on the curve (0 first: the lowest requested rate).
    pub index: usize,
    pub requested_ops_per_s: f64,
    pub achieved_ops_per_s: f64,
    pub mean_response_ms: f64,
    pub p99_response_ms: f64,
    /// Samples in which the point's mean response was within the limit.
    pub within_limit: usize,
    /// Samples in which it achieved at least 95% of its requested rate.
    pub kept_up: usize,
    /// Samples whose value it was (the peak within the limit).
    pub chosen: usize,
    /// Samples that measured it.
    pub samples: usize,
}

/// The load points of a cell in rising order; empty for a cell without a curve.
pub fn curve(cell: &CellRecord) -> Vec<PointFigures> {
    let mut indices: Vec<usize> = cell
        .result
        .samples
        .iter()
        .flat_map(|s| s.metrics.keys())
        .filter_map(|k| keys::parse_point_key(k).map(|(i, _)| i))
        .collect();
    indices.sort_unstable();
    indices.dedup();
    indices
        .into_iter()
        .filter_map(|i| {
            let values = |f: PointField| metric_values(cell, &keys::point_key(i, f));
            let count = |f: PointField| values(f).iter().filter(|&&v| v == 1.0).count();
            let requested = values(PointField::RequestedOpsPerS);
            Some(PointFigures {
                index: i,
                requested_ops_per_s: stats::mean(&requested)?,
                achieved_ops_per_s: stats::mean(&values(PointField::AchievedOpsPerS))?,
                mean_response_ms: stats::mean(&values(PointField::MeanResponseMs))?,
                p99_response_ms: stats::mean(&values(PointField::P99ResponseMs))?,
                within_limit: count(PointField::WithinLimit),
                kept_up: count(PointField::KeptUp),
                chosen: cell
                    .result
                    .samples
                    .iter()
                    .filter(|s| s.metrics.get(keys::PEAK_POINT) == Some(&(i as f64)))
                    .count(),
                samples: requested.len(),
            })
        })
        .collect()
}

/// The cell's response-time limit in milliseconds, where its samples say it.
fn limit_ms(cell: &CellRecord) -> Option<f64> {
    cell.result
        .samples
        .iter()
        .find_map(|s| s.metrics.get(keys::LIMIT_MS).copied())
}

/// The terminal's text under a cell with a curve: a title line, then a row per point
/// (requested and achieved ops/s, mean and p99 response), marked where it was over the
/// limit, fell behind, or gave the peak; rows indented 4 spaces and under 80 columns.
/// `None` for other cells.
pub fn lines(cell: &CellRecord) -> Option<String> {
    let points = curve(cell);
    if points.is_empty() {
        return None;
    }
    let limit = limit_ms(cell)
        .map(|l| format!("; limit {} ms", num(l)))
        .unwrap_or_default();
    let mut out = format!(
        "load points (mean of {} samples{limit}):\n    {:>10} {:>10} {:>9} {:>9}",
        cell.result.samples.len(),
        "requested",
        "achieved",
        "mean ms",
        "p99 ms"
    );
    for p in &points {
        let mut marks = Vec::new();
        if p.within_limit < p.samples {
            marks.push("over the limit");
        }
        if p.kept_up < p.samples {
            marks.push("behind");
        }
        if p.chosen > 0 {
            marks.push("peak");
        }
        out.push_str(&format!(
            "\n    {:>10} {:>10} {:>9} {:>9}  {}",
            num(p.requested_ops_per_s),
            num(p.achieved_ops_per_s),
            num(p.mean_response_ms),
            num(p.p99_response_ms),
            marks.join(", ")
        ));
    }
    Some(
        out.lines()
            .map(str::trim_end)
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// The curve as an HTML table under the cell's parameters and placement; `None` for a
/// cell without one.
pub fn table(cell: &CellRecord) -> Option<Markup> {
    let points = curve(cell);
    if points.is_empty() {
        return None;
    }
    let limit = limit_ms(cell);
    Some(html! {
        table {
            tr {
                th { "point" }
                th { "requested ops/s" }
                th { "achieved ops/s" }
                th { "mean response ms" }
                th { "p99 response ms" }
                th { "within the limit" @if let Some(l) = limit { " (" (num(l)) " ms)" } }
                th { "peak in" }
            }
            @for p in &points {
                tr {
                    td.num { (p.index + 1) }
                    td.num { (num(p.requested_ops_per_s)) }
                    td.num { (num(p.achieved_ops_per_s)) @if p.kept_up < p.samples { " (behind in " (p.samples - p.kept_up) ")" } }
                    td.num { (num(p.mean_response_ms)) }
                    td.num { (num(p.p99_response_ms)) }
                    td { (p.within_limit) " of " (p.samples) }
                    td { (p.chosen) " of " (p.samples) }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_model::SampleRecord;

    /// A sample whose curve is `points` (requested, achieved, mean ms) under a 10 ms
    /// limit, its peak the best within.
    fn sample(points: &[(f64, f64, f64)], peak: usize) -> SampleRecord {
        let mut metrics = std::collections::BTreeMap::new();
        for (i, &(req, ach, mean)) in points.iter().enumerate() {
            for (f, v) in [
                (PointField::RequestedOpsPerS, req),
                (PointField::AchievedOpsPerS, ach),
                (PointField::MeanResponseMs, mean),
                (PointField::P99ResponseMs, 2.0 * mean),
                (PointField::KeptUp, f64::from(u8::from(ach >= 0.95 * req))),
                (PointField::WithinLimit, f64::from(u8::from(mean <= 10.0))),
            ] {
                metrics.insert(keys::point_key(i, f), v);
            }
        }
        metrics.insert(keys::PEAK_POINT.into(), peak as f64);
        metrics.insert(keys::LIMIT_MS.into(), 10.0);
        SampleRecord {
            value: points[peak].1,
            iterations: 1,
            elapsed_ns: 1,
            work: 1.0,
            cpu_ns: None,
            start_spread_ns: None,
            cpus: vec![0],
            metrics,
        }
    }

    fn cell(samples: Vec<SampleRecord>) -> CellRecord {
        let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
        CellRecord {
            benchmark: "nfs-sfs".into(),
            group: "nfs".into(),
            unit: "ops/s".into(),
            direction: smtlab_model::Direction::Higher,
            params: Default::default(),
            conditions: Default::default(),
            placement_spec: "1c1t".into(),
            placement: crate::testutil::placement("1c1t", "1c1t", 1, 1),
            result: crate::testutil::result(samples, &values),
            counters: None,
        }
    }

    #[test]
    fn the_curve_averages_samples_and_marks_the_peak_and_the_misses() {
        let c = cell(vec![
            sample(&[(100.0, 100.0, 1.0), (200.0, 150.0, 12.0)], 0),
            sample(&[(120.0, 118.0, 3.0), (240.0, 236.0, 8.0)], 1),
        ]);
        let pts = curve(&c);
        assert_eq!(pts.len(), 2);
        assert_eq!(pts[0].requested_ops_per_s, 110.0);
        assert_eq!(pts[0].achieved_ops_per_s, 109.0);
        assert_eq!((pts[0].chosen, pts[1].chosen), (1, 1));
        assert_eq!(
            (pts[1].within_limit, pts[1].kept_up, pts[1].samples),
            (1, 1, 2)
        );
        let l = lines(&c).unwrap();
        let rows: Vec<&str> = l.lines().collect();
        assert_eq!(rows.len(), 4, "{l}");
        assert!(rows[0].contains("limit 10.00 ms"), "{l}");
        assert_eq!(
            rows[2].split_whitespace().collect::<Vec<_>>(),
            ["110.0", "109.0", "2.000", "4.000", "peak"],
            "{l}"
        );
        assert!(rows[3].ends_with("  over the limit, behind, peak"), "{l}");
        assert!(l.lines().all(|r| r.chars().count() <= 80), "{l}");
        let t = table(&c).unwrap().into_string();
        assert!(t.contains("1 of 2") && t.contains("achieved ops/s"), "{t}");
    }

    #[test]
    fn a_cell_without_a_curve_has_no_lines() {
        let mut s = sample(&[(1.0, 1.0, 1.0)], 0);
        s.metrics.clear();
        let c = cell(vec![s]);
        assert!(curve(&c).is_empty() && lines(&c).is_none() && table(&c).is_none());
    }
}
