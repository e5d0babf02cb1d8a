//! Small formatting helpers shared by the text tables and the HTML page: numbers with
//! four significant digits, HTML escaping, parameter lists, dates, plain-text tables.

use std::collections::BTreeMap;

use smtlab_model::Summary;
use smtlab_model::stats::Significance;
use smtlab_model::verdict::Verdict;

/// Decimals that give `x` four significant digits; `None` below 1e-4, where an exponent
/// reads better.
fn decimals(x: f64) -> Option<usize> {
    let a = x.abs();
    if a == 0.0 || a >= 1000.0 {
        Some(0)
    } else if a < 1e-4 {
        None
    } else {
        Some((3 - a.log10().floor() as i32).max(0) as usize)
    }
}

/// Four significant digits (all digits from a thousand up), no exponent for everyday
/// magnitudes; `-` for a non-finite value, which only arises when something could not
/// be computed.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    match decimals(x) {
        Some(d) => format!("{x:.d$}"),
        None => format!("{x:.3e}"),
    }
}

/// `value ± half_width`, the half-width with two significant digits but never fewer
/// decimals than the value, so the two line up: `454.6 ± 3.9`, `0.06213 ± 0.00039`.
pub fn pm(value: f64, half_width: f64) -> String {
    if !half_width.is_finite() || !value.is_finite() {
        return format!("{} ± -", num(value));
    }
    let Some(d) = decimals(value) else {
        return format!("{} ± {:.1e}", num(value), half_width);
    };
    let need = if half_width > 0.0 {
        (1 - half_width.log10().floor() as i32).max(0) as usize
    } else {
        0
    };
    let hd = d.max(need).min(9);
    format!("{} ± {half_width:.hd$}", num(value))
}

/// A percentage with two significant digits: `0.85%`, `4.5%`, `12%`.
pub fn pct2(p: f64) -> String {
    if !p.is_finite() {
        return "-".into();
    }
    let a = p.abs();
    if a >= 10.0 {
        format!("{p:.0}%")
    } else if a >= 1.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.2}%")
    }
}

/// Up to three decimals with trailing zeros removed, for settings (`2`, `0.5`, `10`).
pub fn short(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A ratio with three decimals (`1.244`), the precision a yield is read at.
pub fn times(r: f64) -> String {
    if r.is_finite() {
        format!("{r:.3}")
    } else {
        "-".into()
    }
}

/// A ratio as a signed percentage change: 1.053 -> `+5.3%`.
pub fn pct(ratio: f64) -> String {
    if !ratio.is_finite() {
        return "-".into();
    }
    let p = (ratio - 1.0) * 100.0;
    // Avoid "-0.0%" for ratios a hair under one.
    let p = if p.abs() < 0.05 { 0.0 } else { p };
    format!("{p:+.1}%")
}

/// The one ratio format: the ratio with three decimals and an `x`, then its 95% interval
/// where both ends are known: `1.250x [1.210, 1.290]`, `1.048x`. Every output that
/// prints a ratio (speed-ups, yields, slowdowns, geometric means) goes through here.
pub fn ratio_ci(ratio: f64, lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("{}x [{}, {}]", times(ratio), times(lo), times(hi)),
        _ => format!("{}x", times(ratio)),
    }
}

/// What a comparison's interval says, in the words every output uses beside its figure:
/// `at a limit (WHY)` where a figure is a bound, `unsteady (WHY)` where a cell would not
/// repeat, else the significance's words (`faster`, `not significant at 95%`, ...).
pub fn verdict_words(
    significance: Significance,
    unsteady: Option<&str>,
    at_limit: Option<&str>,
) -> String {
    match (at_limit, unsteady) {
        (Some(which), _) => format!("at a limit ({which})"),
        (None, Some(why)) => format!("unsteady ({why})"),
        (None, None) => significance.words().to_string(),
    }
}

/// A [`Verdict`] as every output prints it: [`speedup`]'s figure and interval with the
/// verdict's words, which say `unsteady` (and why) where a cell would not repeat:
/// `1.250x [1.210, 1.290] faster`, `1.048x [0.610, 1.601] unsteady (1c2t: CV 31%)`,
/// `1.000x [1.000, 1.000] at a limit (1c1t: at least 64 (configured ceiling))`.
pub fn verdict(v: &Verdict) -> String {
    let r = &v.speedup;
    let words = verdict_words(v.significance, v.unsteady.as_deref(), v.at_limit.as_deref());
    format!("{} {words}", ratio_ci(r.ratio, r.ci95_low, r.ci95_high))
}

/// Signed percentage with a precision that suits it: `+18%`, `+4.5%`, `-0.3%`.
pub fn signed_pct(p: f64) -> String {
    let p = if p.abs() < 0.05 { 0.0 } else { p };
    if p.abs() >= 10.0 {
        format!("{p:+.0}%")
    } else {
        format!("{p:+.1}%")
    }
}

/// A ratio as a change in percent with its 95% interval, the one way a gain is written:
/// `+18% [+15%, +21%]`, or `+5.0% (no interval)` where there is none.
pub fn gain_ci(ratio: f64, lo: Option<f64>, hi: Option<f64>) -> String {
    let p = |r: f64| signed_pct((r - 1.0) * 100.0);
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("{} [{}, {}]", p(ratio), p(lo), p(hi)),
        _ => format!("{} (no interval)", p(ratio)),
    }
}

/// A gain ([`gain_ci`]) with the words its interval allows, as [`verdict`] words the
/// ratio, less `faster`/`slower`, which the sign says: `+18% [+15%, +21%]`,
/// `+0.4% [-1.0%, +2.0%] not significant at 95%`, `+27% [-27%, +147%] unsteady (2c1t:
/// CV 27%)`, `+0.0% [+0.0%, +0.0%] at a limit (WHICH)`.
pub fn gain_words(
    ratio: f64,
    lo: Option<f64>,
    hi: Option<f64>,
    significance: Significance,
    unsteady: Option<&str>,
    at_limit: Option<&str>,
) -> String {
    let figure = gain_ci(ratio, lo, hi);
    match (significance, unsteady, at_limit) {
        // The sign says faster or slower; `(no interval)` says the rest.
        (
            Significance::Faster
            | Significance::Slower
            | Significance::NoInterval
            | Significance::Unbounded,
            None,
            None,
        ) => figure,
        _ => format!(
            "{figure} {}",
            verdict_words(significance, unsteady, at_limit)
        ),
    }
}

/// A [`Verdict`] as a gain in plain words ([`gain_words`]): `+18% [+15%, +21%]`,
/// `+0.4% [-1.0%, +2.0%] not significant at 95%`: `(speedup - 1) * 100`, positive when
/// [`verdict`]'s ratio is above 1.
pub fn gain(v: &Verdict) -> String {
    let r = &v.speedup;
    gain_words(
        r.ratio,
        r.ci95_low,
        r.ci95_high,
        v.significance,
        v.unsteady.as_deref(),
        v.at_limit.as_deref(),
    )
}

/// The speed-up's verdict alone, for a narrow column: `faster`, `slower`, `no` (the
/// interval includes 1), `n=1`, `unbounded` or `unsteady`.
pub fn significance_short(s: Significance) -> &'static str {
    match s {
        Significance::Faster => "faster",
        Significance::Slower => "slower",
        Significance::NotSignificant => "no",
        Significance::NoInterval => "n=1",
        Significance::Unbounded => "unbounded",
        Significance::Unsteady => "unsteady",
        Significance::AtLimit => "at limit",
    }
}

/// The mean with its 95% interval as the terminal prints it: `454.6 +- 3.9 (0.85%)`, or
/// `454.6 (n=1, no interval)` for a single sample, whose spread is unknown rather than
/// zero.
pub fn mean_ci(s: &Summary) -> String {
    if s.n < 2 {
        return format!("{} (n={}, no interval)", num(s.mean), s.n);
    }
    format!(
        "{} ({})",
        pm(s.mean, s.ci95_half_width).replace('±', "+-"),
        pct2(100.0 * s.ci95_rel)
    )
}

/// `s` cut to at most `max` characters, the last an ellipsis where it was cut.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.into()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// Escapes text for HTML element content and double- or single-quoted attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab and newline are not allowed in XML;
            // a hostname or command line should never hold one, but if it does the
            // page must still parse.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Text in a maud template escaped by [`esc`]: beyond maud's own escaping, control
/// characters are replaced, so that a chart saved as a stand-alone SVG file stays XML.
pub struct Esc<'a>(pub &'a str);

impl maud::Render for Esc<'_> {
    fn render_to(&self, buffer: &mut String) {
        buffer.push_str(&esc(self.0));
    }
}

/// `k=v k2=v2`, or `-` when there are no parameters to show.
pub fn params(p: &BTreeMap<String, String>) -> String {
    let words = param_words(p);
    if words.is_empty() {
        return "-".into();
    }
    words.join(" ")
}

/// A cell's parameters as a person reads them, `k=v` each: one left unset (an empty
/// value, as `server=cmd`'s `cmd=` on a built-in server) says nothing and is left out.
/// Exports keep every parameter.
pub fn param_words<'a>(p: impl IntoIterator<Item = (&'a String, &'a String)>) -> Vec<String> {
    p.into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

/// CPU numbers in thread order (`0,4`), or `unpinned`.
pub fn cpus(cpus: &[u32]) -> String {
    if cpus.is_empty() {
        return "unpinned".into();
    }
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Bytes in binary units: 32768 -> `32 KiB`.
pub fn bytes(b: u64) -> String {
    smtlab_model::unit::binary_size(b, f64::INFINITY)
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`, without a date library
/// (Howard Hinnant's days-to-civil algorithm).
pub fn utc(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Left-aligned plain-text table; columns listed in `right` are right-aligned (numbers).
/// Trailing spaces are trimmed so snapshots stay clean. The [`crate::table::Table`]
/// engine, as wide as the cells need.
pub fn text_table(header: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let mut t = crate::table::Table::new(header.iter().copied()).right(right);
    for r in rows {
        t.row(r.iter().take(header.len()).cloned());
    }
    t.render()
}

/// A matrix as a text table: a row per `rows` name, a column per `cols` name (headed
/// `corner` above the row names), each entry `entry(row, column)`, right-aligned.
pub fn matrix_table<S: AsRef<str>>(
    corner: &str,
    rows: &[S],
    cols: &[S],
    entry: impl Fn(&str, &str) -> String,
) -> String {
    let mut head = vec![corner];
    head.extend(cols.iter().map(AsRef::as_ref));
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|a| {
            let a = a.as_ref();
            let mut r = vec![a.to_string()];
            r.extend(cols.iter().map(|b| entry(a, b.as_ref())));
            r
        })
        .collect();
    let right: Vec<usize> = (1..head.len()).collect();
    text_table(&head, &body, &right)
}

/// A cell's figure as the bound it is, where it reached a limit of the measurement:
/// `at least 64 connections (configured ceiling)`.
pub fn at_limit(cell: &smtlab_model::CellRecord) -> Option<String> {
    let l = cell.result.limit()?;
    Some(l.bound_text(cell.direction, &format!("{} {}", short(l.limit), cell.unit)))
}

/// The size of the process a fork row forked from, as its samples state it (the
/// largest): `forking process 1.9 MiB resident (160 KiB anonymous), 52 mappings`.
pub fn fork_size(cell: &smtlab_model::CellRecord) -> Option<String> {
    use smtlab_model::metrics::fork;
    let most = |name: &str| {
        let values = crate::html_workloads::cells::metric_values(cell, name);
        values.into_iter().reduce(f64::max)
    };
    let rss = most(fork::FORKING_RSS_BYTES)?;
    let anon = most(fork::FORKING_ANON_BYTES)
        .map(|a| format!(" ({:.0} KiB anonymous)", a / 1024.0))
        .unwrap_or_default();
    let maps = most(fork::FORKING_MAPPINGS)
        .map(|m| format!(", {m:.0} mappings"))
        .unwrap_or_default();
    Some(format!(
        "forking process {:.1} MiB resident{anon}{maps}",
        rss / (1u64 << 20) as f64
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cell whose samples carry `metrics`.
    fn cell_with(metrics: &[(&str, f64)], unit: &str) -> smtlab_model::CellRecord {
        let sample = smtlab_model::SampleRecord {
            value: 64.0,
            iterations: 1,
            elapsed_ns: 1,
            work: 64.0,
            cpu_ns: None,
            start_spread_ns: None,
            cpus: Vec::new(),
            metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        };
        smtlab_model::CellRecord {
            benchmark: "b".into(),
            group: "g".into(),
            unit: unit.into(),
            direction: smtlab_model::Direction::Higher,
            params: Default::default(),
            conditions: Default::default(),
            placement_spec: "1c1t".into(),
            placement: crate::testutil::placement("1c1t", "1c1t", 1, 1),
            result: crate::testutil::result(vec![sample; 3], &[64.0, 64.0, 64.0]),
            counters: None,
        }
    }

    #[test]
    fn limits_and_fork_sizes_are_said_with_the_figure() {
        use smtlab_model::metrics::{fork, limit};
        let c = cell_with(&[(limit::CEILING, 64.0)], "connections");
        assert_eq!(
            at_limit(&c).as_deref(),
            Some("at least 64 connections (configured ceiling)")
        );
        assert_eq!(fork_size(&c), None);
        let c = cell_with(
            &[
                (fork::FORKING_RSS_BYTES, 3.0 * 1048576.0),
                (fork::FORKING_MAPPINGS, 52.0),
            ],
            "ns",
        );
        assert_eq!(at_limit(&c), None);
        assert_eq!(
            fork_size(&c).as_deref(),
            Some("forking process 3.0 MiB resident, 52 mappings")
        );
        let c = cell_with(
            &[
                (fork::FORKING_RSS_BYTES, 3.0 * 1048576.0),
                (fork::FORKING_ANON_BYTES, 160.0 * 1024.0),
                (fork::FORKING_MAPPINGS, 31.0),
            ],
            "ns",
        );
        assert_eq!(
            fork_size(&c).as_deref(),
            Some("forking process 3.0 MiB resident (160 KiB anonymous), 31 mappings")
        );
    }

    #[test]
    fn numbers_keep_four_significant_digits() {
        assert_eq!(num(12345.6), "12346");
        assert_eq!(num(123.456), "123.5");
        assert_eq!(num(12.3456), "12.35");
        assert_eq!(num(1.23456), "1.235");
        assert_eq!(num(0.001234), "0.001234");
        assert_eq!(num(0.062134), "0.06213");
        assert_eq!(num(0.00001234), "1.234e-5");
        assert_eq!(pm(454.6, 3.872), "454.6 ± 3.9");
        assert_eq!(pm(70721.0, 702.2), "70721 ± 702");
        assert_eq!(pm(0.062134, 0.000389), "0.06213 ± 0.00039");
        assert_eq!(pm(12.01, 0.056), "12.01 ± 0.056");
        assert_eq!(pct2(0.852), "0.85%");
        assert_eq!(pct2(4.491), "4.5%");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(f64::NAN), "-");
        assert_eq!(short(2.0), "2");
        assert_eq!(short(0.05 * 100.0), "5");
        assert_eq!(short(12.5), "12.5");
        assert_eq!(pct(1.053), "+5.3%");
        assert_eq!(pct(0.9), "-10.0%");
        assert_eq!(pct(0.99999), "+0.0%");
    }

    #[test]
    fn speedups_print_with_their_verdict() {
        use smtlab_model::Direction;
        use smtlab_model::stats::{Ratio, speedup as sp, summarize};
        let speedup = |r: &Ratio| {
            format!(
                "{} {}",
                ratio_ci(r.ratio, r.ci95_low, r.ci95_high),
                r.significance().words()
            )
        };
        let a = summarize(&[10.0, 10.1, 9.9, 10.0]).unwrap();
        let b = summarize(&[8.0, 8.1, 7.9, 8.0]).unwrap();
        let t = speedup(&sp(&a, &b, Direction::Lower).unwrap());
        assert!(t.starts_with("1.250x [") && t.ends_with("] faster"), "{t}");
        let t = speedup(&sp(&a, &b, Direction::Higher).unwrap());
        assert!(t.starts_with("0.800x [") && t.ends_with("] slower"), "{t}");
        let noisy = summarize(&[10.0, 12.0, 8.0, 10.5]).unwrap();
        let t = speedup(&sp(&a, &noisy, Direction::Higher).unwrap());
        assert!(t.ends_with("not significant at 95%"), "{t}");
        let one = summarize(&[9.0]).unwrap();
        assert_eq!(
            speedup(&sp(&a, &one, Direction::Lower).unwrap()),
            "1.111x n=1, no interval"
        );
        assert_eq!(mean_ci(&one), "9.000 (n=1, no interval)");
        assert!(!mean_ci(&one).contains("0.0%"));
        assert_eq!(
            mean_ci(&summarize(&[454.6, 454.6]).unwrap()),
            "454.6 +- 0.0 (0.00%)"
        );
    }

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            esc(r#"a<b>&"c'"#),
            "a&lt;b&gt;&amp;&quot;c&#39;".to_string()
        );
        assert_eq!(esc("x\u{1}y"), "x\u{fffd}y");
    }

    #[test]
    fn dates_and_sizes() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        // 2024-02-29 12:34:56 UTC, a leap day.
        assert_eq!(utc(1_709_210_096), "2024-02-29 12:34:56 UTC");
        assert_eq!(bytes(32 * 1024), "32 KiB");
        assert_eq!(bytes(1536 * 1024), "1.5 MiB");
        assert_eq!(bytes(100), "100 B");
    }

    #[test]
    fn text_table_aligns_columns() {
        let t = text_table(
            &["a", "num"],
            &[
                vec!["long name".into(), "1".into()],
                vec!["x".into(), "22".into()],
            ],
            &[1],
        );
        assert_eq!(t, "a          num\nlong name    1\nx           22\n");
    }
}
