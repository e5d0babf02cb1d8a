//! # smtlab-placement
//!
//! Turns a placement name into exact CPUs on one machine, and pins threads and child
//! processes to them.
//!
//! 1. [`parse`] reads what the user wrote into a [`PlacementSpec`]:
//!    `NcMt` (`1c1t`, `1c2t`, `2c1t`, `2c2t`, `4c2t`, ...: N cores, M hardware threads on
//!    each), the seed papers' aliases `1T` = `1c1t`, `2T` = `1c2t` (two SMT siblings of one
//!    core), `2P` = `2c1t`, `4T` = `2c2t`, and `all`, `cores`, `half-cores-Mt`, `cpus=LIST`,
//!    `os`. Case does
//!    not matter. Optional suffixes pick the core order and the CPU order, in either order:
//!    `2c1t/scatter`, `2c2t/scatter/siblings`.
//! 2. [`resolve`] maps a spec onto a [`Topology`] and gives a [`ResolvedPlacement`] whose
//!    `cpus` are in thread-assignment order: thread *i* runs on `cpus[i % cpus.len()]`.
//!    A request the machine cannot satisfy (`1c2t` without SMT) is an error that says what
//!    the machine has; it is never quietly degraded to something else.
//! 3. [`standard_placements`] lists the set worth comparing on a machine (`1c1t`, `1c2t`,
//!    `2c1t`, `2c2t`, `2c1t/scatter`, `1cKt`, `cores`, `all`) with each one's resolution or
//!    the reason it fails.
//! 4. [`irq`] names the CPUs a network workload's interrupts are steered to (`irq=sibling`:
//!    the idle SMT siblings of the placement; `irq=other-core`: CPUs of cores it does not
//!    use), for the runner to write (paper 004 s3).
//! 5. [`pin`] sets and verifies affinity: the calling thread, threads spawned pinned
//!    ([`pin::spawn_pinned`]), and child processes ([`pin::CommandPinExt::pin_to`]). The OS
//!    calls sit behind the [`pin::Affinity`] trait.
//!    With the `tokio` feature, [`runtime::PinnedRuntime`] is a tokio runtime whose worker
//!    threads are pinned the same way (the servers that run on tokio).
//! 6. [`workers::Workers`] owns threads fed by a queue each (a load generator's client
//!    threads, a client side's helper threads), closing and joining them when dropped.
//!
//! ## Which CPUs a placement takes
//!
//! Only *usable* CPUs count: online CPUs of the topology that this process may run on
//! (`Topology::allowed_cpus`, when a cpuset or affinity mask hides some). A core is the
//! usable CPUs of one topology core; a core with none left is ignored.
//!
//! * **Core order `compact`** (default): cores sorted by package, then NUMA node, die,
//!   cluster, first CPU, so the chosen cores share as much as possible (fill one package
//!   first). `NcMt` takes the first N cores that have at least M usable threads, the cores
//!   with the most threads before the others, so on a hybrid machine `1c1t`, `1c2t` and
//!   `2c1t` all run on SMT-capable performance cores and their ratios compare like with
//!   like. [`ResolvedPlacement::core_kinds`] names the kinds used (two of them: mixed).
//! * **Core order `scatter`**: round robin over packages (one core from package 0, one
//!   from package 1, ..., then the second core of each), each package's cores in compact
//!   order. Cores outside any package form one more group. On a one-package machine
//!   scatter and compact choose the same cores.
//! * **`half-cores-Mt`** is `NcMt` with N half the usable cores (rounded down, at least two
//!   cores needed): the first half in the core order, M threads on each, so a server
//!   workload's clients get the other half ([`client_cpus`]' default rule). On a
//!   two-package machine compact order gives the server package 0 and the clients
//!   package 1. `half-cores-1t` against `half-cores-2t` is `cores` against `all` for a
//!   server, with room for its load.
//! * Within a core, `NcMt` takes the core's M lowest-numbered CPUs; `cores` takes each
//!   core's lowest CPU; `all` takes every usable CPU; `cpus=LIST` takes exactly LIST (every
//!   CPU in it must be usable). No CPU is ever used twice.
//!
//! ## In which order threads receive the CPUs
//!
//! * **`spread`** (default): thread slot 0 of every chosen core in core order, then slot 1
//!   of every core, and so on. Running fewer threads than CPUs fills separate cores before
//!   SMT siblings: `2c2t` on siblings (0,16) and (1,17) gives `[0, 1, 16, 17]`.
//! * **`siblings`**: all threads of the first core, then the next core: `[0, 16, 1, 17]`.
//!   Threads 2k and 2k+1 share a core.
//! * **`linear`**: ascending CPU number, as Linux numbers them (paper 002's "dumb"
//!   mapping): `[0, 1, 16, 17]` here, but `[0, 1, 2, 3]` for siblings (0,1) and (2,3).
//!
//! `os` pins nothing: its `cpus` are empty and every count is 0.
//!
//! ## Names
//!
//! [`ResolvedPlacement::name`] is canonical: `1c2t` for `2T`, `all`, `cores`, `cpus=0,4`
//! (ranges merged: `cpus=0-3`), `os`; any non-default order is appended (`2c1t/scatter`,
//! `2c2t/scatter/siblings`, `all/linear`) whether or not it changes the CPUs on this
//! machine, so a name means the same request on every machine and stays unique in a run.
//! [`ResolvedPlacement::packages`] counts cores outside any package (a PS3 has no package
//! ids) as one package.

pub mod client;
pub mod irq;
pub mod pin;
mod resolve;
#[cfg(feature = "tokio")]
pub mod runtime;
mod spec;
pub mod workers;

pub use client::{ClientError, ClientRule, RemoteClients, Token, TokenError, client_cpus};
pub use resolve::{distinct, resolve, standard_placements};
pub use smtlab_model::{
    CoreOrder, CpuOrder, CpuSet, PlacementKind, PlacementSpec, ResolvedPlacement, Topology,
};
pub use spec::{EXPECTED, HALF_CORES_PREFIX, canonical_name, parse};

/// A placement that could not be parsed or cannot be satisfied on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// Not a placement name at all.
    #[error("unknown placement {}: expected {EXPECTED}", smtlab_model::quote::quoted(.input))]
    Unknown { input: String },
    /// Looks like a placement but something in it is wrong (`0c1t`, `cpus=`, `/sideways`).
    #[error("invalid placement {}: {reason}", smtlab_model::quote::quoted(.input))]
    Invalid { input: String, reason: String },
    /// Well formed, but this machine does not have what it asks for.
    #[error("{placement} needs {needs}; this machine has {has}")]
    Unsatisfiable {
        /// The placement as written, with its canonical name when that differs: `2T (1c2t)`.
        placement: String,
        needs: String,
        has: String,
    },
    /// `cpus=LIST` names CPUs that are offline, absent or outside this process's affinity.
    #[error("{placement}: {reason}")]
    CpusUnavailable { placement: String, reason: String },
}
