//! Where a thread's speed goes when its SMT sibling is busy: the 1c2t loss against
//! 1c1t, attributed to top-down categories from two sets of counts of the same work
//! (one thread alone on its core, and with the sibling running).
//!
//! **The measured loss** is the thread's instructions per cycle lost:
//! `L = 1 - IPC(1c2t) / IPC(1c1t)`, from `instructions` and `cycles` (summed over the
//! threads counted, so with both siblings counted it is their cycle-weighted mean).
//!
//! **The parts.** Let `W` be the slots per cycle of the thread alone (`slots / cycles`
//! of 1c1t: the core's width, all of it the thread's), `S/I` a run's slots per
//! instruction and `c_k = share_k * S/I` the slots per instruction of category `k`.
//! Then, exactly, `CPI = (S/I) / w` with `w = S / cycles`, and
//!
//! ```text
//! L = 1 - CPI(1c1t)/CPI(1c2t)
//!   = (1 - w₂/W)                                  SMT contention: the core's slots
//!                                                 the sibling took
//!   + Σ_k (c_k,₂ - c_k,₁) / (W · CPI₂)            each category's change in slots
//!                                                 per instruction
//! ```
//!
//! `w₂/W` is **the thread's share of the core's issue slots** (Intel Ice Lake and later:
//! `TOPDOWN.SLOTS` per thread, which the core distributes among its active threads, over
//! the core's width times the cycles; on Skylake the kernel's `any=1` slots are the
//! core's split evenly, so the share is that split, not a measurement: the scope says
//! so; AMD counts dispatch slots per thread undistributed, share 1, and names the slots
//! its sibling took in its own `smt_contention` category, which is added to the SMT
//! contention part). A negative part is a category that cost fewer slots per
//! instruction with the sibling (slots this thread would have wasted that the sibling
//! filled). Back-end bound is split into memory and core where the level-2 events were
//! counted ([`super::topdown::memory_bound`]).
//!
//! **The check.** Retiring is not a part: the same work retires the same uops per
//! instruction, so its change is the residual, as is any slot the categories do not
//! account for (AMD's categories are separate counts that need not add to the slots).
//! The parts must add to the measured loss within [`SUM_LIMIT`] (2 points); when they do
//! not, the two recordings did not run the same work, or the counts do not hold
//! together, and [`SmtLoss::check`] says by how much.

use serde::{Deserialize, Serialize};

use super::topdown::{Topdown, TopdownMethod, TopdownUnavailable, level1};
use super::{CountMode, CounterEvent, CounterValues};

/// How far the parts' sum may be from the measured loss: 2 percentage points.
pub const SUM_LIMIT: f64 = 0.02;

named_enum! {
    fn label;
    /// One part of the loss.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum LossPart {
        FrontendBound = "front-end bound",
        BadSpeculation = "bad speculation",
        /// Back-end bound, memory and core together (level 2 not counted).
        BackendBound = "back-end bound (memory and core not split)",
        BackendMemory = "back-end memory",
        BackendCore = "back-end core",
        SmtContention = "SMT contention",
    }
}

/// The attribution of one thread's 1c2t loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmtLoss {
    pub method: TopdownMethod,
    /// What the 1c2t top-down describes (`thread`, or Skylake's `core ...`).
    pub scope: String,
    pub ipc_alone: f64,
    pub ipc_smt: f64,
    /// `1 - ipc_smt / ipc_alone`.
    pub measured_loss: f64,
    /// The thread's share of the core's issue slots in 1c2t (`w₂ / W`).
    pub slot_share: f64,
    /// Each part, a fraction of the alone IPC (0.05: five points of the loss).
    pub parts: Vec<(LossPart, f64)>,
    /// `measured_loss` minus the parts' sum: retiring's change and slots no category
    /// holds.
    pub residual: f64,
    /// Why back-end bound is not split into memory and core, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_not_split: Option<String>,
}

/// Why the loss cannot be attributed, in one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SmtLossUnavailable {
    #[error("{which}: {reason}")]
    Topdown {
        which: &'static str,
        reason: TopdownUnavailable,
    },
    #[error("{which}: no {what} counted (the loss is measured from cycles and instructions)")]
    Missing {
        which: &'static str,
        what: &'static str,
    },
    #[error("the two recordings use different top-down methods ({alone} alone, {smt} with SMT)")]
    Methods { alone: String, smt: String },
}

/// The parts do not add up to the measured loss.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the parts add to {sum_pt:.2} points but the measured loss is {loss_pt:.2} points \
     ({residual_pt:+.2} apart, over the 2-point limit): the recordings did not run the \
     same work (retired uops per instruction changed) or the counts do not hold together"
)]
pub struct SumMismatch {
    pub sum_pt: f64,
    pub loss_pt: f64,
    pub residual_pt: f64,
}

impl SmtLoss {
    /// The parts' sum.
    pub fn sum(&self) -> f64 {
        self.parts.iter().map(|(_, x)| x).sum()
    }

    /// `Ok` when the parts add to the measured loss within [`SUM_LIMIT`].
    pub fn check(&self) -> Result<(), SumMismatch> {
        if self.residual.abs() <= SUM_LIMIT {
            return Ok(());
        }
        Err(SumMismatch {
            sum_pt: 100.0 * self.sum(),
            loss_pt: 100.0 * self.measured_loss,
            residual_pt: 100.0 * self.residual,
        })
    }
}

struct Run {
    topdown: Topdown,
    cycles: f64,
    instructions: f64,
}

fn run(v: &CounterValues, which: &'static str) -> Result<Run, SmtLossUnavailable> {
    let topdown = level1(v).map_err(|reason| SmtLossUnavailable::Topdown { which, reason })?;
    let get = |event, what| {
        v.count(event, CountMode::All)
            .filter(|&x| x > 0.0)
            .ok_or(SmtLossUnavailable::Missing { which, what })
    };
    Ok(Run {
        cycles: get(CounterEvent::Cycles, "cycles")?,
        instructions: get(CounterEvent::Instructions, "instructions")?,
        topdown,
    })
}

/// The slots per instruction of each category of `r`, in [`LossPart`] terms (back-end
/// split when `split`), and AMD's own SMT contention category.
fn per_instruction(r: &Run, split: bool) -> Vec<(LossPart, f64)> {
    let t = &r.topdown;
    let spi = t.slots / r.instructions;
    let mut out = vec![
        (LossPart::FrontendBound, t.frontend_bound * spi),
        (LossPart::BadSpeculation, t.bad_speculation * spi),
    ];
    match t.backend_memory.filter(|_| split) {
        Some(mem) => {
            out.push((LossPart::BackendMemory, mem * spi));
            // As the kernel's tables: core bound is the rest, never below zero.
            out.push((
                LossPart::BackendCore,
                (t.backend_bound - mem).max(0.0) * spi,
            ));
        }
        None => out.push((LossPart::BackendBound, t.backend_bound * spi)),
    }
    out.push((
        LossPart::SmtContention,
        t.smt_contention.unwrap_or(0.0) * spi,
    ));
    out
}

/// Attributes the loss of `smt` (the thread with its sibling busy) against `alone`.
pub fn attribute(
    alone: &CounterValues,
    smt: &CounterValues,
) -> Result<SmtLoss, SmtLossUnavailable> {
    let a = run(alone, "alone (1c1t)")?;
    let s = run(smt, "with the sibling (1c2t)")?;
    if a.topdown.method != s.topdown.method {
        return Err(SmtLossUnavailable::Methods {
            alone: a.topdown.method.label().into(),
            smt: s.topdown.method.label().into(),
        });
    }
    let ipc_alone = a.instructions / a.cycles;
    let ipc_smt = s.instructions / s.cycles;
    let width = a.topdown.slots / a.cycles;
    let slot_share = s.topdown.slots / s.cycles / width;
    let cpi_smt = s.cycles / s.instructions;
    let split = a.topdown.backend_memory.is_some() && s.topdown.backend_memory.is_some();
    let before = per_instruction(&a, split);
    let after = per_instruction(&s, split);
    let parts: Vec<(LossPart, f64)> = before
        .iter()
        .zip(&after)
        .map(|(&(part, c1), &(_, c2))| {
            let mut x = (c2 - c1) / (width * cpi_smt);
            if part == LossPart::SmtContention {
                x += 1.0 - slot_share;
            }
            (part, x)
        })
        .collect();
    let measured_loss = 1.0 - ipc_smt / ipc_alone;
    let sum: f64 = parts.iter().map(|(_, x)| x).sum();
    Ok(SmtLoss {
        method: s.topdown.method,
        scope: s.topdown.scope.clone(),
        ipc_alone,
        ipc_smt,
        measured_loss,
        slot_share,
        parts,
        residual: measured_loss - sum,
        backend_not_split: (!split).then(|| {
            "back-end memory and core need the level-2 events in both recordings \
             (Sapphire Rapids and later: topdown-mem-bound; Skylake-SP, Ice Lake-SP: \
             cycle_activity.stalls_mem_any, exe_activity.bound_on_stores, \
             cycle_activity.stalls_total, exe_activity.1_ports_util, \
             exe_activity.2_ports_util; Zen 4/5: ex_no_retire.load_not_complete, \
             ex_no_retire.not_complete)"
                .into()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::Reading;
    use crate::counters::topdown::tests::named;

    fn with_core(mut v: CounterValues, cycles: u64, instructions: u64) -> CounterValues {
        v.set(CounterEvent::Cycles, CountMode::All, Reading::exact(cycles));
        v.set(
            CounterEvent::Instructions,
            CountMode::All,
            Reading::exact(instructions),
        );
        v
    }

    /// Ice Lake-like perf metrics, 5 slots per cycle, the same 1000 instructions each,
    /// by hand. Alone: 1000 cycles, 5000 slots: retiring 1500, FE 1000, bad 500,
    /// BE 2000 (memory 1200). With the sibling: 1600 cycles, the thread got 4000 of
    /// the core's 8000 slots (share 0.5): retiring 1500, FE 800, bad 500, BE 1200
    /// (memory 1000). Loss: 1 - (1000/1600)/(1000/1000) = 0.375. Parts over
    /// W·CPI₂ = 5 · 1.6 = 8 slots per instruction: FE (0.8-1.0)/8 = -0.025, bad 0,
    /// memory (1.0-1.2)/8 = -0.025, core (0.2-0.8)/8 = -0.075, SMT 1 - 0.5 = 0.5;
    /// sum 0.375, residual 0 (retiring per instruction unchanged).
    #[test]
    fn parts_add_to_the_loss_by_hand() {
        let alone = with_core(
            named(&[
                ("slots", 5000, None),
                ("topdown-retiring", 1500, None),
                ("topdown-bad-spec", 500, None),
                ("topdown-fe-bound", 1000, None),
                ("topdown-be-bound", 2000, None),
                ("topdown-mem-bound", 1200, None),
            ]),
            1000,
            1000,
        );
        let smt = with_core(
            named(&[
                ("slots", 4000, None),
                ("topdown-retiring", 1500, None),
                ("topdown-bad-spec", 500, None),
                ("topdown-fe-bound", 800, None),
                ("topdown-be-bound", 1200, None),
                ("topdown-mem-bound", 1000, None),
            ]),
            1600,
            1000,
        );
        let l = attribute(&alone, &smt).unwrap();
        assert!((l.measured_loss - 0.375).abs() < 1e-12);
        assert!((l.slot_share - 0.5).abs() < 1e-12);
        let want = [
            (LossPart::FrontendBound, -0.025),
            (LossPart::BadSpeculation, 0.0),
            (LossPart::BackendMemory, -0.025),
            (LossPart::BackendCore, -0.075),
            (LossPart::SmtContention, 0.5),
        ];
        for ((p, x), (wp, wx)) in l.parts.iter().zip(want) {
            assert_eq!(*p, wp);
            assert!((x - wx).abs() < 1e-12, "{p:?} {x} != {wx}");
        }
        assert!(l.residual.abs() < 1e-12);
        assert!(l.check().is_ok());
        assert!(l.backend_not_split.is_none());

        // Different work in the second recording (retiring per instruction doubled):
        // the parts no longer explain the loss and the check says so.
        let other = with_core(
            named(&[
                ("slots", 4000, None),
                ("topdown-retiring", 3000, None),
                ("topdown-bad-spec", 0, None),
                ("topdown-fe-bound", 500, None),
                ("topdown-be-bound", 500, None),
                ("topdown-mem-bound", 250, None),
            ]),
            1600,
            1000,
        );
        let l = attribute(&alone, &other).unwrap();
        let e = l.check().unwrap_err();
        assert!(e.residual_pt.abs() > 2.0, "{e}");
        assert!(e.to_string().contains("same work"), "{e}");
    }

    #[test]
    fn amd_contention_is_its_own_category_and_missing_counts_are_named() {
        // Zen 4: 6 slots per cycle, 600 instructions each. Alone 100 cycles: ret 240,
        // disp 300, FE 60, BE 240, SMT 0 (600 slots, categories add up). With the
        // sibling 150 cycles (900 slots): ret 240, disp 300, FE 90, BE 270, SMT 240.
        let alone = with_core(
            named(&[
                ("total_dispatch_slots", 100, Some(6.0)),
                ("ex_ret_ops", 240, None),
                ("de_src_op_disp.all", 300, None),
                ("de_no_dispatch_per_slot.no_ops_from_frontend", 60, None),
                ("de_no_dispatch_per_slot.backend_stalls", 240, None),
                ("de_no_dispatch_per_slot.smt_contention", 0, None),
            ]),
            100,
            600,
        );
        let smt = with_core(
            named(&[
                ("total_dispatch_slots", 150, Some(6.0)),
                ("ex_ret_ops", 240, None),
                ("de_src_op_disp.all", 300, None),
                ("de_no_dispatch_per_slot.no_ops_from_frontend", 90, None),
                ("de_no_dispatch_per_slot.backend_stalls", 270, None),
                ("de_no_dispatch_per_slot.smt_contention", 240, None),
            ]),
            150,
            600,
        );
        let l = attribute(&alone, &smt).unwrap();
        // Loss 1 - 100/150 = 1/3: FE 30/900, BE 30/900, SMT 240/900, all /(6·1.5 = 9
        // slots per instruction) of the per-instruction changes.
        assert!((l.slot_share - 1.0).abs() < 1e-12);
        assert!((l.measured_loss - 1.0 / 3.0).abs() < 1e-12);
        let smt_part = l
            .parts
            .iter()
            .find(|(p, _)| *p == LossPart::SmtContention)
            .unwrap()
            .1;
        assert!((smt_part - 240.0 / 900.0).abs() < 1e-12);
        assert!(l.check().is_ok(), "{:?}", l.check());
        assert!(l.backend_not_split.is_some());
        assert!(l.parts.iter().any(|(p, _)| *p == LossPart::BackendBound));

        let no_cycles = named(&[("total_dispatch_slots", 100, Some(6.0))]);
        let e = attribute(&alone, &no_cycles).unwrap_err().to_string();
        assert!(e.starts_with("with the sibling (1c2t)"), "{e}");
    }
}
