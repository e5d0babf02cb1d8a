//! Puts the git commit into the binary (`smtlab --version`, the environment of every run).
//! Without git or outside a checkout (a source tarball) the commit is "unknown"; the
//! build never fails for it.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    // Rebuild when HEAD moves: HEAD itself (branch switch) and the ref it points to
    // (a commit on the branch). Only paths that exist, or cargo would rebuild every time.
    let head_ref = git(&["symbolic-ref", "-q", "HEAD"]);
    let watched = ["HEAD", "index"]
        .into_iter()
        .map(str::to_string)
        .chain(head_ref);
    for what in watched {
        let path = git(&["rev-parse", "--git-path", &what]);
        if let Some(p) = path.filter(|p| std::path::Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-env-changed=SMTLAB_GIT_COMMIT");
    let commit = std::env::var("SMTLAB_GIT_COMMIT").ok().or(commit);
    if let Some(c) = &commit {
        println!("cargo:rustc-env=SMTLAB_GIT_COMMIT={c}");
    }
    println!(
        "cargo:rustc-env=SMTLAB_VERSION_LINE={} (commit {})",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        commit.as_deref().unwrap_or("unknown")
    );
}
