//! Child processes that never outlive smtlab.
//!
//! Servers (nginx, httpd, postgres), clients (pgbench) and the user's commands are
//! started with [`tie_to_parent`]: each child leads its own process group (so one
//! `killpg` reaches everything it forks) and asks the kernel for SIGKILL when the
//! thread that started it dies (`PR_SET_PDEATHSIG`), which covers `kill -9` of smtlab.
//! [`ChildGroup`] kills and reaps the whole group when dropped, which covers every
//! other way out (errors, Ctrl-C unwinding, the end of a cell).
//!
//! `PR_SET_PDEATHSIG` follows the *thread* that forked, not the process: start such
//! children from a thread that lives as long as they should (the measuring thread, or
//! [`crate::client::ClientSide`]'s spawner).

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Makes `cmd`'s child lead a new process group and die with the thread that forks it.
pub fn tie_to_parent(cmd: &mut Command) -> &mut Command {
    let parent = std::process::id() as libc::pid_t;
    let hook = move || -> io::Result<()> {
        // Only async-signal-safe calls between fork and exec.
        if unsafe { libc::setpgid(0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // The parent may have died between fork and prctl: then nobody would kill us.
        if unsafe { libc::getppid() } != parent {
            unsafe { libc::_exit(1) };
        }
        Ok(())
    };
    unsafe { cmd.pre_exec(hook) };
    cmd
}

/// A child started with [`tie_to_parent`], killed with its whole process group and reaped
/// when dropped.
#[derive(Debug)]
pub struct ChildGroup {
    child: Option<Child>,
    pgid: libc::pid_t,
}

impl ChildGroup {
    /// Starts `cmd` tied to this thread, in its own process group.
    pub fn spawn(cmd: &mut Command) -> io::Result<ChildGroup> {
        let child = tie_to_parent(cmd).spawn()?;
        let pgid = child.id() as libc::pid_t;
        Ok(ChildGroup {
            child: Some(child),
            pgid,
        })
    }

    pub fn id(&self) -> u32 {
        self.pgid as u32
    }

    pub fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("child present until drop")
    }

    /// Exit status if the leader has ended, without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child_mut().try_wait()
    }

    /// Sends `signal` to every process of the group.
    pub fn signal(&self, signal: libc::c_int) -> io::Result<()> {
        if unsafe { libc::killpg(self.pgid, signal) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// SIGTERM to the group, SIGKILL after `grace`, then reaps the leader. Members of
    /// the group that the leader did not reap are re-parented to init (or the nearest
    /// subreaper) and reaped there; the SIGKILL reaches them first.
    pub fn stop(mut self, grace: Duration) -> io::Result<Option<ExitStatus>> {
        self.stop_inner(grace)
    }

    fn stop_inner(&mut self, grace: Duration) -> io::Result<Option<ExitStatus>> {
        let Some(mut child) = self.child.take() else {
            return Ok(None);
        };
        let _ = self.signal(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        let mut status = None;
        while Instant::now() < deadline {
            if let Some(s) = child.try_wait()? {
                status = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Whatever is left of the group, leader or not, goes now.
        let _ = self.signal(libc::SIGKILL);
        if status.is_none() {
            status = Some(child.wait()?);
        }
        Ok(status)
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        let _ = self.stop_inner(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: libc::pid_t) -> bool {
        unsafe { libc::kill(pid, 0) == 0 }
    }

    #[test]
    fn dropping_the_group_kills_grandchildren_too() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("sleep 30 & echo $! > {}; wait", pidfile.display()));
        let group = ChildGroup::spawn(&mut cmd).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let grandchild = loop {
            if let Ok(s) = std::fs::read_to_string(&pidfile)
                && let Ok(pid) = s.trim().parse::<libc::pid_t>()
            {
                break pid;
            }
            assert!(
                Instant::now() < deadline,
                "the shell did not start its child"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(alive(grandchild));
        drop(group);
        // The grandchild is re-parented and reaped by init (or a subreaper): it may
        // linger as a zombie for a moment, so wait for it to go.
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(grandchild) && Instant::now() < deadline {
            let state =
                std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
            if state.contains(") Z ") {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let state = std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
        assert!(
            !alive(grandchild) || state.contains(") Z "),
            "grandchild {grandchild} survived: {state}"
        );
    }

    #[test]
    fn stop_reports_the_exit_status() {
        let group = ChildGroup::spawn(Command::new("true").arg("x")).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let status = group.stop(Duration::from_secs(1)).unwrap().unwrap();
        assert!(status.success());
    }
}
