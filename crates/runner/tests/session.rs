//! The session with fake benchmarks, a fake clock and fake counters: which cells are
//! measured in which order, interleaving, rounds, skipped cells and their reasons, the
//! client side, and counters enabled around each cell's own samples only.

use std::ops::ControlFlow;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use smtlab_bench::process::ChildGroup;
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, Params, RawSample};
use smtlab_model::counters::CounterEvent;
use smtlab_model::{
    BenchInfo, CellKey, CellRecord, CpuSet, Direction, ResolvedPlacement, SkippedCell, Topology,
    ValueKind,
};
use smtlab_placement::ClientRule;
use smtlab_runner::counting::{CountingSetup, FakeBackend};
use smtlab_runner::session::{CellPlan, Counting, Group, Measured, Session, SessionObserver};
use smtlab_runner::{FakeClock, Overheads, RunConfig};

/// What happened, in order, across all cells.
type Log = Arc<Mutex<Vec<String>>>;

fn log(l: &Log, s: String) {
    l.lock().unwrap().push(s);
}

struct FakeBench {
    name: &'static str,
    client: bool,
    /// `prepare` fails on this placement.
    fail_on: Option<&'static str>,
    ns_per_iter: u64,
    clock: Arc<FakeClock>,
    log: Log,
    backend: Option<Arc<FakeBackend>>,
}

struct FakeInstance {
    placement: String,
    ns_per_iter: u64,
    clock: Arc<FakeClock>,
    log: Log,
    backend: Option<Arc<FakeBackend>>,
    /// A process started through the client side: alive as long as the client side is.
    client_child: Option<ChildGroup>,
}

impl Benchmark for FakeBench {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: self.name.into(),
            group: "test".into(),
            unit: "ns".into(),
            direction: Direction::Lower,
            value_kind: ValueKind::TimePerOp,
            description: "a fake".into(),
            origin: "tests".into(),
            params: Vec::new(),
            main_param: None,
            report: Default::default(),
        }
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let p = ctx.placement.name.clone();
        log(
            &self.log,
            format!("prepare {} {p} client={}", self.name, ctx.client.is_some()),
        );
        if self.fail_on == Some(p.as_str()) {
            return Err(BenchError::Unsupported {
                bench: self.name.into(),
                reason: format!("cannot run on {p}"),
            });
        }
        let client_child = match ctx.client {
            Some(c) => {
                let mut cmd = std::process::Command::new("sleep");
                cmd.arg("60");
                Some(c.command(cmd).expect("a client process"))
            }
            None => None,
        };
        Ok(Box::new(FakeInstance {
            placement: p,
            ns_per_iter: self.ns_per_iter,
            clock: Arc::clone(&self.clock),
            log: Arc::clone(&self.log),
            backend: self.backend.clone(),
            client_child,
        }))
    }

    fn client_side(&self) -> bool {
        self.client
    }
}

impl Instance for FakeInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let counting = self.backend.as_ref().map(|b| {
            let own = b
                .source_of_this_thread()
                .is_some_and(|s| s.lock().unwrap().running);
            let others = b
                .opened
                .lock()
                .unwrap()
                .iter()
                .filter(|(t, _)| *t != std::thread::current().id())
                .any(|(_, s)| s.lock().unwrap().running);
            format!(" own={own} others={others}")
        });
        log(
            &self.log,
            format!("sample {}{}", self.placement, counting.unwrap_or_default()),
        );
        let elapsed_ns = iterations * self.ns_per_iter;
        self.clock.advance(elapsed_ns);
        Ok(RawSample {
            elapsed_ns,
            work: iterations as f64,
            ..RawSample::default()
        })
    }

    fn fixed_iterations(&self) -> Option<u64> {
        Some(1000)
    }
}

impl Drop for FakeInstance {
    fn drop(&mut self) {
        let client_alive = self
            .client_child
            .as_mut()
            .map(|c| matches!(c.try_wait(), Ok(None)));
        log(
            &self.log,
            format!("drop {} client_alive={client_alive:?}", self.placement),
        );
    }
}

/// A machine as wide as this one (so client threads can really be pinned), no SMT.
fn topo() -> Topology {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    smtlab_fixtures::build::cpus_only(0..n)
}

fn placement(name: &str, cpus: &[u32]) -> ResolvedPlacement {
    ResolvedPlacement {
        name: name.into(),
        spec: name.into(),
        cpus: cpus.to_vec(),
        cores: cpus.len() as u32,
        threads_per_core: 1,
        packages: 1,
        core_order: Default::default(),
        cpu_order: Default::default(),
        core_kinds: vec![],
    }
}

fn cfg() -> RunConfig {
    RunConfig {
        min_samples: 3,
        max_samples: 3,
        warmup_ns: 0,
        known_overheads: Some(Overheads {
            clock_cost_ns: 20.0,
            loop_cost_ns_per_iter: 0.5,
        }),
        ..RunConfig::default()
    }
}

fn plan<'a>(bench: &'a FakeBench, placements: &[ResolvedPlacement]) -> Group<'a> {
    placements
        .iter()
        .map(|p| CellPlan {
            bench,
            info: bench.info(),
            params: Params::default(),
            key: CellKey {
                benchmark: bench.name.into(),
                params: Default::default(),
                conditions: Default::default(),
                placement: p.name.clone(),
            },
            placement: Ok(p.clone()),
            work_unit: None,
            warmup_samples: None,
        })
        .collect()
}

#[derive(Default)]
struct Collect {
    order: Vec<String>,
    cells: Vec<CellRecord>,
    skipped: Vec<SkippedCell>,
    notes: Vec<Option<String>>,
    stop_after: Option<usize>,
}

impl SessionObserver for Collect {
    fn measured(&mut self, m: Measured<'_>) -> ControlFlow<()> {
        self.order.push(format!(
            "{} {}",
            m.record.benchmark, m.record.placement_spec
        ));
        self.cells.push(m.record.clone());
        self.notes.push(m.counters_note.map(str::to_string));
        if self.stop_after == Some(self.cells.len()) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn skipped(&mut self, cell: &SkippedCell) -> ControlFlow<()> {
        self.order.push(format!(
            "{} {} skipped",
            cell.key.benchmark, cell.key.placement
        ));
        self.skipped.push(cell.clone());
        ControlFlow::Continue(())
    }
}

fn bench(name: &'static str, clock: &Arc<FakeClock>, log: &Log) -> FakeBench {
    FakeBench {
        name,
        client: false,
        fail_on: None,
        ns_per_iter: 10_000,
        clock: Arc::clone(clock),
        log: Arc::clone(log),
        backend: None,
    }
}

fn session<'a>(
    topo: &'a Topology,
    cfg: &'a RunConfig,
    clock: &'a FakeClock,
    stop: &'a AtomicBool,
) -> Session<'a> {
    Session {
        topo,
        cfg,
        clock,
        client_rule: ClientRule::Apart,
        counting: None,
        repeat: 1,
        interleave: false,
        stop,
        system: None,
        handoff_at_start: &[],
    }
}

fn samples_of(log: &Log) -> Vec<String> {
    log.lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("sample "))
        .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
        .collect()
}

#[test]
fn cells_one_after_the_other_in_plan_order() {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let (a, b) = (bench("a", &clock, &log), bench("b", &clock, &log));
    let ps = [placement("p0", &[0]), placement("p1", &[0])];
    let (topo, cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    let s = session(&topo, &cfg, &clock, &stop);
    let mut out = Collect::default();
    s.run(vec![plan(&a, &ps), plan(&b, &ps)], &mut out);
    assert_eq!(out.order, ["a p0", "a p1", "b p0", "b p1"]);
    // Not interleaved: all samples of p0 (1 warm-up + 3), then all of p1.
    let samples = samples_of(&log);
    assert_eq!(
        &samples[..8],
        ["p0", "p0", "p0", "p0", "p1", "p1", "p1", "p1"]
    );
    for c in &out.cells {
        assert_eq!(c.result.samples.len(), 3);
        assert!(c.result.rounds.is_empty());
    }
}

#[test]
fn interleaved_cells_take_turns_after_their_warm_up() {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let a = bench("a", &clock, &log);
    let ps = [placement("p0", &[0]), placement("p1", &[0])];
    let (topo, cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    let mut s = session(&topo, &cfg, &clock, &stop);
    s.interleave = true;
    let mut out = Collect::default();
    s.run(vec![plan(&a, &ps)], &mut out);
    assert_eq!(out.order, ["a p0", "a p1"]);
    // Warm-up of each in order, then one measured sample of each in turn.
    assert_eq!(
        samples_of(&log),
        ["p0", "p1", "p0", "p1", "p0", "p1", "p0", "p1"]
    );
}

/// A fake benchmark whose instances hold `bytes` (as far as the plan is told).
struct Holding<'a> {
    inner: &'a FakeBench,
    bytes: u64,
}

impl Benchmark for Holding<'_> {
    fn info(&self) -> BenchInfo {
        self.inner.info()
    }
    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        self.inner.prepare(ctx)
    }
    fn cost(&self, _: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        Ok(smtlab_bench::CellCost {
            memory_bytes: self.bytes,
            ..Default::default()
        })
    }
}

#[test]
fn a_group_above_the_memory_bound_is_measured_one_placement_at_a_time() {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let a = bench("a", &clock, &log);
    let ps = [placement("p0", &[0]), placement("p1", &[0])];
    let topo = topo();
    let stop = AtomicBool::new(false);
    fn group<'a>(b: &'a dyn Benchmark, ps: &[ResolvedPlacement]) -> Group<'a> {
        ps.iter()
            .map(|p| CellPlan {
                bench: b,
                info: b.info(),
                params: Params::default(),
                key: CellKey {
                    benchmark: "a".into(),
                    params: Default::default(),
                    conditions: Default::default(),
                    placement: p.name.clone(),
                },
                placement: Ok(p.clone()),
                work_unit: None,
                warmup_samples: None,
            })
            .collect()
    }
    // 600 MiB each: together 1.2 GiB, above a 1 GiB bound, so p0 first, then p1.
    let big = Holding {
        inner: &a,
        bytes: 600 << 20,
    };
    let cfg = RunConfig {
        memory_budget_bytes: Some(1 << 30),
        ..cfg()
    };
    let mut s = session(&topo, &cfg, &clock, &stop);
    s.interleave = true;
    let mut out = Collect::default();
    s.run(vec![group(&big, &ps)], &mut out);
    assert_eq!(out.order, ["a p0", "a p1"]);
    assert_eq!(
        samples_of(&log),
        ["p0", "p0", "p0", "p0", "p1", "p1", "p1", "p1"]
    );
    // Within the bound they take turns as usual.
    log.lock().unwrap().clear();
    let cfg = RunConfig {
        memory_budget_bytes: Some(2 << 30),
        ..cfg
    };
    let mut s = session(&topo, &cfg, &clock, &stop);
    s.interleave = true;
    let mut out = Collect::default();
    s.run(vec![group(&big, &ps)], &mut out);
    assert_eq!(
        samples_of(&log),
        ["p0", "p1", "p0", "p1", "p0", "p1", "p0", "p1"]
    );
}

#[test]
fn rounds_come_from_fresh_instances_and_reach_the_record() {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let a = bench("a", &clock, &log);
    let ps = [placement("p0", &[0]), placement("p1", &[0])];
    let (topo, cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    let mut s = session(&topo, &cfg, &clock, &stop);
    s.repeat = 3;
    s.interleave = true;
    let mut out = Collect::default();
    s.run(vec![plan(&a, &ps)], &mut out);
    for c in &out.cells {
        assert_eq!(c.result.rounds.len(), 3, "every round is in the record");
        assert_eq!(c.result.samples.len(), 9);
    }
    let prepares = log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.starts_with("prepare"))
        .count();
    assert_eq!(prepares, 6, "a fresh instance per round and placement");
}

#[test]
fn skipped_cells_say_why_and_the_others_are_measured() {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let mut a = bench("a", &clock, &log);
    a.fail_on = Some("p1");
    let ps = [placement("p0", &[0]), placement("p1", &[0])];
    let (topo, cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    for interleave in [false, true] {
        let mut s = session(&topo, &cfg, &clock, &stop);
        s.interleave = interleave;
        let mut group = plan(&a, &ps);
        group.push(CellPlan {
            placement: Err(smtlab_placement::PlacementError::Unsatisfiable {
                placement: "1c2t".into(),
                needs: "SMT".into(),
                has: "none".into(),
            }
            .into()),
            key: CellKey {
                benchmark: "a".into(),
                params: Default::default(),
                conditions: Default::default(),
                placement: "1c2t".into(),
            },
            ..plan(&a, &ps[..1]).remove(0)
        });
        let mut out = Collect::default();
        s.run(vec![group], &mut out);
        assert_eq!(out.order, ["a p0", "a p1 skipped", "a 1c2t skipped"]);
        assert!(out.skipped[0].reason.contains("cannot run on p1"));
        assert_eq!(
            out.skipped[1].reason,
            "1c2t needs SMT; this machine has none"
        );
    }
}

#[test]
fn the_client_side_goes_to_benchmarks_that_ask_and_outlives_their_instance() {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let mut server = bench("server", &clock, &log);
    server.client = true;
    let plain = bench("plain", &clock, &log);
    let cpu = smtlab_placement::pin::get_affinity(0)
        .unwrap()
        .last()
        .unwrap();
    let ps = [placement("p", &[cpu])];
    let (topo, cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    let mut s = session(&topo, &cfg, &clock, &stop);
    // The only CPU this test can count on: shared with the placement, as asked.
    s.client_rule = ClientRule::Cpus {
        cpus: CpuSet::from_iter([cpu]),
        shared: true,
    };
    let mut out = Collect::default();
    s.run(vec![plan(&server, &ps), plan(&plain, &ps)], &mut out);
    assert_eq!(out.order, ["server p", "plain p"]);
    let l = log.lock().unwrap().clone();
    assert!(
        l.contains(&"prepare server p client=true".to_string()),
        "{l:?}"
    );
    assert!(
        l.contains(&"prepare plain p client=false".to_string()),
        "{l:?}"
    );
    // The client process was still there when the server's instance went.
    assert!(
        l.contains(&"drop p client_alive=Some(true)".to_string()),
        "{l:?}"
    );

    // Apart from a placement that takes every CPU, there is no room: skipped, said why.
    let all: Vec<u32> = topo.cpus.iter().collect();
    let mut s = session(&topo, &cfg, &clock, &stop);
    s.client_rule = ClientRule::Apart;
    let mut out = Collect::default();
    s.run(vec![plan(&server, &[placement("all", &all)])], &mut out);
    assert_eq!(out.skipped.len(), 1);
    assert!(!out.skipped[0].reason.is_empty());
}

#[test]
fn interleaved_counters_count_each_cells_own_samples_only() {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let values = smtlab_counters::fake_values(&[(CounterEvent::TaskClock, 6_000_000)]);
    // Three intervals, the first the stretch before the cell began working.
    use smtlab_model::counters::os_time::{CpuTicks, CpuTicksOf, OsTimeInterval, OsTimeSeries};
    let iv = |start_ns, end_ns, user| OsTimeInterval {
        start_ns,
        end_ns,
        per_cpu: vec![CpuTicksOf {
            cpu: 0,
            ticks: CpuTicks {
                user,
                ..CpuTicks::default()
            },
        }],
    };
    let series = OsTimeSeries {
        user_hz: 100,
        interval_ns: 100_000_000,
        cpus: [0].into_iter().collect(),
        intervals: vec![iv(0, 10, 7), iv(20, 30, 1), iv(50, 60, 2)],
    };
    let backend = Arc::new(FakeBackend::new(values, Some(series), Arc::clone(&clock)));
    let mut a = bench("a", &clock, &log);
    a.backend = Some(Arc::clone(&backend));
    let ps = [placement("p0", &[0]), placement("p1", &[0])];
    let (topo, cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    let setup = CountingSetup::fake();
    let mut s = session(&topo, &cfg, &clock, &stop);
    s.interleave = true;
    s.repeat = 2;
    s.counting = Some(Counting {
        setup: &setup,
        backend: backend.as_ref(),
    });
    let mut out = Collect::default();
    s.run(vec![plan(&a, &ps)], &mut out);
    let l = log.lock().unwrap().clone();
    let samples: Vec<&String> = l.iter().filter(|x| x.starts_with("sample")).collect();
    // 2 rounds x 2 placements x (1 warm-up + 3 measured).
    assert_eq!(samples.len(), 16, "{l:?}");
    // Counting on for the measured samples only, and never for another cell's.
    let counted = samples.iter().filter(|x| x.contains("own=true")).count();
    assert_eq!(counted, 12, "{samples:?}");
    assert!(
        samples.iter().all(|x| x.contains("others=false")),
        "{samples:?}"
    );
    // Each cell had its own counter group, opened on its own thread, started once and
    // resumed for each further sample.
    let opened = backend.opened.lock().unwrap();
    assert_eq!(opened.len(), 2);
    assert_ne!(opened[0].0, opened[1].0);
    for (_, src) in opened.iter() {
        let src = src.lock().unwrap();
        assert_eq!((src.starts, src.resumes, src.stops), (1, 5, 6));
        assert!(!src.running);
    }
    for (cell, note) in out.cells.iter().zip(&out.notes) {
        assert_eq!(note, &None);
        let c = cell.counters.as_ref().expect("counters recorded");
        assert_eq!(c.count(CounterEvent::TaskClock), Some(6_000_000.0));
        let work = c.work.as_ref().unwrap();
        assert_eq!((work.unit.as_str(), work.amount), ("op", 6.0 * 1000.0));
        assert!(c.window.contains("own samples") && c.window.contains("2 rounds"));
        // Other cells sampled on the same CPUs meanwhile: /proc/stat was read only
        // while this cell worked, and the stretch before it began is left out.
        let os = c.os_time.as_ref().expect("OS time kept under interleaving");
        assert!(c.os_time_unavailable.is_none());
        assert_eq!(os.intervals.len(), 2);
        assert_eq!(os.total().all_cpus.user, 3);
    }
    // Each sampler paused at once, then on for every Begin and every Step and off after
    // it: 2 cells x 2 rounds x (1 Begin + at least 3 samples) stretches.
    let l = backend.sampler_log.lock().unwrap();
    let count = |w: &str| l.iter().filter(|x| **x == w).count();
    assert_eq!(count("finish"), 2, "{l:?}");
    assert!(count("resume") >= 16, "{l:?}");
    assert_eq!(count("pause"), count("resume") + 2, "{l:?}");
}

#[test]
fn the_stop_flag_ends_the_session_without_recording_the_cell_in_progress() {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let a = bench("a", &clock, &log);
    let ps = [placement("p0", &[0]), placement("p1", &[0])];
    let (topo, cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    let s = session(&topo, &cfg, &clock, &stop);
    let mut out = Collect {
        stop_after: Some(1),
        ..Collect::default()
    };
    let ended = s.run(vec![plan(&a, &ps), plan(&a, &ps)], &mut out);
    assert_eq!(ended, smtlab_runner::session::Ended::Stopped);
    assert_eq!(out.cells.len(), 1);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut out = Collect::default();
    let ended = s.run(vec![plan(&a, &ps)], &mut out);
    assert_eq!(ended, smtlab_runner::session::Ended::Stopped);
    assert!(out.cells.is_empty() && out.skipped.is_empty());
}

#[test]
fn rounds_take_turns_cell_by_cell_without_interleaving() {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let a = bench("a", &clock, &log);
    let ps = [placement("p0", &[0]), placement("p1", &[0])];
    let (topo, cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    let mut s = session(&topo, &cfg, &clock, &stop);
    s.repeat = 2;
    let mut out = Collect::default();
    s.run(vec![plan(&a, &ps)], &mut out);
    // Round 1: p0 whole, then p1 whole; round 2 the same.
    let four = |p: &str| vec![p.to_string(); 4];
    let expected: Vec<String> = [four("p0"), four("p1"), four("p0"), four("p1")].concat();
    assert_eq!(samples_of(&log), expected);
    assert!(out.cells.iter().all(|c| c.result.rounds.len() == 2));
}

/// A fake machine whose `/proc/stat` moves by `steal_ticks` of steal on CPU 0 and
/// `busy_ticks` of user time on each CPU at every read, and whose threads ran
/// `thread_ns` more on each read: seeded figures for what disturbs a cell.
struct Disturbing {
    inner: smtlab_runner::machine::FakeMachine,
    _dir: tempfile::TempDir,
    steal_ticks: u64,
    busy_ticks: u64,
    thread_ns: u64,
    reads: std::sync::atomic::AtomicU64,
    /// The handoff of CPUs 0-1 each read of it gives, in turn (the last one again
    /// once they run out), and the reads so far.
    handoffs_ns: Vec<f64>,
    handoff_reads: std::sync::atomic::AtomicUsize,
}

impl Disturbing {
    fn new(steal_ticks: u64, busy_ticks: u64, thread_ns: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Disturbing {
            inner: smtlab_runner::machine::FakeMachine::at(dir.path()).unwrap(),
            _dir: dir,
            steal_ticks,
            busy_ticks,
            thread_ns,
            reads: Default::default(),
            handoffs_ns: vec![22.0],
            handoff_reads: Default::default(),
        }
    }
}

impl smtlab_runner::machine::Machine for Disturbing {
    fn root(&self) -> &std::path::Path {
        self.inner.root()
    }
    fn sysfs(&self) -> smtlab_control::Sysfs {
        self.inner.sysfs()
    }
    fn clock(&self) -> &dyn smtlab_runner::Clock {
        self.inner.clock()
    }
    fn counting_setup(&self) -> CountingSetup {
        self.inner.counting_setup()
    }
    fn counting_backend(&self) -> &dyn smtlab_runner::counting::CountingBackend {
        self.inner.counting_backend()
    }
    fn environment(
        &self,
        topo: &Topology,
        tool: &smtlab_runner::machine::Tool,
    ) -> smtlab_model::Environment {
        self.inner.environment(topo, tool)
    }
    fn cpu_times(
        &self,
    ) -> Option<std::collections::BTreeMap<u32, smtlab_model::counters::os_time::CpuTicks>> {
        let n = self
            .reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let text = format!(
            "cpu0 {b} 0 0 0 0 0 0 {s}\ncpu1 {b} 0 0 0 0 0 0 0\n",
            b = n * self.busy_ticks,
            s = n * self.steal_ticks
        );
        smtlab_counters::procstat::parse_proc_stat(&text).ok()
    }
    fn own_threads_cpu_ns(&self) -> Option<std::collections::BTreeMap<u32, u64>> {
        let n = self.reads.load(std::sync::atomic::Ordering::Relaxed);
        // Thread 1 stands for smtlab's main thread: never a measuring one.
        Some([(1, n * self.thread_ns)].into())
    }
    fn tick_ns(&self) -> u64 {
        10_000_000
    }
    fn cpu_handoffs(&self, pairs: &[(u32, u32)]) -> Vec<smtlab_model::run::Handoff> {
        let n = self
            .handoff_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ns = self.handoffs_ns[n.min(self.handoffs_ns.len() - 1)];
        let at = |&(from_cpu, to_cpu): &(u32, u32)| smtlab_model::run::Handoff {
            from_cpu,
            to_cpu,
            ns,
        };
        pairs.iter().map(at).collect()
    }
}

fn disturbed_cells(machine: &Disturbing) -> Vec<CellRecord> {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let mut a = bench("a", &clock, &log);
    // Samples of 100 ms each (1000 iterations), long against a 10 ms tick.
    a.ns_per_iter = 100_000;
    let ps = [placement("p0", &[0]), placement("p1", &[0])];
    let (topo, mut cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    cfg.max_samples = 10;
    cfg.min_samples = 10;
    let mut s = session(&topo, &cfg, &clock, &stop);
    s.system = Some(machine);
    let mut out = Collect::default();
    s.run(vec![plan(&a, &ps)], &mut out);
    out.cells
}

#[test]
fn steal_on_the_cells_cpu_marks_it_disturbed_and_keeps_it_from_a_verdict() {
    // A tick (10 ms) of steal at each read: 10 ms per 100 ms window.
    let cells = disturbed_cells(&Disturbing::new(1, 0, 0));
    assert_eq!(cells.len(), 2);
    for c in &cells {
        let d = c.result.disturbance.as_ref().expect("recorded");
        // A window around every step: one per measured sample, and the last step's.
        assert!(d.windows as usize >= c.result.samples.len(), "{d:?}");
        assert!(c.result.samples.len() >= 5, "{d:?}");
        assert_eq!(d.cpus, 1);
        assert_eq!(d.steal_ns, d.windows * 10_000_000);
        let why = c.result.disturbed_reason().expect("disturbed");
        assert!(why.starts_with("disturbed: steal 1"), "{why}");
    }
    let v = smtlab_model::verdict::verdict(&cells[0], &cells[1]).unwrap();
    assert_eq!(v.significance, smtlab_model::stats::Significance::Unsteady);
    assert!(v.unsteady.unwrap().contains("disturbed: steal"));
}

#[test]
fn a_quiet_machine_records_the_figures_and_disturbs_nothing() {
    let cells = disturbed_cells(&Disturbing::new(0, 0, 1_000));
    for c in &cells {
        let d = c.result.disturbance.as_ref().expect("recorded");
        assert_eq!(d.steal_ns, 0);
        // The main thread's time is smtlab's own, not the cell's.
        assert_eq!(d.smtlab_other_ns, Some(d.windows * 1_000));
        // The fake benchmark says nothing of its CPU time: other processes unknown.
        assert_eq!(d.foreign_ns, None);
        assert_eq!(c.result.disturbed_reason(), None);
    }
}

/// Runs `groups` groups of the fake benchmark on one CPU and on two, the run having
/// recorded a handoff of 22 ns between CPUs 0 and 1 at its start.
fn cells_around_handoffs(machine: &Disturbing, groups: usize) -> Vec<CellRecord> {
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let a = bench("a", &clock, &log);
    let ps = [placement("one", &[0]), placement("two", &[0, 1])];
    let (topo, cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    let start = [smtlab_model::run::Handoff {
        from_cpu: 0,
        to_cpu: 1,
        ns: 22.0,
    }];
    let mut s = session(&topo, &cfg, &clock, &stop);
    s.system = Some(machine);
    s.handoff_at_start = &start;
    let mut out = Collect::default();
    s.run((0..groups).map(|_| plan(&a, &ps)).collect(), &mut out);
    out.cells
}

fn moved_reason(c: &CellRecord) -> Option<String> {
    c.result
        .disturbed_reason()
        .filter(|r| r.contains("CPUs moved"))
}

#[test]
fn cells_on_two_cpus_around_which_the_cpus_moved_are_disturbed() {
    if topo().cpus.len() < 2 {
        return;
    }
    // Read before and after each group: the first group's both 22 ns, the second's
    // 22 ns before and 190 ns after (the host moved the CPUs during it), the third's
    // 190 ns before (still moved) and 24 ns after.
    let mut m = Disturbing::new(0, 0, 0);
    m.handoffs_ns = vec![22.0, 22.0, 22.0, 190.0, 190.0, 24.0];
    let cells = cells_around_handoffs(&m, 3);
    assert_eq!(cells.len(), 6);
    let names: Vec<(&str, bool)> = cells
        .iter()
        .map(|c| (c.placement.name.as_str(), moved_reason(c).is_some()))
        .collect();
    let expected = [
        ("one", false),
        ("two", false),
        ("one", false),
        ("two", true),
        ("one", false),
        ("two", true),
    ];
    assert_eq!(names, expected);
    let why = moved_reason(&cells[3]).unwrap();
    assert!(
        why.contains("CPU 0-1 handoff 190 ns, 22 ns at the run's start"),
        "{why}"
    );
    let v = smtlab_model::verdict::verdict(&cells[2], &cells[3]).unwrap();
    assert_eq!(v.significance, smtlab_model::stats::Significance::Unsteady);
    // Twice per group, nothing more.
    let reads = m.handoff_reads.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(reads, 6);
}

#[test]
fn cpus_that_stay_put_disturb_nothing_and_one_cpu_reads_no_handoff() {
    let m = Disturbing::new(0, 0, 0);
    for c in cells_around_handoffs(&m, 2) {
        assert_eq!(moved_reason(&c), None);
    }
    // A group of cells on one CPU each reads nothing.
    let clock = Arc::new(FakeClock::new(0, 1));
    let log = Log::default();
    let a = bench("a", &clock, &log);
    let (topo, cfg, stop) = (topo(), cfg(), AtomicBool::new(false));
    let start = [smtlab_model::run::Handoff {
        from_cpu: 0,
        to_cpu: 1,
        ns: 22.0,
    }];
    let m = Disturbing::new(0, 0, 0);
    let mut s = session(&topo, &cfg, &clock, &stop);
    s.system = Some(&m);
    s.handoff_at_start = &start;
    s.run(
        vec![plan(&a, &[placement("one", &[0])])],
        &mut Collect::default(),
    );
    assert_eq!(
        m.handoff_reads.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}
