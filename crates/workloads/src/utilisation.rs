//! Reported utilisation against capacity (paper 004 s7): an open-loop load of CPU-bound
//! jobs offered at a fixed rate on a placement, with the `/proc/stat` time of the
//! placement's CPUs (user, system, iowait and idle apart, as 004's Table 1) beside the
//! throughput offered and achieved.
//!
//! With SMT a CPU looks idle whenever its hardware thread has nothing to run, although
//! the core it shares is busy with its sibling: "50% busy" then need not mean "half the
//! capacity left". The curve shows it: reported busy fraction against achieved
//! throughput as a fraction of the measured maximum.
//!
//! One [`OpenLoop`] sample is one step: one worker thread per placement CPU (pinned there)
//! takes job `k` at its arrival time `k / rate` after the start (sleeping until then, so
//! the CPU is idle between jobs, as a server's would be), runs it, and counts it if it
//! finished inside the step. Arrivals do not wait for completions (open loop): above
//! capacity the backlog grows and the achieved rate stays at the capacity. Without a
//! rate the workers run jobs back to back: the maximum. `/proc/stat` is read just before
//! and just after the step through a [`TickSource`], so tests give fakes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_counters::CounterError;
use smtlab_model::counters::os_time::CpuTicks;
use smtlab_model::{BenchInfo, Direction, ValueKind};

/// Name of the open-loop workload in results.
pub const NAME: &str = "open-loop-int";
/// Sample metrics: fractions of the placement CPUs' ticks over the step, and the rate
/// offered (jobs per second, absent for the maximum); the report reads them by the same
/// constants.
pub use smtlab_model::metrics::util::{
    IDLE_FRAC as IDLE, IOWAIT_FRAC as IOWAIT, OFFERED_PER_S as OFFERED, OTHER_FRAC as OTHER,
    SYSTEM_FRAC as SYSTEM, USER_FRAC as USER,
};

/// Where tick counters come from.
pub trait TickSource: Send {
    /// Ticks per CPU since boot.
    fn read(&mut self) -> Result<BTreeMap<u32, CpuTicks>, CounterError>;
}

/// `/proc/stat`.
#[derive(Default)]
pub struct ProcStat;

impl TickSource for ProcStat {
    fn read(&mut self) -> Result<BTreeMap<u32, CpuTicks>, CounterError> {
        smtlab_counters::procstat::read_proc_stat(Path::new("/proc/stat"))
    }
}

/// Where the ticks of some CPUs went between two reads, as fractions of all their ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Breakdown {
    /// user + nice.
    pub user: f64,
    pub system: f64,
    pub iowait: f64,
    /// irq + softirq + steal.
    pub other: f64,
    pub idle: f64,
    /// All ticks counted (the denominator).
    pub ticks: u64,
}

/// The breakdown of `cpus` between `before` and `after`; an error when a CPU is missing
/// or no tick passed.
pub fn breakdown(
    before: &BTreeMap<u32, CpuTicks>,
    after: &BTreeMap<u32, CpuTicks>,
    cpus: &[u32],
) -> Result<Breakdown, NoBreakdown> {
    let (mut user, mut system, mut iowait, mut other, mut idle) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for &c in cpus {
        let (Some(b), Some(a)) = (before.get(&c), after.get(&c)) else {
            return Err(NoBreakdown(format!("CPU {c} is missing from /proc/stat")));
        };
        let d = |x: u64, y: u64| x.saturating_sub(y);
        user += d(a.user, b.user) + d(a.nice, b.nice);
        system += d(a.system, b.system);
        iowait += d(a.iowait, b.iowait);
        other += d(a.irq, b.irq) + d(a.softirq, b.softirq) + d(a.steal, b.steal);
        idle += d(a.idle, b.idle);
    }
    let ticks = user + system + iowait + other + idle;
    if ticks == 0 {
        return Err(NoBreakdown(
            "no /proc/stat tick passed during the step".into(),
        ));
    }
    let f = |x: u64| x as f64 / ticks as f64;
    Ok(Breakdown {
        user: f(user),
        system: f(system),
        iowait: f(iowait),
        other: f(other),
        idle: f(idle),
        ticks,
    })
}

/// One job: `iterations` dependent integer operations (the same work every time).
pub fn job(iterations: u64) -> u64 {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..iterations {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(i | 1);
        x ^= x >> 29;
    }
    std::hint::black_box(x)
}

/// Iterations of [`job`] lasting about `target` on this thread.
pub fn calibrate_job(target: Duration) -> u64 {
    let mut n: u64 = 1_000;
    loop {
        let t = Instant::now();
        job(n);
        let e = t.elapsed();
        if e >= target / 4 || n >= 1 << 40 {
            let scale = target.as_secs_f64() / e.as_secs_f64().max(1e-9);
            return ((n as f64 * scale) as u64).max(1);
        }
        n *= 4;
    }
}

/// The open-loop load as a benchmark: each sample is one step at `rate_per_s` (the
/// maximum when `None`) on the placement's CPUs.
#[derive(Clone)]
pub struct OpenLoop {
    pub job_iterations: u64,
    pub rate_per_s: Option<f64>,
    pub step: Duration,
    pub ticks: Arc<Mutex<dyn TickSource>>,
}

impl OpenLoop {
    pub fn info() -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "utilisation".into(),
            unit: "jobs/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1.0 },
            description: "CPU-bound jobs offered at a fixed rate (open loop), one worker per placement CPU; jobs completed per second, with /proc/stat time of the placement's CPUs".into(),
            origin: "paper 004 s7".into(),
            params: Vec::new(),
            main_param: None,
            report: Default::default(),
        }
    }
}

impl Benchmark for OpenLoop {
    fn info(&self) -> BenchInfo {
        OpenLoop::info()
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        if ctx.placement.cpus.is_empty() {
            return Err(BenchError::unsupported(
                NAME,
                "needs a pinned placement (its CPUs' /proc/stat time is the point)",
            ));
        }
        Ok(Box::new(OpenLoopInstance {
            cpus: ctx.placement.cpus.clone(),
            load: self.clone(),
            pin: true,
        }))
    }
}

/// A prepared [`OpenLoop`].
pub struct OpenLoopInstance {
    pub cpus: Vec<u32>,
    pub load: OpenLoop,
    /// Pin the workers (tests on fake CPU numbers do not).
    pub pin: bool,
}

impl OpenLoopInstance {
    fn read_ticks(&self) -> Result<BTreeMap<u32, CpuTicks>, BenchError> {
        self.load
            .ticks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .read()
            .map_err(|e| BenchError::unsupported(NAME, e.to_string()))
    }

    /// Runs one step; returns the jobs completed inside it and its length.
    fn step_once(&self) -> Result<(u64, Duration), BenchError> {
        let next = AtomicU64::new(0);
        let done = AtomicU64::new(0);
        let t0 = Instant::now();
        let end = t0 + self.load.step;
        let pin_error: Mutex<Option<BenchError>> = Mutex::new(None);
        std::thread::scope(|s| {
            for &cpu in &self.cpus {
                let (next, done, pin_error) = (&next, &done, &pin_error);
                s.spawn(move || {
                    if self.pin
                        && let Err(e) = smtlab_placement::pin::pin_current_thread_to(cpu)
                    {
                        *pin_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.into());
                        return;
                    }
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if let Some(rate) = self.load.rate_per_s {
                            let arrival = t0 + Duration::from_secs_f64(k as f64 / rate);
                            if arrival >= end {
                                break;
                            }
                            let now = Instant::now();
                            if arrival > now {
                                std::thread::sleep(arrival - now);
                            }
                        }
                        if Instant::now() >= end {
                            break;
                        }
                        job(self.load.job_iterations);
                        if Instant::now() <= end {
                            done.fetch_add(1, Ordering::Relaxed);
                        } else {
                            break;
                        }
                    }
                });
            }
        });
        if let Some(e) = pin_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        Ok((done.into_inner(), t0.elapsed().max(self.load.step)))
    }
}

impl Instance for OpenLoopInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let mut work = 0.0;
        let mut elapsed = Duration::ZERO;
        let before = self.read_ticks()?;
        for _ in 0..iterations.max(1) {
            let (n, e) = self.step_once()?;
            work += n as f64;
            elapsed += e;
        }
        let after = self.read_ticks()?;
        let b = breakdown(&before, &after, &self.cpus)
            .map_err(|e| BenchError::unsupported(NAME, e.0))?;
        let mut metrics = BTreeMap::from([
            (USER.to_string(), b.user),
            (SYSTEM.to_string(), b.system),
            (IOWAIT.to_string(), b.iowait),
            (OTHER.to_string(), b.other),
            (IDLE.to_string(), b.idle),
        ]);
        if let Some(r) = self.load.rate_per_s {
            metrics.insert(OFFERED.to_string(), r);
        }
        Ok(RawSample {
            elapsed_ns: elapsed.as_nanos().max(1) as u64,
            // No job finished: report one job's worth of nothing rather than a zero the
            // runner cannot divide; the step then shows as a near-zero rate.
            work: work.max(f64::MIN_POSITIVE),
            cpus: self.cpus.clone(),
            metrics,
            ..RawSample::default()
        })
    }

    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }
}

/// Why the CPU time of a step cannot be broken down (a CPU missing, no tick passed).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct NoBreakdown(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks scripted per read: each read adds the next delta to every CPU.
    struct Scripted {
        now: BTreeMap<u32, CpuTicks>,
        deltas: Vec<CpuTicks>,
        reads: usize,
    }

    impl TickSource for Scripted {
        fn read(&mut self) -> Result<BTreeMap<u32, CpuTicks>, CounterError> {
            if self.reads > 0 {
                let d = self.deltas[(self.reads - 1) % self.deltas.len()];
                for t in self.now.values_mut() {
                    t.user += d.user;
                    t.nice += d.nice;
                    t.system += d.system;
                    t.idle += d.idle;
                    t.iowait += d.iowait;
                    t.irq += d.irq;
                    t.softirq += d.softirq;
                    t.steal += d.steal;
                }
            }
            self.reads += 1;
            Ok(self.now.clone())
        }
    }

    fn ticks(user: u64, system: u64, iowait: u64, idle: u64) -> CpuTicks {
        CpuTicks {
            user,
            system,
            iowait,
            idle,
            ..CpuTicks::default()
        }
    }

    #[test]
    fn the_breakdown_keeps_user_system_iowait_and_idle_apart() {
        let before = BTreeMap::from([
            (0, ticks(10, 10, 10, 10)),
            (1, ticks(0, 0, 0, 0)),
            (7, ticks(0, 0, 0, 0)),
        ]);
        let after = BTreeMap::from([
            (0, ticks(40, 20, 10, 30)),
            (
                1,
                CpuTicks {
                    nice: 10,
                    irq: 5,
                    steal: 5,
                    idle: 20,
                    ..ticks(0, 0, 10, 20)
                },
            ),
            (7, ticks(1000, 0, 0, 0)),
        ]);
        let b = breakdown(&before, &after, &[0, 1]).unwrap();
        // CPU 0: user 30, system 10, idle 20; CPU 1: nice 10, iowait 10, irq+steal 10, idle 20.
        assert_eq!(b.ticks, 110);
        assert!((b.user - 40.0 / 110.0).abs() < 1e-12);
        assert!((b.system - 10.0 / 110.0).abs() < 1e-12);
        assert!((b.iowait - 10.0 / 110.0).abs() < 1e-12);
        assert!((b.other - 10.0 / 110.0).abs() < 1e-12);
        assert!((b.idle - 40.0 / 110.0).abs() < 1e-12);
        assert!(
            breakdown(&before, &after, &[0, 3])
                .unwrap_err()
                .0
                .contains("CPU 3")
        );
        assert!(
            breakdown(&before, &before, &[0])
                .unwrap_err()
                .0
                .contains("no /proc/stat tick")
        );
    }

    #[test]
    fn a_step_reports_the_fake_ticks_and_the_offered_rate() {
        let source = Scripted {
            now: BTreeMap::from([(0, CpuTicks::default()), (1, CpuTicks::default())]),
            deltas: vec![ticks(3, 1, 0, 6)],
            reads: 0,
        };
        let mut inst = OpenLoopInstance {
            cpus: vec![0, 1],
            load: OpenLoop {
                job_iterations: 1_000,
                rate_per_s: Some(500.0),
                step: Duration::from_millis(20),
                ticks: Arc::new(Mutex::new(source)),
            },
            pin: false,
        };
        let raw = inst.sample(1).unwrap();
        assert!((raw.metrics[USER] - 0.3).abs() < 1e-12);
        assert!((raw.metrics[SYSTEM] - 0.1).abs() < 1e-12);
        assert!((raw.metrics[IDLE] - 0.6).abs() < 1e-12);
        assert_eq!(raw.metrics[IOWAIT], 0.0);
        assert_eq!(raw.metrics[OFFERED], 500.0);
        // Open loop: never more jobs than arrived in the step (20 ms at 500/s = 10).
        assert!(raw.work <= 10.0, "{}", raw.work);
        assert!(raw.elapsed_ns >= 20_000_000);
        assert_eq!(inst.fixed_iterations(), Some(1));
    }

    #[test]
    fn the_maximum_runs_jobs_back_to_back() {
        let source = Scripted {
            now: BTreeMap::from([(0, CpuTicks::default())]),
            deltas: vec![ticks(10, 0, 0, 0)],
            reads: 0,
        };
        let mut inst = OpenLoopInstance {
            cpus: vec![0],
            load: OpenLoop {
                job_iterations: 10,
                rate_per_s: None,
                step: Duration::from_millis(10),
                ticks: Arc::new(Mutex::new(source)),
            },
            pin: false,
        };
        let raw = inst.sample(1).unwrap();
        assert!(raw.work >= 1.0);
        assert!(!raw.metrics.contains_key(OFFERED));
        assert_eq!(raw.metrics[USER], 1.0);
    }

    #[test]
    fn a_tick_source_error_fails_the_sample() {
        struct Broken;
        impl TickSource for Broken {
            fn read(&mut self) -> Result<BTreeMap<u32, CpuTicks>, CounterError> {
                Err(CounterError::Unavailable("cannot read /proc/stat".into()))
            }
        }
        let mut inst = OpenLoopInstance {
            cpus: vec![0],
            load: OpenLoop {
                job_iterations: 10,
                rate_per_s: None,
                step: Duration::from_millis(1),
                ticks: Arc::new(Mutex::new(Broken)),
            },
            pin: false,
        };
        assert!(
            inst.sample(1)
                .unwrap_err()
                .to_string()
                .contains("/proc/stat")
        );
    }

    #[test]
    fn jobs_are_calibrated_to_a_positive_count() {
        let n = calibrate_job(Duration::from_micros(200));
        assert!(n >= 1);
        assert_eq!(job(5), job(5));
    }
}
