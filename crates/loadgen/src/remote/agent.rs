//! The agent: listens for coordinators, has each prove the token before it reads
//! anything else, runs the loads they ask for on its own pinned threads, and answers
//! what it counted.
//!
//! A connection that has not proved the token yet holds no coordinator slot: it has
//! [`AgentLimits::handshake_timeout`] in all, lines of at most
//! [`proto::MAX_HANDSHAKE_LINE_BYTES`], and at most [`AgentLimits::max_handshakes`] such
//! connections are served at once (more are closed at accept).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smtlab_placement::Token;

use super::allow::AllowList;
use super::auth::{self, Role};
use super::proto::{
    self, FromAgent, Greeting, LoadSpec, RecvError, Refusal, ToAgent, Wire, WireReport,
};
use super::tls::{self, Channel, TlsError, TlsStream};
use crate::sys::{self, PeerState};
use crate::{ClientPool, LoadConfig, Mix, Pinning};

/// What an agent accepts.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub token: Token,
    pub allow: AllowList,
    /// Its load threads' CPUs (thread i on `cpus[i % len]`); empty: unpinned.
    pub cpus: Vec<u32>,
    pub limits: AgentLimits,
    /// TLS: coordinators must connect with TLS, and nothing else is taken.
    pub channel: Channel,
}

/// What one load of a coordinator may ask for at most, and what unproved connections
/// may hold.
#[derive(Debug, Clone, Copy)]
pub struct AgentLimits {
    /// Warm-up and measured time together.
    pub max_duration: Duration,
    pub max_connections: usize,
    /// Requests started in one load.
    pub max_requests: u64,
    /// Coordinators connected at once, once they proved the token (each interleaved
    /// cell of a run holds one).
    pub max_coordinators: usize,
    /// A coordinator silent this long between loads is dropped.
    pub idle_timeout: Duration,
    /// Connections that have not proved the token yet, at once; more are closed at once.
    pub max_handshakes: usize,
    /// Of those, from one address: so that one host cannot hold every place and lock
    /// out a coordinator elsewhere.
    pub max_handshakes_per_host: usize,
    /// The time a connection has, from its accept, to prove the token: one deadline for
    /// every line of the handshake.
    pub handshake_timeout: Duration,
    /// Descriptors the loads may hold together (their connections and threads); 0: the
    /// soft open-file limit less what the agent keeps for itself.
    pub max_open_files: u64,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_duration: Duration::from_secs(600),
            max_connections: 100_000,
            max_requests: 1_000_000_000,
            max_coordinators: 16,
            idle_timeout: Duration::from_secs(3600),
            max_handshakes: 64,
            max_handshakes_per_host: 8,
            handshake_timeout: Duration::from_secs(5),
            max_open_files: 0,
        }
    }
}

/// What happened, for the caller to show (the agent never prints); thiserror for its
/// `Display` only.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AgentEvent {
    #[error("{peer}: coordinator accepted")]
    Accepted { peer: SocketAddr },
    #[error("{peer}: refused: {reason}")]
    Refused { peer: SocketAddr, reason: String },
    #[error(
        "{peer}: load on {target}: {connections} connections, {requests} requests, \
         {requests_per_s:.0} req/s, {errors} errors"
    )]
    Load {
        peer: SocketAddr,
        target: SocketAddr,
        connections: usize,
        requests: u64,
        requests_per_s: f64,
        errors: u64,
    },
    #[error("{peer}: load failed: {reason}")]
    LoadFailed { peer: SocketAddr, reason: String },
    /// The coordinator's connection dropped; `during_load`: its load was stopped.
    #[error(
        "{peer}: coordinator gone{}",
        if *during_load { " during a load: load stopped" } else { "" }
    )]
    Lost { peer: SocketAddr, during_load: bool },
    #[error("{peer}: coordinator done")]
    Closed { peer: SocketAddr },
    /// A connection could not be accepted (out of descriptors?); the agent waits and
    /// tries again.
    #[error(
        "cannot accept a connection: {error}; trying again in {} ms",
        ACCEPT_BACKOFF.as_millis()
    )]
    AcceptFailed { error: String },
}

/// The latest a start may be asked for, ahead of the agent's clock.
const MAX_START_AHEAD: Duration = Duration::from_secs(10);
/// How long the agent waits after a failed accept (out of descriptors: the connections
/// it serves must end first) before it tries again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// A failed accept is told at most this often (it may fail for a while).
const ACCEPT_ERROR_EVERY: Duration = Duration::from_secs(5);
/// How often a watch on a coordinator looks at whether its load ended.
const WATCH_TICK: Duration = Duration::from_millis(10);
/// Descriptors the agent keeps for itself beyond those of its connections to
/// coordinators: its listener, standard streams, the load threads' epoll instances.
const KEPT_FILES: u64 = 64;

type OnEvent = Arc<dyn Fn(AgentEvent) + Send + Sync>;

/// What the connections of one agent share.
struct Shared {
    cfg: AgentConfig,
    /// With [`Channel::Tls`]: the agent's side of TLS, keyed by the token.
    tls: Option<Arc<rustls::ServerConfig>>,
    on_event: OnEvent,
    handshakes: Arc<AtomicUsize>,
    /// Unproved connections per peer address (none kept at zero).
    handshakes_by_host: Arc<Mutex<HashMap<IpAddr, usize>>>,
    coordinators: Arc<AtomicUsize>,
    files: Arc<FileBudget>,
}

/// One of a bounded number of places, given back when dropped (a panic included).
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(counter: &Arc<AtomicUsize>, most: usize) -> Option<Slot> {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < most).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(counter.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One of the places of one peer address, given back when dropped.
struct HostSlot {
    hosts: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl HostSlot {
    fn take(
        hosts: &Arc<Mutex<HashMap<IpAddr, usize>>>,
        ip: IpAddr,
        most: usize,
    ) -> Option<HostSlot> {
        let mut held = hosts.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(ip).or_insert(0);
        if *n >= most {
            return None;
        }
        *n += 1;
        Some(HostSlot {
            hosts: hosts.clone(),
            ip,
        })
    }
}

impl Drop for HostSlot {
    fn drop(&mut self) {
        let mut held = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// The descriptors the loads may hold together, within the open-file limit.
struct FileBudget {
    /// The soft open-file limit when the agent started.
    limit: u64,
    total: u64,
    used: Mutex<u64>,
}

/// Descriptors one prepared or running load holds, given back when dropped.
struct Files {
    budget: Arc<FileBudget>,
    n: u64,
}

impl FileBudget {
    fn reserve(self: &Arc<Self>, n: u64) -> Result<Files, Refusal> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let free = self.total.saturating_sub(*used);
        if n > free {
            return proto::refuse(format!(
                "a load needing {n} descriptors: this agent has {free} free within its \
                 open-file limit of {} (raise `ulimit -n` where the agent starts, or ask \
                 for fewer connections)",
                self.limit
            ));
        }
        *used += n;
        Ok(Files {
            budget: self.clone(),
            n,
        })
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        *used = used.saturating_sub(self.n);
    }
}

/// Serves coordinators on `listener` until `stop` is set (looked at every 100 ms), each
/// on a thread of its own. Accepts as soon as a connection arrives; never returns on a
/// failed accept (out of descriptors, say): it waits and tries again.
pub fn serve(
    listener: TcpListener,
    cfg: AgentConfig,
    stop: &AtomicBool,
    on_event: OnEvent,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let limit = sys::open_file_limits()?.rlim_cur;
    let kept = sys::open_files()?
        + KEPT_FILES
        + (cfg.limits.max_handshakes + cfg.limits.max_coordinators) as u64;
    let mut total = limit.saturating_sub(kept);
    if cfg.limits.max_open_files > 0 {
        total = total.min(cfg.limits.max_open_files);
    }
    let tls = match cfg.channel {
        Channel::Plain => None,
        Channel::Tls => Some(tls::server_config(&cfg.token).map_err(io::Error::other)?),
    };
    let shared = Arc::new(Shared {
        cfg,
        tls,
        on_event,
        handshakes: Arc::new(AtomicUsize::new(0)),
        handshakes_by_host: Arc::new(Mutex::new(HashMap::new())),
        coordinators: Arc::new(AtomicUsize::new(0)),
        files: Arc::new(FileBudget {
            limit,
            total,
            used: Mutex::new(0),
        }),
    });
    let mut last_told: Option<Instant> = None;
    let mut closed_unread = ClosedUnread::default();
    while !stop.load(Ordering::Relaxed) {
        if !sys::wait_readable(listener.as_raw_fd(), 100) {
            continue;
        }
        loop {
            match listener.accept() {
                Ok((stream, peer)) => {
                    if !admit(&shared, stream, peer) {
                        closed_unread.one(&shared, peer);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // Interrupted, or a connection reset before it was accepted: the next.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), or
                // anything else: the connections served now end in time and free them.
                Err(e) => {
                    if last_told.is_none_or(|t| t.elapsed() >= ACCEPT_ERROR_EVERY) {
                        (shared.on_event)(AgentEvent::AcceptFailed {
                            error: e.to_string(),
                        });
                        last_told = Some(Instant::now());
                    }
                    std::thread::sleep(ACCEPT_BACKOFF);
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Starts a thread for a new connection, if one more unproved connection fits.
/// Whether it was admitted: one beyond the bound is closed unread, nothing spent on it.
fn admit(shared: &Arc<Shared>, stream: TcpStream, peer: SocketAddr) -> bool {
    let accepted = Instant::now();
    let limits = &shared.cfg.limits;
    let Some(host) = HostSlot::take(
        &shared.handshakes_by_host,
        peer.ip(),
        limits.max_handshakes_per_host,
    ) else {
        return false;
    };
    let Some(slot) = Slot::take(&shared.handshakes, limits.max_handshakes) else {
        return false;
    };
    let sh = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("smtlab-agent-conn".into())
        .spawn(move || {
            let event = connection(
                &sh,
                stream,
                peer,
                accepted + sh.cfg.limits.handshake_timeout,
                (slot, host),
            );
            (sh.on_event)(event);
        });
    if let Err(e) = spawned {
        (shared.on_event)(AgentEvent::Refused {
            peer,
            reason: format!("cannot start a thread: {e}"),
        });
    }
    true
}

/// Connections closed unread because too many were proving the token: told at most every
/// [`ACCEPT_ERROR_EVERY`], with how many, so a flood does not flood the agent's output.
#[derive(Default)]
struct ClosedUnread {
    since_told: u64,
    told: Option<Instant>,
}

impl ClosedUnread {
    fn one(&mut self, shared: &Shared, peer: SocketAddr) {
        self.since_told += 1;
        if self.told.is_none_or(|t| t.elapsed() >= ACCEPT_ERROR_EVERY) {
            (shared.on_event)(AgentEvent::Refused {
                peer,
                reason: format!(
                    "closed unread: too many connections proving the token (at most {} in \
                     all, {} from one address; {} closed so since the last such line)",
                    shared.cfg.limits.max_handshakes,
                    shared.cfg.limits.max_handshakes_per_host,
                    self.since_told
                ),
            });
            *self = ClosedUnread {
                since_told: 0,
                told: Some(Instant::now()),
            };
        }
    }
}

/// One connection: its handshake by `deadline` holding `handshake` slot, then a
/// coordinator slot for the rest; the event that ended it.
fn connection(
    sh: &Shared,
    stream: TcpStream,
    peer: SocketAddr,
    deadline: Instant,
    handshake: (Slot, HostSlot),
) -> AgentEvent {
    let lost = AgentEvent::Lost {
        peer,
        during_load: false,
    };
    let mut wire = match open(sh, stream, deadline) {
        Ok(wire) => wire,
        Err(None) => return lost,
        Err(Some(reason)) => return AgentEvent::Refused { peer, reason },
    };
    if let Err(e) = prove(&mut wire, &sh.cfg, deadline) {
        return match e {
            Unproved::Lost => lost,
            Unproved::Refused(reason) => refuse(&mut wire, peer, reason),
        };
    }
    drop(handshake);
    let Some(_slot) = Slot::take(&sh.coordinators, sh.cfg.limits.max_coordinators) else {
        let reason = format!(
            "busy: {} coordinators connected already",
            sh.cfg.limits.max_coordinators
        );
        return refuse(&mut wire, peer, reason);
    };
    wire.set_max_line_bytes(proto::MAX_COORDINATOR_LINE_BYTES);
    let welcome = FromAgent::Welcome {
        cpus: sh.cfg.cpus.clone(),
    };
    if wire.send(&welcome).is_err() {
        return lost;
    }
    (sh.on_event)(AgentEvent::Accepted { peer });
    coordinator(&mut wire, peer, sh)
}

/// The wire of a new connection: in TLS when the agent takes TLS only (its handshake by
/// `deadline`). `Err(None)`: the connection was lost; `Err(Some(why))`: it was refused.
fn open(sh: &Shared, stream: TcpStream, deadline: Instant) -> Result<Wire, Option<String>> {
    stream.set_nonblocking(false).map_err(|_| None)?;
    let first = first_byte(&stream, deadline);
    let Some(config) = &sh.tls else {
        let mut wire = Wire::new(stream, proto::MAX_HANDSHAKE_LINE_BYTES).map_err(|_| None)?;
        if first == Some(TLS_HANDSHAKE_RECORD) {
            // A TLS coordinator reads this as no TLS at all, and says so at once.
            let reason = "a TLS hello: this agent runs without --tls";
            return Err(Some(refuse_line(&mut wire, reason)));
        }
        return Ok(wire);
    };
    if first == Some(b'{') {
        // A coordinator in the clear reads this line; it would not understand an alert.
        let mut wire = Wire::new(stream, proto::MAX_HANDSHAKE_LINE_BYTES).map_err(|_| None)?;
        let reason = "this agent takes TLS only (it runs with --tls): add --client-tls";
        return Err(Some(refuse_line(&mut wire, reason)));
    }
    Wire::prepare(&stream).map_err(|_| None)?;
    match TlsStream::accept(stream, config.clone(), deadline) {
        Ok(tls) => Wire::tls(tls, proto::MAX_HANDSHAKE_LINE_BYTES).map_err(|_| None),
        Err(TlsError::Handshake(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Err(None),
        Err(e) => Err(Some(e.to_string())),
    }
}

/// The first byte of a TLS connection: a record of the handshake (RFC 8446, 5.1).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The first byte a connection sends by `deadline`, left unread; `None` if none came.
fn first_byte(stream: &TcpStream, deadline: Instant) -> Option<u8> {
    let left = deadline.saturating_duration_since(Instant::now());
    stream
        .set_read_timeout(Some(left.max(Duration::from_millis(1))))
        .ok()?;
    let mut first = [0u8; 1];
    match stream.peek(&mut first) {
        Ok(1) => Some(first[0]),
        _ => None,
    }
}

/// Sends a refusal on a wire that has not proved anything; the refusal's words.
fn refuse_line(wire: &mut Wire, reason: &str) -> String {
    let _ = wire.send(&FromAgent::Refused {
        reason: reason.into(),
    });
    reason.to_string()
}

fn refuse(wire: &mut Wire, peer: SocketAddr, reason: String) -> AgentEvent {
    let reason = refuse_line(wire, &reason);
    AgentEvent::Refused { peer, reason }
}

/// Why a handshake did not end in a proof.
enum Unproved {
    Lost,
    Refused(String),
}

/// The handshake: the coordinator's hello (its version and nonce), the agent's nonce and
/// proof, the coordinator's proof, every line by `deadline`.
fn prove(wire: &mut Wire, cfg: &AgentConfig, deadline: Instant) -> Result<(), Unproved> {
    let refused = |r: &str| Unproved::Refused(r.to_string());
    let recv_error = |e: RecvError| match e {
        RecvError::TimedOut => Unproved::Refused(format!(
            "no proof of the token within {} s",
            cfg.limits.handshake_timeout.as_secs_f64()
        )),
        RecvError::Bad(e) => Unproved::Refused(e),
        RecvError::Closed | RecvError::Io(_) => Unproved::Lost,
    };
    let line = wire.recv_line(Some(deadline)).map_err(recv_error)?;
    let greeting: Greeting = serde_json::from_slice(&line)
        .map_err(|e| Unproved::Refused(format!("bad message: {e}")))?;
    if greeting.msg != "hello" {
        return Err(refused("expected hello first"));
    }
    if greeting.version != Some(proto::VERSION) {
        return Err(Unproved::Refused(format!(
            "protocol version {}; this agent speaks {}: run the same smtlab release on both hosts",
            greeting.version.map_or("unknown".into(), |v| v.to_string()),
            proto::VERSION
        )));
    }
    let Ok(ToAgent::Hello { nonce, .. }) = serde_json::from_slice::<ToAgent>(&line) else {
        return Err(refused("bad hello: expected its version and nonce"));
    };
    let theirs = auth::decode_nonce(&nonce, "the coordinator's nonce")
        .map_err(|e| Unproved::Refused(e.to_string()))?;
    let ours = auth::nonce().map_err(|e| Unproved::Refused(e.to_string()))?;
    let challenge = FromAgent::Challenge {
        version: proto::VERSION,
        nonce: auth::encode(&ours),
        proof: auth::prove(&cfg.token, Role::Agent, &theirs, &ours),
    };
    // A peer that does not read cannot hold the agent past the deadline either.
    let left = deadline.saturating_duration_since(Instant::now());
    let _ = wire
        .stream()
        .set_write_timeout(Some(left.max(Duration::from_millis(1))));
    wire.send(&challenge).map_err(|_| Unproved::Lost)?;
    match wire
        .recv_by::<ToAgent>(Some(deadline))
        .map_err(recv_error)?
    {
        ToAgent::Proof { proof } => {
            if !auth::verify(&cfg.token, Role::Coordinator, &theirs, &ours, &proof) {
                return Err(refused("wrong token"));
            }
        }
        _ => return Err(refused("expected the proof of the token")),
    }
    let _ = wire.stream().set_write_timeout(Some(proto::WRITE_TIMEOUT));
    Ok(())
}

/// One coordinator that proved the token, from its first request to its last load; the
/// event that ended it.
fn coordinator(wire: &mut Wire, peer: SocketAddr, sh: &Shared) -> AgentEvent {
    let cfg = &sh.cfg;
    let lost = AgentEvent::Lost {
        peer,
        during_load: false,
    };
    let mut pool: Option<ClientPool> = None;
    let mut prepared: Option<Prepared> = None;
    loop {
        let msg = match wire.recv::<ToAgent>(Some(cfg.limits.idle_timeout)) {
            Ok(m) => m,
            Err(RecvError::Closed) => return AgentEvent::Closed { peer },
            Err(RecvError::TimedOut) => return refuse(wire, peer, "idle for too long".into()),
            Err(RecvError::Bad(e)) => return refuse(wire, peer, e),
            Err(RecvError::Io(_)) => return lost,
        };
        let reply = match msg {
            ToAgent::Hello { .. } | ToAgent::Proof { .. } => FromAgent::Failed {
                reason: "hello twice".into(),
            },
            ToAgent::Ping => FromAgent::Pong {
                unix_ns: proto::unix_ns(),
            },
            ToAgent::Prepare { spec } => {
                // The old load's descriptors are given back before the new one's count.
                prepared = None;
                match prepare(&spec, cfg, &sh.files, &mut pool) {
                    Ok(p) => {
                        let threads = p.load.threads;
                        prepared = Some(p);
                        FromAgent::Ready { threads }
                    }
                    Err(reason) => FromAgent::Failed { reason: reason.0 },
                }
            }
            ToAgent::Start { at_unix_ns } => match (prepared.take(), pool.as_ref()) {
                (Some(p), Some(pool)) => match start(wire, peer, pool, p, at_unix_ns, sh) {
                    Ok(reply) => reply,
                    Err(event) => return event,
                },
                _ => FromAgent::Failed {
                    reason: "start without a prepared load".into(),
                },
            },
        };
        if wire.send(&reply).is_err() {
            return lost;
        }
    }
}

/// Runs a prepared load; its reply, or the event that ends the connection.
fn start(
    wire: &mut Wire,
    peer: SocketAddr,
    pool: &ClientPool,
    p: Prepared,
    at_unix_ns: u64,
    sh: &Shared,
) -> Result<FromAgent, AgentEvent> {
    let (target, connections) = (p.load.addr, p.load.connections);
    match run(wire, pool, p, at_unix_ns) {
        Ran::Done(report, started) => {
            (sh.on_event)(AgentEvent::Load {
                peer,
                target,
                connections,
                requests: report.requests,
                requests_per_s: report.requests_per_s(),
                errors: report.error_count(),
            });
            Ok(match WireReport::from_report(&report, started) {
                Ok(r) => FromAgent::Done {
                    report: Box::new(r),
                },
                Err(e) => FromAgent::Failed {
                    reason: e.to_string(),
                },
            })
        }
        Ran::Failed(reason) => {
            (sh.on_event)(AgentEvent::LoadFailed {
                peer,
                reason: reason.clone(),
            });
            Ok(FromAgent::Failed { reason })
        }
        Ran::Lost => Err(AgentEvent::Lost {
            peer,
            during_load: true,
        }),
        Ran::Spoke => Err(refuse(
            wire,
            peer,
            "a message during a load: the load was stopped".into(),
        )),
    }
}

/// A load checked and ready to start, with the descriptors it may use.
struct Prepared {
    load: LoadConfig,
    mix: Arc<Mix>,
    _files: Files,
}

/// Checks a coordinator's load against the allow-list, the limits and the descriptors
/// free, and starts (or keeps) the load threads it needs.
fn prepare(
    spec: &LoadSpec,
    cfg: &AgentConfig,
    files: &Arc<FileBudget>,
    pool: &mut Option<ClientPool>,
) -> Result<Prepared, Refusal> {
    cfg.allow
        .check(&spec.target)
        .map_err(|e| Refusal(e.to_string()))?;
    spec.check_requests()?;
    let lim = &cfg.limits;
    if spec.connections == 0 || spec.connections > lim.max_connections {
        return proto::refuse(format!(
            "{} connections: this agent takes 1 to {}",
            spec.connections, lim.max_connections
        ));
    }
    let total = Duration::from_nanos(spec.duration_ns.saturating_add(spec.warmup_ns));
    if spec.duration_ns == 0 || total > lim.max_duration {
        return proto::refuse(format!(
            "a load of {:.1} s: this agent runs loads of more than 0 and at most {} s",
            total.as_secs_f64(),
            lim.max_duration.as_secs()
        ));
    }
    if spec.timeout_ns == 0 {
        return Err("request timeout 0: expected more than 0".into());
    }
    let threads = match spec.threads {
        0 => cfg.cpus.len().max(1),
        n => n,
    }
    .min(spec.connections);
    if threads > 1024 {
        return proto::refuse(format!(
            "{threads} load threads: this agent starts at most 1024"
        ));
    }
    // A connection each, and an epoll instance per thread.
    let files = files.reserve(spec.connections as u64 + threads as u64)?;
    let mix = Mix::weighted(&spec.requests, &spec.weights, &spec.host, spec.keep_alive)
        .map_err(|e| e.to_string())?;
    let mut load = LoadConfig::new(
        spec.target,
        spec.connections,
        Duration::from_nanos(spec.duration_ns),
    );
    load.host = spec.host.clone();
    load.threads = threads;
    load.warmup = Duration::from_nanos(spec.warmup_ns);
    // A request cannot wait longer than a load may last.
    load.timeout = Duration::from_nanos(spec.timeout_ns).min(lim.max_duration);
    load.rate_per_s = spec.rate_per_s;
    load.conn_bits_per_s = spec.conn_bits_per_s;
    load.keep_alive = spec.keep_alive;
    load.max_requests = spec.max_requests.min(lim.max_requests);
    load.seed = spec.seed;
    load.busy_poll = Duration::from_nanos(spec.busy_poll_ns.min(1_000_000_000));
    if pool.as_ref().is_none_or(|p| p.threads() < threads) {
        // The old threads end before the new ones start, so CPUs are not shared.
        *pool = None;
        let pin = if cfg.cpus.is_empty() {
            Pinning::Unpinned
        } else {
            Pinning::Cpus(&cfg.cpus)
        };
        *pool = Some(
            ClientPool::start(pin, threads)
                .map_err(|e| format!("cannot start {threads} load threads: {e}"))?,
        );
    }
    Ok(Prepared {
        load,
        mix: Arc::new(mix),
        _files: files,
    })
}

enum Ran {
    Done(Box<crate::LoadReport>, u64),
    Failed(String),
    /// The coordinator went away; the load was stopped (or never started).
    Lost,
    /// The coordinator sent something during the load: it was stopped.
    Spoke,
}

/// What a watch on the coordinator's connection saw before `finished`.
enum Seen {
    Finished,
    Lost,
    Spoke,
}

/// Watches the coordinator's connection until `finished()` (looked at every 10 ms, and
/// at `until` if sooner): a close or any byte from the coordinator ends the watch at once.
fn watch(wire: &mut Wire, until: Option<Instant>, finished: impl Fn() -> bool) -> Seen {
    if wire.has_pending() {
        return Seen::Spoke;
    }
    let fd = wire.stream().as_raw_fd();
    loop {
        if finished() {
            return Seen::Finished;
        }
        let tick = until.map_or(WATCH_TICK, |u| {
            u.saturating_duration_since(Instant::now()).min(WATCH_TICK)
        });
        match sys::wait_peer(fd, tick) {
            Ok(PeerState::Quiet) => {}
            Ok(PeerState::Readable) => return Seen::Spoke,
            Ok(PeerState::HungUp) | Err(_) => return Seen::Lost,
        }
    }
}

/// Waits for the start instant, runs the load, and watches the coordinator's connection
/// all the while: if it closes, or the coordinator sends anything, the load is not
/// started or is stopped (within the load threads' 50 ms tick).
fn run(wire: &mut Wire, pool: &ClientPool, p: Prepared, at_unix_ns: u64) -> Ran {
    let Prepared { mut load, mix, .. } = p;
    let now = proto::unix_ns();
    if at_unix_ns > now + MAX_START_AHEAD.as_nanos() as u64 {
        return Ran::Failed(format!(
            "start {:.1} s ahead of this agent's clock: more than {} s (clocks far apart?)",
            (at_unix_ns - now) as f64 / 1e9,
            MAX_START_AHEAD.as_secs()
        ));
    }
    // The start barrier: every agent waits for the same instant (its own clock's reading
    // of it); one already late starts at once.
    let start = Instant::now() + Duration::from_nanos(at_unix_ns.saturating_sub(now));
    match watch(wire, Some(start), || Instant::now() >= start) {
        Seen::Finished => {}
        Seen::Lost => return Ran::Lost,
        Seen::Spoke => return Ran::Spoke,
    }
    let stop = Arc::new(AtomicBool::new(false));
    load.stop = Some(stop.clone());
    let done = AtomicBool::new(false);
    let started = proto::unix_ns();
    let (result, seen) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let r = pool.run_allowed(&load, mix);
            done.store(true, Ordering::SeqCst);
            r
        });
        // Bounded by the load, which is bounded in time.
        let seen = watch(wire, None, || done.load(Ordering::SeqCst));
        stop.store(true, Ordering::SeqCst);
        (h.join(), seen)
    });
    match (seen, result) {
        (Seen::Lost, _) => Ran::Lost,
        (Seen::Spoke, _) => Ran::Spoke,
        (Seen::Finished, Ok(Ok(r))) => Ran::Done(Box::new(r), started),
        (Seen::Finished, Ok(Err(e))) => Ran::Failed(e.to_string()),
        (Seen::Finished, Err(_)) => Ran::Failed("a load thread panicked".into()),
    }
}
