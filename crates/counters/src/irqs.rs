//! Interrupt time by vector on a set of CPUs, from the `irq:irq_handler_entry/exit`,
//! `irq:softirq_entry/exit` and (x86) `irq_vectors:<vector>_entry/exit` tracepoints,
//! opened CPU-wide on each CPU (`pid = -1`): an interrupt runs on whatever task it
//! hits, so following the workload's tasks would miss those that hit the idle task.
//!
//! Every tracepoint of a CPU writes into one ring buffer (the first event's, the
//! others redirected to it), drained by a background thread. At the end each CPU's
//! records are put in time order and paired on a stack per CPU: an exit closes the
//! innermost open run of the same vector, and that run's time is taken off the run it
//! interrupted, so each vector gets its exclusive time (see
//! `smtlab_model::counters::irqs`). A tracepoint pair the kernel lacks is left out;
//! with none at all, or without the permission for CPU-wide tracepoints (root, or
//! `perf_event_paranoid` -1), the error is [`CounterError::Unavailable`] with one line.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use perf_event_open_sys::bindings as b;
use smtlab_model::CpuSet;
use smtlab_model::counters::irqs::{IrqKind, IrqProfile, IrqStat};

use crate::error::{CounterError, Needs, classify};
use crate::ring::{
    self, CpuStream, Drainer, RingBuffer, Sink, monotonic_ns, page_size, read_int, u32_at, u64_at,
};
use crate::sys::{self, PerfFd};
use crate::tracefs::{self, Tracepoint};

/// The x86 system vectors traced when the kernel offers them (index = `vector` of
/// their [`IrqStat`]).
const SYSTEM_VECTORS: [&str; 5] = [
    "local_timer",
    "reschedule",
    "call_function",
    "call_function_single",
    "irq_work",
];

/// Softirq names by number (`include/linux/interrupt.h`).
const SOFTIRQS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// Data pages per CPU: interrupts come at thousands per second, not millions.
const PAGES: usize = 64;

/// One tracepoint's meaning.
#[derive(Debug, Clone, Copy)]
struct Point {
    kind: IrqKind,
    entry: bool,
    /// Where the vector number is in the raw record, or the fixed system-vector index.
    field: Result<(usize, usize), i64>,
    /// `__data_loc` of the action name (irq_handler_entry only).
    name: Option<(usize, usize)>,
    /// Index of its pair among those [`Layout::read`] found (only to drop both halves).
    pair: usize,
}

/// Tracepoint id -> meaning, and the pairs found.
#[derive(Debug, Clone, Default)]
struct Layout {
    points: BTreeMap<u64, Point>,
    traced: Vec<String>,
}

fn field(tp: &Tracepoint, name: &str) -> Result<(usize, usize), CounterError> {
    tp.field(name).ok_or_else(|| {
        CounterError::Unavailable(format!("tracepoint {} has no field `{name}`", tp.id))
    })
}

impl Layout {
    fn read() -> Result<Layout, CounterError> {
        let root = tracefs::find_tracefs().map_err(|e| CounterError::Unavailable(e.to_string()))?;
        let mut l = Layout::default();
        let mut pair = |system: &str, base: &str, kind: IrqKind, vector: Result<&str, i64>| {
            let entry = tracefs::tracepoint(&root, system, &format!("{base}_entry"));
            let exit = tracefs::tracepoint(&root, system, &format!("{base}_exit"));
            let (Ok(entry), Ok(exit)) = (entry, exit) else {
                return Ok::<(), CounterError>(());
            };
            let pick = |tp: &Tracepoint| match vector {
                Ok(name) => field(tp, name).map(Ok),
                Err(fixed) => Ok(Err(fixed)),
            };
            let pair = l.traced.len();
            for (tp, is_entry) in [(&entry, true), (&exit, false)] {
                let point = Point {
                    kind,
                    entry: is_entry,
                    field: pick(tp)?,
                    name: (is_entry && kind == IrqKind::Hardirq)
                        .then(|| tp.field("name"))
                        .flatten(),
                    pair,
                };
                l.points.insert(tp.id, point);
            }
            l.traced.push(format!("{system}:{base}"));
            Ok(())
        };
        pair("irq", "irq_handler", IrqKind::Hardirq, Ok("irq"))?;
        pair("irq", "softirq", IrqKind::Softirq, Ok("vec"))?;
        for (i, v) in SYSTEM_VECTORS.iter().enumerate() {
            pair("irq_vectors", v, IrqKind::Vector, Err(i as i64))?;
        }
        if l.points.is_empty() {
            return Err(CounterError::Unavailable(
                "no irq:irq_handler, irq:softirq or irq_vectors tracepoints in this kernel".into(),
            ));
        }
        Ok(l)
    }
}

fn attr(id: u64) -> sys::Attr {
    let sample_type = b::PERF_SAMPLE_TIME | b::PERF_SAMPLE_RAW;
    let mut a = sys::sampling_attr(b::PERF_TYPE_TRACEPOINT, id, sample_type.into(), false);
    a.set_watermark(1);
    a.__bindgen_anon_2.wakeup_watermark = (PAGES * page_size() / 4) as u32;
    a
}

/// The interrupt tracepoints opened on some CPUs, not yet enabled.
#[derive(Debug)]
pub struct IrqTracer {
    cpus: CpuSet,
    streams: Vec<CpuStream>,
    layout: Layout,
}

impl IrqTracer {
    /// Opens every interrupt tracepoint pair the kernel has, and lets this process
    /// trace, on each of `cpus`.
    pub fn open(cpus: &CpuSet) -> Result<IrqTracer, CounterError> {
        let mut layout = Layout::read()?;
        // A pair the kernel refuses on the first CPU is left out (some kernels allow
        // the irq events but not the architecture's vectors); none left: one line.
        if let Some(first) = cpus.iter().next() {
            let cpu_i = sys::cpu_arg(first)?;
            let mut refused: Option<i32> = None;
            let ids: Vec<u64> = layout.points.keys().copied().collect();
            for id in ids {
                if let Err(errno) = sys::open(&mut attr(id), -1, cpu_i, None) {
                    refused.get_or_insert(errno);
                    layout.points.remove(&id);
                }
            }
            // A pair whose entry or exit was refused is left out whole.
            let whole: Vec<usize> = (0..layout.traced.len())
                .filter(|&i| layout.points.values().filter(|p| p.pair == i).count() == 2)
                .collect();
            layout.points.retain(|_, p| whole.contains(&p.pair));
            layout.traced = whole.iter().map(|&i| layout.traced[i].clone()).collect();
            if layout.points.is_empty() {
                let errno = refused.unwrap_or(libc::EINVAL);
                return Err(CounterError::Unavailable(format!(
                    "irq tracepoints CPU-wide: {}",
                    classify(errno, Needs::RawTracepoint)
                )));
            }
        }
        let mut streams = Vec::new();
        for cpu in cpus.iter() {
            let cpu_i = sys::cpu_arg(cpu)?;
            let mut events: Vec<PerfFd> = Vec::new();
            for &id in layout.points.keys() {
                let fd = sys::open(&mut attr(id), -1, cpu_i, None).map_err(|errno| {
                    CounterError::Unavailable(format!(
                        "irq tracepoint {id} on cpu {cpu}: {}",
                        classify(errno, Needs::RawTracepoint)
                    ))
                })?;
                events.push(fd);
            }
            let ring = RingBuffer::map(&events[0], PAGES).map_err(|e| {
                CounterError::Unavailable(format!(
                    "mmap of the perf ring buffer on cpu {cpu}: {e}; raise kernel.perf_event_mlock_kb or run as root"
                ))
            })?;
            // The kernel redirects only into an event whose buffer is mapped already.
            for fd in &events[1..] {
                fd.set_output(&events[0]).map_err(|e| {
                    CounterError::io(format!("redirect irq tracepoints on cpu {cpu}"), e)
                })?;
            }
            streams.push(CpuStream { events, ring });
        }
        Ok(IrqTracer {
            cpus: cpus.clone(),
            streams,
            layout,
        })
    }

    /// Enables the tracepoints and starts draining their buffers.
    pub fn start(self) -> Result<RunningIrqTrace, CounterError> {
        sys::reset_then_enable(
            self.streams.iter().flat_map(|s| &s.events),
            "irq tracepoints",
        )?;
        let start_ns = monotonic_ns();
        let IrqTracer {
            cpus,
            streams,
            layout,
        } = self;
        let traced = layout.traced.clone();
        let drainer = Drainer::spawn("irq trace", "smtlab-irqtrace", move |stop| {
            drain(streams, &layout, stop)
        })?;
        Ok(RunningIrqTrace {
            cpus,
            traced,
            drainer,
            start_ns,
        })
    }
}

/// Tracing in progress; [`RunningIrqTrace::stop`] returns the profile.
#[derive(Debug)]
pub struct RunningIrqTrace {
    cpus: CpuSet,
    /// The tracepoint pairs opened.
    traced: Vec<String>,
    drainer: Drainer<Collected>,
    start_ns: u64,
}

impl RunningIrqTrace {
    /// Disables the tracepoints, drains what is left and pairs the records.
    pub fn stop(self) -> Result<IrqProfile, CounterError> {
        let end_ns = monotonic_ns();
        let duration_ns = end_ns.saturating_sub(self.start_ns);
        let collected = self.drainer.finish()?;
        Ok(collected.into_profile(self.cpus, duration_ns, self.traced))
    }
}

/// Each CPU's records kept apart (one stream per CPU), paired once tracing ends.
fn drain(streams: Vec<CpuStream>, layout: &Layout, stop: &AtomicBool) -> Collected {
    let mut sink = Drain {
        c: Collected::default(),
        layout,
    };
    let _ = ring::drain_loop(streams, None, Duration::from_millis(5), stop, &mut sink);
    sink.c
}

struct Drain<'a> {
    c: Collected,
    layout: &'a Layout,
}

impl Sink for Drain<'_> {
    fn record(&mut self, stream: usize, rec: &[u8]) {
        self.c.record(stream as u32, rec, self.layout);
    }
    fn settle(&mut self, _: Option<u64>) {}
}

/// One parsed record.
#[derive(Debug, Clone)]
struct Rec {
    time: u64,
    kind: IrqKind,
    vector: i64,
    entry: bool,
    name: Option<String>,
}

/// An interrupt run open on a CPU's stack.
#[derive(Debug, Clone, Copy)]
struct Open {
    kind: IrqKind,
    vector: i64,
    since: u64,
    nested_ns: u64,
}

#[derive(Debug, Default)]
struct Collected {
    /// Records by stream, one stream per CPU: each CPU's interrupts nest apart.
    per_cpu: BTreeMap<u32, Vec<Rec>>,
    names: BTreeMap<i64, String>,
    lost: u64,
}

/// The name of number `n` in `names`, else `what n`.
fn named(names: &[&str], what: &str, n: i64) -> String {
    let name = usize::try_from(n).ok().and_then(|i| names.get(i));
    name.map_or_else(|| format!("{what} {n}"), |s| (*s).to_string())
}

/// A `__data_loc char[]` field: a u32 whose low 16 bits are the string's offset in the
/// raw record and high 16 bits its length (with the NUL).
fn data_loc(raw: &[u8], (off, _): (usize, usize)) -> Option<String> {
    let loc = u32_at(raw, off)?;
    let (start, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
    let bytes = raw.get(start..start + len)?;
    let text = bytes.split(|&b| b == 0).next()?;
    Some(String::from_utf8_lossy(text).into_owned())
}

impl Collected {
    fn record(&mut self, stream: u32, rec: &[u8], layout: &Layout) {
        match u32_at(rec, 0) {
            Some(t) if t == b::PERF_RECORD_LOST => self.lost += u64_at(rec, 16).unwrap_or(0),
            Some(t) if t == b::PERF_RECORD_SAMPLE => {
                // { header, u64 time, u32 raw_size, raw[raw_size] }
                let (Some(time), Some(size)) = (u64_at(rec, 8), u32_at(rec, 16)) else {
                    return;
                };
                let Some(raw) = rec.get(20..20 + size as usize) else {
                    return;
                };
                let Some(id) = read_int(raw, (0, 2)) else {
                    return;
                };
                let Some(p) = layout.points.get(&(id as u64)) else {
                    return;
                };
                let vector = match p.field {
                    Ok(f) => match read_int(raw, f) {
                        Some(v) => v,
                        None => return,
                    },
                    Err(fixed) => fixed,
                };
                let name = p.name.and_then(|f| data_loc(raw, f));
                self.per_cpu.entry(stream).or_default().push(Rec {
                    time,
                    kind: p.kind,
                    vector,
                    entry: p.entry,
                    name,
                });
            }
            _ => {}
        }
    }

    fn into_profile(mut self, cpus: CpuSet, duration_ns: u64, traced: Vec<String>) -> IrqProfile {
        let mut acc: BTreeMap<(IrqKind, i64), (u64, u64, u64)> = BTreeMap::new();
        let mut unmatched = 0u64;
        for recs in self.per_cpu.values_mut() {
            recs.sort_by_key(|r| r.time);
            let mut stack: Vec<Open> = Vec::new();
            for r in recs.iter() {
                if r.entry {
                    if let Some(n) = &r.name {
                        self.names.entry(r.vector).or_insert_with(|| n.clone());
                    }
                    stack.push(Open {
                        kind: r.kind,
                        vector: r.vector,
                        since: r.time,
                        nested_ns: 0,
                    });
                    continue;
                }
                // The innermost open run of this vector; runs above it never exited
                // (lost records) and are dropped.
                let Some(pos) = stack
                    .iter()
                    .rposition(|o| o.kind == r.kind && o.vector == r.vector)
                else {
                    unmatched += 1;
                    continue;
                };
                unmatched += (stack.len() - pos - 1) as u64;
                stack.truncate(pos + 1);
                let Some(o) = stack.pop() else { continue };
                let inclusive = r.time.saturating_sub(o.since);
                let own = inclusive.saturating_sub(o.nested_ns);
                let a = acc.entry((o.kind, o.vector)).or_default();
                a.0 += 1;
                a.1 += own;
                a.2 = a.2.max(own);
                if let Some(parent) = stack.last_mut() {
                    parent.nested_ns += inclusive;
                }
            }
            unmatched += stack.len() as u64;
        }
        let mut stats: Vec<IrqStat> = acc
            .into_iter()
            .map(|((kind, vector), (count, cpu_ns, max_ns))| IrqStat {
                kind,
                vector,
                name: match kind {
                    IrqKind::Softirq => named(&SOFTIRQS, "softirq", vector),
                    IrqKind::Vector => named(&SYSTEM_VECTORS, "vector", vector),
                    IrqKind::Hardirq => self.names.get(&vector).cloned().unwrap_or_default(),
                },
                count,
                cpu_ns,
                max_ns,
            })
            .collect();
        stats.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then(b.count.cmp(&a.count)));
        IrqProfile {
            cpus,
            duration_ns,
            stats,
            traced,
            unmatched,
            lost_records: self.lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HARD_IN: u64 = 1;
    const HARD_OUT: u64 = 2;
    const SOFT_IN: u64 = 3;
    const SOFT_OUT: u64 = 4;
    const TIMER_IN: u64 = 5;
    const TIMER_OUT: u64 = 6;

    fn layout() -> Layout {
        let p = |kind, entry, field, name| Point {
            kind,
            entry,
            field,
            name,
            pair: 0,
        };
        let mut l = Layout::default();
        l.points.insert(
            HARD_IN,
            p(IrqKind::Hardirq, true, Ok((8, 4)), Some((12, 4))),
        );
        l.points
            .insert(HARD_OUT, p(IrqKind::Hardirq, false, Ok((8, 4)), None));
        l.points
            .insert(SOFT_IN, p(IrqKind::Softirq, true, Ok((8, 4)), None));
        l.points
            .insert(SOFT_OUT, p(IrqKind::Softirq, false, Ok((8, 4)), None));
        l.points
            .insert(TIMER_IN, p(IrqKind::Vector, true, Err(0), None));
        l.points
            .insert(TIMER_OUT, p(IrqKind::Vector, false, Err(0), None));
        l
    }

    /// A sample record: { header, time, raw size, raw } with the tracepoint id, the
    /// vector at 8 and, for a named entry, a `__data_loc` at 12 pointing at 16.
    fn sample(time: u64, id: u64, vector: i32, name: Option<&str>) -> Vec<u8> {
        let mut raw = vec![0u8; 16];
        raw[0..2].copy_from_slice(&(id as u16).to_ne_bytes());
        raw[8..12].copy_from_slice(&vector.to_ne_bytes());
        if let Some(n) = name {
            let loc = 16u32 | (((n.len() + 1) as u32) << 16);
            raw[12..16].copy_from_slice(&loc.to_ne_bytes());
            raw.extend_from_slice(n.as_bytes());
            raw.push(0);
        }
        let mut r = Vec::new();
        r.extend_from_slice(&b::PERF_RECORD_SAMPLE.to_ne_bytes());
        r.extend_from_slice(&0u16.to_ne_bytes());
        r.extend_from_slice(&((20 + raw.len()) as u16).to_ne_bytes());
        r.extend_from_slice(&time.to_ne_bytes());
        r.extend_from_slice(&(raw.len() as u32).to_ne_bytes());
        r.extend_from_slice(&raw);
        r
    }

    /// Exclusive times computed by hand. CPU 0: NET_RX softirq 100..400 with the
    /// virtio irq 11 nested at 200..250 and the local timer at 300..320 (NET_RX owns
    /// 300 - 50 - 20 = 230); TIMER softirq 500..540. CPU 1: an exit with no entry
    /// (running when tracing began), then irq 11 at 1000..1010 arriving out of order.
    #[test]
    fn nested_interrupts_are_taken_off_the_run_they_interrupt() {
        let l = layout();
        let mut c = Collected::default();
        for r in [
            sample(100, SOFT_IN, 3, None),
            sample(200, HARD_IN, 11, Some("virtio0-input.0")),
            sample(250, HARD_OUT, 11, None),
            sample(300, TIMER_IN, 236, None),
            sample(320, TIMER_OUT, 236, None),
            sample(400, SOFT_OUT, 3, None),
            sample(500, SOFT_IN, 1, None),
            sample(540, SOFT_OUT, 1, None),
        ] {
            c.record(0, &r, &l);
        }
        for r in [
            sample(900, SOFT_OUT, 9, None),
            sample(1010, HARD_OUT, 11, None),
            sample(1000, HARD_IN, 11, Some("virtio0-input.0")),
        ] {
            c.record(1, &r, &l);
        }
        let p = c.into_profile(CpuSet::from_iter([0, 1]), 1000, vec!["irq:softirq".into()]);
        let net = p.find(IrqKind::Softirq, "NET_RX").unwrap();
        assert_eq!((net.count, net.cpu_ns), (1, 230));
        let hard = p.find(IrqKind::Hardirq, "virtio0-input.0").unwrap();
        assert_eq!(
            (hard.vector, hard.count, hard.cpu_ns, hard.max_ns),
            (11, 2, 60, 50)
        );
        assert_eq!(hard.label(), "irq 11 virtio0-input.0");
        let timer = p.find(IrqKind::Vector, "local_timer").unwrap();
        assert_eq!((timer.count, timer.cpu_ns), (1, 20));
        assert_eq!(p.find(IrqKind::Softirq, "TIMER").unwrap().cpu_ns, 40);
        assert_eq!(p.unmatched, 1);
        assert_eq!(p.stats[0].name, "NET_RX", "most time first");
        // 230 + 60 + 20 + 40 = 350 ns of 2 CPUs x 1000 ns.
        let all: u64 = p.stats.iter().map(|s| s.cpu_ns).sum();
        assert_eq!(p.share(all), Some(0.175));
    }
}
