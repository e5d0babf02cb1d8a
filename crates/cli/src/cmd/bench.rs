//! `smtlab bench NAME`: one benchmark under one or more placements, with the ratio of
//! every placement to the first (the SMT yield when the first is `1c1t` and another is
//! `1c2t`).

use std::path::Path;

use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use smtlab_bench::{Benchmark, Params};
use smtlab_model::{BenchInfo, CellKey, CellRecord, RunResults, SkippedCell};
use smtlab_runner::counting::{CountingSetup, Machine};
use smtlab_runner::session::{
    CellPlan, Counting, Group, Measured, Session, SessionObserver, param_map,
};
use smtlab_runner::stats::{Ratio, ratio};
use smtlab_runner::{Monotonic, RunConfig, measure_overheads};

use super::{emit, json_text};
use crate::args::BenchArgs;
use crate::env::capture;
use crate::render;
use crate::settings::{select, smt_cell, smt_turns, switchable_states, unix_now_s};

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
    // Everything is checked before anything is printed or measured.
    let benches = select(&args.names)?;
    super::check_stdout_owner(args.json, args.export_markdown.as_deref())?;
    let md_stdout = args
        .export_markdown
        .as_ref()
        .is_some_and(|p| p.as_os_str() == "-");
    check_params(&benches, &args.params)?;
    let several = benches.len() > 1;
    // A key given twice is a sweep: one parameter set per combination, all checked
    // before measuring.
    let mut resolved_params = Vec::with_capacity(benches.len());
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
            resolved_params.push((bench, info.clone(), params));
        }
    }
    let topo = smtlab_topology::discover(Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    let asked = if args.placements.is_empty() {
        vec!["1c1t".to_string()]
    } else {
        crate::settings::split_placements(&args.placements)
    };
    // Resolve every placement before measuring anything: a typo should not cost a run.
    let (specs, placements, unmeasured) = resolve_placements(&asked, &topo, args.smt.is_empty())?;
    if args.interleave && placements.iter().any(|p| p.is_uniprocessor()) {
        bail!("--interleave with 1c1t-up: the other placements need the CPUs it takes offline");
    }
    crate::settings::check_uniprocessor(&placements)?;
    let sysfs = smtlab_control::Sysfs::system();
    let states = switchable_states(&args.smt, &placements, &topo, &sysfs)?;
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
        for line in setup.missing_lines() {
            crate::term::note_fit(&format!("note: {line}"));
        }
    }
    if !args.json && !topo.smt_visible() && args.smt.is_empty() {
        let text = format!(
            "note: no SMT visible on this machine (smt/control: {}); 1c2t and 2c2t cannot be measured here",
            topo.smt.control.as_deref().unwrap_or("absent")
        );
        crate::term::note_fit(&text);
    }
    for note in benches.iter().flat_map(|b| b.notes()) {
        crate::term::note_fit(&format!("note: {note}"));
    }
    let env = capture(&topo);
    let started = unix_now_s();

    // One group per benchmark: its placements, measured together when interleaving.
    let groups: Vec<Group<'_>> = resolved_params
        .iter()
        .map(|(bench, info, params)| {
            specs
                .iter()
                .zip(&placements)
                .map(|(spec, placement)| CellPlan {
                    bench: bench.as_ref(),
                    info: info.clone(),
                    params: params.clone(),
                    key: CellKey {
                        benchmark: info.name.clone(),
                        params: param_map(params),
                        conditions: Default::default(),
                        placement: spec.clone(),
                    },
                    placement: Ok(placement.clone()),
                    work_unit: None,
                    warmup_samples: None,
                })
                .collect()
        })
        .collect();
    let stop = AtomicBool::new(false);
    let session_on =
        |topo: &smtlab_model::Topology, groups: Vec<Group<'_>>, observer: &mut BenchPrinter<'_>| {
            Session {
                topo,
                cfg: &cfg,
                clock: &Monotonic,
                client_rule: super::client_rule(&args.client),
                counting: setup.as_ref().map(|setup| Counting {
                    setup,
                    backend: &Machine,
                }),
                repeat: args.repeat as usize,
                interleave: args.interleave,
                stop: &stop,
                cell_state: Some(&crate::settings::cell_state),
            }
            .run(groups, observer)
        };
    let headings: Vec<(BenchInfo, Params)> = resolved_params
        .iter()
        .map(|(_, info, params)| (info.clone(), params.clone()))
        .collect();
    let total: usize = groups.iter().map(Vec::len).sum();
    let per_cell = (cfg.max_samples * args.repeat as usize).max(1) as u64;
    let mut printer = BenchPrinter {
        // The bar counts sample slots (each cell's most samples, every round), so it
        // moves and its ETA means something while the first cell is measured.
        bar: crate::term::progress_bar_with(total as u64 * per_cell, args.json, false),
        per_cell,
        total_cells: total,
        done_cells: 0,
        done_slots: 0,
        in_flight: std::collections::HashMap::new(),
        // The tables give way to JSON or Markdown on standard output.
        json: args.json || md_stdout,
        several: several || !states.is_empty(),
        params: &headings,
        cells: Vec::new(),
        skipped: Vec::new(),
        first_of_bench: 0,
        heading_for: None,
        error: None,
        write_error: None,
    };
    if states.is_empty() {
        session_on(&topo, groups, &mut printer);
    } else {
        // The SMT states take turns per benchmark and parameter set, so a drift of the
        // machine's speed falls on both states rather than on one whole pass.
        let switch = smtlab_control::SmtSwitch::new(sysfs)?;
        smt_turns(switch, &groups, &states, |group, on| {
            // With SMT off the siblings are offline: placements are resolved anew.
            let topo_now = smtlab_topology::discover(Path::new("/"))
                .context("cannot read the CPU topology after switching SMT")?;
            let cells: Group<'_> = group
                .iter()
                .map(|c| smt_cell(c, on, &topo_now))
                .collect::<Result<_>>()?;
            Ok(session_on(&topo_now, vec![cells], &mut printer))
        })?;
    }
    printer.bar.finish_and_clear();
    printer.flush_details();
    if let Some(e) = printer.write_error.take() {
        return Err(e);
    }
    if let Some(e) = printer.error.take() {
        bail!(e);
    }
    let BenchPrinter {
        cells, mut skipped, ..
    } = printer;
    let comparisons = compare(&cells);
    if !args.json && !md_stdout {
        // The details end with a blank line; the SMT off vs on table does not.
        let mut apart = false;
        if states.len() == 2 {
            let table = smtlab_report::smt_states::text(&cells);
            apart = !table.is_empty();
            emit(&table)?;
        }
        let mut lines = crate::verdict::bench(&cells);
        if !unmeasured.is_empty() {
            let names: Vec<String> = unmeasured.iter().map(|(s, _)| s.clone()).collect();
            lines.push(crate::verdict::unmeasured(
                &names,
                topo.smt.control.as_deref(),
            ));
        }
        if !lines.is_empty() {
            if apart {
                emit("\n")?;
            }
            for l in &lines {
                emit(&render::table::wrap(l, render::table::Layout::term()))?;
            }
        }
    }
    // The SMT placements this machine cannot give are in the results as skipped cells,
    // with the reason, like any other cell that could not be measured.
    for (_, info, params) in &resolved_params {
        for (spec, reason) in &unmeasured {
            skipped.push(SkippedCell {
                key: CellKey {
                    benchmark: info.name.clone(),
                    params: param_map(params),
                    conditions: Default::default(),
                    placement: spec.clone(),
                },
                reason: reason.clone(),
            });
        }
    }
    if let Some(path) = &args.export_markdown {
        super::export_markdown(path, &cells)?;
    }
    if args.json {
        let results =
            super::finished_run(None, started, env, topo, cfg, Vec::new(), cells, skipped);
        let out = BenchOutput {
            results: &results,
            comparisons: &comparisons,
        };
        return emit(&json_text(&out)?);
    }
    Ok(())
}

/// Prints `bench`'s tables as cells are measured and keeps the cells for JSON and the
/// comparisons.
struct BenchPrinter<'a> {
    /// Progress on standard error (hidden when not a terminal, with --quiet or --json).
    bar: indicatif::ProgressBar,
    /// Sample slots per cell: its most samples times the rounds.
    per_cell: u64,
    total_cells: usize,
    done_cells: usize,
    /// Slots of the finished cells.
    done_slots: u64,
    /// Samples taken so far by the cells in progress (several when interleaving).
    in_flight: std::collections::HashMap<String, u64>,
    json: bool,
    several: bool,
    params: &'a [(BenchInfo, Params)],
    cells: Vec<CellRecord>,
    skipped: Vec<SkippedCell>,
    /// Index in `cells` of the current benchmark's first cell (the ratios' baseline).
    first_of_bench: usize,
    /// The benchmark and parameters whose heading was printed last.
    heading_for: Option<(String, std::collections::BTreeMap<String, String>)>,
    /// Why a single-benchmark run failed.
    error: Option<String>,
    write_error: Option<anyhow::Error>,
}

impl BenchPrinter<'_> {
    fn out(&mut self, text: &str) {
        if self.write_error.is_none()
            && let Err(e) = self.bar.suspend(|| emit(text))
        {
            self.write_error = Some(e);
        }
    }

    /// The measurement details of the benchmark whose rows were printed last.
    fn flush_details(&mut self) {
        if self.heading_for.is_some() && !self.json {
            let text = render::bench::details(
                &self.cells[self.first_of_bench..],
                render::table::Layout::term(),
            );
            self.out(&text);
        }
    }
}

/// A cell's name in the bar's bookkeeping.
fn slot_key(key: &CellKey) -> String {
    format!(
        "{} {:?} {}",
        key.benchmark,
        key.flat_params(),
        key.placement
    )
}

impl BenchPrinter<'_> {
    fn cell_done(&mut self, key: &CellKey) {
        self.in_flight.remove(&slot_key(key));
        self.done_cells += 1;
        self.done_slots += self.per_cell;
        let pos = self.done_slots + self.in_flight.values().sum::<u64>();
        self.bar.set_position(pos);
    }

    /// The heading of `key`'s benchmark, when its first cell is done (so a benchmark that
    /// cannot be prepared at all fails before anything is printed).
    fn heading_for(&mut self, key: &CellKey) {
        let this = (key.benchmark.clone(), key.flat_params());
        let bench_params = key.params.clone();
        let smt = key.smt();
        if self.heading_for.as_ref() == Some(&this) {
            return;
        }
        self.flush_details();
        self.heading_for = Some(this);
        self.first_of_bench = self.cells.len();
        if !self.json
            && let Some((info, params)) = self
                .params
                .iter()
                .find(|(i, p)| i.name == key.benchmark && param_map(p) == bench_params)
        {
            let mut text = render::bench::heading(info, params, render::table::Layout::term());
            if let Some(state) = smt {
                text.push_str(&format!("  with SMT {state}\n"));
            }
            self.out(&text);
        }
    }
}

impl SessionObserver for BenchPrinter<'_> {
    fn cell_started(&mut self, key: &CellKey) {
        self.bar.set_message(format!(
            "cell {}/{}: {} {}",
            self.done_cells + 1,
            self.total_cells,
            key.benchmark,
            key.placement
        ));
    }

    fn sample(&mut self, key: &CellKey, round: usize, index: usize) {
        let max = self.per_cell;
        let taken = self.in_flight.entry(slot_key(key)).or_insert(0);
        *taken = (*taken + 1).min(max);
        let pos = self.done_slots + self.in_flight.values().sum::<u64>();
        self.bar.set_position(pos);
        self.bar.set_message(format!(
            "cell {}/{}: {} {} (round {}, sample {})",
            self.done_cells + 1,
            self.total_cells,
            key.benchmark,
            key.placement,
            round + 1,
            index + 1
        ));
    }

    fn measured(&mut self, m: Measured<'_>) -> ControlFlow<()> {
        self.cell_done(&m.record.key());
        let cell = m.record.clone();
        self.heading_for(&cell.key());
        if !self.json {
            let baseline = self.cells.get(self.first_of_bench);
            let mut text = render::bench::row(&cell, baseline, render::table::Layout::term());
            if let Some(c) = &cell.counters {
                text.push_str(&render::table::wrap(
                    &format!("  counters: {}", smtlab_report::counters::line(c)),
                    render::table::Layout::term(),
                ));
            }
            self.out(&text);
        }
        if let Some(note) = m.counters_note {
            crate::term::note_with(
                &self.bar,
                &format!(
                    "note: {} on {}: {note}",
                    cell.benchmark, cell.placement.name
                ),
            );
        }
        self.cells.push(cell);
        if self.write_error.is_some() {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn skipped(&mut self, cell: &SkippedCell) -> ControlFlow<()> {
        self.cell_done(&cell.key);
        if !self.several {
            self.error = Some(format!(
                "{} on {}: {}",
                cell.key.benchmark, cell.key.placement, cell.reason
            ));
            return ControlFlow::Break(());
        }
        // One benchmark that cannot run on one placement (c2c-latency on a single CPU)
        // should not cost the rest of a multi-benchmark run.
        self.heading_for(&cell.key);
        if !self.json {
            let text = format!("  skipped on {}: {}\n", cell.key.placement, cell.reason);
            self.out(&text);
        }
        self.skipped.push(cell.clone());
        ControlFlow::Continue(())
    }
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

/// `(specs, placements, unmeasured)`: the placements to measure, resolved, and those
/// left out with the reason. A placement that needs SMT siblings on a machine without
/// visible SMT is left out (`may_leave_out`, when no SMT state is switched) as long as
/// another one can be measured: `-p 1c1t,1c2t` then measures 1c1t and says why there is
/// no yield. Any other placement that cannot be resolved is an error.
#[allow(clippy::type_complexity)]
fn resolve_placements(
    asked: &[String],
    topo: &smtlab_model::Topology,
    may_leave_out: bool,
) -> Result<(
    Vec<String>,
    Vec<smtlab_model::ResolvedPlacement>,
    Vec<(String, String)>,
)> {
    let mut specs = Vec::new();
    let mut placements = Vec::new();
    let mut unmeasured = Vec::new();
    let mut first_error = None;
    for s in asked {
        let spec = smtlab_placement::parse(s)?;
        match smtlab_placement::resolve(&spec, topo) {
            Ok(p) => {
                specs.push(s.clone());
                placements.push(p);
            }
            Err(e) => {
                let needs_smt = matches!(
                    spec.kind,
                    smtlab_model::PlacementKind::Grid { threads_per_core, .. } if threads_per_core > 1
                );
                if !(may_leave_out && needs_smt && !topo.smt_visible()) {
                    return Err(e.into());
                }
                first_error.get_or_insert_with(|| e.clone());
                unmeasured.push((s.clone(), e.to_string()));
            }
        }
    }
    match first_error {
        Some(e) if placements.is_empty() => Err(e.into()),
        _ => Ok((specs, placements, unmeasured)),
    }
}

/// Every placement of a benchmark against that benchmark's first placement.
fn compare(cells: &[CellRecord]) -> Vec<Comparison> {
    let mut out = Vec::new();
    let mut baseline: Option<&CellRecord> = None;
    for c in cells {
        match baseline {
            Some(b) if b.same_variant(c) => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smt_placements_without_smt_are_left_out_only_beside_others() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let no_smt = smtlab_fixtures::build::intel(1, 2, 1);
        let (specs, placements, left_out) =
            resolve_placements(&s(&["1c1t", "1c2t", "2c1t", "2c2t"]), &no_smt, true).unwrap();
        assert_eq!(specs, s(&["1c1t", "2c1t"]));
        assert_eq!(placements[1].cpus, [0, 1]);
        let names: Vec<&str> = left_out.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["1c2t", "2c2t"]);
        assert!(left_out[0].1.contains("no SMT"), "{}", left_out[0].1);
        // Nothing else to measure, SMT states to switch, or another reason: an error.
        let e = resolve_placements(&s(&["1c2t"]), &no_smt, true).unwrap_err();
        assert!(e.to_string().contains("no SMT"), "{e}");
        assert!(resolve_placements(&s(&["1c1t", "1c2t"]), &no_smt, false).is_err());
        assert!(resolve_placements(&s(&["1c1t", "3c1t"]), &no_smt, true).is_err());
        assert!(resolve_placements(&s(&["1c1t", "1c2x"]), &no_smt, true).is_err());
        // With SMT every placement is measured.
        let smt = smtlab_fixtures::build::intel(1, 2, 2);
        let (specs, _, left_out) = resolve_placements(&s(&["1c1t", "1c2t"]), &smt, true).unwrap();
        assert_eq!((specs.len(), left_out.len()), (2, 0));
    }
}
