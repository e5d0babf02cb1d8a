//! Kinds of cores on hybrid machines (Intel P/E cores, ARM big.LITTLE), tried in order
//! of how directly the kernel says it:
//!
//! 1. Intel's per-kind PMUs, `/sys/devices/cpu_core/cpus` and `cpu_atom/cpus`;
//! 2. the ARM core part, from `regs/identification/midr_el1` (what hwloc reads) or the
//!    `CPU part` lines of /proc/cpuinfo;
//! 3. `cpu_capacity`, the scheduler's relative performance of each CPU;
//! 4. cpufreq's base (else maximum) frequency.
//!
//! A source counts only when it describes every online CPU and splits them into at
//! least two kinds. Frequencies are evened out first as hwloc does: within CPUs of one
//! base frequency, maximum frequencies less than 10 % apart are one value, because
//! Turbo Boost Max 3.0 and AMD's preferred cores give uniform machines a few faster
//! cores that are not a different kind of core.

use std::collections::BTreeMap;
use std::path::Path;

use smtlab_model::{CoreKind, CpuSet};

use crate::cpuinfo::{ArmPart, CpuInfo};
use crate::sysfs;

/// Maximum frequencies closer than this (in percent of the lower) are the same kind.
const MAX_FREQ_ADJUST_PERCENT: u64 = 10;

pub(crate) fn detect(
    root: &Path,
    cpu_dir: &Path,
    cpus: &CpuSet,
    cpuinfo: Option<&CpuInfo>,
) -> Vec<CoreKind> {
    intel_pmus(root, cpus)
        .or_else(|| arm_parts(cpu_dir, cpus, cpuinfo))
        .or_else(|| capacities(cpu_dir, cpus))
        .or_else(|| frequencies(cpu_dir, cpus))
        .unwrap_or_default()
}

fn hybrid(kinds: Vec<CoreKind>) -> Option<Vec<CoreKind>> {
    (kinds.len() >= 2).then_some(kinds)
}

fn intel_pmus(root: &Path, cpus: &CpuSet) -> Option<Vec<CoreKind>> {
    let mut kinds = Vec::new();
    let mut covered = CpuSet::new();
    // Smallest cores first, as hwloc orders kinds by efficiency.
    for (pmu, name) in [
        ("cpu_lowpower", "IntelLowPower"),
        ("cpu_atom", "IntelAtom"),
        ("cpu_core", "IntelCore"),
    ] {
        let path = root.join("sys/devices").join(pmu).join("cpus");
        let Ok(Some(set)) = sysfs::read_list(&path) else {
            continue;
        };
        let set = set.intersection(cpus).difference(&covered);
        if set.is_empty() {
            continue;
        }
        covered = covered.union(&set);
        kinds.push(CoreKind {
            name: name.into(),
            cpus: set,
            source: format!("sysfs {pmu}/cpus"),
        });
    }
    hybrid(kinds)
}

fn arm_parts(cpu_dir: &Path, cpus: &CpuSet, cpuinfo: Option<&CpuInfo>) -> Option<Vec<CoreKind>> {
    let midr = |cpu: u32| {
        sysfs::read_u64(&cpu_dir.join(format!("cpu{cpu}/regs/identification/midr_el1")))
            .map(ArmPart::from_midr)
    };
    // hwloc checks cpu0 even when offline: the register was read at boot.
    let use_midr = midr(0).is_some() || cpus.first().and_then(midr).is_some();
    let (parts, source): (BTreeMap<u32, ArmPart>, &str) = if use_midr {
        (
            cpus.iter().filter_map(|c| Some((c, midr(c)?))).collect(),
            "midr_el1",
        )
    } else {
        (
            cpuinfo?
                .arm_parts()
                .into_iter()
                .filter(|(n, _)| cpus.contains(*n))
                .collect(),
            "cpuinfo part",
        )
    };
    if parts.len() != cpus.len() {
        return None;
    }
    let capacity = |set: &CpuSet| {
        set.iter()
            .filter_map(|c| sysfs::read_u64(&cpu_dir.join(format!("cpu{c}/cpu_capacity"))))
            .min()
    };
    let mut kinds: Vec<(Option<u64>, CoreKind)> = group(parts)
        .into_iter()
        .map(|(part, set)| {
            (
                capacity(&set),
                CoreKind {
                    name: part.kind_name(),
                    cpus: set,
                    source: source.into(),
                },
            )
        })
        .collect();
    kinds.sort_by_key(|(cap, k)| (*cap, k.cpus.first()));
    hybrid(kinds.into_iter().map(|(_, k)| k).collect())
}

/// Reads one number per online CPU, or `None` if any CPU lacks it.
fn per_cpu(cpus: &CpuSet, mut read: impl FnMut(u32) -> Option<u64>) -> Option<BTreeMap<u32, u64>> {
    cpus.iter().map(|c| Some((c, read(c)?))).collect()
}

/// The CPUs of each value, by value.
fn group<K: Ord>(values: impl IntoIterator<Item = (u32, K)>) -> BTreeMap<K, CpuSet> {
    let mut by_value: BTreeMap<K, CpuSet> = BTreeMap::new();
    for (cpu, v) in values {
        by_value.entry(v).or_default().insert(cpu);
    }
    by_value
}

fn capacities(cpu_dir: &Path, cpus: &CpuSet) -> Option<Vec<CoreKind>> {
    let caps = per_cpu(cpus, |c| {
        sysfs::read_u64(&cpu_dir.join(format!("cpu{c}/cpu_capacity"))).filter(|v| *v > 0)
    })?;
    hybrid(
        group(caps)
            .into_iter()
            .map(|(cap, set)| CoreKind {
                name: format!("capacity-{cap}"),
                cpus: set,
                source: "cpu_capacity".into(),
            })
            .collect(),
    )
}

fn frequencies(cpu_dir: &Path, cpus: &CpuSet) -> Option<Vec<CoreKind>> {
    let khz = |c: u32, file: &str| {
        sysfs::read_u64(&cpu_dir.join(format!("cpu{c}/{file}"))).filter(|v| *v > 0)
    };
    let base = per_cpu(cpus, |c| {
        khz(c, "cpufreq/base_frequency")
            .or_else(|| khz(c, "acpi_cppc/nominal_freq").map(|mhz| mhz * 1000))
    });
    let mut max = per_cpu(cpus, |c| khz(c, "cpufreq/cpuinfo_max_freq"));
    if base.is_none() && max.is_none() {
        return None;
    }
    if let Some(max) = max.as_mut() {
        even_out_max(max, base.as_ref());
    }
    // One class per (base MHz, max MHz) pair, in increasing order.
    let mut classes: BTreeMap<(Option<u64>, Option<u64>), CpuSet> = BTreeMap::new();
    for cpu in cpus.iter() {
        let b = base.as_ref().and_then(|m| m.get(&cpu)).map(|k| k / 1000);
        let m = max.as_ref().and_then(|m| m.get(&cpu)).map(|k| k / 1000);
        classes.entry((b, m)).or_default().insert(cpu);
    }
    let distinct_bases = classes
        .keys()
        .map(|(b, _)| *b)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let bases_name_classes = base.is_some() && distinct_bases == classes.len();
    hybrid(
        classes
            .into_iter()
            .map(|((b, m), set)| {
                let (name, source) = match (b, m) {
                    (Some(b), _) if bases_name_classes => {
                        (format!("base-{b}MHz"), "cpufreq base frequency")
                    }
                    (Some(b), Some(m)) => (
                        format!("base-{b}MHz-max-{m}MHz"),
                        "cpufreq base and max frequency",
                    ),
                    (None, Some(m)) => (format!("max-{m}MHz"), "cpufreq max frequency"),
                    (Some(b), None) => (format!("base-{b}MHz"), "cpufreq base frequency"),
                    (None, None) => ("unknown-frequency".into(), "cpufreq"),
                };
                CoreKind {
                    name,
                    cpus: set,
                    source: source.into(),
                }
            })
            .collect(),
    )
}

/// hwloc's max-frequency adjustment: among CPUs of one base frequency (or all CPUs when
/// no base is known), a spread of maximum frequencies under
/// [`MAX_FREQ_ADJUST_PERCENT`] is boost binning, so every CPU takes the lowest maximum.
fn even_out_max(max: &mut BTreeMap<u32, u64>, base: Option<&BTreeMap<u32, u64>>) {
    let mut groups: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for &cpu in max.keys() {
        let b = base.and_then(|b| b.get(&cpu)).copied().unwrap_or(0);
        groups.entry(b).or_default().push(cpu);
    }
    for members in groups.values() {
        let values = members.iter().filter_map(|c| max.get(c)).copied();
        let (Some(lo), Some(hi)) = (values.clone().min(), values.max()) else {
            continue;
        };
        if lo > 0 && (hi - lo).saturating_mul(100) < lo.saturating_mul(MAX_FREQ_ADJUST_PERCENT) {
            for c in members {
                max.insert(*c, lo);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &Path, rel: &str, content: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    #[test]
    fn boost_binning_is_not_a_kind_but_a_base_split_is() {
        let dir = tempfile::tempdir().unwrap();
        let cpu_dir = dir.path();
        for c in 0..4 {
            let max = if c == 1 { "5200000" } else { "5000000" };
            write(cpu_dir, &format!("cpu{c}/cpufreq/cpuinfo_max_freq"), max);
            write(
                cpu_dir,
                &format!("cpu{c}/cpufreq/base_frequency"),
                "1900000",
            );
        }
        let cpus: CpuSet = (0..4).collect();
        assert!(frequencies(cpu_dir, &cpus).is_none());

        for c in 4..6 {
            write(
                cpu_dir,
                &format!("cpu{c}/cpufreq/cpuinfo_max_freq"),
                "3900000",
            );
            write(
                cpu_dir,
                &format!("cpu{c}/cpufreq/base_frequency"),
                "1400000",
            );
        }
        let cpus: CpuSet = (0..6).collect();
        let kinds = frequencies(cpu_dir, &cpus).unwrap();
        assert_eq!(kinds.len(), 2);
        assert_eq!(kinds[0].name, "base-1400MHz");
        assert_eq!(kinds[0].cpus.to_vec(), vec![4, 5]);
        assert_eq!(kinds[1].cpus.to_vec(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_source_missing_on_some_cpu_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "cpu0/cpu_capacity", "1024");
        write(dir.path(), "cpu1/cpu_capacity", "512");
        let cpus: CpuSet = (0..3).collect();
        assert!(capacities(dir.path(), &cpus).is_none());
        let cpus: CpuSet = (0..2).collect();
        let kinds = capacities(dir.path(), &cpus).unwrap();
        assert_eq!(kinds[0].name, "capacity-512");
    }
}
