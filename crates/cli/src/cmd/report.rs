//! `smtlab runs`, `smtlab report` and `smtlab compare`: reading stored runs back.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use smtlab_model::{RESULTS_SCHEMA, RunResults};
use smtlab_store::Store;

use super::emit;
use crate::args::{CompareArgs, ReportArgs, RunsArgs};
use crate::render;

fn db_path(db: &Option<PathBuf>) -> PathBuf {
    db.clone().unwrap_or_else(smtlab_store::default_path)
}

/// A run named by `which`: a results JSON file (`smtlab report RUN --json` output, from
/// this machine or another) or a run of the database (`latest`, `3`, `-2`).
pub fn load(which: &str, db: &Option<PathBuf>) -> Result<RunResults> {
    let as_file = Path::new(which);
    if which.ends_with(".json") || (as_file.is_file() && !which.chars().all(|c| c.is_ascii_digit()))
    {
        let text = std::fs::read_to_string(as_file)
            .with_context(|| format!("cannot read results file {which}"))?;
        let results: RunResults = serde_json::from_str(&text).with_context(|| {
            format!("{which} is not a smtlab results file (expected schema {RESULTS_SCHEMA})")
        })?;
        if results.schema != RESULTS_SCHEMA {
            bail!(
                "{which} has schema {:?}; this build reads {RESULTS_SCHEMA}",
                results.schema
            );
        }
        return Ok(results);
    }
    let store = Store::open_existing(db_path(db))?;
    let id = store.resolve_run(which)?;
    Ok(store.load_run(id)?)
}

pub fn runs(args: &RunsArgs) -> Result<()> {
    let store = Store::open_existing(db_path(&args.db))?;
    let list = store.list_runs()?;
    if args.json {
        let rows: Vec<serde_json::Value> = list
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.id,
                    "started_unix_s": r.started_unix_s,
                    "finished_unix_s": r.finished_unix_s,
                    "status": r.status,
                    "suite": r.suite,
                    "cells_done": r.cells_done,
                    "cells_skipped": r.cells_skipped,
                    "cells_planned": r.cells_planned,
                    "hostname": r.hostname,
                    "cpu_model": r.cpu_model,
                })
            })
            .collect();
        return emit(&super::json_text(&rows)?);
    }
    emit(&render::report::runs_table(&list))
}

pub fn report(args: &ReportArgs) -> Result<()> {
    let results = load(&args.run, &args.db)?;
    let bytes = if args.json {
        smtlab_store::export::json(&results)
    } else if args.csv {
        smtlab_store::export::csv(&results)
    } else if args.output.is_some() {
        smtlab_report::html(&results).into_bytes()
    } else {
        let extra = super::corun::summary_text(&results);
        return emit(&(render::report::summary(&results) + &extra));
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, &bytes)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
            Ok(())
        }
        None => emit(&String::from_utf8_lossy(&bytes)),
    }
}

pub fn compare(args: &CompareArgs) -> Result<()> {
    let a = load(&args.a, &args.db)?;
    let b = load(&args.b, &args.db)?;
    let cmp = smtlab_report::compare(&a, &b);
    if args.json {
        return emit(&smtlab_report::compare_json(&cmp));
    }
    emit(&smtlab_report::compare_table(&cmp))
}
