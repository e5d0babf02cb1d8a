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
    /// The fake SMT machine (`--fake-machine=DIR`): one core of two siblings, CPUs 0
    /// and 1, its tree in the directory held.
    Fake(tempfile::TempDir),
}

impl Machine {
    fn fake() -> Machine {
        Machine::Fake(tempfile::tempdir().unwrap())
    }

    /// Whether the machine shows SMT siblings.
    fn smt(&self) -> bool {
        match self {
            Machine::Here => smtlab_topology::discover(Path::new("/"))
                .unwrap()
                .smt_visible(),
            Machine::Fake(_) => true,
        }
    }

    /// Cores the machine has.
    fn cores(&self) -> usize {
        match self {
            Machine::Here => smtlab_topology::discover(Path::new("/"))
                .unwrap()
                .core_count(),
            Machine::Fake(_) => 1,
        }
    }

    /// Points `cmd` at the machine (nothing for this host).
    fn apply(&self, cmd: &mut Command) {
        match self {
            Machine::Here => {}
            Machine::Fake(dir) => {
                cmd.arg(format!(
                    "--fake-machine={}",
                    dir.path().join("machine").display()
                ));
            }
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
    // After the notes, the plan and its time come first, then a progress line per cell.
    let plan = stderr.lines().find(|l| !l.starts_with("note:"));
    assert!(
        plan.is_some_and(|l| l.starts_with("plan: ") && l.ends_with(" cells")),
        "{stderr}"
    );
    let time_at = stderr.find("time: about ").expect("the plan's time");
    let progress_at = stderr.find("[1/").expect("a progress line");
    assert!(time_at < progress_at, "{stderr}");
    let md = std::fs::read_to_string(&md).unwrap();
    if machine.smt() {
        assert!(md.contains(a["answer"].as_str().unwrap()), "{md}");
    } else {
        // Said once, then how the workload scales, with the deciding figure.
        assert_eq!(md.matches("No SMT").count(), 1, "{md}");
        for r in a["reasons"].as_array().unwrap() {
            if r["deciding"] == true {
                assert!(md.contains(r["shown"].as_str().unwrap()), "{md}");
            }
        }
    }
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
    for machine in [Machine::Here, Machine::fake()] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let out = advise(&machine, &db, &["int-ops", "--quick"]);
        let (stdout, _) = ok(&out);
        let summary = &stdout[stdout.find("\n\n").expect("a blank line before the answer")..];
        for l in summary.lines() {
            assert!(l.chars().count() <= 80, "{l:?}");
        }
        if machine.smt() {
            let block = summary
                .split("\nint-ops ")
                .nth(1)
                .unwrap_or_else(|| panic!("no answer block: {stdout}"));
            assert!(block.contains("  answer: "), "{stdout}");
            assert!(block.contains("  because "), "{stdout}");
        } else {
            // Said once, then how the workload scales: 1 core, 2 cores, the machine.
            assert_eq!(summary.matches("no SMT").count(), 1, "{stdout}");
            assert!(summary.contains("\nworkload "), "{stdout}");
            let row = summary
                .lines()
                .find(|l| l.starts_with("int-ops "))
                .unwrap_or_else(|| panic!("no row for int-ops: {stdout}"));
            assert!(row.contains(" GOPS "), "{row}");
            if machine.cores() >= 2 {
                assert!(row.contains("% ["), "the gain of 2 cores: {row}");
            }
        }
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
        (
            &["--reps", "1", "--", "true"][..],
            "--reps 1: expected at least 2",
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

fn on_path(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|d| d.join(program).is_file())
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
            out.push(name);
        }
    }
    out
}

/// `advise --server CMD` (smtlab's HTTP load) and `--server CMD --client CMD` (the
/// user's load tool, its requests counted through `--throughput`), on this host and on
/// the fake SMT machine, the clients on CPU 1 (shared with `1c2t` and `2c1t`, the only
/// way on two CPUs); the answer follows the figures and no server is left running.
#[test]
fn advise_your_own_server_with_smtlabs_load_or_your_client() {
    if !on_path("busybox") {
        return smtlab_fixtures::require::skip(
            "busybox (the stand-in server and client) not on PATH",
        );
    }
    let marker = format!("SMTLAB_ADVISE_SERVER_TEST={}", std::process::id());
    let (key, value) = marker.split_once('=').unwrap();
    for machine in [Machine::Here, Machine::fake()] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let run = |args: &[&str]| {
            let mut cmd = smtlab();
            cmd.arg("advise").arg("--db").arg(&db).args(args);
            cmd.args(["--client-cpus", "1", "--client-share", "--json"]);
            cmd.env(key, value);
            machine.apply(&mut cmd);
            let (stdout, _) = ok(&cmd.output().unwrap());
            answer_of(&stdout)
        };
        // smtlab's load against the user's server.
        let a = run(&[
            "--server",
            "busybox httpd -f -p 127.0.0.1:{port} -h {root}",
            "--quick",
            "--param",
            "duration=100ms",
            "--param",
            "conns=4",
        ]);
        let workload = a["workload"].as_str().unwrap();
        assert!(
            workload.starts_with("web-static ") && workload.contains("server=cmd"),
            "{a:#}"
        );
        let base = a["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["what"] == "the workload on 1c1t")
            .unwrap_or_else(|| panic!("no figure on 1c1t: {a:#}"));
        assert!(base["figure"]["value"].as_f64().unwrap() > 0.0, "{a:#}");
        assert_answer_follows(&machine, &a);
        if machine.smt() {
            // The tail latency under that load, beside the answer.
            let p99 = a["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["what"] == "p99 under load (1c2t/1c1t)")
                .unwrap_or_else(|| panic!("no p99 under load: {a:#}"));
            assert_eq!(p99["deciding"], false, "{a:#}");
        }

        // The user's client: ten requests per run, counted by what it prints, so every
        // run that reached the server through {port} says 10.
        let a = run(&[
            "--server",
            "sh -c 'echo hi > index.html; exec busybox httpd -f -p 127.0.0.1:{port} -h .'",
            "--client",
            "n=0; for i in 1 2 3 4 5 6 7 8 9 10; do busybox wget -q -O /dev/null http://127.0.0.1:{port}/index.html && n=$((n+1)); done; echo \"served $n\"",
            "--throughput",
            "served ([0-9]+)",
            "--reps",
            "3",
            "--warmup",
            "0",
        ]);
        let workload = a["workload"].as_str().unwrap();
        assert!(
            workload.starts_with("exec ") && workload.contains("server=sh -c"),
            "{a:#}"
        );
        let base = a["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["what"] == "the workload on 1c1t")
            .unwrap_or_else(|| panic!("no figure on 1c1t: {a:#}"));
        assert_eq!(base["figure"]["value"].as_f64(), Some(10.0), "{a:#}");
        assert_answer_follows(&machine, &a);
        if machine.smt() {
            // Every run served ten requests on either side: no change, and not a guess.
            assert_eq!(a["recommendation"], "cannot_tell", "{a:#}");
        }

        // The client's wall time, lower is better.
        let a = run(&[
            "--server",
            "busybox httpd -f -p 127.0.0.1:{port} -h .",
            "--client",
            "busybox wget -q -O /dev/null http://127.0.0.1:{port}/ || true",
            "--reps",
            "3",
        ]);
        assert_answer_follows(&machine, &a);
    }
    let left = processes_with(&marker);
    assert!(left.is_empty(), "left running: {left:?}");
}

#[test]
fn your_server_and_client_say_what_they_need_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    for (args, says) in [
        (
            vec!["--server", "my-server"],
            "put {port} where the command takes its port, or give --port N",
        ),
        (
            vec!["--server", "s {port}", "--client", "c", "--slo", "p99=5ms"],
            "--slo is for --server driven by smtlab's load",
        ),
        (
            vec!["--server", "s {port}", "--client", "c", "--penalty"],
            "not measured for --client",
        ),
        (vec!["--client", "c"], "--server"),
        (
            vec!["int-ops", "--throughput", "x(1)"],
            "--throughput is for your command",
        ),
    ] {
        let out = advise(&Machine::Here, &db, &args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `run --param server=event,threads` measures each server as its own workload in one
/// run, and `report` answers for every one measured on the SMT pair (on the fake SMT
/// machine, the clients on CPU 1).
#[test]
fn one_run_of_several_servers_gets_an_answer_per_server_in_report() {
    let machine = Machine::fake();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut cmd = smtlab();
    cmd.args(["-q", "run", "--suite", "quick", "--bench", "web-static"])
        .args([
            "--param",
            "server=event,threads",
            "--param",
            "duration=100ms",
        ])
        .args([
            "--placements",
            "1c1t,1c2t",
            "--client-cpus",
            "1",
            "--client-share",
        ])
        .arg("--db")
        .arg(&db);
    machine.apply(&mut cmd);
    ok(&cmd.output().unwrap());

    let mut cmd = smtlab();
    cmd.args(["report", "--json", "--db"]).arg(&db);
    let (stdout, _) = ok(&cmd.output().unwrap());
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let mut measured: Vec<(String, String)> = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["params"]["server"].as_str().unwrap().to_string(),
                c["placement_spec"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    measured.sort();
    let want: Vec<(String, String)> = [
        ("event", "1c1t"),
        ("event", "1c2t"),
        ("threads", "1c1t"),
        ("threads", "1c2t"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(measured, want, "{stdout}");

    let mut cmd = smtlab();
    cmd.args(["report", "--db"]).arg(&db).env("COLUMNS", "200");
    let (text, _) = ok(&cmd.output().unwrap());
    let section = text
        .split("Should SMT be on?")
        .nth(1)
        .unwrap_or_else(|| panic!("no advice section: {text}"));
    let section = section.split("\nSMT yield").next().unwrap();
    for server in ["event", "threads"] {
        let mut lines = section.lines().skip_while(|l| {
            !(l.starts_with("web-static ") && l.contains(&format!("server={server} ")))
        });
        assert!(
            lines.next().is_some(),
            "no answer for server={server}: {section}"
        );
        assert!(
            lines
                .next()
                .is_some_and(|l| l.trim_start().starts_with("answer: ")),
            "server={server}: {section}"
        );
    }
}

/// A server's latency at load on the fake SMT machine: after the throughput, an open
/// loop at shares of 1c1t's capacity, the same offered rates on 1c1t and 1c2t, in the
/// JSON with its percentiles in order where the side kept up and without them where it
/// did not; `--sweep` chooses the shares, `--no-sweep` leaves it out, and the sweep
/// never changes what the answer rests on.
#[test]
fn a_servers_latency_sweep_offers_the_same_rates_on_both_sides() {
    let machine = Machine::fake();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let run = |extra: &[&str]| {
        let mut cmd = smtlab();
        cmd.arg("advise").arg("--db").arg(&db);
        cmd.args(["web-static", "--quick", "--json"]);
        cmd.args(["--param", "duration=100ms", "--param", "conns=4"]);
        cmd.args(["--client-cpus", "1", "--client-share"]);
        cmd.args(extra);
        machine.apply(&mut cmd);
        let (stdout, _) = ok(&cmd.output().unwrap());
        answer_of(&stdout)
    };
    let a = run(&["--sweep", "20,40"]);
    assert_answer_follows(&machine, &a);
    // In `report`, the sweep's cells are no workloads of their own: one SMT yield row.
    let mut cmd = smtlab();
    cmd.args(["report", "--db"]).arg(&db).env("COLUMNS", "200");
    let (text, _) = ok(&cmd.output().unwrap());
    let yields = text
        .split("\nSMT yield\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no SMT yield: {text}"));
    let yields = yields.split("\nspeed-up:").next().unwrap();
    let rows = yields
        .lines()
        .filter(|l| l.starts_with("web-static "))
        .count();
    assert_eq!(rows, 1, "{yields}");
    assert!(text.contains("latency at offered load"), "{text}");
    let sweeps = a["latency_sweeps"].as_array().expect("a latency sweep");
    assert_eq!(sweeps.len(), 1, "{a:#}");
    assert_eq!(sweeps[0]["placements"], serde_json::json!(["1c1t", "1c2t"]));
    let points = sweeps[0]["points"].as_array().unwrap();
    assert_eq!(points.len(), 2, "{a:#}");
    let offered: Vec<f64> = points
        .iter()
        .map(|p| p["offered_per_s"].as_f64().unwrap())
        .collect();
    // 20% and 40% of the same capacity.
    assert!(offered[0] >= 1.0, "{offered:?}");
    assert!(
        (offered[1] / offered[0] - 2.0).abs() < 0.01 + 1.0 / offered[0],
        "{offered:?}"
    );
    for p in points {
        let sides = p["sides"].as_array().unwrap();
        let names: Vec<&str> = sides
            .iter()
            .map(|s| s["placement"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["1c1t", "1c2t"], "{p:#}");
        for s in sides {
            assert!(s["n"].as_u64().unwrap() >= 3, "{s:#}");
            assert!(s["achieved_per_s"].as_f64().unwrap() >= 0.0, "{s:#}");
            if s["kept_up"] == true {
                let v = |k: &str| s[k]["value"].as_f64().unwrap();
                assert!(v("p50_ms") <= v("p99_ms"), "{s:#}");
                assert!(v("p99_ms") <= v("p999_ms"), "{s:#}");
                assert!(
                    s["achieved_per_s"].as_f64().unwrap()
                        >= 0.95 * p["offered_per_s"].as_f64().unwrap() * 0.999,
                    "{s:#}"
                );
            } else {
                // Not kept up: offered against served, and no percentile at all.
                assert!(s.get("p99_ms").is_none(), "{s:#}");
            }
        }
    }
    // The sweep is context: nothing the answer rests on comes from it.
    for r in a["reasons"].as_array().unwrap() {
        assert!(!r["what"].as_str().unwrap().contains("offered"), "{r:#}");
    }
    let a = run(&["--no-sweep"]);
    assert!(a.get("latency_sweeps").is_none(), "{a:#}");
    assert_answer_follows(&machine, &a);
}

/// At a latency target the capacity at it decides, and the sweep below it (at shares of
/// 1c1t's capacity at the target) is context.
#[test]
fn at_a_latency_target_the_sweep_is_below_the_capacity_and_decides_nothing() {
    let machine = Machine::fake();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut cmd = smtlab();
    cmd.arg("advise").arg("--db").arg(&db);
    cmd.args([
        "web-slo", "--quick", "--json", "--slo", "p99=2s", "--sweep", "50",
    ]);
    cmd.args([
        "--param",
        "step=0.1",
        "--param",
        "conns=4",
        "--param",
        "max_rate=1600",
    ]);
    cmd.args(["--client-cpus", "1", "--client-share"]);
    machine.apply(&mut cmd);
    let (stdout, _) = ok(&cmd.output().unwrap());
    let a = answer_of(&stdout);
    let reasons = a["reasons"].as_array().unwrap();
    let deciding: Vec<&str> = reasons
        .iter()
        .filter(|r| r["deciding"] == true)
        .map(|r| r["what"].as_str().unwrap())
        .collect();
    assert_eq!(deciding, ["capacity at p99 <= 2s (1c2t/1c1t)"], "{a:#}");
    let capacity = reasons
        .iter()
        .find(|r| r["what"] == "the workload on 1c1t")
        .unwrap()["figure"]["value"]
        .as_f64()
        .unwrap();
    let points = a["latency_sweeps"][0]["points"]
        .as_array()
        .expect("a sweep");
    assert_eq!(points.len(), 1, "{a:#}");
    assert_eq!(
        points[0]["offered_per_s"].as_f64().unwrap(),
        (capacity / 2.0).round(),
        "{a:#}"
    );
    let sides: Vec<&str> = points[0]["sides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["placement"].as_str().unwrap())
        .collect();
    assert_eq!(sides, ["1c1t", "1c2t"], "{a:#}");
}

#[test]
fn the_sweep_says_what_it_is_for_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    for (args, says) in [
        (
            vec!["int-ops", "--sweep", "50"],
            "--sweep is for a server under smtlab's HTTP load",
        ),
        (
            vec!["web-static", "--sweep", "0"],
            "--sweep 0: expected shares of the measured capacity in percent",
        ),
        (
            vec!["web-static", "--param", "rate=100"],
            "sweeps the open loop's rates itself",
        ),
        (
            vec!["web-static", "--sweep", "50", "--no-sweep"],
            "--no-sweep",
        ),
    ] {
        let out = advise(&Machine::Here, &db, &args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn a_command_that_does_not_exist_is_refused_before_anything_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = advise(&Machine::Here, &db, &["--", "smtlab-no-such-command-here"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not found"), "{stderr}");
    assert!(!db.exists(), "a database was written: {stderr}");
}

#[test]
fn advise_into_a_pipe_closed_early_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let bin = assert_cmd::cargo::cargo_bin("smtlab");
    // `head` leaves after the first line; what advise writes after that meets a closed
    // pipe, on standard output and standard error alike.
    let script = r#""$0" advise --db "$1" --reps 2 --warmup 0 -- true 2>&1 | head -n 1 >/dev/null; echo "${PIPESTATUS[0]}""#;
    let out = std::process::Command::new("bash")
        .args(["-c", script])
        .arg(&bin)
        .arg(&db)
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        status.trim(),
        "0",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
