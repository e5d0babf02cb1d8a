//! The benchmark blocks of the paper 001 tables (Tables 3-6) and the OLTP section: per
//! benchmark its speed-up table, its chart against the swept parameter, and the CPU and
//! OS cost per unit of work where the workload or the counters recorded it; the one
//! no-speed-up line when no block had a speed-up.

use maud::html;
use smtlab_model::{CellRecord, RunResults};

use super::cells::{cells_of, main_param, metric};
use super::charts::{figure, sweep_chart};
use super::rows::{fixed_params, row_head, rows_by_params};
use super::speedup_table::{no_pairs, num_cell, speedup_table};
use crate::counters::{Headline, duration_ns};
use crate::fmt::{num, params};
use crate::html_parts::BR;

/// A block per benchmark of `benches` (name, origin), each of its cells in `r`, and the
/// one line that says why when none has a speed-up.
pub(super) fn bench_blocks<'a>(
    p: &mut String,
    r: &RunResults,
    benches: impl IntoIterator<Item = (&'a str, &'a str)>,
) {
    let mut any_pair = false;
    for (bench, origin) in benches {
        let cells = cells_of(r, |c| c.benchmark == bench);
        any_pair |= bench_block(p, &cells, bench, origin, main_param(r, &cells));
    }
    if !any_pair {
        p.push_str(&no_pairs(r).into_string());
    }
}

/// One benchmark's table, chart and per-unit costs; whether it had a speed-up.
fn bench_block(
    p: &mut String,
    cells: &[&CellRecord],
    bench: &str,
    origin: &str,
    main: Option<&str>,
) -> bool {
    let (keys, rows) = rows_by_params(cells, main);
    let head = html! {
        h3 { (bench) " " span class="sub" { (origin) " (" (cells[0].unit) ")" } }
    };
    p.push_str(&head.into_string());
    p.push_str(&fixed_params(cells, &keys));
    let any = speedup_table(p, &row_head(&keys), &rows);
    if keys.len() == 1 {
        figure(
            p,
            sweep_chart(&format!("{bench} by {}", keys[0]), &keys[0], &rows),
        );
    }
    shape_table(p, cells);
    per_unit_table(p, cells);
    any
}

/// The shape of each load a chat cell ran (paper 001 Table 3: rooms, connections,
/// threads, messages sent and received per round), one row per parameter set, from
/// the figures the workload recorded; nothing for other workloads.
fn shape_table(p: &mut String, cells: &[&CellRecord]) {
    use smtlab_model::metrics::chat;
    let columns = [
        (chat::ROOMS, "chat rooms"),
        (chat::CONNECTIONS, "connections"),
        (chat::THREADS, "threads"),
        (chat::MESSAGES_SENT, "messages sent"),
        (chat::MESSAGES_RECEIVED, "messages received"),
        (chat::MESSAGES_TOTAL, "total messages"),
    ];
    let row = |c: &&CellRecord| -> Vec<String> {
        let figure = |(k, _): &(&str, &str)| metric(c, k).map_or("-".into(), |v| format!("{v:.0}"));
        columns.iter().map(figure).collect()
    };
    let rows = crate::first_seen(cells.iter().map(row).filter(|r| r[1] != "-" && r[3] != "-"));
    if rows.is_empty() {
        return;
    }
    let t = html! {
        p class="sub" { "The load's shape per round (paper 001 Table 3), as measured." }
        table {
            tr { @for (_, h) in &columns { th { (h) } } }
            @for r in &rows { tr { @for v in r { td class="num" { (v) } } } }
        }
    };
    p.push_str(&t.into_string());
}

/// CPU time per unit of work the workload recorded itself (`server_cpu_us_per_tx`) or
/// the counters measured (`--counters`), per cell; nothing when neither exists.
fn per_unit_table(p: &mut String, cells: &[&CellRecord]) {
    let keys = cells
        .iter()
        .flat_map(|c| &c.result.samples)
        .flat_map(|s| s.metrics.keys());
    let own = crate::first_seen(keys.filter(|k| k.contains("cpu") && k.contains("_per_")));
    let heads: Vec<Option<Headline>> = cells
        .iter()
        .map(|c| c.counters.as_ref().map(Headline::of))
        .collect();
    let counted = heads
        .iter()
        .flatten()
        .any(|h| h.cpu_ns_per_unit.is_some() || h.context_switches_per_unit.is_some());
    if own.is_empty() && !counted {
        return;
    }
    let per_unit = |x: Option<f64>, unit: &str, time: bool| {
        num_cell(x.map(|v| {
            let v = if time { duration_ns(v) } else { num(v) };
            format!("{v} / {unit}")
        }))
    };
    let table = html! {
        details {
            summary { "CPU and OS cost per unit of work" }
            table {
                tr {
                    th { "cell" }
                    @for k in &own { th { (k.replace('_', " ")) } }
                    @if counted {
                        th { "CPU time per unit" (BR) span class="sub" { "counters" } }
                        th { "context switches per unit" }
                        th { "instructions per unit" }
                    }
                }
                @for (c, h) in cells.iter().zip(&heads) {
                    tr {
                        td { (params(&c.flat_params())) " on " (c.placement.name) }
                        @for k in &own { (num_cell(metric(c, k).map(num))) }
                        @if counted {
                            @let unit = h.as_ref().and_then(|h| h.unit.clone()).unwrap_or_default();
                            @let h = h.as_ref();
                            (per_unit(h.and_then(|h| h.cpu_ns_per_unit), &unit, true))
                            (per_unit(h.and_then(|h| h.context_switches_per_unit), &unit, false))
                            (per_unit(h.and_then(|h| h.instructions_per_unit), &unit, false))
                        }
                    }
                }
            }
        }
    };
    p.push_str(&table.into_string());
}
