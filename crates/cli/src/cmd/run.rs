//! `smtlab run`: a whole matrix of cells (benchmarks x parameters x placements), saved
//! to the results database cell by cell, with a progress bar; `--resume` finishes a run
//! that was interrupted or crashed. Settings ([`crate::settings::run`]), then the
//! cells in their SMT states ([`smtlab_runner::experiment::smt::measure_groups`]), each
//! saved and shown as it is measured ([`crate::live::run`]).

use std::ops::ControlFlow;
use std::process::ExitCode;

use anyhow::Result;
use smtlab_runner::experiment::{Engine, plan::groups_of, smt};
use smtlab_runner::machine::Machine;
use smtlab_runner::session::SessionObserver;
use smtlab_store::Store;

use crate::args::RunArgs;
use crate::live::run::{RunSaver, end, start_notes};
use crate::settings::{self, run::measuring_of};

pub fn run(args: &RunArgs, machine: &dyn Machine) -> Result<ExitCode> {
    let db = crate::settings::db_path(&args.db);
    // JSON or Markdown on standard output take the place of the cell lines.
    let lines =
        crate::output::check_stdout_owner(args.json, args.markdown.export_markdown.as_deref())?;
    let topo = machine.topology()?;
    // Check the request before the database is created or touched.
    let fresh = match &args.resume {
        Some(_) => None,
        None => Some(settings::run::new_run(args, &topo, machine)?),
    };
    if args.dry_run
        && let Some(meta) = &fresh
    {
        return crate::live::run::dry_run(meta, &topo, args);
    }
    let mut store = Store::open(&db)?;
    // Where the run starts (a new one or a resumed one): from here on it is in the store.
    let (run_id, meta, pending, lease) =
        settings::run::begin(&mut store, fresh, args, &topo, machine)?;
    let counting = machine.counting_for(&meta.config)?;
    let estimate = start_notes(
        run_id,
        &meta,
        &pending,
        &lease,
        &topo,
        args,
        counting.as_ref(),
    );
    let notes = [
        smtlab_runner::disturb::steal_note(machine),
        smtlab_runner::experiment::siblings::start_note(machine, &topo),
    ];
    crate::term::notes(notes.into_iter().flatten());
    let stop = settings::Stop::on_signals()?;
    // The time left is the plan's, in the bar's message (see `RunSaver`).
    let bar = crate::term::progress_bar(pending.len() as u64, false, crate::term::PLANNED);
    let catalog = smtlab_runner::catalog::all();
    let (groups, missing) = groups_of(&pending, &catalog, &topo);
    let mut saver = RunSaver::new(&mut store, run_id, lease, &bar, lines, &estimate);
    // How the cells are measured; a resumed run goes on as it was started.
    let engine = Engine::new(machine, &meta.config, counting.as_ref(), stop.flag())
        .measuring(measuring_of(&meta, args))
        .sharing_at_start(&meta.environment.cpu_handoff);
    // The stop flag ends the session and the SMT switch restores then (its guardian
    // should smtlab be killed).
    let protection = settings::Stop::protection();
    let measured = match missing.iter().try_for_each(|m| saver.skipped(m)) {
        ControlFlow::Break(()) => Ok(smtlab_runner::session::Ended::Stopped),
        ControlFlow::Continue(()) => {
            smt::measure_groups(&engine, protection, &topo, groups, &mut saver)
        }
    };
    bar.finish_and_clear();
    end(
        saver,
        measured,
        stop.signalled().then(|| stop.exit_code()),
        args,
    )
}
