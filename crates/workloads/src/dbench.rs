//! `dbench`: the file-server load of paper 001 Table 5, replayed by smtlab itself.
//!
//! N clients, each a thread on the placement's CPUs (all of them: the scheduler
//! balances within the set, as `taskset -c LIST dbench N` would) with its own directory
//! under a fresh temporary directory, replay a dbench load file (see [`load`] for the
//! format and [`replay`] for the POSIX calls each operation becomes). Load file:
//! `--param loadfile=PATH`; by default the dbench package's `client.txt` when installed,
//! else smtlab's own mix ([`load::builtin`], documented there).
//!
//! A sample is `duration` milliseconds of load: every client replays operations from
//! where it stopped (wrapping at the end of the file, as dbench does) until the time is
//! up, and the sample ends when the last client finishes its operation in progress. The
//! primary value is MB/s (10^6 bytes) of `ReadX` and `WriteX` sizes, as dbench counts
//! them; metrics hold operations/s, per-operation counts and latency percentiles, and
//! the operations whose outcome differed from the recorded NTSTATUS. The runner's
//! warm-up samples are discarded, which excludes the start of the load (dbench's own
//! warm-up). The directory and everything in it is removed when the instance is dropped.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use smtlab_bench::clock::now_ns;
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample, Suite, SweepCell};
use smtlab_model::{BenchInfo, Direction, ParamInfo, Topology, ValueKind};

pub mod load;
pub mod replay;

use load::{KINDS, LoadFile};
use replay::{Client, Stats};

const NAME: &str = "dbench";
/// Client counts of paper 001 Tables 5 and 6.
pub const PAPER_CLIENTS: [u64; 5] = [20, 30, 60, 90, 120];
/// Latencies kept per operation kind and sample for the distributions.
const MAX_SERIES_POINTS: usize = 2_000;

/// This group's workloads.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    vec![Box::new(Dbench)]
}

pub struct Dbench;

/// The client-count sweep shared by dbench and tbench: the paper's five counts in
/// `full`, three of them in `default`, none in `quick` (its base cell already runs the
/// quick client count).
pub fn clients_sweep(suite: Suite) -> Vec<SweepCell> {
    crate::sweep_values(suite, "clients", &[20, 60, 120], &PAPER_CLIENTS)
}

pub(crate) use smtlab_bench::params::declare as param;

/// The load file a `loadfile` parameter names (`auto`: the installed client.txt, else
/// smtlab's mix), parsed once per process and path.
pub fn load_for(bench: &str, spec: &str) -> Result<Arc<LoadFile>, BenchError> {
    static CACHE: Mutex<Vec<(String, Arc<LoadFile>)>> = Mutex::new(Vec::new());
    let path = match spec {
        "auto" => load::PACKAGE_LOADFILES
            .iter()
            .find(|p| Path::new(p).exists())
            .map(|p| p.to_string())
            .unwrap_or_else(|| "builtin".into()),
        other => other.to_string(),
    };
    if let Ok(c) = CACHE.lock()
        && let Some((_, f)) = c.iter().find(|(p, _)| *p == path)
    {
        return Ok(f.clone());
    }
    let parsed = if path == "builtin" {
        load::parse("builtin", &load::builtin(24))
    } else {
        load::read(Path::new(&path))
    };
    let f = Arc::new(parsed.map_err(|e| BenchError::unsupported(bench, e.to_string()))?);
    if let Ok(mut c) = CACHE.lock() {
        c.push((path, f.clone()));
    }
    Ok(f)
}

/// The parameters dbench and tbench share: client count, sample length, load file.
pub(crate) fn load_params() -> Vec<ParamInfo> {
    vec![
        param("clients", "20", Some("2"), "clients (paper: 20 to 120)"),
        param(
            "duration",
            "1s",
            Some("200ms"),
            "load per sample, a time with its unit (200ms, 2s)",
        ),
        param(
            "loadfile",
            "auto",
            None,
            "load file path; auto: the dbench package's client.txt if installed, else builtin (smtlab's own mix)",
        ),
    ]
}

/// The client count and the milliseconds of load per sample, checked.
pub(crate) fn clients_and_duration(p: &smtlab_bench::Params) -> Result<(u64, u64), BenchError> {
    Ok((
        p.get_u64_in("clients", 1..=1000, "1 to 1000")?,
        p.get_duration_in(
            "duration",
            std::time::Duration::from_millis(1)..=std::time::Duration::from_secs(3600),
        )?
        .as_millis() as u64,
    ))
}

impl Benchmark for Dbench {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "file".into(),
            unit: "MB/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1e6 },
            description: "dbench file-server load replay: N clients, each in its own directory, \
                          replaying a NetBench load file on POSIX calls"
                .into(),
            origin: "paper 001 Table 5 (dbench)".into(),
            params: {
                let mut params = load_params();
                params.push(param(
                    "dir",
                    "auto",
                    None,
                    "directory under which the clients' temporary directory is made (auto: $TMPDIR or /tmp)",
                ));
                params
            },
            main_param: Some("clients".into()),
            report: smtlab_model::ReportSection::SpeedupTable {
                caption: "paper 001 Table 5".into(),
            },
        }
    }

    fn sweep(&self, suite: Suite, _topo: &Topology) -> Vec<SweepCell> {
        clients_sweep(suite)
    }

    /// A sample is `duration` milliseconds of load.
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let (_, duration_ms) = clients_and_duration(ctx.params)?;
        Ok(crate::load_cost(duration_ms as f64 / 1e3, 0.2))
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let p = ctx.params;
        let (clients, duration) = clients_and_duration(p)?;
        let load = load_for(NAME, p.get_str("loadfile")?)?;
        let base = match p.get_str("dir")? {
            "auto" => std::env::temp_dir(),
            d => PathBuf::from(d),
        };
        let inst = DbenchInstance::start(
            load,
            &base,
            clients as usize,
            &ctx.placement.cpu_set(),
            duration * 1_000_000,
        )?;
        Ok(Box::new(inst))
    }
}

/// What a client thread is handed per sample: the time to stop at and where to send
/// its stats (or why it failed).
pub(crate) type Work = (u64, mpsc::Sender<Result<Stats, String>>);

/// The client threads of a load-file replay, shared by dbench and tbench, whose clients
/// take their work the same way: each replays until the end time it is handed and
/// replies with its stats.
pub(crate) type Clients = smtlab_placement::workers::Workers<Work>;

/// Lets every client replay for `duration_ns` from now and merges what they did;
/// returns it with the time from the start until the last client finished.
pub(crate) fn replay_sample(
    clients: &Clients,
    bench: &str,
    duration_ns: u64,
) -> Result<(Stats, u64), BenchError> {
    let check = |reason: String| BenchError::check(bench, reason);
    let (tx, rx) = mpsc::channel();
    let t0 = now_ns();
    let end = t0 + duration_ns;
    for k in 0..clients.len() {
        if !clients.send(k, (end, tx.clone())) {
            return Err(check("a client has stopped".into()));
        }
    }
    drop(tx);
    let mut total = Stats::new();
    for _ in 0..clients.len() {
        match rx.recv() {
            Ok(Ok(s)) => total.merge(s),
            Ok(Err(e)) => return Err(check(e)),
            Err(_) => return Err(check("a client stopped during the sample".into())),
        }
    }
    Ok((total, now_ns().saturating_sub(t0).max(1)))
}

pub struct DbenchInstance {
    // First: the clients stop before the directory is removed.
    clients: Clients,
    duration_ns: u64,
    load_name: String,
    // Last: removed after the clients have stopped.
    dir: crate::scratch::ScratchDir,
}

impl DbenchInstance {
    pub fn start(
        load: Arc<LoadFile>,
        base: &Path,
        clients: usize,
        cpus: &smtlab_model::CpuSet,
        duration_ns: u64,
    ) -> Result<DbenchInstance, BenchError> {
        let io = |what: String, e| BenchError::io(NAME, what, e);
        let dir = crate::scratch::ScratchDir::create(NAME, base, "smtlab-dbench-")?;
        let mut workers = Clients::default();
        for i in 0..clients {
            let root = dir.path().join(format!("client{i}"));
            std::fs::create_dir(&root)
                .map_err(|e| io(format!("create {}", smtlab_model::quote::path(&root)), e))?;
            let load = load.clone();
            let spawn = |body| crate::net::spawn_on(cpus, format!("dbench-{i}"), body);
            workers
                .add(spawn, move |rx| {
                    let mut c = Client::new(root);
                    for (end_ns, reply) in rx {
                        let mut stats = Stats::new();
                        c.run_until(&load, end_ns, &now_ns, &mut stats);
                        if reply.send(Ok(stats)).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|e| io(format!("start client thread {i} of {clients}"), e))?;
        }
        Ok(DbenchInstance {
            clients: workers,
            duration_ns,
            load_name: load.name.clone(),
            dir,
        })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Instance for DbenchInstance {
    fn sample(&mut self, _iterations: u64) -> Result<RawSample, BenchError> {
        let (mut total, elapsed_ns) = replay_sample(&self.clients, NAME, self.duration_ns)?;
        if total.bytes() == 0 {
            return Err(BenchError::check(
                NAME,
                format!(
                    "no ReadX or WriteX completed in {} ms of {}; lengthen duration",
                    self.duration_ns / 1_000_000,
                    self.load_name
                ),
            ));
        }
        // Failed work is no throughput: a full disk fails every WriteX at once, which
        // would otherwise read as a very fast disk.
        if total.failures > 0 {
            return Err(BenchError::check(
                NAME,
                format!(
                    "{} of {} operations failed that succeeded in {} (first: {}); no throughput reported",
                    total.failures,
                    total.ops,
                    self.load_name,
                    total.first_failure.as_deref().unwrap_or("unknown"),
                ),
            ));
        }
        let mut raw = load_sample(&mut total, elapsed_ns, self.clients.len());
        raw.metrics
            .insert("status_mismatches".into(), total.mismatches as f64);
        raw.metrics.insert("load_wraps".into(), total.wraps as f64);
        Ok(raw)
    }

    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }
}

/// The sample of a stretch of load-file traffic (dbench's files or tbench's packets):
/// bytes as the work, operation counts and rates, latencies per kind of operation.
pub(crate) fn load_sample(total: &mut Stats, elapsed_ns: u64, clients: usize) -> RawSample {
    let secs = elapsed_ns as f64 / 1e9;
    let mut raw = RawSample {
        elapsed_ns,
        work: total.bytes() as f64,
        ..RawSample::default()
    };
    let m = &mut raw.metrics;
    m.insert("clients".into(), clients as f64);
    m.insert("ops".into(), total.ops as f64);
    m.insert(
        smtlab_model::metrics::net::OPS_PER_S.into(),
        total.ops as f64 / secs,
    );
    m.insert("bytes_read".into(), total.bytes_read as f64);
    m.insert("bytes_written".into(), total.bytes_written as f64);
    latency_metrics(&mut raw, &mut total.latency_ns);
    raw
}

/// Per-operation counts, percentiles and strided series.
pub(crate) fn latency_metrics(raw: &mut RawSample, per_kind: &mut [Vec<f64>]) {
    for (k, lat) in per_kind.iter_mut().enumerate() {
        if lat.is_empty() {
            continue;
        }
        let key = KINDS[k].to_ascii_lowercase();
        let stride = lat.len().div_ceil(MAX_SERIES_POINTS).max(1);
        raw.series.insert(
            format!("{key}_ns"),
            lat.iter().copied().step_by(stride).collect(),
        );
        lat.sort_by(f64::total_cmp);
        let m = &mut raw.metrics;
        m.insert(format!("{key}_count"), lat.len() as f64);
        m.insert(
            format!("{key}_mean_ns"),
            lat.iter().sum::<f64>() / lat.len() as f64,
        );
        for (p, name) in [(50.0, "p50"), (99.0, "p99")] {
            if let Some(v) = smtlab_model::stats::percentile_of_sorted(lat, p) {
                m.insert(format!("{key}_{name}_ns"), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_form_runs_and_leaves_no_file() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().to_str().unwrap().to_string();
        let raws = crate::net::tests_support::run_quick(
            &Dbench,
            &["duration=100ms", &format!("dir={dir}")],
            2,
        );
        for raw in &raws {
            assert!(raw.work > 0.0);
            assert_eq!(
                raw.work,
                raw.metrics["bytes_read"] + raw.metrics["bytes_written"]
            );
            assert!(raw.metrics["ops"] > 0.0);
        }
        // The instance was dropped: nothing under the base directory.
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_builtin_load_replays_without_mismatches() {
        let base = tempfile::tempdir().unwrap();
        let load = load_for(NAME, "builtin").unwrap();
        let cpus = smtlab_placement::pin::get_affinity(0).unwrap();
        let mut inst = DbenchInstance::start(load, base.path(), 2, &cpus, 50_000_000).unwrap();
        let dir = inst.dir().to_path_buf();
        let raw = inst.sample(1).unwrap();
        assert_eq!(raw.metrics["status_mismatches"], 0.0);
        assert!(raw.metrics["ntcreatex_count"] > 0.0);
        assert!(dir.exists());
        drop(inst);
        assert!(!dir.exists());
    }

    #[test]
    fn a_malformed_load_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.txt");
        std::fs::write(&path, "Close 1 NT_STATUS_OK\nReadX 1 NT_STATUS_OK\n").unwrap();
        let e = load_for(NAME, path.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.txt:2: ReadX takes 4"), "{e}");
    }

    #[test]
    fn sweeps() {
        assert_eq!(clients_sweep(Suite::Full).len(), 5);
        assert_eq!(clients_sweep(Suite::Default).len(), 3);
        assert!(clients_sweep(Suite::Quick).is_empty());
    }
}
