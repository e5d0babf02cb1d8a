//! `smtlab util`: reported utilisation against capacity (paper 004 s7). Settings, then
//! the utilisation experiment ([`smtlab_runner::experiment::utilisation`]: an open-loop
//! load at shares of its measured maximum, interleaved) in each SMT state asked for,
//! switched by the experiment, which puts the state found back however smtlab ends; each
//! step is saved as it is measured ([`crate::sink`]) in a run of suite `utilisation`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use smtlab_report::utilisation as view;
use smtlab_runner::experiment::ExperimentError;
use smtlab_runner::experiment::utilisation::{self as exp, Curve};
use smtlab_runner::machine::Machine;

use crate::args::UtilArgs;
use crate::output::{emit, json_text};
use crate::settings::{UtilSettings, fresh_run, util_settings};
use crate::sink::{MeasuringSetup, Shown, StoreSink};

pub fn run(args: &UtilArgs, machine: &dyn Machine) -> Result<ExitCode> {
    let UtilSettings {
        db,
        states,
        topo0,
        cfg,
        notes,
    } = util_settings(args, machine)?;
    crate::term::notes(&notes);
    let mut measuring = MeasuringSetup::new(machine, cfg.clone(), args.json)?;
    let curve = Curve {
        steps: args.steps,
        step: Duration::from_millis(args.step_ms),
        job: Duration::from_micros(args.job_us),
    };
    let plan = exp::plan(curve, &states, args.placement.as_deref(), &topo0);
    let run = fresh_run("utilisation", machine, &topo0, &cfg, notes.clone(), plan);
    measuring.handoff_at_start = run.environment.cpu_handoff.clone();
    let mut sink = StoreSink::begin(&db, run, |shown| match shown {
        Shown::Skipped(s) => Err(anyhow::anyhow!(
            "the step at {}: {}",
            s.key
                .conditions
                .rate
                .map_or("?".to_string(), |r| r.to_string()),
            s.reason
        )),
        Shown::Measured(_) => Ok(()),
    })?;
    let mut started = |state, placed: &smtlab_model::ResolvedPlacement| {
        let line = crate::render::corun::util_state_line(state, placed, args);
        (!args.json)
            .then(|| emit(&line))
            .transpose()
            .map(drop)
            .map_err(|e| ExperimentError::Input(format!("{e:#}")))
    };
    let ended = exp::measure_states(
        &measuring.engine(),
        curve,
        args.placement.as_deref(),
        &topo0,
        &states,
        &mut started,
        &mut sink,
    )?;
    let stopped = measuring.stopped(ended);
    let sink = sink.finish(stopped.is_some(), args.db.as_deref())?;
    if let Some(code) = stopped {
        return Ok(code);
    }
    let points = view::curve(&sink.cells);
    if args.json {
        emit(&json_text(
            &serde_json::json!({ "run": sink.run_id, "notes": notes, "curve": points }),
        )?)?;
    } else {
        emit(&view::curve_text(&points))?;
        emit(&crate::render::corun::util_footer())?;
    }
    Ok(ExitCode::SUCCESS)
}
