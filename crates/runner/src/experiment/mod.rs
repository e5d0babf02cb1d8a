//! Experiments: the plans of the commands that measure more than a list of cells, run
//! through the one engine, [`Session`]. A co-run group ([`corun`]: a workload alone and
//! next to a partner on its SMT sibling or on another core), a utilisation curve
//! ([`utilisation`]: an open-loop load at shares of its measured maximum, in each SMT
//! state) and what an SMT recommendation needs ([`advise`]: the workload on `1c1t`,
//! `1c2t` and `2c1t`, the user's command with an untimed preparation) are built here as ordinary [`CellPlan`]s whose keys carry their conditions
//! ([`smtlab_model::keys`]), so they get what every session gives: counters around each
//! cell's own samples, the stop flag, interleaving, and each cell pushed to the caller's
//! sink ([`SessionObserver`]) as soon as it is done, so it is saved per cell.
//!
//! The experiments never print and never touch the store: the caller's sink does.

pub mod advise;
pub mod corun;
pub mod utilisation;

use std::sync::atomic::AtomicBool;

use smtlab_bench::BenchError;
use smtlab_model::Topology;
use smtlab_placement::ClientRule;

use crate::clock::Clock;
use crate::config::RunConfig;
use crate::error::RunError;
use crate::session::{Counting, Ended, Group, Session, SessionObserver};

/// How an experiment measures: the settings every one of its sessions shares.
pub struct Engine<'a> {
    pub cfg: &'a RunConfig,
    pub clock: &'a dyn Clock,
    /// `--counters`: counting around each cell's own samples.
    pub counting: Option<Counting<'a>>,
    /// Set by a signal handler to stop; cells in progress are not recorded.
    pub stop: &'a AtomicBool,
}

impl Engine<'_> {
    /// Measures `groups` on `topo`, each group's cells with their samples in turn.
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
            client_rule: ClientRule::default(),
            counting: self.counting,
            repeat: 1,
            interleave: true,
            stop: self.stop,
            cell_state: None,
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
