//! Performance counters and OS time of cells measured with `--counters`: the one-line
//! summary the terminal shows under a cell, and the headline figures the HTML page and
//! the run comparison use.
//!
//! Every figure is an `Option` computed by the model's pure functions
//! (`smtlab_model::counters::derived`); a figure whose inputs were not counted is left
//! out of the text, never shown as zero. Software figures (task-clock, context
//! switches, migrations, page faults) exist wherever perf_event does; CPI, IPC and MPKI
//! only where the machine has a PMU.

use serde::Serialize;
use smtlab_model::counters::cpi_stack::Latencies;
use smtlab_model::counters::derived::{cpi, ipc, per_kilo_instruction};
use smtlab_model::counters::os_time::CpuTimeFractions;
use smtlab_model::counters::{CellCounters, CountMode, CounterEvent};
use smtlab_model::unit::plural;

use crate::fmt::num;

/// The figures a reader looks at first, each `None` where it was not measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    /// CPU time of the counted tasks over the window (task-clock).
    pub task_clock_ns: Option<f64>,
    pub context_switches: Option<f64>,
    pub migrations: Option<f64>,
    pub page_faults: Option<f64>,
    pub cpi: Option<f64>,
    pub ipc: Option<f64>,
    /// LLC load misses per 1000 instructions.
    pub llc_mpki: Option<f64>,
    pub branch_mpki: Option<f64>,
    /// The unit of work the per-unit figures divide by (`op`, `byte`, `run`).
    pub unit: Option<String>,
    pub cpu_ns_per_unit: Option<f64>,
    pub instructions_per_unit: Option<f64>,
    pub context_switches_per_unit: Option<f64>,
    pub page_faults_per_unit: Option<f64>,
    /// Events the kernel multiplexed, with their scale factor.
    pub multiplexed: Vec<(String, f64)>,
}

impl Headline {
    /// The multiplexed events with their scale factors (`instructions x1.5, ...`), or
    /// `None` when the kernel multiplexed none.
    pub fn multiplexed_list(&self) -> Option<String> {
        if self.multiplexed.is_empty() {
            return None;
        }
        let m: Vec<String> = self
            .multiplexed
            .iter()
            .map(|(e, f)| format!("{e} x{f:.1}"))
            .collect();
        Some(m.join(", "))
    }

    pub fn of(c: &CellCounters) -> Headline {
        let v = &c.values;
        let all = CountMode::All;
        let per = c.per_unit.as_ref();
        Headline {
            task_clock_ns: c.count(CounterEvent::TaskClock),
            context_switches: c.count(CounterEvent::ContextSwitches),
            migrations: c.count(CounterEvent::CpuMigrations),
            page_faults: c.count(CounterEvent::PageFaults),
            cpi: cpi(v, all),
            ipc: ipc(v, all),
            llc_mpki: per_kilo_instruction(v, CounterEvent::LlcReadMisses, all),
            branch_mpki: per_kilo_instruction(v, CounterEvent::BranchMisses, all),
            unit: c.work.as_ref().map(|w| w.unit.clone()),
            cpu_ns_per_unit: per.and_then(|p| p.cpu_ns_per_unit),
            instructions_per_unit: per.and_then(|p| p.instructions_per_unit),
            context_switches_per_unit: per.and_then(|p| p.context_switches_per_unit),
            page_faults_per_unit: per.and_then(|p| p.page_faults_per_unit),
            multiplexed: v
                .multiplexed()
                .into_iter()
                .map(|(e, f)| (e.name().to_string(), f))
                .collect(),
        }
    }
}

/// CPU time in the unit that reads best: `850 ns`, `12.35 us`, `12.35 ms`, `1.235 s`.
pub fn duration_ns(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{} s", num(ns / 1e9))
    } else if a >= 1e6 {
        format!("{} ms", num(ns / 1e6))
    } else if a >= 1e3 {
        format!("{} µs", num(ns / 1e3))
    } else {
        format!("{} ns", num(ns))
    }
}

/// An event count: whole numbers (a multiplexed count is an estimate; its fraction
/// means nothing).
pub fn count(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.0}")
    } else {
        "-".into()
    }
}

/// `user 52% system 45% irq 0% softirq 2% iowait 0% idle 1% steal 0%` (nice is added to
/// user; iowait is apart from idle).
pub fn fractions_text(f: &CpuTimeFractions) -> String {
    let p = |x: f64| format!("{:.0}%", 100.0 * x);
    format!(
        "user {} system {} irq {} softirq {} iowait {} idle {} steal {}",
        p(f.all_user()),
        p(f.system),
        p(f.irq),
        p(f.softirq),
        p(f.iowait),
        p(f.idle),
        p(f.steal)
    )
}

/// The `/proc/stat` split to show in one line: the steady state (the counted window)
/// when it holds ticks, else the whole cell (a cell shorter than one sampling
/// interval). Returns the label, the number of ticks (USER_HZ, summed over the CPUs:
/// few ticks mean coarse fractions) and the fractions.
pub fn os_summary(c: &CellCounters) -> Option<(&'static str, u64, CpuTimeFractions)> {
    let series = c.os_time.as_ref()?;
    if let Some(p) = c.os_phases()
        && p.steady.intervals > 0
        && let Some(f) = p.steady.fractions
    {
        return Some(("steady state", p.steady.all_cpus.total(), f));
    }
    let total = series.total();
    Some(("whole cell", total.all_cpus.total(), total.fractions?))
}

/// One line of what was counted for a cell, e.g. `task-clock 12.35 ms, 3 context
/// switches, 0 migrations, 21 page faults; 2023 ns CPU/op; CPUs 0: user 52% system
/// 45% ...`. Hardware figures (CPI, IPC, MPKI, instructions per unit) appear only when
/// they were counted; the reason they were not is said once elsewhere. The CPI stack
/// charges `latencies` (the run's measured ones, [`crate::cpi_latencies::measured`], or
/// the assumed ones while a run is being measured).
pub fn line(c: &CellCounters, latencies: &Latencies) -> String {
    let h = Headline::of(c);
    let mut parts: Vec<String> = Vec::new();
    if let Some(t) = h.task_clock_ns {
        parts.push(format!("task-clock {}", duration_ns(t)));
    }
    for (x, one, many) in [
        (h.context_switches, "context switch", "context switches"),
        (h.migrations, "migration", "migrations"),
        (h.page_faults, "page fault", "page faults"),
    ] {
        if let Some(x) = x {
            parts.push(format!(
                "{} {}",
                count(x),
                if x == 1.0 { one } else { many }
            ));
        }
    }
    let mut out = if parts.is_empty() {
        "no event counted".to_string()
    } else {
        parts.join(", ")
    };
    let unit = h.unit.as_deref().unwrap_or("unit");
    let per = [
        h.cpu_ns_per_unit
            .map(|x| format!("{} CPU/{unit}", duration_ns(x))),
        h.instructions_per_unit
            .map(|x| format!("{} instructions/{unit}", num(x))),
    ];
    add_parts(&mut out, "", per.into_iter().flatten().collect());
    let hw = [
        ("CPI", h.cpi),
        ("IPC", h.ipc),
        ("LLC MPKI", h.llc_mpki),
        ("branch MPKI", h.branch_mpki),
    ];
    let hw = hw
        .into_iter()
        .filter_map(|(name, x)| Some(format!("{name} {}", num(x?))));
    add_parts(&mut out, "", hw.collect());
    if let Some(m) = h.multiplexed_list() {
        out.push_str(&format!(" (multiplexed, scaled: {m})"));
    }
    for part in crate::counter_ratios::terminal_parts(c, latencies) {
        out.push_str(&format!("; {part}"));
    }
    if let Some((label, ticks, f)) = os_summary(c) {
        out.push_str(&format!(
            "; CPUs {} ({label}, {}): {}",
            c.os_time
                .as_ref()
                .map(|s| s.cpus.to_list_string())
                .unwrap_or_default(),
            plural(ticks as usize, "tick"),
            fractions_text(&f)
        ));
    }
    if let Some(s) = &c.syscalls {
        let groups = s.by_group().into_iter().filter(|g| g.wall_ns > 0).map(|g| {
            let wall = duration_ns(g.wall_ns as f64);
            match g.cpu_ns {
                Some(cpu) => format!("{} CPU {} (wall {wall})", g.group, duration_ns(cpu as f64)),
                None => format!("{} wall {wall}", g.group),
            }
        });
        add_parts(
            &mut out,
            "syscalls (traced extra sample): ",
            groups.collect(),
        );
    }
    if let Some(p) = &c.kernel_time {
        let parts = p.summary_parts(duration_ns);
        add_parts(&mut out, "kernel by cause (traced extra sample): ", parts);
    }
    if let Some(p) = &c.irqs {
        let kinds = p.by_kind().into_iter();
        let kinds = kinds.map(|(k, n, ns)| format!("{k} {} x{n}", duration_ns(ns as f64)));
        let head = format!(
            "interrupts on CPUs {} (traced extra sample): ",
            p.cpus.to_list_string()
        );
        add_parts(&mut out, &head, kinds.collect());
    }
    out
}

/// Adds `; HEAD PART, PART, ...` to a counters line, nothing without parts.
fn add_parts(out: &mut String, head: &str, parts: Vec<String>) {
    if !parts.is_empty() {
        out.push_str(&format!("; {head}{}", parts.join(", ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_model::counters::derived::Work;
    use smtlab_model::counters::{CounterTarget, CounterValues, Reading};

    fn values(counts: &[(CounterEvent, u64)]) -> CounterValues {
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: true,
        });
        for &(e, n) in counts {
            v.set(e, CountMode::All, Reading::exact(n));
        }
        v
    }

    #[test]
    fn software_only_lines_show_no_hardware_figure() {
        let c = CellCounters::new(
            "w",
            values(&[
                (CounterEvent::TaskClock, 12_345_678),
                (CounterEvent::ContextSwitches, 1),
                (CounterEvent::PageFaults, 21),
            ]),
            Some(Work {
                amount: 1000.0,
                unit: "op".into(),
            }),
        );
        let l = line(&c, &Latencies::assumed());
        assert_eq!(
            l,
            "task-clock 12.35 ms, 1 context switch, 21 page faults; 12.35 µs CPU/op"
        );
        assert!(!l.contains("CPI") && !l.contains("migration"), "{l}");
    }

    #[test]
    fn hardware_figures_appear_when_counted() {
        let c = CellCounters::new(
            "w",
            values(&[
                (CounterEvent::TaskClock, 1_000),
                (CounterEvent::Cycles, 3_000),
                (CounterEvent::Instructions, 2_000),
                (CounterEvent::LlcReadMisses, 4),
            ]),
            None,
        );
        let l = line(&c, &Latencies::assumed());
        assert!(l.contains("CPI 1.500, IPC 0.6667, LLC MPKI 2.000"), "{l}");
    }
}
