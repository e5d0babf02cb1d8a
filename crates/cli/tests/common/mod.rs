//! What several test files of the CLI share: a throw-away PostgreSQL server.

use smtlab_fixtures::require;
use smtlab_workloads::db::pg::{DB_USER, PgInstall, PgServer, PgSettings};

/// A fresh PostgreSQL server (initdb into a temporary directory, stopped when dropped)
/// and the URL of its `postgres` database over its private socket, or `None` where
/// PostgreSQL is missing (a failure under `SMTLAB_REQUIRE_TOOLS=1`); `what` names the
/// test in the skip line.
pub fn pg_server(what: &str) -> Option<(PgServer, String)> {
    let install = match PgInstall::find() {
        Ok(i) => i,
        Err(e) => {
            require::skip(&format!("{what}: {e}"));
            return None;
        }
    };
    let settings = PgSettings {
        port: 0,
        shared_buffers_bytes: 16 << 20,
        max_connections: 20,
        fsync: false,
        synchronous_commit: false,
        extra: Vec::new(),
    };
    let server = PgServer::start(&install, &settings, None).expect("start PostgreSQL");
    let sock = server
        .socket_dir()
        .display()
        .to_string()
        .replace('/', "%2F");
    let url = format!("postgresql://{DB_USER}@{sock}:{}/postgres", server.port());
    Some((server, url))
}
