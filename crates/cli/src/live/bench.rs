//! What `bench` shows while its cells are measured (a heading per benchmark, a row per
//! placement, the details), and its summary: the SMT off-vs-on table, the verdict lines,
//! JSON with the ratios, Markdown.

use std::ops::ControlFlow;

use anyhow::{Result, bail};
use serde::Serialize;
use smtlab_bench::Params;
use smtlab_model::{BenchInfo, CellKey, CellRecord, Environment, RunResults, SkippedCell};
use smtlab_runner::experiment::smt;
use smtlab_runner::session::{Measured, SessionObserver, param_map};
use smtlab_runner::stats::{Ratio, ratio};

use crate::args::BenchArgs;
use crate::output::{emit, json_text};
use crate::render;
use crate::settings::bench::Bench;
use crate::sink::StoreSink;

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

/// Prints `bench`'s tables as cells are measured (the cells are kept by the sink beside
/// it, [`crate::sink::StoreSink`]).
pub struct BenchPrinter<'a> {
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
    sets: &'a [(usize, BenchInfo, Params)],
    /// The cells of the benchmark shown last, its first the rows' baseline: for its
    /// details.
    current: Vec<CellRecord>,
    /// The benchmark and parameters whose heading was printed last.
    heading_for: Option<(String, std::collections::BTreeMap<String, String>)>,
    /// Why a single-benchmark run failed.
    error: Option<String>,
    write_error: Option<anyhow::Error>,
}

/// A cell's name in the bar's bookkeeping.
fn slot_key(key: &CellKey) -> String {
    format!("{} {:?} {}", key.benchmark, key.params, key.placement)
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
            let text = render::bench::details(&self.current, crate::term::term_layout());
            self.out(&text);
        }
    }

    /// The bar's message: the cell in progress, then `what`.
    fn message(&self, key: &CellKey, what: &str) {
        let (n, total) = (self.done_cells + 1, self.total_cells);
        let cell = format!("{} {}", key.benchmark, key.placement);
        self.bar
            .set_message(format!("cell {n}/{total}: {cell}{what}"));
    }

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
        let state = smt::state_of(key);
        let smt = state.is_on().map(|_| state.name());
        if self.heading_for.as_ref() == Some(&this) {
            return;
        }
        self.flush_details();
        self.heading_for = Some(this);
        self.current.clear();
        if !self.json
            && let Some((_, info, params)) = self
                .sets
                .iter()
                .find(|(_, i, p)| i.name == key.benchmark && param_map(p) == key.params)
        {
            let mut text = render::bench::heading(info, params, crate::term::term_layout());
            if let Some(state) = smt {
                text.push_str(&format!("  with SMT {state}\n"));
            }
            self.out(&text);
        }
    }
}

impl SessionObserver for BenchPrinter<'_> {
    fn cell_started(&mut self, key: &CellKey) {
        self.message(key, "");
    }

    fn sample(&mut self, key: &CellKey, round: usize, index: usize) {
        let max = self.per_cell;
        let taken = self.in_flight.entry(slot_key(key)).or_insert(0);
        *taken = (*taken + 1).min(max);
        let pos = self.done_slots + self.in_flight.values().sum::<u64>();
        self.bar.set_position(pos);
        self.message(
            key,
            &format!(" (round {}, sample {})", round + 1, index + 1),
        );
    }

    fn measured(&mut self, m: Measured<'_>) -> ControlFlow<()> {
        self.cell_done(&m.record.key());
        let cell = m.record;
        self.heading_for(&cell.key());
        if !self.json {
            let baseline = self.current.first();
            let mut text = render::bench::row(cell, baseline, crate::term::term_layout());
            text.extend(super::cell_notes(cell));
            self.out(&text);
        }
        super::counters_note(&self.bar, cell, m.counters_note);
        self.current.push(cell.clone());
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
        ControlFlow::Continue(())
    }
}

impl<'a> BenchPrinter<'a> {
    /// The printer of the cells of `s`; `text`: tables on standard output (not JSON or
    /// Markdown), `bar_hidden`: no progress bar (`--json`).
    pub fn new(s: &'a Bench, args: &BenchArgs, text: bool) -> Self {
        let total = s.sets.len() * s.specs.len() * s.states.len().max(1);
        let per_cell = (s.cfg.max_samples * args.repeat as usize).max(1) as u64;
        BenchPrinter {
            // The bar counts sample slots (each cell's most samples, every round), so it
            // moves and its ETA means something while the first cell is measured.
            bar: crate::term::progress_bar(total as u64 * per_cell, args.json, crate::term::SLOTS),
            per_cell,
            total_cells: total,
            done_cells: 0,
            done_slots: 0,
            in_flight: std::collections::HashMap::new(),
            json: !text,
            several: s.benches.len() > 1 || !s.states.is_empty(),
            sets: &s.sets,
            current: Vec::new(),
            heading_for: None,
            error: None,
            write_error: None,
        }
    }

    /// Ends the live output; the error that ended it, if one did.
    pub fn finish(mut self) -> Result<()> {
        self.bar.finish_and_clear();
        self.flush_details();
        if let Some(e) = self.write_error.take() {
            return Err(e);
        }
        if let Some(e) = self.error.take() {
            bail!(e);
        }
        Ok(())
    }
}

/// The summary after the cells: the SMT off-vs-on table and the verdicts (`text`), the
/// placements this machine could not give as skipped cells, where the run was stored
/// (with `--db`), then Markdown and JSON.
pub fn summary(
    s: Bench,
    args: &BenchArgs,
    text: bool,
    mut sink: StoreSink<'_>,
    (started, env, stopped): (u64, Environment, bool),
) -> Result<()> {
    if text {
        verdicts(&s, &sink.cells)?;
    }
    // The SMT placements this machine cannot give are in the results as skipped cells,
    // with the reason, like any other cell that could not be measured.
    for (_, info, params) in &s.sets {
        for (spec, reason) in &s.unmeasured {
            let _ = sink.skipped(&SkippedCell {
                key: CellKey::new(&info.name, param_map(params), spec),
                reason: reason.clone(),
            });
        }
    }
    let sink = sink.finish(stopped, args.db.as_deref())?;
    if let Some(path) = &args.markdown.export_markdown {
        crate::output::export_markdown(path, &sink.cells)?;
    }
    if args.json {
        let comparisons = compare(&sink.cells);
        let mut results =
            crate::sink::finished_run(started, env, s.topo, s.cfg, sink.cells, sink.skipped);
        results.run.id = sink.run_id;
        let out = BenchOutput {
            results: &results,
            comparisons: &comparisons,
        };
        return emit(&json_text(&out)?);
    }
    Ok(())
}

/// The SMT off vs on table and the verdict lines.
fn verdicts(s: &Bench, cells: &[CellRecord]) -> Result<()> {
    // The details end with a blank line; the SMT off vs on table does not.
    let mut apart = false;
    if s.states.len() == 2 {
        let table = smtlab_report::smt_states::text(cells);
        apart = !table.is_empty();
        emit(&table)?;
    }
    let mut lines = smtlab_report::text::bench(cells);
    if !s.unmeasured.is_empty() {
        let names: Vec<String> = s.unmeasured.iter().map(|(p, _)| p.clone()).collect();
        lines.push(smtlab_report::text::unmeasured(
            &names,
            s.topo.smt.control.as_deref(),
        ));
    }
    if !lines.is_empty() {
        if apart {
            emit("\n")?;
        }
        for l in &lines {
            emit(&crate::term::fit(l))?;
        }
    }
    Ok(())
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
