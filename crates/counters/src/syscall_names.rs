//! x86_64 system call numbers to names and groups, for the calls servers and
//! benchmarks commonly make (paper 003 Fig 7 groups by the resource used).
//!
//! Grouping choices: socket calls and `sendfile` (file to socket) are network; readiness
//! waits (`poll`, `select`, `epoll_*`) are network too, because servers are what spend
//! time in them; `futex`, signals, sleeps and scheduling are process; System V shared
//! memory is memory, the other System V IPC is process. Unknown numbers keep their
//! number and land in "other". On other architectures every call is "other" with no
//! name: the numbers differ, and a wrong name is worse than none.

use smtlab_model::counters::syscalls::SyscallGroup;

#[cfg(target_arch = "x86_64")]
const TABLE: &[(i64, &str, SyscallGroup)] = {
    use SyscallGroup::{File as F, Memory as M, Network as N, Other as O, Process as P};
    &[
        (0, "read", F),
        (1, "write", F),
        (2, "open", F),
        (3, "close", F),
        (4, "stat", F),
        (5, "fstat", F),
        (6, "lstat", F),
        (7, "poll", N),
        (8, "lseek", F),
        (9, "mmap", M),
        (10, "mprotect", M),
        (11, "munmap", M),
        (12, "brk", M),
        (13, "rt_sigaction", P),
        (14, "rt_sigprocmask", P),
        (15, "rt_sigreturn", P),
        (16, "ioctl", F),
        (17, "pread64", F),
        (18, "pwrite64", F),
        (19, "readv", F),
        (20, "writev", F),
        (21, "access", F),
        (22, "pipe", F),
        (23, "select", N),
        (24, "sched_yield", P),
        (25, "mremap", M),
        (26, "msync", M),
        (27, "mincore", M),
        (28, "madvise", M),
        (29, "shmget", M),
        (30, "shmat", M),
        (31, "shmctl", M),
        (32, "dup", F),
        (33, "dup2", F),
        (34, "pause", P),
        (35, "nanosleep", P),
        (36, "getitimer", O),
        (37, "alarm", O),
        (38, "setitimer", O),
        (39, "getpid", P),
        (40, "sendfile", N),
        (41, "socket", N),
        (42, "connect", N),
        (43, "accept", N),
        (44, "sendto", N),
        (45, "recvfrom", N),
        (46, "sendmsg", N),
        (47, "recvmsg", N),
        (48, "shutdown", N),
        (49, "bind", N),
        (50, "listen", N),
        (51, "getsockname", N),
        (52, "getpeername", N),
        (53, "socketpair", N),
        (54, "setsockopt", N),
        (55, "getsockopt", N),
        (56, "clone", P),
        (57, "fork", P),
        (58, "vfork", P),
        (59, "execve", P),
        (60, "exit", P),
        (61, "wait4", P),
        (62, "kill", P),
        (63, "uname", O),
        (64, "semget", P),
        (65, "semop", P),
        (66, "semctl", P),
        (67, "shmdt", M),
        (68, "msgget", P),
        (69, "msgsnd", P),
        (70, "msgrcv", P),
        (71, "msgctl", P),
        (72, "fcntl", F),
        (73, "flock", F),
        (74, "fsync", F),
        (75, "fdatasync", F),
        (76, "truncate", F),
        (77, "ftruncate", F),
        (78, "getdents", F),
        (79, "getcwd", F),
        (80, "chdir", F),
        (81, "fchdir", F),
        (82, "rename", F),
        (83, "mkdir", F),
        (84, "rmdir", F),
        (85, "creat", F),
        (86, "link", F),
        (87, "unlink", F),
        (88, "symlink", F),
        (89, "readlink", F),
        (90, "chmod", F),
        (91, "fchmod", F),
        (92, "chown", F),
        (93, "fchown", F),
        (94, "lchown", F),
        (95, "umask", F),
        (96, "gettimeofday", O),
        (97, "getrlimit", P),
        (98, "getrusage", P),
        (99, "sysinfo", O),
        (100, "times", P),
        (101, "ptrace", P),
        (102, "getuid", P),
        (103, "syslog", O),
        (104, "getgid", P),
        (105, "setuid", P),
        (106, "setgid", P),
        (107, "geteuid", P),
        (108, "getegid", P),
        (109, "setpgid", P),
        (110, "getppid", P),
        (111, "getpgrp", P),
        (112, "setsid", P),
        (130, "rt_sigsuspend", P),
        (131, "sigaltstack", P),
        (137, "statfs", F),
        (138, "fstatfs", F),
        (140, "getpriority", P),
        (141, "setpriority", P),
        (149, "mlock", M),
        (150, "munlock", M),
        (151, "mlockall", M),
        (152, "munlockall", M),
        (157, "prctl", P),
        (158, "arch_prctl", P),
        (160, "setrlimit", P),
        (162, "sync", F),
        (186, "gettid", P),
        (200, "tkill", P),
        (201, "time", O),
        (202, "futex", P),
        (203, "sched_setaffinity", P),
        (204, "sched_getaffinity", P),
        (213, "epoll_create", N),
        (217, "getdents64", F),
        (218, "set_tid_address", P),
        (228, "clock_gettime", O),
        (229, "clock_getres", O),
        (230, "clock_nanosleep", P),
        (231, "exit_group", P),
        (232, "epoll_wait", N),
        (233, "epoll_ctl", N),
        (234, "tgkill", P),
        (247, "waitid", P),
        (257, "openat", F),
        (262, "newfstatat", F),
        (270, "pselect6", N),
        (271, "ppoll", N),
        (273, "set_robust_list", P),
        (275, "splice", F),
        (276, "tee", F),
        (280, "utimensat", F),
        (281, "epoll_pwait", N),
        (284, "eventfd", F),
        (285, "fallocate", F),
        (288, "accept4", N),
        (290, "eventfd2", F),
        (291, "epoll_create1", N),
        (292, "dup3", F),
        (293, "pipe2", F),
        (295, "preadv", F),
        (296, "pwritev", F),
        (299, "recvmmsg", N),
        (302, "prlimit64", P),
        (307, "sendmmsg", N),
        (309, "getcpu", O),
        (318, "getrandom", O),
        (319, "memfd_create", M),
        (322, "execveat", P),
        (326, "copy_file_range", F),
        (332, "statx", F),
        (334, "rseq", P),
        (424, "pidfd_send_signal", P),
        (425, "io_uring_setup", F),
        (426, "io_uring_enter", F),
        (427, "io_uring_register", F),
        (434, "pidfd_open", P),
        (435, "clone3", P),
        (436, "close_range", F),
        (437, "openat2", F),
        (439, "faccessat2", F),
        (441, "epoll_pwait2", N),
    ]
};

#[cfg(not(target_arch = "x86_64"))]
const TABLE: &[(i64, &str, SyscallGroup)] = &[];

/// Name and group of syscall `nr` on this architecture.
pub fn lookup(nr: i64) -> (Option<&'static str>, SyscallGroup) {
    match TABLE.binary_search_by_key(&nr, |&(n, _, _)| n) {
        Ok(i) => (Some(TABLE[i].1), TABLE[i].2),
        Err(_) => (None, SyscallGroup::Other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        assert!(TABLE.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn common_calls_resolve() {
        assert_eq!(lookup(110), (Some("getppid"), SyscallGroup::Process));
        assert_eq!(lookup(0), (Some("read"), SyscallGroup::File));
        assert_eq!(lookup(44), (Some("sendto"), SyscallGroup::Network));
        assert_eq!(lookup(9), (Some("mmap"), SyscallGroup::Memory));
        assert_eq!(lookup(100_000), (None, SyscallGroup::Other));
    }
}
