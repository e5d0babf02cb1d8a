//! `smtlab agent --listen ADDR --token FILE`: the client side of server workloads
//! measured on another host ([`smtlab_loadgen::remote`]); a line per coordinator and
//! per load on standard output, until SIGINT or SIGTERM.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use smtlab_loadgen::remote::{
    AgentConfig, AgentLimits, AllowList, Channel, raise_open_file_limit, serve,
};

use crate::args::AgentArgs;

pub fn run(a: &AgentArgs) -> Result<()> {
    let allow = AllowList::parse(&a.allow).map_err(|e| anyhow!("--allow {e}"))?;
    let cpus = match &a.cpus {
        Some(set) => set.clone(),
        None => smtlab_placement::pin::get_affinity(0)
            .map_err(|e| anyhow!("cannot read this process's CPUs: {e}"))?,
    };
    if a.max_connections == 0 {
        anyhow::bail!("--max-connections 0: expected at least 1");
    }
    // The loads' connections need descriptors: as many as the hard limit allows. A load
    // that still does not fit is refused at prepare, in one line to its coordinator.
    let open_files =
        raise_open_file_limit().context("cannot raise the open-file limit (RLIMIT_NOFILE)")?;
    let listener = TcpListener::bind(a.listen).with_context(|| format!("--listen {}", a.listen))?;
    let cfg = AgentConfig {
        token: a.token.clone(),
        allow,
        cpus: cpus.to_vec(),
        limits: AgentLimits {
            max_duration: Duration::from_secs(a.max_seconds),
            max_connections: a.max_connections,
            ..AgentLimits::default()
        },
        channel: Channel::tls_if(a.tls),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .context("cannot install the signal handlers")?;
    }
    // A line that cannot be written is lost; the agent serves on.
    let say = |line: &str| drop(crate::output::emit(&format!("{line}\n")));
    say(&format!(
        "smtlab agent: listening on {}; load threads on CPUs {}; load allowed to {}; loads of at most {} s \
         and {} connections; open-file limit {open_files}; {}",
        listener.local_addr().unwrap_or(a.listen),
        cpus.to_list_string(),
        cfg.allow,
        a.max_seconds,
        a.max_connections,
        match cfg.channel {
            Channel::Tls => "TLS only (its key derived from the token)",
            Channel::Plain => "no TLS (--tls to require it)",
        }
    ));
    serve(
        listener,
        cfg,
        &stop,
        Arc::new(move |event| say(&format!("smtlab agent: {event}"))),
    )
    .context("starting the agent")
}
