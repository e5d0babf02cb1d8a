//! The coordinator: connects to agents, measures their clocks, splits a load among them,
//! starts them together and merges what they counted.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smtlab_placement::Token;

use super::auth::{self, Role};
use super::proto::{self, FromAgent, LoadSpec, RecvError, Refusal, ToAgent, Wire, WireReport};
use super::tls::{self, Channel, TlsStream};
use crate::LoadConfig;
use crate::http::{ErrorKind, RequestSpec};
use crate::stats::LoadReport;

/// An agent as the coordinator found it.
#[derive(Debug, Clone)]
pub struct AgentInfo {
    /// As given (`host:port`).
    pub addr: String,
    pub peer: SocketAddr,
    /// This host's address on the way to the agent: where the agent reaches a server here.
    pub local_ip: IpAddr,
    /// The CPUs its load threads are pinned to (empty: unpinned).
    pub cpus: Vec<u32>,
    /// Its wall clock minus this host's, from the ping with the shortest round trip
    /// (accurate to half that round trip).
    pub clock_offset_ns: i64,
    pub rtt_ns: u64,
}

/// One agent's share of a merged load.
#[derive(Debug, Clone)]
pub struct AgentRun {
    pub addr: String,
    pub target: SocketAddr,
    pub connections: usize,
    pub requests: u64,
    pub window_ns: u64,
    pub errors: BTreeMap<ErrorKind, u64>,
    /// When it started, relative to the earliest agent (this host's clock).
    pub start_offset_ns: u64,
}

impl AgentRun {
    pub fn requests_per_s(&self) -> f64 {
        if self.window_ns == 0 {
            return 0.0;
        }
        self.requests as f64 / (self.window_ns as f64 / 1e9)
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// A load run by several agents: the merged report (histograms added, counts summed,
/// the window the longest agent's) and each agent's share.
#[derive(Debug, Clone)]
pub struct RemoteReport {
    pub merged: LoadReport,
    pub agents: Vec<AgentRun>,
    /// Latest agent start minus earliest, by this host's clock (after the offsets).
    pub start_spread_ns: u64,
    /// The agents named but lost before this load (their share went to the others),
    /// each with why.
    pub lost: Vec<String>,
}

impl RemoteReport {
    /// The agents' requests per second, added.
    pub fn requests_per_s_summed(&self) -> f64 {
        self.agents.iter().map(AgentRun::requests_per_s).sum()
    }
}

/// Why the agents could not run a load; each message is one line naming the agent.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RemoteError {
    #[error("--client-hosts {0}")]
    Config(String),
    #[error("agent {addr}: cannot connect: {error}")]
    Connect { addr: String, error: String },
    #[error("agent {addr} refused this coordinator: {reason}")]
    Refused { addr: String, reason: String },
    #[error("agent {addr} closed the connection {during} (stopped or killed?)")]
    Lost { addr: String, during: &'static str },
    #[error("agent {addr} did not answer {during} within {secs} s")]
    Timeout {
        addr: String,
        during: &'static str,
        secs: u64,
    },
    #[error("agent {addr}: {reason}")]
    Agent { addr: String, reason: String },
    #[error(
        "agent {addr} did not prove it holds this coordinator's token (a wrong token on one \
         side, or not an smtlab agent): nothing more was sent to it"
    )]
    Unproved { addr: String },
    #[error(
        "agent {addr}: TLS: {error} (is the agent started with --tls, and with the same \
         token?)"
    )]
    Tls { addr: String, error: String },
    #[error("request refused before it was sent: {0}")]
    Request(String),
    #[error("agent {addr}: protocol error {during}: {what}")]
    Protocol {
        addr: String,
        during: &'static str,
        what: String,
    },
}

impl RemoteError {
    /// The agent this error says is gone (unreachable, closed, silent): its share of a
    /// load can go to the others. `None` for what the others would meet too (a wrong
    /// token, a refused load, a bad request).
    pub fn lost_agent(&self) -> Option<&str> {
        match self {
            RemoteError::Connect { addr, .. }
            | RemoteError::Lost { addr, .. }
            | RemoteError::Timeout { addr, .. } => Some(addr),
            _ => None,
        }
    }
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The handshake from hello to welcome, in all.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
const PINGS: usize = 8;
/// The widest clock offset accepted: an agent whose clock is further off is broken (or
/// lying), and its start instants and report times would be meaningless.
const MAX_CLOCK_OFFSET: Duration = Duration::from_secs(86_400);
/// Timing slack in the checks of an agent's times: scheduling, and clocks that run at
/// rates a little apart.
const TIME_SLACK_NS: u64 = 5_000_000;

struct Agent {
    info: AgentInfo,
    wire: Wire,
    /// When the clock offset was measured: two clocks drift apart after it.
    offset_at_unix_ns: u64,
}

impl Agent {
    fn recv(&mut self, timeout: Duration, during: &'static str) -> Result<FromAgent, RemoteError> {
        self.recv_by(Instant::now() + timeout, timeout, during)
    }

    /// The next message by `deadline` (of `timeout`, for the message).
    fn recv_by(
        &mut self,
        deadline: Instant,
        timeout: Duration,
        during: &'static str,
    ) -> Result<FromAgent, RemoteError> {
        let addr = || self.info.addr.clone();
        match self.wire.recv_by::<FromAgent>(Some(deadline)) {
            Ok(FromAgent::Refused { reason }) => Err(RemoteError::Refused {
                addr: addr(),
                reason,
            }),
            Ok(FromAgent::Failed { reason }) => Err(RemoteError::Agent {
                addr: addr(),
                reason,
            }),
            Ok(m) => Ok(m),
            Err(RecvError::Closed) => Err(RemoteError::Lost {
                addr: addr(),
                during,
            }),
            Err(RecvError::TimedOut) => Err(RemoteError::Timeout {
                addr: addr(),
                during,
                secs: timeout.as_secs(),
            }),
            Err(RecvError::Io(e)) => Err(self.protocol(during, e.to_string())),
            Err(RecvError::Bad(what)) => Err(self.protocol(during, what)),
        }
    }

    fn send(&mut self, msg: &ToAgent, during: &'static str) -> Result<(), RemoteError> {
        self.wire.send(msg).map_err(|_| RemoteError::Lost {
            addr: self.info.addr.clone(),
            during,
        })
    }

    fn protocol(&self, during: &'static str, what: String) -> RemoteError {
        RemoteError::Protocol {
            addr: self.info.addr.clone(),
            during,
            what,
        }
    }

    fn unexpected(&self, during: &'static str, m: &FromAgent) -> RemoteError {
        self.protocol(during, format!("unexpected {m:?}"))
    }
}

/// Connections to the agents of one workload instance; dropping it closes them, and
/// the agents stop any load they run.
pub struct Remote {
    agents: Vec<Agent>,
    /// Set when a load failed half-way: the connections may be out of step.
    broken: Option<RemoteError>,
    /// Kept to reach the surviving agents again after one is lost.
    token: Token,
    tls: Option<Arc<rustls::ClientConfig>>,
    /// Whether a lost agent's share goes to the others ([`Remote::connect_surviving`]).
    survive: bool,
    /// The agents named but lost, each with why.
    lost: Vec<RemoteError>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("agents", &self.agents())
            .finish()
    }
}

impl Remote {
    /// Connects to every agent of `hosts` (`host:port`), over TLS when `channel` says
    /// so, says hello with `token` and measures each one's clock offset. Every agent
    /// must answer, and stay: a lost agent fails the load.
    pub fn connect(
        hosts: &[String],
        token: &Token,
        channel: Channel,
    ) -> Result<Remote, RemoteError> {
        Remote::open(hosts, token, channel, false)
    }

    /// As [`Remote::connect`], but an agent that cannot be reached, or is lost during
    /// a load, leaves its share to the others ([`Remote::lost`] says which, and the
    /// loads' reports too); it fails only when no agent is left.
    pub fn connect_surviving(
        hosts: &[String],
        token: &Token,
        channel: Channel,
    ) -> Result<Remote, RemoteError> {
        Remote::open(hosts, token, channel, true)
    }

    fn open(
        hosts: &[String],
        token: &Token,
        channel: Channel,
        survive: bool,
    ) -> Result<Remote, RemoteError> {
        if hosts.is_empty() {
            return Err(RemoteError::Config("names no agent".into()));
        }
        let tls = match channel {
            Channel::Plain => None,
            Channel::Tls => Some(
                tls::client_config(token)
                    .map_err(|e| RemoteError::Config(format!("cannot set up TLS: {e}")))?,
            ),
        };
        let mut remote = Remote {
            agents: Vec::with_capacity(hosts.len()),
            broken: None,
            token: token.clone(),
            tls,
            survive,
            lost: Vec::new(),
        };
        remote.reach(hosts)?;
        Ok(remote)
    }

    /// Connects to `hosts`; one that is gone is lost when surviving, else an error.
    /// An error too when no agent answers.
    fn reach(&mut self, hosts: &[String]) -> Result<(), RemoteError> {
        for addr in hosts {
            match connect_one(addr, &self.token, self.tls.as_ref()) {
                Ok(a) => self.agents.push(a),
                Err(e) if self.survive && e.lost_agent().is_some() => self.lost.push(e),
                Err(e) => return Err(e),
            }
        }
        match self.lost.last() {
            Some(e) if self.agents.is_empty() => Err(e.clone()),
            _ => Ok(()),
        }
    }

    /// The agents named but lost (unreachable, or gone during a load), each with why.
    pub fn lost(&self) -> &[RemoteError] {
        &self.lost
    }

    pub fn agents(&self) -> Vec<&AgentInfo> {
        self.agents.iter().map(|a| &a.info).collect()
    }

    /// The address of this host every agent reaches it through, if they share one (a
    /// server here listens on it; else on every address).
    pub fn common_local_ip(&self) -> Option<IpAddr> {
        let first = self.agents.first()?.info.local_ip;
        self.agents
            .iter()
            .all(|a| a.info.local_ip == first)
            .then_some(first)
    }

    /// Runs `cfg` split among the agents (connections, threads, rate and request limit
    /// shared out; `cfg.threads` 0: one per agent CPU), all started at one instant, and
    /// merges what they counted. A target on the unspecified address (0.0.0.0:PORT)
    /// means this host as each agent reaches it.
    pub fn run(
        &mut self,
        cfg: &LoadConfig,
        requests: &[RequestSpec],
        weights: &[f64],
    ) -> Result<RemoteReport, RemoteError> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        loop {
            let e = match self.run_inner(cfg, requests, weights) {
                Ok(mut r) => {
                    r.lost = self.lost.iter().map(ToString::to_string).collect();
                    return Ok(r);
                }
                Err(e) => e,
            };
            if matches!(e, RemoteError::Config(_)) {
                return Err(e);
            }
            let Some(gone) = e.lost_agent().filter(|_| self.survive).map(str::to_string) else {
                self.broken = Some(e.clone());
                return Err(e);
            };
            // The others may be mid-load, out of step: reached again afresh (closing
            // a connection stops an agent's load), and the load run again by them.
            let survivors: Vec<String> = self
                .agents
                .drain(..)
                .map(|a| a.info.addr)
                .filter(|a| *a != gone)
                .collect();
            self.lost.push(e.clone());
            if survivors.is_empty() {
                self.broken = Some(e.clone());
                return Err(e);
            }
            if let Err(e) = self.reach(&survivors) {
                self.broken = Some(e.clone());
                return Err(e);
            }
        }
    }

    fn run_inner(
        &mut self,
        cfg: &LoadConfig,
        requests: &[RequestSpec],
        weights: &[f64],
    ) -> Result<RemoteReport, RemoteError> {
        let n = self.agents.len();
        if cfg.connections < n {
            return Err(RemoteError::Config(format!(
                "names {n} agents for {} connections: every agent needs one",
                cfg.connections
            )));
        }
        let specs: Vec<LoadSpec> = (0..n)
            .map(|i| self.spec_for(cfg, requests, weights, i))
            .collect();
        for spec in &specs {
            spec.check_requests()
                .map_err(|e| RemoteError::Request(e.0))?;
        }
        for (a, spec) in self.agents.iter_mut().zip(&specs) {
            let spec = Box::new(spec.clone());
            a.send(&ToAgent::Prepare { spec }, "preparing a load")?;
        }
        for a in &mut self.agents {
            match a.recv(REPLY_TIMEOUT, "preparing a load")? {
                FromAgent::Ready { .. } => {}
                m => return Err(a.unexpected("preparing a load", &m)),
            }
        }
        // The start barrier: one instant far enough ahead for every start message to
        // arrive, told to each agent in its own clock.
        let max_rtt = self.agents.iter().map(|a| a.info.rtt_ns).max().unwrap_or(0);
        let lead_ns = (4 * max_rtt).max(50_000_000);
        let start = proto::unix_ns() + lead_ns;
        for a in &mut self.agents {
            let at = start.saturating_add_signed(a.info.clock_offset_ns);
            a.send(&ToAgent::Start { at_unix_ns: at }, "starting a load")?;
        }
        let wait =
            cfg.duration + cfg.warmup + cfg.timeout + REPLY_TIMEOUT + Duration::from_nanos(lead_ns);
        let mut parts = Vec::with_capacity(n);
        for (a, spec) in self.agents.iter_mut().zip(&specs) {
            let report = match a.recv(wait, "during a load")? {
                FromAgent::Done { report } => *report,
                m => return Err(a.unexpected("during a load", &m)),
            };
            let checked = report
                .check(spec)
                .and_then(|()| check_times(&report, spec, a, start, proto::unix_ns()));
            if let Err(what) = checked {
                return Err(a.protocol("reading a load's report", what.0));
            }
            parts.push(report);
        }
        self.report(&parts, &specs)
    }

    /// Agent `i`'s share of `cfg`: connections, threads, rate and request limit shared
    /// out.
    fn spec_for(
        &self,
        cfg: &LoadConfig,
        requests: &[RequestSpec],
        weights: &[f64],
        i: usize,
    ) -> LoadSpec {
        let n = self.agents.len();
        let share =
            |total: u64, i: usize| total / n as u64 + u64::from((i as u64) < total % n as u64);
        let conns = share(cfg.connections as u64, i) as usize;
        let (target, host) = if cfg.addr.ip().is_unspecified() {
            let t = SocketAddr::new(self.agents[i].info.local_ip, cfg.addr.port());
            (t, t.to_string())
        } else {
            (cfg.addr, cfg.host.clone())
        };
        LoadSpec {
            target,
            host,
            connections: conns,
            threads: if cfg.threads == 0 {
                0
            } else {
                (share(cfg.threads as u64, i) as usize).max(1)
            },
            duration_ns: cfg.duration.as_nanos() as u64,
            warmup_ns: cfg.warmup.as_nanos() as u64,
            timeout_ns: cfg.timeout.as_nanos() as u64,
            rate_per_s: cfg
                .rate_per_s
                .map(|r| r * conns as f64 / cfg.connections as f64),
            conn_bits_per_s: cfg.conn_bits_per_s,
            keep_alive: cfg.keep_alive,
            max_requests: share(cfg.max_requests, i).max(1),
            seed: cfg.seed.wrapping_add(i as u64 * 104_729),
            busy_poll_ns: cfg.busy_poll.as_nanos() as u64,
            requests: requests.to_vec(),
            weights: weights.to_vec(),
        }
    }

    /// The checked reports as one, with each agent's share and when it started.
    fn report(
        &self,
        parts: &[WireReport],
        specs: &[LoadSpec],
    ) -> Result<RemoteReport, RemoteError> {
        let merged = merge(parts).map_err(|what| RemoteError::Protocol {
            addr: self.agents[0].info.addr.clone(),
            during: "merging the loads",
            what,
        })?;
        let starts: Vec<i128> = parts
            .iter()
            .zip(&self.agents)
            .map(|(p, a)| i128::from(p.started_unix_ns) - i128::from(a.info.clock_offset_ns))
            .collect();
        let first = starts.iter().copied().min().unwrap_or(0);
        let mut agents = Vec::with_capacity(parts.len());
        for (((p, a), spec), s) in parts.iter().zip(&self.agents).zip(specs).zip(&starts) {
            agents.push(AgentRun {
                addr: a.info.addr.clone(),
                target: spec.target,
                connections: spec.connections,
                requests: p.requests,
                window_ns: p.window_ns,
                errors: p
                    .error_kinds()
                    .map_err(|e| a.protocol("reading a load's report", e.to_string()))?,
                start_offset_ns: (s - first) as u64,
            });
        }
        let spread = starts.iter().copied().max().unwrap_or(0) - first;
        Ok(RemoteReport {
            merged,
            agents,
            start_spread_ns: spread as u64,
            lost: Vec::new(),
        })
    }
}

/// Whether an agent's times fit this host's clock: it started at the instant it was
/// told (to within the round trip the offset was measured with), and its load (warm-up
/// and window) ended before its report arrived at `received_unix_ns`.
fn check_times(
    r: &WireReport,
    spec: &LoadSpec,
    agent: &Agent,
    start_unix_ns: u64,
    received_unix_ns: u64,
) -> Result<(), Refusal> {
    let info = &agent.info;
    let started = i128::from(r.started_unix_ns) - i128::from(info.clock_offset_ns);
    let run_ns = u128::from(spec.warmup_ns) + u128::from(r.window_ns);
    // Clocks that run apart by 0.1% at most (10 times a poor quartz's rate), since the
    // offset was measured (a connection may serve many loads) and over the load.
    let since_offset_ns = received_unix_ns.saturating_sub(agent.offset_at_unix_ns);
    let drift = ((u128::from(since_offset_ns) + run_ns) / 1000) as i128;
    let err = i128::from(info.rtt_ns / 2 + TIME_SLACK_NS) + drift;
    if started < i128::from(start_unix_ns) - err {
        return proto::refuse(format!(
            "started {:.3} ms before the start instant (the clock offset was measured to {:.3} ms)",
            (i128::from(start_unix_ns) - started) as f64 / 1e6,
            err as f64 / 1e6
        ));
    }
    let ended = started + run_ns as i128;
    if ended > i128::from(received_unix_ns) + err {
        return proto::refuse(format!(
            "a load said to end {:.3} ms after its report arrived",
            (ended - i128::from(received_unix_ns)) as f64 / 1e6
        ));
    }
    Ok(())
}

fn connect_one(
    addr: &str,
    token: &Token,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Agent, RemoteError> {
    let fail = |error: String| RemoteError::Connect {
        addr: addr.to_string(),
        error,
    };
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| fail(format!("expected HOST:PORT ({e})")))?
        .next()
        .ok_or_else(|| fail("the name has no address".into()))?;
    let stream =
        TcpStream::connect_timeout(&sock, CONNECT_TIMEOUT).map_err(|e| fail(e.to_string()))?;
    let local_ip = stream.local_addr().map_err(|e| fail(e.to_string()))?.ip();
    let wire = match tls {
        None => Wire::new(stream, proto::MAX_HANDSHAKE_LINE_BYTES),
        Some(config) => {
            let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
            let tls = TlsStream::connect(stream, config.clone(), deadline).map_err(|e| {
                RemoteError::Tls {
                    addr: addr.to_string(),
                    error: e.to_string(),
                }
            })?;
            Wire::tls(tls, proto::MAX_HANDSHAKE_LINE_BYTES)
        }
    }
    .map_err(|e| fail(e.to_string()))?;
    let mut agent = Agent {
        info: AgentInfo {
            addr: addr.to_string(),
            peer: sock,
            local_ip,
            cpus: Vec::new(),
            clock_offset_ns: 0,
            rtt_ns: 0,
        },
        wire,
        offset_at_unix_ns: 0,
    };
    handshake(&mut agent, token)?;
    agent.wire.set_max_line_bytes(proto::MAX_LINE_BYTES);
    let (rtt, offset) = clock_offset(&mut agent)?;
    agent.info.rtt_ns = rtt;
    agent.info.clock_offset_ns = offset;
    agent.offset_at_unix_ns = proto::unix_ns();
    Ok(agent)
}

/// Hello with a fresh nonce; the agent's proof checked before this coordinator proves
/// the token in turn (so an impostor learns nothing of it); the agent's CPUs.
fn handshake(agent: &mut Agent, token: &Token) -> Result<(), RemoteError> {
    const DURING: &str = "at hello";
    let addr = agent.info.addr.clone();
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    let ours = auth::nonce().map_err(|e| RemoteError::Connect {
        addr: addr.clone(),
        error: e.to_string(),
    })?;
    let hello = ToAgent::Hello {
        version: proto::VERSION,
        nonce: auth::encode(&ours),
    };
    agent.send(&hello, DURING)?;
    let (theirs, proof) = match agent.recv_by(deadline, HANDSHAKE_TIMEOUT, DURING) {
        Ok(FromAgent::Challenge {
            version,
            nonce,
            proof,
        }) if version == proto::VERSION => (nonce, proof),
        Ok(m) => return Err(agent.unexpected(DURING, &m)),
        // An agent of protocol 1 cannot read this hello and says so in its terms.
        Err(RemoteError::Refused { addr, reason }) if reason.contains("missing field `token`") => {
            return Err(RemoteError::Refused {
                addr,
                reason: format!(
                    "it speaks an older protocol (1); this coordinator speaks {}: run the same \
                     smtlab release on both hosts",
                    proto::VERSION
                ),
            });
        }
        Err(e) => return Err(e),
    };
    let theirs = auth::decode_nonce(&theirs, "the agent's nonce")
        .map_err(|e| agent.protocol(DURING, e.to_string()))?;
    // A proof over this coordinator's own nonce is a reflection, not a proof.
    if theirs == ours || !auth::verify(token, Role::Agent, &ours, &theirs, &proof) {
        return Err(RemoteError::Unproved { addr });
    }
    let proof = auth::prove(token, Role::Coordinator, &ours, &theirs);
    agent.send(&ToAgent::Proof { proof }, DURING)?;
    match agent.recv_by(deadline, HANDSHAKE_TIMEOUT, DURING)? {
        FromAgent::Welcome { cpus } => agent.info.cpus = cpus,
        m => return Err(agent.unexpected(DURING, &m)),
    }
    Ok(())
}

/// The agent's wall clock minus this host's and the round trip it was measured with.
/// NTP's estimate: the agent read its clock half-way through the round trip; the
/// exchange with the shortest trip bounds the error best. Every exchange must agree with
/// it to within their round trips (a clock that jumps, or an agent that makes its
/// readings up, does not), and the offset must be under a day.
fn clock_offset(agent: &mut Agent) -> Result<(u64, i64), RemoteError> {
    const DURING: &str = "measuring its clock";
    let mut pings = Vec::with_capacity(PINGS);
    for _ in 0..PINGS {
        let t0 = proto::unix_ns();
        agent.send(&ToAgent::Ping, DURING)?;
        let FromAgent::Pong { unix_ns } = agent.recv(REPLY_TIMEOUT, DURING)? else {
            return Err(agent.protocol(DURING, "expected pong".into()));
        };
        let t1 = proto::unix_ns();
        let rtt = t1.saturating_sub(t0);
        let offset = i128::from(unix_ns) - (i128::from(t0) + i128::from(t1)) / 2;
        pings.push((rtt, offset));
    }
    let (rtt, offset) = pings.iter().copied().min_by_key(|p| p.0).unwrap_or((0, 0));
    let bad = |what: String| agent.protocol(DURING, what);
    if offset.unsigned_abs() > MAX_CLOCK_OFFSET.as_nanos() {
        return Err(bad(format!(
            "its clock is {:.0} s away from this host's (more than a day): set its clock",
            offset as f64 / 1e9
        )));
    }
    for &(r, o) in &pings {
        let within = i128::from(r / 2 + rtt / 2 + TIME_SLACK_NS);
        if (o - offset).abs() > within {
            return Err(bad(format!(
                "clock readings {:.3} ms apart over round trips of {:.3} ms",
                (o - offset).abs() as f64 / 1e6,
                r as f64 / 1e6
            )));
        }
    }
    Ok((rtt, offset as i64))
}

/// The agents' reports as one: counts added, histograms added (exact: the merged
/// percentiles are those of one histogram of every sample), the window the longest,
/// connections numbered on after the previous agent's.
pub(crate) fn merge(parts: &[WireReport]) -> Result<LoadReport, String> {
    fn add(a: &mut u64, b: u64) -> Result<(), &'static str> {
        *a = a.checked_add(b).ok_or("counts that overflow when added")?;
        Ok(())
    }
    let mut r = LoadReport::empty();
    // The agents' load threads' mean share of time on a CPU, when every agent says.
    let busy: Option<Vec<f64>> = parts.iter().map(|p| p.client_busy).collect();
    r.client_busy = busy
        .filter(|b| !b.is_empty())
        .map(|b| b.iter().sum::<f64>() / b.len() as f64);
    let mut first_conn = 0usize;
    for p in parts {
        r.window_ns = r.window_ns.max(p.window_ns);
        add(&mut r.requests, p.requests)?;
        add(&mut r.bytes, p.bytes)?;
        add(&mut r.body_bytes, p.body_bytes)?;
        add(&mut r.connects, p.connects)?;
        add(&mut r.unanswered, p.unanswered)?;
        add(&mut r.unsent, p.unsent)?;
        r.latency
            .add(p.latency().map_err(|e| e.to_string())?)
            .map_err(|e| format!("histogram out of range: {e:?}"))?;
        for (k, v) in p.error_kinds().map_err(|e| e.to_string())? {
            add(r.errors.entry(k).or_default(), v)?;
        }
        for &(k, v) in &p.bad_statuses {
            add(r.bad_statuses.entry(k).or_default(), v)?;
        }
        let next = p
            .conns
            .iter()
            .map(|c| c.conn.saturating_add(1))
            .max()
            .unwrap_or(0)
            .checked_add(first_conn)
            .ok_or("connection numbers that overflow")?;
        r.conns.extend(p.conns.iter().cloned().map(|mut c| {
            c.conn += first_conn;
            c
        }));
        first_conn = next;
    }
    Ok(r)
}
