//! `nfs-sfs`: the kernel NFS server under an SFS-like load (paper 004 s4, "SPEC
//! SFS97_R1 V3.0": NFS clients driving a mix of operations at a file server; 98% of
//! the server's time was in the kernel).
//!
//! * **Server** (`server=kernel`, the default, [`kernel`]): nfsd in a network and
//!   mount namespace smtlab creates, exporting a private directory, its threads
//!   (`nfsd_threads`) pinned to the placement. Where it cannot run (the kernel has no
//!   nfsd, not root, nfs-kernel-server missing) the cell is skipped with the one-line
//!   reason.
//! * **Server** (`server=user`, [`user`]): a user-space NFSv3 server (the `nfs3_server`
//!   crate) exporting a scratch directory on disk from smtlab's own threads, one per
//!   placement CPU, pinned, on 127.0.0.1. It runs where nfsd cannot (the quick suite
//!   measures it), and it is not the kernel's nfsd that paper 004 measured: the cell's
//!   `server` parameter says which one a result is.
//! * **Clients** ([`sfs`]): `clients` threads on the client CPUs, each joined to the
//!   namespace and speaking NFSv3 from user space (the `nfs3_client` crate) with
//!   AUTH_UNIX credentials, one operation outstanding each, SFS 3.0's mix with 8 KiB
//!   transfers. Over TCP by default; `transport=udp` ([`udp`]) sends the calls as
//!   datagrams as SFS97 did (nfsd started with UDP on, which nfs-utils leaves off;
//!   `server=kernel` only), an unanswered call sent again and counted
//!   (`udp_retransmits`). By default each client runs back
//!   to back (a closed loop); `rate=R` paces them as SFS's load processes are paced:
//!   R operations per second requested in total, R/`clients` each, every operation
//!   started at its scheduled time ([`sfs::Pacer`]: never early; after a slow answer a
//!   client makes up at most 4 overdue slots back to back and drops older ones, so it
//!   never bursts to catch up), so a rate the server cannot serve shows as an achieved
//!   rate below the requested one (`kept_up` 0: under 95% of it). Response times run
//!   from an operation's send to its answer, as SFS's.
//! * **Value**: operations per second. A sample whose mean response time exceeds
//!   `limit` fails with both figures (SFS reports throughput at a response-time
//!   bound); latency percentiles by operation are metrics; the sample's CPU time is
//!   the server's threads' (nfsd's, or the user-space server's).
//! * **Peak search** (`search=peak`, SPEC SFS 3.0's curve): each sample first runs a
//!   short closed-loop probe that finds the capacity C at `clients`, then `points` load
//!   points requesting C/`points`, 2C/`points`, ... C operations per second (SFS
//!   runs up to 10 points at rising requested rates); the probe and each point take an
//!   equal share of `duration` (`duration / (points + 1)`, at least 50 ms each). The
//!   sample's value is the highest achieved rate among the points whose mean response
//!   time is within `limit` ([`choose_peak`]); with none within, the sample fails with
//!   the closest point's figures and the limit. Every point's requested and achieved
//!   rates, mean and p99 response go into the sample's metrics
//!   ([`smtlab_model::metrics::nfs::point_key`]); the latencies by operation and the
//!   server's CPU time are the chosen point's.
//! * **Check**: every read is compared with the file's pattern, every getattr's size
//!   and readlink's target checked; a mismatch or a failed operation fails the sample.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use smtlab_bench::client::ClientSide;
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample, Suite, SweepCell};
use smtlab_model::metrics::nfs::{self as keys, PointField};
use smtlab_model::{BenchInfo, Direction, ReportSection, Topology, ValueKind};

pub mod kernel;
pub mod sfs;
pub mod udp;
pub mod user;

use sfs::{Handles, LoadResult, MIX, Shape, Target};
use udp::Transport;

pub const NAME: &str = "nfs-sfs";

/// The `nfs-sfs` workload.
pub struct NfsSfs;

use smtlab_bench::params::declare as param;

/// Which NFS server a cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// The kernel's nfsd (what paper 004 measured).
    Kernel,
    /// smtlab's user-space NFSv3 server on the placement's CPUs.
    User,
}

/// Whether a sample is one load or SFS's curve of load points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// One load per sample (back to back, or paced at `rate`).
    Off,
    /// A closed-loop probe, then `points` paced load points; the value is the peak
    /// within the limit.
    Peak,
}

/// The shortest probe or load point of a peak search.
pub const MIN_POINT: Duration = Duration::from_millis(50);
/// The most load points a peak search takes.
pub const MAX_POINTS: u32 = 20;

/// The cell's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub server: ServerKind,
    pub shape: Shape,
    pub nfsd_threads: u32,
    pub duration: Duration,
    pub limit: Duration,
    /// The clients' transport: UDP (SFS97's) where true, else TCP.
    pub udp: bool,
    /// Requested operations per second in total (`None`: back to back).
    pub rate: Option<f64>,
    pub search: Search,
    /// Load points of a peak search.
    pub points: u32,
}

impl Config {
    pub fn from_params(p: &smtlab_bench::Params) -> Result<Config, BenchError> {
        let bounded = |name: &str, lo: u64, hi: u64| {
            Ok::<_, BenchError>(crate::bounded(p, name, lo, hi)? as u32)
        };
        let file_bytes = p.get_bytes("file_size")?;
        if !(1..=(64 << 20)).contains(&file_bytes) {
            return Err(crate::bad_param(
                "file_size",
                p.get_str("file_size")?,
                "1 byte to 64MiB",
            ));
        }
        let server = crate::one_of(
            p,
            "server",
            &[("kernel", ServerKind::Kernel), ("user", ServerKind::User)],
        )?;
        let udp = crate::one_of(p, "transport", &[("tcp", false), ("udp", true)])?;
        if udp && server == ServerKind::User {
            return Err(crate::bad_param(
                "transport",
                "udp",
                "tcp with server=user (smtlab's user-space NFS server speaks TCP only; \
                 udp needs server=kernel)",
            ));
        }
        let rate = match p.get_str("rate")?.trim() {
            "" => None,
            v => match v.parse::<f64>() {
                Ok(r) if r.is_finite() && r > 0.0 && r <= 10_000_000.0 => Some(r),
                _ => {
                    return Err(crate::bad_param(
                        "rate",
                        v,
                        "empty (back to back) or operations per second above 0 and up to \
                         10000000, e.g. 2000",
                    ));
                }
            },
        };
        let search = crate::one_of(p, "search", &[("off", Search::Off), ("peak", Search::Peak)])?;
        let points = bounded("points", 1, u64::from(MAX_POINTS))?;
        let duration = p.get_duration_in(
            "duration",
            Duration::from_millis(100)..=Duration::from_secs(3600),
        )?;
        if search == Search::Peak {
            if let Some(r) = rate {
                return Err(crate::bad_param(
                    "rate",
                    r,
                    "empty with search=peak (the search requests its own rates)",
                ));
            }
            if duration / (points + 1) < MIN_POINT {
                return Err(crate::bad_param(
                    "duration",
                    p.get_str("duration")?,
                    &format!(
                        "at least {} ms with search=peak and points={points} (the probe \
                         and each point take an equal share, at least {} ms each)",
                        MIN_POINT.as_millis() * u128::from(points + 1),
                        MIN_POINT.as_millis()
                    ),
                ));
            }
        }
        Ok(Config {
            server,
            shape: Shape {
                clients: bounded("clients", 1, 1024)?,
                dirs: bounded("dirs", 1, 10_000)?,
                files_per_dir: bounded("files", 1, 10_000)?,
                file_bytes: file_bytes as u32,
            },
            nfsd_threads: bounded("nfsd_threads", 1, 1024)?,
            duration,
            limit: p
                .get_duration_in("limit", Duration::from_micros(1)..=Duration::from_secs(60))?,
            udp,
            rate,
            search,
            points,
        })
    }
}

/// Whether this machine's kernel can serve NFS (`server=kernel`), or why not as the
/// cell's skip.
fn kernel_server_possible() -> Result<(), BenchError> {
    match kernel::why_not() {
        None => Ok(()),
        Some(why) => Err(BenchError::unsupported(
            NAME,
            format!("{why} (server=user measures smtlab's user-space NFS server instead)"),
        )),
    }
}

impl Benchmark for NfsSfs {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "nfs".into(),
            unit: "ops/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1.0 },
            description: "SFS-like NFS file server: the kernel's nfsd in a private network \
                          namespace, threads on the placement, NFSv3 clients apart running \
                          SPEC SFS 3.0's operation mix; operations/s within a response-time \
                          limit (search=peak: SFS's peak over load points at rising requested \
                          rates), latency by operation, every read checked; server=user (the \
                          quick form): smtlab's user-space NFSv3 server on the placement \
                          instead, for kernels without nfsd (not nfsd)"
                .into(),
            origin: "paper 004 s4 (SPEC SFS97_R1 V3.0)".into(),
            params: vec![
                smtlab_model::ParamInfo {
                    departs: vec![smtlab_model::Departure {
                        value: "user".into(),
                        note: "smtlab's user-space NFSv3 server, not the kernel's nfsd that \
                               paper 004 measured"
                            .into(),
                    }],
                    ..param(
                        "server",
                        "kernel",
                        // The quick form runs on any Linux (CI's kernels have no nfsd).
                        Some("user"),
                        "kernel: the kernel's nfsd (paper 004's); user: smtlab's user-space \
                         NFSv3 server on the placement, for kernels without nfsd (not nfsd)",
                    )
                },
                param(
                    "clients",
                    "8",
                    Some("2"),
                    "client threads, one operation outstanding each",
                ),
                param(
                    "rate",
                    "",
                    None,
                    "requested operations per second in total, shared evenly by the \
                     clients, each paced to its share as an SFS load process (empty: \
                     back to back)",
                ),
                param(
                    "search",
                    "off",
                    None,
                    "off: one load per sample; peak: SFS's curve, a closed-loop probe \
                     finds the capacity C, then load points at rising shares of C, the \
                     value the highest achieved ops/s within the limit",
                ),
                param(
                    "points",
                    "10",
                    Some("3"),
                    "search=peak: load points, at 1/points, 2/points, ... of the probe's \
                     capacity",
                ),
                param("dirs", "8", Some("2"), "directories of the file set"),
                param("files", "16", Some("4"), "files per directory"),
                param(
                    "file_size",
                    "64KiB",
                    Some("16KiB"),
                    "bytes per file (read and written 8 KiB at a time)",
                ),
                param(
                    "nfsd_threads",
                    "8",
                    None,
                    "nfsd threads (rpc.nfsd N), pinned to the placement (server=kernel; \
                     server=user has one thread per placement CPU)",
                ),
                param(
                    "duration",
                    "2s",
                    Some("500ms"),
                    "load per sample, a time with its unit (search=peak: shared equally \
                     by the probe and the points)",
                ),
                param(
                    "limit",
                    "40ms",
                    None,
                    "a sample whose mean response time is above this fails (search=peak: \
                     the points above it are not chosen)",
                ),
                param(
                    "transport",
                    "tcp",
                    None,
                    "tcp, or udp (SFS97's transport; server=kernel only): MOUNT and NFS \
                     calls as datagrams, an unanswered call sent again (udp_retransmits)",
                ),
            ],
            main_param: Some("clients".into()),
            report: ReportSection::Oltp,
        }
    }

    fn client_side(&self) -> bool {
        true
    }

    /// Why cells cannot run here, said once before measuring.
    fn notes(&self) -> Vec<String> {
        kernel::why_not()
            .map(|w| {
                format!(
                    "{NAME}: {w} (server=kernel cells skipped; server=user runs smtlab's \
                     user-space NFS server instead)"
                )
            })
            .into_iter()
            .collect()
    }

    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let d = crate::any_duration_s(ctx.params)?;
        // Each load connects its clients first: a peak search runs points + 1 loads.
        let loads = if ctx.params.get_str("search")? == "peak" {
            ctx.params.get_u64("points")?.min(u64::from(MAX_POINTS)) as f64 + 1.0
        } else {
            1.0
        };
        // Starting the kernel's nfsd takes seconds; smtlab's own server, a fraction.
        let setup_s = if ctx.params.get_str("server")? == "user" {
            0.3
        } else {
            // The plan skips what `prepare` will refuse, and costs it nothing.
            kernel_server_possible()?;
            2.0
        };
        Ok(crate::load_cost(d + 0.05 * loads, setup_s))
    }

    fn sweep(&self, suite: Suite, _topo: &Topology) -> Vec<SweepCell> {
        // The quick suite's cell is the quick form's (`server=user`).
        crate::sweep_values(suite, "clients", &[8], &[1, 8, 32])
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let cfg = Config::from_params(ctx.params)?;
        let client = ctx.client_side(NAME)?;
        if cfg.server == ServerKind::Kernel {
            kernel_server_possible()?;
        }
        let dir = crate::scratch::ScratchDir::create(NAME, &std::env::temp_dir(), "smtlab-nfs-")?;
        let export = dir.path().join("export");
        std::fs::create_dir(&export).map_err(|e| {
            BenchError::io(
                NAME,
                format!("create {}", smtlab_model::quote::path(&export)),
                e,
            )
        })?;
        let (server, target, netns) = match cfg.server {
            ServerKind::Kernel => {
                let k = kernel::KernelNfs::start(
                    &export,
                    dir.path(),
                    cfg.nfsd_threads,
                    cfg.udp,
                    &ctx.placement.cpu_set(),
                )
                .map_err(|e| BenchError::unsupported(NAME, e.to_string()))?;
                let target = Target {
                    ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                    // Known ports: the client needs no portmapper.
                    portmap_port: 111,
                    mount_port: Some(kernel::MOUNTD_PORT),
                    nfs_port: Some(kernel::NFSD_PORT),
                    export: export.display().to_string(),
                    privileged: true,
                    transport: if cfg.udp {
                        Transport::Udp {
                            retransmit: udp::Retransmit::default(),
                            retransmits: Arc::default(),
                        }
                    } else {
                        Transport::Tcp
                    },
                };
                let ns = k.netns();
                (Server::Kernel(k), target, Some(ns))
            }
            ServerKind::User => {
                let cpus: Vec<u32> = if ctx.placement.pinned() {
                    ctx.placement.cpus.clone()
                } else {
                    Vec::new()
                };
                let workers = ctx.placement.cpus.len().max(1);
                let u = user::UserNfs::start(&export, &cpus, workers)
                    .map_err(|e| BenchError::io(NAME, "start the user-space NFS server", e))?;
                let target = Target {
                    ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                    // MOUNT and NFS on the one port.
                    portmap_port: u.port(),
                    mount_port: Some(u.port()),
                    nfs_port: Some(u.port()),
                    export: "/".into(),
                    privileged: false,
                    transport: Transport::Tcp,
                };
                (Server::User(u), target, None)
            }
        };
        let clients = start_clients(client, cfg.shape.clients, netns)?;
        let handles = setup_on(&clients, &target, cfg.shape)?;
        Ok(Box::new(NfsInstance {
            cfg,
            target,
            handles: Arc::new(handles),
            clients,
            server,
            _dir: dir,
            seed: 1,
        }))
    }
}

/// The server a cell started.
enum Server {
    Kernel(kernel::KernelNfs),
    User(user::UserNfs),
}

impl Server {
    fn cpu_ns(&self) -> u64 {
        match self {
            Server::Kernel(k) => k.cpu_ns(),
            Server::User(u) => u.cpu_ns(),
        }
    }

    fn threads(&self) -> usize {
        match self {
            Server::Kernel(k) => k.threads.len(),
            Server::User(u) => u.thread_ids().len(),
        }
    }
}

/// The client threads, started once from the client side (thread k on the client's
/// CPU for thread k, joined to the server's namespace when there is one) and given one
/// load after another.
pub type Clients = smtlab_placement::workers::Workers<smtlab_placement::workers::Job>;

/// Starts the `n` threads of [`Clients`].
pub fn start_clients(
    client: &ClientSide,
    n: u32,
    netns: Option<PathBuf>,
) -> Result<Clients, BenchError> {
    let mut pool = Clients::default();
    for k in 0..n as usize {
        let ns = netns.clone();
        let name = format!("smtlab-sfs-{k}");
        pool.add_runner(
            |body| client.spawn(&name, Some(client.cpu_for_thread(k)), body),
            // A thread that cannot join runs no job: its load reports the error.
            move || ns.is_none_or(|p| kernel::join_netns(&p).is_ok()),
        )
        .map_err(|e| BenchError::io(NAME, "start a client thread", e))?;
    }
    Ok(pool)
}

/// Makes the file set from client thread 0 (in the server's namespace).
pub fn setup_on(clients: &Clients, target: &Target, shape: Shape) -> Result<Handles, BenchError> {
    let t = target.clone();
    clients
        .run_on(0, move || sfs::setup(&t, shape))
        .recv()
        .map_err(|_| check("the client thread could not join the server's namespace".into()))?
        .map_err(|e| check(format!("making the file set: {e}")))
}

/// One load on every client thread at once: back to back, or with `rate` (operations
/// per second in total) each client paced to `rate / clients`, their first slots spread
/// over one interval.
pub fn run_load(
    clients: &Clients,
    target: &Target,
    handles: &Arc<Handles>,
    shape: Shape,
    duration: Duration,
    seed: u64,
    rate: Option<f64>,
) -> Result<LoadResult, BenchError> {
    let n = shape.clients as usize;
    let start = Arc::new(Barrier::new(n));
    let interval = rate.map(|r| Duration::from_secs_f64(n as f64 / r.max(1e-9)).min(duration));
    let rxs: Vec<_> = (0..n)
        .map(|k| {
            let (t, h, start) = (target.clone(), handles.clone(), start.clone());
            let pace = interval.map(|i| sfs::Pacer::new(i, i.mul_f64(k as f64 / n as f64)));
            clients.run_on(k, move || {
                sfs::client_load(&t, &h, shape, k as u32, seed, duration, pace, &start)
            })
        })
        .collect();
    let parts: Vec<LoadResult> = rxs
        .into_iter()
        .map(|rx| {
            rx.recv()
                .map_err(|_| check("a client thread could not join the server's namespace".into()))
        })
        .collect::<Result<_, _>>()?;
    Ok(sfs::merge(parts))
}

fn check(reason: String) -> BenchError {
    BenchError::check(NAME, reason)
}

/// A load's failures and wrong contents, which fail the sample whatever its speed.
fn checked(r: &LoadResult) -> Result<(), BenchError> {
    if r.errors > 0 {
        return Err(check(format!(
            "{} operations failed ({}); no throughput reported",
            r.errors,
            r.first_error.as_deref().unwrap_or("")
        )));
    }
    if r.content_mismatches > 0 {
        return Err(check(format!(
            "{} answers did not match the file set (read data, size or link); no throughput reported",
            r.content_mismatches
        )));
    }
    if r.ops() == 0 || r.window_ns == 0 {
        return Err(check("no operation completed in the sample".into()));
    }
    Ok(())
}

/// The sample of one load: operations per second over the window; failures, wrong
/// contents and a mean response over `limit` fail it.
pub fn sample_from(r: &LoadResult, limit: Duration) -> Result<RawSample, BenchError> {
    checked(r)?;
    let ops = r.ops();
    let mean = r.mean_response_ns();
    if mean > limit.as_nanos() as f64 {
        return Err(check(format!(
            "mean response {:.2} ms is over the {:.2} ms limit at {:.0} ops/s: fewer clients or a longer limit",
            mean / 1e6,
            limit.as_secs_f64() * 1e3,
            r.ops_per_s()
        )));
    }
    let mut m = BTreeMap::new();
    m.insert("ops_per_s".into(), r.ops_per_s());
    m.insert("mean_response_ms".into(), mean / 1e6);
    m.insert(keys::LIMIT_MS.into(), limit.as_secs_f64() * 1e3);
    m.insert("bytes_read".into(), r.bytes_read as f64);
    m.insert("bytes_written".into(), r.bytes_written as f64);
    m.insert("content_mismatches".into(), 0.0);
    let all = r.all_sorted_ns();
    for (p, name) in [(50.0, "p50"), (90.0, "p90"), (99.0, "p99")] {
        if let Some(v) = smtlab_model::stats::percentile_of_sorted(&all, p) {
            m.insert(format!("latency_{name}_ms"), v / 1e6);
        }
    }
    for ((op, ..), lat) in MIX.iter().zip(&r.latencies_ns) {
        m.insert(format!("{}_ops", op.name()), lat.len() as f64);
        if lat.is_empty() {
            continue;
        }
        let v: Vec<f64> = lat.iter().map(|&x| x as f64).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        m.insert(format!("{}_mean_ms", op.name()), mean / 1e6);
        for (p, name) in [(50.0, "p50"), (99.0, "p99")] {
            if let Some(x) = smtlab_model::stats::percentile_of_sorted(&v, p) {
                m.insert(format!("{}_{name}_ms", op.name()), x / 1e6);
            }
        }
    }
    Ok(RawSample {
        elapsed_ns: r.window_ns,
        work: ops as f64,
        metrics: m,
        ..RawSample::default()
    })
}

/// One load point of a peak search: what was requested and what the load achieved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub requested_ops_per_s: f64,
    pub achieved_ops_per_s: f64,
    pub mean_response_ms: f64,
    pub p99_response_ms: f64,
}

impl Point {
    pub fn of(requested_ops_per_s: f64, r: &LoadResult) -> Point {
        let all = r.all_sorted_ns();
        Point {
            requested_ops_per_s,
            achieved_ops_per_s: r.ops_per_s(),
            mean_response_ms: r.mean_response_ns() / 1e6,
            p99_response_ms: smtlab_model::stats::percentile_of_sorted(&all, 99.0).unwrap_or(0.0)
                / 1e6,
        }
    }

    /// Whether the load achieved what was requested (within [`keys::KEPT_UP_SHARE`]).
    pub fn kept_up(&self) -> bool {
        self.achieved_ops_per_s >= keys::KEPT_UP_SHARE * self.requested_ops_per_s
    }

    fn within(&self, limit: Duration) -> bool {
        self.mean_response_ms <= limit.as_secs_f64() * 1e3
    }
}

/// The peak of a curve (SPEC SFS's reported figure): the point with the highest
/// achieved rate among those whose mean response time is within `limit` (the first of
/// equals). With none within, the one-line reason: the closest point's figures and the
/// limit.
pub fn choose_peak(points: &[Point], limit: Duration) -> Result<usize, NoPeak> {
    let best = points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.within(limit))
        .fold(None::<(usize, f64)>, |acc, (i, p)| match acc {
            Some((_, a)) if a >= p.achieved_ops_per_s => acc,
            _ => Some((i, p.achieved_ops_per_s)),
        });
    if let Some((i, _)) = best {
        return Ok(i);
    }
    let closest = points
        .iter()
        .min_by(|a, b| a.mean_response_ms.total_cmp(&b.mean_response_ms));
    Err(match closest {
        Some(&quickest) => NoPeak::NoneWithin { limit, quickest },
        None => NoPeak::Empty,
    })
}

/// Why a curve has no peak; one line each.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum NoPeak {
    #[error(
        "no load point within the {} limit: the quickest, {:.0} of {:.0} requested \
         ops/s, had a mean response of {:.2} ms: fewer clients or a longer limit",
        smtlab_bench::params::format_duration(*.limit),
        .quickest.achieved_ops_per_s,
        .quickest.requested_ops_per_s,
        .quickest.mean_response_ms
    )]
    NoneWithin { limit: Duration, quickest: Point },
    #[error("no load point was measured")]
    Empty,
}

/// Its fields drop in order: the clients end before their server, and the server stops
/// before its export goes.
struct NfsInstance {
    cfg: Config,
    target: Target,
    handles: Arc<Handles>,
    clients: Clients,
    server: Server,
    _dir: crate::scratch::ScratchDir,
    seed: u64,
}

impl NfsInstance {
    /// One load (a fresh seed, so its creates make new names) and the server's CPU time
    /// over it.
    fn load(
        &mut self,
        duration: Duration,
        rate: Option<f64>,
    ) -> Result<(LoadResult, u64), BenchError> {
        self.seed += 1;
        let cpu0 = self.server.cpu_ns();
        let r = run_load(
            &self.clients,
            &self.target,
            &self.handles,
            self.cfg.shape,
            duration,
            self.seed,
            rate,
        )?;
        let cpu = self.server.cpu_ns();
        Ok((r, cpu.saturating_sub(cpu0)))
    }

    /// A peak search: the closed-loop probe, the points at rising shares of its rate,
    /// and the chosen point's figures with the whole curve.
    fn peak(&mut self) -> Result<RawSample, BenchError> {
        let n = self.cfg.points;
        let share = self.cfg.duration / (n + 1);
        let (probe, _) = self.load(share, None)?;
        checked(&probe)?;
        let capacity = probe.ops_per_s();
        let mut points = Vec::with_capacity(n as usize);
        let mut loads = Vec::with_capacity(n as usize);
        for i in 1..=n {
            let requested = capacity * f64::from(i) / f64::from(n);
            let (r, cpu) = self.load(share, Some(requested))?;
            checked(&r)?;
            points.push(Point::of(requested, &r));
            loads.push((r, cpu));
        }
        let best = choose_peak(&points, self.cfg.limit).map_err(|e| check(e.to_string()))?;
        let (r, cpu) = &loads[best];
        // The chosen point is within the limit: its figures, as a one-load sample's.
        let mut s = sample_from(r, self.cfg.limit)?;
        s.cpu_ns = Some(*cpu);
        let m = &mut s.metrics;
        m.insert(keys::PROBE_OPS_PER_S.into(), capacity);
        m.insert(keys::POINTS.into(), f64::from(n));
        m.insert(keys::PEAK_POINT.into(), best as f64);
        m.insert(
            keys::REQUESTED_OPS_PER_S.into(),
            points[best].requested_ops_per_s,
        );
        m.insert(
            keys::KEPT_UP.into(),
            f64::from(u8::from(points[best].kept_up())),
        );
        for (i, p) in points.iter().enumerate() {
            for (f, v) in [
                (PointField::RequestedOpsPerS, p.requested_ops_per_s),
                (PointField::AchievedOpsPerS, p.achieved_ops_per_s),
                (PointField::MeanResponseMs, p.mean_response_ms),
                (PointField::P99ResponseMs, p.p99_response_ms),
                (PointField::KeptUp, f64::from(u8::from(p.kept_up()))),
                (
                    PointField::WithinLimit,
                    f64::from(u8::from(p.within(self.cfg.limit))),
                ),
            ] {
                m.insert(keys::point_key(i, f), v);
            }
        }
        Ok(s)
    }
}

impl Instance for NfsInstance {
    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }

    fn sample(&mut self, _iterations: u64) -> Result<RawSample, BenchError> {
        let resent0 = self.target.transport.retransmits();
        let mut s = match self.cfg.search {
            Search::Off => {
                let (r, cpu) = self.load(self.cfg.duration, self.cfg.rate)?;
                let mut s = sample_from(&r, self.cfg.limit)?;
                s.cpu_ns = Some(cpu);
                if let Some(rate) = self.cfg.rate {
                    let p = Point::of(rate, &r);
                    s.metrics.insert(keys::REQUESTED_OPS_PER_S.into(), rate);
                    s.metrics
                        .insert(keys::KEPT_UP.into(), f64::from(u8::from(p.kept_up())));
                }
                s
            }
            Search::Peak => self.peak()?,
        };
        // The server's threads: nfsd's kernel threads, or the user-space server's.
        s.metrics
            .insert("server_threads".into(), self.server.threads() as f64);
        if let Some(n) = self.target.transport.retransmits() {
            s.metrics.insert(
                "udp_retransmits".into(),
                n.saturating_sub(resent0.unwrap_or(0)) as f64,
            );
        }
        s.metrics.insert(
            "user_space_server".into(),
            f64::from(u8::from(self.cfg.server == ServerKind::User)),
        );
        Ok(s)
    }
}

#[cfg(test)]
mod tests;
