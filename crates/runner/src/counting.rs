//! Counters around one cell (`--counters`): perf_event counts, `/proc/stat` time of the
//! placement's CPUs and kernel time by system call, gathered into one
//! [`CellCounters`].
//!
//! ## What is counted, and why this way
//!
//! The counters follow **smtlab's own process with `inherit`**: they are opened on the
//! measuring thread *before* the benchmark is prepared, so every worker thread and child
//! process the benchmark starts afterwards is counted with it (perf sums a counter over
//! the task it was opened on and all tasks that inherited it). The alternative, counting
//! the placement's CPUs (`pid = -1, cpu = N`), would also count whatever else runs on
//! those CPUs, and needs `perf_event_paranoid <= 0` or root; following the process works
//! at every paranoid level, for every placement including `os`. What it includes beyond
//! the workers: the measuring thread's own work between samples (timing, bookkeeping:
//! small next to a sample).
//!
//! The counters are enabled around each measured sample and disabled in between
//! ([`CellCounting::resume`] and [`CellCounting::pause`], called by the session), so
//! they cover the measured samples only, even when several cells take turns, and the
//! work those samples did gives per-unit costs (instructions per operation or byte,
//! CPU ns per operation). Calibration and warm-up run with the counters disabled; tasks
//! created meanwhile inherit them disabled and are enabled with them. Interleaved cells
//! are each prepared and measured on their own thread with their own counters, so each
//! cell's workers inherit only that cell's counters.
//!
//! The counter source, the `/proc/stat` sampler and the clock come through
//! [`CountingBackend`] and [`Clock`], so the arithmetic is tested with fakes.
//!
//! Helper threads must not be counted as workers: the `/proc/stat` sampler and the
//! syscall tracer's control thread are started *before* the counters are opened, so
//! they do not inherit them, and the tracer's buffer drainer is a child of its control
//! thread, not of the measuring thread.
//!
//! `/proc/stat` is sampled from before the benchmark is prepared until the window
//! closes, so the series shows start-up (prepare, calibration, warm-up) and steady state
//! (the measured samples, from [`CellCounters::steady_from_ns`]). When cells take
//! turns (interleaving, or rounds of several cells), the other cells use the same CPUs
//! between this cell's samples: the sampler is then paused whenever this cell is idle
//! ([`CellCounting::sample_only_while_working`], [`CellCounting::working`],
//! [`CellCounting::idle`]), so each interval holds this cell's own time only and the
//! series skips the others' turns.
//!
//! Kernel time by system call is **not** traced during the measured samples: recording
//! every entry and exit costs about half a microsecond per call, which made a
//! `null-syscall` sample seven times slower on the development VM. Instead the caller
//! takes one extra sample after the window with tracing on
//! ([`CellCounting::trace`]); the profile says so in
//! [`CellCounters::syscalls_window`]. The tracepoints are opened (not enabled) before
//! the benchmark is prepared, so the workers inherit them. The same extra sample
//! traces interrupts on the placement's CPUs and the kernel time by cause (page
//! faults, contended kernel locks: [`KernelTimeTracer`]) of the same tasks.
//!
//! Nothing here fails a cell: what cannot be measured becomes a one-line reason in the
//! result, and an error while counting is returned by [`CellCounting::finish`] for the
//! caller to report.

use std::sync::{Arc, Mutex, mpsc};
use std::thread::{JoinHandle, ThreadId};
use std::time::Duration;

use smtlab_counters::{
    CounterError, CounterSource, EventListError, IrqTracer, KernelTimeTracer, PerfCounters,
    PerfOptions, PmuTree, ProcStatSampler, ResolvedEvent, SamplerOptions, SyscallTracer,
    TraceOptions,
};
use smtlab_model::CpuSet;
use smtlab_model::counters::derived::Work;
use smtlab_model::counters::irqs::IrqProfile;
use smtlab_model::counters::kernel_time::KernelTimeProfile;
use smtlab_model::counters::named::NamedUnavailable;
use smtlab_model::counters::os_time::OsTimeSeries;
use smtlab_model::counters::syscalls::SyscallProfile;
use smtlab_model::counters::{CellCounters, CounterAvailability, CounterTarget, CounterValues};

use crate::clock::{Clock, FakeClock, Monotonic};

/// What the window of a benchmark cell covers, as stored in [`CellCounters::window`].
pub const SAMPLES_WINDOW: &str = "measured samples (calibration and warm-up excluded)";

/// What this machine allows, probed once per command ([`smtlab_counters::availability`]).
#[derive(Debug, Clone)]
pub struct CountingSetup {
    pub availability: CounterAvailability,
    /// `/proc/stat` sampling interval. USER_HZ is 100 on almost every kernel, so 100 ms
    /// gives about 10 ticks per CPU per interval.
    pub os_interval: Duration,
    /// Named events (`--events`) resolved on this machine, counted with the rest.
    pub events: Vec<ResolvedEvent>,
    /// Named events this machine lacks, each with its one-line reason; every cell's
    /// counters carry them too.
    pub events_unavailable: Vec<NamedUnavailable>,
}

impl CountingSetup {
    /// Probes the machine (a few `perf_event_open` calls and a look at tracefs).
    pub fn probe() -> CountingSetup {
        CountingSetup::with_availability(smtlab_counters::availability())
    }

    /// What `availability` allows, sampling `/proc/stat` every 100 ms, no named events.
    pub fn with_availability(availability: CounterAvailability) -> CountingSetup {
        CountingSetup {
            availability,
            os_interval: Duration::from_millis(100),
            events: Vec::new(),
            events_unavailable: Vec::new(),
        }
    }

    /// Resolves `list` against `tree` (a saved tree in tests) into the named events.
    pub fn with_events(mut self, list: &str, tree: &PmuTree) -> Result<Self, EventListError> {
        let r = smtlab_counters::resolve(list, tree)?;
        self.events = r.events;
        self.events_unavailable = r.unavailable;
        Ok(self)
    }

    /// What a [`FakeBackend`] offers: software counters, nothing else.
    pub fn fake() -> CountingSetup {
        use smtlab_model::counters::ClassStatus;
        let no = || ClassStatus::no("not in this test");
        CountingSetup::with_availability(CounterAvailability {
            perf_event_paranoid: None,
            hardware: no(),
            software: ClassStatus::yes(),
            kernel_mode: no(),
            cpu_wide: no(),
            syscall_tracing: no(),
            events: Vec::new(),
        })
    }

    /// One line per class of measurement that is missing here (no PMU, no tracefs, ...),
    /// for the caller to print once.
    pub fn missing_lines(&self) -> Vec<String> {
        let a = &self.availability;
        let (hardware, events) = smtlab_model::counters::named::unavailable_lines(
            a.hardware.reason.as_deref(),
            &self.events_unavailable,
        );
        let mut out: Vec<String> = a.software.reason.iter().cloned().chain(hardware).collect();
        if let Some(r) = &a.syscall_tracing.reason {
            out.push(format!("kernel time by system call not measured: {r}"));
            // Interrupts are traced with the system calls: the same cause stops both.
            out.push(format!("interrupt time by vector not measured: {r}"));
        }
        out.extend(events);
        out
    }
}

enum TraceCmd {
    Start,
    Stop,
}

/// What the traced sample gave: the syscall profile, the interrupt profile of the
/// placement's CPUs and the kernel time by cause, each of the last two or why there is
/// none.
struct Traced {
    syscalls: Option<SyscallProfile>,
    irqs: Result<IrqProfile, String>,
    kernel_time: Result<KernelTimeProfile, CounterError>,
}

impl Traced {
    fn none(why: &str) -> Traced {
        Traced {
            syscalls: None,
            irqs: Err(why.into()),
            kernel_time: Err(CounterError::Unavailable(why.into())),
        }
    }
}

/// The syscall tracer lives on its own thread, started before any counter is opened, so
/// neither it nor the buffer drainers it and the interrupt tracer spawn are inherited by
/// the counters or traced.
struct TraceControl {
    tx: mpsc::Sender<TraceCmd>,
    ack: mpsc::Receiver<Result<(), String>>,
    thread: Option<JoinHandle<Result<Traced, String>>>,
}

impl TraceControl {
    /// Opens the tracer on `tid` (with inherit) from a new thread; `Err` is the reason
    /// it cannot trace. Interrupts are traced CPU-wide on `cpus` over the same stretch.
    fn open(tid: i32, cpus: CpuSet) -> Result<TraceControl, String> {
        let (tx, rx) = mpsc::channel::<TraceCmd>();
        let (ack_tx, ack) = mpsc::channel::<Result<(), String>>();
        let thread = std::thread::Builder::new()
            .name("smtlab-trace-ctl".into())
            .spawn(move || -> Result<Traced, String> {
                let target = CounterTarget::Thread { tid, inherit: true };
                let tracer = match SyscallTracer::open(target, TraceOptions::default()) {
                    Ok(t) => t,
                    Err(e) => {
                        let _ = ack_tx.send(Err(e.to_string()));
                        return Ok(Traced::none(&e.to_string()));
                    }
                };
                // Opened with the syscall tracer, before the benchmark starts its
                // tasks, so they inherit it.
                let kernel_time = KernelTimeTracer::open(tid, true);
                let _ = ack_tx.send(Ok(()));
                if !matches!(rx.recv(), Ok(TraceCmd::Start)) {
                    return Ok(Traced::none("not traced"));
                }
                let irqs = IrqTracer::open(&cpus)
                    .and_then(IrqTracer::start)
                    .map_err(|e| e.to_string());
                let kernel_time = kernel_time.and_then(KernelTimeTracer::start);
                let started = tracer.start().map_err(|e| e.to_string());
                let _ = ack_tx.send(started.as_ref().map(|_| ()).map_err(Clone::clone));
                let running = started?;
                let _ = rx.recv();
                let irqs = irqs.and_then(|r| r.stop().map_err(|e| e.to_string()));
                let kernel_time = kernel_time.and_then(|r| r.stop());
                running
                    .stop()
                    .map(|p| Traced {
                        syscalls: Some(p),
                        irqs,
                        kernel_time,
                    })
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| format!("cannot start the syscall tracer thread: {e}"))?;
        let mut control = TraceControl {
            tx,
            ack,
            thread: Some(thread),
        };
        match control.ack.recv() {
            Ok(Ok(())) => Ok(control),
            Ok(Err(r)) => {
                let _ = control.join();
                Err(r)
            }
            Err(_) => Err(control
                .join()
                .err()
                .unwrap_or_else(|| "the syscall tracer thread ended early".into())),
        }
    }

    fn start(&mut self) -> Result<(), String> {
        let ended = || "the syscall tracer thread ended early".to_string();
        self.tx.send(TraceCmd::Start).map_err(|_| ended())?;
        self.ack.recv().map_err(|_| ended())?
    }

    fn stop(&mut self) -> Result<Traced, String> {
        let _ = self.tx.send(TraceCmd::Stop);
        self.join()
    }

    fn join(&mut self) -> Result<Traced, String> {
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| "the syscall tracer thread panicked".to_string())?,
            None => Ok(Traced::none("not traced")),
        }
    }
}

impl Drop for TraceControl {
    fn drop(&mut self) {
        let _ = self.tx.send(TraceCmd::Stop);
        let _ = self.join();
    }
}

/// A traced profile, or why there is none, as the two fields a cell keeps.
fn split<T, E: std::fmt::Display>(r: Result<T, E>) -> (Option<T>, Option<String>) {
    match r {
        Ok(p) => (Some(p), None),
        Err(why) => (None, Some(why.to_string())),
    }
}

/// A running `/proc/stat` sampler, behind a trait so tests can fake it.
pub trait OsSampler: Send {
    /// Ends sampling and returns the series.
    fn finish(self: Box<Self>) -> Result<OsTimeSeries, CounterError>;
    /// Closes the current interval and samples nothing until [`OsSampler::resume`].
    fn pause(&mut self) -> Result<(), CounterError>;
    /// Starts a new interval now.
    fn resume(&mut self) -> Result<(), CounterError>;
}

impl OsSampler for ProcStatSampler {
    fn finish(self: Box<Self>) -> Result<OsTimeSeries, CounterError> {
        ProcStatSampler::stop(*self)
    }
    fn pause(&mut self) -> Result<(), CounterError> {
        ProcStatSampler::pause(self)
    }
    fn resume(&mut self) -> Result<(), CounterError> {
        ProcStatSampler::resume(self)
    }
}

/// Why a cell's counters were not recorded. The cause is part of the message, not a
/// `source`, so it is printed once.
#[derive(Debug, thiserror::Error)]
pub enum CountingError {
    #[error("cannot open the counters: {0}")]
    Open(CounterError),
    #[error("cannot start the counters: {0}")]
    Start(CounterError),
    #[error("cannot stop the counters: {0}")]
    Stop(CounterError),
    #[error("cannot read the counters: {0}")]
    Read(CounterError),
    #[error("the counted window never closed")]
    NeverClosed,
}

/// Where a cell's counting comes from: the machine ([`Perf`]) or fakes in tests.
pub trait CountingBackend: Send + Sync {
    /// Counters of the calling thread and everything it starts later (`inherit`), with
    /// the named events (`--events`) besides; a backend that cannot count them (the
    /// fakes) opens the plain counters.
    fn open_counters(
        &self,
        named: &[ResolvedEvent],
    ) -> Result<Box<dyn CounterSource>, CounterError>;
    /// Starts sampling the `/proc/stat` time of `cpus`, every `interval`, from a thread
    /// pinned to `pin_cpu` when given.
    fn start_os_sampler(
        &self,
        cpus: &CpuSet,
        interval: Duration,
        pin_cpu: Option<u32>,
    ) -> Result<Box<dyn OsSampler>, CounterError>;
    /// Whether kernel time by system call can be traced (real tracepoints only).
    fn can_trace(&self) -> bool {
        false
    }
    /// The clock of the `/proc/stat` series (where the steady state begins).
    fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(Monotonic)
    }
}

/// The real machine: perf_event counters, `/proc/stat`, tracefs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Perf;

impl CountingBackend for Perf {
    fn open_counters(
        &self,
        named: &[ResolvedEvent],
    ) -> Result<Box<dyn CounterSource>, CounterError> {
        let target = CounterTarget::Thread {
            tid: 0,
            inherit: true,
        };
        let options = PerfOptions {
            named: named.to_vec(),
            ..PerfOptions::all()
        };
        PerfCounters::open(target, &options).map(|c| Box::new(c) as Box<dyn CounterSource>)
    }

    fn start_os_sampler(
        &self,
        cpus: &CpuSet,
        interval: Duration,
        pin_cpu: Option<u32>,
    ) -> Result<Box<dyn OsSampler>, CounterError> {
        let options = SamplerOptions {
            interval,
            pin_cpu,
            ..SamplerOptions::default()
        };
        ProcStatSampler::start(cpus, options).map(|s| Box::new(s) as Box<dyn OsSampler>)
    }

    fn can_trace(&self) -> bool {
        true
    }
}

/// Counting for one cell, from before the benchmark is prepared until it is measured.
/// Create it on the thread that will prepare and measure the benchmark.
///
/// The counted window is made of stretches: [`resume`](Self::resume) before each
/// measured sample and [`pause`](Self::pause) after it, so a cell interleaved with
/// others counts its own samples only; the first `resume` zeroes the counters.
pub struct CellCounting {
    hardware_unavailable: Option<String>,
    sampler: Option<Box<dyn OsSampler>>,
    clock: Arc<dyn Clock>,
    sampler_t0_ns: u64,
    os_time: Option<OsTimeSeries>,
    os_time_unavailable: Option<String>,
    trace: Option<TraceControl>,
    syscalls: Option<SyscallProfile>,
    syscalls_window: Option<String>,
    syscalls_unavailable: Option<String>,
    irqs: Option<IrqProfile>,
    irqs_unavailable: Option<String>,
    kernel_time: Option<Box<KernelTimeProfile>>,
    kernel_time_unavailable: Option<String>,
    counters: Option<Box<dyn CounterSource>>,
    started: bool,
    running: bool,
    steady_from_ns: Option<u64>,
    values: Option<CounterValues>,
    work: Option<Work>,
    /// The first error while counting; `finish` returns it.
    error: Option<CountingError>,
    /// Named events the machine lacks (from the setup), kept with the counts.
    named_unavailable: Vec<NamedUnavailable>,
    /// The sampler runs only between [`working`](Self::working) and
    /// [`idle`](Self::idle).
    os_on_demand: bool,
}

impl CellCounting {
    /// Starts the `/proc/stat` sampler on `cpus` (the placement's CPUs; pinned to
    /// `sampler_cpu` when there is a spare CPU), opens the syscall tracepoints where
    /// tracing is available, then the counters on the calling thread with `inherit`.
    /// The window opens with the first [`resume`](Self::resume).
    pub fn begin_with(
        setup: &CountingSetup,
        backend: &dyn CountingBackend,
        cpus: &CpuSet,
        sampler_cpu: Option<u32>,
    ) -> CellCounting {
        let (sampler, os_time_unavailable) =
            split(backend.start_os_sampler(cpus, setup.os_interval, sampler_cpu));
        let clock = backend.clock();
        let sampler_t0_ns = clock.now_ns();
        let (trace, syscalls_unavailable) = match &setup.availability.syscall_tracing.reason {
            Some(r) => (None, Some(r.clone())),
            None if !backend.can_trace() => (None, Some("not traced here".to_string())),
            None => split(TraceControl::open(
                smtlab_placement::pin::gettid(),
                cpus.clone(),
            )),
        };
        let (counters, error) = match backend.open_counters(&setup.events) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(CountingError::Open(e))),
        };
        CellCounting {
            hardware_unavailable: setup.availability.hardware.reason.clone(),
            sampler,
            clock,
            sampler_t0_ns,
            os_time: None,
            os_time_unavailable,
            trace,
            syscalls: None,
            syscalls_window: None,
            irqs_unavailable: syscalls_unavailable.clone(),
            kernel_time_unavailable: syscalls_unavailable.clone(),
            syscalls_unavailable,
            irqs: None,
            kernel_time: None,
            counters,
            started: false,
            running: false,
            steady_from_ns: None,
            values: None,
            work: None,
            error,
            named_unavailable: setup.events_unavailable.clone(),
            os_on_demand: false,
        }
    }

    /// Other cells take turns on these CPUs: sample `/proc/stat` only while this cell
    /// works (between [`working`](Self::working) and [`idle`](Self::idle)), starting
    /// now, idle.
    pub fn sample_only_while_working(&mut self) {
        self.os_on_demand = true;
        self.os_switch(false);
    }

    /// This cell starts working (preparing, warming up, taking a sample): its CPUs'
    /// time counts again.
    pub fn working(&mut self) {
        if self.os_on_demand {
            self.os_switch(true);
        }
    }

    /// This cell waits while others take their turn: its CPUs' time does not count.
    pub fn idle(&mut self) {
        if self.os_on_demand {
            self.os_switch(false);
        }
    }

    fn os_switch(&mut self, on: bool) {
        let Some(s) = self.sampler.as_mut() else {
            return;
        };
        let r = if on { s.resume() } else { s.pause() };
        if let Err(e) = r {
            self.sampler = None;
            self.os_time_unavailable = Some(e.to_string());
        }
    }

    fn note_error(&mut self, e: CountingError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// Counts on: the first call zeroes and enables the counters (the window begins),
    /// later ones enable them again without zeroing.
    pub fn resume(&mut self) {
        if self.running || self.values.is_some() {
            return;
        }
        let first = !self.started;
        self.started = true;
        self.running = true;
        if first {
            self.steady_from_ns = Some(self.clock.now_ns().saturating_sub(self.sampler_t0_ns));
        }
        if let Some(c) = self.counters.as_mut() {
            let r = if first { c.start() } else { c.resume() };
            if let Err(e) = r {
                self.note_error(CountingError::Start(e));
            }
        }
    }

    /// Stops counting until the next [`resume`](Self::resume).
    pub fn pause(&mut self) {
        if !self.running {
            return;
        }
        self.running = false;
        if let Some(c) = self.counters.as_mut()
            && let Err(e) = c.stop()
        {
            self.note_error(CountingError::Stop(e));
        }
    }

    /// Whether the counters count right now.
    pub fn running(&self) -> bool {
        self.running
    }

    /// Disables and reads the counters and ends `/proc/stat` sampling: the window ends.
    /// `work` is what was done inside it, for per-unit costs.
    pub fn stop(&mut self, work: Option<Work>) {
        if !self.started || self.values.is_some() {
            return;
        }
        self.pause();
        if let Some(c) = self.counters.as_mut() {
            match c.read() {
                Ok(v) => self.values = Some(v),
                Err(e) => self.note_error(CountingError::Read(e)),
            }
        }
        match self.sampler.take().map(OsSampler::finish) {
            Some(Ok(mut s)) => {
                // On demand, the first interval is the stretch before this cell began
                // working (other cells starting): not this cell's time.
                if self.os_on_demand && !s.intervals.is_empty() {
                    s.intervals.remove(0);
                }
                self.os_time = Some(s);
            }
            Some(Err(e)) => self.os_time_unavailable = Some(e.to_string()),
            None => {}
        }
        self.work = work;
    }

    /// Whether syscall tracing is open and waiting for [`trace`](Self::trace).
    pub fn can_trace(&self) -> bool {
        self.trace.is_some()
    }

    /// Runs `work` (one more sample or run, outside the counted window) with the
    /// syscall tracepoints enabled and keeps the profile, described by `window` (`one
    /// extra sample of 8523 iterations after the measured ones`). Without tracing it
    /// does nothing; a failure of `work` or of the tracer becomes the reason there is
    /// no profile.
    pub fn trace<E: std::fmt::Display>(
        &mut self,
        window: &str,
        work: impl FnOnce() -> Result<(), E>,
    ) {
        let Some(mut t) = self.trace.take() else {
            return;
        };
        if let Err(r) = t.start() {
            self.irqs_unavailable = Some(r.clone());
            self.kernel_time_unavailable = Some(r.clone());
            self.syscalls_unavailable = Some(r);
            return;
        }
        // The extra sample first, then the tracer stopped.
        let why = match (work(), t.stop()) {
            (
                Ok(()),
                Ok(Traced {
                    syscalls: Some(p),
                    irqs,
                    kernel_time,
                }),
            ) => {
                self.syscalls = Some(p);
                self.syscalls_window = Some(window.to_string());
                (self.irqs, self.irqs_unavailable) = split(irqs);
                (self.kernel_time, self.kernel_time_unavailable) = split(kernel_time.map(Box::new));
                return;
            }
            (Ok(()), Ok(Traced { syscalls: None, .. })) => {
                self.syscalls_unavailable = Some("the syscall trace was not started".into());
                return;
            }
            (Err(e), _) => format!("the traced extra sample failed: {e}"),
            (_, Err(r)) => r,
        };
        self.kernel_time_unavailable = Some(why.clone());
        self.syscalls_unavailable = Some(why);
    }

    /// Ends whatever still runs and returns everything counted in the window, or why
    /// there is nothing (the window never opened, or counting failed).
    pub fn finish(mut self, window: &str) -> Result<CellCounters, CountingError> {
        // A tracer never used stops (its profile's reason is that none was traced, below);
        // a window that never closed: the error below says so.
        self.trace = None;
        self.sampler = None;
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let Some(mut values) = self.values.take() else {
            return Err(CountingError::NeverClosed);
        };
        for u in std::mem::take(&mut self.named_unavailable) {
            if !values.named_unavailable.iter().any(|x| x.name == u.name) {
                values.named_unavailable.push(u);
            }
        }
        let mut c = CellCounters::new(window, values, self.work.take());
        c.hardware_unavailable = self.hardware_unavailable.filter(|_| !c.has_hardware());
        c.os_time = self.os_time.take();
        c.steady_from_ns = self.steady_from_ns;
        c.os_time_unavailable = self.os_time_unavailable.take();
        c.syscalls = self.syscalls.take();
        c.syscalls_window = self.syscalls_window.take();
        c.irqs = self.irqs.take();
        c.kernel_time = self.kernel_time.take();
        // Why a traced profile is missing: its own reason, else that none was traced.
        let why = |got: bool, reason: Option<String>| {
            (!got).then(|| reason.unwrap_or_else(|| "no traced sample was taken".into()))
        };
        c.kernel_time_unavailable = why(c.kernel_time.is_some(), self.kernel_time_unavailable);
        c.irqs_unavailable = why(c.irqs.is_some(), self.irqs_unavailable);
        c.syscalls_unavailable = why(c.syscalls.is_some(), self.syscalls_unavailable);
        Ok(c)
    }
}

/// Counting without the machine, for tests of the runner and its callers: every
/// counter group it opens is a [`smtlab_counters::FakeSource`] reading `values`, kept
/// (with the thread that opened it) so a test can check when it counted; the
/// `/proc/stat` series is `os_time` (or the sampler fails with a reason); the clock is
/// a [`FakeClock`].
pub struct FakeBackend {
    pub values: CounterValues,
    pub os_time: Option<OsTimeSeries>,
    pub clock: Arc<FakeClock>,
    /// Every counter group opened so far, with the thread that opened it.
    pub opened: Mutex<Vec<(ThreadId, SharedFake)>>,
    /// What the samplers were asked, in order (`pause`, `resume`, `finish`).
    pub sampler_log: Arc<Mutex<Vec<&'static str>>>,
}

/// A [`smtlab_counters::FakeSource`] the backend and a test both hold.
pub type SharedFake = Arc<Mutex<smtlab_counters::FakeSource>>;

impl FakeBackend {
    pub fn new(
        values: CounterValues,
        os_time: Option<OsTimeSeries>,
        clock: Arc<FakeClock>,
    ) -> FakeBackend {
        FakeBackend {
            values,
            os_time,
            clock,
            opened: Mutex::new(Vec::new()),
            sampler_log: Arc::default(),
        }
    }

    /// The counter group opened on the calling thread, if any.
    pub fn source_of_this_thread(&self) -> Option<SharedFake> {
        let me = std::thread::current().id();
        let opened = self.opened.lock().ok()?;
        opened
            .iter()
            .find(|(t, _)| *t == me)
            .map(|(_, s)| Arc::clone(s))
    }
}

struct SharedSource(SharedFake);

impl CounterSource for SharedSource {
    fn start(&mut self) -> Result<(), CounterError> {
        self.0.lock().expect("fake source").start()
    }
    fn stop(&mut self) -> Result<(), CounterError> {
        self.0.lock().expect("fake source").stop()
    }
    fn resume(&mut self) -> Result<(), CounterError> {
        self.0.lock().expect("fake source").resume()
    }
    fn read(&mut self) -> Result<CounterValues, CounterError> {
        self.0.lock().expect("fake source").read()
    }
}

/// The fake sampler: its series, and a log of `pause`/`resume`/`finish` that the
/// backend shares with the test.
struct FixedSeries(OsTimeSeries, Arc<Mutex<Vec<&'static str>>>);

impl FixedSeries {
    fn log(&self, what: &'static str) {
        if let Ok(mut l) = self.1.lock() {
            l.push(what);
        }
    }
}

impl OsSampler for FixedSeries {
    fn finish(self: Box<Self>) -> Result<OsTimeSeries, CounterError> {
        self.log("finish");
        Ok(self.0)
    }
    fn pause(&mut self) -> Result<(), CounterError> {
        self.log("pause");
        Ok(())
    }
    fn resume(&mut self) -> Result<(), CounterError> {
        self.log("resume");
        Ok(())
    }
}

impl CountingBackend for FakeBackend {
    fn open_counters(
        &self,
        _named: &[ResolvedEvent],
    ) -> Result<Box<dyn CounterSource>, CounterError> {
        let source: SharedFake = Arc::new(Mutex::new(smtlab_counters::FakeSource::new(
            self.values.clone(),
        )));
        self.opened
            .lock()
            .map_err(|_| CounterError::State("fake backend poisoned".into()))?
            .push((std::thread::current().id(), Arc::clone(&source)));
        Ok(Box::new(SharedSource(source)))
    }

    fn start_os_sampler(
        &self,
        cpus: &CpuSet,
        _interval: Duration,
        _pin_cpu: Option<u32>,
    ) -> Result<Box<dyn OsSampler>, CounterError> {
        match &self.os_time {
            Some(s) => {
                let mut s = s.clone();
                s.cpus = cpus.clone();
                Ok(Box::new(FixedSeries(s, Arc::clone(&self.sampler_log))))
            }
            None => Err(CounterError::Unavailable(
                "no /proc/stat in this test".into(),
            )),
        }
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }
}
