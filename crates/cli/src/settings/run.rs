//! The settings of `run`: a new run's plan and settings (benchmarks x parameters x
//! placements, once per SMT state asked for), or the run to resume with the settings it
//! was started with, read from the store.

use anyhow::{Context, Result, bail};
use smtlab_model::{CellKey, RunMeta, RunStatus, Topology};
use smtlab_runner::experiment::smt;
use smtlab_runner::machine::Machine;
use smtlab_runner::plan::{Estimate, Measuring, Suite, estimate, plan};
use smtlab_store::{Lease, Store};

use super::{select, split_placements, states_here, tool};
use crate::args::RunArgs;

/// The runner's estimate of `cells` of the run `meta` on this machine.
pub fn estimate_of(cells: &[CellKey], meta: &RunMeta, topo: &Topology, args: &RunArgs) -> Estimate {
    let catalog = smtlab_runner::catalog::all();
    estimate(
        cells,
        &catalog,
        topo,
        &meta.config,
        measuring_of(meta, args),
    )
}

/// How a run is measured: whether it interleaves and how many rounds, as its stored
/// settings say, so `--resume` measures the rest the same way (runs stored before these
/// settings were kept have them only in their command line: `--no-interleave`,
/// `--repeat N`), and where client sides go (`args`).
pub fn measuring_of(meta: &RunMeta, args: &RunArgs) -> Measuring {
    let (line_interleave, line_repeat) = measuring_of_command_line(&meta.command_line);
    Measuring {
        interleave: meta.config.interleave.unwrap_or(line_interleave),
        repeat: meta.config.repeat.unwrap_or(line_repeat).max(1),
        client_rule: crate::settings::client_rule(&args.client),
    }
}

/// The measuring settings of a run stored before its config kept them.
fn measuring_of_command_line(command_line: &[String]) -> (bool, usize) {
    let interleave = !command_line.iter().any(|a| a == "--no-interleave");
    let mut repeat = 1;
    for (i, a) in command_line.iter().enumerate() {
        let value = match a.strip_prefix("--repeat") {
            Some("") => command_line.get(i + 1).map(String::as_str),
            Some(v) => v.strip_prefix('='),
            None => None,
        };
        if let Some(n) = value.and_then(|v| v.parse::<usize>().ok()) {
            repeat = n.max(1);
        }
    }
    (interleave, repeat)
}

/// The plan and settings of a new run, with the notes said once at its start.
pub fn new_run(args: &RunArgs, topo: &Topology, machine: &dyn Machine) -> Result<RunMeta> {
    let suite = args.suite;
    let names = if args.bench.is_empty() {
        vec!["all".to_string()]
    } else {
        args.bench.clone()
    };
    let benches = select(&names)?;
    let mut notes = Vec::new();
    let placements = if args.placements.is_empty() {
        let mut ok = Vec::new();
        let mut left_out = Vec::new();
        for (spec, r) in smtlab_placement::standard_placements(topo) {
            match r {
                Ok(_) => ok.push(spec.text),
                Err(_) => left_out.push(spec.text),
            }
        }
        if !left_out.is_empty() {
            let why = if topo.smt_visible() {
                "this machine cannot satisfy them"
            } else {
                "no SMT visible on this machine"
            };
            notes.push(format!("{why}: {} left out", left_out.join(", ")));
        }
        ok
    } else {
        let list = split_placements(&args.placements);
        // Parse now so a typo fails before anything is stored.
        for p in &list {
            smtlab_placement::parse(p)?;
        }
        // On a uniprocessor kernel 1c1t, 1c1t-up and 1t-up-kernel are one placement.
        let (list, same) = smtlab_placement::distinct(&list, topo);
        notes.extend(same);
        list
    };
    let mut config = super::run_config(suite == Suite::Quick);
    config.known_overheads = Some(smtlab_runner::measure_overheads(machine.clock()));
    config.counters = args.counters;
    args.events.apply(&mut config);
    config.memory_budget_bytes = smtlab_runner::plan::memory_budget();
    config.interleave = Some(!args.no_interleave);
    config.repeat = Some(args.repeat as usize);
    let given = given_params(&args.params, &benches)?;
    let standard = args.placements.is_empty();
    let mut cells = plan(suite, &benches, &placements, &given, standard, topo);
    let resolve = |p: &String| super::resolve(p, topo);
    let up = placements
        .iter()
        .any(|p| resolve(p).is_ok_and(|r| r.is_uniprocessor()));
    let (states, refused) = states_here(&args.smt.smt, up, topo, machine)?;
    notes.extend(refused);
    // Placements none of which this machine can satisfy (and no --smt to change it)
    // would make a run of skipped cells only: an error, before anything is stored.
    if args.smt.smt.is_empty() && !args.placements.is_empty() {
        let refusals: Vec<String> = placements
            .iter()
            .filter_map(|p| resolve(p).err().map(|e| format!("{p}: {e}")))
            .collect();
        if refusals.len() == placements.len() {
            bail!(
                "--placements: none can run on this machine ({}); nothing was measured or stored",
                refusals.join("; ")
            );
        }
    }
    if !states.is_empty() {
        cells = smt_plan(cells, &states);
    }
    // What a benchmark of the plan leaves out or measures differently here (a program
    // not installed, fork rows measured from the smtlab binary), kept with the run.
    for b in &benches {
        if cells.iter().any(|k| k.benchmark == b.info().name) {
            notes.extend(b.notes());
        }
    }
    Ok(super::fresh_run(
        suite.name(),
        machine,
        topo,
        &config,
        notes,
        cells,
    ))
}

/// `run --param` as (key, values): `k=a,b` is two values, a key given twice adds its
/// values, `\,` is a comma inside a value. A key none of `benches` declares is an error
/// naming the parameters they have.
pub fn given_params(
    params: &[String],
    benches: &[Box<dyn smtlab_bench::Benchmark>],
) -> Result<Vec<(String, Vec<String>)>> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for p in params {
        let Some((key, values)) = p.split_once('=') else {
            bail!("--param {p:?}: expected KEY=VALUE, e.g. server=event,threads");
        };
        let key = key.trim();
        let declared =
            |b: &dyn smtlab_bench::Benchmark| b.info().params.iter().any(|d| d.name == key);
        if !benches.iter().any(|b| declared(b.as_ref())) {
            let mut known: Vec<String> = benches
                .iter()
                .flat_map(|b| b.info().params.into_iter().map(|d| d.name))
                .collect();
            known.sort();
            known.dedup();
            bail!(
                "--param {p:?}: no selected workload has a parameter {key:?} (they have: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            );
        }
        let values = split_values(values);
        if values.iter().any(|v| v.trim().is_empty()) {
            bail!("--param {p:?}: an empty value; expected KEY=VALUE[,VALUE...]");
        }
        match out.iter_mut().find(|(k, _)| k == key) {
            Some((_, have)) => {
                for v in values {
                    if !have.contains(&v) {
                        have.push(v);
                    }
                }
            }
            None => out.push((key.to_string(), values)),
        }
    }
    Ok(out)
}

/// `a,b\,c` as `a` and `b,c`.
fn split_values(text: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&',') => {
                out.last_mut().expect("never empty").push(',');
                chars.next();
            }
            ',' => out.push(String::new()),
            c => out.last_mut().expect("never empty").push(c),
        }
    }
    out
}

/// `plan` with each benchmark and parameter set's cells once per SMT state, the states
/// taking turns group by group.
fn smt_plan(plan: Vec<CellKey>, states: &[smt::SmtState]) -> Vec<CellKey> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < plan.len() {
        let same = |k: &CellKey| k.benchmark == plan[i].benchmark && k.params == plan[i].params;
        let n = plan[i..].iter().take_while(|k| same(k)).count();
        for &state in states {
            for k in &plan[i..i + n] {
                let mut k = k.clone();
                k.conditions.smt = Some(state);
                out.push(k);
            }
        }
        i += n;
    }
    out
}

/// The run to resume (`None`: the newest unfinished one), its cells not yet done, and
/// its lease (refused while another process measures it).
pub fn resume(
    store: &mut Store,
    which: Option<&str>,
    topo: &Topology,
    machine: &dyn Machine,
) -> Result<(i64, RunMeta, Vec<CellKey>, Lease)> {
    let here = machine.environment(topo, &tool()).hostname;
    let id = match which {
        Some(r) => store.resolve_run(r)?,
        None => store
            .latest_unfinished_run()?
            .context("no unfinished run to resume in this database")?,
    };
    let results = store.load_run(id)?;
    let meta = results.run;
    if meta.status == RunStatus::Finished {
        bail!("run {id} is already finished");
    }
    // The co-run and utilisation experiments plan cells `run` cannot measure.
    if let Some(suite @ ("corun" | "penalty" | "utilisation")) = meta.suite.as_deref() {
        bail!(
            "run {id} is an interrupted `{}` run, which `run --resume` cannot finish; measure it again with smtlab {}",
            suite,
            if suite == "utilisation" {
                "util"
            } else {
                suite
            }
        );
    }
    // Cells of one run must come from one machine, or its ratios mean nothing.
    if meta.topology.cpus != topo.cpus || meta.environment.hostname != here {
        bail!(
            "run {id} was measured on {} with CPUs {}; this is {} with CPUs {}: start a new run instead",
            meta.environment
                .hostname
                .as_deref()
                .unwrap_or("an unknown host"),
            meta.topology.cpus,
            here.as_deref().unwrap_or("an unknown host"),
            topo.cpus
        );
    }
    let lease = store.lease_run(id)?;
    let pending = store.pending_cells(id)?;
    store.reopen_run(id)?;
    Ok((id, meta, pending, lease))
}

/// Where a run starts: a new one created in `store` (`fresh`, labelled as asked), or the
/// one `--resume` names; its id, settings, cells still to measure and lease.
pub fn begin(
    store: &mut Store,
    fresh: Option<RunMeta>,
    args: &RunArgs,
    topo: &Topology,
    machine: &dyn Machine,
) -> Result<(i64, RunMeta, Vec<CellKey>, Lease)> {
    match fresh {
        Some(meta) => {
            let id = store.create_run(&meta)?;
            if let Some(label) = &args.label {
                store.set_run_label(id, Some(label))?;
            }
            let pending = meta.plan.clone();
            let lease = store.lease_run(id)?;
            Ok((id, meta, pending, lease))
        }
        None => {
            let which = args.resume.clone().flatten();
            resume(store, which.as_deref(), topo, machine)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_params_split_values_merge_keys_and_name_unknown_ones() {
        let benches = crate::settings::select(&["web-static".into(), "int-ops".into()]).unwrap();
        let p = |list: &[&str]| {
            given_params(
                &list.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                &benches,
            )
        };
        let got = p(&["server=event,threads", "server=nginx,event", "cmd=a\\,b"]).unwrap();
        assert_eq!(
            got,
            [
                (
                    "server".to_string(),
                    vec!["event".to_string(), "threads".into(), "nginx".into()]
                ),
                ("cmd".to_string(), vec!["a,b".to_string()]),
            ]
        );
        let e = p(&["nope=1"]).unwrap_err().to_string();
        assert!(e.contains("\"nope\"") && e.contains("server"), "{e}");
        assert!(
            p(&["server"])
                .unwrap_err()
                .to_string()
                .contains("KEY=VALUE")
        );
        assert!(
            p(&["server=event,"])
                .unwrap_err()
                .to_string()
                .contains("empty value")
        );
    }

    /// `run`'s arguments as parsed from `line`.
    fn run_args(line: &[&str]) -> RunArgs {
        use clap::Parser;
        let cli = crate::args::Cli::try_parse_from(["smtlab", "run"].iter().chain(line).copied())
            .unwrap();
        match cli.command {
            crate::args::Command::Run(a) => a,
            _ => unreachable!("a run command line"),
        }
    }

    #[test]
    fn a_16_core_smt_machine_runs_servers_on_half_its_cores_by_default() {
        let topo = smtlab_fixtures::build::intel(1, 16, 2);
        let host = crate::settings::Host::new(None).unwrap();
        let args = run_args(&[
            "--bench",
            "int-ops,web-static",
            "--param",
            "server=event,nginx",
        ]);
        let meta = new_run(&args, &topo, host.machine()).unwrap();
        let on = |bench: &str, server: Option<&str>| -> Vec<String> {
            meta.plan
                .iter()
                .filter(|k| {
                    k.benchmark == bench
                        && server
                            .is_none_or(|s| k.params.get("server").map(String::as_str) == Some(s))
                })
                .map(|k| k.placement.clone())
                .collect()
        };
        let whole = ["1c1t", "1c2t", "2c1t", "2c2t", "cores", "all"];
        assert_eq!(on("int-ops", None), whole);
        let half = [
            "1c1t",
            "1c2t",
            "2c1t",
            "2c2t",
            "half-cores-1t",
            "half-cores-2t",
        ];
        assert_eq!(on("web-static", Some("event")), half);
        assert_eq!(on("web-static", Some("nginx")), half);
        // Asked for by name, `all` is measured as asked (and skipped, with its reason).
        let args = run_args(&["--bench", "web-static", "--placements", "all"]);
        let meta = new_run(&args, &topo, host.machine()).unwrap();
        assert_eq!(meta.plan.len(), 1);
        assert_eq!(meta.plan[0].placement, "all");
    }

    #[test]
    fn smt_plan_takes_turns_per_group() {
        let key = |b: &str, p: &str| CellKey {
            benchmark: b.into(),
            params: Default::default(),
            conditions: Default::default(),
            placement: p.into(),
        };
        let plan = vec![key("a", "1c1t"), key("a", "2c1t"), key("b", "1c1t")];
        let got: Vec<(String, String, String)> =
            smt_plan(plan, &[smt::SmtState::Off, smt::SmtState::On])
                .into_iter()
                .map(|k| {
                    let state = smt::state_of(&k).name().to_string();
                    (k.benchmark, k.placement, state)
                })
                .collect();
        let want = [
            ("a", "1c1t", "off"),
            ("a", "2c1t", "off"),
            ("a", "1c1t", "on"),
            ("a", "2c1t", "on"),
            ("b", "1c1t", "off"),
            ("b", "1c1t", "on"),
        ];
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0.as_str(), g.1.as_str(), g.2.as_str()), w);
        }
    }

    #[test]
    fn resume_measures_as_the_stored_settings_say_and_old_runs_as_their_command_line() {
        let mut meta = crate::sink::finished_run(
            0,
            smtlab_model::Environment::default(),
            smtlab_fixtures::build::one_cpu_per_core(&[0, 1]),
            smtlab_model::RunConfig::default(),
            Vec::new(),
            Vec::new(),
        )
        .run;
        meta.command_line = ["smtlab", "run", "--no-interleave", "--repeat", "3"]
            .map(String::from)
            .to_vec();
        let args = run_args(&[]);
        let of = |meta: &RunMeta| {
            let m = measuring_of(meta, &args);
            (m.interleave, m.repeat)
        };
        // Stored before the settings were kept: the command line says them.
        assert_eq!(of(&meta), (false, 3));
        // Kept in the config: the config wins over whatever the command line says.
        meta.config.interleave = Some(true);
        meta.config.repeat = Some(2);
        assert_eq!(of(&meta), (true, 2));
        meta.command_line = vec!["smtlab".into(), "run".into()];
        meta.config.interleave = Some(false);
        assert_eq!(of(&meta), (false, 2));
    }
}
