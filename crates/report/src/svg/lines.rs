//! Charts of points: lines through them, a scatter, and the inline interval strip.

use std::fmt::Write;

use maud::{Markup, html};

use super::*;

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
    let plot = line_plot(x_label, y_label, series, opt)?;
    // Point labels placed so far, as (x0, x1, y0, y1) boxes.
    let mut placed: Vec<(f64, f64, f64, f64)> = Vec::new();
    let lines: Vec<Markup> = (series.iter().enumerate())
        .map(|(i, se)| series_line(&plot, i, se, opt, &mut placed))
        .collect();
    // Legend, right of the plot: one swatch and name per series.
    let lx = plot.w - plot.right + 14.0;
    let body = html! {
        (reference_lines(&plot, opt))
        @for l in &lines { (l) }
        @for (i, se) in series.iter().enumerate() {
            (legend_row(lx, plot.top + 8.0 + 18.0 * i as f64, i, &se.name))
        }
    };
    Some(plot.svg(title, subtitle, body))
}

/// The geometry of a line chart: axes over every drawable point and its interval.
fn line_plot(x_label: &str, y_label: &str, series: &[Series], opt: &LineOptions) -> Option<Plot> {
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
    Some(Plot {
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
    })
}

/// Reference lines, drawn first, under the data; labels alternate in height so that
/// neighbouring lines (L1d and L1i) do not print on top of each other.
fn reference_lines(plot: &Plot, opt: &LineOptions) -> Markup {
    let shown = |v: f64| plot.x.drawable(v) && v >= plot.x.min && v <= plot.x.max;
    html! {
        @for (i, (v, label)) in opt.vlines.iter().enumerate().filter(|(_, (v, _))| shown(*v)) {
            @let x = r1(plot.px(*v));
            path d=(format!("M{x} {}V{}", plot.top, plot.h - plot.bottom)) stroke="#7a7a7a"
                stroke-dasharray="3 3" {}
            text x=(x + 3.0) y=(plot.top + 12.0 + 12.0 * (i % 3) as f64) fill="#555555"
                font-size="10" stroke="#ffffff" stroke-width="3" paint-order="stroke" {
                (Esc(label))
            }
        }
    }
}

/// Series `i`: its line, markers, error bars and point labels.
fn series_line(
    plot: &Plot,
    i: usize,
    se: &Series,
    opt: &LineOptions,
    placed: &mut Vec<(f64, f64, f64, f64)>,
) -> Markup {
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
    let dodge = dodges(&pts);
    let on_line: Vec<&&Point> = pts
        .iter()
        .zip(&dodge)
        .filter(|(_, d)| **d == 0.0)
        .map(|(p, _)| p)
        .collect();
    let line: String = (on_line.iter().enumerate())
        .map(|(j, p)| {
            let cmd = if j == 0 { 'M' } else { 'L' };
            format!("{cmd}{} {}", r1(plot.px(p.x)), r1(plot.py(p.y)))
        })
        .collect();
    let mut points = Vec::with_capacity(pts.len());
    for (p, dx) in pts.iter().zip(&dodge) {
        let (x, y) = (r1(plot.px(p.x) + dx), r1(plot.py(p.y)));
        let label = (opt.point_labels)
            .then_some(p.label.as_ref())
            .flatten()
            .map(|l| point_label(plot, i, (x, y), l, placed));
        points.push(html! {
            @if let Some((a, b)) = error_bar(plot, p) {
                path d=(format!("M{x} {a}V{b}M{} {a}h8M{} {b}h8", x - 4.0, x - 4.0))
                    stroke=(c) fill="none" {}
            }
            circle cx=(x) cy=(y) r="3.5" fill=(c) stroke="#ffffff" { title { (Esc(&p.tip)) } }
            @if let Some(l) = label { (l) }
        });
    }
    html! {
        @if on_line.len() >= 2 {
            path d=(line) fill="none" stroke=(c) stroke-width="2" {}
        }
        @for p in &points { (p) }
    }
}

/// The ends of a point's error bar in pixels (clipped to the y axis), where it has one
/// that can be drawn.
fn error_bar(plot: &Plot, p: &Point) -> Option<(f64, f64)> {
    let clip = |v: f64| v.clamp(plot.y.min, plot.y.max);
    let (lo, hi) = (clip(p.lo?), clip(p.hi?));
    (plot.y.drawable(lo) && plot.y.drawable(hi)).then(|| (r1(plot.py(lo)), r1(plot.py(hi))))
}

/// Sideways pixel offsets of points sorted by x: 0 for the first at each x, then
/// -7, +7, -14, +14, ...
fn dodges(pts: &[&Point]) -> Vec<f64> {
    let mut dodge = vec![0.0; pts.len()];
    let mut j = 0;
    while j < pts.len() {
        let k = pts[j..].iter().take_while(|p| p.x == pts[j].x).count();
        for (m, d) in dodge[j..j + k].iter_mut().enumerate() {
            let step = m.div_ceil(2) as f64 * 7.0;
            *d = if m % 2 == 1 { -step } else { step };
        }
        j += k;
    }
    dodge
}

/// The label of a point of series `i` drawn at `(x, y)`, clear of those `placed`.
fn point_label(
    plot: &Plot,
    i: usize,
    (x, y): (f64, f64),
    l: &str,
    placed: &mut Vec<(f64, f64, f64, f64)>,
) -> Markup {
    // Near the right edge the label goes left of the point, off the legend.
    let width = label_width(l);
    let (lx, anchor, x0) = if x > plot.w - plot.right - 30.0 {
        (x - 5.0, "end", x - 5.0 - width)
    } else {
        (x + 5.0, "start", x + 5.0)
    };
    // Even series above the point, odd ones below, on a white halo, so that
    // two lines meeting at a point keep both labels readable; a label that
    // would touch one already placed moves further out until it is clear.
    const ABOVE: [f64; 4] = [-6.0, -17.0, -28.0, -39.0];
    const BELOW: [f64; 4] = [13.0, 24.0, 35.0, 46.0];
    let (near, far) = if i.is_multiple_of(2) {
        (ABOVE, BELOW)
    } else {
        (BELOW, ABOVE)
    };
    let clear = |dy: f64| {
        let (y0, y1) = (y + dy - 9.0, y + dy + 2.0);
        !placed
            .iter()
            .any(|&(a0, a1, b0, b1)| x0 < a1 && a0 < x0 + width && y0 < b1 && b0 < y1)
    };
    let dy = near
        .into_iter()
        .chain(far)
        .find(|&dy| clear(dy))
        .unwrap_or(near[0]);
    placed.push((x0, x0 + width, y + dy - 9.0, y + dy + 2.0));
    html! {
        text x=(lx) y=(y + dy) text-anchor=(anchor) fill=(color(i)) font-size="9.5"
            stroke="#ffffff" stroke-width="3" paint-order="stroke" { (Esc(l)) }
    }
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
    let (a, b) = (plot.x.min, plot.x.max);
    let (ax, ay, bx, by) = (
        r1(plot.px(a)),
        r1(plot.py(a)),
        r1(plot.px(b)),
        r1(plot.py(b)),
    );
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
    let body = html! {
        @if diagonal {
            path d=(format!("M{ax} {ay}L{bx} {by}")) stroke="#888888" stroke-dasharray="5 4"
                fill="none" {}
            text x=(bx - 34.0) y=(by + 12.0) fill="#666666" text-anchor="end" { "y = x" }
        }
        path d=(d) stroke=(color(0)) stroke-opacity=(opacity) stroke-width="3"
            stroke-linecap="round" fill="none" {}
    };
    Some(plot.svg(title, &subtitle, body))
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
    html! {
        svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {w} {h}")) width=(w)
            height=(h) class="strip" {
            path d=(format!("M{} 1V{}", x(1.0), h - 1.0)) stroke="#999999"
                stroke-dasharray="2 2" {}
            @if let (Some(l), Some(u)) = (lo, hi) {
                path d=(format!("M{} 8H{}", x(l), x(u))) stroke=(col) stroke-width="3"
                    stroke-opacity="0.5" {}
            }
            circle cx=(x(value)) cy="8" r="3.5" fill=(col) {}
        }
    }
    .into_string()
}

/// About how wide a point label of 9.5 px type is.
fn label_width(text: &str) -> f64 {
    text.chars().count() as f64 * 9.5 * 0.58
}
