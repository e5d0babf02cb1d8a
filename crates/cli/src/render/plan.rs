//! The plan of `smtlab run` before it measures (`--dry-run`, and the line a run starts
//! with): the runner's [`Estimate`] as a table by benchmark and a summary.

use smtlab_report::table::{Layout, Table, wrap};
use smtlab_runner::plan::{Estimate, GroupEstimate, bytes_text};
use smtlab_runner::spent::TimeSpent;

/// `12.3 s`, `4m 10s`, `1h 02m`.
pub fn duration_text(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 60.0 {
        return format!("{s:.1} s");
    }
    let s = s.round() as u64;
    if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    }
}

fn samples_text(g: &GroupEstimate) -> String {
    let measured: Vec<(usize, usize)> = g
        .cells
        .iter()
        .filter(|c| c.cost.is_ok())
        .map(|c| c.samples)
        .collect();
    let least = measured.iter().map(|s| s.0).min();
    let most = measured.iter().map(|s| s.1).max();
    match (least, most) {
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}-{b}"),
        _ => "-".into(),
    }
}

/// The summary lines: cells, time, memory and its bound.
pub fn summary(e: &Estimate) -> Vec<String> {
    let mut out = vec![format!(
        "time: about {}, at most {} (calibration, warm-up, samples, set-up{})",
        duration_text(e.likely_ns()),
        duration_text(e.max_ns()),
        if e.measuring.repeat > 1 {
            format!(", {} rounds", e.measuring.repeat)
        } else {
            String::new()
        }
    )];
    let peak = e
        .groups
        .iter()
        .max_by_key(|g| g.peak_bytes())
        .filter(|g| g.peak_bytes() > 0);
    let bound = match e.memory_budget_bytes {
        Some(b) => format!(
            "bound {} (half the RAM, within what is available)",
            bytes_text(b)
        ),
        None => "no bound".into(),
    };
    out.push(match peak {
        Some(g) => format!(
            "memory: at most {} of benchmark buffers at once ({}{}); {bound}",
            bytes_text(g.peak_bytes()),
            g.benchmark,
            if g.together {
                format!(", {} placements together", g.cells.len())
            } else {
                String::new()
            }
        ),
        None => format!("memory: no large buffers; {bound}"),
    });
    out
}

/// The whole plan: a row per group (benchmark and parameters) with its placements,
/// samples per cell, memory held at once and time, then [`summary`].
pub fn text(e: &Estimate, layout: Layout) -> String {
    let mut t = Table::new([
        "Benchmark",
        "Parameters",
        "Cells",
        "Samples",
        "Memory",
        "About",
        "At most",
    ])
    .shrink(1);
    for g in &e.groups {
        let mut detail = Vec::new();
        if let Some(why) = &g.apart {
            detail.push(format!("  {why}"));
        }
        // The placements that will be skipped, a line for each kind of reason with its
        // first placement's words (the others name their own placement: no client CPU,
        // too few CPUs).
        let mut skipped: Vec<(&smtlab_runner::plan::SkipReason, Vec<&str>)> = Vec::new();
        for c in &g.cells {
            let Err(why) = &c.cost else { continue };
            let kind = std::mem::discriminant(why);
            match skipped
                .iter_mut()
                .find(|(w, _)| std::mem::discriminant(*w) == kind)
            {
                Some((_, on)) => on.push(&c.key.placement),
                None => skipped.push((why, vec![&c.key.placement])),
            }
        }
        for (why, on) in skipped {
            detail.push(format!("  skipped on {}: {why}", on.join(", ")));
        }
        let memory = match g.peak_bytes() {
            0 => "-".to_string(),
            b => bytes_text(b),
        };
        t.row_with_detail(
            [
                g.benchmark.clone(),
                super::run::params_text(&g.params),
                match g.cells.iter().filter(|c| c.cost.is_ok()).count() {
                    n if n == g.cells.len() => n.to_string(),
                    n => format!("{n}/{}", g.cells.len()),
                },
                samples_text(g),
                memory,
                duration_text(g.likely_ns()),
                duration_text(g.max_ns()),
            ],
            detail.join("\n"),
        );
    }
    let mut out = t.render_to(layout);
    let cells = e.cells();
    // The placements, once: most groups have them all.
    let cells_of_groups = e.groups.iter().flat_map(|g| &g.cells);
    let placements = smtlab_report::first_seen(cells_of_groups.map(|c| c.key.placement.as_str()));
    out.push_str(&wrap(
        &format!("placements: {}", placements.join(" ")),
        layout,
    ));
    let how = match (e.measuring.interleave, e.measuring.repeat) {
        (true, _) => "the placements of a benchmark take their samples in turn",
        (false, 1) => "cells one after the other",
        (false, _) => "the rounds of a benchmark's placements take turns",
    };
    out.push_str(&wrap(
        &format!(
            "plan: {cells} cells in {} groups; {how}; samples per cell: the fewest and the most \
             the settings allow (workloads take their minimum whatever the cell budget)",
            e.groups.len()
        ),
        layout,
    ));
    for line in summary(e) {
        out.push_str(&wrap(&line, layout));
    }
    out
}

/// The groups `run` names at its end, the longest first; the rest in one line.
const SPENT_SHOWN: usize = 8;

/// Where a run's time went and what it bought, said at its end: the whole time against
/// the plan, then a row per group that took the most (time, share, and its cells
/// measured, samples, widest 95% interval, cells not converged), the rest in one row.
pub fn spent(t: &TimeSpent, layout: Layout) -> String {
    let (spent_ns, planned_ns) = t.totals_ns();
    let groups = t.by_time();
    if groups.is_empty() {
        return String::new();
    }
    let share = |ns: u64| format!("{:.0}%", 100.0 * ns as f64 / spent_ns.max(1) as f64);
    let mut table = Table::new([
        "Benchmark",
        "Parameters",
        "Time",
        "Share",
        "Cells",
        "Samples",
        "+-95%",
        "Unconverged",
    ])
    .shrink(1);
    for g in groups.iter().take(SPENT_SHOWN) {
        let cells = match g.skipped {
            0 => g.measured.to_string(),
            n => format!("{}/{}", g.measured, g.measured + n),
        };
        // A figure at a limit is a bound: the time bought "at least X", not a level.
        let detail = match g.limit_kind {
            Some(kind) => format!(
                "  {} of {} cells at a limit ({}): bounds, not levels",
                g.at_limit,
                g.measured,
                kind.words()
            ),
            None => String::new(),
        };
        table.row_with_detail(
            [
                g.key.benchmark.clone(),
                super::run::params_text(&t.telling_params(g)),
                duration_text(g.spent_ns),
                share(g.spent_ns),
                cells,
                g.samples.to_string(),
                g.widest_ci95_rel
                    .map_or("-".into(), |ci| format!("{:.1}%", 100.0 * ci)),
                g.not_converged.to_string(),
            ],
            detail,
        );
    }
    let rest = &groups[groups.len().min(SPENT_SHOWN)..];
    if !rest.is_empty() {
        let ns = rest.iter().map(|g| g.spent_ns).sum();
        let mut row = vec![format!("{} more", rest.len()), String::new()];
        row.extend([duration_text(ns), share(ns)]);
        row.resize(8, String::new());
        table.row(row);
    }
    let mut out = wrap(
        &format!(
            "time: {}, planned about {}; where it went and what it bought (+-95%: the \
             widest interval of a group's cells):",
            duration_text(spent_ns),
            duration_text(planned_ns)
        ),
        layout,
    );
    out.push_str(&table.render_to(layout));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(duration_text(12_340_000_000), "12.3 s");
        assert_eq!(duration_text(250_000_000_000), "4m 10s");
        assert_eq!(duration_text(3_725_000_000_000), "1h 02m");
    }

    /// Placements skipped for different reasons each get theirs: a workload the kernel
    /// cannot serve on one, no client CPU on the others.
    #[test]
    fn each_kind_of_skip_is_said_for_its_own_placements() {
        use smtlab_runner::plan::{CellEstimate, GroupEstimate, Measuring, SkipReason};
        let cell = |placement: &str, why: SkipReason| CellEstimate {
            key: smtlab_model::CellKey {
                benchmark: "w".into(),
                params: Default::default(),
                conditions: Default::default(),
                placement: placement.into(),
            },
            cost: Err(why),
            samples: (0, 0),
            likely_ns: 0,
            max_ns: 0,
        };
        let e = Estimate {
            groups: vec![GroupEstimate {
                benchmark: "w".into(),
                params: Default::default(),
                cells: vec![
                    cell("1c1t", SkipReason::Bench("no server here".into())),
                    cell("2c1t", SkipReason::UnknownBenchmark("x".into())),
                    cell("all", SkipReason::UnknownBenchmark("y".into())),
                ],
                together: false,
                apart: None,
            }],
            memory_budget_bytes: None,
            measuring: Measuring {
                interleave: true,
                repeat: 1,
                client_rule: Default::default(),
            },
        };
        let out = text(&e, Layout::plain());
        assert!(out.contains("skipped on 1c1t: no server here\n"), "{out}");
        assert!(
            out.contains("skipped on 2c1t, all: no benchmark \"x\""),
            "{out}"
        );
        assert!(out.contains(" 0/3 "), "{out}");
    }

    /// The end of a run names its longest groups first, with their share and what
    /// they bought; the rest share one row; at 80 columns no line is wider.
    #[test]
    fn a_run_ends_with_where_its_time_went() {
        use smtlab_runner::plan::{CellEstimate, GroupEstimate, Measuring};
        let key = |i: usize| smtlab_model::CellKey {
            benchmark: if i < 2 {
                "dbench".into()
            } else {
                format!("b{i}")
            },
            params: [("clients".to_string(), i.to_string())].into(),
            conditions: Default::default(),
            placement: "1c1t".into(),
        };
        let s = 1_000_000_000u64;
        let groups = (0..10)
            .map(|i| GroupEstimate {
                benchmark: key(i).benchmark,
                params: key(i).flat_params(),
                cells: vec![CellEstimate {
                    key: key(i),
                    cost: Ok(Default::default()),
                    samples: (3, 5),
                    likely_ns: 2 * s,
                    max_ns: 4 * s,
                }],
                together: false,
                apart: None,
            })
            .collect();
        let e = Estimate {
            groups,
            memory_budget_bytes: None,
            measuring: Measuring {
                interleave: true,
                repeat: 1,
                client_rule: Default::default(),
            },
        };
        let mut t = TimeSpent::new(&e);
        let mut cell = smtlab_fixtures::build::cell("b", &[], "1c1t", &[1.0, 1.1, 0.9]);
        cell.result.converged = false;
        let mut now = 0;
        let mut capped = cell.result.clone();
        capped.at_limit = Some(smtlab_model::AtLimit {
            kind: smtlab_model::LimitKind::Ceiling,
            limit: 4096.0,
            samples: 3,
        });
        for i in 0..10 {
            now += if i == 3 { 60 * s } else { s };
            let r = if i == 3 { &capped } else { &cell.result };
            t.cell_done(&key(i), now, Some(r));
        }
        let layout = Layout {
            width: Some(80),
            color: false,
        };
        let out = spent(&t, layout);
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with("time: 1m 09s, planned about 20.0 s; where it went"),
            "{out}"
        );
        let row = lines.iter().position(|l| l.starts_with("b3 ")).expect(&out);
        assert!(lines[row - 1].starts_with("Benchmark "), "{out}");
        let b3: Vec<&str> = lines[row].split_whitespace().collect();
        assert_eq!(b3, ["b3", "1m", "00s", "87%", "1", "3", "24.8%", "1"]);
        assert_eq!(
            lines[row + 1],
            "    1 of 1 cells at a limit (configured ceiling): bounds, not levels"
        );
        assert!(out.contains("clients=0"), "{out}");
        assert!(out.contains("2 more"), "{out}");
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{out}");
        assert_eq!(spent(&TimeSpent::default(), layout), "");
    }
}
