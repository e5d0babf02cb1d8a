//! The words the report gives a meaning of its own, each defined once: the page's and the
//! Markdown's glossary lists those its text uses, and the places that use a word link
//! to its definition ([`link`]) instead of explaining it again.

use maud::{Markup, html};
use smtlab_model::disturbance::DISTURBED_SHARE;
use smtlab_model::result::UNSTEADY_CV;

smtlab_model::named_enum! {
    fn word;
    /// A word with a meaning of its own on the page: `ALL` in the order the glossary lists
    /// them, `word` as the outputs write it.
    pub enum Term {
        Interval = "95% interval",
        NotSignificant = "not significant at 95%",
        Yield = "SMT yield",
        TwoCoresVsOne = "2 cores vs 1",
        SingleThreaded = "single-threaded",
        Unsteady = "unsteady",
        Disturbed = "disturbed",
        AtLimit = "at a limit",
    }
}

impl Term {
    /// The anchor of its definition on the page.
    pub fn id(self) -> &'static str {
        match self {
            Term::Interval => "term-interval",
            Term::NotSignificant => "term-not-significant",
            Term::Unsteady => "term-unsteady",
            Term::Disturbed => "term-disturbed",
            Term::AtLimit => "term-at-limit",
            Term::Yield => "term-yield",
            Term::TwoCoresVsOne => "term-2-cores",
            Term::SingleThreaded => "term-single-threaded",
        }
    }

    /// Other ways the outputs write it (`95% CI` in a column heading).
    fn also(self) -> &'static [&'static str] {
        match self {
            Term::Interval => &["95% CI", "95% confidence interval"],
            Term::TwoCoresVsOne => &["2 cores give"],
            _ => &[],
        }
    }

    /// What it means, in one or two sentences.
    pub fn meaning(self) -> String {
        match self {
            Term::Interval => "the range in brackets after a figure, [low, high]: the 95% \
                confidence interval of a mean (Student's t) or of a ratio of two means \
                (Fieller's, Welch-Satterthwaite degrees of freedom). A ratio is called faster \
                or slower, and a gain leans toward SMT on or off, only when its whole interval \
                is above or below 1 (no change)."
                .into(),
            Term::NotSignificant => "the 95% interval includes no change (a ratio of 1, a \
                gain of 0%): the difference may be noise, so nothing is decided on it."
                .into(),
            Term::Unsteady => format!(
                "a cell whose figure would likely not repeat: its rounds disagree beyond their \
                 own intervals, its level drifted during the cell, or its samples spread by \
                 more than {:.0}% (coefficient of variation). A comparison with it is called \
                 neither faster nor slower, whatever its interval; the reason follows in \
                 brackets (`1c2t: CV 31%`). In a comparison of two runs of one host between \
                 which the host moved the CPUs (their handoff times at the start differ \
                 twofold), every row on two CPUs or more is held back the same way.",
                UNSTEADY_CV * 100.0
            ),
            Term::Disturbed => format!(
                "a cell during which steal time or other processes took more than {:.0}% of \
                 its CPUs' time, or (on two CPUs or more) whose CPUs moved: a cache-line \
                 handoff read around it was twice or half the run's start, as when a host puts \
                 virtual CPUs on another die. Its figure carries someone else's load or \
                 another machine's sharing, so like an unsteady cell it is never called faster \
                 or slower.",
                DISTURBED_SHARE * 100.0
            ),
            Term::AtLimit => "a figure that reached a limit of the measurement (a search's \
                range end, a configured ceiling, the load generator's own limit): it is a bound \
                (`at least 64`), so a ratio with it is no speed-up."
                .into(),
            Term::Yield => "what SMT gives: the speed-up of one core with both siblings busy \
                over the same core with one thread (1c2t/1c1t; 2c2t/2c1t for two cores), the \
                ratio of the means, turned for lower-is-better figures so that above 1 is \
                always better with SMT."
                .into(),
            Term::TwoCoresVsOne => "the speed-up of two cores over one, one thread each \
                (2c1t/1c1t): what a machine without SMT can answer instead of the yield, and \
                what a sibling is measured against where there is SMT."
                .into(),
            Term::SingleThreaded => "a benchmark that ran one thread per core whatever the \
                placement: 1c2t is then 1c1t with an idle sibling, the same work twice, and \
                there is no yield."
                .into(),
        }
    }
}

/// A use of `term` on the page, linked to its definition.
pub fn link(term: Term) -> Markup {
    html! { a class="term" href={ "#" (term.id()) } { (term.word()) } }
}

/// The terms whose word `text` uses.
fn used_in(text: &str) -> Vec<Term> {
    Term::ALL
        .into_iter()
        .filter(|t| text.contains(t.word()) || t.also().iter().any(|w| text.contains(w)))
        .collect()
}

/// The page's glossary (`id="glossary"`) of the terms `page` uses; `None` when it uses
/// none.
pub fn section(page: &str) -> Option<Markup> {
    let terms = used_in(page);
    if terms.is_empty() {
        return None;
    }
    Some(html! {
        section id="glossary" {
            h2 { "Words used on this page" }
            dl {
                @for t in terms {
                    dt id=(t.id()) { (t.word()) }
                    dd { (t.meaning()) }
                }
            }
        }
    })
}

/// The Markdown glossary of the terms `text` uses, after a blank line; empty when it uses
/// none.
pub fn markdown(text: &str) -> String {
    let terms = used_in(text);
    if terms.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n**Words used here**\n\n");
    for t in terms {
        out.push_str(&format!("- **{}**: {}\n", t.word(), t.meaning()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_term_is_listed_once_where_it_is_used() {
        let page = "1.250x [1.1, 1.4] unsteady (1c2t: CV 31%); unsteady again";
        let md = markdown(page);
        assert_eq!(md.matches("- **").count(), 1, "{md}");
        assert!(md.contains("- **unsteady**: "), "{md}");
        assert!(md.contains("more than 25%"), "{md}");
        assert_eq!(markdown("nothing special"), "");
        assert!(section("nothing special").is_none());
        let html = section("2 cores vs 1: +30% [+20%, +40%]")
            .unwrap()
            .into_string();
        assert!(html.contains("id=\"term-2-cores\""), "{html}");
        assert!(!html.contains("term-unsteady"), "{html}");
        let ids: std::collections::BTreeSet<&str> = Term::ALL.iter().map(|t| t.id()).collect();
        assert_eq!(ids.len(), Term::ALL.len());
        assert_eq!(
            link(Term::Disturbed).into_string(),
            "<a class=\"term\" href=\"#term-disturbed\">disturbed</a>"
        );
    }
}
