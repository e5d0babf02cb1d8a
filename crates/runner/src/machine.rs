//! The machine seam: everything the engine asks of the machine it measures on, behind one
//! trait, [`Machine`], so every command runs the same way on this machine
//! ([`RealMachine`]) and on a fake one ([`FakeMachine`]: a sysfs tree in a directory
//! that emulates what the kernel does, with a fake PMU).
//!
//! A machine gives:
//! * its **topology**, discovered from its tree ([`Machine::topology`]), again after
//!   every change of SMT state;
//! * its **SMT control and CPU hotplug** files ([`Machine::sysfs`]), which every change
//!   goes through under the control crate's guard ([`SmtSwitch`]);
//! * the **clock** samples are timed with;
//! * the **counting backend** (`--counters`) and what it offers here;
//! * the **environment** stored with every run ([`Machine::environment`]);
//! * the **CPU times** of its CPUs and of this process's threads
//!   ([`Machine::cpu_times`], [`Machine::own_threads_cpu_ns`]), for what disturbed a
//!   cell ([`crate::disturb`]);
//! * the **system state of a cell** ([`Machine::enter_cell`]): `1c1t-up` takes every
//!   other CPU offline for the cell's life, through a typed guard ([`CellGuard`]) that
//!   brings them back when dropped;
//! * the **steering of a network device's interrupts** for a cell
//!   ([`Machine::steer_irqs`]: `/proc/irq/N/smp_affinity_list` and the receive queues'
//!   `rps_cpus` under its root), through the control crate's [`FileWrites`] guard, which
//!   writes the old values back when dropped, on signals and after SIGKILL;
//! * **core scheduling** for a `coresched` cell: whether the kernel has it
//!   ([`Machine::core_sched_refusal`]), a cookie for the workload's tasks
//!   ([`Machine::create_cookie`]; it dies with them) and the forced idle it cost
//!   ([`Machine::forced_idle_ns`]).
//!
//! A new fact about the machine that the engine needs goes here: a method of the trait,
//! read from [`Machine::root`] for both machines (or faked by [`FakeMachine`]), so no
//! command reads `/` or `/sys` on its own.

mod fake;

use std::collections::BTreeMap;
use std::path::Path;

use smtlab_control::coresched::{self, CoreSchedError};
use smtlab_control::guard::Protection;
use smtlab_control::{ControlError, FileWrites, SmtSwitch, Sysfs};
use smtlab_model::counters::os_time::CpuTicks;
use smtlab_model::keys::CookieScope;
use smtlab_model::{Environment, Handoff, ResolvedPlacement, Topology};
use smtlab_topology::TopologyError;

use crate::clock::{Clock, Monotonic};
use crate::counting::{CountingBackend, CountingSetup, Perf};

pub use fake::FakeMachine;

/// The program that measures, as stored in every run's environment.
#[derive(Debug, Clone, Default)]
pub struct Tool {
    pub version: String,
    pub git_commit: Option<String>,
}

/// Why the machine refused what a command asked of it.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    // The cause is shown in the message and is not a `source`, so it is printed once.
    #[error("cannot read this machine's CPU topology: {0}")]
    Topology(TopologyError),
    #[error("{placement} leaves no CPU online for the client side of this benchmark")]
    NoClientCpu { placement: String },
    // The cause is shown in the message and is not a `source`, so it is printed once.
    #[error("{placement}: cannot leave only CPU {cpu} online: {error}")]
    Uniprocessor {
        placement: String,
        cpu: u32,
        error: ControlError,
    },
}

/// What a cell's system state needs kept for the cell's life; dropping it puts the
/// system back.
#[must_use = "dropping the guard puts the system back at once"]
#[derive(Default)]
pub enum CellGuard {
    /// The cell changes nothing.
    #[default]
    Unchanged,
    /// Every CPU but the placement's one is offline (`1c1t-up`) until the guard drops.
    Uniprocessor(SmtSwitch),
}

/// Everything the engine asks of the machine it measures on.
pub trait Machine: Sync {
    /// The root its topology and SMT files are read from (`/` for this machine).
    fn root(&self) -> &Path;

    /// Its SMT control and CPU hotplug files.
    fn sysfs(&self) -> Sysfs;

    /// The clock samples are timed with.
    fn clock(&self) -> &dyn Clock;

    /// What counting (`--counters`) can do here (probing may take a few system calls).
    fn counting_setup(&self) -> CountingSetup;

    /// Where counters, `/proc/stat` series and syscall traces come from.
    fn counting_backend(&self) -> &dyn CountingBackend;

    /// Its performance monitoring units, for naming events (`--events`).
    fn pmu_tree(&self) -> smtlab_counters::PmuTree {
        smtlab_counters::PmuTree::system()
    }

    /// The counting `cfg` asks for: `None` without `--counters`, else what counting can
    /// do here with the named events of `--events` resolved on [`Machine::pmu_tree`] (an
    /// event the machine lacks is a line in `events_unavailable`; a malformed list an
    /// error).
    fn counting_for(
        &self,
        cfg: &smtlab_model::RunConfig,
    ) -> Result<Option<CountingSetup>, smtlab_counters::EventListError> {
        if !cfg.counters {
            return Ok(None);
        }
        let setup = self.counting_setup();
        match cfg.counter_events.as_deref() {
            Some(list) => setup.with_events(list, &self.pmu_tree()).map(Some),
            None => Ok(Some(setup)),
        }
    }

    /// The environment the measurements run in (DESIGN rule 11), stored with the run.
    fn environment(&self, topo: &Topology, tool: &Tool) -> Environment;

    /// The cache-line handoff of each of `pairs` (from, to) as it is now
    /// ([`smtlab_bench::threads::c2c::handoff_ns`]); a pair whose threads cannot be
    /// pinned is left out. None on a machine described by files.
    fn cpu_handoffs(&self, _pairs: &[(u32, u32)]) -> Vec<Handoff> {
        Vec::new()
    }

    /// Whether its CPUs are the ones this process runs on, so that paper 002's pair
    /// probing can measure them; not so on a machine described by files.
    fn cpus_can_be_probed(&self) -> bool {
        false
    }

    /// Each CPU's time since boot (`proc/stat` under [`Machine::root`]), for what
    /// disturbed a cell ([`crate::disturb`]) and the steal note at a run's start; `None`
    /// where it cannot be read or parsed.
    fn cpu_times(&self) -> Option<BTreeMap<u32, CpuTicks>> {
        let text = std::fs::read_to_string(self.root().join("proc/stat")).ok()?;
        smtlab_counters::procstat::parse_proc_stat(&text).ok()
    }

    /// The CPU time of each thread of this process in nanoseconds, by thread id (the
    /// first field of `proc/self/task/TID/schedstat` under [`Machine::root`]: the
    /// scheduler's own count, exact, not in ticks); `None` where it cannot be read.
    fn own_threads_cpu_ns(&self) -> Option<BTreeMap<u32, u64>> {
        read_task_schedstats(&self.root().join("proc/self/task"))
    }

    /// The CPU time of this process's descendants in nanoseconds: each living one's
    /// `utime + stime + cutime + cstime` (`proc/PID/stat`, found through
    /// `proc/*/task/*/children`) and this process's `cutime + cstime` (those it reaped,
    /// with what they had reaped), in ticks; `None` where `proc/self/stat` cannot be
    /// read. A descendant reaped by no one (its parent ignores SIGCHLD) drops out.
    fn own_children_cpu_ns(&self) -> Option<u64> {
        use smtlab_control::coresched::stat_field;
        let proc = self.root().join("proc");
        // Fields `from..=17` of proc(5): utime (14), stime, cutime, cstime.
        let stat = |pid: &str, from: usize| -> Option<u64> {
            let text = std::fs::read_to_string(proc.join(pid).join("stat")).ok()?;
            let ticks = (from..=17).map(|n| stat_field(&text, n).map(|t| t.max(0) as u64));
            ticks.sum()
        };
        let reaped = stat("self", 16)?;
        let tree = smtlab_control::coresched::own_tree(&proc);
        let living: u64 = tree[1..]
            .iter()
            .filter_map(|p| stat(&p.to_string(), 14))
            .sum();
        Some((reaped + living).saturating_mul(self.tick_ns()))
    }

    /// One `proc/stat` tick in nanoseconds (USER_HZ; 10 ms on every usual kernel).
    fn tick_ns(&self) -> u64 {
        1_000_000_000 / smtlab_counters::procstat::user_hz()
    }

    /// The topology as it is now (again after every change of SMT state).
    fn topology(&self) -> Result<Topology, MachineError> {
        smtlab_topology::discover(self.root()).map_err(MachineError::Topology)
    }

    /// Why SMT cannot be switched here, if it cannot.
    fn switch_refusal(&self) -> Option<String> {
        smtlab_control::switch_refusal(&self.sysfs())
    }

    /// The guard every SMT change of a command goes through; it puts the state found
    /// back when finished or dropped (and, per `protection`, on signals and SIGKILL).
    fn smt_switch(&self, protection: Protection) -> Result<SmtSwitch, ControlError> {
        SmtSwitch::with_protection(self.sysfs(), protection)
    }

    /// Refuses uniprocessor placements (`1c1t-up`) before anything is measured when the
    /// other CPUs could not be taken offline (not root, a CPU without hotplug).
    fn check_uniprocessor(&self, placements: &[ResolvedPlacement]) -> Result<(), MachineError> {
        let sysfs = self.sysfs();
        for p in placements.iter().filter(|p| p.is_uniprocessor()) {
            smtlab_control::uniprocessor_plan(&sysfs, p.cpus[0]).map_err(|error| {
                MachineError::Uniprocessor {
                    placement: p.name.clone(),
                    cpu: p.cpus[0],
                    error,
                }
            })?;
        }
        Ok(())
    }

    /// Steers the interrupts and receive processing of network `devices` to `cpus` until
    /// the guard drops (paper 004 s3); the guard lists what it steered, which is
    /// nothing where the devices have no interrupts and the kernel no RPS.
    fn steer_irqs(
        &self,
        devices: &[String],
        cpus: &smtlab_model::CpuSet,
    ) -> Result<FileWrites, ControlError> {
        smtlab_control::irq::steer(self.sysfs(), devices, cpus, Protection::default())
    }

    /// Why core scheduling cannot run here (a kernel without `CONFIG_SCHED_CORE`, no
    /// SMT siblings online), if it cannot.
    fn core_sched_refusal(&self) -> Option<CoreSchedError> {
        coresched::refusal()
    }

    /// A new core-scheduling cookie for `pid` (0: the calling thread) and, per `scope`,
    /// its thread group or process group; what they start later inherits it.
    fn create_cookie(&self, pid: u32, scope: CookieScope) -> Result<(), CoreSchedError> {
        coresched::create(pid, scope)
    }

    /// Switches `kernel.sched_schedstats` on (under [`Machine::root`]) until the guard
    /// drops, so that the kernel counts forced idle; `None` where it is on already or
    /// the kernel has none. Put back on signals and after SIGKILL too.
    fn count_forced_idle(&self) -> Result<Option<FileWrites>, ControlError> {
        let sysfs = self.sysfs();
        let Some(write) = coresched::schedstats_write(&sysfs)? else {
            return Ok(None);
        };
        let what = "counting forced idle (kernel.sched_schedstats)";
        FileWrites::apply(sysfs, what, vec![write], Protection::default()).map(Some)
    }

    /// The forced idle charged so far to this process's tasks and its descendants', in
    /// nanoseconds: through smtlab's cgroup for its children where it has one (ended
    /// tasks' included), else each task's `core_forceidle_sum` under
    /// [`Machine::root`]'s `proc`; `None` without it (no `CONFIG_SCHED_CORE`, schedstats
    /// off).
    fn forced_idle_ns(&self) -> Option<u64> {
        let proc = self.root().join("proc");
        coresched::forced_idle_ns(&proc, smtlab_bench::process::cgroup_root_made())
    }

    /// This process's threads pinned to `cpu` alone (a co-run partner's, for a cookie
    /// of its own).
    fn own_threads_on(&self, cpu: u32) -> Vec<u32> {
        coresched::threads_on(&self.root().join("proc/self/task"), cpu)
    }

    /// The processes the calling thread started (a cell's workload's, after it is
    /// prepared), for a cookie per process or per process group.
    fn own_children(&self) -> Vec<u32> {
        children_of_this_thread(&self.root().join("proc"))
    }

    /// Puts the system into the state `placement` needs for one cell (`1c1t-up`: every
    /// other CPU offline) until the guard drops; `client_elsewhere`: the cell's client
    /// runs on a CPU outside the placement, which a uniprocessor cannot keep online.
    fn enter_cell(
        &self,
        placement: &ResolvedPlacement,
        client_elsewhere: bool,
    ) -> Result<CellGuard, MachineError> {
        if !placement.is_uniprocessor() {
            return Ok(CellGuard::Unchanged);
        }
        if client_elsewhere {
            return Err(MachineError::NoClientCpu {
                placement: placement.name.clone(),
            });
        }
        let cpu = placement.cpus[0];
        smtlab_control::uniprocessor(self.sysfs(), cpu)
            .map(CellGuard::Uniprocessor)
            .map_err(|error| MachineError::Uniprocessor {
                placement: placement.name.clone(),
                cpu,
                error,
            })
    }
}

/// This machine: `/`, its kernel's SMT and hotplug files (root needed to write them),
/// the monotonic clock and perf_event counting.
#[derive(Debug, Default)]
pub struct RealMachine;

impl Machine for RealMachine {
    fn root(&self) -> &Path {
        Path::new("/")
    }

    fn sysfs(&self) -> Sysfs {
        Sysfs::system()
    }

    fn clock(&self) -> &dyn Clock {
        &Monotonic
    }

    fn counting_setup(&self) -> CountingSetup {
        CountingSetup::probe()
    }

    fn counting_backend(&self) -> &dyn CountingBackend {
        &Perf
    }

    fn environment(&self, topo: &Topology, tool: &Tool) -> Environment {
        Environment {
            cpu_handoff: self.cpu_handoffs(&handoff_pairs(topo)),
            ..capture(topo, tool)
        }
    }

    fn cpu_handoffs(&self, pairs: &[(u32, u32)]) -> Vec<Handoff> {
        pairs
            .iter()
            .filter_map(|&(from_cpu, to_cpu)| {
                Some(Handoff {
                    from_cpu,
                    to_cpu,
                    ns: smtlab_bench::threads::c2c::handoff_ns(from_cpu, to_cpu)?,
                })
            })
            .collect()
    }

    fn cpus_can_be_probed(&self) -> bool {
        true
    }
}

/// The CPU time of each thread under `task_dir` (`/proc/self/task`), by thread id: the
/// first field of each thread's `schedstat`. Threads that end while being read are left
/// out; `None` when the directory cannot be read.
fn read_task_schedstats(task_dir: &Path) -> Option<BTreeMap<u32, u64>> {
    let tasks = std::fs::read_dir(task_dir).ok()?;
    let schedstat = |entry: std::fs::DirEntry| {
        let tid = entry.file_name().to_str()?.parse().ok()?;
        let text = std::fs::read_to_string(entry.path().join("schedstat")).ok()?;
        Some((tid, text.split_whitespace().next()?.parse().ok()?))
    };
    Some(tasks.flatten().filter_map(schedstat).collect())
}

fn read(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(Path::new(path)).ok()?;
    let t = s.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    (!t.is_empty()).then(|| t.to_string())
}

fn cpuinfo_field(name: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim().to_string())
    })
}

/// This machine's stable id ([`Environment::host_id`]): 16 hex digits of SHA-256 of
/// `/etc/machine-id`, else of the DMI product UUID (readable by root only), so that
/// neither is stored as it is (`machine-id` is meant to stay private). `None` when
/// neither can be read.
pub fn host_id() -> Option<String> {
    use sha2::{Digest, Sha256};
    let source = read("/etc/machine-id").or_else(|| read("/sys/class/dmi/id/product_uuid"))?;
    let digest = Sha256::new()
        .chain_update(b"smtlab-host\0")
        .chain_update(source.as_bytes())
        .finalize();
    Some(digest[..8].iter().map(|b| format!("{b:02x}")).collect())
}

/// This machine's environment, read from /proc and /sys: every field is read, never
/// guessed; what cannot be read is `None`.
fn capture(topo: &Topology, tool: &Tool) -> Environment {
    let boost = read("/sys/devices/system/cpu/cpufreq/boost").or_else(|| {
        read("/sys/devices/system/cpu/intel_pstate/no_turbo").map(|v| {
            if v == "1" {
                "0 (intel_pstate no_turbo)".to_string()
            } else {
                "1 (intel_pstate)".to_string()
            }
        })
    });
    Environment {
        tool_version: tool.version.clone(),
        git_commit: tool.git_commit.clone(),
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpu_model: topo.cpu_model.clone(),
        microcode: cpuinfo_field("microcode"),
        smt_control: topo.smt.control.clone(),
        virtualization: topo.virtualization.clone(),
        governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        boost,
        clocksource: read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        perf_event_paranoid: read("/proc/sys/kernel/perf_event_paranoid")
            .and_then(|s| s.parse().ok()),
        online_cpus: topo.cpus.to_list_string(),
        host_id: host_id(),
        core_clock_ghz: smtlab_bench::clock::core_clock_ghz(),
        // Measured by `RealMachine::environment`.
        cpu_handoff: Vec::new(),
    }
}

/// The most CPUs [`handoff_pairs`] pairs with the first: a few milliseconds in all.
pub const HANDOFF_PAIRS: usize = 16;

/// The pairs whose handoff a run records at its start (`Environment::cpu_handoff`): the
/// first online CPU with up to [`HANDOFF_PAIRS`] others. None under full emulation
/// (QEMU without KVM), where a handoff times the emulator's scheduling of its vCPU
/// threads, milliseconds a round trip.
fn handoff_pairs(topo: &Topology) -> Vec<(u32, u32)> {
    if topo.virtualization.as_deref() == Some("QEMU") {
        return Vec::new();
    }
    let cpus: Vec<u32> = topo.cpus.iter().collect();
    let Some((first, others)) = handoff_partners(&cpus) else {
        return Vec::new();
    };
    others.into_iter().map(|to| (first, to)).collect()
}

/// The first of `cpus` and the others it is paired with: at most [`HANDOFF_PAIRS`],
/// spread evenly over the CPU numbers so that a large machine's dies and sockets are
/// each met. `None` below two CPUs.
fn handoff_partners(cpus: &[u32]) -> Option<(u32, Vec<u32>)> {
    let [first, others @ ..] = cpus else {
        return None;
    };
    let step = others.len().div_ceil(HANDOFF_PAIRS).max(1);
    let partners: Vec<u32> = others.iter().copied().step_by(step).collect();
    (!partners.is_empty()).then_some((*first, partners))
}

/// The children the calling thread started, from `PROC/self/task/TID/children`.
pub(crate) fn children_of_this_thread(proc: &Path) -> Vec<u32> {
    let tid = smtlab_placement::pin::gettid();
    let text = std::fs::read_to_string(proc.join(format!("self/task/{tid}/children")));
    let text = text.unwrap_or_default();
    text.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoffs_pair_the_first_cpu_with_others_spread_over_the_numbers() {
        assert_eq!(handoff_partners(&[]), None);
        assert_eq!(handoff_partners(&[3]), None);
        assert_eq!(handoff_partners(&[0, 1]), Some((0, vec![1])));
        let cpus: Vec<u32> = (0..64).collect();
        let (first, others) = handoff_partners(&cpus).unwrap();
        assert_eq!(first, 0);
        assert_eq!(others.len(), HANDOFF_PAIRS);
        assert_eq!((others[0], others[1], others[15]), (1, 5, 61));
        let (_, few) = handoff_partners(&cpus[..17]).unwrap();
        assert_eq!(few, (1..17).collect::<Vec<u32>>());
    }

    #[test]
    fn the_task_directory_is_read_by_thread() {
        let dir = tempfile::tempdir().unwrap();
        for (tid, text) in [("7", "123 45 6\n"), ("8", "9 0 0\n"), ("self", "1 2 3\n")] {
            std::fs::create_dir(dir.path().join(tid)).unwrap();
            std::fs::write(dir.path().join(tid).join("schedstat"), text).unwrap();
        }
        let m = read_task_schedstats(dir.path()).unwrap();
        assert_eq!(m, BTreeMap::from([(7, 123), (8, 9)]));
        assert!(read_task_schedstats(&dir.path().join("none")).is_none());
    }

    /// Where the machine has an id, the run carries its hash, never the id itself, and
    /// the same hash each time.
    #[test]
    fn the_host_id_is_a_stable_hash_of_the_machine_id() {
        let Some(raw) = read("/etc/machine-id").or_else(|| read("/sys/class/dmi/id/product_uuid"))
        else {
            assert_eq!(host_id(), None);
            return;
        };
        let id = host_id().expect("an id where the machine has one");
        assert_eq!(id.len(), 16);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert!(!raw.contains(&id), "{id} is not the raw id");
        assert_eq!(host_id().as_deref(), Some(id.as_str()));
    }
}
