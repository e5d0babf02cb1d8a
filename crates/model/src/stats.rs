//! Descriptive statistics for samples, and the ratio of two cells (SMT yield).
//!
//! Every function takes a plain slice and never panics: empty input gives `None`, and
//! statistics that need two samples (standard deviation, confidence intervals) give
//! `None` for one. Sorting uses `f64::total_cmp`, so even NaN input cannot panic (it
//! sorts last and poisons the results, as it should; the runner never produces NaN).
//!
//! Methods, so that numbers can be reproduced elsewhere:
//! * percentiles interpolate linearly between closest ranks: for sorted `x[0..n]` and
//!   `p` in 0..=100, `h = (n - 1) * p / 100`, result `x[⌊h⌋] + (h - ⌊h⌋) * (x[⌊h⌋+1] - x[⌊h⌋])`.
//!   This is Hyndman and Fan's type 7, the default of R, NumPy and Excel's
//!   `PERCENTILE.INC`; the median is the 50th percentile.
//! * standard deviation is the sample one (divides by `n - 1`).
//! * the 95% confidence interval of the mean is `t(0.975, n-1) * s / sqrt(n)` with the
//!   Student-t quantile from `statrs`.
//! * the drift of a series ([`drift_rel`]) is `|median(second half) - median(first
//!   half)| / median(all)`, the halves split in sample order (the middle sample of an
//!   odd count belongs to neither).
//! * the ratio of two means uses Fieller's theorem for independent samples, with the
//!   degrees of freedom from Welch-Satterthwaite; see [`ratio`].
//! * the speed-up of one cell over another ([`speedup`]) is that ratio turned by the
//!   benchmark's direction, so that above 1 always means the second is better; every
//!   figure that compares two cells (bench's "vs first", exec's verdict, the report's
//!   yields, compare) is this one, and [`Ratio::significance`] reads its interval.
//!   For a lower-is-better time of a fixed amount of work, the ratio of mean times is
//!   the ratio of the throughputs over all samples (work done / time taken); per-sample
//!   rates `1/t` are never averaged, since their mean is pulled up by the fastest
//!   samples and can disagree in sign with the mean time when one sample is an outlier.
//! * the p-value of a speed-up ([`welch_p_value`]) is Welch's two-sided t-test of equal
//!   means, the test whose acceptance region is Fieller's interval at ratio 1; many of
//!   them at once are corrected with Benjamini and Hochberg's method
//!   ([`benjamini_hochberg`], what `compare` uses).
//! * the geometric mean of several ratios with an interval ([`geomean_ci_with`]) is the
//!   exponential of the mean of their logarithms and of its Student-t 95% interval:
//!   the ratios are treated as a sample of workloads, a workload's ratios on several
//!   placements as one draw (a cluster-robust variance, workloads less one degrees of
//!   freedom).
//! * the 95% interval of a median ([`median_ci95`]) is the distribution-free one from
//!   order statistics: `[x(k), x(n+1-k)]` (1-based, sorted) with the largest `k` whose
//!   binomial tail `P(B <= k-1)`, `B ~ Binomial(n, 1/2)`, is at most 2.5%; it exists
//!   from 6 values on (with 5, `[min, max]` covers only 93.75%).
//! * the median absolute deviation ([`mad`]) is `median(|x - median(x)|)`, unscaled;
//!   times [`MAD_NORMAL_SCALE`] it estimates a normal standard deviation.

use crate::{Direction, Summary};
use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, StudentsT};

/// Arithmetic mean.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Smallest value.
pub fn min(xs: &[f64]) -> Option<f64> {
    xs.iter().copied().min_by(f64::total_cmp)
}

/// Largest value.
pub fn max(xs: &[f64]) -> Option<f64> {
    xs.iter().copied().max_by(f64::total_cmp)
}

/// Median (the 50th percentile, see [`percentile`]).
pub fn median(xs: &[f64]) -> Option<f64> {
    percentile(xs, 50.0)
}

/// The `p`th percentile (`p` in 0..=100, clamped) by linear interpolation between
/// closest ranks (type 7; see the module documentation).
pub fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    percentile_of_sorted(&sorted(xs), p)
}

/// `1 / Φ⁻¹(3/4)`: the median absolute deviation of normal data times this is its
/// standard deviation.
pub const MAD_NORMAL_SCALE: f64 = 1.4826;

/// Median absolute deviation from the median, unscaled (see the module documentation).
pub fn mad(xs: &[f64]) -> Option<f64> {
    let m = median(xs)?;
    let dev: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    median(&dev)
}

/// A median with its distribution-free interval from order statistics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MedianCi {
    pub median: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// The interval's exact coverage, `1 - 2 P(B <= k-1)`: at least 0.95, and above it
    /// for small counts (0.969 with 6 values), since order statistics come in steps.
    pub coverage: f64,
}

/// Fewest values with a 95% order-statistic interval of the median.
pub const MEDIAN_CI_MIN_N: usize = 6;

/// The median with its 95% distribution-free interval (see the module documentation);
/// `None` below [`MEDIAN_CI_MIN_N`] values.
pub fn median_ci95(xs: &[f64]) -> Option<MedianCi> {
    let n = xs.len();
    if n < MEDIAN_CI_MIN_N {
        return None;
    }
    let s = sorted(xs);
    let binom = Binomial::new(0.5, n as u64).ok()?;
    // Largest k (1-based) with P(B <= k-1) <= 0.025; k = 1 holds from n = 6 on.
    let mut k = 1usize;
    while k < n / 2 && binom.cdf(k as u64) <= 0.025 {
        k += 1;
    }
    let tail = binom.cdf(k as u64 - 1);
    Some(MedianCi {
        median: percentile_of_sorted(&s, 50.0)?,
        ci_low: s[k - 1],
        ci_high: s[n - k],
        coverage: 1.0 - 2.0 * tail,
    })
}

/// Sample standard deviation (divisor `n - 1`); needs two values.
pub fn stddev(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    // Two passes: the one-pass formula loses every digit when the spread is tiny
    // compared with the mean, which is the normal case for a converged benchmark.
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

/// The two-sided 95% critical value of Student's t, `t(0.975, df)`; `df` must be
/// positive (it may be fractional, as Welch-Satterthwaite gives).
pub fn t_critical_95(df: f64) -> Option<f64> {
    t_critical(0.95, df)
}

/// The two-sided critical value of Student's t for `confidence` (0.95, 0.99, ...):
/// `t(1 - (1 - confidence) / 2, df)`. `None` for a confidence outside (0, 1) or a
/// non-positive `df`.
pub fn t_critical(confidence: f64, df: f64) -> Option<f64> {
    if !(df.is_finite() && df > 0.0 && confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, df)
        .ok()?
        .inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
    t.is_finite().then_some(t)
}

/// Half-width of the Student-t confidence interval of the mean at `confidence`,
/// relative to the mean (netperf's `-I 99,5` asks for this at 0.99 to be within
/// 0.025). `None` below two values or for a zero mean.
pub fn ci_rel(xs: &[f64], confidence: f64) -> Option<f64> {
    let m = mean(xs)?;
    if m == 0.0 {
        return None;
    }
    let n = xs.len() as f64;
    Some(t_critical(confidence, n - 1.0)? * stddev(xs)? / n.sqrt() / m.abs())
}

/// Half-width of the Student-t 95% confidence interval of the mean; needs two values.
pub fn ci95_half_width(xs: &[f64]) -> Option<f64> {
    let s = stddev(xs)?;
    let n = xs.len() as f64;
    Some(t_critical_95(n - 1.0)? * s / n.sqrt())
}

/// `ci95_half_width / |mean|`, the convergence criterion. When the mean is zero, a
/// non-zero width is "infinitely" wide; that is reported as `f64::MAX` rather than
/// infinity because JSON has no infinity and results must round-trip.
pub fn ci95_rel(xs: &[f64]) -> Option<f64> {
    Some(relative(ci95_half_width(xs)?, mean(xs)?))
}

/// Fewest samples for which [`drift_rel`] says anything: three per half.
pub const DRIFT_MIN_SAMPLES: usize = 6;

/// How far the level of a series moved while it was taken: the difference between the
/// medians of its first and second halves (in order), relative to the median of all.
/// A confidence interval assumes the samples come from one unchanging distribution; a
/// drift well beyond it says the machine changed speed during the measurement (other
/// load, a shared host, frequency changes), and a repetition will likely disagree by
/// about the drift, not by the interval. `None` below [`DRIFT_MIN_SAMPLES`] or for a
/// zero median.
pub fn drift_rel(xs: &[f64]) -> Option<f64> {
    if xs.len() < DRIFT_MIN_SAMPLES {
        return None;
    }
    let half = xs.len() / 2;
    let first = median(&xs[..half])?;
    let second = median(&xs[xs.len() - half..])?;
    let all = median(xs)?;
    (all != 0.0).then(|| ((second - first) / all).abs())
}

/// Geometric mean; every value must be positive (it is the mean of logarithms).
pub fn geomean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || !xs.iter().all(|&x| x.is_finite() && x > 0.0) {
        return None;
    }
    Some((xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp())
}

/// A geometric mean of ratios with its 95% confidence interval ([`geomean_ci_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GeoMeanCi {
    /// `exp(mean(ln r))`.
    pub geomean: f64,
    /// `exp(mean(ln r) -/+ t(0.975, G-1) * se)`, `se` the cluster-robust standard error
    /// over `G` workloads; `None` below two workloads.
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
    /// How many ratios went in.
    pub n: usize,
}

impl GeoMeanCi {
    /// What the interval says about 1, as for a single speed-up: `Faster` when it is
    /// wholly above 1, `Slower` below, `NotSignificant` when it includes 1 (no
    /// difference shown), `NoInterval` for a single ratio.
    pub fn significance(&self) -> Significance {
        match (self.ci95_low, self.ci95_high) {
            (Some(lo), _) if lo > 1.0 => Significance::Faster,
            (_, Some(hi)) if hi < 1.0 => Significance::Slower,
            (Some(_), Some(_)) => Significance::NotSignificant,
            _ => Significance::NoInterval,
        }
    }
}

/// A variance added to an estimate's own, known to `df` degrees of freedom (`None`:
/// taken as known): what runs of one setup differ by beyond their intervals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Extra {
    pub variance: f64,
    pub df: Option<f64>,
}

impl Extra {
    pub const NONE: Extra = Extra {
        variance: 0.0,
        df: None,
    };
}

/// Degrees of freedom above which Student's t is the normal distribution to 4 digits;
/// a variance taken as known has these.
const DF_KNOWN: f64 = 1e6;

/// Welch-Satterthwaite's degrees of freedom of `v + extra.variance`, `v` known to `df`.
/// A part taken as known raises them above `df`, so a few rows' geometric mean can get
/// a smaller t quantile with the part added than without it.
fn satterthwaite(v: f64, df: f64, extra: &Extra) -> f64 {
    let x = extra.variance.max(0.0);
    let extra_df = extra.df.unwrap_or(DF_KNOWN).max(1.0);
    let den = v * v / df.max(1.0) + x * x / extra_df;
    if den <= 0.0 {
        return DF_KNOWN;
    }
    ((v + x).powi(2) / den).min(DF_KNOWN)
}

/// The geometric mean of `ratios` with a Student-t 95% interval on their logarithms:
/// the ratios are a sample of workloads, and the interval says where the typical ratio
/// lies (it includes 1 when the runs are not shown to differ). `None` when empty or
/// when a ratio is not positive and finite.
///
/// Each ratio comes with the workload it measured (its cluster `K`): the ratios of one
/// workload on several placements move together from run to run (an A/A pair of quick
/// suites on a 2-vCPU guest moved dbench by +52% on all four of its placements), so
/// they are one draw, not several. The variance of the mean of the logarithms is the
/// cluster-robust one, `G/(G-1) sum_g (sum_{i in g} (y_i - m))^2 / n^2` with `G - 1`
/// degrees of freedom for `G` workloads; with every ratio a workload of its own it is
/// `s^2/n` with `n - 1`. One workload gives no interval.
///
/// `extra` is added to that variance (a random-effects combination, degrees of freedom
/// by Welch-Satterthwaite), for a level every ratio shares that the ratios' own scatter
/// cannot see (two runs' machine-wide difference); [`Extra::NONE`] for none.
pub fn geomean_ci_with<K: Ord>(ratios: &[(f64, K)], extra: &Extra) -> Option<GeoMeanCi> {
    if ratios.is_empty() || !ratios.iter().all(|(r, _)| r.is_finite() && *r > 0.0) {
        return None;
    }
    let logs: Vec<f64> = ratios.iter().map(|(r, _)| r.ln()).collect();
    let m = mean(&logs)?;
    let (lo, hi) = match clustered_variance(ratios.iter().map(|(_, k)| k).zip(&logs), m) {
        Some((v, df)) => {
            let df = satterthwaite(v, df, extra);
            let hw = t_critical_95(df)? * (v + extra.variance.max(0.0)).sqrt();
            (Some((m - hw).exp()), Some((m + hw).exp()))
        }
        None => (None, None),
    };
    Some(GeoMeanCi {
        geomean: m.exp(),
        ci95_low: lo,
        ci95_high: hi,
        n: ratios.len(),
    })
}

/// The cluster-robust variance of the mean `m` of the values, each with its cluster,
/// and its degrees of freedom (clusters less one); `None` below two clusters.
fn clustered_variance<'a, K: Ord + 'a>(
    values: impl Iterator<Item = (&'a K, &'a f64)>,
    m: f64,
) -> Option<(f64, f64)> {
    let mut sums: std::collections::BTreeMap<&K, f64> = std::collections::BTreeMap::new();
    let mut n = 0usize;
    for (k, y) in values {
        *sums.entry(k).or_default() += y - m;
        n += 1;
    }
    let g = sums.len() as f64;
    if sums.len() < 2 {
        return None;
    }
    let squares: f64 = sums.values().map(|s| s * s).sum();
    Some((g / (g - 1.0) * squares / (n * n) as f64, g - 1.0))
}

/// Two-sided p-value of a t statistic with `df` degrees of freedom (fractional allowed):
/// `2 * (1 - F(|t|))`. `None` for a non-positive or non-finite `df` or a NaN `t`.
pub fn t_p_value(t: f64, df: f64) -> Option<f64> {
    if t.is_nan() || !(df.is_finite() && df > 0.0) {
        return None;
    }
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((2.0 * (1.0 - dist.cdf(t.abs()))).clamp(0.0, 1.0))
}

/// Two-sided p-value of Welch's t-test that `a` and `b` have equal means (so that
/// their ratio is 1): `t = (mean_a - mean_b) / sqrt(s_a^2/n_a + s_b^2/n_b)` with the
/// Welch-Satterthwaite degrees of freedom. `None` when a side has fewer than two
/// samples. Two exact, equal sides give 1; exact, different sides give 0.
pub fn welch_p_value(a: &Summary, b: &Summary) -> Option<f64> {
    if a.n < 2 || b.n < 2 || !a.mean.is_finite() || !b.mean.is_finite() {
        return None;
    }
    let va = a.stddev * a.stddev / a.n as f64;
    let vb = b.stddev * b.stddev / b.n as f64;
    let diff = a.mean - b.mean;
    if va + vb == 0.0 {
        return Some(if diff == 0.0 { 1.0 } else { 0.0 });
    }
    let df = (va + vb).powi(2) / (va * va / (a.n - 1) as f64 + vb * vb / (b.n - 1) as f64);
    t_p_value(diff / (va + vb).sqrt(), df)
}

/// The variance between several estimates beyond their own (DerSimonian and Laird's
/// moment estimator, as in a random-effects meta-analysis): `y` the estimates (log
/// speed-ups of the rows of a comparison), `v` their own squared standard errors. With
/// weights `w = 1/v`, `Q = sum w (y - ybar_w)^2` and `tau^2 = max(0, (Q - (k - 1)) /
/// (sum w - sum w^2 / sum w))`. Two runs taken at different times differ by more than
/// each cell's interval (other load on the machine, frequency, placement of memory):
/// `tau^2` measures that scatter from all rows at once. Entries with a non-positive or
/// non-finite `v` are left out; `None` below two usable entries.
pub fn between_variance(y: &[f64], v: &[f64]) -> Option<f64> {
    let pairs: Vec<(f64, f64)> = y
        .iter()
        .zip(v)
        .filter(|(y, v)| y.is_finite() && v.is_finite() && **v > 0.0)
        .map(|(y, v)| (*y, 1.0 / v))
        .collect();
    let k = pairs.len();
    if k < 2 {
        return None;
    }
    let sw: f64 = pairs.iter().map(|p| p.1).sum();
    let sw2: f64 = pairs.iter().map(|p| p.1 * p.1).sum();
    let ybar = pairs.iter().map(|p| p.0 * p.1).sum::<f64>() / sw;
    let q: f64 = pairs.iter().map(|(y, w)| w * (y - ybar).powi(2)).sum();
    let c = sw - sw2 / sw;
    if c <= 0.0 {
        return Some(0.0);
    }
    Some(((q - (k - 1) as f64) / c).max(0.0))
}

/// A speed-up tested on the log scale with `extra` added to its own variance: `y` the
/// log of the ratio, `v` its squared standard error (delta method) with `df` degrees
/// of freedom. The interval is `exp(y -/+ t * sqrt(v + extra))` and the p-value that
/// of `y / sqrt(v + extra)`, both with Welch-Satterthwaite's degrees of freedom.
pub fn log_ratio_test(y: f64, v: f64, df: f64, extra: &Extra) -> Option<(Ratio, f64)> {
    let total = v.max(0.0) + extra.variance.max(0.0);
    if !y.is_finite() || !total.is_finite() {
        return None;
    }
    let df = satterthwaite(v.max(0.0), df, extra);
    let se = total.sqrt();
    let t = t_critical_95(df)?;
    let r = y.exp();
    let ratio = Ratio {
        ratio: r,
        ci95_low: Some((y - t * se).exp()),
        ci95_high: Some((y + t * se).exp()),
        ci95_half_width_delta: Some(t * se * r),
        df: Some(df),
    };
    // No variance at all (an exact ratio): the interval is the ratio itself.
    let p = if total == 0.0 {
        if y == 0.0 { 1.0 } else { 0.0 }
    } else {
        t_p_value(y / se, df)?
    };
    Some((ratio, p))
}

/// Benjamini and Hochberg's step-up adjustment of `p` (false discovery rate): sorted
/// ascending, the `i`th smallest (from 1 of `m`) becomes `min over j >= i of
/// min(1, m p_(j) / j)`; the tests whose adjusted value is at most 0.05 are
/// significant with at most 5% of them false on average, and when no test has a real
/// effect (an A/A comparison) the chance that any is significant is at most 5%, as with
/// Holm's method, at much more power when many have one. Output in input order.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut out = vec![1.0; m];
    let mut running = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        let adj = (m as f64 * p[i] / (rank + 1) as f64).min(1.0);
        running = running.min(adj);
        out[i] = running;
    }
    out
}

/// All of [`Summary`] at once. `None` for empty input. With a single value the spread
/// is unknown: `stddev`, `ci95_half_width` and `ci95_rel` are reported as 0 (JSON has
/// no NaN) and `n == 1` is the signal to readers that they carry no information.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    let s = sorted(xs);
    let mean = mean(&s)?;
    let (stddev, ci95_half_width, ci95_rel) = match (stddev(&s), ci95_half_width(&s)) {
        (Some(sd), Some(hw)) => (sd, hw, relative(hw, mean)),
        _ => (0.0, 0.0, 0.0),
    };
    Some(Summary {
        n: s.len(),
        mean,
        median: percentile_of_sorted(&s, 50.0)?,
        min: *s.first()?,
        max: *s.last()?,
        p25: percentile_of_sorted(&s, 25.0)?,
        p75: percentile_of_sorted(&s, 75.0)?,
        stddev,
        ci95_half_width,
        ci95_rel,
    })
}

/// The ratio of two means with a 95% confidence interval, e.g. an SMT yield
/// `throughput(1c2t) / throughput(1c1t)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// `numerator.mean / denominator.mean`.
    pub ratio: f64,
    /// Fieller interval bounds. `None` when either side has fewer than two samples, or
    /// when the denominator's own interval includes zero (the ratio is then unbounded).
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
    /// First-order (delta method) half-width, `t * r * sqrt((se_a/a)^2 + (se_b/b)^2)`;
    /// symmetric, simpler to print, close to Fieller when both sides are precise.
    pub ci95_half_width_delta: Option<f64>,
    /// Welch-Satterthwaite degrees of freedom used for `t`.
    pub df: Option<f64>,
}

/// Ratio of means `num.mean / den.mean` for two independent sets of samples.
///
/// The interval comes from Fieller's theorem: the set of `ρ` for which
/// `(a - ρ b)^2 <= t^2 (va + ρ^2 vb)`, with `a`, `b` the means and `va`, `vb` the
/// squared standard errors. It is exact for normal means and, unlike the delta method,
/// stays honest (asymmetric, possibly unbounded) when the denominator is noisy. `t`
/// uses the Welch-Satterthwaite degrees of freedom of the delta-method variance terms.
/// `None` when the denominator's mean is zero or either input is empty.
pub fn ratio(num: &Summary, den: &Summary) -> Option<Ratio> {
    let (a, b) = (num.mean, den.mean);
    if num.n == 0 || den.n == 0 || b == 0.0 || !a.is_finite() || !b.is_finite() {
        return None;
    }
    let r = a / b;
    let mut out = Ratio {
        ratio: r,
        ci95_low: None,
        ci95_high: None,
        ci95_half_width_delta: None,
        df: None,
    };
    if num.n < 2 || den.n < 2 {
        return Some(out);
    }
    let va = num.stddev * num.stddev / num.n as f64;
    let vb = den.stddev * den.stddev / den.n as f64;
    let ua = va / (b * b);
    let ub = r * r * vb / (b * b);
    let df = if ua + ub == 0.0 {
        (num.n + den.n - 2) as f64
    } else {
        (ua + ub).powi(2) / (ua * ua / (num.n - 1) as f64 + ub * ub / (den.n - 1) as f64)
    };
    let t = t_critical_95(df)?;
    out.df = Some(df);
    out.ci95_half_width_delta = Some(t * (ua + ub).sqrt());
    let g = t * t * vb / (b * b);
    if g < 1.0 {
        let half = (t / b.abs()) * (va * (1.0 - g) + r * r * vb).sqrt();
        let (mut lo, hi) = ((r - half) / (1.0 - g), (r + half) / (1.0 - g));
        if num.min >= 0.0 && den.min > 0.0 {
            // Quantities that cannot be negative (rates, times) have a ratio of means
            // that cannot be either; the normal approximation's tail below zero is
            // noise, not a possible value.
            lo = lo.max(0.0);
        }
        out.ci95_low = Some(lo.min(hi));
        out.ci95_high = Some(lo.max(hi));
    }
    Some(out)
}

named_enum! {
    fn words;
    /// What a speed-up's 95% interval says, in words every output uses (`words`).
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Significance {
        /// The whole interval is above 1: the second is better.
        Faster = "faster",
        /// The whole interval is below 1: the second is worse.
        Slower = "slower",
        /// The interval includes 1: no difference shown at 95%.
        NotSignificant = "not significant at 95%",
        /// The denominator's own interval includes zero: the ratio is unbounded.
        Unbounded = "interval unbounded",
        /// A side has a single sample: no interval at all.
        NoInterval = "n=1, no interval",
        /// A side's samples or rounds disagree beyond their own interval (see
        /// `CellResult::unsteady_reason`): the figure would not repeat, so it is called
        /// neither faster nor slower.
        Unsteady = "unsteady",
        /// A side's figure reached a limit of the measurement (`CellResult::limit`): it is
        /// a bound, not a level, so no ratio of it is a speed-up.
        AtLimit = "at a limit",
    }
}

impl Significance {
    /// `Some(true)` when the interval excludes 1, `Some(false)` when it includes it,
    /// `None` when there is no bounded interval.
    pub fn significant(self) -> Option<bool> {
        match self {
            Significance::Faster | Significance::Slower => Some(true),
            Significance::NotSignificant => Some(false),
            Significance::Unbounded
            | Significance::NoInterval
            | Significance::Unsteady
            | Significance::AtLimit => None,
        }
    }
}

impl Ratio {
    /// What the interval says about 1 (no change); see [`Significance`].
    pub fn significance(&self) -> Significance {
        match (self.ci95_low, self.ci95_high) {
            (Some(lo), _) if lo > 1.0 => Significance::Faster,
            (_, Some(hi)) if hi < 1.0 => Significance::Slower,
            (Some(_), Some(_)) => Significance::NotSignificant,
            _ if self.df.is_none() => Significance::NoInterval,
            _ => Significance::Unbounded,
        }
    }
}

/// The speed-up of `second` over `first`, the one figure every output uses when it
/// compares two cells of a benchmark: the ratio of the means with Fieller's 95% interval
/// ([`ratio`]), turned so that **above 1 means `second` is better** for either direction:
/// `second / first` when higher is better (throughput), `first / second` when lower is
/// better (latency, time). `1.25` reads "1.25x faster" for a rate and for a time alike.
/// `None` as for [`ratio`].
pub fn speedup(first: &Summary, second: &Summary, direction: Direction) -> Option<Ratio> {
    match direction {
        Direction::Higher => ratio(second, first),
        Direction::Lower => ratio(first, second),
    }
}

fn relative(half_width: f64, mean: f64) -> f64 {
    if half_width == 0.0 {
        0.0
    } else if mean == 0.0 {
        f64::MAX
    } else {
        (half_width / mean.abs()).min(f64::MAX)
    }
}

pub(crate) fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// [`percentile`] of values already sorted ascending, for callers that take several
/// percentiles of one large set (a workload's per-operation latencies) and sort once.
/// Every percentile smtlab reports, whichever workload computed it, is this definition.
pub fn percentile_of_sorted(s: &[f64], p: f64) -> Option<f64> {
    let last = s.len().checked_sub(1)?;
    let p = if p.is_nan() {
        50.0
    } else {
        p.clamp(0.0, 100.0)
    };
    let h = last as f64 * p / 100.0;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(last);
    Some(s[lo] + (h - lo as f64) * (s[hi] - s[lo]))
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_ci_uses_order_statistics() {
        // n = 5: no 95% interval exists; n = 6: [min, max] covers 1 - 2/64.
        assert!(super::median_ci95(&[1.0, 2.0, 3.0, 4.0, 5.0]).is_none());
        let c = super::median_ci95(&[6.0, 1.0, 5.0, 2.0, 4.0, 3.0]).unwrap();
        assert_eq!((c.ci_low, c.ci_high, c.median), (1.0, 6.0, 3.5));
        assert!((c.coverage - (1.0 - 2.0 / 64.0)).abs() < 1e-12);
        // n = 20: k = 6 (P(B <= 5) = 0.0207, P(B <= 6) = 0.0577), so [x(6), x(15)].
        let xs: Vec<f64> = (1..=20).rev().map(f64::from).collect();
        let c = super::median_ci95(&xs).unwrap();
        assert_eq!((c.ci_low, c.ci_high), (6.0, 15.0));
        assert!(c.coverage >= 0.95 && c.coverage < 0.96, "{}", c.coverage);
    }

    #[test]
    fn mad_is_the_median_absolute_deviation() {
        assert_eq!(super::mad(&[1.0, 2.0, 3.0, 4.0, 100.0]), Some(1.0));
        assert_eq!(super::mad(&[]), None);
    }

    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    fn one_to_ten() -> Vec<f64> {
        (1..=10).map(f64::from).collect()
    }

    #[test]
    fn basic_statistics_of_one_to_ten() {
        let xs = one_to_ten();
        assert_eq!(mean(&xs), Some(5.5));
        assert_eq!(median(&xs), Some(5.5));
        assert_eq!(min(&xs), Some(1.0));
        assert_eq!(max(&xs), Some(10.0));
        // Type 7: h = 9 * 0.25 = 2.25 -> 3 + 0.25 * (4 - 3).
        assert_eq!(percentile(&xs, 25.0), Some(3.25));
        assert_eq!(percentile(&xs, 75.0), Some(7.75));
        assert_eq!(percentile(&xs, 0.0), Some(1.0));
        assert_eq!(percentile(&xs, 100.0), Some(10.0));
        assert_eq!(percentile(&xs, 90.0), Some(9.1));
        // Variance of 1..=10 is 55/6.
        assert!(close(stddev(&xs).unwrap(), (55.0f64 / 6.0).sqrt(), 1e-12));
    }

    #[test]
    fn percentile_is_order_independent_and_clamped() {
        let xs = [9.0, 1.0, 5.0, 3.0];
        assert_eq!(median(&xs), Some(4.0));
        assert_eq!(percentile(&xs, -5.0), Some(1.0));
        assert_eq!(percentile(&xs, 500.0), Some(9.0));
    }

    #[test]
    fn t_critical_values_match_tables() {
        assert!(close(t_critical_95(9.0).unwrap(), 2.262, 5e-4));
        assert!(close(t_critical_95(1.0).unwrap(), 12.706, 5e-3));
        assert!(close(t_critical_95(2.0).unwrap(), 4.303, 5e-4));
        assert!(close(t_critical_95(29.0).unwrap(), 2.045, 5e-4));
        assert!(close(t_critical_95(1e6).unwrap(), 1.960, 5e-4));
        assert_eq!(t_critical_95(0.0), None);
        assert_eq!(t_critical_95(f64::NAN), None);
    }

    #[test]
    fn ci_of_one_to_ten_by_hand() {
        let xs = one_to_ten();
        // s = sqrt(55/6) = 3.02765; s / sqrt(10) = 0.957427; * 2.262157 = 2.165852.
        let hw = ci95_half_width(&xs).unwrap();
        assert!(
            close(hw, 2.262 * 3.027_650_354 / 10f64.sqrt(), 2e-3),
            "{hw}"
        );
        assert!(close(hw, 2.165_852, 1e-5), "{hw}");
        assert!(close(ci95_rel(&xs).unwrap(), hw / 5.5, 1e-12));
    }

    #[test]
    fn drift_compares_the_medians_of_the_two_halves() {
        // A level shift from 100 to 120 halfway: 20 / median 110.
        let shifted = [100.0, 101.0, 99.0, 121.0, 120.0, 119.0];
        assert!(close(drift_rel(&shifted).unwrap(), 20.0 / 110.0, 1e-12));
        // Both halves spread over the same range: no drift.
        let steady = [100.0, 121.0, 110.0, 119.0, 101.0, 110.5];
        assert!(drift_rel(&steady).unwrap() < 0.02);
        // Odd count: the middle sample belongs to neither half.
        let odd = [1.0, 1.0, 1.0, 50.0, 2.0, 2.0, 2.0];
        assert!(close(drift_rel(&odd).unwrap(), 1.0 / 2.0, 1e-12));
        assert_eq!(drift_rel(&[1.0; DRIFT_MIN_SAMPLES - 1]), None);
        assert_eq!(drift_rel(&[0.0; 8]), None);
    }

    #[test]
    fn geomean_known_values() {
        assert!(close(geomean(&[1.0, 4.0]).unwrap(), 2.0, 1e-12));
        assert!(close(geomean(&[2.0, 8.0, 4.0]).unwrap(), 4.0, 1e-12));
        assert_eq!(geomean(&[]), None);
        assert_eq!(geomean(&[1.0, 0.0]), None);
        assert_eq!(geomean(&[1.0, -2.0]), None);
    }

    #[test]
    fn empty_and_single_inputs_do_not_panic() {
        let empty: [f64; 0] = [];
        assert_eq!(mean(&empty), None);
        assert_eq!(median(&empty), None);
        assert_eq!(percentile(&empty, 25.0), None);
        assert_eq!(min(&empty), None);
        assert_eq!(max(&empty), None);
        assert_eq!(stddev(&empty), None);
        assert_eq!(ci95_half_width(&empty), None);
        assert_eq!(summarize(&empty), None);

        let one = [7.0];
        assert_eq!(stddev(&one), None);
        assert_eq!(ci95_half_width(&one), None);
        let s = summarize(&one).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.min, s.max),
            (1, 7.0, 7.0, 7.0, 7.0)
        );
        assert_eq!((s.p25, s.p75), (7.0, 7.0));
        assert_eq!((s.stddev, s.ci95_half_width, s.ci95_rel), (0.0, 0.0, 0.0));
    }

    #[test]
    fn summary_round_trips_through_json_even_with_zero_mean() {
        let s = summarize(&[-1.0, 1.0]).unwrap();
        assert_eq!(s.mean, 0.0);
        assert_eq!(s.ci95_rel, f64::MAX);
        let back: Summary = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn summarize_matches_the_single_functions() {
        let xs = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];
        let s = summarize(&xs).unwrap();
        assert_eq!(s.n, 8);
        assert_eq!(Some(s.mean), mean(&xs));
        assert_eq!(Some(s.median), median(&xs));
        assert_eq!(Some(s.p25), percentile(&xs, 25.0));
        assert_eq!(Some(s.p75), percentile(&xs, 75.0));
        assert_eq!(Some(s.stddev), stddev(&xs));
        assert_eq!(Some(s.ci95_half_width), ci95_half_width(&xs));
        assert_eq!((s.min, s.max), (1.0, 9.0));
    }

    #[test]
    fn ratio_of_exact_summaries_has_a_zero_width_interval() {
        let a = summarize(&[6.0, 6.0, 6.0]).unwrap();
        let b = summarize(&[4.0, 4.0, 4.0]).unwrap();
        let r = ratio(&a, &b).unwrap();
        assert_eq!(r.ratio, 1.5);
        assert_eq!(r.ci95_low, Some(1.5));
        assert_eq!(r.ci95_high, Some(1.5));
        assert_eq!(r.ci95_half_width_delta, Some(0.0));
    }

    #[test]
    fn ratio_with_noise_matches_hand_computation() {
        // a: mean 12, s = 1 (n = 4: 11, 11, 13, 13 has s = sqrt(4/3)); use exact values.
        let num = [11.0, 13.0, 11.0, 13.0];
        let den = [9.0, 11.0, 9.0, 11.0];
        let (sa, sb) = (summarize(&num).unwrap(), summarize(&den).unwrap());
        let r = ratio(&sa, &sb).unwrap();
        assert!(close(r.ratio, 1.2, 1e-12));
        // va = vb = (4/3)/4 = 1/3. ua = va/100, ub = 1.44 va/100; equal n so
        // df = (ua+ub)^2 / ((ua^2+ub^2)/3).
        let va: f64 = 1.0 / 3.0;
        let (ua, ub) = (va / 100.0, 1.44 * va / 100.0);
        let df = (ua + ub).powi(2) / ((ua * ua + ub * ub) / 3.0);
        assert!(close(r.df.unwrap(), df, 1e-9));
        let t = t_critical_95(df).unwrap();
        assert!(close(
            r.ci95_half_width_delta.unwrap(),
            t * (ua + ub).sqrt(),
            1e-12
        ));
        let (lo, hi) = (r.ci95_low.unwrap(), r.ci95_high.unwrap());
        assert!(lo < 1.2 && 1.2 < hi);
        // Fieller's bounds solve (a - rho b)^2 = t^2 (va + rho^2 vb) exactly.
        for rho in [lo, hi] {
            let lhs = (12.0 - rho * 10.0).powi(2);
            let rhs = t * t * (va + rho * rho * va);
            assert!(close(lhs, rhs, 1e-9), "{lhs} vs {rhs}");
        }
        // A noisy denominator makes the interval asymmetric, wider above.
        assert!(hi - 1.2 > 1.2 - lo);
    }

    #[test]
    fn ratio_edge_cases() {
        let one = summarize(&[2.0]).unwrap();
        let many = summarize(&[1.0, 1.1, 0.9]).unwrap();
        let r = ratio(&one, &many).unwrap();
        assert!(close(r.ratio, 2.0, 1e-12));
        assert_eq!((r.ci95_low, r.ci95_high, r.df), (None, None, None));
        let zero = summarize(&[0.0, 0.0]).unwrap();
        assert_eq!(ratio(&many, &zero), None);
        // A denominator whose interval straddles zero gives no bounds.
        let straddle = summarize(&[-1.0, 1.5, -0.5, 1.0]).unwrap();
        let r = ratio(&many, &straddle).unwrap();
        assert_eq!((r.ci95_low, r.ci95_high), (None, None));
    }

    #[test]
    fn speedup_above_one_means_the_second_is_better_in_either_direction() {
        let slow = summarize(&[10.0, 10.1, 9.9, 10.0]).unwrap();
        let fast = summarize(&[8.0, 8.1, 7.9, 8.0]).unwrap();
        // Times: 10 -> 8 is 1.25x faster; rates: 8 -> 10 is 1.25x faster.
        let t = speedup(&slow, &fast, Direction::Lower).unwrap();
        let r = speedup(&fast, &slow, Direction::Higher).unwrap();
        assert!(close(t.ratio, 1.25, 1e-12) && close(r.ratio, 1.25, 1e-12));
        assert_eq!(t, r, "the same pair, the same figure and interval");
        assert_eq!(t.significance(), Significance::Faster);
        let back = speedup(&fast, &slow, Direction::Lower).unwrap();
        assert!(close(back.ratio, 0.8, 1e-12));
        assert_eq!(back.significance(), Significance::Slower);
    }

    #[test]
    fn the_interval_of_positive_quantities_stays_above_zero() {
        // A numerator so noisy that the plain Fieller bound falls below zero.
        let noisy = summarize(&[0.1, 9.0, 0.2, 12.0, 0.1]).unwrap();
        let steady = summarize(&[10.0, 10.1, 9.9, 10.0]).unwrap();
        let r = ratio(&noisy, &steady).unwrap();
        assert_eq!(r.ci95_low, Some(0.0), "{r:?}");
        assert!(r.ci95_high.unwrap() > r.ratio);
        // Values that may be negative keep the bound the formula gives.
        let signed = summarize(&[-0.1, 9.0, -0.2, 12.0, 0.1]).unwrap();
        let r = ratio(&signed, &steady).unwrap();
        assert!(r.ci95_low.unwrap() < 0.0, "{r:?}");
    }

    #[test]
    fn significance_follows_the_interval() {
        let a = summarize(&[10.0, 10.5, 9.5, 10.2]).unwrap();
        let b = summarize(&[10.1, 10.6, 9.4, 10.0]).unwrap();
        let r = speedup(&a, &b, Direction::Higher).unwrap();
        assert!(r.ci95_low.unwrap() <= 1.0 && 1.0 <= r.ci95_high.unwrap());
        assert_eq!(r.significance(), Significance::NotSignificant);
        assert_eq!(r.significance().significant(), Some(false));
        let one = summarize(&[10.0]).unwrap();
        let r = speedup(&one, &b, Direction::Higher).unwrap();
        assert_eq!(r.significance(), Significance::NoInterval);
        assert_eq!(r.significance().words(), "n=1, no interval");
        let straddle = summarize(&[-1.0, 1.5, -0.5, 1.0]).unwrap();
        let r = speedup(&straddle, &b, Direction::Higher).unwrap();
        assert_eq!(r.significance(), Significance::Unbounded);
    }

    #[test]
    fn welch_p_value_matches_a_hand_computed_t_test() {
        // Equal n = 4, s^2 = 4/3 each: se = sqrt(2/3), t = 2 / se = 2.449, df = 6.
        let a = summarize(&[11.0, 13.0, 11.0, 13.0]).unwrap();
        let b = summarize(&[9.0, 11.0, 9.0, 11.0]).unwrap();
        let p = welch_p_value(&a, &b).unwrap();
        // R: 2 * pt(-2.449490, 6) = 0.04986.
        assert!(close(p, 0.04986, 5e-5), "{p}");
        assert_eq!(welch_p_value(&a, &a), Some(1.0));
        let one = summarize(&[1.0]).unwrap();
        assert_eq!(welch_p_value(&one, &a), None);
        let x = summarize(&[2.0, 2.0]).unwrap();
        let y = summarize(&[3.0, 3.0]).unwrap();
        assert_eq!(welch_p_value(&x, &y), Some(0.0));
    }

    #[test]
    fn between_variance_is_zero_for_consistent_rows_and_finds_extra_scatter() {
        // Estimates that agree within their errors: no extra scatter.
        let v = [0.01; 4];
        assert_eq!(between_variance(&[0.0, 0.05, -0.05, 0.02], &v), Some(0.0));
        // By hand: y = -1, 1 with v = 0.01: w = 100 each, ybar = 0, Q = 200,
        // C = 200 - 20000/200 = 100, tau^2 = (200 - 1) / 100 = 1.99.
        let t = between_variance(&[-1.0, 1.0], &[0.01, 0.01]).unwrap();
        assert!(close(t, 1.99, 1e-12), "{t}");
        assert_eq!(between_variance(&[1.0], &[0.01]), None);
        assert_eq!(between_variance(&[1.0, 2.0], &[0.0, 0.01]), None);
    }

    #[test]
    fn benjamini_hochberg_steps_up() {
        // m = 4, sorted 0.01, 0.02, 0.03, 0.5: 4p/i = 0.04, 0.04, 0.04, 0.5.
        let adj = benjamini_hochberg(&[0.03, 0.5, 0.01, 0.02]);
        let want = [0.04, 0.5, 0.04, 0.04];
        for (a, w) in adj.iter().zip(want) {
            assert!(close(*a, w, 1e-12), "{adj:?}");
        }
        // Step-up: a larger p-value that passes lifts the smaller ones with it.
        let adj = benjamini_hochberg(&[0.04, 0.045]);
        assert!(
            close(adj[0], 0.045, 1e-12) && close(adj[1], 0.045, 1e-12),
            "{adj:?}"
        );
        assert!(benjamini_hochberg(&[]).is_empty());
    }

    #[test]
    fn geomean_ci_is_a_t_interval_on_logarithms() {
        let apart = |r: &[f64]| r.iter().copied().zip(0..).collect::<Vec<(f64, i32)>>();
        let g = geomean_ci_with(&apart(&[0.5, 2.0]), &Extra::NONE).unwrap();
        assert!(close(g.geomean, 1.0, 1e-12));
        // logs -ln2, ln2: sd = ln2 * sqrt(2), hw = t(1) * sd / sqrt(2) = 12.706 ln2.
        let hw = t_critical_95(1.0).unwrap() * 2f64.ln();
        assert!(close(g.ci95_high.unwrap(), hw.exp(), 1e-9));
        assert!(close(g.ci95_low.unwrap(), (-hw).exp(), 1e-9));
        assert_eq!(g.significance(), Significance::NotSignificant);
        let up = geomean_ci_with(&apart(&[1.10, 1.11, 1.09, 1.10]), &Extra::NONE).unwrap();
        assert_eq!(up.significance(), Significance::Faster);
        let one = geomean_ci_with(&apart(&[1.3]), &Extra::NONE).unwrap();
        assert_eq!(
            (one.ci95_low, one.significance()),
            (None, Significance::NoInterval)
        );
        assert_eq!(geomean_ci_with(&apart(&[1.0, 0.0]), &Extra::NONE), None);
        assert_eq!(geomean_ci_with(&apart(&[]), &Extra::NONE), None);
    }

    #[test]
    fn a_workload_on_several_placements_is_one_draw_in_the_geomean() {
        // Two workloads on three placements each, every placement moving with its
        // workload: as six independent ratios B looks faster, as two workloads it is
        // not shown to be.
        let rows = [1.10, 1.10, 1.10, 1.02, 1.02, 1.02];
        let apart: Vec<(f64, usize)> = rows.iter().copied().zip(0..).collect();
        let grouped: Vec<(f64, &str)> = rows
            .iter()
            .copied()
            .zip(["a", "a", "a", "b", "b", "b"])
            .collect();
        let six = geomean_ci_with(&apart, &Extra::NONE).unwrap();
        let two = geomean_ci_with(&grouped, &Extra::NONE).unwrap();
        assert!(close(six.geomean, two.geomean, 1e-12));
        assert_eq!(six.significance(), Significance::Faster);
        assert_eq!(two.significance(), Significance::NotSignificant);
        // Logs 0.0953 and 0.0198 about their mean: a variance of 2 x (3 x 0.0377)^2 / 36
        // with 1 degree of freedom.
        let d = (1.10f64.ln() - 1.02f64.ln()) / 2.0;
        let hw = t_critical_95(1.0).unwrap() * (2.0 * 2.0 * (3.0 * d).powi(2) / 36.0).sqrt();
        assert!(close(
            two.ci95_high.unwrap(),
            (two.geomean.ln() + hw).exp(),
            1e-9
        ));
        // One workload alone has no interval.
        let one = geomean_ci_with(&[(1.1, 0), (1.2, 0)], &Extra::NONE).unwrap();
        assert_eq!(one.significance(), Significance::NoInterval);
    }
}
