//! The page's figures of why SMT helps or hurts, drawn from recorded counts
//! ([`crate::counter_ratios`]): per benchmark a bar per placement for each ratio with
//! the SMT change beside it, top-down level 1 as stacked bars per placement, DRAM
//! bandwidth with its share of peak and its correlation with throughput, and the
//! named events as counted (encoding, scope, multiplexing). Whatever was not counted
//! is one line saying why.

use maud::{Markup, html};
use smtlab_model::RunResults;
use smtlab_model::counters::bandwidth::{DramBandwidth, correlation};

use crate::counter_ratios::{CellRatios, RatioGroup, groups};
use crate::fmt::{Esc, num, params};
use crate::svg::{color, f1, share_strip};

/// Horizontal bars, one per `(label, value)`, scaled to the largest.
fn bars(rows: &[(String, f64, String)]) -> Markup {
    let (w, row_h, label_w) = (320.0, 16.0, 90.0);
    let max = rows.iter().map(|r| r.1).fold(0.0f64, f64::max);
    let h = row_h * rows.len() as f64;
    let width = |value: f64| {
        if max > 0.0 {
            (w - label_w - 70.0) * value / max
        } else {
            0.0
        }
    };
    html! {
        svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {w} {h}")) width=(w)
            height=(h) class="strip" {
            @for (i, (label, value, text)) in rows.iter().enumerate() {
                @let y = i as f64 * row_h;
                text x="0" y=(f1(y + 12.0)) font-size="11" { (Esc(label)) }
                rect x=(label_w) y=(f1(y + 2.0)) width=(f1(width(*value)))
                    height=(f1(row_h - 4.0)) fill=(color(i)) {}
                text x=(f1(label_w + width(*value) + 4.0)) y=(f1(y + 12.0)) font-size="11" {
                    (Esc(text))
                }
            }
        }
    }
}

/// A stacked bar of top-down shares.
fn stack(shares: &[(&str, f64)]) -> Markup {
    let parts: Vec<(String, usize, f64)> = (shares.iter().enumerate())
        .map(|(i, (name, share))| {
            (
                format!("{name} {:.1}%", 100.0 * share),
                i,
                share.clamp(0.0, 1.0),
            )
        })
        .collect();
    share_strip(260.0, &parts)
}

fn ratio_figures(g: &RatioGroup) -> Markup {
    // Every ratio key some placement has, in first-seen order.
    let all = g.placements.iter().flat_map(|(_, r)| &r.ratios);
    let keys = crate::grouped(all, |x| x.key.as_str());
    html! {
        table {
            tr { th { "ratio" } th { "per placement" } th { "SMT change" } }
            @for (key, of_key) in &keys {
                @let label = &of_key[0].label;
                @let rows: Vec<(String, f64, String)> = g.placements.iter().filter_map(|(p, r)| {
                    r.get(key).map(|x| (p.clone(), x.value, x.text()))
                }).collect();
                @let changes: Vec<String> = g.smt_changes.iter().filter(|c| c.key == *key)
                    .map(|c| format!("{}/{} {:+.1}%", c.smt, c.base, 100.0 * c.change)).collect();
                tr {
                    td { (label) }
                    td { (bars(&rows)) }
                    td class="num" {
                        @if changes.is_empty() { span class="muted" { "-" } } @else { (changes.join(", ")) }
                    }
                }
            }
        }
    }
}

fn topdown_figure(g: &RatioGroup) -> Markup {
    let with: Vec<(&String, &CellRatios)> = g
        .placements
        .iter()
        .filter(|(_, r)| r.topdown.is_some())
        .map(|(p, r)| (p, r))
        .collect();
    if with.is_empty() {
        return html! {};
    }
    html! {
        h4 { "Top-down level 1" }
        table {
            tr {
                th { "placement" } th { "method and scope" } th { "slots" }
                th { "retiring" } th { "bad speculation" } th { "front-end" } th { "back-end" }
                th { "SMT contention" } th {}
            }
            @for (p, r) in &with {
                @if let Some(t) = &r.topdown {
                    tr {
                        td { (p) }
                        td { (t.method.label()) "; " (t.scope) }
                        td class="num" { (format!("{:.0}", t.slots)) }
                        @for (_, share) in t.categories().iter().take(4) {
                            td class="num" { (format!("{:.1}%", 100.0 * share)) }
                        }
                        td class="num" {
                            @match t.smt_contention {
                                Some(s) => (format!("{:.1}%", 100.0 * s)),
                                None => span class="muted" { "-" },
                            }
                        }
                        td { (stack(&t.categories())) }
                    }
                }
            }
        }
        // How the sibling moves each category, in percentage points.
        @for l in RatioGroup::topdown_moves(&with) { p { (l) } }
    }
}

fn dram_figure(r: &RunResults, g: &RatioGroup) -> Markup {
    let with: Vec<(&String, &DramBandwidth)> = g
        .placements
        .iter()
        .filter_map(|(p, x)| Some((p, x.dram.as_ref()?)))
        .collect();
    if with.is_empty() {
        return html! {};
    }
    // Throughput (the cell's mean) against bandwidth across placements (paper 000 s3.5).
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for (p, b) in &with {
        if let Some(c) = r.cells.iter().find(|c| {
            c.benchmark == g.benchmark && c.flat_params() == g.params && c.placement.name == **p
        }) {
            xs.push(c.result.summary.mean);
            ys.push(b.gb_per_s);
        }
    }
    let corr = correlation(&xs, &ys);
    html! {
        h4 { "DRAM bandwidth (memory-controller CAS counts x 64 bytes)" }
        table {
            tr { th { "placement" } th { "GB/s" } th { "read GB" } th { "write GB" } th { "share of peak" } }
            @for (p, b) in &with {
                tr {
                    td { (p) }
                    td class="num" { (num(b.gb_per_s)) }
                    td class="num" { (num(b.read_bytes / 1e9)) }
                    td class="num" { (num(b.write_bytes / 1e9)) }
                    td class="num" {
                        @match b.share_of_peak {
                            Some(s) => (format!("{:.1}%", 100.0 * s)),
                            None => span class="muted" { "peak not known" },
                        }
                    }
                }
            }
        }
        p {
            @match corr {
                Some(c) => { "Correlation of throughput and DRAM bandwidth across placements: " (format!("{c:.2}")) "." }
                None => { "Correlation of throughput and bandwidth: needs three placements or more with both." }
            }
        }
    }
}

fn named_table(r: &RunResults) -> Markup {
    let rows: Vec<_> = r
        .cells
        .iter()
        .filter_map(|c| c.counters.as_ref().map(|k| (c, k)))
        .flat_map(|(c, k)| k.values.named.iter().map(move |n| (c, n)))
        .collect();
    // Each event not counted once, with the first reason given.
    let unavailable = r.cells.iter().filter_map(|c| c.counters.as_ref());
    let unavailable = unavailable.flat_map(|k| &k.values.named_unavailable);
    let missing = crate::grouped(unavailable, |u| u.name.clone());
    if rows.is_empty() && missing.is_empty() {
        return html! {};
    }
    html! {
        h3 { "Named events (--events)" }
        @if !rows.is_empty() {
            table {
                tr {
                    th { "benchmark" } th { "placement" } th { "event" } th { "source" }
                    th { "encoding" } th { "scope" } th { "value" } th { "enabled/running" }
                }
                @for (c, n) in &rows {
                    tr {
                        td { (c.benchmark) }
                        td { (c.placement.name) }
                        td { code { (n.name) } }
                        td { (n.source) }
                        td { @for e in &n.encodings { code { (e.to_string()) } " " } }
                        td { (n.scope) }
                        td class="num" {
                            @match n.value() {
                                Some(v) => { (num(v)) @if let Some(u) = &n.unit { " " (u) } },
                                None => span class="muted" { "never ran" },
                            }
                        }
                        td class="num" {
                            @match n.reading.scale_factor() {
                                Some(f) => (format!("x{f:.2}")),
                                None => span class="muted" { "-" },
                            }
                        }
                    }
                }
            }
        }
        @if !missing.is_empty() {
            ul class="notes" {
                @for (n, why) in &missing { li { code { (n) } ": " (why[0].reason) } }
            }
        }
    }
}

/// The ratio, top-down and bandwidth figures; empty markup when no cell was counted.
pub fn figures(r: &RunResults) -> Markup {
    let gs = groups(r);
    if gs.is_empty() {
        return html! {};
    }
    // A cell without a PMU has its one line already (the section's notes say there
    // are no hardware counters), so its ratios need no second excuse.
    let no_pmu = r
        .cells
        .iter()
        .filter_map(|c| c.counters.as_ref())
        .all(|k| k.hardware_unavailable.is_some());
    let omitted = crate::first_seen(gs.iter().flat_map(|g| &g.placements).flat_map(|(_, x)| {
        let ratio_lines = if no_pmu { &[][..] } else { &x.omitted[..] };
        ratio_lines
            .iter()
            .chain(&x.topdown_unavailable)
            .chain(&x.dram_unavailable)
    }));
    html! {
        h3 { "What the counters say: ratios per placement and their SMT change" }
        p {
            "Each ratio from the counts of its cell (scaled by enabled/running where the kernel \
             multiplexed), a bar per placement; the SMT change is the SMT placement's value over \
             its partner's (1c2t/1c1t, 2c2t/2c1t, all/cores), minus one."
        }
        @if !omitted.is_empty() {
            ul class="notes" { @for l in &omitted { li { (l) } } }
        }
        @for g in &gs {
            h4 { (g.benchmark) " " code { (params(&g.params)) } }
            (ratio_figures(g))
            (topdown_figure(g))
            (dram_figure(r, g))
        }
        (named_table(r))
    }
}
