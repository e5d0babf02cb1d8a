//! Kernel time by system call (paper 003 Fig 7): per syscall number, how often it was
//! entered and how long the completed calls took from entry to exit, grouped by what
//! they work on (file, network, process, memory, other).
//!
//! Time is wall time between the `raw_syscalls:sys_enter` and `sys_exit` tracepoints of
//! one thread, so a blocking call (a `read` waiting for data, `futex`, `epoll_wait`)
//! counts its sleep too: that is time the thread spent in the call, not CPU time.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::CounterTarget;

/// What a system call works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyscallGroup {
    /// Files and file descriptors in general (read, write, open, stat, ...).
    File,
    /// Sockets (socket, sendto, recvfrom, accept, ...).
    Network,
    /// Processes, threads, signals, scheduling, waiting (clone, futex, wait4, ...).
    Process,
    /// Address space (mmap, munmap, brk, madvise, ...).
    Memory,
    Other,
}

impl SyscallGroup {
    pub const ALL: [SyscallGroup; 5] = [
        SyscallGroup::File,
        SyscallGroup::Network,
        SyscallGroup::Process,
        SyscallGroup::Memory,
        SyscallGroup::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SyscallGroup::File => "file",
            SyscallGroup::Network => "network",
            SyscallGroup::Process => "process",
            SyscallGroup::Memory => "memory",
            SyscallGroup::Other => "other",
        }
    }
}

impl fmt::Display for SyscallGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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
    /// Sum of entry-to-exit times of the completed calls.
    pub total_ns: u64,
    pub max_ns: u64,
}

impl SyscallStat {
    /// `name` or `syscall_<nr>`.
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("syscall_{}", self.nr))
    }

    pub fn mean_ns(&self) -> Option<f64> {
        (self.completed > 0).then(|| self.total_ns as f64 / self.completed as f64)
    }
}

/// Totals of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStat {
    pub group: SyscallGroup,
    pub calls: u64,
    pub completed: u64,
    pub total_ns: u64,
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
                    total_ns: 0,
                };
                for c in self.syscalls.iter().filter(|c| c.group == g) {
                    s.calls += c.calls;
                    s.completed += c.completed;
                    s.total_ns += c.total_ns;
                }
                (s.calls > 0).then_some(s)
            })
            .collect()
    }

    /// Time in all completed calls.
    pub fn total_ns(&self) -> u64 {
        self.syscalls.iter().map(|s| s.total_ns).sum()
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
            total_ns: ns,
            max_ns: ns,
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
        };
        let g = p.by_group();
        assert_eq!(g.len(), 2);
        assert_eq!(
            (g[0].group, g[0].calls, g[0].total_ns),
            (SyscallGroup::File, 5, 500)
        );
        assert_eq!(p.total_ns(), 550);
        assert_eq!(p.find("sendto").unwrap().nr, 44);
    }
}
