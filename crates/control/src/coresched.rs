//! Linux core scheduling (`CONFIG_SCHED_CORE`): a cookie on a set of tasks, so that
//! only tasks of one cookie share a core at a time; a sibling with nothing of the same
//! cookie to run is *forced idle*. smtlab gives a workload's tasks a cookie of their
//! own for a `coresched` cell ([`create`]) and reads what it cost from each task's
//! `core_forceidle_sum` in `/proc/PID/sched` ([`parse_forceidle_ns`]).
//!
//! Nothing needs putting back: a cookie belongs to its tasks and dies with them, and
//! every task a cell starts ends with the cell (its thread, its children's process
//! group and cgroup, killed by the guardian should smtlab die).

use std::io;
use std::path::Path;

use smtlab_model::keys::CookieScope;

use crate::error::ControlError;
use crate::sysfs::Sysfs;
use crate::writes::FileWrite;

/// Why a cookie could not be made (or core scheduling cannot run here).
#[derive(Debug, thiserror::Error)]
pub enum CoreSchedError {
    /// `EINVAL` to `PR_SCHED_CORE`: a kernel built without `CONFIG_SCHED_CORE` (or
    /// older than 5.14).
    #[error(
        "no core scheduling here: this kernel has no CONFIG_SCHED_CORE (prctl PR_SCHED_CORE: EINVAL)"
    )]
    NoKernelSupport,
    /// `ENODEV`: the machine has no SMT (or it is off), so there is no sibling to
    /// protect.
    #[error("no core scheduling here: no SMT siblings online (prctl PR_SCHED_CORE: ENODEV)")]
    NoSmt,
    #[error("cannot give {what} a core-scheduling cookie: {source}")]
    Refused {
        what: String,
        #[source]
        source: io::Error,
    },
    /// A per-process or per-group cookie on a workload that started no process.
    #[error(
        "a cookie per {scope} needs processes the workload keeps from its start, and it has none (it runs in smtlab's threads, or starts a process per sample): use --security thread, whose cookie they inherit"
    )]
    NoProcess { scope: CookieScope },
    /// A cookie per process group where the workload's processes are in smtlab's own
    /// group: the kernel would give it to smtlab, the shell that started it and all
    /// they start afterwards, which would then keep it beyond the cell.
    #[error(
        "a cookie per pgroup needs a workload whose processes lead a group of their own, and this one's are in smtlab's own (the cookie would cover smtlab, the shell that started it and all they start later): use --security process or thread"
    )]
    SharedProcessGroup,
    /// A cookie per cgroup where a workload's process is in smtlab's own cgroup (no
    /// cgroup v2 to make one for it, or no right to): the cookie would cover smtlab and
    /// whatever else shares that cgroup.
    #[error(
        "a cookie per cgroup needs the workload's processes in a cgroup of their own, and process {pid} is in smtlab's own (no cgroup v2 mounted, or no right to make one; the cookie would cover smtlab and all that shares its cgroup): use --security process or thread"
    )]
    SharedCgroup { pid: u32 },
    /// A tenant pair whose partner started no thread on its CPU to give a cookie to.
    #[error("no thread of the partner found pinned to CPU {cpu} to give a cookie of its own")]
    NoPartner { cpu: u32 },
}

/// The kernel's `PIDTYPE_*` for a prctl on `scope` (the values of
/// `PR_SCHED_CORE_SCOPE_*`); a cgroup's cookie goes to each of its processes whole.
fn pid_type(scope: CookieScope) -> libc::c_ulong {
    let t = match scope {
        CookieScope::Thread => libc::PR_SCHED_CORE_SCOPE_THREAD,
        CookieScope::Process | CookieScope::Cgroup => libc::PR_SCHED_CORE_SCOPE_THREAD_GROUP,
        CookieScope::ProcessGroup => libc::PR_SCHED_CORE_SCOPE_PROCESS_GROUP,
    };
    t as libc::c_ulong
}

/// `prctl(PR_SCHED_CORE, cmd, pid, type, arg)`, its errno typed.
fn sched_core(
    cmd: libc::c_int,
    pid: u32,
    scope: CookieScope,
    arg: libc::c_ulong,
) -> Result<(), io::Error> {
    // SAFETY: PR_SCHED_CORE takes plain integers (for GET, `arg` is the address of a
    // u64 the caller owns for the call); the kernel checks the pid and the type.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SCHED_CORE,
            cmd as libc::c_ulong,
            pid as libc::c_ulong,
            pid_type(scope),
            arg,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `EINVAL` and `ENODEV` as the two refusals of the machine, anything else as is.
fn typed(what: impl FnOnce() -> String, e: io::Error) -> CoreSchedError {
    match e.raw_os_error() {
        Some(libc::EINVAL) => CoreSchedError::NoKernelSupport,
        Some(libc::ENODEV) => CoreSchedError::NoSmt,
        _ => CoreSchedError::Refused {
            what: what(),
            source: e,
        },
    }
}

/// Why core scheduling cannot run here, found by asking for this thread's cookie
/// (`PR_SCHED_CORE_GET` fails with `EINVAL` or `ENODEV` as a creation would).
pub fn refusal() -> Option<CoreSchedError> {
    let mut cookie: u64 = 0;
    let addr = &mut cookie as *mut u64 as libc::c_ulong;
    sched_core(libc::PR_SCHED_CORE_GET, 0, CookieScope::Thread, addr)
        .err()
        .map(|e| typed(|| "this thread".into(), e))
}

/// A new cookie for `pid` (0: the calling thread) and, per `scope`, its thread group,
/// process group or cgroup ([`share_with_cgroup`]). Tasks started afterwards inherit it.
pub fn create(pid: u32, scope: CookieScope) -> Result<(), CoreSchedError> {
    if scope == CookieScope::Cgroup {
        return share_with_cgroup(Path::new("/proc"), pid);
    }
    sched_core(libc::PR_SCHED_CORE_CREATE, pid, scope, 0).map_err(|e| {
        typed(
            || match pid {
                0 => "the cell's thread".to_string(),
                p => format!("process {p} ({scope})"),
            },
            e,
        )
    })
}

/// How many times the processes of a cgroup are listed again for any that appeared
/// while the cookie was given (forked by one not yet given it, which then lacks it).
const CGROUP_PASSES: usize = 16;

/// One new cookie for every process of the cgroup `pid` is in, made by a thread that
/// exists for it alone (`PR_SCHED_CORE_CREATE` on itself, `SHARE_TO` each process, so
/// the cookie lives on only in them). A process that already holds a cookie was given
/// its cgroup's by an earlier call of the same cell: nothing to do.
fn share_with_cgroup(proc: &Path, pid: u32) -> Result<(), CoreSchedError> {
    if cookie_of(pid)? != 0 {
        return Ok(());
    }
    let own = crate::cgroup::dir_of(proc, "self");
    let dir = match crate::cgroup::dir_of(proc, &pid.to_string()) {
        Some(d) if Some(&d) != own.as_ref() => d,
        _ => return Err(CoreSchedError::SharedCgroup { pid }),
    };
    let share = move || -> Result<(), CoreSchedError> {
        sched_core(libc::PR_SCHED_CORE_CREATE, 0, CookieScope::Thread, 0)
            .map_err(|e| typed(|| "the cgroup's cookie thread".into(), e))?;
        let mut given: Vec<u32> = Vec::new();
        for _ in 0..CGROUP_PASSES {
            let new: Vec<u32> = crate::cgroup::procs(&dir)
                .into_iter()
                .filter(|p| !given.contains(p))
                .collect();
            if new.is_empty() {
                return Ok(());
            }
            for p in new {
                match sched_core(libc::PR_SCHED_CORE_SHARE_TO, p, CookieScope::Cgroup, 0) {
                    // Gone meanwhile: nothing of it left to protect.
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    r => r.map_err(|e| typed(|| format!("process {p} (cgroup)"), e))?,
                }
                given.push(p);
            }
        }
        Ok(())
    };
    std::thread::spawn(share).join().unwrap_or_else(|_| {
        Err(CoreSchedError::Refused {
            what: format!("process {pid}'s cgroup"),
            source: io::Error::other("the thread giving the cookie panicked"),
        })
    })
}

/// The cookie of thread `tid` (`PR_SCHED_CORE_GET`): 0 for none, else an opaque value
/// the kernel derives from it, the same for every task sharing the cookie.
pub fn cookie_of(tid: u32) -> Result<u64, CoreSchedError> {
    let mut cookie: u64 = 0;
    let addr = &mut cookie as *mut u64 as libc::c_ulong;
    sched_core(libc::PR_SCHED_CORE_GET, tid, CookieScope::Thread, addr)
        .map_err(|e| typed(|| format!("thread {tid}"), e))?;
    Ok(cookie)
}

/// Field `n` (1-based, as in proc(5)) of a `stat` line; the command name in parentheses
/// may itself hold spaces and parentheses, so fields are counted after the last `)`.
pub fn stat_field(stat: &str, n: usize) -> Option<i64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// Whether process `pid` is in this process's own process group (`/proc/PID/stat`).
pub fn in_own_process_group(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // SAFETY: getpgrp has no preconditions and cannot fail.
    stat_field(&stat, 5) == Some(i64::from(unsafe { libc::getpgrp() }))
}

/// Whether process `pid` is in this process's own cgroup (v2), or in none smtlab can
/// tell apart from it (no cgroup v2 mounted).
pub fn in_own_cgroup(proc: &Path, pid: u32) -> bool {
    let theirs = crate::cgroup::dir_of(proc, &pid.to_string());
    theirs.is_none() || theirs == crate::cgroup::dir_of(proc, "self")
}

/// A task that holds a core-scheduling cookie.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CookiedTask {
    pub pid: u32,
    pub tid: u32,
    /// The thread's name (`comm`).
    pub comm: String,
    pub cookie: u64,
}

/// Every task under `proc` that holds a cookie, and how many tasks could not be asked
/// (gone meanwhile, or another user's without the right to trace them); the refusal
/// where the kernel has no core scheduling.
pub fn cookied_tasks(proc: &Path) -> Result<(Vec<CookiedTask>, usize), CoreSchedError> {
    if let Some(why) = refusal() {
        return Err(why);
    }
    let ids = |dir: &Path| -> Vec<u32> {
        let mut v: Vec<u32> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort_unstable();
        v
    };
    let (mut found, mut unasked) = (Vec::new(), 0);
    for pid in ids(proc) {
        let task_dir = proc.join(pid.to_string()).join("task");
        for tid in ids(&task_dir) {
            match cookie_of(tid) {
                Ok(0) => {}
                Ok(cookie) => found.push(CookiedTask {
                    pid,
                    tid,
                    comm: std::fs::read_to_string(task_dir.join(tid.to_string()).join("comm"))
                        .map(|c| c.trim_end().to_string())
                        .unwrap_or_default(),
                    cookie,
                }),
                Err(_) => unasked += 1,
            }
        }
    }
    Ok((found, unasked))
}

/// `core_forceidle_sum` of one `/proc/PID/sched` text in nanoseconds: the time the task
/// ran while a sibling was forced idle for it. The kernel prints it in milliseconds with
/// six decimals (`12.345678`); `None` where the line is absent (no `CONFIG_SCHED_CORE`,
/// or schedstats off: `kernel.sched_schedstats=0`) or malformed.
pub fn parse_forceidle_ns(sched: &str) -> Option<u64> {
    let value = sched.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().ends_with("core_forceidle_sum").then(|| v.trim())
    })?;
    let (ms, frac) = value.split_once('.').unwrap_or((value, "0"));
    if frac.is_empty() || frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ns_part: u64 = format!("{frac:0<6}").parse().ok()?;
    ms.parse::<u64>()
        .ok()?
        .checked_mul(1_000_000)?
        .checked_add(ns_part)
}

/// The forced idle charged to every task of `pids` (each `proc/PID/task/*/sched` under
/// `proc`), summed; `None` where no task shows the line.
pub fn forceidle_of(proc: &Path, pids: &[u32]) -> Option<u64> {
    let mut sum = None;
    for pid in pids {
        let Ok(tasks) = std::fs::read_dir(proc.join(pid.to_string()).join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let text = std::fs::read_to_string(t.path().join("sched")).unwrap_or_default();
            if let Some(ns) = parse_forceidle_ns(&text) {
                sum = Some(sum.unwrap_or(0) + ns);
            }
        }
    }
    sum
}

/// Where the kernel says whether it accounts forced idle, under `proc`.
const SCHEDSTATS: &str = "sys/kernel/sched_schedstats";

/// Whether the kernel accounts forced idle (`sys/kernel/sched_schedstats` under `proc`
/// says 1); without, `cpu.stat` still shows a count, which stays 0.
pub fn schedstats_on(proc: &Path) -> bool {
    std::fs::read_to_string(proc.join(SCHEDSTATS)).is_ok_and(|v| v.trim() == "1")
}

/// The write that switches schedstats on under `sysfs`'s root (`kernel.sched_schedstats`,
/// so the kernel counts forced idle), with the value to put back; `None` where it is on
/// already, or absent (a kernel without `CONFIG_SCHEDSTATS`).
pub fn schedstats_write(sysfs: &Sysfs) -> Result<Option<FileWrite>, ControlError> {
    let path = sysfs.root().join("proc").join(SCHEDSTATS);
    Ok(sysfs
        .read(&path)?
        .filter(|before| before.trim() != "1")
        .map(|before| FileWrite {
            path,
            before,
            value: "1".into(),
        }))
}

/// The forced idle charged so far to this process's tasks and its descendants', in
/// nanoseconds: those in `cgroup` (smtlab's cgroup for the programs it starts) through
/// its `cpu.stat`, which keeps the count of tasks that ended; the rest through each
/// task's `sched`. `None` with schedstats off, or where nothing shows a count.
pub fn forced_idle_ns(proc: &Path, cgroup: Option<&Path>) -> Option<u64> {
    if !schedstats_on(proc) {
        return None;
    }
    let tree = own_tree(proc);
    let counted = |d: &Path| Some((d.to_path_buf(), crate::cgroup::force_idle_ns(d)?));
    let (Some((dir, in_cgroup)), Some(mount)) =
        (cgroup.and_then(counted), crate::cgroup::mount_point(proc))
    else {
        return forceidle_of(proc, &tree);
    };
    let outside: Vec<u32> = tree
        .into_iter()
        .filter(|p| {
            let theirs = crate::cgroup::dir_under(&mount, proc, &p.to_string());
            !theirs.is_some_and(|d| d.starts_with(&dir))
        })
        .collect();
    Some(forceidle_of(proc, &outside).unwrap_or(0) + in_cgroup)
}

/// The threads listed in `task_dir` (`proc/self/task`) pinned to `cpu` alone: a
/// co-run partner's, which are pinned to the sibling before they run anything.
pub fn threads_on(task_dir: &Path, cpu: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(task_dir) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| t.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&tid| pinned_to(tid, cpu))
        .collect()
}

/// Whether thread `tid`'s affinity is `cpu` and nothing else.
fn pinned_to(tid: u32, cpu: u32) -> bool {
    // SAFETY: a zeroed cpu_set_t is the empty set; sched_getaffinity writes at most its
    // size into it and reports a thread that is gone as an error.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid cpu_set_t of `size` bytes owned by this frame.
    if unsafe { libc::sched_getaffinity(tid as libc::pid_t, size, &mut set) } != 0 {
        return false;
    }
    let max = (size * 8) as u32;
    // SAFETY: CPU_ISSET and CPU_COUNT read the set within its size (cpu < max).
    unsafe { cpu < max && libc::CPU_ISSET(cpu as usize, &set) && libc::CPU_COUNT(&set) == 1 }
}

/// This process and its descendants (through `proc/self/task/*/children`, where the
/// kernel has them): the tasks a cell's workload can be among.
pub fn own_tree(proc: &Path) -> Vec<u32> {
    let mut out = vec![std::process::id()];
    let mut i = 0;
    while i < out.len() && out.len() < 4096 {
        out.extend(children(proc, out[i]));
        i += 1;
    }
    out
}

/// The children of every thread of `pid`.
pub fn children(proc: &Path, pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(proc.join(pid.to_string()).join("task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_count_after_the_command_name() {
        // Fields 3.. after the name: state, ppid, pgrp, ..., processor is field 39.
        let mut fields: Vec<String> = vec!["S".into(), "1".into(), "42".into()];
        fields.extend((6..39).map(|i| (1000 + i).to_string()));
        fields.push("3".into());
        fields.push("0".into());
        let stat = format!("42 (a b) c) {}", fields.join(" "));
        let stat = stat.as_str();
        assert_eq!(stat_field(stat, 5), Some(42));
        assert_eq!(stat_field(stat, 39), Some(3));
        assert_eq!(stat_field(stat, 2), None);
    }

    const SCHED: &str = "\
smtlab (4242, #threads: 3)
-------------------------------------------------------------------
se.exec_start                                :      12345678.123456
se.sum_exec_runtime                          :          1234.567890
stats.core_forceidle_sum                     :            12.000345
nr_switches                                  :                  120
";

    #[test]
    fn forced_idle_reads_in_nanoseconds() {
        assert_eq!(parse_forceidle_ns(SCHED), Some(12_000_345));
        let short = "core_forceidle_sum : 3.5\n";
        assert_eq!(parse_forceidle_ns(short), Some(3_500_000));
        assert_eq!(
            parse_forceidle_ns("core_forceidle_sum : 7\n"),
            Some(7_000_000)
        );
    }

    #[test]
    fn a_missing_or_malformed_line_is_no_figure_not_zero() {
        assert_eq!(parse_forceidle_ns("se.exec_start : 1.0\n"), None);
        assert_eq!(parse_forceidle_ns("core_forceidle_sum : -1.0\n"), None);
        assert_eq!(parse_forceidle_ns("core_forceidle_sum : 1.x\n"), None);
        assert_eq!(parse_forceidle_ns("core_forceidle_sum : 1.1234567\n"), None);
        assert_eq!(parse_forceidle_ns(""), None);
    }

    #[test]
    fn the_sum_covers_every_task_of_every_process_given() {
        let dir = std::env::temp_dir().join(format!("smtlab-fi-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (pid, tid, ms) in [(10, 10, "1.000000"), (10, 11, "2.5"), (20, 20, "0.000001")] {
            let t = dir.join(format!("{pid}/task/{tid}"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("sched"), format!("core_forceidle_sum : {ms}\n")).unwrap();
        }
        std::fs::write(dir.join("10/task/10/children"), "20 \n").unwrap();
        assert_eq!(forceidle_of(&dir, &[10, 20]), Some(3_500_001));
        assert_eq!(forceidle_of(&dir, &[10]), Some(3_500_000));
        assert_eq!(forceidle_of(&dir, &[99]), None);
        assert_eq!(children(&dir, 10), [20]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn children_in_smtlabs_cgroup_count_through_it_and_nothing_counts_without_schedstats() {
        let dir = tempfile::tempdir().unwrap();
        let (proc, cg) = (dir.path().join("proc"), dir.path().join("cg"));
        let me = std::process::id();
        let write = |rel: String, text: &str| {
            let path = proc.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("sys/kernel/sched_schedstats".into(), "1\n");
        let mount = format!("41 31 0:38 / {} rw - cgroup2 cgroup2 rw\n", cg.display());
        write("self/mountinfo".into(), &mount);
        write("self/cgroup".into(), "0::/user\n");
        write(
            format!("{me}/task/{me}/sched"),
            "core_forceidle_sum : 1.0\n",
        );
        write(format!("{me}/task/{me}/children"), "20 21");
        // 20 is in smtlab's cgroup for its children, 21 (started elsewhere) is not.
        write("20/cgroup".into(), "0::/user/smtlab-1-2/g0\n");
        write("20/task/20/sched".into(), "core_forceidle_sum : 2.0\n");
        write("21/cgroup".into(), "0::/user\n");
        write("21/task/21/sched".into(), "core_forceidle_sum : 0.5\n");
        let root = cg.join("user/smtlab-1-2");
        std::fs::create_dir_all(&root).unwrap();
        // The cgroup's count holds 20's 2 ms and 3 ms of tasks that ended.
        std::fs::write(root.join("cpu.stat"), "core_sched.force_idle_usec 5000\n").unwrap();
        assert_eq!(forced_idle_ns(&proc, Some(&root)), Some(6_500_000));
        assert_eq!(forced_idle_ns(&proc, None), Some(3_500_000));
        write("sys/kernel/sched_schedstats".into(), "0\n");
        assert_eq!(forced_idle_ns(&proc, Some(&root)), None);
        assert!(in_own_cgroup(&proc, 21) && !in_own_cgroup(&proc, 20));
        assert!(
            in_own_cgroup(&proc, 99),
            "no cgroup known: not one of its own"
        );
    }

    #[test]
    fn a_thread_pinned_to_one_cpu_is_found_by_it() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no arguments and cannot fail.
            let tid = unsafe { libc::gettid() } as u32;
            // SAFETY: a zeroed set with CPU 0 added, passed with its size.
            let pinned = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
            };
            tx.send((tid, pinned)).unwrap();
            let _ = done_rx.recv();
        });
        let (tid, pinned) = rx.recv().unwrap();
        let found = threads_on(Path::new("/proc/self/task"), 0);
        done_tx.send(()).unwrap();
        t.join().unwrap();
        if pinned {
            assert!(found.contains(&tid), "{tid} in {found:?}");
        }
        // The test's own thread is not pinned to CPU 0 alone.
        // SAFETY: gettid has no arguments and cannot fail.
        let me = unsafe { libc::gettid() } as u32;
        assert!(!pinned_to(me, 0) || found.contains(&me));
    }

    #[test]
    fn this_process_is_in_its_own_group_and_no_process_is() {
        assert!(in_own_process_group(std::process::id()));
        assert!(!in_own_process_group(u32::MAX));
    }

    #[test]
    fn the_refusals_of_the_kernel_read_as_one_line_each() {
        let e = typed(String::new, io::Error::from_raw_os_error(libc::EINVAL));
        assert!(e.to_string().contains("CONFIG_SCHED_CORE"), "{e}");
        let e = typed(String::new, io::Error::from_raw_os_error(libc::ENODEV));
        assert!(e.to_string().contains("no SMT"), "{e}");
        let e = typed(|| "x".into(), io::Error::from_raw_os_error(libc::EPERM));
        assert!(e.to_string().starts_with("cannot give x"), "{e}");
        // This machine: either core scheduling works, or one of the typed refusals.
        if let Some(e) = refusal() {
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }
}
