//! What is PostgreSQL's own: opening a shared database whose namespace `smtlab` holds
//! the same runs, cells, samples, rounds, skips and leases as the SQLite file
//! ([`PG_SCHEMA_SQL`]), so that many hosts write into one store. The statements are the
//! store's, through the `sql` seam.
//!
//! * Concurrent writers: every write is one transaction; run, cell and skip ids come
//!   from identity sequences, so writers on any number of hosts never hand out the same
//!   id, and a cell's rows carry its id. Two processes never write one run at once: the
//!   run's lease ([`Store::lease_run_as`]) is taken with the run's row locked
//!   (`SELECT ... FOR UPDATE`), so two hosts asking at once get one lease.
//! * The schema is created (or upgraded) by the first writer, in one transaction that
//!   holds an advisory lock ([`PG_LOCK_KEY`]), so hosts starting together create it once.
//! * Read-only opens set `default_transaction_read_only`, so a command that only reads
//!   cannot change the database even by mistake, and never create the schema.
//! * Connections have a connect timeout (10 s unless the URL sets `connect_timeout`) and
//!   a lock timeout, so an unreachable or stuck server gives an error, not a hang.
//! * A server busy for a moment (refusing connections, out of connection slots, a
//!   transaction losing a serialization or deadlock conflict) is asked again with
//!   backoff and jitter (`retry.rs`).
//!
//! Messages name the URL without its password.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use postgres::{Client, Config, GenericClient};

use super::pgconf::{Connector, PassEnv, split_url};
use super::{Db, Fail, Mode, PgConn, Step, Store, error};
use crate::error::{PgError, Result, StoreError};
use crate::schema::{
    PG_LOCK_KEY, PG_MIGRATIONS, PG_SCHEMA_SQL, PG_SCHEMA_VERSION, SCHEMA_VERSION, sqlite_equivalent,
};

/// Whether a `--db` value names a PostgreSQL database (`postgresql://...` or
/// `postgres://...`) rather than a file.
pub(crate) fn is_postgres_url(target: &str) -> bool {
    target.starts_with("postgresql://") || target.starts_with("postgres://")
}

/// Seconds to wait for a connection unless the URL says otherwise.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings each session and each transaction runs with: the namespace, bounded
/// waits for locks (another host's transaction lasts milliseconds; a minute only passes
/// when something is stuck), and a plan per execution of each prepared statement: a
/// generic plan, made without the values, reads a run's cells by scanning whole tables
/// once they are large (every statement here selects a few runs' rows, and planning it
/// costs microseconds).
const SETTINGS: [(&str, &str); 3] = [
    ("search_path", "smtlab"),
    ("lock_timeout", "'60s'"),
    ("plan_cache_mode", "force_custom_plan"),
];

/// [`SETTINGS`] as statements: for the session, or (`local`) for the transaction alone.
/// Each transaction sets them again because behind a pooler in transaction mode
/// (pgbouncer) consecutive transactions may run on different server sessions.
pub(crate) fn settings_sql(local: bool) -> String {
    let scope = if local { "LOCAL " } else { "" };
    SETTINGS
        .iter()
        .map(|(k, v)| format!("SET {scope}{k} = {v};"))
        .collect()
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

/// `arg` with the password of any PostgreSQL URL in it replaced by `***`
/// (`--db=postgresql://u:secret@h/db` as `--db=postgresql://u:***@h/db`).
pub fn redact_arg(arg: &str) -> String {
    match arg
        .find("postgresql://")
        .or_else(|| arg.find("postgres://"))
    {
        Some(at) => format!("{}{}", &arg[..at], redact(&arg[at..])),
        None => arg.to_string(),
    }
}

/// This process's arguments as a run stores them: any PostgreSQL password left out.
pub fn command_line() -> Vec<String> {
    std::env::args().map(|a| redact_arg(&a)).collect()
}

pub(crate) fn pg_error(target: &std::path::Path, context: &str, e: postgres::Error) -> StoreError {
    StoreError::Postgres {
        path: target.to_path_buf(),
        context: context.to_string(),
        source: PgError(e),
    }
}

/// A session in smtlab's namespace, read-only when asked.
pub(crate) fn connect(
    connector: &Connector,
    read_only: bool,
) -> std::result::Result<PgConn, postgres::Error> {
    // A server with no connection slot left, or not accepting yet, is asked again.
    let mut client = super::retry::retrying(|| connector.connect(), super::retry::transient)?;
    client.batch_execute(&settings_sql(false))?;
    if read_only {
        client.batch_execute("SET default_transaction_read_only = on")?;
    }
    Ok(PgConn {
        client,
        read_only,
        statements: HashMap::new(),
    })
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

/// Opens the database `url` names as `mode` says: the schema is created (or upgraded)
/// unless the store is read-only, which only reads what is there.
pub(crate) fn open(url: &str, mode: Mode) -> Result<Store> {
    let path = PathBuf::from(redact(url));
    let (url, own) = split_url(url);
    let mut config: Config = url
        .parse()
        .map_err(|e: postgres::Error| StoreError::Invalid {
            path: path.clone(),
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
    let connector = Connector::new(config, &own, &PassEnv::of_process()).map_err(|source| {
        StoreError::Settings {
            path: path.clone(),
            source,
        }
    })?;
    let mut conn = connect(&connector, mode == Mode::ReadOnly)
        .map_err(|e| pg_error(&path, "connecting", e))?;
    let client = &mut conn.client;
    let found = probe(client).map_err(|e| error(&path, "reading the schema version", e))?;
    match (found, mode) {
        (Some(v), _) if v > PG_SCHEMA_VERSION => {
            return Err(StoreError::Newer {
                path,
                found: v,
                supported: PG_SCHEMA_VERSION,
            });
        }
        (None, Mode::ReadOnly | Mode::Existing) => return Err(StoreError::Empty { path }),
        (Some(_), Mode::ReadOnly) | (Some(PG_SCHEMA_VERSION), _) => {}
        (_, Mode::Create | Mode::Existing) => {
            initialise(client).map_err(|e| error(&path, "creating the schema", e))?;
        }
    }
    // A read-only session reads an older schema as it is, like an old SQLite file.
    let version = match (found, mode) {
        (Some(v), Mode::ReadOnly) => sqlite_equivalent(v),
        _ => SCHEMA_VERSION,
    };
    Ok(Store {
        db: Db::Pg(std::sync::Arc::new(std::sync::Mutex::new(conn))),
        path,
        version,
    })
}

/// Creates the schema or upgrades it, once however many hosts try at the same time.
fn initialise(c: &mut Client) -> Step<()> {
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

    #[test]
    fn arguments_lose_their_passwords() {
        assert_eq!(
            redact_arg("--db=postgresql://u:secret@h/db"),
            "--db=postgresql://u:***@h/db"
        );
        assert_eq!(
            redact_arg("postgres://u:secret@h/db?password=x&sslmode=require"),
            "postgres://u:***@h/db?password=***&sslmode=require"
        );
        assert_eq!(redact_arg("--bench"), "--bench");
        assert_eq!(redact_arg("results.db"), "results.db");
    }
}
