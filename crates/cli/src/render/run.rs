//! One line per finished cell of `smtlab run`, printed as the cell finishes.

use smtlab_model::{CellRecord, SkippedCell};

use super::bench::num;

fn params_text(params: &std::collections::BTreeMap<String, String>) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn cell_line(cell: &CellRecord) -> String {
    let s = &cell.result.summary;
    format!(
        "{:<18} {:<13} {:<28} median {} {} (mean {} +- {:.1}%, n={}{}{}{})",
        cell.benchmark,
        cell.placement_spec,
        params_text(&cell.params),
        num(s.median),
        cell.unit,
        num(s.mean),
        100.0 * s.ci95_rel,
        s.n,
        match cell.result.rounds.len() {
            0 | 1 => String::new(),
            n => format!(" in {n} rounds"),
        },
        if cell.result.converged {
            ""
        } else {
            ", not converged"
        },
        cell.result
            .unsteady()
            .map(|d| format!(", unsteady: moved {:.1}% during the cell", 100.0 * d))
            .unwrap_or_default()
    )
}

pub fn skipped_line(s: &SkippedCell) -> String {
    format!(
        "{:<18} {:<13} {:<28} skipped: {}",
        s.key.benchmark,
        s.key.placement,
        params_text(&s.key.params),
        s.reason
    )
}
