//! Cells: writing a finished (or skipped) cell in one transaction, reading them back,
//! and the checks that keep every stored number loadable.

use std::collections::{BTreeMap, HashSet};

use rusqlite::types::ToSql;
use rusqlite::{Connection, OptionalExtension, Row, Transaction, params, params_from_iter};
use serde::{Deserialize, Serialize};
use smtlab_model::result::{Calibration, Round, Warmup};
use smtlab_model::{
    CellKey, CellRecord, CellResult, RunConfig, SampleRecord, SkippedCell, Summary,
};

use super::codec::*;
use super::runs::*;
use super::{Fail, SqliteStore, Step};
use crate::error::Result;

impl SqliteStore {
    /// Stores one finished cell (the cell, its samples, summaries and series) in one
    /// transaction: after this returns the cell survives the process being killed.
    ///
    /// A cell whose key (benchmark, parameters, planned placement) is already stored in
    /// the run replaces it, and a skipped entry with that key is removed: a key is
    /// measured or skipped, never both. Non-finite numbers are refused (JSON cannot
    /// carry them, so the run could not be exported).
    pub fn save_cell(&mut self, run_id: i64, cell: &CellRecord) -> Result<()> {
        let r = (|| -> Step<()> {
            check_cell_finite(cell).map_err(|e| Fail::Invalid(e.to_string()))?;
            let tx = self.begin()?;
            insert_cell(&tx, run_id, cell)?;
            tx.commit()?;
            Ok(())
        })();
        r.map_err(|e| {
            self.fail(
                &format!("saving cell {} in run {run_id}", describe_key(&cell.key())),
                e,
            )
        })
    }

    /// Records that a cell could not be measured. Replaces an earlier skip of the same
    /// key; refuses a key that is already measured.
    pub fn save_skipped(&mut self, run_id: i64, skipped: &SkippedCell) -> Result<()> {
        let r = (|| -> Step<()> {
            let tx = self.begin()?;
            insert_skipped(&tx, run_id, skipped)?;
            tx.commit()?;
            Ok(())
        })();
        r.map_err(|e| {
            self.fail(
                &format!(
                    "saving skipped cell {} in run {run_id}",
                    describe_key(&skipped.key)
                ),
                e,
            )
        })
    }
}

/// The cell facts kept as one JSON column: read together, rarely queried.
#[derive(Serialize, Deserialize)]
pub(crate) struct CellFacts {
    pub(crate) calibration: Calibration,
    pub(crate) warmup: Warmup,
    pub(crate) clock_cost_ns: f64,
    pub(crate) loop_cost_ns_per_iter: f64,
    pub(crate) subtracted_ns_per_sample: f64,
    pub(crate) config: RunConfig,
}

/// Every float a cell stores must be finite: SQLite turns NaN into NULL and JSON has
/// neither NaN nor infinity, so such a value would make the run unloadable or
/// unexportable. Says which value is at fault.
pub(crate) fn check_cell_finite(cell: &CellRecord) -> std::result::Result<(), NotFinite> {
    let check = |what: &dyn Fn() -> String, x: f64| {
        if x.is_finite() {
            Ok(())
        } else {
            Err(NotFinite {
                what: what(),
                value: x,
            })
        }
    };
    let summary = |name: &str, s: &Summary| -> std::result::Result<(), NotFinite> {
        for (field, x) in [
            ("mean", s.mean),
            ("median", s.median),
            ("min", s.min),
            ("max", s.max),
            ("p25", s.p25),
            ("p75", s.p75),
            ("stddev", s.stddev),
            ("ci95_half_width", s.ci95_half_width),
            ("ci95_rel", s.ci95_rel),
        ] {
            check(&|| format!("{name}.{field}"), x)?;
        }
        Ok(())
    };
    let r = &cell.result;
    summary("summary", &r.summary)?;
    if let Some(s) = &r.cpu_rate {
        summary("cpu_rate", s)?;
    }
    if let Some(s) = &r.start_spread_ns {
        summary("start_spread_ns", s)?;
    }
    for (i, round) in r.rounds.iter().enumerate() {
        summary(&format!("rounds[{i}].summary"), &round.summary)?;
    }
    for (i, s) in r.samples.iter().enumerate() {
        check(&|| format!("samples[{i}].value"), s.value)?;
        check(&|| format!("samples[{i}].work"), s.work)?;
        for (k, x) in &s.metrics {
            check(&|| format!("samples[{i}].metrics.{k}"), *x)?;
        }
    }
    for (name, xs) in &r.series {
        for (i, x) in xs.iter().enumerate() {
            check(&|| format!("series {name}[{i}]"), *x)?;
        }
    }
    check(&|| "clock_cost_ns".into(), r.clock_cost_ns)?;
    check(&|| "loop_cost_ns_per_iter".into(), r.loop_cost_ns_per_iter)?;
    check(
        &|| "subtracted_ns_per_sample".into(),
        r.subtracted_ns_per_sample,
    )?;
    if let Some(x) = r.calibration.linearity_ratio {
        check(&|| "calibration.linearity_ratio".into(), x)?;
    }
    if let Some(c) = &cell.counters {
        for (name, x) in c.floats() {
            check(&|| name.clone(), x)?;
        }
    }
    check_config_finite(&r.config)
}

/// A value that cannot be stored because it is not a finite number, and where it sits.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what} is {value}; only finite numbers can be stored")]
pub(crate) struct NotFinite {
    what: String,
    value: f64,
}

pub(crate) fn check_config_finite(c: &RunConfig) -> std::result::Result<(), NotFinite> {
    let mut xs = vec![
        ("config.ci_target_rel", c.ci_target_rel),
        ("config.linearity_tolerance", c.linearity_tolerance),
    ];
    if let Some(o) = c.known_overheads {
        xs.push(("config.known_overheads.clock_cost_ns", o.clock_cost_ns));
        xs.push((
            "config.known_overheads.loop_cost_ns_per_iter",
            o.loop_cost_ns_per_iter,
        ));
    }
    match xs.into_iter().find(|(_, x)| !x.is_finite()) {
        Some((what, x)) => Err(NotFinite {
            what: what.to_string(),
            value: x,
        }),
        None => Ok(()),
    }
}

pub(crate) fn insert_cell(tx: &Transaction<'_>, run_id: i64, cell: &CellRecord) -> Step<()> {
    if !run_exists(tx, run_id)? {
        return Err(Fail::NoRun(run_id));
    }
    let params_json = key_params_json(&cell.params, &cell.conditions)?;
    let key = params![run_id, cell.benchmark, params_json, cell.placement_spec];
    // ON DELETE CASCADE removes the old samples, summaries and series with it.
    tx.execute(
        "DELETE FROM cells WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                             AND placement_spec = ?4",
        key,
    )?;
    tx.execute(
        "DELETE FROM skipped WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                               AND placement = ?4",
        key,
    )?;
    let position: Option<i64> = tx.query_row(
        "SELECT min(position) FROM plan WHERE run_id = ?1 AND benchmark = ?2
                                             AND params = ?3 AND placement = ?4",
        key,
        |r| r.get(0),
    )?;
    let r = &cell.result;
    let facts = CellFacts {
        calibration: r.calibration.clone(),
        warmup: r.warmup,
        clock_cost_ns: r.clock_cost_ns,
        loop_cost_ns_per_iter: r.loop_cost_ns_per_iter,
        subtracted_ns_per_sample: r.subtracted_ns_per_sample,
        config: r.config.clone(),
    };
    tx.execute(
        "INSERT INTO cells (run_id, position, benchmark, group_name, unit, direction, params,
                            placement_spec, placement_name, cpus, placement, converged,
                            stop_reason, iterations, wall_ns, facts, counters)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        params![
            run_id,
            position,
            cell.benchmark,
            cell.group,
            cell.unit,
            direction_text(cell.direction),
            params_json,
            cell.placement_spec,
            cell.placement.name,
            cell.placement.cpu_set().to_list_string(),
            to_json(&cell.placement)?,
            r.converged,
            stop_text(r.stop_reason),
            r.iterations,
            r.wall_ns,
            to_json(&facts)?,
            cell.counters.as_ref().map(to_json).transpose()?,
        ],
    )?;
    let cell_id = tx.last_insert_rowid();

    let mut stmt = tx.prepare_cached(
        "INSERT INTO samples (cell_id, idx, value, iterations, elapsed_ns, work, cpu_ns,
                              start_spread_ns, cpus, metrics)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for (i, s) in r.samples.iter().enumerate() {
        let metrics = if s.metrics.is_empty() {
            None
        } else {
            Some(to_json(&s.metrics)?)
        };
        stmt.execute(params![
            cell_id,
            i,
            s.value,
            s.iterations,
            s.elapsed_ns,
            s.work,
            s.cpu_ns,
            s.start_spread_ns,
            to_json(&s.cpus)?,
            metrics,
        ])?;
    }

    let mut stmt = tx.prepare_cached(
        "INSERT INTO summaries (cell_id, kind, n, mean, median, min, max, p25, p75, stddev,
                                ci95_half_width, ci95_rel)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    let summaries = [
        ("value", Some(&r.summary)),
        ("cpu_rate", r.cpu_rate.as_ref()),
        ("start_spread_ns", r.start_spread_ns.as_ref()),
    ];
    for (kind, s) in summaries {
        let Some(s) = s else { continue };
        let key = params![cell_id, kind];
        stmt.execute(params_from_iter(key.iter().chain(&summary_values(s))))?;
    }

    let mut stmt = tx.prepare_cached(
        "INSERT INTO rounds (cell_id, idx, iterations, converged, wall_ns, n, mean, median, min,
                             max, p25, p75, stddev, ci95_half_width, ci95_rel)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    )?;
    for (i, round) in r.rounds.iter().enumerate() {
        let head = params![cell_id, i, round.iterations, round.converged, round.wall_ns];
        let values = summary_values(&round.summary);
        stmt.execute(params_from_iter(head.iter().chain(&values)))?;
    }

    let mut stmt =
        tx.prepare_cached("INSERT INTO series (cell_id, name, n, data) VALUES (?1, ?2, ?3, ?4)")?;
    for (name, values) in &r.series {
        stmt.execute(params![cell_id, name, values.len(), encode_series(values)])?;
    }
    Ok(())
}

pub(crate) fn insert_skipped(tx: &Transaction<'_>, run_id: i64, s: &SkippedCell) -> Step<()> {
    if !run_exists(tx, run_id)? {
        return Err(Fail::NoRun(run_id));
    }
    let params_json = key_params_json(&s.key.params, &s.key.conditions)?;
    let key = params![run_id, s.key.benchmark, params_json, s.key.placement];
    let measured = tx
        .query_row(
            "SELECT 1 FROM cells WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                                   AND placement_spec = ?4",
            key,
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if measured {
        return Err(Fail::Conflict(
            "the cell is already measured in this run; a cell is measured or skipped, not both"
                .into(),
        ));
    }
    tx.execute(
        "DELETE FROM skipped WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                               AND placement = ?4",
        key,
    )?;
    tx.execute(
        "INSERT INTO skipped (run_id, benchmark, params, placement, reason)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            run_id,
            s.key.benchmark,
            params_json,
            s.key.placement,
            s.reason
        ],
    )?;
    Ok(())
}

pub(crate) fn stored_cell_keys(conn: &Connection, run_id: i64) -> Step<HashSet<CellKey>> {
    let mut stmt = conn
        .prepare_cached("SELECT benchmark, params, placement_spec FROM cells WHERE run_id = ?1")?;
    let mut rows = stmt.query([run_id])?;
    let mut out = HashSet::new();
    while let Some(r) = rows.next()? {
        let (params, conditions) = key_params_from_json(&r.get::<_, String>(1)?, "cells.params")?;
        out.insert(CellKey {
            benchmark: r.get(0)?,
            params,
            conditions,
            placement: r.get(2)?,
        });
    }
    Ok(out)
}

pub(crate) fn load_skipped(conn: &Connection, run_id: i64) -> Step<Vec<(CellKey, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT benchmark, params, placement, reason FROM skipped WHERE run_id = ?1 ORDER BY id",
    )?;
    let mut rows = stmt.query([run_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let (params, conditions) = key_params_from_json(&r.get::<_, String>(1)?, "skipped.params")?;
        let key = CellKey {
            benchmark: r.get(0)?,
            params,
            conditions,
            placement: r.get(2)?,
        };
        out.push((key, r.get(3)?));
    }
    Ok(out)
}

/// `version` is the file's schema: a file opened read-only is not upgraded, so columns
/// and tables added since are read as absent.
pub(crate) fn load_cells(conn: &Connection, run_id: i64, version: i64) -> Step<Vec<CellRecord>> {
    let counters = if version >= 2 { "counters" } else { "NULL" };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT id, benchmark, group_name, unit, direction, params, placement_spec, placement,
                converged, stop_reason, iterations, wall_ns, facts, {counters}
         FROM cells WHERE run_id = ?1 ORDER BY id"
    ))?;
    let mut rows = stmt.query([run_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let cell_id: i64 = r.get(0)?;
        let at = |col: &str| format!("cell {cell_id}: {col}");
        let facts: CellFacts = from_json(&r.get::<_, String>(12)?, &at("facts"))?;
        let counters = match r.get::<_, Option<String>>(13)? {
            Some(text) => Some(from_json(&text, &at("counters"))?),
            None => None,
        };
        let mut summaries = load_summaries(conn, cell_id)?;
        let summary = summaries.remove("value").ok_or_else(|| {
            Fail::Decode(format!("cell {cell_id}: its 'value' summary is missing"))
        })?;
        let (params, conditions) = key_params_from_json(&r.get::<_, String>(5)?, &at("params"))?;
        // The limit a figure reached is kept in its samples' metrics.
        let samples = load_samples(conn, cell_id)?;
        out.push(CellRecord {
            benchmark: r.get(1)?,
            group: r.get(2)?,
            unit: r.get(3)?,
            direction: parse_direction(&r.get::<_, String>(4)?)?,
            params,
            conditions,
            placement_spec: r.get(6)?,
            placement: from_json(&r.get::<_, String>(7)?, &at("placement"))?,
            result: CellResult {
                at_limit: smtlab_model::AtLimit::of_samples(&samples),
                iterations: r.get(10)?,
                calibration: facts.calibration,
                warmup: facts.warmup,
                clock_cost_ns: facts.clock_cost_ns,
                loop_cost_ns_per_iter: facts.loop_cost_ns_per_iter,
                subtracted_ns_per_sample: facts.subtracted_ns_per_sample,
                samples,
                summary,
                converged: r.get(8)?,
                stop_reason: parse_stop(&r.get::<_, String>(9)?)?,
                cpu_rate: summaries.remove("cpu_rate"),
                series: load_series(conn, cell_id)?,
                start_spread_ns: summaries.remove("start_spread_ns"),
                wall_ns: r.get(11)?,
                config: facts.config,
                rounds: if version >= 3 {
                    load_rounds(conn, cell_id)?
                } else {
                    Vec::new()
                },
            },
            counters,
        });
    }
    Ok(out)
}

pub(crate) fn load_samples(conn: &Connection, cell_id: i64) -> Step<Vec<SampleRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT value, iterations, elapsed_ns, work, cpu_ns, start_spread_ns, cpus, metrics
         FROM samples WHERE cell_id = ?1 ORDER BY idx",
    )?;
    let mut rows = stmt.query([cell_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let what = |col: &str| format!("cell {cell_id} sample {}: {col}", out.len());
        let metrics = match r.get::<_, Option<String>>(7)? {
            Some(text) => from_json(&text, &what("metrics"))?,
            None => BTreeMap::new(),
        };
        out.push(SampleRecord {
            value: r.get(0)?,
            iterations: r.get(1)?,
            elapsed_ns: r.get(2)?,
            work: r.get(3)?,
            cpu_ns: r.get(4)?,
            start_spread_ns: r.get(5)?,
            cpus: from_json(&r.get::<_, String>(6)?, &what("cpus"))?,
            metrics,
        });
    }
    Ok(out)
}

/// The summary columns' values in the order the `summaries` and `rounds` tables hold
/// them (`n, mean, median, min, max, p25, p75, stddev, ci95_half_width, ci95_rel`).
fn summary_values(s: &Summary) -> [&dyn ToSql; 10] {
    [
        &s.n,
        &s.mean,
        &s.median,
        &s.min,
        &s.max,
        &s.p25,
        &s.p75,
        &s.stddev,
        &s.ci95_half_width,
        &s.ci95_rel,
    ]
}

/// A summary read from the columns starting at `first`, in [`summary_values`] order.
fn summary_at(r: &Row<'_>, first: usize) -> rusqlite::Result<Summary> {
    Ok(Summary {
        n: r.get(first)?,
        mean: r.get(first + 1)?,
        median: r.get(first + 2)?,
        min: r.get(first + 3)?,
        max: r.get(first + 4)?,
        p25: r.get(first + 5)?,
        p75: r.get(first + 6)?,
        stddev: r.get(first + 7)?,
        ci95_half_width: r.get(first + 8)?,
        ci95_rel: r.get(first + 9)?,
    })
}

pub(crate) fn load_summaries(conn: &Connection, cell_id: i64) -> Step<BTreeMap<String, Summary>> {
    let mut stmt = conn.prepare_cached(
        "SELECT kind, n, mean, median, min, max, p25, p75, stddev, ci95_half_width, ci95_rel
         FROM summaries WHERE cell_id = ?1",
    )?;
    let rows = stmt.query_map([cell_id], |r| {
        Ok((r.get::<_, String>(0)?, summary_at(r, 1)?))
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

pub(crate) fn load_rounds(conn: &Connection, cell_id: i64) -> Step<Vec<Round>> {
    let mut stmt = conn.prepare_cached(
        "SELECT iterations, converged, wall_ns, n, mean, median, min, max, p25, p75, stddev,
                ci95_half_width, ci95_rel
         FROM rounds WHERE cell_id = ?1 ORDER BY idx",
    )?;
    let rows = stmt.query_map([cell_id], |r| {
        Ok(Round {
            iterations: r.get(0)?,
            converged: r.get(1)?,
            wall_ns: r.get(2)?,
            summary: summary_at(r, 3)?,
        })
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

pub(crate) fn load_series(conn: &Connection, cell_id: i64) -> Step<BTreeMap<String, Vec<f64>>> {
    let mut stmt =
        conn.prepare_cached("SELECT name, n, data FROM series WHERE cell_id = ?1 ORDER BY name")?;
    let mut rows = stmt.query([cell_id])?;
    let mut out = BTreeMap::new();
    while let Some(r) = rows.next()? {
        let name: String = r.get(0)?;
        let n: usize = r.get(1)?;
        let blob: Vec<u8> = r.get(2)?;
        let values = decode_series(&blob)
            .filter(|v| v.len() == n)
            .ok_or_else(|| {
                Fail::Decode(format!(
                    "cell {cell_id}: series {name:?} holds {} bytes, expected {n} values of 8 bytes",
                    blob.len()
                ))
            })?;
        out.insert(name, values);
    }
    Ok(out)
}
