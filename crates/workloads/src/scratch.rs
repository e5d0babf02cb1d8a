//! Private scratch directories for workloads that write files (`oltp-sqlite`, `sdet`):
//! `PREFIX<pid>-<n>` under a parent, stamped with the owning process, removed when
//! dropped. Ones a killed smtlab left behind are swept when the next is made.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use smtlab_bench::BenchError;

use crate::db::pg::{owner_stamp, sweep_stale_dirs};

/// A private directory under a parent, removed with everything in it when dropped.
pub(crate) struct ScratchDir(PathBuf);

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl ScratchDir {
    /// Sweeps the stale `prefix*` directories under `parent`, then makes a new one;
    /// errors name `bench` and the directory.
    pub(crate) fn create(
        bench: &str,
        parent: &Path,
        prefix: &str,
    ) -> Result<ScratchDir, BenchError> {
        sweep_stale_dirs(parent, prefix, &|_| {});
        let dir = parent.join(format!(
            "{prefix}{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let io = |what: &str, e| BenchError::Io {
            bench: bench.into(),
            what: format!("{what} {}", dir.display()),
            source: e,
        };
        std::fs::create_dir(&dir).map_err(|e| io("create", e))?;
        let guard = ScratchDir(dir.clone());
        std::fs::write(dir.join("owner"), owner_stamp(std::process::id()))
            .map_err(|e| io("write the owner file in", e))?;
        Ok(guard)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
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
