//! Text of `predict`: the cost before it measures, then the rulers, profiles, models,
//! predicted matrices and validation (written by `smtlab_report::predict::text`).

use std::collections::BTreeMap;

use smtlab_model::CellKey;
use smtlab_model::keys::Form;
use smtlab_model::predict::{PairKeys, PlanKeys};
use smtlab_model::unit::plural;
use smtlab_report::predict::{ProfileDoc, text};
use smtlab_runner::experiment::predict::{Cost, Ruler};

use crate::render::cpus_in_order;
use crate::term::fit;

/// What the plan measures and what it costs against the whole matrix, before anything
/// runs: the `--dry-run` answer and the header of a run.
/// `time_ns`: the plan's time, likely and at most.
pub fn cost(c: &Cost, forms: &[(Form, u32)], time_ns: (u64, u64)) -> String {
    let forms_text = crate::render::corun::forms_text(forms);
    let (n, r, k) = (c.workloads, c.rulers, c.cells_per_pair);
    let time = crate::render::plan::duration_text;
    let mut out = fit(&format!(
        "predict: {}, {}, each pair as A alone and A beside B ({forms_text}): {k} cells a pair",
        plural(n, "workload"),
        plural(r, "ruler")
    ));
    let beside = r - c.partner_only;
    out.push_str(&fit(&format!(
        "  profiles: {n} x {r} + {beside} x {n} = {}{}; training: {} (chosen from the profiles); held out: {}{}",
        plural(c.profile_pairs, "pair"),
        match c.partner_only {
            0 => String::new(),
            p => format!(
                " ({} measured as the partner only: {} contentiousness read from the cells beside {})",
                plural(p, "ruler"),
                if p == 1 { "its" } else { "their" },
                if p == 1 { "it" } else { "them" }
            ),
        },
        plural(c.training_pairs, "pair"),
        plural(c.held_out_pairs, "pair"),
        match c.shared_pairs {
            0 => String::new(),
            s => format!("; {s} measured once for two roles"),
        }
    )));
    out.push_str(&fit(&format!(
        "  cost: {} cells (about {}, at most {}), against {} cells for the whole {n} x {n} matrix",
        c.cells,
        time(time_ns.0),
        time(time_ns.1),
        c.matrix_cells
    )));
    let growth = match c.partner_only {
        0 => "2 x N x R".to_string(),
        _ => format!("N x {}", r + beside),
    };
    out.push_str(&fit(&format!(
        "  (profiles grow as {growth}, the matrix as N x N: profiles cost fewer cells from N > {} workloads on)",
        r + beside
    )));
    out
}

/// The names each cell's line shows: a ruler by its name with its benchmark
/// (`l1d (mem-latency)`), a workload by its own; `candidates`: the pairs the training
/// pairs are chosen among.
pub fn cell_names(keys: &PlanKeys, candidates: &[PairKeys]) -> BTreeMap<CellKey, (String, String)> {
    let is_ruler = |name: &str| keys.rulers.iter().any(|r| r.name == name);
    let shown = |label: &str, key: &CellKey| match is_ruler(label) {
        true => format!("ruler {label} ({})", key.benchmark),
        false => label.to_string(),
    };
    let roles = [
        &keys.sensitivity,
        &keys.contentiousness,
        candidates,
        &keys.held_out,
    ];
    let mut names = BTreeMap::new();
    for k in roles.into_iter().flatten() {
        let b = match is_ruler(&k.b) {
            true => format!("ruler {}", k.b),
            false => k.b.clone(),
        };
        for key in std::iter::once(&k.alone).chain(k.co.iter().map(|(_, c)| c)) {
            names.insert(key.clone(), (shown(&k.a, key), b.clone()));
        }
    }
    names
}

/// The rulers as planned, for `--dry-run`; a partner-only ruler with its CPUs per form.
pub fn planned_rulers(rulers: &[Ruler]) -> String {
    let mut out = String::new();
    for r in rulers {
        let s = r.spec();
        let on: Vec<String> = r
            .partners
            .iter()
            .flatten()
            .map(|(form, cpus)| format!("{}: CPUs {}", form.name(), cpus_in_order(cpus.clone())))
            .collect();
        let partner_only = match on.is_empty() {
            true => String::new(),
            false => format!("; measured as the partner only ({})", on.join("; ")),
        };
        out.push_str(&fit(&format!(
            "  ruler {}: {} ({}){partner_only}",
            s.name, s.resource, s.workload
        )));
    }
    out
}

/// The summary after the cells: rulers, then per form the profiles, the model, the
/// predicted matrix, the combined speeds and the validation.
pub fn summary(doc: &ProfileDoc) -> String {
    let mut out = fit("\nRulers, each alone (its own pressure) [95% CI]:");
    out.push_str(&text::rulers(&doc.rulers));
    for l in &doc.ruler_checks {
        out.push_str(&fit(&format!("  check: {l}")));
    }
    let held_back = text::held_back(&doc.held_back);
    if !held_back.is_empty() {
        out.push_str(&fit(&format!(
            "\n{} pairs held back from the profiles, the fit and the validation:",
            held_back.len()
        )));
        for l in held_back {
            out.push_str(&fit(&format!("  {l}")));
        }
    }
    for &form in &doc.forms {
        out.push_str(&fit(&format!(
            "\nProfiles, {}: sensitivity = the workload's slowdown beside the ruler; contentiousness = the ruler's slowdown beside the workload [95% CI]:",
            form.label()
        )));
        out.push_str(&text::profiles(&doc.profiles, form));
        if let Some(m) = doc.models.iter().find(|m| m.form == form) {
            out.push_str(&fit(&format!("\n{}", text::model(m))));
        }
        let matrix = text::matrix(&doc.predictions, &doc.unpredicted, form);
        if !matrix.is_empty() {
            out.push_str(&fit(
                "Predicted slowdown of the workload (row) beside the partner (column) [95% prediction interval]:",
            ));
            out.push_str(&matrix);
            let notes = [
                text::unknown_note(&doc.predictions, form),
                text::missing_note(&doc.predictions, &doc.unpredicted, form),
            ];
            for note in notes.iter().flatten() {
                out.push_str(&fit(note));
            }
            for l in text::unpredicted(&doc.unpredicted, form) {
                out.push_str(&fit(&format!("  {l}")));
            }
            for l in text::combined(&doc.predictions, form) {
                out.push_str(&fit(&format!("  {l}")));
            }
        }
        match doc.validation.iter().find(|v| v.form == form) {
            Some(v) => {
                out.push_str(&fit(&format!(
                    "\nValidation, {}: held-out pairs measured, against the prediction and two naive baselines:",
                    form.label()
                )));
                out.push_str(&text::validation(v));
            }
            None if doc.held_out.iter().any(|m| m.form == form) => {
                out.push_str(&fit(&format!(
                    "\nValidation, {}: no held-out pair could be checked (no model, or every one held back or not measured)",
                    form.label()
                )));
            }
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use smtlab_model::Direction;
    use smtlab_model::predict::{PairKeys, RulerSpec};

    use super::*;

    fn key(bench: &str, partner: &str) -> CellKey {
        CellKey {
            benchmark: bench.into(),
            params: Default::default(),
            conditions: smtlab_model::keys::Conditions {
                partner: Some(partner.into()),
                ..Default::default()
            },
            placement: "corun-alone".into(),
        }
    }

    #[test]
    fn cells_show_rulers_by_name_and_workloads_by_theirs() {
        let pair = |a: &str, b: &str, bench: &str, partner: &str| PairKeys {
            a: a.into(),
            b: b.into(),
            b_direction: Direction::Higher,
            alone: key(bench, partner),
            co: vec![],
        };
        let keys = PlanKeys {
            rulers: vec![RulerSpec {
                name: "l1d".into(),
                resource: "L1D".into(),
                workload: "mem-latency size=32768".into(),
                footprint_rank: Some(1),
                ..RulerSpec::default()
            }],
            sensitivity: vec![pair("w", "l1d", "mem-read", "ruler:l1d")],
            contentiousness: vec![pair("l1d", "w", "mem-latency", "w")],
            ..PlanKeys::default()
        };
        let names = cell_names(&keys, &[]);
        let of = |bench, partner| names[&key(bench, partner)].clone();
        assert_eq!(
            of("mem-read", "ruler:l1d"),
            ("w".into(), "ruler l1d".into())
        );
        assert_eq!(
            of("mem-latency", "w"),
            ("ruler l1d (mem-latency)".into(), "w".into())
        );
    }
}
