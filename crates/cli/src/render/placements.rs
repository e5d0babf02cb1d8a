//! `smtlab placements` table.

use super::table::{Layout, Table};
use crate::cmd::placements::Entry;

pub fn table(entries: &[Entry]) -> String {
    let mut ok = Table::new([
        "Placement",
        "CPUs (thread order)",
        "Cores",
        "Threads/core",
        "Packages",
    ]);
    let mut failed: Vec<String> = Vec::new();
    for e in entries {
        match (&e.placement, &e.error) {
            (Some(p), _) => {
                let cpus = if p.cpus.is_empty() {
                    "(not pinned: the scheduler decides)".to_string()
                } else if p.cpus.windows(2).all(|w| w[0] < w[1]) {
                    // Ascending order says nothing beyond the set: show it compactly.
                    p.cpu_set().to_list_string()
                } else {
                    p.cpus
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let name = if p.name == e.spec {
                    p.name.clone()
                } else {
                    format!("{} ({})", p.name, e.spec)
                };
                ok.row([
                    name,
                    cpus,
                    p.cores.to_string(),
                    p.threads_per_core.to_string(),
                    p.packages.to_string(),
                ]);
            }
            (None, Some(err)) => failed.push(format!("  {:<8} {err}\n", e.spec)),
            (None, None) => {}
        }
    }
    let mut out = ok.render_to(Layout::term());
    if !failed.is_empty() {
        out.push_str("\nNot possible on this machine:\n");
        out.extend(failed);
    }
    out
}
