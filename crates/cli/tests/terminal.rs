//! End-to-end tests of the terminal conventions: version, completions, man page, colour,
//! width, quiet, labels and deletion of runs, exports.

use assert_cmd::Command;

fn smtlab() -> Command {
    let mut c = Command::cargo_bin("smtlab").expect("the smtlab binary is built");
    c.env_remove("NO_COLOR").env_remove("COLUMNS");
    c
}

fn stdout_of(cmd: &mut Command) -> String {
    String::from_utf8(cmd.assert().success().get_output().stdout.clone()).unwrap()
}

/// Standard output, as JSON, of a command that must succeed without a word on stderr.
fn silent_json(cmd: &mut Command) -> serde_json::Value {
    let a = cmd.assert().success();
    let o = a.get_output();
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn version_names_the_commit_or_says_unknown() {
    let v = stdout_of(smtlab().arg("--version"));
    assert!(
        v.starts_with(&format!("smtlab {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    let commit = v.trim().rsplit(' ').next().unwrap().trim_end_matches(')');
    assert!(
        commit == "unknown" || commit.chars().all(|c| c.is_ascii_hexdigit()),
        "{v}"
    );
}

#[test]
fn completions_and_man_go_to_stdout() {
    for shell in ["bash", "zsh", "fish"] {
        let s = stdout_of(smtlab().args(["completions", shell]));
        assert!(s.contains("placements"), "{shell}");
    }
    smtlab().args(["completions", "tcsh"]).assert().failure();
    let m = stdout_of(smtlab().arg("man"));
    assert!(m.contains(".TH smtlab 1"), "{}", &m[..200]);
}

// The store's deterministic run: four cells, counters, a skipped cell.
#[path = "../../store/tests/store/testdata.rs"]
#[allow(dead_code)]
mod testdata;

use std::path::{Path, PathBuf};

/// A database holding the fixture run twice, the first labelled.
fn db_with_fixture(dir: &Path) -> PathBuf {
    let db = dir.join("r.db");
    let mut store = smtlab_store::Store::open(&db).unwrap();
    let a = store.import_run(&testdata::results(0)).unwrap();
    store.import_run(&testdata::results(0)).unwrap();
    store.set_run_label(a, Some("smt on, 6.12")).unwrap();
    db
}

fn width_of(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

#[test]
fn runs_show_labels_in_80_columns() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    let out = stdout_of(smtlab().arg("runs").arg("--db").arg(&db));
    assert!(width_of(&out) <= 80, "{out}");
    insta::assert_snapshot!("runs_80", out);
    let wide = stdout_of(smtlab().args(["runs", "--wide"]).arg("--db").arg(&db));
    assert!(wide.lines().next().unwrap().contains("CPU"), "{wide}");
}

#[test]
fn report_summary_fits_80_columns_and_only_results_reach_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    let out = stdout_of(
        smtlab()
            .args(["report", "smt on, 6.12"])
            .arg("--db")
            .arg(&db),
    );
    assert!(width_of(&out) <= 80, "{out}");
    assert!(out.contains("label: smt on, 6.12"), "{out}");
    insta::assert_snapshot!("report_80", out);
    // A label that two runs carry is refused in one line, naming them.
    let mut store = smtlab_store::Store::open(&db).unwrap();
    store.set_run_label(2, Some("smt on, 6.12")).unwrap();
    drop(store);
    let a = smtlab()
        .args(["report", "smt on, 6.12"])
        .arg("--db")
        .arg(&db)
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert!(
        err.contains("names runs 1, 2") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn notes_go_to_stderr_and_quiet_silences_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    let md = dir.path().join("cells.md");
    let a = smtlab()
        .args(["report", "1", "--export-markdown"])
        .arg(&md)
        .arg("--db")
        .arg(&db)
        .assert()
        .success();
    let o = a.get_output();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(out.starts_with("run 1 "), "the summary on stdout: {out}");
    assert_eq!(err.trim(), format!("wrote {}", md.display()));
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.starts_with("| Benchmark |"), "{text}");
    let a = smtlab()
        .args(["report", "1", "-q", "--export-markdown"])
        .arg(&md)
        .arg("--db")
        .arg(&db)
        .assert()
        .success();
    assert!(a.get_output().stderr.is_empty());
    let md_out = stdout_of(
        smtlab()
            .args(["report", "1", "--export-markdown", "-"])
            .arg("--db")
            .arg(&db),
    );
    assert_eq!(md_out, text);
}

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    let plain = stdout_of(smtlab().arg("runs").arg("--db").arg(&db));
    assert!(!plain.contains('\x1b'), "not a terminal: no colour");
    let always = stdout_of(
        smtlab()
            .args(["runs", "--color", "always"])
            .arg("--db")
            .arg(&db),
    );
    assert!(always.contains("\x1b[1m"));
    let strip = always
        .replace("\x1b[1m", "")
        .replace("\x1b[2m", "")
        .replace("\x1b[0m", "");
    assert_eq!(strip, plain);
    let never = stdout_of(
        smtlab()
            .args(["runs", "--color", "never"])
            .arg("--db")
            .arg(&db),
    );
    assert_eq!(never, plain);
}

#[test]
fn columns_sets_the_width_when_not_a_terminal() {
    let out = stdout_of(smtlab().arg("list").env("COLUMNS", "70"));
    assert!(width_of(&out) <= 70, "{out}");
    let wide = stdout_of(smtlab().args(["list", "--wide"]));
    assert!(width_of(&wide) > 80, "--wide keeps descriptions whole");
    assert!(wide.lines().next().unwrap().contains("About"));
}

#[test]
fn runs_are_deleted_by_id_or_label_and_unknown_ones_delete_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_fixture(dir.path());
    let a = smtlab()
        .args(["runs", "--delete", "2", "7"])
        .arg("--db")
        .arg(&db)
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert!(
        err.contains("no run 7") && err.lines().count() == 1,
        "{err}"
    );
    let out = stdout_of(
        smtlab()
            .args(["runs", "--delete", "smt on, 6.12"])
            .arg("--db")
            .arg(&db),
    );
    assert_eq!(out, "deleted run 1\n");
    let json = stdout_of(smtlab().args(["runs", "--json"]).arg("--db").arg(&db));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["id"], 2);
}

#[test]
fn compare_fits_80_columns() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for id in [1, 2] {
        let path = dir.path().join(format!("run{id}.json"));
        std::fs::write(
            &path,
            serde_json::to_string(&testdata::results(id)).unwrap(),
        )
        .unwrap();
        files.push(path);
    }
    let out = stdout_of(smtlab().arg("compare").args(&files));
    assert!(width_of(&out) <= 80, "{out}");
    assert!(out.contains("speed-up (mean): 1.000x"), "{out}");
    insta::assert_snapshot!("compare_80", out);
    let wide = stdout_of(smtlab().arg("compare").args(&files).arg("--wide"));
    assert!(width_of(&wide) > 80);
}

#[test]
fn run_into_a_file_keeps_every_cell_line_and_no_note() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let a = smtlab()
        .args([
            "run",
            "--suite",
            "quick",
            "--bench",
            "null-syscall",
            "--placements",
            "1c1t,9c1t",
            "--no-interleave",
            "--db",
        ])
        .arg(&db)
        .assert()
        .success();
    let o = a.get_output();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    // One line per cell: the measured one and the one this machine cannot place.
    let starts: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("null-syscall"))
        .collect();
    assert_eq!(starts.len(), 2, "stdout: {out}\nstderr: {err}");
    assert!(starts.iter().any(|l| l.contains("median")), "{out}");
    assert!(starts.iter().any(|l| l.contains("skipped")), "{out}");
    assert!(width_of(&out) <= 80, "{out}");
    assert!(!out.contains("note:") && !out.contains("finished"), "{out}");
    assert!(err.contains("run 1 finished"), "{err}");

    // --json: the run as stored, alone on stdout; -q: nothing on stderr.
    let v = silent_json(
        smtlab()
            .args(["-q", "run", "--suite", "quick", "--bench", "null-syscall"])
            .args(["--placements", "1c1t", "--json", "--db"])
            .arg(&db),
    );
    assert_eq!(v["schema"], "smtlab.results/1");
    assert_eq!(v["run"]["id"], 2);
    assert_eq!(v["cells"].as_array().unwrap().len(), 1);

    // --export-markdown - takes the place of the lines.
    let md = stdout_of(
        smtlab()
            .args(["-q", "run", "--suite", "quick", "--bench", "null-syscall"])
            .args(["--placements", "1c1t", "--export-markdown", "-", "--db"])
            .arg(&db),
    );
    assert!(md.starts_with("| Benchmark |"), "{md}");
    assert_eq!(
        md.lines().filter(|l| l.contains("`null-syscall`")).count(),
        1
    );
}

#[test]
fn json_and_markdown_cannot_share_stdout() {
    let a = smtlab()
        .args(["bench", "null-syscall", "--json", "--export-markdown", "-"])
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--export-markdown"), "{err}");
}

#[test]
fn exec_json_is_the_stored_run_alone_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let md = dir.path().join("cells.md");
    let v = silent_json(
        smtlab()
            .args(["-q", "exec", "--reps", "2", "--warmup", "0", "-p", "1c1t"])
            .args(["--json", "--export-markdown"])
            .arg(&md)
            .arg("--db")
            .arg(&db)
            .args(["--", "true"]),
    );
    assert_eq!(v["schema"], "smtlab.results/1");
    assert_eq!(v["run"]["suite"], "exec");
    assert_eq!(v["cells"][0]["result"]["summary"]["n"], 2);
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.contains("| `exec` |"), "{text}");
}

#[test]
fn help_wraps_to_the_terminal_width() {
    for cmd in ["run", "bench", "corun", "util", "load", "exec"] {
        let out = stdout_of(smtlab().args([cmd, "--help"]).env("COLUMNS", "80"));
        let widest = out.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= 80, "smtlab {cmd} --help: {widest} columns\n{out}");
    }
}
