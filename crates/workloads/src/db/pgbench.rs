//! pgbench's command lines, its summary and its per-transaction logs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::pg::{DB_USER, PgError, PgInstall, last_error_line};

/// pgbench's built-in scripts smtlab drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The TPC-B-like default: three updates, a select and an insert per transaction.
    TpcB,
    /// `-S`: one primary-key select per transaction.
    SelectOnly,
}

/// The `mode` parameter's words.
pub const MODES: [(&str, Mode); 2] = [("tpcb", Mode::TpcB), ("select-only", Mode::SelectOnly)];

/// How pgbench reaches the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Tcp(u16),
    Unix { dir: PathBuf, port: u16 },
}

impl Target {
    fn args(&self, cmd: &mut Command) {
        match self {
            Target::Tcp(port) => cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()]),
            Target::Unix { dir, port } => cmd.arg("-h").arg(dir).args(["-p", &port.to_string()]),
        };
        cmd.args(["-U", DB_USER]);
        // Nothing from the user's environment may redirect pgbench elsewhere.
        for v in [
            "PGHOST",
            "PGPORT",
            "PGUSER",
            "PGDATABASE",
            "PGPASSWORD",
            "PGSERVICE",
        ] {
            cmd.env_remove(v);
        }
    }
}

/// `pgbench -i -s SCALE`: creates and fills the four tables.
pub fn init_command(install: &PgInstall, target: &Target, scale: u64) -> Command {
    let mut cmd = Command::new(install.bin("pgbench"));
    target.args(&mut cmd);
    cmd.args(["-i", "-q", "-s", &scale.to_string(), "postgres"]);
    cmd
}

/// One measured run: `clients` connections on `threads` pgbench threads for `seconds`,
/// every transaction logged under `log_prefix` for percentiles, `-P` so pgbench prints
/// its latency standard deviation.
pub fn run_command(
    install: &PgInstall,
    target: &Target,
    mode: Mode,
    clients: u64,
    threads: u64,
    seconds: u64,
    log_prefix: &Path,
) -> Command {
    let mut cmd = Command::new(install.bin("pgbench"));
    target.args(&mut cmd);
    cmd.args([
        "-n",
        "-c",
        &clients.to_string(),
        "-j",
        &threads.to_string(),
        "-T",
        &seconds.to_string(),
        "-P",
        &seconds.to_string(),
        "--log",
    ])
    .arg(format!("--log-prefix={}", log_prefix.display()));
    if mode == Mode::SelectOnly {
        cmd.arg("-S");
    }
    cmd.arg("postgres");
    cmd
}

/// A failed pgbench as one line: its status and the last telling line it printed.
pub fn check_output(tool: &str, out: &Output) -> Result<(), PgError> {
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Err(PgError::Tool {
        tool: tool.into(),
        status: out.status.to_string(),
        line: last_error_line(&text).unwrap_or_else(|| "no message".into()),
    })
}

/// What pgbench printed at the end of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// `tps = ...` without (or, before PostgreSQL 14, excluding) connection time.
    pub tps: f64,
    pub transactions: u64,
    pub failed: Option<u64>,
    pub latency_avg_ms: Option<f64>,
    pub latency_stddev_ms: Option<f64>,
    pub connection_ms: Option<f64>,
}

fn after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.trim().strip_prefix(key).map(str::trim)
}

fn first_number(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

/// Parses pgbench's summary (PostgreSQL 10 to 17 wording).
pub fn parse_summary(text: &str) -> Result<Summary, PgError> {
    let mut tps_excl = None;
    let mut tps_any = None;
    let mut s = Summary::default();
    let mut have_tx = false;
    for line in text.lines() {
        if let Some(v) = after(line, "tps =") {
            let n = first_number(v);
            if v.contains("without initial connection time") || v.contains("excluding") {
                tps_excl = n;
            } else if tps_any.is_none() {
                tps_any = n;
            }
        } else if let Some(v) = after(line, "number of transactions actually processed:") {
            // "1234" or "1234/5000" with -t.
            if let Some(n) = v.split('/').next().and_then(|t| t.trim().parse().ok()) {
                s.transactions = n;
                have_tx = true;
            }
        } else if let Some(v) = after(line, "number of failed transactions:") {
            s.failed = v.split_whitespace().next().and_then(|t| t.parse().ok());
        } else if let Some(v) = after(line, "latency average =") {
            s.latency_avg_ms = first_number(v);
        } else if let Some(v) = after(line, "latency stddev =") {
            s.latency_stddev_ms = first_number(v);
        } else if let Some(v) = after(line, "initial connection time =") {
            s.connection_ms = first_number(v);
        }
    }
    s.tps = tps_excl
        .or(tps_any)
        .filter(|t: &f64| t.is_finite() && *t >= 0.0)
        .ok_or_else(|| PgError::Parse("no \"tps = \" line".into()))?;
    if !have_tx {
        return Err(PgError::Parse(
            "no \"number of transactions actually processed\" line".into(),
        ));
    }
    Ok(s)
}

/// Latencies (microseconds) of every transaction in the logs `PREFIX.*`, which are then
/// removed. Log lines: `client_id transaction_no time_us script_no epoch epoch_us ...`;
/// failed transactions have a word instead of a time and are left out.
pub fn take_log_latencies(prefix: &Path) -> std::io::Result<Vec<f64>> {
    let dir = prefix.parent().unwrap_or(Path::new("."));
    let stem = prefix
        .file_name()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut v = Vec::new();
    for e in fs::read_dir(dir)?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with(&format!("{stem}.")) {
            continue;
        }
        let text = fs::read_to_string(e.path())?;
        fs::remove_file(e.path())?;
        v.extend(text.lines().filter_map(|l| {
            l.split_whitespace()
                .nth(2)
                .and_then(|t| t.parse::<f64>().ok())
        }));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PG15: &str = "pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 1
query mode: simple
number of clients: 2
number of threads: 1
maximum number of tries: 1
duration: 1 s
number of transactions actually processed: 1520
number of failed transactions: 0 (0.000%)
latency average = 1.311 ms
latency stddev = 0.412 ms
initial connection time = 4.210 ms
tps = 1525.123456 (without initial connection time)
";

    const PG13: &str = "number of transactions actually processed: 900/1000
latency average = 2.000 ms
tps = 480.000000 (including connections establishing)
tps = 500.250000 (excluding connections establishing)
";

    #[test]
    fn summary_of_pgbench_15() {
        let s = parse_summary(PG15).unwrap();
        assert_eq!(s.tps, 1525.123456);
        assert_eq!(s.transactions, 1520);
        assert_eq!(s.failed, Some(0));
        assert_eq!(s.latency_avg_ms, Some(1.311));
        assert_eq!(s.latency_stddev_ms, Some(0.412));
        assert_eq!(s.connection_ms, Some(4.21));
    }

    #[test]
    fn older_pgbench_takes_the_tps_excluding_connections() {
        let s = parse_summary(PG13).unwrap();
        assert_eq!(s.tps, 500.25);
        assert_eq!(s.transactions, 900);
        assert_eq!(s.latency_stddev_ms, None);
    }

    #[test]
    fn output_without_results_is_an_error() {
        let e = parse_summary("pgbench: error: connection failed\n").unwrap_err();
        assert!(e.to_string().contains("tps"), "{e}");
        let e = parse_summary("tps = 5.0 (without initial connection time)\n").unwrap_err();
        assert!(e.to_string().contains("transactions"), "{e}");
    }

    #[test]
    fn logs_give_latencies_and_are_removed() {
        let t = tempfile::tempdir().unwrap();
        let prefix = t.path().join("pgbench_log");
        fs::write(
            t.path().join("pgbench_log.123"),
            "0 0 1200 0 1700000000 10\n0 1 failed 0 1700000000 20\n",
        )
        .unwrap();
        fs::write(
            t.path().join("pgbench_log.123.1"),
            "1 0 800 0 1700000000 30\n",
        )
        .unwrap();
        fs::write(t.path().join("other"), "0 0 99 0 0 0\n").unwrap();
        let mut v = take_log_latencies(&prefix).unwrap();
        v.sort_by(f64::total_cmp);
        assert_eq!(v, [800.0, 1200.0]);
        assert!(!t.path().join("pgbench_log.123").exists());
        assert!(t.path().join("other").exists());
    }
}
