//! A run that lives in PostgreSQL end to end: `smtlab run --db postgresql://...`, then
//! `runs` and `report` read it back, and `smtlab push` uploads a local file once
//! however often it is pushed. Against a throw-away server the test starts (initdb
//! into a temporary directory, reached over its private socket, stopped when the test
//! ends, panics included); skipped where PostgreSQL is missing, failed there under
//! `SMTLAB_REQUIRE_TOOLS=1`.

mod common;

use assert_cmd::Command;
use serde_json::Value;

fn smtlab() -> Command {
    Command::cargo_bin("smtlab").expect("the smtlab binary is built")
}

fn json_of(cmd: &mut Command) -> Value {
    let out = cmd.assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).expect("stdout is JSON")
}

fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(out).expect("stdout is UTF-8")
}

#[test]
fn a_run_lives_in_postgresql_and_push_stores_a_file_once() {
    let Some((_server, url)) = common::pg_server("PostgreSQL store") else {
        return;
    };
    let run = |db: &str| {
        smtlab()
            .args(["run", "--suite", "quick", "--bench", "null-syscall"])
            .args(["--placements", "1c1t", "--db", db])
            .assert()
            .success()
            .get_output()
            .clone()
    };
    let out = run(&url);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("run 1 finished"), "{stderr}");

    let runs = json_of(smtlab().args(["runs", "--json", "--db", &url]));
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "finished");
    assert_eq!(runs[0]["cells_done"], 1);
    let report = json_of(smtlab().args(["report", "latest", "--json", "--db", &url]));
    assert_eq!(report["cells"][0]["benchmark"], "null-syscall");
    assert!(
        report["cells"][0]["result"]["samples"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    );
    let table = stdout_of(smtlab().args(["report", "--db", &url]));
    assert!(table.contains("null-syscall"), "{table}");

    // A local file pushed twice is stored once.
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("r.db");
    run(local.to_str().unwrap());
    let first = stdout_of(smtlab().arg("push").arg(&local).args(["--to", &url]));
    assert!(first.contains("pushed 1 run to"), "{first}");
    assert!(first.contains("run 1 -> run 2"), "{first}");
    let again = json_of(
        smtlab()
            .arg("push")
            .arg(&local)
            .args(["--to", &url, "--json"]),
    );
    assert_eq!(again["pushed"], serde_json::json!([]));
    assert_eq!(again["already_there"], serde_json::json!([1]));
    // SMTLAB_DB names the database as --db does.
    let runs = json_of(smtlab().args(["runs", "--json"]).env("SMTLAB_DB", &url));
    assert_eq!(runs.as_array().unwrap().len(), 2);
    let pushed = json_of(smtlab().args(["report", "2", "--json", "--db", &url]));
    let original = json_of(smtlab().args(["report", "1", "--json", "--db"]).arg(&local));
    assert_eq!(pushed["cells"], original["cells"]);
    assert_eq!(pushed["run"]["environment"], original["run"]["environment"]);
}

/// Three `smtlab run` processes write into one database at once (as three hosts would):
/// three runs, each with its own cell, none lost, none mixed.
#[test]
fn runs_from_several_processes_at_once_are_all_stored_apart() {
    let Some((_server, url)) = common::pg_server("PostgreSQL store") else {
        return;
    };
    let bin = assert_cmd::cargo::cargo_bin("smtlab");
    let children: Vec<_> = (0..3)
        .map(|i| {
            std::process::Command::new(&bin)
                .args(["run", "--suite", "quick", "--bench", "null-syscall"])
                .args(["--placements", "1c1t", "--quiet", "--db", &url])
                .args(["--label", &format!("writer-{i}")])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = smtlab_fixtures::bounded::output(c, "the smtlab process");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let runs = json_of(smtlab().args(["runs", "--json", "--db", &url]));
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3);
    let mut labels: Vec<&str> = runs.iter().map(|r| r["label"].as_str().unwrap()).collect();
    labels.sort();
    assert_eq!(labels, ["writer-0", "writer-1", "writer-2"]);
    for r in runs {
        assert_eq!(r["status"], "finished", "{r}");
        assert_eq!(r["cells_done"], 1, "{r}");
        let label = r["label"].as_str().unwrap();
        // The label resolves to this run, and its one cell is its own.
        let report = json_of(smtlab().args(["report", label, "--json", "--db", &url]));
        assert_eq!(report["run"]["id"], r["id"]);
        assert_eq!(report["cells"].as_array().unwrap().len(), 1);
    }
}

/// `kill -9` of a run writing into PostgreSQL keeps its saved cells; `run --resume`
/// takes over the dead process's lease and measures only what is left.
#[test]
fn a_killed_run_keeps_its_cells_in_postgresql_and_resumes() {
    let Some((_server, url)) = common::pg_server("PostgreSQL store") else {
        return;
    };
    let bin = assert_cmd::cargo::cargo_bin("smtlab");
    let mut child = std::process::Command::new(&bin)
        .args(["run", "--bench", "null-syscall,read,write,fstat"])
        .args(["--placements", "1c1t,2c1t", "--db", &url])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut done = 0;
    while done == 0 && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if let Ok(out) = std::process::Command::new(&bin)
            .args(["runs", "--json", "--db", &url])
            .output()
            && let Ok(v) = serde_json::from_slice::<Value>(&out.stdout)
        {
            done = v[0]["cells_done"].as_u64().unwrap_or(0);
        }
    }
    child.kill().unwrap();
    smtlab_fixtures::bounded::wait(&mut child, "the child process");
    assert!(done >= 1, "a first cell was saved before the kill");
    let runs = json_of(smtlab().args(["runs", "--json", "--db", &url]));
    let saved = runs[0]["cells_done"].as_u64().unwrap();
    assert!(saved >= done);
    if saved < 8 {
        assert_eq!(runs[0]["status"], "interrupted");
    }
    smtlab()
        .args(["run", "--resume", "--db", &url])
        .assert()
        .success();
    let runs = json_of(smtlab().args(["runs", "--json", "--db", &url]));
    assert_eq!(runs.as_array().unwrap().len(), 1, "resumed, not restarted");
    assert_eq!(runs[0]["status"], "finished");
    assert_eq!(runs[0]["cells_done"], 8);
}

#[test]
fn an_unreachable_database_is_a_one_line_error_naming_it_without_its_password() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("postgresql://me:secret@127.0.0.1:{port}/results");
    let out = smtlab()
        .args(["runs", "--db", &url])
        .assert()
        .failure()
        .get_output()
        .clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("postgresql://me:***@127.0.0.1:{port}/results")),
        "{err}"
    );
    assert!(!err.contains("secret"), "{err}");
}

#[test]
fn a_password_in_the_url_is_never_printed_or_stored() {
    let Some((_server, url)) = common::pg_server("PostgreSQL password redaction") else {
        return;
    };
    // The throw-away server trusts its socket, so any password gets in.
    let with_password = url.replacen("smtlab@", "smtlab:s3cret-pw@", 1);
    assert_ne!(with_password, url);
    let out = smtlab()
        .args(["run", "--suite", "quick", "--bench", "null-syscall"])
        .args(["--placements", "1c1t", "--db", &with_password])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("run 1 finished"), "{stderr}");
    assert!(
        !stderr.contains("s3cret-pw") && stderr.contains(":***@"),
        "{stderr}"
    );
    let report = stdout_of(smtlab().args(["report", "latest", "--json", "--db", &url]));
    assert!(!report.contains("s3cret-pw"), "{report}");
    assert!(
        report.contains("smtlab:***@"),
        "the command line as stored: {report}"
    );
    let runs = stdout_of(smtlab().args(["runs", "--db", &with_password]));
    assert!(!runs.contains("s3cret-pw"), "{runs}");
}

/// The most sessions named `smtlab` the server held while `args` ran.
fn most_sessions_during(url: &str, args: &[&str]) -> i64 {
    let mut watch = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("smtlab"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut most = 0;
    let status = loop {
        let n: i64 = watch
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'smtlab'",
                &[],
            )
            .unwrap()
            .get(0);
        most = most.max(n);
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(status.success(), "{args:?}: {status}");
    most
}

#[test]
fn a_run_holds_one_connection_to_the_database() {
    let Some((_server, url)) = common::pg_server("PostgreSQL connections") else {
        return;
    };
    let run = ["run", "--suite", "quick", "--bench", "null-syscall"];
    let args = [
        &run[..],
        &["--placements", "1c1t", "--repeat", "3", "--db", &url],
    ]
    .concat();
    assert_eq!(most_sessions_during(&url, &args), 1);
}

#[test]
fn a_dry_run_push_says_what_it_would_copy_and_copies_nothing() {
    let Some((_server, url)) = common::pg_server("PostgreSQL push --dry-run") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("r.db");
    let measure = || {
        smtlab()
            .args(["run", "--suite", "quick", "--bench", "null-syscall"])
            .args(["--placements", "1c1t", "--db"])
            .arg(&local)
            .assert()
            .success();
    };
    let push = |to: &str, more: &[&str]| {
        let mut cmd = smtlab();
        cmd.arg("push").arg(&local).args(["--to", to]).args(more);
        stdout_of(&mut cmd)
    };
    measure();
    // Nothing there yet: no schema, and the dry run creates none.
    let first: Value = serde_json::from_str(&push(&url, &["--dry-run", "--json"])).unwrap();
    assert_eq!(first["would_push"], serde_json::json!([1]));
    assert_eq!(first["pushed"], serde_json::json!([]));
    smtlab().args(["runs", "--db", &url]).assert().failure();
    let none = dir.path().join("none.db");
    let to_file: Value =
        serde_json::from_str(&push(none.to_str().unwrap(), &["--dry-run", "--json"])).unwrap();
    assert_eq!(to_file["would_push"], serde_json::json!([1]));
    assert!(!none.exists());
    // One run there, one not: told apart, and still nothing copied.
    push(&url, &[]);
    measure();
    let text = push(&url, &["--dry-run"]);
    assert!(text.contains("dry run: would push 1 run to"), "{text}");
    assert!(text.contains("(2); 1 already there"), "{text}");
    let runs = json_of(smtlab().args(["runs", "--json", "--db", &url]));
    assert_eq!(runs.as_array().unwrap().len(), 1);
}

#[test]
fn the_password_file_named_by_pgpassfile_is_read() {
    let Some((server, url)) = common::pg_server("PostgreSQL PGPASSFILE") else {
        return;
    };
    // The socket directory matches as localhost; a file others can read is refused by
    // name, which shows it was found and matched (the test server trusts its socket,
    // so a password taken would not show).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pgpass");
    let line = format!("localhost:{}:postgres:smtlab:pw-from-file\n", server.port());
    std::fs::write(&file, line).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = smtlab()
        .args(["runs", "--db", &url])
        .env("PGPASSFILE", &file)
        .assert()
        .failure()
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("group or others can read it"), "{stderr}");
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert!(!stderr.contains("pw-from-file"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    smtlab()
        .args([
            "run",
            "--suite",
            "quick",
            "--bench",
            "null-syscall",
            "--placements",
            "1c1t",
        ])
        .args(["--db", &url])
        .env("PGPASSFILE", &file)
        .assert()
        .success();
}
