//! The interference model of `smtlab predict`: workload A's slowdown beside B from A's
//! sensitivities and B's contentiousness, one weight per ruler, fitted per machine on
//! measured pairs.
//!
//! For a pair (A beside B) and ruler `r` the feature is
//! `x_r = (sens_A[r] - 1) * (cont_B[r] - 1)`: A's extra slowdown beside the ruler times
//! the ruler's extra slowdown beside B. It is zero when either side leaves the ruler's
//! resource alone, so a pair that shares nothing is predicted at 1. The model is
//!
//! ```text
//! slowdown(A beside B) = 1 + sum_r w_r * x_r
//! ```
//!
//! fitted by least squares on the measured pairs. With few pairs the weights are not all
//! determined, or only noisily, so the fit is a ridge regression pulled towards one
//! common weight `w0` (the least-squares weight of `sum_r x_r`): `w` minimises
//! `|y - X w|^2 + lambda |w - w0|^2`, a direction no pair informs keeping `w0`.
//! `lambda` is the share of the mean diagonal of `X'X` among [`RIDGE_SHARES`] whose
//! leave-one-out error (`sum (e_i / (1 - h_i))^2`, `w0` held fixed) is smallest: few
//! or noisy pairs get a model close to the one common weight, many clean pairs one
//! weight per ruler.
//!
//! The prediction interval comes from the residuals: `s^2 = RSS / df` with
//! `df = pairs - trace(H)` (the hat matrix's trace, the effective number of weights),
//! and a point's half-width `t(df) * s * sqrt(1 + x' (X'X + lambda I)^-1 x)`. With no
//! degree of freedom left there is no interval, and the prediction says so.

use serde::{Deserialize, Serialize};
use smtlab_model::stats;

/// Ridge penalties tried, as shares of the mean diagonal of `X'X`: from 1% (weights
/// the pairs determine move by about 1%) to 100 times it (all weights near the common
/// one). The fit keeps the one with the smallest leave-one-out error.
pub const RIDGE_SHARES: [f64; 5] = [0.01, 0.1, 1.0, 10.0, 100.0];
/// Smallest penalty, for training pairs whose features are all zero.
const RIDGE_FLOOR: f64 = 1e-12;

/// One measured pair for the fit: its features (one per ruler) and its slowdown.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub features: Vec<f64>,
    pub slowdown: f64,
}

/// Why a model could not be fitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    #[error("no measured pair to fit the model on")]
    NoPairs,
    #[error("a training pair has {got} features, expected one per ruler ({want})")]
    Width { got: usize, want: usize },
    #[error("a training pair's slowdown or features are not finite numbers")]
    NotFinite,
    #[error("the model's equations have no unique solution")]
    Singular,
}

/// A fitted model: one weight per ruler and what its intervals need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub rulers: Vec<String>,
    pub weights: Vec<f64>,
    /// The common weight the ridge pulls towards.
    pub common_weight: f64,
    pub ridge_lambda: f64,
    pub training_pairs: usize,
    /// Mean measured slowdown of the training pairs: the naive "mean slowdown" baseline.
    pub mean_slowdown: f64,
    /// Residual standard deviation and its degrees of freedom; `None` with none left.
    pub residual_sd: Option<f64>,
    pub df: Option<f64>,
    /// `(X'X + lambda I)^-1`, for the leverage of a new point.
    pub inverse_gram: Vec<Vec<f64>>,
}

/// A predicted slowdown with its 95% prediction interval (`None`: no degree of freedom).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The predicted figure: a slowdown, or a combined speed from [`combined`].
    pub value: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn mat_vec(m: &[Vec<f64>], v: &[f64]) -> Vec<f64> {
    m.iter().map(|row| dot(row, v)).collect()
}

/// The inverse of a small square matrix by Gauss-Jordan elimination with partial
/// pivoting; `None` when it is singular.
pub fn invert(m: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = m.len();
    let mut a: Vec<Vec<f64>> = m
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let mut r = row.clone();
            r.extend((0..n).map(|j| f64::from(u8::from(i == j))));
            r
        })
        .collect();
    for col in 0..n {
        let pivot = (col..n).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        let p = a[col][col];
        a[col].iter_mut().for_each(|x| *x /= p);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            let f = row[col];
            if r != col && f != 0.0 {
                row.iter_mut()
                    .zip(&pivot_row)
                    .for_each(|(x, p)| *x -= f * p);
            }
        }
    }
    Some(a.into_iter().map(|row| row[n..].to_vec()).collect())
}

fn check(rulers: usize, obs: &[Observation]) -> Result<(), FitError> {
    if obs.is_empty() {
        return Err(FitError::NoPairs);
    }
    if let Some(o) = obs.iter().find(|o| o.features.len() != rulers) {
        return Err(FitError::Width {
            got: o.features.len(),
            want: rulers,
        });
    }
    let finite =
        |o: &Observation| o.slowdown.is_finite() && o.features.iter().all(|x| x.is_finite());
    if !obs.iter().all(finite) {
        return Err(FitError::NotFinite);
    }
    Ok(())
}

/// The least-squares weight of the sum of the features: the ridge's target.
fn common_weight(obs: &[Observation]) -> f64 {
    let (sxy, sxx) = obs.iter().fold((0.0, 0.0), |(sxy, sxx), o| {
        let s: f64 = o.features.iter().sum();
        (sxy + s * (o.slowdown - 1.0), sxx + s * s)
    });
    if sxx > 0.0 { sxy / sxx } else { 0.0 }
}

/// `X'X` and `X'y` of the pairs (y: the slowdown less 1).
fn normal_equations(r: usize, obs: &[Observation]) -> (Vec<Vec<f64>>, Vec<f64>) {
    let mut gram = vec![vec![0.0; r]; r];
    let mut rhs = vec![0.0; r];
    for o in obs {
        for ((row, b), xi) in gram.iter_mut().zip(&mut rhs).zip(&o.features) {
            *b += xi * (o.slowdown - 1.0);
            row.iter_mut()
                .zip(&o.features)
                .for_each(|(g, xj)| *g += xi * xj);
        }
    }
    (gram, rhs)
}

/// One ridge fit: the weights, `(X'X + lambda I)^-1`, each pair's residual and leverage.
struct Ridge {
    weights: Vec<f64>,
    inverse: Vec<Vec<f64>>,
    residuals: Vec<f64>,
    leverages: Vec<f64>,
}

fn ridge(
    gram: &[Vec<f64>],
    rhs: &[f64],
    lambda: f64,
    w0: f64,
    obs: &[Observation],
) -> Option<Ridge> {
    let mut a = gram.to_vec();
    let mut b = rhs.to_vec();
    for (i, (row, bi)) in a.iter_mut().zip(&mut b).enumerate() {
        row[i] += lambda;
        *bi += lambda * w0;
    }
    let inverse = invert(&a)?;
    let weights = mat_vec(&inverse, &b);
    let residuals = obs
        .iter()
        .map(|o| o.slowdown - 1.0 - dot(&weights, &o.features))
        .collect();
    let leverages = obs
        .iter()
        .map(|o| dot(&o.features, &mat_vec(&inverse, &o.features)))
        .collect();
    Some(Ridge {
        weights,
        inverse,
        residuals,
        leverages,
    })
}

impl Ridge {
    /// The leave-one-out prediction error sum of squares, `sum (e_i / (1 - h_i))^2`
    /// (the common weight held fixed); infinite where a pair decides its own fit.
    fn press(&self) -> f64 {
        self.residuals
            .iter()
            .zip(&self.leverages)
            .map(|(e, h)| {
                if *h < 1.0 - 1e-9 {
                    (e / (1.0 - h)).powi(2)
                } else {
                    f64::INFINITY
                }
            })
            .sum()
    }
}

/// Fits the model on measured pairs, one feature per ruler of `rulers`, with the ridge
/// penalty of [`RIDGE_SHARES`] that predicts left-out pairs best.
pub fn fit(rulers: &[String], obs: &[Observation]) -> Result<Model, FitError> {
    let r = rulers.len();
    check(r, obs)?;
    let w0 = common_weight(obs);
    let (gram, rhs) = normal_equations(r, obs);
    let scale = (0..r).map(|i| gram[i][i]).sum::<f64>() / r.max(1) as f64;
    let fits: Vec<(f64, Ridge)> = RIDGE_SHARES
        .iter()
        .filter_map(|share| {
            let lambda = (share * scale).max(RIDGE_FLOOR);
            Some((lambda, ridge(&gram, &rhs, lambda, w0, obs)?))
        })
        .collect();
    // The smallest leave-one-out error; where none is finite, the strongest penalty.
    let best = fits
        .iter()
        .filter(|(_, f)| f.press().is_finite())
        .min_by(|x, y| x.1.press().total_cmp(&y.1.press()))
        .or(fits.last());
    let (lambda, fitted) = best.ok_or(FitError::Singular)?;
    let rss: f64 = fitted.residuals.iter().map(|e| e * e).sum();
    let df = obs.len() as f64 - fitted.leverages.iter().sum::<f64>();
    let (residual_sd, df) = if df >= 1.0 {
        (Some((rss / df).sqrt()), Some(df))
    } else {
        (None, None)
    };
    Ok(Model {
        rulers: rulers.to_vec(),
        weights: fitted.weights.clone(),
        common_weight: w0,
        ridge_lambda: *lambda,
        training_pairs: obs.len(),
        mean_slowdown: obs.iter().map(|o| o.slowdown).sum::<f64>() / obs.len() as f64,
        residual_sd,
        df,
        inverse_gram: fitted.inverse.clone(),
    })
}

impl Model {
    /// The predicted slowdown of a pair with these features (one per ruler), with its
    /// 95% prediction interval.
    pub fn predict(&self, features: &[f64]) -> Prediction {
        let slowdown = 1.0 + dot(&self.weights, features);
        let half = match (self.residual_sd, self.df) {
            (Some(s), Some(df)) => {
                let leverage = dot(features, &mat_vec(&self.inverse_gram, features));
                stats::t_critical_95(df).map(|t| t * s * (1.0 + leverage.max(0.0)).sqrt())
            }
            _ => None,
        };
        Prediction {
            value: slowdown,
            // A slowdown is positive, whatever the linear interval says.
            low: half.map(|h| (slowdown - h).max(0.0)),
            high: half.map(|h| slowdown + h),
        }
    }
}

/// The feature of each ruler for A beside B: `(sens_A - 1) * (cont_B - 1)`.
pub fn features(sensitivity: &[f64], contentiousness: &[f64]) -> Vec<f64> {
    sensitivity
        .iter()
        .zip(contentiousness)
        .map(|(s, c)| (s - 1.0) * (c - 1.0))
        .collect()
}

/// The pair's combined speed, `1/slowdown(A|B) + 1/slowdown(B|A)` (as `corun` prints
/// it), with bounds from the two intervals: the low bound from both high slowdowns.
pub fn combined(ab: &Prediction, ba: &Prediction) -> Prediction {
    let inv = |x: f64| if x > 0.0 { Some(1.0 / x) } else { None };
    let both = |x: Option<f64>, y: Option<f64>| Some(inv(x?)? + inv(y?)?);
    Prediction {
        value: inv(ab.value).unwrap_or(f64::NAN) + inv(ba.value).unwrap_or(f64::NAN),
        low: both(ab.high, ba.high),
        high: both(ab.low, ba.low),
    }
}

#[cfg(test)]
mod tests;
