//! The verdict of `smtlab exec` and the SMT yield table: the ratios of placements, each
//! with its interval and the words every other output prints with it.

use std::collections::BTreeMap;

use crate::glossary::{Term, link};
use maud::{Markup, PreEscaped, html};
use smtlab_model::placement::Named;
use smtlab_model::{CellRecord, Direction, ReportSection, RunResults};

use crate::fmt::{params, times};
use crate::html_parts::{Absent, BR, headline};
use crate::svg;
use crate::units::Column;
use smtlab_model::verdict::PairKind;

use crate::yields::{no_yields_reason, smt_yields};

/// The `exec` section: what the placements did for the user's own command
/// (`smtlab exec`), as the one verdict ([`smtlab_model::verdict`]) of each placement
/// over the first, with its Fieller 95% interval, in one sentence per placement: the
/// same figure and sign as the terminal's.
pub(super) fn exec_verdict(r: &RunResults) -> Result<Markup, Absent> {
    let cells = crate::html_workloads::cells::cells_in(r, |s| *s == ReportSection::Exec);
    if cells.is_empty() {
        return Err(Absent("no smtlab exec command".into()));
    }
    let order = crate::first_seen(cells.iter().map(|c| c.flat_params()));
    Ok(html! {
        section id="exec" {
            h2 { "Verdict" }
            @for ps in order {
                (verdict_group(&cells, &ps))
            }
            @if !r.run.topology.smt_visible() {
                p class="sub" {
                    "No SMT visible on this machine, so no SMT verdict: the comparison is of \
                     cores."
                }
            }
        }
    })
}

/// The sentences of one parameter set: each placement against the first.
fn verdict_group(cells: &[&CellRecord], ps: &BTreeMap<String, String>) -> Markup {
    let group: Vec<&&CellRecord> = cells.iter().filter(|c| c.flat_params() == *ps).collect();
    let base = group[0];
    let col = Column::for_values(
        &base.unit,
        &group.iter().map(|c| headline(c).0).collect::<Vec<_>>(),
    );
    html! {
        p {
            code { (params(ps)) } ": values in " (col.unit) ", " (base.direction.as_str())
            " is better; " (base.result.summary.n) " runs per placement."
        }
        ul class="verdict" {
            @for c in group.iter().skip(1) {
                // The one verdict (smtlab_model::verdict): the ratio of the means in the
                // cells' own unit (mean times for a command), as the terminal prints it.
                @if let Some(v) = smtlab_model::verdict::verdict(base, c) {
                    li {
                        // The gain and the verdict in the words `exec` and `advise` use.
                        @let q = &v.speedup;
                        b { (verdict_subject(base, c)) " " (crate::fmt::gain_ci(q.ratio, q.ci95_low, q.ci95_high)) }
                        ": " (crate::fmt::verdict(&v))
                        " for this command on this machine; " (c.placement.name) " "
                        (col.with_unit(headline(c).0)) " vs " (base.placement.name) " "
                        (col.with_unit(headline(base).0)) "."
                    }
                }
            }
        }
        @if group.len() < 2 {
            p { "Only one placement measured: nothing to compare it with." }
        }
    }
}

fn verdict_subject(base: &CellRecord, c: &CellRecord) -> String {
    let (b, o) = (base.placement.name.as_str(), c.placement.name.as_str());
    match (Named::parse(b), Named::parse(o)) {
        (Some(Named::OneCore), Some(Named::Siblings)) => {
            "SMT (a second thread on the same core) gives".to_string()
        }
        (Some(Named::OneCore), Some(Named::TwoCores)) => "a second core gives".to_string(),
        _ => format!("{o} against {b} gives"),
    }
}

fn ratio_cell(y: &crate::Yield, range: (f64, f64)) -> Markup {
    if y.idle_sibling {
        return html! {
            td class="muted" title=(crate::yields::IDLE_SIBLING_LEGEND) {
                (crate::yields::IDLE_SIBLING_SHORT)
            }
        };
    }
    let r = &y.ratio;
    // The interval and the verdict's words as every other output prints them.
    let words = match &y.unsteady {
        Some(why) => html! { (link(Term::Unsteady)) " (" (why) ")" },
        None => html! { (y.significance.words()) },
    };
    let ci = match (r.ci95_low, r.ci95_high) {
        (Some(lo), Some(hi)) => html! { "[" (times(lo)) ", " (times(hi)) "] " (words) },
        _ => words,
    };
    html! {
        td class="yield" {
            (times(r.ratio)) "x"
            (PreEscaped(svg::ci_strip(r.ratio, r.ci95_low, r.ci95_high, range)))
            (BR) span class="sub" { (ci) }
        }
    }
}

pub(super) fn smt_yield(r: &RunResults) -> Result<Markup, Absent> {
    let rows = smt_yields(r);
    if rows.is_empty() {
        // Named under the header as `SMT yield: WHY`: the reason alone.
        return Err(Absent(
            no_yields_reason(r).unwrap_or_else(|| "none measured".into()),
        ));
    }
    // One scale for every strip, so that they can be compared down a column.
    let bounds: Vec<f64> = rows
        .iter()
        .flat_map(|row| PairKind::YIELDS.iter().filter_map(|k| row.get(*k)))
        .filter(|y| !y.idle_sibling)
        .flat_map(|y| [Some(y.ratio.ratio), y.ratio.ci95_low, y.ratio.ci95_high])
        .flatten()
        .chain([1.0])
        .collect();
    // The strips are logarithmic: pad by a ratio, and never reach zero.
    let (lo, hi) = svg::extent(bounds.into_iter().filter(|v| *v > 0.0)).unwrap_or((0.5, 2.0));
    let pad = (hi / lo).max(1.1).powf(0.05);
    let range = (lo / pad, hi * pad);
    Ok(html! {
        section id="smt-yield" {
            h2 { "SMT yield" }
            p {
                "Each " (link(Term::Yield)) " with its " (link(Term::Interval)) ", per \
                 benchmark and parameters; for lower-is-better benchmarks (marked " b { "lower" }
                ") the ratio is inverted, value(base) / value(SMT), so above 1 still means \
                 faster with SMT. The strip shows the interval against 1: green when entirely \
                 above, red when entirely below. Also: " (link(Term::Unsteady)) ", "
                (link(Term::SingleThreaded)) "."
            }
            table {
                tr {
                    th { "benchmark" } th { "params" } th { "unit" } th { "better" }
                    @for k in PairKind::YIELDS {
                        th { (k.name()) (BR) span class="sub" { (k.heading()) } }
                    }
                }
                @for row in &rows {
                    tr {
                        td { (row.benchmark) }
                        td { code { (params(&row.params)) } }
                        td { (row.unit) }
                        td {
                            @match row.direction {
                                Direction::Higher => "higher",
                                Direction::Lower => b { "lower" },
                            }
                        }
                        @for k in PairKind::YIELDS {
                            @match row.get(k) {
                                Some(y) => (ratio_cell(y, range)),
                                None => td class="muted" { "not measured" },
                            }
                        }
                    }
                }
            }
        }
    })
}
