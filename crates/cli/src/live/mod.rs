//! What the measuring commands show and save while their cells are measured (the
//! session's observers: tables, lines, the progress bar, per-cell saving) and the
//! summaries they print once the cells are in.

pub mod bench;
pub mod exec;
pub mod progress;
pub mod run;

/// A cell's counters line as it is measured. Its CPI stack charges the assumed
/// latencies, each part saying so: the run's own `mem-latency` cells, which `report`
/// reads them from, are not all in yet.
pub(crate) fn counters_line(c: &smtlab_model::counters::CellCounters) -> String {
    smtlab_report::counters::line(c, &smtlab_model::counters::cpi_stack::Latencies::assumed())
}
