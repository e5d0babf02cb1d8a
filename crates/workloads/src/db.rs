//! OLTP workloads (paper 004 s4, "OLTP"): a database on the placement under a
//! transaction load.
//!
//! * `oltp-pg` ([`oltp_pg`]): a private PostgreSQL server ([`pg`]) started for the cell
//!   on the placement's CPUs, loaded with `pgbench -i -s SCALE` and driven by `pgbench`
//!   on the client CPUs. One sample is one pgbench run of `duration` seconds; the value
//!   is **pgbench's own TPS** (without connection time), and the cell's confidence
//!   interval is over those runs. pgbench logs every transaction (`--log`), from which
//!   the p50/p90/p99/p99.9 latencies come; its average and standard deviation are taken
//!   as printed. The server's settings are metrics of every sample. The server is
//!   started in `prepare`, so counters that follow smtlab's measuring thread count it;
//!   pgbench is started from the client side and is not counted: per-transaction
//!   counter figures are the server's.
//! * `oltp-sqlite` ([`sqlite`]): the same TPC-B-like mix (and select-only) on an
//!   embedded SQLite database in WAL mode, one connection per worker thread on the
//!   placement's CPUs: for machines without a database server.

use std::io;
use std::process::{Command, Output, Stdio};

use smtlab_bench::Benchmark;
use smtlab_bench::client::ClientSide;
use smtlab_bench::process::tie_to_parent;
use smtlab_model::CpuSet;
use smtlab_placement::pin::CommandPinExt;

pub mod oltp_pg;
pub mod pg;
pub mod pgbench;
pub mod sqlite;

/// This group's workloads.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    vec![Box::new(oltp_pg::OltpPg), Box::new(sqlite::OltpSqlite)]
}

pub(crate) use smtlab_bench::params::declare as param;

/// A database workload's description: transactions per second, higher is better.
pub(crate) fn tps_info(
    name: &str,
    main_param: &str,
    description: &str,
    origin: &str,
    params: Vec<smtlab_model::ParamInfo>,
) -> smtlab_model::BenchInfo {
    smtlab_model::BenchInfo {
        name: name.into(),
        group: "db".into(),
        unit: "tps".into(),
        direction: smtlab_model::Direction::Higher,
        value_kind: smtlab_model::ValueKind::Rate { scale: 1.0 },
        description: description.into(),
        origin: origin.into(),
        params,
        main_param: Some(main_param.into()),
        report: smtlab_model::ReportSection::Oltp,
    }
}

/// A thread of the client side that runs client programs one after another, pinned to
/// the client CPUs and tied to it, for as long as the instance lives. It is started
/// from the [`ClientSide`]'s spawner, so its children are not counted as the server's.
pub(crate) struct ClientRunner {
    cpus: CpuSet,
    thread: smtlab_placement::workers::Workers<smtlab_placement::workers::Job>,
}

impl ClientRunner {
    pub(crate) fn start(client: &ClientSide, name: &str) -> io::Result<ClientRunner> {
        let mut thread = smtlab_placement::workers::Workers::default();
        thread.add_runner(|body| client.spawn(name, None, body), || true)?;
        Ok(ClientRunner {
            cpus: client.cpus().clone(),
            thread,
        })
    }

    /// Runs `cmd` to its end on the client CPUs.
    pub(crate) fn output(&self, mut cmd: Command) -> io::Result<Output> {
        let cpus = self.cpus.clone();
        let out = self.thread.run_on(0, move || {
            cmd.pin_to(&cpus).map_err(io::Error::from)?;
            tie_to_parent(&mut cmd);
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?
                .wait_with_output()
        });
        out.recv()
            .map_err(|_| io::Error::other("client thread has stopped"))?
    }
}

/// Test helpers: a context on this machine's CPUs.
#[cfg(test)]
pub(crate) mod testutil {
    use smtlab_bench::client::ClientSide;
    use smtlab_bench::{BenchContext, BenchError, Benchmark, CellCost, Instance, Params};
    use smtlab_model::{ResolvedPlacement, Topology};
    use smtlab_placement::pin::get_affinity;

    /// Prepares `bench` with its quick parameters and the `key=value` pairs `given`, on
    /// `placement` of this machine, with `client` as its client side.
    pub(crate) fn prepare(
        bench: &dyn Benchmark,
        given: &[(&str, &str)],
        placement: &ResolvedPlacement,
        client: Option<&ClientSide>,
    ) -> Result<Box<dyn Instance>, BenchError> {
        let params = params(bench, given, true)?;
        let topo = topology();
        bench.prepare(&BenchContext {
            params: &params,
            placement,
            topology: &topo,
            client,
        })
    }

    /// What the plan reckons a cell of `bench` costs, with its default parameters and
    /// the `key=value` pairs `given`, on `placement`.
    pub(crate) fn cost(
        bench: &dyn Benchmark,
        given: &[(&str, &str)],
        placement: &ResolvedPlacement,
    ) -> Result<CellCost, BenchError> {
        let params = params(bench, given, false)?;
        let topo = topology();
        bench.cost(&BenchContext {
            params: &params,
            placement,
            topology: &topo,
            client: None,
        })
    }

    /// `bench`'s parameters with `given` over its quick or default values.
    fn params(
        bench: &dyn Benchmark,
        given: &[(&str, &str)],
        quick: bool,
    ) -> Result<Params, BenchError> {
        let given: Vec<String> = given.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Ok(Params::resolve(&bench.info(), &given, quick)?)
    }

    /// A placement on the first CPU we may use, as `1c1t` would be.
    pub(crate) fn placement_first_cpu() -> ResolvedPlacement {
        let cpu = get_affinity(0).unwrap().first().unwrap();
        placement(&[cpu])
    }

    pub(crate) fn placement(cpus: &[u32]) -> ResolvedPlacement {
        smtlab_fixtures::build::placement_on(cpus)
    }

    pub(crate) fn topology() -> Topology {
        smtlab_topology::discover(std::path::Path::new("/")).unwrap()
    }

    /// A client side on the last CPU we may use (the same CPU on a one-CPU machine).
    pub(crate) fn client() -> ClientSide {
        let cpu = get_affinity(0).unwrap().last().unwrap();
        ClientSide::start(std::iter::once(cpu).collect()).unwrap()
    }
}
