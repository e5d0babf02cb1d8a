//! The `workload-tables` section (paper 001 Tables 3-6, and paper 004's netperf-style
//! rows): chat, dbench, tbench and the TCP/UDP loads, a speed-up table and a chart each.

use smtlab_model::{ReportSection, RunResults};

use super::bench_block::bench_blocks;

/// Paper 001 Tables 3-6 and the netperf-style rows of paper 004: every benchmark of the
/// run whose catalog entry asks for a speed-up table, in catalog order, with the table
/// it re-creates.
pub(crate) fn tables(r: &RunResults) -> Option<maud::Markup> {
    let present: Vec<(&str, &str)> = r
        .benchmarks
        .iter()
        .filter_map(|i| match &i.report {
            ReportSection::SpeedupTable { caption } => Some((i.name.as_str(), caption.as_str())),
            _ => None,
        })
        .filter(|(b, _)| r.cells.iter().any(|c| c.benchmark == *b))
        .collect();
    if present.is_empty() {
        return None;
    }
    let mut blocks = String::new();
    bench_blocks(&mut blocks, r, present);
    Some(maud::html! {
        section id="workload-tables" {
            h2 { "Speed-up tables" }
            p {
                "Paper 001's layout: a row per value of the swept parameter, the value per \
                 placement (mean ± 95% CI), the SMT speed-ups (ratio of the means with \
                 Fieller's 95% interval; above 1 is better with SMT) and their geometric mean."
            }
            (maud::PreEscaped(blocks))
        }
    })
}
