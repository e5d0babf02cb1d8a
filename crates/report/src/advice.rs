//! The answer to "should SMT be on for this workload on this machine?": one
//! recommendation per workload with the measured figures that decide it.
//!
//! [`decide`] is a pure function from [`Evidence`] (figures with their 95% intervals)
//! to an [`Advice`]: **keep SMT on**, **turn SMT off**, **it depends** (on the
//! tail-latency target, on the kind of partner sharing the core), **cannot tell**, or
//! **no SMT here** (with what the machine can answer instead: 2 cores against 1).
//! [`evidence`] reads the evidence from a run's cells, so `smtlab advise` and the
//! report's first screen give the same answer for the same cells.
//!
//! The rules, so that an answer can be checked by hand:
//! * A figure **leans** one way only when its whole 95% interval is on that side of its
//!   break-even point (1 for a ratio); an interval that includes it, a figure without an
//!   interval (one sample) and a figure from an unsteady cell lean neither way. Nothing
//!   is decided on a figure that leans neither way: that is "cannot tell", never a coin
//!   flip.
//! * With a latency target (`--slo p99=5ms`), the **capacity at the target** decides:
//!   the highest offered rate meeting it with SMT on against with SMT off (a workload
//!   with a [`SLO_PARAM`] parameter, such as `web-slo`). Above 1: keep SMT on at that
//!   target; below 1: turn it off at that target.
//! * Otherwise **throughput** (the speed-up, turned so that above 1 is better) decides: SMT on over off for the whole machine where both
//!   states were measured (or `all` over `cores`), else what the sibling adds (`1c2t`
//!   over `1c1t`). A workload whose SMT side left the siblings idle (one thread) has no
//!   throughput figure.
//! * Throughput says "on", but the **single-thread cost** (the workload's own run time
//!   next to a busy sibling, measured where asked) leans to slower: it depends on the
//!   tail-latency target.
//! * **Partners** (co-run on the sibling): the pair's combined speed on one core against
//!   running one after the other; some partners above 1 and others below: it depends on
//!   the partner kind. Where only co-runs were measured, every partner above 1 says keep
//!   SMT on, every one below says turn it off.
//! * The sibling against a second core (`1c2t` over `2c1t`) and the **headroom** are
//!   shown as context: they explain, they do not decide.
//! * A server's **latency sweep** (open-loop p50/p99/p99.9 at the same offered rates on
//!   each side, [`LatencySweep`]) is shown beside the answer and never decides: a
//!   latency target given (`--slo`) is decided by the capacity at it, and without one
//!   there is no target to judge a percentile against.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smtlab_model::keys::Form;
use smtlab_model::stats::{Ratio, Significance};
use smtlab_model::verdict::{PairKind, Verdict, idle_sibling, verdict};
use smtlab_model::{CellRecord, RunResults};

use crate::fmt::params as params_text;

/// The schema of the advice JSON (`smtlab advise --json`).
pub const ADVICE_SCHEMA: &str = "smtlab.advice/1";

/// A measured figure with its 95% interval: a ratio (break-even 1) or a rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub value: f64,
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
    /// Why a cell behind the figure would not repeat (its samples or rounds disagree),
    /// or, starting [`AT_LIMIT`], which cell's figure reached a limit of the
    /// measurement and is a bound: either way the figure leans neither way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsteady: Option<String>,
}

/// How [`Figure::unsteady`] starts for a figure at a limit.
pub const AT_LIMIT: &str = "at a limit: ";

/// Where a figure's interval lies against its break-even point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lean {
    /// The whole interval is above.
    Above,
    /// The whole interval is below.
    Below,
    /// The interval includes it, there is no interval, or a cell is unsteady.
    Neither,
}

impl Figure {
    pub fn new(value: f64, low: f64, high: f64) -> Self {
        Figure::with_ci(value, Some(low), Some(high))
    }

    /// A steady figure with its interval, where it has one.
    pub fn with_ci(value: f64, ci95_low: Option<f64>, ci95_high: Option<f64>) -> Self {
        Figure {
            value,
            ci95_low,
            ci95_high,
            unsteady: None,
        }
    }

    /// A mean with its 95% interval (none below two samples).
    pub fn of_mean(s: &smtlab_model::Summary, unsteady: Option<String>) -> Self {
        let ci = (s.n > 1).then_some(s.ci95_half_width);
        Figure {
            value: s.mean,
            ci95_low: ci.map(|h| s.mean - h),
            ci95_high: ci.map(|h| s.mean + h),
            unsteady,
        }
    }

    pub fn from_ratio(r: &Ratio) -> Self {
        Figure::with_ci(r.ratio, r.ci95_low, r.ci95_high)
    }

    /// The speed-up of a [`Verdict`], unsteady when the verdict says so.
    pub fn from_verdict(v: &Verdict) -> Self {
        Figure {
            // A figure at a limit is a bound: like an unsteady one it leans neither way.
            unsteady: v
                .at_limit
                .as_ref()
                .map(|l| format!("{AT_LIMIT}{l}"))
                .or_else(|| v.unsteady.clone()),
            ..Figure::from_ratio(&v.speedup)
        }
    }

    /// What the figure's interval says, as a verdict's words: a figure at a limit or
    /// unsteady, a ratio whose interval includes 1 (not significant).
    fn words(&self) -> (Significance, Option<&str>, Option<&str>) {
        let at_limit = self
            .unsteady
            .as_deref()
            .and_then(|w| w.strip_prefix(AT_LIMIT));
        let unsteady = self.unsteady.as_deref().filter(|_| at_limit.is_none());
        let significance = match (self.ci95_low, self.ci95_high) {
            (Some(lo), _) if lo > 1.0 => Significance::Faster,
            (_, Some(hi)) if hi < 1.0 => Significance::Slower,
            (Some(_), Some(_)) => Significance::NotSignificant,
            _ => Significance::NoInterval,
        };
        (significance, unsteady, at_limit)
    }

    /// What follows a figure that leans neither way whatever its interval.
    fn flag(&self) -> String {
        match self.words() {
            (_, _, Some(which)) => format!(" at a limit ({which})"),
            (_, Some(why), None) => format!(" unsteady ({why})"),
            _ => String::new(),
        }
    }

    /// Where the interval lies against `x`.
    pub fn lean(&self, x: f64) -> Lean {
        if self.unsteady.is_some() {
            return Lean::Neither;
        }
        match (self.ci95_low, self.ci95_high) {
            (Some(lo), _) if lo > x => Lean::Above,
            (_, Some(hi)) if hi < x => Lean::Below,
            _ => Lean::Neither,
        }
    }

    /// A ratio as a change in percent with its interval and what the interval says, as
    /// every gain is written ([`crate::fmt::gain_words`]): `+30% [+25%, +35%]`,
    /// `+13% [-6.2%, +39%] not significant at 95%`.
    pub fn pct(&self) -> String {
        let (significance, unsteady, at_limit) = self.words();
        crate::fmt::gain_words(
            self.value,
            self.ci95_low,
            self.ci95_high,
            significance,
            unsteady,
            at_limit,
        )
    }

    /// The words [`Figure::pct`] writes after the interval (`not significant at 95%`,
    /// `unsteady (why)`), if any: a narrow table puts them under the figure's row.
    pub fn words_text(&self) -> Option<String> {
        let bare = crate::fmt::gain_ci(self.value, self.ci95_low, self.ci95_high);
        let full = self.pct();
        let words = full.strip_prefix(&bare)?.trim();
        (!words.is_empty()).then(|| words.to_string())
    }

    /// A ratio as `1.300x [1.250, 1.350]`.
    pub fn times(&self) -> String {
        let mut s = crate::fmt::ratio_ci(self.value, self.ci95_low, self.ci95_high);
        s.push_str(&self.flag());
        s
    }

    /// A rate or other absolute figure: `1234 [1200, 1270]`.
    pub fn absolute(&self, unit: &str) -> String {
        let n = crate::fmt::num;
        let mut s = match (self.ci95_low, self.ci95_high) {
            (Some(lo), Some(hi)) => format!("{} [{}, {}] {unit}", n(self.value), n(lo), n(hi)),
            _ => format!("{} {unit}", n(self.value)),
        };
        s.push_str(&self.flag());
        s
    }
}

/// The p99 latency a server's requests saw under the load of its cells (web-static's
/// connections), the mean of the samples' p99 with its interval: on the baseline, and
/// the SMT side over it (above 1: slower with the sibling busy too). Context beside
/// the throughput: the same load, not a latency target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyAtLoad {
    /// The baseline placement (`1c1t`) and the SMT side (`1c2t`).
    pub placements: (String, String),
    /// p99 on the baseline, in milliseconds.
    pub base_ms: Figure,
    /// p99 on the SMT side over the baseline's.
    pub ratio: Option<Figure>,
}

/// The benchmark parameter of an open loop's offered rate (`web-static rate=R`, requests
/// per second; 0 or absent: closed loop): a cell with it is a point of a workload's
/// latency sweep, not a workload of its own.
pub const RATE_PARAM: &str = smtlab_model::metrics::web::RATE_PARAM;

/// The share of the offered rate a side must serve, in every sample and without an
/// error, for its percentiles to be shown: below it the server did not keep up, and its
/// percentiles (of the requests it did answer) would describe a load it never carried.
pub const KEPT_UP_SHARE: f64 = 0.95;

/// One side of the SMT question at one offered rate: what it served and, where it kept
/// up, its latency percentiles (the mean of the samples', with their 95% interval).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSide {
    pub placement: String,
    /// Requests per second served, the mean of the samples.
    pub achieved_per_s: f64,
    /// Every sample served at least [`KEPT_UP_SHARE`] of the offered rate, without error.
    pub kept_up: bool,
    /// Failed requests over the samples.
    #[serde(default)]
    pub errors: u64,
    /// Requests that came due but were never sent, over the samples.
    #[serde(default)]
    pub unsent: u64,
    /// Samples measured.
    pub n: usize,
    /// Samples that served under [`KEPT_UP_SHARE`] of the offered rate.
    #[serde(default)]
    pub behind_samples: usize,
    /// Percentiles in milliseconds; absent where the side did not keep up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<Figure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<Figure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999_ms: Option<Figure>,
}

/// One offered rate and each side measured at it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Requests per second offered (open loop), the same on every side.
    pub offered_per_s: f64,
    /// In the order of [`LatencySweep::placements`]; a side not measured is left out.
    pub sides: Vec<SweepSide>,
}

/// A server's latency at load: open-loop percentiles at a sweep of offered rates, on
/// the baseline and on the SMT side (`1c1t` and `1c2t`, or `half-cores-1t` and
/// `half-cores-Kt`), the rates the same on both. Context, never deciding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySweep {
    /// The baseline placement and the SMT side.
    pub placements: (String, String),
    /// By offered rate, lowest first.
    pub points: Vec<SweepPoint>,
}

/// The capacity at a latency target on each side, found by search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// The target as written: `p99 <= 5 ms`.
    pub target: String,
    /// Capacity with SMT on over off (the whole machine in both states, else `1c2t` over
    /// `1c1t`): above 1, SMT on serves more at the target.
    pub on_over_off: Figure,
    /// `on_over_off` compares the two SMT states (else `1c2t` with `1c1t`).
    #[serde(default)]
    pub switched: bool,
}

/// How the reason of a partner predicted, not measured, names the run it comes from.
pub const PREDICTED: &str = "predicted by predict run";

/// A figure measured beside one partner, or predicted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partnered {
    pub partner: String,
    pub figure: Figure,
    /// Not measured: predicted by the model of this stored `predict` run, the interval
    /// its 95% prediction interval. Shown, never deciding the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_by_run: Option<i64>,
}

/// Reported utilisation against what the machine can still do (paper 004 section 7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headroom {
    /// What the OS reports busy, in percent, at the step measured.
    pub reported_busy_pct: f64,
    /// Throughput still left at that step, as a share of the maximum (1 = all of it).
    pub left: Figure,
}

/// What was measured of one workload, each figure with its interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The workload and its parameters (`int-ops threads=auto`, `exec command=make`).
    pub workload: String,
    /// The machine has SMT (visible, or switchable on).
    pub smt: bool,
    /// `1c2t` over `1c1t`: what the sibling adds.
    pub sibling_gain: Option<Figure>,
    /// `1c2t` over `2c1t`: the sibling against a second core.
    pub sibling_vs_core: Option<Figure>,
    /// SMT on over off on the whole machine (or `all` over `cores`).
    pub machine_gain: Option<Figure>,
    /// `machine_gain` compares the two SMT states (not `all` with `cores`).
    #[serde(default)]
    pub machine_switched: bool,
    /// `machine_gain` is half the machine's, a server's (`half-cores-Kt` over
    /// `half-cores-1t`, its clients on the other half): the SMT side's placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_half: Option<String>,
    /// A server's tail latency under the load that measured it (its samples' p99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyAtLoad>,
    /// A server's latency at a sweep of offered rates on each side of the SMT question.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_sweeps: Vec<LatencySweep>,
    /// `2c1t` over `1c1t`: a second core.
    pub second_core: Option<Figure>,
    /// The SMT side ran one thread per core: the workload leaves its sibling idle.
    #[serde(default)]
    pub idle_sibling: bool,
    /// The workload ran one thread on `2c1t` too: a second core had nothing to do.
    #[serde(default)]
    pub single_threaded: bool,
    /// Capacity at the user's latency target, where asked.
    #[serde(default)]
    pub capacity: Option<Capacity>,
    /// The single-thread cost: the workload's run time next to the worst busy sibling
    /// over alone (above 1: slower), where asked.
    #[serde(default)]
    pub penalty: Option<Partnered>,
    /// Per partner on the sibling: the pair's combined speed on one core over running
    /// one after the other (above 1: sharing the core pays).
    #[serde(default)]
    pub partners: Vec<Partnered>,
    #[serde(default)]
    pub headroom: Option<Headroom>,
    /// Placements planned and not measured, each with why (`2c1t was not measured:
    /// ...`), from [`add_unmeasured`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmeasured: Vec<String>,
    /// The workload's own figure on `1c1t` (mean with its 95% interval), for scale.
    #[serde(default)]
    pub baseline: Option<Baseline>,
}

/// A workload's mean on one placement, with its interval and unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub placement: String,
    pub figure: Figure,
    pub unit: String,
}

/// The benchmark parameter of a latency target (`slo=p99=5ms`): a workload that has it
/// measures a capacity at that target, so its speed-ups are capacities at the target.
pub const SLO_PARAM: &str = "slo";

smtlab_model::named_enum! {
    fn words;
    /// The recommendation; `words`: in a few words, as the fleet's tally counts it.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Recommendation {
        KeepOn = "keep SMT on",
        TurnOff = "turn SMT off",
        Depends = "it depends",
        CannotTell = "cannot tell",
        NoSmt = "no SMT here",
    }
}

smtlab_model::named_enum! {
    fn words;
    /// What an "it depends" answer depends on.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Dependence {
        TailLatencyTarget = "the tail-latency target",
        PartnerKind = "the partner kind",
    }
}

/// Which way a reason points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Says {
    /// Toward SMT on.
    On,
    /// Toward SMT off.
    Off,
    /// Its interval includes break-even: it says nothing either way.
    Unclear,
    /// Context: shown, not deciding.
    Context,
}

/// One measured figure behind an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reason {
    /// What the figure is, in words.
    pub what: String,
    pub figure: Figure,
    /// The figure as shown (`+30% [+25%, +35%]`, `1234 [1200, 1270] req/s`).
    pub shown: String,
    pub says: Says,
    /// Whether the recommendation rests on it.
    pub deciding: bool,
}

/// One workload's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    pub workload: String,
    pub recommendation: Recommendation,
    /// The answer in one line: `keep SMT on`, `turn SMT off at p99 <= 5 ms`, `it depends
    /// on the partner kind`, `cannot tell`, `no SMT here (2 cores vs 1: +96% [...])`.
    pub answer: String,
    /// The latency target the answer holds at, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<Dependence>,
    /// Why, in a few words (`SMT on is faster: +30% [+25%, +35%]`).
    pub because: String,
    /// `because` without the deciding figure it quotes (`SMT on is faster`), for the
    /// views that show that figure in its own row: the figure is said once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because_words: Option<String>,
    pub reasons: Vec<Reason>,
    /// A server's latency at offered rates on each side: evidence shown beside the
    /// answer, never deciding it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_sweeps: Vec<LatencySweep>,
}

impl Advice {
    /// The reasons the recommendation rests on.
    pub fn deciding(&self) -> impl Iterator<Item = &Reason> {
        self.reasons.iter().filter(|r| r.deciding)
    }
}

/// The recommendation the evidence supports (see the module documentation for the rules).
pub fn decide(e: &Evidence) -> Advice {
    rules::decide(e)
}

mod evidence;
mod formats;
mod rules;
mod scaling;

pub use evidence::{
    add_predicted_partners, add_unmeasured, advise_run, evidence, headroom, offered_rate,
    sweep_side, workload_name,
};
pub(crate) use formats::section;
pub use formats::{AdviceDoc, behind_words, json, markdown, text, without_smt};
pub use scaling::{
    Scaling, WholeMachine, markdown as scaling_markdown, scaling, text as scaling_text,
};

#[cfg(test)]
mod tests;
