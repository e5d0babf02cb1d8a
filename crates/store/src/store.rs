//! [`Store`]: opening (and recognising) a results database, writing a run as it is
//! measured, and reading runs back.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{
    Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior, params,
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use smtlab_model::result::{Calibration, StopReason, Warmup};
use smtlab_model::{
    CellKey, CellRecord, CellResult, Direction, Environment, RESULTS_SCHEMA, RunConfig, RunMeta,
    RunResults, RunStatus, SampleRecord, SkippedCell, Summary,
};

use crate::error::{Result, StoreError};
use crate::schema::{APPLICATION_ID, MIGRATIONS, SCHEMA_SQL, SCHEMA_VERSION, SQLITE_MAGIC};

/// How long a writer or reader waits for another process's transaction before giving up
/// with "database is locked". Transactions here last milliseconds; ten seconds only
/// expires when something is badly stuck.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// An open results database. One `Store` is one SQLite connection; several processes
/// may open the same file (a report reading while a run writes is fine: WAL mode).
///
/// Durability: WAL with `synchronous=FULL`. Either WAL setting keeps every committed
/// cell when the process is killed (`kill -9`, a crash): the commit is in the WAL file
/// before `save_cell` returns. NORMAL can lose the last commits on a power cut or kernel
/// panic, and smtlab provokes exactly those on some machines (switching SMT off, taking
/// CPUs offline). FULL costs one fsync per finished cell, milliseconds against cells
/// that last seconds.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// One line of `smtlab runs`: what a run is without loading its cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunListing {
    pub id: i64,
    pub started_unix_s: u64,
    pub finished_unix_s: Option<u64>,
    pub status: RunStatus,
    pub suite: Option<String>,
    /// Measured cells stored so far.
    pub cells_done: usize,
    /// Cells that could not be measured.
    pub cells_skipped: usize,
    /// Cells in the run's plan.
    pub cells_planned: usize,
    pub hostname: Option<String>,
    pub cpu_model: Option<String>,
}

/// Why an internal step failed, before the public wrapper adds the file and context.
#[derive(Debug)]
enum Fail {
    Sql(rusqlite::Error),
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

type Step<T> = std::result::Result<T, Fail>;

/// What the first look at a file found.
enum Found {
    /// No tables, no ids: a new or empty file we may initialise.
    Blank,
    /// Ours, with this `user_version`.
    Ours(i64),
    Foreign {
        application_id: u32,
        tables: Vec<String>,
    },
}

impl Store {
    /// Opens the database at `path`, creating its directory and the schema when the file
    /// is missing or empty, and checking that an existing file is an smtlab database this
    /// build can read.
    ///
    /// A zero-length file counts as empty and is initialised: SQLite itself treats it
    /// as an empty database, and it is what `touch` or a first open that was killed
    /// before its first write leaves behind.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                dir: dir.to_path_buf(),
                source,
            })?;
        }
        Self::open_inner(path)
    }

    /// Like [`open`](Self::open), but a missing file is an error: for commands that only
    /// read results (report, compare), where creating an empty database would hide a
    /// wrong path.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        match fs::metadata(&path) {
            Ok(_) => Self::open_inner(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::Missing { path }),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }

    /// The database file this store reads and writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn open_inner(path: PathBuf) -> Result<Store> {
        check_header(&path)?;
        // No SQLITE_OPEN_URI: a file named `file:x.db` is a file, not a URI.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags)
            .map_err(|e| sql_error(&path, "opening", e))?;
        let mut store = Store { conn, path };
        store
            .conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| sql_error(&store.path, "setting the busy timeout", e))?;
        // Look before touching anything: a foreign file must be left exactly as it was,
        // journal mode included.
        let found = probe(&store.conn).map_err(|e| store.fail("reading the header", e))?;
        match found {
            Found::Foreign {
                application_id,
                tables,
            } => {
                let detail = if tables.is_empty() {
                    String::new()
                } else {
                    let mut shown = tables
                        .iter()
                        .take(5)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ");
                    if tables.len() > 5 {
                        shown.push_str(", ...");
                    }
                    format!("; it holds tables {shown}")
                };
                return Err(StoreError::Foreign {
                    path: store.path,
                    application_id,
                    expected: APPLICATION_ID,
                    detail,
                });
            }
            Found::Ours(v) if v > SCHEMA_VERSION => {
                return Err(StoreError::Newer {
                    path: store.path,
                    found: v,
                    supported: SCHEMA_VERSION,
                });
            }
            Found::Ours(_) | Found::Blank => {}
        }
        store.configure()?;
        if !matches!(found, Found::Ours(SCHEMA_VERSION)) {
            store.initialise()?;
        }
        Ok(store)
    }

    /// Per-connection settings, and WAL (persistent in the file); see [`Store`] for the
    /// durability choice.
    fn configure(&mut self) -> Result<()> {
        // Some file systems (network ones) cannot do WAL's shared memory; SQLite then
        // keeps the rollback journal, which is just as safe, only less concurrent.
        let _mode: String = self
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| self.fail("switching to WAL mode", e.into()))?;
        self.conn
            .execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(|e| self.fail("configuring the connection", e.into()))
    }

    /// Creates the schema, or brings an older smtlab file up to [`SCHEMA_VERSION`]
    /// through [`MIGRATIONS`], in one transaction, unless another process did it first.
    fn initialise(&mut self) -> Result<()> {
        let mut doing = "creating the schema";
        let r = (|| -> Step<()> {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)?;
            match probe(&tx)? {
                Found::Ours(SCHEMA_VERSION) => return Ok(()),
                Found::Ours(v) if v > SCHEMA_VERSION => {
                    return Err(Fail::Conflict(format!(
                        "another smtlab wrote schema {v} while this one opened the file"
                    )));
                }
                Found::Foreign { .. } => {
                    return Err(Fail::Conflict(
                        "another program wrote the file while smtlab opened it".into(),
                    ));
                }
                Found::Ours(v) if v >= 1 => {
                    doing = "upgrading the schema";
                    for (_, sql) in MIGRATIONS.iter().filter(|(to, _)| *to > v) {
                        tx.execute_batch(sql)?;
                    }
                }
                Found::Ours(_) | Found::Blank => tx.execute_batch(SCHEMA_SQL)?,
            }
            // application_id is a signed 32-bit field in the header; ours is positive.
            tx.execute_batch(&format!(
                "PRAGMA application_id = {}; PRAGMA user_version = {};",
                APPLICATION_ID as i32, SCHEMA_VERSION
            ))?;
            tx.commit()?;
            Ok(())
        })();
        r.map_err(|e| self.fail(doing, e))
    }

    // ---- writing -------------------------------------------------------------------

    /// Stores a new run (its meta data and plan) and returns its id. `meta.id` is
    /// ignored; `status` and `finished_unix_s` are stored as given.
    pub fn create_run(&mut self, meta: &RunMeta) -> Result<i64> {
        let r = (|| -> Step<i64> {
            let tx = self.begin()?;
            let id = insert_run(&tx, meta)?;
            tx.commit()?;
            Ok(id)
        })();
        r.map_err(|e| self.fail("storing a new run", e))
    }

    /// Stores one finished cell (the cell, its samples, summaries and series) in one
    /// transaction: after this returns the cell survives the process being killed.
    ///
    /// A cell whose key (benchmark, parameters, planned placement) is already stored in
    /// the run replaces it, and a skipped entry with that key is removed: a key is
    /// measured or skipped, never both. Non-finite numbers are refused (JSON cannot
    /// carry them, so the run could not be exported).
    pub fn save_cell(&mut self, run_id: i64, cell: &CellRecord) -> Result<()> {
        let r = (|| -> Step<()> {
            check_cell_finite(cell).map_err(Fail::Invalid)?;
            let tx = self.begin()?;
            insert_cell(&tx, run_id, cell)?;
            tx.commit()?;
            Ok(())
        })();
        r.map_err(|e| {
            self.fail(
                &format!("saving cell {} in run {run_id}", describe_key(&cell.key())),
                e,
            )
        })
    }

    /// Records that a cell could not be measured. Replaces an earlier skip of the same
    /// key; refuses a key that is already measured.
    pub fn save_skipped(&mut self, run_id: i64, skipped: &SkippedCell) -> Result<()> {
        let r = (|| -> Step<()> {
            let tx = self.begin()?;
            insert_skipped(&tx, run_id, skipped)?;
            tx.commit()?;
            Ok(())
        })();
        r.map_err(|e| {
            self.fail(
                &format!(
                    "saving skipped cell {} in run {run_id}",
                    describe_key(&skipped.key)
                ),
                e,
            )
        })
    }

    /// Sets a run's final status and end time.
    pub fn finish_run(
        &mut self,
        run_id: i64,
        status: RunStatus,
        finished_unix_s: u64,
    ) -> Result<()> {
        self.set_status(run_id, status, Some(finished_unix_s), "finishing")
    }

    /// Marks a run that stopped early (Ctrl-C, an error) as interrupted, so `--resume`
    /// finds it. A run already finished keeps its status.
    pub fn mark_interrupted(&mut self, run_id: i64) -> Result<()> {
        let r = (|| -> Step<()> {
            let n = self.conn.execute(
                "UPDATE runs SET status = 'interrupted' WHERE id = ?1 AND status != 'finished'",
                [run_id],
            )?;
            if n == 0 && !run_exists(&self.conn, run_id)? {
                return Err(Fail::NoRun(run_id));
            }
            Ok(())
        })();
        r.map_err(|e| self.fail(&format!("marking run {run_id} interrupted"), e))
    }

    /// Marks a run as running again (and not finished), for `--resume`.
    pub fn reopen_run(&mut self, run_id: i64) -> Result<()> {
        self.set_status(run_id, RunStatus::Running, None, "reopening")
    }

    fn set_status(
        &mut self,
        run_id: i64,
        status: RunStatus,
        finished_unix_s: Option<u64>,
        doing: &str,
    ) -> Result<()> {
        let r = (|| -> Step<()> {
            let n = self.conn.execute(
                "UPDATE runs SET status = ?2, finished_unix_s = ?3 WHERE id = ?1",
                params![run_id, status_text(status), finished_unix_s],
            )?;
            if n == 0 {
                return Err(Fail::NoRun(run_id));
            }
            Ok(())
        })();
        r.map_err(|e| self.fail(&format!("{doing} run {run_id}"), e))
    }

    /// Stores a whole run (e.g. one read from results JSON) in one transaction and
    /// returns its new id. Loading it gives back `results` with `run.id` set to the id.
    pub fn import_run(&mut self, results: &RunResults) -> Result<i64> {
        let r = (|| -> Step<i64> {
            for cell in &results.cells {
                check_cell_finite(cell).map_err(|e| {
                    Fail::Invalid(format!("cell {}: {e}", describe_key(&cell.key())))
                })?;
            }
            let tx = self.begin()?;
            let id = insert_run(&tx, &results.run)?;
            for cell in &results.cells {
                insert_cell(&tx, id, cell)?;
            }
            for s in &results.skipped {
                insert_skipped(&tx, id, s)?;
            }
            tx.commit()?;
            Ok(id)
        })();
        r.map_err(|e| self.fail("importing a run", e))
    }

    // ---- reading -------------------------------------------------------------------

    /// Loads a whole run: meta data, plan, every cell with its samples, and skips.
    pub fn load_run(&self, run_id: i64) -> Result<RunResults> {
        let r = (|| -> Step<RunResults> {
            let run = load_meta(&self.conn, run_id)?;
            let cells = load_cells(&self.conn, run_id)?;
            let skipped = load_skipped(&self.conn, run_id)?
                .into_iter()
                .map(|(key, reason)| SkippedCell { key, reason })
                .collect();
            Ok(RunResults {
                schema: RESULTS_SCHEMA.to_string(),
                run,
                cells,
                skipped,
            })
        })();
        r.map_err(|e| self.fail(&format!("loading run {run_id}"), e))
    }

    /// Every run, oldest first.
    pub fn list_runs(&self) -> Result<Vec<RunListing>> {
        let r = (|| -> Step<Vec<RunListing>> {
            let mut stmt = self.conn.prepare(
                "SELECT r.id, r.started_unix_s, r.finished_unix_s, r.status, r.suite,
                        r.hostname, r.cpu_model,
                        (SELECT count(*) FROM cells c WHERE c.run_id = r.id),
                        (SELECT count(*) FROM skipped s WHERE s.run_id = r.id),
                        (SELECT count(*) FROM plan p WHERE p.run_id = r.id)
                 FROM runs r ORDER BY r.id",
            )?;
            let mut rows = stmt.query([])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let status: String = row.get(3)?;
                out.push(RunListing {
                    id: row.get(0)?,
                    started_unix_s: row.get(1)?,
                    finished_unix_s: row.get(2)?,
                    status: parse_status(&status)?,
                    suite: row.get(4)?,
                    hostname: row.get(5)?,
                    cpu_model: row.get(6)?,
                    cells_done: row.get(7)?,
                    cells_skipped: row.get(8)?,
                    cells_planned: row.get(9)?,
                });
            }
            Ok(out)
        })();
        r.map_err(|e| self.fail("listing runs", e))
    }

    /// The newest run's id, `None` when there are no runs.
    pub fn latest_run_id(&self) -> Result<Option<i64>> {
        self.conn
            .query_row("SELECT max(id) FROM runs", [], |r| r.get(0))
            .map_err(|e| self.fail("finding the latest run", e.into()))
    }

    /// The newest run that is not finished (running when its process died, or
    /// interrupted), for `--resume`.
    pub fn latest_unfinished_run(&self) -> Result<Option<i64>> {
        self.conn
            .query_row(
                "SELECT max(id) FROM runs WHERE status != 'finished'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.fail("finding the latest unfinished run", e.into()))
    }

    /// Turns what a user typed into a run id:
    ///
    /// * `latest` or `last`: the newest run;
    /// * `12` (or `#12`): run 12, which must exist;
    /// * `-1`: the newest run, `-2` the one before, and so on (counted in id order).
    ///
    /// Errors say which runs exist.
    pub fn resolve_run(&self, selector: &str) -> Result<i64> {
        let s = selector.trim();
        let bad = || StoreError::BadRunSelector {
            path: self.path.clone(),
            input: selector.to_string(),
        };
        let ids = self.run_ids()?;
        let found = if s.eq_ignore_ascii_case("latest") || s.eq_ignore_ascii_case("last") {
            ids.last().copied()
        } else if let Some(back) = s.strip_prefix('-') {
            let k: usize = back.parse().map_err(|_| bad())?;
            if k == 0 {
                return Err(bad());
            }
            ids.len().checked_sub(k).map(|i| ids[i])
        } else {
            let id: i64 = s
                .strip_prefix('#')
                .unwrap_or(s)
                .parse()
                .map_err(|_| bad())?;
            ids.binary_search(&id).ok().map(|_| id)
        };
        found.ok_or_else(|| StoreError::NoSuchRun {
            path: self.path.clone(),
            wanted: s.to_string(),
            existing: describe_ids(&ids),
        })
    }

    /// The cells of a run's plan that are neither measured nor skipped, in plan order:
    /// what `--resume` still has to do.
    pub fn pending_cells(&self, run_id: i64) -> Result<Vec<CellKey>> {
        let r = (|| -> Step<Vec<CellKey>> {
            let plan = load_plan(&self.conn, run_id)?;
            if plan.is_empty() && !run_exists(&self.conn, run_id)? {
                return Err(Fail::NoRun(run_id));
            }
            let mut done: HashSet<CellKey> = stored_cell_keys(&self.conn, run_id)?;
            done.extend(
                load_skipped(&self.conn, run_id)?
                    .into_iter()
                    .map(|(k, _)| k),
            );
            Ok(plan.into_iter().filter(|k| !done.contains(k)).collect())
        })();
        r.map_err(|e| self.fail(&format!("listing pending cells of run {run_id}"), e))
    }

    /// Runs SQLite's `PRAGMA integrity_check`; `Ok` when the file is sound.
    pub fn check_integrity(&self) -> Result<()> {
        let r = (|| -> Step<Vec<String>> {
            let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })();
        let lines = r.map_err(|e| self.fail("checking integrity", e))?;
        if lines.len() == 1 && lines[0] == "ok" {
            Ok(())
        } else {
            Err(StoreError::Corrupt {
                path: self.path.clone(),
                context: "integrity check failed".into(),
                detail: lines.into_iter().take(3).collect::<Vec<_>>().join("; "),
            })
        }
    }

    // ---- helpers -------------------------------------------------------------------

    /// Write transactions take the write lock up front: a deferred one that upgrades
    /// later can fail with SQLITE_BUSY at once, without the busy timeout helping.
    fn begin(&mut self) -> rusqlite::Result<Transaction<'_>> {
        self.conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
    }

    fn run_ids(&self) -> Result<Vec<i64>> {
        let r = (|| -> Step<Vec<i64>> {
            let mut stmt = self.conn.prepare("SELECT id FROM runs ORDER BY id")?;
            let ids = stmt.query_map([], |r| r.get(0))?;
            Ok(ids.collect::<std::result::Result<_, _>>()?)
        })();
        r.map_err(|e| self.fail("listing runs", e))
    }

    /// Adds the file and what we were doing to an internal failure.
    fn fail(&self, context: &str, e: Fail) -> StoreError {
        let path = self.path.clone();
        match e {
            Fail::Sql(e) => sql_error(&path, context, e),
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
}

fn sql_error(path: &Path, context: &str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => StoreError::NotSqlite {
            path: path.to_path_buf(),
        },
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_path_buf(),
            context: context.to_string(),
            detail: format!("the file is damaged ({e})"),
        },
        _ => StoreError::Sqlite {
            path: path.to_path_buf(),
            context: context.to_string(),
            source: e,
        },
    }
}

/// Refuses files that are not SQLite before SQLite sees them, for a clear message.
/// A missing or zero-length file passes: it will be initialised.
fn check_header(path: &Path) -> Result<()> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    let mut head = Vec::with_capacity(SQLITE_MAGIC.len());
    file.take(SQLITE_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(io)?;
    if head.is_empty() || head == SQLITE_MAGIC {
        Ok(())
    } else {
        Err(StoreError::NotSqlite {
            path: path.to_path_buf(),
        })
    }
}

fn probe(conn: &Connection) -> Step<Found> {
    let app: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')
         AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    let app = app as u32;
    Ok(if app == APPLICATION_ID {
        Found::Ours(version)
    } else if app == 0 && version == 0 && tables.is_empty() {
        Found::Blank
    } else {
        Found::Foreign {
            application_id: app,
            tables,
        }
    })
}

fn run_exists(conn: &Connection, run_id: i64) -> Step<bool> {
    Ok(conn
        .query_row("SELECT 1 FROM runs WHERE id = ?1", [run_id], |_| Ok(()))
        .optional()?
        .is_some())
}

// ---- encoding ------------------------------------------------------------------------

/// The cell facts kept as one JSON column: read together, rarely queried.
#[derive(Serialize, Deserialize)]
struct CellFacts {
    calibration: Calibration,
    warmup: Warmup,
    clock_cost_ns: f64,
    loop_cost_ns_per_iter: f64,
    subtracted_ns_per_sample: f64,
    config: RunConfig,
}

fn to_json<T: Serialize + ?Sized>(v: &T) -> Step<String> {
    serde_json::to_string(v).map_err(|e| Fail::Invalid(format!("cannot encode as JSON: {e}")))
}

fn from_json<T: DeserializeOwned>(text: &str, what: &str) -> Step<T> {
    serde_json::from_str(text).map_err(|e| Fail::Decode(format!("{what}: {e}")))
}

fn status_text(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Running => "running",
        RunStatus::Finished => "finished",
        RunStatus::Interrupted => "interrupted",
    }
}

fn parse_status(s: &str) -> Step<RunStatus> {
    Ok(match s {
        "running" => RunStatus::Running,
        "finished" => RunStatus::Finished,
        "interrupted" => RunStatus::Interrupted,
        _ => return Err(Fail::Decode(format!("unknown run status {s:?}"))),
    })
}

fn direction_text(d: Direction) -> &'static str {
    d.as_str()
}

fn parse_direction(s: &str) -> Step<Direction> {
    Ok(match s {
        "higher" => Direction::Higher,
        "lower" => Direction::Lower,
        _ => return Err(Fail::Decode(format!("unknown direction {s:?}"))),
    })
}

fn stop_text(s: StopReason) -> &'static str {
    match s {
        StopReason::Converged => "converged",
        StopReason::MaxSamples => "max_samples",
        StopReason::TimeBudget => "time_budget",
    }
}

fn parse_stop(s: &str) -> Step<StopReason> {
    Ok(match s {
        "converged" => StopReason::Converged,
        "max_samples" => StopReason::MaxSamples,
        "time_budget" => StopReason::TimeBudget,
        _ => return Err(Fail::Decode(format!("unknown stop reason {s:?}"))),
    })
}

/// Series are stored as raw little-endian f64: exact, and an eighth of the JSON size for
/// the 10^5-value series of the thread benchmarks.
pub(crate) fn encode_series(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub(crate) fn decode_series(blob: &[u8]) -> Option<Vec<f64>> {
    let chunks = blob.chunks_exact(8);
    if !chunks.remainder().is_empty() {
        return None;
    }
    Some(
        chunks
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect(),
    )
}

/// `mem-read size=1GiB @ 1c2t`, for messages.
pub(crate) fn describe_key(key: &CellKey) -> String {
    let mut s = key.benchmark.clone();
    for (k, v) in &key.params {
        s.push_str(&format!(" {k}={v}"));
    }
    s.push_str(" @ ");
    s.push_str(&key.placement);
    s
}

/// `runs 1-4,7 exist`, `run 3 exists`, `it holds no runs yet`.
fn describe_ids(ids: &[i64]) -> String {
    match ids {
        [] => "it holds no runs yet".into(),
        [one] => format!("run {one} exists"),
        _ => {
            let mut parts: Vec<String> = Vec::new();
            let mut i = 0;
            while i < ids.len() {
                let mut j = i;
                while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
                    j += 1;
                }
                parts.push(if i == j {
                    ids[i].to_string()
                } else {
                    format!("{}-{}", ids[i], ids[j])
                });
                i = j + 1;
            }
            format!("runs {} exist", parts.join(","))
        }
    }
}

/// Every float a cell stores must be finite: SQLite turns NaN into NULL and JSON has
/// neither NaN nor infinity, so such a value would make the run unloadable or
/// unexportable. Says which value is at fault.
fn check_cell_finite(cell: &CellRecord) -> std::result::Result<(), String> {
    let check = |what: &dyn Fn() -> String, x: f64| {
        if x.is_finite() {
            Ok(())
        } else {
            Err(format!(
                "{} is {x}; only finite numbers can be stored",
                what()
            ))
        }
    };
    let summary = |name: &str, s: &Summary| -> std::result::Result<(), String> {
        for (field, x) in [
            ("mean", s.mean),
            ("median", s.median),
            ("min", s.min),
            ("max", s.max),
            ("p25", s.p25),
            ("p75", s.p75),
            ("stddev", s.stddev),
            ("ci95_half_width", s.ci95_half_width),
            ("ci95_rel", s.ci95_rel),
        ] {
            check(&|| format!("{name}.{field}"), x)?;
        }
        Ok(())
    };
    let r = &cell.result;
    summary("summary", &r.summary)?;
    if let Some(s) = &r.cpu_rate {
        summary("cpu_rate", s)?;
    }
    if let Some(s) = &r.start_spread_ns {
        summary("start_spread_ns", s)?;
    }
    for (i, s) in r.samples.iter().enumerate() {
        check(&|| format!("samples[{i}].value"), s.value)?;
        check(&|| format!("samples[{i}].work"), s.work)?;
        for (k, x) in &s.metrics {
            check(&|| format!("samples[{i}].metrics.{k}"), *x)?;
        }
    }
    for (name, xs) in &r.series {
        for (i, x) in xs.iter().enumerate() {
            check(&|| format!("series {name}[{i}]"), *x)?;
        }
    }
    check(&|| "clock_cost_ns".into(), r.clock_cost_ns)?;
    check(&|| "loop_cost_ns_per_iter".into(), r.loop_cost_ns_per_iter)?;
    check(
        &|| "subtracted_ns_per_sample".into(),
        r.subtracted_ns_per_sample,
    )?;
    if let Some(x) = r.calibration.linearity_ratio {
        check(&|| "calibration.linearity_ratio".into(), x)?;
    }
    if let Some(c) = &cell.counters {
        for (name, x) in c.floats() {
            check(&|| name.clone(), x)?;
        }
    }
    check_config_finite(&r.config)
}

fn check_config_finite(c: &RunConfig) -> std::result::Result<(), String> {
    let mut xs = vec![
        ("config.ci_target_rel", c.ci_target_rel),
        ("config.linearity_tolerance", c.linearity_tolerance),
    ];
    if let Some(o) = c.known_overheads {
        xs.push(("config.known_overheads.clock_cost_ns", o.clock_cost_ns));
        xs.push((
            "config.known_overheads.loop_cost_ns_per_iter",
            o.loop_cost_ns_per_iter,
        ));
    }
    match xs.into_iter().find(|(_, x)| !x.is_finite()) {
        Some((what, x)) => Err(format!("{what} is {x}; only finite numbers can be stored")),
        None => Ok(()),
    }
}

// ---- writing rows ----------------------------------------------------------------------

fn insert_run(tx: &Transaction<'_>, meta: &RunMeta) -> Step<i64> {
    check_config_finite(&meta.config).map_err(Fail::Invalid)?;
    let env = &meta.environment;
    tx.execute(
        "INSERT INTO runs (started_unix_s, finished_unix_s, status, suite, command_line,
                           tool_version, git_commit, hostname, kernel, cpu_model, smt_control,
                           environment, topology, config, notes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        params![
            meta.started_unix_s,
            meta.finished_unix_s,
            status_text(meta.status),
            meta.suite,
            to_json(&meta.command_line)?,
            env.tool_version,
            env.git_commit,
            env.hostname,
            env.kernel,
            env.cpu_model,
            env.smt_control,
            to_json(env)?,
            to_json(&meta.topology)?,
            to_json(&meta.config)?,
            to_json(&meta.notes)?,
        ],
    )?;
    let id = tx.last_insert_rowid();
    let mut stmt = tx.prepare_cached(
        "INSERT INTO plan (run_id, position, benchmark, params, placement)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for (pos, key) in meta.plan.iter().enumerate() {
        stmt.execute(params![
            id,
            pos,
            key.benchmark,
            to_json(&key.params)?,
            key.placement
        ])?;
    }
    Ok(id)
}

fn insert_cell(tx: &Transaction<'_>, run_id: i64, cell: &CellRecord) -> Step<()> {
    if !run_exists(tx, run_id)? {
        return Err(Fail::NoRun(run_id));
    }
    let params_json = to_json(&cell.params)?;
    let key = params![run_id, cell.benchmark, params_json, cell.placement_spec];
    // ON DELETE CASCADE removes the old samples, summaries and series with it.
    tx.execute(
        "DELETE FROM cells WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                             AND placement_spec = ?4",
        key,
    )?;
    tx.execute(
        "DELETE FROM skipped WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                               AND placement = ?4",
        key,
    )?;
    let position: Option<i64> = tx.query_row(
        "SELECT min(position) FROM plan WHERE run_id = ?1 AND benchmark = ?2
                                             AND params = ?3 AND placement = ?4",
        key,
        |r| r.get(0),
    )?;
    let r = &cell.result;
    let facts = CellFacts {
        calibration: r.calibration.clone(),
        warmup: r.warmup,
        clock_cost_ns: r.clock_cost_ns,
        loop_cost_ns_per_iter: r.loop_cost_ns_per_iter,
        subtracted_ns_per_sample: r.subtracted_ns_per_sample,
        config: r.config.clone(),
    };
    tx.execute(
        "INSERT INTO cells (run_id, position, benchmark, group_name, unit, direction, params,
                            placement_spec, placement_name, cpus, placement, converged,
                            stop_reason, iterations, wall_ns, facts, counters)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        params![
            run_id,
            position,
            cell.benchmark,
            cell.group,
            cell.unit,
            direction_text(cell.direction),
            params_json,
            cell.placement_spec,
            cell.placement.name,
            cell.placement.cpu_set().to_list_string(),
            to_json(&cell.placement)?,
            r.converged,
            stop_text(r.stop_reason),
            r.iterations,
            r.wall_ns,
            to_json(&facts)?,
            cell.counters.as_ref().map(to_json).transpose()?,
        ],
    )?;
    let cell_id = tx.last_insert_rowid();

    let mut stmt = tx.prepare_cached(
        "INSERT INTO samples (cell_id, idx, value, iterations, elapsed_ns, work, cpu_ns,
                              start_spread_ns, cpus, metrics)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for (i, s) in r.samples.iter().enumerate() {
        let metrics = if s.metrics.is_empty() {
            None
        } else {
            Some(to_json(&s.metrics)?)
        };
        stmt.execute(params![
            cell_id,
            i,
            s.value,
            s.iterations,
            s.elapsed_ns,
            s.work,
            s.cpu_ns,
            s.start_spread_ns,
            to_json(&s.cpus)?,
            metrics,
        ])?;
    }

    let mut stmt = tx.prepare_cached(
        "INSERT INTO summaries (cell_id, kind, n, mean, median, min, max, p25, p75, stddev,
                                ci95_half_width, ci95_rel)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    let summaries = [
        ("value", Some(&r.summary)),
        ("cpu_rate", r.cpu_rate.as_ref()),
        ("start_spread_ns", r.start_spread_ns.as_ref()),
    ];
    for (kind, s) in summaries {
        let Some(s) = s else { continue };
        stmt.execute(params![
            cell_id,
            kind,
            s.n,
            s.mean,
            s.median,
            s.min,
            s.max,
            s.p25,
            s.p75,
            s.stddev,
            s.ci95_half_width,
            s.ci95_rel,
        ])?;
    }

    let mut stmt =
        tx.prepare_cached("INSERT INTO series (cell_id, name, n, data) VALUES (?1, ?2, ?3, ?4)")?;
    for (name, values) in &r.series {
        stmt.execute(params![cell_id, name, values.len(), encode_series(values)])?;
    }
    Ok(())
}

fn insert_skipped(tx: &Transaction<'_>, run_id: i64, s: &SkippedCell) -> Step<()> {
    if !run_exists(tx, run_id)? {
        return Err(Fail::NoRun(run_id));
    }
    let params_json = to_json(&s.key.params)?;
    let key = params![run_id, s.key.benchmark, params_json, s.key.placement];
    let measured = tx
        .query_row(
            "SELECT 1 FROM cells WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                                   AND placement_spec = ?4",
            key,
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if measured {
        return Err(Fail::Conflict(
            "the cell is already measured in this run; a cell is measured or skipped, not both"
                .into(),
        ));
    }
    tx.execute(
        "DELETE FROM skipped WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                               AND placement = ?4",
        key,
    )?;
    tx.execute(
        "INSERT INTO skipped (run_id, benchmark, params, placement, reason)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            run_id,
            s.key.benchmark,
            params_json,
            s.key.placement,
            s.reason
        ],
    )?;
    Ok(())
}

// ---- reading rows ----------------------------------------------------------------------

fn load_meta(conn: &Connection, run_id: i64) -> Step<RunMeta> {
    let row = conn
        .query_row(
            "SELECT started_unix_s, finished_unix_s, status, suite, command_line, environment,
                    topology, config, notes
             FROM runs WHERE id = ?1",
            [run_id],
            |r| {
                Ok((
                    r.get::<_, u64>(0)?,
                    r.get::<_, Option<u64>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, String>(7)?,
                    r.get::<_, String>(8)?,
                ))
            },
        )
        .optional()?;
    let Some((started, finished, status, suite, cmd, env, topo, config, notes)) = row else {
        return Err(Fail::NoRun(run_id));
    };
    Ok(RunMeta {
        id: run_id,
        started_unix_s: started,
        finished_unix_s: finished,
        status: parse_status(&status)?,
        command_line: from_json(&cmd, "runs.command_line")?,
        suite,
        environment: from_json::<Environment>(&env, "runs.environment")?,
        topology: from_json(&topo, "runs.topology")?,
        config: from_json(&config, "runs.config")?,
        plan: load_plan(conn, run_id)?,
        notes: from_json(&notes, "runs.notes")?,
    })
}

fn load_plan(conn: &Connection, run_id: i64) -> Step<Vec<CellKey>> {
    let mut stmt = conn.prepare_cached(
        "SELECT benchmark, params, placement FROM plan WHERE run_id = ?1 ORDER BY position",
    )?;
    let mut rows = stmt.query([run_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(CellKey {
            benchmark: r.get(0)?,
            params: from_json(&r.get::<_, String>(1)?, "plan.params")?,
            placement: r.get(2)?,
        });
    }
    Ok(out)
}

fn stored_cell_keys(conn: &Connection, run_id: i64) -> Step<HashSet<CellKey>> {
    let mut stmt = conn
        .prepare_cached("SELECT benchmark, params, placement_spec FROM cells WHERE run_id = ?1")?;
    let mut rows = stmt.query([run_id])?;
    let mut out = HashSet::new();
    while let Some(r) = rows.next()? {
        out.insert(CellKey {
            benchmark: r.get(0)?,
            params: from_json(&r.get::<_, String>(1)?, "cells.params")?,
            placement: r.get(2)?,
        });
    }
    Ok(out)
}

fn load_skipped(conn: &Connection, run_id: i64) -> Step<Vec<(CellKey, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT benchmark, params, placement, reason FROM skipped WHERE run_id = ?1 ORDER BY id",
    )?;
    let mut rows = stmt.query([run_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let key = CellKey {
            benchmark: r.get(0)?,
            params: from_json(&r.get::<_, String>(1)?, "skipped.params")?,
            placement: r.get(2)?,
        };
        out.push((key, r.get(3)?));
    }
    Ok(out)
}

fn load_cells(conn: &Connection, run_id: i64) -> Step<Vec<CellRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, benchmark, group_name, unit, direction, params, placement_spec, placement,
                converged, stop_reason, iterations, wall_ns, facts, counters
         FROM cells WHERE run_id = ?1 ORDER BY id",
    )?;
    let mut rows = stmt.query([run_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let cell_id: i64 = r.get(0)?;
        let at = |col: &str| format!("cell {cell_id}: {col}");
        let facts: CellFacts = from_json(&r.get::<_, String>(12)?, &at("facts"))?;
        let counters = match r.get::<_, Option<String>>(13)? {
            Some(text) => Some(from_json(&text, &at("counters"))?),
            None => None,
        };
        let mut summaries = load_summaries(conn, cell_id)?;
        let summary = summaries.remove("value").ok_or_else(|| {
            Fail::Decode(format!("cell {cell_id}: its 'value' summary is missing"))
        })?;
        out.push(CellRecord {
            benchmark: r.get(1)?,
            group: r.get(2)?,
            unit: r.get(3)?,
            direction: parse_direction(&r.get::<_, String>(4)?)?,
            params: from_json(&r.get::<_, String>(5)?, &at("params"))?,
            placement_spec: r.get(6)?,
            placement: from_json(&r.get::<_, String>(7)?, &at("placement"))?,
            result: CellResult {
                iterations: r.get(10)?,
                calibration: facts.calibration,
                warmup: facts.warmup,
                clock_cost_ns: facts.clock_cost_ns,
                loop_cost_ns_per_iter: facts.loop_cost_ns_per_iter,
                subtracted_ns_per_sample: facts.subtracted_ns_per_sample,
                samples: load_samples(conn, cell_id)?,
                summary,
                converged: r.get(8)?,
                stop_reason: parse_stop(&r.get::<_, String>(9)?)?,
                cpu_rate: summaries.remove("cpu_rate"),
                series: load_series(conn, cell_id)?,
                start_spread_ns: summaries.remove("start_spread_ns"),
                wall_ns: r.get(11)?,
                config: facts.config,
                rounds: Vec::new(),
            },
            counters,
        });
    }
    Ok(out)
}

fn load_samples(conn: &Connection, cell_id: i64) -> Step<Vec<SampleRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT value, iterations, elapsed_ns, work, cpu_ns, start_spread_ns, cpus, metrics
         FROM samples WHERE cell_id = ?1 ORDER BY idx",
    )?;
    let mut rows = stmt.query([cell_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let what = |col: &str| format!("cell {cell_id} sample {}: {col}", out.len());
        let metrics = match r.get::<_, Option<String>>(7)? {
            Some(text) => from_json(&text, &what("metrics"))?,
            None => BTreeMap::new(),
        };
        out.push(SampleRecord {
            value: r.get(0)?,
            iterations: r.get(1)?,
            elapsed_ns: r.get(2)?,
            work: r.get(3)?,
            cpu_ns: r.get(4)?,
            start_spread_ns: r.get(5)?,
            cpus: from_json(&r.get::<_, String>(6)?, &what("cpus"))?,
            metrics,
        });
    }
    Ok(out)
}

fn load_summaries(conn: &Connection, cell_id: i64) -> Step<BTreeMap<String, Summary>> {
    let mut stmt = conn.prepare_cached(
        "SELECT kind, n, mean, median, min, max, p25, p75, stddev, ci95_half_width, ci95_rel
         FROM summaries WHERE cell_id = ?1",
    )?;
    let rows = stmt.query_map([cell_id], |r| {
        Ok((
            r.get::<_, String>(0)?,
            Summary {
                n: r.get(1)?,
                mean: r.get(2)?,
                median: r.get(3)?,
                min: r.get(4)?,
                max: r.get(5)?,
                p25: r.get(6)?,
                p75: r.get(7)?,
                stddev: r.get(8)?,
                ci95_half_width: r.get(9)?,
                ci95_rel: r.get(10)?,
            },
        ))
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

fn load_series(conn: &Connection, cell_id: i64) -> Step<BTreeMap<String, Vec<f64>>> {
    let mut stmt =
        conn.prepare_cached("SELECT name, n, data FROM series WHERE cell_id = ?1 ORDER BY name")?;
    let mut rows = stmt.query([cell_id])?;
    let mut out = BTreeMap::new();
    while let Some(r) = rows.next()? {
        let name: String = r.get(0)?;
        let n: usize = r.get(1)?;
        let blob: Vec<u8> = r.get(2)?;
        let values = decode_series(&blob)
            .filter(|v| v.len() == n)
            .ok_or_else(|| {
                Fail::Decode(format!(
                    "cell {cell_id}: series {name:?} holds {} bytes, expected {n} values of 8 bytes",
                    blob.len()
                ))
            })?;
        out.insert(name, values);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_blobs_round_trip_exactly() {
        let xs = vec![
            0.1 + 0.2,
            -0.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            1e-300,
            12345.678,
        ];
        let back = decode_series(&encode_series(&xs)).unwrap();
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            xs.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(decode_series(&[]), Some(vec![]));
        assert_eq!(decode_series(&[0; 7]), None);
    }

    #[test]
    fn run_ids_are_described_as_ranges() {
        assert_eq!(describe_ids(&[]), "it holds no runs yet");
        assert_eq!(describe_ids(&[3]), "run 3 exists");
        assert_eq!(
            describe_ids(&[1, 2, 3, 4, 7, 9, 10]),
            "runs 1-4,7,9-10 exist"
        );
    }

    #[test]
    fn enum_texts_match_the_serde_names() {
        for s in [
            RunStatus::Running,
            RunStatus::Finished,
            RunStatus::Interrupted,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), status_text(s));
            assert_eq!(parse_status(status_text(s)).unwrap(), s);
        }
        for d in [Direction::Higher, Direction::Lower] {
            assert_eq!(serde_json::to_value(d).unwrap(), direction_text(d));
            assert_eq!(parse_direction(direction_text(d)).unwrap(), d);
        }
        for s in [
            StopReason::Converged,
            StopReason::MaxSamples,
            StopReason::TimeBudget,
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), stop_text(s));
            assert_eq!(parse_stop(stop_text(s)).unwrap(), s);
        }
        assert!(parse_status("paused").is_err());
    }

    #[test]
    fn keys_are_described_for_messages() {
        let key = CellKey {
            benchmark: "mem-read".into(),
            params: [("size".to_string(), "1GiB".to_string())].into(),
            placement: "1c2t".into(),
        };
        assert_eq!(describe_key(&key), "mem-read size=1GiB @ 1c2t");
    }
}
