use std::collections::BTreeMap;

use smtlab_model::{CellRecord, Direction, SampleRecord};

use super::*;

/// A stored co-run cell of `bench` from its sample values and the partner's values.
fn cell(
    bench: &str,
    dir: Direction,
    form: Form,
    partner: &str,
    values: &[f64],
    partner_values: &[f64],
) -> CellRecord {
    let samples: Vec<SampleRecord> = values
        .iter()
        .enumerate()
        .map(|(i, &v)| SampleRecord {
            value: v,
            iterations: 1,
            elapsed_ns: (v * 1000.0) as u64,
            work: 1.0,
            cpu_ns: None,
            start_spread_ns: None,
            cpus: vec![0],
            metrics: partner_values
                .get(i)
                .map(|p| BTreeMap::from([(PARTNER_VALUE.to_string(), *p)]))
                .unwrap_or_default(),
        })
        .collect();
    CellRecord {
        benchmark: bench.into(),
        group: "test".into(),
        unit: "ns".into(),
        direction: dir,
        params: BTreeMap::from([("threads".to_string(), "1".to_string())]),
        conditions: smtlab_model::keys::Conditions {
            form: Some(form),
            partner: Some(partner.to_string()),
            ..Default::default()
        },
        placement_spec: format!("corun-{}", form.name()),
        placement: crate::testutil::placement(&format!("corun-{}", form.name()), "cpus:0,1", 2, 1),
        result: crate::testutil::result(samples, values),
        counters: None,
    }
}

fn demo() -> Vec<CellRecord> {
    use Direction::*;
    vec![
        // int (a time, lower is better) alone 100, with mem on the sibling 150; its
        // partner mem (a rate, higher is better) did 8 inside int's samples.
        cell("int", Lower, Form::Alone, "mem", &[99.0, 100.0, 101.0], &[]),
        cell(
            "int",
            Lower,
            Form::Sibling,
            "mem",
            &[149.0, 150.0, 151.0],
            &[7.9, 8.0, 8.1],
        ),
        cell(
            "int",
            Lower,
            Form::Cores,
            "mem",
            &[109.0, 110.0, 111.0],
            &[9.9, 10.0, 10.1],
        ),
        // mem alone 10 (rate), 5 next to int on the sibling.
        cell("mem", Higher, Form::Alone, "int", &[9.9, 10.0, 10.1], &[]),
        cell(
            "mem",
            Higher,
            Form::Sibling,
            "int",
            &[4.9, 5.0, 5.1],
            &[119.0, 120.0, 121.0],
        ),
    ]
}

#[test]
fn slowdowns_are_oriented_by_direction_and_use_both_alone_cells() {
    let cells = demo();
    let m = matrix(&cells);
    assert_eq!(m.len(), 3);
    let e = &m[0];
    assert_eq!(
        (e.a.as_str(), e.b.as_str(), e.form),
        ("int", "mem", Form::Sibling)
    );
    let s = e.slowdown.unwrap();
    assert!((s.ratio - 1.5).abs() < 1e-9, "{s:?}");
    assert!(s.ci95_low.unwrap() < 1.5 && s.ci95_high.unwrap() > 1.5);
    // mem is a rate: 10 alone, 8 next to int: slowdown 10/8.
    let p = e.partner_slowdown.unwrap();
    assert!((p.ratio - 1.25).abs() < 1e-9, "{p:?}");
    assert!((e.combined_speed.unwrap() - (1.0 / 1.5 + 1.0 / 1.25)).abs() < 1e-9);
    assert_eq!(m[1].form, Form::Cores);
    assert!((m[1].slowdown.unwrap().ratio - 1.1).abs() < 1e-9);
    // mem next to int: rate halved, int as its partner took 120 against 100 alone.
    assert!((m[2].slowdown.unwrap().ratio - 2.0).abs() < 1e-9);
    assert!((m[2].partner_slowdown.unwrap().ratio - 1.2).abs() < 1e-9);
}

#[test]
fn the_partners_own_interleaved_reference_wins_over_its_alone_cell() {
    let mut cells = demo();
    // int next to mem on the sibling: mem did 8 per sample, and 16 alone right after.
    for s in &mut cells[1].result.samples {
        s.metrics.insert(
            PARTNER_ALONE_VALUE.into(),
            16.0 + s.metrics[PARTNER_VALUE] - 8.0,
        );
    }
    let m = matrix(&cells);
    let p = m[0].partner_slowdown.unwrap();
    assert!((p.ratio - 2.0).abs() < 1e-9, "{p:?}");
    // The cell without those windows still uses mem's alone cell.
    assert!((m[1].partner_slowdown.unwrap().ratio - 1.0).abs() < 1e-9);
}

#[test]
fn a_missing_reference_leaves_the_entry_without_a_slowdown() {
    let cells = vec![cell(
        "int",
        Direction::Lower,
        Form::Sibling,
        "mem",
        &[150.0, 151.0],
        &[1.0, 1.0],
    )];
    let m = matrix(&cells);
    assert_eq!(m.len(), 1);
    assert!(m[0].slowdown.is_none() && m[0].partner_slowdown.is_none());
    assert!(m[0].combined_speed.is_none());
    assert!(matrix_text(&m, Form::Sibling).contains('-'));
}

#[test]
fn the_text_matrix_has_a_row_per_workload_and_a_column_per_partner() {
    let m = matrix(&demo());
    let t = matrix_text(&m, Form::Sibling);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 3, "{t}");
    assert!(lines[0].contains("mem") && lines[0].contains("int"), "{t}");
    assert!(
        lines[1].starts_with("int") && lines[1].contains("1.500x ["),
        "{t}"
    );
    assert!(
        lines[2].starts_with("mem") && lines[2].contains("2.000x ["),
        "{t}"
    );
    assert_eq!(matrix_text(&m, Form::Alone), "");
    assert_eq!(combined_text(&m, Form::Sibling).len(), 2);
}

#[test]
fn the_heatmap_colours_slowdowns_red_and_speedups_blue() {
    assert_eq!(heat_color(1.0), "#ffffff");
    let red = heat_color(2.0);
    let blue = heat_color(0.5);
    assert!(red.starts_with("#ff") && !red.ends_with("ff"), "{red}");
    assert!(blue.ends_with("ff") && !blue.starts_with("#ff"), "{blue}");
    let m = matrix(&demo());
    let svg = heatmap_svg(&m, Form::Sibling).unwrap();
    assert_eq!(svg.matches("<rect").count(), 4); // 2 rows x 2 columns, one unmeasured
    assert!(svg.contains(">1.50<") && svg.contains("not measured"));
    assert!(heatmap_svg(&m, Form::Alone).is_none());
    // 1.5 [..] excludes 1: full colour.
    assert!(significant(&m[0].slowdown.unwrap()));
    assert!(svg.contains(&heat_color(1.5)));
    let unclear = Ratio {
        ratio: 1.5,
        ci95_low: Some(0.8),
        ci95_high: Some(2.0),
        ci95_half_width_delta: None,
        df: None,
    };
    assert!(!significant(&unclear));
}

#[test]
fn an_unclear_slowdown_is_grey_in_the_heatmap_and_the_penalty_table() {
    let mut m = matrix(&demo());
    let r = {
        let r = m[0].slowdown.as_mut().unwrap();
        // A large ratio whose interval includes 1: no clear effect, not red.
        r.ratio = 4.0;
        r.ci95_low = Some(0.5);
        r.ci95_high = Some(7.5);
        *r
    };
    let svg = heatmap_svg(&m, Form::Sibling).unwrap();
    let cell = svg
        .split("<g>")
        .find(|g| g.contains("slowdown 4.000x"))
        .unwrap();
    assert!(cell.contains(UNCLEAR_FILL), "{cell}");
    assert!(!cell.contains(&heat_color(4.0)), "{cell}");
    let pen = Penalty {
        hog: "int".into(),
        form: Form::Sibling,
        ratio: Some(r),
        alone_p50_ns: Some(1e6),
        alone_p95_ns: Some(2e6),
        p50_ns: Some(1e6),
        p95_ns: Some(2e6),
    };
    let html = penalty_html(std::slice::from_ref(&pen)).into_string();
    assert!(
        html.contains("no clear effect") && !html.contains("background"),
        "{html}"
    );
    let clear = Penalty {
        ratio: Some(Ratio {
            ci95_low: Some(3.5),
            ..r
        }),
        ..pen
    };
    let html = penalty_html(&[clear]).into_string();
    assert!(html.contains(&heat_color(4.0)), "{html}");
}

#[test]
fn penalties_compare_each_hog_with_the_task_alone() {
    let mut cells = vec![
        cell(
            "task",
            Direction::Lower,
            Form::Alone,
            "int",
            &[100.0, 100.0, 102.0, 98.0],
            &[],
        ),
        cell(
            "task",
            Direction::Lower,
            Form::Cores,
            "int",
            &[100.0, 101.0, 99.0, 100.0],
            &[],
        ),
        cell(
            "task",
            Direction::Lower,
            Form::Cores,
            "mem",
            &[120.0, 121.0, 119.0, 140.0],
            &[],
        ),
    ];
    cells[2]
        .result
        .series
        .insert(RUN_NS.into(), vec![1e6, 2e6, 3e6]);
    let p = penalties(&cells, "task");
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].hog, "int");
    let r0 = p[0].ratio.unwrap();
    assert!(
        r0.ci95_low.unwrap() < 1.0 && r0.ci95_high.unwrap() > 1.0,
        "{r0:?}"
    );
    let r1 = p[1].ratio.unwrap();
    assert!(r1.ratio > 1.2 && r1.ci95_low.unwrap() > 1.0, "{r1:?}");
    // Run times from the series where there is one, else from the samples.
    assert_eq!(p[1].p50_ns, Some(2e6));
    assert_eq!(p[0].p50_ns, Some(100_000.0));
    assert!(p[1].p95_ns.unwrap() > p[1].p50_ns.unwrap());
    let t = penalty_text(&p).render();
    assert!(t.contains("mem") && t.contains("cores"), "{t}");
    assert!(penalties(&cells, "other").is_empty());
}

/// A co-run cell whose samples were cut to a few iterations (its budget spent while a
/// long partner sample ran) has no slowdown: its figure would be fixed costs.
#[test]
fn a_pair_whose_samples_were_cut_short_has_no_figure() {
    use Direction::*;
    let mut cells = vec![
        cell("lat", Lower, Form::Alone, "mem", &[100.0, 101.0, 99.0], &[]),
        cell(
            "lat",
            Lower,
            Form::Sibling,
            "mem",
            &[170.0, 171.0],
            &[1.0, 1.0],
        ),
    ];
    for s in &mut cells[0].result.samples {
        s.elapsed_ns = 10_000_000;
    }
    for s in &mut cells[1].result.samples {
        s.elapsed_ns = 200_000;
    }
    let m = matrix(&cells);
    assert!(m[0].slowdown.is_none(), "{:?}", m[0]);
    let why = m[0].cut_short.as_deref().unwrap();
    assert!(
        why.starts_with("samples cut short (200 µs beside against 10000 µs alone)"),
        "{why}"
    );
    assert!(matrix_text(&m, Form::Sibling).contains("cut short"));
    // A tenth or more of the reference's length keeps its figure.
    for s in &mut cells[1].result.samples {
        s.elapsed_ns = 1_000_000;
    }
    let m = matrix(&cells);
    assert!(m[0].cut_short.is_none() && m[0].slowdown.is_some());
}
