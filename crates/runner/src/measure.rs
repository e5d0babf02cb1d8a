//! Measuring one cell: calibrate, check linearity, warm up, repeat until converged or
//! out of samples or time, summarise.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use smtlab_bench::{Instance, RawSample};
use smtlab_model::{BenchInfo, SampleRecord};

use crate::clock::{Clock, Overheads, measure_overheads};
use crate::config::RunConfig;
use crate::error::{Phase, RunError};
use crate::observer::{Event, Observer};
use crate::stats;
use smtlab_bench::value::{OWN_VALUE, cpu_rate, sample_value};
use smtlab_model::result::{Calibration, CalibrationStep, CellResult, StopReason, Warmup};

/// Calibration gives up growing here: 2^40 iterations that still take no measurable time
/// mean the benchmark's loop was optimised away or it reports no time.
const MAX_ITERATIONS: u64 = 1 << 40;
/// Enough for 10x steps from 1 to `MAX_ITERATIONS` plus a few proportional corrections
/// and their confirming trials.
const MAX_CALIBRATION_STEPS: usize = 60;
/// How many of its budgets a cell may spend waiting on work not its own (a co-run
/// partner's samples) without charging it: enough for a partner whose one sample lasts
/// a good part of the budget to let the count be calibrated, bounded so a partner that
/// never ends a sample cannot hold the run for long.
pub const WAIT_ALLOWANCE_BUDGETS: u64 = 10;
/// Samples behind every time calibration relies on (the chosen count's and the
/// linearity check's): their median, so one outlier cannot choose the count.
pub const TRIALS: usize = 3;
/// How many times a count that fails the linearity check is searched again.
const REDOS: usize = 1;
/// Calibration accepts a count whose sample lasts this fraction of the target.
const ACCEPT_LOW: f64 = 0.75;
const ACCEPT_HIGH: f64 = 1.5;
/// Keeps warm-up finite for benchmarks with tiny fixed-iteration samples.
const MAX_WARMUP_SAMPLES: usize = 1000;

/// Measures one cell of `instance`, whose description is `info`.
///
/// Steps, each reported to `observer`:
/// 1. clock and empty-loop costs (unless `cfg.known_overheads`);
/// 2. calibration: iterations start at 1 and grow tenfold while a sample is shorter than
///    a tenth of `cfg.target_sample_ns`, then proportionally (bisecting between the
///    closest too-short and too-long counts once both are known, so a non-linear
///    benchmark cannot make it oscillate), until the median of three samples at a count
///    lasts 0.75..1.5 times the target (one sample is never trusted: a slow first
///    sample once chose 1 iteration for a 16-thread cell); then the median of three
///    samples at twice the count checks linearity, and a count that fails is searched
///    again once and, failing again, marked `linear: Some(false)`.
///    Skipped when the instance has fixed iterations;
/// 3. warm-up: discarded samples until `cfg.warmup_ns` of sample time (at least one);
/// 4. measured samples until the 95% CI half-width of the mean is within
///    `cfg.ci_target_rel` (after `cfg.min_samples`), or `cfg.max_samples`, or the cell's
///    time budget `cfg.max_cell_ns` would be exceeded by the next sample (a sample's
///    length is predicted by the previous one's). At least one sample is always taken,
///    and at least `cfg.long_min_samples` when samples are long by nature (the instance
///    fixes its iterations, a workload's stretch of load, or a warm-up sample took
///    longer than the target on the runner's clock: one iteration over the target, or
///    work outside the timed section), so such cells have an interval.
pub fn measure(
    instance: &mut dyn Instance,
    info: &BenchInfo,
    cfg: &RunConfig,
    clock: &dyn Clock,
    observer: &mut dyn Observer,
) -> Result<CellResult, RunError> {
    let mut m = Measurement::begin(instance, info, cfg, clock, observer, None)?;
    while !m.step()? {}
    m.finish()
}

/// A cell between its warm-up and its summary: [`Measurement::begin`] runs steps 1-3 of
/// [`measure`], each [`Measurement::step`] takes one measured sample, and
/// [`Measurement::finish`] summarises. Taking the steps of several cells in turn
/// interleaves their samples (see [`crate::session`]); the cell's time budget then
/// counts only the time spent in its own steps.
pub struct Measurement<'a> {
    cell: Cell<'a>,
    start_ns: u64,
    overheads: Overheads,
    calibration: Calibration,
    /// Samples that cannot be shortened to the target (fixed, or a warm-up sample's wall
    /// time over it): the cell takes at least `cfg.long_min_samples` of them whatever
    /// its budget.
    long_samples: bool,
    warmup: Warmup,
    predicted_wall_ns: u64,
    samples: Vec<SampleRecord>,
    values: Vec<f64>,
    cpu_rates: Vec<f64>,
    spreads: Vec<f64>,
    subtracted_total_ns: f64,
    series: BTreeMap<String, Vec<f64>>,
    stop_reason: Option<StopReason>,
    /// When the last step returned: the time until the next one is not this cell's.
    left_ns: Option<u64>,
}

impl<'a> Measurement<'a> {
    /// Overheads, calibration and warm-up: `cfg.warmup_ns` of warm-up samples, or
    /// exactly `warmup_samples` of them (0 allowed) when given (`exec --warmup N`).
    pub fn begin(
        instance: &'a mut dyn Instance,
        info: &'a BenchInfo,
        cfg: &'a RunConfig,
        clock: &'a dyn Clock,
        observer: &'a mut dyn Observer,
        warmup_samples: Option<usize>,
    ) -> Result<Self, RunError> {
        crate::config::validate(cfg)?;
        let start_ns = clock.now_ns();
        let fixed_iterations = instance.fixed_iterations();
        let mut cell = Cell {
            instance,
            info,
            cfg,
            clock,
            observer,
            deadline_ns: start_ns.saturating_add(cfg.max_cell_ns),
            wait_allowance_ns: cfg.max_cell_ns.saturating_mul(WAIT_ALLOWANCE_BUDGETS),
        };
        cell.notify(
            Phase::Calibration,
            &Event::CellStarted {
                info,
                config: cfg,
                fixed_iterations,
            },
        )?;
        let overheads = cfg
            .known_overheads
            .unwrap_or_else(|| measure_overheads(clock));

        let (calibration, mut predicted_wall_ns) = match fixed_iterations {
            Some(0) => {
                return Err(RunError::BadSample {
                    bench: info.name.clone(),
                    phase: Phase::Calibration,
                    reason: "the instance asks for a fixed 0 iterations".into(),
                });
            }
            Some(iterations) => {
                let fixed = Calibration {
                    iterations,
                    fixed: true,
                    tried: Vec::new(),
                    linear: None,
                    linearity_ratio: None,
                };
                // Unknown until the first warm-up sample; 0 lets that one run.
                (fixed, 0)
            }
            None => cell.calibrate()?,
        };
        let iterations = calibration.iterations;
        cell.notify(
            Phase::Calibration,
            &Event::Calibrated {
                iterations,
                linear: calibration.linear,
                calibration: &calibration,
            },
        )?;

        let mut warmup = Warmup {
            samples: 0,
            elapsed_ns: 0,
        };
        // Leave room for the minimum number of measured samples after the warm-up.
        let reserve = cfg.min_samples as u64 + 1;
        let more_warmup =
            |warmup: &Warmup, cell: &Cell<'_>, predicted_wall_ns: u64| match warmup_samples {
                Some(n) => warmup.samples < n,
                None => {
                    warmup.samples == 0
                        || (warmup.elapsed_ns < cfg.warmup_ns
                            && warmup.samples < MAX_WARMUP_SAMPLES
                            && cell.fits(predicted_wall_ns.saturating_mul(reserve)))
                }
            };
        while more_warmup(&warmup, &cell, predicted_wall_ns) {
            let (raw, wall_ns) = cell.run(iterations, Phase::Warmup)?;
            warmup.samples += 1;
            warmup.elapsed_ns = warmup.elapsed_ns.saturating_add(raw.elapsed_ns);
            predicted_wall_ns = wall_ns;
        }
        cell.notify(
            Phase::Warmup,
            &Event::WarmupDone {
                samples: warmup.samples,
                elapsed_ns: warmup.elapsed_ns,
            },
        )?;
        // Samples that take longer than the target whatever the count (a workload's
        // stretch of load, one iteration over the target, work outside the timed
        // section): the budget would leave one or two of them.
        let long_samples = calibration.fixed
            || predicted_wall_ns as f64 > ACCEPT_HIGH * cfg.target_sample_ns as f64;
        let left_ns = Some(clock.now_ns());
        Ok(Self {
            cell,
            start_ns,
            overheads,
            calibration,
            long_samples,
            warmup,
            predicted_wall_ns,
            samples: Vec::new(),
            values: Vec::new(),
            cpu_rates: Vec::new(),
            spreads: Vec::new(),
            subtracted_total_ns: 0.0,
            series: BTreeMap::new(),
            stop_reason: None,
            left_ns,
        })
    }

    /// Takes the next measured sample unless the cell is done; returns whether it is
    /// done (converged, out of samples or out of time). Once done, does nothing.
    pub fn step(&mut self) -> Result<bool, RunError> {
        if self.stop_reason.is_some() {
            return Ok(true);
        }
        // Time spent elsewhere since the last step (other cells' samples) is not this
        // cell's: move its deadline by as much.
        let now = self.cell.clock.now_ns();
        if let Some(left) = self.left_ns {
            let away = now.saturating_sub(left);
            self.cell.deadline_ns = self.cell.deadline_ns.saturating_add(away);
            self.start_ns = self.start_ns.saturating_add(away);
        }
        let outcome = self.sample();
        self.left_ns = Some(self.cell.clock.now_ns());
        if let Ok(Some(reason)) = outcome {
            self.stop_reason = Some(reason);
        }
        outcome.map(|r| r.is_some())
    }

    /// Measured samples taken so far.
    pub fn samples_taken(&self) -> usize {
        self.samples.len()
    }

    /// The last measured sample, for figures read around it (the forced idle of a
    /// security-mode cell).
    pub fn last_sample_mut(&mut self) -> Option<&mut smtlab_model::SampleRecord> {
        self.samples.last_mut()
    }

    /// A converged cell goes on sampling (until it converges again on the next step, or
    /// reaches its sample or time limit); other stops stay stopped. Interleaving keeps
    /// every cell sampling while any other does, so all of them see the same stretch of
    /// the machine's history.
    pub fn continue_if_converged(&mut self) {
        if self.stop_reason == Some(StopReason::Converged) {
            self.stop_reason = None;
        }
    }

    fn sample(&mut self) -> Result<Option<StopReason>, RunError> {
        let cfg = self.cell.cfg;
        let guaranteed = cfg.guaranteed_samples(self.long_samples);
        let limit = if self.samples.len() >= cfg.max_samples {
            Some(StopReason::MaxSamples)
        } else if self.samples.len() >= guaranteed && !self.cell.fits(self.predicted_wall_ns) {
            Some(StopReason::TimeBudget)
        } else {
            None
        };
        if let Some(limit) = limit {
            // A cell kept sampling after it converged (interleaving) still converged.
            return Ok(Some(if self.converged_now() {
                StopReason::Converged
            } else {
                limit
            }));
        }
        let iterations = self.calibration.iterations;
        let index = self.samples.len();
        let phase = Phase::Sample(index);
        let (raw, wall_ns) = self.cell.run(iterations, phase)?;
        self.predicted_wall_ns = wall_ns;
        let kind = self.cell.info.value_kind;
        let value = sample_value(kind, &raw).map_err(|e| RunError::BadSample {
            bench: self.cell.info.name.clone(),
            phase,
            reason: e.to_string(),
        })?;
        self.subtracted_total_ns += value.subtracted_ns;
        if let Some(basis) = raw.overhead_basis {
            // Report what the benchmark subtracted, not the runner's own estimate.
            self.overheads = basis;
        }
        self.cpu_rates.extend(cpu_rate(kind, &raw));
        self.spreads.extend(raw.start_spread_ns.map(|s| s as f64));
        let RawSample {
            elapsed_ns,
            work,
            cpu_ns,
            start_spread_ns,
            cpus,
            mut metrics,
            series: raw_series,
            ..
        } = raw;
        metrics.remove(OWN_VALUE);
        for (name, mut points) in raw_series {
            self.series.entry(name).or_default().append(&mut points);
        }
        self.samples.push(SampleRecord {
            value: value.value,
            iterations,
            elapsed_ns,
            work,
            cpu_ns,
            start_spread_ns,
            cpus,
            metrics,
        });
        self.values.push(value.value);
        let ci95_rel = stats::ci95_rel(&self.values);
        self.cell.notify(
            phase,
            &Event::Sample {
                index,
                value: value.value,
                record: &self.samples[index],
                ci95_rel,
            },
        )?;
        Ok(self.converged_now().then_some(StopReason::Converged))
    }

    /// Enough samples (`min_samples`, and the workload minimum for fixed samples) and a
    /// CI half-width within the target.
    fn converged_now(&self) -> bool {
        let cfg = self.cell.cfg;
        let least = cfg
            .min_samples
            .max(cfg.guaranteed_samples(self.long_samples));
        self.values.len() >= least.max(2)
            && stats::ci95_rel(&self.values).is_some_and(|c| c <= cfg.ci_target_rel)
    }

    /// Summarises the samples taken (taking one first if there is none yet, as
    /// `measure` always does). Called before the cell is done, it summarises what there
    /// is and says it did not converge.
    pub fn finish(mut self) -> Result<CellResult, RunError> {
        if self.values.is_empty() {
            self.step()?;
        }
        let stop_reason = self.stop_reason.unwrap_or(StopReason::MaxSamples);
        let values = &self.values;
        let summary = stats::summarize(values).expect("at least one sample was taken");
        let cfg = self.cell.cfg;
        let result = CellResult {
            at_limit: smtlab_model::AtLimit::of_samples(&self.samples),
            iterations: self.calibration.iterations,
            calibration: self.calibration,
            warmup: self.warmup,
            clock_cost_ns: self.overheads.clock_cost_ns,
            loop_cost_ns_per_iter: self.overheads.loop_cost_ns_per_iter,
            subtracted_ns_per_sample: self.subtracted_total_ns / values.len() as f64,
            samples: std::mem::take(&mut self.samples),
            summary,
            converged: stop_reason == StopReason::Converged,
            stop_reason,
            cpu_rate: stats::summarize(&self.cpu_rates),
            series: std::mem::take(&mut self.series),
            start_spread_ns: stats::summarize(&self.spreads),
            wall_ns: self
                .left_ns
                .unwrap_or_else(|| self.cell.clock.now_ns())
                .saturating_sub(self.start_ns),
            config: cfg.clone(),
            rounds: Vec::new(),
            disturbance: None,
        };
        // The cell is complete; a stop request now only matters for the next cell.
        let _ = self
            .cell
            .observer
            .event(&Event::CellFinished { result: &result });
        Ok(result)
    }
}

/// The borrowed pieces of one cell being measured.
struct Cell<'a> {
    instance: &'a mut dyn Instance,
    info: &'a BenchInfo,
    cfg: &'a RunConfig,
    clock: &'a dyn Clock,
    observer: &'a mut dyn Observer,
    deadline_ns: u64,
    /// Wait on work not the cell's own ([`RawSample::waited_ns`]) still to be kept out
    /// of its budget: [`WAIT_ALLOWANCE_BUDGETS`] budgets at the start.
    wait_allowance_ns: u64,
}

impl Cell<'_> {
    /// One sample, with its wall time on the runner's clock (which also covers what the
    /// instance does outside its timed section, so the budget stays honest).
    fn run(&mut self, iterations: u64, phase: Phase) -> Result<(RawSample, u64), RunError> {
        let t0 = self.clock.now_ns();
        let raw = self
            .instance
            .sample(iterations)
            .map_err(|error| RunError::Bench { phase, error })?;
        let wall_ns = self.clock.now_ns().saturating_sub(t0);
        // A co-run partner's long sample would otherwise use up the budget while the
        // count is calibrated, leaving samples of a few iterations made of fixed costs.
        let waited_ns = raw.waited_ns.min(wall_ns).min(self.wait_allowance_ns);
        self.wait_allowance_ns -= waited_ns;
        self.deadline_ns = self.deadline_ns.saturating_add(waited_ns);
        Ok((raw, wall_ns - waited_ns))
    }

    /// Whether something lasting `ns` would end within the budget.
    fn fits(&self, ns: u64) -> bool {
        self.clock.now_ns().saturating_add(ns) <= self.deadline_ns
    }

    fn notify(&mut self, phase: Phase, event: &Event<'_>) -> Result<(), RunError> {
        match self.observer.event(event) {
            ControlFlow::Continue(()) => Ok(()),
            ControlFlow::Break(()) => Err(RunError::Stopped {
                bench: self.info.name.clone(),
                phase,
            }),
        }
    }

    /// One sample of `n` iterations, recorded in `tried`: its own elapsed time and its
    /// wall time on the runner's clock.
    fn trial(
        &mut self,
        n: u64,
        phase: Phase,
        tried: &mut Vec<CalibrationStep>,
    ) -> Result<(u64, u64), RunError> {
        let (raw, wall_ns) = self.run(n, phase)?;
        tried.push(CalibrationStep {
            iterations: n,
            elapsed_ns: raw.elapsed_ns,
        });
        Ok((raw.elapsed_ns, wall_ns))
    }

    /// `TRIALS` samples of `n` iterations in all, `first` (elapsed, wall) being the one
    /// already taken: the medians of their times. One sample is never trusted (a cold
    /// first sample, an interrupt or a page-fault storm makes one of them an outlier);
    /// the median of three rejects one outlier either way.
    fn confirm(
        &mut self,
        n: u64,
        first: (u64, u64),
        phase: Phase,
        tried: &mut Vec<CalibrationStep>,
    ) -> Result<(u64, u64), RunError> {
        let mut elapsed = vec![first.0];
        let mut wall = vec![first.1];
        // Within the budget: a count whose one sample takes most of it stays at one.
        while elapsed.len() < TRIALS && self.fits(wall.iter().copied().max().unwrap_or(0)) {
            let (t, w) = self.trial(n, phase, tried)?;
            elapsed.push(t);
            wall.push(w);
        }
        Ok((median_u64(&mut elapsed), median_u64(&mut wall)))
    }

    /// Returns the calibration and the wall time of one of its samples (a prediction
    /// for the warm-up's first).
    ///
    /// The count is searched ([`Cell::search`]), then `time(2n)` (median of
    /// [`TRIALS`]) is compared with `2 * time(n)` (median of [`TRIALS`]). A count that
    /// fails this check is searched again once from where it was (transients such as a
    /// frequency ramp or first-touch faults pass); a second failure leaves the cell
    /// marked `linear: Some(false)`, which the outputs show beside its value.
    fn calibrate(&mut self) -> Result<(Calibration, u64), RunError> {
        let mut tried = Vec::new();
        let mut start = 1;
        let mut redos = 0;
        loop {
            let (n, elapsed_ns, wall_ns) = self.search(start, &mut tried)?;
            if elapsed_ns == 0 {
                return Err(RunError::Calibration {
                    bench: self.info.name.clone(),
                    iterations: n,
                    elapsed_ns,
                });
            }
            let mut calibration = Calibration {
                iterations: n,
                fixed: false,
                tried: Vec::new(),
                linear: None,
                linearity_ratio: None,
            };
            // The check costs `TRIALS` samples of twice the length; skip it rather than
            // squeeze out the warm-up and the first measured samples.
            let doubled = n.checked_mul(2).filter(|&d| d <= MAX_ITERATIONS);
            let check_ns = wall_ns.saturating_mul(2 * TRIALS as u64 + 2);
            let Some(doubled) = doubled.filter(|_| self.fits(check_ns)) else {
                calibration.tried = tried;
                return Ok((calibration, wall_ns));
            };
            let first = self.trial(doubled, Phase::LinearityCheck, &mut tried)?;
            let (elapsed2_ns, _) =
                self.confirm(doubled, first, Phase::LinearityCheck, &mut tried)?;
            let ratio = elapsed2_ns as f64 / (2.0 * elapsed_ns as f64);
            let linear = (ratio - 1.0).abs() <= self.cfg.linearity_tolerance;
            if !linear && redos < REDOS && self.fits(check_ns.saturating_mul(2)) {
                redos += 1;
                start = n;
                continue;
            }
            calibration.linearity_ratio = Some(ratio);
            calibration.linear = Some(linear);
            calibration.tried = tried;
            return Ok((calibration, wall_ns));
        }
    }

    /// Searches the count from `start`: it grows tenfold while a sample is shorter than
    /// a tenth of the target, then proportionally (bisecting between the closest
    /// too-short and too-long counts once both are known, so a non-linear benchmark
    /// cannot make it oscillate), until the median of [`TRIALS`] samples lasts 0.75..1.5
    /// times the target (or one iteration takes longer). Returns the count and the
    /// medians of its elapsed and wall times.
    fn search(
        &mut self,
        start: u64,
        tried: &mut Vec<CalibrationStep>,
    ) -> Result<(u64, u64, u64), RunError> {
        let target = self.cfg.target_sample_ns as f64;
        let accept = |n: u64, t: u64| {
            let ratio = t as f64 / target;
            (ACCEPT_LOW..=ACCEPT_HIGH).contains(&ratio) || (n == 1 && ratio > ACCEPT_HIGH)
        };
        let steps_before = tried.len();
        // The closest counts known to be too short and too long, as (n, elapsed, wall).
        let mut short: Option<(u64, u64, u64)> = None;
        let mut long: Option<(u64, u64, u64)> = None;
        let mut n: u64 = start.max(1);
        loop {
            let (mut t, mut wall_ns) = self.trial(n, Phase::Calibration, tried)?;
            let out_of_steps = || tried.len() - steps_before >= MAX_CALIBRATION_STEPS;
            if out_of_steps() || !self.fits(0) {
                return Ok((n, t, wall_ns));
            }
            if accept(n, t) {
                (t, wall_ns) = self.confirm(n, (t, wall_ns), Phase::Calibration, tried)?;
                if accept(n, t) || !self.fits(0) {
                    return Ok((n, t, wall_ns));
                }
            }
            let ratio = t as f64 / target;
            if ratio < ACCEPT_LOW {
                short = short.filter(|s| s.0 > n).or(Some((n, t, wall_ns)));
            } else {
                long = long.filter(|l| l.0 < n).or(Some((n, t, wall_ns)));
            }
            // Short samples are dominated by clock resolution and fixed costs, so
            // their proportional estimate is capped at a tenfold step.
            let mut next = if t == 0 {
                n.saturating_mul(10)
            } else {
                (n as f64 * target / t as f64)
                    .round()
                    .clamp(1.0, n as f64 * 10.0) as u64
            }
            .min(MAX_ITERATIONS);
            if let (Some(s), Some(l)) = (short, long) {
                if next <= s.0 || next >= l.0 {
                    next = ((s.0 as f64) * (l.0 as f64)).sqrt().round() as u64;
                }
                if next <= s.0 || next >= l.0 {
                    // Adjacent counts: no integer in between; keep the closer one,
                    // confirmed by more samples.
                    let off = |t: u64| (t as f64 / target).ln().abs();
                    let (n, t, w) = if off(s.1) <= off(l.1) { s } else { l };
                    let (t, w) = self.confirm(n, (t, w), Phase::Calibration, tried)?;
                    return Ok((n, t, w));
                }
            }
            if next == n {
                return Ok((n, t, wall_ns));
            }
            n = next;
        }
    }
}

/// The median of a few values (the upper one of an even count); sorts them.
fn median_u64(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}
