//! `--counters` wiring shared by `bench`, `run` and `exec`: which CPUs the `/proc/stat`
//! sampler watches and where it runs, what is said once, and turning a failed count
//! into a note instead of a failed cell. The counting itself is
//! `smtlab_runner::counting` (it explains why the process is followed with `inherit`).

use smtlab_model::counters::CellCounters;
use smtlab_model::{CpuSet, ResolvedPlacement, Topology};
use smtlab_runner::counting::{CellCounting, CountingSetup};

/// The CPUs whose `/proc/stat` time a cell reports: the placement's, or every online
/// CPU for `os` (the scheduler may use any of them).
pub fn sampled_cpus(placement: &ResolvedPlacement, topo: &Topology) -> CpuSet {
    if placement.pinned() {
        placement.cpu_set()
    } else {
        topo.cpus.clone()
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

/// Opens counting for one cell of `placement`, before the benchmark is prepared.
pub fn begin(
    setup: &CountingSetup,
    placement: &ResolvedPlacement,
    topo: &Topology,
) -> CellCounting {
    CellCounting::begin(
        setup,
        &sampled_cpus(placement, topo),
        spare_cpu(placement, topo),
    )
}

/// Takes one more sample of `instance` with syscall tracing on, after the counted
/// window, where tracing is available (tracing inside the window would slow the
/// measured samples down).
pub fn trace_extra_sample(
    counting: &mut CellCounting,
    instance: &mut dyn smtlab_bench::Instance,
    iterations: u64,
) {
    if !counting.can_trace() {
        return;
    }
    let window = format!("one extra sample of {iterations} iterations after the measured ones");
    counting.trace(&window, || {
        instance
            .sample(iterations)
            .map(drop)
            .map_err(|e| e.to_string())
    });
}

/// The notes said once per command: what cannot be measured here, one line each.
pub fn notes(setup: &CountingSetup) -> Vec<String> {
    setup.missing_lines()
}

/// The cell's counters, or `None` and a one-line note saying why they are missing.
pub fn finish(counting: CellCounting, window: &str) -> (Option<CellCounters>, Option<String>) {
    match counting.finish(window) {
        Ok(c) => (Some(c), None),
        Err(reason) => (None, Some(format!("counters not recorded: {reason}"))),
    }
}
