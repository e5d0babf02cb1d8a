//! `smtlab bench web-static --param server=cmd`: the user's own web server (busybox
//! httpd here) under 1c1t and 1c2t at tiny settings, the SMT verdict after the table (or
//! the one line saying why there is none), nothing of it in `--json`, and no server
//! process or file set left once smtlab has exited.

use std::path::Path;
use std::process::Command;

use assert_cmd::prelude::*;
use serde_json::Value;

fn smtlab() -> Command {
    Command::cargo_bin("smtlab").expect("the smtlab binary is built")
}

fn smt_here() -> bool {
    smtlab_topology::discover(Path::new("/"))
        .unwrap()
        .smt_visible()
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
            let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            out.push(format!(
                "{name}: {}",
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            ));
        }
    }
    out
}

/// The bench command line; the server command first adds the file set's directory to
/// `roots` (through a shell of its own, as smtlab runs the command with `exec`), so the
/// test can check that it is gone afterwards.
fn bench(roots: &Path, marker: &str) -> Command {
    let mut cmd = smtlab();
    cmd.args(["-q", "bench", "web-static", "--quick", "-p", "1c1t,1c2t"])
        .args(["--param", "server=cmd", "--param"])
        .arg(format!(
            "cmd=sh -c 'echo {{root}} >> {}; exec busybox httpd -f -p 127.0.0.1:{{port}} -h {{root}}'",
            roots.display()
        ))
        .args(["--param", "duration=100ms", "--param", "conns=4"])
        .env("SMTLAB_OWN_SERVER_TEST", marker)
        .env("COLUMNS", "200");
    cmd
}

fn run(cmd: &mut Command) -> (String, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

fn assert_cleaned_up(roots: &Path, marker: &str) {
    let left = processes_with(&format!("SMTLAB_OWN_SERVER_TEST={marker}"));
    assert!(left.is_empty(), "left running: {left:?}");
    let roots = std::fs::read_to_string(roots).expect("the server command ran");
    for root in roots.lines() {
        assert!(!Path::new(root).exists(), "file set {root} left behind");
    }
}

#[test]
fn your_own_web_server_gets_the_smt_verdict_and_leaves_nothing_behind() {
    if !on_path("busybox") {
        smtlab_fixtures::require::skip(
            "busybox (the stand-in for a user's web server) is not installed",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let roots = dir.path().join("roots");
    let marker = format!("{}-{:?}", std::process::id(), std::time::Instant::now());

    let (stdout, stderr) = run(&mut bench(&roots, &marker));
    assert!(
        stdout.lines().any(|l| l.starts_with("1c1t ")),
        "a row for 1c1t: {stdout}\n{stderr}"
    );
    if smt_here() {
        assert!(
            stdout.contains("SMT yield (1c2t/1c1t): "),
            "verdict: {stdout}"
        );
        assert!(
            stdout.contains("for web-static on this machine"),
            "verdict: {stdout}"
        );
    } else {
        let line = stdout
            .lines()
            .find(|l| l.starts_with("no SMT yield: "))
            .unwrap_or_else(|| panic!("the one line on the missing yield: {stdout}"));
        assert!(
            line.contains("SMT is not visible on this machine"),
            "{line}"
        );
        assert!(line.ends_with("so 1c2t was not measured"), "{line}");
        // No figure where nothing was measured.
        assert!(!stdout.contains("SMT yield ("), "{stdout}");
        assert!(!stdout.lines().any(|l| l.starts_with("1c2t ")), "{stdout}");
    }
    assert_cleaned_up(&roots, &marker);

    // JSON alone on standard output: no verdict, the unmeasured placement as skipped.
    std::fs::remove_file(&roots).unwrap();
    let (stdout, _) = run(bench(&roots, &marker).arg("--json"));
    let v: Value = serde_json::from_str(&stdout).expect("stdout is JSON only");
    let cells = v["cells"].as_array().unwrap();
    assert!(
        cells.iter().any(|c| c["placement_spec"] == "1c1t"),
        "{stdout}"
    );
    let skipped = v["skipped"].as_array().unwrap();
    if !smt_here() {
        assert_eq!(cells.len(), 1, "{stdout}");
        assert_eq!(skipped.len(), 1, "{stdout}");
        assert_eq!(skipped[0]["key"]["placement"], "1c2t");
        assert_eq!(skipped[0]["key"]["benchmark"], "web-static");
        assert!(
            skipped[0]["reason"].as_str().unwrap().contains("no SMT"),
            "{stdout}"
        );
    }
    assert_cleaned_up(&roots, &marker);
}
