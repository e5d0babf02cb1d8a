//! The os benchmarks of the catalog measured through their lean measurement process
//! (`smtlab-bench-os-child`, this crate's binary): every row samples, the measuring process has
//! one thread while it measures, and a child that dies is an error, not a hang.

use std::path::Path;

use smtlab_bench::os::lean::{self, LeanInstance, THREADS_METRIC};
use smtlab_bench::{BenchContext, Instance, Params};

fn register() {
    lean::set_program(env!("CARGO_BIN_EXE_smtlab-bench-os-child"));
}

fn have_cpus(cpus: &[u32]) -> bool {
    smtlab_placement::pin::get_affinity(0)
        .map(|s| cpus.iter().all(|&c| s.contains(c)))
        .unwrap_or(false)
}

fn with_ctx<T>(
    info: &smtlab_model::BenchInfo,
    cpus: &[u32],
    f: impl FnOnce(&BenchContext<'_>) -> T,
) -> T {
    let params = Params::resolve(info, &[], false).expect("default parameters");
    let placement = smtlab_fixtures::build::placement_on(cpus);
    let topology = smtlab_fixtures::build::one_cpu_per_core(&[0, 1]);
    f(&BenchContext {
        params: &params,
        placement: &placement,
        topology: &topology,
        client: None,
    })
}

fn check_every_row(cpus: &[u32]) {
    register();
    for b in smtlab_bench::os::benchmarks() {
        let info = b.info();
        let iterations = if info.name.starts_with("fork") { 2 } else { 50 };
        let mut inst: Box<dyn Instance> = with_ctx(&info, cpus, |ctx| {
            b.prepare(ctx)
                .unwrap_or_else(|e| panic!("{}: prepare: {e}", info.name))
        });
        for _ in 0..2 {
            let s = inst
                .sample(iterations)
                .unwrap_or_else(|e| panic!("{}: sample: {e}", info.name));
            assert_eq!(s.work, iterations as f64, "{}", info.name);
            if info.name == "sig-handler" {
                // Its overhead is the loop of sends, clamped at the catching loop's time as
                // lmbench clamps: on a busy machine a send loop of 50 signals that was
                // interrupted once reaches it.
                assert!(s.elapsed_ns >= s.overhead_ns, "{}: {s:?}", info.name);
            } else {
                assert!(s.elapsed_ns > s.overhead_ns, "{}: {s:?}", info.name);
            }
            assert_eq!(
                s.metrics.get(THREADS_METRIC),
                Some(&1.0),
                "{}: the measuring process must have one thread: {s:?}",
                info.name
            );
            let want_child = *cpus.get(1).unwrap_or(&cpus[0]);
            let want: Vec<u32> = match info.name.as_str() {
                "pipe-latency" | "fork-exit" | "fork-exec" | "fork-sh" => vec![cpus[0], want_child],
                _ => vec![cpus[0]],
            };
            assert_eq!(s.cpus, want, "{}: {s:?}", info.name);
        }
    }
}

#[test]
fn every_row_measures_in_a_single_threaded_process_on_one_cpu() {
    if have_cpus(&[0]) {
        check_every_row(&[0]);
    }
}

#[test]
fn every_row_measures_in_a_single_threaded_process_on_two_cpus() {
    if have_cpus(&[0, 1]) {
        check_every_row(&[0, 1]);
    }
}

fn start(bench: &str) -> LeanInstance {
    let b = smtlab_bench::catalog::find(bench).expect("in the catalog");
    with_ctx(&b.info(), &[0], |ctx| {
        LeanInstance::start(
            Path::new(env!("CARGO_BIN_EXE_smtlab-bench-os-child")),
            bench,
            ctx,
        )
        .unwrap_or_else(|e| panic!("{bench}: {e}"))
    })
}

/// Whether `pid` is gone and reaped (waiting again finds no such child).
fn reaped(pid: libc::pid_t) -> bool {
    let mut status = 0;
    // SAFETY: non-blocking wait for our own (former) child.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
}

#[test]
fn a_child_killed_between_samples_is_an_error_naming_the_benchmark() {
    if !have_cpus(&[0]) {
        return;
    }
    let mut inst = start("read");
    inst.sample(10).unwrap();
    let pid = inst.pid();
    // SAFETY: killing our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let e = inst.sample(10).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("read: the measurement process (pid {pid})"))
            && e.contains("killed by signal 9"),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e}");
    drop(inst);
    assert!(reaped(pid));
}

#[test]
fn a_child_killed_during_a_sample_is_an_error_not_a_hang() {
    if !have_cpus(&[0]) {
        return;
    }
    let mut inst = start("fork-exit");
    let pid = inst.pid();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        // SAFETY: killing our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    // Far more forks than fit in 200 ms: the kill lands inside the sample.
    let t0 = std::time::Instant::now();
    let e = inst.sample(10_000_000).unwrap_err().to_string();
    smtlab_fixtures::bounded::join(killer, "the killer thread");
    assert!(
        e.contains("fork-exit") && e.contains("killed by signal 9"),
        "{e}"
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn dropping_the_instance_ends_the_child_and_its_children() {
    if !have_cpus(&[0]) {
        return;
    }
    let mut inst = start("pipe-latency");
    inst.sample(10).unwrap();
    let pid = inst.pid();
    drop(inst);
    assert!(reaped(pid), "measurement process {pid} left unreaped");
}

#[test]
fn parameter_errors_come_back_as_parameter_errors() {
    register();
    let b = smtlab_bench::catalog::find("select-file").unwrap();
    let info = b.info();
    let params = Params::from_pairs([("fds", "0")]);
    let placement = smtlab_fixtures::build::placement_on(&[0]);
    let topology = smtlab_fixtures::build::one_cpu_per_core(&[0, 1]);
    let ctx = BenchContext {
        params: &params,
        placement: &placement,
        topology: &topology,
        client: None,
    };
    let e = b.prepare(&ctx).err().expect("fds=0 is refused");
    assert!(
        matches!(e, smtlab_bench::BenchError::Param(_)),
        "{}: {e}",
        info.name
    );
    assert!(e.to_string().contains("fds"), "{e}");
}

/// A Ctrl-C or `timeout` signals smtlab's process group; the measurement process is
/// outside it, so it cannot die of the stop before smtlab has seen it (which would
/// record a failed cell in place of a stopped one).
#[test]
fn the_measurement_process_leads_its_own_process_group() {
    if !have_cpus(&[0]) {
        return;
    }
    let mut inst = start("read");
    inst.sample(10).unwrap();
    let pid = inst.pid();
    // SAFETY: getpgid reads process groups; no preconditions.
    let (child, ours) = unsafe { (libc::getpgid(pid), libc::getpgid(0)) };
    assert_eq!(child, pid, "the child leads its group");
    assert_ne!(child, ours);
    // It stays in this process's cgroup, as a reference tool's process would: a cgroup
    // level of its own would cost each of its context switches.
    let cgroup = |p: &str| std::fs::read_to_string(format!("/proc/{p}/cgroup")).unwrap();
    assert_eq!(cgroup(&pid.to_string()), cgroup("self"));
    inst.sample(10).unwrap();
}
