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

use smtlab_runner::experiment::corun::{self as exp, CorunPlan};
use smtlab_runner::machine::Machine;

use crate::args::CommonArgs;
use crate::settings::{CorunSettings, unix_now_s};

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
            crate::term::note_fit(&format!(
                "interrupted: {} cells saved in run {} in {}",
                self.cells.len(),
                self.run_id,
                smtlab_model::quote::path(&self.path)
            ));
        } else {
            crate::term::note_fit(&saved_line(self.run_id, &self.path, db_arg));
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

/// A co-run plan (`corun`, `penalty`) measured into a new run of `suite`, each cell
/// saved and shown by `printer`; the sink with every cell, and the exit code when a
/// signal stopped it.
pub fn measure_corun<'p>(
    machine: &dyn Machine,
    s: &CorunSettings,
    common: &CommonArgs,
    suite: &'static str,
    plan: &CorunPlan,
    printer: impl FnMut(Shown<'_>) -> Result<()> + 'p,
) -> Result<(StoreSink<'p>, Option<std::process::ExitCode>)> {
    let measuring = Measuring::new(machine, s.cfg.clone(), common.json)?;
    let db = common.db.clone().unwrap_or_else(smtlab_store::default_path);
    let run = NewRun {
        suite,
        environment: machine.environment(&s.topo, &crate::settings::tool()),
        topology: s.topo.clone(),
        config: s.cfg.clone(),
        notes: s.notes.clone(),
        plan: plan.iter().flatten().map(|c| c.key.clone()).collect(),
    };
    let mut sink = StoreSink::begin(&db, run, printer)?;
    let ended = exp::measure(&measuring.engine(), &s.topo, plan, &mut sink);
    let stopped = measuring.stopped(ended);
    Ok((
        sink.finish(stopped.is_some(), common.db.as_deref())?,
        stopped,
    ))
}

/// How an experiment measures here: the machine, its settings, counting (`--counters`)
/// and the stop flag every signal sets.
pub struct Measuring<'m> {
    pub machine: &'m dyn smtlab_runner::machine::Machine,
    pub cfg: RunConfig,
    pub counting: Option<smtlab_runner::counting::CountingSetup>,
    /// Where server workloads' client sides go (`--client-cpus`).
    pub client_rule: smtlab_placement::ClientRule,
    stop: crate::settings::Stop,
}

impl<'m> Measuring<'m> {
    /// Probes counting when `cfg.counters` asks for it (its notes said unless `quiet`)
    /// and installs the stop flag.
    pub fn new(
        machine: &'m dyn smtlab_runner::machine::Machine,
        cfg: RunConfig,
        quiet: bool,
    ) -> Result<Self> {
        let counting = machine.counting_for(&cfg)?;
        if let Some(setup) = &counting
            && !quiet
        {
            for line in setup.missing_lines() {
                crate::term::note_fit(&format!("note: {line}"));
            }
        }
        Ok(Measuring {
            machine,
            cfg,
            counting,
            client_rule: Default::default(),
            stop: crate::settings::Stop::on_signals()?,
        })
    }

    pub fn engine(&self) -> smtlab_runner::experiment::Engine<'_> {
        let mut engine = smtlab_runner::experiment::Engine::new(
            self.machine,
            &self.cfg,
            self.counting.as_ref(),
            self.stop.flag(),
        );
        engine.client_rule = self.client_rule.clone();
        engine
    }

    /// The exit code when a session that ended so was stopped by a signal (not by its
    /// sink).
    pub fn stopped(&self, ended: smtlab_runner::session::Ended) -> Option<std::process::ExitCode> {
        (ended == smtlab_runner::session::Ended::Stopped && self.stop.signalled())
            .then(|| self.stop.exit_code())
    }
}

/// A finished run as it is stored: the plan is every measured cell, then every skipped
/// one, and the command line is this process's.
#[allow(clippy::too_many_arguments)]
pub fn finished_run(
    suite: Option<&str>,
    started_unix_s: u64,
    environment: smtlab_model::Environment,
    topology: Topology,
    config: smtlab_model::RunConfig,
    notes: Vec<String>,
    cells: Vec<smtlab_model::CellRecord>,
    skipped: Vec<smtlab_model::SkippedCell>,
) -> smtlab_model::RunResults {
    use smtlab_model::{CellRecord, RESULTS_SCHEMA, RunMeta, RunResults, RunStatus};
    RunResults {
        schema: RESULTS_SCHEMA.to_string(),
        run: RunMeta {
            id: 0,
            started_unix_s,
            finished_unix_s: Some(unix_now_s()),
            status: RunStatus::Finished,
            command_line: std::env::args().collect(),
            suite: suite.map(Into::into),
            environment,
            topology,
            config,
            plan: cells
                .iter()
                .map(CellRecord::key)
                .chain(skipped.iter().map(|s| s.key.clone()))
                .collect(),
            notes,
        },
        cells,
        skipped,
        benchmarks: Vec::new(),
    }
}

/// Where run `id` was stored and the command that reports it (`db_arg`: the `--db`
/// given, repeated in the command).
pub fn saved_line(id: i64, path: &Path, db_arg: Option<&Path>) -> String {
    format!(
        "saved as run {id} in {}. Report: smtlab report {id}{} -o report.html",
        smtlab_model::quote::path(path),
        db_arg
            .map(|p| format!(" --db {}", p.display()))
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use smtlab_model::{CellKey, Environment, RESULTS_SCHEMA, RunConfig, RunStatus, SkippedCell};

    use std::path::Path;

    use super::*;
    use smtlab_fixtures::build::cell;

    #[test]
    fn a_finished_run_plans_its_measured_cells_then_its_skipped_ones() {
        let cells = vec![
            cell("spin", &[], "1c1t", &[1.0, 1.1, 0.9]),
            cell("spin", &[], "2c1t", &[2.0, 2.1, 1.9]),
        ];
        let skipped = vec![SkippedCell {
            key: CellKey {
                benchmark: "spin".into(),
                params: Default::default(),
                conditions: Default::default(),
                placement: "1c2t".into(),
            },
            reason: "no SMT visible".into(),
        }];
        let topo = smtlab_fixtures::build::one_cpu_per_core(&[0, 1]);
        let r = finished_run(
            Some("exec"),
            7,
            Environment::default(),
            topo.clone(),
            RunConfig::default(),
            vec!["a note".into()],
            cells.clone(),
            skipped.clone(),
        );
        let placements: Vec<&str> = r.run.plan.iter().map(|k| k.placement.as_str()).collect();
        assert_eq!(placements, ["1c1t", "2c1t", "1c2t"]);
        assert_eq!(r.schema, RESULTS_SCHEMA);
        assert_eq!((r.run.id, r.run.status), (0, RunStatus::Finished));
        assert_eq!(r.run.started_unix_s, 7);
        assert!(r.run.finished_unix_s.is_some_and(|f| f >= 7));
        assert_eq!(r.run.suite.as_deref(), Some("exec"));
        assert!(!r.run.command_line.is_empty());
        assert_eq!(r.run.topology, topo);
        assert_eq!(r.run.notes, ["a note"]);
        assert_eq!((r.cells, r.skipped), (cells, skipped));
    }

    #[test]
    fn the_saved_line_repeats_the_db_given() {
        let path = Path::new("/tmp/x.db");
        assert_eq!(
            saved_line(3, path, None),
            "saved as run 3 in /tmp/x.db. Report: smtlab report 3 -o report.html"
        );
        assert_eq!(
            saved_line(3, path, Some(Path::new("x.db"))),
            "saved as run 3 in /tmp/x.db. Report: smtlab report 3 --db x.db -o report.html"
        );
    }
}
