//! Remote load clients: an **agent** on a client host runs the loads that a
//! **coordinator** on the measured host asks for, so a server can be measured with its
//! load generator elsewhere (paper 000 drove its servers from separate machines, which
//! its one-CPU baseline, `1c1t-up`, needs) and with more load than one client host makes.
//!
//! The protocol is one JSON object per line over TCP ([`proto`]), version 2:
//! 1. the handshake ([`auth`]): the coordinator says hello with a fresh nonce; the agent
//!    answers with its own nonce and its proof of the token (HMAC-SHA256 over both); the
//!    coordinator checks it and only then sends its own proof; the agent checks that and
//!    answers with its CPUs (or refuses in one line and closes). The token never crosses
//!    the wire, and a fake agent learns nothing of it. Before the proof a connection
//!    holds no coordinator slot and has one deadline and 4 KiB lines;
//! 2. pings: the agent's wall clock against the coordinator's, NTP-style (the offset of
//!    the exchange with the shortest round trip, every other exchange agreeing with it),
//!    kept as [`AgentInfo::clock_offset_ns`];
//! 3. per load: `prepare` (the agent checks the target against its allow-list, the
//!    requests against HTTP's grammar, the load against its bounds and the descriptors it
//!    has free, starts its load threads pinned to its CPUs, answers `ready`), then, once
//!    every agent is ready, `start` at one instant a little ahead, in each agent's clock
//!    (the start barrier), and each agent answers `done` with what it counted, its
//!    latencies as an HDR histogram in the V2 encoding;
//! 4. the coordinator checks each report could be true ([`proto::WireReport::check`], and
//!    its times against this host's clock) and adds the histograms ([`merge`]): the merged
//!    percentiles are those of one histogram of every agent's samples, never an average
//!    of percentiles.
//!
//! With TLS ([`tls`]: `smtlab agent --tls`, `--client-tls`) the same protocol runs inside
//! TLS 1.3, the agent's key derived from the token, so only an agent that holds the token
//! completes the handshake and nothing after it travels in the clear.
//!
//! Safety (docs/security.md): an agent sends load only to the addresses its
//! [`AllowList`] names (or, with an empty list, to this host's own, as `smtlab load`
//! does), bounds every load in time, connections, requests and descriptors
//! ([`AgentLimits`]), and stops a load within 100 ms when its coordinator's connection
//! ends or the coordinator sends anything during it.

mod agent;
mod allow;
mod auth;
mod coordinator;
pub(crate) mod proto;
mod tls;

pub use crate::sys::raise_open_file_limit;
pub use agent::{AgentConfig, AgentEvent, AgentLimits, serve};
pub use allow::{AllowError, AllowList};
pub use coordinator::{AgentInfo, AgentRun, Remote, RemoteError, RemoteReport};
pub use tls::{Channel, TlsError};

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
