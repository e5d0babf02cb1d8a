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
//! * [`SedaServer`] (`seda`): stages (accept, parse, read, send), each a pool of
//!   threads behind a queue, that read every file into a buffer and write it, without
//!   `sendfile` (paper 000's Haboob, the copying server).
//!
//! With the dynamic requests on, `/dyn/cgi` starts a process per request. The threads
//! and processes servers wait for it in the connection's thread or process; the event
//! server starts it without waiting (its stdout a non-blocking pipe in the loop's epoll,
//! the child on the loop's CPU as it inherits the loop thread's affinity), answers when
//! the pipe reaches end of file, reaps it without blocking, and kills its process group
//! when the client goes away, the connection times out or the server stops.
//!
//! All serve only the file set's URLs (a table lookup after [`super::request::parse`]
//! refused every odd spelling), answer malformed requests with 400 as soon as they are
//! seen malformed (HTTP/0.9 and bytes that are not HTTP included) and close,
//! answer `Expect: 100-continue` before reading the body, close connections
//! whose request head is not complete within the idle timeout (slowloris), that sit
//! idle that long, or that do not take a whole response within it (a client that stops
//! reading, or reads a little now and then, also one that pipelines many requests: the
//! threads and processes servers start a response's deadline anew only once the client
//! has taken everything sent before; reset rather than closed, so the unsent bytes go
//! too), hold no buffer for an idle connection, and stop (closing every
//! connection) when dropped.
//!
//! One file a server (`builtin/event.rs`, `threads.rs`, `processes.rs`, `seda.rs`); the blocking
//! connection the threads and processes servers share is in `conn.rs`; what every
//! server answers is here.

mod conn;
mod event;
mod processes;
pub mod seda;
mod threads;

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::fileset::FileSet;
use super::request::{Method, Reject, Request};

pub use event::EventServer;
pub use processes::ProcessServer;
pub use seda::SedaServer;
pub use threads::ThreadServer;

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
    /// within this long of its start (of when the client last had taken everything sent,
    /// for a pipelining client), is closed.
    pub idle_timeout: Duration,
    /// Most open connections (event: per loop; threads: threads).
    pub max_conns: usize,
    /// The address it listens on (loopback; this host's address on the way to remote
    /// load agents, or the unspecified one to take every address's connections).
    pub bind_ip: std::net::IpAddr,
}

impl Default for ServerOpts {
    fn default() -> Self {
        ServerOpts {
            idle_timeout: Duration::from_secs(10),
            max_conns: 20_000,
            bind_ip: std::net::Ipv4Addr::LOCALHOST.into(),
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

/// Whether `100 Continue` is due now for `req`, with `buffered` bytes of the connection
/// read: its client waits for it before it sends the body, and none of the body has
/// come. Every read brings at least a byte, so this holds on one read only and the
/// interim response goes out once.
fn owes_continue(req: &Request, buffered: usize) -> bool {
    req.expect_continue && req.content_length > 0 && buffered == req.head_len
}

/// What to send for a parsed request: a head and maybe a file.
struct Reply {
    head: Vec<u8>,
    file: Option<(std::fs::File, u64)>,
    keep_alive: bool,
}

impl Reply {
    /// The error response for `rej`, after which the connection closes.
    fn refuse(rej: Reject) -> Reply {
        Reply {
            head: error_response(rej),
            file: None,
            keep_alive: false,
        }
    }
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
        Err(rej) => Reply::refuse(rej),
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
        (Method::Post, _) => Reply::refuse(Reject::Method),
        (_, None) => Reply::refuse(Reject::NotFound),
        (m, Some((f, size))) => Reply {
            head: response_head(200, "OK", size, req.keep_alive),
            file: (m == Method::Get).then_some((f, size)),
            keep_alive: req.keep_alive,
        },
    }
}

/// A non-blocking listener on `addr` (IPv4) that other event loops' listeners may share.
fn listener_reuseport(addr: SocketAddr) -> io::Result<TcpListener> {
    if !addr.is_ipv4() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "built-in servers listen on IPv4",
        ));
    }
    smtlab_loadgen::sys::tcp_listener(&addr, true, true)
}

fn now_ns(origin: Instant) -> u64 {
    origin.elapsed().as_nanos() as u64
}
