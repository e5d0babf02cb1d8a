//! This machine's load-to-use latencies per level, for the CPI stack
//! ([`smtlab_model::counters::cpi_stack`]), read from a run's own `mem-latency` cells:
//! the pointer chase on `1c1t` with one thread, at the largest working set that fits
//! in half of a level and is larger than the level above it (L1, L2, the last level),
//! and at 4x the last level or more (DRAM, `size=auto` included), in cycles at the
//! core clock the run measured. A level the run did not chase keeps its assumed
//! latency ([`Latencies::assumed`]), and the stack says which parts are measured.

use smtlab_model::counters::cpi_stack::{Latencies, LevelLatency};
use smtlab_model::placement::Named;
use smtlab_model::{CacheType, CellRecord, RunResults};

use crate::units::{cycles, parse_size, size};

/// The benchmark whose cells give the latencies.
const CHASE: &str = "mem-latency";

/// One chase: working set in bytes (infinite for `auto`, which is 4x the last level),
/// and its cell.
fn chases(r: &RunResults) -> Vec<(f64, &CellRecord)> {
    r.cells
        .iter()
        .filter(|c| c.benchmark == CHASE && c.placement.name == Named::OneCore)
        .filter(|c| {
            c.params
                .get("threads")
                .is_none_or(|t| t == "1" || t == "auto")
        })
        .filter_map(|c| {
            let s = c.params.get("size")?;
            let bytes = if s.eq_ignore_ascii_case("auto") {
                f64::INFINITY
            } else {
                parse_size(s)?
            };
            Some((bytes, c))
        })
        .collect()
}

/// The smallest data (or unified) cache of each level, by level.
fn level_sizes(r: &RunResults) -> Vec<(u8, f64)> {
    let caches = r.run.topology.caches.iter();
    let sized = caches.filter(|c| c.cache_type != CacheType::Instruction);
    let sized = sized.filter_map(|c| Some((c.level, c.size_bytes? as f64)));
    let mut out: Vec<(u8, f64)> = crate::grouped(sized, |(l, _)| *l)
        .into_iter()
        .map(|(l, sizes)| {
            (
                l,
                sizes.into_iter().map(|s| s.1).fold(f64::INFINITY, f64::min),
            )
        })
        .collect();
    out.sort_by_key(|(l, _)| *l);
    out
}

/// The latency of the chase in `(lo, hi]` with the largest working set, in cycles.
fn pick(found: &[(f64, &CellRecord)], lo: f64, hi: f64, ghz: f64) -> Option<LevelLatency> {
    let (bytes, c) = found
        .iter()
        .filter(|(b, _)| *b > lo && *b <= hi)
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    let ns = c.result.summary.median;
    let cyc = cycles(&c.unit, ns, ghz)?;
    let set = if bytes.is_finite() {
        size(*bytes)
    } else {
        "auto".into()
    };
    Some(LevelLatency {
        cycles: cyc,
        measured: Some(format!(
            "{CHASE} {set} on 1c1t: {} {} = {cyc:.1} cycles at {ghz:.3} GHz",
            crate::fmt::num(ns),
            c.unit
        )),
    })
}

/// The latencies the run measured, the assumed ones where it did not.
pub fn measured(r: &RunResults) -> Latencies {
    let mut l = Latencies::assumed();
    let Some(ghz) = r.run.environment.core_clock_ghz.filter(|g| *g > 0.0) else {
        return l;
    };
    let found = chases(r);
    let levels = level_sizes(r);
    if found.is_empty() || levels.is_empty() {
        return l;
    }
    let size_of = |level: u8| levels.iter().find(|(x, _)| *x == level).map(|(_, s)| *s);
    let (llc_level, llc_bytes) = levels[levels.len() - 1];
    // A working set inside a level: larger than the level above, at most half of it.
    let inside = |level: u8| -> Option<LevelLatency> {
        let hi = size_of(level)?;
        let lo = level
            .checked_sub(1)
            .and_then(size_of)
            .filter(|_| level > 1)
            .unwrap_or(0.0);
        pick(&found, lo, hi / 2.0, ghz)
    };
    if let Some(x) = inside(1) {
        l.l1 = x;
    }
    if let Some(x) = inside(2) {
        l.l2 = x;
    }
    if let Some(x) = inside(llc_level) {
        l.llc = x;
    }
    if let Some(x) = pick(&found, 4.0 * llc_bytes - 1.0, f64::INFINITY, ghz) {
        l.dram = x;
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report fixture: a chase sweep on a machine with L1d 32 KiB, L2 1 MiB and
    /// L3 32 MiB; each level is read at the largest set inside it.
    #[test]
    fn levels_come_from_the_chase_inside_each_level() {
        let mut r = crate::testutil::sweep_run(&[
            (4096.0, 1.0),
            (16384.0, 1.2),
            (262_144.0, 4.0),
            (524_288.0, 4.5),
            (8_388_608.0, 15.0),
            (16_777_216.0, 18.0),
            (134_217_728.0, 80.0),
        ]);
        let assumed = measured(&r);
        assert_eq!(
            assumed,
            Latencies::assumed(),
            "no core clock: nothing measured"
        );
        r.run.environment.core_clock_ghz = Some(2.0);
        let l = measured(&r);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(l.l1.cycles, 2.4), "{}", l.l1.cycles);
        assert!(close(l.l2.cycles, 9.0));
        assert!(close(l.llc.cycles, 36.0));
        assert!(close(l.dram.cycles, 160.0));
        assert_eq!(
            l.l2.measured.as_deref(),
            Some("mem-latency 512 KiB on 1c1t: 4.500 ns = 9.0 cycles at 2.000 GHz")
        );
        // Without the DRAM set the DRAM latency stays assumed.
        r.cells.pop();
        let l = measured(&r);
        assert_eq!(l.dram, Latencies::assumed().dram);
        assert!(
            [&l.l1, &l.l2, &l.llc, &l.dram]
                .iter()
                .any(|l| l.measured.is_some())
        );
    }
}
