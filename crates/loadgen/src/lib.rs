//! # smtlab-loadgen
//!
//! smtlab's HTTP load generator, used by `smtlab load` (alone, like wrk) and by the web
//! workloads (driving a server from the client side the runner hands them).
//!
//! * **Threads**: each client thread is pinned ([`Pinning`]: the workload's
//!   [`ClientSide`], a CPU list, or none) and runs its share of the connections on one
//!   epoll instance with non-blocking sockets (see [`engine`](crate) internals: two
//!   system calls per kept-alive request in the steady state).
//! * **Connections**: HTTP/1.1 keep-alive, or HTTP/1.0 with one connection per request
//!   as SPECweb96 clients do.
//! * **Loops**: closed (each connection has one outstanding request and sends the next
//!   as soon as the answer is in) or open (`rate_per_s`: requests are *scheduled* at a
//!   fixed rate; a late answer makes the next request late, and its latency counts from
//!   its scheduled time, the coordinated-omission correction wrk2 makes, so a server
//!   that stalls shows the stall in the high percentiles). A per-connection bit-rate
//!   cap paces each connection as SPECweb99 clients do.
//! * **Checks**: every response is parsed (Content-Length, chunked, or until the close);
//!   a status outside 2xx, a body shorter or longer
//!   than its Content-Length or than the size the request expects, a close before the
//!   head is complete, a reset, a timeout are errors, counted by [`ErrorKind`] (never
//!   as throughput).
//! * **Results**: a [`LoadReport`] with good requests and bytes over the measured window
//!   (after a warm-up), HDR-histogram latency percentiles, and per-connection bytes and
//!   errors (SPECweb99-style conformance: [`LoadReport::conforming`]).
//!
//! Every load is bounded in time (`duration`) and in requests (`max_requests`).
//!
//! [`sys`] holds the socket and epoll system calls of smtlab's network code, this crate's
//! and the workloads' servers alike, each `unsafe` call made once there.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use smtlab_bench::client::ClientSide;
use smtlab_placement::workers::{Job, Workers};

mod engine;
pub mod http;
pub mod remote;
mod stats;
pub mod sys;

pub use http::{ErrorKind, RequestSpec};
pub use stats::{ConnStats, LoadReport, Percentiles};

/// What one load does.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub addr: SocketAddr,
    /// The Host header.
    pub host: String,
    pub connections: usize,
    pub threads: usize,
    /// Measured time, after the warm-up.
    pub duration: Duration,
    /// Time at the start whose responses are not counted (errors are).
    pub warmup: Duration,
    /// Open loop: requests per second over all connections. `None`: closed loop.
    pub rate_per_s: Option<f64>,
    /// Most bits per second each connection may receive (SPECweb99 pacing).
    pub conn_bits_per_s: Option<f64>,
    pub keep_alive: bool,
    /// A request without a complete answer after this long is a timeout error.
    pub timeout: Duration,
    /// Most requests started, over all threads.
    pub max_requests: u64,
    pub seed: u64,
    /// After a turn of the event loop that found work, how long a client thread keeps
    /// polling before it sleeps. A sleeping client is woken by the server's CPU for each
    /// response (on loopback that wake-up, an inter-processor interrupt, is paid by the
    /// server), so on a CPU of its own the client should not sleep while answers keep
    /// coming. Zero when the client shares CPUs or cores with the server: its polling
    /// would take their time.
    pub busy_poll: Duration,
    /// Set by another thread to end the load early (a remote agent whose coordinator
    /// went away): the threads stop within 50 ms and report what they counted.
    pub stop: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl LoadConfig {
    /// A closed-loop keep-alive load of `connections` on one thread for `duration`.
    pub fn new(addr: SocketAddr, connections: usize, duration: Duration) -> LoadConfig {
        LoadConfig {
            addr,
            host: addr.to_string(),
            connections,
            threads: 1,
            duration,
            warmup: Duration::ZERO,
            rate_per_s: None,
            conn_bits_per_s: None,
            keep_alive: true,
            timeout: Duration::from_secs(10),
            max_requests: u64::MAX,
            seed: 1,
            busy_poll: Duration::ZERO,
            stop: None,
        }
    }
}

/// Where the client threads run.
#[derive(Debug, Clone, Copy)]
pub enum Pinning<'a> {
    /// A workload's client side: thread i on its CPU `cpu_for_thread(i)`, started from
    /// its spawner (outside the server's counters).
    Client(&'a ClientSide),
    /// Thread i on `cpus[i % len]`.
    Cpus(&'a [u32]),
    /// Where the scheduler puts them.
    Unpinned,
}

/// Why a load could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("bad load settings: {0}")]
    Config(String),
    // Not a `source`: the message says it already, so it is printed once.
    #[error("bad load settings: {0}")]
    NotLocal(NotLocal),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("a load thread failed: {0}")]
    Thread(String),
}

/// A small, fast generator (xorshift64*): request choice only, never security.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Below `n` (0 when `n` is 0); the modulo's bias is negligible for the small `n`
    /// of a workload's choices.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }
}

/// The requests a load sends, rendered for its connection mode, and how often each.
#[derive(Debug, Clone)]
pub struct Mix {
    pub(crate) rendered: Vec<http::Rendered>,
    /// Cumulative weights, normalised to end at 1.
    cdf: Vec<f64>,
}

impl Mix {
    /// `specs` with relative `weights` (same length, non-negative, not all zero).
    pub fn weighted(
        specs: &[RequestSpec],
        weights: &[f64],
        host: &str,
        keep_alive: bool,
    ) -> Result<Mix, LoadError> {
        if specs.is_empty() || specs.len() != weights.len() {
            return Err(LoadError::Config(format!(
                "{} requests with {} weights",
                specs.len(),
                weights.len()
            )));
        }
        if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
            return Err(LoadError::Config(
                "request weights must be finite and >= 0".into(),
            ));
        }
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return Err(LoadError::Config("request weights are all 0".into()));
        }
        let mut acc = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Ok(Mix {
            rendered: specs
                .iter()
                .map(|s| http::render(s, host, keep_alive))
                .collect(),
            cdf,
        })
    }

    /// One request, sent every time.
    pub fn single(spec: RequestSpec, host: &str, keep_alive: bool) -> Mix {
        Mix::weighted(&[spec], &[1.0], host, keep_alive).expect("one weighted request")
    }

    pub(crate) fn choose(&self, rng: &mut Rng) -> usize {
        if self.cdf.len() == 1 {
            return 0;
        }
        let u = rng.next_f64();
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}

/// Whether `addr` is this host's: loopback, or an address of one of its interfaces (a
/// network namespace's own). Load is never sent anywhere else.
pub fn check_local(addr: &SocketAddr) -> Result<(), NotLocal> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    if !addr.ip().is_unspecified() && std::net::UdpSocket::bind((addr.ip(), 0)).is_ok() {
        return Ok(());
    }
    Err(NotLocal { addr: *addr })
}

/// An address [`check_local`] refused: not loopback, not one of this host's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{addr} is not an address of this host: smtlab sends load only to loopback \
     (127.0.0.0/8, ::1) or to an address of this host's interfaces"
)]
pub struct NotLocal {
    pub addr: SocketAddr,
}

/// Client threads that live across loads: started once (for a workload, from its
/// [`ClientSide`] spawner, so the server's counters never see them), then given one
/// load after another.
#[derive(Debug, Default)]
pub struct ClientPool {
    workers: Workers<Job>,
}

impl ClientPool {
    /// Starts `threads` pinned client threads.
    pub fn start(pin: Pinning<'_>, threads: usize) -> Result<ClientPool, LoadError> {
        if threads == 0 {
            return Err(LoadError::Config("a load needs at least 1 thread".into()));
        }
        let mut pool = ClientPool::default();
        for t in 0..threads {
            let name = format!("smtlab-load-{t}");
            let spawn = |body: Job| match pin {
                Pinning::Client(c) => c.spawn(&name, Some(c.cpu_for_thread(t)), body),
                Pinning::Cpus(cpus) if !cpus.is_empty() => {
                    smtlab_placement::pin::spawn_pinned(Some(cpus[t % cpus.len()]), name, body)
                }
                _ => std::thread::Builder::new().name(name).spawn(body),
            };
            pool.workers.add(spawn, |jobs| {
                // The kernel may otherwise end this thread's timed waits up to 50 us
                // late (timer slack), lateness an open loop would count as latency.
                // SAFETY: prctl with integer arguments, for the calling thread only.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, libc::c_ulong::from(1u8)) };
                jobs.into_iter().for_each(|job: Job| job());
            })?;
        }
        Ok(pool)
    }

    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// Runs one load on the first `cfg.threads` threads and merges what they counted.
    pub fn run(&self, cfg: &LoadConfig, mix: Arc<Mix>) -> Result<LoadReport, LoadError> {
        check(cfg)?;
        self.run_checked(cfg, mix)
    }

    /// [`ClientPool::run`] for a target already checked by the caller (a remote agent's
    /// allow-list), the settings checked here.
    pub(crate) fn run_allowed(
        &self,
        cfg: &LoadConfig,
        mix: Arc<Mix>,
    ) -> Result<LoadReport, LoadError> {
        check_settings(cfg)?;
        self.run_checked(cfg, mix)
    }

    fn run_checked(&self, cfg: &LoadConfig, mix: Arc<Mix>) -> Result<LoadReport, LoadError> {
        if cfg.threads > self.threads() {
            return Err(LoadError::Config(format!(
                "{} load threads asked of a pool of {}",
                cfg.threads,
                self.threads()
            )));
        }
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let mut first = 0;
        for t in 0..cfg.threads {
            let conns =
                cfg.connections / cfg.threads + usize::from(t < cfg.connections % cfg.threads);
            let plan = engine::ThreadPlan {
                addr: cfg.addr,
                conns,
                rate_per_s: cfg
                    .rate_per_s
                    .map(|r| r * conns as f64 / cfg.connections as f64),
                conn_bits_per_s: cfg.conn_bits_per_s,
                keep_alive: cfg.keep_alive,
                duration_ns: (cfg.duration + cfg.warmup).as_nanos() as u64,
                warmup_ns: cfg.warmup.as_nanos() as u64,
                timeout_ns: cfg.timeout.as_nanos() as u64,
                max_requests: cfg.max_requests / cfg.threads as u64
                    + u64::from((t as u64) < cfg.max_requests % cfg.threads as u64),
                seed: cfg.seed.wrapping_add(t as u64 * 7919),
                first_conn: first,
                busy_poll_ns: cfg.busy_poll.as_nanos() as u64,
                stop: cfg.stop.clone(),
            };
            first += conns;
            let (mix, done) = (mix.clone(), done_tx.clone());
            let job: Job = Box::new(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    engine::Engine::new(plan, &mix)?.run()
                }));
                let _ = done.send(r);
            });
            if !self.workers.send(t, job) {
                return Err(LoadError::Thread("a client thread has stopped".into()));
            }
        }
        drop(done_tx);
        let mut parts = Vec::with_capacity(cfg.threads);
        let mut first_err = None;
        for r in done_rx {
            match r {
                Ok(Ok(p)) => parts.push(p),
                Ok(Err(e)) => first_err = first_err.or(Some(LoadError::Io(e))),
                Err(_) => first_err = first_err.or(Some(LoadError::Thread("panicked".into()))),
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        if parts.len() != cfg.threads {
            return Err(LoadError::Thread("a client thread has stopped".into()));
        }
        Ok(LoadReport::merge(parts))
    }
}

fn check(cfg: &LoadConfig) -> Result<(), LoadError> {
    check_settings(cfg)?;
    check_local(&cfg.addr).map_err(LoadError::NotLocal)
}

/// Everything [`check`] checks but the target.
fn check_settings(cfg: &LoadConfig) -> Result<(), LoadError> {
    if cfg.connections == 0 || cfg.threads == 0 {
        return Err(LoadError::Config(
            "connections and threads must be at least 1".into(),
        ));
    }
    if cfg.threads > cfg.connections {
        return Err(LoadError::Config(format!(
            "{} threads for {} connections: every thread needs a connection",
            cfg.threads, cfg.connections
        )));
    }
    if let Some(r) = cfg.rate_per_s
        && !(r.is_finite() && r > 0.0)
    {
        return Err(LoadError::Config(format!("rate {r}: expected > 0")));
    }
    if let Some(r) = cfg.conn_bits_per_s
        && !(r.is_finite() && r > 0.0)
    {
        return Err(LoadError::Config(format!(
            "per-connection rate {r}: expected > 0"
        )));
    }
    Ok(())
}

/// Runs one load on threads started for it and merges what they counted.
pub fn run(cfg: &LoadConfig, mix: Arc<Mix>, pin: Pinning<'_>) -> Result<LoadReport, LoadError> {
    check(cfg)?;
    ClientPool::start(pin, cfg.threads)?.run(cfg, mix)
}

#[cfg(test)]
mod tests;
