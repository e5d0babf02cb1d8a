//! Process creation (lmbench `lat_proc fork|exec|shell`): the last three rows of paper
//! 001 Table 1. One iteration is a whole child life, from `fork` to `wait4` returning:
//!
//! * `fork-exit`: the child calls `_exit(0)` at once (lmbench calls `exit(1)`, which in
//!   a copy of a multithreaded process could run atexit handlers and flush buffers;
//!   `_exit` is what a single-threaded C child effectively does).
//! * `fork-exec`: the child `execve`s `/bin/true` (lmbench runs its own small
//!   `/tmp/hello`; `perf bench syscall execve` also uses `/bin/true`), with an empty
//!   environment as lmbench's `execve(PROG, nav, 0)`.
//! * `fork-sh`: the child `execve`s `/bin/sh -c /bin/true`, lmbench's "shell" (it runs
//!   `sh -c /tmp/hello`): what `system(3)` costs. Environment `PATH=/usr/bin:/bin`.
//!   How many processes this is depends on the shell: dash and bash exec the last
//!   command of `-c` in place, so usually one fork and two execs.
//!
//! Fork time grows with the forking process's size, so every sample states it: the
//! metrics `forking_rss_bytes` (its `VmRSS`), `forking_anon_bytes` (its `RssAnon`, the
//! pages whose page-table entries a fork copies) and `forking_mappings` (its mappings),
//! read from its own `/proc/self` after the timed loop. `grow_mb=N` makes the forking
//! process hold N MiB more of touched memory, to match another tool's process (lmbench's
//! `lat_proc` forks a process larger than the lean measurement process).
//!
//! A missing `/bin/true` or `/bin/sh` is an `Unsupported` error at prepare time; we do not
//! substitute another program, since the figure depends on what is executed.
//!
//! Placement: the measuring thread runs pinned to the placement's first CPU, so a child
//! inherits that pinning at `fork` (the mask is copied with the thread). On a placement
//! with a second CPU the child's first act is to pin itself there (a raw
//! `sched_setaffinity` prepared before the fork), as the pipe benchmark's child, so
//! `1c1t` measures parent and child sharing one CPU and `1c2t` / `2c1t` a child on the
//! sibling / on another core; that move is part of the measured time, as the kernel's
//! own fork balancing would move an unpinned child. The last child of each sample writes
//! the CPU it runs on into a page shared with the parent; the sample fails if it is not
//! the intended CPU, and reports it as the second entry of [`RawSample::cpus`].
//!
//! The time includes the parent's `wait4` wake-up; [`RawSample::cpu_ns`] adds every
//! child's CPU time (from `wait4`'s rusage) to the parent's. Fork time grows with the
//! parent's address space, which is why the catalog forks from a small single-threaded
//! measurement process ([`super::lean`]), not from smtlab's own. Children run only
//! async-signal-safe code before `execve`/`_exit`.

use std::ffi::{CStr, CString};
use std::sync::atomic::Ordering;

use super::child::{self, ChildPin, Mailbox};
use super::{Cpus, info, time_loop};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_model::BenchInfo;

const TRUE: &str = "/bin/true";
/// The parameter that grows the forking process.
const GROW_MB: &str = "grow_mb";
/// The most `grow_mb` takes: more would measure the copy of page tables alone.
const MAX_GROW_MB: u64 = 65_536;
const PAGE_BYTES: usize = 4096;
const SH: &str = "/bin/sh";

smtlab_model::named_enum! {
    enum Kind {
        Exit = "fork-exit",
        Exec = "fork-exec",
        Shell = "fork-sh",
    }
}

pub(super) fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    crate::boxed(Kind::ALL.map(|kind| Fork { kind }))
}

struct Fork {
    kind: Kind,
}

impl Benchmark for Fork {
    fn info(&self) -> BenchInfo {
        let (description, origin) = match self.kind {
            Kind::Exit => (
                "fork(2) of a child that exits at once, and waiting for it",
                "lmbench lat_proc fork",
            ),
            Kind::Exec => (
                "fork(2) of a child that execve(2)s /bin/true, and waiting for it",
                "lmbench lat_proc exec",
            ),
            Kind::Shell => (
                "fork(2) of a child that runs /bin/sh -c /bin/true, and waiting for it",
                "lmbench lat_proc shell",
            ),
        };
        let grow = crate::params::declare(
            GROW_MB,
            "0",
            None,
            "MiB of touched memory the forking process holds on top of its own (fork copies \
             its page tables): match another tool's process size",
        );
        info(self.kind.name(), description, origin, vec![grow])
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        Ok(Box::new(self.instance(ctx)?))
    }
}

fn executable(bench: &str, path: &str) -> Result<CString, BenchError> {
    let c = CString::new(path).expect("program paths are constants without NUL");
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return Err(BenchError::unsupported(
            bench,
            format!(
                "{path} is not an executable file here ({}); the benchmark runs exactly that \
                 program",
                std::io::Error::last_os_error()
            ),
        ));
    }
    Ok(c)
}

impl Fork {
    fn instance(&self, ctx: &BenchContext<'_>) -> Result<ForkInstance, BenchError> {
        let name = self.kind.name();
        child::check_children_reapable(name)?;
        let program = match self.kind {
            Kind::Exit => None,
            Kind::Exec => {
                let t = executable(name, TRUE)?;
                Some(Program {
                    path: t.clone(),
                    argv: vec![t],
                    envp: vec![],
                })
            }
            Kind::Shell => {
                let sh = executable(name, SH)?;
                executable(name, TRUE)?;
                let arg = |s: &str| CString::new(s).expect("constant without NUL");
                Some(Program {
                    path: sh,
                    argv: vec![arg("sh"), arg("-c"), arg(TRUE)],
                    envp: vec![arg("PATH=/usr/bin:/bin")],
                })
            }
        };
        let grow_mb = ctx
            .params
            .get_u64_in(GROW_MB, 0..=MAX_GROW_MB, "MiB from 0 to 65536")?;
        // Touched page by page, so it is resident and its page tables exist to be copied.
        let mut grown = vec![0u8; grow_mb as usize * (1 << 20)];
        for page in grown.chunks_mut(PAGE_BYTES) {
            page[0] = 1;
        }
        let cpus = Cpus::of(ctx.placement);
        // With one CPU the child already inherits the right mask; re-pinning would only
        // add a system call.
        let pin = if cpus.child == cpus.parent {
            None
        } else {
            ChildPin::to(name, cpus.child)?
        };
        Ok(ForkInstance {
            kind: self.kind,
            cpus,
            pin,
            program,
            mailbox: Mailbox::new(name)?,
            last_pid: None,
            _grown: grown,
        })
    }
}

/// What a child executes, kept as owned strings; the pointer arrays `execve` needs are
/// built per sample (raw pointers would make the instance `!Send`).
struct Program {
    path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
}

fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

struct ForkInstance {
    kind: Kind,
    cpus: Cpus,
    pin: Option<ChildPin>,
    program: Option<Program>,
    mailbox: Mailbox,
    /// The most recent child, for tests that check it was reaped.
    last_pid: Option<libc::pid_t>,
    /// `grow_mb` of touched memory, held while the instance lives.
    _grown: Vec<u8>,
}

/// The forking process's size from its own `/proc/self`, as (metric, value) pairs; a
/// figure the kernel does not show is left out.
fn own_size() -> Vec<(&'static str, f64)> {
    use smtlab_model::metrics::fork;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let maps = std::fs::read_to_string("/proc/self/maps")
        .ok()
        .map(|m| m.lines().count() as f64);
    [
        (fork::FORKING_RSS_BYTES, status_bytes(&status, "VmRSS:")),
        (fork::FORKING_ANON_BYTES, status_bytes(&status, "RssAnon:")),
        (fork::FORKING_MAPPINGS, maps),
    ]
    .into_iter()
    .filter_map(|(metric, v)| Some((metric, v?)))
    .collect()
}

/// A `Key:    1234 kB` line of a status file, in bytes.
fn status_bytes(status: &str, key: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// A child's life: pin, report the CPU when asked (`report`, decided before the fork),
/// exec or exit. Async-signal-safe only. Inlined into the forking loop (see
/// `smtlab_control::fork::fork_with`: each code page a child runs costs it a fault).
#[inline(always)]
fn run_child(
    pin: Option<&ChildPin>,
    report: bool,
    mailbox: &child::MailboxData,
    exec: Option<(
        &CStr,
        *const *const libc::c_char,
        *const *const libc::c_char,
    )>,
) -> ! {
    if let Some(p) = pin
        && !p.apply()
    {
        child::child_exit(child::EXIT_PIN_FAILED);
    }
    if report {
        mailbox.cpu.store(child::raw_getcpu(), Ordering::Relaxed);
    }
    if let Some((path, argv, envp)) = exec {
        // SAFETY: NUL-terminated path and null-terminated pointer arrays built before
        // the fork; execve only returns on failure.
        unsafe { libc::execve(path.as_ptr(), argv, envp) };
        child::child_exit(child::EXIT_EXEC_FAILED);
    }
    child::child_exit(0)
}

impl Instance for ForkInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let name = self.kind.name();
        let argv = self.program.as_ref().map(|p| pointers(&p.argv));
        let envp = self.program.as_ref().map(|p| pointers(&p.envp));
        let exec = match (&self.program, &argv, &envp) {
            (Some(p), Some(a), Some(e)) => Some((p.path.as_c_str(), a.as_ptr(), e.as_ptr())),
            _ => None,
        };
        let program = self.program.as_ref().map_or("", |_| match self.kind {
            Kind::Shell => "/bin/sh -c /bin/true",
            _ => TRUE,
        });
        let mailbox = self.mailbox.get();
        mailbox.cpu.store(-1, Ordering::Relaxed);
        let pin = self.pin.as_ref();
        let mut left = iterations;
        let mut children_cpu_ns = 0u64;
        let mut last_pid = None;

        let result = time_loop(self.cpus.parent, iterations, || {
            left -= 1;
            let report = left == 0;
            // SAFETY: run_child only makes raw system calls, atomic stores to the shared
            // page, execve with arrays built above, and _exit.
            let pid = unsafe { child::fork_with(|| run_child(pin, report, mailbox, exec)) }
                .map_err(|e| BenchError::io(name, "fork", e))?;
            last_pid = Some(pid);
            let exit = child::wait_child(pid)
                .map_err(|e| BenchError::io(name, format!("wait for child {pid}"), e))?;
            children_cpu_ns += exit.cpu_ns;
            match exit.code() {
                Some(0) => Ok(()),
                Some(child::EXIT_PIN_FAILED) => Err(BenchError::check(
                    name,
                    format!(
                        "child {pid} could not pin itself to CPU {}",
                        pin.map_or(0, |p| p.cpu())
                    ),
                )),
                Some(child::EXIT_EXEC_FAILED) if !program.is_empty() => Err(BenchError::check(
                    name,
                    format!("child {pid} could not execute {program}"),
                )),
                _ => Err(BenchError::check(
                    name,
                    format!("child {pid} ended with {}", exit.describe()),
                )),
            }
        });
        self.last_pid = last_pid;
        let mut s = result?;
        if let Some(cpu) = s.cpu_ns.as_mut() {
            *cpu += children_cpu_ns;
        }
        if iterations > 0 {
            let reported = mailbox.cpu.load(Ordering::Relaxed);
            let Ok(child_cpu) = u32::try_from(reported) else {
                return Err(BenchError::check(
                    name,
                    "the last child did not report its CPU",
                ));
            };
            let expected = self.pin.as_ref().map(|p| p.cpu()).or(self.cpus.parent);
            if let Some(want) = expected
                && child_cpu != want
            {
                return Err(BenchError::check(
                    name,
                    format!("a child ran on CPU {child_cpu}, not on CPU {want} as placed"),
                ));
            }
            s.cpus.push(child_cpu);
        }
        for (metric, v) in own_size() {
            s.metrics.insert(metric.into(), v);
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::testutil;

    fn check(kind: Kind, cpus: &[u32]) {
        let b = Fork { kind };
        let mut inst = testutil::with_ctx(&b.info(), cpus, |ctx| b.instance(ctx).unwrap());
        let s = inst.sample(2).unwrap();
        assert_eq!(s.work, 2.0);
        assert!(s.elapsed_ns > 0, "{s:?}");
        let want_child = *cpus.get(1).unwrap_or(&cpus[0]);
        assert_eq!(s.cpus, vec![cpus[0], want_child], "{}", kind.name());
        let pid = inst.last_pid.unwrap();
        assert!(
            testutil::reaped(pid),
            "{}: child {pid} left unreaped",
            kind.name()
        );
    }

    #[test]
    fn children_run_on_the_second_cpu_and_are_reaped() {
        if !testutil::have_two_cpus() {
            return;
        }
        for kind in [Kind::Exit, Kind::Exec, Kind::Shell] {
            check(kind, &[0, 1]);
        }
    }

    /// Every sample states the forking process's size, and `grow_mb` grows it by
    /// about that much resident memory.
    #[test]
    fn samples_state_the_forking_process_size_and_grow_mb_grows_it() {
        let b = Fork { kind: Kind::Exit };
        let rss = |grow: &str| {
            let mut info = b.info();
            for p in &mut info.params {
                if p.name == GROW_MB {
                    p.default = grow.into();
                }
            }
            let mut inst = testutil::with_ctx(&info, &[0], |ctx| b.instance(ctx).unwrap());
            let s = inst.sample(2).unwrap();
            use smtlab_model::metrics::fork;
            assert!(s.metrics[fork::FORKING_MAPPINGS] > 1.0);
            let anon = s.metrics[fork::FORKING_ANON_BYTES];
            assert!(anon > 0.0 && anon <= s.metrics[fork::FORKING_RSS_BYTES]);
            s.metrics[fork::FORKING_RSS_BYTES]
        };
        let small = rss("0");
        let grown = rss("64");
        assert!(small > 0.0);
        assert!(
            grown - small > 48.0 * (1 << 20) as f64,
            "{small} -> {grown} bytes"
        );
        let status = "Name: x\nVmRSS:\t  1500 kB\nRssAnon:\t 100 kB\n";
        assert_eq!(status_bytes(status, "VmRSS:"), Some(1_536_000.0));
        assert_eq!(status_bytes(status, "RssAnon:"), Some(102_400.0));
        assert_eq!(status_bytes("Name: x\n", "VmRSS:"), None);
    }

    #[test]
    fn one_cpu_children_inherit_the_parents_cpu() {
        check(Kind::Exit, &[0]);
    }

    #[test]
    fn programs_are_checked_before_running() {
        let e = executable("fork-exec", "/nonexistent/true")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/true") && e.contains("fork-exec"),
            "{e}"
        );
    }
}
