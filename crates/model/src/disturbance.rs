//! What disturbed a cell while it measured: time the hypervisor took from the cell's CPUs
//! (steal), CPU time other processes spent on them, and smtlab's own CPU time outside
//! the cell's measuring threads, each summed over the cell's own sample windows (from
//! just before each of its samples to just after it, so the turns other cells of an
//! interleaved group take are left out).
//!
//! A cell is **disturbed** when steal or other processes took more than
//! [`DISTURBED_SHARE`] of the CPU time its CPUs had in those windows, and more than the
//! figure's own resolution ([`Disturbance::resolution_ns`]): `/proc/stat` counts in
//! ticks (10 ms at the usual 100 Hz), so over short windows a few ticks either way are
//! noise, not disturbance. Like an unsteady cell, a disturbed cell is never called
//! faster or slower ([`crate::verdict`]): its figure carries someone else's load.
//!
//! A cell on two CPUs or more is disturbed, too, when the CPUs moved under it
//! ([`HandoffChange`]): a cache-line handoff read just before or just after it differs
//! from the run's start by [`crate::run::HANDOFF_CHANGE`] or more, so a host put the
//! virtual CPUs on others that share differently (another die) while the run went on.

use serde::{Deserialize, Serialize};

/// Above this share of the cell's CPU time lost to steal or to other processes, the
/// cell is disturbed: a steady benchmark's samples spread by about 1-2%, so a loss
/// beyond that can move its figure by more than its own noise.
pub const DISTURBED_SHARE: f64 = 0.02;

/// What disturbed one cell, summed over its sample windows (all rounds).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Disturbance {
    /// Sample windows summed (one per measured sample).
    pub windows: u64,
    /// Wall time of those windows, summed.
    pub window_ns: u64,
    /// The cell's CPUs (the placement's; every online CPU for `os`).
    pub cpus: u32,
    /// One `/proc/stat` tick in nanoseconds (10 ms at 100 Hz): the unit the steal and
    /// busy times below were counted in.
    pub tick_ns: u64,
    /// Steal time of the cell's CPUs (`/proc/stat`): time the hypervisor ran something
    /// else on them.
    pub steal_ns: u64,
    /// CPU time of other processes (and the kernel's interrupt work) on the cell's CPUs:
    /// their busy time in `/proc/stat` minus every thread of smtlab's own process.
    /// `None` where the cell's work ran outside smtlab's process (a child process, a
    /// server), whose CPU time this figure could not tell from another process's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_ns: Option<u64>,
    /// CPU time of smtlab's threads other than the cell's measuring ones (the main
    /// thread, other cells' threads, progress, samplers), wherever they ran
    /// (`/proc/self/task/*/schedstat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smtlab_other_ns: Option<u64>,
    /// The CPU pairs whose cache-line handoff, read just before or just after the cell,
    /// differs from the run's start by [`crate::run::HANDOFF_CHANGE`] or more; empty
    /// where none did, for a cell on one CPU and where the run recorded no handoff.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handoff_changed: Vec<HandoffChange>,
}

/// One CPU pair's cache-line handoff at the run's start and again around a cell, in
/// nanoseconds (`Environment::cpu_handoff`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HandoffChange {
    pub from_cpu: u32,
    pub to_cpu: u32,
    pub start_ns: f64,
    pub cell_ns: f64,
}

impl HandoffChange {
    /// `CPU 0-1 handoff 190 ns, 22 ns at the run's start`.
    pub fn text(&self) -> String {
        format!(
            "CPU {}-{} handoff {:.0} ns, {:.0} ns at the run's start",
            self.from_cpu, self.to_cpu, self.cell_ns, self.start_ns
        )
    }

    /// Adds to `into` the pairs of `more` it does not hold yet.
    pub fn merge(into: &mut Vec<Self>, more: &[Self]) {
        for change in more {
            let pair = (change.from_cpu, change.to_cpu);
            if !into.iter().any(|c| (c.from_cpu, c.to_cpu) == pair) {
                into.push(*change);
            }
        }
    }

    /// The pairs of `changes` (a run's start, a reading) found by
    /// [`crate::run::handoff_changes`].
    pub fn from_pairs(changes: &[(crate::run::Handoff, crate::run::Handoff)]) -> Vec<Self> {
        changes
            .iter()
            .map(|(start, now)| HandoffChange {
                from_cpu: start.from_cpu,
                to_cpu: start.to_cpu,
                start_ns: start.ns,
                cell_ns: now.ns,
            })
            .collect()
    }
}

impl Disturbance {
    /// The CPU time the cell's CPUs had over its windows: wall time times CPUs.
    pub fn cpu_ns(&self) -> u64 {
        self.window_ns.saturating_mul(u64::from(self.cpus))
    }

    fn share(&self, ns: u64) -> Option<f64> {
        let cpu = self.cpu_ns();
        (cpu > 0).then(|| ns as f64 / cpu as f64)
    }

    /// Steal as a share of the cell's CPU time.
    pub fn steal_share(&self) -> Option<f64> {
        self.share(self.steal_ns)
    }

    /// Other processes' CPU time as a share of the cell's CPU time.
    pub fn foreign_share(&self) -> Option<f64> {
        self.foreign_ns.and_then(|n| self.share(n))
    }

    /// smtlab's own non-measuring CPU time as a share of the cell's CPU time.
    pub fn smtlab_other_share(&self) -> Option<f64> {
        self.smtlab_other_ns.and_then(|n| self.share(n))
    }

    /// How far a tick-counted figure can be off by chance: each window's count is off by
    /// up to a tick per CPU, at most a quarter tick squared in variance, so one standard
    /// deviation over every window and CPU is half a tick times the root of their number,
    /// and this bound is four of them: two ticks times that root. Four, not two: a run
    /// judges a few hundred cells, and at two standard deviations one or two cells of
    /// every quick suite on a quiet machine were marked disturbed by the counting alone
    /// (windows of 2.5-21 ms, some at 121-212% of the CPU time there was).
    pub fn resolution_ns(&self) -> u64 {
        let cells = (self.windows.saturating_mul(u64::from(self.cpus))) as f64;
        (2.0 * self.tick_ns as f64 * cells.sqrt()).round() as u64
    }

    /// Why the cell is disturbed (`steal 4.2%`, `other processes 3.1%`, `CPUs moved:
    /// CPU 0-1 handoff 190 ns, 22 ns at the run's start`), or `None`: a figure beyond
    /// [`DISTURBED_SHARE`] of the cell's CPU time and beyond its resolution, or a
    /// handoff that changed.
    pub fn reason(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let [first, rest @ ..] = self.handoff_changed.as_slice() {
            let more = match rest.len() {
                0 => String::new(),
                1 => " and 1 more pair".into(),
                n => format!(" and {n} more pairs"),
            };
            parts.push(format!("CPUs moved: {}{more}", first.text()));
        }
        // Without a window read there is nothing to say of steal or other processes.
        let cpu = self.cpu_ns() as f64;
        if cpu > 0.0 {
            let floor = (DISTURBED_SHARE * cpu).max(self.resolution_ns() as f64);
            if self.steal_ns as f64 > floor {
                parts.push(format!("steal {:.1}%", 100.0 * self.steal_ns as f64 / cpu));
            }
            if let Some(f) = self.foreign_ns.filter(|&f| f as f64 > floor) {
                parts.push(format!("other processes {:.1}%", 100.0 * f as f64 / cpu));
            }
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// Adds another stretch of windows (a later round) of the same cell.
    pub fn add(&mut self, other: &Disturbance) {
        // A stretch that could not tell makes the whole unknown.
        let opt = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| a + b);
        HandoffChange::merge(&mut self.handoff_changed, &other.handoff_changed);
        if self.windows == 0 {
            let changed = std::mem::take(&mut self.handoff_changed);
            *self = Disturbance {
                handoff_changed: changed,
                ..other.clone()
            };
            return;
        }
        self.windows += other.windows;
        self.window_ns += other.window_ns;
        self.steal_ns += other.steal_ns;
        self.foreign_ns = opt(self.foreign_ns, other.foreign_ns);
        self.smtlab_other_ns = opt(self.smtlab_other_ns, other.smtlab_other_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(windows: u64, window_ns: u64, steal_ns: u64, foreign_ns: Option<u64>) -> Disturbance {
        Disturbance {
            windows,
            window_ns,
            cpus: 2,
            tick_ns: 10_000_000,
            steal_ns,
            foreign_ns,
            smtlab_other_ns: Some(0),
            handoff_changed: Vec::new(),
        }
    }

    fn moved(to_cpu: u32, start_ns: f64, cell_ns: f64) -> HandoffChange {
        HandoffChange {
            from_cpu: 0,
            to_cpu,
            start_ns,
            cell_ns,
        }
    }

    #[test]
    fn cpus_that_moved_disturb_with_or_without_windows_read() {
        let mut cell = d(100, 1_000_000_000, 400_000_000, Some(0));
        cell.handoff_changed = vec![moved(1, 22.4, 190.2)];
        assert_eq!(
            cell.reason().as_deref(),
            Some("CPUs moved: CPU 0-1 handoff 190 ns, 22 ns at the run's start, steal 20.0%")
        );
        // A cell whose windows could not be read is disturbed by the move alone.
        let mut bare = Disturbance {
            handoff_changed: vec![moved(1, 22.0, 190.0), moved(2, 25.0, 200.0)],
            ..Default::default()
        };
        let why = bare.reason().unwrap();
        assert!(why.ends_with("at the run's start and 1 more pair"), "{why}");
        // Rounds pooled keep each pair once, and the windows of the later round.
        bare.add(&cell);
        assert_eq!(bare.handoff_changed.len(), 2);
        assert_eq!(bare.windows, 100);
        // Stored before the field existed: nothing moved.
        let old: Disturbance = serde_json::from_str(
            r#"{"windows":1,"window_ns":5,"cpus":1,"tick_ns":10,"steal_ns":0}"#,
        )
        .unwrap();
        assert!(old.handoff_changed.is_empty());
        assert!(!serde_json::to_string(&old).unwrap().contains("handoff"));
    }

    #[test]
    fn steal_beyond_the_share_and_the_resolution_disturbs() {
        // 100 windows of 10 ms on 2 CPUs: 2 s of CPU time, resolution 2 x 10 ms x
        // sqrt(200), 283 ms.
        let cell = d(100, 1_000_000_000, 400_000_000, Some(0));
        assert_eq!(cell.resolution_ns(), 282_842_712);
        assert_eq!(cell.reason().as_deref(), Some("steal 20.0%"));
        assert!((cell.steal_share().unwrap() - 0.2).abs() < 1e-12);
        // Below the resolution, however far past 2%.
        assert_eq!(d(100, 1_000_000_000, 250_000_000, Some(0)).reason(), None);
        // Long windows: the 2% floor is the bound (5 of 1 s on 2 CPUs: 63 ms < 200 ms).
        let long = d(5, 5_000_000_000, 0, Some(300_000_000));
        assert_eq!(long.reason().as_deref(), Some("other processes 3.0%"));
    }

    /// Cells of a quick suite on this 2-CPU machine, quiet, that two standard deviations
    /// marked disturbed: the tick counting alone, beyond the CPU time there was.
    #[test]
    fn the_tick_counting_of_short_windows_alone_does_not_disturb() {
        // mem-copy on 2c1t: 5 windows of 2.5 ms on 2 CPUs, "other processes 186.9%".
        let mem_copy = d(5, 12_696_818, 0, Some(47_457_349));
        assert!(mem_copy.foreign_share().unwrap() > 1.8);
        assert_eq!(mem_copy.reason(), None);
        // sig-handler on 1c1t: 5 windows of 2.7 ms on 1 CPU, 212.1%.
        let mut sig = d(5, 13_485_000, 0, Some(28_600_000));
        sig.cpus = 1;
        assert_eq!(sig.reason(), None);
        // task-pool on all: 5 windows of 21 ms on 2 CPUs, 14.9%.
        assert_eq!(d(5, 106_000_000, 0, Some(31_700_000)).reason(), None);
    }

    #[test]
    fn a_share_below_two_percent_is_not_a_disturbance() {
        let cell = d(100, 1_000_000_000, 30_000_000, Some(30_000_000));
        assert_eq!(cell.reason(), None);
    }

    #[test]
    fn a_few_ticks_over_short_windows_are_noise() {
        // 5 windows of 2 ms on 2 CPUs: 20 ms of CPU time; one 10 ms tick of steal is 50%
        // of it, and no more than a tick of chance.
        let cell = d(5, 10_000_000, 10_000_000, Some(10_000_000));
        assert_eq!(cell.reason(), None);
    }

    #[test]
    fn other_processes_are_named_with_their_share() {
        let cell = d(100, 1_000_000_000, 0, Some(500_000_000));
        assert_eq!(cell.reason().as_deref(), Some("other processes 25.0%"));
    }

    #[test]
    fn rounds_add_up_and_an_unknown_stays_unknown() {
        let mut a = d(10, 100, 5, Some(1));
        a.add(&d(20, 200, 7, None));
        assert_eq!((a.windows, a.window_ns, a.steal_ns), (30, 300, 12));
        assert_eq!(a.foreign_ns, None);
    }
}
