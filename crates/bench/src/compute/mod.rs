//! Compute throughput (paper 002 s3-4): `int-ops` and `fp-ops`; and `frontend`, the
//! instruction supply ([`frontend`]).
//!
//! Every worker thread runs the paper's kernel ([`kernel`]): passes over a private
//! 128-element input, 8 dependent operations per element (2 add, 2 sub, 4 mul), wrapping
//! `u64` for `int-ops` and `f64` for `fp-ops`. One iteration is one pass, so the runner
//! calibrates passes; a sample's work is `8 * 128 * passes * threads` operations, counted
//! honestly (the result is checked after every sample against a closed form, see
//! [`kernel`]), and its value is GOPS: 10^9 operations per second from the first thread's
//! start to the last thread's finish (paper 002's GIAOPS and GFLOPS).
//!
//! Because each thread is one dependent chain, a thread alone leaves most of its core's
//! execution ports idle; what an SMT sibling adds is the point of the experiment.
//!
//! Parameters: `threads` (`auto` = the placement's width; the harness runs the counts of
//! [`crate::workers::thread_counts`] as separate cells), `seed` (inputs). When the CPU frequency is known
//! (see [`freq`]), every sample also carries `ops_per_cycle` (operations per cycle per
//! CPU used) and the `freq_mhz` it was computed with; otherwise neither is reported.

pub mod freq;
pub mod frontend;
pub mod kernel;

use std::path::Path;

use smtlab_model::{BenchInfo, Direction, ParamInfo, ValueKind};

use crate::workers::{WorkerPool, WorkerState, WrongResult, threads_param};
use crate::{BenchContext, BenchError, Benchmark, Instance, sampled};

use kernel::{FpInput, IntInput, OPS_PER_PASS};

/// The compute benchmarks of the catalog.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    vec![
        Box::new(Compute::Int),
        Box::new(Compute::Fp),
        Box::new(frontend::Frontend),
    ]
}

smtlab_model::named_enum! {
    /// `int-ops` or `fp-ops`.
    pub enum Compute {
        Int = "int-ops",
        Fp = "fp-ops",
    }
}

fn params() -> Vec<ParamInfo> {
    vec![
        crate::params::declare(
            "threads",
            "auto",
            None,
            "worker threads; auto = one per CPU of the placement (thread i runs on \
                   the placement's CPU i mod width)",
        ),
        crate::params::declare(
            "seed",
            "1",
            None,
            "seed of the per-thread inputs (they are derived at run time so the \
                   compiler cannot precompute the chain)",
        ),
    ]
}

impl Benchmark for Compute {
    fn info(&self) -> BenchInfo {
        let (what, ty) = match self {
            Compute::Int => ("Integer", "wrapping u64"),
            Compute::Fp => ("Floating-point", "f64"),
        };
        BenchInfo {
            name: self.name().into(),
            group: "compute".into(),
            unit: "GOPS".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1e9 },
            description: format!(
                "{what} arithmetic throughput: each thread loops over a private 128-element \
                 input doing 8 dependent {ty} operations per element (2 add, 2 sub, 4 mul); \
                 10^9 operations per second, first start to last finish"
            ),
            origin: "paper 002 s3-4".into(),
            params: params(),
            main_param: None,
            report: Default::default(),
        }
    }

    /// `full`: thread counts 1, 2, 3, 4, 6, 8, ... on `all` (paper 002 Figs 1-6).
    fn sweep(&self, suite: crate::Suite, topo: &smtlab_model::Topology) -> Vec<crate::SweepCell> {
        crate::workers::thread_sweep(suite, topo)
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let name = self.name();
        let threads = threads_param(name, ctx)?;
        let seed = ctx.params.get_u64("seed")?;
        let mut pool = match self {
            Compute::Int => WorkerPool::start(name, ctx.placement, Some(threads), move |i| {
                Ok(IntWorker {
                    input: IntInput::new(seed, i),
                    result: 0,
                })
            })?,
            Compute::Fp => WorkerPool::start(name, ctx.placement, Some(threads), move |i| {
                Ok(FpWorker {
                    input: FpInput::new(seed, i),
                    result: 0.0,
                })
            })?,
        };
        // In a guest, /proc/cpuinfo's `cpu MHz` is the host's nominal TSC rate, not the
        // clock this vCPU runs at, so ops per cycle from it would be a number nobody measured.
        let virtualised = ctx.topology.virtualization.is_some();
        Ok(sampled(move |iterations| {
            let mut s = pool.run(iterations)?;
            // Read right after the run, while the CPUs are still at their loaded frequency.
            let mut cpus = s.cpus.clone();
            cpus.sort_unstable();
            cpus.dedup();
            let known = freq::mean_freq_hz(Path::new("/"), &cpus)
                .filter(|(_, source)| !(virtualised && *source == freq::FreqSource::CpuInfo))
                .filter(|_| s.elapsed_ns > 0 && !cpus.is_empty());
            if let Some((hz, _)) = known {
                let cycles = s.elapsed_ns as f64 * 1e-9 * hz * cpus.len() as f64;
                s.metrics.insert("ops_per_cycle".into(), s.work / cycles);
                s.metrics.insert("freq_mhz".into(), hz / 1e6);
            }
            Ok(s)
        }))
    }
}

struct IntWorker {
    input: IntInput,
    result: u64,
}

impl WorkerState for IntWorker {
    fn run(&mut self, passes: u64) -> f64 {
        self.result = kernel::run_int(&self.input, passes);
        (OPS_PER_PASS * passes) as f64
    }

    fn check(&mut self, passes: u64) -> Result<(), WrongResult> {
        let want = self.input.expected(passes);
        if self.result == want {
            Ok(())
        } else {
            Err(format!(
                "integer chain after {passes} passes gave {:#x}, the closed form says {want:#x}",
                self.result
            )
            .into())
        }
    }
}

struct FpWorker {
    input: FpInput,
    result: f64,
}

impl WorkerState for FpWorker {
    fn run(&mut self, passes: u64) -> f64 {
        self.result = kernel::run_fp(&self.input, passes);
        (OPS_PER_PASS * passes) as f64
    }

    fn check(&mut self, passes: u64) -> Result<(), WrongResult> {
        match self.input.expected(passes) {
            Some(want) if want == self.result => Ok(()),
            Some(want) => Err(format!(
                "floating-point chain after {passes} passes gave {}, the closed form says {want}",
                self.result
            )
            .into()),
            None => Err(format!(
                "{passes} passes in one sample is more than the exact check allows ({})",
                self.input.max_passes()
            )
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;
    use crate::workers::tests::{context, placement, test_cpus, topology};

    fn prepare(b: Compute, cpus: &[u32], given: &[(&str, &str)]) -> Box<dyn Instance> {
        let info = b.info();
        let given: Vec<String> = given.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let params = Params::resolve(&info, &given, false).unwrap();
        let p = placement(cpus);
        let t = topology(None);
        b.prepare(&context(&params, &p, &t)).unwrap()
    }

    #[test]
    fn both_kernels_run_on_one_and_two_cpus() {
        let all = test_cpus();
        for b in [Compute::Int, Compute::Fp] {
            for n in 1..=all.len() {
                let cpus = &all[..n];
                let mut inst = prepare(b, cpus, &[]);
                for passes in [1, 20] {
                    let s = inst.sample(passes).unwrap();
                    assert_eq!(s.cpus, cpus, "{}", b.name());
                    assert_eq!(s.work, (OPS_PER_PASS * passes) as f64 * n as f64);
                    assert!(s.elapsed_ns > 0);
                    assert!(s.start_spread_ns.is_some() && s.cpu_ns.is_some());
                    if let Some(opc) = s.metrics.get("ops_per_cycle") {
                        assert!(opc.is_finite() && *opc > 0.0);
                        assert!(s.metrics["freq_mhz"] > 0.0);
                    }
                }
            }
        }
    }

    #[test]
    fn thread_parameter_overrides_the_width() {
        let mut inst = prepare(Compute::Int, &[0], &[("threads", "2"), ("seed", "7")]);
        let s = inst.sample(3).unwrap();
        assert_eq!(s.cpus, vec![0, 0]);
        assert_eq!(s.work, (OPS_PER_PASS * 3 * 2) as f64);
    }

    #[test]
    fn bad_parameters_are_errors_naming_the_parameter() {
        let info = Compute::Fp.info();
        let p = placement(&[0]);
        let t = topology(None);
        for (k, v) in [("threads", "0"), ("threads", "many"), ("seed", "-1")] {
            let params = Params::resolve(&info, &[format!("{k}={v}")], false).unwrap();
            let e = Compute::Fp
                .prepare(&context(&params, &p, &t))
                .err()
                .unwrap_or_else(|| panic!("{k}={v} accepted"));
            assert!(e.to_string().contains(k), "{e}");
        }
    }

    /// The measured time per dependent operation must be physically possible. A chain
    /// the compiler folded would run at tens of operations per nanosecond; real
    /// dependent adds and multiplies take at least a cycle each (< 6 per ns at 6 GHz).
    /// The bound is loose on purpose (10 per ns), so the test never flakes on a loaded
    /// machine, where time only grows. It has teeth in optimised builds
    /// (`cargo test --release`), the only ones where folding could happen.
    #[test]
    fn dependent_operations_take_physical_time() {
        for b in [Compute::Int, Compute::Fp] {
            let mut inst = prepare(b, &[0], &[]);
            let passes = if cfg!(debug_assertions) { 200 } else { 20_000 };
            let best = (0..3)
                .map(|_| {
                    let s = inst.sample(passes).unwrap();
                    s.work / s.elapsed_ns as f64
                })
                .fold(0.0, f64::max);
            assert!(best > 0.0 && best < 10.0, "{}: {best} ops/ns", b.name());
        }
    }

    #[test]
    fn info_is_complete() {
        for b in [Compute::Int, Compute::Fp] {
            let i = b.info();
            assert_eq!(i.group, "compute");
            assert_eq!(i.unit.to_string(), "GOPS");
            assert_eq!(i.value_kind, ValueKind::Rate { scale: 1e9 });
            assert!(i.origin.contains("002"));
            assert!(i.params.iter().any(|p| p.name == "threads"));
        }
    }
}
