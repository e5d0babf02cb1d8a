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
//! The lease is released (its row deleted) when the [`Lease`] is dropped. A process that
//! dies without dropping it leaves a row that the next process on the same host takes
//! over at once (dead pid), and one on another host after [`LEASE_STALE_AFTER`].
//!
//! Pids are compared only on the same host name: a pid says nothing across machines,
//! nor across pid namespaces that share a host name (containers), where a lease then
//! lasts until its heartbeat is stale.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::cells::require_run;
use super::codec::{new_uid, this_host};
use super::sql::{Sql, args};
use super::{Db, Step, Store, error};
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

/// The right to measure into one run; see the module documentation. Released (its row
/// deleted) on drop. See the `lease` notes in `SCHEMA.md`.
#[derive(Debug)]
pub struct Lease {
    run_id: i64,
    /// The database, for messages.
    path: PathBuf,
    token: String,
    /// The lease's own SQLite connection (the store's may be inside a transaction when
    /// the holder renews), or the store's PostgreSQL session.
    db: Db,
    takeover: Option<LeaseHolder>,
    stop: Option<mpsc::Sender<()>>,
    beat: Option<JoinHandle<()>>,
}

impl Store {
    /// Takes the lease on `run_id` for this process: refused with [`LeaseError::Held`]
    /// while another process's lease is live; a stale one is taken over and
    /// [`Lease::takeover_note`] says so.
    pub fn lease_run(&mut self, run_id: i64) -> Result<Lease, LeaseError> {
        self.lease_run_as(run_id, std::process::id(), &this_host())
    }

    /// [`lease_run`](Self::lease_run) for a given pid and host (tests stand in for
    /// other processes and machines with it).
    pub fn lease_run_as(&mut self, run_id: i64, pid: u32, host: &str) -> Result<Lease, LeaseError> {
        let token = format!("{pid}-{host}-{}", new_uid(now_ms()));
        let doing = format!("leasing run {run_id}");
        let now = now_ms();
        let got = self.write(&doing, |db| {
            // The run's row, locked: another host leasing it now waits for this one.
            require_run(db, run_id, true)?;
            let takeover = match holder(db, run_id, now)? {
                Some(h) if is_live(&h) => return Ok(Err(h)),
                other => other,
            };
            db.execute(
                "INSERT INTO leases (run_id, pid, host, token, acquired_unix_ms, heartbeat_unix_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)
                 ON CONFLICT (run_id) DO UPDATE SET pid = excluded.pid, host = excluded.host,
                     token = excluded.token, acquired_unix_ms = excluded.acquired_unix_ms,
                     heartbeat_unix_ms = excluded.heartbeat_unix_ms",
                args![run_id, pid, host, token.as_str(), now],
            )?;
            Ok(Ok(takeover))
        })?;
        let takeover = got.map_err(|holder| LeaseError::Held { run_id, holder })?;
        let path = self.path.clone();
        let db = self
            .db
            .for_lease(&path)
            .map_err(|e| error(&path, &doing, e))?;
        let (stop, beat) = match self.db.for_lease(&path) {
            Ok(mut c) => {
                let (tx, rx) = mpsc::channel();
                let token = token.clone();
                let beat = std::thread::Builder::new()
                    .name(format!("lease-run-{run_id}"))
                    .spawn(move || heartbeats(&mut c, run_id, &token, &rx))
                    .ok();
                (Some(tx), beat)
            }
            Err(_) => (None, None),
        };
        Ok(Lease {
            run_id,
            path,
            token,
            db,
            takeover,
            stop,
            beat,
        })
    }
}

impl Lease {
    /// One line for the user when a stale lease was taken over: whose, and why it
    /// counted as stale.
    pub fn takeover_note(&self) -> Option<String> {
        let h = self.takeover.as_ref()?;
        let why = if h.host == this_host() && !pid_alive(h.pid) {
            "the process is gone".to_string()
        } else {
            format!("no heartbeat for {} s", h.heartbeat_age_ms / 1000)
        };
        Some(format!(
            "run {} was leased by pid {} on {} ({why}); this process takes it over",
            self.run_id, h.pid, h.host
        ))
    }

    /// Renews the heartbeat now and checks the lease is still this process's; call it
    /// after each finished cell. The background thread renews it in between.
    pub fn heartbeat(&mut self) -> Result<(), LeaseError> {
        let now = now_ms();
        let (run_id, token) = (self.run_id, self.token.as_str());
        let r = self.db.autocommit(|db| {
            if renew(db, run_id, token, now)? == 1 {
                return Ok(Ok(()));
            }
            Ok(Err(match holder(db, run_id, now)? {
                Some(holder) => LeaseError::Lost { run_id, holder },
                None => LeaseError::Gone { run_id },
            }))
        });
        let doing = format!("renewing the lease of run {run_id}");
        r.map_err(|e| error(&self.path, &doing, e))?
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.beat.take() {
            let _ = t.join();
        }
        // Only our own row: a process that took the lease over keeps its own.
        let (run_id, token) = (self.run_id, self.token.as_str());
        let _ = self.db.autocommit(|db| {
            db.execute(
                "DELETE FROM leases WHERE run_id = ?1 AND token = ?2",
                args![run_id, token],
            )
        });
    }
}

/// Makes the calling thread run only on CPU time nobody else wants (`SCHED_IDLE`): the
/// lease's renewal (a write and an fsync) then waits for a gap between samples instead
/// of taking a measured CPU from a placement that uses every CPU. Such a thread still
/// gets a sliver of a busy CPU, far more than a renewal needs within
/// [`LEASE_STALE_AFTER`]. Best effort: where the kernel refuses, the thread runs as
/// before.
fn yield_to_measurements() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread, and `param` is a valid sched_param that
    // outlives the call.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
}

fn heartbeats(db: &mut Db, run_id: i64, token: &str, stop: &mpsc::Receiver<()>) {
    yield_to_measurements();
    // A failed renewal (database busy or unreachable for a while) is retried at the next
    // tick; the holder's own `heartbeat` reports a lease that is really lost.
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(LEASE_HEARTBEAT) {
        if let Ok(0) = db.autocommit(|db| renew(db, run_id, token, now_ms())) {
            return;
        }
    }
}

fn renew(db: &mut dyn Sql, run_id: i64, token: &str, now: u64) -> Step<u64> {
    db.execute(
        "UPDATE leases SET heartbeat_unix_ms = ?3 WHERE run_id = ?1 AND token = ?2",
        args![run_id, token, now],
    )
}

/// Who holds the lease of `run_id`, if anyone.
pub(crate) fn holder(db: &mut dyn Sql, run_id: i64, now: u64) -> Step<Option<LeaseHolder>> {
    let Some(r) = db.query_opt(
        "SELECT pid, host, heartbeat_unix_ms FROM leases WHERE run_id = ?1",
        args![run_id],
    )?
    else {
        return Ok(None);
    };
    let beat: u64 = r.get(2)?;
    Ok(Some(LeaseHolder {
        pid: r.get(0)?,
        host: r.get(1)?,
        heartbeat_age_ms: now.saturating_sub(beat),
    }))
}

/// Whether a live process measures `run_id`, a run stored as running (an older file
/// without leases: yes, as stored).
pub(crate) fn measured(db: &mut dyn Sql, run_id: i64, now: u64) -> bool {
    match holder(db, run_id, now) {
        Ok(Some(h)) => is_live(&h),
        Ok(None) => false,
        Err(_) => true,
    }
}

pub(crate) fn is_live(h: &LeaseHolder) -> bool {
    let fresh = u128::from(h.heartbeat_age_ms) < LEASE_STALE_AFTER.as_millis();
    fresh && (h.host != this_host() || pid_alive(h.pid))
}

/// Whether a process with this pid exists here (one we may not signal exists too).
fn pid_alive(pid: u32) -> bool {
    let Some(pid) = libc::pid_t::try_from(pid).ok().filter(|&p| p > 0) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
