//! `smtlab-trade`: the application server of `app-trade` as a process of its own, for
//! `smtlab bench app-trade --param server=cmd` and for running it by hand:
//!
//! ```text
//! smtlab-trade --listen 127.0.0.1:8080 --db postgresql://user@127.0.0.1:5432/postgres [--load 200:1000]
//! ```
//!
//! Its runtime has one worker per CPU the process may run on (the placement, when
//! smtlab starts it pinned), or `--workers N`. `--load USERS:SYMBOLS` makes the schema
//! and loads the data set first (smtlab loads it itself before starting the command).
//! It serves until killed.

use std::process::ExitCode;
use std::str::FromStr;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "smtlab-trade",
    about = "app-trade's brokerage application server (axum, tokio, PostgreSQL)"
)]
struct Args {
    /// Address to listen on, e.g. 127.0.0.1:8080.
    #[arg(long)]
    listen: std::net::SocketAddr,
    /// The database, as a postgresql:// URL.
    #[arg(long)]
    db: String,
    /// Runtime worker threads (0: one per CPU this process may run on).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Database connections in the pool.
    #[arg(long, default_value_t = 8)]
    pool: usize,
    /// Make the schema and load USERS accounts and SYMBOLS quotes first (USERS:SYMBOLS).
    #[arg(long)]
    load: Option<String>,
}

fn run(args: Args) -> Result<(), String> {
    let url = &args.db;
    let db = smtlab_trade::DbConfig::from_str(url)
        .map_err(|e| format!("--db {url:?}: expected a postgresql:// URL ({e})"))?;
    if let Some(spec) = &args.load {
        let (u, s) = spec
            .split_once(':')
            .and_then(|(u, s)| Some((u.parse::<u32>().ok()?, s.parse::<u32>().ok()?)))
            .ok_or_else(|| format!("--load {spec:?}: expected USERS:SYMBOLS, e.g. 200:1000"))?;
        let scale = smtlab_trade::Scale::new(u, s).map_err(|e| e.to_string())?;
        smtlab_trade::db::setup_blocking(&db, scale).map_err(|e| e.to_string())?;
    }
    let _server = smtlab_trade::TradeServer::start(&smtlab_trade::ServerConfig {
        listen: args.listen,
        cpus: Vec::new(),
        workers: args.workers,
        pool_size: args.pool,
        db,
    })
    .map_err(|e| e.to_string())?;
    loop {
        std::thread::park();
    }
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smtlab-trade: {e}");
            ExitCode::FAILURE
        }
    }
}
