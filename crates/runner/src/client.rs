//! The client side of a cell: CPUs apart from the placement and a spawner started
//! before counting, for benchmarks that drive a server ([`Benchmark::client_side`]).

use smtlab_bench::Benchmark;
use smtlab_bench::client::ClientSide;
use smtlab_model::{ResolvedPlacement, Topology};
use smtlab_placement::{ClientRule, client_cpus};

/// The client side for `bench` on `placement`: `Ok(None)` when the benchmark has none,
/// `Err` with a one-line reason when no CPUs can be found for it (the cell is skipped).
/// Call before counters are opened, and keep it until the instance is dropped.
pub fn client_for(
    bench: &dyn Benchmark,
    topo: &Topology,
    placement: &ResolvedPlacement,
    rule: &ClientRule,
) -> Result<Option<ClientSide>, NoClientCpus> {
    if !bench.client_side() {
        return Ok(None);
    }
    if let ClientRule::Remote(remote) = rule {
        if !bench.remote_clients() {
            return Err(NoClientCpus(format!(
                "--client-hosts: {} runs its client side on this host only (remote agents drive the web workloads)",
                bench.info().name
            )));
        }
        return Ok(Some(ClientSide::remote(remote.clone())));
    }
    let cpus = client_cpus(topo, placement, rule).map_err(|e| NoClientCpus(e.to_string()))?;
    ClientSide::start(cpus)
        .map(Some)
        .map_err(|e| NoClientCpus(format!("cannot start the client side: {e}")))
}

/// Why a benchmark's client side cannot be placed or started; the cell is skipped with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct NoClientCpus(pub String);
