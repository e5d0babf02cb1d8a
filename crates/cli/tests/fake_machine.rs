//! Every command's path on the fake SMT machine (`--fake-machine=DIR`): one core of two
//! siblings, CPUs 0 and 1, in a sysfs tree that behaves as the kernel's, with a fake PMU.
//! The work really runs on this host's CPUs 0 and 1, so these tests check what the
//! commands do to the machine and what they store, never the figures. The tree's
//! journal (`writes.log`) lists every write the emulated kernel took, in order.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The fake machine's tree and a results database, in a temporary directory.
struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        Fake {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn tree(&self) -> PathBuf {
        self.dir.path().join("machine")
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("r.db")
    }

    fn smtlab(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_smtlab"));
        c.arg(format!("--fake-machine={}", self.tree().display()));
        c
    }

    fn cpu_file(&self, rel: &str) -> String {
        let path = self.tree().join("sys/devices/system/cpu").join(rel);
        fs::read_to_string(path).unwrap().trim().to_string()
    }

    /// The writes the emulated kernel took, as `path value` lines under the cpu dir.
    fn journal(&self) -> Vec<String> {
        let text = fs::read_to_string(self.tree().join("writes.log")).unwrap_or_default();
        text.lines()
            .map(|l| l.trim_start_matches("sys/devices/system/cpu/").to_string())
            .collect()
    }

    /// SMT on and both CPUs online, as the tree was built.
    fn assert_restored(&self) {
        assert_eq!(self.cpu_file("smt/control"), "on");
        assert_eq!(self.cpu_file("cpu1/online"), "1");
        assert_eq!(self.cpu_file("smt/active"), "1");
        let schedstats = self.tree().join("proc/sys/kernel/sched_schedstats");
        assert_eq!(fs::read_to_string(schedstats).unwrap().trim(), "0");
    }
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(out: Output) -> Value {
    serde_json::from_slice(&ok(out).stdout).unwrap()
}

fn placements(v: &Value, smt: Option<&str>) -> Vec<String> {
    v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| smt.is_none_or(|s| c["conditions"]["smt"] == s))
        .map(|c| c["placement"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn bench_measures_1c1t_and_1c2t_with_the_fake_pmu_and_says_the_machine_is_fake() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args([
                "bench",
                "int-ops",
                "-p",
                "1c1t,1c2t",
                "--quick",
                "--max-samples",
                "3",
            ])
            .args(["--counters", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(placements(&v, None), ["1c1t", "1c2t"]);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells[1]["placement"]["cpus"], serde_json::json!([0, 1]));
    assert_eq!(cells[1]["placement"]["threads_per_core"], 2);
    for c in cells {
        let per = &c["counters"]["per_unit"];
        let ipc = per["instructions_per_unit"].as_f64().unwrap()
            / per["cycles_per_unit"].as_f64().unwrap();
        assert!((ipc - 2.0).abs() < 1e-9, "the fake PMU's IPC is 2: {ipc}");
    }
    let env = &v["run"]["environment"];
    for field in ["hostname", "cpu_model", "virtualization"] {
        assert!(
            env[field].as_str().unwrap().contains("fake machine"),
            "{field}: {env}"
        );
    }
    assert_eq!(v["comparisons"].as_array().unwrap().len(), 1);
    assert!(
        f.journal().is_empty(),
        "nothing switched: {:?}",
        f.journal()
    );
}

#[test]
fn run_measures_both_smt_states_skips_1c2t_with_smt_off_and_restores_smt() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args(["run", "--suite", "quick", "--bench", "int-ops"])
            .args([
                "--placements",
                "1c1t,1c2t",
                "--smt",
                "off,on",
                "--json",
                "--db",
            ])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    assert_eq!(placements(&v, Some("off")), ["1c1t"]);
    assert_eq!(placements(&v, Some("on")), ["1c1t", "1c2t"]);
    let skipped = v["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["key"]["placement"], "1c2t");
    assert_eq!(skipped[0]["key"]["conditions"]["smt"], "off");
    let reason = skipped[0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("with SMT off:"), "{reason}");
    assert_eq!(f.journal(), ["smt/control off", "smt/control on"]);
    f.assert_restored();
}

#[test]
fn exec_runs_a_command_on_the_two_siblings() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args([
                "exec", "-p", "1c2t", "--reps", "2", "--warmup", "0", "--json", "--db",
            ])
            .arg(f.db())
            .args(["--", "true"])
            .output()
            .unwrap(),
    );
    assert_eq!(placements(&v, None), ["1c2t"]);
    assert_eq!(
        v["cells"][0]["placement"]["cpus"],
        serde_json::json!([0, 1])
    );
    assert_eq!(v["run"]["suite"], "exec");
}

#[test]
fn corun_measures_the_sibling_form() {
    let f = Fake::new();
    let out = ok(f
        .smtlab()
        .args([
            "corun", "--quick", "--forms", "sibling", "--cmd", "t=true", "--cmd", "c=:", "--json",
            "--db",
        ])
        .arg(f.db())
        .output()
        .unwrap());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let matrix = v["matrix"].as_array().unwrap();
    assert_eq!(
        matrix.len(),
        4,
        "t and c next to each other and themselves: {v}"
    );
    let text = serde_json::to_string(&v["matrix"]).unwrap();
    assert!(text.contains("sibling"), "{text}");
}

#[test]
fn predict_profiles_fits_and_validates_in_both_forms_and_stores_every_cell() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args(["predict", "--quick", "--cmd", "t=true", "--cmd", "c=:"])
            .args(["--rulers", "int,syscall", "--train", "2", "--validate", "1"])
            .args(["--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    assert_eq!(v["schema"], "smtlab.profile/1");
    // One core of two siblings: the sibling form only (the other-core form needs a
    // second core, and says so in a note).
    assert_eq!(v["forms"], serde_json::json!(["sibling"]));
    // A profile per workload, each with both rulers' figures measured, or held back
    // with the reason (a cell disturbed by the host's other load, say).
    let held_back = |a: &Value, b: &Value| {
        v["held_back"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["a"] == *a && m["b"] == *b && m["doubt"].is_string())
    };
    let profiles = v["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2, "{v}");
    for p in profiles {
        let rulers = p["rulers"].as_array().unwrap();
        let names: Vec<&str> = rulers
            .iter()
            .map(|r| r["ruler"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["int", "syscall"]);
        let w = &p["workload"];
        for r in rulers {
            let ruler = &r["ruler"];
            let sens = r["sensitivity"]["ratio"].as_f64();
            assert!(sens.is_some_and(|x| x > 0.0) || held_back(w, ruler), "{v}");
            let cont = r["contentiousness"]["ratio"].as_f64();
            assert!(cont.is_some_and(|x| x > 0.0) || held_back(ruler, w), "{v}");
        }
    }
    // Each ruler's own pressure, stated in its unit.
    assert_eq!(v["rulers"][0]["unit"], "GOPS");
    assert!(v["rulers"][1]["alone"].as_f64().unwrap() > 0.0);
    // The model, fitted on the measured pairs (unless the host's other load disturbed
    // every one of them, which the held-back list then says); the held-out pair checked
    // against it and both naive baselines.
    let model = &v["models"][0];
    let fitted = model["model"]["weights"].as_array().map(Vec::len);
    let all_held_back = v["training"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m["doubt"].is_string());
    assert!(
        fitted == Some(2) || (fitted.is_none() && all_held_back),
        "{v}"
    );
    let validation = v["validation"].as_array().unwrap();
    let checkable = fitted.is_some() && v["held_back"].as_array().unwrap().len() < 11;
    assert!(validation.len() == 1 || !checkable, "{v}");
    for val in validation {
        assert!(!val["checked"].as_array().unwrap().is_empty(), "{val}");
        for s in ["model", "no_interference", "mean_slowdown"] {
            assert!(val[s]["mae_points"].as_f64().unwrap() >= 0.0, "{val}");
        }
    }
    // Every ordered pair predicted, or said to be beyond the model's reach.
    let predicted = v["predictions"].as_array().unwrap().len();
    let unpredicted = v["unpredicted"].as_array().map_or(0, Vec::len);
    assert!(predicted + unpredicted == 4 || fitted.is_none(), "{v}");

    // Every cell stored as measured: 11 pairs (8 profile, 2 training, 1 held out) of
    // two cells, A alone and A beside B on the sibling.
    let run = json(
        f.smtlab()
            .args(["report", "latest", "--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    assert_eq!(run["run"]["suite"], "predict");
    let stored = run["cells"].as_array().unwrap().len() + run["skipped"].as_array().unwrap().len();
    assert_eq!(stored, 22);
    let partners = serde_json::to_string(&run["cells"]).unwrap();
    assert!(partners.contains("ruler:syscall") && partners.contains("\"sibling\""));
}

#[test]
fn predict_leaves_out_the_rulers_the_fake_topology_cannot_size() {
    let f = Fake::new();
    let out = ok(f
        .smtlab()
        .args([
            "predict",
            "--dry-run",
            "--rulers",
            "l1d,int",
            "--cmd",
            "t=true",
        ])
        .output()
        .unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The fake tree gives no cache sizes: the L1D chase cannot be sized, and says so.
    assert!(
        stderr.contains("note: ruler l1d left out: the topology gives no L1D size"),
        "{stderr}"
    );
    assert!(stdout.contains("1 workload, 1 ruler,"), "{stdout}");
    assert!(stdout.contains("ruler int: integer ALU"), "{stdout}");
    assert!(!stdout.contains("ruler l1d"), "{stdout}");
    // Nothing was measured, nothing switched.
    assert!(f.journal().is_empty());
}

#[test]
fn predict_measures_a_server_under_load_beside_the_rulers_and_as_their_partner() {
    let f = Fake::new();
    // One core of two siblings: no CPU is left for the server's client side, unless
    // named to share.
    let refused = f
        .smtlab()
        .args(["predict", "--dry-run", "tcp-rr", "--cmd", "t=true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("a server workload: no CPU left for the client side"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let v = json(
        f.smtlab()
            .args(["predict", "--quick", "tcp-rr", "--cmd", "t=true"])
            .args(["--param", "duration=100ms"])
            .args(["--rulers", "int", "--train", "1"])
            .args(["--client-cpus", "1", "--client-share", "--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    let profile = |w: &str| {
        v["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["workload"] == w)
            .cloned()
            .unwrap_or_else(|| panic!("no profile of {w}: {v}"))
    };
    // The server beside the ruler is measured, and the ruler beside the server under
    // load (each one or held back, saying why).
    let server = profile("tcp-rr");
    let int = &server["rulers"][0];
    let held_back = |a: &str, b: &str| {
        v["held_back"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["a"] == a && m["b"] == b)
    };
    assert!(
        int["sensitivity"]["ratio"].as_f64().is_some() || held_back("tcp-rr", "int"),
        "{v}"
    );
    let contentiousness = int["contentiousness"]["ratio"].as_f64();
    assert!(
        contentiousness.is_some() || held_back("int", "tcp-rr"),
        "{v}"
    );
    // The one training pair has the server measured beside the command.
    let training = v["training"].as_array().unwrap();
    assert_eq!(training.len(), 1, "{v}");
    assert_eq!(
        (&training[0]["a"], &training[0]["b"]),
        (&"tcp-rr".into(), &"t".into())
    );
    // With the model fitted (on the pair both ways round) and both figures known, the
    // command beside the server is predicted too.
    let t_sensitive = profile("t")["rulers"][0]["sensitivity"]["ratio"].as_f64();
    let fitted = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| !m["model"].is_null());
    if fitted && t_sensitive.is_some() && contentiousness.is_some() {
        assert!(
            v["predictions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["a"] == "t" && p["b"] == "tcp-rr"),
            "{v}"
        );
    }
}

#[test]
fn predict_plans_dram_wide_as_a_partner_only_where_asked_on_one_core() {
    let f = Fake::new();
    let dry = |rulers: &[&str]| {
        let mut c = f.smtlab();
        c.args(["predict", "--dry-run", "--cmd", "t=true"]);
        if !rulers.is_empty() {
            c.args(["--rulers", &rulers.join(",")]);
        }
        let out = ok(c.output().unwrap());
        // The lines as one, whatever the terminal's width wrapped.
        let text = |b: &[u8]| {
            let t = String::from_utf8_lossy(b);
            t.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        (text(&out.stdout), text(&out.stderr))
    };
    // One core of two siblings: its partner would be the sibling alone, as dram's.
    let (stdout, stderr) = dry(&[]);
    assert!(
        stderr.contains("note: ruler dram-wide left out: one CPU outside the measured core"),
        "{stderr}"
    );
    assert!(!stdout.contains("ruler dram-wide"), "{stdout}");
    // Asked for, it is planned, beside the workload only: 1 x 2 + 1 x 1 profile pairs
    // and the one training pair (t beside t), two cells each.
    let (stdout, _) = dry(&["dram-wide", "int"]);
    assert!(
        stdout.contains("ruler dram-wide: DRAM bandwidth: a stream over 4x the LLC on every CPU outside the measured core (mem-read")
            && stdout.contains("threads=auto); measured as the partner only (sibling: CPUs 1)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("profiles: 1 x 2 + 1 x 1 = 3 pairs (1 ruler measured as the partner only"),
        "{stdout}"
    );
    assert!(stdout.contains("cost: 8 cells"), "{stdout}");
    assert!(stdout.contains("from N > 3 workloads on"), "{stdout}");
    assert!(f.journal().is_empty());
}

#[test]
fn util_measures_a_curve_with_smt_off_and_on_and_restores_smt() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args([
                "util",
                "--smt",
                "off,on",
                "--steps",
                "1",
                "--step-ms",
                "50",
                "--samples",
                "2",
            ])
            .args(["--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    let text = serde_json::to_string(&v["curve"]).unwrap();
    assert!(
        text.contains("\"1c1t\"") && text.contains("\"1c2t\""),
        "1c1t with SMT off, 1c2t with it on: {text}"
    );
    assert_eq!(f.journal(), ["smt/control off", "smt/control on"]);
    f.assert_restored();
}

#[test]
fn bench_1c1t_up_takes_cpu_1_offline_for_the_cell_and_brings_it_back() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args([
                "bench",
                "int-ops",
                "-p",
                "1c1t-up",
                "--quick",
                "--max-samples",
                "3",
                "--json",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(placements(&v, None), ["1c1t-up"]);
    assert_eq!(v["cells"][0]["placement"]["cpus"], serde_json::json!([0]));
    assert_eq!(f.journal(), ["cpu1/online 0", "cpu1/online 1"]);
    f.assert_restored();
}

#[test]
fn a_server_on_1c1t_up_runs_with_its_client_on_the_same_cpu_only() {
    let f = Fake::new();
    let bench = |client: &[&str]| {
        f.smtlab()
            .args(["bench", "web-static", "-p", "1c1t-up", "--quick"])
            .args(["--max-samples", "3", "--json"])
            .args(client)
            .output()
            .unwrap()
    };
    // A client on CPU 1 would be taken offline with it: the cell is refused.
    let out = bench(&["--client-cpus", "1"]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("1c1t-up leaves no CPU online for the client side"),
        "{text}"
    );
    assert!(f.journal().is_empty(), "{:?}", f.journal());
    // Sharing the placement's one CPU, it needs no other.
    let v = json(bench(&["--client-cpus", "0", "--client-share"]));
    assert_eq!(placements(&v, None), ["1c1t-up"]);
    assert!(v["cells"][0]["result"]["summary"]["mean"].as_f64().unwrap() > 0.0);
    assert_eq!(f.journal(), ["cpu1/online 0", "cpu1/online 1"]);
    f.assert_restored();
}

#[test]
fn on_a_uniprocessor_kernel_1c1t_and_1t_up_kernel_are_measured_once() {
    let f = Fake::new();
    ok(f.smtlab().args(["topo"]).output().unwrap());
    // The kernel's version string without `SMP`: a kernel built without CONFIG_SMP.
    fs::create_dir_all(f.tree().join("proc/sys/kernel")).unwrap();
    fs::write(
        f.tree().join("proc/sys/kernel/version"),
        "#1 PREEMPT_DYNAMIC Sun Nov 29 12:56:01 UTC 2026\n",
    )
    .unwrap();
    let out = ok(f
        .smtlab()
        .args(["bench", "int-ops", "-p", "1c1t,1t-up-kernel", "--quick"])
        .args(["--max-samples", "3", "--json"])
        .output()
        .unwrap());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(placements(&v, None), ["1t-up-kernel"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1t-up-kernel: the same placement as 1c1t here (1t-up-kernel), measured once"),
        "{err}"
    );
    // Nothing taken offline: the kernel has one CPU to give.
    assert!(f.journal().is_empty(), "{:?}", f.journal());
    ok(f.smtlab()
        .args(["run", "--suite", "quick", "--bench", "int-ops"])
        .args(["--placements", "1t-up-kernel,1c1t-up,1c1t", "--db"])
        .arg(f.db())
        .output()
        .unwrap());
    let v = json(
        f.smtlab()
            .args(["report", "--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    assert_eq!(placements(&v, None), ["1t-up-kernel"]);
    // Keyed by that name, so `compare` never takes it for an SMP kernel's 1c1t.
    assert_eq!(v["cells"][0]["placement_spec"], "1t-up-kernel");
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_stop_mid_run_with_smt_off_restores_the_fake_tree() {
    smtlab_fixtures::signals::deliverable();
    let f = Fake::new();
    let child = f
        .smtlab()
        .args([
            "run",
            "--suite",
            "quick",
            "--bench",
            "int-ops,fp-ops,mem-read",
        ])
        .args(["--placements", "1c1t,1c2t", "--smt", "off,on", "--db"])
        .arg(f.db())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("SMT switched off", || {
        f.journal().first().is_some_and(|l| l == "smt/control off")
    });
    assert_eq!(
        f.cpu_file("cpu1/online"),
        "0",
        "the sibling is offline with SMT off"
    );
    // SAFETY: kill has no memory effects; the pid is our own child's, not yet waited on.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = smtlab_fixtures::bounded::output(child, "the smtlab process");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    f.assert_restored();
    // Resumed, the run goes on with the states it still lacks and ends restored.
    let v = json(
        f.smtlab()
            .args(["run", "--resume", "--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    assert_eq!(v["run"]["status"], "finished");
    let done = v["cells"].as_array().unwrap().len() + v["skipped"].as_array().unwrap().len();
    assert_eq!(done, 3 * 2 * 2, "every benchmark x placement x state");
    assert_eq!(placements(&v, Some("off")), ["1c1t"; 3]);
    f.assert_restored();
}

#[test]
fn the_fake_machine_is_shown_by_topo_and_smt() {
    let f = Fake::new();
    let v = json(f.smtlab().args(["topo", "--json"]).output().unwrap());
    assert_eq!(v["cpus"], serde_json::json!([0, 1]));
    let out = ok(f.smtlab().args(["smt"]).output().unwrap());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SMT control  on"), "{text}");
    assert!(Path::new(&f.tree()).join("proc/cpuinfo").exists());
}

#[test]
fn the_fake_machine_flag_is_hidden_from_help() {
    let out = ok(Command::new(env!("CARGO_BIN_EXE_smtlab"))
        .arg("--help")
        .output()
        .unwrap());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--quiet") && !help.contains("fake"), "{help}");
}

#[test]
fn advise_switches_smt_off_and_on_answers_and_restores_smt() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args([
                "advise", "--smt", "both", "--reps", "3", "--warmup", "0", "--json", "--db",
            ])
            .arg(f.db())
            .args(["--", "true"])
            .output()
            .unwrap(),
    );
    assert_eq!(v["schema"], "smtlab.advice/1", "{v}");
    let advice = v["advice"].as_array().unwrap();
    assert_eq!(advice.len(), 1, "{v}");
    // One recommendation, whatever the host's figures say.
    assert!(
        advice[0]["answer"].as_str().is_some_and(|a| !a.is_empty()),
        "{v}"
    );
    assert_eq!(f.journal(), ["smt/control off", "smt/control on"]);
    f.assert_restored();
}

#[test]
fn penalty_measures_the_task_beside_a_hog_on_its_sibling() {
    let f = Fake::new();
    let out = ok(f
        .smtlab()
        .args([
            "penalty", "--quick", "--cmd", "t=true", "--hogs", "spin", "--json", "--db",
        ])
        .arg(f.db())
        .output()
        .unwrap());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v.to_string();
    assert!(text.contains("sibling") && text.contains("spin"), "{text}");
    assert!(
        f.journal().is_empty(),
        "penalty switches nothing: {:?}",
        f.journal()
    );
}

/// The fake machine's network files smtlab steers (paper 004 s3), as `path value`
/// lines relative to the tree; what the tree was built with until something writes.
fn steering_files(f: &Fake) -> Vec<String> {
    [
        "sys/class/net/lo/queues/rx-0/rps_cpus",
        "sys/class/net/eth0/queues/rx-0/rps_cpus",
        "sys/class/net/eth0/queues/rx-1/rps_cpus",
        "proc/irq/24/smp_affinity_list",
        "proc/irq/25/smp_affinity_list",
    ]
    .iter()
    .map(|rel| {
        let v = fs::read_to_string(f.tree().join(rel)).unwrap();
        format!("{rel} {}", v.trim())
    })
    .collect()
}

const STEERING_AS_BUILT: [&str; 5] = [
    "sys/class/net/lo/queues/rx-0/rps_cpus 0",
    "sys/class/net/eth0/queues/rx-0/rps_cpus 0",
    "sys/class/net/eth0/queues/rx-1/rps_cpus 0",
    "proc/irq/24/smp_affinity_list 0-1",
    "proc/irq/25/smp_affinity_list 0-1",
];

/// A web-static cell of the copying server on 1c1t (CPU 0) with its client on the
/// sibling (CPU 1, the fake machine has one core), interrupts steered as `irq` says.
fn seda_cell(f: &Fake, irq: &str, extra: &[&str]) -> Command {
    let mut c = f.smtlab();
    c.args(["bench", "web-static", "-p", "1c1t", "--client-siblings"])
        .args(["--param", "server=seda", "--param"])
        .arg(format!("irq={irq}"))
        .args(extra);
    c
}

#[test]
fn irq_sibling_steers_the_devices_to_the_sibling_for_the_cell_and_puts_them_back() {
    let f = Fake::new();
    let v = json(
        seda_cell(
            &f,
            "sibling:eth0+lo",
            &["--quick", "--max-samples", "3", "--json"],
        )
        .output()
        .unwrap(),
    );
    let cell = &v["cells"][0];
    assert_eq!(cell["params"]["irq"], "sibling:eth0+lo");
    assert_eq!(cell["params"]["server"], "seda");
    assert!(
        cell["result"]["summary"]["median"].as_f64().unwrap() > 0.0,
        "{cell}"
    );
    // Every file went to CPU 1 (the sibling of CPU 0) before the cell, and back after.
    let steered: Vec<String> = f
        .journal()
        .into_iter()
        .filter(|l| !l.starts_with("cpu"))
        .collect();
    assert_eq!(
        steered,
        [
            "proc/irq/24/smp_affinity_list 1",
            "proc/irq/25/smp_affinity_list 1",
            "sys/class/net/eth0/queues/rx-0/rps_cpus 00000002",
            "sys/class/net/eth0/queues/rx-1/rps_cpus 00000002",
            "sys/class/net/lo/queues/rx-0/rps_cpus 00000002",
            "proc/irq/24/smp_affinity_list 0-1",
            "proc/irq/25/smp_affinity_list 0-1",
            "sys/class/net/eth0/queues/rx-0/rps_cpus 0",
            "sys/class/net/eth0/queues/rx-1/rps_cpus 0",
            "sys/class/net/lo/queues/rx-0/rps_cpus 0",
        ]
    );
    assert_eq!(steering_files(&f), STEERING_AS_BUILT);
}

#[test]
fn irq_steering_that_cannot_be_done_says_why_in_one_line() {
    let f = Fake::new();
    // One core: no other core to steer to.
    let out = seda_cell(&f, "other-core", &["--quick"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("irq=other-core: every core"), "{stderr}");
    // A device with no interrupts and no receive queues: nothing to steer, no cell.
    fs::create_dir_all(f.tree().join("sys/class/net/veth0")).unwrap();
    let out = seda_cell(&f, "sibling:veth0", &["--quick"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("nothing to steer for veth0"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    // A malformed value is named with what is expected.
    let out = seda_cell(&f, "neighbour", &["--quick"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("irq=\"neighbour\": expected none, sibling"),
        "{stderr}"
    );
    assert_eq!(steering_files(&f), STEERING_AS_BUILT);
}

#[test]
fn kill_9_mid_cell_leaves_the_interrupt_steering_as_it_was() {
    let f = Fake::new();
    let child = seda_cell(&f, "sibling:eth0+lo", &["--param", "duration=2s"])
        .args(["--max-samples", "10"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the interrupts steered to the sibling", || {
        f.journal()
            .iter()
            .any(|l| l == "sys/class/net/lo/queues/rx-0/rps_cpus 00000002")
    });
    assert_ne!(steering_files(&f), STEERING_AS_BUILT);
    // SIGKILL: no chance to clean up; the guardian writes the old values back.
    let mut child = child;
    child.kill().unwrap();
    let status = smtlab_fixtures::bounded::wait(&mut child, "the child process");
    assert!(!status.success());
    wait_until("the guardian restored the steering", || {
        steering_files(&f) == STEERING_AS_BUILT
    });
}

#[test]
fn a_mix_runs_its_programs_together_on_the_two_siblings_and_the_report_shows_it() {
    let f = Fake::new();
    // A kernel and a command on the two siblings, then each alone.
    let v = json(
        f.smtlab()
            .args([
                "bench",
                "mix",
                "-p",
                "1c2t",
                "--quick",
                "--max-samples",
                "3",
            ])
            .args([
                "--param",
                "programs=int-ops,cmd:s=seq 300 | wc -l",
                "--json",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(placements(&v, None), ["1c2t"]);
    let cell = &v["cells"][0];
    assert_eq!(cell["placement"]["cpus"], serde_json::json!([0, 1]));
    for s in cell["result"]["samples"].as_array().unwrap() {
        let m = &s["metrics"];
        let p0 = m["mix.0.int-ops.progress"].as_f64().unwrap();
        let p1 = m["mix.1.s.progress"].as_f64().unwrap();
        // Each program made progress, and the value is their sum (weighted speedup).
        assert!(p0 > 0.0 && p1 > 0.0, "{m}");
        assert!((s["value"].as_f64().unwrap() - (p0 + p1)).abs() < 1e-9);
        assert_eq!(m["mix.0.int-ops.cpu"], 0.0);
        assert_eq!(m["mix.1.s.cpu"], 1.0);
    }
    // The quick suite's mix on both placements, stored, and the report's section.
    let v = json(
        f.smtlab()
            .args(["run", "--suite", "quick", "--bench", "mix"])
            .args(["--placements", "1c1t,1c2t", "--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    assert_eq!(placements(&v, None), ["1c1t", "1c2t"]);
    let page = f.dir.path().join("mix.html");
    ok(f.smtlab()
        .args(["report", "latest", "-o"])
        .arg(&page)
        .arg("--db")
        .arg(f.db())
        .output()
        .unwrap());
    let html = fs::read_to_string(page).unwrap();
    let at = html.find("<section id=\"mix\">").expect("a mix section");
    let section = &html[at..at + html[at..].find("</section>").unwrap()];
    for want in ["int-ops", "fp-ops", "weighted speedup", "1c2t"] {
        assert!(section.contains(want), "{want}: {section}");
    }
    assert!(f.journal().is_empty(), "{:?}", f.journal());
}

#[test]
fn a_run_on_a_machine_with_steal_says_so_and_records_each_cells_disturbance() {
    let f = Fake::new();
    // The fake machine's `/proc/stat`: 1% of its CPUs' time stolen since boot.
    fs::create_dir_all(f.tree().join("proc")).unwrap();
    fs::write(
        f.tree().join("proc/stat"),
        "cpu  900 0 0 100 0 0 0 10\ncpu0 450 0 0 45 0 0 0 5\ncpu1 450 0 0 45 0 0 0 5\n",
    )
    .unwrap();
    let out = ok(f
        .smtlab()
        .args(["run", "--suite", "quick", "--bench", "int-ops"])
        .args(["--placements", "1c1t", "--json", "--db"])
        .arg(f.db())
        .output()
        .unwrap());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines().any(
            |l| l.starts_with("note: this machine's hypervisor takes time")
                && l.contains("steal 1.00%")
        ),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["cells"][0]["result"]["disturbance"];
    assert!(d["windows"].as_u64().unwrap() >= 1, "{d}");
    assert_eq!(d["cpus"], 1);
    // The file does not move: nothing was stolen while the cell measured.
    assert_eq!(d["steal_ns"], 0);
}

/// `topo --probe-siblings` on the fake machine: its CPUs 0 and 1 are siblings in the
/// tree, the work runs on the host's CPUs 0 and 1; one pair, with its figure and what
/// the topology says, and the verdict that follows from the figure.
#[test]
fn topo_probe_siblings_reports_each_pair_with_its_figure() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args(["topo", "--probe-siblings", "--probe-ms", "20", "--json"])
            .output()
            .unwrap(),
    );
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{v}");
    assert_eq!(pairs[0]["cpus"], serde_json::json!([0, 1]));
    assert_eq!(pairs[0]["same_core_in_topology"], true);
    let slowdown = pairs[0]["slowdown"].as_f64().unwrap();
    assert!(slowdown > 0.0, "{v}");
    let shares = slowdown >= v["sibling_slowdown"].as_f64().unwrap();
    assert_eq!(pairs[0]["behaves_as_siblings"], shares);
    let not_sharing = v["siblings_not_sharing"].as_array().unwrap();
    assert_eq!(not_sharing.len(), usize::from(!shares), "{v}");
    let out = ok(f
        .smtlab()
        .args(["topo", "--probe-siblings", "--probe-ms", "20"])
        .output()
        .unwrap());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("CPU 0 + CPU 1"), "{text}");
    assert!(text.contains("topology: same core"), "{text}");
}

/// The cookies the fake kernel made (`create thread|PID SCOPE` lines).
fn cookies(f: &Fake) -> Vec<String> {
    let text = fs::read_to_string(f.tree().join("coresched.log")).unwrap_or_default();
    text.lines().map(String::from).collect()
}

/// `advise --security` as JSON; the answers' first workload.
fn security_modes(v: &Value) -> Vec<Value> {
    assert_eq!(v["schema"], "smtlab.security/1", "{v}");
    let answers = v["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 1, "{v}");
    answers[0]["modes"].as_array().unwrap().clone()
}

#[test]
fn advise_security_measures_each_mode_with_its_cookie_and_forced_idle_and_restores_smt() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args([
                "advise",
                "int-ops",
                "--security",
                "--quick",
                "--json",
                "--db",
            ])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    let modes = security_modes(&v);
    let names: Vec<&str> = modes.iter().map(|m| m["mode"].as_str().unwrap()).collect();
    assert_eq!(names, ["smt-on", "coresched", "smt-off"]);
    for m in &modes {
        assert!(m["value"]["value"].as_f64().is_some(), "{m}");
    }
    // Only the cookie's cell had a sibling forced idle: the fake's quarter of its
    // tasks' time, over the two CPUs of `all`.
    let idle = modes[1]["forced_idle_share"]["value"].as_f64().unwrap();
    assert!(idle > 0.0 && idle <= 0.25, "{idle}");
    assert!(modes[0].get("forced_idle_share").is_none(), "{}", modes[0]);
    let line = v["answers"][0]["line"].as_str().unwrap();
    assert!(line.starts_with("core scheduling costs"), "{line}");
    assert!(line.contains("SMT off costs"), "{line}");
    // One cookie, on the cell's thread, and SMT off then back on; schedstats on for
    // every mode, so that the kernel counts forced idle, and back off after.
    assert_eq!(cookies(&f), ["create thread thread"]);
    let schedstats = "proc/sys/kernel/sched_schedstats";
    assert_eq!(
        f.journal(),
        [
            format!("{schedstats} 1"),
            "smt/control off".into(),
            "smt/control on".into(),
            format!("{schedstats} 0"),
        ]
    );
    f.assert_restored();
}

#[test]
fn advise_security_per_process_gives_the_workloads_process_its_own_cookie() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args(["advise", "null-syscall", "--security=process", "--quick"])
            .args(["--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    let modes = security_modes(&v);
    assert!(modes[1].get("skipped").is_none(), "{}", modes[1]);
    let made = cookies(&f);
    assert!(!made.is_empty(), "a cookie per round at least");
    for line in &made {
        let pid = line
            .strip_prefix("create ")
            .and_then(|l| l.strip_suffix(" process"))
            .unwrap_or_else(|| panic!("{line}"));
        let pid: u32 = pid.parse().unwrap();
        assert_ne!(pid, std::process::id());
        // The measuring process ended with its cell: its cookie with it.
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} outlived smtlab"
        );
    }
    // A workload that keeps no process of its own cannot have a cookie per process.
    let v = json(
        f.smtlab()
            .args([
                "advise",
                "int-ops",
                "--security=pgroup",
                "--quick",
                "--json",
                "--db",
            ])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    let why = security_modes(&v)[1]["skipped"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(why.contains("use --security thread"), "{why}");
}

#[test]
fn advise_security_per_group_gives_the_measuring_process_group_its_cookie_never_smtlabs() {
    // null-syscall's measuring process leads a group of its own (so that a Ctrl-C to
    // smtlab's group reaches smtlab first): the cookie covers that group, never smtlab's,
    // which holds smtlab, the shell that started it and all they start later.
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args(["advise", "null-syscall", "--security=pgroup", "--quick"])
            .args(["--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    assert!(security_modes(&v)[1].get("skipped").is_none(), "{v}");
    // SAFETY: getpgid(0) reads this process's group; smtlab ran in it.
    let ours = unsafe { libc::getpgid(0) };
    let made = cookies(&f);
    assert!(!made.is_empty(), "a cookie per round at least");
    for line in &made {
        let pgid: i32 = line
            .strip_prefix("create ")
            .and_then(|l| l.strip_suffix(" pgroup"))
            .unwrap_or_else(|| panic!("{line}"))
            .parse()
            .unwrap();
        assert_ne!(pgid, ours, "{line}");
        // The group's leader ended with its cell, and its cookie with it.
        assert!(
            !Path::new(&format!("/proc/{pgid}")).exists(),
            "{pgid} outlived smtlab"
        );
    }
    f.assert_restored();
}

#[test]
fn advise_security_in_the_terminal_fits_the_width_and_ends_its_last_line() {
    let f = Fake::new();
    let out = ok(f
        .smtlab()
        .args(["advise", "null-syscall", "--security", "--quick", "--db"])
        .arg(f.db())
        .env("COLUMNS", "80")
        .output()
        .unwrap());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    let answer = text.lines().skip_while(|l| !l.ends_with(" load:"));
    let lines: Vec<&str> = answer.collect();
    assert!(
        lines.iter().any(|l| l.trim_start().starts_with("-> ")),
        "{text}"
    );
    for l in &lines {
        assert!(l.chars().count() <= 80, "over 80 columns: {l:?}");
    }
}

/// Whether this process may make a cgroup (v2) below its own, as smtlab does for what it
/// starts.
fn can_make_cgroups() -> bool {
    let proc = Path::new("/proc");
    let Some(own) = smtlab_control::cgroup::dir_of(proc, "self") else {
        return false;
    };
    let probe = own.join(format!("fake-machine-test-{}", std::process::id()));
    let made = fs::create_dir(&probe).is_ok();
    let _ = fs::remove_dir(&probe);
    made
}

#[test]
fn advise_security_per_cgroup_gives_the_measuring_process_cgroup_its_cookie_never_smtlabs() {
    // The measuring process of the os rows enters the cgroup smtlab makes for what it
    // starts: the cookie covers that cgroup's processes. Where no cgroup can be made,
    // the process stays in smtlab's own, and the cell is skipped saying so.
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args(["advise", "null-syscall", "--security=cgroup", "--quick"])
            .args(["--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    let coresched = &security_modes(&v)[1];
    let made = cookies(&f);
    if !can_make_cgroups() {
        let why = coresched["skipped"].as_str().unwrap_or_default();
        assert!(why.contains("a cgroup of their own"), "{coresched}");
        assert!(made.is_empty(), "{made:?}");
        return;
    }
    assert!(coresched.get("skipped").is_none(), "{v}");
    assert!(!made.is_empty(), "a cookie per round at least");
    for line in &made {
        let pid: u32 = line
            .strip_prefix("create ")
            .and_then(|l| l.strip_suffix(" cgroup"))
            .unwrap_or_else(|| panic!("{line}"))
            .parse()
            .unwrap();
        assert_ne!(pid, std::process::id(), "{line}");
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} outlived smtlab"
        );
    }
    f.assert_restored();
}

#[test]
fn advise_security_without_core_scheduling_says_so_once_and_skips_those_cells() {
    let f = Fake::new();
    fs::create_dir_all(f.tree()).unwrap();
    fs::write(f.tree().join("core_sched"), "EINVAL\n").unwrap();
    let out = ok(f
        .smtlab()
        .args([
            "advise",
            "int-ops",
            "--security",
            "--quick",
            "--json",
            "--db",
        ])
        .arg(f.db())
        .output()
        .unwrap());
    let err = String::from_utf8_lossy(&out.stderr);
    let notes: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("CONFIG_SCHED_CORE"))
        .collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(
        notes[0].starts_with("note: coresched cells skipped"),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let modes = security_modes(&v);
    let why = modes[1]["skipped"].as_str().unwrap();
    assert!(why.contains("CONFIG_SCHED_CORE"), "{why}");
    assert!(modes[0]["value"]["value"].as_f64().is_some());
    assert_eq!(v["answers"][0]["choice"], "cannot_tell");
    assert!(cookies(&f).is_empty());
    f.assert_restored();
}

#[test]
fn advise_security_with_partners_gives_each_tenant_a_cookie_of_its_own() {
    let f = Fake::new();
    let v = json(
        f.smtlab()
            .args(["advise", "int-ops", "--security", "--partners", "--quick"])
            .args(["--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    assert_eq!(v["schema"], "smtlab.security/1", "{v}");
    let answers = v["answers"].as_array().unwrap();
    let tenants: Vec<&Value> = answers
        .iter()
        .filter(|a| {
            a["workload"]
                .as_str()
                .unwrap()
                .contains("distrusting tenants")
        })
        .collect();
    assert_eq!(tenants.len(), 5, "one per default partner: {v}");
    for a in &tenants {
        let modes = a["modes"].as_array().unwrap();
        assert!(modes.iter().all(|m| m.get("skipped").is_none()), "{a}");
        assert!(modes[1]["forced_idle_share"]["value"].as_f64().unwrap() > 0.0);
    }
    // The whole machine's cookie, then per pair the measured tenant's (its cell thread)
    // and its partner's threads', each by thread id.
    let made = cookies(&f);
    let own = made.iter().filter(|l| *l == "create thread thread").count();
    assert_eq!(own, 6, "{made:?}");
    assert!(made.len() > own, "the partners' cookies: {made:?}");
    // SMT off for each group that needs it, and back on for the next; schedstats on
    // around them all.
    let journal = f.journal();
    assert_eq!(journal.len(), 14, "{journal:?}");
    let schedstats = "proc/sys/kernel/sched_schedstats";
    assert_eq!(journal[0], format!("{schedstats} 1"));
    assert_eq!(journal[13], format!("{schedstats} 0"));
    assert!(
        journal[1..13]
            .chunks(2)
            .all(|c| c == ["smt/control off", "smt/control on"]),
        "{journal:?}"
    );
    f.assert_restored();
}

#[test]
fn kill_9_mid_coresched_cell_leaves_no_process_with_a_cookie_behind() {
    let f = Fake::new();
    let mut child = f
        .smtlab()
        .args(["advise", "null-syscall", "--security=process", "--db"])
        .arg(f.db())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut pid = None;
    wait_until("the workload's process given a cookie", || {
        pid = cookies(&f).iter().find_map(|l| {
            l.strip_prefix("create ")?
                .strip_suffix(" process")?
                .parse::<u32>()
                .ok()
        });
        pid.is_some()
    });
    let pid = pid.unwrap();
    let schedstats = f.tree().join("proc/sys/kernel/sched_schedstats");
    assert_eq!(fs::read_to_string(&schedstats).unwrap().trim(), "1");
    // SIGKILL: no chance to clean up; the guardian kills what smtlab started, and
    // writes back what it changed.
    child.kill().unwrap();
    let status = smtlab_fixtures::bounded::wait(&mut child, "the smtlab process");
    assert!(!status.success());
    wait_until("the process with the cookie gone", || {
        !Path::new(&format!("/proc/{pid}")).exists()
            || fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
    });
    wait_until("SMT as found", || {
        f.cpu_file("smt/control") == "on" && f.cpu_file("cpu1/online") == "1"
    });
    wait_until("schedstats as found", || {
        fs::read_to_string(&schedstats).is_ok_and(|v| v.trim() == "0")
    });
}

#[test]
fn advise_security_with_smt_off_as_found_switches_it_on_for_the_cookie_and_back_off() {
    let f = Fake::new();
    ok(f.smtlab().args(["smt", "off"]).output().unwrap());
    assert_eq!(f.cpu_file("smt/control"), "off");
    let v = json(
        f.smtlab()
            .args([
                "advise",
                "int-ops",
                "--security",
                "--quick",
                "--json",
                "--db",
            ])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    let modes = security_modes(&v);
    // No SMT as found (ENODEV) is no refusal where SMT can be switched on.
    assert!(
        modes.iter().all(|m| m.get("skipped").is_none()),
        "{modes:?}"
    );
    assert_eq!(cookies(&f), ["create thread thread"]);
    assert_eq!(f.cpu_file("smt/control"), "off", "the state found put back");
}

#[test]
fn advise_partners_without_a_sibling_are_predicted_by_the_predict_run_of_the_cpu_model() {
    let f = Fake::new();
    let doc = json(
        f.smtlab()
            .args(["predict", "--quick", "int-ops", "fp-ops", "--rulers", "int"])
            .args(["--json", "--db"])
            .arg(f.db())
            .output()
            .unwrap(),
    );
    assert_eq!(doc["forms"], serde_json::json!(["sibling"]), "{doc}");
    // The same machine with its two CPUs on two cores: no sibling for the partners.
    let cpu = f.tree().join("sys/devices/system/cpu");
    fs::write(cpu.join("cpu1/topology/core_id"), "1\n").unwrap();
    for c in ["cpu0", "cpu1"] {
        let own = format!("{}\n", &c[3..]);
        fs::write(cpu.join(c).join("topology/thread_siblings_list"), &own).unwrap();
        fs::write(cpu.join(c).join("topology/core_cpus_list"), &own).unwrap();
    }
    let out = f
        .smtlab()
        .args([
            "advise",
            "int-ops",
            "--partners",
            "--quick",
            "--json",
            "--db",
        ])
        .arg(f.db())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let v = json(out);
    let predicted: Vec<String> = v["advice"][0]["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["what"].as_str())
        .filter(|w| w.contains("predicted by predict run 1"))
        .map(str::to_string)
        .collect();
    // A partner is the pair's combined speed: both ways round predicted.
    let predictable = |b: &str| {
        doc["predictions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["a"] == "int-ops" && p["b"] == b && !p["combined_speed"].is_null())
    };
    for b in ["int-ops", "fp-ops"] {
        let shown = predicted.iter().any(|w| w.contains(&format!("with {b} ")));
        // Predicted where the run's model predicts it both ways round (a busy host may
        // hold every training pair back, and then there is no model; a pair beyond the
        // training pairs' reach has no figure), else named in the note.
        assert_eq!(
            shown,
            predictable(b),
            "{b}: {predicted:?} {err}\nmodels {} unpredicted {} training {} held out {}",
            doc["models"],
            doc["unpredicted"],
            doc["training"],
            doc["held_out"]
        );
        let note = err
            .lines()
            .find(|l| l.contains("neither measured nor predicted"))
            .unwrap_or_default();
        assert_eq!(!shown, note.contains(b), "{err}");
    }
    assert!(
        err.contains("mem-read, mem-latency, null-syscall"),
        "not profiled: {err}"
    );
}
