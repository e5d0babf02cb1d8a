//! # smtlab-model
//!
//! Plain data shared by every smtlab crate, with no I/O:
//!
//! * [`CpuSet`]: a set of logical CPU numbers, parsed from and formatted to the two
//!   textual forms Linux uses (`0-3,8,10-11` lists and `ff,00000001` hex masks).
//! * [`Topology`]: what the topology crate discovers (packages, cores, CPUs, caches,
//!   NUMA nodes, SMT state); it serialises to the `smtlab.topology/1` JSON contract.
//! * [`PlacementSpec`] / [`ResolvedPlacement`]: a placement name as the user wrote it,
//!   and the exact CPUs it resolved to on one machine.
//!
//! * [`BenchInfo`], [`SampleRecord`], [`Summary`]: what a benchmark measures and what a
//!   measured cell holds; [`Unit`]: the unit of a value as a type; [`ReportSection`]:
//!   which report section presents a benchmark.
//!
//! * [`predict`]: the cells of `smtlab predict`'s pairs by role, as the report reads them.
//! * [`keys`]: the typed conditions of a cell (SMT state, co-run form and partner,
//!   offered rate); [`metrics`]: the names of the metrics and series benchmarks write
//!   and the report reads.
//! * [`stats`]: the small statistics every layer shares (mean, percentiles, Student-t
//!   confidence intervals, geometric mean, ratios of two summaries, p-values and
//!   Benjamini and Hochberg's correction).
//! * [`verdict`]: the one verdict on two cells (speed-up, interval, words, unsteady
//!   and disturbed cells, SMT pairs whose sibling was idle) that every output prints.
//! * [`disturbance`]: what disturbed a cell (steal, other processes, smtlab's own
//!   threads) and when that makes it `disturbed`.
//!
//! Everything here is `serde`-serialisable so that the store, the report and other
//! tools read the same shapes.

/// An enum whose variants each have one name (`Variant = "name"`): its `ALL` (in
/// declaration order), the name (`name`, or the method after `fn`), `parse` (exactly
/// the name) and `Display` (the name), written from one list so they cannot disagree.
/// After `serde_names;` each variant is also serialised as its name. Every such enum is
/// a plain word, so the macro derives `Debug, Clone, Copy, PartialEq, Eq` itself; the
/// declaration names only what it adds (`Hash`, `Ord`, `Serialize`, ...).
#[macro_export]
macro_rules! named_enum {
    (serde_names; $(#[$meta:meta])* $vis:vis enum $t:ident {
        $($(#[$vmeta:meta])* $variant:ident = $name:literal,)*
    }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $(#[$meta])* $vis enum $t { $($(#[$vmeta])* #[serde(rename = $name)] $variant,)* }
        $crate::named_enum!(@impl name $t { $($variant = $name,)* });
    };
    (fn $f:ident; $(#[$meta:meta])* $vis:vis enum $t:ident {
        $($(#[$vmeta:meta])* $variant:ident = $name:literal,)*
    }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $(#[$meta])* $vis enum $t { $($(#[$vmeta])* $variant,)* }
        $crate::named_enum!(@impl $f $t { $($variant = $name,)* });
    };
    (@impl $f:ident $t:ident { $($variant:ident = $name:literal,)* }) => {
        impl $t {
            pub const ALL: [$t; [$($name),*].len()] = [$($t::$variant),*];

            pub const fn $f(self) -> &'static str {
                match self {
                    $($t::$variant => $name,)*
                }
            }

            pub fn parse(text: &str) -> Option<$t> {
                $t::ALL.into_iter().find(|v| v.$f() == text)
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.$f())
            }
        }
    };
    ($($enum:tt)*) => {
        $crate::named_enum!(fn name; $($enum)*);
    };
}

pub mod bench;
pub mod counters;
pub mod cpuset;
pub mod digest;
pub mod disturbance;
pub mod keys;
pub mod metrics;
pub mod placement;
pub mod predict;
pub mod quote;
pub mod result;
pub mod run;
pub mod slo;
pub mod stats;
pub mod topology;
pub mod unit;
pub mod verdict;

pub use bench::{
    BenchInfo, Departure, Direction, ParamInfo, ReportSection, SampleRecord, Summary, ValueKind,
};
pub use cpuset::{CpuListError, CpuSet};
pub use digest::SampleDigest;
pub use disturbance::{Disturbance, HandoffChange};
pub use placement::{CoreOrder, CpuOrder, PlacementKind, PlacementSpec, ResolvedPlacement};
pub use result::{AtLimit, CellResult, ConfigError, LimitKind, Round, RunConfig};
pub use run::{
    CellKey, CellRecord, EMULATED_HOST_ID_PREFIX, EMULATED_MODEL_PREFIX, Environment, Handoff,
    RESULTS_SCHEMA, RunMeta, RunResults, RunStatus, SkippedCell,
};
pub use topology::{
    Cache, CacheType, Core, CoreKind, NumaNode, Package, SmtInfo, TOPOLOGY_SCHEMA, Tlb, Topology,
};
pub use unit::Unit;
