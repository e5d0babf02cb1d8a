//! Two runs compared, for people: a self-contained HTML page ([`compare_html`]) and a
//! Markdown table to paste into an issue or a review ([`compare_markdown`]).
//!
//! Both take the figures of [`compare()`](crate::compare::compare) (cells matched by
//! benchmark, parameters and placement; speed-up of B over A, above 1 = B better) and
//! show the 95% interval of each speed-up: the one speed-up of [`stats::speedup`], a
//! ratio of means taken the way round that makes above 1 better, with Fieller's interval.
//!
//! The page: the two environments side by side with the differing facts marked
//! (kernel, SMT state, CPU model, machine), the geometric mean of the speed-ups per
//! group, a bar per benchmark on a log scale centred on 1 with its interval, the table
//! of values, and the cells measured in only one run.

use std::collections::BTreeMap;
use std::fmt::Write;

use smtlab_model::stats::Significance;
use smtlab_model::{RunMeta, RunResults};

use maud::{Markup, PreEscaped, html};

use crate::compare::{CompareRow, Comparison, GroupMean};
use crate::compare_up::UpKernelRow;
use crate::environment::{Fact, Role, facts};
use crate::fmt::{Esc, params, pct, shorten, times};
use crate::html_parts::BR;
use crate::svg::f1;
use crate::units::Column;

/// A row's deciding speed-up interval (with the between-run variance where it was
/// added, else [`stats::speedup`]'s), `None` with fewer than two samples on either side
/// or an unbounded interval.
pub fn speedup_interval(row: &CompareRow) -> Option<(f64, f64)> {
    let q = row.deciding_interval()?;
    Some((q.ci95_low?, q.ci95_high?))
}

/// One format per benchmark over all its A and B values, so that the rows of a benchmark
/// keep one unit and one number of decimals down the A and B columns (a column shared by
/// 8 ns mutexes and 15 us hand-offs would otherwise show one of them badly).
fn unit_columns(c: &Comparison) -> BTreeMap<(String, String), Column> {
    let mut vals: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for r in &c.rows {
        vals.entry((r.benchmark.clone(), r.unit.clone()))
            .or_default()
            .extend([r.a, r.b]);
    }
    vals.into_iter()
        .map(|(k, v)| {
            let col = Column::for_values(&k.1, &v);
            (k, col)
        })
        .collect()
}

/// Whether the environment fact differs between the runs, as A's and B's
/// ([`crate::environment::Role`]): a setup fact where `compare` lists it (the handoff
/// only changed by its factor), another by its text, the start time never.
fn differs(a: &Fact, b: &Fact, c: &Comparison) -> bool {
    match a.role {
        Role::Setup | Role::Sharing => c.env_diffs.iter().any(|d| d.field == a.key),
        Role::Shown => a.value != b.value,
        Role::Info => false,
    }
}

/// The environment facts of both runs side by side: label, A's, B's, and whether they
/// differ.
fn environments(
    a: &RunMeta,
    b: &RunMeta,
    c: &Comparison,
) -> Vec<(&'static str, String, String, bool)> {
    let text = |f: &Fact| f.value.clone().unwrap_or_else(|| "unknown".into());
    facts(a)
        .iter()
        .zip(&facts(b))
        .map(|(x, y)| (x.label, text(x), text(y), differs(x, y, c)))
        .collect()
}

/// `benchmark size=4KiB @ 1c1t`: the parameters that tell this benchmark's rows apart,
/// not those they all share (kept short for the bar chart; the table has them all).
fn row_label(r: &CompareRow, all: &[CompareRow]) -> String {
    let same: Vec<&CompareRow> = all.iter().filter(|x| x.benchmark == r.benchmark).collect();
    let varying: BTreeMap<String, String> = r
        .params
        .iter()
        .filter(|(k, v)| same.iter().any(|x| x.params.get(*k) != Some(*v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut s = crate::advice::workload_name(&r.benchmark, &varying);
    let _ = write!(s, " @ {}", r.placement);
    s
}

/// The row's corrected verdict as a colour class: better or worse only where
/// [`compare()`] calls B faster or slower (interval and the correction for the number
/// of rows agree).
fn verdict(r: &CompareRow) -> &'static str {
    match r.significance {
        Some(Significance::Faster) => "better",
        Some(Significance::Slower) => "worse",
        _ => "same",
    }
}

/// The words of a row's `significant` column.
fn significant_words(r: &CompareRow) -> String {
    match (r.significance, &r.unsteady) {
        (_, Some(why)) => format!("unsteady ({why})"),
        (Some(Significance::Faster | Significance::Slower), _) => "yes".into(),
        (Some(Significance::NotSignificant), _)
            if r.interval
                .is_some_and(|q| q.significance().significant() == Some(true)) =>
        {
            "no (after correction)".into()
        }
        (Some(Significance::NotSignificant), _) => "no".into(),
        _ => "- (n < 2)".into(),
    }
}

/// A geometric mean with its interval: `1.004x [0.981, 1.028]`.
fn geomean_text(g: &GroupMean) -> String {
    match (g.speedup, g.ci95_low, g.ci95_high) {
        (Some(s), Some(lo), Some(hi)) => {
            format!("{}x ({}) [{}, {}]", times(s), pct(s), times(lo), times(hi))
        }
        (Some(s), _, _) => format!("{}x ({})", times(s), pct(s)),
        _ => "-".into(),
    }
}

/// A line of the bar chart and table: a group heading (no row) or a row with its interval.
type Line<'a> = (String, Option<&'a CompareRow>, Option<(f64, f64)>);

/// The bar chart's geometry: a label column, the plot, one row per line.
const LABEL_W: f64 = 300.0;
const PLOT_W: f64 = 440.0;
const ROW_H: f64 = 20.0;
const TOP: f64 = 48.0;

/// Where the bars' values go across the plot: `m` is the log of the widest ratio shown.
struct Scale {
    m: f64,
    /// The chart's height.
    h: f64,
}

impl Scale {
    fn x(&self, v: f64) -> f64 {
        LABEL_W + (v.ln() + self.m) / (2.0 * self.m) * PLOT_W
    }
}

/// Horizontal bars on a log scale centred on 1: one per row, the interval as a whisker,
/// group headings between. `None` without a row that has a speed-up.
fn bars(rows: &[Line<'_>]) -> Option<String> {
    let vals: Vec<f64> = rows
        .iter()
        .filter_map(|(_, r, ci)| r.and_then(|r| r.speedup).map(|s| (s, ci)))
        .flat_map(|(s, ci)| [Some(s), ci.map(|c| c.0), ci.map(|c| c.1)])
        .flatten()
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    if vals.is_empty() {
        return None;
    }
    // Symmetric in log: 0.5x sits as far left as 2x right. The range follows the
    // speed-ups, not the whiskers (one noisy cell would squash every bar), within
    // 1.1x..8x; whiskers beyond it are cut at the edge.
    let speedups: Vec<f64> = rows
        .iter()
        .filter_map(|(_, r, _)| r.and_then(|r| r.speedup))
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    let m = (speedups.iter().map(|v| v.ln().abs()).fold(0.0f64, f64::max) * 1.15)
        .clamp(1.1f64.ln(), 8f64.ln());
    let w = LABEL_W + PLOT_W + 90.0;
    let h = TOP + rows.len() as f64 * ROW_H + 30.0;
    let scale = Scale { m, h };
    let svg = html! {
        svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {w} {h}")) width=(w)
            height=(h) role="img" aria-label="speed-up of B over A per benchmark"
            font-family="sans-serif" font-size="11" {
            rect x="0" y="0" width=(w) height=(h) fill="#ffffff" {}
            text x=(LABEL_W) y="14" font-size="13" font-weight="bold" {
                "Speed-up of B over A (log scale; right of 1 = B better)"
            }
            (ticks(&scale))
            @for (i, (label, row, ci)) in rows.iter().enumerate() {
                @let y = TOP + i as f64 * ROW_H;
                @match row {
                    None => {
                        text x="4" y=(y + 14.0) font-weight="bold" { (Esc(label)) }
                    }
                    Some(r) => { (bar(&scale, y, label, r, *ci)) }
                }
            }
        }
    };
    Some(svg.into_string())
}

/// Ticks at round ratios inside the range; 1 first, and a label only where it does not
/// touch one already placed (0.9, 1 and 1.1 crowd on a wide range).
fn ticks(scale: &Scale) -> Markup {
    let (top, h, m) = (TOP, scale.h, scale.m);
    let mut placed: Vec<f64> = Vec::new();
    let mut drawn = Vec::new();
    for t in [1.0f64, 0.125, 0.25, 0.5, 0.8, 0.9, 1.1, 1.25, 2.0, 4.0, 8.0] {
        if t.ln().abs() > m {
            continue;
        }
        let tx = crate::svg::r1(scale.x(t));
        let labelled = !placed.iter().any(|p| (p - tx).abs() < 34.0);
        if labelled {
            placed.push(tx);
        }
        let (stroke, dash) = if t == 1.0 {
            ("#333333", None)
        } else {
            ("#c8c8c8", Some("2 2"))
        };
        drawn.push(html! {
            path d=(format!("M{tx} {top}V{}", h - 24.0)) stroke=(stroke) stroke-dasharray=[dash] {}
            @if labelled {
                @for ty in [top - 6.0, h - 10.0] {
                    text x=(tx) y=(ty) text-anchor="middle" fill="#555555" { (t) "x" }
                }
            }
        });
    }
    html! { @for d in &drawn { (d) } }
}

/// One row's label, bar (with an arrow where it passes the range), whisker and figure,
/// at height `y`.
fn bar(scale: &Scale, y: f64, label: &str, r: &CompareRow, ci: Option<(f64, f64)>) -> Markup {
    let m = scale.m;
    let x = |v: f64| scale.x(v);
    let one = x(1.0);
    let name = html! {
        text x=(LABEL_W - 8.0) y=(y + 14.0) text-anchor="end" fill="#222222" {
            (Esc(&shorten(label, 46)))
        }
    };
    let Some(v) = r.speedup else {
        return html! {
            (name)
            text x=(one) y=(y + 14.0) fill="#777777" { "no speed-up (a value is not positive)" }
        };
    };
    let col = match verdict(r) {
        "better" => "#009e73",
        "worse" => "#d55e00",
        _ => "#8c8c8c",
    };
    // A bar beyond the range (past 8x) stops at the plot's edge with an arrow, so it
    // never runs into the labels; its figure is written beside it as for every bar.
    let vc = v.clamp((-m).exp(), m.exp());
    let (x0, x1) = (one.min(x(vc)), one.max(x(vc)));
    let arrow = (vc != v).then(|| {
        let (edge, tip_x) = if v > vc {
            (x1, x1 + 6.0)
        } else {
            (x0, x0 - 6.0)
        };
        format!(
            "M{edge:.1} {}L{tip_x:.1} {}L{edge:.1} {}Z",
            y + 3.0,
            y + 10.0,
            y + 17.0
        )
    });
    let tip = format!(
        "{label}: {} ({}){}",
        times(v),
        pct(v),
        ci.map(|(lo, hi)| format!(", 95% interval [{}, {}]", times(lo), times(hi)))
            .unwrap_or_default()
    );
    let whisker = ci.map(|(lo, hi)| {
        let (a, b) = (x(lo.max((-m).exp())), x(hi.min(m.exp())));
        format!(
            "M{a:.1} {}H{b:.1}M{a:.1} {}v8M{b:.1} {}v8",
            y + 10.0,
            y + 6.0,
            y + 6.0
        )
    });
    html! {
        (name)
        @if let Some(d) = arrow { path d=(d) fill=(col) {} }
        rect x=(f1(x0)) y=(y + 4.0) width=(f1((x1 - x0).max(1.0))) height="12" fill=(col)
            fill-opacity="0.75" {
            title { (Esc(&tip)) }
        }
        @if let Some(d) = whisker { path d=(d) stroke="#222222" fill="none" {} }
        text x=(LABEL_W + PLOT_W + 6.0) y=(y + 14.0) fill="#222222" { (Esc(&pct(v))) }
    }
}

fn geomean_cells(g: &GroupMean) -> (String, String) {
    let col = g
        .unit
        .as_deref()
        .map(|u| Column::for_values(u, &[g.a.unwrap_or(f64::NAN), g.b.unwrap_or(f64::NAN)]));
    match (col, g.a, g.b) {
        (Some(c), Some(a), Some(b)) => (c.with_unit(a), c.with_unit(b)),
        _ => ("-".into(), "-".into()),
    }
}

const CSS: &str = "\
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1b1b1b;\
margin:0 auto;max-width:1320px;padding:0 24px 48px;background:#fff}\
h1{font-size:24px;margin:24px 0 2px}\
h2{font-size:19px;border-bottom:2px solid #0072b2;padding-bottom:4px;margin:36px 0 10px}\
p{margin:6px 0;max-width:980px}\
.scroll{overflow-x:auto;max-width:100%;margin:8px 0 16px}\
table{border-collapse:collapse;margin:0}\
th,td{border:1px solid #d5d5d5;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#eef2f7;font-weight:600}\
td{white-space:nowrap}\
#environments td{white-space:normal;overflow-wrap:anywhere}\
td.num{text-align:right;font-variant-numeric:tabular-nums}\
tr.diff td{background:#fff3d6}\
tr.group td{background:#f6f6f6;font-weight:600}\
td.better{color:#00704f}td.worse{color:#b03000}\
.muted{color:#666}.sub{color:#666;font-size:12px}\
svg{max-width:100%;height:auto}\
code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12.5px}\
details{margin:6px 0}summary{cursor:pointer}\
footer{margin-top:40px;color:#777;font-size:12px;max-width:980px}\
@media (max-width:760px){body{padding:0 10px 32px}h1{font-size:20px}}\
@media print{body{max-width:none;padding:0;font-size:11px}.scroll{overflow:visible}\
details::details-content{content-visibility:visible;display:contents}\
svg,tr{break-inside:avoid}h2{break-after:avoid}}";

/// The comparison page of `c`, the comparison of `a` and `b` (see the module
/// documentation).
pub fn compare_html(a: &RunResults, b: &RunResults, c: &Comparison) -> String {
    let mut sections = String::with_capacity(32 * 1024);
    compare_sections(&mut sections, a, b, c);
    // Every word with a meaning of its own that the page uses, defined once at its end;
    // the footer always links `unsteady`.
    let used = format!("{sections} {}", crate::glossary::Term::Unsteady.word());
    if let Some(words) = crate::glossary::section(&used) {
        sections.push_str(&words.into_string());
    }
    crate::html::page(
        &format!("smtlab compare: {} vs {}", c.a.label, c.b.label),
        CSS,
        html! {
                header {
                    h1 { "smtlab compare" }
                    p { b { "A" } ": " (c.a.label) (BR) b { "B" } ": " (c.b.label) }
                }
                (PreEscaped(crate::html::wrap_tables(&sections)))
                footer {
                    "Generated by smtlab-report " (env!("CARGO_PKG_VERSION")) ". Speed-up of \
                     B over A: mean B/A for higher-is-better benchmarks, mean A/B for \
                     lower-is-better ones, so above 1 is always B better; intervals are the \
                     95% interval of that ratio with the between-run variance added (the \
                     estimate named under Geometric means), and a difference is called \
                     significant only when the interval excludes 1 and the correction for the \
                     number of rows (Benjamini-Hochberg, 5% false discoveries) keeps it. "
                    (crate::glossary::link(crate::glossary::Term::Unsteady))
                    " cells are called neither and are left out of the geometric means, whose 95% \
                     interval is Student's t on the logarithms of the ratios with a whole \
                     run's between-run shift added. A value that was not measured in both \
                     runs is listed as missing."
                }
        },
    )
}

/// The page's sections, without the page frame (what the snapshot tests look at).
pub fn compare_sections(p: &mut String, a: &RunResults, b: &RunResults, c: &Comparison) {
    // Environments side by side.
    let envs = html! {
        section id="environments" {
            h2 { "The two environments" }
            p { "Rows that differ are marked: they are the first suspects for any difference below." }
            table {
                tr { th {} th { "A" } th { "B" } }
                @for (k, va, vb, diff) in environments(&a.run, &b.run, c) {
                    tr class=[diff.then_some("diff")] { th { (k) } td { (va) } td { (vb) } }
                }
            }
            @if c.cpus_moved {
                p { "Note: " (crate::compare::CPUS_MOVED_NOTE) "." }
            }
        }
    };
    p.push_str(&envs.into_string());
    if c.rows.is_empty() {
        let none = html! {
            section id="speedups" {
                h2 { "Speed-ups" }
                p { "No cell was measured in both runs: nothing to compare." }
            }
        };
        p.push_str(&none.into_string());
        p.push_str(&up_kernel(c).into_string());
        p.push_str(&missing(c).into_string());
        return;
    }
    // Bars and the table.
    let mut lines: Vec<Line<'_>> = Vec::new();
    for g in &c.groups {
        lines.push((g.group.clone(), None, None));
        for r in c.rows.iter().filter(|r| r.group == g.group) {
            lines.push((row_label(r, &c.rows), Some(r), speedup_interval(r)));
        }
    }
    let cols = unit_columns(c);
    let body = html! {
        // Geometric means per group.
        section id="geomeans" {
            h2 { "Geometric means" }
            p { b { "Overall: " (c.overall.headline()) } }
            @if let Some(l) = crate::compare::scatter_line(c) { p { (l) } }
            p id="between-runs" { (c.between_runs.line()) }
            p {
                "The geometric mean of the speed-ups of the steady rows of each group and of \
                 all rows, with a 95% interval (Student's t on the logarithms of the ratios): "
                b { "no difference" } " when it includes 1. Rows whose cell in A or B is \
                 unsteady are left out. The A and B columns are filled where a group's rows \
                 share one unit."
            }
            table {
                tr {
                    th { "group" } th { "rows" } th { "unsteady (left out)" } th { "A" }
                    th { "B" } th { "speed-up [95% interval]" } th { "verdict" }
                }
                @for g in c.groups.iter().chain([&c.overall]) {
                    (geomean_row(g))
                }
            }
        }
        section id="speedups" {
            h2 { "Speed-up per benchmark" }
            p {
                "One bar per cell measured in both runs, on a log scale so that 2x faster and \
                 2x slower are equally long; the whisker is the 95% interval with the \
                 between-run variance added. Green: B better \
                 beyond the interval and after the correction for the number of rows \
                 (Benjamini-Hochberg); red: B worse; grey: no significant difference, or an \
                 unsteady cell."
            }
            @if let Some(svg) = bars(&lines) { (PreEscaped(svg)) }
            table {
                tr {
                    th { "benchmark" } th { "params" } th { "placement" }
                    th { "statistic (better)" } th { "A" } th { "B" } th { "speed-up" }
                    th { "95% interval" } th { "significant" }
                }
                @for (label, row, ci) in &lines {
                    @match row {
                        None => tr class="group" { td colspan="9" { (label) } },
                        Some(r) => (speedup_row(r, *ci, &cols[&(r.benchmark.clone(), r.unit.clone())])),
                    }
                }
            }
        }
    };
    p.push_str(&body.into_string());
    p.push_str(&overlays(a, b).into_string());
    p.push_str(&up_kernel(c).into_string());
    p.push_str(&missing(c).into_string());
}

/// Paper 000's 2T vs 1T-UP ([`crate::compare_up`]): each workload's `1t-up-kernel` cell
/// and the SMP kernel's placements beside it, as the text gives them.
fn up_kernel(c: &Comparison) -> Markup {
    use smtlab_model::placement::UP_KERNEL_NAME;
    if c.up_kernel.is_empty() {
        return html! {};
    }
    html! {
        section id="up-kernel" {
            h2 { "2T vs 1T-UP (paper 000)" }
            p {
                "The SMP kernel's placements over the uniprocessor kernel's " code { (UP_KERNEL_NAME) }
                " cell of the same workload: the ratio of the means, above 1 better than "
                code { (UP_KERNEL_NAME) } ", with its 95% interval within the two runs (not what \
                 runs of one setup differ by)."
            }
            div class="scroll" {
                table {
                    tr {
                        th { "benchmark" } th { "params" } th { "unit" } th { "placement" }
                        th { "mean" } th { "over " (UP_KERNEL_NAME) }
                    }
                    @for [bench, params, unit, placement, mean, over] in c.up_kernel.iter().flat_map(UpKernelRow::lines) {
                        // Each workload's first line (its benchmark named) is its `1t-up-kernel` cell.
                        tr class=[(!bench.is_empty()).then_some("group")] {
                            td { (bench) } td { @if !bench.is_empty() { code { (params) } } } td { (unit) }
                            td { (placement) } td class="num" { (mean) }
                            @if over.is_empty() { td {} } @else { td class="num" { (over) } }
                        }
                    }
                }
            }
        }
    }
}

/// A's and B's scaling curves on one chart per workload and placement (as `fleet`
/// draws hosts), where both measured it at two thread counts or more.
fn overlays(a: &RunResults, b: &RunResults) -> Markup {
    let name = |side: &str, r: &RunResults| match r.run.environment.hostname.as_deref() {
        Some(h) if !h.is_empty() => format!("{side} ({h})"),
        _ => side.to_string(),
    };
    let (na, nb) = (name("A", a), name("B", b));
    let o = crate::fleet::overlays(&[(na, a), (nb, b)]);
    let svgs: Vec<String> = o
        .curves
        .iter()
        .filter_map(|c| crate::fleet::curve_svg(c, "run"))
        .collect();
    let cdfs: Vec<String> = o
        .distributions
        .iter()
        .filter_map(|d| crate::fleet::distribution_svg(d, "run"))
        .collect();
    html! {
        @if !svgs.is_empty() || !cdfs.is_empty() {
            section id="overlays" {
                h2 { "A and B on one chart" }
                @if !svgs.is_empty() {
                    p { "Throughput against threads, A's and B's lines together (paper 002 compares machines so)." }
                    @for s in &svgs { figure { (PreEscaped(s)) } }
                }
                @if !cdfs.is_empty() {
                    p { "The events of a cell measured in both runs (thread creation, wake-ups, requests), A's and B's distributions together." }
                    @for s in cdfs.iter().take(MAX_EVENT_CHARTS) { figure { (PreEscaped(s)) } }
                    @if cdfs.len() > MAX_EVENT_CHARTS {
                        p { (cdfs.len() - MAX_EVENT_CHARTS) " more cells with events are not drawn." }
                    }
                }
            }
        }
    }
}

/// Event distributions drawn at most (a quick suite has dozens of cells with events).
const MAX_EVENT_CHARTS: usize = 24;

/// One group's geometric mean, its interval and its verdict.
fn geomean_row(g: &GroupMean) -> Markup {
    let (ga, gb) = geomean_cells(g);
    let (class, words) = match g.significance {
        Some(Significance::Faster) => (Some("better"), "B faster"),
        Some(Significance::Slower) => (Some("worse"), "B slower"),
        Some(Significance::NotSignificant) => (None, "no difference"),
        _ => (None, "no interval"),
    };
    html! {
        tr {
            td { (g.group) }
            td class="num" { (g.rows) }
            td class="num" { (g.unsteady) }
            td class="num" { (ga) }
            td class="num" { (gb) }
            td class="num" { (geomean_text(g)) }
            td class=[class] { (words) }
        }
    }
}

/// One row of the speed-up table.
fn speedup_row(r: &CompareRow, ci: Option<(f64, f64)>, col: &Column) -> Markup {
    let v = verdict(r);
    html! {
        tr {
            td { (r.benchmark) }
            td { code { (params(&r.params)) } }
            td { (r.placement) }
            td { (r.statistic.name()) " (" (r.direction.as_str()) ")" }
            td class="num" { (col.with_unit(r.a)) }
            td class="num" { (col.with_unit(r.b)) }
            td class={ "num " (v) } {
                @match r.speedup {
                    Some(s) => { (times(s)) "x (" (pct(s)) ")" },
                    None => "-",
                }
            }
            td class="num" {
                @match ci {
                    Some((lo, hi)) => { "[" (times(lo)) ", " (times(hi)) "]" },
                    None => "-",
                }
            }
            td { (significant_words(r)) }
        }
    }
}

fn missing(c: &Comparison) -> Markup {
    if c.missing.is_empty() {
        return html! {};
    }
    html! {
        section id="missing" {
            h2 { "Measured in one run only" }
            details {
                summary {
                    (c.missing.len()) " cell" @if c.missing.len() != 1 { "s" }
                    " (not in any mean)"
                }
                table {
                    tr {
                        th { "benchmark" } th { "params" } th { "placement" } th { "only in" }
                        th { "why the other run has none" }
                    }
                    @for m in &c.missing {
                        tr {
                            td { (m.benchmark) }
                            td { code { (params(&m.params)) } }
                            td { (m.placement) }
                            td { (m.only_in.letter()) }
                            td {
                                (m.other_skipped.as_deref().unwrap_or("not planned or not reached"))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Markdown escaping for a table cell: pipes and the characters that start markup.
fn md(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('*', "\\*")
        .replace('_', "\\_")
        .replace('`', "\\`")
        .replace('<', "&lt;")
        .replace('\n', " ")
}

/// A Markdown table row of `cells`, each escaped; an empty cell stays `| |`.
fn md_row<S: AsRef<str>>(cells: impl IntoIterator<Item = S>) -> String {
    let mut row = String::from("|");
    for c in cells {
        match md(c.as_ref()) {
            c if c.is_empty() => row.push_str(" |"),
            c => row.push_str(&format!(" {c} |")),
        }
    }
    row.push('\n');
    row
}

/// [`up_kernel`] as a Markdown table; empty without rows.
fn up_kernel_markdown(c: &Comparison) -> String {
    use smtlab_model::placement::UP_KERNEL_NAME;
    if c.up_kernel.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n**2T vs 1T-UP (paper 000)**: the SMP kernel's placements over the uniprocessor \
         kernel's `{UP_KERNEL_NAME}` (above 1 = better, 95% interval within the two runs).\n\n\
         | benchmark | params | placement | mean | over {UP_KERNEL_NAME} |\n|---|---|---|--:|--:|\n"
    );
    for [bench, params, _unit, placement, mean, over] in
        c.up_kernel.iter().flat_map(UpKernelRow::lines)
    {
        out.push_str(&md_row([bench, params, placement, mean, over]));
    }
    out
}

/// The comparison as GitHub-flavoured Markdown: who A and B are, the environment facts
/// that differ, one table row per cell with the speed-up and its interval, and the
/// geometric means; `c` is the comparison of `a` and `b`.
pub fn compare_markdown(a: &RunResults, b: &RunResults, c: &Comparison) -> String {
    let mut out = format!("**A**: {}  \n**B**: {}\n\n", md(&c.a.label), md(&c.b.label));
    let envs = environments(&a.run, &b.run, c);
    let diffs: Vec<_> = envs.iter().filter(|(.., differ)| *differ).collect();
    if !diffs.is_empty() {
        out.push_str("| differs | A | B |\n|---|---|---|\n");
        for (k, x, y, _) in diffs {
            out.push_str(&md_row([*k, x, y]));
        }
        out.push('\n');
    }
    if c.cpus_moved {
        out.push_str(&format!("Note: {}.\n\n", crate::compare::CPUS_MOVED_NOTE));
    }
    if c.rows.is_empty() {
        out.push_str("No cell was measured in both runs.\n");
        out.push_str(&up_kernel_markdown(c));
        return out;
    }
    out.push_str(
        "| group | benchmark | params | placement | A | B | speed-up | 95% interval | significant |\n\
         |---|---|---|---|--:|--:|--:|--:|---|\n",
    );
    let cols = unit_columns(c);
    for g in &c.groups {
        for r in c.rows.iter().filter(|r| r.group == g.group) {
            let col = &cols[&(r.benchmark.clone(), r.unit.clone())];
            let ci = speedup_interval(r);
            let dash = || "-".to_string();
            out.push_str(&md_row([
                r.group.clone(),
                r.benchmark.clone(),
                params(&r.params),
                r.placement.clone(),
                col.with_unit(r.a),
                col.with_unit(r.b),
                r.speedup.map_or_else(dash, pct),
                ci.map_or_else(dash, |(lo, hi)| format!("[{}, {}]", times(lo), times(hi))),
                significant_words(r).replace("- (n < 2)", "-"),
            ]));
        }
    }
    out.push_str(
        "\n| geometric mean | rows | unsteady (left out) | speed-up [95% interval] |\n|---|--:|--:|--:|\n",
    );
    for g in c.groups.iter().chain([&c.overall]) {
        let (rows, unsteady) = (g.rows.to_string(), g.unsteady.to_string());
        out.push_str(&md_row([&g.group, &rows, &unsteady, &geomean_text(g)]));
    }
    let _ = writeln!(out, "\n**Overall: {}**", md(&c.overall.headline()));
    if let Some(l) = crate::compare::scatter_line(c) {
        let _ = writeln!(out, "\n{}", md(&l));
    }
    let _ = writeln!(out, "\n{}", md(&c.between_runs.line()));
    out.push_str(
        "\nSpeed-up of B over A (positive = B better): mean B/A when higher is better, \
         mean A/B when lower is better. Interval: 95% of that ratio with the between-run \
         variance added. \
         Significant: the interval excludes 1 and the correction for the number of rows \
         (Benjamini-Hochberg, 5% false discoveries) keeps the difference. Unsteady cells \
         are called neither (see the words below). Geometric means: steady rows, 95% interval by Student's t on the \
         logarithms with a whole run's between-run shift added; no difference when it \
         includes 1.\n",
    );
    out.push_str(&up_kernel_markdown(c));
    if !c.missing.is_empty() {
        let _ = writeln!(
            out,
            "\n{} cell(s) measured in only one run are left out.",
            c.missing.len()
        );
    }
    let words = crate::glossary::markdown(&out);
    out.push_str(&words);
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use smtlab_model::Direction;

    use super::*;

    fn row(speedup: f64) -> CompareRow {
        CompareRow {
            benchmark: "int-ops".into(),
            group: "compute".into(),
            unit: "GOPS".into(),
            direction: Direction::Higher,
            params: BTreeMap::new(),
            placement: "1c1t".into(),
            statistic: crate::compare::Statistic::Mean,
            a: 1.0,
            b: speedup,
            n_a: 5,
            n_b: 5,
            speedup: Some(speedup),
            speedup_pct: Some((speedup - 1.0) * 100.0),
            interval: None,
            interval_with_between: None,
            significance: None,
            p_value: None,
            p_adjusted: None,
            unsteady: None,
            counters: Vec::new(),
        }
    }

    #[test]
    fn a_and_b_scaling_curves_share_one_chart() {
        use smtlab_fixtures::fleet::{FakeHost, run_of};
        let a = run_of(&FakeHost::new("old", "Demo Xeon A", 1.1), &["1", "2", "4"]);
        let b = run_of(&FakeHost::new("new", "Demo EPYC B", 1.3), &["1", "2", "4"]);
        let c = crate::compare::compare(&a, &b);
        let mut page = String::new();
        compare_sections(&mut page, &a, &b, &c);
        assert!(page.contains("A and B on one chart"), "{page}");
        // One chart per placement, each with both lines in its legend.
        assert_eq!(page.matches("aria-label=\"int-ops on ").count(), 4);
        assert!(page.contains(">A (old)</text>") && page.contains(">B (new)</text>"));
        // A cell's events in both runs: their distributions on one chart.
        let (mut ea, mut eb) = (a.clone(), b.clone());
        ea.cells[0]
            .result
            .series
            .insert("create_ns".into(), (1..=40).map(f64::from).collect());
        eb.cells[0]
            .result
            .series
            .insert("create_ns".into(), (5..=60).map(f64::from).collect());
        let mut page = String::new();
        compare_sections(&mut page, &ea, &eb, &crate::compare::compare(&ea, &eb));
        let chart = page
            .split("<svg")
            .find(|svg| svg.contains(": create_ns"))
            .expect("a chart of the events");
        assert!(chart.contains(">A (old)</text>") && chart.contains(">B (new)</text>"));
        // Cells without a thread count draw nothing.
        let (a1, b1) = (
            smtlab_fixtures::fleet::run(&FakeHost::new("old", "X", 1.1)),
            smtlab_fixtures::fleet::run(&FakeHost::new("new", "X", 1.2)),
        );
        let mut page = String::new();
        compare_sections(&mut page, &a1, &b1, &crate::compare::compare(&a1, &b1));
        assert!(!page.contains("A and B on one chart"));
    }

    #[test]
    fn a_uniprocessor_kernels_run_is_set_beside_the_smp_kernels_on_the_page() {
        use smtlab_fixtures::build::cell_of;
        let run_of = |cells: Vec<smtlab_model::CellRecord>| {
            let host = smtlab_fixtures::fleet::FakeHost::new("h", "cpu", 1.2);
            let mut r = smtlab_fixtures::fleet::run(&host);
            r.cells = cells;
            r.skipped.clear();
            r
        };
        let on = |name: &str, threads: u32, values: &[f64]| {
            let none = Default::default();
            cell_of(
                "int-ops",
                none,
                Default::default(),
                name,
                (1, threads),
                values,
            )
        };
        let smp = run_of(vec![
            on("1c2t", 2, &[15.0, 15.2, 14.8]),
            on("1c1t", 1, &[9.0, 9.1, 8.9]),
        ]);
        let up = run_of(vec![on("1t-up-kernel", 1, &[10.0, 10.1, 9.9])]);
        let c = crate::compare::compare(&smp, &up);
        let mut page = String::new();
        compare_sections(&mut page, &smp, &up, &c);
        let at = page.find("2T vs 1T-UP (paper 000)").expect("the section");
        let section = &page[at..];
        assert!(section.contains("1t-up-kernel (B)"), "{section}");
        assert!(
            section.contains("<td>1c2t</td>") && section.contains("1.500x"),
            "{section}"
        );
        let md = compare_markdown(&smp, &up, &c);
        assert!(md.contains("| int-ops | - | 1t-up-kernel (B) |"), "{md}");
        assert!(md.contains("| | | 1c2t |"), "{md}");
        // Without a uniprocessor kernel's run, no section.
        let mut page = String::new();
        compare_sections(&mut page, &smp, &smp, &crate::compare::compare(&smp, &smp));
        assert!(!page.contains("2T vs 1T-UP"));
    }

    /// The x and width of every bar.
    fn rects(svg: &str) -> Vec<(f64, f64)> {
        svg.split("<rect x=\"")
            .skip(2) // the background
            .map(|r| {
                let x: f64 = r.split('"').next().unwrap().parse().unwrap();
                let w: f64 = r
                    .split("width=\"")
                    .nth(1)
                    .and_then(|v| v.split('"').next())
                    .unwrap()
                    .parse()
                    .unwrap();
                (x, w)
            })
            .collect()
    }

    #[test]
    fn a_heading_a_row_without_speed_up_and_a_whisker_each_drawn() {
        let (with, mut without) = (row(1.2), row(1.0));
        without.speedup = None;
        let lines: Vec<Line<'_>> = vec![
            ("compute".into(), None, None),
            ("with".into(), Some(&with), Some((1.1, 1.3))),
            ("without".into(), Some(&without), None),
        ];
        let svg = bars(&lines).unwrap();
        assert!(
            svg.contains(r#"font-weight="bold">compute</text>"#),
            "{svg}"
        );
        assert!(
            svg.contains("no speed-up (a value is not positive)"),
            "{svg}"
        );
        assert_eq!(svg.matches(r##"stroke="#222222" fill="none""##).count(), 1);
        assert!(svg.contains("95% interval [1.100, 1.300]"), "{svg}");
        // Row 3 of 3 ends the chart: 48 + 3 * 20 + 30.
        assert!(svg.contains(r#"height="138""#), "{svg}");
    }

    #[test]
    fn bars_past_the_range_stop_at_the_plot_edge() {
        let (big, small, fair) = (row(20.0), row(0.02), row(1.5));
        let lines: Vec<Line<'_>> = vec![
            ("big".into(), Some(&big), Some((15.0, 25.0))),
            ("small".into(), Some(&small), None),
            ("fair".into(), Some(&fair), None),
        ];
        let svg = bars(&lines).unwrap();
        // Plot from 300 to 740 px; labels from 746.
        for (x, w) in rects(&svg) {
            assert!(x >= 300.0 - 0.1 && x + w <= 740.0 + 0.1, "{x} {w}\n{svg}");
        }
        // Two arrows for the two bars cut, and every figure written.
        assert_eq!(svg.matches("Z\" fill=").count(), 2, "{svg}");
        assert!(svg.contains("+1900.0%") && svg.contains("+50.0%"), "{svg}");
    }
}
