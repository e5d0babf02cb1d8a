//! The workload sections' charts: a value against the swept parameter (a line per
//! placement), and horizontal bars of values or speed-ups with their intervals (paper
//! 004 Chart 1, paper 000's bars per server and placement).

use maud::html;
use smtlab_model::CellRecord;

use super::cells::{mean_column, placements, scaled_mean};
use super::rows::Row;
use crate::fmt::Esc;
use crate::svg::{self, LineOptions, Point, Series, r1};
use crate::units::Column;

pub(super) fn figure(p: &mut String, svg: Option<String>) {
    p.push_str(&figure_of(svg).into_string());
}

/// A chart in a `figure`; nothing where there is no chart.
pub(super) fn figure_of(svg: Option<String>) -> maud::Markup {
    maud::html! { @if let Some(s) = svg { figure { (maud::PreEscaped(s)) } } }
}

/// The value against the swept parameter, one line per placement; `None` with fewer
/// than two numeric rows.
pub(super) fn sweep_chart(title: &str, x_label: &str, rows: &[Row<'_>]) -> Option<String> {
    if rows.iter().filter(|r| r.x.is_some()).count() < 2 {
        return None;
    }
    let all: Vec<&CellRecord> = rows.iter().flat_map(|r| r.cells.iter().copied()).collect();
    let unit = &all[0].unit;
    if all.iter().any(|c| &c.unit != unit) {
        return None;
    }
    let col = mean_column(&all);
    let series: Vec<Series> = placements(&all)
        .into_iter()
        .map(|pl| Series {
            points: rows
                .iter()
                .filter_map(|r| {
                    let c = r.cells.iter().find(|c| c.placement.name == pl)?;
                    let (y, ci) = scaled_mean(c, &col);
                    Some(Point::new(
                        r.x?,
                        y,
                        (ci.map(|c| c.0), ci.map(|c| c.1)),
                        format!(
                            "{} on {pl}: {}",
                            r.label,
                            col.with_unit(c.result.summary.mean)
                        ),
                    ))
                })
                .collect(),
            name: pl,
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    // Sizes written with a unit (`16KiB`) get a log axis in bytes; counts a linear one.
    let bytes = rows.iter().any(|r| {
        r.cells[0]
            .flat_params()
            .get(x_label)
            .is_some_and(|v| v.parse::<f64>().is_err())
    });
    let opt = LineOptions {
        y_zero: true,
        x_scale: if bytes {
            svg::Scale::Log
        } else {
            svg::Scale::Linear
        },
        x_bytes: bytes,
        ..LineOptions::default()
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
pub(super) struct Bar {
    pub(super) label: String,
    pub(super) value: f64,
    pub(super) lo: Option<f64>,
    pub(super) hi: Option<f64>,
    pub(super) color: usize,
    pub(super) text: String,
}

/// Horizontal bars from `base` (0 for throughput; 1 for speed-ups, with a dashed line
/// there), whiskers for the interval and the value written at the end.
pub(super) fn hbars(
    title: &str,
    subtitle: &str,
    axis: &str,
    base: f64,
    bars: &[Bar],
) -> Option<String> {
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
    let dash = (base != 0.0).then_some("4 3");
    let svg = html! {
        svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {w} {h}")) width=(w)
            height=(h) role="img" aria-label=(Esc(title)) font-family="sans-serif"
            font-size="11" {
            rect x="0" y="0" width=(w) height=(h) fill="#ffffff" {}
            text x="8" y="16" font-size="13" font-weight="bold" { (Esc(title)) }
            text x="8" y="30" fill="#555555" { (Esc(subtitle)) }
            @for t in &ticks {
                line x1=(px(*t)) y1=(top) x2=(px(*t)) y2=(y_axis) stroke="#e4e4e4" {}
                text x=(px(*t)) y=(y_axis + 14.0) text-anchor="middle" {
                    (Esc(&svg::tick_label(*t)))
                }
            }
            text x=(r1((left + w - right) / 2.0)) y=(h - 8.0) text-anchor="middle" { (Esc(axis)) }
            @for (i, b) in bars.iter().enumerate() {
                @let y = top + row * i as f64;
                @let (x0, x1) = (px(base), px(b.value));
                @let (a, z) = if x1 >= x0 { (x0, x1) } else { (x1, x0) };
                text x=(left - 6.0) y=(y + 14.0) text-anchor="end" { (Esc(&b.label)) }
                rect x=(a) y=(y + 3.0) width=(r1((z - a).max(1.0))) height=(row - 6.0)
                    fill=(svg::color(b.color)) {
                    title { (Esc(&format!("{}: {}", b.label, b.text))) }
                }
                @if let (Some(l), Some(u)) = (b.lo, b.hi) {
                    path d=(format!(
                        "M{l} {m}H{u}M{l} {a}V{z}M{u} {a}V{z}",
                        l = px(l),
                        u = px(u),
                        m = y + 10.0,
                        a = y + 6.0,
                        z = y + 14.0
                    )) stroke="#222222" {}
                }
                @let end = b.hi.map_or(b.value, |h| h.max(b.value));
                text x=(px(end).max(px(base)) + 4.0) y=(y + 14.0) fill="#333333" { (Esc(&b.text)) }
            }
            path d=(format!("M{} {top}V{y_axis}", px(base))) stroke="#333333"
                stroke-dasharray=[dash] {}
        }
    };
    Some(svg.into_string())
}

/// Bars of the cells' means (with their 95% CI), coloured by placement.
pub(super) fn value_bars(
    cells: &[&CellRecord],
    label: impl Fn(&CellRecord) -> String,
) -> (Vec<Bar>, Column) {
    let col = mean_column(cells);
    let places = placements(cells);
    let bars = cells
        .iter()
        .map(|c| {
            let (value, ci) = scaled_mean(c, &col);
            Bar {
                label: label(c),
                value,
                lo: ci.map(|c| c.0),
                hi: ci.map(|c| c.1),
                color: placement_color(&places, c),
                text: col.num(c.result.summary.mean),
            }
        })
        .collect();
    (bars, col)
}

/// A bar's colour: its placement's position among `places` (the page's column order).
pub(super) fn placement_color(places: &[String], c: &CellRecord) -> usize {
    places
        .iter()
        .position(|p| *p == c.placement.name)
        .unwrap_or(0)
}
