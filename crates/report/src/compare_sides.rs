//! The two runs a comparison sets side by side, for [`crate::compare`] and the modules it
//! uses: which run a figure is from ([`Side`]) and the environment facts they differ in
//! (`env_diffs`).

use serde::Serialize;
use smtlab_model::{Handoff, RunMeta};

use crate::environment::{Role, facts};

/// An environment fact that differs between the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvDiff {
    pub field: String,
    pub a: Option<String>,
    pub b: Option<String>,
}

smtlab_model::named_enum! {
    fn letter;
    /// Which run a missing cell was measured in; `letter`: `A` or `B`, as every output
    /// names the runs.
    #[derive(Serialize)]
    pub enum Side {
        A = "A",
        B = "B",
    }
}

/// The setup facts ([`Role::Setup`]) whose text differs between the runs, then the
/// CPU pairs whose handoff changed ([`Role::Sharing`]), in the order of
/// [`crate::environment::facts`].
pub(crate) fn env_diffs(a: &RunMeta, b: &RunMeta) -> Vec<EnvDiff> {
    let mut diffs: Vec<EnvDiff> = facts(a)
        .into_iter()
        .zip(facts(b))
        .filter(|(x, y)| x.role == Role::Setup && x.value != y.value)
        .map(|(x, y)| EnvDiff {
            field: x.key.into(),
            a: x.value,
            b: y.value,
        })
        .collect();
    diffs.extend(handoff_diff(a, b));
    diffs
}

/// Whether rows on two CPUs or more cannot be compared between `a` and `b`: the runs
/// are of one host, and the CPU pairs' cache-line handoffs at their starts differ by
/// [`HANDOFF_CHANGE`] or more (the host moved the virtual machine's CPUs). Not between
/// two hosts, where the sharing is part of what is compared.
///
/// [`HANDOFF_CHANGE`]: smtlab_model::run::HANDOFF_CHANGE
pub(crate) fn sharing_moved(a: &RunMeta, b: &RunMeta) -> bool {
    let host = &a.environment.hostname;
    let (x, y) = (&a.environment.cpu_handoff, &b.environment.cpu_handoff);
    host.is_some()
        && *host == b.environment.hostname
        && !smtlab_model::run::handoff_changes(x, y).is_empty()
}

/// The CPU pairs whose cache-line handoff differs by [`HANDOFF_CHANGE`] or more (the
/// host moved a virtual machine's CPUs between the runs, or another machine), at most
/// three named.
///
/// [`HANDOFF_CHANGE`]: smtlab_model::run::HANDOFF_CHANGE
fn handoff_diff(a: &RunMeta, b: &RunMeta) -> Option<EnvDiff> {
    let changed =
        smtlab_model::run::handoff_changes(&a.environment.cpu_handoff, &b.environment.cpu_handoff);
    let side = |pick: fn(&(Handoff, Handoff)) -> Handoff| {
        let mut named: Vec<String> = changed
            .iter()
            .take(3)
            .map(|p| crate::units::handoff_pair_text(&pick(p)))
            .collect();
        if changed.len() > 3 {
            named.push(format!("{} more pairs", changed.len() - 3));
        }
        Some(named.join(", "))
    };
    (!changed.is_empty()).then(|| EnvDiff {
        field: "cpu_handoff".into(),
        a: side(|p| p.0),
        b: side(|p| p.1),
    })
}
