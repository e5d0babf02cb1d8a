//! `pthread-create` [paper 002 s6.1, Figures 7-9]: the cost of starting a thread.
//!
//! Two intervals per creation, both from the timestamp taken just before
//! `pthread_create`:
//!
//! * **A** (`create_return_ns`): until the call returns in the parent;
//! * **B** (`thread_start_ns`): until the new thread runs the first line of its function.
//!
//! B < A means the child ran before the parent got back from the call (the points under
//! y = x in the paper's scatter plot); the `started_before_return` metric is the
//! fraction of such creations.
//!
//! Method. `libc::pthread_create` is called directly: `std::thread::spawn` allocates,
//! names the thread and sets up its result packet, which is not the primitive being
//! measured. The creating thread is pinned to placement CPU 0; the child's CPU is set
//! through the creation attributes (`pthread_attr_setaffinity_np`) to placement CPU 1
//! when the placement has two or more CPUs, else to CPU 0 as well, so the kernel never
//! picks the child's first CPU freely. (glibc applies attribute affinity before the
//! child's function runs, and that cost is in A and B as it is for any program using it.)
//! Children otherwise have default attributes (8 MiB stacks that glibc caches).
//!
//! The sample's value is the mean of B (time to a running thread); the mean of A is the
//! `create_return_ns_mean` metric. After each creation, outside both intervals, the
//! parent waits for the child to finish: a joinable child is joined, a detached child
//! raises a flag as its last action, and at the end of the sample the parent waits until
//! the last detached children have left `/proc/self/task`, so no thread outlives a sample.
//! Creations never overlap.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use smtlab_model::BenchInfo;
use smtlab_model::metrics::threads::{CREATE_RETURN_NS, THREAD_START_NS};

use super::{bench_info, clock_cost_ns, event_sample, now_ns, this_cpu};
use crate::{BenchContext, BenchError, Benchmark, Instance, ParamError, sampled};
use smtlab_placement::pin::gettid;

const NAME: &str = "pthread-create";

/// The `pthread-create` benchmark.
pub struct PthreadCreate;

smtlab_model::named_enum! {
    /// `mode=`: whether created threads are joinable or detached.
    pub enum Mode {
        Joinable = "joinable",
        Detached = "detached",
    }
}

impl Benchmark for PthreadCreate {
    fn info(&self) -> BenchInfo {
        bench_info(
            NAME,
            "pthread_create latency: mean ns from the call until the new thread runs (B); \
             the call's own return time (A) is a metric and both are kept per creation \
             for the A-vs-B scatter. Parent on placement CPU 0, child on CPU 1 (CPU 0 \
             when the placement has one CPU).",
            "paper 002 s6.1",
            vec![crate::params::declare(
                "mode",
                "joinable",
                None,
                "joinable (joined after each creation) or detached",
            )],
        )
    }

    /// `full`: detached threads beside joinable ones on every placement (paper 002 Fig 9).
    fn sweep(&self, suite: crate::Suite, _topo: &smtlab_model::Topology) -> Vec<crate::SweepCell> {
        if suite != crate::Suite::Full {
            return Vec::new();
        }
        vec![crate::SweepCell::everywhere(&[("mode", "detached".into())])]
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let text = ctx.params.get_str("mode")?;
        let mode = Mode::parse(text)
            .ok_or_else(|| ParamError::value("mode", text, "joinable or detached"))?;
        let parent_cpu = ctx.placement.cpu_for_thread(0);
        let child_cpu = if ctx.placement.width() >= 2 {
            ctx.placement.cpu_for_thread(1)
        } else {
            parent_cpu
        };
        let clock_ns = clock_cost_ns();
        Ok(sampled(move |iterations| {
            let n = iterations.max(1);
            let run = run_creations(mode, parent_cpu, child_cpu, n)?;
            let before = run
                .start_ns
                .iter()
                .zip(&run.return_ns)
                .filter(|(b, a)| b < a)
                .count();
            let mut s = event_sample(
                n,
                clock_ns,
                vec![run.parent_cpu, run.child_cpu],
                (CREATE_RETURN_NS, run.return_ns),
                (THREAD_START_NS, run.start_ns),
            );
            s.metrics
                .insert("started_before_return".into(), before as f64 / n as f64);
            Ok(s)
        }))
    }
}

/// What one child reports back. Shared through an `Arc` whose reference the child
/// drops last, so a child that is late for any reason never writes to freed memory.
#[derive(Default)]
struct Slot {
    start_ns: AtomicU64,
    cpu: AtomicU32,
    tid: AtomicI32,
    /// Set by the child as its last access to the slot.
    done: AtomicBool,
    /// CPU the child must pin itself to where the C library cannot set affinity through
    /// the attributes (not glibc); -1 for none.
    self_pin: AtomicI32,
}

type SharedSlot = CachePadded<Slot>;

/// The child's function: timestamp first, then report.
extern "C" fn child_main(arg: *mut c_void) -> *mut c_void {
    let t = now_ns();
    // SAFETY: `arg` came from `Arc::into_raw` on an `Arc<SharedSlot>` in
    // `run_creations`, which handed this reference to the child and never uses it again.
    let slot = unsafe { Arc::from_raw(arg as *const SharedSlot) };
    let pin_to = slot.self_pin.load(Ordering::Relaxed);
    if pin_to >= 0 {
        // A failed pin shows as a wrong CPU, which the parent checks.
        let _ = smtlab_placement::pin::pin_current_thread_to(pin_to as u32);
    }
    slot.start_ns.store(t, Ordering::Relaxed);
    slot.cpu.store(this_cpu(), Ordering::Relaxed);
    slot.tid.store(gettid(), Ordering::Relaxed);
    slot.done.store(true, Ordering::Release);
    drop(slot);
    std::ptr::null_mut()
}

/// Per-event results of one sample.
pub(crate) struct CreateRun {
    pub return_ns: Vec<f64>,
    pub start_ns: Vec<f64>,
    pub parent_cpu: u32,
    pub child_cpu: u32,
    /// Kernel thread ids of the children, for leak checks.
    pub tids: Vec<libc::pid_t>,
}

/// Owner of a `pthread_attr_t`.
struct Attr(libc::pthread_attr_t);

impl Attr {
    /// Attributes for the children; the bool says whether the affinity is in them (else
    /// the child must pin itself).
    fn new(mode: Mode, cpu: Option<u32>) -> Result<(Self, bool), BenchError> {
        let io =
            |what: &str, rc: i32| BenchError::io(NAME, what, std::io::Error::from_raw_os_error(rc));
        // SAFETY: pthread_attr_init initialises the zeroed storage before any other use.
        let mut attr = Attr(unsafe { std::mem::zeroed() });
        // SAFETY: `attr.0` is valid writable storage for a pthread_attr_t.
        let rc = unsafe { libc::pthread_attr_init(&mut attr.0) };
        if rc != 0 {
            // Not initialised, so it must not be destroyed.
            std::mem::forget(attr);
            return Err(io("pthread_attr_init", rc));
        }
        let state = match mode {
            Mode::Joinable => libc::PTHREAD_CREATE_JOINABLE,
            Mode::Detached => libc::PTHREAD_CREATE_DETACHED,
        };
        // SAFETY: `attr.0` is initialised.
        let rc = unsafe { libc::pthread_attr_setdetachstate(&mut attr.0, state) };
        if rc != 0 {
            return Err(io("pthread_attr_setdetachstate", rc));
        }
        let in_attr = match cpu {
            Some(cpu) => set_attr_affinity(&mut attr.0, cpu)?,
            None => true,
        };
        Ok((attr, in_attr))
    }
}

impl Drop for Attr {
    fn drop(&mut self) {
        // SAFETY: only initialised attributes are wrapped past `new`'s early return.
        unsafe { libc::pthread_attr_destroy(&mut self.0) };
    }
}

/// Puts CPU affinity into the attributes (glibc); Ok(true) when done.
#[cfg(target_env = "gnu")]
fn set_attr_affinity(attr: &mut libc::pthread_attr_t, cpu: u32) -> Result<bool, BenchError> {
    let mask = smtlab_placement::pin::CpuMask::of_cpu(cpu)
        .map_err(|e| BenchError::unsupported(NAME, e.to_string()))?;
    // SAFETY: `attr` is initialised and the mask is valid for the size passed; glibc
    // copies it into the attributes. The kernel's mask layout is an array of
    // `unsigned long`, the same bits `cpu_set_t` holds, of whatever length is needed.
    let rc = unsafe { libc::pthread_attr_setaffinity_np(attr, mask.bytes(), mask.as_ptr().cast()) };
    if rc != 0 {
        return Err(BenchError::io(
            NAME,
            format!("pthread_attr_setaffinity_np to CPU {cpu}"),
            std::io::Error::from_raw_os_error(rc),
        ));
    }
    Ok(true)
}

/// Other C libraries (musl) have no attribute affinity: the child pins itself right
/// after its start timestamp.
#[cfg(not(target_env = "gnu"))]
fn set_attr_affinity(_attr: &mut libc::pthread_attr_t, _cpu: u32) -> Result<bool, BenchError> {
    Ok(false)
}

/// Creates `n` threads one after another from a creator thread pinned to `parent_cpu`.
pub(crate) fn run_creations(
    mode: Mode,
    parent_cpu: Option<u32>,
    child_cpu: Option<u32>,
    n: u64,
) -> Result<CreateRun, BenchError> {
    std::thread::scope(|s| {
        let h = std::thread::Builder::new()
            .name("smtlab-creator".into())
            .spawn_scoped(s, || creator(mode, parent_cpu, child_cpu, n))
            .map_err(|e| super::spawn_error(NAME, "creator", e))?;
        h.join()
            .unwrap_or_else(|_| Err(BenchError::check(NAME, "the creator thread panicked")))
    })
}

fn creator(
    mode: Mode,
    parent_cpu: Option<u32>,
    child_cpu: Option<u32>,
    n: u64,
) -> Result<CreateRun, BenchError> {
    super::pin(parent_cpu)?;
    let (attr, affinity_in_attr) = Attr::new(mode, child_cpu)?;
    let self_pin = match child_cpu {
        Some(c) if !affinity_in_attr => c as i32,
        _ => -1,
    };
    let slot: Arc<SharedSlot> = Arc::new(CachePadded::new(Slot::default()));
    let never = AtomicBool::new(false);
    let cap = usize::try_from(n).unwrap_or(usize::MAX).min(1 << 24);
    let mut run = CreateRun {
        return_ns: Vec::with_capacity(cap),
        start_ns: Vec::with_capacity(cap),
        parent_cpu: u32::MAX,
        child_cpu: u32::MAX,
        tids: Vec::with_capacity(cap),
    };
    for _ in 0..n {
        slot.done.store(false, Ordering::Relaxed);
        slot.self_pin.store(self_pin, Ordering::Relaxed);
        let arg = Arc::into_raw(Arc::clone(&slot)) as *mut c_void;
        let mut thread: libc::pthread_t = 0;
        let t0 = now_ns();
        // SAFETY: `attr` is initialised; `child_main` has the required C signature and
        // takes ownership of `arg` (one Arc reference) when the call succeeds.
        let rc = unsafe { libc::pthread_create(&mut thread, &attr.0, child_main, arg) };
        let t1 = now_ns();
        if rc != 0 {
            // SAFETY: no thread was created, so the reference made for it is still ours.
            drop(unsafe { Arc::from_raw(arg as *const SharedSlot) });
            return Err(BenchError::io(
                NAME,
                format!("pthread_create (creation {} of {n})", run.tids.len() + 1),
                std::io::Error::from_raw_os_error(rc),
            ));
        }
        if mode == Mode::Joinable {
            // SAFETY: `thread` is a joinable thread created above and not yet joined.
            let rc = unsafe { libc::pthread_join(thread, std::ptr::null_mut()) };
            if rc != 0 {
                return Err(BenchError::io(
                    NAME,
                    "pthread_join",
                    std::io::Error::from_raw_os_error(rc),
                ));
            }
        }
        super::wait_until(&never, || slot.done.load(Ordering::Acquire)).map_err(|_| {
            BenchError::check(
                NAME,
                format!(
                    "a created thread did not run within {} s",
                    super::WAIT_TIMEOUT.as_secs()
                ),
            )
        })?;
        let started = slot.start_ns.load(Ordering::Relaxed);
        let cpu = slot.cpu.load(Ordering::Relaxed);
        if child_cpu.is_some_and(|want| want != cpu) {
            return Err(BenchError::check(
                NAME,
                format!(
                    "a thread created for CPU {} ran on CPU {cpu}",
                    child_cpu.unwrap_or_default()
                ),
            ));
        }
        run.child_cpu = cpu;
        run.tids.push(slot.tid.load(Ordering::Relaxed));
        run.return_ns.push(super::interval_ns(t0, t1));
        run.start_ns.push(super::interval_ns(t0, started));
    }
    run.parent_cpu = this_cpu();
    drop(attr);
    if mode == Mode::Detached {
        wait_exited(&run.tids)?;
    }
    Ok(run)
}

/// Waits until the last detached children have left the thread group. Only the last
/// few are checked: they were created last, and with a small `pid_max` an early tid may
/// already belong to a later thread.
fn wait_exited(tids: &[libc::pid_t]) -> Result<(), BenchError> {
    const CHECKED: usize = 16;
    const BUDGET: Duration = Duration::from_secs(2);
    let start = Instant::now();
    for tid in tids.iter().rev().take(CHECKED) {
        let path = format!("/proc/self/task/{tid}");
        while std::path::Path::new(&path).exists() {
            if start.elapsed() > BUDGET {
                return Err(BenchError::check(
                    NAME,
                    format!(
                        "detached thread {tid} had not exited {} s after it finished",
                        BUDGET.as_secs()
                    ),
                ));
            }
            std::thread::yield_now();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::testutil::{prepare, two_cpus};

    fn task_alive(tid: libc::pid_t) -> bool {
        std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
    }

    #[test]
    fn joinable_and_detached_creations_give_both_series() {
        let Some(cpus) = two_cpus() else { return };
        for mode in ["joinable", "detached"] {
            let mut inst = prepare(&PthreadCreate, &[("mode", mode)], &cpus).unwrap();
            let s = inst.sample(20).unwrap();
            assert_eq!(s.work, 20.0);
            assert_eq!(s.cpus, cpus.to_vec(), "{mode}");
            for key in ["create_return_ns", "thread_start_ns"] {
                let v = &s.series[key];
                assert_eq!(v.len(), 20, "{mode} {key}");
                assert!(v.iter().all(|x| x.is_finite() && *x > 0.0), "{mode} {key}");
            }
            let a = s.metrics["create_return_ns_mean"];
            let b = s.metrics["thread_start_ns_mean"];
            assert!(a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite());
            assert!(s.elapsed_ns > 0 && s.elapsed_ns > s.overhead_ns);
        }
    }

    #[test]
    fn one_cpu_placement_keeps_the_child_on_that_cpu() {
        let Some([c, _]) = two_cpus() else { return };
        let mut inst = prepare(&PthreadCreate, &[], &[c]).unwrap();
        let s = inst.sample(5).unwrap();
        assert_eq!(s.cpus, vec![c, c]);
    }

    #[test]
    fn no_created_thread_survives_a_sample() {
        let Some([a, b]) = two_cpus() else { return };
        for mode in [Mode::Joinable, Mode::Detached] {
            let run = run_creations(mode, Some(a), Some(b), 10).unwrap();
            assert_eq!(run.tids.len(), 10);
            // Joined threads are gone at once; detached ones were awaited for the last
            // few, and the earlier ones finished before those were created.
            let deadline = Instant::now() + Duration::from_secs(2);
            while run.tids.iter().any(|&t| task_alive(t)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            for &t in &run.tids {
                assert!(!task_alive(t), "{mode:?} thread {t} still exists");
            }
        }
    }

    #[test]
    fn bad_mode_names_the_parameter() {
        let Some([a, _]) = two_cpus() else { return };
        let e = prepare(&PthreadCreate, &[("mode", "zombie")], &[a])
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("mode=\"zombie\"") && e.contains("joinable or detached"),
            "{e}"
        );
    }
}
