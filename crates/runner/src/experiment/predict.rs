//! `smtlab predict`: co-run interference predicted from rulers. The plan of cells.
//!
//! A *ruler* ([`Ruler`]) is a catalog benchmark with parameters that make it press one
//! shared resource: the integer or floating-point chain of `int-ops`/`fp-ops`, a copy
//! inside the L1D (`mem-copy`, the load/store ports), a random chase over the L1D, the
//! L2 or the last-level cache's size (`mem-latency`: a footprint), a stream over 4x the
//! last-level cache (`mem-read`: DRAM bandwidth), a system-call loop (`null-syscall`:
//! the kernel's entry path) and calls through 1024 functions in a shuffled order
//! (`frontend`: the instruction supply). The kernels are the catalog's, sized from the
//! machine's topology. One ruler is wide: `dram-wide` streams from every CPU outside
//! the measured core (one thread per CPU); it is measured as the partner only, its
//! contentiousness and its own figure read from the partner's side of the cells of
//! workloads beside it.
//!
//! Every pair is a co-run group ([`corun::pair_group`]): A alone and A beside B in each
//! form, interleaved. The plan holds each workload beside each ruler (its
//! sensitivity), each ruler beside each workload (its contentiousness), with
//! `--validate K` K held-out pairs to check the model against, then a few workload pairs
//! to fit it on. The held-out pairs are drawn by the seed; the training pairs are
//! chosen among the rest ([`PredictPlan::candidates`]) once the profiles are measured,
//! where their features tell which pairs inform the model most; until then the seed's
//! first ones stand in for them in the cost. A pair whose cells another role already
//! planned (a ruler that is also a workload) is measured once.

use std::collections::BTreeSet;

use smtlab_bench::compute::kernel::splitmix64;
use smtlab_model::keys::Form;
use smtlab_model::predict::{
    PairKeys, PlanKeys, RULER_PREFIX, RulerDef, RulerSpec, ruler_definitions,
};
use smtlab_model::{CellKey, Topology};
use smtlab_placement::ClientRule;

use super::ExperimentError;
use super::corun::{self, CorunPlan, Partners, Workload};
use crate::corun::CpuPair;
use crate::session::param_map;

/// A calibrated stressor: a catalog benchmark with the parameters that make it press
/// one resource.
pub struct Ruler {
    pub name: &'static str,
    pub resource: &'static str,
    pub workload: Workload,
    footprint_rank: Option<u8>,
    /// The partner's CPUs in each form of a ruler measured as the partner only (on
    /// every CPU outside the measured core); `None`: the form's one CPU.
    pub partners: Option<Partners>,
}

impl Ruler {
    /// Keeps a wide ruler off `cpus` (a server workload's client side), but for each
    /// form's own partner CPU.
    pub fn keep_off(&mut self, cpus: &smtlab_model::CpuSet) {
        for (_, list) in self.partners.iter_mut().flatten() {
            let own = list.first().copied();
            list.retain(|&c| Some(c) == own || !cpus.contains(c));
        }
    }

    /// The ruler as the report names it: `mem-latency size=32768 threads=1`.
    pub fn spec(&self) -> RulerSpec {
        let mut workload = self.workload.name();
        for (k, v) in param_map(&self.workload.params) {
            workload.push_str(&format!(" {k}={v}"));
        }
        RulerSpec {
            name: self.name.into(),
            resource: self.resource.into(),
            workload,
            footprint_rank: self.footprint_rank,
            partner_only: self.partners.is_some(),
            partner_unit: self
                .partners
                .as_ref()
                .map(|_| self.workload.bench.info().unit.to_string()),
        }
    }
}

pub use smtlab_model::predict::RULERS;

/// The rulers asked for (all when none), sized for the measured CPU `pair.cpu` of `topo`:
/// one thread each, but for a partner-only ruler, on every CPU outside the measured core
/// in each of `forms`. A ruler this machine cannot size is left out with a one-line
/// note, and so is a wide one not asked for where its partner would be one CPU (it would
/// be `dram`).
pub fn rulers(
    asked: &[String],
    topo: &Topology,
    pair: &CpuPair,
    forms: &[(Form, u32)],
) -> Result<(Vec<Ruler>, Vec<String>), ExperimentError> {
    let defs = ruler_definitions(topo, pair.cpu);
    if let Some(bad) = asked
        .iter()
        .find(|a| !defs.iter().any(|d| d.name == a.trim()))
    {
        return Err(ExperimentError::input(format!(
            "--rulers {bad:?}: unknown ruler; expected some of {}",
            RULERS.join(", ")
        )));
    }
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for def in defs {
        let footprint_rank = def.footprint_rank();
        let partners = def.partner_only().then(|| corun::wide(forms, pair, topo));
        let threads = def.threads().to_string();
        let RulerDef {
            name,
            resource,
            bench,
            params,
        } = def;
        if !asked.is_empty() && !asked.iter().any(|a| a.trim() == name) {
            continue;
        }
        let params = match params {
            Ok(p) => p,
            Err(why) => {
                notes.push(format!("ruler {name} left out: {why}"));
                continue;
            }
        };
        let narrow = partners
            .as_ref()
            .is_some_and(|p| p.iter().all(|(_, cpus)| cpus.len() < 2));
        if narrow && asked.is_empty() {
            notes.push(format!(
                "ruler {name} left out: one CPU outside the measured core, where it would be dram (--rulers {name} measures it)"
            ));
            continue;
        }
        let mut defaults: Vec<(&str, &str)> = vec![("threads", &threads)];
        defaults.extend(
            params
                .iter()
                .filter(|(k, _)| *k != "threads")
                .map(|(k, v)| (*k, v.as_str())),
        );
        out.push(Ruler {
            name,
            resource,
            workload: Workload::catalog(bench, &[], &defaults)?,
            footprint_rank,
            partners,
        });
    }
    if out.is_empty() {
        return Err(ExperimentError::input(format!(
            "no ruler can be measured here: {}",
            notes.join("; ")
        )));
    }
    Ok((out, notes))
}

/// How many workload pairs to fit on and to hold out, and the seed that picks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// Pairs to fit on; `None`: as many as workloads (at least 2), within what is left.
    pub train: Option<usize>,
    pub validate: usize,
    pub seed: u64,
}

/// What a plan costs, against the whole matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub workloads: usize,
    pub rulers: usize,
    /// Cells per pair: A alone and one per form.
    pub cells_per_pair: usize,
    /// Pairs of the profiles (N x R + R x N, less N for each partner-only ruler),
    /// training and held out, as planned.
    pub profile_pairs: usize,
    /// Rulers measured as the partner only: no pair of theirs beside a workload.
    pub partner_only: usize,
    pub training_pairs: usize,
    pub held_out_pairs: usize,
    /// Pairs measured once for two roles.
    pub shared_pairs: usize,
    /// Cells this plan measures.
    pub cells: usize,
    /// Cells of the whole N x N matrix.
    pub matrix_cells: usize,
}

/// A workload pair that may be fitted on: its keys and its group, `None` where another
/// role measures its cells.
pub struct Candidate {
    pub keys: PairKeys,
    pub group: Option<Vec<corun::CorunCell>>,
}

/// A planned `predict` run: the groups to measure first (profiles, held-out pairs), the
/// keys of each role, the pairs the training pairs are chosen among, the cost.
pub struct PredictPlan {
    pub groups: CorunPlan,
    /// The keys of each role; `training` holds the stand-in until [`Self::train_on`].
    pub keys: PlanKeys,
    /// Every workload pair not held out, in the seed's order.
    pub candidates: Vec<Candidate>,
    /// How many of them to fit on; the first `train` stand in for them in the cost.
    pub train: usize,
    pub cost: Cost,
}

impl PredictPlan {
    /// The groups measured first, then those of the seed's first `train` candidates:
    /// what the cost counts.
    pub fn counted(&self) -> impl Iterator<Item = &Vec<corun::CorunCell>> + Clone {
        let stand_in = self.candidates[..self.train].iter();
        self.groups.iter().chain(stand_in.flat_map(|c| &c.group))
    }

    /// Fits on the candidates `chosen` (indices): their keys become the training
    /// pairs; returns the groups left to measure (taken from the candidates).
    pub fn train_on(&mut self, chosen: &[usize]) -> CorunPlan {
        self.keys.training = chosen
            .iter()
            .map(|&i| self.candidates[i].keys.clone())
            .collect();
        chosen
            .iter()
            .filter_map(|&i| self.candidates[i].group.take())
            .collect()
    }
}

/// Adds pair groups to a plan, each pair's cells once.
struct Builder<'a> {
    /// The partner's CPU in each form.
    forms: Partners,
    pair: &'a CpuPair,
    topo: &'a Topology,
    groups: CorunPlan,
    seen: BTreeSet<CellKey>,
    shared: usize,
}

impl Builder<'_> {
    /// A beside B (`b_stored`: the partner's name in the cells), labelled `a`, `b`; B
    /// on `partners`' CPUs, else on each form's one CPU.
    fn add(
        &mut self,
        a: (&str, &Workload),
        b: (&str, &Workload),
        b_stored: &str,
        partners: Option<&Partners>,
    ) -> PairKeys {
        let on = partners.unwrap_or(&self.forms);
        let group = corun::pair_group(a.1, b.1, b_stored, on, self.pair, self.topo);
        let keys = PairKeys {
            a: a.0.into(),
            b: b.0.into(),
            b_direction: b.1.bench.info().direction,
            alone: group[0].key.clone(),
            co: group[1..]
                .iter()
                .filter_map(|c| Some((c.key.conditions.form?, c.key.clone())))
                .collect(),
        };
        if group.iter().all(|c| self.seen.contains(&c.key)) {
            self.shared += 1;
        } else {
            self.seen.extend(group.iter().map(|c| c.key.clone()));
            self.groups.push(group);
        }
        keys
    }
}

/// Workload pairs by their indices.
type Pairs = Vec<(usize, usize)>;

/// The pairs a [`Choice`] makes: the ones that may be fitted on (in the seed's order),
/// how many to fit on, and the held-out ones.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Chosen {
    candidates: Pairs,
    train: usize,
    held_out: Pairs,
}

/// The unordered workload pairs (a workload with itself included; none of two server
/// workloads, `server` says which are) in an order the seed shuffles: the first
/// `validate` of those `may_hold_out` allows are held out, and `train` of the rest are
/// to be fitted on. `rulers_among` names the workloads that are rulers themselves, for
/// the error when too few pairs may be held out.
fn choose(
    server: &[bool],
    choice: Choice,
    may_hold_out: impl Fn(usize, usize) -> bool,
    rulers_among: &[String],
) -> Result<Chosen, ExperimentError> {
    let n = server.len();
    let mut all: Pairs = (0..n)
        .flat_map(|i| (i..n).map(move |j| (i, j)))
        .filter(|&(i, j)| !(server[i] && server[j]))
        .collect();
    let mut state = choice.seed;
    for i in (1..all.len()).rev() {
        let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
        all.swap(i, j);
    }
    let (eligible, mut rest): (Pairs, Pairs) = all.iter().partition(|&&(i, j)| may_hold_out(i, j));
    if eligible.len() < choice.validate {
        return Err(ExperimentError::input(format!(
            "--validate {}: only {} pairs can be held out; a pair with a workload that is a ruler itself ({}) is measured by the profiles, not predicted",
            choice.validate,
            eligible.len(),
            rulers_among.join(", ")
        )));
    }
    let held_out = eligible[..choice.validate].to_vec();
    rest.extend(&eligible[choice.validate..]);
    rest.sort_by_key(|p| all.iter().position(|q| q == p));
    let total = all.len();
    let left = rest.len();
    let servers = match server.iter().any(|&s| s) {
        true => ", none of two server workloads",
        false => "",
    };
    let what = format!(
        "{n} workloads make {total} pairs of two, a workload with itself included{servers}"
    );
    let train = match choice.train {
        None if left == 0 => {
            return Err(ExperimentError::input(format!(
                "--validate {}: leaves no pair to fit the model on ({what})",
                choice.validate
            )));
        }
        None => n.max(2).min(left),
        Some(0) => {
            return Err(ExperimentError::input(
                "--train 0: expected at least 1 pair to fit the model on",
            ));
        }
        Some(t) if t > left => {
            return Err(ExperimentError::input(format!(
                "--train {t} and --validate {}: expected at most {total} pairs in all ({what})",
                choice.validate
            )));
        }
        Some(t) => t,
    };
    Ok(Chosen {
        candidates: rest,
        train,
        held_out,
    })
}

/// Where the client side of a server workload runs in every cell of a plan: on the
/// same CPUs whether it is alone or beside a partner, so its slowdown is the partner's
/// doing. `rule` as given: named CPUs and remote agents stay so; otherwise every usable
/// CPU apart from the co-runs' CPUs (`Apart`: and their cores), or a one-line error when
/// none is left.
pub fn client_rule(
    rule: ClientRule,
    pair: &CpuPair,
    topo: &Topology,
) -> Result<ClientRule, ExperimentError> {
    if !matches!(rule, ClientRule::Apart | ClientRule::AllowSiblings) {
        return Ok(rule);
    }
    let cpus: Vec<u32> = [Ok(pair.cpu), pair.sibling.clone(), pair.other_core.clone()]
        .into_iter()
        .flatten()
        .collect();
    let used = crate::corun::placement_of("corun", &cpus, topo);
    let free = smtlab_placement::client_cpus(topo, &used, &rule)
        .map_err(|e| ExperimentError::input(format!("a server workload: {e}")))?;
    Ok(ClientRule::Cpus {
        cpus: free,
        shared: false,
    })
}

/// Whether a workload is one of the rulers (the same benchmark and parameters).
fn is_ruler(w: &Workload, rulers: &[Ruler]) -> bool {
    rulers.iter().any(|r| {
        r.workload.name() == w.name() && param_map(&r.workload.params) == param_map(&w.params)
    })
}

/// The plan of a `predict` run: profiles of `workloads` against `rulers`, then the
/// training and held-out pairs `choice` picks, in the forms `forms`.
pub fn plan(
    workloads: &[Workload],
    rulers: &[Ruler],
    forms: &[(Form, u32)],
    pair: &CpuPair,
    topo: &Topology,
    choice: Choice,
) -> Result<PredictPlan, ExperimentError> {
    let ruler_like: Vec<bool> = workloads.iter().map(|w| is_ruler(w, rulers)).collect();
    let named: Vec<String> = workloads
        .iter()
        .zip(&ruler_like)
        .filter(|(_, r)| **r)
        .map(|(w, _)| w.name())
        .collect();
    let server: Vec<bool> = workloads.iter().map(Workload::is_server).collect();
    let chosen = choose(
        &server,
        choice,
        |i, j| !ruler_like[i] && !ruler_like[j],
        &named,
    )?;
    let mut b = Builder {
        forms: corun::one_each(forms),
        pair,
        topo,
        groups: Vec::new(),
        seen: BTreeSet::new(),
        shared: 0,
    };
    let names: Vec<String> = workloads.iter().map(Workload::name).collect();
    let mut keys = PlanKeys {
        workloads: names.clone(),
        rulers: rulers.iter().map(Ruler::spec).collect(),
        forms: forms.iter().map(|f| f.0).collect(),
        ..PlanKeys::default()
    };
    for (w, name) in workloads.iter().zip(&names) {
        for r in rulers {
            let stored = format!("{RULER_PREFIX}{}", r.name);
            let partners = r.partners.as_ref();
            keys.sensitivity
                .push(b.add((name, w), (r.name, &r.workload), &stored, partners));
            // A partner-only ruler's contentiousness is the partner's side of those
            // cells. A server workload as the partner brings its client side along.
            if partners.is_none() {
                keys.contentiousness
                    .push(b.add((r.name, &r.workload), (name, w), name, None));
            }
        }
    }
    // A workload pair's cells: a server workload is the one measured beside the other.
    let pair = |b: &mut Builder<'_>, (i, j): (usize, usize)| {
        let (i, j) = if server[j] { (j, i) } else { (i, j) };
        let (a, p) = (
            (names[i].as_str(), &workloads[i]),
            (names[j].as_str(), &workloads[j]),
        );
        let before = b.groups.len();
        let keys = b.add(a, p, &names[j], None);
        (keys, before)
    };
    keys.held_out = chosen
        .held_out
        .iter()
        .map(|&ij| pair(&mut b, ij).0)
        .collect();
    let shared = b.shared;
    let candidates: Vec<Candidate> = chosen
        .candidates
        .iter()
        .map(|&ij| {
            let (keys, before) = pair(&mut b, ij);
            let group = (b.groups.len() > before).then(|| b.groups.pop()).flatten();
            Candidate { keys, group }
        })
        .collect();
    let per_pair = 1 + forms.len();
    let stand_in = &candidates[..chosen.train];
    keys.training = stand_in.iter().map(|c| c.keys.clone()).collect();
    let stand_in_cells: usize = stand_in.iter().flat_map(|c| &c.group).map(Vec::len).sum();
    let cost = Cost {
        workloads: workloads.len(),
        rulers: rulers.len(),
        cells_per_pair: per_pair,
        profile_pairs: keys.sensitivity.len() + keys.contentiousness.len(),
        partner_only: rulers.iter().filter(|r| r.partners.is_some()).count(),
        training_pairs: chosen.train,
        held_out_pairs: keys.held_out.len(),
        shared_pairs: shared + stand_in.iter().filter(|c| c.group.is_none()).count(),
        cells: b.groups.iter().map(Vec::len).sum::<usize>() + stand_in_cells,
        matrix_cells: workloads.len() * workloads.len() * per_pair,
    };
    Ok(PredictPlan {
        groups: b.groups,
        keys,
        candidates,
        train: chosen.train,
        cost,
    })
}

#[cfg(test)]
mod tests;
