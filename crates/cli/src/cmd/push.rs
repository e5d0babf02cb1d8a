//! `smtlab push`: copying the runs of one results database into another, typically a
//! host's file into the shared PostgreSQL database. `--dry-run` says what it would copy.

use anyhow::Result;
use smtlab_model::unit::plural;
use smtlab_store::{PushReport, Store, StoreError};

use crate::args::PushArgs;
use crate::output::emit;

pub fn run(args: &PushArgs) -> Result<()> {
    let from = args.from.clone().unwrap_or_else(smtlab_store::default_path);
    let source = Store::open_read_only(&from)?;
    let (report, to) = if args.dry_run {
        plan(&source, args)?
    } else {
        let mut target = Store::open(&args.to)?;
        let report = source.push_to(&mut target)?;
        (report, target.path().display().to_string())
    };
    if args.json {
        return emit(&crate::output::json_text(&json(
            &report,
            &source,
            &to,
            args.dry_run,
        ))?);
    }
    emit(&text(&report, &to, args.dry_run))
}

/// `--dry-run`: the report of what would be copied, and the target as messages name it.
/// A target with nothing in it yet (no file, no schema) lacks every run.
fn plan(source: &Store, args: &PushArgs) -> Result<(PushReport, String)> {
    match Store::open_read_only(&args.to) {
        Ok(target) => Ok((
            source.push_plan(Some(&target))?,
            target.path().display().to_string(),
        )),
        Err(StoreError::Empty { path } | StoreError::Missing { path }) => {
            Ok((source.push_plan(None)?, path.display().to_string()))
        }
        Err(e) => Err(e.into()),
    }
}

fn json(report: &PushReport, source: &Store, to: &str, dry_run: bool) -> serde_json::Value {
    let pairs = |ids: &[(i64, i64)]| -> Vec<serde_json::Value> {
        ids.iter()
            .map(|(from, to)| serde_json::json!({ "from": from, "to": to }))
            .collect()
    };
    let mut v = serde_json::json!({
        "from": source.path().display().to_string(),
        "to": to,
        "pushed": pairs(&report.pushed),
        "completed": pairs(&report.completed),
        "already_there": report.present,
        "being_measured": report.running,
    });
    if dry_run {
        v["dry_run"] = true.into();
        v["would_push"] = report.missing.clone().into();
        // Stored unfinished there, with less than here: a push would complete them.
        v["would_complete"] = v["completed"].take();
        v["completed"] = serde_json::json!([]);
    }
    v
}

fn text(report: &PushReport, to: &str, dry_run: bool) -> String {
    let mut text = String::new();
    for (from, to) in &report.pushed {
        text.push_str(&format!("run {from} -> run {to}\n"));
    }
    for (from, to) in &report.completed {
        let done = if dry_run {
            "would be given"
        } else {
            "now given"
        };
        text.push_str(&format!(
            "run {from} -> run {to}: stored unfinished there, {done} its missing cells\n"
        ));
    }
    if dry_run {
        text.push_str(&format!(
            "dry run: would push {} to {to}{}; {} already there",
            plural(report.missing.len(), "run"),
            ids(&report.missing, " (", ")"),
            report.present.len()
        ));
    } else {
        text.push_str(&format!(
            "pushed {} to {to}; {} already there",
            plural(report.pushed.len(), "run"),
            report.present.len()
        ));
    }
    if !report.completed.is_empty() {
        let done = if dry_run { "to complete" } else { "completed" };
        text.push_str(&format!(
            "; {} {done}",
            plural(report.completed.len(), "run")
        ));
    }
    if !report.running.is_empty() {
        text.push_str(&format!(
            "; {} still being measured, not pushed{}",
            report.running.len(),
            ids(&report.running, " (", ")")
        ));
    }
    text.push('\n');
    text
}

/// `ids` joined with commas between `open` and `close`, or nothing when there are none.
fn ids(ids: &[i64], open: &str, close: &str) -> String {
    if ids.is_empty() {
        return String::new();
    }
    let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("{open}{}{close}", ids.join(", "))
}
