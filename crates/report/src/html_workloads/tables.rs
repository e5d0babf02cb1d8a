//! The `workload-tables` section (paper 001 Tables 3-6, and paper 004's netperf-style
//! rows): chat, dbench, tbench and the TCP/UDP loads, a speed-up table and a chart each.

use smtlab_model::RunResults;

use super::bench_block::bench_blocks;

/// Benchmarks of the paper 001 speed-up tables, with the table each re-creates.
pub(super) const TABLES: [(&str, &str); 7] = [
    ("chat", "paper 001 Tables 3-4"),
    ("dbench", "paper 001 Table 5"),
    ("tbench", "paper 001 Table 6"),
    ("tcp-stream", "paper 004, netperf TCP_STREAM"),
    ("tcp-rr", "paper 004, netperf TCP_RR"),
    ("tcp-crr", "paper 004, netperf TCP_CRR"),
    ("udp-rr", "paper 004, netperf UDP_RR"),
];

/// Paper 001 Tables 3-6 and the netperf-style rows of paper 004.
pub fn tables(p: &mut String, r: &RunResults) -> Result<(), String> {
    let present: Vec<_> = TABLES
        .iter()
        .filter(|(b, _)| r.cells.iter().any(|c| c.benchmark == *b))
        .collect();
    if present.is_empty() {
        return Err(String::new());
    }
    p.push_str(
        "<section id=\"workload-tables\"><h2>Speed-up tables</h2><p>Paper 001's layout: a \
         row per value of the swept parameter, the value per placement (mean ± 95% CI), the \
         SMT speed-ups (ratio of the means with Fieller's 95% interval; above 1 is better \
         with SMT) and their geometric mean.</p>",
    );
    bench_blocks(p, r, present.into_iter().copied());
    p.push_str("</section>");
    Ok(())
}
