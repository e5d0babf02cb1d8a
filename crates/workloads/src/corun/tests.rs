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

/// Each worker's index and the CPUs it may run on.
type Seen = Arc<std::sync::Mutex<Vec<(usize, Vec<u32>)>>>;

/// A benchmark whose workers (one per CPU of its placement, as `threads=auto` gives)
/// record the CPUs each may run on, and whose partner thread records its own.
struct SpreadProbe {
    workers: Seen,
    placed: Arc<std::sync::Mutex<Vec<u32>>>,
}

struct Idle;
impl smtlab_bench::workers::WorkerState for Idle {
    fn run(&mut self, iterations: u64) -> f64 {
        iterations as f64
    }
}

struct Pool(smtlab_bench::workers::WorkerPool);
impl Instance for Pool {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        self.0.run(iterations)
    }
}

impl Benchmark for SpreadProbe {
    fn info(&self) -> BenchInfo {
        info("spread", Direction::Higher, ValueKind::Rate { scale: 1.0 })
    }
    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let own = smtlab_placement::pin::get_affinity(0).unwrap();
        *self.placed.lock().unwrap() = own.iter().collect();
        let workers = Arc::clone(&self.workers);
        let pool =
            smtlab_bench::workers::WorkerPool::start("spread", ctx.placement, None, move |i| {
                let cpus = smtlab_placement::pin::get_affinity(0).unwrap();
                workers.lock().unwrap().push((i, cpus.iter().collect()));
                Ok(Idle)
            })?;
        Ok(Box::new(Pool(pool)))
    }
}

/// The last two CPUs this process may run on, and a topology of those it may; `None`
/// (the test skipped, saying so) where it may run on one only.
fn two_cpus() -> Option<(u32, u32, smtlab_model::Topology)> {
    let allowed: Vec<u32> = smtlab_placement::pin::get_affinity(0)
        .unwrap()
        .iter()
        .collect();
    let [.., a, b] = allowed.as_slice() else {
        eprintln!("skipped: this process may run on one CPU only");
        return None;
    };
    let topo = smtlab_fixtures::build::cpus_only(allowed.iter().copied());
    Some((*a, *b, topo))
}

#[test]
fn a_partner_over_two_cpus_runs_a_worker_on_each() {
    let Some((a, b, topo)) = two_cpus() else {
        return;
    };
    let cpus = [b, a]; // in the order given, not by number
    let base = placement_of("corun-cores", &[0], &topo);
    let probe = SpreadProbe {
        workers: Arc::default(),
        placed: Arc::default(),
    };
    let (workers, placed) = (Arc::clone(&probe.workers), Arc::clone(&probe.placed));
    let partner = Partner::start(
        Arc::new(probe),
        Params::default(),
        &cpus,
        &base,
        &topo,
        None,
    )
    .unwrap();
    let mut seen = workers.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, [(0, vec![cpus[0]]), (1, vec![cpus[1]])]);
    // The partner's own thread may run on both, and nowhere else.
    let mut own = placed.lock().unwrap().clone();
    own.sort();
    let mut want = cpus.to_vec();
    want.sort();
    assert_eq!(own, want);
    // It samples as any partner does: its window holds its samples.
    partner.begin().unwrap();
    while partner.samples_so_far() < 2 {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(partner.end().unwrap().values.len() >= 2);
}

/// A benchmark of fixed samples: `fixed` iterations (if any), each `ns` long (slept, so
/// a partner's samples take real time; A's are only reported).
struct Timed {
    ns: u64,
    fixed: Option<u64>,
    sleeps: bool,
}

struct TimedInstance(u64, Option<u64>, bool);
impl Instance for TimedInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        if self.2 {
            std::thread::sleep(Duration::from_nanos(self.0 * iterations));
        }
        Ok(RawSample {
            elapsed_ns: self.0 * iterations,
            work: iterations as f64,
            ..RawSample::default()
        })
    }
    fn fixed_iterations(&self) -> Option<u64> {
        self.1
    }
}

impl Benchmark for Timed {
    fn info(&self) -> BenchInfo {
        info("timed", Direction::Higher, ValueKind::Rate { scale: 1.0 })
    }
    fn prepare(&self, _: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        Ok(Box::new(TimedInstance(self.ns, self.fixed, self.sleeps)))
    }
    /// A fixed sample's length; 1 MB and 1 ms of setup each.
    fn cost(&self, _: &BenchContext<'_>) -> Result<CellCost, BenchError> {
        Ok(CellCost {
            memory_bytes: 1 << 20,
            sample_ns: self.fixed.map(|n| n * self.ns),
            longest_sample_ns: None,
            setup_ns: 1_000_000,
        })
    }
}

#[test]
fn a_co_runs_cost_adds_the_partners_and_holds_a_to_its_long_samples() {
    let topo = smtlab_fixtures::build::cpus_only([0, 1]);
    let placement = placement_of("corun-cores", &[0, 1], &topo);
    let timed = |ns, fixed| -> Arc<dyn Benchmark> {
        Arc::new(Timed {
            ns,
            fixed,
            sleeps: false,
        })
    };
    let cost = |partner: Option<Arc<dyn Benchmark>>, reference: bool| {
        let corun = CoRun {
            a: timed(1_000, None),
            partner: partner.map(|bench| PartnerSpec {
                bench,
                params: Params::default(),
            }),
            fixed_iterations: None,
            partner_reference: reference,
        };
        corun
            .cost(&BenchContext {
                params: &Params::default(),
                placement: &placement,
                topology: &topo,
                client: None,
            })
            .unwrap()
    };
    // Alone: A's own cost, its samples calibrated.
    let alone = cost(None, true);
    assert_eq!((alone.memory_bytes, alone.sample_ns), (1 << 20, None));
    // Beside a partner of 4 ms passes: five of them, twice over with its reference.
    let long = cost(Some(timed(4_000_000, Some(1))), true);
    assert_eq!(long.sample_ns, Some(2 * 5 * 4_000_000));
    assert_eq!(long.memory_bytes, 2 << 20);
    assert_eq!(long.setup_ns, 2 * 1_000_000 + 4_000_000);
    assert_eq!(
        cost(Some(timed(4_000_000, Some(1))), false).sample_ns,
        Some(5 * 4_000_000)
    );
    // A partner of short samples leaves A's calibrated.
    assert_eq!(cost(Some(timed(1_000, Some(1))), true).sample_ns, None);
}

#[test]
fn a_sample_beside_a_partner_of_long_samples_holds_several_of_them() {
    let Some((a, b, topo)) = two_cpus() else {
        return;
    };
    let placement = placement_of("corun-cores", &[a, b], &topo);
    let fixed_beside = |partner_ns: u64, a_fixed: Option<u64>| {
        let corun = CoRun {
            a: Arc::new(Timed {
                ns: 1_000,
                fixed: a_fixed,
                sleeps: false,
            }),
            partner: Some(PartnerSpec {
                bench: Arc::new(Timed {
                    ns: partner_ns,
                    fixed: Some(1),
                    sleeps: true,
                }),
                params: Params::default(),
            }),
            fixed_iterations: None,
            partner_reference: true,
        };
        let ctx = BenchContext {
            params: &Params::default(),
            placement: &placement,
            topology: &topo,
            client: None,
        };
        corun.prepare(&ctx).unwrap().fixed_iterations()
    };
    // A partner pass of 4 ms: A's samples (1 us an iteration) last at least 20 ms.
    let n = fixed_beside(4_000_000, None).expect("A's samples held to the partner's");
    assert!(n * 1_000 >= 5 * 4_000_000, "{n} iterations");
    assert!(n * 1_000 < 2 * 16 * 5 * 4_000_000, "{n} iterations");
    // An A of fixed iterations (one run of a command) runs a whole multiple of them.
    let n = fixed_beside(4_000_000, Some(3)).expect("A's runs held to the partner's");
    assert_eq!(
        n,
        3 * (5 * 4_000_000u64).div_ceil(3 * 1_000),
        "{n} iterations"
    );
    // A partner cut to short samples leaves A to the runner's calibration, or its own.
    assert_eq!(fixed_beside(200_000, None), None);
    assert_eq!(fixed_beside(200_000, Some(3)), Some(3));
}

/// A server workload of a test: it needs a client side, starts a client thread from it
/// and records the client CPUs it was given; each sample asks that thread for a reply.
struct FakeServer {
    client_cpus: Arc<std::sync::Mutex<Vec<u32>>>,
}

struct FakeServerInstance {
    ask: std::sync::mpsc::Sender<std::sync::mpsc::SyncSender<()>>,
}

impl Instance for FakeServerInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.ask.send(tx).expect("the client thread runs");
        rx.recv_timeout(Duration::from_secs(10))
            .expect("the client thread replies");
        Ok(RawSample {
            elapsed_ns: 3_000_000,
            work: iterations as f64,
            ..RawSample::default()
        })
    }
    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }
}

impl Benchmark for FakeServer {
    fn info(&self) -> BenchInfo {
        info("served", Direction::Higher, ValueKind::Rate { scale: 1.0 })
    }
    fn client_side(&self) -> bool {
        true
    }
    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let client = ctx.client_side("served")?;
        *self.client_cpus.lock().unwrap() = client.cpus().iter().collect();
        let (ask, asked) = std::sync::mpsc::channel::<std::sync::mpsc::SyncSender<()>>();
        client
            .spawn("served-client", None, move || {
                for reply in asked {
                    let _ = reply.send(());
                }
            })
            .map_err(|e| BenchError::io("served", "client thread", e))?;
        Ok(Box::new(FakeServerInstance { ask }))
    }
}

#[test]
fn a_server_partner_drives_its_load_from_a_client_side_of_its_own() {
    let Some((a, b, topo)) = two_cpus() else {
        return;
    };
    let placement = placement_of("corun-cores", &[a, b], &topo);
    let client_cpus = Arc::default();
    let server = || FakeServer {
        client_cpus: Arc::clone(&client_cpus),
    };
    let beside = |a_bench: Arc<dyn Benchmark>| CoRun {
        a: a_bench,
        partner: Some(PartnerSpec {
            bench: Arc::new(server()),
            params: Params::default(),
        }),
        fixed_iterations: None,
        partner_reference: false,
    };
    let ruler = || -> Arc<dyn Benchmark> {
        Arc::new(Timed {
            ns: 1_000,
            fixed: None,
            sleeps: false,
        })
    };
    let corun = beside(ruler());
    assert!(
        corun.client_side(),
        "the session must place the partner's load"
    );
    let params = Params::default();
    let ctx = |client| BenchContext {
        params: &params,
        placement: &placement,
        topology: &topo,
        client,
    };
    // Without a client side the partner cannot start, and the cell says why.
    let Err(e) = corun.prepare(&ctx(None)) else {
        panic!("a server partner prepared without a client side");
    };
    assert!(
        e.to_string()
            .contains(smtlab_bench::client::NEEDS_CLIENT_SIDE),
        "{e}"
    );
    let session = ClientSide::start(std::iter::once(a).collect()).unwrap();
    let mut inst = corun.prepare(&ctx(Some(&session))).unwrap();
    assert_eq!(*client_cpus.lock().unwrap(), [a], "the cell's client CPUs");
    // The server's samples (3 ms: long) hold A's to five of them, and each of the
    // partner's samples reached its client thread.
    let n = inst
        .fixed_iterations()
        .expect("held to the server's samples");
    assert!(n * 1_000 >= 5 * 3_000_000, "{n}");
    let raw = inst.sample(n).unwrap();
    assert!(raw.metrics.contains_key(PARTNER_SAMPLES), "{raw:?}");
    drop(inst);
    // The copy was the partner's own: the session's client side still runs jobs.
    session.spawn("after", None, || ()).unwrap().join().unwrap();
    // Two servers in one co-run: one line, not a shared client side.
    let Err(e) = beside(Arc::new(server())).prepare(&ctx(Some(&session))) else {
        panic!("two servers in one co-run");
    };
    assert!(e.to_string().contains("two client sides"), "{e}");
}
