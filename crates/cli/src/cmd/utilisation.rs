//! `smtlab util`: reported utilisation against capacity (paper 004 s7). Settings, then
//! the utilisation experiment ([`smtlab_runner::experiment::utilisation`]: an open-loop
//! load at shares of its measured maximum, interleaved) in each SMT state asked for,
//! under one [`SmtSwitch`] that puts the state found back however smtlab ends; each
//! step is saved as it is measured ([`crate::sink`]) in a run of suite `utilisation`.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use smtlab_control::SmtSwitch;
use smtlab_control::guard::Protection;
use smtlab_report::utilisation as view;
use smtlab_runner::experiment::ExperimentError;
use smtlab_runner::experiment::utilisation::{self as exp, Curve, state_label};

use super::{emit, json_text};
use crate::args::UtilArgs;
use crate::settings::{UtilSettings, util_settings};
use crate::sink::{INTERRUPTED_EXIT, Measuring, NewRun, Shown, StoreSink};

pub fn run(args: &UtilArgs) -> Result<ExitCode> {
    let UtilSettings {
        db,
        sysfs,
        states,
        topo0,
        cfg,
        notes,
    } = util_settings(args)?;
    let discover = || {
        smtlab_topology::discover(Path::new("/")).context("cannot read this machine's CPU topology")
    };
    for n in &notes {
        eprintln!("note: {n}");
    }
    let measuring = Measuring::new(cfg.clone(), args.json)?;
    let curve = Curve {
        steps: args.steps,
        step: Duration::from_millis(args.step_ms),
        job: Duration::from_micros(args.job_us),
    };
    let run = NewRun {
        suite: "utilisation",
        environment: crate::env::capture(&topo0),
        topology: topo0.clone(),
        config: cfg.clone(),
        notes: notes.clone(),
        plan: exp::plan(curve, &states, args.placement.as_deref(), &topo0),
    };
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
    // The stop flag ends the session and the switch restores the state found then; its
    // guardian restores it should smtlab be killed.
    let protection = Protection {
        guardian: true,
        signals: false,
    };
    let mut switch = match states.iter().any(Option::is_some) {
        true => Some(SmtSwitch::with_protection(sysfs.clone(), protection)?),
        false => None,
    };
    let mut enter = |state: exp::SmtState| {
        if let (Some(sw), Some(on)) = (switch.as_mut(), state) {
            sw.set(on).map_err(|e| {
                ExperimentError::Input(format!("cannot switch SMT {}: {e}", state_label(state)))
            })?;
        }
        discover().map_err(|e| ExperimentError::Input(format!("{e:#}")))
    };
    let mut started = |state, placed: &smtlab_model::ResolvedPlacement| {
        let line = format!(
            "SMT {}: open-loop load on {} (CPUs {:?}), {} steps of {} ms per rate, {} us jobs\n",
            state_label(state),
            placed.name,
            placed.cpus,
            args.samples,
            args.step_ms,
            args.job_us
        );
        (!args.json)
            .then(|| emit(&line))
            .transpose()
            .map(drop)
            .map_err(|e| ExperimentError::Input(format!("{e:#}")))
    };
    let measured = exp::measure_states(
        &measuring.engine(),
        curve,
        args.placement.as_deref(),
        &states,
        &mut enter,
        &mut started,
        &mut sink,
    );
    if let Some(sw) = switch.take() {
        sw.finish().context("cannot put the SMT state back")?;
    }
    let (ended, _) = measured?;
    let stopped = measuring.stopped(ended);
    let sink = sink.finish(stopped, args.db.as_deref())?;
    if stopped {
        return Ok(ExitCode::from(INTERRUPTED_EXIT));
    }
    let points = view::curve(&sink.cells);
    if args.json {
        emit(&json_text(
            &serde_json::json!({ "run": sink.run_id, "notes": notes, "curve": points }),
        )?)?;
    } else {
        emit(&view::curve_text(&points))?;
        emit(crate::render::corun::UTIL_FOOTER)?;
    }
    Ok(ExitCode::SUCCESS)
}
