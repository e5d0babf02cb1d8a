//! Hand-built results for the tests and the demo page: a made-up machine with one
//! package of 4 cores x 2 threads, siblings numbered next to each other (core i holds
//! CPUs 2i and 2i+1), and cells of every kind the report draws. Numbers are invented
//! from a deterministic generator; the run's notes say so, and so does the page.
#![allow(dead_code)]

use std::collections::BTreeMap;

use smtlab_model::result::{Calibration, StopReason, Warmup};
use smtlab_model::{BenchInfo, Core, CpuSet, Package, ReportSection, ValueKind};
use smtlab_model::{
    Cache, CacheType, CellKey, CellRecord, CellResult, CoreOrder, CpuOrder, Direction, Environment,
    NumaNode, RESULTS_SCHEMA, ResolvedPlacement, RunConfig, RunMeta, RunResults, RunStatus,
    SampleRecord, SkippedCell, SmtInfo, TOPOLOGY_SCHEMA, Topology, stats,
};

/// A small deterministic generator (64-bit LCG, top bits), so snapshots are stable.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1))
    }

    pub fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// `n` values around `mean` with relative spread `rel`.
    pub fn around(&mut self, mean: f64, rel: f64, n: usize) -> Vec<f64> {
        (0..n).map(|_| mean * (1.0 + rel * self.normal())).collect()
    }

    /// Log-normal with the given median and log-spread, plus a rare tail up to 30x.
    pub fn latency(&mut self, median: f64, sigma: f64) -> f64 {
        let base = median * (sigma * self.normal()).exp();
        if self.uniform() < 0.01 {
            base * (3.0 + 27.0 * self.uniform())
        } else {
            base
        }
    }
}

fn set(cpus: &[u32]) -> CpuSet {
    cpus.iter().copied().collect()
}

pub fn topology() -> Topology {
    let cores = (0..4)
        .map(|i| Core {
            id: i,
            cpus: set(&[2 * i, 2 * i + 1]),
            die_id: None,
            cluster_id: None,
            kind: None,
        })
        .collect();
    let mut caches = Vec::new();
    for i in 0..4u32 {
        for (level, ty, size) in [
            (1, CacheType::Data, 48 << 10),
            (1, CacheType::Instruction, 32 << 10),
            (2, CacheType::Unified, 2 << 20),
        ] {
            caches.push(Cache {
                level,
                cache_type: ty,
                size_bytes: Some(size),
                line_bytes: Some(64),
                ways: None,
                cpus: set(&[2 * i, 2 * i + 1]),
            });
        }
    }
    caches.push(Cache {
        level: 3,
        cache_type: CacheType::Unified,
        size_bytes: Some(16 << 20),
        line_bytes: Some(64),
        ways: None,
        cpus: (0..8).collect(),
    });
    Topology {
        schema: TOPOLOGY_SCHEMA.into(),
        root: "/".into(),
        cpus: (0..8).collect(),
        offline_cpus: CpuSet::new(),
        allowed_cpus: None,
        packages: vec![Package {
            id: Some(0),
            cpus: (0..8).collect(),
            cores,
        }],
        cores_without_package: vec![],
        numa_nodes: vec![NumaNode {
            id: 0,
            cpus: (0..8).collect(),
            memory_bytes: Some(32 << 30),
        }],
        smt: SmtInfo {
            threads_per_core_min: 2,
            threads_per_core_max: 2,
            control: Some("on".into()),
            active: Some(true),
        },
        caches,
        tlbs: vec![],
        core_kinds: vec![],
        cpu_model: Some("Demo CPU 4C/8T @ 3.0GHz".into()),
        vendor: Some("GenuineIntel".into()),
        virtualization: None,
        uniprocessor_kernel: false,
    }
}

/// A placement of the demo machine by name, with the CPUs the placement crate would
/// choose (spread order: first threads of every core, then second threads).
pub fn placement(name: &str) -> ResolvedPlacement {
    let (cpus, cores, tpc, cpu_order): (Vec<u32>, u32, u32, CpuOrder) = match name {
        "1c1t" => (vec![0], 1, 1, CpuOrder::Spread),
        "1c2t" => (vec![0, 1], 1, 2, CpuOrder::Spread),
        "2c1t" => (vec![0, 2], 2, 1, CpuOrder::Spread),
        "2c2t" => (vec![0, 2, 1, 3], 2, 2, CpuOrder::Spread),
        "cores" => (vec![0, 2, 4, 6], 4, 1, CpuOrder::Spread),
        "all" => (vec![0, 2, 4, 6, 1, 3, 5, 7], 4, 2, CpuOrder::Spread),
        "all/linear" => ((0..8).collect(), 4, 2, CpuOrder::Linear),
        other => panic!("no demo placement {other}"),
    };
    ResolvedPlacement {
        name: name.into(),
        spec: name.into(),
        cpus,
        cores,
        threads_per_core: tpc,
        packages: 1,
        core_order: CoreOrder::Compact,
        cpu_order,
        core_kinds: vec![],
    }
}

/// A measured cell from its samples; everything else plausible and fixed.
pub fn cell(
    bench: &str,
    group: &str,
    unit: &str,
    direction: Direction,
    params: &[(&str, &str)],
    placement: ResolvedPlacement,
    samples: &[f64],
) -> CellRecord {
    let summary = stats::summarize(samples).expect("a cell needs samples");
    let converged = summary.ci95_rel <= 0.02;
    let records = samples
        .iter()
        .map(|&v| SampleRecord {
            value: v,
            iterations: 1000,
            elapsed_ns: 10_000_000,
            work: 1000.0,
            cpu_ns: None,
            start_spread_ns: None,
            cpus: placement.cpus.clone(),
            metrics: BTreeMap::new(),
        })
        .collect();
    // Pairs may name a condition by its flat name (`smt=on`), as a stored key does.
    let mut params: BTreeMap<String, String> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let conditions = smtlab_model::keys::Conditions::take_from(&mut params);
    CellRecord {
        benchmark: bench.into(),
        group: group.into(),
        unit: unit.into(),
        direction,
        params,
        conditions,
        placement_spec: placement.name.clone(),
        placement,
        result: CellResult {
            iterations: 1000,
            calibration: Calibration {
                iterations: 1000,
                fixed: false,
                tried: vec![],
                linear: Some(true),
                linearity_ratio: Some(1.01),
            },
            warmup: Warmup {
                samples: 2,
                elapsed_ns: 20_000_000,
            },
            clock_cost_ns: 20.0,
            loop_cost_ns_per_iter: 0.3,
            subtracted_ns_per_sample: 0.0,
            samples: records,
            summary,
            converged,
            stop_reason: if converged {
                StopReason::Converged
            } else {
                StopReason::MaxSamples
            },
            cpu_rate: None,
            series: BTreeMap::new(),
            start_spread_ns: None,
            wall_ns: 200_000_000,
            config: RunConfig::default(),
            at_limit: None,
            rounds: Vec::new(),
            disturbance: None,
        },
        counters: None,
    }
}

pub fn environment() -> Environment {
    Environment {
        tool_version: "0.1.0".into(),
        git_commit: Some("abc1234".into()),
        hostname: Some("demo-host".into()),
        kernel: Some("6.12.0-demo".into()),
        cpu_model: Some("Demo CPU 4C/8T @ 3.0GHz".into()),
        microcode: Some("0x2b".into()),
        smt_control: Some("on".into()),
        virtualization: None,
        governor: Some("performance".into()),
        boost: Some("enabled".into()),
        clocksource: Some("tsc".into()),
        perf_event_paranoid: Some(2),
        online_cpus: "0-7".into(),
        host_id: None,
        core_clock_ghz: None,
        cpu_handoff: Vec::new(),
    }
}

/// Results holding exactly `cells` (and `skipped`), planned in that order.
pub fn run(cells: Vec<CellRecord>, skipped: Vec<SkippedCell>) -> RunResults {
    let mut r = RunResults {
        schema: RESULTS_SCHEMA.into(),
        run: RunMeta {
            id: 7,
            started_unix_s: 1_790_000_000,
            finished_unix_s: Some(1_790_000_600),
            status: RunStatus::Finished,
            command_line: vec![
                "smtlab".into(),
                "run".into(),
                "--suite".into(),
                "default".into(),
            ],
            suite: Some("default".into()),
            environment: environment(),
            topology: topology(),
            config: RunConfig::default(),
            plan: cells
                .iter()
                .map(CellRecord::key)
                .chain(skipped.iter().map(|s| s.key.clone()))
                .collect(),
            notes: vec![],
        },
        cells,
        skipped,
        benchmarks: Vec::new(),
    };
    r.describe(catalog());
    r
}

/// A catalog entry of `name` as the report reads it: its section and main parameter.
pub fn entry(name: &str, report: ReportSection, main: Option<&str>) -> BenchInfo {
    BenchInfo {
        name: name.into(),
        group: "test".into(),
        unit: "ops/s".into(),
        direction: Direction::Higher,
        value_kind: ValueKind::Rate { scale: 1.0 },
        description: String::new(),
        origin: String::new(),
        params: Vec::new(),
        main_param: main.map(String::from),
        report,
    }
}

/// The catalog the test runs are described by: the workloads' sections and main
/// parameters as the real catalog declares them (the report reads nothing else).
pub fn catalog() -> Vec<BenchInfo> {
    let table = |caption: &str| ReportSection::SpeedupTable {
        caption: caption.into(),
    };
    // Paper 001 Table 1, in the paper's order (the catalog's).
    let os_rows = [
        ("null-syscall", "Simple syscall"),
        ("read", "Simple read"),
        ("write", "Simple write"),
        ("stat", "Simple stat"),
        ("fstat", "Simple fstat"),
        ("open-close", "Simple open/close"),
        ("select-file", "Select on 10 fd's"),
        ("select-tcp", "Select on 10 tcp fd's"),
        ("sig-install", "Signal handler installation"),
        ("sig-handler", "Signal handler overhead"),
        ("pipe-latency", "Pipe latency"),
        ("fork-exit", "Process fork+exit"),
        ("fork-exec", "Process fork+execve"),
        ("fork-sh", "Process fork+/bin/sh -c"),
    ];
    let os = os_rows.into_iter().map(|(name, label)| {
        let label_params = if name.starts_with("select-") {
            [("fds".to_string(), "10".to_string())].into()
        } else {
            BTreeMap::new()
        };
        entry(
            name,
            ReportSection::OsLatency {
                label: label.into(),
                label_params,
            },
            None,
        )
    });
    os.chain([
        entry("exec", ReportSection::Exec, None),
        entry("web-static", ReportSection::WebStatic, Some("server")),
        entry("web-capacity", ReportSection::WebCapacity, Some("server")),
        entry("chat", table("paper 001 Tables 3-4"), Some("rooms")),
        entry("dbench", table("paper 001 Table 5"), Some("clients")),
        entry("tbench", table("paper 001 Table 6"), Some("clients")),
        entry(
            "tcp-stream",
            table("paper 004, netperf TCP_STREAM"),
            Some("size"),
        ),
        entry(
            "tcp-rr",
            table("paper 004, netperf TCP_RR"),
            Some("request"),
        ),
        entry(
            "aim-add-double",
            aim(
                "add_double",
                "Thousand Double Precision Additions per second",
            ),
            None,
        ),
        entry(
            "aim-jmp",
            aim("jmp_test", "Non-local gotos per second"),
            None,
        ),
        entry(
            "aim-disk-rd",
            aim("disk_rd", "Sequential Disk Reads (K) per second"),
            None,
        ),
        entry("aim-sieve", aim("sieve", "Integer Sieves per second"), None),
        entry(
            "aim-fifo",
            aim("fifo_test", "FIFO Messages per second"),
            None,
        ),
        entry("task-pool", ReportSection::TaskPool, Some("queue")),
        entry("oltp-sqlite", ReportSection::Oltp, Some("mode")),
        entry("sdet", ReportSection::Oltp, Some("users")),
    ])
    .collect()
}

/// The report section of an AIM9 row of paper 001 Table 2.
fn aim(row: &str, label: &str) -> ReportSection {
    ReportSection::AimRow {
        row: row.into(),
        label: label.into(),
    }
}

const GRID: [&str; 6] = ["1c1t", "1c2t", "2c1t", "2c2t", "cores", "all"];

/// The demo run: every kind of cell the report draws.
pub fn demo() -> RunResults {
    let mut rng = Rng::new(42);
    let mut cells = Vec::new();
    let hi = Direction::Higher;
    let lo = Direction::Lower;
    // Compute: per-placement throughput; int gains from SMT, fp much less.
    for (bench, values) in [
        ("int-ops", [3.0, 3.75, 6.0, 7.5, 12.0, 15.0]),
        ("fp-ops", [2.0, 2.12, 4.0, 4.22, 8.0, 8.4]),
    ] {
        for (p, v) in GRID.iter().zip(values) {
            let s = rng.around(v, 0.008, 10);
            cells.push(cell(
                bench,
                "compute",
                "GOPS",
                hi,
                &[("threads", "auto"), ("seed", "1")],
                placement(p),
                &s,
            ));
        }
    }
    // Compute with explicit thread counts on two mappings (paper 002 Fig. 1).
    for n in [1u32, 2, 3, 4, 6, 8] {
        let spread = if n <= 4 {
            3.0 * n as f64
        } else {
            12.0 + 0.75 * (n - 4) as f64
        };
        let linear = 3.75 * (n / 2) as f64 + 3.0 * (n % 2) as f64;
        for (p, v) in [("all", spread), ("all/linear", linear)] {
            let s = rng.around(v, 0.01, 8);
            let t = n.to_string();
            cells.push(cell(
                "int-ops",
                "compute",
                "GOPS",
                hi,
                &[("threads", &t), ("seed", "1")],
                placement(p),
                &s,
            ));
        }
    }
    // Memory bandwidth and latency.
    for (p, v) in GRID.iter().zip([12.0, 13.1, 22.0, 23.4, 30.0, 30.6]) {
        let s = rng.around(v, 0.01, 10);
        cells.push(cell(
            "mem-read",
            "memory",
            "GB/s",
            hi,
            &[("size", "1GiB"), ("threads", "auto")],
            placement(p),
            &s,
        ));
    }
    for (p, v) in GRID.iter().zip([95.0, 104.0, 97.0, 109.0, 101.0, 118.0]) {
        let s = rng.around(v, 0.01, 10);
        cells.push(cell(
            "mem-latency",
            "memory",
            "ns",
            lo,
            &[("size", "1GiB"), ("threads", "auto"), ("seed", "1")],
            placement(p),
            &s,
        ));
    }
    // Thread primitives with per-event series.
    for (p, a_med, b_med) in [
        ("1c1t", 14_000.0, 30_000.0),
        ("1c2t", 11_000.0, 16_000.0),
        ("2c1t", 12_000.0, 19_000.0),
    ] {
        let n = 5000;
        let a: Vec<f64> = (0..n).map(|_| rng.latency(a_med, 0.15)).collect();
        let b: Vec<f64> = (0..n).map(|_| rng.latency(b_med, 0.35)).collect();
        let means: Vec<f64> = b.chunks(500).map(|c| stats::mean(c).unwrap()).collect();
        let mut c = cell(
            "pthread-create",
            "threads",
            "ns",
            lo,
            &[("mode", "joinable")],
            placement(p),
            &means,
        );
        c.result.series.insert("create_return_ns".into(), a);
        c.result.series.insert("thread_start_ns".into(), b);
        cells.push(c);
    }
    for (bench, a_key, p, a_med, b_med) in [
        ("mutex-handoff", "unlock_ns", "1c2t", 250.0, 2_400.0),
        ("mutex-handoff", "unlock_ns", "2c1t", 300.0, 3_900.0),
        ("condvar-signal", "call_ns", "2c1t", 420.0, 4_300.0),
    ] {
        let n = 2000;
        let a: Vec<f64> = (0..n).map(|_| rng.latency(a_med, 0.4)).collect();
        let b: Vec<f64> = (0..n).map(|_| rng.latency(b_med, 0.3)).collect();
        let means: Vec<f64> = b.chunks(200).map(|c| stats::mean(c).unwrap()).collect();
        let mut c = cell(
            bench,
            "threads",
            "ns",
            lo,
            &[("events", "200")],
            placement(p),
            &means,
        );
        c.result.series.insert(a_key.into(), a);
        c.result.series.insert("wake_ns".into(), b);
        cells.push(c);
    }
    for (p, v) in [
        ("1c1t", 110.0),
        ("1c2t", 62.0),
        ("2c1t", 27.0),
        ("all", 16.0),
    ] {
        let s = rng.around(v, 0.015, 10);
        cells.push(cell(
            "cas-contention",
            "threads",
            "Mops/s",
            hi,
            &[],
            placement(p),
            &s,
        ));
    }
    for (p, v) in [("1c2t", 18.0), ("2c1t", 55.0)] {
        let s = rng.around(v, 0.01, 10);
        cells.push(cell(
            "c2c-latency",
            "threads",
            "ns",
            lo,
            &[],
            placement(p),
            &s,
        ));
    }
    // OS latencies (paper 001 Table 1), nanoseconds.
    type Params = &'static [(&'static str, &'static str)];
    let os: [(&str, Params, f64); 14] = [
        ("null-syscall", &[], 62.0),
        ("read", &[], 118.0),
        ("write", &[], 96.0),
        ("stat", &[], 440.0),
        ("fstat", &[], 150.0),
        ("open-close", &[], 1_120.0),
        ("select-file", &[("fds", "10")], 260.0),
        ("select-tcp", &[("fds", "10")], 410.0),
        ("sig-install", &[], 88.0),
        ("sig-handler", &[], 910.0),
        ("pipe-latency", &[], 4_400.0),
        ("fork-exit", &[], 71_000.0),
        ("fork-exec", &[], 252_000.0),
        ("fork-sh", &[], 705_000.0),
    ];
    for (bench, ps, v) in os {
        for (p, f) in [("1c1t", 1.0), ("1c2t", 1.03), ("2c1t", 1.0)] {
            let f = if bench == "pipe-latency" {
                [1.0, 0.7, 1.35][["1c1t", "1c2t", "2c1t"]
                    .iter()
                    .position(|x| *x == p)
                    .unwrap()]
            } else {
                f
            };
            let noisy = bench == "fork-sh" && p == "2c1t";
            let s = rng.around(v * f, if noisy { 0.08 } else { 0.01 }, 10);
            cells.push(cell(bench, "os", "ns", lo, ps, placement(p), &s));
        }
    }
    // The memory-latency working-set sweep on one thread (4 KiB to 64 MiB): flat inside
    // each cache of the demo machine (48 KiB L1d, 2 MiB L2, 16 MiB L3), then DRAM.
    // Two placements that form no yield pair, so the yield table stays as it is.
    for p in ["1c1t", "2c1t"] {
        for k in 0..=7u32 {
            let bytes = 4096u64 << (2 * k);
            let ns = match bytes {
                b if b <= 48 << 10 => 1.3,
                b if b <= 2 << 20 => 4.2,
                b if b <= 16 << 20 => 14.0,
                _ => 88.0,
            } * if p == "2c1t" { 1.05 } else { 1.0 };
            let size = if bytes >= 1 << 20 {
                format!("{}MiB", bytes >> 20)
            } else {
                format!("{}KiB", bytes >> 10)
            };
            let s = rng.around(ns, 0.01, 10);
            cells.push(cell(
                "mem-latency",
                "memory",
                "ns",
                lo,
                &[("size", &size), ("threads", "1")],
                placement(p),
                &s,
            ));
        }
    }
    let skipped = vec![SkippedCell {
        key: CellKey {
            benchmark: "c2c-latency".into(),
            params: BTreeMap::new(),
            conditions: Default::default(),
            placement: "1c1t".into(),
        },
        reason: "c2c-latency needs 2 or more pinned CPUs; 1c1t has 1".into(),
    }];
    let mut r = run(cells, skipped);
    r.run.notes.push(
        "synthetic demo data: invented numbers to preview the report, not a measurement".into(),
    );
    r
}

/// Sets every sample's metrics to `base`, each figure varied by about 1% (the counts
/// rounded), as the workloads record them.
pub fn with_metrics(mut c: CellRecord, rng: &mut Rng, base: &[(&str, f64)]) -> CellRecord {
    for s in &mut c.result.samples {
        s.metrics = base
            .iter()
            .map(|(k, v)| {
                let x = v * (1.0 + 0.01 * rng.normal());
                // Whole figures are fixed counts (errors, connects, tasks per tree)
                // and stay exact; measured counts stay whole.
                let x = if v.fract() == 0.0 {
                    *v
                } else if *v >= 100.0 {
                    x.round()
                } else {
                    x
                };
                (k.to_string(), x)
            })
            .collect();
    }
    c
}

/// The server and system workloads on `places`: web-static and web-capacity (two
/// servers), chat over rooms, dbench and tbench over clients, tcp-stream over message
/// sizes and tcp-rr, three AIM9 rows, the task pool (both queues), oltp-sqlite and sdet.
/// `smt_gain` scales the values of the placements with two threads per core.
pub fn workload_cells(places: &[&str]) -> Vec<CellRecord> {
    let mut rng = Rng::new(7);
    let hi = Direction::Higher;
    let mut cells = Vec::new();
    // Relative throughput per placement: SMT helps servers by 10-30%.
    let factor = |p: &str, smt: f64| match p {
        "1c1t" => 1.0,
        "1c2t" => smt,
        "2c1t" => 1.9,
        "2c2t" => 1.9 * smt,
        _ => 3.5,
    };
    for (server, mbit, smt) in [("event", 900.0, 1.22), ("nginx", 1400.0, 1.12)] {
        for p in places {
            let v = mbit * factor(p, smt);
            let s = rng.around(v, 0.012, 6);
            let c = cell(
                "web-static",
                "web",
                "Mbit/s",
                hi,
                &[("server", server), ("conns", "32")],
                placement(p),
                &s,
            );
            let rps = v * 125_000.0 / 14_200.0;
            let p50 = 32.0 / rps * 1e9 * 0.8;
            cells.push(with_metrics(
                c,
                &mut rng,
                &[
                    ("requests_per_s", rps),
                    ("requests", rps * 0.5),
                    ("bytes_per_request", 14_200.0),
                    ("errors", 0.0),
                    ("connects", 32.0),
                    ("latency_p50_ns", p50),
                    ("latency_p90_ns", p50 * 2.1),
                    ("latency_p99_ns", p50 * 5.5),
                    ("latency_p999_ns", p50 * 11.0),
                    ("latency_max_ns", p50 * 40.0),
                    ("latency_mean_ns", p50 * 1.3),
                ],
            ));
        }
    }
    for (server, conns, smt) in [("event", 120.0, 1.15), ("nginx", 180.0, 1.08)] {
        for p in places {
            let cap = (conns * factor(p, smt)).round();
            let s: Vec<f64> = rng.around(cap, 0.03, 4).iter().map(|v| v.round()).collect();
            let mut c = cell(
                "web-capacity",
                "web",
                "connections",
                hi,
                &[("server", server), ("dataset", "8MiB")],
                placement(p),
                &s,
            );
            let mut curve = Vec::new();
            for step in [0.25, 0.5, 0.75, 1.0, 1.25] {
                let n = (cap * step).round();
                let share = if step <= 1.0 { 1.0 - 0.04 * step } else { 0.7 };
                curve.extend([n, share]);
            }
            c.result
                .series
                .insert("conforming_fraction_by_conns".into(), curve);
            cells.push(with_metrics(
                c,
                &mut rng,
                &[("capped", 0.0), ("steps", 5.0), ("errors", 0.0)],
            ));
        }
    }
    for rooms in ["2", "5", "10"] {
        let r: f64 = rooms.parse().unwrap();
        for p in places {
            let v = 40_000.0 * r.sqrt() * factor(p, 1.18);
            let s = rng.around(v, 0.015, 8);
            let c = cell(
                "chat",
                "chat",
                "msg/s",
                hi,
                &[("rooms", rooms), ("users", "20"), ("size", "100")],
                placement(p),
                &s,
            );
            let mut c = with_metrics(
                c,
                &mut rng,
                &[
                    ("rooms", r),
                    ("connections", r * 20.0),
                    ("threads", r * 40.0),
                ],
            );
            // The messages of a round are fixed by the load's shape (no noise drawn).
            for s in &mut c.result.samples {
                s.metrics.insert("threads".into(), r * 80.0);
                s.metrics.insert("messages_sent".into(), r * 20.0 * 100.0);
                s.metrics
                    .insert("messages_received".into(), r * 20.0 * 100.0 * 19.0);
                s.metrics
                    .insert("messages_total".into(), r * 20.0 * 100.0 * 20.0);
            }
            cells.push(c);
        }
    }
    for (bench, base, smt) in [("dbench", 180.0, 1.1), ("tbench", 95.0, 1.25)] {
        for clients in ["2", "8", "20"] {
            let n: f64 = clients.parse().unwrap();
            for p in places {
                let v = base * (1.0 + n.ln() * 0.2) * factor(p, smt);
                let s = rng.around(v, 0.02, 6);
                let c = cell(
                    bench,
                    "net",
                    "MB/s",
                    hi,
                    &[("clients", clients)],
                    placement(p),
                    &s,
                );
                cells.push(with_metrics(
                    c,
                    &mut rng,
                    &[("clients", n), ("ops_per_s", v * 80.0)],
                ));
            }
        }
    }
    for size in ["1KiB", "16KiB", "64KiB"] {
        let b = size.trim_end_matches("KiB").parse::<f64>().unwrap();
        for p in places {
            let v = 4.0 * (b / 16.0).powf(0.4) * factor(p, 1.05);
            let s = rng.around(v, 0.01, 5);
            let c = cell(
                "tcp-stream",
                "net",
                "Gbit/s",
                hi,
                &[("size", size)],
                placement(p),
                &s,
            );
            cells.push(with_metrics(
                c,
                &mut rng,
                &[
                    ("server_cpu_us_per_kib", 0.21 / (b / 16.0).powf(0.3)),
                    ("client_cpu_us_per_kib", 0.18),
                ],
            ));
        }
    }
    for p in places {
        let v = 52_000.0 * factor(p, 1.3);
        let s = rng.around(v, 0.01, 5);
        let c = cell("tcp-rr", "net", "tx/s", hi, &[], placement(p), &s);
        cells.push(with_metrics(
            c,
            &mut rng,
            &[
                ("server_cpu_us_per_tx", 9.5),
                ("client_cpu_us_per_tx", 8.1),
                ("rtt_p50_ns", 18_000.0),
                ("rtt_p99_ns", 41_000.0),
            ],
        ));
    }
    for (bench, unit, v, smt) in [
        ("aim-fifo", "msg/s", 310_000.0, 1.35),
        ("aim-disk-rd", "MB/s", 5_400.0, 1.08),
        ("aim-sieve", "sieves/s", 980.0, 1.2),
    ] {
        for p in places.iter().filter(|p| matches!(**p, "1c1t" | "1c2t")) {
            let s = rng.around(v * factor(p, smt), 0.012, 6);
            cells.push(cell(bench, "aim", unit, hi, &[], placement(p), &s));
        }
    }
    for (work, tasks, scale) in [("fft", 2047.0, 1.0), ("matmul", 73.0, 0.01)] {
        for queue in ["cas", "mutex"] {
            for p in places {
                let pl = placement(p);
                let workers = pl.cpus.len() as f64;
                let contention = if queue == "cas" { 1.0 } else { 1.6 };
                // Cores scale, the sibling adds 10%, the mutex queue costs more per task.
                let v = 2.4 * scale * f64::from(pl.cores).powf(0.8) / contention
                    * if pl.threads_per_core == 2 { 1.1 } else { 1.0 };
                let s = rng.around(v, 0.015, 6);
                let c = cell(
                    "task-pool",
                    "threads",
                    "Mtasks/s",
                    hi,
                    &[("work", work), ("queue", queue), ("workers", "auto")],
                    pl,
                    &s,
                );
                let (retries, contended) = if queue == "cas" {
                    (0.02 * (workers - 1.0), 0.0)
                } else {
                    (0.0, 0.08 * (workers - 1.0))
                };
                cells.push(with_metrics(
                    c,
                    &mut rng,
                    &[
                        ("workers", workers),
                        ("tree_ms", tasks / (v * 1e6) * 1e3),
                        ("tasks_per_tree", tasks),
                        ("cas_retries_per_task", retries),
                        ("lock_contended_per_task", contended),
                    ],
                ));
            }
        }
    }
    for p in places {
        let s = rng.around(2_600.0 * factor(p, 1.14), 0.02, 5);
        cells.push(cell(
            "oltp-sqlite",
            "db",
            "tps",
            hi,
            &[("scale", "1"), ("clients", "4")],
            placement(p),
            &s,
        ));
    }
    for users in ["1", "4"] {
        let u: f64 = users.parse().unwrap();
        for p in places {
            let s = rng.around(3_000.0 * u.sqrt() * factor(p, 1.2), 0.02, 5);
            cells.push(cell(
                "sdet",
                "sdet",
                "scripts/h",
                hi,
                &[("users", users)],
                placement(p),
                &s,
            ));
        }
    }
    cells
}

/// A run of the workloads on the four core/thread placements, with a web cell that
/// failed on errors.
pub fn workloads_demo() -> RunResults {
    let cells = workload_cells(&["1c1t", "1c2t", "2c1t", "2c2t"]);
    let skipped = vec![
        SkippedCell {
            key: CellKey {
                benchmark: "web-static".into(),
                params: [("server".to_string(), "apache-prefork".to_string())]
                    .into_iter()
                    .collect(),
                conditions: Default::default(),
                placement: "1c2t".into(),
            },
            reason: "3 requests failed beside 912 good ones (3 connect refused); no throughput \
                 reported"
                .into(),
        },
        SkippedCell {
            key: CellKey {
                benchmark: "aim-jmp".into(),
                params: Default::default(),
                conditions: Default::default(),
                placement: "1c1t".into(),
            },
            reason: "no unwinding in this build".into(),
        },
    ];
    run(cells, skipped)
}
