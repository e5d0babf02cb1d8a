//! The thread-per-connection server (`threads`): an acceptor and a blocking thread per
//! connection ([`super::conn`]), bounded in number.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use smtlab_model::CpuSet;

use smtlab_loadgen::sys;

use super::conn::serve_blocking;
use super::{Docs, ServerOpts, response_head};

/// The thread-per-connection server.
#[derive(Debug)]
pub struct ThreadServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

type Registry = Arc<Mutex<HashMap<usize, RawFd>>>;

impl ThreadServer {
    /// Starts the acceptor on `cpus` (connection threads inherit them; every CPU of the
    /// placement, as the kernel spreads Apache's threads).
    pub fn start(docs: Docs, cpus: &[u32], opts: ServerOpts) -> io::Result<ThreadServer> {
        let listener = TcpListener::bind((opts.bind_ip, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let set: CpuSet = cpus.iter().copied().collect();
        let stop2 = stop.clone();
        let acceptor = crate::net::spawn_on(&set, "smtlab-web-acc".into(), move || {
            accept_loop(listener, Arc::new(docs), opts, &stop2);
        })?;
        Ok(ThreadServer {
            addr,
            stop,
            acceptor: Some(acceptor),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for ThreadServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
    }
}

/// Closes connection `id` (if still registered) and counts it gone.
fn close_conn(registry: &Registry, id: usize, live: &AtomicUsize) {
    if let Some(fd) = registry.lock().expect("registry").remove(&id) {
        // SAFETY: the fd was in the registry, so it is still open and removed from it
        // under the lock: this is its one close.
        unsafe { libc::close(fd) };
    }
    live.fetch_sub(1, Ordering::SeqCst);
}

fn accept_loop(listener: TcpListener, docs: Arc<Docs>, opts: ServerOpts, stop: &AtomicBool) {
    let registry: Registry = Arc::default();
    let live = Arc::new(AtomicUsize::new(0));
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    let mut next_id = 0usize;
    while !stop.load(Ordering::Relaxed) {
        // At most 100 ms, so the stop flag is seen.
        sys::wait_readable(listener.as_raw_fd(), 100);
        while let Ok((s, _)) = listener.accept() {
            workers.retain(|h| !h.is_finished());
            if live.load(Ordering::SeqCst) >= opts.max_conns {
                // Over the bound: refuse rather than grow without limit.
                use std::io::Write;
                let mut s = s;
                let _ = s.set_nonblocking(true);
                let _ = s.write_all(&response_head(503, "Service Unavailable", 0, false));
                continue;
            }
            let _ = s.set_nonblocking(false);
            let _ = s.set_nodelay(true);
            let id = next_id;
            next_id += 1;
            registry.lock().expect("registry").insert(id, s.as_raw_fd());
            live.fetch_add(1, Ordering::SeqCst);
            let (docs, reg, live2) = (docs.clone(), registry.clone(), live.clone());
            let spawned = std::thread::Builder::new()
                .name("smtlab-web-conn".into())
                .stack_size(64 * 1024)
                .spawn(move || {
                    serve_blocking(s.into_raw_fd(), &docs, opts);
                    close_conn(&reg, id, &live2);
                });
            match spawned {
                Ok(h) => workers.push(h),
                Err(_) => close_conn(&registry, id, &live),
            }
        }
    }
    // Wake every connection thread out of its read or write.
    for fd in registry.lock().expect("registry").values() {
        // The fds in the registry are open: they are closed only after removal under
        // this lock, so none is another socket's by now.
        sys::shutdown(*fd);
    }
    for h in workers {
        let _ = h.join();
    }
}
