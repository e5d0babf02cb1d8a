//! [`Store`]: one API over the two places results live, chosen by what `--db` names:
//! a `postgresql://` or `postgres://` URL is a PostgreSQL database ([`PgStore`]), anything
//! else an SQLite file ([`SqliteStore`]). Both keep the same runs, cells, samples,
//! rounds, skips and leases with the same meaning; [`Store::push_to`] copies runs from
//! one to the other.

use std::path::Path;

use smtlab_model::{CellKey, CellRecord, RunMeta, RunResults, RunStatus, SkippedCell};

use super::SqliteStore;
use super::lease::{LeaseError, LeaseHolder, SqliteLease, takeover_note, this_host};
use super::pg::{Mode, PgLease, PgStore, is_postgres_url};
use super::runs::RunListing;
use crate::error::Result;

/// An open results store: an SQLite file or a PostgreSQL database.
///
/// SQLite (the default): one file per host, WAL with `synchronous=FULL`, so a saved cell
/// survives the process being killed and the machine losing power. PostgreSQL: one
/// database shared by many hosts, each write one transaction, ids from sequences (see
/// `SCHEMA.md`). Either way a run is written as it is measured and one process measures
/// a run at a time ([`Store::lease_run`]).
#[derive(Debug)]
pub struct Store {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Sqlite(SqliteStore),
    // Boxed: the PostgreSQL client and its settings are several times an SQLite handle.
    Pg(Box<PgStore>),
}

/// `$s` bound to whichever backend the store is, for methods both have.
macro_rules! each {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            Inner::Sqlite($s) => $e,
            Inner::Pg($s) => $e,
        }
    };
}

/// The PostgreSQL URL in `target`, when it is one.
fn url(target: &Path) -> Option<&str> {
    target.to_str().filter(|s| is_postgres_url(s))
}

/// What [`Store::push_to`] did with each run of the source, by the source's ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushReport {
    /// `(id in the source, id in the target)` of each run stored now.
    pub pushed: Vec<(i64, i64)>,
    /// Runs the target already held (the same run key): left as they are.
    pub present: Vec<i64>,
    /// Runs a live process is still measuring: not pushed (push them when they end).
    pub running: Vec<i64>,
}

impl Store {
    /// Opens the store `target` names, creating it (the file and its directory, or the
    /// schema in an existing PostgreSQL database) when it holds nothing yet, and
    /// upgrading an older schema.
    pub fn open(target: impl AsRef<Path>) -> Result<Store> {
        let target = target.as_ref();
        let inner = match url(target) {
            Some(u) => Inner::Pg(Box::new(PgStore::open(u, Mode::Create)?)),
            None => Inner::Sqlite(SqliteStore::open(target)?),
        };
        Ok(Store { inner })
    }

    /// Like [`open`](Self::open), but a missing file, or a PostgreSQL database without
    /// smtlab's schema, is an error, where creating an empty store would hide a wrong
    /// `--db`.
    pub fn open_existing(target: impl AsRef<Path>) -> Result<Store> {
        let target = target.as_ref();
        let inner = match url(target) {
            Some(u) => Inner::Pg(Box::new(PgStore::open(u, Mode::Existing)?)),
            None => Inner::Sqlite(SqliteStore::open_existing(target)?),
        };
        Ok(Store { inner })
    }

    /// Checks, before any time is spent measuring, that `target` can take results: an
    /// existing file must be an smtlab database this build reads (it is upgraded), a
    /// PostgreSQL database must be reachable (its schema is created). A missing file
    /// passes: it is created once there is something to store.
    pub fn check_target(target: impl AsRef<Path>) -> Result<()> {
        let target = target.as_ref();
        if url(target).is_some() {
            drop(Self::open(target)?);
        } else if target.exists() {
            drop(Self::open_existing(target)?);
        }
        Ok(())
    }

    /// Opens a store for reading only (`runs`, `report`, `compare`, the source of
    /// `push`): nothing is created, upgraded or changed. An SQLite file is opened
    /// read-only (see the SQLite notes in `SCHEMA.md`); a PostgreSQL session is set
    /// read-only, so the server refuses any write.
    pub fn open_read_only(target: impl AsRef<Path>) -> Result<Store> {
        let target = target.as_ref();
        let inner = match url(target) {
            Some(u) => Inner::Pg(Box::new(PgStore::open(u, Mode::ReadOnly)?)),
            None => Inner::Sqlite(SqliteStore::open_read_only(target)?),
        };
        Ok(Store { inner })
    }

    /// The database file, or the PostgreSQL URL without its password: what messages
    /// name.
    pub fn path(&self) -> &Path {
        each!(&self.inner, s => s.path())
    }

    /// Whether this store is a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        matches!(self.inner, Inner::Pg(_))
    }

    /// Checks the store is sound: SQLite's `integrity_check`; for PostgreSQL, that
    /// every cell has its summary.
    pub fn check_integrity(&self) -> Result<()> {
        each!(&self.inner, s => s.check_integrity())
    }

    /// Stores a new run (its meta data and plan) and returns its id. `meta.id` is
    /// ignored; `status` and `finished_unix_s` are stored as given.
    pub fn create_run(&mut self, meta: &RunMeta) -> Result<i64> {
        each!(&mut self.inner, s => s.create_run(meta))
    }

    /// Sets a run's final status and end time.
    pub fn finish_run(
        &mut self,
        run_id: i64,
        status: RunStatus,
        finished_unix_s: u64,
    ) -> Result<()> {
        each!(&mut self.inner, s => s.finish_run(run_id, status, finished_unix_s))
    }

    /// Marks a run that stopped early (Ctrl-C, an error) as interrupted, so `--resume`
    /// finds it. A run already finished keeps its status.
    pub fn mark_interrupted(&mut self, run_id: i64) -> Result<()> {
        each!(&mut self.inner, s => s.mark_interrupted(run_id))
    }

    /// Marks a run as running again (and not finished), for `--resume`.
    pub fn reopen_run(&mut self, run_id: i64) -> Result<()> {
        each!(&mut self.inner, s => s.reopen_run(run_id))
    }

    /// Stores a whole run (e.g. one read from results JSON) in one transaction and
    /// returns its new id. Loading it gives back `results` with `run.id` set to the id.
    /// It gets a new run key: importing the same JSON twice stores two runs.
    pub fn import_run(&mut self, results: &RunResults) -> Result<i64> {
        each!(&mut self.inner, s => s.import_run(results))
    }

    /// Loads a whole run: meta data, plan, every cell with its samples, and skips.
    pub fn load_run(&self, run_id: i64) -> Result<RunResults> {
        each!(&self.inner, s => s.load_run(run_id))
    }

    /// Every run, oldest first.
    pub fn list_runs(&self) -> Result<Vec<RunListing>> {
        each!(&self.inner, s => s.list_runs())
    }

    /// The newest run's id, `None` when there are no runs.
    pub fn latest_run_id(&self) -> Result<Option<i64>> {
        each!(&self.inner, s => s.latest_run_id())
    }

    /// The newest run that is not finished, for `--resume`.
    pub fn latest_unfinished_run(&self) -> Result<Option<i64>> {
        each!(&self.inner, s => s.latest_unfinished_run())
    }

    /// Turns what a user typed into a run id: `latest`/`last`, `12` or `#12`, `-1` (the
    /// newest), `-2` (the one before), or a label exactly one run carries. Errors say
    /// which runs exist.
    pub fn resolve_run(&self, selector: &str) -> Result<i64> {
        each!(&self.inner, s => s.resolve_run(selector))
    }

    /// The run's label, `None` when it has none.
    pub fn run_label(&self, run_id: i64) -> Result<Option<String>> {
        each!(&self.inner, s => s.run_label(run_id))
    }

    /// Names a run (`None` removes the name). The label must pass
    /// [`check_label`](crate::check_label).
    pub fn set_run_label(&mut self, run_id: i64, label: Option<&str>) -> Result<()> {
        each!(&mut self.inner, s => s.set_run_label(run_id, label))
    }

    /// The run's key: 32 hex digits that name it in every store it is pushed to.
    pub fn run_uid(&self, run_id: i64) -> Result<String> {
        each!(&self.inner, s => s.run_uid(run_id))
    }

    /// Deletes runs with everything stored under them, all or none. A run a live
    /// process is measuring is refused, and so are unknown ids.
    pub fn delete_runs(&mut self, run_ids: &[i64]) -> Result<()> {
        each!(&mut self.inner, s => s.delete_runs(run_ids))
    }

    /// The cells of a run's plan that are neither measured nor skipped, in plan order:
    /// what `--resume` still has to do.
    pub fn pending_cells(&self, run_id: i64) -> Result<Vec<CellKey>> {
        each!(&self.inner, s => s.pending_cells(run_id))
    }

    /// Stores one finished cell (the cell, its samples, summaries, rounds and series) in
    /// one transaction, replacing a cell or skip of the same key. Non-finite numbers are
    /// refused.
    pub fn save_cell(&mut self, run_id: i64, cell: &CellRecord) -> Result<()> {
        each!(&mut self.inner, s => s.save_cell(run_id, cell))
    }

    /// Records that a cell could not be measured. Replaces an earlier skip of the same
    /// key; refuses a key that is already measured.
    pub fn save_skipped(&mut self, run_id: i64, skipped: &SkippedCell) -> Result<()> {
        each!(&mut self.inner, s => s.save_skipped(run_id, skipped))
    }

    /// Takes the lease on `run_id` for this process: refused with [`LeaseError::Held`]
    /// while another process's lease is live; a stale one is taken over and
    /// [`Lease::takeover_note`] says so.
    pub fn lease_run(&mut self, run_id: i64) -> Result<Lease, LeaseError> {
        self.lease_run_as(run_id, std::process::id(), &this_host())
    }

    /// [`lease_run`](Self::lease_run) for a given pid and host (tests stand in for
    /// other processes and machines with it).
    pub fn lease_run_as(&mut self, run_id: i64, pid: u32, host: &str) -> Result<Lease, LeaseError> {
        let inner = match &mut self.inner {
            Inner::Sqlite(s) => LeaseInner::Sqlite(s.lease_run_as(run_id, pid, host)?),
            Inner::Pg(s) => LeaseInner::Pg(s.lease_run_as(run_id, pid, host)?),
        };
        Ok(Lease { inner })
    }

    /// Who holds the lease on `run_id` now, if anyone (live or stale).
    pub fn lease_holder(&self, run_id: i64) -> Result<Option<LeaseHolder>> {
        each!(&self.inner, s => s.lease_holder(run_id))
    }

    /// Copies this store's runs into `target` (`smtlab push`): each run not yet there
    /// (by its key, [`run_uid`](Self::run_uid)) is stored whole, with its label, in one
    /// transaction; runs already there are left as they are, so pushing twice stores
    /// each run once, and two hosts pushing the same run at once store it once. Runs a
    /// live process is still measuring are left out.
    pub fn push_to(&self, target: &mut Store) -> Result<PushReport> {
        let mut report = PushReport::default();
        for run in self.list_runs()? {
            if run.status == RunStatus::Running {
                report.running.push(run.id);
                continue;
            }
            let uid = self.run_uid(run.id)?;
            let results = self.load_run(run.id)?;
            let label = run.label.as_deref();
            let stored = match &mut target.inner {
                Inner::Sqlite(t) => t.import_keyed(&results, &uid, label)?,
                Inner::Pg(t) => t.import_keyed(&results, &uid, label)?,
            };
            match stored {
                Some(id) => report.pushed.push((run.id, id)),
                None => report.present.push(run.id),
            }
        }
        Ok(report)
    }
}

/// The right to measure into one run; released (its row deleted) on drop. See the
/// `lease` notes in `SCHEMA.md`: live while its heartbeat is fresh and, on the same
/// host, its process alive.
#[derive(Debug)]
pub struct Lease {
    inner: LeaseInner,
}

#[derive(Debug)]
enum LeaseInner {
    Sqlite(SqliteLease),
    Pg(PgLease),
}

macro_rules! each_lease {
    ($self:expr, $l:ident => $e:expr) => {
        match $self {
            LeaseInner::Sqlite($l) => $e,
            LeaseInner::Pg($l) => $e,
        }
    };
}

impl Lease {
    pub fn run_id(&self) -> i64 {
        each_lease!(&self.inner, l => l.run_id())
    }

    /// The process whose stale lease this one replaced, if any.
    pub fn taken_over_from(&self) -> Option<&LeaseHolder> {
        each_lease!(&self.inner, l => l.taken_over_from())
    }

    /// One line for the user when a stale lease was taken over: whose, and why it
    /// counted as stale.
    pub fn takeover_note(&self) -> Option<String> {
        takeover_note(self.run_id(), self.taken_over_from()?)
    }

    /// Renews the heartbeat now and checks the lease is still this process's; call it
    /// after each finished cell. A background thread renews it in between.
    pub fn heartbeat(&mut self) -> Result<(), LeaseError> {
        each_lease!(&mut self.inner, l => l.heartbeat())
    }
}
