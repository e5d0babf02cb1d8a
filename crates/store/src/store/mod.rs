//! [`SqliteStore`]: opening (and recognising) a results database, writing a run as it is
//! measured, and reading runs back. One file per concern: [`open`] (recognising the
//! file, the schema and its migrations), [`runs`], [`cells`], [`lease`] (one process
//! measures a run at a time), [`codec`] (column encodings).

use std::path::{Path, PathBuf};

use rusqlite::{Connection, Transaction, TransactionBehavior};

mod backend;
mod cells;
mod codec;
mod lease;
mod open;
mod pg;
mod runs;

pub use backend::{Lease, PushReport, Store};
pub use lease::{LEASE_HEARTBEAT, LEASE_STALE_AFTER, LeaseError, LeaseHolder, this_host};
use runs::describe_ids;
pub use runs::{BadLabel, RunListing, check_label};

use crate::error::{Result, StoreError};

/// An open results database. One `SqliteStore` is one SQLite connection; several processes
/// may open the same file (a report reading while a run writes is fine: WAL mode).
///
/// Durability: WAL with `synchronous=FULL`. Either WAL setting keeps every committed
/// cell when the process is killed (`kill -9`, a crash): the commit is in the WAL file
/// before `save_cell` returns. NORMAL can lose the last commits on a power cut or kernel
/// panic, and smtlab provokes exactly those on some machines (switching SMT off, taking
/// CPUs offline). FULL costs one fsync per finished cell, milliseconds against cells
/// that last seconds.
#[derive(Debug)]
pub(crate) struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// The file's schema version: [`SCHEMA_VERSION`](crate::SCHEMA_VERSION), except for
    /// an older file opened read-only, which is read as it is.
    version: i64,
}

/// Why an internal step failed, before the public wrapper adds the file and context.
#[derive(Debug)]
enum Fail {
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

type Step<T> = std::result::Result<T, Fail>;

impl SqliteStore {
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
            source: crate::error::SqlError(e),
        },
    }
}
