//! Between-run variance in `compare`, on simulated quick suites: the shape of smtlab's
//! quick suite (14 benchmarks of the four groups on four placements, 56 rows, 10
//! samples a cell with the groups' typical spread), measured again and again on a
//! machine whose cells move by a few percent from run to run and whose whole level
//! moves by about 1%. The generator is seeded, so every figure here repeats.

mod common;

use common::{Rng, cell, placement, run};
use smtlab_model::stats::Significance;
use smtlab_model::{Direction, RunResults};
use smtlab_report::between::{BetweenRuns, Choice, Source, repeat_sets};
use smtlab_report::{Comparison, compare_with};

const HI: Direction = Direction::Higher;
const LO: Direction = Direction::Lower;

/// The quick suite's benchmarks: name, group, direction, level, within-cell CV.
const BENCHES: [(&str, &str, Direction, f64, f64); 14] = [
    ("int-ops", "compute", HI, 20.0, 0.015),
    ("fp-ops", "compute", HI, 12.0, 0.015),
    ("branch", "compute", HI, 3.0, 0.02),
    ("mem-read", "memory", HI, 14.0, 0.03),
    ("mem-write", "memory", HI, 9.0, 0.03),
    ("mem-latency", "memory", LO, 90.0, 0.02),
    ("stream-copy", "memory", HI, 11.0, 0.03),
    ("c2c-latency", "threads", LO, 60.0, 0.05),
    ("mutex", "threads", LO, 25.0, 0.04),
    ("spawn", "threads", LO, 9000.0, 0.05),
    ("null-syscall", "os", LO, 80.0, 0.02),
    ("read", "os", LO, 150.0, 0.03),
    ("fork-exit", "os", LO, 90_000.0, 0.04),
    ("ctx-switch", "os", LO, 1500.0, 0.04),
];
const PLACES: [&str; 4] = ["1c1t", "1c2t", "2c1t", "cores"];
const SAMPLES: usize = 10;

/// How the simulated machine moves between runs (relative standard deviations).
#[derive(Clone, Copy)]
struct Machine {
    cell_sd: f64,
    run_sd: f64,
}

/// Realistic drift: each cell a few percent (1.5%), the whole run 1%.
const DRIFTING: Machine = Machine {
    cell_sd: 0.015,
    run_sd: 0.010,
};

/// One run of the suite, `id` its store id; `gain(bench, placement)` makes a cell that
/// much better (above 1 = better, whichever the direction).
fn suite(rng: &mut Rng, id: i64, m: Machine, gain: &dyn Fn(&str, &str) -> f64) -> RunResults {
    // A machine-wide shift makes every cell better or worse alike: rates up, times down.
    let whole = (m.run_sd * rng.normal()).exp();
    let mut cells = Vec::new();
    for (name, group, dir, level, cv) in BENCHES {
        for p in PLACES {
            let moved = level * (m.cell_sd * rng.normal()).exp();
            let better = match dir {
                Direction::Higher => moved * whole * gain(name, p),
                Direction::Lower => moved / (whole * gain(name, p)),
            };
            let samples = rng.around(better, cv, SAMPLES);
            cells.push(cell(name, group, "u", dir, &[], placement(p), &samples));
        }
    }
    let mut r = run(cells, vec![]);
    r.run.id = id;
    r
}

fn same(_: &str, _: &str) -> f64 {
    1.0
}

fn flagged(c: &Comparison) -> usize {
    c.rows
        .iter()
        .filter(|r| r.significance.and_then(Significance::significant) == Some(true))
        .count()
}

fn steady(c: &Comparison) -> usize {
    c.rows.iter().filter(|r| !r.not_comparable()).count()
}

/// A/A pairs of runs, with `stored` earlier runs of the same setup in the store.
fn a_a(seed: u64, stored: usize) -> Comparison {
    let mut rng = Rng::new(seed);
    let earlier: Vec<RunResults> = (0..stored)
        .map(|i| suite(&mut rng, 1 + i as i64, DRIFTING, &same))
        .collect();
    let a = suite(&mut rng, 100, DRIFTING, &same);
    let b = suite(&mut rng, 101, DRIFTING, &same);
    let sets = repeat_sets(&a, &b, &earlier);
    let between = BetweenRuns::choose(Choice::Auto, &a, &b, &sets).unwrap();
    compare_with(&a, &b, between)
}

fn assert_a_a_targets(stored: usize, source: Source) {
    let (mut no_difference, mut rows_flagged, mut rows_steady) = (0, 0, 0);
    for seed in 0..20 {
        let c = a_a(7_000 + seed, stored);
        assert_eq!(c.between_runs.source, source);
        no_difference += usize::from(c.overall.significance == Some(Significance::NotSignificant));
        let (f, s) = (flagged(&c), steady(&c));
        assert!(
            f * 20 <= s,
            "seed {seed}: {f} of {s} steady rows flagged in an A/A pair"
        );
        rows_flagged += f;
        rows_steady += s;
    }
    eprintln!(
        "stored {stored}: {no_difference} of 20 say no difference; {rows_flagged} of \
         {rows_steady} steady rows flagged"
    );
    assert!(
        no_difference >= 19,
        "{no_difference} of 20 A/A headlines say no difference"
    );
    assert!(rows_flagged * 20 <= rows_steady);
}

#[test]
fn a_a_pairs_say_no_difference_with_the_default_floor() {
    assert_a_a_targets(0, Source::DefaultFloor);
}

#[test]
fn a_a_pairs_say_no_difference_with_stored_repeats() {
    assert_a_a_targets(4, Source::StoredRepeats);
}

#[test]
fn without_the_between_run_variance_a_a_pairs_flag_rows() {
    // What compare said before: each cell's own interval only. On the same drifting
    // machine the rows fire far beyond 5%, which is why the variance is added.
    let mut rows_flagged = 0;
    for seed in 0..20 {
        let mut rng = Rng::new(7_000 + seed);
        let a = suite(&mut rng, 100, DRIFTING, &same);
        let b = suite(&mut rng, 101, DRIFTING, &same);
        rows_flagged += flagged(&compare_with(&a, &b, BetweenRuns::none()));
    }
    assert!(
        rows_flagged > 20 * 56 / 10,
        "{rows_flagged} rows flagged in 20 A/A pairs"
    );
}

/// Rows of the memory and os groups made 10% better in B.
fn ten_percent(name: &str, _: &str) -> f64 {
    let shifted = BENCHES
        .iter()
        .any(|b| b.0 == name && (b.1 == "memory" || b.1 == "os"));
    if shifted { 1.10 } else { 1.0 }
}

#[test]
fn a_real_ten_percent_shift_is_found_in_most_of_its_rows() {
    // With 8 stored repeats the whole run's level is known to 8 degrees of freedom;
    // with 4 the t quantile widens enough to find about 76% of the rows. Power is
    // counted over 200 pairs: over 50 it moves by a point or two with the seeds.
    const PAIRS: u64 = 200;
    for stored in [0, 8] {
        let (mut found, mut shifted, mut wrong) = (0, 0, 0);
        for seed in 0..PAIRS {
            let mut rng = Rng::new(9_000 + seed);
            let earlier: Vec<RunResults> = (0..stored)
                .map(|i| suite(&mut rng, 1 + i as i64, DRIFTING, &same))
                .collect();
            let a = suite(&mut rng, 100, DRIFTING, &same);
            let b = suite(&mut rng, 101, DRIFTING, &ten_percent);
            let sets = repeat_sets(&a, &b, &earlier);
            let c = compare_with(
                &a,
                &b,
                BetweenRuns::choose(Choice::Auto, &a, &b, &sets).unwrap(),
            );
            for r in &c.rows {
                let is_shifted = ten_percent(&r.benchmark, &r.placement) > 1.0;
                shifted += usize::from(is_shifted);
                found += usize::from(is_shifted && r.significance == Some(Significance::Faster));
                wrong += usize::from(
                    !is_shifted && r.significance.and_then(Significance::significant) == Some(true),
                );
                wrong += usize::from(r.significance == Some(Significance::Slower));
            }
        }
        eprintln!("stored {stored}: 10% found in {found} of {shifted} rows, {wrong} wrong");
        assert!(
            found * 10 >= shifted * 8,
            "stored {stored}: the 10% shift found in {found} of {shifted} rows"
        );
        // Rows that did not move are rarely called different (the correction's 5%).
        assert!(
            wrong * 20 <= PAIRS as usize * 56,
            "stored {stored}: {wrong} wrong rows"
        );
    }
}

/// SMT on against off: the SMT placements' cells 20-40% better (or 30% worse for the
/// latency of a cache-line hand-off across siblings).
fn smt_on(name: &str, p: &str) -> f64 {
    if p != "1c2t" && p != "cores" {
        return 1.0;
    }
    match name {
        "c2c-latency" => 0.70,
        n if n.starts_with("mem") => 1.20,
        _ => 1.30 + 0.10 * f64::from(u8::from(p == "cores")),
    }
}

#[test]
fn smt_off_against_on_stays_visible() {
    for seed in 0..20 {
        let mut rng = Rng::new(11_000 + seed);
        let a = suite(&mut rng, 100, DRIFTING, &same);
        let mut b = suite(&mut rng, 101, DRIFTING, &smt_on);
        b.run.environment.smt_control = Some("off".into());
        let c = smtlab_report::compare(&a, &b);
        assert_eq!(c.between_runs.source, Source::DefaultFloor);
        for r in &c.rows {
            let g = smt_on(&r.benchmark, &r.placement);
            let want = if g > 1.0 {
                Some(Significance::Faster)
            } else if g < 1.0 {
                Some(Significance::Slower)
            } else {
                continue;
            };
            assert_eq!(
                r.significance,
                want,
                "seed {seed}: {} on {}: {}",
                r.benchmark,
                r.placement,
                r.speedup_text()
            );
        }
        assert_eq!(c.overall.significance, Some(Significance::Faster));
    }
}

#[test]
fn stored_repeats_measure_the_machine() {
    // A noisier machine than the default: the repeats find it, and the estimate's
    // degrees of freedom say how well.
    let noisy = Machine {
        cell_sd: 0.04,
        run_sd: 0.02,
    };
    let mut rng = Rng::new(5);
    let runs: Vec<RunResults> = (0..8)
        .map(|i| suite(&mut rng, i + 1, noisy, &same))
        .collect();
    let refs: Vec<&RunResults> = runs.iter().collect();
    let est = BetweenRuns::from_repeats(&[refs]).unwrap();
    assert_eq!(est.source, Source::StoredRepeats);
    assert_eq!(est.run_df, Some(7.0));
    for (g, sd) in &est.cell_sd {
        assert!((0.03..0.05).contains(sd), "{g}: {sd}");
    }
    assert!((0.01..0.035).contains(&est.run_sd), "run {}", est.run_sd);
    assert!(
        est.line().contains("stored repeats of this setup"),
        "{}",
        est.line()
    );
    assert!(est.line().contains("runs 1, 2, 3"), "{}", est.line());
    // A machine that does not move between runs gives (near) nothing.
    let still = Machine {
        cell_sd: 0.0,
        run_sd: 0.0,
    };
    let runs: Vec<RunResults> = (0..6)
        .map(|i| suite(&mut rng, i + 1, still, &same))
        .collect();
    let est = BetweenRuns::from_repeats(&[runs.iter().collect()]).unwrap();
    // The whole run's figure is never below the floor's: a few runs can read near
    // nothing by chance.
    assert_eq!(est.run_sd, smtlab_report::between::DEFAULT_RUN_SD);
    assert!(est.cell_sd.values().all(|s| *s < 0.01), "{:?}", est.cell_sd);
}

#[test]
fn repeat_sets_never_hold_a_and_b_together() {
    let mut rng = Rng::new(3);
    let a = suite(&mut rng, 10, DRIFTING, &same);
    let b = suite(&mut rng, 11, DRIFTING, &same);
    let c = suite(&mut rng, 12, DRIFTING, &same);
    let mut other_kernel = suite(&mut rng, 13, DRIFTING, &same);
    other_kernel.run.environment.kernel = Some("6.13.0".into());
    let stored = vec![a.clone(), b.clone(), c.clone(), other_kernel.clone()];
    // One setup: A with C; B (and A again, stored) left out.
    let sets = repeat_sets(&a, &b, &stored);
    let ids: Vec<Vec<i64>> = sets
        .iter()
        .map(|s| s.iter().map(|r| r.run.id).collect())
        .collect();
    assert_eq!(ids, vec![vec![10, 12]]);
    // Two setups (a kernel each): each run with its own repeats.
    let sets = repeat_sets(&a, &other_kernel, &stored);
    let ids: Vec<Vec<i64>> = sets
        .iter()
        .map(|s| s.iter().map(|r| r.run.id).collect())
        .collect();
    assert_eq!(ids, vec![vec![10, 11, 12]]);
    // Nothing stored: no set, and asking for the store says why in one line.
    assert!(repeat_sets(&a, &b, &[]).is_empty());
    let err = BetweenRuns::choose(Choice::Store, &a, &b, &[]).unwrap_err();
    assert!(
        err.to_string().starts_with("--between-runs store: "),
        "{err}"
    );
    assert!(!err.to_string().contains('\n'));
}

#[test]
fn rounds_stand_in_when_nothing_is_stored() {
    let mut rng = Rng::new(21);
    let mut a = suite(&mut rng, 1, DRIFTING, &same);
    let b = suite(&mut rng, 2, DRIFTING, &same);
    // Each of A's cells measured in 3 rounds whose levels move 3% around the cell's.
    for c in &mut a.cells {
        let m = c.result.summary.mean;
        let cv = c.result.summary.stddev / m;
        c.result.rounds = (0..3)
            .map(|_| {
                let level = m * (0.03 * rng.normal()).exp();
                smtlab_model::Round {
                    summary: smtlab_model::stats::summarize(&rng.around(level, cv, SAMPLES))
                        .unwrap(),
                    converged: true,
                    iterations: 1000,
                    wall_ns: 1,
                }
            })
            .collect();
    }
    let est = BetweenRuns::choose(Choice::Auto, &a, &b, &[]).unwrap();
    assert_eq!(est.source, Source::Rounds);
    // Every cell counts, also those whose rounds disagree (which makes them unsteady
    // in the row tests): leaving them out would keep only the rounds that agree.
    assert!(
        est.basis.starts_with("56 cells measured in rounds"),
        "{}",
        est.basis
    );
    let pooled = est.cell_sd.values().sum::<f64>() / est.cell_sd.len() as f64;
    assert!((0.015..0.045).contains(&pooled), "{:?}", est.cell_sd);
    assert_eq!(est.run_sd, smtlab_report::between::DEFAULT_RUN_SD);
    assert!(
        est.line().contains("the runs' own rounds"),
        "{}",
        est.line()
    );
    // Without rounds, asking for them is one line.
    let err = BetweenRuns::choose(Choice::Rounds, &b, &b, &[]).unwrap_err();
    assert!(err.to_string().starts_with("--between-runs rounds: "));
}

#[test]
fn every_output_names_the_estimate() {
    let mut rng = Rng::new(1);
    let a = suite(&mut rng, 1, DRIFTING, &same);
    let b = suite(&mut rng, 2, DRIFTING, &same);
    let c = smtlab_report::compare(&a, &b);
    let text = smtlab_report::compare_table(&c);
    assert!(
        text.contains("between runs (default floor (not measured)): "),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&smtlab_report::compare_json(&c)).unwrap();
    assert_eq!(json["between_runs"]["source"], "default_floor");
    assert!(json["rows"][0]["interval_with_between"]["ci95_low"].is_number());
    let page = smtlab_report::compare_html(&a, &b, &c);
    assert!(page.contains("id=\"between-runs\""));
    assert!(page.contains("default floor (not measured)"));
    let md = smtlab_report::compare_markdown(&a, &b, &c);
    assert!(md.contains("default floor (not measured)"));
    // With --between-runs none the rows keep their within-run intervals.
    let none = compare_with(&a, &b, BetweenRuns::none());
    assert!(none.rows.iter().all(|r| r.interval_with_between.is_none()));
    assert!(smtlab_report::compare_table(&none).contains("within-run intervals only"));
}

#[test]
fn repeats_read_back_from_a_store_are_measured() {
    // Runs stored and read back (as `compare` reads them) keep what the estimate needs:
    // their ids, environment, plan and every cell's samples.
    let dir = tempfile::tempdir().unwrap();
    let mut store = smtlab_store::Store::open(dir.path().join("r.db")).unwrap();
    let mut rng = Rng::new(33);
    let ids: Vec<i64> = (0..4)
        .map(|i| {
            store
                .import_run(&suite(&mut rng, i + 1, DRIFTING, &same))
                .unwrap()
        })
        .collect();
    let runs: Vec<RunResults> = ids.iter().map(|id| store.load_run(*id).unwrap()).collect();
    let (a, b) = (&runs[2], &runs[3]);
    let sets = repeat_sets(a, b, &runs);
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].len(), 3, "A and the two runs before it; B left out");
    let est = BetweenRuns::choose(Choice::Auto, a, b, &sets).unwrap();
    assert_eq!(est.source, Source::StoredRepeats);
    assert_eq!(est.run_df, Some(2.0));
}
