//! One measurement engine for every command (`bench`, `run`, `exec`, and through
//! [`crate::experiment`] `corun`, `penalty` and `util`): a [`Session`] measures cells
//! (a benchmark, its parameters and a placement) and pushes a [`CellRecord`] or a
//! [`SkippedCell`] with its reason to a [`SessionObserver`] as each cell is done, so the
//! caller prints and stores per cell.
//!
//! For each cell, in this order:
//! 1. the client side ([`crate::client::client_for`] with the session's
//!    [`ClientRule`]), for benchmarks that ask for one, started before counting so the
//!    client's work is not counted as the server's;
//! 2. counting (`--counters`), opened on the cell's own thread before the benchmark is
//!    prepared, so the workers it starts inherit the counters;
//! 3. `prepare`, then calibration, warm-up and samples until convergence
//!    ([`Measurement`]), the counters enabled around each measured sample only;
//! 4. with `repeat > 1`, further rounds from fresh instances, pooled
//!    ([`crate::rounds::pool`]); every round reaches the record (`CellResult::rounds`);
//! 5. one extra sample with syscall tracing (where available), then the instance is
//!    dropped, and after it the client side.
//!
//! Around each of its samples a cell reads what disturbs it (steal, other processes,
//! smtlab's own other threads: [`crate::disturb`]) from the session's machine, and its
//! record carries the sum (`CellResult::disturbance`).
//!
//! Cells are measured in [`Group`]s: the cells of one group (the placements of one
//! benchmark and parameter set) take their samples in turn when the session
//! interleaves, else one after the other. Every
//! cell lives on its own long-lived thread: its counters follow that thread with
//! `inherit`, so interleaved instances do not share each other's counters, and the
//! children it starts die with that thread (`PR_SET_PDEATHSIG`), not earlier.
//!
//! Why interleave: the ratio of two cells measured one after the other carries whatever
//! the machine did in between; on a shared host whose speed moves over a second or two,
//! a "yield" of 0.87 between two identical placements is easy to get. Interleaving
//! calibrates and warms up every cell first, then takes one sample of each in turn, so
//! slow changes of the machine fall on all cells alike and cancel in their ratio. A cell
//! that converges early keeps sampling while any other still does, so all span the same
//! time; each keeps its own limits on samples and time (counting only its own samples'
//! time). Every instance of the group stays prepared meanwhile, so their memory and idle
//! threads coexist, and each sample starts with the caches another cell left: harmless
//! for samples of milliseconds, worth knowing for tiny cache-resident working sets.
//!
//! The session never prints. Stopping (Ctrl-C, a signal) is one flag, [`Session::stop`]:
//! the cells in progress end at their next event and are not recorded.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use smtlab_bench::client::ClientSide;
use smtlab_bench::{BenchContext, Benchmark, Instance, Params};
use smtlab_model::counters::CellCounters;
use smtlab_model::counters::cell::work_unit_for;
use smtlab_model::counters::derived::Work;
use smtlab_model::{
    BenchInfo, CellKey, CellRecord, CpuSet, ResolvedPlacement, SkippedCell, Topology,
};
use smtlab_placement::ClientRule;

use crate::clock::Clock;
use crate::config::RunConfig;
use crate::counting::{CellCounting, CountingBackend, CountingSetup, SAMPLES_WINDOW};
use crate::error::RunError;
use crate::machine::{CellGuard, Machine};
use crate::measure::Measurement;
use crate::observer::{Event, Observer};
use crate::result::CellResult;

/// One cell to measure.
pub struct CellPlan<'a> {
    pub bench: &'a dyn Benchmark,
    pub info: BenchInfo,
    pub params: Params,
    /// Benchmark, parameters and placement as written (`1c2t`, `cpus=0,4`).
    pub key: CellKey,
    /// The placement resolved on this machine, or why it cannot be.
    pub placement: Result<ResolvedPlacement, String>,
    /// What one unit of a sample's `work` is for per-unit counter costs, and how many
    /// of them make one: `None` for the benchmark's unit (`op`, or `byte` for
    /// bandwidths).
    pub work_unit: Option<(String, f64)>,
    /// Exactly this many warm-up samples instead of the configured warm-up time.
    pub warmup_samples: Option<usize>,
}

/// Cells measured together (interleaved, when the session interleaves).
pub type Group<'a> = Vec<CellPlan<'a>>;

/// How the counted window of a cell is described when nothing more precise is said.
pub fn window_text(repeat: usize, interleaved: bool) -> String {
    let mut s = SAMPLES_WINDOW.to_string();
    if repeat > 1 {
        s.push_str(&format!(", all {repeat} rounds"));
    }
    if interleaved {
        s.push_str(", counted around this cell's own samples while other placements took turns");
    }
    s
}

/// A measured cell, as the observer receives it.
#[derive(Clone, Copy)]
pub struct Measured<'a> {
    pub record: &'a CellRecord,
    /// Why the cell has no counters although they were asked for.
    pub counters_note: Option<&'a str>,
}

/// What the caller does with the cells as they are measured.
pub trait SessionObserver {
    /// A cell is about to be measured (prepared).
    fn cell_started(&mut self, _key: &CellKey) {}
    /// Cell `key` took measured sample `index` (counted from 0) in round `round`.
    fn sample(&mut self, _key: &CellKey, _round: usize, _index: usize) {}
    /// A cell is done; `Break` stops the session.
    fn measured(&mut self, cell: Measured<'_>) -> ControlFlow<()>;
    /// A cell could not be measured; `Break` stops the session.
    fn skipped(&mut self, cell: &SkippedCell) -> ControlFlow<()>;
}

/// Two observers in turn, the first first (a store, then what shows the cell): each cell
/// reaches the second only if the first goes on, so a cell the first refuses (or failed
/// to save) is neither shown nor kept by the second. Nest pairs for more.
impl<A: SessionObserver, B: SessionObserver> SessionObserver for (A, B) {
    fn cell_started(&mut self, key: &CellKey) {
        self.0.cell_started(key);
        self.1.cell_started(key);
    }

    fn sample(&mut self, key: &CellKey, round: usize, index: usize) {
        self.0.sample(key, round, index);
        self.1.sample(key, round, index);
    }

    fn measured(&mut self, cell: Measured<'_>) -> ControlFlow<()> {
        self.0.measured(cell)?;
        self.1.measured(cell)
    }

    fn skipped(&mut self, cell: &SkippedCell) -> ControlFlow<()> {
        self.0.skipped(cell)?;
        self.1.skipped(cell)
    }
}

impl<T: SessionObserver + ?Sized> SessionObserver for &mut T {
    fn cell_started(&mut self, key: &CellKey) {
        (**self).cell_started(key);
    }

    fn sample(&mut self, key: &CellKey, round: usize, index: usize) {
        (**self).sample(key, round, index);
    }

    fn measured(&mut self, cell: Measured<'_>) -> ControlFlow<()> {
        (**self).measured(cell)
    }

    fn skipped(&mut self, cell: &SkippedCell) -> ControlFlow<()> {
        (**self).skipped(cell)
    }
}

/// Why a session ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every cell was measured or skipped.
    Complete,
    /// The stop flag was set, or the observer asked to stop.
    Stopped,
}

/// Counting for the cells of a session.
#[derive(Clone, Copy)]
pub struct Counting<'a> {
    pub setup: &'a CountingSetup,
    pub backend: &'a dyn CountingBackend,
}

/// How cells are measured.
pub struct Session<'a> {
    pub topo: &'a Topology,
    pub cfg: &'a RunConfig,
    pub clock: &'a dyn Clock,
    pub client_rule: ClientRule,
    pub counting: Option<Counting<'a>>,
    /// Rounds per cell, each from a fresh instance (at least 1).
    pub repeat: usize,
    /// Take the samples of a group's cells in turn.
    pub interleave: bool,
    /// Set (by a signal handler, say) to stop; the cells in progress are not recorded.
    pub stop: &'a AtomicBool,
    /// The machine whose system state each cell enters for its life
    /// ([`Machine::enter_cell`]: `1c1t-up` takes the other CPUs offline, and its guard
    /// brings them back when the cell ends); an error skips the cell with its reason.
    /// `None`: cells change nothing.
    pub system: Option<&'a dyn Machine>,
}

/// Commands from the session to a cell's thread.
enum Cmd {
    /// Prepare a fresh instance, calibrate and warm up.
    Begin,
    /// Take the next measured sample (a converged cell keeps sampling when `keep_pace`).
    Step { keep_pace: bool },
    /// Summarise this round and drop its instance.
    Finish,
    /// Count no more, trace an extra sample, return the counters.
    Close,
}

/// Replies of a cell's thread.
enum Reply {
    Ready(Result<(), String>),
    Stepped(Result<StepInfo, String>),
    Finished(Result<CellResult, String>),
    Closed(Closed),
}

/// What a cell's thread hands back when it closes.
#[derive(Default)]
struct Closed {
    counters: Option<CellCounters>,
    note: Option<String>,
    disturbance: Option<smtlab_model::Disturbance>,
}

struct StepInfo {
    done: bool,
    /// Index of the sample taken, if one was.
    sample: Option<usize>,
}

impl Session<'_> {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Measures `groups` in order and tells `observer` about every cell.
    pub fn run(&self, groups: Vec<Group<'_>>, observer: &mut dyn SessionObserver) -> Ended {
        for group in groups {
            if self.stopped() {
                return Ended::Stopped;
            }
            // Rounds of several placements take turns even when their samples do not;
            // either way every instance of the group lives at once, unless that would
            // hold more memory than the run allows.
            let together = (self.interleave || self.repeat > 1) && !self.too_big_together(&group);
            let ended = if together {
                self.measure_together(group, observer)
            } else {
                let mut ended = Ended::Complete;
                for cell in group {
                    ended = self.measure_together(vec![cell], observer);
                    if ended == Ended::Stopped {
                        break;
                    }
                }
                ended
            };
            if ended == Ended::Stopped {
                return Ended::Stopped;
            }
        }
        Ended::Complete
    }

    /// Whether the instances of `group` would hold more than the run's memory bound
    /// together ([`crate::plan::apart_reason`]).
    fn too_big_together(&self, group: &[CellPlan<'_>]) -> bool {
        if group.len() < 2 || self.cfg.memory_budget_bytes.is_none() {
            return false;
        }
        let memory: Vec<u64> = group
            .iter()
            .filter_map(|c| {
                let placement = c.placement.as_ref().ok()?;
                crate::plan::cell_cost(c.bench, &c.params, placement, self.topo)
                    .ok()
                    .map(|cost| cost.memory_bytes)
            })
            .collect();
        crate::plan::apart_reason(&memory, self.cfg.memory_budget_bytes).is_some()
    }

    /// Measures the cells of `group` together: each on its own thread, `repeat` rounds
    /// in which the cells take turns (sample by sample when interleaving, else cell by
    /// cell); records in the order of the group.
    fn measure_together(
        &self,
        group: Vec<CellPlan<'_>>,
        observer: &mut dyn SessionObserver,
    ) -> Ended {
        let repeat = self.repeat.max(1);
        // Other cells of the group run between this cell's samples or rounds.
        let interleaved = group.len() > 1;
        let batches: Vec<Vec<usize>> = if self.interleave {
            vec![(0..group.len()).collect()]
        } else {
            (0..group.len()).map(|i| vec![i]).collect()
        };
        std::thread::scope(|scope| {
            // The cells still going: their plan, their thread's channels, their rounds.
            struct Live<'p> {
                plan: &'p CellPlan<'p>,
                tx: mpsc::Sender<Cmd>,
                rx: mpsc::Receiver<Reply>,
                rounds: Vec<CellResult>,
                failed: Option<String>,
                placement: ResolvedPlacement,
            }
            let mut outcome: Vec<Result<Live<'_>, String>> = Vec::new();
            for plan in &group {
                observer.cell_started(&plan.key);
                let placement = match &plan.placement {
                    Ok(p) => p.clone(),
                    Err(reason) => {
                        outcome.push(Err(reason.clone()));
                        continue;
                    }
                };
                let (tx, cmd_rx) = mpsc::channel::<Cmd>();
                let (reply_tx, rx) = mpsc::channel::<Reply>();
                let cell_placement = placement.clone();
                let spawned = std::thread::Builder::new()
                    .name("smtlab-cell".into())
                    .spawn_scoped(scope, move || {
                        self.cell_thread(plan, cell_placement, interleaved, cmd_rx, reply_tx);
                    });
                match spawned {
                    Ok(_) => outcome.push(Ok(Live {
                        plan,
                        tx,
                        rx,
                        rounds: Vec::new(),
                        failed: None,
                        placement,
                    })),
                    Err(e) => outcome.push(Err(format!("cannot start a measuring thread: {e}"))),
                }
            }
            let ask = |live: &mut Live<'_>, cmd: Cmd| -> Option<Reply> {
                live.tx.send(cmd).ok()?;
                live.rx.recv().ok()
            };
            let lost = "the measuring thread ended early".to_string();
            for round in 0..repeat {
                for batch in &batches {
                    // Prepare, calibrate and warm up each cell in order.
                    let mut going: Vec<usize> = Vec::new();
                    for &i in batch {
                        let Ok(live) = &mut outcome[i] else { continue };
                        if live.failed.is_some() || self.stopped() {
                            continue;
                        }
                        match ask(live, Cmd::Begin) {
                            Some(Reply::Ready(Ok(()))) => going.push(i),
                            Some(Reply::Ready(Err(e))) => live.failed = Some(e),
                            _ => live.failed = Some(lost.clone()),
                        }
                    }
                    // One sample of each in turn until every cell is done.
                    let mut done = vec![false; outcome.len()];
                    let keep_pace = going.len() > 1;
                    while !self.stopped() && going.iter().any(|&i| !done[i]) {
                        for &i in &going {
                            let Ok(live) = &mut outcome[i] else { continue };
                            if live.failed.is_some() || (done[i] && !keep_pace) {
                                continue;
                            }
                            match ask(live, Cmd::Step { keep_pace }) {
                                Some(Reply::Stepped(Ok(s))) => {
                                    done[i] = s.done;
                                    if let Some(index) = s.sample {
                                        observer.sample(&live.plan.key, round, index);
                                    }
                                }
                                Some(Reply::Stepped(Err(e))) => {
                                    live.failed = Some(e);
                                    done[i] = true;
                                }
                                _ => {
                                    live.failed = Some(lost.clone());
                                    done[i] = true;
                                }
                            }
                        }
                        // A cell that converged early keeps pace only while others go on.
                        if going.iter().all(|&i| done[i]) {
                            break;
                        }
                    }
                    if self.stopped() {
                        return Ended::Stopped;
                    }
                    for &i in &going {
                        let Ok(live) = &mut outcome[i] else { continue };
                        if live.failed.is_some() {
                            continue;
                        }
                        match ask(live, Cmd::Finish) {
                            Some(Reply::Finished(Ok(r))) => live.rounds.push(r),
                            Some(Reply::Finished(Err(e))) => live.failed = Some(e),
                            _ => live.failed = Some(lost.clone()),
                        }
                    }
                }
            }
            if self.stopped() {
                return Ended::Stopped;
            }
            // Records in the group's order.
            for (plan, slot) in group.iter().zip(outcome.iter_mut()) {
                let reason = match slot {
                    Err(reason) => Some(reason.clone()),
                    Ok(live) => live.failed.clone(),
                };
                if let Some(reason) = reason {
                    // The stop flag makes a child fail its sample: that is a stop too.
                    if self.stopped() {
                        return Ended::Stopped;
                    }
                    let skipped = SkippedCell {
                        key: plan.key.clone(),
                        reason,
                    };
                    if let Ok(live) = slot {
                        drop(ask(live, Cmd::Close));
                    }
                    if observer.skipped(&skipped).is_break() {
                        return Ended::Stopped;
                    }
                    continue;
                }
                let Ok(live) = slot else { continue };
                let closed = match ask(live, Cmd::Close) {
                    Some(Reply::Closed(c)) => c,
                    _ => Closed::default(),
                };
                let (counters, note) = (closed.counters, closed.note);
                let rounds = std::mem::take(&mut live.rounds);
                let Some(mut result) = crate::rounds::pool(rounds) else {
                    continue;
                };
                result.disturbance = closed.disturbance;
                let record = CellRecord {
                    benchmark: plan.info.name.clone(),
                    group: plan.info.group.clone(),
                    unit: plan.info.unit.to_string(),
                    direction: plan.info.direction,
                    params: plan.key.params.clone(),
                    conditions: plan.key.conditions.clone(),
                    placement_spec: plan.key.placement.clone(),
                    placement: live.placement.clone(),
                    result,
                    counters,
                };
                let flow = observer.measured(Measured {
                    record: &record,
                    counters_note: note.as_deref(),
                });
                if flow.is_break() {
                    return Ended::Stopped;
                }
            }
            Ended::Complete
        })
    }

    /// Steers the network interrupts of a cell whose benchmark declares the `irq`
    /// parameter ([`smtlab_placement::irq`]) and asks for it; the guard, held for the
    /// cell's life. An error, which skips the cell with its reason, when the value is
    /// malformed, the placement leaves no such CPU, the machine refuses, or there is
    /// nothing to steer (so no cell says it was steered when it was not).
    fn steer_irqs(
        &self,
        plan: &CellPlan<'_>,
        placement: &ResolvedPlacement,
        client: Option<&ClientSide>,
    ) -> Result<Option<smtlab_control::IrqSteer>, String> {
        use smtlab_placement::irq;
        if !plan.info.params.iter().any(|p| p.name == irq::PARAM) {
            return Ok(None);
        }
        let value = plan.params.get_str(irq::PARAM).map_err(|e| e.to_string())?;
        let spec = irq::IrqSpec::parse(value)
            .ok_or_else(|| format!("parameter irq={value:?}: expected {}", irq::EXPECTED))?;
        let client_cpus = client.map(|c| c.cpus().clone()).unwrap_or_default();
        let Some(cpus) = irq::irq_cpus(self.topo, &placement.cpus, &client_cpus, spec.target)?
        else {
            return Ok(None);
        };
        let Some(machine) = self.system else {
            return Err(format!(
                "irq={value}: this run changes nothing on the machine, so it cannot steer interrupts"
            ));
        };
        let guard = machine
            .steer_irqs(&spec.devices, &cpus)
            .map_err(|e| format!("irq={value}: {e}"))?;
        if guard.files().is_empty() {
            return Err(format!(
                "irq={value}: nothing to steer for {}: no interrupts (loopback and veth have none) and no \
                 receive queue with rps_cpus (a kernel without CONFIG_RPS)",
                spec.devices.join(", ")
            ));
        }
        Ok(Some(guard))
    }

    /// A cell's thread: owns its client side, counting and instances, answers `cmds`.
    /// Everything it starts is dropped here, the instance before the client side.
    fn cell_thread(
        &self,
        plan: &CellPlan<'_>,
        placement: ResolvedPlacement,
        interleaved: bool,
        cmds: mpsc::Receiver<Cmd>,
        replies: mpsc::Sender<Reply>,
    ) {
        let client =
            crate::client::client_for(plan.bench, self.topo, &placement, &self.client_rule)
                .map_err(|e| e.0);
        // Kept to the end of the cell: dropping it restores what it changed.
        let state = match self.system {
            Some(machine) => machine
                // A client on other hosts needs no CPU here: `1c1t-up` may take them all.
                .enter_cell(
                    &placement,
                    plan.bench.client_side() && !matches!(self.client_rule, ClientRule::Remote(_)),
                )
                .map_err(|e| e.to_string()),
            None => Ok(CellGuard::Unchanged),
        };
        let (client, _state) = match (client, state) {
            (Ok(c), Ok(s)) => (Ok(c), s),
            (Err(e), _) | (_, Err(e)) => (Err(e), CellGuard::Unchanged),
        };
        // Kept to the end of the cell too: dropping it puts the interrupts back.
        let (client, _irqs) = match client {
            Ok(c) => match self.steer_irqs(plan, &placement, c.as_ref()) {
                Ok(g) => (Ok(c), g),
                Err(e) => (Err(e), None),
            },
            Err(e) => (Err(e), None),
        };
        let client: Option<ClientSide> = match client {
            Ok(c) => c,
            Err(reason) => {
                // Answer every command with the reason until the session lets go.
                for cmd in cmds {
                    let reply = match cmd {
                        Cmd::Begin => Reply::Ready(Err(reason.clone())),
                        Cmd::Step { .. } => Reply::Stepped(Err(reason.clone())),
                        Cmd::Finish => Reply::Finished(Err(reason.clone())),
                        Cmd::Close => Reply::Closed(Closed::default()),
                    };
                    if replies.send(reply).is_err() {
                        break;
                    }
                }
                return;
            }
        };
        let mut counting = self.counting.as_ref().map(|c| {
            CellCounting::begin_with(
                c.setup,
                c.backend,
                &sampled_cpus(&placement, self.topo),
                spare_cpu(&placement, self.topo),
            )
        });
        // Other cells take turns on these CPUs: the OS time counts this cell's own
        // stretches only (from a command to its reply), the others' turns left out.
        if interleaved && let Some(c) = counting.as_mut() {
            c.sample_only_while_working();
        }
        // What disturbs the cell, read around each of its own samples.
        let mut probe = self.system.and_then(|m| {
            crate::disturb::Probe::new(m, self.clock, sampled_cpus(&placement, self.topo))
        });
        let ctx = BenchContext {
            params: &plan.params,
            placement: &placement,
            topology: self.topo,
            client: client.as_ref(),
        };
        // The last round's instance, kept for the traced extra sample.
        let mut instance: Option<Box<dyn Instance>> = None;
        let mut last_iterations = None;
        let mut work = 0.0;
        let mut cmds = cmds.into_iter();
        'commands: while let Some(cmd) = cmds.next() {
            match cmd {
                Cmd::Begin => {
                    instance = None;
                    if let Some(c) = counting.as_mut() {
                        c.working();
                    }
                    let threads_before = probe.as_ref().map(|p| p.threads_now());
                    let prepared = plan.bench.prepare(&ctx);
                    if prepared.is_err()
                        && let Some(c) = counting.as_mut()
                    {
                        c.idle();
                    }
                    let mut inst = match prepared {
                        Ok(i) => i,
                        Err(e) => {
                            if replies.send(Reply::Ready(Err(e.to_string()))).is_err() {
                                break;
                            }
                            continue;
                        }
                    };
                    let mut observer = StopObserver { stop: self.stop };
                    let begun = Measurement::begin_with_warmup(
                        inst.as_mut(),
                        &plan.info,
                        self.cfg,
                        self.clock,
                        &mut observer,
                        plan.warmup_samples,
                    );
                    if let Some(c) = counting.as_mut() {
                        c.idle();
                    }
                    let mut m = match begun {
                        Ok(m) => m,
                        Err(e) => {
                            if replies.send(Reply::Ready(Err(e.to_string()))).is_err() {
                                break;
                            }
                            continue;
                        }
                    };
                    // The threads the cell started (its workers) are its measuring ones.
                    if let (Some(p), Some(before)) = (probe.as_mut(), threads_before) {
                        let now = p.threads_now();
                        p.measuring_threads(now.difference(&before).copied());
                    }
                    if replies.send(Reply::Ready(Ok(()))).is_err() {
                        break;
                    }
                    // Steps until the round is finished.
                    let finished = loop {
                        let Some(cmd) = cmds.next() else {
                            break 'commands;
                        };
                        match cmd {
                            Cmd::Step { keep_pace } => {
                                if keep_pace {
                                    m.continue_if_converged();
                                }
                                let before = m.samples_taken();
                                if let Some(p) = probe.as_mut() {
                                    p.open();
                                }
                                if let Some(c) = counting.as_mut() {
                                    c.working();
                                    c.resume();
                                }
                                let r = m.step();
                                if let Some(c) = counting.as_mut() {
                                    c.pause();
                                    c.idle();
                                }
                                if let Some(p) = probe.as_mut() {
                                    p.close();
                                }
                                let after = m.samples_taken();
                                let reply = r.map_err(error_text).map(|done| StepInfo {
                                    done,
                                    sample: (after > before).then(|| after - 1),
                                });
                                if replies.send(Reply::Stepped(reply)).is_err() {
                                    break 'commands;
                                }
                            }
                            Cmd::Finish => break m.finish().map_err(error_text),
                            Cmd::Begin | Cmd::Close => {
                                break Err("the round was not finished".to_string());
                            }
                        }
                    };
                    if let Ok(r) = &finished {
                        if let Some(p) = probe.as_mut() {
                            let cpu: Option<Vec<u64>> =
                                r.samples.iter().map(|s| s.cpu_ns).collect();
                            p.end_round(cpu.map(|c| c.iter().sum()));
                        }
                        last_iterations = Some(r.iterations);
                        work += r.samples.iter().map(|s| s.work).sum::<f64>();
                    }
                    instance = Some(inst);
                    if replies.send(Reply::Finished(finished)).is_err() {
                        break;
                    }
                }
                Cmd::Step { .. } => {
                    if replies
                        .send(Reply::Stepped(Err("no prepared instance".into())))
                        .is_err()
                    {
                        break;
                    }
                }
                Cmd::Finish => {
                    if replies
                        .send(Reply::Finished(Err("no prepared instance".into())))
                        .is_err()
                    {
                        break;
                    }
                }
                Cmd::Close => {
                    let (counters, note) = match counting.take() {
                        None => (None, None),
                        Some(mut c) => {
                            let (unit, per) = plan.work_unit.clone().unwrap_or_else(|| {
                                (work_unit_for(&plan.info.unit).to_string(), 1.0)
                            });
                            c.stop(Some(Work {
                                amount: work / per,
                                unit,
                            }));
                            if let (Some(inst), Some(n)) = (instance.as_mut(), last_iterations)
                                && c.can_trace()
                            {
                                let window = format!(
                                    "one extra sample of {n} iterations after the measured ones"
                                );
                                c.trace(&window, || {
                                    inst.sample(n).map(drop).map_err(|e| e.to_string())
                                });
                            }
                            match c.finish(&window_text(self.repeat.max(1), interleaved)) {
                                Ok(c) => (Some(c), None),
                                Err(reason) => {
                                    (None, Some(format!("counters not recorded: {reason}")))
                                }
                            }
                        }
                    };
                    // The instance goes first (it may still use the client side).
                    drop(instance.take());
                    drop(client);
                    let _ = replies.send(Reply::Closed(Closed {
                        counters,
                        note,
                        disturbance: probe.take().and_then(|p| p.finish()),
                    }));
                    return;
                }
            }
        }
        // The session let go early (stopped): the instance first, then the client side.
        drop(instance);
        drop(counting);
        drop(client);
    }
}

/// Stops a cell at its next event when the session's stop flag is set.
struct StopObserver<'a> {
    stop: &'a AtomicBool,
}

impl Observer for StopObserver<'_> {
    fn event(&mut self, _: &Event<'_>) -> ControlFlow<()> {
        if self.stop.load(Ordering::Relaxed) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

fn error_text(e: RunError) -> String {
    e.to_string()
}

/// The CPUs whose `/proc/stat` time a cell reports: the placement's, or every online
/// CPU for `os` (the scheduler may use any of them).
pub fn sampled_cpus(placement: &ResolvedPlacement, topo: &Topology) -> CpuSet {
    if placement.pinned() {
        placement.cpu_set()
    } else {
        topo.cpus.clone()
    }
}

/// A CPU outside the placement (and allowed to this process) for the sampler thread,
/// so it does not steal time from the measured CPUs; `None` when every CPU is in use.
pub fn spare_cpu(placement: &ResolvedPlacement, topo: &Topology) -> Option<u32> {
    if !placement.pinned() {
        return None;
    }
    let usable = match &topo.allowed_cpus {
        Some(a) => topo.cpus.intersection(a),
        None => topo.cpus.clone(),
    };
    usable.difference(&placement.cpu_set()).last()
}

/// The parameters of a cell as its key stores them.
pub fn param_map(params: &Params) -> BTreeMap<String, String> {
    params.iter().map(|(k, v)| (k.into(), v.into())).collect()
}
