//! Reading the SMT and CPU hotplug state.

use std::path::PathBuf;

use serde::Serialize;
use smtlab_model::CpuSet;

use crate::error::ControlError;
use crate::sysfs::Sysfs;

/// The content of `smt/control`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtControl {
    On,
    Off,
    /// Off until reboot (`nosmt=force`).
    ForceOff,
    /// The CPU or hypervisor shows no siblings.
    NotSupported,
    /// The kernel cannot switch SMT on this architecture.
    NotImplemented,
    /// A value this version does not know.
    Other(String),
}

impl SmtControl {
    pub fn parse(text: &str) -> SmtControl {
        match text {
            "on" => SmtControl::On,
            "off" => SmtControl::Off,
            "forceoff" => SmtControl::ForceOff,
            "notsupported" => SmtControl::NotSupported,
            "notimplemented" => SmtControl::NotImplemented,
            other => SmtControl::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            SmtControl::On => "on",
            SmtControl::Off => "off",
            SmtControl::ForceOff => "forceoff",
            SmtControl::NotSupported => "notsupported",
            SmtControl::NotImplemented => "notimplemented",
            SmtControl::Other(s) => s,
        }
    }

    /// Whether smtlab may write `on` and `off` (and write back this value).
    pub fn switchable(&self) -> bool {
        matches!(self, SmtControl::On | SmtControl::Off)
    }

    /// Why SMT cannot be switched from this state; `None` when it can.
    pub fn refusal(&self) -> Option<ControlError> {
        match self {
            SmtControl::On | SmtControl::Off => None,
            SmtControl::ForceOff => Some(ControlError::ForceOff),
            SmtControl::NotSupported => Some(ControlError::NotSupported),
            SmtControl::NotImplemented => Some(ControlError::NotImplemented),
            SmtControl::Other(v) => Some(ControlError::UnknownControl { value: v.clone() }),
        }
    }
}

/// The online CPUs of one core (its online SMT siblings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoreThreads {
    pub cpus: Vec<u32>,
}

/// What the kernel says about SMT and CPU hotplug right now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SmtSnapshot {
    /// `smt/control`; `None` where the file does not exist.
    pub control: Option<SmtControl>,
    /// `smt/active`: whether any core has more than one thread online.
    pub active: Option<bool>,
    /// Online CPUs.
    pub online: Vec<u32>,
    /// Present CPUs (online or not).
    pub present: Vec<u32>,
    /// CPUs the kernel lets go offline (those with a `cpuN/online` file).
    pub hotpluggable: Vec<u32>,
    /// The online CPUs grouped by core (from `thread_siblings_list`), by first CPU.
    pub cores: Vec<CoreThreads>,
}

impl SmtSnapshot {
    /// Least and most threads online on one core; `None` without cores.
    pub fn threads_per_core(&self) -> Option<(usize, usize)> {
        let min = self.cores.iter().map(|c| c.cpus.len()).min()?;
        let max = self.cores.iter().map(|c| c.cpus.len()).max()?;
        Some((min, max))
    }

    pub fn offline(&self) -> Vec<u32> {
        self.present
            .iter()
            .copied()
            .filter(|c| !self.online.contains(c))
            .collect()
    }
}

/// Reads `smt/control`, `smt/active`, the online and present CPUs and the siblings of
/// every online CPU.
pub fn read(sysfs: &Sysfs) -> Result<SmtSnapshot, ControlError> {
    let control = sysfs
        .read(&sysfs.control_path())?
        .map(|s| SmtControl::parse(&s));
    let active = sysfs.read(&sysfs.active_path())?;
    let active = active
        .map(|s| zero_or_one(sysfs.active_path(), &s))
        .transpose()?;
    let numbers = sysfs.cpu_numbers()?;
    let mut hotpluggable = Vec::new();
    let mut online_by_file = CpuSet::new();
    for &cpu in &numbers {
        let path = sysfs.online_path(cpu);
        // No online file: the kernel keeps this CPU online (often CPU 0). An empty one
        // (saved trees keep the name without the content) says nothing either; it is
        // read as online, as hwloc and smtlab topo do.
        let v = sysfs.read(&path)?.unwrap_or_default();
        if !v.is_empty() {
            hotpluggable.push(cpu);
        }
        if v.is_empty() || zero_or_one(path, &v)? {
            online_by_file.insert(cpu);
        }
    }
    // The per-CPU files first: they are what smtlab writes (and all a fake tree changes);
    // the `online` list is the fallback for trees without cpuN directories.
    let online = if numbers.is_empty() {
        read_list(sysfs, sysfs.cpu_dir().join("online"))?.unwrap_or_default()
    } else {
        online_by_file
    };
    let present = read_list(sysfs, sysfs.cpu_dir().join("present"))?
        .unwrap_or_else(|| numbers.iter().copied().collect());
    let mut cores: Vec<CpuSet> = Vec::new();
    for cpu in online.iter() {
        if cores.iter().any(|c| c.contains(cpu)) {
            continue;
        }
        let topo = sysfs.cpu_dir().join(format!("cpu{cpu}/topology"));
        let siblings = match read_list(sysfs, topo.join("thread_siblings_list"))? {
            Some(set) => Some(set),
            None => read_list(sysfs, topo.join("core_cpus_list"))?,
        };
        let mut set = siblings.unwrap_or_default().intersection(&online);
        set.insert(cpu);
        cores.push(set);
    }
    Ok(SmtSnapshot {
        control,
        active,
        online: online.to_vec(),
        present: present.to_vec(),
        hotpluggable,
        cores: cores
            .into_iter()
            .map(|c| CoreThreads { cpus: c.to_vec() })
            .collect(),
    })
}

/// `1` or `0` (read from `path`) as true or false.
fn zero_or_one(path: PathBuf, text: &str) -> Result<bool, ControlError> {
    match text {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(ControlError::Parse {
            path,
            reason: format!(
                "reads {}, expected 0 or 1",
                smtlab_model::quote::quoted(text)
            ),
        }),
    }
}

/// The CPU list in `path`; `None` when the file does not exist.
fn read_list(sysfs: &Sysfs, path: PathBuf) -> Result<Option<CpuSet>, ControlError> {
    let Some(text) = sysfs.read(&path)? else {
        return Ok(None);
    };
    CpuSet::parse_list(&text)
        .map(Some)
        .map_err(|e| ControlError::Parse {
            path,
            reason: e.to_string(),
        })
}
