//! A workload's cells as table rows: grouped by parameter set, labelled and ordered by
//! the swept parameter (paper 001's row heading), with the fixed parameters in a line.

use std::collections::BTreeMap;

use smtlab_model::CellRecord;

use crate::fmt::params;
use crate::units::parse_size;

/// One row of a workload table: a label, an x value for the chart, the row's cells.
pub(super) struct Row<'a> {
    pub(super) label: String,
    pub(super) x: Option<f64>,
    pub(super) cells: Vec<&'a CellRecord>,
}

/// The parameters whose values differ among `cells`, or the workload's main parameter
/// (`BenchInfo::main_param`, paper 001's row heading) when none does. Conditions (an SMT
/// state, say) count as parameters here.
pub(super) fn swept_keys(cells: &[&CellRecord], main: Option<&str>) -> Vec<String> {
    let flat: Vec<BTreeMap<String, String>> = cells.iter().map(|c| c.flat_params()).collect();
    let varying = flat
        .iter()
        .flatten()
        .filter(|(k, v)| flat.iter().any(|d| d.get(*k) != Some(v)));
    let mut keys = crate::first_seen(varying.map(|(k, _)| k.clone()));
    if keys.is_empty()
        && let Some(k) = main.filter(|k| cells.first().is_some_and(|c| c.params.contains_key(*k)))
    {
        keys.push(k.to_string());
    }
    keys
}

/// The parameters every cell shares, apart from `keys`, as a line under a heading;
/// empty when there are none.
pub(super) fn fixed_params(cells: &[&CellRecord], keys: &[String]) -> String {
    let flat: Vec<BTreeMap<String, String>> = cells.iter().map(|c| c.flat_params()).collect();
    let Some(first) = flat.first() else {
        return String::new();
    };
    let fixed: BTreeMap<String, String> = first
        .iter()
        .filter(|(k, v)| !keys.contains(k) && flat.iter().all(|c| c.get(*k) == Some(v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if fixed.is_empty() {
        return String::new();
    }
    let line = maud::html! { p class="sub" { "other parameters: " code { (params(&fixed)) } } };
    line.into_string()
}

/// Cells grouped by parameter set, labelled by the swept parameters, sorted by the swept
/// parameter when there is one and it is a number.
pub(super) fn rows_by_params<'a>(
    cells: &[&'a CellRecord],
    main: Option<&str>,
) -> (Vec<String>, Vec<Row<'a>>) {
    let keys = swept_keys(cells, main);
    let mut rows: Vec<Row<'_>> = crate::grouped(cells.iter().copied(), crate::yields::variant)
        .into_iter()
        .map(|(_, cells)| {
            let flat = cells[0].flat_params();
            let label = if keys.is_empty() {
                params(&flat)
            } else {
                keys.iter()
                    .map(|k| flat.get(k).map_or("-", |v| v.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let x = (keys.len() == 1)
                .then(|| {
                    flat.get(&keys[0])
                        .and_then(|v| v.parse().ok().or_else(|| parse_size(v)))
                })
                .flatten();
            Row { label, x, cells }
        })
        .collect();
    if rows.iter().all(|r| r.x.is_some()) {
        rows.sort_by(|a, b| a.x.unwrap_or(0.0).total_cmp(&b.x.unwrap_or(0.0)));
    }
    (keys, rows)
}

pub(super) fn row_head(keys: &[String]) -> String {
    if keys.is_empty() {
        "params".into()
    } else {
        keys.join(", ")
    }
}
