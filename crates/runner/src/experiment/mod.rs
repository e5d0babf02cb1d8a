//! Experiments: the plans of the commands that measure more than a list of cells, run
//! through the one engine, [`Session`]. A co-run group ([`corun`]: a workload alone and
//! next to a partner on its SMT sibling or on another core), a utilisation curve
//! ([`utilisation`]: an open-loop load at shares of its measured maximum, in each SMT
//! state), what an SMT recommendation needs ([`advise`]: the workload on `1c1t`,
//! `1c2t` and `2c1t`, the user's command with an untimed preparation) and the security
//! modes ([`security`]: SMT on, core scheduling, SMT off; distrusting tenants) are built
//! here as ordinary [`CellPlan`]s whose keys carry their conditions
//! ([`smtlab_model::keys`]), so they get what every session gives: counters around each
//! cell's own samples, the stop flag, interleaving, and each cell pushed to the caller's
//! sink ([`SessionObserver`]) as soon as it is done, so it is saved per cell.
//!
//! The experiments never print and never touch the store: the caller's sink does.

pub mod advise;
pub mod corun;
pub mod plan;
pub mod predict;
pub mod security;
pub mod siblings;
pub mod smt;
pub mod utilisation;

use std::sync::atomic::AtomicBool;

use smtlab_bench::BenchError;
use smtlab_model::Topology;
use smtlab_model::run::Handoff;
use smtlab_placement::ClientRule;

use crate::clock::Clock;
use crate::config::RunConfig;
use crate::counting::CountingSetup;
use crate::error::RunError;
use crate::machine::Machine;
use crate::plan::Measuring;
use crate::session::{Counting, Ended, Group, Session, SessionObserver};

/// How an experiment measures: the machine and the settings every one of its sessions
/// shares.
pub struct Engine<'a> {
    /// Where it measures: the topology, SMT switching, the system state of each cell.
    pub machine: &'a dyn Machine,
    pub cfg: &'a RunConfig,
    pub clock: &'a dyn Clock,
    /// `--counters`: counting around each cell's own samples.
    pub counting: Option<Counting<'a>>,
    /// Set by a signal handler to stop; cells in progress are not recorded.
    pub stop: &'a AtomicBool,
    /// Interleaving, rounds per cell and where a benchmark's client side runs: the
    /// same settings a run's estimate is made with.
    pub how: Measuring,
    /// The run's cache-line handoffs at its start, against which each cell's CPUs are
    /// checked ([`Session::handoff_at_start`]); empty: not checked.
    pub handoff_at_start: Vec<Handoff>,
}

impl<'a> Engine<'a> {
    /// Measuring on `machine` with its clock and, given `counting` (the machine's
    /// [`Machine::counting_setup`]), its counting backend; one round, interleaved, the
    /// client side apart.
    pub fn new(
        machine: &'a dyn Machine,
        cfg: &'a RunConfig,
        counting: Option<&'a CountingSetup>,
        stop: &'a AtomicBool,
    ) -> Engine<'a> {
        Engine {
            machine,
            cfg,
            clock: machine.clock(),
            counting: counting.map(|setup| Counting {
                setup,
                backend: machine.counting_backend(),
            }),
            stop,
            how: Measuring {
                interleave: true,
                repeat: 1,
                client_rule: ClientRule::default(),
            },
            handoff_at_start: Vec::new(),
        }
    }

    /// This engine measuring as `how` says.
    pub fn measuring(self, how: Measuring) -> Engine<'a> {
        Engine { how, ..self }
    }

    /// This engine checking each cell's CPUs against the run's handoffs at its start
    /// (`Environment::cpu_handoff`).
    pub fn sharing_at_start(self, handoffs: &[Handoff]) -> Engine<'a> {
        Engine {
            handoff_at_start: handoffs.to_vec(),
            ..self
        }
    }

    /// Measures `groups` on `topo`, each cell in the system state it needs.
    pub fn run(
        &self,
        topo: &Topology,
        groups: Vec<Group<'_>>,
        sink: &mut dyn SessionObserver,
    ) -> Ended {
        Session {
            topo,
            cfg: self.cfg,
            clock: self.clock,
            client_rule: self.how.client_rule.clone(),
            counting: self.counting,
            repeat: self.how.repeat.max(1),
            interleave: self.how.interleave,
            stop: self.stop,
            system: Some(self.machine),
            handoff_at_start: &self.handoff_at_start,
        }
        .run(groups, sink)
    }
}

/// Why an experiment cannot be planned or run.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A setting or input that cannot work (the text names it and what was expected).
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error(transparent)]
    Run(#[from] RunError),
}

impl ExperimentError {
    fn input(text: impl Into<String>) -> Self {
        ExperimentError::Input(text.into())
    }
}
