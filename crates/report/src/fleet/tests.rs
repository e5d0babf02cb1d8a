use smtlab_fixtures::fleet::{FakeHost, run};
use smtlab_model::RunResults;

use super::*;

const A: &str = "Demo Xeon A @ 2.0GHz";
const B: &str = "Demo EPYC B";

/// Seven hosts of model A (one, `a7`, far below the rest, with an older microcode),
/// two of model B, and an older run of `a1` that its latest run replaces.
fn runs() -> Vec<RunResults> {
    let mut hosts: Vec<FakeHost> = [1.20, 1.22, 1.21, 1.19, 1.23, 1.20, 0.95]
        .iter()
        .enumerate()
        .map(|(i, &y)| FakeHost::new(&format!("a{}", i + 1), A, y))
        .collect();
    hosts[6].microcode = "0x2a".into();
    let mut old = FakeHost::new("a1", A, 2.0);
    old.started_unix_s -= 3600;
    hosts.push(old);
    let mut b1 = FakeHost::new("b1", B, 1.05);
    b1.packages = 2;
    b1.cores = 8;
    b1.kernel = "6.1.0".into();
    hosts.push(b1);
    let mut b2 = FakeHost::new("b2", B, 1.07);
    b2.packages = 2;
    b2.cores = 8;
    hosts.push(b2);
    hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let mut r = run(h);
            r.run.id = i as i64 + 1;
            r
        })
        .collect()
}

#[test]
fn pools_per_cpu_model_one_value_per_host_from_its_latest_run() {
    let f = fleet(&runs());
    assert_eq!(f.runs, 10);
    assert_eq!(f.hosts.len(), 9);
    let names: Vec<&str> = f.models.iter().map(|m| m.cpu_model.as_str()).collect();
    assert_eq!(names, [B, A]);
    let a = &f.models[1];
    assert_eq!(a.hosts.len(), 7);
    // int-ops: 1c2t/1c1t and all/cores.
    assert_eq!(a.pools.len(), 2);
    let smt = &a.pools[0];
    assert_eq!(smt.placements, "1c2t/1c1t");
    assert_eq!(smt.hosts.len(), 7, "a1 counts once");
    let a1 = smt.hosts.iter().find(|h| h.host == "a1").unwrap();
    assert!(
        (a1.value - 1.20).abs() < 1e-9,
        "a1's latest run: {}",
        a1.value
    );
    assert!((smt.median - 1.20).abs() < 1e-9, "{}", smt.median);
    // Seven values: the order-statistic interval is [x(1), x(7)].
    assert!((smt.ci_low.unwrap() - 0.95).abs() < 1e-9);
    assert!((smt.ci_high.unwrap() - 1.23).abs() < 1e-9);
    // Two hosts of B: a median, no interval, no outliers.
    let b = &f.models[0].pools[0];
    assert_eq!(b.hosts.len(), 2);
    assert!((b.median - 1.06).abs() < 1e-9);
    assert!(b.ci_low.is_none() && b.outlier_low.is_none());
    assert_eq!(b.outliers().count(), 0);
}

#[test]
fn names_the_outlier_host_and_what_differs_on_it() {
    let f = fleet(&runs());
    let smt = &f.models[1].pools[0];
    let out: Vec<&str> = smt.outliers().map(|h| h.host.as_str()).collect();
    assert_eq!(out, ["a7"]);
    assert_eq!(smt.hosts[0].differs, ["microcode 0x2a (most: 0x2b)"]);
    // The rule: MAD of the six others is 0.01, so 1.20 ± 3 x 1.4826 x 0.01.
    assert!((smt.outlier_low.unwrap() - (1.20 - 3.0 * 1.4826 * 0.01)).abs() < 1e-9);
    // Within the limits: no outlier; the floor keeps identical hosts from naming 1%.
    let same: Vec<RunResults> = [1.0, 1.0, 1.0, 1.009]
        .iter()
        .enumerate()
        .map(|(i, &y)| {
            let mut r = run(&FakeHost::new(&format!("h{i}"), A, y));
            r.run.id = i as i64 + 1;
            r
        })
        .collect();
    let f = fleet(&same);
    assert_eq!(f.models[0].pools[0].outliers().count(), 0);
}

#[test]
fn counts_the_advice_over_hosts() {
    let f = fleet(&runs());
    let a = &f.models[1];
    assert_eq!(a.advice.len(), 1);
    let t = &a.advice[0];
    assert_eq!(t.hosts.len(), 7);
    assert_eq!(t.counts.get("keep SMT on"), Some(&6), "{:?}", t.counts);
    assert_eq!(t.counts.get("turn SMT off"), Some(&1), "{:?}", t.counts);
}

#[test]
fn text_fits_80_columns() {
    let out = text(&fleet(&runs()), 80);
    for l in out.lines() {
        assert!(l.chars().count() <= 80, "{l:?}");
    }
    insta::assert_snapshot!("fleet_text", out);
}

#[test]
fn json_is_versioned() {
    let out = json(&fleet(&runs()));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], FLEET_SCHEMA);
    insta::assert_snapshot!("fleet_json", out);
}

#[test]
fn html_is_one_well_formed_page() {
    let page = html(&fleet(&runs()), 1_790_000_000);
    let mut reader = quick_xml::Reader::from_str(&page);
    let mut depth = 0i32;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(_)) => depth += 1,
            Ok(quick_xml::events::Event::End(_)) => depth -= 1,
            Ok(_) => {}
            Err(e) => panic!("not well-formed at {}: {e}", reader.buffer_position()),
        }
    }
    assert_eq!(depth, 0);
    assert!(page.contains("a7 0.950x"), "the outlier is named");
    assert!(page.contains(A) && page.contains(B));
}

#[test]
fn runs_without_a_yield_are_one_note_per_reason() {
    let mut runs = runs();
    for i in 0..7 {
        let mut r = run(&FakeHost::new(&format!("n{i}"), B, 1.1));
        r.run.id = 100 + i;
        r.cells.retain(|c| c.placement.name == "1c1t");
        runs.push(r);
    }
    let f = fleet(&runs);
    assert_eq!(f.notes.len(), 1, "{:?}", f.notes);
    assert!(
        f.notes[0].starts_with("7 runs without an SMT yield (no benchmark was measured on both")
            && f.notes[0].ends_with("run 104 (n4) and 2 more"),
        "{}",
        f.notes[0]
    );
    // Their hosts are counted under their model, with no pool of their own.
    assert_eq!(f.models[0].hosts.len(), 9);
}

/// A run of `name` with host id `id` (or none), yield `y`, started `t`.
fn run_of_host(name: &str, id: Option<&str>, y: f64, t: u64, run_id: i64) -> RunResults {
    let mut h = FakeHost::new(name, A, y);
    h.started_unix_s = t;
    let mut r = run(&h);
    r.run.id = run_id;
    r.run.environment.host_id = id.map(str::to_string);
    r
}

#[test]
fn two_machines_with_one_hostname_are_two_hosts_shown_apart() {
    let f = fleet(&[
        run_of_host("web1", Some("3f2a9c1d00000000"), 1.2, 100, 1),
        run_of_host("web1", Some("77aa000000000000"), 1.1, 100, 2),
        run_of_host("web2", Some("1234000000000000"), 1.3, 100, 3),
        // The same machine again, later: it replaces its first run, not the other web1.
        run_of_host("web1", Some("3f2a9c1d00000000"), 1.25, 200, 4),
    ]);
    let names: Vec<&str> = f.hosts.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(names, ["web1 [3f2a9c1d]", "web1 [77aa0000]", "web2"]);
    let smt = &f.models[0].pools[0];
    assert_eq!(smt.hosts.len(), 3);
    let first = smt
        .hosts
        .iter()
        .find(|h| h.host == "web1 [3f2a9c1d]")
        .unwrap();
    assert!((first.value - 1.25).abs() < 1e-9, "{}", first.value);
    assert_eq!(f.models[0].advice[0].hosts.len(), 3);
}

#[test]
fn a_fake_machine_run_is_never_pooled_with_real_hosts() {
    let mut fake = run_of_host("web1", Some("fake-3f2a9c1d00000000"), 0.5, 300, 3);
    fake.run.environment.cpu_model = Some(A.into());
    let f = fleet(&[
        run_of_host("web1", Some("3f2a9c1d00000000"), 1.2, 100, 1),
        run_of_host("web2", Some("1234000000000000"), 1.3, 100, 2),
        fake,
    ]);
    let models: Vec<&str> = f.models.iter().map(|m| m.cpu_model.as_str()).collect();
    assert_eq!(
        models,
        [
            "Demo Xeon A @ 2.0GHz",
            "Demo Xeon A @ 2.0GHz (emulated: --fake-machine)"
        ]
    );
    assert_eq!(f.models[0].pools[0].hosts.len(), 2);
    assert!(f.models[0].pools[0].hosts.iter().all(|h| h.value > 1.0));
    assert_eq!(f.models[1].pools[0].hosts.len(), 1);
}

#[test]
fn runs_without_a_host_id_count_by_hostname() {
    // An old store: no ids. Hosts are their hostnames, as before.
    let f = fleet(&[
        run_of_host("a", None, 1.2, 100, 1),
        run_of_host("a", None, 1.3, 200, 2),
        run_of_host("b", None, 1.1, 100, 3),
    ]);
    let names: Vec<&str> = f.hosts.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(f.hosts[0].runs, [1, 2]);
}

#[test]
fn predict_profiles_pool_per_cpu_model_one_value_per_host() {
    let hosts = [("p1", 1.0), ("p2", 1.2), ("p3", 0.8)];
    let runs: Vec<RunResults> = hosts
        .iter()
        .enumerate()
        .map(|(i, (name, pressure))| {
            let mut r = crate::testutil::predict_run(&FakeHost::new(name, A, 1.2), *pressure);
            r.run.id = i as i64 + 1;
            r
        })
        .collect();
    let f = fleet(&runs);
    assert_eq!(f.models.len(), 1);
    let m = &f.models[0];
    assert!(m.pools.is_empty(), "a predict run has no SMT yield");
    // wa and wb, two rulers, two figures each, in the cores form.
    assert_eq!(m.profiles.len(), 8);
    let p = m
        .profiles
        .iter()
        .find(|p| p.workload == "wa" && p.ruler == "int" && p.figure == "sensitivity")
        .unwrap();
    assert_eq!(p.spread.hosts.len(), 3);
    // wa beside int is the first pair: 1 + pressure / 10 on each host; the median is p1's.
    assert!((p.spread.median - 1.1).abs() < 1e-9, "{}", p.spread.median);
    assert!((p.spread.min - 1.08).abs() < 1e-9 && (p.spread.max - 1.12).abs() < 1e-9);
    assert!(f.notes.is_empty(), "{:?}", f.notes);
    let text = text(&f, 120);
    assert!(text.contains("predict profiles over hosts"), "{text}");
    assert!(json(&f).contains("\"contentiousness\""));
}

#[test]
fn hosts_expected_but_never_reported_are_named_in_every_output() {
    let mut f = fleet(&runs());
    assert_eq!(f.hosts.len(), 9);
    let inv: Vec<String> = ["a1", "a2", "zz9", "b1", "b9"].map(String::from).into();
    f.expect(&inv, Some(12));
    assert_eq!(f.missing, ["zz9", "b9"]);
    assert_eq!(f.expected, Some(12));
    // Twelve expected, nine reported: three never did, two of them named.
    assert_eq!(f.never_reported(), 3);
    let line = "expected 12 hosts, 9 reported; never reported (3): zz9, b9";
    let t = text(&f, 200);
    assert!(t.contains(line), "{t}");
    let j: serde_json::Value = serde_json::from_str(&json(&f)).unwrap();
    assert_eq!(j["expected"], 12);
    assert_eq!(j["missing"], serde_json::json!(["zz9", "b9"]));
    assert!(html(&f, 0).contains(line));

    let mut all = fleet(&runs());
    all.expect(&[], Some(9));
    assert_eq!(all.never_reported(), 0);
    assert!(text(&all, 200).contains("every expected host reported"));
    // Nothing expected: nothing said.
    let none = fleet(&runs());
    assert!(!text(&none, 200).contains("expected"));
    assert!(serde_json::from_str::<serde_json::Value>(&json(&none)).unwrap()["missing"].is_null());
}

/// Hosts `(name, model, yield)`, each one run of `int-ops` at 1, 2 and 4 threads.
fn scaling_runs(hosts: &[(&str, &str, f64)]) -> Vec<RunResults> {
    hosts
        .iter()
        .enumerate()
        .map(|(i, (name, model, y))| {
            let mut r =
                smtlab_fixtures::fleet::run_of(&FakeHost::new(name, model, *y), &["1", "2", "4"]);
            r.run.id = i as i64 + 1;
            r
        })
        .collect()
}

#[test]
fn a_few_hosts_scaling_curves_share_one_chart_and_models_yields_one_cdf() {
    let f = fleet(&scaling_runs(&[
        ("x1", A, 1.2),
        ("x2", A, 1.1),
        ("y1", B, 1.3),
    ]));
    // One curve per placement, each with every host's line through 1, 2 and 4 threads.
    assert_eq!(f.curves.len(), 4);
    let c = f.curves.iter().find(|c| c.placement == "1c2t").unwrap();
    assert!(c.per_host);
    let names: Vec<&str> = c.lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["x1", "x2", "y1"]);
    let x1 = &c.lines[0];
    let threads: Vec<u64> = x1.points.iter().map(|p| p.threads).collect();
    assert_eq!(threads, [1, 2, 4]);
    // int-ops on 1c2t: the fixture's 10 x the host's yield.
    assert!((x1.points[0].value - 12.0).abs() < 1e-9, "{x1:?}");
    let page = html(&f, 0);
    assert!(page.contains("Scaling across hosts"), "{page}");
    // Each host named in a chart's legend, the two models in a yield's CDF.
    for n in ["x1", "x2", "y1"] {
        assert!(page.contains(&format!(">{n}</text>")), "{n}");
    }
    assert!(page.contains("Yields across CPU models"));
    assert!(page.contains(&format!("{B} (1 host)")), "{page}");
}

#[test]
fn many_hosts_are_drawn_as_each_models_median_with_its_interval() {
    let mut hosts: Vec<(String, &str, f64)> = (0..12)
        .map(|i| (format!("a{i:02}"), A, 1.0 + i as f64 / 100.0))
        .collect();
    hosts.push(("b1".into(), B, 1.3));
    let hosts: Vec<(&str, &str, f64)> =
        hosts.iter().map(|(n, m, y)| (n.as_str(), *m, *y)).collect();
    let f = fleet(&scaling_runs(&hosts));
    let c = f.curves.iter().find(|c| c.placement == "1c2t").unwrap();
    assert!(!c.per_host);
    assert_eq!(c.lines.len(), 2);
    let a = c.lines.iter().find(|l| l.name.starts_with(A)).unwrap();
    assert_eq!(a.hosts, 12);
    // The median of 10 x 1.00 .. 10 x 1.11, with an interval around it.
    let p = &a.points[0];
    assert!((p.value - 10.55).abs() < 1e-9, "{p:?}");
    assert!(
        p.ci_low.unwrap() < p.value && p.value < p.ci_high.unwrap(),
        "{p:?}"
    );
    let b = c.lines.iter().find(|l| l.name.starts_with(B)).unwrap();
    assert!(b.points[0].ci_low.is_none(), "one host has no interval");
}

/// `scaling_runs` with a per-event series on every cell: host `i`'s events are
/// `1000 * (i + 1)` plus 0 to 499, 500 events, one run each.
fn event_runs(hosts: &[(&str, &str, f64)]) -> Vec<RunResults> {
    let mut runs = scaling_runs(hosts);
    for (i, r) in runs.iter_mut().enumerate() {
        let base = 1000.0 * (i as f64 + 1.0);
        for c in &mut r.cells {
            let events = (0..500).map(|e| base + f64::from(e)).collect();
            c.result.series.insert("create_ns".into(), events);
        }
    }
    runs
}

#[test]
fn a_line_is_a_host_in_a_fleet_and_a_run_in_a_compare() {
    let runs = event_runs(&[("x1", A, 1.2), ("y1", B, 1.3)]);
    let page = html(&fleet(&runs), 0);
    assert!(page.contains("one line per host"), "{page}");
    let c = crate::compare(&runs[0], &runs[1]);
    let page = crate::compare_html(&runs[0], &runs[1], &c);
    assert!(page.contains("one line per run"), "{page}");
    assert!(!page.contains("one line per host"), "{page}");
}

#[test]
fn a_few_hosts_events_share_one_chart_and_many_are_drawn_per_model() {
    let f = fleet(&event_runs(&[
        ("x1", A, 1.2),
        ("x2", A, 1.1),
        ("y1", B, 1.3),
    ]));
    let d = f
        .distributions
        .iter()
        .find(|d| d.placement == "1c2t" && d.params.get("threads").map(String::as_str) == Some("1"))
        .unwrap();
    assert!(d.per_host);
    assert_eq!(d.series, "create_ns");
    let names: Vec<&str> = d.lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["x1", "x2", "y1"]);
    // 500 events kept as the percentiles 0..=100: x2's run from 2000 to 2499.
    let x2 = &d.lines[1].points;
    assert_eq!((x2.len(), x2[0], x2[100]), (101, 2000.0, 2499.0));
    let page = html(&f, 0);
    assert!(page.contains("Events across hosts"), "{page}");
    assert!(page.contains("int-ops on 1c2t: create_ns"), "{page}");
    assert!(json(&f).contains("\"distributions\""));

    // Twelve hosts of A and one of B: A's line is its hosts' median at each percentile.
    let mut hosts: Vec<(String, &str, f64)> =
        (0..12).map(|i| (format!("a{i:02}"), A, 1.1)).collect();
    hosts.push(("b1".into(), B, 1.3));
    let hosts: Vec<(&str, &str, f64)> =
        hosts.iter().map(|(n, m, y)| (n.as_str(), *m, *y)).collect();
    let f = fleet(&event_runs(&hosts));
    let d = &f.distributions[0];
    assert!(!d.per_host);
    let a = d.lines.iter().find(|l| l.name.starts_with(A)).unwrap();
    assert_eq!(a.hosts, 12);
    // Hosts 1..=12 start at 1000..12000: the median host's minimum is 6500.
    assert_eq!(a.points[0], 6500.0);
    let b = d.lines.iter().find(|l| l.name.starts_with(B)).unwrap();
    assert_eq!((b.hosts, b.points[0]), (1, 13000.0));
}
