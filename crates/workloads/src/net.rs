//! Network workloads: the chat-room benchmark (paper 001 Tables 3-4), tbench (paper 001
//! Table 6) and netperf-style TCP and UDP tests (paper 004).
//!
//! Every one is a server on the placement's CPUs, started in `prepare` (so counters that
//! follow the measuring thread count it), driven over loopback by a client on the
//! [`ClientSide`](smtlab_bench::client::ClientSide) CPUs. A sample is a fixed stretch of
//! load (`fixed_iterations() == Some(1)`): one chat round, a `duration` of tbench or
//! netperf traffic. `RawSample::work` counts messages, operations, transactions or
//! bytes, so the runner's per-unit counters come out per message or per transaction.
//!
//! | benchmark | module | unit |
//! |---|---|---|
//! | `chat` | [`chat`] | messages delivered per second |
//! | `tbench` | [`tbench`] | MB/s of the load file's reads and writes |
//! | `tcp-stream` | [`perf`] | Gbit/s |
//! | `tcp-rr`, `tcp-crr`, `udp-rr` | [`perf`] | transactions per second |

use smtlab_bench::Benchmark;

pub mod chat;
mod common;
pub mod perf;
pub mod tbench;

pub(crate) use common::spawn_on;

/// This group's workloads.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    let mut v: Vec<Box<dyn Benchmark>> = vec![Box::new(chat::Chat)];
    v.push(Box::new(tbench::Tbench));
    v.extend(perf::benchmarks());
    v
}

#[cfg(test)]
pub(crate) mod tests_support {
    use smtlab_bench::client::ClientSide;
    use smtlab_bench::{BenchContext, Benchmark, Params, RawSample};
    use smtlab_model::{ResolvedPlacement, Topology};
    use smtlab_placement::pin::get_affinity;

    /// Prepares `bench` with its quick parameters (and `extra`) the way `smtlab bench
    /// NAME -p 1c1t --quick` does on this machine: the placement on the first CPU this
    /// process may use, the client side on the last, and takes `samples` samples.
    pub fn run_quick(bench: &dyn Benchmark, extra: &[&str], samples: usize) -> Vec<RawSample> {
        let all = get_affinity(0).unwrap();
        let (first, last) = (all.first().unwrap(), all.last().unwrap());
        let placement = ResolvedPlacement {
            name: "1c1t".into(),
            spec: "1c1t".into(),
            cpus: vec![first],
            cores: 1,
            threads_per_core: 1,
            packages: 1,
            core_order: Default::default(),
            cpu_order: Default::default(),
            core_kinds: vec![],
        };
        let client = bench
            .client_side()
            .then(|| ClientSide::start(std::iter::once(last).collect()).unwrap());
        let given: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let params = Params::resolve(&bench.info(), &given, true).unwrap();
        let topo = topology();
        let ctx = BenchContext {
            params: &params,
            placement: &placement,
            topology: &topo,
            client: client.as_ref(),
        };
        let mut inst = bench.prepare(&ctx).unwrap();
        let n = inst.fixed_iterations().unwrap_or(1);
        (0..samples).map(|_| inst.sample(n).unwrap()).collect()
    }

    /// A 4-CPU machine without SMT, enough for sweeps that ignore the topology.
    pub fn topology() -> Topology {
        smtlab_fixtures::build::cpus_only(0..4)
    }
}
