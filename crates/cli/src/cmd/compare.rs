//! `smtlab compare A B`: two runs (two machines, two kernels, SMT off vs on) cell by
//! cell, as a table, JSON, Markdown or an HTML page, with what runs of the same setup
//! differ by (stored repeats, rounds or the default floor) in every test.

use anyhow::Result;
use smtlab_model::RunResults;
use smtlab_report::between::{BetweenRuns, Choice, repeat_sets, same_setup};
use smtlab_store::Store;

use crate::args::{BetweenArg, CompareArgs};
use crate::output::{emit, write_file};
use crate::render;
use crate::settings::db_path;
use crate::settings::stored::{label_of, load};

/// The most stored runs read as repeats of A's or B's setup (the newest first).
const MAX_REPEATS: usize = 20;

pub fn compare(args: &CompareArgs) -> Result<()> {
    let a = load(&args.a, &args.db)?;
    let b = load(&args.b, &args.db)?;
    let choice = match args.between_runs {
        BetweenArg::Auto => Choice::Auto,
        BetweenArg::Store => Choice::Store,
        BetweenArg::Rounds => Choice::Rounds,
        BetweenArg::Floor => Choice::Floor,
        BetweenArg::None => Choice::None,
    };
    let stored = if matches!(choice, Choice::Auto | Choice::Store) {
        repeats_in_store(&a, &b, args)
    } else {
        Vec::new()
    };
    let between = BetweenRuns::choose(choice, &a, &b, &repeat_sets(&a, &b, &stored))?;
    let mut cmp = smtlab_report::compare_with(&a, &b, between);
    // The names the user gave the runs lead their lines in every form.
    cmp.a.named(label_of(&args.a, &args.db, a.run.id));
    cmp.b.named(label_of(&args.b, &args.db, b.run.id));
    if let Some(path) = &args.output {
        return write_file(path, smtlab_report::compare_html(&a, &b, &cmp).as_bytes());
    }
    if args.markdown {
        return emit(&smtlab_report::compare_markdown(&a, &b, &cmp));
    }
    if args.json {
        return emit(&smtlab_report::compare_json(&cmp));
    }
    emit(&render::compare::table(&cmp, crate::term::term_layout()))
}

/// The finished runs of the store of A's or B's setup, other than A and B: the repeats
/// the between-run estimate is measured from. None when the store cannot be read (A and
/// B given as files, no database): the estimate then says what it used instead.
fn repeats_in_store(a: &RunResults, b: &RunResults, args: &CompareArgs) -> Vec<RunResults> {
    let Ok(store) = Store::open_read_only(db_path(&args.db)) else {
        return Vec::new();
    };
    let Ok(mut listed) = store.list_runs() else {
        return Vec::new();
    };
    let hosts = [&a.run.environment.hostname, &b.run.environment.hostname];
    listed.retain(|l| {
        l.status == smtlab_model::RunStatus::Finished
            && l.id != a.run.id
            && l.id != b.run.id
            && hosts.contains(&&l.hostname)
    });
    listed.sort_by_key(|l| std::cmp::Reverse(l.started_unix_s));
    listed
        .iter()
        .take(4 * MAX_REPEATS)
        .filter_map(|l| store.load_run(l.id).ok())
        .filter(|r| same_setup(r, a) || same_setup(r, b))
        .take(MAX_REPEATS)
        .collect()
}
