//! The guardian: a forked process that cleans up after smtlab if smtlab dies.
//!
//! A guard's `Drop` cannot run after SIGKILL, an abort or the OOM killer. So before its
//! first change the guard forks a guardian that holds the read end of a pipe; only
//! smtlab holds the write end. The guardian waits for that pipe and for smtlab's exit
//! (a pidfd, so a forked child of smtlab that still holds the write end cannot keep it
//! waiting):
//!
//! * a quit message means smtlab finished (and restored) normally: exit without
//!   touching anything;
//! * end-of-file, or smtlab's exit, without a quit message means smtlab is gone: kill
//!   what it asked to be killed, write the saved values back, then exit.
//!
//! What it kills is told in two ways, both for the process trees smtlab starts (servers,
//! clients, the user's commands), see `smtlab_bench::process`:
//!
//! * process groups, announced and retired one by one with [`Guardian::track_group`] /
//!   [`Guardian::untrack_group`]: each gets SIGKILL;
//! * a cgroup (v2) given in the [`Plan`]: every process in it or in a cgroup below it is
//!   killed (`cgroup.kill`, or each pid of `cgroup.procs` on kernels without it), then
//!   the cgroups are removed. A cgroup also holds processes that left their process group
//!   or session (daemons).
//!
//! Messages are 8-byte records (atomic on a pipe). The child of a multi-threaded process
//! may only make async-signal-safe calls, so it never allocates: the files, values and
//! paths it needs are prepared before `fork` as a [`Plan`], and the child uses only
//! system calls (`read`, `poll`, `open`, `write`, `close`, `kill`, `rmdir`,
//! `getdents64`, `setsid`, `signal`, `dup2`, `_exit`). It leaves the terminal's process
//! group (Ctrl-C must not reach it before smtlab is gone), ignores SIGINT, SIGTERM,
//! SIGHUP and SIGQUIT, and closes every inherited descriptor but its own, so it holds
//! no socket, pipe or file of smtlab's open.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::ControlError;
use crate::signals::Watcher;
use crate::sysfs::Sysfs;

/// Most process groups one guardian keeps track of at once.
const MAX_GROUPS: usize = 4096;
/// How long the guardian waits for a killed cgroup to empty before removing it.
const CGROUP_EMPTY_WAIT_MS: i32 = 3000;

const OP_QUIT: u8 = b'Q';
const OP_ADD: u8 = b'+';
const OP_DEL: u8 = b'-';

/// What the guardian does when smtlab dies: the writes that restore the saved state,
/// in order (SMT control before CPUs: writing `on` to `smt/control` brings every CPU
/// online), after killing the cgroup tree, if any.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    writes: Vec<(CString, Vec<u8>)>,
    cgroup: Option<CString>,
}

impl Plan {
    pub fn push(&mut self, path: &Path, value: &str) {
        // Paths from sysfs never hold NUL; a path that did could not be opened anyway.
        if let Ok(p) = CString::new(path.as_os_str().as_bytes()) {
            self.writes.push((p, value.as_bytes().to_vec()));
        }
    }

    /// Kill every process in the cgroup directory `dir` and below, and remove those
    /// cgroups.
    pub fn kill_cgroup(&mut self, dir: &Path) {
        self.cgroup = CString::new(dir.as_os_str().as_bytes()).ok();
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.cgroup.is_none()
    }
}

/// A running guardian. Dropping it (or [`Guardian::dismiss`]) tells it to exit without
/// doing anything; [`Guardian::abandon`] closes the pipe as smtlab's death would.
#[derive(Debug)]
pub struct Guardian {
    write_fd: libc::c_int,
    pid: libc::pid_t,
}

impl Guardian {
    /// Forks the guardian for `plan`.
    pub fn spawn(plan: &Plan) -> io::Result<Guardian> {
        // Both ends are closed by their drops on an error; the parent keeps only the
        // write end.
        let (read_end, write_end) = crate::fork::pipe()?;
        let (read_fd, write_fd) = (read_end.as_raw_fd(), write_end.as_raw_fd());
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let child = || {
            // SAFETY: in the forked child: see `watch`, system calls only, on this
            // process's descriptors.
            unsafe { watch(read_fd, write_fd, parent, plan) }
        };
        // SAFETY: the child only makes async-signal-safe calls (see `watch`) and never
        // returns into Rust code.
        let pid = unsafe { crate::fork::fork_with(child) }?;
        drop(read_end);
        let write_fd = write_end.into_raw_fd();
        Ok(Guardian { write_fd, pid })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Process group `pgid` is killed if smtlab dies.
    pub fn track_group(&self, pgid: libc::pid_t) {
        send(self.write_fd, OP_ADD, pgid);
    }

    /// Process group `pgid` is gone (killed and reaped): forget it.
    pub fn untrack_group(&self, pgid: libc::pid_t) {
        send(self.write_fd, OP_DEL, pgid);
    }

    /// Tells the guardian that everything was restored; it exits without writing.
    pub fn dismiss(mut self) {
        self.stop(true);
    }

    /// Closes the pipe without a word, as smtlab's death would: the guardian kills,
    /// restores and exits. Waits for it.
    pub fn abandon(mut self) {
        self.stop(false);
    }

    fn stop(&mut self, quietly: bool) {
        if self.write_fd < 0 {
            return;
        }
        if quietly {
            send(self.write_fd, OP_QUIT, 0);
        }
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(self.write_fd) };
        self.write_fd = -1;
        let mut status = 0;
        loop {
            // SAFETY: pid is our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        self.stop(true);
    }
}

impl Guardian {
    /// Ends the guardian: dismissed when everything was restored, else left to try once
    /// more as the pipe closes.
    pub fn end(self, restored: bool) {
        if restored {
            self.dismiss();
        } else {
            self.abandon();
        }
    }
}

/// A value a guard writes back: the file, what it read before any change, and what
/// writing it back is, in errors.
pub(crate) struct Saved {
    pub path: PathBuf,
    pub before: String,
    pub what: String,
}

/// What a guard shares with its signal watcher: the values it writes back, in order,
/// and its guardian, whose lock is held while writing, so a signal's restore never
/// interleaves with a change.
pub(crate) struct Restorer {
    pub sysfs: Sysfs,
    saved: Vec<Saved>,
    pub guardian: Mutex<Option<Guardian>>,
}

impl Restorer {
    pub fn new(saved: Vec<Saved>, sysfs: Sysfs) -> Restorer {
        Restorer {
            sysfs,
            saved,
            guardian: Mutex::new(None),
        }
    }

    pub fn hold(&self) -> MutexGuard<'_, Option<Guardian>> {
        self.guardian.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The guardian's plan: every saved value, in order.
    pub fn plan(&self) -> Plan {
        let mut plan = Plan::default();
        for s in &self.saved {
            plan.push(&s.path, &s.before);
        }
        plan
    }

    /// Writes back every value the file no longer holds (an unreadable file is written
    /// anyway: restoring must not stop at a read); what failed, if anything.
    pub fn restore(&self) -> Result<(), ControlError> {
        let mut failed = Vec::new();
        for s in &self.saved {
            let now = self.sysfs.read(&s.path).ok().flatten();
            if now.as_deref() != Some(s.before.as_str())
                && let Err(e) = self.sysfs.write(&s.what, &s.path, &s.before)
            {
                failed.push(e.to_string());
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(ControlError::Restore(failed.join("; ")))
        }
    }

    /// Restores on SIGINT, SIGTERM, SIGHUP and SIGQUIT before the process dies of it,
    /// the guardian dismissed when that worked (else it tries again once the process is
    /// gone). The lock stays held: nothing may change the system any more.
    pub fn watch(self: &Arc<Self>) -> Result<Watcher, ControlError> {
        let s = Arc::clone(self);
        crate::signals::watch(move || {
            let mut guardian = s.hold();
            if s.restore().is_ok()
                && let Some(g) = guardian.take()
            {
                g.dismiss();
            }
            std::mem::forget(guardian);
        })
    }
}

fn record(op: u8, arg: i32) -> [u8; 8] {
    let mut r = [0u8; 8];
    r[0] = op;
    r[4..].copy_from_slice(&arg.to_ne_bytes());
    r
}

fn send(fd: libc::c_int, op: u8, arg: i32) {
    let r = record(op, arg);
    // SAFETY: an 8-byte write (atomic on a pipe) from a valid buffer.
    unsafe { libc::write(fd, r.as_ptr().cast(), r.len()) };
}

/// The guardian's whole life. Async-signal-safe calls only; never returns.
unsafe fn watch(
    read_fd: libc::c_int,
    write_fd: libc::c_int,
    parent: libc::pid_t,
    plan: &Plan,
) -> ! {
    // SAFETY: the guardian is a single-threaded forked child: only raw system calls on
    // its own descriptors, stack buffers of the sizes passed, and NUL-terminated paths
    // prepared before the fork; no allocation, no locks.
    unsafe {
        let pidfd = detach(write_fd, parent);
        let (fd, pidfd) = quiet_descriptors(read_fd, pidfd);
        let mut heard = Heard {
            groups: [0; MAX_GROUPS],
            count: 0,
            buf: [0u8; 8],
            have: 0,
        };
        listen(fd, pidfd, &mut heard);
        undo(&heard.groups[..heard.count], plan);
        libc::_exit(0)
    }
}

/// What the guardian has heard from smtlab: the process groups to kill, and the part of
/// a record read so far. A stack value: the guardian allocates nothing.
struct Heard {
    groups: [libc::pid_t; MAX_GROUPS],
    count: usize,
    buf: [u8; 8],
    have: usize,
}

/// Leaves smtlab's session and its signals, and opens a pidfd on smtlab (`parent`):
/// -2 where smtlab died before it was taken, below 0 where there is none.
///
/// # Safety
/// In the forked guardian only, `write_fd` its copy of the pipe's write end.
unsafe fn detach(write_fd: libc::c_int, parent: libc::pid_t) -> libc::c_int {
    // SAFETY: system calls on the guardian's own descriptors and signal dispositions.
    unsafe {
        libc::close(write_fd);
        libc::setsid();
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
        // smtlab's exit, seen even while a forked child of it holds the pipe open.
        let pidfd = libc::syscall(libc::SYS_pidfd_open, parent, 0) as libc::c_int;
        if pidfd >= 0 && libc::getppid() != parent {
            // smtlab died before the pidfd was taken: the pidfd may name another process.
            libc::close(pidfd);
            -2
        } else {
            pidfd
        }
    }
}

/// Moves the pipe's read end and the pidfd above 0-2 (they may have landed there if
/// smtlab's were closed), then points 0-2 at /dev/null and closes everything else.
///
/// # Safety
/// In the forked guardian only.
unsafe fn quiet_descriptors(
    read_fd: libc::c_int,
    pidfd: libc::c_int,
) -> (libc::c_int, libc::c_int) {
    // SAFETY: system calls on the guardian's own descriptors and a static path.
    unsafe {
        let fd = above_stdio(read_fd);
        let pidfd = if pidfd >= 0 {
            above_stdio(pidfd)
        } else {
            pidfd
        };
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for target in 0..3 {
                libc::dup2(null, target);
            }
        }
        close_all_but(fd, pidfd);
        (fd, pidfd)
    }
}

/// Reads smtlab's records from `fd` until smtlab is gone (its `pidfd` or the pipe's end
/// says so); exits at once, undoing nothing, on a quit record.
///
/// # Safety
/// In the forked guardian only, `fd` the pipe's read end.
unsafe fn listen(fd: libc::c_int, pidfd: libc::c_int, heard: &mut Heard) {
    // SAFETY: poll on a stack array of the length passed, fcntl and reads on the
    // guardian's own descriptors.
    unsafe {
        let mut dead = pidfd == -2;
        while !dead {
            let mut fds = [
                libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: pidfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let nfds = if pidfd >= 0 { 2 } else { 1 };
            if libc::poll(fds.as_mut_ptr(), nfds, -1) < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                // Cannot wait for the pidfd: the pipe alone tells.
                fds[0].revents = libc::POLLIN;
            }
            if pidfd >= 0 && fds[1].revents != 0 {
                dead = true;
                // Take what smtlab said before it died without waiting for more.
                libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
            }
            if (fds[0].revents != 0 || dead) && read_records(fd, heard, dead) {
                dead = true;
            }
        }
    }
}

/// Reads what is there of smtlab's records (one read, or all of them once `dead`) and
/// acts on each whole one; true when the pipe says smtlab is gone.
///
/// # Safety
/// In the forked guardian only, `fd` the pipe's read end.
unsafe fn read_records(fd: libc::c_int, heard: &mut Heard, dead: bool) -> bool {
    // SAFETY: reads into the rest of a stack buffer, never past its 8 bytes.
    unsafe {
        loop {
            let n = libc::read(
                fd,
                heard.buf.as_mut_ptr().add(heard.have).cast(),
                8 - heard.have,
            );
            if n > 0 {
                heard.have += n as usize;
                if heard.have == 8 {
                    heard.have = 0;
                    match heard.buf[0] {
                        OP_QUIT => libc::_exit(0),
                        OP_ADD => add(&mut heard.groups, &mut heard.count, arg(&heard.buf)),
                        OP_DEL => del(&mut heard.groups, &mut heard.count, arg(&heard.buf)),
                        _ => {}
                    }
                }
                if dead {
                    continue;
                }
                return false;
            }
            let errno = *libc::__errno_location();
            if n < 0 && errno == libc::EINTR {
                continue;
            }
            // End of file: every write end is closed. A read error other than
            // "nothing more now" cannot be waited out either.
            return n == 0 || (n < 0 && errno != libc::EAGAIN);
        }
    }
}

/// smtlab is gone: kills its announced process groups and its cgroup tree, and writes
/// back what the plan restores.
///
/// # Safety
/// In the forked guardian only.
unsafe fn undo(groups: &[libc::pid_t], plan: &Plan) {
    // SAFETY: kills and writes with NUL-terminated paths prepared before the fork.
    unsafe {
        for &g in groups {
            if g > 1 {
                libc::killpg(g, libc::SIGKILL);
            }
        }
        if let Some(dir) = &plan.cgroup {
            kill_cgroup_tree(dir.as_ptr());
        }
        for (path, value) in &plan.writes {
            let f = libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
            );
            if f >= 0 {
                libc::write(f, value.as_ptr().cast(), value.len());
                libc::close(f);
            }
        }
    }
}

fn arg(buf: &[u8; 8]) -> i32 {
    i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]])
}

fn add(groups: &mut [libc::pid_t; MAX_GROUPS], count: &mut usize, g: libc::pid_t) {
    if groups[..*count].contains(&g) {
        return;
    }
    if *count < MAX_GROUPS {
        groups[*count] = g;
        *count += 1;
    }
}

fn del(groups: &mut [libc::pid_t; MAX_GROUPS], count: &mut usize, g: libc::pid_t) {
    if let Some(i) = groups[..*count].iter().position(|&x| x == g) {
        groups[i] = groups[*count - 1];
        *count -= 1;
    }
}

unsafe fn above_stdio(fd: libc::c_int) -> libc::c_int {
    if fd > 2 {
        return fd;
    }
    // SAFETY: duplicating a descriptor this process holds.
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD, 3) };
    if d < 0 { fd } else { d }
}

/// Kills every process of the cgroup at `dir` and of the cgroups directly below it (the
/// layout `smtlab_bench::process` makes), then removes them, waiting a few seconds for
/// the kills to land. System calls only.
unsafe fn kill_cgroup_tree(dir: *const libc::c_char) {
    // SAFETY: `dir` is a NUL-terminated path (the caller's CString); every descriptor
    // used is opened here and closed once; buffers are stack values of the sizes passed.
    unsafe {
        let root = libc::open(dir, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
        if root < 0 {
            return;
        }
        // cgroup.kill (Linux 5.14) kills the whole subtree at once, forks in flight
        // included; without it every listed pid is killed, a few rounds.
        let k = libc::openat(
            root,
            c"cgroup.kill".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if k >= 0 {
            libc::write(k, b"1".as_ptr().cast(), 1);
            libc::close(k);
        } else {
            for _ in 0..5 {
                kill_listed(root);
                for_each_child(root, |d| kill_listed(d));
            }
        }
        let mut waited = 0;
        loop {
            let mut busy = false;
            for_each_child_name(root, |name| {
                if libc::unlinkat(root, name, libc::AT_REMOVEDIR) != 0 {
                    busy = true;
                }
            });
            if !busy && libc::rmdir(dir) == 0 {
                break;
            }
            if waited >= CGROUP_EMPTY_WAIT_MS {
                break;
            }
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 20_000_000,
            };
            libc::nanosleep(&ts, &mut ts);
            waited += 20;
        }
        libc::close(root);
    }
}

/// SIGKILL to every pid in `cgroup.procs` under the directory `dir`.
unsafe fn kill_listed(dir: libc::c_int) {
    // SAFETY: `dir` is an open directory descriptor; `buf` is a stack buffer whose length
    // is passed to read, and `f` is closed once at the end.
    unsafe {
        let f = libc::openat(
            dir,
            c"cgroup.procs".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if f < 0 {
            return;
        }
        let mut buf = [0u8; 4096];
        let mut pid: i64 = 0;
        loop {
            let n = libc::read(f, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            for &b in &buf[..n as usize] {
                if b.is_ascii_digit() {
                    pid = pid * 10 + (b - b'0') as i64;
                } else {
                    if pid > 1 {
                        libc::kill(pid as libc::pid_t, libc::SIGKILL);
                    }
                    pid = 0;
                }
            }
        }
        if pid > 1 {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
        libc::close(f);
    }
}

/// Calls `f` with an open descriptor of each subdirectory of `dir`.
unsafe fn for_each_child(dir: libc::c_int, mut f: impl FnMut(libc::c_int)) {
    // SAFETY: `name` is a NUL-terminated entry name from `for_each_child_name`, valid
    // during the call; `d` is checked before use and closed once.
    unsafe {
        for_each_child_name(dir, |name| {
            let d = libc::openat(
                dir,
                name,
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            );
            if d >= 0 {
                f(d);
                libc::close(d);
            }
        });
    }
}

/// Calls `f` with the NUL-terminated name of each subdirectory of `dir` (getdents64 into
/// a stack buffer: no allocation).
unsafe fn for_each_child_name(dir: libc::c_int, mut f: impl FnMut(*const libc::c_char)) {
    // SAFETY: getdents64 writes at most `buf.len()` bytes; every record read lies inside
    // the `n` bytes it returned (off + 19 < n), and names are NUL-terminated by the kernel.
    unsafe {
        let d = libc::openat(
            dir,
            c".".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if d < 0 {
            return;
        }
        let mut buf = [0u8; 4096];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, d, buf.as_mut_ptr(), buf.len()) as isize;
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off + 19 < n as usize {
                // struct linux_dirent64: ino u64, off i64, reclen u16, type u8, name.
                let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
                let kind = buf[off + 18];
                let name = buf.as_ptr().add(off + 19).cast::<libc::c_char>();
                let dot = buf[off + 19] == b'.';
                if kind == libc::DT_DIR && !dot {
                    f(name);
                }
                if reclen == 0 {
                    break;
                }
                off += reclen;
            }
        }
        libc::close(d);
    }
}

unsafe fn close_all_but(a: libc::c_int, b: libc::c_int) {
    // SAFETY: close_range and close take no pointers; only descriptors other than `a` and
    // `b` are closed, in this single-threaded child.
    unsafe {
        let (lo, hi) = if b > a { (a, b) } else { (b.max(-1), a) };
        // Keep `lo` (when it is a descriptor) and `hi`; close 3.. around them.
        let mut ok = true;
        let mut from = 3u32;
        for keep in [lo, hi] {
            if keep < 3 {
                continue;
            }
            let k = keep as u32;
            if k > from {
                ok &= libc::syscall(libc::SYS_close_range, from, k - 1, 0) == 0;
            }
            from = k + 1;
        }
        ok &= libc::syscall(libc::SYS_close_range, from, u32::MAX, 0) == 0;
        if !ok {
            // Kernels before 5.9: close one by one up to a generous bound.
            for fd in 3..65536 {
                if fd != a && fd != b {
                    libc::close(fd);
                }
            }
        }
    }
}
