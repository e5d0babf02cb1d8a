//! `tbench`: the network side of the dbench load (paper 001 Table 6), without a file
//! system.
//!
//! N clients on the client side each hold one loopback TCP connection to a server on the
//! placement's CPUs, which gives every connection its own thread (as `tbench_srv` forks a
//! process per client). Each client walks the load file; per operation it sends a
//! request of the size an SMB client would send for it and the server answers with the
//! size the SMB server would answer (a 39-byte SMB header plus the operation's
//! parameters and data: a `WriteX` carries its data in the request, a `ReadX` in the
//! reply, a `FIND_FIRST` 90 bytes per entry found; the sizes follow dbench's tbench).
//! Every message starts with its own length and the reply length asked for; a reply of
//! another length is a lost sync and fails the sample.
//!
//! A sample is `duration` milliseconds of this; the value is MB/s (10^6 bytes) of the
//! load's `WriteX` sizes and `ReadX` returned sizes, as tbench counts them, with
//! operations/s and per-operation round-trip percentiles as metrics.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use smtlab_bench::clock::now_ns;
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample, Suite, SweepCell};
use smtlab_model::{BenchInfo, CpuSet, Direction, Topology, ValueKind};

use super::common::{Acceptor, spawn_on};
use crate::dbench::load::{LoadFile, Op};
use crate::dbench::replay::Stats;
use crate::dbench::{
    Clients, Work, clients_and_duration, clients_sweep, load_for, load_params, load_sample,
    replay_sample,
};

const NAME: &str = "tbench";
/// The SMB header every request and reply carries.
const SMB: u32 = 39;

pub struct Tbench;

/// Request and reply sizes of one operation, and the bytes tbench counts for it;
/// `None` for operations that send nothing (`Deltree`).
pub fn packet_sizes(op: &Op) -> Option<(u32, u32, u64)> {
    let name = |p: &str| 2 * p.len() as u32;
    Some(match op {
        Op::Unlink { path } | Op::Mkdir { path } | Op::Rmdir { path } => {
            (SMB + 4 + name(path), SMB, 0)
        }
        Op::NtCreateX { path, .. } => (74 + name(path), SMB + 48, 0),
        Op::WriteX(t) => (SMB + 20 + t.size, SMB + 16, t.size as u64),
        Op::ReadX(t) => (SMB + 20, SMB + 20 + t.ret, t.ret as u64),
        Op::Close { .. } => (SMB + 8, SMB, 0),
        Op::Rename { from, to } => (SMB + 8 + name(from) + name(to), SMB, 0),
        Op::Flush { .. } => (SMB + 2, SMB, 0),
        Op::QueryPath { path } => (SMB + 16 + name(path), SMB + 32, 0),
        Op::QueryFile { .. } | Op::QueryFs => (SMB + 20, SMB + 32, 0),
        Op::FindFirst { pattern, count, .. } => (SMB + 20 + name(pattern), SMB + 90 * count, 0),
        Op::SetFileInfo { .. } => (SMB + 32, SMB + 8, 0),
        Op::LockX(_) | Op::UnlockX(_) => (SMB + 12, SMB, 0),
        Op::Deltree { .. } => return None,
    })
}

impl Benchmark for Tbench {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "net".into(),
            unit: "MB/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1e6 },
            description: "tbench: the dbench load's SMB request and reply sizes over loopback \
                          TCP, one connection and server thread per client, no file system"
                .into(),
            origin: "paper 001 Table 6 (tbench)".into(),
            params: {
                let mut p = load_params();
                p.push(crate::irq_param());
                p
            },
            main_param: Some("clients".into()),
            report: smtlab_model::ReportSection::SpeedupTable {
                caption: "paper 001 Table 6".into(),
            },
        }
    }

    fn client_side(&self) -> bool {
        true
    }

    /// A sample is `duration` milliseconds of load.
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let (_, duration_ms) = crate::dbench::clients_and_duration(ctx.params)?;
        Ok(crate::load_cost(duration_ms as f64 / 1e3, 0.1))
    }

    fn sweep(&self, suite: Suite, _topo: &Topology) -> Vec<SweepCell> {
        clients_sweep(suite)
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let p = ctx.params;
        let (clients, duration) = clients_and_duration(p)?;
        let (clients, duration_ns) = (clients as usize, duration * 1_000_000);
        let load = load_for(NAME, p.get_str("loadfile")?)?;
        let client = ctx.client_side(NAME)?;
        super::common::ensure_nofile(3 * clients as u64 + 256)
            .map_err(|e| BenchError::check(NAME, e.to_string()))?;
        let server = Server::start(&ctx.placement.cpu_set())?;
        let addr = server.acceptor.addr;
        let mut workers = Clients::default();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        for i in 0..clients {
            let load = load.clone();
            let ready = ready_tx.clone();
            let (name, cpu) = (format!("tbench-c{i}"), client.cpu_for_thread(i));
            workers
                .add(
                    |body| client.spawn(&name, Some(cpu), body),
                    move |rx| client_loop(addr, &load, &rx, &ready),
                )
                .map_err(|e| BenchError::io(NAME, format!("start client {i} of {clients}"), e))?;
        }
        drop(ready_tx);
        for _ in 0..clients {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(BenchError::check(NAME, e)),
                Err(_) => return Err(BenchError::check(NAME, "a client stopped while connecting")),
            }
        }
        Ok(Box::new(TbenchInstance {
            clients: workers,
            duration_ns,
            _server: server,
        }))
    }
}

/// A server connection and the thread that serves it.
type Connection = (TcpStream, JoinHandle<()>);

struct Server {
    acceptor: Acceptor,
    conns: Arc<Mutex<Vec<Connection>>>,
}

impl Server {
    fn start(cpus: &CpuSet) -> Result<Server, BenchError> {
        let conns = Arc::new(Mutex::new(Vec::new()));
        let (cs, set) = (conns.clone(), cpus.clone());
        let acceptor = Acceptor::start(NAME, cpus, "tbench-accept", move |l, st| {
            let mut n = 0;
            while !st.load(Ordering::Acquire) {
                let Ok((conn, _)) = l.accept() else { break };
                let _ = conn.set_nodelay(true);
                let Ok(mine) = conn.try_clone() else { continue };
                if let Ok(h) = spawn_on(&set, format!("tbench-s{n}"), move || serve(mine))
                    && let Ok(mut c) = cs.lock()
                {
                    c.push((conn, h));
                }
                n += 1;
            }
        })?;
        Ok(Server { acceptor, conns })
    }
}

/// Answers requests on one connection until it closes.
fn serve(mut conn: TcpStream) {
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let mut head = [0u8; 8];
        if conn.read_exact(&mut head).is_err() {
            return;
        }
        let req = u32::from_le_bytes(head[0..4].try_into().unwrap()) as usize;
        let resp = u32::from_le_bytes(head[4..8].try_into().unwrap()) as usize;
        let mut left = req.saturating_sub(8);
        while left > 0 {
            let n = left.min(buf.len());
            if conn.read_exact(&mut buf[..n]).is_err() {
                return;
            }
            left -= n;
        }
        if buf.len() < resp {
            buf.resize(resp, 0);
        }
        buf[0..4].copy_from_slice(&(resp as u32).to_le_bytes());
        if conn.write_all(&buf[..resp.max(4)]).is_err() {
            return;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.acceptor.stop();
        if let Ok(mut c) = self.conns.lock() {
            for (conn, h) in c.drain(..) {
                let _ = conn.shutdown(Shutdown::Both);
                let _ = h.join();
            }
        }
    }
}

fn client_loop(
    addr: SocketAddr,
    load: &LoadFile,
    work: &mpsc::Receiver<Work>,
    ready: &mpsc::Sender<Result<(), String>>,
) {
    let mut conn = match TcpStream::connect(addr) {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(format!("connect to {addr}: {e}")));
            return;
        }
    };
    let _ = conn.set_nodelay(true);
    let _ = ready.send(Ok(()));
    let mut buf = vec![0u8; 256 << 10];
    let mut position = 0usize;
    for (end_ns, reply) in work {
        let mut stats = Stats::new();
        let mut result = Ok(());
        loop {
            let t0 = now_ns();
            if t0 >= end_ns {
                break;
            }
            let line = &load.lines[position];
            position = (position + 1) % load.lines.len();
            if position == 0 {
                stats.wraps += 1;
            }
            let Some((req, resp, counted)) = packet_sizes(&line.op) else {
                continue;
            };
            if let Err(e) = exchange(&mut conn, &mut buf, req, resp) {
                result = Err(format!("{}:{}: {e}", load.name, line.number));
                break;
            }
            stats.latency_ns[line.op.kind()].push(now_ns().saturating_sub(t0) as f64);
            stats.ops += 1;
            match line.op {
                Op::ReadX(_) => stats.bytes_read += counted,
                _ => stats.bytes_written += counted,
            }
        }
        let failed = result.is_err();
        if reply.send(result.map(|()| stats)).is_err() || failed {
            break;
        }
    }
    let _ = conn.shutdown(Shutdown::Both);
}

fn exchange(conn: &mut TcpStream, buf: &mut Vec<u8>, req: u32, resp: u32) -> Result<(), String> {
    let (req, resp) = (req.max(8) as usize, resp.max(4) as usize);
    if buf.len() < req.max(resp) {
        buf.resize(req.max(resp), 0);
    }
    buf[0..4].copy_from_slice(&(req as u32).to_le_bytes());
    buf[4..8].copy_from_slice(&(resp as u32).to_le_bytes());
    conn.write_all(&buf[..req])
        .map_err(|e| format!("send {req} bytes: {e}"))?;
    conn.read_exact(&mut buf[..resp])
        .map_err(|e| format!("read {resp} bytes: {e}"))?;
    let got = u32::from_le_bytes(buf[0..4].try_into().unwrap()) as usize;
    if got != resp {
        return Err(format!(
            "lost sync: a {got}-byte reply where {resp} were due"
        ));
    }
    Ok(())
}

struct TbenchInstance {
    clients: Clients,
    duration_ns: u64,
    // Dropped after the clients (their fields come first).
    _server: Server,
}

impl Instance for TbenchInstance {
    fn sample(&mut self, _iterations: u64) -> Result<RawSample, BenchError> {
        let (mut total, elapsed_ns) = replay_sample(&self.clients, NAME, self.duration_ns)?;
        if total.bytes() == 0 {
            return Err(BenchError::check(
                NAME,
                "no ReadX or WriteX completed in the sample; lengthen duration",
            ));
        }
        Ok(load_sample(&mut total, elapsed_ns, self.clients.len()))
    }

    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dbench::load::Transfer;
    use std::net::TcpListener;

    #[test]
    fn sizes_carry_the_data_the_right_way() {
        let w = Op::WriteX(Transfer {
            handle: 1,
            offset: 0,
            size: 4096,
            ret: 4096,
        });
        assert_eq!(packet_sizes(&w), Some((SMB + 20 + 4096, SMB + 16, 4096)));
        let r = Op::ReadX(Transfer {
            handle: 1,
            offset: 0,
            size: 4096,
            ret: 100,
        });
        assert_eq!(packet_sizes(&r), Some((SMB + 20, SMB + 20 + 100, 100)));
        assert_eq!(packet_sizes(&Op::Deltree { path: "x".into() }), None);
    }

    #[test]
    fn a_reply_of_the_wrong_size_is_a_lost_sync() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut req = [0u8; 50];
            c.read_exact(&mut req).unwrap();
            // Answers 60 bytes that claim to be 60 where 40 were asked for.
            let mut resp = [0u8; 60];
            resp[0..4].copy_from_slice(&60u32.to_le_bytes());
            c.write_all(&resp).unwrap();
        });
        let mut conn = TcpStream::connect(addr).unwrap();
        let mut buf = Vec::new();
        let e = exchange(&mut conn, &mut buf, 50, 40).unwrap_err();
        assert!(e.contains("lost sync"), "{e}");
        smtlab_fixtures::bounded::join(server, "a test thread");
        // The real server answers exactly what was asked.
        let srv = Server::start(&CpuSet::new()).unwrap();
        let mut conn = TcpStream::connect(srv.acceptor.addr).unwrap();
        for (req, resp) in [(8, 4), (4135, 55), (59, 65_591)] {
            exchange(&mut conn, &mut buf, req, resp).unwrap();
        }
        drop(conn);
    }

    #[test]
    fn the_quick_form_runs_and_counts_what_the_load_says() {
        let raws = crate::net::tests_support::run_quick(&Tbench, &["duration=100ms"], 2);
        for raw in raws {
            assert!(raw.work > 0.0);
            assert_eq!(
                raw.work,
                raw.metrics["bytes_read"] + raw.metrics["bytes_written"]
            );
        }
    }
}
