//! Several hosts on one chart (paper 002's Figs 3-4 and 8-9, which compare machines):
//! each workload's throughput against its thread count, one line per host (per CPU
//! model, the median host, where the fleet has more hosts than a chart can tell
//! apart); each per-event series (thread creation, wake-ups, requests) as one
//! cumulative distribution per host (or per CPU model, its median host); and each
//! yield's spread over the hosts of every CPU model as cumulative distributions.
//! Drawn with the report's own charts ([`crate::svg`]).

use std::collections::BTreeMap;

use serde::Serialize;
use smtlab_model::stats::{median, median_ci95};
use smtlab_model::{CellRecord, RunResults};

use crate::svg::{self, Dist, LineOptions, Point, Scale, Series};

/// Most lines on one chart before hosts are drawn per CPU model (the legend's colours
/// repeat beyond it).
pub const MAX_HOST_LINES: usize = 8;

/// The parameter a scaling curve runs along.
const THREADS: &str = "threads";

/// A workload's curve key: benchmark, its parameters and conditions without `threads`,
/// placement.
type CurveKey = (String, BTreeMap<String, String>, String);

/// One host's curve: its CPU model, the unit, and the mean at each thread count.
#[derive(Debug, Clone)]
struct HostCurve {
    model: String,
    unit: String,
    points: BTreeMap<u64, f64>,
}

/// A per-event series' key: benchmark, parameters and conditions, placement, series.
type EventKey = (String, BTreeMap<String, String>, String, String);

/// Events a series needs to be drawn: fewer make a staircase, not a distribution.
const MIN_EVENTS: usize = 10;

/// One host's events of a series, in brief (`series_in_brief`), and its CPU model.
#[derive(Debug, Clone)]
struct HostEvents {
    model: String,
    points: Vec<f64>,
}

/// Each host's scaling curves and event distributions, gathered from its latest run
/// holding each.
#[derive(Debug, Default)]
pub(super) struct Gather {
    curves: BTreeMap<CurveKey, BTreeMap<String, HostCurve>>,
    events: BTreeMap<EventKey, BTreeMap<String, HostEvents>>,
}

/// What [`Gather::finish`] draws.
#[derive(Debug, Default)]
pub struct Overlays {
    pub curves: Vec<Curve>,
    pub distributions: Vec<Distribution>,
}

impl Gather {
    /// The curves of `r` (host key `host`, CPU model `model`): its cells with a numeric
    /// `threads` parameter, replacing the host's earlier curve of each workload.
    pub(super) fn add(&mut self, r: &RunResults, host: &str, model: &str) {
        let mut mine: BTreeMap<CurveKey, HostCurve> = BTreeMap::new();
        for c in &r.cells {
            let Some((key, threads)) = curve_point(c) else {
                continue;
            };
            mine.entry(key)
                .or_insert_with(|| HostCurve {
                    model: model.to_string(),
                    unit: c.unit.clone(),
                    points: BTreeMap::new(),
                })
                .points
                .insert(threads, c.result.summary.mean);
        }
        for (key, curve) in mine.into_iter().filter(|(_, c)| c.points.len() >= 2) {
            self.curves
                .entry(key)
                .or_default()
                .insert(host.to_string(), curve);
        }
        for c in &r.cells {
            for (name, events) in c
                .result
                .series
                .iter()
                .filter(|(_, e)| e.len() >= MIN_EVENTS)
            {
                let key = (
                    c.benchmark.clone(),
                    c.flat_params(),
                    c.placement_spec.clone(),
                    name.clone(),
                );
                let points = smtlab_model::digest::series_in_brief(events);
                self.events.entry(key).or_default().insert(
                    host.to_string(),
                    HostEvents {
                        model: model.to_string(),
                        points,
                    },
                );
            }
        }
    }

    /// The curves and distributions drawn: per host where a workload has at most
    /// [`MAX_HOST_LINES`] hosts, else per CPU model (for curves, the hosts' median at
    /// each thread count, with its order-statistic interval from 6 hosts; for
    /// distributions, the hosts' median at each percentile). `names`: each host key's
    /// name as shown.
    pub(super) fn finish(self, names: &BTreeMap<String, String>) -> Overlays {
        let distributions = distributions(self.events, names);
        Overlays {
            curves: curves(self.curves, names),
            distributions,
        }
    }
}

/// The scaling curves of [`Gather::finish`].
fn curves(
    gathered: BTreeMap<CurveKey, BTreeMap<String, HostCurve>>,
    names: &BTreeMap<String, String>,
) -> Vec<Curve> {
    let mut out = Vec::new();
    for ((benchmark, params, placement), by_host) in gathered {
        let Some(unit) = by_host.values().next().map(|c| c.unit.clone()) else {
            continue;
        };
        let per_host = by_host.len() <= MAX_HOST_LINES;
        let lines = if per_host {
            host_lines(&by_host, names, |c| {
                let point = |(&threads, &value): (&u64, &f64)| CurvePoint {
                    threads,
                    value,
                    ci_low: None,
                    ci_high: None,
                };
                c.points.iter().map(point).collect()
            })
        } else {
            model_lines(&by_host)
        };
        out.push(Curve {
            benchmark,
            params,
            placement,
            unit,
            per_host,
            lines,
        });
    }
    out
}

/// The curve a cell is a point of, and its thread count.
fn curve_point(c: &CellRecord) -> Option<(CurveKey, u64)> {
    let threads = c.params.get(THREADS)?.parse::<u64>().ok()?;
    let mut params = c.flat_params();
    params.remove(THREADS);
    let v = c.result.summary.mean;
    (v.is_finite() && c.result.summary.n > 0).then(|| {
        (
            (c.benchmark.clone(), params, c.placement_spec.clone()),
            threads,
        )
    })
}

/// One line per CPU model: the median over its hosts at each thread count.
fn model_lines(by_host: &BTreeMap<String, HostCurve>) -> Vec<CurveLine> {
    let mut per_model: BTreeMap<&str, (usize, BTreeMap<u64, Vec<f64>>)> = BTreeMap::new();
    for c in by_host.values() {
        let m = per_model.entry(c.model.as_str()).or_default();
        m.0 += 1;
        for (&x, &y) in &c.points {
            m.1.entry(x).or_default().push(y);
        }
    }
    per_model
        .into_iter()
        .map(|(model, (hosts, xs))| CurveLine {
            // The legend shortens long names: the model alone, the count in `hosts`.
            name: model.to_string(),
            hosts,
            points: xs
                .into_iter()
                .filter_map(|(x, ys)| {
                    let ci = median_ci95(&ys);
                    Some(CurvePoint {
                        threads: x,
                        value: median(&ys)?,
                        ci_low: ci.map(|c| c.ci_low),
                        ci_high: ci.map(|c| c.ci_high),
                    })
                })
                .collect(),
        })
        .collect()
}

/// A workload's throughput against its thread count on several hosts.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    pub benchmark: String,
    /// Parameters and conditions but `threads`.
    pub params: BTreeMap<String, String>,
    pub placement: String,
    pub unit: String,
    /// One line per host (else one per CPU model).
    pub per_host: bool,
    pub lines: Vec<CurveLine>,
}

/// One host's line, or one CPU model's median line: of a curve ([`CurveLine`]) or of a
/// distribution ([`DistributionLine`]).
#[derive(Debug, Clone, Serialize)]
pub struct Line<P> {
    pub name: String,
    /// Hosts behind the line.
    pub hosts: usize,
    pub points: Vec<P>,
}

/// A curve's line: the mean (or the hosts' median) at each thread count.
pub type CurveLine = Line<CurvePoint>;

/// One host's events, or one CPU model's median host's, in brief: the events
/// themselves, sorted, up to 101 of them, else the percentiles 0 to 100.
pub type DistributionLine = Line<f64>;

/// One line per host, each its name as shown (`names`), its points by `points`.
fn host_lines<H, P>(
    by_host: &BTreeMap<String, H>,
    names: &BTreeMap<String, String>,
    points: impl Fn(&H) -> Vec<P>,
) -> Vec<Line<P>> {
    by_host
        .iter()
        .map(|(key, h)| Line {
            name: names.get(key).cloned().unwrap_or_else(|| key.clone()),
            hosts: 1,
            points: points(h),
        })
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct CurvePoint {
    pub threads: u64,
    pub value: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci_high: Option<f64>,
}

/// The event distributions of [`Gather::finish`]: each series two hosts or more hold.
fn distributions(
    gathered: BTreeMap<EventKey, BTreeMap<String, HostEvents>>,
    names: &BTreeMap<String, String>,
) -> Vec<Distribution> {
    let mut out = Vec::new();
    for ((benchmark, params, placement, series), by_host) in gathered {
        if by_host.len() < 2 {
            continue;
        }
        let per_host = by_host.len() <= MAX_HOST_LINES;
        let lines = if per_host {
            host_lines(&by_host, names, |h| h.points.clone())
        } else {
            model_distributions(&by_host)
        };
        out.push(Distribution {
            benchmark,
            params,
            placement,
            series,
            per_host,
            lines,
        });
    }
    out
}

/// One distribution per CPU model: at each percentile, the median of its hosts'.
fn model_distributions(by_host: &BTreeMap<String, HostEvents>) -> Vec<DistributionLine> {
    let mut per_model: BTreeMap<&str, Vec<Vec<f64>>> = BTreeMap::new();
    for h in by_host.values() {
        // At the percentiles, so that hosts with few events line up with the rest.
        let at = |p: usize| smtlab_model::stats::percentile(&h.points, p as f64);
        let points = (0..smtlab_model::digest::SERIES_POINTS)
            .filter_map(at)
            .collect();
        per_model.entry(h.model.as_str()).or_default().push(points);
    }
    per_model
        .into_iter()
        .map(|(model, hosts)| DistributionLine {
            name: model.to_string(),
            hosts: hosts.len(),
            points: (0..smtlab_model::digest::SERIES_POINTS)
                .filter_map(|i| {
                    median(
                        &hosts
                            .iter()
                            .filter_map(|h| h.get(i).copied())
                            .collect::<Vec<_>>(),
                    )
                })
                .collect(),
        })
        .collect()
}

/// A per-event series on several hosts: one cumulative distribution per host (or per
/// CPU model).
#[derive(Debug, Clone, Serialize)]
pub struct Distribution {
    pub benchmark: String,
    /// Parameters and conditions.
    pub params: BTreeMap<String, String>,
    pub placement: String,
    /// The series' name (`create_to_run_ns`, ...).
    pub series: String,
    /// One line per host (else one per CPU model).
    pub per_host: bool,
    pub lines: Vec<DistributionLine>,
}

/// A distribution's chart, every line on it; `line_of` says what one line is when
/// each stands for one of the runs given (`host` in a fleet, `run` in a compare).
pub fn distribution_svg(d: &Distribution, line_of: &str) -> Option<String> {
    let fmt = |v: f64| crate::fmt::short(v);
    let dists: Vec<Dist<'_>> = d
        .lines
        .iter()
        .map(|l| Dist {
            name: l.name.clone(),
            values: l.points.clone(),
            fmt: &fmt,
        })
        .collect();
    let all: Vec<f64> = d
        .lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .collect();
    let title = with_params(
        format!("{} on {}: {}", d.benchmark, d.placement, d.series),
        &d.params,
    );
    let subtitle = if d.per_host {
        format!("one line per {line_of}")
    } else {
        "one line per CPU model: its hosts' median at each percentile".to_string()
    };
    svg::cdf_chart(&title, &subtitle, &d.series, &dists, Scale::auto(&all))
}

/// `title (k=v k=v)`: a chart's title with every parameter, where there are any.
fn with_params(title: String, params: &BTreeMap<String, String>) -> String {
    let words: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if words.is_empty() {
        title
    } else {
        format!("{title} ({})", words.join(" "))
    }
}

/// A curve's chart, every line on it; `line_of` as for [`distribution_svg`].
pub fn scaling_svg(c: &Curve, line_of: &str) -> Option<String> {
    let series: Vec<Series> = c
        .lines
        .iter()
        .map(|l| Series {
            name: l.name.clone(),
            points: l
                .points
                .iter()
                .map(|p| {
                    Point::new(
                        p.threads as f64,
                        p.value,
                        (p.ci_low, p.ci_high),
                        format!(
                            "{}: {} threads, {:.4} {}",
                            l.name, p.threads, p.value, c.unit
                        ),
                    )
                })
                .collect(),
        })
        .collect();
    let title = with_params(format!("{} on {}", c.benchmark, c.placement), &c.params);
    let subtitle = if c.per_host {
        format!("one line per {line_of}")
    } else {
        "one line per CPU model: the median host, with its 95% interval".to_string()
    };
    let opt = LineOptions {
        y_zero: true,
        x_integer: true,
        ..LineOptions::default()
    };
    svg::line_chart(&title, &subtitle, "threads", &c.unit, &series, &opt)
}

/// A yield's spread over the hosts of each CPU model, one cumulative curve per model.
/// `None` with fewer than two models holding it.
pub(super) fn yield_cdf_svg(
    workload: &str,
    placements: &str,
    per_model: &[(String, Vec<f64>)],
) -> Option<String> {
    if per_model.len() < 2 {
        return None;
    }
    let fmt = |v: f64| format!("{v:.3}x");
    let dists: Vec<Dist<'_>> = per_model
        .iter()
        .map(|(m, vs)| Dist {
            name: format!("{m} ({})", smtlab_model::unit::plural(vs.len(), "host")),
            values: vs.clone(),
            fmt: &fmt,
        })
        .collect();
    svg::cdf_chart(
        &format!("{workload}: {placements} over hosts"),
        "share of each CPU model's hosts at or below a yield (above 1: better with SMT)",
        "SMT yield",
        &dists,
        Scale::Linear,
    )
}
