//! Remote load clients of a cell (`--client-hosts`): what each smtlab agent sent, its
//! errors and its clock, read back from the samples' agent metrics, for the terminal
//! and the HTML page alike.

use smtlab_model::metrics::web as m;
use smtlab_model::stats;
use smtlab_model::{CellRecord, SampleRecord};

/// One agent over a cell's samples.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFigures {
    /// Its place in `--client-hosts` (0 first).
    pub index: usize,
    /// Mean over the samples.
    pub requests_per_s: f64,
    /// Its part of all agents' requests per second (0 to 1).
    pub share: f64,
    /// Failed requests, added over the samples.
    pub errors: f64,
    /// Its clock minus the measured host's, mean over the samples.
    pub clock_offset_ns: f64,
    /// The round trip the offset was measured over: the offset is good to half of it.
    pub rtt_ns: f64,
}

/// The agents of a cell measured with remote clients.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteClients {
    pub agents: Vec<AgentFigures>,
    /// The widest start spread of any sample (latest agent start minus earliest).
    pub start_spread_max_ns: f64,
    /// Agents lost during the cell (`agents` are those left).
    pub lost: usize,
    /// The samples the figures come from: all, or those since the last loss.
    pub samples: usize,
}

/// The cell's agents; `None` for a cell whose load ran on this host. Where agents were
/// lost mid-cell, the agents left are numbered afresh from the loss on, so the figures
/// come from the samples of the last set of agents only (those with the most lost).
pub fn remote_clients(c: &CellRecord) -> Option<RemoteClients> {
    let lost_in = |s: &SampleRecord| s.metrics.get(m::AGENTS_LOST).copied().unwrap_or(0.0);
    let lost = c.result.samples.iter().map(lost_in).fold(0.0f64, f64::max);
    let last: Vec<&SampleRecord> = c
        .result
        .samples
        .iter()
        .filter(|s| lost_in(s) == lost)
        .collect();
    let values = |key: &str| -> Vec<f64> {
        last.iter()
            .filter_map(|s| s.metrics.get(key).copied())
            .collect()
    };
    let n = values(m::AGENTS).into_iter().fold(0.0f64, f64::max) as usize;
    if n == 0 {
        return None;
    }
    let mut agents: Vec<AgentFigures> = (0..n)
        .map(|i| AgentFigures {
            index: i,
            requests_per_s: stats::mean(&values(&m::agent_requests_per_s(i))).unwrap_or(0.0),
            share: 0.0,
            errors: values(&m::agent_errors(i)).iter().sum(),
            clock_offset_ns: stats::mean(&values(&m::agent_clock_offset_ns(i))).unwrap_or(0.0),
            rtt_ns: stats::mean(&values(&m::agent_rtt_ns(i))).unwrap_or(0.0),
        })
        .collect();
    let total: f64 = agents.iter().map(|a| a.requests_per_s).sum();
    if total > 0.0 {
        for a in &mut agents {
            a.share = a.requests_per_s / total;
        }
    }
    let start_spread_max_ns = values(m::AGENTS_START_SPREAD_NS)
        .into_iter()
        .fold(0.0f64, f64::max);
    Some(RemoteClients {
        agents,
        start_spread_max_ns,
        lost: lost as usize,
        samples: last.len(),
    })
}

/// A short time: microseconds below a millisecond (`11.0 us`: offsets and spreads on a
/// LAN), milliseconds above (`1.250 ms`).
pub fn ms(ns: f64) -> String {
    if ns.abs() < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{:.3} ms", ns / 1e6)
    }
}

/// [`ms`] with its sign (`+1.6 us`).
pub fn ms_signed(ns: f64) -> String {
    let abs = ms(ns.abs());
    // No sign on a figure that rounds to zero.
    if !abs.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        return abs;
    }
    let sign = if ns < 0.0 { '-' } else { '+' };
    format!("{sign}{abs}")
}

/// One agent in a few words: `#0 49% 1234 req/s, 0 errors, clock -1.6 us +-11.0 us`.
pub fn agent_text(a: &AgentFigures) -> String {
    format!(
        "#{} {:.0}% {} req/s, {} errors, clock {} +-{}",
        a.index,
        100.0 * a.share,
        crate::fmt::num(a.requests_per_s),
        crate::fmt::num(a.errors),
        ms_signed(a.clock_offset_ns),
        ms(a.rtt_ns / 2.0)
    )
}

/// The cell's agents on one line (no newline; the caller wraps it): how many, their
/// start spread, then each agent.
pub fn line(r: &RemoteClients) -> String {
    let agents: Vec<String> = r.agents.iter().map(agent_text).collect();
    format!(
        "{}, started within {}: {}",
        heading(r),
        ms(r.start_spread_max_ns),
        agents.join("; ")
    )
}

/// `2 agents`, or after a loss `1 agent left (1 lost; its 3 samples since)`.
pub fn heading(r: &RemoteClients) -> String {
    let n = smtlab_model::unit::plural(r.agents.len(), "agent");
    if r.lost == 0 {
        return n;
    }
    format!(
        "{n} left ({} lost; figures from the {} since)",
        r.lost,
        smtlab_model::unit::plural(r.samples, "sample")
    )
}
