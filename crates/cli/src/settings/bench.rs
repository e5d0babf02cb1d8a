//! The settings of `bench`, settled before anything is measured: the benchmarks and
//! their parameter sets, the placements (those this machine cannot give left out with
//! the reason), the SMT states, the run's settings and counting.

use anyhow::{Result, bail};
use smtlab_bench::{Benchmark, Params};
use smtlab_model::placement::Named;
use smtlab_model::{BenchInfo, CellKey, ResolvedPlacement, RunConfig, Topology};
use smtlab_runner::counting::CountingSetup;
use smtlab_runner::machine::Machine;
use smtlab_runner::session::{CellPlan, Group, param_map};

use crate::args::BenchArgs;

pub struct Bench {
    pub benches: Vec<Box<dyn Benchmark>>,
    /// Each parameter set to measure: the benchmark's index in `benches`, its
    /// description and the parameters.
    pub sets: Vec<(usize, BenchInfo, Params)>,
    pub topo: Topology,
    /// The placements measured, as written and resolved.
    pub specs: Vec<String>,
    pub placements: Vec<ResolvedPlacement>,
    /// Placements this machine cannot give, with the reason (reported, not measured).
    pub unmeasured: Vec<(String, String)>,
    pub states: Vec<smtlab_model::keys::SmtState>,
    pub cfg: RunConfig,
    pub counting: Option<CountingSetup>,
    /// Notes on what this machine or these benchmarks leave out.
    pub notes: Vec<String>,
}

pub fn bench(args: &BenchArgs, machine: &dyn Machine) -> Result<Bench> {
    let benches = super::select(&args.names)?;
    check_params(&benches, &args.params)?;
    let several = benches.len() > 1;
    // A key given twice is a sweep: one parameter set per combination, all checked
    // before measuring.
    let mut sets = Vec::with_capacity(benches.len());
    for (i, bench) in benches.iter().enumerate() {
        let info = bench.info();
        // With several benchmarks a parameter applies to those that declare it.
        let given: Vec<String> = args
            .params
            .iter()
            .filter(|p| !several || declares(&info, p))
            .cloned()
            .collect();
        for params in smtlab_bench::params::sweep(&info, &given, args.quick)? {
            sets.push((i, info.clone(), params));
        }
    }
    let topo = machine.topology()?;
    let asked = if args.placements.is_empty() {
        vec![Named::OneCore.to_string()]
    } else {
        super::split_placements(&args.placements)
    };
    // On a uniprocessor kernel 1c1t, 1c1t-up and 1t-up-kernel are one placement.
    let (asked, same) = smtlab_placement::distinct(&asked, &topo);
    // Resolve every placement before measuring anything: a typo should not cost a run.
    let (specs, placements, unmeasured) =
        resolve_placements(&asked, &topo, args.smt.smt.is_empty())?;
    if args.interleave && placements.iter().any(|p| p.is_uniprocessor()) {
        bail!("--interleave with 1c1t-up: the other placements need the CPUs it takes offline");
    }
    machine.check_uniprocessor(&placements)?;
    let states = super::switchable_states(&args.smt.smt, &placements, &topo, machine)?;
    let mut cfg = super::run_config(args.quick);
    if let Some(ci) = args.ci_target {
        cfg.ci_target_rel = ci / 100.0;
    }
    if let Some(n) = args.max_samples {
        cfg.max_samples = n;
    }
    smtlab_runner::config::validate(&cfg)?;
    cfg.known_overheads = Some(smtlab_runner::measure_overheads(machine.clock()));
    cfg.counters = args.counters;
    args.events.apply(&mut cfg);
    let counting = machine.counting_for(&cfg)?;
    let mut notes = same;
    if !args.json {
        notes.extend(counting.iter().flat_map(CountingSetup::missing_lines));
        if !topo.smt_visible() && args.smt.smt.is_empty() {
            notes.push(format!(
                "no SMT visible on this machine (smt/control: {}); 1c2t and 2c2t cannot be measured here",
                topo.smt.control.as_deref().unwrap_or("absent")
            ));
        }
    }
    notes.extend(benches.iter().flat_map(|b| b.notes()));
    Ok(Bench {
        benches,
        sets,
        topo,
        specs,
        placements,
        unmeasured,
        states,
        cfg,
        counting,
        notes,
    })
}

impl Bench {
    /// One group per parameter set: its placements, measured together when interleaving.
    pub fn groups(&self) -> Vec<Group<'_>> {
        self.sets
            .iter()
            .map(|(i, info, params)| {
                self.specs
                    .iter()
                    .zip(&self.placements)
                    .map(|(spec, placement)| {
                        CellPlan::new(
                            self.benches[*i].as_ref(),
                            params.clone(),
                            CellKey::new(&info.name, param_map(params), spec),
                            Ok(placement.clone()),
                        )
                    })
                    .collect()
            })
            .collect()
    }
}

fn declares(info: &BenchInfo, param: &str) -> bool {
    let key = param.split_once('=').map_or(param, |(k, _)| k).trim();
    info.params.iter().any(|p| p.name == key)
}

/// With several benchmarks, a parameter no benchmark declares is still a typo.
fn check_params(benches: &[Box<dyn Benchmark>], params: &[String]) -> Result<()> {
    if benches.len() == 1 {
        return Ok(()); // Params::resolve gives the precise message.
    }
    for p in params {
        if !benches.iter().any(|b| declares(&b.info(), p)) {
            bail!("parameter {p:?} is accepted by none of the selected benchmarks");
        }
    }
    Ok(())
}

/// Placements as written, resolved, and those left out with the reason.
type Resolved = (Vec<String>, Vec<ResolvedPlacement>, Vec<(String, String)>);

/// The placements to measure, resolved, and those left out with the reason. A placement
/// that needs SMT siblings on a machine without visible SMT is left out (`may_leave_out`,
/// when no SMT state is switched) as long as another one can be measured: `-p 1c1t,1c2t`
/// then measures 1c1t and says why there is no yield. Any other placement that cannot be
/// resolved is an error.
fn resolve_placements(asked: &[String], topo: &Topology, may_leave_out: bool) -> Result<Resolved> {
    let mut specs = Vec::new();
    let mut placements = Vec::new();
    let mut unmeasured = Vec::new();
    let mut first_error = None;
    for s in asked {
        let spec = smtlab_placement::parse(s)?;
        match smtlab_placement::resolve(&spec, topo) {
            Ok(p) => {
                specs.push(s.clone());
                placements.push(p);
            }
            Err(e) => {
                let needs_smt = matches!(
                    spec.kind,
                    smtlab_model::PlacementKind::Grid { threads_per_core, .. } if threads_per_core > 1
                );
                if !(may_leave_out && needs_smt && !topo.smt_visible()) {
                    return Err(e.into());
                }
                first_error.get_or_insert_with(|| e.clone());
                unmeasured.push((s.clone(), e.to_string()));
            }
        }
    }
    match first_error {
        Some(e) if placements.is_empty() => Err(e.into()),
        _ => Ok((specs, placements, unmeasured)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smt_placements_without_smt_are_left_out_only_beside_others() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let no_smt = smtlab_fixtures::build::intel(1, 2, 1);
        let (specs, placements, left_out) =
            resolve_placements(&s(&["1c1t", "1c2t", "2c1t", "2c2t"]), &no_smt, true).unwrap();
        assert_eq!(specs, s(&["1c1t", "2c1t"]));
        assert_eq!(placements[1].cpus, [0, 1]);
        let names: Vec<&str> = left_out.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["1c2t", "2c2t"]);
        assert!(left_out[0].1.contains("no SMT"), "{}", left_out[0].1);
        // Nothing else to measure, SMT states to switch, or another reason: an error.
        let e = resolve_placements(&s(&["1c2t"]), &no_smt, true).unwrap_err();
        assert!(e.to_string().contains("no SMT"), "{e}");
        assert!(resolve_placements(&s(&["1c1t", "1c2t"]), &no_smt, false).is_err());
        assert!(resolve_placements(&s(&["1c1t", "3c1t"]), &no_smt, true).is_err());
        assert!(resolve_placements(&s(&["1c1t", "1c2x"]), &no_smt, true).is_err());
        // With SMT every placement is measured.
        let smt = smtlab_fixtures::build::intel(1, 2, 2);
        let (specs, _, left_out) = resolve_placements(&s(&["1c1t", "1c2t"]), &smt, true).unwrap();
        assert_eq!((specs.len(), left_out.len()), (2, 0));
    }
}
