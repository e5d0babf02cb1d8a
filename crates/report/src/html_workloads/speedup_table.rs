//! Paper 001's speed-up table (the layout of its Tables 2-6): the value per placement,
//! the `1c2t/1c1t` and `2c2t/2c1t` speed-ups with their intervals and their geometric
//! mean; the one line a section shows when it has no speed-up; the number cells every
//! workload table writes.

use std::fmt::Write;

use smtlab_model::stats;
use smtlab_model::verdict::{self, Verdict};
use smtlab_model::{CellRecord, RunResults};

use super::cells::{mean_column, placements};
use super::rows::Row;
use crate::fmt::{esc, times};
use crate::units::Column;
use crate::yields::YieldKind;

/// The pairs a workload table shows: the papers' two SMT speed-ups.
const PAIRS: [YieldKind; 2] = [YieldKind::Smt, YieldKind::DualCore];

/// The verdict on a pair among `cells` (one parameter set): the one verdict, or `None`
/// when a side is missing or both sides ran on the same CPUs.
fn pair_speedup(cells: &[&CellRecord], kind: YieldKind) -> Option<Verdict> {
    let (s, b) = kind.placements();
    let smt = cells.iter().find(|c| c.placement.name == s)?;
    let base = cells.iter().find(|c| c.placement.name == b)?;
    if smt.placement.cpu_set() == base.placement.cpu_set() {
        return None;
    }
    verdict::verdict(base, smt)
}

/// Why a section shows no SMT speed-up, in one line.
pub fn no_pairs_reason(r: &RunResults) -> String {
    let topo = &r.run.topology;
    if topo.smt_visible() {
        "No SMT speed-ups: none of these cells was measured on both placements of a pair \
         (1c1t and 1c2t, or 2c1t and 2c2t); the values per placement are shown instead."
            .into()
    } else {
        format!(
            "No SMT speed-ups: no SMT visible on this machine (smt/control: {}), so 1c2t and \
             2c2t cannot be measured; the values per placement are shown instead.",
            topo.smt.control.as_deref().unwrap_or("absent")
        )
    }
}

pub(super) fn no_pairs_line(p: &mut String, r: &RunResults) {
    let _ = write!(
        p,
        "<p class=\"muted no-smt\">{}</p>",
        esc(&no_pairs_reason(r))
    );
}

/// A speed-up table cell: the ratio, its interval and what the verdict says, as
/// [`crate::fmt::verdict`] writes them (`unsteady` and why, where a cell would not
/// repeat).
fn speedup_td(v: &Verdict) -> String {
    let r = &v.speedup;
    let ci = match (r.ci95_low, r.ci95_high) {
        (Some(lo), Some(hi)) => format!("[{}, {}] ", times(lo), times(hi)),
        _ => String::new(),
    };
    let words = match &v.unsteady {
        Some(why) => format!("unsteady ({why})"),
        None => v.significance.words().to_string(),
    };
    format!(
        "<td class=\"yield\">{}x<br/><span class=\"sub\">{ci}{}</span></td>",
        times(r.ratio),
        esc(&words)
    )
}

/// A table cell without a value.
pub(super) const MUTED_TD: &str = "<td class=\"muted\">-</td>";

/// A number's table cell (`text` written and escaped by the caller), or [`MUTED_TD`]
/// where there is none.
pub(super) fn num_td(text: Option<String>) -> String {
    match text {
        Some(t) => format!("<td class=\"num\">{t}</td>"),
        None => MUTED_TD.into(),
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
    let kinds: Vec<YieldKind> = PAIRS
        .into_iter()
        .filter(|k| rows.iter().any(|r| pair_speedup(&r.cells, *k).is_some()))
        .collect();
    let _ = write!(p, "<table><tr><th>{}</th>", esc(row_head));
    if !one_unit {
        p.push_str("<th>unit</th>");
    }
    for pl in &places {
        let unit = table_col
            .as_ref()
            .filter(|c| !c.unit.is_empty())
            .map(|c| format!("<br/><span class=\"sub\">{}</span>", esc(&c.unit)))
            .unwrap_or_default();
        let _ = write!(p, "<th>{}{unit}</th>", esc(pl));
    }
    for k in &kinds {
        let _ = write!(
            p,
            "<th>speed-up<br/><span class=\"sub\">{}</span></th>",
            k.heading()
        );
    }
    p.push_str("</tr>");
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for row in rows {
        let col = table_col.clone().unwrap_or_else(|| mean_column(&row.cells));
        let _ = write!(p, "<tr><td>{}</td>", esc(&row.label));
        if !one_unit {
            let _ = write!(p, "<td>{}</td>", esc(&col.unit));
        }
        for pl in &places {
            let value = row.cells.iter().find(|c| &c.placement.name == pl);
            p.push_str(&num_td(value.map(|c| esc(&value_text(&col, c)))));
        }
        for (i, k) in kinds.iter().enumerate() {
            match pair_speedup(&row.cells, *k) {
                Some(v) => {
                    let r = v.speedup.ratio;
                    if r > 0.0 && r.is_finite() {
                        ratios[i].push(r);
                    }
                    p.push_str(&speedup_td(&v));
                }
                None => p.push_str(MUTED_TD),
            }
        }
        p.push_str("</tr>");
    }
    if !kinds.is_empty() {
        let _ = write!(
            p,
            "<tr><th colspan=\"{}\">geometric mean of the speed-ups</th>",
            1 + usize::from(!one_unit) + places.len()
        );
        for r in &ratios {
            match stats::geomean(r) {
                Some(g) => {
                    let _ = write!(
                        p,
                        "<td class=\"yield\">{}x<br/><span class=\"sub\">of {} rows</span></td>",
                        times(g),
                        r.len()
                    );
                }
                None => p.push_str(MUTED_TD),
            }
        }
        p.push_str("</tr>");
    }
    p.push_str("</table>");
    !kinds.is_empty()
}
