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
//! **CPU time, not only wall time.** The entry event also asks for the traced tasks'
//! context-switch records (`context_switch`, Linux 4.3 and later, with
//! `sample_id_all` so each carries the thread id and time): a thread switched out
//! inside a call (blocked in `read`, preempted) is off the CPU until its switch-in,
//! and that stretch is taken off the call's wall time. What is left is the CPU time
//! the call ran, interrupts that hit it included. A kernel that refuses the switch
//! records gets wall time only (`SyscallProfile::switches_traced` false).
//!
//! Where tracing is impossible (tracefs not mounted, not root, no raw_syscalls) the
//! error is [`CounterError::Unavailable`] with one line to print after "skipped: ".

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use perf_event_open_sys::bindings as b;
use smtlab_model::CpuSet;
use smtlab_model::counters::CounterTarget;
use smtlab_model::counters::syscalls::{SyscallProfile, SyscallStat};

use crate::error::{CounterError, Needs, classify, open_error};
use crate::ring::{
    self, CpuStream, Drainer, RingBuffer, Sink, Stretch, monotonic_ns, page_size, parse_switch,
    read_int, u32_at, u64_at,
};
use crate::sys;
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
    let mut attr = sample_attr(layout.enter.id, false, 4096, false);
    sys::open(&mut attr, 0, -1, None)
        .map(drop)
        .map_err(|errno| {
            let why = classify(errno, Needs::RawTracepoint);
            CounterError::Unavailable(format!("raw_syscalls tracepoints: {why}"))
        })
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

/// `switches`: also record the task's context switches into this event's buffer.
fn sample_attr(
    tracepoint_id: u64,
    inherit: bool,
    buffer_bytes: usize,
    switches: bool,
) -> sys::Attr {
    let sample_type = b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME | b::PERF_SAMPLE_RAW;
    let mut a = sys::sampling_attr(
        b::PERF_TYPE_TRACEPOINT,
        tracepoint_id,
        sample_type.into(),
        inherit,
    );
    if switches {
        a.set_context_switch(1);
        // The switch records then end with { u32 pid, tid; u64 time }.
        a.set_sample_id_all(1);
    }
    a.set_watermark(1);
    a.__bindgen_anon_2.wakeup_watermark = (buffer_bytes / 4).max(1) as u32;
    a
}

pub(crate) fn online_cpus() -> Result<CpuSet, CounterError> {
    let path = "/sys/devices/system/cpu/online";
    let text =
        std::fs::read_to_string(path).map_err(|e| CounterError::io(format!("read {path}"), e))?;
    CpuSet::parse_list(text.trim()).map_err(|e| CounterError::Parse {
        path: path.into(),
        reason: e.to_string(),
    })
}

/// Tracepoints opened but not yet enabled.
#[derive(Debug)]
pub struct SyscallTracer {
    target: CounterTarget,
    streams: Vec<CpuStream>,
    layout: Layout,
    options: TraceOptions,
    /// Whether the kernel accepted the context-switch records (CPU time per call).
    switches: bool,
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
            CounterTarget::Recorded => return Err(crate::perf::recorded()),
        };
        if cpus.is_empty() {
            return Err(CounterError::State(
                "syscall tracing needs at least one CPU".into(),
            ));
        }
        let mut pages = options.buffer_pages.max(1).next_power_of_two();
        let mut streams = Vec::with_capacity(cpus.len());
        // Decided on the first CPU, so every CPU's stream records the same things.
        let mut switches = true;
        for (i, cpu) in cpus.iter().enumerate() {
            let cpu_i = sys::cpu_arg(cpu)?;
            if i == 0 {
                let mut attr = sample_attr(layout.enter.id, inherit, pages * page_size(), true);
                // EINVAL: a kernel before 4.3 has no context-switch records.
                if matches!(sys::open(&mut attr, pid, cpu_i, None), Err(libc::EINVAL)) {
                    switches = false;
                }
            }
            let open = |id: u64, pages: usize, switches: bool| {
                let mut attr = sample_attr(id, inherit, pages * page_size(), switches);
                sys::open(&mut attr, pid, cpu_i, None).map_err(|errno| {
                    let what = format!("raw_syscalls on {target} cpu {cpu}");
                    open_error(what, errno, Some("raw_syscalls tracepoints"))
                })
            };
            let enter = open(layout.enter.id, pages, switches)?;
            let exit = open(layout.exit.id, pages, false)?;
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
            streams.push(CpuStream {
                events: vec![enter, exit],
                ring,
            });
        }
        Ok(SyscallTracer {
            target,
            streams,
            layout,
            options,
            switches,
        })
    }

    /// Enables the tracepoints and starts draining their buffers.
    pub fn start(self) -> Result<RunningTrace, CounterError> {
        let start_ns = monotonic_ns();
        let fds = self.streams.iter().flat_map(|s| &s.events);
        sys::reset_then_enable(fds, "raw_syscalls events")?;
        let SyscallTracer {
            target,
            streams,
            layout,
            options,
            switches,
        } = self;
        let drainer = Drainer::spawn("syscall trace", "smtlab-systrace", move |stop| {
            let mut c = drain_loop(streams, layout, options.drain_interval, stop);
            c.switches = switches;
            c
        })?;
        Ok(RunningTrace {
            target,
            drainer,
            start_ns,
        })
    }
}

/// Tracing in progress; [`RunningTrace::stop`] returns the profile.
#[derive(Debug)]
pub struct RunningTrace {
    target: CounterTarget,
    drainer: Drainer<Collected>,
    start_ns: u64,
}

impl RunningTrace {
    /// Disables the tracepoints, drains what is left and pairs the records.
    pub fn stop(self) -> Result<SyscallProfile, CounterError> {
        let end_ns = monotonic_ns();
        let collected = self.drainer.finish()?;
        if let Some(e) = collected.error {
            return Err(e);
        }
        Ok(collected.into_profile(self.target.clone(), end_ns.saturating_sub(self.start_ns)))
    }
}

/// What one parsed record says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Enter(i64),
    Exit(i64),
    /// A context switch of the task: out (`true`) or back in.
    Switch(bool),
}

/// One parsed record.
type Rec = ring::Rec<What>;

#[derive(Debug, Default, Clone, Copy)]
struct Acc {
    calls: u64,
    timed: ring::Timed,
    switched_out: u64,
}

/// A call in progress on one thread.
#[derive(Debug, Clone, Copy)]
struct InCall {
    nr: i64,
    stretch: Stretch,
}

/// What the drainer thread accumulates.
#[derive(Debug, Default)]
struct Collected {
    pending: Vec<Rec>,
    in_flight: HashMap<u32, InCall>,
    stats: BTreeMap<i64, Acc>,
    unmatched_exits: u64,
    unfinished: u64,
    lost: u64,
    switches: bool,
    error: Option<CounterError>,
}

impl Collected {
    /// Parses one ring-buffer record (header included).
    fn record(&mut self, rec: &[u8], layout: &Layout, ignore_tid: u32) {
        if let Some((tid, time, out)) = parse_switch(rec) {
            if tid != ignore_tid {
                let what = What::Switch(out);
                self.pending.push(Rec { time, tid, what });
            }
            return;
        }
        match u32_at(rec, 0) {
            Some(t) if t == b::PERF_RECORD_LOST => {
                // { header, u64 id, u64 lost }
                self.lost += u64_at(rec, 16).unwrap_or(0);
            }
            Some(t) if t == b::PERF_RECORD_SAMPLE => {
                // { header, u32 pid, u32 tid, u64 time, u32 raw_size, raw[raw_size] }
                let (Some(tid), Some(time), Some(raw_size)) =
                    (u32_at(rec, 12), u64_at(rec, 16), u32_at(rec, 24))
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
                let (field, what): (_, fn(i64) -> What) = if kind as u64 == layout.enter.id {
                    (layout.enter_nr, What::Enter)
                } else if kind as u64 == layout.exit.id {
                    (layout.exit_nr, What::Exit)
                } else {
                    return;
                };
                let Some(nr) = read_int(raw, field) else {
                    return;
                };
                let what = what(nr);
                self.pending.push(Rec { time, tid, what });
            }
            _ => {}
        }
    }

    /// Pairs pending records up to `horizon` (all of them with `None`) in time order.
    fn settle(&mut self, horizon: Option<u64>) {
        for r in ring::ready(&mut self.pending, horizon) {
            match r.what {
                What::Enter(nr) => {
                    self.stats.entry(nr).or_default().calls += 1;
                    let call = InCall {
                        nr,
                        stretch: Stretch::new(r.time),
                    };
                    if self.in_flight.insert(r.tid, call).is_some() {
                        // The previous call of this thread never exited (exit_group, or
                        // execve's old image), or its exit was lost.
                        self.unfinished += 1;
                    }
                }
                What::Exit(nr) => match self.in_flight.remove(&r.tid) {
                    Some(c) if c.nr == nr && r.time >= c.stretch.began => {
                        let a = self.stats.entry(nr).or_default();
                        a.timed.add(c.stretch.close(r.time));
                        a.switched_out += u64::from(c.stretch.switched);
                    }
                    Some(_) => {
                        self.unfinished += 1;
                        self.unmatched_exits += 1;
                    }
                    None => self.unmatched_exits += 1,
                },
                What::Switch(out) => {
                    if let Some(c) = self.in_flight.get_mut(&r.tid) {
                        c.stretch.switch(out, r.time);
                    }
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
                    completed: a.timed.completed,
                    wall_ns: a.timed.wall_ns,
                    max_wall_ns: a.timed.max_wall_ns,
                    cpu_ns: self.switches.then_some(a.timed.cpu_ns),
                    switched_out: a.switched_out,
                }
            })
            .collect();
        // Most CPU time first (wall time without switch records).
        syscalls.sort_by(|a, b| {
            b.rank_ns()
                .cmp(&a.rank_ns())
                .then(b.wall_ns.cmp(&a.wall_ns))
                .then(b.calls.cmp(&a.calls))
        });
        SyscallProfile {
            target,
            duration_ns,
            syscalls,
            unmatched_exits: self.unmatched_exits,
            unfinished: self.unfinished + self.in_flight.len() as u64,
            lost_records: self.lost,
            switches_traced: self.switches,
        }
    }
}

/// The drainer's sink: records parsed with the layout, the drainer's own left out.
struct Drain<'a> {
    c: &'a mut Collected,
    layout: &'a Layout,
    me: u32,
}

impl Sink for Drain<'_> {
    fn record(&mut self, _: usize, rec: &[u8]) {
        self.c.record(rec, self.layout, self.me);
    }
    fn settle(&mut self, horizon: Option<u64>) {
        self.c.settle(horizon);
    }
}

fn drain_loop(
    streams: Vec<CpuStream>,
    layout: Layout,
    interval: Duration,
    stop: &AtomicBool,
) -> Collected {
    let mut c = Collected::default();
    let mut sink = Drain {
        c: &mut c,
        layout: &layout,
        me: smtlab_placement::pin::gettid() as u32,
    };
    if let Err(e) = ring::drain_loop(streams, None, interval, stop, &mut sink) {
        c.error = Some(CounterError::io("disable raw_syscalls events", e));
    }
    c
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
        assert_eq!((read.calls, read.completed, read.wall_ns), (1, 1, 280));
        assert_eq!(read.cpu_ns, None, "no switch records, no CPU time");
        let g = p.find("getppid").unwrap();
        assert_eq!(
            (g.calls, g.completed, g.wall_ns, g.max_wall_ns),
            (1, 1, 50, 50)
        );
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

    /// A PERF_RECORD_SWITCH (per task) or SWITCH_CPU_WIDE record of `tid` at `time`.
    fn switch(tid: u32, time: u64, out: bool, cpu_wide: bool) -> Vec<u8> {
        let kind = if cpu_wide {
            b::PERF_RECORD_SWITCH_CPU_WIDE
        } else {
            b::PERF_RECORD_SWITCH
        };
        let misc = if out {
            b::PERF_RECORD_MISC_SWITCH_OUT as u16
        } else {
            0
        };
        let mut r = Vec::new();
        let size: u16 = if cpu_wide { 32 } else { 24 };
        r.extend_from_slice(&kind.to_ne_bytes());
        r.extend_from_slice(&misc.to_ne_bytes());
        r.extend_from_slice(&size.to_ne_bytes());
        if cpu_wide {
            // next_prev pid and tid: the other task, not the one switched.
            r.extend_from_slice(&4242u32.to_ne_bytes());
            r.extend_from_slice(&4242u32.to_ne_bytes());
        }
        r.extend_from_slice(&tid.to_ne_bytes());
        r.extend_from_slice(&tid.to_ne_bytes());
        r.extend_from_slice(&time.to_ne_bytes());
        r
    }

    /// CPU time inside calls, computed by hand: thread 5's read enters at 1000, is
    /// switched out at 1100 (blocks), in at 9100 on another CPU (its record arrives
    /// first), out again at 9200 (preempted), in at 9500, exits at 9600: wall 8600,
    /// off 8000 + 300, CPU 300. Thread 6's getppid runs 200..260 unswitched; its
    /// switch-out at 300, after the call, counts nowhere. Thread 7's nanosleep uses the
    /// CPU-wide record layout: 400..5400 with 420..5380 out: CPU 40.
    #[test]
    fn cpu_time_takes_switched_out_stretches_off_the_wall_time() {
        let l = layout();
        let mut c = Collected {
            switches: true,
            ..Collected::default()
        };
        for r in [
            switch(5, 9100, false, false),
            sample(5, 1000, 443, 0),
            switch(5, 1100, true, false),
            sample(6, 200, 443, 110),
            sample(6, 260, 442, 110),
            switch(6, 300, true, false),
            switch(5, 9200, true, false),
            switch(5, 9500, false, false),
            sample(5, 9600, 442, 0),
            sample(7, 400, 443, 35),
            switch(7, 420, true, true),
            switch(7, 5380, false, true),
            sample(7, 5400, 442, 35),
            switch(99, 450, true, false),
        ] {
            c.record(&r, &l, 99);
        }
        c.settle(None);
        let p = c.into_profile(
            CounterTarget::Thread {
                tid: 0,
                inherit: true,
            },
            10_000,
        );
        assert!(p.switches_traced);
        let read = p.find("read").unwrap();
        assert_eq!(
            (read.wall_ns, read.cpu_ns, read.switched_out),
            (8600, Some(300), 1)
        );
        let g = p.find("getppid").unwrap();
        assert_eq!((g.wall_ns, g.cpu_ns, g.switched_out), (60, Some(60), 0));
        let n = p.find("nanosleep").unwrap();
        assert_eq!((n.wall_ns, n.cpu_ns), (5000, Some(40)));
        assert_eq!(p.cpu_ns(), Some(400));
        assert_eq!(p.wall_ns(), 13_660);
        // Ranked by CPU time: read (300) before getppid (60) before nanosleep (40),
        // although nanosleep's wall time is second.
        let order: Vec<&str> = p
            .syscalls
            .iter()
            .filter_map(|s| s.name.as_deref())
            .collect();
        assert_eq!(order, ["read", "getppid", "nanosleep"]);
        assert_eq!((p.unmatched_exits, p.unfinished), (0, 0));
    }
}
