//! Benchmark descriptions and results: what the catalog says about each benchmark and
//! what a measured cell holds, independent of how it was measured or will be shown.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::unit::Unit;

named_enum! {
    fn as_str;
    /// Whether a larger value is better (bandwidth, operations per second) or worse
    /// (latency), named as tables, CSV and the store name it (`as_str`).
    #[derive(Hash, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Direction {
        Higher = "higher",
        Lower = "lower",
    }
}

/// How a sample's value is derived from its elapsed time and the work it did.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ValueKind {
    /// `work / seconds / scale`: throughput, e.g. bytes with scale 1e9 gives GB/s.
    Rate { scale: f64 },
    /// `nanoseconds / work`: the time of one operation, with loop overhead subtracted.
    TimePerOp,
}

/// One parameter a benchmark accepts (`size=64MiB`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamInfo {
    pub name: String,
    /// Default value, in the same syntax the user types.
    pub default: String,
    /// Value used by quick runs (`--quick`), when it differs from the default.
    pub quick: Option<String>,
    pub help: String,
    /// Values with which the benchmark is no longer what its `origin` measured, each
    /// with what differs: the report says so beside its cells, reading this rather than
    /// knowing benchmarks by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub departs: Vec<Departure>,
}

/// A parameter value with which a benchmark departs from its origin
/// ([`ParamInfo::departs`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Departure {
    pub value: String,
    /// What differs, in a few words: `smtlab's user-space NFSv3 server, not the
    /// kernel's nfsd that paper 004 measured`.
    pub note: String,
}

/// The section of the report that presents a benchmark's cells, beyond the sections
/// every cell gets (yields, scaling, all cells). The report picks sections by this, never
/// by a benchmark's name, so a renamed benchmark keeps its section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportSection {
    /// The general sections only.
    #[default]
    General,
    /// `smtlab exec`: the verdict of each placement against the first.
    Exec,
    /// Web server throughput per server and placement, latencies and errors (paper 000
    /// Figs 1-6).
    WebStatic,
    /// Web capacity at a latency bound and its conformance curve (paper 000 Figs 20-21).
    WebCapacity,
    /// A speed-up table by the swept parameter with a chart (paper 001 Tables 3-6 and
    /// the netperf-style rows); `caption` names the table it re-creates.
    SpeedupTable { caption: String },
    /// The AIM9 rows (paper 001 Table 2), as results exported before each row named its
    /// AIM9 row ([`ReportSection::AimRow`]).
    Aim,
    /// A row of paper 001 Table 2 (AIM9): the row's name as AIM9 prints it (`add_double`)
    /// and what it counts, as the paper's table says (`Thousand Double Precision Additions
    /// per second`). Rows are in catalog order, which is the paper's.
    AimRow { row: String, label: String },
    /// The task pool's figures (paper 002 Figs 15-16).
    TaskPool,
    /// A multiprogrammed mix (paper 003 section 2.3): each program's progress in the mix
    /// and the weighted speedup, per placement.
    Mix,
    /// The OLTP and SDET section (paper 004).
    Oltp,
    /// A row of the OS latency table (paper 001 Table 1): the row's `label` as the paper
    /// prints it, which assumes the parameters `label_params` (`Select on 10 fd's` is
    /// `fds=10`); a cell with other values gets them appended. Rows are in catalog order.
    OsLatency {
        label: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        label_params: BTreeMap<String, String>,
    },
}

impl ReportSection {
    pub fn is_general(&self) -> bool {
        *self == ReportSection::General
    }

    /// One of the server and system workloads (paper 004 Chart 1's bars).
    pub fn is_workload(&self) -> bool {
        !matches!(
            self,
            ReportSection::General | ReportSection::Exec | ReportSection::OsLatency { .. }
        )
    }

    /// The paper table a row belongs to (`paper 001 Table 1`), for sections that list the
    /// rows a run did not measure; `None` for sections that are not table rows.
    pub fn paper_table(&self) -> Option<&'static str> {
        match self {
            ReportSection::OsLatency { .. } => Some("paper 001 Table 1"),
            ReportSection::AimRow { .. } => Some("paper 001 Table 2"),
            _ => None,
        }
    }

    /// One of the AIM9 rows, as named rows or as older results hold them.
    pub fn is_aim(&self) -> bool {
        matches!(self, ReportSection::Aim | ReportSection::AimRow { .. })
    }
}

/// What the catalog says about one benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchInfo {
    /// Unique name, e.g. `mem-read`.
    pub name: String,
    /// `compute`, `memory`, `threads` or `os`.
    pub group: String,
    /// Unit of the primary value: `GB/s`, `GOPS`, `ns`, `Mops/s`.
    pub unit: Unit,
    pub direction: Direction,
    pub value_kind: ValueKind,
    pub description: String,
    /// Where the experiment comes from, e.g. `paper 001 Table 1` or `paper 002 s4`.
    pub origin: String,
    pub params: Vec<ParamInfo>,
    /// The parameter the workload's table is read by when a run sweeps none (paper
    /// 001's row heading: `clients` for dbench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub main_param: Option<String>,
    /// The report section that presents it.
    #[serde(default, skip_serializing_if = "ReportSection::is_general")]
    pub report: ReportSection,
}

/// Summary statistics of a cell's samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub p25: f64,
    pub p75: f64,
    pub stddev: f64,
    /// Half-width of the Student-t 95% confidence interval of the mean.
    pub ci95_half_width: f64,
    /// `ci95_half_width / mean`.
    pub ci95_rel: f64,
}

/// One timed sample as kept in results: its value and the raw facts it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRecord {
    /// The value in the benchmark's unit.
    pub value: f64,
    /// Inner iterations the sample ran.
    pub iterations: u64,
    /// First start to last finish, before any overhead subtraction.
    pub elapsed_ns: u64,
    /// Units of work done (operations, bytes, round trips).
    pub work: f64,
    /// CPU time of all workers together, when measured.
    pub cpu_ns: Option<u64>,
    /// Time between the first and the last worker starting.
    pub start_spread_ns: Option<u64>,
    /// CPU each worker ran on, in worker order.
    pub cpus: Vec<u32>,
    /// Secondary per-sample figures (`failed_per_success`, `wake_ns`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
}
