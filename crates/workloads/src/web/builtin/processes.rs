//! The pre-forked process server (`processes`): workers forked from the measuring
//! thread, each serving one connection at a time ([`super::conn`]).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};

use smtlab_model::CpuSet;
use smtlab_placement::pin::CpuMask;

use smtlab_loadgen::sys;

use super::conn::serve_blocking;
use super::{Docs, ServerOpts};

/// The pre-forked process server (`processes`): worker processes forked from the
/// measuring thread, each accepting on the shared listener and serving one connection
/// at a time with the threaded server's code (Apache prefork, the paper's Apache-MP).
/// Every worker runs on the placement's CPUs, enters smtlab's cgroup (killed by the
/// guardian if smtlab dies), asks for SIGKILL when the thread that forked it dies
/// (`PR_SET_PDEATHSIG`), checks its parent every 200 ms, and is killed and reaped when
/// the server is dropped.
///
/// Workers only accept, read, open files and write after the fork: no locks of the
/// parent's other threads are needed there (glibc's allocator is fork-safe).
#[derive(Debug)]
pub struct ProcessServer {
    addr: SocketAddr,
    pids: Vec<libc::pid_t>,
}

impl ProcessServer {
    pub fn start(
        docs: Docs,
        cpus: &[u32],
        opts: ServerOpts,
        workers: usize,
    ) -> io::Result<ProcessServer> {
        let listener = TcpListener::bind((opts.bind_ip, 0))?;
        let addr = listener.local_addr()?;
        // Everything the child needs is prepared before the fork.
        // Sized to the highest CPU (no 1,024-CPU cap); applying it allocates nothing.
        let mask = if cpus.is_empty() {
            None
        } else {
            let set: CpuSet = cpus.iter().copied().collect();
            Some(
                CpuMask::from_set(&set)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?,
            )
        };
        // SAFETY: getpid() takes nothing and cannot fail.
        let parent = unsafe { libc::getpid() };
        let lfd = listener.as_raw_fd();
        // Workers enter smtlab's cgroup, so its guardian kills them if smtlab dies.
        let tree = smtlab_bench::process::ForkHook::prepare();
        let mut server = ProcessServer {
            addr,
            pids: Vec::new(),
        };
        for _ in 0..workers.max(1) {
            // The child: never returns into the parent's code; its exit status says why
            // it ended (1: orphaned, 2: cannot pin, 3: panicked).
            let child = || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    tree.enter();
                    // SAFETY: prctl and getppid take no pointers.
                    let orphaned = unsafe {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                        libc::getppid() != parent
                    };
                    if orphaned {
                        return 1;
                    }
                    if let Some(m) = &mask
                        && m.apply(0).is_err()
                    {
                        return 2;
                    }
                    worker_loop(lfd, &docs, opts, parent);
                    0
                }))
                .unwrap_or(3)
            };
            // SAFETY: the child runs only async-signal-safe calls and this crate's
            // server code, which takes no lock another thread of the parent could hold
            // (see the type's docs), and unwinds no further than its catch_unwind.
            let pid = unsafe { smtlab_control::fork::fork_with(child) }?;
            // Set from here too, so it holds when start returns.
            if let Some(m) = &mask {
                // The child pins itself too and exits if it cannot: an error here changes nothing.
                let _ = m.apply(pid);
            }
            server.pids.push(pid);
        }
        // The listener stays open in the parent too (dropped here, the children keep
        // their copies), so the port stays bound while the workers live.
        drop(listener);
        Ok(server)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn pids(&self) -> &[libc::pid_t] {
        &self.pids
    }
}

fn worker_loop(lfd: RawFd, docs: &Docs, opts: ServerOpts, parent: libc::pid_t) {
    loop {
        // SAFETY: getppid() takes nothing and cannot fail.
        if unsafe { libc::getppid() } != parent {
            return;
        }
        if !sys::wait_readable(lfd, 200) {
            continue;
        }
        // Several workers wake for one connection: the losers get EAGAIN.
        let Ok(accepted) = sys::accept(lfd) else {
            continue;
        };
        // Blocking from here, as a prefork worker is.
        let _ = sys::set_nonblocking(accepted.as_raw_fd(), false);
        let _ = sys::set_nodelay(accepted.as_raw_fd());
        // Closed when `accepted` drops, after the connection.
        serve_blocking(accepted.as_raw_fd(), docs, opts);
    }
}

impl Drop for ProcessServer {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // SAFETY: `pid` is a worker forked by this server and not reaped yet, so it is no
            // stranger's.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        for &pid in &self.pids {
            let mut status = 0;
            // SAFETY: `status` is a live int the kernel writes; `pid` is our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        }
    }
}
