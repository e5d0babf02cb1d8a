//! The terminal's view of how the counter ratios move between a placement and its SMT
//! partner: one line per pair under a benchmark's cells in `smtlab report`
//! (`counters 1c2t/1c1t: CPI +100.0%, IPC -50.0%, ...`), and the named events the run
//! could not count, said once.

use smtlab_model::CellRecord;
use smtlab_model::counters::cpi_stack::Latencies;
use smtlab_report::counter_ratios::{RatioGroup, record_ratios};

/// The SMT-change lines of one benchmark-and-parameters group (empty without counters
/// on both placements of a pair).
pub fn smt_change_lines(cells: &[&CellRecord], latencies: &Latencies) -> Vec<String> {
    let Some(first) = cells.first() else {
        return Vec::new();
    };
    let mut g = RatioGroup {
        benchmark: first.benchmark.clone(),
        params: first.params.clone(),
        placements: cells
            .iter()
            .filter_map(|c| record_ratios(c, latencies).map(|r| (c.placement.name.clone(), r)))
            .collect(),
        smt_changes: Vec::new(),
    };
    g.smt_changes = g.changes();
    let mut out: Vec<String> = Vec::new();
    let pairs = smtlab_report::first_seen(g.smt_changes.iter().map(|c| (&c.smt, &c.base)));
    for (smt, base) in pairs {
        let parts: Vec<String> = g
            .smt_changes
            .iter()
            .filter(|c| &c.smt == smt && &c.base == base)
            .map(|c| {
                let label = g
                    .placements
                    .iter()
                    .find_map(|(_, r)| r.get(&c.key))
                    .map_or(c.key.as_str(), |r| r.label.as_str());
                format!("{label} {:+.1}%", 100.0 * c.change)
            })
            .collect();
        out.push(format!("counters {smt}/{base}: {}", parts.join(", ")));
    }
    // How the sibling moved each top-down category, in percentage points.
    let with: Vec<_> = g.placements.iter().map(|(p, r)| (p, r)).collect();
    for line in RatioGroup::topdown_moves(&with) {
        out.push(format!("top-down {line}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_model::counters::{CountMode, CounterEvent, Reading};

    #[test]
    fn pairs_get_one_line_each_with_the_changes() {
        let mut results = crate::render::testdata::results(1);
        let mut cpi = |i: usize, cycles: u64| {
            let c = results.cells[i].counters.get_or_insert_with(|| {
                smtlab_model::counters::CellCounters::new(
                    "w",
                    smtlab_model::counters::CounterValues::new(
                        smtlab_model::counters::CounterTarget::Thread {
                            tid: 0,
                            inherit: true,
                        },
                    ),
                    None,
                )
            });
            c.values
                .set(CounterEvent::Cycles, CountMode::All, Reading::exact(cycles));
            c.values.set(
                CounterEvent::Instructions,
                CountMode::All,
                Reading::exact(1000),
            );
        };
        cpi(0, 1000);
        cpi(1, 1500);
        // Top-down shares 40/10/30/20 on 1c1t and 30/10/20/40 on 1c2t.
        for (i, shares) in [(0, [40, 10, 30, 20]), (1, [30, 10, 20, 40])] {
            let v = &mut results.cells[i].counters.as_mut().unwrap().values;
            for (name, x) in smtlab_model::counters::topdown::INTEL_PERF_METRICS
                .iter()
                .zip([100].iter().chain(&shares))
            {
                v.named
                    .push(smtlab_model::counters::NamedReading::counted(name, *x));
            }
        }
        let cells: Vec<&CellRecord> = results.cells[..2].iter().collect();
        assert_eq!(
            (
                cells[0].placement.name.as_str(),
                cells[1].placement.name.as_str()
            ),
            ("1c1t", "1c2t")
        );
        let lines = smt_change_lines(&cells, &Latencies::assumed());
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(
            lines[1],
            "top-down 1c2t vs 1c1t: retiring -10.0 pt, bad speculation +0.0 pt, \
             front-end bound -10.0 pt, back-end bound +20.0 pt"
        );
        assert!(
            lines[0].starts_with("counters 1c2t/1c1t: CPI +50.0%, IPC -33.3%"),
            "{}",
            lines[0]
        );
    }
}
