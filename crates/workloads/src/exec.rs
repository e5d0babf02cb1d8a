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
//! The sample states its value itself ([`OWN_VALUE`]): seconds of wall
//! time, or the number the command printed; its work is one run.

mod output;
pub mod served;
mod tasks;

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use regex::Regex;
use smtlab_bench::process::{ChildGroup, killed_line};
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_model::{BenchInfo, CpuSet, Direction, ValueKind};
use smtlab_placement::pin::CommandPinExt;

use smtlab_bench::value::OWN_VALUE;

use output::Output;
use tasks::{Escape, escaped, exited, pidfd_open, pipe, tree};

/// Unit of the value with a throughput regex: whatever the command prints, per second
/// by convention (higher is better).
pub const THROUGHPUT_UNIT: &str = "units/s";
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
            let run = self
                .run_once()
                .map_err(|reason| BenchError::unsupported("exec", reason))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_shown_as_a_shell_would_take_them() {
        let argv: Vec<String> = ["sh", "-c", "echo 'hi'; x=1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shell_join(&argv), r#"sh -c 'echo '\''hi'\''; x=1'"#);
    }
}
