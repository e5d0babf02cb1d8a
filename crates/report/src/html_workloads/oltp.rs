//! The `oltp` section: `oltp-pg`, `oltp-sqlite` (transactions per second) and `sdet`
//! (scripts per hour of the multi-user shell load) per placement, with the SMT
//! speed-ups: paper 004's OLTP and SDET workloads, as a table and a chart each.

use smtlab_model::{ReportSection, RunResults};

use super::bench_block::bench_blocks;

/// The benchmarks whose catalog entry puts them in the OLTP section (`oltp-pg`,
/// `oltp-sqlite` and `sdet` today), in catalog order: the value per placement and the
/// speed-ups.
pub(crate) fn oltp(r: &RunResults) -> Option<maud::Markup> {
    let present: Vec<&str> = r
        .benchmarks
        .iter()
        .filter(|i| i.report == ReportSection::Oltp)
        .map(|i| i.name.as_str())
        .filter(|b| r.cells.iter().any(|c| c.benchmark == *b))
        .collect();
    if present.is_empty() {
        return None;
    }
    // A parameter value with which a benchmark is not what its origin measured (its
    // catalog entry says which) is said beside its table.
    let notes: Vec<String> = present.iter().map(|b| departures(r, b)).collect();
    let mut blocks = String::new();
    bench_blocks(
        &mut blocks,
        r,
        present.iter().zip(&notes).map(|(b, n)| (*b, n.as_str())),
    );
    // Peak searches (nfs-sfs search=peak): each cell's curve of load points.
    let curves: Vec<_> = r
        .cells
        .iter()
        .filter(|c| present.contains(&c.benchmark.as_str()))
        .filter_map(|c| crate::load_points::table(c).map(|t| (c, t)))
        .collect();
    Some(maud::html! {
        section id="oltp" {
            h2 { "OLTP and SDET" }
            p {
                "Transactions per second of the database loads and scripts per hour of the \
                 multi-user shell load, per placement (mean ± 95% CI), with the SMT speed-ups."
            }
            (maud::PreEscaped(blocks))
            @if !curves.is_empty() {
                h3 { "Load points of the peak searches" }
                p {
                    "SPEC SFS's curve: per load point the requested and the achieved operations \
                     per second and the response times (mean over samples); a sample's value is \
                     the highest achieved rate among its points within the response-time limit."
                }
                @for (c, t) in &curves {
                    h4 { (c.benchmark) " " (crate::fmt::params(&c.flat_params())) " on " (c.placement.name) }
                    (t)
                }
            }
        }
    })
}

/// `bench`'s parameter values among the run's cells with which it departs from its
/// origin ([`smtlab_model::ParamInfo::departs`]), as `server=user: NOTE`; empty for none.
fn departures(r: &RunResults, bench: &str) -> String {
    let Some(info) = r.info(bench) else {
        return String::new();
    };
    let mut notes = Vec::new();
    for param in &info.params {
        for d in &param.departs {
            let used = r
                .cells
                .iter()
                .any(|c| c.benchmark == bench && c.params.get(&param.name) == Some(&d.value));
            if used {
                notes.push(format!("{}={}: {}", param.name, d.value, d.note));
            }
        }
    }
    notes.join("; ")
}
