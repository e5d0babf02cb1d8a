//! Private scratch directories for workloads that write files (`oltp-sqlite`, `sdet`,
//! `dbench`, the web file sets and server configurations): `PREFIX<pid>-<n>` under a
//! parent, stamped with the owning process, removed when dropped and by the CLI's
//! clean-up on a signal (`smtlab_bench::process::clean_up`). Ones a killed smtlab left
//! behind are swept when the next is made; only directories whose owner is gone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use smtlab_bench::BenchError;
use smtlab_bench::process::{Registered, register_dir};

use crate::db::pg::{owner_stamp, sweep_stale_dirs};

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
        Self::make(parent, prefix).map_err(|(what, dir, e)| BenchError::Io {
            bench: bench.into(),
            what: format!("{what} {}", dir.display()),
            error: e,
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
        std::fs::write(dir.join("owner"), owner_stamp(std::process::id()))
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
}
