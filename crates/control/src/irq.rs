//! Steering a network device's interrupt work to chosen CPUs, and putting it back.
//!
//! Paper 004 s3 asks where a network adapter's interrupts should land under SMT: on the
//! sibling of the thread that serves the load, or on another core. Two kinds of files
//! say where a device's receive work runs:
//!
//! * `/proc/irq/N/smp_affinity_list`: the CPUs hardware interrupt `N` may be delivered
//!   to. A device's interrupts are found by its `device/msi_irqs/` and `device/irq`
//!   in `/sys/class/net/DEV/`, and by the names in `/proc/interrupts` (`eth0-rx-0`,
//!   `virtio0-input.0`). Loopback and veth have none: their packets never leave memory.
//! * `/sys/class/net/DEV/queues/rx-*/rps_cpus` (receive packet steering): the CPUs the
//!   kernel hands a received packet's protocol processing to (the `NET_RX` softirq).
//!   This applies to every device, loopback and veth included, so it is what steers the
//!   network work of smtlab's loopback workloads.
//!
//! [`IrqSteer`] reads every such file of the devices, writes the target CPUs into them,
//! and writes the values it found back when dropped, on SIGINT/SIGTERM (a signal
//! watcher, [`crate::signals`]) and after SIGKILL (the [`crate::guardian`] process, told
//! the old values before the first write, as for SMT control). A kernel that refuses a
//! write (a kernel-managed interrupt answers `EIO`) fails the whole steering: what was
//! written is put back, and the error names the file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use smtlab_model::CpuSet;

use crate::error::ControlError;
use crate::guard::Protection;
use crate::guardian::{Guardian, Plan};
use crate::signals::{self, Watcher};
use crate::sysfs::Sysfs;

/// One file that steers part of a device's receive work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteerFile {
    pub path: PathBuf,
    /// What it read before any change (what is written back).
    pub before: String,
    /// What steering writes.
    pub value: String,
}

/// The kind of a [`SteerFile`], by its path.
impl SteerFile {
    /// Whether this is a hardware interrupt's affinity (else an RPS mask).
    pub fn is_irq(&self) -> bool {
        self.path.iter().any(|c| c == "irq")
    }
}

/// The hardware interrupts of network device `dev` under `root`, ascending.
pub fn device_irqs(root: &Path, dev: &str) -> Vec<u32> {
    let mut irqs = std::collections::BTreeSet::new();
    let device = root.join("sys/class/net").join(dev).join("device");
    if let Ok(entries) = std::fs::read_dir(device.join("msi_irqs")) {
        for e in entries.flatten() {
            if let Some(n) = e.file_name().to_str().and_then(|s| s.parse().ok()) {
                irqs.insert(n);
            }
        }
    }
    if let Some(n) = std::fs::read_to_string(device.join("irq"))
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|&n| n > 0)
    {
        irqs.insert(n);
    }
    // Names in /proc/interrupts: the device's own (`eth0-rx-0`) or, for virtio, its
    // bus device's (`virtio0-input.0`, the target of the `device` link).
    let mut names = vec![dev.to_string()];
    if let Ok(target) = std::fs::read_link(&device)
        && let Some(base) = target.file_name().and_then(|b| b.to_str())
    {
        names.push(base.to_string());
    }
    if let Ok(text) = std::fs::read_to_string(root.join("proc/interrupts")) {
        for line in text.lines() {
            let Some((n, rest)) = line.trim_start().split_once(':') else {
                continue;
            };
            let Ok(n) = n.parse::<u32>() else { continue };
            let named = rest
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|t| !t.is_empty())
                .any(|t| {
                    names.iter().any(|name| {
                        t == name
                            || t.strip_prefix(name.as_str())
                                .is_some_and(|r| r.starts_with(['-', '.', '@']))
                    })
                });
            if named {
                irqs.insert(n);
            }
        }
    }
    irqs.into_iter().collect()
}

/// What steering `devices` to `cpus` under `sysfs`'s root would write, with the values
/// found now; an error when a device does not exist. Empty when nothing can be steered
/// (no interrupts, a kernel without RPS).
pub fn plan(
    sysfs: &Sysfs,
    devices: &[String],
    cpus: &CpuSet,
) -> Result<Vec<SteerFile>, ControlError> {
    let root = sysfs.root();
    let mut files = Vec::new();
    for dev in devices {
        let dir = root.join("sys/class/net").join(dev);
        if !dir.exists() {
            return Err(ControlError::Parse {
                path: dir,
                reason: format!("no network device {dev:?} here"),
            });
        }
        for irq in device_irqs(root, dev) {
            let path = root.join(format!("proc/irq/{irq}/smp_affinity_list"));
            if let Some(before) = sysfs.read(&path)? {
                files.push(SteerFile {
                    path,
                    before,
                    value: cpus.to_list_string(),
                });
            }
        }
        let mut queues: Vec<PathBuf> = std::fs::read_dir(dir.join("queues"))
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("rx-")))
                    .map(|e| e.path().join("rps_cpus"))
                    .collect()
            })
            .unwrap_or_default();
        queues.sort();
        for path in queues {
            if let Some(before) = sysfs.read(&path)? {
                files.push(SteerFile {
                    path,
                    before,
                    value: cpus.to_mask_string(),
                });
            }
        }
    }
    Ok(files)
}

struct Shared {
    sysfs: Sysfs,
    files: Vec<SteerFile>,
    /// Held while writing, so a signal's restore never interleaves with a change.
    guardian: Mutex<Option<Guardian>>,
}

impl Shared {
    /// Writes every file's old value back; what failed, if anything.
    fn restore(&self) -> Result<(), ControlError> {
        let mut failed = Vec::new();
        for f in &self.files {
            let now = self.sysfs.read(&f.path).ok().flatten();
            if now.as_deref() != Some(f.before.as_str())
                && let Err(e) = self
                    .sysfs
                    .write("restoring interrupt steering", &f.path, &f.before)
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

/// A device's receive work steered to chosen CPUs until dropped (see the module
/// documentation for every way the old values come back).
pub struct IrqSteer {
    shared: Arc<Shared>,
    _watcher: Option<Watcher>,
    restored: bool,
}

impl std::fmt::Debug for IrqSteer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IrqSteer")
            .field("files", &self.shared.files)
            .finish()
    }
}

impl IrqSteer {
    /// Steers `devices` to `cpus` under the protection asked for; an error, with every
    /// write undone, when a file cannot be written.
    pub fn apply(
        sysfs: Sysfs,
        devices: &[String],
        cpus: &CpuSet,
        protection: Protection,
    ) -> Result<IrqSteer, ControlError> {
        let files = plan(&sysfs, devices, cpus)?;
        if let Some(first) = files.first() {
            sysfs.check_root("steering network interrupts", &first.path)?;
        }
        let guardian = if protection.guardian && !files.is_empty() {
            let mut plan = Plan::default();
            for f in &files {
                plan.push(&f.path, &f.before);
            }
            Some(Guardian::spawn(&plan).map_err(ControlError::Guardian)?)
        } else {
            None
        };
        let shared = Arc::new(Shared {
            sysfs,
            files,
            guardian: Mutex::new(guardian),
        });
        let watcher = if protection.signals && !shared.files.is_empty() {
            let s = Arc::clone(&shared);
            Some(signals::watch(move || {
                let mut guardian = s.guardian.lock().unwrap_or_else(|e| e.into_inner());
                if s.restore().is_ok()
                    && let Some(g) = guardian.take()
                {
                    g.dismiss();
                }
                // Nothing may change the files any more: the lock stays held.
                std::mem::forget(guardian);
            })?)
        } else {
            None
        };
        let steer = IrqSteer {
            shared,
            _watcher: watcher,
            restored: false,
        };
        let written = {
            let _held = steer
                .shared
                .guardian
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            steer.shared.files.iter().try_for_each(|f| {
                steer
                    .shared
                    .sysfs
                    .write("steering network interrupts", &f.path, &f.value)
            })
        };
        if let Err(e) = written {
            // Dropping restores what was written.
            let _ = steer.finish();
            return Err(e);
        }
        Ok(steer)
    }

    /// The files steered (empty when the devices have nothing to steer).
    pub fn files(&self) -> &[SteerFile] {
        &self.shared.files
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
        let mut guardian = self
            .shared
            .guardian
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let r = self.shared.restore();
        if let Some(g) = guardian.take() {
            // Restored: the guardian goes quietly; otherwise it tries once more.
            if r.is_ok() {
                g.dismiss();
            } else {
                g.abandon();
            }
        }
        r
    }
}

impl Drop for IrqSteer {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// `lo` with one receive queue; `eth0` with two MSI interrupts, a third named in
    /// /proc/interrupts, and two queues.
    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "sys/class/net/lo/queues/rx-0/rps_cpus", "0\n");
        write(r, "sys/class/net/lo/queues/tx-0/xps_cpus", "0\n");
        write(r, "sys/class/net/eth0/device/msi_irqs/24", "msi\n");
        write(r, "sys/class/net/eth0/device/msi_irqs/25", "msi\n");
        write(r, "sys/class/net/eth0/queues/rx-0/rps_cpus", "00000000\n");
        write(r, "sys/class/net/eth0/queues/rx-1/rps_cpus", "00000000\n");
        for n in [24, 25, 26, 30] {
            write(r, &format!("proc/irq/{n}/smp_affinity_list"), "0-3\n");
        }
        write(
            r,
            "proc/interrupts",
            "           CPU0       CPU1\n 24:  1 2  PCI-MSI 1-edge  eth0\n 26:  0 0  PCI-MSI 3-edge  eth0-rx-1\n 30:  5 5  IO-APIC 2-edge  eth01\nLOC:  9 9  Local timer interrupts\n",
        );
        d
    }

    #[test]
    fn a_devices_interrupts_come_from_msi_irqs_and_proc_interrupts_names() {
        let d = tree();
        assert_eq!(device_irqs(d.path(), "eth0"), [24, 25, 26]);
        assert!(device_irqs(d.path(), "lo").is_empty());
    }

    #[test]
    fn masks_are_written_as_the_kernel_prints_them() {
        let set = |v: &[u32]| v.iter().copied().collect::<CpuSet>();
        assert_eq!(set(&[1]).to_mask_string(), "00000002");
        assert_eq!(set(&[0, 33]).to_mask_string(), "00000002,00000001");
    }

    #[test]
    fn steering_writes_every_file_and_dropping_puts_the_old_values_back() {
        let d = tree();
        let sysfs = Sysfs::at(d.path());
        let quiet = Protection {
            guardian: false,
            signals: false,
        };
        let cpus: CpuSet = [2].into_iter().collect();
        let read = |rel: &str| {
            std::fs::read_to_string(d.path().join(rel))
                .unwrap()
                .trim()
                .to_string()
        };
        let s =
            IrqSteer::apply(sysfs.clone(), &["eth0".into(), "lo".into()], &cpus, quiet).unwrap();
        assert_eq!(s.files().len(), 6, "{s:?}");
        assert_eq!(s.files().iter().filter(|f| f.is_irq()).count(), 3);
        assert_eq!(read("proc/irq/25/smp_affinity_list"), "2");
        assert_eq!(read("proc/irq/30/smp_affinity_list"), "0-3");
        assert_eq!(read("sys/class/net/eth0/queues/rx-1/rps_cpus"), "00000004");
        assert_eq!(read("sys/class/net/lo/queues/rx-0/rps_cpus"), "00000004");
        drop(s);
        assert_eq!(read("proc/irq/25/smp_affinity_list"), "0-3");
        assert_eq!(read("sys/class/net/lo/queues/rx-0/rps_cpus"), "0");
        assert_eq!(read("sys/class/net/eth0/queues/rx-0/rps_cpus"), "00000000");
        // A device that is not there is named.
        let e = IrqSteer::apply(sysfs.clone(), &["veth9".into()], &cpus, quiet).unwrap_err();
        assert!(e.to_string().contains("veth9"), "{e}");
        // Not root on the real machine: refused before any write.
        let e = IrqSteer::apply(sysfs.as_user(1000), &["lo".into()], &cpus, quiet).unwrap_err();
        assert!(e.to_string().contains("needs root"), "{e}");
        assert_eq!(read("sys/class/net/lo/queues/rx-0/rps_cpus"), "0");
    }

    #[test]
    fn a_refused_write_undoes_the_writes_before_it() {
        let d = tree();
        // The second interrupt is kernel-managed: the emulated kernel refuses its write
        // (EIO), as a real one does.
        write(d.path(), "proc/irq/25/managed", "1\n");
        let cpus: CpuSet = [1].into_iter().collect();
        let quiet = Protection {
            guardian: false,
            signals: false,
        };
        let sysfs = Sysfs::emulating_kernel(d.path());
        let e = IrqSteer::apply(sysfs, &["eth0".into()], &cpus, quiet).unwrap_err();
        assert!(
            e.to_string().contains("proc/irq/25/smp_affinity_list"),
            "{e}"
        );
        let a = std::fs::read_to_string(d.path().join("proc/irq/24/smp_affinity_list")).unwrap();
        assert_eq!(a.trim(), "0-3");
    }

    #[test]
    fn the_guardian_writes_the_old_values_back_when_the_process_is_gone() {
        let d = tree();
        let cpus: CpuSet = [3].into_iter().collect();
        let guarded = Protection {
            guardian: true,
            signals: false,
        };
        let s = IrqSteer::apply(Sysfs::at(d.path()), &["lo".into()], &cpus, guarded).unwrap();
        let rps = d.path().join("sys/class/net/lo/queues/rx-0/rps_cpus");
        assert_eq!(std::fs::read_to_string(&rps).unwrap().trim(), "00000008");
        // As if smtlab died: the guardian's pipe closes without a word.
        let g = s.shared.guardian.lock().unwrap().take().unwrap();
        std::mem::forget(s);
        g.abandon();
        assert_eq!(std::fs::read_to_string(&rps).unwrap().trim(), "0");
    }
}
