//! # smtlab-report
//!
//! Turns results ([`smtlab_model::RunResults`], the `smtlab.results/1` data) into things
//! people read. Every exporter is a pure function from results to a `String`, in the
//! manner of hyperfine's exporters: no I/O, no printing, deterministic output, so each
//! one is tested on hand-built results.
//!
//! * [`smt_yields`] and [`yield_table`]: per benchmark, the SMT yield `1c2t/1c1t`, the
//!   dual-core SMT gain `2c2t/2c1t` and the machine SMT gain `all/cores`, each a ratio of
//!   means with a 95% Fieller interval, flipped for latencies so above 1 is always
//!   better; `single-threaded` where the SMT side left its sibling idle ([`yields`]
//!   explains the rules). Every comparison of two cells is
//!   [`smtlab_model::verdict::verdict`], written by [`fmt::verdict`] and [`fmt::gain`].
//! * [`advice`]: the answer to "should SMT be on for this workload?", one recommendation
//!   per workload (keep SMT on, turn it off, it depends, cannot tell, no SMT here) decided
//!   from figures with their 95% intervals; terminal, `smtlab.advice/1` JSON, Markdown,
//!   and the HTML page's first section.
//! * [`compare()`], [`compare_table`], [`compare_json`]: run B against run A cell by cell,
//!   paper 001 style (A | B | speed-up %, significance corrected for the number of rows,
//!   unsteady cells, geometric means per group with 95% intervals and a "no difference"
//!   headline); the [`compare`](mod@compare) module states which statistic and which
//!   tests.
//! * [`html()`]: one self-contained page (inline CSS and SVG, no scripts, no network)
//!   with the machine, the yield table, scaling curves (paper 002 Figs 1-6), per-event
//!   latency scatters and cumulative distributions (Figs 8-14), the OS latency table
//!   (paper 001 Table 1), every cell, and what was skipped.
//! * [`fleet`](mod@fleet): SMT yields of many hosts' runs pooled per CPU model and
//!   workload (median with an order-statistic interval, outlier hosts named with what
//!   differs on them, the advice counted over hosts); terminal, `smtlab.fleet/1` JSON,
//!   HTML.
//! * [`counters`](mod@counters): the one-line summary of a cell's performance counters
//!   and OS time (`--counters`), and the headline figures the page and the comparison
//!   show.
//! * [`markdown::cells`]: the cells as a Markdown table with speed-ups (hyperfine's
//!   `--export-markdown`).
//! * [`html_workloads`]: the page's sections for the server and system workloads (web
//!   servers, paper 001's speed-up tables, AIM9 rows, the task pool, OLTP and SDET, and
//!   paper 004's SMT gain per workload), each present only when the run has such cells.
//! * [`svg`]: the small chart library behind the page. The pages' markup is built with
//!   `maud`, which escapes every interpolated value.
//! * [`export`]: `smtlab.results/1` JSON and one-row-per-cell CSV (`report --json/--csv`).
//! * [`text`]: the verdicts `exec` and `bench` print under their cells (the SMT pairs
//!   each benchmark's cells form, the speed-up and the gain of each), in the words the
//!   advice and the page use.
//! * [`glossary`]: the words the report gives a meaning of its own (`unsteady`,
//!   `disturbed`, `at a limit`, the SMT yield, `2 cores vs 1`, the 95% interval), each
//!   defined once on the page and in the Markdown, linked from where they are used.
//! * [`environment`]: a run's environment facts, listed once for the page's machine
//!   table, the comparison's two columns and what `compare` lists as `differs:`.
//! * [`table`]: the one text-table engine (aligned columns, fitted to a width without
//!   cutting a number), used by the text reports and the terminal; [`fmt::ratio_ci`] is
//!   the one way a ratio is written (`1.250x [1.210, 1.290]`).
//!
//! The report depends on the data model only (not on the benchmark catalog), so it can
//! render results saved by any smtlab version. What it knows of a benchmark beyond its
//! cells comes with the results (`RunResults::benchmarks`, the catalog entries the
//! reader adds): the section that shows it, its main parameter, paper 001's row label.
//! It matches no benchmark by name; a benchmark without an entry is named under the
//! page's header instead of leaving a section silently short.
//!
//! Rule kept throughout: never print or draw a number that was not measured. Missing
//! cells say "not measured"; a section without data says so in one line.

pub mod advice;
pub mod between;
pub mod compare;
pub mod compare_html;
pub mod compare_sides;
pub mod compare_up;
pub mod corun;
pub mod counter_ratios;
pub mod counters;
pub mod cpi_latencies;
pub mod environment;
pub mod export;
pub mod fleet;
pub mod fmt;
pub mod glossary;
pub mod html;
mod html_counter_ratios;
mod html_counters;
mod html_figures;
mod html_parts;
pub mod remote;

pub mod html_workloads;
pub mod load_points;
pub mod markdown;
pub mod mix;
pub mod predict;
pub mod security;
pub mod smt_states;
pub mod svg;
pub mod table;
#[cfg(test)]
mod testutil;
pub mod text;
pub mod topo_svg;
pub mod units;
pub mod utilisation;
pub mod yields;

pub use between::BetweenRuns;
pub use compare::{
    Comparison, GroupMean, Statistic, compare, compare_json, compare_table, compare_with,
};
pub use compare_html::{compare_html, compare_markdown};
pub use compare_sides::Side;
pub use html::{html, html_labelled};
pub use yields::{Yield, YieldRow, no_yields_reason, smt_yields, yield_table};

/// `items` grouped by `key`: the groups in the order their first item appears, each
/// group's items in theirs (looked up by key, so a run's thousand cells stay cheap).
pub fn grouped<K: Ord + Clone, T>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> K,
) -> Vec<(K, Vec<T>)> {
    let mut index = std::collections::BTreeMap::new();
    let mut groups: Vec<(K, Vec<T>)> = Vec::new();
    for item in items {
        let k = key(&item);
        let i = *index.entry(k.clone()).or_insert_with(|| {
            groups.push((k, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(item);
    }
    groups
}

/// `items` without repeats, each where it first appears: the order rows and columns
/// take in every table that follows the run.
pub fn first_seen<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}
