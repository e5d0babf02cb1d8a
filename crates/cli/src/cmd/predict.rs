//! `smtlab predict`: co-run interference predicted from rulers. Settings (those of
//! `corun`), then the plan of [`smtlab_runner::experiment::predict`] (profiles against
//! the rulers, training and held-out pairs), its cost stated first (`--dry-run` stops
//! there), then the co-run groups measured through the session, each cell saved as it
//! is measured in a run of suite `predict`: the profiles and held-out pairs first, then
//! the training pairs chosen from the profiles' figures; and the analysis of
//! [`smtlab_report::predict`]: profiles, model, predictions, validation; `--json` prints
//! it as `smtlab.profile/1`.

use std::process::ExitCode;

use anyhow::Result;
use smtlab_runner::experiment::corun as corun_exp;
use smtlab_runner::experiment::predict as exp;
use smtlab_runner::machine::Machine;

use crate::args::PredictArgs;
use crate::output::{emit, json_text};
use crate::render::corun::MatrixLines;
use crate::render::predict as text;
use crate::settings::corun_settings;
use crate::sink::{Shown, measure_corun_then};

pub fn run(args: &PredictArgs, machine: &dyn Machine) -> Result<ExitCode> {
    let w = &args.workloads;
    let workloads = corun_exp::matrix_workloads(&w.names, &w.cmds, &w.common.params, true)?;
    let mut s = corun_settings(&w.common, machine)?;
    let c = &args.client;
    if workloads.iter().any(corun_exp::Workload::is_server) {
        let rule = crate::settings::client_rule(c);
        s.client_rule = exp::client_rule(rule, &s.pair, &s.topo)?;
    } else if c.client_cpus.is_some() || c.client_siblings || !c.client_hosts.is_empty() {
        s.notes.push(
            "the --client-* options place a server workload's load; no workload here is \
             a server, so they are not used"
                .into(),
        );
    }
    let (mut rulers, ruler_notes) = exp::rulers(&args.rulers, &s.topo, &s.pair, &s.forms)?;
    if let smtlab_placement::ClientRule::Cpus { cpus, .. } = &s.client_rule {
        rulers.iter_mut().for_each(|r| r.keep_off(cpus));
    }
    s.notes.extend(ruler_notes);
    let choice = exp::Choice {
        train: args.train.map(|t| t as usize),
        validate: args.validate as usize,
        seed: args.seed,
    };
    let mut plan = exp::plan(&workloads, &rulers, &s.forms, &s.pair, &s.topo, choice)?;
    crate::term::notes(&s.notes);
    let json = w.common.json;
    let time_ns = corun_exp::plan_time(plan.counted(), &s.topo, &s.cfg);
    if args.dry_run {
        emit(&text::cost(&plan.cost, &s.forms, time_ns))?;
        emit(&text::planned_rulers(&rulers))?;
        return Ok(ExitCode::SUCCESS);
    }
    if !json {
        emit(&text::cost(&plan.cost, &s.forms, time_ns))?;
    }
    let candidates: Vec<_> = plan.candidates.iter().map(|c| c.keys.clone()).collect();
    let mut lines = MatrixLines::named(text::cell_names(&plan.keys, &candidates));
    let printer = |shown: Shown<'_>| match json {
        true => Ok(()),
        false => emit(&lines.next(shown)),
    };
    // The training pairs are chosen once the profiles are measured.
    let first = std::mem::take(&mut plan.groups);
    let train = |cells: &[smtlab_model::CellRecord]| {
        let pairs: Vec<(String, String)> = candidates
            .iter()
            .map(|k| (k.a.clone(), k.b.clone()))
            .collect();
        let chosen = smtlab_report::predict::training_choice(&plan.keys, cells, &pairs, plan.train);
        plan.train_on(&chosen)
    };
    let (sink, stopped) =
        measure_corun_then(machine, &s, &w.common, "predict", &first, train, printer)?;
    if let Some(code) = stopped {
        return Ok(code);
    }
    let doc = smtlab_report::predict::analyse(&plan.keys, &sink.cells, sink.run_id);
    if json {
        emit(&json_text(&doc)?)?;
    } else {
        emit(&text::summary(&doc))?;
    }
    Ok(ExitCode::SUCCESS)
}
