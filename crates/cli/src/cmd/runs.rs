//! `smtlab runs`: the runs of the results database, or `--delete` some of them.

use anyhow::Result;
use smtlab_store::Store;

use crate::args::RunsArgs;
use crate::output::emit;
use crate::render;
use crate::settings::db_path;

pub fn runs(args: &RunsArgs) -> Result<()> {
    if !args.delete.is_empty() {
        return delete(args);
    }
    let store = Store::open_read_only(db_path(&args.db))?;
    let list = store.list_runs()?;
    if args.json {
        return emit(&crate::output::json_text(&render::report::runs_json(
            &list,
        ))?);
    }
    emit(&render::report::runs_table(
        &list,
        crate::term::term_layout(),
    ))
}

/// `runs --delete`: every selector resolved first (ids, `-1`, labels), then all deleted
/// in one transaction or none.
fn delete(args: &RunsArgs) -> Result<()> {
    let mut store = Store::open_existing(db_path(&args.db))?;
    let resolved: Result<Vec<i64>, _> = args.delete.iter().map(|w| store.resolve_run(w)).collect();
    let ids = smtlab_report::first_seen(resolved?);
    store.delete_runs(&ids)?;
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    emit(&format!(
        "deleted {} {}\n",
        if ids.len() == 1 { "run" } else { "runs" },
        list.join(", ")
    ))
}
