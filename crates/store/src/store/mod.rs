//! [`Store`]: one API over the two places results live, chosen by what `--db` names: a
//! `postgresql://` or `postgres://` URL is a PostgreSQL database, anything else an
//! SQLite file. Every statement is written once, against the [`sql`] seam; only
//! opening (recognising the database, the DDL, migrations, PostgreSQL's advisory lock)
//! is per dialect, in [`sqlite`] and [`pg`] ([`pgconf`]: what a PostgreSQL URL asks
//! beyond the postgres crate, TLS and the password file). One file per concern:
//! [`runs`], [`cells`], [`lease`] (one process measures a run at a time), [`codec`]
//! (column encodings).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::TransactionBehavior;

mod cells;
mod codec;
mod fleet;
mod lease;
mod pg;
mod pgconf;
mod retry;
mod runs;
pub(crate) mod sql;
mod sqlite;

pub use codec::this_host;
pub use fleet::{FleetQuery, FleetScan};
pub use lease::{LEASE_HEARTBEAT, LEASE_STALE_AFTER, Lease, LeaseError, LeaseHolder};
pub use pg::{command_line, redact_arg};
pub use pgconf::SettingsError;
pub use runs::{BadLabel, RunListing, check_label};

use crate::error::{Result, StoreError};
use runs::describe_ids;
use sql::{Lite, Pg, Sql};

/// An open results store: an SQLite file or a PostgreSQL database.
///
/// SQLite (the default): one file per host, WAL with `synchronous=FULL`. Either WAL
/// setting keeps every committed cell when the process is killed (`kill -9`, a crash):
/// the commit is in the WAL file before `save_cell` returns. NORMAL can lose the last
/// commits on a power cut or kernel panic, and smtlab provokes exactly those on some
/// machines (switching SMT off, taking CPUs offline). FULL costs one fsync per finished
/// cell, milliseconds against cells that last seconds. Several processes may open the
/// same file (a report reading while a run writes is fine: WAL mode).
///
/// PostgreSQL: one database shared by many hosts, each write one transaction, ids from
/// sequences (see `SCHEMA.md`). Either way a run is written as it is measured and one
/// process measures a run at a time ([`Store::lease_run`]).
#[derive(Debug)]
pub struct Store {
    db: Db,
    /// The database file, or the PostgreSQL URL without its password: what messages
    /// name.
    path: PathBuf,
    /// Which SQLite schema version's columns the tables hold:
    /// [`SCHEMA_VERSION`](crate::SCHEMA_VERSION), except for an older file opened
    /// read-only, which is read as it is. PostgreSQL's schema holds them all.
    version: i64,
}

/// A connection to either database.
pub(crate) enum Db {
    Sqlite(rusqlite::Connection),
    // One session per process, shared by the store, its run's lease and the lease's
    // heartbeat thread: a thousand hosts measuring at once then hold a thousand
    // connections, not three thousand. Behind a mutex because the client needs `&mut`
    // even to read and the heartbeat renews from its own thread; each transaction holds
    // it whole, so a renewal waits for a cell's save (milliseconds) and never lands
    // inside it.
    Pg(Arc<Mutex<PgConn>>),
}

/// The shared session, even if a thread panicked holding it: every use is a whole
/// transaction or statement, so an unwound one left nothing half done (the server rolled
/// back an unfinished transaction when its `Transaction` was dropped).
fn session(pg: &Mutex<PgConn>) -> MutexGuard<'_, PgConn> {
    pg.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A PostgreSQL session and the statements it has prepared.
pub(crate) struct PgConn {
    client: postgres::Client,
    /// Whether every transaction is read-only (the session says so too; a pooler may
    /// hand the next transaction another session).
    read_only: bool,
    statements: HashMap<String, postgres::Statement>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Db::Sqlite(c) => c.fmt(f),
            Db::Pg(_) => f.write_str("PostgreSQL session"),
        }
    }
}

impl Db {
    /// Runs `f` on a consistent view: SQLite reads as it always does (each statement its
    /// own snapshot); PostgreSQL in one read-only, repeatable-read transaction, so a
    /// writer saving a cell meanwhile is seen whole or not at all.
    fn read<T>(&self, f: impl FnOnce(&mut dyn Sql) -> Step<T>) -> Step<T> {
        match self {
            Db::Sqlite(c) => f(&mut Lite(c)),
            Db::Pg(pg) => {
                let pg = &mut *session(pg);
                let tx = pg
                    .client
                    .build_transaction()
                    .isolation_level(postgres::IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()?;
                in_pg_transaction(tx, &mut pg.statements, f)
            }
        }
    }

    /// Runs `f` in one write transaction, committed when it returns `Ok`. SQLite's takes
    /// the write lock up front: a deferred one that upgrades later can fail with
    /// SQLITE_BUSY at once, without the busy timeout helping. PostgreSQL's is run again
    /// whole when it loses a serialization or deadlock conflict (see [`retry`]): it was
    /// rolled back, so `f` starts over on a clean slate.
    fn write<T>(&mut self, mut f: impl FnMut(&mut dyn Sql) -> Step<T>) -> Step<T> {
        match self {
            Db::Sqlite(c) => {
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let out = f(&mut Lite(&tx))?;
                tx.commit()?;
                Ok(out)
            }
            Db::Pg(pg) => {
                let pg = &mut *session(pg);
                retry::retrying(
                    || {
                        let tx = pg.client.build_transaction().read_only(pg.read_only);
                        in_pg_transaction(tx.start()?, &mut pg.statements, &mut f)
                    },
                    |e| matches!(e, Fail::Pg(e) if retry::transient(e)),
                )
            }
        }
    }

    /// Runs `f` (a lease's few statements) at once: SQLite outside an explicit
    /// transaction, each statement committing alone; PostgreSQL in one short
    /// transaction, tried once (a lease's next heartbeat is its retry).
    fn autocommit<T>(&mut self, f: impl FnOnce(&mut dyn Sql) -> Step<T>) -> Step<T> {
        match self {
            Db::Sqlite(c) => f(&mut Lite(c)),
            Db::Pg(pg) => {
                let pg = &mut *session(pg);
                let tx = pg.client.transaction()?;
                in_pg_transaction(tx, &mut pg.statements, f)
            }
        }
    }

    /// A handle for a lease: another connection to the SQLite file `path` (SQLite
    /// connections cost nothing and the store's may be inside a transaction), or the
    /// same PostgreSQL session.
    fn for_lease(&self, path: &Path) -> Step<Db> {
        match self {
            Db::Sqlite(_) => Ok(Db::Sqlite(sqlite::lease_connection(path)?)),
            Db::Pg(pg) => Ok(Db::Pg(Arc::clone(pg))),
        }
    }
}

/// Runs `f` in the PostgreSQL transaction `tx`, committed when it returns `Ok`.
fn in_pg_transaction<T>(
    mut tx: postgres::Transaction<'_>,
    statements: &mut std::collections::HashMap<String, postgres::Statement>,
    f: impl FnOnce(&mut dyn Sql) -> Step<T>,
) -> Step<T> {
    tx.batch_execute(&pg::settings_sql(true))?;
    let out = f(&mut Pg {
        client: &mut tx,
        statements,
    })?;
    tx.commit()?;
    Ok(out)
}

/// Why an internal step failed, before the store adds the database and context.
#[derive(Debug)]
pub(crate) enum Fail {
    Sql(rusqlite::Error),
    Pg(postgres::Error),
    /// A stored value this build cannot read back.
    Decode(String),
    /// A value that must not be stored (it would not survive the round trip).
    Invalid(String),
    NoRun(i64),
    Conflict(String),
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(e)
    }
}

impl From<postgres::Error> for Fail {
    fn from(e: postgres::Error) -> Self {
        Fail::Pg(e)
    }
}

pub(crate) type Step<T> = std::result::Result<T, Fail>;

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Create the store when it is missing, upgrade an older schema.
    Create,
    /// As `Create`, but a missing file, or a database without smtlab's schema, is an
    /// error.
    Existing,
    /// Read only: nothing is created or upgraded, and nothing can be written.
    ReadOnly,
}

/// What [`Store::push_to`] did with each run of the source, by the source's ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushReport {
    /// `(id in the source, id in the target)` of each run stored now.
    pub pushed: Vec<(i64, i64)>,
    /// `(id in the source, id in the target)` of each run the target held unfinished
    /// (pushed while interrupted) and that got the cells it lacked, and its status.
    pub completed: Vec<(i64, i64)>,
    /// Runs the target already held (the same run key) with all the source has: left
    /// as they are.
    pub present: Vec<i64>,
    /// Runs a live process is still measuring: not pushed (push them when they end).
    pub running: Vec<i64>,
    /// Runs the target lacks, that a dry run ([`Store::push_plan`]) did not copy (a dry
    /// run's `completed` are the runs a push would complete).
    pub missing: Vec<i64>,
}

/// What became of one run in a push: what storing it did, or what a dry run did not.
pub(crate) enum Pushed {
    /// Stored as a new run, with this id.
    Stored(i64),
    /// Already there unfinished, and given what it lacked (this id).
    Completed(i64),
    /// Already there with everything the source holds.
    Present,
    /// Not there, and not copied (a dry run).
    Missing,
}

impl Store {
    fn open_as(target: &Path, mode: Mode) -> Result<Store> {
        match target.to_str().filter(|s| pg::is_postgres_url(s)) {
            Some(url) => pg::open(url, mode),
            None => sqlite::open(target, mode),
        }
    }

    /// Opens the store `target` names, creating it (the file and its directory, or the
    /// schema in an existing PostgreSQL database) when it holds nothing yet, and
    /// upgrading an older schema.
    ///
    /// A zero-length file counts as empty and is initialised: SQLite itself treats it
    /// as an empty database, and it is what `touch` or a first open that was killed
    /// before its first write leaves behind.
    pub fn open(target: impl AsRef<Path>) -> Result<Store> {
        Self::open_as(target.as_ref(), Mode::Create)
    }

    /// Like [`open`](Self::open), but a missing file, or a PostgreSQL database without
    /// smtlab's schema, is an error, where creating an empty store would hide a wrong
    /// `--db`. It still upgrades an older schema.
    pub fn open_existing(target: impl AsRef<Path>) -> Result<Store> {
        Self::open_as(target.as_ref(), Mode::Existing)
    }

    /// Checks, before any time is spent measuring, that `target` can take results: an
    /// existing file must be an smtlab database this build reads (it is upgraded), a
    /// PostgreSQL database must be reachable (its schema is created). A missing file
    /// passes: it is created once there is something to store.
    pub fn check_target(target: impl AsRef<Path>) -> Result<()> {
        let target = target.as_ref();
        if target.to_str().is_some_and(pg::is_postgres_url) {
            drop(Self::open(target)?);
        } else if target.exists() {
            drop(Self::open_existing(target)?);
        }
        Ok(())
    }

    /// Opens a store for reading only (`runs`, `report`, `compare`, the source of
    /// `push`): nothing is created, upgraded or changed. An SQLite file is opened
    /// read-only (see the SQLite notes in `SCHEMA.md`) and a file of an older schema is
    /// read as it is; a PostgreSQL session is set read-only, so the server refuses any
    /// write.
    pub fn open_read_only(target: impl AsRef<Path>) -> Result<Store> {
        Self::open_as(target.as_ref(), Mode::ReadOnly)
    }

    /// The database file, or the PostgreSQL URL without its password: what messages
    /// name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this store is a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        matches!(self.db, Db::Pg(_))
    }

    /// Checks the store is sound: SQLite's `integrity_check`; for PostgreSQL, which
    /// checks its own pages, that every cell has its summary (what a half-written run
    /// would break; transactions make one impossible, and this says so).
    pub fn check_integrity(&self) -> Result<()> {
        let pg = self.is_postgres();
        let problems = self.read("checking integrity", |db| {
            if pg {
                let bad: i64 = db
                    .query_one(
                        "SELECT count(*) FROM cells c
                         WHERE NOT EXISTS (SELECT 1 FROM summaries s
                                           WHERE s.cell_id = c.id AND s.kind = 'value')",
                        &[],
                    )?
                    .get(0)?;
                return Ok(if bad == 0 {
                    Vec::new()
                } else {
                    vec![format!("{bad} cells have no value summary")]
                });
            }
            let lines = db.query("PRAGMA integrity_check", &[])?;
            let lines: Vec<String> = lines.iter().map(|r| r.get(0)).collect::<Step<_>>()?;
            Ok(if lines == ["ok"] { Vec::new() } else { lines })
        })?;
        if problems.is_empty() {
            return Ok(());
        }
        Err(StoreError::Corrupt {
            path: self.path.clone(),
            context: "integrity check failed".into(),
            detail: problems.into_iter().take(3).collect::<Vec<_>>().join("; "),
        })
    }

    /// Copies this store's runs into `target` (`smtlab push`): each run not yet there
    /// (by its key, [`run_uid`](Self::run_uid)) is stored whole, with its label, in one
    /// transaction; runs already there are left as they are, so pushing twice stores
    /// each run once, and two hosts pushing the same run at once store it once. Runs a
    /// live process is still measuring are left out.
    pub fn push_to(&self, target: &mut Store) -> Result<PushReport> {
        self.push_each(|run, uid| {
            let results = self.load_run(run.id)?;
            let doing = format!("storing pushed run {uid}");
            let label = run.label.as_deref();
            target.import_keyed(&results, uid, label, &doing)
        })
    }

    /// What [`push_to`](Self::push_to) would do (`push --dry-run`), writing nothing:
    /// the runs `target` lacks are in [`PushReport::missing`], the runs it holds
    /// unfinished with fewer cells or another status than here in
    /// [`PushReport::completed`]. `None`: a target that holds nothing yet (every run
    /// would be copied).
    pub fn push_plan(&self, target: Option<&Store>) -> Result<PushReport> {
        self.push_each(|run, uid| {
            let Some((id, status, rows)) =
                target.map(|t| t.stored_by_key(uid)).transpose()?.flatten()
            else {
                return Ok(Pushed::Missing);
            };
            let more = run.cells_done + run.cells_skipped > rows || run.status != status;
            Ok(match status {
                smtlab_model::RunStatus::Finished => Pushed::Present,
                _ if more => Pushed::Completed(id),
                _ => Pushed::Present,
            })
        })
    }

    /// Each run that is not being measured, with its key, to `put`.
    fn push_each(
        &self,
        mut put: impl FnMut(&RunListing, &str) -> Result<Pushed>,
    ) -> Result<PushReport> {
        let mut report = PushReport::default();
        for run in self.list_runs()? {
            if run.status == smtlab_model::RunStatus::Running {
                report.running.push(run.id);
                continue;
            }
            let uid = self.run_uid(run.id)?;
            match put(&run, &uid)? {
                Pushed::Stored(id) => report.pushed.push((run.id, id)),
                Pushed::Completed(id) => report.completed.push((run.id, id)),
                Pushed::Present => report.present.push(run.id),
                Pushed::Missing => report.missing.push(run.id),
            }
        }
        Ok(report)
    }

    /// The run stored under key `uid`: its id, status, and cells measured or skipped.
    fn stored_by_key(&self, uid: &str) -> Result<Option<(i64, smtlab_model::RunStatus, usize)>> {
        let id = if self.version < 6 {
            // No keys stored yet: derived as an upgrade would store them.
            let mut found = None;
            for run in self.list_runs()? {
                if self.run_uid(run.id)? == uid {
                    found = Some(run.id);
                    break;
                }
            }
            found
        } else {
            self.read("looking up a run by its key", |db| {
                let row = db.query_opt("SELECT id FROM runs WHERE uid = ?1", sql::args![uid])?;
                row.map(|r| r.get(0)).transpose()
            })?
        };
        let Some(id) = id else { return Ok(None) };
        self.read("reading a run's status", |db| {
            let r = db.query_one(
                "SELECT status,
                        (SELECT count(*) FROM cells c WHERE c.run_id = r.id)
                        + (SELECT count(*) FROM skipped s WHERE s.run_id = r.id)
                 FROM runs r WHERE r.id = ?1",
                sql::args![id],
            )?;
            let rows: i64 = r.get(1)?;
            let status = codec::parse_enum(r.text(0)?, "run status")?;
            Ok(Some((id, status, usize::try_from(rows).unwrap_or(0))))
        })
    }

    /// Runs `f` on a consistent view of the store (see [`Db::read`]).
    fn read<T>(&self, doing: &str, f: impl FnOnce(&mut dyn Sql) -> Step<T>) -> Result<T> {
        // The borrow of the connection ends before `fail`, which may query again.
        let r = self.db.read(f);
        r.map_err(|e| self.fail(doing, e))
    }

    /// Runs `f` in one write transaction (see [`Db::write`]).
    fn write<T>(&mut self, doing: &str, f: impl FnMut(&mut dyn Sql) -> Step<T>) -> Result<T> {
        let r = self.db.write(f);
        r.map_err(|e| self.fail(doing, e))
    }

    fn run_ids(&self) -> Result<Vec<i64>> {
        self.read("listing runs", |db| {
            let rows = db.query("SELECT id FROM runs ORDER BY id", &[])?;
            rows.iter().map(|r| r.get(0)).collect()
        })
    }

    /// Adds the database and what we were doing to an internal failure; a missing run
    /// says which runs exist.
    fn fail(&self, context: &str, e: Fail) -> StoreError {
        match e {
            Fail::NoRun(id) => StoreError::NoSuchRun {
                path: self.path.clone(),
                wanted: id.to_string(),
                existing: match self.run_ids() {
                    Ok(ids) => describe_ids(&ids),
                    Err(_) => "the runs it holds could not be listed".into(),
                },
            },
            e => error(&self.path, context, e),
        }
    }
}

/// An internal failure as the error users see, naming the database `path`.
pub(crate) fn error(path: &Path, context: &str, e: Fail) -> StoreError {
    let path = path.to_path_buf();
    match e {
        Fail::Sql(e) => sqlite::sql_error(&path, context, e),
        Fail::Pg(e) => pg::pg_error(&path, context, e),
        Fail::Decode(detail) => StoreError::Corrupt {
            path,
            context: context.to_string(),
            detail,
        },
        Fail::Invalid(detail) | Fail::Conflict(detail) => StoreError::Invalid {
            path,
            detail: format!("{context}: {detail}"),
        },
        Fail::NoRun(id) => StoreError::NoSuchRun {
            path,
            wanted: id.to_string(),
            existing: "the runs it holds were not listed".into(),
        },
    }
}
