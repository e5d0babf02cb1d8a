//! Kernel time by system call (paper 003 Fig 7): per syscall number, how often it was
//! entered and how long the completed calls took from entry to exit, grouped by what
//! they work on (file, network, process, memory, other).
//!
//! Two times per call, both labelled:
//! * **CPU time** (`cpu_ns`): the time the thread was on a CPU between the
//!   `raw_syscalls:sys_enter` and `sys_exit` tracepoints, that is the wall time less
//!   every stretch it was switched out inside the call (the kernel's context-switch
//!   records of the traced task). This is kernel time as CPU time (paper 003 Fig 7):
//!   a `read` that sleeps 100 ms waiting for data costs only the microseconds it ran.
//! * **wall time** (`wall_ns`): entry to exit, sleep included (the time the thread
//!   spent in the call, what a latency profile wants).
//!
//! `cpu_ns` is `None` where the kernel gave no context-switch records (before Linux
//! 4.3) or in results stored before it was measured.

use serde::{Deserialize, Serialize};

use super::CounterTarget;

named_enum! {
    /// What a system call works on.
    #[derive(Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum SyscallGroup {
        /// Files and file descriptors in general (read, write, open, stat, ...).
        File = "file",
        /// Sockets (socket, sendto, recvfrom, accept, ...).
        Network = "network",
        /// Processes, threads, signals, scheduling, waiting (clone, futex, wait4, ...).
        Process = "process",
        /// Address space (mmap, munmap, brk, madvise, ...).
        Memory = "memory",
        Other = "other",
    }
}

/// One system call number's totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallStat {
    /// The architecture's syscall number.
    pub nr: i64,
    /// Its name where known (`getppid`), else `None`.
    pub name: Option<String>,
    pub group: SyscallGroup,
    /// Times it was entered.
    pub calls: u64,
    /// Entries whose exit was seen too; only these contribute time.
    pub completed: u64,
    /// Sum of entry-to-exit wall times of the completed calls (sleep included).
    #[serde(alias = "total_ns")]
    pub wall_ns: u64,
    /// The longest entry-to-exit wall time.
    #[serde(alias = "max_ns")]
    pub max_wall_ns: u64,
    /// Sum of the CPU time inside the completed calls: wall time less the time the
    /// thread was switched out in them. `None` when switches were not traced.
    #[serde(default)]
    pub cpu_ns: Option<u64>,
    /// How often a completed call was switched out (blocked or preempted) before it
    /// returned.
    #[serde(default)]
    pub switched_out: u64,
}

impl SyscallStat {
    /// `name` or `syscall_<nr>`.
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("syscall_{}", self.nr))
    }

    /// Mean wall time of a completed call.
    pub fn mean_wall_ns(&self) -> Option<f64> {
        (self.completed > 0).then(|| self.wall_ns as f64 / self.completed as f64)
    }

    /// CPU time where it was measured, else wall time: what "time in the call" ranks by.
    pub fn rank_ns(&self) -> u64 {
        self.cpu_ns.unwrap_or(self.wall_ns)
    }
}

/// Totals of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStat {
    pub group: SyscallGroup,
    pub calls: u64,
    pub completed: u64,
    pub wall_ns: u64,
    /// `None` when switches were not traced.
    pub cpu_ns: Option<u64>,
}

/// Everything the syscall tracer saw over one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyscallProfile {
    pub target: CounterTarget,
    /// From enabling to disabling the tracepoints.
    pub duration_ns: u64,
    /// Most time first.
    pub syscalls: Vec<SyscallStat>,
    /// Exits without a matching entry: calls already running when tracing started
    /// (and the child's return from `clone`/`fork`).
    pub unmatched_exits: u64,
    /// Entries with no exit: still running when tracing stopped (a blocked `read`),
    /// or calls that never return (`exit_group`).
    pub unfinished: u64,
    /// Records the kernel dropped because the ring buffer was full. When this is not
    /// zero the counts are lower bounds and some times may be missing.
    pub lost_records: u64,
    /// Whether the traced threads' context switches were recorded, so `cpu_ns` is known.
    #[serde(default)]
    pub switches_traced: bool,
}

impl SyscallProfile {
    /// Totals per group, in [`SyscallGroup::ALL`] order, groups without calls left out.
    pub fn by_group(&self) -> Vec<GroupStat> {
        SyscallGroup::ALL
            .iter()
            .filter_map(|&g| {
                let mut s = GroupStat {
                    group: g,
                    calls: 0,
                    completed: 0,
                    wall_ns: 0,
                    cpu_ns: self.switches_traced.then_some(0),
                };
                for c in self.syscalls.iter().filter(|c| c.group == g) {
                    s.calls += c.calls;
                    s.completed += c.completed;
                    s.wall_ns += c.wall_ns;
                    s.cpu_ns = s.cpu_ns.zip(c.cpu_ns).map(|(a, b)| a + b);
                }
                (s.calls > 0).then_some(s)
            })
            .collect()
    }

    /// Wall time in all completed calls (sleep included).
    pub fn wall_ns(&self) -> u64 {
        self.syscalls.iter().map(|s| s.wall_ns).sum()
    }

    /// CPU time in all completed calls; `None` when switches were not traced.
    pub fn cpu_ns(&self) -> Option<u64> {
        if !self.switches_traced {
            return None;
        }
        self.syscalls.iter().map(|s| s.cpu_ns).sum()
    }

    /// The entry for a syscall name (`getppid`).
    pub fn find(&self, name: &str) -> Option<&SyscallStat> {
        self.syscalls
            .iter()
            .find(|s| s.name.as_deref() == Some(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(nr: i64, name: &str, group: SyscallGroup, calls: u64, ns: u64) -> SyscallStat {
        SyscallStat {
            nr,
            name: Some(name.to_string()),
            group,
            calls,
            completed: calls,
            wall_ns: ns,
            max_wall_ns: ns,
            cpu_ns: Some(ns / 10),
            switched_out: 0,
        }
    }

    #[test]
    fn groups_sum_their_calls() {
        let p = SyscallProfile {
            target: CounterTarget::Thread {
                tid: 0,
                inherit: false,
            },
            duration_ns: 1000,
            syscalls: vec![
                stat(0, "read", SyscallGroup::File, 3, 300),
                stat(1, "write", SyscallGroup::File, 2, 200),
                stat(44, "sendto", SyscallGroup::Network, 1, 50),
            ],
            unmatched_exits: 0,
            unfinished: 0,
            lost_records: 0,
            switches_traced: true,
        };
        let g = p.by_group();
        assert_eq!(g.len(), 2);
        assert_eq!(
            (g[0].group, g[0].calls, g[0].wall_ns, g[0].cpu_ns),
            (SyscallGroup::File, 5, 500, Some(50))
        );
        assert_eq!(p.wall_ns(), 550);
        assert_eq!(p.cpu_ns(), Some(55));
        // Results stored before CPU time was measured still read, wall time only.
        let old = r#"{"nr":0,"name":"read","group":"file","calls":1,"completed":1,"total_ns":9,"max_ns":9}"#;
        let s: SyscallStat = serde_json::from_str(old).unwrap();
        assert_eq!(
            (s.wall_ns, s.max_wall_ns, s.cpu_ns, s.rank_ns()),
            (9, 9, None, 9)
        );
        assert_eq!(p.find("sendto").unwrap().nr, 44);
    }
}
