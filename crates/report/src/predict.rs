//! `smtlab predict`: co-run interference predicted from rulers, from stored cells.
//!
//! A *ruler* is a small stressor pressing one shared resource. Each workload W gets a
//! *profile* per co-run form: its *sensitivity* to each ruler (W's slowdown beside the
//! ruler) and its *contentiousness* (the ruler's slowdown beside W), both ratios with
//! Fieller 95% intervals measured as `corun` measures a pair ([`crate::corun::slowdown`]).
//! A ruler measured as the partner only (`RulerSpec::partner_only`: it spreads over
//! every CPU outside the measured core) has no cells of its own: its contentiousness is
//! the partner's side of the cells of each workload beside it, and its own figure the
//! partner's values alone in the windows interleaved with them.
//! The [`model`] predicts A's slowdown beside B from A's sensitivities and B's
//! contentiousness, fitted on a few measured workload pairs; [`validate`] holds it
//! against pairs measured but kept out of the fit. The JSON of it all is
//! `smtlab.profile/1` ([`ProfileDoc`]), which a scheduler can read.
//!
//! The runner plans the cells; what this module is handed is, for every measured pair,
//! the keys of its cells ([`PairKeys`], [`PlanKeys`]).

pub mod html;
pub mod model;
pub mod stored;
pub mod text;
pub mod validate;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smtlab_model::keys::Form;
pub use smtlab_model::predict::{PairKeys, PlanKeys, RulerSpec};
use smtlab_model::stats::Ratio;
use smtlab_model::{CellKey, CellRecord, Summary};

use crate::corun::{PARTNER_ALONE_VALUE, cut_short, metric_summary, partner_slowdown, slowdown};
use model::{Model, NoFigure, Prediction};
use validate::Validation;

/// The schema name of the profile JSON.
pub const PROFILE_SCHEMA: &str = "smtlab.profile/1";

/// One measured pair in one form: A's slowdown beside B and B's beside A (from B's
/// samples inside A's, against B alone in windows interleaved with them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairMeasure {
    pub a: String,
    pub b: String,
    pub form: Form,
    pub slowdown: Option<Ratio>,
    pub partner_slowdown: Option<Ratio>,
    /// Why its figures are held back from the profiles, the fit and the validation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doubt: Option<String>,
}

impl PairMeasure {
    /// A's slowdown, unless held back.
    fn usable(&self) -> Option<Ratio> {
        self.slowdown.filter(|_| self.doubt.is_none())
    }

    /// The same cells from the partner's side: B beside A (B's slowdown from its
    /// samples inside A's), held back as the pair is.
    fn partner_side(&self) -> PairMeasure {
        PairMeasure {
            a: self.b.clone(),
            b: self.a.clone(),
            slowdown: self.partner_slowdown,
            partner_slowdown: self.slowdown,
            ..self.clone()
        }
    }
}

/// The cells by their key, looked up once per pair.
fn index(cells: &[CellRecord]) -> BTreeMap<CellKey, &CellRecord> {
    cells.iter().map(|c| (c.key(), c)).collect()
}

/// Why a pair's figures are held back: a cell whose figure is not its own (disturbed:
/// steal or other processes on its CPUs), or co-run samples cut far shorter than the
/// reference's. An unsteady cell is kept: its wide interval says what it is worth, and
/// the fit's residuals carry its noise into the prediction interval.
pub fn doubt(alone: &CellRecord, co: &CellRecord) -> Option<String> {
    if let Some(why) = alone.result.disturbed_reason() {
        return Some(format!("alone: {why}"));
    }
    if let Some(why) = co.result.disturbed_reason() {
        return Some(format!("beside: {why}"));
    }
    cut_short(alone, co)
}

/// The measured pairs of `keys` among `cells`, one per pair and form; a pair whose
/// cells were not measured (skipped, stopped) has no figures.
pub fn measure_pairs(cells: &[CellRecord], keys: &[PairKeys]) -> Vec<PairMeasure> {
    let cells = index(cells);
    let mut out = Vec::new();
    for k in keys {
        let alone = cells.get(&k.alone).copied();
        for (form, key) in &k.co {
            let co = cells.get(key).copied();
            let both = alone.zip(co);
            out.push(PairMeasure {
                a: k.a.clone(),
                b: k.b.clone(),
                form: *form,
                slowdown: both.and_then(|(al, co)| {
                    slowdown(&al.result.summary, &co.result.summary, co.direction)
                }),
                partner_slowdown: co.and_then(|c| partner_slowdown(&c.result, k.b_direction)),
                doubt: both.and_then(|(al, co)| doubt(al, co)),
            });
        }
    }
    out
}

/// A ruler's own pressure: its figure alone (in its unit) with the 95% half-width, from
/// its alone cells, and the spec it was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ruler {
    #[serde(flatten)]
    pub spec: RulerSpec,
    pub unit: Option<String>,
    pub alone: Option<f64>,
    pub alone_ci95_half_width: Option<f64>,
    pub alone_n: Option<usize>,
}

/// Each ruler with its pressure, read from the first measured alone cell of the pairs
/// where it is the measured workload (`plan.contentiousness`); a partner-only ruler's
/// from its values alone in the windows interleaved with its first measured cell beside
/// a workload (`plan.sensitivity`).
pub fn rulers(plan: &PlanKeys, cells: &[CellRecord]) -> Vec<Ruler> {
    let cells = index(cells);
    let of = |spec: &RulerSpec| -> Option<(Summary, Option<String>)> {
        if spec.partner_only {
            let beside = plan.sensitivity.iter().filter(|k| k.b == spec.name);
            let co = beside
                .flat_map(|k| &k.co)
                .filter_map(|(_, key)| cells.get(key));
            let alone = co
                .filter_map(|c| metric_summary(&c.result, PARTNER_ALONE_VALUE))
                .next()?;
            return Some((alone, spec.partner_unit.clone()));
        }
        let alone = alone_cell(plan, &cells, &spec.name)?;
        Some((alone.result.summary.clone(), Some(alone.unit.clone())))
    };
    plan.rulers
        .iter()
        .map(|spec| {
            let alone = of(spec);
            Ruler {
                spec: spec.clone(),
                unit: alone.as_ref().and_then(|a| a.1.clone()),
                alone: alone.as_ref().map(|a| a.0.mean),
                alone_ci95_half_width: alone.as_ref().map(|a| a.0.ci95_half_width),
                alone_n: alone.as_ref().map(|a| a.0.n),
            }
        })
        .collect()
}

/// The first measured cell of ruler `name` alone, from the pairs where it is the
/// measured workload.
fn alone_cell<'c>(
    plan: &PlanKeys,
    cells: &BTreeMap<CellKey, &'c CellRecord>,
    name: &str,
) -> Option<&'c CellRecord> {
    plan.contentiousness
        .iter()
        .filter(|k| k.a == name)
        .find_map(|k| cells.get(&k.alone).copied())
}

/// The check of a ruler of code (its cells say how many bytes of code it runs through):
/// whether that leaves the L1 instruction cache, so its column presses the instruction
/// supply. One line per such ruler.
pub fn code_checks(plan: &PlanKeys, cells: &[CellRecord]) -> Vec<String> {
    use smtlab_model::metrics::frontend::{CODE_BYTES, L1I_BYTES};
    let cells = index(cells);
    let mut out = Vec::new();
    for spec in &plan.rulers {
        let Some(alone) = alone_cell(plan, &cells, &spec.name) else {
            continue;
        };
        let Some(code) = metric_summary(&alone.result, CODE_BYTES) else {
            continue;
        };
        let name = &spec.name;
        let span = crate::fmt::bytes(code.mean as u64);
        out.push(match metric_summary(&alone.result, L1I_BYTES) {
            Some(l1i) if code.mean > l1i.mean => format!(
                "{name} runs through {span} of code, {:.1}x the {} L1 instruction cache: it leaves it",
                code.mean / l1i.mean,
                crate::fmt::bytes(l1i.mean as u64)
            ),
            Some(l1i) => format!(
                "{name} runs through {span} of code, within the {} L1 instruction cache: its column may press the branch predictors only",
                crate::fmt::bytes(l1i.mean as u64)
            ),
            None => format!(
                "{name} runs through {span} of code (the L1 instruction cache's size is not known here)"
            ),
        });
    }
    out
}

/// The check of the footprint rulers' own figures: each chase over a larger cache is
/// slower per load than the one over the smaller, beyond both intervals. One line per
/// step, saying whether it holds.
pub fn footprint_checks(rulers: &[Ruler]) -> Vec<String> {
    let mut chain: Vec<&Ruler> = rulers
        .iter()
        .filter(|r| r.spec.footprint_rank.is_some() && r.alone.is_some())
        .collect();
    chain.sort_by_key(|r| r.spec.footprint_rank);
    chain
        .windows(2)
        .map(|w| {
            let (lo, hi) = (w[0], w[1]);
            let top = |r: &Ruler| r.alone.unwrap_or(0.0) + r.alone_ci95_half_width.unwrap_or(0.0);
            let bottom =
                |r: &Ruler| r.alone.unwrap_or(0.0) - r.alone_ci95_half_width.unwrap_or(0.0);
            let (a, b) = (&lo.spec.name, &hi.spec.name);
            if bottom(hi) > top(lo) {
                format!("{b} is slower per load than {a}: its footprint leaves the smaller cache")
            } else {
                format!(
                    "{b} is not clearly slower per load than {a}: its footprint may not leave the smaller cache, so its column may press what {a}'s does"
                )
            }
        })
        .collect()
}

/// The check of the partner-only rulers: one measured beside workloads without a figure
/// of its own finished no sample inside theirs (one pass over its buffer outlasted
/// them), so its contentiousness is unknown too. One line per such ruler.
pub fn partner_checks(rulers: &[Ruler], plan: &PlanKeys, cells: &[CellRecord]) -> Vec<String> {
    let measured = |name: &str| {
        let beside = plan.sensitivity.iter().filter(|k| k.b == name);
        let mut co = beside.flat_map(|k| &k.co);
        co.any(|(_, key)| cells.iter().any(|c| c.key() == *key))
    };
    rulers
        .iter()
        .filter(|r| r.spec.partner_only && r.alone.is_none() && measured(&r.spec.name))
        .map(|r| {
            format!(
                "{} finished no sample of its own inside a workload's sample beside it (a pass over its buffer outlasted them): its contentiousness and own figure are unknown",
                r.spec.name
            )
        })
        .collect()
}

/// A workload's figures against one ruler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RulerFigures {
    pub ruler: String,
    /// The workload's slowdown beside the ruler.
    pub sensitivity: Option<Ratio>,
    /// The ruler's slowdown beside the workload.
    pub contentiousness: Option<Ratio>,
}

/// A workload's profile in one form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub workload: String,
    pub form: Form,
    pub rulers: Vec<RulerFigures>,
}

impl Profile {
    /// Each ruler's figure (`None` where not measured or held back).
    fn figures(&self, sensitivity: bool) -> Vec<Option<f64>> {
        self.rulers
            .iter()
            .map(|r| match sensitivity {
                true => r.sensitivity.map(|s| s.ratio),
                false => r.contentiousness.map(|s| s.ratio),
            })
            .collect()
    }
}

fn slowdown_of(measures: &[PairMeasure], a: &str, b: &str, form: Form) -> Option<Ratio> {
    measures
        .iter()
        .find(|m| m.a == a && m.b == b && m.form == form)
        .and_then(PairMeasure::usable)
}

/// The profile of each workload in each form: `sens` holds the pairs of a workload
/// beside a ruler, `cont` those of a ruler beside a workload.
pub fn profiles(
    workloads: &[String],
    rulers: &[String],
    forms: &[Form],
    sens: &[PairMeasure],
    cont: &[PairMeasure],
) -> Vec<Profile> {
    let mut out = Vec::new();
    for &form in forms {
        for w in workloads {
            let figures = rulers
                .iter()
                .map(|r| RulerFigures {
                    ruler: r.clone(),
                    sensitivity: slowdown_of(sens, w, r, form),
                    contentiousness: slowdown_of(cont, r, w, form),
                })
                .collect();
            out.push(Profile {
                workload: w.clone(),
                form,
                rulers: figures,
            });
        }
    }
    out
}

/// The features of A beside B in `form`, and the rulers for which A's sensitivity or
/// B's contentiousness is missing (not measured, or held back): such a ruler adds
/// nothing (its feature is 0). `None` where A or B has no profile, or no ruler has both
/// figures (B never a partner; or every figure held back): the model could
/// only say "no interference", and a measured pair of it would teach the fit nothing.
pub fn pair_features(
    profiles: &[Profile],
    a: &str,
    b: &str,
    form: Form,
) -> Option<(Vec<f64>, Vec<String>)> {
    let of = |w: &str| profiles.iter().find(|p| p.workload == w && p.form == form);
    let (pa, pb) = (of(a)?, of(b)?);
    let (sens, cont) = (pa.figures(true), pb.figures(false));
    let mut unknown = Vec::new();
    let (mut s, mut c) = (Vec::new(), Vec::new());
    for ((x, y), r) in sens.iter().zip(&cont).zip(&pa.rulers) {
        if x.is_none() || y.is_none() {
            unknown.push(r.ruler.clone());
        }
        s.push(x.zip(*y).map_or(1.0, |(x, _)| x));
        c.push(x.zip(*y).map_or(1.0, |(_, y)| y));
    }
    (unknown.len() < pa.rulers.len()).then(|| (model::features(&s, &c), unknown))
}

/// Measured slowdowns of ordered pairs in `form`: A beside B from each pair, and B
/// beside A from the partner's side where the two differ.
pub fn ordered(measures: &[PairMeasure], form: Form) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for m in measures
        .iter()
        .filter(|m| m.form == form && m.doubt.is_none())
    {
        if let Some(s) = m.slowdown {
            out.push((m.a.clone(), m.b.clone(), s.ratio));
        }
        if let Some(s) = m.partner_slowdown.filter(|_| m.a != m.b) {
            out.push((m.b.clone(), m.a.clone(), s.ratio));
        }
    }
    out
}

/// The model of one form, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FormModel {
    pub form: Form,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<Model>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_fitted: Option<String>,
}

/// Fits the model of `form` on the measured training pairs.
pub fn fit_form(
    profiles: &[Profile],
    rulers: &[String],
    training: &[PairMeasure],
    form: Form,
) -> FormModel {
    let obs: Vec<model::Observation> = ordered(training, form)
        .into_iter()
        .filter_map(|(a, b, s)| {
            Some(model::Observation {
                features: pair_features(profiles, &a, &b, form)?.0,
                slowdown: s,
            })
        })
        .collect();
    match model::fit(rulers, &obs) {
        Ok(m) => FormModel {
            form,
            model: Some(m),
            not_fitted: None,
        },
        Err(e) => FormModel {
            form,
            model: None,
            not_fitted: Some(e.to_string()),
        },
    }
}

/// A predicted entry of the matrix: A's slowdown beside B and the pair's combined speed
/// (none where B beside A cannot be predicted: A never a partner).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictedPair {
    pub a: String,
    pub b: String,
    pub form: Form,
    pub slowdown: Prediction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub combined_speed: Option<Prediction>,
    /// Rulers without a figure for this pair (either direction), which add nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
}

/// An ordered pair the model has features for but gives no figure (an extrapolation, a
/// sum at or below 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unpredicted {
    pub a: String,
    pub b: String,
    pub form: Form,
    pub why: NoFigure,
}

/// Every ordered pair of `workloads` in `model`'s form that [`pair_features`] has
/// features for: predicted, or why the model gives no figure.
pub fn predict_all(
    model: &FormModel,
    profiles: &[Profile],
    workloads: &[String],
) -> (Vec<PredictedPair>, Vec<Unpredicted>) {
    let (mut out, mut none) = (Vec::new(), Vec::new());
    let Some(m) = &model.model else {
        return (out, none);
    };
    let form = model.form;
    let one = |a: &str, b: &str| {
        let (x, unknown) = pair_features(profiles, a, b, form)?;
        Some((m.predict(&x), unknown))
    };
    for a in workloads {
        for b in workloads {
            let Some((ab, mut unknown)) = one(a, b) else {
                continue;
            };
            let ab = match ab {
                Ok(p) => p,
                Err(why) => {
                    let (a, b) = (a.clone(), b.clone());
                    none.push(Unpredicted { a, b, form, why });
                    continue;
                }
            };
            let back = one(b, a);
            if let Some((_, back)) = &back {
                unknown.extend(
                    back.iter()
                        .filter(|r| !unknown.contains(r))
                        .cloned()
                        .collect::<Vec<_>>(),
                );
            }
            let back = back.and_then(|(ba, _)| ba.ok());
            out.push(PredictedPair {
                a: a.clone(),
                b: b.clone(),
                form,
                slowdown: ab,
                combined_speed: back.map(|ba| model::combined(&ab, &ba)),
                unknown,
            });
        }
    }
    (out, none)
}

/// The whole result of a `predict` run: `smtlab.profile/1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileDoc {
    pub schema: String,
    pub run: i64,
    pub forms: Vec<Form>,
    pub rulers: Vec<Ruler>,
    /// The rulers' own checks ([`footprint_checks`], [`partner_checks`]).
    pub ruler_checks: Vec<String>,
    pub profiles: Vec<Profile>,
    pub training: Vec<PairMeasure>,
    /// The held-out pairs measured for the validation (held back ones included).
    pub held_out: Vec<PairMeasure>,
    /// Pairs of every role whose figures were held back, with the reason.
    pub held_back: Vec<PairMeasure>,
    pub models: Vec<FormModel>,
    pub predictions: Vec<PredictedPair>,
    /// Pairs the models give no figure for, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unpredicted: Vec<Unpredicted>,
    pub validation: Vec<Validation>,
}

impl ProfileDoc {
    /// The profiled workloads, in their order.
    pub fn workloads(&self) -> Vec<String> {
        crate::first_seen(self.profiles.iter().map(|p| p.workload.clone()))
    }
}

/// Which `n` of the workload pairs `candidates` (A, B) to fit the model on, once the
/// profiles are measured: those whose features, both ways round and in every form,
/// inform the model most ([`model::most_informative`]); the given order where the
/// profiles tell nothing.
pub fn training_choice(
    plan: &PlanKeys,
    cells: &[CellRecord],
    candidates: &[(String, String)],
    n: usize,
) -> Vec<usize> {
    let (_, _, profiles) = measured_profiles(plan, cells);
    let vectors = |(a, b): &(String, String)| -> Vec<Vec<f64>> {
        let ways = [(a, b), (b, a)];
        let ways = &ways[..if a == b { 1 } else { 2 }];
        plan.forms
            .iter()
            .flat_map(|&f| ways.iter().map(move |(x, y)| (x, y, f)))
            .filter_map(|(x, y, f)| Some(pair_features(&profiles, x, y, f)?.0))
            .collect()
    };
    let features: Vec<Vec<Vec<f64>>> = candidates.iter().map(vectors).collect();
    model::most_informative(&features, n)
}

/// The profiles' pairs (sensitivity, contentiousness with the partner-only rulers'
/// sides) and the profiles made from them.
fn measured_profiles(
    plan: &PlanKeys,
    cells: &[CellRecord],
) -> (Vec<PairMeasure>, Vec<PairMeasure>, Vec<Profile>) {
    let names: Vec<String> = plan.rulers.iter().map(|r| r.name.clone()).collect();
    let sens = measure_pairs(cells, &plan.sensitivity);
    let cont = measure_pairs(cells, &plan.contentiousness);
    // A partner-only ruler's contentiousness: the partner's side of its sensitivity pairs.
    let partner_only = |m: &&PairMeasure| {
        plan.rulers.iter().any(|r| r.partner_only && r.name == m.b)
            && !plan.never_partners.contains(&m.a)
    };
    let cont_all: Vec<PairMeasure> = cont
        .iter()
        .cloned()
        .chain(
            sens.iter()
                .filter(partner_only)
                .map(PairMeasure::partner_side),
        )
        .collect();
    let profiles = profiles(&plan.workloads, &names, &plan.forms, &sens, &cont_all);
    (sens, cont, profiles)
}

/// Profiles, models, predictions and validation of a `predict` run from its cells.
pub fn analyse(plan: &PlanKeys, cells: &[CellRecord], run: i64) -> ProfileDoc {
    let names: Vec<String> = plan.rulers.iter().map(|r| r.name.clone()).collect();
    let (sens, cont, profiles) = measured_profiles(plan, cells);
    let training = measure_pairs(cells, &plan.training);
    let held_out = measure_pairs(cells, &plan.held_out);
    let models: Vec<FormModel> = plan
        .forms
        .iter()
        .map(|&f| fit_form(&profiles, &names, &training, f))
        .collect();
    let (mut predictions, mut unpredicted) = (Vec::new(), Vec::new());
    for m in &models {
        let (figures, none) = predict_all(m, &profiles, &plan.workloads);
        predictions.extend(figures);
        unpredicted.extend(none);
    }
    let validation = models
        .iter()
        .filter_map(|m| validate::validate(m, &profiles, &held_out))
        .collect();
    let held_back = [&sens, &cont, &training, &held_out]
        .into_iter()
        .flatten()
        .filter(|m| m.doubt.is_some())
        .cloned()
        .collect();
    let rulers = rulers(plan, cells);
    ProfileDoc {
        schema: PROFILE_SCHEMA.into(),
        run,
        forms: plan.forms.clone(),
        ruler_checks: [
            footprint_checks(&rulers),
            code_checks(plan, cells),
            partner_checks(&rulers, plan, cells),
        ]
        .concat(),
        rulers,
        profiles,
        training,
        held_out,
        held_back,
        models,
        predictions,
        unpredicted,
        validation,
    }
}

#[cfg(test)]
mod tests;
