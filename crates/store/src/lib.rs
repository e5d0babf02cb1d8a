//! # smtlab-store
//!
//! Where smtlab keeps its results. Handing them to other tools (JSON, CSV) is the
//! report crate's `export`.
//!
//! * [`Store`] is one SQLite database file (bundled SQLite, no system library), or a
//!   PostgreSQL database shared by many hosts when the `--db` value is a
//!   `postgresql://` or `postgres://` URL: the same API and tables either way. Every
//!   statement is written once against a small SQL seam (`store/sql.rs`); only opening,
//!   the DDL, migrations and PostgreSQL's advisory lock are per database. A run is
//!   written as it is measured: [`Store::create_run`] stores the environment and the
//!   plan, [`Store::save_cell`] stores each finished cell in its own transaction, and
//!   [`Store::finish_run`] closes it. A run killed half way keeps every saved cell;
//!   [`Store::pending_cells`] says what `--resume` still has to measure.
//! * Reading: [`Store::load_run`] rebuilds the exact [`smtlab_model::RunResults`];
//!   [`Store::list_runs`] and [`Store::resolve_run`] (`latest`, `12`, `-2`) find runs.
//! * Durability: WAL journal with `synchronous=FULL`, so a saved cell survives the
//!   process being killed and the machine losing power (see [`Store`] for why FULL);
//!   in PostgreSQL, one transaction per write and ids from sequences, so hosts writing
//!   at once lose and mix nothing.
//! * [`Store::push_to`] copies runs into another store (`smtlab push`), keyed by a
//!   run key stored with each run, so pushing twice stores a run once.
//!
//! The file is recognised by `PRAGMA application_id` ([`APPLICATION_ID`], "SMTL") and
//! versioned by `PRAGMA user_version` ([`SCHEMA_VERSION`]); anything else is refused
//! with a one-line [`StoreError`] naming the file. `SCHEMA.md` documents every table.
//! Nothing here prints.

mod error;
mod schema;
mod store;

use std::ffi::OsString;
use std::path::PathBuf;

pub use error::{PgError, Result, SqlError, StoreError};
pub use schema::{
    APPLICATION_ID, MIGRATIONS, PG_LOCK_KEY, PG_MIGRATIONS, PG_SCHEMA_SQL, PG_SCHEMA_VERSION,
    SCHEMA_SQL, SCHEMA_VERSION,
};
pub use store::{
    BadLabel, FleetQuery, FleetScan, LEASE_HEARTBEAT, LEASE_STALE_AFTER, Lease, LeaseError,
    LeaseHolder, PushReport, RunListing, SettingsError, Store, check_label, command_line,
    redact_arg, this_host,
};

/// Where results go unless the user says otherwise, in this order:
///
/// 1. `$SMTLAB_DB`, when set and not empty (a file, or a PostgreSQL URL);
/// 2. `$XDG_DATA_HOME/smtlab/results.db`, when that variable is an absolute path (the
///    XDG spec says to ignore relative ones);
/// 3. `$HOME/.local/share/smtlab/results.db`;
/// 4. `smtlab-results.db` in the current directory, when there is no `$HOME`.
pub fn default_path() -> PathBuf {
    default_path_from(|name| std::env::var_os(name))
}

fn default_path_from(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let set = |name| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = set("SMTLAB_DB") {
        return p;
    }
    if let Some(dir) = set("XDG_DATA_HOME").filter(|d| d.is_absolute()) {
        return dir.join("smtlab").join("results.db");
    }
    if let Some(home) = set("HOME") {
        return home.join(".local/share/smtlab/results.db");
    }
    PathBuf::from("smtlab-results.db")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn default_path_prefers_smtlab_db_then_xdg_then_home() {
        let all = [
            ("SMTLAB_DB", "/tmp/x.db"),
            ("XDG_DATA_HOME", "/data"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(default_path_from(env(&all)), PathBuf::from("/tmp/x.db"));
        assert_eq!(
            default_path_from(env(&all[1..])),
            PathBuf::from("/data/smtlab/results.db")
        );
        assert_eq!(
            default_path_from(env(&all[2..])),
            PathBuf::from("/home/u/.local/share/smtlab/results.db")
        );
        assert_eq!(
            default_path_from(env(&[])),
            PathBuf::from("smtlab-results.db")
        );
    }

    #[test]
    fn empty_and_relative_variables_are_ignored() {
        let vars = [
            ("SMTLAB_DB", ""),
            ("XDG_DATA_HOME", "relative/dir"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(
            default_path_from(env(&vars)),
            PathBuf::from("/home/u/.local/share/smtlab/results.db")
        );
    }
}
