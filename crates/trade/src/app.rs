//! The routes: session lookup, a few queries, JSON or HTML.
//!
//! A session is a token `POST /login?uid=N` hands out and an in-memory table maps
//! back to the account, as an application server's HTTP sessions are; requests carry
//! it as `Cookie: session=TOKEN`. An unknown session is 401, an unknown symbol 404, a
//! database failure 500 with its one-line cause: all of them errors to the load
//! generator, never throughput.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Json, Response};
use axum::routing::{get, post};
use deadpool_postgres::Pool;
use serde::Deserialize;
use serde_json::json;

use crate::db::SYMBOLS_PER_USER;

/// Most shares one order may buy or sell.
pub const MAX_ORDER_SHARES: i64 = 1000;

/// What every request shares.
pub struct AppState {
    pub pool: Pool,
    /// Quotes in the data set, read at start: a user's market is its own symbols.
    symbols: i64,
    sessions: RwLock<HashMap<String, i32>>,
    hasher: std::collections::hash_map::RandomState,
    issued: AtomicU64,
}

impl AppState {
    pub fn new(pool: Pool, symbols: i64) -> Arc<AppState> {
        Arc::new(AppState {
            pool,
            symbols: symbols.max(1),
            sessions: RwLock::new(HashMap::new()),
            hasher: std::collections::hash_map::RandomState::new(),
            issued: AtomicU64::new(0),
        })
    }

    fn new_session(&self, uid: i32) -> String {
        let n = self.issued.fetch_add(1, Ordering::Relaxed);
        let token = format!(
            "{:016x}{:016x}",
            self.hasher.hash_one((uid, n)),
            self.hasher.hash_one((n, uid, "smtlab"))
        );
        self.sessions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(token.clone(), uid);
        token
    }

    /// The account of the request's `session` cookie.
    fn session(&self, headers: &HeaderMap) -> Result<i32, Failure> {
        let token = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .find_map(|kv| kv.trim().strip_prefix("session="))
            .ok_or(Failure(
                StatusCode::UNAUTHORIZED,
                "no session cookie".into(),
            ))?;
        self.sessions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(token)
            .copied()
            .ok_or(Failure(StatusCode::UNAUTHORIZED, "unknown session".into()))
    }
}

/// The application's routes over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/login", post(login))
        .route("/quote", get(quote))
        .route("/home", get(home))
        .route("/portfolio", get(portfolio))
        .route("/account", get(account))
        .route("/buy", post(buy))
        .route("/sell", post(sell))
        .with_state(state)
}

/// A failed request: its status and a one-line reason as the body.
pub struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

fn db_fail(e: impl std::fmt::Display) -> Failure {
    Failure(
        StatusCode::INTERNAL_SERVER_ERROR,
        crate::one_line(&e.to_string()),
    )
}

type Reply<T> = Result<T, Failure>;

/// The one row a query found, or 404 saying what is `missing`.
fn found(
    row: Result<Option<tokio_postgres::Row>, tokio_postgres::Error>,
    missing: impl FnOnce() -> String,
) -> Reply<tokio_postgres::Row> {
    row.map_err(db_fail)?
        .ok_or_else(|| Failure(StatusCode::NOT_FOUND, missing()))
}

/// Each of `sqls` prepared on `c` in order, once per connection (the connection's
/// statement cache).
async fn prepared<const N: usize>(
    c: &deadpool_postgres::Object,
    sqls: [&str; N],
) -> Reply<[tokio_postgres::Statement; N]> {
    let mut out = Vec::with_capacity(N);
    for sql in sqls {
        out.push(c.prepare_cached(sql).await.map_err(db_fail)?);
    }
    let Ok(all) = <[_; N]>::try_from(out) else {
        unreachable!("one statement per query")
    };
    Ok(all)
}

async fn client(state: &AppState) -> Reply<deadpool_postgres::Object> {
    state.pool.get().await.map_err(db_fail)
}

async fn index() -> Html<&'static str> {
    Html(
        "<!DOCTYPE html><html><head><title>smtlab trade</title></head><body><h1>smtlab trade</h1></body></html>",
    )
}

#[derive(Deserialize)]
struct LoginQuery {
    uid: i32,
}

async fn login(State(s): State<Arc<AppState>>, Query(q): Query<LoginQuery>) -> Reply<Response> {
    let c = client(&s).await?;
    let [st] = prepared(&c, ["UPDATE account SET logins = logins + 1 WHERE id = $1"]).await?;
    if c.execute(&st, &[&q.uid]).await.map_err(db_fail)? == 0 {
        return Err(Failure(
            StatusCode::NOT_FOUND,
            format!("no account {}", q.uid),
        ));
    }
    let token = s.new_session(q.uid);
    Ok((
        [(header::SET_COOKIE, format!("session={token}; Path=/"))],
        Json(json!({ "uid": q.uid, "session": token })),
    )
        .into_response())
}

#[derive(Deserialize)]
struct SymbolQuery {
    s: String,
}

async fn quote(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(q): Query<SymbolQuery>,
) -> Reply<Json<serde_json::Value>> {
    s.session(&headers)?;
    let c = client(&s).await?;
    let [st] = prepared(
        &c,
        ["SELECT symbol, company, price_cents, open_cents, volume FROM quote WHERE symbol = $1"],
    )
    .await?;
    let row = found(c.query_opt(&st, &[&q.s]).await, || {
        format!("no quote {}", q.s)
    })?;
    let (price, open): (i64, i64) = (row.get(2), row.get(3));
    Ok(Json(json!({
        "symbol": row.get::<_, String>(0),
        "company": row.get::<_, String>(1),
        "price": dollars(price),
        "open": dollars(open),
        "change": dollars(price - open),
        "volume": row.get::<_, i64>(4),
    })))
}

/// The account's page: its cash, its holdings' value, and the quotes it trades.
async fn home(State(s): State<Arc<AppState>>, headers: HeaderMap) -> Reply<Html<String>> {
    let uid = s.session(&headers)?;
    let c = client(&s).await?;
    let [acct, value, market] = prepared(
        &c,
        [
            "SELECT name, cash_cents, logins FROM account WHERE id = $1",
            "SELECT count(*), coalesce(sum(h.quantity * q.price_cents), 0)::bigint \
                 FROM holding h JOIN quote q ON q.symbol = h.symbol WHERE h.account_id = $1",
            "SELECT symbol, price_cents, open_cents FROM quote WHERE symbol = ANY($1) ORDER BY symbol",
        ],
    )
    .await?;
    let a = found(c.query_opt(&acct, &[&uid]).await, || {
        format!("no account {uid}")
    })?;
    let v = c.query_one(&value, &[&uid]).await.map_err(db_fail)?;
    let symbols: Vec<String> = (0..SYMBOLS_PER_USER)
        .map(|j| {
            let i = (i64::from(uid) * i64::from(SYMBOLS_PER_USER) + i64::from(j)) % s.symbols;
            format!("s:{i}")
        })
        .collect();
    let quotes = c.query(&market, &[&symbols]).await.map_err(db_fail)?;
    let name: String = a.get(0);
    let mut page = String::with_capacity(2048);
    let _ = write!(
        page,
        "<!DOCTYPE html><html><head><title>Trade home</title></head><body>\
         <h1>Welcome, {}</h1><table><tr><th>cash</th><td>{}</td></tr>\
         <tr><th>holdings</th><td>{}</td></tr><tr><th>holdings value</th><td>{}</td></tr>\
         <tr><th>logins</th><td>{}</td></tr></table><h2>Your market</h2><table>\
         <tr><th>symbol</th><th>price</th><th>change</th></tr>",
        escape(&name),
        dollars(a.get(1)),
        v.get::<_, i64>(0),
        dollars(v.get(1)),
        a.get::<_, i64>(2),
    );
    for q in &quotes {
        let (p, o): (i64, i64) = (q.get(1), q.get(2));
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(q.get(0)),
            dollars(p),
            dollars(p - o)
        );
    }
    page.push_str("</table></body></html>");
    Ok(Html(page))
}

/// The holdings with their prices and gains, as an HTML table.
async fn portfolio(State(s): State<Arc<AppState>>, headers: HeaderMap) -> Reply<Html<String>> {
    let uid = s.session(&headers)?;
    let c = client(&s).await?;
    let [st] = prepared(
        &c,
        [
            "SELECT h.symbol, h.quantity, q.price_cents, q.open_cents FROM holding h \
                 JOIN quote q ON q.symbol = h.symbol WHERE h.account_id = $1 ORDER BY h.symbol",
        ],
    )
    .await?;
    let rows = c.query(&st, &[&uid]).await.map_err(db_fail)?;
    let mut page = String::with_capacity(2048);
    page.push_str(
        "<!DOCTYPE html><html><head><title>Portfolio</title></head><body><h1>Portfolio</h1>\
         <table><tr><th>symbol</th><th>shares</th><th>price</th><th>value</th><th>gain</th></tr>",
    );
    let mut total = 0i64;
    for r in &rows {
        let (n, p, o): (i64, i64, i64) = (r.get(1), r.get(2), r.get(3));
        total += n * p;
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{n}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(r.get(0)),
            dollars(p),
            dollars(n * p),
            dollars(n * (p - o))
        );
    }
    let _ = write!(
        page,
        "</table><p>total {}</p></body></html>",
        dollars(total)
    );
    Ok(Html(page))
}

/// The account and its last orders, as JSON.
async fn account(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Reply<Json<serde_json::Value>> {
    let uid = s.session(&headers)?;
    let c = client(&s).await?;
    let [acct, orders] = prepared(
        &c,
        [
            "SELECT name, cash_cents, opening_cents FROM account WHERE id = $1",
            "SELECT id, symbol, kind, quantity, price_cents FROM orders \
                 WHERE account_id = $1 ORDER BY id DESC LIMIT 5",
        ],
    )
    .await?;
    let a = found(c.query_opt(&acct, &[&uid]).await, || {
        format!("no account {uid}")
    })?;
    let last: Vec<serde_json::Value> = c
        .query(&orders, &[&uid])
        .await
        .map_err(db_fail)?
        .iter()
        .map(|r| {
            json!({
                "id": r.get::<_, i64>(0),
                "symbol": r.get::<_, String>(1),
                "kind": if r.get::<_, String>(2) == "b" { "buy" } else { "sell" },
                "quantity": r.get::<_, i64>(3),
                "price": dollars(r.get(4)),
            })
        })
        .collect();
    Ok(Json(json!({
        "uid": uid,
        "name": a.get::<_, String>(0),
        "cash": dollars(a.get(1)),
        "opening": dollars(a.get(2)),
        "orders": last,
    })))
}

#[derive(Deserialize)]
struct OrderQuery {
    s: String,
    q: i64,
}

/// What every order starts with: the session's user, the number of shares checked, a
/// connection, and the statement that locks a quote.
async fn order_start(
    s: &AppState,
    headers: &HeaderMap,
    shares: i64,
) -> Reply<(i32, deadpool_postgres::Object, tokio_postgres::Statement)> {
    let uid = s.session(headers)?;
    if !(1..=MAX_ORDER_SHARES).contains(&shares) {
        return Err(Failure(
            StatusCode::BAD_REQUEST,
            format!("q={shares}: expected 1 to {MAX_ORDER_SHARES} shares"),
        ));
    }
    let c = client(s).await?;
    let [lock_quote] = prepared(
        &c,
        ["SELECT price_cents FROM quote WHERE symbol = $1 FOR UPDATE"],
    )
    .await?;
    Ok((uid, c, lock_quote))
}

/// The quote's price in cents, its row locked until `tx` ends.
async fn locked_price(
    tx: &tokio_postgres::Transaction<'_>,
    lock_quote: &tokio_postgres::Statement,
    symbol: &str,
) -> Reply<i64> {
    let row = found(tx.query_opt(lock_quote, &[&symbol]).await, || {
        format!("no quote {symbol}")
    })?;
    Ok(row.get(0))
}

/// Buys `q` shares in one transaction; locks are taken quote, account, holding in both
/// buy and sell, so two orders never wait on each other in a cycle.
async fn buy(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(o): Query<OrderQuery>,
) -> Reply<Json<serde_json::Value>> {
    let (uid, mut c, lock_quote) = order_start(&s, &headers, o.q).await?;
    let [pay, hold, order, tick] = prepared(
        &c,
        [
            "UPDATE account SET cash_cents = cash_cents - $2 WHERE id = $1 AND cash_cents >= $2 \
                 RETURNING cash_cents",
            "INSERT INTO holding (account_id, symbol, quantity, opening_quantity) \
                 VALUES ($1, $2, $3, 0) ON CONFLICT (account_id, symbol) \
                 DO UPDATE SET quantity = holding.quantity + EXCLUDED.quantity",
            "INSERT INTO orders (account_id, symbol, kind, quantity, price_cents) \
                 VALUES ($1, $2, 'b', $3, $4) RETURNING id",
            "UPDATE quote SET price_cents = price_cents + 1, volume = volume + $2 WHERE symbol = $1",
        ],
    )
    .await?;
    let tx = c.transaction().await.map_err(db_fail)?;
    let price = locked_price(&tx, &lock_quote, &o.s).await?;
    let cost = o.q * price;
    let cash: i64 = tx
        .query_opt(&pay, &[&uid, &cost])
        .await
        .map_err(db_fail)?
        .ok_or_else(|| Failure(StatusCode::CONFLICT, "insufficient funds".into()))?
        .get(0);
    tx.execute(&hold, &[&uid, &o.s, &o.q])
        .await
        .map_err(db_fail)?;
    let id: i64 = tx
        .query_one(&order, &[&uid, &o.s, &o.q, &price])
        .await
        .map_err(db_fail)?
        .get(0);
    tx.execute(&tick, &[&o.s, &o.q]).await.map_err(db_fail)?;
    tx.commit().await.map_err(db_fail)?;
    Ok(Json(json!({
        "order": id, "kind": "buy", "symbol": o.s, "quantity": o.q,
        "price": dollars(price), "cash": dollars(cash),
    })))
}

/// Sells up to `q` shares (what the holding has) in one transaction; with none held it
/// answers `"quantity": 0` and writes no order.
async fn sell(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(o): Query<OrderQuery>,
) -> Reply<Json<serde_json::Value>> {
    let (uid, mut c, lock_quote) = order_start(&s, &headers, o.q).await?;
    let [lock_account, lock_holding, unhold, credit, order, tick] = prepared(
        &c,
        [
            "SELECT cash_cents FROM account WHERE id = $1 FOR UPDATE",
            "SELECT quantity FROM holding WHERE account_id = $1 AND symbol = $2 FOR UPDATE",
            "UPDATE holding SET quantity = quantity - $3 WHERE account_id = $1 AND symbol = $2",
            "UPDATE account SET cash_cents = cash_cents + $2 WHERE id = $1 RETURNING cash_cents",
            "INSERT INTO orders (account_id, symbol, kind, quantity, price_cents) \
                 VALUES ($1, $2, 's', $3, $4) RETURNING id",
            "UPDATE quote SET price_cents = greatest(100, price_cents - 1), volume = volume + $2 \
                 WHERE symbol = $1",
        ],
    )
    .await?;
    let tx = c.transaction().await.map_err(db_fail)?;
    let price = locked_price(&tx, &lock_quote, &o.s).await?;
    let cash: i64 = found(tx.query_opt(&lock_account, &[&uid]).await, || {
        format!("no account {uid}")
    })?
    .get(0);
    let held: i64 = tx
        .query_opt(&lock_holding, &[&uid, &o.s])
        .await
        .map_err(db_fail)?
        .map_or(0, |r| r.get(0));
    let sold = o.q.min(held);
    if sold == 0 {
        tx.rollback().await.map_err(db_fail)?;
        return Ok(Json(json!({
            "order": null, "kind": "sell", "symbol": o.s, "quantity": 0,
            "price": dollars(price), "cash": dollars(cash),
        })));
    }
    tx.execute(&unhold, &[&uid, &o.s, &sold])
        .await
        .map_err(db_fail)?;
    let cash: i64 = tx
        .query_one(&credit, &[&uid, &(sold * price)])
        .await
        .map_err(db_fail)?
        .get(0);
    let id: i64 = tx
        .query_one(&order, &[&uid, &o.s, &sold, &price])
        .await
        .map_err(db_fail)?
        .get(0);
    tx.execute(&tick, &[&o.s, &sold]).await.map_err(db_fail)?;
    tx.commit().await.map_err(db_fail)?;
    Ok(Json(json!({
        "order": id, "kind": "sell", "symbol": o.s, "quantity": sold,
        "price": dollars(price), "cash": dollars(cash),
    })))
}

/// Cents as `$1234.56` (negative as `-$0.05`).
pub fn dollars(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let c = cents.unsigned_abs();
    format!("{sign}${}.{:02}", c / 100, c % 100)
}

/// Text made safe inside HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_and_html_are_rendered_safely() {
        assert_eq!(dollars(123_456), "$1234.56");
        assert_eq!(dollars(-5), "-$0.05");
        assert_eq!(dollars(0), "$0.00");
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
