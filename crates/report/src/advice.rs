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

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smtlab_model::keys::Form;
use smtlab_model::stats::Ratio;
use smtlab_model::verdict::{PairKind, Verdict, idle_sibling, verdict};
use smtlab_model::{CellRecord, RunResults};

use crate::fmt::{params as params_text, signed_pct};

/// The schema of the advice JSON (`smtlab advise --json`).
pub const ADVICE_SCHEMA: &str = "smtlab.advice/1";

/// A measured figure with its 95% interval: a ratio (break-even 1) or a rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub value: f64,
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
    /// Why a cell behind the figure would not repeat (its samples or rounds disagree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsteady: Option<String>,
}

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
            unsteady: v.unsteady.clone(),
            ..Figure::from_ratio(&v.speedup)
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

    /// A ratio as a change in percent with its interval: `+30% [+25%, +35%]`.
    pub fn pct(&self) -> String {
        let p = |r: f64| signed_pct((r - 1.0) * 100.0);
        let mut s = match (self.ci95_low, self.ci95_high) {
            (Some(lo), Some(hi)) => format!("{} [{}, {}]", p(self.value), p(lo), p(hi)),
            _ => format!("{} (no interval)", p(self.value)),
        };
        if self.unsteady.is_some() {
            s.push_str(" unsteady");
        }
        s
    }

    /// A ratio as `1.300x [1.250, 1.350]`.
    pub fn times(&self) -> String {
        let mut s = crate::fmt::ratio_ci(self.value, self.ci95_low, self.ci95_high);
        if self.unsteady.is_some() {
            s.push_str(" unsteady");
        }
        s
    }

    /// A rate or other absolute figure: `1234 [1200, 1270]`.
    pub fn absolute(&self, unit: &str) -> String {
        let n = crate::fmt::num;
        let mut s = match (self.ci95_low, self.ci95_high) {
            (Some(lo), Some(hi)) => format!("{} [{}, {}] {unit}", n(self.value), n(lo), n(hi)),
            _ => format!("{} {unit}", n(self.value)),
        };
        if self.unsteady.is_some() {
            s.push_str(" unsteady");
        }
        s
    }
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
    /// `2c1t` over `1c1t`: a second core.
    pub second_core: Option<Figure>,
    /// The SMT side ran one thread per core: the workload leaves its sibling idle.
    #[serde(default)]
    pub idle_sibling: bool,
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
    };

    if let Some(b) = &e.baseline {
        reasons.push(reason(
            &format!("the workload on {}", b.placement),
            &b.figure,
            b.figure.absolute(&b.unit),
            Says::Context,
        ));
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
        let Some(f) = &e.second_core else {
            return advice(
                Recommendation::NoSmt,
                "no SMT here (one placement measured: nothing to compare)".into(),
                None,
                Vec::new(),
                "the machine shows no SMT siblings".into(),
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
            reasons.push(reason(
                if e.machine_switched {
                    "speed-up, machine (SMT on/off)"
                } else {
                    "speed-up, machine (all/cores)"
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

/// The cells' workloads: benchmark and parameters (the conditions experiments add are
/// apart from them).
fn workload_params(c: &CellRecord) -> BTreeMap<String, String> {
    c.params.clone()
}

/// A workload's name as the advice shows it: `int-ops threads=auto`.
pub fn workload_name(benchmark: &str, params: &BTreeMap<String, String>) -> String {
    if params.is_empty() {
        benchmark.to_string()
    } else {
        format!("{benchmark} {}", params_text(params))
    }
}

/// The headroom of a utilisation curve among `cells` (`smtlab util`, or `advise
/// --headroom`): at the step offering all of the measured maximum, what the OS reports
/// busy on the load's CPUs and the throughput still left (1 - achieved / maximum, with
/// its interval); SMT on where both states were measured.
pub fn headroom(cells: &[CellRecord]) -> Option<Headroom> {
    let points = crate::utilisation::curve(cells);
    let full = |state: &str| {
        points
            .iter()
            .find(|p| p.smt == state && p.offered_pct.is_some_and(|x| (x - 100.0).abs() < 1e-9))
    };
    let p = full("on").or_else(|| full("as found")).or_else(|| {
        points
            .iter()
            .find(|p| p.offered_pct.is_some_and(|x| (x - 100.0).abs() < 1e-9))
    })?;
    let r = p.of_max.as_ref()?;
    let busy = p.busy();
    if !busy.is_finite() {
        return None;
    }
    Some(Headroom {
        reported_busy_pct: busy * 100.0,
        left: Figure {
            value: 1.0 - r.ratio,
            ci95_low: r.ci95_high.map(|h| 1.0 - h),
            ci95_high: r.ci95_low.map(|l| 1.0 - l),
            unsteady: None,
        },
    })
}

/// The evidence of every workload among `cells` measured on at least two of the
/// placements the advice compares (or co-run), in order of first appearance; `smt`:
/// whether the machine has SMT. Utilisation steps are left out (they have no workload).
pub fn evidence(cells: &[CellRecord], smt: bool) -> Vec<Evidence> {
    let room = headroom(cells);
    let cells: Vec<&CellRecord> = cells
        .iter()
        .filter(|c| c.conditions.rate.is_none())
        .collect();
    let mut out: Vec<Evidence> = Vec::new();
    let mut seen: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    for c in &cells {
        if crate::corun::form_of(c).is_some() {
            continue;
        }
        let key = (c.benchmark.clone(), workload_params(c));
        if seen.contains(&key) {
            continue;
        }
        seen.push(key.clone());
        let mine: Vec<&CellRecord> = cells
            .iter()
            .copied()
            .filter(|o| {
                o.benchmark == key.0
                    && workload_params(o) == key.1
                    && crate::corun::form_of(o).is_none()
            })
            .collect();
        let find = |name: &str, state: Option<&str>| {
            mine.iter().copied().find(|o| {
                o.placement_spec == name
                    && match state {
                        Some(s) => o.smt().map(|x| x.name()) == Some(s),
                        None => o.smt().is_none_or(|x| x.name() != "off"),
                    }
            })
        };
        let pair = |kind: PairKind| {
            let (b, o) = kind.placements();
            let (base, other) = (find(b, None)?, find(o, None)?);
            if base.placement.cpu_set() == other.placement.cpu_set() {
                return None;
            }
            verdict(base, other).map(|v| (Figure::from_verdict(&v), other))
        };
        let mut e = Evidence {
            workload: workload_name(&key.0, &key.1),
            smt,
            ..Evidence::default()
        };
        if let Some((f, smt_cell)) = pair(PairKind::SmtYield) {
            e.idle_sibling = idle_sibling(smt_cell);
            e.sibling_gain = Some(f);
        }
        e.second_core = pair(PairKind::SecondCore).map(|(f, _)| f);
        if let (Some(core2), Some(sib)) = (find("2c1t", None), find("1c2t", None))
            && sib.placement.threads_per_core >= 2
        {
            e.sibling_vs_core = verdict(core2, sib).map(|v| Figure::from_verdict(&v));
        }
        // The whole machine: SMT on over off on `all`, else `all` over `cores`.
        let states = find("all", Some("off")).zip(find("all", Some("on")));
        e.machine_switched = states.is_some();
        e.machine_gain = match states {
            Some((off, on)) => verdict(off, on).map(|v| Figure::from_verdict(&v)),
            None => pair(PairKind::MachineSmtGain).map(|(f, _)| f),
        };
        if e.machine_gain.is_some() && !e.smt {
            // Switched on for the run: the machine has SMT, even if off as found.
            e.smt = true;
        }
        let base = find("1c1t", Some("off")).or_else(|| find("1c1t", None));
        e.baseline = base.map(|c| {
            let s = &c.result.summary;
            let steady = c.result.unsteady_reason();
            Baseline {
                placement: c.placement_spec.clone(),
                figure: Figure {
                    value: s.mean,
                    ci95_low: (s.n > 1).then_some(s.mean - s.ci95_half_width),
                    ci95_high: (s.n > 1).then_some(s.mean + s.ci95_half_width),
                    unsteady: steady,
                },
                unit: c.unit.clone(),
            }
        });
        if let Some(slo) = key.1.get(SLO_PARAM) {
            // A capacity at a latency target: its SMT comparison is the capacity's.
            let switched = e.machine_switched && e.machine_gain.is_some();
            let on_over_off = e
                .machine_gain
                .take()
                .or_else(|| (!e.idle_sibling).then(|| e.sibling_gain.clone()).flatten());
            e.sibling_gain = None;
            if let Some(f) = on_over_off {
                e.capacity = Some(Capacity {
                    target: slo_words(slo),
                    on_over_off: f,
                    switched,
                });
            }
        }
        e.penalty = worst_penalty(&cells, &key.0);
        e.partners = partners(&cells, &key.0);
        // On `1c1t` alone (no SMT, no second core for it) the answer says what it can.
        let measured = e.sibling_gain.is_some()
            || e.second_core.is_some()
            || e.machine_gain.is_some()
            || e.capacity.is_some()
            || e.penalty.is_some()
            || !e.partners.is_empty()
            || (e.baseline.is_some() && !e.smt);
        if measured {
            out.push(e);
        }
    }
    // A workload measured on `1c1t` alone is worth a row only when nothing in the run
    // compares (a server whose other placements left no CPU for its client); beside
    // compared workloads it is a sweep's point, not a question.
    let compared = |e: &Evidence| {
        e.second_core.is_some()
            || e.sibling_gain.is_some()
            || e.machine_gain.is_some()
            || e.capacity.is_some()
            || e.penalty.is_some()
            || !e.partners.is_empty()
    };
    if out.iter().any(compared) {
        out.retain(compared);
    }
    for e in &mut out {
        e.headroom.clone_from(&room);
    }
    // Workloads measured only in co-runs (a penalty run) get their answer too.
    for c in &cells {
        if crate::corun::form_of(c).is_none()
            || out
                .iter()
                .any(|e| e.workload.split(' ').next() == Some(&c.benchmark))
        {
            continue;
        }
        if seen.iter().any(|(b, _)| *b == c.benchmark) {
            continue;
        }
        seen.push((c.benchmark.clone(), BTreeMap::new()));
        let e = Evidence {
            workload: workload_name(&c.benchmark, &workload_params(c)),
            smt,
            penalty: worst_penalty(&cells, &c.benchmark),
            partners: partners(&cells, &c.benchmark),
            ..Evidence::default()
        };
        if e.penalty.is_some() || !e.partners.is_empty() {
            out.push(e);
        }
    }
    out
}

/// `p99=5ms` as `p99 <= 5ms`.
fn slo_words(slo: &str) -> String {
    match slo.split_once('=') {
        Some((p, t)) => format!("{} <= {}", p.trim(), t.trim()),
        None => slo.to_string(),
    }
}

/// The largest single-thread penalty of `task` next to a busy sibling.
fn worst_penalty(cells: &[&CellRecord], task: &str) -> Option<Partnered> {
    let owned: Vec<CellRecord> = cells
        .iter()
        .filter(|c| c.benchmark == task && crate::corun::form_of(c).is_some())
        .map(|c| (*c).clone())
        .collect();
    // A matrix cell names its partner even when alone; a penalty's alone cell names none.
    let is_penalty = owned
        .iter()
        .any(|c| crate::corun::form_of(c).is_some_and(|(f, p)| f == Form::Alone && p == "-"));
    if !is_penalty {
        return None;
    }
    crate::corun::penalties(&owned, task)
        .into_iter()
        .filter(|p| p.form == Form::Sibling)
        .filter_map(|p| p.ratio.map(|r| (p.hog, r)))
        .max_by(|a, b| a.1.ratio.total_cmp(&b.1.ratio))
        .map(|(hog, r)| Partnered {
            partner: hog,
            figure: Figure::from_ratio(&r),
        })
}

/// The co-run matrix's sibling entries of `a`: the pair's combined speed on one core.
fn partners(cells: &[&CellRecord], a: &str) -> Vec<Partnered> {
    let owned: Vec<CellRecord> = cells
        .iter()
        .filter(|c| crate::corun::form_of(c).is_some())
        .map(|c| (*c).clone())
        .collect();
    crate::corun::matrix(&owned)
        .into_iter()
        .filter(|en| en.a == a && en.form == Form::Sibling)
        .filter_map(|en| {
            let (sa, sb) = (en.slowdown?, en.partner_slowdown?);
            // 1/sA + 1/sB with the interval of each end: conservative bounds.
            let speed = |x: f64| 1.0 / x;
            let value = speed(sa.ratio) + speed(sb.ratio);
            let low = sa
                .ci95_high
                .zip(sb.ci95_high)
                .map(|(x, y)| speed(x) + speed(y));
            let high = sa
                .ci95_low
                .zip(sb.ci95_low)
                .map(|(x, y)| speed(x) + speed(y));
            Some(Partnered {
                partner: en.b,
                figure: Figure {
                    value,
                    ci95_low: low,
                    ci95_high: high,
                    unsteady: None,
                },
            })
        })
        .collect()
}

/// Every workload's advice among a run's cells.
pub fn advise_run(r: &RunResults) -> Vec<Advice> {
    evidence(&r.cells, r.run.topology.smt_visible())
        .iter()
        .map(decide)
        .collect()
}

/// The advice JSON document (`smtlab.advice/1`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdviceDoc {
    pub schema: String,
    /// The run the cells were saved in (0 when not stored).
    pub run: i64,
    /// One line per thing this machine could not measure.
    pub notes: Vec<String>,
    pub advice: Vec<Advice>,
}

/// The advice as pretty JSON with a trailing newline.
pub fn json(run: i64, notes: &[String], advice: &[Advice]) -> String {
    let doc = AdviceDoc {
        schema: ADVICE_SCHEMA.into(),
        run,
        notes: notes.to_vec(),
        advice: advice.to_vec(),
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

fn mark(says: Says) -> &'static str {
    match says {
        Says::On => "on",
        Says::Off => "off",
        Says::Unclear => "?",
        Says::Context => "",
    }
}

/// The terminal summary: per workload the answer, why, then each figure (its interval,
/// which way it points, `*` where the answer rests on it), fitted to `width`.
pub fn text(advice: &[Advice], width: usize) -> String {
    let layout = crate::table::Layout::fixed(width);
    let mut out = String::new();
    for a in advice {
        out.push_str(&crate::table::wrap(&a.workload, layout));
        out.push_str(&crate::table::wrap(
            &format!("  answer: {}", a.answer),
            layout,
        ));
        out.push_str(&crate::table::wrap(
            &format!("  because {}", a.because),
            layout,
        ));
        let mut t = crate::table::Table::new(["", "figure (95% CI)", "says", "measured"]).shrink(3);
        for r in &a.reasons {
            t.row([
                if r.deciding { "*" } else { "" }.to_string(),
                r.shown.clone(),
                mark(r.says).to_string(),
                r.what.clone(),
            ]);
        }
        if !a.reasons.is_empty() {
            for line in t
                .render_to(crate::table::Layout::fixed(width.saturating_sub(2)))
                .lines()
            {
                out.push_str("  ");
                out.push_str(line.trim_end());
                out.push('\n');
            }
        }
    }
    out
}

/// The advice as Markdown: one row per workload, then each workload's figures.
pub fn markdown(advice: &[Advice]) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = String::from("| workload | recommendation | deciding figures |\n|---|---|---|\n");
    for a in advice {
        let deciding: Vec<String> = a
            .deciding()
            .map(|r| format!("{}: {}", r.what, r.shown))
            .collect();
        out.push_str(&format!(
            "| {} | **{}** | {} |\n",
            cell(&a.workload),
            cell(&a.answer),
            cell(&deciding.join("; "))
        ));
    }
    for a in advice.iter().filter(|a| !a.reasons.is_empty()) {
        out.push_str(&format!(
            "\n**{}**: {} (because {})\n\n",
            cell(&a.workload),
            cell(&a.answer),
            cell(&a.because)
        ));
        out.push_str("| figure (95% CI) | says | measured |\n|---|---|---|\n");
        for r in &a.reasons {
            let says = match r.says {
                Says::Context => "context".to_string(),
                s => mark(s).to_string(),
            };
            let says = if r.deciding {
                format!("**{says}**")
            } else {
                says
            };
            out.push_str(&format!(
                "| {} | {} | {} |\n",
                cell(&r.shown),
                says,
                cell(&r.what)
            ));
        }
    }
    out
}

/// The strip of a row: the first deciding figure (turned so that above 1 points to SMT
/// on: a run time next to a busy sibling is shown as its inverse) on a log scale.
fn strip(a: &Advice) -> Option<String> {
    // Without SMT the figure is 2 cores against 1: no direction toward SMT on or off.
    if a.recommendation == Recommendation::NoSmt {
        return None;
    }
    let r = a.deciding().next()?;
    let f = &r.figure;
    // Figures whose "above 1" means slower (the single-thread cost) are turned over.
    let turned = r.what.starts_with("run time beside");
    let (v, lo, hi) = if turned {
        (
            1.0 / f.value,
            f.ci95_high.map(|x| 1.0 / x),
            f.ci95_low.map(|x| 1.0 / x),
        )
    } else {
        (f.value, f.ci95_low, f.ci95_high)
    };
    if !v.is_finite() || v <= 0.0 {
        return None;
    }
    let lo_r = lo.unwrap_or(v).min(v).clamp(0.25, 1.0).min(0.5);
    let hi_r = hi.unwrap_or(v).max(v).clamp(1.0, 4.0).max(2.0);
    let clamp = |x: f64| x.clamp(lo_r, hi_r);
    Some(crate::svg::ci_strip(
        clamp(v),
        lo.map(clamp),
        hi.map(clamp),
        (lo_r, hi_r),
    ))
}

/// The report's first section (`id="advice"`): one row per workload with its answer,
/// the figures it rests on and a strip of the deciding figure with its interval; or why
/// the run has no answer.
pub(crate) fn section(p: &mut String, r: &RunResults) -> Result<(), String> {
    let answers = advise_run(r);
    if answers.is_empty() {
        return Err(
            "no workload measured on the placements the answer needs (1c1t with 1c2t or 2c1t, or in co-runs)"
                .into(),
        );
    }
    let section = maud::html! {
        section id="advice" {
            h2 { "The answer: should SMT be on?" }
            p {
                "One row per workload: the recommendation, the measured figures it rests on \
                 (each with its 95% interval) and a strip of the deciding one (dot: the figure; \
                 bar: its interval; dashed line: no change; green: toward SMT on, red: toward \
                 off, grey: the interval includes no change, so it decides nothing). The \
                 machine and every cell follow below."
            }
            table {
                tr { th { "workload" } th { "recommendation" } th { "deciding figures" } th { "" } }
                @for a in &answers {
                    tr {
                        td { (a.workload) }
                        td { strong { (a.answer) } }
                        td {
                            @for (i, d) in a.deciding().enumerate() {
                                @if i > 0 { (crate::html::BR) }
                                (d.what) ": " (d.shown)
                            }
                            @if a.deciding().next().is_none() { span class="muted" { (a.because) } }
                        }
                        td { @if let Some(s) = strip(a) { (maud::PreEscaped(s)) } }
                    }
                }
            }
            @for a in answers.iter().filter(|a| a.reasons.len() > a.deciding().count()) {
                details {
                    summary { (a.workload) ": every figure" }
                    table {
                        tr { th { "measured" } th { "figure (95% CI)" } th { "points to" } }
                        @for x in &a.reasons {
                            tr {
                                td { (x.what) }
                                td class="yield" { (x.shown) }
                                td { (match x.says { Says::On => "SMT on", Says::Off => "SMT off", Says::Unclear => "neither (interval includes no change)", Says::Context => "context" }) }
                            }
                        }
                    }
                }
            }
        }
    };
    p.push_str(&section.into_string());
    Ok(())
}

#[cfg(test)]
mod tests;
