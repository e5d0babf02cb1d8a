//! `smtlab bench NAME`: one benchmark under one or more placements, with the ratio of
//! every placement to the first (the SMT yield when the first is `1c1t` and another is
//! `1c2t`).

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use smtlab_bench::{BenchContext, Benchmark, Params};
use smtlab_model::ResolvedPlacement;
use smtlab_runner::stats::{Ratio, ratio};
use smtlab_runner::{CellResult, Monotonic, NoopObserver, RunConfig, measure_overheads};

use super::{emit, json_text};
use crate::args::BenchArgs;
use crate::env::{Environment, capture};
use crate::render;

/// Schema of the results JSON that `bench`, and later `run` and `report`, print.
pub const RESULTS_SCHEMA: &str = "smtlab.results/1";

#[derive(Debug, Serialize)]
pub struct Cell {
    pub benchmark: String,
    pub group: String,
    pub unit: String,
    pub direction: smtlab_model::Direction,
    pub params: std::collections::BTreeMap<String, String>,
    pub placement: ResolvedPlacement,
    pub result: CellResult,
}

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub benchmark: String,
    pub placement: String,
    pub baseline: String,
    /// `value(placement) / value(baseline)` with its 95% interval.
    #[serde(flatten)]
    pub ratio: Ratio,
}

#[derive(Serialize)]
struct Results<'a> {
    schema: &'static str,
    environment: &'a Environment,
    cells: &'a [Cell],
    comparisons: &'a [Comparison],
}

pub fn run(args: &BenchArgs) -> Result<()> {
    let bench = find(&args.name)?;
    let info = bench.info();
    let params = Params::resolve(&info, &args.params, args.quick)?;
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
    cfg.validate()?;
    cfg.known_overheads = Some(measure_overheads(&Monotonic));

    let env = capture(&topo);
    let mut cells: Vec<Cell> = Vec::new();
    if !args.json {
        emit(&render::bench::heading(&info, &params))?;
        if !topo.smt_visible() {
            eprintln!(
                "note: no SMT visible on this machine ({}); 1c2t and 2c2t cannot be measured here",
                topo.smt.control.as_deref().unwrap_or("no smt/control file")
            );
        }
    }
    for placement in placements {
        let ctx = BenchContext {
            params: &params,
            placement: &placement,
            topology: &topo,
        };
        let mut instance = bench
            .prepare(&ctx)
            .with_context(|| format!("{} on {}", info.name, placement.name))?;
        let result = smtlab_runner::measure(
            instance.as_mut(),
            &info,
            &cfg,
            &Monotonic,
            &mut NoopObserver,
        )
        .with_context(|| format!("{} on {}", info.name, placement.name))?;
        drop(instance);
        let cell = Cell {
            benchmark: info.name.clone(),
            group: info.group.clone(),
            unit: info.unit.clone(),
            direction: info.direction,
            params: params.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            placement,
            result,
        };
        if !args.json {
            let baseline = cells.first().map(|c| &c.result.summary);
            emit(&render::bench::row(&cell, baseline))?;
        }
        cells.push(cell);
    }
    let comparisons = compare(&cells);
    if args.json {
        let out = Results {
            schema: RESULTS_SCHEMA,
            environment: &env,
            cells: &cells,
            comparisons: &comparisons,
        };
        return emit(&json_text(&out)?);
    }
    emit(&render::bench::details(&cells))
}

fn find(name: &str) -> Result<Box<dyn Benchmark>> {
    match smtlab_bench::catalog::find(name) {
        Some(b) => Ok(b),
        None => bail!(
            "unknown benchmark {name:?}; available: {}",
            smtlab_bench::catalog::names().join(", ")
        ),
    }
}

/// Every placement against the first.
fn compare(cells: &[Cell]) -> Vec<Comparison> {
    let Some(first) = cells.first() else {
        return Vec::new();
    };
    cells
        .iter()
        .skip(1)
        .filter_map(|c| {
            Some(Comparison {
                benchmark: c.benchmark.clone(),
                placement: c.placement.name.clone(),
                baseline: first.placement.name.clone(),
                ratio: ratio(&c.result.summary, &first.result.summary)?,
            })
        })
        .collect()
}
