//! Reported utilisation against capacity (`smtlab util`, paper 004 s7): for each step of
//! the open-loop load, the throughput offered and achieved, the achieved share of the
//! measured maximum, and where the placement CPUs' `/proc/stat` time went (user,
//! system, iowait, idle apart, as 004's Table 1).
//!
//! Cells are those with an offered rate among their conditions (`Conditions::rate`:
//! `max` or the percentage of the maximum offered), whatever the workload is called,
//! and the SMT state the step ran in (`Conditions::smt`); the sample metrics
//! ([`smtlab_model::metrics::util`]) carry the tick fractions.

use std::fmt::Write;

use serde::{Deserialize, Serialize};
use smtlab_model::keys::OfferedRate;
use smtlab_model::metrics::util as m;
use smtlab_model::stats::{self, Ratio};
use smtlab_model::{CellRecord, RunResults};

use crate::fmt::num;
use crate::svg::{LineOptions, Point, Series, line_chart};
use crate::table::Table;

/// One step of the curve, means over its samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UtilPoint {
    pub smt: String,
    pub placement: String,
    /// Percentage of the maximum offered; `None` for the maximum itself.
    pub offered_pct: Option<f64>,
    pub offered_per_s: Option<f64>,
    pub achieved_per_s: f64,
    /// Achieved throughput over the maximum of the same SMT state, with its interval.
    pub of_max: Option<Ratio>,
    pub user: f64,
    pub system: f64,
    pub iowait: f64,
    /// irq, softirq, steal.
    pub other: f64,
    pub idle: f64,
}

impl UtilPoint {
    /// What a utilisation tool would call busy: everything but idle and iowait.
    pub fn busy(&self) -> f64 {
        self.user + self.system + self.other
    }
}

fn metric_mean(c: &CellRecord, key: &str) -> f64 {
    crate::html_workloads::cells::metric(c, key).unwrap_or(f64::NAN)
}

/// The curve points of every open-loop cell, per SMT state in cell order.
pub fn curve(cells: &[CellRecord]) -> Vec<UtilPoint> {
    let ours: Vec<&CellRecord> = cells
        .iter()
        .filter(|c| c.conditions.rate.is_some())
        .collect();
    let smt_of = |c: &CellRecord| c.smt().map(|s| s.name().to_string()).unwrap_or_default();
    ours.iter()
        .map(|c| {
            let smt = smt_of(c);
            let max = ours
                .iter()
                .find(|m| smt_of(m) == smt && m.conditions.rate == Some(OfferedRate::Max));
            let offered_pct = c
                .conditions
                .rate
                .and_then(OfferedRate::percent)
                .map(f64::from);
            let offered = metric_mean(c, m::OFFERED_PER_S);
            UtilPoint {
                smt,
                placement: c.placement.name.clone(),
                offered_pct,
                offered_per_s: offered.is_finite().then_some(offered),
                achieved_per_s: c.result.summary.mean,
                of_max: max.and_then(|m| stats::ratio(&c.result.summary, &m.result.summary)),
                user: metric_mean(c, m::USER_FRAC),
                system: metric_mean(c, m::SYSTEM_FRAC),
                iowait: metric_mean(c, m::IOWAIT_FRAC),
                other: metric_mean(c, m::OTHER_FRAC),
                idle: metric_mean(c, m::IDLE_FRAC),
            }
        })
        .collect()
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.1}", 100.0 * x)
    } else {
        "-".into()
    }
}

/// The curve as terminal text within 80 columns: a heading per SMT state and placement,
/// one row per rate (offered, achieved, share of the maximum, busy), and the CPU time
/// by kind on a line of its own below each row.
pub fn curve_text(points: &[UtilPoint]) -> String {
    let mut out = String::new();
    // The points of each SMT state and placement, in order.
    let by_state = crate::grouped(points, |p| (p.smt.as_str(), p.placement.as_str()));
    for (i, ((state, placement), rows)) in by_state.into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "SMT {state}, {placement}:");
        let mut t = Table::new([
            "offered",
            "offered jobs/s",
            "achieved jobs/s",
            "% of max [95% CI]",
            "busy %",
        ])
        .right(&[1, 2, 3, 4]);
        for p in rows {
            let [offered, rate, achieved, of_max, busy, shares @ ..] = columns(p);
            let kinds = ["user", "system", "iowait", "idle"].iter().zip(&shares);
            let detail: Vec<String> = kinds.map(|(k, v)| format!("{k} {v} %")).collect();
            t.row_with_detail([offered, rate, achieved, of_max, busy], detail.join(", "));
        }
        out.push_str(&t.render());
    }
    out
}

/// The curve as an HTML table, one row per SMT state, placement and rate.
pub fn curve_html(points: &[UtilPoint]) -> maud::Markup {
    maud::html! {
        table {
            tr {
                th { "SMT" } th { "placement" } th { "offered" } th { "offered jobs/s" }
                th { "achieved jobs/s" } th { "% of max [95% CI]" } th { "busy %" }
                th { "user %" } th { "system %" } th { "iowait %" } th { "idle %" }
            }
            @for p in points {
                @let [offered, figures @ ..] = columns(p);
                tr {
                    td { (p.smt) } td { (p.placement) } td { (offered) }
                    @for f in &figures { td class="num" { (f) } }
                }
            }
        }
    }
}

/// A point as both tables show it: offered, offered and achieved jobs/s, % of the
/// maximum, then busy, user, system, iowait and idle %.
fn columns(p: &UtilPoint) -> [String; 9] {
    [
        p.offered_pct.map_or("max".into(), |x| format!("{x:.0}%")),
        p.offered_per_s.map_or("-".into(), num),
        num(p.achieved_per_s),
        of_max(p),
        pct(p.busy()),
        pct(p.user),
        pct(p.system),
        pct(p.iowait),
        pct(p.idle),
    ]
}

fn of_max(p: &UtilPoint) -> String {
    p.of_max
        .as_ref()
        .map_or("-".into(), |r| match (r.ci95_low, r.ci95_high) {
            (Some(lo), Some(hi)) => format!("{} [{}, {}]", pct(r.ratio), pct(lo), pct(hi)),
            _ => pct(r.ratio),
        })
}

/// Reported busy % against achieved % of the maximum, one line per SMT state, with the
/// diagonal where the two would agree.
pub fn chart(points: &[UtilPoint]) -> Option<String> {
    let states = crate::first_seen(points.iter().map(|p| p.smt.as_str()));
    let mut series: Vec<Series> =
        states
            .iter()
            .map(|s| {
                Series {
            name: format!("SMT {s}"),
            points: points
                .iter()
                .filter(|p| p.smt == *s && p.busy().is_finite())
                .filter_map(|p| {
                    let r = p.of_max?;
                    Some(Point::new(100.0 * r.ratio, 100.0 * p.busy(), (None, None), format!(
                            "SMT {s}, offered {}: {:.1}% of the maximum done, {:.1}% reported busy",
                            p.offered_pct.map_or("max".into(), |x| format!("{x:.0}%")),
                            100.0 * r.ratio,
                            100.0 * p.busy()
                        )))
                })
                .collect(),
        }
            })
            .collect();
    series.push(Series {
        name: "busy = capacity used".into(),
        points: [0.0, 100.0]
            .iter()
            .map(|&v| {
                Point::new(
                    v,
                    v,
                    (None, None),
                    "where reported busy time would equal the share of capacity used".into(),
                )
            })
            .collect(),
    });
    line_chart(
        "Reported utilisation against capacity used",
        "open-loop CPU-bound load; busy = user + system + irq/steal time of the placement's CPUs",
        "achieved throughput, % of the maximum",
        "reported busy, %",
        &series,
        &LineOptions {
            y_zero: true,
            ..LineOptions::default()
        },
    )
}

/// The HTML section (`id="utilisation"`) of a run with open-loop cells; nothing otherwise.
pub fn section(p: &mut String, r: &RunResults) {
    let points = curve(&r.cells);
    if points.is_empty() {
        return;
    }
    let section = maud::html! {
        section id="utilisation" {
            h2 { "Reported utilisation against capacity" }
            p {
                "A CPU-bound load offered at fixed rates. Where the line lies above the \
                 diagonal, the CPUs look busier than the share of the maximum they deliver; \
                 below it, \"50% busy\" leaves less than half the capacity unused."
            }
            @if let Some(svg) = chart(&points) { figure { (maud::PreEscaped(svg)) } }
            div class="scroll" { (curve_html(&points)) }
        }
    };
    p.push_str(&section.into_string());
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use smtlab_model::{Direction, SampleRecord};

    use super::*;

    fn cell(smt: &str, rate: &str, achieved: &[f64], user: f64, idle: f64) -> CellRecord {
        let samples = achieved
            .iter()
            .map(|&v| SampleRecord {
                value: v,
                iterations: 1,
                elapsed_ns: 1_000_000_000,
                work: v,
                cpu_ns: None,
                start_spread_ns: None,
                cpus: vec![0, 1],
                metrics: BTreeMap::from([
                    (m::USER_FRAC.to_string(), user),
                    (m::SYSTEM_FRAC.to_string(), 0.0),
                    (m::IOWAIT_FRAC.to_string(), 0.0),
                    (m::OTHER_FRAC.to_string(), 1.0 - user - idle),
                    (m::IDLE_FRAC.to_string(), idle),
                ]),
            })
            .collect();
        CellRecord {
            // Not the open-loop workload's own name: the rate condition is what counts.
            benchmark: "any-load".into(),
            group: "utilisation".into(),
            unit: "jobs/s".into(),
            direction: Direction::Higher,
            params: BTreeMap::new(),
            conditions: smtlab_model::keys::Conditions {
                smt: smtlab_model::keys::SmtState::parse(smt),
                rate: OfferedRate::parse(rate),
                ..Default::default()
            },
            placement_spec: "1c2t".into(),
            placement: crate::testutil::placement("1c2t", "1c2t", 1, 2),
            result: crate::testutil::result(samples, achieved),
            counters: None,
        }
    }

    #[test]
    fn points_are_shares_of_the_maximum_of_their_own_smt_state() {
        let cells = vec![
            cell("on", "max", &[999.0, 1000.0, 1001.0], 1.0, 0.0),
            cell("on", "50", &[499.0, 500.0, 501.0], 0.7, 0.3),
            cell("off", "max", &[799.0, 800.0, 801.0], 1.0, 0.0),
            cell("off", "50", &[399.0, 400.0, 401.0], 0.5, 0.5),
        ];
        let c = curve(&cells);
        assert_eq!(c.len(), 4);
        assert_eq!(c[0].offered_pct, None);
        assert!((c[0].of_max.unwrap().ratio - 1.0).abs() < 1e-12);
        assert_eq!(c[1].offered_pct, Some(50.0));
        assert!((c[1].of_max.unwrap().ratio - 0.5).abs() < 1e-12);
        assert!((c[3].of_max.unwrap().ratio - 0.5).abs() < 1e-12);
        // With SMT on, half the capacity shows as 70% busy.
        assert!((c[1].busy() - 0.7).abs() < 1e-12);
        assert!((c[1].idle - 0.3).abs() < 1e-12);
        let t = curve_text(&c);
        // Two states, each a heading, a header and two rows with their detail lines.
        assert_eq!(t.lines().count(), 2 * 6 + 1, "{t}");
        assert!(
            t.contains("SMT on, 1c2t:") && t.contains("SMT off, 1c2t:"),
            "{t}"
        );
        assert!(t.contains("70.0") && t.contains("50.0 ["), "{t}");
        assert!(t.lines().all(|l| l.chars().count() <= 80), "{t}");
        let html = curve_html(&c).into_string();
        assert_eq!(html.matches("<tr>").count(), 5, "{html}");
        let svg = chart(&c).unwrap();
        assert!(svg.contains("SMT on") && svg.contains("SMT off"));
    }

    #[test]
    fn a_state_without_its_maximum_has_no_share() {
        let c = curve(&[cell("on", "30", &[300.0, 301.0], 0.3, 0.7)]);
        assert_eq!(c.len(), 1);
        assert!(c[0].of_max.is_none());
        assert!(curve_text(&c).contains(" - "));
        assert!(curve(&[]).is_empty());
    }
}
