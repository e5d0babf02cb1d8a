//! The brokerage's schema, its data set, and the audit that checks a run.
//!
//! Money is in cents (`bigint`), so sums are exact. A buy moves `q x price` cents from
//! the account to the market and `q` shares into a holding; a sell the reverse; each
//! writes an order row with its price, and nudges the quote's price (up a cent on a buy,
//! down on a sell, never under a dollar) and adds to its volume. So after any number of
//! complete transactions:
//!
//! * cash = opening cash - sum(buys' cost) + sum(sells' proceeds), per account;
//! * shares held = opening shares + bought - sold, per account and symbol;
//! * a quote's volume = the shares its orders traded.
//!
//! [`audit`] counts the rows that break these. A buy or sell applied in part (the cash
//! moved but no order written, an order without its shares) breaks one of them.

use tokio_postgres::Client;

use crate::TradeError;

/// Symbols each user trades: the user's own few, so sells find shares to sell.
pub const SYMBOLS_PER_USER: u32 = 4;
/// Shares of each of its symbols an account opens with.
pub const OPENING_SHARES: i64 = 100;
/// Cash an account opens with, in cents: enough that no buy of a run is refused.
pub const OPENING_CASH_CENTS: i64 = 1_000_000_000;

/// The data set's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// Accounts, ids 0..users.
    pub users: u32,
    /// Quotes, `s:0` .. `s:<symbols-1>` (as Trade names them).
    pub symbols: u32,
}

impl Scale {
    /// Checks the sizes: a user needs [`SYMBOLS_PER_USER`] different symbols.
    pub fn new(users: u32, symbols: u32) -> Result<Scale, TradeError> {
        if users == 0 || users > 10_000_000 {
            return Err(TradeError::Config(format!(
                "users={users}: expected 1 to 10000000 accounts"
            )));
        }
        if !(SYMBOLS_PER_USER..=10_000_000).contains(&symbols) {
            return Err(TradeError::Config(format!(
                "symbols={symbols}: expected {SYMBOLS_PER_USER} to 10000000 quotes (each user trades {SYMBOLS_PER_USER})"
            )));
        }
        Ok(Scale { users, symbols })
    }

    /// The `j`-th symbol user `user` trades (and opens holding).
    pub fn user_symbol(&self, user: u32, j: u32) -> String {
        let i = (u64::from(user) * u64::from(SYMBOLS_PER_USER) + u64::from(j % SYMBOLS_PER_USER))
            % u64::from(self.symbols);
        format!("s:{i}")
    }
}

/// The schema, dropped and made again.
const SCHEMA: &str = "
DROP TABLE IF EXISTS orders, holding, account, quote;
CREATE TABLE quote (
    symbol text PRIMARY KEY,
    company text NOT NULL,
    price_cents bigint NOT NULL CHECK (price_cents > 0),
    open_cents bigint NOT NULL,
    volume bigint NOT NULL DEFAULT 0
);
CREATE TABLE account (
    id integer PRIMARY KEY,
    name text NOT NULL,
    opening_cents bigint NOT NULL,
    cash_cents bigint NOT NULL CHECK (cash_cents >= 0),
    logins bigint NOT NULL DEFAULT 0
);
CREATE TABLE holding (
    account_id integer NOT NULL REFERENCES account,
    symbol text NOT NULL REFERENCES quote,
    quantity bigint NOT NULL CHECK (quantity >= 0),
    opening_quantity bigint NOT NULL,
    PRIMARY KEY (account_id, symbol)
);
CREATE TABLE orders (
    id bigserial PRIMARY KEY,
    account_id integer NOT NULL REFERENCES account,
    symbol text NOT NULL REFERENCES quote,
    kind char(1) NOT NULL CHECK (kind IN ('b', 's')),
    quantity bigint NOT NULL CHECK (quantity > 0),
    price_cents bigint NOT NULL,
    placed timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orders_by_account ON orders (account_id, id);
";

/// Makes the schema and loads `scale`'s accounts, quotes and opening holdings.
pub async fn setup(client: &Client, scale: Scale) -> Result<(), TradeError> {
    client
        .batch_execute(SCHEMA)
        .await
        .map_err(TradeError::db("create the trade schema"))?;
    let users = i32::try_from(scale.users).unwrap_or(i32::MAX);
    let symbols = i32::try_from(scale.symbols).unwrap_or(i32::MAX);
    let per_user = SYMBOLS_PER_USER as i32;
    // Prices between $100.00 and $189.99, spread by a multiplicative hash.
    client
        .execute(
            "INSERT INTO quote (symbol, company, price_cents, open_cents) \
             SELECT 's:' || i, 'company ' || i, 10000 + (i::bigint * 7919) % 9000, \
                    10000 + (i::bigint * 7919) % 9000 \
             FROM generate_series(0, $1 - 1) AS i",
            &[&symbols],
        )
        .await
        .map_err(TradeError::db("load the quotes"))?;
    client
        .execute(
            "INSERT INTO account (id, name, opening_cents, cash_cents) \
             SELECT i, 'user ' || i, $2, $2 FROM generate_series(0, $1 - 1) AS i",
            &[&users, &OPENING_CASH_CENTS],
        )
        .await
        .map_err(TradeError::db("load the accounts"))?;
    // Scale::user_symbol in SQL.
    client
        .execute(
            "INSERT INTO holding (account_id, symbol, quantity, opening_quantity) \
             SELECT a, 's:' || ((a::bigint * $3::int + j) % $2::int), $4::bigint, $4::bigint \
             FROM generate_series(0, $1::int - 1) AS a, generate_series(0, $3::int - 1) AS j \
             ON CONFLICT DO NOTHING",
            &[&users, &symbols, &per_user, &OPENING_SHARES],
        )
        .await
        .map_err(TradeError::db("load the opening holdings"))?;
    client
        .batch_execute("ANALYZE")
        .await
        .map_err(TradeError::db("analyze the trade tables"))?;
    Ok(())
}

/// What [`audit`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Audit {
    pub accounts: u64,
    pub orders: u64,
    pub buys: u64,
    pub sells: u64,
    /// Accounts whose cash is not opening cash plus their orders' flows.
    pub bad_cash: u64,
    /// Holdings whose shares are not opening shares plus their orders'.
    pub bad_holdings: u64,
    /// (account, symbol) pairs with orders and no holding.
    pub orphan_orders: u64,
    /// Quotes whose volume is not the shares their orders traded.
    pub bad_volume: u64,
}

impl Audit {
    /// `None` when the books balance, else what is wrong in one line.
    pub fn problem(&self) -> Option<String> {
        let mut v = Vec::new();
        if self.bad_cash > 0 {
            v.push(format!(
                "{} of {} accounts' cash is not opening cash plus their orders' flows",
                self.bad_cash, self.accounts
            ));
        }
        if self.bad_holdings > 0 {
            v.push(format!(
                "{} holdings are not opening shares plus their orders'",
                self.bad_holdings
            ));
        }
        if self.orphan_orders > 0 {
            v.push(format!(
                "{} account/symbol pairs have orders but no holding",
                self.orphan_orders
            ));
        }
        if self.bad_volume > 0 {
            v.push(format!(
                "{} quotes' volume is not the shares their orders traded",
                self.bad_volume
            ));
        }
        (!v.is_empty()).then(|| v.join("; "))
    }
}

/// Checks the books (see the module overview): one statement, one snapshot.
pub async fn audit(client: &Client) -> Result<Audit, TradeError> {
    let row = client
        .query_one(
            "WITH flows AS (
                 SELECT account_id,
                        sum(CASE kind WHEN 's' THEN quantity * price_cents
                                      ELSE -quantity * price_cents END)::bigint AS cents
                 FROM orders GROUP BY account_id),
             shares AS (
                 SELECT account_id, symbol,
                        sum(CASE kind WHEN 'b' THEN quantity ELSE -quantity END)::bigint AS q
                 FROM orders GROUP BY account_id, symbol),
             traded AS (
                 SELECT symbol, sum(quantity)::bigint AS v FROM orders GROUP BY symbol)
             SELECT
                 (SELECT count(*) FROM account),
                 (SELECT count(*) FROM orders),
                 (SELECT count(*) FROM orders WHERE kind = 'b'),
                 (SELECT count(*) FROM orders WHERE kind = 's'),
                 (SELECT count(*) FROM account a LEFT JOIN flows f ON f.account_id = a.id
                   WHERE a.cash_cents <> a.opening_cents + coalesce(f.cents, 0)),
                 (SELECT count(*) FROM holding h LEFT JOIN shares s
                     ON s.account_id = h.account_id AND s.symbol = h.symbol
                   WHERE h.quantity <> h.opening_quantity + coalesce(s.q, 0)),
                 (SELECT count(*) FROM shares s LEFT JOIN holding h
                     ON s.account_id = h.account_id AND s.symbol = h.symbol
                   WHERE h.account_id IS NULL),
                 (SELECT count(*) FROM quote q LEFT JOIN traded t ON t.symbol = q.symbol
                   WHERE q.volume <> coalesce(t.v, 0))",
            &[],
        )
        .await
        .map_err(TradeError::db("audit the trade tables"))?;
    let n = |i: usize| -> u64 { row.get::<_, i64>(i).max(0) as u64 };
    Ok(Audit {
        accounts: n(0),
        orders: n(1),
        buys: n(2),
        sells: n(3),
        bad_cash: n(4),
        bad_holdings: n(5),
        orphan_orders: n(6),
        bad_volume: n(7),
    })
}

/// Connects to `db` on the calling thread (no TLS: the server is on this host).
pub async fn connect(db: &tokio_postgres::Config) -> Result<Client, TradeError> {
    let (client, conn) = db
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(TradeError::db("connect to PostgreSQL"))?;
    tokio::spawn(conn);
    Ok(client)
}

/// [`setup`] from a synchronous caller.
pub fn setup_blocking(db: &tokio_postgres::Config, scale: Scale) -> Result<(), TradeError> {
    crate::block_on(async {
        let client = connect(db).await?;
        setup(&client, scale).await
    })?
}

/// [`audit`] from a synchronous caller.
pub fn audit_blocking(db: &tokio_postgres::Config) -> Result<Audit, TradeError> {
    crate::block_on(async {
        let client = connect(db).await?;
        audit(&client).await
    })?
}

/// Runs `sql` (a test's way to break the books on purpose).
pub fn execute_blocking(db: &tokio_postgres::Config, sql: &str) -> Result<(), TradeError> {
    crate::block_on(async {
        let client = connect(db).await?;
        client
            .batch_execute(sql)
            .await
            .map_err(TradeError::db(format!("run {sql:?}")))
    })?
}
