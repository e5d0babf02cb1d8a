//! netperf-style tests (paper 004's netperf workload): `tcp-stream`, `tcp-rr`, `tcp-crr`
//! and `udp-rr` over loopback, one flow each, the server thread on the placement's CPUs
//! and the client thread on a client CPU.
//!
//! * `tcp-stream`: the client writes `size`-byte messages on one connection for
//!   `duration`; the server reads them. An iteration ends when the server has read every
//!   byte written, so the rate is what arrived. Gbit/s.
//! * `tcp-rr`: one connection; a transaction is a `request`-byte write answered by a
//!   `response`-byte write. Transactions per second and round-trip percentiles.
//! * `tcp-crr`: a transaction is connect, request, response, close. The client closes
//!   with an abortive reset (`SO_LINGER` 0), so no connection waits in TIME_WAIT: a
//!   loopback test at tens of thousands of connections a second would otherwise run out
//!   of ephemeral ports within seconds. netperf closes gracefully; the reset is cheaper
//!   than a FIN exchange, which the per-transaction figures include.
//! * `udp-rr`: `tcp-rr` over UDP datagrams. A datagram not answered within a second is a
//!   lost one and fails the sample (netperf would hang).
//!
//! netperf's confidence discipline (`-I 99,5 -i 10,3`): one sample runs iterations of
//! `duration` each, at least 3 and at most `max_iterations`, until the 99% confidence
//! interval of the iterations' rates is within +-2.5% of their mean. The sample's value
//! is all the work over all the iterations' time; `ci99_rel`, `ci_target_met` and
//! `iterations` go into its metrics. The runner's own 95% convergence over samples
//! applies on top. Service demand, as netperf reports it with `-c -C`: the server
//! thread's and the client thread's CPU time per transaction (`server_cpu_us_per_tx`,
//! `client_cpu_us_per_tx`), per KiB for `tcp-stream` (`*_cpu_us_per_kib`), read from
//! their thread CPU clocks, so nothing else on the machine is charged to them.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smtlab_bench::clock::{now_ns, thread_cpu_ns as own_cpu_ns};
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_model::stats::percentile_of_sorted;
use smtlab_model::{BenchInfo, CpuSet, Direction, ValueKind};

use super::common::{ci99_rel, loopback_listener, shutdown_listener, spawn_on, thread_cpu_ns};

/// netperf's `-I 99,5`: the interval's full width within 5%, i.e. +-2.5%.
pub const CI_TARGET_REL: f64 = 0.025;
const MIN_ITERATIONS: u64 = 3;
/// Round-trip times kept per sample for the distribution (evenly strided).
const MAX_SERIES_POINTS: usize = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Stream,
    Rr,
    Crr,
    UdpRr,
}

impl Kind {
    /// The parameter its table is read by: the message size of a stream, the request
    /// size of a request/response test.
    fn main_param(self) -> &'static str {
        match self {
            Kind::Stream => "size",
            Kind::Rr | Kind::Crr | Kind::UdpRr => "request",
        }
    }

    /// netperf's name of the test.
    fn netperf_test(self) -> &'static str {
        match self {
            Kind::Stream => "TCP_STREAM",
            Kind::Rr => "TCP_RR",
            Kind::Crr => "TCP_CRR",
            Kind::UdpRr => "UDP_RR",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Stream => "tcp-stream",
            Kind::Rr => "tcp-rr",
            Kind::Crr => "tcp-crr",
            Kind::UdpRr => "udp-rr",
        }
    }
}

pub struct Perf(pub Kind);

pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    [Kind::Stream, Kind::Rr, Kind::Crr, Kind::UdpRr]
        .into_iter()
        .map(|k| Box::new(Perf(k)) as Box<dyn Benchmark>)
        .collect()
}

use smtlab_bench::params::declare as param;

/// What one sample is made of.
#[derive(Debug, Clone, Copy)]
struct Config {
    duration: Duration,
    max_iterations: u64,
    size: usize,
    request: usize,
    response: usize,
}

impl Benchmark for Perf {
    fn info(&self) -> BenchInfo {
        let k = self.0;
        let mut params = vec![
            param(
                "duration",
                "500ms",
                Some("100ms"),
                "traffic per iteration (netperf -l), a time with its unit (100ms, 1s)",
            ),
            param(
                "max_iterations",
                "10",
                Some("3"),
                "most iterations per sample while the 99% interval is wider than +-2.5% (netperf -i)",
            ),
        ];
        let (unit, kind, what) = match k {
            Kind::Stream => {
                params.push(param(
                    "size",
                    "16KiB",
                    None,
                    "bytes per send call (netperf -m), 1 to 1 MiB",
                ));
                (
                    "Gbit/s",
                    ValueKind::Rate { scale: 1.25e8 },
                    "bulk TCP transfer over one loopback connection",
                )
            }
            _ => {
                params.push(param("request", "1", None, "request bytes (netperf -r)"));
                params.push(param("response", "1", None, "response bytes (netperf -r)"));
                (
                    "tx/s",
                    ValueKind::Rate { scale: 1.0 },
                    match k {
                        Kind::Rr => "TCP request/response transactions on one connection",
                        Kind::Crr => "TCP connect/request/response/close transactions",
                        _ => "UDP request/response transactions",
                    },
                )
            }
        };
        BenchInfo {
            name: k.name().into(),
            group: "net".into(),
            unit: unit.into(),
            direction: Direction::Higher,
            value_kind: kind,
            description: format!(
                "{what}; server on the placement, client apart; netperf's 99% +-2.5% iteration discipline"
            ),
            origin: format!("paper 004 (netperf); netperf -t {}", k.netperf_test()),
            params: params
                .into_iter()
                .chain(std::iter::once(crate::irq_param()))
                .collect(),
            main_param: Some(k.main_param().into()),
            report: smtlab_model::ReportSection::SpeedupTable {
                caption: format!("paper 004, netperf {}", k.netperf_test()),
            },
        }
    }

    fn client_side(&self) -> bool {
        true
    }

    /// A sample is 3 to `max_iterations` iterations of `duration` (netperf's own
    /// confidence loop): expected halfway from the least to the most, bounded by the
    /// most. How far a loop goes depends on how steady the host's loopback is: the
    /// default suite's four loopback rows took 4 to 7 passes of 10 on one host and, on a
    /// noisier one, the full 10 in 15 of 20 samples (a mean of 9.1).
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let pass_ns = (crate::any_duration_s(ctx.params)? * 1e9).round() as u64;
        let most = ctx.params.get_u64("max_iterations")?.max(1);
        let least = MIN_ITERATIONS.min(most);
        Ok(smtlab_bench::CellCost {
            sample_ns: Some(pass_ns.saturating_mul(least + most) / 2),
            longest_sample_ns: Some(pass_ns.saturating_mul(most)),
            ..crate::load_cost(0.0, 0.05)
        })
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let name = self.0.name();
        let p = ctx.params;
        let duration = p
            .get_duration_in(
                "duration",
                std::time::Duration::from_millis(1)..=std::time::Duration::from_secs(600),
            )?
            .as_millis() as u64;
        let max_iterations = p.get_u64_in("max_iterations", 1..=30, "1 to 30 iterations")?;
        let bytes = |key: &str, hi: u64, expected: &str| -> Result<usize, BenchError> {
            Ok(p.get_bytes_in(key, 1..=hi, expected)? as usize)
        };
        let (size, request, response) = match self.0 {
            Kind::Stream => (bytes("size", 1 << 20, "1 byte to 1 MiB")?, 0, 0),
            Kind::UdpRr => (
                0,
                bytes("request", 65_507, "1 to 65507 bytes (one datagram)")?,
                bytes("response", 65_507, "1 to 65507 bytes (one datagram)")?,
            ),
            _ => (
                0,
                bytes("request", 1 << 20, "1 byte to 1 MiB")?,
                bytes("response", 1 << 20, "1 byte to 1 MiB")?,
            ),
        };
        let cfg = Config {
            duration: Duration::from_millis(duration),
            max_iterations,
            size,
            request,
            response,
        };
        let client = ctx.client_side(name)?;
        let server = Server::start(self.0, &ctx.placement.cpu_set(), cfg)?;
        let addr = server.addr;
        let kind = self.0;
        let (cmd_tx, cmd_rx) = mpsc::channel::<Duration>();
        let (res_tx, res_rx) = mpsc::channel::<Result<ClientRun, String>>();
        let cpu = client.cpu_for_thread(0);
        let client_thread = client
            .spawn(&format!("{name}-client"), Some(cpu), move || {
                client_loop(kind, addr, cfg, &cmd_rx, &res_tx);
            })
            .map_err(|e| BenchError::io(name, "start the client thread", e))?;
        Ok(Box::new(PerfInstance {
            kind,
            cfg,
            server,
            commands: Some(cmd_tx),
            results: res_rx,
            client_thread: Some(client_thread),
            broken: None,
        }))
    }
}

// ---------------------------------------------------------------- server

struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Bytes the stream server has read so far.
    received: Arc<AtomicU64>,
    listener: Option<Arc<TcpListener>>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl Server {
    fn start(kind: Kind, cpus: &CpuSet, cfg: Config) -> Result<Server, BenchError> {
        let name = kind.name();
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let (st, rx) = (stop.clone(), received.clone());
        let thread_name = format!("{name}-server");
        let (addr, listener, thread) = if kind == Kind::UdpRr {
            let sock = UdpSocket::bind("127.0.0.1:0")
                .map_err(|e| BenchError::io(name, "bind a UDP socket on 127.0.0.1", e))?;
            let addr = sock
                .local_addr()
                .map_err(|e| BenchError::io(name, "read the UDP address", e))?;
            // Lets the loop see `stop` while no request comes.
            sock.set_read_timeout(Some(Duration::from_millis(100)))
                .map_err(|e| BenchError::io(name, "set a UDP timeout", e))?;
            let thread = spawn_on(cpus, thread_name, move || udp_server(&sock, &st, cfg));
            (addr, None, thread)
        } else {
            let listener = Arc::new(
                loopback_listener().map_err(|e| BenchError::io(name, "listen on 127.0.0.1", e))?,
            );
            let addr = listener
                .local_addr()
                .map_err(|e| BenchError::io(name, "read the listener address", e))?;
            let l = listener.clone();
            let thread = spawn_on(cpus, thread_name, move || match kind {
                Kind::Stream => stream_server(&l, &rx),
                Kind::Rr => rr_server(&l, cfg),
                _ => crr_server(&l, &st, cfg),
            });
            (addr, Some(listener), thread)
        };
        let thread = thread.map_err(|e| BenchError::io(name, "start the server thread", e))?;
        Ok(Server {
            addr,
            stop,
            received,
            listener,
            thread: Some(thread),
        })
    }

    fn cpu_ns(&self) -> u64 {
        self.thread.as_ref().and_then(thread_cpu_ns).unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(l) = &self.listener {
            shutdown_listener(l);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn stream_server(listener: &TcpListener, received: &AtomicU64) -> Result<(), String> {
    let (mut conn, _) = listener.accept().map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 256 << 10];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                received.fetch_add(n as u64, Ordering::Release);
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn rr_server(listener: &TcpListener, cfg: Config) -> Result<(), String> {
    let (mut conn, _) = listener.accept().map_err(|e| e.to_string())?;
    let _ = conn.set_nodelay(true);
    let mut req = vec![0u8; cfg.request];
    let resp = vec![0x5au8; cfg.response];
    while conn.read_exact(&mut req).is_ok() {
        conn.write_all(&resp).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn crr_server(listener: &TcpListener, stop: &AtomicBool, cfg: Config) -> Result<(), String> {
    let mut req = vec![0u8; cfg.request];
    let resp = vec![0x5au8; cfg.response];
    let mut rest = [0u8; 64];
    while !stop.load(Ordering::Acquire) {
        let Ok((mut conn, _)) = listener.accept() else {
            break;
        };
        let _ = conn.set_nodelay(true);
        if conn.read_exact(&mut req).is_err() || conn.write_all(&resp).is_err() {
            continue;
        }
        // Wait for the client's close, so the server does its side of the teardown.
        while matches!(conn.read(&mut rest), Ok(n) if n > 0) {}
    }
    Ok(())
}

fn udp_server(sock: &UdpSocket, stop: &AtomicBool, cfg: Config) -> Result<(), String> {
    let mut req = vec![0u8; cfg.request.max(1)];
    let resp = vec![0x5au8; cfg.response];
    while !stop.load(Ordering::Acquire) {
        match sock.recv_from(&mut req) {
            Ok((_, from)) => {
                sock.send_to(&resp, from).map_err(|e| e.to_string())?;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- client

/// What the client did in one iteration.
#[derive(Debug, Default)]
struct ClientRun {
    /// Transactions, or bytes written for `tcp-stream`.
    count: u64,
    cpu_ns: u64,
    /// Round-trip times of the transactions, in nanoseconds (request/response tests).
    rtt_ns: Vec<f64>,
}

fn client_loop(
    kind: Kind,
    addr: SocketAddr,
    cfg: Config,
    commands: &mpsc::Receiver<Duration>,
    results: &mpsc::Sender<Result<ClientRun, String>>,
) {
    let mut conn: Option<TcpStream> = None;
    let mut udp: Option<UdpSocket> = None;
    for duration in commands {
        let r = (|| -> Result<ClientRun, String> {
            match kind {
                Kind::Stream | Kind::Rr => {
                    if conn.is_none() {
                        let c = TcpStream::connect(addr)
                            .map_err(|e| format!("connect to {addr}: {e}"))?;
                        let _ = c.set_nodelay(true);
                        conn = Some(c);
                    }
                    let c = conn.as_mut().expect("connected above");
                    if kind == Kind::Stream {
                        stream_run(c, cfg, duration)
                    } else {
                        rr_run(c, cfg, duration)
                    }
                }
                Kind::Crr => crr_run(addr, cfg, duration),
                Kind::UdpRr => {
                    if udp.is_none() {
                        let s = UdpSocket::bind("127.0.0.1:0")
                            .map_err(|e| format!("bind a UDP socket: {e}"))?;
                        s.connect(addr)
                            .map_err(|e| format!("connect to {addr}: {e}"))?;
                        s.set_read_timeout(Some(Duration::from_secs(1)))
                            .map_err(|e| format!("set a UDP timeout: {e}"))?;
                        udp = Some(s);
                    }
                    udp_run(udp.as_ref().expect("bound above"), cfg, duration)
                }
            }
        })();
        if results.send(r).is_err() {
            break;
        }
    }
    if let Some(c) = conn {
        let _ = c.shutdown(Shutdown::Both);
    }
}

fn stream_run(c: &mut TcpStream, cfg: Config, duration: Duration) -> Result<ClientRun, String> {
    let buf = vec![0xa5u8; cfg.size];
    let cpu0 = own_cpu_ns();
    let end = now_ns() + duration.as_nanos() as u64;
    let mut sent = 0u64;
    while now_ns() < end {
        c.write_all(&buf).map_err(|e| format!("send: {e}"))?;
        sent += buf.len() as u64;
    }
    Ok(ClientRun {
        count: sent,
        cpu_ns: own_cpu_ns() - cpu0,
        rtt_ns: Vec::new(),
    })
}

fn rr_run(c: &mut TcpStream, cfg: Config, duration: Duration) -> Result<ClientRun, String> {
    let req = vec![0xa5u8; cfg.request];
    let mut resp = vec![0u8; cfg.response];
    timed_transactions(duration, |_| request_response(c, &req, &mut resp))
}

fn crr_run(addr: SocketAddr, cfg: Config, duration: Duration) -> Result<ClientRun, String> {
    let req = vec![0xa5u8; cfg.request];
    let mut resp = vec![0u8; cfg.response];
    timed_transactions(duration, |_| {
        let mut c = TcpStream::connect(addr).map_err(|e| format!("connect to {addr}: {e}"))?;
        let _ = c.set_nodelay(true);
        request_response(&mut c, &req, &mut resp)?;
        // Closed with a reset, leaving no TIME_WAIT entry (see the module overview).
        let _ = smtlab_loadgen::sys::reset_on_close(std::os::fd::AsRawFd::as_raw_fd(&c));
        Ok(())
    })
}

/// Runs `transaction` (handed how many completed before it) one after another until
/// `duration` has passed; the count, the client thread's CPU time and each round trip.
fn timed_transactions(
    duration: Duration,
    mut transaction: impl FnMut(usize) -> Result<(), String>,
) -> Result<ClientRun, String> {
    let cpu0 = own_cpu_ns();
    let end = now_ns() + duration.as_nanos() as u64;
    let mut rtt = Vec::new();
    loop {
        let t0 = now_ns();
        if t0 >= end {
            break;
        }
        transaction(rtt.len())?;
        rtt.push((now_ns() - t0) as f64);
    }
    Ok(ClientRun {
        count: rtt.len() as u64,
        cpu_ns: own_cpu_ns() - cpu0,
        rtt_ns: rtt,
    })
}

fn request_response(c: &mut TcpStream, req: &[u8], resp: &mut [u8]) -> Result<(), String> {
    c.write_all(req)
        .map_err(|e| format!("send a request: {e}"))?;
    c.read_exact(resp)
        .map_err(|e| format!("read a response: {e}"))
}

fn udp_run(s: &UdpSocket, cfg: Config, duration: Duration) -> Result<ClientRun, String> {
    let req = vec![0xa5u8; cfg.request];
    let mut resp = vec![0u8; cfg.response + 1];
    timed_transactions(duration, |done| {
        s.send(&req).map_err(|e| format!("send a request: {e}"))?;
        match s.recv(&mut resp) {
            Ok(n) if n == cfg.response => Ok(()),
            Ok(n) => Err(format!(
                "a response of {n} bytes where {} were due",
                cfg.response
            )),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Err(
                format!("no response within 1 s after {done} transactions: a datagram was lost"),
            ),
            Err(e) => Err(format!("read a response: {e}")),
        }
    })
}

// ---------------------------------------------------------------- instance

struct PerfInstance {
    kind: Kind,
    cfg: Config,
    server: Server,
    commands: Option<mpsc::Sender<Duration>>,
    results: mpsc::Receiver<Result<ClientRun, String>>,
    client_thread: Option<JoinHandle<()>>,
    broken: Option<String>,
}

struct Iteration {
    count: u64,
    elapsed_ns: u64,
    server_cpu_ns: u64,
    client_cpu_ns: u64,
    rtt_ns: Vec<f64>,
}

impl PerfInstance {
    fn iteration(&mut self) -> Result<Iteration, String> {
        let name = self.kind.name();
        let commands = self.commands.as_ref().expect("live until drop");
        let received0 = self.server.received.load(Ordering::Acquire);
        let server0 = self.server.cpu_ns();
        let t0 = now_ns();
        commands
            .send(self.cfg.duration)
            .map_err(|_| format!("{name}: the client thread has stopped"))?;
        let limit = self.cfg.duration + Duration::from_secs(30);
        let run = match self.results.recv_timeout(limit) {
            Ok(r) => r?,
            Err(_) => return Err("the client did not finish within its time".into()),
        };
        if self.kind == Kind::Stream {
            // The iteration ends when the server has read everything written.
            let want = received0 + run.count;
            let deadline = Instant::now() + Duration::from_secs(30);
            while self.server.received.load(Ordering::Acquire) < want {
                if Instant::now() > deadline {
                    return Err(format!(
                        "the server read {} of {} bytes sent",
                        self.server.received.load(Ordering::Acquire) - received0,
                        run.count
                    ));
                }
                std::thread::yield_now();
            }
        }
        let t1 = now_ns();
        if run.count == 0 {
            return Err("no transaction completed in the iteration".into());
        }
        Ok(Iteration {
            count: run.count,
            elapsed_ns: (t1 - t0).max(1),
            server_cpu_ns: self.server.cpu_ns().saturating_sub(server0),
            client_cpu_ns: run.cpu_ns,
            rtt_ns: run.rtt_ns,
        })
    }
}

impl Instance for PerfInstance {
    fn sample(&mut self, _iterations: u64) -> Result<RawSample, BenchError> {
        let name = self.kind.name();
        if let Some(e) = &self.broken {
            return Err(BenchError::check(name, e.clone()));
        }
        let mut its = Vec::new();
        let mut rates = Vec::new();
        let mut ci = None;
        while (its.len() as u64) < self.cfg.max_iterations {
            let it = match self.iteration() {
                Ok(it) => it,
                Err(e) => {
                    self.broken = Some(e.clone());
                    return Err(BenchError::check(name, e));
                }
            };
            rates.push(it.count as f64 / it.elapsed_ns as f64);
            its.push(it);
            ci = ci99_rel(&rates);
            if its.len() as u64 >= MIN_ITERATIONS.min(self.cfg.max_iterations)
                && ci.is_some_and(|c| c <= CI_TARGET_REL)
            {
                break;
            }
        }
        let count: u64 = its.iter().map(|i| i.count).sum();
        let elapsed_ns: u64 = its.iter().map(|i| i.elapsed_ns).sum();
        let server_cpu: u64 = its.iter().map(|i| i.server_cpu_ns).sum();
        let client_cpu: u64 = its.iter().map(|i| i.client_cpu_ns).sum();
        let mut raw = RawSample {
            elapsed_ns,
            work: count as f64,
            cpu_ns: Some(server_cpu),
            ..RawSample::default()
        };
        let m = &mut raw.metrics;
        m.insert("iterations".into(), its.len() as f64);
        if let Some(c) = ci {
            m.insert("ci99_rel".into(), c);
        }
        m.insert(
            "ci_target_met".into(),
            f64::from(u8::from(ci.is_some_and(|c| c <= CI_TARGET_REL))),
        );
        let (per, unit) = if self.kind == Kind::Stream {
            (count as f64 / 1024.0, "kib")
        } else {
            (count as f64, "tx")
        };
        for (side, cpu) in [("server", server_cpu), ("client", client_cpu)] {
            m.insert(format!("{side}_cpu_us_per_{unit}"), cpu as f64 / 1e3 / per);
            m.insert(format!("{side}_cpu_util"), cpu as f64 / elapsed_ns as f64);
        }
        if self.kind == Kind::Stream {
            m.insert("bytes".into(), count as f64);
            m.insert("message_bytes".into(), self.cfg.size as f64);
        } else {
            let mut all: Vec<f64> = its.iter().flat_map(|i| i.rtt_ns.iter().copied()).collect();
            all.sort_by(f64::total_cmp);
            m.insert("transactions".into(), count as f64);
            m.insert(
                "rtt_mean_ns".into(),
                all.iter().sum::<f64>() / all.len().max(1) as f64,
            );
            for (q, key) in [
                (50.0, "rtt_p50_ns"),
                (90.0, "rtt_p90_ns"),
                (99.0, "rtt_p99_ns"),
                (99.9, "rtt_p999_ns"),
            ] {
                if let Some(v) = percentile_of_sorted(&all, q) {
                    m.insert(key.into(), v);
                }
            }
            let stride = all.len().div_ceil(MAX_SERIES_POINTS).max(1);
            // Time order, not sorted: every stride-th transaction.
            let kept: Vec<f64> = its
                .iter()
                .flat_map(|i| i.rtt_ns.iter().copied())
                .step_by(stride)
                .collect();
            raw.series.insert("rtt_ns".into(), kept);
        }
        Ok(raw)
    }

    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }
}

impl Drop for PerfInstance {
    fn drop(&mut self) {
        // Closing the command channel ends the client thread, which closes its
        // connection; the server thread then sees EOF (or the listener shut down).
        self.commands.take();
        if let Some(t) = self.client_thread.take() {
            let _ = t.join();
        }
        self.server.stop.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::tests_support::run_quick;

    #[test]
    fn each_quick_form_runs_and_reports_its_discipline() {
        for k in [Kind::Stream, Kind::Rr, Kind::Crr, Kind::UdpRr] {
            let raws = run_quick(&Perf(k), &["duration=20ms"], 1);
            let raw = &raws[0];
            assert!(raw.work > 0.0, "{}", k.name());
            let its = raw.metrics["iterations"];
            assert!((1.0..=3.0).contains(&its), "{} {its}", k.name());
            assert!(raw.metrics.contains_key("ci_target_met"));
            // The names the report reads (`smtlab_model::metrics::net`).
            let key = if k == Kind::Stream {
                smtlab_model::metrics::net::SERVER_CPU_US_PER_KIB
            } else {
                smtlab_model::metrics::net::SERVER_CPU_US_PER_TX
            };
            assert!(raw.metrics[key] > 0.0, "{} {key}", k.name());
            if k != Kind::Stream {
                assert_eq!(raw.metrics["transactions"], raw.work);
                assert!(
                    raw.metrics["rtt_p50_ns"]
                        <= raw.metrics[smtlab_model::metrics::net::RTT_P99_NS]
                );
                assert!(!raw.series["rtt_ns"].is_empty());
            }
        }
    }

    #[test]
    fn the_plan_expects_half_the_confidence_loop_and_bounds_it_at_the_most() {
        use crate::db::testutil;
        let place = testutil::placement(&[0]);
        let cost = |given: &[(&str, &str)]| testutil::cost(&Perf(Kind::Rr), given, &place);
        let c = cost(&[("duration", "300ms"), ("max_iterations", "12")]).unwrap();
        // 3 to 12 passes of 0.3 s: 7.5 expected, 12 at the longest.
        assert_eq!(c.sample_ns, Some(2_250_000_000));
        assert_eq!(c.longest_sample_ns, Some(3_600_000_000));
        // A loop of one pass takes one.
        let c = cost(&[("duration", "300ms"), ("max_iterations", "1")]).unwrap();
        assert_eq!(
            (c.sample_ns, c.longest_sample_ns),
            (Some(300_000_000), Some(300_000_000))
        );
    }

    #[test]
    fn stream_counts_every_byte_once() {
        let raws = run_quick(&Perf(Kind::Stream), &["duration=10ms", "size=1000"], 2);
        for raw in raws {
            // Whole messages only: the server read exactly what was written.
            assert_eq!(raw.work % 1000.0, 0.0);
            assert_eq!(raw.metrics["bytes"], raw.work);
        }
    }
}
