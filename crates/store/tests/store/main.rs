//! Integration tests of the results database: round trips, refusing foreign files,
//! resume bookkeeping and surviving `kill -9`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use smtlab_model::{CellKey, CellRecord, RunResults, RunStatus, SkippedCell};
use smtlab_store::{APPLICATION_ID, SCHEMA_VERSION, Store, StoreError};

// The fixture; the report crate's exporter tests read the same file.
mod testdata;

// The PostgreSQL backend, against a server each test starts.
mod pg;

// Passwords from a password file, and TLS with each sslmode, against such a server.
mod pgauth;

// The cases below that take a `Backend` run against SQLite and PostgreSQL.
mod backends;
use backends::Backend;

// `Store::fleet_runs`, on both backends.
mod fleet;
use fleet::*;

backends::cases! {
    a_run_pushed_while_interrupted_gets_the_rest_when_pushed_again,
    a_run_written_cell_by_cell_loads_back_identical,
    pending_cells_are_the_plan_minus_done_and_skipped_in_plan_order,
    a_key_is_measured_or_skipped_never_both,
    non_finite_numbers_are_refused_with_the_field_named,
    writes_to_an_unknown_run_name_the_runs_that_exist,
    run_selectors,
    a_read_only_store_refuses_writes,
    a_label_names_a_run_while_it_is_unambiguous,
    deleting_runs_takes_everything_under_them_and_spares_the_others,
    a_run_measured_by_a_live_process_is_not_deleted,
    typed_conditions_are_stored_flat_as_before_and_come_back_typed,
    rows_written_before_conditions_were_typed_read_them_typed_and_resume,
    pushing_a_file_twice_into_another_stores_each_run_once,
    a_second_lease_on_a_live_run_is_refused_naming_the_holder,
    a_stale_lease_is_taken_over_with_a_note,
    a_lease_is_released_on_drop_and_notices_being_taken_over,
    an_imported_run_loads_back_identical,
    repeat_rounds_survive_the_round_trip,
    two_stores_on_one_file_see_each_other,
    a_damaged_row_is_reported_with_the_cell_it_is_in,
    the_fleet_reads_each_hosts_latest_runs_and_leaves_out_live_ones,
    the_fleet_reads_cell_digests_never_samples_or_series,
    the_fleet_tells_hosts_apart_by_their_id_and_old_runs_by_their_hostname,
}

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.db");
    (dir, path)
}

fn with_id(mut results: RunResults, id: i64) -> RunResults {
    results.run.id = id;
    results
}

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

// ---- round trips ----------------------------------------------------------------------

fn an_imported_run_loads_back_identical(b: &Backend) {
    let original = testdata::results(0);
    let id = b.open().import_run(&original).unwrap();
    // A fresh connection, so nothing can come from a cache.
    let store = Store::open_existing(&b.target).unwrap();
    assert_eq!(store.load_run(id).unwrap(), with_id(original, id));
    store.check_integrity().unwrap();
}

fn a_run_written_cell_by_cell_loads_back_identical(b: &Backend) {
    let path = b.target.as_str();
    let expected = testdata::results(0);
    let mut meta = expected.run.clone();
    meta.status = RunStatus::Running;
    meta.finished_unix_s = None;

    let mut store = Store::open(path).unwrap();
    let id = store.create_run(&meta).unwrap();
    // Running while a live process holds its lease; interrupted without one.
    assert_eq!(
        store.load_run(id).unwrap().run.status,
        RunStatus::Interrupted
    );
    let lease = store.lease_run(id).unwrap();
    let partial = store.load_run(id).unwrap();
    assert_eq!(partial.run.status, RunStatus::Running);
    assert_eq!(partial.run.finished_unix_s, None);
    assert!(partial.cells.is_empty());

    store.save_cell(id, &expected.cells[0]).unwrap();
    store.save_cell(id, &expected.cells[1]).unwrap();
    store.save_skipped(id, &expected.skipped[0]).unwrap();
    store.save_cell(id, &expected.cells[2]).unwrap();
    store.save_cell(id, &expected.cells[3]).unwrap();
    store
        .finish_run(id, RunStatus::Finished, 1_790_000_042)
        .unwrap();
    drop(lease);
    drop(store);

    let store = Store::open(path).unwrap();
    assert_eq!(store.load_run(id).unwrap(), with_id(expected, id));
}

#[test]
fn query_columns_hold_what_sql_users_expect() {
    let (_dir, path) = temp_db();
    let id = Store::open(&path)
        .unwrap()
        .import_run(&testdata::results(0))
        .unwrap();
    let conn = raw(&path);
    let (host, status): (String, String) = conn
        .query_row(
            "SELECT hostname, status FROM runs WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((host.as_str(), status.as_str()), ("lab-1", "finished"));
    // The 1c2t cell: its plan position, CPUs as a list, and its mean in `summaries`.
    let (pos, cpus, mean): (i64, String, f64) = conn
        .query_row(
            "SELECT c.position, c.cpus, s.mean FROM cells c
             JOIN summaries s ON s.cell_id = c.id AND s.kind = 'value'
             WHERE c.placement_name = '1c2t'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((pos, cpus.as_str()), (1, "0,2"));
    assert!((mean - 14.05).abs() < 1e-12);
    let series: i64 = conn
        .query_row("SELECT sum(n) FROM series", [], |r| r.get(0))
        .unwrap();
    assert_eq!(series, 43);
}

#[test]
fn the_example_queries_in_schema_md_work() {
    let doc = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/SCHEMA.md")).unwrap();
    let sql = doc
        .split("```sql")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("SCHEMA.md has an sql block");
    let queries: Vec<&str> = sql.split(';').filter(|q| !q.trim().is_empty()).collect();
    assert_eq!(queries.len(), 2);

    let (_dir, path) = temp_db();
    let mut store = Store::open(&path).unwrap();
    let mut unfinished = testdata::results(0);
    unfinished.run.status = RunStatus::Interrupted;
    let first = store.import_run(&unfinished).unwrap();
    store.import_run(&testdata::results(0)).unwrap();
    let conn = raw(&path);

    let (bench, yield_): (String, f64) = conn
        .query_row(queries[0], [], |r| Ok((r.get(0)?, r.get(2)?)))
        .unwrap();
    assert_eq!(bench, "mem-read");
    assert!(
        (yield_ - 14.05 / 12.279_135_780_246_914).abs() < 1e-12,
        "{yield_}"
    );

    let (id, pending): (i64, i64) = conn
        .query_row(queries[1], [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    // The fixture plans five cells, measures four and skips one.
    assert_eq!((id, pending), (first, 0));
}

// ---- files that are not ours ----------------------------------------------------------

/// Deterministic noise (a 64-bit LCG), so a failure is reproducible.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

#[test]
fn random_bytes_are_not_an_sqlite_database() {
    let (_dir, path) = temp_db();
    for content in [
        noise(8192),
        b"SQLite for".to_vec(),
        b"{\"schema\":1}\n".to_vec(),
    ] {
        fs::write(&path, &content).unwrap();
        for err in [
            Store::open(&path).unwrap_err(),
            Store::open_existing(&path).unwrap_err(),
        ] {
            assert!(matches!(err, StoreError::NotSqlite { .. }), "{err:?}");
            assert_eq!(
                err.to_string(),
                format!("{} is not an SQLite database", path.display())
            );
        }
        assert_eq!(fs::read(&path).unwrap(), content, "the file is left alone");
    }
}

#[test]
fn a_damaged_sqlite_file_gives_an_error_not_a_panic() {
    let (_dir, path) = temp_db();
    let mut store = Store::open(&path).unwrap();
    store.import_run(&testdata::results(0)).unwrap();
    drop(store);
    // Keep the header, scribble over everything after it.
    let mut bytes = fs::read(&path).unwrap();
    let garbage = noise(bytes.len());
    bytes[100..].copy_from_slice(&garbage[100..]);
    fs::write(&path, &bytes).unwrap();
    let _ = fs::remove_file(path.with_extension("db-wal"));
    let _ = fs::remove_file(path.with_extension("db-shm"));
    let outcome = Store::open(&path).and_then(|s| {
        s.check_integrity()?;
        s.load_run(1).map(|_| ())
    });
    let err = outcome.unwrap_err();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn a_foreign_sqlite_database_is_refused_and_left_alone() {
    let (_dir, path) = temp_db();
    {
        let conn = raw(&path);
        conn.execute_batch(
            "CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('x');
             PRAGMA application_id = 42;",
        )
        .unwrap();
    }
    let before = fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Foreign {
                application_id: 42,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{} is not an smtlab results database (application_id 0x0000002a, expected {:#010x}; it holds tables contacts)",
            path.display(),
            APPLICATION_ID
        )
    );
    assert_eq!(
        fs::read(&path).unwrap(),
        before,
        "not even the journal mode changed"
    );
    let mode: String = raw(&path)
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");

    // application_id 0 (sqlite3's default) with tables is foreign too.
    let (_dir2, other) = temp_db();
    raw(&other).execute_batch("CREATE TABLE t (x)").unwrap();
    let err = Store::open(&other).unwrap_err();
    assert!(
        err.to_string().contains("application_id 0x00000000"),
        "{err}"
    );
}

#[test]
fn a_newer_schema_is_refused() {
    let (_dir, path) = temp_db();
    drop(Store::open(&path).unwrap());
    raw(&path)
        .execute_batch("PRAGMA user_version = 99")
        .unwrap();
    let err = Store::open(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{} was written by a newer smtlab (schema 99, this build reads up to {SCHEMA_VERSION})",
            path.display()
        )
    );
}

// ---- schema upgrades ------------------------------------------------------------------

/// Column names of a table, in order.
fn columns(conn: &rusqlite::Connection, table: &str) -> Vec<String> {
    let mut stmt = conn
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A real schema-1 file (the DDL smtlab 0.1.0 wrote, from `schema_v1.sql`) holding
/// `results`, whose cells have no counters: rows are copied from a current file.
fn version_1_file(path: &Path, results: &RunResults) {
    let (_tmp, current) = temp_db();
    Store::open(&current).unwrap().import_run(results).unwrap();
    let conn = raw(path);
    conn.execute_batch(include_str!("schema_v1.sql")).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA application_id = {}; PRAGMA user_version = 1;",
        APPLICATION_ID as i32
    ))
    .unwrap();
    let v1_cells = columns(&conn, "cells").join(", ");
    let v1_runs = columns(&conn, "runs").join(", ");
    conn.execute("ATTACH DATABASE ?1 AS cur", [current.display().to_string()])
        .unwrap();
    conn.execute_batch(&format!(
        "BEGIN;
         INSERT INTO runs ({v1_runs}) SELECT {v1_runs} FROM cur.runs;
         INSERT INTO plan SELECT * FROM cur.plan;
         INSERT INTO cells ({v1_cells}) SELECT {v1_cells} FROM cur.cells;
         INSERT INTO samples SELECT * FROM cur.samples;
         INSERT INTO summaries SELECT * FROM cur.summaries;
         INSERT INTO series SELECT * FROM cur.series;
         INSERT INTO skipped SELECT * FROM cur.skipped;
         COMMIT;
         DETACH DATABASE cur;"
    ))
    .unwrap();
}

/// Writes `testdata::results(0)` as a version 1 file would hold it (no counters, no
/// rounds: version 1 had neither) and returns what was written.
fn version_1_file_of_results_0(path: &Path) -> RunResults {
    let mut old = testdata::results(0);
    for c in &mut old.cells {
        c.counters = None;
        c.result.rounds.clear();
    }
    version_1_file(path, &old);
    old
}

#[test]
fn a_version_1_file_is_upgraded_on_open_and_keeps_its_runs() {
    let (_dir, path) = temp_db();
    let old = version_1_file_of_results_0(&path);
    let v1_columns = columns(&raw(&path), "cells");
    assert!(!v1_columns.contains(&"counters".to_string()));

    // Reading (report, compare) upgrades as well as writing does.
    let store = Store::open_existing(&path).unwrap();
    assert_eq!(store.load_run(1).unwrap(), with_id(old.clone(), 1));
    drop(store);
    let conn = raw(&path);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let mut expected = v1_columns.clone();
    expected.push("counters".into());
    assert_eq!(columns(&conn, "cells"), expected);
    drop(conn);

    // The upgraded file takes cells with counters and gives them back.
    let mut store = Store::open(&path).unwrap();
    let mut cell = old.cells[0].clone();
    cell.counters = Some(testdata::counters());
    store.save_cell(1, &cell).unwrap();
    let loaded = store.load_run(1).unwrap();
    let back = loaded.cells.iter().find(|c| c.key() == cell.key()).unwrap();
    assert_eq!(back.counters, cell.counters);
    store.check_integrity().unwrap();
    // Opening again is a no-op: already current.
    drop(store);
    assert_eq!(
        Store::open(&path).unwrap().load_run(1).unwrap().cells.len(),
        old.cells.len()
    );
}

#[test]
fn a_version_2_file_gains_the_rounds_table_and_keeps_its_runs() {
    let (_dir, path) = temp_db();
    let mut old = testdata::results(0);
    for c in &mut old.cells {
        c.result.rounds.clear();
    }
    version_1_file(&path, &old);
    // What smtlab with schema 2 left: version 1 plus the counters column.
    let conn = raw(&path);
    conn.execute_batch(smtlab_store::MIGRATIONS[0].1).unwrap();
    conn.execute_batch("PRAGMA user_version = 2;").unwrap();
    drop(conn);
    let mut store = Store::open(&path).unwrap();
    let mut expected = with_id(old.clone(), 1);
    for c in &mut expected.cells {
        c.counters = None;
    }
    assert_eq!(store.load_run(1).unwrap(), expected);
    assert!(columns(&raw(&path), "rounds").contains(&"median".to_string()));
    // The upgraded file keeps rounds.
    let with_rounds = testdata::results(0).cells[1].clone();
    assert_eq!(with_rounds.result.rounds.len(), 2);
    store.save_cell(1, &with_rounds).unwrap();
    let loaded = store.load_run(1).unwrap();
    let back = loaded
        .cells
        .iter()
        .find(|c| c.key() == with_rounds.key())
        .unwrap();
    assert_eq!(back.result.rounds, with_rounds.result.rounds);
    store.check_integrity().unwrap();
}

fn repeat_rounds_survive_the_round_trip(b: &Backend) {
    let original = testdata::results(0);
    let rounds = &original.cells[1].result.rounds;
    assert_eq!(
        rounds.len(),
        2,
        "the fixture has a cell measured in two rounds"
    );
    let id = b.open().import_run(&original).unwrap();
    let loaded = Store::open_existing(&b.target)
        .unwrap()
        .load_run(id)
        .unwrap();
    assert_eq!(&loaded.cells[1].result.rounds, rounds);
    assert_eq!(b.count("SELECT count(*) FROM rounds"), 2);
    // Replacing the cell replaces its rounds (no orphans).
    let mut store = b.open();
    let mut again = original.cells[1].clone();
    again.result.rounds.truncate(1);
    store.save_cell(id, &again).unwrap();
    assert_eq!(b.count("SELECT count(*) FROM rounds"), 1);
}

#[test]
fn counters_survive_the_round_trip_and_the_column_holds_json() {
    let (_dir, path) = temp_db();
    let original = testdata::results(0);
    assert!(original.cells[0].counters.is_some());
    let id = Store::open(&path).unwrap().import_run(&original).unwrap();
    let conn = raw(&path);
    let (with, without): (i64, i64) = conn
        .query_row(
            "SELECT count(counters), count(*) - count(counters) FROM cells",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((with, without), (1, 3));
    let task_clock: f64 = conn
        .query_row(
            "SELECT e.value ->> '$.all.scaled' FROM cells c,
                    json_each(c.counters, '$.values.events') e
             WHERE e.value ->> '$.event' = 'task-clock'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(task_clock, 10_123_456.0);
    // The counters query of SCHEMA.md.
    let doc = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/SCHEMA.md")).unwrap();
    let sql = doc
        .split("```sql")
        .nth(2)
        .and_then(|rest| rest.split("```").next())
        .expect("SCHEMA.md has a counters query");
    let (bench, ns, faults): (String, f64, f64) = conn
        .query_row(sql, [], |r| Ok((r.get(0)?, r.get(2)?, r.get(3)?)))
        .unwrap();
    assert_eq!((bench.as_str(), ns), ("mem-read", 10_123_456.0));
    // 17 user + 2 kernel counted half the time (scaled to 4).
    assert!(
        (faults - 21.0 / (5.0 * 1_073_741_824.0)).abs() < 1e-20,
        "{faults}"
    );
    assert_eq!(
        Store::open(&path).unwrap().load_run(id).unwrap(),
        with_id(original, id)
    );
}

#[test]
fn an_empty_file_is_initialised() {
    let (_dir, path) = temp_db();
    fs::write(&path, b"").unwrap();
    let store = Store::open_existing(&path).unwrap();
    assert!(store.list_runs().unwrap().is_empty());
    drop(store);
    let conn = raw(&path);
    let app: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!((app as u32, version), (APPLICATION_ID, SCHEMA_VERSION));
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn an_sqlite_file_without_tables_is_initialised() {
    let (_dir, path) = temp_db();
    raw(&path)
        .execute_batch("CREATE TABLE t (x); DROP TABLE t;")
        .unwrap();
    let mut store = Store::open(&path).unwrap();
    let id = store.import_run(&testdata::results(0)).unwrap();
    assert_eq!(store.resolve_run("latest").unwrap(), id);
}

#[test]
fn open_creates_directories_and_open_existing_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b/results.db");
    let err = Store::open_existing(&nested).unwrap_err();
    assert!(matches!(err, StoreError::Missing { .. }));
    assert!(
        err.to_string().starts_with(&nested.display().to_string()),
        "{err}"
    );
    assert!(!nested.exists());
    Store::open(&nested).unwrap();
    assert!(nested.exists());
    Store::open_existing(&nested).unwrap();
}

fn two_stores_on_one_file_see_each_other(b: &Backend) {
    let mut writer = b.open();
    let reader = Store::open_existing(&b.target).unwrap();
    let id = writer.import_run(&testdata::results(0)).unwrap();
    assert_eq!(reader.resolve_run("latest").unwrap(), id);
}

// ---- bookkeeping ------------------------------------------------------------------------

fn key(benchmark: &str, placement: &str) -> CellKey {
    CellKey {
        benchmark: benchmark.into(),
        params: BTreeMap::from([("size".to_string(), "64MiB".to_string())]),
        conditions: Default::default(),
        placement: placement.into(),
    }
}

fn cell_for(key: &CellKey) -> CellRecord {
    let mut cell = testdata::results(0).cells[0].clone();
    cell.benchmark = key.benchmark.clone();
    cell.params = key.params.clone();
    cell.placement_spec = key.placement.clone();
    cell
}

fn running_meta(plan: Vec<CellKey>) -> smtlab_model::RunMeta {
    let mut meta = testdata::results(0).run;
    meta.status = RunStatus::Running;
    meta.finished_unix_s = None;
    meta.plan = plan;
    meta
}

fn pending_cells_are_the_plan_minus_done_and_skipped_in_plan_order(b: &Backend) {
    let path = b.target.as_str();
    let plan = vec![
        key("mem-read", "1c1t"),
        key("mem-read", "1c2t"),
        key("mem-read", "2c1t"),
        key("mem-read", "2c2t"),
    ];
    let mut store = Store::open(path).unwrap();
    let id = store.create_run(&running_meta(plan.clone())).unwrap();
    let lease = store.lease_run(id).unwrap();
    assert_eq!(store.pending_cells(id).unwrap(), plan);

    store.save_cell(id, &cell_for(&plan[2])).unwrap();
    store.save_cell(id, &cell_for(&plan[0])).unwrap();
    store
        .save_skipped(
            id,
            &SkippedCell {
                key: plan[3].clone(),
                reason: "no SMT".into(),
            },
        )
        .unwrap();
    assert_eq!(store.pending_cells(id).unwrap(), vec![plan[1].clone()]);

    let listing = &store.list_runs().unwrap()[0];
    assert_eq!(
        (
            listing.cells_done,
            listing.cells_skipped,
            listing.cells_planned
        ),
        (2, 1, 4)
    );
    assert_eq!(listing.status, RunStatus::Running);
    assert_eq!(listing.hostname.as_deref(), Some("lab-1"));
    drop(lease);

    // Interrupted, then resumed and finished.
    assert_eq!(store.latest_unfinished_run().unwrap(), Some(id));
    store.mark_interrupted(id).unwrap();
    assert_eq!(store.list_runs().unwrap()[0].status, RunStatus::Interrupted);
    assert_eq!(store.latest_unfinished_run().unwrap(), Some(id));
    store.reopen_run(id).unwrap();
    store.save_cell(id, &cell_for(&plan[1])).unwrap();
    assert!(store.pending_cells(id).unwrap().is_empty());
    store
        .finish_run(id, RunStatus::Finished, 1_790_000_100)
        .unwrap();
    assert_eq!(store.latest_unfinished_run().unwrap(), None);
    // A finished run stays finished.
    store.mark_interrupted(id).unwrap();
    let run = store.load_run(id).unwrap().run;
    assert_eq!(
        (run.status, run.finished_unix_s),
        (RunStatus::Finished, Some(1_790_000_100))
    );
    // Cells load in the order they were saved; each knows its plan position.
    let cells = store.load_run(id).unwrap().cells;
    let order: Vec<&str> = cells.iter().map(|c| c.placement_spec.as_str()).collect();
    assert_eq!(order, ["2c1t", "1c1t", "1c2t"]);
}

fn a_key_is_measured_or_skipped_never_both(b: &Backend) {
    let path = b.target.as_str();
    let k = key("syscall", "1c1t");
    let mut store = Store::open(path).unwrap();
    let id = store.create_run(&running_meta(vec![k.clone()])).unwrap();
    let skip = SkippedCell {
        key: k.clone(),
        reason: "first try failed".into(),
    };
    store.save_skipped(id, &skip).unwrap();
    store.save_skipped(id, &skip).unwrap();
    assert_eq!(
        store.load_run(id).unwrap().skipped.len(),
        1,
        "a skip replaces a skip"
    );

    // Measuring it later replaces the skip.
    let mut cell = cell_for(&k);
    store.save_cell(id, &cell).unwrap();
    let run = store.load_run(id).unwrap();
    assert!(run.skipped.is_empty());
    assert_eq!(run.cells.len(), 1);

    // Measuring again replaces the measurement.
    cell.result.wall_ns = 1;
    store.save_cell(id, &cell).unwrap();
    let run = store.load_run(id).unwrap();
    assert_eq!(run.cells, vec![cell]);

    let err = store.save_skipped(id, &skip).unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains("already measured"), "{err}");
}

fn non_finite_numbers_are_refused_with_the_field_named(b: &Backend) {
    let path = b.target.as_str();
    let mut store = Store::open(path).unwrap();
    let mut results = testdata::results(0);
    let id = store.create_run(&results.run).unwrap();
    let cell = &mut results.cells[2];
    cell.result.samples[1]
        .metrics
        .insert("wake_ns".into(), f64::NAN);
    let err = store.save_cell(id, cell).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with(&path.to_string()), "{msg}");
    assert!(msg.contains("samples[1].metrics.wake_ns is NaN"), "{msg}");
    assert!(store.load_run(id).unwrap().cells.is_empty());

    results.cells[0].result.summary.mean = f64::INFINITY;
    let err = store.import_run(&results).unwrap_err();
    assert!(err.to_string().contains("summary.mean is inf"), "{err}");
    assert_eq!(
        store.list_runs().unwrap().len(),
        1,
        "a refused import stores nothing"
    );

    let mut cell = testdata::results(0).cells[0].clone();
    if let Some(c) = cell.counters.as_mut() {
        c.work = Some(smtlab_model::counters::derived::Work {
            amount: f64::NAN,
            unit: "byte".into(),
        });
    }
    let err = store.save_cell(id, &cell).unwrap_err();
    assert!(
        err.to_string().contains("counters.work.amount is NaN"),
        "{err}"
    );
}

fn writes_to_an_unknown_run_name_the_runs_that_exist(b: &Backend) {
    let path = b.target.as_str();
    let mut store = Store::open(path).unwrap();
    let err = store.load_run(5).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{path}: no run 5; it holds no runs yet")
    );
    let results = testdata::results(0);
    store.import_run(&results).unwrap();
    let err = store.save_cell(5, &results.cells[0]).unwrap_err();
    assert_eq!(err.to_string(), format!("{path}: no run 5; run 1 exists"));
    assert!(store.finish_run(5, RunStatus::Finished, 0).is_err());
    assert!(store.mark_interrupted(5).is_err());
    assert!(store.pending_cells(5).is_err());
}

fn run_selectors(b: &Backend) {
    let path = b.target.as_str();
    let mut store = Store::open(path).unwrap();
    let err = store.resolve_run("latest").unwrap_err();
    assert!(
        err.to_string()
            .ends_with("no run latest; it holds no runs yet"),
        "{err}"
    );

    let ids: Vec<i64> = (0..3)
        .map(|_| store.import_run(&testdata::results(0)).unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3]);
    for (sel, want) in [
        ("latest", 3),
        ("last", 3),
        (" LATEST ", 3),
        ("-1", 3),
        ("-2", 2),
        ("-3", 1),
        ("2", 2),
        ("#1", 1),
    ] {
        assert_eq!(store.resolve_run(sel).unwrap(), want, "{sel}");
    }
    let err = store.resolve_run("9").unwrap_err();
    assert_eq!(err.to_string(), format!("{path}: no run 9; runs 1-3 exist"));
    assert!(
        store
            .resolve_run("-4")
            .unwrap_err()
            .to_string()
            .contains("runs 1-3 exist")
    );
    for bad in ["foo", "-0", "-x", "", "1.5"] {
        let err = store.resolve_run(bad).unwrap_err();
        assert!(
            matches!(err, StoreError::BadRunSelector { .. }),
            "{bad}: {err:?}"
        );
    }
    let listing = store.list_runs().unwrap();
    assert_eq!(listing.iter().map(|l| l.id).collect::<Vec<_>>(), ids);
    assert_eq!(listing[0].cells_done, 4);
    assert_eq!(
        listing[0].cpu_model.as_deref(),
        Some("Example CPU @ 3.00GHz")
    );
}

fn a_damaged_row_is_reported_with_the_cell_it_is_in(b: &Backend) {
    let id = b.open().import_run(&testdata::results(0)).unwrap();
    b.exec("UPDATE cells SET facts = '{' WHERE id = 2");
    let err = b.open().load_run(id).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("loading run 1: cell 2: facts"), "{msg}");
    // A status the CHECK constraint would refuse, as a damaged file holds it.
    b.exec(if b.is_postgres() {
        "ALTER TABLE runs DROP CONSTRAINT runs_status_check;
         UPDATE runs SET status = 'paused'"
    } else {
        "PRAGMA ignore_check_constraints = ON; UPDATE runs SET status = 'paused'"
    });
    let err = b.open().list_runs().unwrap_err();
    assert!(
        err.to_string().contains("unknown run status \"paused\""),
        "{err}"
    );
}

// ---- crash safety -------------------------------------------------------------------------

const CHILD_DB: &str = "SMTLAB_STORE_CHILD_DB";
const CHILD_LOG: &str = "SMTLAB_STORE_CHILD_LOG";
/// Values per series of a crash-test cell: big enough (160 KB) that a kill often lands
/// inside a transaction.
const CHILD_SERIES_LEN: usize = 20_000;

fn child_key(i: usize) -> CellKey {
    CellKey {
        benchmark: "pthread-create".into(),
        params: BTreeMap::from([("i".to_string(), i.to_string())]),
        conditions: Default::default(),
        placement: "os".into(),
    }
}

fn child_cell(i: usize) -> CellRecord {
    let mut cell = testdata::results(0).cells[2].clone();
    let key = child_key(i);
    cell.benchmark = key.benchmark;
    cell.params = key.params;
    cell.placement_spec = key.placement;
    cell.result.series.insert(
        "call_ns".into(),
        (0..CHILD_SERIES_LEN).map(|j| (i * j) as f64).collect(),
    );
    cell
}

/// Not a test on its own: the writer process of
/// `a_killed_writer_keeps_every_saved_cell`, which runs this test binary again with the
/// environment variables set. Saves cells until killed, logging each saved index.
#[test]
fn writer_child() {
    let (Some(db), Some(log)) = (std::env::var_os(CHILD_DB), std::env::var_os(CHILD_LOG)) else {
        return;
    };
    let mut store = Store::open(&db).unwrap();
    let id = store
        .create_run(&running_meta((0..10_000).map(child_key).collect()))
        .unwrap();
    let mut log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    writeln!(log, "run {id}").unwrap();
    // Bounded, so an orphaned child cannot run forever if the parent dies.
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..10_000 {
        if Instant::now() > deadline {
            break;
        }
        store.save_cell(id, &child_cell(i)).unwrap();
        writeln!(log, "{i}").unwrap();
    }
}

#[test]
fn a_killed_writer_keeps_every_saved_cell() {
    // Kill at different moments after the third cell: between transactions, while one
    // is being built, and while its commit is being written.
    for delay_ms in [0, 1, 3, 7, 13] {
        kill_writer_and_check(Duration::from_millis(delay_ms));
    }
}

fn kill_writer_and_check(delay: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let log = dir.path().join("saved.log");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["writer_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DB, &db)
        .env(CHILD_LOG, &log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    let read_log = || -> (Option<i64>, Vec<usize>) {
        let text = fs::read_to_string(&log).unwrap_or_default();
        let mut run = None;
        let mut saved = Vec::new();
        // Only complete lines count: the kill may cut the last one short.
        for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
            let line = line.trim_end();
            if let Some(id) = line.strip_prefix("run ") {
                run = id.parse().ok();
            } else if let Ok(i) = line.parse() {
                saved.push(i);
            }
        }
        (run, saved)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while read_log().1.len() < 3 {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the writer exited early ({status})");
        }
        assert!(
            Instant::now() < deadline,
            "the writer saved too little in time"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(delay);
    child.kill().unwrap(); // SIGKILL on Unix
    smtlab_fixtures::bounded::wait(&mut child, "the child process");

    let (run_id, saved) = read_log();
    let run_id = run_id.expect("the writer logged its run id");
    let store = Store::open_existing(&db).unwrap();
    store.check_integrity().unwrap();
    let run = store.load_run(run_id).unwrap();
    // Stored as running; with no live process behind it, read as interrupted.
    assert_eq!(
        run.run.status,
        RunStatus::Interrupted,
        "a killed run reads as interrupted"
    );

    // Every cell it reported is there, whole; at most one more (saved, not yet logged).
    let stored: Vec<usize> = run
        .cells
        .iter()
        .map(|c| c.params["i"].parse().unwrap())
        .collect();
    assert_eq!(stored, (0..stored.len()).collect::<Vec<_>>());
    assert!(
        stored.len() == saved.len() || stored.len() == saved.len() + 1,
        "stored {} cells, the writer reported {}",
        stored.len(),
        saved.len()
    );
    for (cell, i) in run.cells.iter().zip(0..) {
        assert_eq!(cell, &child_cell(i));
    }
    let pending = store.pending_cells(run_id).unwrap();
    assert_eq!(pending.len(), 10_000 - stored.len());
    assert_eq!(pending[0], child_key(stored.len()));
    assert_eq!(store.latest_unfinished_run().unwrap(), Some(run_id));
}

// ---- error messages ------------------------------------------------------------------

/// Every message in the chain, outermost first.
fn chain(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push(c.to_string());
        cur = c.source();
    }
    out
}

#[test]
fn each_cause_appears_once_in_an_error_chain() {
    let dir = tempfile::tempdir().unwrap();
    let not_ours = dir.path().join("other.db");
    let conn = raw(&not_ours);
    conn.execute_batch("CREATE TABLE t (x); PRAGMA application_id = 7;")
        .unwrap();
    drop(conn);
    let not_sqlite = dir.path().join("notes.txt");
    fs::write(&not_sqlite, "hello, this is text and not a database").unwrap();
    let blocked = dir.path().join("file");
    fs::write(&blocked, "").unwrap();
    let failures: Vec<(&str, StoreError)> = vec![
        (
            "a directory as the database",
            Store::open(dir.path()).unwrap_err(),
        ),
        ("a foreign SQLite file", Store::open(&not_ours).unwrap_err()),
        ("not SQLite", Store::open(&not_sqlite).unwrap_err()),
        (
            "a missing file",
            Store::open_existing(dir.path().join("none.db")).unwrap_err(),
        ),
        (
            "a directory that cannot be created",
            Store::open(blocked.join("sub/r.db")).unwrap_err(),
        ),
    ];
    let (_dir2, db) = temp_db();
    Store::open(&db).unwrap();
    let refused = Store::open_read_only(&db)
        .unwrap()
        .import_run(&testdata::results(0))
        .unwrap_err();
    assert!(matches!(refused, StoreError::Sqlite { .. }), "{refused:?}");
    let mut failures = failures;
    failures.push(("a write to a read-only store", refused));
    let mut wrapped = 0;
    for (what, e) in &failures {
        let msgs = chain(e);
        assert!(!msgs[0].is_empty(), "{what}");
        for pair in msgs.windows(2) {
            wrapped += 1;
            let tail = pair[1].rsplit(": ").next().unwrap_or(&pair[1]);
            assert!(
                !pair[0].contains(&pair[1]) && !pair[0].ends_with(tail),
                "{what}: {:?} repeats its cause {:?}",
                pair[0],
                pair[1]
            );
        }
    }
    // The directory that cannot be created and the refused write wrap a cause: the
    // test saw real chains.
    assert!(wrapped >= 2, "{failures:?}");
}

#[test]
fn a_path_that_is_not_a_regular_file_is_refused_and_nothing_is_made_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string naming a path in our own temporary directory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for path in [fifo.as_path(), Path::new("/dev/null"), dir.path()] {
        for e in [
            Store::open(path).unwrap_err(),
            Store::open_existing(path).unwrap_err(),
            Store::open_read_only(path).unwrap_err(),
        ] {
            assert!(matches!(e, StoreError::NotAFile { .. }), "{path:?}: {e:?}");
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
    }
    // Nothing but the FIFO in the directory: no journal, no -wal beside it.
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

// ---- read-only opening ---------------------------------------------------------------

/// Every file in `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn read_only_opening_changes_no_file() {
    let (dir, path) = temp_db();
    let original = testdata::results(0);
    let id = Store::open(&path).unwrap().import_run(&original).unwrap();
    let before = snapshot(dir.path());
    assert_eq!(
        before.len(),
        1,
        "a closed database is one file: {:?}",
        before.keys()
    );
    let store = Store::open_read_only(&path).unwrap();
    assert_eq!(store.load_run(id).unwrap(), with_id(original, id));
    assert_eq!(store.list_runs().unwrap().len(), 1);
    assert_eq!(store.resolve_run("-1").unwrap(), id);
    drop(store);
    let after = snapshot(dir.path());
    let (a, b) = (&before["results.db"], &after["results.db"]);
    let diff: Vec<usize> = (0..a.len().min(b.len()))
        .filter(|&i| a[i] != b[i])
        .collect();
    eprintln!(
        "len {} {} diff {:?}",
        a.len(),
        b.len(),
        &diff[..diff.len().min(20)]
    );
    assert_eq!(after, before);
}

#[test]
fn read_only_opening_reads_an_older_schema_without_upgrading_it() {
    let (dir, path) = temp_db();
    let old = version_1_file_of_results_0(&path);
    let before = snapshot(dir.path());
    let store = Store::open_read_only(&path).unwrap();
    assert_eq!(store.load_run(1).unwrap(), with_id(old, 1));
    drop(store);
    assert_eq!(
        snapshot(dir.path()),
        before,
        "the file was upgraded or a journal left"
    );
    let version: i64 = raw(&path)
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 1);
}

#[test]
fn read_only_opening_of_missing_and_empty_files_is_an_error_that_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("sub/none.db");
    let err = Store::open_read_only(&missing).unwrap_err();
    assert!(matches!(err, StoreError::Missing { .. }), "{err}");
    let empty = dir.path().join("empty.db");
    fs::write(&empty, "").unwrap();
    let err = Store::open_read_only(&empty).unwrap_err();
    assert!(matches!(err, StoreError::Empty { .. }), "{err}");
    assert!(err.to_string().starts_with(&empty.display().to_string()));
    // An SQLite file without tables holds nothing either.
    let blank = dir.path().join("blank.db");
    raw(&blank)
        .execute_batch("PRAGMA user_version = 0;")
        .unwrap();
    let blank_bytes = fs::read(&blank).unwrap();
    let before = snapshot(dir.path());
    assert!(matches!(
        Store::open_read_only(&blank).unwrap_err(),
        StoreError::Empty { .. }
    ));
    assert_eq!(snapshot(dir.path()), before);
    assert_eq!(fs::read(&blank).unwrap(), blank_bytes);
    assert_eq!(fs::read(&empty).unwrap(), b"");
}

fn a_read_only_store_refuses_writes(b: &Backend) {
    let path = b.target.as_str();
    let original = testdata::results(0);
    Store::open(path).unwrap().import_run(&original).unwrap();
    let mut store = Store::open_read_only(path).unwrap();
    assert!(store.import_run(&original).is_err());
    assert_eq!(store.list_runs().unwrap().len(), 1);
}

// ---- run leases ----------------------------------------------------------------------

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn a_dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    smtlab_fixtures::bounded::wait(&mut child, "the child process");
    pid
}

/// A run in `b` that nobody leases.
fn unleased_run(b: &Backend) -> i64 {
    let meta = running_meta(vec![key("null-syscall", "1c1t")]);
    b.open().create_run(&meta).unwrap()
}

fn a_second_lease_on_a_live_run_is_refused_naming_the_holder(b: &Backend) {
    let id = unleased_run(b);
    let path = b.target.as_str();
    let mut first = Store::open(path).unwrap();
    let lease = first.lease_run(id).unwrap();
    assert!(lease.takeover_note().is_none());
    let mut second = Store::open(path).unwrap();
    let err = second.lease_run(id).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, smtlab_store::LeaseError::Held { .. }),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("pid {}", std::process::id())),
        "{msg}"
    );
    assert!(msg.contains(&smtlab_store::this_host()), "{msg}");
    assert_eq!(msg.lines().count(), 1);
    // A live holder on another machine is refused as well.
    drop(lease);
    b.foreign_lease(id, 1, "elsewhere", Duration::from_secs(2));
    let msg = second.lease_run(id).unwrap_err().to_string();
    assert!(msg.contains("pid 1 on elsewhere"), "{msg}");
}

fn a_stale_lease_is_taken_over_with_a_note(b: &Backend) {
    let id = unleased_run(b);
    let path = b.target.as_str();
    let mut store = Store::open(path).unwrap();
    // Same host, the process is gone (killed): stale at once.
    let dead = a_dead_pid();
    b.foreign_lease(id, dead, &smtlab_store::this_host(), Duration::ZERO);
    let lease = store.lease_run(id).unwrap();
    let note = lease.takeover_note().expect("a takeover is told");
    assert!(
        note.contains(&format!("pid {dead}")) && note.contains("gone"),
        "{note}"
    );
    drop(lease);
    // Another host, no heartbeat for longer than the limit.
    let old = smtlab_store::LEASE_STALE_AFTER + Duration::from_secs(60);
    b.foreign_lease(id, 1, "elsewhere", old);
    let lease = store.lease_run(id).unwrap();
    let note = lease.takeover_note().unwrap();
    assert!(
        note.contains("elsewhere") && note.contains("no heartbeat"),
        "{note}"
    );
    let pid = std::process::id();
    let held = format!("SELECT count(*) FROM leases WHERE run_id = {id} AND pid = {pid}");
    assert_eq!(b.count(&held), 1);
}

fn a_lease_is_released_on_drop_and_notices_being_taken_over(b: &Backend) {
    let id = unleased_run(b);
    let path = b.target.as_str();
    let mut store = Store::open(path).unwrap();
    let mut lease = store.lease_run(id).unwrap();
    lease.heartbeat().unwrap();
    drop(lease);
    let holders = format!("SELECT host FROM leases WHERE run_id = {id}");
    assert!(b.texts(&holders).is_empty());
    let mut lease = store.lease_run(id).unwrap();
    assert!(
        lease.takeover_note().is_none(),
        "a released lease is no takeover"
    );
    // Someone decided it was stale and took it.
    b.foreign_lease(id, 1, "elsewhere", Duration::ZERO);
    let err = lease.heartbeat().unwrap_err();
    assert!(
        err.to_string().contains("taken over by pid 1 on elsewhere"),
        "{err}"
    );
    drop(lease);
    // Dropping the lost lease leaves the new holder's row alone.
    assert_eq!(b.texts(&holders), ["elsewhere"]);
    assert!(matches!(
        store.lease_run(999).unwrap_err(),
        smtlab_store::LeaseError::Store(StoreError::NoSuchRun { .. })
    ));
}

// ---- labels and deletion ------------------------------------------------------------

fn a_label_names_a_run_while_it_is_unambiguous(b: &Backend) {
    let path = b.target.as_str();
    let mut store = Store::open(path).unwrap();
    let a = store.import_run(&testdata::results(0)).unwrap();
    let b = store.import_run(&testdata::results(0)).unwrap();
    store.set_run_label(a, Some("smt off")).unwrap();
    assert_eq!(store.resolve_run("smt off").unwrap(), a);
    assert_eq!(store.run_label(a).unwrap().as_deref(), Some("smt off"));
    assert_eq!(store.run_label(b).unwrap(), None);
    let listed: Vec<Option<String>> = store
        .list_runs()
        .unwrap()
        .into_iter()
        .map(|r| r.label)
        .collect();
    assert_eq!(listed, [Some("smt off".to_string()), None]);
    store.set_run_label(b, Some("smt off")).unwrap();
    let err = store.resolve_run("smt off").unwrap_err().to_string();
    assert!(err.contains(&format!("names runs {a}, {b}")), "{err}");
    // Ids keep their meaning: labels that would read as one are refused.
    for bad in ["12", "#3", "-2", "latest", "", " x", "a\nb", "r.json"] {
        let err = store.set_run_label(a, Some(bad)).unwrap_err().to_string();
        assert!(err.contains("label"), "{bad:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert_eq!(store.resolve_run(&b.to_string()).unwrap(), b);
}

#[test]
fn a_version_4_file_gains_labels_and_reads_without_them_when_read_only() {
    let (_dir, path) = temp_db();
    let id = Store::open(&path)
        .unwrap()
        .import_run(&testdata::results(0))
        .unwrap();
    let conn = raw(&path);
    conn.execute_batch(
        "DROP INDEX runs_by_uid; ALTER TABLE runs DROP COLUMN uid;
         DROP INDEX runs_by_host; ALTER TABLE runs DROP COLUMN host_id;
         ALTER TABLE runs DROP COLUMN label; PRAGMA user_version = 4;",
    )
    .unwrap();
    drop(conn);
    let ro = Store::open_read_only(&path).unwrap();
    assert_eq!(ro.list_runs().unwrap()[0].label, None);
    let err = ro.resolve_run("anything").unwrap_err().to_string();
    assert!(err.contains("anything"), "{err}");
    drop(ro);
    let mut store = Store::open(&path).unwrap();
    store.set_run_label(id, Some("before")).unwrap();
    assert_eq!(store.resolve_run("before").unwrap(), id);
}

fn deleting_runs_takes_everything_under_them_and_spares_the_others(db: &Backend) {
    let mut store = db.open();
    let a = store.import_run(&testdata::results(0)).unwrap();
    let b = store.import_run(&testdata::results(0)).unwrap();
    let count = |table: &str, run: i64| -> i64 {
        db.count(&match table {
            "samples" | "summaries" | "series" | "rounds" => format!(
                "SELECT count(*) FROM {table} WHERE cell_id IN (SELECT id FROM cells WHERE run_id = {run})"
            ),
            _ => format!("SELECT count(*) FROM {table} WHERE run_id = {run}"),
        })
    };
    let tables = [
        "cells",
        "plan",
        "skipped",
        "samples",
        "summaries",
        "series",
        "rounds",
    ];
    for t in tables {
        assert!(count(t, a) > 0, "the fixture has {t}");
    }
    let err = store.delete_runs(&[a, 99]).unwrap_err().to_string();
    assert!(err.contains("no run 99"), "{err}");
    assert_eq!(
        count("cells", a),
        count("cells", b),
        "nothing deleted on error"
    );
    store.delete_runs(&[a]).unwrap();
    for t in tables {
        assert_eq!(count(t, a), 0, "{t} of the deleted run");
        assert!(count(t, b) > 0, "{t} of the other run");
    }
    assert_eq!(
        store
            .list_runs()
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect::<Vec<_>>(),
        [b]
    );
    store.check_integrity().unwrap();
}

fn a_run_measured_by_a_live_process_is_not_deleted(b: &Backend) {
    let path = b.target.as_str();
    let mut store = Store::open(path).unwrap();
    let a = store.import_run(&testdata::results(0)).unwrap();
    let b = store.import_run(&testdata::results(0)).unwrap();
    let lease = store.lease_run(a).unwrap();
    let mut other = Store::open(path).unwrap();
    let err = other.delete_runs(&[b, a]).unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "run {a} is being measured by process {}",
            std::process::id()
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
    assert_eq!(other.list_runs().unwrap().len(), 2, "all or nothing");
    drop(lease);
    // A lease whose holder is gone does not protect the run.
    let dead = store.lease_run_as(b, u32::MAX / 2, &smtlab_store::this_host());
    drop(dead);
    other.delete_runs(&[a, b]).unwrap();
    assert!(other.list_runs().unwrap().is_empty());
}

// ---- cell conditions ------------------------------------------------------------------

fn typed_conditions_are_stored_flat_as_before_and_come_back_typed(b: &Backend) {
    use smtlab_model::keys::{Conditions, Form, OfferedRate, SmtState};
    let mut results = testdata::results(0);
    results.cells[0].conditions = Conditions::smt(SmtState::On);
    results.cells[1].conditions = Conditions {
        form: Some(Form::Sibling),
        partner: Some("int-ops".into()),
        ..Conditions::default()
    };
    results.run.plan = results.cells.iter().map(CellRecord::key).collect();
    results.skipped[0].key.conditions.rate = Some(OfferedRate::Percent(50));
    results.run.plan.push(results.skipped[0].key.clone());
    let id = b.open().import_run(&results).unwrap();
    assert_eq!(
        Store::open_existing(&b.target)
            .unwrap()
            .load_run(id)
            .unwrap(),
        with_id(results.clone(), id)
    );
    // The column holds what versions before typed conditions wrote and read.
    let cells = b.texts("SELECT params FROM cells ORDER BY id");
    assert_eq!(cells[0], r#"{"size":"1GiB","smt":"on"}"#);
    assert_eq!(
        cells[1],
        r#"{"corun_form":"sibling","corun_partner":"int-ops","size":"1GiB"}"#
    );
    let skipped = b.texts("SELECT params FROM skipped");
    assert_eq!(skipped, [r#"{"rate_pct":"50","size":"1GiB"}"#]);
}

fn rows_written_before_conditions_were_typed_read_them_typed_and_resume(db: &Backend) {
    use smtlab_model::keys::{Form, OfferedRate, SmtState};
    let mut results = testdata::results(0);
    // An interrupted run: the last planned cell was not measured.
    results.run.status = RunStatus::Interrupted;
    let pending = results.cells.pop().unwrap().key();
    let id = db.open().import_run(&results).unwrap();
    // Rewrite rows as an older smtlab stored them: conditions among the parameters.
    db.exec(
        r#"UPDATE cells SET params = '{"size":"1GiB","smt":"on"}' WHERE id = 1;
           UPDATE plan SET params = '{"size":"1GiB","smt":"on"}' WHERE position = 0;
           UPDATE cells SET params = '{"corun_form":"cores","corun_partner":"none","rate_pct":"max","size":"1GiB"}' WHERE id = 2;
           UPDATE plan SET params = '{"corun_form":"cores","corun_partner":"none","rate_pct":"max","size":"1GiB"}' WHERE position = 1;"#,
    );
    let loaded = Store::open_existing(&db.target)
        .unwrap()
        .load_run(id)
        .unwrap();
    let (a, b) = (&loaded.cells[0], &loaded.cells[1]);
    assert_eq!(a.smt(), Some(SmtState::On));
    assert_eq!(a.params, BTreeMap::from([("size".into(), "1GiB".into())]));
    assert_eq!(b.conditions.form, Some(Form::Cores));
    assert_eq!(b.conditions.partner.as_deref(), Some("none"));
    assert_eq!(b.conditions.rate, Some(OfferedRate::Max));
    assert_eq!(b.params.len(), 1);
    assert_eq!(loaded.run.plan[0], a.key());
    assert_eq!(loaded.run.plan[1], b.key());
    // What `run --resume` measures: the plan less what is stored, old rows matched.
    let store = db.open();
    assert_eq!(store.pending_cells(id).unwrap(), vec![pending]);
}

// ---- push ----------------------------------------------------------------------------

fn a_run_pushed_while_interrupted_gets_the_rest_when_pushed_again(to: &Backend) {
    let (_dir, from) = temp_db();
    let mut src = Store::open(&from).unwrap();
    let whole = testdata::results(0);
    assert!(whole.cells.len() >= 2, "the fixture has cells to split");
    let mut meta = whole.run.clone();
    meta.status = RunStatus::Running;
    meta.finished_unix_s = None;
    let id = src.create_run(&meta).unwrap();
    src.save_cell(id, &whole.cells[0]).unwrap();
    src.mark_interrupted(id).unwrap();
    let mut dst = to.open();
    assert_eq!(src.push_plan(Some(&dst)).unwrap().missing, [id]);
    assert_eq!(src.push_plan(None).unwrap().missing, [id]);
    let first = src.push_to(&mut dst).unwrap();
    let [(_, tid)] = first.pushed[..] else {
        panic!("{first:?}")
    };
    assert_eq!(dst.cells_stored(tid).unwrap(), 1);
    // Resumed and finished here, then pushed again: the rest arrives, once.
    for cell in &whole.cells[1..] {
        src.save_cell(id, cell).unwrap();
    }
    for s in &whole.skipped {
        src.save_skipped(id, s).unwrap();
    }
    src.finish_run(id, RunStatus::Finished, 1_700_000_999)
        .unwrap();
    let plan = src.push_plan(Some(&dst)).unwrap();
    assert_eq!((plan.completed, plan.missing), (vec![(id, tid)], vec![]));
    assert_eq!(
        dst.cells_stored(tid).unwrap(),
        1,
        "a dry run writes nothing"
    );
    let second = src.push_to(&mut dst).unwrap();
    assert_eq!(second.completed, [(id, tid)], "{second:?}");
    assert_eq!(
        dst.load_run(tid).unwrap(),
        with_id(src.load_run(id).unwrap(), tid)
    );
    let third = src.push_to(&mut dst).unwrap();
    assert_eq!((third.present, third.completed), (vec![id], vec![]));
    assert_eq!(src.push_plan(Some(&dst)).unwrap().present, [id]);
    assert_eq!(dst.list_runs().unwrap().len(), 1);
}

fn pushing_a_file_twice_into_another_stores_each_run_once(from: &Backend) {
    // From either backend into a file (`pg::pushing_twice_stores_each_run_once` pushes
    // into PostgreSQL).
    let (_dir2, to) = temp_db();
    let mut src = from.open();
    let a = src.import_run(&testdata::results(0)).unwrap();
    let b = src.import_run(&testdata::results(0)).unwrap();
    src.set_run_label(a, Some("smt on")).unwrap();
    let mut dst = Store::open(&to).unwrap();
    let first = src.push_to(&mut dst).unwrap();
    assert_eq!(first.pushed, [(a, 1), (b, 2)]);
    let again = src.push_to(&mut dst).unwrap();
    assert!(again.pushed.is_empty());
    assert_eq!(again.present, [a, b]);
    assert_eq!(dst.list_runs().unwrap().len(), 2);
    assert_eq!(dst.resolve_run("smt on").unwrap(), 1);
    assert_eq!(
        dst.load_run(2).unwrap(),
        with_id(src.load_run(b).unwrap(), 2)
    );
    // Importing the same JSON twice is two runs: each import gets its own key.
    assert_ne!(src.run_uid(a).unwrap(), src.run_uid(b).unwrap());

    // A run being measured is left for a later push.
    let mut meta = testdata::results(0).run;
    meta.status = RunStatus::Running;
    let c = src.create_run(&meta).unwrap();
    let _lease = src.lease_run(c).unwrap();
    let third = src.push_to(&mut dst).unwrap();
    assert_eq!(third.running, [c]);
    assert_eq!(dst.list_runs().unwrap().len(), 2);
}

#[test]
fn an_old_file_keeps_one_run_key_whether_read_only_or_upgraded() {
    let (_dir, path) = temp_db();
    version_1_file_of_results_0(&path);
    let ro = Store::open_read_only(&path).unwrap();
    let key = ro.run_uid(1).unwrap();
    assert_eq!(key.len(), 32);
    let (_dir2, to) = temp_db();
    let mut dst = Store::open(&to).unwrap();
    assert_eq!(ro.push_to(&mut dst).unwrap().pushed.len(), 1);
    drop(ro);
    // Upgrading stores the same key, so pushing the upgraded file adds nothing.
    let upgraded = Store::open(&path).unwrap();
    assert_eq!(upgraded.run_uid(1).unwrap(), key);
    let again = upgraded.push_to(&mut dst).unwrap();
    assert_eq!(again.present, [1]);
    assert_eq!(dst.list_runs().unwrap().len(), 1);
}
