//! SMT off against SMT on in one run (`--smt both`), in paper 001's Tables 4-6 layout:
//! each cell's value with SMT off, with SMT on, the speed-up (on over off, the project's
//! one speed-up) and the geometric mean of the speed-ups per benchmark group. Cells
//! carry the state as a condition (`Conditions::smt`); a cell is paired with the cell of
//! the other state that has the same benchmark, parameters, other conditions and
//! placement.

use maud::{Markup, html};
use smtlab_model::keys::SmtState;
use smtlab_model::stats::geomean;
use smtlab_model::verdict::{Verdict, verdict};
use smtlab_model::{CellRecord, RunResults};

use crate::fmt::{num, text_table, times, verdict as speedup_text};
use crate::html_parts::Absent;

/// One benchmark, parameter set and placement measured in both states.
pub struct Row<'a> {
    pub off: &'a CellRecord,
    pub on: &'a CellRecord,
    /// The one verdict of on over off ([`smtlab_model::verdict`]).
    pub verdict: Verdict,
}

impl Row<'_> {
    /// Benchmark and its parameters and conditions without the SMT state.
    pub fn name(&self) -> String {
        let p = self.off.conditions.without_smt().flatten(&self.off.params);
        crate::advice::workload_name(&self.off.benchmark, &p)
    }

    /// The row as the table shows it: name, placement, the two values, the speed-up.
    fn columns(&self) -> [String; 5] {
        let value = |c: &CellRecord| format!("{} {}", num(c.result.summary.mean), c.unit);
        [
            self.name(),
            self.off.placement_spec.clone(),
            value(self.off),
            value(self.on),
            speedup_text(&self.verdict),
        ]
    }
}

fn state(c: &CellRecord) -> Option<SmtState> {
    // Utilisation curves carry the state too; they have their own section.
    if c.conditions.rate.is_some() {
        return None;
    }
    c.smt()
}

/// The cells measured in both states, in the order of their SMT-off cells, and the
/// geometric mean of the speed-ups per group (in the order groups first appear).
pub fn rows(cells: &[CellRecord]) -> (Vec<Row<'_>>, Vec<(String, f64)>) {
    let rows: Vec<Row<'_>> = cells
        .iter()
        .filter(|c| state(c) == Some(SmtState::Off))
        .filter_map(|off| {
            let on = cells.iter().find(|c| {
                state(c) == Some(SmtState::On)
                    && c.benchmark == off.benchmark
                    && c.placement_spec == off.placement_spec
                    && c.params == off.params
                    && c.conditions.without_smt() == off.conditions.without_smt()
            })?;
            let verdict = verdict(off, on)?;
            Some(Row { off, on, verdict })
        })
        .collect();
    let by_group = crate::grouped(&rows, |r| r.off.group.clone());
    let means = by_group
        .into_iter()
        .filter_map(|(g, rs)| {
            geomean(
                &rs.iter()
                    .map(|r| r.verdict.speedup.ratio)
                    .collect::<Vec<_>>(),
            )
            .map(|m| (g, m))
        })
        .collect();
    (rows, means)
}

/// The terminal table, empty when no cell was measured in both states.
pub fn text(cells: &[CellRecord]) -> String {
    let (rows, means) = rows(cells);
    if rows.is_empty() {
        return String::new();
    }
    let mut table: Vec<Vec<String>> = rows.iter().map(|r| r.columns().to_vec()).collect();
    for (group, m) in &means {
        table.push(vec![
            format!("geometric mean, {group}"),
            String::new(),
            String::new(),
            String::new(),
            format!("{}x", times(*m)),
        ]);
    }
    let mut out = String::from("\nSMT off vs on (speed-up: on over off)\n");
    out.push_str(&text_table(
        &["benchmark", "placement", "SMT off", "SMT on", "speed-up"],
        &table,
        &[2, 3],
    ));
    out
}

/// The HTML section, or why the run has none.
pub(crate) fn section(r: &RunResults) -> Result<Markup, Absent> {
    let (rows, means) = rows(&r.cells);
    if rows.is_empty() {
        return Err(Absent(
            "no cell measured with SMT off and on in this run (--smt both)".into(),
        ));
    }
    Ok(html! {
        section id="smt-states" {
            h2 { "SMT off vs on" }
            p {
                "Each cell measured with SMT off and with SMT on in this run, the states \
                 taking turns per benchmark; speed-up is on over off (above 1: SMT on is \
                 faster), with its 95% interval."
            }
            table {
                tr {
                    th { "benchmark" } th { "placement" } th { "SMT off" } th { "SMT on" }
                    th { "speed-up" }
                }
                @for [name, placement, off, on, speedup] in rows.iter().map(Row::columns) {
                    tr {
                        td { (name) } td { (placement) }
                        td class="num" { (off) } td class="num" { (on) } td { (speedup) }
                    }
                }
                @for (group, m) in &means {
                    tr {
                        th colspan="4" { "geometric mean, " (group) }
                        td { (times(*m)) "x" }
                    }
                }
            }
        }
    })
}
