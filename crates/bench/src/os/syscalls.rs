//! Simple system calls (lmbench `lat_syscall`): the first six rows of paper 001 Table 1.
//!
//! * `null-syscall`: `getppid` through `syscall(SYS_getppid)`, the call `perf bench
//!   syscall basic` and lmbench time. The raw entry point keeps any C library from
//!   answering from a cache (glibc once cached `getpid`; a cache would time nothing).
//! * `read` / `write`: one byte from `/dev/zero`, one byte to `/dev/null`, as lmbench 3
//!   (lmbench 2 wrote to its standard output).
//! * `stat` / `fstat` / `open-close`: a temporary file created at prepare time in the
//!   temporary directory (`$TMPDIR` or `/tmp`) and removed on drop. lmbench stats a
//!   system file (`/usr/include/sys/types.h`): path lookup cost grows with the number of
//!   components, and ours has two (`/tmp/smtlab-stat-PID-N`), so `stat` and `open-close`
//!   are a little cheaper than lmbench's on the same machine. `open` adds `O_CLOEXEC` so
//!   that children forked by other threads meanwhile never inherit the descriptor; it does
//!   not change the cost.
//!
//! Every return value is checked inside the loop, as lmbench does, so a failing call
//! ends the sample with an error naming the file instead of timing an error path.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;

use super::{Cpus, TempFile, info, last_os_error, time_loop};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_model::BenchInfo;

smtlab_model::named_enum! {
    enum Kind {
        Null = "null-syscall",
        Read = "read",
        Write = "write",
        Stat = "stat",
        Fstat = "fstat",
        OpenClose = "open-close",
    }
}

pub(super) fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    crate::boxed(Kind::ALL.map(|kind| Simple { kind }))
}

struct Simple {
    kind: Kind,
}

impl Benchmark for Simple {
    fn info(&self) -> BenchInfo {
        let (description, origin) = match self.kind {
            Kind::Null => (
                "One null system call, getppid(2) called through syscall(2)",
                "lmbench lat_syscall null; perf bench syscall basic",
            ),
            Kind::Read => (
                "read(2) of one byte from /dev/zero",
                "lmbench lat_syscall read",
            ),
            Kind::Write => (
                "write(2) of one byte to /dev/null",
                "lmbench lat_syscall write",
            ),
            Kind::Stat => ("stat(2) of a temporary file", "lmbench lat_syscall stat"),
            Kind::Fstat => (
                "fstat(2) of an open temporary file",
                "lmbench lat_syscall fstat",
            ),
            Kind::OpenClose => (
                "open(2) read-only plus close(2) of a temporary file",
                "lmbench lat_syscall open",
            ),
        };
        info(self.kind.name(), description, origin, vec![])
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        Ok(Box::new(self.instance(ctx)?))
    }
}

impl Simple {
    fn instance(&self, ctx: &BenchContext<'_>) -> Result<SimpleInstance, BenchError> {
        let name = self.kind.name();
        let dev = |path: &'static str, write: bool| -> Result<Target, BenchError> {
            let file = OpenOptions::new()
                .read(!write)
                .write(write)
                .open(path)
                .map_err(|e| BenchError::io(name, format!("open {path}"), e))?;
            Ok(Target::Device { path, file })
        };
        let target = match self.kind {
            Kind::Null => Target::None,
            Kind::Read => dev("/dev/zero", false)?,
            Kind::Write => dev("/dev/null", true)?,
            Kind::Stat | Kind::Fstat | Kind::OpenClose => Target::Temp(TempFile::create(name)?),
        };
        Ok(SimpleInstance {
            kind: self.kind,
            cpu: Cpus::of(ctx.placement).parent,
            target,
        })
    }
}

enum Target {
    None,
    Device { path: &'static str, file: File },
    Temp(TempFile),
}

struct SimpleInstance {
    kind: Kind,
    cpu: Option<u32>,
    target: Target,
}

impl Instance for SimpleInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let name = self.kind.name();
        match (self.kind, &self.target) {
            (Kind::Null, _) => time_loop(self.cpu, iterations, || {
                // SAFETY: getppid takes no arguments and cannot fail.
                let r = unsafe { libc::syscall(libc::SYS_getppid) };
                if r < 0 {
                    return Err(last_os_error(name, "getppid"));
                }
                Ok(())
            }),
            (Kind::Read, Target::Device { path, file }) => {
                let fd = file.as_raw_fd();
                let mut byte = 0u8;
                time_loop(self.cpu, iterations, || {
                    // SAFETY: reading one byte into a valid one-byte buffer.
                    let n = unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) };
                    if n != 1 {
                        return Err(last_os_error(name, format!("read 1 byte from {path}")));
                    }
                    Ok(())
                })
            }
            (Kind::Write, Target::Device { path, file }) => {
                let fd = file.as_raw_fd();
                let byte = 0u8;
                time_loop(self.cpu, iterations, || {
                    // SAFETY: writing one byte from a valid one-byte buffer.
                    let n = unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
                    if n != 1 {
                        return Err(last_os_error(name, format!("write 1 byte to {path}")));
                    }
                    Ok(())
                })
            }
            (Kind::Stat, Target::Temp(t)) => {
                // SAFETY: stat is plain data; all zeroes is valid.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                time_loop(self.cpu, iterations, || {
                    // SAFETY: a NUL-terminated path and a valid stat buffer.
                    if unsafe { libc::stat(t.c_path.as_ptr(), &mut st) } != 0 {
                        return Err(last_os_error(
                            name,
                            format!("stat {}", smtlab_model::quote::path(&t.path)),
                        ));
                    }
                    Ok(())
                })
            }
            (Kind::Fstat, Target::Temp(t)) => {
                let fd = t.file.as_raw_fd();
                // SAFETY: stat is plain data; all zeroes is valid.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                time_loop(self.cpu, iterations, || {
                    // SAFETY: an open descriptor and a valid stat buffer.
                    if unsafe { libc::fstat(fd, &mut st) } != 0 {
                        return Err(last_os_error(
                            name,
                            format!("fstat {}", smtlab_model::quote::path(&t.path)),
                        ));
                    }
                    Ok(())
                })
            }
            (Kind::OpenClose, Target::Temp(t)) => time_loop(self.cpu, iterations, || {
                // SAFETY: a NUL-terminated path; the descriptor is closed right away.
                let fd = unsafe { libc::open(t.c_path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                if fd < 0 {
                    return Err(last_os_error(
                        name,
                        format!("open {}", smtlab_model::quote::path(&t.path)),
                    ));
                }
                // SAFETY: closing the descriptor just opened, once.
                if unsafe { libc::close(fd) } != 0 {
                    return Err(last_os_error(
                        name,
                        format!("close {}", smtlab_model::quote::path(&t.path)),
                    ));
                }
                Ok(())
            }),
            _ => unreachable!("prepare pairs each kind with its target"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::testutil;

    #[test]
    fn temp_file_is_removed_when_the_instance_drops() {
        let b = Simple { kind: Kind::Stat };
        let mut inst = testutil::with_ctx(&b.info(), &[0], |ctx| b.instance(ctx).unwrap());
        let Target::Temp(t) = &inst.target else {
            panic!("stat uses a temp file")
        };
        let path = t.path.clone();
        assert!(path.exists());
        let s = inst.sample(20).unwrap();
        assert_eq!(s.work, 20.0);
        drop(inst);
        assert!(!path.exists(), "{} left behind", path.display());
    }

    #[test]
    fn null_syscall_costs_something_and_counts_work() {
        let b = Simple { kind: Kind::Null };
        let mut inst = testutil::with_ctx(&b.info(), &[0], |ctx| b.prepare(ctx).unwrap());
        let s = inst.sample(1000).unwrap();
        assert_eq!(s.work, 1000.0);
        // A system call costs at least tens of nanoseconds anywhere.
        assert!(s.elapsed_ns >= 1000 * 10, "{s:?}");
        assert!(s.cpu_ns.unwrap() > 0);
    }
}
