//! One module per subcommand; each turns parsed arguments into library calls and output.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use smtlab_model::Topology;

use crate::args::{Cli, Command, SysfsArg};

mod advise;
pub mod bench;
mod completions;
pub mod corun;
mod exec;
mod list;
mod load;
pub mod placements;
mod report;
mod run;
pub mod smt;
mod topo;
pub mod utilisation;

/// Runs the command; the exit code for a command that ended without an error (a run
/// stopped by Ctrl-C has its own).
pub fn dispatch(cli: Cli) -> Result<ExitCode> {
    let ok = |r: Result<()>| r.map(|()| ExitCode::SUCCESS);
    crate::term::init(&cli.term);
    // Commands that start processes or write scratch directories and have no stop flag
    // of their own (`run`, `corun`, `penalty` and `util` have one and end the cell
    // cleanly): on SIGINT, SIGTERM, SIGHUP
    // or SIGQUIT their process trees are killed and their scratch directories removed
    // before they die of the signal.
    if matches!(
        cli.command,
        Command::Bench(_) | Command::Exec(_) | Command::Load(_)
    ) {
        smtlab_control::signals::clean_up_on_signals(smtlab_bench::process::clean_up)
            .context("cannot install the signal handlers")?;
    }
    let result = match cli.command {
        Command::Topo(a) => ok(topo::run(&a)),
        Command::Placements(a) => ok(placements::run(&a)),
        Command::List(a) => ok(list::run(&a)),
        Command::Bench(a) => ok(bench::run(&a)),
        Command::Run(a) => run::run(&a),
        Command::Runs(a) => ok(report::runs(&a)),
        Command::Report(a) => ok(report::report(&a)),
        Command::Compare(a) => ok(report::compare(&a)),
        Command::Exec(a) => ok(exec::run(&a)),
        Command::Smt(a) => ok(smt::run(&a)),
        Command::Load(a) => ok(load::run(&a)),
        Command::Completions(a) => ok(completions::completions(&a)),
        Command::Man => ok(completions::man()),
        Command::Corun(a) => corun::run_corun(&a),
        Command::Penalty(a) => corun::run_penalty(&a),
        Command::Util(a) => utilisation::run(&a),
        Command::Advise(a) => advise::run(&a),
    };
    // What was killed because a command or server left it running (a daemon).
    for line in smtlab_bench::process::take_notes() {
        crate::term::note_fit(&format!("note: {line}"));
    }
    result
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

/// The client-side rule of `--client-cpus`, `--client-share` and `--client-siblings`.
pub fn client_rule(args: &crate::args::ClientArgs) -> smtlab_placement::ClientRule {
    use smtlab_placement::ClientRule;
    match (&args.client_cpus, args.client_siblings) {
        (Some(cpus), _) => ClientRule::Cpus {
            cpus: cpus.clone(),
            shared: args.client_share,
        },
        (None, true) => ClientRule::AllowSiblings,
        (None, false) => ClientRule::Apart,
    }
}

/// The results database: `--db`, else the default path.
pub fn db_path(arg: &crate::args::DbArg) -> std::path::PathBuf {
    arg.db.clone().unwrap_or_else(smtlab_store::default_path)
}

/// Pretty JSON with a trailing newline.
pub fn json_text<T: serde::Serialize>(value: &T) -> Result<String> {
    let mut s = serde_json::to_string_pretty(value).context("cannot encode JSON")?;
    s.push('\n');
    Ok(s)
}

/// Refuses two outputs that both want standard output.
pub fn check_stdout_owner(json: bool, markdown: Option<&Path>) -> Result<()> {
    if json && markdown.is_some_and(|p| p.as_os_str() == "-") {
        anyhow::bail!(
            "--json and --export-markdown - both write to standard output: give --export-markdown a file"
        );
    }
    Ok(())
}

/// `--export-markdown`: the cells as a Markdown table, to `path` or (`-`) standard output.
pub fn export_markdown(path: &Path, cells: &[smtlab_model::CellRecord]) -> Result<()> {
    let md = smtlab_report::markdown::cells(cells);
    if path.as_os_str() == "-" {
        return emit(&md);
    }
    std::fs::write(path, md).with_context(|| format!("cannot write {}", path.display()))?;
    crate::term::note(&format!("wrote {}", path.display()));
    Ok(())
}

/// A finished run as it is stored: the plan is every measured cell, then every skipped
/// one, and the command line is this process's.
#[allow(clippy::too_many_arguments)]
pub fn finished_run(
    suite: Option<&str>,
    started_unix_s: u64,
    environment: smtlab_model::Environment,
    topology: Topology,
    config: smtlab_model::RunConfig,
    notes: Vec<String>,
    cells: Vec<smtlab_model::CellRecord>,
    skipped: Vec<smtlab_model::SkippedCell>,
) -> smtlab_model::RunResults {
    use smtlab_model::{CellRecord, RESULTS_SCHEMA, RunMeta, RunResults, RunStatus};
    RunResults {
        schema: RESULTS_SCHEMA.to_string(),
        run: RunMeta {
            id: 0,
            started_unix_s,
            finished_unix_s: Some(crate::settings::unix_now_s()),
            status: RunStatus::Finished,
            command_line: std::env::args().collect(),
            suite: suite.map(Into::into),
            environment,
            topology,
            config,
            plan: cells
                .iter()
                .map(CellRecord::key)
                .chain(skipped.iter().map(|s| s.key.clone()))
                .collect(),
            notes,
        },
        cells,
        skipped,
    }
}

/// Where run `id` was stored and the command that reports it (`db_arg`: the `--db`
/// given, repeated in the command).
pub fn saved_line(id: i64, path: &Path, db_arg: Option<&Path>) -> String {
    format!(
        "saved as run {id} in {}. Report: smtlab report {id}{} -o report.html",
        path.display(),
        db_arg
            .map(|p| format!(" --db {}", p.display()))
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use smtlab_model::{CellKey, Environment, RESULTS_SCHEMA, RunConfig, RunStatus, SkippedCell};

    use super::*;
    use crate::verdict::tests::cell;

    #[test]
    fn a_finished_run_plans_its_measured_cells_then_its_skipped_ones() {
        let cells = vec![
            cell("spin", &[], "1c1t", &[1.0, 1.1, 0.9]),
            cell("spin", &[], "2c1t", &[2.0, 2.1, 1.9]),
        ];
        let skipped = vec![SkippedCell {
            key: CellKey {
                benchmark: "spin".into(),
                params: Default::default(),
                placement: "1c2t".into(),
            },
            reason: "no SMT visible".into(),
        }];
        let topo = smtlab_fixtures::build::one_cpu_per_core(&[0, 1]);
        let r = finished_run(
            Some("exec"),
            7,
            Environment::default(),
            topo.clone(),
            RunConfig::default(),
            vec!["a note".into()],
            cells.clone(),
            skipped.clone(),
        );
        let placements: Vec<&str> = r.run.plan.iter().map(|k| k.placement.as_str()).collect();
        assert_eq!(placements, ["1c1t", "2c1t", "1c2t"]);
        assert_eq!(r.schema, RESULTS_SCHEMA);
        assert_eq!((r.run.id, r.run.status), (0, RunStatus::Finished));
        assert_eq!(r.run.started_unix_s, 7);
        assert!(r.run.finished_unix_s.is_some_and(|f| f >= 7));
        assert_eq!(r.run.suite.as_deref(), Some("exec"));
        assert!(!r.run.command_line.is_empty());
        assert_eq!(r.run.topology, topo);
        assert_eq!(r.run.notes, ["a note"]);
        assert_eq!((r.cells, r.skipped), (cells, skipped));
    }

    #[test]
    fn the_saved_line_repeats_the_db_given() {
        let path = Path::new("/tmp/x.db");
        assert_eq!(
            saved_line(3, path, None),
            "saved as run 3 in /tmp/x.db. Report: smtlab report 3 -o report.html"
        );
        assert_eq!(
            saved_line(3, path, Some(Path::new("x.db"))),
            "saved as run 3 in /tmp/x.db. Report: smtlab report 3 --db x.db -o report.html"
        );
    }
}
