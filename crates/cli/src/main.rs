//! The `smtlab` command: argument parsing and wiring. Each subcommand lives in
//! `cmd/`; this file only dispatches and turns errors into one line and an exit code.

use std::process::ExitCode;

use clap::Parser;

mod args;
mod cmd;
mod live;
mod output;
mod render;
mod settings;
mod sink;
mod term;

fn main() -> ExitCode {
    // The os benchmarks' measurement process, when smtlab-os-child is not installed beside
    // this binary: it must stay single-threaded, so it branches off before anything else.
    if smtlab_bench::os::lean::is_child_invocation() {
        return ExitCode::from(smtlab_bench::os::lean::child_main());
    }
    if let Ok(exe) = std::env::current_exe() {
        smtlab_bench::os::lean::set_program_beside(&exe);
    }
    let cli = args::Cli::parse();
    let code = match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            // The chain of causes joined with `: `, each said once by its own type.
            term::stderr_line(&format!("smtlab: error: {e:#}"));
            ExitCode::FAILURE
        }
    };
    // The guardian and the cgroup of the processes smtlab started go before smtlab
    // does, so that nothing of smtlab's is left once it has exited.
    smtlab_bench::process::finish();
    code
}
