//! The `aim` section (paper 001 Table 2): a row per AIM9 benchmark with its throughput
//! per placement and the SMT speed-ups.

use smtlab_model::{ReportSection, RunResults};

use super::cells::cells_in;
use super::rows::Row;
use super::speedup_table::{no_pairs_line, speedup_table};
use crate::fmt::params;

/// Paper 001 Table 2: a row per AIM9 benchmark.
pub(crate) fn aim(p: &mut String, r: &RunResults) -> Result<(), String> {
    let cells = cells_in(r, |s| *s == ReportSection::Aim);
    if cells.is_empty() {
        return Err(String::new());
    }
    p.push_str(
        "<section id=\"aim\"><h2>AIM9 rows</h2><p>Paper 001 Table 2's layout: a row per \
         benchmark with its throughput per placement in its own unit (mean ± 95% CI), and \
         the SMT speed-ups.</p>",
    );
    let mut rows: Vec<Row<'_>> = Vec::new();
    for c in &cells {
        let ps = params(&c.flat_params());
        let label = if ps == "-" {
            c.benchmark.clone()
        } else {
            format!("{} {ps}", c.benchmark)
        };
        match rows.iter_mut().find(|r| r.label == label) {
            Some(row) => row.cells.push(c),
            None => rows.push(Row {
                label,
                x: None,
                cells: vec![c],
            }),
        }
    }
    if !speedup_table(p, "benchmark", &rows) {
        no_pairs_line(p, r);
    }
    p.push_str("</section>");
    Ok(())
}
