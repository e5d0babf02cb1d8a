//! The fleet view: SMT yields pooled per CPU model over many hosts' runs (`smtlab
//! fleet`, usually over a shared PostgreSQL store the hosts push to).
//!
//! [`fleet`] is a pure function from runs to a [`Fleet`]; [`text`], [`json`] and
//! [`html`] write it. The rules, so that a figure can be checked by hand:
//!
//! * **Host**: a run's host id (a hash of the machine's id, [`host_key`]), else its
//!   hostname (`run N` for a run without one); shown by hostname, with the start of the
//!   id where two hosts share one. Runs on an emulated machine (`--fake-machine`) are
//!   their own CPU model, never pooled with real hosts. A host's
//!   **fingerprint** is read from its runs: CPU model, microcode, kernel, SMT control
//!   state, and the topology the firmware shows the kernel (sockets, cores, online and
//!   offline CPUs, threads per core).
//! * **Pool**: one CPU model, one workload (benchmark, parameters and conditions) and
//!   one yield ([`PairKind`]: `1c2t/1c1t`, `2c2t/2c1t`, `all/cores`, as
//!   [`smt_yields`] computes it within a run). Each host contributes one value, from
//!   its latest run holding the pair, so a host measured ten times does not outweigh
//!   one measured once. A pair whose SMT side left the siblings idle (single-threaded)
//!   is no yield and is left out.
//! * **Median and interval**: the median of the hosts' values with the distribution-
//!   free 95% interval from order statistics ([`smtlab_model::stats::median_ci95`]);
//!   it needs [`MEDIAN_CI_MIN_N`] hosts, and fewer show the median alone.
//! * **Outlier host**: with at least [`OUTLIER_MIN_HOSTS`] hosts, a host whose value is
//!   more than [`OUTLIER_MADS`] scaled MADs (`1.4826 x median |x - median|`) from the
//!   median. The scaled MAD is floored at [`OUTLIER_FLOOR_REL`] of the median, so that
//!   hosts agreeing almost exactly (MAD near 0) do not make a 1% difference an outlier.
//!   Each outlier is shown with the fingerprint fields in which it differs from most
//!   hosts of its pool (a different microcode or kernel is the usual suspect).
//! * **Profiles**: a host's latest `predict` run gives its workloads' sensitivity and
//!   contentiousness per ruler and form ([`crate::predict::stored`]); each figure is
//!   pooled per CPU model like a yield (one value per host, the same median, interval
//!   and outliers), so a scheduler can read one profile per CPU model.
//! * **Advice**: each host's recommendation ([`crate::advice::advise_run`]) for each
//!   workload, from its latest run with advice for it, counted per CPU model.

use std::collections::BTreeMap;

use serde::Serialize;
use smtlab_model::RunResults;
use smtlab_model::stats::{MAD_NORMAL_SCALE, MEDIAN_CI_MIN_N, mad, median, median_ci95};

use crate::advice::{Recommendation, advise_run, workload_name};
use smtlab_model::keys::Form;
use smtlab_model::verdict::PairKind;

use crate::yields::smt_yields;

mod formats;
mod overlay;

pub use formats::{html, json, text};
pub use overlay::{
    Curve, CurveLine, CurvePoint, Distribution, DistributionLine, Overlays, distribution_svg,
    scaling_svg as curve_svg,
};

/// The schema of `smtlab fleet --json`.
pub const FLEET_SCHEMA: &str = "smtlab.fleet/1";
/// An outlier is more than this many scaled MADs from the pool's median.
pub const OUTLIER_MADS: f64 = 3.0;
/// The scaled MAD is never taken below this fraction of the median.
pub const OUTLIER_FLOOR_REL: f64 = 0.01;
/// Fewest hosts in a pool for outliers to be named.
pub const OUTLIER_MIN_HOSTS: usize = 3;

/// The rule for outliers, in words (shown under every output).
pub fn outlier_rule() -> String {
    format!(
        "outlier: more than {OUTLIER_MADS} x 1.4826 x MAD from the median (MAD at least \
         {}% of the median), with {OUTLIER_MIN_HOSTS} hosts or more",
        OUTLIER_FLOOR_REL * 100.0
    )
}

/// The rule for intervals, in words.
pub fn interval_rule() -> String {
    format!(
        "median of the hosts' values with its distribution-free 95% interval from order \
         statistics ({MEDIAN_CI_MIN_N} hosts or more); one value per host, from its latest run"
    )
}

/// What identifies a host's machine and software, from one run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Fingerprint {
    pub cpu_model: Option<String>,
    pub microcode: Option<String>,
    pub kernel: Option<String>,
    /// `/sys/devices/system/cpu/smt/control` when the run started.
    pub smt_control: Option<String>,
    pub sockets: usize,
    pub cores: usize,
    pub online_cpus: usize,
    pub offline_cpus: usize,
    pub threads_per_core: u32,
}

impl Fingerprint {
    pub fn of(r: &RunResults) -> Fingerprint {
        let env = &r.run.environment;
        let t = &r.run.topology;
        Fingerprint {
            cpu_model: env.cpu_model.clone().or_else(|| t.cpu_model.clone()),
            microcode: env.microcode.clone(),
            kernel: env.kernel.clone(),
            smt_control: env.smt_control.clone().or_else(|| t.smt.control.clone()),
            sockets: t.packages.len(),
            cores: t.core_count(),
            online_cpus: t.cpus.len(),
            offline_cpus: t.offline_cpus.len(),
            threads_per_core: t.smt.threads_per_core_max,
        }
    }

    /// `2s/32c/64t` (sockets, cores, online CPUs), with `+8 offline` when some are.
    pub fn shape(&self) -> String {
        let mut s = format!("{}s/{}c/{}t", self.sockets, self.cores, self.online_cpus);
        if self.offline_cpus > 0 {
            s.push_str(&format!(" +{} offline", self.offline_cpus));
        }
        s
    }

    /// `(field, value)` for the fields an outlier is compared on.
    fn fields(&self) -> [(&'static str, String); 4] {
        let o = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
        [
            ("microcode", o(&self.microcode)),
            ("kernel", o(&self.kernel)),
            ("SMT", o(&self.smt_control)),
            ("topology", self.shape()),
        ]
    }
}

/// One host: its runs and its fingerprint (from its latest run).
#[derive(Debug, Clone, Serialize)]
pub struct Host {
    /// As shown: its hostname, with the start of its id where two hosts share one.
    pub host: String,
    /// Its hostname as the runs give it.
    pub hostname: String,
    /// What tells it apart ([`host_key`]): its host id, else its hostname.
    pub key: String,
    /// Store ids of its runs, oldest first.
    pub runs: Vec<i64>,
    pub fingerprint: Fingerprint,
}

/// One host's value in a pool.
#[derive(Debug, Clone, Serialize)]
pub struct HostYield {
    pub host: String,
    /// The run the value comes from.
    pub run: i64,
    /// The yield (above 1: better with SMT), with its Fieller 95% interval in that run.
    pub value: f64,
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
    /// Why a cell of the pair would not repeat, when one is unsteady.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsteady: Option<String>,
    pub outlier: bool,
    /// For an outlier: the fingerprint fields in which it differs from most of the pool
    /// (`microcode 0x2a (most: 0x2b)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differs: Vec<String>,
    /// Shared by the host's values in every pool (a run gives dozens).
    #[serde(skip)]
    fingerprint: std::sync::Arc<Fingerprint>,
}

impl HostYield {
    /// `host`'s value `ratio` from run `r`, not yet judged an outlier.
    fn new(
        host: &str,
        r: &RunResults,
        ratio: &smtlab_model::stats::Ratio,
        unsteady: Option<String>,
        fingerprint: &std::sync::Arc<Fingerprint>,
    ) -> Self {
        HostYield {
            host: host.to_string(),
            run: r.run.id,
            value: ratio.ratio,
            ci95_low: ratio.ci95_low,
            ci95_high: ratio.ci95_high,
            unsteady,
            outlier: false,
            differs: Vec::new(),
            fingerprint: std::sync::Arc::clone(fingerprint),
        }
    }
}

/// The hosts' values of one pool and what they make: median, interval, outliers.
#[derive(Debug, Clone, Serialize)]
pub struct Spread {
    pub median: f64,
    /// The order-statistic interval of the median; `None` below 6 hosts.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub ci_coverage: Option<f64>,
    pub min: f64,
    pub max: f64,
    /// Median absolute deviation (unscaled).
    pub mad: f64,
    /// Values outside `[low, high]` are outliers; `None` below 3 hosts.
    pub outlier_low: Option<f64>,
    pub outlier_high: Option<f64>,
    /// Every host's value, lowest first.
    pub hosts: Vec<HostYield>,
}

impl Spread {
    pub fn outliers(&self) -> impl Iterator<Item = &HostYield> {
        self.hosts.iter().filter(|h| h.outlier)
    }
}

/// One CPU model x workload x yield.
#[derive(Debug, Clone, Serialize)]
pub struct Pool {
    /// `benchmark params` as the advice names workloads.
    pub workload: String,
    pub benchmark: String,
    pub params: BTreeMap<String, String>,
    #[serde(serialize_with = "crate::yields::serialize_kind")]
    pub kind: PairKind,
    /// `1c2t/1c1t`.
    pub placements: String,
    #[serde(flatten)]
    pub spread: Spread,
}

impl std::ops::Deref for Pool {
    type Target = Spread;
    fn deref(&self) -> &Spread {
        &self.spread
    }
}

/// One CPU model x workload x form x ruler: a profile figure of `smtlab predict`
/// pooled over the hosts, each host's from its latest `predict` run.
#[derive(Debug, Clone, Serialize)]
pub struct ProfilePool {
    pub workload: String,
    pub form: Form,
    pub ruler: String,
    /// `sensitivity` (the workload's slowdown beside the ruler) or `contentiousness`
    /// (the ruler's beside the workload).
    pub figure: &'static str,
    #[serde(flatten)]
    pub spread: Spread,
}

/// One host's advice for a workload.
#[derive(Debug, Clone, Serialize)]
pub struct HostAdvice {
    pub host: String,
    pub run: i64,
    pub recommendation: Recommendation,
    pub answer: String,
}

/// The advice for one workload over the hosts of a CPU model.
#[derive(Debug, Clone, Serialize)]
pub struct AdviceTally {
    pub workload: String,
    /// How many hosts got each recommendation.
    pub counts: BTreeMap<String, usize>,
    pub hosts: Vec<HostAdvice>,
}

/// Everything about one CPU model.
#[derive(Debug, Clone, Serialize)]
pub struct Model {
    pub cpu_model: String,
    /// Hosts with at least one run on this model.
    pub hosts: Vec<String>,
    pub pools: Vec<Pool>,
    /// The `predict` profiles of its hosts, pooled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<ProfilePool>,
    pub advice: Vec<AdviceTally>,
}

/// The fleet view of a set of runs.
#[derive(Debug, Clone, Serialize)]
pub struct Fleet {
    pub schema: String,
    pub runs: usize,
    pub hosts: Vec<Host>,
    pub models: Vec<Model>,
    pub interval_rule: String,
    pub outlier_rule: String,
    /// Runs that gave nothing to pool, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// How many hosts were expected to report (`--expect`, or the inventory's
    /// hosts); `None` when nothing was said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<usize>,
    /// The inventory's hosts that never reported ([`Fleet::expect`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Workloads' throughput against threads, several hosts on one chart.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub curves: Vec<Curve>,
    /// Per-event series (thread creation, wake-ups, requests), several hosts' cumulative
    /// distributions on one chart.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub distributions: Vec<Distribution>,
}

impl Fleet {
    /// Sets the hosts expected to report: `inventory`'s (host names or ids), at least
    /// `count` of them. An inventory entry reported when a host's hostname or host key
    /// is it, or its host id starts with it (8 characters or more); those that did not
    /// are [`Fleet::missing`].
    pub fn expect(&mut self, inventory: &[String], count: Option<usize>) {
        let reported = |entry: &str| {
            self.hosts.iter().any(|h| {
                h.hostname.eq_ignore_ascii_case(entry)
                    || h.key == entry
                    || (entry.len() >= 8 && h.key.starts_with(entry))
            })
        };
        self.missing = inventory.iter().filter(|e| !reported(e)).cloned().collect();
        let listed = (!inventory.is_empty()).then_some(inventory.len());
        self.expected = match (listed, count) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    /// Expected hosts that never reported: those named ([`Fleet::missing`]), or, for a
    /// count alone, how many fewer hosts reported than expected.
    pub fn never_reported(&self) -> usize {
        let short = self.expected.unwrap_or(0).saturating_sub(self.hosts.len());
        short.max(self.missing.len())
    }
}

/// The host name of a run.
pub fn host_of(r: &RunResults) -> String {
    match r.run.environment.hostname.as_deref() {
        Some(h) if !h.is_empty() => h.to_string(),
        _ => format!("run {}", r.run.id),
    }
}

fn model_of(fp: &Fingerprint) -> String {
    fp.cpu_model
        .clone()
        .unwrap_or_else(|| "unknown CPU model".into())
}

/// Runs named in a note before "and N more".
const NOTE_RUNS: usize = 5;

type PoolKey = (String, String, BTreeMap<String, String>, usize);
/// CPU model, workload, form, ruler, figure.
type ProfileKey = (String, String, Form, String, &'static str);

/// The fleet view of `runs` (any order; each host's latest run wins per workload).
pub fn fleet(runs: &[RunResults]) -> Fleet {
    let mut order: Vec<&RunResults> = runs.iter().collect();
    order.sort_by_key(|r| (r.run.started_unix_s, r.run.id));
    let mut g = FleetBuilder::default();
    for r in order {
        g.add(r);
    }
    g.finish()
}

/// The fleet view built one run at a time, oldest first (by start time, then id), so
/// that a later run replaces an earlier one and no more than one run need be held:
/// what `smtlab fleet` does as the store hands it each host's latest runs.
#[derive(Default)]
pub struct FleetBuilder {
    runs: usize,
    g: Gathered,
}

impl FleetBuilder {
    /// Adds a run later than (or as late as) every run added so far, of the host
    /// [`host_key`] names.
    pub fn add(&mut self, r: &RunResults) {
        self.add_as(r, &host_key(r));
    }

    /// As [`add`](Self::add), for the host `key` (the store's, which also gives a run
    /// without a host id the one its hostname's other runs carry).
    pub fn add_as(&mut self, r: &RunResults, key: &str) {
        self.runs += 1;
        self.g.add(r, key);
    }

    pub fn finish(self) -> Fleet {
        let mut g = self.g;
        let names = display_names(&g.names);
        g.rename(&names);
        let overlays = std::mem::take(&mut g.overlay).finish(&names);
        let notes = no_yield_notes(g.no_yield);
        let models = models(g.model_hosts, g.pooled, g.profiled, g.advised);
        let mut hosts: Vec<Host> = g.hosts.into_values().collect();
        hosts.sort_by(|a, b| a.host.cmp(&b.host));
        Fleet {
            schema: FLEET_SCHEMA.into(),
            runs: self.runs,
            hosts,
            models,
            interval_rule: interval_rule(),
            outlier_rule: outlier_rule(),
            notes,
            expected: None,
            missing: Vec::new(),
            curves: overlays.curves,
            distributions: overlays.distributions,
        }
    }
}

/// Each run's scaling curves and event distributions, named as given (`compare`'s A
/// and B), on one chart per workload and placement (and series) that two of them or
/// more measured (at two thread counts or more, for a curve).
pub fn overlays(runs: &[(String, &RunResults)]) -> Overlays {
    let mut g = overlay::Gather::default();
    let mut names = BTreeMap::new();
    for (name, r) in runs {
        g.add(r, name, &model_of(&Fingerprint::of(r)));
        names.insert(name.clone(), name.clone());
    }
    let mut o = g.finish(&names);
    o.curves.retain(|c| c.lines.len() >= 2);
    o
}

/// What tells a run's host from another: its host id, else its hostname, else `run N`.
pub fn host_key(r: &RunResults) -> String {
    match r.run.environment.host_id.as_deref() {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => host_of(r),
    }
}

/// Each host key's name as shown: its hostname, with the start of its id in brackets
/// where two keys share one hostname (`web1 [3f2a9c1d]`).
fn display_names(names: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut per_name: BTreeMap<&str, usize> = BTreeMap::new();
    for name in names.values() {
        *per_name.entry(name.as_str()).or_insert(0) += 1;
    }
    names
        .iter()
        .map(|(key, name)| {
            let shown = if per_name[name.as_str()] > 1 && key != name {
                format!("{name} [{}]", key.chars().take(8).collect::<String>())
            } else {
                name.clone()
            };
            (key.clone(), shown)
        })
        .collect()
}

/// What [`fleet`] gathers from the runs, oldest first, so a later run replaces an earlier one.
#[derive(Default)]
struct Gathered {
    hosts: BTreeMap<String, Host>,
    pooled: BTreeMap<PoolKey, BTreeMap<String, HostYield>>,
    profiled: BTreeMap<ProfileKey, BTreeMap<String, HostYield>>,
    advised: BTreeMap<(String, String), BTreeMap<String, HostAdvice>>,
    model_hosts: BTreeMap<String, Vec<String>>,
    /// Runs without an SMT yield, by reason: `(run id, host key)`.
    no_yield: BTreeMap<String, Vec<(i64, String)>>,
    /// Each host key's hostname.
    names: BTreeMap<String, String>,
    /// Each host's scaling curves.
    overlay: overlay::Gather,
}

impl Gathered {
    /// Gathers under host keys; [`Gathered::rename`] turns them into the names shown.
    fn add(&mut self, r: &RunResults, host: &str) {
        let host = host.to_string();
        self.names.insert(host.clone(), host_of(r));
        let fp = Fingerprint::of(r);
        let mut model = model_of(&fp);
        // An emulated machine's figures are never pooled with real hosts of its model.
        if r.run.environment.is_emulated()
            && !model.starts_with(smtlab_model::EMULATED_MODEL_PREFIX)
        {
            model.push_str(" (emulated: --fake-machine)");
        }
        let h = self.hosts.entry(host.clone()).or_insert_with(|| Host {
            host: host.clone(),
            hostname: host_of(r),
            key: host.clone(),
            runs: Vec::new(),
            fingerprint: fp.clone(),
        });
        h.runs.push(r.run.id);
        h.fingerprint = fp.clone();
        let mh = self.model_hosts.entry(model.clone()).or_default();
        if !mh.contains(&host) {
            mh.push(host.clone());
        }
        self.overlay.add(r, &host, &model);
        let any = self.add_yields(r, &host, &model, &fp) | self.add_profiles(r, &host, &model, &fp);
        self.add_advice(r, &host, &model);
        if !any {
            let why = crate::yields::no_yields_reason(r)
                .unwrap_or_else(|| "every pair was single-threaded (no yield)".into());
            self.no_yield.entry(why).or_default().push((r.run.id, host));
        }
    }

    /// Every host key replaced by its name in `names`.
    fn rename(&mut self, names: &BTreeMap<String, String>) {
        let name = |key: &str| names.get(key).cloned().unwrap_or_else(|| key.to_string());
        for h in self.hosts.values_mut() {
            h.host = name(&h.host);
        }
        for by_host in self.pooled.values_mut().chain(self.profiled.values_mut()) {
            for y in by_host.values_mut() {
                y.host = name(&y.host);
            }
        }
        for by_host in self.advised.values_mut() {
            for a in by_host.values_mut() {
                a.host = name(&a.host);
            }
        }
        for hosts in self.model_hosts.values_mut() {
            for h in hosts.iter_mut() {
                *h = name(h);
            }
        }
        for runs in self.no_yield.values_mut() {
            for (_, h) in runs.iter_mut() {
                *h = name(h);
            }
        }
    }

    /// Adds the run's SMT yields to their pools; false when it had none.
    fn add_yields(&mut self, r: &RunResults, host: &str, model: &str, fp: &Fingerprint) -> bool {
        let mut any = false;
        let fp = std::sync::Arc::new(fp.clone());
        for row in &smt_yields(r) {
            for (i, kind) in PairKind::YIELDS.iter().enumerate() {
                let Some(y) = row.get(*kind).filter(|y| !y.idle_sibling) else {
                    continue;
                };
                any = true;
                let key = (
                    model.to_string(),
                    row.benchmark.clone(),
                    row.params.clone(),
                    i,
                );
                let value = HostYield::new(host, r, &y.ratio, y.unsteady.clone(), &fp);
                self.pooled
                    .entry(key)
                    .or_default()
                    .insert(host.to_string(), value);
            }
        }
        any
    }

    /// Adds the profiles of a `predict` run to their pools; false when it is none.
    fn add_profiles(&mut self, r: &RunResults, host: &str, model: &str, fp: &Fingerprint) -> bool {
        let Some(doc) = crate::predict::stored::analyse_run(r) else {
            return false;
        };
        let fp = std::sync::Arc::new(fp.clone());
        let mut any = false;
        for p in &doc.profiles {
            for f in &p.rulers {
                let sides = [
                    ("sensitivity", f.sensitivity),
                    ("contentiousness", f.contentiousness),
                ];
                for (figure, ratio) in sides {
                    let Some(ratio) = ratio else { continue };
                    any = true;
                    let key = (
                        model.to_string(),
                        p.workload.clone(),
                        p.form,
                        f.ruler.clone(),
                        figure,
                    );
                    let value = HostYield::new(host, r, &ratio, None, &fp);
                    self.profiled
                        .entry(key)
                        .or_default()
                        .insert(host.to_string(), value);
                }
            }
        }
        any
    }

    fn add_advice(&mut self, r: &RunResults, host: &str, model: &str) {
        for a in advise_run(r) {
            self.advised
                .entry((model.to_string(), a.workload.clone()))
                .or_default()
                .insert(
                    host.to_string(),
                    HostAdvice {
                        host: host.to_string(),
                        run: r.run.id,
                        recommendation: a.recommendation,
                        answer: a.answer.clone(),
                    },
                );
        }
    }
}

/// One note per reason, not per run: a fleet without SMT would list every host.
fn no_yield_notes(no_yield: BTreeMap<String, Vec<(i64, String)>>) -> Vec<String> {
    let mut notes = Vec::new();
    for (why, runs) in no_yield {
        let shown: Vec<String> = runs
            .iter()
            .take(NOTE_RUNS)
            .map(|(id, host)| format!("run {id} ({host})"))
            .collect();
        let count = smtlab_model::unit::plural(runs.len(), "run");
        let mut note = format!("{count} without an SMT yield ({why}): {}", shown.join(", "));
        if runs.len() > NOTE_RUNS {
            note.push_str(&format!(" and {} more", runs.len() - NOTE_RUNS));
        }
        notes.push(note);
    }
    notes
}

/// Each CPU model with its hosts, its pools and its tally of advice.
fn models(
    model_hosts: BTreeMap<String, Vec<String>>,
    pooled: BTreeMap<PoolKey, BTreeMap<String, HostYield>>,
    profiled: BTreeMap<ProfileKey, BTreeMap<String, HostYield>>,
    advised: BTreeMap<(String, String), BTreeMap<String, HostAdvice>>,
) -> Vec<Model> {
    let mut models: BTreeMap<String, Model> = model_hosts
        .into_iter()
        .map(|(m, hosts)| {
            (
                m.clone(),
                Model {
                    cpu_model: m,
                    hosts,
                    pools: Vec::new(),
                    profiles: Vec::new(),
                    advice: Vec::new(),
                },
            )
        })
        .collect();
    for ((model, benchmark, params, kind), by_host) in pooled {
        let kind = PairKind::YIELDS[kind];
        if let Some(p) = pool(benchmark, params, kind, by_host.into_values().collect())
            && let Some(m) = models.get_mut(&model)
        {
            m.pools.push(p);
        }
    }
    for ((model, workload, form, ruler, figure), by_host) in profiled {
        if let Some(spread) = spread(by_host.into_values().collect())
            && let Some(m) = models.get_mut(&model)
        {
            m.profiles.push(ProfilePool {
                workload,
                form,
                ruler,
                figure,
                spread,
            });
        }
    }
    for ((model, workload), by_host) in advised {
        let mut hosts: Vec<HostAdvice> = by_host.into_values().collect();
        hosts.sort_by(|a, b| a.host.cmp(&b.host));
        let mut counts = BTreeMap::new();
        for h in &hosts {
            *counts.entry(h.recommendation.words().into()).or_insert(0) += 1;
        }
        if let Some(m) = models.get_mut(&model) {
            m.advice.push(AdviceTally {
                workload,
                counts,
                hosts,
            });
        }
    }
    for m in models.values_mut() {
        m.pools
            .sort_by(|a, b| (&a.workload, a.kind as usize).cmp(&(&b.workload, b.kind as usize)));
    }
    models.into_values().collect()
}

/// The pool of one workload and yield over its hosts' values.
fn pool(
    benchmark: String,
    params: BTreeMap<String, String>,
    kind: PairKind,
    hosts: Vec<HostYield>,
) -> Option<Pool> {
    let (b, s) = kind.placements();
    Some(Pool {
        workload: workload_name(&benchmark, &params),
        benchmark,
        params,
        kind,
        placements: format!("{s}/{b}"),
        spread: spread(hosts)?,
    })
}

/// The median, interval and outliers of the hosts' values of one pool.
fn spread(mut hosts: Vec<HostYield>) -> Option<Spread> {
    hosts.sort_by(|a, b| a.value.total_cmp(&b.value).then(a.host.cmp(&b.host)));
    let values: Vec<f64> = hosts.iter().map(|h| h.value).collect();
    let med = median(&values)?;
    let dev = mad(&values)?;
    let ci = median_ci95(&values);
    let fence = (MAD_NORMAL_SCALE * dev).max(OUTLIER_FLOOR_REL * med.abs()) * OUTLIER_MADS;
    let fences = (hosts.len() >= OUTLIER_MIN_HOSTS).then_some((med - fence, med + fence));
    if let Some((lo, hi)) = fences {
        // The most common value of each fingerprint field among the pool's hosts.
        let mut common: Vec<BTreeMap<String, usize>> = vec![BTreeMap::new(); 4];
        for h in &hosts {
            for (i, (_, v)) in h.fingerprint.fields().into_iter().enumerate() {
                *common[i].entry(v).or_insert(0) += 1;
            }
        }
        let mode: Vec<Option<(String, usize)>> = common
            .iter()
            .map(|m| {
                m.iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(v, n)| (v.clone(), *n))
            })
            .collect();
        for h in &mut hosts {
            if h.value >= lo && h.value <= hi {
                continue;
            }
            h.outlier = true;
            for (i, (name, v)) in h.fingerprint.fields().into_iter().enumerate() {
                if let Some((m, n)) = &mode[i] {
                    // Only a value that most hosts share is a reference to differ from.
                    if *m != v && *n * 2 > values.len() {
                        h.differs.push(format!("{name} {v} (most: {m})"));
                    }
                }
            }
        }
    }
    Some(Spread {
        median: med,
        ci_low: ci.map(|c| c.ci_low),
        ci_high: ci.map(|c| c.ci_high),
        ci_coverage: ci.map(|c| c.coverage),
        min: values[0],
        max: values[values.len() - 1],
        mad: dev,
        outlier_low: fences.map(|f| f.0),
        outlier_high: fences.map(|f| f.1),
        hosts,
    })
}

#[cfg(test)]
mod tests;
