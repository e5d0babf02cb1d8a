//! The wire: one JSON object per line, each way, over one TCP connection per
//! coordinator and agent. A line is at most [`MAX_HANDSHAKE_LINE_BYTES`] until the other
//! end proved the token, then [`MAX_COORDINATOR_LINE_BYTES`] (to an agent) or
//! [`MAX_LINE_BYTES`] (to a coordinator: a report); every line has one deadline, however
//! its bytes trickle in. Also here: what a request must be to go on the wire
//! ([`RequestSpec::check`]) and what a report must be to be believed
//! ([`WireReport::check`]).

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use serde::{Deserialize, Serialize};

use super::tls::TlsStream;
use crate::http::{ErrorKind, RequestSpec};
use crate::stats::{ConnStats, LoadReport};

/// Bumped when a message changes meaning; both ends refuse another version in one line.
/// 2: the token is proved (HMAC over both sides' nonces), never sent.
pub const VERSION: u32 = 2;

/// The longest line a coordinator reads (a report of 100000 connections fits).
pub const MAX_LINE_BYTES: usize = 64 << 20;
/// The longest line an agent reads from a coordinator that proved the token (a load's
/// requests, bodies included).
pub const MAX_COORDINATOR_LINE_BYTES: usize = 16 << 20;
/// The longest line either end reads before the other has proved the token.
pub const MAX_HANDSHAKE_LINE_BYTES: usize = 4 << 10;

/// Coordinator to agent.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ToAgent {
    /// The first message: the protocol and the coordinator's nonce (base64).
    Hello {
        version: u32,
        nonce: String,
    },
    /// The coordinator's proof of the token, once it checked the agent's.
    Proof {
        proof: String,
    },
    Ping,
    Prepare {
        spec: Box<LoadSpec>,
    },
    /// Start the prepared load at this instant of the agent's wall clock.
    Start {
        at_unix_ns: u64,
    },
}

/// Agent to coordinator.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum FromAgent {
    /// The answer to hello: the agent's nonce and its proof of the token over both.
    Challenge {
        version: u32,
        nonce: String,
        proof: String,
    },
    Welcome {
        cpus: Vec<u32>,
    },
    Refused {
        reason: String,
    },
    Pong {
        unix_ns: u64,
    },
    Ready {
        threads: usize,
    },
    Done {
        report: Box<WireReport>,
    },
    Failed {
        reason: String,
    },
}

/// The fields every version's first message has: read before the rest, so that a peer
/// of another version is told so in one line rather than "bad message".
#[derive(Debug, Deserialize)]
pub struct Greeting {
    pub msg: String,
    pub version: Option<u32>,
}

/// One agent's share of a load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadSpec {
    pub target: SocketAddr,
    pub host: String,
    pub connections: usize,
    /// 0: one per agent CPU (at most one per connection).
    pub threads: usize,
    pub duration_ns: u64,
    pub warmup_ns: u64,
    pub timeout_ns: u64,
    pub rate_per_s: Option<f64>,
    pub conn_bits_per_s: Option<f64>,
    pub keep_alive: bool,
    pub max_requests: u64,
    pub seed: u64,
    pub busy_poll_ns: u64,
    pub requests: Vec<RequestSpec>,
    pub weights: Vec<f64>,
}

impl RequestSpec {
    /// Whether this request can go on the wire as it is, or the one-line reason: a
    /// method that is a token (RFC 9110 9.1), a request target of visible ASCII (RFC
    /// 9112 3.2), headers `NAME: VALUE` with a token for a name and a field value (RFC
    /// 9110 5.1, 5.5: no CR, LF, NUL or other control character). Anything else would
    /// let a coordinator write arbitrary bytes to a server.
    pub fn check(&self) -> Result<(), Refusal> {
        if http::Method::from_bytes(self.method.as_bytes()).is_err() {
            return refuse(format!(
                "method {}: expected an HTTP token (letters, digits, !#$%&'*+-.^_`|~)",
                quote(&self.method)
            ));
        }
        let visible = !self.path.is_empty() && self.path.bytes().all(|b| b.is_ascii_graphic());
        if !visible || self.path.parse::<http::Uri>().is_err() {
            return refuse(format!(
                "path {}: expected a request target of visible ASCII (/x?y=1)",
                quote(&self.path)
            ));
        }
        for h in &self.headers {
            check_header(h)?;
        }
        Ok(())
    }
}

fn check_header(line: &str) -> Result<(), Refusal> {
    let Some((name, value)) = line.split_once(':') else {
        return refuse(format!("header {}: expected NAME: VALUE", quote(line)));
    };
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return refuse(format!(
            "header name {}: expected an HTTP token (letters, digits, !#$%&'*+-.^_`|~)",
            quote(name)
        ));
    }
    if http::HeaderValue::from_bytes(value.trim_matches([' ', '\t']).as_bytes()).is_err() {
        return refuse(format!(
            "header {} value {}: expected a field value (no CR, LF, NUL or other control characters)",
            quote(name),
            quote(value)
        ));
    }
    Ok(())
}

/// Whether `host` can be a Host header (`name`, `name:port`, `[v6]:port`), or why not.
pub fn check_host(host: &str) -> Result<(), Refusal> {
    match host.parse::<http::uri::Authority>() {
        Ok(a) if !host.contains('@') && !a.host().is_empty() => Ok(()),
        _ => refuse(format!(
            "host {}: expected HOST or HOST:PORT (a Host header's value)",
            quote(host)
        )),
    }
}

/// Why a peer's request, host or report is refused: one line, said back to the peer or
/// to the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

impl From<String> for Refusal {
    fn from(why: String) -> Refusal {
        Refusal(why)
    }
}

impl From<&str> for Refusal {
    fn from(why: &str) -> Refusal {
        Refusal(why.to_string())
    }
}

/// `Err` with `why` as a [`Refusal`].
pub fn refuse<T>(why: String) -> Result<T, Refusal> {
    Err(Refusal(why))
}

/// A peer's text in an error: escaped (one line whatever it holds) and cut to 64 chars.
pub fn quote(text: &str) -> String {
    const MAX_CHARS: usize = 64;
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{:?}...", &text[..cut]),
        None => format!("{text:?}"),
    }
}

impl LoadSpec {
    /// Whether the requests and the host can go on the wire ([`RequestSpec::check`]).
    pub fn check_requests(&self) -> Result<(), Refusal> {
        check_host(&self.host)?;
        self.requests.iter().try_for_each(RequestSpec::check)
    }
}

/// What one agent counted in one load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireReport {
    /// When the load started, in the agent's wall clock.
    pub started_unix_ns: u64,
    pub window_ns: u64,
    pub requests: u64,
    pub bytes: u64,
    pub body_bytes: u64,
    pub connects: u64,
    pub unanswered: u64,
    pub unsent: u64,
    /// By [`ErrorKind::as_str`].
    pub errors: BTreeMap<String, u64>,
    /// Status and count pairs (a list: map keys of a tagged message arrive as text).
    pub bad_statuses: Vec<(u16, u64)>,
    /// The latency histogram, HdrHistogram's V2 encoding in base64.
    pub latency_v2: String,
    pub conns: Vec<ConnStats>,
    /// [`LoadReport::client_busy`]: the agent's load threads' share of time working.
    #[serde(default)]
    pub client_busy: Option<f64>,
}

impl WireReport {
    pub fn from_report(r: &LoadReport, started_unix_ns: u64) -> io::Result<WireReport> {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(&r.latency, &mut bytes)
            .map_err(|e| io::Error::other(format!("cannot encode the histogram: {e:?}")))?;
        Ok(WireReport {
            started_unix_ns,
            window_ns: r.window_ns,
            requests: r.requests,
            bytes: r.bytes,
            body_bytes: r.body_bytes,
            connects: r.connects,
            unanswered: r.unanswered,
            unsent: r.unsent,
            errors: r
                .errors
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), *v))
                .collect(),
            bad_statuses: r.bad_statuses.iter().map(|(k, v)| (*k, *v)).collect(),
            latency_v2: base64::engine::general_purpose::STANDARD.encode(bytes),
            conns: r.conns.clone(),
            client_busy: r.client_busy,
        })
    }

    /// Whether an agent could have counted this in `spec`'s load, or the one-line reason:
    /// a report that is not is a broken or lying agent, whose figures would end up in
    /// the results. The bounds are generous (a response per microsecond per
    /// connection, a terabyte per second), far above what a load can do and far below
    /// the counts a broken agent sends; the coordinator checks the times against its own
    /// clock as well.
    pub fn check(&self, spec: &LoadSpec) -> Result<(), Refusal> {
        let conns = spec.connections as u64;
        let run_ns = spec.warmup_ns.saturating_add(self.window_ns);
        let most_events = conns.saturating_mul(run_ns / 1_000 + 1);
        let longest_window_ns = spec
            .duration_ns
            .saturating_add(spec.timeout_ns)
            .saturating_add(1_000_000_000);
        let errors = self
            .errors
            .values()
            .try_fold(0u64, |a, &v| a.checked_add(v))
            .ok_or("error counts overflow")?;
        let checks: [(bool, String); 8] = [
            (
                // A thread on a CPU all the time is 1; a little over is clock skew.
                self.client_busy
                    .is_none_or(|b| b.is_finite() && (0.0..=1.5).contains(&b)),
                format!(
                    "load threads busy {:?} of their time: expected 0 to 1",
                    self.client_busy
                ),
            ),
            (
                self.window_ns <= longest_window_ns,
                format!(
                    "a window of {} ns in a load of {} ns",
                    self.window_ns, spec.duration_ns
                ),
            ),
            (
                self.requests == 0 || self.window_ns > 0,
                format!("{} requests in a window of 0 ns", self.requests),
            ),
            (
                self.requests <= most_events && errors <= most_events,
                format!(
                    "{} requests and {errors} errors: more than one per microsecond on each of {conns} connections",
                    self.requests
                ),
            ),
            (
                self.requests.saturating_add(errors) <= spec.max_requests,
                format!(
                    "{} requests and {errors} errors: more than the {} asked for",
                    self.requests, spec.max_requests
                ),
            ),
            (
                self.connects <= most_events.saturating_add(conns)
                    && self.unsent <= most_events.saturating_add(conns),
                format!(
                    "{} connects, {} unsent: more than one per microsecond",
                    self.connects, self.unsent
                ),
            ),
            (
                self.unanswered <= conns,
                format!("{} unanswered on {conns} connections", self.unanswered),
            ),
            (
                self.body_bytes <= self.bytes
                    && self.bytes / 16 >= self.requests
                    && self.bytes / 1_000 <= run_ns,
                format!(
                    "{} bytes ({} of bodies) for {} responses in {run_ns} ns",
                    self.bytes, self.body_bytes, self.requests
                ),
            ),
        ];
        match checks.into_iter().find(|(ok, _)| !ok) {
            Some((_, why)) => refuse(format!("an impossible report: {why}")),
            None => self.check_totals(conns, run_ns.saturating_add(spec.timeout_ns)),
        }
    }

    /// Whether the parts add up to the totals: the connections' counts, the bad statuses,
    /// the latency histogram (no latency over `longest_latency_ns`).
    fn check_totals(&self, conns: u64, longest_latency_ns: u64) -> Result<(), Refusal> {
        let sum = |f: fn(&ConnStats) -> u64| {
            self.conns
                .iter()
                .try_fold(0u64, |a, c| a.checked_add(f(c)))
                .ok_or("per-connection counts overflow")
        };
        let latency = self.latency();
        let checks: [(bool, String); 5] = [
            (
                self.conns.len() as u64 <= conns
                    && self.conns.iter().all(|c| (c.conn as u64) < conns),
                format!("{} connections reported of {conns}", self.conns.len()),
            ),
            (
                sum(|c| c.requests)? == self.requests
                    && sum(|c| c.bytes)? == self.bytes
                    && sum(|c| c.body_bytes)? == self.body_bytes,
                "the connections' counts do not add up to the totals".into(),
            ),
            (
                self.bad_statuses
                    .iter()
                    .all(|&(s, _)| (100..1000).contains(&s))
                    && self
                        .bad_statuses
                        .iter()
                        .try_fold(0u64, |a, &(_, n)| a.checked_add(n))
                        == Some(self.errors.get("bad_status").copied().unwrap_or(0)),
                "bad statuses that do not add up to the bad-status errors".into(),
            ),
            (
                latency.as_ref().is_ok_and(|h| h.len() == self.requests),
                format!(
                    "a latency histogram that does not hold its {} requests",
                    self.requests
                ),
            ),
            (
                // The histogram rounds up by at most 1 part in 1000.
                latency.as_ref().is_ok_and(|h| {
                    h.max() <= longest_latency_ns.saturating_add(longest_latency_ns / 500)
                }),
                "latencies longer than the load".into(),
            ),
        ];
        match checks.into_iter().find(|(ok, _)| !ok) {
            Some((_, why)) => refuse(format!("an impossible report: {why}")),
            None => Ok(()),
        }
    }

    /// The histogram back, or why it cannot be read.
    pub fn latency(&self) -> Result<Histogram<u64>, ReportError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.latency_v2)
            .map_err(ReportError::NotBase64)?;
        Deserializer::new()
            .deserialize(&mut &bytes[..])
            .map_err(|e| ReportError::NotV2(format!("{e:?}")))
    }

    /// The errors by kind, or the first unknown kind's name.
    pub fn error_kinds(&self) -> Result<BTreeMap<ErrorKind, u64>, ReportError> {
        self.errors
            .iter()
            .map(|(k, v)| {
                let kind =
                    ErrorKind::parse(k).ok_or_else(|| ReportError::UnknownKind(k.clone()))?;
                Ok((kind, *v))
            })
            .collect()
    }
}

/// Why a part of an agent's report cannot be read back; the cause is in the message.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("histogram not base64: {0}")]
    NotBase64(base64::DecodeError),
    /// The decoder's own description (its error has no `Display`).
    #[error("histogram not in the V2 encoding: {0}")]
    NotV2(String),
    #[error("unknown error kind {0:?}")]
    UnknownKind(String),
}

/// One end of the connection: the stream and the bytes read past the last line.
pub struct Wire {
    stream: Conn,
    /// Bytes read but not yet returned as a line; never more than `max_line_bytes` + 1.
    pending: Vec<u8>,
    max_line_bytes: usize,
}

/// Why a message could not be read.
#[derive(Debug)]
pub enum RecvError {
    /// The other end closed the connection (or reset it).
    Closed,
    TimedOut,
    Io(io::Error),
    /// Not one of the messages, or too long.
    Bad(String),
}

/// How long a write may wait for the other end to read, before it fails.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// The buffer kept between lines, at most: a long line's memory is returned after it.
const KEEP_BYTES: usize = 64 << 10;

/// The connection a wire reads and writes: plain TCP, or TLS over it.
enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

impl Conn {
    /// The stream its bytes go through: the TCP stream, or TLS over it.
    fn io(&mut self) -> &mut dyn ReadWrite {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => &mut **s,
        }
    }
}

impl Wire {
    /// A wire that reads lines of at most `max_line_bytes` (the newline included).
    pub fn new(stream: TcpStream, max_line_bytes: usize) -> io::Result<Wire> {
        Wire::prepare(&stream)?;
        Ok(Wire::over(Conn::Plain(stream), max_line_bytes))
    }

    /// A wire over a TCP stream whose TLS handshake is done.
    pub fn tls(stream: TlsStream, max_line_bytes: usize) -> io::Result<Wire> {
        Wire::prepare(stream.tcp())?;
        Ok(Wire::over(Conn::Tls(Box::new(stream)), max_line_bytes))
    }

    /// Small messages leave at once, and a peer that does not read fails a write in time.
    pub fn prepare(stream: &TcpStream) -> io::Result<()> {
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT))
    }

    fn over(stream: Conn, max_line_bytes: usize) -> Wire {
        Wire {
            stream,
            pending: Vec::new(),
            max_line_bytes,
        }
    }

    /// The TCP stream under the wire (its timeouts, its descriptor, its shutdown).
    pub fn stream(&self) -> &TcpStream {
        match &self.stream {
            Conn::Plain(s) => s,
            Conn::Tls(s) => s.tcp(),
        }
    }

    /// Lines longer than this are refused from now on (the limit after authentication
    /// is larger than before).
    pub fn set_max_line_bytes(&mut self, max_line_bytes: usize) {
        self.max_line_bytes = max_line_bytes;
    }

    /// Whether bytes of a next message were read already (TLS records included).
    pub fn has_pending(&mut self) -> bool {
        !self.pending.is_empty()
            || match &mut self.stream {
                Conn::Plain(_) => false,
                Conn::Tls(s) => s.has_pending(),
            }
    }

    pub fn send<T: Serialize>(&mut self, msg: &T) -> io::Result<()> {
        let mut line = serde_json::to_vec(msg).map_err(io::Error::other)?;
        line.push(b'\n');
        self.stream.io().write_all(&line)?;
        self.stream.io().flush()
    }

    /// The next message, waiting at most `timeout` in all (`None`: without limit).
    pub fn recv<T: for<'de> Deserialize<'de>>(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<T, RecvError> {
        self.recv_by(timeout.map(|t| Instant::now() + t))
    }

    /// The next message, if it is complete by `deadline` (`None`: without limit).
    pub fn recv_by<T: for<'de> Deserialize<'de>>(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<T, RecvError> {
        let line = self.recv_line(deadline)?;
        serde_json::from_slice(&line).map_err(|e| RecvError::Bad(format!("bad message: {e}")))
    }

    /// The next line, newline included, read in chunks with one deadline for the whole
    /// line (a peer that sends a byte now and then gains no time) and never more than
    /// `max_line_bytes` held.
    pub fn recv_line(&mut self, deadline: Option<Instant>) -> Result<Vec<u8>, RecvError> {
        let mut chunk = [0u8; 8192];
        let mut scanned = 0;
        loop {
            if let Some(i) = self.pending[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + i + 1;
                if end > self.max_line_bytes {
                    return Err(self.too_long());
                }
                let rest = self.pending.split_off(end);
                let line = std::mem::replace(&mut self.pending, rest);
                if self.pending.capacity() > KEEP_BYTES {
                    self.pending.shrink_to(KEEP_BYTES);
                }
                return Ok(line);
            }
            scanned = self.pending.len();
            if scanned >= self.max_line_bytes {
                return Err(self.too_long());
            }
            let timeout = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(RecvError::TimedOut);
                    }
                    Some(left.max(Duration::from_millis(1)))
                }
                None => None,
            };
            self.stream()
                .set_read_timeout(timeout)
                .map_err(RecvError::Io)?;
            // Never more than one byte past the limit: what tells a line too long.
            let room = (self.max_line_bytes + 1 - scanned).min(chunk.len());
            match self.stream.io().read(&mut chunk[..room]) {
                Ok(0) => return Err(RecvError::Closed),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) => match e.kind() {
                    io::ErrorKind::Interrupted => {}
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {}
                    io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::UnexpectedEof => {
                        return Err(RecvError::Closed);
                    }
                    _ => return Err(RecvError::Io(e)),
                },
            }
        }
    }

    fn too_long(&mut self) -> RecvError {
        self.pending = Vec::new();
        RecvError::Bad(format!(
            "a message longer than {} bytes",
            self.max_line_bytes
        ))
    }
}

/// Nanoseconds since the Unix epoch by the wall clock (the clock both ends share a
/// meaning of; the offset between two hosts' is measured, never assumed zero).
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
