//! A small built-in table of model-specific core events that the SMT papers use and
//! the kernel has no alias for: L2 misses, uops issued and retired, machine clears,
//! store-buffer stalls, 4K aliasing, AMD's dispatch-slot events for top-down, and the
//! stall-cycle events behind top-down level 2's back-end memory bound where the PMU has
//! no metric for it.
//!
//! Each row gives smtlab's portable name (`l2-misses`, the same on every CPU), the
//! vendor's name for the event on that microarchitecture, and its terms, which are
//! encoded through the machine's own `cpu/format/` files like any raw event.
//!
//! Every row is held against the Linux kernel's perf event lists by a test
//! (`tests/kernel_event_lists.rs`, lists fetched by `scripts/kernel-pmu-events.sh`)
//! (tools/perf/pmu-events), one list per microarchitecture: skylakex, icelakex,
//! sapphirerapids, graniterapids, amdzen2, amdzen3, amdzen4 and amdzen5. For each row
//! the vendor's name is in that microarchitecture's list with the same event code, unit
//! mask, counter mask and edge bit as the terms here; where two microarchitectures
//! name or encode an event differently, the row is split. What the lists say that is
//! easy to get wrong:
//!
//! * Ice Lake-SP's list has no `L2_RQSTS.MISS` (the Ice Lake client list marks its
//!   unit mask 0x3f as unsupported on Ice Lake-SP), so `l2-misses` there is
//!   `L2_RQSTS.ALL_DEMAND_MISS`: demand data reads, RFOs and code reads that miss L2,
//!   without prefetches.
//! * Granite Rapids lists the same codes as Sapphire Rapids for every Intel row here
//!   but `RESOURCE_STALLS.SB`, which its list lacks: no `store-buffer-stalls` there.
//! * Zen 2 names retired ops `EX_RET_COPS` and the store-queue stall
//!   `..._STORE_QUEUE_TOKEN_STALL`; the encodings are those of Zen 3.
//!
//! The AMD top-down rows follow the kernel's Zen 4 and Zen 5 pipeline metrics: dispatch
//! slots are `LS_NOT_HALTED_CYC` times the dispatch width (6 on Zen 4, 8 on Zen 5).
//!
//! What a CPU has no event for is absent on purpose, and `--events` says so in one
//! line: 4K aliasing on AMD (no counted equivalent), store-buffer stalls on Granite
//! Rapids (its list has no `RESOURCE_STALLS.SB`), uops issued on Zen 3 (its list has
//! no ops-dispatched event), machine clears on Zen 4 and 5 (their lists have no retired
//! branch resync event), and 64K aliasing everywhere (a NetBurst event of paper 000's
//! Pentium 4; no later core counts it). The encodings were checked against those lists and the
//! fixture trees here, never on hardware: `scripts/pmu-check.sh` compares them with
//! `perf stat` on a machine that has a PMU.

use crate::pmu::{CpuId, Vendor};

/// The microarchitectures the table covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uarch {
    SkylakeSp,
    IceLakeSp,
    SapphireRapids,
    GraniteRapids,
    Zen2,
    Zen3,
    Zen4,
    Zen5,
}

impl Uarch {
    pub const ALL: [Uarch; 8] = [
        Uarch::SkylakeSp,
        Uarch::IceLakeSp,
        Uarch::SapphireRapids,
        Uarch::GraniteRapids,
        Uarch::Zen2,
        Uarch::Zen3,
        Uarch::Zen4,
        Uarch::Zen5,
    ];

    /// The microarchitecture of a CPU, by vendor, family and model.
    pub fn of(cpu: CpuId) -> Option<Uarch> {
        match (cpu.vendor, cpu.family, cpu.model) {
            // Skylake-SP, Cascade Lake and Cooper Lake share model 0x55.
            (Vendor::Intel, 6, 0x55) => Some(Uarch::SkylakeSp),
            (Vendor::Intel, 6, 0x6a | 0x6c) => Some(Uarch::IceLakeSp),
            // Sapphire Rapids and Emerald Rapids.
            (Vendor::Intel, 6, 0x8f | 0xcf) => Some(Uarch::SapphireRapids),
            (Vendor::Intel, 6, 0xad | 0xae) => Some(Uarch::GraniteRapids),
            (Vendor::Amd, 0x17, 0x30..=0xff) => Some(Uarch::Zen2),
            (Vendor::Amd, 0x19, 0x00..=0x0f | 0x20..=0x5f) => Some(Uarch::Zen3),
            (Vendor::Amd, 0x19, 0x10..=0x1f | 0x60..=0xaf) => Some(Uarch::Zen4),
            (Vendor::Amd, 0x1a, _) => Some(Uarch::Zen5),
            _ => None,
        }
    }

    /// The kernel's directory of event lists for it (tools/perf/pmu-events/arch/x86).
    pub fn kernel_list(self) -> &'static str {
        NAMES[self as usize].1
    }

    /// A microarchitecture by its label or the kernel's list name, any case, spaces
    /// and hyphens ignored (`zen4`, `Sapphire Rapids`, `icelakex`).
    pub fn parse(text: &str) -> Result<Uarch, UnknownUarch> {
        let key = |s: &str| -> String {
            s.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_lowercase())
                .collect()
        };
        let want = key(text);
        Uarch::ALL
            .into_iter()
            .find(|u| key(u.label()) == want || u.kernel_list() == want)
            .ok_or_else(|| UnknownUarch(text.to_string()))
    }

    pub fn label(self) -> &'static str {
        NAMES[self as usize].0
    }
}

/// Each microarchitecture's label and the kernel's name of its event list, in the
/// order of [`Uarch`]'s variants.
const NAMES: [(&str, &str); 8] = [
    ("Skylake-SP", "skylakex"),
    ("Ice Lake-SP", "icelakex"),
    ("Sapphire Rapids", "sapphirerapids"),
    ("Granite Rapids", "graniterapids"),
    ("Zen 2", "amdzen2"),
    ("Zen 3", "amdzen3"),
    ("Zen 4", "amdzen4"),
    ("Zen 5", "amdzen5"),
];

/// A `--cpu-model` that names no microarchitecture of the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown CPU model {0:?} (expected one of: skylake-sp, icelake-sp, sapphire-rapids, \
     granite-rapids, zen2, zen3, zen4, zen5)"
)]
pub struct UnknownUarch(pub String);

/// One event on some microarchitectures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelEvent {
    /// smtlab's name, the same on every CPU (`l2-misses`).
    pub name: &'static str,
    /// What it counts, for lists.
    pub what: &'static str,
    /// The vendor's name on these microarchitectures.
    pub vendor_name: &'static str,
    pub uarchs: &'static [Uarch],
    /// perf-style terms for the core PMU.
    pub terms: &'static str,
    /// A factor the count is multiplied by (the dispatch width for
    /// `total_dispatch_slots`).
    pub scale: Option<f64>,
}

use Uarch::*;

const INTEL_ALL: &[Uarch] = &[SkylakeSp, IceLakeSp, SapphireRapids, GraniteRapids];
const GOLDEN_COVE_ON: &[Uarch] = &[SapphireRapids, GraniteRapids];

const fn row(
    name: &'static str,
    what: &'static str,
    vendor_name: &'static str,
    uarchs: &'static [Uarch],
    terms: &'static str,
) -> ModelEvent {
    ModelEvent {
        name,
        what,
        vendor_name,
        uarchs,
        terms,
        scale: None,
    }
}

/// The table. A name appears once per encoding; `lookup` picks the row for the CPU.
pub const MODEL_EVENTS: &[ModelEvent] = &[
    // Intel.
    row(
        "l2-misses",
        "L2 misses (all requests)",
        "L2_RQSTS.MISS",
        &[SkylakeSp, SapphireRapids, GraniteRapids],
        "event=0x24,umask=0x3f",
    ),
    row(
        "l2-misses",
        "L2 demand misses (data reads, RFOs, code reads; no prefetches)",
        "L2_RQSTS.ALL_DEMAND_MISS",
        &[IceLakeSp],
        "event=0x24,umask=0x27",
    ),
    row(
        "uops-issued",
        "uops issued by the front-end",
        "UOPS_ISSUED.ANY",
        &[SkylakeSp, IceLakeSp],
        "event=0x0e,umask=0x01",
    ),
    row(
        "uops-issued",
        "uops issued by the front-end",
        "UOPS_ISSUED.ANY",
        GOLDEN_COVE_ON,
        "event=0xae,umask=0x01",
    ),
    row(
        "uops-retired",
        "retirement slots used",
        "UOPS_RETIRED.RETIRE_SLOTS",
        &[SkylakeSp],
        "event=0xc2,umask=0x02",
    ),
    row(
        "uops-retired",
        "retirement slots used",
        "UOPS_RETIRED.SLOTS",
        &[IceLakeSp, SapphireRapids, GraniteRapids],
        "event=0xc2,umask=0x02",
    ),
    row(
        "machine-clears",
        "machine clears (pipeline flushes)",
        "MACHINE_CLEARS.COUNT",
        INTEL_ALL,
        "event=0xc3,umask=0x01,edge=1,cmask=1",
    ),
    row(
        "store-buffer-stalls",
        "cycles stalled on a full store buffer",
        "RESOURCE_STALLS.SB",
        &[SkylakeSp, IceLakeSp, SapphireRapids],
        "event=0xa2,umask=0x08",
    ),
    row(
        "4k-aliasing",
        "loads blocked by 4K address aliasing with a store",
        "LD_BLOCKS_PARTIAL.ADDRESS_ALIAS",
        &[SkylakeSp, IceLakeSp],
        "event=0x07,umask=0x01",
    ),
    row(
        "4k-aliasing",
        "loads blocked by 4K address aliasing with a store",
        "LD_BLOCKS.ADDRESS_ALIAS",
        GOLDEN_COVE_ON,
        "event=0x03,umask=0x04",
    ),
    // Corrections to top-down level 1 from perf metrics, as the kernel's metric tables
    // and pmu-tools apply them: uops the front-end delivered but dropped count against
    // front-end bound, and on Ice Lake-SP each pipeline clear costs back-end bound five
    // slots (its pipeline width); Sapphire Rapids and later have no clears term.
    row(
        "uop-drop-slots",
        "uops dropped after delivery (a front-end bound correction)",
        "INT_MISC.UOP_DROPPING",
        &[IceLakeSp],
        "event=0x0d,umask=0x10",
    ),
    row(
        "uop-drop-slots",
        "uops dropped after delivery (a front-end bound correction)",
        "INT_MISC.UOP_DROPPING",
        GOLDEN_COVE_ON,
        "event=0xad,umask=0x10",
    ),
    ModelEvent {
        name: "clears-slots",
        what: "slots lost to pipeline clears (clears x 5, a back-end bound correction)",
        vendor_name: "INT_MISC.CLEARS_COUNT",
        uarchs: &[IceLakeSp],
        terms: "event=0x0d,umask=0x01,edge=1,cmask=1",
        scale: Some(5.0),
    },
    // How much of the time both SMT threads of the core ran (pmu-tools' and the
    // kernel's SMT_2T_Utilization): 1 - one-thread-active / core reference clocks.
    // Skylake-SP counts the core's reference clocks with any=1 (both threads), halved
    // by the scale; later cores distribute them between the active threads.
    row(
        "one-thread-active",
        "reference clocks this thread ran while its sibling was halted",
        "CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE",
        INTEL_ALL,
        "event=0x3c,umask=0x02",
    ),
    ModelEvent {
        name: "core-ref-clocks",
        what: "the core's reference clocks, per thread (any thread, halved)",
        vendor_name: "CPU_CLK_UNHALTED.REF_XCLK_ANY",
        uarchs: &[SkylakeSp],
        terms: "event=0x3c,umask=0x01,any=1",
        scale: Some(0.5),
    },
    row(
        "core-ref-clocks",
        "the core's reference clocks, distributed between its active threads",
        "CPU_CLK_UNHALTED.REF_DISTRIBUTED",
        &[IceLakeSp, SapphireRapids, GraniteRapids],
        "event=0x3c,umask=0x08",
    ),
    // Top-down level 2 on cores without its perf metric: the cycles behind back-end
    // memory bound, as the kernel's `tma_memory_bound` and pmu-tools compute it on
    // Skylake-SP and Ice Lake-SP (Sapphire Rapids and later count `topdown-mem-bound`).
    row(
        "cycle_activity.stalls_mem_any",
        "execution stall cycles with a memory load outstanding",
        "CYCLE_ACTIVITY.STALLS_MEM_ANY",
        &[SkylakeSp, IceLakeSp],
        "event=0xa3,umask=0x14,cmask=20",
    ),
    row(
        "cycle_activity.stalls_total",
        "execution stall cycles",
        "CYCLE_ACTIVITY.STALLS_TOTAL",
        &[SkylakeSp, IceLakeSp],
        "event=0xa3,umask=0x04,cmask=4",
    ),
    row(
        "exe_activity.bound_on_stores",
        "cycles the store buffer was full and nothing else stalled",
        "EXE_ACTIVITY.BOUND_ON_STORES",
        &[SkylakeSp],
        "event=0xa6,umask=0x40",
    ),
    row(
        "exe_activity.bound_on_stores",
        "cycles the store buffer was full and nothing else stalled",
        "EXE_ACTIVITY.BOUND_ON_STORES",
        &[IceLakeSp],
        "event=0xa6,umask=0x40,cmask=2",
    ),
    row(
        "exe_activity.1_ports_util",
        "cycles one execution port was used",
        "EXE_ACTIVITY.1_PORTS_UTIL",
        &[SkylakeSp, IceLakeSp],
        "event=0xa6,umask=0x02",
    ),
    row(
        "exe_activity.2_ports_util",
        "cycles two execution ports were used",
        "EXE_ACTIVITY.2_PORTS_UTIL",
        &[SkylakeSp, IceLakeSp],
        "event=0xa6,umask=0x04",
    ),
    // The instruction mix (paper 003 Tables 2 and 5): retired loads, stores and
    // branches by kind.
    row(
        "loads",
        "retired load instructions",
        "MEM_INST_RETIRED.ALL_LOADS",
        INTEL_ALL,
        "event=0xd0,umask=0x81",
    ),
    row(
        "stores",
        "retired store instructions",
        "MEM_INST_RETIRED.ALL_STORES",
        INTEL_ALL,
        "event=0xd0,umask=0x82",
    ),
    row(
        "branches-conditional",
        "retired conditional branches",
        "BR_INST_RETIRED.CONDITIONAL",
        &[SkylakeSp],
        "event=0xc4,umask=0x01",
    ),
    row(
        "branches-conditional",
        "retired conditional branches",
        "BR_INST_RETIRED.COND",
        &[IceLakeSp, SapphireRapids, GraniteRapids],
        "event=0xc4,umask=0x11",
    ),
    row(
        "branches-taken",
        "retired taken branches",
        "BR_INST_RETIRED.NEAR_TAKEN",
        INTEL_ALL,
        "event=0xc4,umask=0x20",
    ),
    row(
        "calls",
        "retired near calls",
        "BR_INST_RETIRED.NEAR_CALL",
        INTEL_ALL,
        "event=0xc4,umask=0x02",
    ),
    row(
        "returns",
        "retired near returns",
        "BR_INST_RETIRED.NEAR_RETURN",
        INTEL_ALL,
        "event=0xc4,umask=0x08",
    ),
    row(
        "branches-indirect",
        "retired indirect branches",
        "BR_INST_RETIRED.INDIRECT",
        &[IceLakeSp, SapphireRapids, GraniteRapids],
        "event=0xc4,umask=0x80",
    ),
    // AMD.
    row(
        "l2-misses",
        "L2 misses of instruction and data cache requests",
        "L2_CACHE_REQ_STAT.IC_DC_MISS_IN_L2",
        &[Zen2, Zen3, Zen4, Zen5],
        "event=0x64,umask=0x09",
    ),
    row(
        "uops-retired",
        "retired ops",
        "EX_RET_COPS",
        &[Zen2],
        "event=0xc1",
    ),
    row(
        "uops-retired",
        "retired macro-ops",
        "EX_RET_OPS",
        &[Zen3, Zen4, Zen5],
        "event=0xc1",
    ),
    row(
        "uops-issued",
        "macro-ops dispatched",
        "DE_SRC_OP_DISP.ALL",
        &[Zen4, Zen5],
        "event=0xaa,umask=0x07",
    ),
    // Ops dispatched from the decoder or the op cache: what the front-end issued. The
    // kernel's Zen 2 list gives the whole event unit mask 0xff (its parts are 0x01,
    // decoder, and 0x02, op cache).
    row(
        "uops-issued",
        "macro-ops dispatched (decoder and op cache)",
        "DE_DIS_UOPS_FROM_DECODER",
        &[Zen2],
        "event=0xaa,umask=0xff",
    ),
    // Pipeline restarts for microcode assists and writes to the instruction stream,
    // AMD's nearest to a machine clear; listed for Zen 2 and Zen 3 only.
    row(
        "machine-clears",
        "retired branch resyncs (pipeline restarts)",
        "EX_RET_BRN_RESYNC",
        &[Zen2, Zen3],
        "event=0xc7",
    ),
    row(
        "store-buffer-stalls",
        "dispatch stall cycles on store queue tokens",
        "DE_DIS_DISPATCH_TOKEN_STALLS1.STORE_QUEUE_TOKEN_STALL",
        &[Zen2],
        "event=0xae,umask=0x04",
    ),
    row(
        "store-buffer-stalls",
        "dispatch stall cycles on store queue tokens",
        "DE_DIS_DISPATCH_TOKEN_STALLS1.STORE_QUEUE_RSRC_STALL",
        &[Zen3, Zen4],
        "event=0xae,umask=0x04",
    ),
    // The same stall under Zen 5's name.
    row(
        "store-buffer-stalls",
        "dispatch stall cycles on store queue tokens",
        "DE_DISPATCH_STALL_CYCLE_DYNAMIC_TOKENS_PART1.STORE_QUEUE_RSRC_STALL",
        &[Zen5],
        "event=0xae,umask=0x04",
    ),
    // The instruction mix on AMD: loads and stores as dispatched (AMD counts no
    // retired loads and stores), branches as retired.
    row(
        "loads",
        "dispatched loads (not only retired ones)",
        "LS_DISPATCH.LD_DISPATCH",
        &[Zen2, Zen3, Zen4, Zen5],
        "event=0x29,umask=0x01",
    ),
    row(
        "stores",
        "dispatched stores (not only retired ones)",
        "LS_DISPATCH.STORE_DISPATCH",
        &[Zen2, Zen3, Zen4, Zen5],
        "event=0x29,umask=0x02",
    ),
    row(
        "branches-conditional",
        "retired conditional branches",
        "EX_RET_COND",
        &[Zen2, Zen3, Zen4, Zen5],
        "event=0xd1",
    ),
    row(
        "branches-taken",
        "retired taken branches",
        "EX_RET_BRN_TKN",
        &[Zen2, Zen3, Zen4, Zen5],
        "event=0xc4",
    ),
    row(
        "returns",
        "retired near returns",
        "EX_RET_NEAR_RET",
        &[Zen2, Zen3, Zen4, Zen5],
        "event=0xc8",
    ),
    row(
        "branches-indirect",
        "retired indirect branches",
        "EX_RET_IND_BRCH_INSTR",
        &[Zen3, Zen4, Zen5],
        "event=0xcc",
    ),
    // AMD dispatch slots for top-down (Zen 4: 6 slots per cycle, Zen 5: 8).
    ModelEvent {
        name: "total_dispatch_slots",
        what: "dispatch slots (non-halted cycles x 6)",
        vendor_name: "LS_NOT_HALTED_CYC",
        uarchs: &[Zen4],
        terms: "event=0x76",
        scale: Some(6.0),
    },
    ModelEvent {
        name: "total_dispatch_slots",
        what: "dispatch slots (non-halted cycles x 8)",
        vendor_name: "LS_NOT_HALTED_CYC",
        uarchs: &[Zen5],
        terms: "event=0x76",
        scale: Some(8.0),
    },
    row(
        "ex_ret_ops",
        "retired macro-ops",
        "EX_RET_OPS",
        &[Zen4, Zen5],
        "event=0xc1",
    ),
    row(
        "de_src_op_disp.all",
        "macro-ops dispatched",
        "DE_SRC_OP_DISP.ALL",
        &[Zen4, Zen5],
        "event=0xaa,umask=0x07",
    ),
    row(
        "de_no_dispatch_per_slot.no_ops_from_frontend",
        "dispatch slots empty for want of front-end ops",
        "DE_NO_DISPATCH_PER_SLOT.NO_OPS_FROM_FRONTEND",
        &[Zen4, Zen5],
        "event=0x1a0,umask=0x01",
    ),
    row(
        "de_no_dispatch_per_slot.backend_stalls",
        "dispatch slots empty for back-end stalls",
        "DE_NO_DISPATCH_PER_SLOT.BACKEND_STALLS",
        &[Zen4, Zen5],
        "event=0x1a0,umask=0x1e",
    ),
    // Back-end memory bound on Zen 4/5 (the kernel's `backend_bound_memory`): of the
    // cycles retirement stalled on an incomplete op, those on a load.
    row(
        "ex_no_retire.not_complete",
        "cycles retirement stalled on an op not complete",
        "EX_NO_RETIRE.NOT_COMPLETE",
        &[Zen4, Zen5],
        "event=0xd6,umask=0x02",
    ),
    row(
        "ex_no_retire.load_not_complete",
        "cycles retirement stalled on a load not complete",
        "EX_NO_RETIRE.LOAD_NOT_COMPLETE",
        &[Zen4, Zen5],
        "event=0xd6,umask=0xa2",
    ),
    row(
        "de_no_dispatch_per_slot.smt_contention",
        "dispatch slots given to the SMT sibling",
        "DE_NO_DISPATCH_PER_SLOT.SMT_CONTENTION",
        &[Zen4, Zen5],
        "event=0x1a0,umask=0x60",
    ),
];

/// Events of the papers that no microarchitecture in the table counts, with why; they
/// are known names, so `--events` says they are absent instead of "unknown event".
pub const NOWHERE: &[(&str, &str)] = &[(
    "64k-aliasing",
    "64K aliasing conflicts are a Pentium 4 (NetBurst) event of paper 000; no later \
     Intel or AMD core counts them (4k-aliasing is the nearest on Intel)",
)];

/// The names `mix` expands to: the instruction mix.
pub const MIX_EVENTS: [&str; 7] = [
    "loads",
    "stores",
    "branches-conditional",
    "branches-taken",
    "branches-indirect",
    "calls",
    "returns",
];

/// The names `model` expands to: the papers' events.
pub const PAPER_EVENTS: [&str; 7] = [
    "l2-misses",
    "uops-issued",
    "uops-retired",
    "machine-clears",
    "store-buffer-stalls",
    "4k-aliasing",
    "64k-aliasing",
];

/// Whether `name` (smtlab's or the vendor's, any case) is in the table at all.
pub fn known(name: &str) -> bool {
    MODEL_EVENTS.iter().any(|e| matches(e, name)) || nowhere(name).is_some()
}

/// Why `name` is counted on no CPU, when it is one of [`NOWHERE`].
pub fn nowhere(name: &str) -> Option<&'static str> {
    NOWHERE
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|&(_, why)| why)
}

/// Whether `e` is named `name`, smtlab's name or the vendor's (any case).
pub(crate) fn matches(e: &ModelEvent, name: &str) -> bool {
    e.name.eq_ignore_ascii_case(name) || e.vendor_name.eq_ignore_ascii_case(name)
}

/// The row for `name` on `uarch`.
/// smtlab's own name wins over a vendor's name (`ex_ret_ops` is its own row for
/// top-down, and also the vendor name behind `uops-retired`).
pub fn lookup(name: &str, uarch: Uarch) -> Option<&'static ModelEvent> {
    let on = |e: &&ModelEvent| e.uarchs.contains(&uarch);
    MODEL_EVENTS
        .iter()
        .filter(on)
        .find(|e| e.name.eq_ignore_ascii_case(name))
        .or_else(|| MODEL_EVENTS.iter().filter(on).find(|e| matches(e, name)))
}

/// The microarchitectures that have `name`, for the reason it is absent elsewhere.
pub fn uarchs_with(name: &str) -> Vec<Uarch> {
    Uarch::ALL
        .into_iter()
        .filter(|u| lookup(name, *u).is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(vendor: Vendor, family: u32, model: u32) -> CpuId {
        CpuId {
            vendor,
            family,
            model,
        }
    }

    #[test]
    fn models_map_to_microarchitectures() {
        assert_eq!(Uarch::of(id(Vendor::Intel, 6, 85)), Some(SkylakeSp));
        assert_eq!(Uarch::of(id(Vendor::Intel, 6, 0x8f)), Some(SapphireRapids));
        assert_eq!(Uarch::of(id(Vendor::Amd, 0x19, 0x01)), Some(Zen3));
        assert_eq!(Uarch::of(id(Vendor::Amd, 0x19, 0x11)), Some(Zen4));
        assert_eq!(Uarch::of(id(Vendor::Intel, 6, 0x9e)), None);
    }

    #[test]
    fn each_name_has_at_most_one_row_per_uarch() {
        for e in MODEL_EVENTS {
            for u in e.uarchs {
                let rows = MODEL_EVENTS
                    .iter()
                    .filter(|r| r.name == e.name && r.uarchs.contains(u))
                    .count();
                assert_eq!(rows, 1, "{} on {}", e.name, u.label());
            }
        }
        assert_eq!(
            lookup("l2_rqsts.miss", SkylakeSp).unwrap().name,
            "l2-misses"
        );
        assert!(lookup("4k-aliasing", Zen4).is_none());
        assert!(known("4k-aliasing"));
        assert!(known("64K-aliasing") && uarchs_with("64k-aliasing").is_empty());
    }

    /// Every paper event on every microarchitecture: a row whose terms name only
    /// fields the core PMU has, or absent on purpose (listed here, so a row lost by
    /// mistake fails).
    #[test]
    fn every_paper_event_is_covered_or_absent_on_purpose() {
        let absent: &[(&str, &[Uarch])] = &[
            ("uops-issued", &[Zen3]),
            ("machine-clears", &[Zen4, Zen5]),
            ("4k-aliasing", &[Zen2, Zen3, Zen4, Zen5]),
            ("store-buffer-stalls", &[GraniteRapids]),
            ("64k-aliasing", &Uarch::ALL),
        ];
        for name in PAPER_EVENTS {
            for u in Uarch::ALL {
                let expect_absent = absent.iter().any(|(n, us)| *n == name && us.contains(&u));
                match lookup(name, u) {
                    Some(row) => {
                        assert!(!expect_absent, "{name} on {} has a row", u.label());
                        for term in row.terms.split(',') {
                            let key = term.split('=').next().unwrap();
                            assert!(
                                ["event", "umask", "edge", "cmask", "inv"].contains(&key),
                                "{name} on {}: term {term}",
                                u.label()
                            );
                        }
                    }
                    None => assert!(expect_absent, "{name} on {} has no row", u.label()),
                }
            }
        }
        assert_eq!(Uarch::of(id(Vendor::Amd, 0x17, 0x71)), Some(Zen2));
        assert_eq!(Uarch::of(id(Vendor::Amd, 0x1a, 0x02)), Some(Zen5));
        assert_eq!(Uarch::of(id(Vendor::Intel, 6, 0xad)), Some(GraniteRapids));
    }

    /// The dispatch width each AMD top-down row scales cycles by. (Every encoding is
    /// held against the kernel's own lists in tests/kernel_event_lists.rs.)
    #[test]
    fn dispatch_slots_scale_by_the_dispatch_width() {
        assert_eq!(
            lookup("total_dispatch_slots", Zen4).unwrap().scale,
            Some(6.0)
        );
        assert_eq!(
            lookup("total_dispatch_slots", Zen5).unwrap().scale,
            Some(8.0)
        );
        assert_eq!(lookup("clears-slots", IceLakeSp).unwrap().scale, Some(5.0));
        assert_eq!(Uarch::parse("Zen 4"), Ok(Zen4));
        assert_eq!(Uarch::parse("sapphire-rapids"), Ok(SapphireRapids));
        assert_eq!(Uarch::parse("icelakex"), Ok(IceLakeSp));
        assert!(
            Uarch::parse("pentium4")
                .unwrap_err()
                .to_string()
                .contains("zen5")
        );
        assert!(lookup("clears-slots", SapphireRapids).is_none());
    }
}
