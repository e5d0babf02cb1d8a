//! The ratios that explain what SMT does (paper 000 Figs 8-19, paper 004 Charts 2-7):
//! CPI and IPC, the L1I/L1D/LLC/iTLB/dTLB miss rates, the branch misprediction rate,
//! the cost per unit of work (instructions, cycles, CPU time, misses per operation,
//! byte or request), each named event per unit, top-down level 1 and DRAM bandwidth,
//! per cell, and how each moves from one placement to its SMT partner (`1c1t` to
//! `1c2t`, `2c1t` to `2c2t`, `cores` to `all`).
//!
//! Every figure comes from counts that were measured, by the model's pure functions;
//! a ratio whose events were not counted is left out, and the reasons are gathered
//! into one line per distinct cause (`CPI, IPC, ... not shown: cycles, instructions
//! not counted (not supported on this machine (ENOENT))`).

use serde::Serialize;
use smtlab_model::counters::bandwidth::{DramBandwidth, dram_bandwidth};
use smtlab_model::counters::cpi_stack::{CpiStack, Latencies, PART_KEYS, cpi_stack};
use smtlab_model::counters::derived::{MISS_PAIRS, ratio};
use smtlab_model::counters::smt_loss::{LossPart, SmtLoss};
use smtlab_model::counters::topdown::{Topdown, level1};
use smtlab_model::counters::{CellCounters, CountMode, CounterEvent, CounterValues};
use smtlab_model::{CellRecord, RunResults};

use crate::fmt::num;
use smtlab_model::verdict::PairKind;

/// How a ratio is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RatioKind {
    /// A plain number (`CPI 1.500`).
    Plain,
    /// A share, written as a percentage (`L1D miss rate 5.0%`).
    Share,
}

/// One ratio of one cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatioValue {
    /// Stable key for JSON and CSV (`cpi`, `l1d_miss_rate`, `instructions_per_unit`).
    pub key: String,
    /// For people (`CPI`, `L1D miss rate`, `instructions/op`).
    pub label: String,
    pub kind: RatioKind,
    pub value: f64,
}

impl RatioValue {
    pub fn text(&self) -> String {
        match self.kind {
            RatioKind::Plain => num(self.value),
            RatioKind::Share => format!("{:.1}%", 100.0 * self.value),
        }
    }
}

/// Everything derived for one cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellRatios {
    pub ratios: Vec<RatioValue>,
    /// One line per distinct reason some ratios are not shown.
    pub omitted: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topdown: Option<Topdown>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topdown_unavailable: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dram: Option<DramBandwidth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dram_unavailable: Option<String>,
    /// The CPI stack, where cycles, instructions and at least one part's event were
    /// counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpi_stack: Option<CpiStack>,
    /// Named events that were multiplexed, with `enabled / running`.
    pub multiplexed: Vec<(String, f64)>,
}

impl CellRatios {
    pub fn get(&self, key: &str) -> Option<&RatioValue> {
        self.ratios.iter().find(|r| r.key == key)
    }
}

/// The ratios of two generic events in report order (CPI, IPC, the five miss rates,
/// branch mispredictions): key, label, kind, (numerator, denominator).
const DEFS: [(&str, &str, RatioKind, (CounterEvent, CounterEvent)); 8] = {
    use CounterEvent as E;
    use RatioKind::{Plain, Share};
    const fn miss(i: usize) -> (CounterEvent, CounterEvent) {
        (MISS_PAIRS[i].misses, MISS_PAIRS[i].accesses)
    }
    [
        ("cpi", "CPI", Plain, (E::Cycles, E::Instructions)),
        ("ipc", "IPC", Plain, (E::Instructions, E::Cycles)),
        ("l1i_miss_rate", "L1I miss rate", Share, miss(1)),
        ("l1d_miss_rate", "L1D miss rate", Share, miss(0)),
        ("llc_miss_rate", "LLC miss rate", Share, miss(2)),
        ("itlb_miss_rate", "iTLB miss rate", Share, miss(4)),
        ("dtlb_miss_rate", "dTLB miss rate", Share, miss(3)),
        (
            "branch_miss_rate",
            "branch misprediction rate",
            Share,
            (E::BranchMisses, E::Branches),
        ),
    ]
};

/// Why `event` has no count: the kernel's reason for one of its modes, or "not counted".
/// Empty when the event was simply not asked for.
fn why_missing(v: &CounterValues, event: CounterEvent) -> String {
    [CountMode::All, CountMode::User, CountMode::Kernel]
        .into_iter()
        .find_map(|m| v.unavailable_reason(event, m))
        .map_or_else(String::new, str::to_string)
}

/// What is not shown so far, one entry per label: why, the label, the events not
/// counted ([`omitted_text`] makes one line per reason of them).
type OmittedLines = Vec<(String, String, Vec<CounterEvent>)>;

/// The ratios of one cell's counters, its CPI stack at `latencies`.
pub fn cell_ratios(c: &CellCounters, latencies: &Latencies) -> CellRatios {
    cell_ratios_with_peak(c, None, latencies)
}

/// The ratios of a recorded cell, DRAM bandwidth as a share of the peak it was measured
/// with (`--dram-peak`), the CPI stack at its run's latencies
/// ([`crate::cpi_latencies::measured`]).
pub fn record_ratios(c: &CellRecord, latencies: &Latencies) -> Option<CellRatios> {
    let k = c.counters.as_ref()?;
    Some(cell_ratios_with_peak(
        k,
        c.result.config.dram_peak_gb_per_s,
        latencies,
    ))
}

/// [`cell_ratios`] with the machine's peak DRAM bandwidth, when known.
pub fn cell_ratios_with_peak(
    c: &CellCounters,
    dram_peak_gb_per_s: Option<f64>,
    latencies: &Latencies,
) -> CellRatios {
    let v = &c.values;
    let mut ratios = Vec::new();
    let mut lines: OmittedLines = Vec::new();
    defined_ratios(v, &mut ratios, &mut lines);
    mode_and_level_ratios(v, &mut ratios);
    per_kilo_instruction(v, &mut ratios);
    if let Some(w) = c
        .work
        .as_ref()
        .filter(|w| w.amount.is_finite() && w.amount > 0.0)
    {
        per_unit_ratios(v, &w.unit, w.amount, &mut ratios, &mut lines);
    }
    let (topdown, topdown_unavailable) = match level1(v) {
        Ok(t) => (Some(t), None),
        // Only worth a line when top-down events were asked for; when the keyword
        // itself could not be resolved, its reason is the one to give.
        Err(e) if asked_for_topdown(v) => (None, Some(topdown_reason(v).unwrap_or(e.to_string()))),
        Err(_) => (None, None),
    };
    let (dram, dram_unavailable) = match dram_bandwidth(v, dram_peak_gb_per_s) {
        Ok(b) => (Some(b), None),
        Err(e) if asked_for_dram(v) => (None, Some(e.0)),
        Err(_) => (None, None),
    };
    CellRatios {
        ratios,
        omitted: omitted_text(lines),
        topdown,
        topdown_unavailable,
        dram,
        dram_unavailable,
        cpi_stack: cpi_stack(v, latencies),
        multiplexed: v
            .named_multiplexed()
            .into_iter()
            .map(|(n, f)| (n.to_string(), f))
            .collect(),
    }
}

/// A ratio shown as a plain number.
fn plain(key: String, label: String, value: f64) -> RatioValue {
    RatioValue {
        key,
        label,
        kind: RatioKind::Plain,
        value,
    }
}

/// The ratios of [`defs`], or an omitted line naming the missing counters.
fn defined_ratios(v: &CounterValues, ratios: &mut Vec<RatioValue>, lines: &mut OmittedLines) {
    let all = CountMode::All;
    for (key, label, kind, (num, den)) in DEFS {
        match ratio(v, num, den, all) {
            Some(value) => ratios.push(RatioValue {
                kind,
                ..plain(key.into(), label.into(), value)
            }),
            None => {
                let missing: Vec<CounterEvent> = [num, den]
                    .into_iter()
                    .filter(|e| v.count(*e, all).is_none())
                    .collect();
                let reason = match missing.first() {
                    Some(e) => why_missing(v, *e),
                    None => "a zero denominator".into(),
                };
                lines.push((reason, label.into(), missing));
            }
        }
    }
}

/// What the split counts show beside the totals (paper 003 Tables 2 and 5, paper 004
/// Charts 3-7): IPC in user and in kernel mode, misses per 1000 instructions at each
/// cache and TLB level and for branches, cycles per retired uop. Only where counted:
/// the events' absence is already said once for the totals.
fn mode_and_level_ratios(v: &CounterValues, ratios: &mut Vec<RatioValue>) {
    use CounterEvent as E;
    for (mode, key, label) in [
        (CountMode::User, "ipc_user", "IPC (user)"),
        (CountMode::Kernel, "ipc_kernel", "IPC (kernel)"),
    ] {
        if let Some(x) = ratio(v, E::Instructions, E::Cycles, mode) {
            ratios.push(plain(key.into(), label.into(), x));
        }
    }
    // SMT-aware: the share of the core's time both threads ran (Intel).
    let core_ref = v.named_value("core-ref-clocks").filter(|c| *c > 0.0);
    if let (Some(one), Some(core)) = (v.named_value("one-thread-active"), core_ref) {
        let share = plain(
            "smt_2t_share".into(),
            "time both SMT threads ran".into(),
            1.0 - one / core,
        );
        ratios.push(RatioValue {
            kind: RatioKind::Share,
            ..share
        });
    }
    let uops = v.named_value("uops-retired").filter(|u| *u > 0.0);
    if let (Some(c), Some(u)) = (v.count(E::Cycles, CountMode::All), uops) {
        ratios.push(plain(
            "cycles_per_uop".into(),
            "cycles per uop".into(),
            c / u,
        ));
    }
}

/// Misses per 1000 instructions at each cache and TLB level and for branches, then
/// the named events per 1000 instructions, where instructions were counted.
fn per_kilo_instruction(v: &CounterValues, ratios: &mut Vec<RatioValue>) {
    let Some(inst) = v
        .count(CounterEvent::Instructions, CountMode::All)
        .filter(|i| *i > 0.0)
    else {
        return;
    };
    let levels = MISS_PAIRS.iter().map(|p| (p.label, p.misses));
    for (label, misses) in levels.chain([("branch", CounterEvent::BranchMisses)]) {
        if let Some(m) = v.count(misses, CountMode::All) {
            ratios.push(plain(
                format!("{}_mpki", label.to_ascii_lowercase()),
                format!("{label} misses per 1000 instructions"),
                1000.0 * m / inst,
            ));
        }
    }
    for r in &v.named {
        if let Some(x) = r.value() {
            ratios.push(plain(
                format!("{}_pki", r.name),
                format!("{} per 1000 instructions", r.name),
                1000.0 * x / inst,
            ));
        }
    }
}

/// Cost per unit of work: `amount` units of `unit` were done.
fn per_unit_ratios(
    v: &CounterValues,
    unit: &str,
    amount: f64,
    ratios: &mut Vec<RatioValue>,
    lines: &mut OmittedLines,
) {
    for (key, label, e) in [
        (
            "instructions_per_unit",
            "instructions",
            CounterEvent::Instructions,
        ),
        ("cycles_per_unit", "cycles", CounterEvent::Cycles),
        ("cpu_ns_per_unit", "CPU ns", CounterEvent::TaskClock),
        (
            "llc_misses_per_unit",
            "LLC misses",
            CounterEvent::LlcReadMisses,
        ),
        (
            "branch_misses_per_unit",
            "branch misses",
            CounterEvent::BranchMisses,
        ),
    ] {
        let label = format!("{label}/{unit}");
        match v.count(e, CountMode::All) {
            Some(x) => ratios.push(plain(key.into(), label, x / amount)),
            None => lines.push((why_missing(v, e), label, vec![e])),
        }
    }
    for r in v.named.iter().filter(|r| !is_topdown(&r.name)) {
        if let Some(x) = r.value() {
            ratios.push(plain(
                format!("{}_per_unit", r.name),
                format!("{} per {unit}", r.name),
                x / amount,
            ));
        }
    }
}

/// One line per omitted reason: the labels not shown and the events not counted.
fn omitted_text(lines: OmittedLines) -> Vec<String> {
    crate::grouped(lines, |(reason, _, _)| reason.clone())
        .into_iter()
        .map(|(reason, of_reason)| {
            let labels: Vec<&str> = of_reason.iter().map(|(_, l, _)| l.as_str()).collect();
            let labels = labels.join(", ");
            let events = of_reason.iter().flat_map(|(_, _, e)| e);
            let names = crate::first_seen(events.map(|e| e.name()));
            match (names.join(", "), reason) {
                (names, reason) if names.is_empty() => format!("{labels} not shown: {reason}"),
                (names, reason) if reason.is_empty() => {
                    format!("{labels} not shown: {names} not counted")
                }
                (names, reason) => format!("{labels} not shown: {names} not counted ({reason})"),
            }
        })
        .collect()
}

/// Top-down inputs are shares of slots, shown as top-down, not per instruction or unit.
fn is_topdown(name: &str) -> bool {
    use smtlab_model::counters::topdown::{
        AMD_DISPATCH_SLOTS, INTEL_PERF_METRICS, INTEL_SLOT_FORMULA,
    };
    INTEL_PERF_METRICS
        .iter()
        .chain(&INTEL_SLOT_FORMULA)
        .chain(&AMD_DISPATCH_SLOTS)
        .any(|n| n.eq_ignore_ascii_case(name))
}

fn asked_for_topdown(v: &CounterValues) -> bool {
    v.named_unavailable.iter().any(|u| u.name == "topdown")
        || v.named
            .iter()
            .any(|r| r.name.contains("topdown") || r.name.contains("dispatch"))
}

/// Why `--events topdown` resolved to nothing on this machine, if it did.
fn topdown_reason(v: &CounterValues) -> Option<String> {
    v.named_unavailable
        .iter()
        .find(|u| u.name == "topdown")
        .map(|u| format!("top-down not computed: {}", u.reason))
}

fn asked_for_dram(v: &CounterValues) -> bool {
    v.named_unavailable
        .iter()
        .any(|u| u.name == "dram" || u.name.contains("cas_count") || u.name.contains("cas_cmd"))
}

/// The ratio text the terminal adds to a cell's counters line: what `line` does not
/// already show (it has CPI and IPC), and the omitted reasons unless the one note about
/// missing hardware counters already said it.
pub fn terminal_parts(c: &CellCounters, latencies: &Latencies) -> Vec<String> {
    let mut r = cell_ratios(c, latencies);
    let shown = [
        "cpi",
        "ipc",
        "llc_mpki",
        "branch_mpki",
        "cpu_ns_per_unit",
        "instructions_per_unit",
    ];
    r.ratios.retain(|x| !shown.contains(&x.key.as_str()));
    if c.hardware_unavailable.is_some() {
        // The note about missing hardware counters, and the one about each event that
        // could not be counted, already said why.
        r.omitted.clear();
        r.topdown_unavailable = None;
    }
    // Events that were never asked for need no excuse in the terminal.
    r.omitted.retain(|l| !l.ends_with(" not counted"));
    ratio_lines(&r)
}

/// The terminal text of a cell's ratios: `CPI 1.500, IPC 0.6667, L1D miss rate 5.0%,
/// ...; top-down (thread): retiring 40.0% ...; DRAM 2.40 GB/s`, then the omitted lines.
pub fn ratio_lines(r: &CellRatios) -> Vec<String> {
    let mut out = Vec::new();
    if !r.ratios.is_empty() {
        let parts: Vec<String> = r
            .ratios
            .iter()
            .map(|x| format!("{} {}", x.label, x.text()))
            .collect();
        out.push(format!("ratios: {}", parts.join(", ")));
    }
    if let Some(t) = &r.topdown {
        let parts: Vec<String> = t
            .categories()
            .iter()
            .map(|(n, x)| format!("{n} {:.1}%", 100.0 * x))
            .collect();
        let split = t
            .backend_memory
            .map(|m| {
                format!(
                    " (back-end memory {:.1}%, core {:.1}%)",
                    100.0 * m,
                    100.0 * (t.backend_bound - m).max(0.0)
                )
            })
            .unwrap_or_default();
        out.push(format!(
            "top-down level 1 ({}; {}): {}{split}",
            t.method.label(),
            t.scope,
            parts.join(", ")
        ));
    }
    if let Some(b) = &r.dram {
        out.push(format!(
            "DRAM {} GB/s (read {} GB, write {} GB over {} s){}",
            num(b.gb_per_s),
            num(b.read_bytes / 1e9),
            num(b.write_bytes / 1e9),
            num(b.window_s),
            b.share_of_peak
                .map(|s| format!(", {:.1}% of peak", 100.0 * s))
                .unwrap_or_default()
                + &b.bus_utilisation
                    .map(|u| format!(", data bus {:.1}% busy (measured)", 100.0 * u))
                    .unwrap_or_default()
        ));
    }
    if let Some(s) = &r.cpi_stack {
        out.push(cpi_stack_line(s));
    }
    if !r.multiplexed.is_empty() {
        let m: Vec<String> = r
            .multiplexed
            .iter()
            .map(|(n, f)| format!("{n} x{f:.2}"))
            .collect();
        out.push(format!(
            "multiplexed, scaled by enabled/running: {}",
            m.join(", ")
        ));
    }
    out.extend(r.omitted.iter().cloned());
    out.extend(r.topdown_unavailable.iter().cloned());
    out.extend(r.dram_unavailable.iter().cloned());
    out
}

/// The CPI stack in one line: `CPI stack 2.000 = L1D miss to L2 0.1200 (100 x 12
/// cycles, assumed) + ... + other/base 1.420`, and the parts not counted.
pub fn cpi_stack_line(s: &CpiStack) -> String {
    let parts: Vec<String> = s
        .parts
        .iter()
        .map(|p| {
            format!(
                "{} {} ({} x {} cycles, {})",
                p.label,
                num(p.cpi),
                num(p.count),
                num(p.penalty_cycles),
                p.source.label()
            )
        })
        .collect();
    let mut line = format!(
        "CPI stack {} = {} + other/base {}",
        num(s.measured_cpi),
        parts.join(" + "),
        num(s.other_cpi)
    );
    if !s.not_counted.is_empty() {
        line.push_str(&format!(
            " (other/base holds what was not counted: {})",
            s.not_counted.join(", ")
        ));
    }
    line
}

/// Every figure of one set of counts as CSV, one `key,label,value` row each: the
/// ratios, then the top-down shares (`topdown_retiring`, ...) and DRAM bandwidth.
pub fn import_csv(r: &CellRatios) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(["key", "label", "value"]);
    for x in &r.ratios {
        let _ = w.write_record([x.key.as_str(), x.label.as_str(), &x.value.to_string()]);
    }
    for (label, share) in r.topdown.iter().flat_map(|t| t.categories()) {
        // The keys of the run CSV's columns (`topdown_frontend_bound`).
        let key = format!("topdown_{}", label.replace('-', "").replace(' ', "_"));
        let key = key.to_ascii_lowercase();
        let _ = w.write_record([key.as_str(), label, &share.to_string()]);
    }
    if let Some((t, m)) = r
        .topdown
        .as_ref()
        .and_then(|t| Some((t, t.backend_memory?)))
    {
        let core = (t.backend_bound - m).max(0.0);
        let _ = w.write_record(["topdown_backend_memory", "back-end memory", &m.to_string()]);
        let _ = w.write_record(["topdown_backend_core", "back-end core", &core.to_string()]);
    }
    if let Some(b) = &r.dram {
        let _ = w.write_record(["dram_gb_per_s", "DRAM GB/s", &b.gb_per_s.to_string()]);
    }
    if let Some(s) = &r.cpi_stack {
        for p in &s.parts {
            let key = format!("cpi_stack_{}", p.key);
            let label = format!(
                "CPI stack: {} ({} cycles each, {})",
                p.label,
                p.penalty_cycles,
                p.source.label()
            );
            let _ = w.write_record([key.as_str(), &label, &p.cpi.to_string()]);
        }
        let _ = w.write_record([
            "cpi_stack_other",
            "CPI stack: other/base",
            &s.other_cpi.to_string(),
        ]);
    }
    w.into_inner().unwrap_or_default()
}

/// The 1c2t loss's attribution (`counters import --against`) in the terminal's words.
pub fn loss_lines(l: &SmtLoss) -> Vec<String> {
    let pt = |x: f64| format!("{:+.1} pt", 100.0 * x);
    let parts: Vec<String> = l
        .parts
        .iter()
        .map(|(p, x)| format!("{} {}", p.label(), pt(*x)))
        .collect();
    let mut out = vec![
        format!(
            "1c2t loss against 1c1t: IPC {:.3} alone, {:.3} with the sibling: {:.1}% lost",
            l.ipc_alone,
            l.ipc_smt,
            100.0 * l.measured_loss
        ),
        format!(
            "thread's share of the core's issue slots with the sibling: {:.1}% ({}; {})",
            100.0 * l.slot_share,
            l.method.label(),
            l.scope
        ),
        format!("loss by cause: {}", parts.join(", ")),
        format!(
            "the parts add to {:.1} pt of the {:.1} pt lost (residual {}: retiring's change \
             and slots no category holds; limit 2 pt)",
            100.0 * l.sum(),
            100.0 * l.measured_loss,
            pt(l.residual)
        ),
    ];
    if let Some(why) = &l.backend_not_split {
        out.push(format!("back-end not split: {why}"));
    }
    out
}

/// The attribution as `key,label,value` rows (no header: they follow the ratios').
pub fn loss_csv(l: &SmtLoss) -> Vec<u8> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    let mut row = |key: String, label: &str, value: f64| {
        let _ = w.write_record([key.as_str(), label, &value.to_string()]);
    };
    row("smt_loss".into(), "1c2t loss against 1c1t", l.measured_loss);
    row(
        "smt_slot_share".into(),
        "thread's share of the core's issue slots",
        l.slot_share,
    );
    for (p, x) in &l.parts {
        row(format!("smt_loss_{}", json_key(*p)), p.label(), *x);
    }
    row("smt_loss_residual".into(), "residual", l.residual);
    w.into_inner().unwrap_or_default()
}

fn json_key(p: LossPart) -> String {
    serde_json::to_value(p)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// One benchmark and parameter set: its placements' ratios and the SMT pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatioGroup {
    pub benchmark: String,
    pub params: std::collections::BTreeMap<String, String>,
    /// `(placement name, ratios)` in measurement order.
    pub placements: Vec<(String, CellRatios)>,
    /// How each ratio moved within each SMT pair measured ([`RatioGroup::changes`]).
    pub smt_changes: Vec<SmtChange>,
}

/// How a ratio moved from a placement to its SMT partner: `smt / base - 1`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SmtChange {
    pub base: String,
    pub smt: String,
    pub key: String,
    pub base_value: f64,
    pub smt_value: f64,
    pub change: f64,
}

impl RatioGroup {
    /// How the sibling moved each top-down category, one line per SMT pair measured
    /// among the placements `with` (`1c2t vs 1c1t: retiring -3.1 pt, ...`): the SMT
    /// placement's share minus the base's, in percentage points.
    pub fn topdown_moves(with: &[(&String, &CellRatios)]) -> Vec<String> {
        let mut lines = Vec::new();
        for kind in smtlab_model::verdict::PairKind::YIELDS {
            let (base, smt) = kind.placements();
            let find = |n: &str| {
                with.iter()
                    .find(|(p, _)| p.as_str() == n)
                    .and_then(|(_, r)| r.topdown.as_ref())
            };
            if let (Some(b), Some(s)) = (find(base), find(smt)) {
                let parts: Vec<String> = b
                    .categories()
                    .iter()
                    .zip(s.categories())
                    .map(|((name, x), (_, y))| format!("{name} {:+.1} pt", 100.0 * (y - x)))
                    .collect();
                lines.push(format!("{smt} vs {base}: {}", parts.join(", ")));
            }
        }
        lines
    }

    /// The changes of every ratio both placements of an SMT pair have.
    pub fn changes(&self) -> Vec<SmtChange> {
        let mut out = Vec::new();
        for kind in PairKind::YIELDS {
            let (base, smt) = kind.placements();
            let find = |n: &str| self.placements.iter().find(|(p, _)| p == n).map(|(_, r)| r);
            let (Some(b), Some(s)) = (find(base), find(smt)) else {
                continue;
            };
            for rb in &b.ratios {
                if let Some(rs) = s.get(&rb.key)
                    && rb.value != 0.0
                {
                    out.push(SmtChange {
                        base: base.into(),
                        smt: smt.into(),
                        key: rb.key.clone(),
                        base_value: rb.value,
                        smt_value: rs.value,
                        change: rs.value / rb.value - 1.0,
                    });
                }
            }
        }
        out
    }
}

/// The counted cells of a run grouped by benchmark and parameters.
pub fn groups(r: &RunResults) -> Vec<RatioGroup> {
    let latencies = crate::cpi_latencies::measured(r);
    let counted = r
        .cells
        .iter()
        .filter_map(|c| Some((c, record_ratios(c, &latencies)?)));
    // The conditions too (`smt=on`): each SMT state is a group of its own.
    let by = |(c, _): &(&CellRecord, CellRatios)| (c.benchmark.clone(), c.flat_params());
    let groups = crate::grouped(counted, by).into_iter();
    let group = |((benchmark, params), cells): (_, Vec<(&CellRecord, CellRatios)>)| {
        let mut g = RatioGroup {
            benchmark,
            params,
            placements: cells
                .into_iter()
                .map(|(c, x)| (c.placement.name.clone(), x))
                .collect(),
            smt_changes: Vec::new(),
        };
        g.smt_changes = g.changes();
        g
    };
    groups.map(group).collect()
}

/// The CSV columns this module adds, in order: the ratios, top-down, DRAM, the CPI
/// stack's parts (`cpi_stack_<part>`, [`PART_KEYS`]) and its residual, the omitted
/// reasons.
pub const CSV_RATIO_COLUMNS: [&str; 25] = [
    "cpi",
    "ipc",
    "l1i_miss_rate",
    "l1d_miss_rate",
    "llc_miss_rate",
    "itlb_miss_rate",
    "dtlb_miss_rate",
    "branch_miss_rate",
    "topdown_retiring",
    "topdown_bad_speculation",
    "topdown_frontend_bound",
    "topdown_backend_bound",
    "dram_gb_per_s",
    "dram_share_of_peak",
    "cpi_stack_l1d_miss",
    "cpi_stack_l1i_miss",
    "cpi_stack_l2_miss",
    "cpi_stack_llc_miss",
    "cpi_stack_dtlb_miss",
    "cpi_stack_itlb_miss",
    "cpi_stack_branch_mispredict",
    "cpi_stack_machine_clears",
    "cpi_stack_store_buffer",
    "cpi_stack_other",
    "ratios_omitted",
];

/// A cell's values for [`CSV_RATIO_COLUMNS`] (empty where not measured), the CPI stack
/// at its run's `latencies`.
pub fn csv_values(cell: Option<&CellRecord>, latencies: &Latencies) -> Vec<String> {
    let Some(r) = cell.and_then(|c| record_ratios(c, latencies)) else {
        return vec![String::new(); CSV_RATIO_COLUMNS.len()];
    };
    let s = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
    let mut out: Vec<String> = CSV_RATIO_COLUMNS[..8]
        .iter()
        .map(|k| s(r.get(k).map(|x| x.value)))
        .collect();
    let t = r.topdown.as_ref();
    out.push(s(t.map(|t| t.retiring)));
    out.push(s(t.map(|t| t.bad_speculation)));
    out.push(s(t.map(|t| t.frontend_bound)));
    out.push(s(t.map(|t| t.backend_bound)));
    out.push(s(r.dram.as_ref().map(|b| b.gb_per_s)));
    out.push(s(r.dram.as_ref().and_then(|b| b.share_of_peak)));
    let stack = r.cpi_stack.as_ref();
    for key in PART_KEYS {
        out.push(s(stack.and_then(|t| t.part(key)).map(|p| p.cpi)));
    }
    out.push(s(stack.map(|t| t.other_cpi)));
    out.push(r.omitted.join("; "));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use smtlab_model::counters::derived::Work;
    use smtlab_model::counters::{CounterTarget, Reading, UnavailableEvent};

    fn cell_ratios_t(c: &CellCounters) -> CellRatios {
        cell_ratios(c, &Latencies::assumed())
    }

    pub(crate) fn counted(counts: &[(CounterEvent, u64)], work: Option<f64>) -> CellCounters {
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: true,
        });
        for &(e, n) in counts {
            v.set(e, CountMode::All, Reading::exact(n));
        }
        CellCounters::new(
            "w",
            v,
            work.map(|amount| Work {
                amount,
                unit: "op".into(),
            }),
        )
    }

    /// 3000 cycles, 2000 instructions, misses over accesses of 1/20, 1/50, 1/4, 1/400,
    /// 1/1000, branches 8/400, over 100 operations.
    pub(crate) fn full(scale: u64) -> Vec<(CounterEvent, u64)> {
        use CounterEvent as E;
        vec![
            (E::Cycles, 3000 * scale),
            (E::Instructions, 2000),
            (E::L1dReads, 800),
            (E::L1dReadMisses, 40),
            (E::L1iReads, 500),
            (E::L1iReadMisses, 10),
            (E::LlcReads, 40),
            (E::LlcReadMisses, 10),
            (E::DtlbReads, 800),
            (E::DtlbReadMisses, 2),
            (E::ItlbReads, 1000),
            (E::ItlbReadMisses, 1),
            (E::Branches, 400),
            (E::BranchMisses, 8),
            (E::TaskClock, 5000),
        ]
    }

    #[test]
    fn every_ratio_by_hand() {
        let r = cell_ratios_t(&counted(&full(1), Some(100.0)));
        let v = |k: &str| r.get(k).unwrap_or_else(|| panic!("{k}")).value;
        assert_eq!(v("cpi"), 1.5);
        assert_eq!(v("ipc"), 2000.0 / 3000.0);
        assert_eq!(v("l1d_miss_rate"), 0.05);
        assert_eq!(v("l1i_miss_rate"), 0.02);
        assert_eq!(v("llc_miss_rate"), 0.25);
        assert_eq!(v("dtlb_miss_rate"), 0.0025);
        assert_eq!(v("itlb_miss_rate"), 0.001);
        assert_eq!(v("branch_miss_rate"), 0.02);
        assert_eq!(v("instructions_per_unit"), 20.0);
        assert_eq!(v("cycles_per_unit"), 30.0);
        assert_eq!(v("cpu_ns_per_unit"), 50.0);
        assert_eq!(v("llc_misses_per_unit"), 0.1);
        assert!(r.omitted.is_empty(), "{:?}", r.omitted);
        assert_eq!(r.get("l1d_miss_rate").unwrap().text(), "5.0%");
    }

    #[test]
    fn absent_events_leave_their_ratios_out_with_one_line_per_reason() {
        let mut c = counted(&[(CounterEvent::TaskClock, 1000)], Some(10.0));
        for e in [CounterEvent::Cycles, CounterEvent::Instructions] {
            c.values.unavailable.push(UnavailableEvent {
                event: e,
                mode: CountMode::User,
                reason: "not supported on this machine (ENOENT)".into(),
            });
        }
        let r = cell_ratios_t(&c);
        assert_eq!(
            r.ratios.iter().map(|x| x.key.as_str()).collect::<Vec<_>>(),
            ["cpu_ns_per_unit"]
        );
        assert_eq!(r.omitted.len(), 2, "{:?}", r.omitted);
        assert!(r.omitted[0].starts_with("CPI, IPC, instructions/op, cycles/op not shown: cycles, instructions not counted (not supported on this machine (ENOENT))"), "{}", r.omitted[0]);
        assert!(r.omitted[1].contains("L1I miss rate") && r.omitted[1].ends_with(" not counted"));
        let lines = ratio_lines(&r);
        assert_eq!(lines[0], "ratios: CPU ns/op 100.0");
    }

    #[test]
    fn smt_change_is_the_ratio_of_the_pair() {
        let g = RatioGroup {
            benchmark: "b".into(),
            params: Default::default(),
            placements: vec![
                ("1c1t".into(), cell_ratios_t(&counted(&full(1), None))),
                ("1c2t".into(), cell_ratios_t(&counted(&full(2), None))),
            ],
            smt_changes: Vec::new(),
        };
        let ch = g.changes();
        let cpi = ch.iter().find(|c| c.key == "cpi").unwrap();
        assert_eq!((cpi.base_value, cpi.smt_value), (1.5, 3.0));
        assert_eq!(cpi.change, 1.0);
        let ipc = ch.iter().find(|c| c.key == "ipc").unwrap();
        assert!((ipc.change + 0.5).abs() < 1e-12);
        let l1d = ch.iter().find(|c| c.key == "l1d_miss_rate").unwrap();
        assert_eq!(l1d.change, 0.0);
    }

    /// `--events topdown` on a machine without a core PMU: the line gives that reason,
    /// never "ask for --events topdown".
    #[test]
    fn topdown_asked_for_but_impossible_says_why() {
        let mut c = counted(&[(CounterEvent::TaskClock, 1000)], None);
        c.values
            .named_unavailable
            .push(smtlab_model::counters::NamedUnavailable {
                name: "topdown".into(),
                reason: "no core PMU".into(),
            });
        let r = cell_ratios_t(&c);
        assert_eq!(
            r.topdown_unavailable.as_deref(),
            Some("top-down not computed: no core PMU")
        );
    }

    /// IPC per privilege mode, misses per 1000 instructions per level, cycles per uop:
    /// each from its own counts, absent where they were not counted.
    #[test]
    fn mode_level_and_uop_ratios() {
        let mut c = counted(
            &[
                (CounterEvent::Cycles, 3000),
                (CounterEvent::Instructions, 2000),
                (CounterEvent::L1dReadMisses, 40),
            ],
            None,
        );
        let v = &mut c.values;
        v.set(CounterEvent::Cycles, CountMode::User, Reading::exact(1000));
        v.set(
            CounterEvent::Instructions,
            CountMode::User,
            Reading::exact(1500),
        );
        let r = cell_ratios_t(&c);
        assert_eq!(r.get("ipc_user").map(|x| x.value), Some(1.5));
        assert!(r.get("ipc_kernel").is_none(), "kernel mode was not counted");
        assert_eq!(r.get("l1d_mpki").map(|x| x.value), Some(20.0));
        assert!(r.get("llc_mpki").is_none());
        assert!(r.get("cycles_per_uop").is_none());
        c.values
            .named
            .push(smtlab_model::counters::NamedReading::counted(
                "uops-retired",
                2500,
            ));
        let r = cell_ratios_t(&c);
        assert_eq!(r.get("cycles_per_uop").map(|x| x.value), Some(1.2));
    }
}
