//! Paper 001 Table 1 ("Effects of Hyper-Threading on Linux APIs", LMbench): which of our
//! benchmarks fills which row, and the row label as the paper prints it.
//!
//! The report owns this small table rather than asking the benchmark crate, so that it
//! depends on the results' data model only and can render results from any smtlab
//! version.

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Table1Row {
    /// Our benchmark name.
    pub bench: &'static str,
    /// The paper's row label.
    pub label: &'static str,
    /// Parameters the label assumes (`Select on 10 fd's` is `fds=10`); a cell measured
    /// with other values gets them appended to its label.
    pub params: &'static [(&'static str, &'static str)],
}

const fn row(bench: &'static str, label: &'static str) -> Table1Row {
    Table1Row {
        bench,
        label,
        params: &[],
    }
}

/// The rows in the paper's order.
pub const TABLE1: [Table1Row; 14] = [
    row("null-syscall", "Simple syscall"),
    row("read", "Simple read"),
    row("write", "Simple write"),
    row("stat", "Simple stat"),
    row("fstat", "Simple fstat"),
    row("open-close", "Simple open/close"),
    Table1Row {
        bench: "select-file",
        label: "Select on 10 fd's",
        params: &[("fds", "10")],
    },
    Table1Row {
        bench: "select-tcp",
        label: "Select on 10 tcp fd's",
        params: &[("fds", "10")],
    },
    row("sig-install", "Signal handler installation"),
    row("sig-handler", "Signal handler overhead"),
    row("pipe-latency", "Pipe latency"),
    row("fork-exit", "Process fork+exit"),
    row("fork-exec", "Process fork+execve"),
    row("fork-sh", "Process fork+/bin/sh -c"),
];

/// The row of `bench`, if it is one of the table's.
pub fn row_of(bench: &str) -> Option<(usize, &'static Table1Row)> {
    TABLE1.iter().enumerate().find(|(_, r)| r.bench == bench)
}
