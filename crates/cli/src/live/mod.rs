//! What the measuring commands show and save while their cells are measured (the
//! session's observers: tables, lines, the progress bar, per-cell saving) and the
//! summaries they print once the cells are in.

pub mod bench;
pub mod exec;
pub mod progress;
pub mod run;

use smtlab_model::CellRecord;

use crate::term::fit;

/// The lines under a cell's row as it is measured: its counters, instruction mix and
/// load points, each indented and fitted to the terminal.
pub(crate) fn cell_notes(cell: &smtlab_model::CellRecord) -> Vec<String> {
    let counters = cell.counters.as_ref().map(counters_row);
    let rest = [
        smtlab_report::mix::line(cell),
        smtlab_report::load_points::lines(cell),
    ];
    let rest = rest.into_iter().flatten().map(|l| fit(&format!("  {l}")));
    counters.into_iter().chain(rest).collect()
}

/// What the counters of a cell could not count, under the bar on standard error.
pub(crate) fn counters_note(bar: &indicatif::ProgressBar, cell: &CellRecord, note: Option<&str>) {
    if let Some(note) = note {
        let (bench, placement) = (&cell.benchmark, &cell.placement.name);
        crate::term::note_with(bar, &format!("note: {bench} on {placement}: {note}"));
    }
}

/// A cell's counters line as it is measured, fitted to the terminal. Its CPI stack
/// charges the assumed latencies, each part saying so: the run's own `mem-latency`
/// cells, which `report` reads them from, are not all in yet.
pub(crate) fn counters_row(c: &smtlab_model::counters::CellCounters) -> String {
    let assumed = smtlab_model::counters::cpi_stack::Latencies::assumed();
    fit(&format!(
        "  counters: {}",
        smtlab_report::counters::line(c, &assumed)
    ))
}
