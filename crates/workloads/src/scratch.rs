//! Private scratch directories for workloads that write files (`oltp-sqlite`, `sdet`,
//! `dbench`, the web file sets and server configurations): `PREFIX<pid>-<n>` under a
//! parent, stamped with the owning process, removed when dropped and by the CLI's
//! clean-up on a signal (`smtlab_bench::process::clean_up`). Ones a killed smtlab left
//! behind are swept when the next of their kind is made, and those of every kind by
//! [`sweep_stale`] as every smtlab starts; only directories whose owner is gone. What
//! the workloads' children write into the temporary directory (sdet's compilers'
//! `cc*.s` files) goes into the cell's scratch directory (their `TMPDIR`), so it goes
//! with it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use smtlab_bench::BenchError;
use smtlab_bench::process::{Registered, register_dir};

use crate::db::pg::sweep_stale_dirs;
use smtlab_bench::process::owner_stamp;

/// A private directory under a parent, removed with everything in it when dropped.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
    _registered: Option<Registered>,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl ScratchDir {
    /// Sweeps the stale `prefix*` directories under `parent`, then makes a new one;
    /// errors name `bench` and the directory.
    pub fn create(bench: &str, parent: &Path, prefix: &str) -> Result<ScratchDir, BenchError> {
        Self::make(parent, prefix).map_err(|(what, dir, e)| {
            BenchError::io(
                bench,
                format!("{what} {}", smtlab_model::quote::path(&dir)),
                e,
            )
        })
    }

    /// [`ScratchDir::create`] with the error as what failed, on which path, and why.
    pub fn make(
        parent: &Path,
        prefix: &str,
    ) -> Result<ScratchDir, (&'static str, PathBuf, std::io::Error)> {
        sweep_stale_dirs(parent, prefix, &|_| {});
        let dir = parent.join(format!(
            "{prefix}{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        // Registered before it exists: a signal between the two would otherwise leave it.
        let guard = ScratchDir {
            path: dir.clone(),
            _registered: Some(register_dir(&dir)),
        };
        std::fs::create_dir(&dir).map_err(|e| ("create", dir.clone(), e))?;
        std::fs::write(dir.join("owner"), owner_stamp())
            .map_err(|e| ("write the owner file in", dir.clone(), e))?;
        Ok(guard)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the directory in place (a failed server's logs, for the user): it stays
    /// until the next smtlab process's sweep of stale directories.
    pub fn keep(mut self) -> PathBuf {
        self._registered = None;
        std::mem::take(&mut self.path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The prefix every scratch directory's name starts with (`smtlab-<kind>-<pid>-<n>`).
pub const SCRATCH_PREFIX: &str = "smtlab-";

/// Removes the scratch directories of every kind under `parent` (the temporary
/// directory as smtlab starts) whose owner process is gone: stamped ones by their
/// `owner` file, unstamped ones (a process killed between making and stamping) by the
/// pid in their name. A name that is not a scratch directory's is left alone, and a
/// PostgreSQL directory has its left server stopped first. Returns how many went.
pub fn sweep_stale(parent: &Path) -> usize {
    let pg = crate::db::pg::sweep_stale(parent);
    sweep_stale_dirs(parent, SCRATCH_PREFIX, &|_| {}) + pg
}

/// This process's `prefix*` directories under the temporary directory, for tests that
/// check a workload leaves none behind.
#[cfg(test)]
pub(crate) fn mine(prefix: &str) -> Vec<PathBuf> {
    let mine = format!("{prefix}{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
        .map(|e| e.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_dir_is_stamped_and_removed() {
        let parent = tempfile::tempdir().unwrap();
        let dir = ScratchDir::create("test", parent.path(), "smtlab-scratch-test-").unwrap();
        let path = dir.path().to_path_buf();
        assert!(path.join("owner").is_file());
        drop(dir);
        assert!(!path.exists());
        let e = ScratchDir::create("test", &parent.path().join("none"), "x-")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("create") && e.contains("none/x-"), "{e}");
    }

    #[test]
    fn scratch_of_any_kind_whose_owner_is_dead_is_swept_and_no_other() {
        let parent = tempfile::tempdir().unwrap();
        let p = parent.path();
        // A process that has ended: its pid names no process (or another one, whose
        // start time differs from the stamp).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        smtlab_fixtures::bounded::wait(&mut child, "a test child");
        let dead_stamp = format!("{dead} 1\n");
        let make = |name: &str, owner: Option<&str>| {
            let d = p.join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("data"), b"x").unwrap();
            if let Some(o) = owner {
                std::fs::write(d.join("owner"), o).unwrap();
            }
            d
        };
        let stale_dbench = make(&format!("smtlab-dbench-{dead}-0"), Some(&dead_stamp));
        let stale_sdet = make(&format!("smtlab-sdet-{dead}-3"), Some(&dead_stamp));
        let unstamped_dead = make(&format!("smtlab-web-{dead}-1"), None);
        let live = ScratchDir::create("test", p, "smtlab-sqlite-").unwrap();
        let unstamped_live = make(&format!("smtlab-web-{}-9", std::process::id()), None);
        let not_ours = make("smtlab-notes", None);
        assert!(sweep_stale(p) >= 3);
        for gone in [&stale_dbench, &stale_sdet, &unstamped_dead] {
            assert!(!gone.exists(), "{} kept", gone.display());
        }
        for kept in [live.path(), &unstamped_live, &not_ours] {
            assert!(kept.exists(), "{} swept", kept.display());
        }
    }
}
