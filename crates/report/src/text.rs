//! Plain-language verdicts on what SMT gives, as `exec` and `bench` print them: which
//! measured cells form an SMT pair (`1c2t` over `1c1t`, `2c2t` over `2c1t`, or one
//! placement with SMT on over SMT off), the one speed-up of each pair
//! ([`smtlab_model::verdict::verdict`], written by [`crate::fmt::verdict`] and
//! [`crate::fmt::gain`], as the report, the Markdown table, the results JSON and
//! compare write it), and the gain in the words its 95% interval allows (`unsteady`
//! where a cell would not repeat). An SMT pair whose SMT side ran one thread per core
//! (a single-threaded benchmark: the sibling idle) gets no yield, only a line saying so. A pair whose SMT side could not be
//! measured gets one line saying so and no number.

use std::collections::BTreeMap;

use smtlab_model::CellRecord;
use smtlab_model::verdict::{PairKind, Verdict, idle_sibling, verdict};

use crate::fmt::{gain as gain_text, verdict as ratio_text};

/// The placement pairs whose ratio is what SMT gives: the second is the first with each
/// core's sibling busy too.
const SMT_PAIRS: [PairKind; 2] = [PairKind::SmtYield, PairKind::DualCoreSmtGain];

/// What a pair of placements among `cells` (names as resolved) says.
enum Pair {
    /// The one verdict of `second` over `first`.
    Measured(Verdict),
    /// The SMT side ran one thread per core: its siblings idle, the same work twice.
    IdleSibling,
}

fn pair(cells: &[&CellRecord], kind: PairKind) -> Option<Pair> {
    let (base, other) = kind.placements();
    let find = |name: &str| cells.iter().find(|c| c.placement.name == name);
    let (b, o) = (find(base)?, find(other)?);
    if o.placement.threads_per_core > b.placement.threads_per_core && idle_sibling(o) {
        return Some(Pair::IdleSibling);
    }
    verdict(b, o).map(Pair::Measured)
}

/// The lines for a pair of [`SMT_PAIRS`]; `subject` is what was measured ("this
/// command", a benchmark's name).
fn pair_lines(kind: PairKind, p: &Pair, subject: &str) -> Vec<String> {
    let (base, smt) = kind.placements();
    let name = kind.name();
    let v = match p {
        Pair::IdleSibling => {
            return vec![format!(
                "{name} ({smt}/{base}): none: {subject} is single-threaded, so placement does \
                 not change the work ({smt} = {base} with an idle sibling)"
            )];
        }
        Pair::Measured(v) => v,
    };
    if kind == PairKind::SmtYield {
        vec![
            format!("{name} ({smt}/{base}): {}", ratio_text(v)),
            format!("SMT gives {} for {subject} on this machine", gain_text(v)),
        ]
    } else {
        vec![format!(
            "{name} ({smt}/{base}): {}: {}",
            ratio_text(v),
            gain_text(v)
        )]
    }
}

/// `exec`'s verdict on one command's cells; `smt` says whether this machine has SMT at
/// all (without it, 2c1t vs 1c1t is all there is).
pub fn command(cells: &[CellRecord], smt: bool) -> Vec<String> {
    let subject = "this command";
    let cells: Vec<&CellRecord> = cells.iter().collect();
    let mut out = Vec::new();
    let [single, dual] = SMT_PAIRS;
    if let Some(r) = pair(&cells, single) {
        out.extend(pair_lines(single, &r, subject));
    } else if let Some(Pair::Measured(r)) = pair(&cells, PairKind::SecondCore) {
        // The same words as `advise`'s answer: "2 cores vs 1", said once; the note
        // before the run already said that this machine has no SMT.
        out.push(format!("2 cores vs 1 (2c1t/1c1t): {}", ratio_text(&r)));
        let line = format!("2 cores give {} for {subject}", gain_text(&r));
        out.push(if smt {
            format!("{line} (add 1c2t for the SMT yield)")
        } else {
            format!("{line} on this machine")
        });
    }
    if let Some(r) = pair(&cells, dual) {
        out.extend(pair_lines(dual, &r, subject));
    }
    out
}

/// `bench`'s verdicts: for every benchmark and parameter set, its SMT pairs; for every
/// placement measured with SMT off and on (`--smt off,on`), on over off. Cells without a
/// partner give nothing. With more than one benchmark or parameter set, each one's lines
/// follow its name.
pub fn bench(cells: &[CellRecord]) -> Vec<String> {
    // (name, lines) in the order the cells came.
    let mut blocks: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |name: String, lines: Vec<String>| match blocks.iter_mut().find(|b| b.0 == name) {
        Some(b) => b.1.extend(lines),
        None => blocks.push((name, lines)),
    };
    for (_, group) in crate::grouped(cells, crate::yields::variant) {
        let c = group[0];
        let name = subject(c, &c.flat_params(), cells);
        for kind in SMT_PAIRS {
            if let Some(r) = pair(&group, kind) {
                add(name.clone(), pair_lines(kind, &r, &name));
            }
        }
    }
    let (rows, _) = crate::smt_states::rows(cells);
    for row in rows {
        let params = row.off.conditions.without_smt().flatten(&row.off.params);
        let name = subject(row.off, &params, cells);
        add(
            name,
            vec![format!(
                "SMT on / off ({}): {}: {}",
                row.off.placement.name,
                ratio_text(&row.verdict),
                gain_text(&row.verdict)
            )],
        );
    }
    if blocks.len() == 1 {
        return blocks.pop().map(|b| b.1).unwrap_or_default();
    }
    let mut out = Vec::new();
    for (name, lines) in blocks {
        out.push(format!("{name}:"));
        out.extend(lines.into_iter().map(|l| format!("  {l}")));
    }
    out
}

/// `cell`'s benchmark with those of `params` whose values tell it apart from the other
/// cells of the same benchmark (`web-static server=cmd`): the whole parameter set
/// would bury the name under the values every cell shares.
pub(crate) fn subject(
    cell: &CellRecord,
    params: &BTreeMap<String, String>,
    cells: &[CellRecord],
) -> String {
    let others: Vec<BTreeMap<String, String>> = cells
        .iter()
        .filter(|o| o.benchmark == cell.benchmark)
        .map(CellRecord::flat_params)
        .collect();
    let differing: Vec<String> = smtlab_model::run::telling_params(params, &others)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if differing.is_empty() {
        cell.benchmark.clone()
    } else {
        format!("{} {}", cell.benchmark, differing.join(" "))
    }
}

/// The one line for SMT placements that were asked for but cannot be measured on this
/// machine: no yield, and no number in its place.
pub fn unmeasured(placements: &[String], control: Option<&str>) -> String {
    let (list, verb) = match placements {
        [one] => (one.clone(), "was"),
        [rest @ .., last] => (format!("{} and {last}", rest.join(", ")), "were"),
        [] => (String::new(), "was"),
    };
    format!(
        "no SMT yield: SMT is not visible on this machine (smt/control: {}), so {list} {verb} not measured",
        control.unwrap_or("absent")
    )
}

#[cfg(test)]
mod tests {
    use smtlab_model::keys::SmtState;
    use smtlab_model::stats::{Ratio, Significance};

    use super::*;

    use smtlab_fixtures::build::cell;

    /// A figure at web-capacity's ceiling (`max_conns`) is a bound: its ratio to
    /// another cell is no speed-up, whatever the interval says, and it is named.
    #[test]
    fn a_figure_at_a_limit_makes_no_speed_up() {
        let base = cell("web-capacity", &[], "1c1t", &[40.0, 41.0, 42.0]);
        let mut capped = cell("web-capacity", &[], "2c1t", &[64.0, 64.0, 64.0]);
        let steady = verdict(&base, &capped).unwrap();
        assert_eq!(steady.significance, Significance::Faster);
        let at = |v: f64| {
            let mut metrics = BTreeMap::new();
            metrics.insert(smtlab_model::metrics::limit::CEILING.to_string(), v);
            smtlab_model::SampleRecord {
                value: v,
                iterations: 1,
                elapsed_ns: 1,
                work: v,
                cpu_ns: None,
                start_spread_ns: None,
                cpus: Vec::new(),
                metrics,
            }
        };
        capped.result =
            smtlab_fixtures::build::converged_result(vec![at(64.0); 3], &[64.0, 64.0, 64.0]);
        let v = verdict(&base, &capped).unwrap();
        assert_eq!(v.significance, Significance::AtLimit);
        assert_eq!(v.significance.significant(), None);
        let text = crate::fmt::verdict(&v);
        assert!(
            text.contains("at a limit (2c1t: at least 64 (configured ceiling))"),
            "{text}"
        );
        assert!(
            gain_text(&v).ends_with("at a limit (2c1t: at least 64 (configured ceiling))"),
            "{}",
            gain_text(&v)
        );
        // Either side at its limit: the other way round too.
        let v = verdict(&capped, &base).unwrap();
        assert_eq!(v.significance, Significance::AtLimit);
    }

    const BASE: [f64; 3] = [99.0, 100.0, 101.0];
    const FASTER: [f64; 3] = [129.0, 130.0, 131.0];

    fn expected(base: &[f64], smt: &[f64]) -> Verdict {
        verdict(
            &cell("int-ops", &[], "1c1t", base),
            &cell("int-ops", &[], "1c2t", smt),
        )
        .unwrap()
    }

    fn with_ratio(r: Ratio) -> Verdict {
        Verdict {
            significance: r.significance(),
            speedup: r,
            unsteady: None,
            at_limit: None,
            p_value: None,
        }
    }

    #[test]
    fn gains_say_when_they_are_not_significant() {
        let r = Ratio {
            ratio: 1.18,
            ci95_low: Some(1.15),
            ci95_high: Some(1.21),
            ci95_half_width_delta: Some(0.03),
            df: Some(8.0),
        };
        assert_eq!(gain_text(&with_ratio(r)), "+18% [+15%, +21%]");
        let r = Ratio {
            ratio: 1.004,
            ci95_low: Some(0.99),
            ci95_high: Some(1.02),
            ci95_half_width_delta: Some(0.012),
            df: Some(8.0),
        };
        assert_eq!(
            gain_text(&with_ratio(r)),
            "+0.4% [-1.0%, +2.0%] not significant at 95%"
        );
        let r = Ratio {
            ratio: 1.05,
            ci95_low: None,
            ci95_high: None,
            ci95_half_width_delta: None,
            df: None,
        };
        assert_eq!(gain_text(&with_ratio(r)), "+5.0% (no interval)");
    }

    #[test]
    fn a_pair_of_one_benchmark_gets_the_yield_and_the_verdict() {
        let cells = vec![
            cell("int-ops", &[("threads", "auto")], "1c1t", &BASE),
            cell("int-ops", &[("threads", "auto")], "1c2t", &FASTER),
        ];
        let r = expected(&BASE, &FASTER);
        assert!(r.speedup.ratio > 1.25 && r.significance == Significance::Faster);
        assert_eq!(
            bench(&cells),
            vec![
                format!("SMT yield (1c2t/1c1t): {}", crate::fmt::verdict(&r)),
                format!("SMT gives {} for int-ops on this machine", gain_text(&r)),
            ]
        );
        // exec says the same of a command, with the same figure.
        let exec = command(&cells, true);
        assert_eq!(exec[0], bench(&cells)[0]);
        assert_eq!(
            exec[1],
            format!(
                "SMT gives {} for this command on this machine",
                gain_text(&r)
            )
        );
    }

    #[test]
    fn the_dual_core_pair_is_found_whatever_the_order() {
        let cells = vec![
            cell("int-ops", &[], "2c2t", &FASTER),
            cell("int-ops", &[], "2c1t", &BASE),
        ];
        let r = expected(&BASE, &FASTER);
        assert_eq!(
            bench(&cells),
            vec![format!(
                "dual-core SMT gain (2c2t/2c1t): {}: {}",
                crate::fmt::verdict(&r),
                gain_text(&r)
            )]
        );
    }

    #[test]
    fn no_smt_side_gives_no_line_and_no_number() {
        let cells = vec![
            cell("int-ops", &[], "1c1t", &BASE),
            cell("int-ops", &[], "2c1t", &FASTER),
        ];
        assert!(bench(&cells).is_empty());
        let line = unmeasured(&["1c2t".into()], Some("notsupported"));
        assert_eq!(
            line,
            "no SMT yield: SMT is not visible on this machine (smt/control: notsupported), so 1c2t was not measured"
        );
        assert!(
            unmeasured(&["1c2t".into(), "2c2t".into()], None)
                .ends_with("(smt/control: absent), so 1c2t and 2c2t were not measured")
        );
        // exec without SMT compares the cores instead, in advise's words.
        let lines = command(&cells, false);
        assert!(
            lines[0].starts_with("2 cores vs 1 (2c1t/1c1t): "),
            "{lines:?}"
        );
        assert!(lines[1].starts_with("2 cores give +30% ["), "{lines:?}");
        assert!(
            lines[1].ends_with("] for this command on this machine"),
            "{lines:?}"
        );
    }

    #[test]
    fn different_parameters_or_benchmarks_are_not_paired() {
        let cells = vec![
            cell("int-ops", &[("threads", "1")], "1c1t", &BASE),
            cell("int-ops", &[("threads", "2")], "1c2t", &FASTER),
            cell("fp-ops", &[], "1c2t", &FASTER),
        ];
        assert!(bench(&cells).is_empty(), "{:?}", bench(&cells));
    }

    #[test]
    fn several_parameter_sets_are_named_by_what_tells_them_apart() {
        let p = |t: &'static str| [("seed", "1"), ("threads", t)];
        let cells = vec![
            cell("int-ops", &p("1"), "1c1t", &BASE),
            cell("int-ops", &p("1"), "1c2t", &FASTER),
            cell("int-ops", &p("2"), "1c1t", &FASTER),
            cell("int-ops", &p("2"), "1c2t", &BASE),
        ];
        let lines = bench(&cells);
        assert_eq!(lines.len(), 6, "{lines:?}");
        assert_eq!(lines[0], "int-ops threads=1:");
        assert!(lines[1].starts_with("  SMT yield (1c2t/1c1t): "));
        assert!(lines[2].contains("for int-ops threads=1 on this machine"));
        assert_eq!(lines[3], "int-ops threads=2:");
        assert!(lines[4].contains(" slower"), "{}", lines[4]);
    }

    #[test]
    fn smt_off_and_on_of_one_placement_are_a_pair() {
        let cells = vec![
            cell("int-ops", &[], "2c1t", &BASE),
            cell("int-ops", &[], "2c1t", &FASTER),
        ];
        let mut cells = cells;
        cells[0].conditions.smt = Some(SmtState::Off);
        cells[1].conditions.smt = Some(SmtState::On);
        let r = expected(&BASE, &FASTER);
        assert_eq!(
            bench(&cells),
            vec![format!(
                "SMT on / off (2c1t): {}: {}",
                crate::fmt::verdict(&r),
                gain_text(&r)
            )]
        );
    }

    /// `cell` whose every sample ran on `cpus` (one worker each, and a helper's CPU).
    fn on_cpus(mut c: CellRecord, cpus: &[u32]) -> CellRecord {
        let values = c.result.values();
        let values = if values.is_empty() {
            vec![c.result.summary.mean; c.result.summary.n]
        } else {
            values
        };
        c.result.samples = values
            .iter()
            .map(|&value| smtlab_model::SampleRecord {
                value,
                iterations: 1,
                elapsed_ns: 1,
                work: 1.0,
                cpu_ns: None,
                start_spread_ns: None,
                cpus: cpus.to_vec(),
                metrics: Default::default(),
            })
            .collect();
        c
    }

    #[test]
    fn a_single_threaded_benchmark_gets_no_smt_yield() {
        // null-syscall ran one thread on 1c2t: the sibling idle, the same work twice.
        let cells = vec![
            on_cpus(cell("null-syscall", &[], "1c1t", &BASE), &[0]),
            on_cpus(cell("null-syscall", &[], "1c2t", &FASTER), &[0]),
        ];
        let lines = bench(&cells);
        assert_eq!(
            lines,
            vec![
                "SMT yield (1c2t/1c1t): none: null-syscall is single-threaded, so placement \
                 does not change the work (1c2t = 1c1t with an idle sibling)"
                    .to_string()
            ]
        );
        assert!(!lines[0].contains("faster") && !lines[0].contains("slower"));
        // A benchmark whose helper runs on the sibling (pipe-latency's echo child) is
        // compared: the sibling did work.
        let cells = vec![
            on_cpus(cell("pipe-latency", &[], "1c1t", &BASE), &[0, 0]),
            on_cpus(cell("pipe-latency", &[], "1c2t", &FASTER), &[0, 1]),
        ];
        assert!(bench(&cells)[0].contains("faster"), "{:?}", bench(&cells));
    }
}
