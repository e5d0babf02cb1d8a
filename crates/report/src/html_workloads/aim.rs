//! The `aim` section (paper 001 Table 2): a row per AIM9 row in the paper's order, named
//! as the paper names it (`add_double`, what it counts), with its throughput per
//! placement and the SMT speed-ups; then the paper's rows the run did not measure, each
//! with the reason it was skipped where it was.

use maud::html;
use smtlab_model::{ReportSection, RunResults};

use super::cells::cells_in;
use super::rows::Row;
use super::speedup_table::{no_pairs, speedup_table};
use crate::fmt::params;

/// The AIM9 row of `bench` from the run's catalog entries: its position (the paper's
/// order), AIM9's name and what it counts.
fn aim_row<'a>(r: &'a RunResults, bench: &str) -> Option<(usize, &'a str, &'a str)> {
    r.benchmarks
        .iter()
        .enumerate()
        .find_map(|(i, b)| match &b.report {
            ReportSection::AimRow { row, label } if b.name == bench => {
                Some((i, row.as_str(), label.as_str()))
            }
            _ => None,
        })
}

/// Paper 001 Table 2: a row per AIM9 benchmark.
pub(crate) fn aim(r: &RunResults) -> Option<maud::Markup> {
    let mut cells = cells_in(r, ReportSection::is_aim);
    if cells.is_empty() {
        return None;
    }
    let mut out = String::new();
    let p = &mut out;
    // The paper's order (the catalog's), then run order for rows the catalog lacks.
    cells.sort_by_key(|c| aim_row(r, &c.benchmark).map_or(usize::MAX, |(i, ..)| i));
    let label = |c: &&smtlab_model::CellRecord| {
        let ps = params(&c.flat_params());
        let name = match aim_row(r, &c.benchmark) {
            Some((_, row, label)) => format!("{row}: {label} ({})", c.benchmark),
            None => c.benchmark.clone(),
        };
        if ps == "-" {
            name
        } else {
            format!("{name} {ps}")
        }
    };
    let rows: Vec<Row<'_>> = crate::grouped(cells.iter().copied(), label)
        .into_iter()
        .map(|(label, cells)| Row {
            label,
            x: None,
            cells,
        })
        .collect();
    if !speedup_table(p, "AIM9 row", &rows) {
        p.push_str(&no_pairs(r).into_string());
    }
    // The paper's rows without a measured cell: skipped (with the reason) or not asked.
    let mut skipped: Vec<String> = Vec::new();
    let mut absent: Vec<&str> = Vec::new();
    for b in &r.benchmarks {
        let ReportSection::AimRow { row, .. } = &b.report else {
            continue;
        };
        if cells.iter().any(|c| c.benchmark == b.name) {
            continue;
        }
        match r.skipped.iter().find(|s| s.key.benchmark == b.name) {
            Some(s) => skipped.push(format!("{row} ({}): {}", b.name, s.reason)),
            None => absent.push(row),
        }
    }
    Some(html! {
        section id="aim" {
        h2 { "AIM9 rows (Vianney 2003, Table 2)" }
        p {
            "Paper 001 Table 2's layout: a row per AIM9 test in the paper's order, named as \
             AIM9 names it and with what it counts, its throughput per placement in its own \
             unit (mean ± 95% CI), and the SMT speed-ups."
        }
        (maud::PreEscaped(out))
        @if !skipped.is_empty() {
            p class="muted" { "Rows of the paper's table that could not run here:" }
            ul class="muted" { @for s in &skipped { li { (s) } } }
        }
        @if !absent.is_empty() {
            p class="muted" {
                "Rows of the paper's table not measured in this run: " (absent.join(", ")) "."
            }
        }
        }
    })
}
