//! `chat`: the chat-room benchmark of paper 001 (Table 3 and 4), over loopback TCP.
//!
//! R rooms of U users. Every user is one TCP connection with a send thread and a
//! receive thread on the client side (the [`ClientSide`] CPUs) and a receive thread and
//! a send thread on the server side (the placement's CPUs): 4 x R x U threads, the
//! paper's 1,600 threads at 20 rooms counting both sides. A sample is one round: every
//! user sends M messages of S bytes; the server echoes each to the room's other U - 1
//! users; the round ends when every client receive thread has all (U - 1) x M messages
//! of its room. The primary value is messages delivered per second (R x U x M x (U - 1)
//! per round); messages sent per second (the paper's figure: R x U x M over the time the
//! senders took) is a metric.
//!
//! Every message carries its room, sender, sequence number and a payload derived from
//! them. Each receiver checks, per sender, that the sequence numbers follow each other
//! (TCP keeps each sender-to-receiver path in order, so a gap is a lost message), that
//! the payload is intact, and that the round's count is exact: a lost, duplicated or
//! corrupted message fails the sample with one line naming the room and user.
//!
//! Connections and threads live from `prepare` to the drop of the instance, so a
//! sample measures message traffic, not connection set-up. Descriptors: the process's
//! soft `RLIMIT_NOFILE` is raised to cover both ends of every connection; threads get
//! 128 KiB stacks. A limit that still stops a room sweep is named in the error.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smtlab_bench::client::ClientSide;
use smtlab_bench::clock::now_ns;
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample, Suite, SweepCell};
use smtlab_model::{BenchInfo, CpuSet, Direction, Topology, ValueKind};

use super::common::{Acceptor, ensure_nofile, spawn_on, thread_limits};

const NAME: &str = "chat";
/// room, sender, sequence: the smallest message that can carry its own identity.
const HEADER: usize = 16;
/// Rooms of the paper's sweep (Table 3).
pub const PAPER_ROOMS: [u64; 4] = [20, 30, 40, 50];

/// Messages delivered a second per CPU of the placement, for the plan's estimate only:
/// the default suite's five room counts on one CPU of a 2-CPU machine delivered 370 to
/// 790 thousand a second.
const DELIVERIES_PER_CPU_S: f64 = 500_000.0;

pub struct Chat;

/// The shape of one chat load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatShape {
    pub rooms: u32,
    pub users: u32,
    pub messages: u32,
    pub size: usize,
}

impl ChatShape {
    pub fn connections(&self) -> u64 {
        self.rooms as u64 * self.users as u64
    }
    /// Both sides, two threads per connection each (paper 001 Table 3 counts these).
    pub fn threads(&self) -> u64 {
        4 * self.connections()
    }
    pub fn sent_per_round(&self) -> u64 {
        self.connections() * self.messages as u64
    }
    pub fn delivered_per_round(&self) -> u64 {
        self.sent_per_round() * (self.users as u64 - 1)
    }
}

/// A deliberate server fault, for tests that the accounting catches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    #[default]
    None,
    /// The n-th delivery (0-based, over the server's life) is not sent.
    Drop(u64),
    /// The n-th delivery has one payload byte flipped.
    Corrupt(u64),
}

use smtlab_bench::params::declare as param;

impl Benchmark for Chat {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "chat".into(),
            unit: "msg/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1.0 },
            description: "chat rooms over loopback TCP: every user's messages echoed to the \
                          room's other users; messages delivered per second"
                .into(),
            origin: "paper 001 Tables 3-4 (chat benchmark)".into(),
            params: vec![
                param(
                    "rooms",
                    "10",
                    Some("2"),
                    "chat rooms (paper: 10 by default, swept 20-50)",
                ),
                param(
                    "users",
                    "20",
                    Some("5"),
                    "users per room, 2 or more (paper: 20)",
                ),
                param(
                    "messages",
                    "100",
                    Some("50"),
                    "messages each user sends per sample (paper: 100)",
                ),
                param(
                    "size",
                    "100",
                    None,
                    "message size in bytes, 16 to 65536 (paper: 100)",
                ),
                crate::irq_param(),
            ],
            main_param: Some("rooms".into()),
            report: smtlab_model::ReportSection::SpeedupTable {
                caption: "paper 001 Tables 3-4".into(),
            },
        }
    }

    fn client_side(&self) -> bool {
        true
    }

    /// A sample is one round, every message delivered to its room's other users, at
    /// about [`DELIVERIES_PER_CPU_S`] a CPU of the placement; starting the round's threads
    /// takes about half a millisecond each. A rough figure for the run's estimate.
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let shape = shape_of(ctx)?;
        let rate = DELIVERIES_PER_CPU_S * ctx.placement.width().max(1) as f64;
        let sample_s = shape.delivered_per_round() as f64 / rate;
        Ok(crate::load_cost(
            sample_s,
            0.2 + 0.0005 * shape.threads() as f64,
        ))
    }

    fn sweep(&self, suite: Suite, _topo: &Topology) -> Vec<SweepCell> {
        crate::sweep_values(suite, "rooms", &PAPER_ROOMS, &PAPER_ROOMS)
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let shape = shape_of(ctx)?;
        let client = ctx.client_side(NAME)?;
        Ok(Box::new(ChatInstance::start(
            shape,
            &ctx.placement.cpu_set(),
            client,
            Fault::None,
        )?))
    }
}

fn shape_of(ctx: &BenchContext<'_>) -> Result<ChatShape, BenchError> {
    let p = ctx.params;
    let rooms = p.get_u64_in("rooms", 1..=10_000, "1 to 10000 rooms")?;
    let users = p.get_u64_in("users", 2..=1_000, "2 to 1000 users per room")?;
    let messages = p.get_u64_in("messages", 1..=1_000_000, "1 to 1000000 messages")?;
    let size = p.get_bytes_in("size", HEADER as u64..=65_536, "16 to 65536 bytes")?;
    Ok(ChatShape {
        rooms: rooms as u32,
        users: users as u32,
        messages: messages as u32,
        size: size as usize,
    })
}

/// The payload byte `j` of message (`room`, `sender`, `seq`).
fn pattern(room: u32, sender: u32, seq: u64, j: usize) -> u8 {
    (room as u64)
        .wrapping_mul(131)
        .wrapping_add(sender as u64 * 31)
        .wrapping_add(seq.wrapping_mul(7))
        .wrapping_add(j as u64) as u8
}

fn encode(buf: &mut [u8], room: u32, sender: u32, seq: u64) {
    buf[0..4].copy_from_slice(&room.to_le_bytes());
    buf[4..8].copy_from_slice(&sender.to_le_bytes());
    buf[8..16].copy_from_slice(&seq.to_le_bytes());
    for (j, b) in buf[HEADER..].iter_mut().enumerate() {
        *b = pattern(room, sender, seq, j);
    }
}

/// Checks one received message; returns the sender.
fn verify(buf: &[u8], room: u32, me: u32, users: u32, next: &mut [u64]) -> Result<u32, String> {
    let r = u32::from_le_bytes(buf[0..4].try_into().unwrap());
    let s = u32::from_le_bytes(buf[4..8].try_into().unwrap());
    let seq = u64::from_le_bytes(buf[8..16].try_into().unwrap());
    let who = format!("room {room} user {me}");
    if r != room || s >= users || s == me {
        return Err(format!(
            "{who} received a corrupted message (header says room {r}, sender {s})"
        ));
    }
    if let Some(j) = buf[HEADER..]
        .iter()
        .enumerate()
        .position(|(j, &b)| b != pattern(r, s, seq, j))
    {
        return Err(format!(
            "{who} received a corrupted message from user {s} (seq {seq}, payload byte {j})"
        ));
    }
    let want = next[s as usize];
    if seq != want {
        return Err(if seq > want {
            format!(
                "{who} lost {} message(s) from user {s}: got seq {seq}, expected {want}",
                seq - want
            )
        } else {
            format!("{who} received message seq {seq} from user {s} twice (expected {want})")
        });
    }
    next[s as usize] += 1;
    Ok(s)
}

// ---------------------------------------------------------------- server

/// The chat server: an accept thread that groups connections into rooms and, once a room
/// is full, two threads per user.
pub struct ChatServer {
    acceptor: Acceptor,
    workers: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// The first failure of a server thread (spawn, I/O), if any.
    failure: Arc<Mutex<Option<String>>>,
}

impl ChatServer {
    pub fn start(cpus: &CpuSet, shape: ChatShape, fault: Fault) -> Result<ChatServer, BenchError> {
        let workers = Arc::new(Mutex::new(Vec::new()));
        let failure = Arc::new(Mutex::new(None));
        let acceptor = {
            let (workers, failure, set) = (workers.clone(), failure.clone(), cpus.clone());
            Acceptor::start(NAME, cpus, "chat-accept", move |listener, stop| {
                accept_loop(listener, stop, &workers, &failure, &set, shape, fault);
            })?
        };
        Ok(ChatServer {
            acceptor,
            workers,
            failure,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.acceptor.addr
    }

    fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }
}

fn note_failure(failure: &Mutex<Option<String>>, what: String) {
    if let Ok(mut f) = failure.lock() {
        f.get_or_insert(what);
    }
}

fn accept_loop(
    listener: &TcpListener,
    stop: &AtomicBool,
    workers: &Mutex<Vec<JoinHandle<()>>>,
    failure: &Mutex<Option<String>>,
    cpus: &CpuSet,
    shape: ChatShape,
    fault: Fault,
) {
    let users = shape.users as usize;
    let mut rooms: Vec<Vec<Option<TcpStream>>> = (0..shape.rooms)
        .map(|_| (0..users).map(|_| None).collect())
        .collect();
    let mut filled = vec![0usize; shape.rooms as usize];
    let deliveries = Arc::new(AtomicU64::new(0));
    while !stop.load(Ordering::Acquire) {
        let Ok((mut conn, _)) = listener.accept() else {
            break;
        };
        let _ = conn.set_nodelay(true);
        let mut hello = [0u8; 8];
        if conn.read_exact(&mut hello).is_err() {
            continue;
        }
        let room = u32::from_le_bytes(hello[0..4].try_into().unwrap()) as usize;
        let user = u32::from_le_bytes(hello[4..8].try_into().unwrap()) as usize;
        if room >= rooms.len() || user >= users || rooms[room][user].is_some() {
            note_failure(failure, format!("bad hello: room {room} user {user}"));
            continue;
        }
        rooms[room][user] = Some(conn);
        filled[room] += 1;
        if filled[room] < users {
            continue;
        }
        let conns: Vec<TcpStream> = rooms[room].iter_mut().filter_map(Option::take).collect();
        if let Err(e) = start_room(room as u32, conns, cpus, shape, fault, &deliveries, workers) {
            note_failure(failure, e);
            break;
        }
    }
}

/// Starts a full room's 2 x U server threads, then tells each user it may begin.
fn start_room(
    room: u32,
    conns: Vec<TcpStream>,
    cpus: &CpuSet,
    shape: ChatShape,
    fault: Fault,
    deliveries: &Arc<AtomicU64>,
    workers: &Mutex<Vec<JoinHandle<()>>>,
) -> Result<(), String> {
    let mut queues = Vec::with_capacity(conns.len());
    let mut handles = Vec::with_capacity(2 * conns.len());
    for (u, conn) in conns.iter().enumerate() {
        let (tx, rx) = mpsc::channel::<Arc<[u8]>>();
        queues.push(tx);
        let mut out = conn
            .try_clone()
            .map_err(|e| format!("clone a socket: {e}"))?;
        let h = spawn_on(cpus, format!("chat-s-send-{room}-{u}"), move || {
            for msg in rx {
                if out.write_all(&msg).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| spawn_failure("server", e, shape))?;
        handles.push(h);
    }
    let queues = Arc::new(queues);
    for (u, conn) in conns.iter().enumerate() {
        let mut input = conn
            .try_clone()
            .map_err(|e| format!("clone a socket: {e}"))?;
        let queues = queues.clone();
        let deliveries = deliveries.clone();
        let size = shape.size;
        let h = spawn_on(cpus, format!("chat-s-recv-{room}-{u}"), move || {
            let mut buf = vec![0u8; size];
            while input.read_exact(&mut buf).is_ok() {
                let msg: Arc<[u8]> = Arc::from(buf.as_slice());
                for (other, q) in queues.iter().enumerate() {
                    if other == u {
                        continue;
                    }
                    let n = deliveries.fetch_add(1, Ordering::Relaxed);
                    let out = match fault {
                        Fault::Drop(k) if k == n => continue,
                        Fault::Corrupt(k) if k == n => {
                            let mut bad = msg.to_vec();
                            let last = bad.len() - 1;
                            bad[last] ^= 0x5a;
                            Arc::from(bad)
                        }
                        _ => msg.clone(),
                    };
                    let _ = q.send(out);
                }
            }
        })
        .map_err(|e| spawn_failure("server", e, shape))?;
        handles.push(h);
    }
    drop(queues);
    if let Ok(mut w) = workers.lock() {
        w.extend(handles);
    }
    for mut conn in conns {
        conn.write_all(&[1])
            .map_err(|e| format!("tell a user to start: {e}"))?;
    }
    Ok(())
}

/// Why a thread of `side` (server or client) could not start, with the limits it met.
fn spawn_failure(side: &str, e: std::io::Error, shape: ChatShape) -> String {
    format!(
        "cannot start thread ({e}) of {} {side} threads; limits: {}",
        2 * shape.connections(),
        thread_limits()
    )
}

impl Drop for ChatServer {
    fn drop(&mut self) {
        self.acceptor.stop();
        // Workers end when their clients close (EOF) and their queues drain.
        if let Ok(mut w) = self.workers.lock() {
            for h in w.drain(..) {
                let _ = h.join();
            }
        }
    }
}

// ---------------------------------------------------------------- client

/// Round bookkeeping shared by the client threads and the measuring thread.
#[derive(Default)]
struct Round {
    state: Mutex<RoundState>,
    changed: Condvar,
}

#[derive(Default)]
struct RoundState {
    started: u64,
    /// Receivers that have all of the current round's messages.
    receivers_done: usize,
    senders_done: usize,
    last_send_ns: u64,
    error: Option<String>,
    stopping: bool,
}

impl Round {
    fn fail(&self, e: String) {
        if let Ok(mut s) = self.state.lock() {
            s.error.get_or_insert(e);
            self.changed.notify_all();
        }
    }
}

/// The client side of a chat load: R x U connections with their two threads each.
pub struct ChatClients {
    round: Arc<Round>,
    sockets: Vec<TcpStream>,
    threads: Vec<JoinHandle<()>>,
    bytes_received: Arc<AtomicU64>,
    messages_received: Arc<AtomicUsize>,
}

impl ChatClients {
    /// Connects every user and starts their threads. Run on a client-side thread so the
    /// threads inherit nothing from the measuring thread's counters.
    fn connect(addr: SocketAddr, cpus: &CpuSet, shape: ChatShape) -> Result<ChatClients, String> {
        let round = Arc::new(Round::default());
        let mut clients = ChatClients {
            round: round.clone(),
            sockets: Vec::new(),
            threads: Vec::new(),
            bytes_received: Arc::new(AtomicU64::new(0)),
            messages_received: Arc::new(AtomicUsize::new(0)),
        };
        for room in 0..shape.rooms {
            for user in 0..shape.users {
                let mut s = TcpStream::connect(addr)
                    .map_err(|e| format!("connect user {user} of room {room} to {addr}: {e}"))?;
                let _ = s.set_nodelay(true);
                let mut hello = [0u8; 8];
                hello[0..4].copy_from_slice(&room.to_le_bytes());
                hello[4..8].copy_from_slice(&user.to_le_bytes());
                s.write_all(&hello)
                    .map_err(|e| format!("send hello: {e}"))?;
                clients.sockets.push(s);
            }
        }
        // The server answers each user once its room is complete and its threads run.
        for (i, s) in clients.sockets.iter_mut().enumerate() {
            let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
            let mut go = [0u8; 1];
            s.read_exact(&mut go).map_err(|e| {
                format!(
                    "user {} of room {} was not admitted by the server: {e}",
                    i as u32 % shape.users,
                    i as u32 / shape.users
                )
            })?;
            let _ = s.set_read_timeout(None);
        }
        for (i, s) in clients.sockets.iter().enumerate() {
            let room = i as u32 / shape.users;
            let user = i as u32 % shape.users;
            let mut out = s.try_clone().map_err(|e| format!("clone a socket: {e}"))?;
            let mut input = s.try_clone().map_err(|e| format!("clone a socket: {e}"))?;
            let r = round.clone();
            let h = spawn_on(cpus, format!("chat-c-send-{room}-{user}"), move || {
                sender(&mut out, &r, room, user, shape);
            })
            .map_err(|e| spawn_failure("client", e, shape))?;
            clients.threads.push(h);
            let r = round.clone();
            let bytes = clients.bytes_received.clone();
            let msgs = clients.messages_received.clone();
            let h = spawn_on(cpus, format!("chat-c-recv-{room}-{user}"), move || {
                receiver(&mut input, &r, room, user, shape, &bytes, &msgs);
            })
            .map_err(|e| spawn_failure("client", e, shape))?;
            clients.threads.push(h);
        }
        Ok(clients)
    }
}

fn sender(out: &mut TcpStream, round: &Round, room: u32, user: u32, shape: ChatShape) {
    let mut buf = vec![0u8; shape.size];
    let mut done_rounds = 0u64;
    loop {
        {
            let Ok(mut s) = round.state.lock() else {
                return;
            };
            while s.started == done_rounds && !s.stopping {
                s = match round.changed.wait(s) {
                    Ok(s) => s,
                    Err(_) => return,
                };
            }
            if s.stopping {
                return;
            }
        }
        let first = done_rounds * shape.messages as u64;
        for seq in first..first + shape.messages as u64 {
            encode(&mut buf, room, user, seq);
            if let Err(e) = out.write_all(&buf) {
                round.fail(format!("room {room} user {user}: send failed: {e}"));
                return;
            }
        }
        done_rounds += 1;
        let Ok(mut s) = round.state.lock() else {
            return;
        };
        s.senders_done += 1;
        s.last_send_ns = s.last_send_ns.max(now_ns());
        round.changed.notify_all();
    }
}

fn receiver(
    input: &mut TcpStream,
    round: &Round,
    room: u32,
    me: u32,
    shape: ChatShape,
    bytes: &AtomicU64,
    msgs: &AtomicUsize,
) {
    let per_round = (shape.users as u64 - 1) * shape.messages as u64;
    let mut next = vec![0u64; shape.users as usize];
    let mut buf = vec![0u8; shape.size];
    loop {
        for _ in 0..per_round {
            if let Err(e) = input.read_exact(&mut buf) {
                let stopping = round.state.lock().map(|s| s.stopping).unwrap_or(true);
                if !stopping {
                    round.fail(format!("room {room} user {me}: receive failed: {e}"));
                }
                return;
            }
            if let Err(e) = verify(&buf, room, me, shape.users, &mut next) {
                round.fail(e);
                return;
            }
            bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
            msgs.fetch_add(1, Ordering::Relaxed);
        }
        let Ok(mut s) = round.state.lock() else {
            return;
        };
        s.receivers_done += 1;
        round.changed.notify_all();
    }
}

impl Drop for ChatClients {
    fn drop(&mut self) {
        if let Ok(mut s) = self.round.state.lock() {
            s.stopping = true;
            self.round.changed.notify_all();
        }
        for s in &self.sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

// ---------------------------------------------------------------- instance

pub struct ChatInstance {
    // Clients go first: closing them lets the server's threads end.
    clients: ChatClients,
    server: ChatServer,
    shape: ChatShape,
    broken: Option<String>,
    /// Shortest time a round may take before missing messages count as lost.
    min_deadline: Duration,
}

impl ChatInstance {
    pub fn start(
        shape: ChatShape,
        server_cpus: &CpuSet,
        client: &ClientSide,
        fault: Fault,
    ) -> Result<ChatInstance, BenchError> {
        // Both ends of every connection, their clones, and slack for the rest of smtlab.
        ensure_nofile(4 * shape.connections() + 256)
            .map_err(|e| BenchError::check(NAME, e.to_string()))?;
        let server = ChatServer::start(server_cpus, shape, fault)?;
        let addr = server.addr();
        let cpus = client.cpus().clone();
        let clients = client
            .spawn("chat-connect", None, move || {
                ChatClients::connect(addr, &cpus, shape)
            })
            .map_err(|e| BenchError::io(NAME, "start the client side", e))?
            .join()
            .map_err(|_| BenchError::check(NAME, "the client side panicked while connecting"))?;
        let clients = match clients {
            Ok(c) => c,
            Err(e) => {
                let why = server.failure().unwrap_or(e);
                return Err(BenchError::check(NAME, why));
            }
        };
        Ok(ChatInstance {
            clients,
            server,
            shape,
            broken: None,
            min_deadline: Duration::from_secs(10),
        })
    }

    /// One round; see the module overview.
    pub fn round(&mut self) -> Result<RawSample, BenchError> {
        if let Some(e) = &self.broken {
            return Err(BenchError::check(NAME, e.clone()));
        }
        let shape = self.shape;
        let clients = &self.clients;
        let receivers = shape.connections() as usize;
        let bytes0 = clients.bytes_received.load(Ordering::Relaxed);
        let msgs0 = clients.messages_received.load(Ordering::Relaxed);
        // Generous: a hundredth of the slowest machine's rate, never under 10 s.
        let limit = self.min_deadline.max(Duration::from_micros(
            shape.delivered_per_round().saturating_mul(100),
        ));
        let round = &clients.round;
        let mut s = round
            .state
            .lock()
            .map_err(|_| BenchError::check(NAME, "lock poisoned"))?;
        s.receivers_done = 0;
        s.senders_done = 0;
        s.last_send_ns = 0;
        let t0 = now_ns();
        s.started += 1;
        round.changed.notify_all();
        let deadline = Instant::now() + limit;
        while s.error.is_none() && (s.receivers_done < receivers || s.senders_done < receivers) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            s = round
                .changed
                .wait_timeout(s, left)
                .map_err(|_| BenchError::check(NAME, "lock poisoned"))?
                .0;
        }
        let t1 = now_ns();
        let failure = s.error.clone().or_else(|| {
            (s.receivers_done < receivers).then(|| {
                format!(
                    "only {} of {receivers} users received all their messages within {:.0} s ({} of {} messages arrived): messages were lost",
                    s.receivers_done,
                    limit.as_secs_f64(),
                    clients.messages_received.load(Ordering::Relaxed) - msgs0,
                    shape.delivered_per_round()
                )
            })
        });
        let last_send_ns = s.last_send_ns;
        drop(s);
        if let Some(e) = failure {
            let e = self
                .server
                .failure()
                .map_or(e.clone(), |f| format!("{e} (server: {f})"));
            self.broken = Some(e.clone());
            return Err(BenchError::check(NAME, e));
        }
        let got_msgs = (clients.messages_received.load(Ordering::Relaxed) - msgs0) as u64;
        let got_bytes = clients.bytes_received.load(Ordering::Relaxed) - bytes0;
        if got_msgs != shape.delivered_per_round()
            || got_bytes != shape.delivered_per_round() * shape.size as u64
        {
            let e = format!(
                "received {got_msgs} messages ({got_bytes} bytes) where {} ({} bytes) were due",
                shape.delivered_per_round(),
                shape.delivered_per_round() * shape.size as u64
            );
            self.broken = Some(e.clone());
            return Err(BenchError::check(NAME, e));
        }
        let elapsed_ns = t1.saturating_sub(t0).max(1);
        let send_ns = last_send_ns.saturating_sub(t0).max(1);
        let mut raw = RawSample {
            elapsed_ns,
            work: got_msgs as f64,
            ..RawSample::default()
        };
        let m = &mut raw.metrics;
        use smtlab_model::metrics::chat;
        let sent = shape.sent_per_round();
        let figures = [
            (chat::ROOMS, shape.rooms as f64),
            ("users_per_room", shape.users as f64),
            (chat::CONNECTIONS, shape.connections() as f64),
            (chat::THREADS, shape.threads() as f64),
            (chat::MESSAGES_SENT, sent as f64),
            (chat::MESSAGES_RECEIVED, got_msgs as f64),
            (chat::MESSAGES_TOTAL, (sent + got_msgs) as f64),
            ("bytes_sent", (sent * shape.size as u64) as f64),
            ("bytes_received", got_bytes as f64),
            ("sent_msgs_per_s", sent as f64 / (send_ns as f64 / 1e9)),
            (
                "sent_msgs_per_s_round",
                sent as f64 / (elapsed_ns as f64 / 1e9),
            ),
        ];
        m.extend(figures.map(|(key, v)| (key.to_string(), v)));
        Ok(raw)
    }
}

impl Instance for ChatInstance {
    fn sample(&mut self, _iterations: u64) -> Result<RawSample, BenchError> {
        self.round()
    }

    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_placement::pin::get_affinity;

    fn cpus() -> (CpuSet, ClientSide) {
        let all = get_affinity(0).unwrap();
        let first: CpuSet = std::iter::once(all.first().unwrap()).collect();
        let last: CpuSet = std::iter::once(all.last().unwrap()).collect();
        (first, ClientSide::start(last).unwrap())
    }

    fn shape(rooms: u32, users: u32, messages: u32) -> ChatShape {
        ChatShape {
            rooms,
            users,
            messages,
            size: 100,
        }
    }

    #[test]
    fn paper_table3_counts() {
        // 20 rooms: 400 connections, 1,600 threads, 40,000 sent, 760,000 received.
        let s = shape(20, 20, 100);
        assert_eq!(s.connections(), 400);
        assert_eq!(s.threads(), 1600);
        assert_eq!(s.sent_per_round(), 40_000);
        assert_eq!(s.delivered_per_round(), 760_000);
        let s = shape(50, 20, 100);
        assert_eq!(s.threads(), 4000);
        assert_eq!(s.sent_per_round() + s.delivered_per_round(), 2_000_000);
    }

    #[test]
    fn the_plan_costs_a_round_by_its_deliveries_and_the_placements_cpus() {
        use crate::db::testutil;
        let cost = |rooms: &str, cpus: &[u32]| {
            let c = testutil::cost(&Chat, &[("rooms", rooms)], &testutil::placement(cpus));
            let c = c.unwrap();
            (c.sample_ns.unwrap() as f64 / 1e9, c.setup_ns as f64 / 1e9)
        };
        // 10 rooms of 20 users sending 100 messages: 380 000 deliveries a round, and
        // 800 threads to start.
        let (one, setup) = cost("10", &[0]);
        assert!(
            (one - 380_000.0 / DELIVERIES_PER_CPU_S).abs() < 1e-6,
            "{one}"
        );
        assert!((setup - 0.6).abs() < 1e-6, "{setup}");
        let (five, _) = cost("50", &[0]);
        assert!((five / one - 5.0).abs() < 1e-6, "{five} {one}");
        let (wide, _) = cost("10", &[0, 1]);
        assert!((one / wide - 2.0).abs() < 1e-6, "{one} {wide}");
    }

    #[test]
    fn every_message_and_byte_is_accounted_for() {
        let (server, client) = cpus();
        let s = shape(3, 4, 7);
        let mut inst = ChatInstance::start(s, &server, &client, Fault::None).unwrap();
        for _ in 0..3 {
            let raw = inst.round().unwrap();
            assert_eq!(raw.work, (3 * 4 * 7 * 3) as f64);
            assert_eq!(raw.metrics["messages_sent"], 84.0);
            assert_eq!(raw.metrics["messages_received"], 252.0);
            assert_eq!(raw.metrics["bytes_received"], 25_200.0);
            assert_eq!(raw.metrics["threads"], 48.0);
        }
    }

    #[test]
    fn dropping_the_instance_stops_the_server() {
        let (server, client) = cpus();
        let mut inst = ChatInstance::start(shape(2, 3, 2), &server, &client, Fault::None).unwrap();
        inst.round().unwrap();
        let addr = inst.server.addr();
        drop(inst);
        // Every server and client thread was joined by the drop; the port is closed.
        // No listener of this process is left (a connect could reach a worker another
        // test forked, which inherits every descriptor).
        assert!(!crate::testutil::this_process_listens_on(addr.port()));
    }

    #[test]
    fn a_dropped_message_is_caught() {
        let (server, client) = cpus();
        let mut inst =
            ChatInstance::start(shape(2, 3, 5), &server, &client, Fault::Drop(4)).unwrap();
        let e = inst.round().unwrap_err().to_string();
        assert!(e.contains("lost"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        // The instance stays failed.
        assert!(inst.round().is_err());
    }

    #[test]
    fn the_last_message_dropped_is_caught_too() {
        let (server, client) = cpus();
        // 1 room x 2 users x 1 message: 2 deliveries; dropping the second leaves a
        // receiver waiting, which the round's deadline turns into an error.
        let mut inst =
            ChatInstance::start(shape(1, 2, 1), &server, &client, Fault::Drop(1)).unwrap();
        inst.min_deadline = Duration::from_millis(300);
        let e = inst.round().unwrap_err().to_string();
        assert!(e.contains("lost"), "{e}");
    }

    #[test]
    fn a_corrupted_message_is_caught() {
        let (server, client) = cpus();
        let mut inst =
            ChatInstance::start(shape(2, 3, 5), &server, &client, Fault::Corrupt(7)).unwrap();
        let e = inst.round().unwrap_err().to_string();
        assert!(e.contains("corrupted"), "{e}");
    }

    #[test]
    fn the_quick_form_runs() {
        let raws = crate::net::tests_support::run_quick(&Chat, &[], 2);
        for raw in raws {
            // quick: 2 rooms x 5 users x 50 messages x 4 receivers
            assert_eq!(raw.work, 2000.0);
            assert!(raw.elapsed_ns > 0);
        }
    }

    #[test]
    fn verify_names_the_problem() {
        let mut buf = vec![0u8; 40];
        encode(&mut buf, 1, 2, 0);
        let mut next = vec![0u64; 4];
        assert_eq!(verify(&buf, 1, 0, 4, &mut next), Ok(2));
        let e = verify(&buf, 1, 0, 4, &mut next).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        encode(&mut buf, 1, 2, 5);
        let e = verify(&buf, 1, 0, 4, &mut next).unwrap_err();
        assert!(e.contains("lost 4"), "{e}");
        encode(&mut buf, 1, 2, 1);
        buf[30] ^= 1;
        let e = verify(&buf, 1, 0, 4, &mut next).unwrap_err();
        assert!(e.contains("corrupted"), "{e}");
    }

    #[test]
    fn the_sweep_covers_the_paper_rooms() {
        let topo = crate::net::tests_support::topology();
        let cells = Chat.sweep(Suite::Full, &topo);
        let rooms: Vec<String> = cells.iter().map(|c| c.params[0].1.clone()).collect();
        assert_eq!(rooms, ["20", "30", "40", "50"]);
        assert!(Chat.sweep(Suite::Quick, &topo).is_empty());
    }
}
