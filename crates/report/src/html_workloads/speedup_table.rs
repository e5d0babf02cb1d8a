//! Paper 001's speed-up table (the layout of its Tables 2-6): the value per placement,
//! the `1c2t/1c1t` and `2c2t/2c1t` speed-ups with their intervals and their geometric
//! mean; the one line a section shows when it has no speed-up; the number cells every
//! workload table writes.

use maud::{Markup, html};
use smtlab_model::stats;
use smtlab_model::verdict::{self, PairKind, Verdict};
use smtlab_model::{CellRecord, RunResults};

use super::cells::{mean_column, placements};
use super::rows::Row;
use crate::fmt::times;
use crate::html_parts::BR;
use crate::units::Column;

/// The pairs a workload table shows: the papers' two SMT speed-ups.
const PAIRS: [PairKind; 2] = [PairKind::SmtYield, PairKind::DualCoreSmtGain];

/// The verdict on a pair among `cells` (one parameter set): the one verdict, or `None`
/// when a side is missing or both sides ran on the same CPUs.
fn pair_speedup(cells: &[&CellRecord], kind: PairKind) -> Option<Verdict> {
    let (b, s) = kind.placements();
    let smt = cells.iter().find(|c| c.placement.name == s)?;
    let base = cells.iter().find(|c| c.placement.name == b)?;
    if smt.placement.cpu_set() == base.placement.cpu_set() {
        return None;
    }
    verdict::verdict(base, smt)
}

/// The one line a section gives where the run has no SMT pairs: why it shows no SMT
/// speed-up.
pub(super) fn no_pairs(r: &RunResults) -> Markup {
    let topo = &r.run.topology;
    let why = if topo.smt_visible() {
        "No SMT speed-ups: none of these cells was measured on both placements of a pair \
         (1c1t and 1c2t, or 2c1t and 2c2t); the values per placement are shown instead."
            .into()
    } else {
        format!(
            "No SMT speed-ups: no SMT visible on this machine (smt/control: {}), so 1c2t and \
             2c2t cannot be measured; the values per placement are shown instead.",
            topo.smt.control.as_deref().unwrap_or("absent")
        )
    };
    html! { p class="muted no-smt" { (why) } }
}

/// A speed-up table cell: the ratio, its interval and what the verdict says, as
/// [`crate::fmt::verdict`] writes them (`unsteady` and why, where a cell would not
/// repeat).
fn speedup_td(v: &Verdict) -> Markup {
    let r = &v.speedup;
    let words =
        crate::fmt::verdict_words(v.significance, v.unsteady.as_deref(), v.at_limit.as_deref());
    html! {
        td class="yield" {
            (times(r.ratio)) "x" (BR)
            span class="sub" {
                @if let (Some(lo), Some(hi)) = (r.ci95_low, r.ci95_high) {
                    "[" (times(lo)) ", " (times(hi)) "] "
                }
                (words)
            }
        }
    }
}

/// A number's table cell, or a muted dash where there is none; the text is escaped.
pub(super) fn num_cell(text: Option<String>) -> Markup {
    match text {
        Some(t) => html! { td class="num" { (t) } },
        None => html! { td class="muted" { "-" } },
    }
}

pub(super) fn value_text(col: &Column, c: &CellRecord) -> String {
    let s = &c.result.summary;
    if s.n < 2 {
        format!("{} (n=1)", col.num(s.mean))
    } else {
        col.pm(s.mean, s.ci95_half_width)
    }
}

/// Paper 001's table layout: a row per `rows`, the value per placement (mean ± 95% CI),
/// each SMT pair's speed-up, and a last row with the geometric mean of the speed-ups.
/// Returns whether any speed-up was shown.
pub(super) fn speedup_table(p: &mut String, row_head: &str, rows: &[Row<'_>]) -> bool {
    let all: Vec<&CellRecord> = rows.iter().flat_map(|r| r.cells.iter().copied()).collect();
    if all.is_empty() {
        return false;
    }
    let places = placements(&all);
    let one_unit = all.iter().all(|c| c.unit == all[0].unit);
    let table_col = one_unit.then(|| mean_column(&all));
    let kinds: Vec<PairKind> = PAIRS
        .into_iter()
        .filter(|k| rows.iter().any(|r| pair_speedup(&r.cells, *k).is_some()))
        .collect();
    // The speed-ups of each pair over the rows, for the geometric mean.
    let ratios: Vec<Vec<f64>> = kinds
        .iter()
        .map(|k| {
            rows.iter()
                .filter_map(|row| pair_speedup(&row.cells, *k))
                .map(|v| v.speedup.ratio)
                .filter(|r| *r > 0.0 && r.is_finite())
                .collect()
        })
        .collect();
    let body: Vec<Markup> = rows
        .iter()
        .map(|row| {
            let col = table_col.clone().unwrap_or_else(|| mean_column(&row.cells));
            html! {
                tr {
                    td { (row.label) }
                    @if !one_unit { td { (col.unit) } }
                    @for pl in &places {
                        @let cell = row.cells.iter().find(|c| &c.placement.name == pl);
                        (num_cell(cell.map(|c| value_text(&col, c))))
                    }
                    @for k in &kinds {
                        @match pair_speedup(&row.cells, *k) {
                            Some(v) => (speedup_td(&v)),
                            None => td class="muted" { "-" },
                        }
                    }
                }
            }
        })
        .collect();
    let unit = table_col
        .as_ref()
        .filter(|c| !c.unit.is_empty())
        .map(|c| &c.unit);
    let table = html! {
        table {
            tr {
                th { (row_head) }
                @if !one_unit { th { "unit" } }
                @for pl in &places {
                    th { (pl) @if let Some(u) = unit { (BR) span class="sub" { (u) } } }
                }
                @for k in &kinds {
                    th { "speed-up" (BR) span class="sub" { (k.heading()) } }
                }
            }
            @for row in body { (row) }
            @if !kinds.is_empty() {
                tr {
                    th colspan=(1 + usize::from(!one_unit) + places.len()) {
                        "geometric mean of the speed-ups"
                    }
                    @for r in &ratios {
                        @match stats::geomean(r) {
                            Some(g) => td class="yield" {
                                (times(g)) "x" (BR) span class="sub" { "of " (r.len()) " rows" }
                            },
                            None => td class="muted" { "-" },
                        }
                    }
                }
            }
        }
    };
    p.push_str(&table.into_string());
    !kinds.is_empty()
}
