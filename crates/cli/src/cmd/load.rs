//! `smtlab load URL`: the load generator alone, like wrk.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use smtlab_loadgen::{LoadConfig, LoadReport, Mix, Pinning, RequestSpec};
use smtlab_model::CpuSet;

use smtlab_model::quote::quoted;

use crate::args::LoadArgs;

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

pub fn run(a: &LoadArgs) -> Result<()> {
    let (addr, host, path) = parse_url(&a.url)?;
    if let Err(e) = smtlab_loadgen::check_local(&addr) {
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
    let mix = Arc::new(Mix::single(RequestSpec::get(path), &host, cfg.keep_alive));
    let pin = if cpus.is_empty() {
        Pinning::Unpinned
    } else {
        Pinning::Cpus(&cpus)
    };
    let report = smtlab_loadgen::run(&cfg, mix, pin).map_err(|e| anyhow::anyhow!("{e}"))?;
    if a.json {
        super::emit(&super::json_text(&json(a, &cfg, &cpus, &report))?)?;
    } else {
        super::emit(&text(a, &cfg, &cpus, &report))?;
    }
    // What was counted is shown either way; a load that got no good answer at all
    // measured nothing, and says so with its exit status.
    if report.requests == 0 {
        bail!(
            "{}: no request succeeded in {:.1} s (errors: {})",
            a.url,
            report.seconds(),
            report.errors_line()
        );
    }
    Ok(())
}

fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{:.1} us", ns as f64 / 1e3)
    }
}

fn text(a: &LoadArgs, cfg: &LoadConfig, cpus: &[u32], r: &LoadReport) -> String {
    let mode = if cfg.keep_alive {
        "keep-alive"
    } else {
        "a connection per request"
    };
    let lp = match cfg.rate_per_s {
        Some(r) => format!("open loop at {r} requests/s"),
        None => "closed loop".into(),
    };
    let on = if cpus.is_empty() {
        "unpinned".to_string()
    } else {
        format!(
            "on CPUs {}",
            cpus.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let poll = if cfg.busy_poll.is_zero() {
        String::new()
    } else {
        format!(", polling {} us", cfg.busy_poll.as_micros())
    };
    let p = r.percentiles();
    let mut s = format!(
        "smtlab load {}: {} connections ({mode}), {lp}, {} thread(s) {on}{poll}, {:.1} s measured\n",
        a.url,
        cfg.connections,
        cfg.threads,
        r.seconds()
    );
    s.push_str(&format!(
        "requests   {} ({:.1}/s)\n",
        r.requests,
        r.requests_per_s()
    ));
    s.push_str(&format!(
        "transfer   {:.2} MB ({:.2} MB/s; bodies {:.2} MB)\n",
        r.bytes as f64 / 1e6,
        r.bytes_per_s() / 1e6,
        r.body_bytes as f64 / 1e6
    ));
    s.push_str(&format!("errors     {}\n", r.errors_line()));
    if r.unanswered > 0 {
        s.push_str(&format!(
            "unanswered {} (still waiting for an answer when the load ended)\n",
            r.unanswered
        ));
    }
    if cfg.rate_per_s.is_some() {
        s.push_str(&format!(
            "unsent     {} (came due but were not sent: their connection still waited for an answer)\n",
            r.unsent
        ));
    }
    if r.requests > 0 {
        s.push_str(&format!(
            "latency    p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (mean {})\n",
            ms(p.p50_ns),
            ms(p.p90_ns),
            ms(p.p99_ns),
            ms(p.p999_ns),
            ms(p.max_ns),
            ms(p.mean_ns as u64)
        ));
    }
    if r.requests > 0 {
        s.push_str(&format!(
            "slow       {} over 10 ms, {} over 100 ms, {} over 1 s\n",
            r.slower_than(10_000_000),
            r.slower_than(100_000_000),
            r.slower_than(1_000_000_000)
        ));
    }
    if cfg.rate_per_s.is_some() {
        s.push_str("(latency counts from each request's scheduled time)\n");
    }
    s
}

fn json(a: &LoadArgs, cfg: &LoadConfig, cpus: &[u32], r: &LoadReport) -> serde_json::Value {
    let p = r.percentiles();
    let errors: serde_json::Map<String, serde_json::Value> = r
        .errors
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), (*v).into()))
        .collect();
    serde_json::json!({
        "schema": "smtlab.load/1",
        "url": a.url,
        "connections": cfg.connections,
        "threads": cfg.threads,
        "cpus": cpus,
        "keep_alive": cfg.keep_alive,
        "rate_per_s": cfg.rate_per_s,
        "busy_poll_ns": cfg.busy_poll.as_nanos() as u64,
        "window_ns": r.window_ns,
        "requests": r.requests,
        "requests_per_s": r.requests_per_s(),
        "bytes": r.bytes,
        "body_bytes": r.body_bytes,
        "bytes_per_s": r.bytes_per_s(),
        "connects": r.connects,
        "errors": errors,
        "unanswered": r.unanswered,
        "unsent": r.unsent,
        "bad_statuses": r.bad_statuses.iter().map(|(k, v)| (k.to_string(), *v)).collect::<std::collections::BTreeMap<_, _>>(),
        "latency_ns": {
            "p50": p.p50_ns, "p90": p.p90_ns, "p99": p.p99_ns, "p99_9": p.p999_ns,
            "max": p.max_ns, "mean": p.mean_ns,
        },
        // Counts, not times: how many good requests took longer than each bound.
        "slower_than_ms": {
            "1": r.slower_than(1_000_000), "10": r.slower_than(10_000_000),
            "100": r.slower_than(100_000_000), "1000": r.slower_than(1_000_000_000),
        },
    })
}

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
