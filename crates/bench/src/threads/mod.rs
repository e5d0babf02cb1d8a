//! threads benchmarks.

use crate::Benchmark;

/// The threads benchmarks of the catalog.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    Vec::new()
}
