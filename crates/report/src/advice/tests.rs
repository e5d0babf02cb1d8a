use std::collections::BTreeMap;

use smtlab_model::CellRecord;
use smtlab_model::keys::Form;

use super::*;

fn fig(value: f64, low: f64, high: f64) -> Figure {
    Figure::new(value, low, high)
}

/// A workload whose `2c1t` was skipped on a machine without SMT: the answer names the
/// skip's reason, not the machine's lack of siblings alone.
#[test]
fn a_side_not_measured_is_named_with_its_reason() {
    let mut e = vec![Evidence {
        workload: "web-static".into(),
        smt: false,
        ..Evidence::default()
    }];
    let skipped = smtlab_model::SkippedCell {
        key: smtlab_model::CellKey {
            benchmark: "web-static".into(),
            params: Default::default(),
            conditions: Default::default(),
            placement: "2c1t".into(),
        },
        reason: "no CPU is left for the client side".into(),
    };
    let plain = decide(&e[0]);
    assert_eq!(plain.because, "the machine shows no SMT siblings");
    add_unmeasured(&mut e, &[skipped]);
    let a = decide(&e[0]);
    assert!(
        a.because
            .starts_with("2c1t was not measured: no CPU is left for the client side"),
        "{}",
        a.because
    );
}

fn smt_machine() -> Evidence {
    Evidence {
        workload: "server".into(),
        smt: true,
        ..Evidence::default()
    }
}

#[test]
fn smt_adding_30_percent_says_keep_it_on() {
    let e = Evidence {
        sibling_gain: Some(fig(1.30, 1.25, 1.35)),
        sibling_vs_core: Some(fig(0.66, 0.63, 0.69)),
        ..smt_machine()
    };
    let a = decide(&e);
    assert_eq!(a.recommendation, Recommendation::KeepOn);
    assert_eq!(a.answer, "keep SMT on");
    assert!(a.because.contains("+30% [+25%, +35%]"), "{}", a.because);
    let deciding: Vec<&str> = a.deciding().map(|r| r.what.as_str()).collect();
    assert_eq!(deciding, ["speed-up, sibling added (1c2t/1c1t)"]);
    // The sibling against a core is context, not a vote.
    assert!(
        a.reasons
            .iter()
            .any(|r| r.says == Says::Context && !r.deciding)
    );
}

#[test]
fn smt_costing_throughput_says_turn_it_off() {
    let e = Evidence {
        sibling_gain: Some(fig(0.85, 0.80, 0.90)),
        ..smt_machine()
    };
    let a = decide(&e);
    assert_eq!(a.recommendation, Recommendation::TurnOff);
    assert!(a.because.contains("-15%"), "{}", a.because);
}

#[test]
fn the_whole_machine_decides_over_the_sibling_pair() {
    let e = Evidence {
        sibling_gain: Some(fig(1.30, 1.25, 1.35)),
        machine_gain: Some(fig(0.95, 0.93, 0.97)),
        ..smt_machine()
    };
    let a = decide(&e);
    assert_eq!(a.recommendation, Recommendation::TurnOff);
    assert!(a.reasons[0].deciding && !a.reasons[1].deciding);
}

#[test]
fn overlapping_intervals_cannot_tell_never_a_coin_flip() {
    for gain in [fig(1.04, 0.97, 1.11), fig(0.96, 0.89, 1.03)] {
        let a = decide(&Evidence {
            sibling_gain: Some(gain.clone()),
            ..smt_machine()
        });
        assert_eq!(a.recommendation, Recommendation::CannotTell, "{gain:?}");
        assert!(a.because.contains("includes no change"), "{}", a.because);
    }
    // An unsteady figure or one without an interval decides nothing either.
    let mut unsteady = fig(1.5, 1.4, 1.6);
    unsteady.unsteady = Some("1c2t: CV 31%".into());
    let one = Figure {
        ci95_low: None,
        ci95_high: None,
        ..fig(1.5, 0.0, 0.0)
    };
    for f in [unsteady, one] {
        let a = decide(&Evidence {
            sibling_gain: Some(f),
            ..smt_machine()
        });
        assert_eq!(a.recommendation, Recommendation::CannotTell);
    }
    let a = decide(&smt_machine());
    assert_eq!(a.recommendation, Recommendation::CannotTell);
}

#[test]
fn a_latency_target_missed_with_smt_on_says_off_at_that_target() {
    let e = Evidence {
        // Throughput alone would say on ...
        sibling_gain: Some(fig(1.20, 1.15, 1.25)),
        // ... but at p99 <= 5 ms SMT on serves 30% less.
        capacity: Some(Capacity {
            target: "p99 <= 5 ms".into(),
            on_over_off: fig(0.70, 0.66, 0.74),
            switched: true,
        }),
        ..smt_machine()
    };
    let a = decide(&e);
    assert_eq!(a.recommendation, Recommendation::TurnOff);
    assert_eq!(a.answer, "turn SMT off at p99 <= 5 ms");
    assert_eq!(a.at.as_deref(), Some("p99 <= 5 ms"));
    let deciding: Vec<&Reason> = a.deciding().collect();
    assert_eq!(deciding.len(), 1);
    assert!(deciding[0].what.starts_with("capacity at p99 <= 5 ms"));

    let mut e2 = e.clone();
    e2.capacity.as_mut().unwrap().on_over_off = fig(1.2, 1.1, 1.3);
    assert_eq!(decide(&e2).answer, "keep SMT on at p99 <= 5 ms");
    e2.capacity.as_mut().unwrap().on_over_off = fig(1.02, 0.9, 1.1);
    assert_eq!(decide(&e2).recommendation, Recommendation::CannotTell);
}

#[test]
fn a_single_thread_cost_beside_a_throughput_gain_depends_on_the_latency_target() {
    let e = Evidence {
        sibling_gain: Some(fig(1.25, 1.2, 1.3)),
        penalty: Some(Partnered {
            partner: "mem-read".into(),
            figure: fig(1.40, 1.35, 1.45),
            predicted_by_run: None,
        }),
        ..smt_machine()
    };
    let a = decide(&e);
    assert_eq!(a.recommendation, Recommendation::Depends);
    assert_eq!(a.depends_on, [Dependence::TailLatencyTarget]);
    assert_eq!(a.answer, "it depends on the tail-latency target");
    assert_eq!(a.deciding().count(), 2);
    // Above the table the reason points at both figures' rows instead of repeating them.
    let t = text(std::slice::from_ref(&a), 200);
    assert!(
        t.contains("a busy sibling slows each one) (the rows marked *)"),
        "{t}"
    );
    for r in a.deciding() {
        assert_eq!(t.matches(&r.shown).count(), 1, "{t}");
    }
    // A penalty within the noise changes nothing.
    let mut e2 = e.clone();
    e2.penalty.as_mut().unwrap().figure = fig(1.01, 0.98, 1.04);
    assert_eq!(decide(&e2).recommendation, Recommendation::KeepOn);
}

#[test]
fn partners_on_both_sides_depend_on_the_partner_kind() {
    let e = Evidence {
        sibling_gain: Some(fig(1.25, 1.2, 1.3)),
        partners: vec![
            Partnered {
                partner: "int-ops".into(),
                figure: fig(1.6, 1.5, 1.7),
                predicted_by_run: None,
            },
            Partnered {
                partner: "mem-read".into(),
                figure: fig(0.8, 0.75, 0.85),
                predicted_by_run: None,
            },
        ],
        ..smt_machine()
    };
    let a = decide(&e);
    assert_eq!(a.recommendation, Recommendation::Depends);
    assert_eq!(a.depends_on, [Dependence::PartnerKind]);
    assert!(
        a.because.contains("on beside int-ops, off beside mem-read"),
        "{}",
        a.because
    );
}

#[test]
fn no_smt_answers_two_cores_against_one() {
    let e = Evidence {
        workload: "int-ops".into(),
        smt: false,
        second_core: Some(fig(1.96, 1.9, 2.0)),
        ..Evidence::default()
    };
    let a = decide(&e);
    assert_eq!(a.recommendation, Recommendation::NoSmt);
    assert_eq!(a.answer, "no SMT here (2 cores vs 1: +96% [+90%, +100%])");
    assert_eq!(a.deciding().count(), 1);
}

/// A cell of `bench` on `placement` (`NcMt`) with `values`, higher is better.
fn cell(bench: &str, placement: &str, extra: &[(&str, &str)], values: &[f64]) -> CellRecord {
    // `all`: two cores of two threads.
    let (cores, threads): (u32, u32) = match placement {
        "all" => (2, 2),
        "half-cores-1t" => (8, 1),
        "half-cores-2t" => (8, 2),
        p => (p[..1].parse().unwrap(), p[2..3].parse().unwrap()),
    };
    let mut params: BTreeMap<String, String> = std::iter::once(("threads", "auto"))
        .chain(extra.iter().copied())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Conditions given as their flat names (`smt=on`) become typed, as stored rows do.
    let conditions = smtlab_model::keys::Conditions::take_from(&mut params);
    smtlab_fixtures::build::cell_of(
        bench,
        params,
        conditions,
        placement,
        (cores, threads),
        values,
    )
}

#[test]
fn evidence_is_read_from_the_cells_of_each_workload() {
    let cells = vec![
        cell("int-ops", "1c1t", &[], &[99.0, 100.0, 101.0]),
        cell("int-ops", "1c2t", &[], &[129.0, 130.0, 131.0]),
        cell("int-ops", "2c1t", &[], &[199.0, 200.0, 201.0]),
        cell("mem-read", "1c1t", &[], &[10.0, 10.1, 9.9]),
        cell("mem-read", "1c2t", &[], &[10.3, 9.6, 10.1]),
    ];
    let ev = evidence(&cells, true);
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0].workload, "int-ops threads=auto");
    let g = ev[0].sibling_gain.as_ref().unwrap();
    assert!((g.value - 1.30).abs() < 1e-9);
    assert!((ev[0].second_core.as_ref().unwrap().value - 2.0).abs() < 1e-9);
    assert!((ev[0].sibling_vs_core.as_ref().unwrap().value - 0.65).abs() < 1e-9);
    let answers: Vec<Recommendation> = ev.iter().map(|e| decide(e).recommendation).collect();
    assert_eq!(
        answers,
        [Recommendation::KeepOn, Recommendation::CannotTell]
    );
    // The same cells on a machine without SMT answer 2 cores vs 1.
    let ev = evidence(
        &cells[..3]
            .iter()
            .filter(|c| c.placement_spec != "1c2t")
            .cloned()
            .collect::<Vec<_>>(),
        false,
    );
    let a = decide(&ev[0]);
    assert_eq!(a.recommendation, Recommendation::NoSmt);
    assert!(
        a.answer.starts_with("no SMT here (2 cores vs 1: +100%"),
        "{}",
        a.answer
    );
}

#[test]
fn smt_off_and_on_of_the_whole_machine_pair_by_state() {
    let cells = vec![
        cell("int-ops", "1c1t", &[("smt", "off")], &[99.0, 100.0, 101.0]),
        cell("int-ops", "all", &[("smt", "off")], &[199.0, 200.0, 201.0]),
        cell("int-ops", "1c1t", &[("smt", "on")], &[99.0, 100.0, 101.0]),
        cell("int-ops", "all", &[("smt", "on")], &[139.0, 140.0, 141.0]),
    ];
    let ev = evidence(&cells, false);
    assert_eq!(ev.len(), 1);
    assert!(ev[0].smt, "SMT switched on in the run: the machine has it");
    assert!(ev[0].machine_switched);
    assert_eq!(
        decide(&ev[0]).reasons[1].what,
        "speed-up, machine (SMT on/off)"
    );
    assert!((ev[0].machine_gain.as_ref().unwrap().value - 0.7).abs() < 1e-9);
    assert_eq!(decide(&ev[0]).recommendation, Recommendation::TurnOff);
}

#[test]
fn the_text_fits_80_columns_and_marks_the_deciding_figure() {
    let a = decide(&Evidence {
        workload: "a-workload-with-a-long-name threads=auto size=1GiB pages=huge".into(),
        sibling_gain: Some(fig(1.30, 1.25, 1.35)),
        sibling_vs_core: Some(fig(0.66, 0.63, 0.69)),
        ..smt_machine()
    });
    let figure = a.deciding().next().unwrap().shown.clone();
    let t = text(&[a], 80);
    // The deciding figure is said once, in its row; the reason above it points there.
    assert_eq!(t.matches(&figure).count(), 1, "{t}");
    assert!(
        t.contains("because SMT on is faster (the row marked *)"),
        "{t}"
    );
    for l in t.lines() {
        assert!(
            l.chars().count() <= 80,
            "{l:?} is {} wide",
            l.chars().count()
        );
    }
    insta::assert_snapshot!(t);
}

#[test]
fn json_and_markdown_carry_the_answer_and_its_figures() {
    let a = decide(&Evidence {
        workload: "int-ops".into(),
        sibling_gain: Some(fig(1.30, 1.25, 1.35)),
        ..smt_machine()
    });
    let j = json(
        7,
        &["no hardware counters".into()],
        std::slice::from_ref(&a),
    );
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["schema"], ADVICE_SCHEMA);
    assert_eq!(v["advice"][0]["recommendation"], "keep_on");
    assert_eq!(v["advice"][0]["reasons"][0]["figure"]["ci95_low"], 1.25);
    let back: AdviceDoc = serde_json::from_str(&j).unwrap();
    assert_eq!(back.advice, std::slice::from_ref(&a));
    insta::assert_snapshot!("advice_json", j);
    insta::assert_snapshot!("advice_markdown", markdown(&[a]));
}

#[test]
fn co_runs_alone_decide_only_when_every_partner_agrees() {
    let p = |name: &str, f: Figure| Partnered {
        partner: name.into(),
        figure: f,
        predicted_by_run: None,
    };
    let mut e = Evidence {
        partners: vec![
            p("int-ops", fig(1.6, 1.5, 1.7)),
            p("fp-ops", fig(1.3, 1.2, 1.4)),
        ],
        ..smt_machine()
    };
    let a = decide(&e);
    assert_eq!(a.recommendation, Recommendation::KeepOn);
    assert!(a.because.contains("int-ops, fp-ops"), "{}", a.because);
    e.partners[1].figure = fig(1.05, 0.9, 1.2);
    assert_eq!(decide(&e).recommendation, Recommendation::CannotTell);
    e.partners = vec![p("mem-read", fig(0.8, 0.7, 0.9))];
    assert_eq!(decide(&e).recommendation, Recommendation::TurnOff);
}

#[test]
fn a_workload_with_a_latency_target_is_decided_by_its_capacity_at_the_target() {
    let slo = [("slo", "p99=5ms")];
    let mut cells = vec![
        cell("web-slo", "1c1t", &slo, &[9_900.0, 10_000.0, 10_100.0]),
        cell("web-slo", "1c2t", &slo, &[6_900.0, 7_000.0, 7_100.0]),
    ];
    for c in &mut cells {
        c.unit = "req/s".into();
    }
    let ev = evidence(&cells, true);
    assert_eq!(ev.len(), 1);
    let e = &ev[0];
    assert!(e.sibling_gain.is_none(), "the gain is the capacity's, once");
    let c = e.capacity.as_ref().unwrap();
    assert_eq!(c.target, "p99 <= 5ms");
    assert!((c.on_over_off.value - 0.7).abs() < 1e-9);
    assert!(!c.switched);
    let a = decide(e);
    assert!(
        a.reasons
            .iter()
            .any(|r| r.what == "capacity at p99 <= 5ms (1c2t/1c1t)")
    );
    assert_eq!(a.answer, "turn SMT off at p99 <= 5ms");
    // The workload's own capacity on 1c1t is shown, for scale.
    let base = a
        .reasons
        .iter()
        .find(|r| r.what == "the workload on 1c1t")
        .unwrap();
    assert!(base.shown.starts_with("10000 ["), "{}", base.shown);
    assert!(base.shown.ends_with("] req/s"), "{}", base.shown);
    assert_eq!(base.says, Says::Context);
}

#[test]
fn one_placement_without_smt_still_answers_and_shows_what_was_measured() {
    let cells = vec![cell(
        "web-slo",
        "1c1t",
        &[("slo", "p99=5ms")],
        &[99.0, 100.0, 101.0],
    )];
    let ev = evidence(&cells, false);
    assert_eq!(ev.len(), 1);
    let a = decide(&ev[0]);
    assert_eq!(a.recommendation, Recommendation::NoSmt);
    assert_eq!(
        a.answer,
        "no SMT here (one placement measured: nothing to compare)"
    );
    assert_eq!(a.reasons.len(), 1);
    // With SMT, one placement alone answers nothing: no row at all.
    assert!(evidence(&cells, true).is_empty());
    // Beside a compared workload, a point measured on 1c1t alone (a sweep) gets no row.
    let mut more = cells.clone();
    more.push(cell("int-ops", "1c1t", &[], &[99.0, 100.0, 101.0]));
    more.push(cell("int-ops", "2c1t", &[], &[199.0, 200.0, 201.0]));
    let ev = evidence(&more, false);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].workload, "int-ops threads=auto");
}

/// A co-run cell of `a` (a rate) beside `partner` in `form`: A's values, and per sample
/// the partner's value inside it and alone.
fn corun_cell(
    a: &str,
    form: Form,
    partner: &str,
    values: &[f64],
    partner_values: &[(f64, f64)],
) -> CellRecord {
    use crate::corun::{PARTNER_ALONE_VALUE, PARTNER_VALUE};
    let samples = values
        .iter()
        .enumerate()
        .map(|(i, &v)| smtlab_model::SampleRecord {
            value: v,
            iterations: 1,
            elapsed_ns: 1_000_000,
            work: v,
            cpu_ns: None,
            start_spread_ns: None,
            cpus: vec![0],
            metrics: partner_values
                .get(i)
                .map(|&(with, alone)| {
                    BTreeMap::from([
                        (PARTNER_VALUE.to_string(), with),
                        (PARTNER_ALONE_VALUE.to_string(), alone),
                    ])
                })
                .unwrap_or_default(),
        })
        .collect();
    let name = format!("corun-{}", form.name());
    let mut c = cell(a, "1c1t", &[], values);
    c.params = BTreeMap::from([("threads".to_string(), "1".to_string())]);
    c.conditions = smtlab_model::keys::Conditions {
        form: Some(form),
        partner: Some(partner.to_string()),
        ..Default::default()
    };
    c.placement_spec = name.clone();
    c.placement = crate::testutil::placement(&name, "cpus:0,1", 1, 2);
    c.result = crate::testutil::result(samples, values);
    c
}

#[test]
fn partners_are_read_from_a_row_of_the_co_run_matrix() {
    let alone = [99.0, 100.0, 101.0];
    let cells = vec![
        cell("int-ops", "1c1t", &[], &[99.0, 100.0, 101.0]),
        cell("int-ops", "1c2t", &[], &[129.0, 130.0, 131.0]),
        // Beside mem-read: int-ops at 0.7 of alone, mem-read at 0.6: the pair 1.3.
        corun_cell("int-ops", Form::Alone, "mem-read", &alone, &[]),
        corun_cell(
            "int-ops",
            Form::Sibling,
            "mem-read",
            &[69.0, 70.0, 71.0],
            &[(59.0, 99.0), (60.0, 100.0), (61.0, 101.0)],
        ),
        // Beside fp-ops: 0.4 and 0.4: the pair 0.8, worse than taking turns.
        // The partners alone: their direction (higher is better).
        corun_cell("mem-read", Form::Alone, "int-ops", &alone, &[]),
        corun_cell("int-ops", Form::Alone, "fp-ops", &alone, &[]),
        corun_cell("fp-ops", Form::Alone, "int-ops", &alone, &[]),
        corun_cell(
            "int-ops",
            Form::Sibling,
            "fp-ops",
            &[39.0, 40.0, 41.0],
            &[(39.0, 99.0), (40.0, 100.0), (41.0, 101.0)],
        ),
    ];
    let ev = evidence(&cells, true);
    assert_eq!(ev.len(), 1, "{ev:#?}");
    let names: Vec<&str> = ev[0].partners.iter().map(|p| p.partner.as_str()).collect();
    assert_eq!(names, ["mem-read", "fp-ops"]);
    assert!((ev[0].partners[0].figure.value - 1.3).abs() < 1e-9);
    assert!((ev[0].partners[1].figure.value - 0.8).abs() < 1e-9);
    assert!(ev[0].penalty.is_none(), "a matrix row is no penalty run");
    let a = decide(&ev[0]);
    assert_eq!(a.depends_on, [Dependence::PartnerKind]);
    assert!(
        a.because.contains("on beside mem-read, off beside fp-ops"),
        "{}",
        a.because
    );
}

/// A step of a utilisation curve: `rate` of the maximum offered, `achieved` jobs/s, the
/// share of the CPUs' time reported busy.
fn util_cell(rate: &str, achieved: &[f64], busy: f64) -> CellRecord {
    let samples = achieved
        .iter()
        .map(|&v| smtlab_model::SampleRecord {
            value: v,
            iterations: 1,
            elapsed_ns: 1_000_000_000,
            work: v,
            cpu_ns: None,
            start_spread_ns: None,
            cpus: vec![0, 1],
            metrics: BTreeMap::from([
                ("user_frac".to_string(), busy),
                ("system_frac".to_string(), 0.0),
                ("iowait_frac".to_string(), 0.0),
                ("other_frac".to_string(), 0.0),
                ("idle_frac".to_string(), 1.0 - busy),
            ]),
        })
        .collect();
    let mut c = cell("open-loop-int", "1c2t", &[], achieved);
    let mut flat = BTreeMap::from([
        ("rate_pct".to_string(), rate.to_string()),
        ("smt".to_string(), "as found".to_string()),
    ]);
    c.params = BTreeMap::new();
    c.conditions = smtlab_model::keys::Conditions::take_from(&mut flat);
    c.result = crate::testutil::result(samples, achieved);
    c
}

#[test]
fn the_headroom_is_what_is_left_at_full_load_beside_what_the_os_reports() {
    let mut cells = vec![
        cell("int-ops", "1c1t", &[], &[99.0, 100.0, 101.0]),
        cell("int-ops", "1c2t", &[], &[129.0, 130.0, 131.0]),
        util_cell("max", &[999.0, 1000.0, 1001.0], 0.95),
        util_cell("50", &[499.0, 500.0, 501.0], 0.60),
        // All of the maximum offered: 93% reported busy, nothing left.
        util_cell("100", &[997.0, 1000.0, 1003.0], 0.93),
    ];
    let h = headroom(&cells).unwrap();
    assert!((h.reported_busy_pct - 93.0).abs() < 1e-9);
    assert!(h.left.value.abs() < 1e-9);
    assert!(h.left.lean(0.0) == Lean::Neither);
    let ev = evidence(&cells, true);
    assert_eq!(ev.len(), 1, "the curve is no workload of its own");
    assert_eq!(ev[0].headroom.as_ref(), Some(&h));
    let a = decide(&ev[0]);
    let r = a
        .reasons
        .iter()
        .find(|r| r.what.starts_with("throughput left at 93% busy"))
        .unwrap();
    assert_eq!(r.says, Says::Context);
    assert!(r.shown.starts_with("0% ["), "{}", r.shown);
    assert_eq!(
        a.recommendation,
        Recommendation::KeepOn,
        "context does not decide"
    );
    cells.truncate(2);
    assert!(headroom(&cells).is_none());
}

#[test]
fn a_single_threaded_workload_gets_no_two_cores_figure() {
    // The same values on 2c1t as on 1c1t would read "2 cores vs 1: no change"; with one
    // CPU used on 2c1t the second core had nothing to do, and the answer says so.
    let one_cpu = |mut c: CellRecord| {
        let samples: Vec<smtlab_model::SampleRecord> = (0..3)
            .map(|i| smtlab_model::SampleRecord {
                value: 100.0 + f64::from(i),
                iterations: 1,
                elapsed_ns: 1_000_000,
                work: 1.0,
                cpu_ns: None,
                start_spread_ns: None,
                cpus: vec![0],
                metrics: BTreeMap::new(),
            })
            .collect();
        c.result = crate::testutil::result(samples, &[100.0, 101.0, 102.0]);
        c
    };
    let cells = vec![
        one_cpu(cell("null-syscall", "1c1t", &[], &[100.0, 101.0, 102.0])),
        one_cpu(cell("null-syscall", "2c1t", &[], &[100.0, 101.0, 102.0])),
    ];
    let ev = evidence(&cells, false);
    assert_eq!(ev.len(), 1);
    assert!(ev[0].single_threaded && ev[0].second_core.is_none());
    let a = decide(&ev[0]);
    assert_eq!(a.recommendation, Recommendation::NoSmt);
    assert!(a.answer.contains("single-threaded"), "{}", a.answer);
    assert!(!a.answer.contains("2 cores vs 1"), "{}", a.answer);
}

#[test]
fn a_server_at_machine_scale_is_decided_by_half_the_cores_with_and_without_siblings() {
    let cells = vec![
        cell(
            "web-static",
            "1c1t",
            &[("server", "event")],
            &[99.0, 100.0, 101.0],
        ),
        cell(
            "web-static",
            "1c2t",
            &[("server", "event")],
            &[109.0, 110.0, 111.0],
        ),
        cell(
            "web-static",
            "half-cores-1t",
            &[("server", "event")],
            &[799.0, 800.0, 801.0],
        ),
        cell(
            "web-static",
            "half-cores-2t",
            &[("server", "event")],
            &[599.0, 600.0, 601.0],
        ),
    ];
    let ev = evidence(&cells, true);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].machine_half.as_deref(), Some("half-cores-2t"));
    assert!((ev[0].machine_gain.as_ref().unwrap().value - 0.75).abs() < 1e-9);
    let a = decide(&ev[0]);
    // The whole machine decides over the sibling pair: SMT costs the server 25% there.
    assert_eq!(a.recommendation, Recommendation::TurnOff);
    let deciding: Vec<&str> = a.deciding().map(|r| r.what.as_str()).collect();
    assert_eq!(
        deciding,
        ["speed-up, half the machine (half-cores-2t/half-cores-1t)"]
    );
    // The same pair is a row of every speed-up table (report, compare, JSON export).
    let kinds: Vec<_> = smtlab_model::verdict::pairs(&cells)
        .into_iter()
        .map(|p| p.kind)
        .collect();
    assert!(
        kinds.contains(&smtlab_model::verdict::PairKind::HalfMachineSmtGain),
        "{kinds:?}"
    );
}

#[test]
fn a_servers_p99_under_load_is_shown_beside_the_answer_without_deciding() {
    let with_p99 = |placement: &str, values: &[f64], p99_ms: &[f64]| {
        let mut c = cell("web-static", placement, &[("server", "cmd")], values);
        c.result.samples = p99_ms
            .iter()
            .zip(values)
            .map(|(p, v)| smtlab_model::SampleRecord {
                value: *v,
                iterations: 1,
                elapsed_ns: 1,
                work: 1.0,
                cpu_ns: None,
                start_spread_ns: None,
                cpus: Vec::new(),
                metrics: [(
                    smtlab_model::metrics::web::LATENCY_P99_NS.to_string(),
                    p * 1e6,
                )]
                .into(),
            })
            .collect();
        c
    };
    let cells = vec![
        with_p99("1c1t", &[99.0, 100.0, 101.0], &[1.9, 2.0, 2.1]),
        with_p99("1c2t", &[129.0, 130.0, 131.0], &[2.9, 3.0, 3.1]),
    ];
    let ev = evidence(&cells, true);
    let l = ev[0].latency.as_ref().expect("the latency under load");
    assert_eq!(l.placements, ("1c1t".to_string(), "1c2t".to_string()));
    assert!((l.base_ms.value - 2.0).abs() < 1e-9);
    assert!((l.ratio.as_ref().unwrap().value - 1.5).abs() < 1e-9);
    let a = decide(&ev[0]);
    // The throughput decides; the latency is context.
    assert_eq!(a.recommendation, Recommendation::KeepOn);
    let r = a
        .reasons
        .iter()
        .find(|r| r.what == "p99 under load (1c2t/1c1t)")
        .unwrap();
    assert!(!r.deciding && r.says == Says::Context);
    assert!(r.shown.starts_with("+50%"), "{}", r.shown);
    let r = a
        .reasons
        .iter()
        .find(|r| r.what == "p99 under load on 1c1t")
        .unwrap();
    assert_eq!(r.shown, "2.000 [1.752, 2.248] ms");
    // Cells whose samples carry no latency have none.
    assert!(
        evidence(
            &[
                cell("int-ops", "1c1t", &[], &[1.0, 1.1, 0.9]),
                cell("int-ops", "1c2t", &[], &[1.0, 1.1, 0.9])
            ],
            true
        )[0]
        .latency
        .is_none()
    );
}

/// A point of a latency sweep: `web-static rate=R` on `placement`, each sample serving
/// `served` requests/s with the percentiles `(p50, p99, p99.9)` in ms and `errors`.
fn sweep_cell(
    placement: &str,
    rate: &str,
    served: &[f64],
    p: (f64, f64, f64),
    errors: f64,
) -> CellRecord {
    use smtlab_model::metrics::web as m;
    let mut c = cell(
        "web-static",
        placement,
        &[("server", "cmd"), ("rate", rate)],
        served,
    );
    c.result.samples = served
        .iter()
        .enumerate()
        .map(|(i, s)| {
            // A little spread between samples, so each percentile has an interval.
            let k = 1.0 + 0.01 * i as f64;
            let mut metrics: BTreeMap<String, f64> = [
                (m::REQUESTS_PER_S, *s),
                (m::OFFERED_PER_S, rate.parse().unwrap()),
                (m::ERRORS, errors),
                (m::UNSENT, 0.0),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            if *s > 0.0 {
                metrics.insert(m::LATENCY_P50_NS.into(), p.0 * k * 1e6);
                metrics.insert(m::LATENCY_P99_NS.into(), p.1 * k * 1e6);
                metrics.insert(m::LATENCY_P999_NS.into(), p.2 * k * 1e6);
            }
            smtlab_model::SampleRecord {
                value: *s,
                iterations: 1,
                elapsed_ns: 1,
                work: 1.0,
                cpu_ns: None,
                start_spread_ns: None,
                cpus: Vec::new(),
                metrics,
            }
        })
        .collect();
    c
}

#[test]
fn a_rate_not_kept_up_with_is_reported_as_such_and_the_sweep_decides_nothing() {
    let throughput = vec![
        cell(
            "web-static",
            "1c1t",
            &[("server", "cmd"), ("rate", "0")],
            &[99.0, 100.0, 101.0],
        ),
        cell(
            "web-static",
            "1c2t",
            &[("server", "cmd"), ("rate", "0")],
            &[129.0, 130.0, 131.0],
        ),
    ];
    let mut cells = throughput.clone();
    cells.extend([
        sweep_cell(
            "1c1t",
            "1000",
            &[1000.0, 999.0, 1001.0],
            (0.2, 0.9, 2.0),
            0.0,
        ),
        sweep_cell(
            "1c2t",
            "1000",
            &[1000.0, 1000.0, 998.0],
            (0.3, 1.2, 2.5),
            0.0,
        ),
        // 1c1t falls behind at 2000/s: it serves 1500 (below 95%), no percentile shown.
        sweep_cell(
            "1c1t",
            "2000",
            &[1500.0, 1490.0, 1510.0],
            (5.0, 80.0, 120.0),
            0.0,
        ),
        // 1c2t keeps pace on average but one sample had errors: not kept up either.
        sweep_cell(
            "1c2t",
            "2000",
            &[2000.0, 1999.0, 2001.0],
            (0.4, 1.5, 3.0),
            1.0,
        ),
    ]);
    let ev = evidence(&cells, true);
    // The sweep's cells are points of the workload, not workloads of their own.
    assert_eq!(ev.len(), 1, "{ev:#?}");
    let sweeps = &ev[0].latency_sweeps;
    assert_eq!(sweeps.len(), 1);
    let s = &sweeps[0];
    assert_eq!(s.placements, ("1c1t".to_string(), "1c2t".to_string()));
    let offered: Vec<f64> = s.points.iter().map(|p| p.offered_per_s).collect();
    assert_eq!(offered, [1000.0, 2000.0]);
    for side in &s.points[0].sides {
        assert!(side.kept_up, "{side:?}");
        let (p50, p99, p999) = (
            side.p50_ms.as_ref().unwrap(),
            side.p99_ms.as_ref().unwrap(),
            side.p999_ms.as_ref().unwrap(),
        );
        assert!(p50.value <= p99.value && p99.value <= p999.value);
        assert!(p99.ci95_low.unwrap() < p99.value && p99.value < p99.ci95_high.unwrap());
    }
    let [behind, errors] = &s.points[1].sides[..] else {
        panic!("{s:?}")
    };
    assert!(!behind.kept_up && behind.p99_ms.is_none() && behind.p50_ms.is_none());
    assert!((behind.achieved_per_s - 1500.0).abs() < 1e-9);
    assert!(!errors.kept_up && errors.p99_ms.is_none());
    assert_eq!(errors.errors, 3);
    assert_eq!(behind_words(errors), " (3 errors)");
    // One sample of three behind: the mean served is near the rate, yet not kept up.
    let one_behind = sweep_side(
        &sweep_cell(
            "1c1t",
            "1000",
            &[1000.0, 900.0, 1000.0],
            (0.2, 0.9, 2.0),
            0.0,
        ),
        1000.0,
    );
    assert!(!one_behind.kept_up && one_behind.p50_ms.is_none());
    assert_eq!(behind_words(&one_behind), " (1 of 3 samples behind)");

    // The answer is the one the throughput cells alone give.
    let a = decide(&ev[0]);
    let mut without = evidence(&throughput, true)[0].clone();
    assert!(without.latency_sweeps.is_empty());
    without.latency_sweeps = ev[0].latency_sweeps.clone();
    assert_eq!(a, decide(&without));
    assert_eq!(a.recommendation, Recommendation::KeepOn);

    // Every format shows it: offered against served, never a percentile it lacks.
    let text = text(std::slice::from_ref(&a), 80);
    for l in text.lines() {
        assert!(l.chars().count() <= 80, "{l:?}");
    }
    assert!(text.contains("latency at offered load"), "{text}");
    let behind_row = text
        .lines()
        .find(|l| l.contains("2000") && l.contains("1c1t"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        behind_row.contains("1500") && behind_row.contains("not kept up"),
        "{behind_row}"
    );
    assert!(!behind_row.contains("80"), "{behind_row}");
    let md = markdown(std::slice::from_ref(&a));
    assert!(
        md.contains("| 2000 | 1c2t | 2000 | not kept up (3 errors) | - | - |"),
        "{md}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&json(1, &[], std::slice::from_ref(&a))).unwrap();
    let pts = &v["advice"][0]["latency_sweeps"][0]["points"];
    assert_eq!(pts[1]["sides"][0]["kept_up"], false);
    assert!(pts[1]["sides"][0].get("p99_ms").is_none());
    assert!(pts[0]["sides"][1]["p99_ms"]["value"].as_f64().unwrap() > 0.0);
    // And the JSON reads back.
    let doc: AdviceDoc = serde_json::from_value(v).unwrap();
    assert_eq!(doc.advice[0].latency_sweeps, a.latency_sweeps);
}

#[test]
fn a_server_switched_off_and_on_compares_half_the_cores() {
    let cells = vec![
        cell(
            "web-static",
            "1c1t",
            &[("smt", "off")],
            &[99.0, 100.0, 101.0],
        ),
        cell(
            "web-static",
            "half-cores-1t",
            &[("smt", "off")],
            &[799.0, 800.0, 801.0],
        ),
        cell(
            "web-static",
            "1c1t",
            &[("smt", "on")],
            &[99.0, 100.0, 101.0],
        ),
        cell(
            "web-static",
            "1c2t",
            &[("smt", "on")],
            &[119.0, 120.0, 121.0],
        ),
        cell(
            "web-static",
            "half-cores-1t",
            &[("smt", "on")],
            &[799.0, 800.0, 801.0],
        ),
        cell(
            "web-static",
            "half-cores-2t",
            &[("smt", "on")],
            &[999.0, 1000.0, 1001.0],
        ),
    ];
    let ev = evidence(&cells, true);
    assert_eq!(ev.len(), 1);
    assert!(ev[0].machine_switched);
    assert_eq!(ev[0].machine_half.as_deref(), Some("half-cores-2t"));
    assert!((ev[0].machine_gain.as_ref().unwrap().value - 1.25).abs() < 1e-9);
    let a = decide(&ev[0]);
    assert_eq!(a.recommendation, Recommendation::KeepOn);
    let deciding: Vec<&str> = a.deciding().map(|r| r.what.as_str()).collect();
    assert_eq!(
        deciding,
        ["speed-up, half the machine (SMT on half-cores-2t/off half-cores-1t)"]
    );
}

#[test]
fn the_report_draws_the_sweep_with_both_sides() {
    let cells = vec![
        cell(
            "web-static",
            "1c1t",
            &[("server", "cmd")],
            &[99.0, 100.0, 101.0],
        ),
        cell(
            "web-static",
            "1c2t",
            &[("server", "cmd")],
            &[129.0, 130.0, 131.0],
        ),
        sweep_cell("1c1t", "500", &[500.0, 500.0, 500.0], (0.2, 0.9, 2.0), 0.0),
        sweep_cell("1c2t", "500", &[500.0, 500.0, 500.0], (0.3, 1.2, 2.5), 0.0),
        sweep_cell("1c1t", "900", &[700.0, 700.0, 700.0], (0.2, 0.9, 2.0), 0.0),
        sweep_cell("1c2t", "900", &[900.0, 900.0, 900.0], (0.3, 1.2, 2.5), 0.0),
    ];
    let a = decide(&evidence(&cells, true)[0]);
    let svg = super::formats::sweep_chart(&a.workload, &a.latency_sweeps[0]).unwrap();
    for name in ["1c1t p99", "1c2t p99", "1c1t p50", "1c2t p50"] {
        assert!(svg.contains(name), "{name}: {svg}");
    }
    assert!(svg.contains("(1c1t vs 1c2t)"), "{svg}");
    // The rate 1c1t did not keep up with is named, not drawn.
    assert_eq!(
        super::formats::not_kept_up(&a.latency_sweeps[0]),
        ["1c1t at 900/s (served 700/s)"]
    );
    assert_eq!(svg.matches("1c1t at 900 req/s").count(), 0, "{svg}");
    assert_eq!(svg.matches("1c2t at 900 req/s").count(), 2, "{svg}");
}

#[test]
fn partners_not_measured_are_predicted_from_a_stored_predict_run_and_marked() {
    let host = smtlab_fixtures::fleet::FakeHost::new("h", "Demo CPU", 1.2);
    let mut doc = crate::predict::stored::analyse_run(&crate::testutil::predict_run(&host, 1.0))
        .expect("a predict run");
    let wa_wa = doc
        .predictions
        .iter()
        .find(|p| p.a == "wa" && p.b == "wa")
        .cloned();
    let measured = Partnered {
        partner: "wb".into(),
        figure: Figure::new(1.5, 1.4, 1.6),
        predicted_by_run: None,
    };
    let mut ev = vec![Evidence {
        workload: "wa threads=1".into(),
        smt: true,
        partners: vec![measured.clone()],
        ..Evidence::default()
    }];
    let names = ["wb", "wa", "zz"].map(String::from);
    // The run measured the cores form only: nothing to predict the sibling from.
    let missing = add_predicted_partners(&mut ev, &doc, &names);
    assert_eq!((ev[0].partners.len(), missing.len()), (1, 2));
    for p in &mut doc.predictions {
        p.form = Form::Sibling;
    }
    let missing = add_predicted_partners(&mut ev, &doc, &names);
    assert_eq!(missing, ["zz"]);
    assert_eq!(
        ev[0].partners[0], measured,
        "a measured partner stays as measured"
    );
    let wa = &ev[0].partners[1];
    assert_eq!(
        (wa.partner.as_str(), wa.predicted_by_run),
        ("wa", Some(doc.run))
    );
    let want = wa_wa.unwrap().combined_speed.unwrap();
    assert_eq!(
        (wa.figure.value, wa.figure.ci95_low, wa.figure.ci95_high),
        (want.value, want.low, want.high)
    );
    let text = crate::advice::text(&[decide(&ev[0])], 200);
    assert!(text.contains("predicted by predict run"), "{text}");
}
