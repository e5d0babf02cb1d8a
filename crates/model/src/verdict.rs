//! The one verdict on two cells of a benchmark: how much better the second is, with its
//! 95% interval, and in which words. Every output that compares two cells (`bench`,
//! `exec`, `report`'s yields and exec section, the Markdown table, the results JSON's
//! `speedups`, and `compare`) takes its figure, sign and words from [`verdict`], so
//! they cannot disagree.
//!
//! The definition, so that it can be reproduced elsewhere:
//! * the value is [`stats::speedup`]: the ratio of the **means** of the two cells'
//!   samples in the benchmark's own unit, turned by direction so that above 1 means
//!   the second is better, with Fieller's 95% interval. For a time of a fixed amount of
//!   work (`exec`, latencies) the ratio of mean times is the ratio of throughputs over
//!   all samples (total work / total time); per-sample rates `1/t` are never averaged,
//!   because their mean is pulled up by the fastest samples and a single slow outlier
//!   then gives the two forms opposite signs.
//! * the words: `faster` / `slower` when the whole interval is above / below 1,
//!   `not significant at 95%` when it includes 1, `n=1, no interval` with a single
//!   sample on a side, and `unsteady` when either cell's samples or rounds disagree
//!   beyond their own interval ([`crate::CellResult::unsteady_reason`]) or either cell
//!   is disturbed (steal or other processes took more than 2% of its CPUs' time,
//!   [`crate::CellResult::disturbed_reason`]): such a cell's figure would not repeat or
//!   is not its own, so it is called neither faster nor slower; and `at a limit` when
//!   either cell's figure reached a limit of the measurement
//!   ([`crate::CellResult::limit`]: a search's range end, a configured ceiling, the
//!   load generator's own limit), which makes it a bound and its ratio no speed-up.
//!   A cell at a limit is named first: its figure is no level at all.
//! * the p-value is Welch's test of equal means ([`stats::welch_p_value`]), for outputs
//!   that correct for many comparisons at once (`compare`).
//!
//! An SMT pair whose SMT side left every sibling idle ([`idle_sibling`]: a benchmark
//! that runs one thread whatever the placement) compares the same work twice; it gets
//! no yield (see [`pairs`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::placement::Named;
use crate::stats::{self, Ratio, Significance};
use crate::{CellRecord, CpuOrder};

/// What [`verdict`] says of the second of two cells against the first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The speed-up with its 95% interval; above 1 means the second is better.
    pub speedup: Ratio,
    /// What the interval says about 1, or `Unsteady` (see the module documentation).
    pub significance: Significance,
    /// Why a cell is unsteady or disturbed, naming it (`1c2t: CV 31%`,
    /// `all: disturbed: steal 4.2%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsteady: Option<String>,
    /// Which cell reached a limit, naming it and the limit (`1c1t: at least 64
    /// (configured ceiling)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_limit: Option<String>,
    /// Welch's two-sided p-value for equal means; `None` with one sample on a side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
}

/// The verdict on `second` against `first` (cells of one benchmark: the direction is
/// `first`'s), naming each cell by its placement. `None` when there is no ratio (a side
/// without samples, a zero or non-finite mean).
pub fn verdict(first: &CellRecord, second: &CellRecord) -> Option<Verdict> {
    verdict_named(
        first,
        second,
        [&first.placement.name, &second.placement.name],
    )
}

/// [`verdict`] with the names unsteady cells are called by (`A`, `B` in a comparison of
/// two runs, where both cells have one placement).
pub fn verdict_named(first: &CellRecord, second: &CellRecord, names: [&str; 2]) -> Option<Verdict> {
    let (a, b) = (&first.result.summary, &second.result.summary);
    let speedup = stats::speedup(a, b, first.direction).filter(|r| r.ratio.is_finite())?;
    let reasons: Vec<String> = [first, second]
        .iter()
        .zip(names)
        .filter_map(|(c, name)| c.result.hold_back_reason().map(|w| format!("{name}: {w}")))
        .collect();
    let unsteady = (!reasons.is_empty()).then(|| reasons.join(", "));
    let limits: Vec<String> = [first, second]
        .iter()
        .zip(names)
        .filter_map(|(c, name)| {
            let l = c.result.limit()?;
            let value = l.limit.to_string();
            Some(format!("{name}: {}", l.bound_text(c.direction, &value)))
        })
        .collect();
    let at_limit = (!limits.is_empty()).then(|| limits.join(", "));
    let significance = if at_limit.is_some() {
        Significance::AtLimit
    } else if unsteady.is_some() {
        Significance::Unsteady
    } else {
        speedup.significance()
    };
    Some(Verdict {
        speedup,
        significance,
        unsteady,
        at_limit,
        p_value: stats::welch_p_value(a, b),
    })
}

/// Whether `smt`, a cell on a placement with two or more threads per core, left every
/// SMT sibling idle: its samples ran on one CPU only, or (threads spread over the cores
/// first, the default `spread` order) on no more CPUs than the placement has cores. Its
/// work was then that of the placement without SMT, and a ratio to that placement is
/// no SMT yield. `false` when the samples do not say which CPUs they used.
pub fn idle_sibling(smt: &CellRecord) -> bool {
    let p = &smt.placement;
    if p.threads_per_core < 2 {
        return false;
    }
    match smt.result.cpus_used() {
        Some(1) => true,
        Some(n) => p.cpu_order == CpuOrder::Spread && n <= p.cores as usize,
        None => false,
    }
}

named_enum! {
    /// Which pair of placements a [`PairVerdict`] compares, named as its ratio is called.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum PairKind {
        /// `1c2t` over `1c1t`: the SMT yield.
        SmtYield = "SMT yield",
        /// `2c2t` over `2c1t`.
        DualCoreSmtGain = "dual-core SMT gain",
        /// `all` over `cores`.
        MachineSmtGain = "machine SMT gain",
        /// `half-cores-2t` over `half-cores-1t`: a server's whole-machine gain, its clients
        /// on the other half of the cores.
        HalfMachineSmtGain = "half-machine SMT gain",
        /// `2c1t` over `1c1t`: a second core, what `exec` compares without SMT.
        SecondCore = "second core",
    }
}

impl PairKind {
    /// `(base, other)` placement names: the speed-up is of `other` over `base`.
    pub fn placements(self) -> (&'static str, &'static str) {
        let (base, other) = match self {
            PairKind::SmtYield => (Named::OneCore, Named::Siblings),
            PairKind::DualCoreSmtGain => (Named::TwoCores, Named::TwoCoresSmt),
            PairKind::MachineSmtGain => (Named::Cores, Named::All),
            PairKind::HalfMachineSmtGain => (Named::HalfCores, Named::HalfCoresSmt),
            PairKind::SecondCore => (Named::OneCore, Named::TwoCores),
        };
        (base.name(), other.name())
    }

    /// The pairs whose ratio is a yield of SMT, in the yield tables' column order.
    pub const YIELDS: [PairKind; 3] = [
        PairKind::SmtYield,
        PairKind::DualCoreSmtGain,
        PairKind::MachineSmtGain,
    ];

    /// Whether `other` adds SMT siblings to `base` (all but [`PairKind::SecondCore`]).
    pub fn is_smt(self) -> bool {
        self != PairKind::SecondCore
    }

    /// Column heading, `other/base`: `1c2t/1c1t`.
    pub fn heading(self) -> String {
        let (base, other) = self.placements();
        format!("{other}/{base}")
    }
}

/// One pair of cells of a benchmark and parameter set, and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairVerdict {
    pub benchmark: String,
    /// Parameters and the cell's conditions, flat (`CellRecord::flat_params`).
    pub params: BTreeMap<String, String>,
    pub kind: PairKind,
    /// The placement the speed-up is against.
    pub base: String,
    /// The placement whose speed-up it is.
    pub other: String,
    /// `None` when the pair compares the same work twice ([`idle_sibling`]).
    pub verdict: Option<Verdict>,
    /// The SMT side ran one thread per core: the siblings were idle, so the pair is no
    /// SMT yield (`1c2t` = `1c1t` with an idle sibling).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idle_sibling: bool,
}

/// Every pair of [`PairKind`] measured among `cells`, for each benchmark and parameter
/// set in order of first appearance, pairs in [`PairKind::ALL`] order. Cells are matched
/// by canonical placement name; a pair whose two cells ran on the same CPUs (`all` and
/// `cores` without SMT) is left out, and so is a pair without a ratio.
pub fn pairs(cells: &[CellRecord]) -> Vec<PairVerdict> {
    let mut out = Vec::new();
    let mut seen: Vec<&CellRecord> = Vec::new();
    for c in cells {
        if seen.iter().any(|s| s.same_variant(c)) {
            continue;
        }
        seen.push(c);
        let find = |name: &str| {
            cells
                .iter()
                .find(|o| o.same_variant(c) && o.placement.name == name)
        };
        for kind in PairKind::ALL {
            let (b, o) = kind.placements();
            let (Some(base), Some(other)) = (find(b), find(o)) else {
                continue;
            };
            if base.placement.cpu_set() == other.placement.cpu_set() {
                continue;
            }
            let idle = kind.is_smt() && idle_sibling(other);
            let v = if idle { None } else { verdict(base, other) };
            if v.is_none() && !idle {
                continue;
            }
            out.push(PairVerdict {
                benchmark: c.benchmark.clone(),
                params: c.flat_params(),
                kind,
                base: b.into(),
                other: o.into(),
                verdict: v,
                idle_sibling: idle,
            });
        }
    }
    out
}
