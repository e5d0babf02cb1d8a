//! One module per subcommand; each turns parsed arguments into library calls and output.

use std::path::Path;

use anyhow::{Context, Result};
use smtlab_model::Topology;

use crate::args::{Cli, Command, SysfsArg};

pub mod bench;
pub mod corun;
pub mod counting;
mod exec;
mod list;
pub mod placements;
mod report;
mod run;
pub mod smt;
mod topo;
pub mod utilisation;

pub fn dispatch(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Topo(a) => topo::run(&a),
        Command::Placements(a) => placements::run(&a),
        Command::List(a) => list::run(&a),
        Command::Bench(a) => bench::run(&a),
        Command::Run(a) => run::run(&a),
        Command::Runs(a) => report::runs(&a),
        Command::Report(a) => report::report(&a),
        Command::Compare(a) => report::compare(&a),
        Command::Exec(a) => exec::run(&a),
        Command::Smt(a) => smt::run(&a),
        Command::Corun(a) => corun::run_corun(&a),
        Command::Penalty(a) => corun::run_penalty(&a),
        Command::Util(a) => utilisation::run(&a),
    }
}

/// The topology of this machine, or of the saved tree given with `--sysfs`.
pub fn load_topology(arg: &SysfsArg) -> Result<Topology> {
    let root = arg.sysfs.as_deref().unwrap_or(Path::new("/"));
    smtlab_topology::discover(root)
        .with_context(|| format!("cannot read the CPU topology under {}", root.display()))
}

/// Writes to stdout, treating a closed pipe (`smtlab topo | head`) as success.
pub fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to standard output"),
    }
}

/// Pretty JSON with a trailing newline.
pub fn json_text<T: serde::Serialize>(value: &T) -> Result<String> {
    let mut s = serde_json::to_string_pretty(value).context("cannot encode JSON")?;
    s.push('\n');
    Ok(s)
}
