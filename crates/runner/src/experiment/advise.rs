//! The advice experiment (`smtlab advise`): what the SMT recommendation of one workload
//! needs, measured as ordinary session cells so every figure has its interval and every
//! cell is saved as it is done.
//!
//! * **Throughput**: the workload on `1c1t`, `1c2t` (the sibling added) and `2c1t` (a
//!   second core instead), and on `cores` and `all` on machines with more than two
//!   cores (the whole machine), as one group whose samples are taken in turn, so a slow
//!   spell of the host falls on every placement alike. Without SMT the SMT placements
//!   are left out and the group answers "2 cores vs 1" ([`placements`]).
//! * **Single-thread cost** (where asked): the workload, one thread, alone and next to
//!   each hog on its SMT sibling: the `penalty` group of [`super::corun`], measured
//!   after the throughput group.
//!
//! * **Latency at load** (a server with an open-loop rate parameter, `web-static`'s
//!   `rate`): after the throughput, the server at a sweep of offered rates, shares of
//!   the baseline side's measured capacity (`1c1t`'s, `half-cores-1t`'s), on the
//!   baseline and on its SMT side, each rate one interleaved group of both sides, so
//!   both see the same offered load ([`sweep_groups`]).
//!
//! The subject is a catalog benchmark with its parameters or the user's command
//! ([`PreparedCommand`]: an `exec` command with an untimed preparation before each run).
//! The decision is `smtlab_report::advice`'s; this module only measures.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::Arc;

use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, Params, RawSample};
use smtlab_model::keys::Form;
use smtlab_model::metrics::web::REQUESTS_PER_S;
use smtlab_model::placement::Named;
use smtlab_model::verdict::PairKind;
use smtlab_model::{BenchInfo, CellKey, Topology};

use super::corun::Workload;
use super::{Engine, ExperimentError};
use crate::exec::CommandBench;
pub use crate::exec::served::ServedCommand;
use crate::session::{CellPlan, Ended, SessionObserver, Unplaced, param_map};

/// The user's command with an optional preparation (`make clean`) run before each run,
/// outside the timed part, on whatever CPUs the system gives it.
#[derive(Debug, Clone)]
pub struct PreparedCommand {
    pub command: CommandBench,
    /// A shell command run by `/bin/sh -c` before every run; its failure fails the cell.
    pub prepare: Option<String>,
}

impl PreparedCommand {
    /// The parameters a cell is stored with: the command's, and the preparation.
    pub fn params(&self) -> BTreeMap<String, String> {
        let mut p = self.command.params();
        if let Some(prep) = &self.prepare {
            p.insert("prepare".into(), prep.clone());
        }
        p
    }
}

impl Benchmark for PreparedCommand {
    fn info(&self) -> BenchInfo {
        self.command.info()
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        Ok(Box::new(PreparedInstance {
            inner: self.command.prepare(ctx)?,
            prepare: self.prepare.clone(),
        }))
    }
}

struct PreparedInstance {
    inner: Box<dyn Instance>,
    prepare: Option<String>,
}

impl Instance for PreparedInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        if let Some(prep) = &self.prepare {
            run_preparation(prep)?;
        }
        // The timed part is the command's own run, measured inside its instance.
        self.inner.sample(iterations)
    }

    fn fixed_iterations(&self) -> Option<u64> {
        self.inner.fixed_iterations()
    }
}

/// Runs `prep` through `/bin/sh -c` to completion; a failure names it and its status.
fn run_preparation(prep: &str) -> Result<(), BenchError> {
    let fail =
        |reason: String| BenchError::unsupported("exec", format!("--prepare `{prep}` {reason}"));
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(prep)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| fail(format!("cannot be started: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let status = match out.status.code() {
        Some(c) => format!("exit status {c}"),
        None => "killed by a signal".into(),
    };
    Err(fail(if last.is_empty() {
        format!("failed ({status})")
    } else {
        format!("failed ({status}): {}", last.trim())
    }))
}

/// What the advice is about.
pub enum Subject {
    /// A catalog benchmark with its parameters.
    Catalog(Workload),
    /// The user's command.
    Command(PreparedCommand),
    /// The user's server on the placement, driven by the user's client apart from it.
    Served(ServedCommand),
}

impl Subject {
    /// Catalog benchmark `name` with the parameters `given` (`key=value`; quick values
    /// for unset ones when `quick`).
    pub fn catalog(name: &str, given: &[String], quick: bool) -> Result<Subject, ExperimentError> {
        let bench = crate::catalog::find(name)
            .ok_or_else(|| ExperimentError::input(crate::catalog::unknown("workload", name)))?;
        let params = Params::resolve(&bench.info(), given, quick)
            .map_err(|e| ExperimentError::input(e.to_string()))?;
        Ok(Subject::Catalog(Workload {
            bench: Arc::from(bench),
            params,
        }))
    }

    fn bench(&self) -> &dyn Benchmark {
        match self {
            Subject::Catalog(w) => w.bench.as_ref(),
            Subject::Command(c) => c,
            Subject::Served(s) => s,
        }
    }

    fn params(&self) -> (Params, BTreeMap<String, String>) {
        let p = match self {
            Subject::Catalog(w) => return (w.params.clone(), param_map(&w.params)),
            Subject::Command(c) => c.params(),
            Subject::Served(s) => s.params(),
        };
        (Params::from_pairs(p.clone()), p)
    }

    /// The name its cells are stored under (`exec` for a command).
    pub fn name(&self) -> String {
        self.bench().info().name
    }

    /// Whether it is a server driven from a client side apart from the placement.
    pub fn server(&self) -> bool {
        self.bench().client_side()
    }

    /// The workload of the single-thread cost: the benchmark with the parameters of the
    /// throughput cells but one thread, or the command as a co-run command (one run per
    /// sample), named as the throughput cells so the advice finds both.
    pub fn penalty_task(&self) -> Result<Workload, ExperimentError> {
        match self {
            Subject::Catalog(w) => {
                let mut params = param_map(&w.params);
                if let Some(t) = params.get_mut("threads") {
                    *t = "1".into();
                }
                Ok(Workload {
                    bench: Arc::clone(&w.bench),
                    params: Params::from_pairs(params),
                })
            }
            Subject::Command(c) => {
                let mut shell = crate::exec::shell_join(&c.command.argv);
                if let Some(prep) = &c.prepare {
                    // The preparation is timed here: a co-run command is one shell line.
                    shell = format!("{prep}; {shell}");
                }
                Workload::command(&format!("{}={shell}", self.name()))
            }
            Subject::Served(_) => Err(ExperimentError::input(
                "the single-thread cost and the partners are not measured for --client (the server's own threads are not one task)",
            )),
        }
    }
}

/// The co-runs of the partners: for each partner, `task` alone and next to it on its
/// SMT sibling `cpu`, and the partner alone, one interleaved group (the matrix's row of
/// `task`; the co-run cell also measures the partner against its own reference, so the
/// pair's combined speed has both ends).
pub fn partner_plan(
    task: &Workload,
    partners: &[Workload],
    cpu: u32,
    pair: &crate::corun::CpuPair,
    topo: &Topology,
) -> super::corun::CorunPlan {
    partners
        .iter()
        .filter_map(|b| {
            // The matrix of [task, b] holds (task, task), (task, b), (b, task), (b, b):
            // task's row against b, and b alone (its first cell of (b, task)), which
            // says in which direction b's figures are better.
            if b.name() == task.name() {
                // Beside itself: the matrix's diagonal group says it all (and a second
                // alone cell would have the first one's key).
                return super::corun::matrix_plan(
                    std::slice::from_ref(task),
                    &[(Form::Sibling, cpu)],
                    pair,
                    topo,
                )
                .into_iter()
                .next();
            }
            let both = [task.clone(), b.clone()];
            let mut groups = super::corun::matrix_plan(&both, &[(Form::Sibling, cpu)], pair, topo)
                .into_iter()
                .skip(1);
            let mut row = groups.next()?;
            row.extend(groups.next()?.into_iter().take(1));
            Some(row)
        })
        .collect()
}

/// The default partners: the co-run matrix's workloads, one thread each.
pub fn default_partners() -> Result<Vec<Workload>, ExperimentError> {
    super::corun::DEFAULT_WORKLOADS
        .iter()
        .map(|n| Workload::catalog(n, &[], &[("threads", "1")]))
        .collect()
}

/// The placements of the throughput group on `topo` and the one-line note on what the
/// machine cannot answer: `1c1t`, `1c2t`, `2c1t` (and `cores`, `all` beyond two cores)
/// with SMT; `1c1t`, `2c1t` without ("2 cores vs 1"); `1c1t` alone on one core. A
/// `server` (a workload with a client side) gets `half-cores-1t` and `half-cores-Kt` for
/// the whole machine where those are placements of their own
/// ([`crate::plan::server_placements`]): `cores` and `all` leave its clients no CPU.
pub fn placements_for(topo: &Topology, server: bool) -> (Vec<String>, Option<String>) {
    let (v, note) = placements(topo);
    if server {
        (crate::plan::server_placements(&v, topo), note)
    } else {
        (v, note)
    }
}

/// [`placements_for`] a workload without a client side.
pub fn placements(topo: &Topology) -> (Vec<String>, Option<String>) {
    let cores = topo.core_count();
    let control = topo.smt.control.as_deref().unwrap_or("absent");
    let names = |list: &[Named]| list.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    if topo.smt_visible() {
        let mut v = names(&[Named::OneCore, Named::Siblings, Named::TwoCores]);
        if cores > 2 {
            v.extend(names(&[Named::Cores, Named::All]));
        }
        if cores < 2 {
            v.retain(|p| *p != Named::TwoCores);
        }
        (v, None)
    } else if cores >= 2 {
        (
            names(&[Named::OneCore, Named::TwoCores]),
            Some(format!(
                "no SMT here (smt/control: {control}): answering 2 cores vs 1 (2c1t vs 1c1t) instead"
            )),
        )
    } else {
        (
            names(&[Named::OneCore]),
            Some(format!(
                "no SMT here (smt/control: {control}) and one core: nothing to compare"
            )),
        )
    }
}

/// The throughput group: `subject` on each of `specs` resolved on `topo` (a placement
/// the machine cannot satisfy is a skipped cell with its reason); `warmup_samples` for
/// a command's discarded runs.
pub fn throughput_group<'a>(
    subject: &'a Subject,
    specs: &[String],
    topo: &Topology,
    warmup_samples: Option<usize>,
) -> Vec<CellPlan<'a>> {
    let command = matches!(subject, Subject::Command(_) | Subject::Served(_));
    let mut cells = cells_on(subject.bench(), subject.params(), specs, topo);
    for c in &mut cells {
        c.work_unit = command.then(|| ("run".to_string(), 1.0));
        c.warmup_samples = warmup_samples;
    }
    cells
}

/// `bench` with `params` (stored as `map`) on each of `specs` resolved on `topo`, a
/// placement the machine cannot satisfy a skipped cell with its reason.
fn cells_on<'a, S: AsRef<str>>(
    bench: &'a dyn Benchmark,
    (params, map): (Params, BTreeMap<String, String>),
    specs: &[S],
    topo: &Topology,
) -> Vec<CellPlan<'a>> {
    let info = bench.info();
    specs
        .iter()
        .map(|spec| {
            CellPlan::new(
                bench,
                params.clone(),
                CellKey::new(&info.name, map.clone(), spec.as_ref()),
                crate::plan::placed(spec.as_ref(), topo).map_err(Unplaced::from),
            )
        })
        .collect()
}

/// The open loop's rate parameter (`web-static rate=R`), by which the advice reads a
/// sweep's points.
pub use smtlab_model::metrics::web::RATE_PARAM;

/// The default shares of the baseline's capacity a latency sweep offers, in percent.
pub const SWEEP_PCT: [f64; 4] = [25.0, 50.0, 75.0, 90.0];

impl Subject {
    /// Whether the latency sweep applies: a catalog server whose benchmark declares the
    /// open loop's rate parameter (`web-static`, also for `--server CMD`) and whose
    /// throughput cells run a closed loop.
    pub fn sweepable(&self) -> bool {
        let Subject::Catalog(w) = self else {
            return false;
        };
        w.bench.client_side()
            && w.bench.info().params.iter().any(|p| p.name == RATE_PARAM)
            && w.params.get_f64(RATE_PARAM).is_ok_and(|r| r == 0.0)
    }
}

/// The sides of a latency sweep among the throughput placements `specs`: `1c1t`
/// against `1c2t`, and `half-cores-1t` against the `half-cores-Kt` with K above 1;
/// each pair where both are measured.
pub fn sweep_sides(specs: &[String]) -> Vec<(String, String)> {
    let has = |s: &str| specs.iter().any(|x| x == s);
    let mut out = Vec::new();
    let (one, two) = PairKind::SmtYield.placements();
    if has(one) && has(two) {
        out.push((one.to_string(), two.to_string()));
    }
    let one = format!("{}1t", smtlab_placement::HALF_CORES_PREFIX);
    let many = specs.iter().find(|s| {
        s.strip_prefix(smtlab_placement::HALF_CORES_PREFIX)
            .and_then(|k| k.strip_suffix('t'))
            .and_then(|k| k.parse::<u32>().ok())
            .is_some_and(|k| k > 1)
    });
    if let (true, Some(many)) = (has(&one), many) {
        out.push((one, many.clone()));
    }
    out
}

/// The capacity the sweep's rates are shares of: the requests per second `subject`
/// served on `base` in its throughput cell (the mean of its samples'; with SMT switched,
/// SMT on's), or its capacity at a latency target (`web-slo`'s value), among `cells`.
pub fn capacity_per_s(
    cells: &[smtlab_model::CellRecord],
    subject: &Subject,
    base: &str,
) -> Option<f64> {
    let (_, params) = subject.params();
    let cell = cells.iter().find(|c| {
        c.benchmark == subject.name()
            && c.params == params
            && c.placement_spec == base
            && c.conditions.form.is_none()
            && c.smt().is_none_or(|s| s.name() != "off")
    })?;
    let mut xs = served(cell);
    if xs.is_empty() && cell.unit == "req/s" {
        // A capacity at a latency target (`web-slo`): the value is the rate itself.
        xs = cell.result.samples.iter().map(|s| s.value).collect();
    }
    smtlab_model::stats::mean(&xs).filter(|m| m.is_finite() && *m > 0.0)
}

/// The requests per second the samples of `cell` served (an open or closed loop's).
pub(crate) fn served(cell: &smtlab_model::CellRecord) -> Vec<f64> {
    let per_s = |s: &smtlab_model::SampleRecord| s.metrics.get(REQUESTS_PER_S).copied();
    cell.result.samples.iter().filter_map(per_s).collect()
}

/// The offered rates of a sweep: each share `pct` of `capacity_per_s`, whole requests
/// per second (at least 1), without repeats.
pub fn sweep_rates(capacity_per_s: f64, pct: &[f64]) -> Vec<f64> {
    let mut out: Vec<f64> = pct
        .iter()
        .map(|p| (capacity_per_s * p / 100.0).round().max(1.0))
        .filter(|r| r.is_finite())
        .collect();
    out.dedup();
    out
}

/// The sweep's groups: for each of `rates`, the subject at that open-loop rate on
/// `base` and on `other`, one group (their samples in turn), keyed with the rate as
/// the benchmark parameter `rate`. Empty for a subject that cannot be swept.
pub fn sweep_groups<'a>(
    subject: &'a Subject,
    (base, other): (&str, &str),
    rates: &[f64],
    topo: &Topology,
) -> Vec<Vec<CellPlan<'a>>> {
    let Subject::Catalog(w) = subject else {
        return Vec::new();
    };
    rates
        .iter()
        .map(|rate| {
            let mut map = param_map(&w.params);
            map.insert(RATE_PARAM.to_string(), format!("{rate:.0}"));
            let params = Params::from_pairs(map.clone());
            cells_on(w.bench.as_ref(), (params, map), &[base, other], topo)
        })
        .collect()
}

/// Measures the headroom's `curve` in the state found, on `util`'s default placement
/// (the engine's settings: three steps per rate, no warm-up, for `advise --headroom`).
pub fn measure_headroom(
    engine: &Engine<'_>,
    topo: &Topology,
    curve: super::utilisation::Curve,
    sink: &mut dyn SessionObserver,
) -> Result<Ended, ExperimentError> {
    let (spec, placement) = super::utilisation::placement(None, topo)?;
    super::utilisation::measure_curve(
        engine,
        curve,
        super::smt::SmtState::AsFound,
        topo,
        (&spec, &placement),
        sink,
    )
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn placements_follow_the_machine() {
        let smt = smtlab_fixtures::build::intel(1, 2, 2);
        assert_eq!(
            placements(&smt),
            (vec!["1c1t".into(), "1c2t".into(), "2c1t".into()], None)
        );
        let big = smtlab_fixtures::build::intel(1, 4, 2);
        assert_eq!(placements(&big).0, ["1c1t", "1c2t", "2c1t", "cores", "all"]);
        let (v, note) = placements(&smtlab_fixtures::build::one_cpu_per_core(&[0, 1]));
        assert_eq!(v, ["1c1t", "2c1t"]);
        let note = note.unwrap();
        assert!(
            note.starts_with("no SMT here") && note.contains("2 cores vs 1"),
            "{note}"
        );
        let (v, note) = placements(&smtlab_fixtures::build::one_cpu_per_core(&[0]));
        assert_eq!(v, ["1c1t"]);
        assert!(note.unwrap().contains("one core"));
        // A server on 16 cores: the whole machine is half of it, its clients the rest.
        let sixteen = smtlab_fixtures::build::intel(1, 16, 2);
        assert_eq!(
            placements_for(&sixteen, true).0,
            ["1c1t", "1c2t", "2c1t", "half-cores-1t", "half-cores-2t"]
        );
        assert_eq!(placements_for(&sixteen, false).0, placements(&sixteen).0);
        let served = Subject::catalog("web-static", &[], true).unwrap();
        assert!(served.server());
        assert!(!Subject::catalog("int-ops", &[], true).unwrap().server());
    }

    #[test]
    fn an_unsatisfiable_placement_is_a_cell_with_its_reason() {
        let subject = Subject::catalog("int-ops", &[], true).unwrap();
        let topo = smtlab_fixtures::build::one_cpu_per_core(&[0, 1]);
        let group = throughput_group(&subject, &["1c1t".into(), "1c2t".into()], &topo, None);
        assert!(group[0].placement.is_ok());
        let why = group[1].placement.as_ref().unwrap_err();
        assert!(!why.to_string().is_empty());
        assert_eq!(group[1].key.benchmark, "int-ops");
        assert!(Subject::catalog("no-such", &[], true).is_err());
        assert!(Subject::catalog("int-ops", &["nope=1".into()], true).is_err());
    }

    #[test]
    fn the_preparation_runs_before_each_sample_and_its_failure_names_it() {
        assert!(run_preparation("true").is_ok());
        let e = run_preparation("echo broken >&2; exit 3")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--prepare `echo broken >&2; exit 3` failed (exit status 3): broken"),
            "{e}"
        );
    }

    #[test]
    fn each_partner_is_a_group_of_the_task_alone_and_beside_it_on_the_sibling() {
        let topo = smtlab_fixtures::build::intel(1, 2, 2);
        let pair = crate::corun::cpu_pair(&topo).unwrap();
        let cpu = *pair.sibling.as_ref().unwrap();
        let subject = Subject::catalog("int-ops", &[], true).unwrap();
        let task = subject.penalty_task().unwrap();
        let partners = default_partners().unwrap();
        let plan = partner_plan(&task, &partners, cpu, &pair, &topo);
        assert_eq!(plan.len(), partners.len());
        // int-ops beside itself: one group, its alone cell and its co-run.
        let same = plan.iter().position(|g| g.len() == 2).unwrap();
        assert_eq!(partners[same].name(), "int-ops");
        for (group, b) in plan.iter().zip(&partners).filter(|(g, _)| g.len() == 3) {
            let forms: Vec<&str> = group.iter().map(|c| c.key.placement.as_str()).collect();
            assert_eq!(forms, ["corun-alone", "corun-sibling", "corun-alone"]);
            for c in &group[..2] {
                assert_eq!(c.key.benchmark, "int-ops");
                assert_eq!(c.key.conditions.partner.as_ref(), Some(&b.name()));
            }
            // The partner alone, for its direction.
            assert_eq!(group[2].key.benchmark, b.name());
            assert_eq!(group[2].key.conditions.partner.as_deref(), Some("int-ops"));
            assert_eq!(group[1].placement.cpus, [pair.cpu, cpu]);
        }
    }

    #[test]
    fn the_sweep_offers_the_same_rates_on_both_sides_of_each_pair() {
        let sixteen = smtlab_fixtures::build::intel(1, 16, 2);
        let (specs, _) = placements_for(&sixteen, true);
        assert_eq!(
            sweep_sides(&specs),
            [
                ("1c1t".to_string(), "1c2t".to_string()),
                ("half-cores-1t".to_string(), "half-cores-2t".to_string())
            ]
        );
        assert!(sweep_sides(&["1c1t".into(), "2c1t".into()]).is_empty());
        assert_eq!(
            sweep_rates(1000.0, &SWEEP_PCT),
            [250.0, 500.0, 750.0, 900.0]
        );
        assert_eq!(sweep_rates(2.0, &SWEEP_PCT), [1.0, 2.0]);
        let subject = Subject::catalog("web-static", &[], true).unwrap();
        assert!(subject.sweepable());
        assert!(!Subject::catalog("int-ops", &[], true).unwrap().sweepable());
        assert!(
            !Subject::catalog("web-static", &["rate=100".into()], true)
                .unwrap()
                .sweepable()
        );
        let groups = sweep_groups(&subject, ("1c1t", "1c2t"), &[250.0, 500.0], &sixteen);
        assert_eq!(groups.len(), 2);
        for (g, rate) in groups.iter().zip(["250", "500"]) {
            let sides: Vec<&str> = g.iter().map(|c| c.key.placement.as_str()).collect();
            assert_eq!(sides, ["1c1t", "1c2t"]);
            for c in g {
                assert_eq!(c.key.params[RATE_PARAM], rate);
                assert_eq!(c.params.get_str(RATE_PARAM).unwrap(), rate);
                assert!(c.placement.is_ok());
            }
        }
    }

    #[test]
    fn the_penalty_task_runs_one_thread() {
        let given = ["threads=2".to_string(), "seed=7".to_string()];
        let subject = Subject::catalog("int-ops", &given, true).unwrap();
        let task = subject.penalty_task().unwrap();
        assert_eq!(task.params.get_str("threads").unwrap(), "1");
        // The rest as the throughput cells have them.
        assert_eq!(task.params.get_str("seed").unwrap(), "7");
    }
}
