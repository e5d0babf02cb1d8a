//! `smtlab load`'s report: a few lines of text, or JSON (`smtlab.load/1`).

use smtlab_loadgen::remote::{AgentInfo, RemoteReport};
use smtlab_loadgen::{LoadConfig, LoadReport};
use smtlab_report::table::{Layout, wrap};

use crate::args::LoadArgs;

fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.2} ms")
    } else {
        format!("{:.1} µs", ns as f64 / 1e3)
    }
}

pub fn text(a: &LoadArgs, cfg: &LoadConfig, cpus: &[u32], r: &LoadReport) -> String {
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
        format!("on CPUs {}", super::cpus_in_order(cpus.iter().copied()))
    };
    let poll = if cfg.busy_poll.is_zero() {
        String::new()
    } else {
        format!(", polling {} µs", cfg.busy_poll.as_micros())
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
            "latency    p50 {}  p90 {}  p99 {}  p99.9 {}\n           max {}  mean {}\n",
            ms(p.p50_ns),
            ms(p.p90_ns),
            ms(p.p99_ns),
            ms(p.p999_ns),
            ms(p.max_ns),
            ms(p.mean_ns as u64)
        ));
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
    // Lines longer than the terminal break between words, the rest of a line indented.
    crate::term::fit(&s)
}

pub fn json(a: &LoadArgs, cfg: &LoadConfig, cpus: &[u32], r: &LoadReport) -> serde_json::Value {
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

/// A line per remote agent: its share, its errors and its clock against this host's.
pub fn agents_text(infos: &[AgentInfo], r: &RemoteReport) -> String {
    let mut s = format!(
        "agents     {} ({:.1} requests/s summed; started within {})\n",
        r.agents.len(),
        r.requests_per_s_summed(),
        ms(r.start_spread_ns)
    );
    for (info, run) in infos.iter().zip(&r.agents) {
        let errors: Vec<String> = run
            .errors
            .iter()
            .map(|(k, v)| format!("{} {v}", k.as_str()))
            .collect();
        s.push_str(&format!(
            "  {}  {} conns  {:.1}/s  errors {}  clock {:+.3} ms (+-{})  CPUs {}\n",
            run.addr,
            run.connections,
            run.requests_per_s(),
            if errors.is_empty() {
                "none".to_string()
            } else {
                errors.join(", ")
            },
            info.clock_offset_ns as f64 / 1e6,
            ms(info.rtt_ns / 2),
            if info.cpus.is_empty() {
                "unpinned".to_string()
            } else {
                super::smt::list(&info.cpus)
            }
        ));
    }
    crate::term::fit(&s)
}

pub fn agents_json(infos: &[AgentInfo], r: &RemoteReport) -> serde_json::Value {
    infos
        .iter()
        .zip(&r.agents)
        .map(|(info, run)| {
            serde_json::json!({
                "addr": run.addr,
                "target": run.target.to_string(),
                "connections": run.connections,
                "requests": run.requests,
                "requests_per_s": run.requests_per_s(),
                "errors": run.errors.iter().map(|(k, v)| (k.as_str().to_string(), *v)).collect::<std::collections::BTreeMap<_, _>>(),
                "cpus": info.cpus,
                "clock_offset_ns": info.clock_offset_ns,
                "rtt_ns": info.rtt_ns,
                "start_offset_ns": run.start_offset_ns,
            })
        })
        .collect()
}

/// The agents that loaded `cell` (`--client-hosts`), for `bench` and `run`: each one's
/// share of the requests per second, errors and clock offset (+- half the round trip
/// it was measured over), and how far apart they started. In 80 columns a heading
/// line and a line per agent, else one line; indented, newline-terminated. `None` for
/// a cell loaded from this host.
pub fn cell_agents(cell: &smtlab_model::CellRecord, layout: Layout) -> Option<String> {
    use smtlab_report::remote::{agent_text, heading, line, ms, remote_clients};
    let r = remote_clients(cell)?;
    if layout.width.is_some_and(|w| w < 120) {
        let mut out = wrap(
            &format!(
                "  {}, started within {}:",
                heading(&r),
                ms(r.start_spread_max_ns)
            ),
            layout,
        );
        for a in &r.agents {
            out.push_str(&wrap(&format!("    {}", agent_text(a)), layout));
        }
        return Some(out);
    }
    Some(format!("  {}\n", line(&r)))
}
