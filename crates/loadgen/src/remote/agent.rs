//! The agent: listens for coordinators, checks their token, runs the loads they ask for
//! on its own pinned threads, and answers what it counted.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use subtle::ConstantTimeEq;

use smtlab_placement::Token;

use super::allow::AllowList;
use super::proto::{self, FromAgent, LoadSpec, RecvError, ToAgent, Wire, WireReport};
use crate::{ClientPool, LoadConfig, Mix, Pinning, RequestSpec};

/// What an agent accepts.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub token: Token,
    pub allow: AllowList,
    /// Its load threads' CPUs (thread i on `cpus[i % len]`); empty: unpinned.
    pub cpus: Vec<u32>,
    pub limits: AgentLimits,
}

/// What one load of a coordinator may ask for at most.
#[derive(Debug, Clone, Copy)]
pub struct AgentLimits {
    /// Warm-up and measured time together.
    pub max_duration: Duration,
    pub max_connections: usize,
    /// Requests started in one load.
    pub max_requests: u64,
    /// Coordinators connected at once (each interleaved cell of a run holds one).
    pub max_coordinators: usize,
    /// A coordinator silent this long between loads is dropped.
    pub idle_timeout: Duration,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_duration: Duration::from_secs(600),
            max_connections: 100_000,
            max_requests: 1_000_000_000,
            max_coordinators: 16,
            idle_timeout: Duration::from_secs(3600),
        }
    }
}

/// What happened, for the caller to show (the agent never prints).
#[derive(Debug, Clone)]
pub enum AgentEvent {
    Accepted {
        peer: SocketAddr,
    },
    Refused {
        peer: SocketAddr,
        reason: String,
    },
    Load {
        peer: SocketAddr,
        target: SocketAddr,
        connections: usize,
        requests: u64,
        requests_per_s: f64,
        errors: u64,
    },
    LoadFailed {
        peer: SocketAddr,
        reason: String,
    },
    /// The coordinator's connection dropped; `during_load`: its load was stopped.
    Lost {
        peer: SocketAddr,
        during_load: bool,
    },
    Closed {
        peer: SocketAddr,
    },
}

impl std::fmt::Display for AgentEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentEvent::Accepted { peer } => write!(f, "{peer}: coordinator accepted"),
            AgentEvent::Refused { peer, reason } => write!(f, "{peer}: refused: {reason}"),
            AgentEvent::Load {
                peer,
                target,
                connections,
                requests,
                requests_per_s,
                errors,
            } => write!(
                f,
                "{peer}: load on {target}: {connections} connections, {requests} requests, \
                 {requests_per_s:.0} req/s, {errors} errors"
            ),
            AgentEvent::LoadFailed { peer, reason } => write!(f, "{peer}: load failed: {reason}"),
            AgentEvent::Lost { peer, during_load } => {
                if *during_load {
                    write!(f, "{peer}: coordinator gone during a load: load stopped")
                } else {
                    write!(f, "{peer}: coordinator gone")
                }
            }
            AgentEvent::Closed { peer } => write!(f, "{peer}: coordinator done"),
        }
    }
}

/// How long a coordinator has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// The latest a start may be asked for, ahead of the agent's clock.
const MAX_START_AHEAD: Duration = Duration::from_secs(10);

type OnEvent = Arc<dyn Fn(AgentEvent) + Send + Sync>;

/// Serves coordinators on `listener` until `stop` is set (checked every 50 ms), each
/// on a thread of its own, at most `limits.max_coordinators` at once.
pub fn serve(
    listener: TcpListener,
    cfg: AgentConfig,
    stop: &AtomicBool,
    on_event: OnEvent,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let cfg = Arc::new(cfg);
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let (stream, peer) = match listener.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // A connection that failed before it was accepted (reset): the next one.
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => return Err(e),
        };
        // A connection that cannot be made blocking is dropped, the agent goes on.
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        let (cfg, active, on_event) = (cfg.clone(), active.clone(), on_event.clone());
        if active.fetch_add(1, Ordering::SeqCst) >= cfg.limits.max_coordinators {
            active.fetch_sub(1, Ordering::SeqCst);
            let reason = format!(
                "busy: {} coordinators connected already",
                cfg.limits.max_coordinators
            );
            if let Ok(mut w) = Wire::new(stream) {
                let _ = w.send(&FromAgent::Refused {
                    reason: reason.clone(),
                });
            }
            on_event(AgentEvent::Refused { peer, reason });
            continue;
        }
        let spawned = std::thread::Builder::new()
            .name("smtlab-agent-conn".into())
            .spawn(move || {
                let event = coordinator(stream, peer, &cfg, &*on_event);
                active.fetch_sub(1, Ordering::SeqCst);
                on_event(event);
            });
        spawned?;
    }
    Ok(())
}

/// One coordinator from hello to its last load; the event that ended it.
fn coordinator(
    stream: TcpStream,
    peer: SocketAddr,
    cfg: &AgentConfig,
    on_event: &dyn Fn(AgentEvent),
) -> AgentEvent {
    let Ok(mut wire) = Wire::new(stream) else {
        return AgentEvent::Lost {
            peer,
            during_load: false,
        };
    };
    let refuse = |wire: &mut Wire, reason: String| {
        let _ = wire.send(&FromAgent::Refused {
            reason: reason.clone(),
        });
        AgentEvent::Refused { peer, reason }
    };
    match wire.recv::<ToAgent>(Some(HELLO_TIMEOUT)) {
        Ok(ToAgent::Hello { version, token }) => {
            // Compared in constant time, so the time to refuse tells nothing about how
            // much of a guess was right (a length difference ends it at once).
            let good: bool = token.as_bytes().ct_eq(cfg.token.secret().as_bytes()).into();
            if !good {
                return refuse(&mut wire, "wrong token".into());
            }
            if version != proto::VERSION {
                return refuse(
                    &mut wire,
                    format!(
                        "protocol version {version}; this agent speaks {}",
                        proto::VERSION
                    ),
                );
            }
        }
        Ok(_) => return refuse(&mut wire, "expected hello first".into()),
        Err(RecvError::TimedOut) => return refuse(&mut wire, "no hello within 10 s".into()),
        Err(RecvError::Bad(e)) => return refuse(&mut wire, e),
        Err(_) => {
            return AgentEvent::Lost {
                peer,
                during_load: false,
            };
        }
    }
    if wire
        .send(&FromAgent::Welcome {
            version: proto::VERSION,
            cpus: cfg.cpus.clone(),
        })
        .is_err()
    {
        return AgentEvent::Lost {
            peer,
            during_load: false,
        };
    }
    on_event(AgentEvent::Accepted { peer });
    let mut pool: Option<ClientPool> = None;
    let mut prepared: Option<(LoadConfig, Arc<Mix>)> = None;
    loop {
        let msg = match wire.recv::<ToAgent>(Some(cfg.limits.idle_timeout)) {
            Ok(m) => m,
            Err(RecvError::Closed) => return AgentEvent::Closed { peer },
            Err(RecvError::TimedOut) => {
                return refuse(&mut wire, "idle for too long".into());
            }
            Err(RecvError::Bad(e)) => return refuse(&mut wire, e),
            Err(RecvError::Io(_)) => {
                return AgentEvent::Lost {
                    peer,
                    during_load: false,
                };
            }
        };
        let reply = match msg {
            ToAgent::Hello { .. } => FromAgent::Failed {
                reason: "hello twice".into(),
            },
            ToAgent::Ping => FromAgent::Pong {
                unix_ns: proto::unix_ns(),
            },
            ToAgent::Prepare { spec } => match prepare(&spec, cfg, &mut pool) {
                Ok((load, mix)) => {
                    let threads = load.threads;
                    prepared = Some((load, mix));
                    FromAgent::Ready { threads }
                }
                Err(reason) => {
                    prepared = None;
                    FromAgent::Failed { reason }
                }
            },
            ToAgent::Start { at_unix_ns } => match (prepared.take(), pool.as_ref()) {
                (Some((load, mix)), Some(pool)) => {
                    let (target, connections) = (load.addr, load.connections);
                    match run(&wire, pool, load, mix, at_unix_ns) {
                        Ran::Done(report, started) => {
                            on_event(AgentEvent::Load {
                                peer,
                                target,
                                connections,
                                requests: report.requests,
                                requests_per_s: report.requests_per_s(),
                                errors: report.error_count(),
                            });
                            match WireReport::from_report(&report, started) {
                                Ok(r) => FromAgent::Done {
                                    report: Box::new(r),
                                },
                                Err(e) => FromAgent::Failed {
                                    reason: e.to_string(),
                                },
                            }
                        }
                        Ran::Failed(reason) => {
                            on_event(AgentEvent::LoadFailed {
                                peer,
                                reason: reason.clone(),
                            });
                            FromAgent::Failed { reason }
                        }
                        Ran::Lost => {
                            return AgentEvent::Lost {
                                peer,
                                during_load: true,
                            };
                        }
                    }
                }
                _ => FromAgent::Failed {
                    reason: "start without a prepared load".into(),
                },
            },
        };
        if wire.send(&reply).is_err() {
            return AgentEvent::Lost {
                peer,
                during_load: false,
            };
        }
    }
}

/// Checks a coordinator's load against the allow-list and the limits, and starts (or
/// keeps) the load threads it needs.
fn prepare(
    spec: &LoadSpec,
    cfg: &AgentConfig,
    pool: &mut Option<ClientPool>,
) -> Result<(LoadConfig, Arc<Mix>), String> {
    cfg.allow.check(&spec.target)?;
    let lim = &cfg.limits;
    if spec.connections == 0 || spec.connections > lim.max_connections {
        return Err(format!(
            "{} connections: this agent takes 1 to {}",
            spec.connections, lim.max_connections
        ));
    }
    let total = Duration::from_nanos(spec.duration_ns.saturating_add(spec.warmup_ns));
    if spec.duration_ns == 0 || total > lim.max_duration {
        return Err(format!(
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
        return Err(format!(
            "{threads} load threads: this agent starts at most 1024"
        ));
    }
    let requests: Vec<RequestSpec> = spec.requests.iter().cloned().map(Into::into).collect();
    let mix = Mix::weighted(&requests, &spec.weights, &spec.host, spec.keep_alive)
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
    Ok((load, Arc::new(mix)))
}

enum Ran {
    Done(Box<crate::LoadReport>, u64),
    Failed(String),
    /// The coordinator went away; the load was stopped.
    Lost,
}

/// Waits for the start instant, runs the load, and watches the coordinator's connection
/// meanwhile: if it drops, the load stops within 50 ms.
fn run(
    wire: &Wire,
    pool: &ClientPool,
    mut load: LoadConfig,
    mix: Arc<Mix>,
    at_unix_ns: u64,
) -> Ran {
    let now = proto::unix_ns();
    if at_unix_ns > now + MAX_START_AHEAD.as_nanos() as u64 {
        return Ran::Failed(format!(
            "start {:.1} s ahead of this agent's clock: more than {} s (clocks far apart?)",
            (at_unix_ns - now) as f64 / 1e9,
            MAX_START_AHEAD.as_secs()
        ));
    }
    // The start barrier: every agent sleeps to the same instant (its own clock's
    // reading of it); one already late starts at once.
    if at_unix_ns > now {
        std::thread::sleep(Duration::from_nanos(at_unix_ns - now));
    }
    let stop = Arc::new(AtomicBool::new(false));
    load.stop = Some(stop.clone());
    let done = AtomicBool::new(false);
    let started = proto::unix_ns();
    let stream = wire.stream();
    let (result, lost) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let r = pool.run_allowed(&load, mix);
            done.store(true, Ordering::SeqCst);
            r
        });
        let mut lost = false;
        let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
        let mut probe = [0u8; 1];
        // Bounded by the load, which is bounded in time.
        while !done.load(Ordering::SeqCst) {
            match stream.peek(&mut probe) {
                Ok(0) => {
                    lost = true;
                    stop.store(true, Ordering::SeqCst);
                    break;
                }
                // The coordinator spoke early: read after the load.
                Ok(_) => std::thread::sleep(Duration::from_millis(50)),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => {
                    lost = true;
                    stop.store(true, Ordering::SeqCst);
                    break;
                }
            }
        }
        (h.join(), lost)
    });
    if lost {
        return Ran::Lost;
    }
    match result {
        Ok(Ok(r)) => Ran::Done(Box::new(r), started),
        Ok(Err(e)) => Ran::Failed(e.to_string()),
        Err(_) => Ran::Failed("a load thread panicked".into()),
    }
}
