//! Benchmark parameters as `key=value` strings, with typed accessors that understand
//! sizes (`64MiB`, `4k`) and name the parameter and the expected form on error.

use std::collections::BTreeMap;

use smtlab_model::BenchInfo;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamError {
    #[error("{bench}: unknown parameter {name:?}; it accepts: {accepted}")]
    Unknown {
        bench: String,
        name: String,
        accepted: String,
    },
    #[error("parameter {text:?}: expected key=value")]
    Syntax { text: String },
    #[error("parameter {name}={value:?}: expected {expected}")]
    Value {
        name: String,
        value: String,
        expected: String,
    },
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
        for text in given {
            let (k, v) = text
                .split_once('=')
                .ok_or_else(|| ParamError::Syntax { text: text.clone() })?;
            let k = k.trim();
            if !values.contains_key(k) {
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
            values.insert(k.to_string(), v.trim().to_string());
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

    fn raw(&self, name: &str) -> Result<&str, ParamError> {
        self.values
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| ParamError::Value {
                name: name.to_string(),
                value: String::new(),
                expected: "a value (the benchmark did not declare this parameter)".into(),
            })
    }

    pub fn get_str(&self, name: &str) -> Result<&str, ParamError> {
        self.raw(name)
    }

    pub fn get_u64(&self, name: &str) -> Result<u64, ParamError> {
        let v = self.raw(name)?;
        v.parse().map_err(|_| ParamError::Value {
            name: name.into(),
            value: v.into(),
            expected: "a non-negative integer".into(),
        })
    }

    pub fn get_f64(&self, name: &str) -> Result<f64, ParamError> {
        let v = self.raw(name)?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| ParamError::Value {
                name: name.into(),
                value: v.into(),
                expected: "a number".into(),
            })
    }

    /// A byte size: `4096`, `4k`/`4KiB` (1024), `64M`/`64MiB`, `1G`/`1GiB`; `KB`/`MB`/`GB`
    /// are decimal.
    pub fn get_bytes(&self, name: &str) -> Result<u64, ParamError> {
        let v = self.raw(name)?;
        parse_bytes(v).ok_or_else(|| ParamError::Value {
            name: name.into(),
            value: v.into(),
            expected: "a size such as 4096, 32KiB, 64MiB or 1GiB".into(),
        })
    }
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
                name: "size".into(),
                default: "64MiB".into(),
                quick: Some("4MiB".into()),
                help: String::new(),
            }],
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
