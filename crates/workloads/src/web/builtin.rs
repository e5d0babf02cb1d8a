//! The built-in servers: the same file set served by three architectures of the paper's
//! servers, on the placement's CPUs.
//!
//! * [`EventServer`] (`event`): one non-blocking epoll loop per placement CPU, each with
//!   its own `SO_REUSEPORT` listener, files sent with `sendfile` (Flash, nginx).
//! * [`ThreadServer`] (`threads`): an acceptor and a thread per connection, blocking
//!   I/O, bounded in number (Apache worker, the paper's Apache-MT).
//!
//! * [`ProcessServer`] (`processes`): pre-forked worker processes, one connection each
//!   at a time (Apache prefork).
//!
//! With the dynamic requests on, `/dyn/cgi` starts a process per request. The threads
//! and processes servers wait for it in the connection's thread or process; the event
//! server starts it without waiting (its stdout a non-blocking pipe in the loop's epoll,
//! the child on the loop's CPU as it inherits the loop thread's affinity), answers when
//! the pipe reaches end of file, reaps it without blocking, and kills its process group
//! when the client goes away, the connection times out or the server stops.
//!
//! All serve only the file set's URLs (a table lookup after [`super::request::parse`]
//! refused every odd spelling), answer malformed requests with 400, close connections
//! whose request head is not complete within the idle timeout (slowloris), that sit
//! idle that long, or that do not take a whole response within it (a client that stops
//! reading, or reads a little now and then; reset rather than closed, so the unsent
//! bytes go too), hold no buffer for an idle connection, and stop (closing every
//! connection) when dropped.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smtlab_model::CpuSet;
use smtlab_placement::pin::CpuMask;

use super::dynamic::Dynamic;
use super::fileset::FileSet;
use super::request::{self, Method, Reject, Request};

/// What a built-in server may serve: URL to file and size, and the dynamic requests
/// when enabled.
#[derive(Debug, Default)]
pub struct Docs {
    files: HashMap<String, (PathBuf, u64)>,
    dynamic: Option<super::dynamic::Dynamic>,
}

impl Docs {
    pub fn from_set(set: &FileSet) -> Docs {
        Docs {
            files: set
                .files
                .iter()
                .map(|f| (f.url.clone(), (f.path.clone(), f.size)))
                .collect(),
            dynamic: None,
        }
    }

    /// Also answers the dynamic requests under `/dyn/` (see [`super::dynamic`]).
    pub fn with_dynamic(mut self, d: super::dynamic::Dynamic) -> Docs {
        self.dynamic = Some(d);
        self
    }
}

/// Limits shared by the built-in servers.
#[derive(Debug, Clone, Copy)]
pub struct ServerOpts {
    /// The per-connection deadline: a connection whose request head is not complete
    /// within this long of when it was awaited, or whose response has not all gone out
    /// within this long of its start, is closed.
    pub idle_timeout: Duration,
    /// Most open connections (event: per loop; threads: threads).
    pub max_conns: usize,
}

impl Default for ServerOpts {
    fn default() -> Self {
        ServerOpts {
            idle_timeout: Duration::from_secs(10),
            max_conns: 20_000,
        }
    }
}

fn response_head(status: u16, reason: &str, len: u64, keep_alive: bool) -> Vec<u8> {
    let conn = if keep_alive { "keep-alive" } else { "close" };
    format!(
        "HTTP/1.1 {status} {reason}\r\nServer: smtlab\r\nContent-Type: application/octet-stream\r\nContent-Length: {len}\r\nConnection: {conn}\r\n\r\n"
    )
    .into_bytes()
}

fn error_response(r: Reject) -> Vec<u8> {
    let (status, reason) = r.status();
    let mut v = response_head(status, reason, reason.len() as u64, false);
    v.extend_from_slice(reason.as_bytes());
    v
}

/// What to send for a parsed request: a head and maybe a file.
struct Reply {
    head: Vec<u8>,
    file: Option<(std::fs::File, u64)>,
    keep_alive: bool,
}

/// The reply to a dynamic request from its page (or refusal): one function for the
/// pages computed in place and those the event server collects from a CGI child, so
/// every server sends the same bytes.
fn dynamic_reply(req: &Request, answer: Result<Vec<u8>, Reject>) -> Reply {
    match answer {
        Ok(page) => {
            let mut head = response_head(200, "OK", page.len() as u64, req.keep_alive);
            if req.method != Method::Head {
                head.extend_from_slice(&page);
            }
            Reply {
                head,
                file: None,
                keep_alive: req.keep_alive,
            }
        }
        Err(rej) => Reply {
            head: error_response(rej),
            file: None,
            keep_alive: false,
        },
    }
}

fn reply(docs: &Docs, req: &Request, body: &[u8]) -> Reply {
    if let Some(d) = &docs.dynamic
        && req.path.starts_with("/dyn/")
    {
        return dynamic_reply(req, d.answer(req, body));
    }
    let found = docs.files.get(&req.path);
    let opened = found.and_then(|(p, size)| std::fs::File::open(p).ok().map(|f| (f, *size)));
    match (req.method, opened) {
        (Method::Post, _) => Reply {
            head: error_response(Reject::Method),
            file: None,
            keep_alive: false,
        },
        (_, None) => Reply {
            head: error_response(Reject::NotFound),
            file: None,
            keep_alive: false,
        },
        (m, Some((f, size))) => Reply {
            head: response_head(200, "OK", size, req.keep_alive),
            file: (m == Method::Get).then_some((f, size)),
            keep_alive: req.keep_alive,
        },
    }
}

fn listener_reuseport(addr: SocketAddr) -> io::Result<TcpListener> {
    // SAFETY: socket() takes no pointers; a negative result is checked below.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a socket just created and owned by no one else; the listener takes
    // sole ownership and closes it.
    let l = unsafe { TcpListener::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
        // SAFETY: `fd` is the open socket owned by `l`; the option value points at a live
        // c_int whose size is passed with it.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                std::ptr::from_ref(&one).cast::<libc::c_void>(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
    let SocketAddr::V4(a) = addr else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "built-in servers listen on IPv4",
        ));
    };
    let sin = smtlab_loadgen::epoll::sockaddr_in(&a);
    // SAFETY: `sin` is a fully initialised sockaddr_in on the stack, and the length
    // passed is its size.
    let r = unsafe {
        libc::bind(
            fd,
            std::ptr::from_ref(&sin).cast::<libc::sockaddr>(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: listen() on the socket owned by `l`; no pointers.
    if unsafe { libc::listen(fd, 4096) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(l)
}

fn now_ns(origin: Instant) -> u64 {
    origin.elapsed().as_nanos() as u64
}

/// The event-driven server.
#[derive(Debug)]
pub struct EventServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    loops: Vec<JoinHandle<()>>,
}

impl EventServer {
    /// Starts one loop per CPU of `cpus` (one unpinned loop when empty) on a free
    /// loopback port.
    pub fn start(docs: Docs, cpus: &[u32], opts: ServerOpts) -> io::Result<EventServer> {
        let first = listener_reuseport("127.0.0.1:0".parse().expect("address"))?;
        let addr = first.local_addr()?;
        let mut listeners = vec![first];
        for _ in 1..cpus.len().max(1) {
            listeners.push(listener_reuseport(addr)?);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let docs = Arc::new(docs);
        let mut loops = Vec::new();
        for (i, l) in listeners.into_iter().enumerate() {
            let (stop, docs) = (stop.clone(), docs.clone());
            let body = move || {
                if let Ok(mut el) = EventLoop::new(l, docs, opts) {
                    el.run(&stop);
                }
            };
            let name = format!("smtlab-web-ev{i}");
            let h = match cpus.get(i) {
                Some(&c) => smtlab_placement::pin::spawn_pinned(Some(c), name, body)?,
                None => std::thread::Builder::new().name(name).spawn(body)?,
            };
            loops.push(h);
        }
        Ok(EventServer { addr, stop, loops })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for EventServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.loops.drain(..) {
            let _ = h.join();
        }
    }
}

/// A CGI child of the event loop whose page is still coming.
struct CgiRun {
    child: Child,
    /// Its stdout, non-blocking, in the loop's epoll under [`PIPE`] | connection.
    out: ChildStdout,
    page: Vec<u8>,
    req: Request,
}

enum EState {
    Reading,
    /// Waiting for a CGI child's page; the connection is watched for hang-ups only.
    Cgi(Box<CgiRun>),
    Sending {
        head: Vec<u8>,
        head_off: usize,
        file: Option<(std::fs::File, u64)>,
        off: i64,
        keep_alive: bool,
    },
}

struct EConn {
    fd: RawFd,
    buf: Vec<u8>,
    state: EState,
    /// When the current request head started being awaited, or sending last moved.
    since_ns: u64,
    want_out: bool,
}

struct EventLoop {
    listener: TcpListener,
    epfd: RawFd,
    docs: Arc<Docs>,
    opts: ServerOpts,
    conns: Vec<Option<EConn>>,
    free: Vec<usize>,
    open: usize,
    origin: Instant,
    scratch: Vec<u8>,
    /// CGI children that were killed or closed their stdout and are not reaped yet.
    reaping: Vec<Child>,
}

const LISTENER: u64 = u64::MAX;
/// Marks a CGI pipe's epoll token (the rest is its connection's index).
const PIPE: u64 = 1 << 62;

fn set_events(epfd: RawFd, fd: RawFd, token: u64, events: i32) {
    let mut ev = libc::epoll_event {
        events: events as u32,
        u64: token,
    };
    // SAFETY: `ev` is a live epoll_event the kernel only reads; bad fds make the call fail,
    // nothing worse.
    unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, &mut ev) };
}

/// Kills a CGI child's whole process group (the shell and what it started). Only for a
/// child not reaped yet, so its pid, and with it the group id, cannot have been reused.
fn kill_cgi(child: &Child) {
    // SAFETY: killpg() takes no pointers; the pid is of a child not reaped yet (see above), so it
    // names no stranger's group.
    unsafe { libc::killpg(child.id() as libc::pid_t, libc::SIGKILL) };
}

impl EventLoop {
    fn new(listener: TcpListener, docs: Arc<Docs>, opts: ServerOpts) -> io::Result<Self> {
        // SAFETY: epoll_create1() takes no pointers; a negative result is checked below.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: LISTENER,
        };
        // SAFETY: `epfd` was just created, the listener's fd is open while `listener` lives,
        // and `ev` is a live epoll_event the kernel only reads.
        unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, listener.as_raw_fd(), &mut ev) };
        Ok(EventLoop {
            listener,
            epfd,
            docs,
            opts,
            conns: Vec::new(),
            free: Vec::new(),
            open: 0,
            origin: Instant::now(),
            scratch: vec![0; 16 * 1024],
            reaping: Vec::new(),
        })
    }

    fn run(&mut self, stop: &AtomicBool) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 512];
        let mut last_sweep = 0;
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: `events` is a live buffer of `events.len()` epoll_events the kernel writes
            // into; the result bounds the slice read below.
            let n = unsafe {
                libc::epoll_wait(self.epfd, events.as_mut_ptr(), events.len() as i32, 100)
            };
            for ev in &events[..n.max(0) as usize] {
                let (key, flags) = (ev.u64, ev.events);
                if key == LISTENER {
                    self.accept_all();
                } else if key & PIPE != 0 {
                    self.on_pipe((key & !PIPE) as usize);
                } else {
                    self.on_event(key as usize, flags);
                }
            }
            if !self.reaping.is_empty() {
                self.reap();
            }
            let now = now_ns(self.origin);
            if now - last_sweep > 200_000_000 {
                self.sweep(now);
                last_sweep = now;
            }
        }
        for i in 0..self.conns.len() {
            self.close(i);
        }
    }

    fn accept_all(&mut self) {
        loop {
            // SAFETY: accept4() on the listener's open fd with null address pointers, which
            // it allows; a negative result is checked below.
            let fd = unsafe {
                libc::accept4(
                    self.listener.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                return;
            }
            if self.open >= self.opts.max_conns {
                // SAFETY: `fd` was just accepted and is owned by no one else yet.
                unsafe { libc::close(fd) };
                continue;
            }
            let one: libc::c_int = 1;
            // SAFETY: `fd` is the socket just accepted; the option value points at a live c_int
            // whose size is passed with it.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    std::ptr::from_ref(&one).cast::<libc::c_void>(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            let conn = EConn {
                fd,
                buf: Vec::new(),
                state: EState::Reading,
                since_ns: now_ns(self.origin),
                want_out: false,
            };
            let i = match self.free.pop() {
                Some(i) => {
                    self.conns[i] = Some(conn);
                    i
                }
                None => {
                    self.conns.push(Some(conn));
                    self.conns.len() - 1
                }
            };
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
                u64: i as u64,
            };
            // SAFETY: `fd` is the socket just accepted and `ev` a live epoll_event the kernel
            // only reads.
            unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, fd, &mut ev) };
            self.open += 1;
        }
    }

    fn close(&mut self, i: usize) {
        if let Some(c) = self.conns.get_mut(i).and_then(Option::take) {
            // SAFETY: `c` was taken out of the table, so this is the one close of its fd;
            // EPOLL_CTL_DEL accepts a null event.
            unsafe {
                libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_DEL, c.fd, std::ptr::null_mut());
                libc::close(c.fd);
            }
            if let EState::Cgi(run) = c.state {
                // Nobody will read the page: the child and what it started go now.
                kill_cgi(&run.child);
                self.end_cgi(*run);
            }
            self.free.push(i);
            self.open -= 1;
        }
    }

    /// Takes a CGI run's pipe out of the loop and closes it; the child is reaped now if it
    /// has ended, otherwise by [`Self::reap`].
    fn end_cgi(&mut self, run: CgiRun) -> (Vec<u8>, Request) {
        let CgiRun {
            mut child,
            out,
            page,
            req,
        } = run;
        // SAFETY: `out` is still open here (dropped just after), and EPOLL_CTL_DEL accepts
        // a null event.
        unsafe {
            libc::epoll_ctl(
                self.epfd,
                libc::EPOLL_CTL_DEL,
                out.as_raw_fd(),
                std::ptr::null_mut(),
            )
        };
        drop(out);
        if !matches!(child.try_wait(), Ok(Some(_))) {
            self.reaping.push(child);
        }
        (page, req)
    }

    /// Reaps the CGI children that have ended, without waiting.
    fn reap(&mut self) {
        self.reaping
            .retain_mut(|c| matches!(c.try_wait(), Ok(None)));
    }

    /// Starts the CGI child for `req` on connection `i` and returns at once; the page is
    /// sent by [`Self::on_pipe`] when the child's stdout reaches end of file.
    fn start_cgi(&mut self, i: usize, req: Request) {
        let Some(d) = &self.docs.dynamic else {
            return;
        };
        // Spawned from this (pinned) thread, the child inherits the loop's CPU.
        let Ok(mut child) = d.cgi_command().stdout(Stdio::piped()).spawn() else {
            // As the waiting servers answer a CGI program that cannot start.
            self.respond(i, dynamic_reply(&req, Err(Reject::NotFound)));
            return;
        };
        let Some(out) = child.stdout.take() else {
            kill_cgi(&child);
            self.reaping.push(child);
            self.close(i);
            return;
        };
        let pfd = out.as_raw_fd();
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: PIPE | i as u64,
        };
        // SAFETY: `pfd` is the child's stdout pipe, open while `out` lives; `ev` is a live
        // epoll_event the kernel only reads.
        let registered = unsafe {
            let flags = libc::fcntl(pfd, libc::F_GETFL);
            libc::fcntl(pfd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
                && libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_ADD, pfd, &mut ev) == 0
        };
        if !registered {
            kill_cgi(&child);
            self.reaping.push(child);
            self.close(i);
            return;
        }
        let now = now_ns(self.origin);
        let epfd = self.epfd;
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        // No EPOLLIN while the page is made: a pipelined request waits in the socket
        // (level-triggered, it shows again afterwards); a hang-up still shows.
        set_events(epfd, c.fd, i as u64, libc::EPOLLRDHUP);
        c.want_out = false;
        c.state = EState::Cgi(Box::new(CgiRun {
            child,
            out,
            page: Vec::new(),
            req,
        }));
        c.since_ns = now;
    }

    /// Reads what a CGI child wrote; at end of file, sends the page.
    fn on_pipe(&mut self, i: usize) {
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
            return;
        };
        let EState::Cgi(run) = &mut c.state else {
            return;
        };
        let failed = loop {
            // SAFETY: `scratch` is a live buffer of `scratch.len()` bytes the kernel writes into;
            // the pipe is open while `run.out` lives.
            let n = unsafe {
                libc::read(
                    run.out.as_raw_fd(),
                    self.scratch.as_mut_ptr().cast(),
                    self.scratch.len(),
                )
            };
            if n > 0 {
                run.page.extend_from_slice(&self.scratch[..n as usize]);
                continue;
            }
            if n == 0 {
                break false;
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN) => return,
                Some(libc::EINTR) => {}
                _ => break true,
            }
        };
        let EState::Cgi(run) = std::mem::replace(&mut c.state, EState::Reading) else {
            return;
        };
        let fd = c.fd;
        if failed {
            kill_cgi(&run.child);
        }
        let (page, req) = self.end_cgi(*run);
        // Reading again (and writing when `send` needs to).
        smtlab_loadgen::epoll::set_interest(self.epfd, fd, i, false);
        let answer = if failed {
            Err(Reject::NotFound)
        } else {
            Ok(page)
        };
        self.respond(i, dynamic_reply(&req, answer));
    }

    fn set_out(&mut self, i: usize, out: bool) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        if c.want_out == out {
            return;
        }
        smtlab_loadgen::epoll::set_interest(self.epfd, c.fd, i, out);
        c.want_out = out;
    }

    fn on_event(&mut self, i: usize, flags: u32) {
        let Some(c) = self.conns.get(i).and_then(Option::as_ref) else {
            return;
        };
        match c.state {
            EState::Cgi(_) => {
                // The client went away (nginx aborts its upstream request likewise).
                if flags & (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32 != 0 {
                    self.close(i);
                }
            }
            EState::Sending { .. } => {
                if flags & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
                    self.close(i);
                } else if flags & libc::EPOLLOUT as u32 != 0 {
                    self.send(i);
                }
            }
            EState::Reading => self.read(i),
        }
    }

    fn read(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        // SAFETY: `scratch` is a live buffer of `scratch.len()` bytes the kernel writes into;
        // `c.fd` is open while the connection is in the table.
        let n = unsafe { libc::read(c.fd, self.scratch.as_mut_ptr().cast(), self.scratch.len()) };
        if n == 0 {
            self.close(i);
            return;
        }
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EAGAIN) {
                self.close(i);
            }
            return;
        }
        c.buf.extend_from_slice(&self.scratch[..n as usize]);
        self.process(i);
    }

    /// Answers the request at the start of the buffer, if complete.
    fn process(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        let (r, used) = match request::parse(&c.buf) {
            Ok(None) => return,
            Ok(Some(req)) => {
                let used = req.head_len + req.content_length as usize;
                if c.buf.len() < used {
                    return;
                }
                if self.docs.dynamic.is_some() && Dynamic::is_cgi(&req) {
                    consume(&mut c.buf, used);
                    self.start_cgi(i, req);
                    return;
                }
                (reply(&self.docs, &req, &c.buf[req.head_len..used]), used)
            }
            Err(rej) => (
                Reply {
                    head: error_response(rej),
                    file: None,
                    keep_alive: false,
                },
                c.buf.len(),
            ),
        };
        consume(&mut c.buf, used);
        self.respond(i, r);
    }

    fn respond(&mut self, i: usize, r: Reply) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        c.state = EState::Sending {
            head: r.head,
            head_off: 0,
            file: r.file,
            off: 0,
            keep_alive: r.keep_alive,
        };
        c.since_ns = now_ns(self.origin);
        self.send(i);
    }

    fn send(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        let EState::Sending {
            head,
            head_off,
            file,
            off,
            keep_alive,
        } = &mut c.state
        else {
            return;
        };
        while *head_off < head.len() {
            let more = if file.is_some() { libc::MSG_MORE } else { 0 };
            let rest = &head[*head_off..];
            // SAFETY: `rest` is a live slice of `rest.len()` bytes the kernel only reads; `c.fd`
            // is open while the connection is in the table.
            let n = unsafe {
                libc::send(
                    c.fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL | more,
                )
            };
            if n < 0 {
                self.send_stopped(i);
                return;
            }
            *head_off += n as usize;
        }
        if let Some((f, size)) = file {
            while (*off as u64) < *size {
                let left = (*size - *off as u64) as usize;
                // SAFETY: `off` is a live off_t the kernel updates; `f` stays open for the call and
                // `c.fd` while the connection is in the table.
                let n = unsafe { libc::sendfile(c.fd, f.as_raw_fd(), off, left) };
                if n < 0 {
                    self.send_stopped(i);
                    return;
                }
                if n == 0 {
                    // The file shrank under us: the length promised cannot be kept.
                    self.close(i);
                    return;
                }
            }
        }
        let keep = *keep_alive;
        if !keep {
            self.close(i);
            return;
        }
        c.state = EState::Reading;
        c.since_ns = now_ns(self.origin);
        let pending = !c.buf.is_empty();
        self.set_out(i, false);
        if pending {
            self.process(i);
        }
    }

    /// After a send or sendfile that failed: a full socket waits for writability; any
    /// other error ends the connection. Progress does not move the deadline: the whole
    /// response must go out within the idle timeout of its start, so a client that
    /// reads a byte now and then is closed as one that reads nothing.
    fn send_stopped(&mut self, i: usize) {
        if io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
            self.close(i);
            return;
        }
        self.set_out(i, true);
    }

    fn sweep(&mut self, now: u64) {
        let limit = self.opts.idle_timeout.as_nanos() as u64;
        for i in 0..self.conns.len() {
            if let Some(c) = &self.conns[i]
                && now.saturating_sub(c.since_ns) > limit
            {
                // An idle kept-alive connection is closed as usual; one in the middle
                // of a request or response, or whose client has not taken all of the
                // last one, is reset.
                if !matches!(c.state, EState::Reading) || !c.buf.is_empty() || unsent(c.fd) {
                    abort_on_close(c.fd);
                }
                self.close(i);
            }
        }
    }
}

impl Drop for EventLoop {
    fn drop(&mut self) {
        for i in 0..self.conns.len() {
            self.close(i);
        }
        // Killed already or done with their output: waiting for them is short.
        for mut child in self.reaping.drain(..) {
            kill_cgi(&child);
            let _ = child.wait();
        }
        // SAFETY: `epfd` is owned by this loop and closed once, here in drop.
        unsafe { libc::close(self.epfd) };
    }
}

/// Drops the first `used` bytes of a connection's buffer, and the buffer itself when
/// nothing is left (an idle connection holds none).
fn consume(buf: &mut Vec<u8>, used: usize) {
    buf.drain(..used);
    if buf.is_empty() && buf.capacity() > 0 {
        *buf = Vec::new();
    }
}

/// The thread-per-connection server.
#[derive(Debug)]
pub struct ThreadServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

type Registry = Arc<Mutex<HashMap<usize, RawFd>>>;

impl ThreadServer {
    /// Starts the acceptor on `cpus` (connection threads inherit them; every CPU of the
    /// placement, as the kernel spreads Apache's threads).
    pub fn start(docs: Docs, cpus: &[u32], opts: ServerOpts) -> io::Result<ThreadServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let set: CpuSet = cpus.iter().copied().collect();
        let stop2 = stop.clone();
        let (ok_tx, ok_rx) = std::sync::mpsc::sync_channel(1);
        let acceptor = std::thread::Builder::new()
            .name("smtlab-web-acc".into())
            .spawn(move || {
                if !set.is_empty()
                    && let Err(e) = smtlab_placement::pin::pin_current_thread(&set)
                {
                    let _ = ok_tx.send(Err(io::Error::other(e.to_string())));
                    return;
                }
                let _ = ok_tx.send(Ok(()));
                accept_loop(listener, Arc::new(docs), opts, &stop2);
            })?;
        ok_rx
            .recv()
            .map_err(|_| io::Error::other("acceptor ended before starting"))??;
        Ok(ThreadServer {
            addr,
            stop,
            acceptor: Some(acceptor),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for ThreadServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: TcpListener, docs: Arc<Docs>, opts: ServerOpts, stop: &AtomicBool) {
    let registry: Registry = Arc::default();
    let live = Arc::new(AtomicUsize::new(0));
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    let mut next_id = 0usize;
    let mut pfd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: `pfd` is a live pollfd of the listener's open fd, and one entry is passed.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        while let Ok((s, _)) = listener.accept() {
            workers.retain(|h| !h.is_finished());
            if live.load(Ordering::SeqCst) >= opts.max_conns {
                // Over the bound: refuse rather than grow without limit.
                use std::io::Write;
                let mut s = s;
                let _ = s.set_nonblocking(true);
                let _ = s.write_all(&response_head(503, "Service Unavailable", 0, false));
                continue;
            }
            let _ = s.set_nonblocking(false);
            let _ = s.set_nodelay(true);
            let id = next_id;
            next_id += 1;
            registry.lock().expect("registry").insert(id, s.as_raw_fd());
            live.fetch_add(1, Ordering::SeqCst);
            let (docs, reg, live2) = (docs.clone(), registry.clone(), live.clone());
            let spawned = std::thread::Builder::new()
                .name("smtlab-web-conn".into())
                .stack_size(64 * 1024)
                .spawn(move || {
                    serve_blocking(s.into_raw_fd(), &docs, opts);
                    let fd = reg.lock().expect("registry").remove(&id);
                    if let Some(fd) = fd {
                        // SAFETY: the fd was in the registry, so it is still open and removed from
                        // it under the lock: this is its one close.
                        unsafe { libc::close(fd) };
                    }
                    live2.fetch_sub(1, Ordering::SeqCst);
                });
            match spawned {
                Ok(h) => workers.push(h),
                Err(_) => {
                    if let Some(fd) = registry.lock().expect("registry").remove(&id) {
                        // SAFETY: the fd was in the registry, so it is still open and removed from
                        // it under the lock: this is its one close.
                        unsafe { libc::close(fd) };
                    }
                    live.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }
    // Wake every connection thread out of its read or write.
    for fd in registry.lock().expect("registry").values() {
        // SAFETY: the fds in the registry are open (they are closed only after removal
        // under this lock); shutdown() takes no pointers.
        unsafe { libc::shutdown(*fd, libc::SHUT_RDWR) };
    }
    for h in workers {
        let _ = h.join();
    }
}

/// Sends all of `data` on a blocking socket by `deadline`: each call may block only
/// for what is left of it (`SO_SNDTIMEO` alone would start again with every partial
/// send, so a client reading a byte now and then could hold the connection for ever).
fn write_all(fd: RawFd, mut data: &[u8], flags: i32, deadline: Instant) -> bool {
    while !data.is_empty() {
        if !time_left(fd, deadline) {
            return false;
        }
        // SAFETY: `data` is a live slice of `data.len()` bytes the kernel only reads.
        let n = unsafe {
            libc::send(
                fd,
                data.as_ptr().cast(),
                data.len(),
                libc::MSG_NOSIGNAL | flags,
            )
        };
        if n <= 0 {
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            abort_if_timed_out(fd);
            return false;
        }
        data = &data[n as usize..];
    }
    true
}

/// Makes the coming `close` of a connection past its deadline a reset: the client
/// learns at once, and what it did not read is dropped instead of waiting in the
/// kernel for it.
fn abort_on_close(fd: RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `linger` is a live libc::linger whose size is passed with it.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::from_ref(&linger).cast::<libc::c_void>(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

/// Whether bytes sent on the connection still wait in the kernel for the client to
/// take them (a response it has not read).
fn unsent(fd: RawFd) -> bool {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ for sockets) writes one int.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    r == 0 && n > 0
}

/// After a blocking call that failed: one that ran into its socket timeout (`EAGAIN`)
/// ended at the deadline, and the close is made a reset.
fn abort_if_timed_out(fd: RawFd) {
    if io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
        abort_on_close(fd);
    }
}

/// Sets the send timeout to what is left until `deadline`; `false` (and the close to
/// come made a reset) when nothing is.
fn time_left(fd: RawFd, deadline: Instant) -> bool {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        abort_on_close(fd);
        return false;
    }
    set_timeout(fd, libc::SO_SNDTIMEO, left);
    true
}

fn set_timeout(fd: RawFd, opt: i32, d: Duration) {
    let tv = libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros().max(1) as libc::suseconds_t,
    };
    // SAFETY: `tv` is a live timeval whose size is passed with it.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            std::ptr::from_ref(&tv).cast::<libc::c_void>(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
}

/// One connection of the threaded server; the fd is closed by the caller. The
/// connection's deadline: each request head must arrive, and each response go out,
/// within the idle timeout, however the client trickles its bytes or reads ours.
fn serve_blocking(fd: RawFd, docs: &Docs, opts: ServerOpts) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // The whole head must arrive within the idle timeout, however it trickles in.
        let deadline = Instant::now() + opts.idle_timeout;
        let req = loop {
            match request::parse(&buf) {
                Ok(Some(r)) if buf.len() >= r.head_len + r.content_length as usize => break Ok(r),
                Ok(_) => {}
                Err(rej) => break Err(rej),
            }
            // An idle kept-alive connection is closed as usual at its deadline; one
            // with part of a head (slowloris) is reset.
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if !buf.is_empty() || unsent(fd) {
                    abort_on_close(fd);
                }
                return;
            }
            set_timeout(fd, libc::SO_RCVTIMEO, left);
            // SAFETY: `chunk` is a live buffer of `chunk.len()` bytes the kernel writes into.
            let n = unsafe { libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len()) };
            if n <= 0 {
                if !buf.is_empty() || unsent(fd) {
                    abort_if_timed_out(fd);
                }
                return;
            }
            buf.extend_from_slice(&chunk[..n as usize]);
        };
        let req = match req {
            Ok(r) => r,
            Err(rej) => {
                write_all(
                    fd,
                    &error_response(rej),
                    0,
                    Instant::now() + opts.idle_timeout,
                );
                return;
            }
        };
        let used = req.head_len + req.content_length as usize;
        let r = reply(docs, &req, &buf[req.head_len..used]);
        buf.drain(..used);
        let deadline = Instant::now() + opts.idle_timeout;
        let more = if r.file.is_some() { libc::MSG_MORE } else { 0 };
        if !write_all(fd, &r.head, more, deadline) {
            return;
        }
        if let Some((f, size)) = &r.file {
            let mut off: libc::off_t = 0;
            while (off as u64) < *size {
                if !time_left(fd, deadline) {
                    return;
                }
                // SAFETY: `off` is a live off_t the kernel updates; `f` stays open for the call.
                let n = unsafe {
                    libc::sendfile(fd, f.as_raw_fd(), &mut off, (*size - off as u64) as usize)
                };
                if n <= 0 {
                    abort_if_timed_out(fd);
                    return;
                }
            }
        }
        if !r.keep_alive {
            return;
        }
    }
}

/// The pre-forked process server (`processes`): worker processes forked from the
/// measuring thread, each accepting on the shared listener and serving one connection
/// at a time with the threaded server's code (Apache prefork, the paper's Apache-MP).
/// Every worker runs on the placement's CPUs, enters smtlab's cgroup (killed by the
/// guardian if smtlab dies), asks for SIGKILL when the thread that forked it dies
/// (`PR_SET_PDEATHSIG`), checks its parent every 200 ms, and is killed and reaped when
/// the server is dropped.
///
/// Workers only accept, read, open files and write after the fork: no locks of the
/// parent's other threads are needed there (glibc's allocator is fork-safe).
#[derive(Debug)]
pub struct ProcessServer {
    addr: SocketAddr,
    pids: Vec<libc::pid_t>,
}

impl ProcessServer {
    pub fn start(
        docs: Docs,
        cpus: &[u32],
        opts: ServerOpts,
        workers: usize,
    ) -> io::Result<ProcessServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        // Everything the child needs is prepared before the fork.
        // Sized to the highest CPU (no 1,024-CPU cap); applying it allocates nothing.
        let mask = if cpus.is_empty() {
            None
        } else {
            let set: CpuSet = cpus.iter().copied().collect();
            Some(
                CpuMask::from_set(&set)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
            )
        };
        // SAFETY: getpid() takes nothing and cannot fail.
        let parent = unsafe { libc::getpid() };
        let lfd = listener.as_raw_fd();
        // Workers enter smtlab's cgroup, so its guardian kills them if smtlab dies.
        let tree = smtlab_bench::process::ForkHook::prepare();
        let mut server = ProcessServer {
            addr,
            pids: Vec::new(),
        };
        for _ in 0..workers.max(1) {
            // SAFETY: the child runs only async-signal-safe calls and this crate's
            // server code, which takes no lock another thread of the parent could hold
            // (see the type's docs), and leaves by _exit.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err(io::Error::last_os_error());
            }
            if pid == 0 {
                // The child: never returns into the parent's code.
                let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    tree.enter();
                    // SAFETY: prctl and getppid take no pointers; _exit ends the child
                    // without running the parent's destructors.
                    unsafe {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                        if libc::getppid() != parent {
                            libc::_exit(1);
                        }
                    }
                    if let Some(m) = &mask
                        && m.apply(0).is_err()
                    {
                        // SAFETY: _exit ends the child without running the parent's code.
                        unsafe { libc::_exit(2) };
                    }
                    worker_loop(lfd, &docs, opts, parent);
                }))
                .map_or(3, |_| 0);
                // SAFETY: _exit ends the forked child without unwinding into the parent's
                // code.
                unsafe { libc::_exit(code) };
            }
            // Set from here too, so it holds when start returns.
            if let Some(m) = &mask {
                // The child pins itself too and exits if it cannot: an error here changes nothing.
                let _ = m.apply(pid);
            }
            server.pids.push(pid);
        }
        // The listener stays open in the parent too (dropped here, the children keep
        // their copies), so the port stays bound while the workers live.
        drop(listener);
        Ok(server)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn pids(&self) -> &[libc::pid_t] {
        &self.pids
    }
}

fn worker_loop(lfd: RawFd, docs: &Docs, opts: ServerOpts, parent: libc::pid_t) {
    let mut pfd = libc::pollfd {
        fd: lfd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: getppid() takes nothing and cannot fail.
        if unsafe { libc::getppid() } != parent {
            return;
        }
        // SAFETY: `pfd` is a live pollfd of the listener's fd, and one entry is passed.
        if unsafe { libc::poll(&mut pfd, 1, 200) } <= 0 {
            continue;
        }
        // Several workers wake for one connection: the losers get EAGAIN.
        // SAFETY: accept4() on the inherited listener's fd with null address pointers,
        // which it allows; a negative result is checked below.
        let fd = unsafe {
            libc::accept4(
                lfd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            )
        };
        if fd < 0 {
            continue;
        }
        // Blocking from here, as a prefork worker is.
        // SAFETY: `fd` is the socket just accepted; the option value points at a live c_int
        // whose size is passed with it.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
            let one: libc::c_int = 1;
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                std::ptr::from_ref(&one).cast::<libc::c_void>(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        serve_blocking(fd, docs, opts);
        // SAFETY: `fd` was accepted above and is closed once, here.
        unsafe { libc::close(fd) };
    }
}

impl Drop for ProcessServer {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: `pid` is a worker forked by this server and not reaped yet, so it is no
            // stranger's.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for &pid in &self.pids {
            let mut status = 0;
            // SAFETY: `status` is a live int the kernel writes; `pid` is our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        }
    }
}
