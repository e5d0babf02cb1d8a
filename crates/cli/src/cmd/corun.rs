//! `smtlab corun` (the symbiosis matrix: each workload next to each other one, on the SMT
//! sibling and on another core) and `smtlab penalty` (a fixed piece of work alone and
//! next to each hog: the single-thread penalty). Both store a run (suites `corun` and
//! `penalty`) so `report` and `compare` work on them.
//!
//! Every pair is one interleaved group: A alone, A next to B on the sibling, A next to B
//! on another core, one sample of each in turn ([`smtlab_runner::interleave`]), so the
//! host's speed spells fall on all three alike. The partner runs only during A's samples
//! ([`smtlab_runner::corun`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use smtlab_bench::{BenchContext, Benchmark, Instance, Params};
use smtlab_model::{CellKey, CellRecord, CellResult, RunConfig, RunResults, SkippedCell, Topology};
use smtlab_report::corun::{self as view, FORM_PARAM, Form, PARTNER_PARAM};
use smtlab_runner::corun::command::ShellCommand;
use smtlab_runner::corun::{CoRun, CpuPair, PartnerSpec, calibrate, cpu_pair, placement_of};
use smtlab_runner::interleave::{Turn, interleave};
use smtlab_runner::{Monotonic, NoopObserver, measure_overheads};
use smtlab_store::Store;

use super::bench::unix_now_s;
use super::{emit, json_text};
use crate::env::capture;

/// The default workloads of the matrix: integer, floating point, memory bandwidth,
/// memory latency and a system call loop, one thread each.
pub const DEFAULT_WORKLOADS: [&str; 5] = [
    "int-ops",
    "fp-ops",
    "mem-read",
    "mem-latency",
    "null-syscall",
];
/// The default hogs of `penalty`.
pub const DEFAULT_HOGS: [&str; 4] = ["int-ops", "fp-ops", "mem-read", "null-syscall"];

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
}

/// A workload of the run: a catalog benchmark with its parameters, or a command.
struct Workload {
    bench: Arc<dyn Benchmark>,
    params: Params,
}

impl Workload {
    fn name(&self) -> String {
        self.bench.info().name
    }
}

fn catalog_workload(name: &str, given: &[String], defaults: &[(&str, &str)]) -> Result<Workload> {
    let Some(bench) = smtlab_runner::catalog::find(name) else {
        bail!(
            "unknown benchmark {name:?}; available: {}",
            smtlab_runner::catalog::names().join(", ")
        );
    };
    let info = bench.info();
    if bench.client_side() {
        bail!("{name} is a server workload with a client side; co-runs take single-CPU workloads");
    }
    let declared = |k: &str| info.params.iter().any(|p| p.name == k);
    let mut list: Vec<String> = defaults
        .iter()
        .filter(|(k, _)| declared(k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    list.extend(
        given
            .iter()
            .filter(|p| declared(p.split_once('=').map_or(p.as_str(), |(k, _)| k.trim())))
            .cloned(),
    );
    let params = Params::resolve(&info, &list, false)?;
    Ok(Workload {
        bench: Arc::from(bench),
        params,
    })
}

fn command_workload(text: &str) -> Result<Workload> {
    let c = ShellCommand::parse(text).map_err(anyhow::Error::msg)?;
    Ok(Workload {
        bench: Arc::new(c),
        params: Params::default(),
    })
}

/// A parameter no selected workload declares is a typo.
fn check_params(workloads: &[Workload], given: &[String]) -> Result<()> {
    for p in given {
        let key = p.split_once('=').map_or(p.as_str(), |(k, _)| k).trim();
        if !workloads
            .iter()
            .any(|w| w.bench.info().params.iter().any(|i| i.name == key))
        {
            bail!("--param {p:?} is accepted by none of the selected workloads");
        }
    }
    Ok(())
}

/// The forms to measure with their partner CPU, and one-line notes on those left out.
type Forms = (Vec<(Form, u32)>, Vec<String>);

/// `sibling on CPU 1, cores on CPU 2`: the forms measured, for the header line.
fn forms_text(forms: &[(Form, u32)]) -> String {
    forms
        .iter()
        .map(|(f, c)| format!("{} on CPU {c}", f.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The forms asked for and the ones this machine can run, with the one-line reason for
/// any left out.
fn forms(asked: &[String], pair: &CpuPair) -> Result<Forms> {
    let wanted: Vec<Form> = if asked.is_empty() {
        vec![Form::Sibling, Form::Cores]
    } else {
        asked
            .iter()
            .map(|f| match Form::parse(f.trim()) {
                Some(Form::Alone) | None => {
                    bail!("--forms {f:?}: expected sibling or cores (alone is always measured)")
                }
                Some(form) => Ok(form),
            })
            .collect::<Result<_>>()?
    };
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for form in wanted {
        let cpu = match form {
            Form::Sibling => &pair.sibling,
            _ => &pair.other_core,
        };
        match cpu {
            Ok(c) => out.push((form, *c)),
            Err(why) => notes.push(format!("{} form not measured: {why}", form.name())),
        }
    }
    if out.is_empty() {
        bail!("nothing to measure: {}", notes.join("; "));
    }
    Ok((out, notes))
}

fn config(quick: bool) -> Result<RunConfig> {
    let mut cfg = if quick {
        RunConfig::quick()
    } else {
        RunConfig::default()
    };
    smtlab_runner::config::validate(&cfg)?;
    cfg.known_overheads = Some(measure_overheads(&Monotonic));
    Ok(cfg)
}

/// One cell of a group: the form, the partner (none alone), the CPUs.
struct Planned {
    form: Form,
    partner: Option<usize>,
    cpus: Vec<u32>,
}

/// Prepares and measures the cells of one group interleaved; a cell that cannot be
/// prepared fails alone.
fn measure_group(
    a: &Workload,
    fixed: Option<u64>,
    partners: &[Workload],
    group: &[Planned],
    topo: &Topology,
    cfg: &RunConfig,
) -> Vec<Result<CellResult>> {
    let info = a.bench.info();
    let mut out: Vec<Option<Result<CellResult>>> = Vec::new();
    let mut instances: Vec<(usize, Box<dyn Instance>)> = Vec::new();
    for cell in group {
        let corun = CoRun {
            a: Arc::clone(&a.bench),
            partner: cell.partner.map(|i| PartnerSpec {
                bench: Arc::clone(&partners[i].bench),
                params: partners[i].params.clone(),
            }),
            fixed_iterations: fixed,
            // The matrix needs each partner's own reference; the penalty does not.
            partner_reference: fixed.is_none(),
        };
        let placement = placement_of(&format!("corun-{}", cell.form.name()), &cell.cpus, topo);
        let ctx = BenchContext {
            params: &a.params,
            placement: &placement,
            topology: topo,
            client: None,
        };
        match corun.prepare(&ctx) {
            Ok(i) => {
                instances.push((out.len(), i));
                out.push(None);
            }
            Err(e) => out.push(Some(Err(e.into()))),
        }
    }
    let mut observers = vec![NoopObserver; instances.len()];
    let turns = instances
        .iter_mut()
        .zip(&mut observers)
        .map(|((_, i), o)| Turn {
            instance: i.as_mut(),
            info: &info,
            observer: o,
        })
        .collect();
    let results = interleave(turns, cfg, &Monotonic);
    for ((slot, _), r) in instances.iter().zip(results) {
        out[*slot] = Some(r.map_err(anyhow::Error::from));
    }
    // Dropping the instances stops every partner before the next group starts.
    drop(instances);
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(anyhow::anyhow!("not measured"))))
        .collect()
}

fn record(
    a: &Workload,
    partner: &str,
    form: Form,
    cpus: &[u32],
    topo: &Topology,
    result: CellResult,
) -> CellRecord {
    let info = a.bench.info();
    let mut params: std::collections::BTreeMap<String, String> =
        a.params.iter().map(|(k, v)| (k.into(), v.into())).collect();
    params.insert(FORM_PARAM.into(), form.name().into());
    params.insert(PARTNER_PARAM.into(), partner.into());
    let placement = placement_of(&format!("corun-{}", form.name()), cpus, topo);
    CellRecord {
        benchmark: info.name,
        group: info.group,
        unit: info.unit,
        direction: info.direction,
        params,
        placement_spec: placement.name.clone(),
        placement,
        result,
        counters: None,
    }
}

fn skipped(a: &Workload, partner: &str, form: Form, reason: String) -> SkippedCell {
    let mut params: std::collections::BTreeMap<String, String> =
        a.params.iter().map(|(k, v)| (k.into(), v.into())).collect();
    params.insert(FORM_PARAM.into(), form.name().into());
    params.insert(PARTNER_PARAM.into(), partner.into());
    SkippedCell {
        key: CellKey {
            benchmark: a.name(),
            params,
            placement: format!("corun-{}", form.name()),
        },
        reason,
    }
}

/// Everything one command measured, ready to store.
#[derive(Default)]
struct Outcome {
    cells: Vec<CellRecord>,
    skipped: Vec<SkippedCell>,
}

/// Measures `a` with each partner in `partners` (one interleaved group per partner).
#[allow(clippy::too_many_arguments)]
fn measure_rows(
    a: &Workload,
    fixed: Option<u64>,
    partners: &[Workload],
    forms: &[(Form, u32)],
    pair: &CpuPair,
    topo: &Topology,
    cfg: &RunConfig,
    json: bool,
    out: &mut Outcome,
) -> Result<()> {
    for (pi, b) in partners.iter().enumerate() {
        let bname = b.name();
        let mut group = vec![Planned {
            form: Form::Alone,
            partner: None,
            cpus: vec![pair.cpu],
        }];
        group.extend(forms.iter().map(|&(form, cpu)| Planned {
            form,
            partner: Some(pi),
            cpus: vec![pair.cpu, cpu],
        }));
        let results = measure_group(a, fixed, partners, &group, topo, cfg);
        let alone = results
            .first()
            .and_then(|r| r.as_ref().ok())
            .map(|r| r.summary.clone());
        for (cell, r) in group.iter().zip(results) {
            match r {
                Ok(result) => {
                    if !json {
                        let what = match cell.form {
                            Form::Alone => format!("{} alone (beside {bname})", a.name()),
                            f => format!("{} next to {bname}, {}", a.name(), f.label()),
                        };
                        let slow = match (cell.form, &alone) {
                            (Form::Alone, _) | (_, None) => String::new(),
                            (_, Some(al)) => {
                                view::slowdown(al, &result.summary, a.bench.info().direction)
                                    .map(|s| format!("  slowdown {}", ratio_line(&s)))
                                    .unwrap_or_default()
                            }
                        };
                        emit(&format!(
                            "  {what}: {} {} (n={}){slow}\n",
                            crate::render::bench::num(result.summary.mean),
                            a.bench.info().unit,
                            result.summary.n
                        ))?;
                    }
                    out.cells
                        .push(record(a, &bname, cell.form, &cell.cpus, topo, result));
                }
                Err(e) => {
                    let reason = format!("{e:#}");
                    if !json {
                        emit(&format!(
                            "  {} next to {bname} ({}): skipped: {reason}\n",
                            a.name(),
                            cell.form.name()
                        ))?;
                    }
                    out.skipped.push(skipped(a, &bname, cell.form, reason));
                }
            }
        }
    }
    Ok(())
}

fn ratio_line(r: &smtlab_model::stats::Ratio) -> String {
    match (r.ci95_low, r.ci95_high) {
        (Some(lo), Some(hi)) => format!("{:.3} [{lo:.3}, {hi:.3}]", r.ratio),
        _ => format!("{:.3} (no interval)", r.ratio),
    }
}

fn open_db(db: &Option<PathBuf>) -> Result<PathBuf> {
    let path = db.clone().unwrap_or_else(smtlab_store::default_path);
    if path.exists() {
        drop(Store::open_existing(&path)?);
    }
    Ok(path)
}

#[allow(clippy::too_many_arguments)]
fn store(
    path: &Path,
    db_arg: &Option<PathBuf>,
    suite: &str,
    started: u64,
    topo: &Topology,
    cfg: RunConfig,
    notes: Vec<String>,
    out: Outcome,
) -> Result<(i64, RunResults)> {
    let results = super::finished_run(
        Some(suite),
        started,
        capture(topo),
        topo.clone(),
        cfg,
        notes,
        out.cells,
        out.skipped,
    );
    let id = super::import_and_tell(path, db_arg.as_deref(), &results)?;
    Ok((id, results))
}

fn machine() -> Result<(Topology, CpuPair)> {
    let topo = smtlab_topology::discover(Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    let pair = cpu_pair(&topo).map_err(anyhow::Error::msg)?;
    Ok((topo, pair))
}

#[derive(Serialize)]
struct MatrixJson<'a> {
    run: i64,
    notes: &'a [String],
    matrix: &'a [view::Entry],
}

pub fn run_corun(args: &CorunArgs) -> Result<()> {
    let defaults = [("threads", "1")];
    let mut workloads: Vec<Workload> = Vec::new();
    let names: Vec<String> = if args.names.is_empty() && args.cmds.is_empty() {
        DEFAULT_WORKLOADS.iter().map(|s| s.to_string()).collect()
    } else {
        args.names.clone()
    };
    for n in &names {
        workloads.push(catalog_workload(n, &args.common.params, &defaults)?);
    }
    for c in &args.cmds {
        workloads.push(command_workload(c)?);
    }
    let mut seen: Vec<String> = Vec::new();
    for w in &workloads {
        let n = w.name();
        if seen.contains(&n) {
            bail!("workload {n:?} given twice; names must be unique");
        }
        seen.push(n);
    }
    check_params(&workloads, &args.common.params)?;
    let (topo, pair) = machine()?;
    let (forms, notes) = forms(&args.common.forms, &pair)?;
    let db = open_db(&args.common.db)?;
    let cfg = config(args.common.quick)?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    if !args.common.json {
        emit(&format!(
            "corun: {} workloads, each on CPU {} alone and next to each other one ({}); slowdown = alone / co-run for rates, co-run / alone for times (above 1: slower)\n",
            workloads.len(),
            pair.cpu,
            forms_text(&forms)
        ))?;
    }
    let started = unix_now_s();
    let mut out = Outcome::default();
    for a in &workloads {
        if !args.common.json {
            emit(&format!("{}:\n", a.name()))?;
        }
        measure_rows(
            a,
            None,
            &workloads,
            &forms,
            &pair,
            &topo,
            &cfg,
            args.common.json,
            &mut out,
        )?;
    }
    let (id, results) = store(
        &db,
        &args.common.db,
        "corun",
        started,
        &topo,
        cfg,
        notes.clone(),
        out,
    )?;
    let entries = view::matrix(&results.cells);
    if args.common.json {
        return emit(&json_text(&MatrixJson {
            run: id,
            notes: &notes,
            matrix: &entries,
        })?);
    }
    for (form, _) in &forms {
        let t = view::matrix_text(&entries, *form);
        if t.is_empty() {
            continue;
        }
        emit(&format!(
            "\nSlowdown of the measured workload (row) next to the partner (column), {} [95% CI]:\n{t}",
            form.label()
        ))?;
        let lines = view::combined_text(&entries, *form);
        if !lines.is_empty() {
            emit("Pairs (combined speed above 1: more done side by side than taking turns):\n")?;
            for l in lines {
                emit(&format!("  {l}\n"))?;
            }
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct PenaltyJson<'a> {
    run: i64,
    notes: &'a [String],
    penalties: &'a [view::Penalty],
}

pub fn run_penalty(args: &PenaltyArgs) -> Result<()> {
    let task = match &args.cmd {
        Some(c) => command_workload(c)?,
        None => {
            let name = args.task.as_deref().unwrap_or("mem-latency");
            let defaults: &[(&str, &str)] = if args.task.is_none() {
                &[("threads", "1"), ("size", "4MiB")]
            } else {
                &[("threads", "1")]
            };
            catalog_workload(name, &args.common.params, defaults)?
        }
    };
    let hog_names: Vec<String> = if args.hogs.is_empty() {
        DEFAULT_HOGS.iter().map(|s| s.to_string()).collect()
    } else {
        args.hogs.clone()
    };
    let hogs = hog_names
        .iter()
        .map(|h| catalog_workload(h.trim(), &args.common.params, &[("threads", "1")]))
        .collect::<Result<Vec<_>>>()?;
    if !(args.run_ms.is_finite() && args.run_ms > 0.0 && args.run_ms <= 10_000.0) {
        bail!(
            "--run-ms {}: expected a number of milliseconds in (0, 10000]",
            args.run_ms
        );
    }
    let mut all: Vec<&Workload> = vec![&task];
    all.extend(hogs.iter());
    for p in &args.common.params {
        let key = p.split_once('=').map_or(p.as_str(), |(k, _)| k).trim();
        if !all
            .iter()
            .any(|w| w.bench.info().params.iter().any(|i| i.name == key))
        {
            bail!("--param {p:?} is accepted by none of the selected workloads");
        }
    }
    let (topo, pair) = machine()?;
    let (forms, mut notes) = forms(&args.common.forms, &pair)?;
    if let Err(why) = &pair.sibling {
        notes.retain(|n| !n.starts_with("sibling form"));
        notes.push(format!(
            "single-thread penalty not measured ({why}); shown instead: the task alone and next to each hog on another core"
        ));
    }
    let db = open_db(&args.common.db)?;
    let mut cfg = config(args.common.quick)?;
    cfg.min_samples = args.samples as usize;
    cfg.max_samples = args.samples as usize;
    for n in &notes {
        eprintln!("note: {n}");
    }
    // The fixed piece of work: calibrated once, alone, on the task's CPU.
    let fixed = match &args.cmd {
        Some(_) => 1,
        None => {
            let placement = placement_of("corun-alone", &[pair.cpu], &topo);
            let mut inst = task.bench.prepare(&BenchContext {
                params: &task.params,
                placement: &placement,
                topology: &topo,
                client: None,
            })?;
            calibrate(inst.as_mut(), (args.run_ms * 1e6) as u64)?
        }
    };
    if !args.common.json {
        emit(&format!(
            "penalty: {} ({} iterations per run) on CPU {}, {} runs per cell, alone and next to {} ({})\n",
            task.name(),
            fixed,
            pair.cpu,
            args.samples,
            hog_names.join(", "),
            forms_text(&forms)
        ))?;
    }
    let started = unix_now_s();
    let mut out = Outcome::default();
    // One interleaved group holding the alone cell and every hog, so each penalty is
    // against a reference measured in the same stretch of time.
    let mut group = vec![Planned {
        form: Form::Alone,
        partner: None,
        cpus: vec![pair.cpu],
    }];
    for (i, _) in hogs.iter().enumerate() {
        for &(form, cpu) in &forms {
            group.push(Planned {
                form,
                partner: Some(i),
                cpus: vec![pair.cpu, cpu],
            });
        }
    }
    let results = measure_group(&task, Some(fixed), &hogs, &group, &topo, &cfg);
    for (cell, r) in group.iter().zip(results) {
        let partner = match cell.partner {
            Some(i) => hogs[i].name(),
            None => "-".into(),
        };
        match r {
            Ok(result) => out.cells.push(record(
                &task, &partner, cell.form, &cell.cpus, &topo, result,
            )),
            Err(e) => {
                let reason = format!("{e:#}");
                if !args.common.json {
                    emit(&format!(
                        "  next to {partner} ({}): skipped: {reason}\n",
                        cell.form.name()
                    ))?;
                }
                out.skipped
                    .push(skipped(&task, &partner, cell.form, reason));
            }
        }
    }
    let (id, results) = store(
        &db,
        &args.common.db,
        "penalty",
        started,
        &topo,
        cfg,
        notes.clone(),
        out,
    )?;
    let pen = view::penalties(&results.cells, &task.name());
    if args.common.json {
        return emit(&json_text(&PenaltyJson {
            run: id,
            notes: &notes,
            penalties: &pen,
        })?);
    }
    emit(&format!(
        "\nRun time of one piece of work next to each hog against alone (above 1: slower) [95% CI]:\n{}",
        view::penalty_text(&pen)
    ))?;
    Ok(())
}

/// The co-run matrix, penalties and utilisation curve of a stored run, for `smtlab
/// report`'s terminal summary; empty for runs that have none.
pub fn summary_text(results: &RunResults) -> String {
    let mut out = String::new();
    let entries = view::matrix(&results.cells);
    for form in [Form::Sibling, Form::Cores] {
        let t = view::matrix_text(&entries, form);
        if !t.is_empty() {
            out.push_str(&format!(
                "\nCo-run slowdown of the measured workload (row) next to the partner (column), {} [95% CI]:\n{t}",
                form.label()
            ));
        }
    }
    if results.run.suite.as_deref() == Some("penalty") {
        let mut tasks: Vec<&str> = Vec::new();
        for c in &results.cells {
            if view::form_of(c).is_some() && !tasks.contains(&c.benchmark.as_str()) {
                tasks.push(&c.benchmark);
            }
        }
        for task in tasks {
            let p = view::penalties(&results.cells, task);
            if !p.is_empty() {
                out.push_str(&format!(
                    "\nRun time of {task} next to each hog against alone [95% CI]:\n{}",
                    view::penalty_text(&p)
                ));
            }
        }
    }
    let curve = smtlab_report::utilisation::curve(&results.cells);
    if !curve.is_empty() {
        out.push_str(&format!(
            "\nReported utilisation against capacity:\n{}",
            smtlab_report::utilisation::curve_text(&curve)
        ));
    }
    out
}
