//! `smtlab fleet`: every run of a results database (typically the PostgreSQL database
//! many hosts push to) pooled per CPU model and workload (`smtlab_report::fleet`).

use anyhow::Result;
use smtlab_model::RunStatus;
use smtlab_store::Store;

use crate::args::FleetArgs;
use crate::output::{emit, write_file};
use crate::settings::stored::db_path;

pub fn run(args: &FleetArgs) -> Result<()> {
    let store = Store::open_read_only(db_path(&args.db.db))?;
    let want = args.cpu_model.as_deref().map(str::to_lowercase);
    let mut runs = Vec::new();
    let mut running = 0usize;
    for l in store.list_runs()? {
        if let Some(w) = &want {
            let model = l.cpu_model.as_deref().unwrap_or("").to_lowercase();
            if !model.contains(w.as_str()) {
                continue;
            }
        }
        // A run still being measured would pool a half-measured host; its finished
        // cells count once it ends (or is cut short).
        if l.status == RunStatus::Running {
            running += 1;
            continue;
        }
        if l.cells_done == 0 {
            continue;
        }
        runs.push(store.load_run(l.id)?);
    }
    if running > 0 {
        crate::term::note_fit(&format!(
            "note: {running} run(s) still being measured left out"
        ));
    }
    let f = smtlab_report::fleet::fleet(&runs);
    let text = if args.json {
        smtlab_report::fleet::json(&f)
    } else if args.output.is_some() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        smtlab_report::fleet::html(&f, now)
    } else {
        let width = crate::term::get().width.unwrap_or(usize::MAX);
        smtlab_report::fleet::text(&f, width)
    };
    match &args.output {
        Some(path) => write_file(path, text.as_bytes()),
        None => emit(&text),
    }
}
