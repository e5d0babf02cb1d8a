//! Files smtlab writes for a while and must put back (interrupt steering, a sysctl):
//! [`FileWrites`] reads nothing itself, it is given each file's old and new value, writes
//! the new ones, and writes the old ones back when dropped, on SIGINT/SIGTERM (a signal
//! watcher, [`crate::signals`]) and after SIGKILL (the [`crate::guardian`] process, told
//! the old values before the first write, as for SMT control).

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::ControlError;
use crate::guard::Protection;
use crate::guardian::{Guardian, Restorer, Saved};
use crate::signals::Watcher;
use crate::sysfs::Sysfs;

/// One file to write and put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWrite {
    pub path: PathBuf,
    /// What it read before any change (what is written back).
    pub before: String,
    /// What is written.
    pub value: String,
}

/// Files written until dropped (see the module documentation for every way the old
/// values come back).
pub struct FileWrites {
    shared: Arc<Restorer>,
    files: Vec<FileWrite>,
    _watcher: Option<Watcher>,
    restored: bool,
}

impl std::fmt::Debug for FileWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWrites")
            .field("files", &self.files)
            .finish()
    }
}

impl FileWrites {
    /// Writes each file's value under the protection asked for; an error, with every
    /// write undone, when a file cannot be written. `what` names the change in errors.
    pub fn apply(
        sysfs: Sysfs,
        what: &'static str,
        files: Vec<FileWrite>,
        protection: Protection,
    ) -> Result<FileWrites, ControlError> {
        if let Some(first) = files.first() {
            sysfs.check_root(what, &first.path)?;
        }
        let saved = files.iter().map(|f| Saved {
            path: f.path.clone(),
            before: f.before.clone(),
            what: what.into(),
        });
        let shared = Arc::new(Restorer::new(saved.collect(), sysfs));
        if protection.guardian && !files.is_empty() {
            *shared.hold() = Some(Guardian::spawn(&shared.plan()).map_err(ControlError::Guardian)?);
        }
        let watcher = if protection.signals && !files.is_empty() {
            Some(shared.watch()?)
        } else {
            None
        };
        let steer = FileWrites {
            shared,
            files,
            _watcher: watcher,
            restored: false,
        };
        let written = {
            let _held = steer.shared.hold();
            let write = |f: &FileWrite| steer.shared.sysfs.write(what, &f.path, &f.value);
            steer.files.iter().try_for_each(write)
        };
        if let Err(e) = written {
            // Dropping restores what was written.
            let _ = steer.finish();
            return Err(e);
        }
        Ok(steer)
    }

    /// The files written (empty: nothing to write).
    pub fn files(&self) -> &[FileWrite] {
        &self.files
    }

    /// Writes the old values back now, and reports what could not be.
    pub fn finish(mut self) -> Result<(), ControlError> {
        self.restore()
    }

    fn restore(&mut self) -> Result<(), ControlError> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let mut guardian = self.shared.hold();
        let r = self.shared.restore();
        if let Some(g) = guardian.take() {
            g.end(r.is_ok());
        }
        r
    }
}

impl Drop for FileWrites {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempfile::TempDir, FileWrite) {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("proc/sys/kernel/sched_schedstats");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        let w = FileWrite {
            path,
            before: text.trim().into(),
            value: "1".into(),
        };
        (d, w)
    }

    #[test]
    fn written_while_held_and_put_back_when_dropped() {
        let (d, w) = file("0\n");
        let path = w.path.clone();
        let quiet = Protection {
            guardian: false,
            signals: false,
        };
        let held = FileWrites::apply(Sysfs::at(d.path()), "testing", vec![w], quiet).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), "1");
        assert_eq!(held.files().len(), 1);
        drop(held);
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), "0");
    }

    #[test]
    fn the_guardian_writes_the_old_values_back_when_the_process_is_gone() {
        let (d, w) = file("0\n");
        let path = w.path.clone();
        let guarded = Protection {
            guardian: true,
            signals: false,
        };
        let s = FileWrites::apply(Sysfs::at(d.path()), "testing", vec![w], guarded).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), "1");
        // As if smtlab died: the guardian's pipe closes without a word.
        let g = s.shared.guardian.lock().unwrap().take().unwrap();
        std::mem::forget(s);
        g.abandon();
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), "0");
    }
}
