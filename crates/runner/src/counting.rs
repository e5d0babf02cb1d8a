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
//! The counters are enabled when the warm-up ends and disabled when the cell finishes
//! ([`CellCounting`] is a runner [`Observer`]), so they cover the measured samples only,
//! and the work those samples did gives per-unit costs (instructions per operation or
//! byte, CPU ns per operation). Calibration and warm-up run with the counters disabled;
//! tasks created meanwhile inherit them disabled and are enabled with them.
//!
//! Helper threads must not be counted as workers: the `/proc/stat` sampler and the
//! syscall tracer's control thread are started *before* the counters are opened, so
//! they do not inherit them, and the tracer's buffer drainer is a child of its control
//! thread, not of the measuring thread.
//!
//! `/proc/stat` is sampled from before the benchmark is prepared until the window
//! closes, so the series shows start-up (prepare, calibration, warm-up) and steady state
//! (the measured samples, from [`CellCounters::steady_from_ns`]).
//!
//! Kernel time by system call is **not** traced during the measured samples: recording
//! every entry and exit costs about half a microsecond per call, which made a
//! `null-syscall` sample seven times slower on the development VM. Instead the caller
//! takes one extra sample after the window with tracing on
//! ([`CellCounting::trace`]); the profile says so in
//! [`CellCounters::syscalls_window`]. The tracepoints are opened (not enabled) before
//! the benchmark is prepared, so the workers inherit them.
//!
//! Nothing here fails a cell: what cannot be measured becomes a one-line reason in the
//! result, and an error while counting is returned by [`CellCounting::finish`] for the
//! caller to report.

use std::ops::ControlFlow;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smtlab_counters::{
    CounterError, CounterSource, PerfCounters, PerfOptions, ProcStatSampler, SamplerOptions,
    SyscallTracer, TraceOptions,
};
use smtlab_model::CpuSet;
use smtlab_model::counters::cell::work_unit_for;
use smtlab_model::counters::derived::Work;
use smtlab_model::counters::os_time::OsTimeSeries;
use smtlab_model::counters::syscalls::SyscallProfile;
use smtlab_model::counters::{CellCounters, CounterAvailability, CounterTarget, CounterValues};

use crate::observer::{Event, Observer};

/// What the window of a benchmark cell covers, as stored in [`CellCounters::window`].
pub const SAMPLES_WINDOW: &str = "measured samples (calibration and warm-up excluded)";

/// What this machine allows, probed once per command ([`smtlab_counters::availability`]).
#[derive(Debug, Clone)]
pub struct CountingSetup {
    pub availability: CounterAvailability,
    /// `/proc/stat` sampling interval. USER_HZ is 100 on almost every kernel, so 100 ms
    /// gives about 10 ticks per CPU per interval.
    pub os_interval: Duration,
}

impl CountingSetup {
    /// Probes the machine (a few `perf_event_open` calls and a look at tracefs).
    pub fn probe() -> CountingSetup {
        CountingSetup {
            availability: smtlab_counters::availability(),
            os_interval: Duration::from_millis(100),
        }
    }

    /// One line per class of measurement that is missing here (no PMU, no tracefs, ...),
    /// for the caller to print once.
    pub fn missing_lines(&self) -> Vec<String> {
        let a = &self.availability;
        let mut out = Vec::new();
        if let Some(r) = &a.software.reason {
            out.push(r.clone());
        }
        if let Some(r) = &a.hardware.reason {
            out.push(r.clone());
        }
        if let Some(r) = &a.syscall_tracing.reason {
            out.push(format!("kernel time by system call not measured: {r}"));
        }
        out
    }
}

enum TraceCmd {
    Start,
    Stop,
}

/// The syscall tracer lives on its own thread, started before any counter is opened, so
/// neither it nor the buffer drainer it spawns is inherited by the counters or traced.
struct TraceControl {
    tx: mpsc::Sender<TraceCmd>,
    ack: mpsc::Receiver<Result<(), String>>,
    thread: Option<JoinHandle<Result<Option<SyscallProfile>, String>>>,
}

impl TraceControl {
    /// Opens the tracer on `tid` (with inherit) from a new thread; `Err` is the reason
    /// it cannot trace.
    fn open(tid: i32) -> Result<TraceControl, String> {
        let (tx, rx) = mpsc::channel::<TraceCmd>();
        let (ack_tx, ack) = mpsc::channel::<Result<(), String>>();
        let thread = std::thread::Builder::new()
            .name("smtlab-trace-ctl".into())
            .spawn(move || -> Result<Option<SyscallProfile>, String> {
                let target = CounterTarget::Thread { tid, inherit: true };
                let tracer = match SyscallTracer::open(target, TraceOptions::default()) {
                    Ok(t) => t,
                    Err(e) => {
                        let _ = ack_tx.send(Err(reason(&e)));
                        return Ok(None);
                    }
                };
                let _ = ack_tx.send(Ok(()));
                if !matches!(rx.recv(), Ok(TraceCmd::Start)) {
                    return Ok(None);
                }
                let running = tracer.start().map_err(|e| reason(&e));
                let running = match running {
                    Ok(r) => {
                        let _ = ack_tx.send(Ok(()));
                        r
                    }
                    Err(e) => {
                        let _ = ack_tx.send(Err(e.clone()));
                        return Err(e);
                    }
                };
                let _ = rx.recv();
                running.stop().map(Some).map_err(|e| reason(&e))
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
        self.tx
            .send(TraceCmd::Start)
            .map_err(|_| "the syscall tracer thread ended early".to_string())?;
        self.ack
            .recv()
            .map_err(|_| "the syscall tracer thread ended early".to_string())?
    }

    fn stop(&mut self) -> Result<Option<SyscallProfile>, String> {
        let _ = self.tx.send(TraceCmd::Stop);
        self.join()
    }

    fn join(&mut self) -> Result<Option<SyscallProfile>, String> {
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| "the syscall tracer thread panicked".to_string())?,
            None => Ok(None),
        }
    }
}

impl Drop for TraceControl {
    fn drop(&mut self) {
        let _ = self.tx.send(TraceCmd::Stop);
        let _ = self.join();
    }
}

fn reason(e: &CounterError) -> String {
    e.to_string()
}

/// The thread id of the calling thread.
fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Counting for one cell, from before the benchmark is prepared until it is measured.
/// Create it on the thread that will prepare and measure the benchmark.
pub struct CellCounting {
    hardware_unavailable: Option<String>,
    sampler: Option<ProcStatSampler>,
    sampler_t0: Instant,
    os_time: Option<OsTimeSeries>,
    os_time_unavailable: Option<String>,
    trace: Option<TraceControl>,
    syscalls: Option<SyscallProfile>,
    syscalls_window: Option<String>,
    syscalls_unavailable: Option<String>,
    counters: Option<PerfCounters>,
    started: bool,
    steady_from_ns: Option<u64>,
    values: Option<CounterValues>,
    work_unit: Option<String>,
    work: Option<Work>,
    /// The first error while counting; `finish` returns it.
    error: Option<String>,
}

impl CellCounting {
    /// Starts the `/proc/stat` sampler on `cpus` (the placement's CPUs; pinned to
    /// `sampler_cpu` when there is a spare CPU), opens the syscall tracepoints where
    /// tracing is available, then the counters on the calling thread with `inherit`.
    /// Counting starts with [`start`](Self::start) (or the runner's warm-up-done event).
    pub fn begin(setup: &CountingSetup, cpus: &CpuSet, sampler_cpu: Option<u32>) -> CellCounting {
        let sampler_options = SamplerOptions {
            interval: setup.os_interval,
            pin_cpu: sampler_cpu,
            ..SamplerOptions::default()
        };
        let (sampler, os_time_unavailable) = match ProcStatSampler::start(cpus, sampler_options) {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let sampler_t0 = Instant::now();
        let (trace, syscalls_unavailable) = match &setup.availability.syscall_tracing.reason {
            Some(r) => (None, Some(r.clone())),
            None => match TraceControl::open(gettid()) {
                Ok(t) => (Some(t), None),
                Err(r) => (None, Some(r)),
            },
        };
        let target = CounterTarget::Thread {
            tid: 0,
            inherit: true,
        };
        let (counters, error) = match PerfCounters::open(target, &PerfOptions::all()) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(format!("cannot open the counters: {e}"))),
        };
        CellCounting {
            hardware_unavailable: setup.availability.hardware.reason.clone(),
            sampler,
            sampler_t0,
            os_time: None,
            os_time_unavailable,
            trace,
            syscalls: None,
            syscalls_window: None,
            syscalls_unavailable,
            counters,
            started: false,
            steady_from_ns: None,
            values: None,
            work_unit: None,
            work: None,
            error,
        }
    }

    fn note_error(&mut self, e: String) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// Zeroes and enables the counters: the window begins.
    pub fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        self.steady_from_ns = Some(self.sampler_t0.elapsed().as_nanos() as u64);
        if let Some(c) = self.counters.as_mut()
            && let Err(e) = c.start()
        {
            let e = format!("cannot start the counters: {e}");
            self.note_error(e);
        }
    }

    /// Disables and reads the counters and ends `/proc/stat` sampling: the window ends.
    /// `work` is what was done inside it, for per-unit costs.
    pub fn stop(&mut self, work: Option<Work>) {
        if !self.started || self.values.is_some() {
            return;
        }
        if let Some(c) = self.counters.as_mut() {
            match c.stop().and_then(|()| c.read()) {
                Ok(v) => self.values = Some(v),
                Err(e) => {
                    let e = format!("cannot read the counters: {e}");
                    self.note_error(e);
                }
            }
        }
        match self.sampler.take().map(ProcStatSampler::stop) {
            Some(Ok(s)) => self.os_time = Some(s),
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
    pub fn trace(&mut self, window: &str, work: impl FnOnce() -> Result<(), String>) {
        let Some(mut t) = self.trace.take() else {
            return;
        };
        if let Err(r) = t.start() {
            self.syscalls_unavailable = Some(r);
            return;
        }
        let ran = work();
        let profile = t.stop();
        match (ran, profile) {
            (Ok(()), Ok(Some(p))) => {
                self.syscalls = Some(p);
                self.syscalls_window = Some(window.to_string());
            }
            (Ok(()), Ok(None)) => {
                self.syscalls_unavailable = Some("the syscall trace was not started".into());
            }
            (Err(e), _) => {
                self.syscalls_unavailable = Some(format!("the traced extra sample failed: {e}"));
            }
            (_, Err(r)) => self.syscalls_unavailable = Some(r),
        }
    }

    /// Ends whatever still runs and returns everything counted in the window, or why
    /// there is nothing (the window never opened, or counting failed).
    pub fn finish(mut self, window: &str) -> Result<CellCounters, String> {
        if let Some(mut t) = self.trace.take() {
            let _ = t.stop();
            if self.syscalls_unavailable.is_none() {
                self.syscalls_unavailable = Some("no traced sample was taken".into());
            }
        }
        if let Some(s) = self.sampler.take() {
            // The window never closed; the error below says so.
            drop(s);
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let Some(values) = self.values.take() else {
            return Err("the counted window never closed".into());
        };
        let mut c = CellCounters::new(window, values, self.work.take());
        c.hardware_unavailable = if c.has_hardware() {
            None
        } else {
            self.hardware_unavailable.take()
        };
        c.os_time = self.os_time.take();
        c.steady_from_ns = self.steady_from_ns;
        c.os_time_unavailable = self.os_time_unavailable.take();
        c.syscalls = self.syscalls.take();
        c.syscalls_window = self.syscalls_window.take();
        c.syscalls_unavailable = if c.syscalls.is_some() {
            None
        } else {
            self.syscalls_unavailable
                .take()
                .or_else(|| Some("no traced sample was taken".into()))
        };
        Ok(c)
    }
}

impl Observer for CellCounting {
    /// Opens the window when the warm-up is done and closes it when the cell finishes,
    /// with the measured samples' work in the unit of the benchmark's work (bytes for
    /// bandwidths, operations otherwise). Never stops the cell.
    fn event(&mut self, event: &Event<'_>) -> ControlFlow<()> {
        match event {
            Event::CellStarted { info, .. } => {
                self.work_unit = Some(work_unit_for(&info.unit).to_string());
            }
            Event::WarmupDone { .. } => self.start(),
            Event::CellFinished { result } => {
                let amount: f64 = result.samples.iter().map(|s| s.work).sum();
                let work = self.work_unit.clone().map(|unit| Work { amount, unit });
                self.stop(work);
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}
