//! The `task-pool` section (paper 002 Figs 15-16): tasks per second and the run time of
//! one task tree against the number of workers, per kind of work and queue, CAS retries
//! and lock contention per task, and the SMT speed-ups.

use maud::{PreEscaped, html};
use smtlab_model::metrics::task_pool as m;
use smtlab_model::{CellRecord, ReportSection, RunResults};

use super::cells::{cells_in, main_param, mean_column, metric, scaled_mean};
use super::charts::figure;
use super::rows::{fixed_params, row_head, rows_by_params};
use super::speedup_table::{no_pairs, speedup_table, value_text};
use crate::counters::duration_ns;
use crate::fmt::{num, short};
use crate::html_parts::BR;
use crate::svg::{self, LineOptions, Point, Series};

/// Paper 002 Figs 15-16: the task pool.
pub(crate) fn task_pool(r: &RunResults) -> Option<maud::Markup> {
    let cells = cells_in(r, |s| *s == ReportSection::TaskPool);
    if cells.is_empty() {
        return None;
    }
    let mut out = String::new();
    let p = &mut out;
    let col = mean_column(&cells);
    // One pair of charts per kind of work (paper 002 Fig 15 is the FFT, Fig 16 the
    // matrix multiply): their rates differ by orders of magnitude.
    let mut charts = String::new();
    for (work, of_work) in crate::grouped(cells.iter().copied(), |c| param_or(c, "work", "fft")) {
        task_pool_charts(&mut charts, &of_work, work);
    }
    p.push_str(&html! { div class="charts" { (PreEscaped(charts)) } }.into_string());
    let table = html! {
        table {
            tr {
                th { "work" } th { "queue" } th { "placement" } th { "workers" }
                th { "throughput" (BR) span class="sub" { (col.unit) } }
                th { "tree run time" } th { "tasks per tree" } th { "CAS retries per task" }
                th { "lock contended per task" }
            }
            @for c in &cells {
                @let opt_num = |k: &str| metric(c, k).map_or("-".to_string(), num);
                tr {
                    td { (param_or(c, "work", "fft")) }
                    td { (param_or(c, "queue", "cas")) }
                    td { (c.placement.name) }
                    td class="num" { (workers(c).map_or("-".into(), short)) }
                    td class="num" { (value_text(&col, c)) }
                    td class="num" {
                        (metric(c, m::TREE_MS).map_or("-".into(), |v| duration_ns(v * 1e6)))
                    }
                    td class="num" { (metric(c, m::TASKS_PER_TREE).map_or("-".into(), short)) }
                    td class="num" { (opt_num(m::CAS_RETRIES_PER_TASK)) }
                    td class="num" { (opt_num(m::LOCK_CONTENDED_PER_TASK)) }
                }
            }
        }
    };
    p.push_str(&table.into_string());
    p.push_str(&html! { h3 { "Tasks per second per placement, SMT speed-ups" } }.into_string());
    let (keys, rows) = rows_by_params(&cells, main_param(r, &cells));
    p.push_str(&fixed_params(&cells, &keys));
    if !speedup_table(p, &row_head(&keys), &rows) {
        p.push_str(&no_pairs(r).into_string());
    }
    Some(html! {
        section id="task-pool" {
            h2 { "Task pool" }
            p {
                "Paper 002 Figs 15-16: a task tree (FFT or block matrix multiply) run by a \
                 pool of workers sharing one queue, lock-free (CAS) or mutex-guarded: tasks \
                 per second and the run time of one tree against the number of workers, a \
                 pair of charts per kind of work and a line per queue and threads per core."
            }
            (PreEscaped(out))
        }
    })
}

/// Tasks per second and tree run time of one kind of work against the number of
/// workers, a line per queue and threads per core.
fn task_pool_charts(p: &mut String, cells: &[&CellRecord], work: &str) {
    let name = |c: &CellRecord| {
        format!(
            "{} ({}t/core)",
            param_or(c, "queue", "cas"),
            c.placement.threads_per_core
        )
    };
    let lines = crate::grouped(cells.iter().copied(), |c| name(c));
    type Y = Option<(f64, Option<(f64, f64)>)>;
    let series_of = |f: &dyn Fn(&CellRecord) -> Y| -> Vec<Series> {
        lines
            .iter()
            .map(|(n, of_line)| {
                let mut points: Vec<Point> = of_line
                    .iter()
                    .filter_map(|c| {
                        let x = workers(c)?;
                        let (y, ci) = f(c)?;
                        Some(Point::new(
                            x,
                            y,
                            (ci.map(|c| c.0), ci.map(|c| c.1)),
                            format!(
                                "{work} {n}, {} workers on {}: {}",
                                short(x),
                                c.placement.name,
                                num(y)
                            ),
                        ))
                    })
                    .collect();
                points.sort_by(|a, b| a.x.total_cmp(&b.x));
                Series {
                    name: n.clone(),
                    points,
                }
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let col = mean_column(cells);
    let rate = series_of(&|c| Some(scaled_mean(c, &col)));
    let tree = series_of(&|c| metric(c, m::TREE_MS).map(|v| (v, None)));
    let opt = LineOptions {
        y_zero: true,
        x_integer: true,
        ..LineOptions::default()
    };
    figure(
        p,
        svg::line_chart(
            &format!("{work}: tasks per second"),
            "mean with 95% CI",
            "workers",
            &col.unit,
            &rate,
            &opt,
        ),
    );
    figure(
        p,
        svg::line_chart(
            &format!("{work}: run time of one tree"),
            "mean over samples; lower is better",
            "workers",
            "ms",
            &tree,
            &opt,
        ),
    );
}

fn param_or<'a>(c: &'a CellRecord, key: &str, default: &'a str) -> &'a str {
    c.params.get(key).map_or(default, String::as_str)
}

/// The number of workers a cell ran: as recorded, or as asked for.
fn workers(c: &CellRecord) -> Option<f64> {
    metric(c, m::WORKERS).or_else(|| c.params.get("workers").and_then(|w| w.parse().ok()))
}
