//! The counters crate's tests: derived metrics through the fake source (exact
//! arithmetic), then the real perf_event, /proc/stat and tracepoint paths on this
//! machine. Tests that need something this machine may lack (a PMU, tracefs, root)
//! print "skipped: <reason>" and pass, so the suite says what it could not check.

use std::time::Duration;

use smtlab_fixtures::bounded;

use smtlab_counters::{
    CounterSource, FakeSource, PerfCounters, PerfOptions, availability, fake_values, measure,
};
use smtlab_model::CpuSet;
use smtlab_model::counters::cpi_stack::{Latencies, cpi_stack};
use smtlab_model::counters::derived::{self, MISS_PAIRS, Work, cpi, ipc, per_kilo_instruction};
use smtlab_model::counters::{
    CountMode, CounterEvent as E, CounterTarget, CounterValues, EventClass, Reading,
};

const ALL: CountMode = CountMode::All;

fn thread_target(inherit: bool) -> CounterTarget {
    CounterTarget::Thread { tid: 0, inherit }
}

/// A complete set of counts with round numbers: 2M instructions in 3M cycles.
fn full_counts() -> Vec<(E, u64)> {
    vec![
        (E::Cycles, 3_000_000),
        (E::Instructions, 2_000_000),
        (E::Branches, 400_000),
        (E::BranchMisses, 8_000),
        (E::L1dReads, 800_000),
        (E::L1dReadMisses, 40_000),
        (E::L1iReads, 500_000),
        (E::L1iReadMisses, 10_000),
        (E::LlcReads, 5_000),
        (E::LlcReadMisses, 1_000),
        (E::DtlbReads, 800_000),
        (E::DtlbReadMisses, 2_000),
        (E::ItlbReads, 500_000),
        (E::ItlbReadMisses, 500),
        (E::TaskClock, 1_000_000),
        (E::PageFaults, 10),
    ]
}

fn approx(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= 1e-12 * b.abs().max(1.0))
}

// ---- derived metrics through the fake source -------------------------------------

#[test]
fn fake_source_cpi_mpki_and_ratios_are_exact() {
    let mut src = FakeSource::new(fake_values(&full_counts()));
    let (ret, v) = measure(&mut src, || 42).unwrap();
    assert_eq!(ret, 42);
    assert_eq!((src.starts, src.stops), (1, 1));

    assert_eq!(cpi(&v, ALL), Some(1.5));
    assert!(approx(ipc(&v, ALL), 2.0 / 3.0));
    assert_eq!(per_kilo_instruction(&v, E::L1dReadMisses, ALL), Some(20.0));
    assert_eq!(per_kilo_instruction(&v, E::LlcReadMisses, ALL), Some(0.5));
    let d = derived::derive(&v, ALL, None);
    assert_eq!(d.branch_miss_ratio, Some(0.02));
    assert_eq!(d.branch_mpki, Some(4.0));
    let l1d = &d.misses[0];
    assert_eq!(
        (l1d.label.as_str(), l1d.mpki, l1d.miss_ratio),
        ("L1D", Some(20.0), Some(0.05))
    );
    let llc = d.misses.iter().find(|m| m.label == "LLC").unwrap();
    assert_eq!(llc.miss_ratio, Some(0.2));
    assert_eq!(MISS_PAIRS.len(), d.misses.len());
    // Not measured: the stall events.
    assert_eq!(d.frontend_stall_ratio, None);
}

#[test]
fn cost_per_unit_of_work() {
    let v = fake_values(&full_counts());
    let w = Work {
        amount: 1_000_000.0,
        unit: "byte".into(),
    };
    let d = derived::derive(&v, ALL, Some(&w));
    let cost = d.work.unwrap();
    assert_eq!(cost.unit, "byte");
    assert_eq!(cost.instructions_per_unit, Some(2.0));
    assert_eq!(cost.cycles_per_unit, Some(3.0));
    assert_eq!(cost.cpu_ns_per_unit, Some(1.0));
    assert_eq!(cost.context_switches_per_unit, None);
}

#[test]
fn cpi_stack_of_the_generic_events_adds_to_the_cpi() {
    let v = fake_values(&full_counts());
    let s = cpi_stack(&v, &Latencies::assumed()).unwrap();
    // Per instruction, at the assumed latencies: L1D 40000*12, L1I 10000*12,
    // LLC 1000*200, DTLB 2000*20, ITLB 500*20, branch 8000*20 cycles, over 2M
    // instructions; 0.505 in all, the rest of the CPI 1.5 is other/base.
    let expect = [
        ("l1d_miss", 0.24),
        ("l1i_miss", 0.06),
        ("llc_miss", 0.1),
        ("dtlb_miss", 0.02),
        ("itlb_miss", 0.005),
        ("branch_mispredict", 0.08),
    ];
    for (key, cpi) in expect {
        let c = s.parts.iter().find(|c| c.key == key).unwrap();
        assert!(approx(Some(c.cpi), cpi), "{key}: {} != {cpi}", c.cpi);
    }
    assert_eq!(s.measured_cpi, 1.5);
    assert!(approx(Some(s.other_cpi), 0.995));
    assert!(approx(Some(s.sum()), 1.5));
    // The model-table events were not counted: named, their cycles in other/base.
    assert_eq!(
        s.not_counted,
        ["L2 miss to LLC", "machine clear", "store buffer full"]
    );

    // Without instructions nothing per instruction can be said.
    let v = fake_values(&[(E::Cycles, 10), (E::L1dReadMisses, 5)]);
    assert_eq!(cpi_stack(&v, &Latencies::assumed()), None);
}

#[test]
fn multiplexed_counts_are_scaled_by_enabled_over_running() {
    let mut v = CounterValues::new(thread_target(false));
    // cycles ran a quarter of the time, instructions half of it.
    v.set(
        E::Cycles,
        ALL,
        Reading::new(1_000_000, 4_000_000, 1_000_000),
    );
    v.set(
        E::Instructions,
        ALL,
        Reading::new(1_000_000, 4_000_000, 2_000_000),
    );
    assert_eq!(v.count(E::Cycles, ALL), Some(4_000_000.0));
    assert_eq!(v.count(E::Instructions, ALL), Some(2_000_000.0));
    assert_eq!(cpi(&v, ALL), Some(2.0));
    let r = v.get(E::Cycles).unwrap().all.unwrap();
    assert_eq!(
        (r.time_enabled_ns, r.time_running_ns, r.scale_factor()),
        (4_000_000, 1_000_000, Some(4.0))
    );
    assert_eq!(
        v.multiplexed(),
        vec![(E::Cycles, 4.0), (E::Instructions, 2.0)]
    );

    // CPU-wide: each CPU's part is scaled by its own factor, then summed.
    let cpu0 = Reading::new(100, 10, 5); // x2
    let cpu1 = Reading::new(300, 10, 10); // x1
    assert_eq!(cpu0.sum(&cpu1).scaled, Some(500.0));

    // An event that never got a counter has no value at all.
    v.set(E::BranchMisses, ALL, Reading::new(0, 4_000_000, 0));
    v.set(E::Branches, ALL, Reading::exact(100));
    assert_eq!(v.count(E::BranchMisses, ALL), None);
    assert_eq!(derived::branch_miss_ratio(&v, ALL), None);
}

#[test]
fn user_kernel_split_metrics() {
    let mut v = CounterValues::new(thread_target(false));
    v.set(E::Cycles, CountMode::User, Reading::exact(600));
    v.set(E::Cycles, CountMode::Kernel, Reading::exact(400));
    v.set(E::Instructions, CountMode::User, Reading::exact(600));
    v.set(E::Instructions, CountMode::Kernel, Reading::exact(100));
    assert_eq!(cpi(&v, CountMode::User), Some(1.0));
    assert_eq!(cpi(&v, CountMode::Kernel), Some(4.0));
    assert_eq!(cpi(&v, ALL), Some(1000.0 / 700.0));
    assert_eq!(derived::kernel_share(&v, E::Cycles), Some(0.4));
}

#[test]
fn software_only_values_derive_no_hardware_numbers() {
    let v = fake_values(&[(E::TaskClock, 5_000_000), (E::PageFaults, 3)]);
    let d = derived::derive(&v, ALL, None);
    assert_eq!((d.cpi, d.ipc, d.branch_miss_ratio), (None, None, None));
    assert!(
        d.misses
            .iter()
            .all(|m| m.mpki.is_none() && m.miss_ratio.is_none())
    );
    assert_eq!(cpi_stack(&v, &Latencies::assumed()), None);
}

#[test]
fn fake_source_checks_call_order_and_plays_its_script() {
    let mut src = FakeSource::sequence(vec![
        fake_values(&[(E::Instructions, 1)]),
        fake_values(&[(E::Instructions, 2)]),
    ]);
    assert!(src.read().is_err(), "read before start");
    assert!(src.stop().is_err(), "stop before start");
    let a = measure(&mut src, || ()).unwrap().1;
    let b = measure(&mut src, || ()).unwrap().1;
    let c = measure(&mut src, || ()).unwrap().1;
    assert_eq!(a.count(E::Instructions, ALL), Some(1.0));
    assert_eq!(b.count(E::Instructions, ALL), Some(2.0));
    assert_eq!(c.count(E::Instructions, ALL), Some(2.0));
    // Callers take `dyn CounterSource`.
    let boxed: &mut dyn CounterSource = &mut src;
    assert!(boxed.start().is_ok());
}

// ---- real perf events on this machine --------------------------------------------

const PAGE: usize = 4096;

/// Maps `pages` fresh anonymous pages without transparent huge pages (one THP fault
/// would cover 512 pages) and writes one byte to each: one page fault per page.
fn touch_fresh_pages(pages: usize) -> u64 {
    let len = pages * PAGE;
    // SAFETY: a private anonymous mapping of `len` bytes; we check for MAP_FAILED and
    // only touch bytes inside it before unmapping it exactly once.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "mmap {len} bytes");
        libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
        let base = p.cast::<u8>();
        let mut sum = 0u64;
        for i in 0..pages {
            let b = base.add(i * PAGE);
            std::ptr::write_volatile(b, (i & 0xff) as u8);
            sum += u64::from(std::ptr::read_volatile(b));
        }
        libc::munmap(p, len);
        sum
    }
}

/// Every event of `class`, split into user and kernel.
fn of_class(class: EventClass) -> PerfOptions {
    let events: Vec<E> = E::ALL.into_iter().filter(|e| e.class() == class).collect();
    PerfOptions::events(&events)
}

#[test]
fn real_software_events_count_page_faults_and_task_clock() {
    const N: usize = 2000;
    let mut c = PerfCounters::open(thread_target(false), &of_class(EventClass::Software)).unwrap();
    assert!(
        !c.is_empty(),
        "software events must open: {:?}",
        c.unavailable()
    );
    let (_, v) = measure(&mut c, || touch_fresh_pages(N)).unwrap();
    // User-mode counting works at every perf_event_paranoid level; kernel-mode needs
    // root or paranoid <= 1.
    let user_faults = v
        .count(E::PageFaults, CountMode::User)
        .expect("user page-faults");
    assert!(
        user_faults >= (N / 2) as f64,
        "user page-faults {user_faults} < {}",
        N / 2
    );
    match v.count(E::PageFaults, ALL) {
        Some(faults) => assert!(faults >= user_faults, "all {faults} < user {user_faults}"),
        None => println!(
            "skipped: kernel page faults: {}",
            v.unavailable_reason(E::PageFaults, CountMode::Kernel)
                .unwrap()
        ),
    }
    let task_ns = v.count(E::TaskClock, ALL).expect("task-clock measured");
    assert!(task_ns > 0.0, "task-clock {task_ns}");
    // Task-clock is counted once, with nothing excluded (the split means nothing).
    let tc = v.get(E::TaskClock).unwrap();
    assert!(tc.user.is_none() && tc.kernel.is_none() && tc.all.is_some());
}

#[test]
fn real_inherited_counts_include_a_child_thread() {
    const N: usize = 1000;
    let opts = PerfOptions::events(&[E::PageFaults]);
    let mut c = PerfCounters::open(thread_target(true), &opts).unwrap();
    let (_, v) = measure(&mut c, || {
        bounded::join(
            std::thread::spawn(|| touch_fresh_pages(N)),
            "the page toucher",
        )
    })
    .unwrap();
    let faults = v.count(E::PageFaults, CountMode::User).unwrap();
    assert!(faults >= (N / 2) as f64, "inherited page-faults {faults}");
}

#[test]
fn real_hardware_events_say_not_supported_instead_of_zero() {
    let a = availability();
    let mut c = PerfCounters::open(thread_target(false), &of_class(EventClass::Hardware)).unwrap();
    let (_, v) = measure(&mut c, || touch_fresh_pages(10)).unwrap();
    if a.hardware.available {
        println!("skipped: this machine has a PMU, so hardware events are not expected to fail");
        assert!(
            v.count(E::Instructions, CountMode::User)
                .is_some_and(|i| i > 0.0)
        );
        return;
    }
    let reason = a.hardware.reason.as_deref().unwrap();
    assert!(
        reason.starts_with("hardware counters not supported"),
        "{reason}"
    );
    assert!(!reason.contains('\n'), "one line: {reason}");
    println!("hardware: {reason}");
    assert_eq!(v.count(E::Cycles, CountMode::User), None);
    assert_eq!(v.count(E::Instructions, ALL), None);
    assert_eq!(cpi(&v, ALL), None);
    let why = v.unavailable_reason(E::Cycles, CountMode::User).unwrap();
    assert!(why.starts_with("not supported on this machine"), "{why}");
    assert!(
        v.events.is_empty(),
        "no hardware event should have a reading: {:?}",
        v.events
    );
}

#[test]
fn real_cpu_wide_counting_or_a_reason() {
    let a = availability();
    if !a.cpu_wide.available {
        println!("skipped: {}", a.cpu_wide.reason.unwrap());
        return;
    }
    let cpus = CpuSet::from_iter([0]);
    let mut c = PerfCounters::open(
        CounterTarget::Cpus { cpus },
        &PerfOptions::events(&[E::TaskClock, E::ContextSwitches]),
    )
    .unwrap();
    let (_, v) = measure(&mut c, || std::thread::sleep(Duration::from_millis(50))).unwrap();
    // CPU-wide task-clock counts the CPU's whole time, busy or idle.
    assert!(v.count(E::TaskClock, ALL).unwrap() > 10e6);
}

#[test]
fn availability_is_consistent() {
    let a = availability();
    assert!(a.software.available, "{:?}", a.software.reason);
    for s in &a.events {
        assert_eq!(s.available, s.reason.is_none(), "{s:?}");
    }
    // A guest without a PMU is told what would give it one.
    let devices = std::path::Path::new("/sys/bus/event_source/devices");
    let pmu = ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .any(|p| devices.join(p).exists());
    if let Some(r) = &a.hardware.reason
        && smtlab_counters::hypervisor_vendor().is_some()
        && !pmu
        && r.starts_with("hardware counters not supported")
    {
        assert!(
            r.contains("its hypervisor must pass a virtual PMU through"),
            "{r}"
        );
    }
    let classes = [&a.hardware, &a.software, &a.kernel_mode, &a.cpu_wide];
    for line in classes.iter().filter_map(|s| s.reason.as_ref()) {
        assert!(!line.contains('\n'));
        println!("missing: {line}");
    }
}

// ---- /proc/stat sampler -----------------------------------------------------------

use smtlab_counters::procstat::{ProcStatSampler, SamplerOptions};
use smtlab_model::counters::os_time::StartupSplit;

fn pin_to(cpu: usize) {
    smtlab_placement::pin::pin_current_thread_to(cpu as u32)
        .unwrap_or_else(|e| panic!("pin to cpu {cpu}: {e}"));
}

#[test]
fn proc_stat_sampler_sees_a_busy_loop_on_cpu0() {
    let cpus = CpuSet::from_iter([0]);
    let sampler = ProcStatSampler::start(
        &cpus,
        SamplerOptions {
            interval: Duration::from_millis(100),
            ..SamplerOptions::default()
        },
    )
    .unwrap();
    let busy = std::thread::spawn(|| {
        pin_to(0);
        let end = std::time::Instant::now() + Duration::from_millis(800);
        let mut x = 0u64;
        while std::time::Instant::now() < end {
            for i in 0..10_000u64 {
                x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(i));
            }
        }
        std::hint::black_box(x);
    });
    bounded::join(busy, "the busy loop");
    let series = sampler.stop().unwrap();
    assert!(
        series.intervals.len() >= 6,
        "{} intervals",
        series.intervals.len()
    );
    assert!(
        series
            .intervals
            .iter()
            .all(|i| i.per_cpu.len() == 1 && i.per_cpu[0].cpu == 0)
    );
    let total = series.total();
    let f = total.fractions.expect("ticks elapsed on cpu0");
    // A test run under `nice` counts the loop as nice time, the user time of a
    // lowered-priority task.
    let ticks = &total.per_cpu[0].ticks;
    assert!(
        ticks.user + ticks.nice > 0,
        "user ticks on cpu0: {:?}",
        total.per_cpu[0]
    );
    assert!(f.user + f.nice > 0.3, "user fraction {f:?}");
    let p = series.phases(StartupSplit::default());
    assert_eq!(
        p.startup.intervals + p.steady.intervals,
        series.intervals.len()
    );
    assert!(p.steady.intervals > p.startup.intervals);
}

#[test]
fn proc_stat_sampler_names_a_missing_cpu_and_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stat");
    std::fs::write(&path, "cpu  1 1 1 1\ncpu0 1 0 1 5 0 0 0 0\n").unwrap();
    let opts = SamplerOptions {
        interval: Duration::from_millis(10),
        path: path.clone(),
        ..SamplerOptions::default()
    };
    let err = ProcStatSampler::start(&CpuSet::from_iter([0, 3]), opts.clone()).unwrap_err();
    assert!(err.to_string().contains("cpu3"), "{err}");
    // A file that does not change gives intervals with no ticks: no fractions at all.
    let s = ProcStatSampler::start(&CpuSet::from_iter([0]), opts).unwrap();
    std::thread::sleep(Duration::from_millis(35));
    let series = s.stop().unwrap();
    assert!(!series.intervals.is_empty());
    assert_eq!(series.total().fractions, None);

    let missing = SamplerOptions {
        path: dir.path().join("nope"),
        ..SamplerOptions::default()
    };
    let err = ProcStatSampler::start(&CpuSet::from_iter([0]), missing).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

// ---- kernel time by system call -----------------------------------------------------

use smtlab_counters::{CounterError, SyscallTracer, TraceOptions};
use smtlab_model::counters::syscalls::{SyscallGroup, SyscallProfile};

/// Traces `target` around `work`, or returns the skip reason. The buffers (16 MiB
/// per CPU) hold every record of these tests even if the drainer thread gets no CPU
/// while the loop runs (2 CPUs, tests in parallel), so nothing may be lost.
fn trace(target: CounterTarget, work: impl FnOnce()) -> Result<SyscallProfile, String> {
    let options = TraceOptions {
        buffer_pages: 4096,
        ..TraceOptions::default()
    };
    let tracer = match SyscallTracer::open(target, options) {
        Ok(t) => t,
        Err(CounterError::Unavailable(reason)) => return Err(reason),
        Err(e) => panic!("syscall tracer failed for a reason other than availability: {e}"),
    };
    let running = tracer.start().unwrap();
    work();
    Ok(running.stop().unwrap())
}

fn getppid_loop(n: usize) {
    for _ in 0..n {
        // SAFETY: getppid has no preconditions.
        std::hint::black_box(unsafe { libc::getppid() });
    }
}

#[test]
fn syscall_trace_sees_every_getppid_of_this_thread() {
    const N: usize = 20_000;
    let p = match trace(thread_target(false), || getppid_loop(N)) {
        Ok(p) => p,
        Err(reason) => {
            println!("skipped: {reason}");
            return;
        }
    };
    let g = p.find("getppid").expect("getppid traced");
    assert_eq!(g.group, SyscallGroup::Process);
    assert!(
        g.calls >= N as u64,
        "getppid calls {} < {N} (lost {})",
        g.calls,
        p.lost_records
    );
    assert!(g.completed >= N as u64, "completed {}", g.completed);
    assert!(g.wall_ns > 0 && g.max_wall_ns > 0);
    // getppid never blocks: its CPU time is most of its wall time.
    let cpu = g.cpu_ns.expect("CPU time measured");
    assert!(cpu > 0 && cpu <= g.wall_ns, "{g:?}");
    assert_eq!(p.lost_records, 0);
    let groups = p.by_group();
    assert!(
        groups
            .iter()
            .any(|s| s.group == SyscallGroup::Process && s.calls >= N as u64)
    );
    println!(
        "getppid: {} calls, mean {:.0} ns (traced); {} distinct syscalls, {} unmatched exits",
        g.calls,
        g.mean_wall_ns().unwrap(),
        p.syscalls.len(),
        p.unmatched_exits
    );
}

/// A real workload: this thread blocks in `read` on a pipe until another thread writes
/// 300 ms later. The call's wall time is the wait; its CPU time (wall time less the
/// time switched out) is the few microseconds the kernel ran it.
#[test]
fn syscall_cpu_time_of_a_blocked_read_is_small_and_its_wall_time_large() {
    const WAIT: std::time::Duration = std::time::Duration::from_millis(300);
    let mut fds: [libc::c_int; 2] = [0; 2];
    // SAFETY: `fds` is a writable array of two ints, as pipe(2) needs.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (rd, wr) = (fds[0], fds[1]);
    let (go, wait_go) = std::sync::mpsc::channel::<()>();
    // The writer writes only once the traced read is about to run. When tracing is
    // refused the closure never runs and `go` is dropped unsent: the writer then
    // returns without writing instead of waiting for ever.
    let writer = std::thread::spawn(move || {
        wait_go.recv_timeout(bounded::HELPER_DEADLINE).ok()?;
        std::thread::sleep(WAIT);
        // SAFETY: `wr` is the pipe's open write end; the buffer is one valid byte.
        Some(unsafe { libc::write(wr, b"x".as_ptr().cast(), 1) })
    });
    let mut byte = [0u8; 1];
    let traced = trace(thread_target(false), move || {
        go.send(()).unwrap();
        // SAFETY: `rd` is the pipe's open read end; `byte` is a writable buffer of 1.
        let n = unsafe { libc::read(rd, byte.as_mut_ptr().cast(), 1) };
        assert_eq!(n, 1);
    });
    let wrote = bounded::join(writer, "the pipe writer");
    assert_eq!(wrote, traced.is_ok().then_some(1));
    // SAFETY: both ends are open and closed once, here.
    unsafe {
        libc::close(rd);
        libc::close(wr);
    }
    let p = match traced {
        Ok(p) => p,
        Err(reason) => {
            println!("skipped: {reason}");
            return;
        }
    };
    assert!(p.switches_traced, "this kernel records context switches");
    let r = p.find("read").expect("the blocked read traced");
    assert_eq!(r.completed, 1, "{r:?}");
    let cpu = r.cpu_ns.expect("CPU time measured");
    assert!(
        r.wall_ns >= WAIT.as_nanos() as u64 * 9 / 10,
        "wall time {} ns covers the wait",
        r.wall_ns
    );
    assert!(r.switched_out == 1, "the read blocked: {r:?}");
    assert!(
        cpu < 10_000_000 && cpu * 20 < r.wall_ns,
        "CPU time {cpu} ns is a small part of the wall time {} ns",
        r.wall_ns
    );
    println!(
        "blocked read: wall {:.1} ms, CPU {:.1} us",
        r.wall_ns as f64 / 1e6,
        cpu as f64 / 1e3
    );
}

#[test]
fn syscall_trace_follows_children_with_inherit() {
    const N: usize = 5_000;
    let p = match trace(thread_target(true), || {
        bounded::join(std::thread::spawn(|| getppid_loop(N)), "the getppid thread");
    }) {
        Ok(p) => p,
        Err(reason) => {
            println!("skipped: {reason}");
            return;
        }
    };
    let g = p
        .find("getppid")
        .expect("getppid traced in the child thread");
    assert!(g.calls >= N as u64, "inherited getppid calls {}", g.calls);
    assert!(
        p.find("clone3").is_some() || p.find("clone").is_some(),
        "thread creation traced"
    );
}

#[test]
fn syscall_trace_of_a_cpu_set() {
    const N: usize = 5_000;
    let cpus = CpuSet::from_iter([0]);
    let p = match trace(CounterTarget::Cpus { cpus }, || {
        let pinned = std::thread::spawn(|| {
            pin_to(0);
            getppid_loop(N);
        });
        bounded::join(pinned, "the pinned getppid thread");
    }) {
        Ok(p) => p,
        Err(reason) => {
            println!("skipped: {reason}");
            return;
        }
    };
    let g = p.find("getppid").expect("getppid traced on cpu 0");
    assert!(g.calls >= N as u64, "getppid on cpu 0: {}", g.calls);
}

/// A named event with one encoding, as `--events` resolves it.
fn named_event(
    name: &str,
    pmu: &str,
    type_: u32,
    config: u64,
    group: u32,
) -> smtlab_counters::ResolvedEvent {
    smtlab_counters::ResolvedEvent {
        name: name.into(),
        source: "test".into(),
        encodings: vec![smtlab_model::counters::named::EventEncoding {
            pmu: pmu.into(),
            type_,
            config,
            config1: 0,
            config2: 0,
        }],
        mode: CountMode::User,
        scale: Some(2.0),
        unit: None,
        cpus: None,
        group,
        filter: None,
    }
}

#[test]
fn named_events_open_as_a_group_and_absent_ones_say_why() {
    const N: usize = 1000;
    // The software PMU (type 1) exists wherever perf_event does: page faults (config
    // 2) and context switches (config 3) as one named group, plus a core-PMU event
    // (type 4, cycles) that a machine without a PMU cannot open.
    let mut opts = PerfOptions::events(&[]);
    opts.named = vec![
        named_event("sw-page-faults", "software", 1, 2, 0),
        named_event("sw-context-switches", "software", 1, 3, 0),
        named_event("cpu-cycles-raw", "cpu", 4, 0x3c, 1),
    ];
    let mut c = PerfCounters::open(thread_target(false), &opts).unwrap();
    let (_, v) = measure(&mut c, || touch_fresh_pages(N)).unwrap();
    let faults = v
        .named("sw-page-faults")
        .expect("software page faults by name");
    // Scale 2 applies to the value, not to the raw count.
    assert!(faults.reading.raw >= (N / 2) as u64, "{faults:?}");
    assert_eq!(
        v.named_value("sw-page-faults"),
        faults.reading.scaled.map(|x| x * 2.0)
    );
    assert!(v.named("sw-context-switches").is_some());
    assert_eq!(faults.scope, "calling thread");
    // Every name asked for is either counted or has its one-line reason.
    match v.named("cpu-cycles-raw") {
        Some(r) => assert!(r.reading.raw > 0, "{r:?}"),
        None => {
            let u = v
                .named_unavailable
                .iter()
                .find(|u| u.name == "cpu-cycles-raw")
                .expect("a reason for the absent event");
            assert!(
                u.reason.contains("cpu (type 4) config=0x3c"),
                "{}",
                u.reason
            );
            println!("skipped: cpu-cycles-raw: {}", u.reason);
        }
    }
}

#[test]
fn events_resolved_on_this_machine_are_counted_or_explained() {
    // What `--events` does here: resolve against this machine's sysfs tree, open,
    // count. On a machine without a PMU every hardware name gets its line.
    let tree = smtlab_counters::PmuTree::system();
    let list = "msr/tsc/,l2-misses,topdown,dram,bogus-event";
    let resolved = smtlab_counters::resolve(list, &tree).unwrap();
    let mut opts = PerfOptions::events(&[]);
    opts.named = resolved.events.clone();
    let mut c = PerfCounters::open(thread_target(false), &opts).unwrap();
    let (_, v) = measure(&mut c, || touch_fresh_pages(100)).unwrap();
    let mut said: Vec<String> = resolved
        .unavailable
        .iter()
        .map(|u| u.name.clone())
        .collect();
    said.extend(v.named_unavailable.iter().map(|u| u.name.clone()));
    said.extend(v.named.iter().map(|r| r.name.clone()));
    for e in &resolved.events {
        assert!(
            said.contains(&e.name),
            "{} neither counted nor explained",
            e.name
        );
    }
    assert!(said.iter().any(|s| s == "bogus-event"));
    for u in resolved.unavailable.iter().chain(&v.named_unavailable) {
        assert!(!u.reason.is_empty() && !u.reason.contains('\n'));
        println!("skipped: {}: {}", u.name, u.reason);
    }
    for r in &v.named {
        println!("counted: {} = {:?} ({})", r.name, r.value(), r.source);
    }
}

/// `--events kernel` on this thread while it touches fresh pages: the page-fault
/// tracepoint and the software minor-fault counter both see every page, and agree;
/// where tracefs is out of reach each tracepoint says why in one line.
#[test]
fn kernel_causes_count_the_faults_of_fresh_pages() {
    const N: usize = 500;
    let resolved = smtlab_counters::resolve("kernel", &smtlab_counters::PmuTree::system()).unwrap();
    let mut opts = PerfOptions::events(&[]);
    opts.named = resolved.events.clone();
    let mut c = PerfCounters::open(thread_target(false), &opts).unwrap();
    let (_, v) = measure(&mut c, || touch_fresh_pages(N)).unwrap();
    let minor = v.named_value("minor-faults").expect("minor-faults counted");
    assert!(minor >= N as f64, "minor faults {minor} < {N}");
    let user = v.named_value("faults-user");
    let unavailable = resolved.unavailable.iter().chain(&v.named_unavailable);
    match user {
        Some(user) => {
            assert!(user >= N as f64, "user faults {user} < {N}");
            // Every fault is user or kernel mode, and minor or major.
            let kernel = v.named_value("faults-kernel").unwrap_or(0.0);
            let major = v.named_value("major-faults").unwrap_or(0.0);
            assert!(
                ((user + kernel) - (minor + major)).abs() <= 2.0,
                "user {user} + kernel {kernel} vs minor {minor} + major {major}"
            );
        }
        None => {
            for u in unavailable {
                assert!(!u.reason.contains('\n'), "{}", u.reason);
            }
            smtlab_fixtures::require::skip("page-fault tracepoints (tracefs, root)");
        }
    }
}

/// Interrupts on this machine's CPU 0 over 300 ms with a thread sleeping in 1 ms steps
/// (each wake-up is a timer interrupt): timer work is seen, every vector's time is
/// within the traced CPU time, and the profile says what it traced.
#[test]
fn irq_time_by_vector_on_cpu0() {
    use smtlab_counters::IrqTracer;
    use smtlab_model::counters::irqs::IrqKind;
    let cpus = CpuSet::from_iter([0]);
    let tracer = match IrqTracer::open(&cpus) {
        Ok(t) => t,
        Err(CounterError::Unavailable(reason)) => {
            println!("skipped: {reason}");
            return;
        }
        Err(e) => panic!("irq tracer failed for a reason other than availability: {e}"),
    };
    let running = tracer.start().unwrap();
    let sleeper = std::thread::spawn(|| {
        smtlab_placement::pin::pin_current_thread_to(0).ok();
        for _ in 0..300 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
    bounded::join(sleeper, "the sleeper");
    let p = running.stop().unwrap();
    assert!(p.duration_ns >= 300_000_000, "{}", p.duration_ns);
    assert!(!p.traced.is_empty());
    let timers: u64 = p
        .stats
        .iter()
        .filter(|s| {
            (s.kind == IrqKind::Vector && s.name == "local_timer")
                || (s.kind == IrqKind::Softirq && (s.name == "TIMER" || s.name == "HRTIMER"))
        })
        .map(|s| s.count)
        .sum();
    assert!(timers > 0, "timer interrupts seen: {:?}", p.stats);
    let all: u64 = p.stats.iter().map(|s| s.cpu_ns).sum();
    assert!(all > 0 && all < p.duration_ns, "{all} of {}", p.duration_ns);
    println!(
        "irq on cpu0 over {:.0} ms (traced {}): {}",
        p.duration_ns as f64 / 1e6,
        p.traced.join(" "),
        p.stats
            .iter()
            .take(6)
            .map(|s| format!("{} x{} {} ns", s.label(), s.count, s.cpu_ns))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

// ---- kernel time by cause -------------------------------------------------------------

/// Runs `work` on a new thread traced (with inherit) by a [`KernelTimeTracer`] opened
/// from this one, so the tracer's drainer is neither traced nor in the task clock;
/// `Err` is the reason it cannot trace here.
fn trace_kernel_time(
    work: impl FnOnce() + Send + 'static,
) -> Result<smtlab_model::counters::kernel_time::KernelTimeProfile, String> {
    use smtlab_counters::KernelTimeTracer;
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<bool>();
    let traced = std::thread::spawn(move || {
        tid_tx.send(smtlab_placement::pin::gettid()).unwrap();
        if go_rx.recv() == Ok(true) {
            work();
        }
    });
    let tid = bounded::recv(&tid_rx, "the traced thread's id");
    let tracer = match KernelTimeTracer::open(tid, true) {
        Ok(t) => t,
        Err(CounterError::Unavailable(reason)) => {
            go_tx.send(false).unwrap();
            bounded::join(traced, "the traced thread");
            return Err(reason);
        }
        Err(e) => panic!("kernel-cause tracer failed for a reason other than availability: {e}"),
    };
    let running = tracer.start().unwrap();
    go_tx.send(true).unwrap();
    bounded::join(traced, "the traced thread");
    Ok(running.stop().unwrap())
}

/// Four times as many threads as CPUs map, touch and unmap fresh pages of one process:
/// every touch is a minor fault in user mode, and `mmap`/`munmap` take the process's
/// `mmap_lock` for writing while others want it; with more threads than CPUs a holder
/// is sometimes preempted, so waiters sleep (the kernel traces a wait once spinning
/// gave up). Faults and waits have time, and each is below the traced tasks' CPU time.
#[test]
fn kernel_time_of_faults_and_lock_waits_is_within_the_cpu_time() {
    let cpus = std::thread::available_parallelism().map_or(2, usize::from);
    let threads = (4 * cpus).clamp(8, 64);
    // Many small mappings: waits come with mmap/munmap calls, faults with pages.
    const ROUNDS: usize = 2000;
    const PAGES: usize = 2;
    let p = match trace_kernel_time(move || {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..ROUNDS {
                        touch_fresh_pages(PAGES);
                    }
                })
            })
            .collect();
        for w in workers {
            bounded::join(w, "a faulting thread");
        }
    }) {
        Ok(p) => p,
        Err(reason) => {
            assert!(!reason.contains('\n'), "{reason}");
            smtlab_fixtures::require::skip(&format!("kernel-cause tracing: {reason}"));
            return;
        }
    };
    println!("{p:#?}");
    let task_cpu = p.task_cpu_ns.expect("task clock read");
    assert!(task_cpu > 0);
    if p.unavailable.iter().any(|u| u.starts_with("faults")) {
        smtlab_fixtures::require::skip("page-fault tracepoints");
    } else {
        let faults = p.faults().expect("faults timed");
        let n = (threads * ROUNDS * PAGES) as u64;
        assert!(faults.completed >= n, "{} faults < {n}", faults.completed);
        let cpu = faults.cpu_ns.expect("switches traced");
        assert!(cpu > 0 && cpu <= faults.wall_ns, "{faults:?}");
        assert!(
            cpu < task_cpu,
            "fault CPU {cpu} ns >= task clock {task_cpu} ns"
        );
    }
    if p.unavailable.iter().any(|u| u.starts_with("lock")) {
        smtlab_fixtures::require::skip("lock contention tracepoints");
    } else {
        let locks = p
            .find(smtlab_model::counters::kernel_time::KernelCause::LockWait)
            .expect("some mmap_lock wait with four times as many threads as CPUs");
        let cpu = locks.cpu_ns.expect("switches traced");
        assert!(locks.completed > 0 && locks.wall_ns > 0, "{locks:?}");
        assert!(
            cpu < task_cpu,
            "lock CPU {cpu} ns >= task clock {task_cpu} ns"
        );
    }
    // Each munmap of touched pages flushes the TLB of every other CPU running a thread
    // of the process: a shootdown that interrupts a traced thread there.
    if p.unavailable.iter().any(|u| u.starts_with("TLB")) {
        smtlab_fixtures::require::skip("TLB shootdown tracepoints");
    } else if cpus < 2 {
        smtlab_fixtures::require::skip("TLB shootdowns: one CPU sends none");
    } else {
        let tlb = p
            .find(smtlab_model::counters::kernel_time::KernelCause::TlbShootdownReceived)
            .expect("shootdowns received with threads of one process unmapping on every CPU");
        assert!(tlb.completed > 0 && tlb.wall_ns > 0, "{tlb:?}");
        assert_eq!(
            tlb.cpu_ns,
            Some(tlb.wall_ns),
            "an interrupt is not switched out"
        );
        assert!(
            tlb.wall_ns < task_cpu,
            "shootdown time {} ns >= task clock {task_cpu} ns",
            tlb.wall_ns
        );
    }
    assert_eq!(p.lost_records, 0);
}
