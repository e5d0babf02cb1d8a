//! Comparing two runs cell by cell, laid out like paper 001's tables: one row per
//! benchmark, columns A | B | speed-up, and a geometric-mean row per group.
//!
//! Rules, so a reader can reproduce every figure:
//! * Cells are matched by `(benchmark, params, placement_spec)`: the placement as the
//!   user wrote it, so `1c2t` on machine A is compared with `1c2t` on machine B even
//!   though the CPUs differ. If a run holds the same key twice, the first cell counts.
//! * The value shown is the **mean** of the samples, for either direction, because the
//!   speed-up is a ratio of means: A and B reproduce it.
//! * Speed-up of B over A is [`smtlab_model::stats::speedup`], the figure every smtlab
//!   output uses for a pair of cells: the ratio of the means turned by direction (`B/A`
//!   for higher-is-better, `A/B` for lower-is-better, so above 1 always means B is
//!   better) with Fieller's 95% interval (Welch-Satterthwaite degrees of freedom), made
//!   by [`smtlab_model::verdict`] like every other output's.
//! * Many rows are many tests: with 64 rows, three would look "significant" at 95% by
//!   chance alone. Each row's p-value (Welch's test of equal means, the test whose
//!   acceptance region is Fieller's interval at 1) is corrected for the number of rows
//!   with **Benjamini and Hochberg's** method (false discovery rate 5%: of the rows
//!   called different, at most 5% are expected to be noise; when nothing changed, as
//!   in an A/A comparison, the chance that any row is called different is at most 5%).
//!   B is called faster or slower only when the whole interval is above or below 1
//!   **and** the adjusted p-value is at most 0.05; otherwise "not significant" (the
//!   text says "after correction" where the interval alone excluded 1). A side with
//!   one sample has no interval.
//! * A row whose cell in A or B is unsteady (its rounds disagree beyond their
//!   intervals, its level drifted during the cell, or its samples spread beyond a CV
//!   of 25%: `CellResult::unsteady_reason`) is marked `unsteady`,
//!   never faster or slower, and is left out of the geometric means.
//! * So is a row on two CPUs or more when A and B ran on one host whose CPUs shared
//!   caches differently at their starts (their cache-line handoffs differ by
//!   `HANDOFF_CHANGE` or more: the host moved a virtual machine's CPUs between the
//!   runs): its cells were measured on different hardware sharing, so their ratio says
//!   nothing about the runs. One-CPU rows are compared as usual.
//! * The geometric mean of the steady rows' speed-ups is taken per group and over all
//!   rows, with a 95% interval: Student's t on the logarithms of the ratios
//!   ([`stats::geomean_ci_with`]), the rows taken as a sample of workloads (a
//!   workload's rows on several placements count as one draw). The headline
//!   says **no difference** when that interval includes 1, and B faster or slower only
//!   when it excludes 1. The A and B columns of a group's geometric-mean row are filled
//!   only when all its rows share one unit and direction (a mean of GB/s and ns means
//!   nothing).
//! * Two runs taken at different times differ by more than each cell's interval says:
//!   the instance is new (where its memory landed), the machine's speed and other load
//!   differ. A row is faster or slower only beyond what runs of the **same setup**
//!   differ by: its test is on the log of the speed-up with the between-run variance
//!   of [`crate::between`] added to its own (`var = var_within + var_between`, Student's
//!   t with Welch-Satterthwaite's degrees of freedom), and the headline's interval adds
//!   the part every row of a run shares. Which estimate was used (stored repeats of this
//!   setup, the runs' rounds, or the documented default floor) is printed with the
//!   figures (`between runs (...)`) and carried in the JSON (`between_runs`);
//!   `compare --between-runs none` leaves it out (each cell's Fieller interval alone).
//! * How much the rows of these two runs scatter beyond their own intervals is also
//!   shown (DerSimonian and Laird's between-row variance of the log speed-ups,
//!   [`stats::between_variance`], `between-run scatter`). It holds the rows' real
//!   differences as well, so it is shown, not used (a comparison of SMT off and on
//!   would lose every row); in an A/A comparison it is the machine's own run-to-run
//!   noise, and well above the estimate in use it says the estimate is too small.
//! * Counters (`--counters`): for a cell counted in both runs, the figures measured on
//!   both sides (CPU time, context switches and page faults per unit of work where the
//!   unit is the same; instructions per unit, CPI and LLC MPKI where both had a PMU) are
//!   listed as A, B and B/A, without a direction or a test: they explain a speed-up,
//!   they are not one. A figure missing on either side is left out.
//! * Cells present in only one run are listed as missing, with the other run's skip
//!   reason when it recorded one; they never enter a geometric mean.

use std::collections::BTreeMap;

use serde::Serialize;
use smtlab_model::stats::{Ratio, Significance};
use smtlab_model::unit::plural;
use smtlab_model::verdict::{Verdict, verdict_named};
use smtlab_model::{CellKey, CellRecord, Direction, RunMeta, RunResults, stats};

use crate::between::{BetweenRuns, Choice};
use crate::compare_sides::{EnvDiff, Side, env_diffs};
use crate::counters::Headline;
use crate::fmt::{num, params, text_table, utc};

smtlab_model::named_enum! {
    /// Which statistic a value is (see the module documentation for why).
    #[derive(Serialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Statistic {
        Mean = "mean",
    }
}

/// Who a run is, in one line, plus the facts that most often explain a difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunLabel {
    pub id: i64,
    pub hostname: Option<String>,
    pub started: String,
    /// The name the user gave the run (`run --label`), where it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub label: String,
}

impl RunLabel {
    pub fn of(meta: &RunMeta) -> Self {
        let host = meta
            .environment
            .hostname
            .as_deref()
            .unwrap_or("unknown host");
        let id = if meta.id > 0 {
            format!(" run {}", meta.id)
        } else {
            String::new()
        };
        let started = utc(meta.started_unix_s);
        RunLabel {
            id: meta.id,
            hostname: meta.environment.hostname.clone(),
            label: format!("{host}{id}, started {started}"),
            started,
            name: None,
        }
    }

    /// The run with the name the user gave it (the store keeps it beside the results),
    /// which leads its line: `baseline: host run 3, started ...`.
    pub fn named(&mut self, name: Option<String>) {
        if let Some(n) = &name {
            self.label = format!("{n}: {}", self.label);
        }
        self.name = name;
    }
}

/// One cell measured in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    pub benchmark: String,
    pub group: String,
    pub unit: String,
    pub direction: Direction,
    pub params: BTreeMap<String, String>,
    /// The placement as planned (`placement_spec`).
    pub placement: String,
    /// Always the mean (see the module documentation); kept so readers of the JSON
    /// know which statistic `a` and `b` are.
    pub statistic: Statistic,
    pub a: f64,
    pub b: f64,
    pub n_a: usize,
    pub n_b: usize,
    /// Direction-adjusted ratio of means, above 1 = B better; `None` when a mean is not
    /// positive.
    pub speedup: Option<f64>,
    /// `(speedup - 1) * 100`.
    pub speedup_pct: Option<f64>,
    /// The speed-up with its 95% interval ([`stats::speedup`]): this pair of cells
    /// alone, within the two runs.
    pub interval: Option<Ratio>,
    /// The speed-up with its 95% interval once the between-run variance is added
    /// ([`crate::between`]): what decides faster or slower. `None` without an interval,
    /// for an unsteady row, or with `--between-runs none` (then `interval` decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_with_between: Option<Ratio>,
    /// The verdict after the correction for the number of rows: `faster`/`slower`
    /// only when the interval excludes 1 and the adjusted p-value is at most 0.05;
    /// `unsteady` when a cell is (see the module documentation).
    pub significance: Option<Significance>,
    /// The two-sided p-value of the row's test (the log speed-up against the within-run
    /// and between-run variance; Welch's test of equal means with `--between-runs none`),
    /// before the correction for the number of rows. `None` for an unsteady row (not
    /// tested) or a side with one sample.
    pub p_value: Option<f64>,
    /// `p_value` adjusted by Benjamini and Hochberg's method over all rows with one.
    pub p_adjusted: Option<f64>,
    /// Why the cell in A or B is unsteady (`A: CV 31%`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsteady: Option<String>,
    /// Counter figures measured in both runs (empty unless both cells were counted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<CounterPair>,
}

/// One counter figure of a cell in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterPair {
    /// `CPU ns/op`, `page faults/op`, `CPI`, ...
    pub metric: String,
    pub a: f64,
    pub b: f64,
    /// `b / a`; `None` when `a` is zero.
    pub ratio: Option<f64>,
}

/// The counter figures both cells measured (see the module documentation).
fn counter_pairs(ca: &CellRecord, cb: &CellRecord) -> Vec<CounterPair> {
    type Figure = fn(&Headline) -> Option<f64>;
    let (Some(ka), Some(kb)) = (&ca.counters, &cb.counters) else {
        return Vec::new();
    };
    let (ha, hb) = (Headline::of(ka), Headline::of(kb));
    // Per unit of work only where both sides did the same unit.
    let same_unit = ha.unit.is_some() && ha.unit == hb.unit;
    let unit = ha.unit.clone().unwrap_or_default();
    let per_unit: [(&str, Figure); 4] = [
        ("CPU ns", |h| h.cpu_ns_per_unit),
        ("context switches", |h| h.context_switches_per_unit),
        ("page faults", |h| h.page_faults_per_unit),
        ("instructions", |h| h.instructions_per_unit),
    ];
    let rates: [(String, Figure); 2] = [
        ("CPI".into(), |h| h.cpi),
        ("LLC MPKI".into(), |h| h.llc_mpki),
    ];
    per_unit
        .into_iter()
        .filter(|_| same_unit)
        .map(|(name, f)| (format!("{name}/{unit}"), f))
        .chain(rates)
        .filter_map(|(metric, f)| {
            let (a, b) = (f(&ha)?, f(&hb)?);
            Some(CounterPair {
                metric,
                a,
                b,
                ratio: (a != 0.0).then(|| b / a),
            })
        })
        .collect()
}

impl CompareRow {
    /// Whether the row cannot be compared (a cell is unsteady): then it is neither
    /// faster nor slower and stays out of the geometric means. The one place that says.
    pub fn not_comparable(&self) -> bool {
        self.unsteady.is_some()
    }

    /// Marks the row not comparable for `why` (after any reason it already has).
    fn hold_back(&mut self, why: &str) {
        self.unsteady = Some(match self.unsteady.take() {
            Some(already) => format!("{already}, {why}"),
            None => why.to_string(),
        });
        if self.significance != Some(Significance::AtLimit) {
            self.significance = self.significance.map(|_| Significance::Unsteady);
        }
    }

    /// The interval that decides: with the between-run variance where it was added.
    pub fn deciding_interval(&self) -> Option<Ratio> {
        self.interval_with_between.or(self.interval)
    }

    /// The row's verdict (figure, interval and corrected words).
    pub fn verdict(&self) -> Option<Verdict> {
        Some(Verdict {
            speedup: self.deciding_interval()?,
            significance: self.significance?,
            unsteady: self.unsteady.clone(),
            at_limit: None,
            p_value: self.p_value,
        })
    }

    /// The speed-up as the tables print it: `1.250x [1.210, 1.290] faster`; `not
    /// significant after correction` where the interval alone excluded 1 but the corrected
    /// test does not; `unsteady (A: ...)`. `-` without a ratio.
    pub fn speedup_text(&self) -> String {
        let Some(v) = self.verdict() else {
            return "-".into();
        };
        let text = crate::fmt::verdict(&v);
        let raw = v.speedup.significance();
        if v.significance == Significance::NotSignificant && raw != Significance::NotSignificant {
            return text.replace(
                Significance::NotSignificant.words(),
                "not significant after correction",
            );
        }
        text
    }
}

/// The geometric mean of a group's speed-ups, with its 95% interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupMean {
    pub group: String,
    /// Rows whose speed-up entered the mean (steady rows with a ratio).
    pub rows: usize,
    /// Rows left out because a cell is unsteady.
    pub unsteady: usize,
    pub speedup: Option<f64>,
    /// Student-t 95% interval of the geometric mean ([`stats::geomean_ci_with`]); `None`
    /// below two rows.
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
    /// `faster`/`slower` when the interval excludes 1, `not_significant` (no
    /// difference) when it includes it, `no_interval` below two rows.
    pub significance: Option<Significance>,
    /// The common unit when all rows share one unit and direction; then `a` and `b` are
    /// the geometric means of the values (paper 001's "Geometric Mean" row).
    pub unit: Option<String>,
    pub a: Option<f64>,
    pub b: Option<f64>,
}

/// A cell measured in only one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MissingCell {
    pub benchmark: String,
    pub params: BTreeMap<String, String>,
    pub placement: String,
    pub only_in: Side,
    /// Why the other run skipped it, when it says.
    pub other_skipped: Option<String>,
}

impl MissingCell {
    /// Cell `c`, measured only on side `only_in`, with why `other` skipped it.
    fn of(c: &CellRecord, only_in: Side, other: &RunResults) -> Self {
        let key = c.key();
        let skipped = other.skipped.iter().find(|s| s.key == key);
        MissingCell {
            benchmark: c.benchmark.clone(),
            params: c.flat_params(),
            placement: c.placement_spec.clone(),
            only_in,
            other_skipped: skipped.map(|s| s.reason.clone()),
        }
    }

    /// `  NAME PARAMS on PLACEMENT: only in A`, with why the other run skipped it when it
    /// says: a line of the "measured in one run only" list, without its newline.
    pub fn line(&self) -> String {
        let side = format!("only in {}", self.only_in.letter());
        let mut line = format!(
            "  {} {} on {}: {side}",
            self.benchmark,
            crate::fmt::params(&self.params),
            self.placement
        );
        if let Some(r) = &self.other_skipped {
            line.push_str(&format!(" (the other run skipped it: {r})"));
        }
        line
    }
}

/// Two runs compared cell by cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub a: RunLabel,
    pub b: RunLabel,
    pub env_diffs: Vec<EnvDiff>,
    /// Rows grouped (compute, memory, threads, os, then others) in A's cell order.
    pub rows: Vec<CompareRow>,
    pub groups: Vec<GroupMean>,
    pub overall: GroupMean,
    pub missing: Vec<MissingCell>,
    /// How row significance is corrected for the number of rows:
    /// `benjamini-hochberg`.
    pub correction: String,
    /// How much the steady rows' speed-ups scatter between the two runs beyond their
    /// own intervals, as a relative standard deviation (`0.05`: about 5%): the machine's
    /// run-to-run noise plus the rows' real differences. `None` below two steady rows
    /// with intervals. Shown, not used in the tests.
    pub between_runs_scatter: Option<f64>,
    /// The between-run variance added to the row tests and the headline, and where it
    /// came from.
    pub between_runs: BetweenRuns,
    /// Paper 000's 2T vs 1T-UP where one run was measured on a uniprocessor kernel
    /// ([`crate::compare_up`]): its `1t-up-kernel` cells beside the other run's `1c2t`,
    /// `1c1t-up` and `1c1t`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub up_kernel: Vec<crate::compare_up::UpKernelRow>,
    /// A and B are of one host whose CPUs shared caches differently at their starts
    /// (`differs: cpu_handoff`): their rows on two CPUs or more are held back
    /// ([`SHARING_MOVED`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cpus_moved: bool,
}

impl GroupMean {
    /// The headline in words: `no difference: 1.004x [0.981, 1.028] (geometric mean of
    /// 60 rows, 95% CI)`, `B faster: ...`, `B slower: ...`; with the unsteady rows left
    /// out when there are any.
    pub fn headline(&self) -> String {
        let Some(g) = self.speedup else {
            return "no speed-up to average".into();
        };
        let what = match self.significance {
            Some(Significance::Faster) => "B faster",
            Some(Significance::Slower) => "B slower",
            Some(Significance::NotSignificant) => "no difference",
            _ => "one row, no interval",
        };
        let mut s = format!(
            "{what}: {} ({}; geometric mean of {}, 95% CI)",
            crate::fmt::ratio_ci(g, self.ci95_low, self.ci95_high),
            crate::fmt::pct(g),
            plural(self.rows, "row"),
        );
        if self.unsteady > 0 {
            s.push_str(&format!(
                "; {} left out",
                plural(self.unsteady, "unsteady row")
            ));
        }
        s
    }
}

fn index(r: &RunResults) -> BTreeMap<CellKey, &CellRecord> {
    let mut m = BTreeMap::new();
    for c in &r.cells {
        m.entry(c.key()).or_insert(c);
    }
    m
}

const GROUP_ORDER: [&str; 4] = ["compute", "memory", "threads", "os"];

fn group_rank(g: &str, seen: &[String]) -> usize {
    GROUP_ORDER
        .iter()
        .position(|x| *x == g)
        .unwrap_or_else(|| GROUP_ORDER.len() + seen.iter().position(|x| x == g).unwrap_or(0))
}

/// Why a row on two CPUs or more is not compared when the host moved the CPUs between
/// the runs (see the module documentation).
pub const SHARING_MOVED: &str = "CPUs moved between runs";

/// What a comparison of one host whose CPUs moved between the runs says once, under its
/// `differs:` lines.
pub const CPUS_MOVED_NOTE: &str = "the host moved the CPUs between the runs (their \
     cache-line handoffs differ): rows on two CPUs or more are not compared";

/// Compares run B against run A (see the module documentation for the rules), with the
/// between-run variance from A's and B's own rounds, or else the default floor.
pub fn compare(a: &RunResults, b: &RunResults) -> Comparison {
    let between = BetweenRuns::choose(Choice::Auto, a, b, &[])
        .unwrap_or_else(|_| BetweenRuns::default_floor());
    compare_with(a, b, between)
}

/// Compares run B against run A with `between` as the between-run variance.
pub fn compare_with(a: &RunResults, b: &RunResults, between: BetweenRuns) -> Comparison {
    let ia = index(a);
    let ib = index(b);
    let mut rows = Vec::new();
    let mut tests = Vec::new();
    let mut missing = Vec::new();
    // A key's first cell is the one its index holds; later ones are skipped.
    let first = |i: &BTreeMap<CellKey, &CellRecord>, c: &CellRecord| std::ptr::eq(i[&c.key()], c);
    let apart = crate::compare_sides::sharing_moved(&a.run, &b.run);
    for ca in a.cells.iter().filter(|c| first(&ia, c)) {
        let Some(cb) = ib.get(&ca.key()) else {
            missing.push(MissingCell::of(ca, Side::A, b));
            continue;
        };
        tests.push(log_ratio(ca, cb));
        let mut r = row(ca, cb);
        let spans = |c: &CellRecord, run: &RunResults| c.placement.spans_cpus(&run.run.topology);
        if apart && (spans(ca, a) || spans(cb, b)) {
            r.hold_back(SHARING_MOVED);
        }
        rows.push(r);
    }
    let between_runs_scatter = correct_for_rows(&mut rows, &tests, &between);
    for cb in b
        .cells
        .iter()
        .filter(|c| first(&ib, c) && !ia.contains_key(&c.key()))
    {
        missing.push(MissingCell::of(cb, Side::B, a));
    }
    // Stable sort keeps A's order within a group.
    let seen_groups = crate::first_seen(rows.iter().map(|r| r.group.clone()));
    rows.sort_by_key(|r| group_rank(&r.group, &seen_groups));
    // The sorted rows' groups, in that order.
    let groups = crate::grouped(&rows, |r| r.group.as_str())
        .into_iter()
        .map(|(g, members)| group_mean(g, &members, &between))
        .collect();
    let overall = group_mean("overall", &rows.iter().collect::<Vec<_>>(), &between);
    Comparison {
        a: RunLabel::of(&a.run),
        b: RunLabel::of(&b.run),
        env_diffs: env_diffs(&a.run, &b.run),
        rows,
        groups,
        overall,
        missing,
        correction: "benjamini-hochberg".into(),
        between_runs_scatter,
        between_runs: between,
        up_kernel: crate::compare_up::up_kernel_rows(a, b),
        cpus_moved: apart,
    }
}

/// A row's speed-up on the log scale, for the scatter between the runs: `(y, v, df)`
/// with `y` the log of the speed-up, `v` its squared standard error by the delta method
/// (`(se_a/a)^2 + (se_b/b)^2`) and `df` Welch-Satterthwaite's. `None` with one sample on
/// a side or a mean that is not positive.
fn log_ratio(ca: &CellRecord, cb: &CellRecord) -> Option<(f64, f64, f64)> {
    let (a, b) = (&ca.result.summary, &cb.result.summary);
    if a.n < 2 || b.n < 2 || a.mean <= 0.0 || b.mean <= 0.0 {
        return None;
    }
    let ua = a.stddev * a.stddev / (a.n as f64 * a.mean * a.mean);
    let ub = b.stddev * b.stddev / (b.n as f64 * b.mean * b.mean);
    let y = match ca.direction {
        Direction::Higher => (b.mean / a.mean).ln(),
        Direction::Lower => (a.mean / b.mean).ln(),
    };
    let df = if ua + ub == 0.0 {
        (a.n + b.n - 2) as f64
    } else {
        (ua + ub).powi(2) / (ua * ua / (a.n - 1) as f64 + ub * ub / (b.n - 1) as f64)
    };
    Some((y, ua + ub, df))
}

/// The row tests (see the module documentation): each steady row's log speed-up tested
/// with `between`'s variance added to its own, then Benjamini and Hochberg's correction
/// of the p-values, after which a row stays faster or slower only when its adjusted
/// p-value is at most 0.05; and the scatter between the runs beyond the rows' own
/// errors, estimated from the steady rows ([`stats::between_variance`]), returned as a
/// relative standard deviation. `tests[i]` is [`log_ratio`] of `rows[i]`.
fn correct_for_rows(
    rows: &mut [CompareRow],
    tests: &[Option<(f64, f64, f64)>],
    between: &BetweenRuns,
) -> Option<f64> {
    let steady = |i: usize| !rows[i].not_comparable() && rows[i].speedup.is_some();
    let with_errors: Vec<(f64, f64)> = (0..rows.len())
        .filter(|&i| steady(i))
        .filter_map(|i| tests.get(i).copied().flatten().map(|(y, v, _)| (y, v)))
        .collect();
    let (ys, vs): (Vec<f64>, Vec<f64>) = with_errors.iter().copied().unzip();
    let scatter = stats::between_variance(&ys, &vs).map(f64::sqrt);
    for r in rows.iter_mut().filter(|r| r.not_comparable()) {
        // An unsteady row is not tested: it is neither faster nor slower.
        r.p_value = None;
    }
    if between.source != crate::between::Source::None {
        for (r, t) in rows.iter_mut().zip(tests) {
            add_between(r, *t, between);
        }
    }
    let idx: Vec<usize> = (0..rows.len())
        .filter(|&i| rows[i].p_value.is_some())
        .collect();
    let p: Vec<f64> = idx.iter().filter_map(|&i| rows[i].p_value).collect();
    for (&i, adj) in idx.iter().zip(stats::benjamini_hochberg(&p)) {
        let r = &mut rows[i];
        r.p_adjusted = Some(adj);
        if matches!(
            r.significance,
            Some(Significance::Faster | Significance::Slower)
        ) && adj > 0.05
        {
            r.significance = Some(Significance::NotSignificant);
        }
    }
    scatter
}

/// A steady row's test with the between-run variance added: its interval, p-value and
/// words from [`stats::log_ratio_test`]. A row without a test is left as it is.
fn add_between(r: &mut CompareRow, test: Option<(f64, f64, f64)>, between: &BetweenRuns) {
    if r.not_comparable() {
        return;
    }
    let Some((y, v, df)) = test else {
        return;
    };
    let Some((ratio, p)) = stats::log_ratio_test(y, v, df, &between.row_extra(&r.group)) else {
        return;
    };
    r.interval_with_between = Some(ratio);
    r.significance = Some(ratio.significance());
    r.p_value = Some(p);
}

fn row(ca: &CellRecord, cb: &CellRecord) -> CompareRow {
    let (sa, sb) = (&ca.result.summary, &cb.result.summary);
    let (va, vb) = (sa.mean, sb.mean);
    // A geometric mean needs positive ratios: both means positive.
    let v = (va > 0.0 && vb > 0.0)
        .then(|| verdict_named(ca, cb, ["A", "B"]))
        .flatten();
    let interval = v.as_ref().map(|v| v.speedup);
    let speedup = interval.map(|r| r.ratio);
    CompareRow {
        benchmark: ca.benchmark.clone(),
        group: ca.group.clone(),
        unit: ca.unit.clone(),
        direction: ca.direction,
        params: ca.flat_params(),
        placement: ca.placement_spec.clone(),
        statistic: Statistic::Mean,
        a: va,
        b: vb,
        n_a: sa.n,
        n_b: sb.n,
        speedup,
        speedup_pct: speedup.map(|s| (s - 1.0) * 100.0),
        interval,
        interval_with_between: None,
        significance: v.as_ref().map(|v| v.significance),
        p_value: v.as_ref().and_then(|v| v.p_value),
        p_adjusted: None,
        unsteady: v.and_then(|v| v.unsteady),
        counters: counter_pairs(ca, cb),
    }
}

fn group_mean(group: &str, rows: &[&CompareRow], between: &BetweenRuns) -> GroupMean {
    let with_ratio = || rows.iter().filter(|r| r.speedup.is_some());
    let unsteady = with_ratio().filter(|r| r.not_comparable()).count();
    let used: Vec<&&CompareRow> = with_ratio().filter(|r| !r.not_comparable()).collect();
    // A workload's rows on several placements are one draw (see `geomean_ci_with`).
    let ratios: Vec<_> = used
        .iter()
        .filter_map(|r| Some((r.speedup?, (r.benchmark.as_str(), &r.params))))
        .collect();
    let gm = stats::geomean_ci_with(&ratios, &between.headline_extra());
    let uniform = used.first().filter(|f| {
        used.iter()
            .all(|r| r.unit == f.unit && r.direction == f.direction)
    });
    let (unit, ga, gb) = match uniform {
        Some(f) => (
            Some(f.unit.clone()),
            stats::geomean(&used.iter().map(|r| r.a).collect::<Vec<_>>()),
            stats::geomean(&used.iter().map(|r| r.b).collect::<Vec<_>>()),
        ),
        None => (None, None, None),
    };
    GroupMean {
        group: group.into(),
        rows: ratios.len(),
        unsteady,
        speedup: gm.map(|g| g.geomean),
        ci95_low: gm.and_then(|g| g.ci95_low),
        ci95_high: gm.and_then(|g| g.ci95_high),
        significance: gm.map(|g| g.significance()),
        unit,
        a: ga,
        b: gb,
    }
}

/// The head of every plain-text comparison, without its last newline: the two runs'
/// labels, a `differs:` line for every environment field in which they differ, the
/// overall verdict, the scatter and between-run lines, and the [`LEGEND`].
pub fn head_text(c: &Comparison) -> String {
    let mut out = format!("A: {}\nB: {}\n", c.a.label, c.b.label);
    for d in &c.env_diffs {
        out.push_str(&format!(
            "differs: {}: {} | {}\n",
            d.field,
            d.a.as_deref().unwrap_or("unknown"),
            d.b.as_deref().unwrap_or("unknown")
        ));
    }
    if c.cpus_moved {
        out.push_str(&format!("  {CPUS_MOVED_NOTE}\n"));
    }
    if !c.rows.is_empty() {
        out.push_str(&format!("overall: {}\n", c.overall.headline()));
    }
    for line in scatter_line(c).into_iter().chain([c.between_runs.line()]) {
        out.push_str(&line);
        out.push('\n');
    }
    out.push_str(LEGEND);
    out
}

/// The tail of every plain-text comparison: paper 000's 2T vs 1T-UP and the cells
/// measured in one run only, each of their lines laid out by `line`.
pub fn tail_text(c: &Comparison, line: impl Fn(&str) -> String) -> String {
    let mut out = crate::compare_up::up_kernel_text(&c.up_kernel);
    if !c.missing.is_empty() {
        out.push_str("\nmeasured in one run only:\n");
        for m in &c.missing {
            out.push_str(&line(&m.line()));
        }
    }
    out
}

/// The comparison as plain text, paper 001 style: rows of benchmarks, columns A | B |
/// speed-up, a geometric-mean row per group and an overall one, then missing cells.
pub fn compare_table(c: &Comparison) -> String {
    let mut out = head_text(c);
    out.push_str("\n\n");
    if c.rows.is_empty() {
        out.push_str("no cell was measured in both runs\n");
    } else {
        let header = [
            "benchmark",
            "params",
            "placement",
            "unit",
            "value",
            "A",
            "B",
            "speed-up",
        ];
        let mut body: Vec<Vec<String>> = Vec::new();
        for g in &c.groups {
            if !body.is_empty() {
                body.push(vec![String::new(); header.len()]);
            }
            body.push(vec![format!("[{}]", g.group)]);
            for r in c.rows.iter().filter(|r| r.group == g.group) {
                body.push(vec![
                    r.benchmark.clone(),
                    params(&r.params),
                    r.placement.clone(),
                    r.unit.clone(),
                    r.statistic.name().into(),
                    num(r.a),
                    num(r.b),
                    r.speedup_text(),
                ]);
            }
            body.push(geomean_row(g, &format!("geometric mean ({})", g.rows)));
        }
        body.push(vec![String::new(); header.len()]);
        body.push(geomean_row(
            &c.overall,
            &format!("overall geometric mean ({})", c.overall.rows),
        ));
        out.push_str(&text_table(&header, &body, &[5, 6]));
    }
    let counted: Vec<&CompareRow> = c.rows.iter().filter(|r| !r.counters.is_empty()).collect();
    if !counted.is_empty() {
        out.push_str("\ncounters (cells counted in both runs; lower is usually better):\n");
        let mut body: Vec<Vec<String>> = Vec::new();
        for r in counted {
            for (i, k) in r.counters.iter().enumerate() {
                // The cell is named on its first figure only.
                let mut row = match i {
                    0 => vec![r.benchmark.clone(), params(&r.params), r.placement.clone()],
                    _ => vec![String::new(); 3],
                };
                row.extend([
                    k.metric.clone(),
                    num(k.a),
                    num(k.b),
                    k.ratio.map_or("-".into(), |x| format!("{}x", num(x))),
                ]);
                body.push(row);
            }
        }
        out.push_str(&text_table(
            &[
                "benchmark",
                "params",
                "placement",
                "figure",
                "A",
                "B",
                "B/A",
            ],
            &body,
            &[4, 5, 6],
        ));
    }
    out.push_str(&tail_text(c, |l| format!("{l}\n")));
    out
}

fn geomean_row(g: &GroupMean, label: &str) -> Vec<String> {
    vec![
        label.into(),
        String::new(),
        String::new(),
        g.unit.clone().unwrap_or_default(),
        if g.unit.is_some() {
            "geomean".into()
        } else {
            String::new()
        },
        g.a.map_or(String::new(), num),
        g.b.map_or(String::new(), num),
        g.speedup.map_or("-".into(), |x| {
            crate::fmt::ratio_ci(x, g.ci95_low, g.ci95_high)
        }),
    ]
}

/// `between-run scatter: rows differ by 6.1% beyond their intervals (the machine's
/// run-to-run noise and real differences)`, when the rows scatter at all; `None`
/// otherwise.
pub fn scatter_line(c: &Comparison) -> Option<String> {
    let s = c.between_runs_scatter.filter(|s| *s > 0.0)?;
    Some(format!(
        "between-run scatter: rows differ by {:.1}% beyond their intervals (the \
         machine's run-to-run noise and real differences)",
        100.0 * s
    ))
}

/// How to read a comparison, in one paragraph (the text table's and the terminal's).
pub const LEGEND: &str = "speed-up of B over A: ratio of means, 95% CI with the between-run \
     variance added (Fieller's within the runs alone with --between-runs none), above 1 = \
     B better (for lower-is-better units too); faster/slower: the CI excludes 1 and \
     survives the correction for the number of rows (Benjamini-Hochberg); unsteady: a \
     cell's samples (CV over 25%, drift) or rounds disagree, it was disturbed, or the host moved \
     the CPUs between the runs (rows on two CPUs or more), left out of the means; overall: geometric mean \
     of the steady rows, 95% CI with a whole run's between-run shift added, no difference \
     when it includes 1";

/// The comparison as JSON (`serde` of [`Comparison`]).
pub fn compare_json(c: &Comparison) -> String {
    // Serialising plain data with string keys cannot fail; a failure would be a bug in
    // the types above, and an empty object is a safer answer than a panic.
    serde_json::to_string_pretty(c).unwrap_or_else(|_| "{}".into())
}
