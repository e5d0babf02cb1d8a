//! `smtlab runs`, `smtlab report` and `smtlab compare`: reading stored runs back.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use smtlab_model::{RESULTS_SCHEMA, RunResults};
use smtlab_store::Store;

use crate::args::{CompareArgs, ReportArgs, RunsArgs};
use crate::output::emit;
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
        let mut results: RunResults = serde_json::from_str(&text).with_context(|| {
            format!("{which} is not a smtlab results file (expected schema {RESULTS_SCHEMA})")
        })?;
        if results.schema != RESULTS_SCHEMA {
            bail!(
                "{which} has schema {:?}; this build reads {RESULTS_SCHEMA}",
                results.schema
            );
        }
        // A file exported with its catalog entries keeps them; others get this build's.
        results.describe(smtlab_runner::catalog::infos());
        return Ok(results);
    }
    let store = Store::open_read_only(db_path(db))?;
    let id = store.resolve_run(which)?;
    let mut results = store.load_run(id)?;
    results.describe(smtlab_runner::catalog::infos());
    Ok(results)
}

pub fn runs(args: &RunsArgs) -> Result<()> {
    if !args.delete.is_empty() {
        return delete(args);
    }
    let store = Store::open_read_only(db_path(&args.db.db))?;
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
                    "label": r.label,
                })
            })
            .collect();
        return emit(&crate::output::json_text(&rows)?);
    }
    emit(&render::report::runs_table(
        &list,
        render::table::Layout::term(),
    ))
}

/// `runs --delete`: every selector resolved first (ids, `-1`, labels), then all deleted
/// in one transaction or none.
fn delete(args: &RunsArgs) -> Result<()> {
    let mut store = Store::open_existing(db_path(&args.db.db))?;
    let mut ids = Vec::new();
    for which in &args.delete {
        let id = store.resolve_run(which)?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    store.delete_runs(&ids)?;
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    emit(&format!(
        "deleted {} {}\n",
        if ids.len() == 1 { "run" } else { "runs" },
        list.join(", ")
    ))
}

/// The label of a stored run, for the summary's first line; none for a results file.
fn label_of(which: &str, db: &Option<PathBuf>, id: i64) -> Option<String> {
    if which.ends_with(".json") || Path::new(which).is_file() {
        return None;
    }
    Store::open_read_only(db_path(db))
        .ok()?
        .run_label(id)
        .ok()
        .flatten()
}

pub fn report(args: &ReportArgs) -> Result<()> {
    let results = load(&args.run, &args.db.db)?;
    if let Some(path) = &args.export_markdown {
        let md = smtlab_report::markdown::cells(&results.cells);
        if path.as_os_str() == "-" {
            return emit(&md);
        }
        std::fs::write(path, md).with_context(|| format!("cannot write {}", path.display()))?;
        crate::term::note(&format!("wrote {}", path.display()));
    }
    let bytes = if args.json {
        smtlab_report::export::json(&results)
    } else if args.csv {
        smtlab_report::export::csv(&results)
    } else if args.output.is_some() {
        smtlab_report::html(&results).into_bytes()
    } else {
        let label = label_of(&args.run, &args.db.db, results.run.id);
        let extra = smtlab_report::smt_states::text(&results.cells)
            + &crate::render::corun::summary_text(&results);
        return emit(
            &(render::report::summary(&results, label.as_deref(), render::table::Layout::term())
                + &extra),
        );
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, &bytes)
                .with_context(|| format!("cannot write {}", path.display()))?;
            crate::term::note(&format!("wrote {}", path.display()));
            Ok(())
        }
        None => emit(&String::from_utf8_lossy(&bytes)),
    }
}

pub fn compare(args: &CompareArgs) -> Result<()> {
    let a = load(&args.a, &args.db.db)?;
    let b = load(&args.b, &args.db.db)?;
    if let Some(path) = &args.output {
        std::fs::write(path, smtlab_report::compare_html(&a, &b))
            .with_context(|| format!("cannot write {}", path.display()))?;
        crate::term::note(&format!("wrote {}", path.display()));
        return Ok(());
    }
    if args.markdown {
        return emit(&smtlab_report::compare_markdown(&a, &b));
    }
    let cmp = smtlab_report::compare(&a, &b);
    if args.json {
        return emit(&smtlab_report::compare_json(&cmp));
    }
    emit(&render::compare::table(&cmp, render::table::Layout::term()))
}
