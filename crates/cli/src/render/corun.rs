//! Text of `corun`, `penalty` and `util`: the line of each cell as it is measured, the
//! headers, and the matrix, penalty and curve summaries (also `report`'s terminal
//! summary of a stored run).

use smtlab_model::keys::Form;
use smtlab_model::stats::Ratio;
use smtlab_model::{CellRecord, RunResults, SkippedCell, Summary};
use smtlab_report::corun::{self as view, form_of};

use crate::sink::Shown;

/// `sibling on CPU 1, cores on CPU 2`: the forms measured, for the header line.
pub fn forms_text(forms: &[(Form, u32)]) -> String {
    forms
        .iter()
        .map(|(f, c)| format!("{} on CPU {c}", f.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ratio_line(r: &Ratio) -> String {
    match (r.ci95_low, r.ci95_high) {
        (Some(lo), Some(hi)) => format!("{:.3} [{lo:.3}, {hi:.3}]", r.ratio),
        _ => format!("{:.3} (no interval)", r.ratio),
    }
}

/// The line of a measured matrix cell; `alone` is the reference measured in its group
/// (the first cell), kept here for the next cells.
pub fn matrix_cell(cell: &CellRecord, alone: &mut Option<Summary>) -> String {
    let (form, partner) = form_of(cell).unwrap_or((Form::Alone, "?"));
    let what = match form {
        Form::Alone => format!("{} alone (beside {partner})", cell.benchmark),
        f => format!("{} next to {partner}, {}", cell.benchmark, f.label()),
    };
    let summary = &cell.result.summary;
    let slow = match (form, alone.as_ref()) {
        (Form::Alone, _) | (_, None) => String::new(),
        (_, Some(al)) => view::slowdown(al, summary, cell.direction)
            .map(|s| format!("  slowdown {}", ratio_line(&s)))
            .unwrap_or_default(),
    };
    if form == Form::Alone {
        *alone = Some(summary.clone());
    }
    format!(
        "  {what}: {} {} (n={}){slow}\n",
        crate::render::bench::num(summary.mean),
        cell.unit,
        summary.n
    )
}

/// The lines of the matrix as its cells arrive: a heading per measured workload, then
/// each cell with its slowdown against the reference measured in its group.
#[derive(Default)]
pub struct MatrixLines {
    row: String,
    alone: Option<Summary>,
}

impl MatrixLines {
    pub fn next(&mut self, shown: Shown<'_>) -> String {
        let (name, line) = match shown {
            Shown::Measured(c) => (&c.benchmark, matrix_cell(c, &mut self.alone)),
            Shown::Skipped(k) => {
                if k.key.conditions.form == Some(Form::Alone) {
                    self.alone = None;
                }
                (&k.key.benchmark, skipped_cell(k, true))
            }
        };
        if *name == self.row {
            return line;
        }
        self.row = name.clone();
        format!("{name}:\n{line}")
    }
}

/// The line of a skipped co-run cell; `with_name` names the measured workload (the
/// matrix) or not (the penalty, which has one).
pub fn skipped_cell(s: &SkippedCell, with_name: bool) -> String {
    let c = &s.key.conditions;
    let partner = c.partner.as_deref().unwrap_or("?");
    let form = c.form.map_or("?", Form::name);
    let who = if with_name {
        format!("{} next to", s.key.benchmark)
    } else {
        "next to".into()
    };
    format!("  {who} {partner} ({form}): skipped: {}\n", s.reason)
}

/// The matrix and the pairs of each form measured.
pub fn matrix_tables(cells: &[CellRecord], forms: &[(Form, u32)]) -> String {
    let entries = view::matrix(cells);
    let mut out = String::new();
    for (form, _) in forms {
        let t = view::matrix_text(&entries, *form);
        if t.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\nSlowdown of the measured workload (row) next to the partner (column), {} [95% CI]:\n{t}",
            form.label()
        ));
        let lines = view::combined_text(&entries, *form);
        if !lines.is_empty() {
            out.push_str(
                "Pairs (combined speed above 1: more done side by side than taking turns):\n",
            );
            for l in lines {
                out.push_str(&format!("  {l}\n"));
            }
        }
    }
    out
}

/// The penalty table.
pub fn penalty_table(penalties: &[view::Penalty]) -> String {
    format!(
        "\nRun time of one piece of work next to each hog against alone (above 1: slower) [95% CI]:\n{}",
        view::penalty_text(penalties)
    )
}

/// The co-run matrix, penalties and utilisation curve of a stored run, for `smtlab
/// report`'s terminal summary; empty for runs that have none.
pub fn summary_text(results: &RunResults) -> String {
    let mut out = String::new();
    let entries = view::matrix(&results.cells);
    for form in [Form::Sibling, Form::Cores] {
        let t = view::matrix_text(&entries, form);
        if !t.is_empty() {
            out.push_str(&format!(
                "\nCo-run slowdown of the measured workload (row) next to the partner (column), {} [95% CI]:\n{t}",
                form.label()
            ));
        }
    }
    if results.run.suite.as_deref() == Some("penalty") {
        let mut tasks: Vec<&str> = Vec::new();
        for c in &results.cells {
            if form_of(c).is_some() && !tasks.contains(&c.benchmark.as_str()) {
                tasks.push(&c.benchmark);
            }
        }
        for task in tasks {
            let p = view::penalties(&results.cells, task);
            if !p.is_empty() {
                out.push_str(&format!(
                    "\nRun time of {task} next to each hog against alone [95% CI]:\n{}",
                    view::penalty_text(&p)
                ));
            }
        }
    }
    let curve = smtlab_report::utilisation::curve(&results.cells);
    if !curve.is_empty() {
        out.push_str(&format!(
            "\nReported utilisation against capacity:\n{}",
            smtlab_report::utilisation::curve_text(&curve)
        ));
    }
    out
}

/// What the curve's columns mean, under its table.
pub const UTIL_FOOTER: &str = "busy = user + system + irq/softirq/steal of the placement's CPUs (all processes on them); % of max = achieved throughput over the maximum measured interleaved with the steps\n";
