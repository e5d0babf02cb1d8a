//! The report's exporters on hand-built results: exact arithmetic of yields and
//! comparisons, snapshots of the text tables, and the HTML page checked with a strict
//! XML parser.

mod common;

use std::collections::BTreeMap;

use common::{cell, demo, placement, run};
use quick_xml::Reader;
use quick_xml::events::Event;
use smtlab_model::verdict::PairKind;
use smtlab_model::{CellKey, Direction, RunResults, SkippedCell};
use smtlab_report::{Side, Statistic};

/// Whether a compared row is faster or slower after the correction for many rows.
trait Significant {
    fn significant(&self) -> Option<bool>;
}

impl Significant for smtlab_report::compare::CompareRow {
    fn significant(&self) -> Option<bool> {
        self.significance
            .and_then(smtlab_model::stats::Significance::significant)
    }
}

const HI: Direction = Direction::Higher;
const LO: Direction = Direction::Lower;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
}

// ---------------------------------------------------------------- yields

#[test]
fn yields_are_exact_ratios_of_means_and_flip_for_latency() {
    let r = run(
        vec![
            cell(
                "int-ops",
                "compute",
                "GOPS",
                HI,
                &[],
                placement("1c1t"),
                &[9.0, 10.0, 11.0],
            ),
            cell(
                "int-ops",
                "compute",
                "GOPS",
                HI,
                &[],
                placement("1c2t"),
                &[12.0, 13.0, 14.0],
            ),
            cell(
                "lat",
                "memory",
                "ns",
                LO,
                &[],
                placement("1c1t"),
                &[99.0, 100.0, 101.0],
            ),
            cell(
                "lat",
                "memory",
                "ns",
                LO,
                &[],
                placement("1c2t"),
                &[124.0, 125.0, 126.0],
            ),
        ],
        vec![],
    );
    let y = smtlab_report::smt_yields(&r);
    assert_eq!(y.len(), 2);
    let int = y[0].smt.as_ref().unwrap();
    assert!(close(int.ratio.ratio, 1.3), "{}", int.ratio.ratio);
    assert!(!int.inverted);
    let (lo, hi) = (int.ratio.ci95_low.unwrap(), int.ratio.ci95_high.unwrap());
    assert!(lo < 1.3 && 1.3 < hi && lo > 1.0, "[{lo}, {hi}]");
    assert_eq!(
        (int.smt_placement.as_str(), int.base_placement.as_str()),
        ("1c2t", "1c1t")
    );
    // Latency: 100 ns alone, 125 ns with the sibling: shown as 100/125 = 0.8 (< 1: worse).
    let lat = y[1].smt.as_ref().unwrap();
    assert!(lat.inverted);
    assert!(close(lat.ratio.ratio, 0.8), "{}", lat.ratio.ratio);
    assert!(y[0].dual_core.is_none() && y[0].machine.is_none());
    assert!(smtlab_report::no_yields_reason(&r).is_none());
}

#[test]
fn yields_need_both_cells_and_distinct_cpus() {
    // `all` and `cores` on a machine without SMT are the same CPUs: no machine gain.
    let mut all = placement("cores");
    all.name = "all".into();
    let mut r = run(
        vec![
            cell(
                "int-ops",
                "compute",
                "GOPS",
                HI,
                &[],
                placement("cores"),
                &[4.0, 4.1],
            ),
            cell("int-ops", "compute", "GOPS", HI, &[], all, &[4.05, 4.0]),
            cell(
                "int-ops",
                "compute",
                "GOPS",
                HI,
                &[],
                placement("1c1t"),
                &[1.0, 1.1],
            ),
        ],
        vec![],
    );
    r.run.topology.smt.threads_per_core_max = 1;
    r.run.topology.smt.threads_per_core_min = 1;
    r.run.topology.smt.control = Some("notsupported".into());
    assert!(smtlab_report::smt_yields(&r).is_empty());
    let why = smtlab_report::no_yields_reason(&r).unwrap();
    assert!(
        why.contains("no SMT visible") && why.contains("notsupported"),
        "{why}"
    );
    let empty = run(vec![], vec![]);
    assert_eq!(
        smtlab_report::no_yields_reason(&empty).unwrap(),
        "no cell was measured in this run"
    );
}

#[test]
fn yield_table_snapshot() {
    let rows = smtlab_report::smt_yields(&demo());
    assert!(
        rows.iter()
            .any(|r| r.get(PairKind::MachineSmtGain).is_some())
    );
    insta::assert_snapshot!("yield_table_demo", smtlab_report::yield_table(&rows));
}

// ---------------------------------------------------------------- compare

/// Run A: three compute cells with mean 10, a latency cell with median 100, a cell only
/// in A; run B: 11, 9, 12, median 80, a cell only in B, and A's extra cell skipped.
fn pair() -> (RunResults, RunResults) {
    let tight = |m: f64| [m - 0.01, m, m + 0.01];
    let a = run(
        vec![
            cell(
                "int-ops",
                "compute",
                "GOPS",
                HI,
                &[],
                placement("1c1t"),
                &tight(10.0),
            ),
            cell(
                "int-ops",
                "compute",
                "GOPS",
                HI,
                &[],
                placement("1c2t"),
                &tight(10.0),
            ),
            cell(
                "fp-ops",
                "compute",
                "GOPS",
                HI,
                &[],
                placement("1c1t"),
                &tight(10.0),
            ),
            cell(
                "null-syscall",
                "os",
                "ns",
                LO,
                &[],
                placement("1c1t"),
                &[99.0, 100.0, 140.0],
            ),
            cell(
                "c2c-latency",
                "threads",
                "ns",
                LO,
                &[],
                placement("1c2t"),
                &[20.0, 21.0],
            ),
        ],
        vec![],
    );
    let mut b = run(
        vec![
            cell(
                "int-ops",
                "compute",
                "GOPS",
                HI,
                &[],
                placement("1c1t"),
                &tight(11.0),
            ),
            cell(
                "int-ops",
                "compute",
                "GOPS",
                HI,
                &[],
                placement("1c2t"),
                &tight(9.0),
            ),
            cell(
                "fp-ops",
                "compute",
                "GOPS",
                HI,
                &[],
                placement("1c1t"),
                &tight(12.0),
            ),
            cell(
                "null-syscall",
                "os",
                "ns",
                LO,
                &[],
                placement("1c1t"),
                &[79.0, 80.0, 81.0],
            ),
            cell(
                "mem-read",
                "memory",
                "GB/s",
                HI,
                &[("size", "1GiB")],
                placement("1c1t"),
                &[5.0],
            ),
        ],
        vec![SkippedCell {
            key: CellKey {
                benchmark: "c2c-latency".into(),
                params: BTreeMap::new(),
                conditions: Default::default(),
                placement: "1c2t".into(),
            },
            reason: "needs 2 CPUs".into(),
        }],
    );
    b.run.id = 8;
    b.run.environment.hostname = Some("other-host".into());
    b.run.environment.smt_control = Some("off".into());
    (a, b)
}

#[test]
fn compare_geomean_of_known_ratios() {
    let (a, b) = pair();
    let c = smtlab_report::compare(&a, &b);
    let compute = c.groups.iter().find(|g| g.group == "compute").unwrap();
    assert_eq!(compute.rows, 3);
    let want = (1.1f64 * 0.9 * 1.2).powf(1.0 / 3.0);
    assert!(
        close(compute.speedup.unwrap(), want),
        "{:?}",
        compute.speedup
    );
    // One unit and direction: the A and B columns are geometric means of the values.
    assert_eq!(compute.unit.as_deref(), Some("GOPS"));
    assert!(close(compute.a.unwrap(), 10.0));
    assert!(close(
        compute.b.unwrap(),
        (11.0f64 * 9.0 * 12.0).powf(1.0 / 3.0)
    ));
    // Overall: those three and the latency row (ratio of means 113 / 80).
    assert_eq!(c.overall.rows, 4);
    let all = (1.1f64 * 0.9 * 1.2 * (113.0 / 80.0)).powf(0.25);
    assert!(close(c.overall.speedup.unwrap(), all));
    assert_eq!(c.overall.unit, None);
    // Groups in the fixed order, not run order.
    let names: Vec<&str> = c.groups.iter().map(|g| g.group.as_str()).collect();
    assert_eq!(names, ["compute", "os"]);
}

#[test]
fn compare_flips_direction_for_latency_and_uses_the_mean() {
    let (a, b) = pair();
    let c = smtlab_report::compare(&a, &b);
    let row = c
        .rows
        .iter()
        .find(|r| r.benchmark == "null-syscall")
        .unwrap();
    // The speed-up is a ratio of means, so the values shown are the means: 113 and 80.
    assert_eq!(row.statistic, Statistic::Mean);
    assert_eq!((row.a, row.b), (113.0, 80.0));
    assert!(close(row.speedup.unwrap(), 113.0 / 80.0));
    assert!(close(row.speedup_pct.unwrap(), 41.25));
    let int = c.rows.iter().find(|r| r.benchmark == "int-ops").unwrap();
    assert_eq!(int.statistic, Statistic::Mean);
    assert!(close(int.speedup_pct.unwrap(), 10.0));
}

#[test]
fn compare_significance_follows_the_speedup_interval() {
    let (a, b) = pair();
    let c = smtlab_report::compare(&a, &b);
    let int = c.rows.iter().find(|r| r.benchmark == "int-ops").unwrap();
    assert_eq!(int.significant(), Some(true));
    // Overlapping noisy samples: a 2% difference of means is not significant.
    let noisy_a = run(
        vec![cell(
            "x",
            "compute",
            "GOPS",
            HI,
            &[],
            placement("1c1t"),
            &[10.0, 12.0, 8.0],
        )],
        vec![],
    );
    let noisy_b = run(
        vec![cell(
            "x",
            "compute",
            "GOPS",
            HI,
            &[],
            placement("1c1t"),
            &[10.7, 8.5, 11.4],
        )],
        vec![],
    );
    let c2 = smtlab_report::compare(&noisy_a, &noisy_b);
    assert_eq!(c2.rows[0].significant(), Some(false));
    // The interval is the one speed-up every output prints for this pair, and it
    // includes 1.
    let r = c2.rows[0].interval.unwrap();
    let same = smtlab_model::stats::speedup(
        &noisy_a.cells[0].result.summary,
        &noisy_b.cells[0].result.summary,
        HI,
    )
    .unwrap();
    assert_eq!(r, same);
    assert!(r.ci95_low.unwrap() < 1.0 && 1.0 < r.ci95_high.unwrap());
    assert_eq!(
        c2.rows[0].significance,
        Some(smtlab_model::stats::Significance::NotSignificant)
    );
    // One sample on a side: unknown, not "no".
    let one = run(
        vec![cell(
            "x",
            "compute",
            "GOPS",
            HI,
            &[],
            placement("1c1t"),
            &[10.0],
        )],
        vec![],
    );
    assert_eq!(
        smtlab_report::compare(&one, &noisy_b).rows[0].significant(),
        None
    );
}

#[test]
fn compare_lists_cells_measured_in_one_run() {
    let (a, b) = pair();
    let c = smtlab_report::compare(&a, &b);
    assert_eq!(c.rows.len(), 4);
    assert_eq!(c.missing.len(), 2);
    let only_a = &c.missing[0];
    assert_eq!(
        (only_a.benchmark.as_str(), only_a.only_in),
        ("c2c-latency", Side::A)
    );
    assert_eq!(only_a.other_skipped.as_deref(), Some("needs 2 CPUs"));
    let only_b = &c.missing[1];
    assert_eq!(
        (only_b.benchmark.as_str(), only_b.only_in),
        ("mem-read", Side::B)
    );
    assert_eq!(only_b.other_skipped, None);
    let fields: Vec<&str> = c.env_diffs.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(fields, ["hostname", "smt_control"]);
}

#[test]
fn cpus_that_hand_a_line_over_differently_are_another_setup_and_hold_back_multi_cpu_rows() {
    let (mut a, mut b) = pair();
    b.run.environment = a.run.environment.clone();
    b.run.topology = a.run.topology.clone();
    b.run.plan = a.run.plan.clone();
    let h = |to_cpu, ns| smtlab_model::Handoff {
        from_cpu: 0,
        to_cpu,
        ns,
    };
    // Measured on a 2-vCPU guest before and after its host moved the vCPUs apart.
    a.run.environment.cpu_handoff = vec![h(1, 24.6)];
    b.run.environment.cpu_handoff = vec![h(1, 246.5)];
    let c = smtlab_report::compare(&a, &b);
    let d = c
        .env_diffs
        .iter()
        .find(|d| d.field == "cpu_handoff")
        .unwrap();
    assert_eq!(
        (d.a.as_deref(), d.b.as_deref()),
        (Some("CPU 0-1 25 ns"), Some("CPU 0-1 246 ns"))
    );
    let text = smtlab_report::compare_table(&c);
    assert!(
        text.contains("differs: cpu_handoff: CPU 0-1 25 ns | CPU 0-1 246 ns"),
        "{text}"
    );
    assert!(!smtlab_report::between::same_setup(&a, &b));
    let md = smtlab_report::compare_markdown(&a, &b, &c);
    assert!(
        md.contains("| cache-line handoff | CPU 0-1 25 ns | CPU 0-1 246 ns |"),
        "{md}"
    );
    // One host, its CPUs placed otherwise: the row on two CPUs is not compared, the
    // one-CPU rows are.
    let row = |c: &smtlab_report::Comparison, bench: &str, placement: &str| {
        let found = c
            .rows
            .iter()
            .find(|r| r.benchmark == bench && r.placement == placement);
        found.unwrap().clone()
    };
    let two = row(&c, "int-ops", "1c2t");
    assert_eq!(
        two.unsteady.as_deref(),
        Some(smtlab_report::compare::SHARING_MOVED)
    );
    assert_eq!(
        two.significance,
        Some(smtlab_model::stats::Significance::Unsteady)
    );
    assert!(
        text.contains("unsteady (CPUs moved between runs)"),
        "{text}"
    );
    assert!(c.cpus_moved);
    let note = smtlab_report::compare::CPUS_MOVED_NOTE;
    assert!(text.contains(note), "{text}");
    let page = smtlab_report::compare_html(&a, &b, &c);
    assert!(
        page.contains(note),
        "the page says why its rows are left out"
    );
    assert!(smtlab_report::compare_markdown(&a, &b, &c).contains(note));
    let one = row(&c, "int-ops", "1c1t");
    assert_eq!(one.unsteady, None);
    assert_eq!(
        one.significance,
        Some(smtlab_model::stats::Significance::Faster)
    );
    // Two hosts: the sharing is part of what is compared.
    b.run.environment.hostname = Some("another-host".into());
    let c = smtlab_report::compare(&a, &b);
    let two = row(&c, "int-ops", "1c2t");
    assert_eq!(two.unsteady, None);
    assert!(!c.cpus_moved);
    assert!(!smtlab_report::compare_table(&c).contains(note));
    assert_eq!(
        two.significance,
        Some(smtlab_model::stats::Significance::Slower)
    );
    b.run.environment.hostname = a.run.environment.hostname.clone();
    // The same pair measured again a little slower is the same setup.
    b.run.environment.cpu_handoff = vec![h(1, 31.0)];
    let c = smtlab_report::compare(&a, &b);
    assert!(c.env_diffs.is_empty());
    assert!(smtlab_report::between::same_setup(&a, &b));
    let md = smtlab_report::compare_markdown(&a, &b, &c);
    assert!(!md.contains("cache-line handoff"), "{md}");
}

#[test]
fn compare_table_and_json() {
    let (a, b) = pair();
    let c = smtlab_report::compare(&a, &b);
    let text = smtlab_report::compare_table(&c);
    insta::assert_snapshot!("compare_table_pair", text);
    let json: serde_json::Value = serde_json::from_str(&smtlab_report::compare_json(&c)).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 4);
    assert_eq!(json["missing"][0]["only_in"], "A");
    assert_eq!(json["rows"][0]["statistic"], "mean");
}

#[test]
fn compare_of_disjoint_runs_says_so() {
    let a = run(
        vec![cell(
            "x",
            "compute",
            "GOPS",
            HI,
            &[],
            placement("1c1t"),
            &[1.0, 1.1],
        )],
        vec![],
    );
    let b = run(vec![], vec![]);
    let c = smtlab_report::compare(&a, &b);
    assert!(c.rows.is_empty() && c.overall.speedup.is_none());
    let text = smtlab_report::compare_table(&c);
    assert!(text.contains("no cell was measured in both runs"), "{text}");
    assert!(text.contains("x - on 1c1t: only in A"), "{text}");
}

// ---------------------------------------------------------------- HTML

/// The sections the demo run fills (it has no counters and no `exec` command).
const SECTIONS: [&str; 8] = [
    "machine",
    "smt-yield",
    "scaling",
    "sweeps",
    "latency",
    "os-latency",
    "cells",
    "skipped",
];

/// Parses the page as XML (every tag closed and matched, every `&` an entity) and
/// returns the elements with their attributes.
fn elements(page: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut reader = Reader::from_str(page);
    let mut out = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Eof) => break,
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                let attrs = e
                    .attributes()
                    .map(|a| {
                        let a = a.expect("well-formed attribute");
                        (
                            String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                            a.unescape_value().expect("known entities").into_owned(),
                        )
                    })
                    .collect();
                out.push((name, attrs));
            }
            Ok(Event::GeneralRef(r)) => {
                let name = String::from_utf8(r.to_vec()).unwrap();
                assert!(
                    ["amp", "lt", "gt", "quot", "apos"].contains(&name.as_str())
                        || name.starts_with('#'),
                    "entity &{name}; is not XML"
                );
            }
            Ok(_) => {}
            Err(e) => panic!(
                "not well-formed at byte {}: {e}\n{}",
                reader.buffer_position(),
                &page[(reader.buffer_position() as usize).saturating_sub(200)
                    ..(reader.buffer_position() as usize + 50).min(page.len())]
            ),
        }
    }
    out
}

/// The markup of one section (sections do not nest).
fn section<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no section {id}"));
    let end = page[start..].find("</section>").unwrap() + start;
    &page[start..end]
}

#[test]
fn html_is_well_formed_with_every_section() {
    let page = smtlab_report::html(&demo());
    let els = elements(&page);
    let ids: Vec<&str> = els
        .iter()
        .filter_map(|(_, a)| a.get("id").map(String::as_str))
        .collect();
    for s in SECTIONS {
        assert!(ids.contains(&s), "section {s} missing");
    }
    assert!(page.starts_with("<!DOCTYPE html>"));
    // Sections without data are named once, with the reason, and not drawn empty.
    assert!(!ids.contains(&"counters") && !ids.contains(&"exec"));
    let absent = page
        .split("<summary>Not in this run: ")
        .nth(1)
        .unwrap_or("");
    assert!(
        absent.starts_with("Verdict, SMT off vs on, Counters"),
        "{}",
        &absent[..absent.len().min(120)]
    );
    assert!(page.contains("<li>Counters: not recorded (use --counters)</li>"));
    // Every table scrolls in its own box.
    assert_eq!(
        page.matches("<table").count(),
        page.matches("<div class=\"scroll\"><table").count()
    );
    // The demo's invented numbers are announced on the page.
    assert!(section(&page, "machine").contains("synthetic demo data"));
}

#[test]
fn html_makes_no_external_requests() {
    let page = smtlab_report::html(&demo());
    let stripped = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!stripped.contains("http://"), "external reference");
    assert!(!stripped.contains("https://"), "external reference");
    assert!(!stripped.contains("<script"));
    assert!(!stripped.contains("<link"));
    assert!(!stripped.contains("@import"));
    for (name, attrs) in elements(&page) {
        for key in ["src", "href"] {
            if let Some(v) = attrs.get(key) {
                assert!(v.starts_with('#'), "<{name} {key}=\"{v}\"> leaves the page");
            }
        }
    }
}

#[test]
fn html_charts_draw_what_was_measured() {
    let page = smtlab_report::html(&demo());
    let scaling = section(&page, "scaling");
    // int-ops auto, int-ops explicit, fp-ops, mem-read, mem-latency 1GiB; the
    // working-set sweep is not here but one chart of its own.
    assert_eq!(scaling.matches("<svg").count(), 5);
    assert!(scaling.contains("<path d=\"M"));
    assert!(scaling.contains("<circle"));
    assert!(scaling.contains("2 threads/core"));
    assert!(scaling.contains("all/linear"));
    // Labelled points: each int-ops point of the explicit chart carries its value.
    assert!(scaling.contains("font-size=\"9.5\""));
    assert!(!scaling.contains("size=4KiB"));
    let sweeps = section(&page, "sweeps");
    assert_eq!(sweeps.matches("<svg").count(), 1);
    // One curve per placement, the demo machine's caches marked, sizes on the axis.
    assert!(sweeps.contains(">1c1t</text>") && sweeps.contains(">2c1t</text>"));
    for cache in ["L1d 48 KiB", "L2 2 MiB", "L3 16 MiB"] {
        assert!(sweeps.contains(cache), "{cache}");
    }
    assert!(sweeps.contains(">64 KiB</text>") && sweeps.contains(">64 MiB</text>"));
    let latency = section(&page, "latency");
    // Three benchmarks with series, two overlaid distributions each, then one scatter
    // per cell (six cells) behind a <details>.
    assert_eq!(latency.matches("<svg").count(), 3 * 2 + 6);
    assert!(latency.contains("% of events at or below"));
    assert!(latency.contains("<details>"));
    assert!(latency.contains("y = x"));
    assert!(latency.contains("log scale"));
    let os = section(&page, "os-latency");
    assert!(os.contains("Process fork+/bin/sh -c"));
    // A single quote needs no escape in text or in a double-quoted attribute.
    assert!(os.contains("Select on 10 tcp fd's"));
    // 62 ns shows as 0.06 us.
    assert!(os.contains("0.06"));
    let yields = section(&page, "smt-yield");
    assert!(yields.contains("class=\"strip\""));
    let cells = section(&page, "cells");
    let d = demo();
    let benchmarks: std::collections::BTreeSet<&str> =
        d.cells.iter().map(|c| c.benchmark.as_str()).collect();
    // One collapsed table per benchmark: a header row each, and a row per cell.
    assert_eq!(cells.matches("<details>").count(), benchmarks.len());
    assert_eq!(
        cells.matches("<tr>").count(),
        benchmarks.len() + d.cells.len()
    );
    assert!(section(&page, "skipped").contains("needs 2 or more pinned CPUs"));
}

#[test]
fn html_escapes_everything_from_the_results() {
    let mut r = demo();
    let evil = "<script>alert(\"x\")</script> & 'co'";
    r.run.environment.hostname = Some(evil.into());
    r.run.environment.kernel = Some("6.1 <b>".into());
    r.run.command_line = vec!["smtlab".into(), evil.into()];
    r.run.notes.push(evil.into());
    r.cells[0].benchmark = "a<b&\"c\"".into();
    r.cells[0].params.insert("k<".into(), "v&\"".into());
    r.skipped[0].reason = evil.into();
    // XML allows no control character but tab and newline: the page replaces them.
    r.run.environment.kernel = Some("6.1 <b>\u{1}\u{7f}".into());
    let page = smtlab_report::html(&r);
    elements(&page);
    assert!(!page.contains("<script>"));
    assert!(!page.contains("<b>\""));
    // Every attribute is double-quoted, so a single quote is left as it is.
    assert!(page.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; 'co'"));
    assert!(page.contains("6.1 &lt;b&gt;\u{fffd}\u{fffd}"));
    assert!(page.contains("a&lt;b&amp;&quot;c&quot;"));
}

#[test]
fn html_without_data_says_not_measured() {
    let mut r = run(vec![], vec![]);
    r.run.topology.smt.threads_per_core_max = 1;
    r.run.topology.smt.threads_per_core_min = 1;
    r.run.topology.smt.control = Some("off".into());
    r.run.environment.kernel = None;
    let page = smtlab_report::html(&r);
    let els = elements(&page);
    // No empty section: each is left out and named once with its reason.
    let ids: Vec<&str> = els
        .iter()
        .filter_map(|(_, a)| a.get("id").map(String::as_str))
        .collect();
    for s in [
        "exec",
        "smt-yield",
        "scaling",
        "sweeps",
        "latency",
        "os-latency",
        "counters",
        "cells",
        "skipped",
    ] {
        assert!(!ids.contains(&s), "empty section {s} drawn");
    }
    assert_eq!(page.matches("<svg").count(), 1, "only the topology picture");
    let absent = &page[page.find("id=\"absent\"").unwrap()..];
    let absent = &absent[..absent.find("</details>").unwrap()];
    for reason in [
        "SMT yield: no cell was measured",
        "Scaling: no compute or memory benchmark",
        "Latency distributions: no per-event times",
        "OS latencies: no os benchmark",
        "Counters: not recorded (use --counters)",
        "All cells: no cell was measured",
        "Skipped: none, every planned cell was measured",
    ] {
        assert!(absent.contains(reason), "{reason}: {absent}");
    }
    let machine = section(&page, "machine");
    assert!(
        machine.contains("no SMT visible (smt/control: off)"),
        "{machine}"
    );
    assert!(
        machine.contains("unknown"),
        "a missing kernel is said to be unknown"
    );
}

/// Counters as `--counters` records them: software events, `/proc/stat` time in a
/// start-up and a steady interval; with `pmu`, cycles and instructions too.
fn counters(pmu: bool) -> smtlab_model::counters::CellCounters {
    use smtlab_model::counters::derived::Work;
    use smtlab_model::counters::os_time::{CpuTicks, CpuTicksOf, OsTimeInterval, OsTimeSeries};
    use smtlab_model::counters::{
        CellCounters, CountMode, CounterEvent, CounterTarget, CounterValues, Reading,
    };
    let mut v = CounterValues::new(CounterTarget::Thread {
        tid: 0,
        inherit: true,
    });
    v.set(
        CounterEvent::TaskClock,
        CountMode::All,
        Reading::exact(8_000_000),
    );
    v.set(
        CounterEvent::ContextSwitches,
        CountMode::All,
        Reading::exact(4),
    );
    v.set(
        CounterEvent::CpuMigrations,
        CountMode::All,
        Reading::exact(0),
    );
    v.set(CounterEvent::PageFaults, CountMode::All, Reading::exact(12));
    if pmu {
        v.set(
            CounterEvent::Cycles,
            CountMode::All,
            Reading::new(24_000_000, 2, 1),
        );
        v.set(
            CounterEvent::Instructions,
            CountMode::All,
            Reading::exact(16_000_000),
        );
    }
    let mut c = CellCounters::new(
        "measured samples (calibration and warm-up excluded)",
        v,
        Some(Work {
            amount: 40_000.0,
            unit: "op".into(),
        }),
    );
    if !pmu {
        c.hardware_unavailable =
            Some("hardware counters not supported: this KVM guest exposes no PMU".into());
    }
    let iv = |start_ms: u64, end_ms: u64, user, system, idle| OsTimeInterval {
        start_ns: start_ms * 1_000_000,
        end_ns: end_ms * 1_000_000,
        per_cpu: vec![CpuTicksOf {
            cpu: 0,
            ticks: CpuTicks {
                user,
                system,
                idle,
                ..CpuTicks::default()
            },
        }],
    };
    c.os_time = Some(OsTimeSeries {
        user_hz: 100,
        interval_ns: 100_000_000,
        cpus: [0].into_iter().collect(),
        intervals: vec![iv(0, 100, 2, 6, 2), iv(100, 200, 9, 1, 0)],
    });
    c.steady_from_ns = Some(80_000_000);
    if pmu {
        use smtlab_model::counters::syscalls::{SyscallGroup, SyscallProfile, SyscallStat};
        c.syscalls = Some(SyscallProfile {
            target: CounterTarget::Thread {
                tid: 0,
                inherit: true,
            },
            duration_ns: 3_000_000,
            syscalls: vec![SyscallStat {
                nr: 110,
                name: Some("getppid".into()),
                group: SyscallGroup::Process,
                calls: 1000,
                completed: 1000,
                wall_ns: 250_000,
                max_wall_ns: 900,
                cpu_ns: Some(200_000),
                switched_out: 3,
            }],
            unmatched_exits: 1,
            unfinished: 0,
            lost_records: 0,
            switches_traced: true,
        });
        c.syscalls_window = Some("one extra sample of 1000 iterations".into());
        use smtlab_model::counters::irqs::{IrqKind, IrqProfile, IrqStat};
        c.irqs = Some(IrqProfile {
            cpus: [0].into_iter().collect(),
            duration_ns: 3_000_000,
            stats: vec![IrqStat {
                kind: IrqKind::Softirq,
                vector: 3,
                name: "NET_RX".into(),
                count: 40,
                cpu_ns: 30_000,
                max_ns: 2_000,
            }],
            traced: vec!["irq:softirq".into()],
            unmatched: 0,
            lost_records: 0,
        });
        use smtlab_model::counters::kernel_time::{CauseTime, KernelCause, KernelTimeProfile};
        let cause = |cause, completed, wall_ns, cpu_ns| CauseTime {
            cause,
            completed,
            wall_ns,
            max_wall_ns: wall_ns / completed,
            cpu_ns: Some(cpu_ns),
        };
        c.kernel_time = Some(Box::new(KernelTimeProfile {
            target: CounterTarget::Thread {
                tid: 0,
                inherit: true,
            },
            duration_ns: 3_000_000,
            task_cpu_ns: Some(4_000_000),
            causes: vec![
                cause(KernelCause::FaultUserMinor, 500, 1_200_000, 1_000_000),
                cause(KernelCause::LockWait, 3, 90_000, 20_000),
            ],
            unfinished: 0,
            unmatched_ends: 0,
            lost_records: 0,
            switches_traced: true,
            unavailable: vec![],
        }));
    } else {
        c.syscalls_unavailable = Some("tracefs is not mounted".into());
        c.kernel_time_unavailable = Some("tracefs is not mounted".into());
    }
    c
}

#[test]
fn html_counters_section_shows_what_was_counted_and_nothing_else() {
    let mut r = demo();
    r.cells[0].counters = Some(counters(false));
    let page = smtlab_report::html(&r);
    elements(&page);
    let sec = section(&page, "counters");
    assert!(sec.contains("this KVM guest exposes no PMU"), "{sec}");
    assert!(sec.contains("8.00 ms"), "task-clock: {sec}");
    assert!(sec.contains("200 ns / op"), "CPU time per op: {sec}");
    assert!(!sec.contains("CPI"), "no PMU, no CPI column: {sec}");
    assert!(
        sec.contains("not recorded"),
        "cells without counters say so"
    );
    // Start-up: 2 user, 6 system, 2 idle of 10 ticks; steady: 9 user, 1 system.
    assert!(
        sec.contains("start-up") && sec.contains("steady state"),
        "{sec}"
    );
    assert!(sec.contains(r#"<td class="num">60%</td>"#), "{sec}");
    assert!(sec.contains(r#"<td class="num">90%</td>"#), "{sec}");
    assert!(sec.contains("<rect"), "stacked bars: {sec}");
    assert!(
        sec.contains("Not measured: tracefs is not mounted"),
        "{sec}"
    );

    r.cells[1].counters = Some(counters(true));
    let page = smtlab_report::html(&r);
    elements(&page);
    let sec = section(&page, "counters");
    // cycles ran half the time: scaled x2 to 48e6, CPI 3.
    assert!(sec.contains("<th>CPI</th>"), "{sec}");
    assert!(sec.contains(r#"<td class="num">3.000</td>"#), "{sec}");
    assert!(sec.contains("cycles x2.0"), "multiplexing is shown: {sec}");
    assert!(
        sec.contains(r#"<td class="num">400.0</td>"#),
        "instructions/op: {sec}"
    );
    assert!(
        sec.contains("getppid 200.0 µs / 250.0 µs"),
        "syscalls: {sec}"
    );
    // 30 us of NET_RX in 3 ms on one CPU: 1.00%.
    assert!(sec.contains("<td>NET_RX</td>"), "{sec}");
    assert!(
        sec.contains(r#"<td class="num">1.00%</td>"#),
        "irq share: {sec}"
    );
    assert!(sec.contains("<th>CPU time</th>") && sec.contains("<th>wall time</th>"));
    // 1 ms of fault CPU time of 4 ms task clock: 25.00%; 20 us of lock waits: 0.50%.
    let causes = &sec[sec
        .find("Kernel time by cause")
        .expect("kernel time by cause")..];
    let causes = &causes[..causes.find("</table>").unwrap()];
    assert!(causes.contains("<td>user minor faults</td>"), "{causes}");
    assert!(
        causes.contains(r#"<td class="num">25.00%</td>"#),
        "{causes}"
    );
    assert!(causes.contains(r#"<td class="num">0.50%</td>"#), "{causes}");
    assert!(
        causes.contains(r#"<td class="num">2.400 µs</td>"#),
        "mean wall: {causes}"
    );
    // Only cycles and instructions were counted: no part of the CPI stack was, so no
    // stack is drawn (it would be the CPI alone, or zeros for what was not counted).
    assert!(!sec.contains("CPI stack"), "{sec}");
    assert!(sec.contains("one extra sample of 1000 iterations"), "{sec}");
    assert!(
        !sec.contains("tracefs"),
        "traced somewhere: no reason shown: {sec}"
    );
}

/// The OS-time part of the counters section from a recorded series (paper 003 Figs 1
/// and 5): iowait apart from idle in the table, the stacked chart over time with the
/// steady-state mark, and the same series as CSV, each figure checked by hand.
#[test]
fn os_time_series_chart_table_and_csv_from_recorded_ticks() {
    use smtlab_model::counters::os_time::{CpuTicks, CpuTicksOf, OsTimeInterval, OsTimeSeries};
    let mut r = demo();
    let mut c = counters(false);
    // CPU 0 and 1, three intervals of 100 ms: start-up (user 4, idle 16), then two
    // steady intervals (user 10 + system 6 + iowait 4; user 12 + softirq 2 + idle 6).
    let t = |user, system, softirq, iowait, idle| CpuTicks {
        user,
        system,
        softirq,
        iowait,
        idle,
        ..CpuTicks::default()
    };
    let iv = |k: u64, a: CpuTicks, b: CpuTicks| OsTimeInterval {
        start_ns: k * 100_000_000,
        end_ns: (k + 1) * 100_000_000,
        per_cpu: vec![
            CpuTicksOf { cpu: 0, ticks: a },
            CpuTicksOf { cpu: 1, ticks: b },
        ],
    };
    c.os_time = Some(OsTimeSeries {
        user_hz: 100,
        interval_ns: 100_000_000,
        cpus: [0, 1].into_iter().collect(),
        intervals: vec![
            iv(0, t(2, 0, 0, 0, 8), t(2, 0, 0, 0, 8)),
            iv(1, t(5, 3, 0, 2, 0), t(5, 3, 0, 2, 0)),
            iv(2, t(6, 0, 1, 0, 3), t(6, 0, 1, 0, 3)),
        ],
    });
    c.steady_from_ns = Some(100_000_000);
    r.cells[0].counters = Some(c);
    let page = smtlab_report::html(&r);
    elements(&page);
    let sec = section(&page, "counters");
    let os = &sec[sec.find("OS time of the placement").unwrap()..];
    let os = &os[..os.find("Kernel time by system call").unwrap()];
    assert!(
        os.contains("<th>iowait</th>") && os.contains("<th>idle</th>"),
        "{os}"
    );
    // Steady state: 40 ticks, user 22 = 55%, system 6 = 15%, softirq 2 = 5%,
    // iowait 4 = 10%, idle 6 = 15%.
    for pct in ["55%", "15%", "5%", "10%"] {
        assert!(
            os.contains(&format!(r#"<td class="num">{pct}</td>"#)),
            "{pct}: {os}"
        );
    }
    assert!(os.contains("over time"), "{os}");
    assert!(os.contains("steady state</text>"), "steady mark: {os}");
    assert!(os.contains("<title>iowait 20% at 100.0 ms</title>"), "{os}");
    insta::assert_snapshot!("html_os_time_series", os);

    let csv = String::from_utf8(smtlab_report::export::os_time_csv(&r)).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4, "{csv}");
    assert!(lines[0].ends_with("user,nice,system,irq,softirq,iowait,idle,steal"));
    assert!(
        lines[2].ends_with(",1,100000000,200000000,true,100,10,0,6,0,0,4,0,0"),
        "{}",
        lines[2]
    );
    assert!(lines[1].contains(",0,0,100000000,false,"), "{}", lines[1]);
    // The per-cell CSV carries the steady-state split and iowait apart.
    let cells = String::from_utf8(smtlab_report::export::csv(&r)).unwrap();
    let mut rd = csv::Reader::from_reader(cells.as_bytes());
    let head = rd.headers().unwrap().clone();
    let row = rd.records().next().unwrap().unwrap();
    let get = |k: &str| {
        row.get(head.iter().position(|h| h == k).unwrap())
            .unwrap()
            .to_string()
    };
    assert_eq!(get("os_phase"), "steady state");
    assert_eq!(get("os_ticks"), "40");
    assert_eq!(get("os_iowait"), "0.1");
    assert_eq!(get("os_user"), "0.55");
}

#[test]
fn compare_lists_counter_figures_measured_in_both_runs_only() {
    let mut a = demo();
    let mut b = demo();
    a.cells[0].counters = Some(counters(false));
    let mut faster = counters(true);
    // B: half the CPU time per op; it also has a PMU, A has not: no CPI row.
    faster.values.set(
        smtlab_model::counters::CounterEvent::TaskClock,
        smtlab_model::counters::CountMode::All,
        smtlab_model::counters::Reading::exact(4_000_000),
    );
    let faster = smtlab_model::counters::CellCounters::new(
        faster.window.clone(),
        faster.values.clone(),
        faster.work.clone(),
    );
    b.cells[0].counters = Some(faster);
    b.cells[1].counters = Some(counters(true)); // A's cell 1 has none: nothing listed.
    let c = smtlab_report::compare(&a, &b);
    let row = c
        .rows
        .iter()
        .find(|r| r.benchmark == a.cells[0].benchmark && r.placement == a.cells[0].placement_spec)
        .unwrap();
    let metrics: Vec<&str> = row.counters.iter().map(|k| k.metric.as_str()).collect();
    assert_eq!(
        metrics,
        ["CPU ns/op", "context switches/op", "page faults/op"]
    );
    assert_eq!((row.counters[0].a, row.counters[0].b), (200.0, 100.0));
    assert_eq!(row.counters[0].ratio, Some(0.5));
    assert_eq!(c.rows.iter().filter(|r| !r.counters.is_empty()).count(), 1);
    let text = smtlab_report::compare_table(&c);
    assert!(
        text.contains("counters (cells counted in both runs"),
        "{text}"
    );
    assert!(text.contains("CPU ns/op"), "{text}");
    assert!(!text.contains("CPI"), "{text}");
    assert!(smtlab_report::compare_json(&c).contains("\"CPU ns/op\""));
    // Without counters the table has no counters part.
    let plain = smtlab_report::compare_table(&smtlab_report::compare(&demo(), &demo()));
    assert!(!plain.contains("counters"), "{plain}");
}

#[test]
fn html_lists_planned_cells_an_interrupted_run_did_not_reach() {
    let mut r = demo();
    r.run.status = smtlab_model::RunStatus::Interrupted;
    r.run.plan.push(CellKey {
        benchmark: "fork-sh".into(),
        params: BTreeMap::new(),
        conditions: Default::default(),
        placement: "all".into(),
    });
    let page = smtlab_report::html(&r);
    assert!(section(&page, "machine").contains("run interrupted: 1 planned cells not measured"));
    assert!(section(&page, "skipped").contains("the run stopped before it"));
}

/// `cargo test -p smtlab-report -- --ignored write_demo_page` writes the demo page to
/// `target/smtlab-report-demo.html` for a look in a browser.
#[test]
#[ignore]
fn write_demo_page() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let path = dir.join("smtlab-report-demo.html");
    std::fs::write(&path, smtlab_report::html(&demo())).unwrap();
}

#[test]
fn a_cell_whose_level_moved_is_flagged_unsteady() {
    let p = placement("1c1t");
    // A level shift from 100 to 130 halfway: the drift (30 / 115) is far beyond the CI.
    let shifted: Vec<f64> = (0..20)
        .map(|i| if i < 10 { 100.0 } else { 130.0 } + (i % 3) as f64)
        .collect();
    let steady: Vec<f64> = (0..20).map(|i| 100.0 + (i % 3) as f64).collect();
    let moved = cell(
        "null-syscall",
        "os",
        "ns",
        Direction::Lower,
        &[],
        p.clone(),
        &shifted,
    );
    let calm = cell("read", "os", "ns", Direction::Lower, &[], p, &steady);
    let drift = moved
        .result
        .unsteady()
        .expect("a level shift of 30% is unsteady");
    assert!((drift - 30.0 / 115.5).abs() < 0.01, "{drift}");
    assert_eq!(calm.result.unsteady(), None);

    let page = smtlab_report::html(&run(vec![moved, calm], vec![]));
    assert!(
        page.contains("1 cells were unsteady"),
        "the machine section says so"
    );
}

/// No reference that leaves the page: no scheme, no protocol-relative `//` address, no
/// `@import`, no `url(` (the pages need none), no script, no link element.
fn assert_self_contained(page: &str) {
    let stripped = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for bad in [
        "http://", "https://", "@import", "url(", "<script", "<link", "<iframe", "<img",
    ] {
        assert!(!stripped.contains(bad), "external reference: {bad}");
    }
    for (name, attrs) in elements(page) {
        for key in ["src", "href", "xlink:href", "action"] {
            if let Some(v) = attrs.get(key) {
                assert!(
                    v.starts_with('#') && !v.starts_with("//"),
                    "<{name} {key}=\"{v}\"> leaves the page"
                );
            }
        }
    }
}

#[test]
fn report_and_compare_pages_are_self_contained() {
    assert_self_contained(&smtlab_report::html(&demo()));
    let (a, b) = pair();
    let c = smtlab_report::compare(&a, &b);
    assert_self_contained(&smtlab_report::compare_html(&a, &b, &c));
    let mut b2 = demo();
    b2.run.id = 9;
    let c2 = smtlab_report::compare(&demo(), &b2);
    assert_self_contained(&smtlab_report::compare_html(&demo(), &b2, &c2));
}

#[test]
fn sweep_section_snapshot() {
    let page = smtlab_report::html(&demo());
    insta::assert_snapshot!("html_sweeps_section", section(&page, "sweeps"));
}

/// A mutex hand-off whose headline (the median of per-sample means) is far above the
/// per-event median: a skewed distribution, where the page must say why they differ.
fn skewed_handoff() -> RunResults {
    let mut cells = Vec::new();
    for (p, scale) in [("1c2t", 1.0), ("2c1t", 1.6)] {
        // 40 events: most near 20 us, every fifth one slow (300 us).
        let wake: Vec<f64> = (0..40)
            .map(|i| {
                if i % 5 == 4 {
                    300_000.0 * scale
                } else {
                    (20_000.0 + 100.0 * i as f64) * scale
                }
            })
            .collect();
        let unlock: Vec<f64> = (0..40).map(|i| (300.0 + 5.0 * i as f64) * scale).collect();
        let means: Vec<f64> = wake
            .chunks(10)
            .map(|c| c.iter().sum::<f64>() / c.len() as f64)
            .collect();
        let mut c = cell(
            "mutex-handoff",
            "threads",
            "ns",
            LO,
            &[("events", "10")],
            placement(p),
            &means,
        );
        c.result.series.insert("unlock_ns".into(), unlock);
        c.result.series.insert("wake_ns".into(), wake);
        cells.push(c);
    }
    run(cells, vec![])
}

#[test]
fn latency_distributions_overlay_placements_and_explain_the_headline() {
    let page = smtlab_report::html(&skewed_handoff());
    elements(&page);
    let latency = section(&page, "latency");
    // Two overlaid CDFs (unlock, waiter) and one scatter per placement.
    assert_eq!(latency.matches("<svg").count(), 2 + 2);
    assert_eq!(latency.matches(">1c2t</text>").count(), 2);
    // The headline (mean of 10 events with 2 slow ones: 76.9 us) is far from the
    // per-event median (~21.5 us): the caption says so, with both numbers.
    assert!(latency.contains("class=\"caption\""), "{latency}");
    assert!(latency.contains("1c2t: the cell's value"));
    assert!(latency.contains("skewed"));
    insta::assert_snapshot!("html_latency_section_skewed", latency);
}

#[test]
fn topology_picture_snapshot() {
    let svg = smtlab_report::topo_svg::topology_svg(&common::topology());
    insta::assert_snapshot!("topology_svg_demo", svg);
}

#[test]
fn compare_markdown_and_sections_snapshots() {
    let (a, b) = pair();
    let c = smtlab_report::compare(&a, &b);
    let md = smtlab_report::compare_markdown(&a, &b, &c);
    // A table a Markdown renderer takes: header, alignment row, one line per row.
    assert!(md.contains("| group | benchmark |"));
    assert!(md.contains("|---|---|---|---|--:|--:|--:|--:|---|"));
    // The environments that differ come first.
    assert!(md.contains("| host | demo-host | other-host |"));
    assert!(md.contains("| SMT control | on (active: true) | off (active: true) |"));
    insta::assert_snapshot!("compare_markdown_pair", md);
    let mut sections = String::new();
    smtlab_report::compare_html::compare_sections(&mut sections, &a, &b, &c);
    insta::assert_snapshot!("compare_sections_pair", sections);
    let page = smtlab_report::compare_html(&a, &b, &c);
    elements(&page);
    // Side by side, with the differing rows marked; bars with intervals; geomeans.
    assert!(page.contains("<tr class=\"diff\"><th>SMT control</th>"));
    assert!(page.contains("Speed-up of B over A (log scale"));
    assert!(page.contains("id=\"geomeans\""));
    assert!(page.contains("Measured in one run only"));
}

#[test]
fn exec_report_has_its_verdict_and_no_empty_section() {
    let mut cells = Vec::new();
    for (p, secs) in [("1c1t", 1.0), ("1c2t", 0.8)] {
        cells.push(cell(
            "exec",
            "exec",
            "s",
            LO,
            &[("command", "sh -c true")],
            placement(p),
            &[secs * 0.99, secs, secs * 1.01, secs * 1.005, secs * 0.995],
        ));
    }
    let mut r = run(cells, vec![]);
    r.run.suite = Some("exec".into());
    let page = smtlab_report::html(&r);
    elements(&page);
    let verdict = section(&page, "exec");
    // 1.0 s against 0.8 s: 1.25x faster with SMT, interval above 1.
    assert!(
        verdict.contains("SMT (a second thread on the same core) gives +25% [+24%, +26%]"),
        "{verdict}"
    );
    assert!(!verdict.contains("not significant"));
    for empty in [
        "scaling",
        "sweeps",
        "latency",
        "os-latency",
        "counters",
        "skipped",
    ] {
        assert!(
            !page.contains(&format!("<section id=\"{empty}\">")),
            "{empty}"
        );
    }
    insta::assert_snapshot!("html_exec_verdict", verdict);
}

// ---- markdown export ------------------------------------------------------------------

#[test]
fn markdown_table_snapshot() {
    insta::assert_snapshot!(smtlab_report::markdown::cells(&demo().cells));
}

#[test]
fn markdown_has_one_row_per_cell_with_a_baseline_per_group() {
    let results = demo();
    let md = smtlab_report::markdown::cells(&results.cells);
    // The table, then the words it uses, each defined once.
    let lines: Vec<&str> = md.lines().take_while(|l| l.starts_with('|')).collect();
    assert_eq!(lines.len(), 2 + results.cells.len());
    let words = &md[lines.iter().map(|l| l.len() + 1).sum::<usize>()..];
    assert!(
        words.starts_with("\n**Words used here**\n\n- **"),
        "{words}"
    );
    let columns = lines[0].matches('|').count();
    for l in &lines {
        assert_eq!(
            l.matches('|').count() - l.matches("\\|").count(),
            columns,
            "{l}"
        );
    }
    let mut groups: Vec<(&str, &BTreeMap<String, String>)> = Vec::new();
    for c in &results.cells {
        if !groups.contains(&(c.benchmark.as_str(), &c.params)) {
            groups.push((c.benchmark.as_str(), &c.params));
        }
    }
    assert_eq!(md.matches("| baseline |").count(), groups.len());
    assert!(md.contains("x ["), "speed-ups carry their interval: {md}");
    assert!(smtlab_report::markdown::cells(&[]).lines().count() == 2);
}

#[test]
fn smt_states_pair_off_and_on_with_the_one_speedup_and_geomean_per_group() {
    let p = || placement("1c1t");
    let cells = vec![
        cell(
            "x",
            "compute",
            "GOPS",
            Direction::Higher,
            &[("smt", "off")],
            p(),
            &[10.0, 10.0, 10.0],
        ),
        cell(
            "x",
            "compute",
            "GOPS",
            Direction::Higher,
            &[("smt", "on")],
            p(),
            &[12.0, 12.0, 12.0],
        ),
        cell(
            "y",
            "compute",
            "GOPS",
            Direction::Higher,
            &[("smt", "off")],
            p(),
            &[10.0, 10.0, 10.0],
        ),
        cell(
            "y",
            "compute",
            "GOPS",
            Direction::Higher,
            &[("smt", "on")],
            p(),
            &[8.0, 8.0, 8.0],
        ),
        // Latency: lower is better, so the speed-up is off over on.
        cell(
            "z",
            "os",
            "ns",
            Direction::Lower,
            &[("smt", "off")],
            p(),
            &[100.0, 100.0, 100.0],
        ),
        cell(
            "z",
            "os",
            "ns",
            Direction::Lower,
            &[("smt", "on")],
            p(),
            &[80.0, 80.0, 80.0],
        ),
        // Only one state: no row.
        cell(
            "w",
            "os",
            "ns",
            Direction::Lower,
            &[("smt", "off")],
            p(),
            &[5.0, 5.0, 5.0],
        ),
    ];
    let (rows, means) = smtlab_report::smt_states::rows(&cells);
    let got: Vec<(String, f64)> = rows
        .iter()
        .map(|r| (r.name(), r.verdict.speedup.ratio))
        .collect();
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(close(got[0].1, 1.2) && close(got[1].1, 0.8) && close(got[2].1, 1.25));
    assert_eq!(means.len(), 2);
    assert_eq!(means[0].0, "compute");
    assert!(close(means[0].1, (1.2f64 * 0.8).sqrt()));
    assert!(close(means[1].1, 1.25));
    let text = smtlab_report::smt_states::text(&cells);
    assert!(
        text.contains("SMT off vs on") && text.contains("geometric mean, os"),
        "{text}"
    );
    let page = smtlab_report::html(&run(cells, vec![]));
    assert!(section(&page, "smt-states").contains("geometric mean, compute"));
    // A run without both states has no such section.
    let page = smtlab_report::html(&demo());
    assert!(!page.contains("id=\"smt-states\""));
}

// ---------------------------------------------------------------- A/A and real shifts

/// Runs A and B of `rows` cells each, every cell 5 samples with 3% normal noise around
/// a level of its own (half higher-, half lower-is-better); B's levels are A's made
/// `shift` times better. `seed` picks the noise.
fn noisy_pair(seed: u64, rows: usize, shift: f64) -> (RunResults, RunResults) {
    scattered_pair(seed, rows, shift, 0.03, 0.0)
}

/// As [`noisy_pair`] with `noise` the samples' relative spread and every B cell's level
/// moved by a log-normal factor of spread `scatter` of its own: what another load on
/// the machine does to a second run.
fn scattered_pair(
    seed: u64,
    rows: usize,
    shift: f64,
    noise: f64,
    scatter: f64,
) -> (RunResults, RunResults) {
    let mut rng = common::Rng::new(seed);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..rows {
        let level = 1.0 + 99.0 * rng.uniform();
        let moved = level * (scatter * rng.normal()).exp();
        let dir = if i % 2 == 0 { HI } else { LO };
        let better = match dir {
            Direction::Higher => moved * shift,
            Direction::Lower => moved / shift,
        };
        let name = format!("bench-{i:02}");
        let group = ["compute", "memory", "threads", "os"][i % 4];
        a.push(cell(
            &name,
            group,
            "u",
            dir,
            &[],
            placement("1c1t"),
            &rng.around(level, noise, 5),
        ));
        b.push(cell(
            &name,
            group,
            "u",
            dir,
            &[],
            placement("1c1t"),
            &rng.around(better, noise, 5),
        ));
    }
    (run(a, vec![]), run(b, vec![]))
}

#[test]
fn an_a_a_comparison_says_no_difference_and_no_row_is_significant() {
    let (a, b) = noisy_pair(1, 64, 1.0);
    let c = smtlab_report::compare(&a, &b);
    assert_eq!(c.rows.len(), 64);
    assert_eq!(c.correction, "benjamini-hochberg");
    assert_eq!(
        c.overall.significance,
        Some(smtlab_model::stats::Significance::NotSignificant),
        "{}",
        c.overall.headline()
    );
    let (lo, hi) = (c.overall.ci95_low.unwrap(), c.overall.ci95_high.unwrap());
    // The rows alone pin the mean to about 1.5%; a whole run's between-run shift (the
    // default floor, 1% a run) widens it to about 6% from end to end.
    assert!(lo < 1.0 && 1.0 < hi && hi / lo < 1.07, "[{lo}, {hi}]");
    assert!(
        c.overall.headline().starts_with("no difference: "),
        "{}",
        c.overall.headline()
    );
    assert!(
        c.rows.iter().all(|r| r.significant() == Some(false)),
        "a row is significant"
    );
    let text = smtlab_report::compare_table(&c);
    assert!(text.contains("overall: no difference: "), "{text}");
    assert!(
        !text.contains("] faster") && !text.contains("] slower"),
        "{text}"
    );
    // Over many A/A pairs the corrected rows almost never fire, and the headline's
    // interval holds 1 about 95% of the time: the error rates are what they claim.
    // These pairs have no between-run drift, so the within-run test alone is checked
    // (`--between-runs none`); with the default floor added it fires less still.
    let (mut comparisons_fired, mut raw_fired, mut headlines_fired) = (0, 0, 0);
    for seed in 100..300 {
        let (a, b) = noisy_pair(seed, 64, 1.0);
        let c = smtlab_report::compare_with(&a, &b, smtlab_report::BetweenRuns::none());
        comparisons_fired += usize::from(c.rows.iter().any(|r| r.significant() == Some(true)));
        raw_fired += c
            .rows
            .iter()
            .filter(|r| r.p_value.is_some_and(|p| p < 0.05))
            .count();
        headlines_fired += usize::from(c.overall.significance.unwrap().significant() == Some(true));
    }
    // 200 x 64 rows at 5%: about 640 uncorrected false positives. Corrected, about 5%
    // of the comparisons have any, and the headline differs in about 5% of them.
    assert!(
        raw_fired > 400,
        "the uncorrected test fires {raw_fired} times"
    );
    assert!(
        comparisons_fired <= 18,
        "{comparisons_fired} of 200 A/A comparisons call a row different"
    );
    assert!(
        headlines_fired <= 18,
        "{headlines_fired} of 200 A/A headlines differ"
    );
}

#[test]
fn the_scatter_between_runs_is_measured() {
    // Tight cells (1% noise) whose levels moved 6% between the runs.
    let (a, b) = scattered_pair(3, 64, 1.0, 0.01, 0.06);
    let c = smtlab_report::compare(&a, &b);
    let s = c.between_runs_scatter.unwrap();
    assert!((0.04..0.08).contains(&s), "scatter {s}");
    assert!(smtlab_report::compare_table(&c).contains("between-run scatter: rows differ by "));
    // The headline's interval, over the rows, holds it: no difference.
    assert_eq!(
        c.overall.significance,
        Some(smtlab_model::stats::Significance::NotSignificant),
        "{}",
        c.overall.headline()
    );
    // Rows that agree within their intervals have little: with 5 samples a cell their
    // own variances are rough, which leaves the estimate about 1% above zero.
    let (a, b) = noisy_pair(1, 64, 1.0);
    let s = smtlab_report::compare(&a, &b).between_runs_scatter.unwrap();
    assert!(s < 0.02, "scatter {s}");
}

#[test]
fn a_real_ten_percent_shift_is_found() {
    let (a, b) = noisy_pair(19, 64, 1.10);
    let c = smtlab_report::compare(&a, &b);
    assert_eq!(
        c.overall.significance,
        Some(smtlab_model::stats::Significance::Faster),
        "{}",
        c.overall.headline()
    );
    let g = c.overall.speedup.unwrap();
    assert!((1.08..1.12).contains(&g), "{g}");
    assert!(c.overall.ci95_low.unwrap() > 1.0);
    assert!(c.overall.headline().starts_with("B faster: "));
    let found = c
        .rows
        .iter()
        .filter(|r| r.significant() == Some(true))
        .count();
    // Each row's test holds what runs of one setup differ by (the default floor) as
    // well as its 5 samples' error, so a few rows of 10% stay within it.
    assert!(
        found >= 52,
        "only {found} of 64 rows found the 10% shift after correction"
    );
    assert!(
        c.rows
            .iter()
            .all(|r| r.speedup.unwrap() > 1.0 || r.significant() != Some(true))
    );
    // And a 10% loss the other way.
    let (a, b) = noisy_pair(19, 64, 1.0 / 1.10);
    let c = smtlab_report::compare(&a, &b);
    assert_eq!(
        c.overall.significance,
        Some(smtlab_model::stats::Significance::Slower)
    );
}

#[test]
fn unsteady_cells_are_neither_faster_nor_slower_and_stay_out_of_the_means() {
    let (a, mut b) = noisy_pair(5, 16, 1.0);
    // B's first cell sampled at two speeds (4x apart): its mean is no level it repeats.
    let wild = [10.0, 40.0, 11.0, 42.0, 39.0];
    let first = &mut b.cells[0];
    *first = cell(
        &first.benchmark.clone(),
        &first.group.clone(),
        "u",
        first.direction,
        &[],
        placement("1c1t"),
        &wild,
    );
    // B's second cell: two rounds whose intervals do not overlap.
    let second = &mut b.cells[1];
    let mean = second.result.summary.mean;
    let round = |m: f64| smtlab_model::Round {
        summary: smtlab_model::stats::summarize(&[m * 0.99, m, m * 1.01]).unwrap(),
        converged: true,
        iterations: 1000,
        wall_ns: 1,
    };
    second.result.rounds = vec![round(mean), round(mean * 1.5)];
    let c = smtlab_report::compare(&a, &b);
    for r in &c.rows[..] {
        if r.benchmark == "bench-00" || r.benchmark == "bench-01" {
            assert_eq!(
                r.significance,
                Some(smtlab_model::stats::Significance::Unsteady),
                "{r:?}"
            );
            assert!(r.unsteady.as_deref().unwrap().starts_with("B: "), "{r:?}");
            assert!(
                r.speedup_text().contains("unsteady (B: "),
                "{}",
                r.speedup_text()
            );
        }
    }
    assert!(c.rows[0].unsteady.as_deref().unwrap().contains("CV "));
    assert!(c.rows.iter().any(|r| {
        r.unsteady
            .as_deref()
            .is_some_and(|u| u.contains("rounds disagree"))
    }));
    assert_eq!((c.overall.rows, c.overall.unsteady), (14, 2));
    assert!(c.overall.headline().ends_with("; 2 unsteady rows left out"));
    assert_eq!(
        c.overall.significance,
        Some(smtlab_model::stats::Significance::NotSignificant)
    );
}

// ---------------------------------------------------------------- single-threaded pairs

/// `c` with every sample run on `cpus` only (one measuring thread, the rest idle).
fn ran_on(mut c: smtlab_model::CellRecord, cpus: &[u32]) -> smtlab_model::CellRecord {
    for s in &mut c.result.samples {
        s.cpus = cpus.to_vec();
    }
    c
}

#[test]
fn a_single_threaded_benchmark_on_1c2t_is_no_smt_yield() {
    let lat = |p: &str, v: &[f64]| cell("null-syscall", "os", "ns", LO, &[], placement(p), v);
    let ops = |p: &str, v: &[f64]| cell("int-ops", "compute", "GOPS", HI, &[], placement(p), v);
    let r = run(
        vec![
            ran_on(lat("1c1t", &[100.0, 101.0, 99.0]), &[0]),
            // One thread on 1c2t, its sibling idle: the same work, measured again.
            ran_on(lat("1c2t", &[110.0, 111.0, 109.0]), &[0]),
            ran_on(lat("2c1t", &[100.0, 101.0, 99.0]), &[0]),
            ran_on(lat("2c2t", &[100.0, 101.0, 99.0]), &[0]),
            ops("1c1t", &[10.0, 10.1, 9.9]),
            ops("1c2t", &[13.0, 13.1, 12.9]),
        ],
        vec![],
    );
    let rows = smtlab_report::smt_yields(&r);
    let null = rows.iter().find(|y| y.benchmark == "null-syscall").unwrap();
    let y = null.get(PairKind::SmtYield).unwrap();
    assert!(y.idle_sibling, "{y:?}");
    assert_eq!(y.text(), "single-threaded");
    assert!(null.get(PairKind::DualCoreSmtGain).unwrap().idle_sibling);
    let int = rows.iter().find(|y| y.benchmark == "int-ops").unwrap();
    assert!(!int.get(PairKind::SmtYield).unwrap().idle_sibling);
    assert!(
        int.get(PairKind::SmtYield)
            .unwrap()
            .text()
            .ends_with("faster")
    );

    let table = smtlab_report::yield_table(&rows);
    let line = table
        .lines()
        .find(|l| l.starts_with("null-syscall"))
        .unwrap();
    assert!(line.contains("single-threaded"), "{line}");
    assert!(!line.contains("slower") && !line.contains("0.90"), "{line}");
    assert!(
        table.contains("1c2t = 1c1t with an idle sibling"),
        "{table}"
    );

    let html = smtlab_report::html(&r);
    let sec = &html[html.find("<section id=\"smt-yield\">").unwrap()..];
    let sec = &sec[..sec.find("</section>").unwrap()];
    let row = &sec[sec.find("<td>null-syscall</td>").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains(">single-threaded</td>") && !row.contains("slower"),
        "{row}"
    );

    // The Markdown table says what the 1c2t cell is rather than a speed-up.
    let md = smtlab_report::markdown::cells(&r.cells);
    let line = md
        .lines()
        .find(|l| l.contains("`null-syscall`") && l.contains("| 1c2t |"))
        .unwrap();
    assert!(
        line.contains("single-threaded: 1c1t with an idle sibling"),
        "{line}"
    );
    // And the pair list the JSON carries has no verdict for it.
    let pairs = smtlab_model::verdict::pairs(&r.cells);
    let p = pairs
        .iter()
        .find(|p| {
            p.benchmark == "null-syscall" && p.kind == smtlab_model::verdict::PairKind::SmtYield
        })
        .unwrap();
    assert!(p.idle_sibling && p.verdict.is_none());
}

#[test]
fn a_run_without_a_time_limit_per_cell_says_so() {
    let mut r = run(vec![], vec![]);
    r.run.config.max_cell_ns = u64::MAX;
    let page = smtlab_report::html(&r);
    assert!(page.contains("no time limit per cell"), "{page}");
    assert!(!page.contains("18446744073"), "u64::MAX shown as seconds");
    r.run.config.max_cell_ns = 2_500_000_000;
    assert!(smtlab_report::html(&r).contains("at most 2.5 s per cell"));
}

#[test]
fn co_run_cells_and_lone_points_draw_no_scaling_chart() {
    let one = |params: &[(&str, &str)], p: &str| {
        cell(
            "int-ops",
            "compute",
            "GOPS",
            Direction::Higher,
            params,
            placement(p),
            &[10.0, 10.1, 9.9, 10.0],
        )
    };
    // A co-run group on two placements, and one plain cell: nothing scales.
    let corun = [("corun_form", "sibling"), ("corun_partner", "mem-read")];
    let r = run(
        vec![one(&corun, "1c1t"), one(&corun, "1c2t"), one(&[], "1c1t")],
        vec![],
    );
    let page = smtlab_report::html(&r);
    assert!(!page.contains("<section id=\"scaling\""), "{page}");
    // Two placements of the plain benchmark: a chart.
    let r = run(vec![one(&[], "1c1t"), one(&[], "1c2t")], vec![]);
    assert!(smtlab_report::html(&r).contains("<section id=\"scaling\""));
}

/// A run stored before a workload gained a parameter lacks it in its keys; read with a
/// catalog that declares it, its cells take the default and still pair with a newer
/// run's cells in `compare` (no "only in A / only in B" rows).
#[test]
fn compare_pairs_a_run_stored_before_a_parameter_existed() {
    let web = |params: &[(&str, &str)], samples: &[f64]| {
        cell(
            "web-static",
            "web",
            "Mbit/s",
            Direction::Higher,
            params,
            placement("1c1t"),
            samples,
        )
    };
    let mut info = common::entry("web-static", Default::default(), None);
    for (name, default) in [("server", "event"), ("irq", "none")] {
        info.params.push(smtlab_model::ParamInfo {
            departs: Vec::new(),
            name: name.into(),
            default: default.into(),
            quick: None,
            help: String::new(),
        });
    }
    let mut old = run(vec![web(&[("server", "event")], &[100.0, 101.0])], vec![]);
    let mut new = run(
        vec![web(
            &[("server", "event"), ("irq", "none")],
            &[110.0, 111.0],
        )],
        vec![],
    );
    // The catalog as this build knows it (the test helper described them with another).
    old.benchmarks.clear();
    new.benchmarks.clear();
    old.describe([info.clone()]);
    new.describe([info]);
    assert_eq!(
        old.cells[0].params.get("irq").map(String::as_str),
        Some("none")
    );
    let c = smtlab_report::compare(&old, &new);
    assert!(c.missing.is_empty(), "{:?}", c.missing);
    assert_eq!(c.rows.len(), 1);
    // A value the old run did set is kept, not overwritten by the default.
    assert_eq!(old.cells[0].params["server"], "event");
}
