//! The report's first screen is the answer: one row per workload with its
//! recommendation, ahead of the machine details.

mod common;

use common::demo;

fn section<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no section {id}"));
    let end = page[start..].find("</section>").unwrap() + start;
    &page[start..end]
}

#[test]
fn the_page_leads_with_the_answer_then_the_machine() {
    let r = demo();
    let page = smtlab_report::html(&r);
    let answer = page
        .find("<section id=\"advice\">")
        .expect("advice section");
    let machine = page
        .find("<section id=\"machine\">")
        .expect("machine section");
    assert!(
        answer < machine,
        "the answer comes before the machine details"
    );
    // The first link of the navigation is the answer.
    let nav = &page[page.find("<nav>").unwrap()..];
    assert!(
        nav.starts_with("<nav><a href=\"#advice\">Answer</a>"),
        "{}",
        &nav[..80]
    );
    // One row per workload the run measured on 1c1t with 1c2t or 2c1t, each answered.
    let answers = smtlab_report::advice::advise_run(&r);
    assert!(!answers.is_empty());
    let s = section(&page, "advice");
    for a in &answers {
        assert!(
            s.contains(&format!("<strong>{}</strong>", a.answer)),
            "{}",
            a.answer
        );
    }
    insta::assert_snapshot!("html_advice_section", s);
}

#[test]
fn a_run_without_the_needed_placements_says_why_there_is_no_answer() {
    let mut r = demo();
    r.cells.retain(|c| c.placement_spec == "1c1t");
    let page = smtlab_report::html(&r);
    assert!(!page.contains("<section id=\"advice\">"));
    assert!(page.contains("<li>Answer: no workload measured on the placements the answer needs"));
}

#[test]
fn without_smt_the_answer_says_so_once_and_shows_how_each_workload_scales() {
    let mut r = demo();
    r.cells
        .retain(|c| ["1c1t", "2c1t", "cores"].contains(&c.placement_spec.as_str()));
    r.cells
        .retain(|c| c.benchmark == "int-ops" || c.benchmark == "fp-ops");
    r.run.topology = smtlab_fixtures::build::one_cpu_per_core(&[0, 1, 2, 3]);
    let page = smtlab_report::html(&r);
    let s = section(&page, "advice");
    assert_eq!(s.matches("no SMT").count(), 1, "{s}");
    assert!(!s.contains("<strong>"), "no answer per row: {s}");
    assert_eq!(
        s.matches("<tr>").count(),
        3,
        "a heading and a row per workload: {s}"
    );
    for h in ["1 core", "2 cores", "whole machine"] {
        assert!(s.contains(&format!("<th>{h}</th>")), "{s}");
    }
    // The whole machine is the placement with the most CPUs, named with its gain.
    assert!(s.contains("cores: +"), "{s}");
    // The terminal says the same once, within 80 columns.
    let topo = &r.run.topology;
    let rows = smtlab_report::advice::scaling(&r.cells, topo.smt_visible(), topo.cpus.len());
    let text = smtlab_report::advice::scaling_text(&rows, 80);
    assert_eq!(text.matches("no SMT").count(), 1, "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

#[test]
fn every_word_the_page_links_is_defined_once_on_it() {
    let mut no_smt = demo();
    no_smt.run.topology = smtlab_fixtures::build::one_cpu_per_core(&[0, 1, 2, 3]);
    for r in [demo(), no_smt] {
        let page = smtlab_report::html(&r);
        let links: std::collections::BTreeSet<&str> = page
            .split("href=\"#term-")
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .collect();
        assert!(!links.is_empty());
        for id in links {
            assert_eq!(
                page.matches(&format!("<dt id=\"term-{id}\">")).count(),
                1,
                "term-{id}"
            );
        }
    }
}
