//! `smtlab advise`'s answer on the terminal: [`smtlab_report::advice::text`] fitted to
//! the terminal (80 columns when it has no width).

use smtlab_report::advice::{self, Advice, without_smt};
use smtlab_report::table::{Layout, wrap};

use crate::term::{DEFAULT_WIDTH, fit, term_layout};

/// A blank line, then each workload's answer, why, and its figures; without SMT
/// (`scaling` not empty, every answer `no SMT here`, no latency sweep), that said once
/// and each workload's scaling instead.
pub fn summary(answers: &[Advice], scaling: &[advice::Scaling], layout: Layout) -> String {
    let width = layout.width.unwrap_or(DEFAULT_WIDTH);
    if without_smt(answers, scaling) {
        let mut out = format!("\n{}", advice::scaling_text(scaling, width));
        // Partners predicted for the sibling this machine does not have.
        for a in answers {
            for r in a
                .reasons
                .iter()
                .filter(|r| r.what.contains(advice::PREDICTED))
            {
                let line = format!("{}, {}: {}", a.workload, r.what, r.shown);
                out.push_str(&wrap(&line, layout));
            }
        }
        return out;
    }
    format!("\n{}", advice::text(answers, width))
}

/// The line `advise` prints before measuring: the subject, the placements, the states
/// and what follows the throughput.
pub fn header(
    subject: &str,
    specs: &[String],
    smt_states: bool,
    sweep: Option<&[f64]>,
    penalty: Option<bool>,
) -> String {
    let sweep = sweep.map_or(String::new(), |pct| {
        let pct: Vec<String> = pct.iter().map(|p| format!("{p}")).collect();
        format!(
            "; then the latency at {}% of the capacity, open loop, on each side",
            pct.join(", ")
        )
    });
    fit(&format!(
        "advise {subject}: {} interleaved{}{sweep}{}",
        specs.join(", "),
        if smt_states {
            ", with SMT off and on"
        } else {
            ""
        },
        match penalty {
            Some(true) => "; then the workload beside each partner on its sibling",
            Some(false) => "; then the single-thread cost next to busy siblings",
            None => "",
        }
    ))
}

/// The line of a cell as it is measured: a headroom step, a throughput cell as `bench`
/// shows it, a skipped cell with its reason; nothing for co-run cells.
pub fn cell_line(shown: crate::sink::Shown<'_>) -> Option<String> {
    use crate::sink::Shown;
    match shown {
        Shown::Measured(c) if let Some(rate) = advice::offered_rate(c) => {
            let side = advice::sweep_side(c, rate);
            let n = smtlab_report::fmt::num;
            let ms = |f: &Option<advice::Figure>| f.as_ref().map_or("-".into(), |f| n(f.value));
            let what = if side.kept_up {
                format!(
                    "p50 {}, p99 {}, p99.9 {} ms",
                    ms(&side.p50_ms),
                    ms(&side.p99_ms),
                    ms(&side.p999_ms)
                )
            } else {
                format!("not kept up{}", advice::behind_words(&side))
            };
            Some(fit(&format!(
                "  {} at {rate:.0}/s offered: served {}/s, {what}",
                c.placement_spec,
                n(side.achieved_per_s)
            )))
        }
        Shown::Measured(c) if let Some(mode) = c.conditions.security() => Some(format!(
            "  {mode} on {}: {}\n",
            c.placement_spec,
            smtlab_report::fmt::mean_ci(&c.result.summary)
        )),
        Shown::Measured(c) => match c.conditions.rate {
            Some(rate) => Some(format!(
                "headroom step {rate}: {} {}\n",
                smtlab_report::fmt::num(c.result.summary.mean),
                c.unit
            )),
            None if smtlab_report::corun::form_of(c).is_none() => {
                Some(super::bench::row(c, None, term_layout()))
            }
            None => None,
        },
        Shown::Skipped(s) => Some(fit(&match s.key.conditions.security() {
            Some(mode) => format!("  {mode} on {}: skipped: {}", s.key.placement, s.reason),
            None => format!("  {}: skipped: {}", s.key.placement, s.reason),
        })),
    }
}

/// What `advise --security` measures, above the cells' lines.
pub fn security_header(
    subject: &str,
    scope: &str,
    (on, off): (&str, &str),
    tenants: bool,
) -> String {
    let tenants = if tenants {
        "; then, one thread, beside each partner on its sibling as distrusting tenants (a cookie each), and sharing one CPU with SMT off"
    } else {
        ""
    };
    fit(&format!(
        "advise {subject} --security: smt-on and coresched (a cookie per {scope}) on {on} interleaved, then smt-off on {off}{tenants}; forced idle recorded with each sample"
    ))
}

/// `advise --security`'s answer for the terminal: each workload and load, its modes'
/// lines and the choice, fitted to the width, under a blank line as the summary is.
pub fn security_answer(answers: &[smtlab_report::security::SecurityAdvice]) -> String {
    let text = smtlab_report::security::text(answers).join("\n");
    format!("\n{}", fit(&text))
}

/// The answers in the form asked: Markdown (to a file, or standard output with `-`),
/// JSON, or the terminal summary.
pub fn answers(
    args: &crate::args::AdviseArgs,
    run_id: i64,
    notes: &[String],
    answers: &[Advice],
    scaling: &[advice::Scaling],
) -> anyhow::Result<()> {
    let emit = crate::output::emit;
    let md_stdout = match &args.export_markdown {
        Some(path) if without_smt(answers, scaling) => {
            crate::output::export(path, advice::scaling_markdown(scaling).as_bytes())?
        }
        Some(path) => crate::output::export(path, advice::markdown(answers).as_bytes())?,
        None => false,
    };
    if args.json {
        emit(&advice::json(run_id, notes, answers))?;
    } else if !md_stdout {
        emit(&summary(answers, scaling, term_layout()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use smtlab_report::advice::{Evidence, Figure, decide};

    use super::*;

    #[test]
    fn the_answer_fits_the_terminal_and_says_when_there_is_no_smt() {
        let on = decide(&Evidence {
            workload:
                "web-slo conns=64 dataset=64MiB max_rate=200000 server=event slo=p99=5ms step=2"
                    .into(),
            smt: true,
            sibling_gain: Some(Figure::new(1.3, 1.25, 1.35)),
            sibling_vs_core: Some(Figure::new(0.66, 0.63, 0.69)),
            ..Evidence::default()
        });
        let none = decide(&Evidence {
            workload: "int-ops".into(),
            smt: false,
            second_core: Some(Figure::new(1.96, 1.9, 2.02)),
            ..Evidence::default()
        });
        let text = summary(&[on, none], &[], Layout::fixed(60));
        for l in text.lines() {
            assert!(l.chars().count() <= 60, "{l:?}");
        }
        assert!(text.contains("  answer: keep SMT on\n"), "{text}");
        assert!(
            text.contains("  answer: no SMT here (2 cores vs 1: +96% [+90%, +102%])\n"),
            "{text}"
        );
        // Without a terminal width: 80 columns.
        let plain = summary(&[], &[], Layout::plain());
        assert_eq!(plain, "\n");
    }
}
