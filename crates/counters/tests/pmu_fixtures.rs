//! `--events` resolution on saved PMU trees of real machines: every event the papers'
//! figures need resolves to the encoding computed by hand from the vendor's event code
//! and unit mask and the machine's `format/` files, or is reported absent for that CPU
//! with one line.

use std::fs;

use smtlab_counters::event_list::{Resolved, ResolvedEvent, resolve};
use smtlab_counters::pmu::{CpuId, PmuTree};
use smtlab_fixtures::{PMU_MACHINES, pmu_fixture};

fn tree(name: &str) -> PmuTree {
    let dir = pmu_fixture(name);
    let cpuinfo = fs::read_to_string(dir.join("cpuinfo")).unwrap();
    PmuTree::read(&dir.join("devices"), CpuId::from_cpuinfo(&cpuinfo))
}

fn event<'a>(r: &'a Resolved, name: &str) -> &'a ResolvedEvent {
    r.events
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("{name} not resolved: {:?}", r.unavailable))
}

/// `(name, config)` of every resolved event with one encoding on the core PMU (type 4).
fn core_configs(r: &Resolved, names: &[(&str, u64)]) {
    for &(name, config) in names {
        let e = event(r, name);
        assert_eq!(e.encodings.len(), 1, "{name}");
        assert_eq!(e.encodings[0].type_, 4, "{name}");
        assert_eq!(
            e.encodings[0].config, config,
            "{name}: {:#x} != {config:#x}",
            e.encodings[0].config
        );
        assert_eq!(e.cpus, None, "{name} counts per task");
    }
}

fn absent(r: &Resolved, name: &str, why: &str) {
    let u = r
        .unavailable
        .iter()
        .find(|u| u.name == name)
        .unwrap_or_else(|| panic!("{name} should be absent: {:?}", r.events));
    assert!(u.reason.contains(why), "{name}: {}", u.reason);
    assert!(!u.reason.contains('\n'));
}

const PAPERS: &str = "model,topdown,dram";

#[test]
fn every_alias_of_every_fixture_encodes() {
    for m in PMU_MACHINES {
        let t = tree(m);
        assert!(t.pmu("cpu").is_some(), "{m}");
        assert!(t.cpu.is_some(), "{m}");
        for p in &t.pmus {
            for a in &p.aliases {
                p.encode(&a.terms)
                    .unwrap_or_else(|e| panic!("{m} {}/{}: {e}", p.name, a.name));
            }
        }
        // Every item either resolves or says why not; nothing is an error.
        let r = resolve(PAPERS, &t).unwrap();
        assert!(!r.events.is_empty(), "{m}");
    }
}

#[test]
fn skylake_sp_model_events_slot_formula_and_imc() {
    let r = resolve(PAPERS, &tree("skylake-sp")).unwrap();
    core_configs(
        &r,
        &[
            ("l2-misses", 0x3f24),
            ("uops-issued", 0x010e),
            ("uops-retired", 0x02c2),
            // event 0xc3, umask 0x01, edge (bit 18), cmask 1 (bits 24-31).
            ("machine-clears", 0x0104_01c3),
            ("store-buffer-stalls", 0x08a2),
            ("4k-aliasing", 0x0107),
            // any=1 is bit 21: the core's cycles with SMT on, scale 2.
            ("topdown-total-slots", 0x20_003c),
            ("topdown-slots-issued", 0x010e),
            ("topdown-slots-retired", 0x02c2),
            ("topdown-fetch-bubbles", 0x019c),
            ("topdown-recovery-bubbles", 0x0120_030d),
        ],
    );
    assert_eq!(event(&r, "topdown-total-slots").scale, Some(2.0));
    // The model events are each opened alone (a group of six might never fit).
    let model: Vec<u32> = ["l2-misses", "uops-issued", "machine-clears", "4k-aliasing"]
        .iter()
        .map(|n| event(&r, n).group)
        .collect();
    assert!(
        model
            .iter()
            .all(|g| r.events.iter().filter(|e| e.group == *g).count() == 1)
    );
    assert!(event(&r, "l2-misses").source.contains("L2_RQSTS.MISS"));
    // The top-down events are one group; CAS counts count CPU-wide on each socket.
    let g = event(&r, "topdown-total-slots").group;
    assert!(r.events.iter().filter(|e| e.group == g).count() == 5);
    let read = event(&r, "cas_count_read");
    assert_eq!(read.encodings.len(), 6);
    assert!(read.encodings.iter().all(|e| e.config == 0x0304));
    assert_eq!(
        read.encodings.iter().map(|e| e.type_).collect::<Vec<_>>(),
        [14, 15, 16, 17, 18, 19]
    );
    assert_eq!(read.cpus, Some(vec![0, 20]));
    assert_eq!(read.scale, Some(6.103515625e-5));
    assert_eq!(read.unit.as_deref(), Some("MiB"));
    assert_eq!(event(&r, "cas_count_write").encodings[0].config, 0x0c04);
    // Only the Pentium 4's 64K aliasing is absent, with why.
    assert_eq!(r.unavailable.len(), 1, "{:?}", r.unavailable);
    absent(&r, "64k-aliasing", "Pentium 4");
}

#[test]
fn raw_terms_and_uncore_wildcards() {
    let t = tree("skylake-sp");
    let r = resolve(
        "cpu/event=0x3c,umask=0x1,cmask=1/,uncore_imc_0/cas_count_read/,uncore_imc/cas_count_write/u,cpu/cpu-cycles/",
        &t,
    )
    .unwrap();
    assert_eq!(r.events[0].encodings[0].config, 0x0100_013c);
    assert_eq!(r.events[0].source, "raw terms on cpu");
    let one = &r.events[1];
    assert_eq!(one.encodings.len(), 1);
    assert_eq!(one.encodings[0].pmu, "uncore_imc_0");
    assert_eq!(one.scale, Some(6.103515625e-5));
    assert_eq!(r.events[2].encodings.len(), 6);
    assert_eq!(r.events[2].mode, smtlab_model::counters::CountMode::User);
    assert_eq!(r.events[3].encodings[0].config, 0x3c);
    // A term the PMU's format lacks is a syntax error, not an absent event.
    let e = resolve("cpu/event=0x3c,bogus=1/", &t).unwrap_err();
    assert!(e.to_string().contains("unknown term `bogus`"), "{e}");
    let e = resolve("cpu/event=0x1ff/", &t).unwrap_err();
    assert!(e.to_string().contains("does not fit its 8 bits"), "{e}");
    // A PMU or alias the machine lacks: one line each.
    let r = resolve("amd_df/event=0x7/,uncore_imc_0/nope/,cycles", &t).unwrap();
    absent(&r, "amd_df/event=0x7/", "no PMU `amd_df`");
    absent(&r, "uncore_imc_0/nope/", "has no event `nope`");
}

#[test]
fn icelake_sp_and_sapphire_rapids_perf_metrics() {
    let metrics = [
        ("slots", 0x0400),
        ("topdown-retiring", 0x8000),
        ("topdown-bad-spec", 0x8100),
        ("topdown-fe-bound", 0x8200),
        ("topdown-be-bound", 0x8300),
    ];
    let icx = resolve(PAPERS, &tree("icelake-sp")).unwrap();
    core_configs(&icx, &metrics);
    core_configs(
        &icx,
        &[
            // Ice Lake-SP lists no L2_RQSTS.MISS: demand misses, umask 0x27.
            ("l2-misses", 0x2724),
            ("uops-issued", 0x010e),
            ("uops-retired", 0x02c2),
            ("machine-clears", 0x0104_01c3),
            ("store-buffer-stalls", 0x08a2),
            ("4k-aliasing", 0x0107),
        ],
    );
    assert!(
        event(&icx, "l2-misses")
            .source
            .contains("L2_RQSTS.ALL_DEMAND_MISS")
    );
    assert_eq!(event(&icx, "cas_count_read").encodings[0].config, 0x0f04);
    assert_eq!(event(&icx, "cas_count_write").encodings[0].config, 0x3004);
    assert!(
        resolve("topdown-total-slots", &tree("icelake-sp"))
            .unwrap()
            .events
            .is_empty()
    );

    let spr = resolve(PAPERS, &tree("sapphire-rapids")).unwrap();
    core_configs(&spr, &metrics);
    core_configs(
        &spr,
        &[
            ("uops-issued", 0x01ae),
            ("4k-aliasing", 0x0403),
            ("machine-clears", 0x0104_01c3),
        ],
    );
    let read = event(&spr, "cas_count_read");
    assert_eq!(read.encodings.len(), 8);
    assert_eq!(read.encodings[0].config, 0xcf05);
    assert_eq!(event(&spr, "cas_count_write").encodings[0].config, 0xf005);
    assert_eq!(read.cpus, Some(vec![0, 56]));
    // Level 2 is offered as an alias on Sapphire Rapids only.
    assert_eq!(
        resolve("topdown-mem-bound", &tree("sapphire-rapids"))
            .unwrap()
            .events[0]
            .encodings[0]
            .config,
        0x8700
    );
}

#[test]
fn zen3_lacks_dispatch_slots_and_byte_aliases() {
    let r = resolve(PAPERS, &tree("zen3")).unwrap();
    core_configs(
        &r,
        &[
            ("l2-misses", 0x0964),
            ("uops-retired", 0xc1),
            ("machine-clears", 0xc7),
            ("store-buffer-stalls", 0x04ae),
        ],
    );
    absent(&r, "uops-issued", "not offered on Zen 3");
    absent(&r, "4k-aliasing", "not offered on Zen 3");
    absent(
        &r,
        "topdown",
        "no top-down events for AMD family 0x19 model 0x1",
    );
    absent(&r, "dram", "this CPU has no amd_umc PMU");
    // DF events by raw terms: the 12-bit event select is split over bits 0-7, 32-35
    // and 59-60 (event 0x7 umask 0x38: local DRAM read beats of channel 0).
    let df = resolve("amd_df/event=0x07,umask=0x38/", &tree("zen3")).unwrap();
    assert_eq!(df.events[0].encodings[0].config, 0x3807);
    assert_eq!(df.events[0].cpus, Some(vec![0, 64]));
    let df = resolve("amd_df/event=0x1007/", &tree("zen3")).unwrap();
    assert_eq!(df.events[0].encodings[0].config, (1 << 59) | 0x07);
}

#[test]
fn zen4_dispatch_slots_and_wide_df_formats() {
    let r = resolve(PAPERS, &tree("zen4")).unwrap();
    core_configs(
        &r,
        &[
            ("l2-misses", 0x0964),
            ("uops-issued", 0x07aa),
            ("uops-retired", 0xc1),
            ("store-buffer-stalls", 0x04ae),
            ("total_dispatch_slots", 0x76),
            ("ex_ret_ops", 0xc1),
            ("de_src_op_disp.all", 0x07aa),
            // PMCx1A0: 0xa0 in bits 0-7 and 0x1 in bits 32-35.
            (
                "de_no_dispatch_per_slot.no_ops_from_frontend",
                0x1_0000_01a0,
            ),
            ("de_no_dispatch_per_slot.backend_stalls", 0x1_0000_1ea0),
            ("de_no_dispatch_per_slot.smt_contention", 0x1_0000_60a0),
        ],
    );
    assert_eq!(event(&r, "total_dispatch_slots").scale, Some(6.0));
    absent(&r, "machine-clears", "not offered on Zen 4");
    // DRAM from the four UMCs: event 0x0a in bits 0-7, the read/write mask in 8-9.
    for (name, config) in [("umc_cas_cmd.rd", 0x10a), ("umc_cas_cmd.wr", 0x20a)] {
        let e = event(&r, name);
        assert_eq!(e.encodings.len(), 4, "{name}: one per amd_umc PMU");
        assert!(e.encodings.iter().all(|x| x.config == config), "{name}");
        assert!(e.cpus.is_some(), "{name} counts CPU-wide");
    }
    // Zen 4's DF umask is 12 bits: 8-15 then 24-27.
    let df = resolve("amd_df/event=0x107,umask=0x138/", &tree("zen4")).unwrap();
    assert_eq!(
        df.events[0].encodings[0].config,
        (1 << 32) | (1 << 24) | 0x3807
    );
    // The generic names go to the generic set; sysfs aliases of the core PMU resolve.
    let g = resolve("cycles,cache-misses", &tree("zen4")).unwrap();
    assert_eq!(g.generic.len(), 1);
    assert_eq!(g.events[0].encodings[0].config, 0x0964);
}

#[test]
fn zen5_store_queue_stalls_eight_wide_slots_and_twelve_umcs() {
    let r = resolve(PAPERS, &tree("zen5")).unwrap();
    core_configs(
        &r,
        &[
            ("l2-misses", 0x0964),
            ("uops-issued", 0x07aa),
            ("uops-retired", 0xc1),
            ("store-buffer-stalls", 0x04ae),
            ("total_dispatch_slots", 0x76),
            ("de_no_dispatch_per_slot.smt_contention", 0x1_0000_60a0),
        ],
    );
    assert!(
        event(&r, "store-buffer-stalls")
            .source
            .contains("Zen 5: DE_DISPATCH_STALL_CYCLE_DYNAMIC_TOKENS_PART1")
    );
    assert_eq!(event(&r, "total_dispatch_slots").scale, Some(8.0));
    absent(&r, "machine-clears", "not offered on Zen 5");
    absent(&r, "4k-aliasing", "not offered on Zen 5");
    absent(&r, "64k-aliasing", "Pentium 4");
    // Every paper event is either counted or absent with one line.
    for name in smtlab_counters::model_events::PAPER_EVENTS {
        assert!(
            r.events.iter().any(|e| e.name == name) || r.unavailable.iter().any(|u| u.name == name),
            "{name}"
        );
    }
    // `dram`: read and write CAS commands summed over the twelve UMCs.
    assert_eq!(event(&r, "umc_cas_cmd.rd").encodings.len(), 12);
    assert_eq!(event(&r, "umc_cas_cmd.wr").encodings[11].config, 0x20a);
    let umc = resolve("amd_umc_11/event=0x14,rdwrmask=0x1/", &tree("zen5")).unwrap();
    assert_eq!(umc.events[0].encodings[0].config, 0x0114);
    assert_eq!(umc.events[0].encodings[0].type_, 25);
    assert_eq!(umc.events[0].cpus, Some(vec![0]));
}

/// The built-in rows of Zen 2 and Granite Rapids, encoded through the core formats of
/// the nearest fixture of the same PMU layout (Zen 3's AMD core PMU, Sapphire Rapids'
/// Intel one): the table's terms fit those formats and give the vendor's codes.
#[test]
fn zen2_and_granite_rapids_rows_encode_on_their_pmu_layout() {
    use smtlab_counters::model_events::{PAPER_EVENTS, Uarch, lookup};
    let cases = [
        (
            Uarch::Zen2,
            "zen3",
            &[
                ("l2-misses", 0x0964u64),
                ("uops-issued", 0xffaa),
                ("uops-retired", 0xc1),
                ("machine-clears", 0xc7),
                ("store-buffer-stalls", 0x04ae),
            ][..],
        ),
        (
            Uarch::GraniteRapids,
            "sapphire-rapids",
            &[
                ("l2-misses", 0x3f24),
                ("uops-issued", 0x01ae),
                ("uops-retired", 0x02c2),
                ("machine-clears", 0x0104_01c3),
                ("4k-aliasing", 0x0403),
            ][..],
        ),
    ];
    for (uarch, fixture, expect) in cases {
        let t = tree(fixture);
        let cpu = t.pmu("cpu").unwrap();
        for &(name, config) in expect {
            let row = lookup(name, uarch).unwrap_or_else(|| panic!("{name} on {uarch:?}"));
            let enc = cpu.encode(row.terms).unwrap();
            assert_eq!(enc.config, config, "{name} on {uarch:?}");
        }
        let counted: Vec<&str> = expect.iter().map(|(n, _)| *n).collect();
        for name in PAPER_EVENTS {
            if !counted.contains(&name) {
                assert!(lookup(name, uarch).is_none(), "{name} on {uarch:?}");
            }
        }
    }
}

/// `smt` counts the two clocks of the both-threads share in one group (Skylake-SP's
/// core clocks with any=1, halved); `topdown` on Ice Lake-SP adds the perf-metric
/// corrections, each in a group of its own beside the slots group.
#[test]
fn smt_share_clocks_and_topdown_corrections() {
    let skx = resolve("smt", &tree("skylake-sp")).unwrap();
    // event 0x3c, umask 0x01, any (bit 21); and umask 0x02.
    core_configs(
        &skx,
        &[
            ("core-ref-clocks", 0x20_013c),
            ("one-thread-active", 0x023c),
        ],
    );
    assert_eq!(event(&skx, "core-ref-clocks").scale, Some(0.5));
    assert_eq!(
        event(&skx, "core-ref-clocks").group,
        event(&skx, "one-thread-active").group
    );
    let icx = resolve("smt,topdown", &tree("icelake-sp")).unwrap();
    // event 0x0d umask 0x10; event 0x0d umask 0x01 with edge (bit 18) and cmask 1.
    core_configs(
        &icx,
        &[
            ("core-ref-clocks", 0x083c),
            ("uop-drop-slots", 0x100d),
            ("clears-slots", 0x0104_010d),
        ],
    );
    assert_eq!(event(&icx, "clears-slots").scale, Some(5.0));
    let slots_group = event(&icx, "slots").group;
    for n in ["uop-drop-slots", "clears-slots"] {
        assert_ne!(
            event(&icx, n).group,
            slots_group,
            "{n} apart from the slots group"
        );
    }
    // The instruction mix, each event alone.
    let mix = resolve("mix", &tree("icelake-sp")).unwrap();
    core_configs(
        &mix,
        &[
            ("loads", 0x81d0),
            ("branches-conditional", 0x11c4),
            ("calls", 0x02c4),
        ],
    );
    assert_eq!(mix.events.len(), 7);
    let spr = resolve("topdown", &tree("sapphire-rapids")).unwrap();
    core_configs(&spr, &[("uop-drop-slots", 0x10ad)]);
    assert!(spr.events.iter().all(|e| e.name != "clears-slots"));
}

/// `topdown` counts level 2's back-end memory bound live where the PMU has its events:
/// Sapphire Rapids' `topdown-mem-bound` perf metric (and `topdown-br-mispredict`, the
/// CPI stack's split) in the slots group; on Skylake-SP and Ice Lake-SP the stall-cycle
/// events, on Zen 4 and 5 the retirement-stall events, each alone. Encodings by hand
/// from the kernel's lists: event | umask << 8 | cmask << 24.
#[test]
fn topdown_counts_backend_memory_bound_live() {
    let spr = resolve("topdown", &tree("sapphire-rapids")).unwrap();
    let slots = event(&spr, "slots").group;
    for n in ["topdown-mem-bound", "topdown-br-mispredict"] {
        assert_eq!(event(&spr, n).group, slots, "{n} in the slots group");
    }
    assert!(
        spr.events
            .iter()
            .all(|e| !e.name.starts_with("cycle_activity"))
    );
    for (machine, bound_on_stores) in [("skylake-sp", 0x40a6), ("icelake-sp", 0x0200_40a6)] {
        let r = resolve("topdown", &tree(machine)).unwrap();
        core_configs(
            &r,
            &[
                ("cycle_activity.stalls_mem_any", 0x1400_14a3),
                ("cycle_activity.stalls_total", 0x0400_04a3),
                ("exe_activity.bound_on_stores", bound_on_stores),
                ("exe_activity.1_ports_util", 0x02a6),
                ("exe_activity.2_ports_util", 0x04a6),
            ],
        );
        let level1 = r
            .events
            .iter()
            .find(|e| e.name == "slots" || e.name == "topdown-total-slots")
            .expect("level 1")
            .group;
        let groups: Vec<u32> = smtlab_model::counters::topdown::INTEL_MEMORY_BOUND
            .iter()
            .map(|n| event(&r, n).group)
            .collect();
        assert!(!groups.contains(&level1), "{machine}: apart from level 1");
        let mut unique = groups.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), groups.len(), "{machine}: each alone");
    }
    for machine in ["zen4", "zen5"] {
        let r = resolve("topdown", &tree(machine)).unwrap();
        core_configs(
            &r,
            &[
                ("ex_no_retire.not_complete", 0x02d6),
                ("ex_no_retire.load_not_complete", 0xa2d6),
            ],
        );
    }
    // Zen 3 has no top-down at all, and so no level 2.
    let zen3 = resolve("topdown", &tree("zen3")).unwrap();
    assert!(
        zen3.events
            .iter()
            .all(|e| !e.name.starts_with("ex_no_retire"))
    );
}
