//! What every command settles the same way, in one place: the time, the stop flag, the
//! benchmarks named, the placement lists, the SMT states asked for and whether SMT can be
//! switched here, and the turns of the SMT states. Commands import from here, never from
//! each other.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use smtlab_bench::Benchmark;
use smtlab_control::Sysfs;
use smtlab_runner::session::{CellPlan, Ended};

/// Seconds since the Unix epoch (0 before it).
pub fn unix_now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The one stop flag: Ctrl-C, kill, a closed terminal and Ctrl-\ all set it, and the
/// session ends at its next event (the cells measured so far are kept). A sample that
/// runs on past [`STOP_GRACE`] (a long shell command) has its processes killed, so the
/// stop does not wait for it.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])
        .context("cannot install the signal handlers")?;
    let flag = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("smtlab-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(STOP_GRACE);
                smtlab_bench::process::clean_up();
            }
        })
        .context("cannot start the signal thread")?;
    Ok(stop)
}

/// How long a stop waits for the samples in progress before killing their processes.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Why SMT cannot be switched here, if it cannot.
pub fn switch_refusal(sysfs: &Sysfs) -> Option<String> {
    let state = match smtlab_control::state::read(sysfs) {
        Ok(s) => s,
        Err(e) => return Some(e.to_string()),
    };
    let Some(control) = &state.control else {
        return Some("the kernel has no smt/control".into());
    };
    if let Some(e) = control.refusal() {
        return Some(e.to_string());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("switching SMT needs root".into());
    }
    None
}

/// `all`, a group name (`compute`, `memory`, `threads`, `os`) or benchmark names.
pub fn select(names: &[String]) -> Result<Vec<Box<dyn Benchmark>>> {
    let mut out: Vec<Box<dyn Benchmark>> = Vec::new();
    for name in names {
        let group: Vec<Box<dyn Benchmark>> = smtlab_runner::catalog::all()
            .into_iter()
            .filter(|b| name == "all" || b.info().group == *name)
            .collect();
        if group.is_empty() {
            out.push(find(name)?);
        } else {
            out.extend(group);
        }
    }
    Ok(out)
}

fn find(name: &str) -> Result<Box<dyn Benchmark>> {
    match smtlab_runner::catalog::find(name) {
        Some(b) => Ok(b),
        None => bail!(
            "unknown benchmark {name:?}; available: {}",
            smtlab_runner::catalog::names().join(", ")
        ),
    }
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

fn smt_word(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// The states `--smt` asks for, in the order given (`both` is `off,on`).
pub fn smt_states(given: &[String]) -> Result<Vec<bool>> {
    let mut out = Vec::new();
    for s in given {
        let add: &[bool] = match s.trim() {
            "off" => &[false],
            "on" => &[true],
            "both" => &[false, true],
            other => bail!("--smt {other:?}: expected off, on, both, off,on or on,off"),
        };
        for &on in add {
            if out.contains(&on) {
                bail!(
                    "--smt {}: SMT {} given twice",
                    given.join(","),
                    smt_word(on)
                );
            }
            out.push(on);
        }
    }
    Ok(out)
}

/// The states `--smt` asks for that can be measured here: none, said in one line, where
/// SMT cannot be switched (the current state is measured); an error beside 1c1t-up.
pub fn switchable_states(
    given: &[String],
    placements: &[smtlab_model::ResolvedPlacement],
    topo: &smtlab_model::Topology,
    sysfs: &smtlab_control::Sysfs,
) -> Result<Vec<bool>> {
    let mut states = smt_states(given)?;
    if !states.is_empty() {
        if placements.iter().any(|p| p.is_uniprocessor()) {
            bail!("--smt with 1c1t-up: both take CPUs offline; measure them in separate runs");
        }
        if let Some(why) = crate::settings::switch_refusal(sysfs) {
            eprintln!(
                "note: --smt {}: not switched ({why}); measuring the current state only (smt/control: {})",
                given.join(","),
                topo.smt.control.as_deref().unwrap_or("absent")
            );
            states.clear();
        }
    }
    Ok(states)
}

/// Measures every group in each of `states` in turn (group 1 off, group 1 on, group 2
/// off, ...) under `switch`, which puts the state found back at the end, on error
/// (dropped) and on signals or SIGKILL (its watcher and guardian).
pub fn smt_turns<G>(
    mut switch: smtlab_control::SmtSwitch,
    groups: &[G],
    states: &[bool],
    mut turn: impl FnMut(&G, bool) -> Result<Ended>,
) -> Result<Ended> {
    let mut ended = Ended::Complete;
    'groups: for group in groups {
        for &on in states {
            switch
                .set(on)
                .with_context(|| format!("cannot switch SMT {}", smt_word(on)))?;
            ended = turn(group, on)?;
            if ended == Ended::Stopped {
                break 'groups;
            }
        }
    }
    switch.finish().context("cannot put the SMT state back")?;
    Ok(ended)
}

/// `cell` for the SMT state `on`: the state in its key, its placement resolved on the
/// topology of that state (`1c2t` has no siblings with SMT off: skipped with the reason).
pub fn smt_cell<'a>(
    cell: &CellPlan<'a>,
    on: bool,
    topo: &smtlab_model::Topology,
) -> Result<CellPlan<'a>> {
    let mut key = cell.key.clone();
    key.set_smt(Some(smtlab_model::keys::SmtState::from_on(on)));
    let spec = smtlab_placement::parse(&key.placement)?;
    let placement = smtlab_placement::resolve(&spec, topo)
        .map_err(|e| format!("with SMT {}: {e}", smt_word(on)));
    Ok(CellPlan {
        bench: cell.bench,
        info: cell.info.clone(),
        params: cell.params.clone(),
        key,
        placement,
        work_unit: cell.work_unit.clone(),
        warmup_samples: cell.warmup_samples,
    })
}

/// The settings of `corun` and `penalty`: the machine, its CPUs and forms, the notes on
/// what it cannot do, and the run's settings, settled before anything is measured.
pub struct CorunSettings {
    pub topo: smtlab_model::Topology,
    pub pair: smtlab_runner::corun::CpuPair,
    pub forms: Vec<(smtlab_model::keys::Form, u32)>,
    pub notes: Vec<String>,
    pub cfg: smtlab_model::RunConfig,
}

pub fn corun_settings(common: &crate::args::CommonArgs) -> Result<CorunSettings> {
    let topo = smtlab_topology::discover(std::path::Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    let pair = smtlab_runner::corun::cpu_pair(&topo).map_err(anyhow::Error::msg)?;
    let (forms, notes) = smtlab_runner::experiment::corun::forms(&common.forms, &pair)?;
    if let Some(db) = &common.db
        && db.exists()
    {
        drop(smtlab_store::Store::open_existing(db)?);
    }
    let mut cfg = if common.quick {
        smtlab_model::RunConfig::quick()
    } else {
        smtlab_model::RunConfig::default()
    };
    smtlab_runner::config::validate(&cfg)?;
    cfg.known_overheads = Some(smtlab_runner::measure_overheads(&smtlab_runner::Monotonic));
    cfg.counters = common.counters;
    Ok(CorunSettings {
        topo,
        pair,
        forms,
        notes,
        cfg,
    })
}

/// The settings of `util`: the database, the SMT states it can measure here (the state
/// found when none can be switched, said in a note), the topology found, the run's
/// settings and the notes on what this machine cannot do.
pub struct UtilSettings {
    pub db: std::path::PathBuf,
    pub sysfs: Sysfs,
    pub states: Vec<smtlab_runner::experiment::utilisation::SmtState>,
    pub topo0: smtlab_model::Topology,
    pub cfg: smtlab_model::RunConfig,
    pub notes: Vec<String>,
}

pub fn util_settings(args: &crate::args::UtilArgs) -> Result<UtilSettings> {
    let mut states = smtlab_runner::experiment::utilisation::parse_states(&args.smt)?;
    let db = args.db.clone().unwrap_or_else(smtlab_store::default_path);
    if db.exists() {
        drop(smtlab_store::Store::open_existing(&db)?);
    }
    let mut notes: Vec<String> = Vec::new();
    let sysfs = Sysfs::system();
    if let Some(why) = (!states.is_empty())
        .then(|| crate::settings::switch_refusal(&sysfs))
        .flatten()
    {
        notes.push(format!(
            "--smt {}: not measured ({why}); measuring the state found only",
            args.smt.join(",")
        ));
        states.clear();
    }
    if states.is_empty() {
        states.push(None);
    }
    let topo0 = smtlab_topology::discover(std::path::Path::new("/"))
        .context("cannot read this machine's CPU topology")?;
    if args.placement.is_none() && states == [None] && !topo0.smt_visible() {
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
    cfg.known_overheads = Some(smtlab_runner::measure_overheads(&smtlab_runner::Monotonic));
    cfg.counters = args.counters;
    Ok(UtilSettings {
        db,
        sysfs,
        states,
        topo0,
        cfg,
        notes,
    })
}

/// For a uniprocessor placement (`1c1t-up`), takes every CPU but the placement's one
/// offline until the returned guard drops; `None` for every other placement.
pub fn enter_uniprocessor(
    placement: &smtlab_model::ResolvedPlacement,
    client_side: bool,
) -> Result<Option<smtlab_control::SmtSwitch>> {
    if !placement.is_uniprocessor() {
        return Ok(None);
    }
    if client_side {
        bail!(
            "{} leaves no CPU online for the client side of this benchmark",
            placement.name
        );
    }
    let cpu = placement.cpus[0];
    let up = smtlab_control::uniprocessor(Sysfs::system(), cpu)
        .with_context(|| format!("{}: cannot leave only CPU {cpu} online", placement.name))?;
    Ok(Some(up))
}

/// Refuses a `bench` with `1c1t-up` placements before anything is measured when the
/// other CPUs could not be taken offline (not root, a CPU without hotplug).
pub fn check_uniprocessor(placements: &[smtlab_model::ResolvedPlacement]) -> Result<()> {
    for p in placements.iter().filter(|p| p.is_uniprocessor()) {
        smtlab_control::uniprocessor_plan(&Sysfs::system(), p.cpus[0])
            .with_context(|| format!("{}: cannot leave only CPU {} online", p.name, p.cpus[0]))?;
    }
    Ok(())
}

/// [`smtlab_runner::session::Session::cell_state`] for the commands that measure: enters
/// the uniprocessor state for a `1c1t-up` cell and restores it when the cell ends.
pub fn cell_state(
    placement: &smtlab_model::ResolvedPlacement,
    client_side: bool,
) -> std::result::Result<Option<Box<dyn std::any::Any>>, String> {
    enter_uniprocessor(placement, client_side)
        .map(|g| g.map(|g| Box::new(g) as Box<dyn std::any::Any>))
        .map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use smtlab_control::SmtSwitch;
    use smtlab_control::guard::Protection;

    use super::*;

    /// Two cores of two siblings (CPUs 0,1 and 2,3), SMT control `on`.
    fn tree() -> (tempfile::TempDir, Sysfs) {
        let dir = smtlab_fixtures::sysfs::smt_tree(Some("on"), 2);
        let sysfs = Sysfs::at(dir.path());
        (dir, sysfs)
    }

    fn control(sysfs: &Sysfs) -> String {
        fs::read_to_string(sysfs.control_path())
            .unwrap()
            .trim()
            .to_string()
    }

    fn switch(sysfs: &Sysfs) -> SmtSwitch {
        let quiet = Protection {
            guardian: false,
            signals: false,
        };
        SmtSwitch::with_protection(sysfs.clone(), quiet).unwrap()
    }

    #[test]
    fn states_parse_in_order_and_refuse_repeats() {
        let s = |v: &[&str]| smt_states(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["both"]).unwrap(), vec![false, true]);
        assert_eq!(s(&["on", "off"]).unwrap(), vec![true, false]);
        assert_eq!(s(&["off"]).unwrap(), vec![false]);
        assert!(s(&["both", "on"]).is_err());
        assert!(s(&["maybe"]).is_err());
    }

    #[test]
    fn states_take_turns_per_group_and_the_state_is_restored() {
        let (_d, sysfs) = tree();
        let mut seen = Vec::new();
        let ended = smt_turns(switch(&sysfs), &["a", "b"], &[false, true], |g, on| {
            seen.push((g.to_string(), on, control(&sysfs)));
            Ok(Ended::Complete)
        })
        .unwrap();
        assert_eq!(ended, Ended::Complete);
        let want = [("a", false), ("a", true), ("b", false), ("b", true)];
        assert_eq!(seen.len(), want.len());
        for ((g, on, ctl), (wg, won)) in seen.iter().zip(want) {
            assert_eq!((g.as_str(), *on), (wg, won));
            assert_eq!(
                ctl,
                smt_word(won),
                "smt/control during {g} SMT {}",
                smt_word(won)
            );
        }
        assert_eq!(control(&sysfs), "on");
    }

    #[test]
    fn an_error_or_a_stop_mid_run_restores_the_state() {
        let (_d, sysfs) = tree();
        fs::write(sysfs.control_path(), "off\n").unwrap();
        let err = smt_turns(switch(&sysfs), &["a", "b"], &[true, false], |g, on| {
            if *g == "a" && on {
                bail!("benchmark failed")
            }
            Ok(Ended::Complete)
        });
        assert!(err.is_err());
        assert_eq!(control(&sysfs), "off");

        let mut turns = 0;
        let ended = smt_turns(switch(&sysfs), &["a", "b"], &[true, false], |_, _| {
            turns += 1;
            Ok(Ended::Stopped)
        })
        .unwrap();
        assert_eq!((ended, turns), (Ended::Stopped, 1));
        assert_eq!(control(&sysfs), "off");
    }

    #[test]
    fn placement_lists_keep_cpu_lists_whole() {
        let v = split_placements(&["1c1t,cpus=0,4-5,2c1t".into(), "all".into()]);
        assert_eq!(v, ["1c1t", "cpus=0,4-5", "2c1t", "all"]);
    }
}
