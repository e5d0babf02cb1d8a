//! The cells of one [`Group`](super::Group) measured together: each on its own thread
//! ([`super::cell`]), their rounds taking turns, their records in the group's order.

use std::ops::ControlFlow;
use std::sync::mpsc;
use std::thread::Scope;

use smtlab_model::run::handoff_changes;
use smtlab_model::{CellRecord, HandoffChange, ResolvedPlacement, SkippedCell};

use super::cell::{self, CellError, Closed, Cmd, Reply};
use super::{CellPlan, Ended, Measured, Session, SessionObserver};
use smtlab_model::result::CellResult;

/// A cell still going: its plan, its thread's channels, its rounds.
struct Live<'p> {
    plan: &'p CellPlan<'p>,
    tx: mpsc::Sender<Cmd>,
    rx: mpsc::Receiver<Reply>,
    rounds: Vec<CellResult>,
    failed: Option<CellError>,
    placement: ResolvedPlacement,
}

/// A cell of the group: going, or why it could not start.
type Slot<'p> = Result<Live<'p>, CellError>;

impl<'p> Live<'p> {
    /// The cell thread's reply to `cmd`; `None` when the thread has ended.
    fn ask(&mut self, cmd: Cmd) -> Option<Reply> {
        self.tx.send(cmd).ok()?;
        self.rx.recv().ok()
    }

    /// The cell still going, not failed.
    fn going<'s>(slot: &'s mut Slot<'p>) -> Option<&'s mut Self> {
        slot.as_mut().ok().filter(|live| live.failed.is_none())
    }

    /// The cell closed: its counters and what disturbed it.
    fn close(&mut self) -> Closed {
        match self.ask(Cmd::Close) {
            Some(Reply::Closed(c)) => c,
            _ => Closed::default(),
        }
    }

    /// A cell measured and `closed`: its rounds pooled, its record passed on, disturbed
    /// where `moved` names CPU pairs whose handoff changed around it.
    fn measured(
        &mut self,
        closed: Closed,
        moved: &[HandoffChange],
        observer: &mut dyn SessionObserver,
    ) -> ControlFlow<()> {
        let Some(mut result) = crate::rounds::pool(std::mem::take(&mut self.rounds)) else {
            return ControlFlow::Continue(());
        };
        result.disturbance = closed.disturbance;
        if !moved.is_empty() {
            let d = result.disturbance.get_or_insert_with(Default::default);
            HandoffChange::merge(&mut d.handoff_changed, moved);
        }
        let plan = self.plan;
        let record = CellRecord {
            benchmark: plan.info.name.clone(),
            group: plan.info.group.clone(),
            unit: plan.info.unit.to_string(),
            direction: plan.info.direction,
            params: plan.key.params.clone(),
            conditions: plan.key.conditions.clone(),
            placement_spec: plan.key.placement.clone(),
            placement: self.placement.clone(),
            result,
            counters: closed.counters,
        };
        observer.measured(Measured {
            record: &record,
            counters_note: closed.note.as_deref(),
        })
    }
}

impl Session<'_> {
    /// Measures the cells of `group` together: each on its own thread, `repeat` rounds
    /// in which the cells take turns (sample by sample when interleaving, else cell by
    /// cell); records in the order of the group.
    pub(super) fn measure_together(
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
        let before = self.handoff_changes(&group);
        std::thread::scope(|scope| {
            let mut cells = self.start_cells(scope, &group, interleaved, observer);
            for round in 0..repeat {
                for batch in &batches {
                    self.measure_batch(&mut cells, batch, round, observer);
                    if self.stopped() {
                        return Ended::Stopped;
                    }
                }
            }
            if self.stopped() {
                return Ended::Stopped;
            }
            self.record(&group, &mut cells, &before, observer)
        })
    }

    /// The run's start handoffs that differ by `HANDOFF_CHANGE` or more now; nothing is
    /// read where the run recorded none or no cell of `group` is on two CPUs or more.
    fn handoff_changes(&self, group: &[CellPlan<'_>]) -> Vec<HandoffChange> {
        let Some(machine) = self.system else {
            return Vec::new();
        };
        let spans = |c: &CellPlan<'_>| c.placement.as_ref().is_ok_and(|p| p.spans_cpus(self.topo));
        if self.handoff_at_start.is_empty() || !group.iter().any(spans) {
            return Vec::new();
        }
        let pairs: Vec<(u32, u32)> = self
            .handoff_at_start
            .iter()
            .map(|h| (h.from_cpu, h.to_cpu))
            .collect();
        let now = machine.cpu_handoffs(&pairs);
        HandoffChange::from_pairs(&handoff_changes(self.handoff_at_start, &now))
    }

    /// Starts a thread for each cell whose placement is resolved.
    fn start_cells<'s, 'e>(
        &'e self,
        scope: &'s Scope<'s, 'e>,
        group: &'e [CellPlan<'e>],
        interleaved: bool,
        observer: &mut dyn SessionObserver,
    ) -> Vec<Slot<'e>> {
        let mut cells = Vec::new();
        for plan in group {
            observer.cell_started(&plan.key);
            let placement = match &plan.placement {
                Ok(p) => p.clone(),
                Err(reason) => {
                    cells.push(Err(CellError::Placement(reason.clone())));
                    continue;
                }
            };
            let (tx, cmd_rx) = mpsc::channel::<Cmd>();
            let (reply_tx, rx) = mpsc::channel::<Reply>();
            let cell_placement = placement.clone();
            let spawned = std::thread::Builder::new()
                .name("smtlab-cell".into())
                .spawn_scoped(scope, move || {
                    cell::serve(self, plan, cell_placement, interleaved, cmd_rx, reply_tx);
                });
            cells.push(match spawned {
                Ok(_) => Ok(Live {
                    plan,
                    tx,
                    rx,
                    rounds: Vec::new(),
                    failed: None,
                    placement,
                }),
                Err(e) => Err(CellError::Spawn(e)),
            });
        }
        cells
    }

    /// One round of the cells of `batch`: each prepared, calibrated and warmed up in
    /// order, then one sample of each in turn until every cell is done, then each
    /// summarised. Returns early, leaving the round unfinished, when stopped.
    fn measure_batch(
        &self,
        cells: &mut [Slot<'_>],
        batch: &[usize],
        round: usize,
        observer: &mut dyn SessionObserver,
    ) {
        let mut going: Vec<usize> = Vec::new();
        for &i in batch {
            let Some(live) = Live::going(&mut cells[i]) else {
                continue;
            };
            if self.stopped() {
                continue;
            }
            match live.ask(Cmd::Begin) {
                Some(Reply::Ready(Ok(()))) => going.push(i),
                Some(Reply::Ready(Err(e))) => live.failed = Some(e),
                _ => live.failed = Some(CellError::Lost),
            }
        }
        self.take_turns(cells, &going, round, observer);
        if self.stopped() {
            return;
        }
        for &i in &going {
            let Some(live) = Live::going(&mut cells[i]) else {
                continue;
            };
            match live.ask(Cmd::Finish) {
                Some(Reply::Finished(Ok(r))) => live.rounds.push(r),
                Some(Reply::Finished(Err(e))) => live.failed = Some(e),
                _ => live.failed = Some(CellError::Lost),
            }
        }
    }

    /// One sample of each cell of `going` in turn until every one is done (or stopped).
    fn take_turns(
        &self,
        cells: &mut [Slot<'_>],
        going: &[usize],
        round: usize,
        observer: &mut dyn SessionObserver,
    ) {
        let mut done = vec![false; cells.len()];
        let keep_pace = going.len() > 1;
        while !self.stopped() && going.iter().any(|&i| !done[i]) {
            for &i in going {
                let Some(live) = Live::going(&mut cells[i]) else {
                    continue;
                };
                if done[i] && !keep_pace {
                    continue;
                }
                match live.ask(Cmd::Step { keep_pace }) {
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
                        live.failed = Some(CellError::Lost);
                        done[i] = true;
                    }
                }
            }
            // A cell that converged early keeps pace only while others go on.
            if going.iter().all(|&i| done[i]) {
                break;
            }
        }
    }

    /// Tells `observer` about every cell in the group's order: its record, or why it
    /// was skipped. The measured cells are closed first, so that nothing of the group
    /// runs while the handoffs are read again; `before`: what they read before it.
    fn record(
        &self,
        group: &[CellPlan<'_>],
        cells: &mut [Slot<'_>],
        before: &[HandoffChange],
        observer: &mut dyn SessionObserver,
    ) -> Ended {
        let closed: Vec<Option<Closed>> = cells
            .iter_mut()
            .map(|slot| Live::going(slot).map(Live::close))
            .collect();
        let mut moved = before.to_vec();
        HandoffChange::merge(&mut moved, &self.handoff_changes(group));
        for ((plan, slot), closed) in group.iter().zip(cells).zip(closed) {
            let flow = match (slot, closed) {
                (Ok(live), Some(closed)) => {
                    let spans = live.placement.spans_cpus(self.topo);
                    live.measured(closed, if spans { &moved } else { &[] }, observer)
                }
                (slot, _) => self.skipped(plan, slot, observer),
            };
            if flow.is_break() {
                return Ended::Stopped;
            }
        }
        Ended::Complete
    }

    /// A cell that failed, closed and passed on with its reason; a failure while
    /// stopping is a stop (the stop flag makes a child fail its sample).
    fn skipped(
        &self,
        plan: &CellPlan<'_>,
        slot: &mut Slot<'_>,
        observer: &mut dyn SessionObserver,
    ) -> ControlFlow<()> {
        if self.stopped() {
            return ControlFlow::Break(());
        }
        let reason = match slot {
            Err(reason) => reason.to_string(),
            Ok(live) => {
                let reason = live.failed.as_ref().map(ToString::to_string);
                drop(live.ask(Cmd::Close));
                reason.unwrap_or_default()
            }
        };
        observer.skipped(&SkippedCell {
            key: plan.key.clone(),
            reason,
        })
    }
}
