//! `smtlab load URL`: the load generator alone, like wrk. Settings
//! ([`crate::settings::load`]), the load ([`smtlab_loadgen::run`]), its report
//! ([`crate::render::load`]).

use anyhow::{Result, anyhow, bail};
use smtlab_loadgen::Pinning;
use smtlab_loadgen::remote::{AgentInfo, Channel, Remote};

use crate::args::LoadArgs;
use crate::render::load::{agents_json, agents_text, json, text};

pub fn run(a: &LoadArgs) -> Result<()> {
    let crate::settings::load::Load {
        cfg,
        cpus,
        mix,
        request,
    } = crate::settings::load::load(a)?;
    let (report, remote) = match &a.client_token {
        Some(token) if !a.client_hosts.is_empty() => {
            let mut agents = Remote::connect(&a.client_hosts, token, Channel::tls_if(a.client_tls))
                .map_err(|e| anyhow!("{e}"))?;
            let infos: Vec<AgentInfo> = agents.agents().into_iter().cloned().collect();
            let r = agents
                .run(&cfg, &[request], &[1.0])
                .map_err(|e| anyhow!("{e}"))?;
            (r.merged.clone(), Some((infos, r)))
        }
        _ => {
            let pin = if cpus.is_empty() {
                Pinning::Unpinned
            } else {
                Pinning::Cpus(&cpus)
            };
            let r = smtlab_loadgen::run(&cfg, mix, pin).map_err(|e| anyhow!("{e}"))?;
            (r, None)
        }
    };
    if a.json {
        let mut v = json(a, &cfg, &cpus, &report);
        if let Some((infos, r)) = &remote {
            v["agents"] = agents_json(infos, r);
            v["requests_per_s_summed"] = r.requests_per_s_summed().into();
            v["start_spread_ns"] = r.start_spread_ns.into();
        }
        crate::output::emit(&crate::output::json_text(&v)?)?;
    } else {
        let mut t = text(a, &cfg, &cpus, &report);
        if let Some((infos, r)) = &remote {
            t = t.replacen(
                "thread(s) unpinned",
                &format!("thread(s) on {} agent(s)", infos.len()),
                1,
            );
            t.push_str(&agents_text(infos, r));
        }
        crate::output::emit(&t)?;
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
