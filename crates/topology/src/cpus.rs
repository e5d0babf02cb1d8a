//! Online CPUs, cores, clusters, dies and packages from `/sys/devices/system/cpu`,
//! following hwloc's `look_sysfscpu`:
//!
//! * every `cpuN` directory exists; it is online when the global `online` list says so
//!   or, without that list, when its own `online` file is absent, empty or non-zero;
//!   an online CPU without a `topology/` directory is left out (hwloc cannot place it);
//! * each set file (`core_cpus`, `package_cpus`, ...) is intersected with those CPUs,
//!   and an object is created only by the first CPU of its set, so stale files of
//!   offline CPUs and CPUs described twice do not make extra objects;
//! * a CPU that is not the first of its core looks no further (cluster, die, package),
//!   nor does one that is not the first of its cluster (die, package), and so on;
//! * the ids (`core_id`, `physical_package_id`, ...) only label objects; -1 or a
//!   missing file means unknown, and never merges or splits anything.

use std::fs;
use std::path::{Path, PathBuf};

use smtlab_model::CpuSet;
use smtlab_model::cpuset::MAX_CPU;

use crate::TopologyError;
use crate::sysfs::{self, read_cpuset, read_id, read_list};

/// A core, cluster, die or package before it is placed in the hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Obj {
    pub(crate) id: Option<u32>,
    pub(crate) cpus: CpuSet,
}

#[derive(Debug, Default)]
pub(crate) struct CpuScan {
    /// Every `cpuN` directory.
    pub(crate) existing: CpuSet,
    /// Online CPUs with topology information: hwloc's PUs.
    pub(crate) cpus: CpuSet,
    pub(crate) cores: Vec<Obj>,
    pub(crate) clusters: Vec<Obj>,
    pub(crate) dies: Vec<Obj>,
    pub(crate) packages: Vec<Obj>,
}

/// Whether SMT siblings that report different `core_id`s are separate cores (AMD
/// Bulldozer compute units). hwloc decides on the first multi-thread core it meets and
/// treats "not decided yet" like "yes", which only matters for single-CPU cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThreadsOwnCore {
    Undecided,
    Yes,
    No,
}

/// The set of CPUs sharing `cpu`'s core: new kernels' `core_cpus`, else the older
/// `thread_siblings`, list form preferred.
pub(crate) fn core_set(topo: &Path) -> Result<Option<CpuSet>, TopologyError> {
    Ok(core_set_named(topo)?.map(|(set, _)| set))
}

/// [`core_set`] with the file it came from, for errors that must name it.
fn core_set_named(topo: &Path) -> Result<Option<(CpuSet, PathBuf)>, TopologyError> {
    for (list, mask) in [
        ("core_cpus_list", "core_cpus"),
        ("thread_siblings_list", "thread_siblings"),
    ] {
        if let Some(set) = read_cpuset(topo, list, mask)? {
            let name = if topo.join(list).exists() { list } else { mask };
            return Ok(Some((set, topo.join(name))));
        }
    }
    Ok(None)
}

/// Refuses core sets that cannot come from a kernel: a CPU's core that leaves the CPU
/// itself out (all files empty, or garbage from a hand-edited tree), and a CPU named as
/// a sibling by another that does not name it back. hwloc would silently build odd
/// cores from such files (one core of three threads beside cores of two); a refusal
/// naming the file is more useful than a topology nobody has.
fn check_core_sets(sets: &[(u32, CpuSet, PathBuf)]) -> Result<(), TopologyError> {
    for (cpu, set, path) in sets {
        if !set.contains(*cpu) {
            return Err(TopologyError::Invalid {
                path: path.clone(),
                reason: format!(
                    "CPU {cpu}'s core set {{{set}}} does not contain CPU {cpu} itself \
                     (expected a list of the CPUs sharing its core, {cpu} among them)"
                ),
            });
        }
    }
    for (cpu, set, path) in sets {
        for sibling in set.iter().filter(|s| s != cpu) {
            if let Some((_, theirs, their_path)) = sets.iter().find(|(c, ..)| *c == sibling)
                && !theirs.contains(*cpu)
            {
                return Err(TopologyError::Invalid {
                    path: their_path.clone(),
                    reason: format!(
                        "CPU {sibling}'s core set {{{theirs}}} leaves out CPU {cpu}, which \
                         {} names as its sibling (expected siblings to name each other)",
                        smtlab_model::quote::path(path)
                    ),
                });
            }
        }
    }
    Ok(())
}

fn package_set(topo: &Path) -> Result<Option<CpuSet>, TopologyError> {
    match read_cpuset(topo, "package_cpus_list", "package_cpus")? {
        Some(s) => Ok(Some(s)),
        None => read_cpuset(topo, "core_siblings_list", "core_siblings"),
    }
}

/// Lists the `cpuN` directories under `cpu_dir`.
fn existing_cpus(cpu_dir: &Path) -> Result<CpuSet, TopologyError> {
    let entries = fs::read_dir(cpu_dir).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => {
            TopologyError::Missing {
                path: cpu_dir.to_path_buf(),
                expected: "the Linux CPU directory with cpu0, cpu1, ... \
                           (is the root a Linux system or a saved copy of its /sys and /proc?)"
                    .into(),
            }
        }
        _ => TopologyError::Io {
            path: cpu_dir.to_path_buf(),
            error: source,
        },
    })?;
    let mut set = CpuSet::new();
    for entry in entries {
        let entry = entry.map_err(|source| TopologyError::Io {
            path: cpu_dir.to_path_buf(),
            error: source,
        })?;
        if let Some(n) = crate::sysfs::numbered(&entry.file_name(), "cpu")
            && n <= MAX_CPU
        {
            set.insert(n);
        }
    }
    if set.is_empty() {
        return Err(TopologyError::Missing {
            path: cpu_dir.join("cpu0"),
            expected: "at least one cpuN directory".into(),
        });
    }
    Ok(set)
}

/// The per-CPU `online` file: absent or empty means online (CPUs that cannot be
/// unplugged, and ia64's empty files); otherwise the number decides.
fn per_cpu_online(path: &Path) -> Result<bool, TopologyError> {
    let Some(text) = sysfs::read_opt(path, sysfs::SYSFS_LIMIT)? else {
        return Ok(true);
    };
    let t = sysfs::trim(&text);
    if t.is_empty() {
        return Ok(true);
    }
    t.parse::<i64>()
        .map(|v| v != 0)
        .map_err(|_| TopologyError::Invalid {
            path: path.to_path_buf(),
            reason: format!(
                "{} is not 0 or 1 (expected the CPU's online state)",
                smtlab_model::quote::quoted(t)
            ),
        })
}

/// Objects of one kind and the CPUs they cover.
#[derive(Debug, Default)]
struct Level {
    objs: Vec<Obj>,
    covered: CpuSet,
}

impl Level {
    /// Adds `obj` unless an object of the same kind already covers some of its CPUs:
    /// hwloc merges equal sets and refuses ones that partially overlap.
    fn insert(&mut self, obj: Obj) {
        if obj.cpus.is_empty() || !obj.cpus.is_disjoint(&self.covered) {
            return;
        }
        self.covered = self.covered.union(&obj.cpus);
        self.objs.push(obj);
    }
}

pub(crate) fn scan(cpu_dir: &Path, amd_compute_units: bool) -> Result<CpuScan, TopologyError> {
    let existing = existing_cpus(cpu_dir)?;
    let cpus = online_cpus(cpu_dir, &existing)?;
    let mut s = Scanner {
        cpu_dir,
        online: &cpus,
        cores: Level::default(),
        clusters: Level::default(),
        dies: Level::default(),
        packages: Level::default(),
        threads_own_core: if amd_compute_units {
            ThreadsOwnCore::Undecided
        } else {
            ThreadsOwnCore::No
        },
        saw_set_files: false,
        core_sets: Vec::new(),
    };
    for i in cpus.iter() {
        s.add_cpu(i)?;
    }
    if !s.saw_set_files {
        let first = cpus.first().unwrap_or(0);
        return Err(TopologyError::Missing {
            path: cpu_dir.join(format!("cpu{first}/topology")),
            expected: "core_cpus or thread_siblings (and package_cpus or core_siblings) \
                       in the CPUs' topology directories"
                .into(),
        });
    }
    check_core_sets(&s.core_sets)?;
    let (cores, clusters, dies, packages) =
        (s.cores.objs, s.clusters.objs, s.dies.objs, s.packages.objs);
    Ok(CpuScan {
        existing,
        cpus,
        cores,
        clusters,
        dies,
        packages,
    })
}

/// The CPUs of `existing` that are online and have a topology directory.
fn online_cpus(cpu_dir: &Path, existing: &CpuSet) -> Result<CpuSet, TopologyError> {
    // An empty global list would make every CPU offline; the per-CPU files then know
    // better, as on kernels that lack the global file altogether.
    let global_online = read_list(&cpu_dir.join("online"))?.filter(|s| !s.is_empty());
    let mut cpus = CpuSet::new();
    for cpu in existing.iter() {
        let dir = cpu_dir.join(format!("cpu{cpu}"));
        let online = match &global_online {
            Some(set) => set.contains(cpu),
            None => per_cpu_online(&dir.join("online"))?,
        };
        if online && dir.join("topology").is_dir() {
            cpus.insert(cpu);
        }
    }
    if cpus.is_empty() {
        return Err(TopologyError::Invalid {
            path: cpu_dir.to_path_buf(),
            reason: format!(
                "none of the CPUs {existing} is online with a topology/ directory \
                 (expected cpuN/topology/ for online CPUs)"
            ),
        });
    }
    Ok(cpus)
}

/// What [`scan`] gathers from the online CPUs' topology directories, CPU by CPU.
struct Scanner<'a> {
    cpu_dir: &'a Path,
    online: &'a CpuSet,
    cores: Level,
    clusters: Level,
    dies: Level,
    packages: Level,
    threads_own_core: ThreadsOwnCore,
    saw_set_files: bool,
    core_sets: Vec<(u32, CpuSet, PathBuf)>,
}

impl Scanner<'_> {
    /// Adds the objects that online CPU `i` is the first CPU of.
    fn add_cpu(&mut self, i: u32) -> Result<(), TopologyError> {
        let online = self.online;
        let topo = self.cpu_dir.join(format!("cpu{i}/topology"));
        let not_first_core = self.add_core(i, &topo)?;
        let mut not_first_cluster = not_first_core;
        let mut not_first_die = not_first_core;

        let mut cluster = None;
        if !not_first_core
            && let Some(set) = read_cpuset(&topo, "cluster_cpus_list", "cluster_cpus")?
        {
            let set = set.intersection(online);
            if set.len() == 1 {
                // A cluster of one CPU says nothing a core does not.
            } else if set.first() != Some(i) {
                not_first_cluster = true;
                not_first_die = true;
            } else {
                cluster = Some(set);
            }
        }

        let mut die = None;
        if !not_first_cluster && let Some(set) = read_cpuset(&topo, "die_cpus_list", "die_cpus")? {
            let set = set.intersection(online);
            if set.len() == 1 {
                // Non-x86 kernels write one-CPU dies by default.
            } else if set.first() != Some(i) {
                not_first_die = true;
            } else {
                die = Some(set);
            }
            if cluster.is_some() && cluster == die {
                cluster = None;
            }
        }

        if !not_first_die && let Some(set) = package_set(&topo)? {
            self.saw_set_files = true;
            let set = set.intersection(online);
            if cluster.as_ref() == Some(&set) {
                cluster = None;
            }
            if set.first() == Some(i) {
                let id = read_id(&topo.join("physical_package_id"));
                self.packages.insert(Obj { id, cpus: set });
            }
        }

        if let Some(cpus) = cluster {
            let id = read_id(&topo.join("cluster_id"));
            self.clusters.insert(Obj { id, cpus });
        }
        if let Some(cpus) = die {
            let id = read_id(&topo.join("die_id"));
            self.dies.insert(Obj { id, cpus });
        }
        Ok(())
    }

    /// Adds CPU `i`'s core (or, where threads own their core, the thread); true when
    /// `i` is not the first CPU of its core.
    fn add_core(&mut self, i: u32, topo: &Path) -> Result<bool, TopologyError> {
        let Some((set, path)) = core_set_named(topo)? else {
            return Ok(false);
        };
        self.saw_set_files = true;
        let coreset = set.intersection(self.online);
        self.core_sets.push((i, coreset.clone(), path));
        let mut my_core_id = None;
        if coreset.len() > 1 && self.threads_own_core == ThreadsOwnCore::Undecided {
            let mine = read_id(&topo.join("core_id"));
            let sibling = coreset.iter().find(|&c| c != i);
            let theirs = sibling
                .and_then(|s| read_id(&self.cpu_dir.join(format!("cpu{s}/topology/core_id"))));
            self.threads_own_core = if mine == theirs {
                ThreadsOwnCore::No
            } else {
                ThreadsOwnCore::Yes
            };
            my_core_id = Some(mine);
        }
        let not_first_core = coreset.first() != Some(i);
        let per_thread = self.threads_own_core != ThreadsOwnCore::No;
        if !not_first_core || per_thread {
            let id = my_core_id.unwrap_or_else(|| read_id(&topo.join("core_id")));
            let cpus = if per_thread {
                std::iter::once(i).collect()
            } else {
                coreset
            };
            self.cores.insert(Obj { id, cpus });
        }
        Ok(not_first_core)
    }
}
