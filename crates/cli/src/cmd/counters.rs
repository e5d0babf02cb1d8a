//! `smtlab counters import FILE`: counts recorded by `perf stat` on any machine, read
//! ([`smtlab_counters::perf_stat`]) and derived by the same functions as smtlab's own
//! counts ([`smtlab_report::counter_ratios`]), so users with a PMU get smtlab's analysis
//! of perf runs they already have.

use std::io::Read;

use anyhow::{Context, Result};
use serde::Serialize;
use smtlab_counters::model_events::Uarch;
use smtlab_model::counters::cpi_stack::Latencies;
use smtlab_model::counters::smt_loss::{SmtLoss, attribute};
use smtlab_model::counters::{CellCounters, CounterValues};
use smtlab_model::quote;
use smtlab_report::counter_ratios::{
    CellRatios, cell_ratios, import_csv, loss_csv, loss_lines, ratio_lines,
};

use crate::args::{CountersArgs, CountersCommand, CountersImportArgs};
use crate::output::{emit, json_text};

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
    /// With `--against`: the file it was held against and the loss's attribution.
    #[serde(skip_serializing_if = "Option::is_none")]
    against: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    smt_loss: Option<&'a SmtLoss>,
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

fn read_values(path: &std::path::Path, a: &CountersImportArgs) -> Result<CounterValues> {
    let text = read(path)?;
    smtlab_counters::perf_stat::import(&text, a.cpu_model).with_context(|| quote::path(path))
}

fn import(a: &CountersImportArgs) -> Result<()> {
    let values = read_values(&a.file, a)?;
    let loss =
        match &a.against {
            Some(alone) => Some(attribute(&read_values(alone, a)?, &values).with_context(
                || format!("{} against {}", quote::path(&a.file), quote::path(alone)),
            )?),
            None => None,
        };
    let counters = CellCounters::new(format!("recorded in {}", a.file.display()), values, None);
    let latencies = a.latencies.clone().unwrap_or_else(Latencies::assumed);
    let ratios = cell_ratios(&counters, &latencies);
    if a.json {
        emit(&json_text(&Imported {
            schema: "smtlab.counters-import/1",
            file: a.file.display().to_string(),
            cpu_model: a.cpu_model.map(Uarch::label),
            counters: &counters,
            ratios: &ratios,
            against: a.against.as_ref().map(|p| p.display().to_string()),
            smt_loss: loss.as_ref(),
        })?)?;
    } else if a.csv {
        let mut bytes = import_csv(&ratios);
        bytes.extend(loss.iter().flat_map(loss_csv));
        emit(&String::from_utf8_lossy(&bytes))?;
    } else {
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
        for line in ratio_lines(&shown)
            .into_iter()
            .chain(loss.iter().flat_map(loss_lines))
        {
            out.push_str(&crate::term::fit(&line));
        }
        emit(&out)?;
    }
    // The figures are shown even when the loss's parts do not add up, then the error.
    loss.as_ref().map(SmtLoss::check).transpose()?;
    Ok(())
}
