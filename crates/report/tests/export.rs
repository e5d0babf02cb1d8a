//! The exporters on a run that went through the results database and back: the JSON
//! parses back into the loaded run and imports again; the CSV is pinned by a snapshot.

use std::path::PathBuf;

use smtlab_model::RunResults;
use smtlab_report::export;
use smtlab_store::Store;

// The store's fixture; one copy serves the store's tests and these.
#[path = "../../store/tests/store/testdata.rs"]
mod testdata;

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.db");
    (dir, path)
}

fn with_id(mut results: RunResults, id: i64) -> RunResults {
    results.run.id = id;
    results
}

#[test]
fn json_export_parses_back_into_the_loaded_run() {
    let (_dir, path) = temp_db();
    let mut store = Store::open(&path).unwrap();
    let id = store.import_run(&testdata::results(0)).unwrap();
    let loaded = store.load_run(id).unwrap();
    let bytes = export::json(&loaded);
    let back: RunResults = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back, loaded);
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(value["schema"], "smtlab.results/1");
    assert_eq!(
        value["cells"][1]["placement"]["cpus"],
        serde_json::json!([0, 2])
    );
    // And JSON can be imported again as a new run.
    let again = store.import_run(&back).unwrap();
    assert_eq!(store.load_run(again).unwrap(), with_id(loaded, again));
}

#[test]
fn csv_export_snapshot() {
    let text = String::from_utf8(export::csv(&testdata::results(1))).unwrap();
    insta::assert_snapshot!("csv_export", text);
}
