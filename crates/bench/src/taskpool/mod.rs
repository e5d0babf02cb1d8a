//! `task-pool` [paper 002 s7, Figs 15-16]: a small thread-pool runtime whose workers
//! share one task queue, guarded by a mutex or lock-free (compare-and-swap), driving a
//! recursive FFT (`work=fft`, 2 children per node, Fig 15) or a recursive block matrix
//! multiply (`work=matmul`, 8^depth leaf tasks, Fig 16).
//!
//! Workers (one per placement CPU, or `workers=N` spread over them) are started and
//! pinned at prepare time and wait on a condition variable between samples. A sample
//! runs the tree `iterations` times: all workers are awake and spinning on the queue
//! before the clock starts; the clock stops when the last tree's root completes. A
//! worker pops a task id, pushes the children of an inner node or computes a leaf; the
//! worker that completes a node's last child runs its combine step (see [`work`]).
//! Idle workers spin on the queue, yielding the CPU after a few empty polls, as the
//! paper's runtime spins on its pool.
//!
//! The value is tasks (tree nodes) per second in millions; `tree_ms` is the run time of
//! one tree (the paper's y axis), `cas_retries_per_task` the failed compare-exchanges
//! of the lock-free queue per task (the paper's "CAS spins"), and
//! `lock_contended_per_task` how often the mutex was found held. After every sample the
//! result is checked: the FFT against a direct DFT (every bin up to 1024 points, 64
//! bins beyond), the product against naive dot products (every entry up to 128 x 128,
//! 256 entries beyond).

pub mod queue;
pub mod work;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use smtlab_model::metrics::task_pool as metric;
use smtlab_model::{BenchInfo, Direction, Topology, ValueKind};
use smtlab_placement::pin;

use crate::clock::{now_ns, thread_cpu_ns};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample, Suite, SweepCell};
use queue::{CasStack, MutexStack, QueueStats, TaskStack};
use work::{Fft, MatMul, Work};

const NAME: &str = "task-pool";
/// Result storage the matrix multiply may use.
const MAX_RESULT_BYTES: u128 = 1 << 30;

/// The catalog entries of this module.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    vec![Box::new(TaskPool)]
}

/// The `task-pool` benchmark.
pub struct TaskPool;

use crate::params::declare as p;

use crate::params::bad;

impl Benchmark for TaskPool {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "threads".into(),
            unit: "Mtasks/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1e6 },
            description: "A thread-pool runtime with one shared task queue (mutex-guarded \
                          or lock-free CAS) running a recursive FFT or block matrix \
                          multiply task tree: tasks per second, tree run time, CAS \
                          retries per task."
                .into(),
            origin: "paper 002 s7, Figs 15-16".into(),
            params: vec![
                p("work", "fft", None, "fft (Fig 15) or matmul (Fig 16)"),
                p(
                    "queue",
                    "cas",
                    None,
                    "cas (lock-free Treiber stack) or mutex",
                ),
                p(
                    "workers",
                    "auto",
                    None,
                    "worker threads; auto: one per placement CPU",
                ),
                p("fft_log2", "12", Some("10"), "FFT of 2^fft_log2 points"),
                p(
                    "fft_leaf",
                    "1",
                    None,
                    "points per FFT leaf task (a direct DFT)",
                ),
                p("matmul_n", "256", Some("64"), "matrix order n (n x n)"),
                p(
                    "matmul_depth",
                    "3",
                    Some("2"),
                    "recursions: 8^depth leaf products",
                ),
            ],
            main_param: Some("queue".into()),
            report: smtlab_model::ReportSection::TaskPool,
        }
    }

    fn sweep(&self, suite: Suite, topo: &Topology) -> Vec<SweepCell> {
        let kv = |pairs: &[(&str, &str)]| {
            SweepCell::everywhere(
                &pairs
                    .iter()
                    .map(|(k, v)| (*k, v.to_string()))
                    .collect::<Vec<_>>(),
            )
        };
        let mut v = vec![
            kv(&[("queue", "mutex")]),
            kv(&[("work", "matmul")]),
            kv(&[("work", "matmul"), ("queue", "mutex")]),
        ];
        if suite == Suite::Full {
            for q in ["cas", "mutex"] {
                for log2 in [4, 8, 16] {
                    v.push(kv(&[("queue", q), ("fft_log2", &log2.to_string())]));
                }
                for depth in [1, 4, 5] {
                    v.push(kv(&[
                        ("work", "matmul"),
                        ("queue", q),
                        ("matmul_n", "1024"),
                        ("matmul_depth", &depth.to_string()),
                    ]));
                }
                // More workers than CPUs: where the paper's CAS pool fell over.
                let cpus = topo.cpus.len().max(1);
                for w in [2 * cpus, 8 * cpus] {
                    v.push(kv(&[("queue", q), ("workers", &w.to_string())]));
                }
            }
        }
        v
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let prm = ctx.params;
        let seed = now_ns() | 1;
        // Every parameter is checked, also those of the other tree.
        let log2 = prm.get_u64_in("fft_log2", 0..=22, "0 to 22")?;
        let leaf = prm.get_u64("fft_leaf")?;
        if leaf == 0 || !leaf.is_power_of_two() || leaf > 1 << log2 {
            return Err(bad(
                "fft_leaf",
                &leaf.to_string(),
                "a power of two up to 2^fft_log2",
            ));
        }
        let n = prm.get_u64("matmul_n")? as usize;
        let depth = prm.get_u64_in("matmul_depth", 0..=6, "0 to 6")?;
        if n == 0 || !n.is_multiple_of(1 << depth) {
            return Err(bad(
                "matmul_n",
                &n.to_string(),
                "a positive multiple of 2^matmul_depth",
            ));
        }
        if MatMul::result_bytes(n, depth as u32) > MAX_RESULT_BYTES {
            return Err(bad(
                "matmul_n",
                &n.to_string(),
                "a size whose results fit in 1 GiB (n^2 (2^(depth+1) - 1) doubles)",
            ));
        }
        let work: Arc<dyn Work> = match prm.get_str("work")? {
            "fft" => Arc::new(Fft::new(log2 as u32, leaf as usize, seed)),
            "matmul" => Arc::new(MatMul::new(n, depth as u32, seed).ok_or_else(|| {
                bad(
                    "matmul_n",
                    &n.to_string(),
                    "a positive multiple of 2^matmul_depth",
                )
            })?),
            other => return Err(bad("work", other, "fft or matmul")),
        };
        let capacity = work.nodes() + 1;
        let queue: Arc<dyn TaskStack> = match prm.get_str("queue")? {
            "cas" => Arc::new(CasStack::new(capacity)),
            "mutex" => Arc::new(MutexStack::new(capacity)),
            other => return Err(bad("queue", other, "cas or mutex")),
        };
        let workers = match prm.get_str("workers")? {
            "auto" => crate::workers::default_threads(ctx.placement, None),
            v => match v.parse::<usize>() {
                Ok(n) if (1..=4096).contains(&n) => n,
                _ => return Err(bad("workers", v, "auto or 1 to 4096")),
            },
        };
        let cpus: Vec<Option<u32>> = (0..workers)
            .map(|i| ctx.placement.cpu_for_thread(i))
            .collect();
        Ok(Box::new(Pool::start(work, queue, &cpus)?))
    }
}

/// What the coordinator and the workers share.
struct Shared {
    work: Arc<dyn Work>,
    queue: Arc<dyn TaskStack>,
    ctl: Mutex<Ctl>,
    wake: Condvar,
    done_cv: Condvar,
    /// Set when the last tree of a run completes.
    done: AtomicBool,
    trees_left: AtomicU64,
    end_ns: AtomicU64,
    awake: AtomicUsize,
    executed: AtomicU64,
    retries: AtomicU64,
    contended: AtomicU64,
    cpu_ns: AtomicU64,
}

struct Ctl {
    generation: u64,
    stop: bool,
    finished: usize,
    cpus: Vec<(usize, Option<u32>)>,
}

struct Pool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    fn start(
        work: Arc<dyn Work>,
        queue: Arc<dyn TaskStack>,
        cpus: &[Option<u32>],
    ) -> Result<Pool, BenchError> {
        let shared = Arc::new(Shared {
            work,
            queue,
            ctl: Mutex::new(Ctl {
                generation: 0,
                stop: false,
                finished: 0,
                cpus: Vec::new(),
            }),
            wake: Condvar::new(),
            done_cv: Condvar::new(),
            done: AtomicBool::new(false),
            trees_left: AtomicU64::new(0),
            end_ns: AtomicU64::new(0),
            awake: AtomicUsize::new(0),
            executed: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
        });
        let mut pool = Pool {
            shared,
            threads: Vec::new(),
        };
        for (i, &cpu) in cpus.iter().enumerate() {
            let sh = Arc::clone(&pool.shared);
            let t = pin::spawn_pinned(cpu, format!("smtlab-pool-{i}"), move || worker(&sh, i))
                .map_err(|e| BenchError::io(NAME, format!("start worker {i}"), e))?;
            pool.threads.push(t);
        }
        Ok(pool)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Ok(mut c) = self.shared.ctl.lock() {
            c.stop = true;
        }
        self.shared.done.store(true, Ordering::Release);
        self.shared.wake.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Counts of one worker in one run.
#[derive(Default)]
struct Local {
    stats: QueueStats,
    executed: u64,
}

fn execute(sh: &Shared, id: u32, local: &mut Local) {
    local.executed += 1;
    let kids = sh.work.children(id);
    if !kids.is_empty() {
        for c in kids {
            // The arena holds every node of a tree: a full stack is a bug, not load.
            assert!(sh.queue.push(c, &mut local.stats), "task queue full");
        }
        return;
    }
    sh.work.leaf(id);
    let mut node = id;
    loop {
        match sh.work.parent(node) {
            Some(p) => {
                if !sh.work.child_done(p) {
                    return;
                }
                sh.work.combine(p);
                node = p;
            }
            None => {
                // A tree is complete: start the next or end the run.
                if sh.trees_left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    sh.end_ns.store(now_ns(), Ordering::Relaxed);
                    sh.done.store(true, Ordering::Release);
                } else {
                    assert!(sh.queue.push(sh.work.root(), &mut local.stats));
                }
                return;
            }
        }
    }
}

fn worker(sh: &Shared, index: usize) {
    let mut seen = 0;
    loop {
        {
            let mut c = sh.ctl.lock().unwrap_or_else(|p| p.into_inner());
            while c.generation == seen && !c.stop {
                c = sh.wake.wait(c).unwrap_or_else(|p| p.into_inner());
            }
            if c.stop {
                return;
            }
            seen = c.generation;
        }
        let cpu0 = thread_cpu_ns();
        sh.awake.fetch_add(1, Ordering::AcqRel);
        let mut local = Local::default();
        let mut idle = 0u32;
        while !sh.done.load(Ordering::Acquire) {
            match sh.queue.pop(&mut local.stats) {
                Some(id) => {
                    idle = 0;
                    execute(sh, id, &mut local);
                }
                None => {
                    idle += 1;
                    if idle > 64 {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
        }
        let cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
        sh.executed.fetch_add(local.executed, Ordering::Relaxed);
        sh.retries.fetch_add(local.stats.retries, Ordering::Relaxed);
        sh.contended
            .fetch_add(local.stats.contended, Ordering::Relaxed);
        sh.cpu_ns.fetch_add(cpu_ns, Ordering::Relaxed);
        let mut c = sh.ctl.lock().unwrap_or_else(|p| p.into_inner());
        c.finished += 1;
        c.cpus.push((index, pin::current_cpu()));
        sh.done_cv.notify_all();
    }
}

impl Instance for Pool {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let sh = &*self.shared;
        let trees = iterations.max(1);
        let workers = self.threads.len();
        if self.threads.iter().any(|t| t.is_finished()) {
            return Err(BenchError::check(NAME, "a worker thread exited"));
        }
        sh.done.store(false, Ordering::Release);
        sh.trees_left.store(trees, Ordering::Release);
        sh.awake.store(0, Ordering::Release);
        for a in [&sh.executed, &sh.retries, &sh.contended, &sh.cpu_ns] {
            a.store(0, Ordering::Relaxed);
        }
        {
            let mut c = sh.ctl.lock().unwrap_or_else(|p| p.into_inner());
            c.generation += 1;
            c.finished = 0;
            c.cpus.clear();
        }
        sh.wake.notify_all();
        while sh.awake.load(Ordering::Acquire) < workers {
            std::thread::yield_now();
        }
        let mut mine = QueueStats::default();
        let start = now_ns();
        assert!(sh.queue.push(sh.work.root(), &mut mine));
        let mut c = sh.ctl.lock().unwrap_or_else(|p| p.into_inner());
        while c.finished < workers {
            c = sh.done_cv.wait(c).unwrap_or_else(|p| p.into_inner());
        }
        let mut cpus = std::mem::take(&mut c.cpus);
        drop(c);
        let end = sh.end_ns.load(Ordering::Relaxed);
        let executed = sh.executed.load(Ordering::Relaxed);
        let expected = trees * sh.work.nodes() as u64;
        if executed != expected {
            return Err(BenchError::check(
                NAME,
                format!("{executed} tasks ran, {expected} were due"),
            ));
        }
        sh.work
            .check()
            .map_err(|e| BenchError::check(NAME, e.to_string()))?;
        cpus.sort_unstable();
        let elapsed_ns = end.saturating_sub(start).max(1);
        let retries = sh.retries.load(Ordering::Relaxed) + mine.retries;
        let contended = sh.contended.load(Ordering::Relaxed) + mine.contended;
        let mut s = RawSample {
            elapsed_ns,
            work: executed as f64,
            cpu_ns: Some(sh.cpu_ns.load(Ordering::Relaxed)),
            cpus: cpus.into_iter().filter_map(|(_, c)| c).collect(),
            ..RawSample::default()
        };
        for (key, value) in [
            (metric::TREE_MS, elapsed_ns as f64 / trees as f64 / 1e6),
            (metric::TASKS_PER_TREE, sh.work.nodes() as f64),
            (
                metric::CAS_RETRIES_PER_TASK,
                retries as f64 / executed as f64,
            ),
            (
                metric::LOCK_CONTENDED_PER_TASK,
                contended as f64 / executed as f64,
            ),
            (metric::WORKERS, workers as f64),
        ] {
            s.metrics.insert(key.into(), value);
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;
    use crate::workers::tests::{context, placement, test_cpus, topology};

    fn run(pairs: &[(&str, &str)], workers_cpus: &[u32]) -> Result<RawSample, BenchError> {
        let info = TaskPool.info();
        let given: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let params = Params::resolve(&info, &given, true)?;
        let pl = placement(workers_cpus);
        let topo = topology(None);
        let mut inst = TaskPool.prepare(&context(&params, &pl, &topo))?;
        inst.sample(2)?;
        inst.sample(3)
    }

    #[test]
    fn both_queues_run_both_trees_and_check_them() {
        let cpus = test_cpus();
        for work in ["fft", "matmul"] {
            for q in ["cas", "mutex"] {
                let s = run(&[("work", work), ("queue", q), ("workers", "3")], &cpus).unwrap();
                let per_tree = s.metrics["tasks_per_tree"];
                assert_eq!(s.work, 3.0 * per_tree, "{work}/{q}");
                assert!(s.metrics["tree_ms"] > 0.0);
                assert_eq!(s.metrics["workers"], 3.0);
                assert_eq!(s.cpus.len(), 3);
                assert!(s.cpus.iter().all(|c| cpus.contains(c)), "{:?}", s.cpus);
                if q == "mutex" {
                    assert_eq!(s.metrics["cas_retries_per_task"], 0.0);
                } else {
                    assert_eq!(s.metrics["lock_contended_per_task"], 0.0);
                }
            }
        }
    }

    #[test]
    fn tree_sizes_follow_the_parameters() {
        let cpus = test_cpus();
        let s = run(&[("fft_log2", "6")], &cpus).unwrap();
        assert_eq!(s.metrics["tasks_per_tree"], 127.0);
        let s = run(&[("fft_log2", "6"), ("fft_leaf", "4")], &cpus).unwrap();
        assert_eq!(s.metrics["tasks_per_tree"], 31.0);
        let s = run(
            &[
                ("work", "matmul"),
                ("matmul_n", "16"),
                ("matmul_depth", "2"),
            ],
            &cpus,
        )
        .unwrap();
        assert_eq!(s.metrics["tasks_per_tree"], 73.0);
    }

    #[test]
    fn bad_parameters_are_one_line_errors() {
        let cpus = test_cpus();
        for (k, v) in [
            ("work", "lu"),
            ("queue", "spin"),
            ("workers", "0"),
            ("fft_leaf", "3"),
            ("fft_log2", "40"),
            ("matmul_n", "30"),
            ("matmul_depth", "9"),
        ] {
            let e = run(&[(k, v)], &cpus).err().unwrap().to_string();
            assert!(e.contains(k), "{k}={v}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn suites_sweep_the_queue_kinds_and_works() {
        let topo = topology(None);
        let d = TaskPool.sweep(Suite::Default, &topo);
        assert!(
            d.iter()
                .any(|c| c.params.contains(&("queue".into(), "mutex".into())))
        );
        assert!(
            d.iter()
                .any(|c| c.params.contains(&("work".into(), "matmul".into())))
        );
        let f = TaskPool.sweep(Suite::Full, &topo);
        assert!(f.len() > d.len());
        assert!(
            f.iter()
                .any(|c| c.params.contains(&("workers".into(), "4".into())))
        );
    }
}
