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
//! [`steer`] reads every such file of the devices and writes the target CPUs into them
//! through a [`FileWrites`] guard, which writes the values it found back when dropped, on
//! SIGINT/SIGTERM and after SIGKILL. A kernel that refuses a write (a kernel-managed
//! interrupt answers `EIO`) fails the whole steering: what was written is put back, and
//! the error names the file.

use std::path::{Path, PathBuf};

use smtlab_model::CpuSet;

use crate::error::ControlError;
use crate::guard::Protection;
use crate::sysfs::Sysfs;
use crate::writes::{FileWrite, FileWrites};

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
) -> Result<Vec<FileWrite>, ControlError> {
    let root = sysfs.root();
    let mut files = Vec::new();
    let mut add = |path: PathBuf, value: String| -> Result<(), ControlError> {
        if let Some(before) = sysfs.read(&path)? {
            files.push(FileWrite {
                path,
                before,
                value,
            });
        }
        Ok(())
    };
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
            add(path, cpus.to_list_string())?;
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
            add(path, cpus.to_mask_string())?;
        }
    }
    Ok(files)
}

/// Steers `devices` to `cpus` under the protection asked for until the guard drops; an
/// error, with every write undone, when a file cannot be written.
pub fn steer(
    sysfs: Sysfs,
    devices: &[String],
    cpus: &CpuSet,
    protection: Protection,
) -> Result<FileWrites, ControlError> {
    let files = plan(&sysfs, devices, cpus)?;
    FileWrites::apply(sysfs, "steering network interrupts", files, protection)
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
        let s = steer(sysfs.clone(), &["eth0".into(), "lo".into()], &cpus, quiet).unwrap();
        assert_eq!(s.files().len(), 6, "{s:?}");
        let irqs = s
            .files()
            .iter()
            .filter(|f| f.path.iter().any(|c| c == "irq"));
        assert_eq!(irqs.count(), 3);
        assert_eq!(read("proc/irq/25/smp_affinity_list"), "2");
        assert_eq!(read("proc/irq/30/smp_affinity_list"), "0-3");
        assert_eq!(read("sys/class/net/eth0/queues/rx-1/rps_cpus"), "00000004");
        assert_eq!(read("sys/class/net/lo/queues/rx-0/rps_cpus"), "00000004");
        drop(s);
        assert_eq!(read("proc/irq/25/smp_affinity_list"), "0-3");
        assert_eq!(read("sys/class/net/lo/queues/rx-0/rps_cpus"), "0");
        assert_eq!(read("sys/class/net/eth0/queues/rx-0/rps_cpus"), "00000000");
        // A device that is not there is named.
        let e = steer(sysfs.clone(), &["veth9".into()], &cpus, quiet).unwrap_err();
        assert!(e.to_string().contains("veth9"), "{e}");
        // Not root on the real machine: refused before any write.
        let e = steer(sysfs.as_user(1000), &["lo".into()], &cpus, quiet).unwrap_err();
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
        let e = steer(sysfs, &["eth0".into()], &cpus, quiet).unwrap_err();
        assert!(
            e.to_string().contains("proc/irq/25/smp_affinity_list"),
            "{e}"
        );
        let a = std::fs::read_to_string(d.path().join("proc/irq/24/smp_affinity_list")).unwrap();
        assert_eq!(a.trim(), "0-3");
    }
}
