//! The counters section's ratio, top-down and DRAM bandwidth figures, from recorded
//! counts of three placements (1c1t, 1c2t, 2c1t) of one memory benchmark: a snapshot
//! of the markup, and the figures checked against hand computation.

mod common;

use common::{cell, placement, run};
use smtlab_model::Direction;
use smtlab_model::counters::derived::Work;
use smtlab_model::counters::named::{EventEncoding, NamedReading, NamedUnavailable};
use smtlab_model::counters::{
    CellCounters, CountMode, CounterEvent as E, CounterTarget, CounterValues, Reading,
};

fn named(
    name: &str,
    raw: u64,
    scale: Option<f64>,
    unit: Option<&str>,
    scope: &str,
) -> NamedReading {
    NamedReading {
        name: name.into(),
        source: "sysfs alias of cpu".into(),
        encodings: vec![EventEncoding {
            pmu: "cpu".into(),
            type_: 4,
            config: 0x8000,
            config1: 0,
            config2: 0,
        }],
        mode: CountMode::All,
        scale,
        unit: unit.map(str::to_string),
        scope: scope.into(),
        // One second enabled; the top-down events ran half of it (multiplexed x2).
        reading: if name.starts_with("cas") {
            Reading::new(raw, 1_000_000_000, 1_000_000_000)
        } else {
            Reading::new(raw, 1_000_000_000, 500_000_000)
        },
        parts: 1,
    }
}

/// Counts of one placement: `k` stretches CPI (cycles x k), the top-down split and
/// the CAS counts (read CAS per second = 25e6 x k, so k x 1.6 GB/s).
fn counters(k: u64, fe: u64, be: u64) -> CellCounters {
    let mut v = CounterValues::new(CounterTarget::Thread {
        tid: 0,
        inherit: true,
    });
    for (e, n) in [
        (E::Cycles, 3_000_000 * k),
        (E::Instructions, 2_000_000),
        (E::L1dReads, 800_000),
        (E::L1dReadMisses, 40_000 * k),
        (E::L1iReads, 500_000),
        (E::L1iReadMisses, 10_000),
        (E::LlcReads, 40_000),
        (E::LlcReadMisses, 10_000 * k),
        (E::DtlbReads, 800_000),
        (E::DtlbReadMisses, 2_000),
        (E::ItlbReads, 1_000_000),
        (E::ItlbReadMisses, 1_000),
        (E::Branches, 400_000),
        (E::BranchMisses, 8_000),
        (E::TaskClock, 1_000_000_000),
    ] {
        v.set(e, CountMode::All, Reading::exact(n));
    }
    let slots = 1000;
    let ret = 400;
    let bad = slots - ret - fe - be;
    for (n, x) in [
        ("slots", slots),
        ("topdown-retiring", ret),
        ("topdown-bad-spec", bad),
        ("topdown-fe-bound", fe),
        ("topdown-be-bound", be),
    ] {
        v.named
            .push(named(n, x, None, None, "calling thread and children"));
    }
    for (n, x) in [
        ("cas_count_read", 25_000_000 * k),
        ("cas_count_write", 5_000_000),
    ] {
        v.named.push(named(
            n,
            x,
            Some(6.103515625e-5),
            Some("MiB"),
            "cpus 0,20 (CPU-wide)",
        ));
    }
    v.named_unavailable.push(NamedUnavailable {
        name: "4k-aliasing".into(),
        reason: "not offered on Zen 4 (AMD family 0x19 model 0x11)".into(),
    });
    CellCounters::new(
        "measured samples",
        v,
        Some(Work {
            amount: 1e6,
            unit: "byte".into(),
        }),
    )
}

fn results() -> smtlab_model::RunResults {
    let mut cells = Vec::new();
    for (p, k, fe, be, mean) in [
        ("1c1t", 1, 200, 250, 10.0),
        ("1c2t", 2, 150, 400, 14.0),
        ("2c1t", 1, 200, 260, 19.0),
    ] {
        let mut c = cell(
            "mem-read",
            "memory",
            "GB/s",
            Direction::Higher,
            &[("size", "64M")],
            placement(p),
            &[mean * 0.99, mean, mean * 1.01],
        );
        c.counters = Some(counters(k, fe, be));
        // 8 channels x 2400 MT/s x 8 bytes / 8 (a share of a socket): 19.2 GB/s.
        c.result.config.dram_peak_gb_per_s = Some(19.2);
        cells.push(c);
    }
    run(cells, vec![])
}

fn counters_section(page: &str) -> &str {
    let start = page
        .find("<section id=\"counters\">")
        .expect("counters section");
    let end = page[start..].find("</section>").unwrap() + start;
    &page[start..end]
}

#[test]
fn html_has_ratio_topdown_and_bandwidth_figures() {
    let page = smtlab_report::html(&results());
    let s = counters_section(&page);
    // CPI 1.5 on 1c1t and 3.0 on 1c2t: +100%; IPC halves.
    assert!(s.contains("1c2t/1c1t +100.0%"), "CPI change");
    assert!(s.contains("1c2t/1c1t -50.0%"), "IPC change");
    // Top-down on 1c2t vs 1c1t: front-end 20% -> 15%, back-end 25% -> 40%.
    assert!(
        s.contains("front-end bound -5.0 pt, back-end bound +15.0 pt"),
        "top-down moves"
    );
    // DRAM: (25e6 + 5e6) x 64 B over 1 s = 1.92 GB/s on 1c1t, (50e6 + 5e6) x 64 = 3.52.
    assert!(s.contains(">1.920<") && s.contains(">3.520<"), "bandwidth");
    assert!(s.contains("Correlation of throughput and DRAM bandwidth"));
    // 1.92 of 19.2 GB/s.
    assert!(s.contains(">10.0%<"), "share of peak");
    assert!(s.contains("4k-aliasing"), "absent event listed");
    assert!(s.contains("x2.00"), "multiplexing shown");
    insta::assert_snapshot!("html_counter_ratios", s);
}

#[test]
fn json_and_terminal_carry_the_same_figures() {
    let r = results();
    let groups = smtlab_report::counter_ratios::groups(&r);
    assert_eq!(groups.len(), 1);
    let g = &groups[0];
    let one = &g.placements[0].1;
    assert_eq!(one.get("cpi").unwrap().value, 1.5);
    assert_eq!(one.get("llc_miss_rate").unwrap().value, 0.25);
    assert_eq!(one.get("instructions_per_unit").unwrap().value, 2.0);
    let t = one.topdown.as_ref().unwrap();
    assert_eq!((t.retiring, t.frontend_bound), (0.4, 0.2));
    let line = smtlab_report::counters::line(
        r.cells[1].counters.as_ref().unwrap(),
        &smtlab_model::counters::cpi_stack::Latencies::assumed(),
    );
    assert!(
        line.contains("top-down level 1 (Intel slots and perf metrics; thread)"),
        "{line}"
    );
    assert!(line.contains("DRAM 3.520 GB/s"), "{line}");
    assert!(line.contains("LLC miss rate 50.0%"), "{line}");
}
