//! Opening a results database: recognising the file, settings, creating the schema and
//! upgrading older ones.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::{Fail, SqliteStore, Step, sql_error};
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

impl SqliteStore {
    /// Opens the database at `path`, creating its directory and the schema when the file
    /// is missing or empty, and checking that an existing file is an smtlab database this
    /// build can read.
    ///
    /// A zero-length file counts as empty and is initialised: SQLite itself treats it
    /// as an empty database, and it is what `touch` or a first open that was killed
    /// before its first write leaves behind.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                dir: dir.to_path_buf(),
                source,
            })?;
        }
        Self::open_inner(path)
    }

    /// Like [`open`](Self::open), but a missing file is an error, where creating an
    /// empty database would hide a wrong path. It still upgrades an older schema; commands
    /// that only read use [`open_read_only`](Self::open_read_only).
    pub fn open_existing(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        match fs::metadata(&path) {
            Ok(_) => Self::open_inner(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::Missing { path }),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }

    /// Opens an existing database for reading only (`runs`, `report`, `compare`): nothing
    /// is created or changed, not the file, not its directory, no journal. A missing or
    /// empty file, or one that is not an smtlab database, is a one-line error. A file of
    /// an older schema is read as it is (not upgraded), so a read-only copy of any
    /// version loads.
    ///
    /// The file is opened with `SQLITE_OPEN_READONLY`. In WAL mode a reader needs the
    /// `-wal` and `-shm` files beside it, and SQLite creates them when they are missing
    /// (and leaves them behind). So a WAL database that no process has open for writing
    /// (no `-wal` file) is opened as `immutable`, which reads the main file alone, and
    /// so is one whose side files cannot be opened or created (a read-only mount, a
    /// directory the user may not write). Immutable is exact for a file nobody writes
    /// during the read; a run that starts writing in those milliseconds keeps its pages
    /// in its `-wal` until it commits a thousand of them.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref().to_path_buf();
        match fs::metadata(&path) {
            Ok(meta) if !meta.is_file() => return Err(StoreError::NotAFile { path }),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::Missing { path });
            }
            Err(source) => return Err(StoreError::Io { path, source }),
        }
        let Header::Sqlite { wal } = check_header(&path)? else {
            return Err(StoreError::Empty { path });
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        // A WAL file whose `-wal` is absent is not open for writing anywhere (a writer
        // keeps it until its last connection closes); a plain read-only open would create
        // `-wal` and `-shm` and leave them, so it is read as immutable instead.
        let mut wal_name = path.clone().into_os_string();
        wal_name.push("-wal");
        let quiet = wal && !Path::new(&wal_name).exists();
        let plain = (!quiet).then(|| {
            Connection::open_with_flags(&path, flags)
                .and_then(|c| probe(&c).map(|found| (c, found)))
        });
        let (conn, found) = match plain {
            Some(Ok(ok)) => ok,
            Some(Err(e)) if !cannot_open(&e) => {
                return Err(sql_error(&path, "reading the header", e));
            }
            _ => {
                let uri = immutable_uri(&path);
                let conn = Connection::open_with_flags(&uri, flags | OpenFlags::SQLITE_OPEN_URI)
                    .map_err(|e| sql_error(&path, "opening read-only", e))?;
                let found = probe(&conn).map_err(|e| sql_error(&path, "reading the header", e))?;
                (conn, found)
            }
        };
        refuse_others(&found, &path)?;
        let Found::Ours(version) = found else {
            return Err(StoreError::Empty { path });
        };
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| sql_error(&path, "setting the busy timeout", e))?;
        Ok(SqliteStore {
            conn,
            path,
            version,
        })
    }

    /// The database file this store reads and writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn open_inner(path: PathBuf) -> Result<SqliteStore> {
        // A device or FIFO would be opened (and `/dev/null-journal` or `-wal` made
        // beside it); a directory would fail with a less telling message.
        if let Ok(meta) = fs::metadata(&path)
            && !meta.is_file()
        {
            return Err(StoreError::NotAFile { path });
        }
        check_header(&path)?;
        // No SQLITE_OPEN_URI: a file named `file:x.db` is a file, not a URI.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags)
            .map_err(|e| sql_error(&path, "opening", e))?;
        let mut store = SqliteStore {
            conn,
            path,
            version: SCHEMA_VERSION,
        };
        store
            .conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| sql_error(&store.path, "setting the busy timeout", e))?;
        // Look before touching anything: a foreign file must be left exactly as it was,
        // journal mode included.
        let found = probe(&store.conn).map_err(|e| store.fail("reading the header", e.into()))?;
        refuse_others(&found, &store.path)?;
        store.configure()?;
        if !matches!(found, Found::Ours(SCHEMA_VERSION)) {
            store.initialise()?;
        }
        store.version = SCHEMA_VERSION;
        Ok(store)
    }

    /// Per-connection settings, and WAL (persistent in the file); see [`SqliteStore`] for the
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
                    if v < 6 {
                        super::runs::fill_uids(&tx)?;
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

/// What the first bytes of a file say.
#[derive(PartialEq)]
enum Header {
    /// Missing or zero bytes long: nothing in it yet.
    Nothing,
    /// An SQLite database; `wal` when its header says WAL mode.
    Sqlite { wal: bool },
}

/// Refuses files that are not SQLite before SQLite sees them, for a clear message.
fn check_header(path: &Path) -> Result<Header> {
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Header::Nothing),
        Err(e) => return Err(io(e)),
    };
    // The magic string, the page size, then the write and read format versions (2 = WAL).
    let mut head = Vec::with_capacity(20);
    file.take(20).read_to_end(&mut head).map_err(io)?;
    if head.is_empty() {
        Ok(Header::Nothing)
    } else if head.starts_with(SQLITE_MAGIC) {
        Ok(Header::Sqlite {
            wal: head.get(18) == Some(&2),
        })
    } else {
        Err(StoreError::NotSqlite {
            path: path.to_path_buf(),
        })
    }
}

/// Foreign files and newer schemas are refused, with what they are.
fn refuse_others(found: &Found, path: &Path) -> Result<()> {
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
                path: path.to_path_buf(),
                application_id: *application_id,
                expected: APPLICATION_ID,
                detail,
            });
        }
        Found::Ours(v) if *v > SCHEMA_VERSION => {
            return Err(StoreError::Newer {
                path: path.to_path_buf(),
                found: *v,
                supported: SCHEMA_VERSION,
            });
        }
        Found::Ours(_) | Found::Blank => {}
    }
    Ok(())
}

/// SQLite could not open a file it may only read: in WAL mode, the `-shm` index that
/// cannot be created beside it.
fn cannot_open(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode;
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly | ErrorCode::PermissionDenied)
    )
}

/// `file:PATH?immutable=1`, with the characters a URI gives meaning to escaped.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        match b {
            b'?' | b'#' | b'%' | 0..=0x20 | 0x7f..=0xff => uri.push_str(&format!("%{b:02X}")),
            _ => uri.push(b as char),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

fn probe(conn: &Connection) -> rusqlite::Result<Found> {
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
