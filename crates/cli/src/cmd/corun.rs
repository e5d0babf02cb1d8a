//! `smtlab corun` (the symbiosis matrix) and `smtlab penalty` (the single-thread
//! penalty): settings, then the co-run experiment
//! ([`smtlab_runner::experiment::corun`]) through the session, each cell saved as it is
//! measured ([`crate::sink`]) in a run of suite `corun` or `penalty`, so `report` and
//! `compare` work on them.

use std::process::ExitCode;

use anyhow::{Result, bail};
use serde::Serialize;
use smtlab_report::corun as view;
use smtlab_runner::experiment::corun::{self as exp, CorunPlan, Workload};
use smtlab_runner::machine::Machine;

use super::{emit, json_text};
use crate::args::{CommonArgs, CorunArgs, PenaltyArgs};
use crate::render::corun as text;
use crate::settings::{CorunSettings, corun_settings};
use crate::sink::{INTERRUPTED_EXIT, Measuring, NewRun, Shown, StoreSink};

/// Measures `plan` into a new run of `suite`, each cell shown by `printer`; the sink
/// with every cell, and whether a signal stopped it.
fn measure<'p>(
    machine: &dyn Machine,
    s: &CorunSettings,
    common: &CommonArgs,
    suite: &'static str,
    plan: &CorunPlan,
    printer: impl FnMut(Shown<'_>) -> Result<()> + 'p,
) -> Result<(StoreSink<'p>, bool)> {
    let measuring = Measuring::new(machine, s.cfg.clone(), common.json)?;
    let db = common.db.clone().unwrap_or_else(smtlab_store::default_path);
    let run = NewRun {
        suite,
        environment: machine.environment(&s.topo, &crate::settings::tool()),
        topology: s.topo.clone(),
        config: s.cfg.clone(),
        notes: s.notes.clone(),
        plan: plan.iter().flatten().map(|c| c.key.clone()).collect(),
    };
    let mut sink = StoreSink::begin(&db, run, printer)?;
    let ended = exp::measure(&measuring.engine(), &s.topo, plan, &mut sink);
    let stopped = measuring.stopped(ended);
    Ok((sink.finish(stopped, common.db.as_deref())?, stopped))
}

#[derive(Serialize)]
struct MatrixJson<'a> {
    run: i64,
    notes: &'a [String],
    matrix: &'a [view::Entry],
}

pub fn run_corun(args: &CorunArgs, machine: &dyn Machine) -> Result<ExitCode> {
    let workloads = exp::matrix_workloads(&args.names, &args.cmds, &args.common.params)?;
    let s = corun_settings(&args.common, machine)?;
    for n in &s.notes {
        eprintln!("note: {n}");
    }
    let json = args.common.json;
    if !json {
        emit(&format!(
            "corun: {} workloads, each on CPU {} alone and next to each other one ({}); slowdown = alone / co-run for rates, co-run / alone for times (above 1: slower)\n",
            workloads.len(),
            s.pair.cpu,
            text::forms_text(&s.forms)
        ))?;
    }
    let plan = exp::matrix_plan(&workloads, &s.forms, &s.pair, &s.topo);
    let mut lines = text::MatrixLines::default();
    let printer = |shown: Shown<'_>| match json {
        true => Ok(()),
        false => emit(&lines.next(shown)),
    };
    let (sink, stopped) = measure(machine, &s, &args.common, "corun", &plan, printer)?;
    if stopped {
        return Ok(ExitCode::from(INTERRUPTED_EXIT));
    }
    if json {
        emit(&json_text(&MatrixJson {
            run: sink.run_id,
            notes: &s.notes,
            matrix: &view::matrix(&sink.cells),
        })?)?;
    } else {
        emit(&text::matrix_tables(&sink.cells, &s.forms))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct PenaltyJson<'a> {
    run: i64,
    notes: &'a [String],
    penalties: &'a [view::Penalty],
}

pub fn run_penalty(args: &PenaltyArgs, machine: &dyn Machine) -> Result<ExitCode> {
    let (task, hogs) = exp::penalty_workloads(
        args.task.as_deref(),
        args.cmd.as_deref(),
        &args.hogs,
        &args.common.params,
    )?;
    if !(args.run_ms.is_finite() && args.run_ms > 0.0 && args.run_ms <= 10_000.0) {
        bail!(
            "--run-ms {}: expected a number of milliseconds in (0, 10000]",
            args.run_ms
        );
    }
    let mut s = corun_settings(&args.common, machine)?;
    if let Err(why) = &s.pair.sibling {
        s.notes.retain(|n| !n.starts_with("sibling form"));
        s.notes.push(format!(
            "single-thread penalty not measured ({why}); shown instead: the task alone and next to each hog on another core"
        ));
    }
    s.cfg.min_samples = args.samples as usize;
    s.cfg.max_samples = args.samples as usize;
    for n in &s.notes {
        eprintln!("note: {n}");
    }
    let fixed = match &args.cmd {
        Some(_) => 1,
        None => exp::calibrate_task(&task, (args.run_ms * 1e6) as u64, &s.pair, &s.topo)?,
    };
    let json = args.common.json;
    if !json {
        emit(&format!(
            "penalty: {} ({} iterations per run) on CPU {}, {} runs per cell, alone and next to {} ({})\n",
            task.name(),
            fixed,
            s.pair.cpu,
            args.samples,
            hogs.iter()
                .map(Workload::name)
                .collect::<Vec<_>>()
                .join(", "),
            text::forms_text(&s.forms)
        ))?;
    }
    let plan = exp::penalty_plan(&task, fixed, &hogs, &s.forms, &s.pair, &s.topo);
    let printer = |shown: Shown<'_>| match shown {
        Shown::Skipped(k) if !json => emit(&text::skipped_cell(k, false)),
        _ => Ok(()),
    };
    let (sink, stopped) = measure(machine, &s, &args.common, "penalty", &plan, printer)?;
    if stopped {
        return Ok(ExitCode::from(INTERRUPTED_EXIT));
    }
    let pen = view::penalties(&sink.cells, &task.name());
    if json {
        emit(&json_text(&PenaltyJson {
            run: sink.run_id,
            notes: &s.notes,
            penalties: &pen,
        })?)?;
    } else {
        emit(&text::penalty_table(&pen))?;
    }
    Ok(ExitCode::SUCCESS)
}
