//! Runs: creating, finishing, importing and loading them, listing them and resolving
//! what a user typed into a run id.

use std::collections::HashSet;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use smtlab_model::{
    CellKey, Environment, RESULTS_SCHEMA, RunMeta, RunResults, RunStatus, SkippedCell,
};

use super::cells::*;
use super::codec::*;
use super::{Fail, SqliteStore, Step, lease};
use crate::error::{Result, StoreError};

/// One line of `smtlab runs`: what a run is without loading its cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunListing {
    pub id: i64,
    pub started_unix_s: u64,
    pub finished_unix_s: Option<u64>,
    pub status: RunStatus,
    pub suite: Option<String>,
    /// Measured cells stored so far.
    pub cells_done: usize,
    /// Cells that could not be measured.
    pub cells_skipped: usize,
    /// Cells in the run's plan.
    pub cells_planned: usize,
    pub hostname: Option<String>,
    pub cpu_model: Option<String>,
    /// The user's name for the run (`smtlab run --label`).
    pub label: Option<String>,
}

impl SqliteStore {
    /// Stores a new run (its meta data and plan) and returns its id. `meta.id` is
    /// ignored; `status` and `finished_unix_s` are stored as given.
    pub fn create_run(&mut self, meta: &RunMeta) -> Result<i64> {
        let r = (|| -> Step<i64> {
            let tx = self.begin()?;
            let id = insert_run(&tx, meta, &new_uid(meta.started_unix_s), None)?;
            tx.commit()?;
            Ok(id)
        })();
        r.map_err(|e| self.fail("storing a new run", e))
    }

    /// Sets a run's final status and end time.
    pub fn finish_run(
        &mut self,
        run_id: i64,
        status: RunStatus,
        finished_unix_s: u64,
    ) -> Result<()> {
        self.set_status(run_id, status, Some(finished_unix_s), "finishing")
    }

    /// Marks a run that stopped early (Ctrl-C, an error) as interrupted, so `--resume`
    /// finds it. A run already finished keeps its status.
    pub fn mark_interrupted(&mut self, run_id: i64) -> Result<()> {
        let r = (|| -> Step<()> {
            let n = self.conn.execute(
                "UPDATE runs SET status = 'interrupted' WHERE id = ?1 AND status != 'finished'",
                [run_id],
            )?;
            if n == 0 && !run_exists(&self.conn, run_id)? {
                return Err(Fail::NoRun(run_id));
            }
            Ok(())
        })();
        r.map_err(|e| self.fail(&format!("marking run {run_id} interrupted"), e))
    }

    /// Marks a run as running again (and not finished), for `--resume`.
    pub fn reopen_run(&mut self, run_id: i64) -> Result<()> {
        self.set_status(run_id, RunStatus::Running, None, "reopening")
    }

    fn set_status(
        &mut self,
        run_id: i64,
        status: RunStatus,
        finished_unix_s: Option<u64>,
        doing: &str,
    ) -> Result<()> {
        let r = (|| -> Step<()> {
            let n = self.conn.execute(
                "UPDATE runs SET status = ?2, finished_unix_s = ?3 WHERE id = ?1",
                params![run_id, status_text(status), finished_unix_s],
            )?;
            if n == 0 {
                return Err(Fail::NoRun(run_id));
            }
            Ok(())
        })();
        r.map_err(|e| self.fail(&format!("{doing} run {run_id}"), e))
    }

    /// Stores a whole run (e.g. one read from results JSON) in one transaction and
    /// returns its new id. Loading it gives back `results` with `run.id` set to the id.
    pub fn import_run(&mut self, results: &RunResults) -> Result<i64> {
        let r = (|| -> Step<i64> {
            for cell in &results.cells {
                check_cell_finite(cell).map_err(|e| {
                    Fail::Invalid(format!("cell {}: {e}", describe_key(&cell.key())))
                })?;
            }
            let tx = self.begin()?;
            let uid = new_uid(results.run.started_unix_s);
            let id = insert_run(&tx, &results.run, &uid, None)?;
            for cell in &results.cells {
                insert_cell(&tx, id, cell)?;
            }
            for s in &results.skipped {
                insert_skipped(&tx, id, s)?;
            }
            tx.commit()?;
            Ok(id)
        })();
        r.map_err(|e| self.fail("importing a run", e))
    }

    /// Stores a run pushed from another database under its key `uid` (with its label),
    /// in one transaction; `None` when a run with that key is already here, which is
    /// then left as it is.
    pub(crate) fn import_keyed(
        &mut self,
        results: &RunResults,
        uid: &str,
        label: Option<&str>,
    ) -> Result<Option<i64>> {
        let r = (|| -> Step<Option<i64>> {
            for cell in &results.cells {
                check_cell_finite(cell).map_err(|e| {
                    Fail::Invalid(format!("cell {}: {e}", describe_key(&cell.key())))
                })?;
            }
            let tx = self.begin()?;
            let present = tx
                .query_row("SELECT id FROM runs WHERE uid = ?1", [uid], |r| {
                    r.get::<_, i64>(0)
                })
                .optional()?;
            if present.is_some() {
                return Ok(None);
            }
            let id = insert_run(&tx, &results.run, uid, label)?;
            for cell in &results.cells {
                insert_cell(&tx, id, cell)?;
            }
            for s in &results.skipped {
                insert_skipped(&tx, id, s)?;
            }
            tx.commit()?;
            Ok(Some(id))
        })();
        r.map_err(|e| self.fail(&format!("storing pushed run {uid}"), e))
    }

    /// The run's key (see [`crate::SCHEMA_VERSION`] 6). A file of an older schema opened
    /// read-only has none stored; its key is derived as the upgrade would store it.
    pub(crate) fn run_uid(&self, run_id: i64) -> Result<String> {
        let r = (|| -> Step<String> {
            let uid = if self.version >= 6 { "uid" } else { "NULL" };
            let row = self
                .conn
                .query_row(
                    &format!(
                        "SELECT {uid}, hostname, started_unix_s, command_line, environment
                         FROM runs WHERE id = ?1"
                    ),
                    [run_id],
                    |r| {
                        Ok((
                            r.get::<_, Option<String>>(0)?,
                            r.get::<_, Option<String>>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                        ))
                    },
                )
                .optional()?;
            let (uid, host, started, cmd, env) = row.ok_or(Fail::NoRun(run_id))?;
            Ok(uid.unwrap_or_else(|| derived_uid(run_id, host.as_deref(), started, &cmd, &env)))
        })();
        r.map_err(|e| self.fail(&format!("reading the key of run {run_id}"), e))
    }

    /// Loads a whole run: meta data, plan, every cell with its samples, and skips.
    pub fn load_run(&self, run_id: i64) -> Result<RunResults> {
        let r = (|| -> Step<RunResults> {
            let run = load_meta(&self.conn, run_id)?;
            let cells = load_cells(&self.conn, run_id, self.version)?;
            let skipped = load_skipped(&self.conn, run_id)?
                .into_iter()
                .map(|(key, reason)| SkippedCell { key, reason })
                .collect();
            Ok(RunResults {
                schema: RESULTS_SCHEMA.to_string(),
                run,
                cells,
                skipped,
                benchmarks: Vec::new(),
            })
        })();
        r.map_err(|e| self.fail(&format!("loading run {run_id}"), e))
    }

    /// Every run, oldest first.
    pub fn list_runs(&self) -> Result<Vec<RunListing>> {
        let r = (|| -> Step<Vec<RunListing>> {
            let mut stmt = self.conn.prepare(&format!(
                "SELECT r.id, r.started_unix_s, r.finished_unix_s, r.status, r.suite,
                        r.hostname, r.cpu_model,
                        (SELECT count(*) FROM cells c WHERE c.run_id = r.id),
                        (SELECT count(*) FROM skipped s WHERE s.run_id = r.id),
                        (SELECT count(*) FROM plan p WHERE p.run_id = r.id),
                        {label}
                 FROM runs r ORDER BY r.id",
                label = self.label_column()
            ))?;
            let mut rows = stmt.query([])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let status: String = row.get(3)?;
                let id: i64 = row.get(0)?;
                out.push(RunListing {
                    id,
                    started_unix_s: row.get(1)?,
                    finished_unix_s: row.get(2)?,
                    status: effective_status(&self.conn, id, parse_status(&status)?),
                    suite: row.get(4)?,
                    hostname: row.get(5)?,
                    cpu_model: row.get(6)?,
                    cells_done: row.get(7)?,
                    cells_skipped: row.get(8)?,
                    cells_planned: row.get(9)?,
                    label: row.get(10)?,
                });
            }
            Ok(out)
        })();
        r.map_err(|e| self.fail("listing runs", e))
    }

    /// The newest run's id, `None` when there are no runs.
    pub fn latest_run_id(&self) -> Result<Option<i64>> {
        self.conn
            .query_row("SELECT max(id) FROM runs", [], |r| r.get(0))
            .map_err(|e| self.fail("finding the latest run", e.into()))
    }

    /// The newest run that is not finished (running when its process died, or
    /// interrupted), for `--resume`.
    pub fn latest_unfinished_run(&self) -> Result<Option<i64>> {
        self.conn
            .query_row(
                "SELECT max(id) FROM runs WHERE status != 'finished'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.fail("finding the latest unfinished run", e.into()))
    }

    /// Turns what a user typed into a run id:
    ///
    /// * `latest` or `last`: the newest run;
    /// * `12` (or `#12`): run 12, which must exist;
    /// * `-1`: the newest run, `-2` the one before, and so on (counted in id order);
    /// * a label (`smtlab run --label`) that exactly one run carries.
    ///
    /// Errors say which runs exist.
    pub fn resolve_run(&self, selector: &str) -> Result<i64> {
        if let Some(id) = self.run_by_label(selector.trim())? {
            return Ok(id);
        }
        resolve_selector(&self.path, selector, &self.run_ids()?)
    }
    /// The run carrying `label`, `None` when no run does. Labels cannot look like run
    /// selectors (see [`check_label`]), so this never shadows an id.
    fn run_by_label(&self, label: &str) -> Result<Option<i64>> {
        if self.version < 5 || check_label(label).is_err() {
            return Ok(None);
        }
        let r = (|| -> Step<Vec<i64>> {
            let mut stmt = self
                .conn
                .prepare("SELECT id FROM runs WHERE label = ?1 ORDER BY id")?;
            let ids = stmt.query_map([label], |r| r.get(0))?;
            Ok(ids.collect::<std::result::Result<_, _>>()?)
        })();
        let ids = r.map_err(|e| self.fail(&format!("finding the run labelled {label:?}"), e))?;
        one_labelled(&self.path, label, &ids)
    }

    /// `label` or `NULL`: a file of schema 4 or older opened read-only has no label column.
    fn label_column(&self) -> &'static str {
        if self.version >= 5 { "r.label" } else { "NULL" }
    }

    /// The run's label, `None` when it has none.
    pub fn run_label(&self, run_id: i64) -> Result<Option<String>> {
        let r = (|| -> Step<Option<String>> {
            let sql = format!("SELECT {} FROM runs r WHERE r.id = ?1", self.label_column());
            self.conn
                .query_row(&sql, [run_id], |r| r.get(0))
                .optional()?
                .ok_or(Fail::NoRun(run_id))
        })();
        r.map_err(|e| self.fail(&format!("reading the label of run {run_id}"), e))
    }

    /// Names a run (`None` removes the name). The label must pass [`check_label`].
    pub fn set_run_label(&mut self, run_id: i64, label: Option<&str>) -> Result<()> {
        if let Some(l) = label {
            check_label(l).map_err(|e| StoreError::Invalid {
                path: self.path.clone(),
                detail: e.to_string(),
            })?;
        }
        let r = (|| -> Step<()> {
            let n = self.conn.execute(
                "UPDATE runs SET label = ?1 WHERE id = ?2",
                params![label, run_id],
            )?;
            if n == 0 {
                return Err(Fail::NoRun(run_id));
            }
            Ok(())
        })();
        r.map_err(|e| self.fail(&format!("labelling run {run_id}"), e))
    }

    /// Deletes runs with everything stored under them (plan, cells, samples, summaries,
    /// series, rounds, skips, leases), all or none in one transaction. A run that a live
    /// process is measuring is refused (and so nothing is deleted); a stale lease (its
    /// holder died) does not protect the run. Unknown ids are refused too.
    pub fn delete_runs(&mut self, run_ids: &[i64]) -> Result<()> {
        let now = lease::now_ms();
        let r = (|| -> Step<()> {
            let tx = self.begin()?;
            for &id in run_ids {
                if !run_exists(&tx, id)? {
                    return Err(Fail::NoRun(id));
                }
                if let Some((h, _)) = lease::holder(&tx, id, now)?
                    && lease::is_live(&h)
                {
                    return Err(Fail::Conflict(format!(
                        "run {id} is being measured by process {} on {}; stop it first",
                        h.pid, h.host
                    )));
                }
            }
            for &id in run_ids {
                tx.execute("DELETE FROM runs WHERE id = ?1", [id])?;
            }
            tx.commit()?;
            Ok(())
        })();
        r.map_err(|e| self.fail("deleting runs", e))
    }

    /// The cells of a run's plan that are neither measured nor skipped, in plan order:
    /// what `--resume` still has to do.
    pub fn pending_cells(&self, run_id: i64) -> Result<Vec<CellKey>> {
        let r = (|| -> Step<Vec<CellKey>> {
            let plan = load_plan(&self.conn, run_id)?;
            if plan.is_empty() && !run_exists(&self.conn, run_id)? {
                return Err(Fail::NoRun(run_id));
            }
            let mut done: HashSet<CellKey> = stored_cell_keys(&self.conn, run_id)?;
            done.extend(
                load_skipped(&self.conn, run_id)?
                    .into_iter()
                    .map(|(k, _)| k),
            );
            Ok(plan.into_iter().filter(|k| !done.contains(k)).collect())
        })();
        r.map_err(|e| self.fail(&format!("listing pending cells of run {run_id}"), e))
    }
}

/// What [`resolve_run`](SqliteStore::resolve_run) does once labels are looked up: a
/// keyword, an id, or a count back from the newest of `ids` (sorted).
pub(crate) fn resolve_selector(path: &Path, selector: &str, ids: &[i64]) -> Result<i64> {
    let s = selector.trim();
    let bad = || StoreError::BadRunSelector {
        path: path.to_path_buf(),
        input: selector.to_string(),
    };
    let found = if s.eq_ignore_ascii_case("latest") || s.eq_ignore_ascii_case("last") {
        ids.last().copied()
    } else if let Some(back) = s.strip_prefix('-') {
        let k: usize = back.parse().map_err(|_| bad())?;
        if k == 0 {
            return Err(bad());
        }
        ids.len().checked_sub(k).map(|i| ids[i])
    } else {
        let id: i64 = s
            .strip_prefix('#')
            .unwrap_or(s)
            .parse()
            .map_err(|_| bad())?;
        ids.binary_search(&id).ok().map(|_| id)
    };
    found.ok_or_else(|| StoreError::NoSuchRun {
        path: path.to_path_buf(),
        wanted: s.to_string(),
        existing: describe_ids(ids),
    })
}

/// The one run carrying a label, `None` when none does; several is an error.
pub(crate) fn one_labelled(path: &Path, label: &str, ids: &[i64]) -> Result<Option<i64>> {
    match ids {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        many => Err(StoreError::Invalid {
            path: path.to_path_buf(),
            detail: format!(
                "label {label:?} names runs {}; give the run id",
                many.iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// Labels are free text, but they must not be mistaken for what `resolve_run` reads
/// otherwise (`12`, `#12`, `-2`, `latest`) nor break the one-line listings.
pub fn check_label(label: &str) -> std::result::Result<(), BadLabel> {
    let bad = |why: &'static str| {
        Err(BadLabel {
            label: label.to_string(),
            why,
        })
    };
    if label.trim().is_empty() {
        return bad("is empty");
    }
    if label.trim() != label {
        return bad("starts or ends with a space");
    }
    if label.chars().count() > 64 {
        return bad("is longer than 64 characters");
    }
    if label.chars().any(char::is_control) {
        return bad("holds a control character (a newline or tab)");
    }
    let digits = label.strip_prefix('#').unwrap_or(label);
    if digits.chars().all(|c| c.is_ascii_digit())
        || label.starts_with('-')
        || label.eq_ignore_ascii_case("latest")
        || label.eq_ignore_ascii_case("last")
    {
        return bad("would read as a run id; use words (e.g. smt-off-6.8)");
    }
    if label.ends_with(".json") {
        return bad("would read as a results file");
    }
    Ok(())
}

/// A label [`check_label`] refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label {label:?} {why}")]
pub struct BadLabel {
    pub label: String,
    pub why: &'static str,
}

pub(crate) fn run_exists(conn: &Connection, run_id: i64) -> Step<bool> {
    Ok(conn
        .query_row("SELECT 1 FROM runs WHERE id = ?1", [run_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// `runs 1-4,7 exist`, `run 3 exists`, `it holds no runs yet`.
pub(crate) fn describe_ids(ids: &[i64]) -> String {
    match ids {
        [] => "it holds no runs yet".into(),
        [one] => format!("run {one} exists"),
        _ => {
            let mut parts: Vec<String> = Vec::new();
            let mut i = 0;
            while i < ids.len() {
                let mut j = i;
                while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
                    j += 1;
                }
                parts.push(if i == j {
                    ids[i].to_string()
                } else {
                    format!("{}-{}", ids[i], ids[j])
                });
                i = j + 1;
            }
            format!("runs {} exist", parts.join(","))
        }
    }
}

/// Gives every run of a file upgraded to schema 6 its key ([`derived_uid`]).
pub(crate) fn fill_uids(conn: &Connection) -> Step<()> {
    let mut stmt = conn.prepare(
        "SELECT id, hostname, started_unix_s, command_line, environment FROM runs
         WHERE uid IS NULL",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?
        .collect::<std::result::Result<Vec<_>, _>>()?;
    for (id, host, started, cmd, env) in rows {
        let uid = derived_uid(id, host.as_deref(), started, &cmd, &env);
        conn.execute("UPDATE runs SET uid = ?1 WHERE id = ?2", params![uid, id])?;
    }
    Ok(())
}

pub(crate) fn insert_run(
    tx: &Transaction<'_>,
    meta: &RunMeta,
    uid: &str,
    label: Option<&str>,
) -> Step<i64> {
    check_config_finite(&meta.config).map_err(|e| Fail::Invalid(e.to_string()))?;
    let env = &meta.environment;
    tx.execute(
        "INSERT INTO runs (started_unix_s, finished_unix_s, status, suite, command_line,
                           tool_version, git_commit, hostname, kernel, cpu_model, smt_control,
                           environment, topology, config, notes, uid, label)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        params![
            meta.started_unix_s,
            meta.finished_unix_s,
            status_text(meta.status),
            meta.suite,
            to_json(&meta.command_line)?,
            env.tool_version,
            env.git_commit,
            env.hostname,
            env.kernel,
            env.cpu_model,
            env.smt_control,
            to_json(env)?,
            to_json(&meta.topology)?,
            to_json(&meta.config)?,
            to_json(&meta.notes)?,
            uid,
            label,
        ],
    )?;
    let id = tx.last_insert_rowid();
    let mut stmt = tx.prepare_cached(
        "INSERT INTO plan (run_id, position, benchmark, params, placement)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for (pos, key) in meta.plan.iter().enumerate() {
        stmt.execute(params![
            id,
            pos,
            key.benchmark,
            key_params_json(&key.params, &key.conditions)?,
            key.placement
        ])?;
    }
    Ok(id)
}

/// A run stored as running that no live process measures (no lease, or a stale one)
/// is read as interrupted: it was killed, or stopped by a disk too full to take even
/// its status. `--resume` goes on with it either way.
fn effective_status(conn: &Connection, run_id: i64, stored: RunStatus) -> RunStatus {
    if stored != RunStatus::Running {
        return stored;
    }
    match lease::holder(conn, run_id, lease::now_ms()) {
        Ok(Some((h, _))) if lease::is_live(&h) => RunStatus::Running,
        Ok(_) => RunStatus::Interrupted,
        // An older file without leases: as stored.
        Err(_) => stored,
    }
}

pub(crate) fn load_meta(conn: &Connection, run_id: i64) -> Step<RunMeta> {
    let row = conn
        .query_row(
            "SELECT started_unix_s, finished_unix_s, status, suite, command_line, environment,
                    topology, config, notes
             FROM runs WHERE id = ?1",
            [run_id],
            |r| {
                Ok((
                    r.get::<_, u64>(0)?,
                    r.get::<_, Option<u64>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, String>(7)?,
                    r.get::<_, String>(8)?,
                ))
            },
        )
        .optional()?;
    let Some((started, finished, status, suite, cmd, env, topo, config, notes)) = row else {
        return Err(Fail::NoRun(run_id));
    };
    Ok(RunMeta {
        id: run_id,
        started_unix_s: started,
        finished_unix_s: finished,
        status: effective_status(conn, run_id, parse_status(&status)?),
        command_line: from_json(&cmd, "runs.command_line")?,
        suite,
        environment: from_json::<Environment>(&env, "runs.environment")?,
        topology: from_json(&topo, "runs.topology")?,
        config: from_json(&config, "runs.config")?,
        plan: load_plan(conn, run_id)?,
        notes: from_json(&notes, "runs.notes")?,
    })
}

pub(crate) fn load_plan(conn: &Connection, run_id: i64) -> Step<Vec<CellKey>> {
    let mut stmt = conn.prepare_cached(
        "SELECT benchmark, params, placement FROM plan WHERE run_id = ?1 ORDER BY position",
    )?;
    let mut rows = stmt.query([run_id])?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let (params, conditions) = key_params_from_json(&r.get::<_, String>(1)?, "plan.params")?;
        out.push(CellKey {
            benchmark: r.get(0)?,
            params,
            conditions,
            placement: r.get(2)?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_described_as_ranges() {
        assert_eq!(describe_ids(&[]), "it holds no runs yet");
        assert_eq!(describe_ids(&[3]), "run 3 exists");
        assert_eq!(
            describe_ids(&[1, 2, 3, 4, 7, 9, 10]),
            "runs 1-4,7,9-10 exist"
        );
    }
}
