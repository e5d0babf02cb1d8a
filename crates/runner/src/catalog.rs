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

/// The catalog entry of every benchmark a stored run can hold: the catalog's, the user
/// command of `smtlab exec` and the open-loop load of `smtlab util`. Readers of stored
/// runs add them to the results (`RunResults::describe`) so the report finds each
/// benchmark's section and main parameter by data.
pub fn infos() -> Vec<smtlab_model::BenchInfo> {
    let mut v: Vec<smtlab_model::BenchInfo> = all().iter().map(|b| b.info()).collect();
    let command = crate::exec::CommandBench {
        argv: Vec::new(),
        value: crate::exec::ExecValue::WallTime,
        timeout: None,
        warmup_runs: 0,
        reps: 0,
    };
    v.push(command.info());
    v.push(crate::utilisation::OpenLoop::info());
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
    fn no_benchmark_declares_a_parameter_named_like_a_condition() {
        // Conditions are stored flat beside the parameters (`smtlab_model::keys`).
        for info in super::infos() {
            for p in &info.params {
                assert!(
                    !smtlab_model::keys::RESERVED_PARAMS.contains(&p.name.as_str()),
                    "{}: parameter {}",
                    info.name,
                    p.name
                );
            }
        }
    }

    #[test]
    fn every_main_parameter_is_a_declared_parameter() {
        for info in super::infos() {
            if let Some(m) = &info.main_param {
                assert!(
                    info.params.iter().any(|p| &p.name == m),
                    "{}: {m}",
                    info.name
                );
            }
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names = super::names();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
