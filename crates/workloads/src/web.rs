//! Web servers under a SPECweb96-like static load (paper 000 s2.4, s3).
//!
//! `web-static`: a generated file set ([`fileset`]) served by one of several servers on
//! the placement's CPUs, driven by [`smtlab_loadgen`] from the client side with N
//! closed-loop connections, one request per connection (HTTP/1.0) by default as
//! SPECweb96 clients do. The value is the response bandwidth in Mbit/s (bodies); each
//! sample also carries requests/s, latency percentiles and the error count.
//!
//! `rate=R` makes the load an open loop at R requests per second instead (latency
//! counted from each request's scheduled time, as wrk2 does): the latency at a given
//! offered load, which `smtlab advise` sweeps on each side of the SMT question. A server
//! that cannot keep up is not an error there: the sample carries the offered rate, the
//! rate achieved, the requests never sent and the errors, and the reader says it was
//! not kept up rather than quote its percentiles.
//!
//! Servers (`server=`): `event`, `threads`, `processes` and `seda` (staged, copying every
//! body through a buffer: no `sendfile`) are built in ([`builtin`]); `nginx` and
//! `apache-prefork` / `apache-event` are the real ones from a generated configuration
//! ([`real`]); a cell whose server is not installed is skipped with the command that
//! installs it.
//!
//! Per-request figures: servers are started in `prepare`, after the runner opened the
//! counters, and the load runs on client threads started from the client side's
//! spawner, so `--counters` counts the server alone; a sample's work is response body
//! bytes, so the counters' per-unit figures are per byte (multiply by the mean
//! response size, `bytes_per_request` in the sample's metrics, for per request).
//!
//! Remote clients (`--client-hosts`): smtlab agents on other hosts send the load
//! (`Driver::Remote`); the server (built-in, nginx or Apache) listens where they reach
//! this host, and each sample stores every agent's share, errors and clock.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_loadgen::remote::{Remote, RemoteReport};
use smtlab_loadgen::{ClientPool, LoadConfig, LoadReport, Mix, Pinning, RequestSpec};
use smtlab_model::metrics::web as m;
use smtlab_model::{BenchInfo, Direction, ValueKind};

pub mod builtin;
pub mod capacity;
pub mod dynamic;
pub mod fileset;
pub mod real;
pub mod request;
pub mod slo;

use builtin::{Docs, EventServer, ServerOpts, ThreadServer};
use fileset::FileSet;

/// This group's workloads.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    vec![
        Box::new(WebStatic),
        Box::new(capacity::WebCapacity),
        Box::new(slo::WebSlo),
    ]
}

/// The servers `server=` accepts.
pub const SERVERS: &[&str] = &[
    "event",
    "threads",
    "processes",
    "seda",
    "nginx",
    "apache-prefork",
    "apache-event",
    "cmd",
];

/// A running server of any kind; dropping it stops it.
pub enum Running {
    Event(EventServer),
    Threads(ThreadServer),
    Processes(builtin::ProcessServer),
    Seda(builtin::SedaServer),
    Real(real::RealServer),
}

impl Running {
    pub fn addr(&self) -> SocketAddr {
        match self {
            Running::Event(s) => s.addr(),
            Running::Threads(s) => s.addr(),
            Running::Processes(s) => s.addr(),
            Running::Seda(s) => s.addr(),
            Running::Real(s) => s.addr(),
        }
    }
}

/// Worker processes of the `processes` server: each holds one connection at a time,
/// as Apache prefork's do, so kept-alive loads need no more connections than this.
pub const PROCESSES: usize = 64;

/// The user's own server for `server=cmd`: its command and port (0: `{port}` in the
/// command); and where the user keeps nginx and Apache (empty: looked for on `PATH`,
/// then in the system's places).
#[derive(Debug, Clone, Default)]
pub struct Custom {
    pub cmd: String,
    pub port: u16,
    pub nginx: String,
    pub apache: String,
}

/// Starts server `kind` for `set` on `cpus`, with the user's command for `server=cmd`,
/// serving `web-capacity`'s dynamic requests too when `dynamic` (in process on the
/// built-in servers, logging posts to `post.log` in the file set; as CGI scripts on
/// Apache).
pub(crate) fn start_serving(
    kind: &str,
    set: &FileSet,
    dynamic: bool,
    cpus: &[u32],
    opts: ServerOpts,
    custom: &Custom,
) -> Result<Running, StartError> {
    let ip = opts.bind_ip;
    let docs = || -> std::io::Result<Docs> {
        let docs = Docs::from_set(set);
        if !dynamic {
            return Ok(docs);
        }
        Ok(docs.with_dynamic(dynamic::Dynamic::new(&set.root().join("post.log"))?))
    };
    let built_in = |kind: &'static str| move |error| StartError::BuiltIn { kind, error };
    match kind {
        "cmd" => Ok(
            real::RealServer::custom(&custom.cmd, custom.port, set.root(), cpus)
                .map(Running::Real)?,
        ),
        "event" => docs()
            .and_then(|d| EventServer::start(d, cpus, opts))
            .map(Running::Event)
            .map_err(built_in("event")),
        "threads" => docs()
            .and_then(|d| ThreadServer::start(d, cpus, opts))
            .map(Running::Threads)
            .map_err(built_in("threads")),
        "processes" => docs()
            .and_then(|d| builtin::ProcessServer::start(d, cpus, opts, PROCESSES))
            .map(Running::Processes)
            .map_err(built_in("processes")),
        "seda" => docs()
            .and_then(|d| builtin::SedaServer::start(d, cpus, opts))
            .map(Running::Seda)
            .map_err(built_in("seda")),
        "nginx" => Ok(real::RealServer::nginx_on(
            &real::find("nginx", &custom.nginx)?,
            set.root(),
            cpus,
            ip,
        )
        .map(Running::Real)?),
        "apache-prefork" | "apache-event" => {
            let mpm = if kind == "apache-prefork" {
                real::Mpm::Prefork
            } else {
                real::Mpm::Event
            };
            let program = real::find("apache2", &custom.apache)?;
            Ok(
                real::RealServer::apache_on(&program, set.root(), cpus, mpm, dynamic, ip)
                    .map(Running::Real)?,
            )
        }
        other => Err(StartError::UnknownKind {
            kind: other.to_string(),
        }),
    }
}

/// Why [`start_serving`] could not start a server.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    // Neither cause is a `source`: the message says it already, so it is printed once.
    #[error("{0}")]
    Real(real::ServerError),
    #[error("cannot start the {kind} server: {error}")]
    BuiltIn {
        kind: &'static str,
        error: std::io::Error,
    },
    #[error("server={kind:?}: expected one of {}", SERVERS.join(", "))]
    UnknownKind { kind: String },
}

impl From<real::ServerError> for StartError {
    fn from(e: real::ServerError) -> Self {
        StartError::Real(e)
    }
}

use smtlab_bench::params::declare as param;

/// The SPECweb96-like static load.
pub struct WebStatic;

const NAME: &str = "web-static";

impl Benchmark for WebStatic {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "web".into(),
            unit: "Mbit/s".into(),
            direction: Direction::Higher,
            // Work is body bytes: bytes/s / 125000 = Mbit/s.
            value_kind: ValueKind::Rate { scale: 125_000.0 },
            description: "SPECweb96-like static load: a file set in four size classes \
                          (35/50/14/1% of requests), Zipf over directories, closed-loop \
                          connections; response bandwidth of a built-in server (event, \
                          threads, processes, seda: staged and copying, no sendfile) or \
                          nginx/Apache/your own"
                .into(),
            origin: "paper 000 s2.4, Figs 1-6".into(),
            params: vec![
                param(
                    "server",
                    "event",
                    None,
                    "event | threads | processes | seda (staged, copying: no sendfile) | nginx | apache-prefork | apache-event | cmd (your own: see cmd)",
                ),
                param(
                    "cmd",
                    "",
                    None,
                    "server=cmd: your server's command, run by sh on the placement; {port} and {root} (the file set) are filled in, e.g. 'busybox httpd -f -p 127.0.0.1:{port} -h {root}'; with -p 1c1t,1c2t bench gives its SMT yield",
                ),
                cmd_port_param(),
                param(
                    "nginx",
                    "",
                    None,
                    "server=nginx: the nginx program (empty: nginx on PATH, then /usr/sbin/nginx)",
                ),
                param(
                    "apache",
                    "",
                    None,
                    "server=apache-*: the Apache httpd program (empty: apache2 or httpd on PATH, then /usr/sbin)",
                ),
                param(
                    "conns",
                    "1024",
                    Some("16"),
                    "closed-loop connections (the paper: 1024)",
                ),
                param(
                    "dataset",
                    "200MiB",
                    Some("8MiB"),
                    "file set size (5 MB per directory; the paper: 500 MB)",
                ),
                param(
                    "duration",
                    "2s",
                    Some("300ms"),
                    "load per sample, a time with its unit (300ms, 2s)",
                ),
                param(
                    "keepalive",
                    "no",
                    None,
                    "yes: HTTP/1.1 kept alive; no: a connection per request (SPECweb96)",
                ),
                crate::client_threads_param(),
                param(
                    m::RATE_PARAM,
                    "0",
                    None,
                    "open loop at this many requests per second over all connections, latency counted from each request's scheduled time (0: closed loop)",
                ),
                crate::irq_param(),
            ],
            main_param: Some("server".into()),
            report: smtlab_model::ReportSection::WebStatic,
        }
    }

    fn client_side(&self) -> bool {
        true
    }

    fn remote_clients(&self) -> bool {
        true
    }

    /// A sample is `duration` of load after a tenth of it (at most 0.5 s) of warm-up;
    /// setting up writes the file set (about 200 MB/s) and starts the server.
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let duration = crate::any_duration_s(ctx.params)?;
        let dataset = ctx.params.get_bytes("dataset")? as f64;
        Ok(crate::load_cost(
            duration + (duration / 10.0).min(0.5),
            0.2 + dataset / 200e6,
        ))
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let p = ctx.params;
        let server = p.get_str("server")?.to_string();
        if !SERVERS.contains(&server.as_str()) {
            return Err(crate::bad_param("server", server, &SERVERS.join(", ")));
        }
        let conns = p.get_u64_in("conns", 1..=100_000, "1 to 100000 connections")? as usize;
        let dataset = p.get_bytes("dataset")?;
        let duration = p
            .get_duration_in(
                "duration",
                Duration::from_millis(50)..=Duration::from_secs(3600),
            )?
            .as_secs_f64();
        let keep_alive = crate::one_of(p, "keepalive", &[("yes", true), ("no", false)])?;
        let rate = p.get_f64(m::RATE_PARAM)?;
        if !(rate == 0.0 || (1.0..=10_000_000.0).contains(&rate)) {
            return Err(crate::bad_param(
                "rate",
                rate,
                "0 (closed loop) or 1 to 10000000 requests per second",
            ));
        }
        let custom = Custom {
            cmd: p.get_str("cmd")?.to_string(),
            port: crate::cmd_port(p)?,
            nginx: p.get_str("nginx")?.to_string(),
            apache: p.get_str("apache")?.to_string(),
        };
        let client = ctx.client_side(NAME)?;
        let remote = client.remote_clients().is_some();
        if remote && rate > 0.0 {
            // The agents of web-static run closed loops; a sample under `rate=` would
            // not be one (web-slo's steps are open loops on the agents).
            return Err(BenchError::unsupported(
                NAME,
                "rate= (an open-loop offered rate) with --client-hosts: \
                 web-static's agents run closed loops only",
            ));
        }
        // 0: one per client CPU here; each agent runs one thread per CPU it was given.
        let threads = p.get_u64("threads")? as usize;
        let local_threads = match threads {
            0 => client.cpus().len(),
            n => n,
        }
        .min(conns);
        let served = serve(
            ctx,
            NAME,
            &server,
            &custom,
            dataset,
            local_threads,
            keep_alive,
            false,
        )?;
        let mut cfg = LoadConfig::new(served.addr, conns, Duration::from_secs_f64(duration));
        cfg.threads = if remote { threads } else { local_threads };
        cfg.keep_alive = keep_alive;
        // Connections ramp up in the first moments of a sample: not counted.
        cfg.warmup = Duration::from_secs_f64((duration / 10.0).min(0.5));
        cfg.rate_per_s = (rate > 0.0).then_some(rate);
        // The agents have their hosts to themselves.
        if remote || client_cores_apart(client.cpus(), &ctx.placement.cpus, ctx.topology) {
            cfg.busy_poll = CLIENT_BUSY_POLL;
        }
        Ok(Box::new(WebInstance {
            cfg,
            served,
            seed: 1,
        }))
    }
}

/// The `port` parameter of `server=cmd`, read by [`crate::cmd_port`].
pub(crate) fn cmd_port_param() -> smtlab_model::ParamInfo {
    let help = "server=cmd: the port your server listens on (0: the free port put in {port})";
    param("port", "0", None, help)
}

/// How long a client thread on cores of its own polls before sleeping (see
/// `LoadConfig::busy_poll`): long enough to bridge the gaps between answers of a busy
/// server, so the server's CPUs do not spend time waking the client.
pub(crate) const CLIENT_BUSY_POLL: Duration = Duration::from_micros(50);

/// What a web load needs before its first sample: its file set, its server and where
/// its load comes from.
/// Its fields drop in order: the server stops, then the load's clients and files go.
pub(crate) struct Served {
    pub(crate) _running: Running,
    pub(crate) driver: Driver,
    pub(crate) _set: FileSet,
    /// Where the load goes: the server's address, or for agents the unspecified address
    /// with the server's port, which each agent replaces with this host's address on its
    /// way to it.
    pub(crate) addr: SocketAddr,
}

/// Where a web load's requests come from, known before the server starts.
enum Clients {
    Here(ClientPool),
    Agents(Remote),
}

/// Sets up a web load of `bench`: the agents of `--client-hosts` reached first (the
/// server then listens where they reach this host), or else `threads` load threads
/// started pinned on the client's CPUs; the file set of `dataset` bytes generated and
/// read into the page cache; then `server` started on the placement (after the
/// counters were opened, by the runner before prepare, so they count its threads and
/// processes) and its requests (`dynamic`: with web-capacity's dynamic share).
#[allow(clippy::too_many_arguments)]
pub(crate) fn serve(
    ctx: &BenchContext<'_>,
    bench: &str,
    server: &str,
    custom: &Custom,
    dataset: u64,
    threads: usize,
    keep_alive: bool,
    dynamic: bool,
) -> Result<Served, BenchError> {
    let client = ctx.client_side(bench)?;
    let agents = match client.remote_clients() {
        Some(agents) => {
            remote_server_ok(bench, server)?;
            Some(connect_agents(bench, agents)?)
        }
        None => None,
    };
    // The file set of `dataset` bytes, generated and read into the page cache.
    let io = |what: &'static str| move |e: std::io::Error| BenchError::io(bench, what, e);
    let set =
        FileSet::generate(fileset::dirs_for(dataset)).map_err(io("generating the file set"))?;
    set.warm()
        .map_err(io("reading the file set into the page cache"))?;
    let (clients, opts) = match agents {
        Some((remote, opts)) => (Clients::Agents(remote), opts),
        None => {
            let pool = ClientPool::start(Pinning::Client(client), threads).map_err(|e| {
                BenchError::unsupported(bench, format!("cannot start the client threads: {e}"))
            })?;
            (Clients::Here(pool), ServerOpts::default())
        }
    };
    let running = start_serving(server, &set, dynamic, &ctx.placement.cpus, opts, custom)
        .map_err(|e| BenchError::unsupported(bench, e.to_string()))?;
    let (specs, weights) = capacity::request_mix(&set, dynamic);
    let (driver, addr) = match clients {
        Clients::Agents(remote) => (
            Driver::Remote {
                remote,
                specs,
                weights,
            },
            SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), running.addr().port()),
        ),
        Clients::Here(pool) => {
            let addr = running.addr();
            let mix = Mix::weighted(&specs, &weights, &addr.to_string(), keep_alive)
                .map_err(|e| BenchError::unsupported(bench, e.to_string()))?;
            let mix = Arc::new(mix);
            (Driver::Local { pool, mix }, addr)
        }
    };
    Ok(Served {
        _running: running,
        driver,
        _set: set,
        addr,
    })
}

/// Whether no client CPU shares a core with a server CPU: only then may the client
/// poll, as its polling would otherwise take cycles from the server's core.
pub(crate) fn client_cores_apart(
    client: &smtlab_model::CpuSet,
    server: &[u32],
    topo: &smtlab_model::Topology,
) -> bool {
    client.iter().all(|c| match topo.core_of(c) {
        Some(core) => server.iter().all(|&s| !core.cpus.contains(s)),
        None => !server.contains(&c),
    })
}

/// Refuses the servers that cannot take load from other hosts: `seda` and the user's
/// `cmd` listen on loopback only.
pub(crate) fn remote_server_ok(bench: &str, server: &str) -> Result<(), BenchError> {
    if matches!(server, "seda" | "cmd") {
        return Err(BenchError::unsupported(
            bench,
            format!(
                "server={server} with --client-hosts: it listens on loopback only (event, \
                 threads, processes, nginx and Apache take remote clients)"
            ),
        ));
    }
    Ok(())
}

/// Reaches the agents of `--client-hosts`; the server options that make a server listen
/// where they reach this host.
pub(crate) fn connect_agents(
    bench: &str,
    agents: &smtlab_placement::RemoteClients,
) -> Result<(Remote, ServerOpts), BenchError> {
    let channel = smtlab_loadgen::remote::Channel::tls_if(agents.tls);
    // An agent lost (at the start of a cell or during it) leaves its share to the
    // others; the samples say how many were lost, and the cell is marked.
    let remote = Remote::connect_surviving(&agents.hosts, &agents.token, channel)
        .map_err(|e| BenchError::unsupported(bench, e.to_string()))?;
    let any: std::net::IpAddr = Ipv4Addr::UNSPECIFIED.into();
    let opts = ServerOpts {
        bind_ip: remote.common_local_ip().unwrap_or(any),
        ..ServerOpts::default()
    };
    Ok((remote, opts))
}

/// Where a web instance's load comes from.
pub(crate) enum Driver {
    /// Client threads on this host's client CPUs.
    Local { pool: ClientPool, mix: Arc<Mix> },
    /// smtlab agents on other hosts.
    Remote {
        remote: Remote,
        specs: Vec<RequestSpec>,
        weights: Vec<f64>,
    },
}

/// What one load of a [`Driver`] counted.
pub(crate) enum Loaded {
    Local(LoadReport),
    Remote(RemoteReport),
}

impl Loaded {
    /// The load's report (the agents' merged for a remote load).
    pub(crate) fn report(&self) -> &LoadReport {
        match self {
            Loaded::Local(r) => r,
            Loaded::Remote(r) => &r.merged,
        }
    }

    /// The load's report, its agents' parts (if any) added to `tally` first.
    pub(crate) fn tallied(&self, tally: &mut AgentTally) -> &LoadReport {
        if let Loaded::Remote(r) = self {
            tally.add(r);
        }
        self.report()
    }
}

impl Driver {
    /// Runs `cfg`; `cfg.addr` is the server's (the unspecified address for agents).
    pub(crate) fn run(&mut self, cfg: &LoadConfig) -> Result<Loaded, String> {
        match self {
            Driver::Local { pool, mix } => pool
                .run(cfg, mix.clone())
                .map(Loaded::Local)
                .map_err(|e| e.to_string()),
            Driver::Remote {
                remote,
                specs,
                weights,
            } => remote
                .run(cfg, specs, weights)
                .map(Loaded::Remote)
                .map_err(|e| e.to_string()),
        }
    }

    /// The client threads of a local load; 0 for agents (each runs one per CPU).
    pub(crate) fn threads(&self) -> usize {
        match self {
            Driver::Local { pool, .. } => pool.threads(),
            Driver::Remote { .. } => 0,
        }
    }

    pub(crate) fn remote(&self) -> Option<&Remote> {
        match self {
            Driver::Local { .. } => None,
            Driver::Remote { remote, .. } => Some(remote),
        }
    }
}

/// The agents' shares over one or more loads (a search's steps), for a sample's
/// metrics: requests and windows added per agent, errors added, the widest start spread.
#[derive(Debug, Default)]
pub(crate) struct AgentTally {
    /// Per agent: requests, window and errors.
    agents: Vec<[u64; 3]>,
    start_spread_ns: u64,
}

impl AgentTally {
    pub(crate) fn add(&mut self, r: &RemoteReport) {
        let n = r.agents.len().max(self.agents.len());
        self.agents.resize(n, [0; 3]);
        for (t, a) in self.agents.iter_mut().zip(&r.agents) {
            t[0] += a.requests;
            t[1] += a.window_ns;
            t[2] += a.error_count();
        }
        self.start_spread_ns = self.start_spread_ns.max(r.start_spread_ns);
    }

    /// `agents`, `agents_start_spread_ns` and each agent's requests/s, errors, clock
    /// offset and round trip (measured when it was reached).
    pub(crate) fn insert_into(&self, remote: &Remote, metrics: &mut BTreeMap<String, f64>) {
        let infos = remote.agents();
        metrics.insert(m::AGENTS.into(), infos.len() as f64);
        if !remote.lost().is_empty() {
            metrics.insert(m::AGENTS_LOST.into(), remote.lost().len() as f64);
        }
        metrics.insert(
            m::AGENTS_START_SPREAD_NS.into(),
            self.start_spread_ns as f64,
        );
        for (i, a) in infos.iter().enumerate() {
            let [requests, window, errors] = self.agents.get(i).copied().unwrap_or_default();
            let rps = if window == 0 {
                0.0
            } else {
                requests as f64 / (window as f64 / 1e9)
            };
            metrics.insert(m::agent_requests_per_s(i), rps);
            metrics.insert(m::agent_errors(i), errors as f64);
            metrics.insert(m::agent_clock_offset_ns(i), a.clock_offset_ns as f64);
            metrics.insert(m::agent_rtt_ns(i), a.rtt_ns as f64);
        }
    }
}

/// A sample from a load the agents ran: [`sample_from`] on the merged report, with the
/// requests per second summed over the agents (each agent's share and errors are
/// [`AgentTally`]'s to add).
fn sample_from_remote(bench: &str, r: &RemoteReport) -> Result<RawSample, BenchError> {
    if r.merged.error_count() > 0 {
        let per_agent: Vec<String> = r
            .agents
            .iter()
            .map(|a| {
                let errors: Vec<String> = a
                    .errors
                    .iter()
                    .map(|(k, v)| format!("{} {v}", k.as_str()))
                    .collect();
                let errors = if errors.is_empty() {
                    "none".to_string()
                } else {
                    errors.join(", ")
                };
                format!("agent {}: {errors}", a.addr)
            })
            .collect();
        return Err(BenchError::check(
            bench,
            format!(
                "{} requests failed beside {} good ones ({}); no throughput reported",
                r.merged.error_count(),
                r.merged.requests,
                per_agent.join("; ")
            ),
        ));
    }
    let mut sample = sample_from(bench, &r.merged)?;
    sample
        .metrics
        .insert(m::REQUESTS_PER_S.into(), r.requests_per_s_summed());
    Ok(sample)
}

struct WebInstance {
    cfg: LoadConfig,
    served: Served,
    seed: u64,
}

/// The latency percentiles, maximum and mean of a load as a sample's metrics.
pub(crate) fn latency_metrics(
    metrics: &mut std::collections::BTreeMap<String, f64>,
    p: &smtlab_loadgen::Percentiles,
) {
    metrics.insert(m::LATENCY_P50_NS.into(), p.p50_ns as f64);
    metrics.insert(m::LATENCY_P90_NS.into(), p.p90_ns as f64);
    metrics.insert(m::LATENCY_P99_NS.into(), p.p99_ns as f64);
    metrics.insert(m::LATENCY_P999_NS.into(), p.p999_ns as f64);
    metrics.insert(m::LATENCY_MAX_NS.into(), p.max_ns as f64);
    metrics.insert("latency_mean_ns".into(), p.mean_ns);
}

/// How busy the load threads were, and, when they were saturated, `value` (the
/// sample's figure, in the benchmark's unit) as the load generator's limit: the server
/// could do at least as much ([`smtlab_model::metrics::limit`]).
pub(crate) fn client_limit(
    metrics: &mut std::collections::BTreeMap<String, f64>,
    r: &LoadReport,
    value: f64,
) {
    if let Some(busy) = r.client_busy {
        metrics.insert(m::CLIENT_BUSY.into(), busy);
    }
    if r.client_saturated() {
        metrics.insert(smtlab_model::metrics::limit::LOAD_GENERATOR.into(), value);
    }
}

/// The checks and figures of every HTTP load's sample: errors fail it (a cell with
/// errors says so instead of reporting throughput), as does a load in which nothing
/// completed (`nothing` says what); else requests per second, requests, mean body
/// bytes, the errors (none), the latency figures and the load generator's limit at
/// `value` (the sample's figure).
pub(crate) fn load_metrics(
    bench: &str,
    r: &LoadReport,
    nothing: &str,
    value: f64,
) -> Result<BTreeMap<String, f64>, BenchError> {
    let errors = r.error_count();
    if errors > 0 {
        return Err(BenchError::check(
            bench,
            format!(
                "{errors} requests failed beside {} good ones ({}); no throughput reported",
                r.requests,
                r.errors_line()
            ),
        ));
    }
    if r.requests == 0 || r.window_ns == 0 {
        return Err(BenchError::check(bench, nothing));
    }
    let mut metrics = BTreeMap::new();
    metrics.insert(m::REQUESTS_PER_S.into(), r.requests_per_s());
    metrics.insert(m::REQUESTS.into(), r.requests as f64);
    metrics.insert(
        m::BYTES_PER_REQUEST.into(),
        r.body_bytes as f64 / r.requests as f64,
    );
    metrics.insert(m::ERRORS.into(), 0.0);
    latency_metrics(&mut metrics, &r.percentiles());
    client_limit(&mut metrics, r, value);
    Ok(metrics)
}

/// A sample from one load: value from body bytes; [`load_metrics`]' checks and figures.
pub fn sample_from(bench: &str, r: &LoadReport) -> Result<RawSample, BenchError> {
    let bytes_per_s = r.body_bytes as f64 / r.seconds();
    let nothing = "no response completed in the sample";
    let mut metrics = load_metrics(bench, r, nothing, bytes_per_s)?;
    metrics.insert(m::CONNECTS.into(), r.connects as f64);
    // The distribution at 1% steps (and 99.9%), for plots.
    let mut q: Vec<f64> = (1..100)
        .map(|i| r.latency.value_at_quantile(i as f64 / 100.0) as f64)
        .collect();
    q.push(metrics[m::LATENCY_P999_NS]);
    let mut series = BTreeMap::new();
    series.insert("latency_quantiles_ns".into(), q);
    Ok(RawSample {
        elapsed_ns: r.window_ns,
        work: r.body_bytes as f64,
        metrics,
        series,
        ..RawSample::default()
    })
}

/// A sample of an open loop at `offered_per_s`: as [`sample_from`] where the server kept
/// up; where it did not (errors, requests never sent, fewer served), still a sample, with
/// what was offered and achieved, so the reader can say so. Without a single answer it
/// carries no latency at all: no percentile is made up.
pub fn open_loop_sample(offered_per_s: f64, cfg: &LoadConfig, r: &LoadReport) -> RawSample {
    let mut s = match sample_from(NAME, r) {
        Ok(s) => s,
        Err(_) if r.requests > 0 && r.window_ns > 0 => {
            // Errors beside good answers: the percentiles of the good ones are kept, and
            // the errors say the rate was not kept up with.
            let mut good = r.clone();
            good.errors.clear();
            good.bad_statuses.clear();
            let mut s = sample_from(NAME, &good).unwrap_or_default();
            s.metrics.insert(m::ERRORS.into(), r.error_count() as f64);
            s
        }
        Err(_) => {
            let mut metrics = BTreeMap::new();
            metrics.insert(m::REQUESTS_PER_S.into(), 0.0);
            metrics.insert(m::REQUESTS.into(), 0.0);
            metrics.insert(m::ERRORS.into(), r.error_count() as f64);
            RawSample {
                elapsed_ns: (r.window_ns.max(cfg.duration.as_nanos() as u64)).max(1),
                work: 0.0,
                metrics,
                ..RawSample::default()
            }
        }
    };
    s.metrics.insert(m::OFFERED_PER_S.into(), offered_per_s);
    s.metrics.insert(m::UNSENT.into(), r.unsent as f64);
    s
}

impl Instance for WebInstance {
    fn sample(&mut self, _iterations: u64) -> Result<RawSample, BenchError> {
        self.seed += 1;
        self.cfg.seed = self.seed;
        let loaded = self
            .served
            .driver
            .run(&self.cfg)
            .map_err(|reason| BenchError::check(NAME, reason))?;
        match (&loaded, self.served.driver.remote()) {
            (Loaded::Remote(r), Some(remote)) => {
                let mut sample = sample_from_remote(NAME, r)?;
                let mut tally = AgentTally::default();
                tally.add(r);
                tally.insert_into(remote, &mut sample.metrics);
                Ok(sample)
            }
            _ => match self.cfg.rate_per_s {
                Some(rate) => Ok(open_loop_sample(rate, &self.cfg, loaded.report())),
                None => sample_from(NAME, loaded.report()),
            },
        }
    }

    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }
}

#[cfg(test)]
mod tests;
