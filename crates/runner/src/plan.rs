//! Which cells a run measures: benchmarks x parameter sets x placements, in order.
//!
//! Suites:
//! * `quick`: every benchmark once per placement with its quick parameters (small
//!   buffers, few events), measured with `RunConfig::quick()`: a smoke test in seconds.
//! * `default`: every benchmark once per placement with default parameters.
//! * `full`: `default` plus the sweeps of the papers' figures, which each benchmark
//!   names itself ([`Benchmark::sweep`]): compute and memory bandwidth over thread
//!   counts 1, 2, 3, 4, 6, 8, ... on `all` (paper 002 Figs 1-6), the memory latency
//!   working-set sweep on `1c1t` (cache levels), and detached thread creation beside
//!   joinable (paper 002 Fig 9).
//!
//! The plan only names cells; whether a placement fits the machine and whether a
//! benchmark can run on it is found out when the cell is measured, and recorded.
//!
//! [`estimate`] resolves a plan before anything is measured (`smtlab run --dry-run`):
//! each cell's memory, samples and time from its benchmark's [`Benchmark::cost`] and
//! the settings (calibration's trials, warm-up, samples, the workload minimum, setup,
//! the traced extra sample of `--counters`, rounds), and which groups of placements are
//! measured together. A group whose instances would hold more than the run's memory
//! bound ([`memory_budget`]: half the RAM, within what is available) is measured one
//! placement after the other; the session applies the same rule ([`apart_reason`]).

use std::collections::BTreeMap;

use smtlab_bench::{BenchContext, BenchError, Benchmark, CellCost, Params};
use smtlab_model::placement::Named;
use smtlab_model::{CellKey, ResolvedPlacement, RunConfig, Topology};

pub use smtlab_bench::Suite;

/// The parameter values of `bench` for `suite` (defaults or quick values).
fn base_params(bench: &dyn Benchmark, suite: Suite) -> BTreeMap<String, String> {
    bench
        .info()
        .params
        .into_iter()
        .map(|p| {
            let v = match (suite, p.quick) {
                (Suite::Quick, Some(q)) => q,
                _ => p.default,
            };
            (p.name, v)
        })
        .collect()
}

/// `threads=auto` on `all` already is the full width: a sweep point at that width on
/// `all` measures the same thing again when the run has `all`.
fn duplicates_all_at_full_width(
    base: &BTreeMap<String, String>,
    params: &BTreeMap<String, String>,
    placement: Option<&str>,
    placements: &[String],
    topo: &Topology,
) -> bool {
    placement.is_some_and(|p| *p == Named::All)
        && placements.iter().any(|p| *p == Named::All)
        && base.get("threads").map(String::as_str) == Some("auto")
        && params.get("threads") == Some(&topo.cpus.len().to_string())
        && params
            .iter()
            .all(|(k, v)| k == "threads" || base.get(k) == Some(v))
}

/// The cells of a run, in measuring order: benchmark by benchmark (catalog order), and
/// within one benchmark every parameter set on every placement, so a benchmark's
/// placements are measured close together in time. The parameter values `given` (key,
/// values: `server` and `event,threads,nginx`) apply to the benchmarks that declare the
/// key, each combination of values its own cells. In a run of the `standard`
/// placements, a server workload (one with a client side) gets [`server_placements`] in
/// place of `cores` and `all`.
pub fn plan(
    suite: Suite,
    benches: &[Box<dyn Benchmark>],
    placements: &[String],
    given: &[(String, Vec<String>)],
    standard: bool,
    topo: &Topology,
) -> Vec<CellKey> {
    let servers = standard.then(|| server_placements(placements, topo));
    let mut cells = Vec::new();
    for bench in benches {
        if !bench.in_suite(suite) {
            continue;
        }
        let name = bench.info().name;
        let placements = match servers.as_deref() {
            Some(s) if bench.client_side() => s,
            _ => placements,
        };
        // Each parameter set on every placement, and its sweeps'.
        for base in param_sets(bench.as_ref(), &base_params(bench.as_ref(), suite), given) {
            for placement in placements {
                cells.push(CellKey::new(&name, base.clone(), placement));
            }
            for extra in bench.sweep(suite, topo) {
                let mut p = base.clone();
                p.extend(extra.params.iter().cloned());
                let only = extra.placement.as_deref();
                if duplicates_all_at_full_width(&base, &p, only, placements, topo) {
                    continue;
                }
                let on = extra
                    .placement
                    .as_ref()
                    .map_or(placements, std::slice::from_ref);
                for placement in on {
                    cells.push(CellKey::new(&name, p.clone(), placement));
                }
            }
        }
    }
    // A sweep point can coincide with a base cell (the latency sweep ends at the default size).
    let mut seen = std::collections::BTreeSet::new();
    cells.retain(|c| seen.insert(c.clone()));
    cells
}

/// `spec` parsed and resolved on `topo`.
pub fn placed(
    spec: &str,
    topo: &Topology,
) -> Result<ResolvedPlacement, smtlab_placement::PlacementError> {
    smtlab_placement::parse(spec).and_then(|p| smtlab_placement::resolve(&p, topo))
}

/// The placements of a server workload among the standard `placements`: `cores` and
/// `all` take every core and leave its clients no CPU, so they become `half-cores-1t`
/// and `half-cores-Kt` (K: the most threads a core has here), half the cores with one
/// thread and with all of them, the clients on the other half: the whole machine's SMT
/// question for a server. A replacement that resolves to the CPUs of a placement already
/// in the list (on four cores or fewer, `2c1t`, `1c1t`) or not at all is left out, and
/// `cores` or `all` stays.
pub fn server_placements(placements: &[String], topo: &Topology) -> Vec<String> {
    let cpus = |spec: &str| placed(spec, topo).ok().map(|r| r.cpu_set());
    let taken: Vec<_> = placements.iter().filter_map(|p| cpus(p)).collect();
    let most = topo.smt.threads_per_core_max.max(1);
    let mut out: Vec<String> = Vec::new();
    for p in placements {
        let instead = match Named::parse(p) {
            Some(Named::Cores) => Named::HalfCores.to_string(),
            Some(Named::All) => format!("{}{most}t", smtlab_placement::HALF_CORES_PREFIX),
            _ => {
                out.push(p.clone());
                continue;
            }
        };
        let new = cpus(&instead).is_some_and(|set| !taken.contains(&set));
        let name = if new { instead } else { p.clone() };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Every combination of the `given` values that `bench` declares, over `base`.
fn param_sets(
    bench: &dyn Benchmark,
    base: &BTreeMap<String, String>,
    given: &[(String, Vec<String>)],
) -> Vec<BTreeMap<String, String>> {
    let declared = bench.info().params;
    let mut sets = vec![base.clone()];
    for (key, values) in given {
        if !declared.iter().any(|p| &p.name == key) {
            continue;
        }
        sets = sets
            .iter()
            .flat_map(|s| {
                values.iter().map(move |v| {
                    let mut s = s.clone();
                    s.insert(key.clone(), v.clone());
                    s
                })
            })
            .collect();
    }
    sets
}

/// A benchmark's parameters as a cell key holds them (its conditions, such as the SMT
/// state, left out), for [`Benchmark::cost`] and `prepare`: what a resumed run measures a
/// stored cell with.
pub fn params_of(key: &CellKey) -> Params {
    Params::from_pairs(key.params.clone())
}

/// What a cell will cost, known before it is prepared: its benchmark's
/// [`Benchmark::cost`] on the resolved placement.
pub fn cell_cost(
    bench: &dyn Benchmark,
    params: &Params,
    placement: &ResolvedPlacement,
    topo: &Topology,
) -> Result<CellCost, BenchError> {
    let ctx = BenchContext {
        params,
        placement,
        topology: topo,
        client: None,
    };
    bench.cost(&ctx)
}

/// Bytes of benchmark buffers a run may hold at once: half the machine's memory, and
/// no more than 80% of what is available now (other programs keep theirs). `None` when
/// `/proc/meminfo` cannot be read.
pub fn memory_budget() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    memory_budget_from(&text)
}

/// [`memory_budget`] from the text of `/proc/meminfo`.
pub fn memory_budget_from(meminfo: &str) -> Option<u64> {
    let field = |name: &str| -> Option<u64> {
        let line = meminfo.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib.saturating_mul(1024))
    };
    let total = field("MemTotal:")?;
    let half = total / 2;
    Some(match field("MemAvailable:") {
        Some(avail) => half.min(avail / 5 * 4),
        None => half,
    })
}

/// Why the cells of a group, holding `memory` bytes each, cannot be measured together
/// (interleaved: every instance alive at once) under `budget`; `None` when they can.
pub fn apart_reason(memory: &[u64], budget: Option<u64>) -> Option<String> {
    let budget = budget?;
    let together: u64 = memory.iter().sum();
    (memory.len() > 1 && together > budget).then(|| {
        format!(
            "together they would hold {}, above the run's bound of {}: measured one \
             placement after the other",
            bytes_text(together),
            bytes_text(budget)
        )
    })
}

/// `1.5 GiB`, `256 MiB`, `12 KiB`, `100 B`.
pub fn bytes_text(b: u64) -> String {
    smtlab_model::unit::binary_size(b, 100.0)
}

/// How a run is measured, for its estimate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measuring {
    /// The placements of a group take their samples in turn.
    pub interleave: bool,
    /// Rounds per cell (`--repeat`).
    pub repeat: usize,
    /// Where server workloads' client sides go: a cell left without client CPUs is
    /// skipped, and costs nothing.
    pub client_rule: smtlab_placement::ClientRule,
}

/// A run resolved before it measures: its groups of cells with their time and memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub groups: Vec<GroupEstimate>,
    /// The bound on buffers held at once ([`RunConfig::memory_budget_bytes`]).
    pub memory_budget_bytes: Option<u64>,
    pub measuring: Measuring,
}

/// The cells of one benchmark and parameter set (its placements), measured together.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupEstimate {
    pub benchmark: String,
    /// The group's parameters and conditions, flat (`CellKey::flat_params`).
    pub params: BTreeMap<String, String>,
    pub cells: Vec<CellEstimate>,
    /// Every instance of the group alive at once: samples taken in turn (interleaving)
    /// or rounds taking turns (`--repeat`).
    pub together: bool,
    /// Why a group of a run that interleaves is measured one cell after the other.
    pub apart: Option<String>,
}

/// Why a planned cell will be skipped; one line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    #[error("no benchmark {0:?} in this build")]
    UnknownBenchmark(String),
    #[error("{0}")]
    Placement(#[from] smtlab_placement::PlacementError),
    #[error("{0}")]
    Client(#[from] smtlab_placement::ClientError),
    /// The benchmark's own refusal (a parameter out of range, too little memory), as
    /// it words it.
    #[error("{0}")]
    Bench(String),
}

/// One cell's expected cost.
#[derive(Debug, Clone, PartialEq)]
pub struct CellEstimate {
    pub key: CellKey,
    /// The cost, or why the cell will be skipped (unknown benchmark, placement this
    /// machine cannot satisfy, bad parameter).
    pub cost: Result<CellCost, SkipReason>,
    /// Measured samples per round: the fewest the settings allow and the most.
    pub samples: (usize, usize),
    /// Expected and longest time of all its rounds, setup included.
    pub likely_ns: u64,
    pub max_ns: u64,
}

impl GroupEstimate {
    /// Bytes held at once while the group is measured.
    pub fn peak_bytes(&self) -> u64 {
        let each = self
            .cells
            .iter()
            .map(|c| c.cost.as_ref().map_or(0, |c| c.memory_bytes));
        if self.together {
            each.sum()
        } else {
            each.max().unwrap_or(0)
        }
    }

    pub fn likely_ns(&self) -> u64 {
        self.cells.iter().map(|c| c.likely_ns).sum()
    }

    pub fn max_ns(&self) -> u64 {
        self.cells.iter().map(|c| c.max_ns).sum()
    }
}

impl Estimate {
    pub fn cells(&self) -> usize {
        self.groups.iter().map(|g| g.cells.len()).sum()
    }

    /// The most bytes held at once, over the groups.
    pub fn peak_bytes(&self) -> u64 {
        self.groups
            .iter()
            .map(GroupEstimate::peak_bytes)
            .max()
            .unwrap_or(0)
    }

    pub fn likely_ns(&self) -> u64 {
        self.groups.iter().map(GroupEstimate::likely_ns).sum()
    }

    pub fn max_ns(&self) -> u64 {
        self.groups.iter().map(GroupEstimate::max_ns).sum()
    }
}

/// Samples the calibration takes, in units of the target sample length: the search
/// (tenfold steps, about 1.1 targets in all, then the chosen count), two more trials at
/// it, and three at twice the count for the linearity check.
const CALIBRATION_TARGETS: f64 =
    1.1 + crate::measure::TRIALS as f64 + 2.0 * crate::measure::TRIALS as f64;
/// Calibration samples, counted: about six short steps of the search, then the trials.
const CALIBRATION_SAMPLES: u64 = 6 + 2 * crate::measure::TRIALS as u64;
/// Wall time a calibrated sample takes beyond its timed section (waking workers,
/// measuring the loop's own cost, the session's turn-taking, a lean process's pipe):
/// over the 119 calibrated cells of a quick run on a 2-CPU machine at a load of about
/// 3, a cell's wall time less its timed sections, per sample, had median 0.6 ms
/// (quartiles 0.2 and 1.7 ms).
const SAMPLE_OVERHEAD_NS: u64 = 1_000_000;
/// The share of the samples between a cell's least and its most that a cell measured
/// alone is expected to take: most converge at or soon after their minimum.
const EXPECTED_EXTRA_SHARE: f64 = 0.15;
/// What starting and ending a measured cell costs beyond its samples and its
/// benchmark's own setup: the cell's thread, the instance's preparation (a lean
/// measurement process started for the os rows, buffers touched), the counters'
/// opening, saving the cell and its line. In the same quick run a calibrated cell
/// took a median 12.6 ms beyond its samples and their overheads, and a group of four
/// another 12 ms a cell between its cells (the last figure fitted after the first: a
/// busy 2-CPU machine once took 97 ms a cell, so a loaded machine's run is longer
/// than its estimate).
const CELL_START_NS: u64 = 25_000_000;

/// How a cell takes its samples, which says how many of them it is likely to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Alone: it stops near its least.
    Alone,
    /// In turn with the other cells of its group (the placements of a benchmark, or the
    /// two sides of a co-run pair): a third of the way from its least samples to its
    /// most, as a cell that has converged goes on while another has not. In the default
    /// suite on a 2-CPU machine the 364 calibrated cells took a mean 12.4 samples between
    /// their 3 and 30 (57 the most); in the default `predict` plan the 180 co-run cells a
    /// mean 11.9 (76 the least, 32 the most).
    InTurn,
}

/// Measured samples a cell is expected to take between its least and its most.
fn likely_samples(least: usize, most: usize, pace: Pace) -> usize {
    let share = match pace {
        Pace::Alone => EXPECTED_EXTRA_SHARE,
        Pace::InTurn => 1.0 / 3.0,
    };
    least + ((most - least) as f64 * share).round() as usize
}

/// The time one round of a cell takes: `(likely, max)` in nanoseconds, and its samples.
/// The bound of a calibrated cell is its budget (it stops at most one sample past
/// it), whatever its samples are expected to take: a sample of a many-threaded cell on
/// a busy machine lasts far longer than its target.
fn round_time(cost: &CellCost, cfg: &RunConfig, pace: Pace) -> ((u64, u64), (usize, usize)) {
    let budget = cfg.max_cell_ns;
    let extra = u64::from(cfg.counters);
    match cost.sample_ns {
        None => {
            // Calibrated: samples of about the target length, each with its overhead.
            let t = cfg.target_sample_ns;
            let warm = cfg.warmup_ns.div_ceil(t).max(1);
            let fixed_part = (CALIBRATION_TARGETS * t as f64) as u64
                + warm * t
                + (CALIBRATION_SAMPLES + warm) * SAMPLE_OVERHEAD_NS;
            let (least, most) = (cfg.min_samples, cfg.max_samples);
            let bound = budget.saturating_add(t);
            let at = |n: usize| {
                fixed_part
                    .saturating_add((t + SAMPLE_OVERHEAD_NS).saturating_mul(n as u64))
                    .min(bound)
            };
            let counted = |ns: u64| ns.saturating_add(t.saturating_mul(extra));
            (
                (
                    counted(at(likely_samples(least, most, pace))),
                    counted(bound),
                ),
                (least, most),
            )
        }
        Some(s) => {
            // Fixed: one warm-up sample (or `warmup_ns` of them), the workload minimum
            // whatever the budget, then more while the budget lasts; expected at the
            // samples' expected length, bounded at their longest.
            let least = cfg
                .min_samples
                .max(cfg.guaranteed_samples(true))
                .min(cfg.max_samples);
            let samples_of = |len: u64| {
                let len = len.max(1);
                let warm = cfg.warmup_ns.div_ceil(len).max(1);
                let within = (budget / len).saturating_sub(warm) as usize;
                let most = within.clamp(least, cfg.max_samples.max(least));
                let at = move |n: usize| len.saturating_mul(warm + n as u64 + extra);
                (most, at)
            };
            let (most, at) = samples_of(s);
            let (longest_most, at_longest) = samples_of(cost.longest_sample_ns.unwrap_or(s).max(s));
            (
                (
                    at(likely_samples(least, most, pace)),
                    at_longest(longest_most).max(at(most)),
                ),
                (least, most),
            )
        }
    }
}

/// The time one round of a cell of `cost` takes, its setup and start included:
/// `(likely, max)` in nanoseconds, and its measured samples (least, most).
pub fn cell_time(cost: &CellCost, cfg: &RunConfig, pace: Pace) -> ((u64, u64), (usize, usize)) {
    let ((likely, max), samples) = round_time(cost, cfg, pace);
    let whole = |t: u64| {
        t.saturating_add(cost.setup_ns)
            .saturating_add(CELL_START_NS)
    };
    ((whole(likely), whole(max)), samples)
}

/// Resolves the plan `cells` against `benches` and `topo` with the settings `cfg`:
/// groups (consecutive cells of one benchmark and parameter set, as `run` measures
/// them), each cell's memory, samples and time, and whether each group is interleaved
/// under the memory bound. Nothing is prepared or allocated.
pub fn estimate(
    cells: &[CellKey],
    benches: &[Box<dyn Benchmark>],
    topo: &Topology,
    cfg: &RunConfig,
    measuring: Measuring,
) -> Estimate {
    let repeat = measuring.repeat.max(1) as u64;
    let mut groups: Vec<GroupEstimate> = Vec::new();
    for key in cells {
        let bench = benches.iter().find(|b| b.info().name == key.benchmark);
        let cost = match bench {
            None => Err(SkipReason::UnknownBenchmark(key.benchmark.clone())),
            Some(bench) => placed(&key.placement, topo)
                .map_err(SkipReason::from)
                .and_then(|placement| {
                    if bench.client_side() {
                        smtlab_placement::client_cpus(topo, &placement, &measuring.client_rule)?;
                    }
                    cell_cost(bench.as_ref(), &params_of(key), &placement, topo)
                        .map_err(|e| SkipReason::Bench(e.to_string()))
                }),
        };
        // Interleaved placements take turns until the last is done.
        let pace = match measuring.interleave
            && cells.iter().filter(|k| k.same_variant(key)).count() > 1
        {
            true => Pace::InTurn,
            false => Pace::Alone,
        };
        let (likely_ns, max_ns, samples) = match &cost {
            Ok(c) => {
                let ((likely, max), samples) = cell_time(c, cfg, pace);
                (
                    likely.saturating_mul(repeat),
                    max.saturating_mul(repeat),
                    samples,
                )
            }
            Err(_) => (0, 0, (0, 0)),
        };
        let cell = CellEstimate {
            key: key.clone(),
            cost,
            samples,
            likely_ns,
            max_ns,
        };
        match groups.last_mut() {
            Some(g) if g.cells[0].key.same_variant(key) => g.cells.push(cell),
            _ => groups.push(GroupEstimate {
                benchmark: key.benchmark.clone(),
                params: key.flat_params(),
                cells: vec![cell],
                together: false,
                apart: None,
            }),
        }
    }
    for g in &mut groups {
        let measured = g.cells.iter().filter(|c| c.cost.is_ok()).count();
        // The session keeps every instance of a group alive while its rounds take turns.
        let together = (measuring.interleave || measuring.repeat > 1) && measured > 1;
        let memory: Vec<u64> = g
            .cells
            .iter()
            .filter_map(|c| c.cost.as_ref().ok().map(|c| c.memory_bytes))
            .collect();
        g.apart = together
            .then(|| apart_reason(&memory, cfg.memory_budget_bytes))
            .flatten();
        g.together = together && g.apart.is_none();
    }
    Estimate {
        groups,
        memory_budget_bytes: cfg.memory_budget_bytes,
        measuring,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topology {
        smtlab_fixtures::build::cpus_only(0..4)
    }

    fn benches(names: &[&str]) -> Vec<Box<dyn Benchmark>> {
        names
            .iter()
            .map(|n| crate::catalog::find(n).expect("in the catalog"))
            .collect()
    }

    /// The estimate reads every benchmark's own parameters as `prepare` does: no cell of
    /// any suite is planned as skipped for a parameter its own sweep gives it (a cost
    /// that parsed `duration` as a bare number once refused `300ms`).
    #[test]
    fn every_suite_of_the_whole_catalog_is_estimated_without_a_parameter_error() {
        let t = topo();
        let all = crate::catalog::all();
        let placements = ["1c1t".to_string(), "2c1t".to_string()];
        for suite in [Suite::Quick, Suite::Default, Suite::Full] {
            let cells = plan(suite, &all, &placements, &[], false, &t);
            let e = estimate(
                &cells,
                &all,
                &t,
                &RunConfig::default(),
                measuring_of(true, 1),
            );
            for g in &e.groups {
                for c in &g.cells {
                    if let Err(why) = &c.cost {
                        assert!(
                            !why.to_string().contains("parameter"),
                            "{suite}: {} {:?} on {}: {why}",
                            c.key.benchmark,
                            c.key.params,
                            c.key.placement
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn suites_parse_and_name_themselves() {
        assert_eq!("full".parse::<Suite>().unwrap(), Suite::Full);
        assert!(
            "fast"
                .parse::<Suite>()
                .unwrap_err()
                .contains("quick, default or full")
        );
        assert_eq!(Suite::Quick.to_string(), "quick");
    }

    #[test]
    fn default_plan_is_benchmarks_times_placements_in_order() {
        let p = plan(
            Suite::Default,
            &benches(&["null-syscall", "mem-read"]),
            &["1c1t".into(), "2c1t".into()],
            &[],
            false,
            &topo(),
        );
        let names: Vec<(String, String)> = p
            .iter()
            .map(|c| (c.benchmark.clone(), c.placement.clone()))
            .collect();
        assert_eq!(
            names,
            [
                ("null-syscall", "1c1t"),
                ("null-syscall", "2c1t"),
                ("mem-read", "1c1t"),
                ("mem-read", "2c1t")
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        assert_eq!(p[2].params["size"], "auto");
    }

    #[test]
    fn server_workloads_get_half_the_cores_at_machine_scale() {
        let t = smtlab_fixtures::build::intel(1, 16, 2);
        let placements = standard(&t);
        assert!(placements.iter().any(|p| p == "all"));
        let p = plan(
            Suite::Default,
            &benches(&["int-ops", "web-static"]),
            &placements,
            &[],
            true,
            &t,
        );
        let on = |b: &str| -> Vec<&str> {
            p.iter()
                .filter(|c| c.benchmark == b)
                .map(|c| c.placement.as_str())
                .collect()
        };
        assert_eq!(
            on("int-ops"),
            ["1c1t", "1c2t", "2c1t", "2c2t", "cores", "all"]
        );
        assert_eq!(
            on("web-static"),
            [
                "1c1t",
                "1c2t",
                "2c1t",
                "2c2t",
                "half-cores-1t",
                "half-cores-2t"
            ]
        );
        // Each resolves, and leaves its client the other eight cores.
        for spec in ["half-cores-1t", "half-cores-2t"] {
            let r = smtlab_placement::resolve(&smtlab_placement::parse(spec).unwrap(), &t).unwrap();
            let client = smtlab_placement::client_cpus(&t, &r, &Default::default()).unwrap();
            assert_eq!(client.len(), 16, "{spec}");
            assert!(client.intersection(&r.cpu_set()).is_empty());
        }
        // Four cores: half of them is 2c1t and 2c2t already; cores and all stay (skipped
        // when measured, with their reason).
        let t = smtlab_fixtures::build::intel(1, 4, 2);
        assert_eq!(
            server_placements(&standard(&t), &t),
            ["1c1t", "1c2t", "2c1t", "2c2t", "cores", "all"]
        );
        // An explicit list is the user's: `plan` keeps it for every workload.
        let p = plan(
            Suite::Default,
            &benches(&["web-static"]),
            &["all".into()],
            &[],
            false,
            &t,
        );
        assert_eq!(p[0].placement, "all");
    }

    #[test]
    fn given_parameter_values_expand_into_cells_of_the_workloads_that_declare_them() {
        let t = smtlab_fixtures::build::intel(1, 2, 2);
        let given = vec![(
            "server".to_string(),
            vec![
                "event".to_string(),
                "threads".to_string(),
                "nginx".to_string(),
            ],
        )];
        let p = plan(
            Suite::Default,
            &benches(&["int-ops", "web-static"]),
            &["1c1t".into(), "1c2t".into()],
            &given,
            false,
            &t,
        );
        // int-ops has no `server`: once per placement, as before.
        assert_eq!(p.iter().filter(|c| c.benchmark == "int-ops").count(), 2);
        let web: Vec<(&str, &str)> = p
            .iter()
            .filter(|c| c.benchmark == "web-static")
            .map(|c| (c.params["server"].as_str(), c.placement.as_str()))
            .collect();
        assert_eq!(
            web,
            [
                ("event", "1c1t"),
                ("event", "1c2t"),
                ("threads", "1c1t"),
                ("threads", "1c2t"),
                ("nginx", "1c1t"),
                ("nginx", "1c2t"),
            ]
        );
        // The other parameters keep their defaults.
        assert!(
            p.iter()
                .all(|c| c.benchmark != "web-static" || c.params["conns"] == "1024")
        );
        // Two keys: every combination.
        let given = vec![
            ("server".to_string(), vec!["event".into(), "threads".into()]),
            ("keepalive".to_string(), vec!["yes".into(), "no".into()]),
        ];
        let p = plan(
            Suite::Default,
            &benches(&["web-static"]),
            &["1c1t".into()],
            &given,
            false,
            &t,
        );
        assert_eq!(p.len(), 4);
    }

    #[test]
    fn quick_plan_uses_quick_values() {
        let p = plan(
            Suite::Quick,
            &benches(&["mem-read"]),
            &["1c1t".into()],
            &[],
            false,
            &topo(),
        );
        assert_eq!(p.len(), 1);
        assert_ne!(p[0].params["size"], "auto");
    }

    #[test]
    fn full_plan_adds_thread_and_size_sweeps_without_duplicates() {
        let p = plan(
            Suite::Full,
            &benches(&["int-ops", "mem-latency", "pthread-create"]),
            &["1c1t".into(), "all".into()],
            &[],
            false,
            &topo(),
        );
        let threads: Vec<&str> = p
            .iter()
            .filter(|c| c.benchmark == "int-ops" && c.placement == "all")
            .map(|c| c.params["threads"].as_str())
            .collect();
        assert_eq!(threads, ["auto", "1", "2", "3"]);
        let sizes = p
            .iter()
            .filter(|c| c.benchmark == "mem-latency" && c.params["size"] != "auto")
            .count();
        assert!(sizes >= 8, "a working-set sweep from 4 KiB: {sizes}");
        assert!(
            p.iter()
                .any(|c| c.params.get("mode").map(String::as_str) == Some("detached"))
        );
        let unique: std::collections::BTreeSet<_> = p.iter().collect();
        assert_eq!(unique.len(), p.len());
    }

    const MIB: u64 = 1 << 20;

    /// Two sockets of 32 cores with 2 threads each (128 CPUs), a 2 MiB L2 per core
    /// and a 32 MiB L3 per socket.
    fn two_socket_128() -> Topology {
        use smtlab_fixtures::build::{intel, with_caches};
        with_caches(intel(2, 32, 2), 2 * MIB, 32 * MIB)
    }

    fn standard(topo: &Topology) -> Vec<String> {
        smtlab_placement::standard_placements(topo)
            .into_iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(s, _)| s.text)
            .collect()
    }

    fn default_estimate(topo: &Topology, budget: Option<u64>) -> Estimate {
        let catalog = crate::catalog::all();
        let placements = standard(topo);
        let cells = plan(Suite::Default, &catalog, &placements, &[], false, topo);
        let cfg = RunConfig {
            memory_budget_bytes: budget,
            ..RunConfig::default()
        };
        let measuring = measuring_of(true, 1);
        estimate(&cells, &catalog, topo, &cfg, measuring)
    }

    fn group<'e>(e: &'e Estimate, bench: &str) -> &'e GroupEstimate {
        e.groups.iter().find(|g| g.benchmark == bench).unwrap()
    }

    #[test]
    fn the_default_plan_of_a_two_socket_128_cpu_machine_holds_about_2_gib_at_most() {
        let t = two_socket_128();
        let placements = standard(&t);
        assert_eq!(
            placements,
            [
                "1c1t",
                "1c2t",
                "2c1t",
                "2c2t",
                "2c1t/scatter",
                "cores",
                "all"
            ]
        );
        let e = default_estimate(&t, None);
        // mem-read: 4x one L3 (128 MiB) in total on the five placements within one
        // socket but scatter, which reaches both (256 MiB); `cores` and `all` hold the
        // per-thread floor, 8 MiB x 64 and 4 MiB x 128.
        let read = group(&e, "mem-read");
        let held: Vec<u64> = read
            .cells
            .iter()
            .map(|c| c.cost.as_ref().unwrap().memory_bytes / MIB)
            .collect();
        assert_eq!(held, [128, 128, 128, 128, 256, 512, 512]);
        assert!(read.together);
        assert_eq!(read.peak_bytes(), 1792 * MIB);
        // The latency rings add 8 bytes per 64-byte line: the peak of the run.
        assert_eq!(group(&e, "mem-latency").peak_bytes(), 2016 * MIB);
        assert_eq!(e.peak_bytes(), 2016 * MIB);
        // Each thread taking 4x its L3 would have held 128 MiB x 203 threads.
        assert!(e.peak_bytes() * 12 < 203 * 128 * MIB);
        // Every cell is accounted for, with time.
        assert_eq!(
            e.cells(),
            plan(
                Suite::Default,
                &crate::catalog::all(),
                &placements,
                &[],
                false,
                &t
            )
            .len()
        );
        assert!(e.likely_ns() > 0 && e.likely_ns() <= e.max_ns());
    }

    #[test]
    fn a_group_above_the_memory_bound_is_measured_one_placement_at_a_time() {
        let t = two_socket_128();
        let e = default_estimate(&t, Some(1 << 30));
        let latency = group(&e, "mem-latency");
        assert!(!latency.together);
        let why = latency.apart.as_deref().unwrap();
        assert!(why.contains("2.0 GiB") && why.contains("1 GiB"), "{why}");
        // One placement at a time: the largest cell, 512 MiB + 1/8.
        assert_eq!(latency.peak_bytes(), 576 * MIB);
        assert!(e.peak_bytes() <= 1 << 30);
        // Groups that fit stay interleaved.
        assert!(group(&e, "int-ops").together);
        assert!(group(&e, "int-ops").apart.is_none());
    }

    #[test]
    fn memory_budget_is_half_the_ram_within_what_is_available() {
        let meminfo = "MemTotal:       131072000 kB\nMemFree: 1 kB\nMemAvailable:   100000000 kB\n";
        assert_eq!(memory_budget_from(meminfo), Some(65_536_000 * 1024));
        let busy = "MemTotal:       131072000 kB\nMemAvailable:   10000000 kB\n";
        assert_eq!(memory_budget_from(busy), Some(8_000_000 * 1024));
        assert_eq!(memory_budget_from("nothing"), None);
        assert_eq!(bytes_text(1536 * MIB), "1.5 GiB");
        assert_eq!(bytes_text(256 * MIB), "256 MiB");
        assert_eq!(bytes_text(100), "100 B");
    }

    fn measuring_of(interleave: bool, repeat: usize) -> Measuring {
        Measuring {
            interleave,
            repeat,
            client_rule: Default::default(),
        }
    }

    /// A workload-like benchmark: fixed samples of `sample_ns` (at most the second
    /// figure, where given), 1 s of setup.
    struct Load(u64, Option<u64>);
    impl Benchmark for Load {
        fn info(&self) -> smtlab_model::BenchInfo {
            smtlab_model::BenchInfo {
                name: "load".into(),
                group: "test".into(),
                unit: "req/s".into(),
                direction: smtlab_model::Direction::Higher,
                value_kind: smtlab_model::ValueKind::Rate { scale: 1.0 },
                description: "a fake load".into(),
                origin: "tests".into(),
                params: Vec::new(),
                main_param: None,
                report: Default::default(),
            }
        }
        fn prepare(
            &self,
            _: &BenchContext<'_>,
        ) -> Result<Box<dyn smtlab_bench::Instance>, smtlab_bench::BenchError> {
            unreachable!("the plan never prepares")
        }
        fn cost(&self, _: &BenchContext<'_>) -> Result<CellCost, smtlab_bench::BenchError> {
            Ok(CellCost {
                memory_bytes: 0,
                sample_ns: Some(self.0),
                longest_sample_ns: self.1,
                setup_ns: 1_000_000_000,
            })
        }
    }

    /// Calibrated cells whose placements take turns: the estimate counts the samples
    /// they are expected to take, the bound is the cell budget, so "about" and "at
    /// most" differ (they used to be equal for every interleaved run).
    #[test]
    fn the_estimate_expects_the_minimum_and_the_bound_the_most() {
        let t = topo();
        let benches = benches(&["int-ops"]);
        let placements = ["1c1t".to_string(), "2c1t".to_string()];
        let cells = plan(Suite::Quick, &benches, &placements, &[], false, &t);
        let measuring = measuring_of(true, 1);
        let e = estimate(&cells, &benches, &t, &RunConfig::quick(), measuring);
        let c = &e.groups[0].cells[0];
        assert_eq!(c.samples, (3, 5));
        assert!(c.likely_ns < c.max_ns, "{} vs {}", c.likely_ns, c.max_ns);
        let cfg = RunConfig::quick();
        // The bound is the cell's budget and one sample over it, and its start.
        assert_eq!(
            c.max_ns,
            cfg.max_cell_ns + cfg.target_sample_ns + CELL_START_NS
        );
        assert!(e.likely_ns() < e.max_ns());
        // Alone, a cell is expected near its least samples: less than in turn.
        let alone = measuring_of(false, 1);
        let a = estimate(&cells, &benches, &t, &cfg, alone);
        assert!(a.groups[0].cells[0].likely_ns < c.likely_ns);
    }

    #[test]
    fn workload_cells_are_planned_with_their_minimum_samples_and_setup() {
        let t = topo();
        let benches: Vec<Box<dyn Benchmark>> = vec![Box::new(Load(300_000_000, None))];
        let placements = ["1c1t".to_string(), "2c1t".to_string()];
        let cells = plan(Suite::Quick, &benches, &placements, &[], false, &t);
        let measuring = measuring_of(true, 2);
        let quick = RunConfig::quick();
        let e = estimate(&cells, &benches, &t, &quick, measuring.clone());
        let c = &e.groups[0].cells[0];
        // Quick: at least 3 samples of 0.3 s although the cell budget is 0.5 s.
        assert_eq!(c.samples, (3, 3));
        // Two rounds of (1 s setup + 1 warm-up + 3 samples).
        assert_eq!(
            c.max_ns,
            2 * (1_000_000_000 + 4 * 300_000_000 + CELL_START_NS)
        );
        assert_eq!(c.likely_ns, c.max_ns, "workload cells take their minimum");
        let benches: Vec<Box<dyn Benchmark>> = vec![Box::new(Load(2_000_000_000, None))];
        let estimate_of = |placements: &[String]| {
            let cells = plan(Suite::Default, &benches, placements, &[], false, &t);
            estimate(
                &cells,
                &benches,
                &t,
                &RunConfig::default(),
                measuring.clone(),
            )
        };
        let e = estimate_of(&placements);
        assert_eq!(e.groups[0].cells[0].samples.0, 5);
        // An unknown placement is planned as skipped, with the reason.
        let e = estimate_of(&["9c9t".to_string()]);
        assert!(e.groups[0].cells[0].cost.is_err());
        assert_eq!(e.max_ns(), 0);
    }

    #[test]
    fn a_workload_of_varying_samples_is_expected_at_their_length_and_bounded_at_the_longest() {
        let t = topo();
        let benches: Vec<Box<dyn Benchmark>> = vec![Box::new(Load(300_000_000, Some(900_000_000)))];
        let cells = plan(Suite::Quick, &benches, &["1c1t".into()], &[], false, &t);
        let measuring = measuring_of(false, 1);
        let e = estimate(&cells, &benches, &t, &RunConfig::quick(), measuring);
        let c = &e.groups[0].cells[0];
        // 1 s setup, 1 warm-up and 3 samples of 0.3 s expected, of 0.9 s at the longest.
        assert_eq!(c.samples, (3, 3));
        assert_eq!(c.likely_ns, 1_000_000_000 + 4 * 300_000_000 + CELL_START_NS);
        assert_eq!(c.max_ns, 1_000_000_000 + 4 * 900_000_000 + CELL_START_NS);
    }
}
