//! Resolution of a [`PlacementSpec`] against a [`Topology`]: which cores, which CPUs, and
//! in which order threads receive them. The rules are documented at the crate root.

use smtlab_model::placement::Named;
use smtlab_model::unit::plural;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use smtlab_model::{
    CoreOrder, CpuOrder, CpuSet, PlacementKind, PlacementSpec, ResolvedPlacement, Topology,
};

use crate::PlacementError;
use crate::spec::{canonical_name, parse};

/// The usable CPUs of one core, with what compact ordering sorts it by.
#[derive(Debug, Clone)]
struct Slot {
    /// Index into `Topology::packages`; `packages.len()` for CPUs outside any package,
    /// which therefore form one group of their own.
    group: usize,
    /// (group, NUMA node, die, cluster, first CPU); unknown levels sort last.
    key: (usize, u32, u32, u32, u32),
    /// Ascending.
    cpus: Vec<u32>,
}

/// Resolves `spec` on `topo` (see the [crate] documentation for the rules).
///
/// Errors when the machine lacks what the spec asks for; the message names the placement
/// and says what the machine has. `os` always resolves, to an empty CPU list.
pub fn resolve(spec: &PlacementSpec, topo: &Topology) -> Result<ResolvedPlacement, PlacementError> {
    let mut name = canonical_name(spec);
    if topo.uniprocessor_kernel && one_cpu(&spec.kind) {
        // Nothing to take offline: the kernel itself is paper 000's 1T-UP.
        name = smtlab_model::placement::UP_KERNEL_NAME.to_string();
    }
    let label = if spec.text.is_empty() || spec.text == name {
        name.clone()
    } else {
        format!("{} ({name})", crate::spec::shorten(&spec.text))
    };
    let usable = usable_cpus(topo);
    // When a cpuset or affinity mask hides CPUs, errors say so and give the machine's
    // total, or the user would hunt for SMT that the machine does have.
    let restricted = topo.allowed_cpus.is_some() && usable != topo.cpus;
    let scope = Scope {
        topo,
        usable,
        restricted,
        label,
    };
    let usable = &scope.usable;

    if usable.is_empty() && spec.kind != PlacementKind::Os {
        return Err(scope.unsatisfiable(
            "at least one CPU".into(),
            "no online CPU this process may use".into(),
        ));
    }

    let chosen: Vec<Slot> = match scope.as_grid(&spec.kind)? {
        PlacementKind::Grid {
            cores,
            threads_per_core,
        } => scope.grid(cores as usize, threads_per_core as usize, spec.core_order)?,
        PlacementKind::All => order_cores(slots(topo, usable), spec.core_order),
        PlacementKind::Cores => {
            let mut chosen = order_cores(slots(topo, usable), spec.core_order);
            for slot in &mut chosen {
                slot.cpus.truncate(1);
            }
            chosen
        }
        PlacementKind::Cpus { cpus } => {
            check_available(&cpus, topo, usable, &scope.label)?;
            order_cores(slots(topo, &cpus), spec.core_order)
        }
        // Unpinned: no CPUs, and the counts say nothing was chosen.
        PlacementKind::Os => vec![],
        PlacementKind::Uniprocessor
        | PlacementKind::UniprocessorKernel
        | PlacementKind::HalfCores { .. } => {
            unreachable!("mapped to a grid above")
        }
    };

    let groups: BTreeSet<usize> = chosen.iter().map(|s| s.group).collect();
    Ok(ResolvedPlacement {
        name,
        spec: spec.text.clone(),
        cpus: order_cpus(&chosen, spec.cpu_order),
        cores: chosen.len() as u32,
        threads_per_core: chosen.iter().map(|s| s.cpus.len()).max().unwrap_or(0) as u32,
        packages: groups.len() as u32,
        core_order: spec.core_order,
        cpu_order: spec.cpu_order,
        core_kinds: kinds_of(topo, &chosen),
    })
}

/// The placements of one CPU that a uniprocessor kernel makes its own 1T-UP.
fn one_cpu(kind: &PlacementKind) -> bool {
    matches!(
        kind,
        PlacementKind::Uniprocessor
            | PlacementKind::UniprocessorKernel
            | PlacementKind::Grid {
                cores: 1,
                threads_per_core: 1,
            }
    )
}

/// What a placement is resolved against: the machine, the CPUs this process may use,
/// and the placement's name for errors.
struct Scope<'a> {
    topo: &'a Topology,
    usable: CpuSet,
    /// A cpuset or affinity mask hides some of the online CPUs.
    restricted: bool,
    label: String,
}

impl Scope<'_> {
    /// What the usable CPUs have, and the machine's total when a mask hides some.
    fn scoped(&self, here: String, total: String) -> String {
        if self.restricted && here != total {
            format!(
                "{here} among the CPUs this process may use ({}), {total} in total",
                self.usable
            )
        } else {
            here
        }
    }

    fn unsatisfiable(&self, needs: String, has: String) -> PlacementError {
        PlacementError::Unsatisfiable {
            placement: self.label.clone(),
            needs,
            has,
        }
    }

    /// `kind`, with the placements that are grids under another name mapped to theirs.
    fn as_grid(&self, kind: &PlacementKind) -> Result<PlacementKind, PlacementError> {
        Ok(match kind {
            PlacementKind::UniprocessorKernel if !self.topo.uniprocessor_kernel => {
                return Err(self.unsatisfiable(
                    "a kernel built without CONFIG_SMP".into(),
                    "an SMP kernel (`SMP` in uname -v: 1c1t-up takes the other CPUs offline instead)"
                        .into(),
                ));
            }
            // The uniprocessor placement takes the CPU 1c1t takes; leaving the others
            // offline is the caller's part (smtlab_control), around the measurement.
            PlacementKind::Uniprocessor | PlacementKind::UniprocessorKernel => {
                PlacementKind::Grid {
                    cores: 1,
                    threads_per_core: 1,
                }
            }
            // Half the usable cores (their first half in core order), the other half left
            // for a server's clients: a grid of that many cores.
            PlacementKind::HalfCores { threads_per_core } => {
                let cores = slots(self.topo, &self.usable).len();
                if cores < 2 {
                    return Err(self.unsatisfiable(
                        "at least 2 cores (half for the workload, half for its clients)".into(),
                        self.scoped(
                            plural(cores, "core"),
                            plural(slots(self.topo, &self.topo.cpus).len(), "core"),
                        ),
                    ));
                }
                PlacementKind::Grid {
                    cores: (cores / 2) as u32,
                    threads_per_core: *threads_per_core,
                }
            }
            other => other.clone(),
        })
    }

    /// `n` cores with `m` threads each, SMT-capable cores first.
    fn grid(&self, n: usize, m: usize, order: CoreOrder) -> Result<Vec<Slot>, PlacementError> {
        let all = slots(self.topo, &self.usable);
        let max_threads = all.iter().map(|s| s.cpus.len()).max().unwrap_or(0);
        if m > max_threads {
            return Err(self.unsatisfiable(
                format!("{m} threads per core"),
                describe_threads(self.topo, &all, self.restricted.then_some(&self.usable)),
            ));
        }
        let fitting: Vec<Slot> = all.iter().filter(|s| s.cpus.len() >= m).cloned().collect();
        // On hybrid machines every grid starts with the SMT-capable cores, so that
        // 1c1t and 1c2t run on the same kind of core and their ratio is SMT's alone.
        let (widest, narrower): (Vec<Slot>, Vec<Slot>) = fitting
            .into_iter()
            .partition(|s| s.cpus.len() == max_threads);
        let fitting: Vec<Slot> = widest.into_iter().chain(narrower).collect();
        if fitting.len() < n {
            return Err(self.too_few_cores(n, m, fitting.len(), all.len()));
        }
        let mut chosen = order_cores(fitting, order);
        chosen.truncate(n);
        for slot in &mut chosen {
            slot.cpus.truncate(m);
        }
        Ok(chosen)
    }

    /// The error of a grid of `n` cores with `m` threads where `fitting` of the `usable`
    /// cores have that many.
    fn too_few_cores(&self, n: usize, m: usize, fitting: usize, usable: usize) -> PlacementError {
        let whole = slots(self.topo, &self.topo.cpus);
        let (needs, has) = if m == 1 {
            (
                plural(n, "core"),
                self.scoped(fitting.to_string(), whole.len().to_string()),
            )
        } else {
            let whole_fitting = whole.iter().filter(|s| s.cpus.len() >= m).count();
            let describe = |fitting: usize, of: usize| {
                let such = plural(fitting, "such core");
                format!("{such} (of {})", plural(of, "core"))
            };
            (
                format!("{} with {m} threads each", plural(n, "core")),
                self.scoped(
                    describe(fitting, usable),
                    describe(whole_fitting, whole.len()),
                ),
            )
        };
        self.unsatisfiable(needs, has)
    }
}

/// The distinct kinds of the chosen cores in order of first use; empty when the topology
/// names no kinds.
fn kinds_of(topo: &Topology, chosen: &[Slot]) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for slot in chosen {
        let Some(&first) = slot.cpus.first() else {
            continue;
        };
        let kind = topo
            .core_of(first)
            .and_then(|c| c.kind.clone())
            .or_else(|| {
                topo.core_kinds
                    .iter()
                    .find(|k| k.cpus.contains(first))
                    .map(|k| k.name.clone())
            });
        if let Some(kind) = kind
            && !kinds.contains(&kind)
        {
            kinds.push(kind);
        }
    }
    kinds
}

/// The placements worth comparing on `topo`, each with its resolution or why it fails:
/// `1c1t`, `1c2t`, `2c1t`, `2c2t`, `2c1t/scatter` (only with more than one package),
/// `1cKt` for the largest thread count per core K when K > 2 (POWER's SMT4 and SMT8),
/// `cores` and `all`.
///
/// Failing entries stay in the list, so a report can say "1c2t: no SMT" instead of
/// silently leaving a column out.
pub fn standard_placements(
    topo: &Topology,
) -> Vec<(PlacementSpec, Result<ResolvedPlacement, PlacementError>)> {
    let usable = usable_cpus(topo);
    let all = slots(topo, &usable);
    let packages: BTreeSet<usize> = all
        .iter()
        .map(|s| s.group)
        .filter(|g| *g < topo.packages.len())
        .collect();
    let max_threads = all.iter().map(|s| s.cpus.len()).max().unwrap_or(0);

    let grid = [
        Named::OneCore,
        Named::Siblings,
        Named::TwoCores,
        Named::TwoCoresSmt,
    ];
    let mut texts: Vec<String> = grid.iter().map(Named::to_string).collect();
    if packages.len() > 1 {
        texts.push("2c1t/scatter".into());
    }
    if max_threads > 2 {
        texts.push(format!("1c{max_threads}t"));
    }
    texts.extend([Named::Cores, Named::All].map(|p| p.to_string()));

    texts
        .iter()
        .filter_map(|t| parse(t).ok())
        .map(|spec| {
            let resolved = resolve(&spec, topo);
            (spec, resolved)
        })
        .collect()
}

/// `texts` without those that resolve on `topo` to the placement of one listed before
/// them, and a line for each left out: on a uniprocessor kernel `1c1t`, `1c1t-up` and
/// `1t-up-kernel` are one placement, which a run measures once rather than as two cells
/// of one name, and which is then written `1t-up-kernel` (so its cells are never taken
/// for an SMP kernel's `1c1t` by `compare`). A text that does not parse or resolve
/// stays, for its caller to refuse or skip.
pub fn distinct(texts: &[String], topo: &Topology) -> (Vec<String>, Vec<String>) {
    let mut kept: Vec<String> = Vec::new();
    let mut names: Vec<(String, String)> = Vec::new();
    let mut left_out = Vec::new();
    for text in texts {
        let Ok(placement) = parse(text).and_then(|spec| resolve(&spec, topo)) else {
            kept.push(text.clone());
            continue;
        };
        match names.iter().find(|(name, _)| *name == placement.name) {
            Some((name, first)) => left_out.push(format!(
                "{text}: the same placement as {first} here ({name}), measured once"
            )),
            None => {
                kept.push(
                    if placement.name == smtlab_model::placement::UP_KERNEL_NAME {
                        placement.name.clone()
                    } else {
                        text.clone()
                    },
                );
                names.push((placement.name, text.clone()));
            }
        }
    }
    (kept, left_out)
}

/// Online CPUs this process may run on.
pub(crate) fn usable_cpus(topo: &Topology) -> CpuSet {
    match &topo.allowed_cpus {
        Some(allowed) => topo.cpus.intersection(allowed),
        None => topo.cpus.clone(),
    }
}

/// The cores of `topo` restricted to `wanted`, in compact order.
///
/// Defensive against imperfect topologies: a CPU listed in two cores is used in the first
/// only, and a wanted CPU that no core lists becomes a core of its own, so `all` still
/// covers every CPU and no CPU is handed out twice.
fn slots(topo: &Topology, wanted: &CpuSet) -> Vec<Slot> {
    let mut taken = CpuSet::new();
    let mut out = Vec::new();
    let loose_group = topo.packages.len();
    let cores = topo
        .packages
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.cores.iter().map(move |c| (i, c)))
        .chain(topo.cores_without_package.iter().map(|c| (loose_group, c)));
    for (group, core) in cores {
        let cpus = core.cpus.intersection(wanted).difference(&taken);
        let Some(first) = cpus.first() else { continue };
        taken = taken.union(&cpus);
        out.push(Slot {
            group,
            key: (
                group,
                numa_node_of(topo, first),
                core.die_id.unwrap_or(u32::MAX),
                core.cluster_id.unwrap_or(u32::MAX),
                first,
            ),
            cpus: cpus.to_vec(),
        });
    }
    for cpu in wanted.difference(&taken).iter() {
        let group = topo.package_index_of(cpu).unwrap_or(loose_group);
        out.push(Slot {
            group,
            key: (group, numa_node_of(topo, cpu), u32::MAX, u32::MAX, cpu),
            cpus: vec![cpu],
        });
    }
    out.sort_by_key(|s| s.key);
    out
}

fn numa_node_of(topo: &Topology, cpu: u32) -> u32 {
    topo.numa_nodes
        .iter()
        .filter(|n| n.cpus.contains(cpu))
        .map(|n| n.id)
        .min()
        .unwrap_or(u32::MAX)
}

/// Puts compact-ordered cores into the requested order.
fn order_cores(compact: Vec<Slot>, order: CoreOrder) -> Vec<Slot> {
    match order {
        CoreOrder::Compact => compact,
        CoreOrder::Scatter => {
            let mut groups: BTreeMap<usize, VecDeque<Slot>> = BTreeMap::new();
            for slot in compact {
                groups.entry(slot.group).or_default().push_back(slot);
            }
            let mut out = Vec::new();
            while !groups.is_empty() {
                groups.retain(|_, queue| {
                    if let Some(slot) = queue.pop_front() {
                        out.push(slot);
                    }
                    !queue.is_empty()
                });
            }
            out
        }
    }
}

/// Flattens the chosen cores' CPUs in thread-assignment order.
fn order_cpus(chosen: &[Slot], order: CpuOrder) -> Vec<u32> {
    match order {
        CpuOrder::Spread => {
            let depth = chosen.iter().map(|s| s.cpus.len()).max().unwrap_or(0);
            (0..depth)
                .flat_map(|slot| chosen.iter().filter_map(move |s| s.cpus.get(slot).copied()))
                .collect()
        }
        CpuOrder::Siblings => chosen.iter().flat_map(|s| s.cpus.iter().copied()).collect(),
        CpuOrder::Linear => {
            let mut cpus: Vec<u32> = chosen.iter().flat_map(|s| s.cpus.iter().copied()).collect();
            cpus.sort_unstable();
            cpus
        }
    }
}

/// Threads per core as a user would describe the machine: `1 (no SMT)`, `2`, `at most 2`;
/// with `restricted` (the usable CPUs, when fewer than the online ones) also what the
/// whole machine has, when that differs.
fn describe_threads(topo: &Topology, usable: &[Slot], restricted: Option<&CpuSet>) -> String {
    let range = |slots: &[Slot]| {
        let max = slots.iter().map(|s| s.cpus.len()).max().unwrap_or(0);
        let min = slots.iter().map(|s| s.cpus.len()).min().unwrap_or(0);
        (min, max)
    };
    let (min, max) = range(usable);
    if let Some(allowed) = restricted {
        let (whole_min, whole_max) = range(&slots(topo, &topo.cpus));
        if whole_max > max {
            return format!(
                "{} among the CPUs this process may use ({allowed}), {} in total",
                count_threads(min, max),
                count_threads(whole_min, whole_max)
            );
        }
    }
    if max == 1 {
        // With SMT switched off the hardware has siblings but Linux offlined them;
        // saying so lets the user switch it back on instead of buying a new machine.
        match topo.smt.control.as_deref() {
            Some(c @ ("off" | "forceoff")) => {
                format!("1 (SMT is switched off: smt/control is {c})")
            }
            _ => "1 (no SMT)".into(),
        }
    } else {
        count_threads(min, max)
    }
}

fn count_threads(min: usize, max: usize) -> String {
    if min == max {
        max.to_string()
    } else {
        format!("at most {max}")
    }
}

/// Checks that every CPU of an explicit list is usable; names the ones that are not.
fn check_available(
    cpus: &CpuSet,
    topo: &Topology,
    usable: &CpuSet,
    label: &str,
) -> Result<(), PlacementError> {
    let not_online = cpus.difference(&topo.cpus);
    let not_allowed = cpus.difference(usable).difference(&not_online);
    let mut problems = Vec::new();
    if !not_online.is_empty() {
        problems.push(format!(
            "{} not online (online: {})",
            cpus_are(&not_online),
            topo.cpus
        ));
    }
    if !not_allowed.is_empty() {
        problems.push(format!(
            "{} outside this process's CPU affinity or cpuset (allowed: {usable})",
            cpus_are(&not_allowed)
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(PlacementError::CpusUnavailable {
            placement: label.to_string(),
            reason: problems.join("; "),
        })
    }
}

fn cpus_are(set: &CpuSet) -> String {
    if set.len() == 1 {
        format!("CPU {set} is")
    } else {
        format!("CPUs {set} are")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_fixtures::build::*;

    fn cpus(spec: &str, topo: &Topology) -> Vec<u32> {
        resolve(&parse(spec).unwrap(), topo)
            .unwrap_or_else(|e| panic!("{spec}: {e}"))
            .cpus
    }

    fn err(spec: &str, topo: &Topology) -> String {
        match resolve(&parse(spec).unwrap(), topo) {
            Ok(r) => panic!("{spec} resolved to {:?}", r.cpus),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn grid_on_two_intel_packages() {
        // 2 packages x 8 cores x 2 threads; siblings n and n+16; package 1 is 8-15,24-31.
        let t = intel(2, 8, 2);
        assert_eq!(cpus("1c1t", &t), [0]);
        assert_eq!(cpus("1c2t", &t), [0, 16]);
        assert_eq!(cpus("2T", &t), [0, 16]);
        assert_eq!(cpus("2c1t", &t), [0, 1]);
        assert_eq!(cpus("2c1t/scatter", &t), [0, 8]);
        assert_eq!(cpus("2c2t", &t), [0, 1, 16, 17]);
        assert_eq!(cpus("2c2t/siblings", &t), [0, 16, 1, 17]);
        assert_eq!(cpus("2c2t/linear", &t), [0, 1, 16, 17]);
        assert_eq!(cpus("4c1t/scatter", &t), [0, 8, 1, 9]);
        assert_eq!(
            cpus("4c2t/scatter/siblings", &t),
            [0, 16, 8, 24, 1, 17, 9, 25]
        );
        assert_eq!(cpus("10c1t", &t), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(cpus("16c2t", &t), (0..32).collect::<Vec<_>>());
        let r = resolve(&parse("4T").unwrap(), &t).unwrap();
        assert_eq!(r.name, "2c2t");
        assert_eq!(r.spec, "4T");
        assert_eq!((r.cores, r.threads_per_core, r.packages), (2, 2, 1));
        let r = resolve(&parse("2P/scatter").unwrap(), &t).unwrap();
        assert_eq!(r.name, "2c1t/scatter");
        assert_eq!((r.cores, r.threads_per_core, r.packages), (2, 1, 2));
    }

    #[test]
    fn uniprocessor_takes_the_cpu_of_1c1t() {
        let t = intel(2, 8, 2);
        let r = resolve(&parse("1T-UP").unwrap(), &t).unwrap();
        assert_eq!(r.cpus, cpus("1c1t", &t));
        assert_eq!(r.name, "1c1t-up");
        assert!(r.is_uniprocessor());
        assert!(
            !resolve(&parse("1c1t").unwrap(), &t)
                .unwrap()
                .is_uniprocessor()
        );
    }

    #[test]
    fn a_uniprocessor_kernel_names_its_one_cpu_1t_up_kernel() {
        let smp = adjacent(1, 1, 1);
        let why = err("1t-up-kernel", &smp);
        assert!(
            why.starts_with("1t-up-kernel needs a kernel built without CONFIG_SMP"),
            "{why}"
        );
        assert_eq!(resolve(&parse("1c1t").unwrap(), &smp).unwrap().name, "1c1t");
        let mut up = smp.clone();
        up.uniprocessor_kernel = true;
        for spec in ["1t-up-kernel", "1c1t", "1T-UP"] {
            let r = resolve(&parse(spec).unwrap(), &up).unwrap();
            assert_eq!(
                (r.name.as_str(), r.cpus.as_slice()),
                ("1t-up-kernel", &[0][..]),
                "{spec}"
            );
            // No CPU to take offline: the kernel has no other.
            assert!(!r.is_uniprocessor(), "{spec}");
        }
        assert_eq!(resolve(&parse("os").unwrap(), &up).unwrap().name, "os");
    }

    #[test]
    fn placements_of_one_name_are_listed_once() {
        let texts = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let mut up = adjacent(1, 1, 1);
        up.uniprocessor_kernel = true;
        let (kept, left_out) = distinct(&texts(&["1c1t", "1t-up-kernel", "1T-UP", "os"]), &up);
        assert_eq!(kept, ["1t-up-kernel", "os"]);
        assert_eq!(
            left_out,
            [
                "1t-up-kernel: the same placement as 1c1t here (1t-up-kernel), measured once",
                "1T-UP: the same placement as 1c1t here (1t-up-kernel), measured once",
            ]
        );
        // On an SMP kernel they are three placements; what does not resolve stays.
        let smp = adjacent(1, 2, 2);
        let asked = texts(&["1c1t", "1c1t-up", "1c2t", "1t-up-kernel", "9c1t", "bogus"]);
        let (kept, left_out) = distinct(&asked, &smp);
        assert_eq!((kept, left_out.len()), (asked, 0));
        let (kept, _) = distinct(&texts(&["1c2t", "1c2t/compact"]), &smp);
        assert_eq!(kept, ["1c2t"]);
    }

    #[test]
    fn grid_with_adjacent_siblings() {
        let t = adjacent(1, 4, 2);
        assert_eq!(cpus("1c2t", &t), [0, 1]);
        assert_eq!(cpus("2c2t", &t), [0, 2, 1, 3]);
        assert_eq!(cpus("2c2t/siblings", &t), [0, 1, 2, 3]);
        assert_eq!(cpus("2c2t/linear", &t), [0, 1, 2, 3]);
        // Scatter on one package is compact.
        assert_eq!(cpus("2c1t/scatter", &t), cpus("2c1t", &t));
        let r = resolve(&parse("2c1t/scatter").unwrap(), &t).unwrap();
        assert_eq!(r.name, "2c1t/scatter");
    }

    #[test]
    fn smt4_takes_the_lowest_threads_of_a_core() {
        let t = adjacent(2, 2, 4);
        assert_eq!(cpus("1c4t", &t), [0, 1, 2, 3]);
        assert_eq!(cpus("1c2t", &t), [0, 1]);
        assert_eq!(cpus("2c3t/scatter", &t), [0, 8, 1, 9, 2, 10]);
        assert_eq!(
            err("1c8t", &t),
            "1c8t needs 8 threads per core; this machine has 4"
        );
    }

    #[test]
    fn unsatisfiable_requests_say_what_the_machine_has() {
        let two = adjacent(1, 2, 1);
        assert_eq!(
            err("1c2t", &two),
            "1c2t needs 2 threads per core; this machine has 1 (no SMT)"
        );
        assert_eq!(
            err("2T", &two),
            "2T (1c2t) needs 2 threads per core; this machine has 1 (no SMT)"
        );
        assert_eq!(err("4c1t", &two), "4c1t needs 4 cores; this machine has 2");
        assert_eq!(
            err("1c1t", &finish(vec![], vec![])),
            "1c1t needs at least one CPU; this machine has no online CPU this process may use"
        );

        // One SMT core among 14, as a hybrid part with most P-cores disabled.
        let mut layout = vec![vec![0, 1]];
        layout.extend((2..15).map(|c| vec![c]));
        let t = from_vecs(&[layout]);
        assert_eq!(
            err("2c2t", &t),
            "2c2t needs 2 cores with 2 threads each; this machine has 1 such core (of 14 cores)"
        );
        assert_eq!(
            err("1c3t", &t),
            "1c3t needs 3 threads per core; this machine has at most 2"
        );
        assert_eq!(cpus("1c2t", &t), [0, 1]);

        let mut off = adjacent(1, 2, 1);
        off.smt.control = Some("off".into());
        assert_eq!(
            err("1c2t", &off),
            "1c2t needs 2 threads per core; this machine has 1 (SMT is switched off: smt/control is off)"
        );
    }

    #[test]
    fn hybrid_machines_use_smt_capable_cores_for_smt_placements() {
        let t = hybrid();
        assert_eq!(cpus("1c2t", &t), [0, 1]);
        assert_eq!(cpus("1c1t", &t), [0]);
        let kinds = |spec: &str| resolve(&parse(spec).unwrap(), &t).unwrap().core_kinds;
        assert_eq!(kinds("1c1t"), ["IntelCore"]);
        assert_eq!(kinds("1c2t"), ["IntelCore"]);
        assert_eq!(kinds("8c1t"), ["IntelCore", "IntelAtom"]);
        assert!(
            resolve(&parse("1c1t").unwrap(), &intel(1, 2, 2))
                .unwrap()
                .core_kinds
                .is_empty()
        );
        assert_eq!(cpus("6c2t/siblings", &t), (0..12).collect::<Vec<_>>());
        assert_eq!(cpus("8c1t", &t), [0, 2, 4, 6, 8, 10, 12, 13]);
        assert_eq!(
            cpus("cores", &t),
            [0, 2, 4, 6, 8, 10, 12, 13, 14, 15, 16, 17, 18, 19]
        );
        assert!(err("7c2t", &t).ends_with("this machine has 6 such cores (of 14 cores)"));
        let r = resolve(&parse("all").unwrap(), &t).unwrap();
        assert_eq!((r.cores, r.threads_per_core, r.packages), (14, 2, 1));
        // spread: first threads of all 14 cores, then the P-cores' second threads.
        assert_eq!(
            r.cpus[..14],
            [0, 2, 4, 6, 8, 10, 12, 13, 14, 15, 16, 17, 18, 19]
        );
        assert_eq!(r.cpus[14..], [1, 3, 5, 7, 9, 11]);
    }

    #[test]
    fn hybrid_smt_core_later_in_numbering_is_still_found() {
        // E-cores numbered first: 1c2t must skip them rather than fail.
        let mut layout: Vec<Vec<u32>> = (0..4).map(|c| vec![c]).collect();
        layout.push(vec![4, 5]);
        let t = from_vecs(&[layout]);
        assert_eq!(cpus("1c2t", &t), [4, 5]);
        assert_eq!(cpus("1c1t", &t), [4]);
        // One SMT-capable core only: the second comes from the others.
        assert_eq!(cpus("2c1t", &t), [4, 0]);
    }

    #[test]
    fn all_and_cores() {
        let t = intel(2, 2, 2);
        // Package 0: cores (0,4) (1,5); package 1: (2,6) (3,7).
        assert_eq!(cpus("cores", &t), [0, 1, 2, 3]);
        assert_eq!(cpus("cores/scatter", &t), [0, 2, 1, 3]);
        assert_eq!(cpus("all", &t), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(cpus("all/siblings", &t), [0, 4, 1, 5, 2, 6, 3, 7]);
        assert_eq!(cpus("all/scatter", &t), [0, 2, 1, 3, 4, 6, 5, 7]);
        assert_eq!(cpus("all/linear", &t), [0, 1, 2, 3, 4, 5, 6, 7]);
        let r = resolve(&parse("cores").unwrap(), &t).unwrap();
        assert_eq!(
            (r.name.as_str(), r.cores, r.threads_per_core, r.packages),
            ("cores", 4, 1, 2)
        );
        let r = resolve(&parse("ALL").unwrap(), &t).unwrap();
        assert_eq!(
            (r.name.as_str(), r.cores, r.threads_per_core, r.packages),
            ("all", 4, 2, 2)
        );
    }

    #[test]
    fn os_pins_nothing() {
        let r = resolve(&parse("os").unwrap(), &intel(1, 2, 2)).unwrap();
        assert_eq!(r.name, "os");
        assert!(r.cpus.is_empty() && !r.pinned());
        assert_eq!((r.cores, r.threads_per_core, r.packages), (0, 0, 0));
        // Even a machine with nothing usable can run unpinned.
        assert!(resolve(&parse("os").unwrap(), &finish(vec![], vec![])).is_ok());
    }

    #[test]
    fn explicit_cpu_lists() {
        let t = intel(2, 8, 2);
        assert_eq!(cpus("cpus=0,4", &t), [0, 4]);
        let r = resolve(&parse("cpus=16,0,1").unwrap(), &t).unwrap();
        assert_eq!(r.name, "cpus=0-1,16");
        assert_eq!(r.cpus, [0, 1, 16]);
        assert_eq!((r.cores, r.threads_per_core, r.packages), (2, 2, 1));
        assert_eq!(cpus("cpus=0,1,16/siblings", &t), [0, 16, 1]);
        assert_eq!(cpus("cpus=8,0/scatter", &t), [0, 8]);

        let two = adjacent(1, 2, 1);
        assert_eq!(
            err("cpus=0,9", &two),
            "cpus=0,9: CPU 9 is not online (online: 0-1)"
        );
        assert_eq!(
            err("cpus=2-3", &two),
            "cpus=2-3: CPUs 2-3 are not online (online: 0-1)"
        );
    }

    trait WithAllowed {
        fn clone_with_allowed(&self, cpus: &[u32]) -> Topology;
    }

    impl WithAllowed for Topology {
        fn clone_with_allowed(&self, cpus: &[u32]) -> Topology {
            let mut t = self.clone();
            t.allowed_cpus = Some(cpus.iter().copied().collect());
            t
        }
    }

    #[test]
    fn allowed_cpus_restrict_everything() {
        let mut t = intel(2, 2, 2);
        t.allowed_cpus = Some([0, 1, 2, 3].into_iter().collect());
        assert_eq!(cpus("all", &t), [0, 1, 2, 3]);
        assert_eq!(cpus("2c1t/scatter", &t), [0, 2]);
        assert_eq!(
            err("1c2t", &t),
            "1c2t needs 2 threads per core; this machine has 1 among the CPUs this process may use (0-3), 2 in total"
        );
        assert_eq!(
            err("3c1t", &t.clone_with_allowed(&[0, 1])),
            "3c1t needs 3 cores; this machine has 2 among the CPUs this process may use (0-1), 4 in total"
        );
        assert_eq!(err("5c1t", &t), "5c1t needs 5 cores; this machine has 4");
        assert_eq!(
            err("3c2t", &t.clone_with_allowed(&[0, 1, 2, 4, 5])),
            "3c2t needs 3 cores with 2 threads each; this machine has 2 such cores (of 3 cores) \
             among the CPUs this process may use (0-2,4-5), 4 such cores (of 4 cores) in total"
        );
        // Restricted to one package: nothing is hidden that would change the answer.
        assert_eq!(
            err("1c4t", &t.clone_with_allowed(&[0, 1, 4, 5])),
            "1c4t needs 4 threads per core; this machine has 2"
        );
        assert_eq!(
            err("cpus=3-4,9", &t),
            "cpus=3-4,9: CPU 9 is not online (online: 0-7); CPU 4 is outside this process's CPU affinity or cpuset (allowed: 0-3)"
        );
        // Sibling 4 hidden: core (0,4) can no longer host 1c2t, core (1,5) can.
        t.allowed_cpus = Some([0, 1, 5].into_iter().collect());
        assert_eq!(cpus("1c2t", &t), [1, 5]);
        t.allowed_cpus = Some(CpuSet::new());
        assert!(err("all", &t).contains("no online CPU this process may use"));
    }

    #[test]
    fn cores_without_package_are_one_group() {
        // A PS3: no package ids, one core with two threads.
        let t = finish(vec![], vec![core(0, &[0, 1])]);
        assert_eq!(cpus("1c2t", &t), [0, 1]);
        let r = resolve(
            &parse("2c1t/scatter").unwrap(),
            &finish(vec![], vec![core(0, &[0]), core(1, &[1])]),
        )
        .unwrap();
        assert_eq!(r.cpus, [0, 1]);
        assert_eq!(r.packages, 1);
    }

    #[test]
    fn inconsistent_topologies_never_hand_out_a_cpu_twice() {
        // CPU 1 claimed by two cores; CPU 3 by none.
        let mut t = finish(vec![], vec![core(0, &[0, 1]), core(1, &[1, 2])]);
        t.cpus.insert(3);
        let r = resolve(&parse("all").unwrap(), &t).unwrap();
        let mut sorted = r.cpus.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1, 2, 3]);
        assert_eq!(cpus("cores", &t), [0, 2, 3]);
    }

    #[test]
    fn compact_order_follows_numa_die_and_cluster() {
        // One package, cores listed out of order: NUMA node, then die, then cluster decide.
        let mut t = from_vecs(&[vec![vec![0], vec![1], vec![2], vec![3]]]);
        t.numa_nodes = vec![
            smtlab_model::NumaNode {
                id: 0,
                cpus: [2, 3].into_iter().collect(),
                memory_bytes: None,
            },
            smtlab_model::NumaNode {
                id: 1,
                cpus: [0, 1].into_iter().collect(),
                memory_bytes: None,
            },
        ];
        t.packages[0].cores[2].cluster_id = Some(1);
        t.packages[0].cores[3].cluster_id = Some(0);
        assert_eq!(cpus("4c1t", &t), [3, 2, 0, 1]);
    }

    #[test]
    fn standard_set_depends_on_the_machine() {
        let names = |t: &Topology| -> Vec<String> {
            standard_placements(t)
                .into_iter()
                .map(|(s, _)| canonical_name(&s))
                .collect()
        };
        assert_eq!(
            names(&intel(2, 8, 2)),
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
        assert_eq!(
            names(&adjacent(1, 8, 4)),
            ["1c1t", "1c2t", "2c1t", "2c2t", "1c4t", "cores", "all"]
        );
        let two = adjacent(1, 2, 1);
        assert_eq!(
            names(&two),
            ["1c1t", "1c2t", "2c1t", "2c2t", "cores", "all"]
        );
        let results = standard_placements(&two);
        assert!(
            results[1]
                .1
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("no SMT")
        );
        assert_eq!(results[2].1.as_ref().unwrap().cpus, [0, 1]);
        assert_eq!(results[5].1.as_ref().unwrap().cpus, [0, 1]);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// Random machines: up to 3 packages of up to 5 cores of 1-4 threads, CPUs
        /// numbered in a shuffled order, an optional affinity restriction.
        fn machines() -> impl Strategy<Value = Topology> {
            (
                proptest::collection::vec(proptest::collection::vec(1usize..=4, 1..=5), 1..=3),
                any::<u64>(),
                proptest::option::of(proptest::collection::btree_set(0u32..64, 0..40)),
            )
                .prop_map(|(shape, seed, allowed)| {
                    let total: usize = shape.iter().flatten().sum();
                    let mut ids: Vec<u32> = (0..total as u32).collect();
                    let mut x = seed | 1;
                    for i in (1..ids.len()).rev() {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        ids.swap(i, (x % (i as u64 + 1)) as usize);
                    }
                    let mut next = ids.into_iter();
                    let layout: Vec<Vec<Vec<u32>>> = shape
                        .iter()
                        .map(|p| p.iter().map(|&n| next.by_ref().take(n).collect()).collect())
                        .collect();
                    let mut t = from_vecs(&layout);
                    t.allowed_cpus = allowed.map(|a| a.into_iter().collect());
                    t
                })
        }

        fn specs() -> impl Strategy<Value = String> {
            prop_oneof![
                (1u32..8, 1u32..5, 0usize..3, 0usize..4).prop_map(|(n, m, co, cpo)| {
                    format!(
                        "{n}c{m}t{}{}",
                        ["", "/compact", "/scatter"][co],
                        ["", "/spread", "/siblings", "/linear"][cpo]
                    )
                }),
                Just("all".to_string()),
                Just("all/scatter/siblings".to_string()),
                Just("cores".to_string()),
                Just("cores/scatter".to_string()),
                Just("os".to_string()),
                "cpus=[0-9]{1,2}(,[0-9]{1,2}){0,3}",
            ]
        }

        proptest! {
            #[test]
            fn resolved_cpus_are_distinct_usable_and_counted(t in machines(), text in specs()) {
                let spec = parse(&text).unwrap();
                let usable = usable_cpus(&t);
                match resolve(&spec, &t) {
                    Ok(r) => {
                        let set: CpuSet = r.cpus.iter().copied().collect();
                        prop_assert_eq!(set.len(), r.cpus.len(), "duplicate CPU in {:?}", r.cpus);
                        prop_assert!(set.is_subset(&usable));
                        if let PlacementKind::Grid { cores, threads_per_core } = spec.kind {
                            prop_assert_eq!(r.cpus.len() as u32, cores * threads_per_core);
                            prop_assert_eq!(r.cores, cores);
                            prop_assert_eq!(r.threads_per_core, threads_per_core);
                            for &c in &r.cpus {
                                let same_core = r.cpus.iter().filter(|&&o| t.core_of(o).map(|k| &k.cpus) == t.core_of(c).map(|k| &k.cpus)).count() as u32;
                                prop_assert_eq!(same_core, threads_per_core);
                            }
                        }
                        if spec.kind == PlacementKind::All {
                            prop_assert_eq!(set, usable);
                        }
                        if spec.cpu_order == CpuOrder::Linear {
                            prop_assert!(r.cpus.windows(2).all(|w| w[0] < w[1]));
                        }
                    }
                    Err(e) => {
                        let msg = e.to_string();
                        prop_assert!(!msg.contains('\n'));
                        prop_assert!(matches!(e, PlacementError::Unsatisfiable { .. } | PlacementError::CpusUnavailable { .. }), "{}", msg);
                    }
                }
            }

            #[test]
            fn a_grid_fails_only_when_the_machine_lacks_the_cores(t in machines(), n in 1u32..8, m in 1u32..5) {
                let usable = usable_cpus(&t);
                let fitting = t.cores().filter(|c| c.cpus.intersection(&usable).len() >= m as usize).count();
                let r = resolve(&parse(&format!("{n}c{m}t")).unwrap(), &t);
                prop_assert_eq!(r.is_ok(), fitting >= n as usize, "{:?}", r);
            }

            #[test]
            fn standard_placements_never_reuse_a_cpu(t in machines()) {
                for (_, r) in standard_placements(&t) {
                    if let Ok(r) = r {
                        let set: CpuSet = r.cpus.iter().copied().collect();
                        prop_assert_eq!(set.len(), r.cpus.len());
                    }
                }
            }
        }
    }
}
