//! The same tests against both backends. A case is a function of a [`Backend`];
//! [`cases!`] makes each one a test of its own on an SQLite file (`sqlite::NAME`), and
//! runs them all in `every_case_on_postgresql`, each in a database of its own on one
//! throw-away server (one server start rather than one per case), where PostgreSQL is
//! installed: skipped elsewhere, failed there under `SMTLAB_REQUIRE_TOOLS=1`. Cases
//! reach the tables behind the store's back, as another program or an older smtlab
//! would, with [`Backend::exec`] and friends.

use std::path::PathBuf;
use std::time::Duration;

use smtlab_store::Store;

use super::{pg, raw, temp_db};

/// Each case as a test on SQLite, and all of them on PostgreSQL.
macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $case() {
                    super::$case(&super::backends::sqlite());
                }
            )*
        }

        #[test]
        fn every_case_on_postgresql() {
            let Some(server) = pg::server() else { return };
            for (i, (name, case)) in [$((stringify!($case), $case as fn(&Backend))),*]
                .into_iter()
                .enumerate()
            {
                // Says which case a failure below belongs to.
                eprintln!("PostgreSQL: {name}");
                case(&backends::database(&server, i));
            }
        }
    };
}
pub(crate) use cases;

/// An empty store to test against, kept as long as this lives.
pub struct Backend {
    /// What `--db` would name: the file, or the URL.
    pub target: String,
    /// The file, and its directory (removed on drop); `None` for PostgreSQL.
    file: Option<(PathBuf, tempfile::TempDir)>,
}

/// An empty SQLite file.
pub fn sqlite() -> Backend {
    let (dir, path) = temp_db();
    Backend {
        target: path.display().to_string(),
        file: Some((path, dir)),
    }
}

/// A new, empty database `case_{i}` on `server`; it goes with the server.
pub fn database(server: &pg::Pg, i: usize) -> Backend {
    let name = format!("case_{i}");
    pg::client(&server.url)
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    let base = server
        .url
        .strip_suffix("/postgres")
        .expect("a URL of the postgres database");
    Backend {
        target: format!("{base}/{name}"),
        file: None,
    }
}

impl Backend {
    pub fn open(&self) -> Store {
        Store::open(&self.target).unwrap()
    }

    pub fn is_postgres(&self) -> bool {
        self.file.is_none()
    }

    /// Runs SQL statements (no parameters) on a connection of their own.
    pub fn exec(&self, sql: &str) {
        match &self.file {
            Some((path, _)) => raw(path).execute_batch(sql).unwrap(),
            None => pg::client(&self.target).batch_execute(sql).unwrap(),
        }
    }

    /// The first column of every row of a query, as text.
    pub fn texts(&self, sql: &str) -> Vec<String> {
        match &self.file {
            Some((path, _)) => {
                let conn = raw(path);
                let mut stmt = conn.prepare(sql).unwrap();
                stmt.query_map([], |r| r.get(0))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap()
            }
            None => pg::client(&self.target)
                .query(sql, &[])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect(),
        }
    }

    /// The one integer a query returns (a `count(*)`).
    pub fn count(&self, sql: &str) -> i64 {
        match &self.file {
            Some((path, _)) => raw(path).query_row(sql, [], |r| r.get(0)).unwrap(),
            None => pg::client(&self.target).query_one(sql, &[]).unwrap().get(0),
        }
    }

    /// A lease row as another process would have left it, renewed `age` ago.
    pub fn foreign_lease(&self, run_id: i64, pid: u32, host: &str, age: Duration) {
        let at = super::now_ms() - age.as_millis() as i64;
        self.exec(&format!(
            "DELETE FROM leases WHERE run_id = {run_id};
             INSERT INTO leases VALUES ({run_id}, {pid}, '{host}', 'other', {at}, {at});"
        ));
    }
}
