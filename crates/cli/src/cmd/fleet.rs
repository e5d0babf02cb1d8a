//! `smtlab fleet`: the runs of a results database (typically the PostgreSQL database
//! many hosts push to) pooled per CPU model and workload (`smtlab_report::fleet`). The
//! store picks each host's latest runs and hands them over one at a time
//! ([`Store::fleet_runs`]), so the cost follows the hosts, not the runs stored.

use anyhow::Result;
use smtlab_model::RunResults;
use smtlab_report::fleet::{Fleet, FleetBuilder};
use smtlab_store::{FleetQuery, FleetScan, Store};

use crate::args::FleetArgs;
use crate::output::{emit, write_file};
use crate::settings::db_path;

mod inventory;

pub fn run(args: &FleetArgs) -> Result<()> {
    // The inventory is checked before the store is opened.
    let inventory = match &args.inventory {
        Some(path) => inventory(path)?,
        None => Vec::new(),
    };
    let store = Store::open_read_only(db_path(&args.db))?;
    let now = crate::settings::unix_now_s();
    let query = FleetQuery {
        // `--since` alone pools every run since; otherwise each host's latest one.
        runs_per_host: match (args.runs_per_host, args.since) {
            (Some(n), _) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            (None, Some(_)) => None,
            (None, None) => Some(1),
        },
        since_unix_s: args.since.map(|d| now.saturating_sub(d.as_secs())),
        cpu_model: args.cpu_model.clone(),
    };
    let (scan, mut f) = pool(&store, &query)?;
    if scan.running > 0 {
        crate::term::note_fit(&format!(
            "note: {} run(s) still being measured left out",
            scan.running
        ));
    }
    if args.inventory.is_some() || args.expect.is_some() {
        let count = args
            .expect
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        f.expect(&inventory, count);
    }
    let text = if args.json {
        smtlab_report::fleet::json(&f)
    } else if args.output.is_some() {
        smtlab_report::fleet::html(&f, now)
    } else {
        let width = crate::term::get().width.unwrap_or(usize::MAX);
        smtlab_report::fleet::text(&f, width)
    };
    match &args.output {
        Some(path) => write_file(path, text.as_bytes()),
        None => emit(&text),
    }
}

/// The runs `query` selects, pooled as they are read: the store decodes a batch while
/// another thread pools the one before (and drops it), so the reading and the pooling
/// overlap.
fn pool(store: &Store, query: &FleetQuery) -> Result<(FleetScan, Fleet)> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<(String, RunResults)>(RUNS_IN_FLIGHT);
    std::thread::scope(|s| {
        let pooler = std::thread::Builder::new()
            .name("smtlab-fleet-pool".into())
            .spawn_scoped(s, move || {
                let mut builder = FleetBuilder::default();
                for (host, run) in rx {
                    builder.add_as(&run, &host);
                }
                builder.finish()
            })?;
        // A send fails only once the pooler is gone, whose panic is passed on below.
        let scan = store.fleet_runs(query, |host, r| drop(tx.send((host.to_string(), r))));
        drop(tx);
        let fleet = pooler
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        Ok((scan?, fleet))
    })
}

/// Runs read ahead of the pooling: one store batch, so memory stays bounded.
const RUNS_IN_FLIGHT: usize = 50;

/// The hosts of `--inventory FILE`; a file that cannot be read or names none is a
/// one-line error naming it.
fn inventory(path: &std::path::Path) -> Result<Vec<String>> {
    let bad = |e: &dyn std::fmt::Display| anyhow::anyhow!("--inventory {}: {e}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| bad(&e))?;
    let hosts = inventory::parse(&text).map_err(|e| bad(&e))?;
    if hosts.is_empty() {
        anyhow::bail!(
            "--inventory {}: names no host (expected one host name or id per line, or an \
             Ansible INI or YAML inventory)",
            path.display()
        );
    }
    Ok(hosts)
}
