//! Measuring several cells sample by sample in turn (`smtlab bench --interleave`).
//!
//! The ratio of two cells measured one after the other carries whatever the machine did
//! in between: on a shared host whose speed moves over a second or two, a "yield" of
//! 0.87 between two identical placements is easy to get. Interleaving calibrates and
//! warms up every cell first, then takes one sample of each in turn, so slow changes of
//! the machine fall on all cells alike and cancel in their ratio. A cell that converges
//! early keeps sampling while any other still does, so all span the same time; each
//! keeps its own limits on samples and time (counting only its own samples' time).
//!
//! Every instance stays prepared for the whole measurement, so their memory and idle
//! threads coexist; each sample starts after another cell's, with the caches that cell
//! left, which is harmless for samples of milliseconds but worth knowing for tiny
//! cache-resident working sets.

use smtlab_bench::Instance;
use smtlab_model::BenchInfo;

use crate::clock::Clock;
use crate::config::RunConfig;
use crate::error::RunError;
use crate::measure::Measurement;
use crate::observer::Observer;
use crate::result::CellResult;

/// One cell to interleave with others.
pub struct Turn<'a> {
    pub instance: &'a mut dyn Instance,
    pub info: &'a BenchInfo,
    pub observer: &'a mut dyn Observer,
}

/// Measures `cells` with their samples interleaved: calibration and warm-up of each in
/// order, then one sample of every cell per round until all have converged in the same
/// round, or until each has run out of samples or out of its budget (a cell that
/// converges early keeps sampling while the others go on). A cell that fails stops alone; the result
/// of each cell is in the order given.
pub fn interleave(
    cells: Vec<Turn<'_>>,
    cfg: &RunConfig,
    clock: &dyn Clock,
) -> Vec<Result<CellResult, RunError>> {
    let mut slots: Vec<Result<Measurement<'_>, RunError>> = cells
        .into_iter()
        .map(|c| Measurement::begin(c.instance, c.info, cfg, clock, c.observer))
        .collect();
    while slots.iter().any(|s| s.as_ref().is_ok_and(|m| !m.done())) {
        for slot in &mut slots {
            let Ok(m) = slot else { continue };
            // Cells that converged keep pace with those still going, so every cell's
            // samples span the same stretch of time.
            m.continue_if_converged();
            if let Err(e) = m.step() {
                *slot = Err(e);
            }
        }
    }
    slots
        .into_iter()
        .map(|s| s.and_then(Measurement::finish))
        .collect()
}
