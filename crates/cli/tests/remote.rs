//! Server workloads with their load on other hosts: three network namespaces, a server
//! "host" with a bridge and two client "hosts" joined to it by veth links (traffic never
//! leaves the machine), an `smtlab agent` in each client namespace, smtlab measuring in
//! the server's. Needs root and `ip` (iproute2); skipped without them (failed under
//! SMTLAB_REQUIRE_TOOLS=1). The server side runs on the fake machine, so `1c1t-up` takes
//! CPU 1 offline in its tree only, never on this host.
//!
//! Every namespace and process a test makes is removed by a guard's `Drop`, also when
//! the test fails.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

const TOKEN: &str = "token-for-the-namespace-tests";
const SERVER_IP: &str = "10.77.0.1";
const PORT: u16 = 7400;

fn smtlab() -> &'static str {
    env!("CARGO_BIN_EXE_smtlab")
}

/// Whether namespaces can be made here; else why not.
fn can_make_namespaces() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("network namespaces need root".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("`ip` (iproute2) is not installed: apt-get install iproute2".into()),
    }
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The namespaces, the agents and the files of one test; dropping it kills every
/// process it started (by its id) and deletes the namespaces.
struct Lab {
    server_ns: String,
    client_ns: Vec<String>,
    agents: Vec<Option<Child>>,
    children: Vec<Child>,
    dir: tempfile::TempDir,
}

static LABS: AtomicUsize = AtomicUsize::new(0);

impl Lab {
    /// A server namespace with a bridge at 10.77.0.1/24 and `clients` client
    /// namespaces at 10.77.0.2, .3, ... each on a veth link to the bridge.
    fn new(clients: usize) -> Lab {
        let n = LABS.fetch_add(1, Ordering::SeqCst);
        let id = format!("smtlab-rt-{}-{n}", std::process::id());
        let mut lab = Lab {
            server_ns: format!("{id}-s"),
            client_ns: Vec::new(),
            agents: Vec::new(),
            children: Vec::new(),
            dir: tempfile::tempdir().unwrap(),
        };
        // Made before anything can fail, so the guard deletes it.
        ip(&["netns", "add", &lab.server_ns]);
        let s = lab.server_ns.clone();
        ip(&["-n", &s, "link", "set", "lo", "up"]);
        ip(&["-n", &s, "link", "add", "br0", "type", "bridge"]);
        ip(&[
            "-n",
            &s,
            "addr",
            "add",
            &format!("{SERVER_IP}/24"),
            "dev",
            "br0",
        ]);
        ip(&["-n", &s, "link", "set", "br0", "up"]);
        for c in 0..clients {
            let ns = format!("{id}-c{c}");
            ip(&["netns", "add", &ns]);
            lab.client_ns.push(ns.clone());
            let veth = format!("v{c}");
            ip(&[
                "-n", &s, "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ]);
            ip(&["-n", &s, "link", "set", &veth, "master", "br0", "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", Lab::client_ip(c)),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        write_secret(&lab.token(), &format!("{TOKEN}\n"));
        lab
    }

    fn client_ip(c: usize) -> String {
        format!("10.77.0.{}", c + 2)
    }

    fn agent_addr(c: usize) -> String {
        format!("{}:{PORT}", Lab::client_ip(c))
    }

    fn hosts(&self) -> String {
        (0..self.client_ns.len())
            .map(Lab::agent_addr)
            .collect::<Vec<_>>()
            .join(",")
    }

    fn token(&self) -> PathBuf {
        self.dir.path().join("token")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Starts an agent in every client namespace, its load thread on CPU 1, and waits
    /// for each to listen.
    fn start_agents(&mut self) {
        for c in 0..self.client_ns.len() {
            let mut child = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.client_ns[c],
                    smtlab(),
                    "agent",
                    "--listen",
                ])
                .arg(Lab::agent_addr(c))
                .arg("--token")
                .arg(self.token())
                .args(["--allow", SERVER_IP, "--cpus", "1"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let stdout = child.stdout.take().unwrap();
            self.agents.push(Some(child));
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let mut first = String::new();
                let mut r = BufReader::new(stdout);
                let _ = r.read_line(&mut first);
                let _ = tx.send(first);
                // Drain the rest so the agent never blocks on a full pipe.
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 0) {
                    line.clear();
                }
            });
            let first = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
            assert!(first.contains("listening on"), "agent {c}: {first:?}");
        }
    }

    /// Kills agent `c` (SIGKILL, by its process id) and reaps it.
    fn kill_agent(&mut self, c: usize) {
        if let Some(mut a) = self.agents[c].take() {
            let _ = a.kill();
            let _ = a.wait();
        }
    }

    /// smtlab in the server namespace, on the fake machine of this lab.
    fn smtlab_in_server(&self) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.server_ns, smtlab()]);
        c.arg(format!("--fake-machine={}", self.path("machine").display()));
        c
    }

    fn fake_cpu_file(&self, rel: &str) -> String {
        let p = self.path("machine/sys/devices/system/cpu").join(rel);
        std::fs::read_to_string(p).unwrap().trim().to_string()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for c in 0..self.agents.len() {
            self.kill_agent(c);
        }
        for ns in self
            .client_ns
            .iter()
            .chain(std::iter::once(&self.server_ns))
        {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn namespaces_or_skip() -> bool {
    match can_make_namespaces() {
        Ok(()) => true,
        Err(why) => {
            smtlab_fixtures::require::skip(&why);
            false
        }
    }
}

/// A token file as it must be: readable by its owner alone.
fn write_secret(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn namespaces_left(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

#[test]
fn web_static_on_1c1t_up_with_its_clients_in_two_other_namespaces() {
    if !namespaces_or_skip() {
        return;
    }
    let mut lab = Lab::new(2);
    let prefix = lab.server_ns.trim_end_matches("-s").to_string();
    lab.start_agents();
    let out = lab
        .smtlab_in_server()
        .args([
            "bench",
            "web-static",
            "-p",
            "1c1t-up",
            "--quick",
            "--max-samples",
            "3",
        ])
        .args(["--client-hosts", &lab.hosts(), "--client-token"])
        .arg(lab.token())
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cell = &v["cells"][0];
    assert_eq!(cell["placement"]["name"], "1c1t-up", "{cell}");
    assert_eq!(cell["placement"]["cpus"], serde_json::json!([0]));
    let samples = cell["result"]["samples"].as_array().unwrap();
    assert!(samples.len() >= 3, "{cell}");
    for s in samples {
        let m = &s["metrics"];
        assert_eq!(m["agents"], 2.0, "{s}");
        assert_eq!(m["errors"], 0.0, "{s}");
        let (a0, a1) = (
            m["agent0_requests_per_s"].as_f64().unwrap(),
            m["agent1_requests_per_s"].as_f64().unwrap(),
        );
        // Both agents loaded the server, and the sample's rate is theirs summed.
        assert!(a0 > 0.0 && a1 > 0.0, "{s}");
        // One host, one clock: the measured offset is within the round trip (and 1 ms).
        for i in 0..2 {
            let off = m[format!("agent{i}_clock_offset_ns")].as_f64().unwrap();
            let rtt = m[format!("agent{i}_rtt_ns")].as_f64().unwrap();
            assert!(off.abs() <= rtt.max(1e6), "{s}");
        }
        let summed = m["requests_per_s"].as_f64().unwrap();
        assert!((summed - (a0 + a1)).abs() < 1e-6 * summed, "{s}");
    }
    // The uniprocessor state was entered and left on the fake machine's tree.
    assert_eq!(lab.fake_cpu_file("cpu1/online"), "1");
    let journal = std::fs::read_to_string(lab.path("machine/writes.log")).unwrap();
    assert!(journal.contains("cpu1/online 0"), "{journal}");

    // SMT off and on, the clients elsewhere: both states measured, SMT put back.
    let out = lab
        .smtlab_in_server()
        .args([
            "bench",
            "web-static",
            "-p",
            "1c1t",
            "--smt",
            "off,on",
            "--quick",
        ])
        .args([
            "--max-samples",
            "3",
            "--client-hosts",
            &lab.hosts(),
            "--client-token",
        ])
        .arg(lab.token())
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut states: Vec<String> = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert!(c["result"]["samples"][0]["metrics"]["agents"] == 2.0, "{c}");
            c["conditions"]["smt"].as_str().unwrap_or("?").to_string()
        })
        .collect();
    states.sort();
    assert_eq!(states, ["off", "on"], "{v}");
    assert_eq!(lab.fake_cpu_file("smt/control"), "on");
    drop(lab);
    assert!(
        namespaces_left(&prefix).is_empty(),
        "namespaces left behind"
    );
}

#[test]
fn a_coordinator_without_the_token_is_refused_in_one_line() {
    if !namespaces_or_skip() {
        return;
    }
    let mut lab = Lab::new(1);
    lab.start_agents();
    let wrong = lab.path("wrong-token");
    write_secret(&wrong, "not-the-token-of-the-agents\n");
    let out = lab
        .smtlab_in_server()
        .args([
            "load",
            &format!("http://{SERVER_IP}:9/"),
            "-c",
            "2",
            "-d",
            "1",
        ])
        .args(["--client-hosts", &lab.hosts(), "--client-token"])
        .arg(&wrong)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&Lab::agent_addr(0)) && err.contains("wrong token"),
        "{err}"
    );
}

fn report_json(lab: &Lab, db: &Path) -> Value {
    let out = Command::new(smtlab())
        .args(["report", "--json", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", lab.server_ns))
}

/// The run's row in `runs --json`.
fn run_status(db: &Path) -> String {
    let out = Command::new(smtlab())
        .args(["runs", "--json", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["status"].as_str().unwrap_or("?").to_string()
}

#[test]
fn an_agent_killed_mid_run_leaves_its_load_to_the_other_and_the_cells_say_so() {
    if !namespaces_or_skip() {
        return;
    }
    let mut lab = Lab::new(2);
    let prefix = lab.server_ns.trim_end_matches("-s").to_string();
    lab.start_agents();
    let db = lab.path("r.db");
    // Two cells in three rounds, their samples in turn: about 10 s of load.
    let child = lab
        .smtlab_in_server()
        .args(["run", "--suite", "quick", "--bench", "web-static"])
        .args(["--placements", "1c1t,1c2t", "--repeat", "3", "--db"])
        .arg(&db)
        .args(["--client-hosts", &lab.hosts(), "--client-token"])
        .arg(lab.token())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed (SIGKILL) while the cells take their samples; wherever it lands, what
    // comes after must come from the other agent.
    std::thread::sleep(Duration::from_secs(4));
    lab.kill_agent(1);
    let out = smtlab_fixtures::bounded::output_within(child, Duration::from_secs(180), "the run");
    let all = text(&out).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(out.status.success(), "{all}");
    assert_eq!(run_status(&db), "finished", "{all}");
    assert!(all.contains("2 cells measured, 0 skipped"), "{all}");
    assert!(all.contains("load from 1 of 2 agents: 1 lost"), "{all}");
    let v = report_json(&lab, &db);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{v}");
    let mut after = 0;
    for c in cells {
        let samples = c["result"]["samples"].as_array().unwrap();
        assert!(samples.len() >= 3, "{c}");
        for s in samples {
            let m = &s["metrics"];
            // Every sample's load came from both agents, or from the one left and
            // says one was lost.
            if m["agents"] == 1.0 {
                assert_eq!(m["agents_lost"], 1.0, "{s}");
                after += 1;
            } else {
                assert_eq!(m["agents"], 2.0, "{s}");
            }
            assert!(m["requests_per_s"].as_f64().unwrap() > 0.0, "{s}");
        }
    }
    assert!(after > 0, "no sample after the agent was killed: {v}");

    // No agent left: each cell fails in one line naming it, and a run that stored no
    // cell fails and is not finished.
    lab.kill_agent(0);
    let out = lab
        .smtlab_in_server()
        .args(["run", "--suite", "quick", "--bench", "web-static"])
        .args(["--placements", "1c1t,1c2t", "--db"])
        .arg(lab.path("none.db"))
        .args(["--client-hosts", &lab.hosts(), "--client-token"])
        .arg(lab.token())
        .output()
        .unwrap();
    let all = text(&out).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(!out.status.success(), "{all}");
    assert_eq!(run_status(&lab.path("none.db")), "interrupted", "{all}");
    assert!(all.contains("stored no cell"), "{all}");
    assert!(
        all.contains(&format!("agent {}: cannot connect", Lab::agent_addr(0)))
            || all.contains(&format!("agent {}: cannot connect", Lab::agent_addr(1))),
        "{all}"
    );
    drop(lab);
    assert!(
        namespaces_left(&prefix).is_empty(),
        "namespaces left behind"
    );
}

#[test]
fn bad_agent_settings_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    write_secret(&short, "short\n");
    let good = dir.path().join("good");
    write_secret(&good, &format!("{TOKEN}\n"));
    let run = |args: &[&str], token: &Path| {
        let out = Command::new(smtlab())
            .args(["agent", "--listen", "127.0.0.1:0", "--token"])
            .arg(token)
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let e = run(&[], &short);
    assert!(e.contains("at least 16 characters"), "{e}");
    let e = run(&["--allow", "0.0.0.0/0"], &good);
    assert!(e.contains("--allow") && e.contains("every address"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    let e = run(&["--allow", "not-an-address"], &good);
    assert!(e.contains("expected an address"), "{e}");
}

/// Whether nginx is installed; else the test is skipped (failed under
/// SMTLAB_REQUIRE_TOOLS=1).
fn nginx_or_skip() -> bool {
    if smtlab_workloads::web::real::missing("nginx").is_some() {
        smtlab_fixtures::require::skip("nginx is not installed: apt-get install nginx");
        return false;
    }
    true
}

/// The cells of `v` (`bench --json` or `report --json`) and each one's agents metric.
fn agents_of(v: &Value) -> Vec<(String, f64)> {
    v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["benchmark"].as_str().unwrap_or("?").to_string(),
                c["result"]["samples"][0]["metrics"]["agents"]
                    .as_f64()
                    .unwrap_or(0.0),
            )
        })
        .collect()
}

#[test]
fn nginx_serves_the_agents_and_bench_shows_them_in_80_columns() {
    if !namespaces_or_skip() || !nginx_or_skip() {
        return;
    }
    let mut lab = Lab::new(2);
    lab.start_agents();
    let db = lab.path("r.db");
    let bench = lab
        .smtlab_in_server()
        .env("COLUMNS", "80")
        .args(["bench", "web-static", "-p", "1c1t", "--quick"])
        .args(["--param", "server=nginx", "--max-samples", "3"])
        .args(["--client-hosts", &lab.hosts(), "--client-token"])
        .arg(lab.token())
        .output()
        .unwrap();
    let run = lab
        .smtlab_in_server()
        .env("COLUMNS", "80")
        .args(["run", "--suite", "quick", "--bench", "web-static"])
        .args(["--placements", "1c1t", "--param", "server=nginx", "--db"])
        .arg(&db)
        .args(["--client-hosts", &lab.hosts(), "--client-token"])
        .arg(lab.token())
        .output()
        .unwrap();
    for out in [&bench, &run] {
        assert!(out.status.success(), "{}", text(out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.lines().all(|l| l.chars().count() <= 80), "{stdout}");
        // The agents' heading, then a line per agent: share, errors and clock.
        assert!(stdout.contains("2 agents, started within"), "{stdout}");
        for i in 0..2 {
            let line = stdout
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("#{i} ")))
                .unwrap_or_else(|| panic!("no line of agent {i}: {stdout}"));
            assert!(
                line.contains("req/s") && line.contains("0 errors") && line.contains("clock"),
                "{line}"
            );
        }
    }
    // What was stored: the samples of nginx carry both agents' figures, and the
    // report's JSON and HTML give them back.
    let v = report_json(&lab, &db);
    assert_eq!(agents_of(&v), [("web-static".to_string(), 2.0)], "{v}");
    let m = &v["cells"][0]["result"]["samples"][0]["metrics"];
    for key in [
        "agent0_requests_per_s",
        "agent1_requests_per_s",
        "agent0_errors",
        "agent1_clock_offset_ns",
        "agent1_rtt_ns",
        "agents_start_spread_ns",
    ] {
        assert!(m[key].is_number(), "{key}: {m}");
    }
    assert!(m["agent0_requests_per_s"].as_f64().unwrap() > 0.0, "{m}");
    assert_eq!(v["cells"][0]["params"]["server"], "nginx", "{v}");
    let html = lab.path("r.html");
    let out = Command::new(smtlab())
        .args(["report", "--db"])
        .arg(&db)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<h3>Remote load clients</h3>"),
        "no agents table"
    );
}

#[test]
fn web_slo_and_web_capacity_search_with_remote_agents() {
    if !namespaces_or_skip() {
        return;
    }
    let mut lab = Lab::new(2);
    lab.start_agents();
    for (bench, params) in [
        (
            "web-slo",
            ["max_rate=1600", "step=0.2", "slo=p99=200ms", "conns=8"],
        ),
        (
            "web-capacity",
            ["max_conns=16", "step=0.3", "dataset=8MiB", "rate_kbit=400"],
        ),
    ] {
        let mut cmd = lab.smtlab_in_server();
        cmd.args(["bench", bench, "-p", "1c1t", "--quick"])
            .args(["--max-samples", "3"]);
        for p in params {
            cmd.args(["--param", p]);
        }
        let out = cmd
            .args(["--client-hosts", &lab.hosts(), "--client-token"])
            .arg(lab.token())
            .arg("--json")
            .output()
            .unwrap();
        assert!(out.status.success(), "{bench}: {}", text(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(agents_of(&v), [(bench.to_string(), 2.0)], "{v}");
        let m = &v["cells"][0]["result"]["samples"][0]["metrics"];
        // Both agents sent part of every search's load.
        for i in 0..2 {
            let rps = m[format!("agent{i}_requests_per_s")].as_f64().unwrap();
            assert!(rps > 0.0, "{bench}: {m}");
        }
        assert!(
            v["cells"][0]["result"]["summary"]["median"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }
}

#[test]
fn apache_serves_the_agents_with_both_mpms() {
    if !namespaces_or_skip() {
        return;
    }
    if let Some(why) = smtlab_workloads::web::real::missing("apache2") {
        smtlab_fixtures::require::skip(&why);
        return;
    }
    let mut lab = Lab::new(2);
    lab.start_agents();
    for server in ["apache-prefork", "apache-event"] {
        let out = lab
            .smtlab_in_server()
            .args(["bench", "web-static", "-p", "1c1t", "--quick"])
            .args(["--param", &format!("server={server}"), "--max-samples", "3"])
            .args(["--client-hosts", &lab.hosts(), "--client-token"])
            .arg(lab.token())
            .arg("--json")
            .output()
            .unwrap();
        assert!(out.status.success(), "{server}: {}", text(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(agents_of(&v), [("web-static".to_string(), 2.0)], "{v}");
        let m = &v["cells"][0]["result"]["samples"][0]["metrics"];
        assert_eq!(m["errors"], 0.0, "{server}: {m}");
        for i in 0..2 {
            let rps = m[format!("agent{i}_requests_per_s")].as_f64().unwrap();
            assert!(rps > 0.0, "{server}: {m}");
        }
    }
}

#[test]
fn servers_on_loopback_only_are_refused_with_remote_clients_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    write_secret(&token, &format!("{TOKEN}\n"));
    for server in ["seda", "cmd"] {
        let out = Command::new(smtlab())
            .args(["bench", "web-static", "-p", "1c1t", "--quick"])
            .args(["--param", &format!("server={server}")])
            .args(["--param", "cmd=true {port}"])
            // Nothing listens there: the refusal comes before any agent is reached.
            .args(["--client-hosts", "127.0.0.1:9", "--client-token"])
            .arg(&token)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find(|l| l.starts_with("smtlab: error"))
            .unwrap_or_else(|| panic!("{err}"));
        assert!(
            line.contains(&format!("server={server} with --client-hosts"))
                && line.contains("loopback only"),
            "{err}"
        );
    }
}

/// An agent on loopback under `ulimit -n files` (soft and hard), killed on drop; its
/// stdout lines as they come.
struct LoopbackAgent {
    child: Child,
    addr: String,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
    token: PathBuf,
}

impl LoopbackAgent {
    fn start(files: u32) -> LoopbackAgent {
        LoopbackAgent::start_with(files, "")
    }

    /// An agent with `flags` added to its command line (`--tls`).
    fn start_with(files: u32, flags: &str) -> LoopbackAgent {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        write_secret(&token, &format!("{TOKEN}\n"));
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n {files} && exec \"$0\" agent --listen 127.0.0.1:0 --token \"$1\" {flags}"
            ))
            .arg(smtlab())
            .arg(&token)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let l2 = lines.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 0) {
                let _ = tx.send(line.clone());
                l2.lock().unwrap().push(std::mem::take(&mut line));
            }
        });
        let first = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let addr = first
            .split("listening on ")
            .nth(1)
            .and_then(|s| s.split(';').next())
            .unwrap_or_else(|| panic!("{first:?}"))
            .to_string();
        LoopbackAgent {
            child,
            addr,
            lines,
            _dir: dir,
            token,
        }
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for LoopbackAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_agent_out_of_descriptors_keeps_serving_and_refuses_what_cannot_fit() {
    let mut agent = LoopbackAgent::start(48);
    // More connections than descriptors: accept fails with EMFILE for a while. They
    // come from eight addresses of loopback, as the agent takes at most 8 unproved
    // connections from one.
    let to: std::net::SocketAddr = agent.addr.parse().unwrap();
    let held: Vec<socket2::Socket> = (0..64)
        .filter_map(|i| {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
            let from: std::net::SocketAddr = format!("127.0.0.{}:0", 2 + i % 8).parse().unwrap();
            s.bind(&from.into()).ok()?;
            s.connect_timeout(&to.into(), Duration::from_secs(2)).ok()?;
            Some(s)
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        agent.alive(),
        "the agent exited: {:?}",
        agent.lines.lock().unwrap()
    );
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    // A load that does not fit in the descriptors left is refused in one line, and the
    // agent goes on.
    let out = Command::new(smtlab())
        .args(["load", "http://127.0.0.1:1/x", "-c", "30000", "-d", "1"])
        .args(["--client-hosts", &agent.addr, "--client-token"])
        .arg(&agent.token)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("open-file limit"), "{err}");
    assert!(agent.alive());
    let lines = agent.lines.lock().unwrap().join("");
    assert!(lines.contains("cannot accept a connection"), "{lines}");
}

#[test]
fn a_token_file_others_can_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new(smtlab())
        .args(["agent", "--listen", "127.0.0.1:0", "--token"])
        .arg(&token)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mode 644") && err.contains("chmod 600"),
        "{err}"
    );
}

/// A server on loopback answering every request head with an empty 200, until the test
/// ends; its address.
fn empty_200_server() -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut b = [0u8; 4096];
                while let Ok(n @ 1..) = conn.read(&mut b) {
                    got.extend_from_slice(&b[..n]);
                    while let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        got.drain(..end + 4);
                        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
                        if conn.write_all(ok).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn load_over_tls_runs_with_client_tls_and_is_told_to_use_it_without() {
    let agent = LoopbackAgent::start_with(1024, "--tls");
    let server = empty_200_server();
    let load = |tls: bool| {
        let mut cmd = Command::new(smtlab());
        cmd.args([
            "load",
            &format!("http://{server}/x"),
            "-c",
            "2",
            "-d",
            "0.5",
        ])
        .args(["--client-hosts", &agent.addr, "--client-token"])
        .arg(&agent.token);
        if tls {
            cmd.arg("--client-tls");
        }
        cmd.output().unwrap()
    };
    let out = load(true);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("requests"), "{}", text(&out));
    let out = load(false);
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--client-tls"), "{err}");
    let lines = agent.lines.lock().unwrap().join("");
    assert!(lines.contains("TLS"), "{lines}");
}
