//! `smtlab bench nfs-sfs --param server=user`: the quick cell against smtlab's
//! user-space NFS server runs end to end with every answer checked, the cell says
//! which server it measured, and nothing is left behind, also after a kill -9 of
//! smtlab mid-sample; `smtlab run --suite quick` measures that form.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use assert_cmd::prelude::*;
use serde_json::Value;

fn smtlab() -> Command {
    Command::cargo_bin("smtlab").expect("the smtlab binary is built")
}

/// What is under `dir` (the cell's scratch directories go there: `TMPDIR`).
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Threads of `pid` named by the user-space server's runtime.
fn server_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "smtlab-nfsu")
                })
                .count()
        })
        .unwrap_or(0)
}

fn quick_user_cell(tmp: &Path) -> Value {
    let out = smtlab()
        .args([
            "-q", "bench", "nfs-sfs", "--quick", "-p", "1c1t", "--json", "--param",
        ])
        .args(["server=user", "--param", "duration=300ms"])
        .env("TMPDIR", tmp)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn a_quick_user_space_cell_runs_checked_labelled_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let v = quick_user_cell(tmp.path());
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 1, "{v}");
    let cell = &cells[0];
    assert_eq!(cell["benchmark"], "nfs-sfs");
    // The cell says which server it measured.
    assert_eq!(cell["params"]["server"], "user", "{cell}");
    let samples = cell["result"]["samples"].as_array().expect("samples");
    assert!(!samples.is_empty(), "{cell}");
    for s in samples {
        let m = &s["metrics"];
        assert!(m["ops_per_s"].as_f64().unwrap() > 0.0, "{s}");
        assert_eq!(m["content_mismatches"].as_f64(), Some(0.0), "{s}");
        assert_eq!(m["user_space_server"].as_f64(), Some(1.0), "{s}");
        // 1c1t: one CPU, one server thread.
        assert_eq!(m["server_threads"].as_f64(), Some(1.0), "{s}");
        let by_op: f64 = [
            "lookup",
            "read",
            "write",
            "getattr",
            "readlink",
            "readdir",
            "create",
            "remove",
            "fsstat",
            "setattr",
            "readdirplus",
            "access",
            "commit",
        ]
        .iter()
        .map(|op| m[format!("{op}_ops")].as_f64().unwrap())
        .sum();
        let ops = m["ops_per_s"].as_f64().unwrap() * s["elapsed_ns"].as_f64().unwrap() / 1e9;
        assert!((by_op - ops).abs() < 1.0, "{by_op} by operation vs {ops}");
        assert!(m["read_p99_ms"].as_f64().unwrap() >= m["read_p50_ms"].as_f64().unwrap());
    }
    // The exported directory went with the cell.
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
}

/// smtlab killed with SIGKILL mid-sample: the server's threads were smtlab's own, so
/// they went with it, its port no longer answers, and the scratch directory it leaves
/// is swept by the next cell.
#[test]
fn kill_9_mid_cell_leaves_no_server_and_the_next_run_sweeps_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = smtlab()
        .args(["-q", "bench", "nfs-sfs", "--quick", "-p", "1c1t"])
        .args(["--param", "server=user", "--param", "duration=60s"])
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    while server_threads(pid) == 0 || entries(tmp.path()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the user-space server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Into the load: the sample has started.
    std::thread::sleep(Duration::from_millis(800));
    let left_dirs = entries(tmp.path());
    child.kill().unwrap();
    smtlab_fixtures::bounded::wait(&mut child, "the child process");
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    assert_eq!(left_dirs.len(), 1, "{left_dirs:?}");
    // The next cell sweeps the dead one's directory and removes its own.
    let v = quick_user_cell(tmp.path());
    assert_eq!(v["cells"][0]["params"]["server"], "user");
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
}

/// The quick suite measures the user-space server (it runs on any Linux), in seconds.
#[test]
fn the_quick_suite_measures_the_user_space_server() {
    let db = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = smtlab()
        .args(["run", "--suite", "quick", "--bench", "nfs-sfs", "--db"])
        .arg(db.path().join("r.db"))
        .args(["--json"])
        .env("TMPDIR", db.path())
        .output()
        .unwrap();
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let cells = v["cells"].as_array().expect("cells");
    assert!(!cells.is_empty(), "{v}");
    for c in cells {
        assert_eq!(c["params"]["server"], "user", "{c}");
    }
    let measured: Vec<&Value> = cells
        .iter()
        .filter(|c| {
            c["result"]["samples"]
                .as_array()
                .is_some_and(|s| !s.is_empty())
        })
        .collect();
    assert!(!measured.is_empty(), "{stdout}\n{stderr}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
    // The report names the server in the cells' parameters and says in words that it
    // is not the kernel's nfsd.
    let html = db.path().join("r.html");
    let out = smtlab()
        .args(["report", "1", "--db"])
        .arg(db.path().join("r.db"))
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("server=user"), "no server=user in the report");
    assert!(page.contains("not the kernel&#39;s nfsd") || page.contains("not the kernel's nfsd"));
}

/// `search=peak`: SPEC SFS's curve of load points is in the JSON (requested rates
/// rising, achieved rates, mean and p99 response per point), and each sample's value is
/// the highest achieved rate among its points within the response-time limit.
#[test]
fn a_quick_peak_search_keeps_its_curve_and_takes_the_best_point_within_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = smtlab()
        .args(["-q", "bench", "nfs-sfs", "--quick", "-p", "1c1t", "--json"])
        .args(["--param", "server=user", "--param", "search=peak"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let cell = &v["cells"][0];
    assert_eq!(cell["params"]["search"], "peak", "{cell}");
    let samples = cell["result"]["samples"].as_array().expect("samples");
    assert!(!samples.is_empty(), "{cell}");
    for s in samples {
        let m = &s["metrics"];
        let f = |k: String| m[&k].as_f64().unwrap_or_else(|| panic!("no {k} in {m}"));
        let points = f("points".into()) as usize;
        assert_eq!(points, 3, "the quick form's points: {m}");
        let limit_ms = f("limit_ms".into());
        let mut best: Option<(usize, f64)> = None;
        let mut last_requested = 0.0;
        for i in 0..points {
            let requested = f(format!("point{i}_requested_ops_per_s"));
            let achieved = f(format!("point{i}_achieved_ops_per_s"));
            let mean = f(format!("point{i}_mean_response_ms"));
            let p99 = f(format!("point{i}_p99_response_ms"));
            assert!(requested > last_requested, "rates rise: {m}");
            last_requested = requested;
            assert!(achieved > 0.0 && mean > 0.0 && p99 > 0.0, "{m}");
            let within = mean <= limit_ms;
            assert_eq!(f(format!("point{i}_within_limit")) == 1.0, within, "{m}");
            if within && best.is_none_or(|(_, a)| achieved > a) {
                best = Some((i, achieved));
            }
        }
        let (i, achieved) = best.expect("a point within the limit");
        assert_eq!(f("peak_point".into()), i as f64, "{m}");
        let value = s["value"].as_f64().unwrap();
        assert!(
            (value - achieved).abs() <= 1e-6 * achieved,
            "value {value} vs the best point's {achieved}"
        );
        // The highest point requests the probe's capacity.
        assert!((last_requested - f("probe_ops_per_s".into())).abs() <= 1e-6 * last_requested);
    }
    assert!(entries(tmp.path()).is_empty(), "{:?}", entries(tmp.path()));
}

/// Bad values of the load's pacing and search are one-line errors naming the parameter.
#[test]
fn bad_rate_points_and_search_values_are_one_line_errors() {
    for (k, v) in [("rate", "-1"), ("points", "0"), ("search", "x")] {
        let out = smtlab()
            .args(["-q", "bench", "nfs-sfs", "--quick", "-p", "1c1t"])
            .args(["--param", "server=user", "--param", &format!("{k}={v}")])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{k}={v} accepted");
        assert_eq!(stderr.trim().lines().count(), 1, "{k}={v}: {stderr}");
        assert!(
            stderr.contains(&format!("parameter {k}=\"{v}\"")),
            "{k}={v}: {stderr}"
        );
    }
}
