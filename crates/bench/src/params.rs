//! Benchmark parameters as `key=value` strings, with typed accessors that understand
//! sizes (`64MiB`, `4k`) and name the parameter and the expected form on error.
//!
//! A key given twice with different values is a sweep ([`sweep`]): one [`Params`] per
//! combination. [`Params::resolve`] takes one value per key and refuses a second, so a
//! repeated `--param` never silently keeps the last value.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use smtlab_model::quote::quoted;
use smtlab_model::{BenchInfo, ParamInfo};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    #[error("{bench}: unknown parameter {}; it accepts: {accepted}", quoted(.name))]
    Unknown {
        bench: String,
        name: String,
        accepted: String,
    },
    #[error("parameter {}: expected key=value", quoted(.text))]
    Syntax { text: String },
    #[error(
        "parameter {name} given twice ({} and {}): expected one value per \
         parameter here; a sweep over both is a list of cells",
        quoted(.first),
        quoted(.second)
    )]
    Repeated {
        name: String,
        first: String,
        second: String,
    },
    #[error("parameter {name}={}: expected {expected}", quoted(.value))]
    Value {
        name: String,
        value: String,
        expected: String,
    },
}

impl ParamError {
    /// A value that does not fit: the parameter, the value as given (or as read), and what
    /// was expected instead ("1 to 1000 users").
    pub fn value(
        name: impl Into<String>,
        value: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        Self::Value {
            name: name.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }
}

/// [`ParamError::value`] as the [`crate::BenchError`] a `prepare` returns.
pub(crate) fn bad(name: &str, value: &str, expected: &str) -> crate::BenchError {
    ParamError::value(name, value, expected).into()
}

/// The parameters of one cell: every parameter the benchmark declares, with the user's
/// values over the defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    values: BTreeMap<String, String>,
}

impl Params {
    /// Defaults of `info` (or its quick values when `quick`), overridden by `given`
    /// (`key=value` strings). Unknown keys are an error that lists the accepted ones.
    pub fn resolve(info: &BenchInfo, given: &[String], quick: bool) -> Result<Self, ParamError> {
        let mut values: BTreeMap<String, String> = info
            .params
            .iter()
            .map(|p| {
                let v = if quick {
                    p.quick.as_ref().unwrap_or(&p.default)
                } else {
                    &p.default
                };
                (p.name.clone(), v.clone())
            })
            .collect();
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        for text in given {
            let (k, v) = split_pair(info, text)?;
            match seen.get(k) {
                Some(first) if *first != v => {
                    return Err(ParamError::Repeated {
                        name: k.to_string(),
                        first: first.to_string(),
                        second: v.to_string(),
                    });
                }
                _ => {
                    seen.insert(k, v);
                }
            }
            values.insert(k.to_string(), v.to_string());
        }
        Ok(Self { values })
    }

    /// Builds parameters directly (tests, suites).
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            values: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn get_str(&self, name: &str) -> Result<&str, ParamError> {
        self.values.get(name).map(String::as_str).ok_or_else(|| {
            ParamError::value(
                name,
                "",
                "a value (the benchmark did not declare this parameter)",
            )
        })
    }

    pub fn get_u64(&self, name: &str) -> Result<u64, ParamError> {
        let v = self.get_str(name)?;
        v.parse()
            .map_err(|_| ParamError::value(name, v, "a non-negative integer"))
    }

    pub fn get_f64(&self, name: &str) -> Result<f64, ParamError> {
        let v = self.get_str(name)?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| ParamError::value(name, v, "a number"))
    }

    /// A whole number within `range`; outside it, an error saying `expected` (e.g. "1 to
    /// 1000 users").
    pub fn get_u64_in(
        &self,
        name: &str,
        range: RangeInclusive<u64>,
        expected: &str,
    ) -> Result<u64, ParamError> {
        within(name, self.get_u64(name)?, range, expected)
    }

    /// A byte size (as [`Params::get_bytes`]) within `range`; outside it, an error saying
    /// `expected`.
    pub fn get_bytes_in(
        &self,
        name: &str,
        range: RangeInclusive<u64>,
        expected: &str,
    ) -> Result<u64, ParamError> {
        within(name, self.get_bytes(name)?, range, expected)
    }

    /// A length of time with its unit, `200ms`, `2s` or `0.5s` (also `us`, `min`), within
    /// `range`. A bare number is refused: its unit once differed between benchmarks.
    pub fn get_duration_in(
        &self,
        name: &str,
        range: RangeInclusive<std::time::Duration>,
    ) -> Result<std::time::Duration, ParamError> {
        let v = self.get_str(name)?;
        let show = |d: &std::time::Duration| format_duration(*d);
        let expected = format!(
            "a time with its unit from {} to {}, e.g. 200ms or 2s",
            show(range.start()),
            show(range.end())
        );
        match parse_duration(v) {
            Some(d) if range.contains(&d) => Ok(d),
            _ => Err(ParamError::value(name, v, expected)),
        }
    }

    /// A byte size: `4096`, `4k`/`4KiB` (1024), `64M`/`64MiB`, `1G`/`1GiB`; `KB`/`MB`/`GB`
    /// are decimal.
    pub fn get_bytes(&self, name: &str) -> Result<u64, ParamError> {
        let v = self.get_str(name)?;
        parse_bytes(v)
            .ok_or_else(|| ParamError::value(name, v, "a size such as 4096, 32KiB, 64MiB or 1GiB"))
    }
}

/// Parses `200ms`, `2s`, `0.5s`, `1.5min`, `500us`; `None` without a unit or for a
/// negative or non-finite number.
pub fn parse_duration(text: &str) -> Option<std::time::Duration> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = t.split_at(split);
    let x: f64 = num.trim().parse().ok()?;
    let scale = match unit {
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "min" => 60.0,
        _ => return None,
    };
    let secs = x * scale;
    (0.0..1e9)
        .contains(&secs)
        .then(|| std::time::Duration::from_secs_f64(secs))
}

/// `1.5s`, `200ms`: the shortest of the two that is a whole or short number.
pub fn format_duration(d: std::time::Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1000.0 {
        format!("{}ms", (ms * 1000.0).round() / 1000.0)
    } else {
        format!("{}s", (d.as_secs_f64() * 1000.0).round() / 1000.0)
    }
}

fn within(
    name: &str,
    v: u64,
    range: RangeInclusive<u64>,
    expected: &str,
) -> Result<u64, ParamError> {
    if range.contains(&v) {
        Ok(v)
    } else {
        Err(ParamError::value(name, v.to_string(), expected))
    }
}

/// Splits `key=value` (both trimmed) and checks that `info` declares the key.
fn split_pair<'a>(info: &BenchInfo, text: &'a str) -> Result<(&'a str, &'a str), ParamError> {
    let (k, v) = text.split_once('=').ok_or_else(|| ParamError::Syntax {
        text: text.to_string(),
    })?;
    let k = k.trim();
    if !info.params.iter().any(|p| p.name == k) {
        let accepted = if info.params.is_empty() {
            "no parameters".to_string()
        } else {
            info.params
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(ParamError::Unknown {
            bench: info.name.clone(),
            name: k.to_string(),
            accepted,
        });
    }
    Ok((k, v.trim()))
}

/// A benchmark's parameter declaration; `quick` is the value `--quick` runs use instead
/// of `default`.
pub fn declare(name: &str, default: &str, quick: Option<&str>, help: &str) -> ParamInfo {
    ParamInfo {
        departs: Vec::new(),
        name: name.into(),
        default: default.into(),
        quick: quick.map(Into::into),
        help: help.into(),
    }
}

/// The cells a command line asks for: every combination of the values given for each key
/// (`size=4k size=64MiB threads=1 threads=2` is four), each over the defaults as in
/// [`Params::resolve`]. Keys vary in the order they were first given, the first one
/// slowest, and each key's values keep their order; a value given twice counts once. No
/// given pairs is one cell of defaults. Unknown keys and pairs without `=` are errors, as
/// in [`Params::resolve`].
pub fn sweep(info: &BenchInfo, given: &[String], quick: bool) -> Result<Vec<Params>, ParamError> {
    // (key, its distinct values in order), keys in order of first appearance.
    let mut axes: Vec<(&str, Vec<&str>)> = Vec::new();
    for text in given {
        let (k, v) = split_pair(info, text)?;
        match axes.iter_mut().find(|(key, _)| *key == k) {
            Some((_, values)) => {
                if !values.contains(&v) {
                    values.push(v);
                }
            }
            None => axes.push((k, vec![v])),
        }
    }
    let mut combos: Vec<Vec<String>> = vec![Vec::new()];
    for (k, values) in &axes {
        combos = combos
            .into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push(format!("{k}={v}"));
                    next
                })
            })
            .collect();
    }
    combos
        .iter()
        .map(|pairs| Params::resolve(info, pairs, quick))
        .collect()
}

/// Parses a byte size (see [`Params::get_bytes`]).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_model::{Direction, ParamInfo, ValueKind};

    #[test]
    fn durations_carry_their_unit() {
        use std::time::Duration;
        assert_eq!(parse_duration("200ms"), Some(Duration::from_millis(200)));
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("0.5s"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1min"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("250us"), Some(Duration::from_micros(250)));
        for bad in ["200", "2 sec", "-1s", "s", "1h", "NaNs"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        let p = Params::from_pairs([("duration", "200")]);
        let e = p
            .get_duration_in(
                "duration",
                Duration::from_millis(1)..=Duration::from_secs(10),
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("duration=\"200\"") && e.contains("e.g. 200ms or 2s"),
            "{e}"
        );
        assert_eq!(format_duration(Duration::from_millis(200)), "200ms");
        assert_eq!(format_duration(Duration::from_millis(2500)), "2.5s");
    }

    fn info() -> BenchInfo {
        BenchInfo {
            name: "mem-read".into(),
            group: "memory".into(),
            unit: "GB/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1e9 },
            description: String::new(),
            origin: String::new(),
            params: vec![ParamInfo {
                departs: Vec::new(),
                name: "size".into(),
                default: "64MiB".into(),
                quick: Some("4MiB".into()),
                help: String::new(),
            }],
            main_param: None,
            report: Default::default(),
        }
    }

    #[test]
    fn defaults_quick_values_and_overrides() {
        let p = Params::resolve(&info(), &[], false).unwrap();
        assert_eq!(p.get_bytes("size").unwrap(), 64 << 20);
        let p = Params::resolve(&info(), &[], true).unwrap();
        assert_eq!(p.get_bytes("size").unwrap(), 4 << 20);
        let p = Params::resolve(&info(), &["size=1GiB".into()], true).unwrap();
        assert_eq!(p.get_bytes("size").unwrap(), 1 << 30);
    }

    #[test]
    fn errors_name_the_parameter_and_what_is_accepted() {
        let e = Params::resolve(&info(), &["sise=1".into()], false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "mem-read: unknown parameter \"sise\"; it accepts: size"
        );
        let e = Params::resolve(&info(), &["size".into()], false).unwrap_err();
        assert!(e.to_string().contains("expected key=value"));
        let p = Params::resolve(&info(), &["size=lots".into()], false).unwrap();
        assert!(
            p.get_bytes("size")
                .unwrap_err()
                .to_string()
                .contains("size=\"lots\"")
        );
    }

    fn two_params() -> BenchInfo {
        let mut info = info();
        info.params.push(ParamInfo {
            departs: Vec::new(),
            name: "threads".into(),
            default: "1".into(),
            quick: None,
            help: String::new(),
        });
        info
    }

    fn pairs(p: &Params) -> Vec<(String, String)> {
        p.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    fn given(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn ranged_getters_take_the_bounds_and_name_what_is_expected() {
        let p = Params::from_pairs([("n", "5"), ("size", "4KiB")]);
        assert_eq!(p.get_u64_in("n", 1..=5, "1 to 5").unwrap(), 5);
        assert_eq!(
            p.get_bytes_in("size", 1..=4096, "up to 4 KiB").unwrap(),
            4096
        );
        let e = p.get_u64_in("n", 6..=9, "6 to 9 things").unwrap_err();
        assert_eq!(e.to_string(), "parameter n=\"5\": expected 6 to 9 things");
        let e = p
            .get_bytes_in("size", 1..=4095, "less than 4 KiB")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "parameter size=\"4096\": expected less than 4 KiB"
        );
        // What does not parse says so, not the range.
        let e = p.get_u64_in("size", 0..=9, "0 to 9").unwrap_err();
        assert!(e.to_string().contains("a non-negative integer"), "{e}");
    }

    #[test]
    fn a_repeated_key_is_never_last_one_wins() {
        let e = Params::resolve(&info(), &given(&["size=4k", "size=8k"]), false).unwrap_err();
        assert!(matches!(e, ParamError::Repeated { .. }), "{e}");
        assert!(e.to_string().contains("\"4k\" and \"8k\""), "{e}");
        // The same value twice asks for nothing new.
        let p = Params::resolve(&info(), &given(&["size=4k", "size=4k"]), false).unwrap();
        assert_eq!(p.get_bytes("size").unwrap(), 4096);
    }

    #[test]
    fn a_sweep_is_the_product_of_the_values_in_the_order_given() {
        let info = two_params();
        let cells = sweep(
            &info,
            &given(&["threads=2", "size=4k", "threads=1", "size=8k", "size=4k"]),
            false,
        )
        .unwrap();
        let got: Vec<(String, String)> = cells
            .iter()
            .map(|p| {
                (
                    p.get_str("threads").unwrap().to_string(),
                    p.get_str("size").unwrap().to_string(),
                )
            })
            .collect();
        let want = [("2", "4k"), ("2", "8k"), ("1", "4k"), ("1", "8k")]
            .map(|(t, s)| (t.to_string(), s.to_string()));
        assert_eq!(got, want);
    }

    #[test]
    fn a_sweep_without_repeats_is_one_resolve() {
        let info = two_params();
        for (g, quick) in [(vec![], true), (given(&["threads=4"]), false)] {
            let cells = sweep(&info, &g, quick).unwrap();
            assert_eq!(cells.len(), 1);
            assert_eq!(
                pairs(&cells[0]),
                pairs(&Params::resolve(&info, &g, quick).unwrap())
            );
        }
        assert_eq!(
            sweep(&info, &[], true).unwrap()[0]
                .get_bytes("size")
                .unwrap(),
            4 << 20
        );
    }

    #[test]
    fn a_sweep_refuses_unknown_keys_and_bad_pairs() {
        let info = two_params();
        let e = sweep(&info, &given(&["size=4k", "sise=8k"]), false).unwrap_err();
        assert!(matches!(e, ParamError::Unknown { .. }), "{e}");
        let e = sweep(&info, &given(&["size"]), false).unwrap_err();
        assert!(matches!(e, ParamError::Syntax { .. }), "{e}");
    }

    #[test]
    fn byte_sizes() {
        assert_eq!(parse_bytes("4k"), Some(4096));
        assert_eq!(parse_bytes("32KiB"), Some(32768));
        assert_eq!(parse_bytes("2MB"), Some(2_000_000));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_bytes("99999999999999999999G"), None);
        assert_eq!(parse_bytes("18446744073709551615G"), None);
    }
}
