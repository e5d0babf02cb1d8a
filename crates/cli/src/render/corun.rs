//! Text of `corun`, `penalty` and `util`: the line of each cell as it is measured, the
//! headers, and the matrix, penalty and curve summaries (also `report`'s terminal
//! summary of a stored run).

use smtlab_model::keys::Form;
use smtlab_model::stats::Ratio;
use smtlab_model::{CellRecord, RunResults, SkippedCell, Summary};
use smtlab_report::corun::{self as view, form_of};

use crate::sink::Shown;
use crate::term::{fit, term_layout};

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
    let partner = form_of(cell).map_or("?", |(_, p)| p);
    named_cell(cell, &cell.benchmark, partner, alone)
}

/// [`matrix_cell`] with the measured workload and its partner named `a` and `b`.
pub fn named_cell(cell: &CellRecord, a: &str, b: &str, alone: &mut Option<Summary>) -> String {
    let form = form_of(cell).map_or(Form::Alone, |(f, _)| f);
    let what = match form {
        Form::Alone => format!("{a} alone (beside {b})"),
        f => format!("{a} next to {b}, {}", f.label()),
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
    fit(&format!(
        "  {what}: {} {} (n={}){slow}",
        smtlab_report::fmt::num(summary.mean),
        cell.unit,
        summary.n
    ))
}

/// The lines of the matrix as its cells arrive: a heading per measured workload, then
/// each cell with its slowdown against the reference measured in its group.
#[derive(Default)]
pub struct MatrixLines {
    row: String,
    alone: Option<Summary>,
    /// The names of the workload and partner of a cell by its key, where the cells'
    /// own (the benchmark, the partner condition) are not the ones to show.
    names: std::collections::BTreeMap<smtlab_model::CellKey, (String, String)>,
}

impl MatrixLines {
    /// Lines naming each cell of `names` by the pair given there.
    pub fn named(
        names: std::collections::BTreeMap<smtlab_model::CellKey, (String, String)>,
    ) -> Self {
        MatrixLines {
            names,
            ..MatrixLines::default()
        }
    }

    pub fn next(&mut self, shown: Shown<'_>) -> String {
        let (name, line) = match shown {
            Shown::Measured(c) => match self.names.get(&c.key()) {
                Some((a, b)) => (a, named_cell(c, a, b, &mut self.alone)),
                None => (&c.benchmark, matrix_cell(c, &mut self.alone)),
            },
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
    fit(&format!(
        "  {who} {partner} ({form}): skipped: {}",
        s.reason
    ))
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
        out.push('\n');
        out.push_str(&fit(&format!(
            "Slowdown of the measured workload (row) next to the partner (column), {} [95% CI]:",
            form.label()
        )));
        out.push_str(&t);
        for e in entries.iter().filter(|e| e.form == *form) {
            if let Some(why) = &e.cut_short {
                out.push_str(&fit(&format!("  {} beside {}: no figure, {why}", e.a, e.b)));
            }
        }
        let lines = view::combined_text(&entries, *form);
        if !lines.is_empty() {
            out.push_str(&fit(
                "Pairs (combined speed above 1: more done side by side than taking turns):",
            ));
            for l in lines {
                out.push_str(&fit(&format!("  {l}")));
            }
        }
    }
    out
}

/// The penalty table.
pub fn penalty_table(penalties: &[view::Penalty]) -> String {
    format!(
        "\n{}{}",
        fit(
            "Run time of one piece of work next to each hog against alone (above 1: slower) [95% CI]:"
        ),
        view::penalty_text(penalties).render_to(term_layout())
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
            out.push('\n');
            out.push_str(&fit(&format!(
                "Co-run slowdown of the measured workload (row) next to the partner (column), {} [95% CI]:",
                form.label()
            )));
            out.push_str(&t);
        }
    }
    if results.run.suite.as_deref() == Some("penalty") {
        let co_run = results.cells.iter().filter(|c| form_of(c).is_some());
        for task in smtlab_report::first_seen(co_run.map(|c| c.benchmark.as_str())) {
            let p = view::penalties(&results.cells, task);
            if !p.is_empty() {
                out.push('\n');
                out.push_str(&fit(&format!(
                    "Run time of {task} next to each hog against alone [95% CI]:"
                )));
                out.push_str(&view::penalty_text(&p).render_to(term_layout()));
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

/// What the curve's columns mean, under its table, fitted to the terminal.
pub fn util_footer() -> String {
    fit(
        "busy = user + system + irq/softirq/steal of the placement's CPUs (all processes on \
         them); % of max = achieved throughput over the maximum measured interleaved with \
         the steps",
    )
}

/// The line `corun` prints before measuring: the workloads, CPUs and forms, the cells
/// and their time (`time_ns`: likely and at most).
pub fn corun_header(
    workloads: usize,
    cpu: u32,
    forms: &[(Form, u32)],
    cells: usize,
    time_ns: (u64, u64),
) -> String {
    let time = crate::render::plan::duration_text;
    fit(&format!(
        "corun: {workloads} workloads, each on CPU {cpu} alone and next to each other one \
         ({}): {cells} cells, about {}, at most {}; slowdown = alone / co-run for rates, \
         co-run / alone for times (above 1: slower)",
        forms_text(forms),
        time(time_ns.0),
        time(time_ns.1)
    ))
}

/// The line `util` prints before the curve of one SMT state.
pub fn util_state_line(
    state: smtlab_runner::experiment::smt::SmtState,
    placed: &smtlab_model::ResolvedPlacement,
    args: &crate::args::UtilArgs,
) -> String {
    fit(&format!(
        "SMT {}: open-loop load on {} (CPUs {}), {} steps of {} ms per rate, {} µs jobs",
        state.name(),
        placed.name,
        placed.cpu_set().to_list_string(),
        args.samples,
        args.step_ms,
        args.job_us
    ))
}

/// The line `penalty` prints before measuring: the task, its work per run, the CPU, the
/// runs per cell and the hogs.
pub fn penalty_header(
    task: &smtlab_runner::experiment::corun::Workload,
    fixed: u64,
    hogs: &[smtlab_runner::experiment::corun::Workload],
    s: &crate::settings::CorunSettings,
    samples: u32,
) -> String {
    fit(&format!(
        "penalty: {} ({} iterations per run) on CPU {}, {} runs per cell, alone and next to {} ({})",
        task.name(),
        fixed,
        s.pair.cpu,
        samples,
        hogs.iter()
            .map(smtlab_runner::experiment::corun::Workload::name)
            .collect::<Vec<_>>()
            .join(", "),
        forms_text(&s.forms)
    ))
}
