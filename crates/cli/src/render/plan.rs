//! The plan of `smtlab run` before it measures (`--dry-run`, and the line a run starts
//! with): the runner's [`Estimate`] as a table by benchmark and a summary.

use smtlab_report::table::{Layout, Table, wrap};
use smtlab_runner::plan::{Estimate, GroupEstimate, bytes_text};

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
}
