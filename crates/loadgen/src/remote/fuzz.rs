//! Property tests of what a peer can send: the agent's handshake against arbitrary and
//! near-valid first lines, the line reader against arbitrary chunks, and the checks of
//! an agent's report against arbitrary counts. A few dozen cases each in the normal
//! tests; `scripts/fuzz.sh` runs many more (`PROPTEST_CASES`). A failing case is kept
//! under `proptest-regressions/` and replayed first on every later run; the seeds of
//! `corpus/agent/` are replayed by every run.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use proptest::prelude::*;

use super::proto::{self, FromAgent, LoadSpec, Wire, WireReport};
use super::tests::{TOKEN, TestAgent, agent};
use super::{auth, coordinator::merge};

/// Cases per property: `PROPTEST_CASES`, else a few dozen (the normal tests stay quick).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(48);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// One agent for every case.
fn shared_agent() -> &'static str {
    static AGENT: OnceLock<TestAgent> = OnceLock::new();
    &AGENT.get_or_init(|| agent("127.0.0.1")).addr
}

/// What the agent answers `bytes` with, the connection's writing half closed after them:
/// its lines (read for at most 3 s).
fn agent_answers(bytes: &[u8]) -> Vec<String> {
    let mut s = TcpStream::connect(shared_agent()).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    // The agent may refuse and close before it read everything: a failed write is fine.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut got = Vec::new();
    let _ = s.take(1 << 20).read_to_end(&mut got);
    String::from_utf8_lossy(&got)
        .lines()
        .map(str::to_string)
        .collect()
}

/// First lines that are nearly a hello of protocol 2: versions, nonces and proofs of
/// every kind, and anything after.
fn near_hellos() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![Just(2u64), any::<u64>()],
        prop_oneof![
            Just(auth::encode(&[1u8; 32])),
            "[A-Za-z0-9+/=]{0,80}",
            "\\PC{0,40}"
        ],
        prop_oneof![Just(String::new()), "[A-Za-z0-9+/=]{0,60}", "\\PC{0,40}"],
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(version, nonce, proof, tail)| {
            let mut b = serde_json::to_vec(&serde_json::json!({
                "msg": "hello", "version": version, "nonce": nonce,
            }))
            .unwrap();
            b.push(b'\n');
            let p = serde_json::json!({"msg": "proof", "proof": proof});
            b.extend(serde_json::to_vec(&p).unwrap());
            b.push(b'\n');
            b.extend(tail);
            b
        })
}

/// Reports of arbitrary counts, some near the real ones.
fn reports() -> impl Strategy<Value = WireReport> {
    let count = || prop_oneof![0u64..2_000, any::<u64>(), Just(u64::MAX)];
    (
        count(),
        count(),
        count(),
        count(),
        count(),
        prop_oneof![Just(1_000_000_000u64), any::<u64>()],
        proptest::collection::vec((any::<u16>(), count()), 0..3),
    )
        .prop_map(
            |(requests, bytes, body, connects, unanswered, window, bad)| {
                let mut r = WireReport::from_report(&crate::stats::LoadReport::empty(), 0).unwrap();
                r.requests = requests;
                r.bytes = bytes;
                r.body_bytes = body;
                r.connects = connects;
                r.unanswered = unanswered;
                r.window_ns = window;
                r.bad_statuses = bad;
                r
            },
        )
}

fn spec() -> LoadSpec {
    super::tests::spec_to("127.0.0.1:1".parse().unwrap(), 1_000)
}

/// The seeds of `corpus/agent/` (what coordinators, old and fake peers and attackers
/// send first), each sent to a live agent, get the answers their name says: the kinds
/// of the agent's lines (`challenge`, `refused`, `challenge-refused`) or `silent`; never
/// a welcome, never the token.
#[test]
fn the_corpus_gets_its_answers() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/agent");
    smtlab_fixtures::corpus::replay(&dir, |bytes| {
        let kinds: Vec<&str> = agent_answers(bytes)
            .iter()
            .map(|l| match serde_json::from_str::<FromAgent>(l) {
                Ok(FromAgent::Challenge { .. }) if !l.contains(TOKEN) => "challenge",
                Ok(FromAgent::Refused { .. }) if !l.contains(TOKEN) => "refused",
                _ => "other",
            })
            .collect();
        if kinds.is_empty() {
            "silent".into()
        } else {
            kinds.join("-")
        }
    });
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn no_bytes_without_the_token_get_a_welcome(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..6_000),
            near_hellos(),
        ]
    ) {
        let lines = agent_answers(&bytes);
        // A refusal or a challenge, one line each, and never a welcome.
        prop_assert!(lines.len() <= 2, "{:?}", lines);
        for l in &lines {
            let m: FromAgent = serde_json::from_str(l).map_err(|e| TestCaseError::fail(format!("{e}: {l}")))?;
            prop_assert!(matches!(m, FromAgent::Refused { .. } | FromAgent::Challenge { .. }), "{:?}", m);
            prop_assert!(!l.contains(TOKEN));
        }
    }

    #[test]
    fn lines_come_back_whole_or_refused_when_too_long(
        chunks in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..300), 0..12),
        max in 8usize..400,
    ) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut w = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let all: Vec<u8> = chunks.concat();
        let writer = std::thread::spawn(move || {
            for c in &chunks {
                let _ = w.write_all(c);
            }
        });
        let mut wire = Wire::new(s, max).unwrap();
        let mut expected = all.split_inclusive(|&b| b == b'\n').filter(|l| l.ends_with(b"\n"));
        loop {
            match wire.recv_line(Some(std::time::Instant::now() + Duration::from_secs(3))) {
                Ok(line) => {
                    prop_assert!(line.len() <= max);
                    prop_assert_eq!(Some(line.as_slice()), expected.next());
                }
                Err(proto::RecvError::Bad(e)) => {
                    // Only when the next line is longer than the limit.
                    prop_assert!(e.contains("longer than"));
                    let next = expected.next().map_or(usize::MAX, <[u8]>::len);
                    let tail = all.len();
                    prop_assert!(next > max || tail > max, "{} {}", next, max);
                    break;
                }
                Err(proto::RecvError::Closed) => {
                    prop_assert_eq!(expected.next(), None);
                    break;
                }
                Err(e) => return Err(TestCaseError::fail(format!("{e:?}"))),
            }
        }
        writer.join().unwrap();
    }

    #[test]
    fn report_checks_and_merges_never_panic_nor_wrap(a in reports(), b in reports()) {
        let spec = spec();
        if a.check(&spec).is_ok() {
            // What passes is within the bounds: one response per microsecond per connection.
            let most = spec.connections as u64 * (a.window_ns / 1_000 + 1);
            prop_assert!(a.requests <= most && a.window_ns <= 3_000_000_000);
        }
        if let Ok(m) = merge(&[a.clone(), b.clone()]) {
            prop_assert_eq!(Some(m.requests), a.requests.checked_add(b.requests));
            prop_assert_eq!(Some(m.bytes), a.bytes.checked_add(b.bytes));
        }
    }

    #[test]
    fn only_the_right_proof_verifies(proof in "\\PC{0,60}", nonce in "\\PC{0,80}") {
        let token = smtlab_placement::Token::new(TOKEN).unwrap();
        let (c, a) = ([3u8; 32], [4u8; 32]);
        prop_assert!(!auth::verify(&token, auth::Role::Coordinator, &c, &a, &proof));
        let _ = auth::decode_nonce(&nonce, "nonce");
        let right = auth::prove(&token, auth::Role::Coordinator, &c, &a);
        prop_assert!(auth::verify(&token, auth::Role::Coordinator, &c, &a, &right));
        prop_assert!(!auth::verify(&token, auth::Role::Agent, &c, &a, &right));
    }
}
