//! Values in readable units: `2.04 ms` rather than `2037751 ns`, `1.5 MiB` rather than
//! `1572864 B`, `3.20 M ops/s` rather than `3200000 ops/s`.
//!
//! A [`Column`] is chosen once for all the values that are read together (a table
//! column, a chart axis, a tooltip and its interval) and then formats each of them with
//! the same unit and the same number of decimals, so a column lines up and two numbers
//! in it are compared at a glance. The unit is picked from the median magnitude (so one
//! outlier does not turn a column of microseconds into seconds) and the decimals from
//! the smallest value, which gets three significant digits.
//!
//! Units smtlab uses and how they scale:
//! * time (`ns`, `us`, `ms`, `s`): ns, us, ms, s;
//! * sizes (`B`, `KiB`, `MiB`, `GiB`): binary steps of 1024;
//! * byte rates (`B/s`, `MB/s`, `GB/s`, `GiB/s`): decimal kB/s, MB/s, GB/s, TB/s, as
//!   memory and network bandwidth are quoted;
//! * other rates and counts with an SI prefix or none (`ops/s`, `Mops/s`, `GOPS`,
//!   `req/s`): K, M, G, T in front of the unit;
//! * anything else (ratios, `%`, `x`) is shown as it is.
//!
//! Unit texts are read by [`smtlab_model::Unit`] (the type of `BenchInfo::unit`); this
//! module chooses the step each column is shown in, and reads sizes ([`parse_size`]).

use smtlab_model::{Handoff, Unit, stats};

/// How values of one unit family scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Time,
    Bytes,
    ByteRate,
    /// Counts or rates that take an SI prefix in front of `rest`.
    Prefixed,
    Fixed,
}

/// A unit understood as a family, a factor to its base unit and, for prefixed units, the
/// part after the prefix.
#[derive(Debug, Clone, PartialEq)]
struct Parsed {
    family: Family,
    /// Value in this unit x `to_base` = value in the family's base unit (s, B, B/s, 1).
    to_base: f64,
    rest: String,
}

/// `unit` read as a [`Unit`] (the model's one parser of unit texts) and turned into the
/// family whose steps a column is shown in.
fn parse(unit: &str) -> Parsed {
    let u = Unit::parse(unit);
    let to_base = u.to_base();
    let (family, rest) = match u {
        Unit::Time(_) => (Family::Time, String::new()),
        Unit::Bytes(_) => (Family::Bytes, String::new()),
        Unit::ByteRate(_) => (Family::ByteRate, String::new()),
        Unit::Counted { what, .. } => (Family::Prefixed, what),
        Unit::Other(text) => (Family::Fixed, text),
    };
    Parsed {
        family,
        to_base,
        rest,
    }
}

/// The display steps of a family: (factor from the base unit, unit text).
fn steps(p: &Parsed) -> Vec<(f64, String)> {
    match p.family {
        Family::Time => vec![
            (1e-9, "ns".into()),
            (1e-6, "µs".into()),
            (1e-3, "ms".into()),
            (1.0, "s".into()),
        ],
        Family::Bytes => ["B", "KiB", "MiB", "GiB", "TiB"]
            .iter()
            .enumerate()
            .map(|(i, u)| (1024f64.powi(i as i32), u.to_string()))
            .collect(),
        Family::ByteRate => ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"]
            .iter()
            .enumerate()
            .map(|(i, u)| (1000f64.powi(i as i32), u.to_string()))
            .collect(),
        Family::Prefixed => {
            // `ops/s` reads `K ops/s`; `OPS` glues on: `GOPS`.
            let sep = if p.rest.contains('/') { " " } else { "" };
            ["", "K", "M", "G", "T"]
                .iter()
                .enumerate()
                .map(|(i, pre)| {
                    let text = if pre.is_empty() {
                        p.rest.clone()
                    } else {
                        format!("{pre}{sep}{}", p.rest)
                    };
                    (1000f64.powi(i as i32), text)
                })
                .collect()
        }
        Family::Fixed => vec![(1.0, p.rest.clone())],
    }
}

/// One unit and one number of decimals for a set of values read together.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Divide a value in the source unit by this to get the displayed number.
    pub divisor: f64,
    /// The displayed unit (`us`, `MiB`, `GB/s`, `M ops/s`); may be empty.
    pub unit: String,
    pub decimals: usize,
}

impl Column {
    /// The format for `values` given in `unit`.
    pub fn for_values(unit: &str, values: &[f64]) -> Column {
        let p = parse(unit);
        let mut mags: Vec<f64> = values
            .iter()
            .filter(|v| v.is_finite() && **v != 0.0)
            .map(|v| v.abs() * p.to_base)
            .collect();
        mags.sort_by(f64::total_cmp);
        let st = steps(&p);
        let (factor, text) = match mags.get(mags.len() / 2) {
            // The largest step that keeps the median at 1 or more.
            Some(&m) => st
                .iter()
                .rev()
                .find(|(f, _)| m >= *f * (1.0 - 1e-9))
                .unwrap_or(&st[0])
                .clone(),
            None => st
                .iter()
                .find(|(f, _)| (*f - p.to_base).abs() < 1e-12 * f.max(p.to_base))
                .cloned()
                .unwrap_or((p.to_base, p.rest.clone())),
        };
        let divisor = factor / p.to_base;
        let smallest = mags.first().map(|m| m / factor).unwrap_or(1.0);
        // Whole bytes have no decimals.
        let decimals = if p.family == Family::Bytes && factor == 1.0 {
            0
        } else {
            decimals_above(smallest)
        };
        Column {
            divisor,
            unit: text,
            decimals,
        }
    }

    /// The same unit with the decimals that `values` (in the source unit) need: for a
    /// table that must share a chart's unit but shows other values than it draws.
    pub fn decimals_for(&self, values: &[f64]) -> Column {
        let smallest = values
            .iter()
            .filter(|v| v.is_finite() && **v != 0.0)
            .map(|v| v.abs() / self.divisor)
            .fold(f64::INFINITY, f64::min);
        Column {
            decimals: if smallest.is_finite() {
                decimals_above(smallest)
            } else {
                0
            },
            ..self.clone()
        }
    }

    /// The number alone: `2.04`.
    pub fn num(&self, v: f64) -> String {
        if !v.is_finite() {
            return "-".into();
        }
        let d = self.decimals;
        format!("{:.d$}", v / self.divisor)
    }

    /// The number with its unit: `2.04 ms`.
    pub fn with_unit(&self, v: f64) -> String {
        if self.unit.is_empty() {
            self.num(v)
        } else {
            format!("{} {}", self.num(v), self.unit)
        }
    }

    /// `value ± half_width` in this column's format; the half-width keeps the column's
    /// decimals, or two significant digits if it is smaller than they show.
    pub fn pm(&self, v: f64, half: f64) -> String {
        if !half.is_finite() {
            return format!("{} ± -", self.num(v));
        }
        let h = half / self.divisor;
        let need = if h > 0.0 {
            (1 - h.log10().floor() as i32).max(0) as usize
        } else {
            0
        };
        let d = self.decimals.max(need.min(self.decimals + 2));
        format!("{} ± {h:.d$}", self.num(v))
    }

    /// `lo-hi` in this column's format.
    pub fn range(&self, lo: f64, hi: f64) -> String {
        format!("{}-{}", self.num(lo), self.num(hi))
    }
}

/// Decimals for a column whose smallest value is `smallest` (in the column's unit):
/// none from 100 up, then one more per decade down to three below 1.
fn decimals_above(smallest: f64) -> usize {
    match smallest {
        s if s >= 100.0 => 0,
        s if s >= 10.0 => 1,
        s if s >= 1.0 => 2,
        _ => 3,
    }
}

/// One value with the unit its own magnitude calls for: `2.04 ms`.
/// A time figure in core cycles at the measured clock (`unit` a time unit such as
/// `ns`); `None` for other units. Papers 000 and 002 give latencies in cycles.
pub fn cycles(unit: &str, v: f64, core_clock_ghz: f64) -> Option<f64> {
    match Unit::parse(unit) {
        Unit::Time(seconds) => Some(v * seconds * 1e9 * core_clock_ghz),
        _ => None,
    }
}

/// How the core clock was found, for the places that show it.
pub fn core_clock_text(ghz: f64) -> String {
    format!("{ghz:.3} GHz (measured: dependent integer additions, one per cycle)")
}

/// One pair's handoff: `CPU 0-1 25 ns`.
pub fn handoff_pair_text(h: &Handoff) -> String {
    format!("CPU {}-{} {:.0} ns", h.from_cpu, h.to_cpu, h.ns)
}

/// A run's handoffs in one line: `CPU 0-1 25 ns` for one pair; `CPU 0 with 15 others:
/// 21-250 ns, median 40 ns` for several; `None` for none (not recorded).
pub fn handoff_text(h: &[Handoff]) -> Option<String> {
    match h {
        [] => None,
        [one] => Some(handoff_pair_text(one)),
        [first, ..] => {
            let ns: Vec<f64> = h.iter().map(|x| x.ns).collect();
            Some(format!(
                "CPU {} with {} others: {:.0}-{:.0} ns, median {:.0} ns",
                first.from_cpu,
                h.len(),
                stats::min(&ns)?,
                stats::max(&ns)?,
                stats::median(&ns)?
            ))
        }
    }
}

pub fn scaled(unit: &str, v: f64) -> String {
    Column::for_values(unit, &[v]).with_unit(v)
}

/// A size in bytes in the unit its magnitude calls for, as short as exact allows:
/// `4 KiB`, `1.5 MiB`, `48 KiB`.
pub fn size(b: f64) -> String {
    let c = Column::for_values("B", &[b]);
    let x = b / c.divisor;
    let text = if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text} {}", c.unit)
}

/// A byte size as the benchmarks write it: `4096`, `4k`, `32KiB`, `64M`, `1GiB`, `2MB`.
pub fn parse_size(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let f = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024f64.powi(2),
        "g" | "gb" | "gib" => 1024f64.powi(3),
        "t" | "tb" | "tib" => 1024f64.powi(4),
        _ => return None,
    };
    Some(n * f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handoffs_read_in_one_line() {
        let pair = |to_cpu, ns| Handoff {
            from_cpu: 0,
            to_cpu,
            ns,
        };
        assert_eq!(handoff_text(&[]), None);
        assert_eq!(handoff_text(&[pair(1, 24.6)]).unwrap(), "CPU 0-1 25 ns");
        let many = [pair(1, 250.0), pair(2, 21.0), pair(3, 40.0)];
        assert_eq!(
            handoff_text(&many).unwrap(),
            "CPU 0 with 3 others: 21-250 ns, median 40 ns"
        );
    }

    #[test]
    fn time_columns_take_the_median_unit_and_the_smallest_values_decimals() {
        let c = Column::for_values("ns", &[2_037_751.0, 1_500_000.0, 90_000_000.0]);
        assert_eq!(c.unit, "ms");
        assert_eq!(c.num(2_037_751.0), "2.04");
        assert_eq!(c.num(90_000_000.0), "90.00");
        assert_eq!(c.pm(2_037_751.0, 2_133_334.0), "2.04 ± 2.13");
        let c = Column::for_values("ns", &[23.4, 61.0, 118.0]);
        assert_eq!((c.unit.as_str(), c.decimals), ("ns", 1));
        let c = Column::for_values("s", &[0.02049, 0.02213]);
        assert_eq!(c.with_unit(0.02049), "20.5 ms");
        assert_eq!(scaled("ns", 69_700.0), "69.7 µs");
    }

    #[test]
    fn sizes_rates_and_counts_scale() {
        assert_eq!(size(4096.0), "4 KiB");
        assert_eq!(size(1.5 * 1024.0 * 1024.0), "1.5 MiB");
        assert_eq!(size(512.0), "512 B");
        assert_eq!(size(45.705 * 1024f64.powi(3)), "45.7 GiB");
        assert_eq!(scaled("B/s", 12.5e9), "12.5 GB/s");
        assert_eq!(scaled("GB/s", 0.5), "500 MB/s");
        assert_eq!(scaled("ops/s", 3_200_000.0), "3.20 M ops/s");
        assert_eq!(scaled("Mops/s", 110.0), "110 M ops/s");
        assert_eq!(scaled("GOPS", 3.0), "3.00 GOPS");
        assert_eq!(scaled("GOPS", 0.5), "500 MOPS");
        assert_eq!(scaled("x", 1.25), "1.25 x");
        assert_eq!(scaled("MPKI", 2.5), "2.50 MPKI");
    }

    #[test]
    fn sizes_parse_as_the_benchmarks_write_them() {
        assert_eq!(parse_size("4096"), Some(4096.0));
        assert_eq!(parse_size("32KiB"), Some(32768.0));
        assert_eq!(parse_size("4k"), Some(4096.0));
        assert_eq!(parse_size("64MiB"), Some(64.0 * 1024.0 * 1024.0));
        assert_eq!(parse_size("1GiB"), Some(1024f64.powi(3)));
        assert_eq!(parse_size("auto"), None);
        assert_eq!(parse_size("12 parsecs"), None);
    }

    #[test]
    fn a_column_never_mixes_units_or_decimals() {
        let vals = [950.0, 1_200.0, 15_000.0];
        let c = Column::for_values("ns", &vals);
        let texts: Vec<String> = vals.iter().map(|v| c.num(*v)).collect();
        assert_eq!(c.unit, "µs");
        assert_eq!(texts, ["0.950", "1.200", "15.000"]);
        assert_eq!(Column::for_values("ns", &[]).unit, "ns");
        assert_eq!(c.num(f64::NAN), "-");
    }

    #[test]
    fn time_figures_read_in_cycles_at_the_measured_clock() {
        let near = |x: Option<f64>, want: f64| x.is_some_and(|x| (x - want).abs() < 1e-9);
        assert!(near(cycles("ns", 100.0, 3.0), 300.0));
        assert!(near(cycles("us", 2.0, 2.5), 5000.0));
        assert_eq!(cycles("GB/s", 2.0, 2.5), None);
    }
}
