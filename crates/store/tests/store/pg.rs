//! The PostgreSQL backend against a real server: a throw-away one per test (initdb into
//! a temporary directory, reached over its private unix socket, stopped and removed
//! when the test ends, panics included). Skipped where PostgreSQL is not installed,
//! failed there under `SMTLAB_REQUIRE_TOOLS=1`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use smtlab_fixtures::require;
use smtlab_model::{RunResults, RunStatus};
use smtlab_store::{PG_SCHEMA_VERSION, Store, StoreError};
use smtlab_workloads::db::pg::{DB_USER, PgInstall, PgServer, PgSettings};

use super::{temp_db, testdata, with_id};

/// A running server and the URL of its `postgres` database. Dropping it stops the
/// server and removes its directory.
pub struct Pg {
    pub url: String,
    pub server: PgServer,
}

/// A fresh server, or `None` (with the skip line) where PostgreSQL is missing.
pub fn server() -> Option<Pg> {
    let install = match PgInstall::find() {
        Ok(i) => i,
        Err(e) => {
            require::skip(&format!("PostgreSQL store tests: {e}"));
            return None;
        }
    };
    let settings = PgSettings {
        port: 0,
        shared_buffers_bytes: 16 << 20,
        max_connections: 60,
        // A throw-away server: durability is not what these tests are about.
        fsync: false,
        synchronous_commit: false,
        extra: Vec::new(),
    };
    let server = PgServer::start(&install, &settings, None).expect("start PostgreSQL");
    // The socket directory as the URL's host, percent-encoded.
    let sock = server
        .socket_dir()
        .display()
        .to_string()
        .replace('/', "%2F");
    let url = format!("postgresql://{DB_USER}@{sock}:{}/postgres", server.port());
    Some(Pg { url, server })
}

/// A connection of a test's own, in the store's namespace.
pub fn client(url: &str) -> postgres::Client {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.batch_execute("SET search_path TO smtlab").unwrap();
    c
}

/// `SELECT count(*)` of a table in the store's namespace.
fn count(url: &str, table: &str) -> i64 {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.query_one(&format!("SELECT count(*) FROM smtlab.{table}"), &[])
        .unwrap()
        .get(0)
}

/// An error with its causes, as the CLI prints it.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

fn sql(url: &str, text: &str) {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    c.batch_execute(text).unwrap();
}

#[test]
fn a_run_lives_in_postgresql_as_in_sqlite() {
    let Some(pg) = server() else { return };
    // Nothing there yet: read-only opens refuse, and create nothing.
    let err = Store::open_read_only(&pg.url).unwrap_err();
    assert!(matches!(err, StoreError::Empty { .. }), "{err}");
    assert!(matches!(
        Store::open_existing(&pg.url).unwrap_err(),
        StoreError::Empty { .. }
    ));

    let mut store = Store::open(&pg.url).unwrap();
    assert!(store.is_postgres());
    assert_eq!(store.path().display().to_string(), pg.url);
    let mut original = testdata::results(0);
    // Typed conditions travel through PostgreSQL as through SQLite.
    original.cells[0].conditions =
        smtlab_model::keys::Conditions::smt(smtlab_model::keys::SmtState::On);
    original.run.plan[0] = original.cells[0].key();
    let at = original
        .run
        .plan
        .iter()
        .position(|k| *k == original.skipped[0].key)
        .unwrap();
    original.skipped[0].key.conditions.rate = Some(smtlab_model::keys::OfferedRate::Percent(50));
    original.run.plan[at] = original.skipped[0].key.clone();
    let id = store.import_run(&original).unwrap();
    assert_eq!(store.load_run(id).unwrap(), with_id(original.clone(), id));
    store.check_integrity().unwrap();
    // Writing cell by cell, leases, resuming, listing and labels: the cases of
    // `backends::cases!`, which run here too.
    store.import_run(&original).unwrap();
    let err = store.resolve_run("99").unwrap_err().to_string();
    assert!(err.contains("no run 99"), "{err}");
    assert!(!err.contains('\n'), "{err}");

    // A read-only store reads, and the server refuses its writes.
    let rows = count(&pg.url, "samples");
    let mut ro = Store::open_read_only(&pg.url).unwrap();
    assert_eq!(ro.load_run(id).unwrap().cells, original.cells);
    let err = chain(&ro.import_run(&original).unwrap_err());
    assert!(err.contains("read-only transaction"), "{err}");
    assert_eq!(count(&pg.url, "samples"), rows);
    assert_eq!(count(&pg.url, "runs"), 2);

    // Deleting takes everything under a run and spares the other.
    store.delete_runs(&[id]).unwrap();
    assert_eq!(store.list_runs().unwrap().len(), 1);
    assert_eq!(
        count(&pg.url, "samples"),
        rows / 2,
        "the deleted run's samples are gone, the other's stay"
    );
}

#[test]
fn a_newer_schema_is_refused_and_a_bad_url_or_dead_server_is_one_line() {
    let Some(pg) = server() else { return };
    drop(Store::open(&pg.url).unwrap());
    sql(
        &pg.url,
        &format!(
            "UPDATE smtlab.schema_version SET version = {}",
            PG_SCHEMA_VERSION + 1
        ),
    );
    for err in [
        Store::open(&pg.url).unwrap_err(),
        Store::open_read_only(&pg.url).unwrap_err(),
    ] {
        assert!(matches!(err, StoreError::Newer { .. }), "{err}");
    }

    // Nothing listens there: an error naming the URL, well within the timeout.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dead = format!("postgresql://someone:secret@127.0.0.1:{port}/db");
    let t = Instant::now();
    let err = Store::open(&dead).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(15));
    let chain = chain(&err);
    assert!(
        chain.contains("postgresql://someone:***@127.0.0.1"),
        "{chain}"
    );
    assert!(!chain.contains("secret"), "{chain}");
    assert!(!chain.contains('\n'), "{chain}");

    let err = Store::open("postgresql://h/db?connect_timeout=soon")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a PostgreSQL URL"), "{err}");
}

#[test]
fn concurrent_writers_lose_and_mix_no_rows() {
    let Some(pg) = server() else { return };
    const WRITERS: usize = 6;
    const RUNS_EACH: usize = 3;
    let template = testdata::results(0);
    // Every writer opens the empty database at once: the schema is made once.
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let url = pg.url.clone();
            let template = template.clone();
            std::thread::spawn(move || -> Vec<(i64, RunResults)> {
                let mut store = Store::open(&url).unwrap();
                let mut mine = Vec::new();
                for r in 0..RUNS_EACH {
                    let mut results = template.clone();
                    results.run.environment.hostname = Some(format!("host-{w}"));
                    results.run.started_unix_s += (w * 100 + r) as u64;
                    // Each cell's first sample says whose it is.
                    for c in &mut results.cells {
                        c.result.samples[0].value = (w * 1000 + r) as f64;
                    }
                    let mut meta = results.run.clone();
                    meta.status = RunStatus::Running;
                    meta.finished_unix_s = None;
                    let id = store.create_run(&meta).unwrap();
                    let _lease = store.lease_run(id).unwrap();
                    // Cell by cell, so the writers' transactions interleave.
                    for c in &results.cells {
                        store.save_cell(id, c).unwrap();
                    }
                    for s in &results.skipped {
                        store.save_skipped(id, s).unwrap();
                    }
                    store
                        .finish_run(id, results.run.status, results.run.finished_unix_s.unwrap())
                        .unwrap();
                    mine.push((id, with_id(results, id)));
                }
                mine
            })
        })
        .collect();
    let written: Vec<(i64, RunResults)> = handles
        .into_iter()
        .flat_map(|h| smtlab_fixtures::bounded::join(h, "a writer"))
        .collect();

    let store = Store::open_read_only(&pg.url).unwrap();
    let ids: BTreeSet<i64> = store.list_runs().unwrap().iter().map(|r| r.id).collect();
    assert_eq!(ids.len(), WRITERS * RUNS_EACH, "runs lost or doubled");
    assert_eq!(ids, written.iter().map(|(id, _)| *id).collect());
    for (id, expected) in &written {
        assert_eq!(&store.load_run(*id).unwrap(), expected, "run {id}");
    }
    let per_run = template.cells.len() as i64;
    assert_eq!(
        count(&pg.url, "cells"),
        per_run * (WRITERS * RUNS_EACH) as i64
    );
    store.check_integrity().unwrap();
}

#[test]
fn pushing_twice_stores_each_run_once() {
    let Some(pg) = server() else { return };
    let (_dir, path) = temp_db();
    let mut local = Store::open(&path).unwrap();
    let a = local.import_run(&testdata::results(0)).unwrap();
    let b = local.import_run(&testdata::results(0)).unwrap();
    local.set_run_label(b, Some("baseline")).unwrap();
    drop(local);

    let source = Store::open_read_only(&path).unwrap();
    let mut target = Store::open(&pg.url).unwrap();
    let first = source.push_to(&mut target).unwrap();
    assert_eq!(first.pushed.len(), 2);
    assert!(first.present.is_empty());
    let second = source.push_to(&mut target).unwrap();
    assert!(second.pushed.is_empty());
    assert_eq!(second.present, [a, b]);
    assert_eq!(count(&pg.url, "runs"), 2);
    assert_eq!(
        count(&pg.url, "cells"),
        2 * testdata::results(0).cells.len() as i64
    );
    for (src, dst) in first.pushed {
        assert_eq!(
            target.load_run(dst).unwrap(),
            with_id(source.load_run(src).unwrap(), dst)
        );
        assert_eq!(target.run_uid(dst).unwrap(), source.run_uid(src).unwrap());
    }
    assert_eq!(
        target
            .run_label(target.resolve_run("baseline").unwrap())
            .unwrap()
            .as_deref(),
        Some("baseline")
    );

    // Two hosts pushing the same file at once still store each run once.
    let (_dir2, path2) = temp_db();
    let mut other = Store::open(&path2).unwrap();
    other.import_run(&testdata::results(0)).unwrap();
    drop(other);
    let pushers: Vec<_> = (0..4)
        .map(|_| {
            let (url, path2) = (pg.url.clone(), path2.clone());
            std::thread::spawn(move || {
                let src = Store::open_read_only(&path2).unwrap();
                let mut dst = Store::open(&url).unwrap();
                src.push_to(&mut dst).unwrap().pushed.len()
            })
        })
        .collect();
    let stored: usize = pushers
        .into_iter()
        .map(|h| smtlab_fixtures::bounded::join(h, "a pusher"))
        .sum();
    assert_eq!(stored, 1);
    assert_eq!(count(&pg.url, "runs"), 3);
}

/// A 300-cell run (the fixture's cells, copied under distinct parameters) pushed from a
/// file: every row arrives. Prints how long the push and a load back took.
#[test]
fn a_300_cell_run_is_pushed_whole() {
    let Some(pg) = server() else { return };
    let mut big = testdata::results(0);
    let base = big.cells.clone();
    big.cells.clear();
    big.skipped.clear();
    big.run.plan.clear();
    for i in 0..300 {
        let mut c = base[i % base.len()].clone();
        c.params.insert("copy".into(), i.to_string());
        big.run.plan.push(c.key());
        big.cells.push(c);
    }
    let (_dir, path) = temp_db();
    let id = Store::open(&path).unwrap().import_run(&big).unwrap();
    let samples: i64 = big
        .cells
        .iter()
        .map(|c| c.result.samples.len() as i64)
        .sum();

    let source = Store::open_read_only(&path).unwrap();
    let mut target = Store::open(&pg.url).unwrap();
    let t = Instant::now();
    let report = source.push_to(&mut target).unwrap();
    let push_s = t.elapsed().as_secs_f64();
    let [(from, to)] = report.pushed[..] else {
        panic!("{report:?}")
    };
    assert_eq!(from, id);
    assert_eq!(count(&pg.url, "cells"), 300);
    assert_eq!(count(&pg.url, "samples"), samples);
    assert_eq!(count(&pg.url, "plan"), 300);
    let t = Instant::now();
    let back = target.load_run(to).unwrap();
    let load_s = t.elapsed().as_secs_f64();
    assert_eq!(back, with_id(big, to));
    eprintln!(
        "300-cell run: push {push_s:.2} s ({} cells, {samples} samples, {} summaries, {} rounds, {} series rows), load back {load_s:.2} s",
        count(&pg.url, "cells"),
        count(&pg.url, "summaries"),
        count(&pg.url, "rounds"),
        count(&pg.url, "series"),
    );
}

/// A database of PostgreSQL schema 1 (before `runs.host_id` and `runs_by_host`) is read
/// as it is by a read-only session, and upgraded to the current schema by the next writer.
#[test]
fn a_schema_1_database_is_read_as_it_is_and_gains_host_ids_on_upgrade() {
    let Some(pg) = server() else { return };
    let results = with_id(testdata::results(0), 0);
    Store::open(&pg.url).unwrap().import_run(&results).unwrap();
    sql(
        &pg.url,
        "DROP INDEX smtlab.runs_by_host; ALTER TABLE smtlab.runs DROP COLUMN host_id;
         UPDATE smtlab.schema_version SET version = 1",
    );
    let mut n = 0;
    Store::open_read_only(&pg.url)
        .unwrap()
        .fleet_runs(&smtlab_store::FleetQuery::default(), |_, _| n += 1)
        .unwrap();
    assert_eq!(n, 1);
    drop(Store::open(&pg.url).unwrap());
    let mut c = client(&pg.url);
    let version: i64 = c
        .query_one("SELECT max(version) FROM smtlab.schema_version", &[])
        .unwrap()
        .get(0);
    assert_eq!(version, PG_SCHEMA_VERSION);
    let index: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = 'smtlab'
             AND indexname = 'runs_by_host'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(index, 1);
}

/// A server with every connection slot taken answers `too many clients` (53300): the
/// store waits and asks again, and gets in once a slot frees; a database that does not
/// exist is no reason to wait.
#[test]
fn a_full_server_is_asked_again_until_a_slot_frees() {
    let install = match PgInstall::find() {
        Ok(i) => i,
        Err(e) => {
            require::skip(&format!("PostgreSQL retry test: {e}"));
            return;
        }
    };
    let settings = PgSettings {
        port: 0,
        shared_buffers_bytes: 16 << 20,
        max_connections: 3,
        fsync: false,
        synchronous_commit: false,
        extra: vec!["superuser_reserved_connections = 0".into()],
    };
    let server = PgServer::start(&install, &settings, None).expect("start PostgreSQL");
    let sock = server
        .socket_dir()
        .display()
        .to_string()
        .replace('/', "%2F");
    let url = format!("postgresql://{DB_USER}@{sock}:{}/postgres", server.port());
    drop(Store::open(&url).unwrap());
    let mut held: Vec<postgres::Client> = (0..3)
        .map(|_| postgres::Client::connect(&url, postgres::NoTls).unwrap())
        .collect();
    let Err(full) = postgres::Client::connect(&url, postgres::NoTls) else {
        panic!("a fourth connection to a server of three");
    };
    assert_eq!(
        full.code(),
        Some(&postgres::error::SqlState::TOO_MANY_CONNECTIONS),
        "{full}"
    );
    let freed = held.pop().unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        drop(freed);
    });
    let t = Instant::now();
    let mut store = Store::open(&url).expect("in once a slot frees");
    assert!(
        t.elapsed() >= Duration::from_millis(600),
        "{:?}",
        t.elapsed()
    );
    store.import_run(&testdata::results(0)).unwrap();
    release.join().unwrap();
    drop(store);
    drop(held);

    let t = Instant::now();
    let missing = url.replace("/postgres", "/no_such_database");
    assert!(Store::open(&missing).is_err());
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}
