//! What disturbed a cell ([`Disturbance`]), measured around each of its samples: the
//! machine's per-CPU times and this process's per-thread CPU times are read just before
//! and just after every sample ([`Probe::open`], [`Probe::close`]), through the
//! [`Machine`] seam, so the turns of other cells in an interleaved group fall outside.
//!
//! * **steal**: the steal ticks of the cell's CPUs in `/proc/stat`;
//! * **other processes**: the busy ticks (user, nice, system, irq, softirq) of the
//!   cell's CPUs minus the CPU time of every thread of smtlab's own process and of its
//!   child processes (a command, a server's processes, a co-run partner's, a load
//!   generator; living and reaped, in ticks) in the same windows. An approximation:
//!   smtlab's threads and children are taken to have run on the cell's CPUs (those that
//!   ran elsewhere make the figure smaller, never larger), and it is only given where
//!   the cell's work ran on them (the time a sample reports is nearly all theirs);
//! * **smtlab's own non-measuring time**: the CPU time of smtlab's threads other than
//!   the cell's measuring ones (the cell's thread and the threads born while it was
//!   prepared), from `/proc/self/task/*/schedstat`.
//!
//! Reading costs a few small files per sample, outside the timed part of the sample.

use std::collections::{BTreeMap, BTreeSet};

use smtlab_model::counters::os_time::CpuTicks;
use smtlab_model::{CpuSet, Disturbance};

use crate::clock::Clock;
use crate::machine::Machine;

/// The line a run starts with on a machine whose hypervisor steals time from its CPUs
/// (steal since boot in `/proc/stat`); `None` where there is none or it cannot be read.
pub fn steal_note(machine: &dyn Machine) -> Option<String> {
    let all = machine
        .cpu_times()?
        .values()
        .fold(CpuTicks::default(), |acc, t| acc.add(t));
    let (steal, total) = (all.steal, all.total());
    (steal > 0 && total > 0).then(|| {
        format!(
            "this machine's hypervisor takes time from its CPUs (steal {:.2}% of their time since boot); \
             a cell that loses more than {:.0}% of its CPUs' time to steal or other processes is marked disturbed",
            100.0 * steal as f64 / total as f64,
            100.0 * smtlab_model::disturbance::DISTURBED_SHARE
        )
    })
}

/// The machine's and this process's times at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    pub at_ns: u64,
    pub cpus: BTreeMap<u32, CpuTicks>,
    /// `None` where the threads' times could not be read.
    pub threads: Option<BTreeMap<u32, u64>>,
    /// This process's descendants, living and reaped ([`Machine::own_children_cpu_ns`]);
    /// `None` where it cannot be read (then they count as other processes).
    pub children_ns: Option<u64>,
}

/// Sums over the windows of one round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stretch {
    pub windows: u64,
    pub window_ns: u64,
    pub steal_ticks: u64,
    pub busy_ticks: u64,
    /// Every thread of smtlab's process; `None` once a window could not read them.
    pub smtlab_ns: Option<u64>,
    /// The cell's measuring threads alone.
    pub measuring_ns: Option<u64>,
}

impl Stretch {
    /// Adds the window from `before` to `after` on `cpus`, with `measuring` the cell's
    /// measuring threads. A thread born in the window counts from zero; one that ended
    /// in it is left out.
    pub fn add_window(
        &mut self,
        before: &Reading,
        after: &Reading,
        cpus: &CpuSet,
        measuring: &BTreeSet<u32>,
    ) {
        self.windows += 1;
        self.window_ns += after.at_ns.saturating_sub(before.at_ns);
        for cpu in cpus.iter() {
            if let (Some(a), Some(b)) = (after.cpus.get(&cpu), before.cpus.get(&cpu)) {
                let d = a.since(b);
                self.steal_ticks += d.steal;
                self.busy_ticks += d.user + d.nice + d.system + d.irq + d.softirq;
            }
        }
        let deltas = match (&before.threads, &after.threads) {
            (Some(b), Some(a)) => Some(
                a.iter()
                    .map(|(tid, ns)| (*tid, ns.saturating_sub(b.get(tid).copied().unwrap_or(0))))
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        };
        let first = self.windows == 1;
        let sum = |acc: Option<u64>, part: Option<u64>| match (acc, part) {
            (Some(a), Some(p)) => Some(a + p),
            (None, Some(p)) if first => Some(p),
            _ => None,
        };
        // smtlab's child processes (a command, a server's or a partner's processes, a
        // load generator) do the cell's work, as its measuring threads do.
        let children = match (before.children_ns, after.children_ns) {
            (Some(b), Some(a)) => a.saturating_sub(b),
            _ => 0,
        };
        // The threads `keep` picks, and the children.
        let cpu_ns = |keep: &dyn Fn(&u32) -> bool| {
            let d = deltas.as_ref()?.iter().filter(|(tid, _)| keep(tid));
            Some(d.map(|(_, ns)| ns).sum::<u64>() + children)
        };
        self.smtlab_ns = sum(self.smtlab_ns, cpu_ns(&|_| true));
        self.measuring_ns = sum(self.measuring_ns, cpu_ns(&|tid| measuring.contains(tid)));
    }

    /// The round's [`Disturbance`]; `sample_cpu_ns`: the CPU time the round's samples
    /// report for their work (all of them), which tells whether that work ran on
    /// smtlab's own threads.
    pub fn disturbance(&self, cpus: u32, tick_ns: u64, sample_cpu_ns: Option<u64>) -> Disturbance {
        let smtlab_other_ns = match (self.smtlab_ns, self.measuring_ns) {
            (Some(all), Some(own)) => Some(all.saturating_sub(own)),
            _ => None,
        };
        // The work's CPU time is (nearly) all on the measuring threads and smtlab's
        // children: none of it ran elsewhere, so what is busy beyond them is foreign.
        let in_process = match (sample_cpu_ns, self.measuring_ns) {
            (Some(work), Some(own)) => work > 0 && own as f64 >= 0.9 * work as f64,
            _ => false,
        };
        let busy_ns = self.busy_ticks.saturating_mul(tick_ns);
        let foreign_ns = match self.smtlab_ns {
            Some(all) if in_process => Some(busy_ns.saturating_sub(all)),
            _ => None,
        };
        Disturbance {
            windows: self.windows,
            window_ns: self.window_ns,
            cpus,
            tick_ns,
            steal_ns: self.steal_ticks.saturating_mul(tick_ns),
            foreign_ns,
            smtlab_other_ns,
            handoff_changed: Vec::new(),
        }
    }
}

/// Records what disturbs one cell, window by window, round by round.
pub struct Probe<'a> {
    machine: &'a dyn Machine,
    clock: &'a dyn Clock,
    cpus: CpuSet,
    tick_ns: u64,
    measuring: BTreeSet<u32>,
    open: Option<Reading>,
    round: Stretch,
    total: Option<Disturbance>,
}

impl<'a> Probe<'a> {
    /// A probe of `cpus` (the cell's); `None` where the machine's CPU times cannot be
    /// read (then nothing is recorded, and nothing is said to have disturbed the cell).
    pub fn new(machine: &'a dyn Machine, clock: &'a dyn Clock, cpus: CpuSet) -> Option<Self> {
        machine.cpu_times()?;
        Some(Probe {
            machine,
            clock,
            cpus,
            tick_ns: machine.tick_ns(),
            measuring: BTreeSet::from([smtlab_placement::pin::gettid() as u32]),
            open: None,
            round: Stretch::default(),
            total: None,
        })
    }

    /// The threads of this process now (to tell which the cell's `prepare` starts).
    pub fn threads_now(&self) -> BTreeSet<u32> {
        self.machine
            .own_threads_cpu_ns()
            .map(|m| m.into_keys().collect())
            .unwrap_or_default()
    }

    /// Counts `tids` as the cell's measuring threads from now on.
    pub fn measuring_threads(&mut self, tids: impl IntoIterator<Item = u32>) {
        self.measuring.extend(tids);
    }

    fn read(&self) -> Option<Reading> {
        Some(Reading {
            at_ns: self.clock.now_ns(),
            cpus: self.machine.cpu_times()?,
            threads: self.machine.own_threads_cpu_ns(),
            children_ns: self.machine.own_children_cpu_ns(),
        })
    }

    /// A sample starts.
    pub fn open(&mut self) {
        self.open = self.read();
    }

    /// The sample ended: its window is added.
    pub fn close(&mut self) {
        let (Some(before), Some(after)) = (self.open.take(), self.read()) else {
            return;
        };
        self.round
            .add_window(&before, &after, &self.cpus, &self.measuring);
    }

    /// The round ended; `sample_cpu_ns`: the CPU time its samples report.
    pub fn end_round(&mut self, sample_cpu_ns: Option<u64>) {
        let round = std::mem::take(&mut self.round);
        if round.windows == 0 {
            return;
        }
        let d = round.disturbance(self.cpus.len() as u32, self.tick_ns, sample_cpu_ns);
        match &mut self.total {
            Some(t) => t.add(&d),
            None => self.total = Some(d),
        }
    }

    /// Everything recorded over the cell's rounds.
    pub fn finish(self) -> Option<Disturbance> {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks(busy: u64, steal: u64) -> CpuTicks {
        CpuTicks {
            user: busy,
            steal,
            ..CpuTicks::default()
        }
    }

    fn reading(at_ns: u64, cpus: &[(u32, u64, u64)], threads: &[(u32, u64)]) -> Reading {
        Reading {
            at_ns,
            cpus: cpus.iter().map(|&(c, b, s)| (c, ticks(b, s))).collect(),
            threads: Some(threads.iter().copied().collect()),
            children_ns: None,
        }
    }

    #[test]
    fn a_window_splits_the_cpus_time_between_the_cell_smtlab_and_the_rest() {
        let cpus = CpuSet::parse_list("0-1").unwrap();
        // 1 s on CPUs 0 and 1 (CPU 2 is not the cell's): 150 ticks busy, 20 stolen;
        // the measuring threads 10 and 11 ran 1.2 s, thread 1 (main) 0.1 s, thread 12
        // (born in the window) 0.05 s.
        let before = reading(
            0,
            &[(0, 100, 5), (1, 100, 5), (2, 0, 0)],
            &[(1, 0), (10, 0), (11, 0)],
        );
        let after = reading(
            1_000_000_000,
            &[(0, 180, 15), (1, 170, 15), (2, 99, 99)],
            &[
                (1, 100_000_000),
                (10, 600_000_000),
                (11, 600_000_000),
                (12, 50_000_000),
            ],
        );
        let mut s = Stretch::default();
        s.add_window(&before, &after, &cpus, &BTreeSet::from([10, 11]));
        assert_eq!((s.steal_ticks, s.busy_ticks), (20, 150));
        let d = s.disturbance(2, 10_000_000, Some(1_150_000_000));
        assert_eq!(d.steal_ns, 200_000_000);
        assert_eq!(d.smtlab_other_ns, Some(150_000_000));
        // 1.5 s busy - 1.35 s of smtlab's threads.
        assert_eq!(d.foreign_ns, Some(150_000_000));
        assert_eq!(
            d.reason().as_deref(),
            Some("steal 10.0%, other processes 7.5%")
        );
    }

    #[test]
    fn work_outside_smtlabs_threads_leaves_other_processes_unknown() {
        let cpus = CpuSet::parse_list("0").unwrap();
        let before = reading(0, &[(0, 0, 0)], &[(1, 0)]);
        let after = reading(1_000_000_000, &[(0, 100, 0)], &[(1, 1_000_000)]);
        let mut s = Stretch::default();
        s.add_window(&before, &after, &cpus, &BTreeSet::from([1]));
        // The samples say 0.9 s of work, the measuring thread ran 1 ms: a process
        // smtlab's children's times do not show.
        let d = s.disturbance(1, 10_000_000, Some(900_000_000));
        assert_eq!(d.foreign_ns, None);
        assert_eq!(d.reason(), None);
    }

    #[test]
    fn smtlabs_child_processes_do_the_cells_work_and_are_not_other_processes() {
        let cpus = CpuSet::parse_list("0").unwrap();
        let mut before = reading(0, &[(0, 0, 0)], &[(1, 0)]);
        let mut after = reading(1_000_000_000, &[(0, 100, 0)], &[(1, 10_000_000)]);
        // A command (or a partner's) ran 0.9 s in smtlab's children.
        before.children_ns = Some(50_000_000);
        after.children_ns = Some(950_000_000);
        let mut s = Stretch::default();
        s.add_window(&before, &after, &cpus, &BTreeSet::from([1]));
        let d = s.disturbance(1, 10_000_000, Some(900_000_000));
        // 1 s busy - 0.91 s of smtlab's thread and children.
        assert_eq!(d.foreign_ns, Some(90_000_000));
        assert_eq!(d.smtlab_other_ns, Some(0));
        assert_eq!(d.reason().as_deref(), Some("other processes 9.0%"));
    }

    #[test]
    fn this_process_counts_the_cpu_time_of_the_children_it_reaped() {
        let machine = crate::machine::RealMachine;
        let Some(before) = machine.own_children_cpu_ns() else {
            eprintln!("skipped: proc/self/stat cannot be read here");
            return;
        };
        // A child that spins about 0.3 s of CPU, then is reaped.
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(status.success());
        let after = machine.own_children_cpu_ns().unwrap();
        let spun = std::time::Duration::from_nanos(after - before);
        assert!(spun.as_millis() >= 20, "{spun:?}");
    }

    #[test]
    fn a_machine_with_steal_says_so_and_one_without_does_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        let machine = crate::machine::FakeMachine::at(&dir.path().join("tree")).unwrap();
        let tree = dir.path().join("tree/proc/stat");
        std::fs::create_dir_all(tree.parent().unwrap()).unwrap();
        std::fs::write(
            &tree,
            "cpu  1 0 0 1 0 0 0 0\ncpu0 600 0 100 290 0 0 0 10\ncpu1 0 0 0 1000 0 0 0 0\n",
        )
        .unwrap();
        let note = steal_note(&machine).unwrap();
        assert!(note.contains("steal 0.50%"), "{note}");
        std::fs::write(&tree, "cpu0 600 0 100 300 0 0 0 0\n").unwrap();
        assert_eq!(steal_note(&machine), None);
    }
}
