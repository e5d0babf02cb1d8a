//! Paper 000's 2T vs 1T-UP the paper's way, inside `compare`: one run measured on a
//! kernel built without `CONFIG_SMP` (its `1t-up-kernel` cells) and one measured on an
//! SMP kernel of the same machine (its `1c1t-up`, `1c1t` and `1c2t` cells). The cells
//! never share a key (their placements differ), so the rows of the comparison leave
//! them out; this section sets them side by side instead.
//!
//! Rules:
//! * A `1t-up-kernel` cell (by its resolved placement name) of either run is matched
//!   with the other run's cells of the same benchmark, parameters and conditions whose
//!   placement is `1c2t` (paper 000's 2T), `1c1t-up` (the hotplug 1T-UP: the other
//!   CPUs offline, the SMP kernel's locking kept) or `1c1t` (the other CPUs online and
//!   idle); the first such cell of a run counts.
//! * Each is set against the uniprocessor kernel's cell by the one verdict every output
//!   uses ([`smtlab_model::verdict::verdict`]): the ratio of the means, above 1 meaning
//!   the SMP kernel's placement is better, with Fieller's 95% interval. Two runs, so
//!   the interval holds each cell's own noise only, not what runs of one setup differ
//!   by (the rows' `between runs` figure); read a small difference with that in mind.
//! * A `1t-up-kernel` cell with none of the three beside it gives no row.

use serde::Serialize;
use smtlab_model::placement::{Named, UNIPROCESSOR_NAME, UP_KERNEL_NAME};
use smtlab_model::verdict::{Verdict, verdict};
use smtlab_model::{Direction, RunResults};

use crate::compare_sides::Side;

/// The SMP kernel's placements set beside the uniprocessor kernel's, in this order.
pub const BESIDE: [&str; 3] = [
    Named::Siblings.name(),
    UNIPROCESSOR_NAME,
    Named::OneCore.name(),
];

/// One workload's `1t-up-kernel` cell and the SMP kernel's cells beside it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpKernelRow {
    pub benchmark: String,
    pub params: std::collections::BTreeMap<String, String>,
    pub unit: String,
    pub direction: Direction,
    /// The run the `1t-up-kernel` cell is in.
    pub up_kernel_in: Side,
    /// The mean of the `1t-up-kernel` cell's samples.
    pub up_kernel: f64,
    pub beside: Vec<UpKernelPair>,
}

/// One placement of the SMP kernel against the uniprocessor kernel's cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpKernelPair {
    /// `1c2t`, `1c1t-up` or `1c1t`.
    pub placement: String,
    /// The mean of its samples.
    pub value: f64,
    /// This placement over `1t-up-kernel`, above 1 = this placement better; `None`
    /// without a ratio (a mean that is not positive).
    pub verdict: Option<Verdict>,
}

/// The rows of the section for runs `a` and `b` (see the module documentation).
pub fn up_kernel_rows(a: &RunResults, b: &RunResults) -> Vec<UpKernelRow> {
    let mut rows = rows_for(a, b, Side::A);
    rows.extend(rows_for(b, a, Side::B));
    rows
}

/// The rows of the `1t-up-kernel` cells of `up` against the cells of `smp`.
fn rows_for(up: &RunResults, smp: &RunResults, side: Side) -> Vec<UpKernelRow> {
    up.cells
        .iter()
        .filter(|c| c.placement.name == UP_KERNEL_NAME)
        .filter_map(|u| {
            let beside: Vec<UpKernelPair> = BESIDE
                .iter()
                .filter_map(|name| {
                    let c = smp
                        .cells
                        .iter()
                        .find(|c| c.same_variant(u) && c.placement.name == *name)?;
                    Some(UpKernelPair {
                        placement: name.to_string(),
                        value: c.result.summary.mean,
                        verdict: verdict(u, c),
                    })
                })
                .collect();
            (!beside.is_empty()).then(|| UpKernelRow {
                benchmark: u.benchmark.clone(),
                params: u.flat_params(),
                unit: u.unit.clone(),
                direction: u.direction,
                up_kernel_in: side,
                up_kernel: u.result.summary.mean,
                beside,
            })
        })
        .collect()
}

/// The section as text: a header line, then per workload the uniprocessor kernel's
/// mean and each SMP placement's mean and verdict; empty without rows.
pub fn up_kernel_text(rows: &[UpKernelRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n2T vs 1T-UP (paper 000): the SMP kernel's placements over the uniprocessor \
         kernel's 1t-up-kernel (mean, above 1 = better than 1t-up-kernel, 95% CI within \
         the two runs):\n",
    );
    let header = [
        "benchmark",
        "params",
        "unit",
        "placement",
        "mean",
        "over 1t-up-kernel",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .flat_map(UpKernelRow::lines)
        .map(Vec::from)
        .collect();
    out.push_str(&crate::fmt::text_table(&header, &body, &[4]));
    out
}

impl UpKernelRow {
    /// The row's lines as every output lays them out: benchmark, params, unit,
    /// placement, mean and the ratio over `1t-up-kernel`; first the `1t-up-kernel`
    /// cell (its run named, no ratio), then each placement beside it (the first three
    /// columns empty).
    pub fn lines(&self) -> Vec<[String; 6]> {
        let side = self.up_kernel_in.letter();
        let mut lines = vec![[
            self.benchmark.clone(),
            crate::fmt::params(&self.params),
            self.unit.clone(),
            format!("{UP_KERNEL_NAME} ({side})"),
            crate::fmt::num(self.up_kernel),
            String::new(),
        ]];
        lines.extend(self.beside.iter().map(|p| {
            [
                String::new(),
                String::new(),
                String::new(),
                p.placement.clone(),
                crate::fmt::num(p.value),
                p.verdict.as_ref().map_or("-".into(), crate::fmt::verdict),
            ]
        }));
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_fixtures::build::cell_of;
    use smtlab_model::CellRecord;
    use smtlab_model::stats::Significance;

    fn run_of(cells: Vec<CellRecord>) -> RunResults {
        let mut r =
            smtlab_fixtures::fleet::run(&smtlab_fixtures::fleet::FakeHost::new("h", "cpu", 1.2));
        r.cells = cells;
        r.skipped.clear();
        r
    }

    fn on(name: &str, values: &[f64]) -> CellRecord {
        let threads = if name == "1c2t" { 2 } else { 1 };
        cell_of(
            "int-ops",
            Default::default(),
            Default::default(),
            name,
            (1, threads),
            values,
        )
    }

    #[test]
    fn the_smp_kernels_placements_are_set_against_1t_up_kernel() {
        let smp = run_of(vec![
            on("1c1t", &[9.0, 9.1, 8.9]),
            on("1c1t-up", &[9.5, 9.6, 9.4]),
            on("1c2t", &[15.0, 15.2, 14.8]),
            on("2c1t", &[18.0, 18.1, 17.9]),
        ]);
        let up = run_of(vec![on("1t-up-kernel", &[10.0, 10.1, 9.9])]);
        let rows = up_kernel_rows(&smp, &up);
        let [r] = rows.as_slice() else {
            panic!("{rows:?}")
        };
        assert_eq!((r.up_kernel_in, r.up_kernel), (Side::B, 10.0));
        let names: Vec<&str> = r.beside.iter().map(|p| p.placement.as_str()).collect();
        assert_eq!(names, ["1c2t", "1c1t-up", "1c1t"]);
        let v = r.beside[0].verdict.as_ref().unwrap();
        assert!((v.speedup.ratio - 1.5).abs() < 1e-9, "{v:?}");
        assert_eq!(v.significance, Significance::Faster);
        let v = r.beside[2].verdict.as_ref().unwrap();
        assert!((v.speedup.ratio - 0.9).abs() < 1e-9, "{v:?}");
        assert_eq!(v.significance, Significance::Slower);
        // The same with the runs the other way round; the text names the side.
        assert_eq!(up_kernel_rows(&up, &smp)[0].up_kernel_in, Side::A);
        let text = up_kernel_text(&rows);
        assert!(text.contains("1t-up-kernel (B)"), "{text}");
        assert!(text.contains("1.500x"), "{text}");
    }

    #[test]
    fn no_row_without_a_cell_to_set_beside() {
        let up = run_of(vec![on("1t-up-kernel", &[10.0, 10.1, 9.9])]);
        let other = run_of(vec![on("2c1t", &[18.0, 18.1, 17.9])]);
        assert!(up_kernel_rows(&other, &up).is_empty());
        let mut params = on("1c2t", &[15.0, 15.1, 14.9]);
        params.params.insert("seed".into(), "2".into());
        assert!(up_kernel_rows(&run_of(vec![params]), &up).is_empty());
        assert_eq!(up_kernel_text(&[]), "");
    }
}
