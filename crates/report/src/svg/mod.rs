//! Hand-written SVG charts: line chart, scatter and cumulative distributions with "nice"
//! ticks and an optional log axis, plus a tiny confidence-interval strip for tables.
//!
//! Each chart is a pure function returning one `<svg>` element as a string, or `None`
//! when there is nothing finite to draw: callers then write "not measured" instead of
//! drawing empty axes. The markup is built with maud, as the rest of the page is, every
//! text through [`Esc`]. Styling is by presentation attributes, so a chart is also a
//! valid stand-alone SVG file. Colours are the Okabe-Ito palette, readable with the common
//! colour-vision deficiencies.
//!
//! Here: scales, "nice" ticks and the plot frame shared by the charts; the charts of
//! points and lines in `lines` ([`line_chart`], [`scatter`], [`ci_strip`]) and the
//! distributions in `distributions` ([`cdf_chart`]).

use maud::{Markup, html};

use crate::fmt::{Esc, shorten};

mod distributions;
mod lines;
#[cfg(test)]
mod tests;

pub(crate) use distributions::pct_of;
pub use distributions::{Dist, cdf_chart};
pub use lines::{ci_strip, line_chart, scatter};

/// Series colours, in order.
pub const PALETTE: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#999999",
];

/// Colour of series `i` (wraps around).
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// One legend row at (`x`, `y`): series `i`'s swatch and its name, shortened.
fn legend_row(x: f64, y: f64, i: usize, name: &str) -> Markup {
    html! {
        path d=(format!("M{x} {y}h18")) stroke=(color(i)) stroke-width="3" {}
        text x=(x + 24.0) y=(y + 4.0) { (Esc(&shorten(name, 22))) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scale {
    #[default]
    Linear,
    /// Base 10; only positive values are drawn.
    Log,
}

impl Scale {
    /// Log when every value is positive and they span at least two decades (a linear
    /// axis would squash all but the tail into one corner), else linear.
    pub fn auto(values: &[f64]) -> Scale {
        match extent(values.iter().copied()) {
            Some((lo, hi)) if lo > 0.0 && hi / lo >= 100.0 => Scale::Log,
            _ => Scale::Linear,
        }
    }
}

/// Smallest and largest finite value.
pub fn extent(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// An axis: label, scale, drawn range and tick positions.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
    pub min: f64,
    pub max: f64,
    pub ticks: Vec<f64>,
    /// Tick labels are sizes (`4 KiB`) rather than plain numbers.
    pub bytes: bool,
}

impl Axis {
    /// An axis covering `lo..=hi` with nice bounds. `integer` keeps linear ticks on whole
    /// numbers (thread counts). For a log axis `lo` must be positive.
    pub fn fit(label: &str, lo: f64, hi: f64, scale: Scale, integer: bool) -> Axis {
        let (min, max, ticks) = match scale {
            Scale::Linear => nice_linear(lo, hi, 6, integer),
            Scale::Log => log_ticks(lo, hi),
        };
        Axis {
            label: label.into(),
            scale,
            min,
            max,
            ticks,
            bytes: false,
        }
    }

    /// A log axis of sizes in bytes: bounds at powers of two, ticks at powers of four
    /// (every power of two when the range is short), labelled `4 KiB`, `1 MiB`.
    pub fn bytes_log2(label: &str, lo: f64, hi: f64) -> Axis {
        let lo = lo.max(1.0);
        let hi = hi.max(lo * 2.0);
        let (a, b) = (lo.log2().floor() as i32, hi.log2().ceil() as i32);
        let step = if b - a > 12 { 2 } else { 1 };
        let ticks = (a..=b)
            .filter(|e| (e - a) % step == 0)
            .map(|e| 2f64.powi(e))
            .collect();
        Axis {
            label: label.into(),
            scale: Scale::Log,
            min: 2f64.powi(a),
            max: 2f64.powi(b),
            ticks,
            bytes: true,
        }
    }

    /// Position of `v` along the axis, 0 at `min` and 1 at `max`.
    pub fn frac(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => (v - self.min) / (self.max - self.min),
            Scale::Log => (v.log10() - self.min.log10()) / (self.max.log10() - self.min.log10()),
        }
    }

    fn label_of(&self, v: f64) -> String {
        if self.bytes {
            crate::units::size(v)
        } else {
            tick_label(v)
        }
    }

    /// Whether `v` can be drawn on this axis at all.
    fn drawable(&self, v: f64) -> bool {
        v.is_finite() && (self.scale == Scale::Linear || v > 0.0)
    }
}

/// Bounds and ticks for a linear axis: steps of 1, 2 or 5 times a power of ten, about
/// `target` of them, bounds rounded outwards to a step.
pub fn nice_linear(lo: f64, hi: f64, target: usize, integer: bool) -> (f64, f64, Vec<f64>) {
    let (mut lo, mut hi) = (lo.min(hi), lo.max(hi));
    if lo == hi {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        lo -= pad;
        hi += pad;
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let mut step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    if integer && step < 1.0 {
        step = 1.0;
    }
    let first = (lo / step).floor();
    let last = (hi / step).ceil();
    let ticks: Vec<f64> = (0..=(last - first) as i64)
        .map(|i| (first + i as f64) * step)
        .collect();
    (first * step, last * step, ticks)
}

/// Bounds and ticks for a log axis. Bounds snap outwards to 1, 2 or 5 times a power of
/// ten (whole decades would waste most of the plot on data spanning 5k..1M); ticks are
/// the powers of ten inside, and with fewer than three decades the 2x and 5x marks too,
/// so there are enough labels to read.
pub fn log_ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    const EPS: f64 = 1e-9;
    let lo = if lo > 0.0 {
        lo
    } else {
        hi.abs().max(1.0) * 1e-3
    };
    let hi = hi.max(lo);
    let down = |v: f64| {
        let d = 10f64.powf(v.log10().floor());
        let m = [5.0, 2.0, 1.0]
            .into_iter()
            .find(|m| *m <= v / d * (1.0 + EPS))
            .unwrap_or(1.0);
        m * d
    };
    let up = |v: f64| {
        let d = 10f64.powf(v.log10().floor());
        let m = [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .find(|m| *m >= v / d * (1.0 - EPS))
            .unwrap_or(10.0);
        m * d
    };
    let min = down(lo);
    let mut max = up(hi);
    if max <= min {
        max = up(min * (1.0 + 1e-6));
    }
    let dense = (max / min).log10() < 3.0;
    let mut ticks = Vec::new();
    for d in (min.log10().floor() as i32)..=(max.log10().ceil() as i32) {
        let p = 10f64.powi(d);
        let marks: &[f64] = if dense { &[1.0, 2.0, 5.0] } else { &[1.0] };
        for m in marks {
            let t = m * p;
            if t >= min * (1.0 - EPS) && t <= max * (1.0 + EPS) {
                ticks.push(t);
            }
        }
    }
    // Label the ends too, so that a sparse axis is never unlabelled at its corner.
    if !dense {
        ticks.push(min);
        ticks.push(max);
        ticks.sort_by(f64::total_cmp);
        ticks.dedup_by(|a, b| (*a / *b - 1.0).abs() < EPS);
    }
    (min, max, ticks)
}

/// Short tick label: SI suffixes from a thousand up, otherwise up to six decimals with
/// trailing zeros removed (`0.25`, `2`, `1.5k`, `10M`).
pub fn tick_label(v: f64) -> String {
    fn trim(s: String) -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
    let a = v.abs();
    if a == 0.0 {
        return "0".into();
    }
    for (scale, suffix) in [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if a >= scale {
            return format!("{}{suffix}", trim(format!("{:.2}", v / scale)));
        }
    }
    trim(format!("{v:.6}"))
}

/// Geometry shared by the charts: canvas size, margins, and both axes.
struct Plot {
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    x: Axis,
    y: Axis,
}

impl Plot {
    fn px(&self, v: f64) -> f64 {
        self.left + self.x.frac(v) * (self.w - self.left - self.right)
    }

    fn py(&self, v: f64) -> f64 {
        self.h - self.bottom - self.y.frac(v) * (self.h - self.top - self.bottom)
    }

    /// The whole chart: the `<svg>` element, its frame (title, subtitle, grid, ticks
    /// and axis labels) and `body` drawn over the frame.
    fn svg(&self, title: &str, subtitle: &str, body: Markup) -> String {
        html! {
            svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {} {}", self.w, self.h))
                width=(self.w) height=(self.h) role="img" aria-label=(Esc(title))
                font-family="sans-serif" font-size="11" {
                (self.frame(title, subtitle))
                (body)
            }
        }
        .into_string()
    }

    /// Background, title, subtitle, grid, ticks and axis labels.
    fn frame(&self, title: &str, subtitle: &str) -> Markup {
        let (x0, x1) = (self.left, self.w - self.right);
        let (y0, y1) = (self.h - self.bottom, self.top);
        html! {
            rect x="0" y="0" width=(self.w) height=(self.h) fill="#ffffff" {}
            text x=(x0) y="16" font-size="13" font-weight="bold" { (Esc(title)) }
            @if !subtitle.is_empty() {
                text x=(x0) y="30" fill="#555555" { (Esc(subtitle)) }
            }
            @for &t in &self.x.ticks {
                @let x = r1(self.px(t));
                line x1=(x) y1=(y0) x2=(x) y2=(y1) stroke="#e4e4e4" {}
                line x1=(x) y1=(y0) x2=(x) y2=(y0 + 4.0) stroke="#333333" {}
                text x=(x) y=(y0 + 16.0) text-anchor="middle" { (Esc(&self.x.label_of(t))) }
            }
            @for &t in &self.y.ticks {
                @let y = r1(self.py(t));
                line x1=(x0) y1=(y) x2=(x1) y2=(y) stroke="#e4e4e4" {}
                line x1=(x0 - 4.0) y1=(y) x2=(x0) y2=(y) stroke="#333333" {}
                text x=(x0 - 6.0) y=(y + 4.0) text-anchor="end" { (Esc(&self.y.label_of(t))) }
            }
            path d=(format!("M{x0} {y1}V{y0}H{x1}")) fill="none" stroke="#333333" {}
            text x=(r1((x0 + x1) / 2.0)) y=(self.h - 8.0) text-anchor="middle" {
                (Esc(&axis_title(&self.x)))
            }
            text transform=(format!("translate(14 {}) rotate(-90)", r1((y0 + y1) / 2.0)))
                text-anchor="middle" {
                (Esc(&axis_title(&self.y)))
            }
        }
    }
}

fn axis_title(a: &Axis) -> String {
    match a.scale {
        Scale::Linear => a.label.clone(),
        Scale::Log => format!("{} (log scale)", a.label),
    }
}

/// One decimal place is plenty for pixels and keeps the markup small.
pub(crate) fn r1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// A strip `w` pixels wide split left to right into `parts`: each its hover text,
/// colour index and width as a share of the strip (0 to 1).
pub(crate) fn share_strip(w: f64, parts: &[(String, usize, f64)]) -> Markup {
    let h = 14.0;
    let mut x = 0.0;
    let mut rects = Vec::with_capacity(parts.len());
    for (tip, col, share) in parts {
        let width = w * share;
        rects.push(html! {
            rect x=(f1(x)) y="0" width=(f1(width)) height=(h) fill=(color(*col)) {
                title { (tip) }
            }
        });
        x += width;
    }
    html! {
        svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {w} {h}")) width=(w)
            height=(h) class="strip" {
            @for r in &rects { (r) }
        }
    }
}

/// A pixel figure written with one decimal place, always (`12.0`).
pub(crate) fn f1(v: f64) -> String {
    format!("{v:.1}")
}

/// A point of a line chart, with an optional error bar and a hover text.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// Shown on hover (`<title>`): what the point is, in words.
    pub tip: String,
    /// Written beside the point when [`LineOptions::point_labels`] is set (`12.3`).
    pub label: Option<String>,
}

impl Point {
    /// A point with its error bar (`lo`..`hi`, where known), unlabelled.
    pub fn new(x: f64, y: f64, (lo, hi): (Option<f64>, Option<f64>), tip: String) -> Point {
        Point {
            x,
            y,
            lo,
            hi,
            tip,
            label: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
}

impl Series {
    /// The y values of every point of `series`, for choosing the y axis's scale.
    pub fn all_y(series: &[Series]) -> Vec<f64> {
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.y))
            .collect()
    }
}

/// Options of [`line_chart`]; by default none of them (linear axes).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LineOptions {
    /// Start the y axis at zero (throughput: a gain should look as big as it is).
    pub y_zero: bool,
    /// Whole-number x ticks (thread counts).
    pub x_integer: bool,
    pub y_scale: Scale,
    pub x_scale: Scale,
    /// The x values are sizes in bytes: a log x axis then gets ticks at powers of two
    /// labelled `4 KiB`, `1 MiB`.
    pub x_bytes: bool,
    /// Vertical reference lines with a label (cache sizes on a working-set sweep).
    pub vlines: Vec<(f64, String)>,
    /// Write each point's [`Point::label`] beside it.
    pub point_labels: bool,
}
