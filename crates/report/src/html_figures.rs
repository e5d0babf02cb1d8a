//! The page's figures of the papers' kinds, apart from the page frame in
//! [`html`](crate::html):
//!
//! * [`sweeps`]: a benchmark measured at three or more working-set sizes (the memory
//!   latency sweep of `run --suite full`) is one curve per placement over a log size
//!   axis, with this machine's cache sizes as vertical lines (the `sweeps` section);
//! * [`latency`]: per-event time series (thread creation, mutex hand-off, condition
//!   variables; van Tol 2011 Figs 8-14) as cumulative distributions with the placements
//!   overlaid on shared axes, the median, 99th percentile and maximum marked and
//!   tabulated, and a caption where the cell's headline value and the per-event median
//!   differ (the `latency` section); the per-event A-vs-B scatters of each placement
//!   follow, collapsed.
//!
//! Values are drawn and written in one unit per figure ([`crate::units::Column`]).

use smtlab_model::metrics::threads;
use std::collections::BTreeMap;

use maud::{Markup, PreEscaped, html};
use smtlab_model::{CacheType, CellRecord, Direction, RunResults, Topology, stats};

use crate::fmt::{cpus, params};
use crate::html_parts::{Absent, headline};
use crate::svg::{self, Dist, LineOptions, Point, Scale, Series, pct_of};
use crate::units::{Column, parse_size, scaled, size};

/// A benchmark and its parameters (without the one a figure varies).
type Key = (String, BTreeMap<String, String>);

/// Cells that belong to a working-set sweep: same benchmark and other parameters, three
/// or more distinct parseable `size` values. Keyed by (benchmark, parameters without
/// `size`), in run order.
pub fn sweep_groups(r: &RunResults) -> Vec<(Key, Vec<&CellRecord>)> {
    // A workload's message size is not a working set: its sweep is drawn with the
    // workload's own section.
    let sized = r.cells.iter().filter(|c| {
        c.params
            .get("size")
            .is_some_and(|sz| parse_size(sz).is_some())
            && !crate::html_workloads::is_workload(r, c)
    });
    let without_size = |c: &&CellRecord| {
        let mut ps = c.flat_params();
        ps.remove("size");
        (c.benchmark.clone(), ps)
    };
    crate::grouped(sized, without_size)
        .into_iter()
        .filter_map(|(k, cs)| {
            let mut sizes: Vec<u64> = cs
                .iter()
                .filter_map(|c| parse_size(&c.params["size"]))
                .map(|v| v as u64)
                .collect();
            sizes.sort();
            sizes.dedup();
            (sizes.len() >= 3).then_some((k, cs))
        })
        .collect()
}

/// One line per cache level and type with a known size: `L1d 32 KiB`, `L2 1 MiB`,
/// `L3 32 MiB`; instruction caches are left out (a data sweep does not touch them).
fn cache_lines(t: &Topology) -> Vec<(f64, String)> {
    let mut caches: Vec<_> = t
        .caches
        .iter()
        .filter(|c| c.cache_type != CacheType::Instruction)
        .filter_map(|c| Some(((c.level, c.size_bytes?), c)))
        .collect();
    // Stable: of the caches of one level and size, the first in the topology names them.
    caches.sort_by_key(|(key, _)| *key);
    caches.dedup_by_key(|(key, _)| *key);
    let line = |((_, b), c): (_, _)| (b as f64, crate::topo_svg::cache_label(c));
    caches.into_iter().map(line).collect()
}

/// The `sweeps` section.
pub fn sweeps(r: &RunResults) -> Result<Markup, Absent> {
    let groups = sweep_groups(r);
    if groups.is_empty() {
        return Err(Absent(
            "no benchmark measured at three or more working-set sizes".into(),
        ));
    }
    let mut charts: Vec<Option<String>> = Vec::new();
    let lines = cache_lines(&r.run.topology);
    for ((bench, ps), cs) in groups {
        let first = cs[0];
        let values: Vec<f64> = cs.iter().map(|c| headline(c).0).collect();
        let col = Column::for_values(&first.unit, &values);
        let mut series: Vec<Series> = Vec::new();
        for c in &cs {
            let x = parse_size(&c.params["size"]).unwrap_or(f64::NAN);
            let (y, lo, hi) = headline(c);
            let bar = (c.result.summary.n > 1).then_some((lo / col.divisor, hi / col.divisor));
            let point = Point::new(
                x,
                y / col.divisor,
                bar.unzip(),
                format!(
                    "{} at {}: {} ({} {}-{}), n = {}",
                    c.placement.name,
                    size(x),
                    col.with_unit(y),
                    if c.direction == Direction::Lower {
                        "p25-p75"
                    } else {
                        "95% CI"
                    },
                    col.num(lo),
                    col.num(hi),
                    c.result.summary.n
                ),
            );
            match series.iter_mut().find(|s| s.name == c.placement.name) {
                Some(s) => s.points.push(point),
                None => series.push(Series {
                    name: c.placement.name.clone(),
                    points: vec![point],
                }),
            }
        }
        let ys = Series::all_y(&series);
        let opt = LineOptions {
            y_zero: first.direction == Direction::Higher,
            // Latency across caches and DRAM spans one to two decades: a log axis keeps
            // the L1 and L2 steps visible beside DRAM, as lmbench plots it.
            y_scale: match svg::extent(ys.iter().copied()) {
                Some((lo, hi))
                    if first.direction == Direction::Lower && lo > 0.0 && hi / lo >= 8.0 =>
                {
                    Scale::Log
                }
                _ => Scale::Linear,
            },
            x_scale: Scale::Log,
            x_bytes: true,
            vlines: lines.clone(),
            ..LineOptions::default()
        };
        let title = crate::advice::workload_name(&bench, &ps);
        let better = format!("{} is better", first.direction.as_str());
        let y_label = format!("{} ({better})", col.unit);
        charts.push(svg::line_chart(
            &title,
            &better,
            "working set",
            &y_label,
            &series,
            &opt,
        ));
    }
    Ok(html! {
        section id="sweeps" {
            h2 { "Working-set sweeps" }
            p {
                "A benchmark measured at several working-set sizes: one curve per placement \
                 over the size (log scale), with this machine's data cache sizes from the \
                 run's topology as dashed lines. Where a curve steps up past a line, the \
                 working set has left that cache. Points: median with p25-p75 for latency, \
                 mean with 95% CI for throughput."
            }
            div class="charts" {
                // A figure per benchmark, empty where nothing could be drawn.
                @for s in charts { figure { @if let Some(s) = s { (PreEscaped(s)) } } }
            }
        }
    })
}

/// Per-event series that come in (A, B) pairs timed from the same start, with what each
/// one measures and the figure of van Tol 2011 it re-creates.
const PAIRS: [Pair; 3] = [
    (
        threads::CREATE_RETURN_NS,
        threads::THREAD_START_NS,
        "A: pthread_create returned",
        "B: new thread running",
        "A = time for pthread_create to return, B = time from the call until the new \
         thread runs (van Tol 2011, Figs 8-9). In the scatter, points below y = x are \
         threads that started before the call returned.",
    ),
    (
        threads::UNLOCK_NS,
        threads::WAKE_NS,
        "unlock call",
        "waiter running",
        "Unlock call time, and time from the start of unlock until the blocked waiter runs \
         (van Tol 2011, Figs 10-11).",
    ),
    (
        threads::CALL_NS,
        threads::WAKE_NS,
        "signal/broadcast call",
        "waiter running",
        "Call time of the signal or broadcast, and time from the start of the call until \
         the waiter returns from pthread_cond_wait (van Tol 2011, Figs 12-14).",
    ),
];

/// The `latency` section: one block per benchmark and parameters.
pub fn latency(r: &RunResults) -> Result<Markup, Absent> {
    let groups = latency_groups(r);
    if groups.is_empty() {
        return Err(Absent(
            "no per-event times (they come from pthread-create, mutex-handoff, condvar-signal \
         and condvar-broadcast)"
                .into(),
        ));
    }
    let mut blocks = String::new();
    for (k, cells) in groups {
        latency_block(&mut blocks, &k, &cells);
    }
    Ok(maud::html! {
        section id="latency" {
            h2 { "Latency distributions" }
            p {
                "Every timed event of the thread benchmarks: for each time, the cumulative \
                 distribution of the placements on shared axes (the share of events at or \
                 below a time), with the median (circle), 99th percentile (square) and maximum \
                 (triangle) marked, and the same figures in the table below. A curve to the \
                 left is faster; a long flat top is a slow tail. Axes are logarithmic where the \
                 times span two decades or more."
            }
            (maud::PreEscaped(blocks))
        }
    })
}

/// One entry of [`PAIRS`]: series A, series B, their labels, the caption.
type Pair = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// Cells with their index in [`PAIRS`].
type PairCells<'a> = [(&'a CellRecord, usize)];

/// Cells with a known pair, grouped by (benchmark, params), the keys in run order.
fn latency_groups(r: &RunResults) -> Vec<(Key, Vec<(&CellRecord, usize)>)> {
    let paired = r.cells.iter().filter_map(|c| {
        let s = &c.result.series;
        let has =
            |(a, b, ..): &Pair| s.get(*a).is_some_and(|v| !v.is_empty()) && s.contains_key(*b);
        Some((c, PAIRS.iter().position(has)?))
    });
    crate::grouped(paired, |(c, _)| (c.benchmark.clone(), c.flat_params()))
}

/// The block of one benchmark and parameters: charts, table of marks, scatters.
fn latency_block(p: &mut String, k: &Key, cells: &PairCells<'_>) {
    let pair = PAIRS[cells[0].1];
    let (ka, kb, ..) = pair;
    p.push_str(&html! { h3 { (k.0) " " code { (params(&k.1)) } } }.into_string());
    let all: Vec<f64> = cells
        .iter()
        .flat_map(|(c, _)| {
            [ka, kb]
                .into_iter()
                .flat_map(|key| c.result.series.get(key).into_iter().flatten().copied())
        })
        .collect();
    let col = Column::for_values("ns", &all);
    cdf_charts(p, cells, pair, &col, Scale::auto(&all));
    // The table's decimals follow the values it shows (medians and up), not the
    // fastest single event the chart's axis had to cover.
    let shown: Vec<f64> = cells
        .iter()
        .flat_map(|(c, _)| [ka, kb].into_iter().filter_map(|k| c.result.series.get(k)))
        .filter_map(|v| stats::median(v))
        .collect();
    let col = col.decimals_for(&shown);
    let notes = marks_table(p, cells, pair, &col);
    let words = html! {
        p class="sub" { (pair.4) }
        @for n in &notes { p class="caption" { (n) } }
    };
    p.push_str(&words.into_string());
    scatters(p, cells, pair, &col);
}

/// The cumulative distribution of A and of B, the placements on shared axes.
fn cdf_charts(p: &mut String, cells: &PairCells<'_>, pair: Pair, col: &Column, scale: Scale) {
    let (ka, kb, la, lb, _) = pair;
    let mut charts: Vec<String> = Vec::new();
    for (key, label) in [(ka, la), (kb, lb)] {
        let fmt = |v: f64| col.with_unit(v * col.divisor);
        let dists: Vec<Dist<'_>> = cells
            .iter()
            .filter_map(|(c, _)| {
                let v = c.result.series.get(key)?;
                Some(Dist {
                    name: c.placement.name.clone(),
                    values: v.iter().map(|x| x / col.divisor).collect(),
                    fmt: &fmt,
                })
            })
            .collect();
        let subtitle = format!(
            "{} events per placement",
            dists
                .iter()
                .map(|d| d.values.len().to_string())
                .collect::<Vec<_>>()
                .join(" / ")
        );
        charts.extend(svg::cdf_chart(label, &subtitle, &col.unit, &dists, scale));
    }
    let div = html! { div class="charts" { @for s in charts { figure { (PreEscaped(s)) } } } };
    p.push_str(&div.into_string());
}

/// The table of marks, and the headline value beside the per-event figures; returns
/// the notes on cells whose value is far from the curve's median.
fn marks_table(p: &mut String, cells: &PairCells<'_>, pair: Pair, col: &Column) -> Vec<String> {
    let (ka, kb, la, lb, _) = pair;
    let u = &col.unit;
    let head = html! {
        tr {
            th { "placement" } th { "CPUs" } th { "time" } th { "events" }
            th { "median (" (u) ")" } th { "p99 (" (u) ")" } th { "max (" (u) ")" }
            th { "mean (" (u) ")" } th { "cell value (" (u) ")" }
        }
    };
    let mut rows: Vec<maud::Markup> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for (c, _) in cells {
        for (key, label) in [(ka, la), (kb, lb)] {
            let Some(v) = c.result.series.get(key) else {
                continue;
            };
            let mut sorted: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
            if sorted.is_empty() {
                continue;
            }
            sorted.sort_by(f64::total_cmp);
            let med = pct_of(&sorted, 50.0);
            let mean = stats::mean(&sorted).unwrap_or(f64::NAN);
            // The cell's value is the per-sample mean of the B series where that is
            // what the benchmark reports; it is shown on the B row.
            let value = (key == kb).then(|| headline(c).0);
            let row = html! {
                tr {
                    td { (c.placement.name) }
                    td { code { (cpus(&c.placement.cpus)) } }
                    td { (label) }
                    td class="num" { (sorted.len()) }
                    td class="num" { (col.num(med)) }
                    td class="num" { (col.num(pct_of(&sorted, 99.0))) }
                    td class="num" { (col.num(sorted[sorted.len() - 1])) }
                    td class="num" { (col.num(mean)) }
                    td class="num" { (value.map(|v| col.num(v)).unwrap_or_else(|| "-".into())) }
                }
            };
            rows.push(row);
            if let Some(v) = value
                && med > 0.0
                && (v / med - 1.0).abs() > 0.2
            {
                notes.push(format!(
                    "{}: the cell's value {} is the median over {} samples of each \
                     sample's mean time per event, while the curve's median is {} over \
                     single events. They differ because the distribution is skewed: a \
                     mean is pulled up by the slow events (per-event mean {}, p99 {}), \
                     a median is not.",
                    c.placement.name,
                    scaled("ns", v),
                    c.result.summary.n,
                    scaled("ns", med),
                    scaled("ns", mean),
                    scaled("ns", pct_of(&sorted, 99.0))
                ));
            }
        }
    }
    p.push_str(&html! { table { (head) @for r in rows { (r) } } }.into_string());
    notes
}

/// Per-placement scatters of A against B, collapsed: useful, but long.
fn scatters(p: &mut String, cells: &PairCells<'_>, pair: Pair, col: &Column) {
    let (ka, kb, la, lb, _) = pair;
    let mut charts: Vec<String> = Vec::new();
    for (c, _) in cells {
        let (Some(a), Some(b)) = (c.result.series.get(ka), c.result.series.get(kb)) else {
            continue;
        };
        let pts: Vec<(f64, f64)> = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x / col.divisor, y / col.divisor))
            .collect();
        let title = format!("{} on CPUs {}", c.placement.name, cpus(&c.placement.cpus));
        if let Some(s) = svg::scatter(
            &title,
            &format!("{la} ({})", col.unit),
            &format!("{lb} ({})", col.unit),
            &pts,
            true,
            4000,
        ) {
            charts.push(s);
        }
    }
    let details = html! {
        details {
            summary {
                "A against B per event, by placement (" (smtlab_model::unit::plural(cells.len(), "chart")) ")"
            }
            div class="charts" { @for s in charts { (PreEscaped(s)) } }
        }
    };
    p.push_str(&details.into_string());
}
