//! CPU caches from `cpuN/cache/indexK/`.
//!
//! Each instance is described by every CPU that shares it; it is kept once per
//! (level, type, CPUs). hwloc keeps only the description read from the first CPU of the
//! set, which loses a cache when that CPU's `indexK` is missing (hand-edited trees such
//! as 8em64t-2s4c-asymcaches); reading it from any sharer loses nothing.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use smtlab_model::{Cache, CacheType, CpuSet};

use crate::TopologyError;
use crate::cpus::core_set;
use crate::sysfs::{self, read_cpuset};

pub(crate) fn scan(cpu_dir: &Path, cpus: &CpuSet) -> Result<Vec<Cache>, TopologyError> {
    let mut caches: Vec<Cache> = Vec::new();
    let mut seen: HashSet<(u8, CacheType, CpuSet)> = HashSet::new();
    for cpu in cpus.iter() {
        let cache_dir = cpu_dir.join(format!("cpu{cpu}/cache"));
        for index in index_dirs(&cache_dir) {
            let dir = cache_dir.join(format!("index{index}"));
            if let Some(cache) = read_one(cpu_dir, cpu, &dir, cpus)?
                && seen.insert((cache.level, cache.cache_type, cache.cpus.clone()))
            {
                caches.push(cache);
            }
        }
    }
    caches.sort_by_key(|c| (c.level, c.cache_type, c.cpus.first()));
    Ok(caches)
}

fn index_dirs(cache_dir: &Path) -> Vec<u32> {
    let Ok(entries) = fs::read_dir(cache_dir) else {
        return Vec::new();
    };
    let mut v: Vec<u32> = entries
        .filter_map(Result::ok)
        .filter_map(|e| crate::sysfs::numbered(&e.file_name(), "index"))
        .collect();
    v.sort_unstable();
    v
}

fn read_one(
    cpu_dir: &Path,
    cpu: u32,
    dir: &Path,
    online: &CpuSet,
) -> Result<Option<Cache>, TopologyError> {
    let Some(mut shared) = read_cpuset(dir, "shared_cpu_list", "shared_cpu_map")? else {
        return Ok(None);
    };
    if shared.is_empty() {
        // Some ia64 kernels write an empty map for L3 and L2i; hwloc then takes the core.
        if let Some(core) = core_set(&cpu_dir.join(format!("cpu{cpu}/topology")))? {
            shared = core;
        }
    }
    let cpus = shared.intersection(online);
    if cpus.is_empty() {
        return Ok(None);
    }
    let Some(level) = sysfs::read_u64(&dir.join("level")).and_then(|l| u8::try_from(l).ok()) else {
        return Ok(None);
    };
    let cache_type = match sysfs::read_trimmed(&dir.join("type")) {
        Some(t) if t.starts_with("Data") => CacheType::Data,
        Some(t) if t.starts_with("Instruction") => CacheType::Instruction,
        _ => CacheType::Unified,
    };
    // The levels hwloc can represent: L1..L5, instruction caches up to L3.
    let valid = match cache_type {
        CacheType::Instruction => (1..=3).contains(&level),
        _ => (1..=5).contains(&level),
    };
    if !valid {
        return Ok(None);
    }
    Ok(Some(Cache {
        level,
        cache_type,
        size_bytes: sysfs::read_info(&dir.join("size"))
            .and_then(|s| sysfs::parse_size_bytes(&s))
            .filter(|b| *b > 0),
        line_bytes: sysfs::read_u64(&dir.join("coherency_line_size"))
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v > 0),
        // 0 means fully associative on ia64 and ppc and -1 the same on x86: no way count.
        ways: sysfs::read_i64(&dir.join("ways_of_associativity"))
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| *v > 0),
        cpus,
    }))
}
