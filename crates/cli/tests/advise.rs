//! `smtlab advise` end to end with tiny workloads: a catalog benchmark and the user's
//! own command (with an untimed `--prepare`), the one-line note and the "2 cores vs 1"
//! answer on a machine without SMT, the stored run, the JSON and Markdown, bad input.
//!
//! Every test goes through [`advise`], which takes the machine to run on as a
//! [`Machine`]: [`Machine::Here`] is this host. A fake SMT machine (a saved topology
//! with a fake switch behind a `--fake-machine` flag) is one more variant whose
//! `apply` adds its flag; the assertions ([`answer_of`], [`assert_answer_follows`]) are
//! written against the advice JSON only, so they hold on any machine.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use assert_cmd::prelude::*;
use serde_json::Value;

fn smtlab() -> Command {
    Command::cargo_bin("smtlab").expect("the smtlab binary is built")
}

/// Which machine a test measures.
enum Machine {
    /// This host, as it is.
    Here,
}

impl Machine {
    /// Whether the machine shows SMT siblings.
    fn smt(&self) -> bool {
        match self {
            Machine::Here => smtlab_topology::discover(Path::new("/"))
                .unwrap()
                .smt_visible(),
        }
    }

    /// Cores the machine has.
    fn cores(&self) -> usize {
        match self {
            Machine::Here => smtlab_topology::discover(Path::new("/"))
                .unwrap()
                .core_count(),
        }
    }

    /// Points `cmd` at the machine (nothing for this host).
    fn apply(&self, _cmd: &mut Command) {
        match self {
            Machine::Here => {}
        }
    }
}

/// `smtlab advise ARGS --db DB` on `machine`.
fn advise(machine: &Machine, db: &Path, args: &[&str]) -> Output {
    let mut cmd = smtlab();
    // `--db` first: everything after `--` is the user's command.
    cmd.arg("advise").arg("--db").arg(db).args(args);
    machine.apply(&mut cmd);
    cmd.output().unwrap()
}

fn ok(out: &Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

fn notes(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("note:")).collect()
}

/// The one workload's advice of an `advise --json` output.
fn answer_of(stdout: &str) -> Value {
    let v: Value = serde_json::from_str(stdout).expect("stdout is JSON");
    assert_eq!(v["schema"], "smtlab.advice/1");
    let list = v["advice"].as_array().expect("advice list");
    assert_eq!(list.len(), 1, "{v:#}");
    list[0].clone()
}

/// The recommendation follows the figures: the one the machine allows, every deciding
/// figure named and shown with its interval or said to have none.
fn assert_answer_follows(machine: &Machine, a: &Value) {
    let rec = a["recommendation"].as_str().unwrap();
    let answer = a["answer"].as_str().unwrap();
    let reasons = a["reasons"].as_array().unwrap();
    let deciding: Vec<&Value> = reasons.iter().filter(|r| r["deciding"] == true).collect();
    if !machine.smt() {
        assert_eq!(rec, "no_smt", "{a:#}");
        if machine.cores() >= 2 {
            assert!(
                answer.starts_with("no SMT here (2 cores vs 1: "),
                "{answer}"
            );
            assert_eq!(deciding.len(), 1, "{a:#}");
            assert_eq!(deciding[0]["what"], "2 cores vs 1 (2c1t/1c1t)");
            // The answer quotes the measured figure.
            let shown = deciding[0]["shown"].as_str().unwrap();
            assert!(answer.contains(shown), "{answer} / {shown}");
        }
        return;
    }
    assert!(
        ["keep_on", "turn_off", "depends", "cannot_tell"].contains(&rec),
        "{a:#}"
    );
    let gain = reasons
        .iter()
        .find(|r| r["what"] == "speed-up, sibling added (1c2t/1c1t)")
        .expect("the sibling's gain is measured");
    let f = &gain["figure"];
    let (lo, hi) = (f["ci95_low"].as_f64(), f["ci95_high"].as_f64());
    let steady = f.get("unsteady").is_none();
    match (lo, hi, rec) {
        (Some(lo), _, "keep_on") => assert!(steady && lo > 1.0, "{a:#}"),
        (_, Some(hi), "turn_off") => assert!(steady && hi < 1.0, "{a:#}"),
        (_, _, "cannot_tell") => {
            assert!(!steady || lo.is_none() || (lo.unwrap() <= 1.0 && hi.unwrap() >= 1.0));
        }
        _ => panic!("{rec} does not follow from {f}"),
    }
}

#[test]
fn advise_a_catalog_workload_answers_what_the_machine_allows_and_stores_the_run() {
    let machine = Machine::Here;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let md = dir.path().join("advice.md");
    let md_arg = md.to_str().unwrap();
    let out = advise(
        &machine,
        &db,
        &["int-ops", "--quick", "--json", "--export-markdown", md_arg],
    );
    let (stdout, stderr) = ok(&out);
    let a = answer_of(&stdout);
    assert_answer_follows(&machine, &a);
    let n = notes(&stderr);
    if machine.smt() {
        assert!(n.is_empty(), "{stderr}");
    } else {
        // No SMT: said in one line, and the rest answered.
        assert_eq!(n.len(), 1, "{stderr}");
        assert!(n[0].starts_with("note: no SMT here"), "{stderr}");
        assert!(n[0].contains("2 cores vs 1"), "{stderr}");
    }
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains(a["answer"].as_str().unwrap()), "{md}");
    // The cells went to the store as a run of suite `advise`.
    let run = serde_json::from_str::<Value>(&stdout).unwrap()["run"]
        .as_i64()
        .unwrap();
    let mut report = smtlab();
    report
        .args(["report", &run.to_string(), "--json", "--db"])
        .arg(&db);
    let stored: Value = serde_json::from_slice(&report.output().unwrap().stdout).unwrap();
    assert_eq!(stored["run"]["suite"], "advise");
    let placements: Vec<&str> = stored["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["placement"]["name"].as_str().unwrap())
        .collect();
    assert!(placements.contains(&"1c1t"), "{placements:?}");
    if machine.smt() {
        assert!(placements.contains(&"1c2t"), "{placements:?}");
    } else if machine.cores() >= 2 {
        assert_eq!(placements, ["1c1t", "2c1t"]);
    }
}

#[test]
fn advise_prints_the_answer_within_80_columns() {
    let machine = Machine::Here;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = advise(&machine, &db, &["int-ops", "--quick"]);
    let (stdout, _) = ok(&out);
    let summary = stdout
        .split("\nint-ops ")
        .nth(1)
        .unwrap_or_else(|| panic!("no answer block: {stdout}"));
    assert!(summary.contains("  answer: "), "{stdout}");
    assert!(summary.contains("  because "), "{stdout}");
    for l in summary.lines() {
        assert!(l.chars().count() <= 80, "{l:?}");
    }
    if !machine.smt() {
        assert!(
            summary.contains("answer: no SMT here (2 cores vs 1: "),
            "{stdout}"
        );
    }
}

#[test]
fn advise_a_command_runs_the_preparation_untimed_before_each_run() {
    let machine = Machine::Here;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let log: PathBuf = dir.path().join("prepared");
    let prep = format!("echo x >> {}", log.display());
    let out = advise(
        &machine,
        &db,
        &[
            "--json",
            "--reps",
            "3",
            "--warmup",
            "1",
            "--prepare",
            &prep,
            "--",
            "sleep",
            "0.01",
        ],
    );
    let (stdout, _) = ok(&out);
    let a = answer_of(&stdout);
    assert!(
        a["workload"]
            .as_str()
            .unwrap()
            .starts_with("exec command=sleep 0.01 prepare=echo x"),
        "{a:#}"
    );
    assert_answer_follows(&machine, &a);
    // One preparation per run: (1 warm-up + 3 measured) on each placement measured.
    let placements = if machine.smt() {
        3
    } else {
        machine.cores().min(2)
    };
    let prepared = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(prepared, placements * 4);
}

#[test]
fn a_failing_preparation_is_a_one_line_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = advise(
        &Machine::Here,
        &db,
        &["--reps", "2", "--prepare", "exit 7", "--", "true"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let err: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(err.len(), 1, "{stderr}");
    assert!(
        err[0].contains("--prepare `exit 7` failed (exit status 7)"),
        "{stderr}"
    );
}

#[test]
fn bad_input_is_one_line_and_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    for (args, says) in [
        (
            &["no-such-workload"][..],
            "unknown workload \"no-such-workload\"",
        ),
        (&["int-ops", "--param", "nope=1"][..], "nope"),
        (&["int-ops", "--smt", "maybe"][..], "--smt \"maybe\""),
        (
            &["--param", "threads=1", "--", "true"][..],
            "--param is for catalog workloads",
        ),
        (
            &["--throughput", "ops ([0-9]+", "--", "true"][..],
            "not a valid regular expression",
        ),
    ] {
        let out = advise(&Machine::Here, &db, args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // Neither a workload nor a command: clap says what is missing.
    let out = smtlab().arg("advise").output().unwrap();
    assert!(!out.status.success());
}

#[test]
fn advise_a_server_at_a_latency_target_measures_its_capacity() {
    let machine = Machine::Here;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    // A generous target: this test checks the path, not the machine's speed.
    let out = advise(
        &machine,
        &db,
        &["web-slo", "--quick", "--slo", "p99=2s", "--json"],
    );
    let (stdout, _) = ok(&out);
    let a = answer_of(&stdout);
    assert!(
        a["workload"].as_str().unwrap().contains("slo=p99=2s"),
        "{a:#}"
    );
    let reasons = a["reasons"].as_array().unwrap();
    // The server's own capacity at the target on 1c1t (its client on another core).
    let base = reasons
        .iter()
        .find(|r| r["what"] == "the workload on 1c1t")
        .expect("the capacity on 1c1t");
    assert!(base["figure"]["value"].as_f64().unwrap() >= 50.0, "{a:#}");
    assert!(base["shown"].as_str().unwrap().contains(" req/s"), "{a:#}");
    if machine.smt() {
        assert!(
            reasons.iter().any(|r| r["what"]
                .as_str()
                .unwrap()
                .starts_with("capacity at p99 <= 2s (")),
            "{a:#}"
        );
    } else {
        assert_eq!(a["recommendation"], "no_smt", "{a:#}");
    }
}

#[test]
fn advise_with_the_headroom_shows_it_beside_the_answer_without_deciding() {
    let machine = Machine::Here;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = advise(
        &machine,
        &db,
        &["int-ops", "--quick", "--headroom", "--json"],
    );
    let (stdout, _) = ok(&out);
    let a = answer_of(&stdout);
    let room = a["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["what"]
                .as_str()
                .unwrap()
                .starts_with("throughput left at ")
        })
        .unwrap_or_else(|| panic!("no headroom: {a:#}"));
    assert_eq!(room["says"], "context");
    assert_eq!(room["deciding"], false);
    assert_answer_follows(&machine, &a);
}

#[test]
fn advise_your_own_server_at_a_latency_target() {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|d| d.join("busybox").is_file()) {
        return smtlab_fixtures::require::skip("busybox not on PATH");
    }
    let machine = Machine::Here;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = advise(
        &machine,
        &db,
        &[
            "web-slo",
            "--quick",
            "--slo",
            "p99=2s",
            "--json",
            "--param",
            "server=cmd",
            "--param",
            "cmd=busybox httpd -f -p 127.0.0.1:{port} -h {root}",
        ],
    );
    let (stdout, _) = ok(&out);
    let a = answer_of(&stdout);
    assert!(
        a["workload"].as_str().unwrap().contains("server=cmd"),
        "{a:#}"
    );
    let base = a["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["what"] == "the workload on 1c1t")
        .unwrap_or_else(|| panic!("no capacity on 1c1t: {a:#}"));
    assert!(base["figure"]["value"].as_f64().unwrap() >= 50.0, "{a:#}");
}
