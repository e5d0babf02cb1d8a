//! `smtlab advise`'s answer on the terminal: [`smtlab_report::advice::text`] fitted to
//! the terminal (80 columns when it has no width).

use smtlab_report::advice::{self, Advice};

use super::table::Layout;

/// Width used when the output is not a terminal.
const DEFAULT_WIDTH: usize = 80;

/// A blank line, then each workload's answer, why, and its figures.
pub fn summary(answers: &[Advice], layout: Layout) -> String {
    let width = layout.width.unwrap_or(DEFAULT_WIDTH);
    format!("\n{}", advice::text(answers, width))
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
        let text = summary(&[on, none], Layout::fixed(60));
        for l in text.lines() {
            assert!(l.chars().count() <= 60, "{l:?}");
        }
        assert!(text.contains("  answer: keep SMT on\n"), "{text}");
        assert!(
            text.contains("  answer: no SMT here (2 cores vs 1: +96% [+90%, +102%])\n"),
            "{text}"
        );
        // Without a terminal width: 80 columns.
        let plain = summary(
            &[],
            Layout {
                width: None,
                color: false,
            },
        );
        assert_eq!(plain, "\n");
    }
}
