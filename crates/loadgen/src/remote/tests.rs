//! The remote path: merging, and agents on loopback driven by a coordinator.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use smtlab_placement::Token;

use super::coordinator::merge;
use super::proto::WireReport;
use super::*;
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

const TOKEN: &str = "a-token-of-enough-length";

struct TestAgent {
    addr: String,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn agent(allow: &str) -> TestAgent {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let cfg = AgentConfig {
        token: Token::new(TOKEN).unwrap(),
        allow: AllowList::parse(allow).unwrap(),
        cpus: Vec::new(),
        limits: AgentLimits {
            max_duration: Duration::from_secs(5),
            ..AgentLimits::default()
        },
    };
    let stop2 = stop.clone();
    let thread = std::thread::spawn(move || {
        serve(listener, cfg, &stop2, Arc::new(|_| {})).unwrap();
    });
    TestAgent {
        addr,
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
    let mut remote = Remote::connect(&[a.addr.clone(), b.addr.clone()], &token).unwrap();
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
fn a_wrong_token_is_refused() {
    let a = agent("127.0.0.1");
    let wrong = Token::new("another-token-of-length").unwrap();
    let e = Remote::connect(std::slice::from_ref(&a.addr), &wrong)
        .unwrap_err()
        .to_string();
    assert!(e.contains("refused") && e.contains("wrong token"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn a_target_outside_the_allow_list_gets_no_load() {
    let server = test_server(Behaviour::Good(10));
    let a = agent("10.99.0.0/16");
    let mut remote =
        Remote::connect(std::slice::from_ref(&a.addr), &Token::new(TOKEN).unwrap()).unwrap();
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
    let mut remote =
        Remote::connect(std::slice::from_ref(&a.addr), &Token::new(TOKEN).unwrap()).unwrap();
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
    assert!(
        AllowList::parse("0.0.0.0/0")
            .unwrap_err()
            .contains("every address")
    );
    assert!(
        AllowList::parse("nope")
            .unwrap_err()
            .contains("expected an address")
    );
}

#[test]
fn an_agent_stops_its_load_when_the_coordinator_goes() {
    use super::proto::{FromAgent, ToAgent, Wire, unix_ns};
    let server = test_server(Behaviour::Good(10));
    let a = agent("127.0.0.1");
    let mut wire = Wire::new(std::net::TcpStream::connect(&a.addr).unwrap()).unwrap();
    wire.send(&ToAgent::Hello {
        version: super::proto::VERSION,
        token: TOKEN.into(),
    })
    .unwrap();
    assert!(matches!(
        wire.recv(None).unwrap(),
        FromAgent::Welcome { .. }
    ));
    let spec = super::proto::LoadSpec {
        target: server.addr,
        host: "x".into(),
        connections: 2,
        threads: 1,
        duration_ns: 4_000_000_000,
        warmup_ns: 0,
        timeout_ns: 1_000_000_000,
        rate_per_s: None,
        conn_bits_per_s: None,
        keep_alive: true,
        max_requests: u64::MAX,
        seed: 1,
        busy_poll_ns: 0,
        requests: vec![(&RequestSpec::get("/")).into()],
        weights: vec![1.0],
    };
    wire.send(&ToAgent::Prepare {
        spec: Box::new(spec),
    })
    .unwrap();
    assert!(matches!(wire.recv(None).unwrap(), FromAgent::Ready { .. }));
    wire.send(&ToAgent::Start {
        at_unix_ns: unix_ns(),
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let during = server.served.load(Ordering::SeqCst);
    assert!(during > 0, "the load ran");
    drop(wire);
    // The agent notices within 50 ms and the load threads within another 50 ms.
    std::thread::sleep(Duration::from_millis(400));
    let after_stop = server.served.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        server.served.load(Ordering::SeqCst),
        after_stop,
        "load went on after the coordinator left (4 s load)"
    );
}

#[test]
fn errors_are_counted_per_agent_and_summed() {
    let server = test_server(Behaviour::Status500);
    let (a, b) = (agent("127.0.0.1"), agent("127.0.0.1"));
    let token = Token::new(TOKEN).unwrap();
    let mut remote = Remote::connect(&[a.addr.clone(), b.addr.clone()], &token).unwrap();
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
