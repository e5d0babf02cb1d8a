//! NUMA nodes from `/sys/devices/system/node`, as hwloc's `look_sysfsnode` lists them:
//! the ids in `node/online` (else every `nodeN` directory), each with the CPUs of its
//! `cpulist`/`cpumap`. A node without CPUs (memory only, DAX, CXL) is kept with an empty
//! set; a listed node whose directory lacks a CPU map is skipped. Overlapping CPU sets
//! are kept as the kernel gives them (hwloc drops all but the first unless told
//! otherwise; the kernel never writes them, only hand-made trees do).
//!
//! A kernel without NUMA support has no `node/` directory; the machine is then one node
//! holding every CPU and all memory, which is what hwloc reports too.

use std::fs;
use std::path::Path;

use smtlab_model::{CpuSet, NumaNode};

use crate::TopologyError;
use crate::sysfs::{self, read_cpuset, read_list};

pub(crate) fn scan(root: &Path, cpus: &CpuSet) -> Result<Vec<NumaNode>, TopologyError> {
    let node_dir = root.join("sys/devices/system/node");
    let mut nodes = Vec::new();
    if node_dir.is_dir() {
        let ids = match read_list(&node_dir.join("online"))?.filter(|s| !s.is_empty()) {
            Some(ids) => ids,
            None => node_dirs(&node_dir),
        };
        for id in ids.iter() {
            let dir = node_dir.join(format!("node{id}"));
            let Some(set) = read_cpuset(&dir, "cpulist", "cpumap")? else {
                continue;
            };
            nodes.push(NumaNode {
                id,
                cpus: set.intersection(cpus),
                memory_bytes: sysfs::read_info(&dir.join("meminfo"))
                    .and_then(|t| mem_total_bytes(&t)),
            });
        }
    }
    if nodes.is_empty() {
        nodes.push(NumaNode {
            id: 0,
            cpus: cpus.clone(),
            memory_bytes: sysfs::read_info(&root.join("proc/meminfo"))
                .and_then(|t| mem_total_bytes(&t)),
        });
    }
    Ok(nodes)
}

fn node_dirs(node_dir: &Path) -> CpuSet {
    let Ok(entries) = fs::read_dir(node_dir) else {
        return CpuSet::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| crate::sysfs::numbered(&e.file_name(), "node"))
        .filter(|n| *n <= smtlab_model::cpuset::MAX_CPU)
        .collect()
}

/// The `MemTotal` line of /proc/meminfo (`MemTotal: 16318080 kB`) or of a node's
/// meminfo (`Node 0 MemTotal: 8159040 kB`), in bytes.
pub(crate) fn mem_total_bytes(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.contains("MemTotal:"))?;
    let rest = line.split_once("MemTotal:")?.1.trim();
    let mut parts = rest.split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    let factor = match parts.next() {
        Some("kB") | Some("KB") | Some("KiB") | None => 1024,
        Some("MB") | Some("MiB") => 1 << 20,
        Some("B") => 1,
        Some(_) => return None,
    };
    n.checked_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_lines() {
        assert_eq!(
            mem_total_bytes("\nNode 16 MemTotal:      1020176 kB\nNode 16 MemFree: 1 kB\n"),
            Some(1_020_176 * 1024)
        );
        assert_eq!(
            mem_total_bytes("MemTotal:     1603993424 kB\n"),
            Some(1_603_993_424 * 1024)
        );
        assert_eq!(mem_total_bytes("MemTotal: lots\n"), None);
        assert_eq!(mem_total_bytes(""), None);
        assert_eq!(mem_total_bytes("MemTotal: 99999999999999999999 kB"), None);
    }
}
