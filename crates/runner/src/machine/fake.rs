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

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// A fake machine with SMT siblings (see the module documentation).
pub struct FakeMachine {
    root: PathBuf,
    backend: FakeBackend,
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
        })
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
        CountingSetup {
            availability: CounterAvailability {
                perf_event_paranoid: None,
                hardware: ClassStatus::yes(),
                software: ClassStatus::yes(),
                kernel_mode: fake(),
                cpu_wide: fake(),
                syscall_tracing: fake(),
                events: Vec::new(),
            },
            os_interval: std::time::Duration::from_millis(100),
            events: Vec::new(),
            events_unavailable: Vec::new(),
        }
    }

    fn counting_backend(&self) -> &dyn CountingBackend {
        &self.backend
    }

    fn environment(&self, topo: &Topology, tool: &Tool) -> Environment {
        Environment {
            tool_version: tool.version.clone(),
            git_commit: tool.git_commit.clone(),
            hostname: Some(FAKE_NAME.into()),
            kernel: Some(FAKE_NAME.into()),
            cpu_model: Some(FAKE_NAME.into()),
            microcode: None,
            smt_control: topo.smt.control.clone(),
            virtualization: Some(FAKE_NAME.into()),
            governor: None,
            boost: None,
            clocksource: None,
            perf_event_paranoid: None,
            online_cpus: topo.cpus.to_list_string(),
            // Never the real host's id: an emulated run is no measurement of this host.
            host_id: Some(format!(
                "{EMULATED_HOST_ID_PREFIX}{}",
                super::host_id().unwrap_or_else(|| "unknown".into())
            )),
            core_clock_ghz: None,
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
}
