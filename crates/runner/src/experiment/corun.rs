//! Co-run experiments: `smtlab corun` (the symbiosis matrix: each workload next to each
//! other one, on the SMT sibling and on another core) and `smtlab penalty` (a fixed
//! piece of work alone and next to each hog: the single-thread penalty).
//!
//! Every group is measured interleaved: A alone, A next to B on the sibling, A next to B
//! on another core, one sample of each in turn, so the host's speed spells fall on all of
//! them alike. Each cell is a [`CoRun`] (the partner runs only during A's samples) keyed
//! by A's name and parameters plus the form and partner (`Conditions::form`,
//! `Conditions::partner`); its placement is named `corun-<form>`.

use std::collections::BTreeMap;
use std::sync::Arc;

use smtlab_bench::{BenchContext, Benchmark, Params};
use smtlab_model::keys::{Conditions, Form};
use smtlab_model::{CellKey, ResolvedPlacement, Topology};

use super::{Engine, ExperimentError};
use crate::RunConfig;
use crate::corun::command::ShellCommand;
use crate::corun::{CoRun, CpuPair, PartnerSpec, calibrate, placement_of};
use crate::plan::Pace;
use crate::session::{CellPlan, Ended, Group, SessionObserver, param_map};

/// The default workloads of the matrix: integer, floating point, memory bandwidth,
/// memory latency and a system call loop, one thread each.
pub const DEFAULT_WORKLOADS: [&str; 5] = [
    "int-ops",
    "fp-ops",
    "mem-read",
    "mem-latency",
    "null-syscall",
];
/// The default hogs of `penalty`.
pub const DEFAULT_HOGS: [&str; 4] = ["int-ops", "fp-ops", "mem-read", "null-syscall"];
/// The partner of an `alone` cell of `penalty` (the matrix names the partner of the
/// cells it was interleaved with).
pub const NO_PARTNER: &str = "-";

/// A workload of a co-run: a catalog benchmark with its parameters, or a command.
#[derive(Clone)]
pub struct Workload {
    pub bench: Arc<dyn Benchmark>,
    pub params: Params,
}

impl Workload {
    pub fn name(&self) -> String {
        self.bench.info().name
    }

    /// Catalog benchmark `name` with the `defaults` it declares, then the `given`
    /// parameters it declares (others are for other workloads). Not a server workload:
    /// `corun` and `penalty` place no client side.
    pub fn catalog(
        name: &str,
        given: &[String],
        defaults: &[(&str, &str)],
    ) -> Result<Workload, ExperimentError> {
        let w = Workload::any(name, given, defaults)?;
        if w.bench.client_side() {
            return Err(ExperimentError::input(format!(
                "{name} is a server workload with a client side; co-runs take single-CPU workloads"
            )));
        }
        Ok(w)
    }

    /// Whether it is a server workload, driven by a client side (as the measured
    /// workload or as the partner); two of them are never paired.
    pub fn is_server(&self) -> bool {
        self.bench.client_side()
    }

    /// As [`Workload::catalog`], server workloads included.
    pub fn any(
        name: &str,
        given: &[String],
        defaults: &[(&str, &str)],
    ) -> Result<Workload, ExperimentError> {
        let bench = crate::catalog::find(name)
            .ok_or_else(|| ExperimentError::input(crate::catalog::unknown("benchmark", name)))?;
        let info = bench.info();
        let declared = |k: &str| info.params.iter().any(|p| p.name == k);
        let mut list: Vec<String> = defaults
            .iter()
            .filter(|(k, _)| declared(k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        list.extend(
            given
                .iter()
                .filter(|p| declared(p.split_once('=').map_or(p.as_str(), |(k, _)| k.trim())))
                .cloned(),
        );
        let params = Params::resolve(&info, &list, false)
            .map_err(|e| ExperimentError::input(e.to_string()))?;
        Ok(Workload {
            bench: Arc::from(bench),
            params,
        })
    }

    /// A shell command `NAME=COMMAND` as a workload (one run is one sample's work).
    pub fn command(text: &str) -> Result<Workload, ExperimentError> {
        let c = ShellCommand::parse(text).map_err(|e| ExperimentError::Input(e.0))?;
        Ok(Workload {
            bench: Arc::new(c),
            params: Params::default(),
        })
    }
}

/// A parameter no selected workload declares is a typo.
pub fn check_params(workloads: &[&Workload], given: &[String]) -> Result<(), ExperimentError> {
    for p in given {
        let key = p.split_once('=').map_or(p.as_str(), |(k, _)| k).trim();
        if !workloads
            .iter()
            .any(|w| w.bench.info().params.iter().any(|i| i.name == key))
        {
            return Err(ExperimentError::input(format!(
                "--param {p:?} is accepted by none of the selected workloads"
            )));
        }
    }
    Ok(())
}

/// Workload names must be unique: they name the matrix's rows and columns.
pub fn check_unique(workloads: &[Workload]) -> Result<(), ExperimentError> {
    let mut seen: Vec<String> = Vec::new();
    for w in workloads {
        let n = w.name();
        if seen.contains(&n) {
            return Err(ExperimentError::input(format!(
                "workload {n:?} given twice; names must be unique"
            )));
        }
        seen.push(n);
    }
    Ok(())
}

/// The workloads of the matrix: the catalog benchmarks `names` (the default set when
/// neither names nor commands are given), one thread each, then the commands `cmds`;
/// names unique, every `params` entry declared by one of them. Server workloads only
/// where `servers` allows them (`predict`, which measures them beside its rulers).
pub fn matrix_workloads(
    names: &[String],
    cmds: &[String],
    params: &[String],
    servers: bool,
) -> Result<Vec<Workload>, ExperimentError> {
    let defaults: Vec<String> = DEFAULT_WORKLOADS.iter().map(|s| s.to_string()).collect();
    let names = if names.is_empty() && cmds.is_empty() {
        &defaults
    } else {
        names
    };
    let mut workloads = names
        .iter()
        .map(|n| match servers {
            true => Workload::any(n, params, &[("threads", "1")]),
            false => Workload::catalog(n, params, &[("threads", "1")]),
        })
        .collect::<Result<Vec<_>, _>>()?;
    for c in cmds {
        workloads.push(Workload::command(c)?);
    }
    check_unique(&workloads)?;
    check_params(&workloads.iter().collect::<Vec<_>>(), params)?;
    Ok(workloads)
}

/// The task and hogs of the penalty: the command `cmd`, else catalog benchmark `task`
/// (default `mem-latency` with `size=4MiB`), one thread; the hogs (default
/// [`DEFAULT_HOGS`]) one thread each; every `params` entry declared by one of them.
pub fn penalty_workloads(
    task: Option<&str>,
    cmd: Option<&str>,
    hogs: &[String],
    params: &[String],
) -> Result<(Workload, Vec<Workload>), ExperimentError> {
    let one = [("threads", "1")];
    let task = match (cmd, task) {
        (Some(c), _) => Workload::command(c)?,
        (None, Some(name)) => Workload::catalog(name, params, &one)?,
        (None, None) => Workload::catalog("mem-latency", params, &[one[0], ("size", "4MiB")])?,
    };
    let defaults: Vec<String> = DEFAULT_HOGS.iter().map(|s| s.to_string()).collect();
    let hogs = if hogs.is_empty() { &defaults } else { hogs };
    let hogs = hogs
        .iter()
        .map(|h| Workload::catalog(h.trim(), params, &one))
        .collect::<Result<Vec<_>, _>>()?;
    let all: Vec<&Workload> = std::iter::once(&task).chain(&hogs).collect();
    check_params(&all, params)?;
    Ok((task, hogs))
}

/// The forms to measure with their partner CPU, and one-line notes on those left out.
pub type Forms = (Vec<(Form, u32)>, Vec<String>);

/// The forms asked for (`sibling`, `cores`; both when none) and the ones this machine can
/// run, with the one-line reason for any left out.
pub fn forms(asked: &[String], pair: &CpuPair) -> Result<Forms, ExperimentError> {
    let wanted: Vec<Form> = if asked.is_empty() {
        vec![Form::Sibling, Form::Cores]
    } else {
        asked
            .iter()
            .map(|f| match Form::parse(f.trim()) {
                Some(Form::Alone) | None => Err(ExperimentError::input(format!(
                    "--forms {f:?}: expected sibling or cores (alone is always measured)"
                ))),
                Some(form) => Ok(form),
            })
            .collect::<Result<_, _>>()?
    };
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for form in wanted {
        let cpu = match form {
            Form::Sibling => &pair.sibling,
            _ => &pair.other_core,
        };
        match cpu {
            Ok(c) => out.push((form, *c)),
            Err(why) => notes.push(format!("{} form not measured: {why}", form.name())),
        }
    }
    if out.is_empty() {
        return Err(ExperimentError::input(format!(
            "nothing to measure: {}",
            notes.join("; ")
        )));
    }
    Ok((out, notes))
}

/// The time a plan takes, `(likely, max)` in nanoseconds, each cell's reckoned as `run
/// --dry-run` reckons it from its [`Benchmark::cost`]; a group's cells take their
/// samples in turn ([`Pace::InTurn`]). A calibrated sample beside a partner that gives
/// its own reference lasts about two target lengths. A cell whose cost cannot be told
/// counts nothing.
pub fn plan_time<'a>(
    plan: impl IntoIterator<Item = &'a Vec<CorunCell>>,
    topo: &Topology,
    cfg: &RunConfig,
) -> (u64, u64) {
    let doubled = RunConfig {
        target_sample_ns: cfg.target_sample_ns.saturating_mul(2),
        ..cfg.clone()
    };
    let mut total = (0u64, 0u64);
    for group in plan {
        for c in group {
            let Ok(cost) = crate::plan::cell_cost(&c.corun, &c.params, &c.placement, topo) else {
                continue;
            };
            let beside = c.corun.partner.is_some() && c.corun.partner_reference;
            let cfg = match beside && cost.sample_ns.is_none() {
                true => &doubled,
                false => cfg,
            };
            let pace = match group.len() {
                1 => Pace::Alone,
                _ => Pace::InTurn,
            };
            let ((likely, max), _) = crate::plan::cell_time(&cost, cfg, pace);
            total = (total.0.saturating_add(likely), total.1.saturating_add(max));
        }
    }
    total
}

/// One planned co-run cell: the benchmark that measures it and its key and placement.
pub struct CorunCell {
    pub corun: CoRun,
    /// A's parameters, which the cell's context passes to A.
    pub params: Params,
    pub key: CellKey,
    pub placement: ResolvedPlacement,
}

/// The cells of a plan, in groups measured interleaved.
pub type CorunPlan = Vec<Vec<CorunCell>>;

pub(crate) fn cell(
    a: &Workload,
    partner: Option<&Workload>,
    partner_name: &str,
    form: Form,
    cpus: Vec<u32>,
    fixed: Option<u64>,
    topo: &Topology,
) -> CorunCell {
    let params: BTreeMap<String, String> = param_map(&a.params);
    let conditions = Conditions {
        form: Some(form),
        partner: Some(partner_name.into()),
        ..Conditions::default()
    };
    let name = format!("corun-{}", form.name());
    CorunCell {
        corun: CoRun {
            a: Arc::clone(&a.bench),
            partner: partner.map(|p| PartnerSpec {
                bench: Arc::clone(&p.bench),
                params: p.params.clone(),
            }),
            fixed_iterations: fixed,
            // The matrix needs each partner's own reference; the penalty does not.
            partner_reference: fixed.is_none(),
        },
        params: a.params.clone(),
        key: CellKey {
            benchmark: a.name(),
            params,
            conditions,
            placement: name.clone(),
        },
        placement: placement_of(&name, &cpus, topo),
    }
}

/// The matrix: for each workload A and each partner B one group ([`pair_group`]).
pub fn matrix_plan(
    workloads: &[Workload],
    forms: &[(Form, u32)],
    pair: &CpuPair,
    topo: &Topology,
) -> CorunPlan {
    let partners = one_each(forms);
    let mut groups = Vec::new();
    for a in workloads {
        for b in workloads {
            groups.push(pair_group(a, b, &b.name(), &partners, pair, topo));
        }
    }
    groups
}

/// Each form with the CPUs of the partner in it.
pub type Partners = Vec<(Form, Vec<u32>)>;

/// Each form with its one partner CPU.
pub fn one_each(forms: &[(Form, u32)]) -> Partners {
    forms.iter().map(|&(form, cpu)| (form, vec![cpu])).collect()
}

/// Each form with a partner on every online CPU outside the measured CPU's core: the
/// `cores` form's CPU first, then the others; the `sibling` form's sibling first, then
/// the same others.
pub fn wide(forms: &[(Form, u32)], pair: &CpuPair, topo: &Topology) -> Partners {
    let own = topo.core_of(pair.cpu).map(|c| c.cpus.clone());
    let outside: Vec<u32> = topo
        .cpus
        .iter()
        .filter(|&c| c != pair.cpu && !own.as_ref().is_some_and(|o| o.contains(c)))
        .collect();
    forms
        .iter()
        .map(|&(form, cpu)| {
            let rest = outside.iter().copied().filter(|&c| c != cpu);
            (form, std::iter::once(cpu).chain(rest).collect())
        })
        .collect()
}

/// One group of a pair: A alone (its partner named `b_name`, so each co-run cell has
/// the reference measured beside it) and A next to B in each form, on `partners`' CPUs.
pub fn pair_group(
    a: &Workload,
    b: &Workload,
    b_name: &str,
    partners: &[(Form, Vec<u32>)],
    pair: &CpuPair,
    topo: &Topology,
) -> Vec<CorunCell> {
    let mut group = vec![alone(a, b_name, pair, None, topo)];
    group.extend(beside(a, b, b_name, partners, pair, None, topo));
    group
}

/// A alone on its CPU, its partner named `b_name` in its key.
fn alone(
    a: &Workload,
    b_name: &str,
    pair: &CpuPair,
    fixed: Option<u64>,
    topo: &Topology,
) -> CorunCell {
    cell(a, None, b_name, Form::Alone, vec![pair.cpu], fixed, topo)
}

/// A next to B in each form, B named `b_name` in the keys; the cell's placement is A's
/// CPU, then B's.
fn beside<'w>(
    a: &'w Workload,
    b: &'w Workload,
    b_name: &'w str,
    partners: &'w [(Form, Vec<u32>)],
    pair: &'w CpuPair,
    fixed: Option<u64>,
    topo: &'w Topology,
) -> impl Iterator<Item = CorunCell> + 'w {
    partners.iter().map(move |(form, cpus)| {
        let all = std::iter::once(pair.cpu).chain(cpus.iter().copied());
        cell(a, Some(b), b_name, *form, all.collect(), fixed, topo)
    })
}

/// The penalty: one group holding the task alone and next to every hog in each form,
/// so each penalty is against a reference measured in the same stretch of time. Every
/// sample is the same `fixed` piece of work.
pub fn penalty_plan(
    task: &Workload,
    fixed: u64,
    hogs: &[Workload],
    forms: &[(Form, u32)],
    pair: &CpuPair,
    topo: &Topology,
) -> CorunPlan {
    let fixed = Some(fixed);
    let mut group = vec![alone(task, NO_PARTNER, pair, fixed, topo)];
    let partners = one_each(forms);
    for hog in hogs {
        group.extend(beside(task, hog, &hog.name(), &partners, pair, fixed, topo));
    }
    vec![group]
}

/// Iterations of the penalty task's fixed piece of work: `run_ns` long, calibrated once,
/// alone, on the task's CPU; a command's piece of work is one run.
pub fn calibrate_task(
    task: &Workload,
    run_ns: u64,
    pair: &CpuPair,
    topo: &Topology,
) -> Result<u64, ExperimentError> {
    let placement = placement_of("corun-alone", &[pair.cpu], topo);
    let mut inst = task.bench.prepare(&BenchContext {
        params: &task.params,
        placement: &placement,
        topology: topo,
        client: None,
    })?;
    Ok(calibrate(inst.as_mut(), run_ns)?)
}

/// Measures a plan: every group interleaved, each cell pushed to `sink` when done.
pub fn measure(
    engine: &Engine<'_>,
    topo: &Topology,
    plan: &CorunPlan,
    sink: &mut dyn SessionObserver,
) -> Ended {
    // The session measures a group at a time and drops its instances (and so stops
    // every partner) before the next group starts.
    engine.run(topo, cell_plans(plan), sink)
}

/// The plan's groups as session cells, their placements the plan's CPUs.
pub fn cell_plans(plan: &CorunPlan) -> Vec<Group<'_>> {
    plan.iter()
        .map(|g| {
            g.iter()
                .map(|c| {
                    CellPlan::new(
                        &c.corun,
                        c.params.clone(),
                        c.key.clone(),
                        Ok(c.placement.clone()),
                    )
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;
    use std::sync::atomic::{AtomicBool, Ordering};

    use smtlab_bench::{BenchError, Instance, RawSample};
    use smtlab_model::{BenchInfo, Direction, SkippedCell, ValueKind};

    use super::*;
    use crate::clock::Monotonic;
    use crate::config::RunConfig;
    use crate::session::Measured;

    /// A workload whose samples last a fixed time per iteration, without running.
    struct Fake(&'static str);
    struct Constant;
    impl Instance for Constant {
        fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
            Ok(RawSample {
                elapsed_ns: 1_000 * iterations,
                work: iterations as f64,
                ..RawSample::default()
            })
        }
    }
    impl Benchmark for Fake {
        fn info(&self) -> BenchInfo {
            BenchInfo {
                name: self.0.into(),
                group: "test".into(),
                unit: "ns".into(),
                direction: Direction::Lower,
                value_kind: ValueKind::TimePerOp,
                description: "a fake".into(),
                origin: "tests".into(),
                params: Vec::new(),
                main_param: None,
                report: Default::default(),
            }
        }
        fn prepare(&self, _: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
            Ok(Box::new(Constant))
        }
    }

    fn fake(name: &'static str) -> Workload {
        Workload {
            bench: Arc::new(Fake(name)),
            params: Params::default(),
        }
    }

    fn two_cores() -> (Topology, CpuPair) {
        let topo = smtlab_fixtures::build::intel(1, 2, 2);
        let pair = crate::corun::cpu_pair(&topo).unwrap();
        (topo, pair)
    }

    #[derive(Default)]
    struct Kept {
        cells: Vec<smtlab_model::CellRecord>,
        skipped: Vec<SkippedCell>,
    }
    impl SessionObserver for Kept {
        fn measured(&mut self, m: Measured<'_>) -> ControlFlow<()> {
            self.cells.push(m.record.clone());
            ControlFlow::Continue(())
        }
        fn skipped(&mut self, s: &SkippedCell) -> ControlFlow<()> {
            self.skipped.push(s.clone());
            ControlFlow::Continue(())
        }
    }

    #[test]
    fn the_matrix_plans_one_group_per_pair_with_the_reference_first() {
        let (topo, pair) = two_cores();
        let (forms, notes) = forms(&[], &pair).unwrap();
        assert!(notes.is_empty());
        let plan = matrix_plan(&[fake("a"), fake("b")], &forms, &pair, &topo);
        assert_eq!(plan.len(), 4);
        let g = &plan[1];
        let keys: Vec<(&str, &str, &str)> = g
            .iter()
            .map(|c| {
                (
                    c.key.benchmark.as_str(),
                    c.key.conditions.form.unwrap().name(),
                    c.key.conditions.partner.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            keys,
            [
                ("a", "alone", "b"),
                ("a", "sibling", "b"),
                ("a", "cores", "b")
            ]
        );
        assert_eq!(
            g[1].placement.cpus,
            [pair.cpu, *pair.sibling.as_ref().unwrap()]
        );
        assert_eq!(g[2].key.placement, "corun-cores");
        assert!(g[0].corun.partner.is_none() && g[0].corun.partner_reference);
    }

    #[test]
    fn a_penalty_cell_is_measured_through_the_session_with_its_conditions() {
        let (topo, pair) = two_cores();
        let plan = penalty_plan(&fake("task"), 3, &[], &[], &pair, &topo);
        let cfg = RunConfig::quick();
        let stop = AtomicBool::new(false);
        let engine = Engine {
            machine: &crate::machine::RealMachine,
            how: crate::plan::Measuring {
                interleave: true,
                repeat: 1,
                client_rule: Default::default(),
            },
            cfg: &cfg,
            clock: &Monotonic,
            counting: None,
            stop: &stop,
            handoff_at_start: Vec::new(),
        };
        let mut kept = Kept::default();
        assert_eq!(measure(&engine, &topo, &plan, &mut kept), Ended::Complete);
        assert!(kept.skipped.is_empty());
        let [cell] = kept.cells.as_slice() else {
            panic!("one cell, got {}", kept.cells.len())
        };
        assert_eq!(cell.conditions.form, Some(Form::Alone));
        assert_eq!(cell.conditions.partner.as_deref(), Some(NO_PARTNER));
        assert!(cell.params.is_empty(), "conditions are not parameters");
        assert_eq!(cell.placement_spec, "corun-alone");
        // The fixed piece of work: every sample ran exactly 3 iterations.
        assert!(cell.result.samples.iter().all(|s| s.iterations == 3));
        assert!(cell.result.series.contains_key(crate::corun::RUN_NS));

        // The stop flag ends the experiment before any cell is recorded.
        stop.store(true, Ordering::Relaxed);
        let mut none = Kept::default();
        assert_eq!(measure(&engine, &topo, &plan, &mut none), Ended::Stopped);
        assert!(none.cells.is_empty() && none.skipped.is_empty());
    }

    #[test]
    fn bad_forms_and_unknown_workloads_are_named() {
        let (_, pair) = two_cores();
        let e = forms(&["alone".into()], &pair).unwrap_err().to_string();
        assert!(e.contains("--forms \"alone\""), "{e}");
        let e = Workload::catalog("no-such", &[], &[])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unknown benchmark \"no-such\""), "{e}");
        let e = check_unique(&[fake("x"), fake("x")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("given twice"), "{e}");
    }
}
