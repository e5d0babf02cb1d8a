//! A realistic, deterministic run for tests: four measured cells (rates and latencies,
//! pinned and unpinned, converged and not, one with a single sample), series, metrics,
//! a skipped cell, and every `Option` both `None` and `Some` somewhere.
//!
//! Shared by these integration tests and, `#[path]`-included, by the report crate's
//! exporter tests and the CLI's rendering tests, so it names only `smtlab_model`.

use std::collections::BTreeMap;

use smtlab_model::counters::derived::Work;
use smtlab_model::counters::os_time::{CpuTicks, CpuTicksOf, OsTimeInterval, OsTimeSeries};
use smtlab_model::counters::{
    CellCounters, CountMode, CounterEvent, CounterTarget, CounterValues, Reading, UnavailableEvent,
};
use smtlab_model::result::{Calibration, CalibrationStep, Overheads, Round, StopReason, Warmup};
use smtlab_model::stats::summarize;
use smtlab_model::{
    Cache, CacheType, CellKey, CellRecord, CellResult, Core, CoreOrder, CpuOrder, Direction,
    Environment, NumaNode, Package, RESULTS_SCHEMA, ResolvedPlacement, RunConfig, RunMeta,
    RunResults, RunStatus, SampleRecord, SkippedCell, SmtInfo, TOPOLOGY_SCHEMA, Topology,
};

fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Two cores with two threads each: CPUs 0 and 2 share core 0, 1 and 3 core 1.
pub fn topology() -> Topology {
    let core = |id, cpus: &[u32]| Core {
        id,
        cpus: cpus.iter().copied().collect(),
        die_id: Some(0),
        cluster_id: None,
        kind: None,
    };
    Topology {
        schema: TOPOLOGY_SCHEMA.into(),
        root: "/".into(),
        cpus: (0..4).collect(),
        offline_cpus: Default::default(),
        allowed_cpus: None,
        packages: vec![Package {
            id: Some(0),
            cpus: (0..4).collect(),
            cores: vec![core(0, &[0, 2]), core(1, &[1, 3])],
        }],
        cores_without_package: vec![],
        numa_nodes: vec![NumaNode {
            id: 0,
            cpus: (0..4).collect(),
            memory_bytes: Some(16 << 30),
        }],
        smt: SmtInfo {
            threads_per_core_min: 2,
            threads_per_core_max: 2,
            control: Some("on".into()),
            active: Some(true),
        },
        caches: vec![Cache {
            level: 3,
            cache_type: CacheType::Unified,
            size_bytes: Some(8 << 20),
            line_bytes: Some(64),
            ways: None,
            cpus: (0..4).collect(),
        }],
        tlbs: vec![],
        core_kinds: vec![],
        cpu_model: Some("Example CPU @ 3.00GHz".into()),
        vendor: Some("GenuineIntel".into()),
        virtualization: None,
        uniprocessor_kernel: false,
    }
}

fn placement(name: &str, spec: &str, cpus: &[u32], cores: u32, tpc: u32) -> ResolvedPlacement {
    ResolvedPlacement {
        name: name.into(),
        spec: spec.into(),
        cpus: cpus.to_vec(),
        cores,
        threads_per_core: tpc,
        packages: u32::from(!cpus.is_empty()),
        core_order: if name.ends_with("/scatter") {
            CoreOrder::Scatter
        } else {
            CoreOrder::Compact
        },
        cpu_order: CpuOrder::Spread,
        core_kinds: vec![],
    }
}

struct CellSpec<'a> {
    benchmark: &'a str,
    group: &'a str,
    unit: &'a str,
    direction: Direction,
    params: &'a [(&'a str, &'a str)],
    spec: &'a str,
    placement: ResolvedPlacement,
    values: &'a [f64],
}

fn cell(c: CellSpec<'_>, config: &RunConfig) -> CellRecord {
    let threads = c.placement.cpus.len().max(1);
    let samples: Vec<SampleRecord> = c
        .values
        .iter()
        .enumerate()
        .map(|(i, &value)| SampleRecord {
            value,
            iterations: 1000,
            elapsed_ns: 2_000_000 + 1_337 * i as u64,
            work: 1000.0 * threads as f64,
            cpu_ns: None,
            start_spread_ns: None,
            cpus: c.placement.cpus.clone(),
            metrics: BTreeMap::new(),
        })
        .collect();
    let summary = summarize(c.values).expect("fixture cells have samples");
    CellRecord {
        benchmark: c.benchmark.into(),
        group: c.group.into(),
        unit: c.unit.into(),
        direction: c.direction,
        params: params(c.params),
        conditions: Default::default(),
        placement_spec: c.spec.into(),
        placement: c.placement,
        result: CellResult {
            iterations: 1000,
            calibration: Calibration {
                iterations: 1000,
                fixed: false,
                tried: vec![
                    CalibrationStep {
                        iterations: 10,
                        elapsed_ns: 20_417,
                    },
                    CalibrationStep {
                        iterations: 1000,
                        elapsed_ns: 2_001_113,
                    },
                ],
                linear: Some(true),
                linearity_ratio: Some(1.003_141_592_653_589_8),
            },
            warmup: Warmup {
                samples: 3,
                elapsed_ns: 6_000_123,
            },
            clock_cost_ns: 18.7,
            loop_cost_ns_per_iter: 0.312_5,
            subtracted_ns_per_sample: 331.1,
            samples,
            summary,
            converged: true,
            stop_reason: StopReason::Converged,
            cpu_rate: None,
            series: BTreeMap::new(),
            start_spread_ns: None,
            wall_ns: 61_234_567,
            config: config.clone(),
            at_limit: None,
            rounds: Vec::new(),
            disturbance: None,
        },
        counters: None,
    }
}

/// Software counts only (no PMU), /proc/stat time in two intervals, syscalls skipped:
/// what `--counters` records on a KVM guest.
pub fn counters() -> CellCounters {
    let mut v = CounterValues::new(CounterTarget::Thread {
        tid: 0,
        inherit: true,
    });
    v.set(
        CounterEvent::TaskClock,
        CountMode::All,
        Reading::exact(10_123_456),
    );
    v.set(
        CounterEvent::ContextSwitches,
        CountMode::All,
        Reading::exact(3),
    );
    v.set(
        CounterEvent::CpuMigrations,
        CountMode::All,
        Reading::exact(0),
    );
    v.set(
        CounterEvent::PageFaults,
        CountMode::User,
        Reading::exact(17),
    );
    v.set(
        CounterEvent::PageFaults,
        CountMode::Kernel,
        Reading::new(2, 1_000, 500),
    );
    v.unavailable.push(UnavailableEvent {
        event: CounterEvent::Cycles,
        mode: CountMode::User,
        reason: "not supported on this machine (ENOENT)".into(),
    });
    let mut c = CellCounters::new(
        "measured samples (calibration and warm-up excluded)",
        v,
        Some(Work {
            amount: 5.0 * 1_073_741_824.0,
            unit: "byte".into(),
        }),
    );
    c.hardware_unavailable = Some(
        "hardware counters not supported: this KVM guest exposes no PMU (cycles: ENOENT); software events only"
            .into(),
    );
    let ticks = |user, system, idle| CpuTicksOf {
        cpu: 0,
        ticks: CpuTicks {
            user,
            system,
            idle,
            ..CpuTicks::default()
        },
    };
    c.os_time = Some(OsTimeSeries {
        user_hz: 100,
        interval_ns: 100_000_000,
        cpus: [0].into_iter().collect(),
        intervals: vec![
            OsTimeInterval {
                start_ns: 0,
                end_ns: 100_000_000,
                per_cpu: vec![ticks(4, 5, 1)],
            },
            OsTimeInterval {
                start_ns: 100_000_000,
                end_ns: 150_000_000,
                per_cpu: vec![ticks(5, 0, 0)],
            },
        ],
    });
    c.steady_from_ns = Some(90_000_000);
    c.syscalls_unavailable = Some("tracefs is not mounted".into());
    c.kernel_time_unavailable = Some("tracefs is not mounted".into());
    c
}

/// The whole run, stored under `run_id`.
pub fn results(run_id: i64) -> RunResults {
    let config = RunConfig {
        known_overheads: Some(Overheads {
            clock_cost_ns: 18.7,
            loop_cost_ns_per_iter: 0.312_5,
        }),
        ..RunConfig::quick()
    };

    // 1. A bandwidth on one thread, with CPU time and so a CPU rate.
    let mut read1 = cell(
        CellSpec {
            benchmark: "mem-read",
            group: "memory",
            unit: "GB/s",
            direction: Direction::Higher,
            params: &[("size", "1GiB")],
            spec: "1c1t",
            placement: placement("1c1t", "1c1t", &[0], 1, 1),
            values: &[12.345_678_901_234_567, 12.1, 0.1 + 0.2 + 12.0, 12.4, 12.25],
        },
        &config,
    );
    for s in &mut read1.result.samples {
        s.cpu_ns = Some(s.elapsed_ns - 1_000);
    }
    read1.result.cpu_rate = summarize(&[12.4, 12.2, 12.35, 12.5, 12.3]);
    read1.counters = Some(counters());

    // 2. The same on two siblings: start spread, a metric, a scatter-free 1c2t.
    let mut read2 = cell(
        CellSpec {
            benchmark: "mem-read",
            group: "memory",
            unit: "GB/s",
            direction: Direction::Higher,
            params: &[("size", "1GiB")],
            spec: "2T",
            placement: placement("1c2t", "2T", &[0, 2], 1, 2),
            values: &[14.0, 14.2, 13.9, 14.1],
        },
        &config,
    );
    for (i, s) in read2.result.samples.iter_mut().enumerate() {
        s.cpu_ns = Some(2 * s.elapsed_ns);
        s.start_spread_ns = Some(900 + 10 * i as u64);
        s.metrics
            .insert("bytes_per_cycle".into(), 1.5 + i as f64 / 8.0);
    }
    read2.result.cpu_rate = summarize(&[7.0, 7.1, 6.95, 7.05]);
    // Measured in two rounds (`--repeat 2`), each calibrated anew.
    read2.result.rounds = vec![
        Round {
            summary: summarize(&[14.0, 14.2]).expect("two values"),
            converged: true,
            iterations: 1000,
            wall_ns: 30_000_001,
        },
        Round {
            summary: summarize(&[13.9, 14.1]).expect("two values"),
            converged: false,
            iterations: 990,
            wall_ns: 31_234_566,
        },
    ];
    read2.result.start_spread_ns = summarize(&[900.0, 910.0, 920.0, 930.0]);

    // 3. A latency, unpinned, with series and per-sample metrics, not converged, fixed
    //    iterations (no linearity check).
    let mut create = cell(
        CellSpec {
            benchmark: "pthread-create",
            group: "threads",
            unit: "ns",
            direction: Direction::Lower,
            params: &[("detached", "false"), ("count", "4")],
            spec: "os",
            placement: placement("os", "os", &[], 0, 0),
            values: &[15_000.5, 22_000.25, 17_500.0],
        },
        &config,
    );
    for (i, s) in create.result.samples.iter_mut().enumerate() {
        s.metrics.insert("wake_ns".into(), 4_000.0 + i as f64);
        s.metrics.insert("call_ns".into(), 11_000.125);
    }
    create.result.series.insert(
        "call_ns".into(),
        (0..40).map(|i| 10_000.0 + f64::from(i) * 0.1).collect(),
    );
    create
        .result
        .series
        .insert("start_ns".into(), vec![3.5e4, 3.25e4, 1e-3]);
    create.result.converged = false;
    create.result.stop_reason = StopReason::MaxSamples;
    create.result.calibration = Calibration {
        iterations: 1000,
        fixed: true,
        tried: vec![],
        linear: None,
        linearity_ratio: None,
    };

    // 4. One sample only (the time budget ran out): spread is unknown.
    let mut syscall = cell(
        CellSpec {
            benchmark: "syscall",
            group: "os",
            unit: "ns",
            direction: Direction::Lower,
            params: &[],
            spec: "2c1t/scatter",
            placement: placement("2c1t/scatter", "2c1t/scatter", &[0, 1], 2, 1),
            values: &[87.5],
        },
        &config,
    );
    syscall.result.converged = false;
    syscall.result.stop_reason = StopReason::TimeBudget;

    let cells = vec![read1, read2, create, syscall];
    let skipped = vec![SkippedCell {
        key: CellKey {
            benchmark: "mem-read".into(),
            params: params(&[("size", "1GiB")]),
            conditions: Default::default(),
            placement: "4c2t".into(),
        },
        reason: "4c2t needs 4 cores with 2 threads each; this machine has 2 cores".into(),
    }];
    let mut plan: Vec<CellKey> = cells.iter().map(CellRecord::key).collect();
    plan.insert(2, skipped[0].key.clone());

    RunResults {
        schema: RESULTS_SCHEMA.into(),
        run: RunMeta {
            id: run_id,
            started_unix_s: 1_790_000_000,
            finished_unix_s: Some(1_790_000_042),
            status: RunStatus::Finished,
            command_line: vec!["smtlab".into(), "run".into(), "--quick".into()],
            suite: Some("quick".into()),
            environment: Environment {
                tool_version: "0.1.0".into(),
                git_commit: Some("0123abcd".into()),
                hostname: Some("lab-1".into()),
                kernel: Some("6.12.0".into()),
                cpu_model: Some("Example CPU @ 3.00GHz".into()),
                microcode: None,
                smt_control: Some("on".into()),
                virtualization: None,
                governor: Some("performance".into()),
                boost: None,
                clocksource: Some("tsc".into()),
                perf_event_paranoid: Some(2),
                online_cpus: "0-3".into(),
                host_id: None,
                core_clock_ghz: None,
                cpu_handoff: Vec::new(),
            },
            topology: topology(),
            config,
            plan,
            notes: vec!["hardware counters: not supported (KVM guest without a PMU)".into()],
        },
        cells,
        skipped,
        benchmarks: Vec::new(),
    }
}
