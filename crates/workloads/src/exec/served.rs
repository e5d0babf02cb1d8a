//! The user's own server driven by the user's own client (`smtlab advise --server CMD
//! --client CMD`: a database and its load tool, a cache and its benchmark).
//!
//! The server command is started by `sh` on the placement's CPUs once per cell, in a
//! scratch directory of its own, with `{port}` filled in (a free port, or the one
//! given), and is ready when that port accepts a TCP connection; it is stopped with its
//! whole process tree when the cell ends. Each sample is one run of the client command,
//! `{port}` filled in, measured as `smtlab exec` measures a command
//! ([`super::CommandBench`]) but pinned to the client side's CPUs, apart from the
//! placement: its wall time (lower is better: give it a fixed amount of work, as
//! `pgbench -t 2000` rather than `-T 10`), or with a throughput regex the number its
//! output's first match captures (`tps = ([0-9.]+)` for pgbench, higher is better).
//! The thread that watches the client runs on the client's CPUs too, so nothing of the
//! measuring side lands on the server's.

use std::collections::BTreeMap;

use smtlab_bench::{BenchContext, BenchError, Benchmark, Holding, Instance};
use smtlab_model::BenchInfo;

use super::CommandBench;
use crate::web::real::RealServer;

/// The user's server (on the placement) and client (on the client side's CPUs).
#[derive(Debug, Clone)]
pub struct ServedCommand {
    /// The server's shell command; `{port}` is filled in.
    pub server: String,
    /// The port it listens on (0: a free one, put in `{port}`).
    pub port: u16,
    /// The client command, `{port}` filled in at each cell, and what is measured of it.
    pub client: CommandBench,
}

impl ServedCommand {
    /// The parameters a cell is stored with: the client's (`command`, `throughput`),
    /// the server's command and its fixed port.
    pub fn params(&self) -> BTreeMap<String, String> {
        let mut p = self.client.params();
        p.insert("server".into(), self.server.clone());
        if self.port != 0 {
            p.insert("port".into(), self.port.to_string());
        }
        p
    }
}

impl Benchmark for ServedCommand {
    fn info(&self) -> BenchInfo {
        let mut info = self.client.info();
        info.description = format!(
            "your server `{}` driven by your client `{}`",
            self.server,
            super::shell_join(&self.client.argv)
        );
        info
    }

    fn client_side(&self) -> bool {
        true
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let unsupported = |reason: String| BenchError::unsupported("exec", reason);
        let client_cpus = ctx.client_side("exec")?.cpus().clone();
        let spec = smtlab_placement::parse(&format!("cpus={}", client_cpus.to_list_string()))
            .map_err(|e| unsupported(e.to_string()))?;
        let mut on = smtlab_placement::resolve(&spec, ctx.topology)
            .map_err(|e| unsupported(format!("client CPUs: {e}")))?;
        // The client's errors name where it ran: the client side, not a placement.
        on.name = format!("client {}", on.name);
        let server = RealServer::custom_tcp(&self.server, self.port, &ctx.placement.cpus)
            .map_err(|e| unsupported(e.to_string()))?;
        let port = server.addr().port().to_string();
        let mut client = self.client.clone();
        for a in &mut client.argv {
            *a = a.replace("{port}", &port);
        }
        let inner = client.prepare(&BenchContext {
            params: ctx.params,
            placement: &on,
            topology: ctx.topology,
            client: None,
        })?;
        // The command's watcher moved off the client's CPUs, maybe onto the server's:
        // back with the client.
        let _ = smtlab_placement::pin::pin_current_thread(&client_cpus);
        // The client's instance goes before the server is stopped.
        Ok(Box::new(Holding {
            instance: inner,
            held: server,
        }))
    }
}
