//! Where a run's time went, and what it bought: per group of cells (one benchmark and
//! parameter set, its placements), the wall time from the end of the group before to the
//! end of its last cell (set-up, calibration, warm-up and samples), beside the plan's,
//! and what the group measured in it (cells, samples, the widest 95% interval, cells
//! not converged). A run says it at its end, so a user who wants a shorter suite knows
//! which workloads its time goes to and what each of them gives back.

use std::collections::BTreeMap;

use smtlab_model::{CellKey, CellResult};

use crate::plan::Estimate;

/// One group's time and what it bought.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSpent {
    /// A cell of the group (its benchmark, parameters and conditions).
    pub key: CellKey,
    /// The plan's likely time of the group's cells.
    pub planned_ns: u64,
    /// Wall time from the end of the group before to the end of its last cell.
    pub spent_ns: u64,
    pub measured: usize,
    pub skipped: usize,
    pub samples: usize,
    /// The widest relative 95% half-width among its measured cells.
    pub widest_ci95_rel: Option<f64>,
    pub not_converged: usize,
    /// Measured cells whose figure reached a limit of the measurement (a bound, not a
    /// level), with the first one's kind of limit.
    pub at_limit: usize,
    pub limit_kind: Option<smtlab_model::LimitKind>,
}

/// The groups of a run in the order they were measured.
#[derive(Debug, Clone, Default)]
pub struct TimeSpent {
    groups: Vec<GroupSpent>,
    /// When the last cell ended, after the start.
    last_end_ns: u64,
}

impl TimeSpent {
    /// The plan's groups with their planned time and nothing spent yet.
    pub fn new(estimate: &Estimate) -> Self {
        let groups = estimate
            .groups
            .iter()
            .filter_map(|g| {
                Some(GroupSpent {
                    planned_ns: g.cells.iter().map(|c| c.likely_ns).sum(),
                    ..GroupSpent::empty(g.cells.first()?.key.clone())
                })
            })
            .collect();
        TimeSpent {
            groups,
            last_end_ns: 0,
        }
    }

    /// `key` ended `end_ns` after the start: measured (`Some`) or skipped. The time
    /// since the cell before goes to its group; a cell outside the plan gets a group of
    /// its own, planned at nothing.
    pub fn cell_done(&mut self, key: &CellKey, end_ns: u64, result: Option<&CellResult>) {
        let i = match self.groups.iter().position(|g| g.key.same_variant(key)) {
            Some(i) => i,
            None => {
                self.groups.push(GroupSpent::empty(key.clone()));
                self.groups.len() - 1
            }
        };
        let g = &mut self.groups[i];
        g.spent_ns += end_ns.saturating_sub(self.last_end_ns);
        self.last_end_ns = self.last_end_ns.max(end_ns);
        let Some(r) = result else {
            g.skipped += 1;
            return;
        };
        g.measured += 1;
        g.samples += r.summary.n;
        g.not_converged += usize::from(!r.converged);
        if let Some(l) = r.limit() {
            g.at_limit += 1;
            g.limit_kind.get_or_insert(l.kind);
        }
        let ci = r.summary.ci95_rel;
        if ci.is_finite() {
            g.widest_ci95_rel = Some(g.widest_ci95_rel.map_or(ci, |w| w.max(ci)));
        }
    }

    /// The groups that took time, the longest first.
    pub fn by_time(&self) -> Vec<&GroupSpent> {
        let mut v: Vec<&GroupSpent> = self.groups.iter().filter(|g| g.spent_ns > 0).collect();
        v.sort_by_key(|g| std::cmp::Reverse(g.spent_ns));
        v
    }

    /// The whole time spent and the whole plan.
    pub fn totals_ns(&self) -> (u64, u64) {
        let spent = self.groups.iter().map(|g| g.spent_ns).sum();
        (spent, self.groups.iter().map(|g| g.planned_ns).sum())
    }

    /// The parameters that tell `g` apart from the other groups of its benchmark
    /// (`clients=20`): all of them would bury the name under values every group shares.
    pub fn telling_params(&self, g: &GroupSpent) -> BTreeMap<String, String> {
        let others: Vec<BTreeMap<String, String>> = self
            .groups
            .iter()
            .filter(|o| o.key.benchmark == g.key.benchmark)
            .map(|o| o.key.flat_params())
            .collect();
        smtlab_model::run::telling_params(&g.key.flat_params(), &others)
    }
}

impl GroupSpent {
    fn empty(key: CellKey) -> Self {
        GroupSpent {
            key,
            planned_ns: 0,
            spent_ns: 0,
            measured: 0,
            skipped: 0,
            samples: 0,
            widest_ci95_rel: None,
            not_converged: 0,
            at_limit: 0,
            limit_kind: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{CellEstimate, GroupEstimate, Measuring};

    fn key(bench: &str, clients: &str, placement: &str) -> CellKey {
        CellKey {
            benchmark: bench.into(),
            params: [("clients".to_string(), clients.to_string())].into(),
            conditions: Default::default(),
            placement: placement.into(),
        }
    }

    fn group(keys: &[CellKey], likely_s: u64) -> GroupEstimate {
        GroupEstimate {
            benchmark: keys[0].benchmark.clone(),
            params: keys[0].flat_params(),
            cells: keys
                .iter()
                .map(|k| CellEstimate {
                    key: k.clone(),
                    cost: Ok(Default::default()),
                    samples: (3, 5),
                    likely_ns: likely_s * 1_000_000_000,
                    max_ns: 2 * likely_s * 1_000_000_000,
                })
                .collect(),
            together: true,
            apart: None,
        }
    }

    fn result(samples: usize, ci95_rel: f64, converged: bool) -> CellResult {
        let c = smtlab_fixtures::build::cell("b", &[], "1c1t", &vec![1.0; samples]);
        let mut r = c.result;
        r.summary.ci95_rel = ci95_rel;
        r.converged = converged;
        r
    }

    #[test]
    fn each_group_gets_the_time_since_the_group_before_and_what_it_measured() {
        let a = [key("dbench", "20", "1c1t"), key("dbench", "20", "2c1t")];
        let b = [key("dbench", "60", "1c1t"), key("dbench", "60", "2c1t")];
        let estimate = Estimate {
            groups: vec![group(&a, 5), group(&b, 10)],
            memory_budget_bytes: None,
            measuring: Measuring {
                interleave: true,
                repeat: 1,
                client_rule: Default::default(),
            },
        };
        let mut t = TimeSpent::new(&estimate);
        let s = 1_000_000_000;
        t.cell_done(&a[0], 9 * s, Some(&result(5, 0.02, true)));
        t.cell_done(&a[1], 12 * s, Some(&result(7, 0.04, false)));
        t.cell_done(&b[0], 30 * s, Some(&result(5, 0.01, true)));
        t.cell_done(&b[1], 30 * s, None);
        let groups = t.by_time();
        assert_eq!(groups.len(), 2);
        let (long, short) = (groups[0], groups[1]);
        assert_eq!(long.key.params["clients"], "60");
        assert_eq!((long.spent_ns, long.planned_ns), (18 * s, 20 * s));
        assert_eq!((long.measured, long.skipped), (1, 1));
        assert_eq!((short.spent_ns, short.planned_ns), (12 * s, 10 * s));
        assert_eq!((short.samples, short.not_converged), (12, 1));
        assert_eq!(short.widest_ci95_rel, Some(0.04));
        assert_eq!(t.totals_ns(), (30 * s, 30 * s));
        assert_eq!(
            t.telling_params(short),
            [("clients".to_string(), "20".to_string())].into()
        );
        // A cell the plan did not hold is a group of its own, planned at nothing.
        t.cell_done(
            &key("int-ops", "0", "1c1t"),
            31 * s,
            Some(&result(3, 0.01, true)),
        );
        let extra = t
            .by_time()
            .into_iter()
            .find(|g| g.key.benchmark == "int-ops");
        assert_eq!(extra.map(|g| (g.spent_ns, g.planned_ns)), Some((s, 0)));
        assert!(t.telling_params(extra.unwrap()).is_empty());
    }
}
