//! The user's own command as a benchmark (`smtlab exec -- CMD ARGS`): one sample is one
//! run of the command, measured by the same engine as every other benchmark (fixed
//! samples of one iteration, warm-up runs discarded, counters around the measured runs).
//!
//! How a run is done:
//! * The command is pinned to the placement's CPUs between fork and exec
//!   (`CommandPinExt::pin_to`), leads its own process group and cgroup and dies with the
//!   thread that started it ([`ChildGroup`]). smtlab's guardian process kills its whole
//!   tree when smtlab ends in any way, `kill -9` included: `PR_SET_PDEATHSIG` alone
//!   reaches the command but not what it forked.
//! * While it runs, the measuring thread waits on the command's output pipe and on a
//!   pidfd, and every few milliseconds looks at every task of the command's process
//!   tree: its CPU affinity and the CPU it last ran on. A task outside the placement
//!   ends the run with an error naming the CPU it escaped to; so does the CPU each
//!   process last ran on, read once more when the command has exited (from its zombie).
//! * That watching thread runs on CPUs outside the placement when there are any; with
//!   `--counters` its few reads every 5 ms are counted with the command (it is the
//!   thread the counters follow).
//! * Wall time is from just before the spawn to the command's exit; CPU time is the
//!   `RUSAGE_CHILDREN` difference (the command and every descendant it waited for).
//! * When the command has exited, whatever is left of its tree is killed (a background
//!   job or a daemon must not run into the next run, nor outlive smtlab), and one line
//!   names what was killed (`smtlab_bench::process::take_notes`).
//! * Output (standard output and error, one pipe) is read as it comes: each line goes
//!   through the `--throughput` regex until it matches, and only the last few KiB are
//!   kept for error messages, so a command printing gigabytes costs no memory.
//! * `--timeout`: a run that lasts longer is killed with its group and is an error.
//!
//! The sample states its value itself ([`crate::value::OWN_VALUE`]): seconds of wall
//! time, or the number the command printed; its work is one run.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use regex::Regex;
use smtlab_bench::process::{ChildGroup, killed_line};
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_model::{BenchInfo, CpuSet, Direction, ValueKind};
use smtlab_placement::pin::CommandPinExt;

use crate::value::OWN_VALUE;

/// Unit of the value with a throughput regex: whatever the command prints, per second
/// by convention (higher is better).
pub const THROUGHPUT_UNIT: &str = "units/s";
/// Longest piece of the command's output quoted in an error.
const QUOTE_MAX: usize = 160;
/// Output kept for error messages (the end of it).
const TAIL_BYTES: usize = 8 * 1024;
/// An unfinished line longer than this (plus one read) is searched on its first part only.
const LINE_MAX: usize = 64 * 1024;
/// How often the command's tasks are checked for escapes from the placement.
const CHECK_EVERY: Duration = Duration::from_millis(5);

/// What is measured from each run.
#[derive(Debug, Clone)]
pub enum ExecValue {
    /// Wall time in seconds, lower is better.
    WallTime,
    /// The first capture group of the first match in the output, higher is better.
    Throughput(Regex),
}

/// The user's command as a [`Benchmark`].
#[derive(Debug, Clone)]
pub struct CommandBench {
    pub argv: Vec<String>,
    pub value: ExecValue,
    /// A run lasting longer is killed and fails the cell.
    pub timeout: Option<Duration>,
    /// Warm-up runs and measured runs per placement, for messages (`run 2 of 5`).
    pub warmup_runs: usize,
    pub reps: usize,
}

pub use smtlab_model::run::shell_join;

impl CommandBench {
    /// The parameters a cell of this command is stored with.
    pub fn params(&self) -> BTreeMap<String, String> {
        let mut params = BTreeMap::from([("command".to_string(), shell_join(&self.argv))]);
        if let ExecValue::Throughput(re) = &self.value {
            params.insert("throughput".into(), re.as_str().to_string());
        }
        params
    }
}

impl Benchmark for CommandBench {
    fn info(&self) -> BenchInfo {
        let (unit, direction) = match self.value {
            ExecValue::WallTime => ("s", Direction::Lower),
            ExecValue::Throughput(_) => (THROUGHPUT_UNIT, Direction::Higher),
        };
        BenchInfo {
            name: "exec".into(),
            group: "exec".into(),
            unit: unit.into(),
            direction,
            // The sample states its own value; the kind only decides that no CPU rate
            // is derived from it.
            value_kind: ValueKind::TimePerOp,
            description: format!("the command `{}`", shell_join(&self.argv)),
            origin: "user command".into(),
            params: Vec::new(),
            main_param: None,
            report: smtlab_model::ReportSection::Exec,
        }
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        // This thread reads the command's output and watches its tasks while it runs:
        // off the placement's CPUs when there are others, so it takes no time from it.
        if ctx.placement.pinned() {
            let topo = ctx.topology;
            let usable = match &topo.allowed_cpus {
                Some(a) => topo.cpus.intersection(a),
                None => topo.cpus.clone(),
            };
            let spare = usable.difference(&ctx.placement.cpu_set());
            if !spare.is_empty() {
                let _ = smtlab_placement::pin::pin_current_thread(&spare);
            }
        }
        Ok(Box::new(CommandInstance {
            bench: self.clone(),
            shown: shell_join(&self.argv),
            placement: ctx.placement.name.clone(),
            cpus: ctx.placement.pinned().then(|| ctx.placement.cpu_set()),
            runs: 0,
        }))
    }
}

struct CommandInstance {
    bench: CommandBench,
    shown: String,
    placement: String,
    /// `None` for an unpinned placement (`os`): nothing to pin or check.
    cpus: Option<CpuSet>,
    /// Runs started so far (warm-up included).
    runs: usize,
}

impl Instance for CommandInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let mut sample = RawSample::default();
        for _ in 0..iterations.max(1) {
            let run = self.run_once().map_err(|reason| BenchError::Unsupported {
                bench: "exec".into(),
                reason,
            })?;
            sample.elapsed_ns += run.elapsed_ns;
            sample.cpu_ns = match (sample.cpu_ns, run.cpu_ns) {
                (Some(a), Some(b)) => Some(a + b),
                (None, b) if sample.work == 0.0 => b,
                _ => None,
            };
            sample.work += 1.0;
            sample.metrics.insert(OWN_VALUE.into(), run.value);
        }
        Ok(sample)
    }

    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }
}

/// One run of the command.
struct Run {
    elapsed_ns: u64,
    cpu_ns: Option<u64>,
    value: f64,
}

/// Total user + system CPU time of the waited-for children of this process, in ns.
fn children_cpu_ns() -> Option<u64> {
    // SAFETY: rusage is plain data; getrusage only writes into it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage and a valid `who`.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return None;
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    Some(ns(ru.ru_utime) + ns(ru.ru_stime))
}

impl CommandInstance {
    /// Which run this is: `run 2 of 5`, `warm-up run 1 of 1`, `an extra run`.
    fn which(&self) -> String {
        let (w, r, k) = (self.bench.warmup_runs, self.bench.reps, self.runs);
        if k <= w {
            format!("warm-up run {k} of {w}")
        } else if k - w <= r {
            format!("run {} of {r}", k - w)
        } else {
            "an extra run after the measured ones".into()
        }
    }

    fn err(&self, what: impl std::fmt::Display) -> String {
        format!(
            "command `{}` {what} (placement {}, {})",
            self.shown,
            self.placement,
            self.which()
        )
    }

    fn run_once(&mut self) -> Result<Run, String> {
        self.runs += 1;
        let argv = &self.bench.argv;
        let (read_end, write_end) =
            pipe().map_err(|e| self.err(format!("cannot get a pipe: {e}")))?;
        let mut cmd = Command::new(&argv[0]);
        let write_err = write_end
            .try_clone()
            .map_err(|e| self.err(format!("cannot share the output pipe: {e}")))?;
        cmd.args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::from(write_end))
            .stderr(Stdio::from(write_err));
        if let Some(cpus) = &self.cpus {
            cmd.pin_to(cpus).map_err(|e| self.err(e))?;
        }
        let cpu0 = children_cpu_ns();
        let t0 = Instant::now();
        let spawned = ChildGroup::spawn(&mut cmd);
        // The parent's copies of the pipe's write end go, so the pipe ends with the
        // command's last writer.
        drop(cmd);
        let mut group = spawned.map_err(|e| self.spawn_error(e))?;
        let pid = group.id() as libc::pid_t;
        let mut output = Output::new(match &self.bench.value {
            ExecValue::Throughput(re) => Some(re.clone()),
            ExecValue::WallTime => None,
        });
        let outcome = self.wait(&mut group, pid, &read_end, &mut output, t0);
        let elapsed_ns = t0.elapsed().as_nanos() as u64;
        let status = match outcome {
            Ok(()) => group
                .child_mut()
                .wait()
                .map_err(|e| self.err(format!("cannot be waited for: {e}"))),
            Err(e) => Err(e),
        };
        // The last sweep: what is left of the tree goes now (said in one line: a
        // background job or daemon the command left), and the output still in the pipe
        // is read (without waiting for a writer that left the tree).
        let left = group.kill_rest();
        // Only a command that ended by itself left them; after a timeout or an escape
        // smtlab killed the tree itself, and the error says so.
        if status.is_ok()
            && let Some(line) = killed_line(&left, &format!("`{}` ({})", self.shown, self.which()))
        {
            smtlab_bench::process::note(line);
        }
        drop(group);
        output.drain(&read_end);
        let status = status?;
        let cpu_ns = children_cpu_ns()
            .zip(cpu0)
            .map(|(after, before)| after.saturating_sub(before));
        if !status.success() {
            use std::os::unix::process::ExitStatusExt;
            let how = match (status.code(), status.signal()) {
                (Some(code), _) => format!("exited with status {code}"),
                (None, Some(sig)) => format!("was killed by signal {sig}"),
                _ => format!("failed ({status})"),
            };
            return Err(format!("{}{}", self.err(how), output.last_line_text()));
        }
        let value = match &self.bench.value {
            ExecValue::WallTime => elapsed_ns as f64 / 1e9,
            ExecValue::Throughput(re) => output
                .value(re)
                .map_err(|e| format!("`{}` (placement {}): {e}", self.shown, self.placement))?,
        };
        Ok(Run {
            elapsed_ns,
            cpu_ns,
            value,
        })
    }

    /// Reads output, checks the tasks and the timeout until the command exits.
    fn wait(
        &self,
        group: &mut ChildGroup,
        pid: libc::pid_t,
        out: &OwnedFd,
        output: &mut Output,
        t0: Instant,
    ) -> Result<(), String> {
        let pidfd = pidfd_open(pid);
        let mut pipe_open = true;
        let mut next_check = Instant::now();
        let mut known: Vec<libc::pid_t> = vec![pid];
        loop {
            let now = Instant::now();
            if let Some(limit) = self.bench.timeout
                && now.duration_since(t0) > limit
            {
                let _ = group.signal(libc::SIGKILL);
                return Err(self.err(format!(
                    "ran longer than --timeout {} s and was killed",
                    limit.as_secs_f64()
                )));
            }
            if now >= next_check {
                if let Some(cpus) = &self.cpus {
                    tree(pid, &mut known);
                    if let Some(escape) = escaped(&known, cpus) {
                        let _ = group.signal(libc::SIGKILL);
                        return Err(self.escape_error(&escape, cpus));
                    }
                }
                next_check = now + CHECK_EVERY;
            }
            if exited(pid) {
                break;
            }
            let wait_ms = next_check
                .saturating_duration_since(Instant::now())
                .as_millis()
                .clamp(1, 5) as i32;
            let mut fds = Vec::with_capacity(2);
            if pipe_open {
                fds.push(libc::pollfd {
                    fd: out.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            if let Some(p) = &pidfd {
                fds.push(libc::pollfd {
                    fd: p.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            // SAFETY: `fds` is a valid array of pollfd of the given length.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms) };
            if pipe_open && fds[0].revents != 0 {
                pipe_open = output.read_some(out);
            }
        }
        // The leader has exited and is a zombie until reaped: the CPU it and the other
        // processes of its group last ran on is still there to check.
        if let Some(cpus) = &self.cpus {
            known.extend(smtlab_bench::process::group_pids(pid));
            if let Some(escape) = escaped(&known, cpus) {
                return Err(self.escape_error(&escape, cpus));
            }
        }
        Ok(())
    }

    fn escape_error(&self, e: &Escape, cpus: &CpuSet) -> String {
        let what = match &e.affinity {
            Some(a) => format!("moved task {} to CPUs {a}", e.tid),
            None => format!("ran task {} on CPU {}", e.tid, e.cpu),
        };
        format!(
            "command `{}` escaped placement {} (CPUs {cpus}) in {}: it {what}, so its time would not belong to the placement",
            self.shown,
            self.placement,
            self.which()
        )
    }

    fn spawn_error(&self, e: io::Error) -> String {
        let program = &self.bench.argv[0];
        match e.kind() {
            io::ErrorKind::NotFound => format!("command `{program}` not found"),
            io::ErrorKind::PermissionDenied => {
                format!("command `{program}` cannot be run: permission denied")
            }
            _ if e.raw_os_error() == Some(libc::EINVAL) => format!(
                "cannot pin `{}` to the CPUs of placement {}: the kernel applied another CPU set",
                self.shown, self.placement
            ),
            _ => format!("cannot start `{}`: {e}", self.shown),
        }
    }
}

/// A pipe whose ends are closed on exec; the read end does not block.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two new descriptors that nothing else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The command's end blocks as usual.
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(w.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(w.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    Ok((r, w))
}

/// A descriptor that becomes readable when `pid` exits (Linux 5.3+), else `None` and the
/// wait falls back to polling.
fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative result is a new descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether `pid` (our child) has exited, leaving it unreaped.
fn exited(pid: libc::pid_t) -> bool {
    // SAFETY: siginfo_t is plain data; waitid only writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer; WNOWAIT leaves the child to be reaped later.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: after a successful waitid the pid field is set (0 when nothing exited).
    r == 0 && unsafe { info.si_pid() } != 0
}

/// Adds the descendants of `root` not yet in `known` (through `/proc/*/task/*/children`).
fn tree(root: libc::pid_t, known: &mut Vec<libc::pid_t>) {
    let mut i = 0;
    if !known.contains(&root) {
        known.push(root);
    }
    while i < known.len() {
        let pid = known[i];
        i += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(children) = std::fs::read_to_string(t.path().join("children")) else {
                continue;
            };
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !known.contains(&c) {
                    known.push(c);
                }
            }
        }
        if known.len() > 4096 {
            break;
        }
    }
}

/// Field `n` (1-based, as in proc(5)) of a `stat` line; the command name in parentheses
/// may contain spaces, so fields are counted after its closing parenthesis.
fn stat_field(stat: &str, n: usize) -> Option<i64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// A task seen outside the placement.
struct Escape {
    tid: libc::pid_t,
    /// The CPU it last ran on.
    cpu: u32,
    /// Its affinity, when that is what left the placement.
    affinity: Option<CpuSet>,
}

/// The first task of `pids` whose affinity is not within `cpus` or that last ran on a
/// CPU outside them.
fn escaped(pids: &[libc::pid_t], cpus: &CpuSet) -> Option<Escape> {
    for &pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
                continue;
            };
            let Some(cpu) = stat_field(&stat, 39).map(|c| c as u32) else {
                continue;
            };
            if let Ok(status) = std::fs::read_to_string(t.path().join("status"))
                && let Some(list) = status
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                && let Ok(allowed) = CpuSet::parse_list(list.trim())
                && !allowed.is_subset(cpus)
            {
                return Some(Escape {
                    tid,
                    cpu,
                    affinity: Some(allowed),
                });
            }
            if !cpus.contains(cpu) {
                return Some(Escape {
                    tid,
                    cpu,
                    affinity: None,
                });
            }
        }
    }
    None
}

/// The command's output as it streams by: the regex's first match and the tail.
struct Output {
    re: Option<Regex>,
    line: Vec<u8>,
    matched: Option<Result<f64, String>>,
    tail: Vec<u8>,
    bytes: u64,
}

impl Output {
    fn new(re: Option<Regex>) -> Output {
        Output {
            re,
            line: Vec::new(),
            matched: None,
            tail: Vec::new(),
            bytes: 0,
        }
    }

    /// Reads what the pipe holds now; `false` once it is closed.
    fn read_some(&mut self, fd: &OwnedFd) -> bool {
        let mut buf = [0u8; 64 * 1024];
        loop {
            // SAFETY: reading into a buffer of the given length from a descriptor we own.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                self.feed(&buf[..n as usize]);
                continue;
            }
            if n == 0 {
                self.end_line();
                return false;
            }
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return e.kind() == io::ErrorKind::WouldBlock;
        }
    }

    /// Reads what is left without waiting for writers that are still around.
    fn drain(&mut self, fd: &OwnedFd) {
        let _ = self.read_some(fd);
        self.end_line();
    }

    fn feed(&mut self, data: &[u8]) {
        self.bytes += data.len() as u64;
        if data.len() >= TAIL_BYTES {
            self.tail.clear();
            self.tail
                .extend_from_slice(&data[data.len() - TAIL_BYTES..]);
        } else {
            self.tail.extend_from_slice(data);
            if self.tail.len() > 2 * TAIL_BYTES {
                self.tail.drain(..self.tail.len() - TAIL_BYTES);
            }
        }
        if self.re.is_none() || self.matched.is_some() {
            return;
        }
        // A line ends at LF or CR (a progress bar redraws itself after CRs, and the
        // value may follow it on the same terminal line). The pending line ends at the
        // first terminator; the complete lines after it are searched a chunk at a time
        // (one search per read, not per line), never cut by what came before; the
        // unfinished last line waits for the rest of it.
        let ends = |b: &u8| *b == b'\n' || *b == b'\r';
        let (Some(first), Some(last)) = (data.iter().position(ends), data.iter().rposition(ends))
        else {
            self.push_line(data);
            return;
        };
        self.push_line(&data[..first]);
        self.end_line();
        if self.matched.is_none() && last > first {
            self.line.extend_from_slice(&data[first + 1..last]);
            self.end_line();
        }
        if self.matched.is_none() {
            self.push_line(&data[last + 1..]);
        }
    }

    /// Adds to the text waiting to be searched; an endless line is searched on its
    /// first `LINE_MAX` bytes only.
    fn push_line(&mut self, part: &[u8]) {
        let room = (LINE_MAX + 64 * 1024).saturating_sub(self.line.len());
        self.line.extend_from_slice(&part[..part.len().min(room)]);
    }

    /// Searches the text waiting to be searched.
    fn end_line(&mut self) {
        if let (Some(re), None) = (&self.re, &self.matched)
            && !self.line.is_empty()
        {
            // CRs as line ends, so no match runs across a progress bar's redraws.
            let text = String::from_utf8_lossy(&self.line).replace('\r', "\n");
            if let Some(caps) = re.captures(&text) {
                self.matched = Some(captured(re, &caps));
            }
        }
        self.line.clear();
    }

    /// The last non-empty line, shortened, for error messages.
    fn last_line(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.tail);
        let line = text.lines().rev().find(|l| !l.trim().is_empty())?.trim();
        let mut s: String = line.chars().take(QUOTE_MAX).collect();
        if line.chars().count() > QUOTE_MAX {
            s.push_str("...");
        }
        Some(s)
    }

    fn last_line_text(&self) -> String {
        match self.last_line() {
            Some(l) => format!("; its last output line: {l:?}"),
            None => String::new(),
        }
    }

    /// The throughput the command printed, or why there is none.
    fn value(&self, re: &Regex) -> Result<f64, String> {
        match &self.matched {
            Some(r) => r.clone(),
            None => {
                let tail = match self.last_line() {
                    Some(l) => format!("; its last output line: {l:?}"),
                    None => "; it printed nothing".into(),
                };
                Err(format!(
                    "--throughput {:?} did not match the output{tail}",
                    re.as_str()
                ))
            }
        }
    }
}

fn captured(re: &Regex, caps: &regex::Captures<'_>) -> Result<f64, String> {
    let Some(m) = caps.get(1) else {
        return Err(format!(
            "--throughput {:?} matched but its first capture group did not take part in the match",
            re.as_str()
        ));
    };
    let text = m.as_str().trim();
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        // A rate of zero or less has no speed-up: a yield or verdict from it is nonsense.
        Ok(x) if x.is_finite() => Err(format!(
            "--throughput {:?} captured {text:?}: a throughput must be above 0 \
             (no yield or verdict comes from {x})",
            re.as_str()
        )),
        _ => Err(format!(
            "--throughput {:?} captured {text:?}, which is not a number",
            re.as_str()
        )),
    }
}

/// Reads a whole stream (used by tests of the output handling).
#[cfg(test)]
fn feed_all(output: &mut Output, mut r: impl std::io::Read) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        output.feed(&buf[..n]);
    }
    output.end_line();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_takes_the_first_group_of_the_first_match() {
        let re = Regex::new(r"ops/s: ([0-9.]+)").unwrap();
        let mut o = Output::new(Some(re.clone()));
        feed_all(&mut o, &b"warming\nops/s: 1234.5\nops/s: 9\n"[..]);
        assert_eq!(o.value(&re), Ok(1234.5));
        let mut o = Output::new(Some(re.clone()));
        feed_all(&mut o, &b"nothing here\n\n"[..]);
        let err = o.value(&re).unwrap_err();
        assert!(err.contains("did not match"), "{err}");
        assert!(err.contains("\"nothing here\""), "{err}");
        let re = Regex::new(r"rate: (\S+)").unwrap();
        let mut o = Output::new(Some(re.clone()));
        feed_all(&mut o, &b"rate: fast"[..]);
        assert!(o.value(&re).unwrap_err().contains("not a number"));
        for bad in ["rate: 0", "rate: -3.5"] {
            let mut o = Output::new(Some(re.clone()));
            feed_all(&mut o, bad.as_bytes());
            let e = o.value(&re).unwrap_err();
            assert!(e.contains("must be above 0"), "{e}");
        }
    }

    #[test]
    fn output_memory_stays_bounded() {
        let re = Regex::new(r"done: ([0-9]+)").unwrap();
        let mut o = Output::new(Some(re.clone()));
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..64 {
            o.feed(&chunk);
            o.feed(b"\n");
        }
        o.feed(b"done: 42\nbye\n");
        o.end_line();
        assert_eq!(o.value(&re), Ok(42.0));
        assert!(o.tail.len() <= 2 * TAIL_BYTES && o.line.len() <= LINE_MAX + 64 * 1024);
        assert_eq!(o.last_line().as_deref(), Some("bye"));
        assert_eq!(o.bytes, 64 * ((1 << 20) + 1) + 13);
    }

    #[test]
    fn the_value_after_a_long_progress_line_is_found() {
        let re = Regex::new(r"ops/s: ([0-9.]+)").unwrap();
        // 128 KiB of progress bar redrawn after CRs, then the value on the same line.
        let mut bar = Vec::new();
        let mut i = 0;
        while bar.len() < 128 * 1024 {
            bar.extend_from_slice(format!("progress {}%\r", i % 100).as_bytes());
            i += 1;
        }
        for tail in [&b"ops/s: 77.5\n"[..], b"\nops/s: 77.5\n", b"ops/s: 77.5"] {
            let mut data = bar.clone();
            data.extend_from_slice(tail);
            let mut o = Output::new(Some(re.clone()));
            feed_all(&mut o, &data[..]);
            assert_eq!(
                o.value(&re),
                Ok(77.5),
                "{:?}",
                String::from_utf8_lossy(tail)
            );
            // One read holding everything, as a pipe may deliver it.
            let mut o = Output::new(Some(re.clone()));
            o.feed(&data);
            o.end_line();
            assert_eq!(o.value(&re), Ok(77.5));
        }
        // A 128 KiB line without any terminator, then the value on the next line, in
        // the same read.
        let mut data = vec![b'x'; 128 * 1024];
        data.extend_from_slice(b"\nops/s: 3\n");
        let mut o = Output::new(Some(re.clone()));
        o.feed(&data);
        o.end_line();
        assert_eq!(o.value(&re), Ok(3.0));
    }

    #[test]
    fn stat_fields_count_after_the_command_name() {
        // Fields 3.. after the name: state, ppid, pgrp, ..., processor is field 39.
        let mut fields: Vec<String> = vec!["S".into(), "1".into(), "42".into()];
        fields.extend((6..39).map(|i| (1000 + i).to_string()));
        fields.push("3".into());
        fields.push("0".into());
        let stat = format!("42 (a b) c) {}", fields.join(" "));
        let stat = stat.as_str();
        assert_eq!(stat_field(stat, 5), Some(42));
        assert_eq!(stat_field(stat, 39), Some(3));
    }

    #[test]
    fn commands_are_shown_as_a_shell_would_take_them() {
        let argv: Vec<String> = ["sh", "-c", "echo 'hi'; x=1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shell_join(&argv), r#"sh -c 'echo '\''hi'\''; x=1'"#);
    }
}
