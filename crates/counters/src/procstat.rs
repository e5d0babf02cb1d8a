//! Where the CPUs' time goes over a run: `/proc/stat` read at an interval by a
//! background thread, turned into per-interval tick deltas for the CPUs of a
//! placement ([`OsTimeSeries`]; see `smtlab_model::counters::os_time` for the
//! start-up/steady-state split).
//!
//! The sampler wakes once per interval for a few microseconds (one read of a small
//! file). Pin it away from the measured CPUs with [`SamplerOptions::pin_cpu`] where a
//! spare CPU exists; on a 2-CPU machine it shares a CPU with the workload, which
//! costs well under 0.1% of it at the default interval.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smtlab_model::CpuSet;
use smtlab_model::counters::os_time::{CpuTicks, CpuTicksOf, OsTimeInterval, OsTimeSeries};

use crate::error::CounterError;

/// Parses the `cpuN ...` lines of `/proc/stat` (the aggregate `cpu` line is skipped).
/// Missing trailing fields (old kernels have fewer) read as zero.
pub fn parse_proc_stat(text: &str) -> Result<BTreeMap<u32, CpuTicks>, ProcStatError> {
    let mut out = BTreeMap::new();
    for (lineno, line) in text.lines().enumerate() {
        let mut f = line.split_whitespace();
        let Some(label) = f.next() else { continue };
        let Some(num) = label.strip_prefix("cpu") else {
            continue;
        };
        if num.is_empty() {
            continue;
        }
        let cpu: u32 = num.parse().map_err(|_| ProcStatError::BadLabel {
            line: lineno + 1,
            label: label.to_string(),
        })?;
        let vals = f
            .map(|v| v.parse::<u64>())
            .collect::<Result<Vec<u64>, _>>()
            .map_err(|e| ProcStatError::BadTicks {
                line: lineno + 1,
                label: label.to_string(),
                error: e,
            })?;
        if vals.len() < 4 {
            return Err(ProcStatError::TooFew {
                line: lineno + 1,
                label: label.to_string(),
                found: vals.len(),
            });
        }
        let at = |i: usize| vals.get(i).copied().unwrap_or(0);
        out.insert(
            cpu,
            CpuTicks {
                user: at(0),
                nice: at(1),
                system: at(2),
                idle: at(3),
                iowait: at(4),
                irq: at(5),
                softirq: at(6),
                steal: at(7),
            },
        );
    }
    Ok(out)
}

/// Why a `/proc/stat` text could not be parsed; the line is counted from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcStatError {
    #[error("line {line}: bad CPU label `{label}`")]
    BadLabel { line: usize, label: String },
    // The parse error is part of the message, not a `source`: printed once.
    #[error("line {line}: {label}: not a tick count: {error}")]
    BadTicks {
        line: usize,
        label: String,
        error: std::num::ParseIntError,
    },
    #[error("line {line}: {label}: expected at least 4 tick counts, found {found}")]
    TooFew {
        line: usize,
        label: String,
        found: usize,
    },
}

/// Reads and parses a `/proc/stat`-format file.
pub fn read_proc_stat(path: &Path) -> Result<BTreeMap<u32, CpuTicks>, CounterError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CounterError::io(format!("read {}", path.display()), e))?;
    parse_proc_stat(&text).map_err(|e| CounterError::Parse {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// USER_HZ, the unit of `/proc/stat` (`sysconf(_SC_CLK_TCK)`, 100 almost everywhere).
pub fn user_hz() -> u64 {
    // SAFETY: sysconf has no preconditions; it only returns a value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 { hz as u64 } else { 100 }
}

/// How to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplerOptions {
    /// Time between reads. With USER_HZ at 100 a tick is 10 ms, so intervals much
    /// below 100 ms give fractions in steps of 10% or coarser. Default 200 ms.
    pub interval: Duration,
    /// Pin the sampler thread to this CPU (keep it off the measured CPUs).
    pub pin_cpu: Option<u32>,
    /// The file to read; `/proc/stat` except in tests.
    pub path: PathBuf,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            interval: Duration::from_millis(200),
            pin_cpu: None,
            path: PathBuf::from("/proc/stat"),
        }
    }
}

type Thread = JoinHandle<Result<Vec<OsTimeInterval>, CounterError>>;

/// A running `/proc/stat` sampler; [`ProcStatSampler::stop`] returns what it saw.
#[derive(Debug)]
pub struct ProcStatSampler {
    stop_tx: mpsc::Sender<()>,
    thread: Option<Thread>,
    cpus: CpuSet,
    interval: Duration,
}

/// The ticks of `cpus` in `snapshot`, or an error naming the first missing CPU.
fn select(
    snapshot: &BTreeMap<u32, CpuTicks>,
    cpus: &CpuSet,
    path: &Path,
) -> Result<Vec<CpuTicksOf>, CounterError> {
    cpus.iter()
        .map(|cpu| {
            snapshot
                .get(&cpu)
                .map(|&ticks| CpuTicksOf { cpu, ticks })
                .ok_or_else(|| CounterError::Parse {
                    path: path.to_path_buf(),
                    reason: format!("no line for cpu{cpu} (offline or not present)"),
                })
        })
        .collect()
}

fn delta(now: &[CpuTicksOf], before: &[CpuTicksOf]) -> Vec<CpuTicksOf> {
    now.iter()
        .zip(before)
        .map(|(n, b)| CpuTicksOf {
            cpu: n.cpu,
            ticks: n.ticks.since(&b.ticks),
        })
        .collect()
}

fn pin_current_thread(cpu: u32) -> Result<(), CounterError> {
    smtlab_placement::pin::pin_current_thread_to(cpu)
        .map_err(|e| CounterError::State(format!("pin the /proc/stat sampler: {e}")))
}

impl ProcStatSampler {
    /// Reads the file once (so a wrong path or an absent CPU fails here, not at the
    /// end) and starts sampling `cpus` in a background thread.
    pub fn start(cpus: &CpuSet, options: SamplerOptions) -> Result<ProcStatSampler, CounterError> {
        if cpus.is_empty() {
            return Err(CounterError::State(
                "the /proc/stat sampler needs at least one CPU".into(),
            ));
        }
        if options.interval.is_zero() {
            return Err(CounterError::State(
                "the /proc/stat sampling interval must be above zero".into(),
            ));
        }
        let first = select(&read_proc_stat(&options.path)?, cpus, &options.path)?;
        let t0 = Instant::now();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let thread_cpus = cpus.clone();
        let interval = options.interval;
        let thread = std::thread::Builder::new()
            .name("smtlab-procstat".into())
            .spawn(move || -> Result<Vec<OsTimeInterval>, CounterError> {
                if let Some(cpu) = options.pin_cpu {
                    pin_current_thread(cpu)?;
                }
                let mut intervals = Vec::new();
                let mut before = first;
                let mut before_ns = 0u64;
                let mut k: u32 = 1;
                loop {
                    // Deadlines on a fixed grid, so the intervals do not drift.
                    let deadline = t0 + interval * k;
                    let stopping = match stop_rx
                        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                    {
                        Err(RecvTimeoutError::Timeout) => false,
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
                    };
                    let now = select(&read_proc_stat(&options.path)?, &thread_cpus, &options.path)?;
                    let now_ns = t0.elapsed().as_nanos() as u64;
                    intervals.push(OsTimeInterval {
                        start_ns: before_ns,
                        end_ns: now_ns,
                        per_cpu: delta(&now, &before),
                    });
                    if stopping {
                        return Ok(intervals);
                    }
                    before = now;
                    before_ns = now_ns;
                    k += 1;
                }
            })
            .map_err(|e| CounterError::io("spawn the /proc/stat sampler thread", e))?;
        Ok(ProcStatSampler {
            stop_tx,
            thread: Some(thread),
            cpus: cpus.clone(),
            interval,
        })
    }

    /// Takes a last sample (a shorter final interval) and returns the series.
    pub fn stop(mut self) -> Result<OsTimeSeries, CounterError> {
        let _ = self.stop_tx.send(());
        let thread = self
            .thread
            .take()
            .ok_or_else(|| CounterError::State("sampler already stopped".into()))?;
        let intervals = thread
            .join()
            .map_err(|_| CounterError::State("the /proc/stat sampler thread panicked".into()))??;
        Ok(OsTimeSeries {
            user_hz: user_hz(),
            interval_ns: self.interval.as_nanos() as u64,
            cpus: self.cpus.clone(),
            intervals,
        })
    }
}

impl Drop for ProcStatSampler {
    /// A sampler dropped without `stop` (an error path) still ends its thread.
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = self.stop_tx.send(());
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_per_cpu_lines_and_skips_the_total() {
        let text = "cpu  246404 347 83030 271673 9494 0 456 294 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 10 0 20 30\nintr 5 6\n";
        let m = parse_proc_stat(text).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[&0].steal, 8);
        assert_eq!(m[&0].softirq, 7);
        assert_eq!(m[&1].idle, 30);
        assert_eq!(m[&1].iowait, 0);
        assert!(
            parse_proc_stat("cpu0 1 2\n")
                .unwrap_err()
                .to_string()
                .contains("at least 4")
        );
        assert!(
            parse_proc_stat("cpu0 1 2 x 4\n")
                .unwrap_err()
                .to_string()
                .contains("cpu0")
        );
    }
}
