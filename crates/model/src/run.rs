//! A run: cells measured together, with the environment they were measured in. This is
//! what the store keeps, `--json` exports (`smtlab.results/1`) and the report draws.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::counters::CellCounters;
use crate::keys::{Conditions, SmtState};
use crate::{BenchInfo, CellResult, Direction, ResolvedPlacement, RunConfig, Topology};

/// Value of the `schema` field of results JSON.
pub const RESULTS_SCHEMA: &str = "smtlab.results/1";

/// The environment a measurement ran in (DESIGN rule 11): what a reader needs to judge
/// whether two results are comparable. Every field is read, never guessed; what could
/// not be read is `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub tool_version: String,
    pub git_commit: Option<String>,
    pub hostname: Option<String>,
    pub kernel: Option<String>,
    pub cpu_model: Option<String>,
    pub microcode: Option<String>,
    pub smt_control: Option<String>,
    pub virtualization: Option<String>,
    pub governor: Option<String>,
    pub boost: Option<String>,
    pub clocksource: Option<String>,
    pub perf_event_paranoid: Option<i32>,
    pub online_cpus: String,
    /// A stable id of the machine, unlike its hostname (which two machines may share):
    /// 16 hex digits of SHA-256 of `/etc/machine-id`, else of the DMI product UUID;
    /// `fake-` and the real machine's id for a run on a fake machine. Absent in runs
    /// made before it was recorded, and where neither source could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
    /// The core clock the run measured, in GHz: a chain of dependent integer additions
    /// (one per cycle) timed on the clock the benchmarks use; the clock the core really
    /// ran at, turbo included. Time figures read in cycles with it (papers 000 and 002
    /// give cycles). `None` before it was recorded, on a fake machine and where it
    /// cannot be measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_clock_ghz: Option<f64>,
    /// How long a cache line took from the first online CPU to each of up to 16 others,
    /// measured at the run's start ([`Handoff`]): what the CPUs really share. Empty
    /// before it was recorded, on a fake machine and where the CPUs cannot be pinned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_handoff: Vec<Handoff>,
}

/// One CPU pair's cache-line handoff (one way, the quickest of a few short batches of
/// round trips), in nanoseconds. SMT siblings hand a line over through their core's own
/// caches, cores of one die through its last-level cache, and anything further through
/// the interconnect: each step costs several times the one before. A virtual machine's
/// topology shows none of it, and its host may move the vCPUs between runs, so two
/// runs whose handoffs differ by [`HANDOFF_CHANGE`] or more ran on CPUs that share
/// differently: not one setup.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Handoff {
    pub from_cpu: u32,
    pub to_cpu: u32,
    pub ns: f64,
}

/// The factor by which one pair's handoff must differ between two runs for their CPUs
/// to count as sharing differently: the steps between siblings, one die and the
/// interconnect are each several times apart, while a pair measured again moves by tens
/// of percent at most.
pub const HANDOFF_CHANGE: f64 = 2.0;

/// The pairs measured in both `a` and `b` whose handoff differs by [`HANDOFF_CHANGE`] or
/// more, as (A's, B's), in A's order.
pub fn handoff_changes(a: &[Handoff], b: &[Handoff]) -> Vec<(Handoff, Handoff)> {
    a.iter()
        .filter_map(|x| {
            let y = b
                .iter()
                .find(|y| y.from_cpu == x.from_cpu && y.to_cpu == x.to_cpu)?;
            let ratio = (x.ns / y.ns).max(y.ns / x.ns);
            (ratio >= HANDOFF_CHANGE).then_some((*x, *y))
        })
        .collect()
}

/// How the host id of a run on an emulated machine (`--fake-machine`) starts.
pub const EMULATED_HOST_ID_PREFIX: &str = "fake-";

/// How the CPU model (and hostname) of a run on an emulated machine starts.
pub const EMULATED_MODEL_PREFIX: &str = "smtlab fake machine";

impl Environment {
    /// Whether the run was made on an emulated machine (`--fake-machine`), whose figures
    /// say nothing about a real host: its host id says so, or, in runs made before host
    /// ids, its CPU model (the fake machine's own name).
    pub fn is_emulated(&self) -> bool {
        self.host_id
            .as_deref()
            .is_some_and(|id| id.starts_with(EMULATED_HOST_ID_PREFIX))
            || self
                .cpu_model
                .as_deref()
                .is_some_and(|m| m.starts_with(EMULATED_MODEL_PREFIX))
    }
}

/// One cell to measure: benchmark x parameters x conditions x placement (as the user
/// named it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct CellKey {
    pub benchmark: String,
    /// The benchmark's own parameters (what it is handed).
    pub params: BTreeMap<String, String>,
    /// The runner's conditions (SMT state, co-run form and partner, offered rate).
    #[serde(default, skip_serializing_if = "Conditions::is_empty")]
    pub conditions: Conditions,
    /// The placement as written in the plan (`1c2t`, `2c1t/scatter`).
    pub placement: String,
}

impl CellKey {
    /// The cell of `benchmark` with `params` on `placement`, under no conditions.
    pub fn new(
        benchmark: impl Into<String>,
        params: BTreeMap<String, String>,
        placement: impl Into<String>,
    ) -> CellKey {
        CellKey {
            benchmark: benchmark.into(),
            params,
            conditions: Conditions::default(),
            placement: placement.into(),
        }
    }

    /// Parameters and conditions as one flat map (`size=4KiB smt=on`): how the store
    /// keeps the key and text/CSV show it.
    pub fn flat_params(&self) -> BTreeMap<String, String> {
        self.conditions.flatten(&self.params)
    }

    /// Same benchmark, parameters and conditions (any placement).
    pub fn same_variant(&self, other: &CellKey) -> bool {
        self.benchmark == other.benchmark
            && self.params == other.params
            && self.conditions == other.conditions
    }
}

/// Those of `params` (flat: parameters and conditions) whose values tell them apart from
/// `others`, the flat parameters of the other cells or groups of the same benchmark
/// (`clients=20`): a name with every parameter would bury it under the values all of
/// them share.
pub fn telling_params(
    params: &BTreeMap<String, String>,
    others: &[BTreeMap<String, String>],
) -> BTreeMap<String, String> {
    params
        .iter()
        .filter(|(k, v)| others.iter().any(|o| o.get(*k) != Some(*v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Serde for a type with `params` and `conditions`: the derived code (`remote =
/// "Self"`), and results written before conditions were typed, which carry them inside
/// `params`, read back typed ([`Conditions::take_from`]).
macro_rules! conditions_serde {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                Self::serialize(self, s)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let mut v = Self::deserialize(d)?;
                let legacy = Conditions::take_from(&mut v.params);
                v.conditions = std::mem::take(&mut v.conditions).or(legacy);
                Ok(v)
            }
        }
    )*};
}
conditions_serde!(CellKey, CellRecord);

/// Whether a run is still going, finished, or was cut short (and can be resumed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Finished,
    Interrupted,
}

/// What a run is: when, where, how, and which cells it plans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// Identifier in the store (assigned by it; 0 before it is stored).
    pub id: i64,
    /// Seconds since the Unix epoch.
    pub started_unix_s: u64,
    pub finished_unix_s: Option<u64>,
    pub status: RunStatus,
    /// The command line that started the run.
    pub command_line: Vec<String>,
    /// `quick`, `default`, `full`, or `None` for an ad-hoc selection.
    pub suite: Option<String>,
    pub environment: Environment,
    /// Topology snapshot of the machine the run measured.
    pub topology: Topology,
    /// Settings every cell is measured with.
    pub config: RunConfig,
    /// Every cell of the run in measuring order, measured or not yet.
    pub plan: Vec<CellKey>,
    /// Notes said once for the whole run (e.g. "no SMT visible: 1c2t and 2c2t left out").
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One measured cell with everything needed to read it on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct CellRecord {
    pub benchmark: String,
    pub group: String,
    pub unit: String,
    pub direction: Direction,
    pub params: BTreeMap<String, String>,
    /// The runner's conditions of the cell (`CellKey::conditions`).
    #[serde(default, skip_serializing_if = "Conditions::is_empty")]
    pub conditions: Conditions,
    /// The placement as planned (`CellKey::placement`).
    pub placement_spec: String,
    /// Exactly which CPUs it resolved to.
    pub placement: ResolvedPlacement,
    pub result: CellResult,
    /// Performance counters, `/proc/stat` time and syscall time of the cell, when it was
    /// measured with `--counters`. Absent in results written without it (and by
    /// versions before counters existed), which still load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<CellCounters>,
}

impl CellRecord {
    pub fn key(&self) -> CellKey {
        CellKey {
            benchmark: self.benchmark.clone(),
            params: self.params.clone(),
            conditions: self.conditions.clone(),
            placement: self.placement_spec.clone(),
        }
    }

    /// The SMT state the cell was measured in, when the run set one.
    pub fn smt(&self) -> Option<SmtState> {
        self.conditions.smt
    }

    /// Parameters and conditions as one flat map, as text and CSV show them.
    pub fn flat_params(&self) -> BTreeMap<String, String> {
        self.conditions.flatten(&self.params)
    }

    /// Same benchmark, parameters and conditions as `other` (any placement): the two
    /// are the same row of a table whose columns are placements.
    pub fn same_variant(&self, other: &CellRecord) -> bool {
        self.benchmark == other.benchmark
            && self.params == other.params
            && self.conditions == other.conditions
    }
}

/// The arguments joined as a shell would need them (`sh -c 'i=0; ...'`): each one with
/// characters other than letters, digits and `-_./=,:+@%` goes in single quotes.
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A cell that could not be measured, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedCell {
    pub key: CellKey,
    pub reason: String,
}

/// A whole run as exported: `smtlab.results/1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResults {
    /// Always [`RESULTS_SCHEMA`].
    pub schema: String,
    pub run: RunMeta,
    pub cells: Vec<CellRecord>,
    #[serde(default)]
    pub skipped: Vec<SkippedCell>,
    /// The catalog entries of the run's benchmarks (their unit, main parameter and
    /// report section), as the build that loaded the run knows them: the store does not
    /// keep them, the reader adds them ([`RunResults::describe`]); an export carries
    /// them. The report picks its sections from these, not from names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub benchmarks: Vec<BenchInfo>,
}

impl RunResults {
    /// Adds the catalog entries of this run's benchmarks that `catalog` knows and the
    /// run does not carry yet, in catalog order; when the run fills a row of a paper's
    /// table (`ReportSection::paper_table`), the entries of that table's other rows too,
    /// so the report can say which rows the run did not measure.
    pub fn describe(&mut self, catalog: impl IntoIterator<Item = BenchInfo>) {
        let catalog: Vec<BenchInfo> = catalog.into_iter().collect();
        let used = |name: &str| {
            self.cells.iter().any(|c| c.benchmark == name)
                || self.run.plan.iter().any(|k| k.benchmark == name)
        };
        // The paper tables the run fills a row of: their other rows come too.
        let tables: Vec<&'static str> = catalog
            .iter()
            .filter(|i| used(&i.name))
            .filter_map(|i| i.report.paper_table())
            .collect();
        let wanted: Vec<bool> = catalog
            .iter()
            .map(|i| used(&i.name) || i.report.paper_table().is_some_and(|t| tables.contains(&t)))
            .collect();
        for (info, wanted) in catalog.into_iter().zip(wanted) {
            if wanted && !self.benchmarks.iter().any(|b| b.name == info.name) {
                self.benchmarks.push(info);
            }
        }
        self.fill_later_params();
    }

    /// A parameter declared after a run was measured is missing from its stored keys;
    /// the cell ran as that parameter's default does now (a new parameter's default keeps
    /// the behaviour from before it), so the key gets the default. Without this a run
    /// stored before a workload gained a parameter (`irq=none`) matched no cell of a
    /// newer run in `compare`.
    fn fill_later_params(&mut self) {
        let benchmarks = &self.benchmarks;
        let fill = |benchmark: &str, params: &mut BTreeMap<String, String>| {
            let Some(info) = benchmarks.iter().find(|b| b.name == benchmark) else {
                return;
            };
            for p in &info.params {
                params
                    .entry(p.name.clone())
                    .or_insert_with(|| p.default.clone());
            }
        };
        for c in &mut self.cells {
            fill(&c.benchmark, &mut c.params);
        }
        for s in &mut self.skipped {
            fill(&s.key.benchmark, &mut s.key.params);
        }
        for k in &mut self.run.plan {
            fill(&k.benchmark, &mut k.params);
        }
    }

    /// The catalog entry of `benchmark`, when the run carries it.
    pub fn info(&self, benchmark: &str) -> Option<&BenchInfo> {
        self.benchmarks.iter().find(|b| b.name == benchmark)
    }

    /// Benchmarks of measured cells without a catalog entry: cells the report cannot
    /// place in a section of their own (it says so rather than leave one empty).
    pub fn undescribed(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for c in &self.cells {
            if self.info(&c.benchmark).is_none() && !out.contains(&c.benchmark.as_str()) {
                out.push(&c.benchmark);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(to_cpu: u32, ns: f64) -> Handoff {
        Handoff {
            from_cpu: 0,
            to_cpu,
            ns,
        }
    }

    #[test]
    fn handoffs_change_only_by_the_factor_of_another_sharing() {
        // One die's cache (25 ns) against the interconnect (246 ns): measured on one
        // host before and after it moved the guest's vCPUs apart.
        let a = [pair(1, 25.0), pair(2, 40.0), pair(3, 100.0)];
        let b = [pair(1, 246.0), pair(2, 52.0), pair(3, 49.0)];
        let changed = handoff_changes(&a, &b);
        assert_eq!(changed, vec![(a[0], b[0]), (a[2], b[2])]);
        // Noise of tens of percent is one setup; a pair measured on one side only is
        // not compared.
        assert!(handoff_changes(&a[..2], &[pair(1, 37.0), pair(2, 30.0)]).is_empty());
        assert!(handoff_changes(&a, &[pair(7, 1000.0)]).is_empty());
        assert!(handoff_changes(&[], &b).is_empty());
    }

    #[test]
    fn an_environment_stored_before_handoffs_reads_as_none_measured() {
        let old = r#"{"tool_version":"0.1.0","git_commit":null,"hostname":"h","kernel":null,
            "cpu_model":null,"microcode":null,"smt_control":null,"virtualization":null,
            "governor":null,"boost":null,"clocksource":null,"perf_event_paranoid":null,
            "online_cpus":"0-1"}"#;
        let e: Environment = serde_json::from_str(old).unwrap();
        assert!(e.cpu_handoff.is_empty());
        let back = serde_json::to_string(&e).unwrap();
        assert!(!back.contains("cpu_handoff"), "{back}");
    }
}
