//! `smtlab report`: one stored run (or results file) as a terminal summary, JSON, CSV,
//! Markdown or the HTML report.

use anyhow::Result;

use crate::args::ReportArgs;
use crate::output::{emit, export, export_markdown, write_file};
use crate::render;
use crate::settings::stored::{label_of, load};

pub fn report(args: &ReportArgs) -> Result<()> {
    let results = load(&args.run, &args.db)?;
    if let Some(path) = &args.markdown.export_markdown
        && export_markdown(path, &results.cells)?
    {
        return Ok(());
    }
    if let Some(path) = &args.os_time_csv
        && export(path, &smtlab_report::export::os_time_csv(&results))?
    {
        return Ok(());
    }
    let label = || label_of(&args.run, &args.db, results.run.id);
    let bytes = if args.json {
        smtlab_report::export::json(&results)
    } else if args.csv {
        smtlab_report::export::csv(&results)
    } else if args.output.is_some() {
        smtlab_report::html_labelled(&results, label().as_deref()).into_bytes()
    } else {
        let label = label();
        let extra = smtlab_report::smt_states::text(&results.cells)
            + &crate::render::corun::summary_text(&results);
        return emit(
            &(render::report::summary(&results, label.as_deref(), crate::term::term_layout())
                + &extra),
        );
    };
    match &args.output {
        Some(path) => write_file(path, &bytes),
        None => emit(&String::from_utf8_lossy(&bytes)),
    }
}
