//! Command-line arguments (clap derive). Only shapes and help text live here; meaning is
//! given in `cmd/`.

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, ColorChoice, Parser, Subcommand, ValueEnum};
use smtlab_bench::Suite;
use smtlab_model::keys::CookieScope;

/// What does SMT (Hyper-Threading) do for this workload on this machine?
///
/// smtlab discovers the CPU topology, runs benchmarks under named thread placements
/// (1c1t: one thread alone; 1c2t: two SMT siblings of one core; 2c1t: two cores;
/// all; cores; ...) and reports SMT yields with confidence intervals.
#[derive(Debug, Parser)]
#[command(name = "smtlab", version = env!("SMTLAB_VERSION_LINE"), about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub term: TermArgs,
    /// Measure on a fake machine instead of this one: one core of two SMT siblings
    /// (CPUs 0 and 1) in a sysfs tree that behaves as the kernel's, with a fake PMU; the
    /// work still runs on this host's CPUs 0 and 1, so its figures mean nothing (its
    /// environment says so). The tree is built in DIR when given and empty (kept, for
    /// tests to look at), else in a temporary directory for the process's life.
    #[arg(long, global = true, hide = true, value_name = "DIR", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub fake_machine: Option<PathBuf>,
}

/// How results are shown on the terminal; accepted by every subcommand.
#[derive(Debug, Clone, Args)]
pub struct TermArgs {
    /// Colour: auto (on a terminal unless NO_COLOR is set), always or never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true, value_name = "WHEN")]
    pub color: ColorChoice,
    /// Do not fit tables to the terminal's width: every column in full on one line.
    #[arg(long, global = true)]
    pub wide: bool,
    /// Results only: no notes on standard error (errors are still shown). Honoured by
    /// report, runs, compare, topo, placements, list, completions, man, bench, run and
    /// exec (which then show no progress bar either).
    #[arg(short, long, global = true)]
    pub quiet: bool,
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
    /// Load an HTTP server on this host like wrk: requests/s, MB/s, errors by kind,
    /// latency percentiles (closed loop, or open loop with --rate).
    Load(LoadArgs),
    /// Run the load of a server workload measured on another host: listen for smtlab
    /// there (`--client-hosts`), check its token, send load only where --allow says.
    Agent(AgentArgs),
    /// Print a shell completion script: `smtlab completions bash > /etc/bash_completion.d/smtlab`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff): `smtlab man | man -l -`.
    Man,
    /// Co-run interference: each workload next to each other one on the SMT sibling and
    /// on another core, slowdowns against alone (the symbiosis matrix).
    Corun(CorunArgs),
    /// Single-thread penalty: a fixed piece of work alone and next to each hog.
    Penalty(PenaltyArgs),
    /// Co-run interference predicted from rulers: each workload beside a few calibrated
    /// stressors (N x R + R x N pairs instead of N x N), a model fitted on a few measured
    /// pairs, `--validate K` held-out pairs to check it.
    Predict(PredictArgs),
    /// Reported CPU utilisation against capacity: an open-loop load at fixed rates.
    Util(UtilArgs),
    /// Copy the runs of a results database into a shared one:
    /// `smtlab push results.db --to postgresql://user@host/db`. Runs already there stay
    /// as they are, so pushing again stores nothing twice.
    Push(PushArgs),
    /// Should SMT be on for this workload? Measures what the answer needs and gives one
    /// recommendation with its figures: `advise int-ops`, `advise -- make -j2`,
    /// `advise --server CMD [--client CMD]`.
    Advise(AdviseArgs),
    /// SMT yields over many hosts: every run of a (shared) results database pooled per
    /// CPU model and workload, median with its 95% interval, outlier hosts named, and
    /// the advice counted over hosts: `fleet --db postgresql://user@host/db`.
    Fleet(FleetArgs),
    /// Counts recorded elsewhere: `counters import perf-stat.csv --cpu-model zen4` derives
    /// smtlab's ratios and top-down from `perf stat -x,` or `perf stat -j` output.
    Counters(CountersArgs),
}

#[derive(Debug, Args)]
pub struct CountersArgs {
    #[command(subcommand)]
    pub command: CountersCommand,
}

#[derive(Debug, Subcommand)]
pub enum CountersCommand {
    /// Read `perf stat -x,` CSV or `perf stat -j` JSON recorded on any machine and print
    /// smtlab's ratios, top-down level 1 and per-event rates, as `bench --counters` does.
    Import(CountersImportArgs),
}

#[derive(Debug, Args)]
pub struct CountersImportArgs {
    /// The recorded output (`-` for standard input).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The microarchitecture that counted it, for vendor event names whose meaning
    /// depends on it: skylake-sp, icelake-sp, sapphire-rapids, granite-rapids, zen2,
    /// zen3, zen4, zen5.
    #[arg(long, value_name = "UARCH", value_parser = smtlab_counters::model_events::Uarch::parse)]
    pub cpu_model: Option<smtlab_counters::model_events::Uarch>,
    /// Print JSON (smtlab.counters-import/1: the counts read and what was derived).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV: one `key,label,value` row per figure.
    #[arg(long)]
    pub csv: bool,
    /// The same work recorded alone on its core (1c1t): FILE is then the thread with
    /// its SMT sibling busy (1c2t), and its loss against ALONE is attributed to
    /// front-end, back-end memory and core, bad speculation and SMT contention.
    #[arg(long, value_name = "ALONE")]
    pub against: Option<PathBuf>,
    /// Load-to-use latencies in core cycles measured on the machine that recorded
    /// FILE, for the CPI stack: `l2=14,llc=48,dram=310` (levels l1, l2, llc, dram;
    /// `smtlab report` of a `mem-latency` sweep there gives them). Levels not given
    /// are charged assumed latencies, and the stack says which.
    #[arg(long, value_name = "LEVEL=CYCLES,...", value_parser = smtlab_model::counters::cpi_stack::Latencies::given)]
    pub latencies: Option<smtlab_model::counters::cpi_stack::Latencies>,
}

#[derive(Debug, Args)]
pub struct FleetArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Only runs whose CPU model contains TEXT (case-insensitive).
    #[arg(long, value_name = "TEXT")]
    pub cpu_model: Option<String>,
    /// Pool each host's latest N runs (default 1; with --since alone, every run since).
    /// A host's value for a workload comes from the latest of them holding it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub runs_per_host: Option<u64>,
    /// Only runs started within DURATION before now: seconds, or a number with s, m, h
    /// or d (30d, 12h).
    #[arg(long, value_name = "DURATION", value_parser = parse_since)]
    pub since: Option<std::time::Duration>,
    /// How many hosts should have reported: fewer is said, with how many never did.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub expect: Option<u64>,
    /// The hosts that should have reported: one host name or host id per line (`#`
    /// comments), or an Ansible INI or YAML inventory; those that never did are named.
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// Print the smtlab.fleet/1 JSON document.
    #[arg(long)]
    pub json: bool,
    /// Write to FILE instead of standard output; without --json, FILE is a
    /// self-contained HTML page.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The database to copy runs from: a file (or a postgresql:// URL). Default: as
    /// --db's default ($SMTLAB_DB, else the XDG data file). Read only: nothing in it
    /// changes.
    #[arg(value_name = "FROM")]
    pub from: Option<PathBuf>,
    /// Where to store them: postgresql://user[:password]@host[:port]/database, or another
    /// file. Its schema is created on first use.
    #[arg(long, value_name = "URL")]
    pub to: PathBuf,
    /// Print what was pushed as JSON (source and target ids, runs completed, runs
    /// already there, runs still being measured).
    #[arg(long)]
    pub json: bool,
    /// Say which runs would be copied and which are already there, and copy nothing
    /// (the target is opened read-only; a target that holds nothing yet is not created).
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct SysfsArg {
    /// Read a saved tree instead of this machine: DIR/sys/devices/system/cpu/... and
    /// DIR/proc/cpuinfo.
    #[arg(long, value_name = "DIR")]
    pub sysfs: Option<PathBuf>,
}

/// Where a server workload's client side runs (load generators, pgbench, chat
/// clients). Default: every usable CPU outside the placement's cores.
#[derive(Debug, Clone, Default, Args)]
pub struct ClientArgs {
    /// Run the client side on exactly these CPUs (`3`, `2-3`, `1,3`).
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    pub client_cpus: Option<smtlab_model::CpuSet>,
    /// Let the --client-cpus list overlap the placement (client and server then share
    /// CPUs, which is what is measured).
    #[arg(long, requires = "client_cpus")]
    pub client_share: bool,
    /// Let the client side use SMT siblings of the placement's CPUs.
    #[arg(long, conflicts_with = "client_cpus")]
    pub client_siblings: bool,
    /// Run the load of web workloads (web-static) on other hosts: the smtlab agents
    /// listening there (`10.0.0.2:7400,10.0.0.3:7400`; see `smtlab agent`), started
    /// together, their latency histograms merged. Every CPU here stays the server's, so
    /// `1c1t-up` can be measured. Needs --client-token.
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...",
          conflicts_with_all = ["client_cpus", "client_siblings"], requires = "client_token")]
    pub client_hosts: Vec<String>,
    /// The file holding the agents' token (one line, at least 16 characters, readable by
    /// its owner alone: chmod 600).
    #[arg(long, value_name = "FILE", value_parser = parse_token_file, requires = "client_hosts")]
    pub client_token: Option<smtlab_placement::Token>,
    /// Reach the agents over TLS 1.3 (agents started with `--tls`): the agent's key is
    /// derived from the token, so only an agent holding it completes the handshake, and
    /// nothing after it travels in the clear. See docs/security.md.
    #[arg(long, requires = "client_hosts")]
    pub client_tls: bool,
}

/// A token file: readable by its owner alone (a token others can read is no secret),
/// one line of at least 16 characters.
fn parse_token_file(s: &str) -> Result<smtlab_placement::Token, String> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::path::Path::new(s);
    let meta = std::fs::metadata(path).map_err(|e| format!("token file {s:?}: {e}"))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "token file {s:?} has mode {mode:03o}: others may read it; expected 600 (chmod 600 FILE)"
        ));
    }
    smtlab_placement::Token::from_file(path).map_err(|e| e.to_string())
}

fn parse_cpu_list(s: &str) -> Result<smtlab_model::CpuSet, String> {
    smtlab_model::CpuSet::parse_list(s)
        .map_err(|e| format!("expected a CPU list like 2-3 or 1,3: {e}"))
}

/// The results database of commands that store or read runs.
#[derive(Debug, Clone, Default, Args)]
pub struct DbArg {
    /// Results database: a file, or a PostgreSQL database shared by many hosts
    /// (postgresql://user@host/db). Default: $SMTLAB_DB, else
    /// $XDG_DATA_HOME/smtlab/results.db, else ~/.local/share/smtlab/results.db.
    #[arg(long, value_name = "FILE|URL")]
    pub db: Option<PathBuf>,
}

/// `--smt` of the commands that measure cells (`bench`, `run`, `exec`).
#[derive(Debug, Clone, Default, Args)]
pub struct SmtStatesArg {
    /// Measure with SMT off and with SMT on (`off,on`, `on,off`, `both` or one state),
    /// the states taking turns (per benchmark; `exec`: per placement); the state found
    /// is always put back. Needs root and a switchable smt/control, else the current
    /// state only.
    #[arg(long, value_delimiter = ',', value_name = "STATES")]
    pub smt: Vec<String>,
}

/// `--export-markdown` of the commands that show cells (`bench`, `run`, `report`, `exec`).
#[derive(Debug, Clone, Default, Args)]
pub struct MarkdownArg {
    /// Also write the cells as a Markdown table with their speed-ups to FILE (`-` for
    /// standard output, in place of what the command prints).
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
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
    /// Also write the topology as an SVG picture (nested boxes: packages, NUMA nodes,
    /// caches, cores, CPUs) to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Measure which CPUs behave as SMT siblings (paper 002's pair probing): a thread on
    /// the first CPU and one on each other CPU in turn run a contended integer kernel,
    /// and the first's slowdown against running alone is shown per pair, with the pairs
    /// whose behaviour contradicts the topology (siblings a VM hides, or siblings that do
    /// not share). Takes about 6 x PROBE_MS per other CPU.
    #[arg(long)]
    pub probe_siblings: bool,
    /// Length of each probe measurement, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100, requires = "probe_siblings",
          value_parser = clap::value_parser!(u64).range(10..=10_000))]
    pub probe_ms: u64,
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
    /// Resolve these placements instead of the standard set, separate or comma-separated
    /// (e.g. 1c2t, 2P, cpus=0,4, 2c1t/scatter); exits 1 when one cannot be satisfied here.
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
#[command(
    after_help = "With an SMT pair among the placements (1c1t and 1c2t, 2c1t and 2c2t) the SMT yield and a verdict follow the table.\nYour own web server: smtlab bench web-static -p 1c1t,1c2t --param server=cmd --param cmd='busybox httpd -f -p 127.0.0.1:{port} -h {root}'\nAny other program: smtlab exec -- CMD ARGS"
)]
pub struct BenchArgs {
    /// Benchmark names (see `smtlab list`), a group (compute, memory, threads, os) or
    /// `all`; several separated by spaces or commas.
    #[arg(value_name = "NAME", required = true, value_delimiter = ',')]
    pub names: Vec<String>,
    /// Placement to measure under; repeat or separate by commas for several (the first
    /// is the baseline of the ratios). Default: 1c1t. Without SMT on this machine, 1c2t
    /// and 2c2t beside others are left out with one line.
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
    #[command(flatten)]
    pub events: EventsArgs,
    #[command(flatten)]
    pub smt: SmtStatesArg,
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(flatten)]
    pub markdown: MarkdownArg,
    /// Also store the cells, each as it is measured, as a run (suite `bench`) in this
    /// results database (a file, or postgresql://user@host/db), for `report` and
    /// `compare`. Without it `bench` stores nothing.
    #[arg(long, value_name = "FILE|URL")]
    pub db: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// quick (seconds: small sizes, short samples), default, or full (adds the
    /// thread-count and working-set sweeps of the papers' figures).
    #[arg(long, default_value = "default", value_name = "SUITE",
          value_parser = PossibleValuesParser::new(Suite::ALL.map(Suite::name))
              .map(|s| Suite::parse(&s).expect("one of its names")))]
    pub suite: Suite,
    /// Benchmarks, groups (compute, memory, threads, os) or `all`; comma-separated or
    /// repeated. Default: all.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub bench: Vec<String>,
    /// Placements, comma-separated or repeated (`1c1t,1c2t,cpus=0,4`). Default: the
    /// standard placements this machine can satisfy; for server workloads `cores` and
    /// `all` become `half-cores-1t` and `half-cores-2t` (half the cores, their clients
    /// on the other half) where that is a placement of its own.
    #[arg(long, value_name = "LIST")]
    pub placements: Vec<String>,
    /// A parameter for the workloads that have it, k=v; several values separated by
    /// commas (`server=event,threads,nginx`) or the key repeated are each their own
    /// cells. A literal comma is written `\,`.
    #[arg(long = "param", value_name = "K=V[,V...]")]
    pub params: Vec<String>,
    #[command(flatten)]
    pub smt: SmtStatesArg,
    #[command(flatten)]
    pub db: DbArg,
    /// Finish an interrupted run: the newest unfinished one, or the RUN given.
    #[arg(long, value_name = "RUN", num_args = 0..=1, conflicts_with_all = ["suite", "bench", "placements", "params", "counters", "repeat"])]
    pub resume: Option<Option<String>>,
    /// Also record performance counters, /proc/stat time and syscall time with each
    /// cell (see `smtlab bench --counters`). A resumed run keeps the setting.
    #[arg(long)]
    pub counters: bool,
    #[command(flatten)]
    pub events: EventsArgs,
    /// Measure each benchmark's placements one after the other instead of taking their
    /// samples in turn (the default, which keeps a change of the machine's speed out of
    /// their ratios).
    #[arg(long)]
    pub no_interleave: bool,
    /// Measure every cell N times from fresh instances and pool the rounds (as `bench
    /// --repeat`); every round is stored.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    #[command(flatten)]
    pub client: ClientArgs,
    /// Name the run (`smt-off`, `kernel 6.8`): shown by `smtlab runs`, accepted by
    /// `report` and `compare` in place of the run id while one run carries it.
    #[arg(long, value_name = "TEXT", conflicts_with = "resume", value_parser = parse_label)]
    pub label: Option<String>,
    /// Print the run as stored (smtlab.results/1 JSON) at the end instead of a line per
    /// cell.
    #[arg(long)]
    pub json: bool,
    /// Show the plan and measure nothing: the cells by benchmark, their samples, the
    /// memory they hold at once and the time they take (about, and at most). Nothing
    /// is stored.
    #[arg(long, conflicts_with_all = ["resume", "json", "export_markdown"])]
    pub dry_run: bool,
    #[command(flatten)]
    pub markdown: MarkdownArg,
}

/// A run label, checked before anything is measured.
fn parse_label(s: &str) -> Result<String, String> {
    smtlab_store::check_label(s)
        .map(|()| s.to_string())
        .map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Delete these runs (ids or labels) with everything stored under them; a run that
    /// a live process is measuring is refused, and then nothing is deleted.
    #[arg(long, value_name = "RUN", num_args = 1.., allow_negative_numbers = true, conflicts_with = "json")]
    pub delete: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run: `latest` (default), a run id, `-2` for the one before the latest, a
    /// label (`run --label`), or a results JSON file.
    #[arg(
        default_value = "latest",
        value_name = "RUN",
        allow_negative_numbers = true
    )]
    pub run: String,
    #[command(flatten)]
    pub db: DbArg,
    /// Export the run as smtlab.results/1 JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Export one CSV row per cell (skipped cells too, with counters per unit of work
    /// and the run's environment as columns).
    #[arg(long)]
    pub csv: bool,
    /// Write to FILE instead of standard output; without --json or --csv, FILE is the
    /// self-contained HTML report.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub markdown: MarkdownArg,
    /// Also write the /proc/stat time series of every cell counted with --counters as
    /// CSV to FILE (`-` for standard output, in place of the summary): one row per
    /// sampling interval, user/nice/system/irq/softirq/iowait/idle/steal ticks.
    #[arg(long, value_name = "FILE")]
    pub os_time_csv: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline run (id, `latest`, `-2`, a label, or a results JSON file).
    #[arg(value_name = "A", allow_negative_numbers = true)]
    pub a: String,
    /// Run compared against the baseline.
    #[arg(value_name = "B", allow_negative_numbers = true)]
    pub b: String,
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Print a Markdown table (for pasting into an issue or a review).
    #[arg(long, conflicts_with = "json")]
    pub markdown: bool,
    /// Write a self-contained HTML page (speed-up bars with intervals, geometric means,
    /// the two environments side by side) to FILE.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// What runs of the same setup differ by, added to every row's test and the
    /// overall interval: `auto` (stored repeats of A's or B's setup, else the runs'
    /// rounds, else the default floor), `store`, `rounds`, `floor`, or `none` (each
    /// cell's own interval only).
    #[arg(long, value_enum, default_value_t = BetweenArg::Auto, value_name = "ESTIMATE")]
    pub between_runs: BetweenArg,
}

/// `compare --between-runs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BetweenArg {
    Auto,
    Store,
    Rounds,
    Floor,
    None,
}

/// How a command's runs are taken: `exec`'s command, and `advise`'s (after `--` or
/// `--client`).
#[derive(Debug, Clone, Args)]
pub struct CommandRunsArgs {
    /// Measured runs of the command per placement (`advise`: at least 2).
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub reps: u32,
    /// Discarded runs of the command per placement before the measured ones.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub warmup: u32,
    /// Measure a number the command prints instead of its wall time: the first capture
    /// group of REGEX in its standard output and error, higher is better (e.g.
    /// 'ops/s: ([0-9.]+)').
    #[arg(long, value_name = "REGEX")]
    pub throughput: Option<String>,
    /// Kill a run of the command (and everything it started) after SECS seconds and
    /// stop with an error.
    #[arg(long, value_name = "SECS", value_parser = parse_timeout)]
    pub timeout: Option<std::time::Duration>,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Placements, comma-separated or repeated. Default: 1c1t and 1c2t; on a machine
    /// without SMT, 1c1t and 2c1t.
    #[arg(short = 'p', long, value_name = "LIST")]
    pub placements: Vec<String>,
    #[command(flatten)]
    pub smt: SmtStatesArg,
    #[command(flatten)]
    pub runs: CommandRunsArgs,
    #[command(flatten)]
    pub db: DbArg,
    /// Also record performance counters of the command and its children, and
    /// /proc/stat time of the placement's CPUs.
    #[arg(long)]
    pub counters: bool,
    #[command(flatten)]
    pub events: EventsArgs,
    /// Print the run as stored (smtlab.results/1 JSON) instead of the table and verdict.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub markdown: MarkdownArg,
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
    /// List the tasks that hold a core-scheduling cookie (`PR_SCHED_CORE_GET` on each;
    /// root sees every user's), or why this kernel has no core scheduling; with --json
    /// the smtlab.cookies/1 object.
    #[arg(long, conflicts_with = "switch")]
    pub cookies: bool,
    /// Run CMD with SMT switched, then put back the state found.
    #[arg(last = true, value_name = "CMD", requires = "switch")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SmtWord {
    Off,
    On,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The URL to load: http://HOST:PORT/PATH, HOST a loopback address, localhost or an
    /// address of this host (with --client-hosts: an address the agents allow).
    pub url: String,
    /// Connections, open together.
    #[arg(
        short = 'c',
        long = "connections",
        default_value_t = 10,
        value_name = "CONNS"
    )]
    pub connections: usize,
    /// Measured seconds (after --warmup).
    #[arg(
        short = 'd',
        long = "duration",
        default_value = "10",
        value_name = "SECS"
    )]
    pub duration: String,
    /// Client threads, each with its share of the connections on one epoll loop.
    #[arg(
        short = 't',
        long = "threads",
        default_value_t = 1,
        value_name = "THREADS"
    )]
    pub threads: usize,
    /// CPUs for the client threads (thread i on the i-th, round robin), e.g. 1 or 2-3.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Open loop: requests per second over all connections (`5000` or `5000/s`);
    /// latency counts from each request's scheduled time. Default: closed loop.
    #[arg(long, value_name = "R/s")]
    pub rate: Option<String>,
    /// HTTP/1.1, connections kept alive (the default).
    #[arg(long, conflicts_with = "close")]
    pub keep_alive: bool,
    /// HTTP/1.0, one connection per request (SPECweb96 style).
    #[arg(long)]
    pub close: bool,
    /// Seconds at the start whose responses are not counted.
    #[arg(long, default_value = "0", value_name = "SECS")]
    pub warmup: String,
    /// A request without a complete response after this many seconds is an error.
    #[arg(long, default_value = "10", value_name = "SECS")]
    pub timeout: String,
    /// Microseconds a client thread keeps polling after answers came in before it
    /// sleeps (0: sleep at once). Polling spares the server's CPU the wake-ups of a
    /// sleeping client. Default: 50 with --cpus (CPUs of the client's own), else 0;
    /// give 0 when --cpus shares CPUs or cores with the server.
    #[arg(long, value_name = "US")]
    pub busy_poll: Option<String>,
    /// Print JSON (`smtlab.load/1`) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Let smtlab agents on other hosts run the load, the URL as they reach the server
    /// (`HOST:PORT,...`; see `smtlab agent`): connections shared among them, started
    /// together, histograms merged; -t is then threads in all, shared among them (at
    /// least one each). Needs --client-token.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "HOST:PORT,...",
        conflicts_with = "cpus",
        requires = "client_token"
    )]
    pub client_hosts: Vec<String>,
    /// The file holding the agents' token (readable by its owner alone: chmod 600).
    #[arg(long, value_name = "FILE", value_parser = parse_token_file, requires = "client_hosts")]
    pub client_token: Option<smtlab_placement::Token>,
    /// Reach the agents over TLS 1.3 (agents started with `--tls`): the agent's key is
    /// derived from the token, so only an agent holding it completes the handshake, and
    /// nothing after it travels in the clear. See docs/security.md.
    #[arg(long, requires = "client_hosts")]
    pub client_tls: bool,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Address to listen on for coordinators (`0.0.0.0:7400`, `10.0.0.2:7400`).
    #[arg(long, value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// The file holding the token coordinators must prove they hold (one line, at least
    /// 16 characters, e.g. from `head -c 24 /dev/urandom | base64`; readable by its owner
    /// alone: chmod 600). It never crosses the network: see docs/security.md.
    #[arg(long, value_name = "FILE", value_parser = parse_token_file)]
    pub token: smtlab_placement::Token,
    /// Where load may go: addresses and networks (`10.0.0.1,10.0.1.0/24`). Default:
    /// this host's own addresses only.
    #[arg(long, value_name = "LIST", default_value = "")]
    pub allow: String,
    /// CPUs the load threads are pinned to (thread i on the i-th, round robin).
    /// Default: every CPU this process may run on.
    #[arg(long, value_name = "LIST", value_parser = parse_cpu_list)]
    pub cpus: Option<smtlab_model::CpuSet>,
    /// Longest load accepted, warm-up included, in seconds.
    #[arg(long, default_value_t = 600, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub max_seconds: u64,
    /// Most connections in one load.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub max_connections: usize,
    /// Take coordinators over TLS 1.3 only (they connect with `--client-tls`): the
    /// agent's key is derived from the token, so a coordinator holding the token knows
    /// the one key to accept, and nothing after the handshake travels in the clear.
    #[arg(long)]
    pub tls: bool,
}

fn parse_gbps(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("expected a positive number of GB/s, found `{s}`")),
    }
}

/// `30d`, `12h`, `90m`, `45s` or `45` (seconds): a look-back for `fleet --since`.
/// A `--since` that is not a duration.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a duration; expected a number of seconds, or 30d, 12h, 90m")]
pub struct BadDuration(String);

fn parse_since(s: &str) -> Result<std::time::Duration, BadDuration> {
    let expected = || BadDuration(s.to_string());
    let t = s.trim();
    let (num, unit_s) = [('d', 86_400), ('h', 3_600), ('m', 60), ('s', 1)]
        .into_iter()
        .find_map(|(unit, n)| Some((t.strip_suffix(unit)?, n)))
        .unwrap_or((t, 1));
    let n: u64 = num.parse().map_err(|_| expected())?;
    n.checked_mul(unit_s)
        .map(std::time::Duration::from_secs)
        .ok_or_else(expected)
}

fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x < 1e9 => Ok(std::time::Duration::from_secs_f64(x)),
        _ => Err("expected a positive number of seconds, e.g. 30 or 0.5".into()),
    }
}

#[derive(Debug, Args)]
pub struct CorunArgs {
    /// Catalog benchmarks to pair (default: int-ops fp-ops mem-read mem-latency
    /// null-syscall, one thread each).
    #[arg(value_name = "BENCH")]
    pub names: Vec<String>,
    /// A shell command as a workload, NAME='COMMAND' (repeatable); its value is the wall
    /// time of one run, as `exec` measures it.
    #[arg(long = "cmd", value_name = "NAME=CMD")]
    pub cmds: Vec<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct PredictArgs {
    #[command(flatten)]
    pub workloads: CorunArgs,
    /// Rulers to profile against, comma-separated (default all: int, fp, load-store,
    /// l1d, l2, llc, dram, dram-wide, syscall, frontend; those the topology cannot size
    /// are left out, and dram-wide where its partner would be one CPU).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub rulers: Vec<String>,
    /// Workload pairs measured to fit the model on (default: as many as workloads).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub train: Option<u64>,
    /// Workload pairs measured but kept out of the fit, to check the predictions.
    #[arg(long, default_value_t = 0, value_name = "K", value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub validate: u64,
    /// Seed of the choice of training and held-out pairs.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Say what it would measure and what that costs against the whole matrix, then stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Where a server workload's client side runs (`predict web-static ...`): by default
    /// every usable CPU apart from the co-runs' cores, the same for every cell.
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, Args)]
pub struct PenaltyArgs {
    /// The latency-sensitive task: a catalog benchmark run as a fixed piece of work
    /// (default mem-latency with size=4MiB), unless --cmd is given.
    #[arg(value_name = "TASK")]
    pub task: Option<String>,
    /// The task as a shell command, NAME='COMMAND': one run is one piece of work.
    #[arg(long = "cmd", value_name = "NAME=CMD", conflicts_with = "task")]
    pub cmd: Option<String>,
    /// Hogs run next to the task, comma-separated (default int-ops,fp-ops,mem-read,null-syscall).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub hogs: Vec<String>,
    /// Length of one piece of work of a catalog task, in milliseconds (calibrated once,
    /// alone, then the same for every cell).
    #[arg(long, default_value_t = 10.0, value_name = "MS")]
    pub run_ms: f64,
    /// Runs of the task per cell (the run-time distribution).
    #[arg(long, default_value_t = 30, value_name = "N", value_parser = clap::value_parser!(u32).range(3..=1000))]
    pub samples: u32,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Parameters for the catalog workloads that declare them, k=v (repeatable).
    #[arg(long = "param", value_name = "K=V")]
    pub params: Vec<String>,
    /// Where partners run, comma-separated: sibling, cores (default: both, `sibling,cores`).
    /// Without SMT only cores.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub forms: Vec<String>,
    /// Fewer samples and a shorter budget per cell.
    #[arg(long)]
    pub quick: bool,
    /// Results database (default as for `run`).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also record performance counters with each cell, counted around the measured
    /// workload's own samples (its partner runs on another CPU, outside them).
    #[arg(long)]
    pub counters: bool,
    #[command(flatten)]
    pub events: EventsArgs,
}

/// `--events` and `--dram-peak`: what the counters count beyond the defaults; every
/// command with `--counters` takes them.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Also count these events with the counters (needs --counters), named as perf
    /// takes them: sysfs aliases (`topdown-fe-bound`, `cas_count_read`), raw terms
    /// (`cpu/event=0x3c,umask=0x1,cmask=1/`, `uncore_imc/cas_count_read/`), built-in
    /// model-specific events (`l2-misses`, `uops-issued`, `uops-retired`,
    /// `machine-clears`, `store-buffer-stalls`, `4k-aliasing`), groups `{a,b}` and the
    /// keywords `topdown`, `dram`, `model`. An event this machine lacks is one line.
    #[arg(long, value_name = "LIST", requires = "counters")]
    pub events: Option<String>,
    /// The machine's peak DRAM bandwidth in GB/s (channels x MT/s x 8 bytes / 1000,
    /// e.g. 8 x 4800 x 8 / 1000 = 307.2 per socket), to show `--events dram` as a
    /// share of it (bus utilisation).
    #[arg(long, value_name = "GBPS", requires = "events", value_parser = parse_gbps)]
    pub dram_peak: Option<f64>,
}

#[derive(Debug, Args)]
pub struct UtilArgs {
    /// Placement of the load (default 1c2t; 2c1t where there is no SMT).
    #[arg(long, short = 'p', value_name = "PLACEMENT")]
    pub placement: Option<String>,
    /// Steps from 1/N of the maximum to all of it.
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=50))]
    pub steps: u32,
    /// Length of one step, milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS", value_parser = clap::value_parser!(u64).range(50..=60_000))]
    pub step_ms: u64,
    /// Steps measured per rate.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=100))]
    pub samples: u32,
    /// CPU time of one job, microseconds (calibrated alone on the placement's first CPU).
    #[arg(long, default_value_t = 200, value_name = "US", value_parser = clap::value_parser!(u64).range(10..=100_000))]
    pub job_us: u64,
    /// Measure the curve with SMT switched off and on (root, SMT switchable), e.g.
    /// `--smt off,on`; the state found is put back afterwards.
    #[arg(long, value_delimiter = ',', value_name = "off,on")]
    pub smt: Vec<String>,
    /// Results database (default as for `run`).
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Print the curve as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also record performance counters with each step, counted around its own samples.
    #[arg(long)]
    pub counters: bool,
}

#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// The catalog workload to advise on (`smtlab list`); or give your command after
    /// `--`, or your server with --server.
    #[arg(
        value_name = "WORKLOAD",
        required_unless_present_any = ["command", "server"],
        conflicts_with_all = ["command", "server"]
    )]
    pub workload: Option<String>,
    /// Parameters of the catalog workload, k=v (repeatable); with --server alone, of
    /// the load (web-static's or, with --slo, web-slo's: conns, duration, dataset, ...).
    #[arg(long = "param", value_name = "K=V")]
    pub params: Vec<String>,
    /// Your own server: a shell command started on each placement with `{port}` filled
    /// in (a free port; or give --port). Without --client, smtlab's HTTP load drives it
    /// (as web-static's server=cmd; `{root}` is the file set to serve); with --slo its
    /// capacity at the target is found (web-slo).
    #[arg(long, value_name = "CMD", conflicts_with = "command")]
    pub server: Option<String>,
    /// Your own load tool for --server, run once per sample on CPUs apart from the
    /// placement, `{port}` filled in. A sample is its wall time, so give it a fixed
    /// amount of work (`pgbench -p {port} -t 2000`); or, with --throughput REGEX, the
    /// number the regex's first group captures in its output (`tps = ([0-9.]+)`).
    #[arg(long, value_name = "CMD", requires = "server")]
    pub client: Option<String>,
    /// The port your --server listens on, when its command has no `{port}`.
    #[arg(long, value_name = "PORT", requires = "server", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    #[command(flatten)]
    pub client_cpus: ClientArgs,
    /// Also measure the single-thread cost: the workload, one thread, alone and next to
    /// busy siblings (int-ops, fp-ops, mem-read, null-syscall), as `penalty` does.
    #[arg(long)]
    pub penalty: bool,
    /// Also measure the partners: the workload, one thread, alone and next to each of
    /// int-ops, fp-ops, mem-read, mem-latency and null-syscall on its SMT sibling, as a
    /// row of `corun`'s matrix (which kinds of work it shares a core with well).
    #[arg(long, conflicts_with = "penalty")]
    pub partners: bool,
    /// Also measure the headroom: an open-loop load at 25, 50, 75 and 100% of its
    /// maximum (as `smtlab util`), what the OS reports busy against what is left.
    #[arg(long)]
    pub headroom: bool,
    /// Measure with SMT off and with SMT on (`off,on` or `both`), the states taking
    /// turns; the state found is put back. Needs root and a switchable smt/control, else
    /// the current state only. A server compares half the cores (`half-cores-1t` off,
    /// `half-cores-Kt` on) where the machine has them: `all` leaves its clients no CPU.
    #[arg(long, value_delimiter = ',', value_name = "STATES")]
    pub smt: Vec<String>,
    /// A server under smtlab's load (web-static, web-slo, --server CMD): the latency at
    /// load, open-loop p50/p99/p99.9 at these shares (percent) of the capacity measured
    /// on 1c1t (and on half-cores-1t; with --slo, the capacity at the target), the same
    /// offered rates on each side of the SMT question; shown beside the answer, never
    /// deciding it [default: 25,50,75,90].
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "PCT,...",
        conflicts_with = "no_sweep"
    )]
    pub sweep: Option<Vec<f64>>,
    /// Leave out a server's latency sweep (measured by default).
    #[arg(long)]
    pub no_sweep: bool,
    /// The price of SMT safety: the workload with SMT on, with core scheduling (its
    /// tasks in a cookie of their own, per `thread`, `process`, `pgroup` or `cgroup`)
    /// and with SMT off, the forced idle core scheduling cost, and which protection
    /// costs less here (a server also at a light load; with --partners, also each
    /// partner beside it on its sibling as a distrusting tenant). Switches SMT (and
    /// schedstats on, to count forced idle): needs root [default: thread].
    #[arg(
        long,
        value_name = "SCOPE",
        num_args = 0..=1,
        default_missing_value = "thread",
        value_parser = PossibleValuesParser::new(CookieScope::ALL.map(CookieScope::name))
            .map(|s| CookieScope::parse(&s).expect("one of its names")),
        conflicts_with_all = ["smt", "penalty", "headroom", "sweep"]
    )]
    pub security: Option<CookieScope>,
    /// The latency target, for workloads measured at one (`web-slo`): the capacity at
    /// it on each side decides, e.g. `--slo p99=5ms`.
    #[arg(long, value_name = "pNN=TIME")]
    pub slo: Option<String>,
    /// Fewer samples and a shorter budget per cell (catalog workloads).
    #[arg(long)]
    pub quick: bool,
    /// Your command: a shell command run untimed before each run (e.g. `make clean`).
    #[arg(long, value_name = "CMD", requires = "command")]
    pub prepare: Option<String>,
    #[command(flatten)]
    pub runs: CommandRunsArgs,
    #[command(flatten)]
    pub db: DbArg,
    /// Print the advice as smtlab.advice/1 JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the advice as Markdown to FILE (`-` for standard output, in place of
    /// the text).
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// Your command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}
