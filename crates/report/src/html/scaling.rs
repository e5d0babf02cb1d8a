//! The scaling charts: throughput or latency against the number of worker threads, one
//! line per threads-per-core or per mapping.

use std::collections::BTreeMap;
use std::fmt::Write;

use maud::{Markup, PreEscaped, html};
use smtlab_model::placement::Named;
use smtlab_model::{CellRecord, Direction, RunResults};

use crate::fmt::cpus;
use crate::html_parts::{Absent, headline};
use crate::svg::{self, LineOptions, Point, Scale, Series};
use crate::units::Column;

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
    *n == Named::All || *n == Named::Cores || n.split('/').next().is_some_and(is_grid_name)
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

pub(super) fn scaling(r: &RunResults) -> Result<Markup, Absent> {
    let sweeps = crate::html_figures::sweep_groups(r);
    let swept: Vec<&CellRecord> = sweeps
        .iter()
        .flat_map(|(_, cs)| cs.iter().copied())
        .collect();
    let cells: Vec<&CellRecord> = r
        .cells
        .iter()
        .filter(|c| c.group == "compute" || c.group == "memory")
        // Co-run cells (a workload next to a partner) have their own section.
        .filter(|c| crate::corun::form_of(c).is_none())
        .filter(|c| !swept.iter().any(|x| std::ptr::eq(*x, *c)))
        .collect();
    // One chart per benchmark and parameters other than `threads`; `threads=auto` cells
    // (one point per placement) and explicit counts (one line per mapping) apart, as
    // their lines mean different things.
    type ChartKey = (String, BTreeMap<String, String>, bool);
    let mut groups = crate::grouped(cells, |c| -> ChartKey {
        let mut ps = c.flat_params();
        let explicit = ps.remove("threads").is_some_and(|t| t != "auto");
        (c.benchmark.clone(), ps, explicit)
    });
    // One point shows no scaling: such charts are left out.
    groups.retain(|(_, cs)| cs.len() > 1);
    if groups.is_empty() {
        return Err(Absent(
            "no compute or memory benchmark at two or more thread counts".into(),
        ));
    }
    Ok(html! {
        section id="scaling" {
            h2 { "Scaling with threads" }
            p {
                "Throughput (or latency) against the number of worker threads, as in van \
                 Tol 2011 (Figs 1-6). With " code { "threads=auto" } " each placement runs one \
                 thread per CPU, and points are joined by threads per core: the gap between \
                 the 1 and 2 threads/core lines at the same thread count is what SMT gives \
                 compared with more cores. With an explicit " code { "threads" } " value each \
                 placement (mapping) is a line. Points: mean with 95% CI for throughput, \
                 median with p25-p75 for latency; each point is labelled with its placement \
                 and value (hover for its CPUs). \
                 Placements with the same thread count on one line (2c1t and cores on a \
                 two-core machine) are drawn side by side in measuring order, and the line \
                 goes through the first."
            }
            div class="charts" {
                @for (k, cs) in &groups {
                    (scaling_figure(k, cs))
                }
            }
        }
    })
}

/// One chart of [`scaling`]: the cells of one benchmark and parameter set.
fn scaling_figure(k: &(String, BTreeMap<String, String>, bool), cs: &[&CellRecord]) -> Markup {
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
        let bar = (c.result.summary.n > 1).then_some((lo / col.divisor, hi / col.divisor));
        let point = Point {
            // Named, not only on hover: which placement a point is matters as much as
            // its value.
            label: Some(format!("{} {}", c.placement.name, col.num(y))),
            ..Point::new(x, y / col.divisor, bar.unzip(), tip)
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
    let mut title = crate::advice::workload_name(&first.benchmark, &k.1);
    title.push_str(if k.2 {
        ", threads varied per mapping"
    } else {
        ", one thread per CPU"
    });
    let ys = Series::all_y(&series);
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
    html! {
        figure {
            @match svg::line_chart(&title, &better, "threads", &y_label, &series, &opt) {
                Some(s) => (PreEscaped(s)),
                None => p { b { (title) } ": not measured in this run." },
            }
            @if !undrawn.is_empty() {
                figcaption {
                    "Not drawn (thread count unknown for an unpinned placement): "
                    (undrawn.join(", "))
                }
            }
        }
    }
}
