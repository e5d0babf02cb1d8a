//! Cells: writing a finished (or skipped) cell in one transaction, reading them back,
//! and the checks that keep every stored number loadable.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use smtlab_model::result::{Calibration, Round, Warmup};
use smtlab_model::{
    CellKey, CellRecord, CellResult, RunConfig, SampleDigest, SampleRecord, SkippedCell, Summary,
};

use super::codec::*;
use super::sql::{Row, Sql, Value, args, in_list};
use super::{Fail, Step, Store};
use crate::error::Result;

impl Store {
    /// Stores one finished cell (the cell, its samples, summaries, rounds and series) in
    /// one transaction: after this returns the cell survives the process being killed.
    ///
    /// A cell whose key (benchmark, parameters, planned placement) is already stored in
    /// the run replaces it, and a skipped entry with that key is removed: a key is
    /// measured or skipped, never both. Non-finite numbers are refused (JSON cannot
    /// carry them, so the run could not be exported).
    pub fn save_cell(&mut self, run_id: i64, cell: &CellRecord) -> Result<()> {
        let doing = format!("saving cell {} in run {run_id}", describe_key(&cell.key()));
        if let Err(e) = check_cell_finite(cell) {
            return Err(self.fail(&doing, Fail::Invalid(e.to_string())));
        }
        self.write(&doing, |db| insert_cell(db, run_id, cell))
    }

    /// Records that a cell could not be measured. Replaces an earlier skip of the same
    /// key; refuses a key that is already measured.
    pub fn save_skipped(&mut self, run_id: i64, skipped: &SkippedCell) -> Result<()> {
        let doing = format!(
            "saving skipped cell {} in run {run_id}",
            describe_key(&skipped.key)
        );
        self.write(&doing, |db| insert_skipped(db, run_id, skipped))
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
    /// Absent in cells saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) disturbance: Option<smtlab_model::Disturbance>,
    /// The samples in brief, for readers that load none (`fleet`); absent in cells
    /// saved before it was kept, whose samples such a reader loads instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) digest: Option<SampleDigest>,
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

/// `Ok` when the run is stored, else [`Fail::NoRun`]; with `lock`, its row locked until
/// the transaction ends where the dialect locks rows (see [`Sql::for_update`]).
pub(crate) fn require_run(db: &mut dyn Sql, run_id: i64, lock: bool) -> Step<()> {
    let for_update = if lock { db.for_update() } else { "" };
    let sql = format!("SELECT 1 FROM runs WHERE id = ?1{for_update}");
    let row = db.query_opt(&sql, args![run_id])?;
    row.map(drop).ok_or(Fail::NoRun(run_id))
}

/// The cell key in a row's first three columns (benchmark, params, placement); `what`
/// names the params column in errors.
pub(crate) fn key_of(r: &Row, what: &str) -> Step<CellKey> {
    let (params, conditions) = key_params_from_json(r.text(1)?, what)?;
    Ok(CellKey {
        benchmark: r.get(0)?,
        params,
        conditions,
        placement: r.get(2)?,
    })
}

/// A cell key's values in the order the statements below bind them (`?1` to `?4`):
/// run, benchmark, params, placement.
fn key_args<'a>(
    run_id: i64,
    benchmark: &'a str,
    params: &'a str,
    placement: &'a str,
) -> [Value<'a>; 4] {
    [
        run_id.into(),
        benchmark.into(),
        params.into(),
        placement.into(),
    ]
}

pub(crate) fn insert_cell(db: &mut dyn Sql, run_id: i64, cell: &CellRecord) -> Step<()> {
    require_run(db, run_id, false)?;
    let params_json = key_params_json(&cell.params, &cell.conditions)?;
    let position = replace_key(db, run_id, cell, &params_json)?;
    let cell_id = insert_cell_row(db, run_id, position, cell, &params_json)?;
    let r = &cell.result;
    insert_samples(db, cell_id, r)?;
    insert_summaries(db, cell_id, r)?;
    insert_rounds(db, cell_id, r)?;
    insert_series(db, cell_id, r)
}

/// Removes what the run holds under the cell's key (a cell measured again, or a skip it
/// replaces) and returns the key's place in the run's plan.
fn replace_key(
    db: &mut dyn Sql,
    run_id: i64,
    cell: &CellRecord,
    params_json: &str,
) -> Step<Option<i64>> {
    let key = key_args(run_id, &cell.benchmark, params_json, &cell.placement_spec);
    // ON DELETE CASCADE removes the old samples, summaries, rounds and series with it.
    db.execute(
        "DELETE FROM cells WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                             AND placement_spec = ?4",
        &key,
    )?;
    db.execute(
        "DELETE FROM skipped WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                               AND placement = ?4",
        &key,
    )?;
    db.query_one(
        "SELECT min(position) FROM plan WHERE run_id = ?1 AND benchmark = ?2
                                             AND params = ?3 AND placement = ?4",
        &key,
    )?
    .get(0)
}

/// The cell's own row, with its facts and counters; its id.
fn insert_cell_row(
    db: &mut dyn Sql,
    run_id: i64,
    position: Option<i64>,
    cell: &CellRecord,
    params_json: &str,
) -> Step<i64> {
    let r = &cell.result;
    let facts = CellFacts {
        calibration: r.calibration.clone(),
        warmup: r.warmup,
        clock_cost_ns: r.clock_cost_ns,
        loop_cost_ns_per_iter: r.loop_cost_ns_per_iter,
        subtracted_ns_per_sample: r.subtracted_ns_per_sample,
        config: r.config.clone(),
        disturbance: r.disturbance.clone(),
        digest: Some(SampleDigest::of(&r.samples).with_series(&r.series)),
    };
    db.query_one(
        "INSERT INTO cells (run_id, position, benchmark, group_name, unit, direction, params,
                                placement_spec, placement_name, cpus, placement, converged,
                                stop_reason, iterations, wall_ns, facts, counters)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
             RETURNING id",
        args![
            run_id,
            position,
            cell.benchmark.as_str(),
            cell.group.as_str(),
            cell.unit.as_str(),
            cell.direction.as_str(),
            params_json,
            cell.placement_spec.as_str(),
            cell.placement.name.as_str(),
            cell.placement.cpu_set().to_list_string(),
            to_json(&cell.placement)?,
            r.converged,
            enum_text(r.stop_reason)?,
            r.iterations,
            r.wall_ns,
            to_json(&facts)?,
            cell.counters.as_ref().map(to_json).transpose()?,
        ],
    )?
    .get(0)
}

/// Each sample with its metrics.
fn insert_samples(db: &mut dyn Sql, cell_id: i64, r: &CellResult) -> Step<()> {
    for (i, s) in r.samples.iter().enumerate() {
        let metrics = if s.metrics.is_empty() {
            None
        } else {
            Some(to_json(&s.metrics)?)
        };
        db.execute(
            "INSERT INTO samples (cell_id, idx, value, iterations, elapsed_ns, work, cpu_ns,
                                  start_spread_ns, cpus, metrics)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            args![
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
            ],
        )?;
    }
    Ok(())
}

/// The summaries of the cell's values, CPU rate and start spread, where it has them.
fn insert_summaries(db: &mut dyn Sql, cell_id: i64, r: &CellResult) -> Step<()> {
    let summaries = [
        ("value", Some(&r.summary)),
        ("cpu_rate", r.cpu_rate.as_ref()),
        ("start_spread_ns", r.start_spread_ns.as_ref()),
    ];
    for (kind, s) in summaries {
        let Some(s) = s else { continue };
        let mut values: Vec<Value<'_>> = vec![cell_id.into(), kind.into()];
        values.extend(summary_values(s));
        db.execute(
            "INSERT INTO summaries (cell_id, kind, n, mean, median, min, max, p25, p75, stddev,
                                    ci95_half_width, ci95_rel)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            &values,
        )?;
    }
    Ok(())
}

/// Each round with its summary.
fn insert_rounds(db: &mut dyn Sql, cell_id: i64, r: &CellResult) -> Step<()> {
    for (i, round) in r.rounds.iter().enumerate() {
        let mut values: Vec<Value<'_>> = vec![
            cell_id.into(),
            i.into(),
            round.iterations.into(),
            round.converged.into(),
            round.wall_ns.into(),
        ];
        values.extend(summary_values(&round.summary));
        db.execute(
            "INSERT INTO rounds (cell_id, idx, iterations, converged, wall_ns, n, mean, median,
                                 min, max, p25, p75, stddev, ci95_half_width, ci95_rel)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            &values,
        )?;
    }
    Ok(())
}

/// The cell's series, encoded.
fn insert_series(db: &mut dyn Sql, cell_id: i64, r: &CellResult) -> Step<()> {
    for (name, values) in &r.series {
        db.execute(
            "INSERT INTO series (cell_id, name, n, data) VALUES (?1, ?2, ?3, ?4)",
            args![cell_id, name, values.len(), encode_series(values)],
        )?;
    }
    Ok(())
}

pub(crate) fn insert_skipped(db: &mut dyn Sql, run_id: i64, s: &SkippedCell) -> Step<()> {
    require_run(db, run_id, false)?;
    let params_json = key_params_json(&s.key.params, &s.key.conditions)?;
    let key = key_args(run_id, &s.key.benchmark, &params_json, &s.key.placement);
    let measured = db
        .query_opt(
            "SELECT 1 FROM cells WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                                   AND placement_spec = ?4",
            &key,
        )?
        .is_some();
    if measured {
        return Err(Fail::Conflict(
            "the cell is already measured in this run; a cell is measured or skipped, not both"
                .into(),
        ));
    }
    db.execute(
        "DELETE FROM skipped WHERE run_id = ?1 AND benchmark = ?2 AND params = ?3
                               AND placement = ?4",
        &key,
    )?;
    let mut values = key.to_vec();
    values.push(s.reason.as_str().into());
    db.execute(
        "INSERT INTO skipped (run_id, benchmark, params, placement, reason)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        &values,
    )?;
    Ok(())
}

pub(crate) fn stored_cell_keys(db: &mut dyn Sql, run_id: i64) -> Step<HashSet<CellKey>> {
    db.query(
        "SELECT benchmark, params, placement_spec FROM cells WHERE run_id = ?1",
        args![run_id],
    )?
    .iter()
    .map(|r| key_of(r, "cells.params"))
    .collect()
}

/// The skipped cells of the runs `ids`, in one statement: per run, in order.
pub(crate) fn load_skipped_of(
    db: &mut dyn Sql,
    ids: &[Value<'_>],
) -> Step<BTreeMap<i64, Vec<SkippedCell>>> {
    let rows = db.query(
        &format!(
            "SELECT benchmark, params, placement, reason, run_id FROM skipped
             WHERE run_id {} ORDER BY id",
            in_list(ids.len())
        ),
        ids,
    )?;
    let mut out: BTreeMap<i64, Vec<SkippedCell>> = BTreeMap::new();
    for r in &rows {
        let key = key_of(r, "skipped.params")?;
        let reason = r.get(3)?;
        out.entry(r.get(4)?)
            .or_default()
            .push(SkippedCell { key, reason });
    }
    Ok(out)
}

pub(crate) fn load_skipped(db: &mut dyn Sql, run_id: i64) -> Step<Vec<SkippedCell>> {
    let mut by_run = load_skipped_of(db, &[Value::Int(run_id)])?;
    Ok(by_run.remove(&run_id).unwrap_or_default())
}

/// Which runs' cells to load: one run, or several at once (`fleet`), and whether their
/// samples and series come too (`fleet` reads neither: each cell's digest stands for
/// its samples, and its series in brief for its series).
pub(crate) struct CellFilter<'a> {
    /// A condition on `c.run_id` (the cells table is `c`): `c.run_id = ?1`, or
    /// `c.run_id IN (?1, ?2, ...)`.
    pub(crate) condition: String,
    pub(crate) args: &'a [Value<'a>],
    pub(crate) series: bool,
    /// The samples' rows; else each cell's digest ([`SampleDigest::samples`]), and the
    /// rows only for cells saved before digests were kept.
    pub(crate) samples: bool,
}

impl<'a> CellFilter<'a> {
    /// The cells of the runs `ids` (bound as `args`), with their series when `series`.
    pub(crate) fn runs(args: &'a [Value<'a>], series: bool) -> CellFilter<'a> {
        CellFilter {
            condition: format!("c.run_id {}", in_list(args.len())),
            args,
            series,
            samples: true,
        }
    }

    /// [`CellFilter::runs`] without series, with digests for samples.
    pub(crate) fn digests(args: &'a [Value<'a>]) -> CellFilter<'a> {
        CellFilter {
            samples: false,
            ..CellFilter::runs(args, false)
        }
    }
}

/// The cells of the runs `filter` names, by run id, each run's in the order they were
/// saved. The rows below the cells are fetched once per table for all of them rather
/// than once per cell: a 300-cell run is a handful of statements, not a thousand (round
/// trips, for PostgreSQL).
///
/// `version` is the file's schema: a file opened read-only is not upgraded, so columns
/// and tables added since are read as absent.
pub(crate) fn load_cells_of(
    db: &mut dyn Sql,
    filter: &CellFilter<'_>,
    version: i64,
) -> Step<BTreeMap<i64, Vec<CellRecord>>> {
    let counters = if version >= 2 { "c.counters" } else { "NULL" };
    let rows = db.query(
        &format!(
            "SELECT c.id, c.benchmark, c.group_name, c.unit, c.direction, c.params,
                    c.placement_spec, c.placement, c.converged, c.stop_reason, c.iterations,
                    c.wall_ns, c.facts, {counters}, c.run_id
             FROM cells c WHERE {} ORDER BY c.id",
            filter.condition
        ),
        filter.args,
    )?;
    let all_facts: Vec<CellFacts> = rows
        .iter()
        .map(|r| {
            let cell_id: i64 = r.get(0)?;
            from_json(r.text(12)?, &format!("cell {cell_id}: facts"))
        })
        .collect::<Step<_>>()?;
    // The samples' rows when asked for, or when a cell has no digest to stand for them
    // (saved before digests were kept).
    let rows_needed = filter.samples || all_facts.iter().any(|f| f.digest.is_none());
    let mut samples = if rows_needed {
        load_samples(db, filter)?
    } else {
        BTreeMap::new()
    };
    let mut summaries = load_summaries(db, filter)?;
    let mut rounds = if version >= 3 {
        load_rounds(db, filter)?
    } else {
        BTreeMap::new()
    };
    let mut series = if filter.series {
        load_series(db, filter)?
    } else {
        BTreeMap::new()
    };
    let mut out: BTreeMap<i64, Vec<CellRecord>> = BTreeMap::new();
    for (r, mut facts) in rows.into_iter().zip(all_facts) {
        let cell_id: i64 = r.get(0)?;
        let at = |col: &str| format!("cell {cell_id}: {col}");
        let counters = match r.opt_text(13)? {
            Some(text) => Some(from_json(text, &at("counters"))?),
            None => None,
        };
        let mut sums = summaries.remove(&cell_id).unwrap_or_default();
        let summary = sums.remove("value").ok_or_else(|| {
            Fail::Decode(format!("cell {cell_id}: its 'value' summary is missing"))
        })?;
        let (params, conditions) = key_params_from_json(r.text(5)?, &at("params"))?;
        // Without the series' rows, the digest's series in brief stand for them.
        let (cell_samples, brief_series) = match facts.digest.take().filter(|_| !filter.samples) {
            Some(d) => (d.samples(), d.series),
            None => (
                samples.remove(&cell_id).unwrap_or_default(),
                BTreeMap::new(),
            ),
        };
        out.entry(r.get(14)?).or_default().push(CellRecord {
            benchmark: r.get(1)?,
            group: r.get(2)?,
            unit: r.get(3)?,
            direction: parse_enum(r.text(4)?, "direction")?,
            params,
            conditions,
            placement_spec: r.get(6)?,
            placement: from_json(r.text(7)?, &at("placement"))?,
            result: CellResult {
                // The limit a figure reached is kept in its samples' metrics.
                at_limit: smtlab_model::AtLimit::of_samples(&cell_samples),
                iterations: r.get(10)?,
                calibration: facts.calibration,
                warmup: facts.warmup,
                clock_cost_ns: facts.clock_cost_ns,
                loop_cost_ns_per_iter: facts.loop_cost_ns_per_iter,
                subtracted_ns_per_sample: facts.subtracted_ns_per_sample,
                samples: cell_samples,
                summary,
                converged: r.get(8)?,
                stop_reason: parse_enum(r.text(9)?, "stop reason")?,
                cpu_rate: sums.remove("cpu_rate"),
                series: series.remove(&cell_id).unwrap_or(brief_series),
                start_spread_ns: sums.remove("start_spread_ns"),
                wall_ns: r.get(11)?,
                config: facts.config,
                rounds: rounds.remove(&cell_id).unwrap_or_default(),
                disturbance: facts.disturbance,
            },
            counters,
        });
    }
    Ok(out)
}

/// Rows of a table below `cells`, of every cell of the runs `filter` names: `columns`
/// of `table` (alias `t`), each row's `cell_id` first.
fn per_cell(
    db: &mut dyn Sql,
    table: &str,
    columns: &str,
    order: &str,
    filter: &CellFilter<'_>,
) -> Step<Vec<Row>> {
    db.query(
        &format!(
            "SELECT t.cell_id, {columns} FROM {table} t JOIN cells c ON c.id = t.cell_id
             WHERE {} ORDER BY t.cell_id{order}",
            filter.condition
        ),
        filter.args,
    )
}

fn load_samples(
    db: &mut dyn Sql,
    filter: &CellFilter<'_>,
) -> Step<BTreeMap<i64, Vec<SampleRecord>>> {
    let rows = per_cell(
        db,
        "samples",
        "t.value, t.iterations, t.elapsed_ns, t.work, t.cpu_ns, t.start_spread_ns, t.cpus,
         t.metrics",
        ", t.idx",
        filter,
    )?;
    let mut out: BTreeMap<i64, Vec<SampleRecord>> = BTreeMap::new();
    for r in rows {
        let cell_id: i64 = r.get(0)?;
        let list = out.entry(cell_id).or_default();
        let what = |col: &str| format!("cell {cell_id} sample {}: {col}", list.len());
        let metrics = match r.opt_text(8)? {
            Some(text) => from_json(text, &what("metrics"))?,
            None => BTreeMap::new(),
        };
        let sample = SampleRecord {
            value: r.get(1)?,
            iterations: r.get(2)?,
            elapsed_ns: r.get(3)?,
            work: r.get(4)?,
            cpu_ns: r.get(5)?,
            start_spread_ns: r.get(6)?,
            cpus: from_json(r.text(7)?, &what("cpus"))?,
            metrics,
        };
        list.push(sample);
    }
    Ok(out)
}

/// The summary columns, in the order the `summaries` and `rounds` tables hold them.
const SUMMARY_COLUMNS: &str =
    "t.n, t.mean, t.median, t.min, t.max, t.p25, t.p75, t.stddev, t.ci95_half_width, t.ci95_rel";

/// A summary's values in [`SUMMARY_COLUMNS`] order.
fn summary_values(s: &Summary) -> [Value<'static>; 10] {
    [
        s.n.into(),
        s.mean.into(),
        s.median.into(),
        s.min.into(),
        s.max.into(),
        s.p25.into(),
        s.p75.into(),
        s.stddev.into(),
        s.ci95_half_width.into(),
        s.ci95_rel.into(),
    ]
}

/// A summary read from the columns starting at `first`, in [`SUMMARY_COLUMNS`] order.
fn summary_at(r: &Row, first: usize) -> Step<Summary> {
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

fn load_summaries(
    db: &mut dyn Sql,
    filter: &CellFilter<'_>,
) -> Step<BTreeMap<i64, BTreeMap<String, Summary>>> {
    let columns = format!("t.kind, {SUMMARY_COLUMNS}");
    let mut out: BTreeMap<i64, BTreeMap<String, Summary>> = BTreeMap::new();
    for r in per_cell(db, "summaries", &columns, "", filter)? {
        out.entry(r.get(0)?)
            .or_default()
            .insert(r.get(1)?, summary_at(&r, 2)?);
    }
    Ok(out)
}

fn load_rounds(db: &mut dyn Sql, filter: &CellFilter<'_>) -> Step<BTreeMap<i64, Vec<Round>>> {
    let columns = format!("t.iterations, t.converged, t.wall_ns, {SUMMARY_COLUMNS}");
    let mut out: BTreeMap<i64, Vec<Round>> = BTreeMap::new();
    for r in per_cell(db, "rounds", &columns, ", t.idx", filter)? {
        out.entry(r.get(0)?).or_default().push(Round {
            iterations: r.get(1)?,
            converged: r.get(2)?,
            wall_ns: r.get(3)?,
            summary: summary_at(&r, 4)?,
        });
    }
    Ok(out)
}

fn load_series(
    db: &mut dyn Sql,
    filter: &CellFilter<'_>,
) -> Step<BTreeMap<i64, BTreeMap<String, Vec<f64>>>> {
    let mut out: BTreeMap<i64, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for r in per_cell(db, "series", "t.name, t.n, t.data", ", t.name", filter)? {
        let cell_id: i64 = r.get(0)?;
        let name: String = r.get(1)?;
        let n: usize = r.get(2)?;
        let blob: Vec<u8> = r.get(3)?;
        let values = decode_series(&blob)
            .filter(|v| v.len() == n)
            .ok_or_else(|| {
                Fail::Decode(format!(
                    "cell {cell_id}: series {name:?} holds {} bytes, expected {n} values of 8 bytes",
                    blob.len()
                ))
            })?;
        out.entry(cell_id).or_default().insert(name, values);
    }
    Ok(out)
}
