//! Builders shared by the report's unit tests.

use smtlab_model::{CellResult, ResolvedPlacement, SampleRecord};

/// A placement on CPUs 0 and 1 with the given name, cores and threads per core.
pub fn placement(name: &str, spec: &str, cores: u32, threads_per_core: u32) -> ResolvedPlacement {
    ResolvedPlacement {
        name: name.into(),
        spec: spec.into(),
        cpus: vec![0, 1],
        cores,
        threads_per_core,
        packages: 1,
        core_order: Default::default(),
        cpu_order: Default::default(),
        core_kinds: Vec::new(),
    }
}

/// A converged result of `samples` whose summary is that of `values`.
pub fn result(samples: Vec<SampleRecord>, values: &[f64]) -> CellResult {
    smtlab_fixtures::build::converged_result(samples, values)
}

/// A stored `predict` run on `host`: workloads `wa` and `wb` (one thread each), rulers
/// `int` (`int-ops`) and `dram` (`mem-read size=auto`), in the cores form; every pair
/// plus `wa`/`wb` beside each other, each co-run cell slower than its alone cell by
/// `1 + pressure x (its index + 1) / 10` (times, lower is better), so each pair has a
/// figure of its own and a test knows which.
pub fn predict_run(
    host: &smtlab_fixtures::fleet::FakeHost,
    pressure: f64,
) -> smtlab_model::RunResults {
    use std::collections::BTreeMap;

    use smtlab_model::keys::{Conditions, Form};
    use smtlab_model::metrics::corun::{PARTNER_ALONE_VALUE, PARTNER_VALUE};
    use smtlab_model::{CellRecord, Direction};

    let mut r = smtlab_fixtures::fleet::run(host);
    r.run.suite = Some("predict".into());
    let one = |extra: &[(&str, &str)]| {
        let mut p = BTreeMap::from([("threads".to_string(), "1".to_string())]);
        p.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        p
    };
    let work = [("wa", one(&[])), ("wb", one(&[]))];
    let rulers = [
        ("int-ops", one(&[]), "ruler:int"),
        ("mem-read", one(&[("size", "auto")]), "ruler:dram"),
    ];
    let mut pairs: Vec<(&str, BTreeMap<String, String>, String)> = Vec::new();
    for (w, wp) in &work {
        for (rb, rp, rname) in &rulers {
            pairs.push((w, wp.clone(), rname.to_string()));
            pairs.push((rb, rp.clone(), w.to_string()));
        }
    }
    pairs.push(("wa", one(&[]), "wb".into()));
    pairs.push(("wb", one(&[]), "wa".into()));
    let cell = |bench: &str, params: &BTreeMap<String, String>, partner: &str, form, scale: f64| {
        let values: Vec<f64> = [99.0, 100.0, 101.0].iter().map(|v| v * scale).collect();
        let samples = values
            .iter()
            .map(|&v| SampleRecord {
                value: v,
                iterations: 1,
                elapsed_ns: v as u64,
                work: 1.0,
                cpu_ns: None,
                start_spread_ns: None,
                cpus: vec![0],
                metrics: BTreeMap::from([
                    (PARTNER_VALUE.to_string(), v),
                    (PARTNER_ALONE_VALUE.to_string(), v / scale),
                ]),
            })
            .collect();
        let placement = format!("corun-{}", Form::name(form));
        CellRecord {
            benchmark: bench.into(),
            group: "test".into(),
            unit: "ns".into(),
            direction: Direction::Lower,
            params: params.clone(),
            conditions: Conditions {
                form: Some(form),
                partner: Some(partner.into()),
                ..Conditions::default()
            },
            placement_spec: placement.clone(),
            placement: self::placement(&placement, "cpus:0,1", 2, 1),
            result: result(samples, &values),
            counters: None,
        }
    };
    r.cells = pairs
        .iter()
        .enumerate()
        .flat_map(|(i, (b, p, partner))| {
            let scale = 1.0 + pressure * (i + 1) as f64 / 10.0;
            [
                cell(b, p, partner, Form::Alone, 1.0),
                cell(b, p, partner, Form::Cores, scale),
            ]
        })
        .collect();
    r
}

/// A run whose machine has L1d 32 KiB, L2 1 MiB and L3 32 MiB, with one `mem-latency`
/// cell on `1c1t` (one thread) per `(working set in bytes, median ns)`; no core clock.
pub fn sweep_run(points: &[(f64, f64)]) -> smtlab_model::RunResults {
    use std::collections::BTreeMap;

    use smtlab_model::{Cache, CacheType, CellRecord, CpuSet, Direction};

    let host = smtlab_fixtures::fleet::FakeHost::new("h", "cpu", 1.2);
    let mut r = smtlab_fixtures::fleet::run(&host);
    r.run.environment.core_clock_ghz = None;
    r.run.topology.caches = [
        (1, CacheType::Data, 32u64 << 10),
        (2, CacheType::Unified, 1 << 20),
    ]
    .into_iter()
    .chain([(3, CacheType::Unified, 32 << 20)])
    .map(|(level, cache_type, b)| Cache {
        level,
        cache_type,
        size_bytes: Some(b),
        line_bytes: None,
        ways: None,
        cpus: [0u32, 1].into_iter().collect::<CpuSet>(),
    })
    .collect();
    r.cells = points
        .iter()
        .map(|&(bytes, ns)| {
            let values = [ns, ns, ns];
            CellRecord {
                benchmark: "mem-latency".into(),
                group: "memory".into(),
                unit: "ns".into(),
                direction: Direction::Lower,
                params: BTreeMap::from([
                    ("size".to_string(), format!("{bytes}")),
                    ("threads".to_string(), "1".to_string()),
                ]),
                conditions: Default::default(),
                placement_spec: "1c1t".into(),
                placement: placement("1c1t", "1c1t", 1, 1),
                result: result(Vec::new(), &values),
                counters: None,
            }
        })
        .collect();
    r
}
