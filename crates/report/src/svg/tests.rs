use super::*;

#[test]
fn linear_ticks_are_round_and_cover_the_data() {
    let (lo, hi, t) = nice_linear(0.0, 9.3, 6, false);
    assert_eq!((lo, hi), (0.0, 10.0));
    assert_eq!(t, vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    let (lo, hi, t) = nice_linear(0.12, 0.87, 6, false);
    assert_eq!((lo, hi), (0.0, 1.0));
    // 3 * 0.2 is 0.6000000000000001 in floating point; the label is not.
    assert_eq!(tick_label(t[3]), "0.6");
    // Thread counts 1..3 would get 0.5 steps; integer axes do not.
    let (_, _, t) = nice_linear(0.0, 3.0, 6, true);
    assert_eq!(t, vec![0.0, 1.0, 2.0, 3.0]);
    // A single value still gets a range around it.
    let (lo, hi, _) = nice_linear(5.0, 5.0, 6, false);
    assert!(lo < 5.0 && hi > 5.0);
}

#[test]
fn log_ticks_are_decades_with_fill_in_when_few() {
    let (lo, hi, t) = log_ticks(3.0, 4000.0);
    assert_eq!((lo, hi), (2.0, 5000.0));
    assert_eq!(t, vec![2.0, 10.0, 100.0, 1000.0, 5000.0]);
    let (_, _, t) = log_ticks(1.0, 1000.0);
    assert_eq!(t, vec![1.0, 10.0, 100.0, 1000.0]);
    let (lo, hi, t) = log_ticks(150.0, 900.0);
    assert_eq!((lo, hi), (100.0, 1000.0));
    assert_eq!(t, vec![100.0, 200.0, 500.0, 1000.0]);
    let (lo, hi, t) = log_ticks(5200.0, 910_000.0);
    assert_eq!((lo, hi), (5000.0, 1e6));
    assert_eq!(t.len(), 8);
    // One value still gets a range.
    let (lo, hi, _) = log_ticks(100.0, 100.0);
    assert!(lo <= 100.0 && hi > 100.0);
    assert_eq!(Scale::auto(&[1.0, 50.0]), Scale::Linear);
    assert_eq!(Scale::auto(&[1.0, 500.0]), Scale::Log);
    assert_eq!(Scale::auto(&[0.0, 500.0]), Scale::Linear);
}

#[test]
fn tick_labels_are_short() {
    assert_eq!(tick_label(0.0), "0");
    assert_eq!(tick_label(2.0), "2");
    assert_eq!(tick_label(0.25), "0.25");
    assert_eq!(tick_label(1500.0), "1.5k");
    assert_eq!(tick_label(10_000_000.0), "10M");
    assert_eq!(tick_label(-2000.0), "-2k");
}

#[test]
fn empty_data_draws_nothing() {
    let opt = LineOptions {
        y_zero: true,
        x_integer: true,
        ..LineOptions::default()
    };
    assert_eq!(line_chart("t", "", "x", "y", &[], &opt), None);
    let empty = Series {
        name: "s".into(),
        points: vec![],
    };
    assert_eq!(line_chart("t", "", "x", "y", &[empty], &opt), None);
    assert_eq!(scatter("t", "x", "y", &[], true, 10), None);
}

#[test]
fn charts_draw_marks_and_escape_text() {
    let s = Series {
        name: "a<b".into(),
        points: (1..=4)
            .map(|i| Point {
                x: i as f64,
                y: 10.0 * i as f64,
                lo: Some(9.0 * i as f64),
                hi: Some(11.0 * i as f64),
                tip: format!("{i} & more"),
                label: None,
            })
            .collect(),
    };
    let opt = LineOptions {
        y_zero: true,
        x_integer: true,
        ..LineOptions::default()
    };
    let svg = line_chart("T & <U>", "sub", "threads", "GOPS", &[s], &opt).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.ends_with("</svg>"));
    assert_eq!(svg.matches("<circle").count(), 4);
    assert!(svg.contains("T &amp; &lt;U&gt;"));
    assert!(svg.contains("a&lt;b"));
    assert!(svg.contains("1 &amp; more"));
    assert!(!svg.contains("a<b"));
}

#[test]
fn scatter_thins_points_and_says_so() {
    let pts: Vec<(f64, f64)> = (1..=1000).map(|i| (i as f64, i as f64 * 1.1)).collect();
    let svg = scatter("s", "A", "B", &pts, true, 100).unwrap();
    assert!(svg.contains("n = 1000, 1 point in 10 drawn"), "{svg}");
    assert_eq!(svg.matches("h0").count(), 100);
    assert!(svg.contains("y = x"));
    // Three decades: both axes logarithmic.
    assert!(svg.contains("A (log scale)"));
}

#[test]
fn ci_strip_colours_by_interval() {
    assert!(ci_strip(1.2, Some(1.1), Some(1.3), (0.5, 1.5)).contains("#009e73"));
    assert!(ci_strip(0.8, Some(0.7), Some(0.9), (0.5, 1.5)).contains("#d55e00"));
    assert!(ci_strip(1.0, Some(0.9), Some(1.1), (0.5, 1.5)).contains("#777777"));
    assert!(ci_strip(1.0, None, None, (0.5, 1.5)).contains("#777777"));
}

#[test]
fn point_labels_never_overlap() {
    // Three series meeting at almost the same points: every label must stay clear.
    let series: Vec<Series> = (0..3)
        .map(|k| Series {
            name: format!("s{k}"),
            points: (1..=2)
                .map(|x| Point {
                    x: f64::from(x),
                    y: 10.0 + 0.01 * f64::from(k),
                    lo: None,
                    hi: None,
                    tip: String::new(),
                    label: Some(format!("2c1t/scatter {k}")),
                })
                .collect(),
        })
        .collect();
    let opt = LineOptions {
        point_labels: true,
        ..LineOptions::default()
    };
    let svg = line_chart("t", "", "x", "y", &series, &opt).unwrap();
    let boxes: Vec<(f64, f64, f64)> = svg
        .split("<text x=\"")
        .skip(1)
        .filter(|t| t.contains("2c1t/scatter"))
        .map(|t| {
            let num = |key: &str| -> f64 {
                let at = if key == "x" {
                    t
                } else {
                    t.split(key).nth(1).unwrap()
                };
                at.split('"').next().unwrap().parse().unwrap()
            };
            let anchor_end = t.contains("text-anchor=\"end\"");
            let w = 14.0 * 9.5 * 0.58;
            let x = num("x");
            (if anchor_end { x - w } else { x }, num(" y=\""), w)
        })
        .collect();
    assert_eq!(boxes.len(), 6, "{svg}");
    for (i, a) in boxes.iter().enumerate() {
        for b in &boxes[i + 1..] {
            let apart_x = a.0 + a.2 <= b.0 || b.0 + b.2 <= a.0;
            let apart_y = (a.1 - b.1).abs() >= 11.0;
            assert!(
                apart_x || apart_y,
                "labels at {a:?} and {b:?} overlap\n{svg}"
            );
        }
    }
}
