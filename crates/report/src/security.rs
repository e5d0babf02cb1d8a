//! The price of SMT safety per workload (`smtlab advise --security`): the workload's
//! throughput (and a server's p99, where its cells have one) under each security mode,
//! `smt-on` (no protection), `coresched` (its tasks in a core-scheduling cookie of their
//! own) and `smt-off`, each with its 95% interval; the forced-idle share core
//! scheduling cost; and which protection costs less here.
//!
//! The rule, so that an answer can be checked by hand: the cost of each protection is
//! its throughput against `smt-on`'s ([`model::verdict`](smtlab_model::verdict), turned
//! so that below 1 is slower); the choice is `coresched` against `smt-off` directly.
//! Core scheduling is chosen when that figure's whole interval is above 1, SMT off when
//! it is below; an interval that includes 1 chooses neither ("either"), and a mode not
//! measured leaves nothing to choose ("cannot tell"). Workloads measured at an offered
//! rate (a server's light load) are answered apart from their full load, by their p99
//! (the same rule on the p99's speed-up, lower better): at a rate every mode carries,
//! throughput cannot tell them apart.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smtlab_model::keys::SecurityMode;
use smtlab_model::metrics::coresched::FORCEIDLE_SHARE;
use smtlab_model::metrics::web::{LATENCY_P99_NS, RATE_PARAM};
use smtlab_model::verdict::verdict;
use smtlab_model::{CellRecord, SkippedCell, stats};

use crate::advice::{Figure, Lean, workload_name};
use crate::html_workloads::cells::metric_values;

/// The schema of `smtlab advise --security --json`.
pub const SECURITY_SCHEMA: &str = "smtlab.security/1";

/// One security mode's figures for one workload at one load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeRow {
    pub mode: String,
    /// The workload's mean in its unit, with its interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Figure>,
    /// A server's p99 latency in milliseconds, the mean of its samples'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<Figure>,
    /// The share of the placement's CPU time a sibling stood forced idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced_idle_share: Option<Figure>,
    /// Why the mode was not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// What the figures choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Choice {
    CoreScheduling,
    SmtOff,
    /// The two protections do not differ at 95%.
    Either,
    CannotTell,
}

/// One workload's answer at one load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecurityAdvice {
    pub workload: String,
    /// `full` (as fast as it goes), or `light (N/s offered)`.
    pub load: String,
    pub unit: String,
    /// In the order of [`SecurityMode::ALL`].
    pub modes: Vec<ModeRow>,
    /// `coresched` over `smt-on`: below 1, what core scheduling costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coresched_vs_on: Option<Figure>,
    /// `smt-off` over `smt-on`: below 1, what SMT off costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_vs_on: Option<Figure>,
    /// `coresched` over `smt-off`: above 1, core scheduling is the cheaper protection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coresched_vs_off: Option<Figure>,
    pub choice: Choice,
    /// The answer in one line.
    pub line: String,
}

/// A workload's name without its offered rate (a tenant pair's with its partner), and
/// the rate.
fn named(
    benchmark: &str,
    params: &BTreeMap<String, String>,
    partner: Option<&str>,
) -> (String, Option<String>) {
    let mut params = params.clone();
    let rate = params.remove(RATE_PARAM).filter(|r| r != "0");
    let mut name = workload_name(benchmark, &params);
    if let Some(p) = partner {
        name.push_str(&format!(" beside {p} (distrusting tenants)"));
    }
    (name, rate)
}

/// The answers for every workload and load among `cells` measured in security modes,
/// the modes in `skipped` with their reasons.
pub fn security(cells: &[CellRecord], skipped: &[SkippedCell]) -> Vec<SecurityAdvice> {
    let moded = cells
        .iter()
        .filter_map(|c| Some((c.conditions.security()?, c)));
    // Grouped by the workload and load a cell answers for. A mode measured twice for
    // one workload and load: its last cell counts.
    crate::grouped(moded, |(_, c)| {
        named(&c.benchmark, &c.params, c.conditions.partner.as_deref())
    })
    .into_iter()
    .map(|(w, slot)| answer(w, &slot.into_iter().collect(), skipped))
    .collect()
}

/// Why `mode` of workload `w` was skipped, from `skipped`.
fn skip_reason(
    w: &(String, Option<String>),
    mode: SecurityMode,
    skipped: &[SkippedCell],
) -> Option<String> {
    skipped.iter().find_map(|s| {
        let k = &s.key;
        let name = named(&k.benchmark, &k.params, k.conditions.partner.as_deref());
        (k.conditions.security() == Some(mode) && name == *w).then(|| s.reason.clone())
    })
}

fn answer(
    w: (String, Option<String>),
    slot: &BTreeMap<SecurityMode, &CellRecord>,
    skipped: &[SkippedCell],
) -> SecurityAdvice {
    let modes: Vec<ModeRow> = SecurityMode::ALL
        .iter()
        .map(|m| match slot.get(m) {
            Some(c) => row(*m, c),
            None => ModeRow {
                mode: m.name().into(),
                value: None,
                p99_ms: None,
                forced_idle_share: None,
                skipped: Some(
                    skip_reason(&w, *m, skipped).unwrap_or_else(|| "not measured".into()),
                ),
            },
        })
        .collect();
    // At an offered rate every mode serves the same load: its p99 tells them apart.
    let light = w.1.is_some();
    let ratio = |a: SecurityMode, b: SecurityMode| {
        let (a, b) = (slot.get(&a)?, slot.get(&b)?);
        match light {
            true => p99_ratio(a, b),
            false => verdict(a, b).map(|v| Figure::from_verdict(&v)),
        }
    };
    let coresched_vs_on = ratio(SecurityMode::SmtOn, SecurityMode::CoreSched);
    let off_vs_on = ratio(SecurityMode::SmtOn, SecurityMode::SmtOff);
    let coresched_vs_off = ratio(SecurityMode::SmtOff, SecurityMode::CoreSched);
    let choice = match coresched_vs_off.as_ref().map(|f| f.lean(1.0)) {
        Some(Lean::Above) => Choice::CoreScheduling,
        Some(Lean::Below) => Choice::SmtOff,
        Some(Lean::Neither) => Choice::Either,
        None => Choice::CannotTell,
    };
    let mut line = line(
        choice,
        coresched_vs_on.as_ref(),
        off_vs_on.as_ref(),
        coresched_vs_off.as_ref(),
    );
    if light {
        line.insert_str(0, "by p99 at this load: ");
    }
    let unit = slot
        .values()
        .next()
        .map(|c| c.unit.clone())
        .unwrap_or_default();
    let (workload, rate) = w;
    SecurityAdvice {
        workload,
        load: rate.map_or_else(|| "full".into(), |r| format!("light ({r}/s offered)")),
        unit,
        modes,
        coresched_vs_on,
        off_vs_on,
        coresched_vs_off,
        choice,
        line,
    }
}

/// A mode's row from its cell: the mean, the p99 and the forced-idle share, each the
/// mean of the samples' with its interval.
fn row(mode: SecurityMode, c: &CellRecord) -> ModeRow {
    let s = &c.result.summary;
    ModeRow {
        mode: mode.name().into(),
        value: (s.n > 0).then(|| Figure::of_mean(s, None)),
        p99_ms: metric_mean(c, LATENCY_P99_NS, 1e-6),
        forced_idle_share: metric_mean(c, FORCEIDLE_SHARE, 1.0),
        skipped: None,
    }
}

/// `b`'s p99 against `a`'s as a speed-up (above 1: `b` answers sooner), from the two
/// cells' samples' p99 with the one speed-up of [`stats::speedup`].
fn p99_ratio(a: &CellRecord, b: &CellRecord) -> Option<Figure> {
    let p99 = |c: &CellRecord| stats::summarize(&metric_values(c, LATENCY_P99_NS));
    let r = stats::speedup(&p99(a)?, &p99(b)?, smtlab_model::Direction::Lower)?;
    Some(Figure::from_ratio(&r))
}

/// The mean of a per-sample metric times `scale`, with its interval.
fn metric_mean(c: &CellRecord, name: &str, scale: f64) -> Option<Figure> {
    let xs: Vec<f64> = metric_values(c, name).iter().map(|v| v * scale).collect();
    let mean = stats::mean(&xs)?;
    let h = stats::ci95_half_width(&xs);
    Some(Figure::with_ci(
        mean,
        h.map(|h| mean - h),
        h.map(|h| mean + h),
    ))
}

/// What a protection costs against `smt-on`, as a share of its throughput, then the
/// figure as every gain is written: `core scheduling costs 12% (-12% [-15%, -9.0%])`;
/// nothing where it was faster or its interval holds no change; or that it was not
/// measured.
fn cost(what: &str, f: Option<&Figure>) -> String {
    let no_change = |f: &Figure| matches!((f.ci95_low, f.ci95_high), (Some(lo), Some(hi)) if lo <= 1.0 && hi >= 1.0);
    match f {
        // Faster than no protection (noise, or less contention), or not told apart from
        // it: no cost to speak of.
        Some(f) if f.value > 1.0 || no_change(f) => {
            format!("{what} costs nothing ({} against SMT on)", f.pct())
        }
        Some(f) => format!(
            "{what} costs {} ({})",
            crate::fmt::pct2(100.0 * (1.0 - f.value)),
            f.pct()
        ),
        None => format!("{what} was not measured"),
    }
}

fn line(
    choice: Choice,
    cs: Option<&Figure>,
    off: Option<&Figure>,
    cs_vs_off: Option<&Figure>,
) -> String {
    let costs = format!(
        "{} here, {}",
        cost("core scheduling", cs),
        cost("SMT off", off)
    );
    let between = cs_vs_off.map(|f| f.pct()).unwrap_or_default();
    match choice {
        Choice::CoreScheduling => {
            format!("{costs}: choose core scheduling ({between} over SMT off)")
        }
        Choice::SmtOff => {
            format!("{costs}: choose SMT off (core scheduling {between} against it)")
        }
        Choice::Either => format!(
            "{costs}: either; they do not differ at 95% (core scheduling {between} against SMT off)"
        ),
        Choice::CannotTell => format!("{costs}: cannot tell"),
    }
}

/// The answers as text: per workload and load, one line per mode, then the answer.
pub fn text(answers: &[SecurityAdvice]) -> Vec<String> {
    let mut out = Vec::new();
    for a in answers {
        out.push(format!("{} at {} load:", a.workload, a.load));
        for m in &a.modes {
            out.push(format!("  {:<10} {}", m.mode, mode_text(m, &a.unit)));
        }
        out.push(format!("  -> {}", a.line));
    }
    out
}

/// One mode's figures in words.
fn mode_text(m: &ModeRow, unit: &str) -> String {
    if let Some(why) = &m.skipped {
        return format!("not measured: {why}");
    }
    let mut parts = Vec::new();
    if let Some(v) = &m.value {
        parts.push(v.absolute(unit));
    }
    if let Some(p) = &m.p99_ms {
        parts.push(format!("p99 {}", p.absolute("ms")));
    }
    if let Some(f) = &m.forced_idle_share {
        parts.push(format!("forced idle {}", share(f)));
    }
    parts.join(", ")
}

/// A share with its interval in percent: `12% [10%, 14%]`.
fn share(f: &Figure) -> String {
    let p = |x: f64| crate::fmt::pct2(100.0 * x);
    match (f.ci95_low, f.ci95_high) {
        (Some(lo), Some(hi)) => format!("{} [{}, {}]", p(f.value), p(lo.max(0.0)), p(hi)),
        _ => p(f.value),
    }
}

/// The answers as a Markdown section (the report's and `--export-markdown`'s).
pub fn markdown(answers: &[SecurityAdvice]) -> String {
    let mut out = String::from("## The price of SMT safety\n\n");
    for a in answers {
        out.push_str(&format!("### {} at {} load\n\n", a.workload, a.load));
        out.push_str("| mode | figures |\n|---|---|\n");
        for m in &a.modes {
            out.push_str(&format!("| {} | {} |\n", m.mode, mode_text(m, &a.unit)));
        }
        out.push_str(&format!("\n**{}**\n\n", a.line));
    }
    out
}

/// The report's section (`id="security"`) of a run with security-mode cells (`advise
/// --security`): per workload and load, each mode's figures and the answer; `None` for
/// other runs, which need not say so.
pub fn section(r: &smtlab_model::RunResults) -> Option<maud::Markup> {
    let answers = security(&r.cells, &r.skipped);
    if answers.is_empty() {
        return None;
    }
    Some(maud::html! {
        section id="security" {
            h2 { "The price of SMT safety" }
            p {
                "Each workload with SMT on and nothing between the siblings (smt-on), with its \
                 tasks in a core-scheduling cookie of their own (coresched: a sibling with \
                 nothing of the same cookie to run stands forced idle), and with SMT off, each \
                 figure with its " (crate::glossary::link(crate::glossary::Term::Interval)) "; \
                 then which protection costs less here."
            }
            @for a in &answers {
                h3 { (a.workload) " at " (a.load) " load" }
                table {
                    tr { th { "mode" } th { "figures" } }
                    @for m in &a.modes {
                        tr { td { (m.mode) } td { (mode_text(m, &a.unit)) } }
                    }
                }
                p { strong { (a.line) } }
            }
        }
    })
}

#[cfg(test)]
mod tests;
