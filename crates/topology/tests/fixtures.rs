//! Every machine of `crates/fixtures/data/topology/ground-truth.json` against hwloc's
//! answers, field by field. Prints a table of agreements and fails on any disagreement.
//!
//! Point `SMTLAB_FIXTURES` elsewhere to run it on other trees with a ground truth of
//! the same shape.

use std::collections::BTreeSet;

use serde_json::Value;
use smtlab_model::Topology;

const FIELDS: [&str; 7] = [
    "packages",
    "cores",
    "pus",
    "threads_per_core",
    "numa_nodes",
    "sibling_groups",
    "offline_cpus",
];

/// What we report for each compared field, in ground-truth JSON form.
fn ours(t: &Topology) -> Vec<Value> {
    let groups: BTreeSet<Vec<u32>> = t.cores().map(|c| c.cpus.to_vec()).collect();
    vec![
        t.packages.len().into(),
        t.core_count().into(),
        t.cpus.len().into(),
        serde_json::json!([t.smt.threads_per_core_min, t.smt.threads_per_core_max]),
        t.numa_nodes.len().into(),
        serde_json::to_value(groups).unwrap(),
        serde_json::to_value(t.offline_cpus.to_vec()).unwrap(),
    ]
}

fn expected(m: &Value, field: &str) -> Value {
    if field == "sibling_groups" {
        let groups: BTreeSet<Vec<u64>> = m[field]
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| {
                let mut v: Vec<u64> = g
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_u64)
                    .collect();
                v.sort_unstable();
                v
            })
            .collect();
        return serde_json::to_value(groups).unwrap();
    }
    m[field].clone()
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!("{}...", &s[..57])
    } else {
        s
    }
}

#[test]
fn every_fixture_agrees_with_hwloc_field_by_field() {
    let truth = smtlab_fixtures::ground_truth();
    let machines = truth.as_array().expect("ground truth is an array");
    assert!(!machines.is_empty(), "ground-truth.json lists no machine");

    let mut table = Vec::new();
    let mut problems = Vec::new();
    let mut agree_per_field = [0usize; FIELDS.len()];
    for m in machines {
        let name = m["name"].as_str().expect("every machine has a name");
        let (_dir, root) = smtlab_fixtures::extract(name);
        let marks: Vec<bool> = match smtlab_topology::discover(&root) {
            Ok(topo) => ours(&topo)
                .iter()
                .zip(FIELDS)
                .map(|(got, field)| {
                    let want = expected(m, field);
                    let ok = *got == want;
                    if !ok {
                        problems.push(format!(
                            "{name}: {field}: hwloc {} but we say {}",
                            short(&want),
                            short(got)
                        ));
                    }
                    ok
                })
                .collect(),
            Err(e) => {
                problems.push(format!("{name}: discover failed: {e}"));
                vec![false; FIELDS.len()]
            }
        };
        for (n, ok) in agree_per_field.iter_mut().zip(&marks) {
            *n += usize::from(*ok);
        }
        table.push((name.to_owned(), marks));
    }

    let width = table.iter().map(|(n, _)| n.len()).max().unwrap_or(8);
    let header: Vec<String> = FIELDS
        .iter()
        .map(|f| format!("{:>w$}", f, w = f.len().max(5)))
        .collect();
    println!("{:width$}  {}", "fixture", header.join(" "));
    for (name, marks) in &table {
        let cells: Vec<String> = FIELDS
            .iter()
            .zip(marks)
            .map(|(f, ok)| {
                format!(
                    "{:>w$}",
                    if *ok { "ok" } else { "DIFF" },
                    w = f.len().max(5)
                )
            })
            .collect();
        println!("{name:width$}  {}", cells.join(" "));
    }
    let totals: Vec<String> = FIELDS
        .iter()
        .zip(agree_per_field)
        .map(|(f, n)| format!("{:>w$}", format!("{n}/{}", table.len()), w = f.len().max(5)))
        .collect();
    println!("{:width$}  {}", "agree", totals.join(" "));

    assert!(
        problems.is_empty(),
        "{} disagreement(s) with hwloc:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// What the ground truth does not cover but a regression would break: hybrid kinds,
/// loose cores, CPU-less and sparse NUMA nodes, caches, model strings, hypervisors.
#[test]
fn details_beyond_the_ground_truth() {
    let load = |name: &str| {
        let (dir, root) = smtlab_fixtures::extract(name);
        let topo = smtlab_topology::discover(&root)
            .unwrap_or_else(|e| panic!("{name}: discover failed: {e}"));
        drop(dir);
        topo
    };
    let kinds = |t: &Topology| -> Vec<(String, String)> {
        t.core_kinds
            .iter()
            .map(|k| (k.name.clone(), k.cpus.to_list_string()))
            .collect()
    };
    let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());

    let gb10 = load("nvidia-dgx-gb10");
    assert_eq!(
        kinds(&gb10),
        vec![
            pair("cortex-a725", "0-4,10-14"),
            pair("cortex-x925", "5-9,15-19")
        ]
    );
    assert_eq!(
        gb10.core_of(7).unwrap().kind.as_deref(),
        Some("cortex-x925")
    );
    assert_eq!(gb10.smt.control.as_deref(), Some("notsupported"));
    assert_eq!(gb10.vendor.as_deref(), Some("ARM"));

    let raptor = load("20em64t-hybrid-1p6c2t+2ca4co1t");
    assert_eq!(
        kinds(&raptor),
        vec![pair("base-1400MHz", "12-19"), pair("base-1900MHz", "0-11")]
    );
    assert_eq!(raptor.smt.control.as_deref(), Some("on"));
    assert_eq!(raptor.smt.active, Some(true));
    // Two clusters of four E-cores; a P-core's "cluster" is the core itself.
    assert!(raptor.core_of(12).unwrap().cluster_id.is_some());
    assert_eq!(
        raptor.core_of(12).unwrap().cluster_id,
        raptor.core_of(15).unwrap().cluster_id
    );
    assert_ne!(
        raptor.core_of(12).unwrap().cluster_id,
        raptor.core_of(16).unwrap().cluster_id
    );
    assert_eq!(raptor.core_of(0).unwrap().cluster_id, None);

    let lakefield = load("5intel64-hybrid-lakefield");
    assert_eq!(
        kinds(&lakefield),
        vec![pair("base-1400MHz", "0-3"), pair("base-2000MHz", "4")]
    );

    // Uniform machines get no kinds, even with per-core boost differences.
    for name in [
        "32intel64-2p8co2t+8ve",
        "64amd64-4p2n4ca2co",
        "16em64t-4s2c2t",
    ] {
        assert!(load(name).core_kinds.is_empty(), "{name}");
    }

    let ps3 = load("2ps3-2t");
    assert!(ps3.packages.is_empty());
    assert_eq!(ps3.cores_without_package.len(), 1);
    assert_eq!(
        ps3.cpu_model.as_deref(),
        Some("Cell Broadband Engine, altivec supported")
    );

    let s390 = load("20s390-2g6s4c");
    assert!(s390.packages.iter().all(|p| p.id.is_none()));
    assert_eq!(
        s390.cpu_model.as_deref(),
        Some("IBM z196 (machine type 2817)")
    );

    let itanium = load("128ia64-17n4s2c");
    let node16 = itanium.numa_nodes.iter().find(|n| n.id == 16).unwrap();
    assert!(node16.cpus.is_empty());
    assert_eq!(node16.memory_bytes, Some(1_020_176 * 1024));

    let sparse = load("48amd64-4pa2n6c-sparse");
    let ids: Vec<u32> = sparse.numa_nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, vec![0, 1, 2, 33, 34, 45, 72, 73]);

    let cpusets = load("16amd64-8n2c-cpusets");
    assert_eq!(cpusets.offline_cpus.to_vec(), vec![4]);
    assert_eq!(cpusets.allowed_cpus, None, "saved trees ignore cpusets");
    assert!(cpusets.caches.iter().all(|c| !c.cpus.contains(4)));

    let paxville = load("16em64t-4s2c2t");
    let l3: Vec<String> = paxville
        .caches
        .iter()
        .filter(|c| c.level == 3)
        .map(|c| c.cpus.to_list_string())
        .collect();
    assert_eq!(l3, vec!["0,4,8,12", "1,5,9,13", "2,6,10,14", "3,7,11,15"]);
    assert_eq!(paxville.llc_bytes(), Some(4 << 20));

    let kvm = load("2pa-pcidomain32bits");
    assert_eq!(kvm.virtualization.as_deref(), Some("KVM"));
    assert_eq!(load("8em64t-2s2ca2c").virtualization, None);

    let bulldozer = load("64amd64-4p2n4ca2co");
    assert_eq!(
        bulldozer.cpu_model.as_deref(),
        Some("AMD Opteron(TM) Processor 6272")
    );
    // The compute unit shows in the caches it shares: L1i and L2 per pair of cores.
    let l2 = bulldozer.caches.iter().find(|c| c.level == 2).unwrap();
    assert_eq!(l2.cpus.to_vec(), vec![0, 1]);

    let fake = load("64fake-4n2s2ca2c2t");
    assert_eq!(fake.cpu_model, None, "no /proc at all");
    assert_eq!(fake.numa_nodes.len(), 4);
}
