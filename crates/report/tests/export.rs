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

#[test]
fn conditions_export_typed_in_json_and_flat_in_csv_as_before() {
    use smtlab_model::keys::{Conditions, Form, SmtState};
    let (_dir, path) = temp_db();
    let mut results = testdata::results(0);
    results.cells[0].conditions = Conditions::smt(SmtState::On);
    results.cells[1].conditions = Conditions {
        form: Some(Form::Cores),
        partner: Some("int-ops".into()),
        ..Conditions::default()
    };
    results.run.plan = results
        .cells
        .iter()
        .map(|c| c.key())
        .chain(results.skipped.iter().map(|s| s.key.clone()))
        .collect();
    let mut store = Store::open(&path).unwrap();
    let id = store.import_run(&results).unwrap();
    let loaded = store.load_run(id).unwrap();
    // JSON: the conditions in their own typed object, not among the parameters.
    let bytes = export::json(&loaded);
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let cell = &value["cells"][0];
    assert_eq!(
        cell["conditions"],
        serde_json::json!({ "smt": "on" }),
        "{cell}"
    );
    assert_eq!(
        cell["params"],
        serde_json::json!({ "size": "1GiB" }),
        "{cell}"
    );
    assert_eq!(
        value["cells"][1]["conditions"],
        serde_json::json!({ "form": "cores", "partner": "int-ops" })
    );
    assert!(value["cells"][2].get("conditions").is_none());
    assert_eq!(value["run"]["plan"][0]["conditions"]["smt"], "on");
    let back: RunResults = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back, loaded);
    // A results file written before conditions were typed (conditions among the
    // parameters) reads back the same.
    let mut old = value.clone();
    old["cells"][0]["params"]["smt"] = "on".into();
    old["cells"][0]
        .as_object_mut()
        .unwrap()
        .remove("conditions");
    let old: RunResults = serde_json::from_value(old).unwrap();
    assert_eq!(old, loaded);
    // CSV: the params column shows the conditions beside the parameters, as it did.
    let csv = String::from_utf8(export::csv(&loaded)).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[1].contains(",size=1GiB;smt=on,"), "{}", lines[1]);
    assert!(
        lines[2].contains(",corun_form=cores;corun_partner=int-ops;size=1GiB,"),
        "{}",
        lines[2]
    );
}
