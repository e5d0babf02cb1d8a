//! The `counters` section of the HTML page: per cell the counted events and per-unit
//! costs, the `/proc/stat` time of the placement's CPUs as start-up vs steady state
//! (table and stacked bars), and kernel time by system call group where it was traced.
//! A run measured without `--counters` gets one line saying so.

use std::fmt::Write;

use smtlab_model::counters::CellCounters;
use smtlab_model::counters::os_time::{CpuTicks, PhaseTimes};
use smtlab_model::{CellRecord, RunResults};

use crate::counters::{Headline, count, duration_ns};
use crate::fmt::{esc, num, params};
use crate::svg::color;
use crate::units::Column;

fn label(c: &CellRecord) -> String {
    let p = params(&c.params);
    if p == "-" {
        format!("{} on {}", c.benchmark, c.placement.name)
    } else {
        format!("{} {p} on {}", c.benchmark, c.placement.name)
    }
}

fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "<span class=\"muted\">-</span>".to_string(), f)
}

/// The time categories drawn, in stack order (user first), with their colours.
const PARTS: [(&str, usize); 6] = [
    ("user", 0),
    ("system", 1),
    ("irq", 4),
    ("softirq", 3),
    ("steal", 6),
    ("idle", 7),
];

fn parts(t: &CpuTicks) -> [u64; 6] {
    [
        t.user + t.nice,
        t.system,
        t.irq,
        t.softirq,
        t.steal,
        t.idle + t.iowait,
    ]
}

/// A horizontal bar of the phase's ticks split by category.
fn stacked_bar(t: &CpuTicks) -> String {
    let (w, h) = (220.0, 14.0);
    let total = t.total();
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" class="strip">"#
    );
    if total > 0 {
        let mut x = 0.0;
        for ((name, col), ticks) in PARTS.iter().zip(parts(t)) {
            if ticks == 0 {
                continue;
            }
            let width = w * ticks as f64 / total as f64;
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="0" width="{width:.1}" height="{h}" fill="{}"><title>{name} {:.0}%</title></rect>"#,
                color(*col),
                100.0 * ticks as f64 / total as f64
            );
            x += width;
        }
    }
    s.push_str("</svg>");
    s
}

fn phase_row(p: &mut String, name: &str, ph: &PhaseTimes) {
    let t = &ph.all_cpus;
    let total = t.total();
    let _ = write!(
        p,
        "<tr><td>{name}</td><td class=\"num\">{}</td><td class=\"num\">{total}</td>",
        duration_ns(ph.duration_ns as f64)
    );
    for ticks in parts(t) {
        if total == 0 {
            p.push_str("<td class=\"num muted\">-</td>");
        } else {
            let _ = write!(
                p,
                "<td class=\"num\">{:.0}%</td>",
                100.0 * ticks as f64 / total as f64
            );
        }
    }
    let _ = write!(p, "<td>{}</td></tr>", stacked_bar(t));
}

fn os_time(p: &mut String, cells: &[(&CellRecord, &CellCounters)]) {
    p.push_str(
        "<h3>OS time of the placement's CPUs (the user/kernel/idle breakdown of Redstone et \
         al., ASPLOS 2000)</h3>",
    );
    let with: Vec<_> = cells.iter().filter(|(_, k)| k.os_time.is_some()).collect();
    if with.is_empty() {
        let why = cells
            .iter()
            .find_map(|(_, k)| k.os_time_unavailable.clone())
            .unwrap_or_else(|| "not sampled".into());
        let _ = write!(p, "<p>Not measured: {}.</p>", esc(&why));
        return;
    }
    p.push_str(
        "<p>Where the CPUs' time went, from <code>/proc/stat</code> (USER_HZ ticks summed \
         over the CPUs; few ticks mean coarse fractions). Start-up is preparing, \
         calibrating and warming up; steady state is the counted window. Colours: ",
    );
    for (i, (name, col)) in PARTS.iter().enumerate() {
        let _ = write!(
            p,
            "{}<span style=\"color:{}\">&#9632;</span> {name}",
            if i > 0 { ", " } else { "" },
            color(*col)
        );
    }
    p.push_str(
        ".</p><table><tr><th>cell</th><th>CPUs</th><th>phase</th><th>duration</th><th>ticks</th>",
    );
    for (name, _) in PARTS {
        let _ = write!(p, "<th>{name}</th>");
    }
    p.push_str("<th></th></tr>");
    for (c, k) in with {
        let (Some(series), Some(ph)) = (&k.os_time, k.os_phases()) else {
            continue;
        };
        // A cell shorter than one sampling interval has no interval of its own in one of
        // the phases: then only the whole cell is shown, not a mislabelled phase.
        let total = series.total();
        let phases: Vec<(&str, &PhaseTimes)> =
            if ph.startup.intervals > 0 && ph.steady.intervals > 0 {
                vec![("start-up", &ph.startup), ("steady state", &ph.steady)]
            } else {
                vec![("whole cell", &total)]
            };
        for (i, (name, t)) in phases.iter().enumerate() {
            if i == 0 {
                let _ = write!(
                    p,
                    "<tr><td rowspan=\"{n}\">{}</td><td rowspan=\"{n}\"><code>{}</code></td>",
                    esc(&label(c)),
                    esc(&series.cpus.to_list_string()),
                    n = phases.len()
                );
                let mut row = String::new();
                phase_row(&mut row, name, t);
                p.push_str(row.trim_start_matches("<tr>"));
            } else {
                phase_row(p, name, t);
            }
        }
    }
    p.push_str("</table>");
}

fn syscalls(p: &mut String, cells: &[(&CellRecord, &CellCounters)]) {
    p.push_str("<h3>Kernel time by system call (Redstone et al., ASPLOS 2000)</h3>");
    let traced: Vec<_> = cells.iter().filter(|(_, k)| k.syscalls.is_some()).collect();
    if traced.is_empty() {
        let why = cells
            .iter()
            .find_map(|(_, k)| k.syscalls_unavailable.clone())
            .unwrap_or_else(|| "not traced".into());
        let _ = write!(p, "<p>Not measured: {}.</p>", esc(&why));
        return;
    }
    p.push_str(
        "<p>Entry-to-exit time of the system calls by group (a blocking call counts its \
         wait), with the three costliest calls. Traced on one extra sample or run after \
         the counted window: tracing costs about half a microsecond per call, so it is \
         kept out of the measured samples.</p>\
         <table><tr><th>cell</th><th>traced over</th><th>group</th><th>calls</th><th>total</th><th>top calls</th></tr>",
    );
    for (c, k) in traced {
        let Some(s) = &k.syscalls else { continue };
        let groups = s.by_group();
        if groups.is_empty() {
            let _ = write!(
                p,
                "<tr><td>{}</td><td colspan=\"5\" class=\"muted\">no system call traced</td></tr>",
                esc(&label(c))
            );
            continue;
        }
        for g in groups {
            let top: Vec<String> = s
                .syscalls
                .iter()
                .filter(|x| x.group == g.group)
                .take(3)
                .map(|x| format!("{} {}", x.label(), duration_ns(x.total_ns as f64)))
                .collect();
            let _ = write!(
                p,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                esc(&label(c)),
                esc(k.syscalls_window.as_deref().unwrap_or("-")),
                g.group,
                g.calls,
                duration_ns(g.total_ns as f64),
                esc(&top.join(", "))
            );
        }
        if s.lost_records > 0 {
            let _ = write!(
                p,
                "<tr><td>{}</td><td colspan=\"5\" class=\"bad\">{} trace records lost: counts are lower bounds</td></tr>",
                esc(&label(c)),
                s.lost_records
            );
        }
    }
    p.push_str("</table>");
}

/// The section; `Err` with the reason (and nothing written) when no cell was counted.
pub fn section(p: &mut String, r: &RunResults) -> Result<(), String> {
    let cells: Vec<(&CellRecord, &CellCounters)> = r
        .cells
        .iter()
        .filter_map(|c| c.counters.as_ref().map(|k| (c, k)))
        .collect();
    if cells.is_empty() {
        return Err("not recorded (use --counters)".into());
    }
    p.push_str("<section id=\"counters\"><h2>Performance counters and OS time</h2>");
    let mut notes: Vec<&str> = Vec::new();
    for (_, k) in &cells {
        if let Some(h) = &k.hardware_unavailable
            && !notes.contains(&h.as_str())
        {
            notes.push(h);
        }
    }
    if !notes.is_empty() {
        p.push_str("<ul class=\"notes\">");
        for n in notes {
            let _ = write!(p, "<li>{}</li>", esc(n));
        }
        p.push_str("</ul>");
    }
    let windows: Vec<&str> = {
        let mut w: Vec<&str> = Vec::new();
        for (_, k) in &cells {
            if !w.contains(&k.window.as_str()) {
                w.push(&k.window);
            }
        }
        w
    };
    let _ = write!(
        p,
        "<p>perf_event counts of smtlab's process and every thread and child process it \
         started (inherited counters), over: {}. Scaled for multiplexing where the kernel \
         had to (marked). A dash is an event this machine did not count.</p>",
        esc(&windows.join("; "))
    );
    let hardware = cells.iter().any(|(_, k)| k.has_hardware());
    p.push_str(
        "<table><tr><th>benchmark</th><th>params</th><th>placement</th><th>work</th>\
         <th>task-clock</th><th>context switches</th><th>migrations</th><th>page faults</th>\
         <th>CPU time / unit</th><th>page faults / unit</th>",
    );
    if hardware {
        p.push_str(
            "<th>instructions / unit</th><th>CPI</th><th>IPC</th><th>LLC MPKI</th>\
             <th>branch MPKI</th>",
        );
    }
    p.push_str("</tr>");
    // One unit and one number of decimals down each time column.
    let heads: Vec<Headline> = cells.iter().map(|(_, k)| Headline::of(k)).collect();
    let clock_col = Column::for_values(
        "ns",
        &heads
            .iter()
            .filter_map(|h| h.task_clock_ns)
            .collect::<Vec<_>>(),
    );
    let cpu_col = Column::for_values(
        "ns",
        &heads
            .iter()
            .filter_map(|h| h.cpu_ns_per_unit)
            .collect::<Vec<_>>(),
    );
    for c in &r.cells {
        let _ = write!(
            p,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td>",
            esc(&c.benchmark),
            esc(&params(&c.params)),
            esc(&c.placement.name)
        );
        let Some(k) = &c.counters else {
            let _ = write!(
                p,
                "<td colspan=\"{}\" class=\"muted\">not recorded</td></tr>",
                if hardware { 12 } else { 7 }
            );
            continue;
        };
        let h = Headline::of(k);
        let unit = h.unit.clone().unwrap_or_else(|| "unit".into());
        let work = k.work.as_ref().map_or("-".to_string(), |w| {
            crate::units::scaled(&format!("{}s", w.unit), w.amount)
        });
        let mux = h.multiplexed_list().map_or(String::new(), |m| {
            format!(" <span class=\"sub\">(scaled: {})</span>", esc(&m))
        });
        let _ = write!(
            p,
            "<td class=\"num\">{}</td><td class=\"num\">{}{mux}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td>",
            esc(&work),
            opt(h.task_clock_ns, |x| clock_col.with_unit(x)),
            opt(h.context_switches, count),
            opt(h.migrations, count),
            opt(h.page_faults, count),
            opt(h.cpu_ns_per_unit, |x| format!(
                "{} / {}",
                cpu_col.with_unit(x),
                esc(&unit)
            )),
            opt(h.page_faults_per_unit, num),
        );
        if hardware {
            let _ = write!(
                p,
                "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td>",
                opt(h.instructions_per_unit, num),
                opt(h.cpi, num),
                opt(h.ipc, num),
                opt(h.llc_mpki, num),
                opt(h.branch_mpki, num),
            );
        }
        p.push_str("</tr>");
    }
    p.push_str("</table>");
    if hardware {
        cpi_stacks(p, &cells);
    }
    os_time(p, &cells);
    syscalls(p, &cells);
    p.push_str("</section>");
    Ok(())
}

/// Paper 000 Fig 19: event counts x assumed penalties, beside the measured CPI. Only the
/// cells with cycles and instructions; components whose event was not counted show a dash
/// and leave the sum and the remainder out rather than counting them as zero.
fn cpi_stacks(p: &mut String, cells: &[(&CellRecord, &CellCounters)]) {
    use smtlab_model::counters::CountMode;
    use smtlab_model::counters::derived::{CpiPenalties, cpi_stack};
    let penalties = CpiPenalties::default();
    let stacks: Vec<_> = cells
        .iter()
        .map(|(c, k)| (c, cpi_stack(&k.values, CountMode::All, &penalties)))
        .filter(|(_, s)| s.measured_cpi.is_some())
        .collect();
    if stacks.is_empty() {
        return;
    }
    p.push_str(
        "<h3>CPI stack (non-overlapped estimate), as in Ruan et al., SIGMETRICS 2005</h3><p>Each component is event count x an \
         assumed penalty in cycles / instructions; the remainder is base CPI plus what the \
         events do not explain (negative when the penalties overlap).</p>\
         <table><tr><th>benchmark</th><th>placement</th><th>measured CPI</th>",
    );
    for pen in &penalties.penalties {
        let _ = write!(
            p,
            "<th>{} ({} cycles)</th>",
            esc(&pen.label),
            num(pen.cycles)
        );
    }
    p.push_str("<th>estimated sum</th><th>remainder</th></tr>");
    for (c, s) in stacks {
        let _ = write!(
            p,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td>",
            esc(&c.benchmark),
            esc(&c.placement.name),
            opt(s.measured_cpi, num)
        );
        for comp in &s.components {
            let _ = write!(p, "<td class=\"num\">{}</td>", opt(comp.cpi, num));
        }
        let _ = write!(
            p,
            "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            opt(s.estimated_cpi, num),
            opt(s.other_cpi, num)
        );
    }
    p.push_str("</table>");
}
