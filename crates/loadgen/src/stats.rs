//! What a load counted: per thread while it runs, merged into one [`LoadReport`].

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::http::ErrorKind;

/// Latencies are kept in nanoseconds, 3 significant digits, up to this.
const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).expect("valid histogram bounds")
}

/// One connection's share of a load (counted after the warm-up; errors always).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ConnStats {
    /// The connection's number over the whole load.
    pub conn: usize,
    /// Good responses.
    pub requests: u64,
    /// Bytes of good responses, heads included.
    pub bytes: u64,
    pub body_bytes: u64,
    /// Requests that ended in an error of any kind.
    pub errors: u64,
    /// Paced loads: from the connection's first request to the later of its last good
    /// response and the end of its schedule (its bytes at the paced rate), over the
    /// whole load, warm-up included: a server that keeps up gives exactly the paced
    /// rate however one big file falls into a short window; one that falls behind
    /// gives less.
    pub paced_ns: u64,
    /// The bytes behind `paced_ns`.
    pub paced_bytes: u64,
}

impl ConnStats {
    /// Bits per second this connection received: over its paced time in a paced load,
    /// else over `window_ns`.
    pub fn bits_per_s(&self, window_ns: u64) -> f64 {
        let (bytes, ns) = if self.paced_ns > 0 {
            (self.paced_bytes, self.paced_ns)
        } else {
            (self.bytes, window_ns)
        };
        if ns == 0 {
            return 0.0;
        }
        bytes as f64 * 8.0 / (ns as f64 / 1e9)
    }
}

#[derive(Debug)]
pub(crate) struct ThreadReport {
    pub window_ns: u64,
    pub connects: u64,
    /// Complete answers, good or bad, warm-up included: none at all means the server
    /// never answered.
    pub answered: u64,
    /// Requests still waiting for their answer when the load ended.
    pub unanswered: u64,
    /// Open loop: requests that came due before the end but were never sent.
    pub unsent: u64,
    pub latency: Histogram<u64>,
    pub errors: BTreeMap<ErrorKind, u64>,
    pub bad_statuses: BTreeMap<u16, u64>,
    pub conns: Vec<ConnStats>,
    /// The thread's CPU time spent on the load (not spinning on empty polls) over its
    /// whole load, warm-up included, and that load's length.
    pub busy: Option<(u64, u64)>,
}

impl ThreadReport {
    pub fn new() -> Self {
        ThreadReport {
            window_ns: 0,
            connects: 0,
            answered: 0,
            unanswered: 0,
            unsent: 0,
            latency: histogram(),
            errors: BTreeMap::new(),
            bad_statuses: BTreeMap::new(),
            conns: Vec::new(),
            busy: None,
        }
    }

    pub fn record(&mut self, latency_ns: u64) {
        self.latency.saturating_record(latency_ns.max(1));
    }

    pub fn error(&mut self, kind: ErrorKind, status: u16) {
        *self.errors.entry(kind).or_default() += 1;
        if kind == ErrorKind::BadStatus {
            *self.bad_statuses.entry(status).or_default() += 1;
        }
    }
}

/// Latency percentiles of the good responses, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}

/// Everything one load counted.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// The measured window (after the warm-up), the longest of the threads'.
    pub window_ns: u64,
    /// Good responses in the window.
    pub requests: u64,
    /// Their bytes, heads included, and their bodies alone.
    pub bytes: u64,
    pub body_bytes: u64,
    /// Connections opened (one per request without keep-alive).
    pub connects: u64,
    /// Requests still waiting for their answer when the load ended (a closed loop
    /// always leaves one per connection): not errors, unless the server answered
    /// nothing during the whole load, when they are counted as timeouts instead.
    pub unanswered: u64,
    /// Open loop: requests that came due before the load ended but were never sent,
    /// because their connection was still waiting for an earlier answer.
    pub unsent: u64,
    /// Failed requests by kind, over the whole load including its warm-up.
    pub errors: BTreeMap<ErrorKind, u64>,
    /// The statuses behind [`ErrorKind::BadStatus`].
    pub bad_statuses: BTreeMap<u16, u64>,
    pub latency: Histogram<u64>,
    pub conns: Vec<ConnStats>,
    /// The share of their time the load threads spent on a CPU working on the load,
    /// over the whole load, their mean: near 1, the load generator itself was the limit,
    /// as the server left it nothing to wait for. Spinning on empty polls (`busy_poll`)
    /// is not work, nor is time kept off the CPU (a CPU shared with the server).
    /// `None` when not known (agents that do not say).
    pub client_busy: Option<f64>,
}

/// From this share of their time working on a CPU, load threads are taken to be
/// saturated: the load generator, not the server, set the figure.
pub const CLIENT_SATURATED: f64 = 0.9;

impl LoadReport {
    /// A report of no load: nothing counted, an empty histogram; what merges start from.
    pub(crate) fn empty() -> LoadReport {
        LoadReport {
            window_ns: 0,
            requests: 0,
            bytes: 0,
            body_bytes: 0,
            connects: 0,
            unanswered: 0,
            unsent: 0,
            errors: BTreeMap::new(),
            bad_statuses: BTreeMap::new(),
            latency: histogram(),
            conns: Vec::new(),
            client_busy: None,
        }
    }

    pub(crate) fn merge(parts: Vec<ThreadReport>) -> LoadReport {
        let mut r = LoadReport::empty();
        let mut answered = 0;
        let busy: Vec<f64> = parts
            .iter()
            .map(|p| p.busy.map(|(busy, wall)| busy as f64 / wall.max(1) as f64))
            .collect::<Option<_>>()
            .unwrap_or_default();
        if !busy.is_empty() {
            r.client_busy = Some(busy.iter().sum::<f64>() / busy.len() as f64);
        }
        for p in parts {
            r.window_ns = r.window_ns.max(p.window_ns);
            r.connects += p.connects;
            answered += p.answered;
            r.unanswered += p.unanswered;
            r.unsent += p.unsent;
            let _ = r.latency.add(&p.latency);
            for (k, v) in p.errors {
                *r.errors.entry(k).or_default() += v;
            }
            for (k, v) in p.bad_statuses {
                *r.bad_statuses.entry(k).or_default() += v;
            }
            for c in p.conns {
                r.requests += c.requests;
                r.bytes += c.bytes;
                r.body_bytes += c.body_bytes;
                r.conns.push(c);
            }
        }
        r.conns.sort_by_key(|c| c.conn);
        if answered == 0 && r.unanswered > 0 {
            // A server that never answered: its requests waited the whole load, as long
            // as the load can tell a timeout, whatever `timeout` says.
            *r.errors.entry(ErrorKind::Timeout).or_default() += r.unanswered;
            r.unanswered = 0;
        }
        r
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// The load threads were saturated ([`CLIENT_SATURATED`]): what was measured is
    /// what this load generator could do, and the server could do at least as much.
    pub fn client_saturated(&self) -> bool {
        self.client_busy.is_some_and(|b| b >= CLIENT_SATURATED)
    }

    pub fn seconds(&self) -> f64 {
        self.window_ns as f64 / 1e9
    }

    pub fn requests_per_s(&self) -> f64 {
        if self.window_ns == 0 {
            return 0.0;
        }
        self.requests as f64 / self.seconds()
    }

    pub fn bytes_per_s(&self) -> f64 {
        if self.window_ns == 0 {
            return 0.0;
        }
        self.bytes as f64 / self.seconds()
    }

    pub fn percentiles(&self) -> Percentiles {
        let h = &self.latency;
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
            mean_ns: h.mean(),
        }
    }

    /// Good responses slower than `ns`, to the histogram's resolution (3 significant
    /// digits: one within a thousandth of `ns` may fall on either side). Under an open
    /// loop this counts every request a stall delayed, not only those in flight.
    pub fn slower_than(&self, ns: u64) -> u64 {
        let h = &self.latency;
        h.len().saturating_sub(h.count_between(0, ns))
    }

    /// Errors as `reset 3, bad_status 2 (500: 2)`, or `none`.
    pub fn errors_line(&self) -> String {
        if self.errors.is_empty() {
            return "none".into();
        }
        let mut parts: Vec<String> = self
            .errors
            .iter()
            .map(|(k, v)| format!("{} {v}", k.as_str()))
            .collect();
        if !self.bad_statuses.is_empty() {
            let st: Vec<String> = self
                .bad_statuses
                .iter()
                .map(|(s, n)| format!("{s}: {n}"))
                .collect();
            parts.push(format!("(statuses {})", st.join(", ")));
        }
        parts.join(", ")
    }

    /// Connections that received at least `min_bits_per_s` without any error.
    pub fn conforming(&self, min_bits_per_s: f64) -> usize {
        self.conns
            .iter()
            .filter(|c| c.errors == 0 && c.bits_per_s(self.window_ns) >= min_bits_per_s)
            .count()
    }
}
