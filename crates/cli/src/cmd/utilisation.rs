//! `smtlab util`: reported utilisation against capacity (paper 004 s7). A CPU-bound
//! open-loop load ([`smtlab_runner::utilisation`]) is offered at fixed shares of the
//! measured maximum on a placement (1c2t by default), and the `/proc/stat` time of the
//! placement's CPUs is shown beside the throughput offered and achieved. With
//! `--smt off,on` (root, SMT switchable) the curve is measured in each state under one
//! [`SmtSwitch`], which puts the state found back however smtlab ends.
//!
//! The maximum is measured once to set the rates; then the maximum and every rate are
//! measured again with their samples interleaved, so a slow spell of the host falls on
//! all steps alike and the shares of the maximum stay honest.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use smtlab_bench::{BenchContext, Benchmark, Params};
use smtlab_control::{SmtSwitch, Sysfs};
use smtlab_model::{CellRecord, ResolvedPlacement, RunConfig, Topology};
use smtlab_report::utilisation::{self as view, RATE_PARAM, SMT_PARAM};
use smtlab_runner::interleave::{Turn, interleave};
use smtlab_runner::utilisation::{OpenLoop, ProcStat, TickSource, calibrate_job};
use smtlab_runner::{Monotonic, NoopObserver, measure_overheads};
use smtlab_store::Store;

use super::bench::unix_now_s;
use super::{emit, json_text};
use crate::env::capture;

#[derive(Debug, Args)]
pub struct UtilArgs {
    /// Placement of the load (default 1c2t; 2c1t where there is no SMT).
    #[arg(long, short = 'p', value_name = "PLACEMENT")]
    pub placement: Option<String>,
    /// Steps from 1/N of the maximum to all of it.
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=50))]
    pub steps: u32,
    /// Length of one step, milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS", value_parser = clap::value_parser!(u64).range(50..=60_000))]
    pub step_ms: u64,
    /// Steps measured per rate.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=100))]
    pub samples: u32,
    /// CPU time of one job, microseconds (calibrated alone on the placement's first CPU).
    #[arg(long, default_value_t = 200, value_name = "US", value_parser = clap::value_parser!(u64).range(10..=100_000))]
    pub job_us: u64,
    /// Measure the curve with SMT switched off and on (root, SMT switchable), e.g.
    /// `--smt off,on`; the state found is put back afterwards.
    #[arg(long, value_delimiter = ',', value_name = "off,on")]
    pub smt: Vec<String>,
    /// Results database (default as for `run`).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Print the curve as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Why SMT cannot be switched here, if it cannot.
pub(crate) fn switch_refusal(sysfs: &Sysfs) -> Option<String> {
    let state = match smtlab_control::state::read(sysfs) {
        Ok(s) => s,
        Err(e) => return Some(e.to_string()),
    };
    let Some(control) = &state.control else {
        return Some("the kernel has no smt/control".into());
    };
    if let Some(e) = control.refusal() {
        return Some(e.to_string());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("switching SMT needs root".into());
    }
    None
}

/// The placement of one state: the one asked for, else 1c2t (1c1t with SMT off, the
/// same core's first thread), else 2c1t on a machine without SMT.
fn placement(asked: Option<&str>, topo: &Topology) -> Result<(String, ResolvedPlacement)> {
    let spec = match asked {
        Some(s) => s.to_string(),
        None if topo.smt_visible() => "1c2t".into(),
        None if topo.smt.control.as_deref() == Some("off") => "1c1t".into(),
        None => "2c1t".into(),
    };
    let parsed = smtlab_placement::parse(&spec)?;
    let resolved = smtlab_placement::resolve(&parsed, topo)?;
    if !resolved.pinned() {
        bail!(
            "--placement {spec}: the load needs pinned CPUs (their /proc/stat time is the point)"
        );
    }
    Ok((spec, resolved))
}

/// Measures the curve in the current SMT state.
fn curve_cells(
    args: &UtilArgs,
    smt: &str,
    topo: &Topology,
    spec: &str,
    placement: &ResolvedPlacement,
    cfg: &RunConfig,
) -> Result<Vec<CellRecord>> {
    let first = placement.cpus[0];
    let job_iterations = std::thread::scope(|s| {
        s.spawn(|| {
            smtlab_placement::pin::pin_current_thread_to(first)?;
            Ok::<u64, anyhow::Error>(calibrate_job(Duration::from_micros(args.job_us)))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("job calibration panicked"))?
    })?;
    let ticks: Arc<Mutex<dyn TickSource>> = Arc::new(Mutex::new(ProcStat::default()));
    let step = Duration::from_millis(args.step_ms);
    let params = Params::default();
    let ctx = BenchContext {
        params: &params,
        placement,
        topology: topo,
        client: None,
    };
    let load = |rate: Option<f64>| OpenLoop {
        job_iterations,
        rate_per_s: rate,
        step,
        ticks: Arc::clone(&ticks),
    };
    let info = OpenLoop::info();
    // The maximum, to set the rates.
    let mut probe = load(None).prepare(&ctx)?;
    let first_max =
        smtlab_runner::measure(probe.as_mut(), &info, cfg, &Monotonic, &mut NoopObserver)
            .context("measuring the maximum")?
            .summary
            .max; // the fastest step: a slow spell of the host should not lower every rate
    drop(probe);
    if first_max.is_nan() || first_max <= 0.0 {
        bail!(
            "no job finished in a {} ms step at full speed; try a larger --step-ms",
            args.step_ms
        );
    }
    let n = args.steps;
    let mut labels = vec!["max".to_string()];
    let mut loads = vec![load(None)];
    for i in 1..=n {
        let pct = 100.0 * f64::from(i) / f64::from(n);
        labels.push(format!("{pct:.0}"));
        loads.push(load(Some(first_max * pct / 100.0)));
    }
    let mut instances = loads
        .iter()
        .map(|l| l.prepare(&ctx))
        .collect::<Result<Vec<_>, _>>()?;
    let mut observers = vec![NoopObserver; instances.len()];
    let turns = instances
        .iter_mut()
        .zip(&mut observers)
        .map(|(i, o)| Turn {
            instance: i.as_mut(),
            info: &info,
            observer: o,
        })
        .collect();
    let results = interleave(turns, cfg, &Monotonic);
    let mut cells = Vec::new();
    for (label, r) in labels.iter().zip(results) {
        let result = r.with_context(|| format!("the step at {label}"))?;
        cells.push(CellRecord {
            benchmark: info.name.clone(),
            group: info.group.clone(),
            unit: info.unit.clone(),
            direction: info.direction,
            params: [
                (RATE_PARAM.to_string(), label.clone()),
                (SMT_PARAM.to_string(), smt.to_string()),
                ("job_us".to_string(), args.job_us.to_string()),
            ]
            .into_iter()
            .collect(),
            placement_spec: spec.to_string(),
            placement: placement.clone(),
            result,
            counters: None,
        });
    }
    Ok(cells)
}

pub fn run(args: &UtilArgs) -> Result<()> {
    let mut states: Vec<Option<bool>> = Vec::new();
    for s in &args.smt {
        let on = match s.trim() {
            "on" => true,
            "off" => false,
            other => bail!("--smt {other:?}: expected off, on or off,on"),
        };
        if states.contains(&Some(on)) {
            bail!("--smt {s:?} given twice");
        }
        states.push(Some(on));
    }
    let db = args.db.clone().unwrap_or_else(smtlab_store::default_path);
    if db.exists() {
        drop(Store::open_existing(&db)?);
    }
    let mut notes: Vec<String> = Vec::new();
    let sysfs = Sysfs::system();
    if !states.is_empty()
        && let Some(why) = switch_refusal(&sysfs)
    {
        notes.push(format!(
            "--smt {}: not measured ({why}); measuring the state found only",
            args.smt.join(",")
        ));
        states.clear();
    }
    if states.is_empty() {
        states.push(None);
    }
    let root = Path::new("/");
    let topo0 =
        smtlab_topology::discover(root).context("cannot read this machine's CPU topology")?;
    if args.placement.is_none() && states == [None] && !topo0.smt_visible() {
        let why = format!(
            "no SMT visible (smt/control: {}): the load runs on 2c1t, not 1c2t",
            topo0.smt.control.as_deref().unwrap_or("absent")
        );
        // One line for everything this machine cannot do.
        match notes.pop() {
            Some(n) => notes.push(format!("{n}; {why}")),
            None => notes.push(why),
        }
    }
    // Resolve the placement of the state found before anything changes: a typo fails first.
    placement(args.placement.as_deref(), &topo0)?;
    let mut cfg = RunConfig {
        min_samples: args.samples as usize,
        max_samples: args.samples as usize,
        warmup_ns: 0,
        ..RunConfig::default()
    };
    smtlab_runner::config::validate(&cfg)?;
    cfg.known_overheads = Some(measure_overheads(&Monotonic));
    for n in &notes {
        eprintln!("note: {n}");
    }
    let started = unix_now_s();
    let mut switch = if states.iter().any(Option::is_some) {
        Some(SmtSwitch::new(sysfs.clone())?)
    } else {
        None
    };
    let mut cells = Vec::new();
    let mut topo_last = topo0.clone();
    for state in &states {
        let label = match state {
            Some(true) => "on",
            Some(false) => "off",
            None => "as found",
        };
        if let (Some(sw), Some(on)) = (switch.as_mut(), state) {
            sw.set(*on)
                .with_context(|| format!("cannot switch SMT {label}"))?;
        }
        let topo = smtlab_topology::discover(root).context("cannot read the CPU topology")?;
        let (spec, placed) = placement(args.placement.as_deref(), &topo)
            .with_context(|| format!("with SMT {label}"))?;
        if !args.json {
            emit(&format!(
                "SMT {label}: open-loop load on {} (CPUs {:?}), {} steps of {} ms per rate, {} us jobs\n",
                placed.name, placed.cpus, args.samples, args.step_ms, args.job_us
            ))?;
        }
        cells.extend(curve_cells(args, label, &topo, &spec, &placed, &cfg)?);
        topo_last = topo;
    }
    if let Some(sw) = switch.take() {
        sw.finish().context("cannot put the SMT state back")?;
    }
    let results = super::finished_run(
        Some("utilisation"),
        started,
        capture(&topo0),
        topo_last,
        cfg,
        notes.clone(),
        cells,
        Vec::new(),
    );
    let id = super::import_and_tell(&db, args.db.as_deref(), &results)?;
    let points = view::curve(&results.cells);
    if args.json {
        return emit(&json_text(&serde_json::json!({
            "run": id,
            "notes": notes,
            "curve": points,
        }))?);
    }
    emit(&view::curve_text(&points))?;
    emit(
        "busy = user + system + irq/softirq/steal of the placement's CPUs (all processes on them); % of max = achieved throughput over the maximum measured interleaved with the steps\n",
    )
}
