//! `smtlab run`: a whole matrix of cells (benchmarks x parameters x placements), saved
//! to the results database cell by cell, with a progress bar; `--resume` finishes a run
//! that was interrupted or crashed.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use smtlab_bench::{BenchContext, Params};
use smtlab_model::{CellKey, CellRecord, RunConfig, RunMeta, RunStatus, SkippedCell, Topology};
use smtlab_runner::counting::{CountingSetup, SAMPLES_WINDOW};
use smtlab_runner::plan::{Suite, plan};
use smtlab_runner::{Event, Monotonic, Observer, RunError, measure_overheads};
use smtlab_store::{Lease, Store};

use super::bench::{select, unix_now_s};
use crate::args::RunArgs;
use crate::env::capture;
use crate::render;

/// Exit code of a run stopped by Ctrl-C or another signal (128 + SIGINT, as shells
/// report Ctrl-C).
const INTERRUPTED_EXIT: i32 = 130;

pub fn run(args: &RunArgs) -> Result<()> {
    let db = args.db.clone().unwrap_or_else(smtlab_store::default_path);
    let topo = smtlab_topology::discover(Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    // Check the request before the database is created or touched.
    let fresh = match &args.resume {
        Some(_) => None,
        None => Some(new_run(args, &topo)?),
    };
    let mut store = Store::open(&db)?;

    let (run_id, meta, pending, mut lease) = match fresh {
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
    eprintln!(
        "run {run_id}: {} cells to measure ({} planned), results saved to {}",
        pending.len(),
        meta.plan.len(),
        db.display()
    );
    for note in meta.notes.iter().cloned().chain(lease.takeover_note()) {
        eprintln!("note: {note}");
    }
    let setup = meta.config.counters.then(CountingSetup::probe);
    if let Some(s) = &setup {
        for line in super::counting::notes(s) {
            eprintln!("note: {line}");
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    // Ctrl-C, kill, a closed terminal and Ctrl-\ all end the run the same way: marked
    // interrupted, every finished cell kept, resumable.
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("cannot install the signal handlers")?;
    }
    let bar = progress_bar(pending.len() as u64);
    let (mut measured, mut skipped) = (0usize, 0usize);
    for key in &pending {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        bar.set_message(format!("{} {}", key.benchmark, key.placement));
        match measure_cell(key, &topo, &meta.config, setup.as_ref(), &stop, &bar) {
            Ok((cell, counters_note)) => {
                store.save_cell(run_id, &cell)?;
                lease.heartbeat()?;
                say(&bar, render::run::cell_line(&cell));
                if let Some(c) = &cell.counters {
                    say(
                        &bar,
                        format!("  counters: {}", smtlab_report::counters::line(c)),
                    );
                }
                if let Some(note) = counters_note {
                    say(&bar, format!("  {note}"));
                }
                measured += 1;
            }
            Err(CellError::Stopped) => break,
            Err(CellError::Skip(reason)) => {
                let s = SkippedCell {
                    key: key.clone(),
                    reason,
                };
                say(&bar, render::run::skipped_line(&s));
                store.save_skipped(run_id, &s)?;
                skipped += 1;
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if stop.load(Ordering::Relaxed) {
        store.finish_run(run_id, RunStatus::Interrupted, unix_now_s())?;
        eprintln!(
            "interrupted: {measured} cells saved by this invocation in run {run_id}; finish it with: smtlab run --resume {run_id}{}",
            db_flag(args)
        );
        drop(lease);
        std::process::exit(INTERRUPTED_EXIT);
    }
    store.finish_run(run_id, RunStatus::Finished, unix_now_s())?;
    eprintln!(
        "run {run_id} finished: {measured} cells measured, {skipped} skipped. Report: smtlab report {run_id}{} -o report.html",
        db_flag(args)
    );
    Ok(())
}

/// A line above the progress bar, or on stdout when there is no bar (not a terminal).
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        use std::io::Write;
        // A closed pipe (`smtlab run | head`) must not stop the run: results are saved.
        let _ = writeln!(std::io::stdout(), "{line}");
    } else {
        bar.println(line);
    }
}

fn db_flag(args: &RunArgs) -> String {
    args.db
        .as_ref()
        .map(|p| format!(" --db {}", p.display()))
        .unwrap_or_default()
}

fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("[{pos}/{len}] {bar:30} {msg}  eta {eta}")
            .expect("the template is valid"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The plan and settings of a new run, with the notes said once at its start.
fn new_run(args: &RunArgs, topo: &Topology) -> Result<RunMeta> {
    let suite: Suite = args.suite.parse().map_err(anyhow::Error::msg)?;
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
        plan: plan(suite, &benches, &placements, topo),
        notes,
    })
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

enum CellError {
    Stopped,
    Skip(String),
}

/// Passes sample progress to the bar and asks the runner to stop on Ctrl-C.
struct RunObserver<'a> {
    stop: &'a AtomicBool,
    bar: &'a ProgressBar,
    label: String,
}

impl Observer for RunObserver<'_> {
    fn event(&mut self, event: &Event<'_>) -> std::ops::ControlFlow<()> {
        if let Event::Sample { index, .. } = event {
            self.bar
                .set_message(format!("{} (sample {})", self.label, index + 1));
        }
        if self.stop.load(Ordering::Relaxed) {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    }
}

/// Measures one cell; with counting, also returns the note saying why its counters are
/// missing, if they are.
fn measure_cell(
    key: &CellKey,
    topo: &Topology,
    config: &RunConfig,
    setup: Option<&CountingSetup>,
    stop: &AtomicBool,
    bar: &ProgressBar,
) -> Result<(CellRecord, Option<String>), CellError> {
    let skip = |e: &dyn std::fmt::Display| CellError::Skip(e.to_string());
    let bench = smtlab_runner::catalog::find(&key.benchmark).ok_or_else(|| {
        CellError::Skip(format!("no benchmark {:?} in this build", key.benchmark))
    })?;
    let info = bench.info();
    let spec = smtlab_placement::parse(&key.placement).map_err(|e| skip(&e))?;
    let placement = smtlab_placement::resolve(&spec, topo).map_err(|e| skip(&e))?;
    let params = Params::from_pairs(key.params.clone());
    let client = smtlab_runner::client::client_for(
        bench.as_ref(),
        topo,
        &placement,
        &smtlab_placement::ClientRule::Apart,
    )
    .map_err(CellError::Skip)?;
    let ctx = BenchContext {
        params: &params,
        placement: &placement,
        topology: topo,
        client: client.as_ref(),
    };
    // Counting opens before `prepare`, so the workers it starts are counted.
    let mut counting = setup.map(|s| super::counting::begin(s, &placement, topo));
    let mut instance = bench.prepare(&ctx).map_err(|e| skip(&e))?;
    let mut observer = RunObserver {
        stop,
        bar,
        label: format!("{} {}", key.benchmark, key.placement),
    };
    let result = match counting.as_mut() {
        Some(c) => smtlab_runner::measure(
            instance.as_mut(),
            &info,
            config,
            &Monotonic,
            &mut (&mut observer, c),
        ),
        None => smtlab_runner::measure(instance.as_mut(), &info, config, &Monotonic, &mut observer),
    };
    if let (Some(c), Ok(r)) = (counting.as_mut(), &result) {
        super::counting::trace_extra_sample(c, instance.as_mut(), r.iterations);
    }
    drop(instance);
    let (counters, note) = match counting {
        Some(c) if result.is_ok() => super::counting::finish(c, SAMPLES_WINDOW),
        _ => (None, None),
    };
    match result {
        Ok(result) => Ok((
            CellRecord {
                benchmark: info.name,
                group: info.group,
                unit: info.unit,
                direction: info.direction,
                params: key.params.clone(),
                placement_spec: key.placement.clone(),
                placement,
                result,
                counters,
            },
            note,
        )),
        Err(RunError::Stopped { .. }) => Err(CellError::Stopped),
        // A child killed by the same Ctrl-C fails its sample: that is a stop too.
        Err(_) if stop.load(Ordering::Relaxed) => Err(CellError::Stopped),
        Err(e) => Err(skip(&e)),
    }
}

/// `1c1t,cpus=0,4-5,2c1t` -> `1c1t`, `cpus=0,4-5`, `2c1t`: after `cpus=`, items made of
/// digits and dashes continue the CPU list instead of starting a placement.
pub(crate) fn split_placements(args: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for arg in args {
        let mut in_cpus = false;
        for part in arg.split(',') {
            let is_cpu_item =
                !part.is_empty() && part.chars().all(|c| c.is_ascii_digit() || c == '-');
            let continues = in_cpus && is_cpu_item;
            match out.last_mut() {
                Some(last) if continues => {
                    last.push(',');
                    last.push_str(part);
                }
                _ => {
                    in_cpus = part.starts_with("cpus=");
                    out.push(part.to_string());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn placement_lists_keep_cpu_lists_whole() {
        let v = super::split_placements(&["1c1t,cpus=0,4-5,2c1t".into(), "all".into()]);
        assert_eq!(v, ["1c1t", "cpus=0,4-5", "2c1t", "all"]);
    }
}
