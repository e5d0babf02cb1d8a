//! Performance-counter results as plain data: which events were counted, in which
//! privilege mode, for which target, with how much multiplexing, and why the others
//! could not be counted. The counters crate produces these; the store keeps them and
//! the report shows them, without either knowing perf_event.
//!
//! * [`CounterValues`]: one measurement (per event a [`EventReading`] with user, kernel
//!   and/or combined [`Reading`]s, plus the [`UnavailableEvent`]s and their reasons).
//! * [`derived`]: pure functions from counts to CPI/IPC, MPKI, miss ratios, cost per
//!   unit of work. Every derived value is an `Option`: `None` whenever an input was
//!   not measured.
//! * [`cpi_stack`]: the CPI stack (paper 000 Fig 19) from the generic and model-table
//!   events, at this machine's measured latencies where known, adding to the measured
//!   CPI with a stated residual.
//! * [`os_time`]: `/proc/stat` time split (user, system, irq, softirq, idle, ...) over
//!   a run, with start-up vs steady state (paper 003 Figs 1, 5).
//! * [`syscalls`]: kernel time by system call and by group (paper 003 Fig 7), as CPU
//!   time and wall time.
//! * [`irqs`]: interrupt time by vector (hard interrupts, system vectors, softirqs).
//! * [`named`]: events counted by name (`--events`), with their encoding, scale, unit.
//! * [`topdown`]: top-down level 1 from named events (Intel perf metrics, the older
//!   Intel slot formula, AMD dispatch slots), each with its thread/core scope.
//! * [`bandwidth`]: DRAM bandwidth from memory-controller CAS counts.
//! * [`cell`]: all of the above for one measured cell ([`CellCounters`]), as a cell
//!   record keeps it.
//!
//! A [`Reading`] keeps the raw count *and* the kernel's enabled/running times so a
//! reader can judge multiplexing: the scaled estimate is `raw * enabled / running`,
//! and an event that never ran on the PMU (`running == 0`) has no estimate at all
//! rather than a misleading zero.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::CpuSet;

pub use cell::CellCounters;
pub use named::{NamedReading, NamedUnavailable};

pub mod bandwidth;
pub mod cell;
pub mod cpi_stack;
pub mod derived;
pub mod irqs;
pub mod kernel_time;
pub mod named;
pub mod os_time;
pub mod smt_loss;
pub mod syscalls;
pub mod topdown;

/// Whether an event counts in the CPU's PMU or in the kernel's software counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventClass {
    Hardware,
    Software,
}

named_enum! {
    serde_names;
    /// The events smtlab knows how to count, hardware first, in the order reports list
    /// them. Serialised with perf's own names (`perf list`, as [`CounterEvent::name`]
    /// gives them: `L1-dcache-load-misses`), so results read the same as `perf stat`
    /// output.
    #[derive(Hash, PartialOrd, Ord, Serialize, Deserialize)]
    pub enum CounterEvent {
        Cycles = "cycles",
        Instructions = "instructions",
        RefCycles = "ref-cycles",
        Branches = "branches",
        BranchMisses = "branch-misses",
        StalledCyclesFrontend = "stalled-cycles-frontend",
        StalledCyclesBackend = "stalled-cycles-backend",
        L1dReads = "L1-dcache-loads",
        L1dReadMisses = "L1-dcache-load-misses",
        L1iReads = "L1-icache-loads",
        L1iReadMisses = "L1-icache-load-misses",
        LlcReads = "LLC-loads",
        LlcReadMisses = "LLC-load-misses",
        DtlbReads = "dTLB-loads",
        DtlbReadMisses = "dTLB-load-misses",
        ItlbReads = "iTLB-loads",
        ItlbReadMisses = "iTLB-load-misses",
        /// CPU time of the target in nanoseconds.
        TaskClock = "task-clock",
        ContextSwitches = "context-switches",
        CpuMigrations = "cpu-migrations",
        PageFaults = "page-faults",
    }
}

impl CounterEvent {
    pub fn class(self) -> EventClass {
        match self {
            CounterEvent::TaskClock
            | CounterEvent::ContextSwitches
            | CounterEvent::CpuMigrations
            | CounterEvent::PageFaults => EventClass::Software,
            _ => EventClass::Hardware,
        }
    }

    /// Whether counting the event separately in user and kernel mode means something.
    ///
    /// Not for task-clock (the kernel's clock events ignore the exclude bits, so the
    /// "user" and "kernel" counts would each be the whole time) nor for context
    /// switches and migrations (they happen inside the scheduler, so a user-only count
    /// is always zero). Those are counted once, with nothing excluded.
    pub fn splits_by_privilege(self) -> bool {
        !matches!(
            self,
            CounterEvent::TaskClock | CounterEvent::ContextSwitches | CounterEvent::CpuMigrations
        )
    }

    /// The unit of the count: `ns` for task-clock, `events` otherwise.
    pub fn unit(self) -> &'static str {
        match self {
            CounterEvent::TaskClock => "ns",
            _ => "events",
        }
    }
}

/// An event name that is not one of [`CounterEvent::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown counter event `{0}` (expected a perf name such as cycles, instructions, L1-dcache-load-misses, task-clock)"
)]
pub struct UnknownEvent(pub String);

impl FromStr for CounterEvent {
    type Err = UnknownEvent;

    /// Accepts perf's names, case-insensitively (`llc-load-misses` works).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CounterEvent::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownEvent(s.to_string()))
    }
}

named_enum! {
    /// Which privilege mode a count covers.
    #[derive(Hash, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum CountMode {
        /// Everything: either one event counted with nothing excluded, or the sum of the
        /// user and kernel counts.
        All = "all",
        /// User mode only (counted with `exclude_kernel=1, exclude_hv=1`).
        User = "user",
        /// Kernel mode only (counted with `exclude_user=1, exclude_hv=1`).
        Kernel = "kernel",
    }
}

/// One counter as read from the kernel (or the sum over the CPUs of a CPU-wide count).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// The count as the kernel reported it, before scaling.
    pub raw: u64,
    /// Time the event was enabled (`PERF_FORMAT_TOTAL_TIME_ENABLED`).
    pub time_enabled_ns: u64,
    /// Time the event was actually on a counter (`PERF_FORMAT_TOTAL_TIME_RUNNING`);
    /// less than `time_enabled_ns` when the kernel multiplexed it with other events.
    pub time_running_ns: u64,
    /// Estimate of the count over the whole enabled time: `raw * enabled / running`
    /// (summed part by part for CPU-wide counts). `None` when the event never ran.
    pub scaled: Option<f64>,
}

impl Reading {
    /// A reading from the three numbers `read(2)` returns, with its scaled estimate.
    pub fn new(raw: u64, time_enabled_ns: u64, time_running_ns: u64) -> Reading {
        let scaled = if time_running_ns == 0 {
            // Never scheduled on a counter: the raw zero says nothing about the workload.
            None
        } else if time_running_ns >= time_enabled_ns {
            Some(raw as f64)
        } else {
            Some(raw as f64 * time_enabled_ns as f64 / time_running_ns as f64)
        };
        Reading {
            raw,
            time_enabled_ns,
            time_running_ns,
            scaled,
        }
    }

    /// A reading that was not multiplexed (enabled == running); handy for fakes.
    pub fn exact(raw: u64) -> Reading {
        Reading::new(raw, 1, 1)
    }

    /// `enabled / running`: 1.0 when the event counted all the time, 4.0 when it was
    /// on a counter a quarter of the time. `None` when it never ran.
    pub fn scale_factor(&self) -> Option<f64> {
        if self.time_running_ns == 0 {
            None
        } else {
            Some((self.time_enabled_ns as f64 / self.time_running_ns as f64).max(1.0))
        }
    }

    /// Whether the kernel multiplexed the event (it ran less than it was enabled).
    pub fn multiplexed(&self) -> bool {
        self.time_running_ns < self.time_enabled_ns
    }

    /// Sum of two readings of the same event (two CPUs, or user + kernel): raw counts,
    /// times and scaled estimates add; the estimate is `None` if either part has none.
    pub fn sum(&self, other: &Reading) -> Reading {
        Reading {
            raw: self.raw.saturating_add(other.raw),
            time_enabled_ns: self.time_enabled_ns.saturating_add(other.time_enabled_ns),
            time_running_ns: self.time_running_ns.saturating_add(other.time_running_ns),
            scaled: self.scaled.zip(other.scaled).map(|(a, b)| a + b),
        }
    }
}

/// Everything counted for one event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventReading {
    pub event: CounterEvent,
    /// Counted in user mode only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Reading>,
    /// Counted in kernel mode only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Reading>,
    /// Counted once with nothing excluded (events whose split means nothing, or when
    /// the caller did not ask for the split).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<Reading>,
}

impl EventReading {
    /// The reading for one mode. For [`CountMode::All`] that is the combined reading if
    /// there is one, else user + kernel when both were counted.
    pub fn reading(&self, mode: CountMode) -> Option<Reading> {
        match mode {
            CountMode::User => self.user,
            CountMode::Kernel => self.kernel,
            CountMode::All => self.all.or_else(|| Some(self.user?.sum(&self.kernel?))),
        }
    }

    /// The scaled count for one mode; `None` when that mode was not measured.
    pub fn count(&self, mode: CountMode) -> Option<f64> {
        self.reading(mode)?.scaled
    }

    /// The largest `enabled / running` among this event's readings.
    pub fn max_scale_factor(&self) -> Option<f64> {
        [self.user, self.kernel, self.all]
            .iter()
            .flatten()
            .filter_map(Reading::scale_factor)
            .max_by(f64::total_cmp)
    }
}

/// An event (in one mode) that could not be counted, and the one-line reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnavailableEvent {
    pub event: CounterEvent,
    pub mode: CountMode,
    /// E.g. `not supported on this machine (ENOENT)` or
    /// `permission: perf_event_paranoid is 2; run as root or ...`.
    pub reason: String,
}

/// What the counters were attached to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CounterTarget {
    /// One thread (`tid` 0: the thread that opened the counters), on any CPU; with
    /// `inherit`, also every thread and process it creates after the counters opened.
    Thread { tid: i32, inherit: bool },
    /// Everything that runs on these CPUs (CPU-wide counting), summed over the CPUs.
    Cpus { cpus: CpuSet },
    /// Counted elsewhere and read back from a file (`perf stat` output).
    Recorded,
}

impl fmt::Display for CounterTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CounterTarget::Thread { tid, inherit } => {
                match tid {
                    0 => f.write_str("calling thread")?,
                    tid => write!(f, "thread {tid}")?,
                }
                f.write_str(if *inherit { " and children" } else { "" })
            }
            CounterTarget::Cpus { cpus } => write!(f, "cpus {}", cpus.to_list_string()),
            CounterTarget::Recorded => f.write_str("recorded by perf stat"),
        }
    }
}

/// One counter measurement: every event that was counted, and every one that was not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterValues {
    pub target: CounterTarget,
    pub events: Vec<EventReading>,
    #[serde(default)]
    pub unavailable: Vec<UnavailableEvent>,
    /// Events asked for by name (`--events`): sysfs aliases, raw PMU terms, the
    /// built-in model-specific table. Kept apart from `events` because their set is
    /// open-ended and each carries its own encoding, scale and unit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub named: Vec<NamedReading>,
    /// Named events that could not be counted here, each with its one-line reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub named_unavailable: Vec<NamedUnavailable>,
}

impl CounterValues {
    /// No events yet, for building up.
    pub fn new(target: CounterTarget) -> CounterValues {
        CounterValues {
            target,
            events: Vec::new(),
            unavailable: Vec::new(),
            named: Vec::new(),
            named_unavailable: Vec::new(),
        }
    }

    /// The named event `name` (as it was asked for, or as the built-in table and the
    /// kernel's aliases call it), if it was counted.
    pub fn named(&self, name: &str) -> Option<&NamedReading> {
        self.named
            .iter()
            .find(|r| r.name.eq_ignore_ascii_case(name))
    }

    /// The value of a named event (scaled for multiplexing, times its sysfs `.scale`).
    pub fn named_value(&self, name: &str) -> Option<f64> {
        self.named(name)?.value()
    }

    pub fn get(&self, event: CounterEvent) -> Option<&EventReading> {
        self.events.iter().find(|r| r.event == event)
    }

    /// The scaled count of `event` in `mode`, or `None` if it was not measured.
    pub fn count(&self, event: CounterEvent, mode: CountMode) -> Option<f64> {
        self.get(event)?.count(mode)
    }

    /// Sets one mode's reading of an event, adding the event if needed.
    pub fn set(&mut self, event: CounterEvent, mode: CountMode, reading: Reading) {
        let idx = match self.events.iter().position(|r| r.event == event) {
            Some(i) => i,
            None => {
                self.events.push(EventReading {
                    event,
                    user: None,
                    kernel: None,
                    all: None,
                });
                self.events.len() - 1
            }
        };
        let slot = &mut self.events[idx];
        match mode {
            CountMode::User => slot.user = Some(reading),
            CountMode::Kernel => slot.kernel = Some(reading),
            CountMode::All => slot.all = Some(reading),
        }
    }

    /// Why `event` could not be counted in `mode`, if it could not.
    pub fn unavailable_reason(&self, event: CounterEvent, mode: CountMode) -> Option<&str> {
        self.unavailable
            .iter()
            .find(|u| u.event == event && u.mode == mode)
            .map(|u| u.reason.as_str())
    }

    /// Events the kernel multiplexed, with their largest scale factor, so a report can
    /// say "cycles was scaled x2.0".
    pub fn multiplexed(&self) -> Vec<(CounterEvent, f64)> {
        self.events
            .iter()
            .filter_map(|r| {
                let f = r.max_scale_factor()?;
                (f > 1.0).then_some((r.event, f))
            })
            .collect()
    }

    /// Named events the kernel multiplexed, with their scale factor (`enabled / running`).
    pub fn named_multiplexed(&self) -> Vec<(&str, f64)> {
        self.named
            .iter()
            .filter_map(|r| {
                let f = r.reading.scale_factor()?;
                (f > 1.0).then_some((r.name.as_str(), f))
            })
            .collect()
    }
}

/// Whether a class of measurement works on this machine, and if not, why (one line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassStatus {
    pub available: bool,
    /// Set when `available` is false.
    pub reason: Option<String>,
}

impl ClassStatus {
    pub fn yes() -> ClassStatus {
        ClassStatus {
            available: true,
            reason: None,
        }
    }

    pub fn no(reason: impl Into<String>) -> ClassStatus {
        ClassStatus {
            available: false,
            reason: Some(reason.into()),
        }
    }
}

/// What the counters crate can measure on this machine (measurement rule 12).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterAvailability {
    pub perf_event_paranoid: Option<i32>,
    /// cycles and friends from the CPU's PMU.
    pub hardware: ClassStatus,
    /// task-clock, context switches, migrations, page faults.
    pub software: ClassStatus,
    /// Counting in kernel mode (`exclude_user=1`), needed for the user/kernel split.
    pub kernel_mode: ClassStatus,
    /// CPU-wide counting (`pid=-1, cpu=N`), needed for per-CPU-set counts.
    pub cpu_wide: ClassStatus,
    /// raw_syscalls tracepoints with raw samples, needed for kernel time by syscall.
    pub syscall_tracing: ClassStatus,
    /// Per-event result of opening it on the calling thread in user mode.
    pub events: Vec<EventStatus>,
}

/// Whether one event opens here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventStatus {
    pub event: CounterEvent,
    pub available: bool,
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_scales_by_enabled_over_running() {
        let r = Reading::new(1000, 200, 100);
        assert_eq!(r.scaled, Some(2000.0));
        assert_eq!(r.scale_factor(), Some(2.0));
        assert!(r.multiplexed());
        let never = Reading::new(0, 500, 0);
        assert_eq!(never.scaled, None);
        assert_eq!(never.scale_factor(), None);
    }

    #[test]
    fn all_mode_sums_user_and_kernel_only_when_both_exist() {
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: false,
        });
        v.set(CounterEvent::Cycles, CountMode::User, Reading::exact(70));
        assert_eq!(v.count(CounterEvent::Cycles, CountMode::All), None);
        v.set(
            CounterEvent::Cycles,
            CountMode::Kernel,
            Reading::new(15, 2, 1),
        );
        assert_eq!(v.count(CounterEvent::Cycles, CountMode::All), Some(100.0));
        assert_eq!(v.multiplexed(), vec![(CounterEvent::Cycles, 2.0)]);
    }

    #[test]
    fn event_names_round_trip() {
        for e in CounterEvent::ALL {
            assert_eq!(e.name().parse::<CounterEvent>(), Ok(e));
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(json, format!("\"{}\"", e.name()));
        }
        assert!("llc-load-misses".parse::<CounterEvent>().is_ok());
        assert!("bogus".parse::<CounterEvent>().is_err());
    }
}
