//! The kernel NFS server (nfsd) in a network and mount namespace of its own.
//!
//! One process holds the namespaces: `unshare --net --mount --propagation private sh`,
//! started as a [`ChildGroup`] (its own process group and cgroup, killed with smtlab:
//! the parent-death signal, the guardian, the clean-up on signals). Its script brings
//! up loopback, mounts a private tmpfs over `/run` and `/var/lib/nfs` (so exports,
//! rmtab, the state files and rpcbind's socket never touch the host's), starts
//! `rpcbind` in the foreground in a mount namespace of its own, waits until it answers,
//! mounts the namespace's nfsd file system, exports the cell's directory to 127.0.0.1 with `exportfs -o`,
//! starts `rpc.mountd` (port [`MOUNTD_PORT`]) in the foreground and `rpc.nfsd -N 4
//! THREADS` (NFSv3 only), waits until mountd is registered, stops `rpcbind`, prints
//! `READY` and waits for its standard input to close. Closing it stops the threads
//! (`rpc.nfsd 0`), unexports and ends mountd.
//!
//! Why rpcbind has a mount namespace of its own (nfsd's file system is mounted only once
//! rpcbind answers, so its namespace, copied before that, never holds the mount: it is
//! started in the background, and under a slow CPU its `unshare` can come after a mount
//! the script makes at once) and goes once nfsd and mountd have registered:
//! nfsd unregisters from rpcbind when its threads stop, and after a `kill -9` of smtlab
//! that stop comes from the exit of the last process holding nfsd's mount. Were that
//! rpcbind itself, its listening socket not yet closed, the kernel's call would wait
//! minutes for an answer that never comes, holding nfsd's lock and stalling every
//! later nfsd start (seen in the SMT guest). Outside that mount namespace rpcbind is
//! never the one, and once it is gone the call is refused at once. The clients need
//! no portmapper: they are given the ports.
//!
//! Nothing needs undoing after a `kill -9` of smtlab: the holder and its daemons die
//! (parent-death signal, guardian), the mounts were only ever in the namespace, and
//! the kernel shuts a network namespace's nfsd down when the namespace goes away with
//! its last process (smtlab never names it with `ip netns add`, so nothing keeps it).
//!
//! The nfsd threads the start made (kernel threads named `nfsd` that were not there
//! before) are pinned to the placement's CPUs. Clients reach the server from threads
//! that join the namespace (`setns`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use smtlab_bench::process::ChildGroup;
use smtlab_model::CpuSet;

/// The programs the served path runs, and the package that brings each.
const PROGRAMS: &[(&str, &str)] = &[
    ("unshare", "util-linux"),
    ("ip", "iproute2"),
    ("rpcbind", "rpcbind"),
    ("rpcinfo", "rpcbind"),
    ("rpc.mountd", "nfs-kernel-server"),
    ("rpc.nfsd", "nfs-kernel-server"),
    ("exportfs", "nfs-kernel-server"),
];
const SBIN: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

fn find_program(name: &str) -> Option<PathBuf> {
    which::which(name).ok().or_else(|| {
        SBIN.iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| p.is_file())
    })
}

/// Why the kernel NFS server cannot run here, in one line (`None`: it can). `proc` and
/// `modules` are the roots of `/proc` and `/lib/modules` (tests point them elsewhere);
/// `root` says whether smtlab is root.
pub fn why_not_at(proc: &Path, modules: &Path, root: bool) -> Option<String> {
    let filesystems = std::fs::read_to_string(proc.join("filesystems")).unwrap_or_default();
    let has_nfsd = filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("nfsd"));
    if !has_nfsd {
        let release = std::fs::read_to_string(proc.join("sys/kernel/osrelease"))
            .unwrap_or_default()
            .trim()
            .to_string();
        let dir = modules.join(&release);
        let module = module_present(&dir);
        let why = if module {
            format!(
                "the module is in {} but not loaded (modprobe nfsd)",
                dir.display()
            )
        } else if dir.is_dir() {
            format!("no nfsd module in {}", smtlab_model::quote::path(&dir))
        } else {
            format!("no {} (no kernel modules)", smtlab_model::quote::path(&dir))
        };
        return Some(format!(
            "kernel has no nfsd: 'nfsd' is not in {}; {why}",
            proc.join("filesystems").display()
        ));
    }
    if !root {
        return Some(
            "not root: the kernel NFS server needs root (a network namespace, mounts, nfsd threads)"
                .into(),
        );
    }
    let missing: Vec<&(&str, &str)> = PROGRAMS
        .iter()
        .filter(|(p, _)| find_program(p).is_none())
        .collect();
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(|(p, _)| *p).collect();
        let mut pkgs: Vec<&str> = missing.iter().map(|(_, k)| *k).collect();
        pkgs.dedup();
        return Some(format!(
            "{} not found: apt-get install {}",
            names.join(", "),
            pkgs.join(" ")
        ));
    }
    None
}

fn module_present(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("modules.dep")) else {
        return false;
    };
    text.lines().filter_map(|l| l.split(':').next()).any(|m| {
        m.rsplit('/')
            .next()
            .is_some_and(|f| f.starts_with("nfsd.ko"))
    })
}

/// [`why_not_at`] for this machine.
pub fn why_not() -> Option<String> {
    why_not_at(
        Path::new("/proc"),
        Path::new("/lib/modules"),
        crate::is_root(),
    )
}

/// The port `rpc.mountd` listens on in the namespace (Debian's usual one; the
/// namespace is private, so it is always free), and nfsd's.
pub const MOUNTD_PORT: u16 = 20048;
pub const NFSD_PORT: u16 = 2049;

/// The holder's script; `$1` the exported directory, `$2` the nfsd threads, `$3` the
/// directory for the daemons' logs, `$4` `--udp` or `--no-udp` (nfsd's UDP transport).
/// `/run` is a private tmpfs too, so this rpcbind's socket and lock never meet a host
/// rpcbind's. After `READY` the script's own output goes to the log: smtlab stops
/// reading it.
const SCRIPT: &str = r#"set -e
exec 2>>"$3/server.log"
ip link set lo up
mount -t tmpfs smtlab-nfs-run /run
mount -t tmpfs smtlab-nfs-state /var/lib/nfs
mkdir -p /var/lib/nfs/rpc_pipefs /var/lib/nfs/v4recovery /var/lib/nfs/sm
: > /var/lib/nfs/etab
: > /var/lib/nfs/rmtab
unshare --mount --propagation private rpcbind -f -w >>"$3/server.log" 2>&1 &
rpcbind=$!
registered() {
  i=0
  until rpcinfo -p 127.0.0.1 2>/dev/null | grep -q "$1"; do
    i=$((i + 1)); [ "$i" -lt 200 ] || { echo "$2 did not register with rpcbind" >&2; exit 1; }
    sleep 0.05
  done
}
registered portmapper rpcbind
mkdir -p /proc/fs/nfsd
mount -t nfsd nfsd /proc/fs/nfsd
exportfs -o rw,sync,no_root_squash,insecure,no_subtree_check,fsid=7 "127.0.0.1:$1"
rpc.mountd -F -N 4 -p MOUNTD_PORT >>"$3/server.log" 2>&1 &
rpc.nfsd -N 4 "$4" -H 127.0.0.1 -p NFSD_PORT "$2"
registered mountd rpc.mountd
kill "$rpcbind"
wait "$rpcbind" || true
echo READY
exec >>"$3/server.log"
read -r _ || true
rpc.nfsd 0 || true
exportfs -au || true
kill $(jobs -p) 2>/dev/null || true
wait || true
"#;

/// [`SCRIPT`] with its ports filled in.
fn script() -> String {
    SCRIPT
        .replace("MOUNTD_PORT", &MOUNTD_PORT.to_string())
        .replace("NFSD_PORT", &NFSD_PORT.to_string())
}

/// The running server. Dropping it stops the threads and ends the namespace.
pub struct KernelNfs {
    group: Option<ChildGroup>,
    stdin: Option<std::process::ChildStdin>,
    pid: u32,
    /// The nfsd threads this start made.
    pub threads: Vec<i32>,
}

/// Why the kernel's NFS server did not start; one line each, the failing step's own
/// message in it.
#[derive(Debug, thiserror::Error)]
pub enum KernelNfsError {
    #[error("unshare not found (util-linux)")]
    NoUnshare,
    #[error("start unshare: {0}")]
    Spawn(std::io::Error),
    #[error("the NFS server did not start: {why} (log: {})", .log.display())]
    NotStarted { why: String, log: PathBuf },
    #[error("pin nfsd thread {tid}: {error}")]
    Pin {
        tid: i32,
        error: smtlab_placement::pin::PinError,
    },
}

impl KernelNfs {
    /// Exports `dir` from a new namespace with `threads` nfsd threads pinned to `cpus`.
    pub fn start(
        dir: &Path,
        logs: &Path,
        threads: u32,
        udp: bool,
        cpus: &CpuSet,
    ) -> Result<KernelNfs, KernelNfsError> {
        let unshare = find_program("unshare").ok_or(KernelNfsError::NoUnshare)?;
        let before = nfsd_threads();
        let mut cmd = Command::new(unshare);
        cmd.args([
            "--net",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script(),
            "sh",
        ])
        .arg(dir)
        .arg(threads.to_string())
        .arg(logs)
        // nfs-utils leaves UDP off unless asked.
        .arg(if udp { "--udp" } else { "--no-udp" })
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut group = ChildGroup::spawn(&mut cmd).map_err(KernelNfsError::Spawn)?;
        let pid = group.id();
        let stdin = group.child_mut().stdin.take();
        let stdout = group.child_mut().stdout.take();
        let stderr = group.child_mut().stderr.take();
        let mut server = KernelNfs {
            group: Some(group),
            stdin,
            pid,
            threads: Vec::new(),
        };
        let ready = stdout
            .map(|o| {
                BufReader::new(o)
                    .lines()
                    .map_while(Result::ok)
                    .any(|l| l.trim() == "READY")
            })
            .unwrap_or(false);
        if !ready {
            // unshare's own failure is on its standard error; the script's in its log.
            // The last message, not its indented continuation ("dmesg(1) may have...").
            let last = |text: String| {
                text.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty() && !l.starts_with(char::is_whitespace))
                    .map(str::to_string)
            };
            let log = logs.join("server.log");
            let mut err = String::new();
            if let Some(mut e) = stderr {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            let why = last(err)
                .or_else(|| last(std::fs::read_to_string(&log).unwrap_or_default()))
                .unwrap_or_else(|| "(no message)".into());
            return Err(KernelNfsError::NotStarted { why, log });
        }
        drop(stderr);
        // The threads are started by the time rpc.nfsd returns; give the kernel a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            server.threads = nfsd_threads()
                .into_iter()
                .filter(|t| !before.contains(t))
                .collect();
            if server.threads.len() >= threads as usize || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for &t in &server.threads {
            smtlab_placement::pin::set_affinity(t, cpus)
                .map_err(|error| KernelNfsError::Pin { tid: t, error })?;
        }
        Ok(server)
    }

    /// The namespace clients join: `/proc/PID/ns/net` of the holder.
    pub fn netns(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.pid))
    }

    /// CPU time of this server's nfsd threads, in nanoseconds.
    pub fn cpu_ns(&self) -> u64 {
        self.threads
            .iter()
            .filter_map(|&t| smtlab_placement::pin::thread_cpu_ns(t))
            .sum()
    }
}

impl Drop for KernelNfs {
    fn drop(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.write_all(b"\n");
        }
        if let Some(g) = self.group.take() {
            let _ = g.stop(Duration::from_secs(5));
        }
    }
}

/// Kernel threads named `nfsd` (their ids).
fn nfsd_threads() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "nfsd")
        })
        .collect()
}

/// Moves the calling thread into the network namespace at `path`.
pub fn join_netns(path: &Path) -> std::io::Result<()> {
    let f = std::fs::File::open(path)?;
    use std::os::fd::AsRawFd;
    // SAFETY: setns takes a descriptor we hold open for the call and a flag; it changes
    // the calling thread's network namespace only.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_with(filesystems: &str, release: &str) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("filesystems"), filesystems).unwrap();
        std::fs::create_dir_all(t.path().join("sys/kernel")).unwrap();
        std::fs::write(t.path().join("sys/kernel/osrelease"), release).unwrap();
        t
    }

    #[test]
    fn a_kernel_without_nfsd_is_said_in_one_line() {
        let p = proc_with("nodev\tsysfs\nnodev\ttmpfs\n\text4\n", "6.1.0-test\n");
        let m = tempfile::tempdir().unwrap();
        let why = why_not_at(p.path(), m.path(), true).unwrap();
        assert!(why.starts_with("kernel has no nfsd: "), "{why}");
        assert!(
            why.contains("no kernel modules") && !why.contains('\n'),
            "{why}"
        );
        // A module that could be loaded is named.
        let dir = m.path().join("6.1.0-test");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("modules.dep"),
            "kernel/fs/nfsd/nfsd.ko.xz: kernel/fs/lockd/lockd.ko.xz\n",
        )
        .unwrap();
        let why = why_not_at(p.path(), m.path(), true).unwrap();
        assert!(why.contains("modprobe nfsd"), "{why}");
        std::fs::write(dir.join("modules.dep"), "kernel/fs/ext4/ext4.ko.xz:\n").unwrap();
        let why = why_not_at(p.path(), m.path(), true).unwrap();
        assert!(why.contains("no nfsd module in"), "{why}");
    }

    #[test]
    fn with_nfsd_the_next_reason_is_root_then_programs() {
        let p = proc_with("nodev\tsysfs\nnodev\tnfsd\n", "6.1.0-test\n");
        let m = tempfile::tempdir().unwrap();
        let why = why_not_at(p.path(), m.path(), false).unwrap();
        assert!(why.starts_with("not root"), "{why}");
        if let Some(why) = why_not_at(p.path(), m.path(), true) {
            assert!(why.contains("apt-get install"), "{why}");
        }
    }

    /// Where the kernel has no nfsd the holder's script fails part-way (after its
    /// private mounts over /run): a one-line error, and neither a process nor a mount of
    /// it is left in smtlab's namespaces.
    #[test]
    fn a_server_that_cannot_start_fails_in_one_line_and_leaves_nothing() {
        if !crate::is_root() || find_program("unshare").is_none() || why_not().is_none() {
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let export = t.path().join("export");
        std::fs::create_dir(&export).unwrap();
        let cpus: CpuSet = smtlab_placement::pin::get_affinity(0).unwrap();
        // The daemons the script starts before it fails (rpcbind) must go with it (a
        // zombie waiting for init to reap it has gone).
        let daemons = || -> Vec<String> {
            std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|d| {
                    let comm = std::fs::read_to_string(d.path().join("comm")).ok()?;
                    let stat = std::fs::read_to_string(d.path().join("stat")).ok()?;
                    let state = stat.rsplit_once(") ")?.1.chars().next()?;
                    (["rpcbind", "rpc.mountd"].contains(&comm.trim()) && state != 'Z')
                        .then(|| d.file_name().to_string_lossy().into_owned())
                })
                .collect()
        };
        let before = daemons();
        let e = KernelNfs::start(&export, t.path(), 1, false, &cpus)
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("the NFS server did not start: "), "{e}");
        // The reason is the failing step's own message, from the log in `logs`.
        assert!(!e.contains("(no message)"), "{e}");
        assert!(t.path().join("server.log").is_file(), "{e}");
        assert!(!e.contains("dmesg(1)"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(!mounts.contains("smtlab-nfs"), "a mount leaked: {mounts}");
        let needle = export.display().to_string();
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|d| {
                let c = std::fs::read(d.path().join("cmdline")).ok()?;
                let c = String::from_utf8_lossy(&c).replace('\0', " ");
                c.contains(&needle).then_some(c)
            })
            .collect();
        assert!(left.is_empty(), "left running: {left:?}");
        let new: Vec<String> = daemons()
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        assert!(new.is_empty(), "daemons left running: {new:?}");
    }

    #[test]
    fn the_script_gets_its_ports_and_arguments() {
        let s = script();
        assert!(
            !s.contains("MOUNTD_PORT") && !s.contains("NFSD_PORT"),
            "{s}"
        );
        assert!(s.contains("-p 20048") && s.contains("-p 2049 "), "{s}");
        assert!(s.contains("\"$3/server.log\""), "{s}");
        assert!(s.contains("rpc.nfsd -N 4 \"$4\" "), "{s}");
    }

    #[test]
    fn this_machine_says_why_or_can_serve() {
        // Here: no nfsd in this kernel. Wherever the kernel has it, `why_not` may be
        // None; every reason is one line.
        if let Some(why) = why_not() {
            assert!(!why.contains('\n'), "{why}");
            let fs = std::fs::read_to_string("/proc/filesystems").unwrap();
            if !fs.contains("nfsd") {
                assert!(why.starts_with("kernel has no nfsd: "), "{why}");
            }
        }
    }
}
