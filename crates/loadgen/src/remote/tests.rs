//! The remote path: merging, and agents on loopback driven by a coordinator.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use smtlab_placement::Token;

use super::coordinator::merge;
use super::proto::{FromAgent, LoadSpec, ToAgent, Wire, WireReport};
use super::*;
use super::{auth, proto, tls};
use crate::stats::{LoadReport, histogram};
use crate::tests::{Behaviour, serve as test_server};
use crate::{LoadConfig, RequestSpec, Rng};

fn report_of(latencies: &[u64]) -> LoadReport {
    let mut h = histogram();
    for &l in latencies {
        h.record(l).unwrap();
    }
    LoadReport {
        window_ns: 1_000_000_000,
        requests: latencies.len() as u64,
        bytes: 0,
        body_bytes: 0,
        connects: 1,
        unanswered: 0,
        unsent: 0,
        errors: BTreeMap::new(),
        bad_statuses: BTreeMap::new(),
        latency: h,
        conns: Vec::new(),
        client_busy: None,
    }
}

#[test]
fn merged_percentiles_equal_those_of_the_union_of_all_samples() {
    // Three agents with unlike distributions: fast, slow, and a long tail.
    let mut rng = Rng::new(7);
    let parts: Vec<Vec<u64>> = [
        (20_000u64, 50_000u64, 30_000usize),
        (200_000, 400_000, 5_000),
        (10_000, 90_000_000, 2_000),
    ]
    .iter()
    .map(|&(lo, hi, n)| (0..n).map(|_| lo + rng.next_u64() % (hi - lo)).collect())
    .collect();
    let wires: Vec<WireReport> = parts
        .iter()
        .map(|p| {
            // Through the wire as the agent sends it: a `done` line of JSON.
            let done = super::proto::FromAgent::Done {
                report: Box::new(WireReport::from_report(&report_of(p), 0).unwrap()),
            };
            let line = serde_json::to_vec(&done).unwrap();
            match serde_json::from_slice(&line).unwrap() {
                super::proto::FromAgent::Done { report } => *report,
                other => panic!("{other:?}"),
            }
        })
        .collect();
    let merged = merge(&wires).unwrap();
    let union: Vec<u64> = parts.concat();
    let all = report_of(&union);
    assert_eq!(merged.latency.len(), union.len() as u64);
    assert_eq!(merged.requests, union.len() as u64);
    for i in 0..=1000 {
        let q = f64::from(i) / 1000.0;
        assert_eq!(
            merged.latency.value_at_quantile(q),
            all.latency.value_at_quantile(q),
            "quantile {q}"
        );
    }
    assert_eq!(merged.latency.max(), all.latency.max());
    assert_eq!(merged.latency.min(), all.latency.min());
    assert_eq!(merged.percentiles(), all.percentiles());
    // What averaging the agents' percentiles would have said instead: not the same.
    let avg_p99 = parts
        .iter()
        .map(|p| report_of(p).percentiles().p99_ns as f64)
        .sum::<f64>()
        / 3.0;
    assert!(
        (avg_p99 - all.percentiles().p99_ns as f64).abs() > 1000.0,
        "averaged p99 {avg_p99} vs {}",
        all.percentiles().p99_ns
    );
}

/// The longest a test waits for an agent's answer: a test fails rather than hangs.
const REPLY: Duration = Duration::from_secs(20);

pub(super) const TOKEN: &str = "a-token-of-enough-length";

pub(super) struct TestAgent {
    pub(super) addr: String,
    /// What the agent told, a line per event.
    events: Arc<std::sync::Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestAgent {
    /// Waits (at most [`REPLY`]) for the agent to tell an event containing `text`: the
    /// connection's thread tells its event after the connection is closed, so a client may
    /// see the close first.
    fn told(&self, text: &str) -> Result<(), Vec<String>> {
        let began = std::time::Instant::now();
        loop {
            let told = self.events.lock().unwrap().clone();
            if told.iter().any(|e| e.contains(text)) {
                return Ok(());
            }
            if began.elapsed() > REPLY {
                return Err(told);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(super) fn agent(allow: &str) -> TestAgent {
    agent_with(
        allow,
        AgentLimits {
            max_duration: Duration::from_secs(5),
            ..AgentLimits::default()
        },
    )
}

fn agent_with(allow: &str, limits: AgentLimits) -> TestAgent {
    agent_on(allow, limits, Channel::Plain)
}

fn agent_on(allow: &str, limits: AgentLimits, channel: Channel) -> TestAgent {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let cfg = AgentConfig {
        token: Token::new(TOKEN).unwrap(),
        allow: AllowList::parse(allow).unwrap(),
        cpus: Vec::new(),
        limits,
        channel,
    };
    let stop2 = stop.clone();
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let events2 = events.clone();
    let thread = std::thread::spawn(move || {
        let on_event = move |e: AgentEvent| events2.lock().unwrap().push(e.to_string());
        serve(listener, cfg, &stop2, Arc::new(on_event)).unwrap();
    });
    TestAgent {
        addr,
        events,
        stop,
        thread: Some(thread),
    }
}

fn load_to(addr: std::net::SocketAddr, conns: usize, ms: u64) -> LoadConfig {
    let mut cfg = LoadConfig::new(addr, conns, Duration::from_millis(ms));
    cfg.threads = 0;
    cfg
}

#[test]
fn two_agents_run_one_load_and_their_counts_add_up() {
    let server = test_server(Behaviour::Good(100));
    let (a, b) = (agent("127.0.0.1"), agent("127.0.0.0/8"));
    let token = Token::new(TOKEN).unwrap();
    let mut remote =
        Remote::connect(&[a.addr.clone(), b.addr.clone()], &token, Channel::Plain).unwrap();
    assert_eq!(remote.agents().len(), 2);
    // Loopback: one clock, so the offset is within the round trip.
    for info in remote.agents() {
        assert!(
            info.clock_offset_ns.unsigned_abs() <= info.rtt_ns.max(1_000_000),
            "{info:?}"
        );
    }
    let spec = RequestSpec::get("/x");
    let r = remote
        .run(
            &load_to(server.addr, 5, 300),
            std::slice::from_ref(&spec),
            &[1.0],
        )
        .unwrap();
    assert_eq!(r.agents.len(), 2);
    assert_eq!(r.agents[0].connections + r.agents[1].connections, 5);
    assert!(
        r.agents
            .iter()
            .all(|x| x.requests > 0 && x.error_count() == 0),
        "{r:?}"
    );
    assert_eq!(
        r.merged.requests,
        r.agents.iter().map(|x| x.requests).sum::<u64>()
    );
    assert_eq!(r.merged.latency.len(), r.merged.requests);
    assert_eq!(r.merged.conns.len(), 5);
    let mut numbers: Vec<usize> = r.merged.conns.iter().map(|c| c.conn).collect();
    numbers.dedup();
    assert_eq!(numbers.len(), 5, "connections numbered apart: {numbers:?}");
    // Started together: well within the 50 ms lead.
    assert!(r.start_spread_ns < 50_000_000, "{}", r.start_spread_ns);
    // A second load on the same connections.
    let again = remote
        .run(&load_to(server.addr, 2, 100), &[spec], &[1.0])
        .unwrap();
    assert!(again.merged.requests > 0);
}

#[test]
fn an_agent_that_is_gone_leaves_its_share_to_the_others_when_surviving() {
    let server = test_server(Behaviour::Good(100));
    let a = agent("127.0.0.1");
    // An address nothing listens on any more: an agent that was killed.
    let gone = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let token = Token::new(TOKEN).unwrap();
    let hosts = [a.addr.clone(), gone.clone()];
    let e = Remote::connect(&hosts, &token, Channel::Plain)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&gone) && e.contains("cannot connect"), "{e}");
    let mut remote = Remote::connect_surviving(&hosts, &token, Channel::Plain).unwrap();
    assert_eq!(remote.agents().len(), 1);
    assert_eq!(remote.lost().len(), 1);
    assert_eq!(remote.lost()[0].lost_agent(), Some(gone.as_str()));
    let r = remote
        .run(
            &load_to(server.addr, 4, 200),
            &[RequestSpec::get("/x")],
            &[1.0],
        )
        .unwrap();
    // The whole load from the one left, and the report says one was lost.
    assert_eq!(r.agents.len(), 1);
    assert_eq!(r.agents[0].connections, 4);
    assert!(r.agents[0].requests > 0, "{r:?}");
    assert_eq!(r.lost.len(), 1);
    assert!(r.lost[0].contains(&gone), "{:?}", r.lost);
    // None left: an error naming the agent, not an empty load.
    let e = Remote::connect_surviving(std::slice::from_ref(&gone), &token, Channel::Plain)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&gone), "{e}");
}

#[test]
fn a_wrong_token_is_refused() {
    let a = agent("127.0.0.1");
    let wrong = Token::new("another-token-of-length").unwrap();
    let e = Remote::connect(std::slice::from_ref(&a.addr), &wrong, Channel::Plain)
        .unwrap_err()
        .to_string();
    assert!(e.contains("wrong token") && e.contains(&a.addr), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn a_target_outside_the_allow_list_gets_no_load() {
    let server = test_server(Behaviour::Good(10));
    let a = agent("10.99.0.0/16");
    let mut remote = Remote::connect(
        std::slice::from_ref(&a.addr),
        &Token::new(TOKEN).unwrap(),
        Channel::Plain,
    )
    .unwrap();
    let e = remote
        .run(
            &load_to(server.addr, 1, 100),
            &[RequestSpec::get("/")],
            &[1.0],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("allow-list"), "{e}");
    // Nothing was sent: the server saw no request.
    assert_eq!(server.served.load(Ordering::SeqCst), 0);
}

#[test]
fn an_agent_bounds_a_load_in_time() {
    let server = test_server(Behaviour::Good(10));
    let a = agent("127.0.0.1");
    let mut remote = Remote::connect(
        std::slice::from_ref(&a.addr),
        &Token::new(TOKEN).unwrap(),
        Channel::Plain,
    )
    .unwrap();
    let e = remote
        .run(
            &load_to(server.addr, 1, 60_000),
            &[RequestSpec::get("/")],
            &[1.0],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("at most 5 s"), "{e}");
}

#[test]
fn allow_lists_parse_and_refuse_everything_nets() {
    assert!(AllowList::parse("10.0.0.0/24, 192.168.1.5").is_ok());
    let every = AllowList::parse("0.0.0.0/0").unwrap_err();
    assert!(matches!(every, AllowError::Everything(_)), "{every:?}");
    assert!(every.to_string().contains("every address"), "{every}");
    let nope = AllowList::parse("nope").unwrap_err();
    assert!(matches!(nope, AllowError::NotAddress(_)), "{nope:?}");
    assert!(nope.to_string().contains("expected an address"), "{nope}");
}

#[test]
fn errors_are_counted_per_agent_and_summed() {
    let server = test_server(Behaviour::Status500);
    let (a, b) = (agent("127.0.0.1"), agent("127.0.0.1"));
    let token = Token::new(TOKEN).unwrap();
    let mut remote =
        Remote::connect(&[a.addr.clone(), b.addr.clone()], &token, Channel::Plain).unwrap();
    let r = remote
        .run(
            &load_to(server.addr, 2, 200),
            &[RequestSpec::get("/")],
            &[1.0],
        )
        .unwrap();
    let per_agent: Vec<u64> = r.agents.iter().map(AgentRun::error_count).collect();
    assert!(per_agent.iter().all(|&e| e > 0), "{r:?}");
    assert_eq!(r.merged.error_count(), per_agent.iter().sum::<u64>());
    assert_eq!(
        r.merged.bad_statuses.get(&500).copied(),
        Some(r.merged.error_count())
    );
    assert_eq!(r.merged.requests, 0);
}

// ---- Hostile peers --------------------------------------------------------------

/// A connection to agent `addr` that has done the handshake of protocol 2 by hand.
fn raw_coordinator(addr: &str) -> Wire {
    raw_coordinator_on(addr, Channel::Plain)
}

fn raw_coordinator_on(addr: &str, channel: Channel) -> Wire {
    raw_coordinator_over(std::net::TcpStream::connect(addr).unwrap(), channel)
}

fn raw_coordinator_over(stream: std::net::TcpStream, channel: Channel) -> Wire {
    let mut wire = match channel {
        Channel::Plain => Wire::new(stream, proto::MAX_LINE_BYTES).unwrap(),
        Channel::Tls => {
            let config = tls::client_config(&Token::new(TOKEN).unwrap()).unwrap();
            let deadline = std::time::Instant::now() + REPLY;
            let stream = tls::TlsStream::connect(stream, config, deadline).unwrap();
            Wire::tls(stream, proto::MAX_LINE_BYTES).unwrap()
        }
    };
    let ours = auth::nonce().unwrap();
    wire.send(&ToAgent::Hello {
        version: proto::VERSION,
        nonce: auth::encode(&ours),
    })
    .unwrap();
    let FromAgent::Challenge { nonce, proof, .. } =
        wire.recv(Some(Duration::from_secs(5))).unwrap()
    else {
        panic!("expected a challenge");
    };
    let token = Token::new(TOKEN).unwrap();
    let theirs = auth::decode_nonce(&nonce, "nonce").unwrap();
    assert!(auth::verify(
        &token,
        auth::Role::Agent,
        &ours,
        &theirs,
        &proof
    ));
    let proof = auth::prove(&token, auth::Role::Coordinator, &ours, &theirs);
    wire.send(&ToAgent::Proof { proof }).unwrap();
    assert!(matches!(
        wire.recv(Some(Duration::from_secs(5))).unwrap(),
        FromAgent::Welcome { .. }
    ));
    wire
}

pub(super) fn spec_to(target: std::net::SocketAddr, duration_ms: u64) -> LoadSpec {
    LoadSpec {
        target,
        host: "x".into(),
        connections: 2,
        threads: 1,
        duration_ns: duration_ms * 1_000_000,
        warmup_ns: 0,
        timeout_ns: 1_000_000_000,
        rate_per_s: None,
        conn_bits_per_s: None,
        keep_alive: true,
        max_requests: u64::MAX,
        seed: 1,
        busy_poll_ns: 0,
        requests: vec![RequestSpec::get("/")],
        weights: vec![1.0],
    }
}

/// The first line the agent sends on `s`, or "" if it closes first (at most `secs`).
fn first_line(s: &mut std::net::TcpStream, secs: u64) -> String {
    use std::io::Read;
    s.set_read_timeout(Some(Duration::from_secs(secs))).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 512];
    while !got.contains(&b'\n') {
        match s.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Prepares a 4 s load on `wire`, starts it `ahead` from now, lets it run `run_ms`, then
/// does `leave`; how long after `leave` the server's count stopped growing (up to 2 s).
fn stop_delay(leave: impl FnOnce(Wire), ahead_ms: u64, run_ms: u64) -> (u64, Duration) {
    stop_delay_on(Channel::Plain, leave, ahead_ms, run_ms)
}

fn stop_delay_on(
    channel: Channel,
    leave: impl FnOnce(Wire),
    ahead_ms: u64,
    run_ms: u64,
) -> (u64, Duration) {
    let server = test_server(Behaviour::Good(10));
    let limits = AgentLimits {
        max_duration: Duration::from_secs(5),
        ..AgentLimits::default()
    };
    let a = agent_on("127.0.0.1", limits, channel);
    let mut wire = raw_coordinator_on(&a.addr, channel);
    wire.send(&ToAgent::Prepare {
        spec: Box::new(spec_to(server.addr, 4_000)),
    })
    .unwrap();
    assert!(matches!(
        wire.recv(Some(REPLY)).unwrap(),
        FromAgent::Ready { .. }
    ));
    wire.send(&ToAgent::Start {
        at_unix_ns: proto::unix_ns() + ahead_ms * 1_000_000,
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(run_ms));
    let before = server.served.load(Ordering::SeqCst);
    let left = std::time::Instant::now();
    leave(wire);
    // The last time the count grew, sampled every 5 ms for 2 s.
    let (mut last, mut last_grew) = (server.served.load(Ordering::SeqCst), Duration::ZERO);
    while left.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
        let now = server.served.load(Ordering::SeqCst);
        if now != last {
            (last, last_grew) = (now, left.elapsed());
        }
    }
    (before, last_grew)
}

/// How soon after the coordinator goes the served count must stop growing: 100 ms by
/// design (a 50 ms tick of the load threads), more only on a loaded host. A load that
/// did not stop grows for the whole 2 s watched.
const STOPPED: Duration = Duration::from_secs(1);

#[test]
fn the_load_stops_when_the_coordinator_closes() {
    let (during, delay) = stop_delay(drop, 0, 300);
    assert!(during > 0, "the load ran");
    assert!(delay < STOPPED, "{delay:?} (4 s load)");
}

#[test]
fn the_load_stops_when_the_coordinator_sends_a_stray_byte_and_closes() {
    use std::io::Write;
    let (during, delay) = stop_delay(
        |w| {
            let _ = w.stream().write_all(b"{");
            drop(w);
        },
        0,
        300,
    );
    assert!(during > 0, "the load ran");
    assert!(delay < STOPPED, "{delay:?} (4 s load)");
}

#[test]
fn the_load_stops_when_the_coordinator_only_half_closes() {
    let (during, delay) = stop_delay(
        |w| {
            let _ = w.stream().shutdown(std::net::Shutdown::Write);
            std::thread::sleep(Duration::from_secs(3));
        },
        0,
        300,
    );
    assert!(during > 0, "the load ran");
    assert!(delay < STOPPED, "{delay:?} (4 s load)");
}

#[test]
fn a_load_whose_coordinator_leaves_before_its_start_never_starts() {
    let (before, _) = stop_delay(drop, 1_000, 50);
    assert_eq!(before, 0);
    let server = test_server(Behaviour::Good(10));
    let a = agent("127.0.0.1");
    let mut wire = raw_coordinator(&a.addr);
    wire.send(&ToAgent::Prepare {
        spec: Box::new(spec_to(server.addr, 4_000)),
    })
    .unwrap();
    assert!(matches!(
        wire.recv(Some(REPLY)).unwrap(),
        FromAgent::Ready { .. }
    ));
    wire.send(&ToAgent::Start {
        at_unix_ns: proto::unix_ns() + 500_000_000,
    })
    .unwrap();
    drop(wire);
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(
        server.served.load(Ordering::SeqCst),
        0,
        "a load started after its coordinator left"
    );
}

#[test]
fn slow_unproved_connections_hold_no_slot_and_end_at_the_handshake_deadline() {
    use std::io::Write;
    let a = agent_with(
        "127.0.0.1",
        AgentLimits {
            max_coordinators: 2,
            handshake_timeout: Duration::from_millis(800),
            ..AgentLimits::default()
        },
    );
    // Four peers that send a space every 100 ms: each read is quick, the whole is not.
    let mut slow: Vec<std::net::TcpStream> = (0..4)
        .map(|_| std::net::TcpStream::connect(&a.addr).unwrap())
        .collect();
    let t0 = std::time::Instant::now();
    for _ in 0..5 {
        for s in &mut slow {
            let _ = s.write_all(b" ");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // More slow peers than coordinator slots, and a coordinator still gets in.
    let token = Token::new(TOKEN).unwrap();
    Remote::connect(std::slice::from_ref(&a.addr), &token, Channel::Plain).unwrap();
    for s in &mut slow {
        let _ = s.write_all(b" ");
        let line = first_line(s, 3);
        assert!(
            line.contains("no proof of the token within 0.8 s"),
            "{line:?}"
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

#[test]
fn a_long_line_before_the_proof_is_refused_at_4_kib() {
    use std::io::Write;
    let a = agent("127.0.0.1");
    let mut s = std::net::TcpStream::connect(&a.addr).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    // 64 KiB of no newline: the agent refuses after 4 KiB (writes past that may fail).
    let _ = s.write_all(&vec![b'x'; 64 << 10]);
    let line = first_line(&mut s, 3);
    assert!(line.contains("longer than 4096 bytes"), "{line:?}");
}

#[test]
fn connections_beyond_the_handshake_bound_are_closed_and_the_bound_comes_back() {
    let a = agent_with(
        "127.0.0.1",
        AgentLimits {
            max_handshakes: 3,
            ..AgentLimits::default()
        },
    );
    let held: Vec<std::net::TcpStream> = (0..3)
        .map(|_| std::net::TcpStream::connect(&a.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut extra = std::net::TcpStream::connect(&a.addr).unwrap();
    let t0 = std::time::Instant::now();
    assert_eq!(first_line(&mut extra, 3), "");
    assert!(t0.elapsed() < Duration::from_secs(1), "closed at once");
    // A flood beyond the bound is told in one line, not a line each.
    for _ in 0..30 {
        let mut s = std::net::TcpStream::connect(&a.addr).unwrap();
        assert_eq!(first_line(&mut s, 3), "");
    }
    let told = a.events.lock().unwrap().clone();
    let closed: Vec<&String> = told
        .iter()
        .filter(|e| e.contains("closed unread"))
        .collect();
    assert_eq!(closed.len(), 1, "{told:?}");
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    let token = Token::new(TOKEN).unwrap();
    Remote::connect(std::slice::from_ref(&a.addr), &token, Channel::Plain).unwrap();
}

#[test]
fn one_host_cannot_hold_every_handshake_place() {
    let a = agent_with(
        "127.0.0.1",
        AgentLimits {
            max_handshakes_per_host: 3,
            ..AgentLimits::default()
        },
    );
    let held: Vec<std::net::TcpStream> = (0..3)
        .map(|_| std::net::TcpStream::connect(&a.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut extra = std::net::TcpStream::connect(&a.addr).unwrap();
    assert_eq!(first_line(&mut extra, 3), "", "a fourth from 127.0.0.1");
    // Another address of this host is another host to the agent: it gets in.
    let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let from: std::net::SocketAddr = "127.0.0.2:0".parse().unwrap();
    other.bind(&from.into()).unwrap();
    let to: std::net::SocketAddr = a.addr.parse().unwrap();
    other.connect(&to.into()).unwrap();
    let mut wire = raw_coordinator_over(other.into(), Channel::Plain);
    wire.send(&ToAgent::Ping).unwrap();
    assert!(matches!(
        wire.recv(Some(REPLY)).unwrap(),
        FromAgent::Pong { .. }
    ));
    drop(held);
}

#[test]
fn a_coordinator_of_protocol_1_is_told_the_versions_in_one_line() {
    use std::io::Write;
    let a = agent("127.0.0.1");
    let mut s = std::net::TcpStream::connect(&a.addr).unwrap();
    let hello = format!("{{\"msg\":\"hello\",\"version\":1,\"token\":\"{TOKEN}\"}}\n");
    s.write_all(hello.as_bytes()).unwrap();
    let line = first_line(&mut s, 3);
    assert!(
        line.contains("refused") && line.contains("protocol version 1; this agent speaks 2"),
        "{line:?}"
    );
}

/// A listener that plays an agent: answers hello with `challenge` (given the
/// coordinator's nonce) and keeps every byte the coordinator sent.
fn fake_agent(
    challenge: impl Fn(&auth::Nonce) -> Vec<String> + Send + 'static,
) -> (String, std::thread::JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Read, Write};
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut hello = String::new();
        r.read_line(&mut hello).unwrap();
        let Ok(ToAgent::Hello { nonce, .. }) = serde_json::from_str(&hello) else {
            panic!("{hello}");
        };
        let theirs = auth::decode_nonce(&nonce, "nonce").unwrap();
        let mut w = s;
        for line in challenge(&theirs) {
            w.write_all(line.as_bytes()).unwrap();
            w.write_all(b"\n").unwrap();
        }
        let mut rest = Vec::new();
        let _ = r.read_to_end(&mut rest);
        [hello.into_bytes(), rest].concat()
    });
    (addr, h)
}

#[test]
fn a_fake_agent_learns_nothing_of_the_token() {
    let (addr, h) = fake_agent(|_| {
        let nonce = auth::encode(&auth::nonce().unwrap());
        vec![format!(
            r#"{{"msg":"challenge","version":2,"nonce":"{nonce}","proof":"{}"}}"#,
            auth::encode(&[7u8; 32])
        )]
    });
    let e = Remote::connect(&[addr], &Token::new(TOKEN).unwrap(), Channel::Plain).unwrap_err();
    assert!(matches!(e, RemoteError::Unproved { .. }), "{e}");
    let sent = String::from_utf8(h.join().unwrap()).unwrap();
    assert!(!sent.contains(TOKEN), "{sent}");
    // The hello and nothing else: no proof of the coordinator's for it to replay.
    assert_eq!(sent.lines().count(), 1, "{sent}");
    assert!(!sent.contains("proof"), "{sent}");
}

#[test]
fn a_wrong_proof_is_refused_and_the_agent_never_sends_the_token() {
    let a = agent("127.0.0.1");
    let mut wire = Wire::new(
        std::net::TcpStream::connect(&a.addr).unwrap(),
        proto::MAX_LINE_BYTES,
    )
    .unwrap();
    let ours = auth::nonce().unwrap();
    wire.send(&ToAgent::Hello {
        version: proto::VERSION,
        nonce: auth::encode(&ours),
    })
    .unwrap();
    let challenge = wire
        .recv_line(Some(std::time::Instant::now() + REPLY))
        .unwrap();
    assert!(!String::from_utf8_lossy(&challenge).contains(TOKEN));
    let FromAgent::Challenge { nonce, .. } = serde_json::from_slice(&challenge).unwrap() else {
        panic!()
    };
    let theirs = auth::decode_nonce(&nonce, "nonce").unwrap();
    // The agent's own proof sent back is no proof of a coordinator's.
    let wrong = Token::new("another-token-of-length").unwrap();
    for proof in [
        auth::prove(
            &Token::new(TOKEN).unwrap(),
            auth::Role::Agent,
            &ours,
            &theirs,
        ),
        auth::prove(&wrong, auth::Role::Coordinator, &ours, &theirs),
    ] {
        let mut w = Wire::new(
            std::net::TcpStream::connect(&a.addr).unwrap(),
            proto::MAX_LINE_BYTES,
        )
        .unwrap();
        w.send(&ToAgent::Hello {
            version: proto::VERSION,
            nonce: auth::encode(&ours),
        })
        .unwrap();
        let _ = w
            .recv_line(Some(std::time::Instant::now() + REPLY))
            .unwrap();
        // A proof for another connection's nonces, whichever it is, fails here too.
        w.send(&ToAgent::Proof { proof }).unwrap();
        match w.recv::<FromAgent>(Some(REPLY)).unwrap() {
            FromAgent::Refused { reason } => assert_eq!(reason, "wrong token"),
            m => panic!("{m:?}"),
        }
    }
}

#[test]
fn forged_requests_are_refused_by_the_coordinator_and_the_agent() {
    let server = test_server(Behaviour::Good(10));
    let a = agent("127.0.0.1");
    let token = Token::new(TOKEN).unwrap();
    let mut forged = vec![
        RequestSpec::get("/"),
        RequestSpec::get("/a b"),
        RequestSpec::get("/x\r\nX: y"),
        RequestSpec::get("/"),
        RequestSpec::get("/"),
    ];
    forged[0].method = "SET k v\r\nQUIT\r\n".into();
    forged[3].headers = vec!["X-A: b\r\nInjected: 1".into()];
    forged[4].headers = vec!["Bad Name: b".into()];
    for spec in &forged {
        let mut remote =
            Remote::connect(std::slice::from_ref(&a.addr), &token, Channel::Plain).unwrap();
        let e = remote
            .run(
                &load_to(server.addr, 1, 100),
                std::slice::from_ref(spec),
                &[1.0],
            )
            .unwrap_err();
        assert!(matches!(e, RemoteError::Request(_)), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
        // The agent refuses it on its own too.
        let mut wire = raw_coordinator(&a.addr);
        let mut s = spec_to(server.addr, 100);
        s.requests = vec![spec.clone()];
        wire.send(&ToAgent::Prepare { spec: Box::new(s) }).unwrap();
        match wire.recv::<FromAgent>(Some(REPLY)).unwrap() {
            FromAgent::Failed { reason } => assert!(!reason.contains('\n'), "{reason}"),
            m => panic!("{m:?}"),
        }
    }
    let mut wire = raw_coordinator(&a.addr);
    let mut s = spec_to(server.addr, 100);
    s.host = "h\r\nX: 1".into();
    wire.send(&ToAgent::Prepare { spec: Box::new(s) }).unwrap();
    assert!(matches!(
        wire.recv::<FromAgent>(Some(REPLY)).unwrap(),
        FromAgent::Failed { .. }
    ));
    assert_eq!(server.served.load(Ordering::SeqCst), 0);
}

#[test]
fn a_load_beyond_the_descriptors_free_is_refused_in_one_line() {
    let server = test_server(Behaviour::Good(10));
    let a = agent_with(
        "127.0.0.1",
        AgentLimits {
            max_open_files: 100,
            ..AgentLimits::default()
        },
    );
    let mut wire = raw_coordinator(&a.addr);
    let mut s = spec_to(server.addr, 100);
    s.connections = 30_000;
    wire.send(&ToAgent::Prepare { spec: Box::new(s) }).unwrap();
    match wire.recv::<FromAgent>(Some(REPLY)).unwrap() {
        FromAgent::Failed { reason } => assert!(reason.contains("open-file limit"), "{reason}"),
        m => panic!("{m:?}"),
    }
    // One that fits still runs.
    let mut remote = Remote::connect(
        std::slice::from_ref(&a.addr),
        &Token::new(TOKEN).unwrap(),
        Channel::Plain,
    )
    .unwrap();
    let r = remote
        .run(
            &load_to(server.addr, 2, 100),
            &[RequestSpec::get("/")],
            &[1.0],
        )
        .unwrap();
    assert!(r.merged.requests > 0);
}

#[test]
fn connections_are_accepted_when_they_arrive_not_on_a_tick() {
    let a = agent("127.0.0.1");
    // A 50 ms accept tick makes the median wait about 25 ms in every round; a busy host
    // can slow one round, not three.
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let median = median_accept_wait(&a);
        if median < Duration::from_millis(10) {
            return;
        }
        rounds.push(median);
    }
    panic!("median waits {rounds:?}");
}

fn median_accept_wait(a: &TestAgent) -> Duration {
    let mut waits: Vec<Duration> = (0..15)
        .map(|_| {
            let t0 = std::time::Instant::now();
            let mut s = std::net::TcpStream::connect(&a.addr).unwrap();
            use std::io::Write;
            s.write_all(b"{\"msg\":\"nope\"}\n").unwrap();
            let line = first_line(&mut s, 3);
            assert!(line.contains("expected hello first"), "{line}");
            t0.elapsed()
        })
        .collect();
    waits.sort();
    waits[7]
}

/// A report as a real 1 s load of 2 connections could send, 1000 requests of 100 bytes.
fn plausible_report() -> (WireReport, LoadSpec) {
    let mut r = report_of(&vec![100_000; 1000]);
    r.bytes = 100_000;
    r.body_bytes = 50_000;
    r.conns = (0..2)
        .map(|c| crate::stats::ConnStats {
            conn: c,
            requests: 500,
            bytes: 50_000,
            body_bytes: 25_000,
            errors: 0,
            paced_ns: 0,
            paced_bytes: 0,
        })
        .collect();
    let mut spec = spec_to("127.0.0.1:1".parse().unwrap(), 1_000);
    spec.connections = 2;
    (WireReport::from_report(&r, 0).unwrap(), spec)
}

#[test]
fn impossible_reports_are_refused() {
    let (good, spec) = plausible_report();
    good.check(&spec).unwrap();
    type Break = fn(&mut WireReport);
    let broken: [(&str, Break); 10] = [
        ("u64-max requests", |r| r.requests = u64::MAX),
        ("load threads busy 7 times their time", |r| {
            r.client_busy = Some(7.0);
        }),
        ("a busy share that is no number", |r| {
            r.client_busy = Some(f64::NAN);
        }),
        ("a window of u64-max", |r| r.window_ns = u64::MAX),
        ("requests without a window", |r| r.window_ns = 0),
        ("u64-max errors", |r| {
            r.errors.insert("timeout".into(), u64::MAX);
        }),
        ("more unanswered than connections", |r| r.unanswered = 3),
        ("bodies larger than the bytes", |r| {
            r.body_bytes = r.bytes + 1;
        }),
        ("totals that the connections do not add to", |r| {
            r.conns[0].requests = 1;
        }),
        ("bad statuses beyond the errors", |r| {
            r.bad_statuses = vec![(500, 7)];
        }),
    ];
    for (what, f) in broken {
        let mut r = good.clone();
        f(&mut r);
        let e = r.check(&spec).unwrap_err();
        assert!(e.0.starts_with("an impossible report"), "{what}: {e}");
    }
    // Over what the duration and connections allow: 2 connections, 1 s, 10^7 requests.
    let mut spec2 = spec.clone();
    spec2.connections = 2;
    let mut many = report_of(&vec![100; 10_000]);
    many.requests = 10_000_000;
    let r = WireReport::from_report(&many, 0).unwrap();
    assert!(r.check(&spec2).is_err());
    // The agents' busy shares are averaged, and known only when every agent says.
    let (mut a, mut b) = (good.clone(), good.clone());
    (a.client_busy, b.client_busy) = (Some(0.9), Some(1.0));
    assert!((merge(&[a.clone(), b]).unwrap().client_busy.unwrap() - 0.95).abs() < 1e-9);
    assert_eq!(merge(&[a, good.clone()]).unwrap().client_busy, None);
    // Counts that would overflow when added are refused by the merge, not wrapped.
    let mut huge = good.clone();
    huge.requests = u64::MAX - 10;
    assert!(merge(&[good.clone(), huge]).is_err());
}

/// An agent that proves the token, then answers pings and a load as `answer` says.
fn lying_agent(
    pong: fn() -> u64,
    done: fn(&LoadSpec) -> WireReport,
) -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut w = Wire::new(s, proto::MAX_LINE_BYTES).unwrap();
        let token = Token::new(TOKEN).unwrap();
        let Ok(ToAgent::Hello { nonce, .. }) = w.recv(Some(Duration::from_secs(5))) else {
            return;
        };
        let theirs = auth::decode_nonce(&nonce, "n").unwrap();
        let ours = auth::nonce().unwrap();
        let proof = auth::prove(&token, auth::Role::Agent, &theirs, &ours);
        let nonce = auth::encode(&ours);
        let _ = w.send(&FromAgent::Challenge {
            version: 2,
            nonce,
            proof,
        });
        let mut spec = None;
        while let Ok(m) = w.recv::<ToAgent>(Some(Duration::from_secs(5))) {
            let reply = match m {
                ToAgent::Proof { .. } => FromAgent::Welcome { cpus: vec![] },
                ToAgent::Ping => FromAgent::Pong { unix_ns: pong() },
                ToAgent::Prepare { spec: s } => {
                    spec = Some(s);
                    FromAgent::Ready { threads: 1 }
                }
                ToAgent::Start { .. } => FromAgent::Done {
                    report: Box::new(done(spec.as_ref().unwrap())),
                },
                ToAgent::Hello { .. } => return,
            };
            if w.send(&reply).is_err() {
                return;
            }
        }
    });
    (addr, h)
}

#[test]
fn a_coordinator_refuses_an_agent_that_lies() {
    let token = Token::new(TOKEN).unwrap();
    // A clock 56 years off.
    let (addr, h) = lying_agent(|| 0, |_| plausible_report().0);
    let e = Remote::connect(&[addr], &token, Channel::Plain)
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than a day"), "{e}");
    h.join().unwrap();
    // Counts of u64::MAX, and 10 requests in a window of 10^18 ns.
    type Lie = fn(&LoadSpec) -> WireReport;
    let lies: [(Lie, &str); 4] = [
        // A start 10 s before the start instant, and one 5 s after the report was sent.
        (
            |_| {
                let mut r = plausible_report().0;
                r.started_unix_ns = proto::unix_ns() - 10_000_000_000;
                r
            },
            "before the start instant",
        ),
        (
            |_| {
                let mut r = plausible_report().0;
                r.started_unix_ns = proto::unix_ns() + 5_000_000_000;
                r
            },
            "after its report arrived",
        ),
        (
            |_| {
                let mut r = plausible_report().0;
                r.requests = u64::MAX;
                r
            },
            "impossible report",
        ),
        (
            |_| {
                let mut r =
                    WireReport::from_report(&report_of(&[1000; 10]), proto::unix_ns()).unwrap();
                r.window_ns = 1_000_000_000_000_000_000;
                r
            },
            "impossible report",
        ),
    ];
    for (lie, expected) in lies {
        let (addr, h) = lying_agent(proto::unix_ns, lie);
        let mut remote = Remote::connect(&[addr], &token, Channel::Plain).unwrap();
        let e = remote
            .run(
                &load_to("127.0.0.1:1".parse().unwrap(), 2, 1000),
                &[RequestSpec::get("/")],
                &[1.0],
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains(expected), "{e}");
        drop(remote);
        h.join().unwrap();
    }
}

// ---- TLS ------------------------------------------------------------------------

fn tls_agent() -> TestAgent {
    let limits = AgentLimits {
        max_duration: Duration::from_secs(5),
        handshake_timeout: Duration::from_secs(2),
        ..AgentLimits::default()
    };
    agent_on("127.0.0.1", limits, Channel::Tls)
}

/// A TCP relay to `to` for one connection, keeping every byte that passes either way.
struct Relay {
    addr: String,
    seen: Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Relay {
    fn to(to: &str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (to, kept) = (to.to_string(), seen.clone());
        std::thread::spawn(move || {
            let Ok((inside, _)) = listener.accept() else {
                return;
            };
            let outside = std::net::TcpStream::connect(&to).unwrap();
            let pipe = |mut from: std::net::TcpStream, mut into: std::net::TcpStream| {
                let kept = kept.clone();
                std::thread::spawn(move || {
                    use std::io::{Read, Write};
                    let mut b = [0u8; 4096];
                    while let Ok(n @ 1..) = from.read(&mut b) {
                        kept.lock().unwrap().extend_from_slice(&b[..n]);
                        if into.write_all(&b[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = into.shutdown(std::net::Shutdown::Write);
                })
            };
            let up = pipe(inside.try_clone().unwrap(), outside.try_clone().unwrap());
            let down = pipe(outside, inside);
            let _ = (up.join(), down.join());
        });
        Relay { addr, seen }
    }

    fn saw(&self, text: &str) -> bool {
        let seen = self.seen.lock().unwrap();
        seen.windows(text.len()).any(|w| w == text.as_bytes())
    }
}

/// One load through a relay that keeps the control connection's bytes; the relay.
fn load_through_relay(channel: Channel) -> Relay {
    let server = test_server(Behaviour::Good(100));
    let a = match channel {
        Channel::Plain => agent("127.0.0.1"),
        Channel::Tls => tls_agent(),
    };
    let relay = Relay::to(&a.addr);
    let token = Token::new(TOKEN).unwrap();
    let mut remote = Remote::connect(std::slice::from_ref(&relay.addr), &token, channel).unwrap();
    let r = remote
        .run(
            &load_to(server.addr, 3, 200),
            &[RequestSpec::get("/a-path-to-look-for")],
            &[1.0],
        )
        .unwrap();
    assert!(
        r.merged.requests > 0 && r.merged.error_count() == 0,
        "{r:?}"
    );
    drop(remote);
    relay
}

#[test]
fn over_tls_a_load_runs_and_nothing_of_the_protocol_is_in_the_clear() {
    let plain = load_through_relay(Channel::Plain);
    let tls = load_through_relay(Channel::Tls);
    // The words a listener on the path reads without TLS, and cannot with it.
    for word in [
        "hello",
        "challenge",
        "welcome",
        "prepare",
        "a-path-to-look-for",
    ] {
        assert!(plain.saw(word), "the plain relay should see {word:?}");
        assert!(!tls.saw(word), "{word:?} crossed in the clear over TLS");
    }
    assert!(tls.seen.lock().unwrap().len() > 1000);
}

#[test]
fn over_tls_an_agent_with_another_token_fails_the_handshake() {
    let a = tls_agent();
    let wrong = Token::new("another-token-of-length").unwrap();
    let e = Remote::connect(std::slice::from_ref(&a.addr), &wrong, Channel::Tls).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, RemoteError::Tls { .. }), "{e:?}");
    assert!(text.contains("not the one this token gives"), "{text}");
    assert!(!text.contains('\n'), "{text}");
}

#[test]
fn a_tls_agent_tells_a_coordinator_in_the_clear_to_use_tls() {
    let a = tls_agent();
    let token = Token::new(TOKEN).unwrap();
    let began = std::time::Instant::now();
    let e = Remote::connect(std::slice::from_ref(&a.addr), &token, Channel::Plain)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--client-tls") && e.contains(&a.addr), "{e}");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
}

#[test]
fn a_tls_coordinator_fails_at_once_against_an_agent_in_the_clear() {
    let a = agent("127.0.0.1");
    let token = Token::new(TOKEN).unwrap();
    let began = std::time::Instant::now();
    let e = Remote::connect(std::slice::from_ref(&a.addr), &token, Channel::Tls).unwrap_err();
    assert!(matches!(e, RemoteError::Tls { .. }), "{e:?}");
    assert!(e.to_string().contains("--tls"), "{e}");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
}

#[test]
fn over_tls_the_load_stops_when_the_coordinator_closes_or_speaks() {
    let (during, delay) = stop_delay_on(Channel::Tls, drop, 0, 300);
    assert!(during > 0, "the load ran");
    assert!(delay < STOPPED, "{delay:?} (4 s load)");
    let (during, delay) = stop_delay_on(
        Channel::Tls,
        |mut w| {
            let _ = w.send(&ToAgent::Ping);
            std::thread::sleep(Duration::from_secs(3));
        },
        0,
        300,
    );
    assert!(during > 0, "the load ran");
    assert!(delay < STOPPED, "{delay:?} (4 s load)");
}

#[test]
fn over_tls_a_silent_or_half_hello_ends_at_the_handshake_deadline() {
    use std::io::Write;
    let a = tls_agent();
    let mut silent = std::net::TcpStream::connect(&a.addr).unwrap();
    let mut half = std::net::TcpStream::connect(&a.addr).unwrap();
    // The first bytes of a TLS record header, then nothing.
    half.write_all(&[0x16, 0x03, 0x01]).unwrap();
    let began = std::time::Instant::now();
    for s in [&mut silent, &mut half] {
        assert_eq!(first_line(s, 10), "");
    }
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(1_500) && took < Duration::from_secs(5),
        "{took:?} for a 2 s deadline"
    );
    if let Err(told) = a.told("did not finish in time") {
        panic!("{told:?}");
    }
}

/// What the agent shows of each event, word for word (the `smtlab agent` output).
#[test]
fn agent_events_read_as_one_line_each() {
    let peer: std::net::SocketAddr = "10.0.0.2:4000".parse().unwrap();
    let target: std::net::SocketAddr = "10.0.0.1:8080".parse().unwrap();
    let events = [
        (
            AgentEvent::Accepted { peer },
            "10.0.0.2:4000: coordinator accepted",
        ),
        (
            AgentEvent::Refused {
                peer,
                reason: "wrong token".into(),
            },
            "10.0.0.2:4000: refused: wrong token",
        ),
        (
            AgentEvent::Load {
                peer,
                target,
                connections: 4,
                requests: 1000,
                requests_per_s: 499.6,
                errors: 2,
            },
            "10.0.0.2:4000: load on 10.0.0.1:8080: 4 connections, 1000 requests, 500 req/s, 2 errors",
        ),
        (
            AgentEvent::LoadFailed {
                peer,
                reason: "x".into(),
            },
            "10.0.0.2:4000: load failed: x",
        ),
        (
            AgentEvent::Lost {
                peer,
                during_load: true,
            },
            "10.0.0.2:4000: coordinator gone during a load: load stopped",
        ),
        (
            AgentEvent::Lost {
                peer,
                during_load: false,
            },
            "10.0.0.2:4000: coordinator gone",
        ),
        (
            AgentEvent::Closed { peer },
            "10.0.0.2:4000: coordinator done",
        ),
        (
            AgentEvent::AcceptFailed {
                error: "too many open files".into(),
            },
            "cannot accept a connection: too many open files; trying again in 100 ms",
        ),
    ];
    for (event, line) in events {
        assert_eq!(event.to_string(), line);
    }
}
