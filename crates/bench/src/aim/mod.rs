//! AIM9's throughput rows (paper 001 Table 2), all 59 of them, in the paper's order
//! ([`TABLE2`]): one benchmark per row, group `aim`, each a throughput in AIM9's unit
//! (operations per second; thousands for the arithmetic rows, bytes for disk and copy),
//! run by one measuring thread pinned to the placement's first CPU (message and
//! shared-memory rows put their echo thread on the second CPU, or the first again when
//! there is one). Each row's catalog entry names its AIM9 row and what the paper says it
//! counts ([`smtlab_model::ReportSection::AimRow`]), so the report lays out the table.
//!
//! One module per family, each documenting its rows:
//!
//! | module | rows |
//! |---|---|
//! | [`arith`] | add, mul and div of double, float, long, int, short (`aim-add-double` ...) |
//! | [`calls`] | fun_cal, fun_cal1, fun_cal2, fun_cal15 |
//! | [`sys`] | creat-clo, page_test, brk_test, jmp_test, signal_test, exec_test, fork_test, link_test, disk_src, dir_rtns_1 |
//! | [`rtns`] | num_rtns_1, trig_rtns, matrix_rtns, array_rtns, string_rtns, mem_rtns_1, mem_rtns_2, misc_rtns_1 |
//! | [`disk`] | disk_rr, disk_rw, disk_rd, disk_wrt, disk_cp, sync_disk_rw, sync_disk_wrt, sync_disk_cp |
//! | [`compute`] | sieve, sort_rtns_1, series_1, ram_copy, shell_rtns_1 to _3 |
//! | [`msg`] | shared_memory, tcp_test, udp_test, fifo_test, stream_pipe, dgram_pipe, pipe_cpy |
//!
//! | benchmark | AIM9 row | one iteration |
//! |---|---|---|
//! | `aim-disk-rr` / `aim-disk-rw` | disk_rr, disk_rw | a `block` pread / pwrite at a random block of the file |
//! | `aim-disk-rd` / `aim-disk-wrt` | disk_rd, disk_wrt | the next sequential block, wrapping at the end |
//! | `aim-disk-cp` | disk_cp | read a block of one file, write it to the same place of another |
//! | `aim-sync-disk-rw` / `-wrt` / `-cp` | sync_disk_* | as above, the written file opened `O_SYNC` |
//! | `aim-shell` (`-2`, `-3`) | shell_rtns_1 (2, 3) | `sh` runs a small script (loop, pipe, `ls`) |
//! | `aim-sieve` | sieve | a sieve of Eratosthenes up to `limit` |
//! | `aim-sort` | sort_rtns_1 | sort a copy of `n` random 64-bit integers |
//! | `aim-series` | series_1 | sum a Taylor series of exp(x) to convergence |
//! | `aim-shm` | shared_memory | a hand-off through a System V shared memory segment, with process-shared semaphores in it |
//! | `aim-fifo` | fifo_test | a message through a named pipe and back |
//! | `aim-pipe` | pipe_cpy | a message through an anonymous pipe and back |
//! | `aim-stream-pipe` / `aim-dgram-pipe` | stream_pipe, dgram_pipe | a message through a unix stream / datagram socket pair and back |
//! | `aim-tcp` / `aim-udp` | tcp_test, udp_test | a message over loopback TCP / UDP and back |
//! | `aim-ram-copy` | ram_copy | copy a `size` block to another |
//!
//! Disk rows work on files in the temporary directory (`dir` to choose another): reads
//! hit the page cache as AIM's did; the async write rows measure the page cache too,
//! the sync ones the device (metric `tmpfs` = 1 when the directory is in memory, where
//! "sync" costs nothing). Message rows count messages delivered one way (a round trip
//! is two) and check every echoed byte. Computing rows check their results (prime
//! count, sortedness and sum, the series against `f64::exp`, copied bytes).

pub mod arith;
pub mod calls;
pub mod compute;
pub mod disk;
pub mod msg;
pub mod rtns;
pub mod sys;

use smtlab_model::{BenchInfo, Direction, ParamInfo, ValueKind};
use smtlab_placement::pin;

use crate::os::PinGuard;
use crate::{BenchError, Benchmark};

/// Paper 001 Table 2's rows in the paper's order: AIM9's name of the row and what it
/// counts, as the paper prints them. Every row has one benchmark here (a test checks it).
pub const TABLE2: [(&str, &str); 59] = [
    (
        "add_double",
        "Thousand Double Precision Additions per second",
    ),
    (
        "add_float",
        "Thousand Single Precision Additions per second",
    ),
    ("add_long", "Thousand Long Integer Additions per second"),
    ("add_int", "Thousand Integer Additions per second"),
    ("add_short", "Thousand Short Integer Additions per second"),
    ("creat-clo", "File Creations and Closes per second"),
    ("page_test", "System Allocations & Pages per second"),
    ("brk_test", "System Memory Allocations per second"),
    ("jmp_test", "Non-local gotos per second"),
    ("signal_test", "Signal Traps per second"),
    ("exec_test", "Program Loads per second"),
    ("fork_test", "Task Creations per second"),
    ("link_test", "Link/Unlink Pairs per second"),
    ("disk_rr", "Random Disk Reads (K) per second"),
    ("disk_rw", "Random Disk Writes (K) per second"),
    ("disk_rd", "Sequential Disk Reads (K) per second"),
    ("disk_wrt", "Sequential Disk Writes (K) per second"),
    ("disk_cp", "Disk Copies (K) per second"),
    ("sync_disk_rw", "Sync Random Disk Writes (K) per second"),
    (
        "sync_disk_wrt",
        "Sync Sequential Disk Writes (K) per second",
    ),
    ("sync_disk_cp", "Sync Disk Copies (K) per second"),
    ("disk_src", "Directory Searches per second"),
    ("div_double", "Thousand Double Precision Divides per second"),
    ("div_float", "Thousand Single Precision Divides per second"),
    ("div_long", "Thousand Long Integer Divides per second"),
    ("div_int", "Thousand Integer Divides per second"),
    ("div_short", "Thousand Short Integer Divides per second"),
    ("fun_cal", "Function Calls (no arguments) per second"),
    ("fun_cal1", "Function Calls (1 argument) per second"),
    ("fun_cal2", "Function Calls (2 arguments) per second"),
    ("fun_cal15", "Function Calls (15 arguments) per second"),
    ("sieve", "Integer Sieves per second"),
    (
        "mul_double",
        "Thousand Double Precision Multiplies per second",
    ),
    (
        "mul_float",
        "Thousand Single Precision Multiplies per second",
    ),
    ("mul_long", "Thousand Long Integer Multiplies per second"),
    ("mul_int", "Thousand Integer Multiplies per second"),
    ("mul_short", "Thousand Short Integer Multiplies per second"),
    ("num_rtns_1", "Numeric Functions per second"),
    ("trig_rtns", "Trigonometric Functions per second"),
    ("matrix_rtns", "Point Transformations per second"),
    ("array_rtns", "Linear Systems Solved per second"),
    ("string_rtns", "String Manipulations per second"),
    ("mem_rtns_1", "Dynamic Memory Operations per second"),
    ("mem_rtns_2", "Block Memory Operations per second"),
    ("sort_rtns_1", "Sort Operations per second"),
    ("misc_rtns_1", "Auxiliary Loops per second"),
    ("dir_rtns_1", "Directory Operations per second"),
    ("shell_rtns_1", "Shell Scripts per second"),
    ("shell_rtns_2", "Shell Scripts per second"),
    ("shell_rtns_3", "Shell Scripts per second"),
    ("series_1", "Series Evaluations per second"),
    ("shared_memory", "Shared Memory Operations per second"),
    ("tcp_test", "TCP/IP Messages per second"),
    ("udp_test", "UDP/IP DataGrams per second"),
    ("fifo_test", "FIFO Messages per second"),
    ("stream_pipe", "Stream Pipe Messages per second"),
    ("dgram_pipe", "DataGram Pipe Messages per second"),
    ("pipe_cpy", "Pipe Messages per second"),
    ("ram_copy", "Memory to Memory Copy per second"),
];

/// The AIM rows of the catalog, in the order of paper 001 Table 2.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    let mut v = disk::benchmarks();
    v.extend(compute::benchmarks());
    v.extend(msg::benchmarks());
    v.extend(arith::benchmarks());
    v.extend(calls::benchmarks());
    v.extend(sys::benchmarks());
    v.extend(rtns::benchmarks());
    v.sort_by_key(|b| table2_index(&b.info()));
    v
}

/// Where a benchmark's row is in [`TABLE2`] (rows not there last).
fn table2_index(info: &BenchInfo) -> usize {
    match &info.report {
        smtlab_model::ReportSection::AimRow { row, .. } => TABLE2
            .iter()
            .position(|(r, _)| r == row)
            .unwrap_or(TABLE2.len()),
        _ => TABLE2.len(),
    }
}

/// The catalog entry of an AIM row: a rate in `unit`, whose prefix (`K`, `M`, `G`) gives
/// the scale.
fn info(name: &str, unit: &str, row: &str, description: &str, params: Vec<ParamInfo>) -> BenchInfo {
    BenchInfo {
        name: name.into(),
        group: "aim".into(),
        unit: unit.into(),
        direction: Direction::Higher,
        value_kind: ValueKind::Rate {
            scale: smtlab_model::Unit::parse(unit).to_base(),
        },
        description: description.into(),
        origin: format!("paper 001 Table 2 (AIM9 {row})"),
        params,
        main_param: None,
        report: smtlab_model::ReportSection::AimRow {
            row: row.into(),
            label: TABLE2
                .iter()
                .find(|(r, _)| *r == row)
                .map_or("", |(_, l)| l)
                .into(),
        },
    }
}

use crate::params::declare as param;

use crate::params::bad;

fn io(bench: &str, what: impl Into<String>, source: std::io::Error) -> BenchError {
    BenchError::io(bench, what, source)
}

fn check(bench: &str, reason: impl Into<String>) -> BenchError {
    BenchError::check(bench, reason)
}

/// Times `iterations` calls of `op` on the calling thread pinned to `cpu`; `op`
/// returns the units of work it did.
fn timed<F>(cpu: Option<u32>, iterations: u64, mut op: F) -> Result<crate::RawSample, BenchError>
where
    F: FnMut(u64) -> Result<f64, BenchError>,
{
    let _pin = PinGuard::pin(cpu)?;
    let cpu0 = crate::clock::thread_cpu_ns();
    let t0 = crate::clock::now_ns();
    let mut work = 0.0;
    for i in 0..iterations {
        work += op(i)?;
    }
    let t1 = crate::clock::now_ns();
    let cpu1 = crate::clock::thread_cpu_ns();
    Ok(crate::RawSample {
        elapsed_ns: t1.saturating_sub(t0).max(1),
        work,
        cpu_ns: Some(cpu1.saturating_sub(cpu0)),
        cpus: pin::current_cpu().into_iter().collect(),
        ..crate::RawSample::default()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_aim_and_unique() {
        let names: Vec<String> = super::benchmarks().iter().map(|b| b.info().name).collect();
        assert!(names.iter().all(|n| n.starts_with("aim-")));
        let mut d = names.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), names.len());
        for b in super::benchmarks() {
            assert!(!b.in_suite(crate::Suite::Quick) && b.in_suite(crate::Suite::Default));
        }
    }

    #[test]
    fn every_row_of_table_2_has_one_benchmark_in_the_papers_order() {
        let rows: Vec<String> = super::benchmarks()
            .iter()
            .map(|b| match b.info().report {
                smtlab_model::ReportSection::AimRow { row, label } => {
                    assert!(!label.is_empty(), "{row}");
                    row
                }
                other => panic!("{}: {other:?}", b.info().name),
            })
            .collect();
        let want: Vec<&str> = super::TABLE2.iter().map(|(r, _)| *r).collect();
        assert_eq!(rows, want);
        for b in super::benchmarks() {
            let i = b.info();
            assert!(i.description.starts_with("AIM9 "), "{}", i.name);
            assert!(i.unit.to_string().ends_with("/s"), "{}: {}", i.name, i.unit);
        }
    }
}
