//! Pieces every network workload shares: loopback listeners with a deep backlog, threads
//! pinned to a CPU set with small stacks, descriptor limits, per-thread CPU time,
//! percentiles and netperf's confidence interval.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use smtlab_bench::BenchError;

use smtlab_model::CpuSet;
use smtlab_placement::pin::pin_current_thread;

/// Stack of every server and client thread: the loops here keep a message buffer and a
/// few counters, so 128 KiB is ample, and 4,000 threads then reserve 512 MiB of address
/// space rather than 8 GiB.
pub const SMALL_STACK: usize = 128 << 10;

/// A TCP listener on 127.0.0.1, a free port, with a backlog of 4096 (std's 128 makes a
/// burst of a thousand connects wait for SYN retransmissions).
pub fn loopback_listener() -> io::Result<TcpListener> {
    smtlab_loadgen::sys::tcp_listener(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), false, false)
}

/// Wakes a thread blocked in `accept` on `listener` (Linux fails the call with EINVAL).
pub fn shutdown_listener(listener: &TcpListener) {
    use std::os::fd::AsRawFd;
    smtlab_loadgen::sys::shutdown(listener.as_raw_fd());
}

/// A server's loopback listener and the thread that accepts on it.
pub struct Acceptor {
    pub addr: SocketAddr,
    listener: Arc<TcpListener>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    /// Listens on 127.0.0.1 and runs `accept_loop` (handed the listener and the flag that
    /// says to stop) on a thread `thread_name` pinned to `cpus`; errors name `bench`.
    pub fn start<F>(
        bench: &str,
        cpus: &CpuSet,
        thread_name: &str,
        accept_loop: F,
    ) -> Result<Acceptor, BenchError>
    where
        F: FnOnce(&TcpListener, &AtomicBool) + Send + 'static,
    {
        let listener = Arc::new(
            loopback_listener().map_err(|e| BenchError::io(bench, "listen on 127.0.0.1", e))?,
        );
        let addr = listener
            .local_addr()
            .map_err(|e| BenchError::io(bench, "read the listener address", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (l, st) = (listener.clone(), stop.clone());
        let thread = spawn_on(cpus, thread_name.into(), move || accept_loop(&l, &st))
            .map_err(|e| BenchError::io(bench, "start the server's accept thread", e))?;
        Ok(Acceptor {
            addr,
            listener,
            stop,
            thread: Some(thread),
        })
    }

    /// Sets the stop flag, wakes the blocked `accept` and waits for the thread; servers
    /// call it before they wind down the connections it accepted.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        shutdown_listener(&self.listener);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Raises the soft descriptor limit to at least `needed` (up to the hard limit), or says
/// which limit stops it.
pub fn ensure_nofile(needed: u64) -> Result<(), NofileError> {
    let mut lim = smtlab_loadgen::sys::open_file_limits().map_err(NofileError::Get)?;
    if lim.rlim_cur >= needed {
        return Ok(());
    }
    if lim.rlim_max < needed {
        return Err(NofileError::HardLimit {
            needed,
            hard: lim.rlim_max,
        });
    }
    lim.rlim_cur = needed;
    // SAFETY: `lim` is a live rlimit the kernel reads.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(NofileError::Set {
            needed,
            error: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Why [`ensure_nofile`] could not raise the descriptor limit. The system error is part
/// of the message, not a `source`, so it is printed once.
#[derive(Debug, thiserror::Error)]
pub enum NofileError {
    #[error("getrlimit(RLIMIT_NOFILE): {0}")]
    Get(io::Error),
    #[error(
        "needs {needed} open descriptors; RLIMIT_NOFILE allows {hard} (hard limit): raise it with `ulimit -Hn`"
    )]
    HardLimit { needed: u64, hard: u64 },
    #[error("setrlimit(RLIMIT_NOFILE, {needed}): {error}")]
    Set { needed: u64, error: io::Error },
}

/// Limits that may stop a workload from starting `threads` threads, for its error line.
pub fn thread_limits() -> String {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit with a valid struct.
    let nproc = if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut lim) } == 0 {
        if lim.rlim_cur == libc::RLIM_INFINITY {
            "unlimited".to_string()
        } else {
            lim.rlim_cur.to_string()
        }
    } else {
        "unknown".to_string()
    };
    let max = std::fs::read_to_string("/proc/sys/kernel/threads-max")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!("RLIMIT_NPROC {nproc}, kernel.threads-max {max}")
}

/// Starts `f` on a thread with a small stack, pinned to `cpus` (all of them: the
/// scheduler balances within the set), or unpinned when `cpus` is empty.
pub fn spawn_on<F, T>(cpus: &CpuSet, name: String, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let set = cpus.clone();
    let pin = move || {
        if set.is_empty() {
            Ok(())
        } else {
            pin_current_thread(&set)
        }
    };
    let builder = std::thread::Builder::new()
        .name(name)
        .stack_size(SMALL_STACK);
    smtlab_placement::pin::spawn_pinned_by(builder, pin, f)
}

/// CPU time a live thread has used, read from another thread.
pub fn thread_cpu_ns<T>(handle: &JoinHandle<T>) -> Option<u64> {
    use std::os::unix::thread::JoinHandleExt;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: the thread is alive while its JoinHandle is not joined (it may have ended,
    // in which case the call fails and we return None).
    unsafe {
        if libc::pthread_getcpuclockid(handle.as_pthread_t(), &mut clock) != 0 {
            return None;
        }
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        if libc::clock_gettime(clock, &mut ts) != 0 {
            return None;
        }
        Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
    }
}

/// Half-width of the 99% confidence interval of the mean of `values`, relative to the
/// mean (netperf's `-I 99,5` asks for this to be within 0.025): the model's
/// [`smtlab_model::stats::ci_rel`], so every interval smtlab shows has one definition.
pub fn ci99_rel(values: &[f64]) -> Option<f64> {
    smtlab_model::stats::ci_rel(values, 0.99)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_use_the_model_t_quantile() {
        assert_eq!(ci99_rel(&[5.0, 5.0, 5.0]), Some(0.0));
        let wide = ci99_rel(&[1.0, 2.0, 3.0]).unwrap();
        // mean 2, sd 1, n 3: t(0.995, 2) = 9.925 (tables give 3 decimals)
        assert!((wide - 9.925 / 3f64.sqrt() / 2.0).abs() < 1e-3);
        assert_eq!(ci99_rel(&[1.0]), None);
    }

    #[test]
    fn the_descriptor_limit_can_be_met() {
        ensure_nofile(64).unwrap();
        let e = ensure_nofile(u64::MAX - 1).unwrap_err().to_string();
        assert!(e.contains("RLIMIT_NOFILE"), "{e}");
    }
}
