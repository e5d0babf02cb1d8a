//! One module per subcommand, each settings -> experiment -> sink or render, and none
//! importing another: what several need is in `settings`, `sink`, `live`, `output` or
//! `render`. This file only dispatches.

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::args::{Cli, Command};
use crate::output::emit;

mod advise;
mod agent;
mod bench;
mod compare;
mod completions;
mod corun;
mod counters;
mod exec;
mod fleet;
mod list;
mod load;
mod penalty;
mod placements;
mod predict;
mod push;
mod report;
mod run;
mod runs;
mod smt;
mod topo;
mod utilisation;

/// Runs the command; the exit code for a command that ended without an error (a run
/// stopped by Ctrl-C has its own).
pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    let ok = |r: Result<()>| r.map(|()| ExitCode::SUCCESS);
    crate::term::init(&cli.term);
    // Scratch directories of every kind that a killed smtlab left behind go now, not
    // only when the next cell of their kind makes one.
    smtlab_runner::scratch::sweep_stale(&std::env::temp_dir());
    // The one machine every command measures on, reads and switches.
    let host = crate::settings::Host::new(cli.fake_machine.as_deref())?;
    let machine = host.machine();
    // A command that starts processes or writes scratch directories and has no stop
    // flag of its own (the measuring commands have `settings::Stop` and end the cell
    // cleanly): on SIGINT, SIGTERM, SIGHUP or SIGQUIT its process trees are killed and
    // its scratch directories removed before it dies of the signal.
    if matches!(cli.command, Command::Load(_)) {
        smtlab_control::signals::clean_up_on_signals(smtlab_bench::process::clean_up)
            .context("cannot install the signal handlers")?;
    }
    let result = match cli.command {
        Command::Topo(a) => ok(topo::run(&a, machine)),
        Command::Placements(a) => placements::run(&a, machine),
        Command::List(a) => ok(list::run(&a)),
        Command::Bench(a) => bench::run(&a, machine),
        Command::Run(a) => run::run(&a, machine),
        Command::Runs(a) => ok(runs::runs(&a)),
        Command::Report(a) => ok(report::report(&a)),
        Command::Compare(a) => ok(compare::compare(&a)),
        Command::Exec(a) => exec::run(&a, machine),
        Command::Smt(a) => ok(smt::run(&a, machine)),
        Command::Load(a) => ok(load::run(&a)),
        Command::Agent(a) => ok(agent::run(&a)),
        Command::Completions(a) => ok(emit(&completions::completion_script(a.shell))),
        Command::Man => ok(completions::man_page().and_then(|page| emit(&page))),
        Command::Corun(a) => corun::run(&a, machine),
        Command::Penalty(a) => penalty::run(&a, machine),
        Command::Predict(a) => predict::run(&a, machine),
        Command::Util(a) => utilisation::run(&a, machine),
        Command::Push(a) => ok(push::run(&a)),
        Command::Advise(a) => advise::run(&a, machine),
        Command::Fleet(a) => ok(fleet::run(&a)),
        Command::Counters(a) => ok(counters::run(&a)),
    };
    // What was killed because a command or server left it running (a daemon).
    crate::term::notes(smtlab_bench::process::take_notes());
    result
}
