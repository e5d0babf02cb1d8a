//! Reading the cgroup v2 hierarchy: where a process's cgroup is, which processes a
//! cgroup holds, and what its `cpu.stat` says. smtlab makes a cgroup for the programs it
//! starts (`smtlab_bench::process`), gives a cgroup's processes one core-scheduling
//! cookie ([`crate::coresched`]) and reads the forced idle the cgroup was charged.
//!
//! Every function takes the `/proc` to read, so tests use trees in temporary
//! directories.

use std::path::{Path, PathBuf};

/// Where the cgroup v2 hierarchy is mounted, from `proc/self/mountinfo`; `None` on a
/// system without one.
pub fn mount_point(proc: &Path) -> Option<PathBuf> {
    let mounts = std::fs::read_to_string(proc.join("self/mountinfo")).ok()?;
    // Fields: id parent major:minor root mountpoint options ... - fstype source ...
    mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2")
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })
}

/// The directory of the cgroup v2 that process `pid` (a number, or `self`) is in.
pub fn dir_of(proc: &Path, pid: &str) -> Option<PathBuf> {
    dir_under(&mount_point(proc)?, proc, pid)
}

/// [`dir_of`] with the hierarchy's mount point already known (for many processes).
pub fn dir_under(mount: &Path, proc: &Path, pid: &str) -> Option<PathBuf> {
    let own = std::fs::read_to_string(proc.join(pid).join("cgroup")).ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(mount.join(path.trim().trim_start_matches('/')))
}

/// The processes in cgroup `dir` (not below it).
pub fn procs(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// `core_sched.force_idle_usec` of cgroup `dir`'s `cpu.stat` in nanoseconds: the forced
/// idle charged to its tasks and those of the cgroups below it, ended ones included.
/// `None` without the line (a kernel without `CONFIG_SCHED_CORE`).
pub fn force_idle_ns(dir: &Path) -> Option<u64> {
    let stat = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
    let usec: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("core_sched.force_idle_usec "))?
        .trim()
        .parse()
        .ok()?;
    usec.checked_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc");
        std::fs::create_dir_all(proc.join("self")).unwrap();
        std::fs::create_dir_all(proc.join("42")).unwrap();
        std::fs::write(
            proc.join("self/mountinfo"),
            "22 1 0:21 / /proc rw - proc proc rw\n\
             41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
        )
        .unwrap();
        std::fs::write(proc.join("self/cgroup"), "4:memory:/x\n0::/user.slice\n").unwrap();
        std::fs::write(proc.join("42/cgroup"), "0::/user.slice/smtlab-1-2/g3\n").unwrap();
        dir
    }

    #[test]
    fn a_process_cgroup_is_found_under_the_v2_mount() {
        let t = tree();
        let proc = t.path().join("proc");
        assert_eq!(
            mount_point(&proc),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            dir_of(&proc, "self"),
            Some(PathBuf::from("/sys/fs/cgroup/unified/user.slice"))
        );
        assert_eq!(
            dir_of(&proc, "42"),
            Some(PathBuf::from(
                "/sys/fs/cgroup/unified/user.slice/smtlab-1-2/g3"
            ))
        );
        assert_eq!(dir_of(&proc, "7"), None);
    }

    #[test]
    fn forced_idle_reads_microseconds_as_nanoseconds_and_its_absence_as_none() {
        let t = tree();
        let d = t.path();
        std::fs::write(
            d.join("cpu.stat"),
            "usage_usec 100\nuser_usec 60\nsystem_usec 40\ncore_sched.force_idle_usec 1234\n",
        )
        .unwrap();
        assert_eq!(force_idle_ns(d), Some(1_234_000));
        std::fs::write(d.join("cpu.stat"), "usage_usec 100\n").unwrap();
        assert_eq!(force_idle_ns(d), None);
        std::fs::write(d.join("cgroup.procs"), "12\n13\n").unwrap();
        assert_eq!(procs(d), [12, 13]);
        assert_eq!(procs(&d.join("none")), Vec::<u32>::new());
    }
}
