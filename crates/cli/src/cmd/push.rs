//! `smtlab push`: copying the runs of one results database into another, typically a
//! host's file into the shared PostgreSQL database.

use anyhow::Result;
use smtlab_store::Store;

use crate::args::PushArgs;
use crate::output::emit;

pub fn run(args: &PushArgs) -> Result<()> {
    let from = args.from.clone().unwrap_or_else(smtlab_store::default_path);
    let source = Store::open_read_only(&from)?;
    let mut target = Store::open(&args.to)?;
    let report = source.push_to(&mut target)?;
    let to = target.path().display().to_string();
    if args.json {
        let pushed: Vec<serde_json::Value> = report
            .pushed
            .iter()
            .map(|(from, to)| serde_json::json!({ "from": from, "to": to }))
            .collect();
        return emit(&crate::output::json_text(&serde_json::json!({
            "from": source.path().display().to_string(),
            "to": to,
            "pushed": pushed,
            "already_there": report.present,
            "being_measured": report.running,
        }))?);
    }
    let mut text = String::new();
    for (from, to) in &report.pushed {
        text.push_str(&format!("run {from} -> run {to}\n"));
    }
    text.push_str(&format!(
        "pushed {} to {to}; {} already there",
        runs(report.pushed.len()),
        report.present.len()
    ));
    if !report.running.is_empty() {
        let ids: Vec<String> = report.running.iter().map(i64::to_string).collect();
        text.push_str(&format!(
            "; {} still being measured, not pushed ({})",
            report.running.len(),
            ids.join(", ")
        ));
    }
    text.push('\n');
    emit(&text)
}

fn runs(n: usize) -> String {
    if n == 1 {
        "1 run".into()
    } else {
        format!("{n} runs")
    }
}
