//! One client thread: its connections on one epoll instance, level-triggered, every
//! socket non-blocking.
//!
//! A kept-alive connection costs two system calls per request in the steady state
//! (the read that completes a response and the write of the next request, which goes
//! out at once because the socket buffer is empty); `epoll_wait` is shared by all
//! connections that are ready together. Write interest is only asked for when a write
//! would block. With a busy-poll window the thread keeps calling `epoll_wait` without
//! sleeping for that long after each turn that found events, so a steady stream of
//! answers never has to wake it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Instant;

use crate::http::{ErrorKind, Feed, Response};
use crate::stats::{ConnStats, ThreadReport};
use crate::sys;
use crate::{Mix, Rng};

/// What one thread runs: its share of the connections and of the rate.
pub(crate) struct ThreadPlan {
    pub addr: SocketAddr,
    pub conns: usize,
    /// Requests per second for this thread's connections together (open loop).
    pub rate_per_s: Option<f64>,
    /// Most bits per second one connection may receive (SPECweb99-style pacing).
    pub conn_bits_per_s: Option<f64>,
    /// Without keep-alive every connection carries one request, whatever the server says.
    pub keep_alive: bool,
    pub duration_ns: u64,
    pub warmup_ns: u64,
    pub timeout_ns: u64,
    pub max_requests: u64,
    pub seed: u64,
    /// First connection's number over the whole load (for per-connection results).
    pub first_conn: usize,
    /// How long to keep polling without sleeping after a turn that found events.
    pub busy_poll_ns: u64,
    /// Set: the load ends at the next turn of the loop (within 50 ms), counted so far.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No socket, or a kept-alive socket between requests; waits for `due_ns`.
    Idle,
    Connecting,
    Writing,
    Reading,
}

struct Conn {
    fd: RawFd,
    state: State,
    req: usize,
    written: usize,
    resp: Response,
    /// When this request's latency starts: its scheduled time in an open loop, the
    /// moment it was started otherwise.
    start_ns: u64,
    /// When the current operation began (for the timeout).
    op_ns: u64,
    /// Open loop: the next request's scheduled time.
    next_due_ns: u64,
    interval_ns: u64,
    want_out: bool,
    /// Paced loads: when the connection's first request started.
    pace_origin: Option<u64>,
    /// Open loop: the first scheduled time, and requests started since.
    first_due_ns: u64,
    started: u64,
    stats: ConnStats,
}

pub(crate) struct Engine<'a> {
    plan: ThreadPlan,
    mix: &'a Mix,
    epfd: OwnedFd,
    conns: Vec<Conn>,
    timers: BinaryHeap<Reverse<(u64, usize)>>,
    origin: Instant,
    rng: Rng,
    buf: Vec<u8>,
    report: ThreadReport,
    attempts: u64,
}

fn now_ns(origin: Instant) -> u64 {
    origin.elapsed().as_nanos() as u64
}

impl<'a> Engine<'a> {
    pub fn new(plan: ThreadPlan, mix: &'a Mix) -> io::Result<Self> {
        let epfd = sys::epoll_create()?;
        let origin = Instant::now();
        let interval_ns = plan
            .rate_per_s
            .map(|r| (plan.conns as f64 * 1e9 / r).max(1.0) as u64)
            .unwrap_or(0);
        let conns = (0..plan.conns)
            .map(|i| Conn {
                fd: -1,
                state: State::Idle,
                req: 0,
                written: 0,
                resp: Response::default(),
                start_ns: 0,
                op_ns: 0,
                // Spread the connections' schedules over one interval.
                next_due_ns: interval_ns * i as u64 / plan.conns.max(1) as u64,
                interval_ns,
                want_out: false,
                pace_origin: None,
                first_due_ns: interval_ns * i as u64 / plan.conns.max(1) as u64,
                started: 0,
                stats: ConnStats {
                    conn: plan.first_conn + i,
                    ..ConnStats::default()
                },
            })
            .collect();
        let seed = plan.seed;
        Ok(Engine {
            plan,
            mix,
            epfd,
            conns,
            timers: BinaryHeap::new(),
            origin,
            rng: Rng::new(seed),
            buf: vec![0; 64 * 1024],
            report: ThreadReport::new(),
            attempts: 0,
        })
    }

    /// Runs the load for the plan's duration and returns what was counted.
    pub fn run(mut self) -> io::Result<ThreadReport> {
        let end_ns = self.plan.duration_ns;
        // The thread's CPU time, less what it spent spinning on empty polls
        // (`busy_poll`): what is left is its work on the load. Time it was kept off its
        // CPU (a CPU shared with the server) is not work: the generator was not the limit.
        let cpu_start_ns = smtlab_bench::clock::thread_cpu_ns();
        let mut spun_ns = 0u64;
        for i in 0..self.conns.len() {
            let due = self.conns[i].next_due_ns;
            if self.plan.rate_per_s.is_some() && due > 0 {
                self.timers.push(Reverse((due, i)));
            } else {
                self.start_request(i, 0);
            }
        }
        let mut events: Vec<libc::epoll_event> =
            vec![libc::epoll_event { events: 0, u64: 0 }; 256.min(self.conns.len().max(1))];
        let mut last_sweep = 0u64;
        let mut poll_until = 0u64;
        loop {
            let now = now_ns(self.origin);
            if now >= end_ns
                || self
                    .plan
                    .stop
                    .as_ref()
                    .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
                || (self.attempts >= self.plan.max_requests
                    && self.conns.iter().all(|c| c.state == State::Idle))
            {
                break;
            }
            // Timers due now start their requests.
            while let Some(&Reverse((due, i))) = self.timers.peek() {
                if due > now {
                    break;
                }
                self.timers.pop();
                if self.conns[i].state == State::Idle {
                    self.start_request(i, due);
                }
            }
            if now.saturating_sub(last_sweep) > 50_000_000 {
                for i in 0..self.conns.len() {
                    let c = &self.conns[i];
                    if c.state != State::Idle && now.saturating_sub(c.op_ns) > self.plan.timeout_ns
                    {
                        self.fail(i, ErrorKind::Timeout);
                    }
                }
                last_sweep = now;
            }
            let mut wait_ns = (end_ns - now).min(50_000_000);
            if let Some(&Reverse((due, _))) = self.timers.peek() {
                wait_ns = wait_ns.min(due.saturating_sub(now));
            }
            // Inside the busy-poll window the wait does not sleep. Otherwise to the
            // nanosecond: a timer rounded up to the millisecond would send open-loop
            // requests late and count that lateness as the server's.
            if now < poll_until {
                wait_ns = 0;
            }
            let n = sys::wait(self.epfd.as_raw_fd(), &mut events, wait_ns)?;
            if n == 0 && wait_ns == 0 {
                // A turn of a busy poll that found nothing: spinning, not work.
                spun_ns += now_ns(self.origin) - now;
            }
            if n > 0 && self.plan.busy_poll_ns > 0 {
                poll_until = now_ns(self.origin) + self.plan.busy_poll_ns;
            }
            for ev in &events[..n] {
                let i = ev.u64 as usize;
                let flags = ev.events;
                self.on_event(i, flags);
            }
        }
        let elapsed = now_ns(self.origin);
        // Requests past their timeout by now are timeouts (the sweep runs every 50 ms,
        // and starts the next request, which the end must not); the rest still waiting
        // are counted as unanswered.
        for c in &mut self.conns {
            let waiting = c.state != State::Idle;
            if waiting && elapsed.saturating_sub(c.op_ns) > self.plan.timeout_ns {
                self.report.error(ErrorKind::Timeout, 0);
                c.stats.errors += 1;
            } else if waiting {
                self.report.unanswered += 1;
            }
            if c.interval_ns > 0 && c.first_due_ns <= end_ns {
                let due = (end_ns - c.first_due_ns) / c.interval_ns + 1;
                self.report.unsent += due.saturating_sub(c.started);
            }
        }
        // The sockets close as the engine drops, when this returns.
        let mut report = std::mem::replace(&mut self.report, ThreadReport::new());
        report.window_ns = elapsed.saturating_sub(self.plan.warmup_ns);
        let cpu_ns = smtlab_bench::clock::thread_cpu_ns().saturating_sub(cpu_start_ns);
        report.busy = Some((cpu_ns.saturating_sub(spun_ns), elapsed));
        report.conns = self.conns.iter().map(|c| c.stats.clone()).collect();
        Ok(report)
    }

    fn counting(&self, now: u64) -> bool {
        now >= self.plan.warmup_ns
    }

    /// Starts connection `i`'s next request; `scheduled` is its scheduled time (0: now).
    fn start_request(&mut self, i: usize, scheduled: u64) {
        if self.attempts >= self.plan.max_requests {
            self.conns[i].state = State::Idle;
            return;
        }
        let now = now_ns(self.origin);
        self.attempts += 1;
        let req = self.mix.choose(&mut self.rng);
        let c = &mut self.conns[i];
        c.started += 1;
        c.req = req;
        c.written = 0;
        c.start_ns = if scheduled > 0 { scheduled } else { now };
        c.op_ns = now;
        if c.interval_ns > 0 {
            // The schedule runs on whatever the server does: a late response makes the
            // next request late, and its latency counts from when it was due.
            c.next_due_ns = c.start_ns + c.interval_ns;
        }
        let expect = self.mix.rendered[req].expect_body_len;
        c.resp.reset(expect);
        if c.fd >= 0 {
            c.state = State::Writing;
            self.write_some(i);
            return;
        }
        // A connect that failed is a connect error, whatever its errno: before there is
        // a connection there is nothing to reset.
        if self.connect(i).is_err() {
            self.fail(i, ErrorKind::Connect);
        }
    }

    fn connect(&mut self, i: usize) -> io::Result<()> {
        let addr = self.plan.addr;
        // Closed by its drop on every error below.
        let fd = sys::tcp_socket(&addr, true)?;
        // As the servers' answers: a lost nodelay costs latency, not correctness.
        let _ = sys::set_nodelay(fd.as_raw_fd());
        if let Err(e) = sys::connect(fd.as_raw_fd(), &addr)
            && e.raw_os_error() != Some(libc::EINPROGRESS)
        {
            return Err(e);
        }
        sys::epoll_ctl(
            self.epfd.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            fd.as_raw_fd(),
            libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP,
            i as u64,
        )?;
        let fd = fd.into_raw_fd();
        let c = &mut self.conns[i];
        c.fd = fd;
        c.want_out = true;
        c.state = State::Connecting;
        self.report.connects += 1;
        Ok(())
    }

    fn set_out(&mut self, i: usize, out: bool) {
        let c = &mut self.conns[i];
        if c.want_out == out || c.fd < 0 {
            return;
        }
        sys::set_interest(self.epfd.as_raw_fd(), c.fd, i, out);
        c.want_out = out;
    }

    fn on_event(&mut self, i: usize, flags: u32) {
        match self.conns[i].state {
            State::Connecting => {
                if flags & (libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32 == 0 {
                    return;
                }
                let err = sys::socket_error(self.conns[i].fd);
                if err != 0 {
                    self.fail(i, ErrorKind::Connect);
                    return;
                }
                self.conns[i].state = State::Writing;
                self.write_some(i);
            }
            State::Writing => {
                if flags & libc::EPOLLIN as u32 != 0 {
                    // The server answered (or closed) before the request was out.
                    self.read_some(i);
                } else {
                    self.write_some(i);
                }
            }
            State::Reading => self.read_some(i),
            State::Idle => {
                if self.conns[i].fd >= 0 && flags & (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 != 0 {
                    // A kept-alive connection closed by the server between requests:
                    // not an error, the next request reconnects.
                    let mut b = [0u8; 1];
                    if !matches!(sys::read(self.conns[i].fd, &mut b), Ok(n) if n > 0) {
                        self.drop_socket(i);
                    }
                }
            }
        }
    }

    fn write_some(&mut self, i: usize) {
        let bytes = self.mix.rendered[self.conns[i].req].bytes.clone();
        loop {
            let c = &mut self.conns[i];
            let rest = &bytes[c.written..];
            if rest.is_empty() {
                c.state = State::Reading;
                c.op_ns = now_ns(self.origin);
                self.set_out(i, false);
                return;
            }
            let n = match sys::send(c.fd, rest, 0) {
                Ok(n) => n,
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => {
                        self.set_out(i, true);
                        return;
                    }
                    Some(libc::EINTR) => continue,
                    _ => {
                        self.fail(i, ErrorKind::Reset);
                        return;
                    }
                },
            };
            c.written += n;
        }
    }

    fn read_some(&mut self, i: usize) {
        loop {
            let fd = self.conns[i].fd;
            let n = match sys::read(fd, &mut self.buf) {
                Ok(n) => n,
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) => return,
                    Some(libc::EINTR) => continue,
                    _ => {
                        self.fail(i, ErrorKind::Reset);
                        return;
                    }
                },
            };
            let feed = if n == 0 {
                self.conns[i].resp.eof()
            } else {
                self.conns[i].resp.feed(&self.buf[..n])
            };
            match feed {
                Feed::NeedMore if n == 0 => unreachable!("eof never needs more"),
                Feed::NeedMore => {
                    if n < self.buf.len() {
                        return;
                    }
                }
                Feed::Done { keep } => {
                    self.complete(i, keep);
                    return;
                }
                Feed::Error(kind) => {
                    self.fail(i, kind);
                    return;
                }
            }
        }
    }

    fn complete(&mut self, i: usize, keep: bool) {
        let now = now_ns(self.origin);
        let counting = self.counting(now);
        let c = &mut self.conns[i];
        let total = c.resp.total_bytes;
        let body = c.resp.body_bytes;
        let latency = now.saturating_sub(c.start_ns);
        self.report.answered += 1;
        if let Some(bps) = self.plan.conn_bits_per_s {
            // The connection's schedule: its bytes so far at the paced rate, from its
            // first request. A server that keeps up finishes every response before the
            // schedule; one that does not falls behind it, and the rate drops.
            let origin = *c.pace_origin.get_or_insert(c.start_ns);
            c.stats.paced_bytes += total;
            let schedule_end = origin + (c.stats.paced_bytes as f64 * 8.0 * 1e9 / bps) as u64;
            c.stats.paced_ns = now.max(schedule_end) - origin;
        }
        if counting {
            c.stats.requests += 1;
            c.stats.bytes += total;
            c.stats.body_bytes += body;
            self.report.record(latency);
        }
        if !keep || !self.plan.keep_alive {
            self.drop_socket(i);
        }
        self.schedule_next(i, now);
    }

    /// After a request ended (well or not): when the connection sends its next one.
    fn schedule_next(&mut self, i: usize, now: u64) {
        let c = &mut self.conns[i];
        c.state = State::Idle;
        let mut due = 0;
        if c.interval_ns > 0 {
            due = c.next_due_ns;
        }
        if let (Some(bps), Some(origin)) = (self.plan.conn_bits_per_s, c.pace_origin) {
            // A paced connection may not receive faster than its rate: the next request
            // waits until the bytes so far would have taken that long since its first
            // request (a late response is made up by a shorter wait, as SPECweb99
            // clients do).
            let paced = origin + (c.stats.paced_bytes as f64 * 8.0 * 1e9 / bps) as u64;
            due = due.max(paced);
        }
        if due > now {
            self.timers.push(Reverse((due, i)));
        } else if self.plan.rate_per_s.is_some() {
            self.start_request(i, due.max(1));
        } else {
            self.start_request(i, 0);
        }
    }

    fn drop_socket(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.fd >= 0 {
            let _ = sys::epoll_ctl(self.epfd.as_raw_fd(), libc::EPOLL_CTL_DEL, c.fd, 0, 0);
            // SAFETY: `c.fd` is open (non-negative) and set to -1 just after, so it is closed
            // once.
            unsafe { libc::close(c.fd) };
            c.fd = -1;
        }
        c.want_out = false;
    }

    fn fail(&mut self, i: usize, kind: ErrorKind) {
        let now = now_ns(self.origin);
        if !matches!(kind, ErrorKind::Connect | ErrorKind::Timeout) {
            // The server did something with the request (a bad answer, a close).
            self.report.answered += 1;
        }
        self.report.error(kind, self.conns[i].resp.status);
        self.conns[i].stats.errors += 1;
        self.drop_socket(i);
        if kind == ErrorKind::Connect {
            // Do not spin on a server that refuses: retry after a pause.
            let c = &mut self.conns[i];
            c.state = State::Idle;
            c.next_due_ns = c.next_due_ns.max(now + 10_000_000);
            self.timers.push(Reverse((now + 10_000_000, i)));
            return;
        }
        self.schedule_next(i, now);
    }
}

impl Drop for Engine<'_> {
    fn drop(&mut self) {
        for c in &self.conns {
            if c.fd >= 0 {
                // SAFETY: a non-negative `c.fd` is open and owned by this engine; drop closes it
                // once.
                unsafe { libc::close(c.fd) };
            }
        }
        // `epfd` closes itself after this.
    }
}
