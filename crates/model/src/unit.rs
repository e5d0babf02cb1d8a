//! The unit of a benchmark's value ([`Unit`]): what kind of quantity it is and its
//! scale to that quantity's base unit, so the report can show `2037751 ns` as `2.04 ms`
//! and `0.5 GB/s` as `500 MB/s` without guessing from text each time.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A unit: a quantity and the factor from this unit to the quantity's base unit.
///
/// Written and read as the text smtlab has always stored (`ns`, `GB/s`, `GOPS`,
/// `Mops/s`, `req/s`, `tps`); [`Unit::parse`] never fails (text it does not recognise is
/// [`Unit::Other`], shown as it is), and `Unit::parse(&u.to_string()) == u`.
#[derive(Debug, Clone, PartialEq)]
pub enum Unit {
    /// A time; the factor to seconds (`ns`: 1e-9). `ns`, `us`, `ms`, `s`.
    Time(f64),
    /// A size; the factor to bytes (`KiB`: 1024). `B`, `KiB`, `MiB`, `GiB`, `TiB`.
    Bytes(f64),
    /// Bytes per second; the factor to B/s (`GB/s`: 1e9, `GiB/s`: 2^30).
    ByteRate(f64),
    /// A count or rate of something that takes an SI prefix in front: `GOPS` is
    /// `Counted { scale: 1e9, what: "OPS" }`, `req/s` is `Counted { scale: 1, what: "req/s" }`.
    Counted { scale: f64, what: String },
    /// Anything else (`%`, `x`, `tps`, `connections`, `scripts/h`): shown as it is.
    Other(String),
}

const TIME: [(&str, f64); 4] = [("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0)];
const BINARY: [(&str, f64); 5] = [
    ("", 1.0),
    ("Ki", 1024.0),
    ("Mi", 1_048_576.0),
    ("Gi", 1_073_741_824.0),
    ("Ti", 1_099_511_627_776.0),
];
const DECIMAL: [(&str, f64); 5] = [("", 1.0), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12)];

fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn prefix_of(table: &[(&'static str, f64)], scale: f64) -> Option<&'static str> {
    table.iter().find(|(_, f)| same(*f, scale)).map(|(p, _)| *p)
}

impl Unit {
    /// The unit a text names. Also reads the spellings older results hold (`µs`, `sec`,
    /// `bytes`, `bytes/s`, `K` for kilo); everything unrecognised is [`Unit::Other`].
    pub fn parse(text: &str) -> Unit {
        let u = text.trim();
        match u {
            "ns" => return Unit::Time(1e-9),
            "us" | "µs" | "μs" => return Unit::Time(1e-6),
            "ms" => return Unit::Time(1e-3),
            "s" | "sec" => return Unit::Time(1.0),
            _ => {}
        }
        let binary = |p: &str| match p {
            "K" | "k" => Some(1024.0),
            p => BINARY.iter().find(|(x, _)| *x == p).map(|(_, f)| *f),
        };
        let decimal = |p: &str| match p {
            "K" => Some(1e3),
            p => DECIMAL.iter().find(|(x, _)| *x == p).map(|(_, f)| *f),
        };
        for rate in ["B/s", "bytes/s"] {
            if let Some(p) = u.strip_suffix(rate) {
                let f = if p.ends_with('i') {
                    binary(p)
                } else {
                    decimal(p)
                };
                if let Some(f) = f {
                    return Unit::ByteRate(f);
                }
            }
        }
        for size in ["B", "bytes"] {
            if let Some(p) = u.strip_suffix(size)
                && let Some(f) = binary(p)
            {
                return Unit::Bytes(f);
            }
        }
        // Rates and counts: `ops/s`, `Mops/s`, `GOPS`, `GFLOPS`, `req/s`, `msg/s`.
        let rate_like = |r: &str| {
            !r.is_empty()
                && (r.ends_with("/s") || r.ends_with("PS") || r == "ops" || r == "events")
                && r.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        };
        let mut chars = u.chars();
        if let Some(first) = chars.next() {
            let rest = chars.as_str();
            // `k` is not taken as a prefix here (`kops` is unusual); `MPKI`, `KPS`...
            // would parse as prefixes of nothing, hence the length.
            if let Some(f) = decimal(&first.to_string())
                && first != 'k'
                && rate_like(rest)
                && rest.len() > 1
            {
                return Unit::Counted {
                    scale: f,
                    what: rest.to_string(),
                };
            }
        }
        if rate_like(u) {
            return Unit::Counted {
                scale: 1.0,
                what: u.to_string(),
            };
        }
        Unit::Other(u.to_string())
    }

    /// The factor from this unit to its quantity's base unit (s, B, B/s, 1).
    pub fn to_base(&self) -> f64 {
        match self {
            Unit::Time(f) | Unit::Bytes(f) | Unit::ByteRate(f) => *f,
            Unit::Counted { scale, .. } => *scale,
            Unit::Other(_) => 1.0,
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let odd = |what: &str, x: f64| format!("{x}x {what}");
        match self {
            Unit::Time(x) => match TIME.iter().find(|(_, t)| same(*t, *x)) {
                Some((name, _)) => f.write_str(name),
                None => f.write_str(&odd("s", *x)),
            },
            Unit::Bytes(x) => match prefix_of(&BINARY, *x) {
                Some(p) => write!(f, "{p}B"),
                None => f.write_str(&odd("B", *x)),
            },
            Unit::ByteRate(x) => match prefix_of(&DECIMAL, *x).or_else(|| prefix_of(&BINARY, *x)) {
                Some(p) => write!(f, "{p}B/s"),
                None => f.write_str(&odd("B/s", *x)),
            },
            Unit::Counted { scale, what } => match prefix_of(&DECIMAL, *scale) {
                Some("k") => write!(f, "K{what}"),
                Some(p) => write!(f, "{p}{what}"),
                None => f.write_str(&odd(what, *scale)),
            },
            Unit::Other(text) => f.write_str(text),
        }
    }
}

impl From<&str> for Unit {
    fn from(text: &str) -> Unit {
        Unit::parse(text)
    }
}

impl Serialize for Unit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Unit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Unit, D::Error> {
        Ok(Unit::parse(&String::deserialize(d)?))
    }
}

/// A size in binary units with one decimal: 1536 -> `1.5 KiB`, 32768 -> `32 KiB`. The
/// decimal is dropped where it is zero, and from `whole_from` up in the chosen unit (a
/// plan's `150 MiB`; `f64::INFINITY` keeps it).
pub fn binary_size(bytes: u64, whole_from: f64) -> String {
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < BINARY.len() {
        v /= 1024.0;
        i += 1;
    }
    let prefix = BINARY[i].0;
    if v >= whole_from || v.fract() == 0.0 {
        format!("{v:.0} {prefix}B")
    } else {
        format!("{v:.1} {prefix}B")
    }
}

/// `1 thread`, `2 threads`: a count with its noun (regular plurals), worded one way by
/// every crate.
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every unit the catalog's benchmarks use today, as they are stored.
    const CATALOG_UNITS: [&str; 14] = [
        "GB/s",
        "MB/s",
        "GOPS",
        "Mbit/s",
        "Mtasks/s",
        "Mops/s",
        "connections",
        "jobs/s",
        "msg/s",
        "ns",
        "s",
        "req/s",
        "scripts/h",
        "tps",
    ];

    #[test]
    fn the_catalogs_units_read_back_as_the_same_text() {
        for text in CATALOG_UNITS {
            let u = Unit::parse(text);
            assert_eq!(u.to_string(), text, "{u:?}");
            assert_eq!(Unit::parse(&u.to_string()), u);
        }
    }

    #[test]
    fn units_know_their_quantity_and_scale() {
        assert_eq!(Unit::parse("ns"), Unit::Time(1e-9));
        assert_eq!(Unit::parse("µs"), Unit::Time(1e-6));
        assert_eq!(Unit::parse("KiB"), Unit::Bytes(1024.0));
        assert_eq!(Unit::parse("GB/s"), Unit::ByteRate(1e9));
        assert_eq!(Unit::parse("GiB/s").to_string(), "GiB/s");
        assert_eq!(
            Unit::parse("GOPS"),
            Unit::Counted {
                scale: 1e9,
                what: "OPS".into()
            }
        );
        assert_eq!(Unit::parse("MPKI"), Unit::Other("MPKI".into()));
        assert_eq!(Unit::parse("tps"), Unit::Other("tps".into()));
    }

    #[test]
    fn units_serialise_as_their_text() {
        let u: Unit = serde_json::from_str(r#""Mops/s""#).unwrap();
        assert_eq!(u.to_base(), 1e6);
        assert_eq!(serde_json::to_string(&u).unwrap(), r#""Mops/s""#);
    }

    #[test]
    fn a_size_keeps_its_decimal_below_whole_from() {
        let mib = 1_048_576;
        let size = 150 * mib + 314_573; // 150.3 MiB
        assert_eq!(binary_size(size, f64::INFINITY), "150.3 MiB");
        assert_eq!(binary_size(size, 100.0), "150 MiB");
        assert_eq!(binary_size(3 * mib / 2, 100.0), "1.5 MiB");
        assert_eq!(binary_size(4 * mib, f64::INFINITY), "4 MiB");
        assert_eq!(binary_size(100, 100.0), "100 B");
    }
}
