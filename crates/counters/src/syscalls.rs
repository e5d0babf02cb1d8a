//! Kernel time by system call, from the `raw_syscalls:sys_enter` and `sys_exit`
//! tracepoints (paper 003 Fig 7).
//!
//! Both tracepoints are opened as sampling events with `sample_period = 1` (every
//! call) and `PERF_SAMPLE_TID | TIME | RAW`, one pair per CPU (a per-thread target is
//! still opened per CPU: the kernel refuses to mmap inherited per-thread events), with
//! the exit event's output redirected into the enter event's ring buffer. A drainer
//! thread empties the buffers every few milliseconds and pairs entry and exit per
//! thread id; timestamps come from CLOCK_MONOTONIC so records from different CPUs
//! (a thread can migrate inside a blocking call) merge in order.
//!
//! Records are only paired once they are older than a short horizon (2 ms before the
//! drain began): by then every CPU's buffer holds everything written before them, so
//! sorting by time is final. The drainer thread's own calls are left out.
//!
//! Where tracing is impossible (tracefs not mounted, not root, no raw_syscalls) the
//! error is [`CounterError::Unavailable`] with one line to print after "skipped: ".

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use perf_event_open_sys::bindings as b;
use smtlab_model::CpuSet;
use smtlab_model::counters::syscalls::{SyscallProfile, SyscallStat};
use smtlab_model::counters::{CountMode, CounterTarget};

use crate::error::{CounterError, Needs, classify};
use crate::ring::{RingBuffer, page_size};
use crate::sys::{self, PerfFd};
use crate::syscall_names;
use crate::tracefs::{self, Tracepoint};

/// Tuning of the tracer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceOptions {
    /// Data pages of each CPU's ring buffer (a power of two). A call takes about 150
    /// bytes (a 96-byte entry record with the six arguments, a 56-byte exit record),
    /// so the default 1024 pages (4 MiB with 4 KiB pages) hold about 28,000 calls
    /// between drains. If the kernel refuses the size (locked-memory limit) it is
    /// halved down to 8 pages. Records that do not fit are counted in
    /// `SyscallProfile::lost_records`, never silently dropped.
    pub buffer_pages: usize,
    /// Longest wait between drains; the drainer also wakes when a buffer is a quarter
    /// full.
    pub drain_interval: Duration,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            buffer_pages: 1024,
            drain_interval: Duration::from_millis(5),
        }
    }
}

/// Whether syscall tracing can work here, without tracing anything: tracefs is
/// mounted, the raw_syscalls ids are readable and the kernel accepts the event on the
/// calling thread. `Err` is [`CounterError::Unavailable`] with a one-line reason.
pub fn probe() -> Result<(), CounterError> {
    let layout = Layout::read()?;
    let mut attr = sample_attr(layout.enter.id, false, 4096);
    sys::open(&mut attr, 0, -1, None)
        .map(drop)
        .map_err(|errno| CounterError::Unavailable(open_reason(errno)))
}

fn open_reason(errno: i32) -> String {
    format!(
        "raw_syscalls tracepoints: {}",
        classify(errno, Needs::RawTracepoint).1
    )
}

/// Where the fields we need sit in the two tracepoints' raw records.
#[derive(Debug, Clone)]
struct Layout {
    enter: Tracepoint,
    exit: Tracepoint,
    /// `(offset, size)` of `common_type` (the tracepoint id; tells enter from exit).
    type_field: (usize, usize),
    enter_nr: (usize, usize),
    exit_nr: (usize, usize),
}

impl Layout {
    fn read() -> Result<Layout, CounterError> {
        let root = tracefs::find_tracefs().map_err(|e| CounterError::Unavailable(e.to_string()))?;
        let tp = |name| {
            tracefs::tracepoint(&root, "raw_syscalls", name)
                .map_err(|e| CounterError::Unavailable(format!("raw_syscalls:{name}: {e}")))
        };
        let enter = tp("sys_enter")?;
        let exit = tp("sys_exit")?;
        // Defaults are the layout every kernel since 2.6.32 has had.
        let type_field = enter.field("common_type").unwrap_or((0, 2));
        let enter_nr = enter.field("id").unwrap_or((8, 8));
        let exit_nr = exit.field("id").unwrap_or((8, 8));
        Ok(Layout {
            enter,
            exit,
            type_field,
            enter_nr,
            exit_nr,
        })
    }
}

fn sample_attr(tracepoint_id: u64, inherit: bool, buffer_bytes: usize) -> sys::Attr {
    let mut a = sys::Attr {
        size: std::mem::size_of::<sys::Attr>() as u32,
        type_: b::PERF_TYPE_TRACEPOINT,
        config: tracepoint_id,
        sample_type: (b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME | b::PERF_SAMPLE_RAW) as u64,
        clockid: libc::CLOCK_MONOTONIC,
        ..sys::Attr::default()
    };
    a.__bindgen_anon_1.sample_period = 1;
    a.set_disabled(1);
    a.set_inherit(u64::from(inherit));
    // Tracepoints fire in the kernel: excluding kernel mode would record nothing.
    sys::set_mode(&mut a, CountMode::All);
    a.set_use_clockid(1);
    a.set_watermark(1);
    a.__bindgen_anon_2.wakeup_watermark = (buffer_bytes / 4).max(1) as u32;
    a
}

fn online_cpus() -> Result<CpuSet, CounterError> {
    let path = "/sys/devices/system/cpu/online";
    let text =
        std::fs::read_to_string(path).map_err(|e| CounterError::io(format!("read {path}"), e))?;
    CpuSet::parse_list(text.trim()).map_err(|e| CounterError::Parse {
        path: path.into(),
        reason: e.to_string(),
    })
}

/// One CPU's pair of events and the ring buffer both write into.
struct CpuStream {
    enter: PerfFd,
    exit: PerfFd,
    ring: RingBuffer,
}

/// Tracepoints opened but not yet enabled.
pub struct SyscallTracer {
    target: CounterTarget,
    streams: Vec<CpuStream>,
    layout: Layout,
    options: TraceOptions,
}

impl std::fmt::Debug for SyscallTracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyscallTracer")
            .field("target", &self.target)
            .field("cpus", &self.streams.len())
            .finish()
    }
}

impl SyscallTracer {
    /// Opens the tracepoints on `target` (a thread, optionally with its future
    /// children, or a CPU set) and maps their ring buffers.
    pub fn open(
        target: CounterTarget,
        options: TraceOptions,
    ) -> Result<SyscallTracer, CounterError> {
        let layout = Layout::read()?;
        let (pid, cpus, inherit) = match &target {
            CounterTarget::Thread { tid, inherit } => (*tid, online_cpus()?, *inherit),
            CounterTarget::Cpus { cpus } => (-1, cpus.clone(), false),
        };
        if cpus.is_empty() {
            return Err(CounterError::State(
                "syscall tracing needs at least one CPU".into(),
            ));
        }
        let mut pages = options.buffer_pages.max(1).next_power_of_two();
        let mut streams = Vec::with_capacity(cpus.len());
        for cpu in cpus.iter() {
            let cpu_i = i32::try_from(cpu)
                .map_err(|_| CounterError::State(format!("CPU number {cpu} is out of range")))?;
            let open = |id: u64, pages: usize| {
                let mut attr = sample_attr(id, inherit, pages * page_size());
                sys::open(&mut attr, pid, cpu_i, None).map_err(|errno| {
                    if matches!(errno, libc::ESRCH | libc::EMFILE | libc::ENFILE) {
                        CounterError::open(
                            format!("raw_syscalls on {target} cpu {cpu}"),
                            errno,
                            Needs::RawTracepoint,
                        )
                    } else {
                        CounterError::Unavailable(open_reason(errno))
                    }
                })
            };
            let enter = open(layout.enter.id, pages)?;
            let exit = open(layout.exit.id, pages)?;
            let ring = loop {
                match RingBuffer::map(&enter, pages) {
                    Ok(r) => break r,
                    Err(e)
                        if pages > 8
                            && matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOMEM)) =>
                    {
                        pages /= 2;
                    }
                    Err(e) => {
                        return Err(CounterError::Unavailable(format!(
                            "mmap of the perf ring buffer ({pages} pages) on cpu {cpu}: {e}; raise kernel.perf_event_mlock_kb or run as root"
                        )));
                    }
                }
            };
            exit.set_output(&enter).map_err(|e| {
                CounterError::io(
                    format!("redirect sys_exit into sys_enter's buffer on cpu {cpu}"),
                    e,
                )
            })?;
            streams.push(CpuStream { enter, exit, ring });
        }
        Ok(SyscallTracer {
            target,
            streams,
            layout,
            options,
        })
    }

    /// Enables the tracepoints and starts draining their buffers.
    pub fn start(self) -> Result<RunningTrace, CounterError> {
        let stop = Arc::new(AtomicBool::new(false));
        let start_ns = monotonic_ns();
        for s in &self.streams {
            s.enter
                .reset(false)
                .and_then(|_| s.exit.reset(false))
                .map_err(|e| CounterError::io("reset raw_syscalls events", e))?;
        }
        for s in &self.streams {
            s.enter
                .enable(false)
                .and_then(|_| s.exit.enable(false))
                .map_err(|e| CounterError::io("enable raw_syscalls events", e))?;
        }
        let SyscallTracer {
            target,
            streams,
            layout,
            options,
        } = self;
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("smtlab-systrace".into())
            .spawn(move || drain_loop(streams, layout, options.drain_interval, &thread_stop))
            .map_err(|e| CounterError::io("spawn the syscall trace drainer thread", e))?;
        Ok(RunningTrace {
            target,
            stop,
            thread: Some(thread),
            start_ns,
        })
    }
}

/// Tracing in progress; [`RunningTrace::stop`] returns the profile.
pub struct RunningTrace {
    target: CounterTarget,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Collected>>,
    start_ns: u64,
}

impl std::fmt::Debug for RunningTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningTrace")
            .field("target", &self.target)
            .finish()
    }
}

impl RunningTrace {
    /// Disables the tracepoints, drains what is left and pairs the records.
    pub fn stop(mut self) -> Result<SyscallProfile, CounterError> {
        let end_ns = monotonic_ns();
        self.stop.store(true, Ordering::Release);
        let thread = self
            .thread
            .take()
            .ok_or_else(|| CounterError::State("syscall trace already stopped".into()))?;
        let collected = thread
            .join()
            .map_err(|_| CounterError::State("the syscall trace drainer thread panicked".into()))?;
        if let Some(e) = collected.error {
            return Err(e);
        }
        Ok(collected.into_profile(self.target.clone(), end_ns.saturating_sub(self.start_ns)))
    }
}

impl Drop for RunningTrace {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Release);
            let _ = t.join();
        }
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn gettid() -> u32 {
    smtlab_placement::pin::gettid() as u32
}

/// One parsed record.
#[derive(Debug, Clone, Copy)]
struct Rec {
    time: u64,
    tid: u32,
    nr: i64,
    enter: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Acc {
    calls: u64,
    completed: u64,
    total_ns: u64,
    max_ns: u64,
}

/// What the drainer thread accumulates.
#[derive(Debug, Default)]
struct Collected {
    pending: Vec<Rec>,
    in_flight: HashMap<u32, (i64, u64)>,
    stats: BTreeMap<i64, Acc>,
    unmatched_exits: u64,
    unfinished: u64,
    lost: u64,
    error: Option<CounterError>,
}

fn read_int(raw: &[u8], (off, size): (usize, usize)) -> Option<i64> {
    let bytes = raw.get(off..off + size)?;
    Some(match size {
        2 => i64::from(u16::from_ne_bytes(bytes.try_into().ok()?)),
        4 => i64::from(i32::from_ne_bytes(bytes.try_into().ok()?)),
        8 => i64::from_ne_bytes(bytes.try_into().ok()?),
        _ => return None,
    })
}

impl Collected {
    /// Parses one ring-buffer record (header included).
    fn record(&mut self, rec: &[u8], layout: &Layout, ignore_tid: u32) {
        let u32_at = |o: usize| {
            rec.get(o..o + 4)
                .map(|b| u32::from_ne_bytes(b.try_into().unwrap_or_default()))
        };
        let u64_at = |o: usize| {
            rec.get(o..o + 8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
        };
        match u32_at(0) {
            Some(t) if t == b::PERF_RECORD_LOST => {
                // { header, u64 id, u64 lost }
                self.lost += u64_at(16).unwrap_or(0);
            }
            Some(t) if t == b::PERF_RECORD_SAMPLE => {
                // { header, u32 pid, u32 tid, u64 time, u32 raw_size, raw[raw_size] }
                let (Some(tid), Some(time), Some(raw_size)) = (u32_at(12), u64_at(16), u32_at(24))
                else {
                    return;
                };
                if tid == ignore_tid {
                    return;
                }
                let Some(raw) = rec.get(28..28 + raw_size as usize) else {
                    return;
                };
                let Some(kind) = read_int(raw, layout.type_field) else {
                    return;
                };
                let enter = kind as u64 == layout.enter.id;
                if !enter && kind as u64 != layout.exit.id {
                    return;
                }
                let field = if enter {
                    layout.enter_nr
                } else {
                    layout.exit_nr
                };
                let Some(nr) = read_int(raw, field) else {
                    return;
                };
                self.pending.push(Rec {
                    time,
                    tid,
                    nr,
                    enter,
                });
            }
            _ => {}
        }
    }

    /// Pairs pending records up to `horizon` (all of them with `None`) in time order.
    fn settle(&mut self, horizon: Option<u64>) {
        // Stable: records with equal times keep their buffer order.
        self.pending.sort_by_key(|r| r.time);
        let cut = match horizon {
            Some(h) => self.pending.partition_point(|r| r.time <= h),
            None => self.pending.len(),
        };
        let ready: Vec<Rec> = self.pending.drain(..cut).collect();
        for r in ready {
            if r.enter {
                self.stats.entry(r.nr).or_default().calls += 1;
                if self.in_flight.insert(r.tid, (r.nr, r.time)).is_some() {
                    // The previous call of this thread never exited (exit_group, or
                    // execve's old image), or its exit was lost.
                    self.unfinished += 1;
                }
            } else {
                match self.in_flight.remove(&r.tid) {
                    Some((nr, t0)) if nr == r.nr && r.time >= t0 => {
                        let a = self.stats.entry(nr).or_default();
                        let d = r.time - t0;
                        a.completed += 1;
                        a.total_ns += d;
                        a.max_ns = a.max_ns.max(d);
                    }
                    Some(_) => {
                        self.unfinished += 1;
                        self.unmatched_exits += 1;
                    }
                    None => self.unmatched_exits += 1,
                }
            }
        }
    }

    fn into_profile(self, target: CounterTarget, duration_ns: u64) -> SyscallProfile {
        let mut syscalls: Vec<SyscallStat> = self
            .stats
            .iter()
            .map(|(&nr, a)| {
                let (name, group) = syscall_names::lookup(nr);
                SyscallStat {
                    nr,
                    name: name.map(str::to_string),
                    group,
                    calls: a.calls,
                    completed: a.completed,
                    total_ns: a.total_ns,
                    max_ns: a.max_ns,
                }
            })
            .collect();
        syscalls.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(b.calls.cmp(&a.calls)));
        SyscallProfile {
            target,
            duration_ns,
            syscalls,
            unmatched_exits: self.unmatched_exits,
            unfinished: self.unfinished + self.in_flight.len() as u64,
            lost_records: self.lost,
        }
    }
}

/// Margin behind "now" before records are paired: writing a record takes
/// microseconds, so anything older than this is already in its buffer.
const HORIZON_NS: u64 = 2_000_000;

/// How often the drainer pairs records; in between it only copies them out.
const SETTLE_NS: u64 = 50_000_000;

fn drain_loop(
    mut streams: Vec<CpuStream>,
    layout: Layout,
    interval: Duration,
    stop: &AtomicBool,
) -> Collected {
    let me = gettid();
    let mut c = Collected::default();
    let mut pollfds: Vec<libc::pollfd> = streams
        .iter()
        .map(|s| libc::pollfd {
            fd: s.enter.raw(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout_ms = interval.as_millis().clamp(1, 1000) as libc::c_int;
    let mut last_settle = monotonic_ns();
    loop {
        let stopping = stop.load(Ordering::Acquire);
        if stopping {
            for s in &streams {
                if let Err(e) = s.enter.disable(false).and_then(|_| s.exit.disable(false)) {
                    c.error = Some(CounterError::io("disable raw_syscalls events", e));
                }
            }
        }
        let now = monotonic_ns();
        for s in &mut streams {
            s.ring.drain(|rec| c.record(rec, &layout, me));
        }
        if stopping {
            c.settle(None);
            return c;
        }
        // Freeing buffer space is urgent, pairing is not: pair (sort and match) only
        // every SETTLE_NS, so a busy drainer spends its time copying records out.
        if now.saturating_sub(last_settle) >= SETTLE_NS {
            c.settle(Some(now.saturating_sub(HORIZON_NS)));
            last_settle = now;
        }
        for p in &mut pollfds {
            p.revents = 0;
        }
        // SAFETY: `pollfds` is a valid array of pollfd for the call; the fds stay
        // open because `streams` lives until the function returns.
        unsafe {
            libc::poll(
                pollfds.as_mut_ptr(),
                pollfds.len() as libc::nfds_t,
                timeout_ms,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        let tp = |id| Tracepoint { id, fields: vec![] };
        Layout {
            enter: tp(443),
            exit: tp(442),
            type_field: (0, 2),
            enter_nr: (8, 8),
            exit_nr: (8, 8),
        }
    }

    fn sample(tid: u32, time: u64, tp: u16, nr: i64) -> Vec<u8> {
        let mut raw = vec![0u8; 20];
        raw[0..2].copy_from_slice(&tp.to_ne_bytes());
        raw[8..16].copy_from_slice(&nr.to_ne_bytes());
        let mut r = Vec::new();
        let size = (8 + 4 + 4 + 8 + 4 + raw.len()) as u16;
        r.extend_from_slice(&b::PERF_RECORD_SAMPLE.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&size.to_ne_bytes());
        r.extend_from_slice(&tid.to_ne_bytes());
        r.extend_from_slice(&tid.to_ne_bytes());
        r.extend_from_slice(&time.to_ne_bytes());
        r.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        r.extend_from_slice(&raw);
        r
    }

    #[test]
    fn pairs_enter_and_exit_per_thread_across_arrival_order() {
        let l = layout();
        let mut c = Collected::default();
        // Thread 7: getppid 100..150; thread 8: read 120..400 (exit arrives first,
        // as from another CPU's buffer); thread 9: exit without entry; thread 10
        // enters and never exits; the drainer (tid 99) is ignored.
        for r in [
            sample(8, 400, 442, 0),
            sample(7, 100, 443, 110),
            sample(8, 120, 443, 0),
            sample(7, 150, 442, 110),
            sample(9, 130, 442, 1),
            sample(10, 140, 443, 231),
            sample(99, 141, 443, 7),
        ] {
            c.record(&r, &l, 99);
        }
        c.settle(Some(200));
        assert_eq!(
            c.pending.len(),
            1,
            "the exit at 400 waits for a later round"
        );
        c.settle(None);
        let p = c.into_profile(
            CounterTarget::Thread {
                tid: 0,
                inherit: false,
            },
            1000,
        );
        let read = p.find("read").unwrap();
        assert_eq!((read.calls, read.completed, read.total_ns), (1, 1, 280));
        let g = p.find("getppid").unwrap();
        assert_eq!((g.calls, g.completed, g.total_ns, g.max_ns), (1, 1, 50, 50));
        assert_eq!(p.find("exit_group").unwrap().completed, 0);
        assert_eq!(p.unmatched_exits, 1);
        assert_eq!(p.unfinished, 1);
        assert!(p.find("poll").is_none());
        assert_eq!(
            p.syscalls[0].name.as_deref(),
            Some("read"),
            "most time first"
        );
    }
}
