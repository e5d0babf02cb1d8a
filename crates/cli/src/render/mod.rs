//! Text rendering: pure functions from data to `String`, so output formats are tested
//! with snapshots and the commands stay thin.

pub mod advice;
pub mod bench;
pub mod compare;
pub mod corun;
pub mod counter_ratios;
pub mod load;
pub mod placements;
pub mod plan;
pub mod predict;
pub mod report;
pub mod run;
pub mod smt;
pub mod topo;

/// Every CPU, in the order given, separated by commas (`2,0,3`): where the order
/// matters, so a compact list (`0,2-3`) would hide it.
pub fn cpus_in_order(cpus: impl IntoIterator<Item = u32>) -> String {
    let cpus: Vec<String> = cpus.into_iter().map(|c| c.to_string()).collect();
    cpus.join(",")
}

// The store's deterministic run, for the snapshots of the live output.
#[cfg(test)]
#[path = "../../../store/tests/store/testdata.rs"]
#[allow(dead_code)]
pub(crate) mod testdata;

#[cfg(test)]
mod live_tests {
    //! `bench` tables and `run` lines at 80 columns and wide, from fixed cell records.
    use super::testdata;
    use smtlab_report::table::Layout;

    fn widest(text: &str) -> usize {
        text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    fn bench_table(layout: Layout) -> String {
        let r = testdata::results(1);
        let cells: Vec<_> = r
            .cells
            .iter()
            .filter(|c| c.benchmark == r.cells[0].benchmark)
            .cloned()
            .collect();
        let info = smtlab_model::BenchInfo {
            name: cells[0].benchmark.clone(),
            unit: cells[0].unit.as_str().into(),
            direction: cells[0].direction,
            group: String::new(),
            value_kind: smtlab_model::ValueKind::Rate { scale: 1e9 },
            description: String::new(),
            origin: String::new(),
            params: Vec::new(),
            main_param: None,
            report: Default::default(),
        };
        let params = smtlab_bench::Params::from_pairs(cells[0].params.clone());
        let mut out = super::bench::heading(&info, &params, layout);
        for (i, c) in cells.iter().enumerate() {
            let baseline = (i > 0).then(|| &cells[0]);
            out.push_str(&super::bench::row(c, baseline, layout));
        }
        out.push_str(&super::bench::details(&cells, layout));
        out
    }

    fn run_lines(layout: Layout) -> String {
        let r = testdata::results(1);
        let mut out = String::new();
        for c in &r.cells {
            out.push_str(&super::run::cell_line(c, layout));
            out.push('\n');
        }
        for s in &r.skipped {
            out.push_str(&super::run::skipped_line(s, layout));
            out.push('\n');
        }
        out
    }

    #[test]
    fn bench_table_fits_80_columns() {
        let text = bench_table(Layout::fixed(80));
        assert!(widest(&text) <= 80, "{text}");
        insta::assert_snapshot!("bench_80", text);
        let wide = bench_table(Layout::plain());
        assert!(
            widest(&wide) > 80,
            "the wide form keeps every column on the row"
        );
    }

    #[test]
    fn a_skip_reason_is_said_in_full_once_per_run() {
        let r = testdata::results(1);
        let first = r.skipped[0].clone();
        let mut same = first.clone();
        same.key.benchmark = "mem-write".into();
        let mut other = first.clone();
        other.reason = "another reason".into();
        for layout in [Layout::fixed(80), Layout::plain()] {
            let mut lines = super::run::SkippedLines::default();
            let full = lines.line(&first, layout);
            assert!(full.contains(&first.reason[..20]), "{full}");
            let again = lines.line(&same, layout);
            assert_eq!(again.lines().count(), 1, "{again}");
            assert!(again.starts_with("mem-write") && again.ends_with("skipped (as above)"));
            assert!(!again.contains(&first.reason[..20]), "{again}");
            assert!(widest(&again) <= 80, "{again}");
            let new = lines.line(&other, layout);
            assert!(new.contains("another reason"), "{new}");
        }
    }

    #[test]
    fn run_lines_fit_80_columns() {
        let text = run_lines(Layout::fixed(80));
        assert!(widest(&text) <= 80, "{text}");
        insta::assert_snapshot!("run_80", text);
        let wide = run_lines(Layout::plain());
        let r = testdata::results(1);
        assert_eq!(
            wide.lines().count(),
            r.cells.len() + r.skipped.len(),
            "one line per cell with --wide: {wide}"
        );
    }

    #[test]
    fn a_failed_calibration_is_said_beside_the_value() {
        let mut cell = testdata::results(1).cells.remove(0);
        let plain = super::run::cell_line(&cell, Layout::fixed(80));
        assert!(!plain.contains("calibration"), "{plain}");
        cell.result.calibration.linear = Some(false);
        cell.result.calibration.linearity_ratio = Some(0.55);
        for layout in [Layout::fixed(80), Layout::plain()] {
            let line = super::run::cell_line(&cell, layout);
            assert!(
                line.contains("calibration failed") && line.contains("0.55"),
                "{line}"
            );
        }
    }

    /// Recorded web cells loaded by two agents (`--client-hosts`): `run`'s lines and
    /// `bench`'s details show each agent's share, errors and clock, in 80 columns.
    #[test]
    fn remote_clients_show_under_their_cells_in_80_columns() {
        let r = smtlab_fixtures::remote_web_run();
        let layout = Layout::fixed(80);
        let mut run = String::new();
        for c in &r.cells {
            run.push_str(&super::run::cell_line(c, layout));
            run.push('\n');
        }
        assert!(widest(&run) <= 80, "{run}");
        assert_eq!(
            run.matches("2 agents, started within").count(),
            r.cells.len()
        );
        insta::assert_snapshot!("run_remote_80", run);
        let static_cells: Vec<_> = r
            .cells
            .iter()
            .filter(|c| c.benchmark == "web-static")
            .cloned()
            .collect();
        let details = super::bench::details(&static_cells, layout);
        assert!(widest(&details) <= 80, "{details}");
        insta::assert_snapshot!("bench_remote_details_80", details);
        // Wide: the agents on one line under the cell's.
        let wide = super::run::cell_line(&r.cells[0], Layout::plain());
        assert_eq!(wide.lines().count(), 2, "{wide}");
        assert!(wide.lines().nth(1).unwrap().contains("#0 ") && wide.contains("#1 "));
        // A cell loaded from this host has no agents line.
        let local = testdata::results(1).cells.remove(0);
        assert!(!super::run::cell_line(&local, layout).contains("agents"));
    }
}
