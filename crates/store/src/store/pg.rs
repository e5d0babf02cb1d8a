//! The PostgreSQL backend: the same runs, cells, samples, rounds, skips and leases as
//! the SQLite file, in tables of the namespace `smtlab` of a shared database
//! ([`PG_SCHEMA_SQL`]), so that many hosts write into one store.
//!
//! * Concurrent writers: every write is one transaction; run, cell and skip ids come
//!   from identity sequences, so writers on any number of hosts never hand out the same
//!   id, and a cell's rows carry its id. Two processes never write one run at once: the
//!   run's lease ([`PgStore::lease_run_as`]) is taken with the run's row locked
//!   (`SELECT ... FOR UPDATE`), so two hosts asking at once get one lease.
//! * The schema is created (or upgraded) by the first writer, in one transaction that
//!   holds an advisory lock ([`PG_LOCK_KEY`]), so hosts starting together create it once.
//! * Read-only opens set `default_transaction_read_only`, so a command that only reads
//!   cannot change the database even by mistake, and never create the schema.
//! * Connections have a connect timeout (10 s unless the URL sets `connect_timeout`) and
//!   a lock timeout, so an unreachable or stuck server gives an error, not a hang.
//!
//! Messages name the URL without its password.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::types::ToSql;
use postgres::{Client, Config, GenericClient, NoTls, Row, Transaction};
use smtlab_model::result::Round;
use smtlab_model::{
    CellKey, CellRecord, CellResult, Environment, RESULTS_SCHEMA, RunMeta, RunResults, RunStatus,
    SampleRecord, SkippedCell, Summary,
};

use super::cells::{CellFacts, check_cell_finite, check_config_finite};
use super::codec::*;
use super::lease::{LEASE_HEARTBEAT, LeaseError, LeaseHolder, is_live, now_ms};
use super::runs::{RunListing, describe_ids, one_labelled, resolve_selector};
use super::{Fail, Step};
use crate::error::{PgError, Result, StoreError};
use crate::schema::{PG_LOCK_KEY, PG_MIGRATIONS, PG_SCHEMA_SQL, PG_SCHEMA_VERSION};
use crate::store::runs::check_label;

/// Whether a `--db` value names a PostgreSQL database (`postgresql://...` or
/// `postgres://...`) rather than a file.
pub(crate) fn is_postgres_url(target: &str) -> bool {
    target.starts_with("postgresql://") || target.starts_with("postgres://")
}

/// Seconds to wait for a connection unless the URL says otherwise.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Per-session settings: the namespace, and bounded waits for locks (another host's
/// transaction lasts milliseconds; a minute only passes when something is stuck).
const SESSION_SQL: &str = "SET search_path TO smtlab; SET lock_timeout = '60s';";

/// How a database is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Create the schema when it is missing, upgrade an older one.
    Create,
    /// As `Create`, but a database without smtlab's schema is an error.
    Existing,
    /// Read only: nothing is created or upgraded, and the session cannot write.
    ReadOnly,
}

/// An open PostgreSQL results store. The client sits in a `RefCell` because the
/// `postgres` client needs `&mut` even to read, and reading methods take `&self` (as
/// with SQLite, one store is used from one thread at a time).
pub(crate) struct PgStore {
    client: RefCell<Client>,
    config: Config,
    /// The URL without its password: what messages name.
    target: PathBuf,
    version: i64,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// `postgresql://user:secret@host/db?password=x` as `postgresql://user:***@host/db?password=***`.
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, tail) = rest.split_at(auth_end);
    let auth = match auth.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => auth.to_string(),
        },
        None => auth.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let q: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k == "password" => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", q.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{auth}{tail}")
}

pub(crate) fn pg_error(target: &Path, context: &str, e: postgres::Error) -> StoreError {
    StoreError::Postgres {
        path: target.to_path_buf(),
        context: context.to_string(),
        source: PgError(e),
    }
}

fn connect(config: &Config, read_only: bool) -> std::result::Result<Client, postgres::Error> {
    let mut client = config.connect(NoTls)?;
    client.batch_execute(SESSION_SQL)?;
    if read_only {
        client.batch_execute("SET default_transaction_read_only = on")?;
    }
    Ok(client)
}

/// What a first look at the database found: `None` when smtlab's schema is not there.
fn probe(c: &mut impl GenericClient) -> Step<Option<i64>> {
    // One statement, so both are read at one moment: asked one after the other, another
    // host's schema committed in between looks like tables without a version.
    let row = c.query_one(
        "SELECT to_regclass('smtlab.schema_version')::text, \
                (SELECT count(*) FROM pg_tables WHERE schemaname = 'smtlab')",
        &[],
    )?;
    let table: Option<String> = row.try_get(0)?;
    if table.is_none() {
        let others: i64 = row.try_get(1)?;
        if others > 0 {
            return Err(Fail::Conflict(
                "its schema smtlab holds tables that smtlab did not make (no smtlab.schema_version)"
                    .into(),
            ));
        }
        return Ok(None);
    }
    let v: Option<i64> = c
        .query_one("SELECT max(version) FROM smtlab.schema_version", &[])?
        .try_get(0)?;
    Ok(Some(v.unwrap_or(0)))
}

impl PgStore {
    pub(crate) fn open(url: &str, mode: Mode) -> Result<PgStore> {
        let target = PathBuf::from(redact(url));
        let mut config: Config = url
            .parse()
            .map_err(|e: postgres::Error| StoreError::Invalid {
                path: target.clone(),
                detail: format!(
                    "not a PostgreSQL URL ({}); expected postgresql://user@host/database",
                    PgError(e)
                ),
            })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("smtlab");
        }
        let client = connect(&config, mode == Mode::ReadOnly)
            .map_err(|e| pg_error(&target, "connecting", e))?;
        let mut store = PgStore {
            client: RefCell::new(client),
            config,
            target,
            version: PG_SCHEMA_VERSION,
        };
        let found = {
            let c = &mut *store.client.borrow_mut();
            probe(c)
        }
        .map_err(|e| store.fail("reading the schema version", e))?;
        match (found, mode) {
            (Some(v), _) if v > PG_SCHEMA_VERSION => {
                return Err(StoreError::Newer {
                    path: store.target.clone(),
                    found: v,
                    supported: PG_SCHEMA_VERSION,
                });
            }
            (None, Mode::ReadOnly | Mode::Existing) => {
                return Err(StoreError::Empty {
                    path: store.target.clone(),
                });
            }
            (Some(v), Mode::ReadOnly) => store.version = v,
            (Some(PG_SCHEMA_VERSION), _) => {}
            (_, Mode::Create | Mode::Existing) => store.initialise()?,
        }
        Ok(store)
    }

    /// Creates the schema or upgrades it, once however many hosts try at the same time.
    fn initialise(&mut self) -> Result<()> {
        let r = (|| -> Step<()> {
            let c = &mut *self.client.borrow_mut();
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PG_LOCK_KEY])?;
            tx.batch_execute("CREATE SCHEMA IF NOT EXISTS smtlab")?;
            match probe(&mut tx)? {
                Some(PG_SCHEMA_VERSION) => return Ok(()),
                Some(v) if v > PG_SCHEMA_VERSION => {
                    return Err(Fail::Conflict(format!(
                        "another smtlab wrote schema {v} while this one opened the database"
                    )));
                }
                Some(v) => {
                    for (_, sql) in PG_MIGRATIONS.iter().filter(|(to, _)| *to > v) {
                        tx.batch_execute(sql)?;
                    }
                    tx.execute("DELETE FROM smtlab.schema_version", &[])?;
                }
                None => tx.batch_execute(PG_SCHEMA_SQL)?,
            }
            tx.execute(
                "INSERT INTO smtlab.schema_version (version) VALUES ($1)",
                &[&PG_SCHEMA_VERSION],
            )?;
            tx.commit()?;
            Ok(())
        })();
        r.map_err(|e| self.fail("creating the schema", e))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.target
    }

    /// PostgreSQL checks its own pages; this checks that every cell has its summary,
    /// every stored run its key and every lease its run: what a half-written run would
    /// break. (Transactions make half-written runs impossible; the check says so.)
    pub(crate) fn check_integrity(&self) -> Result<()> {
        let r = (|| -> Step<i64> {
            let c = &mut *self.client.borrow_mut();
            Ok(c.query_one(
                "SELECT count(*) FROM cells c
                 WHERE NOT EXISTS (SELECT 1 FROM summaries s
                                   WHERE s.cell_id = c.id AND s.kind = 'value')",
                &[],
            )?
            .try_get(0)?)
        })();
        let bad = r.map_err(|e| self.fail("checking integrity", e))?;
        if bad == 0 {
            Ok(())
        } else {
            Err(StoreError::Corrupt {
                path: self.target.clone(),
                context: "integrity check failed".into(),
                detail: format!("{bad} cells have no value summary"),
            })
        }
    }

    fn fail(&self, context: &str, e: Fail) -> StoreError {
        let path = self.target.clone();
        match e {
            Fail::Pg(e) => pg_error(&path, context, e),
            Fail::Sql(e) => StoreError::Sqlite {
                path,
                context: context.to_string(),
                source: crate::error::SqlError(e),
            },
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
                existing: match self.run_ids() {
                    Ok(ids) => describe_ids(&ids),
                    Err(_) => "the runs it holds could not be listed".into(),
                },
            },
        }
    }

    fn run_ids(&self) -> Result<Vec<i64>> {
        let r = (|| -> Step<Vec<i64>> {
            let c = &mut *self.client.borrow_mut();
            c.query("SELECT id FROM runs ORDER BY id", &[])?
                .iter()
                .map(|r| Ok(r.try_get(0)?))
                .collect()
        })();
        r.map_err(|e| self.fail("listing runs", e))
    }

    /// Runs `f` in one transaction, committed when it returns `Ok`.
    fn write<T>(&self, doing: &str, f: impl FnOnce(&mut Transaction<'_>) -> Step<T>) -> Result<T> {
        let r = (|| -> Step<T> {
            let c = &mut *self.client.borrow_mut();
            let mut tx = c.transaction()?;
            let out = f(&mut tx)?;
            tx.commit()?;
            Ok(out)
        })();
        r.map_err(|e| self.fail(doing, e))
    }

    /// Runs `f` on the session, outside an explicit transaction.
    fn read<T>(&self, doing: &str, f: impl FnOnce(&mut Client) -> Step<T>) -> Result<T> {
        // The borrow ends before `fail`, which may query again (to list the runs).
        let r = f(&mut self.client.borrow_mut());
        r.map_err(|e| self.fail(doing, e))
    }

    pub(crate) fn create_run(&mut self, meta: &RunMeta) -> Result<i64> {
        self.write("storing a new run", |tx| {
            insert_run(tx, meta, &new_uid(meta.started_unix_s), None)?
                .ok_or_else(|| Fail::Conflict("a fresh run key is already taken".into()))
        })
    }

    pub(crate) fn finish_run(
        &mut self,
        run_id: i64,
        status: RunStatus,
        finished_unix_s: u64,
    ) -> Result<()> {
        self.set_status(run_id, status, Some(finished_unix_s), "finishing")
    }

    pub(crate) fn mark_interrupted(&mut self, run_id: i64) -> Result<()> {
        self.write(&format!("marking run {run_id} interrupted"), |tx| {
            let n = tx.execute(
                "UPDATE runs SET status = 'interrupted' WHERE id = $1 AND status != 'finished'",
                &[&run_id],
            )?;
            if n == 0 && !run_exists(tx, run_id)? {
                return Err(Fail::NoRun(run_id));
            }
            Ok(())
        })
    }

    pub(crate) fn reopen_run(&mut self, run_id: i64) -> Result<()> {
        self.set_status(run_id, RunStatus::Running, None, "reopening")
    }

    fn set_status(
        &mut self,
        run_id: i64,
        status: RunStatus,
        finished_unix_s: Option<u64>,
        doing: &str,
    ) -> Result<()> {
        self.write(&format!("{doing} run {run_id}"), |tx| {
            let finished = finished_unix_s
                .map(|s| int(s, "finished_unix_s"))
                .transpose()?;
            let n = tx.execute(
                "UPDATE runs SET status = $2, finished_unix_s = $3 WHERE id = $1",
                &[&run_id, &status_text(status), &finished],
            )?;
            if n == 0 {
                return Err(Fail::NoRun(run_id));
            }
            Ok(())
        })
    }

    pub(crate) fn import_run(&mut self, results: &RunResults) -> Result<i64> {
        let uid = new_uid(results.run.started_unix_s);
        self.import_keyed(results, &uid, None)?
            .ok_or_else(|| StoreError::Invalid {
                path: self.target.clone(),
                detail: format!("importing a run: a fresh run key {uid} is already taken"),
            })
    }

    pub(crate) fn import_keyed(
        &mut self,
        results: &RunResults,
        uid: &str,
        label: Option<&str>,
    ) -> Result<Option<i64>> {
        for cell in &results.cells {
            check_cell_finite(cell).map_err(|e| StoreError::Invalid {
                path: self.target.clone(),
                detail: format!("importing a run: cell {}: {e}", describe_key(&cell.key())),
            })?;
        }
        self.write(&format!("storing run {uid}"), |tx| {
            // ON CONFLICT in insert_run: a run pushed by two hosts at once is stored once.
            let Some(id) = insert_run(tx, &results.run, uid, label)? else {
                return Ok(None);
            };
            for cell in &results.cells {
                insert_cell(tx, id, cell)?;
            }
            for s in &results.skipped {
                insert_skipped(tx, id, s)?;
            }
            Ok(Some(id))
        })
    }

    pub(crate) fn run_uid(&self, run_id: i64) -> Result<String> {
        self.read(&format!("reading the key of run {run_id}"), |c| {
            let row = c
                .query_opt("SELECT uid FROM runs WHERE id = $1", &[&run_id])?
                .ok_or(Fail::NoRun(run_id))?;
            Ok(row.try_get(0)?)
        })
    }

    pub(crate) fn load_run(&self, run_id: i64) -> Result<RunResults> {
        self.read(&format!("loading run {run_id}"), |c| {
            // One snapshot: a writer saving a cell meanwhile is seen whole or not at all.
            let mut tx = c
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()?;
            let run = load_meta(&mut tx, run_id)?;
            let cells = load_cells(&mut tx, run_id)?;
            let skipped = load_skipped(&mut tx, run_id)?
                .into_iter()
                .map(|(key, reason)| SkippedCell { key, reason })
                .collect();
            tx.commit()?;
            Ok(RunResults {
                schema: RESULTS_SCHEMA.to_string(),
                run,
                cells,
                skipped,
                benchmarks: Vec::new(),
            })
        })
    }

    pub(crate) fn list_runs(&self) -> Result<Vec<RunListing>> {
        self.read("listing runs", |c| {
            let rows = c.query(
                "SELECT r.id, r.started_unix_s, r.finished_unix_s, r.status, r.suite,
                        r.hostname, r.cpu_model,
                        (SELECT count(*) FROM cells c WHERE c.run_id = r.id),
                        (SELECT count(*) FROM skipped s WHERE s.run_id = r.id),
                        (SELECT count(*) FROM plan p WHERE p.run_id = r.id),
                        r.label
                 FROM runs r ORDER BY r.id",
                &[],
            )?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                let id: i64 = row.try_get(0)?;
                let status = parse_status(row.try_get(3)?)?;
                out.push(RunListing {
                    id,
                    started_unix_s: nat(row.try_get(1)?, "runs.started_unix_s")?,
                    finished_unix_s: row
                        .try_get::<_, Option<i64>>(2)?
                        .map(|v| nat(v, "runs.finished_unix_s"))
                        .transpose()?,
                    status: effective_status(c, id, status),
                    suite: row.try_get(4)?,
                    hostname: row.try_get(5)?,
                    cpu_model: row.try_get(6)?,
                    cells_done: count(&row, 7)?,
                    cells_skipped: count(&row, 8)?,
                    cells_planned: count(&row, 9)?,
                    label: row.try_get(10)?,
                });
            }
            Ok(out)
        })
    }

    pub(crate) fn latest_run_id(&self) -> Result<Option<i64>> {
        self.read("finding the latest run", |c| {
            Ok(c.query_one("SELECT max(id) FROM runs", &[])?.try_get(0)?)
        })
    }

    pub(crate) fn latest_unfinished_run(&self) -> Result<Option<i64>> {
        self.read("finding the latest unfinished run", |c| {
            Ok(
                c.query_one("SELECT max(id) FROM runs WHERE status != 'finished'", &[])?
                    .try_get(0)?,
            )
        })
    }

    pub(crate) fn resolve_run(&self, selector: &str) -> Result<i64> {
        let s = selector.trim();
        if check_label(s).is_ok() {
            let ids = self.read(&format!("finding the run labelled {s:?}"), |c| {
                c.query("SELECT id FROM runs WHERE label = $1 ORDER BY id", &[&s])?
                    .iter()
                    .map(|r| Ok(r.try_get(0)?))
                    .collect::<Step<Vec<i64>>>()
            })?;
            if let Some(id) = one_labelled(&self.target, s, &ids)? {
                return Ok(id);
            }
        }
        resolve_selector(&self.target, selector, &self.run_ids()?)
    }

    pub(crate) fn run_label(&self, run_id: i64) -> Result<Option<String>> {
        self.read(&format!("reading the label of run {run_id}"), |c| {
            Ok(
                c.query_opt("SELECT label FROM runs WHERE id = $1", &[&run_id])?
                    .ok_or(Fail::NoRun(run_id))?
                    .try_get(0)?,
            )
        })
    }

    pub(crate) fn set_run_label(&mut self, run_id: i64, label: Option<&str>) -> Result<()> {
        if let Some(l) = label {
            check_label(l).map_err(|e| StoreError::Invalid {
                path: self.target.clone(),
                detail: e.to_string(),
            })?;
        }
        self.write(&format!("labelling run {run_id}"), |tx| {
            let n = tx.execute(
                "UPDATE runs SET label = $1 WHERE id = $2",
                &[&label, &run_id],
            )?;
            if n == 0 {
                return Err(Fail::NoRun(run_id));
            }
            Ok(())
        })
    }

    pub(crate) fn delete_runs(&mut self, run_ids: &[i64]) -> Result<()> {
        let now = now_ms();
        self.write("deleting runs", |tx| {
            for &id in run_ids {
                // Locked: a lease cannot be taken on it until this transaction ends.
                if tx
                    .query_opt("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", &[&id])?
                    .is_none()
                {
                    return Err(Fail::NoRun(id));
                }
                if let Some((h, _)) = holder(tx, id, now)?
                    && is_live(&h)
                {
                    return Err(Fail::Conflict(format!(
                        "run {id} is being measured by process {} on {}; stop it first",
                        h.pid, h.host
                    )));
                }
            }
            for &id in run_ids {
                tx.execute("DELETE FROM runs WHERE id = $1", &[&id])?;
            }
            Ok(())
        })
    }

    pub(crate) fn pending_cells(&self, run_id: i64) -> Result<Vec<CellKey>> {
        self.read(&format!("listing pending cells of run {run_id}"), |c| {
            let plan = load_plan(c, run_id)?;
            if plan.is_empty() && !run_exists(c, run_id)? {
                return Err(Fail::NoRun(run_id));
            }
            let mut done: HashSet<CellKey> = stored_cell_keys(c, run_id)?;
            done.extend(load_skipped(c, run_id)?.into_iter().map(|(k, _)| k));
            Ok(plan.into_iter().filter(|k| !done.contains(k)).collect())
        })
    }

    pub(crate) fn save_cell(&mut self, run_id: i64, cell: &CellRecord) -> Result<()> {
        let doing = format!("saving cell {} in run {run_id}", describe_key(&cell.key()));
        check_cell_finite(cell).map_err(|e| self.fail(&doing, Fail::Invalid(e.to_string())))?;
        self.write(&doing, |tx| insert_cell(tx, run_id, cell))
    }

    pub(crate) fn save_skipped(&mut self, run_id: i64, skipped: &SkippedCell) -> Result<()> {
        let doing = format!(
            "saving skipped cell {} in run {run_id}",
            describe_key(&skipped.key)
        );
        self.write(&doing, |tx| insert_skipped(tx, run_id, skipped))
    }

    pub(crate) fn lease_holder(&self, run_id: i64) -> Result<Option<LeaseHolder>> {
        self.read(&format!("reading the lease of run {run_id}"), |c| {
            Ok(holder(c, run_id, now_ms())?.map(|(h, _)| h))
        })
    }

    pub(crate) fn lease_run_as(
        &mut self,
        run_id: i64,
        pid: u32,
        host: &str,
    ) -> std::result::Result<PgLease, LeaseError> {
        let token = format!("{pid}-{host}-{}", new_uid(now_ms()));
        let doing = format!("leasing run {run_id}");
        let now = now_ms();
        enum Got {
            Taken(Option<LeaseHolder>),
            Held(LeaseHolder),
        }
        let got = self.write(&doing, |tx| {
            // The run's row, locked: another host leasing it now waits for this one.
            if tx
                .query_opt("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", &[&run_id])?
                .is_none()
            {
                return Err(Fail::NoRun(run_id));
            }
            let takeover = match holder(tx, run_id, now)? {
                Some((h, _)) if is_live(&h) => return Ok(Got::Held(h)),
                other => other.map(|(h, _)| h),
            };
            let now = int(now, "lease time")?;
            tx.execute(
                "INSERT INTO leases (run_id, pid, host, token, acquired_unix_ms, heartbeat_unix_ms)
                 VALUES ($1, $2, $3, $4, $5, $5)
                 ON CONFLICT (run_id) DO UPDATE SET pid = EXCLUDED.pid, host = EXCLUDED.host,
                     token = EXCLUDED.token, acquired_unix_ms = EXCLUDED.acquired_unix_ms,
                     heartbeat_unix_ms = EXCLUDED.heartbeat_unix_ms",
                &[&run_id, &i64::from(pid), &host, &token, &now],
            )?;
            Ok(Got::Taken(takeover))
        })?;
        let takeover = match got {
            Got::Held(holder) => return Err(LeaseError::Held { run_id, holder }),
            Got::Taken(t) => t,
        };
        let client = connect(&self.config, false).map_err(|e| pg_error(&self.target, &doing, e))?;
        let (stop, beat) = match connect(&self.config, false) {
            Ok(mut c) => {
                let (tx, rx) = mpsc::channel();
                let token = token.clone();
                let beat = std::thread::Builder::new()
                    .name(format!("lease-run-{run_id}"))
                    .spawn(move || heartbeats(&mut c, run_id, &token, &rx))
                    .ok();
                (Some(tx), beat)
            }
            Err(_) => (None, None),
        };
        Ok(PgLease {
            run_id,
            target: self.target.clone(),
            token,
            client,
            takeover,
            stop,
            beat,
        })
    }
}

/// A run's lease held in PostgreSQL; see [`crate::Lease`].
pub(crate) struct PgLease {
    run_id: i64,
    target: PathBuf,
    token: String,
    client: Client,
    takeover: Option<LeaseHolder>,
    stop: Option<mpsc::Sender<()>>,
    beat: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for PgLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLease")
            .field("run_id", &self.run_id)
            .field("target", &self.target)
            .field("takeover", &self.takeover)
            .finish_non_exhaustive()
    }
}

impl PgLease {
    pub(crate) fn run_id(&self) -> i64 {
        self.run_id
    }

    pub(crate) fn taken_over_from(&self) -> Option<&LeaseHolder> {
        self.takeover.as_ref()
    }

    pub(crate) fn heartbeat(&mut self) -> std::result::Result<(), LeaseError> {
        let now = now_ms();
        let doing = format!("renewing the lease of run {}", self.run_id);
        let n = renew(&mut self.client, self.run_id, &self.token, now)
            .map_err(|e| pg_error(&self.target, &doing, e))?;
        if n == 1 {
            return Ok(());
        }
        match holder(&mut self.client, self.run_id, now) {
            Ok(Some((h, _))) => Err(LeaseError::Lost {
                run_id: self.run_id,
                holder: h,
            }),
            Ok(None) => Err(LeaseError::Gone {
                run_id: self.run_id,
            }),
            Err(Fail::Pg(e)) => Err(pg_error(&self.target, &doing, e).into()),
            Err(_) => Err(LeaseError::Gone {
                run_id: self.run_id,
            }),
        }
    }
}

impl Drop for PgLease {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.beat.take() {
            let _ = t.join();
        }
        // Only our own row: a process that took the lease over keeps its own.
        let _ = self.client.execute(
            "DELETE FROM leases WHERE run_id = $1 AND token = $2",
            &[&self.run_id, &self.token],
        );
    }
}

fn heartbeats(c: &mut Client, run_id: i64, token: &str, stop: &mpsc::Receiver<()>) {
    // A failed renewal (server unreachable for a while) is retried at the next tick; the
    // holder's own `heartbeat` reports a lease that is really lost.
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(LEASE_HEARTBEAT) {
        if let Ok(0) = renew(c, run_id, token, now_ms()) {
            return;
        }
    }
}

fn renew(
    c: &mut Client,
    run_id: i64,
    token: &str,
    now: u64,
) -> std::result::Result<u64, postgres::Error> {
    let now = i64::try_from(now).unwrap_or(i64::MAX);
    c.execute(
        "UPDATE leases SET heartbeat_unix_ms = $3 WHERE run_id = $1 AND token = $2",
        &[&run_id, &token, &now],
    )
}

fn holder(
    c: &mut impl GenericClient,
    run_id: i64,
    now: u64,
) -> Step<Option<(LeaseHolder, String)>> {
    let Some(r) = c.query_opt(
        "SELECT pid, host, heartbeat_unix_ms, token FROM leases WHERE run_id = $1",
        &[&run_id],
    )?
    else {
        return Ok(None);
    };
    let beat = u64::try_from(r.try_get::<_, i64>(2)?).unwrap_or(0);
    Ok(Some((
        LeaseHolder {
            pid: u32::try_from(r.try_get::<_, i64>(0)?)
                .map_err(|_| Fail::Decode("leases.pid out of range".into()))?,
            host: r.try_get(1)?,
            heartbeat_age_ms: now.saturating_sub(beat),
        },
        r.try_get(3)?,
    )))
}

/// As for SQLite: a run stored as running that no live process measures reads as
/// interrupted.
fn effective_status(c: &mut impl GenericClient, run_id: i64, stored: RunStatus) -> RunStatus {
    if stored != RunStatus::Running {
        return stored;
    }
    match holder(c, run_id, now_ms()) {
        Ok(Some((h, _))) if is_live(&h) => RunStatus::Running,
        Ok(_) => RunStatus::Interrupted,
        Err(_) => stored,
    }
}

/// A model's unsigned number as PostgreSQL's signed 64-bit integer; above 2^63-1 is
/// refused, as in SQLite.
fn int(v: u64, what: &str) -> Step<i64> {
    i64::try_from(v).map_err(|_| Fail::Invalid(format!("{what} = {v} is above 2^63-1")))
}

fn size(v: usize, what: &str) -> Step<i64> {
    int(v as u64, what)
}

/// A stored integer that must not be negative.
fn nat(v: i64, what: &str) -> Step<u64> {
    u64::try_from(v).map_err(|_| Fail::Decode(format!("{what} is negative ({v})")))
}

fn count(row: &Row, i: usize) -> Step<usize> {
    Ok(nat(row.try_get(i)?, "a count")? as usize)
}

fn run_exists(c: &mut impl GenericClient, run_id: i64) -> Step<bool> {
    Ok(c.query_opt("SELECT 1 FROM runs WHERE id = $1", &[&run_id])?
        .is_some())
}

/// Inserts a run and its plan; `None` when a run with key `uid` is already stored.
fn insert_run(
    tx: &mut Transaction<'_>,
    meta: &RunMeta,
    uid: &str,
    label: Option<&str>,
) -> Step<Option<i64>> {
    check_config_finite(&meta.config).map_err(|e| Fail::Invalid(e.to_string()))?;
    let env = &meta.environment;
    let started = int(meta.started_unix_s, "started_unix_s")?;
    let finished = meta
        .finished_unix_s
        .map(|s| int(s, "finished_unix_s"))
        .transpose()?;
    let (cmd, env_json, topo, config, notes) = (
        to_json(&meta.command_line)?,
        to_json(env)?,
        to_json(&meta.topology)?,
        to_json(&meta.config)?,
        to_json(&meta.notes)?,
    );
    let row = tx.query_opt(
        "INSERT INTO runs (uid, started_unix_s, finished_unix_s, status, suite, command_line,
                           tool_version, git_commit, hostname, kernel, cpu_model, smt_control,
                           environment, topology, config, notes, label)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
         ON CONFLICT (uid) DO NOTHING
         RETURNING id",
        &[
            &uid,
            &started,
            &finished,
            &status_text(meta.status),
            &meta.suite,
            &cmd,
            &env.tool_version,
            &env.git_commit,
            &env.hostname,
            &env.kernel,
            &env.cpu_model,
            &env.smt_control,
            &env_json,
            &topo,
            &config,
            &notes,
            &label,
        ],
    )?;
    let Some(row) = row else { return Ok(None) };
    let id: i64 = row.try_get(0)?;
    let stmt = tx.prepare(
        "INSERT INTO plan (run_id, position, benchmark, params, placement)
         VALUES ($1, $2, $3, $4, $5)",
    )?;
    for (pos, key) in meta.plan.iter().enumerate() {
        tx.execute(
            &stmt,
            &[
                &id,
                &size(pos, "plan position")?,
                &key.benchmark,
                &key_params_json(&key.params, &key.conditions)?,
                &key.placement,
            ],
        )?;
    }
    Ok(Some(id))
}

fn insert_cell(tx: &mut Transaction<'_>, run_id: i64, cell: &CellRecord) -> Step<()> {
    if !run_exists(tx, run_id)? {
        return Err(Fail::NoRun(run_id));
    }
    let params_json = key_params_json(&cell.params, &cell.conditions)?;
    let key: [&(dyn ToSql + Sync); 4] =
        [&run_id, &cell.benchmark, &params_json, &cell.placement_spec];
    // ON DELETE CASCADE removes the old samples, summaries and series with it.
    tx.execute(
        "DELETE FROM cells WHERE run_id = $1 AND benchmark = $2 AND params = $3
                             AND placement_spec = $4",
        &key,
    )?;
    tx.execute(
        "DELETE FROM skipped WHERE run_id = $1 AND benchmark = $2 AND params = $3
                               AND placement = $4",
        &key,
    )?;
    let position: Option<i64> = tx
        .query_one(
            "SELECT min(position) FROM plan WHERE run_id = $1 AND benchmark = $2
                                             AND params = $3 AND placement = $4",
            &key,
        )?
        .try_get(0)?;
    let r = &cell.result;
    let facts = CellFacts {
        calibration: r.calibration.clone(),
        warmup: r.warmup,
        clock_cost_ns: r.clock_cost_ns,
        loop_cost_ns_per_iter: r.loop_cost_ns_per_iter,
        subtracted_ns_per_sample: r.subtracted_ns_per_sample,
        config: r.config.clone(),
    };
    let counters = cell.counters.as_ref().map(to_json).transpose()?;
    let cell_id: i64 = tx
        .query_one(
            "INSERT INTO cells (run_id, position, benchmark, group_name, unit, direction, params,
                                placement_spec, placement_name, cpus, placement, converged,
                                stop_reason, iterations, wall_ns, facts, counters)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
             RETURNING id",
            &[
                &run_id,
                &position,
                &cell.benchmark,
                &cell.group,
                &cell.unit,
                &direction_text(cell.direction),
                &params_json,
                &cell.placement_spec,
                &cell.placement.name,
                &cell.placement.cpu_set().to_list_string(),
                &to_json(&cell.placement)?,
                &r.converged,
                &stop_text(r.stop_reason),
                &int(r.iterations, "iterations")?,
                &int(r.wall_ns, "wall_ns")?,
                &to_json(&facts)?,
                &counters,
            ],
        )?
        .try_get(0)?;

    let stmt = tx.prepare(
        "INSERT INTO samples (cell_id, idx, value, iterations, elapsed_ns, work, cpu_ns,
                              start_spread_ns, cpus, metrics)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )?;
    for (i, s) in r.samples.iter().enumerate() {
        let metrics = if s.metrics.is_empty() {
            None
        } else {
            Some(to_json(&s.metrics)?)
        };
        tx.execute(
            &stmt,
            &[
                &cell_id,
                &size(i, "sample index")?,
                &s.value,
                &int(s.iterations, "samples.iterations")?,
                &int(s.elapsed_ns, "samples.elapsed_ns")?,
                &s.work,
                &s.cpu_ns.map(|v| int(v, "samples.cpu_ns")).transpose()?,
                &s.start_spread_ns
                    .map(|v| int(v, "samples.start_spread_ns"))
                    .transpose()?,
                &to_json(&s.cpus)?,
                &metrics,
            ],
        )?;
    }

    let stmt = tx.prepare(
        "INSERT INTO summaries (cell_id, kind, n, mean, median, min, max, p25, p75, stddev,
                                ci95_half_width, ci95_rel)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )?;
    let summaries = [
        ("value", Some(&r.summary)),
        ("cpu_rate", r.cpu_rate.as_ref()),
        ("start_spread_ns", r.start_spread_ns.as_ref()),
    ];
    for (kind, s) in summaries {
        let Some(s) = s else { continue };
        let n = size(s.n, "summary n")?;
        let head: [&(dyn ToSql + Sync); 3] = [&cell_id, &kind, &n];
        let values = summary_values(s);
        let all: Vec<&(dyn ToSql + Sync)> = head.into_iter().chain(values).collect();
        tx.execute(&stmt, &all)?;
    }

    let stmt = tx.prepare(
        "INSERT INTO rounds (cell_id, idx, iterations, converged, wall_ns, n, mean, median, min,
                             max, p25, p75, stddev, ci95_half_width, ci95_rel)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    )?;
    for (i, round) in r.rounds.iter().enumerate() {
        let (idx, iterations, wall, n) = (
            size(i, "round index")?,
            int(round.iterations, "rounds.iterations")?,
            int(round.wall_ns, "rounds.wall_ns")?,
            size(round.summary.n, "rounds.n")?,
        );
        let head: [&(dyn ToSql + Sync); 6] =
            [&cell_id, &idx, &iterations, &round.converged, &wall, &n];
        let values = summary_values(&round.summary);
        let all: Vec<&(dyn ToSql + Sync)> = head.into_iter().chain(values).collect();
        tx.execute(&stmt, &all)?;
    }

    let stmt = tx.prepare("INSERT INTO series (cell_id, name, n, data) VALUES ($1, $2, $3, $4)")?;
    for (name, values) in &r.series {
        tx.execute(
            &stmt,
            &[
                &cell_id,
                name,
                &size(values.len(), "series length")?,
                &encode_series(values),
            ],
        )?;
    }
    Ok(())
}

/// The nine floating-point summary columns after `n`, in table order.
fn summary_values(s: &Summary) -> [&(dyn ToSql + Sync); 9] {
    [
        &s.mean,
        &s.median,
        &s.min,
        &s.max,
        &s.p25,
        &s.p75,
        &s.stddev,
        &s.ci95_half_width,
        &s.ci95_rel,
    ]
}

/// A summary from the columns starting at `first` (`n`, then [`summary_values`]).
fn summary_at(r: &Row, first: usize) -> Step<Summary> {
    Ok(Summary {
        n: count(r, first)?,
        mean: r.try_get(first + 1)?,
        median: r.try_get(first + 2)?,
        min: r.try_get(first + 3)?,
        max: r.try_get(first + 4)?,
        p25: r.try_get(first + 5)?,
        p75: r.try_get(first + 6)?,
        stddev: r.try_get(first + 7)?,
        ci95_half_width: r.try_get(first + 8)?,
        ci95_rel: r.try_get(first + 9)?,
    })
}

fn insert_skipped(tx: &mut Transaction<'_>, run_id: i64, s: &SkippedCell) -> Step<()> {
    if !run_exists(tx, run_id)? {
        return Err(Fail::NoRun(run_id));
    }
    let params_json = key_params_json(&s.key.params, &s.key.conditions)?;
    let key: [&(dyn ToSql + Sync); 4] = [&run_id, &s.key.benchmark, &params_json, &s.key.placement];
    let measured = tx
        .query_opt(
            "SELECT 1 FROM cells WHERE run_id = $1 AND benchmark = $2 AND params = $3
                                   AND placement_spec = $4",
            &key,
        )?
        .is_some();
    if measured {
        return Err(Fail::Conflict(
            "the cell is already measured in this run; a cell is measured or skipped, not both"
                .into(),
        ));
    }
    tx.execute(
        "DELETE FROM skipped WHERE run_id = $1 AND benchmark = $2 AND params = $3
                               AND placement = $4",
        &key,
    )?;
    tx.execute(
        "INSERT INTO skipped (run_id, benchmark, params, placement, reason)
         VALUES ($1, $2, $3, $4, $5)",
        &[
            &run_id,
            &s.key.benchmark,
            &params_json,
            &s.key.placement,
            &s.reason,
        ],
    )?;
    Ok(())
}

fn load_meta(c: &mut impl GenericClient, run_id: i64) -> Step<RunMeta> {
    let Some(r) = c.query_opt(
        "SELECT started_unix_s, finished_unix_s, status, suite, command_line, environment,
                topology, config, notes
         FROM runs WHERE id = $1",
        &[&run_id],
    )?
    else {
        return Err(Fail::NoRun(run_id));
    };
    let status = parse_status(r.try_get(2)?)?;
    Ok(RunMeta {
        id: run_id,
        started_unix_s: nat(r.try_get(0)?, "runs.started_unix_s")?,
        finished_unix_s: r
            .try_get::<_, Option<i64>>(1)?
            .map(|v| nat(v, "runs.finished_unix_s"))
            .transpose()?,
        status: effective_status(c, run_id, status),
        command_line: from_json(r.try_get(4)?, "runs.command_line")?,
        suite: r.try_get(3)?,
        environment: from_json::<Environment>(r.try_get(5)?, "runs.environment")?,
        topology: from_json(r.try_get(6)?, "runs.topology")?,
        config: from_json(r.try_get(7)?, "runs.config")?,
        plan: load_plan(c, run_id)?,
        notes: from_json(r.try_get(8)?, "runs.notes")?,
    })
}

fn load_plan(c: &mut impl GenericClient, run_id: i64) -> Step<Vec<CellKey>> {
    c.query(
        "SELECT benchmark, params, placement FROM plan WHERE run_id = $1 ORDER BY position",
        &[&run_id],
    )?
    .iter()
    .map(|r| key_of(r, "plan.params"))
    .collect()
}

/// The cell key in a row's first three columns (benchmark, params, placement); `what`
/// names the params column in errors.
fn key_of(r: &Row, what: &str) -> Step<CellKey> {
    let (params, conditions) = key_params_from_json(r.try_get(1)?, what)?;
    Ok(CellKey {
        benchmark: r.try_get(0)?,
        params,
        conditions,
        placement: r.try_get(2)?,
    })
}

fn stored_cell_keys(c: &mut impl GenericClient, run_id: i64) -> Step<HashSet<CellKey>> {
    c.query(
        "SELECT benchmark, params, placement_spec FROM cells WHERE run_id = $1",
        &[&run_id],
    )?
    .iter()
    .map(|r| key_of(r, "cells.params"))
    .collect()
}

fn load_skipped(c: &mut impl GenericClient, run_id: i64) -> Step<Vec<(CellKey, String)>> {
    c.query(
        "SELECT benchmark, params, placement, reason FROM skipped WHERE run_id = $1 ORDER BY id",
        &[&run_id],
    )?
    .iter()
    .map(|r| Ok((key_of(r, "skipped.params")?, r.try_get(3)?)))
    .collect()
}

fn load_cells(c: &mut impl GenericClient, run_id: i64) -> Step<Vec<CellRecord>> {
    let rows = c.query(
        "SELECT id, benchmark, group_name, unit, direction, params, placement_spec, placement,
                converged, stop_reason, iterations, wall_ns, facts, counters
         FROM cells WHERE run_id = $1 ORDER BY id",
        &[&run_id],
    )?;
    // The rows below every cell, fetched once per table for the whole run rather than
    // once per cell: a 300-cell run is a handful of round trips, not a thousand.
    let mut samples = load_samples(c, run_id)?;
    let mut summaries = load_summaries(c, run_id)?;
    let mut rounds = load_rounds(c, run_id)?;
    let mut series = load_series(c, run_id)?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let cell_id: i64 = r.try_get(0)?;
        let at = |col: &str| format!("cell {cell_id}: {col}");
        let facts: CellFacts = from_json(r.try_get(12)?, &at("facts"))?;
        let counters = match r.try_get::<_, Option<&str>>(13)? {
            Some(text) => Some(from_json(text, &at("counters"))?),
            None => None,
        };
        let mut sums = summaries.remove(&cell_id).unwrap_or_default();
        let summary = sums.remove("value").ok_or_else(|| {
            Fail::Decode(format!("cell {cell_id}: its 'value' summary is missing"))
        })?;
        let (params, conditions) = key_params_from_json(r.try_get(5)?, &at("params"))?;
        // The limit a figure reached is kept in its samples' metrics.
        let cell_samples = samples.remove(&cell_id).unwrap_or_default();
        out.push(CellRecord {
            benchmark: r.try_get(1)?,
            group: r.try_get(2)?,
            unit: r.try_get(3)?,
            direction: parse_direction(r.try_get(4)?)?,
            params,
            conditions,
            placement_spec: r.try_get(6)?,
            placement: from_json(r.try_get(7)?, &at("placement"))?,
            result: CellResult {
                iterations: nat(r.try_get(10)?, &at("iterations"))?,
                calibration: facts.calibration,
                warmup: facts.warmup,
                clock_cost_ns: facts.clock_cost_ns,
                loop_cost_ns_per_iter: facts.loop_cost_ns_per_iter,
                subtracted_ns_per_sample: facts.subtracted_ns_per_sample,
                at_limit: smtlab_model::AtLimit::of_samples(&cell_samples),
                samples: cell_samples,
                summary,
                converged: r.try_get(8)?,
                stop_reason: parse_stop(r.try_get(9)?)?,
                cpu_rate: sums.remove("cpu_rate"),
                series: series.remove(&cell_id).unwrap_or_default(),
                start_spread_ns: sums.remove("start_spread_ns"),
                wall_ns: nat(r.try_get(11)?, &at("wall_ns"))?,
                config: facts.config,
                rounds: rounds.remove(&cell_id).unwrap_or_default(),
            },
            counters,
        });
    }
    Ok(out)
}

fn load_samples(c: &mut impl GenericClient, run_id: i64) -> Step<BTreeMap<i64, Vec<SampleRecord>>> {
    let rows = c.query(
        "SELECT s.cell_id, s.value, s.iterations, s.elapsed_ns, s.work, s.cpu_ns,
                s.start_spread_ns, s.cpus, s.metrics
         FROM samples s JOIN cells c ON c.id = s.cell_id
         WHERE c.run_id = $1 ORDER BY s.cell_id, s.idx",
        &[&run_id],
    )?;
    let mut out: BTreeMap<i64, Vec<SampleRecord>> = BTreeMap::new();
    for r in rows {
        let cell_id: i64 = r.try_get(0)?;
        let list = out.entry(cell_id).or_default();
        let what = |col: &str| format!("cell {cell_id} sample {}: {col}", list.len());
        let metrics = match r.try_get::<_, Option<&str>>(8)? {
            Some(text) => from_json(text, &what("metrics"))?,
            None => BTreeMap::new(),
        };
        let opt = |i: usize, col: &str| -> Step<Option<u64>> {
            r.try_get::<_, Option<i64>>(i)?
                .map(|v| nat(v, &what(col)))
                .transpose()
        };
        let sample = SampleRecord {
            value: r.try_get(1)?,
            iterations: nat(r.try_get(2)?, &what("iterations"))?,
            elapsed_ns: nat(r.try_get(3)?, &what("elapsed_ns"))?,
            work: r.try_get(4)?,
            cpu_ns: opt(5, "cpu_ns")?,
            start_spread_ns: opt(6, "start_spread_ns")?,
            cpus: from_json(r.try_get(7)?, &what("cpus"))?,
            metrics,
        };
        list.push(sample);
    }
    Ok(out)
}

fn load_summaries(
    c: &mut impl GenericClient,
    run_id: i64,
) -> Step<BTreeMap<i64, BTreeMap<String, Summary>>> {
    let rows = c.query(
        "SELECT s.cell_id, s.kind, s.n, s.mean, s.median, s.min, s.max, s.p25, s.p75, s.stddev,
                s.ci95_half_width, s.ci95_rel
         FROM summaries s JOIN cells c ON c.id = s.cell_id WHERE c.run_id = $1",
        &[&run_id],
    )?;
    let mut out: BTreeMap<i64, BTreeMap<String, Summary>> = BTreeMap::new();
    for r in rows {
        out.entry(r.try_get(0)?)
            .or_default()
            .insert(r.try_get(1)?, summary_at(&r, 2)?);
    }
    Ok(out)
}

fn load_rounds(c: &mut impl GenericClient, run_id: i64) -> Step<BTreeMap<i64, Vec<Round>>> {
    let rows = c.query(
        "SELECT r.cell_id, r.iterations, r.converged, r.wall_ns, r.n, r.mean, r.median, r.min,
                r.max, r.p25, r.p75, r.stddev, r.ci95_half_width, r.ci95_rel
         FROM rounds r JOIN cells c ON c.id = r.cell_id
         WHERE c.run_id = $1 ORDER BY r.cell_id, r.idx",
        &[&run_id],
    )?;
    let mut out: BTreeMap<i64, Vec<Round>> = BTreeMap::new();
    for r in rows {
        out.entry(r.try_get(0)?).or_default().push(Round {
            iterations: nat(r.try_get(1)?, "rounds.iterations")?,
            converged: r.try_get(2)?,
            wall_ns: nat(r.try_get(3)?, "rounds.wall_ns")?,
            summary: summary_at(&r, 4)?,
        });
    }
    Ok(out)
}

fn load_series(
    c: &mut impl GenericClient,
    run_id: i64,
) -> Step<BTreeMap<i64, BTreeMap<String, Vec<f64>>>> {
    let rows = c.query(
        "SELECT s.cell_id, s.name, s.n, s.data
         FROM series s JOIN cells c ON c.id = s.cell_id WHERE c.run_id = $1",
        &[&run_id],
    )?;
    let mut out: BTreeMap<i64, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for r in rows {
        let cell_id: i64 = r.try_get(0)?;
        let name: String = r.try_get(1)?;
        let n: i64 = r.try_get(2)?;
        let blob: &[u8] = r.try_get(3)?;
        let values = decode_series(blob)
            .filter(|v| i64::try_from(v.len()) == Ok(n))
            .ok_or_else(|| {
                Fail::Decode(format!(
                    "cell {cell_id}: series {name:?} holds {} bytes, expected {n} values of 8 bytes",
                    blob.len()
                ))
            })?;
        out.entry(cell_id).or_default().insert(name, values);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_postgres_url("postgresql://u@h/db"));
        assert!(is_postgres_url("postgres://h/db"));
        assert!(!is_postgres_url("results.db"));
        assert!(!is_postgres_url("./postgresql://x"));
        assert!(!is_postgres_url("/tmp/postgres.db"));
    }

    #[test]
    fn passwords_are_left_out_of_messages() {
        assert_eq!(
            redact("postgresql://u:secret@h:5432/db"),
            "postgresql://u:***@h:5432/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            redact("postgresql://h/db?user=u&password=secret&sslmode=disable"),
            "postgresql://h/db?user=u&password=***&sslmode=disable"
        );
        assert_eq!(
            redact("postgresql://u:p@ss@h/db"),
            "postgresql://u:***@h/db"
        );
    }
}
