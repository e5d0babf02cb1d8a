//! `smtlab bench app-trade`: the quick cell with the built-in application, and with
//! `server=cmd` running `smtlab-trade` as the user's own application; the books are
//! audited in both (a sample fails otherwise), and nothing of the application or its
//! database runs once smtlab has exited.

use std::process::Command;

use assert_cmd::prelude::*;
use serde_json::Value;

fn smtlab() -> Command {
    Command::cargo_bin("smtlab").expect("the smtlab binary is built")
}

/// Whether PostgreSQL is missing (said, and the test passes; CI installs it and makes a
/// missing tool fail the test).
fn postgres_missing() -> bool {
    let have = std::path::Path::new("/usr/lib/postgresql").is_dir()
        || Command::new("pg_config")
            .arg("--bindir")
            .output()
            .is_ok_and(|o| o.status.success());
    if !have {
        smtlab_fixtures::require::skip("PostgreSQL is not installed (apt-get install postgresql)");
    }
    !have
}

/// Processes whose environment holds `marker` (inherited from the smtlab we started).
fn processes_with(marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if env.split(|&b| b == 0).any(|v| v == marker.as_bytes()) {
            let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            out.push(format!(
                "{name}: {}",
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            ));
        }
    }
    out
}

fn run_cell(extra: &[&str], marker: &str) -> Value {
    let out = smtlab()
        .args([
            "-q",
            "bench",
            "app-trade",
            "--quick",
            "-p",
            "1c1t",
            "--json",
        ])
        .args(["--param", "duration=300ms"])
        .args(extra)
        .env("SMTLAB_APP_TRADE_TEST", marker)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let left = processes_with(&format!("SMTLAB_APP_TRADE_TEST={marker}"));
    assert!(left.is_empty(), "left running: {left:?}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn check_cell(v: &Value) {
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 1, "{v}");
    let cell = &cells[0];
    assert_eq!(cell["benchmark"], "app-trade");
    let samples = cell["result"]["samples"].as_array().expect("samples");
    assert!(!samples.is_empty(), "{cell}");
    for s in samples {
        let m = &s["metrics"];
        assert!(m["transactions_per_s"].as_f64().unwrap() > 0.0, "{s}");
        assert!(m["orders_in_sample"].as_f64().unwrap() > 0.0, "{s}");
        assert!(m["app_cpu_ns_per_tx"].as_f64().unwrap() > 0.0, "{s}");
    }
}

#[test]
fn the_builtin_application_runs_audited_and_leaves_nothing() {
    if postgres_missing() {
        return;
    }
    check_cell(&run_cell(&[], "builtin"));
}

#[test]
fn the_users_own_application_runs_audited_and_leaves_nothing() {
    if postgres_missing() {
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("smtlab-trade");
    let cmd = format!(
        "cmd={} --listen 127.0.0.1:{{port}} --db {{db}} --pool 4",
        bin.display()
    );
    let v = run_cell(&["--param", "server=cmd", "--param", &cmd], "cmd");
    check_cell(&v);
}

/// smtlab killed with SIGKILL mid-sample: the user's application and the database die
/// with it (the guardian kills the application's process tree; the database was asked
/// to die with the thread that started it).
#[test]
fn kill_9_leaves_no_application_or_database_running() {
    if postgres_missing() {
        return;
    }
    let marker = "SMTLAB_APP_TRADE_TEST=kill9";
    let bin = assert_cmd::cargo::cargo_bin("smtlab-trade");
    let mut child = smtlab()
        .args(["-q", "bench", "app-trade", "--quick", "-p", "1c1t"])
        .args([
            "--param",
            "duration=60s",
            "--param",
            "server=cmd",
            "--param",
        ])
        .arg(format!(
            "cmd={} --listen 127.0.0.1:{{port}} --db {{db}}",
            bin.display()
        ))
        .env("SMTLAB_APP_TRADE_TEST", "kill9")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let running = processes_with(marker);
        let app = running.iter().any(|p| p.contains("smtlab-trade --listen"));
        let db = running.iter().any(|p| p.contains("postgres"));
        if app && db {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the application and database did not start: {running:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // Into the load: the sample has started.
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.kill().unwrap();
    smtlab_fixtures::bounded::wait(&mut child, "the child process");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        // Zombies waiting for their reaper are gone for this purpose.
        let left: Vec<String> = processes_with(marker)
            .into_iter()
            .filter(|p| !p.ends_with(": "))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left running after kill -9: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `nfs-sfs server=kernel` where the kernel has no nfsd (this project's machines): the
/// cell is skipped in `run` with the one-line reason, said once before measuring; a run
/// that so stored no cell is no success (it exits non-zero, left interrupted).
#[test]
fn nfs_sfs_without_nfsd_is_skipped_with_the_reason() {
    let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if fs
        .lines()
        .any(|l| l.split_whitespace().last() == Some("nfsd"))
    {
        return;
    }
    let db = tempfile::tempdir().unwrap();
    let out = smtlab()
        .args(["run", "--suite", "quick", "--bench", "nfs-sfs"])
        .args(["--param", "server=kernel", "--db"])
        .arg(db.path().join("r.db"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("stored no cell"), "{stderr}");
    let note = stderr
        .lines()
        .find(|l| l.contains("nfs-sfs: kernel has no nfsd: "))
        .unwrap_or_else(|| panic!("no reason given: {stdout}\n{stderr}"));
    assert!(note.contains("/proc/filesystems"), "{note}");
    // The cell on 1c1t (which has a client side here) says why, under its row.
    assert!(stdout.contains("kernel has no nfsd"), "{stdout}");
}
