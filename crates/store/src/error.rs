//! [`StoreError`]: every failure names the database file, in one line, so the CLI can
//! print it as it is.
//!
//! A variant that wraps another error exposes it as its `source` and leaves it out of
//! its own message: printers that walk the chain (anyhow's `{:#}`) then show each cause
//! once. Print these errors with their chain, not with `Display` alone.

use std::path::PathBuf;

/// What went wrong with a results database. Every message starts with (or contains)
/// the file's path.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file exists but does not start with SQLite's header.
    #[error("{} is not an SQLite database", smtlab_model::quote::path(path))]
    NotSqlite { path: PathBuf },

    /// A valid SQLite database that some other program wrote.
    #[error(
        "{} is not an smtlab results database (application_id {application_id:#010x}, expected {expected:#010x}{detail})",
        smtlab_model::quote::path(path)
    )]
    Foreign {
        path: PathBuf,
        application_id: u32,
        expected: u32,
        /// `; tables: a, b` or empty.
        detail: String,
    },

    /// Written by a later smtlab whose schema this build does not know.
    #[error(
        "{} was written by a newer smtlab (schema {found}, this build reads up to {supported})",
        smtlab_model::quote::path(path)
    )]
    Newer {
        path: PathBuf,
        found: i64,
        supported: i64,
    },

    /// `Store::open_existing` on a path that does not exist.
    #[error(
        "{} does not exist (no results have been recorded there yet)",
        smtlab_model::quote::path(path)
    )]
    Missing { path: PathBuf },

    /// A read-only command on a file that holds nothing yet (zero bytes, or an SQLite
    /// database without tables).
    #[error(
        "{} is empty: no results have been recorded there yet",
        smtlab_model::quote::path(path)
    )]
    Empty { path: PathBuf },

    /// The path names something other than a regular file (a device such as
    /// `/dev/null`, a FIFO, a directory): SQLite would write its journal beside it.
    #[error(
        "{} is not a regular file (expected a results database file, e.g. results.db)",
        smtlab_model::quote::path(path)
    )]
    NotAFile { path: PathBuf },

    /// Creating the directory that should hold the database failed.
    #[error(
        "cannot create directory {} for the results database",
        smtlab_model::quote::path(dir)
    )]
    CreateDir {
        dir: PathBuf,
        source: std::io::Error,
    },

    /// Reading the file's header failed.
    #[error("cannot read {}", smtlab_model::quote::path(path))]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    /// SQLite refused an operation. `context` says what smtlab was doing.
    #[error("{}: {context}", smtlab_model::quote::path(path))]
    Sqlite {
        path: PathBuf,
        context: String,
        source: SqlError,
    },

    /// PostgreSQL refused an operation, or the server could not be reached. `path` is
    /// the database URL without its password; `context` says what smtlab was doing.
    #[error("{}: {context}", smtlab_model::quote::path(path))]
    Postgres {
        path: PathBuf,
        context: String,
        source: PgError,
    },

    /// The URL asks for a connection smtlab cannot make as asked (an unknown `sslmode`,
    /// an unreadable `sslrootcert` or password file). `path` is the URL without its
    /// password.
    #[error("{}", smtlab_model::quote::path(path))]
    Settings {
        path: PathBuf,
        source: crate::SettingsError,
    },

    /// A row holds something this build cannot decode (bad JSON, an unknown status).
    #[error("{}: {context}: {detail}", smtlab_model::quote::path(path))]
    Corrupt {
        path: PathBuf,
        context: String,
        detail: String,
    },

    /// The requested run is not in the database.
    #[error("{}: no run {wanted}; {existing}", smtlab_model::quote::path(path))]
    NoSuchRun {
        path: PathBuf,
        /// The selector as the user wrote it (`12`, `-3`, `latest`).
        wanted: String,
        /// `runs 1-4,7 exist` or `it holds no runs yet`.
        existing: String,
    },

    /// A run selector that is neither a keyword nor a number.
    #[error(
        "{}: {input:?} does not name a run (expected latest, last, an id such as 12, or -1 for the latest, -2 for the one before)",
        smtlab_model::quote::path(path)
    )]
    BadRunSelector { path: PathBuf, input: String },

    /// A write that was refused: a non-finite number (JSON cannot carry it), or one
    /// that contradicts what is stored (marking a measured cell skipped).
    #[error("{}: {detail}", smtlab_model::quote::path(path))]
    Invalid { path: PathBuf, detail: String },
}

/// What SQLite said, as the cause of [`StoreError::Sqlite`]. rusqlite's own error
/// returns, as its source, the bare result code whose text repeats the message
/// (`Error code 1544: attempt to write a readonly database`); this wrapper ends the chain
/// at the message. The rusqlite error is its field, for matching on codes.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SqlError(pub rusqlite::Error);

/// What PostgreSQL (or the connection to it) said, as the cause of
/// [`StoreError::Postgres`], in one line: the server's message for an error the server
/// reported, else the client's message followed by its causes. The `postgres` error
/// is its field (its SQLSTATE, for instance).
#[derive(Debug)]
pub struct PgError(pub postgres::Error);

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(db) = self.0.as_db_error() {
            return write!(f, "{} (SQLSTATE {})", db.message(), db.code().code());
        }
        write!(f, "{}", self.0)?;
        let mut cause = std::error::Error::source(&self.0);
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}

impl std::error::Error for PgError {}

/// Results of store operations.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
