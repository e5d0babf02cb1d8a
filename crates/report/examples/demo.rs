//! Writes the HTML report of a synthetic run to standard output, to look at the page:
//! `cargo run -p smtlab-report --example demo > /tmp/report.html`.
//! With `--compare` it prints the comparison table of the demo run against a copy of
//! itself with slower int-ops instead.

#[path = "../tests/common/mod.rs"]
mod common;

fn main() {
    let demo = common::demo();
    if std::env::args().any(|a| a == "--compare") {
        let mut b = demo.clone();
        for c in b.cells.iter_mut().filter(|c| c.benchmark == "int-ops") {
            c.result.summary.mean *= 0.95;
        }
        print!(
            "{}",
            smtlab_report::compare_table(&smtlab_report::compare(&demo, &b))
        );
    } else if std::env::args().any(|a| a == "--yields") {
        print!(
            "{}",
            smtlab_report::yield_table(&smtlab_report::smt_yields(&demo))
        );
    } else {
        print!("{}", smtlab_report::html(&demo));
    }
}
