//! `oltp-sqlite`: pgbench's transaction mix on an embedded SQLite database.
//!
//! The tables and the TPC-B-like transaction are pgbench's: `scale` branches, ten
//! tellers and 100 000 accounts per branch, a history table; one transaction updates
//! an account, reads its balance back, updates a teller and a branch and appends a
//! history row (`mode=select-only`: one account lookup). The database is a file in WAL
//! mode in a private temporary directory (removed afterwards; directories left by a
//! killed smtlab are swept at the next start, as for `oltp-pg`). Each worker thread
//! (one per placement CPU, or `threads`) is pinned and opens its own connection; an
//! iteration is one transaction. Writers take the database lock at `BEGIN IMMEDIATE`
//! and, as SQLite allows one writer at a time, retry while another holds it, yielding
//! the CPU between attempts (SQLite's default busy handler sleeps for milliseconds,
//! which would measure its sleeps): the measurement shows what SMT does for a
//! lock-serialised engine.
//!
//! The TPC-B invariant is checked: after every sample the teller and branch balances
//! each sum to the deltas the workers committed; after samples 1, 2, 4, 8, ... (the
//! scans grow with the tables) the account balances and the history's deltas do too,
//! and the history holds one row per committed transaction.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use rusqlite::{Connection, OpenFlags, params};
use smtlab_bench::workers::{WorkerPool, WorkerState, WrongResult, threads_param};
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample, Suite, SweepCell};
use smtlab_model::{BenchInfo, Topology};

use crate::scratch::ScratchDir;

use super::pgbench::{self, Mode};
use super::{param, tps_info};

pub const NAME: &str = "oltp-sqlite";
const DIR_PREFIX: &str = "smtlab-sqlite-";
const ACCOUNTS_PER_BRANCH: i64 = 100_000;
const TELLERS_PER_BRANCH: i64 = 10;

/// The `oltp-sqlite` workload.
pub struct OltpSqlite;

impl Benchmark for OltpSqlite {
    fn info(&self) -> BenchInfo {
        tps_info(
            NAME,
            "mode",
            "pgbench's TPC-B-like mix (or select-only) on an embedded SQLite \
                      database in WAL mode, one connection per pinned worker thread: \
                      transactions per second.",
            "paper 004 s4 (OLTP), for machines without a database server",
            vec![
                param("mode", "tpcb", None, "tpcb or select-only"),
                param(
                    "threads",
                    "auto",
                    None,
                    "worker threads; auto: one per placement CPU",
                ),
                param("scale", "1", None, "branches; 100000 accounts each"),
                param(
                    "synchronous",
                    "normal",
                    None,
                    "SQLite's synchronous pragma: off, normal or full",
                ),
            ],
        )
    }

    fn sweep(&self, suite: Suite, _topo: &Topology) -> Vec<SweepCell> {
        match suite {
            Suite::Quick => Vec::new(),
            _ => vec![SweepCell::everywhere(&[("mode", "select-only".into())])],
        }
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let p = ctx.params;
        let mode = crate::one_of(p, "mode", &pgbench::MODES)?;
        let scale = crate::bounded(p, "scale", 1, 1000)?;
        let sync = p.get_str("synchronous")?;
        if !["off", "normal", "full"].contains(&sync) {
            return Err(crate::bad_param("synchronous", sync, "off, normal or full"));
        }
        let threads = threads_param(NAME, ctx)?;
        let dir = ScratchDir::create(NAME, &std::env::temp_dir(), DIR_PREFIX)?;
        let db = dir.path().join("oltp.db");
        load(&db, scale as i64).map_err(|e| sql_err("create and fill the database", e))?;
        let sync = sync.to_string();
        let path = db.clone();
        let seed = smtlab_bench::clock::now_ns();
        let committed = Arc::new(Committed::default());
        let shared = Arc::clone(&committed);
        let pool = WorkerPool::start(NAME, ctx.placement, Some(threads), move |i| {
            let conn = open(&path, &sync).map_err(|e| sql_err("open a connection", e))?;
            Ok(Worker {
                conn,
                mode,
                accounts: scale as i64 * ACCOUNTS_PER_BRANCH,
                scale: scale as i64,
                rng: (seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
                error: None,
                done: 0,
                committed: Arc::clone(&shared),
            })
        })?;
        let check_conn = open(&db, "normal").map_err(|e| sql_err("open a connection", e))?;
        Ok(Box::new(SqliteInstance {
            pool,
            check_conn,
            committed,
            samples: 0,
            scale,
            _dir: dir,
        }))
    }
}

fn sql_err(what: &str, e: rusqlite::Error) -> BenchError {
    BenchError::io(NAME, what, std::io::Error::other(e.to_string()))
}

/// SQLite's own busy handler sleeps (1, 2, 5, 10 ms ...) while another connection
/// writes, which would make the run measure its sleeps. This one gives the CPU away
/// and tries again at once, for up to about 30 s of attempts.
fn busy_retry(attempts: i32) -> bool {
    if attempts >= 3_000_000 {
        return false;
    }
    std::thread::yield_now();
    true
}

fn open(path: &Path, synchronous: &str) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_handler(Some(busy_retry))?;
    conn.pragma_update(None, "synchronous", synchronous)?;
    Ok(conn)
}

/// pgbench's four tables at `scale`, in WAL mode.
fn load(path: &Path, scale: i64) -> rusqlite::Result<()> {
    let mut conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "wal")?;
    conn.pragma_update(None, "synchronous", "off")?;
    conn.execute_batch(
        "CREATE TABLE branches (bid INTEGER PRIMARY KEY, bbalance INTEGER NOT NULL, filler TEXT);
         CREATE TABLE tellers (tid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, tbalance INTEGER NOT NULL, filler TEXT);
         CREATE TABLE accounts (aid INTEGER PRIMARY KEY, bid INTEGER NOT NULL, abalance INTEGER NOT NULL, filler TEXT);
         CREATE TABLE history (tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, mtime INTEGER, filler TEXT);",
    )?;
    let tx = conn.transaction()?;
    {
        // pgbench pads accounts to about 100 bytes a row.
        let filler = " ".repeat(84);
        let mut b = tx.prepare("INSERT INTO branches VALUES (?1, 0, NULL)")?;
        let mut t = tx.prepare("INSERT INTO tellers VALUES (?1, ?2, 0, NULL)")?;
        let mut a = tx.prepare("INSERT INTO accounts VALUES (?1, ?2, 0, ?3)")?;
        for bid in 1..=scale {
            b.execute(params![bid])?;
            for k in 0..TELLERS_PER_BRANCH {
                t.execute(params![(bid - 1) * TELLERS_PER_BRANCH + k + 1, bid])?;
            }
            for k in 0..ACCOUNTS_PER_BRANCH {
                a.execute(params![
                    (bid - 1) * ACCOUNTS_PER_BRANCH + k + 1,
                    bid,
                    filler
                ])?;
            }
        }
    }
    tx.commit()?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(())
}

/// The sums of `queries` (labelled), each of which must equal `want`.
fn check_sums(conn: &Connection, want: i64, queries: &[(&str, &str)]) -> Result<(), BenchError> {
    for (label, q) in queries {
        let got: i64 = conn
            .query_row(q, [], |r| r.get(0))
            .map_err(|e| sql_err("check the balances", e))?;
        if got != want {
            return Err(BenchError::check(
                NAME,
                format!("{label} is {got}; the committed transactions give {want}"),
            ));
        }
    }
    Ok(())
}

/// What the workers committed, over all samples.
#[derive(Default)]
struct Committed {
    delta: AtomicI64,
    transactions: AtomicU64,
}

struct Worker {
    conn: Connection,
    mode: Mode,
    accounts: i64,
    scale: i64,
    rng: u64,
    error: Option<String>,
    done: u64,
    committed: Arc<Committed>,
}

impl Worker {
    fn next(&mut self, bound: i64) -> i64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % bound as u64) as i64
    }

    fn transaction(&mut self) -> rusqlite::Result<()> {
        let aid = self.next(self.accounts) + 1;
        if self.mode == Mode::SelectOnly {
            let mut s = self
                .conn
                .prepare_cached("SELECT abalance FROM accounts WHERE aid = ?1")?;
            let bal: i64 = s.query_row(params![aid], |r| r.get(0))?;
            std::hint::black_box(bal);
            return Ok(());
        }
        let bid = self.next(self.scale) + 1;
        let tid = self.next(self.scale * TELLERS_PER_BRANCH) + 1;
        let delta = self.next(10_001) - 5000;
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.prepare_cached("UPDATE accounts SET abalance = abalance + ?1 WHERE aid = ?2")?
            .execute(params![delta, aid])?;
        let bal: i64 = tx
            .prepare_cached("SELECT abalance FROM accounts WHERE aid = ?1")?
            .query_row(params![aid], |r| r.get(0))?;
        std::hint::black_box(bal);
        tx.prepare_cached("UPDATE tellers SET tbalance = tbalance + ?1 WHERE tid = ?2")?
            .execute(params![delta, tid])?;
        tx.prepare_cached("UPDATE branches SET bbalance = bbalance + ?1 WHERE bid = ?2")?
            .execute(params![delta, bid])?;
        tx.prepare_cached(
            "INSERT INTO history (tid, bid, aid, delta, mtime) VALUES (?1, ?2, ?3, ?4, unixepoch())",
        )?
        .execute(params![tid, bid, aid, delta])?;
        tx.commit()?;
        self.committed.delta.fetch_add(delta, Ordering::Relaxed);
        self.committed.transactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl WorkerState for Worker {
    fn run(&mut self, iterations: u64) -> f64 {
        self.done = 0;
        for _ in 0..iterations {
            if let Err(e) = self.transaction() {
                self.error = Some(e.to_string());
                break;
            }
            self.done += 1;
        }
        self.done as f64
    }

    fn check(&mut self, iterations: u64) -> Result<(), WrongResult> {
        match self.error.take() {
            Some(e) => Err(format!("transaction {} failed: {e}", self.done + 1).into()),
            None if self.done != iterations => {
                Err(format!("{} of {iterations} transactions ran", self.done).into())
            }
            None => Ok(()),
        }
    }
}

struct SqliteInstance {
    // Fields drop in order: the connections close before the files go.
    pool: WorkerPool,
    check_conn: Connection,
    committed: Arc<Committed>,
    samples: u64,
    scale: u64,
    _dir: ScratchDir,
}

impl Instance for SqliteInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let mut s = self.pool.run(iterations)?;
        self.samples += 1;
        let want = self.committed.delta.load(Ordering::Relaxed);
        check_sums(
            &self.check_conn,
            want,
            &[
                (
                    "the tellers' balance",
                    "SELECT coalesce(sum(tbalance), 0) FROM tellers",
                ),
                (
                    "the branches' balance",
                    "SELECT coalesce(sum(bbalance), 0) FROM branches",
                ),
            ],
        )?;
        if self.samples.is_power_of_two() {
            check_sums(
                &self.check_conn,
                want,
                &[
                    (
                        "the accounts' balance",
                        "SELECT coalesce(sum(abalance), 0) FROM accounts",
                    ),
                    (
                        "the history's deltas",
                        "SELECT coalesce(sum(delta), 0) FROM history",
                    ),
                ],
            )?;
            let rows = self.committed.transactions.load(Ordering::Relaxed) as i64;
            check_sums(
                &self.check_conn,
                rows,
                &[("the history's row count", "SELECT count(*) FROM history")],
            )?;
        }
        s.metrics.insert("scale".into(), self.scale as f64);
        s.metrics
            .insert("threads".into(), self.pool.threads() as f64);
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testutil;

    /// The tests count this process's scratch directories: one at a time.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn run(pairs: &[(&str, &str)]) -> Result<(RawSample, RawSample), BenchError> {
        let cpus = smtlab_placement::pin::get_affinity(0).unwrap().to_vec();
        let pl = testutil::placement(&cpus[..cpus.len().min(2)]);
        let mut inst = testutil::prepare(&OltpSqlite, pairs, &pl, None)?;
        let a = inst.sample(20)?;
        let b = inst.sample(30)?;
        Ok((a, b))
    }

    fn leftovers() -> usize {
        crate::scratch::mine(DIR_PREFIX).len()
    }

    #[test]
    fn both_mixes_run_keep_the_invariant_and_leave_nothing() {
        let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        for mode in ["tpcb", "select-only"] {
            let (a, b) = run(&[("mode", mode)]).unwrap();
            let threads = a.metrics["threads"];
            assert_eq!(a.work, 20.0 * threads, "{mode}");
            assert_eq!(b.work, 30.0 * threads, "{mode}");
            assert!(b.elapsed_ns > 0);
        }
        assert_eq!(leftovers(), 0);
    }

    #[test]
    fn bad_parameters_are_one_line_errors() {
        let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        for (k, v) in [
            ("mode", "tpcc"),
            ("scale", "0"),
            ("synchronous", "maybe"),
            ("threads", "0"),
        ] {
            let e = run(&[(k, v)]).err().unwrap().to_string();
            assert!(e.contains(k), "{k}={v}: {e}");
            assert!(!e.contains('\n'));
        }
        assert_eq!(leftovers(), 0);
    }

    #[test]
    fn a_broken_balance_is_caught() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (3), (4);")
            .unwrap();
        let q = [("t's sum", "SELECT sum(v) FROM t")];
        check_sums(&conn, 7, &q).unwrap();
        let e = check_sums(&conn, 8, &q).unwrap_err().to_string();
        assert!(e.contains("t's sum is 7") && e.contains("give 8"), "{e}");
    }
}
