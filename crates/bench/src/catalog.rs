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

/// The benchmark called `name`.
pub fn find(name: &str) -> Option<Box<dyn Benchmark>> {
    all().into_iter().find(|b| b.info().name == name)
}

/// Names of all benchmarks, for error messages.
pub fn names() -> Vec<String> {
    all().into_iter().map(|b| b.info().name).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_unique() {
        let mut names = super::names();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
