//! Hand-built topologies for unit tests, so resolution is tested without sysfs.

use smtlab_model::{Core, CpuSet, NumaNode, Package, SmtInfo, TOPOLOGY_SCHEMA, Topology};

pub fn core(id: u32, cpus: &[u32]) -> Core {
    Core {
        id,
        cpus: cpus.iter().copied().collect(),
        die_id: None,
        cluster_id: None,
        kind: None,
    }
}

/// A topology from packages given as lists of cores' CPUs; one NUMA node per package.
pub fn topo(packages: &[&[&[u32]]]) -> Topology {
    let packages: Vec<Package> = packages
        .iter()
        .enumerate()
        .map(|(p, cores)| {
            let cores: Vec<Core> = cores
                .iter()
                .enumerate()
                .map(|(i, cpus)| core(i as u32, cpus))
                .collect();
            Package {
                id: Some(p as u32),
                cpus: cores.iter().flat_map(|c| c.cpus.iter()).collect(),
                cores,
            }
        })
        .collect();
    finish(packages, vec![])
}

/// Fills the derived fields (CPU list, NUMA nodes, SMT counts) from the cores.
pub fn finish(packages: Vec<Package>, loose: Vec<Core>) -> Topology {
    let numa_nodes = packages
        .iter()
        .enumerate()
        .map(|(i, p)| NumaNode {
            id: i as u32,
            cpus: p.cpus.clone(),
            memory_bytes: None,
        })
        .collect();
    let mut t = Topology {
        schema: TOPOLOGY_SCHEMA.into(),
        root: "/test".into(),
        cpus: CpuSet::new(),
        offline_cpus: CpuSet::new(),
        allowed_cpus: None,
        packages,
        cores_without_package: loose,
        numa_nodes,
        smt: SmtInfo {
            threads_per_core_min: 0,
            threads_per_core_max: 0,
            control: None,
            active: None,
        },
        caches: vec![],
        core_kinds: vec![],
        cpu_model: None,
        vendor: None,
        virtualization: None,
    };
    t.cpus = t.cores().flat_map(|c| c.cpus.iter()).collect();
    let sizes: Vec<u32> = t.cores().map(|c| c.cpus.len() as u32).collect();
    t.smt.threads_per_core_min = sizes.iter().copied().min().unwrap_or(0);
    t.smt.threads_per_core_max = sizes.iter().copied().max().unwrap_or(0);
    t
}

/// `packages` x `cores` x `threads`, numbered as Intel firmware does: CPU n's siblings
/// are n + k * (packages * cores), so the first threads of all cores come first.
pub fn intel(packages: u32, cores: u32, threads: u32) -> Topology {
    let total = packages * cores;
    let layout: Vec<Vec<Vec<u32>>> = (0..packages)
        .map(|p| {
            (0..cores)
                .map(|c| {
                    let n = p * cores + c;
                    (0..threads).map(|t| n + t * total).collect()
                })
                .collect()
        })
        .collect();
    from_vecs(&layout)
}

/// Like [`intel`] but with siblings numbered adjacently (AMD, POWER, most ARM):
/// core n holds CPUs n*threads .. n*threads + threads - 1.
pub fn adjacent(packages: u32, cores: u32, threads: u32) -> Topology {
    let layout: Vec<Vec<Vec<u32>>> = (0..packages)
        .map(|p| {
            (0..cores)
                .map(|c| {
                    let n = p * cores + c;
                    (0..threads).map(|t| n * threads + t).collect()
                })
                .collect()
        })
        .collect();
    from_vecs(&layout)
}

pub fn from_vecs(layout: &[Vec<Vec<u32>>]) -> Topology {
    let cores: Vec<Vec<&[u32]>> = layout
        .iter()
        .map(|p| p.iter().map(|c| c.as_slice()).collect())
        .collect();
    let pkgs: Vec<&[&[u32]]> = cores.iter().map(|p| p.as_slice()).collect();
    topo(&pkgs)
}

/// One package like an Alder Lake laptop: 6 P-cores with 2 threads (CPUs 0-11), then
/// 8 single-thread E-cores (CPUs 12-19), as the 20em64t-hybrid fixture.
pub fn hybrid() -> Topology {
    let mut layout: Vec<Vec<u32>> = (0..6).map(|c| vec![2 * c, 2 * c + 1]).collect();
    layout.extend((12..20).map(|c| vec![c]));
    let mut t = from_vecs(&[layout]);
    for c in &mut t.packages[0].cores {
        c.kind = Some(
            if c.cpus.len() == 2 {
                "IntelCore"
            } else {
                "IntelAtom"
            }
            .into(),
        );
    }
    t
}
