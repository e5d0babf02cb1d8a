use super::*;

/// A small deterministic generator (SplitMix64) for synthetic pairs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Roughly normal: the sum of 12 uniforms, centred.
    fn normal(&mut self) -> f64 {
        (0..12).map(|_| self.next()).sum::<f64>() - 6.0
    }
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("r{i}")).collect()
}

/// Pairs of synthetic workloads: sensitivities and contentiousness in [1, 1.6], the
/// slowdown from `truth` plus noise of standard deviation `noise`.
fn pairs(rng: &mut Rng, n: usize, truth: &[f64], noise: f64) -> Vec<Observation> {
    (0..n)
        .map(|_| {
            let sens: Vec<f64> = truth.iter().map(|_| 1.0 + 0.6 * rng.next()).collect();
            let cont: Vec<f64> = truth.iter().map(|_| 1.0 + 0.6 * rng.next()).collect();
            let x = features(&sens, &cont);
            Observation {
                slowdown: 1.0 + dot(truth, &x) + noise * rng.normal(),
                features: x,
            }
        })
        .collect()
}

#[test]
fn recovers_the_weights_of_noiseless_pairs() {
    let truth = [0.5, 2.0, 0.0, 1.0];
    let obs = pairs(&mut Rng(7), 60, &truth, 0.0);
    let m = fit(&names(4), &obs).unwrap();
    for (w, t) in m.weights.iter().zip(truth) {
        assert!((w - t).abs() < 0.05, "{:?} vs {truth:?}", m.weights);
    }
    assert!(m.residual_sd.unwrap() < 0.01, "{m:?}");
    let p = m
        .predict(&features(&[1.5, 1.0, 1.0, 1.2], &[1.4, 1.0, 1.0, 1.5]))
        .unwrap();
    // 1 + 0.5 * 0.5 * 0.4 + 1.0 * 0.2 * 0.5 = 1.2
    assert!((p.value - 1.2).abs() < 0.01, "{p:?}");
}

#[test]
fn the_prediction_interval_covers_about_95_percent_of_new_pairs() {
    let truth = [0.8, 1.5, 0.3];
    let mut rng = Rng(11);
    let m = fit(&names(3), &pairs(&mut rng, 200, &truth, 0.03)).unwrap();
    let fresh = pairs(&mut rng, 400, &truth, 0.03);
    let inside = fresh
        .iter()
        .filter(|o| {
            let p = m.predict(&o.features).unwrap();
            p.low.unwrap() <= o.slowdown && o.slowdown <= p.high.unwrap()
        })
        .count();
    assert!(
        (360..=396).contains(&inside),
        "{inside} of 400 inside; {m:?}"
    );
    // The interval's width reflects the noise: about 2 x 1.96 x 0.03.
    let p = m.predict(&fresh[0].features).unwrap();
    let width = p.high.unwrap() - p.low.unwrap();
    assert!(width > 0.08 && width < 0.2, "{p:?}");
}

#[test]
fn fewer_pairs_than_rulers_fall_back_to_the_common_weight() {
    // Two pairs, four rulers: only the first ruler's feature is ever non-zero.
    let obs = vec![
        Observation {
            features: vec![0.2, 0.0, 0.0, 0.0],
            slowdown: 1.2,
        },
        Observation {
            features: vec![0.1, 0.0, 0.0, 0.0],
            slowdown: 1.1,
        },
    ];
    let m = fit(&names(4), &obs).unwrap();
    assert!((m.common_weight - 1.0).abs() < 1e-9, "{m:?}");
    // The uninformed rulers keep the common weight.
    for w in &m.weights {
        assert!((w - 1.0).abs() < 1e-6, "{:?}", m.weights);
    }
    // A perfect fit on one effective weight leaves one degree of freedom.
    assert!(
        m.df.unwrap() >= 1.0 && m.residual_sd.unwrap() < 1e-6,
        "{m:?}"
    );
    assert!((m.mean_slowdown - 1.15).abs() < 1e-12);
}

#[test]
fn a_pair_sharing_nothing_is_predicted_at_one() {
    let obs = pairs(&mut Rng(3), 20, &[1.0, 1.0], 0.01);
    let m = fit(&names(2), &obs).unwrap();
    let p = m.predict(&features(&[1.0, 1.3], &[1.4, 1.0])).unwrap();
    assert_eq!(p.value, 1.0);
}

#[test]
fn two_pairs_are_the_least_and_bad_input_is_named() {
    let one = vec![Observation {
        features: vec![0.1],
        slowdown: 1.05,
    }];
    let two = vec![
        one[0].clone(),
        Observation {
            features: vec![0.2],
            slowdown: 1.12,
        },
    ];
    let m = fit(&names(1), &two).unwrap();
    let p = m.predict(&[0.15]).unwrap();
    assert!(p.value > 1.05 && p.value < 1.12, "{m:?}");
    assert_eq!(fit(&names(1), &one), Err(FitError::TooFew { got: 1 }));
    assert_eq!(
        FitError::TooFew { got: 1 }.to_string(),
        "1 measured pair to fit the model on; it needs at least 2"
    );
    assert_eq!(fit(&names(1), &[]), Err(FitError::NoPairs));
    assert_eq!(
        fit(&names(2), &two),
        Err(FitError::Width { got: 1, want: 2 })
    );
    let nan = vec![
        Observation {
            features: vec![f64::NAN],
            slowdown: 1.0,
        };
        2
    ];
    assert_eq!(fit(&names(1), &nan), Err(FitError::NotFinite));
}

/// Pairs at noise level: features of a few thousandths, slowdowns scattered about 1
/// (a stretch where the measured slowdowns happen to rise with the features).
fn noise_level() -> Vec<Observation> {
    [(0.001, 1.02), (0.002, 1.03), (-0.001, 0.99), (0.0015, 1.01)]
        .iter()
        .map(|&(x, y)| Observation {
            features: vec![x, 0.5 * x],
            slowdown: y,
        })
        .collect()
}

#[test]
fn a_pair_far_beyond_the_training_pairs_gets_no_figure() {
    let m = fit(&names(2), &noise_level()).unwrap();
    // The fit on noise makes a steep weight; a pair pressing 100 times harder than any
    // training pair would be predicted at several times slower from it.
    assert!(m.weights.iter().any(|w| *w > 5.0), "{m:?}");
    match m.predict(&[0.18, 0.09]) {
        Err(NoFigure::Beyond { reach: Some(r) }) => assert!(r > 1000.0, "{r}"),
        other => panic!("{other:?}"),
    }
    // Within the training pairs' reach it predicts.
    assert!(m.predict(&[0.0015, 0.0008]).is_ok(), "{m:?}");
    // Training pairs that press nothing reach nowhere.
    let zero: Vec<Observation> = (0..3)
        .map(|i| Observation {
            features: vec![0.0, 0.0],
            slowdown: 1.0 + 0.01 * f64::from(i),
        })
        .collect();
    let m = fit(&names(2), &zero).unwrap();
    assert_eq!(m.predict(&[0.0, 0.0]).unwrap().value, 1.0);
    assert_eq!(
        m.predict(&[0.1, 0.0]),
        Err(NoFigure::Beyond { reach: None })
    );
}

#[test]
fn weights_are_never_negative() {
    // Slowdowns that fall as the first ruler's feature grows: noise, or a neighbour
    // that keeps the clock up; it never makes the resource a remedy.
    let obs: Vec<Observation> = (1..=6)
        .map(|i| {
            let x = 0.05 * f64::from(i);
            Observation {
                features: vec![x, 0.1 * f64::from(i % 3)],
                slowdown: 1.0 - 0.5 * x + 0.8 * 0.1 * f64::from(i % 3),
            }
        })
        .collect();
    let m = fit(&names(2), &obs).unwrap();
    assert_eq!(m.weights[0], 0.0, "{m:?}");
    assert!(m.weights[1] > 0.1, "{m:?}");
    assert!(m.common_weight >= 0.0, "{m:?}");
    // All the features pointing to a speed-up: the common weight is 0, the model 1.
    let falling: Vec<Observation> = (1..=4)
        .map(|i| Observation {
            features: vec![0.1 * f64::from(i), 0.0],
            slowdown: 1.0 - 0.05 * f64::from(i),
        })
        .collect();
    let m = fit(&names(2), &falling).unwrap();
    assert_eq!((m.common_weight, m.weights.clone()), (0.0, vec![0.0, 0.0]));
}

#[test]
fn a_sum_at_or_below_zero_is_no_figure() {
    let obs = pairs(&mut Rng(9), 30, &[2.0], 0.01);
    let m = fit(&names(1), &obs).unwrap();
    // A feature of -0.6 (a workload 60% faster beside the ruler, the ruler
    // faster beside its partner) would put the sum near -0.2.
    let m = Model {
        max_leverage: f64::INFINITY,
        ..m
    };
    assert!(matches!(
        m.predict(&[-0.6]),
        Err(NoFigure::NotPositive { value }) if value <= 0.0
    ));
}

#[test]
fn inversion_solves_and_refuses_a_singular_matrix() {
    let m = vec![vec![4.0, 7.0], vec![2.0, 6.0]];
    let inv = invert(&m).unwrap();
    let expect = [[0.6, -0.7], [-0.2, 0.4]];
    for i in 0..2 {
        for j in 0..2 {
            assert!((inv[i][j] - expect[i][j]).abs() < 1e-12, "{inv:?}");
        }
    }
    assert!(invert(&[vec![1.0, 2.0], vec![2.0, 4.0]]).is_none());
}

#[test]
fn the_combined_speed_takes_both_directions() {
    let ab = Prediction {
        value: 2.0,
        low: Some(1.5),
        high: Some(2.5),
    };
    let ba = Prediction {
        value: 1.0,
        low: Some(0.8),
        high: Some(1.25),
    };
    let c = combined(&ab, &ba);
    assert!((c.value - 1.5).abs() < 1e-12);
    assert!((c.low.unwrap() - (0.4 + 0.8)).abs() < 1e-12);
    assert!((c.high.unwrap() - (1.0 / 1.5 + 1.25)).abs() < 1e-12);
}

/// The mean diagonal of `X'X`: the unit of the ridge penalty.
fn penalty_unit(obs: &[Observation]) -> f64 {
    let r = obs[0].features.len();
    obs.iter()
        .map(|o| o.features.iter().map(|x| x * x).sum::<f64>())
        .sum::<f64>()
        / r as f64
}

#[test]
fn few_noisy_pairs_choose_a_strong_penalty_and_many_clean_ones_a_weak_one() {
    // Every ruler matters alike: the one common weight is the right model, and six
    // noisy pairs cannot tell four weights apart.
    let few = pairs(&mut Rng(5), 6, &[1.0; 4], 0.05);
    let m = fit(&names(4), &few).unwrap();
    assert!(m.ridge_lambda >= penalty_unit(&few), "{m:?}");
    let spread = m
        .weights
        .iter()
        .map(|w| (w - m.common_weight).abs())
        .fold(0.0, f64::max);
    assert!(spread < 0.5, "{m:?}");
    // Many clean pairs of distinct weights: the weakest penalty.
    let many = pairs(&mut Rng(6), 80, &[0.2, 2.0, 1.0, 0.5], 0.001);
    let m = fit(&names(4), &many).unwrap();
    assert!(m.ridge_lambda <= 0.011 * penalty_unit(&many), "{m:?}");
}

#[test]
fn the_most_informative_pairs_are_far_apart_and_point_different_ways() {
    let pair = |x: [f64; 2]| vec![x.to_vec()];
    let candidates = vec![
        pair([0.001, 0.0]),
        pair([0.3, 0.0]),  // the strongest along the first ruler
        pair([0.25, 0.0]), // nearly the same direction again
        pair([0.0, 0.1]),  // the only one along the second
        pair([0.0, 0.0]),
    ];
    assert_eq!(most_informative(&candidates, 2), [1, 3]);
    // Asking for more than there are gives them all, once each.
    let mut all = most_informative(&candidates, 9);
    all.sort_unstable();
    assert_eq!(all, [0, 1, 2, 3, 4]);
    // Pairs that press nothing tell nothing: the given order.
    let zero = vec![pair([0.0, 0.0]); 4];
    assert_eq!(most_informative(&zero, 3), [0, 1, 2]);
    // A pair's two directions and forms count together.
    let both = vec![vec![vec![0.2, 0.0]], vec![vec![0.2, 0.0], vec![0.0, 0.2]]];
    assert_eq!(most_informative(&both, 1), [1]);
}

#[test]
fn a_model_fitted_on_the_most_informative_pairs_predicts_the_strong_ones() {
    // Many pairs at noise level and a few strong ones: fitted on random pairs the
    // model meets the strong ones beyond its reach; fitted on the chosen ones it
    // predicts them.
    let mut rng = Rng(21);
    let truth = [1.5, 0.5];
    let mut all: Vec<Observation> = (0..30)
        .map(|_| {
            let x: Vec<f64> = (0..2).map(|_| 0.004 * rng.next()).collect();
            Observation {
                slowdown: 1.0 + dot(&truth, &x) + 0.01 * rng.normal(),
                features: x,
            }
        })
        .collect();
    for x in [[0.3, 0.02], [0.05, 0.4], [0.2, 0.2]] {
        all.push(Observation {
            slowdown: 1.0 + dot(&truth, &x) + 0.01 * rng.normal(),
            features: x.to_vec(),
        });
    }
    let candidates: Vec<Vec<Vec<f64>>> = all.iter().map(|o| vec![o.features.clone()]).collect();
    let chosen = most_informative(&candidates, 5);
    let train: Vec<Observation> = chosen.iter().map(|&i| all[i].clone()).collect();
    let m = fit(&names(2), &train).unwrap();
    let strong = m.predict(&[0.25, 0.3]).unwrap();
    assert!(
        (strong.value - (1.0 + 0.375 + 0.15)).abs() < 0.1,
        "{strong:?} {m:?}"
    );
    // The first five at noise level reach nowhere near it.
    let noise = fit(&names(2), &all[..5]).unwrap();
    assert!(noise.predict(&[0.25, 0.3]).is_err(), "{noise:?}");
}
