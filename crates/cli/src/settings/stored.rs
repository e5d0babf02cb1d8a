//! Which stored run a reading command means: a results JSON file, or a run of the
//! database by selector (`latest`, `3`, `-2`, a label), described with this build's
//! catalog entries.

use std::path::Path;

use anyhow::{Context, Result, bail};
use smtlab_model::{RESULTS_SCHEMA, RunResults};
use smtlab_store::Store;

use super::db_path;
use crate::args::DbArg;

/// A run named by `which`: a results JSON file (`smtlab report RUN --json` output, from
/// this machine or another) or a run of the database (`latest`, `3`, `-2`).
pub fn load(which: &str, db: &DbArg) -> Result<RunResults> {
    let as_file = Path::new(which);
    if which.ends_with(".json") || (as_file.is_file() && !which.chars().all(|c| c.is_ascii_digit()))
    {
        let text = std::fs::read_to_string(as_file)
            .with_context(|| format!("cannot read results file {which}"))?;
        let mut results: RunResults = serde_json::from_str(&text).with_context(|| {
            format!("{which} is not a smtlab results file (expected schema {RESULTS_SCHEMA})")
        })?;
        if results.schema != RESULTS_SCHEMA {
            bail!(
                "{which} has schema {:?}; this build reads {RESULTS_SCHEMA}",
                results.schema
            );
        }
        // A file exported with its catalog entries keeps them; others get this build's.
        results.describe(smtlab_runner::catalog::infos());
        return Ok(results);
    }
    let store = Store::open_read_only(db_path(db))?;
    let id = store.resolve_run(which)?;
    let mut results = store.load_run(id)?;
    results.describe(smtlab_runner::catalog::infos());
    Ok(results)
}

/// The label of a stored run, for the summary's first line; none for a results file.
pub fn label_of(which: &str, db: &DbArg, id: i64) -> Option<String> {
    if which.ends_with(".json") || Path::new(which).is_file() {
        return None;
    }
    Store::open_read_only(db_path(db))
        .ok()?
        .run_label(id)
        .ok()
        .flatten()
}
