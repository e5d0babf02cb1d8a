//! `oltp-pg`: PostgreSQL under pgbench (see the module overview of [`super`]).

use std::path::PathBuf;

use smtlab_bench::client::NEEDS_CLIENT_SIDE;
use smtlab_bench::{
    BenchContext, BenchError, Benchmark, Instance, Params, RawSample, Suite, SweepCell,
};
use smtlab_model::{BenchInfo, Topology};

use super::pg::{PgInstall, PgServer, PgSettings};
use super::pgbench::{self, Mode, Target};
use super::{ClientRunner, param, tps_info};

pub const NAME: &str = "oltp-pg";

/// The `oltp-pg` workload.
pub struct OltpPg;

impl Benchmark for OltpPg {
    fn info(&self) -> BenchInfo {
        tps_info(
            NAME,
            "clients",
            "A private PostgreSQL server on the placement, driven by pgbench \
                      from the client CPUs: transactions per second as pgbench prints \
                      it (without connection time), with its latencies.",
            "paper 004 s4 (OLTP)",
            vec![
                param(
                    "mode",
                    "tpcb",
                    None,
                    "tpcb (pgbench's TPC-B-like default) or select-only (-S)",
                ),
                param("clients", "8", Some("2"), "pgbench client connections (-c)"),
                param(
                    "threads",
                    "auto",
                    None,
                    "pgbench threads (-j); auto: one per client CPU, at most clients",
                ),
                param(
                    "duration",
                    "1s",
                    None,
                    "pgbench per sample (-T), whole seconds with the unit (1s, 10s); the cell repeats samples until its CI converges",
                ),
                param(
                    "scale",
                    "10",
                    Some("1"),
                    "pgbench scale factor (-i -s): 100000 accounts each",
                ),
                param(
                    "fsync",
                    "off",
                    None,
                    "on|off: the server's fsync (and full_page_writes)",
                ),
                param("synchronous_commit", "off", None, "on|off"),
                param(
                    "shared_buffers",
                    "128MiB",
                    None,
                    "the server's shared_buffers",
                ),
                param(
                    "connect",
                    "tcp",
                    None,
                    "tcp (127.0.0.1) or unix (the server's private socket)",
                ),
                param(
                    "port",
                    "0",
                    None,
                    "server port on 127.0.0.1; 0 picks a free one",
                ),
            ],
        )
    }

    fn client_side(&self) -> bool {
        true
    }

    /// A sample is one pgbench run of `duration` seconds; setting up runs initdb,
    /// starts the server and loads `scale` x 100 000 accounts (on a 2-CPU machine 0.7 s
    /// at scale 1, 1.5 s at scale 10).
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let duration = crate::any_duration_s(ctx.params)?;
        let scale = ctx.params.get_f64("scale")?;
        Ok(crate::load_cost(duration, 0.6 + 0.1 * scale))
    }

    fn sweep(&self, suite: Suite, _topo: &Topology) -> Vec<SweepCell> {
        let mut v = crate::sweep_values(suite, "clients", &[1, 32], &[1, 2, 4, 16, 32, 64]);
        if suite == Suite::Full {
            v.push(SweepCell::everywhere(&[("mode", "select-only".into())]));
            v.push(SweepCell::everywhere(&[("fsync", "on".into())]));
        }
        v
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let cfg = Config::from_params(ctx.params)?;
        let client = ctx
            .client
            .ok_or_else(|| unsupported(&format!("{NEEDS_CLIENT_SIDE} to run pgbench")))?;
        let install = PgInstall::find().map_err(|e| e.of_bench(NAME))?;
        let settings = PgSettings {
            port: cfg.port,
            shared_buffers_bytes: cfg.shared_buffers_bytes,
            // pgbench's connections, plus room for autovacuum and a stray psql.
            max_connections: (cfg.clients as u32).saturating_add(10),
            fsync: cfg.fsync,
            synchronous_commit: cfg.synchronous_commit,
            extra: Vec::new(),
        };
        let cpus = ctx.placement.pinned().then(|| ctx.placement.cpu_set());
        let server =
            PgServer::start(&install, &settings, cpus.as_ref()).map_err(|e| e.of_bench(NAME))?;
        let target = if cfg.unix {
            Target::Unix {
                dir: server.socket_dir(),
                port: server.port(),
            }
        } else {
            Target::Tcp(server.port())
        };
        let out = client
            .output(pgbench::init_command(&install, &target, cfg.scale))
            .map_err(|e| io_err("run pgbench -i", e))?;
        pgbench::check_output("pgbench -i", &out).map_err(|e| e.of_bench(NAME))?;
        let log_dir = server.dir().join("pgbench-log");
        std::fs::create_dir(&log_dir).map_err(|e| io_err("create the pgbench log directory", e))?;
        let threads = cfg
            .threads
            .unwrap_or_else(|| (client.cpus().len() as u64).clamp(1, cfg.clients));
        Ok(Box::new(PgInstance {
            client: ClientRunner::start(client, "smtlab-pgbench")
                .map_err(|e| io_err("start the pgbench thread on the client CPUs", e))?,
            install,
            target,
            log_prefix: log_dir.join("pgbench_log"),
            threads,
            settings,
            cfg,
            swept: server.swept,
            server,
        }))
    }
}

/// The run's settings, from the cell's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub mode: Mode,
    pub clients: u64,
    /// `None`: one per client CPU.
    pub threads: Option<u64>,
    pub duration_s: u64,
    pub scale: u64,
    pub fsync: bool,
    pub synchronous_commit: bool,
    pub shared_buffers_bytes: u64,
    pub unix: bool,
    pub port: u16,
}

fn on_off(p: &Params, name: &str) -> Result<bool, BenchError> {
    crate::one_of(p, name, &[("on", true), ("off", false)])
}

impl Config {
    pub fn from_params(p: &Params) -> Result<Config, BenchError> {
        let mode = crate::one_of(p, "mode", &pgbench::MODES)?;
        let positive = |name: &str| -> Result<u64, BenchError> {
            let v = p.get_u64(name)?;
            if v == 0 {
                return Err(crate::bad_param(name, "0", "a positive integer"));
            }
            Ok(v)
        };
        let clients = positive("clients")?;
        if clients > 10_000 {
            return Err(crate::bad_param("clients", clients, "at most 10000"));
        }
        let threads = match p.get_str("threads")? {
            "auto" => None,
            _ => {
                let t = positive("threads")?;
                if t > clients {
                    return Err(crate::bad_param(
                        "threads",
                        t,
                        "at most clients (pgbench needs a connection per thread)",
                    ));
                }
                Some(t)
            }
        };
        let unix = crate::one_of(p, "connect", &[("tcp", false), ("unix", true)])?;
        let port = p.get_u64("port")?;
        let port = u16::try_from(port).map_err(|_| crate::bad_param("port", port, "0..65535"))?;
        let shared_buffers_bytes = p.get_bytes("shared_buffers")?;
        if shared_buffers_bytes < (128 << 10) {
            return Err(crate::bad_param(
                "shared_buffers",
                p.get_str("shared_buffers")?,
                "at least 128KiB",
            ));
        }
        Ok(Config {
            mode,
            clients,
            threads,
            duration_s: {
                let d = p.get_duration_in(
                    "duration",
                    std::time::Duration::from_secs(1)..=std::time::Duration::from_secs(86_400),
                )?;
                if d.subsec_nanos() != 0 {
                    return Err(crate::bad_param(
                        "duration",
                        p.get_str("duration")?,
                        "whole seconds (pgbench -T), e.g. 1s or 10s",
                    ));
                }
                d.as_secs()
            },
            scale: positive("scale")?,
            fsync: on_off(p, "fsync")?,
            synchronous_commit: on_off(p, "synchronous_commit")?,
            shared_buffers_bytes,
            unix,
            port,
        })
    }
}

fn unsupported(reason: &str) -> BenchError {
    BenchError::unsupported(NAME, reason)
}

fn io_err(what: &str, source: std::io::Error) -> BenchError {
    BenchError::io(NAME, what, source)
}

struct PgInstance {
    // Fields drop in order: the client thread ends before the server stops.
    client: ClientRunner,
    install: PgInstall,
    target: Target,
    log_prefix: PathBuf,
    threads: u64,
    settings: PgSettings,
    cfg: Config,
    swept: usize,
    server: PgServer,
}

impl Instance for PgInstance {
    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }

    fn sample(&mut self, _iterations: u64) -> Result<RawSample, BenchError> {
        let cmd = pgbench::run_command(
            &self.install,
            &self.target,
            self.cfg.mode,
            self.cfg.clients,
            self.threads,
            self.cfg.duration_s,
            &self.log_prefix,
        );
        let out = self
            .client
            .output(cmd)
            .map_err(|e| io_err("run pgbench", e))?;
        pgbench::check_output("pgbench", &out).map_err(|e| e.of_bench(NAME))?;
        let summary = pgbench::parse_summary(&String::from_utf8_lossy(&out.stdout))
            .map_err(|e| e.of_bench(NAME))?;
        // Failed transactions are failed work: no TPS beside them.
        if let Some(failed) = summary.failed.filter(|&f| f > 0) {
            return Err(BenchError::check(
                NAME,
                format!(
                    "{failed} of {} transactions failed in {} s; no throughput reported",
                    failed + summary.transactions,
                    self.cfg.duration_s
                ),
            ));
        }
        if summary.tps <= 0.0 || summary.transactions == 0 {
            return Err(BenchError::check(
                NAME,
                format!(
                    "pgbench completed no transaction in {} s",
                    self.cfg.duration_s
                ),
            ));
        }
        let mut lat = pgbench::take_log_latencies(&self.log_prefix)
            .map_err(|e| io_err("read pgbench's transaction log", e))?;
        lat.sort_by(f64::total_cmp);
        Ok(sample_from(
            &summary,
            &lat,
            &self.settings,
            &self.cfg,
            self.threads,
            self.swept,
            self.server.port(),
        ))
    }
}

/// The sample of one pgbench run. The value the runner computes, `work / seconds`, is
/// pgbench's TPS: the time is the one pgbench's TPS implies for the transactions it
/// counted (transactions / tps), and the work is tps x that time, so the division gives
/// pgbench's figure back to the last bit or within one rounding step.
pub fn sample_from(
    s: &pgbench::Summary,
    sorted_latencies_us: &[f64],
    settings: &PgSettings,
    cfg: &Config,
    threads: u64,
    swept: usize,
    port: u16,
) -> RawSample {
    let elapsed_ns = ((s.transactions as f64 / s.tps) * 1e9).round().max(1.0) as u64;
    let mut sample = RawSample {
        elapsed_ns,
        work: s.tps * (elapsed_ns as f64 / 1e9),
        ..RawSample::default()
    };
    let m = &mut sample.metrics;
    m.insert("pgbench_tps".into(), s.tps);
    m.insert("transactions".into(), s.transactions as f64);
    for (key, v) in [
        ("failed_transactions", s.failed.map(|f| f as f64)),
        ("latency_avg_ms", s.latency_avg_ms),
        ("latency_stddev_ms", s.latency_stddev_ms),
        ("connection_ms", s.connection_ms),
    ] {
        if let Some(v) = v {
            m.insert(key.into(), v);
        }
    }
    for (p, name) in [(50.0, "p50"), (90.0, "p90"), (99.0, "p99"), (99.9, "p999")] {
        if let Some(v) = smtlab_model::stats::percentile_of_sorted(sorted_latencies_us, p) {
            m.insert(format!("latency_{name}_ms"), v / 1e3);
        }
    }
    let on = |b: bool| f64::from(u8::from(b));
    let figures = [
        ("logged_transactions", sorted_latencies_us.len() as f64),
        ("shared_buffers_bytes", settings.shared_buffers_bytes as f64),
        ("max_connections", settings.max_connections as f64),
        ("fsync_on", on(settings.fsync)),
        ("synchronous_commit_on", on(settings.synchronous_commit)),
        ("scale", cfg.scale as f64),
        ("clients", cfg.clients as f64),
        ("pgbench_threads", threads as f64),
        ("port", f64::from(port)),
        ("stale_dirs_swept", swept as f64),
    ];
    m.extend(figures.map(|(key, v)| (key.to_string(), v)));
    sample
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(extra: &[(&str, &str)]) -> Params {
        let info = OltpPg.info();
        let given: Vec<String> = extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Params::resolve(&info, &given, true).unwrap()
    }

    #[test]
    fn parameters_are_checked_with_one_line_errors() {
        let c = Config::from_params(&params(&[])).unwrap();
        assert_eq!(c.clients, 2);
        assert_eq!(c.mode, Mode::TpcB);
        assert!(!c.fsync);
        for (k, v, want) in [
            ("mode", "tpcc", "tpcb or select-only"),
            ("fsync", "yes", "on or off"),
            ("clients", "0", "positive"),
            ("threads", "9", "at most clients"),
            ("port", "70000", "0..65535"),
            ("connect", "udp", "tcp or unix"),
            ("shared_buffers", "1k", "at least"),
        ] {
            let e = Config::from_params(&params(&[(k, v)])).unwrap_err();
            let s = e.to_string();
            assert!(s.contains(k) && s.contains(want), "{k}={v}: {s}");
            assert!(!s.contains('\n'));
        }
    }

    #[test]
    fn the_value_is_pgbench_tps() {
        let cfg = Config::from_params(&params(&[])).unwrap();
        let settings = PgSettings {
            port: 0,
            shared_buffers_bytes: 1 << 27,
            max_connections: 12,
            fsync: false,
            synchronous_commit: false,
            extra: vec![],
        };
        for (tps, n) in [(1525.123456, 1520u64), (0.5, 1), (98765.432101, 493_827)] {
            let s = pgbench::Summary {
                tps,
                transactions: n,
                failed: Some(0),
                latency_avg_ms: Some(1.0),
                latency_stddev_ms: None,
                connection_ms: None,
            };
            let raw = sample_from(&s, &[100.0, 200.0], &settings, &cfg, 1, 0, 5432);
            // The runner's rate formula.
            let value = raw.work / (raw.elapsed_ns as f64 / 1e9) / 1.0;
            assert!((value - tps).abs() <= tps * 1e-15, "{value} vs {tps}");
            assert_eq!(format!("{value:.6}"), format!("{tps:.6}"));
            assert_eq!(raw.metrics["pgbench_tps"], tps);
            assert!((raw.work - n as f64).abs() < 1e-3 * n as f64);
            // Type 7 (the model's percentile): halfway between the two logged latencies.
            assert_eq!(raw.metrics["latency_p50_ms"], 0.15);
        }
    }

    #[test]
    fn a_quick_cell_runs_and_leaves_no_server_or_directory() {
        use crate::db::testutil;
        if let Err(e) = PgInstall::find() {
            smtlab_fixtures::require::skip(&e.to_string());
            return;
        }
        let placement = testutil::placement_first_cpu();
        let client = testutil::client();
        let given = [("duration", "1s"), ("clients", "2")];
        let mut inst = testutil::prepare(&OltpPg, &given, &placement, Some(&client)).unwrap();
        assert_eq!(inst.fixed_iterations(), Some(1));
        let s = inst.sample(1).unwrap();
        let tps = s.metrics["pgbench_tps"];
        assert!(tps > 0.0);
        let value = s.work / (s.elapsed_ns as f64 / 1e9);
        assert!((value - tps).abs() <= tps * 1e-12);
        assert!(s.metrics["logged_transactions"] > 0.0);
        assert!(s.metrics["latency_p50_ms"] <= s.metrics["latency_p99_ms"]);
        assert_eq!(s.metrics["fsync_on"], 0.0);
        let port = s.metrics["port"] as u16;
        drop(inst);
        // Nothing listens on the server's port any more, and no cell directory is left.
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
        let left = crate::scratch::mine(super::super::pg::DIR_PREFIX);
        assert!(left.is_empty(), "left behind: {left:?}");
    }

    #[test]
    fn without_a_client_side_the_cell_is_refused_in_one_line() {
        let placement = crate::db::testutil::placement_first_cpu();
        let e = crate::db::testutil::prepare(&OltpPg, &[], &placement, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("client side"), "{e}");
    }

    #[test]
    fn suites_sweep_client_counts() {
        let topo = crate::db::testutil::topology();
        assert!(OltpPg.sweep(Suite::Quick, &topo).is_empty());
        let full = OltpPg.sweep(Suite::Full, &topo);
        let clients: Vec<&str> = full
            .iter()
            .flat_map(|c| &c.params)
            .filter(|(k, _)| k == "clients")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(clients, ["1", "2", "4", "16", "32", "64"]);
        assert!(
            full.iter()
                .any(|c| c.params == [("mode".to_string(), "select-only".to_string())])
        );
        assert!(OltpPg.client_side());
    }
}
