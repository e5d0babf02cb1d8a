//! A private PostgreSQL server for one cell: found, initialised, started pinned, driven
//! by pgbench, stopped and removed.
//!
//! * Binaries: `pg_config --bindir`, then the directories of the programs on `PATH`,
//!   then `/usr/lib/postgresql/*/bin` newest first; the directory must hold `initdb`,
//!   `postgres` and `pgbench`.
//! * PostgreSQL refuses to run as root. When smtlab is root, `initdb` and `postgres` run
//!   as the `postgres` user when it exists, else `nobody` (`setgroups`/`setgid`/`setuid`
//!   between fork and exec, *before* `PR_SET_PDEATHSIG`, which a credential change
//!   would clear). The cell's directory is given to that user.
//! * Everything lives in one directory `smtlab-pg-<pid>-<n>` under the temporary
//!   directory: `data` (initdb), `sock` (the unix socket), `postgres.log`, and `owner`
//!   (smtlab's pid and start time). The server listens on 127.0.0.1 only.
//! * Shared memory is anonymous `mmap` (`shared_memory_type`, and
//!   `dynamic_shared_memory_type = mmap`, whose files live in the data directory), so
//!   the only System V segment is PostgreSQL's small interlock segment.
//! * The postmaster is started with [`smtlab_bench::process`]: own process group, SIGKILL
//!   when the starting thread dies. Its children exit when they see it gone. Stopping
//!   sends SIGINT (fast shutdown), waits, then kills the group and removes the
//!   directory.
//! * After `kill -9` of smtlab nothing of smtlab runs to clean up: the server dies with
//!   it, but its directory and interlock segment stay. [`sweep_stale`], called before
//!   every server start, removes `smtlab-pg-*` directories whose owner is gone (and
//!   the segment named in their `postmaster.pid`), and says how many it removed.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use smtlab_bench::BenchError;
use smtlab_bench::process::{
    ChildGroup, owner_alive as owner_alive_since, owner_stamp, tie_to_parent,
};
use smtlab_model::CpuSet;
use smtlab_placement::pin::CommandPinExt;

/// Prefix of every cell directory, for the stale sweep.
pub const DIR_PREFIX: &str = "smtlab-pg-";
/// The database superuser initdb creates.
pub const DB_USER: &str = "smtlab";
/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// What went wrong, in one line each.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "PostgreSQL is not installed (no directory with initdb, postgres and pgbench from pg_config --bindir, PATH or /usr/lib/postgresql/*/bin); install it with: apt-get install postgresql"
    )]
    NotInstalled,
    #[error(
        "running as root and neither the postgres nor the nobody user exists to run PostgreSQL"
    )]
    NoUser,
    // The cause is shown in the message and is not a `source`, so it is printed once.
    #[error("{what}: {error}")]
    Io { what: String, error: io::Error },
    #[error("initdb failed ({status}): {line}")]
    Initdb { status: String, line: String },
    #[error("postgres did not start on 127.0.0.1:{port}: {line}")]
    Start { port: u16, line: String },
    #[error("{tool} failed ({status}): {line}")]
    Tool {
        tool: String,
        status: String,
        line: String,
    },
    #[error("pgbench output: {0}")]
    Parse(String),
}

impl PgError {
    /// The error of workload `bench`: PostgreSQL missing (or no user to run it as) is a
    /// cell that cannot run here; anything else failed.
    pub(crate) fn of_bench(self, bench: &str) -> BenchError {
        match self {
            PgError::NotInstalled | PgError::NoUser => {
                BenchError::unsupported(bench, self.to_string())
            }
            e => BenchError::io(bench, "PostgreSQL", io::Error::other(e.to_string())),
        }
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> PgError {
    let what = what.into();
    move |error| PgError::Io { what, error }
}

/// Where the PostgreSQL programs are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgInstall {
    pub bindir: PathBuf,
}

impl PgInstall {
    /// `pg_config --bindir`, then the directories of `postgres`, `initdb` and `pgbench`
    /// on `PATH`, then `/usr/lib/postgresql/*/bin` newest version first: the first that
    /// holds all three.
    pub fn find() -> Result<PgInstall, PgError> {
        let mut candidates = Vec::new();
        if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
            && out.status.success()
        {
            let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !dir.is_empty() {
                candidates.push(PathBuf::from(dir));
            }
        }
        // Where the user keeps them: the directory of each program found on PATH (as
        // is, then with links resolved: a link may point into the real directory).
        for name in ["postgres", "initdb", "pgbench"] {
            if let Ok(p) = which::which(name) {
                candidates.extend(p.parent().map(Path::to_path_buf));
                if let Ok(real) = fs::canonicalize(&p) {
                    candidates.extend(real.parent().map(Path::to_path_buf));
                }
            }
        }
        candidates.extend(versioned_dirs(Path::new("/usr/lib/postgresql")));
        candidates
            .into_iter()
            .find(|d| Self::complete(d))
            .map(|bindir| PgInstall { bindir })
            .ok_or(PgError::NotInstalled)
    }

    fn complete(dir: &Path) -> bool {
        ["initdb", "postgres", "pgbench"]
            .iter()
            .all(|p| dir.join(p).is_file())
    }

    pub fn bin(&self, name: &str) -> PathBuf {
        self.bindir.join(name)
    }
}

/// `ROOT/<version>/bin` for every numeric version directory, newest first.
fn versioned_dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<(Vec<u64>, PathBuf)> = fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let key: Option<Vec<u64>> = name.split('.').map(|p| p.parse().ok()).collect();
            key.map(|k| (k, e.path().join("bin")))
        })
        .collect();
    v.sort_by(|a, b| b.0.cmp(&a.0));
    v.into_iter().map(|(_, p)| p).collect()
}

/// The unprivileged account PostgreSQL runs as when smtlab is root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl RunAs {
    /// `None` when smtlab is not root (PostgreSQL then runs as smtlab's user).
    pub fn for_this_process() -> Result<Option<RunAs>, PgError> {
        if !crate::is_root() {
            return Ok(None);
        }
        ["postgres", "nobody"]
            .iter()
            .find_map(|n| lookup_user(n))
            .map(Some)
            .ok_or(PgError::NoUser)
    }

    /// Makes `cmd`'s child drop to this user. Register before [`tie_to_parent`]: a
    /// credential change clears the parent-death signal, so it must come first.
    pub fn apply(&self, cmd: &mut Command) {
        let (uid, gid) = (self.uid, self.gid);
        let hook = move || -> io::Result<()> {
            // Only raw system calls between fork and exec.
            // SAFETY: setgroups with a null list of length 0 is allowed; these are raw
            // system calls, async-signal-safe between fork and exec.
            unsafe {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        };
        // SAFETY: the hook only makes async-signal-safe system calls and captures two
        // integers: nothing to lock or allocate in the forked child.
        unsafe { cmd.pre_exec(hook) };
        cmd.env("HOME", "/").env("USER", &self.name);
    }
}

fn lookup_user(name: &str) -> Option<RunAs> {
    let cname = std::ffi::CString::new(name).ok()?;
    // SAFETY: passwd is plain integers and pointers: all zeroes (null pointers) is a
    // valid value, filled in by getpwnam_r.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![libc::c_char::default(); 16 * 1024];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: `cname` is NUL-terminated, `pw` and `out` are live locals, and `buf` is a
    // live buffer of `buf.len()` bytes for the strings `pw` points into.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut out,
        )
    };
    (rc == 0 && !out.is_null()).then(|| RunAs {
        name: name.to_string(),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// Server settings, written to `postgresql.conf` and reported as metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct PgSettings {
    /// 0 picks a free loopback port.
    pub port: u16,
    pub shared_buffers_bytes: u64,
    pub max_connections: u32,
    pub fsync: bool,
    pub synchronous_commit: bool,
    /// Extra `name = value` lines (tests use them to break things).
    pub extra: Vec<String>,
}

impl PgSettings {
    /// The `postgresql.conf` lines for `port` and the socket directory.
    pub fn conf_lines(&self, port: u16, socket_dir: &Path) -> Vec<String> {
        let onoff = |b: bool| if b { "on" } else { "off" };
        let mut v = vec![
            "listen_addresses = '127.0.0.1'".to_string(),
            format!("port = {port}"),
            format!(
                "unix_socket_directories = '{}'",
                socket_dir.display().to_string().replace('\'', "''")
            ),
            format!("shared_buffers = {}kB", self.shared_buffers_bytes / 1024),
            format!("max_connections = {}", self.max_connections),
            format!("fsync = {}", onoff(self.fsync)),
            // Torn-page protection only matters when writes are made durable.
            format!("full_page_writes = {}", onoff(self.fsync)),
            format!("synchronous_commit = {}", onoff(self.synchronous_commit)),
            "shared_memory_type = mmap".to_string(),
            "dynamic_shared_memory_type = mmap".to_string(),
            "logging_collector = off".to_string(),
            "log_destination = 'stderr'".to_string(),
        ];
        v.extend(self.extra.iter().cloned());
        v
    }
}

/// A running private server. Dropping it stops the server and removes its directory.
#[derive(Debug)]
pub struct PgServer {
    dir: PathBuf,
    port: u16,
    group: Option<ChildGroup>,
    /// Stale directories removed before this one was made.
    pub swept: usize,
}

static DIR_COUNTER: AtomicU64 = AtomicU64::new(0);

impl PgServer {
    /// initdb, configure and start `postgres` pinned to `cpus` (`None`: unpinned),
    /// waiting until it accepts connections. Everything made so far is removed on error.
    pub fn start(
        install: &PgInstall,
        settings: &PgSettings,
        cpus: Option<&CpuSet>,
    ) -> Result<PgServer, PgError> {
        Self::start_in(&std::env::temp_dir(), install, settings, cpus)
    }

    /// As [`PgServer::start`], with the cell directory made under `parent`.
    pub fn start_in(
        parent: &Path,
        install: &PgInstall,
        settings: &PgSettings,
        cpus: Option<&CpuSet>,
    ) -> Result<PgServer, PgError> {
        let swept = sweep_stale(parent);
        let run_as = RunAs::for_this_process()?;
        let dir = parent.join(format!(
            "{DIR_PREFIX}{}-{}",
            std::process::id(),
            DIR_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(io_err(format!(
                "create {}",
                smtlab_model::quote::path(&dir)
            )))?;
        let mut server = PgServer {
            dir,
            port: 0,
            group: None,
            swept,
        };
        // From here on, dropping `server` removes the directory.
        server.setup(install, settings, cpus, run_as.as_ref())?;
        Ok(server)
    }

    fn setup(
        &mut self,
        install: &PgInstall,
        settings: &PgSettings,
        cpus: Option<&CpuSet>,
        run_as: Option<&RunAs>,
    ) -> Result<(), PgError> {
        fs::write(self.dir.join("owner"), owner_stamp()).map_err(io_err("write the owner file"))?;
        let sock = self.dir.join("sock");
        fs::create_dir(&sock).map_err(io_err(format!(
            "create {}",
            smtlab_model::quote::path(&sock)
        )))?;
        if let Some(u) = run_as {
            for p in [&self.dir, &sock] {
                std::os::unix::fs::chown(p, Some(u.uid), Some(u.gid)).map_err(io_err(format!(
                    "give {} to {}",
                    p.display(),
                    u.name
                )))?;
            }
        }
        let data = self.data_dir();
        initdb(install, &data, run_as)?;

        let port = if settings.port == 0 {
            free_port().map_err(io_err("find a free loopback port"))?
        } else {
            settings.port
        };
        self.port = port;
        let conf = data.join("postgresql.conf");
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(&conf)
            .map_err(io_err(format!("open {}", smtlab_model::quote::path(&conf))))?;
        writeln!(f, "\n# smtlab")
            .and_then(|_| {
                settings
                    .conf_lines(port, &sock)
                    .iter()
                    .try_for_each(|l| writeln!(f, "{l}"))
            })
            .map_err(io_err(format!(
                "write {}",
                smtlab_model::quote::path(&conf)
            )))?;
        drop(f);

        let log_path = self.dir.join("postgres.log");
        let log = fs::File::create(&log_path).map_err(io_err("create postgres.log"))?;
        let log2 = log.try_clone().map_err(io_err("dup postgres.log"))?;
        let mut cmd = Command::new(install.bin("postgres"));
        cmd.arg("-D")
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .env_remove("PGDATA");
        if let Some(c) = cpus {
            cmd.pin_to(c).map_err(|e| PgError::Io {
                what: "pin postgres".into(),
                error: io::Error::from(e),
            })?;
        }
        if let Some(u) = run_as {
            u.apply(&mut cmd);
        }
        let group = ChildGroup::spawn(&mut cmd).map_err(io_err("start postgres"))?;
        self.group = Some(group);
        self.wait_ready(port)
    }

    fn wait_ready(&mut self, port: u16) -> Result<(), PgError> {
        let deadline = Instant::now() + START_TIMEOUT;
        let pidfile = self.data_dir().join("postmaster.pid");
        loop {
            let group = self.group.as_mut().expect("started");
            if let Some(status) = group.try_wait().map_err(io_err("wait for postgres"))? {
                let line =
                    last_error_line(&fs::read_to_string(self.log_path()).unwrap_or_default())
                        .unwrap_or_else(|| format!("postgres exited ({status}) without a message"));
                return Err(PgError::Start { port, line });
            }
            // Line 8 of postmaster.pid reads "ready" once connections are accepted.
            if fs::read_to_string(&pidfile)
                .map(|t| t.lines().nth(7).is_some_and(|l| l.trim() == "ready"))
                .unwrap_or(false)
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(PgError::Start {
                    port,
                    line: format!("not ready after {} s", START_TIMEOUT.as_secs()),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("sock")
    }
    fn log_path(&self) -> PathBuf {
        self.dir.join("postgres.log")
    }
    pub fn pid(&self) -> Option<u32> {
        self.group.as_ref().map(ChildGroup::id)
    }

    /// Fast shutdown (SIGINT), then SIGKILL to whatever is left, then the directory goes.
    fn stop(&mut self) {
        if let Some(mut group) = self.group.take() {
            let _ = group.signal(libc::SIGINT);
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if matches!(group.try_wait(), Ok(Some(_)) | Err(_)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            drop(group);
        }
        // An unclean end leaves postmaster.pid and the interlock segment.
        remove_interlock_segment(&self.data_dir());
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs initdb into `data` (which must not exist; its parent must be writable by the
/// server's user).
pub fn initdb(install: &PgInstall, data: &Path, run_as: Option<&RunAs>) -> Result<(), PgError> {
    let mut cmd = Command::new(install.bin("initdb"));
    cmd.arg("-D")
        .arg(data)
        .args([
            "-U",
            DB_USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        ])
        .env_remove("PGDATA")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(u) = run_as {
        u.apply(&mut cmd);
    }
    tie_to_parent(&mut cmd);
    let out = cmd
        .spawn()
        .and_then(|c| c.wait_with_output())
        .map_err(io_err("run initdb"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    Err(PgError::Initdb {
        status: out.status.to_string(),
        line: last_error_line(&text).unwrap_or_else(|| "no message".into()),
    })
}

/// The most telling line of a PostgreSQL tool's or server's output: the last FATAL or
/// error line, with the cause logged just before it when there is one ("invalid value
/// for parameter ..."; "could not bind ..."), else the last non-empty line. Log
/// prefixes (time, pid) are dropped.
pub fn last_error_line(text: &str) -> Option<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(strip_log_prefix)
        .filter(|l| !l.is_empty())
        .collect();
    let telling = |l: &str| {
        let low = l.to_ascii_lowercase();
        low.contains("fatal")
            || low.contains("error")
            || low.contains("could not")
            || low.contains("invalid")
    };
    let Some(last) = lines.iter().rposition(|l| telling(l)) else {
        return lines.last().map(|l| l.to_string());
    };
    let cause = lines[..last]
        .iter()
        .rev()
        .take(3)
        .find(|l| telling(l) && !l.starts_with("FATAL"));
    Some(match cause {
        Some(c) => format!("{c}; {}", lines[last]),
        None => lines[last].to_string(),
    })
}

/// `2026-11-23 19:25:56.947 UTC [22258] FATAL:  x` -> `FATAL:  x`.
fn strip_log_prefix(line: &str) -> &str {
    let l = line.trim();
    if l.starts_with(|c: char| c.is_ascii_digit())
        && let Some(i) = l.find("] ")
    {
        return l[i + 2..].trim();
    }
    l
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> io::Result<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(l.local_addr()?.port())
}

fn owner_alive(dir: &Path, prefix: &str) -> bool {
    let Ok(text) = fs::read_to_string(dir.join("owner")) else {
        // No stamp yet: the owner may be between mkdir and writing it; trust the pid in
        // the name (`PREFIX[kind-]PID-N`). A name without one is not a scratch
        // directory: kept, as if its owner lived.
        let pid = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|n| n.rsplit('-').nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        return pid.is_none_or(|pid| Path::new(&format!("/proc/{pid}")).exists());
    };
    let mut it = text.split_whitespace().map(|t| t.parse::<u64>().ok());
    match (it.next().flatten(), it.next().flatten()) {
        (Some(pid), Some(start)) => owner_alive_since(pid as u32, start),
        _ => false,
    }
}

/// Removes the System V interlock segment named in `data/postmaster.pid` (line 7:
/// `key id`) when nothing is attached to it any more.
fn remove_interlock_segment(data: &Path) {
    let Ok(text) = fs::read_to_string(data.join("postmaster.pid")) else {
        return;
    };
    let Some(id) = text
        .lines()
        .nth(6)
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|t| t.parse::<libc::c_int>().ok())
    else {
        return;
    };
    // SAFETY: shmid_ds is plain integers: all zeroes is a valid value.
    let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: `ds` is a live shmid_ds the kernel writes into.
    if unsafe { libc::shmctl(id, libc::IPC_STAT, &mut ds) } == 0 && ds.shm_nattch == 0 {
        // SAFETY: IPC_RMID reads no buffer, so a null one is allowed.
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
    }
}

/// Kills a postmaster left from `data` (only if its command line names that data
/// directory, so a reused pid is never hit).
fn kill_left_postmaster(data: &Path) {
    let Ok(text) = fs::read_to_string(data.join("postmaster.pid")) else {
        return;
    };
    let Some(pid) = text
        .lines()
        .next()
        .and_then(|l| l.trim().parse::<i32>().ok())
    else {
        return;
    };
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let needle = data.as_os_str().as_encoded_bytes();
    if pid > 1 && cmdline.windows(needle.len().max(1)).any(|w| w == needle) {
        // SAFETY: kill() takes no pointers; the pid was checked to be a postmaster of this
        // data directory, so it is no stranger's.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Removes `smtlab-pg-*` directories under `parent` whose owning smtlab process is gone
/// (left by `kill -9`), with any server still running from them and their interlock
/// segment. Returns how many were removed.
pub fn sweep_stale(parent: &Path) -> usize {
    sweep_stale_dirs(parent, DIR_PREFIX, &|dir| {
        let data = dir.join("data");
        kill_left_postmaster(&data);
        remove_interlock_segment(&data);
    })
}

/// Removes the `PREFIX*` directories under `parent` whose `owner` file names a process
/// that is gone, after `before_remove` on each.
pub(crate) fn sweep_stale_dirs(
    parent: &Path,
    prefix: &str,
    before_remove: &dyn Fn(&Path),
) -> usize {
    let Ok(entries) = fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(prefix) {
            continue;
        }
        let dir = e.path();
        if !dir.is_dir() || owner_alive(&dir, prefix) {
            continue;
        }
        before_remove(&dir);
        if fs::remove_dir_all(&dir).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_dirs_are_newest_first() {
        let t = tempfile::tempdir().unwrap();
        for v in ["9.6", "15", "13", "notaversion"] {
            fs::create_dir_all(t.path().join(v).join("bin")).unwrap();
        }
        let v = versioned_dirs(t.path());
        let names: Vec<String> = v
            .iter()
            .map(|p| {
                p.parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into()
            })
            .collect();
        assert_eq!(names, ["15", "13", "9.6"]);
    }

    #[test]
    fn the_telling_line_is_the_last_error() {
        let log = "LOG:  starting PostgreSQL 15\nLOG:  could not bind IPv4 address \"127.0.0.1\": Address already in use\nHINT:  Is another postmaster already running?\nFATAL:  could not create any TCP/IP sockets\nLOG:  database system is shut down\n";
        assert_eq!(
            last_error_line(log).unwrap(),
            "LOG:  could not bind IPv4 address \"127.0.0.1\": Address already in use; FATAL:  could not create any TCP/IP sockets"
        );
        let log = "2026-11-23 19:25:56.947 UTC [22258] LOG:  invalid value for parameter \"shared_buffers\": \"lots\"\n2026-11-23 19:25:56.947 UTC [22258] FATAL:  configuration file \"/x\" contains errors\n";
        assert_eq!(
            last_error_line(log).unwrap(),
            "LOG:  invalid value for parameter \"shared_buffers\": \"lots\"; FATAL:  configuration file \"/x\" contains errors"
        );
        assert_eq!(last_error_line("a\nb\n").unwrap(), "b");
        assert_eq!(last_error_line("\n"), None);
    }

    #[test]
    fn settings_reach_the_config_lines() {
        let s = PgSettings {
            port: 0,
            shared_buffers_bytes: 128 << 20,
            max_connections: 20,
            fsync: false,
            synchronous_commit: true,
            extra: vec!["work_mem = 8MB".into()],
        };
        let lines = s.conf_lines(5433, Path::new("/tmp/it's"));
        assert!(lines.contains(&"port = 5433".to_string()));
        assert!(lines.contains(&"shared_buffers = 131072kB".to_string()));
        assert!(lines.contains(&"fsync = off".to_string()));
        assert!(lines.contains(&"synchronous_commit = on".to_string()));
        assert!(lines.contains(&"unix_socket_directories = '/tmp/it''s'".to_string()));
        assert_eq!(lines.last().unwrap(), "work_mem = 8MB");
    }

    #[test]
    fn stale_directories_of_dead_owners_are_swept_and_live_ones_kept() {
        let t = tempfile::tempdir().unwrap();
        let live = t
            .path()
            .join(format!("{DIR_PREFIX}{}-0", std::process::id()));
        fs::create_dir(&live).unwrap();
        fs::write(live.join("owner"), owner_stamp()).unwrap();
        // A start time that cannot be ours: the owner "died" and its pid was reused.
        let reused = t
            .path()
            .join(format!("{DIR_PREFIX}{}-1", std::process::id()));
        fs::create_dir_all(reused.join("data")).unwrap();
        fs::write(reused.join("owner"), format!("{} 1\n", std::process::id())).unwrap();
        let other = t.path().join("not-ours");
        fs::create_dir(&other).unwrap();
        assert_eq!(sweep_stale(t.path()), 1);
        assert!(live.exists() && other.exists() && !reused.exists());
    }

    /// The installation, or `None` with the reason printed (the test then passes; CI
    /// installs PostgreSQL and sets `SMTLAB_REQUIRE_TOOLS=1`, so there it always runs).
    pub(crate) fn installed() -> Option<PgInstall> {
        match PgInstall::find() {
            Ok(i) => Some(i),
            Err(e) => {
                smtlab_fixtures::require::skip(&e.to_string());
                None
            }
        }
    }

    pub(crate) fn settings() -> PgSettings {
        PgSettings {
            port: 0,
            shared_buffers_bytes: 16 << 20,
            max_connections: 10,
            fsync: false,
            synchronous_commit: false,
            extra: vec![],
        }
    }

    fn alive(pid: u32) -> bool {
        // A zombie waiting for init to reap it is dead for our purposes.
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    }

    /// Processes whose command line or working directory mentions `dir`.
    fn processes_using(dir: &Path) -> Vec<u32> {
        let needle = dir.as_os_str().as_encoded_bytes().to_vec();
        fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != std::process::id() && alive(pid))
            .filter(|pid| {
                let cmd = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let cwd = fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
                cmd.windows(needle.len()).any(|w| w == needle.as_slice()) || cwd.starts_with(dir)
            })
            .collect()
    }

    fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_server_starts_and_leaves_nothing_behind() {
        let Some(install) = installed() else { return };
        let parent = tempfile::tempdir().unwrap();
        let server = PgServer::start_in(parent.path(), &install, &settings(), None).unwrap();
        let dir = server.dir().to_path_buf();
        let pid = server.pid().unwrap();
        assert!(alive(pid));
        // Connections work: pgbench -i on the server's port.
        let out = Command::new(install.bin("pgbench"))
            .args([
                "-i",
                "-q",
                "-s",
                "1",
                "-h",
                "127.0.0.1",
                "-U",
                DB_USER,
                "-p",
            ])
            .arg(server.port().to_string())
            .arg("postgres")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!processes_using(&dir).is_empty());
        drop(server);
        assert!(!dir.exists(), "{} left behind", dir.display());
        wait_until("the server's processes to end", || {
            processes_using(&dir).is_empty()
        });
        assert!(!alive(pid));
        assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_taken_port_is_a_one_line_error_and_nothing_stays() {
        let Some(install) = installed() else { return };
        let parent = tempfile::tempdir().unwrap();
        let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let mut s = settings();
        s.port = port;
        let e = PgServer::start_in(parent.path(), &install, &s, None).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, PgError::Start { .. }), "{text}");
        assert!(text.contains(&port.to_string()), "{text}");
        assert!(!text.contains('\n'), "{text}");
        assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_bad_setting_is_a_one_line_error() {
        let Some(install) = installed() else { return };
        let parent = tempfile::tempdir().unwrap();
        let mut s = settings();
        s.extra.push("shared_buffers = lots".into());
        let e = PgServer::start_in(parent.path(), &install, &s, None).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("shared_buffers"), "{text}");
        assert!(!text.contains('\n'), "{text}");
        assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 0);
    }

    #[test]
    fn initdb_into_an_impossible_directory_fails_in_one_line() {
        let Some(install) = installed() else { return };
        let run_as = RunAs::for_this_process().unwrap();
        let e = initdb(&install, Path::new("/dev/null/data"), run_as.as_ref()).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("initdb failed"), "{text}");
        assert!(text.contains("/dev/null/data"), "{text}");
        assert!(!text.contains('\n'), "{text}");
    }

    #[test]
    fn pgbench_failing_is_a_one_line_error() {
        let Some(install) = installed() else { return };
        let port = free_port().unwrap();
        let out = Command::new(install.bin("pgbench"))
            .args(["-n", "-T", "1", "-h", "127.0.0.1", "-U", DB_USER, "-p"])
            .arg(port.to_string())
            .arg("postgres")
            .output()
            .unwrap();
        let e = super::super::pgbench::check_output("pgbench", &out).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("pgbench failed"), "{text}");
        assert!(!text.contains('\n'), "{text}");
    }

    const CHILD_ENV: &str = "SMTLAB_TEST_PG_CHILD_PARENT";

    /// Run by `killed_owner_leaves_nothing_after_the_next_sweep` in a child test
    /// process: starts a server and waits to be killed. A no-op otherwise.
    #[test]
    fn child_that_holds_a_server() {
        let Ok(parent) = std::env::var(CHILD_ENV) else {
            return;
        };
        let install = PgInstall::find().unwrap();
        let server = PgServer::start_in(Path::new(&parent), &install, &settings(), None).unwrap();
        println!("READY {} {}", server.pid().unwrap(), server.dir().display());
        io::stdout().flush().unwrap();
        std::thread::sleep(Duration::from_secs(60));
        drop(server);
    }

    #[test]
    fn killed_owner_leaves_nothing_after_the_next_sweep() {
        use std::io::BufRead;
        let Some(_) = installed() else { return };
        let parent = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "db::pg::tests::child_that_holds_a_server",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, parent.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = io::BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.split_once("READY ").map(|(_, r)| r.to_string()))
            .expect("the child started a server");
        let mut it = ready.split_whitespace();
        let pid: u32 = it.next().unwrap().parse().unwrap();
        let dir = PathBuf::from(it.next().unwrap());
        let pidfile = fs::read_to_string(dir.join("data/postmaster.pid")).unwrap();
        let shm_id: Option<libc::c_int> = pidfile
            .lines()
            .nth(6)
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|t| t.parse().ok());
        assert!(alive(pid));
        child.kill().unwrap(); // SIGKILL
        smtlab_fixtures::bounded::wait(&mut child, "a test child");
        // The postmaster dies with its owner (PR_SET_PDEATHSIG), its children with it.
        wait_until("the postmaster to die", || !alive(pid));
        wait_until("every server process to end", || {
            processes_using(&dir).is_empty()
        });
        // Nothing ran to clean up: the directory is still there until the next sweep.
        assert!(dir.exists());
        assert_eq!(sweep_stale(parent.path()), 1);
        assert!(!dir.exists());
        if let Some(id) = shm_id {
            // SAFETY: shmid_ds is plain integers: all zeroes is a valid value.
            let mut ds: libc::shmid_ds = unsafe { std::mem::zeroed() };
            assert_ne!(
                // SAFETY: `ds` is a live shmid_ds the kernel writes into.
                unsafe { libc::shmctl(id, libc::IPC_STAT, &mut ds) },
                0,
                "shared memory segment {id} left behind"
            );
        }
    }
}
