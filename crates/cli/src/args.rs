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
    /// Print the smtlab.results/1 JSON (every raw sample) instead of tables.
    #[arg(long)]
    pub json: bool,
}
