//! A multiprogrammed mix's figures (paper 003 section 2.3): each program's progress in
//! the mix (its throughput there over its throughput alone) and the weighted speedup
//! (their sum, the cell's value), read from the metrics the `mix` workload writes
//! ([`smtlab_model::metrics::mix`]). The terminal line and the HTML section both come
//! from [`programs`], so they agree.

use maud::html;
use smtlab_model::metrics::mix as keys;
use smtlab_model::{CellRecord, ReportSection, RunResults};

use crate::fmt::{mean_ci, num, params};
use crate::html_workloads::cells::metric;

/// One program of a mix cell, its figures averaged over the cell's samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub index: usize,
    pub name: String,
    pub cpu: Option<u32>,
    /// Mean in-mix / alone throughput.
    pub progress: f64,
    /// Mean value in the mix and alone, in the program's own unit.
    pub in_mix: Option<f64>,
    pub alone: Option<f64>,
}

/// The programs of a mix cell in the order given; empty for any other cell.
pub fn programs(cell: &CellRecord) -> Vec<Program> {
    let mut names: Vec<(usize, String)> = Vec::new();
    for s in &cell.result.samples {
        for k in s.metrics.keys() {
            if let Some((i, name, _)) = keys::parse(k)
                && !names.iter().any(|(j, _)| *j == i)
            {
                names.push((i, name.to_string()));
            }
        }
    }
    names.sort();
    let mean = |i: usize, name: &str, field: &str| metric(cell, &keys::key(i, name, field));
    names
        .into_iter()
        .filter_map(|(i, name)| {
            Some(Program {
                index: i,
                progress: mean(i, &name, keys::PROGRESS)?,
                in_mix: mean(i, &name, keys::IN_MIX),
                alone: mean(i, &name, keys::ALONE),
                cpu: mean(i, &name, keys::CPU).map(|c| c as u32),
                name,
            })
        })
        .collect()
}

/// One line per mix cell for the terminal: each program's progress and the weighted
/// speedup; `None` for other cells.
pub fn line(cell: &CellRecord) -> Option<String> {
    let ps = programs(cell);
    if ps.is_empty() {
        return None;
    }
    let each: Vec<String> = ps
        .iter()
        .map(|p| {
            let cpu = p.cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default();
            format!("{}{cpu} {}", p.name, num(p.progress))
        })
        .collect();
    Some(format!(
        "progress in the mix (alone = 1): {}; weighted speedup {} of {} programs",
        each.join(", "),
        mean_ci(&cell.result.summary),
        ps.len()
    ))
}

/// The `mix` section: per parameter set, a table of each program's progress per
/// placement, and the weighted speedup.
pub(crate) fn section(r: &RunResults) -> Option<maud::Markup> {
    let cells = crate::html_workloads::cells::cells_in(r, |s| *s == ReportSection::Mix);
    if cells.is_empty() {
        return None;
    }
    // Groups of cells with the same programs (and other parameters).
    let groups = crate::grouped(cells.iter().copied(), |c| params(&c.flat_params()));
    Some(html! {
        section id="mix" {
            h2 { "Multiprogrammed mix (Redstone 2000, section 2.3)" }
            p {
                "Programs run together on the placement, program i on its CPU i mod n, then \
                 each alone for as long. Progress is a program's throughput in the mix over \
                 its throughput alone (1: the mix cost it nothing); the weighted speedup is \
                 their sum (mean ± 95% CI over samples): the number of programs when \
                 sharing costs nothing, 1 when they only take turns."
            }
            @for (label, group) in &groups {
                h3 { (label) }
                table {
                    tr {
                        th { "program" }
                        @for c in group { th { (c.placement.name) } }
                    }
                    @for prog in programs(group[0]) {
                        tr {
                            td { (prog.name) }
                            @for c in group {
                                @let found = programs(c).into_iter().find(|q| q.index == prog.index);
                                @match found {
                                    Some(q) => td {
                                        (num(q.progress))
                                        @if let (Some(m), Some(a)) = (q.in_mix, q.alone) {
                                            br;
                                            span class="sub" { (num(m)) " in the mix, " (num(a)) " alone" }
                                        }
                                    },
                                    None => td class="muted" { "-" },
                                }
                            }
                        }
                    }
                    tr {
                        th { "weighted speedup" }
                        @for c in group { td { (mean_ci(&c.result.summary)) } }
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_model::SampleRecord;

    fn sample(progress: [f64; 2]) -> SampleRecord {
        let mut metrics = std::collections::BTreeMap::new();
        for (i, name) in ["int-ops", "gz.c"].iter().enumerate() {
            metrics.insert(keys::key(i, name, keys::PROGRESS), progress[i]);
            metrics.insert(keys::key(i, name, keys::IN_MIX), 10.0 * progress[i]);
            metrics.insert(keys::key(i, name, keys::ALONE), 10.0);
            metrics.insert(keys::key(i, name, keys::CPU), i as f64);
        }
        SampleRecord {
            value: progress[0] + progress[1],
            iterations: 1,
            elapsed_ns: 1,
            work: 1.0,
            cpu_ns: None,
            start_spread_ns: None,
            cpus: vec![0, 1],
            metrics,
        }
    }

    #[test]
    fn programs_average_their_samples_in_the_order_given() {
        let samples = vec![sample([0.5, 0.6]), sample([0.7, 0.6])];
        let cell = CellRecord {
            benchmark: "mix".into(),
            group: "mix".into(),
            unit: "x".into(),
            direction: smtlab_model::Direction::Higher,
            params: Default::default(),
            conditions: Default::default(),
            placement_spec: "1c2t".into(),
            placement: crate::testutil::placement("1c2t", "1c2t", 1, 2),
            result: crate::testutil::result(samples, &[1.1, 1.3]),
            counters: None,
        };
        let ps = programs(&cell);
        assert_eq!(ps.len(), 2);
        assert_eq!(
            (ps[0].name.as_str(), ps[1].name.as_str()),
            ("int-ops", "gz.c")
        );
        assert!((ps[0].progress - 0.6).abs() < 1e-12);
        assert_eq!(ps[1].cpu, Some(1));
        assert_eq!(ps[1].in_mix, Some(6.0));
        let l = line(&cell).unwrap();
        assert!(
            l.contains("int-ops on CPU 0 0.6") && l.contains("of 2 programs"),
            "{l}"
        );
    }
}
