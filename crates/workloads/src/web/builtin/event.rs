//! The event-driven server (`event`): one non-blocking epoll loop per placement CPU,
//! each with its own `SO_REUSEPORT` listener, files sent with `sendfile`; CGI children
//! started without waiting, their stdout a pipe in the loop's epoll.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::process::{Child, ChildStdout, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use super::super::dynamic::Dynamic;
use super::super::request::{self, Reject, Request};
use smtlab_loadgen::sys;

use super::conn::{abort_on_close, unsent};
use super::{
    Docs, Reply, ServerOpts, dynamic_reply, listener_reuseport, now_ns, owes_continue, reply,
};

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
        let first = listener_reuseport(SocketAddr::new(opts.bind_ip, 0))?;
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
            loops.push(smtlab_placement::pin::spawn_pinned(
                cpus.get(i).copied(),
                name,
                body,
            )?);
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

/// Kills a CGI child's whole process group (the shell and what it started). Only for a
/// child not reaped yet, so its pid, and with it the group id, cannot have been reused.
fn kill_cgi(child: &Child) {
    // SAFETY: killpg() takes no pointers; the pid is of a child not reaped yet (see above), so it
    // names no stranger's group.
    unsafe { libc::killpg(child.id() as libc::pid_t, libc::SIGKILL) };
}

impl EventLoop {
    fn new(listener: TcpListener, docs: Arc<Docs>, opts: ServerOpts) -> io::Result<Self> {
        let ep = sys::epoll_create()?;
        sys::epoll_ctl(
            ep.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            listener.as_raw_fd(),
            libc::EPOLLIN,
            LISTENER,
        )?;
        // Closed by the loop's drop.
        let epfd = ep.into_raw_fd();
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
            // At most 100 ms, so the stop flag is seen.
            let n = sys::wait(self.epfd, &mut events, 100_000_000).unwrap_or(0);
            for ev in &events[..n] {
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
        // The connections close when the loop drops, just after.
    }

    fn accept_all(&mut self) {
        loop {
            let Ok(accepted) = sys::accept(self.listener.as_raw_fd()) else {
                return;
            };
            if self.open >= self.opts.max_conns {
                // Over the bound: closed by its drop.
                continue;
            }
            let _ = sys::set_nodelay(accepted.as_raw_fd());
            // Closed by `close` from here.
            let fd = accepted.into_raw_fd();
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
            let _ = sys::epoll_ctl(
                self.epfd,
                libc::EPOLL_CTL_ADD,
                fd,
                libc::EPOLLIN | libc::EPOLLRDHUP,
                i as u64,
            );
            self.open += 1;
        }
    }

    fn close(&mut self, i: usize) {
        if let Some(c) = self.conns.get_mut(i).and_then(Option::take) {
            let _ = sys::epoll_ctl(self.epfd, libc::EPOLL_CTL_DEL, c.fd, 0, 0);
            // SAFETY: `c` was taken out of the table, so this is the one close of its fd.
            unsafe { libc::close(c.fd) };
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
        // `out` is still open here (dropped just after).
        let _ = sys::epoll_ctl(self.epfd, libc::EPOLL_CTL_DEL, out.as_raw_fd(), 0, 0);
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
        let epfd = self.epfd;
        let registered = child.stdout.take().filter(|out| {
            let pfd = out.as_raw_fd();
            sys::set_nonblocking(pfd, true).is_ok()
                && sys::epoll_ctl(
                    epfd,
                    libc::EPOLL_CTL_ADD,
                    pfd,
                    libc::EPOLLIN,
                    PIPE | i as u64,
                )
                .is_ok()
        });
        let Some(out) = registered else {
            kill_cgi(&child);
            self.reaping.push(child);
            self.close(i);
            return;
        };
        let now = now_ns(self.origin);
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        // No EPOLLIN while the page is made: a pipelined request waits in the socket
        // (level-triggered, it shows again afterwards); a hang-up still shows.
        // A stale `fd` fails, which its next read reports.
        let _ = sys::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, c.fd, libc::EPOLLRDHUP, i as u64);
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
            let e = match sys::read(run.out.as_raw_fd(), &mut self.scratch) {
                Ok(0) => break false,
                Ok(n) => {
                    run.page.extend_from_slice(&self.scratch[..n]);
                    continue;
                }
                Err(e) => e,
            };
            match e.raw_os_error() {
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
        sys::set_interest(self.epfd, fd, i, false);
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
        sys::set_interest(self.epfd, c.fd, i, out);
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
        let n = match sys::read(c.fd, &mut self.scratch) {
            Ok(0) => {
                self.close(i);
                return;
            }
            Ok(n) => n,
            Err(e) => {
                if e.raw_os_error() != Some(libc::EAGAIN) {
                    self.close(i);
                }
                return;
            }
        };
        c.buf.extend_from_slice(&self.scratch[..n]);
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
                    if owes_continue(&req, c.buf.len()) {
                        // 25 bytes on a connection with nothing else in flight: the
                        // send buffer has room, and a client gone needs no answer.
                        let _ = sys::send(c.fd, request::CONTINUE, 0);
                    }
                    return;
                }
                if self.docs.dynamic.is_some() && Dynamic::is_cgi(&req) {
                    consume(&mut c.buf, used);
                    self.start_cgi(i, req);
                    return;
                }
                (reply(&self.docs, &req, &c.buf[req.head_len..used]), used)
            }
            Err(rej) => (Reply::refuse(rej), c.buf.len()),
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
            let Ok(n) = sys::send(c.fd, rest, more) else {
                self.send_stopped(i);
                return;
            };
            *head_off += n;
        }
        if let Some((f, size)) = file {
            while (*off as u64) < *size {
                let left = (*size - *off as u64) as usize;
                let Ok(n) = sys::sendfile(c.fd, f.as_raw_fd(), off, left) else {
                    self.send_stopped(i);
                    return;
                };
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
