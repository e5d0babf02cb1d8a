//! `select(2)` on N descriptors (lmbench `lat_select`, N = 10 in paper 001 Table 1).
//!
//! As lmbench, each iteration copies the prepared descriptor set (select overwrites it)
//! and asks, with a zero timeout, which descriptors are ready for *writing*: every one
//! is, so the call polls all N and returns at once. The result must be N, or the sample
//! fails.
//!
//! * `select-file`: N duplicates of one read-only descriptor of a temporary file, exactly
//!   lmbench's `file` mode. Regular files have no poll method; the kernel reports them
//!   ready without asking the file system.
//! * `select-tcp`: N distinct TCP connections over loopback 127.0.0.1: a listener on an
//!   ephemeral port, N connected clients (selected on) and their accepted peers (kept
//!   open so the connections stay established). lmbench's `tcp` mode duplicates one
//!   connected socket N times instead; distinct sockets touch N socket structures and are
//!   what a server's select sees. Nothing leaves the loopback interface.
//!
//! One departure: lmbench passes `nfds = N`, which with its descriptors numbered 3..N+2
//! silently drops the last few from the scan; we pass the highest descriptor + 1, so all
//! N are polled. In a process with many open files the descriptors are higher, and the
//! bitmap scan up to them adds a few nanoseconds.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use super::{Cpus, TempFile, info, last_os_error, time_loop};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_model::BenchInfo;

/// Most descriptors a sample may select on; lmbench's default (200).
const MAX_FDS: u64 = 200;

smtlab_model::named_enum! {
    enum Kind {
        File = "select-file",
        Tcp = "select-tcp",
    }
}

pub(super) fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    crate::boxed(Kind::ALL.map(|kind| Select { kind }))
}

struct Select {
    kind: Kind,
}

impl Benchmark for Select {
    fn info(&self) -> BenchInfo {
        let (description, origin) = match self.kind {
            Kind::File => (
                "select(2) for writing, zero timeout, on N descriptors of one regular file",
                "lmbench lat_select -n 10 file",
            ),
            Kind::Tcp => (
                "select(2) for writing, zero timeout, on N connected loopback TCP sockets",
                "lmbench lat_select -n 10 tcp",
            ),
        };
        info(
            self.kind.name(),
            description,
            origin,
            vec![crate::params::declare(
                "fds",
                "10",
                None,
                &format!("descriptors selected on, 1 to {MAX_FDS} (paper 001: 10)"),
            )],
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        Ok(Box::new(self.instance(ctx)?))
    }
}

impl Select {
    fn instance(&self, ctx: &BenchContext<'_>) -> Result<SelectInstance, BenchError> {
        let name = self.kind.name();
        let n =
            ctx.params
                .get_u64_in("fds", 1..=MAX_FDS, &format!("a count from 1 to {MAX_FDS}"))?;
        let resources = match self.kind {
            Kind::File => {
                let file = TempFile::create(name)?;
                let mut dups = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    // A close-on-exec duplicate (F_DUPFD_CLOEXEC).
                    dups.push(file.file.try_clone().map_err(|e| {
                        let path = smtlab_model::quote::path(&file.path);
                        BenchError::io(name, format!("dup a descriptor of {path}"), e)
                    })?);
                }
                Resources::File { _file: file, dups }
            }
            Kind::Tcp => tcp_connections(name, n as usize)?,
        };
        let fds: Vec<i32> = match &resources {
            Resources::File { dups, .. } => dups.iter().map(|f| f.as_raw_fd()).collect(),
            Resources::Tcp { clients, .. } => clients.iter().map(|s| s.as_raw_fd()).collect(),
        };
        let set = FdSet::new(name, &fds)?;
        Ok(SelectInstance {
            kind: self.kind,
            cpu: Cpus::of(ctx.placement).parent,
            set,
            _resources: resources,
        })
    }
}

/// A listener on 127.0.0.1 and `n` connections to it, both ends kept.
fn tcp_connections(name: &str, n: usize) -> Result<Resources, BenchError> {
    let loopback = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
    let listener = TcpListener::bind(loopback)
        .map_err(|e| BenchError::io(name, "bind a TCP listener on 127.0.0.1:0", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| BenchError::io(name, "read the listener's address", e))?;
    let mut clients = Vec::with_capacity(n);
    let mut peers = Vec::with_capacity(n);
    for _ in 0..n {
        // The handshake completes in the kernel's backlog, so connect returns before
        // accept and one thread suffices.
        let c = TcpStream::connect(addr)
            .map_err(|e| BenchError::io(name, format!("connect to {addr}"), e))?;
        let (p, _) = listener
            .accept()
            .map_err(|e| BenchError::io(name, format!("accept on {addr}"), e))?;
        clients.push(c);
        peers.push(p);
    }
    Ok(Resources::Tcp {
        _listener: listener,
        clients,
        _peers: peers,
    })
}

enum Resources {
    File {
        _file: TempFile,
        dups: Vec<File>,
    },
    Tcp {
        _listener: TcpListener,
        clients: Vec<TcpStream>,
        _peers: Vec<TcpStream>,
    },
}

/// A prepared `fd_set` with its `nfds` and member count.
#[derive(Clone, Copy)]
struct FdSet {
    set: libc::fd_set,
    nfds: i32,
    count: i32,
}

impl FdSet {
    fn new(name: &str, fds: &[i32]) -> Result<FdSet, BenchError> {
        // SAFETY: fd_set is a plain bit array; FD_ZERO initialises it.
        let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
        // SAFETY: a valid fd_set.
        unsafe { libc::FD_ZERO(&mut set) };
        let mut max = -1;
        for &fd in fds {
            if fd < 0 || fd as usize >= libc::FD_SETSIZE {
                return Err(BenchError::unsupported(
                    name,
                    format!(
                        "descriptor {fd} is beyond select's limit of {} (FD_SETSIZE); \
                         this process has too many files open",
                        libc::FD_SETSIZE
                    ),
                ));
            }
            // SAFETY: 0 <= fd < FD_SETSIZE, checked above.
            unsafe { libc::FD_SET(fd, &mut set) };
            max = max.max(fd);
        }
        Ok(FdSet {
            set,
            nfds: max + 1,
            count: fds.len() as i32,
        })
    }
}

struct SelectInstance {
    kind: Kind,
    cpu: Option<u32>,
    set: FdSet,
    _resources: Resources,
}

impl Instance for SelectInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let name = self.kind.name();
        let prepared = self.set;
        time_loop(self.cpu, iterations, || {
            let mut writable = prepared.set;
            let mut timeout = libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            };
            // SAFETY: valid fd_set and timeval; the descriptors stay open while the
            // instance lives.
            let r = unsafe {
                libc::select(
                    prepared.nfds,
                    std::ptr::null_mut(),
                    &mut writable,
                    std::ptr::null_mut(),
                    &mut timeout,
                )
            };
            if r < 0 {
                return Err(last_os_error(name, "select"));
            }
            if r != prepared.count {
                return Err(BenchError::check(
                    name,
                    format!(
                        "select reported {r} of {} descriptors ready for writing",
                        prepared.count
                    ),
                ));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::testutil;

    #[test]
    fn tcp_uses_only_loopback_connections() {
        let b = Select { kind: Kind::Tcp };
        let inst = testutil::with_ctx(&b.info(), &[0], |ctx| b.instance(ctx).unwrap());
        let Resources::Tcp {
            _listener,
            clients,
            _peers,
        } = &inst._resources
        else {
            panic!("select-tcp holds TCP connections")
        };
        assert_eq!(clients.len(), 10);
        assert!(_listener.local_addr().unwrap().ip().is_loopback());
        for c in clients.iter().chain(_peers) {
            assert!(c.local_addr().unwrap().ip().is_loopback());
            assert!(c.peer_addr().unwrap().ip().is_loopback());
        }
        assert_eq!(inst.set.count, 10);
    }

    #[test]
    fn file_selects_on_the_requested_number_of_descriptors() {
        let b = Select { kind: Kind::File };
        let info = b.info();
        let params = crate::Params::resolve(&info, &["fds=3".into()], false).unwrap();
        let placement = testutil::placement(&[0]);
        let topology = testutil::topology();
        let ctx = BenchContext {
            params: &params,
            placement: &placement,
            topology: &topology,
            client: None,
        };
        let mut inst = b.instance(&ctx).unwrap();
        assert_eq!(inst.set.count, 3);
        let s = inst.sample(10).unwrap();
        assert_eq!(s.work, 10.0);

        let params = crate::Params::resolve(&info, &["fds=0".into()], false).unwrap();
        let ctx = BenchContext {
            params: &params,
            ..ctx
        };
        let e = b.instance(&ctx).err().unwrap().to_string();
        assert!(e.contains("fds=\"0\""), "{e}");
    }
}
