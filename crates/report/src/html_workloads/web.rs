//! The `web` section (paper 000): `web-static` bandwidth and requests per second per
//! server and placement (Figs 1-6), its latency percentiles and errors, `web-capacity`
//! bars and conformance curve (Figs 20-21), the SMT speed-ups per server, and the web
//! cells that were not measured.

use std::collections::BTreeMap;

use maud::{PreEscaped, html};
use smtlab_model::metrics::web as m;
use smtlab_model::stats;
use smtlab_model::{CellRecord, ReportSection, RunResults};

use super::cells::{cells_in, main_param, metric, metric_sum, placements};
use super::charts::{Bar, figure, hbars, placement_color, value_bars};
use super::rows::{fixed_params, row_head, rows_by_params, swept_keys};
use super::speedup_table::{no_pairs, num_cell, speedup_table};
use crate::fmt::{num, params, short};
use crate::html_parts::BR;
use crate::svg::{self, LineOptions, Point, Series};
use crate::units::Column;

/// Paper 000: web servers.
pub(crate) fn web(r: &RunResults) -> Option<maud::Markup> {
    let stat = cells_in(r, |s| *s == ReportSection::WebStatic);
    let cap = cells_in(r, |s| *s == ReportSection::WebCapacity);
    let remote = remote_groups(r);
    if stat.is_empty() && cap.is_empty() && remote.is_empty() {
        return None;
    }
    let mut out = String::new();
    let p = &mut out;
    let mut any_pair = false;
    if !stat.is_empty() {
        any_pair |= web_static(p, &stat, main_param(r, &stat));
    }
    if !cap.is_empty() {
        any_pair |= web_capacity(p, &cap, main_param(r, &cap));
    }
    let any_web_cells = !stat.is_empty() || !cap.is_empty();
    if any_web_cells && !any_pair {
        p.push_str(&no_pairs(r).into_string());
    }
    agents_table(p, &remote);
    let skipped: Vec<_> = r
        .skipped
        .iter()
        .filter(|s| {
            r.info(&s.key.benchmark).is_some_and(|i| {
                matches!(
                    i.report,
                    ReportSection::WebStatic | ReportSection::WebCapacity
                )
            })
        })
        .collect();
    if !skipped.is_empty() {
        let list = html! {
            h3 { "Web cells not measured" }
            ul class="notes" {
                @for s in skipped {
                    li {
                        code {
                            (s.key.benchmark) " " (params(&s.key.flat_params())) " on " (s.key.placement)
                        }
                        ": " (s.reason)
                    }
                }
            }
        };
        p.push_str(&list.into_string());
    }
    Some(html! { section id="web" { h2 { "Web servers" } (PreEscaped(out)) } })
}

/// Paper 000 Figs 1-6: `web-static` bandwidth and requests per second per server and
/// placement, the speed-ups and the latency table; whether it had a speed-up.
fn web_static(p: &mut String, stat: &[&CellRecord], main: Option<&str>) -> bool {
    let name = stat[0].benchmark.as_str();
    let mut charts = String::new();
    let keys = swept_keys(stat, main);
    value_figure(
        &mut charts,
        stat,
        &keys,
        &format!("{name} bandwidth"),
        "per server and placement, mean with 95% CI",
    );
    let rps: Vec<(&CellRecord, f64)> = stat
        .iter()
        .filter_map(|c| metric(c, m::REQUESTS_PER_S).map(|v| (*c, v)))
        .collect();
    if !rps.is_empty() {
        let rcol = Column::for_values("req/s", &rps.iter().map(|x| x.1).collect::<Vec<_>>());
        let places = placements(stat);
        let bars: Vec<Bar> = rps
            .iter()
            .map(|(c, v)| Bar {
                label: short_label(c, &keys),
                value: v / rcol.divisor,
                lo: None,
                hi: None,
                color: placement_color(&places, c),
                text: rcol.num(*v),
            })
            .collect();
        figure(
            &mut charts,
            hbars(
                &format!("{name} requests per second"),
                "per server and placement, mean over samples",
                &rcol.unit,
                0.0,
                &bars,
            ),
        );
    }
    let head = html! {
        h3 { "Static load (" (name) ")" }
        p {
            "Paper 000 Figs 1-6: the response bandwidth of each server on each placement \
             (mean with 95% CI) and its requests per second, then the SMT speed-ups per \
             server."
        }
        div class="charts" { (PreEscaped(charts)) }
    };
    p.push_str(&head.into_string());
    let any_pair = speedup_part(
        p,
        stat,
        &keys,
        "Bandwidth per server and placement, SMT speed-ups",
        main,
    );
    latency_table(p, stat, &keys);
    any_pair
}

/// Paper 000 Figs 20-21: `web-capacity` bars, the conformance curve and the speed-ups;
/// whether it had a speed-up.
fn web_capacity(p: &mut String, cap: &[&CellRecord], main: Option<&str>) -> bool {
    let name = cap[0].benchmark.as_str();
    let mut charts = String::new();
    let keys = swept_keys(cap, main);
    value_figure(
        &mut charts,
        cap,
        &keys,
        name,
        "conforming connections, mean with 95% CI",
    );
    let series: Vec<Series> = cap
        .iter()
        .filter_map(|c| {
            let raw = c.result.series.get(m::CONFORMING_FRACTION_BY_CONNS)?;
            // (connections, share) pairs of every sample: averaged per count.
            let mut by: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
            for pair in raw.chunks_exact(2) {
                by.entry(pair[0] as u64).or_default().push(pair[1]);
            }
            let points: Vec<Point> = by
                .into_iter()
                .filter_map(|(n, fs)| {
                    let f = stats::mean(&fs)? * 100.0;
                    Some(Point::new(
                        n as f64,
                        f,
                        (None, None),
                        format!("{n} connections: {}% conforming", short(f)),
                    ))
                })
                .collect();
            Some(Series {
                name: short_label(c, &keys),
                points,
            })
        })
        .collect();
    figure(
        &mut charts,
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
    let head = html! {
        h3 { "Capacity (" (name) ")" }
        p {
            "Paper 000 Figs 20-21: the most simultaneous connections of which 95% get their \
             conforming bandwidth without errors, per server and placement. The curve shows \
             the conforming share at each connection count the search tried; the capacity is \
             the last count at or above 95%."
        }
        div class="charts" { (PreEscaped(charts)) }
    };
    p.push_str(&head.into_string());
    let any_pair = speedup_part(
        p,
        cap,
        &keys,
        "Capacity per server and placement, SMT speed-ups",
        main,
    );
    let capped: Vec<String> = cap
        .iter()
        .filter(|c| metric(c, m::CAPPED).is_some_and(|v| v > 0.0))
        .map(|c| short_label(c, &keys))
        .collect();
    if !capped.is_empty() {
        let line = html! {
            p class="muted" {
                "Reached the search's connection cap, so the capacity is at least the value \
                 shown: " (capped.join(", ")) "."
            }
        };
        p.push_str(&line.into_string());
    }
    any_pair
}

/// The bars of `cells`' values per server and placement.
fn value_figure(p: &mut String, cells: &[&CellRecord], keys: &[String], title: &str, sub: &str) {
    let (bars, col) = value_bars(cells, |c| short_label(c, keys));
    figure(p, hbars(title, sub, &col.unit, 0.0, &bars));
}

/// `cells`' values per server and placement and their SMT speed-ups under `heading`;
/// whether it had a speed-up.
fn speedup_part(
    p: &mut String,
    cells: &[&CellRecord],
    keys: &[String],
    heading: &str,
    main: Option<&str>,
) -> bool {
    let (_, rows) = rows_by_params(cells, main);
    p.push_str(&html! { h3 { (heading) } }.into_string());
    p.push_str(&fixed_params(cells, keys));
    speedup_table(p, &row_head(keys), &rows)
}

/// `nginx conns=8 1c2t`: the swept parameters (the server by its name alone) and the
/// placement.
fn short_label(c: &CellRecord, keys: &[String]) -> String {
    let mut parts: Vec<String> = keys
        .iter()
        .filter_map(|k| {
            c.flat_params()
                .get(k)
                .cloned()
                .map(|v| if k == "server" { v } else { format!("{k}={v}") })
        })
        .collect();
    parts.push(c.placement.name.clone());
    parts.join(" ")
}

/// Latency percentiles, requests and errors of the web-static cells.
fn latency_table(p: &mut String, cells: &[&CellRecord], keys: &[String]) {
    const Q: [(&str, &str); 5] = [
        ("p50", m::LATENCY_P50_NS),
        ("p90", m::LATENCY_P90_NS),
        ("p99", m::LATENCY_P99_NS),
        ("p99.9", m::LATENCY_P999_NS),
        ("max", m::LATENCY_MAX_NS),
    ];
    let vals: Vec<f64> = cells
        .iter()
        .flat_map(|c| Q.iter().filter_map(|(_, k)| metric(c, k)))
        .collect();
    if vals.is_empty() {
        return;
    }
    let col = Column::for_values("ns", &vals);
    let table = html! {
        h3 { "Response latency and errors" }
        p {
            "Per request, seen by the client; each sample's percentiles are read from an HDR \
             histogram of every request (3 significant digits), and the table shows their \
             mean over the cell's samples. A sample with failed requests is refused (no \
             throughput is reported from it), so such a cell is listed under \"not \
             measured\" with its errors."
        }
        table {
            tr {
                th { "server and placement" }
                @for (name, _) in Q { th { (name) (BR) span class="sub" { (col.unit) } } }
                th { "requests" } th { "bytes/request" } th { "connects" } th { "errors" }
            }
            @for c in cells {
                tr {
                    td { (short_label(c, keys)) }
                    @for (_, k) in Q { (num_cell(metric(c, k).map(|v| col.num(v)))) }
                    (num_cell(metric_sum(c, m::REQUESTS).map(num)))
                    (num_cell(metric(c, m::BYTES_PER_REQUEST).map(crate::units::size)))
                    (num_cell(metric_sum(c, m::CONNECTS).map(num)))
                    @match metric_sum(c, m::ERRORS) {
                        Some(e) => td class=(if e > 0.0 { "num bad" } else { "num" }) { (num(e)) },
                        None => (num_cell(None)),
                    }
                }
            }
        }
    };
    p.push_str(&table.into_string());
}

/// The cells whose load came from smtlab agents on other hosts (`--client-hosts`): a
/// row per agent with its share of the requests, its errors and its clock.
/// The cells loaded by remote agents, of any workload (`web-slo` has no section of its
/// own), per benchmark in run order, each with the parameters its benchmark sweeps.
fn remote_groups(r: &RunResults) -> Vec<(Vec<&CellRecord>, Vec<String>)> {
    let remote = r
        .cells
        .iter()
        .filter(|c| crate::remote::remote_clients(c).is_some());
    let by_benchmark = crate::grouped(remote, |c| c.benchmark.as_str());
    by_benchmark
        .into_iter()
        .map(|(_, cells)| {
            let keys = swept_keys(&cells, main_param(r, &cells));
            (cells, keys)
        })
        .collect()
}

fn agents_table(p: &mut String, groups: &[(Vec<&CellRecord>, Vec<String>)]) {
    // Each cell named by its benchmark, then as its benchmark's other tables name it.
    let remote: Vec<(String, crate::remote::RemoteClients)> = groups
        .iter()
        .flat_map(|(cells, keys)| {
            cells.iter().filter_map(move |c| {
                crate::remote::remote_clients(c)
                    .map(|r| (format!("{} {}", c.benchmark, short_label(c, keys)), r))
            })
        })
        .collect();
    if remote.is_empty() {
        return;
    }
    use crate::remote::{ms, ms_signed};
    let table = html! {
        h3 { "Remote load clients" }
        p {
            "Cells loaded by smtlab agents on other hosts: each agent's part of the requests \
             per second (mean over the samples), its failed requests, and its clock minus \
             this host's, good to half the round trip it was measured over. The start \
             spread is the widest gap between the first and the last agent's start in any \
             sample, by this host's clock."
        }
        table {
            tr {
                th { "cell" } th { "start spread" } th { "agent" }
                th { "req/s" } th { "share" } th { "errors" } th { "clock offset" }
                th { "±" }
            }
            @for (label, r) in &remote {
                @for (i, a) in r.agents.iter().enumerate() {
                    tr {
                        @if i == 0 {
                            td rowspan=(r.agents.len()) {
                                (label)
                                @if r.lost > 0 { br; span class="bad" { (crate::remote::heading(r)) } }
                            }
                            td class="num" rowspan=(r.agents.len()) { (ms(r.start_spread_max_ns)) }
                        }
                        td class="num" { "#" (a.index) }
                        td class="num" { (num(a.requests_per_s)) }
                        td class="num" { (format!("{:.0}%", 100.0 * a.share)) }
                        td class=(if a.errors > 0.0 { "num bad" } else { "num" }) { (num(a.errors)) }
                        td class="num" { (ms_signed(a.clock_offset_ns)) }
                        td class="num" { (ms(a.rtt_ns / 2.0)) }
                    }
                }
            }
        }
    };
    p.push_str(&table.into_string());
}
