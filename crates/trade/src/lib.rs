//! # smtlab-trade
//!
//! The application server of `app-trade` (paper 004's WebSphere "online brokerage"
//! benchmark, re-created): a web application written the way a Rust shop writes one,
//! with axum on a multi-threaded tokio runtime and PostgreSQL through a deadpool pool
//! of tokio-postgres connections. It is the measured thing, so its runtime is sized
//! and pinned to the placement: one worker thread per placement CPU, thread *i* on CPU
//! *i mod n* (measurement rule 7), and the CPU time of its threads is readable
//! ([`TradeServer::cpu_ns`]) for per-transaction CPU.
//!
//! * [`db`]: the schema (accounts, quotes, holdings, orders), the data set, and the
//!   audit that checks a run: every account's cash is its opening cash plus the flows
//!   of its orders, every holding its opening quantity plus its orders' shares, every
//!   quote's volume the shares traded. Buying and selling are transactions, so a
//!   server that lost or half-applied one fails the audit.
//! * [`app`]: the routes. Each request finds its session (an in-memory table filled by
//!   `POST /login`), runs one to four queries, and renders JSON or HTML:
//!   `GET /quote?s=SYM`, `GET /home`, `GET /portfolio`, `GET /account`,
//!   `POST /buy?s=SYM&q=N`, `POST /sell?s=SYM&q=N`. A user's own application for
//!   `server=cmd` answers the same routes against the same schema.
//! * [`server`]: [`TradeServer`], the runtime started on given CPUs, stopped on drop.
//!
//! The binary `smtlab-trade` (in the `smtlab` package) runs the same server as a
//! process of its own, for `server=cmd` and for users who want to run it by hand.

pub mod app;
pub mod db;
pub mod server;

pub use db::{Audit, Scale};
pub use server::{ServerConfig, TradeServer};
/// The database's connection settings (parsed from a `postgresql://` URL with `FromStr`).
pub use tokio_postgres::Config as DbConfig;

/// Why the server could not start or the database could not be set up or audited;
/// one line each, naming what was being done.
#[derive(Debug, thiserror::Error)]
pub enum TradeError {
    #[error("{what}: {}", one_line(&.error.to_string()))]
    Db {
        what: String,
        error: tokio_postgres::Error,
    },
    #[error("{what}: {error}")]
    Io { what: String, error: std::io::Error },
    #[error("{0}")]
    Config(String),
}

impl TradeError {
    pub(crate) fn db(what: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> TradeError {
        let what = what.into();
        move |error| TradeError::Db { what, error }
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TradeError {
        let what = what.into();
        move |error| TradeError::Io { what, error }
    }
}

/// Runs `f` on a current-thread runtime on the calling thread: the set-up and the audit
/// are a few statements, and need no worker threads of their own.
pub(crate) fn block_on<F: std::future::Future>(f: F) -> Result<F::Output, TradeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(TradeError::io("start a runtime for the database set-up"))?;
    Ok(rt.block_on(f))
}

/// `text` on one line: PostgreSQL's errors may carry DETAIL and HINT lines.
pub(crate) fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
