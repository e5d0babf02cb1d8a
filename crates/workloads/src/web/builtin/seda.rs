//! The staged, copying server (`seda`): paper 000's Haboob, the one server of its five
//! without `sendfile`. Like SEDA, a request passes through stages, each a pool of
//! threads fed by a queue:
//!
//! ```text
//!  accept (1 thread: listener and every waiting socket in one epoll)
//!    -> parse queue -> parse pool (reads what arrived, parses the head)
//!    -> read queue  -> read pool  (opens the file, reads it into a buffer: the copy)
//!    -> send queue  -> send pool  (writes head and buffer with send(2))
//!    -> back to accept when the socket would block, or for the next request
//! ```
//!
//! No stage thread ever blocks on a socket: a connection waiting for its request or for
//! room in its send buffer is parked with the accept stage, which watches it in its epoll
//! (one-shot) and hands it to the parse or send queue when it is ready, and closes it past
//! its deadline. Every body is copied from the page cache into user memory and back into
//! the socket, so the CPU does the copying (and the checksums) that `sendfile` spares the
//! other servers: the copying-vs-zero-copy difference paper 000 s2.4 names.
//!
//! Thread names (`/proc/PID/task/*/comm`) say the stage: `seda-accept`, `seda-parseN`,
//! `seda-readN`, `seda-sendN`; each pool has one thread per placement CPU, thread `N`
//! pinned to the placement's CPU `N`.

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smtlab_loadgen::sys;

use super::super::request::{self, Request};
use super::conn::{abort_on_close, unsent};
use super::{Docs, ServerOpts, error_response, owes_continue, reply, response_head};

/// The stages, in a request's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Accept,
    Parse,
    Read,
    Send,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Accept, Stage::Parse, Stage::Read, Stage::Send];

    /// The prefix of the stage's thread names.
    pub fn thread_name(self) -> &'static str {
        match self {
            Stage::Accept => "seda-accept",
            Stage::Parse => "seda-parse",
            Stage::Read => "seda-read",
            Stage::Send => "seda-send",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What each stage did: items handled and the thread id (`gettid`) that handled the
/// last one, so a test can see that the stages ran on threads of their own.
#[derive(Debug, Default)]
struct StageStats {
    handled: [AtomicU64; 4],
    last_tid: [AtomicI32; 4],
}

impl StageStats {
    fn note(&self, stage: Stage) {
        self.handled[stage.index()].fetch_add(1, Ordering::Relaxed);
        // SAFETY: gettid has no preconditions and cannot fail.
        let tid = unsafe { libc::gettid() };
        self.last_tid[stage.index()].store(tid, Ordering::Relaxed);
    }
}

/// The parse, read and send queues' sending ends.
type Queues = (
    Sender<Option<Conn>>,
    Sender<Option<Parsed>>,
    Sender<Option<Conn>>,
);

/// The staged copying server.
#[derive(Debug)]
pub struct SedaServer {
    addr: SocketAddr,
    /// Stops the accept stage (the pools stop on an empty item, one per thread).
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    stats: Arc<StageStats>,
    /// The pools' queues, to send each pool thread its stop (`None`).
    queues: Queues,
    per_pool: usize,
}

/// A connection as it moves between stages; dropping it closes the socket.
struct Conn {
    fd: OwnedFd,
    /// Request bytes received and not yet answered.
    buf: Vec<u8>,
    /// The response (head and the copied body) and how much of it went out.
    out: Vec<u8>,
    out_off: usize,
    keep_alive: bool,
    /// When the current request head started being awaited, or sending last moved.
    since: Instant,
}

/// A parsed request on its way to the read stage.
struct Parsed {
    conn: Conn,
    req: Request,
}

/// What a stage hands on.
enum Next {
    Parse(Conn),
    Read(Parsed),
    Send(Conn),
    /// Wait in the accept stage's epoll until readable (`false`) or writable (`true`).
    Park(Conn, bool),
    Close(Conn),
}

/// The queues and the parked connections, shared by every stage. A queue's items are
/// `Some`; `None` stops the pool thread that takes it.
struct Pipeline {
    parse: Sender<Option<Conn>>,
    read: Sender<Option<Parsed>>,
    send: Sender<Option<Conn>>,
    epfd: OwnedFd,
    /// Connections waiting in the epoll, by descriptor.
    parked: Mutex<HashMap<RawFd, (Conn, bool)>>,
    live: AtomicUsize,
    docs: Docs,
    opts: ServerOpts,
    stats: Arc<StageStats>,
}

impl Pipeline {
    fn hand_on(&self, next: Next) {
        match next {
            Next::Parse(c) => {
                let _ = self.parse.send(Some(c));
            }
            Next::Read(p) => {
                let _ = self.read.send(Some(p));
            }
            Next::Send(c) => {
                let _ = self.send.send(Some(c));
            }
            Next::Park(c, out) => self.park(c, out),
            Next::Close(c) => self.close(c),
        }
    }

    fn close(&self, c: Conn) {
        drop(c);
        self.live.fetch_sub(1, Ordering::SeqCst);
    }

    /// Puts `c` in the epoll, one-shot: the accept stage takes it out when it is ready.
    fn park(&self, mut c: Conn, out: bool) {
        if !out && c.buf.is_empty() {
            // An idle connection holds no buffer.
            c.buf = Vec::new();
        }
        let fd = c.fd.as_raw_fd();
        let events = libc::EPOLLONESHOT
            | libc::EPOLLRDHUP
            | if out { libc::EPOLLOUT } else { libc::EPOLLIN };
        let mut parked = self.parked.lock().unwrap_or_else(|e| e.into_inner());
        // In the table before it can be reported, so the accept stage finds it.
        parked.insert(fd, (c, out));
        let ctl = |op| sys::epoll_ctl(self.epfd.as_raw_fd(), op, fd, events, fd as u64);
        let r = ctl(libc::EPOLL_CTL_MOD).or_else(|_| ctl(libc::EPOLL_CTL_ADD));
        if r.is_err()
            && let Some((c, _)) = parked.remove(&fd)
        {
            drop(parked);
            self.close(c);
        }
    }
}

/// The next item of a pool's queue; `None` to stop. std's channel has one receiver, so a
/// pool's threads take turns at it: one waits on the queue, the others on the lock (a
/// dequeue is short next to a stage's work). No thread wakes without an item.
fn next<T>(rx: &Mutex<Receiver<Option<T>>>) -> Option<T> {
    rx.lock()
        .unwrap_or_else(|e| e.into_inner())
        .recv()
        .ok()
        .flatten()
}

impl SedaServer {
    /// Starts the accept stage and a pool of one thread per CPU of `cpus` (one unpinned
    /// thread when empty) for each other stage, on a free loopback port.
    pub fn start(docs: Docs, cpus: &[u32], opts: ServerOpts) -> io::Result<SedaServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let epfd = sys::epoll_create()?;
        sys::epoll_ctl(
            epfd.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            listener.as_raw_fd(),
            libc::EPOLLIN,
            u64::MAX,
        )?;
        let (parse_tx, parse_rx) = channel::<Option<Conn>>();
        let (read_tx, read_rx) = channel::<Option<Parsed>>();
        let (send_tx, send_rx) = channel::<Option<Conn>>();
        let queues = (parse_tx.clone(), read_tx.clone(), send_tx.clone());
        let stats = Arc::new(StageStats::default());
        let pipe = Arc::new(Pipeline {
            parse: parse_tx,
            read: read_tx,
            send: send_tx,
            epfd,
            parked: Mutex::new(HashMap::new()),
            live: AtomicUsize::new(0),
            docs,
            opts,
            stats: stats.clone(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let per_pool = cpus.len().max(1);
        // Made before the first thread: dropped on an error below, it stops those started.
        let mut server = SedaServer {
            addr,
            stop: stop.clone(),
            threads: Vec::new(),
            stats,
            queues,
            per_pool: 0,
        };
        let cpu = |i: usize| cpus.get(i % per_pool).copied();
        use smtlab_placement::pin::spawn_pinned as spawn;
        {
            let (pipe, stop) = (pipe.clone(), stop.clone());
            server
                .threads
                .push(spawn(cpu(0), Stage::Accept.thread_name(), move || {
                    accept_stage(listener, &pipe, &stop);
                })?);
        }
        let parse_rx = Arc::new(Mutex::new(parse_rx));
        let read_rx = Arc::new(Mutex::new(read_rx));
        let send_rx = Arc::new(Mutex::new(send_rx));
        for i in 0..per_pool {
            // Counted before the threads of this round start, so a failed start below
            // still sends a stop to each (an extra one is never taken).
            server.per_pool += 1;
            let name = |stage: Stage| format!("{}{i}", stage.thread_name());
            let (p, rx) = (pipe.clone(), parse_rx.clone());
            server
                .threads
                .push(spawn(cpu(i), name(Stage::Parse), move || {
                    pool(&rx, |c| parse_stage(&p, c));
                })?);
            let (p, rx) = (pipe.clone(), read_rx.clone());
            server
                .threads
                .push(spawn(cpu(i), name(Stage::Read), move || {
                    pool(&rx, |r| read_stage(&p, r));
                })?);
            let (p, rx) = (pipe.clone(), send_rx.clone());
            server
                .threads
                .push(spawn(cpu(i), name(Stage::Send), move || {
                    pool(&rx, |c| send_stage(&p, c));
                })?);
        }
        Ok(server)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many items `stage` handled so far.
    pub fn handled(&self, stage: Stage) -> u64 {
        self.stats.handled[stage.index()].load(Ordering::Relaxed)
    }

    /// The thread id (`gettid`) that handled `stage`'s last item; 0 before the first.
    pub fn last_thread(&self, stage: Stage) -> i32 {
        self.stats.last_tid[stage.index()].load(Ordering::Relaxed)
    }
}

impl Drop for SedaServer {
    fn drop(&mut self) {
        // The accept stage sees the flag within 100 ms; each pool thread takes one stop.
        // The last thread to go drops the pipeline, which closes every parked and queued
        // connection.
        self.stop.store(true, Ordering::SeqCst);
        for _ in 0..self.per_pool {
            let _ = self.queues.0.send(None);
            let _ = self.queues.1.send(None);
            let _ = self.queues.2.send(None);
        }
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

/// A pool thread: takes items off its queue and runs `stage` on each until its stop.
fn pool<T>(rx: &Mutex<Receiver<Option<T>>>, mut stage: impl FnMut(T)) {
    while let Some(item) = next(rx) {
        stage(item);
    }
}

/// The accept stage: new connections go to the parse queue; parked ones that became
/// ready go to the parse (readable) or send (writable) queue; parked ones past their
/// deadline are closed.
fn accept_stage(listener: TcpListener, pipe: &Pipeline, stop: &AtomicBool) {
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let mut last_sweep = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // At most 100 ms, so the stop flag and the deadlines are seen.
        let n = sys::wait(pipe.epfd.as_raw_fd(), &mut events, 100_000_000).unwrap_or(0);
        for ev in &events[..n] {
            let token = ev.u64;
            if token == u64::MAX {
                accept_all(&listener, pipe);
                continue;
            }
            let taken = pipe
                .parked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&(token as RawFd));
            if let Some((c, out)) = taken {
                pipe.stats.note(Stage::Accept);
                pipe.hand_on(if out { Next::Send(c) } else { Next::Parse(c) });
            }
        }
        if last_sweep.elapsed() >= Duration::from_millis(100) {
            last_sweep = Instant::now();
            sweep(pipe);
        }
    }
}

fn accept_all(listener: &TcpListener, pipe: &Pipeline) {
    while let Ok(fd) = sys::accept(listener.as_raw_fd()) {
        if pipe.live.load(Ordering::SeqCst) >= pipe.opts.max_conns {
            // Over the bound: refuse rather than grow without limit.
            let _ = sys::send(
                fd.as_raw_fd(),
                &response_head(503, "Service Unavailable", 0, false),
                0,
            );
            continue;
        }
        let _ = sys::set_nodelay(fd.as_raw_fd());
        pipe.live.fetch_add(1, Ordering::SeqCst);
        pipe.stats.note(Stage::Accept);
        pipe.hand_on(Next::Parse(Conn {
            fd,
            buf: Vec::new(),
            out: Vec::new(),
            out_off: 0,
            keep_alive: false,
            since: Instant::now(),
        }));
    }
}

/// Closes parked connections past their deadline: a partial request head or an unsent
/// response is reset (slowloris, a client that stops reading), an idle kept-alive
/// connection closed as usual.
fn sweep(pipe: &Pipeline) {
    let timeout = pipe.opts.idle_timeout;
    let expired: Vec<Conn> = {
        let mut parked = pipe.parked.lock().unwrap_or_else(|e| e.into_inner());
        let late: Vec<RawFd> = parked
            .iter()
            .filter(|(_, (c, _))| c.since.elapsed() >= timeout)
            .map(|(&fd, _)| fd)
            .collect();
        late.iter()
            .filter_map(|fd| parked.remove(fd).map(|(c, _)| c))
            .collect()
    };
    for c in expired {
        let fd = c.fd.as_raw_fd();
        if !c.buf.is_empty() || c.out_off < c.out.len() || unsent(fd) {
            abort_on_close(fd);
        }
        pipe.close(c);
    }
}

/// The parse stage: reads what the socket has and parses the request head.
fn parse_stage(pipe: &Pipeline, mut c: Conn) {
    pipe.stats.note(Stage::Parse);
    let mut chunk = [0u8; 4096];
    let mut closed = false;
    loop {
        match sys::read(c.fd.as_raw_fd(), &mut chunk) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => {
                c.buf.extend_from_slice(&chunk[..n]);
                if c.buf.len() > request::MAX_HEAD + request::MAX_BODY as usize {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    pipe.hand_on(after_read(c, closed));
}

/// What follows once `c.buf` holds what arrived: a complete request goes to the read
/// stage, a bad one gets its error, a partial one waits (or closes with its client).
fn after_read(mut c: Conn, closed: bool) -> Next {
    match request::parse(&c.buf) {
        Ok(Some(r)) if c.buf.len() >= r.head_len + r.content_length as usize => {
            Next::Read(Parsed { conn: c, req: r })
        }
        Err(rej) => {
            c.out = error_response(rej);
            c.out_off = 0;
            c.keep_alive = false;
            c.buf.clear();
            Next::Send(c)
        }
        Ok(_) if closed => Next::Close(c),
        Ok(Some(r)) => {
            if owes_continue(&r, c.buf.len()) {
                // 25 bytes on a connection with nothing else in flight: the send
                // buffer has room, and a client gone needs no answer.
                let _ = sys::send(c.fd.as_raw_fd(), request::CONTINUE, 0);
            }
            Next::Park(c, false)
        }
        Ok(None) => Next::Park(c, false),
    }
}

/// The read stage: the file is read into the response buffer after its head (a
/// dynamic request's page is made here too, as the threads server makes it).
fn read_stage(pipe: &Pipeline, p: Parsed) {
    pipe.stats.note(Stage::Read);
    let Parsed { mut conn, req } = p;
    let used = req.head_len + req.content_length as usize;
    let r = reply(&pipe.docs, &req, &conn.buf[req.head_len..used]);
    conn.buf.drain(..used);
    let mut out = r.head;
    let mut keep_alive = r.keep_alive;
    if let Some((mut f, size)) = r.file {
        let head_len = out.len();
        out.reserve_exact(size as usize);
        // The copy this server exists for: page cache -> user buffer.
        match (&mut f).take(size).read_to_end(&mut out) {
            Ok(n) if n as u64 == size => {}
            _ => {
                // The file changed under the server: the head promised more bytes than
                // can be sent, so the connection ends after what was read.
                out.truncate(head_len);
                keep_alive = false;
                abort_on_close(conn.fd.as_raw_fd());
            }
        }
    }
    conn.out = out;
    conn.out_off = 0;
    conn.keep_alive = keep_alive;
    conn.since = Instant::now();
    pipe.hand_on(Next::Send(conn));
}

/// The send stage: writes what is left of the response without blocking; a full socket
/// parks the connection until it is writable.
fn send_stage(pipe: &Pipeline, mut c: Conn) {
    pipe.stats.note(Stage::Send);
    let fd = c.fd.as_raw_fd();
    while c.out_off < c.out.len() {
        match sys::send(fd, &c.out[c.out_off..], 0) {
            Ok(n) if n > 0 => {
                c.out_off += n;
                c.since = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                pipe.hand_on(Next::Park(c, true));
                return;
            }
            _ => {
                pipe.close(c);
                return;
            }
        }
    }
    c.out = Vec::new();
    c.out_off = 0;
    if !c.keep_alive {
        pipe.close(c);
        return;
    }
    c.since = Instant::now();
    // A pipelined request may already be here.
    let next = if c.buf.is_empty() {
        Next::Park(c, false)
    } else {
        after_read(c, false)
    };
    pipe.hand_on(next);
}
