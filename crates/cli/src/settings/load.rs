//! The settings of `smtlab load`: the URL, the connections and threads, the times, the
//! rate and the client's CPUs, checked before any connection is made.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use smtlab_loadgen::{LoadConfig, Mix, RequestSpec};
use smtlab_model::CpuSet;
use smtlab_model::quote::quoted;

use crate::args::LoadArgs;

/// A load to offer: its configuration, the client's CPUs (none: unpinned) and the
/// requests.
pub struct Load {
    pub cfg: LoadConfig,
    pub cpus: Vec<u32>,
    pub mix: Arc<Mix>,
    /// The one request, for remote agents (which render their own mix).
    pub request: RequestSpec,
}

pub fn load(a: &LoadArgs) -> Result<Load> {
    let (addr, host, path) = parse_url(&a.url)?;
    // Remote agents check the target against their own allow-lists.
    if a.client_hosts.is_empty()
        && let Err(e) = smtlab_loadgen::check_local(&addr)
    {
        bail!("{}: {e}", quoted(&a.url));
    }
    if a.connections == 0 || a.connections > 100_000 {
        bail!("-c {}: expected 1 to 100000 connections", a.connections);
    }
    if a.threads == 0 || a.threads > a.connections {
        bail!(
            "-t {}: expected 1 to {} threads (at most one per connection)",
            a.threads,
            a.connections
        );
    }
    let duration = seconds("-d", &a.duration)?;
    if duration.is_zero() {
        bail!("-d {}: expected more than 0 seconds", quoted(&a.duration));
    }
    let warmup = seconds("--warmup", &a.warmup)?;
    let timeout = seconds("--timeout", &a.timeout)?;
    if timeout.is_zero() {
        bail!(
            "--timeout {}: expected more than 0 seconds",
            quoted(&a.timeout)
        );
    }
    let cpus: Vec<u32> = match &a.cpus {
        Some(list) => CpuSet::parse_list(list)
            .map_err(|e| anyhow::anyhow!("--cpus {list:?}: {e}"))?
            .to_vec(),
        None => Vec::new(),
    };
    let mut cfg = LoadConfig::new(addr, a.connections, duration);
    cfg.host = host.clone();
    cfg.threads = a.threads;
    cfg.warmup = warmup;
    cfg.timeout = timeout;
    cfg.keep_alive = !a.close;
    cfg.rate_per_s = a.rate.as_deref().map(rate).transpose()?;
    cfg.busy_poll = match a.busy_poll.as_deref() {
        // Pinned clients are taken to have their CPUs to themselves.
        None if cpus.is_empty() => Duration::ZERO,
        None => DEFAULT_BUSY_POLL,
        Some(text) => match text.trim().trim_end_matches("us").parse::<u64>() {
            Ok(us) if us <= 1_000_000 => Duration::from_micros(us),
            _ => bail!(
                "--busy-poll {}: expected microseconds from 0 to 1000000, e.g. 50",
                quoted(text)
            ),
        },
    };
    if !a.client_hosts.is_empty() {
        // The agents have their hosts to themselves.
        cfg.busy_poll = a
            .busy_poll
            .as_ref()
            .map_or(DEFAULT_BUSY_POLL, |_| cfg.busy_poll);
    }
    let request = RequestSpec::get(path);
    let mix = Arc::new(Mix::single(request.clone(), &host, cfg.keep_alive));
    Ok(Load {
        cfg,
        cpus,
        mix,
        request,
    })
}

/// `http://HOST:PORT/PATH` split into an address, the Host header and the path.
pub(crate) fn parse_url(url: &str) -> Result<(SocketAddr, String, String)> {
    let Some(rest) = url.strip_prefix("http://") else {
        bail!(
            "URL {}: expected http://HOST:PORT/PATH (https is not supported)",
            quoted(url)
        );
    };
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if hostport.is_empty() {
        bail!("URL {}: no host", quoted(url));
    }
    let with_port = if hostport
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        || (hostport.starts_with('[') && hostport.contains("]:"))
    {
        hostport.to_string()
    } else {
        format!("{hostport}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            anyhow::anyhow!("URL {}: cannot resolve {}", quoted(url), quoted(hostport))
        })?;
    if path
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        bail!(
            "URL {}: the path has spaces or control characters",
            quoted(url)
        );
    }
    Ok((addr, hostport.to_string(), path.to_string()))
}

fn seconds(name: &str, text: &str) -> Result<Duration> {
    let t = text.trim().trim_end_matches('s');
    match t.parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=86_400.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => bail!("{name} {}: expected seconds, e.g. 10 or 2.5", quoted(text)),
    }
}

fn rate(text: &str) -> Result<f64> {
    let t = text.trim().trim_end_matches("/s");
    match t.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => bail!(
            "--rate {}: expected requests per second, e.g. 5000 or 5000/s",
            quoted(text)
        ),
    }
}

/// The busy-poll window of a client pinned with `--cpus`: about two answers' time of a
/// busy server, so the client does not sleep between them.
const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let (addr, host, path) = parse_url("http://127.0.0.1:8080/a/b?c").unwrap();
        assert_eq!(addr.to_string(), "127.0.0.1:8080");
        assert_eq!(host, "127.0.0.1:8080");
        assert_eq!(path, "/a/b?c");
        let (addr, _, path) = parse_url("http://127.0.0.1").unwrap();
        assert_eq!(addr.port(), 80);
        assert_eq!(path, "/");
        assert!(parse_url("https://127.0.0.1/").is_err());
        assert!(parse_url("http:///x").is_err());
        assert!(rate("5000/s").is_ok());
        assert!(rate("-1").is_err());
        assert!(seconds("-d", "2.5s").is_ok());
        assert!(seconds("-d", "x").is_err());
    }
}
