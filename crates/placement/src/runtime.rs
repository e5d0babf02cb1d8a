//! A multi-threaded tokio runtime on a placement: worker thread *i* pinned to
//! `cpus[i % len]` as it starts (an empty list leaves them unpinned), with the thread
//! ids kept so the server's CPU time can be read from the scheduler. The application
//! server of `app-trade` and the user-space NFS server of `nfs-sfs` run on one.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;

/// The runtime and its threads. Dropping it shuts the runtime down without waiting
/// more than a second for tasks still running (open connections end with it).
pub struct PinnedRuntime {
    runtime: Option<Runtime>,
    tids: Arc<Mutex<Vec<libc::pid_t>>>,
    pin_failed: Arc<AtomicBool>,
    workers: usize,
}

/// Why the runtime could not start, in one line.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("start the runtime: {0}")]
    Build(std::io::Error),
    #[error("cannot pin the runtime's threads to CPUs {0:?}")]
    Pin(Vec<u32>),
}

impl PinnedRuntime {
    /// Starts `workers` (at least 1) worker threads named `name`, thread *i* pinned to
    /// `cpus[i % len]`; the blocking pool is capped at the same number, so blocking
    /// work stays as small as the placement. Returns once every worker has started
    /// (at most 2 s) and all of them are pinned.
    pub fn start(name: &str, cpus: &[u32], workers: usize) -> Result<PinnedRuntime, RuntimeError> {
        let workers = workers.max(1);
        let tids = Arc::new(Mutex::new(Vec::new()));
        let pin_failed = Arc::new(AtomicBool::new(false));
        let next = Arc::new(AtomicUsize::new(0));
        let runtime = {
            let (tids, pin_failed, cpus) = (tids.clone(), pin_failed.clone(), cpus.to_vec());
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .max_blocking_threads(workers)
                .thread_name(name)
                .on_thread_start(move || {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if !cpus.is_empty()
                        && crate::pin::pin_current_thread_to(cpus[i % cpus.len()]).is_err()
                    {
                        pin_failed.store(true, Ordering::Relaxed);
                    }
                    tids.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(crate::pin::gettid());
                })
                .enable_all()
                .build()
                .map_err(RuntimeError::Build)?
        };
        let rt = PinnedRuntime {
            runtime: Some(runtime),
            tids,
            pin_failed,
            workers,
        };
        // The workers start with the runtime; each says its id as it starts.
        let deadline = Instant::now() + Duration::from_secs(2);
        while rt.thread_ids().len() < workers && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if rt.pin_failed.load(Ordering::Relaxed) {
            return Err(RuntimeError::Pin(cpus.to_vec()));
        }
        Ok(rt)
    }

    pub fn runtime(&self) -> &Runtime {
        // Taken only by Drop.
        self.runtime
            .as_ref()
            .expect("the runtime is there until dropped")
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The ids of the threads started so far (workers, and blocking threads if any).
    pub fn thread_ids(&self) -> Vec<libc::pid_t> {
        self.tids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// CPU time of the runtime's threads so far, in nanoseconds (the scheduler's own
    /// count, [`crate::pin::thread_cpu_ns`]); threads that ended are not counted.
    pub fn cpu_ns(&self) -> u64 {
        self.thread_ids()
            .into_iter()
            .filter_map(crate::pin::thread_cpu_ns)
            .sum()
    }
}

impl Drop for PinnedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_are_pinned_in_turn_and_counted() {
        let cpu = crate::pin::get_affinity(0)
            .ok()
            .and_then(|s| s.iter().next())
            .unwrap_or(0);
        let rt = PinnedRuntime::start("smtlab-test", &[cpu], 2).unwrap();
        let tids = rt.thread_ids();
        assert_eq!(tids.len(), 2);
        for t in tids {
            let set = crate::pin::get_affinity(t).unwrap();
            assert_eq!(set.iter().collect::<Vec<_>>(), vec![cpu]);
        }
        // Some work, so the CPU time moves.
        let n = rt.runtime().block_on(async {
            tokio::spawn(async { (0..2_000_000u64).fold(0u64, |a, b| a ^ b.wrapping_mul(31)) })
                .await
                .unwrap()
        });
        assert!(n > 0);
        assert!(rt.cpu_ns() > 0);
    }

    #[test]
    fn a_cpu_that_cannot_be_had_is_an_error() {
        let e = PinnedRuntime::start("smtlab-test", &[4095], 1)
            .err()
            .expect("CPU 4095 is not on this machine");
        assert_eq!(
            e.to_string(),
            "cannot pin the runtime's threads to CPUs [4095]"
        );
    }
}
