//! `smtlab corun`: the symbiosis matrix. Settings, then the co-run experiment
//! ([`smtlab_runner::experiment::corun`]) through the session, each cell saved as it is
//! measured ([`crate::sink`]) in a run of suite `corun`, so `report` and `compare` work
//! on it.

use std::process::ExitCode;

use anyhow::Result;
use serde::Serialize;
use smtlab_report::corun as view;
use smtlab_runner::experiment::corun as exp;
use smtlab_runner::machine::Machine;

use crate::args::CorunArgs;
use crate::output::{emit, json_text};
use crate::render::corun as text;
use crate::settings::corun_settings;
use crate::sink::{Shown, measure_corun};

#[derive(Serialize)]
struct MatrixJson<'a> {
    run: i64,
    notes: &'a [String],
    matrix: &'a [view::Entry],
}

pub fn run(args: &CorunArgs, machine: &dyn Machine) -> Result<ExitCode> {
    let workloads = exp::matrix_workloads(&args.names, &args.cmds, &args.common.params, false)?;
    let s = corun_settings(&args.common, machine)?;
    crate::term::notes(&s.notes);
    let json = args.common.json;
    let plan = exp::matrix_plan(&workloads, &s.forms, &s.pair, &s.topo);
    if !json {
        let cells = plan.iter().map(Vec::len).sum();
        let time_ns = exp::plan_time(&plan, &s.topo, &s.cfg);
        let header = text::corun_header(workloads.len(), s.pair.cpu, &s.forms, cells, time_ns);
        emit(&header)?;
    }
    let mut lines = text::MatrixLines::default();
    let printer = |shown: Shown<'_>| match json {
        true => Ok(()),
        false => emit(&lines.next(shown)),
    };
    let (sink, stopped) = measure_corun(machine, &s, &args.common, "corun", &plan, printer)?;
    if let Some(code) = stopped {
        return Ok(code);
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
