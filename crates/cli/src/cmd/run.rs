//! `smtlab run`: a whole matrix of cells (benchmarks x parameters x placements), saved
//! to the results database cell by cell, with a progress bar; `--resume` finishes a run
//! that was interrupted or crashed.

use std::ops::ControlFlow;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};
use indicatif::ProgressBar;
use smtlab_bench::Params;
use smtlab_model::{CellKey, RunConfig, RunMeta, RunStatus, SkippedCell, Topology};
use smtlab_runner::counting::{CountingSetup, Machine};
use smtlab_runner::plan::{Estimate, Measuring, Suite, estimate, plan};
use smtlab_runner::session::{
    CellPlan, Counting, Ended, Group, Measured, Session, SessionObserver,
};
use smtlab_runner::{Monotonic, measure_overheads};
use smtlab_store::{Lease, Store};

use crate::args::{RunArgs, SuiteArg};
use crate::env::capture;
use crate::render;
use crate::settings::{select, smt_states, split_placements, unix_now_s};
use smtlab_model::keys::SmtState;

/// Exit code of a run stopped by Ctrl-C or another signal (128 + SIGINT, as shells
/// report Ctrl-C).
const INTERRUPTED_EXIT: u8 = 130;

pub fn run(args: &RunArgs) -> Result<ExitCode> {
    let db = super::db_path(&args.db);
    super::check_stdout_owner(args.json, args.export_markdown.as_deref())?;
    // JSON or Markdown on standard output take the place of the cell lines.
    let lines = !args.json
        && args
            .export_markdown
            .as_ref()
            .is_none_or(|p| p.as_os_str() != "-");
    let topo = smtlab_topology::discover(Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    // Check the request before the database is created or touched.
    let fresh = match &args.resume {
        Some(_) => None,
        None => Some(new_run(args, &topo)?),
    };
    if args.dry_run
        && let Some(meta) = &fresh
    {
        let e = estimate_of(&meta.plan, meta, &topo, args);
        for note in &meta.notes {
            crate::term::note_fit(&format!("note: {note}"));
        }
        super::emit(&render::plan::text(&e, render::table::Layout::term()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut store = Store::open(&db)?;

    // Where the run starts (a new one or a resumed one): from here on it is in the store.
    let (run_id, meta, pending, lease) = match fresh {
        Some(meta) => {
            let id = store.create_run(&meta)?;
            if let Some(label) = &args.label {
                store.set_run_label(id, Some(label))?;
            }
            let pending = meta.plan.clone();
            (id, meta, pending, store.lease_run(id)?)
        }
        None => {
            let which = args.resume.clone().flatten();
            resume(&mut store, which.as_deref(), &topo)?
        }
    };
    crate::term::note_fit(&format!(
        "run {run_id}: {} cells to measure ({} planned), results saved to {}",
        pending.len(),
        meta.plan.len(),
        db.display()
    ));
    for note in meta.notes.iter().cloned().chain(lease.takeover_note()) {
        crate::term::note_fit(&format!("note: {note}"));
    }
    // What the run will take and hold, said before it starts (`--dry-run` shows it all).
    let e = estimate_of(&pending, &meta, &topo, args);
    for line in render::plan::summary(&e) {
        crate::term::note_fit(&line);
    }
    for g in e.groups.iter().filter(|g| g.apart.is_some()) {
        crate::term::note_fit(&format!(
            "note: {}: {}",
            g.benchmark,
            g.apart.as_deref().unwrap_or_default()
        ));
    }
    let setup = meta.config.counters.then(CountingSetup::probe);
    if let Some(s) = &setup {
        for line in s.missing_lines() {
            crate::term::note_fit(&format!("note: {line}"));
        }
    }
    // How the cells are measured; a resumed run goes on as it was started.
    let (interleave, repeat) = measuring_of(&meta);

    // The one stop flag: Ctrl-C, kill, a closed terminal and Ctrl-\ all set it and end
    // the run the same way (marked interrupted, every finished cell kept, resumable);
    // the session stops at the next event.
    let stop = Arc::new(AtomicBool::new(false));
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("cannot install the signal handlers")?;
    }
    let bar = crate::term::progress_bar(pending.len() as u64, false);
    let catalog = smtlab_runner::catalog::all();
    // What a benchmark of this run leaves out here, said once.
    for bench in &catalog {
        let name = bench.info().name;
        if pending.iter().any(|k| k.benchmark == name) {
            for note in bench.notes() {
                crate::term::note_fit(&format!("note: {note}"));
            }
        }
    }
    let mut saver = RunSaver {
        store: &mut store,
        run_id,
        lease,
        bar: &bar,
        lines,
        measured: 0,
        skipped: 0,
        error: None,
    };
    // Cells keyed `smt=off|on` need the switch: one guard for the whole run, restoring
    // on drop (the stop flag ends the session, so its own signal handling stays off).
    let wants_smt = pending.iter().any(|k| k.smt().is_some());
    let sysfs = smtlab_control::Sysfs::system();
    let mut switch = match wants_smt.then(|| crate::settings::switch_refusal(&sysfs)) {
        Some(None) => Some(smtlab_control::SmtSwitch::with_protection(
            sysfs,
            smtlab_control::guard::Protection {
                guardian: true,
                signals: false,
            },
        )?),
        Some(Some(why)) => {
            eprintln!("note: cells with SMT off or on cannot be measured here: {why}");
            None
        }
        None => None,
    };
    let mut groups: Vec<Group<'_>> = Vec::new();
    for key in &pending {
        let Some(bench) = catalog.iter().find(|b| b.info().name == key.benchmark) else {
            let missing = SkippedCell {
                key: key.clone(),
                reason: format!("no benchmark {:?} in this build", key.benchmark),
            };
            if saver.skipped(&missing).is_break() {
                break;
            }
            continue;
        };
        let placement = smtlab_placement::parse(&key.placement)
            .and_then(|spec| smtlab_placement::resolve(&spec, &topo))
            .map_err(|e| e.to_string());
        let cell = CellPlan {
            bench: bench.as_ref(),
            info: bench.info(),
            params: Params::from_pairs(
                key.params
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Vec<_>>(),
            ),
            key: key.clone(),
            placement,
            work_unit: None,
            warmup_samples: None,
        };
        // The placements of one benchmark and parameter set form a group.
        match groups.last_mut() {
            Some(g) if g[0].key.same_variant(key) => {
                g.push(cell);
            }
            _ => groups.push(vec![cell]),
        }
    }
    let session_on = |topo: &Topology, groups: Vec<Group<'_>>, saver: &mut RunSaver<'_>| {
        Session {
            topo,
            cfg: &meta.config,
            clock: &Monotonic,
            client_rule: super::client_rule(&args.client),
            counting: setup.as_ref().map(|setup| Counting {
                setup,
                backend: &Machine,
            }),
            repeat,
            interleave,
            stop: &stop,
            cell_state: Some(&crate::settings::cell_state),
        }
        .run(groups, saver)
    };
    for group in groups {
        let state = group[0].key.smt().and_then(SmtState::is_on);
        let Some(on) = state else {
            if session_on(&topo, vec![group], &mut saver) == Ended::Stopped {
                break;
            }
            continue;
        };
        let now = match switch.as_mut() {
            None => Err("SMT cannot be switched here".to_string()),
            Some(sw) => sw.set(on).map_err(|e| e.to_string()).and_then(|()| {
                smtlab_topology::discover(Path::new("/")).map_err(|e| e.to_string())
            }),
        };
        let topo_now = match now {
            Ok(t) => t,
            Err(why) => {
                let mut flow = ControlFlow::Continue(());
                for c in &group {
                    flow = saver.skipped(&SkippedCell {
                        key: c.key.clone(),
                        reason: format!("with SMT {}: {why}", if on { "on" } else { "off" }),
                    });
                    if flow.is_break() {
                        break;
                    }
                }
                if flow.is_break() {
                    break;
                }
                continue;
            }
        };
        // With SMT off the siblings are offline: placements are resolved anew.
        let group: Group<'_> = group
            .into_iter()
            .map(|mut c| {
                c.placement = smtlab_placement::parse(&c.key.placement)
                    .and_then(|spec| smtlab_placement::resolve(&spec, &topo_now))
                    .map_err(|e| format!("with SMT {}: {e}", if on { "on" } else { "off" }));
                c
            })
            .collect();
        if session_on(&topo_now, vec![group], &mut saver) == Ended::Stopped {
            break;
        }
    }
    if let Some(sw) = switch.take() {
        sw.finish().context("cannot put the SMT state back")?;
    }
    bar.finish_and_clear();
    // The lease is held until the run's status is written, then released.
    let RunSaver {
        lease,
        measured,
        skipped,
        error,
        ..
    } = saver;
    if let Some(e) = error {
        // A save that failed (a full disk) stops the run as an interrupt does. It is
        // marked interrupted where the store still takes that small update; where it
        // does not, it reads as interrupted anyway once no live process holds its lease.
        let _ = store.mark_interrupted(run_id);
        drop(lease);
        return Err(e.context(format!(
            "run {run_id} interrupted; finish it with: smtlab run --resume {run_id}{}",
            db_flag(args)
        )));
    }
    if stop.load(Ordering::Relaxed) {
        store.finish_run(run_id, RunStatus::Interrupted, unix_now_s())?;
        print_stored(&store, run_id, args)?;
        eprintln!(
            "interrupted: {measured} cells saved by this invocation in run {run_id}; finish it with: smtlab run --resume {run_id}{}",
            db_flag(args)
        );
        drop(lease);
        return Ok(ExitCode::from(INTERRUPTED_EXIT));
    }
    store.finish_run(run_id, RunStatus::Finished, unix_now_s())?;
    drop(lease);
    print_stored(&store, run_id, args)?;
    let done = format!(
        "run {run_id} finished: {measured} cells measured, {skipped} skipped. Report: smtlab report {run_id}{} -o report.html",
        db_flag(args)
    );
    crate::term::note_fit(&done);
    Ok(ExitCode::SUCCESS)
}

/// `--json` and `--export-markdown`: the run as it is stored now (a resumed run with
/// the cells of its earlier invocations).
fn print_stored(store: &Store, run_id: i64, args: &RunArgs) -> Result<()> {
    if !args.json && args.export_markdown.is_none() {
        return Ok(());
    }
    let results = store.load_run(run_id)?;
    if let Some(path) = &args.export_markdown {
        super::export_markdown(path, &results.cells)?;
    }
    if args.json {
        let bytes = smtlab_report::export::json(&results);
        super::emit(&String::from_utf8_lossy(&bytes))?;
    }
    Ok(())
}

/// The runner's estimate of `cells` of the run `meta` on this machine.
fn estimate_of(cells: &[CellKey], meta: &RunMeta, topo: &Topology, args: &RunArgs) -> Estimate {
    let (interleave, repeat) = measuring_of(meta);
    let catalog = smtlab_runner::catalog::all();
    let measuring = Measuring {
        interleave,
        repeat,
        client_rule: super::client_rule(&args.client),
    };
    estimate(cells, &catalog, topo, &meta.config, measuring)
}

/// Whether a run interleaves and how many rounds it measures, as its stored settings
/// say, so `--resume` measures the rest the same way. Runs stored before these settings
/// were kept have them only in their command line (`--no-interleave`, `--repeat N`).
fn measuring_of(meta: &RunMeta) -> (bool, usize) {
    let (line_interleave, line_repeat) = measuring_of_command_line(&meta.command_line);
    let interleave = meta.config.interleave.unwrap_or(line_interleave);
    let repeat = meta.config.repeat.unwrap_or(line_repeat).max(1);
    (interleave, repeat)
}

/// The measuring settings of a run stored before its config kept them.
fn measuring_of_command_line(command_line: &[String]) -> (bool, usize) {
    let interleave = !command_line.iter().any(|a| a == "--no-interleave");
    let mut repeat = 1;
    for (i, a) in command_line.iter().enumerate() {
        let value = match a.strip_prefix("--repeat") {
            Some("") => command_line.get(i + 1).map(String::as_str),
            Some(v) => v.strip_prefix('='),
            None => None,
        };
        if let Some(n) = value.and_then(|v| v.parse::<usize>().ok()) {
            repeat = n.max(1);
        }
    }
    (interleave, repeat)
}

/// Saves each cell as it is measured, prints its line and moves the bar.
struct RunSaver<'a> {
    store: &'a mut Store,
    run_id: i64,
    /// Held while this process measures the run; renewed after every saved cell.
    lease: Lease,
    bar: &'a ProgressBar,
    /// Print a line per cell (not when JSON or Markdown fill standard output).
    lines: bool,
    measured: usize,
    skipped: usize,
    error: Option<anyhow::Error>,
}

impl SessionObserver for RunSaver<'_> {
    fn cell_started(&mut self, key: &CellKey) {
        self.bar
            .set_message(format!("{} {}", key.benchmark, key.placement));
    }

    fn sample(&mut self, key: &CellKey, _round: usize, index: usize) {
        self.bar.set_message(format!(
            "{} {} (sample {})",
            key.benchmark,
            key.placement,
            index + 1
        ));
    }

    fn measured(&mut self, m: Measured<'_>) -> ControlFlow<()> {
        let cell = m.record;
        if let Err(e) = self.store.save_cell(self.run_id, cell) {
            self.error = Some(e.into());
            return ControlFlow::Break(());
        }
        if let Err(e) = self.lease.heartbeat() {
            self.error = Some(e.into());
            return ControlFlow::Break(());
        }
        if self.lines {
            say(
                self.bar,
                render::run::cell_line(cell, render::table::Layout::term()),
            );
            if let Some(c) = &cell.counters {
                say(
                    self.bar,
                    render::table::wrap(
                        &format!("  counters: {}", smtlab_report::counters::line(c)),
                        render::table::Layout::term(),
                    )
                    .trim_end()
                    .to_string(),
                );
            }
        }
        if let Some(note) = m.counters_note {
            crate::term::note_with(
                self.bar,
                &format!(
                    "note: {} on {}: {note}",
                    cell.benchmark, cell.placement.name
                ),
            );
        }
        self.measured += 1;
        self.bar.inc(1);
        ControlFlow::Continue(())
    }

    fn skipped(&mut self, s: &SkippedCell) -> ControlFlow<()> {
        if self.lines {
            say(
                self.bar,
                render::run::skipped_line(s, render::table::Layout::term()),
            );
        }
        if let Err(e) = self.store.save_skipped(self.run_id, s) {
            self.error = Some(e.into());
            return ControlFlow::Break(());
        }
        self.skipped += 1;
        self.bar.inc(1);
        ControlFlow::Continue(())
    }
}

/// A result line on standard output, always (the bar, on standard error, is cleared
/// for it and drawn again), so `smtlab run > file` keeps every line.
fn say(bar: &ProgressBar, line: String) {
    use std::io::Write;
    // A closed pipe (`smtlab run | head`) must not stop the run: results are saved.
    bar.suspend(|| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    });
}

fn db_flag(args: &RunArgs) -> String {
    args.db
        .db
        .as_ref()
        .map(|p| format!(" --db {}", p.display()))
        .unwrap_or_default()
}

/// The plan and settings of a new run, with the notes said once at its start.
fn new_run(args: &RunArgs, topo: &Topology) -> Result<RunMeta> {
    let suite = match args.suite {
        SuiteArg::Quick => Suite::Quick,
        SuiteArg::Default => Suite::Default,
        SuiteArg::Full => Suite::Full,
    };
    let names = if args.bench.is_empty() {
        vec!["all".to_string()]
    } else {
        args.bench.clone()
    };
    let benches = select(&names)?;
    let mut notes = Vec::new();
    let placements = if args.placements.is_empty() {
        let mut ok = Vec::new();
        let mut left_out = Vec::new();
        for (spec, r) in smtlab_placement::standard_placements(topo) {
            match r {
                Ok(_) => ok.push(spec.text),
                Err(_) => left_out.push(spec.text),
            }
        }
        if !left_out.is_empty() {
            let why = if topo.smt_visible() {
                "this machine cannot satisfy them"
            } else {
                "no SMT visible on this machine"
            };
            notes.push(format!("{why}: {} left out", left_out.join(", ")));
        }
        ok
    } else {
        let list = split_placements(&args.placements);
        // Parse now so a typo fails before anything is stored.
        for p in &list {
            smtlab_placement::parse(p)?;
        }
        list
    };
    let mut config = match suite {
        Suite::Quick => RunConfig::quick(),
        _ => RunConfig::default(),
    };
    config.known_overheads = Some(measure_overheads(&Monotonic));
    config.counters = args.counters;
    config.memory_budget_bytes = smtlab_runner::plan::memory_budget();
    config.interleave = Some(!args.no_interleave);
    config.repeat = Some(args.repeat as usize);
    let mut cells = plan(suite, &benches, &placements, topo);
    let mut states = smt_states(&args.smt)?;
    // Placements none of which this machine can satisfy (and no --smt to change it)
    // would make a run of skipped cells only: an error, before anything is stored.
    if states.is_empty() && !args.placements.is_empty() {
        let refusals: Vec<String> = placements
            .iter()
            .filter_map(|p| {
                smtlab_placement::parse(p)
                    .and_then(|s| smtlab_placement::resolve(&s, topo))
                    .err()
                    .map(|e| format!("{p}: {e}"))
            })
            .collect();
        if refusals.len() == placements.len() {
            bail!(
                "--placements: none can run on this machine ({}); nothing was measured or stored",
                refusals.join("; ")
            );
        }
    }
    if !states.is_empty() {
        if placements.iter().any(|p| {
            smtlab_placement::parse(p)
                .and_then(|s| smtlab_placement::resolve(&s, topo))
                .is_ok_and(|r| r.is_uniprocessor())
        }) {
            bail!("--smt with 1c1t-up: both take CPUs offline; measure them in separate runs");
        }
        if let Some(why) = crate::settings::switch_refusal(&smtlab_control::Sysfs::system()) {
            notes.push(format!(
                "--smt {}: not switched ({why}); measuring the current state only (smt/control: {})",
                args.smt.join(","),
                topo.smt.control.as_deref().unwrap_or("absent")
            ));
            states.clear();
        }
    }
    if !states.is_empty() {
        cells = smt_plan(cells, &states);
    }
    Ok(RunMeta {
        id: 0,
        started_unix_s: unix_now_s(),
        finished_unix_s: None,
        status: RunStatus::Running,
        command_line: std::env::args().collect(),
        suite: Some(suite.to_string()),
        environment: capture(topo),
        topology: topo.clone(),
        config,
        plan: cells,
        notes,
    })
}

/// `plan` with each benchmark and parameter set's cells once per SMT state, the states
/// taking turns group by group.
fn smt_plan(plan: Vec<CellKey>, states: &[bool]) -> Vec<CellKey> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < plan.len() {
        let same = |k: &CellKey| k.benchmark == plan[i].benchmark && k.params == plan[i].params;
        let n = plan[i..].iter().take_while(|k| same(k)).count();
        for &on in states {
            for k in &plan[i..i + n] {
                let mut k = k.clone();
                k.set_smt(Some(SmtState::from_on(on)));
                out.push(k);
            }
        }
        i += n;
    }
    out
}

/// The run to resume (`None`: the newest unfinished one), its cells not yet done, and
/// its lease (refused while another process measures it).
fn resume(
    store: &mut Store,
    which: Option<&str>,
    topo: &Topology,
) -> Result<(i64, RunMeta, Vec<CellKey>, Lease)> {
    let id = match which {
        Some(r) => store.resolve_run(r)?,
        None => match store.latest_unfinished_run()? {
            Some(id) => id,
            None => bail!("no unfinished run to resume in this database"),
        },
    };
    let results = store.load_run(id)?;
    let meta = results.run;
    if meta.status == RunStatus::Finished {
        bail!("run {id} is already finished");
    }
    // The co-run and utilisation experiments plan cells `run` cannot measure.
    if let Some(suite @ ("corun" | "penalty" | "utilisation")) = meta.suite.as_deref() {
        bail!(
            "run {id} is an interrupted `{}` run, which `run --resume` cannot finish; measure it again with smtlab {}",
            suite,
            if suite == "utilisation" {
                "util"
            } else {
                suite
            }
        );
    }
    // Cells of one run must come from one machine, or its ratios mean nothing.
    if meta.topology.cpus != topo.cpus || meta.environment.hostname != capture(topo).hostname {
        bail!(
            "run {id} was measured on {} with CPUs {}; this is {} with CPUs {}: start a new run instead",
            meta.environment
                .hostname
                .as_deref()
                .unwrap_or("an unknown host"),
            meta.topology.cpus,
            capture(topo)
                .hostname
                .as_deref()
                .unwrap_or("an unknown host"),
            topo.cpus
        );
    }
    let lease = store.lease_run(id)?;
    let pending = store.pending_cells(id)?;
    store.reopen_run(id)?;
    Ok((id, meta, pending, lease))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smt_plan_takes_turns_per_group() {
        let key = |b: &str, p: &str| CellKey {
            benchmark: b.into(),
            params: Default::default(),
            conditions: Default::default(),
            placement: p.into(),
        };
        let plan = vec![key("a", "1c1t"), key("a", "2c1t"), key("b", "1c1t")];
        let got: Vec<(String, String, String)> = smt_plan(plan, &[false, true])
            .into_iter()
            .map(|k| (k.smt().unwrap().to_string(), k))
            .map(|(s, k)| (k.benchmark, k.placement, s))
            .collect();
        let want = [
            ("a", "1c1t", "off"),
            ("a", "2c1t", "off"),
            ("a", "1c1t", "on"),
            ("a", "2c1t", "on"),
            ("b", "1c1t", "off"),
            ("b", "1c1t", "on"),
        ];
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0.as_str(), g.1.as_str(), g.2.as_str()), w);
        }
    }

    #[test]
    fn resume_measures_as_the_stored_settings_say_and_old_runs_as_their_command_line() {
        let mut meta = crate::cmd::finished_run(
            None,
            0,
            smtlab_model::Environment::default(),
            smtlab_fixtures::build::one_cpu_per_core(&[0, 1]),
            RunConfig::default(),
            Vec::new(),
            Vec::new(),
            Vec::new(),
        )
        .run;
        meta.command_line = ["smtlab", "run", "--no-interleave", "--repeat", "3"]
            .map(String::from)
            .to_vec();
        // Stored before the settings were kept: the command line says them.
        assert_eq!(measuring_of(&meta), (false, 3));
        // Kept in the config: the config wins over whatever the command line says.
        meta.config.interleave = Some(true);
        meta.config.repeat = Some(2);
        assert_eq!(measuring_of(&meta), (true, 2));
        meta.command_line = vec!["smtlab".into(), "run".into()];
        meta.config.interleave = Some(false);
        assert_eq!(measuring_of(&meta), (false, 2));
    }
}
