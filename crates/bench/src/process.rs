//! Child processes that never outlive smtlab, and scratch directories that never
//! outlive their cell.
//!
//! Servers (nginx, httpd, postgres), clients (pgbench) and the user's commands are
//! started as a [`ChildGroup`]: the child leads its own process group and, where a
//! cgroup (v2) can be made, its own cgroup, `smtlab-PID-START/gN` under smtlab's own
//! cgroup, entered between fork and exec. A cgroup holds every process the child ever
//! forks, daemons that change their session included; a process group holds those that
//! stay in it. The child also asks for SIGKILL when the thread that started it dies
//! (`PR_SET_PDEATHSIG`).
//!
//! How each way out is covered:
//! * the end of a cell, errors, unwinding: [`ChildGroup`]'s `Drop` (or
//!   [`ChildGroup::stop`]) sends SIGTERM, then SIGKILL to the whole group and cgroup,
//!   and says which processes were still there after the leader ended
//!   ([`Stopped::killed`]: a daemon the command left behind);
//! * `kill -9` of smtlab, a crash, the OOM killer: one guardian process per smtlab
//!   process (`smtlab_control::guardian`), forked at the first child, kills every
//!   cgroup below `smtlab-PID-START` and every process group still tracked as soon as
//!   smtlab is gone, then removes the cgroups;
//! * a signal: [`clean_up`] (installed by the CLI) kills the trees and removes the
//!   scratch directories before smtlab dies of the signal;
//! * cgroups an earlier smtlab left (its guardian killed too) are killed and removed
//!   at the next start.
//!
//! Without a cgroup (no cgroup v2, or no permission) the process group is what is
//! killed; a child that leaves it (a daemon) is then out of reach.
//!
//! `PR_SET_PDEATHSIG` follows the *thread* that forked, not the process: start such
//! children from a thread that lives as long as they should (the measuring thread, or
//! [`crate::client::ClientSide`]'s spawner).

use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use smtlab_control::cgroup;
use smtlab_control::guardian::{Guardian, Plan};

/// Prefix of the cgroup of one smtlab process (`smtlab-PID-STARTTIME`).
pub const CGROUP_PREFIX: &str = "smtlab-";
/// How long a killed cgroup may take to empty before it is left for the guardian.
const EMPTY_WAIT: Duration = Duration::from_secs(3);
/// How long a stopped tree's killed processes are waited for: only one asleep in the
/// kernel takes more than a moment.
const KILLED_WAIT: Duration = Duration::from_secs(10);

/// What this process set up to keep its children in check, once.
struct Lifetime {
    /// Taken by [`finish`] when smtlab ends normally.
    guardian: Mutex<Option<Guardian>>,
    cgroup: Option<CgroupRoot>,
    counter: AtomicU64,
    /// Process groups alive now, for [`clean_up`].
    groups: Mutex<Vec<libc::pid_t>>,
    /// Scratch directories alive now, for [`clean_up`].
    dirs: Mutex<Vec<PathBuf>>,
    /// One line per tree that left processes behind, for the caller to show.
    notes: Mutex<Vec<String>>,
}

/// This smtlab process's cgroup and its `cgroup.procs`, open for writing.
struct CgroupRoot {
    dir: PathBuf,
    procs: OwnedFd,
}

static LIFETIME: OnceLock<Lifetime> = OnceLock::new();

fn lifetime() -> &'static Lifetime {
    LIFETIME.get_or_init(|| {
        let cgroup = make_cgroup_root();
        let mut plan = Plan::default();
        if let Some(c) = &cgroup {
            plan.kill_cgroup(&c.dir);
        }
        Lifetime {
            // Without a guardian the process groups still die with the thread that
            // started them (their leader does, at least): not worth failing for.
            guardian: Mutex::new(Guardian::spawn(&plan).ok()),
            cgroup,
            counter: AtomicU64::new(0),
            groups: Mutex::new(Vec::new()),
            dirs: Mutex::new(Vec::new()),
            notes: Mutex::new(Vec::new()),
        }
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Makes `smtlab-PID-START` under this process's cgroup, after removing the ones whose
/// process is gone. `None` where cgroups cannot be made.
fn make_cgroup_root() -> Option<CgroupRoot> {
    let parent = cgroup::dir_of(Path::new("/proc"), "self")?;
    sweep_stale_cgroups(&parent);
    let pid = std::process::id();
    let dir = parent.join(format!("{CGROUP_PREFIX}{pid}-{}", start_time(pid)?));
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    let procs = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
        .ok()?;
    Some(CgroupRoot {
        dir,
        procs: procs.into(),
    })
}

/// Field 22 of `/proc/PID/stat`: start time in clock ticks since boot (a pid alone can
/// be reused).
pub fn start_time(pid: u32) -> Option<u64> {
    stat_of(pid)?.1.split_whitespace().nth(19)?.parse().ok()
}

/// `/proc/PID/stat` as the command name and the fields after it (from the state on).
fn stat_of(pid: impl std::fmt::Display) -> Option<(String, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; fields resume after the last ')'.
    let (head, rest) = stat.rsplit_once(')')?;
    Some((head.split_once('(')?.1.to_string(), rest.to_string()))
}

/// Whether the process `pid` that started at `start` is still running.
pub fn owner_alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

/// Kills and removes the `smtlab-PID-START` cgroups under `parent` whose process is
/// gone (its guardian did not get to them). Returns how many were removed.
fn sweep_stale_cgroups(parent: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(CGROUP_PREFIX)) else {
            continue;
        };
        let Some((pid, start)) = rest.split_once('-') else {
            continue;
        };
        let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
            continue;
        };
        if owner_alive(pid, start) {
            continue;
        }
        let dir = e.path();
        let mut subs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|s| s.path().is_dir())
            .map(|s| s.path())
            .collect();
        kill_cgroup(&dir);
        subs.push(dir.clone());
        if wait_removed(&subs) {
            removed += 1;
        }
    }
    removed
}

/// SIGKILL to every process in cgroup `dir` and below (`cgroup.kill`, or each listed
/// pid where the kernel has no `cgroup.kill`).
fn kill_cgroup(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for pid in cgroup_pids(dir) {
        // SAFETY: kill with a pid read from the cgroup; at worst ESRCH.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    for sub in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if sub.path().is_dir() {
            kill_cgroup(&sub.path());
        }
    }
}

/// The processes in cgroup `dir` (not below it).
fn cgroup_pids(dir: &Path) -> Vec<libc::pid_t> {
    cgroup::procs(dir)
        .into_iter()
        .map(|p| p as libc::pid_t)
        .collect()
}

/// Removes the (empty or emptying) cgroups `dirs` in order, retrying while their
/// processes die; whether the last one went.
fn wait_removed(dirs: &[PathBuf]) -> bool {
    let deadline = Instant::now() + EMPTY_WAIT;
    loop {
        let left = dirs
            .iter()
            .filter(|d| d.exists() && std::fs::remove_dir(d).is_err())
            .count();
        if left == 0 {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The state letter and command name of process `pid` (`None`: gone).
fn state_and_name(pid: libc::pid_t) -> Option<(char, String)> {
    let (name, rest) = stat_of(pid)?;
    Some((rest.trim_start().chars().next()?, name))
}

/// Every process whose process group is `pgid` (a scan of `/proc`).
pub fn group_pids(pgid: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|&pid| {
            stat_of(pid).and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse().ok())
                == Some(pgid)
        })
        .collect()
}

/// What a child must do between fork and exec to be caught with its whole tree:
/// lead a process group, enter a cgroup, die with the thread that forked it.
fn hook(cmd: &mut Command, procs: Option<libc::c_int>) {
    let parent = std::process::id() as libc::pid_t;
    let tree = ForkHook {
        procs: procs.unwrap_or(-1),
    };
    let hook = move || -> io::Result<()> {
        // Only async-signal-safe calls between fork and exec.
        // SAFETY: setpgid on ourselves.
        if unsafe { libc::setpgid(0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // A failure (an old kernel checking the writer's credentials after a switch of
        // user) leaves the parent's own write after the spawn, and the process group.
        tree.enter();
        // SAFETY: prctl with constant arguments.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // The parent may have died between fork and prctl: then nobody would kill us.
        // SAFETY: getppid and _exit have no preconditions.
        if unsafe { libc::getppid() } != parent {
            // SAFETY: _exit ends the forked child without running the parent's code; no
            // preconditions.
            unsafe { libc::_exit(1) };
        }
        Ok(())
    };
    // SAFETY: the hook only makes async-signal-safe calls.
    unsafe { cmd.pre_exec(hook) };
}

/// Makes `cmd`'s child lead a new process group, enter this smtlab's cgroup (killed by
/// the guardian if smtlab dies) and die with the thread that forks it: for short-lived
/// clients the caller waits for. Register a switch of user before this.
pub fn tie_to_parent(cmd: &mut Command) -> &mut Command {
    let lt = lifetime();
    hook(cmd, lt.cgroup.as_ref().map(|c| c.procs.as_raw_fd()));
    cmd
}

/// Whether the OS rows' measuring process enters this smtlab's cgroup (see
/// [`measuring_processes_in_cgroup`]).
static MEASURING_IN_CGROUP: AtomicBool = AtomicBool::new(false);

/// From now on, the OS rows' measuring process enters this smtlab's cgroup as every
/// other program it starts does: for a run that gives a cookie per cgroup, in every mode
/// alike. Elsewhere it stays in smtlab's own cgroup, as a reference tool's process
/// would: each cgroup level costs every context switch (about 2% of pipe-latency on a
/// 2-CPU VM).
pub fn measuring_processes_in_cgroup() {
    MEASURING_IN_CGROUP.store(true, Ordering::Relaxed);
}

/// [`tie_to_parent`] for the OS rows' measuring process: into this smtlab's cgroup only
/// where [`measuring_processes_in_cgroup`] asked for it.
pub fn tie_measuring_process(cmd: &mut Command) -> &mut Command {
    if MEASURING_IN_CGROUP.load(Ordering::Relaxed) {
        return tie_to_parent(cmd);
    }
    hook(cmd, None);
    cmd
}

/// Makes a process forked without exec (a built-in server's worker) enter this smtlab's
/// cgroup, so the guardian kills it if smtlab dies. Call [`ForkHook::prepare`] before
/// the fork, [`ForkHook::enter`] in the child.
#[derive(Debug, Clone, Copy)]
pub struct ForkHook {
    procs: libc::c_int,
}

impl ForkHook {
    pub fn prepare() -> ForkHook {
        ForkHook {
            procs: lifetime()
                .cgroup
                .as_ref()
                .map_or(-1, |c| c.procs.as_raw_fd()),
        }
    }

    /// In the forked child: async-signal-safe (one write; "0" moves the writing process).
    pub fn enter(&self) {
        if self.procs >= 0 {
            // SAFETY: a one-byte write from a static buffer to a descriptor that stays
            // open until the fork (or spawn) returned in the parent.
            unsafe { libc::write(self.procs, b"0".as_ptr().cast(), 1) };
        }
    }
}

/// A process that was still running when its tree was stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub pid: u32,
    pub name: String,
}

/// How a [`ChildGroup`] ended.
#[derive(Debug, Clone)]
pub struct Stopped {
    /// The leader's exit status.
    pub status: Option<ExitStatus>,
    /// Processes of the tree still running after the leader had ended, killed.
    pub killed: Vec<Leftover>,
}

/// `killed 2 processes WHAT left running: busybox (pid 12), sleep (pid 14)`, or `None`
/// when `killed` is empty.
pub fn killed_line(killed: &[Leftover], what: &str) -> Option<String> {
    if killed.is_empty() {
        return None;
    }
    let names: Vec<String> = killed
        .iter()
        .map(|l| format!("{} (pid {})", l.name, l.pid))
        .collect();
    let n = killed.len();
    Some(format!(
        "killed {n} process{} {what} left running: {}",
        if n == 1 { "" } else { "es" },
        names.join(", ")
    ))
}

/// A child started with its own process group and cgroup, killed with its whole tree
/// and reaped when dropped.
#[derive(Debug)]
pub struct ChildGroup {
    child: Option<Child>,
    pgid: libc::pid_t,
    /// Its own cgroup, when one could be made.
    cgroup: Option<PathBuf>,
    /// `cgroup.procs` of that cgroup, open until the group is stopped.
    procs: Option<OwnedFd>,
    /// Said in the line about leftovers, e.g. `your server`.
    label: String,
}

impl ChildGroup {
    /// Starts `cmd` tied to this thread, in its own process group and cgroup. A switch
    /// of user registered on `cmd` before this still lets the child enter its cgroup
    /// (it was opened by smtlab). Spawn each `Command` once.
    pub fn spawn(cmd: &mut Command) -> io::Result<ChildGroup> {
        let lt = lifetime();
        let (cgroup, procs) = match &lt.cgroup {
            Some(root) => {
                let n = lt.counter.fetch_add(1, Ordering::Relaxed);
                let dir = root.dir.join(format!("g{n}"));
                match std::fs::create_dir(&dir).and_then(|_| {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(dir.join("cgroup.procs"))
                }) {
                    Ok(f) => (Some(dir), Some(OwnedFd::from(f))),
                    Err(_) => {
                        let _ = std::fs::remove_dir(&dir);
                        (None, None)
                    }
                }
            }
            None => (None, None),
        };
        hook(cmd, procs.as_ref().map(|f| f.as_raw_fd()));
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                if let Some(d) = &cgroup {
                    let _ = std::fs::remove_dir(d);
                }
                return Err(e);
            }
        };
        let pgid = child.id() as libc::pid_t;
        // The child moved itself before exec; this covers a child whose own write was
        // refused (it cannot have forked yet if so: it had not exec'd its program).
        if let Some(f) = &procs {
            let mut file = std::fs::File::from(f.try_clone()?);
            let _ = file.write_all(pgid.to_string().as_bytes());
        }
        if let Some(g) = lock(&lt.guardian).as_ref() {
            g.track_group(pgid);
        }
        lock(&lt.groups).push(pgid);
        let label = cmd.get_program().to_string_lossy().into_owned();
        Ok(ChildGroup {
            child: Some(child),
            pgid,
            cgroup,
            procs,
            label,
        })
    }

    pub fn id(&self) -> u32 {
        self.pgid as u32
    }

    /// The child's cgroup directory, when it has one.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_deref()
    }

    pub fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("child present until drop")
    }

    /// Exit status if the leader has ended, without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child_mut().try_wait()
    }

    /// Sends `signal` to every process of the group (and of the cgroup).
    pub fn signal(&self, signal: libc::c_int) -> io::Result<()> {
        if let Some(dir) = &self.cgroup {
            for pid in cgroup_pids(dir) {
                // SAFETY: kill with a pid listed in our own cgroup.
                unsafe { libc::kill(pid, signal) };
            }
        }
        // SAFETY: killpg of our own child's group.
        if unsafe { libc::killpg(self.pgid, signal) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Every process of the tree running now (zombies and the leader left out).
    pub fn members(&self) -> Vec<Leftover> {
        let mut pids = match &self.cgroup {
            Some(dir) => cgroup_pids(dir),
            None => group_pids(self.pgid),
        };
        pids.sort_unstable();
        pids.dedup();
        pids.into_iter()
            .filter(|&p| p != self.pgid)
            .filter_map(|p| {
                let (state, name) = state_and_name(p)?;
                (state != 'Z').then_some(Leftover {
                    pid: p as u32,
                    name,
                })
            })
            .collect()
    }

    /// SIGKILL to the whole tree, after the leader has ended (a command that should
    /// have taken its children with it); returns what was still running.
    pub fn kill_rest(&mut self) -> Vec<Leftover> {
        let left = self.members();
        self.kill_all();
        // Waited for, so they are not named again when the group is stopped.
        self.wait_members_gone();
        left
    }

    /// Waits (at most [`KILLED_WAIT`]) until no member of the tree is left but zombies: a
    /// process in uninterruptible sleep (an NFS daemon writing its state) dies of its
    /// SIGKILL only when it wakes, and must not outlive smtlab meanwhile.
    fn wait_members_gone(&self) {
        let deadline = Instant::now() + KILLED_WAIT;
        while !self.members().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILL to everything of the tree, the leader included.
    fn kill_all(&self) {
        if let Some(dir) = &self.cgroup {
            kill_cgroup(dir);
        }
        let _ = self.signal(libc::SIGKILL);
    }

    /// SIGTERM to the tree, SIGKILL after `grace`, then reaps the leader; what was still
    /// running after the leader ended is in [`Stopped::killed`].
    pub fn stop(mut self, grace: Duration) -> io::Result<Stopped> {
        self.stop_inner(grace)
    }

    fn stop_inner(&mut self, grace: Duration) -> io::Result<Stopped> {
        let Some(mut child) = self.child.take() else {
            return Ok(Stopped {
                status: None,
                killed: Vec::new(),
            });
        };
        // Processes left by a leader that ended on its own are not stopped gracefully:
        // they are leftovers, named before anything is sent to them.
        let left_before = child.try_wait()?.map(|_| self.members());
        let _ = self.signal(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        let mut status = None;
        while Instant::now() < deadline {
            if let Some(s) = child.try_wait()? {
                status = Some(s);
                // The leader is gone; its own children may still be on their way out.
                if self.members().is_empty() {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let killed = match (left_before, status) {
            (Some(left), _) => left,
            (None, Some(_)) => self.members(),
            (None, None) => Vec::new(),
        };
        // Whatever is left of the tree, leader or not, goes now.
        self.kill_all();
        if status.is_none() {
            status = Some(child.wait()?);
        }
        self.wait_members_gone();
        self.release();
        Ok(Stopped { status, killed })
    }

    /// Removes the cgroup once empty and forgets the group.
    fn release(&mut self) {
        let lt = lifetime();
        self.procs = None;
        if let Some(dir) = &self.cgroup
            && !wait_removed(std::slice::from_ref(dir))
        {
            // Still busy: the guardian removes it when smtlab ends.
            return;
        }
        if let Some(g) = lock(&lt.guardian).as_ref() {
            g.untrack_group(self.pgid);
        }
        lock(&lt.groups).retain(|&p| p != self.pgid);
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        if let Ok(stopped) = self.stop_inner(Duration::from_millis(500))
            && let Some(line) = killed_line(&stopped.killed, &format!("`{}`", self.label))
        {
            note(line);
        }
    }
}

/// Keeps a line for the caller to show (only the CLI prints).
pub fn note(line: String) {
    lock(&lifetime().notes).push(line);
}

/// The lines kept by [`note`] since the last call.
pub fn take_notes() -> Vec<String> {
    LIFETIME
        .get()
        .map(|lt| std::mem::take(&mut *lock(&lt.notes)))
        .unwrap_or_default()
}

/// A scratch directory registered for [`clean_up`]; dropping it unregisters it (the
/// owner removes the directory itself).
#[derive(Debug)]
pub struct Registered(PathBuf);

/// Registers `dir` to be removed by [`clean_up`] if a signal ends smtlab.
pub fn register_dir(dir: &Path) -> Registered {
    lock(&lifetime().dirs).push(dir.to_path_buf());
    Registered(dir.to_path_buf())
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(lt) = LIFETIME.get() {
            let mut dirs = lock(&lt.dirs);
            if let Some(i) = dirs.iter().position(|d| *d == self.0) {
                dirs.remove(i);
            }
        }
    }
}

/// What a signal's clean-up does before smtlab dies of it: kills every process tree
/// started here and removes every registered scratch directory. Safe to call from any
/// thread; what it cannot remove is swept at the next start.
pub fn clean_up() {
    let Some(lt) = LIFETIME.get() else { return };
    if let Some(c) = &lt.cgroup {
        kill_cgroup(&c.dir);
    }
    for &g in lock(&lt.groups).iter() {
        // SAFETY: killpg of a group this process started and has not reaped.
        unsafe { libc::killpg(g, libc::SIGKILL) };
    }
    let dirs: Vec<PathBuf> = lock(&lt.dirs).clone();
    for d in dirs {
        // Threads of this process (dbench's clients) may still be writing into it while
        // it goes, and even make it again (`create_dir_all`): it is gone only once it has
        // stayed gone for a moment. Two seconds at most.
        for _ in 0..50 {
            let _ = std::fs::remove_dir_all(&d);
            std::thread::sleep(Duration::from_millis(40));
            if !d.exists() {
                break;
            }
        }
    }
}

/// What smtlab does as it ends normally, after its work: kills whatever is still in its
/// trees (nothing, when every cell stopped its own), removes its cgroup, and sends its
/// guardian away and waits for it, so that no process of smtlab's, the guardian
/// included, is left when smtlab's own process ends. Nothing to do if no child was
/// ever started.
pub fn finish() {
    let Some(lt) = LIFETIME.get() else { return };
    clean_up();
    if let Some(c) = &lt.cgroup {
        let _ = wait_removed(std::slice::from_ref(&c.dir));
    }
    // Dropping the guardian tells it "done" and reaps it.
    drop(lock(&lt.guardian).take());
}

/// The pid and start time of this process as an `owner` file holds them.
pub fn owner_stamp() -> String {
    let pid = std::process::id();
    format!("{pid} {}\n", start_time(pid).unwrap_or(0))
}

/// The cgroup this smtlab process's trees live under, where it was already made (a
/// program was started), without making it: where smtlab's children's forced idle is read.
pub fn cgroup_root_made() -> Option<&'static Path> {
    LIFETIME.get()?.cgroup.as_ref().map(|c| c.dir.as_path())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: libc::pid_t) -> bool {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        !state.is_empty() && !state.contains(") Z ")
    }

    fn wait_gone(pid: libc::pid_t) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        !alive(pid)
    }

    fn read_pid(file: &Path) -> libc::pid_t {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(s) = std::fs::read_to_string(file)
                && let Ok(pid) = s.trim().parse::<libc::pid_t>()
            {
                return pid;
            }
            assert!(Instant::now() < deadline, "no pid in {}", file.display());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn dropping_the_group_kills_grandchildren_too() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("sleep 30 & echo $! > {}; wait", pidfile.display()));
        let group = ChildGroup::spawn(&mut cmd).unwrap();
        let grandchild = read_pid(&pidfile);
        assert!(alive(grandchild));
        drop(group);
        assert!(wait_gone(grandchild), "grandchild {grandchild} survived");
    }

    #[test]
    fn stop_reports_the_exit_status() {
        let group = ChildGroup::spawn(Command::new("true").arg("x")).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let stopped = group.stop(Duration::from_secs(1)).unwrap();
        assert!(stopped.status.unwrap().success());
        assert!(stopped.killed.is_empty());
    }

    #[test]
    fn a_daemon_that_left_its_session_is_killed_and_named() {
        if lifetime().cgroup.is_none() {
            // Only a cgroup reaches a process that changed its session.
            smtlab_fixtures::require::skip(
                "no cgroup v2 could be made here (needed to catch daemons)",
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("daemon");
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!(
            "setsid sh -c 'echo $$ > {}; exec sleep 3607' & exit 0",
            pidfile.display()
        ));
        let mut group = ChildGroup::spawn(&mut cmd).unwrap();
        let daemon = read_pid(&pidfile);
        assert!(smtlab_fixtures::bounded::wait(group.child_mut(), "a test child").success());
        assert!(alive(daemon));
        let stopped = group.stop(Duration::from_millis(200)).unwrap();
        assert!(wait_gone(daemon), "daemon {daemon} survived");
        let line = killed_line(&stopped.killed, "`sh`").unwrap();
        assert!(
            line.contains(&format!("sleep (pid {daemon})"))
                && line.starts_with("killed 1 process "),
            "{line}"
        );
    }

    #[test]
    fn stale_cgroups_of_dead_processes_are_removed() {
        let Some(root) = lifetime().cgroup.as_ref().map(|c| c.dir.clone()) else {
            return;
        };
        let parent = root.parent().unwrap();
        // A pid that cannot be running with start time 1.
        let stale = parent.join(format!("{CGROUP_PREFIX}{}-1", std::process::id()));
        std::fs::create_dir(&stale).unwrap();
        std::fs::create_dir(stale.join("g0")).unwrap();
        assert!(sweep_stale_cgroups(parent) >= 1);
        assert!(!stale.exists());
        assert!(root.exists(), "this process's own cgroup must stay");
    }
}
