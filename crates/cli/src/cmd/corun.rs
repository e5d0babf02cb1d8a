//! `smtlab corun` (the symbiosis matrix) and `smtlab penalty` (the single-thread
//! penalty): settings, then the co-run experiment
//! ([`smtlab_runner::experiment::corun`]) through the session, each cell saved as it is
//! measured ([`crate::sink`]) in a run of suite `corun` or `penalty`, so `report` and
//! `compare` work on them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use smtlab_model::keys::Form;
use smtlab_model::{CellKey, RunConfig, Topology};
use smtlab_report::corun as view;
use smtlab_runner::counting::{CountingSetup, Machine};
use smtlab_runner::experiment::Engine;
use smtlab_runner::experiment::corun::{self as exp, CorunPlan, DEFAULT_HOGS, Workload};
use smtlab_runner::session::{Counting, Ended};
use smtlab_runner::{Monotonic, corun::CpuPair, measure_overheads};

use super::{emit, json_text};
use crate::render::corun as text;
use crate::sink::{NewRun, Shown, StoreSink};

#[derive(Debug, Args)]
pub struct CorunArgs {
    /// Catalog benchmarks to pair (default: int-ops fp-ops mem-read mem-latency
    /// null-syscall, one thread each).
    #[arg(value_name = "BENCH")]
    pub names: Vec<String>,
    /// A shell command as a workload, NAME='COMMAND' (repeatable); its value is the wall
    /// time of one run, as `exec` measures it.
    #[arg(long = "cmd", value_name = "NAME=CMD")]
    pub cmds: Vec<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct PenaltyArgs {
    /// The latency-sensitive task: a catalog benchmark run as a fixed piece of work
    /// (default mem-latency with size=4MiB), unless --cmd is given.
    #[arg(value_name = "TASK")]
    pub task: Option<String>,
    /// The task as a shell command, NAME='COMMAND': one run is one piece of work.
    #[arg(long = "cmd", value_name = "NAME=CMD", conflicts_with = "task")]
    pub cmd: Option<String>,
    /// Hogs run next to the task, comma-separated (default int-ops,fp-ops,mem-read,null-syscall).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub hogs: Vec<String>,
    /// Length of one piece of work of a catalog task, in milliseconds (calibrated once,
    /// alone, then the same for every cell).
    #[arg(long, default_value_t = 10.0, value_name = "MS")]
    pub run_ms: f64,
    /// Runs of the task per cell (the run-time distribution).
    #[arg(long, default_value_t = 30, value_name = "N", value_parser = clap::value_parser!(u32).range(3..=1000))]
    pub samples: u32,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Parameters for the catalog workloads that declare them, k=v (repeatable).
    #[arg(long = "param", value_name = "K=V")]
    pub params: Vec<String>,
    /// Where partners run: sibling, cores, or both (default). Without SMT only cores.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub forms: Vec<String>,
    /// Fewer samples and a shorter budget per cell.
    #[arg(long)]
    pub quick: bool,
    /// Results database (default as for `run`).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also record performance counters with each cell, counted around the measured
    /// workload's own samples (its partner runs on another CPU, outside them).
    #[arg(long)]
    pub counters: bool,
}

/// The machine, the run's settings and the stop flag, settled before anything is
/// measured.
struct Settings {
    topo: Topology,
    pair: CpuPair,
    forms: Vec<(Form, u32)>,
    notes: Vec<String>,
    cfg: RunConfig,
    counting: Option<CountingSetup>,
}

fn settings(common: &CommonArgs) -> Result<Settings> {
    let topo = smtlab_topology::discover(Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    let pair = smtlab_runner::corun::cpu_pair(&topo).map_err(anyhow::Error::msg)?;
    let (forms, notes) = exp::forms(&common.forms, &pair)?;
    if let Some(db) = &common.db
        && db.exists()
    {
        drop(smtlab_store::Store::open_existing(db)?);
    }
    let mut cfg = if common.quick {
        RunConfig::quick()
    } else {
        RunConfig::default()
    };
    smtlab_runner::config::validate(&cfg)?;
    cfg.known_overheads = Some(measure_overheads(&Monotonic));
    cfg.counters = common.counters;
    let counting = common.counters.then(CountingSetup::probe);
    Ok(Settings {
        topo,
        pair,
        forms,
        notes,
        cfg,
        counting,
    })
}

/// Measures `plan` into a new run of `suite`, each cell shown by `printer`; the sink
/// with every cell, and whether a signal stopped it.
fn measure<'p>(
    s: &Settings,
    common: &CommonArgs,
    suite: &'static str,
    plan: &CorunPlan,
    printer: impl FnMut(Shown<'_>) -> Result<()> + 'p,
) -> Result<(StoreSink<'p>, bool)> {
    if let Some(setup) = &s.counting
        && !common.json
    {
        for line in super::counting::notes(setup) {
            crate::term::note_fit(&format!("note: {line}"));
        }
    }
    let db = common.db.clone().unwrap_or_else(smtlab_store::default_path);
    let run = NewRun {
        suite,
        environment: crate::env::capture(&s.topo),
        topology: s.topo.clone(),
        config: s.cfg.clone(),
        notes: s.notes.clone(),
        plan: plan
            .iter()
            .flatten()
            .map(|c| c.key.clone())
            .collect::<Vec<CellKey>>(),
    };
    let mut sink = StoreSink::begin(&db, run, printer)?;
    let stop = crate::settings::stop_on_signals()?;
    let engine = Engine {
        cfg: &s.cfg,
        clock: &Monotonic,
        counting: s.counting.as_ref().map(|setup| Counting {
            setup,
            backend: &Machine,
        }),
        stop: &stop,
    };
    let stopped = exp::measure(&engine, &s.topo, plan, &mut sink) == Ended::Stopped;
    let stopped = stopped && stop.load(std::sync::atomic::Ordering::Relaxed);
    Ok((sink.finish(stopped, common.db.as_deref())?, stopped))
}

/// The exit code of a command a signal stopped (as `run`'s).
const INTERRUPTED_EXIT: u8 = 130;

#[derive(Serialize)]
struct MatrixJson<'a> {
    run: i64,
    notes: &'a [String],
    matrix: &'a [view::Entry],
}

pub fn run_corun(args: &CorunArgs) -> Result<ExitCode> {
    let names: Vec<String> = if args.names.is_empty() && args.cmds.is_empty() {
        exp::DEFAULT_WORKLOADS
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        args.names.clone()
    };
    let mut workloads = names
        .iter()
        .map(|n| Workload::catalog(n, &args.common.params, &[("threads", "1")]))
        .collect::<Result<Vec<_>, _>>()?;
    for c in &args.cmds {
        workloads.push(Workload::command(c)?);
    }
    exp::check_unique(&workloads)?;
    exp::check_params(&workloads.iter().collect::<Vec<_>>(), &args.common.params)?;
    let s = settings(&args.common)?;
    for n in &s.notes {
        eprintln!("note: {n}");
    }
    let json = args.common.json;
    if !json {
        emit(&format!(
            "corun: {} workloads, each on CPU {} alone and next to each other one ({}); slowdown = alone / co-run for rates, co-run / alone for times (above 1: slower)\n",
            workloads.len(),
            s.pair.cpu,
            text::forms_text(&s.forms)
        ))?;
    }
    let plan = exp::matrix_plan(&workloads, &s.forms, &s.pair, &s.topo);
    let (mut row, mut alone) = (String::new(), None);
    let printer = |shown: Shown<'_>| {
        let line = match shown {
            Shown::Measured(c) => text::matrix_cell(c, &mut alone),
            Shown::Skipped(k) => {
                if k.key.placement == "corun-alone" {
                    alone = None;
                }
                text::skipped_cell(k, true)
            }
        };
        let name = match shown {
            Shown::Measured(c) => &c.benchmark,
            Shown::Skipped(k) => &k.key.benchmark,
        };
        if json {
            return Ok(());
        }
        if *name != row {
            row = name.clone();
            emit(&format!("{row}:\n"))?;
        }
        emit(&line)
    };
    let (sink, stopped) = measure(&s, &args.common, "corun", &plan, printer)?;
    if stopped {
        return Ok(ExitCode::from(INTERRUPTED_EXIT));
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

#[derive(Serialize)]
struct PenaltyJson<'a> {
    run: i64,
    notes: &'a [String],
    penalties: &'a [view::Penalty],
}

pub fn run_penalty(args: &PenaltyArgs) -> Result<ExitCode> {
    let (params, one) = (&args.common.params, [("threads", "1")]);
    let task = match (&args.cmd, args.task.as_deref()) {
        (Some(c), _) => Workload::command(c)?,
        (None, Some(name)) => Workload::catalog(name, params, &one)?,
        (None, None) => Workload::catalog("mem-latency", params, &[one[0], ("size", "4MiB")])?,
    };
    let hog_names: Vec<String> = if args.hogs.is_empty() {
        DEFAULT_HOGS.iter().map(|s| s.to_string()).collect()
    } else {
        args.hogs.clone()
    };
    let hogs = hog_names
        .iter()
        .map(|h| Workload::catalog(h.trim(), params, &one))
        .collect::<Result<Vec<_>, _>>()?;
    if !(args.run_ms.is_finite() && args.run_ms > 0.0 && args.run_ms <= 10_000.0) {
        bail!(
            "--run-ms {}: expected a number of milliseconds in (0, 10000]",
            args.run_ms
        );
    }
    let all: Vec<&Workload> = std::iter::once(&task).chain(&hogs).collect();
    exp::check_params(&all, params)?;
    let mut s = settings(&args.common)?;
    if let Err(why) = &s.pair.sibling {
        s.notes.retain(|n| !n.starts_with("sibling form"));
        s.notes.push(format!(
            "single-thread penalty not measured ({why}); shown instead: the task alone and next to each hog on another core"
        ));
    }
    s.cfg.min_samples = args.samples as usize;
    s.cfg.max_samples = args.samples as usize;
    for n in &s.notes {
        eprintln!("note: {n}");
    }
    let fixed = match &args.cmd {
        Some(_) => 1,
        None => exp::calibrate_task(&task, (args.run_ms * 1e6) as u64, &s.pair, &s.topo)?,
    };
    let json = args.common.json;
    if !json {
        emit(&format!(
            "penalty: {} ({} iterations per run) on CPU {}, {} runs per cell, alone and next to {} ({})\n",
            task.name(),
            fixed,
            s.pair.cpu,
            args.samples,
            hog_names.join(", "),
            text::forms_text(&s.forms)
        ))?;
    }
    let plan = exp::penalty_plan(&task, fixed, &hogs, &s.forms, &s.pair, &s.topo);
    let printer = |shown: Shown<'_>| match shown {
        Shown::Skipped(k) if !json => emit(&text::skipped_cell(k, false)),
        _ => Ok(()),
    };
    let (sink, stopped) = measure(&s, &args.common, "penalty", &plan, printer)?;
    if stopped {
        return Ok(ExitCode::from(INTERRUPTED_EXIT));
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
