//! `app-trade`: a three-tier, brokerage-like load (paper 004 s4, "Websphere eBusiness
//! Benchmark": HTTP clients, an application server running the business logic, a
//! relational database).
//!
//! * **Database**: the private PostgreSQL `oltp-pg` starts ([`crate::db::pg`]), fsync
//!   and synchronous commit off, loaded with `users` accounts, `symbols` quotes and each
//!   account's opening holdings ([`smtlab_trade::db`]). `db=same` puts it on the
//!   placement beside the application (and in its counters); `db=apart` on the client
//!   CPUs, started from a client thread so the counters see the application alone.
//! * **Application** (`server=builtin`): [`smtlab_trade`], axum on a tokio runtime with
//!   one worker per placement CPU, each pinned, and a deadpool pool of `pool`
//!   connections; it runs in smtlab's process, started after the counters open, so
//!   `--counters` counts it as the web lab counts its servers. `server=cmd`: the user's
//!   own application, run by `sh` on the placement with `{port}` and `{db}` (a
//!   `postgresql://` URL of the loaded database) filled in, answering the same routes.
//! * **Clients**: smtlab's load generator on the client CPUs, `conns` closed-loop
//!   kept-alive connections. Every user logs in before the load (`POST /login`); its
//!   requests carry the session cookie. The mix, per user: quote 40, home 20,
//!   portfolio 12, account 12, buy 8, sell 8 (read-mostly, as Trade's scenario is),
//!   over the user's own symbols.
//! * **Value**: transactions (answered requests) per second; latency percentiles from
//!   the load generator's HDR histogram; CPU per transaction of the application
//!   (its threads', or its process tree's) and of the database (its processes'), from
//!   the scheduler's counts. The sample's CPU time (work per CPU second) is the
//!   application's, plus the database's with `db=same`.
//! * **Check**: after every sample the books are audited ([`smtlab_trade::Audit`]):
//!   cash, shares and volumes must equal the opening figures plus the orders. A failed
//!   request or an unbalanced book fails the sample; no throughput is reported beside
//!   it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use smtlab_bench::client::ClientSide;
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample, Suite, SweepCell};
use smtlab_loadgen::{ClientPool, LoadConfig, LoadReport, Mix, Pinning, RequestSpec};
use smtlab_model::{BenchInfo, Direction, ReportSection, Topology, ValueKind};
use smtlab_trade::{Audit, Scale, ServerConfig, TradeServer};

use crate::db::pg::{DB_USER, PgInstall, PgServer, PgSettings};
use crate::scratch::ScratchDir;
use crate::web::real::{RealServer, ServerError as RealServerError};

pub const NAME: &str = "app-trade";

/// Metric keys of this workload beside the web lab's.
pub mod keys {
    pub const TRANSACTIONS_PER_S: &str = "transactions_per_s";
    pub const APP_CPU_NS_PER_TX: &str = "app_cpu_ns_per_tx";
    pub const DB_CPU_NS_PER_TX: &str = "db_cpu_ns_per_tx";
    pub const ORDERS_IN_SAMPLE: &str = "orders_in_sample";
    pub const ORDERS_TOTAL: &str = "orders_total";
    pub const BUYS_TOTAL: &str = "buys_total";
    pub const SELLS_TOTAL: &str = "sells_total";
    pub const ACCOUNTS_AUDITED: &str = "accounts_audited";
    pub const APP_WORKERS: &str = "app_workers";
    pub const POOL_CONNECTIONS: &str = "pool_connections";
    pub const DB_SAME: &str = "db_on_placement";
    pub const APP_PORT: &str = "app_port";
    pub const DB_PORT: &str = "db_port";
}

/// The mix's weights (per user; the symbol-bound requests split theirs over the user's
/// symbols).
const MIX: [(Op, f64); 6] = [
    (Op::Quote, 40.0),
    (Op::Home, 20.0),
    (Op::Portfolio, 12.0),
    (Op::Account, 12.0),
    (Op::Buy, 8.0),
    (Op::Sell, 8.0),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Quote,
    Home,
    Portfolio,
    Account,
    Buy,
    Sell,
}

/// The `app-trade` workload.
pub struct AppTrade;

use smtlab_bench::params::declare as param;

impl Benchmark for AppTrade {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "app".into(),
            unit: "tps".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1.0 },
            description: "Three-tier brokerage (Trade-like): HTTP clients apart, an axum + \
                          tokio application server with a PostgreSQL pool on the placement \
                          (sessions, JSON/HTML pages, quote/portfolio/buy/sell \
                          transactions), the private PostgreSQL on the placement or apart; \
                          transactions per second, books audited after every sample"
                .into(),
            origin: "paper 004 s4 (Websphere eBusiness Benchmark)".into(),
            params: vec![
                param(
                    "server",
                    "builtin",
                    None,
                    "builtin (axum + tokio + deadpool-postgres, in smtlab) | cmd (your own application: see cmd)",
                ),
                param(
                    "cmd",
                    "",
                    None,
                    "server=cmd: your application's command, run by sh on the placement; {port} and {db} (a postgresql:// URL of the loaded trade schema) are filled in; it answers the same routes (see docs)",
                ),
                param(
                    "port",
                    "0",
                    None,
                    "server=cmd: the port your application listens on (0: the free port put in {port})",
                ),
                param(
                    "db",
                    "same",
                    None,
                    "same: PostgreSQL on the placement beside the application; apart: on the client CPUs",
                ),
                param("users", "200", Some("20"), "accounts, each logged in once"),
                param("symbols", "1000", Some("40"), "quotes (s:0, s:1, ...)"),
                param(
                    "conns",
                    "64",
                    Some("8"),
                    "closed-loop kept-alive client connections",
                ),
                param(
                    "pool",
                    "auto",
                    None,
                    "server=builtin: database connections (auto: 4 per placement CPU, at most conns)",
                ),
                param(
                    "duration",
                    "2s",
                    Some("500ms"),
                    "load per sample, a time with its unit",
                ),
                crate::client_threads_param(),
            ],
            main_param: Some("conns".into()),
            report: ReportSection::Oltp,
        }
    }

    fn client_side(&self) -> bool {
        true
    }

    /// A sample is `duration` of load after a tenth of it of warm-up, then the audit;
    /// setting up runs initdb, starts the server and loads the data set (0.8 to 1.2 s
    /// on a 2-CPU machine with 20 and 200 users).
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let duration = crate::any_duration_s(ctx.params)?;
        let users = ctx.params.get_f64("users")?;
        Ok(crate::load_cost(
            duration * 1.1 + 0.1,
            1.0 + users / 5_000.0,
        ))
    }

    fn sweep(&self, suite: Suite, _topo: &Topology) -> Vec<SweepCell> {
        let mut v = crate::sweep_values(suite, "conns", &[8], &[1, 8, 256]);
        if suite == Suite::Full {
            v.push(SweepCell::everywhere(&[("db", "apart".into())]));
        }
        v
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let cfg = Config::from_params(ctx.params)?;
        let client = ctx.client_side(NAME)?;
        let install = PgInstall::find().map_err(|e| e.of_bench(NAME))?;
        let cpus: Vec<u32> = ctx.placement.cpus.clone();
        let placement_set = ctx.placement.pinned().then(|| ctx.placement.cpu_set());
        let workers = cpus.len().max(1);
        let pool_size = cfg
            .pool
            .unwrap_or_else(|| (4 * workers).min(cfg.conns))
            .max(1);
        let settings = PgSettings {
            port: 0,
            shared_buffers_bytes: 128 << 20,
            // The pool (or the user's application's), plus room for the audit.
            max_connections: u32::try_from(pool_size.max(cfg.conns))
                .unwrap_or(u32::MAX)
                .saturating_add(10),
            fsync: false,
            synchronous_commit: false,
            extra: Vec::new(),
        };
        let db = if cfg.db_same {
            let server = PgServer::start(&install, &settings, placement_set.as_ref())
                .map_err(|e| e.of_bench(NAME))?;
            Database {
                server,
                _holder: None,
            }
        } else {
            Database::apart(client, install, settings)?
        };
        let db_config = db_config(db.server.port());
        let scale = Scale::new(cfg.users, cfg.symbols).map_err(trade_err)?;
        smtlab_trade::db::setup_blocking(&db_config, scale).map_err(trade_err)?;

        let app = match &cfg.server {
            Server::Builtin => App::Builtin(
                TradeServer::start(&ServerConfig {
                    listen: ([127, 0, 0, 1], 0).into(),
                    cpus: if ctx.placement.pinned() {
                        cpus.clone()
                    } else {
                        Vec::new()
                    },
                    workers,
                    pool_size,
                    db: db_config.clone(),
                })
                .map_err(trade_err)?,
            ),
            Server::Cmd { cmd, port } => {
                let root = ScratchDir::create(NAME, &std::env::temp_dir(), "smtlab-trade-")?;
                let url = format!(
                    "postgresql://{DB_USER}@127.0.0.1:{}/postgres",
                    db.server.port()
                );
                let text = cmd.replace("{db}", &url);
                let server = RealServer::custom(&text, *port, root.path(), &cpus)
                    .map_err(|e| BenchError::unsupported(NAME, e.to_string()))?;
                App::Cmd {
                    server,
                    _root: root,
                }
            }
        };
        let addr = app.addr();
        let sessions = login_all(addr, cfg.users)?;
        let mix = build_mix(&scale, &sessions, &addr.to_string())?;
        let threads = match cfg.threads {
            0 => client.cpus().len(),
            n => n,
        }
        .clamp(1, cfg.conns);
        let pool = ClientPool::start(Pinning::Client(client), threads).map_err(|e| {
            BenchError::unsupported(NAME, format!("cannot start the client threads: {e}"))
        })?;
        let mut load = LoadConfig::new(addr, cfg.conns, cfg.duration);
        load.threads = threads;
        load.warmup = (cfg.duration / 10).min(Duration::from_millis(500));
        if crate::web::client_cores_apart(client.cpus(), &cpus, ctx.topology) {
            load.busy_poll = crate::web::CLIENT_BUSY_POLL;
        }
        let last = smtlab_trade::db::audit_blocking(&db_config).map_err(trade_err)?;
        if let Some(p) = last.problem() {
            return Err(check(format!(
                "the books do not balance before the load: {p}"
            )));
        }
        Ok(Box::new(TradeInstance {
            load,
            mix: Arc::new(mix),
            pool,
            app,
            db_config,
            last,
            workers,
            pool_size,
            db_same: cfg.db_same,
            db,
            seed: 1,
        }))
    }
}

/// The run's settings, from the cell's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub server: Server,
    pub db_same: bool,
    pub users: u32,
    pub symbols: u32,
    pub conns: usize,
    /// `None`: auto.
    pub pool: Option<usize>,
    pub duration: Duration,
    pub threads: usize,
}

/// Which application serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Server {
    Builtin,
    Cmd { cmd: String, port: u16 },
}

impl Config {
    pub fn from_params(p: &smtlab_bench::Params) -> Result<Config, BenchError> {
        let server = match p.get_str("server")? {
            "builtin" => Server::Builtin,
            "cmd" => {
                let port = crate::cmd_port(p)?;
                let cmd = p.get_str("cmd")?.to_string();
                // Checked before any server starts, as the web lab's server=cmd is.
                if cmd.trim().is_empty() {
                    return Err(BenchError::unsupported(
                        NAME,
                        RealServerError::NoCommand.to_string().replace(
                            "YOUR SERVER COMMAND",
                            "YOUR APP --listen 127.0.0.1:{port} --db {db}",
                        ),
                    ));
                }
                if port == 0 && !cmd.contains("{port}") {
                    return Err(BenchError::unsupported(
                        NAME,
                        RealServerError::NoPort { cmd }.to_string(),
                    ));
                }
                Server::Cmd { cmd, port }
            }
            v => return Err(crate::bad_param("server", v, "builtin or cmd")),
        };
        let db_same = crate::one_of(p, "db", &[("same", true), ("apart", false)])?;
        let bounded = |name: &str, lo: u64, hi: u64| crate::bounded(p, name, lo, hi);
        let users = bounded("users", 1, 100_000)? as u32;
        let symbols = bounded(
            "symbols",
            u64::from(smtlab_trade::db::SYMBOLS_PER_USER),
            1_000_000,
        )? as u32;
        let conns = bounded("conns", 1, 10_000)? as usize;
        let pool = match p.get_str("pool")? {
            "auto" => None,
            _ => Some(bounded("pool", 1, 1_000)? as usize),
        };
        let threads = bounded("threads", 0, 1_024)? as usize;
        let duration = p.get_duration_in(
            "duration",
            Duration::from_millis(100)..=Duration::from_secs(3600),
        )?;
        Ok(Config {
            server,
            db_same,
            users,
            symbols,
            conns,
            pool,
            duration,
            threads,
        })
    }
}

fn check(reason: String) -> BenchError {
    BenchError::check(NAME, reason)
}

fn trade_err(e: smtlab_trade::TradeError) -> BenchError {
    match e {
        smtlab_trade::TradeError::Config(s) => BenchError::unsupported(NAME, s),
        e => BenchError::io(
            NAME,
            "the trade application",
            std::io::Error::other(e.to_string()),
        ),
    }
}

/// The loaded database's connection settings (loopback, trust authentication).
pub fn db_config(port: u16) -> smtlab_trade::DbConfig {
    let mut c = smtlab_trade::DbConfig::new();
    c.host("127.0.0.1")
        .port(port)
        .user(DB_USER)
        .dbname("postgres")
        .application_name("smtlab-trade");
    c
}

/// The database, on the placement or (`db=apart`) held by a thread of the client side:
/// the server is tied to the thread that started it (it dies with it), and that
/// thread's children are not counted as the placement's.
struct Database {
    server: PgServer,
    // Dropped after the server: the thread ends once the server has stopped.
    _holder: Option<smtlab_placement::workers::Workers<smtlab_placement::workers::Job>>,
}

impl Database {
    /// The server started from a new thread of the client side, pinned to its CPUs.
    fn apart(
        client: &ClientSide,
        install: PgInstall,
        settings: PgSettings,
    ) -> Result<Database, BenchError> {
        let mut holder = smtlab_placement::workers::Workers::default();
        holder
            .add_runner(|body| client.spawn("smtlab-trade-db", None, body), || true)
            .map_err(|e| BenchError::io(NAME, "start the database thread on the client CPUs", e))?;
        let cpus = client.cpus().clone();
        let server = holder
            .run_on(0, move || PgServer::start(&install, &settings, Some(&cpus)))
            .recv()
            .map_err(|_| check("the database thread stopped before the server started".into()))?
            .map_err(|e| e.of_bench(NAME))?;
        Ok(Database {
            server,
            _holder: Some(holder),
        })
    }
}

/// The application: built in, or the user's command (with the empty directory it runs
/// in).
enum App {
    Builtin(TradeServer),
    Cmd {
        server: RealServer,
        _root: ScratchDir,
    },
}

impl App {
    fn addr(&self) -> SocketAddr {
        match self {
            App::Builtin(s) => s.addr(),
            App::Cmd { server, .. } => server.addr(),
        }
    }

    fn cpu_ns(&self) -> u64 {
        match self {
            App::Builtin(s) => s.cpu_ns(),
            App::Cmd { server, .. } => server.pid().map_or(0, tree_cpu_ns),
        }
    }
}

/// CPU time in nanoseconds of process `root` and its descendants, every thread, as
/// the scheduler counts it (`/proc/PID/task/TID/schedstat`). Processes that ended are
/// not counted: the database's connections and the application live through the cell.
pub fn tree_cpu_ns(root: u32) -> u64 {
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid =
            smtlab_control::coresched::stat_field(&stat, 4).and_then(|p| u32::try_from(p).ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree.iter()
        .map(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|t| t.file_name().to_str()?.parse().ok())
                .filter_map(smtlab_placement::pin::thread_cpu_ns)
                .sum::<u64>()
        })
        .sum()
}

/// Logs every user in (`POST /login?uid=N`) and returns their session tokens.
fn login_all(addr: SocketAddr, users: u32) -> Result<Vec<String>, BenchError> {
    (0..users)
        .map(|u| {
            let (status, body) = http_call(addr, "POST", &format!("/login?uid={u}"), None)
                .map_err(|e| BenchError::io(NAME, format!("log user {u} in at {addr}"), e))?;
            if status != 200 {
                return Err(check(format!(
                    "POST /login?uid={u} answered {status}: {}",
                    body.lines().next().unwrap_or("")
                )));
            }
            let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
                check(format!(
                    "POST /login?uid={u}: expected JSON with a session: {e}"
                ))
            })?;
            v.get("session")
                .and_then(|s| s.as_str())
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic() && b != b';'))
                .map(String::from)
                .ok_or_else(|| {
                    check(format!(
                        "POST /login?uid={u}: no usable \"session\" in {body}"
                    ))
                })
        })
        .collect()
}

/// One request on a connection of its own (HTTP/1.0, read to the close): status and
/// body. For logging in and for tests, not for load.
pub fn http_call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    session: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let cookie = session.map_or(String::new(), |t| format!("Cookie: session={t}\r\n"));
    let len = if method == "POST" {
        "Content-Length: 0\r\n"
    } else {
        ""
    };
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n{cookie}{len}Connection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.take(1 << 20).read_to_string(&mut text)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no complete HTTP head from {addr}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line from {addr}: {head:.60}")))?;
    Ok((status, body.to_string()))
}

/// Every user's requests with their session cookie, weighted by [`MIX`].
fn build_mix(scale: &Scale, sessions: &[String], host: &str) -> Result<Mix, BenchError> {
    let per = smtlab_trade::db::SYMBOLS_PER_USER;
    let mut specs = Vec::new();
    let mut weights = Vec::new();
    for (u, token) in sessions.iter().enumerate() {
        let u = u as u32;
        let cookie = format!("Cookie: session={token}");
        let mut add = |method: &str, path: String, w: f64| {
            let mut spec = RequestSpec::get(path);
            spec.method = method.into();
            spec.headers.push(cookie.clone());
            specs.push(spec);
            weights.push(w);
        };
        for (op, w) in MIX {
            match op {
                Op::Home => add("GET", "/home".into(), w),
                Op::Portfolio => add("GET", "/portfolio".into(), w),
                Op::Account => add("GET", "/account".into(), w),
                Op::Quote | Op::Buy | Op::Sell => {
                    for j in 0..per {
                        let sym = scale.user_symbol(u, j);
                        // 1 to 5 shares, 3 on average.
                        let q = 1 + (u + j) % 5;
                        let (method, path) = match op {
                            Op::Quote => ("GET", format!("/quote?s={sym}")),
                            Op::Buy => ("POST", format!("/buy?s={sym}&q={q}")),
                            _ => ("POST", format!("/sell?s={sym}&q={q}")),
                        };
                        add(method, path, w / f64::from(per));
                    }
                }
            }
        }
    }
    Mix::weighted(&specs, &weights, host, true).map_err(|e| check(e.to_string()))
}

struct TradeInstance {
    // Dropped first and in this order: the application stops before its database.
    app: App,
    db: Database,
    load: LoadConfig,
    mix: Arc<Mix>,
    pool: ClientPool,
    db_config: smtlab_trade::DbConfig,
    last: Audit,
    workers: usize,
    pool_size: usize,
    db_same: bool,
    seed: u64,
}

impl Instance for TradeInstance {
    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }

    fn sample(&mut self, _iterations: u64) -> Result<RawSample, BenchError> {
        self.seed += 1;
        self.load.seed = self.seed;
        let app = &self.app;
        let db_pid = self.db.server.pid();
        let app0 = app.cpu_ns();
        let db0 = db_pid.map_or(0, tree_cpu_ns);
        let r = self
            .pool
            .run(&self.load, self.mix.clone())
            .map_err(|e| check(e.to_string()))?;
        let app_ns = app.cpu_ns().saturating_sub(app0);
        let db_ns = db_pid.map_or(0, tree_cpu_ns).saturating_sub(db0);
        let audit = smtlab_trade::db::audit_blocking(&self.db_config).map_err(trade_err)?;
        if let Some(p) = audit.problem() {
            return Err(check(format!("the books do not balance: {p}")));
        }
        let orders = audit.orders.saturating_sub(self.last.orders);
        self.last = audit;
        let mut s = sample_from(&r)?;
        let tx = s.work.max(1.0);
        let mt = &mut s.metrics;
        mt.insert(keys::APP_CPU_NS_PER_TX.into(), app_ns as f64 / tx);
        mt.insert(keys::DB_CPU_NS_PER_TX.into(), db_ns as f64 / tx);
        mt.insert(keys::ORDERS_IN_SAMPLE.into(), orders as f64);
        mt.insert(keys::ORDERS_TOTAL.into(), audit.orders as f64);
        mt.insert(keys::BUYS_TOTAL.into(), audit.buys as f64);
        mt.insert(keys::SELLS_TOTAL.into(), audit.sells as f64);
        mt.insert(keys::ACCOUNTS_AUDITED.into(), audit.accounts as f64);
        mt.insert(keys::APP_WORKERS.into(), self.workers as f64);
        mt.insert(keys::POOL_CONNECTIONS.into(), self.pool_size as f64);
        mt.insert(keys::DB_SAME.into(), f64::from(u8::from(self.db_same)));
        mt.insert(keys::APP_PORT.into(), f64::from(app.addr().port()));
        if let Some(port) = self.db_config.get_ports().first() {
            mt.insert(keys::DB_PORT.into(), f64::from(*port));
        }
        s.cpu_ns = Some(app_ns + if self.db_same { db_ns } else { 0 });
        Ok(s)
    }
}

/// A sample from one load: the value is answered requests (transactions) per second of
/// the measured window; failed requests fail the sample.
pub fn sample_from(r: &LoadReport) -> Result<RawSample, BenchError> {
    let nothing = "no transaction completed in the sample";
    let mut metrics = crate::web::load_metrics(NAME, r, nothing, r.requests_per_s())?;
    metrics.insert(keys::TRANSACTIONS_PER_S.into(), r.requests_per_s());
    Ok(RawSample {
        elapsed_ns: r.window_ns,
        work: r.requests as f64,
        metrics,
        ..RawSample::default()
    })
}

#[cfg(test)]
mod tests;
