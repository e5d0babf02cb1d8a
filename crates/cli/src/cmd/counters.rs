//! `smtlab counters import FILE`: counts recorded by `perf stat` on any machine, read
//! ([`smtlab_counters::perf_stat`]) and derived by the same functions as smtlab's own
//! counts ([`smtlab_report::counter_ratios`]), so users with a PMU get smtlab's analysis
//! of perf runs they already have.

use std::io::Read;

use anyhow::{Context, Result};
use serde::Serialize;
use smtlab_counters::model_events::Uarch;
use smtlab_model::counters::CellCounters;
use smtlab_model::quote;
use smtlab_report::counter_ratios::{CellRatios, cell_ratios, import_csv, ratio_lines};

use crate::args::{CountersArgs, CountersCommand, CountersImportArgs};
use crate::output::{emit, json_text};
use crate::render;

pub fn run(args: &CountersArgs) -> Result<()> {
    match &args.command {
        CountersCommand::Import(a) => import(a),
    }
}

/// What `--json` prints.
#[derive(Serialize)]
struct Imported<'a> {
    schema: &'static str,
    file: String,
    cpu_model: Option<&'static str>,
    counters: &'a CellCounters,
    ratios: &'a CellRatios,
}

fn read(path: &std::path::Path) -> Result<String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read standard input")?;
        return Ok(s);
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", quote::path(path)))
}

fn import(a: &CountersImportArgs) -> Result<()> {
    let text = read(&a.file)?;
    let values = smtlab_counters::perf_stat::import(&text, a.cpu_model)
        .with_context(|| quote::path(&a.file))?;
    let counters = CellCounters::new(format!("recorded in {}", a.file.display()), values, None);
    let ratios = cell_ratios(&counters);
    if a.json {
        return emit(&json_text(&Imported {
            schema: "smtlab.counters-import/1",
            file: a.file.display().to_string(),
            cpu_model: a.cpu_model.map(Uarch::label),
            counters: &counters,
            ratios: &ratios,
        })?);
    }
    if a.csv {
        return emit(&String::from_utf8_lossy(&import_csv(&ratios)));
    }
    let mut out = format!(
        "{} events read from {}{}\n",
        counters.values.events.len() + counters.values.named.len(),
        quote::path(&a.file),
        a.cpu_model
            .map(|u| format!(" ({})", u.label()))
            .unwrap_or_default()
    );
    // Events the recording never asked for need no line; what perf could not count does.
    let mut shown = ratios.clone();
    shown.omitted.retain(|l| !l.ends_with(" not counted"));
    let layout = render::table::Layout::term();
    for line in ratio_lines(&shown) {
        out.push_str(&render::table::wrap(&line, layout));
    }
    emit(&out)
}
