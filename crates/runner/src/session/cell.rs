//! A cell's thread: a [`Worker`] that owns the cell's client side, counting and
//! instances and answers the session's [`Cmd`]s, and the typed reasons ([`CellError`])
//! a cell is skipped with.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::mpsc;

use smtlab_bench::client::ClientSide;
use smtlab_bench::{BenchContext, Instance, ParamError};
use smtlab_control::coresched::CoreSchedError;
use smtlab_control::{ControlError, FileWrites};
use smtlab_model::counters::CellCounters;
use smtlab_model::counters::cell::work_unit_for;
use smtlab_model::counters::derived::Work;
use smtlab_model::metrics::coresched::{FORCEIDLE_NS, FORCEIDLE_SHARE};
use smtlab_model::{Disturbance, ResolvedPlacement};
use smtlab_placement::irq;

use super::cookie::{partner_cookies, process_cookies, tenant_cpu};
use super::{CellPlan, Session, StopObserver, Unplaced, spare_cpu, window_text};
use crate::client::NoClientCpus;
use crate::counting::CellCounting;
use crate::disturb::Probe;
use crate::error::RunError;
use crate::machine::{CellGuard, MachineError};
use crate::measure::Measurement;
use smtlab_model::result::CellResult;

/// Why a cell was not measured; its text is the reason its skip carries.
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    /// The placement cannot be resolved on this machine.
    #[error("{0}")]
    Placement(Unplaced),
    #[error("cannot start a measuring thread: {0}")]
    Spawn(std::io::Error),
    #[error("the measuring thread ended early")]
    Lost,
    /// What the cell needs around it could not be set up; every command gets it.
    #[error("{0}")]
    Setup(Arc<SetupError>),
    #[error("{0}")]
    Prepare(smtlab_bench::BenchError),
    #[error("{0}")]
    Run(#[from] RunError),
    #[error("no prepared instance")]
    NotPrepared,
    /// The workload's processes could not be given their cookie.
    #[error("{0}")]
    Cookie(#[from] CoreSchedError),
    #[error("the round was not finished")]
    Unfinished,
}

/// Why what a cell needs around it (its client side, the machine's state, its
/// interrupts) could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0}")]
    Client(#[from] NoClientCpus),
    #[error("{0}")]
    Machine(#[from] MachineError),
    #[error("{0}")]
    Irq(#[from] IrqError),
    #[error("{0}")]
    Cookie(#[from] CoreSchedError),
    #[error("a core-scheduling cookie needs the machine, and this run changes nothing on it")]
    CookieWithoutMachine,
}

/// Why a cell's network interrupts could not be steered as its `irq` parameter asks.
#[derive(Debug, thiserror::Error)]
pub enum IrqError {
    #[error("{0}")]
    Param(#[from] ParamError),
    #[error("parameter irq={value:?}: expected {}", irq::EXPECTED)]
    Malformed { value: String },
    /// The placement leaves no CPU for the interrupts.
    #[error("{0}")]
    Cpus(irq::NoIrqCpus),
    #[error("irq={value}: this run changes nothing on the machine, so it cannot steer interrupts")]
    NoMachine { value: String },
    #[error("irq={value}: {source}")]
    Refused { value: String, source: ControlError },
    #[error(
        "irq={value}: nothing to steer for {devices}: no interrupts (loopback and veth have none) and no \
         receive queue with rps_cpus (a kernel without CONFIG_RPS)"
    )]
    NothingToSteer { value: String, devices: String },
}

/// Commands from the session to a cell's thread.
pub(super) enum Cmd {
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
pub(super) enum Reply {
    Ready(Result<(), CellError>),
    Stepped(Result<StepInfo, CellError>),
    Finished(Result<CellResult, CellError>),
    Closed(Closed),
}

/// What a cell's thread hands back when it closes.
#[derive(Default)]
pub(super) struct Closed {
    pub counters: Option<CellCounters>,
    pub note: Option<String>,
    pub disturbance: Option<Disturbance>,
}

pub(super) struct StepInfo {
    pub done: bool,
    /// Index of the sample taken, if one was.
    pub sample: Option<usize>,
}

/// Thread ids of the process, as [`Probe::threads_now`] reads them.
type Threads = BTreeSet<u32>;

/// What a cell changes around it for its life; dropping it puts the interrupts back,
/// then restores the machine's state.
#[derive(Default)]
struct Held {
    _irqs: Option<FileWrites>,
    _state: CellGuard,
}

/// A cell's thread: sets up what the cell needs, then answers `cmds` until the
/// session closes the cell or lets go. Everything it starts is dropped here, the
/// instance before the client side.
pub(super) fn serve(
    session: &Session<'_>,
    plan: &CellPlan<'_>,
    placement: ResolvedPlacement,
    interleaved: bool,
    cmds: mpsc::Receiver<Cmd>,
    replies: mpsc::Sender<Reply>,
) {
    // Kept to the end of the cell, after the worker.
    let (client, _held) = set_up(session, plan, &placement);
    match client {
        Ok(client) => {
            Worker::new(session, plan, placement, interleaved, client, replies).serve(cmds);
        }
        Err(reason) => refuse(Arc::new(reason), cmds, replies),
    }
}

/// The cell's client side, the machine's state for the cell and its interrupts, or why
/// one of them could not be had (with what is held meanwhile).
fn set_up(
    session: &Session<'_>,
    plan: &CellPlan<'_>,
    placement: &ResolvedPlacement,
) -> (Result<Option<ClientSide>, SetupError>, Held) {
    let client =
        crate::client::client_for(plan.bench, session.topo, placement, &session.client_rule);
    // `1c1t-up` may take every other CPU offline unless the client runs on one: a
    // client on other hosts has no CPU here, and one sharing the placement's CPU
    // (`--client-cpus 0 --client-share`) needs no other.
    let client_elsewhere = match &client {
        Ok(Some(c)) => c.cpus().iter().any(|cpu| !placement.cpus.contains(&cpu)),
        _ => false,
    };
    let state = match session.system {
        Some(machine) => machine.enter_cell(placement, client_elsewhere),
        None => Ok(CellGuard::Unchanged),
    };
    let (client, state) = match (client, state) {
        (Ok(c), Ok(s)) => (c, s),
        (Err(e), _) => return (Err(e.into()), Held::default()),
        (_, Err(e)) => return (Err(e.into()), Held::default()),
    };
    let steered = steer_irqs(session, plan, placement, client.as_ref()).map_err(SetupError::from);
    let (client, irqs) = match steered.and_then(|irqs| thread_cookie(session, plan).map(|()| irqs))
    {
        Ok(irqs) => (Ok(client), irqs),
        Err(e) => (Err(e), None),
    };
    let held = Held {
        _irqs: irqs,
        _state: state,
    };
    (client, held)
}

/// A cell keyed with a cookie per thread: the cell's thread gets one before the
/// workload starts (after its client side, which stays apart), so every task the
/// workload starts inherits it; it dies with them and with this thread.
fn thread_cookie(session: &Session<'_>, plan: &CellPlan<'_>) -> Result<(), SetupError> {
    let Some(scope) = plan.key.conditions.cookie else {
        return Ok(());
    };
    let machine = session.system.ok_or(SetupError::CookieWithoutMachine)?;
    if scope == smtlab_model::keys::CookieScope::Thread {
        machine.create_cookie(0, scope)?;
    }
    Ok(())
}

/// Steers the network interrupts of a cell whose benchmark declares the `irq`
/// parameter ([`smtlab_placement::irq`]) and asks for it; the guard, held for the
/// cell's life. An error, which skips the cell with its reason, when the value is
/// malformed, the placement leaves no such CPU, the machine refuses, or there is
/// nothing to steer (so no cell says it was steered when it was not).
fn steer_irqs(
    session: &Session<'_>,
    plan: &CellPlan<'_>,
    placement: &ResolvedPlacement,
    client: Option<&ClientSide>,
) -> Result<Option<FileWrites>, IrqError> {
    if !plan.info.params.iter().any(|p| p.name == irq::PARAM) {
        return Ok(None);
    }
    let value = plan.params.get_str(irq::PARAM)?;
    let spec = irq::IrqSpec::parse(value).ok_or_else(|| IrqError::Malformed {
        value: value.into(),
    })?;
    let client_cpus = client.map(|c| c.cpus().clone()).unwrap_or_default();
    let Some(cpus) = irq::irq_cpus(session.topo, &placement.cpus, &client_cpus, spec.target)
        .map_err(IrqError::Cpus)?
    else {
        return Ok(None);
    };
    let Some(machine) = session.system else {
        return Err(IrqError::NoMachine {
            value: value.into(),
        });
    };
    let guard = machine
        .steer_irqs(&spec.devices, &cpus)
        .map_err(|source| IrqError::Refused {
            value: value.into(),
            source,
        })?;
    if guard.files().is_empty() {
        return Err(IrqError::NothingToSteer {
            value: value.into(),
            devices: spec.devices.join(", "),
        });
    }
    Ok(Some(guard))
}

/// Answers every command with `reason` until the session lets go.
fn refuse(reason: Arc<SetupError>, cmds: mpsc::Receiver<Cmd>, replies: mpsc::Sender<Reply>) {
    for cmd in cmds {
        let err = || CellError::Setup(reason.clone());
        let reply = match cmd {
            Cmd::Begin => Reply::Ready(Err(err())),
            Cmd::Step { .. } => Reply::Stepped(Err(err())),
            Cmd::Finish => Reply::Finished(Err(err())),
            Cmd::Close => Reply::Closed(Closed::default()),
        };
        if replies.send(reply).is_err() {
            break;
        }
    }
}

/// A cell set up: its rounds, counting and disturbance probe. Its fields drop in order
/// when the session lets go early: the instance first, then counting, the client side.
struct Worker<'a> {
    /// The last round's instance, kept for the traced extra sample.
    instance: Option<Box<dyn Instance>>,
    counting: Option<CellCounting>,
    client: Option<ClientSide>,
    /// What disturbs the cell, read around each of its own samples.
    probe: Option<Probe<'a>>,
    session: &'a Session<'a>,
    plan: &'a CellPlan<'a>,
    placement: ResolvedPlacement,
    interleaved: bool,
    last_iterations: Option<u64>,
    /// The work of every round's samples, for per-unit counter costs.
    work: f64,
    replies: mpsc::Sender<Reply>,
}

impl<'a> Worker<'a> {
    fn new(
        session: &'a Session<'a>,
        plan: &'a CellPlan<'a>,
        placement: ResolvedPlacement,
        interleaved: bool,
        client: Option<ClientSide>,
        replies: mpsc::Sender<Reply>,
    ) -> Self {
        let topo = session.topo;
        let mut counting = session.counting.as_ref().map(|c| {
            let cpus = placement.sampled_cpus(topo);
            CellCounting::begin_with(c.setup, c.backend, &cpus, spare_cpu(&placement, topo))
        });
        // Other cells take turns on these CPUs: the OS time counts this cell's own
        // stretches only (from a command to its reply), the others' turns left out.
        if interleaved && let Some(c) = counting.as_mut() {
            c.sample_only_while_working();
        }
        let probe = session
            .system
            .and_then(|m| Probe::new(m, session.clock, placement.sampled_cpus(topo)));
        Worker {
            instance: None,
            counting,
            client,
            probe,
            session,
            plan,
            placement,
            interleaved,
            last_iterations: None,
            work: 0.0,
            replies,
        }
    }

    /// Sends `reply`; false when the session let go.
    fn reply(&self, reply: Reply) -> bool {
        self.replies.send(reply).is_ok()
    }

    fn serve(mut self, cmds: mpsc::Receiver<Cmd>) {
        let mut cmds = cmds.into_iter();
        while let Some(cmd) = cmds.next() {
            let going = match cmd {
                Cmd::Begin => self.round(&mut cmds),
                Cmd::Step { .. } => self.reply(Reply::Stepped(Err(CellError::NotPrepared))),
                Cmd::Finish => self.reply(Reply::Finished(Err(CellError::NotPrepared))),
                Cmd::Close => return self.close(),
            };
            if !going {
                break;
            }
        }
        // The session let go early (stopped): `self` drops, the instance first.
    }

    /// One round: a fresh instance prepared, calibrated and warmed up, its steps, its
    /// summary. False when the session let go.
    fn round(&mut self, cmds: &mut mpsc::IntoIter<Cmd>) -> bool {
        self.instance = None;
        let (mut inst, threads_before) = match self.prepare() {
            Ok(prepared) => prepared,
            Err(e) => return self.reply(Reply::Ready(Err(e))),
        };
        let mut stop = StopObserver {
            stop: self.session.stop,
        };
        let finished = {
            let m = match self.begin(inst.as_mut(), &mut stop, threads_before) {
                Ok(m) => m,
                Err(e) => return self.reply(Reply::Ready(Err(e))),
            };
            if !self.reply(Reply::Ready(Ok(()))) {
                return false;
            }
            match self.steps(m, cmds) {
                Some(finished) => finished,
                None => return false,
            }
        };
        if let Ok(r) = &finished {
            if let Some(p) = self.probe.as_mut() {
                let cpu: Option<Vec<u64>> = r.samples.iter().map(|s| s.cpu_ns).collect();
                p.end_round(cpu.map(|c| c.iter().sum()));
            }
            self.last_iterations = Some(r.iterations);
            self.work += r.samples.iter().map(|s| s.work).sum::<f64>();
        }
        self.instance = Some(inst);
        self.reply(Reply::Finished(finished))
    }

    /// A fresh instance, its preparation counted as the cell's work, and the threads
    /// there were before it.
    fn prepare(&mut self) -> Result<(Box<dyn Instance>, Option<Threads>), CellError> {
        if let Some(c) = self.counting.as_mut() {
            c.working();
        }
        let threads_before = self.probe.as_ref().map(|p| p.threads_now());
        let ctx = BenchContext {
            params: &self.plan.params,
            placement: &self.placement,
            topology: self.session.topo,
            client: self.client.as_ref(),
        };
        let partner = tenant_cpu(self.session, self.plan, &self.placement);
        let before = partner.map(|(m, cpu)| m.own_threads_on(cpu));
        let prepared = self
            .plan
            .bench
            .prepare(&ctx)
            .map_err(CellError::Prepare)
            .and_then(|inst| {
                process_cookies(self.session, self.plan)?;
                if let (Some((m, cpu)), Some(before)) = (partner, &before) {
                    partner_cookies(m, cpu, before)?;
                }
                Ok(inst)
            });
        if prepared.is_err()
            && let Some(c) = self.counting.as_mut()
        {
            c.idle();
        }
        Ok((prepared?, threads_before))
    }

    /// Calibration and warm-up of `inst`; the threads started since `threads_before`
    /// (its workers) are the cell's measuring ones.
    fn begin<'m>(
        &mut self,
        inst: &'m mut dyn Instance,
        stop: &'m mut StopObserver<'_>,
        threads_before: Option<Threads>,
    ) -> Result<Measurement<'m>, CellError>
    where
        'a: 'm,
    {
        let (plan, session) = (self.plan, self.session);
        let begun = Measurement::begin(
            inst,
            &plan.info,
            session.cfg,
            session.clock,
            stop,
            plan.warmup_samples,
        );
        if let Some(c) = self.counting.as_mut() {
            c.idle();
        }
        let m = begun?;
        if let (Some(p), Some(before)) = (self.probe.as_mut(), threads_before) {
            let now = p.threads_now();
            p.measuring_threads(now.difference(&before).copied());
        }
        Ok(m)
    }

    /// Answers steps until the round is finished; `None` when the session let go.
    fn steps(
        &mut self,
        mut m: Measurement<'_>,
        cmds: &mut mpsc::IntoIter<Cmd>,
    ) -> Option<Result<CellResult, CellError>> {
        loop {
            match cmds.next()? {
                Cmd::Step { keep_pace } => {
                    let reply = self.step(&mut m, keep_pace);
                    if !self.reply(Reply::Stepped(reply)) {
                        return None;
                    }
                }
                Cmd::Finish => return Some(m.finish().map_err(CellError::Run)),
                Cmd::Begin | Cmd::Close => return Some(Err(CellError::Unfinished)),
            }
        }
    }

    /// One measured sample, counted and probed around it alone.
    fn step(&mut self, m: &mut Measurement<'_>, keep_pace: bool) -> Result<StepInfo, CellError> {
        if keep_pace {
            m.continue_if_converged();
        }
        let before = m.samples_taken();
        if let Some(p) = self.probe.as_mut() {
            p.open();
        }
        let idle_before = self
            .forced_idle()
            .map(|ns| (ns, self.session.clock.now_ns()));
        if let Some(c) = self.counting.as_mut() {
            c.working();
            c.resume();
        }
        let r = m.step();
        if let Some(c) = self.counting.as_mut() {
            c.pause();
            c.idle();
        }
        if let Some(p) = self.probe.as_mut() {
            p.close();
        }
        let after = m.samples_taken();
        if after > before {
            self.record_forced_idle(m, idle_before);
        }
        let done = r?;
        Ok(StepInfo {
            done,
            sample: (after > before).then(|| after - 1),
        })
    }

    /// The forced idle charged so far, on a cell with a core-scheduling cookie (where it
    /// is a figure beside the cell's own; without one, nothing of smtlab's is forced
    /// idle).
    fn forced_idle(&self) -> Option<u64> {
        self.plan.key.conditions.cookie?;
        self.session.system?.forced_idle_ns()
    }

    /// The sample just taken gets the forced idle since `before` (its count and the
    /// clock then), in nanoseconds and as a share of the placement's CPU time between
    /// the two readings.
    fn record_forced_idle(&self, m: &mut Measurement<'_>, before: Option<(u64, u64)>) {
        let (Some((idle_then, then_ns)), Some(idle_now)) = (before, self.forced_idle()) else {
            return;
        };
        let window_ns = self.session.clock.now_ns().saturating_sub(then_ns) as f64;
        let cpus = self.placement.cpus.len().max(1) as f64;
        let Some(sample) = m.last_sample_mut() else {
            return;
        };
        let ns = idle_now.saturating_sub(idle_then) as f64;
        sample.metrics.insert(FORCEIDLE_NS.into(), ns);
        if window_ns > 0.0 {
            sample
                .metrics
                .insert(FORCEIDLE_SHARE.into(), ns / (window_ns * cpus));
        }
    }

    /// Counts no more, traces one extra sample where it can, and hands back the
    /// counters and the disturbance; the instance goes before the client side.
    fn close(mut self) {
        let (counters, note) = match self.counting.take() {
            None => (None, None),
            Some(c) => self.finish_counting(c),
        };
        // The instance goes first (it may still use the client side).
        drop(self.instance.take());
        drop(self.client.take());
        let _ = self.replies.send(Reply::Closed(Closed {
            counters,
            note,
            disturbance: self.probe.take().and_then(|p| p.finish()),
        }));
    }

    fn finish_counting(&mut self, mut c: CellCounting) -> (Option<CellCounters>, Option<String>) {
        let plan = self.plan;
        let (unit, per) = plan
            .work_unit
            .clone()
            .unwrap_or_else(|| (work_unit_for(&plan.info.unit).to_string(), 1.0));
        c.stop(Some(Work {
            amount: self.work / per,
            unit,
        }));
        if let (Some(inst), Some(n)) = (self.instance.as_mut(), self.last_iterations)
            && c.can_trace()
        {
            let window = format!("one extra sample of {n} iterations after the measured ones");
            c.trace(&window, || {
                inst.sample(n).map(drop).map_err(|e| e.to_string())
            });
        }
        match c.finish(&window_text(self.session.repeat.max(1), self.interleaved)) {
            Ok(c) => (Some(c), None),
            Err(reason) => (None, Some(format!("counters not recorded: {reason}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_that_cannot_be_set_up_answers_every_command_with_why() {
        let (tx, cmds) = mpsc::channel();
        let (replies, rx) = mpsc::channel();
        let reason = Arc::new(SetupError::Client(NoClientCpus("no CPU left".into())));
        let thread = std::thread::spawn(move || refuse(reason, cmds, replies));
        let ask = |cmd| {
            tx.send(cmd).unwrap();
            rx.recv().unwrap()
        };
        for cmd in [Cmd::Begin, Cmd::Step { keep_pace: true }, Cmd::Finish] {
            let err = match ask(cmd) {
                Reply::Ready(Err(e)) => e,
                Reply::Stepped(Err(e)) => e,
                Reply::Finished(Err(e)) => e,
                _ => panic!("a command was answered without the reason"),
            };
            assert_eq!(err.to_string(), "no CPU left");
        }
        assert!(matches!(ask(Cmd::Close), Reply::Closed(c) if c.counters.is_none()));
        drop(tx);
        thread.join().unwrap();
    }

    #[test]
    fn the_reasons_read_as_one_line_each() {
        assert_eq!(
            CellError::Lost.to_string(),
            "the measuring thread ended early"
        );
        assert_eq!(CellError::NotPrepared.to_string(), "no prepared instance");
        assert_eq!(
            CellError::Unfinished.to_string(),
            "the round was not finished"
        );
        let spawn = CellError::Spawn(std::io::Error::other("no threads"));
        assert_eq!(
            spawn.to_string(),
            "cannot start a measuring thread: no threads"
        );
        let malformed = IrqError::Malformed {
            value: "neighbour".into(),
        };
        assert_eq!(
            malformed.to_string(),
            format!("parameter irq=\"neighbour\": expected {}", irq::EXPECTED)
        );
        let none = IrqError::NoMachine {
            value: "sibling".into(),
        };
        assert_eq!(
            none.to_string(),
            "irq=sibling: this run changes nothing on the machine, so it cannot steer interrupts"
        );
        let nothing = IrqError::NothingToSteer {
            value: "sibling".into(),
            devices: "lo, veth0".into(),
        };
        assert!(
            nothing
                .to_string()
                .starts_with("irq=sibling: nothing to steer for lo, veth0: no interrupts"),
            "{nothing}"
        );
        let needs = smtlab_placement::PlacementError::Unsatisfiable {
            placement: "1c2t".into(),
            needs: "2 threads per core".into(),
            has: "1".into(),
        };
        let off = CellError::Placement(Unplaced::InState {
            state: "off",
            error: needs.clone(),
        });
        assert_eq!(
            off.to_string(),
            "with SMT off: 1c2t needs 2 threads per core; this machine has 1"
        );
        assert_eq!(
            CellError::Placement(needs.into()).to_string(),
            "1c2t needs 2 threads per core; this machine has 1"
        );
        for e in [malformed, none, nothing] {
            assert!(!e.to_string().contains('\n'));
        }
    }
}
