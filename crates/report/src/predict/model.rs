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
//! The weights are never negative: a resource both sides press more can only add
//! slowdown, so a negative weight is noise fitted, not a finding. The common weight is
//! held at 0 or above, and a ruler whose fitted weight comes out below 0 is fixed at 0
//! and the rest fitted again (an active set, at most one pass per ruler).
//!
//! The prediction interval comes from the residuals: `s^2 = RSS / df` with
//! `df = pairs - trace(H)` (the hat matrix's trace, the effective number of weights),
//! and a point's half-width `t(df) * s * sqrt(1 + x' (X'X + lambda I)^-1 x)`. With no
//! degree of freedom left there is no interval, and the prediction says so.
//!
//! A model gives no figure where it knows nothing: for a pair whose leverage
//! `x' (X'X + lambda I)^-1 x` is more than [`REACH`] times the largest of the training
//! pairs' (its features reach about twice as far as any training pair's, in the
//! direction the fit knows least: an extrapolation), and where the linear sum falls to
//! 0 or below (a slowdown is positive). It needs [`MIN_PAIRS`] measured pairs.

use serde::{Deserialize, Serialize};
use smtlab_model::stats;

/// Ridge penalties tried, as shares of the mean diagonal of `X'X`: from 1% (weights
/// the pairs determine move by about 1%) to 100 times it (all weights near the common
/// one). The fit keeps the one with the smallest leave-one-out error.
pub const RIDGE_SHARES: [f64; 5] = [0.01, 0.1, 1.0, 10.0, 100.0];
/// Smallest penalty, for training pairs whose features are all zero.
const RIDGE_FLOOR: f64 = 1e-12;
/// Measured (ordered) pairs a model needs: one pair leaves nothing to tell its weight
/// from its noise.
pub const MIN_PAIRS: usize = 2;
/// How far past the training pairs a prediction may reach, as a multiple of their
/// largest leverage (leverage grows with the square of the distance: 4 is twice as far).
pub const REACH: f64 = 4.0;

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
    #[error("{got} measured pair to fit the model on; it needs at least {MIN_PAIRS}")]
    TooFew { got: usize },
    #[error("a training pair has {got} features, expected one per ruler ({want})")]
    Width { got: usize, want: usize },
    #[error("a training pair's slowdown or features are not finite numbers")]
    NotFinite,
    #[error("the model's equations have no unique solution")]
    Singular,
}

fn beyond_words(reach: Option<f64>) -> String {
    match reach {
        Some(r) => format!("beyond the training pairs (leverage {r:.1}x theirs): an extrapolation"),
        None => "beyond the training pairs (theirs press nothing this pair presses)".into(),
    }
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
    /// Mean measured slowdown of the training pairs.
    pub mean_slowdown: f64,
    /// Residual standard deviation and its degrees of freedom; `None` with none left.
    pub residual_sd: Option<f64>,
    pub df: Option<f64>,
    /// `(X'X + lambda I)^-1` over every ruler, for the leverage of a new point.
    pub inverse_gram: Vec<Vec<f64>>,
    /// The largest leverage among the training pairs: how far the fit reaches.
    #[serde(default)]
    pub max_leverage: f64,
}

/// Why a model gives no figure for a pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum NoFigure {
    /// The pair lies beyond the training pairs: `reach` is its leverage over the
    /// largest training pair's (none where theirs is 0: they share nothing).
    #[error("{}", beyond_words(*reach))]
    Beyond { reach: Option<f64> },
    /// The linear sum is at or below 0.
    #[error("the model's sum falls to {value:.3}, and a slowdown is positive")]
    NotPositive { value: f64 },
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
    if obs.len() < MIN_PAIRS {
        return Err(FitError::TooFew { got: obs.len() });
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

/// The least-squares weight of the sum of the features, 0 or above: the ridge's target.
fn common_weight(obs: &[Observation]) -> f64 {
    let (sxy, sxx) = obs.iter().fold((0.0, 0.0), |(sxy, sxx), o| {
        let s: f64 = o.features.iter().sum();
        (sxy + s * (o.slowdown - 1.0), sxx + s * s)
    });
    if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 }
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

/// One ridge fit with the weights of `fixed` rulers held at 0: the rest solve
/// `(X'X + lambda I) w = X'y + lambda w0` over the free rulers alone.
fn ridge(
    gram: &[Vec<f64>],
    rhs: &[f64],
    lambda: f64,
    w0: f64,
    obs: &[Observation],
    fixed: &[bool],
) -> Option<Ridge> {
    let free: Vec<usize> = (0..rhs.len()).filter(|&i| !fixed[i]).collect();
    let a: Vec<Vec<f64>> = free
        .iter()
        .map(|&i| {
            let diagonal = |j: usize| if i == j { lambda } else { 0.0 };
            free.iter().map(|&j| gram[i][j] + diagonal(j)).collect()
        })
        .collect();
    let b: Vec<f64> = free.iter().map(|&i| rhs[i] + lambda * w0).collect();
    let reduced = invert(&a)?;
    let mut inverse = vec![vec![0.0; rhs.len()]; rhs.len()];
    for (row, &i) in reduced.iter().zip(&free) {
        for (v, &j) in row.iter().zip(&free) {
            inverse[i][j] = *v;
        }
    }
    let mut weights = vec![0.0; rhs.len()];
    for (w, &i) in mat_vec(&reduced, &b).into_iter().zip(&free) {
        weights[i] = w;
    }
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

/// [`ridge`] with no weight below 0: the most negative weight is held at 0 and the rest
/// fitted again, until none is negative.
fn nonnegative_ridge(
    gram: &[Vec<f64>],
    rhs: &[f64],
    lambda: f64,
    w0: f64,
    obs: &[Observation],
) -> Option<Ridge> {
    let mut fixed = vec![false; rhs.len()];
    loop {
        let fit = ridge(gram, rhs, lambda, w0, obs, &fixed)?;
        let most_negative = (0..rhs.len())
            .filter(|&i| fit.weights[i] < 0.0)
            .min_by(|&x, &y| fit.weights[x].total_cmp(&fit.weights[y]));
        match most_negative {
            Some(i) => fixed[i] = true,
            None => return Some(fit),
        }
    }
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
            Some((lambda, nonnegative_ridge(&gram, &rhs, lambda, w0, obs)?))
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
    // The leverage of new points is taken over every ruler, those held at 0 included:
    // where the training pairs reach is a matter of their features, not of the weights.
    let every = ridge(&gram, &rhs, *lambda, w0, obs, &vec![false; r]).ok_or(FitError::Singular)?;
    Ok(Model {
        rulers: rulers.to_vec(),
        weights: fitted.weights.clone(),
        common_weight: w0,
        ridge_lambda: *lambda,
        training_pairs: obs.len(),
        mean_slowdown: obs.iter().map(|o| o.slowdown).sum::<f64>() / obs.len() as f64,
        residual_sd,
        df,
        inverse_gram: every.inverse,
        max_leverage: every.leverages.iter().copied().fold(0.0, f64::max),
    })
}

impl Model {
    /// The predicted slowdown of a pair with these features (one per ruler), with its
    /// 95% prediction interval, or why the model gives none.
    pub fn predict(&self, features: &[f64]) -> Result<Prediction, NoFigure> {
        let slowdown = 1.0 + dot(&self.weights, features);
        let leverage = dot(features, &mat_vec(&self.inverse_gram, features)).max(0.0);
        if leverage > REACH * self.max_leverage {
            let reach = (self.max_leverage > 0.0).then(|| leverage / self.max_leverage);
            return Err(NoFigure::Beyond { reach });
        }
        if slowdown <= 0.0 {
            return Err(NoFigure::NotPositive { value: slowdown });
        }
        let half = match (self.residual_sd, self.df) {
            (Some(s), Some(df)) => {
                stats::t_critical_95(df).map(|t| t * s * (1.0 + leverage).sqrt())
            }
            _ => None,
        };
        Ok(Prediction {
            value: slowdown,
            // A slowdown is positive, whatever the linear interval says.
            low: half.map(|h| (slowdown - h).max(0.0)),
            high: half.map(|h| slowdown + h),
        })
    }
}

/// `n` of `candidates` (each the feature vectors its measured pair would add) that
/// inform the model most, greedily: each step the candidate whose vectors raise
/// `log det(X'X + delta I)` most (a D-optimal design: pairs far apart and in
/// different directions, so that the fit interpolates rather than extrapolates).
/// `delta` is a thousandth of the candidates' mean squared feature. Ties, and
/// candidates that add nothing, keep the given order.
pub fn most_informative(candidates: &[Vec<Vec<f64>>], n: usize) -> Vec<usize> {
    let vectors = candidates.iter().flatten();
    let r = vectors.clone().map(Vec::len).max().unwrap_or(0);
    let count = vectors.clone().count().max(1) as f64;
    let mean_square = vectors.map(|v| dot(v, v)).sum::<f64>() / (count * r.max(1) as f64);
    let delta = 1e-3 * mean_square;
    let mut inverse: Vec<Vec<f64>> = (0..r)
        .map(|i| {
            (0..r)
                .map(|j| if i == j { 1.0 / delta } else { 0.0 })
                .collect()
        })
        .collect();
    let mut chosen = Vec::new();
    while chosen.len() < n.min(candidates.len()) {
        let gain = |i: usize| -> f64 {
            let mut inv = inverse.clone();
            candidates[i].iter().map(|v| add_point(&mut inv, v)).sum()
        };
        let best = (0..candidates.len())
            .filter(|i| !chosen.contains(i))
            .map(|i| (i, if delta > 0.0 { gain(i) } else { 0.0 }))
            .fold(None, |best: Option<(usize, f64)>, (i, g)| match best {
                Some((_, bg)) if bg >= g => best,
                _ => Some((i, g)),
            });
        let Some((i, _)) = best else { break };
        if delta > 0.0 {
            candidates[i].iter().for_each(|v| {
                add_point(&mut inverse, v);
            });
        }
        chosen.push(i);
    }
    chosen
}

/// Adds `v v'` to the matrix whose inverse is `inv` (Sherman-Morrison), returning the
/// log of the determinant's growth, `ln(1 + v' inv v)`.
fn add_point(inv: &mut [Vec<f64>], v: &[f64]) -> f64 {
    let u = mat_vec(inv, v);
    let denominator = 1.0 + dot(v, &u);
    for (row, ui) in inv.iter_mut().zip(&u) {
        row.iter_mut()
            .zip(&u)
            .for_each(|(x, uj)| *x -= ui * uj / denominator);
    }
    denominator.ln()
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
