//! What is SQLite's own: opening a results file (recognising it, its settings, creating
//! the schema and upgrading older ones), its errors, and the lease's connection.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::codec::derived_uid;
use super::sql::{Lite, Sql, args};
use super::{Db, Fail, Mode, Step, Store, error};
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

/// Opens the SQLite file at `path` as `mode` says (see [`Store::open`],
/// [`Store::open_existing`], [`Store::open_read_only`]).
pub(crate) fn open(path: &Path, mode: Mode) -> Result<Store> {
    let path = path.to_path_buf();
    match mode {
        Mode::Create => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                    dir: dir.to_path_buf(),
                    source,
                })?;
            }
            open_writable(path)
        }
        Mode::Existing => match fs::metadata(&path) {
            Ok(_) => open_writable(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::Missing { path }),
            Err(source) => Err(StoreError::Io { path, source }),
        },
        Mode::ReadOnly => open_read_only(path),
    }
}

/// Opens an existing database for reading only: nothing is created or changed, not the
/// file, not its directory, no journal. A missing or empty file, or one that is not an
/// smtlab database, is a one-line error. A file of an older schema is read as it is
/// (not upgraded), so a read-only copy of any version loads.
///
/// The file is opened with `SQLITE_OPEN_READONLY`. In WAL mode a reader needs the
/// `-wal` and `-shm` files beside it, and SQLite creates them when they are missing
/// (and leaves them behind). So a WAL database that no process has open for writing
/// (no `-wal` file) is opened as `immutable`, which reads the main file alone, and so
/// is one whose side files cannot be opened or created (a read-only mount, a directory
/// the user may not write). Immutable is exact for a file nobody writes during the
/// read; a run that starts writing in those milliseconds keeps its pages in its `-wal`
/// until it commits a thousand of them.
fn open_read_only(path: PathBuf) -> Result<Store> {
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
        Connection::open_with_flags(&path, flags).and_then(|c| probe(&c).map(|found| (c, found)))
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
    Ok(Store {
        db: Db::Sqlite(conn),
        path,
        version,
    })
}

fn open_writable(path: PathBuf) -> Result<Store> {
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
    let mut conn =
        Connection::open_with_flags(&path, flags).map_err(|e| sql_error(&path, "opening", e))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| sql_error(&path, "setting the busy timeout", e))?;
    // Look before touching anything: a foreign file must be left exactly as it was,
    // journal mode included.
    let found = probe(&conn).map_err(|e| sql_error(&path, "reading the header", e))?;
    refuse_others(&found, &path)?;
    configure(&conn, &path)?;
    if !matches!(found, Found::Ours(SCHEMA_VERSION)) {
        initialise(&mut conn, &path)?;
    }
    Ok(Store {
        db: Db::Sqlite(conn),
        path,
        version: SCHEMA_VERSION,
    })
}

/// Per-connection settings, and WAL (persistent in the file); see [`Store`] for the
/// durability choice.
fn configure(conn: &Connection, path: &Path) -> Result<()> {
    // Some file systems (network ones) cannot do WAL's shared memory; SQLite then
    // keeps the rollback journal, which is just as safe, only less concurrent.
    let _mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(|e| sql_error(path, "switching to WAL mode", e))?;
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
        .map_err(|e| sql_error(path, "configuring the connection", e))
}

/// Creates the schema, or brings an older smtlab file up to [`SCHEMA_VERSION`] through
/// [`MIGRATIONS`], in one transaction, unless another process did it first.
fn initialise(conn: &mut Connection, path: &Path) -> Result<()> {
    let mut doing = "creating the schema";
    let r = (|| -> Step<()> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
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
                    fill_uids(&mut Lite(&tx))?;
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
    r.map_err(|e| error(path, doing, e))
}

/// Gives every run of a file upgraded to schema 6 its key ([`derived_uid`]).
fn fill_uids(db: &mut dyn Sql) -> Step<()> {
    let rows = db.query(
        "SELECT id, hostname, started_unix_s, command_line, environment FROM runs
         WHERE uid IS NULL",
        &[],
    )?;
    for r in rows {
        let id: i64 = r.get(0)?;
        let uid = derived_uid(id, r.opt_text(1)?, r.get(2)?, r.text(3)?, r.text(4)?);
        db.execute("UPDATE runs SET uid = ?1 WHERE id = ?2", args![uid, id])?;
    }
    Ok(())
}

/// A connection of its own for a lease (see `lease.rs`).
pub(crate) fn lease_connection(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

pub(crate) fn sql_error(path: &Path, context: &str, e: rusqlite::Error) -> StoreError {
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
            source: crate::error::SqlError(e),
        },
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
                let mut shown = tables[..tables.len().min(5)].join(", ");
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
