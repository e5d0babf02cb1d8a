//! The `workload-smt` section (paper 004 Chart 1): a bar per workload and parameter set,
//! the `1c2t/1c1t` speed-up with its 95% interval.

use smtlab_model::RunResults;

use super::cells::cells_of;
use maud::html;

use super::charts::{Bar, figure_of, hbars};
use super::is_workload;
use super::speedup_table::no_pairs;
use crate::fmt::{params, times};
use crate::yields::smt_yields;

/// Paper 004 Chart 1: the `1c2t/1c1t` speed-up per workload.
pub(crate) fn chart1(r: &RunResults) -> Option<maud::Markup> {
    let cells = cells_of(r, |c| is_workload(r, c));
    if cells.is_empty() {
        return None;
    }
    let rows: Vec<_> = smt_yields(r)
        .into_iter()
        .filter(|y| cells.iter().any(|c| c.benchmark == y.benchmark))
        .filter_map(|y| y.smt.clone().map(|s| (y, s)))
        .filter(|(_, s)| !s.idle_sibling)
        .collect();
    let body = if rows.is_empty() {
        no_pairs(r)
    } else {
        html! {
            p {
                "The throughput improvement with SMT per workload (paper 004 Chart 1): the \
                 speed-up 1c2t/1c1t, the ratio of the means with its 95% interval; the dashed \
                 line is no gain. Green: faster at 95%, red: slower, grey: the interval \
                 includes 1."
            }
            (figure_of(hbars(
                "Throughput with SMT, 1c2t / 1c1t",
                "ratio of means with 95% interval",
                "speed-up (x)",
                1.0,
                &rows.iter().map(|(y, s)| bar(y, s)).collect::<Vec<_>>(),
            )))
        }
    };
    Some(html! {
        section id="workload-smt" { h2 { "SMT gain per workload" } (body) }
    })
}

/// A workload's bar: its speed-up with its interval, coloured by what the interval says.
fn bar(y: &crate::YieldRow, s: &crate::Yield) -> Bar {
    let ps = params(&y.params);
    let r = &s.ratio;
    Bar {
        label: if ps == "-" {
            y.benchmark.clone()
        } else {
            format!("{} {ps}", y.benchmark)
        },
        value: r.ratio,
        lo: r.ci95_low,
        hi: r.ci95_high,
        color: match r.significance().significant() {
            Some(true) if r.ratio >= 1.0 => 2,
            Some(true) => 1,
            _ => 7,
        },
        text: format!("{}x", times(r.ratio)),
    }
}
