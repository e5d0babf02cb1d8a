//! Run leases: one process measures into a run at a time.
//!
//! A process that measures a run (a new `smtlab run`, or `run --resume`) first takes the
//! run's lease: a row in `leases` with its pid, host name and a heartbeat time that a
//! background thread renews every [`LEASE_HEARTBEAT`]. Another process asking for the
//! same run is refused while the lease is live, and takes it over when it is stale:
//!
//! * live: the heartbeat is younger than [`LEASE_STALE_AFTER`] and, when the holder is
//!   on this host, its pid is alive (`kill(pid, 0)`);
//! * stale: the heartbeat is older than that (the holder hung, or its machine died), or
//!   the holder is on this host and its pid is gone (it was killed: `kill -9`, a crash,
//!   an out-of-memory kill). The new holder is told whose lease it took over.
//!
//! The lease is released (its row deleted) when the [`SqliteLease`] is dropped. A process that
//! dies without dropping it leaves a row that the next process on the same host takes
//! over at once (dead pid), and one on another host after [`LEASE_STALE_AFTER`].
//!
//! Pids are compared only on the same host name: a pid says nothing across machines,
//! nor across pid namespaces that share a host name (containers), where a lease then
//! lasts until its heartbeat is stale.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use super::{Fail, SqliteStore, sql_error};
use crate::error::StoreError;

/// How often the holder's background thread renews its heartbeat. Each renewal is one
/// small write transaction (tens of microseconds of CPU and an fsync); rare enough not to
/// disturb the measurement running meanwhile.
pub const LEASE_HEARTBEAT: Duration = Duration::from_secs(10);

/// A lease whose heartbeat is older than this is stale: six missed heartbeats, far more
/// than a loaded machine or a busy database delays one.
pub const LEASE_STALE_AFTER: Duration = Duration::from_secs(60);

/// Who holds (or held) a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    pub pid: u32,
    pub host: String,
    /// Milliseconds since its last heartbeat, when the lease was looked at.
    pub heartbeat_age_ms: u64,
}

/// Why a run's lease could not be taken or kept.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another live process is measuring the run.
    #[error(
        "run {run_id} is being measured by pid {} on {} (heartbeat {} s ago); wait for it to finish or stop it first",
        holder.pid,
        holder.host,
        holder.heartbeat_age_ms / 1000
    )]
    Held { run_id: i64, holder: LeaseHolder },

    /// The lease went stale while this process held it and another process took it.
    #[error(
        "run {run_id} was taken over by pid {} on {} while this process measured it",
        holder.pid,
        holder.host
    )]
    Lost { run_id: i64, holder: LeaseHolder },

    /// The run's lease was released or its run deleted while this process held it.
    #[error("run {run_id} is no longer leased by this process (its lease was removed)")]
    Gone { run_id: i64 },

    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The right to measure into one run; see the module documentation. Released on drop.
#[derive(Debug)]
pub(crate) struct SqliteLease {
    run_id: i64,
    path: PathBuf,
    token: String,
    conn: Connection,
    takeover: Option<LeaseHolder>,
    stop: Option<mpsc::Sender<()>>,
    beat: Option<JoinHandle<()>>,
}

impl SqliteStore {
    /// [`lease_run`](Self::lease_run) for a given pid and host (tests stand in for
    /// other processes and machines with it).
    pub fn lease_run_as(
        &mut self,
        run_id: i64,
        pid: u32,
        host: &str,
    ) -> Result<SqliteLease, LeaseError> {
        let path = self.path().to_path_buf();
        let token = format!("{pid}-{}-{}", now_ms(), std::ptr::from_ref(self) as usize);
        let doing = format!("leasing run {run_id}");
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| sql_error(&path, &doing, e))?;
        let exists = tx
            .query_row("SELECT 1 FROM runs WHERE id = ?1", [run_id], |_| Ok(()))
            .optional()
            .map_err(|e| sql_error(&path, &doing, e))?
            .is_some();
        if !exists {
            drop(tx);
            return Err(self.fail(&doing, Fail::NoRun(run_id)).into());
        }
        let now = now_ms();
        let current = holder(&tx, run_id, now).map_err(|e| sql_error(&path, &doing, e))?;
        let takeover = match current {
            Some((h, _)) if is_live(&h) => return Err(LeaseError::Held { run_id, holder: h }),
            other => other.map(|(h, _)| h),
        };
        tx.execute(
            "INSERT OR REPLACE INTO leases
                 (run_id, pid, host, token, acquired_unix_ms, heartbeat_unix_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
            params![run_id, pid, host, token, now],
        )
        .map_err(|e| sql_error(&path, &doing, e))?;
        tx.commit().map_err(|e| sql_error(&path, &doing, e))?;

        let conn = lease_connection(&path).map_err(|e| sql_error(&path, &doing, e))?;
        let (stop, beat) = match lease_connection(&path) {
            Ok(c) => {
                let (tx, rx) = mpsc::channel();
                let token = token.clone();
                let beat = std::thread::Builder::new()
                    .name(format!("lease-run-{run_id}"))
                    .spawn(move || heartbeats(&c, run_id, &token, &rx))
                    .ok();
                (Some(tx), beat)
            }
            Err(_) => (None, None),
        };
        Ok(SqliteLease {
            run_id,
            path,
            token,
            conn,
            takeover,
            stop,
            beat,
        })
    }

    /// Who holds the lease on `run_id` now, if anyone (live or stale).
    pub fn lease_holder(&self, run_id: i64) -> crate::Result<Option<LeaseHolder>> {
        holder(&self.conn, run_id, now_ms())
            .map(|h| h.map(|(h, _)| h))
            .map_err(|e| {
                sql_error(
                    self.path(),
                    &format!("reading the lease of run {run_id}"),
                    e,
                )
            })
    }
}

impl SqliteLease {
    pub fn run_id(&self) -> i64 {
        self.run_id
    }

    /// The process whose stale lease this one replaced, if any.
    pub fn taken_over_from(&self) -> Option<&LeaseHolder> {
        self.takeover.as_ref()
    }

    /// Renews the heartbeat now and checks the lease is still this process's; call it
    /// after each finished cell. The background thread renews it in between.
    pub fn heartbeat(&mut self) -> Result<(), LeaseError> {
        let now = now_ms();
        let doing = format!("renewing the lease of run {}", self.run_id);
        let n = renew(&self.conn, self.run_id, &self.token, now)
            .map_err(|e| sql_error(&self.path, &doing, e))?;
        if n == 1 {
            return Ok(());
        }
        match holder(&self.conn, self.run_id, now).map_err(|e| sql_error(&self.path, &doing, e))? {
            Some((h, _)) => Err(LeaseError::Lost {
                run_id: self.run_id,
                holder: h,
            }),
            None => Err(LeaseError::Gone {
                run_id: self.run_id,
            }),
        }
    }
}

impl Drop for SqliteLease {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.beat.take() {
            let _ = t.join();
        }
        // Only our own row: a process that took the lease over keeps its own.
        let _ = self.conn.execute(
            "DELETE FROM leases WHERE run_id = ?1 AND token = ?2",
            params![self.run_id, self.token],
        );
    }
}

fn lease_connection(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(Duration::from_secs(10))?;
    Ok(conn)
}

/// Makes the calling thread run only on CPU time nobody else wants (`SCHED_IDLE`): the
/// lease's renewal (a write and an fsync) then waits for a gap between samples instead
/// of taking a measured CPU from a placement that uses every CPU. Such a thread still
/// gets a sliver of a busy CPU, far more than a renewal needs within
/// [`LEASE_STALE_AFTER`]. Best effort: where the kernel refuses, the thread runs as
/// before.
pub(crate) fn yield_to_measurements() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread, and `param` is a valid sched_param that
    // outlives the call.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
}

fn heartbeats(conn: &Connection, run_id: i64, token: &str, stop: &mpsc::Receiver<()>) {
    yield_to_measurements();
    // A failed renewal (database busy for long) is retried at the next tick; the
    // holder's own `heartbeat` reports a lease that is really lost.
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(LEASE_HEARTBEAT) {
        if let Ok(0) = renew(conn, run_id, token, now_ms()) {
            return;
        }
    }
}

fn renew(conn: &Connection, run_id: i64, token: &str, now: u64) -> rusqlite::Result<usize> {
    conn.execute(
        "UPDATE leases SET heartbeat_unix_ms = ?3 WHERE run_id = ?1 AND token = ?2",
        params![run_id, token, now],
    )
}

/// The lease row of `run_id` and its token.
pub(crate) fn holder(
    conn: &Connection,
    run_id: i64,
    now: u64,
) -> rusqlite::Result<Option<(LeaseHolder, String)>> {
    conn.query_row(
        "SELECT pid, host, heartbeat_unix_ms, token FROM leases WHERE run_id = ?1",
        [run_id],
        |r| {
            let beat: u64 = r.get(2)?;
            Ok((
                LeaseHolder {
                    pid: r.get(0)?,
                    host: r.get(1)?,
                    heartbeat_age_ms: now.saturating_sub(beat),
                },
                r.get(3)?,
            ))
        },
    )
    .optional()
}

/// One line for the user when a stale lease was taken over: whose, and why it counted
/// as stale.
pub(crate) fn takeover_note(run_id: i64, h: &LeaseHolder) -> Option<String> {
    let why = if h.host == this_host() && !pid_alive(h.pid) {
        "the process is gone".to_string()
    } else {
        format!("no heartbeat for {} s", h.heartbeat_age_ms / 1000)
    };
    Some(format!(
        "run {run_id} was leased by pid {} on {} ({why}); this process takes it over",
        h.pid, h.host
    ))
}

pub(crate) fn is_live(h: &LeaseHolder) -> bool {
    let fresh = u128::from(h.heartbeat_age_ms) < LEASE_STALE_AFTER.as_millis();
    fresh && (h.host != this_host() || pid_alive(h.pid))
}

/// Whether a process with this pid exists here (one we may not signal exists too).
fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// This machine's host name (the kernel's), or `unknown`.
pub fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
