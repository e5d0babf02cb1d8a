//! Workloads of this group (see the crate overview).

use smtlab_bench::Benchmark;

/// This group's workloads.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    Vec::new()
}
