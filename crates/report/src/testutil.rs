//! Builders shared by the report's unit tests.

use smtlab_model::{CellResult, ResolvedPlacement, SampleRecord};

/// A placement on CPUs 0 and 1 with the given name, cores and threads per core.
pub fn placement(name: &str, spec: &str, cores: u32, threads_per_core: u32) -> ResolvedPlacement {
    ResolvedPlacement {
        name: name.into(),
        spec: spec.into(),
        cpus: vec![0, 1],
        cores,
        threads_per_core,
        packages: 1,
        core_order: Default::default(),
        cpu_order: Default::default(),
        core_kinds: Vec::new(),
    }
}

/// A converged result of `samples` whose summary is that of `values`.
pub fn result(samples: Vec<SampleRecord>, values: &[f64]) -> CellResult {
    smtlab_fixtures::build::converged_result(samples, values)
}
