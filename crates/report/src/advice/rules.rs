//! The rules of [`decide`](super::decide), one function each, tried in the order of
//! [`RULES`]: the first that answers gives the recommendation, and [`cannot_tell`]
//! answers when none does. Each rule reads a [`Ledger`]: every measured figure as a
//! [`Reason`], in a fixed order, with where the figures that can decide sit in it.

use super::{
    AT_LIMIT, Advice, Dependence, Evidence, Figure, Lean, PREDICTED, Reason, Recommendation, Says,
};

/// The reasons shown for one workload and where the deciding candidates are among them.
pub(super) struct Ledger<'a> {
    e: &'a Evidence,
    reasons: Vec<Reason>,
    /// The throughput figure (machine, else sibling); none where the SMT side left its
    /// siblings idle.
    throughput: Option<usize>,
    capacity: Option<usize>,
    penalty: Option<usize>,
    /// One per partner, in the order of [`Evidence::partners`].
    partners: Vec<usize>,
    /// `2c1t` over `1c1t`, on a machine without SMT.
    second_core: Option<usize>,
}

/// A rule's answer, before it becomes an [`Advice`].
#[derive(Debug, PartialEq)]
pub(super) struct Answer {
    recommendation: Recommendation,
    answer: String,
    at: Option<String>,
    depends_on: Vec<Dependence>,
    because: String,
    /// `because` without the deciding figure it quotes, for a view that shows that
    /// figure in its own row just below.
    because_words: Option<String>,
    /// The reasons the answer rests on, by position in the ledger.
    deciding: Vec<usize>,
}

impl Answer {
    fn plain(recommendation: Recommendation, answer: &str, because: String) -> Self {
        Answer {
            recommendation,
            answer: answer.into(),
            at: None,
            depends_on: Vec::new(),
            because,
            because_words: None,
            deciding: Vec::new(),
        }
    }

    /// What `because` says without its figure.
    fn in_words(mut self, words: String) -> Self {
        self.because_words = Some(words);
        self
    }

    fn deciding(mut self, idx: &[usize]) -> Self {
        self.deciding.extend_from_slice(idx);
        self
    }
}

/// A rule: the answer it gives for the evidence, or none where it does not apply.
type Rule = fn(&Ledger<'_>) -> Option<Answer>;

/// The rules in the order they are tried.
const RULES: [Rule; 5] = [no_smt, at_target, throughput, co_runs_agree, depends];

/// The recommendation the evidence supports.
pub(super) fn decide(e: &Evidence) -> Advice {
    let ledger = Ledger::new(e);
    let answer = RULES
        .iter()
        .find_map(|rule| rule(&ledger))
        .unwrap_or_else(|| cannot_tell(&ledger));
    ledger.advice(answer)
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

/// The figures shown for scale and context on every machine: they never decide.
fn context(e: &Evidence) -> Vec<Reason> {
    let mut reasons = Vec::new();
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
    reasons
}

/// What the machine-wide speed-up compares, in words.
fn machine_gain_what(e: &Evidence) -> String {
    match (&e.machine_half, e.machine_switched) {
        (Some(on), true) => format!("speed-up, half the machine (SMT on {on}/off half-cores-1t)"),
        (None, true) => "speed-up, machine (SMT on/off)".into(),
        (Some(on), false) => format!("speed-up, half the machine ({on}/half-cores-1t)"),
        (None, false) => "speed-up, machine (all/cores)".into(),
    }
}

impl<'a> Ledger<'a> {
    fn new(e: &'a Evidence) -> Self {
        let mut l = Ledger {
            e,
            reasons: context(e),
            throughput: None,
            capacity: None,
            penalty: None,
            partners: Vec::new(),
            second_core: None,
        };
        if e.smt {
            l.add_smt_figures();
        } else if let Some(f) = &e.second_core {
            let r = reason("2 cores vs 1 (2c1t/1c1t)", f, f.pct(), Says::Context);
            l.second_core = Some(l.push(r));
        }
        l.add_predicted_partners();
        l
    }

    /// Partners predicted, not measured ([`PREDICTED`] in their reason): shown as context, never deciding (also where
    /// this machine has no SMT sibling to measure them on).
    fn add_predicted_partners(&mut self) {
        for p in &self.e.partners {
            if let Some(run) = p.predicted_by_run {
                let f = &p.figure;
                let what = format!(
                    "core shared with {} (pair/serial), {PREDICTED} {run}, not measured",
                    p.partner
                );
                self.push(reason(&what, f, f.times(), Says::Context));
            }
        }
    }

    fn push(&mut self, r: Reason) -> usize {
        self.reasons.push(r);
        self.reasons.len() - 1
    }

    /// Every figure measured on a machine with SMT becomes a reason, in a fixed order.
    fn add_smt_figures(&mut self) {
        let e = self.e;
        let gain =
            |what: &str, f: &Figure| reason(what, f, f.pct(), says_of(f.lean(1.0), Says::On));
        let machine = e
            .machine_gain
            .as_ref()
            .map(|f| self.push(gain(&machine_gain_what(e), f)));
        let sibling = e
            .sibling_gain
            .as_ref()
            .map(|f| self.push(gain("speed-up, sibling added (1c2t/1c1t)", f)));
        self.throughput = machine.or(sibling).filter(|_| !e.idle_sibling);
        if let Some(f) = &e.sibling_vs_core {
            let what = "sibling vs second core (1c2t/2c1t)";
            self.push(reason(what, f, f.times(), Says::Context));
        }
        self.capacity = e.capacity.as_ref().map(|c| {
            let states = if c.switched {
                "SMT on/off"
            } else {
                "1c2t/1c1t"
            };
            let what = format!("capacity at {} ({states})", c.target);
            self.push(gain(&what, &c.on_over_off))
        });
        self.penalty = e.penalty.as_ref().map(|p| {
            let f = &p.figure;
            let what = format!("run time beside busy sibling ({})", p.partner);
            self.push(reason(&what, f, f.pct(), says_of(f.lean(1.0), Says::Off)))
        });
        // Measured partners first (their positions name them); predicted ones are shown
        // as context, never deciding.
        self.partners = e
            .partners
            .iter()
            .take_while(|p| p.predicted_by_run.is_none())
            .map(|p| {
                let f = &p.figure;
                let what = format!("core shared with {} (pair/serial)", p.partner);
                self.push(reason(&what, f, f.times(), says_of(f.lean(1.0), Says::On)))
            })
            .collect();
    }

    /// The throughput figure and which way it says.
    fn throughput_says(&self) -> Option<(usize, Says)> {
        self.throughput.map(|i| (i, self.reasons[i].says))
    }

    /// The single-thread cost, where it leans to slower.
    fn penalty_off(&self) -> Option<usize> {
        self.penalty.filter(|&i| self.reasons[i].says == Says::Off)
    }

    fn partners_saying(&self, says: Says) -> Vec<usize> {
        let partners = self.partners.iter().copied();
        partners.filter(|&i| self.reasons[i].says == says).collect()
    }

    /// The partners behind the reasons at `idx`, by name.
    fn names(&self, idx: &[usize]) -> String {
        idx.iter()
            .filter_map(|i| self.partners.iter().position(|j| j == i))
            .map(|k| self.e.partners[k].partner.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn advice(mut self, a: Answer) -> Advice {
        for &i in &a.deciding {
            self.reasons[i].deciding = true;
        }
        Advice {
            workload: self.e.workload.clone(),
            recommendation: a.recommendation,
            answer: a.answer,
            at: a.at,
            depends_on: a.depends_on,
            because: a.because,
            because_words: a.because_words,
            reasons: self.reasons,
            latency_sweeps: self.e.latency_sweeps.clone(),
        }
    }
}

/// No SMT siblings: what a second core adds, where it was measured.
fn no_smt(l: &Ledger<'_>) -> Option<Answer> {
    let e = l.e;
    if e.smt {
        return None;
    }
    let answer = |text: &str, because: String| Answer::plain(Recommendation::NoSmt, text, because);
    if e.second_core.is_none() && e.single_threaded {
        return Some(answer(
            "no SMT here (single-threaded: a second core had nothing to do)",
            "the machine shows no SMT siblings, and the workload runs one thread".into(),
        ));
    }
    let (Some(i), Some(f)) = (l.second_core, &e.second_core) else {
        // The side that was not measured is the cause; without SMT siblings there
        // was no other to measure.
        let because = match e.unmeasured.first() {
            Some(why) => format!("{why} (and the machine shows no SMT siblings)"),
            None => "the machine shows no SMT siblings".into(),
        };
        return Some(answer(
            "no SMT here (one placement measured: nothing to compare)",
            because,
        ));
    };
    let text = format!("no SMT here (2 cores vs 1: {})", f.pct());
    let because = format!("a second core adds {}", f.pct());
    Some(
        answer(&text, because)
            .in_words("what a second core adds".into())
            .deciding(&[i]),
    )
}

/// A latency target given: the capacity at it decides.
fn at_target(l: &Ledger<'_>) -> Option<Answer> {
    let (c, i) = (l.e.capacity.as_ref()?, l.capacity?);
    let target = &c.target;
    let shown = c.on_over_off.pct();
    let (recommendation, answer, because, words) = match l.reasons[i].says {
        Says::On => (
            Recommendation::KeepOn,
            format!("keep SMT on at {target}"),
            format!("SMT on serves {shown} more load at {target}"),
            format!("SMT on serves more load at {target}"),
        ),
        Says::Off => (
            Recommendation::TurnOff,
            format!("turn SMT off at {target}"),
            format!("SMT on serves {shown} load at {target}"),
            format!("SMT on serves less load at {target}"),
        ),
        _ => (
            Recommendation::CannotTell,
            format!("cannot tell at {target}"),
            format!(
                "capacity at {target} with SMT on vs off: {shown}, the interval includes no change"
            ),
            format!("capacity at {target} with SMT on vs off: the interval includes no change"),
        ),
    };
    Some(
        Answer {
            at: Some(target.clone()),
            ..Answer::plain(recommendation, &answer, because)
        }
        .in_words(words)
        .deciding(&[i]),
    )
}

/// Throughput says on or off and nothing it depends on (the partners, the
/// single-thread cost) says otherwise.
fn throughput(l: &Ledger<'_>) -> Option<Answer> {
    let (i, says) = l.throughput_says()?;
    let (recommendation, answer, word) = match says {
        Says::On => (Recommendation::KeepOn, "keep SMT on", "faster"),
        Says::Off => (Recommendation::TurnOff, "turn SMT off", "slower"),
        _ => return None,
    };
    if !dependences(l).is_empty() {
        return None;
    }
    let because = format!("SMT on is {word}: {}", l.reasons[i].shown);
    Some(
        Answer::plain(recommendation, answer, because)
            .in_words(format!("SMT on is {word}"))
            .deciding(&[i]),
    )
}

/// Only co-runs measured (a `corun` run): every partner on one side decides.
fn co_runs_agree(l: &Ledger<'_>) -> Option<Answer> {
    if l.throughput.is_some() || l.penalty.is_some() {
        return None;
    }
    let all = |says: Says| {
        let side = l.partners_saying(says);
        !side.is_empty() && side.len() == l.partners.len()
    };
    let (rec, answer, word) = if all(Says::On) {
        (Recommendation::KeepOn, "keep SMT on", "pays")
    } else if all(Says::Off) {
        (Recommendation::TurnOff, "turn SMT off", "costs")
    } else {
        return None;
    };
    let because = format!(
        "sharing a core {word} with every partner measured ({})",
        l.names(&l.partners)
    );
    Some(Answer::plain(rec, answer, because).deciding(&l.partners))
}

/// What an "it depends" answer depends on, why, and the figures behind it.
struct Dependent {
    on: Dependence,
    deciding: Vec<usize>,
    because: String,
    /// `because` without its figures.
    words: String,
}

/// Everything the answer depends on, in the order it is named.
fn dependences(l: &Ledger<'_>) -> Vec<Dependent> {
    [single_requests(l), partner_kind(l), one_thread_cost(l)]
        .into_iter()
        .flatten()
        .collect()
}

/// Throughput says on, and the workload's own run time is slower beside a busy sibling.
fn single_requests(l: &Ledger<'_>) -> Option<Dependent> {
    let (i, Says::On) = l.throughput_says()? else {
        return None;
    };
    let p = l.penalty_off()?;
    Some(Dependent {
        on: Dependence::TailLatencyTarget,
        deciding: vec![i, p],
        because: format!(
            "on for throughput ({}), off where single requests must be fast (run time beside a busy sibling {})",
            l.reasons[i].shown, l.reasons[p].shown
        ),
        words: "on for throughput, off where single requests must be fast (a busy sibling slows each one)".into(),
    })
}

/// Some partners say on and others off.
fn partner_kind(l: &Ledger<'_>) -> Option<Dependent> {
    let (on, off) = (l.partners_saying(Says::On), l.partners_saying(Says::Off));
    if on.is_empty() || off.is_empty() {
        return None;
    }
    let because = format!("on beside {}, off beside {}", l.names(&on), l.names(&off));
    Some(Dependent {
        on: Dependence::PartnerKind,
        words: because.clone(),
        because,
        deciding: [on, off].concat(),
    })
}

/// One thread: SMT gives it nothing, and a busy sibling slows it.
fn one_thread_cost(l: &Ledger<'_>) -> Option<Dependent> {
    if l.throughput.is_some() || partner_kind(l).is_some() {
        return None;
    }
    let p = l.penalty_off()?;
    Some(Dependent {
        on: Dependence::TailLatencyTarget,
        deciding: vec![p],
        because: format!(
            "one thread: the sibling adds nothing to it, and next to a busy sibling its run time is {}",
            l.reasons[p].shown
        ),
        words: "one thread: the sibling adds nothing to it, and a busy sibling slows it".into(),
    })
}

/// The answer depends on the tail-latency target or on the partner kind.
fn depends(l: &Ledger<'_>) -> Option<Answer> {
    let dependences = dependences(l);
    if dependences.is_empty() {
        return None;
    }
    let words: Vec<&str> = dependences.iter().map(|d| d.on.words()).collect();
    let because: Vec<&str> = dependences.iter().map(|d| d.because.as_str()).collect();
    let in_words: Vec<&str> = dependences.iter().map(|d| d.words.as_str()).collect();
    let deciding: Vec<usize> = dependences
        .iter()
        .flat_map(|d| d.deciding.clone())
        .collect();
    Some(Answer {
        depends_on: dependences.iter().map(|d| d.on).collect(),
        ..Answer::plain(
            Recommendation::Depends,
            &format!("it depends on {}", words.join(" and ")),
            because.join("; "),
        )
        .in_words(in_words.join("; "))
        .deciding(&deciding)
    })
}

/// No rule answered: the throughput figure leans neither way, or there is none.
fn cannot_tell(l: &Ledger<'_>) -> Answer {
    let (because, words, deciding) = match l.throughput {
        Some(i) => {
            let r = &l.reasons[i];
            // An unsteady figure or one at a limit may lie off break-even and still say
            // nothing: name that, not an interval it does not have.
            let why = match r.figure.unsteady.as_deref() {
                Some(u) if u.starts_with(AT_LIMIT) => "a bound, not a measurement",
                Some(_) => "it would not repeat",
                None => "the interval includes no change",
            };
            let words = Some(format!("{}: {why}", r.what));
            (format!("{}: {}, {why}", r.what, r.shown), words, vec![i])
        }
        None if l.e.idle_sibling => (
            "one thread: its sibling stays idle, so SMT neither helps nor costs it alone".into(),
            None,
            Vec::new(),
        ),
        None => (
            "no figure measured that shows SMT at work".into(),
            None,
            Vec::new(),
        ),
    };
    Answer {
        because_words: words,
        ..Answer::plain(Recommendation::CannotTell, "cannot tell", because)
    }
    .deciding(&deciding)
}

#[cfg(test)]
mod tests;
