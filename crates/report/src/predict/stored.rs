//! A stored `predict` run read back: its pairs by role from its cells' keys, so that
//! the report, `advise --partners` and `fleet` get the run's profiles and model
//! without measuring anything.
//!
//! The roles follow from the keys the plan gave the cells: a partner named
//! `ruler:NAME` makes a workload's sensitivity pair; a ruler's benchmark and parameters
//! ([`ruler_definitions`] on the run's topology) beside a workload make its
//! contentiousness pair; a workload beside a workload is a workload pair. Which
//! workload pairs the measuring command held out is not stored, so the model read back
//! is fitted on every measured workload pair (held-out ones included) and has no
//! validation of its own: `predict --validate` prints that as it measures.

use std::collections::BTreeMap;

use smtlab_model::keys::Form;
use smtlab_model::predict::{
    PairKeys, PlanKeys, RULER_PREFIX, RulerDef, RulerSpec, ruler_definitions,
};
use smtlab_model::{CellKey, CellRecord, Direction, RunResults};

use super::{ProfileDoc, analyse};
use crate::corun::form_of;

/// The suite of a `predict` run.
pub const SUITE: &str = "predict";

/// One pair's cells: A's benchmark, parameters and the partner's name.
type PairId = (String, BTreeMap<String, String>, String);

/// The cells of each pair, in first-seen order.
fn pairs<'a>(cells: &'a [CellRecord]) -> Vec<(PairId, Vec<&'a CellRecord>)> {
    let corun = cells.iter().filter_map(|c| Some((c, form_of(c)?.1)));
    let pairs = crate::grouped(corun, |(c, partner)| {
        (c.benchmark.clone(), c.params.clone(), partner.to_string())
    });
    let cells_of = |(id, list): (PairId, Vec<(&'a CellRecord, &str)>)| {
        (id, list.into_iter().map(|(c, _)| c).collect())
    };
    pairs.into_iter().map(cells_of).collect()
}

/// The keys of one pair, labelled `a` beside `b`; `None` without its alone cell.
fn pair_keys(a: &str, b: &str, b_direction: Direction, cells: &[&CellRecord]) -> Option<PairKeys> {
    let alone = cells
        .iter()
        .find(|c| c.conditions.form == Some(Form::Alone))?;
    let mut co: Vec<(Form, CellKey)> = cells
        .iter()
        .filter_map(|c| Some((c.conditions.form.filter(|f| *f != Form::Alone)?, c.key())))
        .collect();
    co.sort_by_key(|(f, _)| *f);
    Some(PairKeys {
        a: a.into(),
        b: b.into(),
        b_direction,
        alone: alone.key(),
        co,
    })
}

/// The roles of a stored `predict` run's cells; `None` for another suite, or a run
/// without a measured sensitivity pair.
pub fn plan_keys(r: &RunResults) -> Option<PlanKeys> {
    if r.run.suite.as_deref() != Some(SUITE) {
        return None;
    }
    let pairs = pairs(&r.cells);
    // The workloads: each one's benchmark and parameters, from its pairs beside rulers.
    let beside_rulers = || {
        pairs
            .iter()
            .filter_map(|((b, p, partner), _)| Some((b, p, partner.strip_prefix(RULER_PREFIX)?)))
    };
    let workloads: Vec<(String, BTreeMap<String, String>)> =
        crate::grouped(beside_rulers(), |w| w.0)
            .into_iter()
            .map(|(bench, of_bench)| (bench.clone(), of_bench[0].1.clone()))
            .collect();
    let used = crate::first_seen(beside_rulers().map(|(_, _, ruler)| ruler));
    if workloads.is_empty() {
        return None;
    }
    let cpu = r
        .cells
        .iter()
        .find(|c| form_of(c).is_some())
        .and_then(|c| c.placement.cpus.first().copied())
        .unwrap_or(0);
    let defs: Vec<RulerDef> = ruler_definitions(&r.run.topology, cpu)
        .into_iter()
        .filter(|d| used.contains(&d.name))
        .collect();
    let ruler_of = |bench: &str, params: &BTreeMap<String, String>| {
        defs.iter().find(|d| d.matches(bench, params))
    };
    // A partner's direction, from a cell of its benchmark (a ruler's by its name).
    let direction = |partner: &str| {
        let name = partner.strip_prefix(RULER_PREFIX).unwrap_or(partner);
        let bench = defs
            .iter()
            .find(|d| d.name == name)
            .map_or(name, |d| d.bench);
        r.cells
            .iter()
            .find(|c| c.benchmark == bench)
            .map_or(Direction::Higher, |c| c.direction)
    };
    let is_workload = |bench: &str, params: &BTreeMap<String, String>| {
        workloads.iter().any(|(b, p)| b == bench && p == params)
    };
    let mut keys = PlanKeys {
        workloads: workloads.iter().map(|(b, _)| b.clone()).collect(),
        ..PlanKeys::default()
    };
    for ((bench, params, partner), cells) in &pairs {
        if let Some(ruler) = partner.strip_prefix(RULER_PREFIX) {
            keys.sensitivity
                .extend(pair_keys(bench, ruler, direction(partner), cells));
            continue;
        }
        if !keys.workloads.contains(partner) {
            continue;
        }
        if let Some(d) = ruler_of(bench, params) {
            keys.contentiousness
                .extend(pair_keys(d.name, partner, direction(partner), cells));
        }
        if is_workload(bench, params) {
            keys.training
                .extend(pair_keys(bench, partner, direction(partner), cells));
        }
    }
    // A server workload was no one's partner in a run stored before a server could be.
    let partner = |w: &String| {
        r.cells
            .iter()
            .any(|c| c.conditions.partner.as_ref() == Some(w))
    };
    keys.never_partners = keys
        .workloads
        .iter()
        .filter(|w| !partner(w))
        .cloned()
        .collect();
    keys.rulers = defs.iter().map(|d| spec(d, r)).collect();
    keys.forms = [Form::Sibling, Form::Cores]
        .into_iter()
        .filter(|f| r.cells.iter().any(|c| c.conditions.form == Some(*f)))
        .collect();
    Some(keys)
}

/// A ruler as planned, its parameters as its cells were measured with (a partner-only
/// ruler's as its definition gives them: no cell is its own); a partner-only ruler's
/// unit from the run's catalog entry of its benchmark.
fn spec(d: &RulerDef, r: &RunResults) -> RulerSpec {
    let own = || {
        d.params
            .iter()
            .flatten()
            .map(|(k, v)| (k.to_string(), v.clone()))
    };
    let params: BTreeMap<String, String> = match d.partner_only() {
        true => own().collect(),
        false => r
            .cells
            .iter()
            .find(|c| d.matches(&c.benchmark, &c.params))
            .map(|c| c.params.clone())
            .unwrap_or_default(),
    };
    let unit = r.benchmarks.iter().find(|b| b.name == d.bench);
    RulerSpec {
        partner_only: d.partner_only(),
        partner_unit: unit
            .filter(|_| d.partner_only())
            .map(|b| b.unit.to_string()),
        name: d.name.into(),
        resource: d.resource.into(),
        workload: std::iter::once(d.bench.to_string())
            .chain(params.iter().map(|(k, v)| format!("{k}={v}")))
            .collect::<Vec<_>>()
            .join(" "),
        footprint_rank: d.footprint_rank(),
    }
}

/// The profiles and model of a stored `predict` run, fitted on every measured workload
/// pair; `None` for another suite.
pub fn analyse_run(r: &RunResults) -> Option<ProfileDoc> {
    let keys = plan_keys(r)?;
    Some(analyse(&keys, &r.cells, r.run.id))
}
