//! The seam between the store and its two SQL dialects. Every statement of the store is
//! written once, with SQLite's `?N` placeholders, against [`Sql`]; the PostgreSQL side
//! rewrites them to `$N` ([`dollar`]). What differs between the two databases' types
//! is settled here, in [`Value`] and [`FromValue`]: SQLite's INTEGER and PostgreSQL's
//! BIGINT are `i64`, unsigned model numbers above 2^63-1 are refused on the way in and
//! negative ones on the way out, booleans are SQLite's 0/1 and PostgreSQL's BOOLEAN,
//! blobs are BLOB and BYTEA, and NULL is NULL of any column type.
//!
//! What stays per dialect lives beside the connection: the DDL, migrations, the
//! advisory lock and how a lease connection is opened (`sqlite.rs`, `pg.rs`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::error::Error;
use std::rc::Rc;

use postgres::types::{IsNull, ToSql as PgToSql, Type};
use postgres::{GenericClient, Statement};
use rusqlite::types::{ToSqlOutput, ValueRef};

use super::{Fail, Step};

/// A value bound to a statement, or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Int(i64),
    /// An unsigned model number: stored as a signed 64-bit integer, refused above
    /// 2^63-1 (see [`in_range`]).
    Uint(u64),
    Real(f64),
    Bool(bool),
    Text(Cow<'a, str>),
    Blob(Cow<'a, [u8]>),
}

/// The statement's values, in `?1, ?2, ...` order.
macro_rules! args {
    ($($v:expr),* $(,)?) => {
        &[$($crate::store::sql::Value::from($v)),*]
    };
}
pub(crate) use args;

/// One statement's access to a database, inside a transaction or not.
pub(crate) trait Sql {
    /// Runs a statement that returns no rows; how many rows it changed.
    fn execute(&mut self, q: &str, args: &[Value<'_>]) -> Step<u64>;

    /// Every row a statement returns.
    fn query(&mut self, q: &str, args: &[Value<'_>]) -> Step<Vec<Row>>;

    /// What follows a `SELECT` that locks the rows it reads until the transaction
    /// ends: ` FOR UPDATE` in PostgreSQL; nothing in SQLite, whose write transactions
    /// (`BEGIN IMMEDIATE`) hold the whole file.
    fn for_update(&self) -> &'static str;

    /// The first row, `None` when there is none.
    fn query_opt(&mut self, q: &str, args: &[Value<'_>]) -> Step<Option<Row>> {
        Ok(self.query(q, args)?.into_iter().next())
    }

    /// The one row of an aggregate (`count`, `max`).
    fn query_one(&mut self, q: &str, args: &[Value<'_>]) -> Step<Row> {
        self.query_opt(q, args)?
            .ok_or_else(|| Fail::Decode(format!("no row from {}", head(q))))
    }
}

/// A row read back: its values and the names of its columns, for messages.
#[derive(Debug)]
pub(crate) struct Row {
    names: Rc<[String]>,
    values: Vec<Value<'static>>,
}

impl Row {
    /// A row of the columns `names`, column `i` read by `value(i)`.
    fn read(names: &Rc<[String]>, value: impl FnMut(usize) -> Step<Value<'static>>) -> Step<Row> {
        let values = (0..names.len()).map(value).collect::<Step<_>>()?;
        let names = Rc::clone(names);
        Ok(Row { names, values })
    }

    /// Column `i` as a `T`; a value of another type is a [`Fail::Decode`] naming the
    /// column.
    pub(crate) fn get<T: FromValue>(&self, i: usize) -> Step<T> {
        T::from_value(self.value(i)?).map_err(|why| self.wrong(i, why.0))
    }

    /// Column `i` as text, borrowed.
    pub(crate) fn text(&self, i: usize) -> Step<&str> {
        match self.value(i)? {
            Value::Text(t) => Ok(t.as_ref()),
            other => Err(self.wrong(i, format!("expected text, found {}", found(other)))),
        }
    }

    /// Column `i` as text or NULL, borrowed.
    pub(crate) fn opt_text(&self, i: usize) -> Step<Option<&str>> {
        match self.value(i)? {
            Value::Null => Ok(None),
            _ => self.text(i).map(Some),
        }
    }

    fn value(&self, i: usize) -> Step<&Value<'static>> {
        self.values
            .get(i)
            .ok_or_else(|| Fail::Decode(format!("no column {i}")))
    }

    fn wrong(&self, i: usize, why: String) -> Fail {
        let name = self.names.get(i).map_or("?", String::as_str);
        Fail::Decode(format!("column {name}: {why}"))
    }
}

/// Why a column's value is not the type asked for: "expected an integer, found text".
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Mismatch(String);

/// A Rust type a column converts to.
pub(crate) trait FromValue: Sized {
    fn from_value(v: &Value<'_>) -> Result<Self, Mismatch>;
}

fn found(v: &Value<'_>) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Int(i) => format!("the integer {i}"),
        Value::Uint(u) => format!("the integer {u}"),
        Value::Real(x) => format!("the number {x}"),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Text(_) => "text".into(),
        Value::Blob(_) => "a blob".into(),
    }
}

/// A `FromValue` for the values that match the patterns; anything else is "expected
/// `$what`".
macro_rules! from_value {
    ($t:ty, $what:literal, $($p:pat => $e:expr),+) => {
        impl FromValue for $t {
            fn from_value(v: &Value<'_>) -> Result<Self, Mismatch> {
                match v {
                    $($p => Ok($e),)+
                    other => Err(Mismatch(format!("expected {}, found {}", $what, found(other)))),
                }
            }
        }
    };
}

from_value!(i64, "an integer", Value::Int(i) => *i);
// SQLite may hand back a whole number stored in a REAL column as an integer.
from_value!(f64, "a number", Value::Real(x) => *x, Value::Int(i) => *i as f64);
from_value!(bool, "a boolean", Value::Bool(b) => *b, Value::Int(i) => *i != 0);
from_value!(String, "text", Value::Text(t) => t.to_string());
from_value!(Vec<u8>, "a blob", Value::Blob(b) => b.to_vec());

/// Unsigned model numbers, stored as signed 64-bit integers.
macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: &Value<'_>) -> Result<Self, Mismatch> {
                let i = i64::from_value(v)?;
                <$t>::try_from(i).map_err(|_| {
                    Mismatch(if i < 0 {
                        format!("is negative ({i})")
                    } else {
                        format!("{i} is out of range")
                    })
                })
            }
        }
    )*};
}

unsigned!(u64, usize, u32);

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value<'_>) -> Result<Self, Mismatch> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// `From` for each type a statement binds, by the expression that makes its value.
macro_rules! value_from {
    ($($t:ty => |$v:ident| $e:expr),* $(,)?) => {$(
        impl<'a> From<$t> for Value<'a> {
            fn from($v: $t) -> Self {
                $e
            }
        }
    )*};
}

value_from!(
    i64 => |v| Value::Int(v),
    u64 => |v| Value::Uint(v),
    f64 => |v| Value::Real(v),
    bool => |v| Value::Bool(v),
    usize => |v| Value::Uint(v as u64),
    u32 => |v| Value::Int(i64::from(v)),
    &'a str => |v| Value::Text(Cow::Borrowed(v)),
    &'a String => |v| Value::Text(Cow::Borrowed(v)),
    String => |v| Value::Text(Cow::Owned(v)),
    Vec<u8> => |v| Value::Blob(Cow::Owned(v)),
);

impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// Unsigned values above 2^63-1 are refused before anything is bound: neither
/// database's integer holds them.
fn in_range(q: &str, args: &[Value<'_>]) -> Step<()> {
    for (i, a) in args.iter().enumerate() {
        if let Value::Uint(v) = a
            && i64::try_from(*v).is_err()
        {
            return Err(Fail::Invalid(format!(
                "value ?{} of {} is {v}, above 2^63-1",
                i + 1,
                head(q)
            )));
        }
    }
    Ok(())
}

/// `IN (?1, ?2, ...)` for `n` values.
pub(crate) fn in_list(n: usize) -> String {
    let marks: Vec<String> = (1..=n).map(|i| format!("?{i}")).collect();
    format!("IN ({})", marks.join(", "))
}

/// A statement's first words, for messages.
fn head(q: &str) -> String {
    q.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

// ---- SQLite ----------------------------------------------------------------------------

/// Statements on an SQLite connection (a transaction derefs to its connection).
pub(crate) struct Lite<'c>(pub(crate) &'c rusqlite::Connection);

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            // In range: `in_range` checked it.
            Value::Uint(u) => ValueRef::Integer(i64::try_from(*u).unwrap_or(i64::MAX)),
            Value::Real(x) => ValueRef::Real(*x),
            Value::Bool(b) => ValueRef::Integer(i64::from(*b)),
            Value::Text(t) => ValueRef::Text(t.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b.as_ref()),
        }))
    }
}

impl Sql for Lite<'_> {
    fn execute(&mut self, q: &str, args: &[Value<'_>]) -> Step<u64> {
        in_range(q, args)?;
        let mut stmt = self.0.prepare_cached(q)?;
        Ok(stmt.execute(rusqlite::params_from_iter(args))? as u64)
    }

    fn query(&mut self, q: &str, args: &[Value<'_>]) -> Step<Vec<Row>> {
        in_range(q, args)?;
        let mut stmt = self.0.prepare_cached(q)?;
        let names: Rc<[String]> = stmt.column_names().iter().map(|n| n.to_string()).collect();
        let mut rows = stmt.query(rusqlite::params_from_iter(args))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(Row::read(&names, |i| lite_value(r.get_ref(i)?))?);
        }
        Ok(out)
    }

    fn for_update(&self) -> &'static str {
        ""
    }
}

fn lite_value(v: ValueRef<'_>) -> Step<Value<'static>> {
    Ok(match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(x) => Value::Real(x),
        ValueRef::Text(t) => {
            Value::Text(Cow::Owned(String::from_utf8(t.to_vec()).map_err(|e| {
                Fail::Decode(format!("text that is not UTF-8 ({e})"))
            })?))
        }
        ValueRef::Blob(b) => Value::Blob(Cow::Owned(b.to_vec())),
    })
}

// ---- PostgreSQL ------------------------------------------------------------------------

/// Statements on a PostgreSQL client or transaction, each prepared once per connection
/// (`statements`, kept with the connection).
pub(crate) struct Pg<'c, C: GenericClient> {
    pub(crate) client: &'c mut C,
    pub(crate) statements: &'c mut HashMap<String, Statement>,
}

/// `?N` as PostgreSQL's `$N`, outside quoted literals.
pub(crate) fn dollar(q: &str) -> String {
    let mut out = String::with_capacity(q.len());
    let mut quoted = false;
    let mut chars = q.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => quoted = !quoted,
            '?' if !quoted && chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push('$');
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

impl PgToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.to_sql_checked(ty, out)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    /// Each variant checks the column type as its Rust type would: a `Value` of the
    /// wrong kind is refused by the client, not sent.
    fn to_sql_checked(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => i.to_sql_checked(ty, out),
            // In range: `in_range` checked it.
            Value::Uint(u) => i64::try_from(*u)
                .unwrap_or(i64::MAX)
                .to_sql_checked(ty, out),
            Value::Real(x) => x.to_sql_checked(ty, out),
            Value::Bool(b) => b.to_sql_checked(ty, out),
            Value::Text(t) => t.as_ref().to_sql_checked(ty, out),
            Value::Blob(b) => b.as_ref().to_sql_checked(ty, out),
        }
    }
}

impl<C: GenericClient> Pg<'_, C> {
    fn prepare(&mut self, q: &str, args: &[Value<'_>]) -> Step<Statement> {
        in_range(q, args)?;
        if let Some(s) = self.statements.get(q) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(&dollar(q))?;
        self.statements.insert(q.to_string(), s.clone());
        Ok(s)
    }
}

fn pg_args<'v>(args: &'v [Value<'_>]) -> Vec<&'v (dyn PgToSql + Sync)> {
    args.iter().map(|a| a as &(dyn PgToSql + Sync)).collect()
}

impl<C: GenericClient> Sql for Pg<'_, C> {
    fn execute(&mut self, q: &str, args: &[Value<'_>]) -> Step<u64> {
        let stmt = self.prepare(q, args)?;
        Ok(self.client.execute(&stmt, &pg_args(args))?)
    }

    fn query(&mut self, q: &str, args: &[Value<'_>]) -> Step<Vec<Row>> {
        let stmt = self.prepare(q, args)?;
        let names: Rc<[String]> = stmt.columns().iter().map(|c| c.name().into()).collect();
        self.client
            .query(&stmt, &pg_args(args))?
            .iter()
            .map(|r| Row::read(&names, |i| pg_value(r, i)))
            .collect()
    }

    fn for_update(&self) -> &'static str {
        " FOR UPDATE"
    }
}

fn pg_value(r: &postgres::Row, i: usize) -> Step<Value<'static>> {
    let ty = r.columns()[i].type_();
    let v = if *ty == Type::INT8 {
        r.try_get::<_, Option<i64>>(i)?.map(Value::Int)
    } else if *ty == Type::INT4 {
        r.try_get::<_, Option<i32>>(i)?
            .map(|v| Value::Int(v.into()))
    } else if *ty == Type::INT2 {
        r.try_get::<_, Option<i16>>(i)?
            .map(|v| Value::Int(v.into()))
    } else if *ty == Type::FLOAT8 {
        r.try_get::<_, Option<f64>>(i)?.map(Value::Real)
    } else if *ty == Type::BOOL {
        r.try_get::<_, Option<bool>>(i)?.map(Value::Bool)
    } else if *ty == Type::BYTEA {
        r.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::from)
    } else {
        // Text of any kind; another type is the client's error naming it.
        r.try_get::<_, Option<String>>(i)?.map(Value::from)
    };
    Ok(v.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars_outside_quotes() {
        assert_eq!(
            dollar("UPDATE t SET a = ?2, b = '?1' WHERE id = ?10 AND c = ?"),
            "UPDATE t SET a = $2, b = '?1' WHERE id = $10 AND c = ?"
        );
    }

    #[test]
    fn values_convert_both_ways_and_say_what_they_found() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut db = Lite(&conn);
        let rows = db
            .query(
                "SELECT ?1, ?2, ?3, ?4, ?5, ?6",
                args![7_u64, true, 0.5, "x", None::<i64>, vec![1_u8, 2]],
            )
            .unwrap();
        let r = &rows[0];
        assert_eq!(r.get::<u64>(0).unwrap(), 7);
        assert!(r.get::<bool>(1).unwrap());
        assert_eq!(r.get::<f64>(2).unwrap(), 0.5);
        assert_eq!(r.text(3).unwrap(), "x");
        assert_eq!(r.get::<Option<String>>(4).unwrap(), None);
        assert_eq!(r.get::<Vec<u8>>(5).unwrap(), [1, 2]);
        let Err(Fail::Decode(why)) = r.get::<i64>(3) else {
            panic!("text read as an integer")
        };
        assert!(why.contains("expected an integer, found text"), "{why}");
        let neg = db.query("SELECT -1 AS n", &[]).unwrap();
        let Err(Fail::Decode(why)) = neg[0].get::<u64>(0) else {
            panic!("a negative count")
        };
        assert_eq!(why, "column n: is negative (-1)");
        let Err(Fail::Invalid(why)) = db.query("SELECT ?1", args![u64::MAX]) else {
            panic!("2^64-1 bound")
        };
        assert!(why.contains("above 2^63-1"), "{why}");
    }
}
