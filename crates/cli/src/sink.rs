//! Where the cells of `corun`, `penalty` and `util` go as the session measures them:
//! saved to the store one by one (a run created before the first cell, so an interrupted
//! command keeps what it measured), kept for the summary, and shown by the command's
//! own line printer.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::Result;
use smtlab_model::{
    CellKey, CellRecord, Environment, RunConfig, RunMeta, RunStatus, SkippedCell, Topology,
};
use smtlab_runner::session::{Measured, SessionObserver};
use smtlab_store::{Lease, Store};

use crate::settings::unix_now_s;

/// A cell as the printer sees it.
pub enum Shown<'a> {
    Measured(&'a CellRecord),
    Skipped(&'a SkippedCell),
}

/// What a run is before its first cell: the plan and the settings it is measured with.
pub struct NewRun {
    pub suite: &'static str,
    pub environment: Environment,
    pub topology: Topology,
    pub config: RunConfig,
    pub notes: Vec<String>,
    pub plan: Vec<CellKey>,
}

/// Saves each cell as it is measured and hands it to the printer.
pub struct StoreSink<'p> {
    store: Store,
    path: PathBuf,
    pub run_id: i64,
    lease: Lease,
    printer: Box<dyn FnMut(Shown<'_>) -> Result<()> + 'p>,
    pub cells: Vec<CellRecord>,
    pub skipped: Vec<SkippedCell>,
    error: Option<anyhow::Error>,
}

impl<'p> StoreSink<'p> {
    /// Creates the run in the store at `path` (created if missing).
    pub fn begin(
        path: &Path,
        run: NewRun,
        printer: impl FnMut(Shown<'_>) -> Result<()> + 'p,
    ) -> Result<Self> {
        let mut store = Store::open(path)?;
        let meta = RunMeta {
            id: 0,
            started_unix_s: unix_now_s(),
            finished_unix_s: None,
            status: RunStatus::Running,
            command_line: std::env::args().collect(),
            suite: Some(run.suite.into()),
            environment: run.environment,
            topology: run.topology,
            config: run.config,
            plan: run.plan,
            notes: run.notes,
        };
        let run_id = store.create_run(&meta)?;
        let lease = store.lease_run(run_id)?;
        Ok(StoreSink {
            store,
            path: path.to_path_buf(),
            run_id,
            lease,
            printer: Box::new(printer),
            cells: Vec::new(),
            skipped: Vec::new(),
            error: None,
        })
    }

    /// Marks the run finished, or interrupted when `stopped`, and says where it is
    /// (`db_arg`: the `--db` given, repeated in the hint). An error a save or the
    /// printer met ends it here.
    pub fn finish(mut self, stopped: bool, db_arg: Option<&Path>) -> Result<Self> {
        if let Some(e) = self.error.take() {
            let _ = self.store.mark_interrupted(self.run_id);
            return Err(e);
        }
        let status = if stopped {
            RunStatus::Interrupted
        } else {
            RunStatus::Finished
        };
        self.store.finish_run(self.run_id, status, unix_now_s())?;
        if stopped {
            eprintln!(
                "interrupted: {} cells saved in run {} in {}",
                self.cells.len(),
                self.run_id,
                self.path.display()
            );
        } else {
            eprintln!(
                "{}",
                crate::cmd::saved_line(self.run_id, &self.path, db_arg)
            );
        }
        Ok(self)
    }

    fn fail(&mut self, e: anyhow::Error) -> ControlFlow<()> {
        self.error = Some(e);
        ControlFlow::Break(())
    }
}

impl SessionObserver for StoreSink<'_> {
    fn measured(&mut self, m: Measured<'_>) -> ControlFlow<()> {
        let cell = m.record;
        if let Err(e) = self.store.save_cell(self.run_id, cell) {
            return self.fail(e.into());
        }
        if let Err(e) = self.lease.heartbeat() {
            return self.fail(e.into());
        }
        if let Some(note) = m.counters_note {
            crate::term::note_fit(&format!(
                "note: {} on {}: {note}",
                cell.benchmark, cell.placement.name
            ));
        }
        if let Err(e) = (self.printer)(Shown::Measured(cell)) {
            return self.fail(e);
        }
        self.cells.push(cell.clone());
        ControlFlow::Continue(())
    }

    fn skipped(&mut self, s: &SkippedCell) -> ControlFlow<()> {
        if let Err(e) = self.store.save_skipped(self.run_id, s) {
            return self.fail(e.into());
        }
        if let Err(e) = (self.printer)(Shown::Skipped(s)) {
            return self.fail(e);
        }
        self.skipped.push(s.clone());
        ControlFlow::Continue(())
    }
}

/// The exit code of a command a signal stopped (as `run`'s).
pub const INTERRUPTED_EXIT: u8 = 130;

/// How an experiment measures here: its settings, counting (`--counters`) and the stop
/// flag every signal sets.
pub struct Measuring {
    pub cfg: RunConfig,
    pub counting: Option<smtlab_runner::counting::CountingSetup>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Measuring {
    /// Probes counting when `cfg.counters` asks for it (its notes said unless `quiet`)
    /// and installs the stop flag.
    pub fn new(cfg: RunConfig, quiet: bool) -> Result<Self> {
        let counting = smtlab_runner::counting::CountingSetup::probe_for(
            cfg.counters,
            cfg.counter_events.as_deref(),
        )?;
        if let Some(setup) = &counting
            && !quiet
        {
            for line in setup.missing_lines() {
                crate::term::note_fit(&format!("note: {line}"));
            }
        }
        Ok(Measuring {
            cfg,
            counting,
            stop: crate::settings::stop_on_signals()?,
        })
    }

    pub fn engine(&self) -> smtlab_runner::experiment::Engine<'_> {
        smtlab_runner::experiment::Engine {
            cfg: &self.cfg,
            clock: &smtlab_runner::Monotonic,
            counting: self
                .counting
                .as_ref()
                .map(|setup| smtlab_runner::session::Counting {
                    setup,
                    backend: &smtlab_runner::counting::Machine,
                }),
            stop: &self.stop,
        }
    }

    /// Whether a session that ended so was stopped by a signal (not by its sink).
    pub fn stopped(&self, ended: smtlab_runner::session::Ended) -> bool {
        ended == smtlab_runner::session::Ended::Stopped
            && self.stop.load(std::sync::atomic::Ordering::Relaxed)
    }
}
