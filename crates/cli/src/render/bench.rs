//! `smtlab bench` output: a heading, one row per placement as it finishes, and the
//! measurement details (overheads, calibration, warm-up) underneath.

use smtlab_bench::Params;
use smtlab_model::BenchInfo;

use smtlab_model::CellRecord;
use smtlab_report::fmt::{num, shorten};
use smtlab_report::table::{Columns, Layout, Style, paint, wrap};

/// The columns of the placement rows, on one line each (`--wide`, or a terminal wide
/// enough for them).
const COLUMNS: Columns<8> = Columns([14, 12, 10, 19, 26, 10, 4, 5]);

/// The columns of the narrow rows: placement, CPUs, median, the interval's half-width
/// in percent, n, converged, then the speed-up; mean, quartiles and minimum move to the
/// details under the table. Fits 80 columns with the speed-up's interval.
const NARROW: Columns<6> = Columns([9, 7, 10, 7, 3, 4]);

/// Below this many columns the rows take the narrow form.
const WIDE_WIDTH: usize = 124;

fn narrow(layout: Layout) -> bool {
    layout.width.is_some_and(|w| w < WIDE_WIDTH)
}

pub fn heading(info: &BenchInfo, params: &Params, layout: Layout) -> String {
    let better = format!("{} is better", info.direction.as_str());
    let params: Vec<String> = params
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut out = paint(
        &format!("{} ({}, {better})", info.name, info.unit),
        Style::Bold,
        layout.color,
    );
    if !params.is_empty() {
        if narrow(layout) {
            // Parameters on their own line, broken between words, so none is cut.
            out.push('\n');
            out.push_str(wrap(&format!("  {}", params.join(" ")), layout).trim_end_matches('\n'));
        } else {
            out.push_str(&format!("  {}", params.join(" ")));
        }
    }
    out.push('\n');
    out.push_str(&header_line(layout));
    out
}

/// Column titles of [`row`].
pub fn header_line(layout: Layout) -> String {
    let text = if narrow(layout) {
        NARROW.line(&[
            "placement",
            "cpus",
            "median",
            "+-95%",
            "n",
            "conv",
            "vs first",
        ])
    } else {
        COLUMNS.line(&[
            "placement",
            "cpus",
            "median",
            "p25-p75",
            "mean +- 95% CI",
            "min",
            "n",
            "conv",
            "vs first",
        ])
    };
    paint(text.trim_end_matches('\n'), Style::Dim, layout.color) + "\n"
}

pub fn row(cell: &CellRecord, baseline: Option<&CellRecord>, layout: Layout) -> String {
    let s = &cell.result.summary;
    let cpus = if cell.placement.cpus.is_empty() {
        "unpinned".to_string()
    } else {
        cell.placement.cpu_set().to_string()
    };
    // The one verdict: above 1 = this placement better than the first.
    let verdict = baseline.and_then(|b| smtlab_model::verdict::verdict(b, cell));
    let vs = verdict
        .as_ref()
        .map_or(String::new(), smtlab_report::fmt::verdict);
    let conv = if cell.result.met_target() {
        "yes"
    } else {
        "no"
    };
    if narrow(layout) {
        let ci = if s.n < 2 {
            "-".to_string()
        } else {
            format!("{:.1}%", 100.0 * s.ci95_rel)
        };
        // The verdict in a word: "not significant at 95%" would not fit.
        let vs = verdict.as_ref().map_or(String::new(), |v| {
            use smtlab_report::fmt::{ratio_ci, significance_short};
            let r = &v.speedup;
            let verdict = match v.significance {
                smtlab_model::stats::Significance::NotSignificant => "n.s.",
                other => significance_short(other),
            };
            format!("{} {verdict}", ratio_ci(r.ratio, r.ci95_low, r.ci95_high))
        });
        return NARROW.line(&[
            &shorten(&cell.placement.name, 9),
            &shorten(&cpus, 7),
            &num(s.median),
            &ci,
            &s.n.to_string(),
            conv,
            &vs,
        ]);
    }
    COLUMNS.line(&[
        &cell.placement.name,
        &cpus,
        &num(s.median),
        &format!("{}-{}", num(s.p25), num(s.p75)),
        &smtlab_report::fmt::mean_ci(s),
        &num(s.min),
        &s.n.to_string(),
        conv,
        &vs,
    ])
}

/// How each cell was measured: what a skeptical reader asks first.
pub fn details(cells: &[CellRecord], layout: Layout) -> String {
    let mut out = String::new();
    for c in cells {
        let r = &c.result;
        if narrow(layout) {
            // What the narrow row left out.
            let s = &r.summary;
            out.push_str(&format!(
                "{}: mean {}, p25-p75 {}-{}, min {} {}\n",
                c.placement.name,
                smtlab_report::fmt::mean_ci(s),
                num(s.p25),
                num(s.p75),
                num(s.min),
                c.unit
            ));
        }
        let linear = match r.calibration.linear {
            Some(true) => "linear",
            Some(false) => "NOT linear",
            None => "linearity not checked",
        };
        out.push_str(&format!(
            "{}: {} iterations/sample ({}{}), warm-up {} samples ({:.0} ms) discarded; \
             clock read {} ns, empty loop {} ns/iter, subtracted {} ns/sample; stop: {}",
            c.placement.name,
            r.iterations,
            if r.calibration.fixed { "fixed, " } else { "" },
            linear,
            r.warmup.samples,
            r.warmup.elapsed_ns as f64 / 1e6,
            num(r.clock_cost_ns),
            num(r.loop_cost_ns_per_iter),
            num(r.subtracted_ns_per_sample),
            r.stop_reason,
        ));
        if let Some(cpu) = &r.cpu_rate {
            out.push_str(&format!("; per CPU-second: {} {}", num(cpu.mean), c.unit));
        }
        if let Some(sp) = &r.start_spread_ns {
            out.push_str(&format!("; start spread max {} ns", num(sp.max)));
        }
        let ran_on: std::collections::BTreeSet<u32> = r
            .samples
            .iter()
            .flat_map(|s| s.cpus.iter().copied())
            .collect();
        if !ran_on.is_empty() {
            let list: smtlab_model::CpuSet = ran_on.into_iter().collect();
            out.push_str(&format!("; ran on CPUs {list}"));
        }
        if let (Some((lo, hi)), Some(spread)) = (r.round_median_range(), r.rounds_spread_rel()) {
            out.push_str(&format!(
                "; {} rounds, medians {}..{} (spread {:.1}% of the pooled median)",
                r.rounds.len(),
                num(lo),
                num(hi),
                100.0 * spread
            ));
        }
        out.push('\n');
        if narrow(layout) {
            // Each detail on its own line(s), broken between words at the width.
            let last = out.rfind("\n").unwrap_or(0);
            let start = out[..last].rfind('\n').map_or(0, |i| i + 1);
            let prefix = format!("{}: ", c.placement.name);
            let long = out[start..].trim_start_matches(&prefix).to_string();
            out.truncate(start);
            for part in long.trim_end().split("; ") {
                out.push_str(&wrap(&format!("  {part}"), layout));
            }
        }
        if let Some(agents) = super::load::cell_agents(c, layout) {
            out.push_str(&agents);
        }
        if let Some(drift) = r.unsteady() {
            out.push_str(&format!(
                "  unsteady: the median moved {:.1}% between the first and second half of the \
                 samples, beyond their {:.1}% interval; the machine changed speed during the \
                 measurement and a repetition may differ by as much (--repeat shows it)\n",
                100.0 * drift,
                100.0 * r.summary.ci95_rel
            ));
        }
        if let Some(why) = r.disturbed_reason() {
            out.push_str(&format!(
                "  {why} of its CPUs' time while it measured; its figure carries that load and \
                 is compared with no other\n"
            ));
        }
    }
    out.push('\n');
    let out = wrap(&out, layout);
    if layout.color {
        out.lines()
            .map(|l| paint(l, Style::Dim, true) + "\n")
            .collect()
    } else {
        out
    }
}
