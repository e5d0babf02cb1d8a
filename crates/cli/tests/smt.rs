//! `smtlab smt` against fake sysfs trees (writes only change files there), and against
//! this machine read-only.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn smtlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_smtlab"))
}

/// Two cores with two siblings each, SMT on; CPU 0 has no online file.
fn tree() -> tempfile::TempDir {
    smtlab_fixtures::sysfs::smt_tree(Some("on"), 2)
}

fn control(dir: &Path) -> String {
    fs::read_to_string(dir.join("sys/devices/system/cpu/smt/control"))
        .unwrap()
        .trim()
        .to_string()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn shows_the_state_of_a_tree() {
    let dir = tree();
    fs::write(dir.path().join("sys/devices/system/cpu/cpu3/online"), "0").unwrap();
    let out = smtlab()
        .arg("smt")
        .arg("--sysfs")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("SMT control  on"), "{text}");
    assert!(
        text.contains("CPUs online  0-2 (offline: 3; can go offline: 1-3)"),
        "{text}"
    );
    assert!(text.contains("2 cores, 1-2 threads online each"), "{text}");
    let out = smtlab()
        .args(["smt", "--json", "--sysfs"])
        .arg(dir.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "smtlab.smt/1");
    assert_eq!(v["control"], "on");
    assert_eq!(v["offline"], serde_json::json!([3]));
}

#[test]
fn a_plain_switch_stays() {
    let dir = tree();
    let out = smtlab()
        .args(["smt", "off", "--sysfs"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("SMT off (was on)"));
    assert_eq!(control(dir.path()), "off");
}

#[test]
fn a_command_runs_with_smt_switched_and_the_state_comes_back() {
    let dir = tree();
    let file = dir.path().join("sys/devices/system/cpu/smt/control");
    let out = smtlab()
        .args(["smt", "off", "--sysfs"])
        .arg(dir.path())
        .args(["--", "cat"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "off");
    assert_eq!(control(dir.path()), "on");
    // A failing command is reported after the restore.
    let out = smtlab()
        .args(["smt", "off", "--sysfs"])
        .arg(dir.path())
        .args(["--", "false"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("command `false` ended with"));
    assert_eq!(control(dir.path()), "on");
}

/// Starts `smt off --hold 60` on a tree and waits until it switched.
fn holding(dir: &Path) -> std::process::Child {
    smtlab_fixtures::signals::deliverable();
    let child = smtlab()
        .args(["smt", "off", "--hold", "60", "--sysfs"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("SMT off in the tree", || control(dir) == "off");
    child
}

#[test]
fn kill_9_while_holding_is_undone_by_the_guardian() {
    let dir = tree();
    let mut child = holding(dir.path());
    child.kill().unwrap(); // SIGKILL
    smtlab_fixtures::bounded::wait(&mut child, "the child process");
    wait_until("the guardian restored SMT on", || {
        control(dir.path()) == "on"
    });
}

#[test]
fn sigint_while_holding_restores_before_dying() {
    let dir = tree();
    let mut child = holding(dir.path());
    // SAFETY: kill on our own child's pid, which is not reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = smtlab_fixtures::bounded::wait(&mut child, "the child process");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status}");
    // Restored by smtlab itself, before it died: no waiting.
    assert_eq!(control(dir.path()), "on");
}

#[test]
fn states_that_cannot_switch_are_one_line_errors() {
    for (state, word) in [
        ("notsupported", "notsupported"),
        ("forceoff", "forceoff"),
        ("notimplemented", "notimplemented"),
    ] {
        let dir = tree();
        fs::write(dir.path().join("sys/devices/system/cpu/smt/control"), state).unwrap();
        let out = smtlab()
            .args(["smt", "on", "--sysfs"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(word), "{err}");
    }
}

#[test]
fn this_machine_shows_its_state_and_refuses_what_it_cannot_switch() {
    let out = smtlab().arg("smt").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("SMT control  "));
    // Never switch the machine running the tests; only check the refusal where there
    // is nothing to switch.
    let state = fs::read_to_string("/sys/devices/system/cpu/smt/control").unwrap_or_default();
    if matches!(state.trim(), "notsupported" | "forceoff" | "notimplemented") {
        let out = smtlab().args(["smt", "off"]).output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(state.trim()), "{err}");
    }
}

#[test]
fn uniprocessor_bench_is_refused_before_measuring_when_it_cannot_be_set_up() {
    // --interleave needs every placement's CPUs at once.
    let out = smtlab()
        .args(["bench", "null-syscall", "--quick", "--interleave"])
        .args(["-p", "1T-UP", "-p", "1c1t"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--interleave with 1c1t-up"), "{err}");

    // Not root: refused before anything runs (checked as an unprivileged user, which
    // only root can become).
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped the not-root part: needs root to drop privileges");
        return;
    }
    if !Path::new("/usr/bin/setpriv").exists() {
        smtlab_fixtures::require::skip("the not-root part needs setpriv (util-linux)");
        return;
    }
    let online = fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let out = Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_smtlab"))
        .args([
            "bench",
            "null-syscall",
            "--quick",
            "-p",
            "1T-UP",
            "-p",
            "1c1t",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs root") && err.lines().count() == 1,
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing measured");
    assert_eq!(
        fs::read_to_string("/sys/devices/system/cpu/online").unwrap(),
        online
    );
}

#[test]
fn bench_smt_both_measures_the_current_state_where_smt_cannot_be_switched() {
    let out = smtlab()
        .args(["bench", "null-syscall", "--quick", "--smt", "sideways"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--smt \"sideways\""), "{err}");

    // Never switch the machine running the tests: the turns themselves are checked on
    // fake trees and in the SMT guest.
    let state = fs::read_to_string("/sys/devices/system/cpu/smt/control").unwrap_or_default();
    let state = state.trim();
    if !matches!(state, "notsupported" | "forceoff" | "notimplemented") {
        eprintln!("skipped: smt/control is {state:?} here, which --smt both would switch");
        return;
    }
    let out = smtlab()
        .args(["bench", "null-syscall", "--quick", "--max-samples", "3"])
        .args(["--smt", "both", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(state) && err.contains("current state only"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{v}");
    assert!(cells[0].get("conditions").is_none(), "{v}");

    // run and exec: the same one line, the current state measured and stored.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    for args in [
        &[
            "run",
            "--suite",
            "quick",
            "--bench",
            "null-syscall",
            "--placements",
            "1c1t",
        ][..],
        &[
            "exec",
            "--placements",
            "1c1t",
            "--reps",
            "2",
            "--warmup",
            "0",
            "--",
            "true",
        ][..],
    ] {
        let (cmd, rest) = args.split_at(1);
        let out = smtlab()
            .args(cmd)
            .args(["--smt", "both", "--db"])
            .arg(&db)
            .args(rest)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        let notes: Vec<&str> = err.lines().filter(|l| l.contains("--smt both")).collect();
        assert_eq!(notes.len(), 1, "{args:?}: {err}");
        assert!(
            notes[0].contains(state) && notes[0].contains("current state only"),
            "{err}"
        );
    }
    let out = smtlab()
        .args(["report", "latest", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let json = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && json.contains("\"cells\""), "{json}");
    assert!(!json.contains("\"smt\": \"off\"") && !json.contains("\"smt\": \"on\""));
}

/// Runs `smtlab smt --sysfs DIR`, killed after 10 s so a hang fails instead of blocking.
fn smt_on(dir: &Path) -> (bool, String, String, Duration) {
    let start = Instant::now();
    let mut child = smtlab()
        .arg("smt")
        .arg("--sysfs")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        child.kill().unwrap();
    }
    let out = smtlab_fixtures::bounded::output(child, "the smtlab process");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed(),
    )
}

#[test]
fn a_saved_tree_with_empty_online_files_reads_as_topo_reads_it() {
    // hwloc's saved trees keep `cpuN/online` empty; topo reads them as online.
    let (_keep, dir) = smtlab_fixtures::extract("128ia64-17n4s2c");
    let (ok, out, err, _) = smt_on(&dir);
    assert!(ok, "{err}");
    assert!(out.contains("CPUs online  0-127"), "{out}");
}

#[test]
fn a_fifo_or_a_huge_file_in_a_tree_is_a_short_one_line_error() {
    let dir = tree();
    let active = dir.path().join("sys/devices/system/cpu/smt/active");
    let _ = fs::remove_file(&active);
    let c = std::ffi::CString::new(active.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string naming a path in our own temporary tree.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (ok, _, err, took) = smt_on(dir.path());
    assert!(!ok);
    assert!(took < Duration::from_secs(5), "waited {took:?} on a FIFO");
    assert!(err.contains("not a regular file"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // A 1 MB file where a 0 or 1 belongs: quoted in a few hundred bytes.
    fs::remove_file(&active).unwrap();
    fs::write(&active, "7".repeat(1_000_000)).unwrap();
    let (ok, _, err, _) = smt_on(dir.path());
    assert!(!ok);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.len() < 600, "{} bytes: {}", err.len(), &err[..300]);
    assert!(err.contains("1000000 bytes in all"), "{err}");
}
