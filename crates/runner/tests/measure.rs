//! The runner driven by a fake clock and fake instances whose sample times are known,
//! so calibration, convergence, budgets and values are checked exactly.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use smtlab_bench::{BenchError, Instance, RawSample};
use smtlab_model::{BenchInfo, Direction, ValueKind};
use smtlab_runner::{
    CellResult, Clock, Event, FakeClock, NoopObserver, Overheads, Phase, RunConfig, RunError,
    StopReason, from_fn, measure, stats,
};

const MS: u64 = 1_000_000;

type ElapsedFn = Box<dyn FnMut(u64, u64) -> u64 + Send>;

/// A benchmark whose sample time is whatever `elapsed(iterations, call)` says; it
/// advances the shared fake clock by that much, as real work would.
struct Fake {
    clock: Arc<FakeClock>,
    elapsed: ElapsedFn,
    calls: u64,
    work_per_iter: f64,
    overhead_ns: u64,
    overhead_basis: Option<Overheads>,
    /// `cpu_ns = elapsed * cpu_factor` when set.
    cpu_factor: Option<f64>,
    fixed: Option<u64>,
    fail_on_call: Option<u64>,
    requested: Arc<Mutex<Vec<u64>>>,
    /// Wall time each sample spends outside its timed section.
    untimed_ns: u64,
    /// How much of `untimed_ns` it reports as waiting on work not its own.
    waited_ns: u64,
}

impl Fake {
    fn new(clock: &Arc<FakeClock>, elapsed: impl FnMut(u64, u64) -> u64 + Send + 'static) -> Self {
        Self {
            clock: Arc::clone(clock),
            elapsed: Box::new(elapsed),
            calls: 0,
            work_per_iter: 1.0,
            overhead_ns: 0,
            overhead_basis: None,
            cpu_factor: None,
            fixed: None,
            fail_on_call: None,
            requested: Arc::default(),
            untimed_ns: 0,
            waited_ns: 0,
        }
    }

    /// Exactly `ns_per_iter` per iteration.
    fn linear(clock: &Arc<FakeClock>, ns_per_iter: u64) -> Self {
        Self::new(clock, move |n, _| n * ns_per_iter)
    }

    /// `ns_per_iter` per iteration, each sample off by up to `noise` (a fraction) from a
    /// deterministic pseudo-random sequence.
    fn noisy(clock: &Arc<FakeClock>, ns_per_iter: u64, noise: f64, seed: u64) -> Self {
        let mut state = seed.max(1);
        Self::new(clock, move |n, _| {
            // xorshift64: deterministic, good enough to look like jitter.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            let factor = 1.0 + noise * (2.0 * u - 1.0);
            ((n * ns_per_iter) as f64 * factor).round().max(1.0) as u64
        })
    }
}

impl Instance for Fake {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let call = self.calls;
        self.calls += 1;
        self.requested.lock().unwrap().push(iterations);
        if self.fail_on_call == Some(call) {
            return Err(BenchError::Check {
                bench: "fake".into(),
                reason: format!("checksum mismatch in call {call}"),
            });
        }
        let elapsed_ns = (self.elapsed)(iterations, call);
        self.clock.advance(elapsed_ns + self.untimed_ns);
        Ok(RawSample {
            elapsed_ns,
            work: iterations as f64 * self.work_per_iter,
            overhead_ns: self.overhead_ns,
            cpu_ns: self.cpu_factor.map(|f| (elapsed_ns as f64 * f) as u64),
            start_spread_ns: Some(10 * (call % 4)),
            cpus: vec![0, 4],
            metrics: BTreeMap::from([("calls".to_string(), call as f64)]),
            series: BTreeMap::from([("event_ns".to_string(), vec![call as f64, 1.0])]),
            overhead_basis: self.overhead_basis,
            waited_ns: self.waited_ns,
        })
    }

    fn fixed_iterations(&self) -> Option<u64> {
        self.fixed
    }
}

fn info(kind: ValueKind) -> BenchInfo {
    BenchInfo {
        name: "fake".into(),
        group: "test".into(),
        unit: "ns".into(),
        direction: Direction::Lower,
        value_kind: kind,
        description: "a fake".into(),
        origin: "tests".into(),
        params: Vec::new(),
        main_param: None,
        report: Default::default(),
    }
}

/// Defaults, with the overheads given so no real-time loop runs against the fake.
fn cfg() -> RunConfig {
    RunConfig {
        known_overheads: Some(Overheads {
            clock_cost_ns: 20.0,
            loop_cost_ns_per_iter: 0.5,
        }),
        ..RunConfig::default()
    }
}

fn run(fake: &mut Fake, kind: ValueKind, cfg: &RunConfig, clock: &FakeClock) -> CellResult {
    measure(fake, &info(kind), cfg, clock, &mut NoopObserver).unwrap()
}

/// The error measuring a time-per-op benchmark ends with.
fn run_err(fake: &mut Fake, cfg: &RunConfig, clock: &FakeClock) -> RunError {
    measure(
        fake,
        &info(ValueKind::TimePerOp),
        cfg,
        clock,
        &mut NoopObserver,
    )
    .unwrap_err()
}

#[test]
fn exact_instance_calibrates_to_target_over_cost() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::linear(&clock, 100);
    let requested = Arc::clone(&fake.requested);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);

    // 10 ms / 100 ns.
    assert_eq!(r.iterations, 100_000);
    // The search, two more trials at the chosen count, three at twice the count.
    let tried: Vec<u64> = r.calibration.tried.iter().map(|s| s.iterations).collect();
    assert_eq!(
        tried,
        [
            1, 10, 100, 1_000, 10_000, 100_000, 100_000, 100_000, 200_000, 200_000, 200_000
        ]
    );
    assert!(!r.calibration.fixed);
    assert_eq!(r.calibration.linear, Some(true));
    assert_eq!(r.calibration.linearity_ratio, Some(1.0));
    // 50 ms of warm-up at 10 ms a sample.
    assert_eq!(r.warmup.samples, 5);
    assert_eq!(r.warmup.elapsed_ns, 50 * MS);
    // No noise: the CI is zero as soon as it can be computed.
    assert!(r.converged);
    assert_eq!(r.stop_reason, StopReason::Converged);
    assert_eq!(r.samples.len(), 3);
    assert_eq!(r.summary.n, 3);
    assert_eq!(r.summary.mean, 100.0);
    assert_eq!(r.summary.ci95_half_width, 0.0);
    assert_eq!((r.clock_cost_ns, r.loop_cost_ns_per_iter), (20.0, 0.5));
    assert!(r.samples.iter().all(|s| s.iterations == 100_000));
    // Calibration (8) + linearity (3, at 2n) + warm-up (5) + samples (3).
    let requested = requested.lock().unwrap();
    assert_eq!(requested.len(), 19);
    assert_eq!(requested[8], 200_000);
    // Wall time on the fake clock is exactly the work done.
    let work_ns: u64 = requested.iter().map(|n| n * 100).sum();
    assert_eq!(r.wall_ns, work_ns);
}

#[test]
fn events_arrive_in_order() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::linear(&clock, 100);
    let mut log = Vec::new();
    let mut obs = from_fn(|e: &Event<'_>| {
        log.push(match e {
            Event::CellStarted {
                info,
                fixed_iterations,
                ..
            } => format!("started {} {fixed_iterations:?}", info.name),
            Event::Calibrated {
                iterations, linear, ..
            } => format!("calibrated {iterations} {linear:?}"),
            Event::WarmupDone {
                samples,
                elapsed_ns,
            } => format!("warmup {samples} {elapsed_ns}"),
            Event::Sample {
                index,
                value,
                ci95_rel,
                ..
            } => format!("sample {index} {value} {ci95_rel:?}"),
            Event::CellFinished { result } => format!("finished {}", result.samples.len()),
        });
        ControlFlow::Continue(())
    });
    measure(
        &mut fake,
        &info(ValueKind::TimePerOp),
        &cfg(),
        &*clock,
        &mut obs,
    )
    .unwrap();
    assert_eq!(
        log,
        [
            "started fake None",
            "calibrated 100000 Some(true)",
            "warmup 5 50000000",
            "sample 0 100 None",
            "sample 1 100 Some(0.0)",
            "sample 2 100 Some(0.0)",
            "finished 3",
        ]
    );
}

#[test]
fn observer_can_stop_a_cell() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::noisy(&clock, 100, 0.5, 7);
    let mut obs = from_fn(|e: &Event<'_>| match e {
        Event::Sample { index: 1, .. } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    });
    let err = measure(
        &mut fake,
        &info(ValueKind::TimePerOp),
        &cfg(),
        &*clock,
        &mut obs,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Stopped {
                phase: Phase::Sample(1),
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn slightly_noisy_instance_converges() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::noisy(&clock, 100, 0.01, 42);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    assert!(r.converged);
    assert_eq!(r.stop_reason, StopReason::Converged);
    assert!((3..=30).contains(&r.samples.len()));
    assert!(r.summary.ci95_rel <= 0.02, "{:?}", r.summary);
    assert!((r.summary.mean - 100.0).abs() < 2.0, "{:?}", r.summary);
    assert!(r.summary.ci95_half_width > 0.0);
}

#[test]
fn very_noisy_instance_stops_at_max_samples_unconverged() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::noisy(&clock, 100, 0.6, 3);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    assert!(!r.converged);
    assert_eq!(r.stop_reason, StopReason::MaxSamples);
    assert_eq!(r.samples.len(), 30);
    assert!(r.summary.ci95_rel > 0.02);
    // Nothing unusual about the budget: well inside the 5 s.
    assert!(r.wall_ns < 2_000 * MS);
}

#[test]
fn nonlinear_instance_is_flagged() {
    let clock = Arc::new(FakeClock::default());
    // Quadratic: doubling the iterations quadruples the time.
    let mut fake = Fake::new(&clock, |n, _| n * n);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    assert_eq!(r.calibration.linear, Some(false));
    let ratio = r.calibration.linearity_ratio.unwrap();
    assert!((ratio - 2.0).abs() < 0.01, "{ratio}");
    // Calibration still lands near the target: n^2 ~ 10 ms.
    let chosen = r
        .calibration
        .tried
        .iter()
        .rfind(|s| s.iterations == r.iterations);
    let t = chosen.unwrap().elapsed_ns as f64 / (10 * MS) as f64;
    assert!((0.75..=1.5).contains(&t), "{t}");
}

#[test]
fn time_budget_is_honoured_on_the_fake_clock() {
    let clock = Arc::new(FakeClock::default());
    // 100 ms samples that never converge.
    let mut fake = Fake::noisy(&clock, 100 * MS, 0.5, 11);
    fake.fixed = Some(1);
    let cfg = RunConfig {
        max_cell_ns: 1_000 * MS,
        ..cfg()
    };
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg, &clock);
    assert_eq!(r.stop_reason, StopReason::TimeBudget);
    assert!(!r.converged);
    // The next sample is predicted from the last one, which can be up to 50% shorter
    // than nominal while the next is up to 50% longer: at most one nominal sample over.
    assert!(r.wall_ns <= 1_100 * MS, "{}", r.wall_ns);
    assert!(
        r.samples.len() >= 3 && r.samples.len() < 30,
        "{}",
        r.samples.len()
    );
    assert_eq!(r.warmup.samples, 1);
}

#[test]
fn very_long_iterations_take_the_long_sample_minimum() {
    let clock = Arc::new(FakeClock::default());
    // One iteration takes 3 s: calibration stays at 1 (its other trials and the
    // linearity check would not fit the budget), one warm-up, then the minimum of five
    // samples for long samples, past the 5 s budget, so the cell has an interval.
    let mut fake = Fake::linear(&clock, 3_000 * MS);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    assert_eq!(r.iterations, 1);
    assert_eq!(r.calibration.tried.len(), 1);
    assert_eq!(r.calibration.linear, None);
    assert_eq!(r.warmup.samples, 1);
    assert_eq!(r.samples.len(), 5);
    assert_eq!(r.stop_reason, StopReason::Converged);
    assert_eq!(r.wall_ns, 7 * 3_000 * MS);
}

#[test]
fn fixed_iterations_skip_calibration() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::linear(&clock, 1_000);
    fake.fixed = Some(7);
    let requested = Arc::clone(&fake.requested);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    assert!(r.calibration.fixed);
    assert!(r.calibration.tried.is_empty());
    assert_eq!(r.calibration.linear, None);
    assert_eq!(r.iterations, 7);
    assert!(requested.lock().unwrap().iter().all(|&n| n == 7));
    // 7 us samples: warm-up runs until 50 ms, capped at 1000 samples.
    assert_eq!(r.warmup.samples, 1000);
    assert_eq!(r.summary.mean, 1_000.0);
}

#[test]
fn rate_values_and_cpu_rate() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::linear(&clock, 100);
    // 8 bytes per 100 ns iteration = 0.08 GB/s; two busy workers = twice the CPU time.
    fake.work_per_iter = 8.0;
    fake.overhead_ns = 5_000;
    fake.cpu_factor = Some(2.0);
    let r = run(&mut fake, ValueKind::Rate { scale: 1e9 }, &cfg(), &clock);
    assert!((r.summary.mean - 0.08).abs() < 1e-12, "{:?}", r.summary);
    let cpu = r.cpu_rate.expect("cpu time was reported");
    assert!((cpu.mean - 0.04).abs() < 1e-12, "{cpu:?}");
    assert_eq!(cpu.n, r.samples.len());
    // Rates are not corrected for overhead.
    assert_eq!(r.subtracted_ns_per_sample, 0.0);
}

#[test]
fn time_per_op_subtracts_overhead_and_reports_it() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::linear(&clock, 100);
    fake.overhead_ns = 1_000;
    fake.cpu_factor = Some(1.0);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    // (10_000_000 - 1_000) ns over 100_000 operations.
    assert!((r.summary.mean - 99.99).abs() < 1e-9, "{:?}", r.summary);
    assert_eq!(r.subtracted_ns_per_sample, 1_000.0);
    // The raw elapsed time is kept uncorrected.
    assert!(r.samples.iter().all(|s| s.elapsed_ns == 10 * MS));
    // No CPU-time rate for latencies.
    assert_eq!(r.cpu_rate, None);
}

#[test]
fn the_overheads_reported_are_those_the_benchmark_subtracted() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::linear(&clock, 100);
    let basis = Overheads {
        clock_cost_ns: 30.0,
        loop_cost_ns_per_iter: 0.25,
    };
    fake.overhead_basis = Some(basis);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    // Not the config's 20 ns and 0.5 ns/iter: those were not what was subtracted.
    assert_eq!(
        (r.clock_cost_ns, r.loop_cost_ns_per_iter),
        (basis.clock_cost_ns, basis.loop_cost_ns_per_iter)
    );
}

#[test]
fn raw_facts_series_and_start_spread_are_kept() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::linear(&clock, 100);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    let n = r.samples.len();
    // Calls 0..=15 were calibration, linearity and warm-up; samples are calls 16, 17, 18.
    let calls: Vec<f64> = r.samples.iter().map(|s| s.metrics["calls"]).collect();
    assert_eq!(calls, [16.0, 17.0, 18.0]);
    assert_eq!(r.series["event_ns"], [16.0, 1.0, 17.0, 1.0, 18.0, 1.0]);
    assert!(
        r.samples
            .iter()
            .all(|s| s.cpus == [0, 4] && s.work == 100_000.0)
    );
    let spread = r.start_spread_ns.unwrap();
    assert_eq!(spread.n, n);
    // Spreads are 10 * (call % 4): 0, 10, 20.
    assert_eq!((spread.min, spread.max), (0.0, 20.0));
}

#[test]
fn instance_errors_propagate_with_their_phase() {
    for (call, phase) in [
        (0, Phase::Calibration),
        (7, Phase::Calibration),
        (8, Phase::LinearityCheck),
        (10, Phase::LinearityCheck),
        (11, Phase::Warmup),
        (17, Phase::Sample(1)),
    ] {
        let clock = Arc::new(FakeClock::default());
        let mut fake = Fake::linear(&clock, 100);
        fake.fail_on_call = Some(call);
        let err = run_err(&mut fake, &cfg(), &clock);
        let msg = err.to_string();
        match err {
            RunError::Bench {
                phase: p,
                error: BenchError::Check { .. },
            } => assert_eq!(p, phase, "{msg}"),
            other => panic!("unexpected error {other:?}"),
        }
        assert!(
            msg.contains("fake") && msg.contains("checksum mismatch"),
            "{msg}"
        );
    }
}

#[test]
fn a_benchmark_that_takes_no_time_fails_calibration() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::new(&clock, |_, _| 0);
    let err = run_err(&mut fake, &cfg(), &clock);
    assert!(matches!(err, RunError::Calibration { .. }), "{err}");
    assert!(err.to_string().contains("no measurable work"), "{err}");
}

#[test]
fn unusable_samples_are_errors_not_numbers() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::linear(&clock, 100);
    fake.work_per_iter = 0.0;
    let err = run_err(&mut fake, &cfg(), &clock);
    assert!(
        matches!(
            err,
            RunError::BadSample {
                phase: Phase::Sample(0),
                ..
            }
        ),
        "{err}"
    );

    let mut fake = Fake::linear(&clock, 100);
    fake.fixed = Some(0);
    let err = run_err(&mut fake, &cfg(), &clock);
    assert!(matches!(err, RunError::BadSample { .. }), "{err}");
}

#[test]
fn invalid_config_is_rejected_before_sampling() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::linear(&clock, 100);
    let requested = Arc::clone(&fake.requested);
    let cfg = RunConfig {
        max_samples: 1,
        min_samples: 3,
        ..cfg()
    };
    let err = run_err(&mut fake, &cfg, &clock);
    assert!(matches!(err, RunError::Config { .. }), "{err}");
    assert!(requested.lock().unwrap().is_empty());
}

#[test]
fn quick_preset_is_small() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::noisy(&clock, 100, 0.6, 5);
    let cfg = RunConfig {
        known_overheads: cfg().known_overheads,
        ..RunConfig::quick()
    };
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg, &clock);
    assert!(r.config.quick);
    assert!(r.samples.len() <= 5);
    assert!(r.wall_ns <= cfg.max_cell_ns);
    let n = r.iterations as f64;
    assert!((5_000.0..=80_000.0).contains(&n), "{n}");
}

#[test]
fn overheads_are_measured_with_the_given_clock_when_not_known() {
    // Each read of this fake costs 30 ns; the loop does not move it.
    let clock = Arc::new(FakeClock::new(0, 30));
    let mut fake = Fake::linear(&clock, 100);
    let cfg = RunConfig {
        known_overheads: None,
        ..RunConfig::default()
    };
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg, &clock);
    assert_eq!(r.clock_cost_ns, 30.0);
    assert_eq!(r.loop_cost_ns_per_iter, 0.0);
    // The runner never subtracts its own clock figure: the bench's overhead_ns covers it.
    assert_eq!(r.subtracted_ns_per_sample, 0.0);
    assert_eq!(r.summary.mean, 100.0);
}

#[test]
fn cell_result_round_trips_through_json() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::noisy(&clock, 100, 0.05, 9);
    fake.cpu_factor = Some(1.5);
    let r = run(&mut fake, ValueKind::Rate { scale: 1e6 }, &cfg(), &clock);
    let json = serde_json::to_string(&r).unwrap();
    let back: CellResult = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    assert!(json.contains("\"stop_reason\":\"converged\"") || json.contains("max_samples"));
}

#[test]
fn smt_yield_of_two_cells() {
    // Two fake cells: the same work at 100 ns and at 160 ns per operation as rates.
    let clock = Arc::new(FakeClock::default());
    let mut one = Fake::noisy(&clock, 100, 0.01, 1);
    let mut two = Fake::noisy(&clock, 160, 0.01, 2);
    let kind = ValueKind::Rate { scale: 1e6 };
    let a = run(&mut one, kind, &cfg(), &clock);
    let b = run(&mut two, kind, &cfg(), &clock);
    let y = stats::ratio(&b.summary, &a.summary).unwrap();
    assert!((y.ratio - 0.625).abs() < 0.02, "{y:?}");
    let (lo, hi) = (y.ci95_low.unwrap(), y.ci95_high.unwrap());
    assert!(lo <= y.ratio && y.ratio <= hi && hi - lo < 0.05, "{y:?}");
}

#[test]
fn real_clock_and_real_work_run_end_to_end() {
    struct Spin;
    impl Instance for Spin {
        fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
            let t0 = smtlab_bench::clock::now_ns();
            let mut x = std::hint::black_box(1u64);
            for i in 0..iterations {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            let elapsed_ns = smtlab_bench::clock::now_ns() - t0;
            std::hint::black_box(x);
            Ok(RawSample {
                elapsed_ns,
                work: iterations as f64,
                ..RawSample::default()
            })
        }
    }
    let cfg = RunConfig {
        target_sample_ns: MS,
        warmup_ns: MS,
        max_cell_ns: 300 * MS,
        ..RunConfig::quick()
    };
    let clock = smtlab_runner::Monotonic;
    let r = measure(
        &mut Spin,
        &info(ValueKind::TimePerOp),
        &cfg,
        &clock,
        &mut NoopObserver,
    )
    .unwrap();
    assert!(r.iterations > 1);
    assert!(!r.samples.is_empty() && r.summary.mean > 0.0);
    assert!(r.clock_cost_ns > 0.0);
    assert!(r.wall_ns < 2_000 * MS);
}

#[test]
fn pooled_rounds_keep_every_sample_and_show_their_disagreement() {
    let clock = Arc::new(FakeClock::default());
    let rate = ValueKind::Rate { scale: 1e9 };
    let mut cfg = cfg();
    cfg.max_samples = 5;
    cfg.min_samples = 5;
    // Three rounds at 100, 110 and 100 ns per iteration: the middle one ran while the
    // "machine" was 10% slower.
    let rounds: Vec<CellResult> = [100, 110, 100]
        .into_iter()
        .map(|ns| {
            let mut fake = Fake::linear(&clock, ns);
            fake.cpu_factor = Some(0.5);
            run(&mut fake, rate, &cfg, &clock)
        })
        .collect();
    let n: usize = rounds.iter().map(|r| r.samples.len()).sum();
    let wall: u64 = rounds.iter().map(|r| r.wall_ns).sum();
    let medians: Vec<f64> = rounds.iter().map(|r| r.summary.median).collect();
    let pooled = smtlab_runner::rounds::pool(rounds).unwrap();

    assert_eq!(pooled.samples.len(), n);
    assert_eq!(pooled.summary.n, n);
    assert_eq!(pooled.wall_ns, wall);
    assert_eq!(pooled.rounds.len(), 3);
    let round_medians: Vec<f64> = pooled.rounds.iter().map(|r| r.summary.median).collect();
    assert_eq!(round_medians, medians);
    // 1/100 and 1/110 operations per ns: spread (10 - 9.09) / 10 of the pooled median.
    let spread = pooled.rounds_spread_rel().unwrap();
    assert!((spread - (1.0 - 100.0 / 110.0)).abs() < 1e-3, "{spread}");
    // Half the wall time on CPU: twice the wall-time rate per CPU-second, every round.
    let cpu = pooled.cpu_rate.as_ref().unwrap();
    assert_eq!(cpu.n, n);
    assert!((cpu.median / pooled.summary.median - 2.0).abs() < 1e-2);
    // Series of the measured samples only, two points each, from every round.
    assert_eq!(pooled.series["event_ns"].len(), 2 * n);
}

#[test]
fn one_round_pools_to_itself_and_none_to_nothing() {
    let clock = Arc::new(FakeClock::default());
    let single = run(
        &mut Fake::linear(&clock, 100),
        ValueKind::TimePerOp,
        &cfg(),
        &clock,
    );
    let pooled = smtlab_runner::rounds::pool(vec![single.clone()]).unwrap();
    assert_eq!(pooled, single);
    assert!(pooled.rounds.is_empty());
    assert_eq!(pooled.rounds_spread_rel(), None);
    assert!(smtlab_runner::rounds::pool(Vec::new()).is_none());
}

/// A machine that runs at full speed for its first `fast_ns` and 30% slower after.
fn slows_down(clock: &Arc<FakeClock>, ns_per_iter: u64, fast_ns: u64) -> Fake {
    let c = Arc::clone(clock);
    Fake::new(clock, move |n, _| {
        let slow = c.now_ns() >= fast_ns;
        let ns = n * ns_per_iter;
        if slow { ns * 13 / 10 } else { ns }
    })
}

fn steady_cfg() -> RunConfig {
    RunConfig {
        min_samples: 10,
        max_samples: 10,
        ..cfg()
    }
}

/// A benchmark handing out one prepared fake, once.
struct Once(Mutex<Option<Fake>>, BenchInfo);

impl smtlab_bench::Benchmark for Once {
    fn info(&self) -> BenchInfo {
        self.1.clone()
    }
    fn prepare(&self, _: &smtlab_bench::BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let fake = self.0.lock().unwrap().take().expect("prepared once");
        Ok(Box::new(fake))
    }
}

/// Collects each cell's result or the reason it was skipped, in the group's order.
#[derive(Default)]
struct Results(Vec<Result<CellResult, String>>);

impl smtlab_runner::session::SessionObserver for Results {
    fn measured(&mut self, m: smtlab_runner::session::Measured<'_>) -> ControlFlow<()> {
        self.0.push(Ok(m.record.result.clone()));
        ControlFlow::Continue(())
    }
    fn skipped(&mut self, s: &smtlab_model::SkippedCell) -> ControlFlow<()> {
        self.0.push(Err(s.reason.clone()));
        ControlFlow::Continue(())
    }
}

/// Measures `fakes` as one interleaved group of the session (one sample of each in
/// turn), as `bench --interleave`, `corun`, `penalty` and `util` do.
fn interleave(
    fakes: Vec<Fake>,
    info: &BenchInfo,
    cfg: &RunConfig,
    clock: &FakeClock,
) -> Vec<Result<CellResult, String>> {
    use smtlab_runner::session::{CellPlan, Session};
    let topo = smtlab_fixtures::build::intel(1, 2, 2);
    let placement =
        smtlab_placement::resolve(&smtlab_placement::parse("1c1t").unwrap(), &topo).unwrap();
    let benches: Vec<Once> = fakes
        .into_iter()
        .map(|f| Once(Mutex::new(Some(f)), info.clone()))
        .collect();
    let group = benches
        .iter()
        .enumerate()
        .map(|(i, b)| CellPlan {
            bench: b,
            info: info.clone(),
            params: Default::default(),
            key: smtlab_model::CellKey {
                benchmark: info.name.clone(),
                params: BTreeMap::new(),
                conditions: Default::default(),
                placement: format!("cell{i}"),
            },
            placement: Ok(placement.clone()),
            work_unit: None,
            warmup_samples: None,
        })
        .collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut results = Results::default();
    Session {
        topo: &topo,
        cfg,
        clock,
        client_rule: Default::default(),
        counting: None,
        repeat: 1,
        interleave: true,
        stop: &stop,
        system: None,
        handoff_at_start: &[],
    }
    .run(vec![group], &mut results);
    results.0
}

#[test]
fn interleaving_cancels_a_change_of_speed_that_skews_cells_measured_in_turn() {
    let kind = ValueKind::TimePerOp;
    let info = info(kind);
    let cfg = steady_cfg();

    // One after the other: the change of speed lands between the two cells.
    let clock = Arc::new(FakeClock::default());
    let a = run(&mut slows_down(&clock, 100, 300 * MS), kind, &cfg, &clock);
    let b = run(&mut slows_down(&clock, 100, 300 * MS), kind, &cfg, &clock);
    let skew = b.summary.mean / a.summary.mean;
    assert!(skew > 1.1, "sequential ratio {skew}");

    // In turn: both see the same share of fast and slow samples.
    let clock = Arc::new(FakeClock::default());
    let results = interleave(
        vec![
            slows_down(&clock, 100, 300 * MS),
            slows_down(&clock, 100, 300 * MS),
        ],
        &info,
        &cfg,
        &clock,
    );
    let [a, b] = [&results[0], &results[1]].map(|r| r.as_ref().unwrap());
    assert_eq!(a.samples.len(), 10);
    assert_eq!(b.samples.len(), 10);
    let ratio = b.summary.mean / a.summary.mean;
    assert!((ratio - 1.0).abs() < 0.04, "interleaved ratio {ratio}");
    // Each cell's wall time counts its own steps only, not the other's samples.
    assert!(
        a.wall_ns < clock.now_ns() * 3 / 4,
        "{} of {}",
        a.wall_ns,
        clock.now_ns()
    );
}

#[test]
fn an_interleaved_cell_that_fails_leaves_the_others_measured() {
    let kind = ValueKind::TimePerOp;
    let info = info(kind);
    let clock = Arc::new(FakeClock::default());
    let good = Fake::linear(&clock, 100);
    let mut bad = Fake::linear(&clock, 100);
    // Calibration, linearity check and warm-up are calls 0..16; this is sample 3.
    bad.fail_on_call = Some(19);
    let results = interleave(vec![bad, good], &info, &steady_cfg(), &clock);
    let err = results[0].as_ref().unwrap_err();
    assert!(err.contains("checksum mismatch in call 19"), "{err}");
    assert_eq!(results[1].as_ref().unwrap().samples.len(), 10);
}

#[test]
fn an_interleaved_cell_that_converges_early_keeps_pace_with_the_others() {
    let kind = ValueKind::TimePerOp;
    let info = info(kind);
    let clock = Arc::new(FakeClock::default());
    let exact = Fake::linear(&clock, 100);
    let noisy = Fake::noisy(&clock, 100, 0.3, 7);
    let results = interleave(vec![exact, noisy], &info, &cfg(), &clock);
    let [e, n] = [&results[0], &results[1]].map(|r| r.as_ref().unwrap());
    // Alone, the exact cell converges after the minimum of 3 samples.
    assert!(n.samples.len() > 3, "the noisy cell needed more samples");
    assert_eq!(e.samples.len(), n.samples.len());
    assert!(e.converged);
}

/// 50 us of fixed cost per sample (waking a pool of workers) plus 1 ns per iteration.
fn pool_like(clock: &Arc<FakeClock>, first_ns: u64) -> Fake {
    Fake::new(
        clock,
        move |n, call| {
            if call == 0 { first_ns } else { 50_000 + n }
        },
    )
}

#[test]
fn one_slow_first_sample_does_not_choose_the_count() {
    // The first sample is 20 ms (a cold start): twice the target at one iteration, which
    // a calibration that trusts one sample accepts, and then every sample measures the
    // 50 us fixed cost instead of the work.
    let clock = Arc::new(FakeClock::default());
    let mut fake = pool_like(&clock, 20 * MS);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    assert!(r.iterations > 1_000_000, "{:?}", r.calibration.tried);
    // The two other trials at one iteration were fast: the outlier was outvoted.
    let at_one: Vec<u64> = r
        .calibration
        .tried
        .iter()
        .filter(|s| s.iterations == 1)
        .map(|s| s.elapsed_ns)
        .collect();
    assert_eq!(at_one, [20 * MS, 50_001, 50_001]);
    assert_eq!(r.calibration.linear, Some(true));
    // 1 ns per operation plus at most 1% of fixed cost.
    assert!(
        r.summary.mean > 1.0 && r.summary.mean < 1.01,
        "{:?}",
        r.summary
    );

    // The same under the quick preset.
    let clock = Arc::new(FakeClock::default());
    let mut fake = pool_like(&clock, 20 * MS);
    let quick = RunConfig {
        known_overheads: cfg().known_overheads,
        ..RunConfig::quick()
    };
    let r = run(&mut fake, ValueKind::TimePerOp, &quick, &clock);
    assert!(r.iterations > 100_000, "{:?}", r.calibration.tried);
    assert!(r.summary.mean < 1.05, "{:?}", r.summary);
}

#[test]
fn an_outlier_in_the_linearity_check_is_outvoted() {
    let clock = Arc::new(FakeClock::default());
    // Call 8 is the first sample at twice the count: three times too slow.
    let mut fake = Fake::new(
        &clock,
        |n, call| {
            if call == 8 { 3 * n * 100 } else { n * 100 }
        },
    );
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    assert_eq!(r.iterations, 100_000);
    assert_eq!(r.calibration.linear, Some(true));
    assert_eq!(r.calibration.linearity_ratio, Some(1.0));
}

#[test]
fn a_transient_non_linearity_is_calibrated_again_and_passes() {
    let clock = Arc::new(FakeClock::default());
    // The first linearity check (calls 8-10) runs while the "machine" is 50% slower.
    let mut fake = Fake::new(&clock, |n, call| {
        if (8..=10).contains(&call) {
            n * 150
        } else {
            n * 100
        }
    });
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    assert_eq!(r.calibration.linear, Some(true));
    let checks = r
        .calibration
        .tried
        .iter()
        .filter(|s| s.iterations == 2 * r.iterations)
        .count();
    assert_eq!(checks, 6, "checked twice: {:?}", r.calibration.tried);
    assert_eq!(r.summary.mean, 100.0);
}

#[test]
fn a_count_that_stays_non_linear_is_searched_again_then_marked() {
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::new(&clock, |n, _| n * n);
    let r = run(&mut fake, ValueKind::TimePerOp, &cfg(), &clock);
    assert_eq!(r.calibration.linear, Some(false));
    let checks = r
        .calibration
        .tried
        .iter()
        .filter(|s| s.iterations == 2 * r.iterations)
        .count();
    assert_eq!(checks, 6, "{:?}", r.calibration.tried);
    // The mark survives storage as JSON.
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"linear\":false"), "{json}");
}

/// A workload-like cell: every sample is one stretch of load of `sample_ns` (fixed
/// iterations), a little noisy, or exact.
fn workload(clock: &Arc<FakeClock>, sample_ns: u64, noise: f64) -> Fake {
    let mut fake = if noise > 0.0 {
        Fake::noisy(clock, sample_ns, noise, 17)
    } else {
        Fake::linear(clock, sample_ns)
    };
    fake.fixed = Some(1);
    fake
}

#[test]
fn workload_cells_get_at_least_three_samples_quick_and_five_by_default() {
    let quick = RunConfig {
        known_overheads: cfg().known_overheads,
        ..RunConfig::quick()
    };
    // Quick: 0.3 s samples against a 0.5 s cell budget (the web load's quick duration).
    for noise in [0.0, 0.02, 0.5] {
        let clock = Arc::new(FakeClock::default());
        let r = run(
            &mut workload(&clock, 300 * MS, noise),
            ValueKind::Rate { scale: 1e6 },
            &quick,
            &clock,
        );
        assert!(
            r.samples.len() >= 3,
            "quick, noise {noise}: {}",
            r.samples.len()
        );
        assert!(r.summary.n >= 3 && r.summary.ci95_half_width.is_finite());
        assert_eq!(r.warmup.samples, 1);
    }
    // Default: 2 s samples against a 5 s budget (the web load's default duration); an
    // exact one would converge at 3 without the workload minimum.
    for noise in [0.0, 0.02, 0.5] {
        let clock = Arc::new(FakeClock::default());
        let r = run(
            &mut workload(&clock, 2_000 * MS, noise),
            ValueKind::Rate { scale: 1e6 },
            &cfg(),
            &clock,
        );
        // Exactly the minimum: the budget is spent by then (1 warm-up + 5 samples).
        assert_eq!(r.samples.len(), 5, "default, noise {noise}");
        assert!(r.wall_ns <= 6 * 2_000 * MS * 11 / 10, "{}", r.wall_ns);
    }
    // So do calibrated cells whose one iteration is longer than the target (an SDET
    // script per user): 0.3 s iterations under the quick preset.
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::noisy(&clock, 300 * MS, 0.5, 3);
    let r = run(&mut fake, ValueKind::Rate { scale: 1.0 }, &quick, &clock);
    assert_eq!(r.iterations, 1);
    assert!(!r.calibration.fixed);
    assert!(r.samples.len() >= 3, "{}", r.samples.len());
    // And cells whose samples spend 100 ms outside their timed section (a task tree
    // built and torn down around 2 ms of timed work).
    let clock = Arc::new(FakeClock::default());
    let mut fake = Fake::noisy(&clock, 1_000, 0.3, 5);
    fake.untimed_ns = 100 * MS;
    let r = run(&mut fake, ValueKind::Rate { scale: 1.0 }, &quick, &clock);
    assert!(r.iterations > 1);
    assert!(r.samples.len() >= 3, "{}", r.samples.len());
}

#[test]
fn a_long_wait_on_a_partner_does_not_use_up_the_budget_of_the_calibration() {
    let quick = RunConfig {
        known_overheads: cfg().known_overheads,
        ..RunConfig::quick()
    };
    // 1 us an iteration beside a partner whose samples last 150 ms: each sample waits
    // for the partner to finish one, 0.3 s against a 0.5 s budget.
    let measured = |waited: bool| {
        let clock = Arc::new(FakeClock::default());
        let mut fake = Fake::linear(&clock, 1_000);
        fake.untimed_ns = 300 * MS;
        fake.waited_ns = if waited { 300 * MS } else { 0 };
        run(&mut fake, ValueKind::TimePerOp, &quick, &clock)
    };
    let target = quick.target_sample_ns / 1_000;
    // Charged to the budget, the wait leaves the count far below the target: samples
    // of a few iterations, made of fixed costs.
    let charged = measured(false);
    assert!(
        charged.iterations * 4 < target * 3,
        "{}",
        charged.iterations
    );
    // Kept out of it, the count reaches the target and the cell takes its samples.
    let kept = measured(true);
    assert!(
        kept.iterations * 4 >= target * 3,
        "{} of {target}",
        kept.iterations
    );
    assert!(kept.samples.len() >= 3, "{}", kept.samples.len());
}
