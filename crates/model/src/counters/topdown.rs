//! Top-down level 1 (Yasin, ISPASS 2014): where the pipeline's issue slots went, as
//! shares of all slots: retiring, bad speculation, front-end bound, back-end bound.
//! Computed from named events (`--events topdown`) by whichever method the counts
//! allow, each with its scope said, because under SMT the scope is the whole question:
//!
//! * **Intel perf metrics** (Ice Lake and later: the kernel's `slots` and
//!   `topdown-retiring`, `topdown-bad-spec`, `topdown-fe-bound`, `topdown-be-bound`).
//!   Each metric event reads as its share of `slots`; the shares are the metric counts
//!   over their sum, corrected as the kernel's metric tables and pmu-tools correct them
//!   where the events were counted (`uop-drop-slots` off front-end bound,
//!   `clears-slots` onto back-end bound on Ice Lake-SP, bad speculation the rest).
//!   Per thread, also with SMT on.
//! * **Intel slot formula** (Skylake and before: `topdown-total-slots`,
//!   `topdown-slots-issued`, `topdown-slots-retired`, `topdown-fetch-bubbles`,
//!   `topdown-recovery-bubbles`, each with the kernel's `.scale`):
//!   front-end = fetch bubbles / slots; bad speculation = (issued - retired + recovery
//!   bubbles) / slots; retiring = retired / slots; back-end = the rest. With SMT on the
//!   kernel counts slots with `any=1` (the whole core's cycles, `.scale` 2), so the
//!   split is only meaningful for the core: count both siblings.
//! * **AMD dispatch slots** (Zen 4 and later: six dispatch slots per cycle):
//!   front-end = `de_no_dispatch_per_slot.no_ops_from_frontend`, back-end =
//!   `de_no_dispatch_per_slot.backend_stalls`, retiring = `ex_ret_ops`, bad
//!   speculation = `de_src_op_disp.all - ex_ret_ops`, and SMT contention =
//!   `de_no_dispatch_per_slot.smt_contention` (slots this thread lost to its sibling;
//!   only where counted), each over the dispatch slots (`total_dispatch_slots`:
//!   `ls_not_halted_cyc` times the dispatch width, 6 on Zen 4 and 8 on Zen 5, as the
//!   event's scale). Per thread.
//!
//! Nothing is guessed: without the events of one method the answer is a one-line
//! reason naming what is missing.

use serde::{Deserialize, Serialize};

use super::CounterValues;

named_enum! {
    fn label;
    /// Which events the split was computed from.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum TopdownMethod {
        IntelPerfMetrics = "Intel slots and perf metrics",
        IntelSlotFormula = "Intel slot formula (pre-Ice Lake)",
        AmdDispatchSlots = "AMD dispatch slots (Zen 4+)",
    }
}

impl TopdownMethod {
    /// The events each method needs, in the order they are grouped (leader first).
    pub fn events(self) -> &'static [&'static str] {
        match self {
            TopdownMethod::IntelPerfMetrics => &INTEL_PERF_METRICS,
            TopdownMethod::IntelSlotFormula => &INTEL_SLOT_FORMULA,
            TopdownMethod::AmdDispatchSlots => &AMD_DISPATCH_SLOTS,
        }
    }

    /// The events the split cannot do without: all of [`Self::events`] but AMD's
    /// `smt_contention`, which perf's `-M` runs often leave out (`-M
    /// frontend_bound,backend_bound,...`) and which only adds the SMT contention share.
    pub fn required(self) -> &'static [&'static str] {
        match self {
            TopdownMethod::AmdDispatchSlots => &AMD_DISPATCH_SLOTS[..5],
            other => other.events(),
        }
    }
}

/// The kernel's names (Ice Lake and later), `slots` first: it must lead the group.
pub const INTEL_PERF_METRICS: [&str; 5] = [
    "slots",
    "topdown-retiring",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-be-bound",
];

/// Events that correct the perf-metric shares where counted (Ice Lake and later), as
/// the kernel's metric tables and pmu-tools do: uops dropped after delivery (slots)
/// come off front-end bound; pipeline clears (slots, Ice Lake-SP only) go to back-end
/// bound; bad speculation is what is left, never below zero.
pub const TOPDOWN_CORRECTIONS: [&str; 2] = ["uop-drop-slots", "clears-slots"];

/// The kernel's names on Skylake and earlier.
pub const INTEL_SLOT_FORMULA: [&str; 5] = [
    "topdown-total-slots",
    "topdown-slots-issued",
    "topdown-slots-retired",
    "topdown-fetch-bubbles",
    "topdown-recovery-bubbles",
];

/// AMD's names (Zen 4 event list), the slots first: `total_dispatch_slots` is
/// `ls_not_halted_cyc` scaled by the dispatch width.
pub const AMD_DISPATCH_SLOTS: [&str; 6] = [
    "total_dispatch_slots",
    "ex_ret_ops",
    "de_src_op_disp.all",
    "de_no_dispatch_per_slot.no_ops_from_frontend",
    "de_no_dispatch_per_slot.backend_stalls",
    "de_no_dispatch_per_slot.smt_contention",
];

/// Level-1 shares of the slots (each 0..1; back-end may come out slightly negative
/// with the slot formula when the counts are noisy, and is kept as measured).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Topdown {
    pub method: TopdownMethod,
    /// `thread` or `core ...`: what the shares describe.
    pub scope: String,
    /// All issue (Intel) or dispatch (AMD) slots in the window.
    pub slots: f64,
    pub retiring: f64,
    pub bad_speculation: f64,
    pub frontend_bound: f64,
    pub backend_bound: f64,
    /// AMD only: slots lost to the SMT sibling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt_contention: Option<f64>,
    /// The part of back-end bound stalled on memory (level 2), where its events were
    /// counted ([`memory_bound`]); the rest of back-end bound is core bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_memory: Option<f64>,
}

impl Topdown {
    /// `(label, share)` in drawing order.
    pub fn categories(&self) -> Vec<(&'static str, f64)> {
        let mut out = vec![
            ("retiring", self.retiring),
            ("bad speculation", self.bad_speculation),
            ("front-end bound", self.frontend_bound),
            ("back-end bound", self.backend_bound),
        ];
        if let Some(s) = self.smt_contention {
            out.push(("SMT contention", s));
        }
        out
    }
}

/// Intel before Sapphire Rapids (Skylake-SP, Ice Lake-SP): the events of the memory
/// share of back-end bound, by their vendor names.
pub const INTEL_MEMORY_BOUND: [&str; 5] = [
    "cycle_activity.stalls_mem_any",
    "exe_activity.bound_on_stores",
    "cycle_activity.stalls_total",
    "exe_activity.1_ports_util",
    "exe_activity.2_ports_util",
];

/// AMD Zen 4 and 5: retirement stalled on a load, of all retirement stalls.
pub const AMD_MEMORY_BOUND: [&str; 2] = [
    "ex_no_retire.load_not_complete",
    "ex_no_retire.not_complete",
];

/// The memory-bound share of all slots (level 2), as the kernel's metric tables
/// compute `tma_memory_bound` and `backend_bound_memory`, from whichever events were
/// counted: Sapphire Rapids and later, the `topdown-mem-bound` perf metric over the
/// level-1 metrics' sum; Skylake-SP and Ice Lake-SP, back-end bound times the cycles
/// stalled on memory or stores over the cycles the back end stalled or used few ports
/// ([`INTEL_MEMORY_BOUND`]); AMD Zen 4/5, back-end bound times the retirement stalls
/// on a load ([`AMD_MEMORY_BOUND`]). `None` without them.
pub fn memory_bound(v: &CounterValues, t: &Topdown) -> Option<f64> {
    match t.method {
        TopdownMethod::IntelPerfMetrics | TopdownMethod::IntelSlotFormula => {
            if t.method == TopdownMethod::IntelPerfMetrics
                && let Some(mem) = v.named_value("topdown-mem-bound")
            {
                let level1 = values(v, &INTEL_PERF_METRICS[1..]).ok()?;
                let sum: f64 = level1.iter().sum();
                return (sum > 0.0).then(|| mem / sum);
            }
            let x = values(v, &INTEL_MEMORY_BOUND).ok()?;
            let (mem, stores, total, one_port, two_ports) = (x[0], x[1], x[2], x[3], x[4]);
            let cycles = total + one_port + t.retiring * two_ports + stores;
            (cycles > 0.0).then(|| (mem + stores) / cycles * t.backend_bound)
        }
        TopdownMethod::AmdDispatchSlots => {
            let x = values(v, &AMD_MEMORY_BOUND).ok()?;
            Some(if x[1] > 0.0 { x[0] / x[1] } else { 0.0 } * t.backend_bound)
        }
    }
}

fn values(v: &CounterValues, names: &[&str]) -> Result<Vec<f64>, Vec<String>> {
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for n in names {
        match v.named_value(n) {
            Some(x) => out.push(x),
            None => missing.push((*n).to_string()),
        }
    }
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(missing)
    }
}

/// Top-down level 1 of `v` by the first method whose events were all counted; `Err` is
/// the one-line reason there is none.
pub fn level1(v: &CounterValues) -> Result<Topdown, TopdownUnavailable> {
    level1_text(v).map_err(TopdownUnavailable)
}

// The work of the public function above, its reason as text.
fn level1_text(v: &CounterValues) -> Result<Topdown, String> {
    let mut tried: Vec<String> = Vec::new();
    for method in TopdownMethod::ALL {
        let names = method.required();
        match values(v, names) {
            Ok(x) => {
                let mut t = compute(v, method, &x)?;
                t.backend_memory = memory_bound(v, &t);
                return Ok(t);
            }
            Err(missing) if missing.len() < names.len() => {
                tried.push(format!("{} lacks {}", method.label(), missing.join(", ")));
            }
            Err(_) => {}
        }
    }
    if tried.is_empty() {
        Err("no top-down events counted (ask for them with --events topdown)".into())
    } else {
        Err(format!("top-down not computed: {}", tried.join("; ")))
    }
}

fn compute(v: &CounterValues, method: TopdownMethod, x: &[f64]) -> Result<Topdown, String> {
    let zero = || {
        format!(
            "top-down not computed: no slots counted ({})",
            method.label()
        )
    };
    let slots = x[0];
    if slots <= 0.0 {
        return Err(zero());
    }
    // The scope, the four level-1 shares (retiring, bad speculation, front-end bound,
    // back-end bound) and the SMT contention share.
    let (scope, [retiring, bad_speculation, frontend_bound, backend_bound], smt_contention) =
        match method {
            TopdownMethod::IntelPerfMetrics => {
                let (ret, bad, fe, be) = (x[1], x[2], x[3], x[4]);
                let sum = ret + bad + fe + be;
                if sum <= 0.0 {
                    return Err(zero());
                }
                let [dropped, clears] = TOPDOWN_CORRECTIONS.map(|n| v.named_value(n));
                let frontend = fe / sum - dropped.unwrap_or(0.0) / slots;
                let backend = be / sum + clears.unwrap_or(0.0) / slots;
                let bad_speculation = if dropped.is_none() && clears.is_none() {
                    bad / sum
                } else {
                    (1.0 - frontend - backend - ret / sum).max(0.0)
                };
                let shares = [ret / sum, bad_speculation, frontend, backend];
                ("thread", shares, None)
            }
            TopdownMethod::IntelSlotFormula => {
                let (issued, retired, fetch, recovery) = (x[1], x[2], x[3], x[4]);
                // The kernel's scale of 2 (instead of 4) on topdown-total-slots means it
                // counts the core's cycles with any=1: SMT is on and the split is per core.
                let core = v
                    .named(INTEL_SLOT_FORMULA[0])
                    .and_then(|r| r.scale)
                    .is_some_and(|s| s < 4.0);
                let scope = if core {
                    "core (SMT on: slots count both threads, any=1; count both siblings; \
                     per-thread top-down needs Ice Lake or later)"
                } else {
                    "thread"
                };
                let fe = fetch / slots;
                let bad = (issued - retired + recovery) / slots;
                let ret = retired / slots;
                (scope, [ret, bad, fe, 1.0 - fe - bad - ret], None)
            }
            TopdownMethod::AmdDispatchSlots => {
                let (ret_ops, disp, fe, be) = (x[1], x[2], x[3], x[4]);
                let shares = [ret_ops, disp - ret_ops, fe, be].map(|n| n / slots);
                let smt = v.named_value(AMD_DISPATCH_SLOTS[5]).map(|s| s / slots);
                ("thread", shares, smt)
            }
        };
    Ok(Topdown {
        method,
        scope: scope.into(),
        slots,
        retiring,
        bad_speculation,
        frontend_bound,
        backend_bound,
        smt_contention,
        backend_memory: None,
    })
}

/// Why no top-down breakdown can be computed from the counts (the events missing).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct TopdownUnavailable(pub String);

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::counters::CounterTarget;
    use crate::counters::named::NamedReading;

    /// Values with named events counted exactly (scale as given).
    pub(crate) fn named(counts: &[(&str, u64, Option<f64>)]) -> CounterValues {
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: true,
        });
        for &(name, raw, scale) in counts {
            v.named.push(NamedReading {
                scale,
                ..NamedReading::counted(name, raw)
            });
        }
        v
    }

    #[test]
    fn perf_metrics_shares_are_counts_over_their_sum() {
        // Shares 40/10/30/20 of 1000 slots, as the kernel reads them.
        let v = named(&[
            ("slots", 1000, None),
            ("topdown-retiring", 400, None),
            ("topdown-bad-spec", 100, None),
            ("topdown-fe-bound", 300, None),
            ("topdown-be-bound", 200, None),
        ]);
        let t = level1(&v).unwrap();
        assert_eq!(t.method, TopdownMethod::IntelPerfMetrics);
        assert_eq!(
            (
                t.retiring,
                t.bad_speculation,
                t.frontend_bound,
                t.backend_bound
            ),
            (0.4, 0.1, 0.3, 0.2)
        );
        assert_eq!(t.scope, "thread");
    }

    #[test]
    fn slot_formula_by_hand_with_smt_scale() {
        // Core cycles (any=1) 500, scale 2 -> 1000 slots. Issued 700, retired 500,
        // recovery cycles 25 (scale 2 -> 50 slots), fetch bubbles 150.
        // FE 0.15, bad (700-500+50)/1000 = 0.25, retiring 0.5, back-end 0.1.
        let v = named(&[
            ("topdown-total-slots", 500, Some(2.0)),
            ("topdown-slots-issued", 700, None),
            ("topdown-slots-retired", 500, None),
            ("topdown-fetch-bubbles", 150, None),
            ("topdown-recovery-bubbles", 25, Some(2.0)),
        ]);
        let t = level1(&v).unwrap();
        assert_eq!(t.method, TopdownMethod::IntelSlotFormula);
        assert_eq!(t.slots, 1000.0);
        assert!((t.frontend_bound - 0.15).abs() < 1e-12);
        assert!((t.bad_speculation - 0.25).abs() < 1e-12);
        assert!((t.retiring - 0.5).abs() < 1e-12);
        assert!((t.backend_bound - 0.1).abs() < 1e-12);
        assert!(t.scope.starts_with("core"), "{}", t.scope);
    }

    #[test]
    fn amd_dispatch_slots_by_hand() {
        // 100 cycles -> 600 slots; 240 retired ops, 300 dispatched, 60 FE, 180 BE, 60 SMT.
        let v = named(&[
            ("total_dispatch_slots", 100, Some(6.0)),
            ("ex_ret_ops", 240, None),
            ("de_src_op_disp.all", 300, None),
            ("de_no_dispatch_per_slot.no_ops_from_frontend", 60, None),
            ("de_no_dispatch_per_slot.backend_stalls", 180, None),
            ("de_no_dispatch_per_slot.smt_contention", 60, None),
        ]);
        let t = level1(&v).unwrap();
        assert_eq!(t.slots, 600.0);
        assert_eq!(t.retiring, 0.4);
        assert_eq!(t.bad_speculation, 0.1);
        assert_eq!(t.frontend_bound, 0.1);
        assert_eq!(t.backend_bound, 0.3);
        assert_eq!(t.smt_contention, Some(0.1));
        assert_eq!(t.categories().len(), 5);
    }

    #[test]
    fn amd_without_smt_contention_has_no_smt_share() {
        let v = named(&[
            ("total_dispatch_slots", 100, Some(6.0)),
            ("ex_ret_ops", 240, None),
            ("de_src_op_disp.all", 300, None),
            ("de_no_dispatch_per_slot.no_ops_from_frontend", 60, None),
            ("de_no_dispatch_per_slot.backend_stalls", 180, None),
        ]);
        let t = level1(&v).unwrap();
        assert_eq!((t.retiring, t.backend_bound), (0.4, 0.3));
        assert_eq!(t.smt_contention, None);
        assert_eq!(t.categories().len(), 4);
    }

    #[test]
    fn missing_events_are_named_not_zeroed() {
        let v = named(&[("slots", 1000, None), ("topdown-retiring", 400, None)]);
        let e = level1(&v).unwrap_err().0;
        assert!(
            e.contains("topdown-bad-spec") && e.contains("topdown-be-bound"),
            "{e}"
        );
        let none = named(&[]);
        assert!(level1(&none).unwrap_err().0.contains("--events topdown"));
    }
}
