//! The advice as people and programs read it: JSON (`smtlab.advice/1`), terminal text,
//! Markdown, and the HTML report's first section.

use super::*;
use crate::html_parts::Absent;

/// The advice JSON document (`smtlab.advice/1`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdviceDoc {
    pub schema: String,
    /// The run the cells were saved in (0 when not stored).
    pub run: i64,
    /// One line per thing this machine could not measure.
    pub notes: Vec<String>,
    pub advice: Vec<Advice>,
}

/// The advice as pretty JSON with a trailing newline.
pub fn json(run: i64, notes: &[String], advice: &[Advice]) -> String {
    let doc = AdviceDoc {
        schema: ADVICE_SCHEMA.into(),
        run,
        notes: notes.to_vec(),
        advice: advice.to_vec(),
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

/// Milliseconds with the interval where there is one: `0.52 [0.48, 0.56]`.
fn ms(f: &Figure, interval: bool) -> String {
    let n = crate::fmt::num;
    match (f.ci95_low, f.ci95_high) {
        (Some(lo), Some(hi)) if interval => format!("{} [{}, {}]", n(f.value), n(lo), n(hi)),
        _ => n(f.value),
    }
}

/// Why a side did not keep up, in brackets: ` (2 of 5 samples behind, 3 errors)`.
pub fn behind_words(side: &SweepSide) -> String {
    let mut why = Vec::new();
    if side.behind_samples > 0 && side.behind_samples < side.n {
        why.push(format!(
            "{} of {} samples behind",
            side.behind_samples, side.n
        ));
    }
    if side.errors > 0 {
        why.push(format!("{} errors", side.errors));
    }
    if why.is_empty() {
        String::new()
    } else {
        format!(" ({})", why.join(", "))
    }
}

/// The header of a sweep's table.
const SWEEP_HEAD: [&str; 6] = [
    "offered/s",
    "on",
    "served/s",
    "p50 ms",
    "p99 ms (95% CI)",
    "p99.9 ms",
];

/// The line above a sweep's table.
fn sweep_title(s: &LatencySweep) -> String {
    format!(
        "latency at offered load, open loop ({} vs {}; context, not deciding):",
        s.placements.0, s.placements.1
    )
}

/// A sweep's rows: each offered rate and side, its percentiles where it kept up, else
/// `not kept up` with what it served.
fn sweep_rows(s: &LatencySweep) -> Vec<[String; 6]> {
    let n = crate::fmt::num;
    let mut rows = Vec::new();
    for p in &s.points {
        for side in &p.sides {
            let pct = |f: &Option<Figure>, ci: bool| f.as_ref().map_or("-".into(), |f| ms(f, ci));
            let p50 = if side.kept_up {
                pct(&side.p50_ms, false)
            } else {
                format!("not kept up{}", behind_words(side))
            };
            rows.push([
                format!("{:.0}", p.offered_per_s),
                side.placement.clone(),
                n(side.achieved_per_s),
                p50,
                pct(&side.p99_ms, true),
                pct(&side.p999_ms, false),
            ]);
        }
    }
    rows
}

fn mark(says: Says) -> &'static str {
    match says {
        Says::On => "on",
        Says::Off => "off",
        Says::Unclear => "?",
        Says::Context => "",
    }
}

/// The answer's `because` above a table of its figures: in words where the deciding
/// figure has its own row (`marked`: how the table marks it), so that the figure is
/// said once.
fn because_above_its_row(a: &Advice, marked: &str) -> String {
    match (&a.because_words, a.deciding().count()) {
        (Some(words), 1) => format!("{words} (the row {marked})"),
        (Some(words), n) if n > 1 => format!("{words} (the rows {marked})"),
        _ => a.because.clone(),
    }
}

/// The terminal summary: per workload the answer, why, then each figure (its interval,
/// which way it points, `*` where the answer rests on it), fitted to `width`.
pub fn text(advice: &[Advice], width: usize) -> String {
    let layout = crate::table::Layout::fixed(width);
    let mut out = String::new();
    for a in advice {
        out.push_str(&crate::table::wrap(&a.workload, layout));
        out.push_str(&crate::table::wrap(
            &format!("  answer: {}", a.answer),
            layout,
        ));
        out.push_str(&crate::table::wrap(
            &format!("  because {}", because_above_its_row(a, "marked *")),
            layout,
        ));
        let mut t = crate::table::Table::new(["", "figure (95% CI)", "says", "measured"]).shrink(3);
        for r in &a.reasons {
            // What the interval says (`not significant at 95%`, `unsteady (why)`) goes
            // under the row, so the figures keep their column at 80 characters.
            let words = r.figure.words_text();
            let figure = words
                .as_ref()
                .and_then(|w| r.shown.strip_suffix(&format!(" {w}")))
                .unwrap_or(&r.shown)
                .to_string();
            let words = words.filter(|_| figure != r.shown);
            t.row_with_detail(
                [
                    if r.deciding { "*" } else { "" }.to_string(),
                    figure,
                    mark(r.says).to_string(),
                    r.what.clone(),
                ],
                words.map_or(String::new(), |w| format!("   {w}")),
            );
        }
        if !a.reasons.is_empty() {
            out.push_str(&t.indented(width));
        }
        for s in &a.latency_sweeps {
            out.push_str(&crate::table::wrap(
                &format!("  {}", sweep_title(s)),
                layout,
            ));
            let mut t = crate::table::Table::new(SWEEP_HEAD).shrink(4);
            for r in sweep_rows(s) {
                t.row(r);
            }
            out.push_str(&t.indented(width));
        }
    }
    out
}

/// The advice as Markdown: one row per workload, then each workload's figures.
pub fn markdown(advice: &[Advice]) -> String {
    use crate::markdown::row_of;
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::from("| workload | recommendation | deciding figures |\n|---|---|---|\n");
    for a in advice {
        let deciding: Vec<String> = a
            .deciding()
            .map(|r| format!("{}: {}", r.what, r.shown))
            .collect();
        let answer = format!("**{}**", a.answer);
        out.push_str(&row_of([&a.workload, &answer, &deciding.join("; ")]));
    }
    for a in advice.iter().filter(|a| !a.reasons.is_empty()) {
        out.push_str(&format!(
            "\n**{}**: {}, because {}\n\n",
            cell(&a.workload),
            cell(&a.answer),
            cell(&because_above_its_row(a, "in bold"))
        ));
        out.push_str("| figure (95% CI) | says | measured |\n|---|---|---|\n");
        for r in &a.reasons {
            let says = match r.says {
                Says::Context => "context".to_string(),
                s => mark(s).to_string(),
            };
            let says = if r.deciding {
                format!("**{says}**")
            } else {
                says
            };
            out.push_str(&row_of([&r.shown, &says, &r.what]));
        }
        for s in &a.latency_sweeps {
            out.push_str(&format!("\n{}\n\n", cell(&sweep_title(s))));
            out.push_str(&row_of(SWEEP_HEAD));
            out.push_str("|---|---|---|---|---|---|\n");
            for r in sweep_rows(s) {
                out.push_str(&row_of(r));
            }
        }
    }
    let words = crate::glossary::markdown(&out);
    out.push_str(&words);
    out
}

/// The rates a side of `s` did not keep up with, with what it served: `1c1t at 900/s
/// (served 700/s)`.
pub(super) fn not_kept_up(s: &LatencySweep) -> Vec<String> {
    s.points
        .iter()
        .flat_map(|p| {
            p.sides.iter().filter(|x| !x.kept_up).map(move |x| {
                format!(
                    "{} at {:.0}/s (served {:.0}/s)",
                    x.placement, p.offered_per_s, x.achieved_per_s
                )
            })
        })
        .collect()
}

/// A sweep as a chart: p99 (with its interval) and p50 against the offered rate, one
/// line per side and percentile; the rates a side did not keep up with are not drawn
/// ([`not_kept_up`] names them under the chart).
pub(super) fn sweep_chart(workload: &str, s: &LatencySweep) -> Option<String> {
    use crate::svg::{LineOptions, Point, Series};
    let sides = [&s.placements.0, &s.placements.1];
    let mut series = Vec::new();
    for pct in ["p99", "p50"] {
        for side in sides {
            let points: Vec<Point> = s
                .points
                .iter()
                .filter_map(|p| {
                    let x = p.sides.iter().find(|x| &x.placement == side)?;
                    let f = if pct == "p99" { &x.p99_ms } else { &x.p50_ms };
                    let f = f.as_ref()?;
                    Some(Point::new(
                        p.offered_per_s,
                        f.value,
                        (f.ci95_low, f.ci95_high),
                        format!(
                            "{side} at {:.0} req/s offered: {pct} {} ms",
                            p.offered_per_s,
                            ms(f, true)
                        ),
                    ))
                })
                .collect();
            if !points.is_empty() {
                series.push(Series {
                    name: format!("{side} {pct}"),
                    points,
                });
            }
        }
    }
    let name = workload.split(' ').next().unwrap_or(workload);
    crate::svg::line_chart(
        &format!(
            "{name}: latency at offered load ({} vs {})",
            s.placements.0, s.placements.1
        ),
        "open loop; bars: 95% intervals; a rate not kept up is not drawn",
        "offered load (requests/s)",
        "latency (ms)",
        &series,
        &LineOptions {
            y_zero: true,
            ..LineOptions::default()
        },
    )
}

/// The strip of a row: the first deciding figure (turned so that above 1 points to SMT
/// on: a run time next to a busy sibling is shown as its inverse) on a log scale.
fn strip(a: &Advice) -> Option<String> {
    // Without SMT the figure is 2 cores against 1: no direction toward SMT on or off.
    if a.recommendation == Recommendation::NoSmt {
        return None;
    }
    let r = a.deciding().next()?;
    let f = &r.figure;
    // Figures whose "above 1" means slower (the single-thread cost) are turned over.
    let turned = r.what.starts_with("run time beside");
    let (v, lo, hi) = if turned {
        (
            1.0 / f.value,
            f.ci95_high.map(|x| 1.0 / x),
            f.ci95_low.map(|x| 1.0 / x),
        )
    } else {
        (f.value, f.ci95_low, f.ci95_high)
    };
    if !v.is_finite() || v <= 0.0 {
        return None;
    }
    let lo_r = lo.unwrap_or(v).min(v).clamp(0.25, 1.0).min(0.5);
    let hi_r = hi.unwrap_or(v).max(v).clamp(1.0, 4.0).max(2.0);
    let clamp = |x: f64| x.clamp(lo_r, hi_r);
    Some(crate::svg::ci_strip(
        clamp(v),
        lo.map(clamp),
        hi.map(clamp),
        (lo_r, hi_r),
    ))
}

/// Whether the answers are shown as the scaling without SMT: every one `no SMT here`,
/// none with a latency sweep, and a scaling measured.
pub fn without_smt(answers: &[Advice], scaling: &[Scaling]) -> bool {
    !scaling.is_empty()
        && answers
            .iter()
            .all(|a| a.recommendation == Recommendation::NoSmt && a.latency_sweeps.is_empty())
}

/// The answer on a machine without SMT, said once, with each workload's scaling
/// ([`super::scaling`]); `None` where the answers speak of SMT or carry a latency sweep,
/// which the answer table shows.
fn without_smt_section(r: &RunResults, answers: &[Advice]) -> Option<maud::Markup> {
    let topo = &r.run.topology;
    let rows = super::scaling(&r.cells, topo.smt_visible(), topo.cpus.len());
    if !without_smt(answers, &rows) {
        return None;
    }
    Some(maud::html! {
        section id="advice" {
            h2 { "The answer: no SMT here" }
            (super::scaling::html(&rows))
        }
    })
}

/// The report's first section (`id="advice"`): one row per workload with its answer,
/// the figures it rests on and a strip of the deciding figure with its interval; or why
/// the run has no answer.
pub(crate) fn section(r: &RunResults) -> Result<maud::Markup, Absent> {
    let answers = advise_run(r);
    if answers.is_empty() {
        return Err(Absent(
            "no workload measured on the placements the answer needs (1c1t with 1c2t or 2c1t, or in co-runs)"
                .into(),
        ));
    }
    if let Some(layout) = without_smt_section(r, &answers) {
        return Ok(layout);
    }
    Ok(maud::html! {
        section id="advice" {
            h2 { "The answer: should SMT be on?" }
            p {
                "One row per workload: the recommendation, the measured figures it rests on \
                 (each with its " (crate::glossary::link(crate::glossary::Term::Interval)) ") and a strip of the deciding one (dot: the figure; \
                 bar: its interval; dashed line: no change; green: toward SMT on, red: toward \
                 off, grey: the interval includes no change, so it decides nothing). The \
                 machine and every cell follow below."
            }
            // A workload's parameters wrap, so the recommendation stays on the first
            // screen at 800 px; the strip column only where a row has a strip.
            @let strips = answers.iter().any(|a| strip(a).is_some());
            table class="answers" {
                tr {
                    th { "workload" } th { "recommendation" } th { "deciding figures" }
                    @if strips { th { "" } }
                }
                @for a in &answers {
                    tr {
                        td { (a.workload) }
                        td { strong { (a.answer) } }
                        td {
                            @for (i, d) in a.deciding().enumerate() {
                                @if i > 0 { (crate::html_parts::BR) }
                                (d.what) ": " (d.shown)
                            }
                            @if a.deciding().next().is_none() { span class="muted" { (a.because) } }
                        }
                        @if strips { td { @if let Some(s) = strip(a) { (maud::PreEscaped(s)) } } }
                    }
                }
            }
            @for a in &answers {
                @for s in &a.latency_sweeps {
                    @if let Some(chart) = sweep_chart(&a.workload, s) {
                        figure class="chart" {
                            (maud::PreEscaped(chart))
                            figcaption {
                                (a.workload)
                                @let missed = not_kept_up(s);
                                @if !missed.is_empty() {
                                    (crate::html_parts::BR) "not kept up: " (missed.join("; "))
                                }
                            }
                        }
                    }
                }
            }
            @for a in answers.iter().filter(|a| a.reasons.len() > a.deciding().count()) {
                details {
                    summary { (a.workload) ": every figure" }
                    table {
                        tr { th { "measured" } th { "figure (95% CI)" } th { "points to" } }
                        @for x in &a.reasons {
                            tr {
                                td { (x.what) }
                                td class="yield" { (x.shown) }
                                td { (match x.says { Says::On => "SMT on", Says::Off => "SMT off", Says::Unclear => "neither (interval includes no change)", Says::Context => "context" }) }
                            }
                        }
                    }
                }
            }
        }
    })
}
