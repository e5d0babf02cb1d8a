//! Picking a run's cells and reading what they recorded: the cells of a kind, their
//! placements in the page's column order, the mean or sum of a metric over samples, and
//! the cells' means in one column's scale.

use smtlab_model::placement::Named;
use smtlab_model::stats;
use smtlab_model::{CellRecord, ReportSection, RunResults};

use crate::units::Column;

/// Placement columns in this order; others follow in run order.
const ORDER: [Named; 6] = [
    Named::OneCore,
    Named::Siblings,
    Named::TwoCores,
    Named::TwoCoresSmt,
    Named::Cores,
    Named::All,
];

pub(crate) fn cells_of(r: &RunResults, pick: impl Fn(&CellRecord) -> bool) -> Vec<&CellRecord> {
    r.cells.iter().filter(|c| pick(c)).collect()
}

/// The cells of the benchmarks whose report section `pick` accepts (by the run's
/// catalog entries, never by name).
pub(crate) fn cells_in(r: &RunResults, pick: impl Fn(&ReportSection) -> bool) -> Vec<&CellRecord> {
    cells_of(r, |c| section(r, c).is_some_and(&pick))
}

/// The report section of `c`'s benchmark, when the run carries its catalog entry.
pub(crate) fn section<'a>(r: &'a RunResults, c: &CellRecord) -> Option<&'a ReportSection> {
    r.info(&c.benchmark).map(|i| &i.report)
}

/// The main parameter of the benchmark of `cells` (paper 001's row heading).
pub(super) fn main_param<'a>(r: &'a RunResults, cells: &[&CellRecord]) -> Option<&'a str> {
    r.info(&cells.first()?.benchmark)?.main_param.as_deref()
}

/// Placements of `cells`, in [`ORDER`] then run order.
pub(super) fn placements(cells: &[&CellRecord]) -> Vec<String> {
    let known = ORDER
        .iter()
        .filter(|p| cells.iter().any(|c| c.placement.name == **p));
    let all = known.map(|p| p.to_string());
    crate::first_seen(all.chain(cells.iter().map(|c| c.placement.name.clone())))
}

/// The values of metric `key` over the samples that carry it.
pub(crate) fn metric_values(c: &CellRecord, key: &str) -> Vec<f64> {
    c.result
        .samples
        .iter()
        .filter_map(|s| s.metrics.get(key).copied())
        .collect()
}

/// Mean over the samples that carry `key`; `None` when none does.
pub(crate) fn metric(c: &CellRecord, key: &str) -> Option<f64> {
    stats::mean(&metric_values(c, key))
}

pub(super) fn metric_sum(c: &CellRecord, key: &str) -> Option<f64> {
    let v = metric_values(c, key);
    (!v.is_empty()).then(|| v.iter().sum())
}

/// The column that writes the means of `cells` (the first cell's unit, scaled for all).
pub(super) fn mean_column(cells: &[&CellRecord]) -> Column {
    let means: Vec<f64> = cells.iter().map(|c| c.result.summary.mean).collect();
    Column::for_values(&cells[0].unit, &means)
}

/// A cell's mean in `col`'s scale, with its 95% interval when it has two samples or more.
pub(super) fn scaled_mean(c: &CellRecord, col: &Column) -> (f64, Option<(f64, f64)>) {
    let s = &c.result.summary;
    let d = col.divisor;
    let ci = (s.n >= 2).then(|| {
        (
            (s.mean - s.ci95_half_width) / d,
            (s.mean + s.ci95_half_width) / d,
        )
    });
    (s.mean / d, ci)
}
