//! What `exec` shows while the command runs under each placement (a row per placement
//! with its CPU time and counters), and its summary: the verdict or the SMT off-vs-on
//! table, where the run was stored (suite `exec`, cell by cell: [`crate::sink`]),
//! Markdown and JSON.

use std::ops::ControlFlow;

use anyhow::Result;
use smtlab_model::stats;
use smtlab_model::{CellKey, CellRecord, SkippedCell};
use smtlab_runner::exec::{ExecValue, shell_join};
use smtlab_runner::experiment::smt;
use smtlab_runner::session::{Measured, SessionObserver};

use crate::args::ExecArgs;
use crate::output::emit;
use crate::render;
use crate::settings::exec::Exec;
use crate::sink::StoreSink;

/// Prints each placement's row as it is measured; the first failure ends the command
/// (before the cell reaches the store: a failed run is not a skipped cell).
pub struct ExecPrinter {
    /// Progress on standard error (hidden when not a terminal, with --quiet or --json).
    bar: indicatif::ProgressBar,
    /// Print the rows (not when JSON or Markdown fill standard output).
    text: bool,
    reps: usize,
    runs_per_cell: usize,
    /// Placements finished, so the bar stands at their runs whatever the session said.
    done_cells: usize,
    /// The first placement measured: the rows' ratios are to it.
    baseline: Option<CellRecord>,
    /// The SMT state of the placements shown last.
    shown_state: Option<smt::SmtState>,
    error: Option<anyhow::Error>,
}

impl ExecPrinter {
    pub fn new(s: &Exec, args: &ExecArgs, text: bool) -> Self {
        let reps = args.runs.reps as usize;
        // The bar counts runs, warm-up included, so its ETA follows the command's own pace.
        let runs_per_cell = reps + args.runs.warmup as usize;
        let cells = s.specs.len() * s.states.len().max(1);
        ExecPrinter {
            bar: crate::term::progress_bar(
                (cells * runs_per_cell) as u64,
                args.json,
                crate::term::COUNTED,
            ),
            text,
            reps,
            done_cells: 0,
            runs_per_cell,
            baseline: None,
            shown_state: None,
            error: None,
        }
    }

    /// Ends the live output; the error that ended it, if one did.
    pub fn finish(self) -> Result<()> {
        self.bar.finish_and_clear();
        self.error.map_or(Ok(()), Err)
    }
}

impl SessionObserver for ExecPrinter {
    fn cell_started(&mut self, key: &CellKey) {
        let state = smt::state_of(key);
        if self.text && state.is_on().is_some() && Some(state) != self.shown_state {
            self.shown_state = Some(state);
            let line = format!("with SMT {}:\n", state.name());
            if let Err(e) = self.bar.suspend(|| emit(&line)) {
                self.error.get_or_insert(e);
            }
        }
        self.bar.set_message(format!("{} (warm-up)", key.placement));
    }

    fn sample(&mut self, key: &CellKey, _round: usize, index: usize) {
        // The warm-up runs are over once the first measured run is in.
        let warmup = self.runs_per_cell - self.reps;
        self.bar
            .set_position((self.done_cells * self.runs_per_cell + warmup + index + 1) as u64);
        self.bar
            .set_message(format!("{} run {}/{}", key.placement, index + 1, self.reps));
    }

    fn measured(&mut self, m: Measured<'_>) -> ControlFlow<()> {
        self.done_cells += 1;
        self.bar
            .set_position((self.done_cells * self.runs_per_cell) as u64);
        let cell = m.record;
        let mut text = render::bench::row(cell, self.baseline.as_ref(), crate::term::term_layout());
        let cpu: Vec<f64> = cell
            .result
            .samples
            .iter()
            .filter_map(|s| s.cpu_ns.map(|n| n as f64 / 1e9))
            .collect();
        if let Some(s) = stats::summarize(&cpu) {
            text.push_str(&format!(
                "  CPU time per run: {} s (user + system, with children)\n",
                smtlab_report::fmt::num(s.mean)
            ));
        }
        if let Some(c) = &cell.counters {
            text.push_str(&super::counters_row(c));
        }
        if let Some(n) = m.counters_note {
            crate::term::note_with(&self.bar, &format!("note: {}: {n}", cell.placement.name));
        }
        if self.text
            && let Err(e) = self.bar.suspend(|| emit(&text))
        {
            self.error = Some(e);
            return ControlFlow::Break(());
        }
        self.baseline.get_or_insert_with(|| cell.clone());
        ControlFlow::Continue(())
    }

    fn skipped(&mut self, cell: &SkippedCell) -> ControlFlow<()> {
        // A placement the SMT state cannot give (`1c2t` with SMT off) is left out.
        if smt::state_of(&cell.key).is_on().is_some() && cell.reason.starts_with("with SMT ") {
            crate::term::note_with(
                &self.bar,
                &format!("note: {} skipped: {}", cell.key.placement, cell.reason),
            );
            return ControlFlow::Continue(());
        }
        // A failed run is not stored as a cell: the reason is the command's error, which
        // already says which run of which placement failed.
        let reason = cell.reason.strip_prefix("exec: ").unwrap_or(&cell.reason);
        let reason = match reason.rfind(" (during ") {
            Some(i) if reason.ends_with(')') => &reason[..i],
            _ => reason,
        };
        self.error = Some(anyhow::anyhow!("{reason}"));
        ControlFlow::Break(())
    }
}

/// The line that says what is measured, and the table's header.
pub fn header(s: &Exec, args: &ExecArgs) -> String {
    let (what, unit) = match &s.bench.value {
        ExecValue::WallTime => ("wall time", "s, lower is better"),
        ExecValue::Throughput(_) => ("printed throughput", "units/s, higher is better"),
    };
    let line = format!(
        "exec `{}`: {what} ({unit}); {} runs per placement after {} warm-up",
        shell_join(&args.command),
        args.runs.reps,
        args.runs.warmup
    );
    let layout = crate::term::term_layout();
    smtlab_report::table::wrap(&line, layout) + &render::bench::header_line(layout)
}

/// The summary after the runs: the verdict (or the SMT off-vs-on table), then where
/// the run was stored (as interrupted when a signal stopped it), its Markdown and JSON.
pub fn summary(
    s: &Exec,
    args: &ExecArgs,
    text: bool,
    sink: StoreSink<'_>,
    interrupted: bool,
) -> Result<()> {
    let cells = &sink.cells;
    let lines = if s.states.len() == 2 {
        if text {
            emit(&smtlab_report::smt_states::text(cells))?;
        }
        Vec::new()
    } else {
        smtlab_report::text::command(cells, s.topo.smt_visible())
    };
    if text && !lines.is_empty() {
        emit("\n")?;
        for l in &lines {
            emit(&crate::term::fit(l))?;
        }
    }
    let mut sink = sink.finish(interrupted, args.db.db.as_deref())?;
    match sink.stored()? {
        Some(run) => {
            crate::output::stored_run(&run, args.json, args.markdown.export_markdown.as_deref())
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use smtlab_fixtures::build::cell;
    use smtlab_model::stats::{self, Significance};
    use smtlab_model::verdict::verdict;
    use smtlab_model::{CellRecord, Direction};

    /// An `exec` cell (times in seconds, lower is better) of `./work` on `placement`.
    fn exec_cell(placement: &str, times_s: &[f64]) -> CellRecord {
        let mut c = cell("exec", &[("command", "./work")], placement, times_s);
        c.group = "exec".into();
        c.unit = "s".into();
        c.direction = Direction::Lower;
        c
    }

    #[test]
    fn every_output_gives_one_verdict_on_a_skewed_run() {
        // 2c1t's runs are faster but for one slow one: the medians favour 2c1t, the
        // mean time (total time, i.e. throughput over all runs) favours 1c1t, and the
        // mean of per-run rates 1/t favours 2c1t. The sign depends on the definition,
        // so every output must use the same one.
        let base_t = [10.0, 10.1, 9.9, 10.0, 10.05, 9.95];
        let two_t = [9.5, 9.6, 9.4, 9.5, 9.55, 13.0];
        let s = |v: &[f64]| stats::summarize(v).unwrap();
        let rates = |v: &[f64]| s(&v.iter().map(|t| 1.0 / t).collect::<Vec<_>>()).mean;
        assert!(s(&two_t).median < s(&base_t).median);
        assert!(s(&two_t).mean > s(&base_t).mean);
        assert!(rates(&two_t) > rates(&base_t));
        let cells = vec![exec_cell("1c1t", &base_t), exec_cell("2c1t", &two_t)];
        let v = verdict(&cells[0], &cells[1]).unwrap();
        assert!(v.speedup.ratio < 1.0, "{v:?}");
        assert_eq!(v.significance, Significance::NotSignificant);
        let ratio = smtlab_report::fmt::times(v.speedup.ratio);
        let pct = smtlab_report::fmt::pct(v.speedup.ratio);
        assert_eq!((ratio.as_str(), pct.as_str()), ("0.991", "-0.9%"));

        // Terminal (exec's verdict lines).
        let lines = smtlab_report::text::command(&cells, false);
        assert_eq!(
            lines[0],
            format!(
                "2 cores vs 1 (2c1t/1c1t): {}",
                smtlab_report::fmt::verdict(&v)
            )
        );
        assert!(lines[1].starts_with("2 cores give -0.9% ["), "{}", lines[1]);

        // The stored run: HTML, JSON, Markdown.
        let mut run = crate::render::testdata::results(1);
        run.cells = cells.clone();
        run.skipped.clear();
        run.describe(smtlab_runner::catalog::infos());
        let html = smtlab_report::html(&run);
        let exec = &html[html.find("<section id=\"exec\">").unwrap()..];
        let exec = &exec[..exec.find("</section>").unwrap()];
        let q = &v.speedup;
        let gain = smtlab_report::fmt::gain_ci(q.ratio, q.ci95_low, q.ci95_high);
        assert!(gain.starts_with(&format!("{pct} [")), "{gain}");
        assert!(
            exec.contains(&format!(
                "gives {gain}</b>: {}",
                smtlab_report::fmt::verdict(&v)
            )),
            "{exec}"
        );
        assert!(exec.contains("not significant at 95%"), "{exec}");
        assert!(!exec.contains("+0."), "the page shows a gain: {exec}");
        let md = smtlab_report::markdown::cells(&run.cells);
        assert!(md.contains(&smtlab_report::fmt::verdict(&v)), "{md}");
        let json: serde_json::Value =
            serde_json::from_slice(&smtlab_report::export::json(&run)).unwrap();
        let sp = &json["speedups"][0];
        assert_eq!(sp["kind"], "second_core");
        assert_eq!(
            (sp["base"].as_str(), sp["other"].as_str()),
            (Some("1c1t"), Some("2c1t"))
        );
        assert_eq!(
            sp["verdict"]["speedup"]["ratio"].as_f64(),
            Some(v.speedup.ratio)
        );
        assert_eq!(sp["verdict"]["significance"], "not_significant");
        // The file still loads as a run.
        let back: smtlab_model::RunResults =
            serde_json::from_slice(&smtlab_report::export::json(&run)).unwrap();
        assert_eq!(back.cells, run.cells);

        // compare: run B holds 2c1t's samples where A holds 1c1t's. Read with the cells'
        // own intervals alone, it is the same verdict (across runs, compare adds what
        // runs of one setup differ by: `between`).
        let mut b = run.clone();
        b.cells[0].result = cells[1].result.clone();
        let c = smtlab_report::compare::compare_with(&run, &b, smtlab_report::BetweenRuns::none());
        let row = c.rows.iter().find(|r| r.placement == "1c1t").unwrap();
        assert_eq!(row.speedup, Some(v.speedup.ratio));
        assert_eq!(row.significance, Some(v.significance));
        assert_eq!(row.speedup_text(), smtlab_report::fmt::verdict(&v));
    }
}
