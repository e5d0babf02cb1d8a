//! Hand-written SVG charts: line chart, scatter and histogram with "nice" ticks and an
//! optional log axis, plus a tiny confidence-interval strip for tables.
//!
//! Each chart is a pure function returning one `<svg>` element as a string, or `None`
//! when there is nothing finite to draw: callers then write "not measured" instead of
//! drawing empty axes. Styling is by presentation attributes, so a chart is also a valid
//! stand-alone SVG file. Colours are the Okabe-Ito palette, readable with the common
//! colour-vision deficiencies.

use std::fmt::Write;

use crate::fmt::{esc, shorten};

/// Series colours, in order.
pub const PALETTE: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#999999",
];

/// Colour of series `i` (wraps around).
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
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

/// Bins for a histogram of `n` values: Rice's rule `2 n^(1/3)`, at least 5 and at most 60
/// (40 bins for three events would only draw noise).
pub fn bins_for(n: usize) -> usize {
    ((2.0 * (n as f64).cbrt()).ceil() as usize).clamp(5, 60)
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

/// Counts of `values` in the bins between consecutive `edges` (ascending); the last
/// bin includes its upper edge. Values outside the edges or not finite are not counted.
pub fn bin_counts(values: &[f64], edges: &[f64]) -> Vec<usize> {
    let bins = edges.len().saturating_sub(1);
    let mut counts = vec![0; bins];
    if bins == 0 {
        return counts;
    }
    let last = edges[bins];
    for &v in values {
        if !v.is_finite() || v < edges[0] || v > last {
            continue;
        }
        // partition_point: the number of edges <= v; the bin is one less.
        let i = edges
            .partition_point(|e| *e <= v)
            .saturating_sub(1)
            .min(bins - 1);
        counts[i] += 1;
    }
    counts
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

    /// `<svg>` opening, title, subtitle, grid, ticks and axis labels.
    fn open(&self, title: &str, subtitle: &str) -> String {
        let mut s = String::new();
        let (x0, x1) = (self.left, self.w - self.right);
        let (y0, y1) = (self.h - self.bottom, self.top);
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{t}" font-family="sans-serif" font-size="11">"#,
            w = self.w,
            h = self.h,
            t = esc(title)
        );
        let _ = write!(
            s,
            r##"<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>"##,
            self.w, self.h
        );
        let _ = write!(
            s,
            r#"<text x="{x0}" y="16" font-size="13" font-weight="bold">{}</text>"#,
            esc(title)
        );
        if !subtitle.is_empty() {
            let _ = write!(
                s,
                r##"<text x="{x0}" y="30" fill="#555555">{}</text>"##,
                esc(subtitle)
            );
        }
        for &t in &self.x.ticks {
            let x = r1(self.px(t));
            let _ = write!(
                s,
                r##"<line x1="{x}" y1="{y0}" x2="{x}" y2="{y1}" stroke="#e4e4e4"/><line x1="{x}" y1="{y0}" x2="{x}" y2="{}" stroke="#333333"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
                y0 + 4.0,
                y0 + 16.0,
                esc(&self.x.label_of(t))
            );
        }
        for &t in &self.y.ticks {
            let y = r1(self.py(t));
            let _ = write!(
                s,
                r##"<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#e4e4e4"/><line x1="{}" y1="{y}" x2="{x0}" y2="{y}" stroke="#333333"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
                x0 - 4.0,
                x0 - 6.0,
                y + 4.0,
                esc(&self.y.label_of(t))
            );
        }
        let _ = write!(
            s,
            r##"<path d="M{x0} {y1}V{y0}H{x1}" fill="none" stroke="#333333"/>"##
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            r1((x0 + x1) / 2.0),
            self.h - 8.0,
            esc(&axis_title(&self.x))
        );
        let _ = write!(
            s,
            r#"<text transform="translate(14 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
            r1((y0 + y1) / 2.0),
            esc(&axis_title(&self.y))
        );
        s
    }
}

fn axis_title(a: &Axis) -> String {
    match a.scale {
        Scale::Linear => a.label.clone(),
        Scale::Log => format!("{} (log scale)", a.label),
    }
}

/// One decimal place is plenty for pixels and keeps the markup small.
fn r1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
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

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
}

/// Options of [`line_chart`].
#[derive(Debug, Clone, PartialEq)]
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

impl Default for LineOptions {
    fn default() -> Self {
        LineOptions {
            y_zero: false,
            x_integer: false,
            y_scale: Scale::Linear,
            x_scale: Scale::Linear,
            x_bytes: false,
            vlines: Vec::new(),
            point_labels: false,
        }
    }
}

/// Lines through points sorted by x, one per series, with markers, error bars and a
/// legend on the right. `None` when no series has a drawable point.
pub fn line_chart(
    title: &str,
    subtitle: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    opt: &LineOptions,
) -> Option<String> {
    let pts = || series.iter().flat_map(|s| s.points.iter());
    let (xl, xh) = extent(
        pts()
            .map(|p| p.x)
            .filter(|x| opt.x_scale == Scale::Linear || *x > 0.0),
    )?;
    let ys = pts().flat_map(|p| [Some(p.y), p.lo, p.hi]).flatten();
    let ys: Vec<f64> = match opt.y_scale {
        Scale::Log => ys.filter(|v| *v > 0.0).collect(),
        Scale::Linear => ys.collect(),
    };
    let (mut yl, yh) = extent(ys.into_iter())?;
    if opt.y_zero && opt.y_scale == Scale::Linear {
        // Throughput is never negative: a wide interval's lower end is cut at zero
        // rather than pulling the axis below it.
        yl = 0.0;
    }
    let plot = Plot {
        w: 640.0,
        h: 340.0,
        left: 64.0,
        right: 160.0,
        top: 40.0,
        bottom: 44.0,
        x: match (opt.x_scale, opt.x_bytes) {
            (Scale::Log, true) => Axis::bytes_log2(x_label, xl, xh),
            (Scale::Log, false) => Axis::fit(x_label, xl, xh, Scale::Log, false),
            (Scale::Linear, _) => Axis::fit(x_label, xl.min(0.0), xh, Scale::Linear, opt.x_integer),
        },
        y: Axis::fit(y_label, yl, yh, opt.y_scale, false),
    };
    let mut s = plot.open(title, subtitle);
    // Reference lines first, under the data; labels alternate in height so that
    // neighbouring lines (L1d and L1i) do not print on top of each other.
    for (i, (v, label)) in opt.vlines.iter().enumerate() {
        if !plot.x.drawable(*v) || *v < plot.x.min || *v > plot.x.max {
            continue;
        }
        let x = r1(plot.px(*v));
        let y = plot.top + 12.0 + 12.0 * (i % 3) as f64;
        let _ = write!(
            s,
            r##"<path d="M{x} {}V{}" stroke="#7a7a7a" stroke-dasharray="3 3"/><text x="{}" y="{y}" fill="#555555" font-size="10" stroke="#ffffff" stroke-width="3" paint-order="stroke">{}</text>"##,
            plot.top,
            plot.h - plot.bottom,
            x + 3.0,
            esc(label)
        );
    }
    for (i, se) in series.iter().enumerate() {
        let c = color(i);
        let mut pts: Vec<&Point> = se
            .points
            .iter()
            .filter(|p| p.x.is_finite() && plot.y.drawable(p.y))
            .collect();
        // Stable sort: points sharing an x keep their order, and the first of them (the
        // first measured) carries the line; the others are dodged sideways a few pixels
        // so that each marker and error bar stays visible and hoverable.
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        let mut dodge = vec![0.0; pts.len()];
        let mut j = 0;
        while j < pts.len() {
            let k = pts[j..].iter().take_while(|p| p.x == pts[j].x).count();
            for (m, d) in dodge[j..j + k].iter_mut().enumerate() {
                // 0, -7, +7, -14, +14, ... pixels.
                let step = m.div_ceil(2) as f64 * 7.0;
                *d = if m % 2 == 1 { -step } else { step };
            }
            j += k;
        }
        let on_line: Vec<&&Point> = pts
            .iter()
            .zip(&dodge)
            .filter(|(_, d)| **d == 0.0)
            .map(|(p, _)| p)
            .collect();
        if on_line.len() >= 2 {
            let d: Vec<String> = on_line
                .iter()
                .enumerate()
                .map(|(j, p)| {
                    let cmd = if j == 0 { 'M' } else { 'L' };
                    format!("{cmd}{} {}", r1(plot.px(p.x)), r1(plot.py(p.y)))
                })
                .collect();
            let _ = write!(
                s,
                r#"<path d="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
                d.join("")
            );
        }
        for (p, dx) in pts.iter().zip(&dodge) {
            let (x, y) = (r1(plot.px(p.x) + dx), r1(plot.py(p.y)));
            let clip = |v: f64| v.clamp(plot.y.min, plot.y.max);
            if let (Some(lo), Some(hi)) = (p.lo.map(clip), p.hi.map(clip))
                && plot.y.drawable(lo)
                && plot.y.drawable(hi)
            {
                let (a, b) = (r1(plot.py(lo)), r1(plot.py(hi)));
                let _ = write!(
                    s,
                    r#"<path d="M{x} {a}V{b}M{} {a}h8M{} {b}h8" stroke="{c}" fill="none"/>"#,
                    x - 4.0,
                    x - 4.0
                );
            }
            let _ = write!(
                s,
                r##"<circle cx="{x}" cy="{y}" r="3.5" fill="{c}" stroke="#ffffff"><title>{}</title></circle>"##,
                esc(&p.tip)
            );
            if opt.point_labels
                && let Some(l) = &p.label
            {
                // Even series above the point, odd ones below, on a white halo, so that
                // two lines meeting at a point keep both labels readable.
                let dy = if i % 2 == 0 { -6.0 } else { 13.0 };
                // Near the right edge the label goes left of the point, off the legend.
                let (lx, anchor) = if x > plot.w - plot.right - 30.0 {
                    (x - 5.0, "end")
                } else {
                    (x + 5.0, "start")
                };
                let _ = write!(
                    s,
                    r##"<text x="{lx}" y="{}" text-anchor="{anchor}" fill="{c}" font-size="9.5" stroke="#ffffff" stroke-width="3" paint-order="stroke">{}</text>"##,
                    y + dy,
                    esc(l)
                );
            }
        }
    }
    // Legend, right of the plot: one swatch and name per series.
    let lx = plot.w - plot.right + 14.0;
    for (i, se) in series.iter().enumerate() {
        let y = plot.top + 8.0 + 18.0 * i as f64;
        let _ = write!(
            s,
            r#"<path d="M{lx} {y}h18" stroke="{}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            color(i),
            lx + 24.0,
            y + 4.0,
            esc(&shorten(&se.name, 22))
        );
    }
    s.push_str("</svg>");
    Some(s)
}

/// Scatter of `(x, y)` points; with `diagonal` both axes share one range and the line
/// `y = x` is drawn. At most `max_points` are drawn (every k-th, in order), and the
/// subtitle says so; the axes still cover every point.
pub fn scatter(
    title: &str,
    x_label: &str,
    y_label: &str,
    points: &[(f64, f64)],
    diagonal: bool,
    max_points: usize,
) -> Option<String> {
    let all: Vec<f64> = points.iter().flat_map(|&(x, y)| [x, y]).collect();
    let xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.1).collect();
    let fit = |label: &str, vals: &[f64]| -> Option<Axis> {
        let scale = Scale::auto(vals);
        let (lo, hi) = extent(vals.iter().copied())?;
        Some(Axis::fit(label, lo, hi, scale, false))
    };
    let (x, y) = if diagonal {
        let a = fit(x_label, &all)?;
        let mut b = a.clone();
        b.label = y_label.into();
        (a, b)
    } else {
        (fit(x_label, &xs)?, fit(y_label, &ys)?)
    };
    let plot = Plot {
        w: 400.0,
        h: 380.0,
        left: 62.0,
        right: 16.0,
        top: 40.0,
        bottom: 44.0,
        x,
        y,
    };
    let drawable: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(a, b)| plot.x.drawable(a) && plot.y.drawable(b))
        .collect();
    if drawable.is_empty() {
        return None;
    }
    let stride = drawable.len().div_ceil(max_points.max(1));
    let subtitle = if stride > 1 {
        format!("n = {}, 1 point in {} drawn", drawable.len(), stride)
    } else {
        format!("n = {}", drawable.len())
    };
    let mut s = plot.open(title, &subtitle);
    if diagonal {
        let (a, b) = (plot.x.min, plot.x.max);
        let _ = write!(
            s,
            r##"<path d="M{} {}L{} {}" stroke="#888888" stroke-dasharray="5 4" fill="none"/><text x="{}" y="{}" fill="#666666" text-anchor="end">y = x</text>"##,
            r1(plot.px(a)),
            r1(plot.py(a)),
            r1(plot.px(b)),
            r1(plot.py(b)),
            r1(plot.px(b)) - 34.0,
            r1(plot.py(b)) + 12.0
        );
    }
    // Zero-length subpaths with round caps render as dots: far smaller than a
    // <circle> per point, which matters with 10^5 thread creations.
    let mut d = String::new();
    for &(a, b) in drawable.iter().step_by(stride) {
        let _ = write!(d, "M{} {}h0", r1(plot.px(a)), r1(plot.py(b)));
    }
    // Dense clouds need transparency to show where points pile up; sparse ones need
    // ink to be seen at all.
    let opacity = if drawable.len() / stride > 500 {
        0.35
    } else {
        0.7
    };
    let _ = write!(
        s,
        r#"<path d="{d}" stroke="{}" stroke-opacity="{opacity}" stroke-width="3" stroke-linecap="round" fill="none"/>"#,
        color(0)
    );
    s.push_str("</svg>");
    Some(s)
}

/// Histogram of `values`: `bins` bins over the data's range (equal widths, or equal
/// ratios on a log axis), y = share of values in percent, the median marked. `range`
/// widens the x axis, so that two histograms of related series can share one.
pub fn histogram(
    title: &str,
    x_label: &str,
    values: &[f64],
    scale: Scale,
    range: Option<(f64, f64)>,
    bins: usize,
    fill: &str,
) -> Option<String> {
    let vals: Vec<f64> = values
        .iter()
        .copied()
        .filter(|v| v.is_finite() && (scale == Scale::Linear || *v > 0.0))
        .collect();
    let (mut lo, mut hi) = extent(vals.iter().copied())?;
    if let Some((a, b)) = range {
        if a.is_finite() && (scale == Scale::Linear || a > 0.0) {
            lo = lo.min(a);
        }
        if b.is_finite() {
            hi = hi.max(b);
        }
    }
    let bins = bins.max(1);
    let edges: Vec<f64> = if hi == lo {
        vec![lo, hi]
    } else {
        (0..=bins)
            .map(|i| {
                let f = i as f64 / bins as f64;
                match scale {
                    Scale::Linear => lo + f * (hi - lo),
                    Scale::Log => 10f64.powf(lo.log10() + f * (hi.log10() - lo.log10())),
                }
            })
            .collect()
    };
    let counts = bin_counts(&vals, &edges);
    let n = vals.len() as f64;
    let top = counts.iter().copied().max().unwrap_or(0) as f64 / n * 100.0;
    let plot = Plot {
        w: 400.0,
        h: 380.0,
        left: 54.0,
        right: 16.0,
        top: 40.0,
        bottom: 44.0,
        x: Axis::fit(x_label, lo, hi, scale, false),
        y: Axis::fit("% of values", 0.0, top.max(1e-9), Scale::Linear, false),
    };
    let median = smtlab_model::stats::median(&vals)?;
    let dropped = values.len() - vals.len();
    let mut subtitle = format!("n = {}, median {}", vals.len(), tick_label_precise(median));
    if dropped > 0 {
        let _ = write!(subtitle, ", {dropped} not drawable");
    }
    let mut s = plot.open(title, &subtitle);
    let base = plot.py(0.0);
    let mut d = String::new();
    if edges.len() == 2 && edges[0] == edges[1] {
        // Every value equal: one thin bar.
        let x = plot.px(edges[0]);
        let _ = write!(
            d,
            "M{} {}H{}V{}H{}Z",
            r1(x - 2.0),
            r1(base),
            r1(x + 2.0),
            r1(plot.py(100.0)),
            r1(x - 2.0)
        );
    } else {
        for (i, &c) in counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let (a, b) = (plot.px(edges[i]), plot.px(edges[i + 1]));
            let y = plot.py(c as f64 / n * 100.0);
            let _ = write!(
                d,
                "M{} {}V{}H{}V{}Z",
                r1(a),
                r1(base),
                r1(y),
                r1(b),
                r1(base)
            );
        }
    }
    let _ = write!(
        s,
        r##"<path d="{d}" fill="{fill}" fill-opacity="0.8" stroke="#ffffff" stroke-width="0.5"/>"##
    );
    let mx = r1(plot.px(median));
    let _ = write!(
        s,
        r##"<path d="M{mx} {}V{}" stroke="#222222" stroke-dasharray="4 3"/>"##,
        r1(base),
        plot.top
    );
    s.push_str("</svg>");
    Some(s)
}

/// One distribution of a [`cdf_chart`]: its name, values and the text that formats a
/// value for the hover titles (`23.3 us`).
pub struct Dist<'a> {
    pub name: String,
    pub values: Vec<f64>,
    pub fmt: &'a dyn Fn(f64) -> String,
}

/// Empirical cumulative distributions on shared axes, one line per distribution, with
/// the median (circle), the 99th percentile (square) and the maximum (triangle) marked
/// on each. y = share of events at or below x, in percent. `None` when nothing is
/// drawable. Curves are drawn through at most 400 quantiles each, which keeps 10^5
/// events small and loses nothing a reader could see.
pub fn cdf_chart(
    title: &str,
    subtitle: &str,
    x_label: &str,
    dists: &[Dist<'_>],
    scale: Scale,
) -> Option<String> {
    let sorted: Vec<Vec<f64>> = dists
        .iter()
        .map(|d| {
            let mut v: Vec<f64> = d
                .values
                .iter()
                .copied()
                .filter(|v| v.is_finite() && (scale == Scale::Linear || *v > 0.0))
                .collect();
            v.sort_by(f64::total_cmp);
            v
        })
        .collect();
    let (lo, hi) = extent(sorted.iter().flat_map(|v| v.iter().copied()))?;
    let plot = Plot {
        w: 620.0,
        h: 340.0,
        left: 54.0,
        right: 170.0,
        top: 40.0,
        bottom: 44.0,
        x: Axis::fit(x_label, lo, hi, scale, false),
        y: Axis {
            label: "% of events at or below".into(),
            scale: Scale::Linear,
            min: 0.0,
            max: 100.0,
            ticks: vec![0.0, 25.0, 50.0, 75.0, 100.0],
            bytes: false,
        },
    };
    let mut s = plot.open(title, subtitle);
    let q = |v: &[f64], p: f64| -> f64 {
        let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
        v[i.min(v.len() - 1)]
    };
    for (i, (d, v)) in dists.iter().zip(&sorted).enumerate() {
        if v.is_empty() {
            continue;
        }
        let c = color(i);
        let n = v.len();
        let steps = n.min(400);
        let mut path = String::new();
        for k in 0..=steps {
            let share = k as f64 / steps as f64;
            let idx = ((share * n as f64).ceil() as usize).clamp(1, n) - 1;
            let (x, y) = (r1(plot.px(v[idx])), r1(plot.py(share * 100.0)));
            let _ = write!(path, "{}{x} {y}", if k == 0 { 'M' } else { 'L' });
        }
        let _ = write!(
            s,
            r#"<path d="{path}" fill="none" stroke="{c}" stroke-width="2"/>"#
        );
        for (p, shape) in [(50.0, 'o'), (99.0, 's'), (100.0, 't')] {
            let val = if p == 100.0 { v[n - 1] } else { q(v, p) };
            let (x, y) = (r1(plot.px(val)), r1(plot.py(p)));
            let what = match shape {
                'o' => "median",
                's' => "p99",
                _ => "max",
            };
            let tip = format!("{}: {what} {}", d.name, (d.fmt)(val));
            let _ = match shape {
                'o' => write!(
                    s,
                    r##"<circle cx="{x}" cy="{y}" r="4" fill="{c}" stroke="#ffffff"><title>{}</title></circle>"##,
                    esc(&tip)
                ),
                's' => write!(
                    s,
                    r##"<rect x="{}" y="{}" width="8" height="8" fill="{c}" stroke="#ffffff"><title>{}</title></rect>"##,
                    x - 4.0,
                    y - 4.0,
                    esc(&tip)
                ),
                _ => write!(
                    s,
                    r##"<path d="M{x} {}l5 8h-10Z" fill="{c}" stroke="#ffffff"><title>{}</title></path>"##,
                    y - 5.0,
                    esc(&tip)
                ),
            };
        }
    }
    let lx = plot.w - plot.right + 14.0;
    let mut y = plot.top + 8.0;
    for (i, d) in dists.iter().enumerate() {
        let _ = write!(
            s,
            r#"<path d="M{lx} {y}h18" stroke="{}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            color(i),
            lx + 24.0,
            y + 4.0,
            esc(&shorten(&d.name, 22))
        );
        y += 18.0;
    }
    let _ = write!(
        s,
        r##"<g fill="#555555"><circle cx="{}" cy="{}" r="4"/><text x="{}" y="{}">median</text><rect x="{}" y="{}" width="8" height="8"/><text x="{}" y="{}">p99</text><path d="M{} {}l5 8h-10Z"/><text x="{}" y="{}">max</text></g>"##,
        lx + 9.0,
        y + 10.0,
        lx + 24.0,
        y + 14.0,
        lx + 5.0,
        y + 24.0,
        lx + 24.0,
        y + 32.0,
        lx + 9.0,
        y + 41.0,
        lx + 24.0,
        y + 50.0
    );
    s.push_str("</svg>");
    Some(s)
}

/// Four significant digits with SI suffix, for a value quoted in a subtitle.
fn tick_label_precise(v: f64) -> String {
    let a = v.abs();
    for (scale, suffix) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if a >= scale {
            return format!("{}{suffix}", crate::fmt::num(v / scale));
        }
    }
    crate::fmt::num(v)
}

/// A small inline strip for a table cell: a reference line at 1, the 95% interval as a
/// bar and the ratio as a dot, green when the whole interval is above 1, red when below,
/// grey when it straddles 1 or is unknown. The scale is logarithmic, so that 0.5x and 2x
/// lie equally far from 1; `range` (positive) is shared by a table's strips.
pub fn ci_strip(value: f64, lo: Option<f64>, hi: Option<f64>, range: (f64, f64)) -> String {
    let (w, h, pad) = (110.0, 16.0, 5.0);
    let (a, b) = (range.0.max(1e-9).ln(), range.1.max(1e-9).ln());
    let span = if b > a { b - a } else { 1.0 };
    let x = |v: f64| r1(pad + (v.max(1e-9).ln() - a) / span * (w - 2.0 * pad));
    let col = match (lo, hi) {
        (Some(l), _) if l > 1.0 => "#009e73",
        (_, Some(u)) if u < 1.0 => "#d55e00",
        _ => "#777777",
    };
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" class="strip"><path d="M{one} 1V{h1}" stroke="#999999" stroke-dasharray="2 2"/>"##,
        one = x(1.0),
        h1 = h - 1.0
    );
    if let (Some(l), Some(u)) = (lo, hi) {
        let _ = write!(
            s,
            r#"<path d="M{} 8H{}" stroke="{col}" stroke-width="3" stroke-opacity="0.5"/>"#,
            x(l),
            x(u)
        );
    }
    let _ = write!(
        s,
        r#"<circle cx="{}" cy="8" r="3.5" fill="{col}"/></svg>"#,
        x(value)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_are_round_and_cover_the_data() {
        let (lo, hi, t) = nice_linear(0.0, 9.3, 6, false);
        assert_eq!((lo, hi), (0.0, 10.0));
        assert_eq!(t, vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let (lo, hi, t) = nice_linear(0.12, 0.87, 6, false);
        assert_eq!((lo, hi), (0.0, 1.0));
        // 3 * 0.2 is 0.6000000000000001 in floating point; the label is not.
        assert_eq!(tick_label(t[3]), "0.6");
        // Thread counts 1..3 would get 0.5 steps; integer axes do not.
        let (_, _, t) = nice_linear(0.0, 3.0, 6, true);
        assert_eq!(t, vec![0.0, 1.0, 2.0, 3.0]);
        // A single value still gets a range around it.
        let (lo, hi, _) = nice_linear(5.0, 5.0, 6, false);
        assert!(lo < 5.0 && hi > 5.0);
    }

    #[test]
    fn log_ticks_are_decades_with_fill_in_when_few() {
        let (lo, hi, t) = log_ticks(3.0, 4000.0);
        assert_eq!((lo, hi), (2.0, 5000.0));
        assert_eq!(t, vec![2.0, 10.0, 100.0, 1000.0, 5000.0]);
        let (_, _, t) = log_ticks(1.0, 1000.0);
        assert_eq!(t, vec![1.0, 10.0, 100.0, 1000.0]);
        let (lo, hi, t) = log_ticks(150.0, 900.0);
        assert_eq!((lo, hi), (100.0, 1000.0));
        assert_eq!(t, vec![100.0, 200.0, 500.0, 1000.0]);
        let (lo, hi, t) = log_ticks(5200.0, 910_000.0);
        assert_eq!((lo, hi), (5000.0, 1e6));
        assert_eq!(t.len(), 8);
        // One value still gets a range.
        let (lo, hi, _) = log_ticks(100.0, 100.0);
        assert!(lo <= 100.0 && hi > 100.0);
        assert_eq!(Scale::auto(&[1.0, 50.0]), Scale::Linear);
        assert_eq!(Scale::auto(&[1.0, 500.0]), Scale::Log);
        assert_eq!(Scale::auto(&[0.0, 500.0]), Scale::Linear);
    }

    #[test]
    fn bins_follow_rice_rule_within_limits() {
        assert_eq!(bins_for(3), 5);
        assert_eq!(bins_for(1000), 20);
        assert_eq!(bins_for(100_000), 60);
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(2.0), "2");
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(tick_label(1500.0), "1.5k");
        assert_eq!(tick_label(10_000_000.0), "10M");
        assert_eq!(tick_label(-2000.0), "-2k");
    }

    #[test]
    fn bins_count_every_value_once() {
        let edges = [0.0, 1.0, 2.0, 3.0];
        let vals = [0.0, 0.5, 1.0, 2.9, 3.0, -1.0, 4.0, f64::NAN];
        assert_eq!(bin_counts(&vals, &edges), vec![2, 1, 2]);
        assert_eq!(bin_counts(&vals, &[1.0]), Vec::<usize>::new());
    }

    #[test]
    fn empty_data_draws_nothing() {
        let opt = LineOptions {
            y_zero: true,
            x_integer: true,
            ..LineOptions::default()
        };
        assert_eq!(line_chart("t", "", "x", "y", &[], &opt), None);
        let empty = Series {
            name: "s".into(),
            points: vec![],
        };
        assert_eq!(line_chart("t", "", "x", "y", &[empty], &opt), None);
        assert_eq!(scatter("t", "x", "y", &[], true, 10), None);
        assert_eq!(
            histogram("t", "x", &[f64::NAN], Scale::Linear, None, 10, "#000"),
            None
        );
    }

    #[test]
    fn charts_draw_marks_and_escape_text() {
        let s = Series {
            name: "a<b".into(),
            points: (1..=4)
                .map(|i| Point {
                    x: i as f64,
                    y: 10.0 * i as f64,
                    lo: Some(9.0 * i as f64),
                    hi: Some(11.0 * i as f64),
                    tip: format!("{i} & more"),
                    label: None,
                })
                .collect(),
        };
        let opt = LineOptions {
            y_zero: true,
            x_integer: true,
            ..LineOptions::default()
        };
        let svg = line_chart("T & <U>", "sub", "threads", "GOPS", &[s], &opt).unwrap();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains("T &amp; &lt;U&gt;"));
        assert!(svg.contains("a&lt;b"));
        assert!(svg.contains("1 &amp; more"));
        assert!(!svg.contains("a<b"));
    }

    #[test]
    fn scatter_thins_points_and_says_so() {
        let pts: Vec<(f64, f64)> = (1..=1000).map(|i| (i as f64, i as f64 * 1.1)).collect();
        let svg = scatter("s", "A", "B", &pts, true, 100).unwrap();
        assert!(svg.contains("n = 1000, 1 point in 10 drawn"), "{svg}");
        assert_eq!(svg.matches("h0").count(), 100);
        assert!(svg.contains("y = x"));
        // Three decades: both axes logarithmic.
        assert!(svg.contains("A (log scale)"));
    }

    #[test]
    fn histogram_marks_the_median_and_handles_constant_data() {
        let vals: Vec<f64> = (0..100).map(f64::from).collect();
        let svg = histogram("h", "ns", &vals, Scale::Linear, None, 10, "#0072b2").unwrap();
        assert!(svg.contains("n = 100, median 49.50"), "{svg}");
        assert_eq!(svg.matches('Z').count(), 10);
        let svg = histogram("h", "ns", &[5.0; 10], Scale::Linear, None, 10, "#000").unwrap();
        assert!(svg.contains("median 5.000"));
    }

    #[test]
    fn ci_strip_colours_by_interval() {
        assert!(ci_strip(1.2, Some(1.1), Some(1.3), (0.5, 1.5)).contains("#009e73"));
        assert!(ci_strip(0.8, Some(0.7), Some(0.9), (0.5, 1.5)).contains("#d55e00"));
        assert!(ci_strip(1.0, Some(0.9), Some(1.1), (0.5, 1.5)).contains("#777777"));
        assert!(ci_strip(1.0, None, None, (0.5, 1.5)).contains("#777777"));
    }
}
