//! What the kernel does when its SMT and hotplug files are written, done to a fake tree
//! ([`Sysfs::emulating_kernel`]), so that a tree in a temporary directory behaves like a
//! machine with SMT siblings: `smt/control` `off` takes every secondary thread offline
//! (`cpuN/online` reads 0) and `on` brings them back, a secondary thread cannot be
//! brought online while SMT is off, and `smt/active` says whether some core has more
//! than one thread online. A thread's core is its `topology/thread_siblings_list`;
//! its first CPU is the primary thread.
//!
//! Interrupt affinities (`proc/irq/N/smp_affinity_list`) are plain files, except that
//! the kernel refuses (`EIO`) to move an interrupt it manages itself, marked in a fake
//! tree by a `managed` file beside it.
//!
//! Every write the emulated kernel took is appended to [`JOURNAL`] at the tree's root
//! (`sys/devices/system/cpu/cpu1/online 0`), so a test can see what a command did to the
//! machine while it ran, not only the state it left.
//!
//! The guardian process, which restores after smtlab is killed, writes the saved values
//! back as plain files: every CPU's `online` comes back, `smt/active` may stay stale.

use std::io;
use std::path::{Path, PathBuf};

use smtlab_model::CpuSet;

use crate::sysfs::{Sysfs, write_file};

impl Sysfs {
    /// The tree under `root`, whose writes do to it what the kernel would do to its own
    /// (SMT control takes the secondary threads offline and back): the SMT and hotplug
    /// files of a fake machine.
    pub fn emulating_kernel(root: impl Into<PathBuf>) -> Self {
        Sysfs::at(root).writing_with(write)
    }
}

/// The kernel's refusal of a write, before it happens.
fn check(sysfs: &Sysfs, path: &Path, value: &str) -> io::Result<()> {
    if path.file_name().is_some_and(|n| n == "smp_affinity_list")
        && path.with_file_name("managed").exists()
    {
        // A kernel-managed interrupt (multi-queue drivers): its affinity is the kernel's.
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    let Some(cpu) = online_file_cpu(sysfs, path) else {
        return Ok(());
    };
    let smt_off = sysfs.read(&sysfs.control_path()).ok().flatten().as_deref() == Some("off");
    if value.trim() == "1" && smt_off && !is_primary(sysfs, cpu) {
        // As the kernel answers: SMT control keeps secondary threads offline.
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    Ok(())
}

/// The file at the root of an emulating tree that lists the writes it took, in order.
pub const JOURNAL: &str = "writes.log";

/// A write as the kernel takes it: refused before it happens, or done with what follows.
fn write(sysfs: &Sysfs, path: &Path, value: &str) -> io::Result<()> {
    check(sysfs, path, value)?;
    write_file(path, value)?;
    effects(sysfs, path, value)?;
    // Journaled once its effects are done, so a reader of the journal sees them.
    use std::io::Write;
    let rel = path.strip_prefix(sysfs.root()).unwrap_or(path);
    let mut journal = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(sysfs.root().join(JOURNAL))?;
    writeln!(journal, "{} {}", rel.display(), value.trim())
}

fn effects(sysfs: &Sysfs, path: &Path, value: &str) -> io::Result<()> {
    if path == sysfs.control_path() {
        let online = match value.trim() {
            "off" | "forceoff" => "0",
            "on" => "1",
            _ => return Ok(()),
        };
        for cpu in secondary_threads(sysfs) {
            let file = sysfs.online_path(cpu);
            if file.exists() {
                std::fs::write(file, format!("{online}\n"))?;
            }
        }
    } else if online_file_cpu(sysfs, path).is_none() {
        return Ok(());
    }
    let active = any_core_with_two_online(sysfs);
    std::fs::write(sysfs.active_path(), if active { "1\n" } else { "0\n" })
}

fn online_file_cpu(sysfs: &Sysfs, path: &Path) -> Option<u32> {
    let rel = path.strip_prefix(sysfs.cpu_dir()).ok()?;
    let mut parts = rel.iter();
    let cpu = parts.next()?.to_str()?.strip_prefix("cpu")?.parse().ok()?;
    (parts.next()?.to_str()? == "online" && parts.next().is_none()).then_some(cpu)
}

fn siblings(sysfs: &Sysfs, cpu: u32) -> CpuSet {
    let path = sysfs
        .cpu_dir()
        .join(format!("cpu{cpu}/topology/thread_siblings_list"));
    let text = sysfs.read(&path).ok().flatten().unwrap_or_default();
    CpuSet::parse_list(&text).unwrap_or_default()
}

fn is_primary(sysfs: &Sysfs, cpu: u32) -> bool {
    siblings(sysfs, cpu)
        .iter()
        .next()
        .is_none_or(|first| first == cpu)
}

fn secondary_threads(sysfs: &Sysfs) -> Vec<u32> {
    let cpus = sysfs.cpu_numbers().unwrap_or_default();
    cpus.into_iter()
        .filter(|&c| !is_primary(sysfs, c))
        .collect()
}

fn online(sysfs: &Sysfs, cpu: u32) -> bool {
    sysfs
        .read(&sysfs.online_path(cpu))
        .ok()
        .flatten()
        .as_deref()
        != Some("0")
}

fn any_core_with_two_online(sysfs: &Sysfs) -> bool {
    let cpus = sysfs.cpu_numbers().unwrap_or_default();
    cpus.iter().any(|&c| {
        online(sysfs, c)
            && siblings(sysfs, c)
                .iter()
                .any(|s| s != c && online(sysfs, s))
    })
}
