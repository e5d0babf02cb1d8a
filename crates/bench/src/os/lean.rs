//! Lean measurement processes: every os benchmark of the catalog measures in a process
//! of its own whose only thread is the measuring one, as lmbench's processes are.
//!
//! Why: Linux takes a slower path for descriptor system calls when the descriptor table
//! is shared by several threads (`read` and `write` of one byte cost 1.3-1.5x a
//! single-threaded process's on the same CPU), and `fork` costs more the larger the
//! parent's address space. A cell measured on its own thread of the multi-threaded
//! smtlab process would report those costs instead of the kernel's usual ones.
//!
//! How: [`Benchmark::prepare`] of a catalog os benchmark starts [`program`] with the
//! single argument [`CHILD_ARG`]; that program calls [`child_main`] before doing anything
//! else. smtlab registers [`CHILD_PROGRAM`] from beside its own executable (a small
//! binary of the smtlab package that links only the benchmarks), or itself when that is
//! missing ([`set_program_beside`]; the fork rows then say they read high, since the
//! whole smtlab binary's relocated data alone adds about 90 pages that every fork copies).
//! Other callers register a program with [`set_program`]. The parent
//! side sends the benchmark's name, parameters, placement and topology, the child runs
//! the very same `prepare` and then every [`Instance::sample`] it is asked for, and sends
//! each [`RawSample`] back. The requests are one JSON line each on the child's standard
//! input, the replies one JSON line each on its standard output; the child moves both
//! off descriptors 0 and 1 (close-on-exec) so that its own children never hold them.
//!
//! * Placement: the parent pins the child to the placement's first CPU before `prepare`,
//!   so `prepare` (and the pipe and fork children it starts) happen where the
//!   measurement does; the benchmark code then pins as it always does (a no-op there).
//! * Lifetime: the child gets `PR_SET_PDEATHSIG(SIGKILL)`, so it dies with the thread that
//!   started it (the cell's thread); dropping the instance closes its input, which ends
//!   the child cleanly (its own children reaped, temporary files removed), and kills and
//!   reaps it if it has not exited within [`EXIT_GRACE`].
//! * Failure: a child that exits or is killed gives one [`BenchError::Io`] naming the
//!   benchmark, the child's pid, how it ended and the last line it wrote to its standard
//!   error (a panic message, say), never a hang.
//! * Counters: the child is started by the cell's thread after the session opened its
//!   counters and syscall tracepoints with `inherit`, so both follow it. Its figures
//!   include the few system calls of one request and one reply per sample.
//! * Check: every sample carries the metric [`THREADS_METRIC`], the number of threads of
//!   the measuring process read just before and just after the sample (the larger), which
//!   tests assert is 1.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use smtlab_model::{BenchInfo, ResolvedPlacement, Topology};
use smtlab_placement::pin;

use crate::{
    BenchContext, BenchError, Benchmark, Instance, ParamError, Params, RawSample, Suite, SweepCell,
};

/// First (and only) argument that makes a binary run [`child_main`].
pub const CHILD_ARG: &str = "__os-child";

/// Metric of every os sample: threads of the measuring process around the timed loop.
pub const THREADS_METRIC: &str = "measuring_process_threads";

/// How long a child may take to end cleanly once its input is closed.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);

/// The small measurement program the smtlab package installs beside `smtlab`.
pub const CHILD_PROGRAM: &str = "smtlab-os-child";

/// The registered program and whether it is a small one (not the whole smtlab binary).
static PROGRAM: OnceLock<(PathBuf, bool)> = OnceLock::new();

/// Registers a small program that runs [`child_main`] when given [`CHILD_ARG`] (such as
/// [`CHILD_PROGRAM`], or this crate's `smtlab-bench-os-child`). The first registration
/// wins; returns whether this one did.
pub fn set_program(path: impl Into<PathBuf>) -> bool {
    PROGRAM.set((path.into(), true)).is_ok()
}

/// Registers the measurement program for the executable `exe` (smtlab at start):
/// [`CHILD_PROGRAM`] beside it when there is one, else `exe` itself, which must then run
/// [`child_main`] when given [`CHILD_ARG`]. Returns the program registered.
pub fn set_program_beside(exe: &Path) -> &'static Path {
    PROGRAM.get_or_init(|| program_beside(exe)).0.as_path()
}

/// [`CHILD_PROGRAM`] beside `exe` and `true`, or `exe` and `false` when there is none.
fn program_beside(exe: &Path) -> (PathBuf, bool) {
    let small = exe.with_file_name(CHILD_PROGRAM);
    if is_executable(&small) {
        (small, true)
    } else {
        (exe.to_path_buf(), false)
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The registered measurement program, if any.
pub fn program() -> Option<&'static Path> {
    PROGRAM.get().map(|p| p.0.as_path())
}

/// Why the fork rows read high when the measurement program is the whole smtlab binary.
pub const LARGE_PROGRAM_NOTE: &str = "measured from the smtlab binary itself because \
     smtlab-os-child is not installed beside it: fork copies its larger address space \
     (fork-exit reads 10-15% higher than from the small program)";

/// Why an os benchmark cannot be prepared without a registered program.
pub const NO_PROGRAM: &str = "os benchmarks measure in a lean child process, and no program \
     to start it from was registered (smtlab_bench::os::lean::set_program)";

/// Whether the process arguments ask for the child side ([`CHILD_ARG`] first).
pub fn is_child_invocation() -> bool {
    std::env::args_os().nth(1).as_deref() == Some(OsStr::new(CHILD_ARG))
}

/// A catalog os benchmark: the in-process benchmark, measured in a lean child.
pub(super) struct Lean {
    pub(super) inner: Box<dyn Benchmark>,
}

impl Benchmark for Lean {
    fn info(&self) -> BenchInfo {
        self.inner.info()
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let bench = self.inner.info().name;
        let Some(program) = program() else {
            return Err(BenchError::unsupported(bench, NO_PROGRAM));
        };
        Ok(Box::new(LeanInstance::start(program, &bench, ctx)?))
    }

    fn client_side(&self) -> bool {
        self.inner.client_side()
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = self.inner.notes();
        let name = self.inner.info().name;
        if name.starts_with("fork-") && PROGRAM.get().is_some_and(|p| !p.1) {
            notes.push(format!("{name}: {LARGE_PROGRAM_NOTE}"));
        }
        notes
    }

    fn in_suite(&self, suite: Suite) -> bool {
        self.inner.in_suite(suite)
    }

    fn sweep(&self, suite: Suite, topo: &Topology) -> Vec<SweepCell> {
        self.inner.sweep(suite, topo)
    }
}

/// Parent to child, one JSON line each.
#[derive(Debug, Serialize, Deserialize)]
enum Request {
    Prepare {
        bench: String,
        params: Vec<(String, String)>,
        placement: Box<ResolvedPlacement>,
        topology: Box<Topology>,
    },
    Sample {
        iterations: u64,
    },
}

/// Child to parent, one JSON line per request.
#[derive(Debug, Serialize, Deserialize)]
enum Reply {
    Ready,
    Sampled(RawSample),
    Failed(WireError),
}

/// A [`BenchError`] that crosses the pipe and comes back as the same kind where it can.
#[derive(Debug, Serialize, Deserialize)]
enum WireError {
    Param {
        name: String,
        value: String,
        expected: String,
    },
    Unsupported {
        bench: String,
        reason: String,
    },
    Io {
        bench: String,
        what: String,
        errno: Option<i32>,
        message: String,
    },
    Check {
        bench: String,
        reason: String,
    },
    /// Anything else (a pinning error, another parameter error), as its text.
    Other {
        text: String,
    },
}

impl WireError {
    fn of(e: &BenchError) -> WireError {
        match e {
            BenchError::Param(ParamError::Value {
                name,
                value,
                expected,
            }) => WireError::Param {
                name: name.clone(),
                value: value.clone(),
                expected: expected.clone(),
            },
            BenchError::Unsupported { bench, reason } => WireError::Unsupported {
                bench: bench.clone(),
                reason: reason.clone(),
            },
            BenchError::Io {
                bench,
                what,
                error: source,
            } => WireError::Io {
                bench: bench.clone(),
                what: what.clone(),
                errno: source.raw_os_error(),
                message: source.to_string(),
            },
            BenchError::Check { bench, reason } => WireError::Check {
                bench: bench.clone(),
                reason: reason.clone(),
            },
            other => WireError::Other {
                text: other.to_string(),
            },
        }
    }

    fn into_error(self, bench: &str) -> BenchError {
        match self {
            WireError::Param {
                name,
                value,
                expected,
            } => ParamError::value(name, value, expected).into(),
            WireError::Unsupported { bench, reason } => BenchError::unsupported(bench, reason),
            WireError::Io {
                bench,
                what,
                errno,
                message,
            } => BenchError::io(
                bench,
                what,
                match errno {
                    Some(n) => std::io::Error::from_raw_os_error(n),
                    None => std::io::Error::other(message),
                },
            ),
            WireError::Check { bench, reason } => BenchError::check(bench, reason),
            WireError::Other { text } => BenchError::io(
                bench,
                "in the measurement process",
                std::io::Error::other(text),
            ),
        }
    }
}

/// The parent's side of one lean child: an [`Instance`] that forwards every sample.
pub struct LeanInstance {
    bench: String,
    child: Child,
    to_child: Option<ChildStdin>,
    from_child: BufReader<ChildStdout>,
    stderr: Option<ChildStderr>,
}

impl LeanInstance {
    /// Starts `program` as a lean child for catalog os benchmark `bench` and prepares it
    /// there with `ctx`.
    pub fn start(
        program: &Path,
        bench: &str,
        ctx: &BenchContext<'_>,
    ) -> Result<LeanInstance, BenchError> {
        let mut cmd = Command::new(program);
        cmd.arg(CHILD_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group: a Ctrl-C or `timeout` signals smtlab's group, and a
        // child dying of it before smtlab's stop flag is set would be recorded as a
        // failed cell, not a stopped one (and never resumed). smtlab ends it on a stop,
        // the death signal if smtlab dies.
        crate::process::tie_measuring_process(&mut cmd);
        let mut child = cmd.spawn().map_err(BenchError::at_path(
            bench,
            "start the measurement process",
            program,
        ))?;
        let (Some(to_child), Some(from_child), stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(BenchError::check(
                bench,
                "the measurement process has no pipes",
            ));
        };
        let mut inst = LeanInstance {
            bench: bench.into(),
            child,
            to_child: Some(to_child),
            from_child: BufReader::new(from_child),
            stderr,
        };
        if let Some(cpu) = super::Cpus::of(ctx.placement).parent {
            let pid = inst.pid();
            pin::set_affinity(pid, &std::iter::once(cpu).collect())?;
        }
        let request = Request::Prepare {
            bench: bench.into(),
            params: ctx
                .params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            placement: Box::new(ctx.placement.clone()),
            topology: Box::new(ctx.topology.clone()),
        };
        match inst.call(&request)? {
            Reply::Ready => Ok(inst),
            Reply::Failed(e) => Err(e.into_error(bench)),
            Reply::Sampled(_) => Err(inst.protocol_error("a sample in answer to prepare")),
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> libc::pid_t {
        self.child.id() as libc::pid_t
    }

    /// Sends one request and reads its reply; a child that is gone is an error naming it.
    fn call(&mut self, request: &Request) -> Result<Reply, BenchError> {
        let mut line = serde_json::to_string(request)
            .map_err(|e| self.protocol_error(&format!("a request it cannot encode ({e})")))?;
        line.push('\n');
        let sent = match self.to_child.as_mut() {
            Some(w) => w.write_all(line.as_bytes()).and_then(|()| w.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if sent.is_err() {
            return Err(self.gone());
        }
        let mut answer = String::new();
        match self.from_child.read_line(&mut answer) {
            Ok(0) | Err(_) => return Err(self.gone()),
            Ok(_) => {}
        }
        serde_json::from_str(&answer).map_err(|e| {
            self.protocol_error(&format!("an unreadable reply ({e}): {}", answer.trim_end()))
        })
    }

    fn protocol_error(&self, what: &str) -> BenchError {
        BenchError::check(
            self.bench.clone(),
            format!("the measurement process (pid {}) sent {what}", self.pid()),
        )
    }

    /// The error for a child that stopped answering: reaps it (killing it after
    /// [`EXIT_GRACE`]) and says how it ended, with the last line of its standard error.
    fn gone(&mut self) -> BenchError {
        self.to_child.take();
        let pid = self.pid();
        let how = match wait_bounded(&mut self.child, EXIT_GRACE) {
            Ok(status) => describe(status),
            Err(e) => format!("cannot be waited for ({e})"),
        };
        let last = self.stderr.take().and_then(last_line);
        let detail = last.map(|l| format!(" ({l})")).unwrap_or_default();
        BenchError::io(
            self.bench.clone(),
            format!("the measurement process (pid {pid}) stopped answering"),
            std::io::Error::other(format!("it {how}{detail}")),
        )
    }
}

impl Instance for LeanInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        match self.call(&Request::Sample { iterations })? {
            Reply::Sampled(s) => Ok(s),
            Reply::Failed(e) => Err(e.into_error(&self.bench)),
            Reply::Ready => Err(self.protocol_error("\"ready\" in answer to a sample")),
        }
    }
}

impl Drop for LeanInstance {
    fn drop(&mut self) {
        // End of input lets the child drop its instance (reaping its own children and
        // removing its files); one that does not end in time is killed.
        self.to_child.take();
        let _ = wait_bounded(&mut self.child, EXIT_GRACE);
    }
}

/// Waits for `child` up to `grace`, then kills it and waits; always reaps.
fn wait_bounded(child: &mut Child, grace: Duration) -> std::io::Result<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if start.elapsed() >= grace {
            let _ = child.kill();
            return child.wait();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => format!("ended with {status}"),
    }
}

/// The last non-empty line the (dead) child wrote to its standard error, read without
/// waiting: a grandchild may still hold the pipe open.
fn last_line(stderr: ChildStderr) -> Option<String> {
    let fd = stderr.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own; only adds O_NONBLOCK.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let mut text = Vec::new();
    let _ = stderr.take(64 * 1024).read_to_end(&mut text);
    String::from_utf8_lossy(&text)
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// Number of threads of the calling process (entries of `/proc/self/task`).
pub fn threads_of_this_process() -> Option<u64> {
    std::fs::read_dir("/proc/self/task")
        .ok()
        .map(|d| d.count() as u64)
}

/// The child side: serves requests on standard input until end of file and returns the
/// process exit status (0 after a clean end). Call it first thing in `main` of a binary
/// started with [`CHILD_ARG`], before starting any thread.
pub fn child_main() -> u8 {
    let Some((input, mut output)) = protocol_fds() else {
        return 2;
    };
    let mut input = BufReader::new(std::fs::File::from(input));
    let mut instance: Option<Box<dyn Instance>> = None;
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => return 3,
        }
        let reply = match serde_json::from_str::<Request>(&line) {
            Ok(Request::Prepare {
                bench,
                params,
                placement,
                topology,
            }) => {
                instance = None;
                match prepare(&bench, params, &placement, &topology) {
                    Ok(i) => {
                        instance = Some(i);
                        Reply::Ready
                    }
                    Err(e) => Reply::Failed(WireError::of(&e)),
                }
            }
            Ok(Request::Sample { iterations }) => match instance.as_mut() {
                Some(inst) => sample(inst.as_mut(), iterations),
                None => Reply::Failed(WireError::Other {
                    text: "asked for a sample before prepare".into(),
                }),
            },
            Err(e) => Reply::Failed(WireError::Other {
                text: format!("unreadable request ({e})"),
            }),
        };
        let Ok(mut text) = serde_json::to_string(&reply) else {
            return 4;
        };
        text.push('\n');
        if output.write_all(text.as_bytes()).is_err() || output.flush().is_err() {
            return 5;
        }
    }
    drop(instance);
    0
}

fn prepare(
    bench: &str,
    params: Vec<(String, String)>,
    placement: &ResolvedPlacement,
    topology: &Topology,
) -> Result<Box<dyn Instance>, BenchError> {
    let Some(b) = super::in_process_benchmarks()
        .into_iter()
        .find(|b| b.info().name == bench)
    else {
        return Err(BenchError::unsupported(
            bench,
            "not an os benchmark this measurement process knows",
        ));
    };
    let params = Params::from_pairs(params);
    b.prepare(&BenchContext {
        params: &params,
        placement,
        topology,
        client: None,
    })
}

fn sample(inst: &mut dyn Instance, iterations: u64) -> Reply {
    let before = threads_of_this_process();
    let r = inst.sample(iterations);
    let after = threads_of_this_process();
    match r {
        Ok(mut s) => {
            if let Some(n) = before.max(after) {
                s.metrics.insert(THREADS_METRIC.into(), n as f64);
            }
            Reply::Sampled(s)
        }
        Err(e) => Reply::Failed(WireError::of(&e)),
    }
}

/// Moves the protocol off descriptors 0 and 1 to close-on-exec descriptors above 2 and
/// puts `/dev/null` in their place, so children of the benchmarks (which keep 0-2) never
/// hold the pipes to the parent.
fn protocol_fds() -> Option<(OwnedFd, std::fs::File)> {
    let dup = |fd: i32| -> Option<OwnedFd> {
        // SAFETY: duplicating a standard descriptor; the copy is owned below.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        // SAFETY: a fresh descriptor nobody else owns.
        (new >= 0).then(|| unsafe { OwnedFd::from_raw_fd(new) })
    };
    let input = dup(0)?;
    let output = dup(1)?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .ok()?;
    for fd in [0, 1] {
        // SAFETY: replacing a standard descriptor with /dev/null; both are open.
        if unsafe { libc::dup2(null.as_raw_fd(), fd) } < 0 {
            return None;
        }
    }
    Some((input, std::fs::File::from(output)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::testutil;

    #[test]
    fn without_a_program_prepare_says_so() {
        // The library's unit tests never register a program.
        if program().is_some() {
            return;
        }
        let b = Lean {
            inner: crate::os::in_process_benchmarks().remove(0),
        };
        let info = b.info();
        let e = testutil::with_ctx(&info, &[0], |ctx| b.prepare(ctx).err())
            .expect("prepare fails without a program")
            .to_string();
        assert!(
            e.contains("null-syscall") && e.contains("set_program"),
            "{e}"
        );
    }

    #[test]
    fn a_program_that_exits_is_an_error_naming_the_benchmark() {
        let b = crate::os::in_process_benchmarks().remove(1);
        let info = b.info();
        let e = testutil::with_ctx(&info, &[0], |ctx| {
            LeanInstance::start(Path::new("/bin/true"), "read", ctx).err()
        })
        .expect("a child that exits at once cannot be prepared")
        .to_string();
        assert!(
            e.starts_with("read: the measurement process (pid ")
                && e.contains("exited with status 0"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_program_is_an_error_naming_it() {
        let b = crate::os::in_process_benchmarks().remove(0);
        let info = b.info();
        let e = testutil::with_ctx(&info, &[0], |ctx| {
            LeanInstance::start(Path::new("/nonexistent/smtlab"), "null-syscall", ctx).err()
        })
        .expect("no such program")
        .to_string();
        assert!(
            e.contains("null-syscall") && e.contains("/nonexistent/smtlab"),
            "{e}"
        );
    }

    #[test]
    fn errors_cross_the_pipe_as_the_same_kind() {
        let e = BenchError::unsupported("fork-exec", "no /bin/true");
        let wire: WireError =
            serde_json::from_str(&serde_json::to_string(&WireError::of(&e)).unwrap()).unwrap();
        assert!(matches!(
            wire.into_error("fork-exec"),
            BenchError::Unsupported { ref reason, .. } if reason == "no /bin/true"
        ));
        let e: BenchError = ParamError::value("fds", "0", "a count from 1 to 200").into();
        let back = WireError::of(&e).into_error("select-file");
        assert_eq!(back.to_string(), e.to_string());
        let e = BenchError::io(
            "read",
            "read 1 byte from /dev/zero",
            std::io::Error::from_raw_os_error(libc::EBADF),
        );
        assert_eq!(
            WireError::of(&e).into_error("read").to_string(),
            e.to_string()
        );
    }

    #[test]
    fn the_small_program_beside_the_executable_is_preferred() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("smtlab");
        std::fs::write(&exe, "").unwrap();
        assert_eq!(program_beside(&exe), (exe.clone(), false));
        let small = dir.path().join(CHILD_PROGRAM);
        std::fs::write(&small, "").unwrap();
        // Not executable yet: still the executable itself.
        assert_eq!(program_beside(&exe), (exe.clone(), false));
        std::fs::set_permissions(&small, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(program_beside(&exe), (small, true));
    }

    #[test]
    fn samples_cross_the_pipe_unchanged() {
        let mut s = RawSample {
            elapsed_ns: 123_456,
            work: 1000.0,
            overhead_ns: 17,
            cpu_ns: Some(120_000),
            cpus: vec![0, 1],
            ..RawSample::default()
        };
        s.metrics.insert("send_ns".into(), 81.25);
        let text = serde_json::to_string(&Reply::Sampled(s.clone())).unwrap();
        let Reply::Sampled(back) = serde_json::from_str(&text).unwrap() else {
            panic!("{text}")
        };
        assert_eq!(back, s);
    }
}
