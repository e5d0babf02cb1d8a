//! `smtlab advise WORKLOAD` / `smtlab advise -- CMD`: should SMT be on for this
//! workload on this machine? Settings, then the advice experiment
//! ([`smtlab_runner::experiment::advise`]) through the session, each cell saved as it is
//! measured ([`crate::sink`], a run of suite `advise`), then the decision
//! ([`smtlab_report::advice`]) rendered as text, JSON or Markdown.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use smtlab_model::keys::Form;
use smtlab_model::{RunConfig, Topology};
use smtlab_report::advice;
use smtlab_runner::exec::{CommandBench, ExecValue};
use smtlab_runner::experiment::advise::{self as exp, PreparedCommand, Subject};
use smtlab_runner::experiment::corun::{self as corun_exp, Workload};
use smtlab_runner::experiment::utilisation as util;
use smtlab_runner::session::{CellPlan, Ended};

use super::emit;
use crate::args::AdviseArgs;
use crate::render;
use crate::sink::{INTERRUPTED_EXIT, Measuring, NewRun, Shown, StoreSink};

/// Length of one piece of work of the single-thread cost, and how many per cell.
const PENALTY_RUN_NS: u64 = 20_000_000;
const PENALTY_SAMPLES: usize = 10;

/// `--throughput`: a valid pattern with a capture group, else a one-line error.
fn throughput_regex(pattern: &str) -> Result<regex::Regex> {
    let re = regex::Regex::new(pattern).map_err(|e| {
        let text = e.to_string();
        let why = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("error: "))
            .unwrap_or("invalid")
            .to_string();
        anyhow::anyhow!("--throughput {pattern:?} is not a valid regular expression: {why}")
    })?;
    if re.captures_len() < 2 {
        bail!("--throughput {pattern:?} has no capture group: put parentheses around the number");
    }
    Ok(re)
}

/// The subject and the settings its cells are measured with.
fn subject(args: &AdviseArgs) -> Result<(Subject, RunConfig, Option<usize>)> {
    if let Some(name) = &args.workload {
        let mut params = args.params.clone();
        if let Some(slo) = &args.slo {
            let declares = smtlab_runner::catalog::find(name).is_some_and(|b| {
                b.info()
                    .params
                    .iter()
                    .any(|p| p.name == smtlab_report::advice::SLO_PARAM)
            });
            if !declares {
                bail!(
                    "--slo {slo}: {name} is not measured at a latency target; web-slo is (smtlab advise web-slo --slo {slo})"
                );
            }
            smtlab_model::slo::Slo::parse(slo).map_err(|e| anyhow::anyhow!("--slo {e}"))?;
            params.push(format!("{}={slo}", smtlab_report::advice::SLO_PARAM));
        }
        let s = Subject::catalog(name, &params, args.quick)?;
        let cfg = if args.quick {
            RunConfig::quick()
        } else {
            RunConfig::default()
        };
        return Ok((s, cfg, None));
    }
    let argv = &args.command;
    if argv.is_empty() || argv[0].is_empty() {
        bail!("no workload given: smtlab advise WORKLOAD, or smtlab advise [OPTIONS] -- CMD ARGS");
    }
    if !args.params.is_empty() {
        bail!("--param is for catalog workloads; your command takes its own arguments");
    }
    if args.slo.is_some() {
        bail!("--slo is for workloads measured at a latency target (web-slo), not a command");
    }
    let value = match &args.throughput {
        Some(p) => ExecValue::Throughput(throughput_regex(p)?),
        None => ExecValue::WallTime,
    };
    let reps = args.reps as usize;
    let command = CommandBench {
        argv: argv.clone(),
        value,
        timeout: args.timeout,
        warmup_runs: args.warmup as usize,
        reps,
    };
    let cfg = RunConfig {
        min_samples: reps,
        max_samples: reps,
        warmup_ns: 0,
        // Every run is taken whatever it lasts: the budget is the user's (--timeout).
        max_cell_ns: u64::MAX,
        ..RunConfig::default()
    };
    let s = Subject::Command(PreparedCommand {
        command,
        prepare: args.prepare.clone(),
    });
    Ok((s, cfg, Some(args.warmup as usize)))
}

pub fn run(args: &AdviseArgs) -> Result<ExitCode> {
    super::check_stdout_owner(args.json, args.export_markdown.as_deref())?;
    let text = !args.json
        && args
            .export_markdown
            .as_ref()
            .is_none_or(|p| p.as_os_str() != "-");
    let (subject, mut cfg, warmup) = subject(args)?;
    smtlab_runner::config::validate(&cfg)?;
    cfg.known_overheads = Some(smtlab_runner::measure_overheads(&smtlab_runner::Monotonic));
    let topo = smtlab_topology::discover(Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    let db = super::db_path(&args.db);
    if db.exists() {
        drop(smtlab_store::Store::open_existing(&db)?);
    }
    let (mut specs, no_smt) = exp::placements(&topo);
    let mut notes: Vec<String> = no_smt.into_iter().collect();

    let sysfs = smtlab_control::Sysfs::system();
    let resolved: Vec<_> = specs
        .iter()
        .filter_map(|s| {
            smtlab_placement::parse(s)
                .and_then(|p| smtlab_placement::resolve(&p, &topo))
                .ok()
        })
        .collect();
    let states = crate::settings::switchable_states(&args.smt, &resolved, &topo, &sysfs)?;
    if !states.is_empty() {
        // SMT can be switched (on, or off as found): the SMT placements, and the whole
        // machine in both states, which is the comparison that matters.
        specs = ["1c1t", "1c2t", "2c1t", "all"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        notes.clear();
    }
    let pair = smtlab_runner::corun::cpu_pair(&topo).map_err(anyhow::Error::msg)?;
    let co_runs = args.penalty || args.partners;
    let sibling = match (&pair.sibling, co_runs) {
        (Ok(cpu), true) => Some(*cpu),
        (Err(why), true) => {
            let what = if args.penalty {
                "single-thread cost"
            } else {
                "partners"
            };
            // One line for everything this machine cannot do.
            match notes.first_mut() {
                Some(n) => n.push_str(&format!("; {what} not measured (no SMT sibling)")),
                None => notes.push(format!("{what} not measured: {why}")),
            }
            None
        }
        (_, false) => None,
    };
    for n in &notes {
        crate::term::note_fit(&format!("note: {n}"));
    }

    let group = exp::throughput_group(&subject, &specs, &topo, warmup);
    let penalty = match sibling {
        Some(cpu) if args.partners => {
            let task = subject.penalty_task()?;
            let partners = exp::default_partners()?;
            Some(exp::partner_plan(&task, &partners, cpu, &pair, &topo))
        }
        Some(cpu) => Some(penalty_plan(&subject, cpu, &pair, &topo)?),
        None => None,
    };
    let mut plan: Vec<smtlab_model::CellKey> = Vec::new();
    let turns: Vec<Option<bool>> = match states.is_empty() {
        true => vec![None],
        false => states.iter().map(|&on| Some(on)).collect(),
    };
    for on in turns {
        for c in &group {
            let mut k = c.key.clone();
            if let Some(on) = on {
                k.params.insert(
                    crate::settings::SMT_KEY.into(),
                    if on { "on" } else { "off" }.into(),
                );
            }
            plan.push(k);
        }
    }
    if let Some(p) = &penalty {
        plan.extend(p.iter().flatten().map(|c| c.key.clone()));
    }
    if args.headroom {
        plan.extend(util::plan(headroom_curve(args.quick), &[None], None, &topo));
    }

    if text {
        emit(&render::table::wrap(
            &format!(
                "advise {}: {} interleaved{}{}",
                subject.name(),
                specs.join(", "),
                if states.is_empty() {
                    ""
                } else {
                    ", with SMT off and on"
                },
                match (&penalty, args.partners) {
                    (Some(_), true) => "; then the workload beside each partner on its sibling",
                    (Some(_), false) => "; then the single-thread cost next to busy siblings",
                    (None, _) => "",
                }
            ),
            render::table::Layout::term(),
        ))?;
        emit(&render::bench::header_line(render::table::Layout::term()))?;
    }
    let mut measuring = Measuring::new(cfg.clone(), args.json)?;
    let run = NewRun {
        suite: "advise",
        environment: crate::env::capture(&topo),
        topology: topo.clone(),
        config: cfg.clone(),
        notes: notes.clone(),
        plan,
    };
    let command = matches!(subject, Subject::Command(_));
    let printer = |shown: Shown<'_>| {
        if !text {
            return Ok(());
        }
        match shown {
            Shown::Measured(c) if c.params.contains_key(smtlab_model::keys::RATE_PARAM) => {
                emit(&format!(
                    "headroom step {}: {} {}\n",
                    c.params[smtlab_model::keys::RATE_PARAM],
                    smtlab_report::fmt::num(c.result.summary.mean),
                    c.unit
                ))
            }
            Shown::Measured(c) if smtlab_report::corun::form_of(c).is_none() => {
                emit(&render::bench::row(c, None, render::table::Layout::term()))
            }
            Shown::Measured(_) => Ok(()),
            Shown::Skipped(s) => emit(&render::table::wrap(
                &format!("  {}: skipped: {}", s.key.placement, s.reason),
                render::table::Layout::term(),
            )),
        }
    };
    let mut sink = StoreSink::begin(&db, run, printer)?;
    let mut ended = if states.is_empty() {
        exp::measure_throughput(&measuring.engine(), &topo, group, &mut sink)
    } else {
        let switch = smtlab_control::SmtSwitch::new(sysfs)?;
        crate::settings::smt_turns(switch, &[()], &states, |_, on| {
            let topo_now = smtlab_topology::discover(Path::new("/"))
                .context("cannot read the CPU topology after switching SMT")?;
            let cells = group
                .iter()
                .map(|c| crate::settings::smt_cell(c, on, &topo_now))
                .collect::<Result<Vec<CellPlan<'_>>>>()?;
            Ok(exp::measure_throughput(
                &measuring.engine(),
                &topo_now,
                cells,
                &mut sink,
            ))
        })?
    };
    if let (Ended::Complete, Some(plan)) = (ended, &penalty) {
        if args.penalty {
            // Every sample of the cost is the same fixed piece of work: a fixed count.
            measuring.cfg.min_samples = PENALTY_SAMPLES;
            measuring.cfg.max_samples = PENALTY_SAMPLES;
        }
        ended = corun_exp::measure(&measuring.engine(), &topo, plan, &mut sink);
    }
    if let (Ended::Complete, true) = (ended, args.headroom) {
        ended = measure_headroom(&mut measuring, &topo, args.quick, &mut sink)?;
    }
    let stopped = measuring.stopped(ended);
    if command && let Some(s) = sink.skipped.iter().find(|s| s.reason.contains("exec")) {
        let reason = s.reason.clone();
        let _ = sink.finish(false, args.db.db.as_deref());
        bail!("{}", reason.strip_prefix("exec: ").unwrap_or(&reason));
    }
    let sink = sink.finish(stopped, args.db.db.as_deref())?;
    if stopped {
        return Ok(ExitCode::from(INTERRUPTED_EXIT));
    }
    let smt = topo.smt_visible() || !states.is_empty();
    let answers: Vec<advice::Advice> = advice::evidence(&sink.cells, smt)
        .iter()
        .map(advice::decide)
        .collect();
    if answers.is_empty() {
        bail!("nothing measured to advise on: every placement was skipped");
    }
    if let Some(path) = &args.export_markdown {
        let md = advice::markdown(&answers);
        if path.as_os_str() == "-" {
            emit(&md)?;
        } else {
            std::fs::write(path, md).with_context(|| format!("cannot write {}", path.display()))?;
            crate::term::note(&format!("wrote {}", path.display()));
        }
    }
    if args.json {
        emit(&advice::json(sink.run_id, &notes, &answers))?;
    } else if text {
        emit(&render::advice::summary(
            &answers,
            render::table::Layout::term(),
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The single-thread cost's plan: the workload, one thread, alone and next to each
/// default hog on its sibling `cpu`.
fn penalty_plan(
    subject: &Subject,
    cpu: u32,
    pair: &smtlab_runner::corun::CpuPair,
    topo: &Topology,
) -> Result<corun_exp::CorunPlan> {
    let task = subject.penalty_task()?;
    let hogs = corun_exp::DEFAULT_HOGS
        .iter()
        .map(|h| Workload::catalog(h, &[], &[("threads", "1")]))
        .collect::<Result<Vec<_>, _>>()?;
    let fixed = match subject {
        Subject::Command(_) => 1,
        Subject::Catalog(_) => corun_exp::calibrate_task(&task, PENALTY_RUN_NS, pair, topo)?,
    };
    Ok(corun_exp::penalty_plan(
        &task,
        fixed,
        &hogs,
        &[(Form::Sibling, cpu)],
        pair,
        topo,
    ))
}

/// The headroom's curve: four steps (25 to 100% of the maximum), half a second each (a
/// fifth in `--quick`), 200 us jobs.
fn headroom_curve(quick: bool) -> util::Curve {
    util::Curve {
        steps: 4,
        step: std::time::Duration::from_millis(if quick { 200 } else { 500 }),
        job: std::time::Duration::from_micros(200),
    }
}

/// Measures the headroom's curve in the state found, on `util`'s default placement,
/// three steps per rate.
fn measure_headroom(
    measuring: &mut Measuring,
    topo: &Topology,
    quick: bool,
    sink: &mut StoreSink<'_>,
) -> Result<Ended> {
    measuring.cfg.min_samples = 3;
    measuring.cfg.max_samples = 3;
    measuring.cfg.warmup_ns = 0;
    let (spec, placement) = util::placement(None, topo)?;
    Ok(util::measure_curve(
        &measuring.engine(),
        headroom_curve(quick),
        util::state_label(None),
        topo,
        (&spec, &placement),
        sink,
    )?)
}
