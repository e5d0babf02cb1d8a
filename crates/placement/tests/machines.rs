//! Placement resolution on real machines: the sysfs trees of hwloc's test suite, read by
//! `smtlab_topology::discover`, with hwloc's own sibling groups as the reference; and on
//! the machine running the tests, where every resolved placement is also pinned.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use smtlab_model::{CpuSet, PlacementKind, Topology};
use smtlab_placement::{parse, resolve, standard_placements};

/// The discovered topology of fixture `name`. Each tree is extracted once per test binary:
/// unpacking thousands of small sysfs files takes seconds, and several tests share one.
fn machine(name: &str) -> Arc<Topology> {
    type Cache = Mutex<HashMap<String, Arc<OnceLock<Arc<Topology>>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cell = {
        let mut cache = CACHE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        cache.entry(name.to_string()).or_default().clone()
    };
    cell.get_or_init(|| {
        let (_dir, root) = smtlab_fixtures::extract(name);
        Arc::new(smtlab_topology::discover(&root).unwrap_or_else(|e| panic!("{name}: {e}")))
    })
    .clone()
}

fn cpus(spec: &str, topo: &Topology) -> Vec<u32> {
    resolve(&parse(spec).unwrap(), topo)
        .unwrap_or_else(|e| panic!("{spec} on {}: {e}", topo.root))
        .cpus
}

fn err(spec: &str, topo: &Topology) -> String {
    match resolve(&parse(spec).unwrap(), topo) {
        Ok(r) => panic!("{spec} on {} resolved to {:?}", topo.root, r.cpus),
        Err(e) => e.to_string(),
    }
}

/// hwloc's cores for `name`: each the list of its online CPUs.
fn sibling_groups(name: &str) -> Vec<CpuSet> {
    let truth = smtlab_fixtures::ground_truth();
    let machine = truth
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in ground-truth.json"));
    machine["sibling_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            g.as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_u64().unwrap() as u32)
                .collect()
        })
        .collect()
}

#[test]
fn two_intel_packages_with_hyperthreading() {
    // 2 packages x 8 cores x 2 threads; package 0 = CPUs 0-7,16-23, siblings n and n+16.
    let t = machine("32intel64-2p8co2t+8ve");
    assert_eq!(cpus("1c2t", &t), [0, 16]);
    assert_eq!(cpus("2T", &t), [0, 16]);
    assert_eq!(cpus("1c1t", &t), [0]);

    let compact = cpus("2c1t", &t);
    assert_eq!(compact, [0, 1]);
    assert_eq!(t.package_index_of(0), t.package_index_of(1));

    let scatter = cpus("2c1t/scatter", &t);
    assert_eq!(scatter, [0, 8]);
    assert_ne!(t.package_index_of(0), t.package_index_of(8));
    let r = resolve(&parse("2P/scatter").unwrap(), &t).unwrap();
    assert_eq!(
        (r.name.as_str(), r.packages, r.cores),
        ("2c1t/scatter", 2, 2)
    );

    assert_eq!(cpus("2c2t", &t), [0, 1, 16, 17]);
    assert_eq!(cpus("2c2t/siblings", &t), [0, 16, 1, 17]);
    assert_eq!(cpus("2c2t/scatter/siblings", &t), [0, 16, 8, 24]);
    assert_eq!(cpus("cores", &t), (0..16).collect::<Vec<_>>());
    assert_eq!(cpus("all/linear", &t), (0..32).collect::<Vec<_>>());
    assert_eq!(
        err("1c4t", &t),
        "1c4t needs 4 threads per core; this machine has 2"
    );
    assert_eq!(
        err("17c1t", &t),
        "17c1t needs 17 cores; this machine has 16"
    );

    let names: Vec<String> = standard_placements(&t)
        .into_iter()
        .map(|(s, _)| s.text)
        .collect();
    assert_eq!(
        names,
        [
            "1c1t",
            "1c2t",
            "2c1t",
            "2c2t",
            "2c1t/scatter",
            "cores",
            "all"
        ]
    );
}

#[test]
fn half_cores_give_a_server_one_package_and_its_clients_the_other() {
    // 16 cores (2 packages x 8 x 2 threads): the server takes package 0's eight cores,
    // one thread each or both; the clients' default CPUs are package 1, all 16 of them.
    let t = machine("32intel64-2p8co2t+8ve");
    let mut package1: Vec<u32> = (8..16).chain(24..32).collect();
    package1.sort();
    for (spec, want) in [
        ("half-cores-1t", (0..8).collect::<Vec<u32>>()),
        ("half-cores-2t", (0..8).chain(16..24).collect()),
    ] {
        let p = resolve(&parse(spec).unwrap(), &t).unwrap();
        assert_eq!((p.name.as_str(), p.cores, p.packages), (spec, 8, 1));
        assert_eq!(p.cpus, want, "{spec}");
        let client = smtlab_placement::client_cpus(&t, &p, &Default::default()).unwrap();
        assert_eq!(client.iter().collect::<Vec<_>>(), package1, "{spec}");
        assert!(
            client
                .iter()
                .all(|c| t.package_index_of(c) != t.package_index_of(0))
        );
    }
    // Scatter takes half the cores of each package instead.
    let p = resolve(&parse("half-cores-1t/scatter").unwrap(), &t).unwrap();
    assert_eq!((p.cores, p.packages), (8, 2));
}

#[test]
fn amd_without_smt_refuses_sibling_placements() {
    let t = machine("16amd64-8n2c");
    let msg = err("1c2t", &t);
    assert!(msg.contains("no SMT"), "{msg}");
    assert!(
        msg.starts_with("1c2t needs 2 threads per core; this machine has 1"),
        "{msg}"
    );
    assert!(err("2T", &t).starts_with("2T (1c2t) needs"));
    assert_eq!(cpus("2c1t", &t).len(), 2);
    assert_eq!(cpus("16c1t", &t).len(), 16);
}

#[test]
fn power_smt4_gets_a_one_core_four_thread_placement() {
    let t = machine("256ppc-8n8s4t");
    assert_eq!(cpus("1c4t", &t), [0, 1, 2, 3]);
    assert_eq!(cpus("1c2t", &t), [0, 1]);
    assert_eq!(cpus("2c4t/siblings", &t), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert!(err("1c8t", &t).ends_with("this machine has 4"));
    let standard = standard_placements(&t);
    let smt4 = standard
        .iter()
        .find(|(s, _)| s.text == "1c4t")
        .expect("1c4t is in the standard set on SMT4");
    assert_eq!(smt4.1.as_ref().unwrap().cpus, [0, 1, 2, 3]);
}

#[test]
fn hybrid_picks_a_performance_core_pair_for_1c2t() {
    let t = machine("20em64t-hybrid-1p6c2t+2ca4co1t");
    let pair = cpus("1c2t", &t);
    assert_eq!(pair.len(), 2);
    let core = t.core_of(pair[0]).unwrap();
    assert_eq!(core.cpus.to_vec(), pair, "1c2t must be one SMT core");
    assert_eq!(pair, [0, 1]);

    // 1c1t must run on the same kind of core as 1c2t, or the SMT yield compares a
    // P-core pair with an E-core (the E-cores come first in compact order: clusters).
    let one = resolve(&parse("1c1t").unwrap(), &t).unwrap();
    let two = resolve(&parse("1c2t").unwrap(), &t).unwrap();
    assert_eq!(one.cpus, [0]);
    assert_eq!(one.core_kinds, two.core_kinds);
    // The tree names its kinds by base frequency; the P-cores' is one kind.
    assert_eq!(one.core_kinds.len(), 1, "{:?}", one.core_kinds);
    let both = resolve(&parse("2c1t").unwrap(), &t).unwrap();
    assert_eq!(both.core_kinds, one.core_kinds);
    let eight = resolve(&parse("8c1t").unwrap(), &t).unwrap();
    assert_eq!(eight.core_kinds.len(), 2, "8c1t mixes kinds and says so");

    let eight = cpus("8c1t", &t);
    let distinct: BTreeSet<_> = eight
        .iter()
        .map(|&c| t.core_of(c).unwrap().cpus.clone())
        .collect();
    assert_eq!(distinct.len(), 8);
    assert_eq!(cpus("6c2t", &t).len(), 12);
    assert_eq!(
        err("7c2t", &t),
        "7c2t needs 7 cores with 2 threads each; this machine has 6 such cores (of 14 cores)"
    );
    assert_eq!(cpus("cores", &t).len(), 14);
    assert_eq!(cpus("all", &t).len(), 20);
}

#[test]
fn ps3_without_packages_runs_1c2t() {
    let t = machine("2ps3-2t");
    assert_eq!(cpus("1c2t", &t), [0, 1]);
    let r = resolve(&parse("1c2t").unwrap(), &t).unwrap();
    assert_eq!((r.cores, r.threads_per_core, r.packages), (1, 2, 1));
    assert_eq!(err("2c1t", &t), "2c1t needs 2 cores; this machine has 1");
}

#[test]
fn standard_placements_on_every_fixture_use_distinct_online_cpus() {
    let names = smtlab_fixtures::names();
    assert_eq!(names.len(), 24, "expected the 24 fixture machines");
    // Extraction dominates the run time, so spread the machines over a few threads.
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                while let Some(name) = names.get(next.fetch_add(1, Ordering::Relaxed)) {
                    check_standard_placements(name);
                }
            });
        }
    });
}

fn check_standard_placements(name: &str) {
    {
        let t = machine(name);
        let groups = sibling_groups(name);
        let usable = match &t.allowed_cpus {
            Some(a) => t.cpus.intersection(a),
            None => t.cpus.clone(),
        };
        for (spec, result) in standard_placements(&t) {
            let Ok(r) = result else { continue };
            let set: CpuSet = r.cpus.iter().copied().collect();
            assert_eq!(
                set.len(),
                r.cpus.len(),
                "{name} {}: a CPU used twice: {:?}",
                r.name,
                r.cpus
            );
            assert!(
                set.is_subset(&t.cpus),
                "{name} {}: {:?} not all online",
                r.name,
                r.cpus
            );
            assert!(
                set.is_subset(&usable),
                "{name} {}: {:?} not all allowed",
                r.name,
                r.cpus
            );
            // Against hwloc: an NcMt placement takes M threads from each of N cores.
            if let PlacementKind::Grid {
                cores,
                threads_per_core,
            } = spec.kind
            {
                let mut used = 0;
                for g in &groups {
                    let n = g.intersection(&set).len();
                    if n > 0 {
                        used += 1;
                        assert_eq!(
                            n as u32, threads_per_core,
                            "{name} {}: {:?}",
                            r.name, r.cpus
                        );
                    }
                }
                assert_eq!(used, cores, "{name} {}: {:?}", r.name, r.cpus);
            }
            if spec.kind == PlacementKind::All {
                assert_eq!(set, usable, "{name}: all");
            }
        }
    }
}

#[test]
fn live_machine_placements_pin_where_they_say() {
    let t = smtlab_topology::discover(std::path::Path::new("/")).expect("discover /");
    let mut pinned_any = false;
    for (spec, result) in standard_placements(&t) {
        let r = match result {
            Ok(r) => r,
            Err(e) => {
                // Only a lack of hardware may stop a standard placement.
                assert!(e.to_string().contains("needs"), "{}: {e}", spec.text);
                continue;
            }
        };
        let handles: Vec<_> = (0..r.width())
            .map(|i| {
                let cpu = r.cpu_for_thread(i);
                smtlab_placement::pin::spawn_pinned(cpu, format!("{}-{i}", r.name), move || {
                    (cpu, smtlab_placement::pin::current_cpu())
                })
                .unwrap_or_else(|e| panic!("{}: {e}", r.name))
            })
            .collect();
        for h in handles {
            let (wanted, running) = smtlab_fixtures::bounded::join(h, "a pinned thread");
            assert_eq!(running, wanted, "{}", r.name);
            pinned_any = true;
        }
    }
    assert!(pinned_any, "no standard placement resolved on this machine");
}
