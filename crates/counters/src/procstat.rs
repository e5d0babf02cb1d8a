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
    /// Most intervals kept: when the series reaches it, neighbouring intervals are
    /// merged in pairs and the interval doubles, so a long cell keeps a bounded
    /// series over its whole length. Default 600.
    pub max_intervals: usize,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            interval: Duration::from_millis(200),
            pin_cpu: None,
            path: PathBuf::from("/proc/stat"),
            max_intervals: 600,
        }
    }
}

/// What the caller asks of the sampler thread.
enum Cmd {
    /// Close the current interval and read nothing until `Resume` (other cells use
    /// these CPUs meanwhile).
    Pause,
    /// Start a new interval now.
    Resume,
    Stop,
}

type Thread = JoinHandle<Result<(Vec<OsTimeInterval>, Duration), CounterError>>;

/// A running `/proc/stat` sampler; [`ProcStatSampler::stop`] returns what it saw.
#[derive(Debug)]
pub struct ProcStatSampler {
    cmd_tx: mpsc::Sender<Cmd>,
    ack_rx: mpsc::Receiver<()>,
    thread: Option<Thread>,
    cpus: CpuSet,
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

/// Merges neighbouring intervals in pairs (the last one alone when odd).
fn halve(intervals: &mut Vec<OsTimeInterval>) {
    let merged: Vec<OsTimeInterval> = intervals
        .chunks(2)
        .map(|pair| {
            let mut m = pair[0].clone();
            if let Some(b) = pair.get(1) {
                m.end_ns = b.end_ns;
                for (x, y) in m.per_cpu.iter_mut().zip(&b.per_cpu) {
                    x.ticks = x.ticks.add(&y.ticks);
                }
            }
            m
        })
        .collect();
    *intervals = merged;
}

/// The sampler's state between reads.
struct Series<'a> {
    options: &'a SamplerOptions,
    cpus: &'a CpuSet,
    t0: Instant,
    intervals: Vec<OsTimeInterval>,
    before: Vec<CpuTicksOf>,
    before_ns: u64,
}

impl Series<'_> {
    fn read(&self) -> Result<Vec<CpuTicksOf>, CounterError> {
        select(
            &read_proc_stat(&self.options.path)?,
            self.cpus,
            &self.options.path,
        )
    }

    /// Reads now and closes the interval begun at the last read.
    fn close(&mut self) -> Result<(), CounterError> {
        let now = self.read()?;
        let now_ns = self.t0.elapsed().as_nanos() as u64;
        self.intervals.push(OsTimeInterval {
            start_ns: self.before_ns,
            end_ns: now_ns,
            per_cpu: delta(&now, &self.before),
        });
        self.before = now;
        self.before_ns = now_ns;
        Ok(())
    }

    /// Reads now as the start of the next interval (after a pause).
    fn restart(&mut self) -> Result<(), CounterError> {
        self.before = self.read()?;
        self.before_ns = self.t0.elapsed().as_nanos() as u64;
        Ok(())
    }
}

/// The sampler thread's loop: reads on a fixed grid while running, closes the interval
/// and waits while paused (acknowledging each pause and resume once its read is done).
fn sample_loop(
    mut series: Series<'_>,
    cmds: &mpsc::Receiver<Cmd>,
    ack: &mpsc::Sender<()>,
) -> Result<(Vec<OsTimeInterval>, Duration), CounterError> {
    if let Some(cpu) = series.options.pin_cpu {
        pin_current_thread(cpu)?;
    }
    let max = series.options.max_intervals.max(2);
    let mut interval = series.options.interval;
    // Deadlines on a fixed grid from `grid0`, so the intervals do not drift.
    let mut grid0 = series.t0;
    let mut k: u32 = 1;
    loop {
        let deadline = grid0 + interval * k;
        let cmd = match cmds.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => None,
            Ok(c) => Some(c),
            Err(RecvTimeoutError::Disconnected) => Some(Cmd::Stop),
        };
        match cmd {
            None => {
                series.close()?;
                k += 1;
                if series.intervals.len() >= max {
                    halve(&mut series.intervals);
                    // The grid goes on at twice the step from this read.
                    interval *= 2;
                    grid0 = Instant::now();
                    k = 1;
                }
            }
            Some(Cmd::Stop) => {
                series.close()?;
                return Ok((series.intervals, interval));
            }
            Some(Cmd::Resume) => {
                // Already running: nothing to close.
                let _ = ack.send(());
            }
            Some(Cmd::Pause) => {
                series.close()?;
                if series.intervals.len() >= max {
                    halve(&mut series.intervals);
                    interval *= 2;
                }
                let _ = ack.send(());
                // Paused: wait for Resume or Stop, reading nothing.
                loop {
                    match cmds.recv() {
                        Ok(Cmd::Pause) => {
                            let _ = ack.send(());
                        }
                        Ok(Cmd::Resume) => break,
                        Ok(Cmd::Stop) | Err(_) => return Ok((series.intervals, interval)),
                    }
                }
                series.restart()?;
                grid0 = Instant::now();
                k = 1;
                let _ = ack.send(());
            }
        }
    }
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
        let (cmd_tx, cmd_rx) = mpsc::channel::<Cmd>();
        let (ack_tx, ack_rx) = mpsc::channel::<()>();
        let thread_cpus = cpus.clone();
        let thread = std::thread::Builder::new()
            .name("smtlab-procstat".into())
            .spawn(move || {
                let series = Series {
                    options: &options,
                    cpus: &thread_cpus,
                    t0,
                    intervals: Vec::new(),
                    before: first,
                    before_ns: 0,
                };
                sample_loop(series, &cmd_rx, &ack_tx)
            })
            .map_err(|e| CounterError::io("spawn the /proc/stat sampler thread", e))?;
        Ok(ProcStatSampler {
            cmd_tx,
            ack_rx,
            thread: Some(thread),
            cpus: cpus.clone(),
        })
    }

    fn ask(&self, cmd: Cmd) -> Result<(), CounterError> {
        let gone = || CounterError::State("the /proc/stat sampler thread ended early".into());
        self.cmd_tx.send(cmd).map_err(|_| gone())?;
        self.ack_rx.recv().map_err(|_| gone())
    }

    /// Closes the current interval (with a read now) and stops sampling until
    /// [`resume`](Self::resume): time while paused belongs to no interval. Returns once
    /// the read is done.
    pub fn pause(&self) -> Result<(), CounterError> {
        self.ask(Cmd::Pause)
    }

    /// Starts a new interval from a read now (after a [`pause`](Self::pause)).
    pub fn resume(&self) -> Result<(), CounterError> {
        self.ask(Cmd::Resume)
    }

    /// Takes a last sample (a shorter final interval, unless paused) and returns the
    /// series.
    pub fn stop(mut self) -> Result<OsTimeSeries, CounterError> {
        let _ = self.cmd_tx.send(Cmd::Stop);
        let thread = self
            .thread
            .take()
            .ok_or_else(|| CounterError::State("sampler already stopped".into()))?;
        let (intervals, interval) = thread
            .join()
            .map_err(|_| CounterError::State("the /proc/stat sampler thread panicked".into()))??;
        Ok(OsTimeSeries {
            user_hz: user_hz(),
            interval_ns: interval.as_nanos() as u64,
            cpus: self.cpus.clone(),
            intervals,
        })
    }
}

impl Drop for ProcStatSampler {
    /// A sampler dropped without `stop` (an error path) still ends its thread.
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = self.cmd_tx.send(Cmd::Stop);
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

    fn scratch(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("smtlab-procstat-{}-{name}", std::process::id()))
    }

    /// Ticks that pass while paused belong to no interval: 10 user ticks before the
    /// pause, 40 while paused (another cell's turn), 5 user and 5 idle after resuming.
    #[test]
    fn pause_leaves_other_cells_turns_out() {
        let path = scratch("pause");
        std::fs::write(&path, "cpu0 0 0 0 0\n").unwrap();
        let options = SamplerOptions {
            interval: Duration::from_secs(3600),
            path: path.clone(),
            ..SamplerOptions::default()
        };
        let s = ProcStatSampler::start(&CpuSet::from_iter([0]), options).unwrap();
        std::fs::write(&path, "cpu0 10 0 0 0\n").unwrap();
        s.pause().unwrap();
        std::fs::write(&path, "cpu0 50 0 0 0\n").unwrap();
        s.resume().unwrap();
        std::fs::write(&path, "cpu0 55 0 0 5\n").unwrap();
        let series = s.stop().unwrap();
        std::fs::remove_file(&path).unwrap();
        let t: Vec<(u64, u64)> = series
            .intervals
            .iter()
            .map(|i| (i.all_cpus().user, i.all_cpus().idle))
            .collect();
        assert_eq!(t, [(10, 0), (5, 5)]);
        assert!(series.intervals[1].start_ns >= series.intervals[0].end_ns);
        assert_eq!(series.total().all_cpus.user, 15);
    }

    /// A long cell keeps at most `max_intervals`: pairs merge and the step doubles,
    /// and the merged series still covers the whole run without gaps.
    #[test]
    fn long_series_stay_bounded_and_contiguous() {
        let path = scratch("bound");
        std::fs::write(&path, "cpu0 1 2 3 4\n").unwrap();
        let options = SamplerOptions {
            interval: Duration::from_millis(2),
            path: path.clone(),
            max_intervals: 4,
            ..SamplerOptions::default()
        };
        let s = ProcStatSampler::start(&CpuSet::from_iter([0]), options).unwrap();
        std::thread::sleep(Duration::from_millis(120));
        let series = s.stop().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(series.intervals.len() <= 4, "{}", series.intervals.len());
        assert!(series.interval_ns >= 8_000_000, "{}", series.interval_ns);
        assert_eq!(series.intervals[0].start_ns, 0);
        for w in series.intervals.windows(2) {
            assert_eq!(w[0].end_ns, w[1].start_ns);
        }
        assert!(series.duration_ns() >= 100_000_000);
    }
}
