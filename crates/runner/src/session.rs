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
//!    ([`Measurement`](crate::measure::Measurement)), the counters enabled around each
//!    measured sample only;
//! 4. with `repeat > 1`, further rounds from fresh instances, pooled
//!    ([`crate::rounds::pool`]); every round reaches the record (`CellResult::rounds`);
//! 5. one extra sample with syscall tracing (where available), then the instance is
//!    dropped, and after it the client side.
//!
//! Around each of its samples a cell reads what disturbs it (steal, other processes,
//! smtlab's own other threads: [`crate::disturb`]) from the session's machine, and its
//! record carries the sum (`CellResult::disturbance`). Before and after each group the
//! session reads the CPUs' cache-line handoffs again where the run recorded them at its
//! start, and a cell on two CPUs or more of a group around which one changed by
//! `HANDOFF_CHANGE` is disturbed: its CPUs moved (a host put the vCPUs on another die).
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
//! Each cell's thread is a worker (`cell`) that answers the group's commands (`group`)
//! and gives a typed reason ([`CellError`]) for a cell it cannot measure; the reason's
//! text is the skip's.
//!
//! The session never prints. Stopping (Ctrl-C, a signal) is one flag, [`Session::stop`]:
//! the cells in progress end at their next event and are not recorded.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};

use smtlab_bench::{Benchmark, Params};
use smtlab_model::run::Handoff;
use smtlab_model::{BenchInfo, CellKey, CellRecord, ResolvedPlacement, SkippedCell, Topology};
use smtlab_placement::ClientRule;

use crate::clock::Clock;
use crate::config::RunConfig;
use crate::counting::{CountingBackend, CountingSetup, SAMPLES_WINDOW};
use crate::machine::Machine;
use crate::observer::{Event, Observer};

mod cell;
mod cookie;
mod group;

pub use cell::{CellError, IrqError, SetupError};

/// One cell to measure.
#[derive(Clone)]
pub struct CellPlan<'a> {
    pub bench: &'a dyn Benchmark,
    pub info: BenchInfo,
    pub params: Params,
    /// Benchmark, parameters and placement as written (`1c2t`, `cpus=0,4`).
    pub key: CellKey,
    /// The placement resolved on this machine, or why it cannot be.
    pub placement: Result<ResolvedPlacement, Unplaced>,
    /// What one unit of a sample's `work` is for per-unit counter costs, and how many
    /// of them make one: `None` for the benchmark's unit (`op`, or `byte` for
    /// bandwidths).
    pub work_unit: Option<(String, f64)>,
    /// Exactly this many warm-up samples instead of the configured warm-up time.
    pub warmup_samples: Option<usize>,
}

impl<'a> CellPlan<'a> {
    /// The cell `key` of `bench` with `params`, on `placement`: the benchmark's own unit
    /// and warm-up.
    pub fn new(
        bench: &'a dyn Benchmark,
        params: Params,
        key: CellKey,
        placement: Result<ResolvedPlacement, Unplaced>,
    ) -> CellPlan<'a> {
        CellPlan {
            bench,
            info: bench.info(),
            params,
            key,
            placement,
            work_unit: None,
            warmup_samples: None,
        }
    }
}

/// Why a cell's placement cannot be had on this machine: the reason its skip carries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unplaced {
    #[error("{0}")]
    Placement(#[from] smtlab_placement::PlacementError),
    /// Not in the SMT state the run switched to (its topology read again there).
    // Not a `source`: the message says it already, so it is printed once.
    #[error("with SMT {state}: {error}")]
    InState {
        state: &'static str,
        error: smtlab_placement::PlacementError,
    },
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
    /// The run's cache-line handoffs at its start (`Environment::cpu_handoff`): a cell
    /// on two CPUs or more around which [`Self::system`] reads one changed by
    /// `HANDOFF_CHANGE` is disturbed (the CPUs moved). Empty: nothing is read.
    pub handoff_at_start: &'a [Handoff],
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
            // `1c1t-up` keeps the other CPUs offline while its instance lives, which
            // the group's other placements need: such a group takes one cell at a time.
            let offline = group
                .iter()
                .any(|c| c.placement.as_ref().is_ok_and(|p| p.is_uniprocessor()));
            let together =
                (self.interleave || self.repeat > 1) && !offline && !self.too_big_together(&group);
            let parts = if together {
                vec![group]
            } else {
                group.into_iter().map(|cell| vec![cell]).collect()
            };
            for part in parts {
                if self.measure_together(part, observer) == Ended::Stopped {
                    return Ended::Stopped;
                }
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
