//! The machine's CPU topology as smtlab sees it, and its `smtlab.topology/1` JSON form.
//!
//! The shape follows hwloc's view of a Linux machine: packages hold cores, cores hold
//! logical CPUs (SMT siblings). A core the kernel places in no package (no
//! `physical_package_id`, no `core_siblings`) goes in [`Topology::cores_without_package`],
//! as hwloc then creates no package object either.

use serde::{Deserialize, Serialize};

use crate::CpuSet;

/// Value of the `schema` field of `smtlab topo --json`.
pub const TOPOLOGY_SCHEMA: &str = "smtlab.topology/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Always [`TOPOLOGY_SCHEMA`].
    pub schema: String,
    /// Root directory the tree was read from (`/` for the running system).
    pub root: String,
    /// Online logical CPUs that the kernel describes (hwloc's PUs).
    pub cpus: CpuSet,
    /// CPUs that have a `cpuN` directory but are offline (or give no topology), as
    /// hwloc counts them; `possible` CPUs without a directory are not listed.
    pub offline_cpus: CpuSet,
    /// CPUs this process may run on, when a cpuset or affinity mask hides some of `cpus`.
    pub allowed_cpus: Option<CpuSet>,
    pub packages: Vec<Package>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cores_without_package: Vec<Core>,
    pub numa_nodes: Vec<NumaNode>,
    pub smt: SmtInfo,
    pub caches: Vec<Cache>,
    /// The TLBs of the CPU smtlab runs on, from CPUID (x86-64, the running system only;
    /// a saved tree has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tlbs: Vec<Tlb>,
    /// Kinds of cores on hybrid machines (P/E cores, big.LITTLE); empty when uniform.
    pub core_kinds: Vec<CoreKind>,
    /// CPU model name from /proc/cpuinfo, when it says.
    pub cpu_model: Option<String>,
    /// CPU vendor (`GenuineIntel`, `AuthenticAMD`, an ARM implementer, ...), when known.
    pub vendor: Option<String>,
    /// Hypervisor we run under (`KVM`, `VMware`, ...), `unknown` when only the CPU's
    /// `hypervisor` flag says the machine is virtual, `None` when nothing says so.
    pub virtualization: Option<String>,
    /// The kernel was built without `CONFIG_SMP`: its version string (`uname -v`,
    /// `/proc/sys/kernel/version`) has no `SMP`. One CPU, and none of the SMP kernel's
    /// locking: paper 000's 1T-UP, which the `1t-up-kernel` placement names.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uniprocessor_kernel: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Package {
    /// `physical_package_id`, or `None` where the kernel gives -1 or nothing.
    pub id: Option<u32>,
    pub cpus: CpuSet,
    pub cores: Vec<Core>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Core {
    /// `core_id` from sysfs (unique only within a package, and not even there on s390);
    /// the core's position in its package where the kernel gives no `core_id` (PS3).
    pub id: u32,
    /// Online SMT siblings of this core.
    pub cpus: CpuSet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub die_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<u32>,
    /// Name of the core kind on hybrid machines (see [`Topology::core_kinds`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: CpuSet,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmtInfo {
    pub threads_per_core_min: u32,
    pub threads_per_core_max: u32,
    /// Content of /sys/devices/system/cpu/smt/control (`on`, `off`, `forceoff`,
    /// `notsupported`, `notimplemented`), or `None` when the file is absent.
    pub control: Option<String>,
    /// Content of /sys/devices/system/cpu/smt/active, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<bool>,
}

/// In the order caches are listed: data, instruction, unified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheType {
    Data,
    Instruction,
    Unified,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    pub level: u8,
    #[serde(rename = "type")]
    pub cache_type: CacheType,
    pub size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways: Option<u32>,
    /// Online CPUs sharing this cache instance.
    pub cpus: CpuSet,
}

/// One TLB as CPUID describes it (paper 000 Table 1 lists the TLBs beside the caches).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tlb {
    /// 1 for the first level, 2 for the second (shared by instructions and data on
    /// most cores).
    pub level: u8,
    #[serde(rename = "type")]
    pub tlb_type: CacheType,
    /// The page sizes its entries hold (`4K`, `2M/4M`, `1G`).
    pub pages: String,
    pub entries: u32,
    /// `None` for a fully associative TLB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreKind {
    /// `IntelCore`, `IntelAtom`, `cortex-x925`, or `capacity-1024` where only sysfs tells.
    pub name: String,
    pub cpus: CpuSet,
    /// How we know: `cpu_core/cpus` sysfs, `cpuinfo part`, `cpu_capacity`, `max frequency`.
    pub source: String,
}

impl Topology {
    /// All cores: those in packages, in package order, then any without a package.
    pub fn cores(&self) -> impl Iterator<Item = &Core> {
        self.packages
            .iter()
            .flat_map(|p| p.cores.iter())
            .chain(self.cores_without_package.iter())
    }

    pub fn core_count(&self) -> usize {
        self.cores().count()
    }

    /// The core holding `cpu`.
    pub fn core_of(&self, cpu: u32) -> Option<&Core> {
        self.cores().find(|c| c.cpus.contains(cpu))
    }

    /// Index into `packages` of the package holding `cpu`.
    pub fn package_index_of(&self, cpu: u32) -> Option<usize> {
        self.packages.iter().position(|p| p.cpus.contains(cpu))
    }

    /// Whether any core runs more than one online hardware thread.
    pub fn smt_visible(&self) -> bool {
        self.smt.threads_per_core_max > 1
    }

    /// The largest unified cache's size, the last-level cache for sizing memory tests.
    pub fn llc_bytes(&self) -> Option<u64> {
        self.caches
            .iter()
            .filter(|c| c.cache_type != CacheType::Instruction)
            .max_by_key(|c| (c.level, c.size_bytes))
            .and_then(|c| c.size_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(id: u32, cpus: &[u32]) -> Core {
        Core {
            id,
            cpus: cpus.iter().copied().collect(),
            die_id: None,
            cluster_id: None,
            kind: None,
        }
    }

    fn l3_8mib(cpus: CpuSet) -> Cache {
        Cache {
            level: 3,
            cache_type: CacheType::Unified,
            size_bytes: Some(8 << 20),
            line_bytes: None,
            ways: None,
            cpus,
        }
    }

    #[test]
    fn helpers_walk_packages_and_loose_cores() {
        let t = Topology {
            schema: TOPOLOGY_SCHEMA.into(),
            root: "/".into(),
            cpus: (0..6).collect(),
            offline_cpus: CpuSet::new(),
            allowed_cpus: None,
            packages: vec![Package {
                id: Some(0),
                cpus: (0..4).collect(),
                cores: vec![core(0, &[0, 2]), core(1, &[1, 3])],
            }],
            cores_without_package: vec![core(0, &[4, 5])],
            numa_nodes: vec![],
            smt: SmtInfo {
                threads_per_core_min: 2,
                threads_per_core_max: 2,
                control: None,
                active: None,
            },
            caches: vec![l3_8mib((0..4).collect()), l3_8mib((4..6).collect())],
            tlbs: vec![],
            core_kinds: vec![],
            cpu_model: None,
            vendor: None,
            virtualization: None,
            uniprocessor_kernel: false,
        };
        assert_eq!(t.core_count(), 3);
        assert_eq!(t.core_of(5).unwrap().cpus.to_vec(), vec![4, 5]);
        assert_eq!(t.package_index_of(3), Some(0));
        assert_eq!(t.package_index_of(4), None);
        assert!(t.smt_visible());
        assert_eq!(t.llc_bytes(), Some(8 << 20));
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(
            json["packages"][0]["cores"][1]["cpus"],
            serde_json::json!([1, 3])
        );
        assert_eq!(json["caches"][0]["type"], "unified");
    }
}
