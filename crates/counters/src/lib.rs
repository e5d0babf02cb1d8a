//! # smtlab-counters
//!
//! What the CPU and the kernel did while a workload ran, from these Linux sources:
//!
//! * **perf_event counters** ([`PerfCounters`], behind the [`CounterSource`] trait):
//!   hardware events (cycles, instructions, branches, cache and TLB read misses,
//!   stall cycles) where the machine has a PMU, software events (task-clock, context
//!   switches, migrations, page faults) everywhere. Counted on a thread (optionally
//!   with every thread and process it creates afterwards: `inherit`) or on a CPU set.
//!   Each event that allows it is counted twice, in user and in kernel mode, so both
//!   the split and the sum are known. Reads keep the enabled and running times, so
//!   multiplexing is scaled (`raw * enabled / running`) and shown, never hidden.
//!   Results are [`CounterValues`](smtlab_model::counters::CounterValues) from the
//!   model crate; CPI, MPKI, miss ratios, cost per unit of work and the CPI stack are
//!   pure functions there (`smtlab_model::counters::derived`, `cpi_stack`), so the report can
//!   compute them from stored results. [`FakeSource`] scripts counts for tests.
//! * **named events** (`--events`, [`resolve`]): perf-style names resolved against the
//!   kernel's PMU descriptions ([`PmuTree`], [`pmu`]: `type`, `format/` bit ranges,
//!   aliases with `.scale`/`.unit`, uncore `cpumask`) and a built-in table of
//!   model-specific events by CPU family and model ([`model_events`]); opened by
//!   [`PerfCounters`] beside the generic events (uncore ones CPU-wide on their
//!   cpumask), read into `CounterValues::named`. An event the machine lacks is a
//!   `NamedUnavailable` with its one-line reason.
//! * **/proc/stat** ([`ProcStatSampler`]): user/system/irq/softirq/idle/iowait/steal
//!   per CPU over the run, sampled by a background thread at a fixed interval (paused
//!   and resumed while other cells take their turn; bounded in length), split into
//!   start-up and steady state by the model's `OsTimeSeries::phases`.
//! * **syscall tracing** ([`SyscallTracer`]): the `raw_syscalls` tracepoints and the
//!   traced tasks' context switches sampled into per-CPU ring buffers, paired per
//!   thread into count, CPU time and wall time per system call and per group (file,
//!   network, process, memory, other).
//! * **interrupt tracing** ([`IrqTracer`]): the `irq` and `irq_vectors` tracepoints
//!   CPU-wide, paired per CPU into count and exclusive CPU time per vector.
//! * **kernel time by cause** ([`KernelTimeTracer`]): page faults (their entry
//!   tracepoint to the kernel's minor/major fault event) and contended kernel locks
//!   (`lock:contention_begin`/`end`) per task, CPU and wall time, with the traced
//!   tasks' task clock for their share.
//!
//! Nothing here prints or guesses. What cannot be measured comes back as a one-line
//! reason: per event in `CounterValues::unavailable` ("not supported on this machine
//! (ENOENT)", "permission: perf_event_paranoid is 2; ..."), per class from
//! [`availability()`] (e.g. "hardware counters not supported: this KVM guest exposes
//! no PMU (cycles: ENOENT); software events only"), and for tracing as
//! [`CounterError::Unavailable`], which callers print after "skipped: ".
//!
//! ## Why perf-event-open-sys and not perf-event2
//!
//! We use the raw bindings of `perf-event-open-sys` 7 under our own small wrapper
//! (`sys.rs`, the only module with perf unsafe code besides the ring buffer). The
//! higher-level `perf-event2` would save that wrapper, but: its builder defaults to
//! `exclude_kernel = 1`, which silently zeroes tracepoints and context switches, and
//! we need every exclude bit set on purpose for the user/kernel split; it looks for
//! tracepoints only under /sys/kernel/debug/tracing, while modern systems mount
//! tracefs at /sys/kernel/tracing; it does not build for ppc64le (POWER is an SMT
//! platform we want); and we need the sampling ring buffer for raw tracepoint
//! records, `PERF_EVENT_IOC_SET_OUTPUT`, and `use_clockid`, which means raw attribute
//! access anyway. The wrapper is about 150 lines.
//!
//! ## Things that surprise
//!
//! * task-clock ignores the exclude bits (its "user" and "kernel" counts would each
//!   be the whole time) and context switches and migrations only happen in the
//!   kernel, so these three are counted once with nothing excluded
//!   (`CounterEvent::splits_by_privilege`). CPU-wide task-clock counts idle time too.
//! * With `inherit`, threads the measured thread creates after opening the counters
//!   are counted, including helper threads such as this crate's samplers: start the
//!   sampler and tracer before opening inherited counters, or from another thread.
//! * Syscall times come as CPU time (entry to exit less the time switched out, from
//!   the traced tasks' context-switch records) and as wall time (a blocked `read`
//!   counts its wait); both include the tracing overhead, about half a microsecond
//!   per call on a small VM: compare calls and groups with them, not the cost of an
//!   untraced call.

pub mod availability;
pub mod error;
pub mod event_list;
mod events;
pub mod irqs;
mod kernel_causes;
pub mod kernel_time;
pub mod model_events;
pub mod perf;
pub mod perf_stat;
pub mod pmu;
pub mod procstat;
mod ring;
pub mod source;
mod sys;
pub mod syscall_names;
pub mod syscalls;
mod tracefs;

pub use availability::{availability, hypervisor_vendor};
pub use error::{CounterError, perf_event_paranoid};
pub use event_list::{EventListError, Resolved, resolve};
pub use irqs::{IrqTracer, RunningIrqTrace};
pub use kernel_time::{KernelTimeTracer, RunningKernelTime};
pub use perf::{PerfCounters, PerfOptions, ResolvedEvent};
pub use pmu::{CpuId, PmuTree};
pub use procstat::{ProcStatError, ProcStatSampler, SamplerOptions};
pub use source::{CounterSource, FakeSource, fake_values, measure};
pub use syscalls::{RunningTrace, SyscallTracer, TraceOptions};
