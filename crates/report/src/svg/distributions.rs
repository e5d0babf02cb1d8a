//! Distributions: empirical CDFs, one curve per series.

use std::fmt::Write;

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
    let mut s = plot.open(title, subtitle);
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
            let val = if p == 100.0 { v[n - 1] } else { pct_of(v, p) };
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
        legend_row(&mut s, lx, y, i, &d.name);
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

/// The `p`th percentile of `sorted` (not empty): the nearest rank.
pub(crate) fn pct_of(sorted: &[f64], p: f64) -> f64 {
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
