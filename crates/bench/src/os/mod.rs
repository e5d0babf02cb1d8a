//! os benchmarks.

use crate::Benchmark;

/// The os benchmarks of the catalog.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    Vec::new()
}
