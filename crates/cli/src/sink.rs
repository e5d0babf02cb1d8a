//! Where the cells of `corun`, `penalty` and `util` go as the session measures them:
//! saved to the store one by one (a run created before the first cell, so an interrupted
//! command keeps what it measured), kept for the summary, and shown by the command's
//! own line printer.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::Result;
use smtlab_model::{CellRecord, RunConfig, RunMeta, RunStatus, SkippedCell, Topology};
use smtlab_runner::session::{Measured, SessionObserver};
use smtlab_store::{Lease, Store};

use smtlab_runner::experiment::corun::{self as exp, CorunPlan};
use smtlab_runner::machine::Machine;

use crate::args::CommonArgs;
use crate::settings::{CorunSettings, fresh_run, unix_now_s};

/// A cell as the printer sees it.
pub enum Shown<'a> {
    Measured(&'a CellRecord),
    Skipped(&'a SkippedCell),
}

/// Saves each cell as it is measured, keeps it for the summary, and hands it to the
/// printer. The one place a measuring command's cells are kept.
pub struct StoreSink<'p> {
    place: Place,
    /// The run in the store; 0 while none was created.
    pub run_id: i64,
    /// When the sink was made: the run's start, also when it is created later.
    started_unix_s: u64,
    printer: Box<dyn FnMut(Shown<'_>) -> Result<()> + 'p>,
    pub cells: Vec<CellRecord>,
    pub skipped: Vec<SkippedCell>,
    error: Option<anyhow::Error>,
    /// Whether it says a cell's counters note; not where the command's own observer,
    /// measured beside it, says it ([`measure_shown`]).
    says_notes: bool,
}

/// Where the cells go.
enum Place {
    /// Nowhere: kept in memory only (`bench` without `--db`).
    Memory,
    /// The store at `path`, where the run is created with its first cell (so a command
    /// that fails before any cell stores nothing).
    Pending { path: PathBuf, run: Box<RunMeta> },
    /// The run, created.
    Store(Box<Open>),
}

/// A run created in a store.
struct Open {
    store: Store,
    path: PathBuf,
    lease: Lease,
}

impl<'p> StoreSink<'p> {
    /// Creates the run in the store at `path` (created if missing) now.
    pub fn begin(
        path: &Path,
        run: RunMeta,
        printer: impl FnMut(Shown<'_>) -> Result<()> + 'p,
    ) -> Result<Self> {
        let mut sink = StoreSink::lazy(path, run, printer);
        sink.open()?;
        Ok(sink)
    }

    /// The run is created in the store at `path` with its first cell, if any.
    pub fn lazy(
        path: &Path,
        run: RunMeta,
        printer: impl FnMut(Shown<'_>) -> Result<()> + 'p,
    ) -> Self {
        StoreSink::at(
            Place::Pending {
                path: path.to_path_buf(),
                run: Box::new(run),
            },
            printer,
        )
    }

    /// Cells kept for the summary, and stored nowhere.
    pub fn memory(printer: impl FnMut(Shown<'_>) -> Result<()> + 'p) -> Self {
        StoreSink::at(Place::Memory, printer)
    }

    fn at(place: Place, printer: impl FnMut(Shown<'_>) -> Result<()> + 'p) -> Self {
        StoreSink {
            place,
            run_id: 0,
            started_unix_s: unix_now_s(),
            printer: Box::new(printer),
            cells: Vec::new(),
            skipped: Vec::new(),
            error: None,
            says_notes: true,
        }
    }

    /// The open store, its lease and the run's id, the run created first if it is
    /// pending; `None` in memory.
    fn open(&mut self) -> Result<Option<(&mut Store, &mut Lease, i64)>> {
        if let Place::Pending { path, run } = &mut self.place {
            let mut store = Store::open(&*path)?;
            run.started_unix_s = self.started_unix_s;
            self.run_id = store.create_run(run)?;
            let lease = store.lease_run(self.run_id)?;
            self.place = Place::Store(Box::new(Open {
                store,
                path: path.clone(),
                lease,
            }));
        }
        Ok(match &mut self.place {
            Place::Store(open) => Some((&mut open.store, &mut open.lease, self.run_id)),
            _ => None,
        })
    }

    /// The run as stored, once a cell was saved.
    pub fn stored(&mut self) -> Result<Option<smtlab_model::RunResults>> {
        let id = self.run_id;
        match &mut self.place {
            Place::Store(open) => Ok(Some(open.store.load_run(id)?)),
            _ => Ok(None),
        }
    }

    /// Marks the run finished, or interrupted when `stopped`, and says where it is
    /// (`db_arg`: the `--db` given, repeated in the hint). An error a save or the
    /// printer met ends it here. A run never created (no cell, or in memory) is left so.
    pub fn finish(mut self, stopped: bool, db_arg: Option<&Path>) -> Result<Self> {
        let Place::Store(open) = &mut self.place else {
            return self.error.take().map_or(Ok(self), Err);
        };
        let Open { store, path, .. } = open.as_mut();
        if let Some(e) = self.error.take() {
            let _ = store.mark_interrupted(self.run_id);
            return Err(e);
        }
        let (id, n) = (self.run_id, self.cells.len());
        let (status, line) = match stopped {
            true => (
                RunStatus::Interrupted,
                format!(
                    "interrupted: {n} cells saved in run {id} in {}",
                    shown_db(path)
                ),
            ),
            false => (RunStatus::Finished, saved_line(id, path, db_arg)),
        };
        store.finish_run(id, status, unix_now_s())?;
        crate::term::note_fit(&line);
        Ok(self)
    }

    /// What a measuring command goes on with once its session ended and its printer
    /// finished (`shown`): this sink, or the exit code when a signal stopped it with
    /// nothing to show (with `empty_ends`, no cell measured is nothing). A failure that is
    /// not the stop's is the command's error; either way a run cut short stays, marked
    /// interrupted.
    pub fn settle(
        self,
        stop: &crate::settings::Stop,
        shown: Result<()>,
        empty_ends: bool,
    ) -> Result<std::result::Result<Self, std::process::ExitCode>> {
        let empty = empty_ends && self.cells.is_empty();
        match (shown, stop.signalled()) {
            (Ok(()), stopped) if !(stopped && empty) => Ok(Ok(self)),
            (Err(e), false) => {
                self.abandon();
                Err(e)
            }
            // Stopped with nothing to show, or failed because of the stop (not the
            // workload's failure).
            _ => {
                self.abandon();
                Ok(Err(stop.ended(0)))
            }
        }
    }

    /// Marks a created run interrupted, as a command that failed leaves it: what was
    /// measured before the failure stays.
    pub fn abandon(mut self) {
        if let Place::Store(open) = &mut self.place {
            let _ = open.store.mark_interrupted(self.run_id);
        }
    }

    fn fail(&mut self, e: anyhow::Error) -> ControlFlow<()> {
        self.error = Some(e);
        ControlFlow::Break(())
    }
}

impl SessionObserver for StoreSink<'_> {
    fn measured(&mut self, m: Measured<'_>) -> ControlFlow<()> {
        let cell = m.record;
        let saved = self.open().and_then(|open| {
            if let Some((store, lease, id)) = open {
                store.save_cell(id, cell)?;
                lease.heartbeat()?;
            }
            Ok(())
        });
        // Shown once saved: a cell the printer never showed is not kept either.
        let shown = saved.and_then(|()| {
            let note = m.counters_note.filter(|_| self.says_notes);
            crate::term::notes(
                note.map(|n| format!("{} on {}: {n}", cell.benchmark, cell.placement.name)),
            );
            (self.printer)(Shown::Measured(cell))
        });
        if let Err(e) = shown {
            return self.fail(e);
        }
        self.cells.push(cell.clone());
        ControlFlow::Continue(())
    }

    fn skipped(&mut self, s: &SkippedCell) -> ControlFlow<()> {
        let saved = self.open().and_then(|open| match open {
            Some((store, _, id)) => Ok(store.save_skipped(id, s)?),
            None => Ok(()),
        });
        if let Err(e) = saved.and_then(|()| (self.printer)(Shown::Skipped(s))) {
            return self.fail(e);
        }
        self.skipped.push(s.clone());
        ControlFlow::Continue(())
    }
}

/// Measures `groups` in their SMT states (restored after, also when killed), each cell
/// shown by `printer` first and then kept (and stored) by `sink`: a cell the printer
/// refuses (a failed run) ends the session before it is kept. The sink after.
pub fn measure_shown<'p>(
    engine: &smtlab_runner::experiment::Engine<'_>,
    topo: &Topology,
    groups: Vec<smtlab_runner::session::Group<'_>>,
    printer: &mut dyn SessionObserver,
    mut sink: StoreSink<'p>,
) -> Result<StoreSink<'p>> {
    // The printer says each cell's counters note, with its progress bar.
    sink.says_notes = false;
    smtlab_runner::experiment::smt::measure_groups(
        engine,
        crate::settings::Stop::protection(),
        topo,
        groups,
        &mut (printer, &mut sink),
    )?;
    Ok(sink)
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
    measure_corun_then(machine, s, common, suite, plan, |_| Vec::new(), printer)
}

/// [`measure_corun`], then the groups `then` makes from the cells measured so far,
/// into the same run (unless stopped): a plan whose later pairs depend on its first
/// figures (`predict`'s training pairs).
pub fn measure_corun_then<'p>(
    machine: &dyn Machine,
    s: &CorunSettings,
    common: &CommonArgs,
    suite: &'static str,
    plan: &CorunPlan,
    then: impl FnOnce(&[smtlab_model::CellRecord]) -> CorunPlan,
    printer: impl FnMut(Shown<'_>) -> Result<()> + 'p,
) -> Result<(StoreSink<'p>, Option<std::process::ExitCode>)> {
    let mut measuring = MeasuringSetup::new(machine, s.cfg.clone(), common.json)?;
    measuring.how.client_rule = s.client_rule.clone();
    let db = common.db.clone().unwrap_or_else(smtlab_store::default_path);
    let keys = plan.iter().flatten().map(|c| c.key.clone()).collect();
    let run = fresh_run(suite, machine, &s.topo, &s.cfg, s.notes.clone(), keys);
    measuring.handoff_at_start = run.environment.cpu_handoff.clone();
    let mut sink = StoreSink::begin(&db, run, printer)?;
    let engine = measuring.engine();
    let mut ended = exp::measure(&engine, &s.topo, plan, &mut sink);
    if matches!(ended, smtlab_runner::session::Ended::Complete) {
        let more = then(&sink.cells);
        ended = exp::measure(&engine, &s.topo, &more, &mut sink);
    }
    let stopped = measuring.stopped(ended);
    Ok((
        sink.finish(stopped.is_some(), common.db.as_deref())?,
        stopped,
    ))
}

/// How an experiment measures here: the machine, its settings, counting (`--counters`)
/// and the stop flag every signal sets.
pub struct MeasuringSetup<'m> {
    pub machine: &'m dyn smtlab_runner::machine::Machine,
    pub cfg: RunConfig,
    pub counting: Option<smtlab_runner::counting::CountingSetup>,
    /// Interleaving, rounds and where server workloads' client sides go
    /// (`--client-cpus`).
    pub how: smtlab_runner::plan::Measuring,
    /// The run's cache-line handoffs at its start, each cell's CPUs checked against
    /// them (`Engine::sharing_at_start`): set from the run once it is made.
    pub handoff_at_start: Vec<smtlab_model::run::Handoff>,
    stop: crate::settings::Stop,
}

impl<'m> MeasuringSetup<'m> {
    /// Probes counting when `cfg.counters` asks for it (its notes said unless `quiet`)
    /// and installs the stop flag.
    pub fn new(
        machine: &'m dyn smtlab_runner::machine::Machine,
        cfg: RunConfig,
        quiet: bool,
    ) -> Result<Self> {
        let counting = machine.counting_for(&cfg)?;
        if !quiet {
            crate::term::notes(counting.iter().flat_map(|c| c.missing_lines()));
        }
        Ok(MeasuringSetup {
            machine,
            cfg,
            counting,
            how: smtlab_runner::plan::Measuring {
                interleave: true,
                repeat: 1,
                client_rule: Default::default(),
            },
            handoff_at_start: Vec::new(),
            stop: crate::settings::Stop::on_signals()?,
        })
    }

    pub fn engine(&self) -> smtlab_runner::experiment::Engine<'_> {
        smtlab_runner::experiment::Engine::new(
            self.machine,
            &self.cfg,
            self.counting.as_ref(),
            self.stop.flag(),
        )
        .measuring(self.how.clone())
        .sharing_at_start(&self.handoff_at_start)
    }

    /// The exit code when a session that ended so was stopped by a signal (not by its
    /// sink).
    pub fn stopped(&self, ended: smtlab_runner::session::Ended) -> Option<std::process::ExitCode> {
        (ended == smtlab_runner::session::Ended::Stopped && self.stop.signalled())
            .then(|| self.stop.exit_code())
    }
}

/// A finished run as it is stored (no suite, no notes): the plan is every measured cell,
/// then every skipped one, and the command line is this process's.
pub fn finished_run(
    started_unix_s: u64,
    environment: smtlab_model::Environment,
    topology: Topology,
    config: smtlab_model::RunConfig,
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
            command_line: smtlab_store::command_line(),
            suite: None,
            environment,
            topology,
            config,
            plan: cells
                .iter()
                .map(CellRecord::key)
                .chain(skipped.iter().map(|s| s.key.clone()))
                .collect(),
            notes: Vec::new(),
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
        shown_db(path),
        db_flag(db_arg)
    )
}

/// The `--db` given, as a hint repeats it (empty without one).
pub fn db_flag(db_arg: Option<&Path>) -> String {
    db_arg
        .map(|p| format!(" --db {}", smtlab_store::redact_arg(&p.to_string_lossy())))
        .unwrap_or_default()
}

/// A `--db` value as messages show it: quoted, a PostgreSQL URL without its password.
pub fn shown_db(path: &Path) -> String {
    let redacted = smtlab_store::redact_arg(&path.to_string_lossy());
    smtlab_model::quote::path(Path::new(&redacted))
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
            7,
            Environment::default(),
            topo.clone(),
            RunConfig::default(),
            cells.clone(),
            skipped.clone(),
        );
        let placements: Vec<&str> = r.run.plan.iter().map(|k| k.placement.as_str()).collect();
        assert_eq!(placements, ["1c1t", "2c1t", "1c2t"]);
        assert_eq!(r.schema, RESULTS_SCHEMA);
        assert_eq!((r.run.id, r.run.status), (0, RunStatus::Finished));
        assert_eq!(r.run.started_unix_s, 7);
        assert!(r.run.finished_unix_s.is_some_and(|f| f >= 7));
        assert_eq!(r.run.suite, None);
        assert!(!r.run.command_line.is_empty());
        assert_eq!(r.run.topology, topo);
        assert!(r.run.notes.is_empty());
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
        let url = Path::new("postgresql://u:pw@h/db");
        assert_eq!(
            saved_line(3, url, Some(url)),
            "saved as run 3 in postgresql://u:***@h/db. Report: smtlab report 3 \
             --db postgresql://u:***@h/db -o report.html"
        );
    }
}
