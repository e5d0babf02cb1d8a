//! The whole catalog: the micro-benchmarks of `smtlab-bench` and the workloads of
//! `smtlab-workloads`, in the order `smtlab list` shows them. Assembled here, above both,
//! so neither needs to know the other.

use smtlab_bench::Benchmark;

/// Every benchmark and workload smtlab knows.
pub fn all() -> Vec<Box<dyn Benchmark>> {
    let mut v = smtlab_bench::catalog::all();
    v.extend(smtlab_workloads::benchmarks());
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
