//! `smtlab bench NAME`: one benchmark under one or more placements, with the ratio of
//! every placement to the first (the SMT yield when the first is `1c1t` and another is
//! `1c2t`).

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use smtlab_bench::{BenchContext, Benchmark, Params};
use smtlab_model::counters::CellCounters;
use smtlab_model::{
    BenchInfo, CellKey, CellRecord, CellResult, RESULTS_SCHEMA, RunMeta, RunResults, RunStatus,
    SkippedCell,
};
use smtlab_model::{ResolvedPlacement, Topology};
use smtlab_runner::counting::{CountingSetup, SAMPLES_WINDOW};
use smtlab_runner::interleave::{Turn, interleave};
use smtlab_runner::stats::{Ratio, ratio};
use smtlab_runner::{Monotonic, NoopObserver, Observer, RunConfig, measure_overheads};

use super::{emit, json_text};
use crate::args::BenchArgs;
use crate::env::capture;
use crate::render;

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub benchmark: String,
    pub placement: String,
    pub baseline: String,
    /// `value(placement) / value(baseline)` with its 95% interval.
    #[serde(flatten)]
    pub ratio: Ratio,
}

/// `smtlab.results/1` with the ratios `bench` computed.
#[derive(Serialize)]
struct BenchOutput<'a> {
    #[serde(flatten)]
    results: &'a RunResults,
    comparisons: &'a [Comparison],
}

pub fn run(args: &BenchArgs) -> Result<()> {
    if args.interleave && args.counters {
        bail!(
            "--interleave with --counters: counters are recorded for cells measured one at a time; drop one of them"
        );
    }
    if args.repeat > 1 && args.counters {
        bail!(
            "--repeat {} with --counters: counters are recorded for single rounds only; drop one of them",
            args.repeat
        );
    }
    let benches = select(&args.names)?;
    check_params(&benches, &args.params)?;
    let topo = smtlab_topology::discover(Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    let specs = if args.placements.is_empty() {
        vec!["1c1t".to_string()]
    } else {
        args.placements.clone()
    };
    // Resolve every placement before measuring anything: a typo should not cost a run.
    let placements = specs
        .iter()
        .map(|s| {
            let spec = smtlab_placement::parse(s)?;
            smtlab_placement::resolve(&spec, &topo)
        })
        .collect::<Result<Vec<_>, _>>()?;
    if args.interleave && placements.iter().any(|p| p.is_uniprocessor()) {
        bail!("--interleave with 1c1t-up: the other placements need the CPUs it takes offline");
    }
    super::smt::check_uniprocessor(&placements)?;
    let mut cfg = if args.quick {
        RunConfig::quick()
    } else {
        RunConfig::default()
    };
    if let Some(ci) = args.ci_target {
        cfg.ci_target_rel = ci / 100.0;
    }
    if let Some(n) = args.max_samples {
        cfg.max_samples = n;
    }
    smtlab_runner::config::validate(&cfg)?;
    cfg.known_overheads = Some(measure_overheads(&Monotonic));
    cfg.counters = args.counters;
    let setup = args.counters.then(CountingSetup::probe);
    if let Some(setup) = &setup
        && !args.json
    {
        for line in super::counting::notes(setup) {
            eprintln!("note: {line}");
        }
    }

    if !args.json && !topo.smt_visible() {
        eprintln!(
            "note: no SMT visible on this machine (smt/control: {}); 1c2t and 2c2t cannot be measured here",
            topo.smt.control.as_deref().unwrap_or("absent")
        );
    }
    let env = capture(&topo);
    let started = unix_now_s();
    let several = benches.len() > 1;
    let mut cells: Vec<CellRecord> = Vec::new();
    let mut skipped: Vec<SkippedCell> = Vec::new();
    // A key given twice is a sweep: one job per combination, all checked before measuring.
    let mut jobs: Vec<(&Box<dyn Benchmark>, BenchInfo, Params)> = Vec::new();
    for bench in &benches {
        let info = bench.info();
        // With several benchmarks a parameter applies to those that declare it.
        let given: Vec<String> = args
            .params
            .iter()
            .filter(|p| !several || declares(&info, p))
            .cloned()
            .collect();
        for params in smtlab_bench::params::sweep(&info, &given, args.quick)? {
            jobs.push((bench, info.clone(), params));
        }
    }
    for (bench, info, params) in jobs {
        if !args.json {
            emit(&render::bench::heading(&info, &params))?;
        }
        let first = cells.len();
        let rounds = args.repeat as usize;
        // The rounds measured so far, per placement; `None` once that placement failed.
        let mut measured: Vec<Option<Vec<CellResult>>> = vec![Some(Vec::new()); specs.len()];
        for round in 0..rounds {
            let mut turns = if args.interleave {
                let active: Vec<bool> = measured.iter().map(Option::is_some).collect();
                measure_in_turn(
                    bench.as_ref(),
                    &info,
                    &params,
                    &placements,
                    &active,
                    &topo,
                    &cfg,
                )
            } else {
                Vec::new()
            };
            for (i, (spec_text, placement)) in specs.iter().zip(&placements).enumerate() {
                let Some(done) = measured[i].as_mut() else {
                    continue;
                };
                let outcome = match turns.get_mut(i).and_then(Option::take) {
                    Some(r) => r.map(|r| (r, None, None)),
                    None => smtlab_runner::client::client_for(
                        bench.as_ref(),
                        &topo,
                        placement,
                        &smtlab_placement::ClientRule::Apart,
                    )
                    .map_err(anyhow::Error::msg)
                    .and_then(|client| {
                        // 1c1t-up: the other CPUs offline for this cell only.
                        let _up = super::smt::enter_uniprocessor(placement, bench.client_side())?;
                        let ctx = BenchContext {
                            params: &params,
                            placement,
                            topology: &topo,
                            client: client.as_ref(),
                        };
                        measure_cell(bench.as_ref(), &info, &ctx, &cfg, setup.as_ref())
                    }),
                };
                let (result, counters, counters_note) = match outcome {
                    Ok(m) => m,
                    // One benchmark that cannot run on one placement (c2c-latency on
                    // a single CPU) should not cost the rest of a multi-benchmark run.
                    Err(e) if several => {
                        let reason = format!("{e:#}");
                        if !args.json {
                            emit(&format!("  skipped on {}: {reason}\n", placement.name))?;
                        }
                        skipped.push(SkippedCell {
                            key: CellKey {
                                benchmark: info.name.clone(),
                                params: params.iter().map(|(k, v)| (k.into(), v.into())).collect(),
                                placement: spec_text.clone(),
                            },
                            reason,
                        });
                        measured[i] = None;
                        continue;
                    }
                    Err(e) => {
                        return Err(e)
                            .with_context(|| format!("{} on {}", info.name, placement.name));
                    }
                };
                done.push(result);
                if round + 1 < rounds {
                    continue;
                }
                let result = smtlab_runner::rounds::pool(std::mem::take(done))
                    .expect("every round of this placement was measured");
                let cell = CellRecord {
                    benchmark: info.name.clone(),
                    group: info.group.clone(),
                    unit: info.unit.clone(),
                    direction: info.direction,
                    params: params.iter().map(|(k, v)| (k.into(), v.into())).collect(),
                    placement_spec: spec_text.clone(),
                    placement: placement.clone(),
                    result,
                    counters,
                };
                if !args.json {
                    let baseline = cells.get(first).map(|c| &c.result.summary);
                    emit(&render::bench::row(&cell, baseline))?;
                    if let Some(c) = &cell.counters {
                        emit(&format!(
                            "  counters: {}\n",
                            smtlab_report::counters::line(c)
                        ))?;
                    }
                    if let Some(note) = counters_note {
                        emit(&format!("  {note}\n"))?;
                    }
                } else if let Some(note) = counters_note {
                    eprintln!("note: {} on {}: {note}", info.name, placement.name);
                }
                cells.push(cell);
            }
        }
        if !args.json {
            emit(&render::bench::details(&cells[first..]))?;
        }
    }
    let comparisons = compare(&cells);
    if args.json {
        let now = unix_now_s();
        let results = RunResults {
            schema: RESULTS_SCHEMA.to_string(),
            run: RunMeta {
                id: 0,
                started_unix_s: started,
                finished_unix_s: Some(now),
                status: RunStatus::Finished,
                command_line: std::env::args().collect(),
                suite: None,
                environment: env,
                topology: topo,
                config: cfg,
                plan: cells
                    .iter()
                    .map(CellRecord::key)
                    .chain(skipped.iter().map(|s| s.key.clone()))
                    .collect(),
                notes: Vec::new(),
            },
            cells,
            skipped,
        };
        let out = BenchOutput {
            results: &results,
            comparisons: &comparisons,
        };
        return emit(&json_text(&out)?);
    }
    Ok(())
}

/// Prepares and measures one cell; with `setup`, counts it (counting opens before
/// `prepare`, so the workers it starts are counted).
fn measure_cell(
    bench: &dyn Benchmark,
    info: &BenchInfo,
    ctx: &BenchContext<'_>,
    cfg: &RunConfig,
    setup: Option<&CountingSetup>,
) -> Result<(CellResult, Option<CellCounters>, Option<String>)> {
    let mut counting = setup.map(|s| super::counting::begin(s, ctx.placement, ctx.topology));
    let outcome = bench
        .prepare(ctx)
        .map_err(anyhow::Error::from)
        .and_then(|mut i| {
            let observer: &mut dyn Observer = match counting.as_mut() {
                Some(c) => c,
                None => &mut NoopObserver,
            };
            let r = smtlab_runner::measure(i.as_mut(), info, cfg, &Monotonic, observer)?;
            if let Some(c) = counting.as_mut() {
                super::counting::trace_extra_sample(c, i.as_mut(), r.iterations);
            }
            Ok(r)
        });
    let (counters, note) = match counting {
        Some(c) if outcome.is_ok() => super::counting::finish(c, SAMPLES_WINDOW),
        _ => (None, None),
    };
    Ok((outcome?, counters, note))
}

/// One round of every active placement with their samples interleaved
/// ([`smtlab_runner::interleave`]); `None` for the inactive ones.
fn measure_in_turn(
    bench: &dyn Benchmark,
    info: &BenchInfo,
    params: &Params,
    placements: &[ResolvedPlacement],
    active: &[bool],
    topo: &Topology,
    cfg: &RunConfig,
) -> Vec<Option<Result<CellResult>>> {
    let mut out: Vec<Option<Result<CellResult>>> = Vec::new();
    let mut instances = Vec::new();
    for (placement, &on) in placements.iter().zip(active) {
        if !on {
            out.push(None);
            continue;
        }
        let client = match smtlab_runner::client::client_for(
            bench,
            topo,
            placement,
            &smtlab_placement::ClientRule::Apart,
        ) {
            Ok(c) => c,
            Err(reason) => {
                out.push(Some(Err(anyhow::Error::msg(reason))));
                continue;
            }
        };
        let ctx = BenchContext {
            params,
            placement,
            topology: topo,
            client: client.as_ref(),
        };
        match bench.prepare(&ctx) {
            Ok(i) => {
                // The client side outlives its instance: it is dropped after it below.
                instances.push((out.len(), i, client));
                out.push(None);
            }
            Err(e) => out.push(Some(Err(e.into()))),
        }
    }
    let mut observers: Vec<NoopObserver> = vec![NoopObserver; instances.len()];
    let turns = instances
        .iter_mut()
        .zip(&mut observers)
        .map(|((_, instance, _), observer)| Turn {
            instance: instance.as_mut(),
            info,
            observer,
        })
        .collect();
    let results = interleave(turns, cfg, &Monotonic);
    for ((slot, _, _), result) in instances.iter().zip(results) {
        out[*slot] = Some(result.map_err(anyhow::Error::from));
    }
    out
}

/// `all`, a group name (`compute`, `memory`, `threads`, `os`) or benchmark names.
pub fn select(names: &[String]) -> Result<Vec<Box<dyn Benchmark>>> {
    let mut out: Vec<Box<dyn Benchmark>> = Vec::new();
    for name in names {
        let group: Vec<Box<dyn Benchmark>> = smtlab_runner::catalog::all()
            .into_iter()
            .filter(|b| name == "all" || b.info().group == *name)
            .collect();
        if group.is_empty() {
            out.push(find(name)?);
        } else {
            out.extend(group);
        }
    }
    Ok(out)
}

fn declares(info: &smtlab_model::BenchInfo, param: &str) -> bool {
    let key = param.split_once('=').map_or(param, |(k, _)| k).trim();
    info.params.iter().any(|p| p.name == key)
}

/// With several benchmarks, a parameter no benchmark declares is still a typo.
fn check_params(benches: &[Box<dyn Benchmark>], params: &[String]) -> Result<()> {
    if benches.len() == 1 {
        return Ok(()); // Params::resolve gives the precise message.
    }
    for p in params {
        if !benches.iter().any(|b| declares(&b.info(), p)) {
            bail!("parameter {p:?} is accepted by none of the selected benchmarks");
        }
    }
    Ok(())
}

fn find(name: &str) -> Result<Box<dyn Benchmark>> {
    match smtlab_runner::catalog::find(name) {
        Some(b) => Ok(b),
        None => bail!(
            "unknown benchmark {name:?}; available: {}",
            smtlab_runner::catalog::names().join(", ")
        ),
    }
}

/// Every placement of a benchmark against that benchmark's first placement.
fn compare(cells: &[CellRecord]) -> Vec<Comparison> {
    let mut out = Vec::new();
    let mut baseline: Option<&CellRecord> = None;
    for c in cells {
        match baseline {
            Some(b) if b.benchmark == c.benchmark && b.params == c.params => {
                if let Some(r) = ratio(&c.result.summary, &b.result.summary) {
                    out.push(Comparison {
                        benchmark: c.benchmark.clone(),
                        placement: c.placement.name.clone(),
                        baseline: b.placement.name.clone(),
                        ratio: r,
                    });
                }
            }
            _ => baseline = Some(c),
        }
    }
    out
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
