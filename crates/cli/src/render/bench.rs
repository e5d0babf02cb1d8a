//! `smtlab bench` output: a heading, one row per placement as it finishes, and the
//! measurement details (overheads, calibration, warm-up) underneath.

use smtlab_bench::Params;
use smtlab_model::stats::speedup;
use smtlab_model::{BenchInfo, Summary};

use smtlab_model::CellRecord;

use super::table::Columns;

/// Four significant digits (all digits from a thousand up), without exponent for
/// everyday magnitudes: `0.02412` s, `231.9` ns, `12345` ns. The report's formatter,
/// so terminal and HTML agree.
pub fn num(x: f64) -> String {
    smtlab_report::fmt::num(x)
}

/// The columns of the placement rows.
const COLUMNS: Columns<8> = Columns([14, 12, 10, 19, 26, 10, 4, 5]);

fn line(cells: [&str; 9]) -> String {
    COLUMNS.line(&cells)
}

pub fn heading(info: &BenchInfo, params: &Params) -> String {
    let better = format!("{} is better", info.direction.as_str());
    let params: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut out = format!("{} ({}, {better})", info.name, info.unit);
    if !params.is_empty() {
        out.push_str(&format!("  {}", params.join(" ")));
    }
    out.push('\n');
    out.push_str(&header_line());
    out
}

/// Column titles of [`row`].
pub fn header_line() -> String {
    line([
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
}

pub fn row(cell: &CellRecord, baseline: Option<&Summary>) -> String {
    let s = &cell.result.summary;
    let cpus = if cell.placement.cpus.is_empty() {
        "unpinned".to_string()
    } else {
        cell.placement
            .cpus
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    // The one speed-up: above 1 = this placement better than the first.
    let vs = baseline
        .and_then(|b| speedup(b, s, cell.direction))
        .map_or(String::new(), |r| smtlab_report::fmt::speedup(&r));
    line([
        &cell.placement.name,
        &cpus,
        &num(s.median),
        &format!("{}-{}", num(s.p25), num(s.p75)),
        &smtlab_report::fmt::mean_ci(s),
        &num(s.min),
        &s.n.to_string(),
        if cell.result.met_target() {
            "yes"
        } else {
            "no"
        },
        &vs,
    ])
}

/// How each cell was measured: what a skeptical reader asks first.
pub fn details(cells: &[CellRecord]) -> String {
    let mut out = String::new();
    for c in cells {
        let r = &c.result;
        let linear = match r.calibration.linear {
            Some(true) => "linear",
            Some(false) => "NOT linear",
            None => "linearity not checked",
        };
        out.push_str(&format!(
            "{}: {} iterations/sample ({}{}), warm-up {} samples ({:.0} ms) discarded; \
             clock read {} ns, empty loop {} ns/iter, subtracted {} ns/sample; stop: {:?}",
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
        if let Some(drift) = r.unsteady() {
            out.push_str(&format!(
                "  unsteady: the median moved {:.1}% between the first and second half of the \
                 samples, beyond their {:.1}% interval; the machine changed speed during the \
                 measurement and a repetition may differ by as much (--repeat shows it)\n",
                100.0 * drift,
                100.0 * r.summary.ci95_rel
            ));
        }
    }
    out.push('\n');
    out
}
