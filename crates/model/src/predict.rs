//! What `smtlab predict` planned, as the report reads it: for every measured pair the
//! keys of its cells, grouped by role (a workload beside a ruler, a ruler beside a
//! workload, a training pair, a held-out pair), and the rulers by name. The keys say
//! which cell is which, so two rulers built on one benchmark (an L1 and an L2
//! footprint, both `mem-latency`) are never taken for each other.

use serde::{Deserialize, Serialize};

use crate::keys::Form;
use crate::{CacheType, CellKey, Direction, Topology};

/// The cells of one measured pair: A alone, and A beside B in each form.
#[derive(Debug, Clone, PartialEq)]
pub struct PairKeys {
    pub a: String,
    pub b: String,
    /// B's direction (higher or lower is better), for its slowdown beside A.
    pub b_direction: Direction,
    pub alone: CellKey,
    pub co: Vec<(Form, CellKey)>,
}

/// A ruler as planned: its short name, the resource it presses, and the benchmark and
/// parameters that make it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RulerSpec {
    pub name: String,
    pub resource: String,
    pub workload: String,
    /// For the cache footprint rulers (a random chase over one cache's size), their
    /// order from the smallest cache: each must be slower per load than the one before,
    /// or its footprint did not leave the smaller cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footprint_rank: Option<u8>,
    /// Measured as the partner only (see [`RulerDef::partner_only`]): its
    /// contentiousness and its own figure come from the partner's side of the cells of
    /// workloads beside it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partner_only: bool,
    /// The unit of a partner-only ruler's own figure (no cell of its own carries it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partner_unit: Option<String>,
}

/// The pairs of a `predict` plan by role.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanKeys {
    pub workloads: Vec<String>,
    pub rulers: Vec<RulerSpec>,
    pub forms: Vec<Form>,
    /// Each workload beside each ruler.
    pub sensitivity: Vec<PairKeys>,
    /// Each ruler beside each workload.
    pub contentiousness: Vec<PairKeys>,
    pub training: Vec<PairKeys>,
    pub held_out: Vec<PairKeys>,
    /// The workloads no cell has as its partner: server workloads in a run stored
    /// before a server could be a partner. No contentiousness of theirs is read, not
    /// even a partner-only ruler's side, so nothing is predicted beside them.
    pub never_partners: Vec<String>,
}

/// The partner name of a ruler in its cells' conditions, apart from workload names.
pub const RULER_PREFIX: &str = "ruler:";

/// A cache size a ruler needs and the topology does not give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the topology gives no {0} size")]
pub struct NoCacheSize(pub &'static str);

/// A ruler's definition: name, resource, catalog benchmark, and the parameters that
/// make it press its resource on one machine (or the cache size it lacks). The runner
/// builds the ruler from it; the report finds a stored ruler's cells by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulerDef {
    pub name: &'static str,
    pub resource: &'static str,
    pub bench: &'static str,
    pub params: Result<Vec<(&'static str, String)>, NoCacheSize>,
}

impl RulerDef {
    /// The footprint rulers' order from the smallest cache (see [`RulerSpec`]).
    pub fn footprint_rank(&self) -> Option<u8> {
        match self.name {
            "l1d" => Some(1),
            "l2" => Some(2),
            "llc" => Some(3),
            _ => None,
        }
    }

    /// The ruler's thread count: its own `threads` parameter, else one.
    pub fn threads(&self) -> &str {
        let own = self.params.as_deref().unwrap_or_default();
        own.iter()
            .find(|(k, _)| *k == "threads")
            .map_or("1", |(_, v)| v.as_str())
    }

    /// A ruler of `threads=auto` spreads over every CPU outside the measured core: it
    /// is measured as the partner only, as the measured workload it would need them all.
    pub fn partner_only(&self) -> bool {
        self.threads() == "auto"
    }

    /// Whether a cell of `bench` with `params` is this ruler: the same benchmark, its
    /// threads (one unless it says) and the ruler's parameters (the catalog's defaults
    /// may come on top).
    pub fn matches(
        &self,
        bench: &str,
        params: &std::collections::BTreeMap<String, String>,
    ) -> bool {
        let Ok(own) = &self.params else {
            return false;
        };
        bench == self.bench
            && params.get("threads").map(String::as_str) == Some(self.threads())
            && own.iter().all(|(k, v)| params.get(*k) == Some(v))
    }
}

/// Every ruler's name, in the order of [`ruler_definitions`].
pub const RULERS: [&str; 10] = [
    "int",
    "fp",
    "load-store",
    "l1d",
    "l2",
    "llc",
    "dram",
    "dram-wide",
    "syscall",
    "frontend",
];

/// The size of the data or unified cache of `level` that `cpu` reaches.
fn cache_bytes(topo: &Topology, level: u8, cpu: u32) -> Option<u64> {
    topo.caches
        .iter()
        .filter(|c| c.level == level && c.cache_type != CacheType::Instruction)
        .filter(|c| c.cpus.contains(cpu))
        .find_map(|c| c.size_bytes)
}

/// Every ruler sized for the CPU `cpu` of `topo`: the integer or floating-point chain of
/// `int-ops`/`fp-ops`, a copy inside the L1D (`mem-copy`, the load/store ports), a random
/// chase over the L1D, the L2 or the last-level cache's size (`mem-latency`: a
/// footprint), a stream over 4x the last-level cache (`mem-read`: DRAM bandwidth), the
/// same stream on every CPU outside the measured core (`threads=auto`: a partner only),
/// a system-call loop (`null-syscall`: the kernel's entry path) and calls through 1024
/// functions in a shuffled order (`frontend`: the instruction supply).
pub fn ruler_definitions(topo: &Topology, cpu: u32) -> Vec<RulerDef> {
    let sized = |bytes: Option<u64>, what: &'static str, part: u64| {
        bytes
            .map(|b| vec![("size", (b / part).to_string())])
            .ok_or(NoCacheSize(what))
    };
    let def = |name, resource, bench, params| RulerDef {
        name,
        resource,
        bench,
        params,
    };
    let (l1, l2) = (cache_bytes(topo, 1, cpu), cache_bytes(topo, 2, cpu));
    vec![
        def("int", "integer ALU", "int-ops", Ok(vec![])),
        def("fp", "floating-point units", "fp-ops", Ok(vec![])),
        def(
            "load-store",
            "load/store ports (copy inside the L1D)",
            "mem-copy",
            sized(l1, "L1D", 2),
        ),
        def(
            "l1d",
            "L1D footprint (random chase)",
            "mem-latency",
            sized(l1, "L1D", 1),
        ),
        def(
            "l2",
            "L2 footprint (random chase)",
            "mem-latency",
            sized(l2, "L2", 1),
        ),
        def(
            "llc",
            "last-level cache footprint (random chase)",
            "mem-latency",
            sized(topo.llc_bytes(), "last-level cache", 1),
        ),
        def(
            "dram",
            "DRAM bandwidth (stream over 4x the LLC)",
            "mem-read",
            Ok(vec![("size", "auto".into())]),
        ),
        def(
            "dram-wide",
            "DRAM bandwidth: a stream over 4x the LLC on every CPU outside the measured core",
            "mem-read",
            Ok(vec![("size", "auto".into()), ("threads", "auto".into())]),
        ),
        def(
            "syscall",
            "kernel entry and exit (system-call loop)",
            "null-syscall",
            Ok(vec![]),
        ),
        def(
            "frontend",
            "instruction supply (1024 functions called in a shuffled order)",
            "frontend",
            Ok(vec![]),
        ),
    ]
}
