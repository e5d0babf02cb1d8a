//! `smtlab fleet`: the runs of a results database (typically the PostgreSQL database
//! many hosts push to) pooled per CPU model and workload (`smtlab_report::fleet`). The
//! store picks each host's latest runs and hands them over one at a time
//! ([`Store::fleet_runs`]), so the cost follows the hosts, not the runs stored.

use anyhow::Result;
use smtlab_report::fleet::FleetBuilder;
use smtlab_store::{FleetQuery, Store};

use crate::args::FleetArgs;
use crate::output::{emit, write_file};
use crate::settings::stored::db_path;

mod inventory;

pub fn run(args: &FleetArgs) -> Result<()> {
    // The inventory is checked before the store is opened.
    let inventory = match &args.inventory {
        Some(path) => inventory(path)?,
        None => Vec::new(),
    };
    let store = Store::open_read_only(db_path(&args.db.db))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
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
    let mut builder = FleetBuilder::default();
    let scan = store.fleet_runs(&query, |host, r| builder.add_as(&r, host))?;
    if scan.running > 0 {
        crate::term::note_fit(&format!(
            "note: {} run(s) still being measured left out",
            scan.running
        ));
    }
    let mut f = builder.finish();
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

/// The hosts of `--inventory FILE`; a file that cannot be read or names none is a
/// one-line error naming it.
fn inventory(path: &std::path::Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("--inventory {}: {e}", path.display()))?;
    let hosts = inventory::parse(&text)
        .map_err(|e| anyhow::anyhow!("--inventory {}: {e}", path.display()))?;
    if hosts.is_empty() {
        anyhow::bail!(
            "--inventory {}: names no host (expected one host name or id per line, or an \
             Ansible INI or YAML inventory)",
            path.display()
        );
    }
    Ok(hosts)
}
