//! The `oltp` section: `oltp-pg`, `oltp-sqlite` (transactions per second) and `sdet`
//! (scripts per hour of the multi-user shell load) per placement, with the SMT
//! speed-ups: paper 004's OLTP and SDET workloads, as a table and a chart each.

use smtlab_model::{ReportSection, RunResults};

use super::bench_block::bench_blocks;

/// The benchmarks whose catalog entry puts them in the OLTP section (`oltp-pg`,
/// `oltp-sqlite` and `sdet` today), in catalog order: the value per placement and the
/// speed-ups.
pub(crate) fn oltp(p: &mut String, r: &RunResults) -> Result<(), String> {
    let present: Vec<&str> = r
        .benchmarks
        .iter()
        .filter(|i| i.report == ReportSection::Oltp)
        .map(|i| i.name.as_str())
        .filter(|b| r.cells.iter().any(|c| c.benchmark == *b))
        .collect();
    if present.is_empty() {
        return Err(String::new());
    }
    p.push_str(
        "<section id=\"oltp\"><h2>OLTP and SDET</h2><p>Transactions per second of the \
         database loads and scripts per hour of the multi-user shell load, per placement \
         (mean ± 95% CI), with the SMT speed-ups.</p>",
    );
    bench_blocks(p, r, present.into_iter().map(|b| (b, "")));
    p.push_str("</section>");
    Ok(())
}
