//! `smtlab bench NAME`: one benchmark under one or more placements, with the ratio of
//! every placement to the first (the SMT yield when the first is `1c1t` and another is
//! `1c2t`). Settings ([`crate::settings::bench`]), then the cells in their SMT states
//! ([`smtlab_runner::experiment::smt::measure_groups`]), shown as they are measured and
//! summed up ([`crate::live::bench`]); with `--db`, stored as they are measured.

use std::process::ExitCode;

use anyhow::Result;
use smtlab_runner::experiment::{Engine, smt};
use smtlab_runner::machine::Machine;

use crate::args::BenchArgs;
use crate::live::bench::{BenchPrinter, summary};
use crate::settings::{self, unix_now_s};
use crate::sink::{StoreSink, measure_shown};

pub fn run(args: &BenchArgs, machine: &dyn Machine) -> Result<ExitCode> {
    // Everything is checked before anything is printed or measured.
    // The tables give way to JSON or Markdown on standard output.
    let text =
        crate::output::check_stdout_owner(args.json, args.markdown.export_markdown.as_deref())?;
    if let Some(db) = &args.db {
        smtlab_store::Store::check_target(db)?;
    }
    let s = settings::bench::bench(args, machine)?;
    crate::term::notes(
        s.notes.iter().cloned().chain(
            (!args.json)
                .then(|| smtlab_runner::disturb::steal_note(machine))
                .flatten(),
        ),
    );
    // The SMT states take turns per benchmark and parameter set, so a drift of the
    // machine's speed falls on both states rather than on one whole pass.
    let groups = smt::turns(s.groups(), &s.states);
    let plan = groups.iter().flatten().map(|c| c.key.clone()).collect();
    let run = settings::fresh_run("bench", machine, &s.topo, &s.cfg, s.notes.clone(), plan);
    let env = run.environment.clone();
    let started = unix_now_s();
    let mut printer = BenchPrinter::new(&s, args, text);
    let stop = settings::Stop::on_signals()?;
    let engine = Engine::new(machine, &s.cfg, s.counting.as_ref(), stop.flag())
        .measuring(smtlab_runner::plan::Measuring {
            interleave: args.interleave,
            repeat: args.repeat as usize,
            client_rule: crate::settings::client_rule(&args.client),
        })
        .sharing_at_start(&env.cpu_handoff);
    // With --db each cell is stored as it is measured (suite `bench`); the printer sees
    // it first, so a benchmark that fails ends the command before it is stored.
    let sink = match &args.db {
        Some(db) => StoreSink::lazy(db, run, |_| Ok(())),
        None => StoreSink::memory(|_| Ok(())),
    };
    let sink = measure_shown(&engine, &s.topo, groups, &mut printer, sink)?;
    // A stopped session's cells are shown as any others; what failed because of the
    // stop is not the workload's failure.
    let sink = match sink.settle(&stop, printer.finish(), false)? {
        Ok(k) => k,
        Err(code) => return Ok(code),
    };
    let n_cells = sink.cells.len();
    summary(s, args, text, sink, (started, env, stop.signalled()))?;
    Ok(stop.ended(n_cells))
}
