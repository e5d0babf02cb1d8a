//! Terminal views of stored runs: the list of runs and one run's summary.

use smtlab_model::counters::cpi_stack::Latencies;
use smtlab_model::{CellRecord, RunResults};
use smtlab_report::fmt::{mean_ci, num};
use smtlab_report::table::{Layout, Table, wrap};
use smtlab_store::RunListing;

pub use smtlab_report::fmt::utc;

/// `smtlab runs`. Fitted to a width, the host and CPU model go on a line under each run;
/// wide, they are columns.
pub fn runs_table(list: &[RunListing], layout: Layout) -> String {
    if list.is_empty() {
        return "no runs yet: start one with `smtlab run --suite quick`\n".into();
    }
    let wide = layout.width.is_none();
    let mut headers = vec![
        "Run", "Started", "Status", "Suite", "Cells", "Skipped", "Label",
    ];
    if wide {
        headers.extend(["Host", "CPU"]);
    }
    let mut t = Table::new(headers).shrink(6).shrink(7).shrink(8);
    for r in list {
        let mut cells = vec![
            r.id.to_string(),
            utc(r.started_unix_s),
            format!("{:?}", r.status).to_lowercase(),
            r.suite.clone().unwrap_or_else(|| "-".into()),
            format!("{}/{}", r.cells_done, r.cells_planned),
            r.cells_skipped.to_string(),
            r.label.clone().unwrap_or_else(|| "-".into()),
        ];
        let host = r.hostname.clone().unwrap_or_else(|| "-".into());
        let cpu = r.cpu_model.clone().unwrap_or_else(|| "-".into());
        if wide {
            cells.extend([host, cpu]);
            t.row(cells);
        } else {
            t.row_with_detail(cells, format!("{host}: {cpu}"));
        }
    }
    t.render_to(layout)
}

/// The run's facts, then each benchmark's cells with ratios to its first placement.
/// Fitted to a width, each cell's spread and speed-up go on a line under it.
pub fn summary(results: &RunResults, label: Option<&str>, layout: Layout) -> String {
    let mut out = wrap(&run_facts(results, label), layout);
    // The answer first: one recommendation per workload.
    let answers = smtlab_report::advice::advise_run(results);
    let topo = &results.run.topology;
    let scaling =
        smtlab_report::advice::scaling(&results.cells, topo.smt_visible(), topo.cpus.len());
    // Without SMT the answer says so once; the yields then have nothing to add.
    let said = !answers.is_empty() && smtlab_report::advice::without_smt(&answers, &scaling);
    if !answers.is_empty() {
        out.push_str(if said {
            "\nShould SMT be on?\n"
        } else {
            "\nShould SMT be on? (* marks the figures the answer rests on)\n"
        });
        out.push_str(&super::advice::summary(&answers, &scaling, layout)[1..]);
    }
    let yields = smtlab_report::smt_yields(results);
    if yields.is_empty() {
        if let Some(why) = smtlab_report::no_yields_reason(results).filter(|_| !said) {
            out.push_str(&wrap(&format!("\nSMT yield: {why}"), layout));
        }
    } else {
        out.push_str("\nSMT yield\n");
        if layout.width.is_none() {
            out.push_str(&smtlab_report::yield_table(&yields));
        } else {
            out.push_str(&yields_narrow(&yields, layout));
        }
    }
    // The workload figures are picked by the benchmarks' catalog entries.
    let described;
    let results = if results.benchmarks.is_empty() {
        let mut r = results.clone();
        r.describe(smtlab_runner::catalog::infos());
        described = r;
        &described
    } else {
        results
    };
    if let Some(t) = smtlab_report::html_workloads::text_summary(results) {
        out.push_str("\nworkload figures (means over samples)\n");
        out.push_str(&t.render_to(layout));
    }
    out.push_str(&cell_groups(results, layout));
    for s in &results.skipped {
        out.push_str(&wrap(
            // The line says `skipped` itself.
            &format!(
                "\n{}",
                super::run::skipped_line(
                    s,
                    // One line, which `wrap` then breaks between words.
                    Layout::plain()
                )
            ),
            layout,
        ));
    }
    out
}

/// The run's header lines and its notes, unwrapped.
fn run_facts(results: &RunResults, label: Option<&str>) -> String {
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
    if let Some(l) = label {
        out.push_str(&format!("label: {l}\n"));
    }
    out.push_str(&format!(
        "{} on {} ({}), kernel {}, SMT control {}\n",
        env.hostname.as_deref().unwrap_or("unknown host"),
        env.cpu_model.as_deref().unwrap_or("unknown CPU"),
        super::topo::verdict(&run.topology),
        env.kernel.as_deref().unwrap_or("?"),
        env.smt_control.as_deref().unwrap_or("absent"),
    ));
    if let Some(ghz) = env.core_clock_ghz {
        out.push_str(&format!(
            "core clock {}\n",
            smtlab_report::units::core_clock_text(ghz)
        ));
    }
    if let Some(h) = smtlab_report::units::handoff_text(&env.cpu_handoff) {
        out.push_str(&format!("cache-line handoff {h}\n"));
    }
    for n in &run.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    for line in counter_notes(results) {
        out.push_str(&format!("note: {line}\n"));
    }
    out
}

/// What the cells could not count, each said once for the run, not under every cell.
fn counter_notes(results: &RunResults) -> Vec<String> {
    let counters = || results.cells.iter().filter_map(|c| c.counters.as_ref());
    let hardware = counters().find_map(|c| c.hardware_unavailable.as_deref());
    let named = counters().flat_map(|c| &c.values.named_unavailable);
    let (hardware, named) = smtlab_model::counters::named::unavailable_lines(hardware, named);
    let per_cell = counters().flat_map(|c| {
        [
            c.syscalls_unavailable
                .as_ref()
                .map(|r| format!("kernel time by system call not measured: {r}")),
            c.irqs_unavailable
                .as_ref()
                .map(|r| format!("interrupt time by vector not measured: {r}")),
        ]
        .into_iter()
        .flatten()
    });
    smtlab_report::first_seen(hardware.into_iter().chain(per_cell).chain(named))
}

/// Each benchmark-and-parameters group under its heading, in run order.
fn cell_groups(results: &RunResults, layout: Layout) -> String {
    let latencies = smtlab_report::cpi_latencies::measured(results);
    let mut out = String::new();
    for (_, g) in smtlab_report::grouped(&results.cells, smtlab_report::yields::variant) {
        let params = smtlab_report::fmt::param_words(&g[0].flat_params());
        out.push_str(&wrap(
            format!(
                "\n{} ({}, {} is better)  {}",
                g[0].benchmark,
                g[0].unit,
                g[0].direction.as_str(),
                params.join(" ")
            )
            .trim_end(),
            layout,
        ));
        out.push_str(&cells_table(&g, &latencies, layout));
        if let Some(line) = cycles_line(&g, results.run.environment.core_clock_ghz) {
            out.push_str(&wrap(&line, layout));
        }
    }
    out
}

/// A time figure's medians in core cycles at the run's measured clock (papers 000 and
/// 002 give latencies in cycles); `None` for other units or without the clock.
fn cycles_line(g: &[&CellRecord], ghz: Option<f64>) -> Option<String> {
    let ghz = ghz?;
    let parts: Vec<String> = g
        .iter()
        .map(|c| {
            let x = smtlab_report::units::cycles(&c.unit, c.result.summary.median, ghz)?;
            Some(format!("{} {}", c.placement.name, num(x)))
        })
        .collect::<Option<_>>()?;
    Some(format!(
        "  median in cycles at {ghz:.3} GHz: {}",
        parts.join(", ")
    ))
}

/// One benchmark-and-parameters group: its placements, the first the baseline.
fn cells_table(g: &[&CellRecord], latencies: &Latencies, layout: Layout) -> String {
    let wide = layout.width.is_none();
    let mut headers = vec!["placement", "cpus", "median", "mean +- 95% CI", "n", "conv"];
    if wide {
        headers.extend(["p25-p75", "min", "vs first"]);
    }
    let mut t = Table::new(headers);
    let mut counters: Vec<(usize, String)> = Vec::new();
    for (i, c) in g.iter().enumerate() {
        let s = &c.result.summary;
        let cpus = if c.placement.cpus.is_empty() {
            "unpinned".to_string()
        } else {
            c.placement.cpu_set().to_list_string()
        };
        // The one verdict: above 1 = this placement better than the first.
        let vs = (i > 0)
            .then(|| smtlab_model::verdict::verdict(g[0], c))
            .flatten()
            .map_or(String::new(), |v| smtlab_report::fmt::verdict(&v));
        let spread = format!("{}-{}", num(s.p25), num(s.p75));
        let mut cells = vec![
            c.placement.name.clone(),
            cpus,
            num(s.median),
            mean_ci(s),
            s.n.to_string(),
            if c.result.met_target() { "yes" } else { "no" }.to_string(),
        ];
        let mut detail = String::new();
        if wide {
            cells.extend([spread, num(s.min), vs]);
        } else if !vs.is_empty() {
            // Not cut: the words after the interval are the verdict.
            detail = format!("vs first: {vs}");
        }
        if let Some(k) = &c.counters {
            counters.push((i, smtlab_report::counters::line(k, latencies)));
        }
        t.row_with_detail(cells, detail);
    }
    let mut out = t.render_to(layout);
    for (i, line) in counters {
        out.push_str(&wrap(
            &format!("  counters ({}): {line}", g[i].placement.name),
            layout,
        ));
    }
    for line in super::counter_ratios::smt_change_lines(g, latencies) {
        out.push_str(&wrap(&format!("  {line}"), layout));
    }
    out
}

/// The yields with each ratio on a line of its own under its benchmark: three ratios
/// with intervals and verdicts do not fit 80 columns side by side.
fn yields_narrow(rows: &[smtlab_report::YieldRow], layout: Layout) -> String {
    use smtlab_model::verdict::PairKind;
    let mut t = Table::new(["benchmark", "params", "unit", "better"]).shrink(1);
    let mut any_inverted = false;
    let mut any_idle = false;
    for r in rows {
        let inverted = r.direction == smtlab_model::Direction::Lower;
        any_inverted |= inverted;
        let detail: Vec<String> = PairKind::YIELDS
            .iter()
            .map(|&k| {
                any_idle |= r.get(k).is_some_and(|y| y.idle_sibling);
                let v = r
                    .get(k)
                    .map_or("- (not measured)".into(), smtlab_report::Yield::text);
                format!("{:<10} {v}", k.heading())
            })
            .collect();
        t.row_with_detail(
            [
                r.benchmark.clone(),
                smtlab_report::fmt::params(&r.params),
                r.unit.clone(),
                if inverted { "lower*" } else { "higher" }.to_string(),
            ],
            detail.join("\n"),
        );
    }
    let mut out = t.render_to(layout);
    let mut legend = String::from(smtlab_report::yields::YIELD_LEGEND);
    if any_idle {
        legend.push('\n');
        legend.push_str(smtlab_report::yields::IDLE_SIBLING_LEGEND);
    }
    if any_inverted {
        legend.push('\n');
        legend.push_str(smtlab_report::yields::LOWER_IS_BETTER_LEGEND);
    }
    out.push_str(&wrap(&legend, layout));
    out
}

/// `runs --json`: one object per run.
pub fn runs_json(list: &[smtlab_store::RunListing]) -> Vec<serde_json::Value> {
    list.iter()
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
        .collect()
}

#[cfg(test)]
mod tests {
    use smtlab_model::counters::named::{NO_CORE_PMU, NamedUnavailable};

    #[test]
    fn a_machine_without_a_pmu_says_so_once_with_the_events_it_could_not_count() {
        let mut results = super::super::testdata::results(1);
        for cell in &mut results.cells {
            let k = cell
                .counters
                .get_or_insert_with(super::super::testdata::counters);
            k.hardware_unavailable = Some("hardware counters not supported: no PMU".into());
            k.values.named_unavailable.push(NamedUnavailable {
                name: "topdown".into(),
                reason: NO_CORE_PMU.into(),
            });
        }
        let notes = super::counter_notes(&results);
        let said = "hardware counters not supported: no PMU; --events topdown not counted";
        assert_eq!(notes.first().map(String::as_str), Some(said), "{notes:?}");
        assert!(!notes.iter().any(|n| n.starts_with("event ")), "{notes:?}");
    }
}
