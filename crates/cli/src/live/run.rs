//! What `run` does with each cell as it is measured: saved to the store (the lease
//! renewed), a line on standard output, the progress bar moved; and what it prints at the
//! end (the stored run as JSON or Markdown).

use std::ops::ControlFlow;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use indicatif::ProgressBar;
use smtlab_model::{CellKey, RunMeta, RunStatus, SkippedCell, Topology};
use smtlab_runner::counting::CountingSetup;
use smtlab_runner::eta::Eta;
use smtlab_runner::experiment::ExperimentError;
use smtlab_runner::plan::Estimate;
use smtlab_runner::session::{Ended, Measured, SessionObserver};
use smtlab_runner::spent::TimeSpent;
use smtlab_store::{Lease, Store};

use crate::args::RunArgs;
use crate::render;
use crate::settings::{run::estimate_of, unix_now_s};
use crate::sink::db_flag;
use crate::term::term_layout;

/// `--json` and `--export-markdown`: the run as it is stored now (a resumed run with
/// the cells of its earlier invocations).
pub fn print_stored(store: &Store, run_id: i64, args: &RunArgs) -> Result<()> {
    if !args.json && args.markdown.export_markdown.is_none() {
        return Ok(());
    }
    let results = store.load_run(run_id)?;
    crate::output::stored_run(
        &results,
        args.json,
        args.markdown.export_markdown.as_deref(),
    )
}

/// Saves each cell as it is measured, prints its line and moves the bar.
pub struct RunSaver<'a> {
    pub store: &'a mut Store,
    pub run_id: i64,
    /// Held while this process measures the run; renewed after every saved cell.
    pub lease: Lease,
    pub bar: &'a ProgressBar,
    /// Print a line per cell (not when JSON or Markdown fill standard output).
    pub lines: bool,
    pub measured: usize,
    pub skipped: usize,
    /// Measured cells whose CPUs moved since the run's start (`disturbed: CPUs moved`).
    pub moved: usize,
    pub error: Option<anyhow::Error>,
    /// The time left, from the plan and the pace of the cells done so far.
    eta: Eta,
    /// Where the time went, group by group, said at the end.
    spent: TimeSpent,
    /// Each skip reason in full once.
    skipped_lines: render::run::SkippedLines,
    started: Instant,
}

impl SessionObserver for RunSaver<'_> {
    fn cell_started(&mut self, key: &CellKey) {
        self.show(format!("{} {}", key.benchmark, key.placement));
    }

    fn sample(&mut self, key: &CellKey, _round: usize, index: usize) {
        self.show(format!(
            "{} {} (sample {})",
            key.benchmark,
            key.placement,
            index + 1
        ));
    }

    fn measured(&mut self, m: Measured<'_>) -> ControlFlow<()> {
        let cell = m.record;
        if let Err(e) = self.store.save_cell(self.run_id, cell) {
            self.error = Some(e.into());
            return ControlFlow::Break(());
        }
        if let Err(e) = self.lease.heartbeat() {
            self.error = Some(e.into());
            return ControlFlow::Break(());
        }
        if self.lines {
            say(self.bar, render::run::cell_line(cell, term_layout()));
            for l in super::cell_notes(cell) {
                say(self.bar, l.trim_end().to_string());
            }
        }
        super::counters_note(self.bar, cell, m.counters_note);
        self.measured += 1;
        let moved = cell.result.disturbance.as_ref();
        self.moved += usize::from(moved.is_some_and(|d| !d.handoff_changed.is_empty()));
        self.cell_done(&cell.key(), Some(&cell.result));
        ControlFlow::Continue(())
    }

    fn skipped(&mut self, s: &SkippedCell) -> ControlFlow<()> {
        if self.lines {
            say(self.bar, self.skipped_lines.line(s, term_layout()));
        }
        if let Err(e) = self.store.save_skipped(self.run_id, s) {
            self.error = Some(e.into());
            return ControlFlow::Break(());
        }
        self.skipped += 1;
        self.cell_done(&s.key, None);
        ControlFlow::Continue(())
    }
}

/// A result line on standard output, always (the bar, on standard error, is cleared
/// for it and drawn again), so `smtlab run > file` keeps every line.
fn say(bar: &ProgressBar, line: String) {
    // A closed pipe (`smtlab run | head`) must not stop the run: results are saved.
    bar.suspend(|| drop(crate::output::emit(&format!("{line}\n"))));
}

/// `--dry-run`: what a new run would measure, take and hold, and nothing stored.
pub fn dry_run(meta: &RunMeta, topo: &Topology, args: &RunArgs) -> Result<ExitCode> {
    let e = estimate_of(&meta.plan, meta, topo, args);
    crate::term::notes(&meta.notes);
    crate::output::emit(&render::plan::text(&e, term_layout()))?;
    Ok(ExitCode::SUCCESS)
}

/// What the run will measure, take and hold, said before it starts, with what this
/// machine and its benchmarks leave out; the estimate it said, for the time left.
pub fn start_notes(
    run_id: i64,
    meta: &RunMeta,
    pending: &[CellKey],
    lease: &Lease,
    topo: &Topology,
    args: &RunArgs,
    counting: Option<&CountingSetup>,
) -> Estimate {
    crate::term::note_fit(&format!(
        "run {run_id}: {} cells to measure ({} planned), results saved to {}",
        pending.len(),
        meta.plan.len(),
        crate::sink::shown_db(&crate::settings::db_path(&args.db))
    ));
    crate::term::notes(meta.notes.iter().cloned().chain(lease.takeover_note()));
    let e = estimate_of(pending, meta, topo, args);
    for line in render::plan::summary(&e) {
        crate::term::note_fit(&line);
    }
    let apart = e.groups.iter();
    crate::term::notes(
        apart.filter_map(|g| Some(format!("{}: {}", g.benchmark, g.apart.as_deref()?))),
    );
    crate::term::notes(counting.iter().flat_map(|c| c.missing_lines()));
    e
}

impl<'a> RunSaver<'a> {
    /// `estimate`: the plan of the cells this invocation measures, for the time left.
    pub fn new(
        store: &'a mut Store,
        run_id: i64,
        lease: Lease,
        bar: &'a ProgressBar,
        lines: bool,
        estimate: &Estimate,
    ) -> Self {
        RunSaver {
            store,
            run_id,
            lease,
            bar,
            lines,
            measured: 0,
            skipped: 0,
            moved: 0,
            error: None,
            eta: Eta::new(estimate),
            spent: TimeSpent::new(estimate),
            skipped_lines: Default::default(),
            started: Instant::now(),
        }
    }

    fn elapsed_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// The bar's message, after the time left.
    fn show(&self, what: String) {
        let left = self.eta.remaining_ns(self.elapsed_ns());
        let sep = if what.is_empty() { "" } else { " · " };
        self.bar.set_message(format!(
            "{} left{sep}{what}",
            render::plan::duration_text(left)
        ));
    }

    fn cell_done(&mut self, key: &CellKey, result: Option<&smtlab_model::CellResult>) {
        let now = self.elapsed_ns();
        self.eta.cell_done(key, now);
        self.spent.cell_done(key, now, result);
        self.bar.inc(1);
        self.show(String::new());
    }
}

/// Marks the run finished or interrupted (`stopped`: a signal's exit code), says so and how to go
/// on, and prints it as stored (`--json`, `--export-markdown`).
pub fn end(
    saver: RunSaver<'_>,
    measured: Result<Ended, ExperimentError>,
    stopped: Option<ExitCode>,
    args: &RunArgs,
) -> Result<ExitCode> {
    // The lease is held until the run's status is written, then released.
    let RunSaver {
        store,
        run_id,
        lease,
        measured: n_measured,
        skipped,
        moved,
        error,
        spent,
        ..
    } = saver;
    let error = error.or(measured.err().map(anyhow::Error::from));
    let db = db_flag(args.db.db.as_deref());
    if let Some(e) = error {
        // A save that failed (a full disk) stops the run as an interrupt does. It is
        // marked interrupted where the store still takes that small update; where it
        // does not, it reads as interrupted anyway once no live process holds its lease.
        let _ = store.mark_interrupted(run_id);
        drop(lease);
        return Err(e.context(format!(
            "run {run_id} interrupted; finish it with: smtlab run --resume {run_id}{db}"
        )));
    }
    if let Some(code) = stopped {
        store.finish_run(run_id, RunStatus::Interrupted, unix_now_s())?;
        print_stored(store, run_id, args)?;
        crate::term::stderr_line(&format!(
            "interrupted: {n_measured} cells saved by this invocation in run {run_id}; finish it with: smtlab run --resume {run_id}{db}"
        ));
        drop(lease);
        return Ok(code);
    }
    // A run that stored no cell measured nothing: it failed, whatever the reason (every
    // cell skipped, every load agent lost). It stays interrupted, to be resumed.
    if store.cells_stored(run_id)? == 0 {
        store.finish_run(run_id, RunStatus::Interrupted, unix_now_s())?;
        drop(lease);
        anyhow::bail!(
            "run {run_id} stored no cell ({skipped} skipped, each with its reason above); it is \
             marked interrupted; try again with: smtlab run --resume {run_id}{db}"
        );
    }
    store.finish_run(run_id, RunStatus::Finished, unix_now_s())?;
    drop(lease);
    print_stored(store, run_id, args)?;
    let spent = render::plan::spent(&spent, term_layout());
    if !spent.is_empty() {
        crate::term::note(spent.trim_end());
    }
    let done = format!(
        "run {run_id} finished: {n_measured} cells measured, {skipped} skipped. Report: smtlab report {run_id}{db} -o report.html"
    );
    crate::term::note_fit(&done);
    if moved > 0 {
        crate::term::note_fit(&format!(
            "{moved} cells were measured while this machine's CPUs shared differently from \
             the run's start (a host moving virtual CPUs): they are marked disturbed and \
             decide nothing; run again to measure them in one sharing"
        ));
    }
    Ok(ExitCode::SUCCESS)
}
