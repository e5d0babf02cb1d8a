//! The fleet view written out: terminal text fitted to a width, `smtlab.fleet/1` JSON,
//! and a self-contained HTML page (a strip of every host's value per pool).

use std::collections::BTreeMap;

use maud::{Markup, PreEscaped, html as maud_html};
use smtlab_model::unit::plural;

use super::{Fleet, Model, Pool};
use crate::fmt::{ratio_ci, times, utc};
use crate::table::{Layout, Table, wrap};

/// `1.250x [1.210, 1.290]`, or the median alone below six hosts.
fn median_text(p: &Pool) -> String {
    ratio_ci(p.median, p.ci_low, p.ci_high)
}

/// `microcode 0x2b (6), 0x2a (1); kernel 6.12 (7)`: each fingerprint field's values
/// over the model's hosts with how many hosts have each.
fn fingerprint_summary(f: &Fleet, m: &Model) -> String {
    let mut fields: Vec<(&str, BTreeMap<String, usize>)> = vec![
        ("microcode", BTreeMap::new()),
        ("kernel", BTreeMap::new()),
        ("SMT", BTreeMap::new()),
        ("topology", BTreeMap::new()),
    ];
    for h in f.hosts.iter().filter(|h| m.hosts.contains(&h.host)) {
        for (i, (_, v)) in h.fingerprint.fields().into_iter().enumerate() {
            *fields[i].1.entry(v).or_insert(0) += 1;
        }
    }
    fields
        .iter()
        .map(|(name, vals)| {
            let mut vals: Vec<(&String, &usize)> = vals.iter().collect();
            vals.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let list: Vec<String> = vals.iter().map(|(v, n)| format!("{v} ({n})")).collect();
            format!("{name} {}", list.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The fleet view for the terminal, fitted to `width` columns: per CPU model its
/// hosts' fingerprints, one row per workload and yield (hosts, median with interval,
/// range) with its outlier hosts under it, and the advice counted over hosts.
pub fn text(f: &Fleet, width: usize) -> String {
    let layout = Layout::fixed(width);
    let mut out = String::new();
    out.push_str(&wrap(
        &format!(
            "fleet: {}, {}, {}",
            plural(f.hosts.len(), "host"),
            plural(f.runs, "run"),
            plural(f.models.len(), "CPU model")
        ),
        layout,
    ));
    if let Some(line) = never_reported_line(f) {
        out.push_str(&wrap(&line, layout));
    }
    if f.models.is_empty() {
        out.push_str("no runs in this store\n");
    }
    for m in &f.models {
        out.push('\n');
        out.push_str(&wrap(
            &format!("{} ({})", m.cpu_model, plural(m.hosts.len(), "host")),
            layout,
        ));
        out.push_str(&wrap(&format!("  {}", fingerprint_summary(f, m)), layout));
        if m.pools.is_empty() {
            out.push_str(&wrap("  no SMT yield measured on this model", layout));
        } else {
            let mut t = Table::new(["workload", "yield", "hosts", "median [95% CI]", "range"])
                .shrink(0)
                .right(&[2]);
            for p in &m.pools {
                let range = format!("{}-{}", times(p.min), times(p.max));
                let row = [
                    p.workload.clone(),
                    p.placements.clone(),
                    p.hosts.len().to_string(),
                    median_text(p),
                    range,
                ];
                let outliers: Vec<String> = p
                    .outliers()
                    .map(|h| {
                        let mut s = format!("outlier {} {}x", h.host, times(h.value));
                        if !h.differs.is_empty() {
                            s.push_str(&format!(": {}", h.differs.join(", ")));
                        }
                        s
                    })
                    .collect();
                t.row_with_detail(row, outliers.join("\n"));
            }
            out.push_str(&t.indented(width));
        }
        out.push_str(&profiles_text(m, width));
        for a in &m.advice {
            let mut counts: Vec<(&String, &usize)> = a.counts.iter().collect();
            counts.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
            let c: Vec<String> = counts.iter().map(|(w, n)| format!("{w}: {n}")).collect();
            out.push_str(&wrap(
                &format!("  advice over hosts, {}: {}", a.workload, c.join(", ")),
                layout,
            ));
        }
    }
    if !f.notes.is_empty() {
        out.push('\n');
        for n in &f.notes {
            out.push_str(&wrap(&format!("note: {n}"), layout));
        }
    }
    out.push('\n');
    out.push_str(&wrap(
        &format!(
            "Yields above 1 are better with SMT. {}. {}.",
            capital(&f.interval_rule),
            capital(&f.outlier_rule)
        ),
        layout,
    ));
    out
}

/// The model's pooled `predict` profiles: a row per workload, form, ruler and figure
/// (hosts, median with interval, range); empty without any.
fn profiles_text(m: &Model, width: usize) -> String {
    if m.profiles.is_empty() {
        return String::new();
    }
    let mut t = Table::new([
        "profile",
        "form",
        "ruler",
        "figure",
        "hosts",
        "median [95% CI]",
        "range",
    ])
    .shrink(0)
    .right(&[4]);
    for p in &m.profiles {
        t.row([
            p.workload.clone(),
            p.form.name().into(),
            p.ruler.clone(),
            p.figure.into(),
            p.spread.hosts.len().to_string(),
            ratio_ci(p.spread.median, p.spread.ci_low, p.spread.ci_high),
            format!("{}-{}", times(p.spread.min), times(p.spread.max)),
        ]);
    }
    format!(
        "  predict profiles over hosts (slowdowns, above 1: slower):\n{}",
        t.indented(width)
    )
}

/// Hosts named in a line before "and N more".
const MISSING_SHOWN: usize = 20;

/// `expected 12 hosts, 10 reported; never reported (2): web3, web9`; `None` when no
/// host was expected.
fn never_reported_line(f: &Fleet) -> Option<String> {
    let expected = f.expected?;
    let mut line = format!(
        "expected {}, {} reported",
        plural(expected, "host"),
        f.hosts.len()
    );
    let n = f.never_reported();
    if n == 0 {
        line.push_str("; every expected host reported");
        return Some(line);
    }
    line.push_str(&format!("; never reported ({n})"));
    if !f.missing.is_empty() {
        let shown = &f.missing[..f.missing.len().min(MISSING_SHOWN)];
        line.push_str(&format!(": {}", shown.join(", ")));
        let more = f.missing.len().saturating_sub(MISSING_SHOWN);
        if more > 0 {
            line.push_str(&format!(" and {more} more"));
        }
    }
    Some(line)
}

/// Charts of one kind shown on the page before "and N more".
const CHARTS_SHOWN: usize = 24;

/// Every workload's scaling curves over the fleet's hosts, and each yield held by two
/// CPU models or more as cumulative curves over their hosts.
fn overlays(f: &Fleet) -> Markup {
    let scaling: Vec<String> = f
        .curves
        .iter()
        .filter_map(|c| super::overlay::scaling_svg(c, "host"))
        .collect();
    // (workload, yield) -> each model's hosts' values.
    type PerModel = Vec<(String, Vec<f64>)>;
    let mut by_pool: BTreeMap<(String, String), PerModel> = BTreeMap::new();
    for m in &f.models {
        for p in &m.pools {
            by_pool
                .entry((p.workload.clone(), p.placements.clone()))
                .or_default()
                .push((
                    m.cpu_model.clone(),
                    p.hosts.iter().map(|h| h.value).collect(),
                ));
        }
    }
    let cdfs: Vec<String> = by_pool
        .iter()
        .filter_map(|((w, k), per)| super::overlay::yield_cdf_svg(w, k, per))
        .collect();
    let events: Vec<String> = f
        .distributions
        .iter()
        .filter_map(|d| super::overlay::distribution_svg(d, "host"))
        .collect();
    maud_html! {
        (charts_section("Scaling across hosts", Some("Throughput against threads, the hosts on one chart (each host's latest run)."), &scaling, "curves"))
        (charts_section("Events across hosts", Some("Each host's per-event times (thread creation, wake-ups, requests) as one cumulative distribution, the hosts on one chart."), &events, "distributions"))
        (charts_section("Yields across CPU models", None, &cdfs, "models[].pools"))
    }
}

/// A section of charts under `title` (with `intro`), the first [`CHARTS_SHOWN`] drawn
/// and the rest named as in the JSON's `key`; nothing without a chart.
fn charts_section(title: &str, intro: Option<&str>, svgs: &[String], key: &str) -> Markup {
    let more = svgs.len().saturating_sub(CHARTS_SHOWN);
    maud_html! {
        @if !svgs.is_empty() {
            section {
                h2 { (title) }
                @if let Some(intro) = intro { p class="muted" { (intro) } }
                @for svg in svgs.iter().take(CHARTS_SHOWN) { figure { (PreEscaped(svg)) } }
                @if more > 0 { p class="muted" { (more) " more in the JSON (" code { (key) } ")." } }
            }
        }
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The fleet view as `smtlab.fleet/1` JSON (pretty, one trailing newline).
pub fn json(f: &Fleet) -> String {
    let mut s = serde_json::to_string_pretty(f).unwrap_or_else(|e| {
        // Serialising plain data with string keys cannot fail; say so if it ever does.
        format!(
            "{{\"schema\":\"{}\",\"error\":\"{e}\"}}",
            super::FLEET_SCHEMA
        )
    });
    s.push('\n');
    s
}

const CSS: &str = "\
body{font:14px/1.45 system-ui,sans-serif;color:#1b1b1b;margin:0 auto;max-width:1200px;\
padding:0 24px 48px}\
h1{font-size:24px;margin:24px 0 2px}\
h2{font-size:19px;border-bottom:2px solid #0072b2;padding-bottom:4px;margin:36px 0 10px}\
table{border-collapse:collapse;margin:8px 0 16px}\
th,td{border:1px solid #d5d5d5;padding:3px 8px;text-align:left;vertical-align:middle}\
th{background:#eef2f7;font-weight:600}\
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
td.bad,p.bad{color:#b03000}\
figure{margin:8px 0 16px}figure svg{max-width:100%;height:auto}\
.muted{color:#666}";

/// A strip chart of a pool: one dot per host on the value axis (outliers in red), the
/// median as a bar and its interval shaded. `lo..hi` is the axis shared by the pools of
/// one model, so their strips line up.
fn strip(p: &Pool, lo: f64, hi: f64) -> Markup {
    const W: f64 = 320.0;
    const H: f64 = 22.0;
    let x = |v: f64| {
        if hi > lo {
            4.0 + (v - lo) / (hi - lo) * (W - 8.0)
        } else {
            W / 2.0
        }
    };
    let one = x(1.0);
    maud_html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(W) height=(H) role="img" {
            title { (format!("{} {}: median {}", p.workload, p.placements, median_text(p))) }
            @if let (Some(l), Some(h)) = (p.ci_low, p.ci_high) {
                rect x=(format!("{:.1}", x(l))) y="3" width=(format!("{:.1}", (x(h) - x(l)).max(1.0)))
                    height="16" fill="#cfe3f3" {}
            }
            @if (lo..=hi).contains(&1.0) {
                line x1=(format!("{one:.1}")) x2=(format!("{one:.1}")) y1="0" y2=(H)
                    stroke="#999" stroke-dasharray="2,2" {}
            }
            line x1=(format!("{:.1}", x(p.median))) x2=(format!("{:.1}", x(p.median)))
                y1="2" y2="20" stroke="#0072b2" stroke-width="2" {}
            @for h in &p.hosts {
                circle cx=(format!("{:.1}", x(h.value))) cy="11" r="3.5"
                    fill=(if h.outlier { "#d55e00" } else { "#333" }) fill-opacity="0.7" {
                    title { (format!("{} {}x (run {})", h.host, times(h.value), h.run)) }
                }
            }
        }
    }
}

/// The fleet view as one self-contained HTML page (inline CSS and SVG, no scripts).
pub fn html(f: &Fleet, generated_unix_s: u64) -> String {
    let body = maud_html! {
        header {
            h1 { "smtlab fleet" }
            p class="muted" {
                (plural(f.hosts.len(), "host")) ", " (plural(f.runs, "run")) ", "
                (plural(f.models.len(), "CPU model")) "; generated " (utc(generated_unix_s))
                " (" code { (f.schema) } ")"
            }
            @if let Some(line) = never_reported_line(f) {
                p class=(if f.never_reported() > 0 { "bad" } else { "muted" }) { (line) }
            }
        }
        @for m in &f.models {
            section {
                h2 { (m.cpu_model) " (" (plural(m.hosts.len(), "host")) ")" }
                table {
                    tr { th { "host" } th { "microcode" } th { "kernel" } th { "SMT" } th { "topology" } th { "runs" } }
                    @for h in f.hosts.iter().filter(|h| m.hosts.contains(&h.host)) {
                        tr {
                            td { (h.host) }
                            @for (_, v) in h.fingerprint.fields() { td { (v) } }
                            td class="num" { (h.runs.len()) }
                        }
                    }
                }
                @if m.pools.is_empty() {
                    p { "No SMT yield measured on this model." }
                } @else {
                    @let lo = m.pools.iter().map(|p| p.min.min(p.ci_low.unwrap_or(p.min))).fold(f64::INFINITY, f64::min).min(1.0);
                    @let hi = m.pools.iter().map(|p| p.max.max(p.ci_high.unwrap_or(p.max))).fold(f64::NEG_INFINITY, f64::max).max(1.0);
                    table {
                        tr {
                            th { "workload" } th { "yield" } th { "hosts" } th { "median [95% CI]" }
                            th { "range" } th { (format!("hosts ({}x to {}x; dashed: 1)", times(lo), times(hi))) }
                            th { "outliers" }
                        }
                        @for p in &m.pools {
                            tr {
                                td { (p.workload) } td { code { (p.placements) } }
                                td class="num" { (p.hosts.len()) }
                                td class="num" { (median_text(p)) }
                                td class="num" { (times(p.min)) "-" (times(p.max)) }
                                td { (strip(p, lo, hi)) }
                                td class="bad" {
                                    @for h in p.outliers() {
                                        (h.host) " " (times(h.value)) "x"
                                        @if !h.differs.is_empty() { " (" (h.differs.join(", ")) ")" }
                                        (PreEscaped("<br/>"))
                                    }
                                }
                            }
                        }
                    }
                }
                @if !m.advice.is_empty() {
                    table {
                        tr { th { "workload" } th { "advice over hosts" } }
                        @for a in &m.advice {
                            tr {
                                td { (a.workload) }
                                td { (a.counts.iter().map(|(w, n)| format!("{w}: {n}")).collect::<Vec<_>>().join(", ")) }
                            }
                        }
                    }
                }
            }
        }
        (overlays(f))
        @if !f.notes.is_empty() {
            ul { @for n in &f.notes { li { (n) } } }
        }
        footer class="muted" {
            p { "Yields above 1 are better with SMT. " (capital(&f.interval_rule)) ". "
                (capital(&f.outlier_rule)) "." }
        }
    };
    crate::html::page("smtlab fleet", CSS, body)
}
