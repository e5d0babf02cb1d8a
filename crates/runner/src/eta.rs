//! The time left of a run while it measures: the plan's per-cell estimates
//! ([`crate::plan::Estimate`]) for the cells still to come, scaled by how the cells
//! measured so far compared with their own estimates. A machine that runs everything
//! 30% slower than planned is then known as such after its first cells, and the time
//! left follows it; before enough is done, the plan's own figure counts more.

use std::collections::HashMap;

use smtlab_model::CellKey;

use crate::plan::Estimate;

/// The share of the plan's time after which the measured pace counts as much as the
/// plan: with a tenth of the plan done, measured and planned weigh alike; with a third,
/// the measured pace counts more than three times as much.
const PRIOR_SHARE: f64 = 0.1;

/// The time left of a run, updated as its cells end.
#[derive(Debug, Clone)]
pub struct Eta {
    /// Each planned cell's expected time (its rounds and setup), by key.
    planned_ns: HashMap<CellKey, u64>,
    total_ns: u64,
    /// The planned time of the cells ended so far.
    done_planned_ns: u64,
    /// Wall time from the start to the last cell that ended.
    done_elapsed_ns: u64,
}

impl Eta {
    /// From the plan's estimate of the cells still to measure.
    pub fn new(estimate: &Estimate) -> Self {
        let planned_ns: HashMap<CellKey, u64> = estimate
            .groups
            .iter()
            .flat_map(|g| g.cells.iter().map(|c| (c.key.clone(), c.likely_ns)))
            .collect();
        let total_ns = planned_ns.values().sum();
        Eta {
            planned_ns,
            total_ns,
            done_planned_ns: 0,
            done_elapsed_ns: 0,
        }
    }

    /// `key` ended (measured or skipped) `elapsed_ns` after the run started. A key the
    /// plan does not hold (a cell a command adds while it measures) counts no planned
    /// time, so the pace it costs shows in the cells after it.
    pub fn cell_done(&mut self, key: &CellKey, elapsed_ns: u64) {
        if let Some(ns) = self.planned_ns.remove(key) {
            self.done_planned_ns += ns;
        }
        self.done_elapsed_ns = self.done_elapsed_ns.max(elapsed_ns);
    }

    /// Measured time over planned time so far, weighed against the plan's own 1.0 by
    /// how much of the plan is done (see [`PRIOR_SHARE`]).
    pub fn pace(&self) -> f64 {
        let prior = (self.total_ns as f64 * PRIOR_SHARE).max(1.0);
        (self.done_elapsed_ns as f64 + prior) / (self.done_planned_ns as f64 + prior)
    }

    /// The time left `now_ns` after the start: the plan's time of the cells to come,
    /// at the pace measured so far, less what has passed since the last cell ended.
    pub fn remaining_ns(&self, now_ns: u64) -> u64 {
        let left = self.total_ns.saturating_sub(self.done_planned_ns) as f64 * self.pace();
        let since = now_ns.saturating_sub(self.done_elapsed_ns) as f64;
        (left - since).max(0.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{CellEstimate, GroupEstimate, Measuring};

    fn key(i: usize) -> CellKey {
        CellKey {
            benchmark: format!("b{i}"),
            params: Default::default(),
            conditions: Default::default(),
            placement: "1c1t".into(),
        }
    }

    /// A plan of `n` cells of 1 s each.
    fn plan(n: usize) -> Estimate {
        let cells = (0..n)
            .map(|i| CellEstimate {
                key: key(i),
                cost: Ok(Default::default()),
                samples: (3, 5),
                likely_ns: 1_000_000_000,
                max_ns: 2_000_000_000,
            })
            .collect();
        Estimate {
            groups: vec![GroupEstimate {
                benchmark: "b".into(),
                params: Default::default(),
                cells,
                together: false,
                apart: None,
            }],
            memory_budget_bytes: None,
            measuring: Measuring {
                interleave: false,
                repeat: 1,
                client_rule: Default::default(),
            },
        }
    }

    #[test]
    fn before_any_cell_the_plan_is_the_estimate_counting_down() {
        let eta = Eta::new(&plan(10));
        assert_eq!(eta.remaining_ns(0), 10_000_000_000);
        assert_eq!(eta.remaining_ns(4_000_000_000), 6_000_000_000);
        assert_eq!(eta.remaining_ns(20_000_000_000), 0);
    }

    /// A machine 1.6 times slower than the plan: from a third of the way on, the time
    /// left is within 25% of the truth.
    #[test]
    fn the_pace_of_the_cells_done_scales_the_rest() {
        let n = 30;
        let mut eta = Eta::new(&plan(n));
        let cell_ns = 1_600_000_000u64;
        let truth = n as u64 * cell_ns;
        for i in 0..n {
            let now = (i as u64 + 1) * cell_ns;
            eta.cell_done(&key(i), now);
            let left = eta.remaining_ns(now) as f64;
            let true_left = (truth - now) as f64;
            if i + 1 >= n / 3 && i + 1 < n {
                let err = (left - true_left).abs() / true_left;
                assert!(err <= 0.25, "cell {i}: {left} left, truly {true_left}");
            }
        }
        assert_eq!(eta.remaining_ns(truth), 0);
        // Left alone, the plan alone would be off by 38% at a third of the way.
        let plan_only = (n - n / 3) as f64 * 1e9;
        let true_left = (truth - (n / 3) as u64 * cell_ns) as f64;
        assert!((plan_only - true_left).abs() / true_left > 0.25);
    }

    #[test]
    fn a_cell_outside_the_plan_adds_no_planned_time() {
        let mut eta = Eta::new(&plan(2));
        let mut other = key(0);
        other.placement = "2c1t".into();
        eta.cell_done(&other, 500_000_000);
        eta.cell_done(&key(0), 1_000_000_000);
        eta.cell_done(&key(0), 1_000_000_000);
        assert_eq!(eta.done_planned_ns, 1_000_000_000);
    }
}
