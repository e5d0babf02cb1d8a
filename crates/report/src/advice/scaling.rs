//! The answer on a machine without SMT: there is nothing to turn on or off, which is
//! said once, and each workload's scaling is shown instead: its figure on one core, what
//! a second core gives (`2c1t/1c1t`) and what the whole machine gives (the placement of
//! the workload with the most CPUs, over one core), each gain with its 95% interval.

use smtlab_model::CellRecord;
use smtlab_model::placement::Named;
use smtlab_model::verdict::verdict;

use super::evidence::offered_rate;
use super::{Figure, workload_name};
use crate::glossary::{Term, link};

/// What the whole machine gave a workload.
#[derive(Debug, Clone, PartialEq)]
pub enum WholeMachine {
    /// The placement with the most CPUs (`all`, `cores`), over one core.
    Measured { placement: String, gain: Figure },
    /// Two cores are the whole machine.
    TwoCores,
    /// No placement beyond two cores was measured.
    NotMeasured,
}

/// One workload's scaling without SMT.
#[derive(Debug, Clone, PartialEq)]
pub struct Scaling {
    /// As the advice names it (`int-ops seed=1 threads=auto`).
    pub workload: String,
    /// Its benchmark with the parameters that tell it apart from the run's other
    /// workloads of that benchmark (`web-static server=nginx`), for a narrow column.
    pub short: String,
    /// Its figure on one core (`1c1t`), with its unit: `1.078 [0.9809, 1.176] GOPS`.
    pub one_core: String,
    /// The same without the interval, for a narrow column: `1.078 GOPS`.
    pub one_core_short: String,
    /// `2c1t` over `1c1t`; `None` where 2c1t was not measured.
    pub two_cores: Option<Figure>,
    /// The workload ran one thread: a second core had nothing to do.
    pub single_threaded: bool,
    pub whole_machine: WholeMachine,
}

/// Each workload's scaling among `cells` on a machine of `machine_cpus` CPUs, in the
/// order the workloads came; empty where `smt` (the answer then is about SMT) or no
/// workload was measured on one core.
pub fn scaling(cells: &[CellRecord], smt: bool, machine_cpus: usize) -> Vec<Scaling> {
    if smt {
        return Vec::new();
    }
    let plain: Vec<&CellRecord> = cells
        .iter()
        .filter(|c| c.conditions.rate.is_none() && offered_rate(c).is_none())
        .filter(|c| crate::corun::form_of(c).is_none())
        .collect();
    let mut out: Vec<Scaling> = Vec::new();
    for (workload, mine) in crate::grouped(plain, |c| workload_name(&c.benchmark, &c.params)) {
        let Some(one) = mine.iter().find(|o| o.placement_spec == Named::OneCore) else {
            continue;
        };
        let gain = |o: &CellRecord| verdict(one, o).map(|v| Figure::from_verdict(&v));
        let two = mine.iter().find(|o| o.placement_spec == Named::TwoCores);
        let most = mine.iter().max_by_key(|o| o.placement.cpus.len());
        let two_cpus = two.map_or(2, |t| t.placement.cpus.len());
        let whole_machine = match most {
            Some(m) if m.placement.cpus.len() > two_cpus => match gain(m) {
                Some(g) => WholeMachine::Measured {
                    placement: m.placement_spec.clone(),
                    gain: g,
                },
                None => WholeMachine::NotMeasured,
            },
            _ if two.is_some() && machine_cpus == two_cpus => WholeMachine::TwoCores,
            _ => WholeMachine::NotMeasured,
        };
        let s = &one.result.summary;
        let figure = Figure::of_mean(s, one.result.unsteady_reason());
        out.push(Scaling {
            workload,
            short: crate::text::subject(one, &one.params, cells),
            one_core: figure.absolute(&one.unit),
            one_core_short: format!("{} {}", crate::fmt::num(s.mean), one.unit),
            single_threaded: two.is_some_and(|t| t.result.cpus_used() == Some(1)),
            two_cores: two.and_then(|t| gain(t)),
            whole_machine,
        });
    }
    out
}

/// The line said once above the table.
const NO_SMT: &str = "no SMT on this machine: there is nothing to turn on or off. How each \
                      workload scales instead (gains over 1 core, 95% interval):";

impl Scaling {
    /// The two cores' column: the gain, or why there is none; and the words of its
    /// interval apart (`not significant at 95%`), for a narrow table.
    fn two_cores_parts(&self) -> (String, Option<String>) {
        match (&self.two_cores, self.single_threaded) {
            (_, true) => ("none: single-threaded".into(), None),
            (Some(f), false) => parts(f, ""),
            (None, false) => ("not measured".into(), None),
        }
    }

    /// The whole machine's column, as [`Scaling::two_cores_parts`].
    fn whole_machine_parts(&self) -> (String, Option<String>) {
        match &self.whole_machine {
            WholeMachine::Measured { placement, gain } => parts(gain, &format!("{placement}: ")),
            WholeMachine::TwoCores => ("= 2 cores".into(), None),
            WholeMachine::NotMeasured => ("not measured".into(), None),
        }
    }

    /// The row in full, as the Markdown and the page show it: workload, 1 core, 2
    /// cores, whole machine.
    fn full(&self) -> [String; 4] {
        let (two, all) = (self.two_cores_parts(), self.whole_machine_parts());
        let one = self.one_core.clone();
        [self.workload.clone(), one, joined(two), joined(all)]
    }
}

/// `f` as a gain after `prefix`, its interval's words apart.
fn parts(f: &Figure, prefix: &str) -> (String, Option<String>) {
    let ci = crate::fmt::gain_ci(f.value, f.ci95_low, f.ci95_high);
    (format!("{prefix}{ci}"), f.words_text())
}

fn joined((figure, words): (String, Option<String>)) -> String {
    match words {
        Some(w) => format!("{figure} {w}"),
        None => figure,
    }
}

/// The terminal answer without SMT, fitted to `width`: the line said once, the table,
/// then what an interval says where it says more than its figure (`not significant at
/// 95%`, `unsteady (why)`), wrapped, so the figures keep their columns and no reason
/// is cut.
pub fn text(rows: &[Scaling], width: usize) -> String {
    let layout = crate::table::Layout::fixed(width);
    let mut out = crate::table::wrap(NO_SMT, layout);
    let mut t = crate::table::Table::new(["workload", "1 core", "2 cores", "whole machine"])
        .shrink(0)
        .right(&[]);
    let mut notes = String::new();
    for r in rows {
        let (two, two_words) = r.two_cores_parts();
        let (all, all_words) = r.whole_machine_parts();
        for (what, words) in [("2 cores", two_words), ("whole machine", all_words)] {
            if let Some(w) = words {
                let line = format!("{}, {what}: {w}", r.short);
                notes.push_str(&crate::table::wrap(&line, layout));
            }
        }
        t.row([r.short.clone(), r.one_core_short.clone(), two, all]);
    }
    out.push_str(&t.render_to(layout));
    out.push_str(&notes);
    out
}

/// The answer without SMT as Markdown: the line said once, a row per workload with
/// its figures in full, then the words they use.
pub fn markdown(rows: &[Scaling]) -> String {
    let mut out = format!(
        "{}\n\n| workload | 1 core | 2 cores | whole machine |\n|---|---|---|---|\n",
        NO_SMT.replacen("no SMT", "No SMT", 1)
    );
    for r in rows {
        out.push_str(&crate::markdown::row_of(r.full()));
    }
    let words = crate::glossary::markdown(&out);
    out.push_str(&words);
    out
}

/// The page's answer without SMT: the line said once, then a row per workload.
pub(super) fn html(rows: &[Scaling]) -> maud::Markup {
    maud::html! {
        p {
            "This machine shows no sibling threads: there is nothing to turn on or off. How \
             each workload scales instead: its figure on one core, and what a second core ("
            (link(Term::TwoCoresVsOne)) ") and the whole machine give over it, each with its "
            (link(Term::Interval)) "."
        }
        table class="answers" {
            tr { th { "workload" } th { "1 core" } th { "2 cores" } th { "whole machine" } }
            @for [workload, figures @ ..] in rows.iter().map(Scaling::full) {
                tr { td { (workload) } @for f in &figures { td class="yield" { (f) } } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use smtlab_fixtures::build::cell;

    use super::*;

    #[test]
    fn each_workload_scales_over_one_core_and_the_whole_machine_is_named() {
        let mut all = cell("int-ops", &[], "4c1t", &[3.9, 4.0, 4.1]);
        all.placement_spec = "all".into();
        let cells = vec![
            cell("int-ops", &[], "1c1t", &[0.99, 1.0, 1.01]),
            cell("int-ops", &[], "2c1t", &[1.98, 2.0, 2.02]),
            all,
            cell("fp-ops", &[], "1c1t", &[0.99, 1.0, 1.01]),
            cell("fp-ops", &[], "2c1t", &[0.97, 1.0, 1.04]),
        ];
        assert!(
            scaling(&cells, true, 4).is_empty(),
            "with SMT: the SMT answer"
        );
        let rows = scaling(&cells, false, 4);
        assert_eq!(rows.len(), 2);
        assert!(rows[0].full()[2].starts_with("+100% ["), "{rows:?}");
        assert!(rows[0].full()[3].starts_with("all: +300% ["), "{rows:?}");
        assert_eq!(rows[1].whole_machine, WholeMachine::NotMeasured);
        let text = text(&rows, 80);
        assert_eq!(text.matches("no SMT").count(), 1, "{text}");
        for l in text.lines() {
            assert!(l.chars().count() <= 80, "{l:?}");
        }
        assert!(
            text.contains("\nfp-ops, 2 cores: not significant at 95%\n"),
            "{text}"
        );
        // Two cores are the whole of a two-CPU machine.
        let md = markdown(&rows);
        assert_eq!(md.to_lowercase().matches("no smt").count(), 1, "{md}");
        assert!(
            md.contains("| int-ops | 1.000 [0.9752, 1.025] GOPS | +100% ["),
            "{md}"
        );
        assert!(md.contains("**Words used here**"), "{md}");
        let rows = scaling(&cells[3..], false, 2);
        assert_eq!(rows[0].full()[3], "= 2 cores");
    }
}
