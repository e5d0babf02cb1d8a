//! The perf mmap ring buffer: one metadata page followed by 2^n data pages that the
//! kernel writes records into. We read from `data_tail` to `data_head` and then move
//! `data_tail` forward, which frees the space for the kernel.

use std::io;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};

use perf_event_open_sys::bindings::perf_event_mmap_page;

use crate::sys::PerfFd;

#[derive(Debug)]
pub(crate) struct RingBuffer {
    base: NonNull<u8>,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by this value alone (no aliases are handed out beyond
// a `drain` call), so moving it to another thread (the drainer) is sound.
unsafe impl Send for RingBuffer {}

/// The thread that empties a tracer's rings until it is told to stop, and what it
/// collected: stopped and joined when dropped too, so no drainer outlives its tracer.
#[derive(Debug)]
pub(crate) struct Drainer<T> {
    /// What it drains, in its errors (`irq trace`, `syscall trace`).
    what: &'static str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<T>>,
}

impl<T: Send + 'static> Drainer<T> {
    /// Starts `drain` on a thread named `name`; it should return soon after the flag it
    /// is given is set.
    pub(crate) fn spawn(
        what: &'static str,
        name: &str,
        drain: impl FnOnce(&std::sync::atomic::AtomicBool) -> T + Send + 'static,
    ) -> Result<Drainer<T>, crate::CounterError> {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread_stop = std::sync::Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || drain(&thread_stop))
            .map_err(|e| crate::CounterError::io(format!("spawn the {what} drainer thread"), e))?;
        Ok(Drainer {
            what,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the drainer; what it collected.
    pub(crate) fn finish(mut self) -> Result<T, crate::CounterError> {
        self.stop.store(true, Ordering::Release);
        let what = self.what;
        let thread = self
            .thread
            .take()
            .ok_or_else(|| crate::CounterError::State(format!("{what} already stopped")))?;
        thread
            .join()
            .map_err(|_| crate::CounterError::State(format!("the {what} drainer thread panicked")))
    }
}

impl<T> Drop for Drainer<T> {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, Ordering::Release);
            let _ = t.join();
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock the tracepoints' records are stamped with.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The native-endian `u32` at byte `o` of a ring record.
pub(crate) fn u32_at(rec: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(rec.get(o..o + 4)?.try_into().ok()?))
}

/// The native-endian `u64` at byte `o` of a ring record.
pub(crate) fn u64_at(rec: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(rec.get(o..o + 8)?.try_into().ok()?))
}

/// The signed integer field of a raw tracepoint record at `(offset, size)`.
pub(crate) fn read_int(raw: &[u8], (off, size): (usize, usize)) -> Option<i64> {
    let bytes = raw.get(off..off + size)?;
    Some(match size {
        2 => i64::from(u16::from_ne_bytes(bytes.try_into().ok()?)),
        4 => i64::from(i32::from_ne_bytes(bytes.try_into().ok()?)),
        8 => i64::from_ne_bytes(bytes.try_into().ok()?),
        _ => return None,
    })
}

pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

impl RingBuffer {
    /// Maps `data_pages` (a power of two) data pages for `fd`.
    pub(crate) fn map(fd: &PerfFd, data_pages: usize) -> io::Result<RingBuffer> {
        if !data_pages.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ring buffer data pages must be a power of two, not {data_pages}"),
            ));
        }
        let page = page_size();
        let map_len = (1 + data_pages) * page;
        // SAFETY: a fresh shared mapping of a perf fd we own; the kernel defines its
        // layout (metadata page + data pages). We check for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.raw(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        let meta = base.as_ptr().cast::<perf_event_mmap_page>();
        // SAFETY: the first page of the mapping is the kernel's perf_event_mmap_page;
        // these two fields are set once at mmap time and only read here.
        let (off, size) = unsafe { ((*meta).data_offset as usize, (*meta).data_size as usize) };
        // Kernels before 4.1 leave them zero: data then starts at the second page.
        let (data_offset, data_size) = if size == 0 {
            (page, data_pages * page)
        } else {
            (off, size)
        };
        Ok(RingBuffer {
            base,
            map_len,
            data_offset,
            data_size,
            scratch: Vec::new(),
        })
    }

    fn head_tail(&self) -> (&AtomicU64, &AtomicU64) {
        let meta = self.base.as_ptr().cast::<perf_event_mmap_page>();
        // SAFETY: data_head and data_tail are naturally aligned u64 fields of the
        // mapped metadata page, which lives as long as `self`; the kernel and we
        // access them concurrently, which is what the atomics are for.
        unsafe {
            (
                AtomicU64::from_ptr(ptr::addr_of_mut!((*meta).data_head)),
                AtomicU64::from_ptr(ptr::addr_of_mut!((*meta).data_tail)),
            )
        }
    }

    /// Copies `len` bytes starting at ring position `pos` into `out`, across the end
    /// of the data area if needed.
    fn copy_out(&self, pos: u64, len: usize, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(len);
        let start = (pos % self.data_size as u64) as usize;
        let first = len.min(self.data_size - start);
        // SAFETY: both ranges lie inside the data area of the mapping
        // (start + first <= data_size, and the wrapped part starts at 0 with
        // len - first <= data_size); the kernel does not write between tail and head.
        unsafe {
            let data = self.base.as_ptr().add(self.data_offset);
            out.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            if first < len {
                out.extend_from_slice(std::slice::from_raw_parts(data, len - first));
            }
        }
    }

    /// Hands every complete record (header included) to `f`, then frees their space.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(&[u8])) {
        let (head_a, tail_a) = self.head_tail();
        // Acquire pairs with the kernel's release of data_head: the records before
        // head are fully written when we read them.
        let head = head_a.load(Ordering::Acquire);
        let mut tail = tail_a.load(Ordering::Relaxed);
        let mut scratch = std::mem::take(&mut self.scratch);
        while tail < head {
            self.copy_out(tail, 8, &mut scratch);
            let size = u16::from_ne_bytes([scratch[6], scratch[7]]) as u64;
            if size < 8 || tail + size > head {
                // A corrupt or torn header: skip what is there rather than loop.
                tail = head;
                break;
            }
            self.copy_out(tail, size as usize, &mut scratch);
            f(&scratch);
            tail += size;
        }
        self.scratch = scratch;
        let (_, tail_a) = self.head_tail();
        // Release: our reads of the records happen before the kernel may reuse them.
        tail_a.store(tail, Ordering::Release);
    }
}

impl Drop for RingBuffer {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping created in `map`, once.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.map_len);
        }
    }
}

/// A context-switch record's task, time and direction: `(tid, time, switched_out)`.
/// The traced events ask for `context_switch` with `sample_id_all` and a sample type
/// that starts with `TID | TIME`, so the trailer begins `{ u32 pid, tid; u64 time }`
/// and names the task whose switch it is (the kernel writes it in that task's context,
/// going out or coming in).
pub(crate) fn parse_switch(rec: &[u8]) -> Option<(u32, u64, bool)> {
    use perf_event_open_sys::bindings as b;
    let kind = u32_at(rec, 0)?;
    // { header, [u32 next_prev_pid, next_prev_tid,] u32 pid, tid, u64 time }
    let at = match kind {
        b::PERF_RECORD_SWITCH => 8,
        b::PERF_RECORD_SWITCH_CPU_WIDE => 16,
        _ => return None,
    };
    let misc = u16::from_ne_bytes(rec.get(4..6)?.try_into().ok()?);
    let tid = u32_at(rec, at + 4)?;
    let time = u64_at(rec, at + 8)?;
    Some((
        tid,
        time,
        u32::from(misc) & b::PERF_RECORD_MISC_SWITCH_OUT != 0,
    ))
}

/// A stretch of a task's time between two tracepoints (a system call, a fault, a
/// lock wait), with the time the task was switched out inside it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stretch {
    pub began: u64,
    /// Time switched out so far, closed stretches only.
    off_ns: u64,
    /// When the task was switched out, while it is.
    off_since: Option<u64>,
    pub switched: bool,
}

impl Stretch {
    pub(crate) fn new(began: u64) -> Stretch {
        Stretch {
            began,
            off_ns: 0,
            off_since: None,
            switched: false,
        }
    }

    /// The task was switched out (`out`) or back in at `at`.
    pub(crate) fn switch(&mut self, out: bool, at: u64) {
        if out {
            if self.off_since.is_none() {
                self.off_since = Some(at);
                self.switched = true;
            }
        } else if let Some(since) = self.off_since.take() {
            self.off_ns += at.saturating_sub(since);
        }
    }

    /// `(wall, cpu)` nanoseconds if it ends at `end`. A switch-in never seen (a lost
    /// record) leaves its stretch open: it is not taken off, so CPU time errs high,
    /// never negative.
    pub(crate) fn close(&self, end: u64) -> (u64, u64) {
        let wall = end.saturating_sub(self.began);
        (wall, wall.saturating_sub(self.off_ns))
    }
}

/// The closed stretches of one kind (a system call, a fault cause): how many, their
/// wall and CPU time, and the longest.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Timed {
    pub completed: u64,
    pub wall_ns: u64,
    pub max_wall_ns: u64,
    pub cpu_ns: u64,
}

impl Timed {
    /// One more stretch of `(wall, cpu)` nanoseconds ([`Stretch::close`]).
    pub(crate) fn add(&mut self, (wall, cpu): (u64, u64)) {
        self.completed += 1;
        self.wall_ns += wall;
        self.max_wall_ns = self.max_wall_ns.max(wall);
        self.cpu_ns += cpu;
    }
}

/// Margin behind "now" before records are paired: writing a record takes
/// microseconds, so anything older than this is already in its buffer.
pub(crate) const HORIZON_NS: u64 = 2_000_000;

/// How often a drainer pairs records; in between it only copies them out.
const SETTLE_NS: u64 = 50_000_000;

/// What a tracer's drainer does with its rings.
pub(crate) trait Sink {
    /// One record (header included) from the `stream`th stream.
    fn record(&mut self, stream: usize, rec: &[u8]);
    /// Pairs what was recorded up to `horizon` (everything with `None`) in time order.
    fn settle(&mut self, horizon: Option<u64>);
}

/// One CPU's events of a tracer, the first owning the ring buffer the others write into.
#[derive(Debug)]
pub(crate) struct CpuStream {
    pub(crate) events: Vec<PerfFd>,
    pub(crate) ring: RingBuffer,
}

/// Empties the streams' rings into `sink` until `stop` is set, waking when a ring's
/// owner is readable or every `interval`; then disables every event (and
/// `also_disable`), drains the rest and settles everything; the last error a disable
/// gave. Freeing buffer space is urgent, pairing is not: records are paired only every
/// 50 ms, and only those older than [`HORIZON_NS`], by when every CPU's buffer holds
/// everything written before them.
pub(crate) fn drain_loop(
    streams: Vec<CpuStream>,
    also_disable: Option<&PerfFd>,
    interval: std::time::Duration,
    stop: &std::sync::atomic::AtomicBool,
    sink: &mut impl Sink,
) -> io::Result<()> {
    let (mut rings, events): (Vec<RingBuffer>, Vec<Vec<PerfFd>>) =
        streams.into_iter().map(|s| (s.ring, s.events)).unzip();
    let mut pollfds: Vec<libc::pollfd> = events
        .iter()
        .map(|e| libc::pollfd {
            fd: e[0].raw(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout_ms = interval.as_millis().clamp(1, 1000) as libc::c_int;
    let mut last_settle = monotonic_ns();
    let mut disabled = Ok(());
    loop {
        let stopping = stop.load(Ordering::Acquire);
        if stopping {
            for fd in events.iter().flatten().chain(also_disable) {
                if let Err(e) = fd.disable(false) {
                    disabled = Err(e);
                }
            }
        }
        let now = monotonic_ns();
        for (i, r) in rings.iter_mut().enumerate() {
            r.drain(|rec| sink.record(i, rec));
        }
        if stopping {
            sink.settle(None);
            return disabled;
        }
        if now.saturating_sub(last_settle) >= SETTLE_NS {
            sink.settle(Some(now.saturating_sub(HORIZON_NS)));
            last_settle = now;
        }
        for p in &mut pollfds {
            p.revents = 0;
        }
        // SAFETY: `pollfds` is a valid array of pollfd for the call; the descriptors
        // stay open (owned by `events`) while this runs.
        unsafe {
            libc::poll(
                pollfds.as_mut_ptr(),
                pollfds.len() as libc::nfds_t,
                timeout_ms,
            );
        }
    }
}

/// One parsed record of a traced task: when, which task, what happened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rec<W> {
    pub time: u64,
    pub tid: u32,
    pub what: W,
}

/// The records of `pending` up to `horizon` (all of them with `None`), in time order,
/// taken out; records with equal times keep their buffer order (a stable sort).
pub(crate) fn ready<W>(pending: &mut Vec<Rec<W>>, horizon: Option<u64>) -> Vec<Rec<W>> {
    pending.sort_by_key(|r| r.time);
    let cut = match horizon {
        Some(h) => pending.partition_point(|r| r.time <= h),
        None => pending.len(),
    };
    pending.drain(..cut).collect()
}
