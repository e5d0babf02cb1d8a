//! The client side of a server workload: threads and processes pinned to CPUs apart
//! from the placement (see `smtlab_placement::client`), started and stopped with the
//! cell.
//!
//! Counters follow smtlab's measuring thread with `inherit` (runner `counting`), so
//! anything it starts is counted as the server's. The client must not be: so a
//! [`ClientSide`] owns a spawner thread, created by the runner *before* any counter is
//! opened, and every client thread or process is started from it. Their CPU time then
//! stays out of the server's counts, and "per request" figures are the server's alone.

use std::io;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::sync::mpsc;
use std::thread::JoinHandle;

use smtlab_model::CpuSet;
use smtlab_placement::pin::{CommandPinExt, pin_current_thread, spawn_pinned_by};

use crate::process::ChildGroup;

type Job = Box<dyn FnOnce() + Send>;

/// Why a server workload cannot run without a [`ClientSide`]: the runner found no CPUs
/// apart from the placement (or the caller gave none).
pub const NEEDS_CLIENT_SIDE: &str = "needs a client side (CPUs apart from the placement)";

/// CPUs and a spawner for a workload's client side.
#[derive(Debug)]
pub struct ClientSide {
    cpus: CpuSet,
    /// Set: the client side runs on these agents' hosts, and `cpus` is empty.
    remote: Option<smtlab_placement::RemoteClients>,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    spawner: Option<JoinHandle<()>>,
}

impl ClientSide {
    /// Starts the spawner thread. Call before counters are opened.
    pub fn start(cpus: CpuSet) -> io::Result<ClientSide> {
        if cpus.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the client side needs at least one CPU",
            ));
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let spawner = std::thread::Builder::new()
            .name("smtlab-client-spawner".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })?;
        Ok(ClientSide {
            cpus,
            remote: None,
            jobs: Mutex::new(Some(tx)),
            spawner: Some(spawner),
        })
    }

    /// A client side on other hosts: the agents of `remote` run the load, and no CPU of
    /// this host is taken (nothing may be spawned here).
    pub fn remote(remote: smtlab_placement::RemoteClients) -> ClientSide {
        ClientSide {
            cpus: CpuSet::new(),
            remote: Some(remote),
            jobs: Mutex::new(None),
            spawner: None,
        }
    }

    /// Another client side on the same CPUs (or the same agents) with a spawner of its
    /// own: the load of a second server workload in one cell (a co-run partner), whose
    /// processes must live exactly as long as that workload's instance.
    pub fn like(&self) -> io::Result<ClientSide> {
        match &self.remote {
            Some(remote) => Ok(ClientSide::remote(remote.clone())),
            None => ClientSide::start(self.cpus.clone()),
        }
    }

    /// The agents of a remote client side.
    pub fn remote_clients(&self) -> Option<&smtlab_placement::RemoteClients> {
        self.remote.as_ref()
    }

    /// The CPUs the client side may use (none for a remote one).
    pub fn cpus(&self) -> &CpuSet {
        &self.cpus
    }

    /// The CPU for client thread `i` (round robin over the client CPUs).
    pub fn cpu_for_thread(&self, i: usize) -> u32 {
        let v = self.cpus.to_vec();
        // A remote client side has no CPU here; spawning on it fails before this matters.
        v.get(i % v.len().max(1)).copied().unwrap_or(0)
    }

    fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        let sender = self
            .jobs
            .lock()
            .map_err(|_| io::Error::other("client spawner lock poisoned"))?
            .clone()
            .ok_or_else(|| io::Error::other("client side stopped"))?;
        sender
            .send(Box::new(move || {
                let _ = tx.send(job());
            }))
            .map_err(|_| io::Error::other("client spawner has stopped"))?;
        rx.recv()
            .map_err(|_| io::Error::other("client spawner has stopped"))
    }

    /// Starts `f` on a thread pinned to `cpu` (one of the client CPUs), or to all client
    /// CPUs with `None`, from the spawner so the counters do not follow it.
    pub fn spawn<F, T>(&self, name: &str, cpu: Option<u32>, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let set: CpuSet = match cpu {
            Some(c) if !self.cpus.contains(c) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "CPU {c} is not a client CPU ({})",
                        self.cpus.to_list_string()
                    ),
                ));
            }
            Some(c) => std::iter::once(c).collect(),
            None => self.cpus.clone(),
        };
        let name = name.to_string();
        self.run(move || {
            let builder = std::thread::Builder::new().name(name);
            spawn_pinned_by(builder, move || pin_current_thread(&set), f)
        })?
    }

    /// Starts `cmd` pinned to the client CPUs, from the spawner (so its counters are not
    /// the server's), in its own process group and tied to the spawner thread (see
    /// [`crate::process`]): it is killed when the group is dropped or smtlab dies.
    pub fn command(&self, mut cmd: Command) -> io::Result<ChildGroup> {
        let cpus = self.cpus.clone();
        self.run(move || {
            cmd.pin_to(&cpus).map_err(io::Error::from)?;
            ChildGroup::spawn(&mut cmd)
        })?
    }

    /// Starts `cmd` pinned to the client CPUs and waits for it, from the spawner.
    pub fn output(&self, mut cmd: Command) -> io::Result<std::process::Output> {
        let cpus = self.cpus.clone();
        self.run(move || {
            cmd.pin_to(&cpus).map_err(io::Error::from)?;
            crate::process::tie_to_parent(&mut cmd);
            let child: Child = cmd
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()?;
            child.wait_with_output()
        })?
    }
}

impl Drop for ClientSide {
    fn drop(&mut self) {
        if let Ok(mut jobs) = self.jobs.lock() {
            jobs.take();
        }
        if let Some(t) = self.spawner.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_placement::pin::get_affinity;

    fn my_cpus() -> CpuSet {
        get_affinity(0).unwrap()
    }

    #[test]
    fn threads_run_on_the_client_cpus() {
        let cpus = my_cpus();
        let last = cpus.last().unwrap();
        let client = ClientSide::start(std::iter::once(last).collect()).unwrap();
        let h = client
            .spawn("t", Some(last), || get_affinity(0).unwrap())
            .unwrap();
        assert_eq!(
            smtlab_fixtures::bounded::join(h, "a test thread").to_vec(),
            vec![last]
        );
    }

    #[test]
    fn a_cpu_outside_the_client_set_is_refused() {
        let cpus = my_cpus();
        let first = cpus.first().unwrap();
        let client = ClientSide::start(std::iter::once(first).collect()).unwrap();
        let e = client.spawn("t", Some(first + 1000), || ()).unwrap_err();
        assert!(e.to_string().contains("not a client CPU"), "{e}");
    }

    #[test]
    fn a_context_without_a_client_side_names_the_bench_and_why() {
        let params = crate::Params::default();
        let placement = crate::workers::tests::placement(&[0]);
        let topology = crate::workers::tests::topology(None);
        let mut ctx = crate::workers::tests::context(&params, &placement, &topology);
        let e = ctx.client_side("web-x").unwrap_err();
        assert_eq!(e.to_string(), format!("web-x: {NEEDS_CLIENT_SIDE}"));
        let client =
            ClientSide::start(std::iter::once(my_cpus().last().unwrap()).collect()).unwrap();
        ctx.client = Some(&client);
        assert!(std::ptr::eq(ctx.client_side("web-x").unwrap(), &client));
    }

    #[test]
    fn commands_are_pinned() {
        let cpus = my_cpus();
        let last = cpus.last().unwrap();
        let client = ClientSide::start(std::iter::once(last).collect()).unwrap();
        let out = client
            .output({
                let mut c = Command::new("sh");
                c.arg("-c").arg("grep Cpus_allowed_list /proc/self/status");
                c
            })
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.trim().ends_with(&last.to_string()), "{text}");
    }
}
