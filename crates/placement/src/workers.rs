//! [`Workers`]: threads that each take messages from a queue of their own (a load
//! generator's client threads, a client-side thread that runs or holds what a cell
//! needs apart from its placement), closed and joined when dropped. The caller starts
//! each thread (pinned, or through a client side's spawner); this only owns the queues.

use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Threads that each take messages from a queue of their own: the client threads of a
/// load, a thread of the client side that runs or holds what a cell needs apart from
/// the placement. Dropping it closes every queue, which ends each thread's loop, and
/// waits for the threads.
pub struct Workers<M> {
    threads: Vec<(mpsc::Sender<M>, JoinHandle<()>)>,
}

/// A job for a thread of [`Workers`] that runs what it is handed.
pub type Job = Box<dyn FnOnce() + Send>;

impl<M> Default for Workers<M> {
    fn default() -> Self {
        Workers {
            threads: Vec::new(),
        }
    }
}

impl<M: Send + 'static> Workers<M> {
    /// Adds a thread, which `spawn` starts with the body it is handed (from a client
    /// side's spawner, say): `run` over the thread's queue.
    pub fn add(
        &mut self,
        spawn: impl FnOnce(Job) -> io::Result<JoinHandle<()>>,
        run: impl FnOnce(mpsc::Receiver<M>) + Send + 'static,
    ) -> io::Result<()> {
        let (tx, rx) = mpsc::channel();
        self.threads.push((tx, spawn(Box::new(move || run(rx)))?));
        Ok(())
    }

    /// Hands `m` to thread `k`; `false` when that thread has stopped.
    pub fn send(&self, k: usize, m: M) -> bool {
        self.threads[k].0.send(m).is_ok()
    }

    pub fn len(&self) -> usize {
        self.threads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }
}

impl Workers<Job> {
    /// Adds a thread that runs the jobs it is handed once `ready` holds; one whose
    /// `ready` fails runs none, so their answers never come.
    pub fn add_runner(
        &mut self,
        spawn: impl FnOnce(Job) -> io::Result<JoinHandle<()>>,
        ready: impl FnOnce() -> bool + Send + 'static,
    ) -> io::Result<()> {
        self.add(spawn, move |jobs| {
            if ready() {
                jobs.into_iter().for_each(|job: Job| job());
            }
        })
    }

    /// Runs `f` on thread `k`; its answer comes on the receiver (none when that thread
    /// could not run it).
    pub fn run_on<T: Send + 'static>(
        &self,
        k: usize,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> mpsc::Receiver<T> {
        let (tx, rx) = mpsc::channel();
        self.send(
            k,
            Box::new(move || {
                let _ = tx.send(f());
            }),
        );
        rx
    }
}

impl<M> std::fmt::Debug for Workers<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl<M> Drop for Workers<M> {
    fn drop(&mut self) {
        let handles: Vec<_> = self.threads.drain(..).map(|(_, h)| h).collect();
        for h in handles {
            let _ = h.join();
        }
    }
}
