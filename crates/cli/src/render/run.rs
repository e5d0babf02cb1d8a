//! One line per finished cell of `smtlab run`, printed as the cell finishes.

use smtlab_model::{CellRecord, SkippedCell};
use smtlab_report::fmt::{num, shorten};
use smtlab_report::table::{Columns, Layout, Style, paint, wrap};

pub(super) fn params_text(params: &std::collections::BTreeMap<String, String>) -> String {
    smtlab_report::fmt::param_words(params).join(" ")
}

/// Benchmark, placement, parameters, then what happened (`--wide`).
const COLUMNS: Columns<3> = Columns([18, 13, 28]);

/// The same in 80 columns: names and parameters cut with `…`, the figures whole.
const NARROW: Columns<3> = Columns([16, 6, 16]);

/// Below this many columns the lines take the narrow form.
const WIDE_WIDTH: usize = 120;

fn narrow(layout: Layout) -> bool {
    layout.width.is_some_and(|w| w < WIDE_WIDTH)
}

/// The cell's line; in narrow form what does not fit (rounds, convergence, an
/// unsteady machine) follows on an indented line of its own. No trailing newline.
pub fn cell_line(cell: &CellRecord, layout: Layout) -> String {
    let s = &cell.result.summary;
    let rounds = match cell.result.rounds.len() {
        0 | 1 => None,
        n => Some(format!("in {n} rounds")),
    };
    let not_converged = (!cell.result.met_target()).then(|| "not converged".to_string());
    let unsteady = cell
        .result
        .unsteady()
        .map(|d| format!("unsteady: moved {:.1}% during the cell", 100.0 * d));
    let disturbed = cell.result.disturbed_reason();
    let agents_lost = cell.result.agents_lost_reason();
    // Measurement rule 2: a value whose time did not grow with its iterations (after
    // the calibration was redone) is not a plain headline.
    let calibration = (cell.result.calibration.linear == Some(false)).then(|| {
        let ratio = cell.result.calibration.linearity_ratio.unwrap_or(f64::NAN);
        format!("calibration failed: time(2n) = {ratio:.2} x 2 time(n), value not trusted")
    });
    let limit = smtlab_report::fmt::at_limit(cell);
    let fork_size = smtlab_report::fmt::fork_size(cell);
    let params = params_text(&cell.flat_params());
    let flags = [
        limit,
        rounds,
        not_converged,
        unsteady,
        disturbed,
        agents_lost,
        calibration,
        fork_size,
    ];
    if narrow(layout) {
        let what = if s.n < 2 {
            format!("median {} {} n={}", num(s.median), cell.unit, s.n)
        } else {
            format!(
                "median {} {} +-{:.1}% n={}",
                num(s.median),
                cell.unit,
                100.0 * s.ci95_rel,
                s.n
            )
        };
        let line = NARROW.line(&[
            &shorten(&cell.benchmark, 16),
            &shorten(&cell.placement_spec, 6),
            &shorten(&params, 16),
            &what,
        ]);
        let mut out = line.trim_end_matches('\n').to_string();
        // Parameters cut on the line are given whole underneath.
        let full_params = (params.chars().count() > 16).then(|| params.clone());
        let flags: Vec<String> = [full_params].into_iter().chain(flags).flatten().collect();
        if !flags.is_empty() {
            let detail = wrap(&format!("  {}", flags.join(", ")), layout);
            out.push('\n');
            out.push_str(&paint(
                detail.trim_end_matches('\n'),
                Style::Dim,
                layout.color,
            ));
        }
        push_agents(&mut out, cell, layout);
        return out;
    }
    let what = format!(
        "median {} {} (mean {}{})",
        num(s.median),
        cell.unit,
        if s.n < 2 {
            format!("{} n={}, no interval", num(s.mean), s.n)
        } else {
            format!("{} +- {:.1}%, n={}", num(s.mean), 100.0 * s.ci95_rel, s.n)
        },
        // The rounds (the second flag) read on from the interval: `in 3 rounds`.
        flags
            .into_iter()
            .enumerate()
            .filter_map(|(i, f)| Some(format!("{}{}", if i == 1 { " " } else { ", " }, f?)))
            .collect::<String>()
    );
    let line = COLUMNS.line(&[&cell.benchmark, &cell.placement_spec, &params, &what]);
    let mut out = line.trim_end_matches('\n').to_string();
    push_agents(&mut out, cell, layout);
    out
}

/// The cell's remote load agents, on lines of their own under the cell's line.
fn push_agents(out: &mut String, cell: &CellRecord, layout: Layout) {
    if let Some(agents) = super::load::cell_agents(cell, layout) {
        out.push('\n');
        out.push_str(&paint(
            agents.trim_end_matches('\n'),
            Style::Dim,
            layout.color,
        ));
    }
}

pub fn skipped_line(s: &SkippedCell, layout: Layout) -> String {
    let params = params_text(&s.key.flat_params());
    let what = format!("skipped: {}", s.reason);
    if narrow(layout) {
        let line = NARROW.line(&[
            &shorten(&s.key.benchmark, 16),
            &shorten(&s.key.placement, 6),
            &shorten(&params, 16),
            "skipped",
        ]);
        let reason = wrap(&format!("  {}", s.reason), layout);
        return format!(
            "{}\n{}",
            line.trim_end_matches('\n'),
            paint(reason.trim_end_matches('\n'), Style::Dim, layout.color)
        );
    }
    let line = COLUMNS.line(&[&s.key.benchmark, &s.key.placement, &params, &what]);
    line.trim_end_matches('\n').to_string()
}

/// The skipped cells' lines of one run: a reason in full the first time, and a cell
/// skipped for the very same reason later on one line, `skipped (as above)`. On a small
/// machine every server workload is skipped on the same placements for want of a client
/// CPU, and the same three lines thirty times over hide the figures.
#[derive(Debug, Default)]
pub struct SkippedLines {
    shown: std::collections::HashSet<String>,
}

impl SkippedLines {
    pub fn line(&mut self, s: &SkippedCell, layout: Layout) -> String {
        if self.shown.insert(s.reason.clone()) {
            return skipped_line(s, layout);
        }
        let params = params_text(&s.key.flat_params());
        let (columns, benchmark, placement, params) = if narrow(layout) {
            let cut = (shorten(&s.key.benchmark, 16), shorten(&s.key.placement, 6));
            (NARROW, cut.0, cut.1, shorten(&params, 16))
        } else {
            (
                COLUMNS,
                s.key.benchmark.clone(),
                s.key.placement.clone(),
                params,
            )
        };
        let line = columns.line(&[&benchmark, &placement, &params, "skipped (as above)"]);
        line.trim_end_matches('\n').to_string()
    }
}
