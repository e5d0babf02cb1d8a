//! `--counters` bookkeeping on fakes (counter source, `/proc/stat` series, clock): the
//! window is made of the stretches between `resume` and `pause`, the work gives the
//! per-unit costs, what is missing says why. One smoke test opens the real counters,
//! without comparing any count with a time (the machine may be busy).

use std::sync::Arc;

use smtlab_model::CpuSet;
use smtlab_model::counters::CounterEvent;
use smtlab_model::counters::derived::Work;
use smtlab_model::counters::os_time::{CpuTicks, CpuTicksOf, OsTimeInterval, OsTimeSeries};
use smtlab_runner::FakeClock;
use smtlab_runner::counting::{
    CellCounting, CountingError, CountingSetup, FakeBackend, SAMPLES_WINDOW,
};

fn series() -> OsTimeSeries {
    let ticks = CpuTicks {
        user: 9,
        system: 1,
        ..CpuTicks::default()
    };
    OsTimeSeries {
        user_hz: 100,
        interval_ns: 100_000_000,
        cpus: CpuSet::from_iter([0]),
        intervals: vec![OsTimeInterval {
            start_ns: 0,
            end_ns: 100_000_000,
            per_cpu: vec![CpuTicksOf { cpu: 0, ticks }],
        }],
    }
}

#[test]
fn the_window_is_the_stretches_between_resume_and_pause() {
    let clock = Arc::new(FakeClock::new(1_000, 0));
    let values = smtlab_counters::fake_values(&[
        (CounterEvent::TaskClock, 3_000_000),
        (CounterEvent::ContextSwitches, 12),
    ]);
    let backend = FakeBackend::new(values, Some(series()), Arc::clone(&clock));
    let cpus = CpuSet::from_iter([0]);
    let mut c = CellCounting::begin_with(&CountingSetup::fake(), &backend, &cpus, None);
    let source = backend
        .source_of_this_thread()
        .expect("opened on this thread");
    assert!(
        !source.lock().unwrap().running,
        "nothing counted before the window"
    );
    clock.advance(5_000);
    for _ in 0..3 {
        c.resume();
        assert!(c.running() && source.lock().unwrap().running);
        c.pause();
        assert!(!c.running() && !source.lock().unwrap().running);
    }
    {
        let s = source.lock().unwrap();
        assert_eq!((s.starts, s.resumes, s.stops), (1, 2, 3), "zeroed once");
    }
    c.stop(Some(Work {
        amount: 3000.0,
        unit: "op".into(),
    }));
    let counted = c.finish(SAMPLES_WINDOW).unwrap();
    assert_eq!(counted.window, SAMPLES_WINDOW);
    assert_eq!(counted.count(CounterEvent::TaskClock), Some(3_000_000.0));
    assert_eq!(counted.count(CounterEvent::ContextSwitches), Some(12.0));
    let per_unit = counted.per_unit.as_ref().unwrap();
    assert_eq!(per_unit.cpu_ns_per_unit, Some(1000.0));
    assert_eq!(per_unit.instructions_per_unit, None);
    assert!(
        counted.hardware_unavailable.is_some(),
        "no PMU in the fake: said so"
    );
    // The steady state starts where the window opened, on the counting clock.
    assert_eq!(counted.steady_from_ns, Some(5_000));
    let os = counted.os_time.as_ref().expect("the fake series");
    assert_eq!(os.intervals.len(), 1);
    assert!(counted.os_time_unavailable.is_none());
    assert!(counted.syscalls.is_none() && counted.syscalls_unavailable.is_some());
}

#[test]
fn what_cannot_be_counted_says_why() {
    let clock = Arc::new(FakeClock::new(0, 0));
    let backend = FakeBackend::new(
        smtlab_counters::fake_values(&[(CounterEvent::TaskClock, 1)]),
        None,
        clock,
    );
    let cpus = CpuSet::from_iter([0]);
    // A window that never opened is an error, not zeros.
    let c = CellCounting::begin_with(&CountingSetup::fake(), &backend, &cpus, None);
    let e = c.finish(SAMPLES_WINDOW).unwrap_err();
    assert!(matches!(e, CountingError::NeverClosed), "{e}");
    assert!(e.to_string().contains("never closed"), "{e}");
    // No /proc/stat here: the counters still count, and the series says why it is missing.
    let mut c = CellCounting::begin_with(&CountingSetup::fake(), &backend, &cpus, None);
    c.resume();
    c.pause();
    c.stop(None);
    let counted = c.finish(SAMPLES_WINDOW).unwrap();
    assert!(counted.os_time.is_none());
    assert_eq!(
        counted.os_time_unavailable.as_deref(),
        Some("no /proc/stat in this test")
    );
}

/// The real counters open, count a worker started after them (inherit) and close; no
/// count is compared with a time.
#[test]
fn real_counters_follow_a_worker_started_after_them() {
    let setup = CountingSetup::probe();
    let cpus = smtlab_placement::pin::get_affinity(0).unwrap();
    let mut c = CellCounting::begin_with(&setup, &smtlab_runner::counting::Perf, &cpus, None);
    c.resume();
    let busy = std::thread::spawn(|| {
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
    });
    smtlab_fixtures::bounded::join(busy, "the busy loop");
    c.pause();
    c.stop(Some(Work {
        amount: 1.0,
        unit: "op".into(),
    }));
    let counted = c.finish(SAMPLES_WINDOW);
    if !setup.availability.software.available {
        // No perf_event at all (a sandbox): an error or events that say why, never zeros.
        if let Ok(counted) = counted {
            assert!(counted.count(CounterEvent::TaskClock).is_none());
        }
        return;
    }
    let counted = counted.unwrap();
    assert!(counted.count(CounterEvent::TaskClock).unwrap() > 0.0);
    assert!(counted.os_time.is_some() != counted.os_time_unavailable.is_some());
}

#[test]
fn events_the_machine_lacks_are_one_line_each_in_setup_and_cell() {
    // Zen 3's saved PMU tree: l2-misses resolves, uops-issued and topdown do not.
    let dir = smtlab_fixtures::pmu_fixture("zen3");
    let cpu = smtlab_counters::CpuId::from_cpuinfo(
        &std::fs::read_to_string(dir.join("cpuinfo")).unwrap(),
    );
    let tree = smtlab_counters::PmuTree::read(&dir.join("devices"), cpu);
    let setup = CountingSetup::fake()
        .with_events("l2-misses,uops-issued,topdown", &tree)
        .unwrap();
    assert_eq!(setup.events.len(), 1);
    assert_eq!(setup.events[0].name, "l2-misses");
    let lines: Vec<String> = setup
        .missing_lines()
        .into_iter()
        .filter(|l| l.starts_with("event "))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    // No tracing here: system calls and interrupts each say so in one line.
    let all = setup.missing_lines();
    for what in ["kernel time by system call", "interrupt time by vector"] {
        assert_eq!(
            all.iter()
                .filter(|l| l.starts_with(&format!("{what} not measured: not in this test")))
                .count(),
            1,
            "{all:?}"
        );
    }
    assert!(lines[0].starts_with("event uops-issued not counted: not offered on Zen 3"));
    assert!(
        CountingSetup::fake()
            .with_events("cpu/event=0x3c", &tree)
            .is_err()
    );

    let clock = Arc::new(FakeClock::new(1_000, 0));
    let values = smtlab_counters::fake_values(&[(CounterEvent::TaskClock, 1_000)]);
    let backend = FakeBackend::new(values, None, Arc::clone(&clock));
    let mut c = CellCounting::begin_with(&setup, &backend, &CpuSet::from_iter([0]), None);
    c.resume();
    c.pause();
    c.stop(None);
    let counted = c.finish(SAMPLES_WINDOW).unwrap();
    let names: Vec<&str> = counted
        .values
        .named_unavailable
        .iter()
        .map(|u| u.name.as_str())
        .collect();
    assert_eq!(names, ["uops-issued", "topdown"]);
}

#[test]
fn events_a_machine_without_a_pmu_cannot_count_join_the_hardware_line() {
    // No PMU at all: `topdown` needs the core PMU the hardware line already names.
    let empty = tempfile::tempdir().unwrap();
    let tree = smtlab_counters::PmuTree::read(empty.path(), None);
    let setup = CountingSetup::fake().with_events("topdown", &tree).unwrap();
    let lines = setup.missing_lines();
    let hardware: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("not in this test"))
        .filter(|l| !l.contains("not measured"))
        .collect();
    assert_eq!(hardware.len(), 1, "{lines:?}");
    assert!(
        hardware[0].ends_with("; --events topdown not counted"),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("event ")), "{lines:?}");
}
