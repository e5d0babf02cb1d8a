//! Command-line arguments (clap derive). Only shapes and help text live here; meaning is
//! given in `cmd/`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// What does SMT (Hyper-Threading) do for this workload on this machine?
///
/// smtlab discovers the CPU topology, runs benchmarks under named thread placements
/// (1c1t: one thread alone; 1c2t: two SMT siblings of one core; 2c1t: two cores;
/// all; cores; ...) and reports SMT yields with confidence intervals.
#[derive(Debug, Parser)]
#[command(name = "smtlab", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the CPU topology: packages, cores, SMT siblings, caches, NUMA nodes, SMT state.
    Topo(TopoArgs),
    /// List the standard placements this machine can satisfy, with their exact CPUs.
    Placements(PlacementsArgs),
    /// List the benchmark catalog: name, unit, direction and parameters.
    List(ListArgs),
    /// Measure benchmarks under one or more placements and compare the placements.
    Bench(BenchArgs),
    /// Measure a suite (benchmarks x parameters x placements) into the results database.
    Run(RunArgs),
    /// List the runs in the results database.
    Runs(RunsArgs),
    /// Show or export one run: terminal summary, --json, --csv, or -o report.html.
    Report(ReportArgs),
    /// Compare two runs (two machines, two kernels, SMT off vs on) cell by cell.
    Compare(CompareArgs),
    /// Run your own command under placements (1c1t vs 1c2t) and say what SMT gives it.
    Exec(ExecArgs),
    /// Show SMT control and the online CPUs; `off` / `on` switch SMT (root).
    Smt(SmtArgs),
    /// Co-run interference: each workload next to each other one on the SMT sibling and
    /// on another core, slowdowns against alone (the symbiosis matrix).
    Corun(crate::cmd::corun::CorunArgs),
    /// Single-thread penalty: a fixed piece of work alone and next to each hog.
    Penalty(crate::cmd::corun::PenaltyArgs),
    /// Reported CPU utilisation against capacity: an open-loop load at fixed rates.
    Util(crate::cmd::utilisation::UtilArgs),
}

#[derive(Debug, Args)]
pub struct SysfsArg {
    /// Read a saved tree instead of this machine: DIR/sys/devices/system/cpu/... and
    /// DIR/proc/cpuinfo.
    #[arg(long, value_name = "DIR")]
    pub sysfs: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TopoArgs {
    #[command(flatten)]
    pub sysfs: SysfsArg,
    /// Print the smtlab.topology/1 JSON object instead of tables.
    #[arg(long, conflicts_with = "view")]
    pub json: bool,
    /// What to draw: tables (default), boxes (lstopo-like nesting) or both.
    #[arg(long, value_enum, default_value_t = TopoView::Tables)]
    pub view: TopoView,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TopoView {
    Tables,
    Boxes,
    Both,
}

#[derive(Debug, Args)]
pub struct PlacementsArgs {
    #[command(flatten)]
    pub sysfs: SysfsArg,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Resolve these placements instead of the standard set (e.g. 1c2t, 2P, cpus=0,4,
    /// 2c1t/scatter).
    #[arg(value_name = "PLACEMENT")]
    pub placements: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print the catalog as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Benchmark names (see `smtlab list`), a group (compute, memory, threads, os) or
    /// `all`.
    #[arg(value_name = "NAME", required = true)]
    pub names: Vec<String>,
    /// Placement to measure under; repeat for several (the first is the baseline of the
    /// ratios). Default: 1c1t.
    #[arg(short, long = "placement", value_name = "PLACEMENT")]
    pub placements: Vec<String>,
    /// Benchmark parameter as key=value; repeat for several.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Short samples and the benchmark's quick parameter values.
    #[arg(long)]
    pub quick: bool,
    /// Target half-width of the 95% confidence interval, in percent of the mean.
    #[arg(long, value_name = "PERCENT")]
    pub ci_target: Option<f64>,
    /// Most samples per placement.
    #[arg(long, value_name = "N")]
    pub max_samples: Option<usize>,
    /// Measure every placement N times, the placements taking turns and each round from
    /// a fresh start; pools the samples and shows how far the rounds' medians disagree
    /// (what a second run would see, on a machine whose speed moves over seconds).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Prepare every placement at once and take their samples in turn (one of each,
    /// then the next), so a change of the machine's speed falls on all of them alike and
    /// cancels in their ratios.
    #[arg(long)]
    pub interleave: bool,
    /// Print the smtlab.results/1 JSON (every raw sample) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also record performance counters with each cell (software events always,
    /// hardware ones where the machine has a PMU), /proc/stat time of the placement's
    /// CPUs, and kernel time by system call where tracing is permitted.
    #[arg(long)]
    pub counters: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// quick (seconds: small sizes, short samples), default, or full (adds the thread-
    /// count and working-set sweeps of the papers' figures).
    #[arg(long, default_value = "default", value_name = "SUITE")]
    pub suite: String,
    /// Benchmarks, groups (compute, memory, threads, os) or `all`; comma-separated or
    /// repeated. Default: all.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub bench: Vec<String>,
    /// Placements, comma-separated or repeated (`1c1t,1c2t,cpus=0,4`). Default: the
    /// standard placements this machine can satisfy.
    #[arg(long, value_name = "LIST")]
    pub placements: Vec<String>,
    /// Results database. Default: $SMTLAB_DB, else $XDG_DATA_HOME/smtlab/results.db,
    /// else ~/.local/share/smtlab/results.db.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Finish an interrupted run: the newest unfinished one, or the RUN given.
    #[arg(long, value_name = "RUN", num_args = 0..=1, conflicts_with_all = ["suite", "bench", "placements", "counters"])]
    pub resume: Option<Option<String>>,
    /// Also record performance counters, /proc/stat time and syscall time with each
    /// cell (see `smtlab bench --counters`). A resumed run keeps the setting.
    #[arg(long)]
    pub counters: bool,
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Results database (default as for `run`).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run: `latest` (default), a run id, `-2` for the one before the latest, or a
    /// results JSON file.
    #[arg(default_value = "latest", value_name = "RUN")]
    pub run: String,
    /// Results database (default as for `run`).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Export the run as smtlab.results/1 JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Export one CSV row per cell.
    #[arg(long)]
    pub csv: bool,
    /// Write to FILE instead of standard output; without --json or --csv, FILE is the
    /// self-contained HTML report.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline run (id, `latest`, `-2`, or a results JSON file).
    #[arg(value_name = "A")]
    pub a: String,
    /// Run compared against the baseline.
    #[arg(value_name = "B")]
    pub b: String,
    /// Results database (default as for `run`).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Placements, comma-separated or repeated. Default: 1c1t and 1c2t; on a machine
    /// without SMT, 1c1t and 2c1t.
    #[arg(long, value_name = "LIST")]
    pub placements: Vec<String>,
    /// Measured runs per placement.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    /// Discarded runs per placement before the measured ones.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub warmup: u32,
    /// Measure a number the command prints instead of its wall time: the first capture
    /// group of REGEX in its standard output and error, higher is better (e.g.
    /// 'ops/s: ([0-9.]+)').
    #[arg(long, value_name = "REGEX")]
    pub throughput: Option<String>,
    /// Results database (default as for `run`).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Also record performance counters of the command and its children, and
    /// /proc/stat time of the placement's CPUs.
    #[arg(long)]
    pub counters: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct SmtArgs {
    #[command(flatten)]
    pub sysfs: SysfsArg,
    /// Switch SMT off or on (root). Without --hold or a command the change stays.
    #[arg(value_enum, value_name = "off|on")]
    pub switch: Option<SmtWord>,
    /// Switch, hold for SECS seconds, then put back the state found (also on Ctrl-C,
    /// SIGTERM or kill -9).
    #[arg(
        long,
        value_name = "SECS",
        requires = "switch",
        conflicts_with = "command"
    )]
    pub hold: Option<f64>,
    /// Print the smtlab.smt/1 JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Run CMD with SMT switched, then put back the state found.
    #[arg(last = true, value_name = "CMD", requires = "switch")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SmtWord {
    Off,
    On,
}
