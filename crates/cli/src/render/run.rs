//! One line per finished cell of `smtlab run`, printed as the cell finishes.

use smtlab_model::{CellRecord, SkippedCell};

use super::bench::num;
use super::table::Columns;

fn params_text(params: &std::collections::BTreeMap<String, String>) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Benchmark, placement, parameters, then what happened.
const COLUMNS: Columns<3> = Columns([18, 13, 28]);

pub fn cell_line(cell: &CellRecord) -> String {
    let s = &cell.result.summary;
    let what = format!(
        "median {} {} (mean {}{}{}{})",
        num(s.median),
        cell.unit,
        if s.n < 2 {
            format!("{} n={}, no interval", num(s.mean), s.n)
        } else {
            format!("{} +- {:.1}%, n={}", num(s.mean), 100.0 * s.ci95_rel, s.n)
        },
        match cell.result.rounds.len() {
            0 | 1 => String::new(),
            n => format!(" in {n} rounds"),
        },
        if cell.result.met_target() {
            ""
        } else {
            ", not converged"
        },
        cell.result
            .unsteady()
            .map(|d| format!(", unsteady: moved {:.1}% during the cell", 100.0 * d))
            .unwrap_or_default()
    );
    let params = params_text(&cell.params);
    let line = COLUMNS.line(&[&cell.benchmark, &cell.placement_spec, &params, &what]);
    line.trim_end_matches('\n').to_string()
}

pub fn skipped_line(s: &SkippedCell) -> String {
    let params = params_text(&s.key.params);
    let what = format!("skipped: {}", s.reason);
    let line = COLUMNS.line(&[&s.key.benchmark, &s.key.placement, &params, &what]);
    line.trim_end_matches('\n').to_string()
}
