//! What `smtlab fleet` reads: each host's latest runs, chosen in SQL (a window ranking
//! each host's runs by start time, over the `runs` rows alone), then loaded a batch of
//! runs at a time, one statement per table per batch, and handed over one run at a time.
//! The cost follows the number of hosts (times the runs pooled per host), not the number
//! of runs stored: a host measured a hundred times is ranked a hundred times (one small
//! row each) and loaded once.

use smtlab_model::RunResults;

use super::runs::load_runs;
use super::sql::{Sql, Value};
use super::{Step, Store, lease};
use crate::error::Result;

/// Which runs `smtlab fleet` pools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetQuery {
    /// Each host's latest this many runs (by start time); `None`: every run that the
    /// other conditions let through.
    pub runs_per_host: Option<usize>,
    /// Only runs started at or after this time (seconds since the epoch).
    pub since_unix_s: Option<u64>,
    /// Only runs whose CPU model contains this text (ASCII case-insensitive).
    pub cpu_model: Option<String>,
}

/// What [`Store::fleet_runs`] left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetScan {
    /// Runs that matched the query and were handed over.
    pub pooled: usize,
    /// Runs a live process is still measuring (their finished cells count once they end).
    pub running: usize,
}

/// Runs loaded per batch: a few statements per batch, and no more than a batch's rows
/// held at once.
const BATCH_RUNS: usize = 50;

/// A host as the fleet tells hosts apart, in a schema of `version`: its host id; for a
/// run without one (made before ids were recorded), the one id the other runs of its
/// hostname carry, if they carry exactly one; else its hostname, or `run N`.
fn host_key(version: i64) -> &'static str {
    if version >= 7 {
        "COALESCE(r.host_id,
                  (SELECT CASE WHEN count(DISTINCT o.host_id) = 1 THEN max(o.host_id) END
                   FROM runs o WHERE o.hostname = r.hostname),
                  NULLIF(r.hostname, ''), 'run ' || r.id)"
    } else {
        "COALESCE(NULLIF(r.hostname, ''), 'run ' || r.id)"
    }
}

impl Store {
    /// Hands `each` the runs `q` selects, with their host's key (see `host_key`), oldest
    /// first (by start time, then id): for each host, its latest `q.runs_per_host` runs
    /// holding at least one cell, started since
    /// `q.since_unix_s`, on a CPU model containing `q.cpu_model`. Runs a live process is
    /// measuring are left out and counted. Cells come with their summaries, rounds and
    /// the samples their digests hold (`SampleDigest`: values, the widest CPUs and
    /// the few metrics the fleet reads), never the samples' rows (but for cells saved
    /// before digests were kept), their series (but for their digests' series in
    /// brief) or the runs' plans. Everything is read in one consistent view (one
    /// read-only transaction in PostgreSQL).
    pub fn fleet_runs(
        &self,
        q: &FleetQuery,
        mut each: impl FnMut(&str, RunResults),
    ) -> Result<FleetScan> {
        let version = self.version;
        self.read("reading the fleet's latest runs", |db| {
            let (filter, mut params) = conditions(q);
            let live = live_running(db, &filter, &params)?;
            let key = host_key(version);
            // The key is worked out once per run (`keyed`), then each host's runs ranked.
            let mut sql = format!(
                "SELECT id, host FROM (
                   SELECT id, started_unix_s, host,
                          ROW_NUMBER() OVER (PARTITION BY host
                                             ORDER BY started_unix_s DESC, id DESC) AS rank
                   FROM (SELECT r.id, r.started_unix_s, {key} AS host
                         FROM runs r
                         WHERE {filter}
                           AND EXISTS (SELECT 1 FROM cells c WHERE c.run_id = r.id)"
            );
            for id in &live {
                params.push(Value::Int(*id));
                sql.push_str(&format!(" AND r.id != ?{}", params.len()));
            }
            sql.push_str(") keyed) ranked");
            if let Some(n) = q.runs_per_host {
                params.push(Value::from(n));
                sql.push_str(&format!(" WHERE rank <= ?{}", params.len()));
            }
            sql.push_str(" ORDER BY started_unix_s, id");
            let chosen: Vec<(i64, String)> = db
                .query(&sql, &params)?
                .iter()
                .map(|r| Ok((r.get(0)?, r.get(1)?)))
                .collect::<Step<_>>()?;
            for batch in chosen.chunks(BATCH_RUNS) {
                let ids: Vec<i64> = batch.iter().map(|(id, _)| *id).collect();
                let runs = load_runs(db, &ids, version, false)?;
                for (run, (_, host)) in runs.into_iter().zip(batch) {
                    each(host, run);
                }
            }
            Ok(FleetScan {
                pooled: chosen.len(),
                running: live.len(),
            })
        })
    }
}

/// The `WHERE` conditions on `runs r` of `q` (since, CPU model), with their values.
fn conditions(q: &FleetQuery) -> (String, Vec<Value<'static>>) {
    let mut filter = String::from("1 = 1");
    let mut params = Vec::new();
    if let Some(since) = q.since_unix_s {
        params.push(Value::from(since));
        filter.push_str(&format!(" AND r.started_unix_s >= ?{}", params.len()));
    }
    if let Some(model) = &q.cpu_model {
        params.push(Value::from(like_pattern(model)));
        filter.push_str(&format!(
            " AND lower(COALESCE(r.cpu_model, '')) LIKE ?{} ESCAPE '\\'",
            params.len()
        ));
    }
    (filter, params)
}

/// `%text%` in lower case, with LIKE's own characters escaped.
fn like_pattern(text: &str) -> String {
    let mut p = String::from("%");
    for c in text.to_ascii_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// The runs stored as running that a live process still measures (see
/// `effective_status`): few, so each is looked at.
fn live_running(db: &mut dyn Sql, filter: &str, params: &[Value<'_>]) -> Step<Vec<i64>> {
    let rows = db.query(
        &format!("SELECT r.id FROM runs r WHERE r.status = 'running' AND {filter}"),
        params,
    )?;
    let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect::<Step<_>>()?;
    let now = lease::now_ms();
    Ok(ids
        .into_iter()
        .filter(|&id| lease::measured(db, id, now))
        .collect())
}
