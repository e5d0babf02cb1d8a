//! How much two runs of the same setup differ by, beyond each cell's own interval: the
//! between-run variance that `compare` adds to every row's test and to its headline.
//!
//! A cell's 95% interval says how well one run pinned its level down. A second run of
//! the same setup lands elsewhere by more than that: the instance is new (where its
//! memory landed, which cache sets it uses), the machine's speed and other load differ.
//! Two parts are told apart, on the log scale (relative standard deviations):
//! * `cell_sd[group]`: what one cell's level moves by from run to run on its own, by
//!   benchmark group (compute, memory, threads, os, a server workload's group);
//! * `run_sd`: what every cell of a run moves by together (a machine-wide shift).
//!
//! A row's log speed-up between two runs then varies by `2 (cell_sd^2 + run_sd^2)`
//! beyond its own error, and the mean of many rows' logs (the headline's geometric
//! mean) by `2 run_sd^2` beyond the rows' scatter, which already holds the cells' own
//! moves. The estimate comes from, in this order of preference ([`Choice::Auto`]):
//! 1. **stored repeats** ([`BetweenRuns::from_repeats`]): runs in the store of the
//!    same setup as A or B (same environment as `compare` lists it, same plan of cells),
//!    A and B never both in one set. A two-way layout (cells x runs) of the steady
//!    cells' log means gives each run's common level (`run_sd`, one degree of freedom
//!    per run beyond the first; never below the default floor's, since a few runs can
//!    read near nothing by chance) and each cell's residual (`cell_sd` by group), each
//!    less what the cells' own errors explain (method of moments, floored at 0). The
//!    logs are signed so that higher is better: a slower machine lowers rates and
//!    raises times alike.
//! 2. **rounds** ([`BetweenRuns::from_rounds`]): cells measured in several rounds
//!    (`--repeat`), each from a fresh instance; the scatter of a cell's round means
//!    beyond their own errors stands in for `cell_sd`. Rounds of one run cannot see a
//!    machine-wide shift between runs, so `run_sd` is the default's.
//! 3. **the default floor** ([`BetweenRuns::default_floor`]): fixed figures per group,
//!    labelled as such wherever they are used. The samples of one instance are never
//!    used: they share its memory and its state, so they would understate.
//!
//! A measured estimate carries its degrees of freedom into Student's t (a variance
//! estimated from two runs is rough, and the interval widens accordingly); the default
//! is taken as known.

use std::collections::BTreeMap;

use serde::Serialize;
use smtlab_model::stats::Extra;
use smtlab_model::unit::plural;
use smtlab_model::{CellRecord, Direction, RunResults};

/// The default relative standard deviation of one cell's level between two runs, by
/// group: a cell whose samples agree to 1% on a quiet machine moves by about this much
/// when measured again from a fresh process.
pub const DEFAULT_CELL_SD: [(&str, f64); 4] = [
    ("compute", 0.010),
    ("memory", 0.015),
    ("threads", 0.020),
    ("os", 0.015),
];

/// The default for a group not in [`DEFAULT_CELL_SD`] (the server workloads, whose
/// clients and kernel network paths add their own variation).
pub const DEFAULT_OTHER_CELL_SD: f64 = 0.025;

/// The default relative standard deviation of a whole run's level (a machine-wide
/// shift: frequency, other load).
pub const DEFAULT_RUN_SD: f64 = 0.010;

/// Which estimate the user asks for (`compare --between-runs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Stored repeats, else rounds, else the default floor.
    Auto,
    Store,
    Rounds,
    Floor,
    /// No between-run variance: within-run intervals only (how `compare` read before).
    None,
}

smtlab_model::named_enum! {
    fn words;
    /// Where the between-run variance in use came from; `words`: how outputs name it.
    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Source {
        StoredRepeats = "stored repeats of this setup",
        Rounds = "the runs' own rounds",
        DefaultFloor = "default floor (not measured)",
        None = "none (within-run intervals only)",
    }
}

/// The between-run variance `compare` uses (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BetweenRuns {
    pub source: Source,
    /// Relative standard deviation of one cell's level between runs, by group.
    pub cell_sd: BTreeMap<String, f64>,
    /// For a group missing from `cell_sd`.
    pub cell_sd_other: f64,
    /// Relative standard deviation of a whole run's level.
    pub run_sd: f64,
    /// Degrees of freedom of `cell_sd`; `None` when taken as known (the default).
    pub cell_df: Option<f64>,
    /// Degrees of freedom of `run_sd`; `None` when taken as known.
    pub run_df: Option<f64>,
    /// What the estimate rests on, in words.
    pub basis: String,
}

/// Why the estimate asked for cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NoEstimate {
    #[error(
        "--between-runs store: the store holds no second run of A's or B's setup (same host, environment and cells); run the same command again, or use --between-runs auto"
    )]
    NoRepeats,
    #[error(
        "--between-runs rounds: no steady cell of A or B has two rounds or more; measure with --repeat 2 or more, or use --between-runs auto"
    )]
    NoRounds,
}

impl BetweenRuns {
    /// The documented defaults (see [`DEFAULT_CELL_SD`]).
    pub fn default_floor() -> Self {
        BetweenRuns {
            source: Source::DefaultFloor,
            cell_sd: DEFAULT_CELL_SD
                .iter()
                .map(|(g, s)| (g.to_string(), *s))
                .collect(),
            cell_sd_other: DEFAULT_OTHER_CELL_SD,
            run_sd: DEFAULT_RUN_SD,
            cell_df: None,
            run_df: None,
            basis: "no repeated runs of this setup and no rounds to measure it from".into(),
        }
    }

    /// No between-run variance at all.
    pub fn none() -> Self {
        BetweenRuns {
            source: Source::None,
            cell_sd: BTreeMap::new(),
            cell_sd_other: 0.0,
            run_sd: 0.0,
            basis: "asked for with --between-runs none".into(),
            ..Self::default_floor()
        }
    }

    /// The estimate `choice` asks for, from A, B and `repeats` ([`repeat_sets`] of the
    /// stored runs; empty when A and B are files or the store holds no repeats).
    pub fn choose(
        choice: Choice,
        a: &RunResults,
        b: &RunResults,
        repeats: &[Vec<&RunResults>],
    ) -> Result<Self, NoEstimate> {
        match choice {
            Choice::Auto => Ok(Self::from_repeats(repeats)
                .or_else(|| Self::from_rounds(a, b))
                .unwrap_or_else(Self::default_floor)),
            Choice::Store => Self::from_repeats(repeats).ok_or(NoEstimate::NoRepeats),
            Choice::Rounds => Self::from_rounds(a, b).ok_or(NoEstimate::NoRounds),
            Choice::Floor => Ok(Self::default_floor()),
            Choice::None => Ok(Self::none()),
        }
    }

    /// A cell's standard deviation for `group`: the estimate's, else the default
    /// floor's for that group (a group the repeats or rounds did not measure).
    pub fn cell_sd_of(&self, group: &str) -> f64 {
        if self.source == Source::None {
            return 0.0;
        }
        self.cell_sd
            .get(group)
            .copied()
            .or_else(|| {
                DEFAULT_CELL_SD
                    .iter()
                    .find(|(g, _)| *g == group)
                    .map(|(_, s)| *s)
            })
            .unwrap_or(self.cell_sd_other)
    }

    /// What a row's log speed-up varies by between two runs beyond its own error.
    pub fn row_extra(&self, group: &str) -> Extra {
        let (c, r) = (self.cell_sd_of(group), self.run_sd);
        let variance = 2.0 * (c * c + r * r);
        // The larger part decides how well the sum is known.
        let df = if c * c >= r * r {
            self.cell_df
        } else {
            self.run_df
        };
        Extra { variance, df }
    }

    /// What the mean of many rows' log speed-ups varies by beyond their scatter.
    pub fn headline_extra(&self) -> Extra {
        Extra {
            variance: 2.0 * self.run_sd * self.run_sd,
            df: self.run_df,
        }
    }

    /// `between runs (default floor (not measured)): a cell moves by 1.0-2.5% (compute
    /// 1.0%, ...), a whole run by 1.0%; in every row's test and the overall interval.
    /// Basis: ...`
    pub fn line(&self) -> String {
        if self.source == Source::None {
            return format!(
                "between runs: {}: rows and the overall interval hold each cell's own \
                 interval only",
                self.source.words()
            );
        }
        let groups: Vec<String> = self
            .cell_sd
            .iter()
            .map(|(g, s)| format!("{g} {:.1}%", 100.0 * s))
            .collect();
        format!(
            "between runs ({}): a cell's level moves by {}{} and a whole run's by {:.1}% \
             (relative SD per run), added to every row's test and to the overall \
             interval; from {}",
            self.source.words(),
            groups.join(", "),
            if self.source == Source::DefaultFloor {
                format!(", others {:.1}%", 100.0 * self.cell_sd_other)
            } else {
                String::new()
            },
            100.0 * self.run_sd,
            self.basis
        )
    }

    /// The estimate from sets of repeated runs of one setup each (see the module
    /// documentation); `None` when no set has two runs sharing two steady cells.
    pub fn from_repeats(sets: &[Vec<&RunResults>]) -> Option<Self> {
        let mut acc = TwoWay::default();
        for set in sets.iter().filter(|s| s.len() >= 2) {
            acc.add(set);
        }
        if acc.run_df == 0 {
            return None;
        }
        let ids: Vec<String> = acc.runs.iter().map(|id| id.to_string()).collect();
        Some(BetweenRuns {
            source: Source::StoredRepeats,
            cell_sd: sd_per_group(&acc.cell),
            // Never below the floor: the whole run's level rests on one degree of
            // freedom per run, and a few runs read near nothing by chance (two runs of
            // a 2-vCPU guest read 0.0% where twenty read 2.5%).
            run_sd: (acc.common / acc.run_df as f64)
                .max(0.0)
                .sqrt()
                .max(DEFAULT_RUN_SD),
            cell_df: Some(acc.cell_df as f64),
            run_df: Some(acc.run_df as f64),
            basis: format!(
                "runs {} ({}; degrees of freedom: {} for the whole run's level, {} for \
                 a cell's); a group they lack takes the default floor's figure",
                ids.join(", "),
                plural(acc.sets, "set"),
                acc.run_df,
                acc.cell_df,
            ),
            ..Self::default_floor()
        })
    }

    /// The estimate from the rounds of A's and B's cells (see the module documentation);
    /// `None` when no steady cell has two rounds.
    pub fn from_rounds(a: &RunResults, b: &RunResults) -> Option<Self> {
        let mut per_group: BTreeMap<String, (f64, usize)> = BTreeMap::new();
        let mut cells = 0usize;
        // A run compared with itself counts once.
        let itself = a.run.id == b.run.id && a.run.started_unix_s == b.run.started_unix_s;
        let b_cells = if itself { &[][..] } else { &b.cells[..] };
        for c in a.cells.iter().chain(b_cells) {
            let Some((excess, df)) = round_excess(c) else {
                continue;
            };
            let e = per_group.entry(c.group.clone()).or_default();
            e.0 += excess * df as f64;
            e.1 += df;
            cells += 1;
        }
        if cells == 0 {
            return None;
        }
        let floor = Self::default_floor();
        let df: usize = per_group.values().map(|p| p.1).sum();
        Some(BetweenRuns {
            source: Source::Rounds,
            cell_sd: sd_per_group(&per_group),
            cell_df: Some(df as f64),
            basis: format!(
                "{} measured in rounds (fresh instances); the whole run's \
                 level, which rounds of one run cannot see, is the default {:.1}%, and a \
                 group without rounds takes the default floor's figure",
                plural(cells, "cell"),
                100.0 * floor.run_sd,
            ),
            ..floor
        })
    }
}

/// Each group's standard deviation from its summed variance and count (a negative
/// estimate, noise larger than the spread, is none).
fn sd_per_group(sums: &BTreeMap<String, (f64, usize)>) -> BTreeMap<String, f64> {
    let sd =
        |(g, (sum, n)): (&String, &(f64, usize))| (g.clone(), (sum / *n as f64).max(0.0).sqrt());
    sums.iter().map(sd).collect()
}

/// A cell's log mean, signed so that higher is better (a time's log negated), and its
/// squared relative standard error, when it is steady and not disturbed (nothing holds
/// it back from the row tests: `CellResult::hold_back_reason`) with a positive mean and
/// two samples or more. A disturbed cell is never tested, so its move (a cell measured
/// while a host had put the vCPUs apart reads 2-8x) must not widen the rows that are.
/// The sign matters for the runs' common level: a machine that runs slower lowers a rate
/// and raises a time, and unsigned the two would cancel in the mean over cells (on
/// twenty A/A runs of a 2-vCPU guest whose levels moved by 2.6%, unsigned logs read
/// 1.1%).
fn log_level(c: &CellRecord) -> Option<(f64, f64)> {
    let s = &c.result.summary;
    if c.result.hold_back_reason().is_some() || !s.mean.is_finite() {
        return None;
    }
    let (y, v) = level(s)?;
    Some(match c.direction {
        Direction::Higher => (y, v),
        Direction::Lower => (-y, v),
    })
}

/// A summary's log mean and its squared relative standard error; `None` below two
/// samples or for a mean that is not positive.
fn level(s: &smtlab_model::Summary) -> Option<(f64, f64)> {
    (s.n >= 2 && s.mean > 0.0).then(|| (s.mean.ln(), (s.stddev / s.mean).powi(2) / s.n as f64))
}

/// The variance of a cell's round means (logs) beyond their own errors, and its degrees
/// of freedom (rounds less one). A cell whose rounds disagree counts too (it is unsteady
/// in the row tests for that reason): leaving it out would keep only the rounds that
/// agree and understate the variance.
fn round_excess(c: &CellRecord) -> Option<(f64, usize)> {
    let rounds = &c.result.rounds;
    let levels: Vec<(f64, f64)> = rounds.iter().filter_map(|r| level(&r.summary)).collect();
    if levels.len() < 2 {
        return None;
    }
    let ys: Vec<f64> = levels.iter().map(|l| l.0).collect();
    let sd = smtlab_model::stats::stddev(&ys)?;
    let own = levels.iter().map(|l| l.1).sum::<f64>() / levels.len() as f64;
    Some((sd * sd - own, levels.len() - 1))
}

/// Sums of the two-way layout of repeated runs (see [`BetweenRuns::from_repeats`]).
#[derive(Default)]
struct TwoWay {
    /// Per group: the sum of the cells' residual variance less their own, and how many.
    cell: BTreeMap<String, (f64, usize)>,
    cell_df: usize,
    /// The sum over sets of `(K - 1)` times the run levels' variance less the cells'.
    common: f64,
    run_df: usize,
    sets: usize,
    runs: Vec<i64>,
}

impl TwoWay {
    fn add(&mut self, set: &[&RunResults]) {
        let k = set.len();
        // The cells steady in every run of the set, in the first run's order.
        let rows: Vec<(&CellRecord, Vec<(f64, f64)>)> = set[0]
            .cells
            .iter()
            .filter_map(|c| {
                let levels: Option<Vec<(f64, f64)>> = set
                    .iter()
                    .map(|r| {
                        r.cells
                            .iter()
                            .find(|o| o.key() == c.key())
                            .and_then(log_level)
                    })
                    .collect();
                Some((c, levels?))
            })
            .collect();
        let n = rows.len();
        if n < 2 {
            return;
        }
        let row_mean: Vec<f64> = rows
            .iter()
            .map(|(_, l)| l.iter().map(|x| x.0).sum::<f64>() / k as f64)
            .collect();
        let run_level: Vec<f64> = (0..k)
            .map(|j| (0..n).map(|i| rows[i].1[j].0 - row_mean[i]).sum::<f64>() / n as f64)
            .collect();
        // A residual of a two-way layout has (1 - 1/K)(1 - 1/n) of the variance.
        let scale = (k as f64 / (k - 1) as f64) * (n as f64 / (n - 1) as f64);
        let mut noise = 0.0;
        for (i, (c, levels)) in rows.iter().enumerate() {
            for (j, (y, v)) in levels.iter().enumerate() {
                let r = y - row_mean[i] - run_level[j];
                let e = self.cell.entry(c.group.clone()).or_default();
                e.0 += r * r * scale - v;
                e.1 += 1;
                noise += r * r * scale;
            }
        }
        // A run's level averages n cells' moves and errors: (1/n^2) sum over cells of
        // their variance, which the residuals estimate (noise / K per cell and run).
        let level_noise = noise / k as f64 / (n * n) as f64;
        let level_var = run_level.iter().map(|c| c * c).sum::<f64>() / (k - 1) as f64;
        self.common += (k - 1) as f64 * (level_var - level_noise);
        self.run_df += k - 1;
        self.cell_df += (k - 1) * (n - 1);
        self.sets += 1;
        self.runs.extend(set.iter().map(|r| r.run.id));
    }
}

/// Whether `x` and `y` are runs of one setup: the same environment facts as `compare`
/// lists them (host, CPU, topology, kernel, microcode, SMT, governor, boost, clock
/// source, virtualisation, smtlab's version) and the same plan of cells.
pub fn same_setup(x: &RunResults, y: &RunResults) -> bool {
    if !crate::compare_sides::env_diffs(&x.run, &y.run).is_empty() {
        return false;
    }
    let keys = |r: &RunResults| {
        let mut k: Vec<_> = r.run.plan.clone();
        k.sort();
        k
    };
    keys(x) == keys(y)
}

/// The sets of repeated runs the estimate may use: A with the `stored` runs of its
/// setup, and B with those of its own when it is another setup. A and B are never in
/// one set, so that the difference under test is not taken for noise: when they are of
/// one setup, B is left out. A set needs two runs.
pub fn repeat_sets<'a>(
    a: &'a RunResults,
    b: &'a RunResults,
    stored: &'a [RunResults],
) -> Vec<Vec<&'a RunResults>> {
    let is = |r: &RunResults, x: &RunResults| r.run.id > 0 && r.run.id == x.run.id;
    let others = || stored.iter().filter(|r| !is(r, a) && !is(r, b));
    let mut set_a: Vec<&RunResults> = vec![a];
    set_a.extend(others().filter(|r| same_setup(r, a)));
    let mut sets = vec![set_a];
    if !same_setup(a, b) {
        let mut set_b: Vec<&RunResults> = vec![b];
        set_b.extend(others().filter(|r| same_setup(r, b)));
        sets.push(set_b);
    }
    sets.retain(|s| s.len() >= 2);
    sets
}
