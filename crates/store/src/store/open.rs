//! Opening a results database: recognising the file, settings, creating the schema and
//! upgrading older ones.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::{Fail, Step, Store, sql_error};
use crate::error::{Result, StoreError};
use crate::schema::{APPLICATION_ID, MIGRATIONS, SCHEMA_SQL, SCHEMA_VERSION, SQLITE_MAGIC};

/// How long a writer or reader waits for another process's transaction before giving up
/// with "database is locked". Transactions here last milliseconds; ten seconds only
/// expires when something is badly stuck.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

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
