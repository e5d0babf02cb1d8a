use std::collections::BTreeMap;

use smtlab_model::keys::{CookieScope, SecurityMode};
use smtlab_model::{CellKey, SampleRecord};

use super::*;

/// A cell of `int-ops` in `mode` whose samples are `values`, each with the forced-idle
/// share `idle`.
fn cell(mode: SecurityMode, values: &[f64], idle: f64) -> CellRecord {
    let mut c = smtlab_fixtures::build::cell_of(
        "int-ops",
        BTreeMap::new(),
        mode.conditions(CookieScope::Thread),
        "all",
        (1, 2),
        values,
    );
    c.result.samples = values
        .iter()
        .map(|v| SampleRecord {
            value: *v,
            iterations: 1,
            elapsed_ns: 1_000_000,
            work: 1.0,
            cpu_ns: None,
            start_spread_ns: None,
            cpus: vec![0, 1],
            metrics: [(FORCEIDLE_SHARE.to_string(), idle)].into(),
        })
        .collect();
    c
}

const ON: [f64; 5] = [100.0, 101.0, 99.0, 100.5, 99.5];
const CHEAP: [f64; 5] = [90.0, 91.0, 89.0, 90.5, 89.5];
const DEAR: [f64; 5] = [60.0, 61.0, 59.0, 60.5, 59.5];

#[test]
fn a_cost_whose_interval_holds_no_change_is_no_cost() {
    let near = [99.0, 101.5, 98.0, 100.0, 99.5];
    let cells = [
        cell(SecurityMode::SmtOn, &ON, 0.0),
        cell(SecurityMode::CoreSched, &near, 0.2),
        cell(SecurityMode::SmtOff, &DEAR, 0.0),
    ];
    let line = &security(&cells, &[])[0].line;
    assert!(
        line.starts_with("core scheduling costs nothing (-0."),
        "{line}"
    );
    assert!(line.contains("not significant"), "{line}");
}

#[test]
fn the_cheaper_protection_is_chosen_with_both_costs_in_the_line() {
    let cells = [
        cell(SecurityMode::SmtOn, &ON, 0.0),
        cell(SecurityMode::CoreSched, &CHEAP, 0.2),
        cell(SecurityMode::SmtOff, &DEAR, 0.0),
    ];
    let a = security(&cells, &[]);
    assert_eq!(a.len(), 1);
    let a = &a[0];
    assert_eq!((a.workload.as_str(), a.load.as_str()), ("int-ops", "full"));
    assert_eq!(a.choice, Choice::CoreScheduling);
    assert!(
        a.line.starts_with("core scheduling costs 10")
            && a.line.contains("SMT off costs 40% (-40% ["),
        "{}",
        a.line
    );
    assert!(a.line.contains(": choose core scheduling"), "{}", a.line);
    let idle = a.modes[1].forced_idle_share.as_ref().unwrap();
    assert!((idle.value - 0.2).abs() < 1e-12);
    let text = text(std::slice::from_ref(a)).join("\n");
    assert!(text.contains("coresched"), "{text}");
    assert!(text.contains("forced idle 20%"), "{text}");
    // The other way round: SMT off chosen.
    let cells = [
        cell(SecurityMode::SmtOn, &ON, 0.0),
        cell(SecurityMode::CoreSched, &DEAR, 0.5),
        cell(SecurityMode::SmtOff, &CHEAP, 0.0),
    ];
    let a = &security(&cells, &[])[0];
    assert_eq!(a.choice, Choice::SmtOff);
    assert!(a.line.contains(": choose SMT off"), "{}", a.line);
}

#[test]
fn protections_that_do_not_differ_choose_neither() {
    let cells = [
        cell(SecurityMode::SmtOn, &ON, 0.0),
        cell(SecurityMode::CoreSched, &CHEAP, 0.1),
        cell(SecurityMode::SmtOff, &[91.0, 89.0, 90.0, 89.5, 90.5], 0.0),
    ];
    let a = &security(&cells, &[])[0];
    assert_eq!(a.choice, Choice::Either);
    assert!(a.line.contains("do not differ at 95%"), "{}", a.line);
}

#[test]
fn a_skipped_mode_says_why_and_nothing_is_chosen() {
    let cells = [
        cell(SecurityMode::SmtOn, &ON, 0.0),
        cell(SecurityMode::SmtOff, &DEAR, 0.0),
    ];
    let skipped = [SkippedCell {
        key: CellKey {
            benchmark: "int-ops".into(),
            params: BTreeMap::new(),
            conditions: SecurityMode::CoreSched.conditions(CookieScope::Thread),
            placement: "all".into(),
        },
        reason: "no core scheduling here: this kernel has no CONFIG_SCHED_CORE".into(),
    }];
    let a = &security(&cells, &skipped)[0];
    assert_eq!(a.choice, Choice::CannotTell);
    assert!(
        a.modes[1]
            .skipped
            .as_deref()
            .unwrap()
            .contains("CONFIG_SCHED_CORE"),
        "{:?}",
        a.modes[1]
    );
    let md = markdown(std::slice::from_ref(a));
    assert!(
        md.contains("| coresched | not measured: no core scheduling here"),
        "{md}"
    );
    // Cells of no security mode are no answer.
    let plain = smtlab_fixtures::build::cell_of(
        "int-ops",
        BTreeMap::new(),
        Default::default(),
        "1c1t",
        (1, 1),
        &ON,
    );
    assert!(security(&[plain], &[]).is_empty());
}

#[test]
fn a_light_load_is_answered_apart_from_the_full_one() {
    let mut cells = vec![
        cell(SecurityMode::SmtOn, &ON, 0.0),
        cell(SecurityMode::SmtOff, &DEAR, 0.0),
    ];
    let mut light = cell(SecurityMode::SmtOn, &ON, 0.0);
    light.params.insert(RATE_PARAM.into(), "250".into());
    cells.push(light);
    let a = security(&cells, &[]);
    assert_eq!(a.len(), 2);
    assert_eq!(a[1].load, "light (250/s offered)");
    assert_eq!(a[1].workload, a[0].workload);
}

#[test]
fn the_report_has_a_section_only_for_runs_with_security_cells() {
    let host = smtlab_fixtures::fleet::FakeHost::new("h", "cpu", 1.2);
    let mut r = smtlab_fixtures::fleet::run(&host);
    r.cells = vec![
        cell(SecurityMode::SmtOn, &ON, 0.0),
        cell(SecurityMode::CoreSched, &CHEAP, 0.2),
        cell(SecurityMode::SmtOff, &DEAR, 0.0),
    ];
    let html = section(&r).unwrap().into_string();
    assert!(html.contains(r#"<section id="security">"#), "{html}");
    assert!(html.contains("choose core scheduling"), "{html}");
    assert!(
        !html.contains("  "),
        "no runs of spaces in the text: {html}"
    );
    let page = crate::html::html(&r);
    assert!(page.contains(r#"id="security""#));
    r.cells.retain(|c| c.conditions.security().is_none());
    assert!(section(&r).is_none());
}

#[test]
fn a_light_load_is_decided_by_its_p99() {
    let at_rate = |mode: SecurityMode, p99_ms: f64| {
        let mut c = cell(mode, &ON, 0.0);
        c.params.insert(RATE_PARAM.into(), "250".into());
        for (i, s) in c.result.samples.iter_mut().enumerate() {
            let ns = (p99_ms + 0.01 * i as f64) * 1e6;
            s.metrics.insert(LATENCY_P99_NS.into(), ns);
        }
        c
    };
    let cells = [
        at_rate(SecurityMode::SmtOn, 1.0),
        at_rate(SecurityMode::CoreSched, 1.2),
        at_rate(SecurityMode::SmtOff, 2.0),
    ];
    let a = &security(&cells, &[])[0];
    assert_eq!(a.load, "light (250/s offered)");
    assert_eq!(a.choice, Choice::CoreScheduling, "{}", a.line);
    assert!(
        a.line
            .starts_with("by p99 at this load: core scheduling costs"),
        "{}",
        a.line
    );
    let p99 = a.modes[2].p99_ms.as_ref().unwrap();
    assert!((p99.value - 2.02).abs() < 1e-9, "{p99:?}");
}
