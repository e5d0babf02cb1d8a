//! The settings of `exec`: the command (checked to exist), how its value is read, the
//! placements, the SMT states and the run's settings, settled before anything runs.

use std::path::Path;

use anyhow::{Result, bail};
use regex::Regex;
use smtlab_bench::{Benchmark, Params};
use smtlab_model::placement::Named;
use smtlab_model::{CellKey, ResolvedPlacement, RunConfig, Topology};
use smtlab_runner::counting::CountingSetup;
use smtlab_runner::exec::{CommandBench, ExecValue};
use smtlab_runner::machine::Machine;
use smtlab_runner::session::{CellPlan, Group};

use crate::args::{CommandRunsArgs, ExecArgs};

pub struct Exec {
    pub bench: CommandBench,
    pub topo: Topology,
    pub specs: Vec<String>,
    pub placements: Vec<ResolvedPlacement>,
    pub states: Vec<smtlab_model::keys::SmtState>,
    pub config: RunConfig,
    pub counting: Option<CountingSetup>,
    pub db: std::path::PathBuf,
    /// What this machine leaves out (said at the start and stored with the run).
    pub notes: Vec<String>,
}

pub fn exec(args: &ExecArgs, machine: &dyn Machine) -> Result<Exec> {
    let argv = &args.command;
    if argv.is_empty() || argv[0].is_empty() {
        bail!("no command given: smtlab exec [OPTIONS] -- CMD ARGS");
    }
    let topo = machine.topology()?;
    let (specs, note) = if args.placements.is_empty() {
        default_placements(&topo)
    } else {
        (super::split_placements(&args.placements), None)
    };
    let placements = specs
        .iter()
        .map(|s| super::resolve(s, &topo))
        .collect::<Result<Vec<_>, _>>()?;
    let states = super::switchable_states(&args.smt.smt, &placements, &topo, machine)?;
    let db = crate::settings::db_path(&args.db);
    // A database that exists must be ours before any time is spent; a new one is only
    // created once there is something to store.
    smtlab_store::Store::check_target(&db)?;
    let (bench, mut config) = args.runs.bench(argv)?;
    config.counters = args.counters;
    args.events.apply(&mut config);
    config.known_overheads = Some(smtlab_runner::measure_overheads(machine.clock()));
    let counting = machine.counting_for(&config)?;
    Ok(Exec {
        bench,
        topo,
        specs,
        placements,
        states,
        config,
        counting,
        db,
        notes: note.into_iter().collect(),
    })
}

impl Exec {
    /// Each placement a group of its own (`warmup` discarded runs, then the measured
    /// ones), measured one after the other.
    pub fn groups(&self, warmup: usize) -> Vec<Group<'_>> {
        let (info, params) = (self.bench.info(), self.bench.params());
        self.specs
            .iter()
            .zip(&self.placements)
            .map(|(spec, placement)| {
                vec![CellPlan {
                    work_unit: Some(("run".into(), 1.0)),
                    warmup_samples: Some(warmup),
                    ..CellPlan::new(
                        &self.bench,
                        Params::from_pairs(params.clone()),
                        CellKey::new(&info.name, params.clone(), spec),
                        Ok(placement.clone()),
                    )
                }]
            })
            .collect()
    }
}

impl CommandRunsArgs {
    /// The user's command `argv` as a benchmark (`exec`, `advise -- CMD`): its value
    /// (wall time, or the `--throughput` number it prints), `reps` measured runs after
    /// `warmup` discarded ones, and the settings that take every run whatever it lasts.
    pub(crate) fn bench(&self, argv: &[String]) -> Result<(CommandBench, RunConfig)> {
        // A typo fails here, before anything is printed, measured or stored (`exec` and
        // `advise -- CMD` alike).
        check_program(argv.first().map_or("", String::as_str))?;
        let value = match &self.throughput {
            Some(p) => ExecValue::Throughput(throughput_regex(p)?),
            None => ExecValue::WallTime,
        };
        let reps = self.reps as usize;
        let bench = CommandBench {
            argv: argv.to_vec(),
            value,
            timeout: self.timeout,
            warmup_runs: self.warmup as usize,
            reps,
        };
        let config = RunConfig {
            min_samples: reps,
            max_samples: reps,
            warmup_ns: 0,
            // Every run is taken whatever it lasts: the budget is the user's (--timeout).
            max_cell_ns: u64::MAX,
            ..RunConfig::default()
        };
        Ok((bench, config))
    }
}

/// Compiles `--throughput`: one line on error, and a capture group is required.
pub(crate) fn throughput_regex(pattern: &str) -> Result<Regex> {
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
    let names = |list: &[Named]| list.iter().map(Named::to_string).collect();
    if topo.smt_visible() {
        (names(&[Named::OneCore, Named::Siblings]), None)
    } else if topo.core_count() >= 2 {
        (
            names(&[Named::OneCore, Named::TwoCores]),
            Some("no SMT here: compared 1c1t vs 2c1t only".into()),
        )
    } else {
        (
            names(&[Named::OneCore]),
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
