//! SMT yields: how much a benchmark gains from running on both hardware threads of a
//! core instead of one (DESIGN "Vocabulary").
//!
//! Three pairs of placements are compared within one run, for each benchmark and
//! parameter set measured on both placements of a pair:
//!
//! | yield | numerator | denominator |
//! |---|---|---|
//! | SMT yield | `1c2t` | `1c1t` |
//! | dual-core SMT gain | `2c2t` | `2c1t` |
//! | machine SMT gain | `all` | `cores` |
//!
//! Cells are matched by the canonical placement name (`ResolvedPlacement::name`), so
//! `2T` and `1c2t` are the same placement; `2c1t/scatter` is a different one and is not
//! paired. The yield is [`smtlab_model::verdict::verdict`] of the SMT placement over
//! the base one: the ratio of the **means** of the samples with Fieller's 95% interval,
//! the same figure and words `bench`, `exec` and `compare` print for the same pair; a
//! pair with an unsteady cell is called `unsteady`, neither faster nor slower.
//!
//! A benchmark that runs one thread whatever the placement (the OS latencies, a single
//! pointer chase) leaves the sibling idle on `1c2t`: `1c2t` is then `1c1t` with an idle
//! sibling, the same work twice. Such a pair ([`smtlab_model::verdict::idle_sibling`],
//! read from the CPUs the samples ran on) is marked [`Yield::idle_sibling`] and shown
//! as `single-threaded`, never as a yield; the single-thread penalty of a busy sibling
//! is `smtlab penalty`'s figure.
//!
//! Direction: for higher-is-better benchmarks the yield is `value(SMT) / value(base)`.
//! For lower-is-better ones (latencies) it is inverted, `value(base) / value(SMT)`, so
//! that above 1 always means "better with SMT" (for a latency this is DESIGN's
//! interference figure: alone / with the sibling busy). [`Yield::inverted`] says so.

use std::collections::BTreeMap;

use serde::Serialize;
use smtlab_model::keys::Conditions;
use smtlab_model::stats::{Ratio, Significance};
use smtlab_model::verdict::{PairKind, idle_sibling, verdict};
use smtlab_model::{CellRecord, Direction, RunResults};

use crate::fmt::{params, text_table};

/// The JSON word of a yield's pair ([`PairKind::YIELDS`] keep the words they have
/// always had: `smt`, `dual_core`, `machine`).
pub fn kind_word(kind: PairKind) -> &'static str {
    match kind {
        PairKind::SmtYield => "smt",
        PairKind::DualCoreSmtGain => "dual_core",
        PairKind::MachineSmtGain => "machine",
        PairKind::HalfMachineSmtGain => "half_machine",
        PairKind::SecondCore => "second_core",
    }
}

/// Serialises a pair as [`kind_word`].
pub fn serialize_kind<S: serde::Serializer>(kind: &PairKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind_word(*kind))
}

/// One yield: a ratio of two cells of the same benchmark and parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Yield {
    #[serde(serialize_with = "serialize_kind")]
    pub kind: PairKind,
    /// Placement with SMT (`1c2t`, `2c2t`, `all`).
    pub smt_placement: String,
    /// Placement without (`1c1t`, `2c1t`, `cores`).
    pub base_placement: String,
    /// Speed-up with 95% CI; above 1 is better with SMT whatever the direction.
    pub ratio: Ratio,
    /// What the verdict says: the interval's words, or `unsteady`.
    pub significance: Significance,
    /// Why a cell of the pair is unsteady, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsteady: Option<String>,
    /// Which cell of the pair reached a limit of the measurement, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_limit: Option<String>,
    /// True for lower-is-better benchmarks: `ratio` is `base / smt`, not `smt / base`.
    pub inverted: bool,
    /// The SMT side ran one thread per core (siblings idle): the ratio compares the same
    /// work twice and is no yield; outputs say `single-threaded` instead.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub idle_sibling: bool,
}

impl Yield {
    /// The yield as the tables print it: `single-threaded` for an idle sibling, else
    /// [`crate::fmt::verdict`]'s figure, interval and words.
    pub fn text(&self) -> String {
        if self.idle_sibling {
            return IDLE_SIBLING_SHORT.into();
        }
        crate::fmt::verdict(&self.verdict())
    }

    /// The verdict this yield was made from.
    pub fn verdict(&self) -> smtlab_model::verdict::Verdict {
        smtlab_model::verdict::Verdict {
            speedup: self.ratio,
            significance: self.significance,
            unsteady: self.unsteady.clone(),
            at_limit: self.at_limit.clone(),
            p_value: None,
        }
    }
}

/// What a table shows in place of a yield whose SMT side left the sibling idle.
pub const IDLE_SIBLING_SHORT: &str = "single-threaded";

/// The legend line for [`IDLE_SIBLING_SHORT`].
pub const IDLE_SIBLING_LEGEND: &str = "single-threaded: the benchmark ran one thread per \
     core whatever the placement, so placement does not change the work (1c2t = 1c1t with \
     an idle sibling): no yield; `smtlab penalty` measures a busy sibling";

/// How to read the yields' speed-ups: the legend of the text table and the terminal's.
pub const YIELD_LEGEND: &str = "speed-up: ratio of means with 95% CI (Fieller); above 1 = \
     better with SMT; faster/slower/not significant: what the interval says about 1; \
     unsteady: a cell's samples or rounds disagree beyond their interval";

/// The legend line for the `*` of a lower-is-better benchmark.
pub const LOWER_IS_BETTER_LEGEND: &str = "* lower is better: shown as \
     value(base)/value(SMT), so above 1 still means faster with SMT";

/// The yields of one benchmark and parameter set; at least one is present.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct YieldRow {
    pub benchmark: String,
    pub group: String,
    pub unit: String,
    pub direction: Direction,
    pub params: BTreeMap<String, String>,
    pub smt: Option<Yield>,
    pub dual_core: Option<Yield>,
    pub machine: Option<Yield>,
}

impl YieldRow {
    pub fn get(&self, kind: PairKind) -> Option<&Yield> {
        match kind {
            PairKind::SmtYield => self.smt.as_ref(),
            PairKind::DualCoreSmtGain => self.dual_core.as_ref(),
            PairKind::MachineSmtGain => self.machine.as_ref(),
            PairKind::HalfMachineSmtGain | PairKind::SecondCore => None,
        }
    }
}

/// A cell's benchmark, parameters and conditions: the key of [`crate::grouped`] that
/// gathers a variant's cells (its placements), as [`CellRecord::same_variant`] compares.
pub fn variant<'a>(c: &&'a CellRecord) -> (&'a str, &'a BTreeMap<String, String>, &'a Conditions) {
    (&c.benchmark, &c.params, &c.conditions)
}

/// Every yield computable from the run, one row per benchmark and parameter set, in the
/// order the benchmarks first appear in the run. Rows without any yield are left out.
///
/// A pair whose two cells ran on exactly the same CPUs is skipped: on a machine without
/// SMT `all` and `cores` are the same CPUs and their ratio would be noise, not a gain.
pub fn smt_yields(results: &RunResults) -> Vec<YieldRow> {
    // (benchmark, params) in first-appearance order, each with its cells by placement.
    // An open loop at an offered rate (`rate=R`, a latency sweep's point) serves what
    // it is offered on every placement that keeps up: its ratio is no yield.
    let cells = results
        .cells
        .iter()
        .filter(|c| crate::advice::offered_rate(c).is_none());
    let mut rows = Vec::new();
    for (_, cells) in crate::grouped(cells, variant) {
        let first = cells[0];
        let find = |name: &str| cells.iter().copied().find(|c| c.placement.name == name);
        let mut row = YieldRow {
            benchmark: first.benchmark.clone(),
            group: first.group.clone(),
            unit: first.unit.clone(),
            direction: first.direction,
            params: first.flat_params(),
            smt: None,
            dual_core: None,
            machine: None,
        };
        for kind in PairKind::YIELDS {
            let (b, s) = kind.placements();
            let (Some(smt), Some(base)) = (find(s), find(b)) else {
                continue;
            };
            if smt.placement.cpu_set() == base.placement.cpu_set() {
                continue;
            }
            let inverted = first.direction == Direction::Lower;
            let Some(v) = verdict(base, smt) else {
                continue;
            };
            let y = Some(Yield {
                kind,
                smt_placement: s.into(),
                base_placement: b.into(),
                ratio: v.speedup,
                significance: v.significance,
                unsteady: v.unsteady,
                at_limit: v.at_limit,
                inverted,
                idle_sibling: idle_sibling(smt),
            });
            match kind {
                PairKind::SmtYield => row.smt = y,
                PairKind::DualCoreSmtGain => row.dual_core = y,
                _ => row.machine = y,
            }
        }
        if row.smt.is_some() || row.dual_core.is_some() || row.machine.is_some() {
            rows.push(row);
        }
    }
    rows
}

/// Why [`smt_yields`] found nothing, in one line; `None` when it found something.
pub fn no_yields_reason(results: &RunResults) -> Option<String> {
    if !smt_yields(results).is_empty() {
        return None;
    }
    if results.cells.is_empty() {
        return Some("no cell was measured in this run".into());
    }
    let topo = &results.run.topology;
    if !topo.smt_visible() {
        return Some(format!(
            "no SMT visible on this machine (smt/control: {}): 1c2t and 2c2t cannot be \
             measured and all is the same CPUs as cores",
            topo.smt.control.as_deref().unwrap_or("absent")
        ));
    }
    Some(
        "no benchmark was measured on both placements of a pair (1c1t and 1c2t, 2c1t and \
         2c2t, cores and all)"
            .into(),
    )
}

/// The yields as a plain-text table, one row per benchmark and parameter set, with a
/// legend saying how to read it.
pub fn yield_table(rows: &[YieldRow]) -> String {
    if rows.is_empty() {
        return "no SMT yield could be computed\n".into();
    }
    let mut header = vec!["benchmark", "params", "unit", "better"];
    let headings: Vec<String> = PairKind::YIELDS.iter().map(|k| k.heading()).collect();
    header.extend(headings.iter().map(String::as_str));
    let mut any_inverted = false;
    let mut any_idle = false;
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let inverted = r.direction == Direction::Lower;
            any_inverted |= inverted;
            let mut cells = vec![
                r.benchmark.clone(),
                params(&r.params),
                r.unit.clone(),
                if inverted { "lower*" } else { "higher" }.to_string(),
            ];
            for k in PairKind::YIELDS {
                any_idle |= r.get(k).is_some_and(|y| y.idle_sibling);
                cells.push(r.get(k).map_or("-".into(), Yield::text));
            }
            cells
        })
        .collect();
    let mut out = text_table(&header, &body, &[]);
    out.push_str(&format!(
        "\n{YIELD_LEGEND}; - = a placement of the pair was not measured\n"
    ));
    if any_idle {
        out.push_str(IDLE_SIBLING_LEGEND);
        out.push('\n');
    }
    if any_inverted {
        out.push_str(LOWER_IS_BETTER_LEGEND);
        out.push('\n');
    }
    out
}
