//! `smtlab exec -- CMD ARGS`: the user's own program under each placement, repeated,
//! with the SMT yield and a plain-language verdict; stored as a run (suite `exec`), each
//! placement as it is measured, so `report` and `compare` work on it.
//!
//! The command is a benchmark like any other (`smtlab_runner::exec::CommandBench`, which
//! explains how a run is pinned, watched, timed and cleaned up), measured by the same
//! session as `bench`: `--warmup` discarded runs, then `--reps` measured runs per
//! placement, counters around the measured runs only.
//!
//! The yield is the one verdict of smtlab ([`smtlab_model::verdict::verdict`]): the
//! ratio of the mean throughputs (with `--throughput`) or of the mean wall times turned
//! over (the throughput over all runs; per-run rates are never averaged), with a
//! Fieller 95% interval, so above 1 always means faster and `bench`, `report` (HTML
//! included), the JSON's `speedups`, the Markdown table and `compare` print the same
//! figure and sign for the same pair. The verdict lines are
//! [`smtlab_report::text`]'s, which `bench` prints too, in the words `advise` uses.

use std::process::ExitCode;

use anyhow::Result;
use smtlab_model::CellKey;
use smtlab_runner::experiment::{Engine, smt};
use smtlab_runner::machine::Machine;

use crate::args::ExecArgs;
use crate::live::exec::{ExecPrinter, summary};
use crate::output::emit;
use crate::settings;
use crate::sink::{StoreSink, measure_shown};

pub fn run(args: &ExecArgs, machine: &dyn Machine) -> Result<ExitCode> {
    // JSON or Markdown on standard output take the place of the table and verdict.
    let text =
        crate::output::check_stdout_owner(args.json, args.markdown.export_markdown.as_deref())?;
    let s = settings::exec::exec(args, machine)?;
    crate::term::notes(
        s.notes
            .iter()
            .take(1)
            .cloned()
            .chain(s.counting.iter().flat_map(|c| c.missing_lines())),
    );
    if text {
        emit(&crate::live::exec::header(&s, args))?;
    }
    // Each placement is a group of its own: measured one after the other, and per
    // placement the SMT states take turns.
    let groups = smt::turns(s.groups(args.runs.warmup as usize), &s.states);
    let stop = settings::Stop::on_signals()?;
    // One placement after the other, as the runs of a command are usually long; one
    // round, and a command has no client side (the engine's defaults).
    let mut engine = Engine::new(machine, &s.config, s.counting.as_ref(), stop.flag());
    engine.how.interleave = false;
    let mut printer = ExecPrinter::new(&s, args, text);
    // Each cell is stored as it is measured (suite `exec`, the run created with its first
    // cell); the printer sees it first, so a failed run ends the command before it is stored.
    let plan: Vec<CellKey> = groups.iter().flatten().map(|c| c.key.clone()).collect();
    let mut notes = s.notes.clone();
    if plan.len() == 1 {
        notes.push("one placement only: no yield to compute".into());
    }
    let run = settings::fresh_run("exec", machine, &s.topo, &s.config, notes, plan);
    let engine = engine.sharing_at_start(&run.environment.cpu_handoff);
    let sink = StoreSink::lazy(&s.db, run, |_| Ok(()));
    let sink = measure_shown(&engine, &s.topo, groups, &mut printer, sink)?;
    // A run the stop made fail is not the command's failure; the cells measured before
    // the stop are shown and stored (the run marked interrupted).
    let sink = match sink.settle(&stop, printer.finish(), true)? {
        Ok(k) => k,
        Err(code) => return Ok(code),
    };
    let n_cells = sink.cells.len();
    summary(&s, args, text, sink, stop.signalled())?;
    Ok(stop.ended(n_cells))
}
