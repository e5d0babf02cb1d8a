//! `smtlab predict --validate K`: the model held against pairs measured but kept out of
//! its fit, beside two naive baselines: no interference (every slowdown 1) and the mean
//! slowdown of the held-out pairs themselves. That mean is the best one constant can do
//! and is known only once they are measured, so it is a strict baseline; the training
//! pairs' mean would not be a fair one, since they are chosen for the pressure they put
//! on the rulers ([`super::training_choice`]).
//!
//! Each held-out pair gives A's slowdown beside B and, from the partner's side, B's
//! beside A. The scores are the mean absolute error in points (100 x the slowdown's
//! difference) and the share of pairs whose direction is right: slower (beyond
//! [`DIRECTION_THRESHOLD`]) or not. The share is also given over the pairs whose
//! measured slowdown differs from 1 by at least the threshold, the ones that matter.

use serde::{Deserialize, Serialize};
use smtlab_model::keys::Form;

use super::model::{NoFigure, Prediction};
use super::{FormModel, PairMeasure, Profile, ordered, pair_features};

/// A slowdown above `1 + DIRECTION_THRESHOLD` is "slower".
pub const DIRECTION_THRESHOLD: f64 = 0.05;

/// One held-out ordered pair: measured and predicted, or why the model gave no figure
/// (then the model is scored as if it had said 1, no interference: it gains nothing by
/// giving none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checked {
    pub a: String,
    pub b: String,
    pub measured: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Prediction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_figure: Option<NoFigure>,
}

impl Checked {
    /// The figure the model is scored on: its prediction, else 1.
    pub fn scored(&self) -> f64 {
        self.predicted.map_or(1.0, |p| p.value)
    }
}

/// How well one predictor did.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Score {
    pub pairs: usize,
    /// Mean absolute error, in points of slowdown (0.03 is 3 points).
    pub mae_points: f64,
    /// Share of pairs whose direction (slower or not) is right, 0 to 1.
    pub direction_right: f64,
    /// Pairs whose measured slowdown differs from 1 by the threshold or more, and the
    /// share of them whose direction is right.
    pub differing: usize,
    pub direction_right_differing: Option<f64>,
}

/// The validation of one form's model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    pub form: Form,
    pub checked: Vec<Checked>,
    pub model: Score,
    pub no_interference: Score,
    pub mean_slowdown: Score,
    /// The slowdown the mean baseline predicts for every pair: the held-out pairs' mean.
    pub baseline_mean: f64,
}

fn slower(s: f64) -> bool {
    s > 1.0 + DIRECTION_THRESHOLD
}

/// The score of `(predicted, measured)` pairs; `None` without pairs.
pub fn score(pairs: &[(f64, f64)]) -> Option<Score> {
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let mae = pairs.iter().map(|(p, m)| (p - m).abs()).sum::<f64>() / n;
    let right = |(p, m): &(f64, f64)| slower(*p) == slower(*m);
    let differing: Vec<(f64, f64)> = pairs
        .iter()
        .copied()
        .filter(|(_, m)| (m - 1.0).abs() >= DIRECTION_THRESHOLD)
        .collect();
    let right_differing = differing.iter().filter(|x| right(x)).count() as f64;
    Some(Score {
        pairs: pairs.len(),
        mae_points: 100.0 * mae,
        direction_right: pairs.iter().filter(|x| right(x)).count() as f64 / n,
        differing: differing.len(),
        direction_right_differing: (!differing.is_empty())
            .then(|| right_differing / differing.len() as f64),
    })
}

/// The model of one form held against the held-out pairs of that form; `None` without a
/// model or without a held-out pair that could be predicted.
pub fn validate(
    model: &FormModel,
    profiles: &[Profile],
    held_out: &[PairMeasure],
) -> Option<Validation> {
    let m = model.model.as_ref()?;
    let checked: Vec<Checked> = ordered(held_out, model.form)
        .into_iter()
        .filter_map(|(a, b, measured)| {
            let (x, _) = pair_features(profiles, &a, &b, model.form)?;
            let predicted = m.predict(&x);
            Some(Checked {
                no_figure: predicted.err(),
                predicted: predicted.ok(),
                a,
                b,
                measured,
            })
        })
        .collect();
    let with = |f: &dyn Fn(&Checked) -> f64| -> Vec<(f64, f64)> {
        checked.iter().map(|c| (f(c), c.measured)).collect()
    };
    let mean = checked.iter().map(|c| c.measured).sum::<f64>() / checked.len().max(1) as f64;
    Some(Validation {
        form: model.form,
        model: score(&with(&Checked::scored))?,
        no_interference: score(&with(&|_| 1.0))?,
        mean_slowdown: score(&with(&|_| mean))?,
        baseline_mean: mean,
        checked,
    })
}
