//! Cells as a Markdown table, for pasting into an issue, a pull request or a wiki, in
//! the manner of hyperfine's `--export-markdown`: one row per cell, the mean with its
//! 95% interval, min and max, and the speed-up over the first placement measured for
//! the same benchmark and parameters (above 1 = better, for latencies too): the one
//! verdict of [`smtlab_model::verdict::verdict`], in [`crate::fmt::verdict`]'s words.

use smtlab_model::CellRecord;
use smtlab_model::verdict::verdict;

use crate::fmt::{num, params, pm};

/// A table row of `cells` (`| a | b |` and a newline), a pipe in a cell escaped.
pub(crate) fn row_of<S: AsRef<str>>(cells: impl IntoIterator<Item = S>) -> String {
    let cells: Vec<String> = cells
        .into_iter()
        .map(|c| c.as_ref().replace('|', "\\|"))
        .collect();
    format!("| {} |\n", cells.join(" | "))
}

/// Pure: same cells, same text. Cells keep their order; each benchmark-and-parameters
/// group's first cell is the baseline of its group's speed-ups.
pub fn cells(cells: &[CellRecord]) -> String {
    let mut out = String::from(
        "| Benchmark | Parameters | Placement | CPUs | Unit | Mean ± 95% CI | Min | Max | n | Speed-up |\n\
         |:---|:---|:---|:---|:---|---:|---:|---:|---:|:---|\n",
    );
    for (i, c) in cells.iter().enumerate() {
        let base = cells[..i].iter().find(|b| b.same_variant(c));
        let s = &c.result.summary;
        let up = match base {
            None => "baseline".to_string(),
            // A placement that only adds idle SMT siblings did the first one's work.
            Some(b)
                if b.placement.threads_per_core < c.placement.threads_per_core
                    && b.result.cpus_used() == c.result.cpus_used()
                    && smtlab_model::verdict::idle_sibling(c) =>
            {
                format!("single-threaded: {} with an idle sibling", b.placement.name)
            }
            Some(b) => verdict(b, c).map_or("-".into(), |v| crate::fmt::verdict(&v)),
        };
        let cpus = if c.placement.cpus.is_empty() {
            "not pinned".to_string()
        } else {
            c.placement.cpu_set().to_list_string()
        };
        let placement = if c.placement.name == c.placement_spec {
            c.placement.name.clone()
        } else {
            format!("{} ({})", c.placement.name, c.placement_spec)
        };
        let mean = if s.n < 2 {
            format!("{} (n=1)", num(s.mean))
        } else {
            pm(s.mean, s.ci95_half_width)
        };
        let p = params(&c.flat_params());
        let row = [
            format!("`{}`", c.benchmark),
            p,
            placement,
            cpus,
            format!("{} ({} is better)", c.unit, c.direction.as_str()),
            mean,
            num(s.min),
            num(s.max),
            s.n.to_string(),
            up,
        ];
        out.push_str(&row_of(row));
    }
    // The words the table uses, each defined once; an empty table uses none.
    if !cells.is_empty() {
        let words = crate::glossary::markdown(&out);
        out.push_str(&words);
    }
    out
}
