//! Terminal views of stored runs: the list of runs and one run's summary.

use smtlab_model::{CellRecord, RunResults};
use smtlab_store::RunListing;

use super::bench::{header_line, row};
use super::table::Table;

pub use smtlab_report::fmt::utc;

pub fn runs_table(list: &[RunListing]) -> String {
    if list.is_empty() {
        return "no runs yet: start one with `smtlab run --suite quick`\n".into();
    }
    let mut t = Table::new(["Run", "Started", "Status", "Suite", "Cells", "Host", "CPU"]);
    for r in list {
        t.row([
            r.id.to_string(),
            utc(r.started_unix_s),
            format!("{:?}", r.status).to_lowercase(),
            r.suite.clone().unwrap_or_else(|| "-".into()),
            format!(
                "{}/{} ({} skipped)",
                r.cells_done, r.cells_planned, r.cells_skipped
            ),
            r.hostname.clone().unwrap_or_else(|| "-".into()),
            r.cpu_model.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    t.render()
}

/// The run's facts, then each benchmark's cells with ratios to its first placement.
pub fn summary(results: &RunResults) -> String {
    let run = &results.run;
    let env = &run.environment;
    let mut out = format!(
        "run {}  {}  {}  suite {}  {} cells measured, {} skipped\n",
        run.id,
        utc(run.started_unix_s),
        format!("{:?}", run.status).to_lowercase(),
        run.suite.as_deref().unwrap_or("-"),
        results.cells.len(),
        results.skipped.len()
    );
    out.push_str(&format!(
        "{} on {} ({}), kernel {}, SMT control {}\n",
        env.hostname.as_deref().unwrap_or("unknown host"),
        env.cpu_model.as_deref().unwrap_or("unknown CPU"),
        super::topo::verdict(&run.topology),
        env.kernel.as_deref().unwrap_or("?"),
        env.smt_control.as_deref().unwrap_or("absent"),
    ));
    for n in &run.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    // Said once for the run, not under every cell.
    let mut said: Vec<String> = Vec::new();
    for c in results.cells.iter().filter_map(|c| c.counters.as_ref()) {
        let lines = [
            c.hardware_unavailable.clone(),
            c.syscalls_unavailable
                .as_ref()
                .map(|r| format!("kernel time by system call not measured: {r}")),
        ];
        for line in lines.into_iter().flatten() {
            if !said.contains(&line) {
                said.push(line);
            }
        }
    }
    for line in said {
        out.push_str(&format!("note: {line}\n"));
    }
    let yields = smtlab_report::smt_yields(results);
    if yields.is_empty() {
        if let Some(why) = smtlab_report::no_yields_reason(results) {
            out.push_str(&format!("\nSMT yield: {why}\n"));
        }
    } else {
        out.push_str("\nSMT yield\n");
        out.push_str(&smtlab_report::yield_table(&yields));
    }
    if let Some(t) = smtlab_report::html_workloads::text_summary(results) {
        out.push_str("\nworkload figures (means over samples)\n");
        out.push_str(&t);
    }
    let mut groups: Vec<Vec<&CellRecord>> = Vec::new();
    for c in &results.cells {
        match groups
            .iter_mut()
            .find(|g| g[0].benchmark == c.benchmark && g[0].params == c.params)
        {
            Some(g) => g.push(c),
            None => groups.push(vec![c]),
        }
    }
    for g in groups {
        let params: Vec<String> = g[0]
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push_str(&format!(
            "\n{} ({}, {} is better)  {}\n",
            g[0].benchmark,
            g[0].unit,
            g[0].direction.as_str(),
            params.join(" ")
        ));
        out.push_str(&header_line());
        let base = &g[0].result.summary;
        for (i, c) in g.iter().enumerate() {
            out.push_str(&row(c, (i > 0).then_some(base)));
            if let Some(k) = &c.counters {
                out.push_str(&format!(
                    "  counters: {}\n",
                    smtlab_report::counters::line(k)
                ));
            }
        }
    }
    for s in &results.skipped {
        out.push_str(&format!("\nskipped: {}\n", super::run::skipped_line(s)));
    }
    out
}
