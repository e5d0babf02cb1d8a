//! `smtlab corun` and `smtlab penalty` on this machine with tiny workloads (shell
//! commands and a syscall loop, quick settings), their one-line notes where a form cannot
//! run, their bad-input errors, and the CPUs a co-run picks on saved topologies.

use std::process::Command;

use assert_cmd::prelude::*;
use serde_json::Value;

fn smtlab() -> Command {
    Command::cargo_bin("smtlab").expect("the smtlab binary is built")
}

fn smt_here() -> bool {
    smtlab_topology::discover(std::path::Path::new("/"))
        .unwrap()
        .smt_visible()
}

/// The latest run stored in `db`, as `report latest --json` prints it.
fn stored_run(db: &std::path::Path) -> Value {
    let out = smtlab()
        .args(["report", "latest", "--json", "--db"])
        .arg(db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn notes(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("note:")).collect()
}

#[test]
fn corun_measures_a_matrix_and_stores_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = smtlab()
        .args(["corun", "--quick", "--cmd", "t=true", "--cmd", "c=:"])
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let n = notes(&stderr);
    if smt_here() {
        assert!(n.is_empty(), "{stderr}");
        assert!(stdout.contains("partner on the SMT sibling"), "{stdout}");
    } else {
        // One line says why the sibling form is missing; the two-core form still runs.
        assert_eq!(n.len(), 1, "{stderr}");
        assert!(n[0].contains("sibling form not measured"), "{stderr}");
        assert!(!stdout.contains("partner on the SMT sibling"), "{stdout}");
    }
    assert!(stdout.contains("partner on another core"), "{stdout}");
    // A 2x2 matrix: a header and one row per workload.
    let rows: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("measured \\ partner"))
        .take(3)
        .collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert!(
        rows[1].starts_with('t') && rows[2].starts_with('c'),
        "{stdout}"
    );

    // Stored as a run: every cell is there with its form and partner.
    let v = stored_run(&db);
    assert_eq!(v["run"]["suite"], "corun");
    let cells = v["cells"].as_array().unwrap();
    let forms = if smt_here() { 3 } else { 2 };
    assert_eq!(
        cells.len() + v["skipped"].as_array().unwrap().len(),
        4 * forms
    );
    for c in cells {
        // The form and partner are typed conditions, not parameters of the workload.
        let cond = &c["conditions"];
        assert!(
            cond["form"].is_string() && cond["partner"].is_string(),
            "{c}"
        );
        assert!(c["params"].get("corun_form").is_none(), "{c}");
    }
    // The terminal summary of the stored run shows the matrix again.
    let text = smtlab()
        .args(["report", "latest", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Co-run slowdown of the measured workload"),
        "{text}"
    );
    // The HTML report draws the heatmap.
    let html = dir.path().join("r.html");
    smtlab()
        .args(["report", "latest", "--db"])
        .arg(&db)
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<section id=\"corun\">") && page.contains("<rect"));
}

#[test]
fn penalty_says_in_one_line_what_it_measured_instead() {
    let dir = tempfile::tempdir().unwrap();
    let out = smtlab()
        .args([
            "penalty",
            "--quick",
            "--json",
            "--cmd",
            "task=true",
            "--hogs",
            "null-syscall",
            "--samples",
            "4",
        ])
        .arg("--db")
        .arg(dir.path().join("r.db"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pens = v["penalties"].as_array().unwrap();
    let n = notes(&stderr);
    if smt_here() {
        assert!(n.is_empty(), "{stderr}");
        assert_eq!(pens.len(), 2);
        assert!(pens.iter().any(|p| p["form"] == "sibling"));
    } else {
        assert_eq!(n.len(), 1, "{stderr}");
        assert!(
            n[0].contains("single-thread penalty not measured"),
            "{stderr}"
        );
        assert!(n[0].contains("another core"), "{stderr}");
        assert_eq!(pens.len(), 1);
        assert_eq!(pens[0]["form"], "cores");
    }
    for p in pens {
        assert_eq!(p["hog"], "null-syscall");
        assert!(p["ratio"]["ratio"].as_f64().unwrap() > 0.0);
        assert!(p["p95_ns"].as_f64().unwrap() >= p["p50_ns"].as_f64().unwrap());
    }
}

#[test]
fn only_the_sibling_form_without_smt_is_a_one_line_error() {
    if smt_here() {
        eprintln!("skipped: this machine has SMT siblings");
        return;
    }
    let out = smtlab()
        .args(["corun", "--forms", "sibling", "--cmd", "t=true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no SMT sibling"), "{stderr}");
}

#[test]
fn predict_states_its_cost_and_measures_nothing_on_a_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = smtlab()
        .args(["predict", "--dry-run", "--cmd", "t=true", "--cmd", "c=:"])
        .args([
            "--rulers",
            "int,syscall",
            "--validate",
            "1",
            "--forms",
            "cores",
        ])
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let flat = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("2 cells a pair"), "{flat}");
    assert!(flat.contains("profiles: 2 x 2 + 2 x 2 = 8 pairs"), "{flat}");
    // Two workloads make three pairs: one held out, the other two fitted on.
    assert!(
        flat.contains("training: 2 pairs (chosen from the profiles); held out: 1 pair"),
        "{flat}"
    );
    assert!(flat.contains("cost: 22 cells"), "{flat}");
    // The time: an estimate below its bound (cells stop before their most samples).
    let seconds = |after: &str| {
        let t = flat
            .split(after)
            .nth(1)?
            .split([',', ')'])
            .next()?
            .trim()
            .to_string();
        match t.split_once("m ") {
            Some((m, s)) => {
                Some(m.parse::<f64>().ok()? * 60.0 + s.trim_end_matches('s').parse::<f64>().ok()?)
            }
            None => t.trim_end_matches(" s").parse().ok(),
        }
    };
    let (about, most) = (seconds("cells (about "), seconds("at most "));
    assert!(
        matches!((about, most), (Some(a), Some(m)) if 0.0 < a && a < m),
        "{flat}"
    );
    assert!(
        flat.contains("against 8 cells for the whole 2 x 2 matrix"),
        "{flat}"
    );
    assert!(flat.contains("ruler syscall: kernel entry"), "{flat}");
    assert!(!db.exists(), "a dry run stores nothing");
}

#[test]
fn predict_says_client_options_go_unused_without_a_server() {
    let out = smtlab()
        .args(["predict", "--dry-run", "--cmd", "t=true", "--rulers", "int"])
        .args(["--forms", "cores", "--client-cpus", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said = notes(&stderr);
    assert!(
        said.iter()
            .any(|n| n.contains("no workload here is a server, so they are not used")),
        "{stderr}"
    );
}

#[test]
fn predict_measures_profiles_here_and_stores_every_cell() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = smtlab()
        .args([
            "predict", "--quick", "--json", "--cmd", "t=true", "--cmd", "c=:",
        ])
        .args(["--rulers", "syscall", "--train", "1", "--validate", "1"])
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "smtlab.profile/1");
    let forms = if smt_here() { 2 } else { 1 };
    assert_eq!(v["forms"].as_array().unwrap().len(), forms);
    assert!(
        v["forms"]
            .as_array()
            .unwrap()
            .contains(&Value::from("cores"))
    );
    assert_eq!(v["profiles"].as_array().unwrap().len(), 2 * forms);
    assert_eq!(v["rulers"][0]["name"], "syscall");
    assert_eq!(v["rulers"][0]["unit"], "ns");
    // Pairs: 2 x 1 + 1 x 2 profile, 1 training, 1 held out; A alone and one per form.
    let run = stored_run(&db);
    assert_eq!(run["run"]["suite"], "predict");
    let stored = run["cells"].as_array().unwrap().len() + run["skipped"].as_array().unwrap().len();
    assert_eq!(stored, 6 * (1 + forms));
}

#[test]
fn predict_measures_a_server_under_load_beside_a_ruler_and_a_ruler_beside_it() {
    // The client side shares the last CPU (where a co-run partner also runs): a machine
    // of two CPUs has no other.
    let allowed: Vec<u32> = smtlab_placement::pin::get_affinity(0)
        .unwrap()
        .iter()
        .collect();
    let [_, .., last] = allowed.as_slice() else {
        eprintln!("skipped: a co-run needs two CPUs");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = smtlab()
        .args(["predict", "tcp-rr", "--cmd", "t=true", "--rulers", "int"])
        .args([
            "--quick",
            "--json",
            "--forms",
            "cores",
            "--param",
            "duration=5ms",
        ])
        .args(["--client-cpus", &last.to_string(), "--client-share", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let run = stored_run(&db);
    assert!(run["skipped"].as_array().unwrap().is_empty(), "{run}");
    let cells = run["cells"].as_array().unwrap();
    let beside = |bench: &str, partner: &str| {
        cells.iter().find(|c| {
            c["benchmark"] == bench
                && c["conditions"]["partner"] == partner
                && c["conditions"]["form"] == "cores"
        })
    };
    // The server beside the ruler, and the ruler beside the server under load: the
    // partner's side of that cell has the server's own figure, its load having run.
    assert!(beside("tcp-rr", "ruler:int").is_some(), "{run}");
    let ruler = beside("int-ops", "tcp-rr").expect("the ruler beside the server");
    let samples = ruler["result"]["samples"].as_array().unwrap();
    assert!(
        samples
            .iter()
            .any(|s| s["metrics"]["partner_value"].as_f64() > Some(0.0)),
        "{ruler}"
    );
}

#[test]
fn bad_input_is_a_one_line_error() {
    for args in [
        vec!["corun", "no-such-bench"],
        vec!["corun", "--cmd", "nameonly"],
        vec!["corun", "--cmd", "bad name=true"],
        vec!["corun", "--forms", "alone", "--cmd", "t=true"],
        vec!["corun", "--param", "nosuch=1", "int-ops"],
        vec!["corun", "--cmd", "x=true", "--cmd", "x=true"],
        vec!["penalty", "--hogs", "no-such-hog"],
        vec!["penalty", "--run-ms", "0"],
        vec!["predict", "--rulers", "no-such-ruler", "--cmd", "t=true"],
        vec![
            "predict",
            "--validate",
            "4",
            "--cmd",
            "t=true",
            "--cmd",
            "c=:",
        ],
        vec![
            "predict",
            "--train",
            "3",
            "--validate",
            "1",
            "--cmd",
            "t=true",
        ],
        vec!["predict", "no-such-bench"],
    ] {
        let out = smtlab().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn co_runs_pick_true_siblings_and_another_core_on_saved_machines() {
    for name in ["16em64t-4s2c2t", "2arm-2c"] {
        let (_tmp, root) = smtlab_fixtures::extract(name);
        let topo = smtlab_topology::discover(&root).unwrap();
        let pair = smtlab_runner::corun::cpu_pair(&topo).unwrap();
        let core = |c: u32| topo.core_of(c).map(|k| k.cpus.clone());
        match &pair.sibling {
            Ok(s) => {
                assert!(topo.smt_visible(), "{name}");
                assert_ne!(*s, pair.cpu);
                assert_eq!(core(*s), core(pair.cpu), "{name}");
            }
            Err(why) => {
                assert!(!topo.smt_visible(), "{name}");
                assert!(why.to_string().contains("no SMT sibling"), "{name}: {why}");
            }
        }
        let other = pair.other_core.clone().unwrap();
        assert_ne!(core(other), core(pair.cpu), "{name}");
        assert_eq!(
            topo.package_index_of(other),
            topo.package_index_of(pair.cpu),
            "{name}"
        );
    }
}

#[test]
fn util_measures_a_curve_and_says_in_one_line_what_it_cannot_switch() {
    let dir = tempfile::tempdir().unwrap();
    let out = smtlab()
        .args([
            "util",
            "--json",
            "--steps",
            "2",
            "--step-ms",
            "50",
            "--samples",
            "2",
            "--job-us",
            "50",
            "--smt",
            "off,on",
        ])
        .arg("--db")
        .arg(dir.path().join("r.db"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let curve = v["curve"].as_array().unwrap();
    let sysfs = smtlab_control::Sysfs::system();
    let switchable = smtlab_control::state::read(&sysfs)
        .ok()
        .and_then(|s| s.control)
        .is_some_and(|c| c.switchable())
        // SAFETY: geteuid has no preconditions and cannot fail.
        && unsafe { libc::geteuid() } == 0;
    if switchable {
        assert_eq!(curve.len(), 6);
    } else {
        let n = notes(&stderr);
        assert_eq!(n.len(), 1, "{stderr}");
        assert!(n[0].contains("--smt off,on: not measured"), "{stderr}");
        // The state found: the maximum and two rates.
        assert_eq!(curve.len(), 3);
        assert!(curve.iter().all(|p| p["smt"] == "as found"));
    }
    for p in curve {
        let fracs: f64 = ["user", "system", "iowait", "other", "idle"]
            .iter()
            .map(|k| p[k].as_f64().unwrap())
            .sum();
        assert!((fracs - 1.0).abs() < 1e-9, "{p}");
        assert!(p["achieved_per_s"].as_f64().unwrap() >= 0.0);
    }
    assert!(curve[0]["offered_pct"].is_null());
    assert_eq!(curve[2]["offered_pct"], 100.0);
}

#[test]
fn util_bad_input_is_a_one_line_error() {
    for args in [
        vec!["util", "--smt", "maybe"],
        vec!["util", "--placement", "9c9t"],
        vec!["util", "--steps", "0"],
    ] {
        let out = smtlab().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.trim().lines().count() <= 3, "{args:?}: {stderr}");
    }
}

/// `corun` saves each group's cells as they are measured, and Ctrl-C ends it as it ends
/// `run`: exit 130, the run stored as interrupted with the cells measured before it.
#[test]
fn corun_saves_per_cell_and_a_signal_leaves_an_interrupted_run() {
    smtlab_fixtures::signals::deliverable();
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut child = smtlab()
        .args(["corun", "--quick", "--forms", "cores"])
        .args(["--cmd", "s1=sleep 0.1", "--cmd", "s2=sleep 0.1"])
        .arg("--db")
        .arg(&db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let cells = |db: &std::path::Path| -> Option<(usize, String)> {
        let out = smtlab()
            .args(["report", "latest", "--json", "--db"])
            .arg(db)
            .output()
            .ok()?;
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let status = v["run"]["status"].as_str()?.to_string();
        Some((v["cells"].as_array()?.len(), status))
    };
    // The first group (two cells) is saved while the others are still to come.
    let start = Instant::now();
    let mut saved = None;
    while start.elapsed() < Duration::from_secs(120) {
        if let Some((n, status)) = cells(&db)
            && n >= 2
        {
            saved = Some((n, status));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (n, status) = saved.expect("no cell saved within 120 s");
    assert_eq!(status, "running", "saved before the run ended");
    assert!(
        n < 8,
        "{n} cells: the run ended before the test could stop it"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = smtlab_fixtures::bounded::wait(&mut child, "the child process");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted:"), "{stderr}");
    let (after, status) = cells(&db).unwrap();
    assert_eq!(status, "interrupted");
    assert!(after >= n, "{after} cells after the stop, {n} before");
    // `run --resume` does not take it for one of its own runs.
    let out = smtlab()
        .args(["run", "--resume", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("interrupted `corun` run"), "{stderr}");
}

/// `--counters` reaches the co-run cells: each stores its counters, or says why not.
#[test]
fn corun_records_counters_with_each_cell() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = smtlab()
        .args([
            "corun",
            "--quick",
            "--counters",
            "--forms",
            "cores",
            "--json",
        ])
        .args(["--cmd", "t=true"])
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v = stored_run(&db);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(v["run"]["config"]["counters"], true);
    for c in cells {
        assert!(
            c["counters"].is_object() || stderr.contains("counters not recorded"),
            "{c}\n{stderr}"
        );
    }
}
