//! The wire: one JSON object per line, each way, over one TCP connection per
//! coordinator and agent. A line is at most [`MAX_LINE_BYTES`].

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use serde::{Deserialize, Serialize};

use crate::http::{ErrorKind, RequestSpec};
use crate::stats::{ConnStats, LoadReport};

/// Bumped when a message changes meaning; both ends refuse another version.
pub const VERSION: u32 = 1;

/// The longest line either end reads (a report of 100000 connections fits).
pub const MAX_LINE_BYTES: u64 = 64 << 20;

/// Coordinator to agent.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "snake_case")]
pub enum ToAgent {
    Hello {
        version: u32,
        token: String,
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
    Welcome { version: u32, cpus: Vec<u32> },
    Refused { reason: String },
    Pong { unix_ns: u64 },
    Ready { threads: usize },
    Done { report: Box<WireReport> },
    Failed { reason: String },
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
    pub requests: Vec<WireRequest>,
    pub weights: Vec<f64>,
}

/// A [`RequestSpec`] on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<String>,
    pub body: Vec<u8>,
    pub expect_body_len: Option<u64>,
}

impl From<&RequestSpec> for WireRequest {
    fn from(r: &RequestSpec) -> Self {
        WireRequest {
            method: r.method.clone(),
            path: r.path.clone(),
            headers: r.headers.clone(),
            body: r.body.clone(),
            expect_body_len: r.expect_body_len,
        }
    }
}

impl From<WireRequest> for RequestSpec {
    fn from(r: WireRequest) -> Self {
        RequestSpec {
            method: r.method,
            path: r.path,
            headers: r.headers,
            body: r.body,
            expect_body_len: r.expect_body_len,
        }
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
        })
    }

    /// The histogram back, or why it cannot be read.
    pub fn latency(&self) -> Result<Histogram<u64>, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.latency_v2)
            .map_err(|e| format!("histogram not base64: {e}"))?;
        Deserializer::new()
            .deserialize(&mut &bytes[..])
            .map_err(|e| format!("histogram not in the V2 encoding: {e:?}"))
    }

    /// The errors by kind, or the first unknown kind's name.
    pub fn error_kinds(&self) -> Result<BTreeMap<ErrorKind, u64>, String> {
        self.errors
            .iter()
            .map(|(k, v)| {
                ErrorKind::ALL
                    .iter()
                    .find(|e| e.as_str() == k)
                    .map(|e| (*e, *v))
                    .ok_or_else(|| format!("unknown error kind {k:?}"))
            })
            .collect()
    }
}

/// One end of the connection: a buffered reader and the stream to write.
pub struct Wire {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
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

impl Wire {
    pub fn new(stream: TcpStream) -> io::Result<Wire> {
        stream.set_nodelay(true)?;
        Ok(Wire {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    pub fn stream(&self) -> &TcpStream {
        &self.writer
    }

    pub fn send<T: Serialize>(&mut self, msg: &T) -> io::Result<()> {
        let mut line = serde_json::to_vec(msg).map_err(io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line)?;
        self.writer.flush()
    }

    /// The next message, waiting at most `timeout` (`None`: without limit).
    pub fn recv<T: for<'de> Deserialize<'de>>(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<T, RecvError> {
        self.reader
            .get_ref()
            .set_read_timeout(timeout.map(|t| t.max(Duration::from_millis(1))))
            .map_err(RecvError::Io)?;
        let mut line = Vec::new();
        let n = (&mut self.reader)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut line);
        match n {
            Ok(0) => return Err(RecvError::Closed),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(RecvError::TimedOut);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                return Err(RecvError::Closed);
            }
            Err(e) => return Err(RecvError::Io(e)),
        }
        if line.last() != Some(&b'\n') {
            return Err(if line.len() as u64 >= MAX_LINE_BYTES {
                RecvError::Bad(format!("a message longer than {MAX_LINE_BYTES} bytes"))
            } else {
                RecvError::Closed
            });
        }
        serde_json::from_slice(&line).map_err(|e| RecvError::Bad(format!("bad message: {e}")))
    }
}

/// Nanoseconds since the Unix epoch by the wall clock (the clock both ends share a
/// meaning of; the offset between two hosts' is measured, never assumed zero).
pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
