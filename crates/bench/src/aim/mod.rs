//! AIM9-style throughput rows (paper 001 Table 2) that add to what the `os` group's
//! lmbench latencies already measure: one benchmark per row, group `aim`, each a
//! throughput in its own unit, run by one measuring thread pinned to the placement's
//! first CPU (message and shared-memory rows put their echo thread on the second CPU,
//! or the first again when there is one).
//!
//! | benchmark | AIM9 row | one iteration |
//! |---|---|---|
//! | `aim-disk-rr` / `aim-disk-rw` | disk_rr, disk_rw | a `block` pread / pwrite at a random block of the file |
//! | `aim-disk-rd` / `aim-disk-wrt` | disk_rd, disk_wrt | the next sequential block, wrapping at the end |
//! | `aim-disk-cp` | disk_cp | read a block of one file, write it to the same place of another |
//! | `aim-sync-disk-rw` / `-wrt` / `-cp` | sync_disk_* | as above, the written file opened `O_SYNC` |
//! | `aim-shell` | shell_rtns | `sh` runs a small script (loop, pipe, `ls`) |
//! | `aim-sieve` | sieve | a sieve of Eratosthenes up to `limit` |
//! | `aim-sort` | sort_rtns_1 | sort a copy of `n` random 64-bit integers |
//! | `aim-series` | series_1 | sum a Taylor series of exp(x) to convergence |
//! | `aim-shm` | shared_memory | a hand-off through a System V shared memory segment, with process-shared semaphores in it |
//! | `aim-fifo` | fifo_test | a message through a named pipe and back |
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

pub mod compute;
pub mod disk;
pub mod msg;

use smtlab_model::{BenchInfo, Direction, ParamInfo, ValueKind};
use smtlab_placement::pin;

use crate::os::PinGuard;
use crate::{BenchError, Benchmark};

/// The AIM rows of the catalog.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    let mut v = disk::benchmarks();
    v.extend(compute::benchmarks());
    v.extend(msg::benchmarks());
    v
}

/// The AIM rows are many and each adds little to a first look: they stay out of the
/// quick suite.
fn in_suite(suite: crate::Suite) -> bool {
    suite != crate::Suite::Quick
}

fn info(
    name: &str,
    unit: &str,
    scale: f64,
    row: &str,
    description: &str,
    params: Vec<ParamInfo>,
) -> BenchInfo {
    BenchInfo {
        name: name.into(),
        group: "aim".into(),
        unit: unit.into(),
        direction: Direction::Higher,
        value_kind: ValueKind::Rate { scale },
        description: description.into(),
        origin: format!("paper 001 Table 2 (AIM9 {row})"),
        params,
        main_param: None,
        report: smtlab_model::ReportSection::Aim,
    }
}

use crate::params::declare as param;

fn bad(name: &str, value: &str, expected: &str) -> BenchError {
    BenchError::Param(crate::ParamError::value(name, value, expected))
}

fn io(bench: &str, what: impl Into<String>, source: std::io::Error) -> BenchError {
    BenchError::Io {
        bench: bench.into(),
        what: what.into(),
        error: source,
    }
}

fn check(bench: &str, reason: impl Into<String>) -> BenchError {
    BenchError::Check {
        bench: bench.into(),
        reason: reason.into(),
    }
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
        assert!(names.len() >= 18, "{names:?}");
        for b in super::benchmarks() {
            assert!(!b.in_suite(crate::Suite::Quick) && b.in_suite(crate::Suite::Default));
        }
    }
}
