//! The self-contained HTML page: one file with inline CSS and inline SVG, no scripts and
//! no external requests, so it can be mailed, archived, or opened offline.
//!
//! The markup is XHTML-compatible (every element closed, attributes quoted, only XML's
//! predefined entities), so a strict XML parser reads it; the tests rely on that. Every
//! string that comes from the results is escaped.
//!
//! Sections, each an element with a stable `id`: `machine`, `smt-yield`, `scaling`,
//! `latency`, `os-latency`, the workload sections of [`crate::html_workloads`],
//! `counters`, `cells`, `skipped`. A section without data says "not
//! measured in this run" instead of drawing empty axes.

use std::collections::BTreeMap;
use std::fmt::Write;

use smtlab_model::{CellRecord, Direction, RunResults, RunStatus, Topology};

use crate::compare::Statistic;
use crate::fmt::{bytes, cpus, esc, params, pct2, short, times, utc};
use crate::svg::{self, LineOptions, Point, Scale, Series};
use crate::table1::{TABLE1, row_of};
use crate::units::Column;
use crate::yields::{YieldKind, no_yields_reason, smt_yields};

const CSS: &str = "\
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1b1b1b;\
margin:0 auto;max-width:1320px;padding:0 24px 48px;background:#fff}\
h1{font-size:24px;margin:24px 0 2px}\
h2{font-size:19px;border-bottom:2px solid #0072b2;padding-bottom:4px;margin:40px 0 10px}\
h3{font-size:15px;margin:22px 0 6px}\
p{margin:6px 0;max-width:980px}\
nav{margin:10px 0 0;padding:8px 0;border-top:1px solid #ddd;border-bottom:1px solid #ddd}\
nav a{margin-right:16px;color:#0072b2;text-decoration:none}\
table{border-collapse:collapse;margin:0}\
.scroll{overflow-x:auto;max-width:100%;margin:8px 0 16px}\
th,td{border:1px solid #d5d5d5;padding:3px 8px;text-align:left;vertical-align:middle}\
th{background:#eef2f7;font-weight:600}\
table.kv th{background:#f6f6f6;font-weight:normal;color:#444;white-space:nowrap}\
td:first-child,td code,td.yield{white-space:nowrap}\
td.yield{font-variant-numeric:tabular-nums}\
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
td.bad{color:#b03000}\
tr.sep td{border:none;height:6px}\
.muted{color:#666}\
.sub{color:#666;font-size:12px}\
ul.notes{background:#fff8e5;border-left:4px solid #e69f00;padding:8px 8px 8px 28px;max-width:980px}\
.charts{display:flex;flex-wrap:wrap;gap:10px;align-items:flex-start}\
.charts>div,.charts>figure{min-width:0;max-width:100%}\
table.kv td code{white-space:pre-wrap;word-break:break-all}\
figure{margin:0;max-width:100%}\
.charts svg,figure svg{max-width:100%;height:auto}\
svg.topo{max-width:none;height:auto}\
details{margin:6px 0}\
summary{cursor:pointer;padding:3px 0}\
.caption{background:#eef6fb;border-left:4px solid #0072b2;padding:6px 10px;font-size:13px;max-width:980px}\
ul.verdict{font-size:15px}\
figcaption{color:#555;font-size:12px;max-width:760px}\
code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12.5px}\
svg.strip{vertical-align:middle;margin-left:6px}\
footer{margin-top:40px;color:#777;font-size:12px;max-width:980px}\
@media (max-width:760px){body{padding:0 10px 32px}h1{font-size:20px}\
nav a{display:inline-block;margin:2px 12px 2px 0}}\
@media print{nav,#absent{display:none}body{max-width:none;padding:0;font-size:11px}\
.scroll{overflow:visible}details::details-content{content-visibility:visible;display:contents}\
details:not([open])>*{display:block}summary{list-style:none;font-weight:600}\
figure,svg,tr,h3{break-inside:avoid}h2,h3{break-after:avoid}a{color:inherit;text-decoration:none}}";

/// A section writer: writes the section, or returns why there is nothing to show
/// (writing nothing); an empty reason leaves the section out without a word.
type SectionFn = fn(&mut String, &RunResults) -> Result<(), String>;

/// The sections in page order: id, navigation name, writer.
const SECTIONS: [(&str, &str, SectionFn); 18] = [
    // The verdict of `smtlab exec` is the answer the reader came for: it goes first.
    ("exec", "Verdict", exec_verdict),
    ("machine", "Machine", machine),
    ("smt-yield", "SMT yield", smt_yield),
    ("smt-states", "SMT off vs on", crate::smt_states::section),
    ("scaling", "Scaling", scaling),
    ("sweeps", "Working-set sweeps", sweeps),
    ("latency", "Latency distributions", latency),
    ("os-latency", "OS latencies", os_latency),
    (
        "workload-smt",
        "SMT gain per workload",
        crate::html_workloads::chart1,
    ),
    ("web", "Web servers", crate::html_workloads::web),
    (
        "workload-tables",
        "Speed-up tables",
        crate::html_workloads::tables,
    ),
    ("aim", "AIM9 rows", crate::html_workloads::aim),
    ("task-pool", "Task pool", crate::html_workloads::task_pool),
    ("oltp", "OLTP and SDET", crate::html_workloads::oltp),
    ("counters", "Counters", crate::html_counters::section),
    ("corun", "Co-running workloads", corun),
    ("cells", "All cells", cells),
    ("skipped", "Skipped", skipped),
];

/// Co-run matrices, single-thread penalties and the utilisation curve, for the runs of
/// `smtlab corun`, `penalty` and `util`.
fn corun(p: &mut String, r: &RunResults) -> Result<(), String> {
    let before = p.len();
    crate::corun::section(p, r);
    if p.len() == before {
        // Left out silently: most runs are not co-runs, and need not say so.
        return Err(String::new());
    }
    Ok(())
}

/// The whole page. Sections without data are left out and named in one line under the
/// header with the reason, so the page has no empty sections.
pub fn html(results: &RunResults) -> String {
    let mut p = String::with_capacity(64 * 1024);
    let env = &results.run.environment;
    let host = env.hostname.as_deref().unwrap_or("unknown host");
    let _ = write!(
        p,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\
         <title>smtlab report: {}</title><style>{CSS}</style></head><body>",
        esc(host)
    );
    let mut body = String::new();
    let mut shown: Vec<(&str, &str)> = Vec::new();
    let mut absent: Vec<String> = Vec::new();
    for (id, name, f) in &SECTIONS {
        let mut s = String::new();
        match f(&mut s, results) {
            Ok(()) => {
                body.push_str(&s);
                shown.push((id, name));
            }
            // A workload section of a run without such cells is left out silently:
            // naming six absent workload kinds would crowd the header of every run.
            Err(why) if why.is_empty() => {}
            Err(why) => absent.push(format!("{name}: {why}")),
        }
    }
    header(&mut p, results, &shown, &absent);
    p.push_str(&wrap_tables(&body));
    let _ = writeln!(
        p,
        "<footer>Generated by smtlab-report {} from <code>{}</code> results. Charts show \
         means with 95% confidence intervals (Student t) for higher-is-better benchmarks \
         and medians with the interquartile range for lower-is-better ones; each table \
         says what it shows. Nothing here is estimated or filled in: a value that was not \
         measured is marked so. Papers named: Ruan et al., SIGMETRICS 2005 (SMT and \
         network servers); Vianney 2003 (Hyper-Threading speeds Linux); van Tol 2011 (a \
         characterization of the SPARC T3-4); Redstone et al., ASPLOS 2000 (OS behaviour \
         on an SMT); Olszewski and Herescu (workloads with hardware multithreading).</footer>\
         </body></html>",
        esc(env!("CARGO_PKG_VERSION")),
        esc(&results.schema)
    );
    p
}

/// Every table in a box that scrolls sideways on its own, so a wide table never widens
/// the page (tables do not nest on this page).
pub(crate) fn wrap_tables(body: &str) -> String {
    body.replace("<table", "<div class=\"scroll\"><table")
        .replace("</table>", "</table></div>")
}

fn header(p: &mut String, r: &RunResults, shown: &[(&str, &str)], absent: &[String]) {
    let m = &r.run;
    let host = m.environment.hostname.as_deref().unwrap_or("unknown host");
    let status = match m.status {
        RunStatus::Running => "still running",
        RunStatus::Finished => "finished",
        RunStatus::Interrupted => "interrupted",
    };
    let _ = write!(
        p,
        "<header><h1>smtlab report: {}</h1><p class=\"muted\">run{} started {}, {status}; \
         {} cells measured, {} skipped{}</p><nav>",
        esc(host),
        if m.id > 0 {
            format!(" {}", m.id)
        } else {
            String::new()
        },
        esc(&utc(m.started_unix_s)),
        r.cells.len(),
        r.skipped.len(),
        m.suite
            .as_deref()
            .map(|s| format!("; suite {}", esc(s)))
            .unwrap_or_default()
    );
    for (id, name) in shown {
        let _ = write!(p, "<a href=\"#{id}\">{name}</a>");
    }
    p.push_str("</nav>");
    if !absent.is_empty() {
        let names: Vec<&str> = absent
            .iter()
            .map(|a| a.split_once(": ").map_or(a.as_str(), |(n, _)| n))
            .collect();
        let _ = write!(
            p,
            "<details id=\"absent\" class=\"muted\"><summary>Not in this run: {}</summary>\
             <ul>",
            esc(&names.join(", "))
        );
        for a in absent {
            let _ = write!(p, "<li>{}</li>", esc(a));
        }
        p.push_str("</ul></details>");
    }
    p.push_str("</header>");
}

/// `1 package x 4 cores x 2 threads = 8 CPUs`, with ranges where packages or cores differ.
pub fn shape(t: &Topology) -> String {
    let pk = t.packages.len();
    let per_pkg: Vec<usize> = t.packages.iter().map(|p| p.cores.len()).collect();
    let (cmin, cmax) = (
        per_pkg.iter().copied().min().unwrap_or(0),
        per_pkg.iter().copied().max().unwrap_or(0),
    );
    let range = |a: u32, b: u32| {
        if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        }
    };
    let mut s = format!(
        "{pk} package{} x {} cores x {} thread{} = {} CPUs",
        if pk == 1 { "" } else { "s" },
        range(cmin as u32, cmax as u32),
        range(t.smt.threads_per_core_min, t.smt.threads_per_core_max),
        if t.smt.threads_per_core_max == 1 {
            ""
        } else {
            "s"
        },
        t.cpus.len()
    );
    if !t.cores_without_package.is_empty() {
        let _ = write!(
            s,
            " (+{} cores in no package)",
            t.cores_without_package.len()
        );
    }
    s
}

/// Things a reader must know before trusting a number, in one line each.
pub fn notes(r: &RunResults) -> Vec<String> {
    let m = &r.run;
    let t = &m.topology;
    let mut out: Vec<String> = m.notes.clone();
    if !t.smt_visible() && !out.iter().any(|n| n.contains("no SMT")) {
        out.push(format!(
            "no SMT visible (smt/control: {}): 1c2t and 2c2t not measured, and all is the \
             same CPUs as cores",
            t.smt.control.as_deref().unwrap_or("absent")
        ));
    }
    if let Some(v) = m
        .environment
        .virtualization
        .as_ref()
        .or(t.virtualization.as_ref())
    {
        out.push(format!(
            "virtual machine ({v}): SMT siblings are as the guest sees them; the host may \
             schedule virtual CPUs elsewhere"
        ));
    }
    if m.config.quick {
        out.push("quick preset: few, short samples; confidence intervals are wide".into());
    }
    let unconverged = r.cells.iter().filter(|c| !c.result.met_target()).count();
    if unconverged > 0 {
        out.push(format!(
            "{unconverged} of {} cells did not reach the CI target ({}% of the mean)",
            r.cells.len(),
            short(m.config.ci_target_rel * 100.0)
        ));
    }
    let unsteady = r
        .cells
        .iter()
        .filter(|c| c.result.unsteady().is_some())
        .count();
    if unsteady > 0 {
        out.push(format!(
            "{unsteady} cells were unsteady: their level moved during the measurement by more \
             than their confidence interval explains, so a repetition may differ by that much"
        ));
    }
    let nonlinear = r
        .cells
        .iter()
        .filter(|c| c.result.calibration.linear == Some(false))
        .count();
    if nonlinear > 0 {
        out.push(format!(
            "{nonlinear} cells failed the calibration linearity check (time(2n) vs 2 time(n))"
        ));
    }
    let pending = pending_cells(r).len();
    if pending > 0 {
        out.push(format!(
            "run {}: {pending} planned cells not measured",
            match m.status {
                RunStatus::Running => "still running",
                _ => "interrupted",
            }
        ));
    }
    if !t.offline_cpus.is_empty() {
        out.push(format!("CPUs {} are offline", t.offline_cpus));
    }
    if let Some(a) = &t.allowed_cpus
        && a != &t.cpus
    {
        out.push(format!("this process could only use CPUs {a}"));
    }
    out
}

/// Planned cells that were neither measured nor skipped.
fn pending_cells(r: &RunResults) -> Vec<&smtlab_model::CellKey> {
    r.run
        .plan
        .iter()
        .filter(|k| {
            !r.cells.iter().any(|c| c.key() == **k) && !r.skipped.iter().any(|s| &s.key == *k)
        })
        .collect()
}

fn kv(p: &mut String, key: &str, value: Option<&str>) {
    let _ = write!(
        p,
        "<tr><th>{}</th><td>{}</td></tr>",
        esc(key),
        match value {
            Some(v) if !v.is_empty() => esc(v),
            _ => "<span class=\"muted\">unknown</span>".into(),
        }
    );
}

fn machine(p: &mut String, r: &RunResults) -> Result<(), String> {
    let m = &r.run;
    let e = &m.environment;
    let t = &m.topology;
    p.push_str("<section id=\"machine\"><h2>Machine</h2>");
    let notes = notes(r);
    if !notes.is_empty() {
        p.push_str("<ul class=\"notes\">");
        for n in &notes {
            let _ = write!(p, "<li>{}</li>", esc(n));
        }
        p.push_str("</ul>");
    }
    p.push_str("<div class=\"charts\"><div><h3>Environment</h3><table class=\"kv\">");
    kv(p, "host", e.hostname.as_deref());
    kv(p, "kernel", e.kernel.as_deref());
    kv(p, "CPU", e.cpu_model.as_deref().or(t.cpu_model.as_deref()));
    kv(p, "vendor", t.vendor.as_deref());
    kv(p, "microcode", e.microcode.as_deref());
    let smt = match (&e.smt_control, t.smt.active) {
        (Some(c), Some(a)) => Some(format!("{c} (active: {a})")),
        (Some(c), None) => Some(c.clone()),
        (None, _) => t.smt.control.clone(),
    };
    kv(p, "SMT control", smt.as_deref().or(Some("absent")));
    kv(p, "governor", e.governor.as_deref());
    kv(p, "boost / turbo", e.boost.as_deref());
    kv(p, "clocksource", e.clocksource.as_deref());
    kv(
        p,
        "perf_event_paranoid",
        e.perf_event_paranoid.map(|v| v.to_string()).as_deref(),
    );
    kv(
        p,
        "virtualisation",
        Some(
            e.virtualization
                .as_deref()
                .or(t.virtualization.as_deref())
                .unwrap_or("none detected"),
        ),
    );
    let version = match &e.git_commit {
        Some(g) => format!("{} ({g})", e.tool_version),
        None => e.tool_version.clone(),
    };
    kv(p, "tool version", Some(&version));
    let _ = write!(
        p,
        "<tr><th>command line</th><td><code>{}</code></td></tr>",
        esc(&smtlab_model::run::shell_join(&m.command_line))
    );
    kv(p, "started", Some(&utc(m.started_unix_s)));
    kv(p, "finished", m.finished_unix_s.map(utc).as_deref());
    let c = &m.config;
    kv(
        p,
        "sampling",
        Some(&format!(
            "{}-{} samples of ~{} ms, CI target {}% of the mean, warm-up {} ms, at most {} s \
             per cell{}{}",
            c.min_samples,
            c.max_samples,
            short(c.target_sample_ns as f64 / 1e6),
            short(c.ci_target_rel * 100.0),
            short(c.warmup_ns as f64 / 1e6),
            short(c.max_cell_ns as f64 / 1e9),
            match c.long_min_samples {
                0 => String::new(),
                n => format!(" (cells with long samples, such as workloads: at least {n})"),
            },
            if c.quick { " (quick preset)" } else { "" }
        )),
    );
    p.push_str("</table></div><div><h3>Topology</h3><table class=\"kv\">");
    kv(p, "shape", Some(&shape(t)));
    kv(p, "online CPUs", Some(&t.cpus.to_string()));
    if !t.offline_cpus.is_empty() {
        kv(p, "offline CPUs", Some(&t.offline_cpus.to_string()));
    }
    if let Some(a) = &t.allowed_cpus {
        kv(p, "allowed CPUs", Some(&a.to_string()));
    }
    let siblings: Vec<String> = t
        .cores()
        .filter(|c| c.cpus.len() > 1)
        .take(4)
        .map(|c| format!("{{{}}}", c.cpus))
        .collect();
    if !siblings.is_empty() {
        let more = t.cores().filter(|c| c.cpus.len() > 1).count() - siblings.len();
        let mut s = siblings.join(" ");
        if more > 0 {
            let _ = write!(s, " and {more} more");
        }
        kv(p, "SMT sibling sets", Some(&s));
    }
    for k in &t.core_kinds {
        kv(
            p,
            &format!("core kind {}", k.name),
            Some(&format!("CPUs {} (from {})", k.cpus, k.source)),
        );
    }
    for n in &t.numa_nodes {
        let mem = n.memory_bytes.map(|b| format!(", {}", bytes(b)));
        kv(
            p,
            &format!("NUMA node {}", n.id),
            Some(&format!("CPUs {}{}", n.cpus, mem.unwrap_or_default())),
        );
    }
    if t.numa_nodes.is_empty() {
        kv(p, "NUMA", Some("no nodes reported"));
    }
    p.push_str("</table>");
    caches(p, t);
    p.push_str("</div></div>");
    let _ = write!(
        p,
        "<details open=\"open\"><summary>Topology picture: packages, NUMA nodes, caches, \
         cores and their CPUs (SMT siblings shaded)</summary><div class=\"scroll\">{}</div>\
         </details></section>",
        crate::topo_svg::topology_svg(t)
    );
    Ok(())
}

fn caches(p: &mut String, t: &Topology) {
    if t.caches.is_empty() {
        p.push_str("<p class=\"muted\">no cache information in the topology</p>");
        return;
    }
    // One row per (level, type, size, sharing): instances of a cache look alike.
    let mut rows: BTreeMap<(u8, String, Option<u64>, usize), usize> = BTreeMap::new();
    for c in &t.caches {
        let ty = format!("{:?}", c.cache_type).to_lowercase();
        *rows
            .entry((c.level, ty, c.size_bytes, c.cpus.len()))
            .or_default() += 1;
    }
    p.push_str("<table><tr><th>cache</th><th>size</th><th>instances</th><th>shared by</th></tr>");
    for ((level, ty, size, sharing), count) in rows {
        let _ = write!(
            p,
            "<tr><td>L{level} {}</td><td class=\"num\">{}</td><td class=\"num\">{count}</td>\
             <td class=\"num\">{sharing} CPU{}</td></tr>",
            esc(&ty),
            size.map(bytes).unwrap_or_else(|| "unknown".into()),
            if sharing == 1 { "" } else { "s" }
        );
    }
    p.push_str("</table>");
}

/// The `exec` section: what the placements did for the user's own command
/// (`smtlab exec`), as the one verdict ([`smtlab_model::verdict`]) of each placement
/// over the first, with its Fieller 95% interval, in one sentence per placement: the
/// same figure and sign as the terminal's.
fn exec_verdict(p: &mut String, r: &RunResults) -> Result<(), String> {
    let cells: Vec<&CellRecord> = r.cells.iter().filter(|c| c.benchmark == "exec").collect();
    if cells.is_empty() {
        return Err("no smtlab exec command".into());
    }
    p.push_str("<section id=\"exec\"><h2>Verdict</h2>");
    let mut order: Vec<&BTreeMap<String, String>> = Vec::new();
    for c in &cells {
        if !order.contains(&&c.params) {
            order.push(&c.params);
        }
    }
    for ps in order {
        let group: Vec<&&CellRecord> = cells.iter().filter(|c| &c.params == ps).collect();
        let base = group[0];
        let col = Column::for_values(
            &base.unit,
            &group.iter().map(|c| headline(c).0).collect::<Vec<_>>(),
        );
        let _ = write!(
            p,
            "<p><code>{}</code>: values in {}, {} is better; {} runs per placement.</p><ul class=\"verdict\">",
            esc(&params(ps)),
            esc(&col.unit),
            base.direction.as_str(),
            base.result.summary.n
        );
        for c in group.iter().skip(1) {
            // The one verdict (smtlab_model::verdict): the ratio of the means in the
            // cells' own unit (mean times for a command), as the terminal prints it.
            let Some(v) = smtlab_model::verdict::verdict(base, c) else {
                continue;
            };
            let q = v.speedup;
            let what = match (base.placement.name.as_str(), c.placement.name.as_str()) {
                ("1c1t", "1c2t") => "SMT (a second thread on the same core) gives".to_string(),
                ("1c1t", "2c1t") => "a second core gives".to_string(),
                (b, o) => format!("{o} against {b} gives"),
            };
            let sig = match (q.ci95_low, q.ci95_high, &v.unsteady) {
                (Some(lo), Some(hi), Some(why)) => format!(
                    " (95% interval {} to {}x: unsteady, {why})",
                    times(lo),
                    times(hi)
                ),
                (Some(lo), Some(hi), None) if lo > 1.0 || hi < 1.0 => {
                    format!(" (95% interval {} to {}x)", times(lo), times(hi))
                }
                (Some(lo), Some(hi), None) => format!(
                    " (95% interval {} to {}x: not significant at 95%)",
                    times(lo),
                    times(hi)
                ),
                (_, _, Some(why)) => format!(" (no interval: too few runs; unsteady, {why})"),
                _ => " (no interval: too few runs)".into(),
            };
            let _ = write!(
                p,
                "<li><b>{} {}</b>: {}x{} for this command on this machine; {} {} vs {} {}.</li>",
                esc(&what),
                esc(&crate::fmt::pct(q.ratio)),
                times(q.ratio),
                esc(&sig),
                esc(&c.placement.name),
                esc(&col.with_unit(headline(c).0)),
                esc(&base.placement.name),
                esc(&col.with_unit(headline(base).0))
            );
        }
        p.push_str("</ul>");
        if group.len() < 2 {
            p.push_str("<p>Only one placement measured: nothing to compare it with.</p>");
        }
    }
    if !r.run.topology.smt_visible() {
        p.push_str(
            "<p class=\"sub\">No SMT visible on this machine, so no SMT verdict: the \
             comparison is of cores.</p>",
        );
    }
    p.push_str("</section>");
    Ok(())
}

fn ratio_cell(y: &crate::Yield, range: (f64, f64)) -> String {
    if y.idle_sibling {
        return format!(
            "<td class=\"muted\" title=\"{}\">{}</td>",
            esc(crate::yields::IDLE_SIBLING_LEGEND),
            crate::yields::IDLE_SIBLING_SHORT
        );
    }
    let r = &y.ratio;
    // The interval and the verdict's words as every other output prints them.
    let words = match &y.unsteady {
        Some(why) => format!("unsteady ({why})"),
        None => y.significance.words().to_string(),
    };
    let ci = match (r.ci95_low, r.ci95_high) {
        (Some(lo), Some(hi)) => format!("[{}, {}] {words}", times(lo), times(hi)),
        _ => words,
    };
    format!(
        "<td class=\"yield\">{}x{}<br/><span class=\"sub\">{ci}</span></td>",
        times(r.ratio),
        svg::ci_strip(r.ratio, r.ci95_low, r.ci95_high, range)
    )
}

fn smt_yield(p: &mut String, r: &RunResults) -> Result<(), String> {
    let rows = smt_yields(r);
    if rows.is_empty() {
        return Err(format!(
            "no SMT yield: {}",
            no_yields_reason(r).unwrap_or_default()
        ));
    }
    p.push_str("<section id=\"smt-yield\"><h2>SMT yield</h2>");
    p.push_str(
        "<p>Each yield is the ratio of the means of two placements of the same benchmark \
         and parameters, with Fieller's 95% confidence interval. Above 1 is better with \
         SMT. For lower-is-better benchmarks (marked <b>lower</b>) the ratio is inverted, \
         value(base) / value(SMT), so above 1 still means faster with SMT. The strip shows \
         the interval against 1: green when entirely above, red when entirely below. \
         <b>unsteady</b>: a cell's samples or rounds disagree beyond their interval, so the \
         ratio is called neither faster nor slower. <b>single-threaded</b>: the benchmark \
         ran one thread per core whatever the placement, so 1c2t is 1c1t with an idle \
         sibling and there is no yield.</p>",
    );
    // One scale for every strip, so that they can be compared down a column.
    let bounds: Vec<f64> = rows
        .iter()
        .flat_map(|row| YieldKind::ALL.iter().filter_map(|k| row.get(*k)))
        .filter(|y| !y.idle_sibling)
        .flat_map(|y| [Some(y.ratio.ratio), y.ratio.ci95_low, y.ratio.ci95_high])
        .flatten()
        .chain([1.0])
        .collect();
    // The strips are logarithmic: pad by a ratio, and never reach zero.
    let (lo, hi) = svg::extent(bounds.into_iter().filter(|v| *v > 0.0)).unwrap_or((0.5, 2.0));
    let pad = (hi / lo).max(1.1).powf(0.05);
    let range = (lo / pad, hi * pad);
    p.push_str("<table><tr><th>benchmark</th><th>params</th><th>unit</th><th>better</th>");
    for k in YieldKind::ALL {
        let _ = write!(
            p,
            "<th>{}<br/><span class=\"sub\">{}</span></th>",
            esc(k.name()),
            esc(&k.heading())
        );
    }
    p.push_str("</tr>");
    for row in &rows {
        let _ = write!(
            p,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td>",
            esc(&row.benchmark),
            esc(&params(&row.params)),
            esc(&row.unit),
            match row.direction {
                Direction::Higher => "higher",
                Direction::Lower => "<b>lower</b>",
            }
        );
        for k in YieldKind::ALL {
            match row.get(k) {
                Some(y) => p.push_str(&ratio_cell(y, range)),
                None => p.push_str("<td class=\"muted\">not measured</td>"),
            }
        }
        p.push_str("</tr>");
    }
    p.push_str("</table></section>");
    Ok(())
}

/// The value a cell is drawn and tabulated by, with its error bar: the mean and its 95%
/// CI for higher-is-better cells, the median and p25..p75 for lower-is-better ones.
fn headline(c: &CellRecord) -> (f64, f64, f64) {
    let s = &c.result.summary;
    match Statistic::for_direction(c.direction) {
        Statistic::Mean => (
            s.mean,
            s.mean - s.ci95_half_width,
            s.mean + s.ci95_half_width,
        ),
        Statistic::Median => (s.median, s.p25, s.p75),
    }
}

/// The number of worker threads of a compute or memory cell: the `threads` parameter, or
/// the placement's width when it is `auto` (or absent). `None` for unpinned `auto`.
fn thread_count(c: &CellRecord) -> Option<f64> {
    match c.params.get("threads").map(String::as_str) {
        Some(t) if t != "auto" => t.parse::<u32>().ok().map(f64::from),
        _ => (c.placement.width() > 0).then(|| c.placement.width() as f64),
    }
}

/// Which line a cell belongs to. With an explicit thread count the placement is the
/// mapping strategy (paper 002 Figs 1-2); with `threads=auto` every placement is one
/// point, and points are joined by threads per core so that the SMT and non-SMT
/// curves stand side by side.
fn series_label(c: &CellRecord) -> String {
    let explicit = matches!(c.params.get("threads"), Some(t) if t != "auto");
    if explicit || !is_grid_like(c) {
        return c.placement.name.clone();
    }
    let tpc = c.placement.threads_per_core;
    let mut s = format!("{tpc} thread{}/core", if tpc == 1 { "" } else { "s" });
    if c.placement.packages > 1 || c.placement.core_order != Default::default() {
        let _ = write!(s, ", {}", c.placement.core_order);
    }
    if c.placement.cpu_order != Default::default() {
        let _ = write!(s, ", {}", c.placement.cpu_order);
    }
    s
}

/// Placements whose CPUs form whole cores: `NcMt`, `cores`, `all`. Explicit CPU lists
/// keep their own name as a series.
fn is_grid_like(c: &CellRecord) -> bool {
    let n = &c.placement.name;
    n == "all" || n == "cores" || n.split('/').next().is_some_and(is_grid_name)
}

fn is_grid_name(s: &str) -> bool {
    let Some((cores, rest)) = s.split_once('c') else {
        return false;
    };
    let Some(threads) = rest.strip_suffix('t') else {
        return false;
    };
    cores.parse::<u32>().is_ok() && threads.parse::<u32>().is_ok()
}

fn scaling(p: &mut String, r: &RunResults) -> Result<(), String> {
    let sweeps = crate::html_figures::sweep_groups(r);
    let swept: Vec<&CellRecord> = sweeps
        .iter()
        .flat_map(|(_, cs)| cs.iter().copied())
        .collect();
    let cells: Vec<&CellRecord> = r
        .cells
        .iter()
        .filter(|c| c.group == "compute" || c.group == "memory")
        .filter(|c| !swept.iter().any(|x| std::ptr::eq(*x, *c)))
        .collect();
    if cells.is_empty() {
        return Err("no compute or memory benchmark over thread counts".into());
    }
    p.push_str("<section id=\"scaling\"><h2>Scaling with threads</h2>");
    p.push_str(
        "<p>Throughput (or latency) against the number of worker threads, as in van \
         Tol 2011 (Figs 1-6). With <code>threads=auto</code> each placement runs one thread per \
         CPU, and points are joined by threads per core: the gap between the 1 and 2 \
         threads/core lines at the same thread count is what SMT gives compared with more \
         cores. With an explicit <code>threads</code> value each placement (mapping) is a \
         line. Points: mean with 95% CI for throughput, median with p25-p75 for latency; \
         hover a point for its placement and CPUs. Placements with the same thread count on \
         one line (2c1t and cores on a two-core machine) are drawn side by side in \
         measuring order, and the line goes through the first.</p><div class=\"charts\">",
    );
    // One chart per benchmark and parameters other than `threads`; `threads=auto` cells
    // (one point per placement) and explicit counts (one line per mapping) apart, as
    // their lines mean different things.
    type ChartKey = (String, BTreeMap<String, String>, bool);
    let mut order: Vec<ChartKey> = Vec::new();
    let mut groups: BTreeMap<ChartKey, Vec<&CellRecord>> = BTreeMap::new();
    for c in cells {
        let mut ps = c.params.clone();
        let explicit = ps.remove("threads").is_some_and(|t| t != "auto");
        let k = (c.benchmark.clone(), ps, explicit);
        let v = groups.entry(k.clone()).or_default();
        if v.is_empty() {
            order.push(k);
        }
        v.push(c);
    }
    for k in order {
        let cs = &groups[&k];
        let first = cs[0];
        let col = Column::for_values(
            &first.unit,
            &cs.iter().map(|c| headline(c).0).collect::<Vec<_>>(),
        );
        let mut series: Vec<Series> = Vec::new();
        let mut undrawn: Vec<String> = Vec::new();
        for c in cs {
            let Some(x) = thread_count(c) else {
                undrawn.push(c.placement.name.clone());
                continue;
            };
            let (y, lo, hi) = headline(c);
            let label = series_label(c);
            let tip = format!(
                "{} on CPUs {}: {} ({}), n = {}",
                c.placement.name,
                cpus(&c.placement.cpus),
                col.with_unit(y),
                match c.direction {
                    Direction::Higher => format!("mean, 95% CI {}", col.range(lo, hi)),
                    Direction::Lower => format!("median, p25-p75 {}", col.range(lo, hi)),
                },
                c.result.summary.n
            );
            let point = Point {
                x,
                y: y / col.divisor,
                lo: (c.result.summary.n > 1).then_some(lo / col.divisor),
                hi: (c.result.summary.n > 1).then_some(hi / col.divisor),
                tip,
                label: Some(col.num(y)),
            };
            match series.iter_mut().find(|s| s.name == label) {
                Some(s) => s.points.push(point),
                None => series.push(Series {
                    name: label,
                    points: vec![point],
                }),
            }
        }
        let better = format!("{} is better", first.direction.as_str());
        let mut title = first.benchmark.clone();
        if !k.1.is_empty() {
            let _ = write!(title, " {}", params(&k.1));
        }
        title.push_str(if k.2 {
            ", threads varied per mapping"
        } else {
            ", one thread per CPU"
        });
        let ys: Vec<f64> = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.y))
            .collect();
        let opt = LineOptions {
            y_zero: first.direction == Direction::Higher,
            x_integer: true,
            y_scale: if first.direction == Direction::Lower {
                Scale::auto(&ys)
            } else {
                Scale::Linear
            },
            point_labels: true,
            ..LineOptions::default()
        };
        let y_label = format!("{} ({})", col.unit, better);
        p.push_str("<figure>");
        match svg::line_chart(&title, &better, "threads", &y_label, &series, &opt) {
            Some(s) => p.push_str(&s),
            None => {
                let _ = write!(
                    p,
                    "<p><b>{}</b>: not measured in this run.</p>",
                    esc(&title)
                );
            }
        }
        if !undrawn.is_empty() {
            let _ = write!(
                p,
                "<figcaption>Not drawn (thread count unknown for an unpinned placement): \
                 {}</figcaption>",
                esc(&undrawn.join(", "))
            );
        }
        p.push_str("</figure>");
    }
    p.push_str("</div></section>");
    Ok(())
}

fn sweeps(p: &mut String, r: &RunResults) -> Result<(), String> {
    crate::html_figures::sweeps(p, r)
        .then_some(())
        .ok_or_else(|| "no benchmark measured at three or more working-set sizes".into())
}

fn latency(p: &mut String, r: &RunResults) -> Result<(), String> {
    crate::html_figures::latency(p, r)
        .then_some(())
        .ok_or_else(|| {
            "no per-event times (they come from pthread-create, mutex-handoff, condvar-signal \
         and condvar-broadcast)"
                .into()
        })
}

fn os_latency(p: &mut String, r: &RunResults) -> Result<(), String> {
    let os: Vec<&CellRecord> = r.cells.iter().filter(|c| c.group == "os").collect();
    if os.is_empty() {
        return Err("no os benchmark".into());
    }
    p.push_str(
        "<section id=\"os-latency\"><h2>OS latencies (Vianney 2003, Table 1: LMbench kernel \
         latencies)</h2>",
    );
    // Columns: placements in first-appearance order.
    let mut cols: Vec<&str> = Vec::new();
    for c in &os {
        if !cols.contains(&c.placement.name.as_str()) {
            cols.push(&c.placement.name);
        }
    }
    // Rows: (benchmark, params) in the paper's order, then any others in run order.
    let mut rows: Vec<(&str, &BTreeMap<String, String>)> = Vec::new();
    for c in &os {
        let k = (c.benchmark.as_str(), &c.params);
        if !rows.contains(&k) {
            rows.push(k);
        }
    }
    rows.sort_by_key(|(b, _)| row_of(b).map_or(TABLE1.len(), |(i, _)| i));
    let _ = write!(
        p,
        "<p>Mean time per operation in microseconds with the 95% confidence interval of \
         the mean, as the paper reports averages; smaller is better. Columns are the \
         placements measured.</p><table><tr><th>Kernel function</th>"
    );
    for col in &cols {
        let _ = write!(p, "<th>{}</th>", esc(col));
    }
    p.push_str("</tr>");
    for (bench, ps) in &rows {
        let label = match row_of(bench) {
            Some((_, row)) => {
                let expected: BTreeMap<String, String> = row
                    .params
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                if *ps == &expected || ps.is_empty() {
                    row.label.to_string()
                } else {
                    format!("{} ({})", row.label, params(ps))
                }
            }
            None if ps.is_empty() => bench.to_string(),
            None => format!("{bench} ({})", params(ps)),
        };
        let _ = write!(
            p,
            "<tr><td>{} <span class=\"sub\">{}</span></td>",
            esc(&label),
            esc(bench)
        );
        for col in &cols {
            let cell = os
                .iter()
                .find(|c| c.benchmark == *bench && &c.params == *ps && c.placement.name == *col);
            match cell {
                Some(c) => {
                    let s = &c.result.summary;
                    // Nanoseconds become microseconds as in the paper; another unit is
                    // shown as it is, with its name.
                    let (f, unit) = if c.unit == "ns" {
                        (1e-3, String::new())
                    } else {
                        (1.0, format!(" {}", c.unit))
                    };
                    // Two decimals down every column, as the paper prints its table.
                    let text = if s.n > 1 {
                        format!("{:.2} ± {:.2}", s.mean * f, s.ci95_half_width * f)
                    } else {
                        format!("{:.2} (n = 1)", s.mean * f)
                    };
                    let _ = write!(
                        p,
                        "<td class=\"num{}\">{}{}</td>",
                        if c.result.met_target() { "" } else { " bad" },
                        esc(&text),
                        esc(&unit)
                    );
                }
                None => p.push_str("<td class=\"muted\">not measured</td>"),
            }
        }
        p.push_str("</tr>");
    }
    p.push_str("</table>");
    let missing: Vec<&str> = TABLE1
        .iter()
        .filter(|row| !os.iter().any(|c| c.benchmark == row.bench))
        .map(|row| row.label)
        .collect();
    if !missing.is_empty() {
        let _ = write!(
            p,
            "<p class=\"muted\">Rows of Vianney's table not measured in this run: {}.</p>",
            esc(&missing.join(", "))
        );
    }
    p.push_str("<p class=\"sub\">Values in red did not reach the CI target.</p></section>");
    Ok(())
}

fn placement_label(c: &CellRecord) -> String {
    if c.placement.spec == c.placement.name || c.placement_spec == c.placement.name {
        c.placement.name.clone()
    } else {
        format!("{} ({})", c.placement.name, c.placement_spec)
    }
}

fn cells(p: &mut String, r: &RunResults) -> Result<(), String> {
    if r.cells.is_empty() {
        return Err("no cell was measured".into());
    }
    p.push_str(
        "<section id=\"cells\"><h2>All cells</h2><p>Every measured cell, one table per \
         benchmark (open one to see it); each table has one unit and one number format per \
         column. Red: the cell did not reach its CI target.</p>",
    );
    let mut order: Vec<&str> = Vec::new();
    for c in &r.cells {
        if !order.contains(&c.benchmark.as_str()) {
            order.push(&c.benchmark);
        }
    }
    for bench in order {
        let cs: Vec<&CellRecord> = r.cells.iter().filter(|c| c.benchmark == bench).collect();
        let first = cs[0];
        let vals: Vec<f64> = cs
            .iter()
            .flat_map(|c| {
                let s = &c.result.summary;
                [s.median, s.mean, s.min]
            })
            .collect();
        let col = Column::for_values(&first.unit, &vals);
        let unconverged = cs.iter().filter(|c| !c.result.met_target()).count();
        let _ = write!(
            p,
            "<details><summary><b>{}</b> <span class=\"sub\">{} cell{}, {}, {} is better{}</span>\
             </summary><table><tr><th>params</th><th>placement</th><th>CPUs</th>\
             <th>median ({u})</th><th>p25-p75 ({u})</th><th>mean ± 95% CI ({u})</th>\
             <th>CI</th><th>min ({u})</th><th>n</th><th>converged</th></tr>",
            esc(bench),
            cs.len(),
            if cs.len() == 1 { "" } else { "s" },
            esc(&first.unit),
            first.direction.as_str(),
            if unconverged > 0 {
                format!(", {unconverged} not converged")
            } else {
                String::new()
            },
            u = esc(&col.unit)
        );
        for c in cs {
            let s = &c.result.summary;
            let (ci, rel) = if s.n > 1 {
                (col.pm(s.mean, s.ci95_half_width), pct2(s.ci95_rel * 100.0))
            } else {
                (col.num(s.mean), "no CI: n = 1".into())
            };
            let conv = if c.result.met_target() {
                "yes".to_string()
            } else if s.n < 2 {
                "no (n = 1, no interval)".to_string()
            } else if c.result.converged {
                "no (pooled interval above the target)".to_string()
            } else {
                format!("no ({:?})", c.result.stop_reason)
                    .replace("MaxSamples", "max samples")
                    .replace("TimeBudget", "time budget")
            };
            let _ = write!(
                p,
                "<tr><td><code>{}</code></td><td>{}</td><td><code>{}</code></td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td{}>{}</td></tr>",
                esc(&params(&c.params)),
                esc(&placement_label(c)),
                esc(&cpus(&c.placement.cpus)),
                col.num(s.median),
                col.range(s.p25, s.p75),
                esc(&ci),
                esc(&rel),
                col.num(s.min),
                s.n,
                if c.result.met_target() {
                    ""
                } else {
                    " class=\"bad\""
                },
                esc(&conv)
            );
        }
        p.push_str("</table></details>");
    }
    p.push_str("</section>");
    Ok(())
}

fn skipped(p: &mut String, r: &RunResults) -> Result<(), String> {
    let pending = pending_cells(r);
    if r.skipped.is_empty() && pending.is_empty() {
        return Err("none, every planned cell was measured".into());
    }
    p.push_str("<section id=\"skipped\"><h2>Skipped</h2>");
    p.push_str(
        "<table><tr><th>benchmark</th><th>params</th><th>placement</th><th>reason</th></tr>",
    );
    for s in &r.skipped {
        let _ = write!(
            p,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            esc(&s.key.benchmark),
            esc(&params(&s.key.params)),
            esc(&s.key.placement),
            esc(&s.reason)
        );
    }
    for k in pending {
        let _ = write!(
            p,
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td class=\"muted\">not \
             measured: the run stopped before it</td></tr>",
            esc(&k.benchmark),
            esc(&params(&k.params)),
            esc(&k.placement)
        );
    }
    p.push_str("</table></section>");
    Ok(())
}
