//! Co-run results: the symbiosis matrix of `smtlab corun` and the single-thread penalty
//! of `smtlab penalty`, from stored cells.
//!
//! A co-run cell is an ordinary cell of the measured workload A whose conditions say how
//! it ran: the form ([`Form`]: `alone`, `sibling`: the partner on A's SMT sibling,
//! `cores`: the partner on another core) and the partner (B; on an `alone` cell,
//! the partner of the cells it was interleaved with, so each co-run cell is divided by
//! the reference measured beside it). The partner's own values inside A's samples are
//! the sample metric [`PARTNER_VALUE`], in B's unit.
//!
//! Slowdowns are ratios of means with Fieller 95% intervals ([`stats::ratio`]), oriented
//! so that above 1 always means slower than alone, for rates as for times.

use serde::{Deserialize, Serialize};
use smtlab_model::stats::{self, Ratio};
use smtlab_model::{CellRecord, CellResult, Direction, RunResults, Summary};

use maud::{Markup, PreEscaped, html};

use crate::fmt::{Esc, num};

pub use smtlab_model::keys::Form;
pub use smtlab_model::metrics::corun::{PARTNER_ALONE_VALUE, PARTNER_VALUE, RUN_NS};

/// The form and partner of a co-run cell; `None` for other cells.
pub fn form_of(cell: &CellRecord) -> Option<(Form, &str)> {
    Some((cell.conditions.form?, cell.conditions.partner.as_deref()?))
}

/// `alone / co` for rates, `co / alone` for times: above 1 means the co-run is slower.
pub fn slowdown(alone: &Summary, co: &Summary, dir: Direction) -> Option<Ratio> {
    match dir {
        Direction::Higher => stats::ratio(alone, co),
        Direction::Lower => stats::ratio(co, alone),
    }
}

/// The partner's values over a co-run cell's samples; samples with no partner sample
/// wholly inside them are left out.
pub fn partner_summary(result: &CellResult) -> Option<Summary> {
    metric_summary(result, PARTNER_VALUE)
}

/// The partner's slowdown in a co-run cell: its values inside A's samples against its
/// values alone in the windows interleaved with them ([`PARTNER_ALONE_VALUE`]); `None`
/// where the cell has no such windows. `dir` is the partner's direction.
pub fn partner_slowdown(result: &CellResult, dir: Direction) -> Option<Ratio> {
    let reference = metric_summary(result, PARTNER_ALONE_VALUE)?;
    slowdown(&reference, &partner_summary(result)?, dir)
}

pub(crate) fn metric_summary(result: &CellResult, key: &str) -> Option<Summary> {
    let values: Vec<f64> = result
        .samples
        .iter()
        .filter_map(|s| s.metrics.get(key).copied())
        .collect();
    stats::summarize(&values)
}

/// Samples shorter than this share of the reference's were cut short: the cell's
/// budget ran out while calibrating (a partner whose one sample is long, say a stream
/// over a large buffer), so fixed costs dominate its figure.
pub const CUT_SHORT_SHARE: f64 = 0.1;

fn median_elapsed_ns(c: &CellRecord) -> Option<f64> {
    let v: Vec<f64> = c
        .result
        .samples
        .iter()
        .map(|s| s.elapsed_ns as f64)
        .collect();
    stats::median(&v)
}

/// Why a co-run cell's figure is not comparable with its alone reference: its samples
/// were cut to under [`CUT_SHORT_SHARE`] of the reference's length.
pub fn cut_short(alone: &CellRecord, co: &CellRecord) -> Option<String> {
    let (a, c) = (median_elapsed_ns(alone)?, median_elapsed_ns(co)?);
    (c < CUT_SHORT_SHARE * a).then(|| {
        format!(
            "samples cut short ({:.0} µs beside against {:.0} µs alone)",
            c / 1e3,
            a / 1e3
        )
    })
}

/// One entry of the symbiosis matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The measured workload (row).
    pub a: String,
    /// The partner (column).
    pub b: String,
    pub form: Form,
    /// A's slowdown next to B (above 1: slower than alone), against A's alone cell
    /// interleaved with it.
    pub slowdown: Option<Ratio>,
    /// B's slowdown next to A, from B's samples inside A's, against B alone on the same
    /// CPU in windows interleaved with them ([`PARTNER_ALONE_VALUE`]); where a cell has
    /// no such windows, against an alone cell of B (which ran on A's CPU).
    pub partner_slowdown: Option<Ratio>,
    /// `1/slowdown + 1/partner_slowdown`: the pair's progress relative to each running
    /// alone. Above 1 the two get more done side by side than taking turns on one CPU;
    /// a point estimate from the two ratios (no interval of its own).
    pub combined_speed: Option<f64>,
    /// Why the pair has no figures although both cells were measured: the co-run
    /// cell's samples were cut short ([`cut_short`]), so a slowdown would be the fixed
    /// costs of a few iterations, not the partner's effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<String>,
}

/// The matrix entries of every co-run cell, in cell order.
pub fn matrix(cells: &[CellRecord]) -> Vec<Entry> {
    let alone_of = |a: &str, partner: Option<&str>| {
        cells.iter().find(|c| {
            c.benchmark == a
                && form_of(c)
                    .is_some_and(|(f, p)| f == Form::Alone && partner.is_none_or(|x| x == p))
        })
    };
    cells
        .iter()
        .filter_map(|c| {
            let (form, b) = form_of(c)?;
            if form == Form::Alone {
                return None;
            }
            // The reference measured beside this cell, else any alone cell of A.
            let mine = alone_of(&c.benchmark, Some(b)).or_else(|| alone_of(&c.benchmark, None));
            let cut = mine.and_then(|m| cut_short(m, c));
            let own = mine
                .filter(|_| cut.is_none())
                .and_then(|m| slowdown(&m.result.summary, &c.result.summary, c.direction));
            let co = partner_summary(&c.result);
            let b_direction = cells.iter().find(|x| x.benchmark == b).map(|x| x.direction);
            let partner_slowdown = b_direction
                .and_then(|dir| partner_slowdown(&c.result, dir))
                .or_else(|| {
                    alone_of(b, Some(&c.benchmark))
                        .or_else(|| alone_of(b, None))
                        .and_then(|p| slowdown(&p.result.summary, co.as_ref()?, p.direction))
                });
            let combined_speed = match (&own, &partner_slowdown) {
                (Some(x), Some(y)) if x.ratio > 0.0 && y.ratio > 0.0 => {
                    Some(1.0 / x.ratio + 1.0 / y.ratio)
                }
                _ => None,
            };
            Some(Entry {
                a: c.benchmark.clone(),
                b: b.to_string(),
                form,
                slowdown: own,
                partner_slowdown,
                combined_speed,
                cut_short: cut,
            })
        })
        .collect()
}

/// Row and column names of the matrix of `form`, in first-seen order.
fn axes(entries: &[Entry], form: Form) -> (Vec<String>, Vec<String>) {
    let of_form = || entries.iter().filter(|e| e.form == form);
    let rows = crate::first_seen(of_form().map(|e| e.a.clone()));
    (rows, crate::first_seen(of_form().map(|e| e.b.clone())))
}

fn ratio_text(r: &Ratio) -> String {
    crate::fmt::ratio_ci(r.ratio, r.ci95_low, r.ci95_high)
}

/// The matrix of one form as a plain-text table: rows are the measured workload,
/// columns the partner, each entry A's slowdown with its 95% interval. Empty when the
/// form has no entries.
pub fn matrix_text(entries: &[Entry], form: Form) -> String {
    let (rows, cols) = axes(entries, form);
    if rows.is_empty() {
        return String::new();
    }
    crate::fmt::matrix_table("measured \\ partner", &rows, &cols, |a, b| {
        match entries
            .iter()
            .find(|e| e.form == form && e.a == a && e.b == b)
        {
            Some(e) if e.cut_short.is_some() => "cut short".into(),
            Some(Entry {
                slowdown: Some(s), ..
            }) => ratio_text(s),
            _ => "-".into(),
        }
    })
}

/// Pairs of one form whose combined speed was measured, as text lines.
pub fn combined_text(entries: &[Entry], form: Form) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e.form == form)
        .filter_map(|e| {
            let c = e.combined_speed?;
            Some(format!(
                "{} + {}: combined speed {:.2} (1/{:.2} + 1/{:.2})",
                e.a, e.b, c, e.slowdown?.ratio, e.partner_slowdown?.ratio
            ))
        })
        .collect()
}

/// Fill colour of a slowdown: white at 1, red up to 2 and beyond, blue below 1 (the
/// pair helps, constructive sharing).
pub fn heat_color(slowdown: f64) -> String {
    let (r, g, b) = if slowdown >= 1.0 {
        let t = ((slowdown - 1.0) / 1.0).clamp(0.0, 1.0);
        (255.0, 255.0 - 170.0 * t, 255.0 - 190.0 * t)
    } else {
        let t = ((1.0 - slowdown) / 0.5).clamp(0.0, 1.0);
        (255.0 - 170.0 * t, 255.0 - 90.0 * t, 255.0)
    };
    format!("#{:02x}{:02x}{:02x}", r as u8, g as u8, b as u8)
}

/// Fill of a cell whose 95% interval includes 1 (no clear effect).
pub const UNCLEAR_FILL: &str = "#f0f0f0";

/// Whether the 95% interval of `r` excludes 1.
pub fn significant(r: &Ratio) -> bool {
    match (r.ci95_low, r.ci95_high) {
        (Some(lo), Some(hi)) => lo > 1.0 || hi < 1.0,
        _ => false,
    }
}

/// The matrix of one form as an SVG heatmap (grey where the interval includes 1);
/// `None` when the form has no entries.
pub fn heatmap_svg(entries: &[Entry], form: Form) -> Option<String> {
    let title = format!("slowdown of the measured workload (row), {}", form.label());
    heatmap(entries, form, &title, "95% interval")
}

/// [`heatmap_svg`] under `title`, its brackets being `interval` (`95% prediction
/// interval` for a predicted matrix).
pub fn heatmap(entries: &[Entry], form: Form, title: &str, interval: &str) -> Option<String> {
    let (rows, cols) = axes(entries, form);
    if rows.is_empty() {
        return None;
    }
    let (left, top, cw, ch) = (150.0, 70.0, 110.0, 44.0);
    // Wide enough for the title lines whatever the number of columns.
    let w = (left + cw * cols.len() as f64 + 20.0).max(560.0);
    let h = top + ch * rows.len() as f64 + 20.0;
    let svg = html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(w) height=(h) viewBox=(format!("0 0 {w} {h}"))
            font-family="sans-serif" font-size="12" role="img" {
            title { (Esc(title)) }
            text x="10" y="18" font-weight="600" { (Esc(title)) }
            text x="10" y="34" fill="#666" {
                "above 1: slower than alone; brackets: " (Esc(interval)) "; grey: it includes 1"
            }
            @for (j, b) in cols.iter().enumerate() {
                text x=(left + cw * j as f64 + cw / 2.0) y=(top - 8.0) text-anchor="middle" {
                    (Esc(b))
                }
            }
            @for (i, a) in rows.iter().enumerate() {
                @let y = top + ch * i as f64;
                text x=(left - 8.0) y=(y + ch / 2.0 + 4.0) text-anchor="end" { (Esc(a)) }
                @for (j, b) in cols.iter().enumerate() {
                    (heat_cell(entries, form, (a, b), (left + cw * j as f64, y), (cw, ch)))
                }
            }
        }
    };
    Some(svg.into_string())
}

/// The cell of `a` next to `b` at `(x, y)`, `cw` by `ch`: its colour, ratio and
/// interval, and the whole figure on hover.
fn heat_cell(
    entries: &[Entry],
    form: Form,
    (a, b): (&String, &String),
    (x, y): (f64, f64),
    (cw, ch): (f64, f64),
) -> Markup {
    let e = entries
        .iter()
        .find(|e| e.form == form && &e.a == a && &e.b == b);
    let (fill, text, tip) = match e.and_then(|e| e.slowdown.as_ref().map(|r| (e, r))) {
        Some((e, r)) => (
            // An interval that includes 1 is no clear effect, however large the
            // ratio: drawn neutral, never in the colour of a slowdown.
            if significant(r) {
                heat_color(r.ratio)
            } else {
                UNCLEAR_FILL.to_string()
            },
            format!("{:.2}", r.ratio),
            format!(
                "{a} next to {b}: slowdown {}{}",
                ratio_text(r),
                e.combined_speed
                    .map(|c| format!("; combined speed {c:.2}"))
                    .unwrap_or_default()
            ),
        ),
        None => (
            "#eeeeee".to_string(),
            "-".to_string(),
            format!("{a} next to {b}: not measured"),
        ),
    };
    let sub = e
        .and_then(|e| e.slowdown.as_ref())
        .and_then(|r| Some(format!("[{:.2},{:.2}]", r.ci95_low?, r.ci95_high?)))
        .unwrap_or_default();
    html! {
        g {
            title { (Esc(&tip)) }
            rect x=(x) y=(y) width=(cw) height=(ch) fill=(fill) stroke="#fff" {}
            text x=(x + cw / 2.0) y=(y + 19.0) text-anchor="middle" font-weight="600" {
                (Esc(&text))
            }
            text x=(x + cw / 2.0) y=(y + 34.0) text-anchor="middle" font-size="10" fill="#444" {
                (Esc(&sub))
            }
        }
    }
}

/// The single-thread penalty of one hog: the task's run time next to it against alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Penalty {
    pub hog: String,
    pub form: Form,
    /// `time(with hog) / time(alone)`: above 1 the task takes longer (a 1.10 is a 10%
    /// penalty), with its Fieller interval.
    pub ratio: Option<Ratio>,
    /// Median and 95th percentile of the task's run times (ns), alone and with the hog.
    pub alone_p50_ns: Option<f64>,
    pub alone_p95_ns: Option<f64>,
    pub p50_ns: Option<f64>,
    pub p95_ns: Option<f64>,
}

/// Run times of a cell's samples: the [`RUN_NS`] series, else the samples' elapsed time.
pub fn run_times_ns(result: &CellResult) -> Vec<f64> {
    match result.series.get(RUN_NS) {
        Some(v) if !v.is_empty() => v.clone(),
        _ => result.samples.iter().map(|s| s.elapsed_ns as f64).collect(),
    }
}

/// The penalty of every co-run cell of `task` against its alone cell, in cell order.
pub fn penalties(cells: &[CellRecord], task: &str) -> Vec<Penalty> {
    let Some(alone) = cells
        .iter()
        .find(|c| c.benchmark == task && form_of(c).is_some_and(|(f, _)| f == Form::Alone))
    else {
        return Vec::new();
    };
    let alone_times = run_times_ns(&alone.result);
    cells
        .iter()
        .filter(|c| c.benchmark == task)
        .filter_map(|c| {
            let (form, hog) = form_of(c)?;
            (form != Form::Alone).then_some((c, form, hog))
        })
        .map(|(c, form, hog)| {
            let times = run_times_ns(&c.result);
            Penalty {
                hog: hog.to_string(),
                form,
                ratio: slowdown(&alone.result.summary, &c.result.summary, c.direction),
                alone_p50_ns: stats::percentile(&alone_times, 50.0),
                alone_p95_ns: stats::percentile(&alone_times, 95.0),
                p50_ns: stats::percentile(&times, 50.0),
                p95_ns: stats::percentile(&times, 95.0),
            }
        })
        .collect()
}

/// The penalties as an HTML table: the slowdown coloured only where its interval
/// excludes 1.
pub fn penalty_html(p: &[Penalty]) -> maud::Markup {
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| num(v / 1e6));
    html! {
        table {
            tr {
                th { "hog" } th { "where" } th { "run time vs alone [95% CI]" }
                th { "p50 ms alone / with" } th { "p95 ms alone / with" }
            }
            @for p in p {
                tr {
                    td { (p.hog) }
                    td { (p.form.label()) }
                    @match &p.ratio {
                        Some(r) if significant(r) => {
                            td class="num" style=(format!("background:{}", heat_color(r.ratio))) {
                                (ratio_text(r))
                            }
                        }
                        Some(r) => td class="num" { (ratio_text(r)) " (no clear effect)" },
                        None => td class="num" { "-" },
                    }
                    td class="num" { (ms(p.alone_p50_ns)) " / " (ms(p.p50_ns)) }
                    td class="num" { (ms(p.alone_p95_ns)) " / " (ms(p.p95_ns)) }
                }
            }
        }
    }
}

/// The penalties as a table for the terminal (fitted to its width by the caller).
pub fn penalty_text(p: &[Penalty]) -> crate::table::Table {
    let ms = |x: Option<f64>| x.map_or("-".into(), |v| num(v / 1e6));
    let mut t = crate::table::Table::new([
        "hog",
        "where",
        "run time vs alone [95% CI]",
        "p50 ms alone/with",
        "p95 ms alone/with",
    ])
    .shrink(0);
    for p in p {
        t.row([
            p.hog.clone(),
            p.form.name().into(),
            p.ratio.as_ref().map_or("-".into(), ratio_text),
            format!("{} / {}", ms(p.alone_p50_ns), ms(p.p50_ns)),
            format!("{} / {}", ms(p.alone_p95_ns), ms(p.p95_ns)),
        ]);
    }
    t
}

/// The HTML section of a run with co-run cells (`id="corun"`): a heatmap per form and
/// the penalties; nothing at all for runs without such cells.
pub fn section(p: &mut String, r: &RunResults) {
    if !r.cells.iter().any(|c| form_of(c).is_some()) {
        return;
    }
    let entries = matrix(&r.cells);
    let heatmaps: Vec<(Form, String)> = [Form::Sibling, Form::Cores]
        .into_iter()
        .filter_map(|form| heatmap_svg(&entries, form).map(|svg| (form, svg)))
        .collect();
    let corun = r.cells.iter().filter(|c| form_of(c).is_some());
    let tasks = crate::first_seen(corun.map(|c| c.benchmark.as_str()));
    let penalty_tables: Vec<(&str, maud::Markup)> = if r.run.suite.as_deref() == Some("penalty") {
        tasks
            .into_iter()
            .map(|task| (task, penalties(&r.cells, task)))
            .filter(|(_, pen)| !pen.is_empty())
            .map(|(task, pen)| (task, penalty_html(&pen)))
            .collect()
    } else {
        Vec::new()
    };
    let section = html! {
        section id="corun" {
            h2 { "Co-running workloads" }
            p {
                "Each entry is the measured workload's slowdown (row) with the partner (column) \
                 running at the same time, against the workload alone, measured interleaved \
                 with it. Red: slower; blue: faster than alone (constructive sharing); grey: \
                 the 95% interval includes 1, no clear effect."
            }
            @for (form, svg) in &heatmaps {
                h3 { (form.label()) }
                figure { (PreEscaped(svg)) }
                @let lines = combined_text(&entries, *form);
                @if !lines.is_empty() {
                    ul { @for l in lines { li { (l) } } }
                }
            }
            @if heatmaps.is_empty() {
                p class="muted" { "No co-run cell has a slowdown in this run." }
            }
            @for (task, table) in &penalty_tables {
                h3 { "Single-thread penalty of " (task) }
                div class="scroll" { (table) }
            }
        }
    };
    p.push_str(&section.into_string());
}

#[cfg(test)]
mod tests;
