//! Runs: creating, finishing, importing and loading them, listing them and resolving
//! what a user typed into a run id.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use smtlab_model::{CellKey, RESULTS_SCHEMA, RunMeta, RunResults, RunStatus};

use super::cells::*;
use super::codec::*;
use super::sql::{Sql, Value, args, in_list};
use super::{Fail, Pushed, Step, Store, lease};
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

impl Store {
    /// Stores a new run (its meta data and plan) and returns its id. `meta.id` is
    /// ignored; `status` and `finished_unix_s` are stored as given.
    pub fn create_run(&mut self, meta: &RunMeta) -> Result<i64> {
        self.write("storing a new run", |db| {
            insert_run(db, meta, &new_uid(meta.started_unix_s), None)?
                .ok_or_else(|| Fail::Conflict("a fresh run key is already taken".into()))
        })
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
        self.write(&format!("marking run {run_id} interrupted"), |db| {
            let n = db.execute(
                "UPDATE runs SET status = 'interrupted' WHERE id = ?1 AND status != 'finished'",
                args![run_id],
            )?;
            if n == 0 {
                require_run(db, run_id, false)?;
            }
            Ok(())
        })
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
        self.write(&format!("{doing} run {run_id}"), |db| {
            let n = db.execute(
                "UPDATE runs SET status = ?2, finished_unix_s = ?3 WHERE id = ?1",
                args![run_id, enum_text(status)?, finished_unix_s],
            )?;
            (n > 0).then_some(()).ok_or(Fail::NoRun(run_id))
        })
    }

    /// Stores a whole run (e.g. one read from results JSON) in one transaction and
    /// returns its new id. Loading it gives back `results` with `run.id` set to the id.
    /// It gets a new run key: importing the same JSON twice stores two runs.
    pub fn import_run(&mut self, results: &RunResults) -> Result<i64> {
        let uid = new_uid(results.run.started_unix_s);
        let doing = "importing a run";
        match self.import_keyed(results, &uid, None, doing)? {
            Pushed::Stored(id) => Ok(id),
            _ => Err(self.fail(
                doing,
                Fail::Conflict(format!("a fresh run key {uid} is already taken")),
            )),
        }
    }

    /// Stores a run under its key `uid` (with its label), in one transaction. A run
    /// with that key already here (also one another host stores at the same moment) is
    /// left as it is once finished; one stored unfinished (pushed while interrupted) gets
    /// what `results` holds beyond it: the cells and skips it lacks, and its status and
    /// end time (see [`complete_run`]).
    pub(crate) fn import_keyed(
        &mut self,
        results: &RunResults,
        uid: &str,
        label: Option<&str>,
        doing: &str,
    ) -> Result<Pushed> {
        self.write(doing, |db| {
            for cell in &results.cells {
                check_cell_finite(cell).map_err(|e| {
                    Fail::Invalid(format!("cell {}: {e}", describe_key(&cell.key())))
                })?;
            }
            let Some(id) = insert_run(db, &results.run, uid, label)? else {
                return complete_run(db, results, uid);
            };
            for cell in &results.cells {
                insert_cell(db, id, cell)?;
            }
            for s in &results.skipped {
                insert_skipped(db, id, s)?;
            }
            Ok(Pushed::Stored(id))
        })
    }

    /// The run's key: 32 hex digits that name it in every store it is pushed to (see
    /// [`crate::SCHEMA_VERSION`] 6). A file of an older schema opened read-only has none
    /// stored; its key is derived as the upgrade would store it.
    pub fn run_uid(&self, run_id: i64) -> Result<String> {
        let uid = if self.version >= 6 { "uid" } else { "NULL" };
        self.read(&format!("reading the key of run {run_id}"), |db| {
            let r = db
                .query_opt(
                    &format!(
                        "SELECT {uid}, hostname, started_unix_s, command_line, environment
                         FROM runs WHERE id = ?1"
                    ),
                    args![run_id],
                )?
                .ok_or(Fail::NoRun(run_id))?;
            if let Some(uid) = r.get(0)? {
                return Ok(uid);
            }
            let host = r.opt_text(1)?;
            Ok(derived_uid(run_id, host, r.get(2)?, r.text(3)?, r.text(4)?))
        })
    }

    /// Loads a whole run: meta data, plan, every cell with its samples, and skips.
    pub fn load_run(&self, run_id: i64) -> Result<RunResults> {
        let version = self.version;
        self.read(&format!("loading run {run_id}"), |db| {
            let mut runs = load_runs(db, &[run_id], version, true)?;
            runs.pop().ok_or(Fail::NoRun(run_id))
        })
    }

    /// Every run, oldest first.
    pub fn list_runs(&self) -> Result<Vec<RunListing>> {
        let label = self.label_column();
        self.read("listing runs", |db| {
            let rows = db.query(
                &format!(
                    "SELECT r.id, r.started_unix_s, r.finished_unix_s, r.status, r.suite,
                            r.hostname, r.cpu_model,
                            (SELECT count(*) FROM cells c WHERE c.run_id = r.id),
                            (SELECT count(*) FROM skipped s WHERE s.run_id = r.id),
                            (SELECT count(*) FROM plan p WHERE p.run_id = r.id),
                            {label}
                     FROM runs r ORDER BY r.id"
                ),
                &[],
            )?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                let id = row.get(0)?;
                let status = parse_enum(row.text(3)?, "run status")?;
                out.push(RunListing {
                    id,
                    started_unix_s: row.get(1)?,
                    finished_unix_s: row.get(2)?,
                    status: effective_status(db, id, status),
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
        })
    }

    /// The newest run that is not finished (running when its process died, or
    /// interrupted), for `--resume`.
    pub fn latest_unfinished_run(&self) -> Result<Option<i64>> {
        self.read("finding the latest unfinished run", |db| {
            db.query_one("SELECT max(id) FROM runs WHERE status != 'finished'", &[])?
                .get(0)
        })
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
        let ids = self.read(&format!("finding the run labelled {label:?}"), |db| {
            let rows = db.query(
                "SELECT id FROM runs WHERE label = ?1 ORDER BY id",
                args![label],
            )?;
            rows.iter().map(|r| r.get(0)).collect::<Step<Vec<i64>>>()
        })?;
        one_labelled(&self.path, label, &ids)
    }

    /// `label` or `NULL`: a file of schema 4 or older opened read-only has no label column.
    fn label_column(&self) -> &'static str {
        if self.version >= 5 { "r.label" } else { "NULL" }
    }

    /// The run's label, `None` when it has none.
    pub fn run_label(&self, run_id: i64) -> Result<Option<String>> {
        let sql = format!("SELECT {} FROM runs r WHERE r.id = ?1", self.label_column());
        self.read(&format!("reading the label of run {run_id}"), |db| {
            db.query_opt(&sql, args![run_id])?
                .ok_or(Fail::NoRun(run_id))?
                .get(0)
        })
    }

    /// Names a run (`None` removes the name). The label must pass [`check_label`].
    pub fn set_run_label(&mut self, run_id: i64, label: Option<&str>) -> Result<()> {
        if let Some(l) = label {
            check_label(l).map_err(|e| StoreError::Invalid {
                path: self.path.clone(),
                detail: e.to_string(),
            })?;
        }
        self.write(&format!("labelling run {run_id}"), |db| {
            let n = db.execute(
                "UPDATE runs SET label = ?1 WHERE id = ?2",
                args![label, run_id],
            )?;
            (n > 0).then_some(()).ok_or(Fail::NoRun(run_id))
        })
    }

    /// Deletes runs with everything stored under them (plan, cells, samples, summaries,
    /// series, rounds, skips, leases), all or none in one transaction. A run that a live
    /// process is measuring is refused (and so nothing is deleted); a stale lease (its
    /// holder died) does not protect the run. Unknown ids are refused too.
    pub fn delete_runs(&mut self, run_ids: &[i64]) -> Result<()> {
        let now = lease::now_ms();
        self.write("deleting runs", |db| {
            for &id in run_ids {
                // Locked: a lease cannot be taken on it until this transaction ends.
                require_run(db, id, true)?;
                if let Some(h) = lease::holder(db, id, now)?
                    && lease::is_live(&h)
                {
                    return Err(Fail::Conflict(format!(
                        "run {id} is being measured by process {} on {}; stop it first",
                        h.pid, h.host
                    )));
                }
            }
            for &id in run_ids {
                db.execute("DELETE FROM runs WHERE id = ?1", args![id])?;
            }
            Ok(())
        })
    }

    /// How many measured cells a run holds.
    pub fn cells_stored(&self, run_id: i64) -> Result<usize> {
        self.read(&format!("counting the cells of run {run_id}"), |db| {
            require_run(db, run_id, false)?;
            db.query_one(
                "SELECT count(*) FROM cells WHERE run_id = ?1",
                args![run_id],
            )?
            .get(0)
        })
    }

    /// The cells of a run's plan that are neither measured nor skipped, in plan order:
    /// what `--resume` still has to do.
    pub fn pending_cells(&self, run_id: i64) -> Result<Vec<CellKey>> {
        self.read(&format!("listing pending cells of run {run_id}"), |db| {
            let plan = load_plan(db, run_id)?;
            if plan.is_empty() {
                require_run(db, run_id, false)?;
            }
            let mut done: HashSet<CellKey> = stored_cell_keys(db, run_id)?;
            done.extend(load_skipped(db, run_id)?.into_iter().map(|s| s.key));
            Ok(plan.into_iter().filter(|k| !done.contains(k)).collect())
        })
    }
}

/// What [`resolve_run`](Store::resolve_run) does once labels are looked up: a
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

/// `runs 1-4,7 exist`, `run 3 exists`, `it holds no runs yet`.
pub(crate) fn describe_ids(ids: &[i64]) -> String {
    match ids {
        [] => "it holds no runs yet".into(),
        [one] => format!("run {one} exists"),
        _ => {
            let parts: Vec<String> = ids
                .chunk_by(|a, b| *b == a + 1)
                .map(|run| match run {
                    [one] => one.to_string(),
                    [first, .., last] => format!("{first}-{last}"),
                    [] => String::new(),
                })
                .collect();
            format!("runs {} exist", parts.join(","))
        }
    }
}

/// The run stored under `uid`, unfinished there, given the cells and skips of `results`
/// it lacks and, once `results` is no longer running, its status and end time. A run a
/// process resumed and finished after an interrupted push thereby arrives whole.
fn complete_run(db: &mut dyn Sql, results: &RunResults, uid: &str) -> Step<Pushed> {
    let sql = format!(
        "SELECT id, status FROM runs WHERE uid = ?1{}",
        db.for_update()
    );
    let Some(row) = db.query_opt(&sql, args![uid])? else {
        return Ok(Pushed::Present);
    };
    let (id, status): (i64, String) = (row.get(0)?, row.get(1)?);
    if status == enum_text(RunStatus::Finished)? {
        return Ok(Pushed::Present);
    }
    let cells = stored_cell_keys(db, id)?;
    let skipped: HashSet<CellKey> = load_skipped(db, id)?.into_iter().map(|s| s.key).collect();
    let mut added = 0;
    for cell in results.cells.iter().filter(|c| !cells.contains(&c.key())) {
        insert_cell(db, id, cell)?;
        added += 1;
    }
    let known = |k: &CellKey| cells.contains(k) || skipped.contains(k);
    for s in results.skipped.iter().filter(|s| !known(&s.key)) {
        insert_skipped(db, id, s)?;
        added += 1;
    }
    let run = &results.run;
    let closes = run.status != RunStatus::Running && enum_text(run.status)? != status;
    if closes {
        db.execute(
            "UPDATE runs SET status = ?2, finished_unix_s = ?3 WHERE id = ?1",
            args![id, enum_text(run.status)?, run.finished_unix_s],
        )?;
    }
    Ok(if added > 0 || closes {
        Pushed::Completed(id)
    } else {
        Pushed::Present
    })
}

fn redacted(command_line: &[String]) -> Vec<String> {
    command_line
        .iter()
        .map(|a| super::pg::redact_arg(a))
        .collect()
}

/// Inserts a run and its plan; `None` when a run with key `uid` is already stored.
pub(crate) fn insert_run(
    db: &mut dyn Sql,
    meta: &RunMeta,
    uid: &str,
    label: Option<&str>,
) -> Step<Option<i64>> {
    check_config_finite(&meta.config).map_err(|e| Fail::Invalid(e.to_string()))?;
    let env = &meta.environment;
    let row = db.query_opt(
        "INSERT INTO runs (started_unix_s, finished_unix_s, status, suite, command_line,
                           tool_version, git_commit, hostname, kernel, cpu_model, smt_control,
                           environment, topology, config, notes, uid, label, host_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                 ?18)
         ON CONFLICT (uid) DO NOTHING
         RETURNING id",
        args![
            meta.started_unix_s,
            meta.finished_unix_s,
            enum_text(meta.status)?,
            meta.suite.as_deref(),
            // A run pushed from an older store may still hold a password.
            to_json(&redacted(&meta.command_line))?,
            env.tool_version.as_str(),
            env.git_commit.as_deref(),
            env.hostname.as_deref(),
            env.kernel.as_deref(),
            env.cpu_model.as_deref(),
            env.smt_control.as_deref(),
            to_json(env)?,
            to_json(&meta.topology)?,
            to_json(&meta.config)?,
            to_json(&meta.notes)?,
            uid,
            label,
            env.host_id.as_deref(),
        ],
    )?;
    let Some(row) = row else { return Ok(None) };
    let id: i64 = row.get(0)?;
    for (pos, key) in meta.plan.iter().enumerate() {
        db.execute(
            "INSERT INTO plan (run_id, position, benchmark, params, placement)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            args![
                id,
                pos,
                key.benchmark.as_str(),
                key_params_json(&key.params, &key.conditions)?,
                key.placement.as_str(),
            ],
        )?;
    }
    Ok(Some(id))
}

/// A run stored as running that no live process measures (no lease, or a stale one)
/// is read as interrupted: it was killed, or stopped by a disk too full to take even
/// its status. `--resume` goes on with it either way.
fn effective_status(db: &mut dyn Sql, run_id: i64, stored: RunStatus) -> RunStatus {
    if stored != RunStatus::Running || lease::measured(db, run_id, lease::now_ms()) {
        return stored;
    }
    RunStatus::Interrupted
}

/// The runs `ids`, in the order of `ids`, in one statement per table for all of them:
/// `whole`, with their plans and every cell's samples and series; else as the fleet
/// reads them, without plans, each cell's samples and series from its digest.
pub(crate) fn load_runs(
    db: &mut dyn Sql,
    ids: &[i64],
    version: i64,
    whole: bool,
) -> Step<Vec<RunResults>> {
    let args: Vec<Value<'_>> = ids.iter().map(|id| Value::Int(*id)).collect();
    let mut metas: BTreeMap<i64, RunMeta> = load_metas(db, &args)?
        .into_iter()
        .map(|m| (m.id, m))
        .collect();
    let filter = if whole {
        for meta in metas.values_mut() {
            meta.plan = load_plan(db, meta.id)?;
        }
        CellFilter::runs(&args, true)
    } else {
        CellFilter::digests(&args)
    };
    let mut cells = load_cells_of(db, &filter, version)?;
    let mut skipped = load_skipped_of(db, &args)?;
    let mut out = Vec::with_capacity(ids.len());
    for &id in ids {
        let run = metas.remove(&id).ok_or(Fail::NoRun(id))?;
        out.push(RunResults {
            schema: RESULTS_SCHEMA.to_string(),
            run,
            cells: cells.remove(&id).unwrap_or_default(),
            skipped: skipped.remove(&id).unwrap_or_default(),
            benchmarks: Vec::new(),
        });
    }
    Ok(out)
}

/// The runs `ids`, without plans, by id.
fn load_metas(db: &mut dyn Sql, ids: &[Value<'_>]) -> Step<Vec<RunMeta>> {
    let rows = db.query(
        &format!(
            "SELECT id, started_unix_s, finished_unix_s, status, suite, command_line,
                    environment, topology, config, notes
             FROM runs WHERE id {} ORDER BY id",
            in_list(ids.len())
        ),
        ids,
    )?;
    rows.iter()
        .map(|r| {
            let id: i64 = r.get(0)?;
            let status = parse_enum(r.text(3)?, "run status")?;
            Ok(RunMeta {
                id,
                started_unix_s: r.get(1)?,
                finished_unix_s: r.get(2)?,
                status: effective_status(db, id, status),
                command_line: from_json(r.text(5)?, "runs.command_line")?,
                suite: r.get(4)?,
                environment: from_json(r.text(6)?, "runs.environment")?,
                topology: from_json(r.text(7)?, "runs.topology")?,
                config: from_json(r.text(8)?, "runs.config")?,
                plan: Vec::new(),
                notes: from_json(r.text(9)?, "runs.notes")?,
            })
        })
        .collect()
}

pub(crate) fn load_plan(db: &mut dyn Sql, run_id: i64) -> Step<Vec<CellKey>> {
    db.query(
        "SELECT benchmark, params, placement FROM plan WHERE run_id = ?1 ORDER BY position",
        args![run_id],
    )?
    .iter()
    .map(|r| key_of(r, "plan.params"))
    .collect()
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
