use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use smtlab_bench::{BenchError, Instance, RawSample};
use smtlab_model::{BenchInfo, Direction, ValueKind};

use super::*;

fn info(name: &str, dir: Direction, kind: ValueKind) -> BenchInfo {
    BenchInfo {
        name: name.into(),
        group: "test".into(),
        unit: "ns".into(),
        direction: dir,
        value_kind: kind,
        description: "a fake".into(),
        origin: "tests".into(),
        params: Vec::new(),
        main_param: None,
        report: Default::default(),
    }
}

/// A partner whose samples last a little real time and are counted; it says when it is
/// dropped and on which thread.
struct FakePartner {
    samples: Arc<AtomicU64>,
    dropped: Arc<AtomicBool>,
    dropped_on_partner_thread: Arc<AtomicBool>,
}

impl Instance for FakePartner {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let t = Instant::now();
        std::thread::sleep(Duration::from_micros(50 * iterations));
        self.samples.fetch_add(1, Ordering::SeqCst);
        Ok(RawSample {
            elapsed_ns: t.elapsed().as_nanos().max(1) as u64,
            work: iterations as f64,
            ..RawSample::default()
        })
    }
}

impl Drop for FakePartner {
    fn drop(&mut self) {
        let on_partner = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("partner-"));
        self.dropped_on_partner_thread
            .store(on_partner, Ordering::SeqCst);
        self.dropped.store(true, Ordering::SeqCst);
    }
}

struct Probe {
    samples: Arc<AtomicU64>,
    dropped: Arc<AtomicBool>,
    on_thread: Arc<AtomicBool>,
}

fn fake_partner() -> (Partner, Probe) {
    let probe = Probe {
        samples: Arc::default(),
        dropped: Arc::default(),
        on_thread: Arc::default(),
    };
    let fake = FakePartner {
        samples: Arc::clone(&probe.samples),
        dropped: Arc::clone(&probe.dropped),
        dropped_on_partner_thread: Arc::clone(&probe.on_thread),
    };
    let partner = Partner::spawn(
        info("hog", Direction::Higher, ValueKind::Rate { scale: 1.0 }),
        Box::new(move || Ok(Box::new(fake) as Box<dyn Instance>)),
    )
    .unwrap();
    (partner, probe)
}

/// A's sample: returns once the partner has finished `wait_for` samples since A began,
/// so the test does not depend on how fast anything runs.
struct WaitingA {
    partner_samples: Arc<AtomicU64>,
    wait_for: u64,
}

impl Instance for WaitingA {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let t = Instant::now();
        let start = self.partner_samples.load(Ordering::SeqCst);
        while self.partner_samples.load(Ordering::SeqCst) < start + self.wait_for {
            assert!(t.elapsed() < Duration::from_secs(30), "partner stalled");
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(RawSample {
            elapsed_ns: t.elapsed().as_nanos().max(1) as u64,
            work: iterations as f64,
            ..RawSample::default()
        })
    }
}

#[test]
fn the_partner_runs_only_inside_a_sample_and_reports_its_own_samples() {
    let (partner, probe) = fake_partner();
    assert!(partner.iterations() >= 1);
    // Parked after calibration: no sample while nobody measures.
    let parked = probe.samples.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(probe.samples.load(Ordering::SeqCst), parked);

    let mut inst = CoRunInstance {
        a: Box::new(WaitingA {
            partner_samples: Arc::clone(&probe.samples),
            wait_for: 4,
        }),
        partner: Some(partner),
        fixed: None,
        partner_reference: true,
    };
    let t = Instant::now();
    let raw = inst.sample(3).unwrap();
    // The waits for the partner to start and end its samples are stated, apart from
    // A's own time and the reference window (as long as A's sample).
    let wall = t.elapsed().as_nanos() as u64;
    assert!(raw.waited_ns > 0, "{}", raw.waited_ns);
    assert!(
        raw.waited_ns + 2 * raw.elapsed_ns <= wall,
        "{} {wall}",
        raw.waited_ns
    );
    // The sample in progress when A started is not counted; at least the following
    // ones that ended before A did are.
    let n = raw.metrics[PARTNER_SAMPLES];
    assert!(n >= 2.0, "{n} partner samples inside A's");
    assert!(raw.metrics[PARTNER_VALUE] > 0.0);
    // The partner's own reference: a window as long as A's sample (which lasted at least
    // four partner samples), A idle; the window is wall time, so on a very busy machine
    // one may catch no whole partner sample: one of a few samples has it.
    let with_reference = std::iter::once(Ok(raw.clone()))
        .chain((0..4).map(|_| inst.sample(3)))
        .map(Result::unwrap)
        .filter(|r| r.metrics.get(PARTNER_ALONE_VALUE).is_some_and(|v| *v > 0.0))
        .count();
    assert!(with_reference >= 1);
    assert_eq!(raw.series[RUN_NS], vec![raw.elapsed_ns as f64]);

    // Parked again once A's sample returned.
    let after = probe.samples.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(probe.samples.load(Ordering::SeqCst), after);

    // Dropping the cell stops the partner, drops its instance on its own thread and
    // joins the thread before returning.
    drop(inst);
    assert!(probe.dropped.load(Ordering::SeqCst));
    assert!(probe.on_thread.load(Ordering::SeqCst));
}

#[test]
fn a_partner_that_cannot_prepare_fails_the_cell_with_its_name() {
    let err = Partner::spawn(
        info("broken", Direction::Higher, ValueKind::Rate { scale: 1.0 }),
        Box::new(|| {
            Err(BenchError::Unsupported {
                bench: "broken".into(),
                reason: "needs 2 CPUs".into(),
            })
        }),
    )
    .err()
    .expect("prepare failed");
    let text = err.to_string();
    assert!(
        text.contains("broken") && text.contains("as the partner"),
        "{text}"
    );
    assert!(text.contains("needs 2 CPUs"), "{text}");
}

/// A sample that fails in the partner surfaces in A's next sample instead of hanging it.
#[test]
fn a_failing_partner_fails_the_sample() {
    struct FailsLater(u64);
    impl Instance for FailsLater {
        fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
            self.0 += 1;
            if self.0 > 3 {
                return Err(BenchError::Check {
                    bench: "flaky".into(),
                    reason: "checksum".into(),
                });
            }
            Ok(RawSample {
                elapsed_ns: 2 * PARTNER_SAMPLE_NS,
                work: iterations as f64,
                ..RawSample::default()
            })
        }
    }
    let partner = Partner::spawn(
        info("flaky", Direction::Higher, ValueKind::Rate { scale: 1.0 }),
        Box::new(|| Ok(Box::new(FailsLater(0)) as Box<dyn Instance>)),
    )
    .unwrap();
    let mut inst = CoRunInstance {
        a: Box::new(Constant(1_000)),
        partner: Some(partner),
        fixed: Some(7),
        partner_reference: false,
    };
    assert_eq!(inst.fixed_iterations(), Some(7));
    let mut failed = None;
    for _ in 0..10 {
        if let Err(e) = inst.sample(1) {
            failed = Some(e.to_string());
            break;
        }
    }
    let text = failed.expect("the partner's failure reached A");
    assert!(
        text.contains("checksum") && text.contains("as the partner"),
        "{text}"
    );
}

/// A sample of a fixed length per iteration.
struct Constant(u64);
impl Instance for Constant {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        Ok(RawSample {
            elapsed_ns: self.0 * iterations,
            work: iterations as f64,
            ..RawSample::default()
        })
    }
}
