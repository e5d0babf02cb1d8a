//! [`SmtSwitch`]: every change smtlab makes to SMT control and CPU hotplug, under one
//! guard that puts the original state back.

use std::sync::Arc;

use crate::error::ControlError;
use crate::guardian::{Guardian, Restorer, Saved};
use crate::signals::Watcher;
use crate::state::{self, SmtControl, SmtSnapshot};
use crate::sysfs::Sysfs;

/// What a guard puts back: SMT control (when it could be switched), then the online
/// value of every CPU that can go offline (`on` brings every CPU online, so CPUs that
/// were offline before must be taken offline again after it).
fn saved(state: &SmtSnapshot, sysfs: &Sysfs) -> Vec<Saved> {
    let control = state
        .control
        .iter()
        .filter(|c| c.switchable())
        .map(|c| Saved {
            path: sysfs.control_path(),
            before: c.as_str().into(),
            what: format!("restoring SMT {}", c.as_str()),
        });
    let online = state.hotpluggable.iter().map(|&cpu| {
        let on = state.online.contains(&cpu);
        Saved {
            path: sysfs.online_path(cpu),
            before: if on { "1" } else { "0" }.into(),
            what: format!(
                "bringing CPU {cpu} {}",
                if on { "back online" } else { "offline again" }
            ),
        }
    });
    control.chain(online).collect()
}

/// How a guard protects its changes beyond `Drop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protection {
    /// Fork a guardian process before the first change (covers SIGKILL).
    pub guardian: bool,
    /// Restore on SIGINT, SIGTERM and SIGHUP, then die of the signal. Callers with their
    /// own Ctrl-C handling turn this off and let the guard drop.
    pub signals: bool,
}

impl Default for Protection {
    fn default() -> Self {
        Protection {
            guardian: true,
            signals: true,
        }
    }
}

/// Changes SMT control and CPU online states and restores the state it found, at the
/// latest when dropped (see the [crate] documentation for every way out).
///
/// ```no_run
/// # fn main() -> Result<(), smtlab_control::ControlError> {
/// use smtlab_control::{SmtSwitch, Sysfs};
/// let mut switch = SmtSwitch::new(Sysfs::system())?;
/// switch.set(false)?; // SMT off
/// // ... measure ...
/// switch.set(true)?; // SMT on
/// // ... measure ...
/// switch.restore()?; // the state found at `new`, errors reported
/// # Ok(()) }
/// ```
pub struct SmtSwitch {
    shared: Arc<Restorer>,
    original: SmtSnapshot,
    protection: Protection,
    watcher: Option<Watcher>,
    /// Whether anything was written since the snapshot (or the last restore).
    changed: bool,
}

impl SmtSwitch {
    /// Takes the snapshot; nothing is written and nothing started until the first change.
    pub fn new(sysfs: Sysfs) -> Result<SmtSwitch, ControlError> {
        Self::with_protection(sysfs, Protection::default())
    }

    pub fn with_protection(
        sysfs: Sysfs,
        protection: Protection,
    ) -> Result<SmtSwitch, ControlError> {
        let original = state::read(&sysfs)?;
        Ok(SmtSwitch {
            shared: Arc::new(Restorer::new(saved(&original, &sysfs), sysfs)),
            original,
            protection,
            watcher: None,
            changed: false,
        })
    }

    /// The state found when the guard was made (what it restores).
    pub fn original(&self) -> &SmtSnapshot {
        &self.original
    }

    /// The state now.
    pub fn state(&self) -> Result<SmtSnapshot, ControlError> {
        state::read(&self.shared.sysfs)
    }

    /// The guardian's process id, once one runs.
    pub fn guardian_pid(&self) -> Option<u32> {
        self.shared.hold().as_ref().map(Guardian::pid)
    }

    /// Switches SMT on (`true`) or off (`false`). A no-op when it already is.
    pub fn set(&mut self, on: bool) -> Result<(), ControlError> {
        let sysfs = &self.shared.sysfs;
        let path = sysfs.control_path();
        let now = match sysfs.read(&path)? {
            None => return Err(ControlError::NoControl { path }),
            Some(s) => SmtControl::parse(&s),
        };
        if let Some(refusal) = now.refusal() {
            return Err(refusal);
        }
        let want = if on { SmtControl::On } else { SmtControl::Off };
        if now == want {
            return Ok(());
        }
        let what = format!("switching SMT {}", want.as_str());
        sysfs.check_root(&what, &path)?;
        self.protect()?;
        self.changed = true;
        let shared = Arc::clone(&self.shared);
        let _held = shared.hold();
        shared.sysfs.write(&what, &path, want.as_str())
    }

    /// Takes every online CPU but `cpu` offline (paper 000's 1T-UP on an SMP kernel);
    /// returns the CPUs it took offline. Checks everything before the first write: a CPU
    /// the kernel cannot take offline (no `cpuN/online`, often CPU 0) is an error.
    pub fn offline_all_but(&mut self, cpu: u32) -> Result<Vec<u32>, ControlError> {
        let sysfs = self.shared.sysfs.clone();
        let others = uniprocessor_plan(&sysfs, cpu)?;
        if others.is_empty() {
            return Ok(others);
        }
        self.protect()?;
        self.changed = true;
        let _held = self.shared.hold();
        for &c in &others {
            sysfs.write(
                &format!("taking CPU {c} offline"),
                &sysfs.online_path(c),
                "0",
            )?;
        }
        Ok(others)
    }

    /// Puts the original state back now and reports what could not be. The guard stays
    /// usable (a run can switch again) and still restores when dropped.
    pub fn restore(&mut self) -> Result<(), ControlError> {
        if !self.changed {
            return Ok(());
        }
        let r = {
            let _held = self.shared.hold();
            self.shared.restore()
        };
        if r.is_ok() {
            self.changed = false;
        }
        r
    }

    /// Restores, stops the guardian and the signal watcher, and reports the restore.
    pub fn finish(mut self) -> Result<(), ControlError> {
        let r = self.restore();
        self.stop(r.is_ok());
        r
    }

    /// Keeps the changes made so far (a user's explicit `smtlab smt off`): nothing is
    /// restored and the guardian is dismissed.
    pub fn keep(mut self) {
        self.changed = false;
        self.stop(true);
    }

    /// Starts the guardian and the signal watcher before the first change.
    fn protect(&mut self) -> Result<(), ControlError> {
        let mut guardian = self.shared.hold();
        if self.protection.guardian && guardian.is_none() {
            *guardian = Some(Guardian::spawn(&self.shared.plan()).map_err(ControlError::Guardian)?);
        }
        drop(guardian);
        if self.protection.signals && self.watcher.is_none() {
            self.watcher = Some(self.shared.watch()?);
        }
        Ok(())
    }

    /// Ends the protection: the guardian is dismissed when everything was restored and
    /// otherwise left to try once more as the pipe closes.
    fn stop(&mut self, restored: bool) {
        self.watcher = None;
        if let Some(g) = self.shared.hold().take() {
            g.end(restored);
        }
    }
}

impl Drop for SmtSwitch {
    fn drop(&mut self) {
        let r = self.restore();
        self.stop(r.is_ok());
    }
}

/// The CPUs [`SmtSwitch::offline_all_but`] would take offline, after every check it
/// makes (`cpu` online, the others hotpluggable, root), without changing anything: for
/// refusing a run before it starts.
pub fn uniprocessor_plan(sysfs: &Sysfs, cpu: u32) -> Result<Vec<u32>, ControlError> {
    let now = state::read(sysfs)?;
    if !now.online.contains(&cpu) {
        return Err(ControlError::CpuNotOnline {
            cpu,
            online: now
                .online
                .iter()
                .copied()
                .collect::<smtlab_model::CpuSet>()
                .to_list_string(),
        });
    }
    let others: Vec<u32> = now.online.iter().copied().filter(|&c| c != cpu).collect();
    if let Some(&stuck) = others.iter().find(|c| !now.hotpluggable.contains(c)) {
        return Err(ControlError::NotHotpluggable {
            cpu: stuck,
            path: sysfs.online_path(stuck),
        });
    }
    if let Some(&first) = others.first() {
        sysfs.check_root("taking CPUs offline", &sysfs.online_path(first))?;
    }
    Ok(others)
}

/// Takes every CPU but `cpu` offline under a new guard: the closest a running SMP
/// kernel gets to a uniprocessor kernel. Dropping the guard brings them back.
pub fn uniprocessor(sysfs: Sysfs, cpu: u32) -> Result<SmtSwitch, ControlError> {
    let mut switch = SmtSwitch::new(sysfs)?;
    switch.offline_all_but(cpu)?;
    Ok(switch)
}

/// Why SMT cannot be switched in `sysfs`, if it cannot: its state cannot be read, it has
/// no `smt/control`, the control cannot be switched (`forceoff`, `notsupported`, ...),
/// or switching needs root and smtlab is not.
pub fn switch_refusal(sysfs: &Sysfs) -> Option<String> {
    let state = match state::read(sysfs) {
        Ok(s) => s,
        Err(e) => return Some(e.to_string()),
    };
    let Some(control) = &state.control else {
        return Some("the kernel has no smt/control".into());
    };
    if let Some(e) = control.refusal() {
        return Some(e.to_string());
    }
    if sysfs
        .check_root("switching SMT", &sysfs.control_path())
        .is_err()
    {
        return Some("switching SMT needs root".into());
    }
    None
}
