//! Pipe latency (lmbench `lat_pipe`, `perf bench sched pipe`): one round trip of a
//! token through two pipes between the measuring thread and a child process.
//!
//! The child is forked at prepare time and echoes every 4-byte token it reads from the
//! first pipe back through the second. An iteration writes a token (a sequence number)
//! and reads the echo, which must match. The child pins itself to the placement's second
//! CPU (the first again on a one-CPU placement) before anything else, and the measuring
//! thread runs on the first: on `1c1t` every round trip is two context switches on one
//! CPU, on `1c2t` / `2c1t` two cross-CPU wake-ups. The child reports the CPU it runs on
//! when asked with a reserved token, once at prepare time (prepare fails if it is not the
//! intended CPU) and after each sample (second entry of [`RawSample::cpus`]).
//!
//! Units, for a like-for-like comparison: the value is nanoseconds per *round trip*
//! (two writes and two reads, one in each direction), as lmbench's "Pipe latency".
//! `perf bench sched pipe` prints "usecs/op" where an op is one loop of its workers,
//! also a full round trip (one write and one read by each side), with 4-byte messages
//! like ours and 1,000,000 loops by default; it does not pin, so compare with `taskset -c
//! 0 perf bench sched pipe` against placement `1c1t` (both processes on one CPU), and
//! note that its timing includes the fork and the final wait.
//!
//! [`RawSample::cpu_ns`] adds the child's CPU time (its process CPU clock) to the
//! measuring thread's. The child is killed and reaped when the instance drops. Writing
//! to the pipe of a dead child raises SIGPIPE, which Rust programs ignore by default, so
//! a crashed child shows as an EPIPE error naming it.

use std::os::fd::{AsRawFd, OwnedFd};

use super::child::{self, ChildPin};
use super::{Cpus, info, last_os_error, retry_eintr, time_loop};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_model::BenchInfo;

const NAME: &str = "pipe-latency";

/// Token asking the child for the CPU it runs on instead of an echo; sequence numbers
/// never reach it.
const REPORT_CPU: u32 = u32::MAX;

pub(super) struct PipeLatency;

impl Benchmark for PipeLatency {
    fn info(&self) -> BenchInfo {
        info(
            NAME,
            "One round trip of a 4-byte token through two pipes to a child process \
             pinned to the placement's second CPU",
            "lmbench lat_pipe; perf bench sched pipe",
            vec![],
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        Ok(Box::new(PipeInstance::start(Cpus::of(ctx.placement))?))
    }
}

struct PipeInstance {
    cpus: Cpus,
    pid: libc::pid_t,
    /// Parent's ends: writes to the child, reads its echoes.
    to_child: Option<OwnedFd>,
    from_child: Option<OwnedFd>,
    child_clock: Option<libc::clockid_t>,
    seq: u32,
}

fn pipe_pair() -> Result<(OwnedFd, OwnedFd), BenchError> {
    smtlab_control::fork::pipe().map_err(|e| BenchError::io(NAME, "create a pipe", e))
}

/// The child's whole life: pin, then echo until end of file. Async-signal-safe only.
fn echo_child(pin: Option<&ChildPin>, rd: i32, wr: i32, fd_bound: i32) -> ! {
    // Every other descriptor goes, not only our pipes' other ends: a copy of another
    // instance's pipe kept here would hide that instance's end of file and could leave
    // its reads waiting forever.
    child::close_all_but(&[rd, wr], fd_bound);
    // SAFETY (blocks below): raw system calls on our pipe descriptors and stack
    // buffers; nothing allocates or takes a lock.
    if let Some(p) = pin
        && !p.apply()
    {
        child::child_exit(child::EXIT_PIN_FAILED);
    }
    loop {
        let mut token: u32 = 0;
        // SAFETY: `token` is a live u32 and 4 bytes, its size, are asked for; `rd` is the
        // child's end of the pipe, open for its whole life.
        let n = unsafe { libc::read(rd, (&mut token as *mut u32).cast(), 4) };
        if n == 0 {
            child::child_exit(0);
        }
        if n != 4 {
            // SAFETY: __errno_location returns this thread's valid errno pointer.
            if n < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            child::child_exit(1);
        }
        if token == REPORT_CPU {
            token = child::raw_getcpu() as u32;
        }
        // SAFETY: `token` is a live u32 and 4 bytes, its size, are written; `wr` is the
        // child's end of the pipe, open for its whole life.
        let n = unsafe { libc::write(wr, (&token as *const u32).cast(), 4) };
        if n != 4 {
            child::child_exit(1);
        }
    }
}

/// Writes `token` to the child on `wr` and reads its 4-byte answer from `rd`.
fn exchange(wr: i32, rd: i32, pid: libc::pid_t, token: u32) -> Result<u32, BenchError> {
    // SAFETY: writing and reading 4 bytes from/to valid stack buffers on our pipes.
    let n = retry_eintr(|| unsafe { libc::write(wr, (&token as *const u32).cast(), 4) });
    if n != 4 {
        return Err(last_os_error(
            NAME,
            format!("write to the echo child (pid {pid})"),
        ));
    }
    let mut answer: u32 = 0;
    // SAFETY: as above.
    let n = retry_eintr(|| unsafe { libc::read(rd, (&mut answer as *mut u32).cast(), 4) });
    if n == 0 {
        return Err(BenchError::check(
            NAME,
            format!("the echo child (pid {pid}) exited"),
        ));
    }
    if n != 4 {
        return Err(last_os_error(
            NAME,
            format!("read from the echo child (pid {pid})"),
        ));
    }
    Ok(answer)
}

impl PipeInstance {
    fn start(cpus: Cpus) -> Result<PipeInstance, BenchError> {
        let pin = ChildPin::to(NAME, cpus.child)?;
        let (down_rd, down_wr) = pipe_pair()?;
        let (up_rd, up_wr) = pipe_pair()?;
        let (rd, wr) = (down_rd.as_raw_fd(), up_wr.as_raw_fd());
        let bound = child::fd_bound();
        // SAFETY: echo_child only makes raw system calls with values computed above.
        let pid = unsafe { child::fork_with(|| echo_child(pin.as_ref(), rd, wr, bound)) }
            .map_err(|e| BenchError::io(NAME, "fork the echo child", e))?;
        drop(down_rd);
        drop(up_wr);
        let mut clock: libc::clockid_t = 0;
        // SAFETY: valid output pointer; fails only if the child is already gone.
        let child_clock =
            (unsafe { libc::clock_getcpuclockid(pid, &mut clock) } == 0).then_some(clock);
        let inst = PipeInstance {
            cpus,
            pid,
            to_child: Some(down_wr),
            from_child: Some(up_rd),
            child_clock,
            seq: 0,
        };
        let cpu = inst.ask_cpu()?;
        if let Some(p) = &pin
            && cpu != p.cpu()
        {
            return Err(BenchError::check(
                NAME,
                format!(
                    "the echo child runs on CPU {cpu}, not on CPU {} it pinned itself to",
                    p.cpu()
                ),
            ));
        }
        Ok(inst)
    }

    fn fds(&self) -> (i32, i32) {
        let fd = |f: &Option<OwnedFd>| f.as_ref().map_or(-1, |f| f.as_raw_fd());
        (fd(&self.to_child), fd(&self.from_child))
    }

    fn ask_cpu(&self) -> Result<u32, BenchError> {
        let (wr, rd) = self.fds();
        let cpu = exchange(wr, rd, self.pid, REPORT_CPU)?;
        if cpu == REPORT_CPU {
            return Err(BenchError::check(
                NAME,
                "the echo child could not read its CPU",
            ));
        }
        Ok(cpu)
    }

    fn child_cpu_ns(&self) -> Option<u64> {
        let clock = self.child_clock?;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec and a clock id from clock_getcpuclockid.
        (unsafe { libc::clock_gettime(clock, &mut ts) } == 0)
            .then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

impl Instance for PipeInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let child0 = self.child_cpu_ns();
        let mut seq = self.seq;
        let (wr, rd) = self.fds();
        let pid = self.pid;
        let mut s = time_loop(self.cpus.parent, iterations, || {
            seq = (seq + 1) & 0x7fff_ffff;
            let echo = exchange(wr, rd, pid, seq)?;
            if echo != seq {
                return Err(BenchError::check(
                    NAME,
                    format!("sent token {seq} to the echo child, got {echo} back"),
                ));
            }
            Ok(())
        })?;
        self.seq = seq;
        let child1 = self.child_cpu_ns();
        if let (Some(cpu), Some(a), Some(b)) = (s.cpu_ns, child0, child1) {
            s.cpu_ns = Some(cpu + b.saturating_sub(a));
        }
        s.cpus.push(self.ask_cpu()?);
        Ok(s)
    }
}

impl Drop for PipeInstance {
    fn drop(&mut self) {
        // Closing our ends first lets a healthy child see end of file; the kill covers
        // one that is stuck or whose pipe another process's fork still holds open.
        self.to_child.take();
        self.from_child.take();
        child::kill_and_reap(self.pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::testutil;

    #[test]
    fn child_runs_on_the_second_cpu_and_is_reaped_on_drop() {
        if !testutil::have_two_cpus() {
            return;
        }
        let placement = testutil::placement(&[0, 1]);
        let mut inst = PipeInstance::start(Cpus::of(&placement)).unwrap();
        let s = inst.sample(20).unwrap();
        assert_eq!(s.work, 20.0);
        assert_eq!(s.cpus, vec![0, 1]);
        assert!(s.elapsed_ns > 0 && s.cpu_ns.unwrap() > 0, "{s:?}");
        let pid = inst.pid;
        drop(inst);
        assert!(testutil::reaped(pid), "echo child {pid} not reaped");
    }

    #[test]
    fn one_cpu_placement_keeps_the_child_on_the_same_cpu() {
        let placement = testutil::placement(&[0]);
        let mut inst = PipeInstance::start(Cpus::of(&placement)).unwrap();
        let s = inst.sample(10).unwrap();
        assert_eq!(s.cpus, vec![0, 0]);
    }

    #[test]
    fn a_dead_child_is_an_error_not_a_hang() {
        let placement = testutil::placement(&[0]);
        let mut inst = PipeInstance::start(Cpus::of(&placement)).unwrap();
        // SAFETY: killing our own child.
        unsafe { libc::kill(inst.pid, libc::SIGKILL) };
        let e = inst.sample(5).unwrap_err().to_string();
        assert!(e.contains("echo child"), "{e}");
    }
}
