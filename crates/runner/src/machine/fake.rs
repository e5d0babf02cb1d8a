//! [`FakeMachine`]: one package, one core, two threads (CPUs 0 and 1, SMT siblings,
//! SMT control `on`) in a sysfs tree in a directory, whose SMT and hotplug files behave
//! as the kernel's do ([`Sysfs::emulating_kernel`]), with a fake PMU. The benchmarks
//! still run, pinned, on this host's CPUs 0 and 1 (so the tree uses CPU numbers every
//! host has), which makes the machine good for running every command's path (1c1t,
//! 1c2t, SMT off and on, the sibling co-run, 1c1t-up and the restores) and worthless for
//! figures: its environment says so in every field that names the machine.
//!
//! Its network devices are files only: `lo` with one receive queue (`rps_cpus`), and
//! `eth0` with two receive queues and two MSI interrupts (24 and 25, named in
//! `proc/interrupts`, `proc/irq/N/smp_affinity_list` reading `0-1`), so `irq=` steering
//! writes into the tree (and its journal) and the restores can be checked; the load
//! itself runs over this host's loopback.
//!
//! Its kernel has core scheduling: a cookie is recorded, not made ([`CORE_SCHED_LOG`]
//! lists each, `create thread|PID SCOPE`), and a task with one is said to have kept
//! its sibling forced idle a quarter of the time since, while it lives
//! ([`FAKE_FORCEIDLE_SHARE`]). A file [`CORE_SCHED_FILE`] at the root saying `EINVAL` or
//! `ENODEV` makes it a kernel without `CONFIG_SCHED_CORE` or without SMT; with SMT off
//! it answers `ENODEV` as the kernel does. Its `proc/sys/kernel/sched_schedstats` reads
//! 0, as most kernels' do, so a `--security` run's switch on and back shows in the
//! journal.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use smtlab_control::coresched::CoreSchedError;
use smtlab_model::keys::CookieScope;

use smtlab_control::Sysfs;
use smtlab_model::counters::{ClassStatus, CounterAvailability, CounterEvent};
use smtlab_model::{EMULATED_HOST_ID_PREFIX, Environment, Topology};

use super::{Machine, Tool};
use crate::clock::{Clock, FakeClock, Monotonic};
use crate::counting::{CountingBackend, CountingSetup, FakeBackend};

/// What the fake machine's environment says in place of a host name and a CPU model.
pub const FAKE_NAME: &str = "smtlab fake machine (--fake-machine): 1 core x 2 threads emulated in a sysfs tree; the work ran on this host's CPUs 0 and 1, so its figures say nothing about SMT";

/// The counts every sample reads from the fake PMU: an IPC of exactly 2.
const FAKE_COUNTS: [(CounterEvent, u64); 3] = [
    (CounterEvent::Cycles, 1_000_000),
    (CounterEvent::Instructions, 2_000_000),
    (CounterEvent::TaskClock, 1_000_000),
];

/// The file at the root of the tree listing the cookies the fake kernel made.
pub const CORE_SCHED_LOG: &str = "coresched.log";
/// The file at the root of the tree that, saying `EINVAL` or `ENODEV`, takes core
/// scheduling away from the fake kernel.
pub const CORE_SCHED_FILE: &str = "core_sched";
/// The share of a cookie's life the fake kernel says a sibling stood forced idle.
pub const FAKE_FORCEIDLE_SHARE: f64 = 0.25;

/// A fake machine with SMT siblings (see the module documentation).
pub struct FakeMachine {
    root: PathBuf,
    backend: FakeBackend,
    /// Each task given a cookie (a host thread or process id) and when.
    cookies: Mutex<Vec<(Task, Instant)>>,
}

/// A task of the host a fake cookie was given to.
#[derive(Debug, Clone, Copy)]
enum Task {
    Thread(u32),
    Process(u32),
}

impl Task {
    /// Whether it still runs on this host (a cookie dies with its task).
    fn alive(self) -> bool {
        let pid = std::process::id();
        match self {
            Task::Thread(t) => Path::new(&format!("/proc/{pid}/task/{t}")).exists(),
            Task::Process(p) => Path::new(&format!("/proc/{p}")).exists(),
        }
    }
}

impl FakeMachine {
    /// The fake machine whose tree is under `root`: built there when `root` holds none
    /// (a directory that does not exist is created), used as it is otherwise (so a test
    /// can give the directory and look at the tree afterwards).
    pub fn at(root: &Path) -> io::Result<FakeMachine> {
        if !root.join("sys/devices/system/cpu").is_dir() {
            build_tree(root)?;
        }
        let values = smtlab_counters::fake_values(&FAKE_COUNTS);
        Ok(FakeMachine {
            root: root.to_path_buf(),
            backend: FakeBackend::new(values, None, Arc::new(FakeClock::new(0, 1))),
            cookies: Mutex::new(Vec::new()),
        })
    }

    fn log_cookie(&self, line: &str) -> io::Result<()> {
        use std::io::Write;
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join(CORE_SCHED_LOG))?;
        writeln!(log, "{line}")
    }
}

impl Machine for FakeMachine {
    fn root(&self) -> &Path {
        &self.root
    }

    fn sysfs(&self) -> Sysfs {
        Sysfs::emulating_kernel(&self.root)
    }

    fn clock(&self) -> &dyn Clock {
        // The benchmarks really run: their time is real.
        &Monotonic
    }

    /// No PMU tree: every named event is said to be absent here.
    fn pmu_tree(&self) -> smtlab_counters::PmuTree {
        smtlab_counters::PmuTree::read(&self.root().join("sys/bus/event_source/devices"), None)
    }

    fn counting_setup(&self) -> CountingSetup {
        let fake = || ClassStatus::no("not on the fake machine");
        CountingSetup::with_availability(CounterAvailability {
            perf_event_paranoid: None,
            hardware: ClassStatus::yes(),
            software: ClassStatus::yes(),
            kernel_mode: fake(),
            cpu_wide: fake(),
            syscall_tracing: fake(),
            events: Vec::new(),
        })
    }

    fn counting_backend(&self) -> &dyn CountingBackend {
        &self.backend
    }

    fn core_sched_refusal(&self) -> Option<CoreSchedError> {
        let said = std::fs::read_to_string(self.root.join(CORE_SCHED_FILE)).unwrap_or_default();
        let active = self.root.join("sys/devices/system/cpu/smt/active");
        let smt_off = std::fs::read_to_string(active).is_ok_and(|s| s.trim() == "0");
        match said.trim() {
            "EINVAL" => Some(CoreSchedError::NoKernelSupport),
            "ENODEV" => Some(CoreSchedError::NoSmt),
            _ if smt_off => Some(CoreSchedError::NoSmt),
            _ => None,
        }
    }

    fn create_cookie(&self, pid: u32, scope: CookieScope) -> Result<(), CoreSchedError> {
        if let Some(why) = self.core_sched_refusal() {
            return Err(why);
        }
        let (task, who) = match pid {
            0 => (
                Task::Thread(smtlab_placement::pin::gettid() as u32),
                "thread".into(),
            ),
            p => (Task::Process(p), p.to_string()),
        };
        self.log_cookie(&format!("create {who} {scope}"))
            .map_err(|source| CoreSchedError::Refused { what: who, source })?;
        let mut cookies = self.cookies.lock().unwrap_or_else(|e| e.into_inner());
        cookies.push((task, Instant::now()));
        Ok(())
    }

    /// A quarter of the life so far of every task with a cookie that still runs.
    fn forced_idle_ns(&self) -> Option<u64> {
        let cookies = self.cookies.lock().unwrap_or_else(|e| e.into_inner());
        let ns = cookies
            .iter()
            .filter(|(t, _)| t.alive())
            .map(|(_, since)| since.elapsed().as_nanos() as f64 * FAKE_FORCEIDLE_SHARE)
            .sum::<f64>();
        Some(ns as u64)
    }

    /// The work runs on this host: its threads are the host's.
    fn own_threads_on(&self, cpu: u32) -> Vec<u32> {
        smtlab_control::coresched::threads_on(Path::new("/proc/self/task"), cpu)
    }

    /// The work runs on this host: its children are the host's.
    fn own_children(&self) -> Vec<u32> {
        super::children_of_this_thread(Path::new("/proc"))
    }

    fn environment(&self, topo: &Topology, tool: &Tool) -> Environment {
        Environment {
            tool_version: tool.version.clone(),
            git_commit: tool.git_commit.clone(),
            hostname: Some(FAKE_NAME.into()),
            kernel: Some(FAKE_NAME.into()),
            cpu_model: Some(FAKE_NAME.into()),
            smt_control: topo.smt.control.clone(),
            virtualization: Some(FAKE_NAME.into()),
            online_cpus: topo.cpus.to_list_string(),
            // Never the real host's id: an emulated run is no measurement of this host.
            host_id: Some(format!(
                "{EMULATED_HOST_ID_PREFIX}{}",
                super::host_id().unwrap_or_else(|| "unknown".into())
            )),
            // Nothing else of the fake machine can be read.
            ..Environment::default()
        }
    }
}

/// CPUs 0 and 1 as the two threads of core 0 of package 0; CPU 0 without an `online`
/// file, as on most x86 kernels; SMT control `on`.
fn build_tree(root: &Path) -> io::Result<()> {
    let cpu = root.join("sys/devices/system/cpu");
    let write = |path: PathBuf, text: &str| -> io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, text)
    };
    for c in 0..2 {
        let topo = cpu.join(format!("cpu{c}/topology"));
        for (file, text) in [
            ("thread_siblings_list", "0-1\n"),
            ("core_cpus_list", "0-1\n"),
            ("core_siblings_list", "0-1\n"),
            ("package_cpus_list", "0-1\n"),
            ("core_id", "0\n"),
            ("physical_package_id", "0\n"),
        ] {
            write(topo.join(file), text)?;
        }
    }
    write(cpu.join("cpu1/online"), "1\n")?;
    write(cpu.join("present"), "0-1\n")?;
    write(cpu.join("possible"), "0-1\n")?;
    write(cpu.join("smt/control"), "on\n")?;
    write(cpu.join("smt/active"), "1\n")?;
    let net = root.join("sys/class/net");
    write(net.join("lo/queues/rx-0/rps_cpus"), "0\n")?;
    write(net.join("lo/queues/tx-0/xps_cpus"), "0\n")?;
    for q in 0..2 {
        write(net.join(format!("eth0/queues/rx-{q}/rps_cpus")), "0\n")?;
    }
    let mut interrupts = String::from("           CPU0       CPU1\n");
    for (irq, name) in [(24, "eth0-rx-0"), (25, "eth0-rx-1")] {
        write(net.join(format!("eth0/device/msi_irqs/{irq}")), "msix\n")?;
        write(
            root.join(format!("proc/irq/{irq}/smp_affinity_list")),
            "0-1\n",
        )?;
        interrupts.push_str(&format!(" {irq}:  0  0  PCI-MSIX-edge  {name}\n"));
    }
    write(root.join("proc/interrupts"), &interrupts)?;
    // Off, as on most kernels: a core-scheduling run switches it on and back.
    write(root.join("proc/sys/kernel/sched_schedstats"), "0\n")?;
    let mut cpuinfo = String::new();
    for c in 0..2 {
        cpuinfo.push_str(&format!(
            "processor\t: {c}\nvendor_id\t: smtlab\nmodel name\t: {FAKE_NAME}\nphysical id\t: 0\ncore id\t\t: 0\n\n"
        ));
    }
    write(root.join("proc/cpuinfo"), &cpuinfo)
}

#[cfg(test)]
mod tests {
    use smtlab_control::guard::Protection;

    use super::*;

    #[test]
    fn the_fake_machine_has_two_siblings_that_smt_off_takes_offline_and_on_brings_back() {
        let dir = std::env::temp_dir().join(format!("smtlab-fake-{}", std::process::id()));
        let m = FakeMachine::at(&dir).unwrap();
        let t = m.topology().unwrap();
        assert_eq!(t.cpus.to_vec(), [0, 1]);
        assert_eq!(t.core_count(), 1);
        assert!(t.smt_visible());
        assert_eq!(t.smt.control.as_deref(), Some("on"));
        assert_eq!(m.switch_refusal(), None);
        let quiet = Protection {
            guardian: false,
            signals: false,
        };
        let mut sw = m.smt_switch(quiet).unwrap();
        sw.set(false).unwrap();
        let off = m.topology().unwrap();
        assert_eq!(off.cpus.to_vec(), [0]);
        assert!(!off.smt_visible());
        sw.finish().unwrap();
        assert_eq!(m.topology().unwrap().cpus.to_vec(), [0, 1]);
        // Its environment says it is fake wherever it names the machine.
        let env = m.environment(&t, &Tool::default());
        // Its host id is never the real host's: the fleet keeps it apart.
        assert!(env.is_emulated());
        // Runs from before host ids are told by their CPU model.
        assert!(FAKE_NAME.starts_with(smtlab_model::EMULATED_MODEL_PREFIX));
        assert_ne!(env.host_id, super::super::host_id());
        assert!(env.hostname.unwrap().contains("fake machine"));
        assert!(env.cpu_model.unwrap().contains("fake machine"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_fake_kernel_records_cookies_and_their_forced_idle_dies_with_the_task() {
        let dir = std::env::temp_dir().join(format!("smtlab-fake-cs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let m = std::sync::Arc::new(FakeMachine::at(&dir).unwrap());
        assert!(m.core_sched_refusal().is_none());
        assert_eq!(m.forced_idle_ns(), Some(0));
        let m2 = m.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            m2.create_cookie(0, CookieScope::Thread).unwrap();
            tx.send(()).unwrap();
            let _ = done_rx.recv();
        });
        rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let during = m.forced_idle_ns().unwrap();
        assert!(during >= 4_000_000, "a quarter of 20 ms at least: {during}");
        done_tx.send(()).unwrap();
        t.join().unwrap();
        // A joined thread's /proc entry may outlive the join by a moment (the kernel
        // wakes the joiner before it releases the task).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while m.forced_idle_ns() != Some(0) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            m.forced_idle_ns(),
            Some(0),
            "the cookie died with its thread"
        );
        let log = std::fs::read_to_string(dir.join(CORE_SCHED_LOG)).unwrap();
        assert_eq!(log, "create thread thread\n");
        std::fs::write(dir.join(CORE_SCHED_FILE), "EINVAL\n").unwrap();
        let e = m.create_cookie(0, CookieScope::Thread).unwrap_err();
        assert!(e.to_string().contains("CONFIG_SCHED_CORE"), "{e}");
        std::fs::write(dir.join(CORE_SCHED_FILE), "").unwrap();
        std::fs::write(dir.join("sys/devices/system/cpu/smt/active"), "0\n").unwrap();
        assert!(matches!(
            m.core_sched_refusal(),
            Some(CoreSchedError::NoSmt)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
