//! # smtlab-workloads
//!
//! Server and system workloads, each behind the same [`Benchmark`] trait as the
//! micro-benchmarks so the runner measures them alike (calibration aside: a workload
//! sample is a fixed stretch of load, see each module).
//!
//! A server workload puts its server on the placement's CPUs and drives it from the
//! [`ClientSide`](smtlab_bench::client::ClientSide) that the runner hands it in
//! [`BenchContext::client`](smtlab_bench::BenchContext): CPUs apart from the placement,
//! and threads started outside the counters, so per-request costs are the server's.
//! Processes it starts (real servers, pgbench) are started with
//! [`smtlab_bench::process`] so they never outlive smtlab.
//!
//! | module | workloads | paper |
//! |---|---|---|
//! | [`web`] | `web-static`, `web-capacity`, `web-slo`, `web-server` | 000, 003 |
//! | [`net`] | `chat`, `tbench`, `tcp-stream`, `tcp-rr`, `tcp-crr`, `udp-rr` | 001, 004 |
//! | [`dbench`] | `dbench` | 001 |
//! | [`db`] | `oltp-pg`, `oltp-sqlite` | 004 |
//! | [`sdet`] | `sdet` | 004 |
//! | [`trade`] | `app-trade` | 004 |
//! | [`nfs`] | `nfs-sfs` | 004 |
//!
//! The benchmarks that commands build rather than the catalog lists live here too:
//!
//! | module | benchmark | command |
//! |---|---|---|
//! | [`exec`] | the user's own command | `smtlab exec` |
//! | [`corun`] | a workload with a partner on another CPU | `smtlab corun`, `smtlab penalty` |
//! | [`utilisation`] | an open-loop job offered at fixed rates | `smtlab util` |

use smtlab_bench::{BenchError, Benchmark};

pub mod corun;
pub mod db;
pub mod dbench;
pub mod exec;
pub mod mix;
pub mod net;
pub mod nfs;
pub mod scratch;
pub mod sdet;
#[cfg(feature = "trade")]
pub mod trade;
pub mod utilisation;
pub mod web;

/// Whether smtlab runs as root (servers then drop to an unprivileged user).
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid() takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The one-line error of parameter `name` whose `value` is not what `expected` says.
pub(crate) fn bad_param(name: &str, value: impl ToString, expected: &str) -> BenchError {
    smtlab_bench::ParamError::value(name, value.to_string(), expected).into()
}

/// Parameter `name`, one of `choices`' words, as the value that word stands for.
pub(crate) fn one_of<T: Copy>(
    p: &smtlab_bench::Params,
    name: &str,
    choices: &[(&str, T)],
) -> Result<T, BenchError> {
    let v = p.get_str(name)?;
    match choices.iter().find(|(word, _)| *word == v) {
        Some(&(_, t)) => Ok(t),
        None => {
            let words: Vec<&str> = choices.iter().map(|(word, _)| *word).collect();
            Err(bad_param(name, v, &words.join(" or ")))
        }
    }
}

/// Parameter `name`, an integer from `lo` to `hi`.
pub(crate) fn bounded(
    p: &smtlab_bench::Params,
    name: &str,
    lo: u64,
    hi: u64,
) -> Result<u64, BenchError> {
    Ok(p.get_u64_in(name, lo..=hi, &format!("{lo} to {hi}"))?)
}

/// The `port` parameter of `server=cmd`: the port the user's server listens on.
pub(crate) fn cmd_port(p: &smtlab_bench::Params) -> Result<u16, BenchError> {
    let port = p.get_u64("port")?;
    u16::try_from(port)
        .map_err(|_| bad_param("port", port, "a TCP port, 1 to 65535 (0: {port} in cmd)"))
}

/// What a workload cell costs the plan ([`Benchmark::cost`]): fixed samples of
/// `sample_s` seconds and `setup_s` seconds of preparing (servers, data sets). A rough
/// figure: the run's estimate, not a measurement.
pub(crate) fn load_cost(sample_s: f64, setup_s: f64) -> smtlab_bench::CellCost {
    let ns = |s: f64| (s.max(0.0) * 1e9) as u64;
    smtlab_bench::CellCost {
        memory_bytes: 0,
        sample_ns: Some(ns(sample_s)),
        longest_sample_ns: None,
        setup_ns: ns(setup_s),
    }
}

/// A workload's `duration` parameter in seconds for [`load_cost`], read with the same
/// parser as `prepare` (a time with its unit) but any length accepted: the range a
/// workload allows is `prepare`'s to check, and the estimate must not refuse what the
/// run would measure.
pub(crate) fn any_duration_s(p: &smtlab_bench::Params) -> Result<f64, smtlab_bench::ParamError> {
    Ok(p.get_duration_in(
        "duration",
        std::time::Duration::ZERO..=std::time::Duration::from_secs(366 * 86_400),
    )?
    .as_secs_f64())
}

/// The cells of parameter `name` at `default`'s values in the default suite and `full`'s
/// in the full one; none in the quick suite, which runs each workload's quick form.
pub(crate) fn sweep_values(
    suite: smtlab_bench::Suite,
    name: &str,
    default: &[u64],
    full: &[u64],
) -> Vec<smtlab_bench::SweepCell> {
    let values = match suite {
        smtlab_bench::Suite::Quick => &[],
        smtlab_bench::Suite::Default => default,
        smtlab_bench::Suite::Full => full,
    };
    values
        .iter()
        .map(|v| smtlab_bench::SweepCell::everywhere(&[(name, v.to_string())]))
        .collect()
}

/// The `threads` parameter of the HTTP loads: their client threads.
pub(crate) fn client_threads_param() -> smtlab_model::ParamInfo {
    let help = "client threads (0: one per client CPU)";
    smtlab_bench::params::declare("threads", "0", None, help)
}

/// The `irq` parameter of the network workloads (paper 004 s3): where the runner steers
/// the device's interrupts and receive processing for the cell
/// ([`smtlab_placement::irq`]); the workload itself only declares it.
pub(crate) fn irq_param() -> smtlab_model::ParamInfo {
    smtlab_bench::params::declare(
        smtlab_placement::irq::PARAM,
        "none",
        None,
        "network interrupts and receive processing (RPS) of the device (lo unless :DEV) steered \
         to the server's idle SMT sibling (sibling) or another core (other-core) for the cell, \
         restored after it, even on kill -9; none: left as they are",
    )
}

/// Every workload, in the order `smtlab list` shows them.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    let mut v = web::benchmarks();
    v.extend(net::benchmarks());
    v.extend(dbench::benchmarks());
    v.extend(db::benchmarks());
    v.extend(sdet::benchmarks());
    v.push(Box::new(mix::Mix));
    #[cfg(feature = "trade")]
    v.push(Box::new(trade::AppTrade));
    v.push(Box::new(nfs::NfsSfs));
    v
}

#[cfg(test)]
mod testutil;
