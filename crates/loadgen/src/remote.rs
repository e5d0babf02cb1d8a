//! Remote load clients: an **agent** on a client host runs the loads that a
//! **coordinator** on the measured host asks for, so a server can be measured with its
//! load generator elsewhere (paper 000 drove its servers from separate machines, which
//! its one-CPU baseline, `1c1t-up`, needs) and with more load than one client host makes.
//!
//! The protocol is one JSON object per line over TCP ([`proto`]):
//! 1. the coordinator says hello with the shared token; the agent compares it in
//!    constant time and refuses a wrong one (and closes), else answers with its CPUs;
//! 2. pings: the agent's wall clock against the coordinator's, NTP-style (the offset of
//!    the exchange with the shortest round trip), kept as [`AgentInfo::clock_offset_ns`];
//! 3. per load: `prepare` (the agent checks the target against its allow-list and its
//!    bounds, starts its load threads pinned to its CPUs, answers `ready`), then, once
//!    every agent is ready, `start` at one instant a little ahead, in each agent's clock
//!    (the start barrier), and each agent answers `done` with what it counted, its
//!    latencies as an HDR histogram in the V2 encoding;
//! 4. the coordinator adds the histograms ([`merge`]): the merged percentiles are those
//!    of one histogram of every agent's samples, never an average of percentiles.
//!
//! Safety: an agent sends load only to the addresses its [`AllowList`] names (or, with an
//! empty list, to this host's own, as `smtlab load` does), bounds every load in time,
//! connections and requests ([`AgentLimits`]), and stops a load within 50 ms when its
//! coordinator's connection drops.

mod agent;
mod allow;
mod auth;
mod coordinator;
pub(crate) mod proto;

pub use agent::{AgentConfig, AgentEvent, AgentLimits, raise_open_file_limit, serve};
pub use allow::AllowList;
pub use coordinator::{AgentInfo, AgentRun, Remote, RemoteError, RemoteReport};

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
