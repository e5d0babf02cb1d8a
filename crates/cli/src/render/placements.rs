//! `smtlab placements` table.

use serde::Serialize;
use smtlab_model::ResolvedPlacement;
use smtlab_report::table::Table;

/// One line of the listing: a placement and what it resolved to, or why it cannot be.
#[derive(Debug, Serialize)]
pub struct Entry {
    pub spec: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<ResolvedPlacement>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub fn table(entries: &[Entry]) -> String {
    // Only hybrid machines get the column: elsewhere every core is of one kind.
    let kinds = entries
        .iter()
        .filter_map(|e| e.placement.as_ref())
        .any(|p| !p.core_kinds.is_empty());
    let mut headers = vec![
        "Placement",
        "CPUs (thread order)",
        "Cores",
        "Threads/core",
        "Packages",
    ];
    if kinds {
        headers.push("Core kind");
    }
    let mut ok = Table::new(headers);
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
                    super::cpus_in_order(p.cpus.iter().copied())
                };
                let name = if p.name == e.spec {
                    p.name.clone()
                } else {
                    format!("{} ({})", p.name, e.spec)
                };
                let mut row = vec![
                    name,
                    cpus,
                    p.cores.to_string(),
                    p.threads_per_core.to_string(),
                    p.packages.to_string(),
                ];
                if kinds {
                    row.push(match p.core_kinds.len() {
                        0 => "-".to_string(),
                        1 => p.core_kinds[0].clone(),
                        _ => format!("mixed: {}", p.core_kinds.join(" + ")),
                    });
                }
                ok.row(row);
            }
            (None, Some(err)) => failed.push(format!("  {:<8} {err}\n", e.spec)),
            (None, None) => {}
        }
    }
    // A table of headers only says nothing: left out when no placement fits.
    let mut out = if entries.iter().any(|e| e.placement.is_some()) {
        ok.render_to(crate::term::term_layout())
    } else {
        String::new()
    };
    if !failed.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("Not possible on this machine:\n");
        out.extend(failed);
    }
    out
}
