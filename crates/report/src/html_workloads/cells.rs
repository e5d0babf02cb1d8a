//! Picking a run's cells and reading what they recorded: the cells of a kind, their
//! placements in the page's column order, and the mean or sum of a metric over samples.

use smtlab_model::stats;
use smtlab_model::{CellRecord, RunResults};

/// Placement columns in this order; others follow in run order.
const ORDER: [&str; 6] = ["1c1t", "1c2t", "2c1t", "2c2t", "cores", "all"];

pub(super) fn cells_of(r: &RunResults, pick: impl Fn(&CellRecord) -> bool) -> Vec<&CellRecord> {
    r.cells.iter().filter(|c| pick(c)).collect()
}

/// Placements of `cells`, in [`ORDER`] then run order.
pub(super) fn placements(cells: &[&CellRecord]) -> Vec<String> {
    let mut v: Vec<String> = ORDER
        .iter()
        .filter(|p| cells.iter().any(|c| c.placement.name == **p))
        .map(|p| p.to_string())
        .collect();
    for c in cells {
        if !v.contains(&c.placement.name) {
            v.push(c.placement.name.clone());
        }
    }
    v
}

fn metric_values(c: &CellRecord, key: &str) -> Vec<f64> {
    c.result
        .samples
        .iter()
        .filter_map(|s| s.metrics.get(key).copied())
        .collect()
}

/// Mean over the samples that carry `key`; `None` when none does.
pub(super) fn metric(c: &CellRecord, key: &str) -> Option<f64> {
    stats::mean(&metric_values(c, key))
}

pub(super) fn metric_sum(c: &CellRecord, key: &str) -> Option<f64> {
    let v = metric_values(c, key);
    (!v.is_empty()).then(|| v.iter().sum())
}
