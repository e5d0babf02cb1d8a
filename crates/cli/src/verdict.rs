//! Plain-language verdicts on what SMT gives, shared by `exec` and `bench`: which
//! measured cells form an SMT pair (`1c2t` over `1c1t`, `2c2t` over `2c1t`, or one
//! placement with SMT on over SMT off), the one speed-up of each pair
//! ([`smtlab_model::verdict::verdict`], written by [`smtlab_report::fmt::verdict`] and
//! [`smtlab_report::fmt::gain`], as the report, the Markdown table, the results JSON and
//! compare write it), and the gain in the words its 95% interval allows (`unsteady`
//! where a cell would not repeat). An SMT pair whose SMT side ran one thread per core
//! (a single-threaded benchmark: the sibling idle) gets no yield, only a line saying so. A pair whose SMT side could not be
//! measured gets one line saying so and no number.

use std::collections::BTreeMap;

use smtlab_model::CellRecord;
use smtlab_model::verdict::{PairKind, Verdict, idle_sibling, verdict};

/// `+18% (95% CI +15% to +21%)` with the words the verdict allows
/// ([`smtlab_report::fmt::gain`], which the HTML page's exec section agrees with).
pub(crate) fn gain_text(v: &Verdict) -> String {
    smtlab_report::fmt::gain(v)
}

fn ratio_text(v: &Verdict) -> String {
    smtlab_report::fmt::verdict(v)
}

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
                "{name} ({smt} / {base}): none: {subject} is single-threaded, so placement does \
                 not change the work ({smt} = {base} with an idle sibling)"
            )];
        }
        Pair::Measured(v) => v,
    };
    if kind == PairKind::SmtYield {
        vec![
            format!("{name} ({smt} / {base}): {}", ratio_text(v)),
            format!("SMT gives {} for {subject} on this machine", gain_text(v)),
        ]
    } else {
        vec![format!(
            "{name} ({smt} / {base}): {}: {}",
            ratio_text(v),
            gain_text(v)
        )]
    }
}

/// `exec`'s verdict on one command's cells; `smt` says whether this machine has SMT at
/// all (without it, 2c1t vs 1c1t is all there is).
pub(crate) fn command(cells: &[CellRecord], smt: bool) -> Vec<String> {
    let cells: Vec<&CellRecord> = cells.iter().collect();
    let mut out = Vec::new();
    let [single, dual] = SMT_PAIRS;
    if let Some(r) = pair(&cells, single) {
        out.extend(pair_lines(single, &r, "this command"));
    } else if let Some(Pair::Measured(r)) = pair(&cells, PairKind::SecondCore) {
        out.push(format!(
            "2 cores / 1 core (2c1t / 1c1t): {}",
            ratio_text(&r)
        ));
        let prefix = if smt {
            "compared 1c1t vs 2c1t (add 1c2t for the SMT yield)"
        } else {
            "no SMT here: compared 1c1t vs 2c1t only"
        };
        out.push(format!("{prefix}: 2 cores give {}", gain_text(&r)));
    }
    if let Some(r) = pair(&cells, dual) {
        out.extend(pair_lines(dual, &r, "this command"));
    }
    out
}

/// `bench`'s verdicts: for every benchmark and parameter set, its SMT pairs; for every
/// placement measured with SMT off and on (`--smt off,on`), on over off. Cells without a
/// partner give nothing. With more than one benchmark or parameter set, each one's lines
/// follow its name.
pub(crate) fn bench(cells: &[CellRecord]) -> Vec<String> {
    // (name, lines) in the order the cells came.
    let mut blocks: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |name: String, lines: Vec<String>| match blocks.iter_mut().find(|b| b.0 == name) {
        Some(b) => b.1.extend(lines),
        None => blocks.push((name, lines)),
    };
    let mut seen: Vec<&CellRecord> = Vec::new();
    for c in cells {
        if seen.iter().any(|s| s.same_variant(c)) {
            continue;
        }
        seen.push(c);
        let group: Vec<&CellRecord> = cells.iter().filter(|o| o.same_variant(c)).collect();
        let name = subject(c, &c.flat_params(), cells);
        for kind in SMT_PAIRS {
            if let Some(r) = pair(&group, kind) {
                add(name.clone(), pair_lines(kind, &r, &name));
            }
        }
    }
    let (rows, _) = smtlab_report::smt_states::rows(cells);
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
fn subject(cell: &CellRecord, params: &BTreeMap<String, String>, cells: &[CellRecord]) -> String {
    let differing: Vec<String> = params
        .iter()
        .filter(|(k, v)| {
            cells
                .iter()
                .filter(|o| o.benchmark == cell.benchmark)
                .any(|o| o.flat_params().get(*k) != Some(*v))
        })
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
pub(crate) fn unmeasured(placements: &[String], control: Option<&str>) -> String {
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
pub(crate) mod tests {
    use smtlab_model::keys::SmtState;
    use smtlab_model::stats::{self, Ratio, Significance};
    use smtlab_model::{Direction, ResolvedPlacement};

    use super::*;

    /// A cell of `bench` with `params` on `placement` whose samples are `values`.
    pub(crate) fn cell(
        bench: &str,
        params: &[(&str, &str)],
        placement: &str,
        values: &[f64],
    ) -> CellRecord {
        let threads: u32 = placement[2..3].parse().unwrap();
        let cores: u32 = placement[..1].parse().unwrap();
        CellRecord {
            benchmark: bench.into(),
            group: "compute".into(),
            unit: "GOPS".into(),
            direction: Direction::Higher,
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            conditions: Default::default(),
            placement_spec: placement.into(),
            placement: ResolvedPlacement {
                name: placement.into(),
                spec: placement.into(),
                cpus: (0..cores * threads).collect(),
                cores,
                threads_per_core: threads,
                packages: 1,
                core_order: Default::default(),
                cpu_order: Default::default(),
                core_kinds: Vec::new(),
            },
            result: smtlab_fixtures::build::converged_result(Vec::new(), values),
            counters: None,
        }
    }

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
        let text = smtlab_report::fmt::verdict(&v);
        assert!(
            text.contains("at a limit (2c1t: at least 64 (configured ceiling))"),
            "{text}"
        );
        assert!(gain_text(&v).contains("no speed-up"), "{}", gain_text(&v));
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
        assert_eq!(gain_text(&with_ratio(r)), "+18% (95% CI +15% to +21%)");
        let r = Ratio {
            ratio: 1.004,
            ci95_low: Some(0.99),
            ci95_high: Some(1.02),
            ci95_half_width_delta: Some(0.012),
            df: Some(8.0),
        };
        assert_eq!(
            gain_text(&with_ratio(r)),
            "+0.4% (95% CI -1.0% to +2.0%), not significant at 95%"
        );
        let r = Ratio {
            ratio: 1.05,
            ci95_low: None,
            ci95_high: None,
            ci95_half_width_delta: None,
            df: None,
        };
        assert_eq!(gain_text(&with_ratio(r)), "+5.0% (n=1, no interval)");
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
                format!(
                    "SMT yield (1c2t / 1c1t): {}",
                    smtlab_report::fmt::verdict(&r)
                ),
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
                "dual-core SMT gain (2c2t / 2c1t): {}: {}",
                smtlab_report::fmt::verdict(&r),
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
        // exec without SMT compares the cores instead.
        assert!(command(&cells, false)[1].starts_with("no SMT here: compared 1c1t vs 2c1t only"));
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
        assert!(lines[1].starts_with("  SMT yield (1c2t / 1c1t): "));
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
                smtlab_report::fmt::verdict(&r),
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
                "SMT yield (1c2t / 1c1t): none: null-syscall is single-threaded, so placement \
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

    /// An `exec` cell (times in seconds, lower is better) of `./work` on `placement`.
    fn exec_cell(placement: &str, times_s: &[f64]) -> CellRecord {
        let mut c = cell("exec", &[("command", "./work")], placement, times_s);
        c.group = "exec".into();
        c.unit = "s".into();
        c.direction = Direction::Lower;
        c
    }

    #[test]
    fn every_output_gives_one_verdict_on_a_skewed_run() {
        // 2c1t's runs are faster but for one slow one: the medians favour 2c1t, the
        // mean time (total time, i.e. throughput over all runs) favours 1c1t, and the
        // mean of per-run rates 1/t favours 2c1t. The sign depends on the definition,
        // so every output must use the same one.
        let base_t = [10.0, 10.1, 9.9, 10.0, 10.05, 9.95];
        let two_t = [9.5, 9.6, 9.4, 9.5, 9.55, 13.0];
        let s = |v: &[f64]| stats::summarize(v).unwrap();
        let rates = |v: &[f64]| s(&v.iter().map(|t| 1.0 / t).collect::<Vec<_>>()).mean;
        assert!(s(&two_t).median < s(&base_t).median);
        assert!(s(&two_t).mean > s(&base_t).mean);
        assert!(rates(&two_t) > rates(&base_t));
        let cells = vec![exec_cell("1c1t", &base_t), exec_cell("2c1t", &two_t)];
        let v = verdict(&cells[0], &cells[1]).unwrap();
        assert!(v.speedup.ratio < 1.0 && v.gain_pct() < 0.0, "{v:?}");
        assert_eq!(v.significance, Significance::NotSignificant);
        let ratio = smtlab_report::fmt::times(v.speedup.ratio);
        let pct = smtlab_report::fmt::pct(v.speedup.ratio);
        assert_eq!((ratio.as_str(), pct.as_str()), ("0.991", "-0.9%"));

        // Terminal (exec's verdict lines).
        let lines = command(&cells, false);
        assert_eq!(
            lines[0],
            format!(
                "2 cores / 1 core (2c1t / 1c1t): {}",
                smtlab_report::fmt::verdict(&v)
            )
        );
        assert!(
            lines[1].starts_with(
                "no SMT here: compared 1c1t vs 2c1t only: 2 cores give -0.9% (95% CI "
            ),
            "{}",
            lines[1]
        );

        // The stored run: HTML, JSON, Markdown.
        let mut run = crate::render::testdata::results(1);
        run.cells = cells.clone();
        run.skipped.clear();
        run.describe(smtlab_runner::catalog::infos());
        let html = smtlab_report::html(&run);
        let exec = &html[html.find("<section id=\"exec\">").unwrap()..];
        let exec = &exec[..exec.find("</section>").unwrap()];
        assert!(
            exec.contains(&format!("gives {pct}</b>: {ratio}x (95% interval ")),
            "{exec}"
        );
        assert!(exec.contains("not significant at 95%"), "{exec}");
        assert!(!exec.contains("+0."), "the page shows a gain: {exec}");
        let md = smtlab_report::markdown::cells(&run.cells);
        assert!(md.contains(&smtlab_report::fmt::verdict(&v)), "{md}");
        let json: serde_json::Value =
            serde_json::from_slice(&smtlab_report::export::json(&run)).unwrap();
        let sp = &json["speedups"][0];
        assert_eq!(sp["kind"], "second_core");
        assert_eq!(
            (sp["base"].as_str(), sp["other"].as_str()),
            (Some("1c1t"), Some("2c1t"))
        );
        assert_eq!(
            sp["verdict"]["speedup"]["ratio"].as_f64(),
            Some(v.speedup.ratio)
        );
        assert_eq!(sp["verdict"]["significance"], "not_significant");
        // The file still loads as a run.
        let back: smtlab_model::RunResults =
            serde_json::from_slice(&smtlab_report::export::json(&run)).unwrap();
        assert_eq!(back.cells, run.cells);

        // compare: run B holds 2c1t's samples where A holds 1c1t's. Read with the cells'
        // own intervals alone, it is the same verdict (across runs, compare adds what
        // runs of one setup differ by: `between`).
        let mut b = run.clone();
        b.cells[0].result = cells[1].result.clone();
        let c = smtlab_report::compare::compare_with(&run, &b, smtlab_report::BetweenRuns::none());
        let row = c.rows.iter().find(|r| r.placement == "1c1t").unwrap();
        assert_eq!(row.speedup, Some(v.speedup.ratio));
        assert_eq!(row.significance, Some(v.significance));
        assert_eq!(row.speedup_text(), smtlab_report::fmt::verdict(&v));
    }
}
