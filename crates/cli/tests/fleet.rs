//! Many hosts, one store: runs of made-up hosts (`smtlab_fixtures::fleet`) are written
//! to one results file per host, pushed with `smtlab push` into one shared store
//! (SQLite, and PostgreSQL where it is installed), and `smtlab fleet` pools them per
//! CPU model; the deploy/ playbook is run against network-namespace hosts (see
//! `deploy_playbook_*`).

use std::path::{Path, PathBuf};

mod common;

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

/// `--runs-per-host` and `--since` choose which runs are pooled; a bad duration is one line.
#[test]
fn fleet_pools_more_runs_per_host_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared.db");
    let mut store = Store::open(&shared).unwrap();
    for f in host_files(dir.path()) {
        for r in Store::open_read_only(&f).unwrap().list_runs().unwrap() {
            let run = Store::open_read_only(&f).unwrap().load_run(r.id).unwrap();
            store.import_run(&run).unwrap();
        }
    }
    // An older run of a1, whose yield only `--runs-per-host 2` reaches.
    let mut old = FakeHost::new("a1", A, 2.0);
    old.started_unix_s -= 3600;
    store.import_run(&run(&old)).unwrap();
    drop(store);
    let runs_of = |extra: &[&str]| -> u64 {
        let v: Value = serde_json::from_str(&stdout_of(
            smtlab()
                .args(["fleet", "--json"])
                .args(extra)
                .arg("--db")
                .arg(&shared),
        ))
        .unwrap();
        v["runs"].as_u64().unwrap()
    };
    assert_eq!(runs_of(&[]), 10);
    assert_eq!(runs_of(&["--runs-per-host", "2"]), 11);
    // The fixture's runs started long ago: none in the last hour.
    assert_eq!(runs_of(&["--since", "1h"]), 0);
    assert_eq!(runs_of(&["--since", "100000d"]), 11);
    let out = smtlab()
        .args(["fleet", "--since", "3x", "--db"])
        .arg(&shared)
        .assert()
        .failure()
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    assert!(err.contains("\"3x\" is not a duration"), "{err}");
}

#[test]
fn fleet_reads_a_postgresql_store_that_hosts_pushed_to() {
    let Some((_server, url)) = common::pg_server("fleet over PostgreSQL") else {
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

/// `--inventory` (an Ansible INI inventory) and `--expect`: the hosts that never
/// reported, named; an inventory that cannot be read or names none is one line.
#[test]
fn fleet_names_the_inventory_hosts_that_never_reported() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared.db");
    for f in &host_files(dir.path()) {
        smtlab()
            .arg("push")
            .arg(f)
            .arg("--to")
            .arg(&shared)
            .assert()
            .success();
    }
    let inv = dir.path().join("hosts.ini");
    std::fs::write(
        &inv,
        "[a]\na[1:7]\na8 ansible_host=10.0.0.8\n[a:vars]\nx=1\n[b]\nb1\nb2\n",
    )
    .unwrap();
    let text = stdout_of(
        smtlab()
            .args(["fleet", "--expect", "11", "--inventory"])
            .arg(&inv)
            .arg("--db")
            .arg(&shared)
            .env("COLUMNS", "200"),
    );
    assert!(
        text.contains("expected 11 hosts, 10 reported; never reported (1): a8"),
        "{text}"
    );
    let v: Value = serde_json::from_str(&stdout_of(
        smtlab()
            .args(["fleet", "--json", "--inventory"])
            .arg(&inv)
            .arg("--db")
            .arg(&shared),
    ))
    .unwrap();
    assert_eq!(v["expected"], 10);
    assert_eq!(v["missing"], serde_json::json!(["a8"]));
    for bad in [dir.path().join("none.ini"), {
        let empty = dir.path().join("empty.ini");
        std::fs::write(&empty, "# nothing\n").unwrap();
        empty
    }] {
        let out = smtlab()
            .args(["fleet", "--inventory"])
            .arg(&bad)
            .arg("--db")
            .arg(&shared)
            .assert()
            .failure()
            .get_output()
            .stderr
            .clone();
        let err = String::from_utf8(out).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("--inventory") && err.contains(".ini"), "{err}");
    }
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

/// Runs a command that must succeed, with a one-line reason when it does not.
fn sh(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Network namespaces standing for hosts, each joined to this namespace by a veth pair
/// (`10.N.i.1` here, `10.N.i.2` there, a default route back here): traffic between
/// them never leaves the machine. Removed on drop (removing a namespace removes its
/// veth pair).
struct NsHosts {
    names: Vec<String>,
    /// This namespace's address on the first link, where the hosts reach the database.
    root_addr: String,
}

impl NsHosts {
    fn new(count: usize) -> Result<NsHosts, String> {
        let pid = std::process::id();
        let net = 200 + pid % 50;
        let mut hosts = NsHosts {
            names: Vec::new(),
            root_addr: format!("10.{net}.1.1"),
        };
        for i in 1..=count {
            let ns = format!("smtfl{pid}h{i}");
            let (here, there) = (format!("sfl{}r{i}", pid % 100_000), "eth0".to_string());
            sh(&["ip", "netns", "add", &ns])?;
            hosts.names.push(ns.clone());
            sh(&[
                "ip", "link", "add", &here, "type", "veth", "peer", "name", &there, "netns", &ns,
            ])?;
            sh(&[
                "ip",
                "addr",
                "add",
                &format!("10.{net}.{i}.1/30"),
                "dev",
                &here,
            ])?;
            sh(&["ip", "link", "set", &here, "up"])?;
            sh(&[
                "ip",
                "-n",
                &ns,
                "addr",
                "add",
                &format!("10.{net}.{i}.2/30"),
                "dev",
                &there,
            ])?;
            sh(&["ip", "-n", &ns, "link", "set", &there, "up"])?;
            sh(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            sh(&[
                "ip",
                "-n",
                &ns,
                "route",
                "add",
                "default",
                "via",
                &format!("10.{net}.{i}.1"),
            ])?;
        }
        Ok(hosts)
    }

    /// The addresses this namespace has on the links, `a,b`.
    fn root_addrs(&self) -> String {
        let net = self.root_addr.split('.').nth(1).unwrap_or("0").to_string();
        (1..=self.names.len())
            .map(|i| format!("10.{net}.{i}.1"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Drop for NsHosts {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
    }
}

/// Whether `tool` runs here (`tool --version`, `kubectl version --client`).
fn have(tool: &str) -> bool {
    let args: &[&str] = if tool == "kubectl" {
        &["version", "--client"]
    } else {
        &["--version"]
    };
    std::process::Command::new(tool)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The deploy/ playbook against two network-namespace hosts: Ansible's own `local`
/// connection with each host's Python interpreter a wrapper that enters its network
/// namespace and a UTS namespace with its own hostname (`ip netns exec NS unshare
/// --uts`), so every module, smtlab included, runs "on" that host; the hosts reach the
/// shared PostgreSQL over their veth links. Both hosts' runs arrive in the one store,
/// and a second play pushes only the new runs.
#[test]
fn deploy_playbook_runs_smtlab_on_namespace_hosts_and_pushes_to_one_postgresql() {
    if !have("ansible-playbook") {
        require::skip("deploy playbook: ansible-playbook is not installed");
        return;
    }
    let hosts = match NsHosts::new(2) {
        Ok(h) => h,
        Err(e) => {
            require::skip(&format!(
                "deploy playbook: no network namespaces here ({e})"
            ));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let open = |p: &Path, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    // The server (which runs as an unprivileged user) reads this file.
    open(dir.path(), 0o755);
    let hba = dir.path().join("hba.conf");
    let net = hosts.root_addr.split('.').nth(1).unwrap().to_string();
    std::fs::write(
        &hba,
        format!(
            "local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all 10.{net}.0.0/16 trust\n"
        ),
    )
    .unwrap();
    open(&hba, 0o644);
    let Some(install) = PgInstall::find()
        .map_err(|e| require::skip(&format!("deploy playbook: {e}")))
        .ok()
    else {
        return;
    };
    let settings = PgSettings {
        port: 0,
        shared_buffers_bytes: 16 << 20,
        max_connections: 20,
        fsync: false,
        synchronous_commit: false,
        extra: vec![
            format!("listen_addresses = '127.0.0.1,{}'", hosts.root_addrs()),
            format!("hba_file = '{}'", hba.display()),
        ],
    };
    let server = PgServer::start(&install, &settings, None).expect("start PostgreSQL");
    let url = format!(
        "postgresql://{DB_USER}@{}:{}/postgres",
        hosts.root_addr,
        server.port()
    );

    // The inventory: each host's interpreter enters its namespaces.
    let mut inventory = String::from("[fleet]\n");
    for (i, ns) in hosts.names.iter().enumerate() {
        let name = format!("h{}", i + 1);
        let wrapper = dir.path().join(format!("python-{name}"));
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec ip netns exec {ns} unshare --uts sh -c \
                 'hostname {name} && exec python3 \"$@\"' sh \"$@\"\n"
            ),
        )
        .unwrap();
        open(&wrapper, 0o755);
        let home = dir.path().join(&name);
        inventory.push_str(&format!(
            "{name} ansible_connection=local ansible_python_interpreter={} smtlab_dir={}\n",
            wrapper.display(),
            home.display()
        ));
    }
    let inv = dir.path().join("inventory.ini");
    std::fs::write(&inv, inventory).unwrap();
    let playbook = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/ansible/smtlab.yml");
    let binary = assert_cmd::cargo::cargo_bin("smtlab");
    let extra = serde_json::json!({
        "smtlab_db_url": url,
        // Used where it is, not copied (the role's copy task would write the debug
        // build, about 200 MB, once per host).
        "smtlab_exe": binary,
        "smtlab_args": ["run", "--suite", "quick", "--bench", "null-syscall", "--placements", "1c1t"],
        "smtlab_timeout_s": 120,
    })
    .to_string();
    let play_with = |extra: &str| {
        let out = std::process::Command::new("timeout")
            .args(["300", "ansible-playbook", "-i"])
            .arg(&inv)
            .arg(&playbook)
            .args(["-e", extra])
            .env("ANSIBLE_LOCAL_TEMP", dir.path().join("ansible-local"))
            .env("ANSIBLE_REMOTE_TEMP", dir.path().join("ansible-remote"))
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
            .output()
            .expect("run ansible-playbook");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the play failed:\n{text}");
        text
    };
    let play = || play_with(&extra);
    // h1 holds a run an earlier play left interrupted (measured under its hostname):
    // this play resumes it, measuring only what it lacks, instead of a new run.
    let h1_db = dir.path().join("h1/results.db");
    std::fs::create_dir_all(h1_db.parent().unwrap()).unwrap();
    let seeded = std::process::Command::new("unshare")
        .args(["--uts", "sh", "-c", "hostname h1 && exec \"$0\" \"$@\""])
        .arg(&binary)
        .args([
            "run",
            "--suite",
            "quick",
            "--bench",
            "null-syscall",
            "--placements",
            "1c1t",
            "--db",
        ])
        .arg(&h1_db)
        .output()
        .unwrap();
    assert!(
        seeded.status.success(),
        "{}",
        String::from_utf8_lossy(&seeded.stderr)
    );
    let mut h1 = Store::open(&h1_db).unwrap();
    h1.reopen_run(1).unwrap();
    h1.mark_interrupted(1).unwrap();
    drop(h1);
    let first = play();
    assert!(first.contains("h1") && first.contains("h2"), "{first}");
    let h1_runs = Store::open_read_only(&h1_db).unwrap().list_runs().unwrap();
    assert_eq!(h1_runs.len(), 1, "resumed, not measured anew: {h1_runs:?}");
    assert_eq!(h1_runs[0].status, smtlab_model::RunStatus::Finished);

    // Both hosts' runs, each under its own hostname, in the one store (read here over
    // the loopback address).
    let local = format!(
        "postgresql://{DB_USER}@127.0.0.1:{}/postgres",
        server.port()
    );
    let runs: Value = serde_json::from_str(&stdout_of(
        smtlab().args(["runs", "--json", "--db", &local]),
    ))
    .unwrap();
    let mut names: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["hostname"].as_str().unwrap_or("?"))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["h1", "h2"], "{runs}");
    assert!(
        runs.as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] == "finished")
    );

    // Again: each host measures a new run and pushes it; the first stays stored once.
    let second = play();
    assert!(
        second.contains("1 run(s) pushed, 0 completed, 1 already there"),
        "{second}"
    );
    let runs: Value = serde_json::from_str(&stdout_of(
        smtlab().args(["runs", "--json", "--db", &local]),
    ))
    .unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 4, "{runs}");

    // A play stopped by smtlab_timeout_s still succeeds and pushes the interrupted runs;
    // the next play resumes them (no new run) and its push completes them. The run
    // takes about 7 s here and is stopped after 3, well inside it and well after its
    // start (a run of about 1 s stopped after 1 s left no interrupted run on a machine
    // busy with a second test suite).
    let short = serde_json::json!({
        "smtlab_db_url": url,
        "smtlab_exe": binary,
        "smtlab_args": ["run", "--suite", "quick", "--bench", "null-syscall", "--placements",
                        "1c1t", "--repeat", "200"],
        "smtlab_timeout_s": 3,
    })
    .to_string();
    let cut = play_with(&short);
    assert!(cut.contains("stopped after 3 s"), "{cut}");
    let runs = stdout_of(smtlab().args(["runs", "--json", "--db", &local]));
    let runs: Value = serde_json::from_str(&runs).unwrap();
    let interrupted = |runs: &Value| {
        let all = runs.as_array().unwrap();
        all.iter().filter(|r| r["status"] == "interrupted").count()
    };
    assert_eq!(interrupted(&runs), 2, "{runs}");
    let resumed = play();
    assert!(
        resumed.contains("0 run(s) pushed, 1 completed, 2 already there"),
        "{resumed}"
    );
    let runs = stdout_of(smtlab().args(["runs", "--json", "--db", &local]));
    let runs: Value = serde_json::from_str(&runs).unwrap();
    assert_eq!(
        (runs.as_array().unwrap().len(), interrupted(&runs)),
        (6, 0),
        "{runs}"
    );
    assert_eq!(
        Store::open_read_only(&h1_db)
            .unwrap()
            .list_runs()
            .unwrap()
            .len(),
        3
    );
    drop(server);
}

/// The deploy/ files parse: the playbook passes `ansible-playbook --syntax-check`, and
/// the Kubernetes manifests are YAML documents of the kinds they say, whose pods run
/// `smtlab run` then `smtlab push` to the database the Secret names (read with
/// Python's YAML parser; `kubectl` cannot validate without a cluster, but where it is
/// installed `kubectl label --local` must read every object too).
#[test]
fn deploy_files_parse_and_say_what_they_run() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    if have("ansible-playbook") {
        let out = std::process::Command::new("ansible-playbook")
            .arg("--syntax-check")
            .arg(deploy.join("ansible/smtlab.yml"))
            .args(["-i", "localhost,"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        require::skip("deploy playbook syntax: ansible-playbook is not installed");
    }
    let parse = |file: &Path| -> Option<Vec<Value>> {
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                "import json,sys,yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
            ])
            .arg(file)
            .output()
            .ok()?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("ModuleNotFoundError"),
                "{}: {err}",
                file.display()
            );
            return None;
        }
        Some(serde_json::from_slice(&out.stdout).expect("JSON from python"))
    };
    for (file, kinds) in [
        (
            "kubernetes/smtlab-namespace.yaml",
            &["Namespace", "Secret"][..],
        ),
        ("kubernetes/smtlab-daemonset.yaml", &["DaemonSet"][..]),
        ("kubernetes/smtlab-job.yaml", &["Job"][..]),
    ] {
        let path = deploy.join(file);
        let Some(docs) = parse(&path) else {
            require::skip("deploy manifests: python3 with the yaml module is missing");
            return;
        };
        let got: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(got, kinds, "{file}");
        if kinds[0] == "Namespace" {
            continue;
        }
        check_pod(file, &docs[0]["spec"]["template"]["spec"]);
        kubectl_reads(&path, 1);
    }
    kubectl_reads(&deploy.join("kubernetes/smtlab-namespace.yaml"), 2);
    check_image_files(&deploy);
    check_schemas(&deploy.join("kubernetes"));
}

/// Every manifest, and what kustomization.yaml renders, passes the Kubernetes schemas
/// (`kubernetes-validate --strict`: unknown fields and wrong types fail).
fn check_schemas(dir: &Path) {
    if !have("kubernetes-validate") {
        require::skip("deploy manifests' schemas: kubernetes-validate is not installed");
        return;
    }
    let validate = |file: &Path| {
        let out = std::process::Command::new("kubernetes-validate")
            .args(["--strict", "--quiet"])
            .arg(file)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {text}", file.display());
    };
    for file in [
        "smtlab-namespace.yaml",
        "smtlab-daemonset.yaml",
        "smtlab-job.yaml",
    ] {
        validate(&dir.join(file));
    }
    if have("kubectl") {
        let out = std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(dir)
            .output()
            .unwrap();
        let rendered = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(rendered.path(), &out.stdout).unwrap();
        validate(rendered.path());
    }
}

/// A workload's pod: `measure` (an init container) measures into a results file on a
/// volume that outlives the pod, through the image's measuring step; `push`, another
/// container, pushes that file to the Secret's URL; the node's network.
fn check_pod(file: &str, pod: &Value) {
    let all: Vec<&Value> = [&pod["initContainers"], &pod["containers"]]
        .iter()
        .filter_map(|c| c.as_array())
        .flatten()
        .collect();
    let named = |n: &str| *all.iter().find(|c| c["name"] == n).expect(n);
    let measure = named("measure");
    let push = named("push");
    assert!(
        pod["initContainers"][0]["name"] == "measure",
        "{file}: measure runs first"
    );
    assert_eq!(
        measure["command"][0], "/usr/local/bin/smtlab-measure",
        "{file}"
    );
    let args: Vec<&str> = push["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "push",
            "/var/lib/smtlab/results-$(SMTLAB_ROUND).db",
            "--to",
            "$(SMTLAB_DB_URL)"
        ],
        "{file}"
    );
    let env = |c: &Value, name: &str| {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
    };
    let url = env(push, "SMTLAB_DB_URL").unwrap();
    assert_eq!(
        url["valueFrom"]["secretKeyRef"]["name"], "smtlab-db",
        "{file}"
    );
    assert_eq!(url["valueFrom"]["secretKeyRef"]["key"], "url", "{file}");
    assert_eq!(
        env(measure, "SMTLAB_DB").unwrap()["value"],
        "/var/lib/smtlab/results-$(SMTLAB_ROUND).db",
        "{file}"
    );
    for c in [measure, push] {
        assert_eq!(
            c["image"], "smtlab",
            "{file}: the name kustomization.yaml sets"
        );
        assert_eq!(
            c["volumeMounts"][0]["mountPath"], "/var/lib/smtlab",
            "{file}"
        );
    }
    let volume = &pod["volumes"][0];
    assert_eq!(
        volume["hostPath"]["path"], "/var/lib/smtlab",
        "{file}: outlives the pod"
    );
    assert_eq!(pod["hostNetwork"], true, "{file}: the run names the node");
}

/// `kubectl label --local` reads `count` objects from `path`, where kubectl is here.
fn kubectl_reads(path: &Path, count: usize) {
    if !have("kubectl") {
        return;
    }
    let out = std::process::Command::new("kubectl")
        .args(["label", "--local", "-o", "name", "-f"])
        .arg(path)
        .arg("checked=yes")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), count);
}

/// The image carries smtlab-os-child and the measuring step, the build context sends
/// them (and little else), and kustomization.yaml sets the image of every smtlab
/// container (rendered by `kubectl kustomize` where kubectl is here).
fn check_image_files(deploy: &Path) {
    let dockerfile = std::fs::read_to_string(deploy.join("kubernetes/Dockerfile")).unwrap();
    assert!(
        dockerfile.contains("target/release/smtlab-os-child"),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains("/usr/local/bin/smtlab-measure"),
        "{dockerfile}"
    );
    let ignore = std::fs::read_to_string(deploy.join("../.dockerignore")).unwrap();
    let lines: Vec<&str> = ignore.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines[0], "*", "{ignore}");
    for kept in ["smtlab", "smtlab-os-child"] {
        assert!(
            lines.contains(&format!("!target/release/{kept}").as_str()),
            "{ignore}"
        );
    }
    if !have("kubectl") {
        return;
    }
    let out = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(deploy.join("kubernetes"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("image: registry.example.com/smtlab:0.1.0")
            .count(),
        2,
        "{text}"
    );
    assert!(!text.contains("image: smtlab\n"), "{text}");
}

/// The image's measuring step (deploy/kubernetes/measure.sh) with this build's smtlab:
/// a new run the first time, nothing the second (the round is measured), and an
/// unfinished run resumed (its missing cells only).
#[test]
fn the_image_measuring_step_measures_once_and_resumes_an_unfinished_run() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/measure.sh");
    let bin = assert_cmd::cargo::cargo_bin("smtlab");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("node/results-1.db");
    let measure = || {
        let out = std::process::Command::new("sh")
            .arg(&script)
            .env("PATH", &path)
            .env("SMTLAB_DB", &db)
            .env(
                "SMTLAB_ARGS",
                "run --suite quick --bench null-syscall --placements 1c1t",
            )
            .env("SMTLAB_TIMEOUT_S", "120")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        text
    };
    measure();
    let again = measure();
    assert!(again.contains("already holds this round's run"), "{again}");
    // Left unfinished (as a pod killed mid-run leaves it): resumed, not measured anew.
    let mut store = Store::open(&db).unwrap();
    store.reopen_run(1).unwrap();
    store.mark_interrupted(1).unwrap();
    drop(store);
    let resumed = measure();
    assert!(resumed.contains("resuming the unfinished run"), "{resumed}");
    let store = Store::open_read_only(&db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, smtlab_model::RunStatus::Finished);
}

/// `smtlab push` of a 300-cell run (75 variants x 4 placements, 5 samples a cell) into
/// PostgreSQL stores every row, once; the time each push takes is printed (run with
/// `--nocapture` to see it: the figure quoted in the change's notes).
#[test]
fn push_of_a_300_cell_run_stores_every_row_once() {
    let Some((server, url)) = common::pg_server("push of a 300-cell run") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("host.db");
    let threads: Vec<String> = (1..=75).map(|t| t.to_string()).collect();
    let threads: Vec<&str> = threads.iter().map(String::as_str).collect();
    let results = smtlab_fixtures::fleet::run_of(&FakeHost::new("big", A, 1.2), &threads);
    assert_eq!(results.cells.len(), 300);
    Store::open(&file).unwrap().import_run(&results).unwrap();
    let push = || {
        let t = std::time::Instant::now();
        let out = stdout_of(
            smtlab()
                .arg("push")
                .arg(&file)
                .args(["--to", &url, "--json"]),
        );
        (t.elapsed(), serde_json::from_str::<Value>(&out).unwrap())
    };
    let (first_t, first) = push();
    assert_eq!(first["pushed"].as_array().unwrap().len(), 1, "{first}");
    let (again_t, again) = push();
    assert_eq!(
        again["already_there"].as_array().unwrap().len(),
        1,
        "{again}"
    );

    let install = PgInstall::find().unwrap();
    let tables = [
        "runs",
        "plan",
        "cells",
        "samples",
        "summaries",
        "series",
        "rounds",
        "skipped",
    ];
    let query = tables
        .iter()
        .map(|t| format!("(SELECT count(*) FROM smtlab.{t})"))
        .collect::<Vec<_>>()
        .join(" || ' ' || ");
    let out = std::process::Command::new(install.bin("psql"))
        .args(["-At", "-d", &url, "-c", &format!("SELECT {query}")])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counts: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let rows: Vec<String> = tables
        .iter()
        .zip(&counts)
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    eprintln!(
        "push of a 300-cell run into PostgreSQL: {:.3} s; again (already there): {:.3} s; rows: {}",
        first_t.as_secs_f64(),
        again_t.as_secs_f64(),
        rows.join(", ")
    );
    assert_eq!(&counts[..4], [1, 300, 300, 1500], "{rows:?}");
    drop(server);
}
