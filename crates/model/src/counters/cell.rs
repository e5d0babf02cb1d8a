//! Everything counted around one measured cell (`smtlab bench --counters`, `smtlab run
//! --counters`, `smtlab exec --counters`): the perf_event counts, the work they cover,
//! the `/proc/stat` time of the placement's CPUs and the kernel time by system call,
//! each with a one-line reason where it could not be measured.
//!
//! Kept as one value so the store keeps it as one JSON column and a results file
//! carries it unchanged; everything derived (CPI, MPKI, per-unit costs, start-up vs
//! steady state) is recomputed from it by the pure functions of [`super::derived`] and
//! [`super::os_time`], except [`CellCounters::per_unit`], which is stored as well so
//! that JSON readers get the headline figures without reimplementing them.

use serde::{Deserialize, Serialize};

use super::derived::{Work, WorkCost, work_cost};
use super::os_time::{PhaseBreakdown, StartupSplit};
use super::syscalls::SyscallProfile;
use super::{CountMode, CounterEvent, CounterValues, EventClass};
use crate::counters::os_time::OsTimeSeries;

/// The counters of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellCounters {
    /// What the counts cover, in words: `measured samples (calibration and warm-up
    /// excluded)` for benchmarks, `5 runs (warm-up excluded)` for `exec`.
    pub window: String,
    /// The perf_event counts, with the reason for every event that could not be counted.
    pub values: CounterValues,
    /// The work done inside the window (the measured samples' work), for per-unit costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Work>,
    /// Cost per unit of `work` ([`work_cost`] in [`CountMode::All`]); every field is
    /// `None` where its event was not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_unit: Option<WorkCost>,
    /// One line saying why there are no hardware counters (`hardware counters not
    /// supported: this KVM guest exposes no PMU ...`), when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_unavailable: Option<String>,
    /// `/proc/stat` time of the placement's CPUs (every online CPU for `os`), sampled
    /// from before the benchmark was prepared until the window closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_time: Option<OsTimeSeries>,
    /// Where the window (steady state) began on the `os_time` clock; earlier intervals
    /// are start-up: preparing, calibrating, warming up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_from_ns: Option<u64>,
    /// Why there is no `os_time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_time_unavailable: Option<String>,
    /// Kernel time by system call. Traced on one extra sample (or run) after the
    /// window, never during it: tracing every call costs about half a microsecond per
    /// call and would distort the measured samples. `syscalls_window` says which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls: Option<SyscallProfile>,
    /// What the syscall profile covers (`one extra sample of 8523 iterations after the
    /// measured ones`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls_window: Option<String>,
    /// Why there is no `syscalls` profile (tracefs not mounted, not permitted, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls_unavailable: Option<String>,
    /// Interrupt time by vector on the placement's CPUs, traced CPU-wide over the same
    /// extra sample as `syscalls` (`syscalls_window`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqs: Option<super::irqs::IrqProfile>,
    /// Why there is no `irqs` profile (not root, no irq tracepoints, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irqs_unavailable: Option<String>,
    /// Kernel time by cause (page faults, lock waits) of the traced tasks, over the
    /// same extra sample as `syscalls` (`syscalls_window`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_time: Option<Box<super::kernel_time::KernelTimeProfile>>,
    /// Why there is no `kernel_time` profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_time_unavailable: Option<String>,
}

impl CellCounters {
    /// Counts with nothing else yet; `per_unit` is computed from `work`.
    pub fn new(window: impl Into<String>, values: CounterValues, work: Option<Work>) -> Self {
        let per_unit = work.as_ref().map(|w| work_cost(&values, CountMode::All, w));
        CellCounters {
            window: window.into(),
            values,
            work,
            per_unit,
            hardware_unavailable: None,
            os_time: None,
            steady_from_ns: None,
            os_time_unavailable: None,
            syscalls: None,
            syscalls_window: None,
            syscalls_unavailable: None,
            irqs: None,
            irqs_unavailable: None,
            kernel_time: None,
            kernel_time_unavailable: None,
        }
    }

    /// The scaled count of `event` over user and kernel mode; `None` when not counted.
    pub fn count(&self, event: CounterEvent) -> Option<f64> {
        self.values.count(event, CountMode::All)
    }

    /// Whether any hardware event was counted.
    pub fn has_hardware(&self) -> bool {
        self.values
            .events
            .iter()
            .any(|e| e.event.class() == EventClass::Hardware && e.count(CountMode::All).is_some())
    }

    /// The `/proc/stat` series cut at `steady_from_ns` (or at 10% of the run when the
    /// window start is unknown) into start-up and steady state.
    pub fn os_phases(&self) -> Option<PhaseBreakdown> {
        let series = self.os_time.as_ref()?;
        let split = match self.steady_from_ns {
            Some(ns) => StartupSplit::Seconds(ns as f64 / 1e9),
            None => StartupSplit::default(),
        };
        Some(series.phases(split))
    }

    /// Every float this value holds, named, so a store can refuse non-finite ones
    /// (JSON has no NaN) with the field at fault.
    pub fn floats(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        for e in &self.values.events {
            for (mode, r) in [("user", e.user), ("kernel", e.kernel), ("all", e.all)] {
                if let Some(x) = r.and_then(|r| r.scaled) {
                    out.push((format!("counters.{}.{mode}.scaled", e.event), x));
                }
            }
        }
        for r in &self.values.named {
            if let Some(x) = r.reading.scaled {
                out.push((format!("counters.named.{}.scaled", r.name), x));
            }
            if let Some(x) = r.scale {
                out.push((format!("counters.named.{}.scale", r.name), x));
            }
        }
        if let Some(w) = &self.work {
            out.push(("counters.work.amount".into(), w.amount));
        }
        if let Some(p) = &self.per_unit {
            for (name, x) in [
                ("instructions_per_unit", p.instructions_per_unit),
                ("cycles_per_unit", p.cycles_per_unit),
                ("cpu_ns_per_unit", p.cpu_ns_per_unit),
                ("context_switches_per_unit", p.context_switches_per_unit),
                ("page_faults_per_unit", p.page_faults_per_unit),
            ] {
                if let Some(x) = x {
                    out.push((format!("counters.per_unit.{name}"), x));
                }
            }
        }
        out
    }
}

/// The unit of one unit of work for a benchmark unit: bytes for bandwidths (`GB/s`,
/// `Gbit/s`), operations otherwise (`GOPS`, `ns` per operation, `Mops/s`).
pub fn work_unit_for(bench_unit: &crate::Unit) -> &'static str {
    use crate::Unit;
    match bench_unit {
        Unit::ByteRate(_) => "byte",
        // Bit rates (`Gbit/s`, `Mbit/s`) count their work in bytes too, as bandwidths do.
        Unit::Counted { what, .. } if what == "bit/s" => "byte",
        _ => "op",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{CounterTarget, Reading};

    #[test]
    fn rates_of_bytes_and_bits_count_bytes() {
        assert_eq!(work_unit_for(&"GB/s".into()), "byte");
        assert_eq!(work_unit_for(&"Gbit/s".into()), "byte");
        assert_eq!(work_unit_for(&"Mbit/s".into()), "byte");
        assert_eq!(work_unit_for(&"msg/s".into()), "op");
        assert_eq!(work_unit_for(&"ns".into()), "op");
    }

    #[test]
    fn per_unit_costs_come_from_counted_events_only() {
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: true,
        });
        v.set(
            CounterEvent::TaskClock,
            CountMode::All,
            Reading::exact(2_000),
        );
        let c = CellCounters::new(
            "measured samples",
            v,
            Some(Work {
                amount: 100.0,
                unit: "op".into(),
            }),
        );
        let p = c.per_unit.as_ref().unwrap();
        assert_eq!(p.cpu_ns_per_unit, Some(20.0));
        assert_eq!(p.instructions_per_unit, None);
        assert!(!c.has_hardware());
        assert_eq!(c.floats().len(), 3);
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("os_time"), "{json}");
        let back: CellCounters = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn work_units_follow_the_benchmark_unit() {
        assert_eq!(work_unit_for(&"GB/s".into()), "byte");
        assert_eq!(work_unit_for(&"ns".into()), "op");
        assert_eq!(work_unit_for(&"GOPS".into()), "op");
    }
}
