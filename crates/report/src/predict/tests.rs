use std::collections::BTreeMap;

use smtlab_model::keys::Conditions;
use smtlab_model::metrics::corun::{PARTNER_ALONE_VALUE, PARTNER_VALUE};
use smtlab_model::{CellRecord, Direction, SampleRecord};

use super::*;

const VALUES: [f64; 3] = [99.0, 100.0, 101.0];

/// What a workload or ruler is as a cell: a benchmark and its parameters.
#[derive(Clone)]
struct W {
    label: &'static str,
    bench: &'static str,
    size: &'static str,
}

fn key(w: &W, form: Form, partner: &str) -> CellKey {
    CellKey {
        benchmark: w.bench.into(),
        params: BTreeMap::from([("size".to_string(), w.size.to_string())]),
        conditions: Conditions {
            form: Some(form),
            partner: Some(partner.into()),
            ..Default::default()
        },
        placement: format!("corun-{}", form.name()),
    }
}

/// A stored cell of `key` (times, lower is better) whose values are `VALUES x scale`,
/// its partner's values `VALUES x partner_scale` beside its own reference `VALUES`.
fn cell(key: &CellKey, scale: f64, partner_scale: Option<f64>) -> CellRecord {
    let samples: Vec<SampleRecord> = VALUES
        .iter()
        .map(|&v| SampleRecord {
            value: v * scale,
            iterations: 1,
            elapsed_ns: (v * scale) as u64,
            work: 1.0,
            cpu_ns: None,
            start_spread_ns: None,
            cpus: vec![0],
            metrics: partner_scale
                .map(|p| {
                    BTreeMap::from([
                        (PARTNER_VALUE.to_string(), v * p),
                        (PARTNER_ALONE_VALUE.to_string(), v),
                    ])
                })
                .unwrap_or_default(),
        })
        .collect();
    let values: Vec<f64> = VALUES.iter().map(|v| v * scale).collect();
    CellRecord {
        benchmark: key.benchmark.clone(),
        group: "test".into(),
        unit: "ns".into(),
        direction: Direction::Lower,
        params: key.params.clone(),
        conditions: key.conditions.clone(),
        placement_spec: key.placement.clone(),
        placement: crate::testutil::placement(&key.placement, "cpus:0,1", 2, 1),
        result: crate::testutil::result(samples, &values),
        counters: None,
    }
}

/// The cells and keys of A beside B (cores): A slowed by `sa`, B by `sb`.
fn pair(a: &W, b: &W, sa: f64, sb: f64, cells: &mut Vec<CellRecord>) -> PairKeys {
    let alone = key(a, Form::Alone, b.label);
    let co = key(a, Form::Cores, b.label);
    cells.push(cell(&alone, 1.0, None));
    cells.push(cell(&co, sa, Some(sb)));
    PairKeys {
        a: a.label.into(),
        b: b.label.into(),
        b_direction: Direction::Lower,
        alone,
        co: vec![(Form::Cores, co)],
    }
}

const TRUE_WEIGHTS: [f64; 2] = [0.5, 2.0];

fn workloads() -> [W; 3] {
    let w = |label, size| W {
        label,
        bench: "work",
        size,
    };
    [w("w1", "1"), w("w2", "2"), w("w3", "3")]
}

/// Sensitivity and contentiousness of each workload to the two rulers.
fn truth(i: usize) -> ([f64; 2], [f64; 2]) {
    [
        ([1.1, 1.4], [1.3, 1.1]),
        ([1.5, 1.0], [1.2, 1.5]),
        ([1.2, 1.3], [1.0, 1.6]),
    ][i]
}

fn true_slowdown(a: usize, b: usize) -> f64 {
    let x = model::features(&truth(a).0, &truth(b).1);
    1.0 + TRUE_WEIGHTS[0] * x[0] + TRUE_WEIGHTS[1] * x[1]
}

/// A plan of three workloads and two rulers made of one benchmark (footprints of two
/// sizes), with cells measured as the true model says.
fn demo(training: &[(usize, usize)], held_out: &[(usize, usize)]) -> (PlanKeys, Vec<CellRecord>) {
    let ws = workloads();
    let rulers = [
        W {
            label: "small",
            bench: "footprint",
            size: "32KiB",
        },
        W {
            label: "large",
            bench: "footprint",
            size: "1MiB",
        },
    ];
    let mut cells = Vec::new();
    let mut plan = PlanKeys {
        workloads: ws.iter().map(|w| w.label.to_string()).collect(),
        rulers: rulers
            .iter()
            .map(|r| RulerSpec {
                name: r.label.into(),
                resource: "cache".into(),
                workload: format!("footprint size={}", r.size),
                ..RulerSpec::default()
            })
            .collect(),
        forms: vec![Form::Cores],
        ..Default::default()
    };
    for (i, w) in ws.iter().enumerate() {
        let (sens, cont) = truth(i);
        for (r, ruler) in rulers.iter().enumerate() {
            plan.sensitivity
                .push(pair(w, ruler, sens[r], cont[r], &mut cells));
            plan.contentiousness
                .push(pair(ruler, w, cont[r], sens[r], &mut cells));
        }
    }
    let mut pairs = |list: &[(usize, usize)]| -> Vec<PairKeys> {
        list.iter()
            .map(|&(a, b)| {
                let (sa, sb) = (true_slowdown(a, b), true_slowdown(b, a));
                pair(&ws[a], &ws[b], sa, sb, &mut cells)
            })
            .collect()
    };
    plan.training = pairs(training);
    plan.held_out = pairs(held_out);
    (plan, cells)
}

#[test]
fn a_workload_never_a_partner_is_predicted_only_beside_the_others() {
    // w3 as a server workload of a run stored before a server could be a partner:
    // beside the rulers, never their partner.
    let (mut plan, cells) = demo(&[(0, 1), (0, 2), (1, 1)], &[]);
    plan.contentiousness.retain(|k| k.b != "w3");
    let doc = analyse(&plan, &cells, 1);
    let found = |a: &str, b: &str| {
        doc.predictions
            .iter()
            .find(|p| p.a == a && p.b == b)
            .cloned()
    };
    let w3_beside_w1 = found("w3", "w1").expect("the server beside a partner");
    assert!(
        w3_beside_w1.combined_speed.is_none(),
        "w1 beside w3 was never measurable: {w3_beside_w1:?}"
    );
    assert!(found("w1", "w3").is_none() && found("w3", "w3").is_none());
    let w1_w2 = found("w1", "w2").unwrap();
    assert!(w1_w2.combined_speed.is_some());
    let lines = text::combined(&doc.predictions, Form::Cores).join("\n");
    assert!(!lines.contains("w3"), "{lines}");
    let note = text::missing_note(&doc.predictions, &doc.unpredicted, Form::Cores).unwrap();
    assert!(
        note.starts_with("- not predicted: the partner was never measured as one"),
        "{note}"
    );
    let (plan, cells) = demo(&[(0, 1), (0, 2), (1, 1)], &[]);
    let every = analyse(&plan, &cells, 1);
    assert_eq!(
        text::missing_note(&every.predictions, &every.unpredicted, Form::Cores),
        None
    );
}

#[test]
fn a_ruler_of_code_is_checked_against_the_l1_instruction_cache() {
    use smtlab_model::metrics::frontend::{CODE_BYTES, L1I_BYTES};
    let (plan, mut cells) = demo(&[(0, 1)], &[]);
    assert!(code_checks(&plan, &cells).is_empty(), "no ruler of code");
    let alone = plan
        .contentiousness
        .iter()
        .find(|k| k.a == "small")
        .unwrap()
        .alone
        .clone();
    let with = |cells: &mut Vec<CellRecord>, metrics: &[(&str, f64)]| {
        let c = cells.iter_mut().find(|c| c.key() == alone).unwrap();
        for s in &mut c.result.samples {
            s.metrics = metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        }
    };
    with(&mut cells, &[(CODE_BYTES, 98304.0), (L1I_BYTES, 32768.0)]);
    assert_eq!(
        code_checks(&plan, &cells),
        ["small runs through 96 KiB of code, 3.0x the 32 KiB L1 instruction cache: it leaves it"]
    );
    with(&mut cells, &[(CODE_BYTES, 16384.0), (L1I_BYTES, 32768.0)]);
    assert!(code_checks(&plan, &cells)[0].contains("within the 32 KiB L1 instruction cache"));
    with(&mut cells, &[(CODE_BYTES, 16384.0)]);
    assert!(
        code_checks(&plan, &cells)[0]
            .ends_with("(the L1 instruction cache's size is not known here)")
    );
    assert!(
        analyse(&plan, &cells, 1)
            .ruler_checks
            .iter()
            .any(|l| l.starts_with("small runs through 16 KiB"))
    );
}

#[test]
fn profiles_keep_two_rulers_of_one_benchmark_apart() {
    let (plan, cells) = demo(&[(0, 1), (0, 2)], &[]);
    let doc = analyse(&plan, &cells, 7);
    assert_eq!(doc.schema, PROFILE_SCHEMA);
    let p = doc.profiles.iter().find(|p| p.workload == "w2").unwrap();
    let sens: Vec<f64> = p
        .rulers
        .iter()
        .map(|r| r.sensitivity.unwrap().ratio)
        .collect();
    let cont: Vec<f64> = p
        .rulers
        .iter()
        .map(|r| r.contentiousness.unwrap().ratio)
        .collect();
    for (got, want) in sens.iter().chain(&cont).zip([1.5, 1.0, 1.2, 1.5]) {
        assert!((got - want).abs() < 1e-9, "{sens:?} {cont:?}");
    }
    // Each ruler's own figure alone, with its interval.
    let r = &doc.rulers[1];
    assert_eq!(r.spec.name, "large");
    assert_eq!(
        (r.alone, r.unit.as_deref(), r.alone_n),
        (Some(100.0), Some("ns"), Some(3))
    );
    assert!(r.alone_ci95_half_width.unwrap() > 0.0);
}

#[test]
fn a_partner_only_ruler_is_read_from_the_partner_side_of_its_cells() {
    let (mut plan, mut cells) = demo(&[(0, 1), (0, 2), (1, 1)], &[]);
    // "large" measured as the partner only: no cell of it beside a workload.
    plan.rulers[1].partner_only = true;
    plan.rulers[1].partner_unit = Some("GB/s".into());
    let gone: Vec<CellKey> = plan
        .contentiousness
        .iter()
        .filter(|k| k.a == "large")
        .flat_map(|k| std::iter::once(k.alone.clone()).chain(k.co.iter().map(|c| c.1.clone())))
        .collect();
    plan.contentiousness.retain(|k| k.a != "large");
    cells.retain(|c| !gone.contains(&c.key()));
    let doc = analyse(&plan, &cells, 1);
    // Its contentiousness: its slowdown beside each workload, from its own samples
    // inside the workload's against its windows alone.
    for (i, w) in workloads().iter().enumerate() {
        let p = doc.profiles.iter().find(|p| p.workload == w.label).unwrap();
        let c = p.rulers[1].contentiousness.unwrap();
        assert!((c.ratio - truth(i).1[1]).abs() < 1e-9, "{}: {c:?}", w.label);
        assert!(c.ci95_low.is_some(), "{c:?}");
    }
    // Its own figure: its values alone, in its own unit, not the workload's.
    let r = &doc.rulers[1];
    assert_eq!(
        (r.alone, r.unit.as_deref(), r.alone_n),
        (Some(100.0), Some("GB/s"), Some(3))
    );
    // The model is fitted with it as with any ruler.
    let m = doc.models[0].model.as_ref().unwrap();
    for (w, t) in m.weights.iter().zip(TRUE_WEIGHTS) {
        assert!((w - t).abs() < 0.05, "{:?}", m.weights);
    }
    // A workload never a partner (a server, stored before a server could be one): not
    // even this ruler's side makes it one.
    let mut as_server = plan.clone();
    as_server.never_partners = vec!["w3".into()];
    as_server.contentiousness.retain(|k| k.b != "w3");
    let doc_s = analyse(&as_server, &cells, 1);
    let w3 = doc_s.profiles.iter().find(|p| p.workload == "w3").unwrap();
    assert!(
        w3.rulers.iter().all(|r| r.contentiousness.is_none()),
        "{w3:?}"
    );
    assert!(w3.rulers[1].sensitivity.is_some());
    assert!(!doc_s.predictions.iter().any(|p| p.b == "w3"));
    // A held-back cell beside it holds its contentiousness back too.
    let s = &plan.sensitivity[1];
    assert_eq!((s.a.as_str(), s.b.as_str()), ("w1", "large"));
    shorten(&mut cells, std::slice::from_ref(s), 0.05);
    let doc = analyse(&plan, &cells, 1);
    let p = &doc.profiles[0];
    assert!(p.rulers[1].contentiousness.is_none() && p.rulers[1].sensitivity.is_none());
    assert_eq!(doc.held_back.len(), 1, "{:?}", doc.held_back);
    assert!(doc.ruler_checks.is_empty(), "{:?}", doc.ruler_checks);
    // Passes longer than the workloads' samples: no window holds one, and it says so.
    for c in &mut cells {
        for s in &mut c.result.samples {
            s.metrics.clear();
        }
    }
    let doc = analyse(&plan, &cells, 1);
    assert!(doc.profiles[1].rulers[1].contentiousness.is_none());
    assert_eq!(doc.rulers[1].alone, None);
    let [check] = doc.ruler_checks.as_slice() else {
        panic!("{:?}", doc.ruler_checks)
    };
    assert!(
        check.starts_with("large finished no sample of its own"),
        "{check}"
    );
}

#[test]
fn the_model_fitted_on_measured_pairs_predicts_held_out_pairs() {
    let (plan, cells) = demo(&[(0, 1), (0, 2), (1, 1)], &[(1, 2), (2, 2), (0, 0)]);
    let doc = analyse(&plan, &cells, 1);
    let m = doc.models[0].model.as_ref().unwrap();
    // Five ordered training pairs (the self pair once): both weights recovered.
    assert_eq!(m.training_pairs, 5);
    for (w, t) in m.weights.iter().zip(TRUE_WEIGHTS) {
        assert!((w - t).abs() < 0.05, "{:?}", m.weights);
    }
    // Every ordered pair of the three workloads is predicted, with its combined speed.
    assert_eq!(doc.predictions.len(), 9);
    let p = doc
        .predictions
        .iter()
        .find(|p| p.a == "w2" && p.b == "w3")
        .unwrap();
    assert!(
        (p.slowdown.value - true_slowdown(1, 2)).abs() < 0.005,
        "{p:?}"
    );
    let want = 1.0 / true_slowdown(1, 2) + 1.0 / true_slowdown(2, 1);
    let got = p.combined_speed.as_ref().unwrap().value;
    assert!((got - want).abs() < 0.01, "{p:?}");

    let v = &doc.validation[0];
    assert_eq!(v.checked.len(), 4, "{v:?}");
    assert!(v.model.mae_points < 0.5, "{v:?}");
    assert!(v.model.mae_points < v.no_interference.mae_points);
    assert!(v.model.mae_points < v.mean_slowdown.mae_points);
    assert_eq!(v.model.direction_right, 1.0, "{v:?}");
}

#[test]
fn the_training_pairs_are_chosen_where_the_profiles_tell_most() {
    let (plan, cells) = demo(&[], &[]);
    let name = |i: usize| plan.workloads[i].clone();
    let candidates: Vec<(String, String)> = [(0, 0), (1, 1), (0, 1), (1, 2)]
        .iter()
        .map(|&(a, b)| (name(a), name(b)))
        .collect();
    // w1 with w2 presses both rulers, one each way round: the most to learn from.
    assert_eq!(training_choice(&plan, &cells, &candidates, 1), [2]);
    assert_eq!(training_choice(&plan, &cells, &candidates, 2)[0], 2);
    // Without measured profiles there is nothing to tell them apart: the seed's order.
    assert_eq!(training_choice(&plan, &[], &candidates, 3), [0, 1, 2]);
}

#[test]
fn pairs_beyond_the_training_pairs_get_no_figure_and_say_why() {
    // Fitted on w1 with w2 alone, without w1's contentiousness for the small ruler:
    // both training pairs then press the large one only, and pairs pressing the small
    // one reach where they never did.
    let (plan, mut cells) = demo(&[(0, 1)], &[(0, 2)]);
    let gone = plan.contentiousness[0].co[0].1.clone();
    cells.retain(|c| c.key() != gone);
    let doc = analyse(&plan, &cells, 1);
    let none: Vec<(&str, &str)> = doc
        .unpredicted
        .iter()
        .map(|u| (u.a.as_str(), u.b.as_str()))
        .collect();
    assert!(none.contains(&("w2", "w2")), "{none:?}");
    assert_eq!(doc.predictions.len() + none.len(), 9);
    let matrix = text::matrix(&doc.predictions, &doc.unpredicted, Form::Cores);
    assert_eq!(matrix.matches("no figure").count(), none.len(), "{matrix}");
    let why = text::unpredicted(&doc.unpredicted, Form::Cores).join("\n");
    assert!(
        why.contains("w2 beside w2: no figure, beyond the training pairs (leverage "),
        "{why}"
    );
    // Every pair has a figure or a reason: no `-` to explain.
    assert_eq!(
        text::missing_note(&doc.predictions, &doc.unpredicted, Form::Cores),
        None
    );
    // A held-out pair without a figure is scored as 1, like no interference.
    let v = &doc.validation[0];
    let c = v.checked.iter().find(|c| c.predicted.is_none()).unwrap();
    assert!(c.no_figure.is_some());
    assert_eq!(c.scored(), 1.0);
    assert!(text::validation(v).contains("no figure (scored as 1)"));
    // The page says it under the form's matrices.
    let page = html::section(&doc, &[]);
    assert!(
        page.contains("<li>w2 beside w2: no figure, beyond"),
        "{page}"
    );
}

#[test]
fn unmeasured_cells_leave_gaps_not_figures() {
    let (plan, mut cells) = demo(&[(0, 0), (0, 1), (0, 2), (1, 1), (2, 2)], &[(1, 2)]);
    // The ruler "small" beside w1 was skipped: w1 has no contentiousness for it.
    let gone = plan.contentiousness[0].co[0].1.clone();
    cells.retain(|c| c.key() != gone);
    let doc = analyse(&plan, &cells, 1);
    let p = doc.profiles.iter().find(|p| p.workload == "w1").unwrap();
    assert!(p.rulers[0].contentiousness.is_none());
    // Pairs with w1 on either side are predicted without that ruler, and say so; the
    // others use every ruler.
    let of = |a: &str, b: &str| {
        doc.predictions
            .iter()
            .find(|p| p.a == a && p.b == b)
            .unwrap()
    };
    assert_eq!(of("w2", "w1").unknown, ["small"]);
    assert_eq!(of("w1", "w2").unknown, ["small"]);
    assert!(of("w2", "w3").unknown.is_empty());
    let matrix = text::matrix(&doc.predictions, &doc.unpredicted, Form::Cores);
    assert_eq!(matrix.matches(" *").count(), 5, "{matrix}"); // row and column of w1
    let note = text::unknown_note(&doc.predictions, Form::Cores).unwrap();
    assert!(note.contains("without a figure of small"), "{note}");
    // w2 beside w1 without the small ruler: only the large one's feature counts.
    let x = model::features(&[1.0, truth(1).0[1]], &[1.0, truth(0).1[1]]);
    let m = doc.models[0].model.as_ref().unwrap();
    assert!((of("w2", "w1").slowdown.value - m.predict(&x).unwrap().value).abs() < 1e-12);
}

/// The cells of `pairs` in `plan` whose co-run samples are `share` as long.
fn shorten(cells: &mut [CellRecord], keys: &[PairKeys], share: f64) {
    for k in keys {
        let c = cells.iter_mut().find(|c| c.key() == k.co[0].1).unwrap();
        for s in &mut c.result.samples {
            s.elapsed_ns = (s.elapsed_ns as f64 * share) as u64;
        }
    }
}

#[test]
fn pairs_cut_short_are_held_back_from_profiles_fit_and_validation() {
    let (plan, mut cells) = demo(&[(0, 1), (0, 2), (1, 1)], &[(1, 2)]);
    // w3's sensitivity to "large" and one training pair: samples a twentieth as long.
    shorten(&mut cells, &plan.sensitivity[5..6], 0.05);
    shorten(&mut cells, &plan.training[..1], 0.05);
    let doc = analyse(&plan, &cells, 1);
    assert_eq!(doc.held_back.len(), 2, "{:?}", doc.held_back);
    let why = doc.held_back[0].doubt.as_deref().unwrap();
    assert!(why.starts_with("samples cut short ("), "{why}");
    let lines = text::held_back(&doc.held_back);
    assert!(
        lines[0].starts_with("w3 beside large, cores: samples cut short"),
        "{lines:?}"
    );
    let p = doc.profiles.iter().find(|p| p.workload == "w3").unwrap();
    assert!(p.rulers[1].sensitivity.is_none() && p.rulers[0].sensitivity.is_some());
    // Three training pairs less the one held back: three ordered observations.
    assert_eq!(doc.models[0].model.as_ref().unwrap().training_pairs, 3);
    // A tenth or more of the reference's length is kept.
    let (plan, mut cells) = demo(&[(0, 1)], &[]);
    shorten(&mut cells, &plan.training, 0.2);
    assert!(analyse(&plan, &cells, 1).held_back.is_empty());
}

#[test]
fn without_training_pairs_the_model_says_why() {
    let (plan, cells) = demo(&[], &[(1, 2)]);
    let doc = analyse(&plan, &cells, 1);
    assert_eq!(
        doc.models[0].not_fitted.as_deref(),
        Some("no measured pair to fit the model on")
    );
    assert!(doc.predictions.is_empty() && doc.validation.is_empty());
    assert!(text::model(&doc.models[0]).contains("not fitted"));
}

#[test]
fn scores_count_directions_beyond_five_percent() {
    let s = validate::score(&[(1.10, 1.20), (1.00, 1.08), (1.02, 1.01), (1.3, 1.0)]).unwrap();
    assert!((s.mae_points - (10.0 + 8.0 + 1.0 + 30.0) / 4.0).abs() < 1e-9);
    assert_eq!(s.direction_right, 0.5);
    assert_eq!(s.differing, 2);
    assert_eq!(s.direction_right_differing, Some(0.5));
    assert!(validate::score(&[]).is_none());
}

#[test]
fn the_text_shows_intervals_and_scores() {
    let (plan, cells) = demo(&[(0, 1), (0, 2), (1, 1)], &[(1, 2)]);
    let doc = analyse(&plan, &cells, 1);
    let profiles = text::profiles(&doc.profiles, Form::Cores);
    assert!(
        profiles.contains("sensitivity") && profiles.contains("1.500x ["),
        "{profiles}"
    );
    let matrix = text::matrix(&doc.predictions, &doc.unpredicted, Form::Cores);
    assert_eq!(matrix.lines().count(), 4, "{matrix}"); // header and three rows
    let rulers = text::rulers(&doc.rulers);
    assert!(
        rulers.contains("100.0 ±") && rulers.contains("(n=3)"),
        "{rulers}"
    );
    let v = text::validation(&doc.validation[0]);
    assert!(
        v.contains("no interference") && v.contains("w2 beside w3"),
        "{v}"
    );
    assert!(text::profiles(&doc.profiles, Form::Sibling).is_empty());
    let combined = text::combined(&doc.predictions, Form::Cores);
    assert_eq!(combined.len(), 6, "{combined:?}"); // the unordered pairs of three
    assert!(
        combined[0].starts_with("w1 + w1: combined speed 1.8"),
        "{combined:?}"
    );
}

#[test]
fn a_disturbed_cell_holds_its_pair_back() {
    let (plan, mut cells) = demo(&[(0, 1), (0, 2)], &[]);
    let co = &plan.training[0].co[0].1;
    let cell = cells.iter_mut().find(|c| c.key() == *co).unwrap();
    cell.result.disturbance = Some(smtlab_model::Disturbance {
        windows: 3,
        window_ns: 3_000_000_000,
        cpus: 2,
        tick_ns: 10_000_000,
        steal_ns: 600_000_000,
        foreign_ns: None,
        smtlab_other_ns: None,
        ..Default::default()
    });
    let doc = analyse(&plan, &cells, 1);
    let why = doc.held_back[0].doubt.as_deref().unwrap();
    assert!(why.starts_with("beside: disturbed: steal"), "{why}");
    assert_eq!(doc.models[0].model.as_ref().unwrap().training_pairs, 2);
}

fn footprint(name: &str, rank: u8, alone: f64, half_width: f64) -> Ruler {
    Ruler {
        spec: RulerSpec {
            name: name.into(),
            resource: "cache".into(),
            workload: "mem-latency".into(),
            footprint_rank: Some(rank),
            ..RulerSpec::default()
        },
        unit: Some("ns".into()),
        alone: Some(alone),
        alone_ci95_half_width: Some(half_width),
        alone_n: Some(5),
    }
}

#[test]
fn footprint_rulers_are_checked_to_step_up_per_cache() {
    let rulers = [
        footprint("llc", 3, 40.0, 2.0),
        footprint("l1d", 1, 1.0, 0.1),
        footprint("l2", 2, 4.0, 0.5),
    ];
    let lines = footprint_checks(&rulers);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(
        lines[0].starts_with("l2 is slower per load than l1d"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("llc is slower per load than l2"),
        "{lines:?}"
    );
    // An L2 chase no slower than the L1D's, within their intervals: said.
    let flat = [footprint("l1d", 1, 1.0, 0.1), footprint("l2", 2, 1.15, 0.1)];
    let lines = footprint_checks(&flat);
    assert!(
        lines[0].starts_with("l2 is not clearly slower per load than l1d"),
        "{lines:?}"
    );
}

#[test]
fn a_stored_run_gives_back_its_pairs_by_role_and_its_model() {
    let host = smtlab_fixtures::fleet::FakeHost::new("h", "Demo CPU", 1.2);
    let r = crate::testutil::predict_run(&host, 1.0);
    let keys = stored::plan_keys(&r).expect("a predict run");
    assert_eq!(keys.workloads, ["wa", "wb"]);
    let names: Vec<&str> = keys.rulers.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["int", "dram"]);
    assert_eq!(keys.rulers[1].workload, "mem-read size=auto threads=1");
    assert_eq!(keys.forms, [Form::Cores]);
    let ab = |p: &PairKeys| (p.a.clone(), p.b.clone());
    let sens: Vec<_> = keys.sensitivity.iter().map(ab).collect();
    assert_eq!(
        sens[..2],
        [("wa".into(), "int".into()), ("wa".into(), "dram".into())]
    );
    let cont: Vec<_> = keys.contentiousness.iter().map(ab).collect();
    assert_eq!(
        cont[..2],
        [("int".into(), "wa".into()), ("dram".into(), "wa".into())]
    );
    let training: Vec<_> = keys.training.iter().map(ab).collect();
    assert_eq!(
        training,
        [("wa".into(), "wb".into()), ("wb".into(), "wa".into())]
    );
    let doc = stored::analyse_run(&r).unwrap();
    assert_eq!(doc.run, r.run.id);
    // wa beside int: the first pair, 1.1x slower.
    let s = doc.profiles[0].rulers[0].sensitivity.unwrap();
    assert!((s.ratio - 1.1).abs() < 1e-9, "{s:?}");
    assert!(doc.models[0].model.is_some(), "{:?}", doc.models[0]);
    assert!(doc.held_out.is_empty() && doc.validation.is_empty());
    // Another suite is no predict run.
    let mut other = r.clone();
    other.run.suite = Some("corun".into());
    assert!(stored::plan_keys(&other).is_none());
    // A workload never anyone's partner: a server of a run stored before a server
    // could be a partner.
    assert!(keys.never_partners.is_empty());
    let mut served = r.clone();
    served
        .cells
        .retain(|c| c.conditions.partner.as_deref() != Some("wb"));
    assert_eq!(stored::plan_keys(&served).unwrap().never_partners, ["wb"]);
}

#[test]
fn a_stored_run_reads_a_partner_only_ruler_from_the_cells_beside_it() {
    let host = smtlab_fixtures::fleet::FakeHost::new("h", "Demo CPU", 1.2);
    let mut r = crate::testutil::predict_run(&host, 1.0);
    // dram-wide beside each workload, with the cells of dram beside it for figures.
    let wide: Vec<CellRecord> = r
        .cells
        .iter()
        .filter(|c| c.conditions.partner.as_deref() == Some("ruler:dram"))
        .map(|c| {
            let mut c = c.clone();
            c.conditions.partner = Some("ruler:dram-wide".into());
            c
        })
        .collect();
    r.cells.extend(wide);
    let keys = stored::plan_keys(&r).unwrap();
    let wide = &keys.rulers[2];
    assert_eq!(wide.name, "dram-wide");
    assert!(wide.partner_only);
    assert_eq!(wide.workload, "mem-read size=auto threads=auto");
    assert!(keys.contentiousness.iter().all(|k| k.a != "dram-wide"));
    assert_eq!(
        keys.sensitivity
            .iter()
            .filter(|k| k.b == "dram-wide")
            .count(),
        2
    );
    let doc = stored::analyse_run(&r).unwrap();
    // wa beside dram: 1.3x slower, and so is the partner beside wa (times, lower is
    // better: the partner's direction is its benchmark's, mem-read's cells').
    let figures = &doc.profiles[0].rulers[2];
    assert_eq!(figures.ruler, "dram-wide");
    let c = figures.contentiousness.unwrap();
    assert!((c.ratio - 1.3).abs() < 1e-9, "{c:?}");
    assert!((figures.sensitivity.unwrap().ratio - 1.3).abs() < 1e-9);
    assert_eq!(doc.rulers[2].alone, Some(100.0));
}

#[test]
fn the_page_of_a_predict_run_draws_the_predicted_matrix_beside_the_measured_one() {
    let host = smtlab_fixtures::fleet::FakeHost::new("h", "Demo CPU", 1.2);
    let r = crate::testutil::predict_run(&host, 1.0);
    let page = crate::html::html(&r);
    let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("{s:?} missing"));
    assert!(
        at("predicted slowdown of the row, partner on another core")
            < at("measured slowdown of the row, partner on another core")
    );
    assert!(page.contains("class=\"side\""));
    // wa beside wb, measured: the ninth pair, 1.9x; the ruler columns are not drawn.
    let measured = &page[at("measured slowdown of the row")..];
    assert!(measured.contains(">1.90<"), "{measured}");
    assert!(!page.contains(">ruler:int<"));
    assert!(page.contains("DRAM bandwidth"), "the rulers are listed");
}
