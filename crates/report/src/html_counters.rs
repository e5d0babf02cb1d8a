//! The `counters` section of the HTML page: per cell the counted events and per-unit
//! costs, the `/proc/stat` time of the placement's CPUs as start-up vs steady state
//! (table, stacked bars and the stacked time series of each cell), kernel time by
//! system call group (CPU and wall time) and interrupt time by vector where traced.
//! A run measured without `--counters` gets one line saying so.

use maud::{Markup, PreEscaped, html};
use smtlab_model::counters::CellCounters;
use smtlab_model::counters::os_time::{CpuTicks, OsTimeSeries, PhaseTimes};
use smtlab_model::{CellRecord, RunResults};

use crate::counters::{Headline, count, duration_ns};
use crate::fmt::{num, params};
use crate::html_parts::Absent;
use crate::svg::{color, f1, share_strip};
use crate::units::Column;

fn label(c: &CellRecord) -> String {
    let p = params(&c.flat_params());
    if p == "-" {
        format!("{} on {}", c.benchmark, c.placement.name)
    } else {
        format!("{} {p} on {}", c.benchmark, c.placement.name)
    }
}

/// The value, or a muted dash for an event this machine did not count.
fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> Markup {
    match x {
        Some(v) => html! { (f(v)) },
        None => html! { span class="muted" { "-" } },
    }
}

/// The time categories drawn, in stack order (user first), with their colours; iowait
/// apart from idle (a CPU waiting on I/O is idle, but it says why).
const PARTS: [(&str, usize); 7] = [
    ("user", 0),
    ("system", 1),
    ("irq", 4),
    ("softirq", 3),
    ("iowait", 5),
    ("steal", 6),
    ("idle", 7),
];

fn parts(t: &CpuTicks) -> [u64; 7] {
    [
        t.user + t.nice,
        t.system,
        t.irq,
        t.softirq,
        t.iowait,
        t.steal,
        t.idle,
    ]
}

/// Paper 003 Figs 1 and 5: the share of each category over the cell, one stacked
/// column per sampling interval, on the time the cell's sampler ran (intervals of
/// other cells' turns were never sampled, so they take no room). A dashed line marks
/// where the counted window (steady state) begins.
fn time_series_chart(series: &OsTimeSeries, steady_from_ns: Option<u64>) -> Markup {
    let (w, h, left, bottom) = (560.0, 120.0, 34.0, 14.0);
    let plot_w = w - left;
    let plot_h = h - bottom;
    let total_ns: u64 = series
        .intervals
        .iter()
        .map(|i| i.end_ns.saturating_sub(i.start_ns))
        .sum();
    let mut columns = Vec::new();
    let mut x_ns = 0u64;
    let mut steady_x = None;
    for iv in series.intervals.iter().filter(|_| total_ns > 0) {
        let len = iv.end_ns.saturating_sub(iv.start_ns);
        let x = left + plot_w * x_ns as f64 / total_ns as f64;
        let width = plot_w * len as f64 / total_ns as f64;
        if steady_x.is_none() && steady_from_ns.is_some_and(|st| iv.start_ns >= st) {
            steady_x = Some(x);
        }
        x_ns += len;
        let at = duration_ns(iv.start_ns as f64);
        columns.push(stack(
            &iv.all_cpus(),
            plot_h,
            |y, height, name, col, share| {
                html! {
                    rect x=(f1(x)) y=(f1(y)) width=(format!("{width:.2}")) height=(f1(height))
                        fill=(color(col)) {
                        title { (name) " " (format!("{share:.0}")) "% at " (at) }
                    }
                }
            },
        ));
    }
    let steady_x = steady_x.filter(|x| *x > left);
    html! {
        svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {w} {h}")) width=(w)
            height=(h) class="chart" {
            text x="0" y="10" font-size="10" { "100%" }
            text x="0" y=(plot_h) font-size="10" { "0%" }
            @if total_ns > 0 {
                @for c in &columns { (c) }
                @if let Some(x) = steady_x {
                    line x1=(f1(x)) y1="0" x2=(f1(x)) y2=(plot_h) stroke="#000"
                        stroke-dasharray="3,2" {}
                    text x=(f1(x + 2.0)) y=(h) font-size="10" { "steady state" }
                }
                text x=(left) y=(h) font-size="10" { "0" }
                text x=(f1(w)) y=(h) font-size="10" text-anchor="end" {
                    (duration_ns(total_ns as f64))
                }
            }
        }
    }
}

/// The categories of `t` (those with ticks) stacked from the bottom of a column
/// `plot_h` high, each drawn by `part(y, height, name, colour, share in percent)`.
fn stack(t: &CpuTicks, plot_h: f64, part: impl Fn(f64, f64, &str, usize, f64) -> Markup) -> Markup {
    let all = t.total();
    let mut y = plot_h;
    let mut drawn = Vec::new();
    for ((name, col), ticks) in PARTS.iter().zip(parts(t)) {
        if ticks == 0 || all == 0 {
            continue;
        }
        let height = plot_h * ticks as f64 / all as f64;
        y -= height;
        drawn.push(part(
            y,
            height,
            name,
            *col,
            100.0 * ticks as f64 / all as f64,
        ));
    }
    html! { @for d in &drawn { (d) } }
}

/// A horizontal bar of the phase's ticks split by category.
fn stacked_bar(t: &CpuTicks) -> Markup {
    let total = t.total();
    let parts: Vec<(String, usize, f64)> = (PARTS.iter().zip(parts(t)))
        .filter(|(_, ticks)| *ticks > 0 && total > 0)
        .map(|((name, col), ticks)| {
            let share = ticks as f64 / total as f64;
            (format!("{name} {:.0}%", 100.0 * share), *col, share)
        })
        .collect();
    share_strip(220.0, &parts)
}

/// The cells of one phase's row after the cell and CPU columns.
fn phase_cells(name: &str, ph: &PhaseTimes) -> Markup {
    let t = &ph.all_cpus;
    let total = t.total();
    html! {
        td { (name) }
        td class="num" { (duration_ns(ph.duration_ns as f64)) }
        td class="num" { (total) }
        @for ticks in parts(t) {
            @if total == 0 {
                td class="num muted" { "-" }
            } @else {
                td class="num" { (format!("{:.0}%", 100.0 * ticks as f64 / total as f64)) }
            }
        }
        td { (stacked_bar(t)) }
    }
}

/// A counted cell with one of its traced parts.
type With<'a, T> = Vec<(&'a CellRecord, &'a CellCounters, &'a T)>;

/// A traced part's heading `title`, then `body` of the cells that hold the part (the
/// first of `part`'s pair), or else why none does: the first reason a cell gives (the
/// second), else `none`.
fn traced<'a, T: 'a>(
    cells: &[(&'a CellRecord, &'a CellCounters)],
    title: &str,
    none: &str,
    part: impl Fn(&'a CellCounters) -> (&'a Option<T>, &'a Option<String>),
    body: impl FnOnce(With<'a, T>) -> Markup,
) -> Markup {
    let with: With<'a, T> = cells
        .iter()
        .filter_map(|&(c, k)| Some((c, k, part(k).0.as_ref()?)))
        .collect();
    if with.is_empty() {
        let why = cells.iter().find_map(|(_, k)| part(k).1.as_deref());
        return html! { h3 { (title) } p { "Not measured: " (why.unwrap_or(none)) "." } };
    }
    html! { h3 { (title) } (body(with)) }
}

/// The row that says a cell's trace lost records, where it did.
fn lost_row(c: &CellRecord, lost_records: u64) -> Markup {
    html! {
        @if lost_records > 0 {
            tr {
                td { (label(c)) }
                td colspan="6" class="bad" { (lost_records) " trace records lost: counts are lower bounds" }
            }
        }
    }
}

fn os_time<'a>(cells: &[(&'a CellRecord, &'a CellCounters)]) -> Markup {
    const TITLE: &str = "OS time of the placement's CPUs (the user/kernel/idle breakdown \
                         of Redstone et al., ASPLOS 2000)";
    let part = |k: &'a CellCounters| (&k.os_time, &k.os_time_unavailable);
    traced(cells, TITLE, "not sampled", part, |with| {
        html! {
            p {
                "Where the CPUs' time went, from " code { "/proc/stat" } " (USER_HZ ticks summed \
                 over the CPUs; few ticks mean coarse fractions). Start-up is preparing, \
                 calibrating and warming up; steady state is the counted window. Where cells \
                 took turns on the same CPUs, only this cell's own stretches were sampled. \
                 Below the table, each cell's time series: one column per sampling \
                 interval. Colours: "
                @for (i, (name, col)) in PARTS.iter().enumerate() {
                    @if i > 0 { ", " }
                    span style={ "color:" (color(*col)) } { (PreEscaped("&#9632;")) } " " (name)
                }
                "."
            }
            table {
                tr {
                    th { "cell" } th { "CPUs" } th { "phase" } th { "duration" } th { "ticks" }
                    @for (name, _) in PARTS { th { (name) } }
                    th {}
                }
                @for (c, k, series) in &with {
                    @if let Some(ph) = k.os_phases() {
                        // A cell shorter than one sampling interval has no interval of its own
                        // in one of the phases: then only the whole cell is shown, not a
                        // mislabelled phase.
                        @let total = series.total();
                        @let phases: Vec<(&str, &PhaseTimes)> =
                            if ph.startup.intervals > 0 && ph.steady.intervals > 0 {
                                vec![("start-up", &ph.startup), ("steady state", &ph.steady)]
                            } else {
                                vec![("whole cell", &total)]
                            };
                        @for (i, (name, t)) in phases.iter().enumerate() {
                            tr {
                                @if i == 0 {
                                    td rowspan=(phases.len()) { (label(c)) }
                                    td rowspan=(phases.len()) { code { (series.cpus.to_list_string()) } }
                                }
                                (phase_cells(name, t))
                            }
                        }
                    }
                }
            }
            @for (c, k, series) in &with {
                h4 { (label(c)) ", CPUs " code { (series.cpus.to_list_string()) } " over time" }
                (time_series_chart(series, k.steady_from_ns))
            }
        }
    })
}

fn syscalls<'a>(cells: &[(&'a CellRecord, &'a CellCounters)]) -> Markup {
    const TITLE: &str = "Kernel time by system call (Redstone et al., ASPLOS 2000)";
    let part = |k: &'a CellCounters| (&k.syscalls, &k.syscalls_unavailable);
    traced(cells, TITLE, "not traced", part, |traced| {
        html! {
            p {
                "Kernel time of the system calls by group, as CPU time (entry to exit less \
                 the time the thread was switched out inside the call) and as wall time \
                 (entry to exit: a blocking call counts its wait), with the three calls of \
                 most CPU time. Traced on one extra sample or run after the counted window: \
                 tracing costs about half a microsecond per call, so it is kept out of the \
                 measured samples."
            }
            table {
                tr {
                    th { "cell" } th { "traced over" } th { "group" } th { "calls" }
                    th { "CPU time" } th { "wall time" } th { "top calls (CPU / wall)" }
                }
                @for (c, k, s) in traced {
                    @let groups = s.by_group();
                    @if groups.is_empty() {
                        tr { td { (label(c)) } td colspan="6" class="muted" { "no system call traced" } }
                    } @else {
                        @for g in groups {
                            @let top: Vec<String> = s.syscalls.iter().filter(|x| x.group == g.group).take(3)
                                .map(|x| format!(
                                    "{} {} / {}",
                                    x.label(),
                                    x.cpu_ns.map_or("-".to_string(), |c| duration_ns(c as f64)),
                                    duration_ns(x.wall_ns as f64)
                                ))
                                .collect();
                            tr {
                                td { (label(c)) }
                                td { (k.syscalls_window.as_deref().unwrap_or("-")) }
                                td { (g.group) }
                                td class="num" { (g.calls) }
                                td class="num" { (opt(g.cpu_ns.map(|c| c as f64), duration_ns)) }
                                td class="num" { (duration_ns(g.wall_ns as f64)) }
                                td { (top.join(", ")) }
                            }
                        }
                        (lost_row(c, s.lost_records))
                    }
                }
            }
        }
    })
}

/// Kernel time by cause (page faults, contended kernel locks, TLB shootdowns received)
/// of the traced tasks over
/// the extra sample, CPU and wall time and the share of their CPU time; one line where
/// it was not traced.
fn kernel_time<'a>(cells: &[(&'a CellRecord, &'a CellCounters)]) -> Markup {
    use smtlab_model::counters::kernel_time::KernelCause;
    const TITLE: &str = "Kernel time by cause: page faults, lock waits and TLB shootdowns";
    let part = |k: &'a CellCounters| (&k.kernel_time, &k.kernel_time_unavailable);
    traced(cells, TITLE, "not traced", part, |traced| {
        html! {
            p {
                "Page faults from their entry tracepoint to the kernel's minor- or major-fault \
                 event, which it raises once the fault is resolved (the exception's own entry \
                 and return to user mode are left out); waits for contended kernel locks from \
                 lock:contention_begin to contention_end; TLB shootdowns received from the \
                 function-call interrupt's entry to its exit where the kernel flushed the TLB \
                 for another CPU inside it (tlb:tlb_flush, remote shootdown; the sender's wait \
                 has no end tracepoint and is not timed). CPU time is the wall time less the \
                 time switched out inside (a major fault's I/O, a sleeping mutex); the share is \
                 of the traced tasks' CPU time over the same extra sample. A lock waited for \
                 inside a fault counts in both, so shares do not add up."
            }
            table {
                tr {
                    th { "cell" } th { "cause" } th { "count" } th { "CPU time" }
                    th { "share of CPU time" } th { "wall time" } th { "mean wall" }
                }
                @for (c, _, p) in &traced {
                    @if p.causes.is_empty() {
                        tr { td { (label(c)) } td colspan="6" class="muted" { "no fault, lock wait or TLB shootdown traced" } }
                    }
                    @for s in &p.causes {
                        tr {
                            td { (label(c)) }
                            td { (s.cause) }
                            td class="num" { (s.completed) }
                            td class="num" { (opt(s.cpu_ns.map(|x| x as f64), duration_ns)) }
                            td class="num" {
                                (opt(s.cpu_ns.and_then(|x| p.share(x)), |f| format!("{:.2}%", 100.0 * f)))
                            }
                            td class="num" { (duration_ns(s.wall_ns as f64)) }
                            td class="num" { (opt(s.mean_wall_ns(), duration_ns)) }
                        }
                    }
                    @for u in &p.unavailable {
                        tr { td { (label(c)) } td colspan="6" class="muted" { "not traced: " (u) } }
                    }
                    (lost_row(c, p.lost_records))
                }
            }
            @if traced.iter().any(|(_, _, p)| p.find(KernelCause::LockWait).is_none() && p.unavailable.is_empty()) {
                p class="muted" { "A cell without a lock-wait row waited for no contended kernel lock." }
            }
        }
    })
}

/// Interrupt time by vector on the placement's CPUs, traced CPU-wide over the same
/// extra sample as the system calls; one line where it was not traced.
fn irqs<'a>(cells: &[(&'a CellRecord, &'a CellCounters)]) -> Markup {
    const TITLE: &str = "Interrupt time by vector (hard interrupts, system vectors, softirqs)";
    let part = |k: &'a CellCounters| (&k.irqs, &k.irqs_unavailable);
    traced(cells, TITLE, "not traced", part, |traced| {
        html! {
            p {
                "CPU time in each interrupt vector on the placement's CPUs (every task's, \
                 traced CPU-wide over the same extra sample as the system calls), exclusive \
                 of the interrupts nested inside it; the share is of the traced CPUs' time. \
                 The eight costliest vectors per cell."
            }
            table {
                tr {
                    th { "cell" } th { "CPUs" } th { "kind" } th { "vector" } th { "count" }
                    th { "CPU time" } th { "share" }
                }
                @for (c, _, p) in traced {
                    @if p.stats.is_empty() {
                        tr { td { (label(c)) } td colspan="6" class="muted" { "no interrupt traced" } }
                    }
                    @for s in p.stats.iter().take(8) {
                        tr {
                            td { (label(c)) }
                            td { code { (p.cpus.to_list_string()) } }
                            td { (s.kind) }
                            td { (s.label()) }
                            td class="num" { (s.count) }
                            td class="num" { (duration_ns(s.cpu_ns as f64)) }
                            td class="num" { (opt(p.share(s.cpu_ns), |x| format!("{:.2}%", 100.0 * x))) }
                        }
                    }
                    (lost_row(c, p.lost_records))
                }
            }
        }
    })
}

/// The section; `Err` with the reason (and nothing written) when no cell was counted.
pub(crate) fn section(r: &RunResults) -> Result<Markup, Absent> {
    let cells: Vec<(&CellRecord, &CellCounters)> = r
        .cells
        .iter()
        .filter_map(|c| c.counters.as_ref().map(|k| (c, k)))
        .collect();
    if cells.is_empty() {
        return Err(Absent("not recorded (use --counters)".into()));
    }
    // Each distinct note and counting window once, in order.
    let (mut notes, mut windows): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for (_, k) in &cells {
        for (list, item) in [
            (&mut notes, k.hardware_unavailable.as_deref()),
            (&mut windows, Some(&k.window)),
        ] {
            if let Some(item) = item.filter(|i| !list.contains(i)) {
                list.push(item);
            }
        }
    }
    let hardware = cells.iter().any(|(_, k)| k.has_hardware());
    // One unit and one number of decimals down each time column.
    let heads: Vec<Headline> = cells.iter().map(|(_, k)| Headline::of(k)).collect();
    let column = |f: fn(&Headline) -> Option<f64>| {
        Column::for_values("ns", &heads.iter().filter_map(f).collect::<Vec<_>>())
    };
    let (clock_col, cpu_col) = (column(|h| h.task_clock_ns), column(|h| h.cpu_ns_per_unit));
    Ok(html! {
        section id="counters" {
            h2 { "Performance counters and OS time" }
            @if !notes.is_empty() {
                ul class="notes" { @for n in notes { li { (n) } } }
            }
            p {
                "perf_event counts of smtlab's process and every thread and child process it \
                 started (inherited counters), over: " (windows.join("; ")) ". Scaled for \
                 multiplexing where the kernel had to (marked). A dash is an event this \
                 machine did not count."
            }
            table {
                tr {
                    th { "benchmark" } th { "params" } th { "placement" } th { "work" }
                    th { "task-clock" } th { "context switches" } th { "migrations" }
                    th { "page faults" } th { "CPU time / unit" } th { "page faults / unit" }
                    @if hardware {
                        th { "instructions / unit" } th { "CPI" } th { "IPC" } th { "LLC MPKI" }
                        th { "branch MPKI" }
                    }
                }
                @for c in &r.cells {
                    tr {
                        td { (c.benchmark) }
                        td { code { (params(&c.flat_params())) } }
                        td { (c.placement.name) }
                        @match &c.counters {
                            None => td colspan=(if hardware { 12 } else { 7 }) class="muted" {
                                "not recorded"
                            },
                            Some(k) => (counter_cells(k, hardware, &clock_col, &cpu_col)),
                        }
                    }
                }
            }
            (crate::html_counter_ratios::figures(r))
            @if hardware { (cpi_stacks(r, &cells)) }
            (os_time(&cells))
            (syscalls(&cells))
            (kernel_time(&cells))
            (irqs(&cells))
        }
    })
}

/// The counted columns of one cell's row.
fn counter_cells(k: &CellCounters, hardware: bool, clock_col: &Column, cpu_col: &Column) -> Markup {
    let h = Headline::of(k);
    let unit = h.unit.clone().unwrap_or_else(|| "unit".into());
    let work = k.work.as_ref().map_or("-".to_string(), |w| {
        crate::units::scaled(&format!("{}s", w.unit), w.amount)
    });
    html! {
        td class="num" { (work) }
        td class="num" {
            (opt(h.task_clock_ns, |x| clock_col.with_unit(x)))
            @if let Some(m) = h.multiplexed_list() {
                " " span class="sub" { "(scaled: " (m) ")" }
            }
        }
        td class="num" { (opt(h.context_switches, count)) }
        td class="num" { (opt(h.migrations, count)) }
        td class="num" { (opt(h.page_faults, count)) }
        td class="num" {
            (opt(h.cpu_ns_per_unit, |x| format!("{} / {}", cpu_col.with_unit(x), unit)))
        }
        td class="num" { (opt(h.page_faults_per_unit, num)) }
        @if hardware {
            td class="num" { (opt(h.instructions_per_unit, num)) }
            td class="num" { (opt(h.cpi, num)) }
            td class="num" { (opt(h.ipc, num)) }
            td class="num" { (opt(h.llc_mpki, num)) }
            td class="num" { (opt(h.branch_mpki, num)) }
        }
    }
}

/// Paper 000 Fig 19: each counted event x the cycles it costs / instructions, and the
/// residual, which add to the measured CPI ([`smtlab_model::counters::cpi_stack`]), at
/// the latencies the run measured where it has a `mem-latency` sweep
/// ([`crate::cpi_latencies`]).
fn cpi_stacks(r: &RunResults, cells: &[(&CellRecord, &CellCounters)]) -> Markup {
    use smtlab_model::counters::cpi_stack::{PART_KEYS, cpi_stack};
    let latencies = crate::cpi_latencies::measured(r);
    let stacks: Vec<_> = cells
        .iter()
        .filter_map(|(c, k)| Some((c, cpi_stack(&k.values, &latencies)?)))
        .collect();
    if stacks.is_empty() {
        return html! {};
    }
    // The columns of the parts some cell counted, with their labels.
    let columns: Vec<(&str, String)> = PART_KEYS
        .iter()
        .filter_map(|key| {
            let label = stacks.iter().find_map(|(_, s)| s.part(key))?.label.clone();
            Some((*key, label))
        })
        .collect();
    let levels = [
        ("L1", &latencies.l1),
        ("L2", &latencies.l2),
        ("LLC", &latencies.llc),
        ("DRAM", &latencies.dram),
    ];
    html! {
        h3 { "CPI stack (non-overlapped), as in Ruan et al., SIGMETRICS 2005" }
        p {
            "Each part is an event's count x the cycles one occurrence costs / instructions: \
             memory misses at the step from one level's latency to the next's, TLB misses at \
             a page walk, store-buffer stalls as counted cycles, mispredicts and machine \
             clears at top-down's bad-speculation cycles split by their counts where top-down \
             was counted. The parts and other/base add to the measured CPI; other/base is \
             the cycles of retiring instructions and every stall not counted, negative when \
             the out-of-order core overlapped the penalties. Each cell says each part's \
             cycles per event and where they came from."
        }
        ul class="notes" {
            @for (name, l) in levels {
                li {
                    (name) " " (num(l.cycles)) " cycles: "
                    @match &l.measured {
                        Some(m) => (m),
                        None => "assumed (the run has no mem-latency chase inside this level \
                                  on 1c1t, or no measured core clock)",
                    }
                }
            }
            li {
                "page walk " (num(latencies.page_walk_cycles)) " cycles, mispredict "
                (num(latencies.mispredict_cycles)) ", machine clear "
                (num(latencies.machine_clear_cycles)) ": assumed where top-down does not \
                 measure them"
            }
        }
        table {
            tr {
                th { "benchmark" } th { "placement" } th { "measured CPI" }
                @for (_, label) in &columns { th { (label) } }
                th { "other/base" }
            }
            @for (c, s) in &stacks {
                tr {
                    td { (c.benchmark) }
                    td { (c.placement.name) }
                    td class="num" { (num(s.measured_cpi)) }
                    @for (key, _) in &columns {
                        td class="num" {
                            @match s.part(key) {
                                Some(p) => {
                                    (num(p.cpi))
                                    " " span class="sub" {
                                        "(" (num(p.penalty_cycles)) " cycles, " (p.source.label()) ")"
                                    }
                                },
                                None => span class="muted" { "not counted" },
                            }
                        }
                    }
                    td class="num" { (num(s.other_cpi)) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use smtlab_model::counters::{
        CellCounters, CountMode, CounterEvent as E, CounterTarget, CounterValues, Reading,
    };

    /// A run with a chase sweep (L2 at 512 KiB: 4.5 ns, LLC at 16 MiB: 18 ns, at 2 GHz:
    /// 9 and 36 cycles) and one counted cell: its L2 misses are charged the measured
    /// step, 27 cycles (100 x 27 / 1000 instructions = 2.7), and the table says where
    /// each latency came from.
    #[test]
    fn cpi_stack_charges_the_runs_measured_latencies() {
        let mut r =
            crate::testutil::sweep_run(&[(16384.0, 1.2), (524_288.0, 4.5), (16_777_216.0, 18.0)]);
        r.run.environment.core_clock_ghz = Some(2.0);
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: true,
        });
        v.set(E::Cycles, CountMode::All, Reading::exact(5000));
        v.set(E::Instructions, CountMode::All, Reading::exact(1000));
        v.named.push(smtlab_model::counters::NamedReading::counted(
            "l2-misses",
            100,
        ));
        r.cells[0].counters = Some(CellCounters::new("w", v, None));
        let cells: Vec<_> = r
            .cells
            .iter()
            .filter_map(|c| Some((c, c.counters.as_ref()?)))
            .collect();
        let html = super::cpi_stacks(&r, &cells).into_string();
        assert!(
            html.contains("2.700 <span class=\"sub\">(27.00 cycles, measured latency)</span>"),
            "{html}"
        );
        assert!(
            html.contains("L2 9.000 cycles: mem-latency 512 KiB on 1c1t"),
            "{html}"
        );
        assert!(html.contains("DRAM 250.0 cycles: assumed"), "{html}");
        // 5 - 2.7 = 2.3 cycles per instruction left for other/base.
        assert!(html.contains("<td class=\"num\">2.300</td>"), "{html}");
    }
}
