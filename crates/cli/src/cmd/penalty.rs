//! `smtlab penalty`: the single-thread penalty, a fixed piece of work alone and next to
//! each hog. Settings, then the co-run experiment
//! ([`smtlab_runner::experiment::corun`]) through the session, each cell saved as it is
//! measured ([`crate::sink`]) in a run of suite `penalty`.

use std::process::ExitCode;

use anyhow::Result;
use serde::Serialize;
use smtlab_report::corun as view;
use smtlab_runner::experiment::corun as exp;
use smtlab_runner::machine::Machine;

use crate::args::PenaltyArgs;
use crate::output::{emit, json_text};
use crate::render::corun as text;
use crate::settings::penalty_settings;
use crate::sink::{Shown, measure_corun};

#[derive(Serialize)]
struct PenaltyJson<'a> {
    run: i64,
    notes: &'a [String],
    penalties: &'a [view::Penalty],
}

pub fn run(args: &PenaltyArgs, machine: &dyn Machine) -> Result<ExitCode> {
    let (s, task, hogs) = penalty_settings(args, machine)?;
    crate::term::notes(&s.notes);
    let fixed = match &args.cmd {
        Some(_) => 1,
        None => exp::calibrate_task(&task, (args.run_ms * 1e6) as u64, &s.pair, &s.topo)?,
    };
    let json = args.common.json;
    if !json {
        emit(&text::penalty_header(&task, fixed, &hogs, &s, args.samples))?;
    }
    let plan = exp::penalty_plan(&task, fixed, &hogs, &s.forms, &s.pair, &s.topo);
    let printer = |shown: Shown<'_>| match shown {
        Shown::Skipped(k) if !json => emit(&text::skipped_cell(k, false)),
        _ => Ok(()),
    };
    let (sink, stopped) = measure_corun(machine, &s, &args.common, "penalty", &plan, printer)?;
    if let Some(code) = stopped {
        return Ok(code);
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
