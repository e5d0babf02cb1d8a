//! Many hosts, one store: runs of made-up hosts (`smtlab_fixtures::fleet`) are written
//! to one results file per host, pushed with `smtlab push` into one shared store
//! (SQLite, and PostgreSQL where it is installed), and `smtlab fleet` pools them per
//! CPU model; the deploy/ playbook is run against network-namespace hosts (see
//! `deploy_playbook_*`).

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;
use smtlab_fixtures::fleet::{FakeHost, run};
use smtlab_fixtures::require;
use smtlab_store::Store;
use smtlab_workloads::db::pg::{DB_USER, PgInstall, PgServer, PgSettings};

fn smtlab() -> Command {
    Command::cargo_bin("smtlab").expect("the smtlab binary is built")
}

fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(out).expect("stdout is UTF-8")
}

/// A fresh PostgreSQL server and the URL of its `postgres` database over its private
/// socket, or `None` where PostgreSQL is missing (a failure under
/// `SMTLAB_REQUIRE_TOOLS=1`).
fn pg_server(what: &str) -> Option<(PgServer, String)> {
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

const A: &str = "Demo Xeon A @ 2.0GHz";
const B: &str = "Demo EPYC B";

/// Seven hosts of model A (`a7` far below, older microcode) and three of model B, each
/// in its own results file under `dir`.
fn host_files(dir: &Path) -> Vec<PathBuf> {
    let mut hosts: Vec<FakeHost> = [1.20, 1.22, 1.21, 1.19, 1.23, 1.20, 0.95]
        .iter()
        .enumerate()
        .map(|(i, &y)| FakeHost::new(&format!("a{}", i + 1), A, y))
        .collect();
    hosts[6].microcode = "0x2a".into();
    for (i, y) in [1.05, 1.07, 1.06].iter().enumerate() {
        let mut b = FakeHost::new(&format!("b{}", i + 1), B, *y);
        b.packages = 2;
        b.cores = 8;
        hosts.push(b);
    }
    hosts
        .iter()
        .map(|h| {
            let path = dir.join(format!("{}.db", h.hostname));
            let mut store = Store::open(&path).expect("open a host's file");
            store.import_run(&run(h)).expect("store the host's run");
            path
        })
        .collect()
}

/// What the fleet view must say of these hosts, whichever store holds them.
fn check_fleet_json(v: &Value) {
    assert_eq!(v["schema"], "smtlab.fleet/1");
    assert_eq!(v["hosts"].as_array().unwrap().len(), 10);
    let models = v["models"].as_array().unwrap();
    let names: Vec<&str> = models
        .iter()
        .map(|m| m["cpu_model"].as_str().unwrap())
        .collect();
    assert_eq!(names, [B, A]);
    let a_smt = &models[1]["pools"][0];
    assert_eq!(a_smt["placements"], "1c2t/1c1t");
    assert_eq!(a_smt["hosts"].as_array().unwrap().len(), 7);
    assert!((a_smt["median"].as_f64().unwrap() - 1.20).abs() < 1e-9);
    let outliers: Vec<&str> = a_smt["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["outlier"] == true)
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(outliers, ["a7"]);
    let b_smt = &models[0]["pools"][0];
    assert_eq!(b_smt["hosts"].as_array().unwrap().len(), 3);
    assert!((b_smt["median"].as_f64().unwrap() - 1.06).abs() < 1e-9);
    // Three hosts: too few for an interval, enough for the outlier rule (none here).
    assert!(b_smt["ci_low"].is_null());
    assert!(
        b_smt["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["outlier"] == false)
    );
}

#[test]
fn fleet_pools_pushed_runs_per_cpu_model_and_names_the_outlier_host() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared.db");
    let files = host_files(dir.path());
    for f in &files {
        smtlab()
            .arg("push")
            .arg(f)
            .arg("--to")
            .arg(&shared)
            .assert()
            .success();
    }
    let v: Value = serde_json::from_str(&stdout_of(
        smtlab().args(["fleet", "--json", "--db"]).arg(&shared),
    ))
    .unwrap();
    check_fleet_json(&v);

    let text = stdout_of(
        smtlab()
            .args(["fleet", "--db"])
            .arg(&shared)
            .env("COLUMNS", "80"),
    );
    for l in text.lines() {
        assert!(l.chars().count() <= 80, "{l:?}");
    }
    assert!(
        text.contains("outlier a7 0.950x: microcode 0x2a (most: 0x2b)"),
        "{text}"
    );
    insta::assert_snapshot!("fleet_terminal", text);

    let only_b = stdout_of(
        smtlab()
            .args(["fleet", "--cpu-model", "epyc", "--db"])
            .arg(&shared),
    );
    assert!(only_b.contains(B) && !only_b.contains(A), "{only_b}");

    let page = dir.path().join("fleet.html");
    smtlab()
        .args(["fleet", "--db"])
        .arg(&shared)
        .arg("-o")
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("a7 0.950x"));
}

#[test]
fn fleet_reads_a_postgresql_store_that_hosts_pushed_to() {
    let Some((_server, url)) = pg_server("fleet over PostgreSQL") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for f in host_files(dir.path()) {
        smtlab()
            .arg("push")
            .arg(&f)
            .args(["--to", &url])
            .assert()
            .success();
    }
    let v: Value =
        serde_json::from_str(&stdout_of(smtlab().args(["fleet", "--json", "--db", &url]))).unwrap();
    check_fleet_json(&v);
}

#[test]
fn fleet_of_a_missing_database_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = smtlab()
        .args(["fleet", "--db"])
        .arg(dir.path().join("none.db"))
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("none.db"), "{err}");
}
