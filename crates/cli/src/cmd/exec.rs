//! `smtlab exec -- CMD ARGS`: the user's own program under each placement, repeated,
//! with the SMT yield and a plain-language verdict; stored as a run (suite `exec`) so
//! `report` and `compare` work on it.
//!
//! How a run of the command is measured:
//! * The command is started with `std::process::Command`, pinned to the placement's CPUs
//!   between fork and exec (`CommandPinExt::pin_to`, which reads the mask back in the
//!   child and refuses to exec on a mismatch); its children inherit the mask. After the
//!   spawn the affinity is read again: a command that moved itself outside the
//!   placement is an error, since the figure would not belong to the placement.
//! * Wall time is from just before `spawn` to the return of `wait`, on the monotonic
//!   clock; CPU time is the `RUSAGE_CHILDREN` difference over the run (the command and
//!   every descendant it waited for).
//! * Standard input is /dev/null; standard output and error go to one unnamed temporary
//!   file (no reader threads: they would be counted with `--counters`), which
//!   `--throughput` searches.
//! * One warm-up run per placement is discarded (`--warmup`), then `--reps` measured runs.
//!
//! The yield is a ratio of means with a Fieller 95% interval
//! ([`smtlab_model::stats::ratio`]): of the printed throughput with `--throughput`, else
//! of 1/wall time, so above 1 always means faster. The verdict states the delta-method
//! half-width, which is symmetric and close to Fieller's when both sides are precise.

use std::collections::BTreeMap;
use std::io::{Read, Seek};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use regex::Regex;
use smtlab_model::counters::derived::Work;
use smtlab_model::result::{Calibration, StopReason, Warmup};
use smtlab_model::stats::{self, Ratio};
use smtlab_model::{
    CellKey, CellRecord, CellResult, CpuSet, Direction, RESULTS_SCHEMA, ResolvedPlacement,
    RunConfig, RunMeta, RunResults, RunStatus, SampleRecord, Summary, Topology,
};
use smtlab_placement::pin::{CommandPinExt, get_affinity};
use smtlab_runner::counting::CountingSetup;
use smtlab_store::Store;

use super::bench::unix_now_s;
use super::emit;
use crate::args::ExecArgs;
use crate::env::capture;
use crate::render;

/// Unit of the value with `--throughput`: whatever the command prints, per second by
/// convention (higher is better).
const THROUGHPUT_UNIT: &str = "units/s";
/// Longest piece of the command's output quoted in an error.
const QUOTE_MAX: usize = 160;

/// What is measured from each run.
enum Measure {
    WallTime,
    Throughput(Regex),
}

/// The arguments joined as a shell would need them (`sh -c 'i=0; ...'`).
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

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

/// The last non-empty line of `output`, shortened, for error messages.
fn last_line(output: &str) -> Option<String> {
    let line = output.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    let mut s: String = line.chars().take(QUOTE_MAX).collect();
    if line.chars().count() > QUOTE_MAX {
        s.push_str("...");
    }
    Some(s)
}

/// The first capture group of the first match of `re` in `output`, as a number.
fn parse_throughput(re: &Regex, output: &str) -> std::result::Result<f64, String> {
    let Some(caps) = re.captures(output) else {
        let tail = match last_line(output) {
            Some(l) => format!("; its last output line: {l:?}"),
            None => "; it printed nothing".into(),
        };
        return Err(format!(
            "--throughput {:?} did not match the output{tail}",
            re.as_str()
        ));
    };
    let Some(m) = caps.get(1) else {
        return Err(format!(
            "--throughput {:?} matched but its first capture group did not take part in the match",
            re.as_str()
        ));
    };
    let text = m.as_str().trim();
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!(
            "--throughput {:?} captured {text:?}, which is not a number",
            re.as_str()
        )),
    }
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

/// Total user + system CPU time of the waited-for children of this process, in ns.
fn children_cpu_ns() -> Option<u64> {
    // SAFETY: rusage is plain data; getrusage only writes into it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage and a valid `who`.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return None;
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    Some(ns(ru.ru_utime) + ns(ru.ru_stime))
}

/// One run of the command.
struct RunOutcome {
    elapsed_ns: u64,
    cpu_ns: Option<u64>,
    output: String,
}

/// Where a run is in the whole exec, for messages: `placement 1c1t, run 2 of 5`.
fn at(placement: &ResolvedPlacement, what: &str) -> String {
    format!("placement {}, {what}", placement.name)
}

fn run_once(argv: &[String], placement: &ResolvedPlacement, what: &str) -> Result<RunOutcome> {
    let shown = shell_join(argv);
    let mut out = tempfile::tempfile().context("cannot create a temporary file for the output")?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(out.try_clone().context("cannot share the output file")?)
        .stderr(out.try_clone().context("cannot share the output file")?);
    let cpus: CpuSet = placement.cpu_set();
    if placement.pinned() {
        cmd.pin_to(&cpus)?;
    }
    let cpu0 = children_cpu_ns();
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| spawn_error(e, &argv[0], &shown, placement))?;
    let moved = if placement.pinned() {
        match get_affinity(child.id() as libc::pid_t) {
            // A subset is the command narrowing its own affinity: still the placement.
            Ok(now) if !now.is_subset(&cpus) => Some(now),
            _ => None,
        }
    } else {
        None
    };
    let status = child
        .wait()
        .with_context(|| format!("cannot wait for `{shown}`"))?;
    let elapsed_ns = t0.elapsed().as_nanos() as u64;
    let cpu_ns = children_cpu_ns()
        .zip(cpu0)
        .map(|(after, before)| after.saturating_sub(before));
    let mut output = Vec::new();
    out.rewind()
        .and_then(|_| out.read_to_end(&mut output))
        .context("cannot read the command's output back")?;
    let output = String::from_utf8_lossy(&output).into_owned();
    if !status.success() {
        let how = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig}"),
            _ => format!("failed ({status})"),
        };
        let tail = last_line(&output)
            .map(|l| format!("; its last output line: {l:?}"))
            .unwrap_or_default();
        bail!("command `{shown}` {how} ({}){tail}", at(placement, what));
    }
    if let Some(now) = moved {
        bail!(
            "command `{shown}` moved itself to CPUs {now}, outside placement {} (CPUs {cpus}): its time would not belong to the placement",
            placement.name
        );
    }
    Ok(RunOutcome {
        elapsed_ns,
        cpu_ns,
        output,
    })
}

fn spawn_error(
    e: std::io::Error,
    program: &str,
    shown: &str,
    placement: &ResolvedPlacement,
) -> anyhow::Error {
    match e.kind() {
        std::io::ErrorKind::NotFound => not_found(program),
        std::io::ErrorKind::PermissionDenied => {
            anyhow::anyhow!("command `{program}` cannot be run: permission denied")
        }
        _ if e.raw_os_error() == Some(libc::EINVAL) => anyhow::anyhow!(
            "cannot pin `{shown}` to CPUs {} (placement {}): the kernel applied another CPU set",
            placement.cpu_set(),
            placement.name
        ),
        _ => anyhow::anyhow!("cannot start `{shown}`: {e}"),
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

/// Signed percentage with a precision that suits it: `+18%`, `+4.5%`, `-0.3%`.
fn signed_pct(p: f64) -> String {
    if p.abs() >= 10.0 {
        format!("{p:+.0}%")
    } else {
        format!("{p:+.1}%")
    }
}

fn plain_pct(p: f64) -> String {
    if p.abs() >= 10.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// `+18% +/- 3%` from a ratio (above 1 = faster), with "not significant" when the
/// interval includes no change.
fn gain_text(r: &Ratio) -> String {
    let gain = signed_pct((r.ratio - 1.0) * 100.0);
    match r.ci95_half_width_delta {
        Some(hw) => {
            let mut s = format!("{gain} +/- {}", plain_pct(hw * 100.0));
            let includes_one = match (r.ci95_low, r.ci95_high) {
                (Some(lo), Some(hi)) => lo <= 1.0 && 1.0 <= hi,
                _ => (r.ratio - 1.0).abs() <= hw,
            };
            if includes_one {
                s.push_str(" (not significant at 95%)");
            }
            s
        }
        None => format!("{gain} (no interval: fewer than 2 runs per placement)"),
    }
}

/// `1.181x [1.152, 1.211]`.
fn ratio_text(r: &Ratio) -> String {
    match (r.ci95_low, r.ci95_high) {
        (Some(lo), Some(hi)) => format!("{:.3}x [{lo:.3}, {hi:.3}]", r.ratio),
        _ => format!("{:.3}x", r.ratio),
    }
}

/// Samples of the rate: the values themselves, or 1/seconds for wall time.
fn rates(cell: &CellRecord) -> Option<Summary> {
    let xs: Vec<f64> = match cell.direction {
        Direction::Higher => cell.result.samples.iter().map(|s| s.value).collect(),
        Direction::Lower => cell
            .result
            .samples
            .iter()
            .filter(|s| s.value > 0.0)
            .map(|s| 1.0 / s.value)
            .collect(),
    };
    stats::summarize(&xs)
}

/// `rate(b) / rate(a)`, above 1 = `b` faster.
fn speedup(a: &CellRecord, b: &CellRecord) -> Option<Ratio> {
    stats::ratio(&rates(b)?, &rates(a)?)
}

/// The verdict lines for the measured cells (placement names as resolved); `smt` says
/// whether this machine has SMT at all (without it, 2c1t vs 1c1t is all there is).
fn verdicts(cells: &[CellRecord], smt: bool) -> Vec<String> {
    let find = |name: &str| cells.iter().find(|c| c.placement.name == name);
    let mut out = Vec::new();
    if let (Some(one), Some(smt)) = (find("1c1t"), find("1c2t"))
        && let Some(r) = speedup(one, smt)
    {
        out.push(format!("SMT yield (1c2t / 1c1t): {}", ratio_text(&r)));
        out.push(format!(
            "SMT gives {} for this command on this machine",
            gain_text(&r)
        ));
    } else if let (Some(one), Some(two)) = (find("1c1t"), find("2c1t"))
        && let Some(r) = speedup(one, two)
    {
        out.push(format!(
            "2 cores / 1 core (2c1t / 1c1t): {}",
            ratio_text(&r)
        ));
        let prefix = if smt {
            "compared 1c1t vs 2c1t (add 1c2t for the SMT yield)"
        } else {
            "no SMT here: compared 1c1t vs 2c1t only"
        };
        out.push(format!("{prefix}: 2 cores give {}", gain_text(&r)));
    }
    if let (Some(base), Some(smt)) = (find("2c1t"), find("2c2t"))
        && let Some(r) = speedup(base, smt)
    {
        out.push(format!(
            "dual-core SMT gain (2c2t / 2c1t): {}: {}",
            ratio_text(&r),
            gain_text(&r)
        ));
    }
    out
}

fn cell_for(
    measure: &Measure,
    argv: &[String],
    spec: &str,
    placement: &ResolvedPlacement,
    config: &RunConfig,
    warmup: Warmup,
    runs: Vec<(f64, RunOutcome)>,
) -> Result<CellRecord> {
    let (unit, direction) = match measure {
        Measure::WallTime => ("s", Direction::Lower),
        Measure::Throughput(_) => (THROUGHPUT_UNIT, Direction::Higher),
    };
    let mut params = BTreeMap::from([("command".to_string(), shell_join(argv))]);
    if let Measure::Throughput(re) = measure {
        params.insert("throughput".into(), re.as_str().to_string());
    }
    let values: Vec<f64> = runs.iter().map(|(v, _)| *v).collect();
    let summary = stats::summarize(&values).context("no run was measured")?;
    let converged = values.len() >= 2 && summary.ci95_rel <= config.ci_target_rel;
    let wall_ns = runs.iter().map(|(_, r)| r.elapsed_ns).sum::<u64>() + warmup.elapsed_ns;
    let samples = runs
        .into_iter()
        .map(|(value, r)| SampleRecord {
            value,
            iterations: 1,
            elapsed_ns: r.elapsed_ns,
            work: 1.0,
            cpu_ns: r.cpu_ns,
            start_spread_ns: None,
            cpus: Vec::new(),
            metrics: BTreeMap::new(),
        })
        .collect();
    Ok(CellRecord {
        benchmark: "exec".into(),
        group: "exec".into(),
        unit: unit.into(),
        direction,
        params,
        placement_spec: spec.into(),
        placement: placement.clone(),
        result: CellResult {
            iterations: 1,
            calibration: Calibration {
                iterations: 1,
                fixed: true,
                tried: Vec::new(),
                linear: None,
                linearity_ratio: None,
            },
            warmup,
            clock_cost_ns: 0.0,
            loop_cost_ns_per_iter: 0.0,
            subtracted_ns_per_sample: 0.0,
            samples,
            summary,
            converged,
            stop_reason: if converged {
                StopReason::Converged
            } else {
                StopReason::MaxSamples
            },
            cpu_rate: None,
            series: BTreeMap::new(),
            start_spread_ns: None,
            wall_ns,
            config: config.clone(),
            rounds: Vec::new(),
        },
        counters: None,
    })
}

pub fn run(args: &ExecArgs) -> Result<()> {
    let argv = &args.command;
    if argv.is_empty() || argv[0].is_empty() {
        bail!("no command given: smtlab exec [OPTIONS] -- CMD ARGS");
    }
    check_program(&argv[0])?;
    let reps = args.reps as usize;
    let measure = match &args.throughput {
        Some(p) => Measure::Throughput(throughput_regex(p)?),
        None => Measure::WallTime,
    };
    let topo = smtlab_topology::discover(Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    let (specs, note) = if args.placements.is_empty() {
        default_placements(&topo)
    } else {
        (super::run::split_placements(&args.placements), None)
    };
    let placements = specs
        .iter()
        .map(|s| {
            let spec = smtlab_placement::parse(s)?;
            smtlab_placement::resolve(&spec, &topo)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let db = super::db_path(&args.db);
    // A database that exists must be ours before any time is spent; a new one is only
    // created once there is something to store.
    if db.exists() {
        drop(Store::open_existing(&db)?);
    }
    let shown = shell_join(argv);
    let config = RunConfig {
        min_samples: reps,
        max_samples: reps,
        warmup_ns: 0,
        counters: args.counters,
        ..RunConfig::default()
    };
    let mut notes: Vec<String> = note.into_iter().collect();
    if let Some(n) = notes.first() {
        eprintln!("note: {n}");
    }
    let setup = args.counters.then(CountingSetup::probe);
    if let Some(s) = &setup {
        for line in super::counting::notes(s) {
            eprintln!("note: {line}");
        }
    }
    let (what, unit_text) = match &measure {
        Measure::WallTime => ("wall time", "s, lower is better"),
        Measure::Throughput(_) => ("printed throughput", "units/s, higher is better"),
    };
    emit(&format!(
        "exec `{shown}`: {what} ({unit_text}); {reps} runs per placement after {} warm-up\n",
        args.warmup
    ))?;
    emit(&render::bench::header_line())?;
    let started = unix_now_s();
    let mut cells: Vec<CellRecord> = Vec::new();
    for (spec, placement) in specs.iter().zip(&placements) {
        let mut counting = setup.as_ref().map(|s| {
            smtlab_runner::counting::CellCounting::begin(
                s,
                &smtlab_runner::session::sampled_cpus(placement, &topo),
                smtlab_runner::session::spare_cpu(placement, &topo),
            )
        });
        let value_of = |o: &RunOutcome, what: &str| -> Result<f64> {
            match &measure {
                Measure::WallTime => Ok(o.elapsed_ns as f64 / 1e9),
                Measure::Throughput(re) => parse_throughput(re, &o.output)
                    .map_err(|e| anyhow::anyhow!("`{shown}` ({}): {e}", at(placement, what))),
            }
        };
        let mut warmup = Warmup {
            samples: 0,
            elapsed_ns: 0,
        };
        for i in 0..args.warmup {
            let what = format!("warm-up run {} of {}", i + 1, args.warmup);
            let o = run_once(argv, placement, &what)?;
            value_of(&o, &what)?;
            warmup.samples += 1;
            warmup.elapsed_ns += o.elapsed_ns;
        }
        if let Some(c) = counting.as_mut() {
            c.start();
        }
        let mut runs = Vec::with_capacity(reps);
        for i in 0..reps {
            let what = format!("run {} of {reps}", i + 1);
            let o = run_once(argv, placement, &what)?;
            let v = value_of(&o, &what)?;
            runs.push((v, o));
        }
        if let Some(c) = counting.as_mut() {
            c.stop(Some(Work {
                amount: reps as f64,
                unit: "run".into(),
            }));
            // Syscall tracing slows every call down: one extra run after the measured
            // ones, where tracing is available.
            if c.can_trace() {
                c.trace("one extra run after the measured ones", || {
                    run_once(argv, placement, "the traced extra run")
                        .map(drop)
                        .map_err(|e| format!("{e:#}"))
                });
            }
        }
        let mut cell = cell_for(&measure, argv, spec, placement, &config, warmup, runs)?;
        let mut counters_note = None;
        if let Some(c) = counting {
            let window = format!(
                "{reps} runs of the command (warm-up excluded), smtlab and every process it started"
            );
            (cell.counters, counters_note) = match c.finish(&window) {
                Ok(c) => (Some(c), None),
                Err(r) => (None, Some(format!("counters not recorded: {r}"))),
            };
        }
        let baseline = cells.first().map(|c| &c.result.summary);
        emit(&render::bench::row(&cell, baseline))?;
        let cpu: Vec<f64> = cell
            .result
            .samples
            .iter()
            .filter_map(|s| s.cpu_ns.map(|n| n as f64 / 1e9))
            .collect();
        if let Some(s) = stats::summarize(&cpu) {
            emit(&format!(
                "  CPU time per run: {} s (user + system of the command and its children)\n",
                render::bench::num(s.mean)
            ))?;
        }
        if let Some(c) = &cell.counters {
            emit(&format!(
                "  counters: {}\n",
                smtlab_report::counters::line(c)
            ))?;
        }
        if let Some(n) = counters_note {
            emit(&format!("  {n}\n"))?;
        }
        cells.push(cell);
    }
    let lines = verdicts(&cells, topo.smt_visible());
    if !lines.is_empty() {
        emit("\n")?;
        for l in &lines {
            emit(&format!("{l}\n"))?;
        }
    }
    if cells.len() == 1 {
        notes.push("one placement only: no yield to compute".into());
    }

    let results = RunResults {
        schema: RESULTS_SCHEMA.to_string(),
        run: RunMeta {
            id: 0,
            started_unix_s: started,
            finished_unix_s: Some(unix_now_s()),
            status: RunStatus::Finished,
            command_line: std::env::args().collect(),
            suite: Some("exec".into()),
            environment: capture(&topo),
            topology: topo.clone(),
            config,
            plan: cells.iter().map(CellRecord::key).collect::<Vec<CellKey>>(),
            notes,
        },
        cells,
        skipped: Vec::new(),
    };
    let mut store = Store::open(&db)?;
    let id = store.import_run(&results)?;
    eprintln!(
        "saved as run {id} in {}. Report: smtlab report {id}{} -o report.html",
        db.display(),
        args.db
            .db
            .as_ref()
            .map(|p| format!(" --db {}", p.display()))
            .unwrap_or_default()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_takes_the_first_group_of_the_first_match() {
        let re = throughput_regex(r"ops/s: ([0-9.]+)").unwrap();
        assert_eq!(
            parse_throughput(&re, "warming\nops/s: 1234.5\nops/s: 9\n"),
            Ok(1234.5)
        );
        let err = parse_throughput(&re, "nothing here\n\n").unwrap_err();
        assert!(err.contains("did not match"), "{err}");
        assert!(err.contains("\"nothing here\""), "{err}");
        let re = throughput_regex(r"rate: (\S+)").unwrap();
        let err = parse_throughput(&re, "rate: fast").unwrap_err();
        assert!(err.contains("not a number"), "{err}");
    }

    #[test]
    fn bad_regexes_are_one_line_errors() {
        let e = throughput_regex("ops/s: ([0-9.]+").unwrap_err().to_string();
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.contains("not a valid regular expression"), "{e}");
        assert!(e.contains("unclosed group"), "{e}");
        let e = throughput_regex("ops/s: [0-9.]+").unwrap_err().to_string();
        assert!(e.contains("no capture group"), "{e}");
    }

    #[test]
    fn commands_are_shown_as_a_shell_would_take_them() {
        let argv: Vec<String> = ["sh", "-c", "echo 'hi'; x=1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shell_join(&argv), r#"sh -c 'echo '\''hi'\''; x=1'"#);
    }

    #[test]
    fn gains_say_when_they_are_not_significant() {
        let r = Ratio {
            ratio: 1.18,
            ci95_low: Some(1.15),
            ci95_high: Some(1.21),
            ci95_half_width_delta: Some(0.03),
            df: Some(8.0),
        };
        assert_eq!(gain_text(&r), "+18% +/- 3.0%");
        let r = Ratio {
            ratio: 1.004,
            ci95_low: Some(0.99),
            ci95_high: Some(1.02),
            ci95_half_width_delta: Some(0.012),
            df: Some(8.0),
        };
        assert_eq!(gain_text(&r), "+0.4% +/- 1.2% (not significant at 95%)");
    }
}
