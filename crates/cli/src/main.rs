//! The `smtlab` command: argument parsing and wiring. Each subcommand lives in
//! `cmd/`; this file only dispatches and turns errors into one line and an exit code.

use std::process::ExitCode;

use clap::Parser;

mod args;
mod cmd;
mod env;
mod render;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            // One line: the chain of causes joined, as users paste it into tickets.
            eprintln!("smtlab: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
