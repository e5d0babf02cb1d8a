//! Distributions: empirical CDFs, one curve per series.

use std::fmt::Write;

use maud::{Markup, html};

use super::*;

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
    let curves: Vec<Markup> = (dists.iter().zip(&sorted).enumerate())
        .filter(|(_, (_, v))| !v.is_empty())
        .map(|(i, (d, v))| curve(&plot, i, d, v))
        .collect();
    let lx = plot.w - plot.right + 14.0;
    // The key of the marks, under the legend's rows.
    let y = plot.top + 8.0 + 18.0 * dists.len() as f64;
    let body = html! {
        @for c in &curves { (c) }
        @for (i, d) in dists.iter().enumerate() {
            (legend_row(lx, plot.top + 8.0 + 18.0 * i as f64, i, &d.name))
        }
        g fill="#555555" {
            circle cx=(lx + 9.0) cy=(y + 10.0) r="4" {}
            text x=(lx + 24.0) y=(y + 14.0) { "median" }
            rect x=(lx + 5.0) y=(y + 24.0) width="8" height="8" {}
            text x=(lx + 24.0) y=(y + 32.0) { "p99" }
            path d=(format!("M{} {}l5 8h-10Z", lx + 9.0, y + 41.0)) {}
            text x=(lx + 24.0) y=(y + 50.0) { "max" }
        }
    };
    Some(plot.svg(title, subtitle, body))
}

/// Distribution `i` (`v` its finite values, sorted, not empty): the curve, then its
/// median (circle), 99th percentile (square) and maximum (triangle), each with its
/// value on hover.
fn curve(plot: &Plot, i: usize, d: &Dist<'_>, v: &[f64]) -> Markup {
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
    let mark = |p: f64| {
        let val = if p == 100.0 { v[n - 1] } else { pct_of(v, p) };
        (r1(plot.px(val)), r1(plot.py(p)), val)
    };
    let tip = |what: &str, val: f64| format!("{}: {what} {}", d.name, (d.fmt)(val));
    let ((mx, my, median), (px, py, p99), (tx, ty, max)) = (mark(50.0), mark(99.0), mark(100.0));
    html! {
        path d=(path) fill="none" stroke=(c) stroke-width="2" {}
        circle cx=(mx) cy=(my) r="4" fill=(c) stroke="#ffffff" {
            title { (Esc(&tip("median", median))) }
        }
        rect x=(px - 4.0) y=(py - 4.0) width="8" height="8" fill=(c) stroke="#ffffff" {
            title { (Esc(&tip("p99", p99))) }
        }
        path d=(format!("M{tx} {}l5 8h-10Z", ty - 5.0)) fill=(c) stroke="#ffffff" {
            title { (Esc(&tip("max", max))) }
        }
    }
}

/// The `p`th percentile of `sorted` (not empty): the nearest rank.
pub(crate) fn pct_of(sorted: &[f64], p: f64) -> f64 {
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
