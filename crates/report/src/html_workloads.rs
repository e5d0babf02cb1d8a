//! The page's sections for the server and system workloads, each shown only when the run
//! has cells of its kind:
//!
//! * `workload-smt` (paper 004 Chart 1): one bar per workload and parameter set, the
//!   `1c2t/1c1t` speed-up with its 95% interval; a run without such pairs says why in one
//!   line instead of drawing nothing;
//! * `web` (paper 000 Figs 1-6, 20-21): `web-static` throughput per server and placement
//!   in Mbit/s and requests/s, the `1c2t/1c1t` and `2c2t/2c1t` speed-ups per server,
//!   latency percentiles and errors; `web-capacity` bars and its conformance curve;
//! * `workload-tables` (paper 001 Tables 3-6): chat, dbench, tbench and the netperf-style
//!   rows as rows of the swept parameter, a column per placement, the speed-ups with
//!   their intervals and their geometric mean, a chart each, and the per-unit CPU and
//!   counter figures where they were recorded;
//! * `aim` (paper 001 Table 2): a row per AIM9 benchmark;
//! * `task-pool` (paper 002 Figs 15-16): tasks per second and tree run time against the
//!   number of workers per queue kind, CAS retries per task;
//! * `oltp`: `oltp-pg`, `oltp-sqlite` and `sdet` per placement.
//!
//! A run without cells of a kind gets no section and no mention (an empty `Err`).
//!
//! Every speed-up is [`smtlab_model::stats::speedup`] (the ratio of the means with
//! Fieller's interval), written with [`crate::fmt::speedup`]'s rules; nothing here
//! divides two values any other way.

use std::collections::BTreeMap;
use std::fmt::Write;

use smtlab_model::stats::{self, Ratio};
use smtlab_model::{CellRecord, RunResults};

use crate::counters::{Headline, duration_ns};
use crate::fmt::{esc, num, params, short, times};
use crate::html_figures::parse_size;
use crate::svg::{self, LineOptions, Point, Series};
use crate::units::Column;
use crate::yields::{YieldKind, smt_yields};

/// Placement columns in this order; others follow in run order.
const ORDER: [&str; 6] = ["1c1t", "1c2t", "2c1t", "2c2t", "cores", "all"];

/// The pairs a workload table shows: the papers' two SMT speed-ups.
const PAIRS: [YieldKind; 2] = [YieldKind::Smt, YieldKind::DualCore];

/// Benchmarks of the paper 001 speed-up tables, with the table each re-creates.
const TABLES: [(&str, &str); 7] = [
    ("chat", "paper 001 Tables 3-4"),
    ("dbench", "paper 001 Table 5"),
    ("tbench", "paper 001 Table 6"),
    ("tcp-stream", "paper 004, netperf TCP_STREAM"),
    ("tcp-rr", "paper 004, netperf TCP_RR"),
    ("tcp-crr", "paper 004, netperf TCP_CRR"),
    ("udp-rr", "paper 004, netperf UDP_RR"),
];

const OLTP: [&str; 3] = ["oltp-pg", "oltp-sqlite", "sdet"];

/// Whether a cell is one of the server or system workloads (Chart 1's bars).
pub fn is_workload(c: &CellRecord) -> bool {
    let b = c.benchmark.as_str();
    b.starts_with("web-")
        || b == "task-pool"
        || c.group == "aim"
        || TABLES.iter().any(|(n, _)| *n == b)
        || OLTP.contains(&b)
}

fn cells_of(r: &RunResults, pick: impl Fn(&CellRecord) -> bool) -> Vec<&CellRecord> {
    r.cells.iter().filter(|c| pick(c)).collect()
}

/// Placements of `cells`, in [`ORDER`] then run order.
fn placements(cells: &[&CellRecord]) -> Vec<String> {
    let mut v: Vec<String> = ORDER
        .iter()
        .filter(|p| cells.iter().any(|c| c.placement.name == **p))
        .map(|p| p.to_string())
        .collect();
    for c in cells {
        if !v.contains(&c.placement.name) {
            v.push(c.placement.name.clone());
        }
    }
    v
}

fn metric_values(c: &CellRecord, key: &str) -> Vec<f64> {
    c.result
        .samples
        .iter()
        .filter_map(|s| s.metrics.get(key).copied())
        .collect()
}

/// Mean over the samples that carry `key`; `None` when none does.
fn metric(c: &CellRecord, key: &str) -> Option<f64> {
    stats::mean(&metric_values(c, key))
}

fn metric_sum(c: &CellRecord, key: &str) -> Option<f64> {
    let v = metric_values(c, key);
    (!v.is_empty()).then(|| v.iter().sum())
}

/// The speed-up of a pair among `cells` (one parameter set): the one speed-up, or `None`
/// when a side is missing or both sides ran on the same CPUs.
fn pair_speedup(cells: &[&CellRecord], kind: YieldKind) -> Option<Ratio> {
    let (s, b) = kind.placements();
    let smt = cells.iter().find(|c| c.placement.name == s)?;
    let base = cells.iter().find(|c| c.placement.name == b)?;
    if smt.placement.cpu_set() == base.placement.cpu_set() {
        return None;
    }
    stats::speedup(&base.result.summary, &smt.result.summary, smt.direction)
}

/// Why a section shows no SMT speed-up, in one line.
pub fn no_pairs_reason(r: &RunResults) -> String {
    let topo = &r.run.topology;
    if topo.smt_visible() {
        "No SMT speed-ups: none of these cells was measured on both placements of a pair \
         (1c1t and 1c2t, or 2c1t and 2c2t); the values per placement are shown instead."
            .into()
    } else {
        format!(
            "No SMT speed-ups: no SMT visible on this machine (smt/control: {}), so 1c2t and \
             2c2t cannot be measured; the values per placement are shown instead.",
            topo.smt.control.as_deref().unwrap_or("absent")
        )
    }
}

/// A speed-up table cell: the ratio, its interval and what the interval says, as
/// [`crate::fmt::speedup`] writes them.
fn speedup_td(r: &Ratio) -> String {
    let ci = match (r.ci95_low, r.ci95_high) {
        (Some(lo), Some(hi)) => format!("[{}, {}] ", times(lo), times(hi)),
        _ => String::new(),
    };
    format!(
        "<td class=\"yield\">{}x<br/><span class=\"sub\">{ci}{}</span></td>",
        times(r.ratio),
        esc(r.significance().words())
    )
}

/// One row of a workload table: a label, an x value for the chart, the row's cells.
struct Row<'a> {
    label: String,
    x: Option<f64>,
    cells: Vec<&'a CellRecord>,
}

/// The parameter a workload's table is read by (the papers' row heading) when the run
/// did not sweep any.
fn main_key(bench: &str) -> Option<&'static str> {
    match bench {
        "chat" => Some("rooms"),
        "dbench" | "tbench" | "oltp-pg" => Some("clients"),
        "tcp-stream" => Some("size"),
        "tcp-rr" | "tcp-crr" | "udp-rr" => Some("request"),
        "web-static" | "web-capacity" => Some("server"),
        "sdet" => Some("users"),
        "task-pool" => Some("queue"),
        "oltp-sqlite" => Some("mode"),
        _ => None,
    }
}

/// The parameters whose values differ among `cells`, or the workload's main parameter
/// when none does.
fn swept_keys(cells: &[&CellRecord]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for c in cells {
        for (k, v) in &c.params {
            if !keys.contains(k) && cells.iter().any(|d| d.params.get(k) != Some(v)) {
                keys.push(k.clone());
            }
        }
    }
    if keys.is_empty()
        && let Some(k) = cells
            .first()
            .and_then(|c| main_key(&c.benchmark).filter(|k| c.params.contains_key(*k)))
    {
        keys.push(k.to_string());
    }
    keys
}

/// The parameters every cell shares, apart from `keys`, as a line under a heading;
/// empty when there are none.
fn fixed_params(cells: &[&CellRecord], keys: &[String]) -> String {
    let Some(first) = cells.first() else {
        return String::new();
    };
    let fixed: BTreeMap<String, String> = first
        .params
        .iter()
        .filter(|(k, v)| !keys.contains(k) && cells.iter().all(|c| c.params.get(*k) == Some(v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if fixed.is_empty() {
        return String::new();
    }
    format!(
        "<p class=\"sub\">other parameters: <code>{}</code></p>",
        esc(&params(&fixed))
    )
}

fn param_x(v: &str) -> Option<f64> {
    v.parse::<f64>().ok().or_else(|| parse_size(v))
}

/// Cells grouped by parameter set, labelled by the swept parameters, sorted by the swept
/// parameter when there is one and it is a number.
fn rows_by_params<'a>(cells: &[&'a CellRecord]) -> (Vec<String>, Vec<Row<'a>>) {
    let keys = swept_keys(cells);
    let mut rows: Vec<Row<'_>> = Vec::new();
    for c in cells {
        match rows.iter_mut().find(|r| r.cells[0].params == c.params) {
            Some(r) => r.cells.push(c),
            None => {
                let label = if keys.is_empty() {
                    params(&c.params)
                } else {
                    keys.iter()
                        .map(|k| c.params.get(k).map_or("-", |v| v.as_str()))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let x = (keys.len() == 1)
                    .then(|| c.params.get(&keys[0]).and_then(|v| param_x(v)))
                    .flatten();
                rows.push(Row {
                    label,
                    x,
                    cells: vec![c],
                });
            }
        }
    }
    if rows.iter().all(|r| r.x.is_some()) {
        rows.sort_by(|a, b| a.x.unwrap_or(0.0).total_cmp(&b.x.unwrap_or(0.0)));
    }
    (keys, rows)
}

fn value_text(col: &Column, c: &CellRecord) -> String {
    let s = &c.result.summary;
    if s.n < 2 {
        format!("{} (n=1)", col.num(s.mean))
    } else {
        col.pm(s.mean, s.ci95_half_width)
    }
}

/// Paper 001's table layout: a row per `rows`, the value per placement (mean ± 95% CI),
/// each SMT pair's speed-up, and a last row with the geometric mean of the speed-ups.
/// Returns whether any speed-up was shown.
fn speedup_table(p: &mut String, row_head: &str, rows: &[Row<'_>]) -> bool {
    let all: Vec<&CellRecord> = rows.iter().flat_map(|r| r.cells.iter().copied()).collect();
    if all.is_empty() {
        return false;
    }
    let places = placements(&all);
    let one_unit = all.iter().all(|c| c.unit == all[0].unit);
    let table_col = one_unit.then(|| {
        let v: Vec<f64> = all.iter().map(|c| c.result.summary.mean).collect();
        Column::for_values(&all[0].unit, &v)
    });
    let kinds: Vec<YieldKind> = PAIRS
        .into_iter()
        .filter(|k| rows.iter().any(|r| pair_speedup(&r.cells, *k).is_some()))
        .collect();
    let _ = write!(p, "<table><tr><th>{}</th>", esc(row_head));
    if !one_unit {
        p.push_str("<th>unit</th>");
    }
    for pl in &places {
        let unit = table_col
            .as_ref()
            .filter(|c| !c.unit.is_empty())
            .map(|c| format!("<br/><span class=\"sub\">{}</span>", esc(&c.unit)))
            .unwrap_or_default();
        let _ = write!(p, "<th>{}{unit}</th>", esc(pl));
    }
    for k in &kinds {
        let _ = write!(
            p,
            "<th>speed-up<br/><span class=\"sub\">{}</span></th>",
            k.heading()
        );
    }
    p.push_str("</tr>");
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for row in rows {
        let col = table_col.clone().unwrap_or_else(|| {
            let v: Vec<f64> = row.cells.iter().map(|c| c.result.summary.mean).collect();
            Column::for_values(&row.cells[0].unit, &v)
        });
        let _ = write!(p, "<tr><td>{}</td>", esc(&row.label));
        if !one_unit {
            let _ = write!(p, "<td>{}</td>", esc(&col.unit));
        }
        for pl in &places {
            match row.cells.iter().find(|c| &c.placement.name == pl) {
                Some(c) => {
                    let _ = write!(p, "<td class=\"num\">{}</td>", esc(&value_text(&col, c)));
                }
                None => p.push_str("<td class=\"muted\">-</td>"),
            }
        }
        for (i, k) in kinds.iter().enumerate() {
            match pair_speedup(&row.cells, *k) {
                Some(r) => {
                    if r.ratio > 0.0 && r.ratio.is_finite() {
                        ratios[i].push(r.ratio);
                    }
                    p.push_str(&speedup_td(&r));
                }
                None => p.push_str("<td class=\"muted\">-</td>"),
            }
        }
        p.push_str("</tr>");
    }
    if !kinds.is_empty() {
        let _ = write!(
            p,
            "<tr><th colspan=\"{}\">geometric mean of the speed-ups</th>",
            1 + usize::from(!one_unit) + places.len()
        );
        for r in &ratios {
            match stats::geomean(r) {
                Some(g) => {
                    let _ = write!(
                        p,
                        "<td class=\"yield\">{}x<br/><span class=\"sub\">of {} rows</span></td>",
                        times(g),
                        r.len()
                    );
                }
                None => p.push_str("<td class=\"muted\">-</td>"),
            }
        }
        p.push_str("</tr>");
    }
    p.push_str("</table>");
    !kinds.is_empty()
}

/// The value against the swept parameter, one line per placement; `None` with fewer
/// than two numeric rows.
fn sweep_chart(title: &str, x_label: &str, rows: &[Row<'_>]) -> Option<String> {
    if rows.iter().filter(|r| r.x.is_some()).count() < 2 {
        return None;
    }
    let all: Vec<&CellRecord> = rows.iter().flat_map(|r| r.cells.iter().copied()).collect();
    let unit = &all[0].unit;
    if all.iter().any(|c| &c.unit != unit) {
        return None;
    }
    let col = Column::for_values(
        unit,
        &all.iter()
            .map(|c| c.result.summary.mean)
            .collect::<Vec<_>>(),
    );
    let series: Vec<Series> = placements(&all)
        .into_iter()
        .map(|pl| Series {
            points: rows
                .iter()
                .filter_map(|r| {
                    let c = r.cells.iter().find(|c| c.placement.name == pl)?;
                    let s = &c.result.summary;
                    let d = col.divisor;
                    let ci = s.n >= 2;
                    Some(Point {
                        x: r.x?,
                        y: s.mean / d,
                        lo: ci.then(|| (s.mean - s.ci95_half_width) / d),
                        hi: ci.then(|| (s.mean + s.ci95_half_width) / d),
                        tip: format!("{} on {pl}: {}", r.label, col.with_unit(s.mean)),
                        label: None,
                    })
                })
                .collect(),
            name: pl,
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    // Sizes written with a unit (`16KiB`) get a log axis in bytes; counts a linear one.
    let bytes = rows.iter().any(|r| {
        r.cells[0]
            .params
            .get(x_label)
            .is_some_and(|v| v.parse::<f64>().is_err())
    });
    let opt = if bytes {
        LineOptions {
            y_zero: true,
            x_scale: svg::Scale::Log,
            x_bytes: true,
            ..LineOptions::default()
        }
    } else {
        LineOptions {
            y_zero: true,
            ..LineOptions::default()
        }
    };
    svg::line_chart(
        title,
        "mean with 95% CI, one line per placement",
        x_label,
        &col.unit,
        &series,
        &opt,
    )
}

/// A horizontal bar: the value, its interval, colour index and the text written beside.
struct Bar {
    label: String,
    value: f64,
    lo: Option<f64>,
    hi: Option<f64>,
    color: usize,
    text: String,
}

fn r1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// Horizontal bars from `base` (0 for throughput; 1 for speed-ups, with a dashed line
/// there), whiskers for the interval and the value written at the end.
fn hbars(title: &str, subtitle: &str, axis: &str, base: f64, bars: &[Bar]) -> Option<String> {
    if bars.is_empty() {
        return None;
    }
    let vals = bars
        .iter()
        .flat_map(|b| [Some(b.value), b.lo, b.hi])
        .flatten()
        .filter(|v| v.is_finite())
        .chain([base]);
    let (lo, hi) = svg::extent(vals)?;
    let (lo, hi, ticks) = svg::nice_linear(lo, hi, 5, false);
    let longest = bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(4);
    let left = (longest as f64 * 6.4 + 14.0).clamp(70.0, 260.0);
    let (w, right, top, row) = (640.0, 80.0, 42.0, 20.0);
    let y_axis = top + row * bars.len() as f64;
    let h = y_axis + 40.0;
    let span = if hi > lo { hi - lo } else { 1.0 };
    let px = |v: f64| r1(left + (v.clamp(lo, hi) - lo) / span * (w - left - right));
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{t}" font-family="sans-serif" font-size="11"><rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/><text x="8" y="16" font-size="13" font-weight="bold">{t}</text><text x="8" y="30" fill="#555555">{st}</text>"##,
        t = esc(title),
        st = esc(subtitle)
    );
    for t in &ticks {
        let x = px(*t);
        let _ = write!(
            s,
            r##"<line x1="{x}" y1="{top}" x2="{x}" y2="{y_axis}" stroke="#e4e4e4"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
            y_axis + 14.0,
            esc(&svg::tick_label(*t))
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        r1((left + w - right) / 2.0),
        h - 8.0,
        esc(axis)
    );
    for (i, b) in bars.iter().enumerate() {
        let y = top + row * i as f64;
        let (x0, x1) = (px(base), px(b.value));
        let (a, z) = if x1 >= x0 { (x0, x1) } else { (x1, x0) };
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text><rect x="{a}" y="{}" width="{}" height="{}" fill="{}"><title>{}</title></rect>"#,
            left - 6.0,
            y + 14.0,
            esc(&b.label),
            y + 3.0,
            r1((z - a).max(1.0)),
            row - 6.0,
            svg::color(b.color),
            esc(&format!("{}: {}", b.label, b.text))
        );
        if let (Some(l), Some(u)) = (b.lo, b.hi) {
            let (l, u) = (px(l), px(u));
            let _ = write!(
                s,
                r##"<path d="M{l} {m}H{u}M{l} {a}V{z}M{u} {a}V{z}" stroke="#222222"/>"##,
                m = y + 10.0,
                a = y + 6.0,
                z = y + 14.0
            );
        }
        let end = b.hi.map_or(b.value, |h| h.max(b.value));
        let _ = write!(
            s,
            r##"<text x="{}" y="{}" fill="#333333">{}</text>"##,
            px(end).max(px(base)) + 4.0,
            y + 14.0,
            esc(&b.text)
        );
    }
    let _ = write!(
        s,
        r##"<path d="M{b} {top}V{y_axis}" stroke="#333333"{dash}/></svg>"##,
        b = px(base),
        dash = if base == 0.0 {
            ""
        } else {
            r#" stroke-dasharray="4 3""#
        }
    );
    Some(s)
}

/// Bars of the cells' means (with their 95% CI), coloured by placement.
fn value_bars(cells: &[&CellRecord], label: impl Fn(&CellRecord) -> String) -> (Vec<Bar>, Column) {
    let col = Column::for_values(
        &cells[0].unit,
        &cells
            .iter()
            .map(|c| c.result.summary.mean)
            .collect::<Vec<_>>(),
    );
    let places = placements(cells);
    let bars = cells
        .iter()
        .map(|c| {
            let s = &c.result.summary;
            let d = col.divisor;
            let ci = s.n >= 2;
            Bar {
                label: label(c),
                value: s.mean / d,
                lo: ci.then(|| (s.mean - s.ci95_half_width) / d),
                hi: ci.then(|| (s.mean + s.ci95_half_width) / d),
                color: places
                    .iter()
                    .position(|p| *p == c.placement.name)
                    .unwrap_or(0),
                text: col.num(s.mean),
            }
        })
        .collect();
    (bars, col)
}

fn figure(p: &mut String, svg: Option<String>) {
    if let Some(s) = svg {
        let _ = write!(p, "<figure>{s}</figure>");
    }
}

/// `nginx conns=8 1c2t`: the swept parameters (the server by its name alone) and the
/// placement.
fn short_label(c: &CellRecord, keys: &[String]) -> String {
    let mut parts: Vec<String> = keys
        .iter()
        .filter_map(|k| {
            c.params.get(k).map(|v| {
                if k == "server" {
                    v.clone()
                } else {
                    format!("{k}={v}")
                }
            })
        })
        .collect();
    parts.push(c.placement.name.clone());
    parts.join(" ")
}

fn no_pairs_line(p: &mut String, r: &RunResults) {
    let _ = write!(
        p,
        "<p class=\"muted no-smt\">{}</p>",
        esc(&no_pairs_reason(r))
    );
}

// ---------------------------------------------------------------- sections

/// Paper 004 Chart 1: the `1c2t/1c1t` speed-up per workload.
pub fn chart1(p: &mut String, r: &RunResults) -> Result<(), String> {
    let cells = cells_of(r, is_workload);
    if cells.is_empty() {
        return Err(String::new());
    }
    p.push_str("<section id=\"workload-smt\"><h2>SMT gain per workload</h2>");
    let rows: Vec<_> = smt_yields(r)
        .into_iter()
        .filter(|y| cells.iter().any(|c| c.benchmark == y.benchmark))
        .filter_map(|y| y.smt.clone().map(|s| (y, s)))
        .collect();
    if rows.is_empty() {
        no_pairs_line(p, r);
        p.push_str("</section>");
        return Ok(());
    }
    p.push_str(
        "<p>The throughput improvement with SMT per workload (paper 004 Chart 1): the \
         speed-up 1c2t/1c1t, the ratio of the means with its 95% interval; the dashed line \
         is no gain. Green: faster at 95%, red: slower, grey: the interval includes 1.</p>",
    );
    let bars: Vec<Bar> = rows
        .iter()
        .map(|(y, s)| {
            let ps = params(&y.params);
            let r = &s.ratio;
            Bar {
                label: if ps == "-" {
                    y.benchmark.clone()
                } else {
                    format!("{} {ps}", y.benchmark)
                },
                value: r.ratio,
                lo: r.ci95_low,
                hi: r.ci95_high,
                color: match r.significance().significant() {
                    Some(true) if r.ratio >= 1.0 => 2,
                    Some(true) => 1,
                    _ => 7,
                },
                text: format!("{}x", times(r.ratio)),
            }
        })
        .collect();
    figure(
        p,
        hbars(
            "Throughput with SMT, 1c2t / 1c1t",
            "ratio of means with 95% interval",
            "speed-up (x)",
            1.0,
            &bars,
        ),
    );
    p.push_str("</section>");
    Ok(())
}

/// Paper 000: web servers.
pub fn web(p: &mut String, r: &RunResults) -> Result<(), String> {
    let stat = cells_of(r, |c| c.benchmark == "web-static");
    let cap = cells_of(r, |c| c.benchmark == "web-capacity");
    if stat.is_empty() && cap.is_empty() {
        return Err(String::new());
    }
    p.push_str("<section id=\"web\"><h2>Web servers</h2>");
    let mut any_pair = false;
    if !stat.is_empty() {
        p.push_str(
            "<h3>Static load (web-static)</h3><p>Paper 000 Figs 1-6: the response bandwidth \
             of each server on each placement (mean with 95% CI) and its requests per \
             second, then the SMT speed-ups per server.</p><div class=\"charts\">",
        );
        let keys = swept_keys(&stat);
        let (bars, col) = value_bars(&stat, |c| short_label(c, &keys));
        figure(
            p,
            hbars(
                "web-static bandwidth",
                "per server and placement, mean with 95% CI",
                &col.unit,
                0.0,
                &bars,
            ),
        );
        let rps: Vec<(&CellRecord, f64)> = stat
            .iter()
            .filter_map(|c| metric(c, "requests_per_s").map(|v| (*c, v)))
            .collect();
        if !rps.is_empty() {
            let rcol = Column::for_values("req/s", &rps.iter().map(|x| x.1).collect::<Vec<_>>());
            let places = placements(&stat);
            let bars: Vec<Bar> = rps
                .iter()
                .map(|(c, v)| Bar {
                    label: short_label(c, &keys),
                    value: v / rcol.divisor,
                    lo: None,
                    hi: None,
                    color: places
                        .iter()
                        .position(|p| *p == c.placement.name)
                        .unwrap_or(0),
                    text: rcol.num(*v),
                })
                .collect();
            figure(
                p,
                hbars(
                    "web-static requests per second",
                    "per server and placement, mean over samples",
                    &rcol.unit,
                    0.0,
                    &bars,
                ),
            );
        }
        p.push_str("</div>");
        let (_, rows) = rows_by_params(&stat);
        p.push_str("<h3>Bandwidth per server and placement, SMT speed-ups</h3>");
        p.push_str(&fixed_params(&stat, &keys));
        any_pair |= speedup_table(p, &row_head(&keys), &rows);
        latency_table(p, &stat, &keys);
    }
    if !cap.is_empty() {
        p.push_str(
            "<h3>Capacity (web-capacity)</h3><p>Paper 000 Figs 20-21: the most simultaneous \
             connections of which 95% get their conforming bandwidth without errors, per \
             server and placement. The curve shows the conforming share at each connection \
             count the search tried; the capacity is the last count at or above 95%.</p>\
             <div class=\"charts\">",
        );
        let keys = swept_keys(&cap);
        let (bars, col) = value_bars(&cap, |c| short_label(c, &keys));
        figure(
            p,
            hbars(
                "web-capacity",
                "conforming connections, mean with 95% CI",
                &col.unit,
                0.0,
                &bars,
            ),
        );
        let series: Vec<Series> = cap
            .iter()
            .filter_map(|c| {
                let raw = c.result.series.get("conforming_fraction_by_conns")?;
                // (connections, share) pairs of every sample: averaged per count.
                let mut by: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
                for pair in raw.chunks_exact(2) {
                    by.entry(pair[0] as u64).or_default().push(pair[1]);
                }
                let points: Vec<Point> = by
                    .into_iter()
                    .filter_map(|(n, fs)| {
                        let f = stats::mean(&fs)? * 100.0;
                        Some(Point {
                            x: n as f64,
                            y: f,
                            lo: None,
                            hi: None,
                            tip: format!("{n} connections: {}% conforming", short(f)),
                            label: None,
                        })
                    })
                    .collect();
                Some(Series {
                    name: short_label(c, &keys),
                    points,
                })
            })
            .collect();
        figure(
            p,
            svg::line_chart(
                "Conformance curve",
                "share of connections getting 320 kbit/s",
                "connections",
                "% conforming",
                &series,
                &LineOptions {
                    y_zero: true,
                    x_integer: true,
                    ..LineOptions::default()
                },
            ),
        );
        p.push_str("</div>");
        let (_, rows) = rows_by_params(&cap);
        p.push_str("<h3>Capacity per server and placement, SMT speed-ups</h3>");
        p.push_str(&fixed_params(&cap, &keys));
        any_pair |= speedup_table(p, &row_head(&keys), &rows);
        let capped: Vec<String> = cap
            .iter()
            .filter(|c| metric(c, "capped").is_some_and(|v| v > 0.0))
            .map(|c| short_label(c, &keys))
            .collect();
        if !capped.is_empty() {
            let _ = write!(
                p,
                "<p class=\"muted\">Reached the search's connection cap, so the capacity is \
                 at least the value shown: {}.</p>",
                esc(&capped.join(", "))
            );
        }
    }
    if !any_pair {
        no_pairs_line(p, r);
    }
    let skipped: Vec<_> = r
        .skipped
        .iter()
        .filter(|s| s.key.benchmark.starts_with("web-"))
        .collect();
    if !skipped.is_empty() {
        p.push_str("<h3>Web cells not measured</h3><ul class=\"notes\">");
        for s in skipped {
            let _ = write!(
                p,
                "<li><code>{} {} on {}</code>: {}</li>",
                esc(&s.key.benchmark),
                esc(&params(&s.key.params)),
                esc(&s.key.placement),
                esc(&s.reason)
            );
        }
        p.push_str("</ul>");
    }
    p.push_str("</section>");
    Ok(())
}

fn row_head(keys: &[String]) -> String {
    if keys.is_empty() {
        "params".into()
    } else {
        keys.join(", ")
    }
}

/// Latency percentiles, requests and errors of the web-static cells.
fn latency_table(p: &mut String, cells: &[&CellRecord], keys: &[String]) {
    const Q: [(&str, &str); 5] = [
        ("p50", "latency_p50_ns"),
        ("p90", "latency_p90_ns"),
        ("p99", "latency_p99_ns"),
        ("p99.9", "latency_p999_ns"),
        ("max", "latency_max_ns"),
    ];
    let vals: Vec<f64> = cells
        .iter()
        .flat_map(|c| Q.iter().filter_map(|(_, k)| metric(c, k)))
        .collect();
    if vals.is_empty() {
        return;
    }
    let col = Column::for_values("ns", &vals);
    p.push_str(
        "<h3>Response latency and errors</h3><p>Per request, seen by the client; each \
         percentile is the mean over the cell's samples. A sample with failed requests is \
         refused (no throughput is reported from it), so such a cell is listed under \"not \
         measured\" with its errors.</p><table><tr><th>server and placement</th>",
    );
    for (name, _) in Q {
        let _ = write!(
            p,
            "<th>{name}<br/><span class=\"sub\">{}</span></th>",
            esc(&col.unit)
        );
    }
    p.push_str("<th>requests</th><th>bytes/request</th><th>connects</th><th>errors</th></tr>");
    for c in cells {
        let _ = write!(p, "<tr><td>{}</td>", esc(&short_label(c, keys)));
        for (_, k) in Q {
            match metric(c, k) {
                Some(v) => {
                    let _ = write!(p, "<td class=\"num\">{}</td>", col.num(v));
                }
                None => p.push_str("<td class=\"muted\">-</td>"),
            }
        }
        let cells = [
            metric_sum(c, "requests").map(num),
            metric(c, "bytes_per_request").map(crate::units::size),
            metric_sum(c, "connects").map(num),
        ];
        for v in cells {
            match v {
                Some(v) => {
                    let _ = write!(p, "<td class=\"num\">{}</td>", esc(&v));
                }
                None => p.push_str("<td class=\"muted\">-</td>"),
            }
        }
        match metric_sum(c, "errors") {
            Some(e) => {
                let _ = write!(
                    p,
                    "<td class=\"num{}\">{}</td>",
                    if e > 0.0 { " bad" } else { "" },
                    num(e)
                );
            }
            None => p.push_str("<td class=\"muted\">-</td>"),
        }
        p.push_str("</tr>");
    }
    p.push_str("</table>");
}

/// CPU time per unit of work the workload recorded itself (`server_cpu_us_per_tx`) or
/// the counters measured (`--counters`), per cell; nothing when neither exists.
fn per_unit_table(p: &mut String, cells: &[&CellRecord]) {
    let mut own: Vec<String> = Vec::new();
    for c in cells {
        for s in &c.result.samples {
            for k in s.metrics.keys() {
                if k.contains("cpu") && k.contains("_per_") && !own.contains(k) {
                    own.push(k.clone());
                }
            }
        }
    }
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
    p.push_str(
        "<details><summary>CPU and OS cost per unit of work</summary><table><tr><th>cell</th>",
    );
    for k in &own {
        let _ = write!(p, "<th>{}</th>", esc(&k.replace('_', " ")));
    }
    if counted {
        p.push_str(
            "<th>CPU time per unit<br/><span class=\"sub\">counters</span></th>\
             <th>context switches per unit</th><th>instructions per unit</th>",
        );
    }
    p.push_str("</tr>");
    for (c, h) in cells.iter().zip(&heads) {
        let _ = write!(
            p,
            "<tr><td>{} on {}</td>",
            esc(&params(&c.params)),
            esc(&c.placement.name)
        );
        for k in &own {
            match metric(c, k) {
                Some(v) => {
                    let _ = write!(p, "<td class=\"num\">{}</td>", num(v));
                }
                None => p.push_str("<td class=\"muted\">-</td>"),
            }
        }
        if counted {
            let unit = h.as_ref().and_then(|h| h.unit.clone()).unwrap_or_default();
            let td = |x: Option<f64>, time: bool| match x {
                Some(v) => format!(
                    "<td class=\"num\">{} / {}</td>",
                    if time { duration_ns(v) } else { num(v) },
                    esc(&unit)
                ),
                None => "<td class=\"muted\">-</td>".into(),
            };
            let h = h.as_ref();
            p.push_str(&td(h.and_then(|h| h.cpu_ns_per_unit), true));
            p.push_str(&td(h.and_then(|h| h.context_switches_per_unit), false));
            p.push_str(&td(h.and_then(|h| h.instructions_per_unit), false));
        }
        p.push_str("</tr>");
    }
    p.push_str("</table></details>");
}

/// One benchmark's table, chart and per-unit costs; whether it had a speed-up.
fn bench_block(p: &mut String, cells: &[&CellRecord], bench: &str, origin: &str) -> bool {
    let (keys, rows) = rows_by_params(cells);
    let _ = write!(
        p,
        "<h3>{} <span class=\"sub\">{}{}</span></h3>",
        esc(bench),
        esc(origin),
        esc(&format!(" ({})", cells[0].unit))
    );
    p.push_str(&fixed_params(cells, &keys));
    let any = speedup_table(p, &row_head(&keys), &rows);
    if keys.len() == 1 {
        figure(
            p,
            sweep_chart(&format!("{bench} by {}", keys[0]), &keys[0], &rows),
        );
    }
    per_unit_table(p, cells);
    any
}

/// Paper 001 Tables 3-6 and the netperf-style rows of paper 004.
pub fn tables(p: &mut String, r: &RunResults) -> Result<(), String> {
    let present: Vec<_> = TABLES
        .iter()
        .filter(|(b, _)| r.cells.iter().any(|c| c.benchmark == *b))
        .collect();
    if present.is_empty() {
        return Err(String::new());
    }
    p.push_str(
        "<section id=\"workload-tables\"><h2>Speed-up tables</h2><p>Paper 001's layout: a \
         row per value of the swept parameter, the value per placement (mean ± 95% CI), the \
         SMT speed-ups (ratio of the means with Fieller's 95% interval; above 1 is better \
         with SMT) and their geometric mean.</p>",
    );
    let mut any_pair = false;
    for (bench, origin) in present {
        let cells = cells_of(r, |c| c.benchmark == *bench);
        any_pair |= bench_block(p, &cells, bench, origin);
    }
    if !any_pair {
        no_pairs_line(p, r);
    }
    p.push_str("</section>");
    Ok(())
}

/// Paper 001 Table 2: a row per AIM9 benchmark.
pub fn aim(p: &mut String, r: &RunResults) -> Result<(), String> {
    let cells = cells_of(r, |c| c.group == "aim");
    if cells.is_empty() {
        return Err(String::new());
    }
    p.push_str(
        "<section id=\"aim\"><h2>AIM9 rows</h2><p>Paper 001 Table 2's layout: a row per \
         benchmark with its throughput per placement in its own unit (mean ± 95% CI), and \
         the SMT speed-ups.</p>",
    );
    let mut rows: Vec<Row<'_>> = Vec::new();
    for c in &cells {
        let ps = params(&c.params);
        let label = if ps == "-" {
            c.benchmark.clone()
        } else {
            format!("{} {ps}", c.benchmark)
        };
        match rows.iter_mut().find(|r| r.label == label) {
            Some(row) => row.cells.push(c),
            None => rows.push(Row {
                label,
                x: None,
                cells: vec![c],
            }),
        }
    }
    if !speedup_table(p, "benchmark", &rows) {
        no_pairs_line(p, r);
    }
    p.push_str("</section>");
    Ok(())
}

fn param_or<'a>(c: &'a CellRecord, key: &str, default: &'a str) -> &'a str {
    c.params.get(key).map_or(default, String::as_str)
}

/// Paper 002 Figs 15-16: the task pool.
pub fn task_pool(p: &mut String, r: &RunResults) -> Result<(), String> {
    let cells = cells_of(r, |c| c.benchmark == "task-pool");
    if cells.is_empty() {
        return Err(String::new());
    }
    p.push_str(
        "<section id=\"task-pool\"><h2>Task pool</h2><p>Paper 002 Figs 15-16: a task tree \
         (FFT or block matrix multiply) run by a pool of workers sharing one queue, \
         lock-free (CAS) or mutex-guarded: tasks per second and the run time of one tree \
         against the number of workers, a pair of charts per kind of work and a line per \
         queue and threads per core.</p>",
    );
    let workers = |c: &CellRecord| {
        metric(c, "workers").or_else(|| c.params.get("workers").and_then(|w| w.parse().ok()))
    };
    let col = Column::for_values(
        &cells[0].unit,
        &cells
            .iter()
            .map(|c| c.result.summary.mean)
            .collect::<Vec<_>>(),
    );
    // One pair of charts per kind of work (paper 002 Fig 15 is the FFT, Fig 16 the
    // matrix multiply): their rates differ by orders of magnitude.
    let mut works: Vec<&str> = Vec::new();
    for c in &cells {
        let w = param_or(c, "work", "fft");
        if !works.contains(&w) {
            works.push(w);
        }
    }
    p.push_str("<div class=\"charts\">");
    for work in works {
        let of_work: Vec<&CellRecord> = cells
            .iter()
            .copied()
            .filter(|c| param_or(c, "work", "fft") == work)
            .collect();
        task_pool_charts(p, &of_work, work);
    }
    let _ = write!(
        p,
        "</div><table><tr><th>work</th><th>queue</th><th>placement</th><th>workers</th>\
         <th>throughput<br/><span class=\"sub\">{}</span></th><th>tree run time</th>\
         <th>tasks per tree</th><th>CAS retries per task</th>\
         <th>lock contended per task</th></tr>",
        esc(&col.unit)
    );
    for c in &cells {
        let opt_num = |k: &str| metric(c, k).map_or("-".to_string(), num);
        let _ = write!(
            p,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(param_or(c, "work", "fft")),
            esc(param_or(c, "queue", "cas")),
            esc(&c.placement.name),
            workers(c).map_or("-".into(), short),
            esc(&value_text(&col, c)),
            metric(c, "tree_ms").map_or("-".into(), |v| duration_ns(v * 1e6)),
            metric(c, "tasks_per_tree").map_or("-".into(), short),
            opt_num("cas_retries_per_task"),
            opt_num("lock_contended_per_task"),
        );
    }
    p.push_str("</table><h3>Tasks per second per placement, SMT speed-ups</h3>");
    let (keys, rows) = rows_by_params(&cells);
    p.push_str(&fixed_params(&cells, &keys));
    if !speedup_table(p, &row_head(&keys), &rows) {
        no_pairs_line(p, r);
    }
    p.push_str("</section>");
    Ok(())
}

/// Tasks per second and tree run time of one kind of work against the number of
/// workers, a line per queue and threads per core.
fn task_pool_charts(p: &mut String, cells: &[&CellRecord], work: &str) {
    let workers = |c: &CellRecord| {
        metric(c, "workers").or_else(|| c.params.get("workers").and_then(|w| w.parse().ok()))
    };
    let name = |c: &CellRecord| {
        format!(
            "{} ({}t/core)",
            param_or(c, "queue", "cas"),
            c.placement.threads_per_core
        )
    };
    let mut names: Vec<String> = Vec::new();
    for c in cells {
        if !names.contains(&name(c)) {
            names.push(name(c));
        }
    }
    type Y = Option<(f64, Option<(f64, f64)>)>;
    let series_of = |f: &dyn Fn(&CellRecord) -> Y| -> Vec<Series> {
        names
            .iter()
            .map(|n| {
                let mut points: Vec<Point> = cells
                    .iter()
                    .filter(|c| &name(c) == n)
                    .filter_map(|c| {
                        let x = workers(c)?;
                        let (y, ci) = f(c)?;
                        Some(Point {
                            x,
                            y,
                            lo: ci.map(|c| c.0),
                            hi: ci.map(|c| c.1),
                            tip: format!(
                                "{work} {n}, {} workers on {}: {}",
                                short(x),
                                c.placement.name,
                                num(y)
                            ),
                            label: None,
                        })
                    })
                    .collect();
                points.sort_by(|a, b| a.x.total_cmp(&b.x));
                Series {
                    name: n.clone(),
                    points,
                }
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let col = Column::for_values(
        &cells[0].unit,
        &cells
            .iter()
            .map(|c| c.result.summary.mean)
            .collect::<Vec<_>>(),
    );
    let rate = series_of(&|c| {
        let s = &c.result.summary;
        let d = col.divisor;
        let ci = (s.n >= 2).then(|| {
            (
                (s.mean - s.ci95_half_width) / d,
                (s.mean + s.ci95_half_width) / d,
            )
        });
        Some((s.mean / d, ci))
    });
    let tree = series_of(&|c| metric(c, "tree_ms").map(|v| (v, None)));
    let opt = LineOptions {
        y_zero: true,
        x_integer: true,
        ..LineOptions::default()
    };
    figure(
        p,
        svg::line_chart(
            &format!("{work}: tasks per second"),
            "mean with 95% CI",
            "workers",
            &col.unit,
            &rate,
            &opt,
        ),
    );
    figure(
        p,
        svg::line_chart(
            &format!("{work}: run time of one tree"),
            "mean over samples; lower is better",
            "workers",
            "ms",
            &tree,
            &opt,
        ),
    );
}

/// `oltp-pg`, `oltp-sqlite` and `sdet`: the value per placement and the speed-ups.
pub fn oltp(p: &mut String, r: &RunResults) -> Result<(), String> {
    let present: Vec<&str> = OLTP
        .iter()
        .copied()
        .filter(|b| r.cells.iter().any(|c| c.benchmark == *b))
        .collect();
    if present.is_empty() {
        return Err(String::new());
    }
    p.push_str(
        "<section id=\"oltp\"><h2>OLTP and SDET</h2><p>Transactions per second of the \
         database loads and scripts per hour of the multi-user shell load, per placement \
         (mean ± 95% CI), with the SMT speed-ups.</p>",
    );
    let mut any_pair = false;
    for bench in present {
        let cells = cells_of(r, |c| c.benchmark == bench);
        any_pair |= bench_block(p, &cells, bench, "");
    }
    if !any_pair {
        no_pairs_line(p, r);
    }
    p.push_str("</section>");
    Ok(())
}

/// The secondary figures each workload records beside its value, per cell, as a plain
/// text table for the terminal (`smtlab report`): requests/s, latency percentiles and
/// errors of the web load, CPU per message of the network rows, tree run time and CAS
/// retries of the task pool. `None` when no workload cell carries any of them.
pub fn text_summary(r: &RunResults) -> Option<String> {
    // (metric, label, how it is written)
    type Fmt = fn(f64) -> String;
    let ns: Fmt = duration_ns;
    let plain: Fmt = num;
    let ms: Fmt = |v| duration_ns(v * 1e6);
    let us: Fmt = |v| duration_ns(v * 1e3);
    let figures: [(&str, &str, Fmt); 10] = [
        ("requests_per_s", "req/s", plain),
        ("latency_p50_ns", "p50", ns),
        ("latency_p99_ns", "p99", ns),
        ("ops_per_s", "ops/s", plain),
        ("server_cpu_us_per_tx", "server CPU/tx", us),
        ("server_cpu_us_per_kib", "server CPU/KiB", us),
        ("rtt_p99_ns", "rtt p99", ns),
        ("tree_ms", "tree", ms),
        ("cas_retries_per_task", "CAS retries/task", plain),
        ("lock_contended_per_task", "contended/task", plain),
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for c in r.cells.iter().filter(|c| is_workload(c)) {
        let mut parts: Vec<String> = figures
            .iter()
            .filter_map(|(k, label, f)| metric(c, k).map(|v| format!("{label} {}", f(v))))
            .collect();
        if let Some(e) = metric_sum(c, "errors") {
            parts.push(format!("errors {}", num(e)));
        }
        if parts.is_empty() {
            continue;
        }
        rows.push(vec![
            c.benchmark.clone(),
            params(&c.params),
            c.placement.name.clone(),
            parts.join("  "),
        ]);
    }
    (!rows.is_empty()).then(|| {
        crate::fmt::text_table(&["workload", "params", "placement", "figures"], &rows, &[])
    })
}
