//! [`SmtSwitch`]: every change smtlab makes to SMT control and CPU hotplug, under one
//! guard that puts the original state back.

use std::sync::{Arc, Mutex};

use crate::error::ControlError;
use crate::guardian::{Guardian, Plan};
use crate::signals::{self, Watcher};
use crate::state::{self, SmtControl, SmtSnapshot};
use crate::sysfs::Sysfs;

/// The state a guard puts back: SMT control (when it could be switched) and the online
/// value of every CPU that can go offline.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot {
    control: Option<SmtControl>,
    online: Vec<(u32, bool)>,
}

impl Snapshot {
    fn of(state: &SmtSnapshot) -> Snapshot {
        Snapshot {
            control: state.control.clone().filter(SmtControl::switchable),
            online: state
                .hotpluggable
                .iter()
                .map(|&c| (c, state.online.contains(&c)))
                .collect(),
        }
    }

    fn plan(&self, sysfs: &Sysfs) -> Plan {
        let mut plan = Plan::default();
        if let Some(c) = &self.control {
            plan.push(&sysfs.control_path(), c.as_str());
        }
        for &(cpu, on) in &self.online {
            plan.push(&sysfs.online_path(cpu), if on { "1" } else { "0" });
        }
        plan
    }

    /// Writes back what differs, SMT control first (`on` brings every CPU online, so
    /// CPUs that were offline before must be taken offline again after it).
    fn restore(&self, sysfs: &Sysfs) -> Result<(), ControlError> {
        let mut failed = Vec::new();
        if let Some(want) = &self.control {
            // An unreadable file is written anyway: restoring must not stop at a read.
            let now = sysfs
                .read(&sysfs.control_path())
                .ok()
                .flatten()
                .map(|s| SmtControl::parse(&s));
            if now.as_ref() != Some(want)
                && let Err(e) = sysfs.write(
                    &format!("restoring SMT {}", want.as_str()),
                    &sysfs.control_path(),
                    want.as_str(),
                )
            {
                failed.push(e.to_string());
            }
        }
        for &(cpu, on) in &self.online {
            let path = sysfs.online_path(cpu);
            let now = sysfs.read(&path).ok().flatten();
            let want = if on { "1" } else { "0" };
            if now.as_deref() != Some(want)
                && let Err(e) = sysfs.write(
                    &format!(
                        "bringing CPU {cpu} {}",
                        if on { "back online" } else { "offline again" }
                    ),
                    &path,
                    want,
                )
            {
                failed.push(e.to_string());
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(ControlError::Restore(failed.join("; ")))
        }
    }
}

/// What a guard shares with its signal watcher.
struct Shared {
    sysfs: Sysfs,
    snapshot: Snapshot,
    /// Held while writing, so a signal's restore never interleaves with a change.
    lock: Mutex<Option<Guardian>>,
}

impl Shared {
    fn hold(&self) -> std::sync::MutexGuard<'_, Option<Guardian>> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }
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
    shared: Arc<Shared>,
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
        let snapshot = Snapshot::of(&original);
        Ok(SmtSwitch {
            shared: Arc::new(Shared {
                sysfs,
                snapshot,
                lock: Mutex::new(None),
            }),
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
        self.lock().as_ref().map(Guardian::pid)
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
            self.shared.snapshot.restore(&self.shared.sysfs)
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
        let mut guardian = self.lock();
        if self.protection.guardian && guardian.is_none() {
            let plan = self.shared.snapshot.plan(&self.shared.sysfs);
            *guardian = Some(Guardian::spawn(&plan).map_err(ControlError::Guardian)?);
        }
        drop(guardian);
        if self.protection.signals && self.watcher.is_none() {
            let shared = Arc::clone(&self.shared);
            self.watcher = Some(signals::watch(move || {
                let mut guardian = shared.lock.lock().unwrap_or_else(|e| e.into_inner());
                if shared.snapshot.restore(&shared.sysfs).is_ok()
                    && let Some(g) = guardian.take()
                {
                    g.dismiss();
                }
                // Otherwise the guardian tries again once the process is gone. The
                // lock stays held: nothing may change the system any more.
                std::mem::forget(guardian);
            })?);
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Guardian>> {
        self.shared.hold()
    }

    /// Ends the protection: the guardian is dismissed when everything was restored and
    /// otherwise left to try once more as the pipe closes.
    fn stop(&mut self, restored: bool) {
        self.watcher = None;
        if let Some(g) = self.lock().take() {
            if restored {
                g.dismiss();
            } else {
                g.abandon();
            }
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
