//! `smtlab exec -- CMD ARGS`: the user's own program under each placement, repeated,
//! with the SMT yield and a plain-language verdict; stored as a run (suite `exec`) so
//! `report` and `compare` work on it.
//!
//! The command is a benchmark like any other (`smtlab_runner::exec::CommandBench`, which
//! explains how a run is pinned, watched, timed and cleaned up), measured by the same
//! session as `bench`: `--warmup` discarded runs, then `--reps` measured runs per
//! placement, counters around the measured runs only.
//!
//! The yield is the one verdict of smtlab ([`smtlab_model::verdict::verdict`]): the
//! ratio of the mean throughputs (with `--throughput`) or of the mean wall times turned
//! over (the throughput over all runs; per-run rates are never averaged), with a
//! Fieller 95% interval, so above 1 always means faster and `bench`, `report` (HTML
//! included), the JSON's `speedups`, the Markdown table and `compare` print the same
//! figure and sign for the same pair. The verdict lines are
//! [`crate::verdict`]'s, which `bench` prints too.

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use regex::Regex;
use smtlab_bench::{Benchmark, Params};
use smtlab_model::stats;
use smtlab_model::{CellKey, CellRecord, RunConfig, SkippedCell, Topology};
use smtlab_runner::counting::{CountingSetup, Machine};
use smtlab_runner::exec::{CommandBench, ExecValue, shell_join};
use smtlab_runner::session::{CellPlan, Counting, Measured, Session, SessionObserver};
use smtlab_runner::{Monotonic, measure_overheads};
use smtlab_store::Store;

use super::emit;
use crate::args::ExecArgs;
use crate::env::capture;
use crate::render;
use crate::settings::unix_now_s;

/// Compiles `--throughput`: one line on error, and a capture group is required.
fn throughput_regex(pattern: &str) -> Result<Regex> {
    let re = Regex::new(pattern).map_err(|e| {
        // regex's message spans several lines (the pattern with a caret); keep the
        // line that says what is wrong.
        let text = e.to_string();
        let why = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("error: "))
            .unwrap_or_else(|| text.lines().last().unwrap_or("invalid"))
            .trim()
            .to_string();
        anyhow::anyhow!("--throughput {pattern:?} is not a valid regular expression: {why}")
    })?;
    if re.captures_len() < 2 {
        bail!(
            "--throughput {pattern:?} has no capture group: put parentheses around the number, e.g. 'ops/s: ([0-9.]+)'"
        );
    }
    Ok(re)
}

/// `(placements, note)`: 1c1t and 1c2t where SMT exists; otherwise 1c1t and 2c1t (or
/// 1c1t alone on one core), with the note saying so.
fn default_placements(topo: &Topology) -> (Vec<String>, Option<String>) {
    if topo.smt_visible() {
        (vec!["1c1t".into(), "1c2t".into()], None)
    } else if topo.core_count() >= 2 {
        (
            vec!["1c1t".into(), "2c1t".into()],
            Some("no SMT here: compared 1c1t vs 2c1t only".into()),
        )
    } else {
        (
            vec!["1c1t".into()],
            Some("no SMT here and one core: measured 1c1t only".into()),
        )
    }
}

fn not_found(program: &str) -> anyhow::Error {
    if program.contains('/') {
        anyhow::anyhow!("command `{program}` not found: no such file")
    } else {
        anyhow::anyhow!("command `{program}` not found in $PATH")
    }
}

/// Checks that `program` names an executable file (directly, or through `$PATH` as
/// `execvp` searches it), so a typo fails before anything is printed or measured.
fn check_program(program: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = Path::new(program);
        if !p.exists() {
            return Err(not_found(program));
        }
        if !executable(p) {
            bail!("command `{program}` cannot be run: not an executable file");
        }
        return Ok(());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    if std::env::split_paths(&path).any(|dir| executable(&dir.join(program))) {
        Ok(())
    } else {
        Err(not_found(program))
    }
}

pub fn run(args: &ExecArgs) -> Result<()> {
    let argv = &args.command;
    if argv.is_empty() || argv[0].is_empty() {
        bail!("no command given: smtlab exec [OPTIONS] -- CMD ARGS");
    }
    check_program(&argv[0])?;
    super::check_stdout_owner(args.json, args.export_markdown.as_deref())?;
    // JSON or Markdown on standard output take the place of the table and verdict.
    let text = !args.json
        && args
            .export_markdown
            .as_ref()
            .is_none_or(|p| p.as_os_str() != "-");
    let reps = args.reps as usize;
    let value = match &args.throughput {
        Some(p) => ExecValue::Throughput(throughput_regex(p)?),
        None => ExecValue::WallTime,
    };
    let topo = smtlab_topology::discover(Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    let (specs, note) = if args.placements.is_empty() {
        default_placements(&topo)
    } else {
        (crate::settings::split_placements(&args.placements), None)
    };
    let placements = specs
        .iter()
        .map(|s| {
            let spec = smtlab_placement::parse(s)?;
            smtlab_placement::resolve(&spec, &topo)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let sysfs = smtlab_control::Sysfs::system();
    let states = crate::settings::switchable_states(&args.smt, &placements, &topo, &sysfs)?;
    let db = super::db_path(&args.db);
    // A database that exists must be ours before any time is spent; a new one is only
    // created once there is something to store.
    if db.exists() {
        drop(Store::open_existing(&db)?);
    }
    let bench = CommandBench {
        argv: argv.clone(),
        value,
        timeout: args.timeout,
        warmup_runs: args.warmup as usize,
        reps,
    };
    let shown = shell_join(argv);
    let mut config = RunConfig {
        min_samples: reps,
        max_samples: reps,
        warmup_ns: 0,
        // Every run is taken whatever it lasts: the budget is the user's (--timeout).
        max_cell_ns: u64::MAX,
        counters: args.counters,
        ..RunConfig::default()
    };
    config.known_overheads = Some(measure_overheads(&Monotonic));
    let mut notes: Vec<String> = note.into_iter().collect();
    if let Some(n) = notes.first() {
        crate::term::note_fit(&format!("note: {n}"));
    }
    let setup = args.counters.then(CountingSetup::probe);
    if let Some(s) = &setup {
        for line in s.missing_lines() {
            crate::term::note_fit(&format!("note: {line}"));
        }
    }
    let (what, unit_text) = match &bench.value {
        ExecValue::WallTime => ("wall time", "s, lower is better"),
        ExecValue::Throughput(_) => ("printed throughput", "units/s, higher is better"),
    };
    if text {
        emit(&render::table::wrap(
            &format!(
                "exec `{shown}`: {what} ({unit_text}); {reps} runs per placement after {} warm-up",
                args.warmup
            ),
            render::table::Layout::term(),
        ))?;
        emit(&render::bench::header_line(render::table::Layout::term()))?;
    }
    let started = unix_now_s();
    let info = bench.info();
    let params = bench.params();
    let cells: Vec<CellPlan<'_>> = specs
        .iter()
        .zip(&placements)
        .map(|(spec, placement)| CellPlan {
            bench: &bench,
            info: info.clone(),
            params: Params::from_pairs(params.clone()),
            key: CellKey {
                benchmark: info.name.clone(),
                params: params.clone(),
                conditions: Default::default(),
                placement: spec.clone(),
            },
            placement: Ok(placement.clone()),
            work_unit: Some(("run".into(), 1.0)),
            warmup_samples: Some(args.warmup as usize),
        })
        .collect();
    let stop = AtomicBool::new(false);
    let session_on =
        |topo: &Topology, groups: Vec<Vec<CellPlan<'_>>>, printer: &mut ExecPrinter| {
            Session {
                topo,
                cfg: &config,
                clock: &Monotonic,
                // A command has no client side.
                client_rule: smtlab_placement::ClientRule::Apart,
                counting: setup.as_ref().map(|setup| Counting {
                    setup,
                    backend: &Machine,
                }),
                repeat: 1,
                // One placement after the other, as the runs of a command are usually long.
                interleave: false,
                stop: &stop,
                cell_state: Some(&crate::settings::cell_state),
            }
            .run(groups, printer)
        };
    // The bar counts runs, warm-up included, so its ETA follows the command's own pace.
    let runs_per_cell = reps + args.warmup as usize;
    let mut printer = ExecPrinter {
        bar: crate::term::progress_bar((cells.len() * runs_per_cell) as u64, args.json),
        text,
        reps,
        done_cells: 0,
        runs_per_cell,
        cells: Vec::new(),
        error: None,
    };
    let mut skipped = Vec::new();
    if states.is_empty() {
        // Each placement is a group of its own: measured one after the other.
        session_on(
            &topo,
            cells.into_iter().map(|c| vec![c]).collect(),
            &mut printer,
        );
    } else {
        // Per placement, the states take turns.
        let switch = smtlab_control::SmtSwitch::new(sysfs)?;
        crate::settings::smt_turns(switch, &cells, &states, |cell, on| {
            let word = if on { "on" } else { "off" };
            let topo_now = smtlab_topology::discover(Path::new("/"))
                .context("cannot read the CPU topology after switching SMT")?;
            let cell = crate::settings::smt_cell(cell, on, &topo_now)?;
            if let Err(reason) = &cell.placement {
                eprintln!("note: {} skipped: {reason}", cell.key.placement);
                skipped.push(SkippedCell {
                    key: cell.key.clone(),
                    reason: reason.clone(),
                });
                return Ok(smtlab_runner::session::Ended::Complete);
            }
            emit(&format!("with SMT {word}:\n"))?;
            Ok(session_on(&topo_now, vec![vec![cell]], &mut printer))
        })?;
    }
    printer.bar.finish_and_clear();
    if let Some(e) = printer.error {
        return Err(e);
    }
    let cells = printer.cells;
    let lines = if states.len() == 2 {
        if text {
            emit(&smtlab_report::smt_states::text(&cells))?;
        }
        Vec::new()
    } else {
        crate::verdict::command(&cells, topo.smt_visible())
    };
    if text && !lines.is_empty() {
        emit("\n")?;
        for l in &lines {
            emit(&render::table::wrap(l, render::table::Layout::term()))?;
        }
    }
    if cells.len() == 1 {
        notes.push("one placement only: no yield to compute".into());
    }

    let results = super::finished_run(
        Some("exec"),
        started,
        capture(&topo),
        topo.clone(),
        config,
        notes,
        cells,
        skipped,
    );
    let mut store = Store::open(&db)?;
    let id = store.import_run(&results)?;
    crate::term::note_fit(&super::saved_line(id, &db, args.db.db.as_deref()));
    let stored = store.load_run(id)?;
    if let Some(path) = &args.export_markdown {
        super::export_markdown(path, &stored.cells)?;
    }
    if args.json {
        emit(&String::from_utf8_lossy(&smtlab_report::export::json(
            &stored,
        )))?;
    }
    Ok(())
}

/// Prints each placement's row as it is measured; the first failure ends the command.
struct ExecPrinter {
    /// Progress on standard error (hidden when not a terminal, with --quiet or --json).
    bar: indicatif::ProgressBar,
    /// Print the rows (not when JSON or Markdown fill standard output).
    text: bool,
    reps: usize,
    runs_per_cell: usize,
    /// Placements finished, so the bar stands at their runs whatever the session said.
    done_cells: usize,
    cells: Vec<CellRecord>,
    error: Option<anyhow::Error>,
}

impl SessionObserver for ExecPrinter {
    fn cell_started(&mut self, key: &CellKey) {
        self.bar.set_message(format!("{} (warm-up)", key.placement));
    }

    fn sample(&mut self, key: &CellKey, _round: usize, index: usize) {
        // The warm-up runs are over once the first measured run is in.
        let warmup = self.runs_per_cell - self.reps;
        self.bar
            .set_position((self.done_cells * self.runs_per_cell + warmup + index + 1) as u64);
        self.bar
            .set_message(format!("{} run {}/{}", key.placement, index + 1, self.reps));
    }

    fn measured(&mut self, m: Measured<'_>) -> ControlFlow<()> {
        self.done_cells += 1;
        self.bar
            .set_position((self.done_cells * self.runs_per_cell) as u64);
        let cell = m.record.clone();
        let baseline = self.cells.first();
        let mut text = render::bench::row(&cell, baseline, render::table::Layout::term());
        let cpu: Vec<f64> = cell
            .result
            .samples
            .iter()
            .filter_map(|s| s.cpu_ns.map(|n| n as f64 / 1e9))
            .collect();
        if let Some(s) = stats::summarize(&cpu) {
            text.push_str(&format!(
                "  CPU time per run: {} s (user + system, with children)\n",
                render::bench::num(s.mean)
            ));
        }
        if let Some(c) = &cell.counters {
            text.push_str(&render::table::wrap(
                &format!("  counters: {}", smtlab_report::counters::line(c)),
                render::table::Layout::term(),
            ));
        }
        if let Some(n) = m.counters_note {
            crate::term::note_with(&self.bar, &format!("note: {}: {n}", cell.placement.name));
        }
        if self.text
            && let Err(e) = self.bar.suspend(|| emit(&text))
        {
            self.error = Some(e);
            return ControlFlow::Break(());
        }
        self.cells.push(cell);
        ControlFlow::Continue(())
    }

    fn skipped(&mut self, cell: &SkippedCell) -> ControlFlow<()> {
        // Nothing is stored when a run fails: the reason is the command's error, which
        // already says which run of which placement failed.
        let reason = cell.reason.strip_prefix("exec: ").unwrap_or(&cell.reason);
        let reason = match reason.rfind(" (during ") {
            Some(i) if reason.ends_with(')') => &reason[..i],
            _ => reason,
        };
        self.error = Some(anyhow::anyhow!("{reason}"));
        ControlFlow::Break(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_regexes_are_one_line_errors() {
        let e = throughput_regex("ops/s: ([0-9.]+").unwrap_err().to_string();
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.contains("not a valid regular expression"), "{e}");
        assert!(e.contains("unclosed group"), "{e}");
        let e = throughput_regex("ops/s: [0-9.]+").unwrap_err().to_string();
        assert!(e.contains("no capture group"), "{e}");
    }
}
