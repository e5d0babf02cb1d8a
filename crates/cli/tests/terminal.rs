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
