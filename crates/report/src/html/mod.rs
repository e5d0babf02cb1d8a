//! The self-contained HTML page: one file with inline CSS and inline SVG, no scripts and
//! no external requests, so it can be mailed, archived, or opened offline.
//!
//! The markup is built with `maud`, which escapes every interpolated value by its type,
//! so no string from the results reaches the page unescaped. The page is
//! XHTML-compatible (every element closed, attributes quoted, only XML's predefined
//! entities), so a strict XML parser reads it; the tests rely on that. maud writes void
//! elements HTML-style (`<br>`), so the few this page uses come from `BR` and the
//! head's literal `<meta/>` tags, and `xml_safe` replaces the control characters XML
//! forbids.
//!
//! Sections, each an element with a stable `id`: `machine`, `smt-yield`, `scaling`,
//! `latency`, `os-latency`, the workload sections of [`crate::html_workloads`],
//! `counters`, `cells`, `skipped`. A section without data says "not
//! measured in this run" instead of drawing empty axes. The sections live by concern:
//! `machine` (environment and topology), `yields` (the verdict of `smtlab exec` and
//! the SMT yield table), `scaling` (thread-count charts) and `tables` (OS latencies,
//! all cells, skipped cells).

use maud::{Markup, PreEscaped, html};
use smtlab_model::{RunResults, RunStatus};

use crate::fmt::utc;
use crate::html_parts::Absent;

pub(crate) mod machine;
pub(crate) mod scaling;
mod tables;
mod yields;

pub use machine::notes;

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
table.answers td:first-child{white-space:normal;min-width:10em;max-width:24em}\
td.yield{font-variant-numeric:tabular-nums}\
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
td.bad{color:#b03000}\
tr.sep td{border:none;height:6px}\
.muted{color:#666}\
.sub{color:#666;font-size:12px}\
ul.notes{background:#fff8e5;border-left:4px solid #e69f00;padding:8px 8px 8px 28px;max-width:980px}\
.charts{display:flex;flex-wrap:wrap;gap:10px;align-items:flex-start}\
.charts>div,.charts>figure{min-width:0;max-width:100%}\
.side{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.side>figure{flex:1 1 0;min-width:380px}\
table.kv td code{white-space:pre-wrap;word-break:break-all}\
#skipped td code{white-space:normal;overflow-wrap:anywhere}#skipped td:last-child{min-width:16em}\
figure{margin:0;max-width:100%}\
.charts svg,figure svg{max-width:100%;height:auto}\
svg.topo{max-width:none;height:auto}\
details{margin:6px 0}\
summary{cursor:pointer;padding:3px 0}\
.caption{background:#eef6fb;border-left:4px solid #0072b2;padding:6px 10px;font-size:13px;max-width:980px}\
ul.verdict{font-size:15px}\
#glossary dt{font-weight:600;margin-top:6px}#glossary dd{margin:0 0 4px 18px;max-width:760px}\
a.term{color:inherit;text-decoration:underline dotted}\
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

/// A section writer.
#[derive(Clone, Copy)]
enum SectionFn {
    /// The section, or why there is nothing to show, which the page names under its
    /// header.
    Named(fn(&RunResults) -> Result<Markup, Absent>),
    /// The section, or `None` where the run has nothing for it: a workload section of a
    /// run without such cells is left out without a word, since naming six absent
    /// workload kinds would crowd the header of every run.
    Optional(fn(&RunResults) -> Option<Markup>),
}
use SectionFn::{Named, Optional};

/// The sections in page order: id, navigation name, writer.
const SECTIONS: [(&str, &str, SectionFn); 21] = [
    // The answer (keep SMT on / turn it off) leads: the machine details come after it.
    ("advice", "Answer", Named(crate::advice::section)),
    // The verdict of `smtlab exec` is the answer the reader came for: it goes first.
    ("exec", "Verdict", Named(yields::exec_verdict)),
    ("security", "SMT safety", Optional(crate::security::section)),
    ("machine", "Machine", Named(machine::machine)),
    ("smt-yield", "SMT yield", Named(yields::smt_yield)),
    (
        "smt-states",
        "SMT off vs on",
        Named(crate::smt_states::section),
    ),
    ("scaling", "Scaling", Named(scaling::scaling)),
    (
        "sweeps",
        "Working-set sweeps",
        Named(crate::html_figures::sweeps),
    ),
    (
        "latency",
        "Latency distributions",
        Named(crate::html_figures::latency),
    ),
    ("os-latency", "OS latencies", Named(tables::os_latency)),
    (
        "workload-smt",
        "SMT gain per workload",
        Optional(crate::html_workloads::chart1),
    ),
    ("web", "Web servers", Optional(crate::html_workloads::web)),
    (
        "workload-tables",
        "Speed-up tables",
        Optional(crate::html_workloads::tables),
    ),
    ("aim", "AIM9 rows", Optional(crate::html_workloads::aim)),
    (
        "task-pool",
        "Task pool",
        Optional(crate::html_workloads::task_pool),
    ),
    ("mix", "Multiprogrammed mix", Optional(crate::mix::section)),
    (
        "oltp",
        "OLTP and SDET",
        Optional(crate::html_workloads::oltp),
    ),
    ("counters", "Counters", Named(crate::html_counters::section)),
    ("corun", "Co-running workloads", Optional(corun)),
    ("cells", "All cells", Named(tables::cells)),
    ("skipped", "Skipped", Named(tables::skipped)),
];

/// Co-run matrices, single-thread penalties and the utilisation curve, for the runs of
/// `smtlab corun`, `penalty` and `util`; a stored `predict` run's profiles and
/// predictions beside its measured matrix instead of the heatmaps.
fn corun(r: &RunResults) -> Option<Markup> {
    let mut p = String::new();
    crate::utilisation::section(&mut p, r);
    let corun_cells = r.cells.iter().any(|c| crate::corun::form_of(c).is_some());
    match corun_cells.then(|| crate::predict::stored::analyse_run(r)) {
        Some(Some(doc)) => {
            let measured = crate::corun::matrix(&r.cells);
            p.push_str(&crate::predict::html::section(&doc, &measured));
        }
        _ => crate::corun::section(&mut p, r),
    }
    // Left out silently: most runs are not co-runs, and need not say so.
    (!p.is_empty()).then_some(PreEscaped(p))
}

/// The whole page. Sections without data are left out and named in one line under the
/// header with the reason, so the page has no empty sections.
pub fn html(results: &RunResults) -> String {
    html_labelled(results, None)
}

/// [`html`] of a run the user named (`run --label`; the store keeps the name beside the
/// results): the name leads the page's title and header.
pub fn html_labelled(results: &RunResults, label: Option<&str>) -> String {
    let env = &results.run.environment;
    let host = env.hostname.as_deref().unwrap_or("unknown host");
    let mut body = String::with_capacity(64 * 1024);
    let mut shown: Vec<(&str, &str)> = Vec::new();
    let mut absent: Vec<String> = Vec::new();
    for (id, name, f) in &SECTIONS {
        let section = match f {
            Named(f) => match f(results) {
                Ok(s) => Some(s.into_string()),
                Err(Absent(why)) => {
                    absent.push(format!("{name}: {why}"));
                    None
                }
            },
            Optional(f) => f(results).map(Markup::into_string),
        };
        if let Some(s) = section {
            body.push_str(&s);
            shown.push((id, name));
        }
    }
    // Sections are chosen by the benchmarks' catalog entries; a benchmark without one
    // (renamed or removed since the run, or results read without a catalog) would
    // otherwise drop out of its section without a word.
    let undescribed = results.undescribed();
    if !undescribed.is_empty() {
        absent.push(format!(
            "Sections by benchmark: no catalog entry for {} in these results, so {} only \
             in the general sections",
            undescribed.join(", "),
            if undescribed.len() == 1 {
                "its cells are"
            } else {
                "their cells are"
            }
        ));
    }
    // Every word with a meaning of its own that the page uses, defined once at its end.
    if let Some(words) = crate::glossary::section(&body) {
        body.push_str(&words.into_string());
        shown.push(("glossary", "Words"));
    }
    let title = match label {
        Some(l) => format!("smtlab report: {l} ({host})"),
        None => format!("smtlab report: {host}"),
    };
    page(
        &title,
        CSS,
        html! {
                (header(results, label, &shown, &absent))
                (PreEscaped(wrap_tables(&body)))
                footer {
                    "Generated by smtlab-report " (env!("CARGO_PKG_VERSION")) " from "
                    code { (results.schema) }
                    " results. Charts show means with 95% confidence intervals (Student t) \
                     for higher-is-better benchmarks and medians with the interquartile range \
                     for lower-is-better ones; each table says what it shows. Nothing here is \
                     estimated or filled in: a value that was not measured is marked so. \
                     Papers named: Ruan et al., SIGMETRICS 2005 (SMT and network servers); \
                     Vianney 2003 (Hyper-Threading speeds Linux); van Tol 2011 (a \
                     characterization of the SPARC T3-4); Redstone et al., ASPLOS 2000 (OS \
                     behaviour on an SMT); Olszewski and Herescu (workloads with hardware \
                     multithreading)."
                }
        },
    )
}

/// A whole page: the doctype, the head with `title` and the inline style sheet `css`,
/// and `body`, safe for XML ([`xml_safe`]) and ending in a newline. The report, the
/// comparison and the fleet page share it.
pub(crate) fn page(title: &str, css: &str, body: Markup) -> String {
    let page = html! {
        (PreEscaped("<!DOCTYPE html>\n"))
        html lang="en" {
            head {
                (PreEscaped("<meta charset=\"utf-8\"/><meta name=\"viewport\" \
                             content=\"width=device-width, initial-scale=1\"/>"))
                title { (title) }
                style { (PreEscaped(css)) }
            }
            body { (body) }
        }
    };
    let mut p = xml_safe(page.into_string());
    p.push('\n');
    p
}

/// The page with every control character other than tab and newline replaced by U+FFFD:
/// XML allows none of them, and a hostname or command line should never hold one, but
/// if it does the page must still parse.
pub(crate) fn xml_safe(page: String) -> String {
    if !page.chars().any(is_xml_forbidden) {
        return page;
    }
    page.chars()
        .map(|c| if is_xml_forbidden(c) { '\u{fffd}' } else { c })
        .collect()
}

fn is_xml_forbidden(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// Every table in a box that scrolls sideways on its own, so a wide table never widens
/// the page (tables do not nest on this page).
pub(crate) fn wrap_tables(body: &str) -> String {
    body.replace("<table", "<div class=\"scroll\"><table")
        .replace("</table>", "</table></div>")
}

fn header(
    r: &RunResults,
    label: Option<&str>,
    shown: &[(&str, &str)],
    absent: &[String],
) -> Markup {
    let m = &r.run;
    let host = m.environment.hostname.as_deref().unwrap_or("unknown host");
    let status = match m.status {
        RunStatus::Running => "still running",
        RunStatus::Finished => "finished",
        RunStatus::Interrupted => "interrupted",
    };
    let names: Vec<&str> = absent
        .iter()
        .map(|a| a.split_once(": ").map_or(a.as_str(), |(n, _)| n))
        .collect();
    html! {
        header {
            h1 {
                "smtlab report: "
                @if let Some(l) = label { (l) " (" (host) ")" } @else { (host) }
            }
            p class="muted" {
                "run" @if m.id > 0 { " " (m.id) }
                @if let Some(l) = label { ", labelled " code { (l) } ","  }
                " started " (utc(m.started_unix_s)) ", "
                (status) "; " (r.cells.len()) " cells measured, " (r.skipped.len()) " skipped"
                @if let Some(s) = &m.suite { "; suite " (s) }
            }
            nav { @for (id, name) in shown { a href={ "#" (id) } { (name) } } }
            @if !absent.is_empty() {
                details id="absent" class="muted" {
                    summary { "Not in this run: " (names.join(", ")) }
                    ul { @for a in absent { li { (a) } } }
                }
            }
        }
    }
}
