//! smtlab's derivations held against counts recorded by `perf stat` on real machines,
//! with the figures perf itself printed beside them: every file in `tests/recorded/`
//! (see its README for where each comes from) is read by `smtlab counters import
//! --json`, and each figure on its `# printed:` line must equal smtlab's within the
//! precision perf printed it with (half a unit in its last digit), widened only where
//! perf counted one event in several groups ([`group_spread`]).
//!
//! The counts are measured facts from Sapphire Rapids, Tiger Lake, Skylake (SMT on),
//! Ice Lake-class CPUs and Zen 4; smtlab itself never ran on those machines. What this
//! holds smtlab's top-down level 1 (each method: Intel perf metrics with and without the
//! dropped-uops and clears corrections, the pre-Ice Lake slot formula at core scope,
//! AMD dispatch slots with SMT contention), AMD's level 2 back-end memory bound, IPC,
//! the branch, L1 and TLB miss rates, and
//! the reading of multiplexed `-M` output, where one event appears once per metric
//! group.

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::prelude::*;
use serde_json::Value;

fn smtlab() -> Command {
    Command::cargo_bin("smtlab").expect("the smtlab binary is built")
}

fn recorded_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recorded")
}

/// A figure perf printed: its name, value and the half-unit of its last printed digit.
#[derive(Debug)]
struct Printed {
    name: String,
    value: f64,
    half_unit: f64,
}

fn printed(text: &str, file: &Path) -> Vec<Printed> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("# printed:"))
        .unwrap_or_else(|| panic!("{} has no `# printed:` line", file.display()));
    line.split_whitespace()
        .map(|kv| {
            let (name, value) = kv.split_once('=').expect("name=value");
            let decimals = value.split_once('.').map_or(0, |(_, d)| d.len());
            Printed {
                name: name.to_string(),
                value: value.parse().expect("a number"),
                half_unit: 0.5 * 10f64.powi(-(decimals as i32)),
            }
        })
        .collect()
}

/// The arguments on the file's `# import:` line (the CPU model where names need it).
fn import_args(text: &str) -> Vec<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("# import:"))
        .map(|a| a.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether every count in the file was taken in user mode only (`:u`), as perf's
/// default run does for an unprivileged user: then smtlab's IPC is `ipc_user`.
fn user_mode_only(text: &str) -> bool {
    let events: Vec<&str> = count_lines(text).map(|(_, event)| event).collect();
    !events.is_empty()
        && events
            .iter()
            .all(|e| e.ends_with(":u") || e.ends_with("/u"))
}

/// `(value, event)` of each count line (`-x,`, or `-x;` where names hold commas).
fn count_lines(text: &str) -> impl Iterator<Item = (f64, &str)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let sep = if l.contains(';') { ';' } else { ',' };
            let f: Vec<&str> = l.split(sep).collect();
            Some((f.first()?.parse().ok()?, *f.get(2)?))
        })
}

/// The largest relative spread, (max - min) / mean, among the lines of an event that
/// `perf stat -M` counted once per metric group. perf divides each metric by the count
/// in its own group (`ls_not_halted_cyc` beside it), smtlab by the lines' mean, so a
/// share may differ from perf's by up to this fraction of itself, beyond rounding.
fn group_spread(text: &str) -> f64 {
    let mut by: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for (value, event) in count_lines(text) {
        by.entry(event).or_default().push(value);
    }
    by.values()
        .filter(|v| v.len() > 1)
        .map(|v| {
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
            (hi - lo) / mean
        })
        .fold(0.0, f64::max)
}

/// smtlab's value of a figure perf printed, in perf's unit (percent for shares), or why
/// smtlab has none.
fn smtlab_figure(v: &Value, name: &str, user_only: bool) -> Result<f64, String> {
    let topdown = |key: &str| {
        v["ratios"]["topdown"][key]
            .as_f64()
            .map(|x| x * 100.0)
            .ok_or_else(|| format!("no topdown {key} in {}", v["ratios"]))
    };
    let ratio = |key: &str| {
        v["ratios"]["ratios"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["key"] == key))
            .and_then(|r| r["value"].as_f64())
            .ok_or_else(|| format!("no ratio {key}"))
    };
    match name.trim_start_matches("tma_") {
        share @ ("retiring" | "bad_speculation" | "frontend_bound" | "backend_bound"
        | "smt_contention") => topdown(share),
        // Level 2 (AMD): the part of back-end bound stalled on memory, and the rest.
        "backend_bound_memory" => topdown("backend_memory"),
        "backend_bound_cpu" => Ok(topdown("backend_bound")? - topdown("backend_memory")?),
        "insn_per_cycle" if user_only => ratio("ipc_user"),
        "insn_per_cycle" => ratio("ipc"),
        "branch_miss_pct" if user_only => {
            Err("smtlab derives no branch misprediction rate from user-mode-only counts".into())
        }
        "branch_miss_pct" => ratio("branch_miss_rate").map(|x| x * 100.0),
        // perf's "% of all L1-dcache accesses" and the like: misses over accesses.
        miss @ ("l1d_miss_pct" | "l1i_miss_pct" | "dtlb_miss_pct" | "itlb_miss_pct") => {
            ratio(&miss.replace("_pct", "_rate")).map(|x| x * 100.0)
        }
        other => Err(format!("no smtlab figure for perf's {other}")),
    }
}

#[test]
fn smtlab_reproduces_the_figures_perf_printed_on_recorded_counts() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(recorded_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();
    assert!(files.len() >= 17, "{files:?}");
    let mut checked = 0;
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let out = smtlab()
            .args(["counters", "import", "--json"])
            .args(import_args(&text))
            .arg(file)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let v: Value = serde_json::from_slice(&out).expect("stdout is JSON");
        let user_only = user_mode_only(&text);
        let spread = group_spread(&text);
        for p in printed(&text, file) {
            let name = file.file_name().unwrap().to_string_lossy();
            match smtlab_figure(&v, &p.name, user_only) {
                Ok(got) => {
                    checked += 1;
                    if (got - p.value).abs() > p.half_unit + got.abs() * spread + 1e-9 {
                        failures.push(format!(
                            "{name}: {} smtlab {got:.4}, perf printed {}",
                            p.name, p.value
                        ));
                    }
                }
                // The one figure perf prints that smtlab does not derive; anything
                // else missing is a failure.
                Err(why) if p.name == "branch_miss_pct" && user_only => {
                    assert!(why.contains("user-mode"), "{why}");
                }
                Err(why) => failures.push(format!("{name}: {}: {why}", p.name)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 74, "only {checked} figures checked");
}

/// The check can fail: perf's `-M` output holds `ls_not_halted_cyc` once per metric
/// group; counting the run's cycles once per group (as summing the lines did) puts every
/// Zen 4 share a quarter of what perf printed.
#[test]
fn repeated_group_lines_are_one_count_not_four() {
    let file = recorded_dir().join("zen4-pipelinel1-skip-literal-v1.csv");
    let text = std::fs::read_to_string(&file).unwrap();
    let cycle_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(",ls_not_halted_cyc,"))
        .collect();
    assert_eq!(cycle_lines.len(), 4);
    let out = smtlab()
        .args(["counters", "import", "--json", "--cpu-model", "zen4"])
        .arg(&file)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let slots = v["ratios"]["topdown"]["slots"].as_f64().unwrap();
    let mean: f64 = cycle_lines
        .iter()
        .map(|l| l.split(',').next().unwrap().parse::<f64>().unwrap())
        .sum::<f64>()
        / 4.0;
    assert!((slots - 6.0 * mean).abs() < 1.0, "{slots} vs 6 x {mean}");
}
