//! `--counters` on a real (tiny) benchmark: the window covers the measured samples, the
//! worker threads a sample starts are counted with the measuring thread (inherit), and
//! the per-unit costs use the samples' work.

use std::time::{Duration, Instant};

use smtlab_bench::{BenchError, Instance, RawSample};
use smtlab_model::counters::CounterEvent;
use smtlab_model::{BenchInfo, CpuSet, Direction, ValueKind};
use smtlab_runner::counting::{CellCounting, CountingSetup, SAMPLES_WINDOW};
use smtlab_runner::{Monotonic, RunConfig, measure};

/// Each sample spins on a new worker thread for `iterations` microseconds while the
/// measuring thread waits in `join`: only inherited counting sees the spinning.
struct SpinOnWorker;

impl Instance for SpinOnWorker {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let t0 = Instant::now();
        std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_micros(iterations);
            let mut x = 0u64;
            while Instant::now() < end {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        })
        .join()
        .expect("worker");
        Ok(RawSample {
            elapsed_ns: t0.elapsed().as_nanos() as u64,
            work: iterations as f64,
            ..RawSample::default()
        })
    }

    fn fixed_iterations(&self) -> Option<u64> {
        Some(5_000)
    }
}

fn info() -> BenchInfo {
    BenchInfo {
        name: "spin".into(),
        group: "test".into(),
        unit: "ns".into(),
        direction: Direction::Lower,
        value_kind: ValueKind::TimePerOp,
        description: "spins on a worker thread".into(),
        origin: "test".into(),
        params: vec![],
    }
}

#[test]
fn counts_the_measured_samples_of_the_workers() {
    let setup = CountingSetup::probe();
    let cpus: CpuSet = [0].into_iter().collect();
    let mut counting = CellCounting::begin(&setup, &cpus, None);
    let cfg = RunConfig {
        min_samples: 3,
        max_samples: 3,
        ..RunConfig::quick()
    };
    let result = measure(&mut SpinOnWorker, &info(), &cfg, &Monotonic, &mut counting).unwrap();
    let traced = counting.can_trace();
    counting.trace("one extra sample", || {
        SpinOnWorker
            .sample(1_000)
            .map(drop)
            .map_err(|e| e.to_string())
    });
    let c = counting.finish(SAMPLES_WINDOW).unwrap();
    if traced {
        // Where tracefs is mounted and permitted: the extra sample's calls, including
        // the worker thread it started (clone from the measuring thread, its exit).
        let p = c.syscalls.as_ref().expect("a syscall profile");
        assert!(p.syscalls.iter().map(|s| s.calls).sum::<u64>() > 0);
        assert_eq!(c.syscalls_window.as_deref(), Some("one extra sample"));
    } else {
        assert!(c.syscalls_unavailable.is_some());
    }
    assert_eq!(c.window, SAMPLES_WINDOW);
    let work = c.work.as_ref().unwrap();
    assert_eq!(work.unit, "op");
    assert_eq!(work.amount, 3.0 * 5_000.0);
    assert!(c.steady_from_ns.is_some());
    match (&c.os_time, &c.os_time_unavailable) {
        (Some(s), None) => assert!(!s.intervals.is_empty()),
        other => panic!("/proc/stat is readable here: {other:?}"),
    }
    assert!(c.syscalls.is_some() != c.syscalls_unavailable.is_some());
    if !setup.availability.software.available {
        // No perf_event at all (a sandbox): every event says why, nothing is made up.
        assert!(c.count(CounterEvent::TaskClock).is_none());
        assert!(!c.values.unavailable.is_empty());
        return;
    }
    let task_clock_ns = c.count(CounterEvent::TaskClock).unwrap();
    let spun_ns: u64 = result.samples.iter().map(|s| s.elapsed_ns).sum();
    // The workers spun for (almost) all of each sample, on threads created after the
    // counters opened; the warm-up sample is not counted.
    assert!(
        task_clock_ns > 0.8 * spun_ns as f64,
        "task-clock {task_clock_ns} ns vs {spun_ns} ns of samples"
    );
    assert!(
        task_clock_ns < 1.5 * spun_ns as f64 + 5e6,
        "task-clock {task_clock_ns} ns includes more than the measured samples ({spun_ns} ns)"
    );
    assert!(c.count(CounterEvent::PageFaults).is_some());
    let per_unit = c.per_unit.as_ref().unwrap();
    assert_eq!(per_unit.cpu_ns_per_unit, Some(task_clock_ns / work.amount));
    if !c.has_hardware() {
        assert!(c.hardware_unavailable.is_some());
        assert_eq!(per_unit.instructions_per_unit, None);
    }
}
