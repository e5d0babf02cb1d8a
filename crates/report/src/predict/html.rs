//! The HTML section of a stored `predict` run (`id="corun"`): per form, the predicted
//! matrix of the workloads beside the one measured, both drawn by `corun`'s heatmap on
//! the same rows and columns, then the rulers with their own pressure and the model.

use maud::{PreEscaped, html};
use smtlab_model::keys::Form;
use smtlab_model::stats::Ratio;

use super::{PredictedPair, ProfileDoc, text};
use crate::corun::{Entry, heatmap};

/// A predicted pair as a matrix entry: its slowdown with the prediction interval.
fn entry(p: &PredictedPair) -> Entry {
    Entry {
        a: p.a.clone(),
        b: p.b.clone(),
        form: p.form,
        slowdown: Some(Ratio {
            ratio: p.slowdown.value,
            ci95_low: p.slowdown.low,
            ci95_high: p.slowdown.high,
            ci95_half_width_delta: None,
            df: None,
        }),
        partner_slowdown: None,
        combined_speed: p.combined_speed.as_ref().map(|c| c.value),
        cut_short: None,
    }
}

/// Every ordered pair of `workloads` in `form`, in their order, from `found` (an entry
/// with no figure where it has none), so two matrices share rows and columns.
fn grid(workloads: &[String], form: Form, found: &[Entry]) -> Vec<Entry> {
    let mut out = Vec::new();
    for a in workloads {
        for b in workloads {
            out.push(
                found
                    .iter()
                    .find(|e| e.form == form && &e.a == a && &e.b == b)
                    .cloned()
                    .unwrap_or(Entry {
                        a: a.clone(),
                        b: b.clone(),
                        form,
                        slowdown: None,
                        partner_slowdown: None,
                        combined_speed: None,
                        cut_short: None,
                    }),
            );
        }
    }
    out
}

/// A form, its predicted and measured heatmaps and its model's line.
type FormFigures = (Form, Option<String>, Option<String>, Option<String>);

/// The section, given the run's model and every measured entry of its co-run matrix
/// ([`crate::corun::matrix`]); only the entries of a workload beside a workload are
/// drawn as measured.
pub fn section(doc: &ProfileDoc, measured: &[Entry]) -> String {
    let predicted: Vec<Entry> = doc.predictions.iter().map(entry).collect();
    let forms: Vec<FormFigures> = doc
        .forms
        .iter()
        .map(|&form| {
            let label = form.label();
            let pred = heatmap(
                &grid(&doc.workloads(), form, &predicted),
                form,
                &format!("predicted slowdown of the row, {label}"),
                "95% prediction interval",
            )
            .filter(|_| predicted.iter().any(|e| e.form == form));
            let meas = heatmap(
                &grid(&doc.workloads(), form, measured),
                form,
                &format!("measured slowdown of the row, {label}"),
                "95% interval",
            );
            let model = doc.models.iter().find(|m| m.form == form).map(text::model);
            (form, pred, meas, model)
        })
        .collect();
    html! {
        section id="corun" {
            h2 { "Co-running workloads: predicted and measured" }
            p {
                "Each workload's slowdown (row) beside each partner (column), predicted from \
                 its sensitivity to the rulers and the partner's contentiousness (left), and \
                 as measured where this run measured the pair (right). The model read back \
                 from the stored run is fitted on every workload pair it measured, so those \
                 pairs are in its fit; "
                code { "smtlab predict --validate K" } " measures pairs kept out of it. \
                 Red: slower; blue: faster than alone; grey: the interval includes 1."
            }
            @for (form, pred, meas, model) in &forms {
                h3 { (form.label()) }
                div class="side" {
                    figure {
                        @match pred {
                            Some(svg) => (PreEscaped(svg)),
                            None => p class="muted" { "No model in this form." },
                        }
                        figcaption { "predicted (-: not predicted: the partner was never measured as one, no ruler has figures for the pair, or the model gives no figure, below)" }
                    }
                    figure {
                        @if let Some(svg) = meas { (PreEscaped(svg)) }
                        figcaption { "measured (-: not measured, or held back)" }
                    }
                }
                @if let Some(m) = model { p class="sub" { (m) } }
                @let none = text::unpredicted(&doc.unpredicted, *form);
                @if !none.is_empty() {
                    ul class="notes" { @for l in none { li { (l) } } }
                }
            }
            h3 { "Rulers" }
            div class="scroll" { pre { (text::rulers(&doc.rulers)) } }
            @if !doc.held_back.is_empty() {
                h3 { "Held back" }
                ul class="notes" { @for l in text::held_back(&doc.held_back) { li { (l) } } }
            }
        }
    }
    .into_string()
}
