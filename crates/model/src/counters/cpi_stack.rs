//! The CPI stack (paper 000 Fig 19, after Ruan et al.): the measured cycles per
//! instruction cut into what each counted event cost, and a residual.
//!
//! Each part is an event's count times the cycles one occurrence costs when nothing
//! overlaps it, over the instructions:
//!
//! * memory, as increments between levels, so a load that misses to DRAM is charged
//!   L2 + (LLC - L2) + (DRAM - LLC) = the DRAM latency: L1D and L1I misses at
//!   `L2 - L1`, L2 misses (the model table's `l2-misses`) at `LLC - L2`, LLC misses at
//!   `DRAM - LLC`. The latencies are this machine's, measured by `mem-latency`'s pointer
//!   chase at a working set inside each level and read in cycles at the measured core
//!   clock, where the run has them; otherwise the assumed ones of [`Latencies::assumed`],
//!   and each part says which;
//! * TLB misses at an assumed page walk;
//! * pipeline clears: branch mispredicts and machine clears (the model table's
//!   `machine-clears`). Where top-down level 1 was counted with both events, the
//!   bad-speculation cycles (its share of slots times the cycles) are split between them
//!   as the kernel's `tma_branch_mispredicts` and `tma_machine_clears` and pmu-tools'
//!   level 2 split them (by the `topdown-br-mispredict` perf metric on Sapphire Rapids
//!   and later, by the two counts before), and the penalty per event is what that
//!   gives; otherwise each is charged an assumed penalty, stated. `scripts/check-formulas.sh`
//!   holds the two shares against both references; the memory, TLB and store-buffer
//!   parts have no reference formula (neither reference charges counts at latencies:
//!   their memory nodes are stall cycles), so they rest on the unit tests' arithmetic;
//! * store-buffer stalls (the model table's `store-buffer-stalls`), already in cycles.
//!
//! Each part is only as exact as its event: `l2-misses` counts prefetches' misses too
//! on Skylake-SP and Sapphire Rapids (`L2_RQSTS.MISS`; demand misses only on Ice
//! Lake-SP and AMD), and the stack charges them as if a load waited for each, so there
//! the L2 part is an upper bound, as every part is when the core overlaps misses.
//!
//! The parts and the residual add to the measured CPI exactly: the residual
//! ("other/base") is the measured CPI less the parts, the cycles of retiring
//! instructions plus every stall no counted event explains, including the parts whose
//! events were not counted (listed). It is negative when the out-of-order core
//! overlapped the penalties; that is information, not an error, so it is kept.

use serde::{Deserialize, Serialize};

use super::topdown::{INTEL_PERF_METRICS, TopdownMethod, level1};
use super::{CountMode, CounterEvent, CounterValues};

/// The latency of one level of the memory hierarchy, in core cycles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelLatency {
    pub cycles: f64,
    /// How it was measured (`mem-latency 16 KiB on 1c1t: 1.20 ns at 3.694 GHz`);
    /// `None` when assumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<String>,
}

impl LevelLatency {
    fn assumed(cycles: f64) -> Self {
        LevelLatency {
            cycles,
            measured: None,
        }
    }
}

/// The latencies and penalties a CPI stack charges, in core cycles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latencies {
    pub l1: LevelLatency,
    pub l2: LevelLatency,
    pub llc: LevelLatency,
    pub dram: LevelLatency,
    /// A page walk after a TLB miss (always assumed: no benchmark isolates it).
    pub page_walk_cycles: f64,
    /// A branch mispredict, when top-down does not measure it.
    pub mispredict_cycles: f64,
    /// A machine clear, when top-down does not measure it.
    pub machine_clear_cycles: f64,
}

impl Latencies {
    /// Rough figures for a recent x86 server core, used where nothing was measured:
    /// load-to-use 4 cycles in L1, 16 in L2, 50 in the LLC, 250 in DRAM (so an LLC miss
    /// costs 200 beyond the LLC); a page walk and a mispredict 20 each, the figures paper
    /// 000 Table 2 uses; a machine clear as a mispredict, since both flush the pipeline
    /// and fetch again.
    pub fn assumed() -> Self {
        Latencies {
            l1: LevelLatency::assumed(4.0),
            l2: LevelLatency::assumed(16.0),
            llc: LevelLatency::assumed(50.0),
            dram: LevelLatency::assumed(250.0),
            page_walk_cycles: 20.0,
            mispredict_cycles: 20.0,
            machine_clear_cycles: 20.0,
        }
    }

    /// The assumed latencies with the levels `text` gives in cycles (`l2=14,llc=48,dram=310`:
    /// `l1`, `l2`, `llc`, `dram`, any case, each at most once), as measured elsewhere
    /// (`counters import --latencies`, for counts recorded on another machine).
    pub fn given(text: &str) -> Result<Latencies, BadLatencies> {
        let bad = || BadLatencies(text.to_string());
        let mut l = Latencies::assumed();
        let mut seen: Vec<String> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(bad)?;
            let key = key.trim().to_ascii_lowercase();
            let cycles: f64 = value.trim().parse().map_err(|_| bad())?;
            if !(cycles.is_finite() && cycles > 0.0) || seen.contains(&key) {
                return Err(bad());
            }
            let level = match key.as_str() {
                "l1" => &mut l.l1,
                "l2" => &mut l.l2,
                "llc" => &mut l.llc,
                "dram" => &mut l.dram,
                _ => return Err(bad()),
            };
            *level = LevelLatency {
                cycles,
                measured: Some(format!("given with --latencies: {cycles} cycles")),
            };
            seen.push(key);
        }
        if seen.is_empty() {
            return Err(bad());
        }
        Ok(l)
    }
}

/// A `--latencies` that is not `LEVEL=CYCLES,...`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad latencies {0:?} (expected LEVEL=CYCLES pairs, comma-separated, each level once: \
     l1, l2, llc, dram; e.g. l2=14,llc=48,dram=310)"
)]
pub struct BadLatencies(pub String);

named_enum! {
    fn label;
    /// Where a part's penalty came from.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum PenaltySource {
        /// Latencies this machine measured (`mem-latency`, core clock).
        Measured = "measured latency",
        /// Top-down's bad-speculation cycles, split between mispredicts and clears.
        Topdown = "top-down bad speculation",
        /// The event counts cycles itself.
        Cycles = "counted in cycles",
        /// A stated assumption ([`Latencies::assumed`]).
        Assumed = "assumed",
    }
}

/// One part of the stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpiPart {
    /// Stable key for JSON and CSV (`l2_miss`, `machine_clears`).
    pub key: String,
    /// For people (`L2 miss to LLC`).
    pub label: String,
    /// The event's count (scaled for multiplexing).
    pub count: f64,
    /// Cycles charged per occurrence (1 for an event counted in cycles).
    pub penalty_cycles: f64,
    pub source: PenaltySource,
    /// `count * penalty_cycles / instructions`.
    pub cpi: f64,
}

/// The CPI stack of one set of counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpiStack {
    /// cycles / instructions.
    pub measured_cpi: f64,
    /// The counted parts, in stack order.
    pub parts: Vec<CpiPart>,
    /// `measured_cpi` less the parts: base CPI plus every unexplained stall, negative
    /// when the penalties overlapped.
    pub other_cpi: f64,
    /// The parts whose events were not counted (their cycles are in `other_cpi`).
    pub not_counted: Vec<String>,
}

impl CpiStack {
    /// The parts and the residual, which add to `measured_cpi`.
    pub fn sum(&self) -> f64 {
        self.parts.iter().map(|p| p.cpi).sum::<f64>() + self.other_cpi
    }

    /// The part of `key`, when counted.
    pub fn part(&self, key: &str) -> Option<&CpiPart> {
        self.parts.iter().find(|p| p.key == key)
    }
}

/// The keys of every part, in stack order (CSV columns `cpi_stack_<key>`).
pub const PART_KEYS: [&str; 9] = [
    "l1d_miss",
    "l1i_miss",
    "l2_miss",
    "llc_miss",
    "dtlb_miss",
    "itlb_miss",
    "branch_mispredict",
    "machine_clears",
    "store_buffer",
];

/// A part's event: a generic one or a name in the model table.
#[derive(Clone, Copy)]
enum Source {
    Generic(CounterEvent),
    Named(&'static str),
}

/// The memory and TLB parts: key, label, event, penalty and whether it was measured.
fn memory_parts(l: &Latencies) -> Vec<(&'static str, &'static str, Source, f64, bool)> {
    use CounterEvent as E;
    let step = |a: &LevelLatency, b: &LevelLatency| {
        (
            (b.cycles - a.cycles).max(0.0),
            a.measured.is_some() && b.measured.is_some(),
        )
    };
    let (l1_l2, m1) = step(&l.l1, &l.l2);
    let (l2_llc, m2) = step(&l.l2, &l.llc);
    let (llc_dram, m3) = step(&l.llc, &l.dram);
    vec![
        (
            "l1d_miss",
            "L1D miss to L2",
            Source::Generic(E::L1dReadMisses),
            l1_l2,
            m1,
        ),
        (
            "l1i_miss",
            "L1I miss to L2",
            Source::Generic(E::L1iReadMisses),
            l1_l2,
            m1,
        ),
        (
            "l2_miss",
            "L2 miss to LLC",
            Source::Named("l2-misses"),
            l2_llc,
            m2,
        ),
        (
            "llc_miss",
            "LLC miss to DRAM",
            Source::Generic(E::LlcReadMisses),
            llc_dram,
            m3,
        ),
        (
            "dtlb_miss",
            "DTLB miss",
            Source::Generic(E::DtlbReadMisses),
            l.page_walk_cycles,
            false,
        ),
        (
            "itlb_miss",
            "ITLB miss",
            Source::Generic(E::ItlbReadMisses),
            l.page_walk_cycles,
            false,
        ),
    ]
}

fn count(v: &CounterValues, s: Source) -> Option<f64> {
    match s {
        Source::Generic(e) => v.count(e, CountMode::All),
        Source::Named(n) => v.named_value(n),
    }
}

/// The CPI stack of `v` charged at `l`; `None` without cycles and instructions, or when
/// no part's event was counted (the stack would be the CPI alone).
pub fn cpi_stack(v: &CounterValues, l: &Latencies) -> Option<CpiStack> {
    let cycles = v.count(CounterEvent::Cycles, CountMode::All)?;
    let inst = v
        .count(CounterEvent::Instructions, CountMode::All)
        .filter(|i| *i > 0.0)?;
    let mut parts = Vec::new();
    let mut not_counted = Vec::new();
    let mut push =
        |key: &str, label: &str, n: Option<f64>, penalty: f64, src: PenaltySource| match n {
            Some(count) => parts.push(CpiPart {
                key: key.into(),
                label: label.into(),
                count,
                penalty_cycles: penalty,
                source: src,
                cpi: count * penalty / inst,
            }),
            None => not_counted.push(label.to_string()),
        };
    for (key, label, s, penalty, measured) in memory_parts(l) {
        let src = if measured {
            PenaltySource::Measured
        } else {
            PenaltySource::Assumed
        };
        push(key, label, count(v, s), penalty, src);
    }
    let (mispredict, clear) = clear_penalties(v, l, cycles);
    let misses = v.count(CounterEvent::BranchMisses, CountMode::All);
    push(
        "branch_mispredict",
        "branch mispredict",
        misses,
        mispredict.0,
        mispredict.1,
    );
    let clears = v.named_value("machine-clears");
    push("machine_clears", "machine clear", clears, clear.0, clear.1);
    let sb = v.named_value("store-buffer-stalls");
    push(
        "store_buffer",
        "store buffer full",
        sb,
        1.0,
        PenaltySource::Cycles,
    );
    if parts.is_empty() {
        return None;
    }
    let measured_cpi = cycles / inst;
    let other_cpi = measured_cpi - parts.iter().map(|p| p.cpi).sum::<f64>();
    Some(CpiStack {
        measured_cpi,
        parts,
        other_cpi,
        not_counted,
    })
}

/// The cycles a mispredict and a machine clear cost, and where each figure came from:
/// top-down's bad-speculation cycles (its share of slots times the cycles: slots are
/// the width times the cycles) split between the two as the kernel's
/// `tma_branch_mispredicts` / `tma_machine_clears` and pmu-tools' level 2 split them,
/// over each event's count; the assumed penalties without top-down or the counts.
fn clear_penalties(
    v: &CounterValues,
    l: &Latencies,
    cycles: f64,
) -> ((f64, PenaltySource), (f64, PenaltySource)) {
    let assumed = (
        (l.mispredict_cycles, PenaltySource::Assumed),
        (l.machine_clear_cycles, PenaltySource::Assumed),
    );
    let (Some(m), Some(c)) = (
        v.count(CounterEvent::BranchMisses, CountMode::All),
        v.named_value("machine-clears"),
    ) else {
        return assumed;
    };
    let Some((mispredict_share, clear_share)) = bad_speculation_split(v, m, c) else {
        return assumed;
    };
    let per = |share: f64, n: f64, fallback: f64| {
        if n > 0.0 {
            (share * cycles / n, PenaltySource::Topdown)
        } else {
            (fallback, PenaltySource::Assumed)
        }
    };
    (
        per(mispredict_share, m, l.mispredict_cycles),
        per(clear_share, c, l.machine_clear_cycles),
    )
}

/// Top-down bad speculation's two parts, as shares of slots: mispredicts and machine
/// clears. Sapphire Rapids and later count the mispredicts' share (the
/// `topdown-br-mispredict` perf metric over the level-1 metrics' sum), and clears are
/// the rest of bad speculation, never below zero; earlier cores split bad speculation
/// by the counts `m` and `c` (the references' `Mispred_Clears_Fraction`).
fn bad_speculation_split(v: &CounterValues, m: f64, c: f64) -> Option<(f64, f64)> {
    let t = level1(v).ok()?;
    if t.method == TopdownMethod::IntelPerfMetrics
        && let Some(br) = v.named_value("topdown-br-mispredict")
    {
        let sum: f64 = INTEL_PERF_METRICS[1..]
            .iter()
            .map(|n| v.named_value(n))
            .sum::<Option<f64>>()?;
        let share = (sum > 0.0).then(|| br / sum)?;
        return Some((share, (t.bad_speculation - share).max(0.0)));
    }
    if t.method == TopdownMethod::AmdDispatchSlots || m + c <= 0.0 {
        // AMD's resteers are not the clears counted here: no split.
        return None;
    }
    let mispredicts = t.bad_speculation * m / (m + c);
    Some((mispredicts, (t.bad_speculation - mispredicts).max(0.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{CounterTarget, NamedReading, Reading};

    fn values(counts: &[(CounterEvent, u64)], named: &[(&str, u64)]) -> CounterValues {
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: false,
        });
        for &(e, c) in counts {
            v.set(e, CountMode::All, Reading::exact(c));
        }
        for &(n, c) in named {
            v.named.push(NamedReading::counted(n, c));
        }
        v
    }

    fn part<'a>(s: &'a CpiStack, key: &str) -> &'a CpiPart {
        assert!(PART_KEYS.contains(&key), "{key}");
        s.parts.iter().find(|p| p.key == key).unwrap()
    }

    /// 10,000 instructions in 20,000 cycles (CPI 2). Assumed latencies: L1 4, L2 16,
    /// LLC 50, DRAM 250, walk 20, mispredict and clear 20.
    /// L1D 100 x 12 = 1200, L2 40 x 34 = 1360, LLC 10 x 200 = 2000, DTLB 5 x 20 = 100,
    /// branch 30 x 20 = 600, clears 2 x 20 = 40, store buffer 500 cycles: 5800 cycles,
    /// 0.58 per instruction; other = 2 - 0.58 = 1.42.
    #[test]
    fn parts_by_hand_with_assumed_latencies() {
        use CounterEvent as E;
        let v = values(
            &[
                (E::Cycles, 20_000),
                (E::Instructions, 10_000),
                (E::L1dReadMisses, 100),
                (E::LlcReadMisses, 10),
                (E::DtlbReadMisses, 5),
                (E::BranchMisses, 30),
            ],
            &[
                ("l2-misses", 40),
                ("machine-clears", 2),
                ("store-buffer-stalls", 500),
            ],
        );
        let s = cpi_stack(&v, &Latencies::assumed()).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(part(&s, "l1d_miss").cpi, 0.12));
        assert!(close(part(&s, "l2_miss").cpi, 0.136));
        assert!(close(part(&s, "llc_miss").cpi, 0.2));
        assert!(close(part(&s, "dtlb_miss").cpi, 0.01));
        assert!(close(part(&s, "branch_mispredict").cpi, 0.06));
        assert!(close(part(&s, "machine_clears").cpi, 0.004));
        assert!(close(part(&s, "store_buffer").cpi, 0.05));
        assert!(close(s.other_cpi, 1.42), "{}", s.other_cpi);
        assert!(close(s.sum(), 2.0));
        assert_eq!(s.not_counted, ["L1I miss to L2", "ITLB miss"]);
        assert!(s.parts.iter().all(|p| p.source != PenaltySource::Measured));
        assert_eq!(part(&s, "store_buffer").source, PenaltySource::Cycles);
    }

    /// Measured latencies replace the assumed ones for the levels measured on both
    /// sides of a step: L1 5, L2 15, LLC 45 measured, DRAM assumed (250): L1D misses
    /// 10 cycles each (measured), L2 misses 30 (measured), LLC misses 205 (assumed).
    #[test]
    fn measured_latencies_charge_the_steps_they_bound() {
        use CounterEvent as E;
        let mut l = Latencies::assumed();
        for (lvl, c) in [(&mut l.l1, 5.0), (&mut l.l2, 15.0), (&mut l.llc, 45.0)] {
            *lvl = LevelLatency {
                cycles: c,
                measured: Some("test".into()),
            };
        }
        let v = values(
            &[
                (E::Cycles, 3000),
                (E::Instructions, 1000),
                (E::L1dReadMisses, 10),
                (E::LlcReadMisses, 2),
            ],
            &[("l2-misses", 5)],
        );
        let s = cpi_stack(&v, &l).unwrap();
        assert_eq!(part(&s, "l1d_miss").penalty_cycles, 10.0);
        assert_eq!(part(&s, "l1d_miss").source, PenaltySource::Measured);
        assert_eq!(part(&s, "l2_miss").penalty_cycles, 30.0);
        assert_eq!(part(&s, "llc_miss").penalty_cycles, 205.0);
        assert_eq!(part(&s, "llc_miss").source, PenaltySource::Assumed);
        // 100 + 150 + 410 = 660 cycles of 3000: other = 3 - 0.66.
        assert!((s.other_cpi - 2.34).abs() < 1e-12);
    }

    /// Skylake-style top-down: 4000 slots (1000 cycles x 4), recovery 100 cycles x 4 =
    /// 400 slots, issued 1300, retired 1000: bad speculation (1300 - 1000 + 400) / 4000
    /// = 17.5%, 175 cycles, split 6:1 between 60 mispredicts and 10 clears: 2.5 cycles
    /// each, 150 and 25 cycles, 0.3 and 0.05 per instruction over 500 instructions.
    #[test]
    fn topdown_splits_bad_speculation_between_mispredicts_and_clears() {
        use CounterEvent as E;
        let v = values(
            &[
                (E::Cycles, 1000),
                (E::Instructions, 500),
                (E::BranchMisses, 60),
            ],
            &[
                ("machine-clears", 10),
                ("topdown-total-slots", 4000),
                ("topdown-slots-issued", 1300),
                ("topdown-slots-retired", 1000),
                ("topdown-fetch-bubbles", 800),
                ("topdown-recovery-bubbles", 400),
            ],
        );
        let s = cpi_stack(&v, &Latencies::assumed()).unwrap();
        let b = part(&s, "branch_mispredict");
        assert_eq!(b.source, PenaltySource::Topdown);
        assert!((b.penalty_cycles - 2.5).abs() < 1e-12);
        assert!((b.cpi - 0.3).abs() < 1e-12);
        assert!((part(&s, "machine_clears").cpi - 0.05).abs() < 1e-12);
        assert!((s.sum() - 2.0).abs() < 1e-12);
    }

    /// Sapphire Rapids' perf metrics: 6000 slots over 1000 cycles, level 1 metrics
    /// 3000/600/1200/1200 (sum 6000: bad speculation 10%); the mispredict metric 480
    /// slots = 8%, so mispredicts cost 80 cycles and clears the rest, 2% = 20: 40 and
    /// 2 events, 2 and 10 cycles each.
    #[test]
    fn perf_metrics_give_the_mispredict_share_and_clears_the_rest() {
        use CounterEvent as E;
        let v = values(
            &[
                (E::Cycles, 1000),
                (E::Instructions, 800),
                (E::BranchMisses, 40),
            ],
            &[
                ("machine-clears", 2),
                ("slots", 6000),
                ("topdown-retiring", 3000),
                ("topdown-bad-spec", 600),
                ("topdown-fe-bound", 1200),
                ("topdown-be-bound", 1200),
                ("topdown-br-mispredict", 480),
            ],
        );
        let s = cpi_stack(&v, &Latencies::assumed()).unwrap();
        let b = part(&s, "branch_mispredict");
        assert!((b.penalty_cycles - 2.0).abs() < 1e-12, "{b:?}");
        let c = part(&s, "machine_clears");
        assert!((c.penalty_cycles - 10.0).abs() < 1e-12, "{c:?}");
        assert!((b.cpi + c.cpi - 100.0 / 800.0).abs() < 1e-12);
    }

    #[test]
    fn given_latencies_replace_the_levels_named() {
        let l = Latencies::given("L2=14, llc=48,dram=310").unwrap();
        assert_eq!(
            (l.l2.cycles, l.llc.cycles, l.dram.cycles),
            (14.0, 48.0, 310.0)
        );
        assert!(l.l2.measured.is_some() && l.l1.measured.is_none());
        for bad in ["", "l3=4", "l2=0", "l2=x", "l2=4,l2=5", "l2"] {
            let e = Latencies::given(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("bad latencies {bad:?}")), "{e}");
        }
    }

    #[test]
    fn no_stack_without_cycles_or_any_part() {
        use CounterEvent as E;
        let only_cpi = values(&[(E::Cycles, 10), (E::Instructions, 5)], &[]);
        assert_eq!(cpi_stack(&only_cpi, &Latencies::assumed()), None);
        let no_cycles = values(&[(E::Instructions, 5), (E::BranchMisses, 1)], &[]);
        assert_eq!(cpi_stack(&no_cycles, &Latencies::assumed()), None);
    }
}
