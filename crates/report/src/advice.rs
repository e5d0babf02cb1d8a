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
        Figure {
            value,
            ci95_low: Some(low),
            ci95_high: Some(high),
            unsteady: None,
        }
    }

    pub fn from_ratio(r: &Ratio) -> Self {
        Figure {
            value: r.ratio,
            ci95_low: r.ci95_low,
            ci95_high: r.ci95_high,
            unsteady: None,
        }
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

/// A figure measured beside one partner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partnered {
    pub partner: String,
    pub figure: Figure,
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

/// The recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recommendation {
    KeepOn,
    TurnOff,
    Depends,
    CannotTell,
    NoSmt,
}

/// What an "it depends" answer depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dependence {
    TailLatencyTarget,
    PartnerKind,
}

impl Dependence {
    pub fn words(self) -> &'static str {
        match self {
            Dependence::TailLatencyTarget => "the tail-latency target",
            Dependence::PartnerKind => "the partner kind",
        }
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

fn says_of(lean: Lean, above: Says) -> Says {
    let below = if above == Says::On {
        Says::Off
    } else {
        Says::On
    };
    match lean {
        Lean::Above => above,
        Lean::Below => below,
        Lean::Neither => Says::Unclear,
    }
}

fn reason(what: &str, figure: &Figure, shown: String, says: Says) -> Reason {
    Reason {
        what: what.into(),
        figure: figure.clone(),
        shown,
        says,
        deciding: false,
    }
}

/// The recommendation the evidence supports (see the module documentation for the rules).
pub fn decide(e: &Evidence) -> Advice {
    let mut reasons: Vec<Reason> = Vec::new();
    let advice = |rec: Recommendation,
                  answer: String,
                  at: Option<String>,
                  depends_on: Vec<Dependence>,
                  because: String,
                  reasons: Vec<Reason>| Advice {
        workload: e.workload.clone(),
        recommendation: rec,
        answer,
        at,
        depends_on,
        because,
        reasons,
        latency_sweeps: e.latency_sweeps.clone(),
    };

    if let Some(b) = &e.baseline {
        reasons.push(reason(
            &format!("the workload on {}", b.placement),
            &b.figure,
            b.figure.absolute(&b.unit),
            Says::Context,
        ));
    }
    if let Some(l) = &e.latency {
        let (base, other) = &l.placements;
        reasons.push(reason(
            &format!("p99 under load on {base}"),
            &l.base_ms,
            l.base_ms.absolute("ms"),
            Says::Context,
        ));
        if let Some(r) = &l.ratio {
            reasons.push(reason(
                &format!("p99 under load ({other}/{base})"),
                r,
                r.pct(),
                Says::Context,
            ));
        }
    }
    if let Some(h) = &e.headroom {
        let p = |v: f64| format!("{:.0}%", v * 100.0);
        reasons.push(reason(
            &format!("throughput left at {:.0}% busy", h.reported_busy_pct),
            &h.left,
            format!(
                "{} [{}, {}]",
                p(h.left.value),
                h.left.ci95_low.map_or("-".into(), p),
                h.left.ci95_high.map_or("-".into(), p)
            ),
            Says::Context,
        ));
    }

    if !e.smt {
        if e.second_core.is_none() && e.single_threaded {
            return advice(
                Recommendation::NoSmt,
                "no SMT here (single-threaded: a second core had nothing to do)".into(),
                None,
                Vec::new(),
                "the machine shows no SMT siblings, and the workload runs one thread".into(),
                reasons,
            );
        }
        let Some(f) = &e.second_core else {
            // The side that was not measured is the cause; without SMT siblings there
            // was no other to measure.
            let because = match e.unmeasured.first() {
                Some(why) => format!("{why} (and the machine shows no SMT siblings)"),
                None => "the machine shows no SMT siblings".into(),
            };
            return advice(
                Recommendation::NoSmt,
                "no SMT here (one placement measured: nothing to compare)".into(),
                None,
                Vec::new(),
                because,
                reasons,
            );
        };
        let mut r = reason("2 cores vs 1 (2c1t/1c1t)", f, f.pct(), Says::Context);
        r.deciding = true;
        reasons.push(r);
        return advice(
            Recommendation::NoSmt,
            format!("no SMT here (2 cores vs 1: {})", f.pct()),
            None,
            Vec::new(),
            format!("a second core adds {}", f.pct()),
            reasons,
        );
    }

    // Every figure measured becomes a reason, in a fixed order.
    let throughput_idx = {
        let mut idx = None;
        if let Some(f) = &e.machine_gain {
            idx = Some(reasons.len());
            let half = e
                .machine_half
                .as_ref()
                .map(|on| format!("speed-up, half the machine ({on}/half-cores-1t)"));
            let switched_half = e
                .machine_half
                .as_ref()
                .map(|on| format!("speed-up, half the machine (SMT on {on}/off half-cores-1t)"));
            reasons.push(reason(
                match (&half, &switched_half) {
                    (_, Some(h)) if e.machine_switched => h,
                    _ if e.machine_switched => "speed-up, machine (SMT on/off)",
                    (Some(h), _) => h,
                    (None, _) => "speed-up, machine (all/cores)",
                },
                f,
                f.pct(),
                says_of(f.lean(1.0), Says::On),
            ));
        }
        if let Some(f) = &e.sibling_gain {
            if idx.is_none() {
                idx = Some(reasons.len());
            }
            reasons.push(reason(
                "speed-up, sibling added (1c2t/1c1t)",
                f,
                f.pct(),
                says_of(f.lean(1.0), Says::On),
            ));
        }
        if e.idle_sibling {
            idx = None;
        }
        idx
    };
    if let Some(f) = &e.sibling_vs_core {
        reasons.push(reason(
            "sibling vs second core (1c2t/2c1t)",
            f,
            f.times(),
            Says::Context,
        ));
    }
    let capacity_idx = e.capacity.as_ref().map(|c| {
        reasons.push(reason(
            &format!(
                "capacity at {} ({})",
                c.target,
                if c.switched {
                    "SMT on/off"
                } else {
                    "1c2t/1c1t"
                }
            ),
            &c.on_over_off,
            c.on_over_off.pct(),
            says_of(c.on_over_off.lean(1.0), Says::On),
        ));
        reasons.len() - 1
    });
    let penalty_idx = e.penalty.as_ref().map(|p| {
        reasons.push(reason(
            &format!("run time beside busy sibling ({})", p.partner),
            &p.figure,
            p.figure.pct(),
            says_of(p.figure.lean(1.0), Says::Off),
        ));
        reasons.len() - 1
    });
    let partner_idx: Vec<usize> = e
        .partners
        .iter()
        .map(|p| {
            reasons.push(reason(
                &format!("core shared with {} (pair/serial)", p.partner),
                &p.figure,
                p.figure.times(),
                says_of(p.figure.lean(1.0), Says::On),
            ));
            reasons.len() - 1
        })
        .collect();
    let decide_on = |reasons: &mut Vec<Reason>, idx: &[usize]| {
        for &i in idx {
            reasons[i].deciding = true;
        }
    };

    // A latency target given: the capacity at it decides.
    if let (Some(c), Some(i)) = (&e.capacity, capacity_idx) {
        decide_on(&mut reasons, &[i]);
        let at = Some(c.target.clone());
        let shown = c.on_over_off.pct();
        return match reasons[i].says {
            Says::On => advice(
                Recommendation::KeepOn,
                format!("keep SMT on at {}", c.target),
                at,
                Vec::new(),
                format!("SMT on serves {shown} more load at {}", c.target),
                reasons,
            ),
            Says::Off => advice(
                Recommendation::TurnOff,
                format!("turn SMT off at {}", c.target),
                at,
                Vec::new(),
                format!("SMT on serves {shown} load at {}", c.target),
                reasons,
            ),
            _ => advice(
                Recommendation::CannotTell,
                format!("cannot tell at {}", c.target),
                at,
                Vec::new(),
                format!(
                    "capacity at {} with SMT on vs off: {shown}, the interval includes no change",
                    c.target
                ),
                reasons,
            ),
        };
    }

    let throughput = throughput_idx.map(|i| reasons[i].says);
    let partners_on: Vec<usize> = partner_idx
        .iter()
        .copied()
        .filter(|&i| reasons[i].says == Says::On)
        .collect();
    let partners_off: Vec<usize> = partner_idx
        .iter()
        .copied()
        .filter(|&i| reasons[i].says == Says::Off)
        .collect();
    let partners_split = !partners_on.is_empty() && !partners_off.is_empty();
    let penalty_off = penalty_idx.filter(|&i| reasons[i].says == Says::Off);
    // Partner k's reason is at partner_idx[k].
    let names = |idx: &[usize]| {
        idx.iter()
            .filter_map(|i| partner_idx.iter().position(|j| j == i))
            .map(|k| e.partners[k].partner.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };

    let mut depends = Vec::new();
    let mut deciding: Vec<usize> = Vec::new();
    let mut because = Vec::new();
    if partners_split {
        depends.push(Dependence::PartnerKind);
        deciding.extend(partners_on.iter().chain(&partners_off));
        because.push(format!(
            "on beside {}, off beside {}",
            names(&partners_on),
            names(&partners_off)
        ));
    }
    match (throughput, throughput_idx) {
        (Some(Says::On), Some(i)) => {
            if let Some(p) = penalty_off {
                depends.insert(0, Dependence::TailLatencyTarget);
                deciding.extend([i, p]);
                because.insert(
                    0,
                    format!(
                        "on for throughput ({}), off where single requests must be fast (run time beside a busy sibling {})",
                        reasons[i].shown, reasons[p].shown
                    ),
                );
            } else if depends.is_empty() {
                decide_on(&mut reasons, &[i]);
                let b = format!("SMT on is faster: {}", reasons[i].shown);
                return advice(
                    Recommendation::KeepOn,
                    "keep SMT on".into(),
                    None,
                    Vec::new(),
                    b,
                    reasons,
                );
            }
        }
        (Some(Says::Off), Some(i)) if depends.is_empty() => {
            decide_on(&mut reasons, &[i]);
            let b = format!("SMT on is slower: {}", reasons[i].shown);
            return advice(
                Recommendation::TurnOff,
                "turn SMT off".into(),
                None,
                Vec::new(),
                b,
                reasons,
            );
        }
        (None, _) if depends.is_empty() => {
            // Only co-runs measured (a `corun` run): every partner on one side decides.
            let all = |side: &[usize]| !side.is_empty() && side.len() == partner_idx.len();
            if penalty_idx.is_none() && (all(&partners_on) || all(&partners_off)) {
                let on = all(&partners_on);
                decide_on(&mut reasons, &partner_idx);
                let (rec, answer, word) = match on {
                    true => (Recommendation::KeepOn, "keep SMT on", "pays"),
                    false => (Recommendation::TurnOff, "turn SMT off", "costs"),
                };
                let b = format!(
                    "sharing a core {word} with every partner measured ({})",
                    names(&partner_idx)
                );
                return advice(rec, answer.into(), None, Vec::new(), b, reasons);
            }
            if let Some(p) = penalty_off {
                // One thread: SMT gives it nothing, and a busy sibling slows it.
                depends.push(Dependence::TailLatencyTarget);
                deciding.push(p);
                because.push(format!(
                    "one thread: the sibling adds nothing to it, and next to a busy sibling its run time is {}",
                    reasons[p].shown
                ));
            }
        }
        _ => {}
    }
    if !depends.is_empty() {
        decide_on(&mut reasons, &deciding);
        let words: Vec<&str> = depends.iter().map(|d| d.words()).collect();
        return advice(
            Recommendation::Depends,
            format!("it depends on {}", words.join(" and ")),
            None,
            depends,
            because.join("; "),
            reasons,
        );
    }
    let because = match throughput_idx {
        Some(i) => {
            decide_on(&mut reasons, &[i]);
            format!(
                "{}: {}, the interval includes no change",
                reasons[i].what, reasons[i].shown
            )
        }
        None if e.idle_sibling => {
            "one thread: its sibling stays idle, so SMT neither helps nor costs it alone".into()
        }
        None => "no figure measured that shows SMT at work".into(),
    };
    advice(
        Recommendation::CannotTell,
        "cannot tell".into(),
        None,
        Vec::new(),
        because,
        reasons,
    )
}

mod evidence;
mod formats;
mod scaling;

pub use evidence::{
    add_unmeasured, advise_run, evidence, headroom, offered_rate, sweep_side, workload_name,
};
pub(crate) use formats::section;
pub use formats::{AdviceDoc, behind_words, json, markdown, text};
pub use scaling::{
    Scaling, WholeMachine, markdown as scaling_markdown, scaling, text as scaling_text,
};

#[cfg(test)]
mod tests;
