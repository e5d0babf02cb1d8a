//! One test per rule, on the rule alone: where it answers, what, and where it stays out.

use super::*;
use crate::advice::{Capacity, Partnered};

fn fig(value: f64, low: f64, high: f64) -> Figure {
    Figure::new(value, low, high)
}

fn smt() -> Evidence {
    Evidence {
        workload: "w".into(),
        smt: true,
        ..Evidence::default()
    }
}

fn partner(name: &str, f: Figure) -> Partnered {
    Partnered {
        partner: name.into(),
        figure: f,
        predicted_by_run: None,
    }
}

const GAIN: (f64, f64, f64) = (1.3, 1.25, 1.35);
const LOSS: (f64, f64, f64) = (0.8, 0.75, 0.85);
const NOISE: (f64, f64, f64) = (1.01, 0.95, 1.05);

fn f((v, lo, hi): (f64, f64, f64)) -> Figure {
    fig(v, lo, hi)
}

#[test]
fn no_smt_answers_only_without_siblings() {
    assert_eq!(no_smt(&Ledger::new(&smt())), None);
    let single = Evidence {
        smt: false,
        single_threaded: true,
        ..smt()
    };
    let a = no_smt(&Ledger::new(&single)).unwrap();
    assert_eq!(a.recommendation, Recommendation::NoSmt);
    assert!(a.answer.contains("single-threaded"), "{}", a.answer);
    assert!(a.deciding.is_empty());
    let two_cores = Evidence {
        second_core: Some(f(GAIN)),
        ..single
    };
    let l = Ledger::new(&two_cores);
    let a = no_smt(&l).unwrap();
    assert_eq!(a.answer, "no SMT here (2 cores vs 1: +30% [+25%, +35%])");
    assert_eq!(a.deciding, [l.second_core.unwrap()]);
}

#[test]
fn at_target_answers_whenever_a_capacity_was_measured() {
    let capacity = |figure| Capacity {
        target: "p99 <= 5 ms".into(),
        on_over_off: figure,
        switched: true,
    };
    // A throughput gain beside it does not count.
    let mut e = Evidence {
        sibling_gain: Some(f(GAIN)),
        ..smt()
    };
    assert_eq!(at_target(&Ledger::new(&e)), None);
    for (figure, rec) in [
        (GAIN, Recommendation::KeepOn),
        (LOSS, Recommendation::TurnOff),
        (NOISE, Recommendation::CannotTell),
    ] {
        e.capacity = Some(capacity(f(figure)));
        let l = Ledger::new(&e);
        let a = at_target(&l).unwrap();
        assert_eq!(a.recommendation, rec);
        assert_eq!(a.at.as_deref(), Some("p99 <= 5 ms"));
        assert_eq!(a.deciding, [l.capacity.unwrap()]);
        assert!(a.answer.ends_with("at p99 <= 5 ms"), "{}", a.answer);
    }
}

#[test]
fn throughput_gain_keeps_smt_on_unless_something_else_depends() {
    let mut e = Evidence {
        sibling_gain: Some(f(GAIN)),
        ..smt()
    };
    let l = Ledger::new(&e);
    let a = throughput(&l).unwrap();
    assert_eq!(a.recommendation, Recommendation::KeepOn);
    assert_eq!(a.deciding, [l.throughput.unwrap()]);
    e.penalty = Some(partner("mem-read", f(GAIN)));
    assert_eq!(throughput(&Ledger::new(&e)), None);
    // A loss is the same rule's "off".
    e.sibling_gain = Some(f(LOSS));
    let off = throughput(&Ledger::new(&e)).map(|a| a.recommendation);
    assert_eq!(off, Some(Recommendation::TurnOff));
}

#[test]
fn throughput_loss_turns_smt_off_unless_the_partners_split() {
    let mut e = Evidence {
        machine_gain: Some(f(LOSS)),
        machine_switched: true,
        ..smt()
    };
    let a = throughput(&Ledger::new(&e)).unwrap();
    assert_eq!(a.recommendation, Recommendation::TurnOff);
    assert_eq!(a.because, "SMT on is slower: -20% [-25%, -15%]");
    e.partners = vec![partner("a", f(GAIN)), partner("b", f(LOSS))];
    assert_eq!(throughput(&Ledger::new(&e)), None);
    // The SMT side left its siblings idle: no throughput figure.
    e.partners.clear();
    e.idle_sibling = true;
    assert_eq!(throughput(&Ledger::new(&e)), None);
}

#[test]
fn co_runs_agree_only_alone_and_unanimous() {
    let mut e = Evidence {
        partners: vec![partner("a", f(LOSS)), partner("b", f(LOSS))],
        ..smt()
    };
    let l = Ledger::new(&e);
    let a = co_runs_agree(&l).unwrap();
    assert_eq!(a.recommendation, Recommendation::TurnOff);
    assert_eq!(
        a.because,
        "sharing a core costs with every partner measured (a, b)"
    );
    assert_eq!(a.deciding, l.partners);
    e.partners[1].figure = f(NOISE);
    assert_eq!(co_runs_agree(&Ledger::new(&e)), None);
    e.partners[1].figure = f(LOSS);
    e.penalty = Some(partner("a", f(NOISE)));
    assert_eq!(co_runs_agree(&Ledger::new(&e)), None);
    e.penalty = None;
    e.sibling_gain = Some(f(NOISE));
    assert_eq!(co_runs_agree(&Ledger::new(&e)), None);
}

#[test]
fn depends_names_each_dependence_in_order() {
    let mut e = Evidence {
        sibling_gain: Some(f(GAIN)),
        ..smt()
    };
    assert_eq!(depends(&Ledger::new(&e)), None);
    e.penalty = Some(partner("mem-read", f(GAIN)));
    e.partners = vec![partner("a", f(GAIN)), partner("b", f(LOSS))];
    let l = Ledger::new(&e);
    let a = depends(&l).unwrap();
    assert_eq!(
        a.depends_on,
        [Dependence::TailLatencyTarget, Dependence::PartnerKind]
    );
    assert_eq!(
        a.answer,
        "it depends on the tail-latency target and the partner kind"
    );
    assert!(
        a.because.starts_with("on for throughput (+30%"),
        "{}",
        a.because
    );
    assert!(
        a.because.ends_with("; on beside a, off beside b"),
        "{}",
        a.because
    );
    assert_eq!(a.deciding.len(), 4);
}

#[test]
fn one_thread_slowed_by_a_busy_sibling_depends_on_the_latency_target() {
    let e = Evidence {
        machine_gain: Some(f(NOISE)),
        idle_sibling: true,
        penalty: Some(partner("mem-read", f(GAIN))),
        ..smt()
    };
    let l = Ledger::new(&e);
    let d = one_thread_cost(&l).unwrap();
    assert_eq!(d.on, Dependence::TailLatencyTarget);
    assert_eq!(d.deciding, [l.penalty.unwrap()]);
    assert!(d.because.starts_with("one thread: "), "{}", d.because);
    assert_eq!(decide(&e).answer, "it depends on the tail-latency target");
    // Partners that split take the answer instead.
    let split = Evidence {
        partners: vec![partner("a", f(GAIN)), partner("b", f(LOSS))],
        ..e
    };
    assert!(one_thread_cost(&Ledger::new(&split)).is_none());
}

#[test]
fn cannot_tell_says_why_nothing_decided() {
    let mut e = Evidence {
        sibling_gain: Some(f(NOISE)),
        ..smt()
    };
    let l = Ledger::new(&e);
    let a = cannot_tell(&l);
    assert_eq!(a.recommendation, Recommendation::CannotTell);
    assert_eq!(a.deciding, [l.throughput.unwrap()]);
    assert!(
        a.because
            .starts_with("speed-up, sibling added (1c2t/1c1t): +1"),
        "{}",
        a.because
    );
    assert!(a.because.ends_with("the interval includes no change"));
    e.idle_sibling = true;
    assert!(
        cannot_tell(&Ledger::new(&e))
            .because
            .starts_with("one thread: its sibling stays idle")
    );
    e.idle_sibling = false;
    e.sibling_gain = None;
    assert_eq!(
        cannot_tell(&Ledger::new(&e)).because,
        "no figure measured that shows SMT at work"
    );
}

/// An unsteady figure off break-even decides nothing because it would not repeat, not
/// because of its interval; a figure at a limit, because it is a bound.
#[test]
fn cannot_tell_names_an_unsteady_or_bounded_figure_as_such() {
    let mut loss = f(LOSS);
    loss.unsteady = Some("1c1t: CV 46%".into());
    let e = Evidence {
        sibling_gain: Some(loss.clone()),
        ..smt()
    };
    let a = cannot_tell(&Ledger::new(&e));
    assert!(
        a.because.ends_with(", it would not repeat"),
        "{}",
        a.because
    );
    loss.unsteady = Some(format!("{AT_LIMIT}1c2t reached max_conns"));
    let e = Evidence {
        sibling_gain: Some(loss),
        ..smt()
    };
    let a = cannot_tell(&Ledger::new(&e));
    assert!(
        a.because.ends_with(", a bound, not a measurement"),
        "{}",
        a.because
    );
}

#[test]
fn the_machine_figure_is_named_by_what_it_compares() {
    let mut e = Evidence {
        machine_gain: Some(f(GAIN)),
        sibling_gain: Some(f(LOSS)),
        ..smt()
    };
    let what = |e: &Evidence| {
        let l = Ledger::new(e);
        l.reasons[l.throughput.unwrap()].what.clone()
    };
    assert_eq!(what(&e), "speed-up, machine (all/cores)");
    e.machine_switched = true;
    assert_eq!(what(&e), "speed-up, machine (SMT on/off)");
    e.machine_half = Some("half-cores-2t".into());
    assert_eq!(
        what(&e),
        "speed-up, half the machine (SMT on half-cores-2t/off half-cores-1t)"
    );
    e.machine_switched = false;
    assert_eq!(
        what(&e),
        "speed-up, half the machine (half-cores-2t/half-cores-1t)"
    );
}

#[test]
fn a_predicted_partner_is_shown_and_never_decides() {
    let mut e = Evidence {
        machine_gain: Some(f(LOSS)),
        machine_switched: true,
        ..smt()
    };
    let mut predicted = partner("b", f(GAIN));
    predicted.predicted_by_run = Some(7);
    e.partners = vec![partner("a", f(LOSS)), predicted];
    let l = Ledger::new(&e);
    // Only the measured one splits nothing: throughput says off and so does a.
    assert_eq!(l.partners.len(), 1);
    assert_eq!(
        throughput(&l).map(|a| a.recommendation),
        Some(Recommendation::TurnOff)
    );
    let shown = l
        .reasons
        .iter()
        .find(|r| r.what.contains("predicted by predict run 7"))
        .expect("the predicted partner is shown");
    assert_eq!((shown.says, shown.deciding), (Says::Context, false));
}
