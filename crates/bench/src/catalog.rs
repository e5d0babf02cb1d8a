//! The whole catalog, in the order `smtlab list` shows it.

use crate::{Benchmark, compute, memory, os, threads};

/// Every benchmark smtlab knows.
pub fn all() -> Vec<Box<dyn Benchmark>> {
    let mut v = compute::benchmarks();
    v.extend(memory::benchmarks());
    v.extend(threads::benchmarks());
    v.extend(os::benchmarks());
    v.extend(crate::taskpool::benchmarks());
    v.extend(crate::aim::benchmarks());
    v.extend(crate::idle::benchmarks());
    v
}

/// The benchmark called `name`. (Names are unique across the micro-benchmarks and the
/// workloads: `smtlab_runner::catalog` checks them together.)
pub fn find(name: &str) -> Option<Box<dyn Benchmark>> {
    all().into_iter().find(|b| b.info().name == name)
}
