//! The tables at the foot of the page: the OS latencies in the layout of Vianney's
//! Table 1, every measured cell, and the cells skipped or not reached.

use std::collections::BTreeMap;

use maud::{Markup, html};
use smtlab_model::{CellRecord, ReportSection, RunResults};

use super::machine::pending_cells;
use crate::fmt::{cpus, params, pct2};
use crate::html_parts::Absent;
use crate::units::Column;

/// The OS latency table's row of `bench`: its position in the run's catalog entries
/// (the paper's order) and its entry's label and the parameters the label assumes.
fn os_row<'a>(
    r: &'a RunResults,
    bench: &str,
) -> Option<(usize, &'a str, &'a BTreeMap<String, String>)> {
    r.benchmarks
        .iter()
        .enumerate()
        .find_map(|(i, b)| match &b.report {
            ReportSection::OsLatency {
                label,
                label_params,
            } if b.name == bench => Some((i, label.as_str(), label_params)),
            _ => None,
        })
}

pub(super) fn os_latency(r: &RunResults) -> Result<Markup, Absent> {
    let os: Vec<&CellRecord> = r
        .cells
        .iter()
        .filter(|c| os_row(r, &c.benchmark).is_some())
        .collect();
    if os.is_empty() {
        return Err(Absent("no os benchmark".into()));
    }
    // Columns: placements in first-appearance order.
    let cols = crate::first_seen(os.iter().map(|c| c.placement.name.as_str()));
    // Rows: (benchmark, params) in the paper's order (the catalog's), then run order.
    let mut rows = crate::first_seen(os.iter().map(|c| (c.benchmark.as_str(), c.flat_params())));
    rows.sort_by_key(|(b, _)| os_row(r, b).map_or(usize::MAX, |(i, ..)| i));
    let missing: Vec<&str> = r
        .benchmarks
        .iter()
        .filter_map(|b| match &b.report {
            ReportSection::OsLatency { label, .. } => Some((b.name.as_str(), label.as_str())),
            _ => None,
        })
        .filter(|(name, _)| !os.iter().any(|c| c.benchmark == *name))
        .map(|(_, label)| label)
        .collect();
    Ok(html! {
        section id="os-latency" {
            h2 { "OS latencies (Vianney 2003, Table 1: LMbench kernel latencies)" }
            p {
                "Mean time per operation in microseconds with the 95% confidence interval of \
                 the mean, as the paper reports averages; smaller is better. Columns are the \
                 placements measured."
            }
            table {
                tr { th { "Kernel function" } @for col in &cols { th { (col) } } }
                @for (bench, ps) in &rows {
                    tr {
                        td { (os_label(r, bench, ps)) " " span class="sub" { (bench) } }
                        @for col in &cols {
                            (os_cell(os.iter().find(|c| {
                                c.benchmark == *bench && c.flat_params() == *ps && c.placement.name == *col
                            })))
                        }
                    }
                }
            }
            @if !missing.is_empty() {
                p class="muted" {
                    "Rows of Vianney's table not measured in this run: " (missing.join(", ")) "."
                }
            }
            p class="sub" { "Values in red did not reach the CI target." }
        }
    })
}

/// The row label: the paper's name of the benchmark (from its catalog entry), with its
/// parameters where they are not the paper's.
fn os_label(r: &RunResults, bench: &str, ps: &BTreeMap<String, String>) -> String {
    match os_row(r, bench) {
        Some((_, label, expected)) => {
            if ps == expected || ps.is_empty() {
                label.to_string()
            } else {
                format!("{label} ({})", params(ps))
            }
        }
        None if ps.is_empty() => bench.to_string(),
        None => format!("{bench} ({})", params(ps)),
    }
}

fn os_cell(cell: Option<&&CellRecord>) -> Markup {
    let Some(c) = cell else {
        return html! { td class="muted" { "not measured" } };
    };
    let s = &c.result.summary;
    // Nanoseconds become microseconds as in the paper; another unit is shown as it is,
    // with its name.
    let (f, unit) = if c.unit == "ns" {
        (1e-3, String::new())
    } else {
        (1.0, format!(" {}", c.unit))
    };
    // Two decimals down every column, as the paper prints its table.
    let text = if s.n > 1 {
        format!("{:.2} ± {:.2}", s.mean * f, s.ci95_half_width * f)
    } else {
        format!("{:.2} (n = 1)", s.mean * f)
    };
    let class = if c.result.met_target() {
        "num"
    } else {
        "num bad"
    };
    html! { td class=(class) { (text) (unit) } }
}

fn placement_label(c: &CellRecord) -> String {
    if c.placement.spec == c.placement.name || c.placement_spec == c.placement.name {
        c.placement.name.clone()
    } else {
        format!("{} ({})", c.placement.name, c.placement_spec)
    }
}

pub(super) fn cells(r: &RunResults) -> Result<Markup, Absent> {
    if r.cells.is_empty() {
        return Err(Absent("no cell was measured".into()));
    }
    let by_benchmark = crate::grouped(&r.cells, |c| c.benchmark.as_str());
    Ok(html! {
        section id="cells" {
            h2 { "All cells" }
            p {
                "Every measured cell, one table per benchmark (open one to see it); each table \
                 has one unit and one number format per column. Red: the cell did not reach \
                 its CI target."
            }
            @for (bench, cs) in &by_benchmark {
                (bench_cells(bench, cs))
            }
        }
    })
}

/// One benchmark's cells in a closed `details`, one unit per column.
fn bench_cells(bench: &str, cs: &[&CellRecord]) -> Markup {
    let first = cs[0];
    let vals: Vec<f64> = cs
        .iter()
        .flat_map(|c| {
            let s = &c.result.summary;
            [s.median, s.mean, s.min]
        })
        .collect();
    let col = Column::for_values(&first.unit, &vals);
    let u = &col.unit;
    let unconverged = cs.iter().filter(|c| !c.result.met_target()).count();
    html! {
        details {
            summary {
                b { (bench) } " "
                span class="sub" {
                    (cs.len()) " cell" @if cs.len() != 1 { "s" } ", " (first.unit) ", "
                    (first.direction.as_str()) " is better"
                    @if unconverged > 0 { ", " (unconverged) " not converged" }
                }
            }
            table {
                tr {
                    th { "params" } th { "placement" } th { "CPUs" }
                    th { "median (" (u) ")" } th { "p25-p75 (" (u) ")" }
                    th { "mean ± 95% CI (" (u) ")" } th { "CI" } th { "min (" (u) ")" }
                    th { "n" } th { "converged" }
                }
                @for c in cs {
                    (cell_row(c, &col))
                }
            }
        }
    }
}

fn cell_row(c: &CellRecord, col: &Column) -> Markup {
    let s = &c.result.summary;
    let (ci, rel) = if s.n > 1 {
        (col.pm(s.mean, s.ci95_half_width), pct2(s.ci95_rel * 100.0))
    } else {
        (col.num(s.mean), "no CI: n = 1".into())
    };
    let conv = if c.result.met_target() {
        "yes".to_string()
    } else if s.n < 2 {
        "no (n = 1, no interval)".to_string()
    } else if c.result.converged {
        "no (pooled interval above the target)".to_string()
    } else {
        format!("no ({})", c.result.stop_reason)
    };
    // A figure at a limit is a bound; a fork figure goes with the forking process's size.
    let notes: Vec<String> = [crate::fmt::at_limit(c), crate::fmt::fork_size(c)]
        .into_iter()
        .flatten()
        .collect();
    html! {
        tr {
            td { code { (params(&c.flat_params())) } }
            td {
                (placement_label(c))
                @if !notes.is_empty() { br; small { (notes.join("; ")) } }
            }
            td { code { (cpus(&c.placement.cpus)) } }
            td class="num" { (col.num(s.median)) }
            td class="num" { (col.range(s.p25, s.p75)) }
            td class="num" { (ci) }
            td class="num" { (rel) }
            td class="num" { (col.num(s.min)) }
            td class="num" { (s.n) }
            td class=[(!c.result.met_target()).then_some("bad")] { (conv) }
        }
    }
}

pub(super) fn skipped(r: &RunResults) -> Result<Markup, Absent> {
    let pending = pending_cells(r);
    if r.skipped.is_empty() && pending.is_empty() {
        return Err(Absent("none, every planned cell was measured".into()));
    }
    Ok(html! {
        section id="skipped" {
            h2 { "Skipped" }
            table {
                tr { th { "benchmark" } th { "params" } th { "placement" } th { "reason" } }
                @for s in &r.skipped {
                    tr {
                        td { (s.key.benchmark) }
                        td { code { (params(&s.key.flat_params())) } }
                        td { (s.key.placement) }
                        td { (s.reason) }
                    }
                }
                @for k in pending {
                    tr {
                        td { (k.benchmark) }
                        td { code { (params(&k.flat_params())) } }
                        td { (k.placement) }
                        td class="muted" { "not measured: the run stopped before it" }
                    }
                }
            }
        }
    })
}
