//! compute benchmarks.

use crate::Benchmark;

/// The compute benchmarks of the catalog.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    Vec::new()
}
