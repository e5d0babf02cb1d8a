//! What smtlab leaves and says when things go wrong around it: a `bench` stopped by a
//! signal ends like `run` (128 plus the signal, nothing blamed on the workload), scratch
//! whose owner died is swept at every start, and a path argument is quoted short and on
//! one line in errors.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use smtlab_fixtures::bounded;

fn smtlab() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("smtlab"))
}

/// The scratch directories named `prefix*` under `dir`.
fn scratch_in(dir: &Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[test]
fn a_bench_stopped_by_a_signal_exits_like_run_and_blames_nothing() {
    smtlab_fixtures::signals::deliverable();
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let tmp = tempfile::tempdir().unwrap();
        let child = smtlab()
            .args(["bench", "web-static", "-p", "1c1t"])
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The file set is made once the settings are done and the handlers installed:
        // the signal then falls in the middle of the measurement.
        let t0 = Instant::now();
        while scratch_in(tmp.path(), "smtlab-web-").is_empty() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "no file set after 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: kill(2) on our own child's pid, not yet waited for.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        let out = bounded::output(child, "the stopped bench");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "signal {sig}: {err}");
        assert!(!err.contains("failed"), "signal {sig}: {err}");
        assert!(err.contains("interrupted by SIG"), "signal {sig}: {err}");
        assert_eq!(
            scratch_in(tmp.path(), "smtlab-"),
            Vec::<String>::new(),
            "signal {sig}: scratch left"
        );
    }
}

#[test]
fn scratch_of_a_dead_owner_is_swept_as_any_smtlab_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    bounded::wait(&mut gone, "true");
    let stale = tmp.path().join(format!("smtlab-dbench-{dead}-0"));
    std::fs::create_dir_all(stale.join("clients/1")).unwrap();
    std::fs::write(stale.join("owner"), format!("{dead} 1\n")).unwrap();
    // A command of another kind, which makes no scratch of its own.
    let out = smtlab()
        .args(["list"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!stale.exists(), "a dead owner's dbench scratch survived");
}

#[test]
fn errors_quote_a_path_argument_short_escaped_and_once() {
    let tmp = tempfile::tempdir().unwrap();
    // A 5,000-byte path with a newline in it, under a file (so nothing can be created).
    let file = tmp.path().join("f");
    std::fs::write(&file, b"").unwrap();
    let long = file.join(format!("a\nb{}", "x".repeat(5000)));
    let out = smtlab()
        .arg("runs")
        .arg("--db")
        .arg(&long)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.len() < 400, "{} bytes: {err}", err.len());

    let root = tmp.path().join("no-such-root");
    let out = smtlab()
        .arg("topo")
        .arg("--sysfs")
        .arg(&root)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("no-such-root").count(), 1, "{err}");
}

#[test]
fn an_exec_stopped_by_a_signal_blames_nothing_and_stores_nothing_unmeasured() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("r.db");
    let started = tmp.path().join("started");
    let script = format!("touch {}; sleep 0.5", started.display());
    let child = smtlab()
        .args(["exec", "--reps", "20", "--warmup", "0", "--db"])
        .arg(&db)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !started.exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "no run after 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child's pid, not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = bounded::output(child, "the stopped exec");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert!(err.contains("interrupted by SIGTERM: 0 cells"), "{err}");
    assert!(!err.contains("error"), "{err}");
    assert!(!db.exists(), "an empty run was stored: {err}");
}

/// The runs of `report --json` and `runs --json` for the store at `db`.
fn stored(db: &Path) -> (serde_json::Value, serde_json::Value) {
    let json = |args: &[&str]| {
        let out = smtlab().args(args).arg("--db").arg(db).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    (json(&["runs", "--json"]), json(&["report", "--json"]))
}

#[test]
fn an_exec_keeps_each_placement_as_it_is_measured_when_a_later_one_is_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("r.db");
    let (count, second) = (tmp.path().join("count"), tmp.path().join("second"));
    // Two quick runs on the first placement, then the second placement's run waits.
    let script = format!(
        "echo x >> {c}; if [ $(wc -l < {c}) -gt 2 ]; then touch {s}; sleep 30; fi",
        c = count.display(),
        s = second.display()
    );
    let child = smtlab()
        .args(["exec", "--reps", "2", "--warmup", "0"])
        .args(["--placements", "1c1t,2c1t", "--db"])
        .arg(&db)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !second.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no second placement"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Before the stop, the first placement is in the store already.
    let (runs, report) = stored(&db);
    assert_eq!(runs[0]["status"], "running", "{runs}");
    assert_eq!(report["cells"].as_array().unwrap().len(), 1, "{report}");
    // SAFETY: kill(2) on our own child's pid, not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = bounded::output(child, "the stopped exec");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{err}");
    let (runs, report) = stored(&db);
    assert_eq!(runs[0]["status"], "interrupted", "{runs}");
    assert_eq!(runs[0]["suite"], "exec", "{runs}");
    assert_eq!(report["cells"][0]["placement"]["name"], "1c1t", "{report}");
}

#[test]
fn bench_stores_each_cell_with_db_and_nothing_without() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("r.db");
    let bench = |db: Option<&Path>| {
        let mut cmd = smtlab();
        cmd.args(["bench", "null-syscall", "-p", "1c1t,2c1t", "--quick"])
            .args(["--max-samples", "3", "--json"])
            .env("SMTLAB_DB", tmp.path().join("default.db"));
        if let Some(db) = db {
            cmd.arg("--db").arg(db);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (json, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (json, err) = bench(Some(&db));
    assert_eq!(json["run"]["id"], 1, "{json}");
    assert!(err.contains("saved as run 1"), "{err}");
    let (runs, report) = stored(&db);
    assert_eq!(runs[0]["suite"], "bench", "{runs}");
    assert_eq!(runs[0]["status"], "finished", "{runs}");
    assert_eq!(report["cells"].as_array().unwrap().len(), 2, "{report}");
    // The stored cells are the ones shown, figure for figure.
    for i in 0..2 {
        assert_eq!(
            report["cells"][i]["result"]["summary"]["mean"],
            json["cells"][i]["result"]["summary"]["mean"]
        );
    }
    let (json, err) = bench(None);
    assert_eq!(json["run"]["id"], 0, "{json}");
    assert!(!err.contains("saved as run"), "{err}");
    assert!(!tmp.path().join("default.db").exists());
}
