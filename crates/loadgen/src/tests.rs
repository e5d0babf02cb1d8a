//! The load generator against tiny servers that misbehave on purpose.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::*;

#[derive(Clone, Copy)]
pub(crate) enum Behaviour {
    /// 200 with `n` body bytes, kept alive.
    Good(usize),
    /// Says 100 bytes, sends 40, closes.
    ShortBody,
    /// 500 with a small body.
    Status500,
    /// Reads the request and closes without a word.
    CloseEarly,
    /// Resets the connection (linger 0) after reading the request.
    Reset,
    /// Good, but the first request after `after_ms` waits `stall_ms` before answering,
    /// and every connection stalls during that spell.
    Stall { after_ms: u64, stall_ms: u64 },
}

pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    stop: Arc<AtomicBool>,
    pub(crate) served: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_request(s: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut b = [0u8; 1024];
    loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            return true;
        }
    }
}

pub(crate) fn serve(b: Behaviour) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let (stop2, served2) = (stop.clone(), served.clone());
    let thread = std::thread::spawn(move || {
        let start = Instant::now();
        let stall_until = Arc::new(AtomicU64::new(0));
        let mut workers = Vec::new();
        while !stop2.load(Ordering::SeqCst) {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let (stop3, served3, stall3) = (stop2.clone(), served2.clone(), stall_until.clone());
            workers.push(std::thread::spawn(move || {
                while !stop3.load(Ordering::SeqCst) {
                    if !read_request(&mut s) {
                        return;
                    }
                    served3.fetch_add(1, Ordering::SeqCst);
                    match b {
                        Behaviour::Good(n) => {
                            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n");
                            let mut out = head.into_bytes();
                            out.extend(std::iter::repeat_n(b'x', n));
                            if s.write_all(&out).is_err() {
                                return;
                            }
                        }
                        Behaviour::Stall { after_ms, stall_ms } => {
                            let now = start.elapsed().as_millis() as u64;
                            if now >= after_ms {
                                // The first request past `after_ms` starts the one stall.
                                let _ = stall3.compare_exchange(
                                    0,
                                    now + stall_ms,
                                    Ordering::SeqCst,
                                    Ordering::SeqCst,
                                );
                            }
                            let until = stall3.load(Ordering::SeqCst);
                            // Sleep through the stall, but not past the end of the test.
                            let mut now = start.elapsed().as_millis() as u64;
                            while until > now && !stop3.load(Ordering::SeqCst) {
                                std::thread::sleep(Duration::from_millis((until - now).min(20)));
                                now = start.elapsed().as_millis() as u64;
                            }
                            let out = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                            if s.write_all(out).is_err() {
                                return;
                            }
                        }
                        Behaviour::ShortBody => {
                            let mut out =
                                b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n".to_vec();
                            out.extend([b'y'; 40]);
                            let _ = s.write_all(&out);
                            return;
                        }
                        Behaviour::Status500 => {
                            let out = b"HTTP/1.1 500 Oops\r\nContent-Length: 4\r\n\r\noops";
                            if s.write_all(out).is_err() {
                                return;
                            }
                        }
                        Behaviour::CloseEarly => return,
                        Behaviour::Reset => {
                            use std::os::fd::AsRawFd;
                            let _ = crate::sys::reset_on_close(s.as_raw_fd());
                            return;
                        }
                    }
                }
            }));
        }
        for w in workers {
            let _ = w.join();
        }
    });
    TestServer {
        addr,
        stop,
        served,
        thread: Some(thread),
    }
}

fn bounded(addr: SocketAddr, conns: usize, n: u64, keep_alive: bool) -> LoadConfig {
    let mut cfg = LoadConfig::new(addr, conns, Duration::from_secs(20));
    cfg.max_requests = n;
    cfg.keep_alive = keep_alive;
    cfg.timeout = Duration::from_secs(5);
    cfg
}

fn load(cfg: &LoadConfig, expect: Option<u64>) -> LoadReport {
    let mut spec = RequestSpec::get("/f");
    spec.expect_body_len = expect;
    let mix = Arc::new(Mix::single(spec, &cfg.host, cfg.keep_alive));
    run(cfg, mix, Pinning::Unpinned).unwrap()
}

#[test]
fn a_good_server_gets_exactly_the_requests_asked_for() {
    let srv = serve(Behaviour::Good(1000));
    // Busy polling changes when the thread sleeps, never what it counts.
    for (keep_alive, poll_us) in [(true, 0), (false, 0), (true, 200), (false, 200)] {
        let before = srv.served.load(Ordering::SeqCst);
        let mut cfg = bounded(srv.addr, 4, 200, keep_alive);
        cfg.busy_poll = Duration::from_micros(poll_us);
        let r = load(&cfg, Some(1000));
        assert_eq!(r.error_count(), 0, "{}", r.errors_line());
        assert_eq!(r.requests, 200);
        assert_eq!(r.body_bytes, 200 * 1000);
        assert_eq!(srv.served.load(Ordering::SeqCst) - before, 200);
        assert_eq!(r.latency.len(), 200);
        assert_eq!(r.conns.iter().map(|c| c.requests).sum::<u64>(), 200);
        let connects = if keep_alive { 4 } else { 200 };
        assert_eq!(r.connects, connects, "keep_alive={keep_alive}");
    }
}

#[test]
fn a_wrong_size_is_an_error_not_throughput() {
    let srv = serve(Behaviour::Good(1000));
    let r = load(&bounded(srv.addr, 2, 50, true), Some(999));
    assert_eq!(r.requests, 0);
    assert_eq!(r.errors.get(&ErrorKind::WrongLength), Some(&50));
}

#[test]
fn misbehaving_servers_are_counted_exactly_by_kind() {
    let cases = [
        (Behaviour::ShortBody, ErrorKind::ShortBody),
        (Behaviour::Status500, ErrorKind::BadStatus),
        (Behaviour::CloseEarly, ErrorKind::Closed),
        (Behaviour::Reset, ErrorKind::Reset),
    ];
    for (b, kind) in cases {
        let srv = serve(b);
        let r = load(&bounded(srv.addr, 3, 30, false), None);
        assert_eq!(r.requests, 0, "{kind:?}");
        assert_eq!(r.error_count(), 30, "{kind:?}: {}", r.errors_line());
        assert_eq!(r.errors.get(&kind), Some(&30), "{}", r.errors_line());
        assert_eq!(r.conns.iter().map(|c| c.errors).sum::<u64>(), 30);
    }
    let srv = serve(Behaviour::Status500);
    let r = load(&bounded(srv.addr, 1, 5, true), None);
    assert_eq!(r.bad_statuses.get(&500), Some(&5));
    assert!(r.errors_line().contains("500: 5"), "{}", r.errors_line());
}

#[test]
fn a_refused_connection_is_a_connect_error() {
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut cfg = bounded(addr, 2, 4, true);
    cfg.duration = Duration::from_secs(5);
    let r = load(&cfg, None);
    assert_eq!(r.errors.get(&ErrorKind::Connect), Some(&4));
}

#[test]
fn a_silent_server_times_out() {
    let srv = serve(Behaviour::Stall {
        after_ms: 0,
        stall_ms: 60_000,
    });
    let mut cfg = bounded(srv.addr, 2, 2, true);
    cfg.timeout = Duration::from_millis(200);
    cfg.duration = Duration::from_secs(5);
    let r = load(&cfg, None);
    assert_eq!(r.errors.get(&ErrorKind::Timeout), Some(&2));
}

#[test]
fn a_server_that_never_answers_is_counted_as_timeouts_even_within_the_timeout() {
    // The load (0.5 s) ends long before the timeout (10 s): a server that answered
    // nothing at all still shows as timeouts, not as "no errors".
    let srv = serve(Behaviour::Stall {
        after_ms: 0,
        stall_ms: 60_000,
    });
    let cfg = LoadConfig::new(srv.addr, 3, Duration::from_millis(500));
    let r = load(&cfg, None);
    assert_eq!(r.requests, 0);
    assert_eq!(
        r.errors.get(&ErrorKind::Timeout),
        Some(&3),
        "{}",
        r.errors_line()
    );
    assert_eq!(r.unanswered, 0);
    assert_eq!(r.unsent, 0);
}

#[test]
fn requests_in_flight_at_the_end_are_unanswered_not_errors() {
    let srv = serve(Behaviour::Good(100));
    let cfg = LoadConfig::new(srv.addr, 3, Duration::from_millis(300));
    let r = load(&cfg, Some(100));
    assert!(r.requests > 0);
    assert_eq!(r.error_count(), 0, "{}", r.errors_line());
    assert!(r.unanswered <= 3, "{}", r.unanswered);
    // A closed loop has no schedule to fall behind.
    assert_eq!(r.unsent, 0);
}

#[test]
fn an_open_loop_counts_the_requests_it_never_sent() {
    // 200/s on 2 connections for 1 s; the server stops answering after 0.3 s, so the
    // about 140 requests due in the last 0.7 s are never sent.
    let srv = serve(Behaviour::Stall {
        after_ms: 300,
        stall_ms: 60_000,
    });
    let mut cfg = LoadConfig::new(srv.addr, 2, Duration::from_secs(1));
    cfg.rate_per_s = Some(200.0);
    let r = load(&cfg, Some(2));
    assert!(r.requests >= 40, "{}", r.requests);
    assert_eq!(r.unanswered, 2);
    assert!((110..=160).contains(&r.unsent), "unsent {}", r.unsent);
}

#[test]
fn an_open_loop_keeps_its_rate_and_sees_a_stall_in_its_high_percentiles() {
    // 200 requests/s for 2 s; the server stalls for 500 ms after 0.7 s. With the
    // correction, about a quarter of the requests were due during the stall, so p90 and
    // above sit in the stall, not just the handful that were in flight when it began.
    let srv = serve(Behaviour::Stall {
        after_ms: 700,
        stall_ms: 500,
    });
    let mut cfg = LoadConfig::new(srv.addr, 4, Duration::from_secs(2));
    cfg.rate_per_s = Some(200.0);
    let r = load(&cfg, Some(2));
    assert_eq!(r.error_count(), 0, "{}", r.errors_line());
    let p = r.percentiles();
    assert!(
        r.requests >= 250 && r.requests <= 420,
        "requests {}",
        r.requests
    );
    assert!(p.p50_ns < 100_000_000, "p50 {}", p.p50_ns);
    assert!(
        p.p90_ns > 100_000_000,
        "p90 {} should be inside the stall",
        p.p90_ns
    );
    assert!(p.max_ns >= 400_000_000, "max {}", p.max_ns);
    // About 80 requests were due more than 100 ms before the stall ended; a closed loop
    // would show only the 4 in flight.
    let slow = r.slower_than(100_000_000);
    assert!(slow >= 40, "{slow} requests over 100 ms");
}

#[test]
fn slower_than_counts_the_responses_above_a_bound() {
    let mut t = stats::ThreadReport::new();
    for ms in [1u64, 5, 50, 99, 101, 150, 900, 2000] {
        t.record(ms * 1_000_000);
    }
    let mut u = stats::ThreadReport::new();
    u.record(300_000_000);
    let r = LoadReport::merge(vec![t, u]);
    assert_eq!(r.slower_than(100_000_000), 5);
    assert_eq!(r.slower_than(1_000_000_000), 1);
    assert_eq!(r.slower_than(0), 9);
    assert_eq!(r.slower_than(3_000_000_000), 0);
}

#[test]
fn a_polling_open_loop_keeps_its_schedule() {
    // A poll window longer than the gap between requests: the thread never sleeps, and
    // the timers must still start each request when it is due, not all at once.
    let srv = serve(Behaviour::Good(10));
    let mut cfg = LoadConfig::new(srv.addr, 2, Duration::from_millis(600));
    cfg.rate_per_s = Some(500.0);
    cfg.busy_poll = Duration::from_millis(20);
    let r = load(&cfg, Some(10));
    assert_eq!(r.error_count(), 0, "{}", r.errors_line());
    assert!(
        (200..=360).contains(&r.requests),
        "600 ms at 500/s gave {} requests",
        r.requests
    );
}

#[test]
fn paced_connections_stay_under_their_bit_rate() {
    let srv = serve(Behaviour::Good(5000));
    let mut cfg = LoadConfig::new(srv.addr, 2, Duration::from_millis(1500));
    cfg.conn_bits_per_s = Some(400_000.0);
    let r = load(&cfg, Some(5000));
    assert_eq!(r.error_count(), 0);
    for c in &r.conns {
        let bps = c.bits_per_s(r.window_ns);
        assert!(bps <= 440_000.0 && bps > 200_000.0, "{bps}");
    }
    assert_eq!(r.conforming(320_000.0), 2);
    assert_eq!(r.conforming(1_000_000.0), 0);
}

#[test]
fn settings_are_checked() {
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mix = Arc::new(Mix::single(RequestSpec::get("/"), "h", true));
    let mut cfg = LoadConfig::new(addr, 1, Duration::from_millis(10));
    cfg.threads = 2;
    let e = run(&cfg, mix.clone(), Pinning::Unpinned).unwrap_err();
    assert!(e.to_string().contains("2 threads for 1 connections"), "{e}");
    let cfg = LoadConfig::new(
        "192.0.2.1:80".parse().unwrap(),
        1,
        Duration::from_millis(10),
    );
    let e = run(&cfg, mix, Pinning::Unpinned).unwrap_err();
    assert!(e.to_string().contains("not an address of this host"), "{e}");
}

#[test]
fn weighted_mix_follows_its_weights() {
    let specs = [RequestSpec::get("/a"), RequestSpec::get("/b")];
    let mix = Mix::weighted(&specs, &[3.0, 1.0], "h", true).unwrap();
    let mut rng = Rng::new(5);
    let n = 40_000;
    let a = (0..n).filter(|_| mix.choose(&mut rng) == 0).count();
    let share = a as f64 / n as f64;
    assert!((share - 0.75).abs() < 0.02, "{share}");
    assert!(Mix::weighted(&specs, &[0.0, 0.0], "h", true).is_err());
}

#[test]
fn a_client_waiting_on_a_stalled_server_is_not_saturated_busy_polling_or_not() {
    // Spinning on empty polls is waiting too.
    for poll_us in [0, 200] {
        // The server stalls once, at its first request: a server each.
        let srv = serve(Behaviour::Stall {
            after_ms: 0,
            stall_ms: 400,
        });
        let mut cfg = LoadConfig::new(srv.addr, 2, Duration::from_millis(500));
        cfg.threads = 1;
        cfg.busy_poll = Duration::from_micros(poll_us);
        let r = load(&cfg, None);
        let busy = r.client_busy.expect("a thread's busy time is known");
        assert!((0.0..0.5).contains(&busy), "busy poll {poll_us} us: {busy}");
        assert!(!r.client_saturated());
    }
}

#[test]
fn load_threads_busy_all_their_time_are_the_limit_and_half_busy_ones_are_not() {
    let part = |cpu_ns: u64, wall_ns: u64| {
        let mut t = crate::stats::ThreadReport::new();
        t.busy = Some((cpu_ns, wall_ns));
        t
    };
    let r = LoadReport::merge(vec![part(99, 100), part(95, 100)]);
    assert!((r.client_busy.unwrap() - 0.97).abs() < 1e-9);
    assert!(r.client_saturated());
    let r = LoadReport::merge(vec![part(99, 100), part(20, 100)]);
    assert!(!r.client_saturated(), "{:?}", r.client_busy);
    // One thread that did not say: nothing is known of the others' either.
    let r = LoadReport::merge(vec![part(99, 100), crate::stats::ThreadReport::new()]);
    assert_eq!(r.client_busy, None);
}
