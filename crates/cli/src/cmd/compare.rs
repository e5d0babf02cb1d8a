//! `smtlab compare A B`: two runs (two machines, two kernels, SMT off vs on) cell by
//! cell, as a table, JSON, Markdown or an HTML page.

use anyhow::Result;

use crate::args::CompareArgs;
use crate::output::{emit, write_file};
use crate::render;
use crate::settings::stored::load;

pub fn compare(args: &CompareArgs) -> Result<()> {
    let a = load(&args.a, &args.db.db)?;
    let b = load(&args.b, &args.db.db)?;
    if let Some(path) = &args.output {
        return write_file(path, smtlab_report::compare_html(&a, &b).as_bytes());
    }
    if args.markdown {
        return emit(&smtlab_report::compare_markdown(&a, &b));
    }
    let cmp = smtlab_report::compare(&a, &b);
    if args.json {
        return emit(&smtlab_report::compare_json(&cmp));
    }
    emit(&render::compare::table(&cmp, render::table::Layout::term()))
}
