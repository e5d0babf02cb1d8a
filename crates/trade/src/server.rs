//! [`TradeServer`]: the application on a tokio runtime of its own, sized and pinned to
//! the placement, stopped when dropped.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use smtlab_placement::runtime::{PinnedRuntime, RuntimeError};
use tokio::sync::oneshot;

use crate::TradeError;
use crate::app::{AppState, router};

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// CPUs for the runtime's threads, thread i on `cpus[i % len]`; empty: unpinned.
    pub cpus: Vec<u32>,
    /// Runtime worker threads (0: one per CPU of `cpus`, or of the process's affinity).
    pub workers: usize,
    /// Database connections in the pool.
    pub pool_size: usize,
    pub db: tokio_postgres::Config,
}

/// A running application server.
pub struct TradeServer {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    // Dropped after `drop` has told the server to stop.
    runtime: PinnedRuntime,
}

impl TradeServer {
    /// Starts the runtime, connects the pool (checking that the database answers and
    /// holds the trade schema), binds `cfg.listen` and serves until dropped.
    pub fn start(cfg: &ServerConfig) -> Result<TradeServer, TradeError> {
        if cfg.pool_size == 0 {
            return Err(TradeError::Config(
                "pool=0: the server needs at least one database connection".into(),
            ));
        }
        let workers = match cfg.workers {
            // As many as the calling thread has CPUs to run on.
            0 if cfg.cpus.is_empty() => {
                smtlab_placement::pin::get_affinity(0).map_or(1, |s| s.len().max(1))
            }
            0 => cfg.cpus.len(),
            n => n,
        };
        let pinned =
            PinnedRuntime::start("smtlab-trade", &cfg.cpus, workers).map_err(|e| match e {
                RuntimeError::Build(e) => TradeError::io("start the application's runtime")(e),
                RuntimeError::Pin(_) => TradeError::Config(format!(
                    "cannot pin the application's threads to CPUs {:?}",
                    cfg.cpus
                )),
            })?;
        let runtime = pinned.runtime();
        let mgr = Manager::from_config(
            cfg.db.clone(),
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(mgr)
            .max_size(cfg.pool_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .build()
            .map_err(|e| TradeError::Config(format!("build the connection pool: {e}")))?;
        let symbols = runtime.block_on(async {
            let c = pool.get().await.map_err(|e| {
                TradeError::Config(format!(
                    "connect the pool to PostgreSQL: {}",
                    crate::one_line(&e.to_string())
                ))
            })?;
            let n: i64 = c
                .query_one("SELECT count(*) FROM quote", &[])
                .await
                .map_err(TradeError::db(
                    "read the quotes (is the trade schema loaded?)",
                ))?
                .get(0);
            Ok::<i64, TradeError>(n)
        })?;
        let listener = TcpListener::bind(cfg.listen)
            .map_err(TradeError::io(format!("listen on {}", cfg.listen)))?;
        listener
            .set_nonblocking(true)
            .map_err(TradeError::io("make the listener non-blocking"))?;
        let addr = listener
            .local_addr()
            .map_err(TradeError::io("read the listening address"))?;
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(TradeError::io("register the listener"))?
        };
        let (tx, rx) = oneshot::channel::<()>();
        let app = router(AppState::new(pool, symbols));
        runtime.spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(TradeServer {
            addr,
            shutdown: Some(tx),
            runtime: pinned,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn workers(&self) -> usize {
        self.runtime.workers()
    }

    /// CPU time of the runtime's threads so far, in nanoseconds (the scheduler's own
    /// count); threads that ended are not counted.
    pub fn cpu_ns(&self) -> u64 {
        self.runtime.cpu_ns()
    }

    /// The runtime's thread ids (for tests of the pinning).
    pub fn thread_ids(&self) -> Vec<i32> {
        self.runtime.thread_ids()
    }
}

impl Drop for TradeServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        // The runtime goes next, not waiting on kept-alive connections.
    }
}
