//! Pooling a cell measured in several rounds (`smtlab bench --repeat N`).
//!
//! A cell's confidence interval only describes the seconds in which its samples were
//! taken. On a machine whose speed moves over seconds (a shared virtual-machine host,
//! background load, thermal limits), a second measurement can disagree with the first
//! by far more than that interval. Measuring each placement in several rounds, the
//! placements taking turns and each round starting from a fresh instance, shows that
//! disagreement (the spread of the rounds' medians) and lets slow drifts fall on every
//! placement alike, so their ratio is steadier than a single pair of cells.

use std::collections::BTreeMap;

use smtlab_model::Round;

use crate::stats;
use smtlab_model::result::{CellResult, StopReason};

/// Pools the rounds of one cell, in the order measured: samples concatenated (each
/// keeps its own iteration count), statistics over all of them, one [`Round`] per
/// input. Calibration, warm-up and overheads are the first round's; the cell converged
/// if every round did. A single round comes back unchanged; `None` for no rounds.
pub fn pool(rounds: Vec<CellResult>) -> Option<CellResult> {
    if rounds.len() <= 1 {
        return rounds.into_iter().next();
    }
    let summaries: Vec<Round> = rounds
        .iter()
        .map(|r| Round {
            summary: r.summary.clone(),
            converged: r.converged,
            iterations: r.iterations,
            wall_ns: r.wall_ns,
        })
        .collect();
    let converged = rounds.iter().all(|r| r.converged);
    let wall_ns = rounds.iter().map(|r| r.wall_ns).sum();
    let subtracted_ns: f64 = rounds
        .iter()
        .map(|r| r.subtracted_ns_per_sample * r.samples.len() as f64)
        .sum();
    let mut iter = rounds.into_iter();
    let mut out = iter.next()?;
    let mut series: BTreeMap<String, Vec<f64>> = std::mem::take(&mut out.series);
    for r in iter {
        out.samples.extend(r.samples);
        for (name, mut points) in r.series {
            series.entry(name).or_default().append(&mut points);
        }
        if r.stop_reason != StopReason::Converged {
            out.stop_reason = r.stop_reason;
        }
    }
    let values: Vec<f64> = out.samples.iter().map(|s| s.value).collect();
    out.summary = stats::summarize(&values)?;
    out.at_limit = smtlab_model::AtLimit::of_samples(&out.samples);
    if out.cpu_rate.is_some() {
        // Only rates have a CPU rate, and for a rate `value = work / elapsed / scale`,
        // so `work / cpu / scale` is `value * elapsed / cpu`.
        let cpu_rates: Vec<f64> = out
            .samples
            .iter()
            .filter_map(|s| {
                let cpu_ns = s.cpu_ns.filter(|&c| c > 0)?;
                Some(s.value * s.elapsed_ns as f64 / cpu_ns as f64)
            })
            .collect();
        out.cpu_rate = stats::summarize(&cpu_rates);
    }
    let spreads: Vec<f64> = out
        .samples
        .iter()
        .filter_map(|s| s.start_spread_ns.map(|v| v as f64))
        .collect();
    out.start_spread_ns = stats::summarize(&spreads);
    out.subtracted_ns_per_sample = subtracted_ns / out.samples.len() as f64;
    out.series = series;
    out.converged = converged;
    out.wall_ns = wall_ns;
    out.rounds = summaries;
    Some(out)
}
