//! What every command settles the same way, in one place: the machine it measures on
//! ([`Host`]: this one, or the fake of the hidden `--fake-machine`), the time, the stop
//! flag, the benchmarks named, the placement lists, the SMT states asked for and whether
//! the machine can switch them; and each measuring command's own settings
//! ([`bench`], [`exec`], [`run`], [`load`], co-runs and `util` here). Commands import
//! from here, never from each other.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use smtlab_bench::Benchmark;
use smtlab_model::keys::SmtState;
use smtlab_runner::machine::{FakeMachine, Machine, RealMachine, Tool};

pub mod advise;
pub mod bench;
pub mod exec;
pub mod load;
pub mod run;
pub mod stored;

/// Seconds since the Unix epoch (0 before it).
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The one stop of every measuring command: Ctrl-C, kill, a closed terminal and Ctrl-\
/// all set its flag, and the session ends at its next event (the cells measured so far
/// are kept; a sample that the stop makes fail is a stop, not the workload's failure). A
/// sample that runs on past [`STOP_GRACE`] (a long shell command) has its processes
/// killed, so the stop does not wait for it. The command then exits with 128 plus the
/// signal's number, as a shell reports a process the signal ended (130 for Ctrl-C, 143
/// for SIGTERM).
#[derive(Debug, Clone, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
    signal: Arc<std::sync::atomic::AtomicI32>,
}

impl Stop {
    /// Installs the handlers (a thread that waits for the signals).
    pub fn on_signals() -> Result<Stop> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        use std::sync::atomic::Ordering::Relaxed;
        let stop = Stop::default();
        let stops = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];
        // The signal and the flag are set in the handler itself, before any measuring
        // thread's call the signal interrupts returns: a failure it causes is then seen as
        // the stop, and a session that ends on the flag finds which signal set it (set by
        // the thread below instead, a busy host could end the run first, as finished).
        for sig in stops {
            let (flag, signal) = (stop.flag.clone(), stop.signal.clone());
            // SAFETY: the action only stores to atomics, which is async-signal-safe.
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    // The first signal names the stop; a second one changes nothing.
                    let _ = signal.compare_exchange(0, sig, Relaxed, Relaxed);
                    flag.store(true, Relaxed);
                })
            }
            .context("cannot install the signal handlers")?;
        }
        let mut signals = signal_hook::iterator::Signals::new(stops)
            .context("cannot install the signal handlers")?;
        std::thread::Builder::new()
            .name("smtlab-signals".into())
            .spawn(move || {
                for _ in signals.forever() {
                    std::thread::sleep(STOP_GRACE);
                    smtlab_bench::process::clean_up();
                }
            })
            .context("cannot start the signal thread")?;
        Ok(stop)
    }

    /// How an SMT switch is protected under this stop: by the guardian should smtlab be
    /// killed, and not by the switch's own signal handlers, which would restore and die
    /// of the signal before the session ends and says what it kept.
    pub fn protection() -> smtlab_control::guard::Protection {
        smtlab_control::guard::Protection {
            guardian: true,
            signals: false,
        }
    }

    /// The flag a session watches.
    pub fn flag(&self) -> &AtomicBool {
        &self.flag
    }

    /// Whether a signal stopped the command.
    pub fn signalled(&self) -> bool {
        self.signal.load(std::sync::atomic::Ordering::Relaxed) != 0
    }

    /// The exit code of a command this stop ended: 128 plus the signal's number.
    pub fn exit_code(&self) -> std::process::ExitCode {
        let sig = self.signal.load(std::sync::atomic::Ordering::Relaxed);
        std::process::ExitCode::from(128u8.saturating_add(sig.clamp(0, 127) as u8))
    }

    /// How a command that measured `measured_cells` ends: with success, or when a signal
    /// stopped it, with the line saying so on standard error and [`Stop::exit_code`].
    pub fn ended(&self, measured_cells: usize) -> std::process::ExitCode {
        let sig = self.signal.load(std::sync::atomic::Ordering::Relaxed);
        if sig == 0 {
            return std::process::ExitCode::SUCCESS;
        }
        let name = signal_hook::low_level::signal_name(sig).unwrap_or("a signal");
        crate::term::note_fit(&format!(
            "interrupted by {name}: {measured_cells} cells measured"
        ));
        self.exit_code()
    }
}

/// How long a stop waits for the samples in progress before killing their processes.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// `all`, a group name (`compute`, `memory`, `threads`, `os`) or benchmark names.
pub fn select(names: &[String]) -> Result<Vec<Box<dyn Benchmark>>> {
    let mut out: Vec<Box<dyn Benchmark>> = Vec::new();
    for name in names {
        let group: Vec<Box<dyn Benchmark>> = smtlab_runner::catalog::all()
            .into_iter()
            .filter(|b| name == "all" || b.info().group == *name)
            .collect();
        if group.is_empty() {
            let unknown = || anyhow::anyhow!(smtlab_runner::catalog::unknown("benchmark", name));
            out.push(smtlab_runner::catalog::find(name).ok_or_else(unknown)?);
        } else {
            out.extend(group);
        }
    }
    Ok(out)
}

/// `1c1t,cpus=0,4-5,2c1t` -> `1c1t`, `cpus=0,4-5`, `2c1t`: after `cpus=`, items made of
/// digits and dashes continue the CPU list instead of starting a placement.
pub fn split_placements(args: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for arg in args {
        let mut in_cpus = false;
        for part in arg.split(',') {
            let is_cpu_item =
                !part.is_empty() && part.chars().all(|c| c.is_ascii_digit() || c == '-');
            let continues = in_cpus && is_cpu_item;
            match out.last_mut() {
                Some(last) if continues => {
                    last.push(',');
                    last.push_str(part);
                }
                _ => {
                    in_cpus = part.starts_with("cpus=");
                    out.push(part.to_string());
                }
            }
        }
    }
    out
}

/// A placement as written (`1c2t`, `cpus=0,4`), resolved on `topo`.
pub fn resolve(
    text: &str,
    topo: &smtlab_model::Topology,
) -> Result<smtlab_model::ResolvedPlacement, smtlab_placement::PlacementError> {
    smtlab_placement::parse(text).and_then(|spec| smtlab_placement::resolve(&spec, topo))
}

/// The states `--smt` asks for that can be measured on `machine`: none, said in one
/// line, where SMT cannot be switched (the current state is measured); an error beside
/// 1c1t-up.
pub fn switchable_states(
    given: &[String],
    placements: &[smtlab_model::ResolvedPlacement],
    topo: &smtlab_model::Topology,
    machine: &dyn Machine,
) -> Result<Vec<SmtState>> {
    let up = placements.iter().any(|p| p.is_uniprocessor());
    let (states, refused) = states_here(given, up, topo, machine)?;
    crate::term::notes(refused);
    Ok(states)
}

/// [`switchable_states`] with the note left to the caller (`run` keeps it with the
/// run); `up`: a placement is 1c1t-up.
pub fn states_here(
    given: &[String],
    up: bool,
    topo: &smtlab_model::Topology,
    machine: &dyn Machine,
) -> Result<(Vec<SmtState>, Option<String>)> {
    let states = smtlab_runner::experiment::smt::parse_states(given)?;
    if !states.is_empty() && up {
        bail!("--smt with 1c1t-up: both take CPUs offline; measure them in separate runs");
    }
    Ok(
        match smtlab_runner::experiment::smt::switchable(machine, &states) {
            Ok(states) => (states, None),
            Err(why) => (
                Vec::new(),
                Some(format!(
                    "--smt {}: not switched ({why}); measuring the current state only (smt/control: {})",
                    given.join(","),
                    topo.smt.control.as_deref().unwrap_or("absent")
                )),
            ),
        },
    )
}

/// The machine every command measures on, chosen once: this one, or with the hidden
/// `--fake-machine[=DIR]` a [`FakeMachine`] whose tree lives in DIR or, without one, in
/// a temporary directory removed when smtlab ends.
pub struct Host {
    machine: Box<dyn Machine>,
    _tree: Option<tempfile::TempDir>,
}

impl Host {
    pub fn new(fake: Option<&Path>) -> Result<Host> {
        let Some(dir) = fake else {
            return Ok(Host {
                machine: Box::new(RealMachine),
                _tree: None,
            });
        };
        let (root, tree) = if dir.as_os_str().is_empty() {
            let tree = tempfile::Builder::new()
                .prefix("smtlab-fake-machine-")
                .tempdir()
                .context("cannot create the fake machine's directory")?;
            (tree.path().to_path_buf(), Some(tree))
        } else {
            (dir.to_path_buf(), None)
        };
        let fake = FakeMachine::at(&root).with_context(|| {
            format!(
                "cannot build the fake machine in {}",
                smtlab_model::quote::path(&root)
            )
        })?;
        Ok(Host {
            machine: Box::new(fake),
            _tree: tree,
        })
    }

    pub fn machine(&self) -> &dyn Machine {
        self.machine.as_ref()
    }
}

/// This program, as every run's environment names it.
pub fn tool() -> Tool {
    Tool {
        version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: option_env!("SMTLAB_GIT_COMMIT").map(str::to_string),
    }
}

/// A run of `suite` on `machine` with these settings, as stored before its first cell:
/// running, started now, its environment read now.
pub fn fresh_run(
    suite: &str,
    machine: &dyn Machine,
    topology: &smtlab_model::Topology,
    config: &smtlab_model::RunConfig,
    notes: Vec<String>,
    plan: Vec<smtlab_model::CellKey>,
) -> smtlab_model::RunMeta {
    smtlab_model::RunMeta {
        id: 0,
        started_unix_s: unix_now_s(),
        finished_unix_s: None,
        status: smtlab_model::RunStatus::Running,
        command_line: smtlab_store::command_line(),
        suite: Some(suite.into()),
        environment: machine.environment(topology, &tool()),
        topology: topology.clone(),
        config: config.clone(),
        plan,
        notes,
    }
}

/// The run's settings of `--quick` (short samples) or not.
pub fn run_config(quick: bool) -> smtlab_model::RunConfig {
    match quick {
        true => smtlab_model::RunConfig::quick(),
        false => smtlab_model::RunConfig::default(),
    }
}

/// The settings of `corun` and `penalty`: the machine, its CPUs and forms, the notes on
/// what it cannot do, and the run's settings, settled before anything is measured.
pub struct CorunSettings {
    pub topo: smtlab_model::Topology,
    pub pair: smtlab_runner::corun::CpuPair,
    pub forms: Vec<(smtlab_model::keys::Form, u32)>,
    pub notes: Vec<String>,
    pub cfg: smtlab_model::RunConfig,
    /// Where a server workload's client side runs (only `predict` measures them).
    pub client_rule: smtlab_placement::ClientRule,
}

pub fn corun_settings(
    common: &crate::args::CommonArgs,
    machine: &dyn Machine,
) -> Result<CorunSettings> {
    let topo = machine.topology()?;
    let pair = smtlab_runner::corun::cpu_pair(&topo).map_err(anyhow::Error::msg)?;
    let (forms, notes) = smtlab_runner::experiment::corun::forms(&common.forms, &pair)?;
    if let Some(db) = &common.db {
        smtlab_store::Store::check_target(db)?;
    }
    let mut cfg = run_config(common.quick);
    smtlab_runner::config::validate(&cfg)?;
    cfg.known_overheads = Some(smtlab_runner::measure_overheads(machine.clock()));
    cfg.counters = common.counters;
    common.events.apply(&mut cfg);
    Ok(CorunSettings {
        topo,
        pair,
        forms,
        notes,
        cfg,
        client_rule: Default::default(),
    })
}

/// The settings of `penalty`: those of the co-runs, the samples asked for, the task (a
/// catalog benchmark or a command) and the hogs.
pub fn penalty_settings(
    args: &crate::args::PenaltyArgs,
    machine: &dyn Machine,
) -> Result<(
    CorunSettings,
    smtlab_runner::experiment::corun::Workload,
    Vec<smtlab_runner::experiment::corun::Workload>,
)> {
    let (task, hogs) = smtlab_runner::experiment::corun::penalty_workloads(
        args.task.as_deref(),
        args.cmd.as_deref(),
        &args.hogs,
        &args.common.params,
    )?;
    if !(args.run_ms.is_finite() && args.run_ms > 0.0 && args.run_ms <= 10_000.0) {
        bail!(
            "--run-ms {}: expected a number of milliseconds in (0, 10000]",
            args.run_ms
        );
    }
    let mut s = corun_settings(&args.common, machine)?;
    if let Err(why) = &s.pair.sibling {
        s.notes.retain(|n| !n.starts_with("sibling form"));
        s.notes.push(format!(
            "single-thread penalty not measured ({why}); shown instead: the task alone and next to each hog on another core"
        ));
    }
    s.cfg.min_samples = args.samples as usize;
    s.cfg.max_samples = args.samples as usize;
    Ok((s, task, hogs))
}

/// The settings of `util`: the database, the SMT states it can measure here (the state
/// found when none can be switched, said in a note), the topology found, the run's
/// settings and the notes on what this machine cannot do.
pub struct UtilSettings {
    pub db: std::path::PathBuf,
    pub states: Vec<SmtState>,
    pub topo0: smtlab_model::Topology,
    pub cfg: smtlab_model::RunConfig,
    pub notes: Vec<String>,
}

pub fn util_settings(args: &crate::args::UtilArgs, machine: &dyn Machine) -> Result<UtilSettings> {
    let mut states = smtlab_runner::experiment::utilisation::parse_states(&args.smt)?;
    let db = args.db.clone().unwrap_or_else(smtlab_store::default_path);
    smtlab_store::Store::check_target(&db)?;
    let mut notes: Vec<String> = Vec::new();
    if let Some(why) = (!states.is_empty())
        .then(|| machine.switch_refusal())
        .flatten()
    {
        notes.push(format!(
            "--smt {}: not measured ({why}); measuring the state found only",
            args.smt.join(",")
        ));
        states.clear();
    }
    if states.is_empty() {
        states.push(SmtState::AsFound);
    }
    let topo0 = machine.topology()?;
    if args.placement.is_none() && states == [SmtState::AsFound] && !topo0.smt_visible() {
        let why = format!(
            "no SMT visible (smt/control: {}): the load runs on 2c1t, not 1c2t",
            topo0.smt.control.as_deref().unwrap_or("absent")
        );
        // One line for everything this machine cannot do.
        notes = vec![notes.pop().map_or(why.clone(), |n| format!("{n}; {why}"))];
    }
    // Resolve the placement of the state found before anything changes: a typo fails first.
    smtlab_runner::experiment::utilisation::placement(args.placement.as_deref(), &topo0)?;
    let samples = args.samples as usize;
    let mut cfg = smtlab_model::RunConfig {
        min_samples: samples,
        max_samples: samples,
        warmup_ns: 0,
        ..smtlab_model::RunConfig::default()
    };
    smtlab_runner::config::validate(&cfg)?;
    cfg.known_overheads = Some(smtlab_runner::measure_overheads(machine.clock()));
    cfg.counters = args.counters;
    Ok(UtilSettings {
        db,
        states,
        topo0,
        cfg,
        notes,
    })
}

impl crate::args::EventsArgs {
    /// Writes the events asked for into a run's settings.
    pub fn apply(&self, cfg: &mut smtlab_model::RunConfig) {
        cfg.counter_events = self.events.clone();
        cfg.dram_peak_gb_per_s = self.dram_peak;
    }
}

/// The topology of the machine, or of the saved tree given with `--sysfs`.
pub fn load_topology(
    arg: &crate::args::SysfsArg,
    machine: &dyn Machine,
) -> Result<smtlab_model::Topology> {
    let Some(root) = arg.sysfs.as_deref() else {
        return Ok(machine.topology()?);
    };
    // The error names the file at fault, which is under `root`: `root` is not repeated.
    smtlab_topology::discover(root).context("cannot read the CPU topology")
}

/// The client-side rule of `--client-cpus`, `--client-share`, `--client-siblings` and
/// `--client-hosts`.
pub fn client_rule(args: &crate::args::ClientArgs) -> smtlab_placement::ClientRule {
    use smtlab_placement::ClientRule;
    if let Some(token) = &args.client_token
        && !args.client_hosts.is_empty()
    {
        return ClientRule::Remote(smtlab_placement::RemoteClients {
            hosts: args.client_hosts.clone(),
            token: token.clone(),
            tls: args.client_tls,
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fake_machine_lives_in_a_temporary_tree_for_the_process_or_in_the_dir_given() {
        let host = Host::new(Some(Path::new(""))).unwrap();
        let root = host.machine().root().to_path_buf();
        assert!(root.join("sys/devices/system/cpu/cpu1/online").is_file());
        assert_eq!(host.machine().topology().unwrap().cpus.to_vec(), [0, 1]);
        drop(host);
        assert!(!root.exists(), "the temporary tree goes with smtlab");
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("m");
        drop(Host::new(Some(&kept)).unwrap());
        assert!(kept.join("sys/devices/system/cpu/smt/control").is_file());
        assert_eq!(Host::new(None).unwrap().machine().root(), Path::new("/"));
    }

    #[test]
    fn a_signal_is_named_by_the_time_its_handler_returns() {
        // A session that ends on the flag at once must find the signal, or a stopped run
        // would be marked finished. Left to a thread, it is there only most times.
        for _ in 0..50 {
            let stop = Stop::on_signals().unwrap();
            // SAFETY: raise(3) runs the handlers in this thread before it returns.
            assert_eq!(unsafe { libc::raise(libc::SIGQUIT) }, 0);
            assert!(stop.flag().load(std::sync::atomic::Ordering::Relaxed));
            assert!(stop.signalled());
            assert_eq!(stop.exit_code(), std::process::ExitCode::from(131));
        }
    }

    #[test]
    fn placement_lists_keep_cpu_lists_whole() {
        let v = split_placements(&["1c1t,cpus=0,4-5,2c1t".into(), "all".into()]);
        assert_eq!(v, ["1c1t", "cpus=0,4-5", "2c1t", "all"]);
    }
}
