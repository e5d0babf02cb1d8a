//! Nothing smtlab starts outlives it, nothing it writes is left behind: `kill -9`
//! and every signal `run` handles, sent to `smtlab bench` during a cell with a real
//! server (nginx, Apache prefork and event, a user's server that daemonizes) or during
//! dbench. What is checked is the processes recorded while smtlab ran (its process tree
//! and its cgroup, pid and start time), not names: others may run nginx at the same time.
//! The scratch directories live in a private `TMPDIR`.
//!
//! nginx, apache2, busybox and dbench are needed: a missing one skips the test with a
//! line, and fails it under `SMTLAB_REQUIRE_TOOLS=1` (which CI sets after installing
//! them).

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;

fn smtlab() -> Command {
    Command::cargo_bin("smtlab").expect("the smtlab binary is built")
}

/// Whether `program` can be found; a missing one is skipped with a line, or fails the
/// test under `SMTLAB_REQUIRE_TOOLS=1`.
fn require(program: &str, places: &[&str]) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).any(|d| d.join(program).is_file())
        || places.iter().any(|p| Path::new(p).is_file());
    if !found {
        smtlab_fixtures::require::skip(&format!("{program} is not installed"));
    }
    found
}

fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    if rest.split_whitespace().next() == Some("Z") {
        return None; // a zombie is dead, only not reaped yet (by init)
    }
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Every descendant of `pid` now.
fn descendants(pid: u32, out: &mut BTreeSet<u32>) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for t in tasks.flatten() {
        let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
            if out.insert(c) {
                descendants(c, out);
            }
        }
    }
}

/// smtlab's cgroup (`smtlab-PID-START` below its own cgroup), when it made one.
fn cgroup_of(pid: u32) -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2")
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let parent = mount.join(path.trim().trim_start_matches('/'));
    let prefix = format!("smtlab-{pid}-");
    std::fs::read_dir(parent)
        .ok()?
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
}

fn cgroup_pids(dir: &Path, out: &mut BTreeSet<u32>) {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    out.extend(
        procs
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok()),
    );
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            cgroup_pids(&e.path(), out);
        }
    }
}

/// The processes smtlab `pid` started, as (pid, start time, name): its descendants
/// and everything in its cgroup.
fn recorded(pid: u32) -> Vec<(u32, u64, String)> {
    let mut pids = BTreeSet::new();
    descendants(pid, &mut pids);
    if let Some(cg) = cgroup_of(pid) {
        cgroup_pids(&cg, &mut pids);
    }
    pids.into_iter()
        .filter_map(|p| Some((p, start_time(p)?, name(p))))
        .collect()
}

/// Those of `procs` still running (same pid, same start time, not a zombie).
fn still_running(procs: &[(u32, u64, String)]) -> Vec<String> {
    procs
        .iter()
        .filter(|(p, start, _)| start_time(*p) == Some(*start))
        .map(|(p, _, n)| format!("{n} (pid {p})"))
        .collect()
}

/// A private temporary directory for smtlab's scratch directories.
fn private_tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn scratch_left(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("smtlab-"))
        .collect()
}

/// Starts `smtlab bench web-static` with `params` in `tmp`, waits until the server
/// tree (at least `want` processes named one of `names`) runs, and returns it with
/// the processes recorded then.
// The child is returned, and the caller waits for it (kill_and_check).
#[allow(clippy::zombie_processes)]
fn start_web(
    params: &[String],
    tmp: &Path,
    names: &[&str],
    want: usize,
) -> (Child, Vec<(u32, u64, String)>) {
    let mut cmd = smtlab();
    cmd.args(["-q", "bench", "web-static", "--max-samples", "3"])
        .args(["--param", "duration=20s", "--param", "conns=4"])
        .args(["--param", "dataset=8MiB"]);
    for p in params {
        cmd.args(["--param", p]);
    }
    let mut child = cmd
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let procs = recorded(child.id());
        let servers = procs
            .iter()
            .filter(|(_, _, n)| names.contains(&n.as_str()))
            .count();
        if servers >= want {
            // A moment more for the load to run against it.
            std::thread::sleep(Duration::from_millis(500));
            let procs = recorded(child.id());
            return (child, procs);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no {names:?} started under smtlab within 60 s: {procs:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `sig` to smtlab, waits for it, and checks that none of `procs` runs 10 s
/// later at the latest and that `tmp` holds no scratch directory (unless `sig` is
/// SIGKILL, after which the next start sweeps them).
fn kill_and_check(mut child: Child, procs: &[(u32, u64, String)], sig: i32, tmp: &Path) {
    let pid = child.id();
    let cgroup = cgroup_of(pid);
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
    let status = smtlab_fixtures::bounded::wait(&mut child, "the child process");
    if sig == libc::SIGKILL {
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    } else {
        assert!(
            status.signal() == Some(sig) || status.code() == Some(128 + sig),
            "smtlab did not end by signal {sig}: {status}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = still_running(procs);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = still_running(procs);
    }
    assert!(
        left.is_empty(),
        "signal {sig}: still running 10 s after smtlab ended: {left:?} (recorded {procs:?})"
    );
    if let Some(cg) = cgroup {
        let deadline = Instant::now() + Duration::from_secs(5);
        while cg.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!cg.exists(), "cgroup {} left", cg.display());
    }
    if sig != libc::SIGKILL {
        let left = scratch_left(tmp);
        assert!(left.is_empty(), "signal {sig}: scratch left: {left:?}");
    }
}

#[test]
fn kill_9_during_an_nginx_cell_leaves_no_process() {
    if !require("nginx", &["/usr/sbin/nginx"]) {
        return;
    }
    let tmp = private_tmp();
    let (child, procs) = start_web(&["server=nginx".into()], tmp.path(), &["nginx"], 2);
    kill_and_check(child, &procs, libc::SIGKILL, tmp.path());
}

#[test]
fn kill_9_during_apache_cells_leaves_no_process() {
    if !require("apache2", &["/usr/sbin/apache2"]) {
        return;
    }
    for server in ["apache-prefork", "apache-event"] {
        let tmp = private_tmp();
        let (child, procs) = start_web(
            &[format!("server={server}")],
            tmp.path(),
            &["apache2", "httpd"],
            3,
        );
        kill_and_check(child, &procs, libc::SIGKILL, tmp.path());
    }
}

#[test]
fn kill_9_during_a_daemonizing_server_cell_leaves_no_process() {
    if !require("busybox", &[]) {
        return;
    }
    let tmp = private_tmp();
    // busybox httpd without -f forks into the background and leaves smtlab's tree:
    // only the cgroup holds it.
    let (child, procs) = start_web(
        &[
            "server=cmd".into(),
            "cmd=busybox httpd -p 127.0.0.1:{port} -h {root}".into(),
        ],
        tmp.path(),
        &["busybox"],
        1,
    );
    assert!(
        cgroup_of(child.id()).is_some(),
        "smtlab made no cgroup: a daemon cannot be caught here"
    );
    kill_and_check(child, &procs, libc::SIGKILL, tmp.path());
}

#[test]
fn every_signal_run_handles_ends_bench_with_its_server_and_scratch_gone() {
    smtlab_fixtures::signals::deliverable();
    if !require("nginx", &["/usr/sbin/nginx"]) || !require("apache2", &["/usr/sbin/apache2"]) {
        return;
    }
    for (sig, server) in [
        (libc::SIGTERM, "nginx"),
        (libc::SIGINT, "apache-prefork"),
        (libc::SIGHUP, "nginx"),
        (libc::SIGQUIT, "apache-event"),
    ] {
        let tmp = private_tmp();
        let names: &[&str] = if server == "nginx" {
            &["nginx"]
        } else {
            &["apache2", "httpd"]
        };
        let (child, procs) = start_web(&[format!("server={server}")], tmp.path(), names, 2);
        assert!(
            !scratch_left(tmp.path()).is_empty(),
            "the cell made no scratch directory in TMPDIR"
        );
        kill_and_check(child, &procs, sig, tmp.path());
    }
}

#[test]
fn a_daemonizing_command_is_killed_and_named() {
    let tmp = private_tmp();
    let out = smtlab()
        .args(["exec", "-p", "1c1t", "--reps", "1", "--warmup", "0", "--db"])
        .arg(tmp.path().join("results.db"))
        .arg("--")
        .args(["sh", "-c", "setsid sleep 3606 & sleep 0.2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("note: killed 1 process") && stderr.contains("left running"),
        "{stderr}"
    );
    // The pid named is gone.
    let pid: u32 = stderr
        .split("(pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no pid named: {stderr}"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while start_time(pid).is_some() && name(pid) == "sleep" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !(start_time(pid).is_some() && name(pid) == "sleep"),
        "sleep {pid} still runs"
    );
}

fn dbench(tmp: &Path) -> Child {
    smtlab()
        .args(["-q", "bench", "dbench", "--max-samples", "3"])
        .args(["--param", "duration=20s", "--param", "clients=2"])
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for_scratch(tmp: &Path, prefix: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !scratch_left(tmp).iter().any(|n| n.starts_with(prefix)) {
        assert!(Instant::now() < deadline, "no {prefix}* made within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn interrupted_dbench_leaves_no_scratch_and_a_killed_ones_is_swept_next_time() {
    if !require("dbench", &[]) {
        return;
    }
    let tmp = private_tmp();
    // SIGTERM: removed before smtlab dies.
    let child = dbench(tmp.path());
    wait_for_scratch(tmp.path(), "smtlab-dbench-");
    kill_and_check(child, &[], libc::SIGTERM, tmp.path());

    // kill -9 leaves it; so does a planted one of a process that is gone; the next
    // start sweeps both and keeps a live owner's.
    let mut child = dbench(tmp.path());
    wait_for_scratch(tmp.path(), "smtlab-dbench-");
    child.kill().unwrap();
    smtlab_fixtures::bounded::wait(&mut child, "the child process");
    let planted = tmp.path().join("smtlab-web-4000000-7");
    std::fs::create_dir(&planted).unwrap();
    std::fs::write(planted.join("owner"), "4000000 12345\n").unwrap();
    let live = tmp
        .path()
        .join(format!("smtlab-dbench-{}-0", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let me = std::process::id();
    std::fs::write(
        live.join("owner"),
        format!("{me} {}\n", start_time(me).unwrap()),
    )
    .unwrap();
    let killed_left = scratch_left(tmp.path());
    assert!(
        killed_left.len() >= 3,
        "kill -9 should leave its directory: {killed_left:?}"
    );

    let out = smtlab()
        .args(["-q", "bench", "web-static", "--quick"])
        .args(["--param", "duration=100ms", "--param", "conns=2"])
        .args(["--param", "server=threads"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = smtlab()
        .args(["-q", "bench", "dbench", "--quick"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = scratch_left(tmp.path());
    assert_eq!(
        left,
        vec![format!("smtlab-dbench-{me}-0")],
        "only the live owner's directory stays"
    );
}

/// A directory on no standard place holding `nginx` as a link to the real program.
fn nginx_link() -> Option<(tempfile::TempDir, PathBuf)> {
    let real = ["/usr/sbin/nginx", "/usr/local/sbin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())?;
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("nginx")).unwrap();
    Some((dir, real))
}

fn web_nginx(path: &str, extra: &[&str]) -> std::process::Output {
    smtlab()
        .args(["bench", "web-static", "--quick"])
        .args(["--param", "duration=100ms", "--param", "conns=2"])
        .args(["--param", "server=nginx"])
        .args(extra)
        .env("PATH", path)
        .output()
        .unwrap()
}

#[test]
fn nginx_is_found_on_path_and_through_its_parameter() {
    if !require("nginx", &["/usr/sbin/nginx"]) {
        return;
    }
    let (dir, _real) = nginx_link().unwrap();
    // /usr/sbin and /usr/local/sbin are off PATH: only the link finds nginx.
    let path = format!("{}:/usr/bin:/bin", dir.path().display());
    let out = web_nginx(&path, &[]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Mbit/s") && !text.contains("not installed"),
        "{text}"
    );

    // Through --param, with nothing on PATH.
    let given = format!("nginx={}", dir.path().join("nginx").display());
    let out = web_nginx("/usr/bin:/bin", &["--param", &given]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("Mbit/s") && !text.contains("not installed"),
        "{text}"
    );

    // A wrong path is named in one line.
    let out = web_nginx("/usr/bin:/bin", &["--param", "nginx=/nonexistent/nginx"]);
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(text.contains("nginx=\"/nonexistent/nginx\""), "{text}");
}
