//! Metrics derived from counts: pure functions of [`CounterValues`].
//!
//! Every function takes a [`CountMode`] (all, user only, kernel only: paper 003 compares
//! kernel and user behaviour) and returns `None` when an input event was not measured
//! in that mode, or a denominator is zero. A missing event never becomes a zero.
//!
//! * CPI = cycles / instructions, IPC = its inverse (paper 000 s4, 004 Chart 2).
//! * MPKI = misses per 1000 instructions; miss ratio = misses / accesses (paper 004
//!   Charts 3-7 use per-instruction rates; paper 000 Figs 9-13 use ratios).
//! * Cost per unit of work: instructions, cycles, CPU ns per operation, request or byte
//!   (paper 000 Table 4, instructions per byte).
//!
//! The CPI stack is [`super::cpi_stack`]'s.

use serde::{Deserialize, Serialize};

use super::{CountMode, CounterEvent, CounterValues};

/// A cache or TLB level: the event counting its read accesses and its read misses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MissPair {
    /// Short label for tables: `L1D`, `L1I`, `LLC`, `DTLB`, `ITLB`.
    pub label: &'static str,
    pub accesses: CounterEvent,
    pub misses: CounterEvent,
}

/// The cache and TLB levels smtlab reports, in report order.
pub const MISS_PAIRS: [MissPair; 5] = {
    use CounterEvent::*;
    [
        MissPair::new("L1D", L1dReads, L1dReadMisses),
        MissPair::new("L1I", L1iReads, L1iReadMisses),
        MissPair::new("LLC", LlcReads, LlcReadMisses),
        MissPair::new("DTLB", DtlbReads, DtlbReadMisses),
        MissPair::new("ITLB", ItlbReads, ItlbReadMisses),
    ]
};

impl MissPair {
    const fn new(label: &'static str, accesses: CounterEvent, misses: CounterEvent) -> MissPair {
        MissPair {
            label,
            accesses,
            misses,
        }
    }
}

/// `num / den` of two measured counts; `None` if either is missing or `den` is zero.
pub fn ratio(
    v: &CounterValues,
    num: CounterEvent,
    den: CounterEvent,
    mode: CountMode,
) -> Option<f64> {
    let n = v.count(num, mode)?;
    let d = v.count(den, mode)?;
    (d > 0.0).then(|| n / d)
}

/// Cycles per instruction.
pub fn cpi(v: &CounterValues, mode: CountMode) -> Option<f64> {
    ratio(v, CounterEvent::Cycles, CounterEvent::Instructions, mode)
}

/// Instructions per cycle.
pub fn ipc(v: &CounterValues, mode: CountMode) -> Option<f64> {
    ratio(v, CounterEvent::Instructions, CounterEvent::Cycles, mode)
}

/// Events per 1000 instructions (MPKI when `event` is a miss event).
pub fn per_kilo_instruction(
    v: &CounterValues,
    event: CounterEvent,
    mode: CountMode,
) -> Option<f64> {
    ratio(v, event, CounterEvent::Instructions, mode).map(|r| r * 1000.0)
}

/// Misses / accesses of one cache or TLB level.
pub fn miss_ratio(v: &CounterValues, pair: &MissPair, mode: CountMode) -> Option<f64> {
    ratio(v, pair.misses, pair.accesses, mode)
}

/// Mispredicted branches / branches.
pub fn branch_miss_ratio(v: &CounterValues, mode: CountMode) -> Option<f64> {
    ratio(v, CounterEvent::BranchMisses, CounterEvent::Branches, mode)
}

/// `event` per unit of work (`work` operations, requests or bytes); `None` when the
/// event was not measured or `work` is not a positive number.
pub fn per_unit(v: &CounterValues, event: CounterEvent, mode: CountMode, work: f64) -> Option<f64> {
    if !(work.is_finite() && work > 0.0) {
        return None;
    }
    Some(v.count(event, mode)? / work)
}

/// Kernel share of an event: kernel / (user + kernel), from the split counts.
pub fn kernel_share(v: &CounterValues, event: CounterEvent) -> Option<f64> {
    let r = v.get(event)?;
    let k = r.kernel?.scaled?;
    let u = r.user?.scaled?;
    (k + u > 0.0).then(|| k / (k + u))
}

/// An amount of work to normalise by: `amount` `unit`s (`requests`, `bytes`, `ops`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Work {
    pub amount: f64,
    pub unit: String,
}

/// Cost per unit of work (paper 000 Table 4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkCost {
    pub unit: String,
    pub instructions_per_unit: Option<f64>,
    pub cycles_per_unit: Option<f64>,
    /// CPU time per unit (task-clock).
    pub cpu_ns_per_unit: Option<f64>,
    pub context_switches_per_unit: Option<f64>,
    pub page_faults_per_unit: Option<f64>,
}

/// Cost of `work` in `mode`.
pub fn work_cost(v: &CounterValues, mode: CountMode, work: &Work) -> WorkCost {
    let per = |event| per_unit(v, event, mode, work.amount);
    WorkCost {
        unit: work.unit.clone(),
        instructions_per_unit: per(CounterEvent::Instructions),
        cycles_per_unit: per(CounterEvent::Cycles),
        cpu_ns_per_unit: per(CounterEvent::TaskClock),
        context_switches_per_unit: per(CounterEvent::ContextSwitches),
        page_faults_per_unit: per(CounterEvent::PageFaults),
    }
}

/// Miss rates of one cache or TLB level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissMetrics {
    pub label: String,
    pub misses_event: CounterEvent,
    /// Misses per 1000 instructions.
    pub mpki: Option<f64>,
    /// Misses / accesses.
    pub miss_ratio: Option<f64>,
}

/// Every derived metric of one measurement in one mode, for tables and JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DerivedMetrics {
    pub mode: CountMode,
    pub cpi: Option<f64>,
    pub ipc: Option<f64>,
    pub branch_miss_ratio: Option<f64>,
    pub branch_mpki: Option<f64>,
    pub misses: Vec<MissMetrics>,
    /// stalled-cycles-frontend / cycles.
    pub frontend_stall_ratio: Option<f64>,
    /// stalled-cycles-backend / cycles.
    pub backend_stall_ratio: Option<f64>,
    /// Kernel share of instructions and of cycles (from the user/kernel split;
    /// independent of `mode`).
    pub kernel_instruction_share: Option<f64>,
    pub kernel_cycle_share: Option<f64>,
    pub work: Option<WorkCost>,
}

/// Computes every metric of `v` in `mode`.
pub fn derive(v: &CounterValues, mode: CountMode, work: Option<&Work>) -> DerivedMetrics {
    let per_cycle = |event| ratio(v, event, CounterEvent::Cycles, mode);
    DerivedMetrics {
        mode,
        cpi: cpi(v, mode),
        ipc: ipc(v, mode),
        branch_miss_ratio: branch_miss_ratio(v, mode),
        branch_mpki: per_kilo_instruction(v, CounterEvent::BranchMisses, mode),
        misses: MISS_PAIRS
            .iter()
            .map(|p| MissMetrics {
                label: p.label.to_string(),
                misses_event: p.misses,
                mpki: per_kilo_instruction(v, p.misses, mode),
                miss_ratio: miss_ratio(v, p, mode),
            })
            .collect(),
        frontend_stall_ratio: per_cycle(CounterEvent::StalledCyclesFrontend),
        backend_stall_ratio: per_cycle(CounterEvent::StalledCyclesBackend),
        kernel_instruction_share: kernel_share(v, CounterEvent::Instructions),
        kernel_cycle_share: kernel_share(v, CounterEvent::Cycles),
        work: work.map(|w| work_cost(v, mode, w)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{CounterTarget, Reading};

    fn values(counts: &[(CounterEvent, u64)]) -> CounterValues {
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: false,
        });
        for &(e, c) in counts {
            v.set(e, CountMode::All, Reading::exact(c));
        }
        v
    }

    #[test]
    fn cpi_and_mpki_are_exact() {
        let v = values(&[
            (CounterEvent::Cycles, 3000),
            (CounterEvent::Instructions, 2000),
            (CounterEvent::LlcReadMisses, 10),
            (CounterEvent::LlcReads, 40),
        ]);
        assert_eq!(cpi(&v, CountMode::All), Some(1.5));
        assert_eq!(
            per_kilo_instruction(&v, CounterEvent::LlcReadMisses, CountMode::All),
            Some(5.0)
        );
        assert_eq!(miss_ratio(&v, &MISS_PAIRS[2], CountMode::All), Some(0.25));
        assert_eq!(cpi(&v, CountMode::User), None);
        assert_eq!(branch_miss_ratio(&v, CountMode::All), None);
    }

    #[test]
    fn per_unit_rejects_zero_work() {
        let v = values(&[(CounterEvent::Instructions, 100)]);
        assert_eq!(
            per_unit(&v, CounterEvent::Instructions, CountMode::All, 0.0),
            None
        );
        assert_eq!(
            per_unit(&v, CounterEvent::Instructions, CountMode::All, 4.0),
            Some(25.0)
        );
    }
}
