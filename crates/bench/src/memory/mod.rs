//! memory benchmarks.

use crate::Benchmark;

/// The memory benchmarks of the catalog.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    Vec::new()
}
