//! Kernel time by cause (paper 003 Figs 2-4 and 6): how long the traced tasks spent in
//! page faults, waiting for contended kernel locks and flushing their TLB for another
//! CPU, as a share of their CPU time,
//! beside the system-call profile ([`super::syscalls`]) and over the same traced extra
//! sample.
//!
//! * **Faults**: from the `exceptions:page_fault_user`/`page_fault_kernel` tracepoint
//!   (the fault's entry) to the kernel's minor- or major-fault software event of the
//!   same task, which the kernel raises once `handle_mm_fault` has resolved the fault
//!   (a retried fault once, at its last try). The time covers finding the VMA, taking
//!   its lock, allocating, zeroing or reading the page and mapping it; it leaves out the
//!   few hundred nanoseconds of the exception's entry before the tracepoint and its
//!   return to user mode. A fault that ends in a signal (a bad address) or is fixed up
//!   without `handle_mm_fault` has no end and is counted in `unfinished`.
//! * **Lock waits**: `lock:contention_begin` to `contention_end` of the same lock and
//!   task (Linux 5.19 and later); a lock waited for while another wait of the same task
//!   is open (a mutex's wait-queue spinlock) counts inside the outer wait only.
//! * **TLB shootdowns received**: a function-call interrupt that hit a traced task
//!   (`irq_vectors:call_function_entry`/`_exit`, or `call_function_single_*`) and in
//!   which the kernel flushed the TLB for another CPU (`tlb:tlb_flush` with reason
//!   `TLB_REMOTE_SHOOTDOWN`): the handler's whole run, entry to exit, which is the CPU
//!   time the shootdown took from the task (an interrupt is never switched out, so CPU
//!   and wall time are the same). Other function calls queued on the same interrupt run
//!   inside it and count with it. The sender's side is counted (`--events kernel`,
//!   `tlb-shootdowns-sent`), not timed: the kernel traces when it sends the interrupts,
//!   but nothing when the acknowledgements it then waits for have all come back.
//!
//! Each time comes twice, like a system call's: **CPU time** (`cpu_ns`, the wall time
//! less every stretch the task was switched out: a major fault sleeping on I/O, a
//! mutex sleeping) and **wall time**. A lock waited for inside a fault counts in both
//! the fault and the lock wait, so the causes' shares do not add up.
//!
//! The share is of the traced tasks' CPU time over the traced sample
//! (`task_cpu_ns`, the kernel's task clock of the same tasks).

use serde::{Deserialize, Serialize};

use super::CounterTarget;

named_enum! {
    /// What the kernel spent the time on.
    #[derive(Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "kebab-case")]
    pub enum KernelCause {
        /// A fault taken in user mode, resolved without I/O.
        FaultUserMinor = "user minor faults",
        /// A fault taken in user mode that waited for I/O (or was retried).
        FaultUserMajor = "user major faults",
        /// A fault the kernel took touching user memory (`copy_to_user`), minor.
        FaultKernelMinor = "kernel minor faults",
        /// The same, major.
        FaultKernelMajor = "kernel major faults",
        /// Waiting for a contended kernel lock (spinning or sleeping).
        LockWait = "lock waits",
        /// A TLB flush another CPU asked for, in the interrupt that brought the request.
        TlbShootdownReceived = "TLB shootdowns received",
    }
}

impl KernelCause {
    /// The fault cause for a fault taken in user (`user`) or kernel mode, minor or major.
    pub fn fault(user: bool, major: bool) -> KernelCause {
        match (user, major) {
            (true, false) => KernelCause::FaultUserMinor,
            (true, true) => KernelCause::FaultUserMajor,
            (false, false) => KernelCause::FaultKernelMinor,
            (false, true) => KernelCause::FaultKernelMajor,
        }
    }

    pub fn is_fault(self) -> bool {
        matches!(
            self,
            KernelCause::FaultUserMinor
                | KernelCause::FaultUserMajor
                | KernelCause::FaultKernelMinor
                | KernelCause::FaultKernelMajor
        )
    }
}

/// The completed events of one cause and their time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CauseTime {
    pub cause: KernelCause,
    /// Faults resolved, or lock waits that ended, inside the trace.
    pub completed: u64,
    /// Entry (or wait begin) to end, sleep included.
    pub wall_ns: u64,
    pub max_wall_ns: u64,
    /// Wall time less the stretches switched out; `None` without switch records.
    pub cpu_ns: Option<u64>,
}

impl CauseTime {
    /// Mean wall time of one event.
    pub fn mean_wall_ns(&self) -> Option<f64> {
        (self.completed > 0).then(|| self.wall_ns as f64 / self.completed as f64)
    }
}

/// Everything the kernel-cause tracer saw over one traced sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelTimeProfile {
    pub target: CounterTarget,
    /// From enabling to disabling the tracer.
    pub duration_ns: u64,
    /// CPU time of the traced tasks over the same stretch (their task clock): what
    /// the shares are of. `None` where it could not be read.
    pub task_cpu_ns: Option<u64>,
    /// Causes with at least one completed event, in [`KernelCause::ALL`] order.
    pub causes: Vec<CauseTime>,
    /// Faults that began and never ended in `handle_mm_fault` (a signal, a fix-up, or
    /// still running at the end), and lock waits without an end.
    pub unfinished: u64,
    /// Ends without a begin: events already running when tracing started.
    pub unmatched_ends: u64,
    /// Records the kernel dropped (ring buffer full): counts are lower bounds.
    pub lost_records: u64,
    /// Whether context switches were recorded, so `cpu_ns` is known.
    pub switches_traced: bool,
    /// What could not be traced here, each with its one-line reason (`lock waits: this
    /// kernel has no tracepoint lock:contention_begin`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

impl KernelTimeProfile {
    /// The entry of `cause`, when it had a completed event.
    pub fn find(&self, cause: KernelCause) -> Option<&CauseTime> {
        self.causes.iter().find(|c| c.cause == cause)
    }

    /// Every fault cause summed: `(completed, wall_ns, cpu_ns)`.
    pub fn faults(&self) -> Option<CauseTime> {
        let mut it = self.causes.iter().filter(|c| c.cause.is_fault()).peekable();
        it.peek()?;
        let mut sum = CauseTime {
            cause: KernelCause::FaultUserMinor,
            completed: 0,
            wall_ns: 0,
            max_wall_ns: 0,
            cpu_ns: self.switches_traced.then_some(0),
        };
        for c in it {
            sum.completed += c.completed;
            sum.wall_ns += c.wall_ns;
            sum.max_wall_ns = sum.max_wall_ns.max(c.max_wall_ns);
            sum.cpu_ns = sum.cpu_ns.zip(c.cpu_ns).map(|(a, b)| a + b);
        }
        Some(sum)
    }

    /// `ns` as a fraction of the traced tasks' CPU time.
    pub fn share(&self, ns: u64) -> Option<f64> {
        let total = self.task_cpu_ns.filter(|&t| t > 0)?;
        Some(ns as f64 / total as f64)
    }

    /// The terminal's parts: `faults 1.2 ms CPU (4.1% of CPU time, 812, wall 1.3 ms)`,
    /// one per cause group with events, formatted by `duration`.
    pub fn summary_parts(&self, duration: impl Fn(f64) -> String) -> Vec<String> {
        let mut out = Vec::new();
        let faults = self.faults();
        let locks = self.find(KernelCause::LockWait).copied();
        let tlb = self.find(KernelCause::TlbShootdownReceived).copied();
        for (what, stat) in [
            ("faults", faults),
            ("lock waits", locks),
            ("TLB shootdowns received", tlb),
        ] {
            let Some(s) = stat else { continue };
            let share = s
                .cpu_ns
                .and_then(|c| self.share(c))
                .map(|f| format!(", {:.2}% of CPU time", f * 100.0))
                .unwrap_or_default();
            out.push(match s.cpu_ns {
                Some(c) => format!(
                    "{what} x{} CPU {}{share} (wall {})",
                    s.completed,
                    duration(c as f64),
                    duration(s.wall_ns as f64)
                ),
                None => format!(
                    "{what} x{} wall {}",
                    s.completed,
                    duration(s.wall_ns as f64)
                ),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(cause: KernelCause, n: u64, wall: u64, cpu: u64) -> CauseTime {
        CauseTime {
            cause,
            completed: n,
            wall_ns: wall,
            max_wall_ns: wall / n.max(1),
            cpu_ns: Some(cpu),
        }
    }

    #[test]
    fn faults_sum_and_shares_are_of_the_task_clock() {
        let p = KernelTimeProfile {
            target: CounterTarget::Thread {
                tid: 0,
                inherit: true,
            },
            duration_ns: 10_000,
            task_cpu_ns: Some(8_000),
            causes: vec![
                stat(KernelCause::FaultUserMinor, 4, 400, 400),
                stat(KernelCause::FaultKernelMajor, 1, 3000, 200),
                stat(KernelCause::LockWait, 2, 500, 100),
                stat(KernelCause::TlbShootdownReceived, 3, 240, 240),
            ],
            unfinished: 0,
            unmatched_ends: 0,
            lost_records: 0,
            switches_traced: true,
            unavailable: vec![],
        };
        let f = p.faults().unwrap();
        assert_eq!((f.completed, f.wall_ns, f.cpu_ns), (5, 3400, Some(600)));
        assert!(!KernelCause::TlbShootdownReceived.is_fault());
        assert_eq!(p.share(600), Some(0.075));
        let parts = p.summary_parts(|ns| format!("{ns}ns"));
        assert_eq!(
            parts,
            [
                "faults x5 CPU 600ns, 7.50% of CPU time (wall 3400ns)",
                "lock waits x2 CPU 100ns, 1.25% of CPU time (wall 500ns)",
                "TLB shootdowns received x3 CPU 240ns, 3.00% of CPU time (wall 240ns)"
            ]
        );
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains("\"fault-user-minor\""), "{json}");
        let back: KernelTimeProfile = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
    }
}
