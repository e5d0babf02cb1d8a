//! `smtlab predict` as plain text: the rulers with their own pressure, the profiles,
//! each form's model, the predicted matrix and the validation. Ratios and intervals in
//! the words of [`crate::fmt`].

use smtlab_model::keys::Form;
use smtlab_model::stats::Ratio;

use super::model::Prediction;
use super::validate::{DIRECTION_THRESHOLD, Score, Validation};
use super::{FormModel, PairMeasure, PredictedPair, Profile, Ruler, Unpredicted};
use crate::fmt::{num, pm, ratio_ci, text_table, times};

fn ratio(r: Option<&Ratio>) -> String {
    r.map_or("-".into(), |r| ratio_ci(r.ratio, r.ci95_low, r.ci95_high))
}

/// A prediction as `1.042x [0.990, 1.094]`, `1.042x (no interval)` without one.
pub fn prediction(p: &Prediction) -> String {
    match (p.low, p.high) {
        (Some(_), Some(_)) => ratio_ci(p.value, p.low, p.high),
        _ => format!("{} (no interval)", ratio_ci(p.value, None, None)),
    }
}

fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let right: Vec<usize> = (1..head.len()).collect();
    text_table(head, rows, &right)
}

/// Each ruler, what it presses, what makes it and its own figure alone.
pub fn rulers(rulers: &[Ruler]) -> String {
    let rows: Vec<Vec<String>> = rulers
        .iter()
        .map(|r| {
            // A partner-only ruler's unit is known only to a run that measured it.
            let unit = r.unit.as_deref().map_or(String::new(), |u| format!(" {u}"));
            let alone = match (r.alone, r.alone_ci95_half_width) {
                (Some(v), Some(h)) => format!("{}{unit} (n={})", pm(v, h), r.alone_n.unwrap_or(0)),
                _ => "not measured".into(),
            };
            vec![
                r.spec.name.clone(),
                r.spec.resource.clone(),
                r.spec.workload.clone(),
                alone,
            ]
        })
        .collect();
    table(&["ruler", "presses", "workload", "alone [95% CI]"], &rows)
}

/// The profiles of one form: a row per workload, sensitivity and contentiousness per
/// ruler. Empty when the form has none.
pub fn profiles(profiles: &[Profile], form: Form) -> String {
    let of_form: Vec<&Profile> = profiles.iter().filter(|p| p.form == form).collect();
    let Some(first) = of_form.first() else {
        return String::new();
    };
    let mut head: Vec<String> = vec!["workload".into(), "figure".into()];
    head.extend(first.rulers.iter().map(|r| r.ruler.clone()));
    let mut rows = Vec::new();
    for p in &of_form {
        let mut sens = vec![p.workload.clone(), "sensitivity".into()];
        sens.extend(p.rulers.iter().map(|r| ratio(r.sensitivity.as_ref())));
        let mut cont = vec![String::new(), "contentiousness".into()];
        cont.extend(p.rulers.iter().map(|r| ratio(r.contentiousness.as_ref())));
        rows.push(sens);
        rows.push(cont);
    }
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(&head, &rows)
}

/// The model of one form in one line: its weights, pairs and residual spread.
pub fn model(m: &FormModel) -> String {
    let Some(model) = &m.model else {
        return format!(
            "model, {}: not fitted: {}",
            m.form.name(),
            m.not_fitted.as_deref().unwrap_or("-")
        );
    };
    let weights: Vec<String> = model
        .rulers
        .iter()
        .zip(&model.weights)
        .map(|(r, w)| format!("{r} {}", num(*w)))
        .collect();
    let spread = match (model.residual_sd, model.df) {
        (Some(s), Some(df)) => format!("residual sd {} points, df {}", num(100.0 * s), num(df)),
        _ => "no degree of freedom left: no prediction interval".into(),
    };
    format!(
        "model, {}: slowdown = 1 + sum of w x (sens - 1)(cont - 1); fitted on {}; w: {}; {spread}",
        m.form.name(),
        smtlab_model::unit::plural(model.training_pairs, "measured pair"),
        weights.join(", ")
    )
}

/// The predicted matrix of one form: rows the measured workload, columns the partner,
/// each entry the predicted slowdown with its 95% prediction interval, `no figure`
/// where the model gives none ([`unpredicted`] says why).
pub fn matrix(pairs: &[PredictedPair], none: &[Unpredicted], form: Form) -> String {
    let names = crate::first_seen(
        pairs
            .iter()
            .filter(|p| p.form == form)
            .map(|p| p.a.as_str())
            .chain(none.iter().filter(|u| u.form == form).map(|u| u.a.as_str())),
    );
    if names.is_empty() {
        return String::new();
    }
    let unpredicted = |a: &str, b: &str| {
        none.iter()
            .any(|u| u.form == form && u.a == a && u.b == b)
            .then(|| "no figure".to_string())
    };
    let entry = |a: &str, b: &str| {
        let found = pairs
            .iter()
            .find(|p| p.form == form && p.a == a && p.b == b);
        found.map_or_else(
            || unpredicted(a, b).unwrap_or_else(|| "-".into()),
            |p| {
                let mark = if p.unknown.is_empty() { "" } else { " *" };
                format!("{}{mark}", prediction(&p.slowdown))
            },
        )
    };
    crate::fmt::matrix_table("predicted \\ partner", &names, &names, entry)
}

/// Each pair of one form the model gives no figure for, with the reason.
pub fn unpredicted(none: &[Unpredicted], form: Form) -> Vec<String> {
    none.iter()
        .filter(|u| u.form == form)
        .map(|u| format!("{} beside {}: no figure, {}", u.a, u.b, u.why))
        .collect()
}

/// The footnote of [`matrix`]'s `*`: the rulers some entries were predicted without.
pub fn unknown_note(pairs: &[PredictedPair], form: Form) -> Option<String> {
    let of_form = pairs.iter().filter(|p| p.form == form);
    let rulers = crate::first_seen(of_form.flat_map(|p| p.unknown.iter().map(String::as_str)));
    (!rulers.is_empty()).then(|| {
        format!(
            "* predicted without a figure of {} (not measured or held back; it adds nothing)",
            rulers.join(", ")
        )
    })
}

/// The footnote of [`matrix`]'s `-`, where it has one: the pairs neither predicted nor
/// given no figure by the model.
pub fn missing_note(pairs: &[PredictedPair], none: &[Unpredicted], form: Form) -> Option<String> {
    let predicted = pairs
        .iter()
        .filter(|p| p.form == form)
        .map(|p| p.a.as_str());
    let unpredicted = none.iter().filter(|u| u.form == form).map(|u| u.a.as_str());
    let rows: Vec<&str> = predicted.chain(unpredicted).collect();
    let n = crate::first_seen(rows.iter().copied()).len();
    (rows.len() < n * n).then(|| {
        "- not predicted: the partner was never measured as one (a server workload of an older run), or no ruler has figures for the pair".to_string()
    })
}

/// Each pair whose figures were held back, with the reason.
pub fn held_back(measures: &[PairMeasure]) -> Vec<String> {
    measures
        .iter()
        .map(|m| {
            format!(
                "{} beside {}, {}: {}",
                m.a,
                m.b,
                m.form.name(),
                m.doubt.as_deref().unwrap_or("-")
            )
        })
        .collect()
}

/// The combined speed of each unordered pair of one form, predicted.
pub fn combined(pairs: &[PredictedPair], form: Form) -> Vec<String> {
    pairs
        .iter()
        .filter(|p| p.form == form && p.a <= p.b)
        .filter_map(|p| Some((p, p.combined_speed.as_ref()?)))
        .map(|(p, c)| {
            let interval = match (c.low, c.high) {
                (Some(lo), Some(hi)) => format!(" [{}, {}]", times(lo), times(hi)),
                _ => " (no interval)".into(),
            };
            format!(
                "{} + {}: combined speed {}{interval} (predicted)",
                p.a,
                p.b,
                times(c.value)
            )
        })
        .collect()
}

fn score_row(name: &str, s: &Score) -> Vec<String> {
    vec![
        name.into(),
        num(s.mae_points),
        format!("{:.0}%", 100.0 * s.direction_right),
        s.direction_right_differing.map_or("-".into(), |x| {
            format!("{:.0}% of {}", 100.0 * x, s.differing)
        }),
    ]
}

/// The validation of one form: each held-out pair, then the scores of the model and of
/// the two naive baselines.
pub fn validation(v: &Validation) -> String {
    let pairs: Vec<Vec<String>> = v
        .checked
        .iter()
        .map(|c| {
            vec![
                format!("{} beside {}", c.a, c.b),
                format!("{:.3}x", c.measured),
                c.predicted.as_ref().map_or_else(
                    || {
                        format!(
                            "no figure (scored as 1): {}",
                            c.no_figure.map_or_else(String::new, |w| w.to_string())
                        )
                    },
                    prediction,
                ),
            ]
        })
        .collect();
    let scores = vec![
        score_row("model", &v.model),
        score_row("no interference (1)", &v.no_interference),
        score_row(
            &format!("mean slowdown ({:.3})", v.baseline_mean),
            &v.mean_slowdown,
        ),
    ];
    let differ = format!(
        "direction right, pairs differing by {:.0}%+",
        100.0 * DIRECTION_THRESHOLD
    );
    format!(
        "{}\n{}",
        table(&["held-out pair", "measured", "predicted [95% PI]"], &pairs),
        table(
            &[
                "predictor",
                "mean abs error (points)",
                "direction right",
                &differ
            ],
            &scores
        )
    )
}
