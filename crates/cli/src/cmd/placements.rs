//! `smtlab placements`.

use std::process::ExitCode;

use anyhow::Result;
use serde::Serialize;
use smtlab_model::{PlacementSpec, ResolvedPlacement, Topology};

use crate::args::PlacementsArgs;
use crate::output::{emit, json_text};
use crate::render;
use crate::render::placements::Entry;
use crate::settings::load_topology;

#[derive(Serialize)]
struct Listing<'a> {
    schema: &'static str,
    topology: String,
    placements: &'a [Entry],
}

/// Lists the placements; exits 1 when a placement the user named cannot be satisfied on
/// this machine (the standard set lists what does not fit without failing).
pub fn run(
    args: &PlacementsArgs,
    machine: &dyn smtlab_runner::machine::Machine,
) -> Result<ExitCode> {
    let topo = load_topology(&args.sysfs, machine)?;
    let asked = crate::settings::split_placements(&args.placements);
    let entries = entries(&topo, &asked)?;
    if args.json {
        let listing = Listing {
            schema: "smtlab.placements/1",
            topology: render::topo::verdict(&topo),
            placements: &entries,
        };
        emit(&json_text(&listing)?)?;
    } else {
        let mut out = render::placements::table(&entries);
        out.push('\n');
        out.push_str(&render::topo::verdict(&topo));
        out.push('\n');
        emit(&out)?;
    }
    let unmet = !asked.is_empty() && entries.iter().any(|e| e.placement.is_none());
    // 1 (failure) when unmet.
    Ok(ExitCode::from(u8::from(unmet)))
}

/// The standard set, or the user's placements. A spec that does not parse is an error of
/// the command; one that parses but does not fit the machine is listed with its reason.
fn entries(topo: &Topology, asked: &[String]) -> Result<Vec<Entry>> {
    let pairs: Vec<(PlacementSpec, Result<ResolvedPlacement, String>)> = if asked.is_empty() {
        smtlab_placement::standard_placements(topo)
            .into_iter()
            .map(|(s, r)| (s, r.map_err(|e| e.to_string())))
            .collect()
    } else {
        asked
            .iter()
            .map(|text| {
                let spec = smtlab_placement::parse(text)?;
                let r = smtlab_placement::resolve(&spec, topo).map_err(|e| e.to_string());
                Ok((spec, r))
            })
            .collect::<Result<_, smtlab_placement::PlacementError>>()?
    };
    Ok(pairs
        .into_iter()
        .map(|(spec, r)| Entry {
            spec: spec.text,
            error: r.as_ref().err().cloned(),
            placement: r.ok(),
        })
        .collect())
}
