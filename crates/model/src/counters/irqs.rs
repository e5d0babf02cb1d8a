//! Interrupt time by vector (paper 003's kernel-time breakdown, beside the system
//! calls): per hardware interrupt line, per x86 system vector (local timer,
//! rescheduling and function-call IPIs, irq work) and per softirq (TIMER, NET_RX,
//! RCU, ...), how often it ran on the placement's CPUs and for how long.
//!
//! Times are **exclusive CPU time**: from the `*_entry` to the `*_exit` tracepoint on
//! one CPU, less any interrupt nested inside (a hard interrupt that hits a softirq is
//! counted once, as itself). The handler's own entry and exit paths around the
//! tracepoints are not included, so the sums are a little below `/proc/stat`'s irq and
//! softirq time, whose split is kept by kind only.

use serde::{Deserialize, Serialize};

use crate::CpuSet;

named_enum! {
    /// What kind of interrupt a vector is.
    #[derive(Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum IrqKind {
        /// A device interrupt line (`irq:irq_handler_entry`): `vector` is the Linux irq
        /// number.
        Hardirq = "hardirq",
        /// An architecture system vector (`irq_vectors:*_entry` on x86: local timer,
        /// rescheduling IPI, function-call IPIs, irq work).
        Vector = "system vector",
        /// A softirq (`irq:softirq_entry`): `vector` is its number (1 TIMER, 3 NET_RX, ...).
        Softirq = "softirq",
    }
}

/// One vector's totals over the traced CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqStat {
    pub kind: IrqKind,
    /// Irq number, softirq number, or the system vector's index in the tracer's list.
    pub vector: i64,
    /// `NET_RX`, `local_timer`, or the device's action name (`virtio0-input.0`).
    pub name: String,
    /// Entries whose exit was seen too.
    pub count: u64,
    /// Exclusive CPU time of those runs.
    pub cpu_ns: u64,
    pub max_ns: u64,
}

impl IrqStat {
    /// `softirq NET_RX`, `hardirq 11 virtio0`.
    pub fn label(&self) -> String {
        match self.kind {
            IrqKind::Hardirq => format!("irq {} {}", self.vector, self.name),
            _ => self.name.clone(),
        }
    }
}

/// What the interrupt tracer saw over one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IrqProfile {
    /// The CPUs traced (the placement's).
    pub cpus: CpuSet,
    /// From enabling to disabling the tracepoints.
    pub duration_ns: u64,
    /// Most CPU time first.
    pub stats: Vec<IrqStat>,
    /// The tracepoint pairs that were traced (`irq:softirq`, `irq_vectors:local_timer`).
    pub traced: Vec<String>,
    /// Exits without their entry (an interrupt running when tracing began), entries
    /// without their exit.
    pub unmatched: u64,
    /// Records the kernel dropped (buffer full): counts are then lower bounds.
    pub lost_records: u64,
}

impl IrqProfile {
    /// CPU time per kind, in [`IrqKind::ALL`] order, kinds never seen left out.
    pub fn by_kind(&self) -> Vec<(IrqKind, u64, u64)> {
        IrqKind::ALL
            .iter()
            .filter_map(|&k| {
                let (n, ns) = self
                    .stats
                    .iter()
                    .filter(|s| s.kind == k)
                    .fold((0, 0), |(n, ns), s| (n + s.count, ns + s.cpu_ns));
                (n > 0).then_some((k, n, ns))
            })
            .collect()
    }

    /// A vector's CPU time as a share of the traced CPUs' time.
    pub fn share(&self, cpu_ns: u64) -> Option<f64> {
        let all = self.duration_ns as f64 * self.cpus.len() as f64;
        (all > 0.0).then(|| cpu_ns as f64 / all)
    }

    /// The entry of `kind` named `name`.
    pub fn find(&self, kind: IrqKind, name: &str) -> Option<&IrqStat> {
        self.stats.iter().find(|s| s.kind == kind && s.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_sum_and_shares_divide_by_cpus_and_time() {
        let s = |kind, vector, name: &str, count, cpu_ns| IrqStat {
            kind,
            vector,
            name: name.into(),
            count,
            cpu_ns,
            max_ns: cpu_ns,
        };
        let p = IrqProfile {
            cpus: CpuSet::from_iter([0, 1]),
            duration_ns: 1_000_000,
            stats: vec![
                s(IrqKind::Softirq, 3, "NET_RX", 10, 30_000),
                s(IrqKind::Softirq, 1, "TIMER", 5, 10_000),
                s(IrqKind::Hardirq, 11, "virtio0", 2, 4_000),
            ],
            traced: vec!["irq:softirq".into()],
            unmatched: 0,
            lost_records: 0,
        };
        assert_eq!(
            p.by_kind(),
            [(IrqKind::Hardirq, 2, 4_000), (IrqKind::Softirq, 15, 40_000)]
        );
        assert_eq!(p.share(40_000), Some(0.02));
        assert_eq!(p.stats[2].label(), "irq 11 virtio0");
        assert_eq!(p.find(IrqKind::Softirq, "TIMER").unwrap().count, 5);
    }
}
