//! `Store::fleet_runs`: each host's latest runs chosen in SQL, on both backends.

use std::time::Duration;

use smtlab_fixtures::fleet::{FakeHost, run};
use smtlab_model::{RunResults, RunStatus, SampleDigest};
use smtlab_store::{FleetQuery, Store, this_host};

use super::backends::Backend;

/// Host `name`'s run started at `t` on `model`.
fn run_at(name: &str, model: &str, t: u64) -> RunResults {
    let mut h = FakeHost::new(name, model, 1.2);
    h.started_unix_s = t;
    run(&h)
}

/// `(hostname, started)` of the runs `q` hands over, in the order it hands them.
fn picked(store: &Store, q: &FleetQuery) -> (Vec<(String, u64)>, usize) {
    let mut got = Vec::new();
    let scan = store
        .fleet_runs(q, |_, r| {
            got.push((
                r.run.environment.hostname.clone().unwrap_or_default(),
                r.run.started_unix_s,
            ));
        })
        .unwrap();
    assert_eq!(scan.pooled, got.len());
    (got, scan.running)
}

pub fn the_fleet_reads_each_hosts_latest_runs_and_leaves_out_live_ones(b: &Backend) {
    let mut store = b.open();
    for t in [300, 100, 200] {
        store.import_run(&run_at("a", "Xeon 50%", t)).unwrap();
    }
    store.import_run(&run_at("b", "EPYC", 150)).unwrap();
    // b's later run has no cell: it gives the fleet nothing and does not hide the other.
    let mut empty = run_at("b", "EPYC", 400);
    empty.cells.clear();
    store.import_run(&empty).unwrap();
    // b's latest run is being measured by a live process (this one): left out, counted.
    let mut live = run_at("b", "EPYC", 500);
    live.run.status = RunStatus::Running;
    let live_id = store.import_run(&live).unwrap();
    b.foreign_lease(live_id, std::process::id(), &this_host(), Duration::ZERO);
    // A run stored as running whose process is gone counts as interrupted: pooled.
    let mut dead = run_at("c", "EPYC", 50);
    dead.run.status = RunStatus::Running;
    store.import_run(&dead).unwrap();

    let latest = FleetQuery {
        runs_per_host: Some(1),
        ..FleetQuery::default()
    };
    let (got, running) = picked(&store, &latest);
    assert_eq!(
        got,
        [("c".into(), 50), ("b".into(), 150), ("a".into(), 300)]
    );
    assert_eq!(running, 1);

    let two = FleetQuery {
        runs_per_host: Some(2),
        ..FleetQuery::default()
    };
    let (got, _) = picked(&store, &two);
    assert_eq!(
        got,
        [
            ("c".into(), 50),
            ("b".into(), 150),
            ("a".into(), 200),
            ("a".into(), 300)
        ]
    );

    let since = FleetQuery {
        since_unix_s: Some(120),
        ..FleetQuery::default()
    };
    let (got, _) = picked(&store, &since);
    assert_eq!(
        got,
        [("b".into(), 150), ("a".into(), 200), ("a".into(), 300)]
    );

    // The model filter is a plain substring: `%` is a percent sign, not a wildcard.
    let model = |m: &str| FleetQuery {
        cpu_model: Some(m.into()),
        runs_per_host: Some(1),
        ..FleetQuery::default()
    };
    assert_eq!(picked(&store, &model("xeon 50%")).0, [("a".into(), 300)]);
    assert!(picked(&store, &model("xeon 5%0")).0.is_empty());
    assert_eq!(picked(&store, &model("epyc")).0.len(), 2);
}

pub fn the_fleet_reads_cell_digests_never_samples_or_series(b: &Backend) {
    let mut store = b.open();
    let mut original = super::testdata::results(0);
    original.run.environment.hostname = Some("h".into());
    let id = store.import_run(&original).unwrap();
    let mut expected = store.load_run(id).unwrap();
    assert!(
        expected.cells.iter().any(|c| !c.result.series.is_empty()),
        "the fixture has series to leave out"
    );
    expected.run.plan.clear();
    for c in &mut expected.cells {
        for events in c.result.series.values_mut() {
            *events = smtlab_model::digest::series_in_brief(events);
        }
        c.result.samples = SampleDigest::of(&c.result.samples).samples();
    }
    // Without the samples', series' and plan's rows the fleet reads the same: it never
    // reads them (each series comes in brief from the digest).
    b.exec("DELETE FROM samples");
    b.exec("DELETE FROM series");
    b.exec("DELETE FROM plan");
    let fleet_of = |target: &str| {
        let mut got = Vec::new();
        Store::open_read_only(target)
            .unwrap()
            .fleet_runs(&FleetQuery::default(), |_, r| got.push(r))
            .unwrap();
        got
    };
    assert_eq!(fleet_of(&b.target), [expected]);
}

/// A cell saved before digests were kept has its samples' rows read instead, and the
/// fleet view made of it is the same as from a digest.
#[test]
fn a_cell_without_a_digest_has_its_samples_read() {
    let (_dir, path) = super::temp_db();
    let mut store = Store::open(&path).unwrap();
    store.import_run(&run_at("a", "Xeon", 100)).unwrap();
    let with = picked_runs(&store);
    let conn = super::raw(&path);
    let n = conn
        .execute(
            "UPDATE cells SET facts = json_remove(facts, '$.digest')",
            [],
        )
        .unwrap();
    assert!(n > 0);
    drop(conn);
    let without = picked_runs(&Store::open_read_only(&path).unwrap());
    assert_ne!(with, without, "the samples' rows hold more than the digest");
    // What the fleet reads of a cell is the same from either.
    let read = |runs: &[RunResults]| -> Vec<_> {
        runs.iter()
            .flat_map(|r| &r.cells)
            .map(|c| {
                let r = &c.result;
                (r.values(), r.cpus_used(), r.limit(), r.hold_back_reason())
            })
            .collect()
    };
    assert_eq!(read(&with), read(&without));
}

fn picked_runs(store: &Store) -> Vec<RunResults> {
    let mut got = Vec::new();
    store
        .fleet_runs(&FleetQuery::default(), |_, r| got.push(r))
        .unwrap();
    got
}

/// A file of schema 6 (before `runs.host_id` and `runs_by_host`) is read as it is, and
/// gains both when a command that writes opens it.
#[test]
fn a_version_6_file_is_read_as_it_is_and_gains_host_ids_on_upgrade() {
    let (_dir, path) = super::temp_db();
    Store::open(&path)
        .unwrap()
        .import_run(&run_at("a", "Xeon", 100))
        .unwrap();
    let conn = super::raw(&path);
    conn.execute_batch(
        "DROP INDEX runs_by_host; ALTER TABLE runs DROP COLUMN host_id;
         PRAGMA user_version = 6;",
    )
    .unwrap();
    drop(conn);
    let (got, _) = picked(
        &Store::open_read_only(&path).unwrap(),
        &FleetQuery::default(),
    );
    assert_eq!(got, [("a".into(), 100)]);
    drop(Store::open(&path).unwrap());
    let conn = super::raw(&path);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, smtlab_store::SCHEMA_VERSION);
    let index: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index'
             AND name = 'runs_by_host'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(index, 1);
}

/// `(host key, started)` of the runs `q` hands over.
fn keyed(store: &Store, q: &FleetQuery) -> Vec<(String, u64)> {
    let mut got = Vec::new();
    store
        .fleet_runs(q, |host, r| {
            got.push((host.to_string(), r.run.started_unix_s));
        })
        .unwrap();
    got
}

pub fn the_fleet_tells_hosts_apart_by_their_id_and_old_runs_by_their_hostname(b: &Backend) {
    let mut store = b.open();
    let with_id = |name: &str, id: Option<&str>, t: u64| {
        let mut r = run_at(name, "Xeon", t);
        r.run.environment.host_id = id.map(str::to_string);
        r
    };
    // `a` ran once before ids were recorded, then with one id: one host.
    store.import_run(&with_id("a", None, 100)).unwrap();
    store.import_run(&with_id("a", Some("aaaa"), 200)).unwrap();
    // Two machines called `b`, and a run from before ids: which one it was is unknown.
    store.import_run(&with_id("b", None, 100)).unwrap();
    store.import_run(&with_id("b", Some("b111"), 200)).unwrap();
    store.import_run(&with_id("b", Some("b222"), 300)).unwrap();
    assert_eq!(
        b.texts("SELECT host_id FROM runs WHERE host_id IS NOT NULL ORDER BY id"),
        ["aaaa", "b111", "b222"]
    );
    let latest = FleetQuery {
        runs_per_host: Some(1),
        ..FleetQuery::default()
    };
    assert_eq!(
        keyed(&store, &latest),
        [
            ("b".into(), 100),
            ("aaaa".into(), 200),
            ("b111".into(), 200),
            ("b222".into(), 300)
        ]
    );
    let all = keyed(&store, &FleetQuery::default());
    assert_eq!(all[0], ("aaaa".into(), 100), "{all:?}");
}
