//! Builders shared by the report's unit tests.

use std::collections::BTreeMap;

use smtlab_model::result::{Calibration, StopReason, Warmup};
use smtlab_model::{CellResult, ResolvedPlacement, RunConfig, SampleRecord, stats};

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
    CellResult {
        iterations: 1,
        calibration: Calibration {
            iterations: 1,
            fixed: true,
            tried: vec![],
            linear: None,
            linearity_ratio: None,
        },
        warmup: Warmup {
            samples: 0,
            elapsed_ns: 0,
        },
        clock_cost_ns: 0.0,
        loop_cost_ns_per_iter: 0.0,
        subtracted_ns_per_sample: 0.0,
        samples,
        summary: stats::summarize(values).unwrap(),
        converged: true,
        stop_reason: StopReason::Converged,
        cpu_rate: None,
        series: BTreeMap::new(),
        start_spread_ns: None,
        wall_ns: 1,
        config: RunConfig::default(),
        rounds: Vec::new(),
    }
}
