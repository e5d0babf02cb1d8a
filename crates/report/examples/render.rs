//! Renders a results file (`smtlab bench --json`, `smtlab.results/1`) as the HTML page:
//! `cargo run -p smtlab-report --example render -- results.json > page.html`.
//! A stand-in until the CLI has a `report` command; extra top-level fields are ignored.

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: render RESULTS.json > page.html");
        return ExitCode::FAILURE;
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match serde_json::from_str::<smtlab_model::RunResults>(&text) {
        Ok(r) => {
            print!("{}", smtlab_report::html(&r));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{path}: not smtlab.results/1 JSON: {e}");
            ExitCode::FAILURE
        }
    }
}
