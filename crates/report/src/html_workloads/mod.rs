//! The page's sections for the server and system workloads, each shown only when the run
//! has cells of its kind:
//!
//! * `workload-smt` (paper 004 Chart 1): one bar per workload and parameter set, the
//!   `1c2t/1c1t` speed-up with its 95% interval; a run without such pairs says why in one
//!   line instead of drawing nothing;
//! * `web` (paper 000 Figs 1-6, 20-21): `web-static` throughput per server and placement
//!   in Mbit/s and requests/s, the `1c2t/1c1t` and `2c2t/2c1t` speed-ups per server,
//!   latency percentiles and errors; `web-capacity` bars and its conformance curve;
//! * `workload-tables` (paper 001 Tables 3-6): chat, dbench, tbench and the netperf-style
//!   rows as rows of the swept parameter, a column per placement, the speed-ups with
//!   their intervals and their geometric mean, a chart each, and the per-unit CPU and
//!   counter figures where they were recorded;
//! * `aim` (paper 001 Table 2): a row per AIM9 benchmark;
//! * `task-pool` (paper 002 Figs 15-16): tasks per second and tree run time against the
//!   number of workers per queue kind, CAS retries per task;
//! * `oltp`: `oltp-pg`, `oltp-sqlite` and `sdet` per placement.
//!
//! A run without cells of a kind gets no section and no mention (an empty `Err`).
//!
//! Every speed-up is [`smtlab_model::stats::speedup`] (the ratio of the means with
//! Fieller's interval), written with [`crate::fmt::verdict`]'s rules; nothing here
//! divides two values any other way.
//!
//! A file per section (`smt_gain.rs`, `web.rs`, `tables.rs`, `aim.rs`, `task_pool.rs`,
//! `oltp.rs`), the terminal summary in `text.rs`, and the pieces they share: picking
//! cells and reading their metrics (`cells.rs`), rows by parameter set (`rows.rs`),
//! paper 001's speed-up table (`speedup_table.rs`), a benchmark's table with its chart
//! and per-unit costs (`bench_block.rs`) and the charts (`charts.rs`).

mod aim;
mod bench_block;
pub(crate) mod cells;
mod charts;
mod oltp;
mod rows;
mod smt_gain;
mod speedup_table;
mod tables;
mod task_pool;
mod text;
mod web;

use smtlab_model::{CellRecord, RunResults};

pub(crate) use aim::aim;
pub(crate) use oltp::oltp;
pub(crate) use smt_gain::chart1;
pub(crate) use tables::tables;
pub(crate) use task_pool::task_pool;
pub use text::text_summary;
pub(crate) use web::web;

/// Whether a cell is one of the server or system workloads (Chart 1's bars): its
/// benchmark's report section is one of theirs (`ReportSection::is_workload`).
pub fn is_workload(r: &RunResults, c: &CellRecord) -> bool {
    cells::section(r, c).is_some_and(|s| s.is_workload())
}
