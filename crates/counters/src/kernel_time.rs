//! Kernel time by cause: page faults, contended kernel locks and TLB shootdowns
//! received, timed per task from tracepoints and software events, without a PMU and
//! without kprobes
//! (`smtlab_model::counters::kernel_time` says what each time includes).
//!
//! A fault's entry is its `exceptions:page_fault_user`/`page_fault_kernel` tracepoint;
//! its end is the kernel's minor- or major-fault software event
//! (`PERF_COUNT_SW_PAGE_FAULTS_MIN`/`MAJ`), which `handle_mm_fault` raises once the
//! fault is resolved, in the faulting task, and never for `get_user_pages` (which has
//! no fault entry either). Which of the two ends a fault says minor or major. Lock
//! waits pair `lock:contention_begin` and `contention_end` by task and lock address.
//! A TLB shootdown received is a function-call interrupt
//! (`irq_vectors:call_function_entry`/`_exit`, or `call_function_single_*`) that hit a
//! traced task and inside which `tlb:tlb_flush` reported a remote shootdown (reason 1;
//! the kernel filters the others out, so a flush on every context switch costs no
//! record).
//!
//! Per CPU, a dummy software event owns the ring buffer and records the traced tasks'
//! context switches; every other event samples every occurrence (`sample_period` 1)
//! into it, told apart by the sample identifier. A counting task clock on the same
//! tasks gives the CPU time the shares are of. The drainer and the switch arithmetic
//! are the system-call tracer's ([`crate::ring`]).

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use perf_event_open_sys::bindings as b;
use smtlab_model::counters::kernel_time::{CauseTime, KernelCause, KernelTimeProfile};
use smtlab_model::counters::{CountMode, CounterTarget};

use crate::error::{CounterError, open_error};
use crate::ring::{
    self, CpuStream, Drainer, RingBuffer, Sink, Stretch, Timed, monotonic_ns, page_size, read_int,
    u32_at, u64_at,
};
use crate::sys::{self, PerfFd};
use crate::tracefs;

/// Data pages per CPU (4 MiB with 4 KiB pages, as the syscall tracer's default): a
/// fault's two records take about 80 bytes, so a buffer holds about 50,000 faults
/// between drains, and the drainer may get no CPU for a while when the traced threads
/// outnumber the CPUs. Records that do not fit are counted in `lost_records`.
const PAGES: usize = 1024;
/// `PERF_COUNT_SW_*`.
const SW_TASK_CLOCK: u64 = 1;
const SW_MINOR_FAULTS: u64 = 5;
const SW_MAJOR_FAULTS: u64 = 6;
const SW_DUMMY: u64 = 9;

/// What a sample of one event means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    FaultEntry {
        user: bool,
    },
    FaultEnd {
        major: bool,
    },
    LockBegin,
    LockEnd,
    /// A function-call interrupt's entry or exit (`call_function`, `_single`).
    IpiEntry,
    IpiExit,
    /// A TLB flush another CPU asked for (`tlb:tlb_flush`, reason 1).
    TlbRemote,
}

/// `TLB_REMOTE_SHOOTDOWN` in the kernel's `enum tlb_flush_reason`.
const TLB_REMOTE_SHOOTDOWN: &str = "reason == 1";

/// One event to open per CPU: its perf type and config, and whether its raw record
/// (the lock address) is needed.
struct Source {
    kind: Kind,
    type_: u32,
    config: u64,
    raw: bool,
    /// A tracepoint filter the kernel applies before recording.
    filter: Option<&'static str>,
}

/// The events this kernel offers, the lock address's place in the lock records, and
/// the one-line reason for each cause it does not offer.
struct Layout {
    sources: Vec<Source>,
    lock_addr: (usize, usize),
    unavailable: Vec<String>,
}

impl Layout {
    fn read() -> Result<Layout, CounterError> {
        let root = tracefs::find_tracefs().map_err(|e| CounterError::Unavailable(e.to_string()))?;
        let tp = |system: &str, name: &str| tracefs::tracepoint(&root, system, name);
        let sw = |kind, config| Source {
            kind,
            type_: b::PERF_TYPE_SOFTWARE,
            config,
            raw: false,
            filter: None,
        };
        let tracepoint = |kind, t: tracefs::Tracepoint, raw| Source {
            kind,
            type_: b::PERF_TYPE_TRACEPOINT,
            config: t.id,
            raw,
            filter: None,
        };
        let mut sources = Vec::new();
        let mut unavailable = Vec::new();
        match (
            tp("exceptions", "page_fault_user"),
            tp("exceptions", "page_fault_kernel"),
        ) {
            (Ok(u), Ok(k)) => {
                for (user, t) in [(true, u), (false, k)] {
                    sources.push(tracepoint(Kind::FaultEntry { user }, t, false));
                }
                sources.push(sw(Kind::FaultEnd { major: false }, SW_MINOR_FAULTS));
                sources.push(sw(Kind::FaultEnd { major: true }, SW_MAJOR_FAULTS));
            }
            _ => unavailable.push(
                "faults: this kernel has no tracepoints exceptions:page_fault_user/kernel (x86 only)"
                    .to_string(),
            ),
        }
        let mut lock_addr = (8, 8);
        match (tp("lock", "contention_begin"), tp("lock", "contention_end")) {
            (Ok(begin), Ok(end)) => {
                lock_addr = begin.field("lock_addr").unwrap_or(lock_addr);
                if end.field("lock_addr").unwrap_or(lock_addr) != lock_addr {
                    return Err(CounterError::Unavailable(
                        "lock:contention_begin and contention_end place lock_addr apart".into(),
                    ));
                }
                for (kind, t) in [(Kind::LockBegin, begin), (Kind::LockEnd, end)] {
                    sources.push(tracepoint(kind, t, true));
                }
            }
            _ => unavailable.push(
                "lock waits: this kernel has no tracepoints lock:contention_begin/end (Linux 5.19 and later)"
                    .to_string(),
            ),
        }
        let ipis = ["call_function", "call_function_single"].map(|v| {
            (
                tp("irq_vectors", &format!("{v}_entry")),
                tp("irq_vectors", &format!("{v}_exit")),
            )
        });
        match (ipis, tp("tlb", "tlb_flush")) {
            ([(Ok(e1), Ok(x1)), (Ok(e2), Ok(x2))], Ok(flush)) => {
                for (kind, t) in [
                    (Kind::IpiEntry, e1),
                    (Kind::IpiExit, x1),
                    (Kind::IpiEntry, e2),
                    (Kind::IpiExit, x2),
                ] {
                    sources.push(tracepoint(kind, t, false));
                }
                let mut s = tracepoint(Kind::TlbRemote, flush, false);
                s.filter = Some(TLB_REMOTE_SHOOTDOWN);
                sources.push(s);
            }
            _ => unavailable.push(
                "TLB shootdowns: this kernel has no tracepoints irq_vectors:call_function(_single)_entry/exit \
                 and tlb:tlb_flush (x86 only)"
                    .to_string(),
            ),
        }
        if sources.is_empty() {
            return Err(CounterError::Unavailable(unavailable.join("; ")));
        }
        Ok(Layout {
            sources,
            lock_addr,
            unavailable,
        })
    }
}

/// A sampling attribute: every occurrence, with the sample's identifier first (so
/// records of different events in one buffer are told apart), task and time.
fn sample_attr(type_: u32, config: u64, inherit: bool, raw: bool) -> sys::Attr {
    let mut sample_type = b::PERF_SAMPLE_IDENTIFIER | b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME;
    if raw {
        sample_type |= b::PERF_SAMPLE_RAW;
    }
    let mut a = sys::sampling_attr(type_, config, sample_type.into(), inherit);
    a.set_sample_id_all(1);
    a
}

/// The ring's owner on one CPU: a dummy event recording context switches (when
/// `switches`), woken a quarter full.
fn leader_attr(inherit: bool, switches: bool) -> sys::Attr {
    let mut a = sample_attr(b::PERF_TYPE_SOFTWARE, SW_DUMMY, inherit, false);
    a.set_context_switch(u64::from(switches));
    a.set_watermark(1);
    a.__bindgen_anon_2.wakeup_watermark = (PAGES * page_size() / 4) as u32;
    a
}

/// Fault and lock tracing opened on a task (and its later children), not yet enabled.
#[derive(Debug)]
pub struct KernelTimeTracer {
    target: CounterTarget,
    streams: Vec<CpuStream>,
    clock: Option<PerfFd>,
    kinds: HashMap<u64, Kind>,
    lock_addr: (usize, usize),
    unavailable: Vec<String>,
    switches: bool,
}

impl KernelTimeTracer {
    /// Opens the events on `tid` (with `inherit`, its later threads and children too),
    /// one set per online CPU.
    pub fn open(tid: i32, inherit: bool) -> Result<KernelTimeTracer, CounterError> {
        let layout = Layout::read()?;
        let cpus = crate::syscalls::online_cpus()?;
        let mut switches = true;
        let mut streams = Vec::new();
        let mut kinds = HashMap::new();
        for (i, cpu) in cpus.iter().enumerate() {
            let cpu_i = sys::cpu_arg(cpu)?;
            let leader = match sys::open(&mut leader_attr(inherit, switches), tid, cpu_i, None) {
                // EINVAL: a kernel before 4.3 has no context-switch records.
                Err(libc::EINVAL) if i == 0 => {
                    switches = false;
                    sys::open(&mut leader_attr(inherit, false), tid, cpu_i, None)
                }
                other => other,
            }
            .map_err(|errno| open_error(format!("kernel-cause trace on cpu {cpu}"), errno, None))?;
            let ring = RingBuffer::map(&leader, PAGES).map_err(|e| {
                CounterError::Unavailable(format!(
                    "mmap of the perf ring buffer ({PAGES} pages) on cpu {cpu}: {e}; raise kernel.perf_event_mlock_kb or run as root"
                ))
            })?;
            let mut events = vec![leader];
            for s in &layout.sources {
                let mut attr = sample_attr(s.type_, s.config, inherit, s.raw);
                let fd = sys::open(&mut attr, tid, cpu_i, None).map_err(|errno| {
                    open_error(format!("{:?} event on cpu {cpu}", s.kind), errno, None)
                })?;
                if let Some(f) = s.filter {
                    fd.set_filter(f).map_err(|errno| {
                        open_error(
                            format!("filter {f:?} of {:?} on cpu {cpu}", s.kind),
                            errno,
                            None,
                        )
                    })?;
                }
                fd.set_output(&events[0])
                    .map_err(|e| CounterError::io(format!("redirect into cpu {cpu}'s ring"), e))?;
                let id = fd
                    .id()
                    .map_err(|e| CounterError::io("read a perf event's id", e))?;
                kinds.insert(id, s.kind);
                events.push(fd);
            }
            streams.push(CpuStream { events, ring });
        }
        let mut clock_attr = sys::counting_attr(
            b::PERF_TYPE_SOFTWARE,
            SW_TASK_CLOCK,
            CountMode::All,
            inherit,
        );
        let clock = sys::open(&mut clock_attr, tid, -1, None).ok();
        Ok(KernelTimeTracer {
            target: CounterTarget::Thread { tid, inherit },
            streams,
            clock,
            kinds,
            lock_addr: layout.lock_addr,
            unavailable: layout.unavailable,
            switches,
        })
    }

    /// Enables every event and starts draining.
    pub fn start(self) -> Result<RunningKernelTime, CounterError> {
        let start_ns = monotonic_ns();
        let fds = self
            .streams
            .iter()
            .flat_map(|s| &s.events)
            .chain(&self.clock);
        sys::reset_then_enable(fds, "the kernel-cause events")?;
        let KernelTimeTracer {
            target,
            streams,
            clock,
            kinds,
            lock_addr,
            unavailable,
            switches,
        } = self;
        let drainer = Drainer::spawn("kernel-cause trace", "smtlab-kerntrace", move |stop| {
            drain(streams, clock, kinds, lock_addr, stop)
        })?;
        Ok(RunningKernelTime {
            target,
            drainer,
            start_ns,
            unavailable,
            switches,
        })
    }
}

/// Tracing in progress; [`RunningKernelTime::stop`] returns the profile.
#[derive(Debug)]
pub struct RunningKernelTime {
    target: CounterTarget,
    drainer: Drainer<(Collected, Option<u64>)>,
    start_ns: u64,
    unavailable: Vec<String>,
    switches: bool,
}

impl RunningKernelTime {
    /// Disables the events, drains what is left and pairs the records.
    pub fn stop(self) -> Result<KernelTimeProfile, CounterError> {
        let end_ns = monotonic_ns();
        let (collected, task_cpu_ns) = self.drainer.finish()?;
        let mut p = collected.into_profile(self.target, self.switches);
        p.duration_ns = end_ns.saturating_sub(self.start_ns);
        p.task_cpu_ns = task_cpu_ns;
        p.unavailable = self.unavailable;
        Ok(p)
    }
}

fn drain(
    streams: Vec<CpuStream>,
    clock: Option<PerfFd>,
    kinds: HashMap<u64, Kind>,
    lock_addr: (usize, usize),
    stop: &AtomicBool,
) -> (Collected, Option<u64>) {
    let mut c = Collected {
        kinds,
        lock_addr,
        me: smtlab_placement::pin::gettid() as u32,
        ..Collected::default()
    };
    let interval = Duration::from_millis(5);
    let _ = ring::drain_loop(streams, clock.as_ref(), interval, stop, &mut c);
    let task_cpu_ns = clock
        .as_ref()
        .and_then(|fd| fd.read_counting().ok())
        .map(|(ns, _, _)| ns);
    (c, task_cpu_ns)
}

/// What one record says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Event(Kind, u64),
    /// A context switch of the task: out (`true`) or back in.
    Switch(bool),
}

type Rec = ring::Rec<What>;

/// What one task has open: a fault (and whether taken in user mode) and its lock
/// waits, outermost first.
#[derive(Debug, Default)]
struct Open {
    fault: Option<(bool, Stretch)>,
    locks: Vec<(u64, Stretch)>,
    /// A function-call interrupt running on the task: its entry time, and whether a
    /// remote TLB shootdown ran inside it.
    ipi: Option<(u64, bool)>,
}

#[derive(Debug, Default)]
struct Collected {
    kinds: HashMap<u64, Kind>,
    lock_addr: (usize, usize),
    /// The drainer's own thread, left out.
    me: u32,
    pending: Vec<Rec>,
    open: HashMap<u32, Open>,
    stats: HashMap<KernelCause, Timed>,
    unfinished: u64,
    unmatched_ends: u64,
    lost: u64,
}

impl Sink for Collected {
    fn record(&mut self, _: usize, rec: &[u8]) {
        if let Some((tid, time, out)) = ring::parse_switch(rec) {
            if tid != self.me {
                let what = What::Switch(out);
                self.pending.push(Rec { time, tid, what });
            }
            return;
        }
        match u32_at(rec, 0) {
            // { header, u64 id, u64 lost }
            Some(b::PERF_RECORD_LOST) => self.lost += u64_at(rec, 16).unwrap_or(0),
            // { header, u64 identifier, u32 pid, tid, u64 time, [u32 size, raw] }
            Some(b::PERF_RECORD_SAMPLE) => {
                let (Some(id), Some(tid), Some(time)) =
                    (u64_at(rec, 8), u32_at(rec, 20), u64_at(rec, 24))
                else {
                    return;
                };
                let Some(&kind) = self.kinds.get(&id) else {
                    return;
                };
                if tid == self.me {
                    return;
                }
                let addr = match kind {
                    Kind::LockBegin | Kind::LockEnd => {
                        let Some(raw) = rec.get(36..) else { return };
                        read_int(raw, self.lock_addr).unwrap_or(0) as u64
                    }
                    _ => 0,
                };
                self.pending.push(Rec {
                    time,
                    tid,
                    what: What::Event(kind, addr),
                });
            }
            _ => {}
        }
    }

    fn settle(&mut self, horizon: Option<u64>) {
        for r in ring::ready(&mut self.pending, horizon) {
            self.apply(r);
        }
    }
}

impl Collected {
    fn apply(&mut self, r: Rec) {
        let open = self.open.entry(r.tid).or_default();
        match r.what {
            What::Switch(out) => {
                let fault = open.fault.iter_mut().map(|f| &mut f.1);
                for s in fault.chain(open.locks.iter_mut().map(|l| &mut l.1)) {
                    s.switch(out, r.time);
                }
            }
            What::Event(Kind::FaultEntry { user }, _) => {
                // The previous fault never reached its end: a signal or a fix-up.
                if open.fault.replace((user, Stretch::new(r.time))).is_some() {
                    self.unfinished += 1;
                }
            }
            What::Event(Kind::FaultEnd { major }, _) => match open.fault.take() {
                Some((user, s)) => {
                    let cause = KernelCause::fault(user, major);
                    self.stats.entry(cause).or_default().add(s.close(r.time));
                }
                None => self.unmatched_ends += 1,
            },
            What::Event(Kind::LockBegin, addr) => {
                // A second begin of a lock already waited for (a mutex's spin, then its
                // sleep) continues that wait.
                if !open.locks.iter().any(|(a, _)| *a == addr) {
                    open.locks.push((addr, Stretch::new(r.time)));
                }
            }
            What::Event(Kind::LockEnd, addr) => {
                match open.locks.iter().position(|(a, _)| *a == addr) {
                    Some(i) => {
                        // Waits opened inside this one and not ended are lost ends.
                        self.unfinished += (open.locks.len() - i - 1) as u64;
                        let (_, s) = open.locks[i];
                        open.locks.truncate(i);
                        // Only the outermost wait counts: an inner one is inside it.
                        if i == 0 {
                            let acc = self.stats.entry(KernelCause::LockWait).or_default();
                            acc.add(s.close(r.time));
                        }
                    }
                    None => self.unmatched_ends += 1,
                }
            }
            What::Event(Kind::IpiEntry, _) => open.ipi = Some((r.time, false)),
            What::Event(Kind::TlbRemote, _) => {
                if let Some((_, tlb)) = &mut open.ipi {
                    *tlb = true;
                }
            }
            What::Event(Kind::IpiExit, _) => {
                // An interrupt runs to its end on the task it hit: wall time is CPU time.
                if let Some((start, true)) = open.ipi.take() {
                    let ns = r.time.saturating_sub(start);
                    let acc = self.stats.entry(KernelCause::TlbShootdownReceived);
                    acc.or_default().add((ns, ns));
                }
            }
        }
    }

    fn into_profile(self, target: CounterTarget, switches: bool) -> KernelTimeProfile {
        let causes = KernelCause::ALL
            .iter()
            .filter_map(|&cause| {
                let a = self.stats.get(&cause)?;
                Some(CauseTime {
                    cause,
                    completed: a.completed,
                    wall_ns: a.wall_ns,
                    max_wall_ns: a.max_wall_ns,
                    cpu_ns: switches.then_some(a.cpu_ns),
                })
            })
            .collect();
        let still_open: u64 = self
            .open
            .values()
            .map(|o| u64::from(o.fault.is_some()) + o.locks.len() as u64)
            .sum();
        KernelTimeProfile {
            target,
            duration_ns: 0,
            task_cpu_ns: None,
            causes,
            unfinished: self.unfinished + still_open,
            unmatched_ends: self.unmatched_ends,
            lost_records: self.lost,
            switches_traced: switches,
            unavailable: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAULT_USER: u64 = 1;
    const FAULT_KERNEL: u64 = 2;
    const MINOR: u64 = 3;
    const MAJOR: u64 = 4;
    const BEGIN: u64 = 5;
    const END: u64 = 6;
    const IPI_ENTRY: u64 = 7;
    const IPI_EXIT: u64 = 8;
    const TLB: u64 = 9;

    fn collected() -> Collected {
        let kinds = [
            (FAULT_USER, Kind::FaultEntry { user: true }),
            (FAULT_KERNEL, Kind::FaultEntry { user: false }),
            (MINOR, Kind::FaultEnd { major: false }),
            (MAJOR, Kind::FaultEnd { major: true }),
            (BEGIN, Kind::LockBegin),
            (END, Kind::LockEnd),
            (IPI_ENTRY, Kind::IpiEntry),
            (IPI_EXIT, Kind::IpiExit),
            (TLB, Kind::TlbRemote),
        ];
        Collected {
            kinds: kinds.into_iter().collect(),
            lock_addr: (8, 8),
            me: 99,
            ..Collected::default()
        }
    }

    /// A sample record of event `id` by `tid` at `time`, with a lock address for locks.
    fn sample(id: u64, tid: u32, time: u64, lock: Option<u64>) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&b::PERF_RECORD_SAMPLE.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&id.to_ne_bytes());
        r.extend_from_slice(&tid.to_ne_bytes());
        r.extend_from_slice(&tid.to_ne_bytes());
        r.extend_from_slice(&time.to_ne_bytes());
        if let Some(addr) = lock {
            let mut raw = vec![0u8; 20];
            raw[8..16].copy_from_slice(&addr.to_ne_bytes());
            r.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
            r.extend_from_slice(&raw);
        }
        let size = r.len() as u16;
        r[6..8].copy_from_slice(&size.to_ne_bytes());
        r
    }

    fn switch(tid: u32, time: u64, out: bool) -> Vec<u8> {
        let mut r = Vec::new();
        let misc = if out {
            b::PERF_RECORD_MISC_SWITCH_OUT as u16
        } else {
            0
        };
        r.extend_from_slice(&b::PERF_RECORD_SWITCH.to_ne_bytes());
        r.extend_from_slice(&misc.to_ne_bytes());
        r.extend_from_slice(&32u16.to_ne_bytes());
        r.extend_from_slice(&tid.to_ne_bytes());
        r.extend_from_slice(&tid.to_ne_bytes());
        r.extend_from_slice(&time.to_ne_bytes());
        r.extend_from_slice(&0u64.to_ne_bytes());
        r
    }

    /// Computed by hand. Thread 5: a user fault 100..130 (minor); a user fault
    /// 200..1200 switched out 300..1100 (major: CPU 200); a user fault at 1300 that
    /// never ends, replaced by a kernel fault 1400..1450 (minor). Thread 6: a mutex
    /// waited 100..900 (begun twice: spin then sleep), switched out 200..800, with its
    /// wait-queue spinlock 150..170 inside it: one wait, wall 800, CPU 200; an end
    /// of a lock never begun. The drainer's own fault (tid 99) is left out.
    /// Thread 7: a function-call interrupt 2000..2100 with a remote TLB shootdown
    /// inside (100 ns); one 3000..3050 without (some other cross-CPU call: not
    /// counted); a shootdown record outside any interrupt (ignored); one 4000..4030
    /// during a lock wait 3900..4200 (30 ns, and inside the wait too). Two shootdowns,
    /// 130 ns, CPU as wall.
    #[test]
    fn tlb_shootdowns_received_are_the_interrupts_that_flushed() {
        let mut c = collected();
        for r in [
            sample(IPI_ENTRY, 7, 2000, None),
            sample(TLB, 7, 2010, None),
            sample(IPI_EXIT, 7, 2100, None),
            sample(IPI_ENTRY, 7, 3000, None),
            sample(IPI_EXIT, 7, 3050, None),
            sample(TLB, 7, 3500, None),
            sample(BEGIN, 7, 3900, Some(0xd0)),
            sample(IPI_ENTRY, 7, 4000, None),
            sample(TLB, 7, 4001, None),
            sample(IPI_EXIT, 7, 4030, None),
            sample(END, 7, 4200, Some(0xd0)),
        ] {
            c.record(0, &r);
        }
        c.settle(None);
        let p = c.into_profile(
            CounterTarget::Thread {
                tid: 7,
                inherit: true,
            },
            true,
        );
        let s = p.find(KernelCause::TlbShootdownReceived).unwrap();
        assert_eq!(
            (s.completed, s.wall_ns, s.cpu_ns, s.max_wall_ns),
            (2, 130, Some(130), 100)
        );
        assert_eq!(p.find(KernelCause::LockWait).unwrap().wall_ns, 300);
        assert!(p.faults().is_none());
    }

    #[test]
    fn faults_and_lock_waits_pair_per_task_less_switched_out_time() {
        let mut c = collected();
        for r in [
            sample(MINOR, 5, 130, None),
            sample(FAULT_USER, 5, 100, None),
            sample(FAULT_USER, 5, 200, None),
            switch(5, 300, true),
            switch(5, 1100, false),
            sample(MAJOR, 5, 1200, None),
            sample(FAULT_USER, 5, 1300, None),
            sample(FAULT_KERNEL, 5, 1400, None),
            sample(MINOR, 5, 1450, None),
            sample(BEGIN, 6, 100, Some(0xa0)),
            sample(BEGIN, 6, 150, Some(0xb0)),
            sample(END, 6, 170, Some(0xb0)),
            sample(BEGIN, 6, 180, Some(0xa0)),
            switch(6, 200, true),
            switch(6, 800, false),
            sample(END, 6, 900, Some(0xa0)),
            sample(END, 6, 950, Some(0xc0)),
            sample(FAULT_USER, 99, 10, None),
        ] {
            c.record(0, &r);
        }
        c.settle(Some(1250));
        assert_eq!(c.pending.len(), 3, "records after the horizon wait");
        c.settle(None);
        let p = c.into_profile(
            CounterTarget::Thread {
                tid: 5,
                inherit: true,
            },
            true,
        );
        let get = |cause| {
            let s = p.find(cause).unwrap();
            (s.completed, s.wall_ns, s.cpu_ns)
        };
        assert_eq!(get(KernelCause::FaultUserMinor), (1, 30, Some(30)));
        assert_eq!(get(KernelCause::FaultUserMajor), (1, 1000, Some(200)));
        assert_eq!(get(KernelCause::FaultKernelMinor), (1, 50, Some(50)));
        assert_eq!(get(KernelCause::LockWait), (1, 800, Some(200)));
        assert!(p.find(KernelCause::FaultKernelMajor).is_none());
        assert_eq!((p.unfinished, p.unmatched_ends), (1, 1));
        assert_eq!(p.faults().unwrap().cpu_ns, Some(280));
    }
}
