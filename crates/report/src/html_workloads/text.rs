//! The workloads' secondary figures as a plain text table for the terminal
//! (`smtlab report`); no paper figure.

use smtlab_model::RunResults;
use smtlab_model::metrics::{net, task_pool, web};

use super::cells::{metric, metric_sum};
use super::is_workload;
use crate::counters::duration_ns;
use crate::fmt::{num, params};
use crate::table::Table;

/// The secondary figures each workload records beside its value, per cell, as a table
/// for the terminal (`smtlab report`): requests/s, latency percentiles and errors of
/// the web load, CPU per message of the network rows, tree run time and CAS retries of
/// the task pool; each cell's parameters on a line under it, so the figures stay within
/// the width. `None` when no workload cell carries any of them.
pub fn text_summary(r: &RunResults) -> Option<Table> {
    // (metric, label, how it is written)
    type Fmt = fn(f64) -> String;
    let ns: Fmt = duration_ns;
    let plain: Fmt = num;
    let ms: Fmt = |v| duration_ns(v * 1e6);
    let us: Fmt = |v| duration_ns(v * 1e3);
    let figures: [(&str, &str, Fmt); 10] = [
        (web::REQUESTS_PER_S, "req/s", plain),
        (web::LATENCY_P50_NS, "p50", ns),
        (web::LATENCY_P99_NS, "p99", ns),
        (net::OPS_PER_S, "ops/s", plain),
        (net::SERVER_CPU_US_PER_TX, "server CPU/tx", us),
        (net::SERVER_CPU_US_PER_KIB, "server CPU/KiB", us),
        (net::RTT_P99_NS, "rtt p99", ns),
        (task_pool::TREE_MS, "tree", ms),
        (task_pool::CAS_RETRIES_PER_TASK, "CAS retries/task", plain),
        (task_pool::LOCK_CONTENDED_PER_TASK, "contended/task", plain),
    ];
    let mut table = Table::new(["workload @ placement", "figures"]);
    let mut rows = 0;
    for c in r.cells.iter().filter(|c| is_workload(r, c)) {
        let mut parts: Vec<String> = figures
            .iter()
            .filter_map(|(k, label, f)| metric(c, k).map(|v| format!("{label} {}", f(v))))
            .collect();
        if let Some(e) = metric_sum(c, web::ERRORS) {
            parts.push(format!("errors {}", num(e)));
        }
        if parts.is_empty() {
            continue;
        }
        table.row_with_detail(
            [
                format!("{} @ {}", c.benchmark, c.placement.name),
                parts.join("  "),
            ],
            params(&c.flat_params()),
        );
        rows += 1;
    }
    (rows > 0).then_some(table)
}
