//! Placements: which CPUs a workload may use and how its threads map onto them.
//!
//! A [`PlacementSpec`] is what the user wrote (`1c2t`, `2P`, `cpus=0,4`, `all`), already
//! parsed; the placement crate resolves it against a topology into a
//! [`ResolvedPlacement`], whose `cpus` are in thread-assignment order: thread *i* of a
//! workload runs on `cpus[i % cpus.len()]`.

use serde::{Deserialize, Serialize};

use crate::CpuSet;

/// What a placement asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PlacementKind {
    /// `NcMt`: N cores, M hardware threads on each.
    Grid { cores: u32, threads_per_core: u32 },
    /// `all`: every online CPU this process may use.
    All,
    /// `cores`: every core, one thread each.
    Cores,
    /// `half-cores-Mt`: the first half of the cores (compact order: one package
    /// first), M hardware threads on each; the other half is left for a server
    /// workload's clients (`half-cores-1t` against `half-cores-2t` is the whole
    /// machine's SMT question for a server, with room for its load generator).
    HalfCores { threads_per_core: u32 },
    /// `cpus=LIST`: exactly these CPUs.
    Cpus { cpus: CpuSet },
    /// `os`: no pinning; the scheduler decides.
    Os,
    /// `1c1t-up` (alias `1T-UP`): one thread on one CPU with every other CPU taken
    /// offline through CPU hotplug while it is measured: the closest a running SMP
    /// kernel gets to paper 000's uniprocessor kernel.
    Uniprocessor,
    /// `1t-up-kernel`: one thread on the one CPU of a kernel built without
    /// `CONFIG_SMP` ([`crate::Topology::uniprocessor_kernel`]), paper 000's own 1T-UP.
    /// On such a kernel `1c1t` and `1c1t-up` are this placement and take its name.
    UniprocessorKernel,
}

/// The canonical name of [`PlacementKind::Uniprocessor`].
pub const UNIPROCESSOR_NAME: &str = "1c1t-up";

named_enum! {
    /// The placements smtlab itself reasons about by name: the two sides of each SMT pair
    /// and of the scaling steps, and the plans' defaults. `name` is the spec a user
    /// writes for it and the name its cells carry; any other placement is what a user
    /// wrote.
    #[derive(Hash)]
    pub enum Named {
        /// `1c1t`: one thread on one core.
        OneCore = "1c1t",
        /// `1c2t`: two threads on the two SMT siblings of one core.
        Siblings = "1c2t",
        /// `2c1t`: one thread on each of two cores.
        TwoCores = "2c1t",
        /// `2c2t`: two threads on each of two cores.
        TwoCoresSmt = "2c2t",
        /// `cores`: one thread on every core.
        Cores = "cores",
        /// `all`: every online CPU.
        All = "all",
        /// `half-cores-1t`: one thread on each of the first half of the cores.
        HalfCores = "half-cores-1t",
        /// `half-cores-2t`: two threads on each of the first half of the cores.
        HalfCoresSmt = "half-cores-2t",
    }
}

impl PartialEq<Named> for str {
    fn eq(&self, other: &Named) -> bool {
        self == other.name()
    }
}

impl PartialEq<Named> for String {
    fn eq(&self, other: &Named) -> bool {
        self == other.name()
    }
}

/// The canonical name of [`PlacementKind::UniprocessorKernel`].
pub const UP_KERNEL_NAME: &str = "1t-up-kernel";

named_enum! {
    /// Which cores a `NcMt` placement takes.
    #[derive(Default, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum CoreOrder {
        /// Fill one package (then one NUMA node, die, cluster) before the next: cores that
        /// share the most cache.
        #[default]
        Compact = "compact",
        /// Round robin over packages: one core from each package in turn.
        Scatter = "scatter",
    }
}

named_enum! {
    /// In which order the chosen CPUs receive threads.
    #[derive(Default, Hash, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum CpuOrder {
        /// First thread of every chosen core, then second threads, ...: running fewer
        /// threads than CPUs uses separate cores before SMT siblings.
        #[default]
        Spread = "spread",
        /// All threads of one core, then the next core (sibling-adjacent).
        Siblings = "siblings",
        /// By CPU number, as Linux numbers them (paper 002's "dumb" mapping).
        Linear = "linear",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementSpec {
    /// The text the user wrote, e.g. `2P` or `1c2t`.
    pub text: String,
    pub kind: PlacementKind,
    pub core_order: CoreOrder,
    pub cpu_order: CpuOrder,
}

/// A placement resolved against one machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedPlacement {
    /// Canonical name: `1c2t`, `all`, `cores`, `cpus=0,4`, `os`; `scatter` appended as
    /// `2c1t/scatter` when not the default, so names stay unique within a run.
    pub name: String,
    /// What the user wrote.
    pub spec: String,
    /// CPUs in thread-assignment order; empty for `os`.
    pub cpus: Vec<u32>,
    /// Distinct cores used.
    pub cores: u32,
    /// Threads used on each core (maximum over the cores).
    pub threads_per_core: u32,
    /// Distinct packages used.
    pub packages: u32,
    pub core_order: CoreOrder,
    pub cpu_order: CpuOrder,
    /// The kinds of the cores used (`IntelCore`, `IntelAtom`, ...), in order of first use;
    /// empty where the machine reports a single kind. Two entries mean the placement mixes
    /// kinds, and its results are not those of either kind alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub core_kinds: Vec<String>,
}

impl ResolvedPlacement {
    /// Whether threads are pinned (false only for `os`).
    pub fn pinned(&self) -> bool {
        !self.cpus.is_empty()
    }

    /// The CPU thread `i` runs on, or `None` when unpinned.
    pub fn cpu_for_thread(&self, i: usize) -> Option<u32> {
        if self.cpus.is_empty() {
            None
        } else {
            Some(self.cpus[i % self.cpus.len()])
        }
    }

    /// Whether every other CPU must be offline while this placement is measured
    /// (`1c1t-up`).
    pub fn is_uniprocessor(&self) -> bool {
        self.name == UNIPROCESSOR_NAME
    }

    /// Number of CPUs (hardware threads) in the placement; 0 for `os`.
    pub fn width(&self) -> usize {
        self.cpus.len()
    }

    pub fn cpu_set(&self) -> CpuSet {
        self.cpus.iter().copied().collect()
    }

    /// The CPUs a cell on this placement is watched on (its `/proc/stat` time, its
    /// handoffs): the placement's, or every online CPU of `topo` for `os` (the
    /// scheduler may use any of them).
    pub fn sampled_cpus(&self, topo: &crate::Topology) -> CpuSet {
        if self.pinned() {
            self.cpu_set()
        } else {
            topo.cpus.clone()
        }
    }

    /// Whether a cell on this placement works on two CPUs or more: only then can the
    /// way its CPUs share caches (the host moving a VM's CPUs) change its figure.
    pub fn spans_cpus(&self, topo: &crate::Topology) -> bool {
        self.sampled_cpus(topo).len() >= 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_wrap_around_the_cpus() {
        let p = ResolvedPlacement {
            name: "1c2t".into(),
            spec: "2T".into(),
            cpus: vec![0, 16],
            cores: 1,
            threads_per_core: 2,
            packages: 1,
            core_order: CoreOrder::Compact,
            cpu_order: CpuOrder::Spread,
            core_kinds: vec![],
        };
        assert_eq!(p.cpu_for_thread(0), Some(0));
        assert_eq!(p.cpu_for_thread(3), Some(16));
        assert!(p.pinned());
        let os = ResolvedPlacement { cpus: vec![], ..p };
        assert_eq!(os.cpu_for_thread(0), None);
    }

    #[test]
    fn placements_saved_before_core_kinds_still_load() {
        let old = r#"{"name":"1c1t","spec":"1c1t","cpus":[0],"cores":1,"threads_per_core":1,
            "packages":1,"core_order":"compact","cpu_order":"spread"}"#;
        let p: ResolvedPlacement = serde_json::from_str(old).unwrap();
        assert!(p.core_kinds.is_empty());
        let json = serde_json::to_string(&p).unwrap();
        assert!(!json.contains("core_kinds"), "{json}");
    }
}
