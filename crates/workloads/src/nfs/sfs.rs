//! The SFS-like load: NFSv3 clients in user space (the `nfs3_client` crate over TCP,
//! so no kernel NFS client and no mount is needed) running SPEC SFS 3.0's operation
//! mix against an export, each operation timed, every read and readlink checked.
//!
//! The file set, made through NFS itself by [`setup`]: `sfs/d<i>/f<j>` files whose
//! byte at offset `o` is [`pattern`]`(i, j, o)`, a symlink `sfs/d<i>/l` to `f0`, and a
//! directory `sfs/w<k>` per client with a stock of files to remove. Writes put the
//! pattern back where they write, so a read anywhere, any time, must return the
//! pattern: a read that does not is counted in `content_mismatches` and fails the
//! sample.
//!
//! A load runs back to back (each client starts its next operation when the previous
//! answer arrives: a closed loop) or paced ([`Pacer`]: each client, as an SFS load
//! process, starts its operations at scheduled times, its share of a requested rate).

use std::net::IpAddr;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use nfs3_client::nfs3_types::nfs3::{
    self as n, ACCESS3args, COMMIT3args, CREATE3args, FSSTAT3args, GETATTR3args, LOOKUP3args,
    MKDIR3args, Nfs3Option, Nfs3Result, READ3args, READDIR3args, READDIRPLUS3args, READLINK3args,
    REMOVE3args, SETATTR3args, SYMLINK3args, WRITE3args, createhow3, diropargs3, filename3,
    nfs_fh3, nfspath3, sattr3, stable_how, symlinkdata3,
};
use nfs3_client::nfs3_types::rpc::{auth_unix, opaque_auth};
use nfs3_client::nfs3_types::xdr_codec::Opaque;
use nfs3_client::{Nfs3Client, Nfs3ConnectionBuilder};
use smtlab_loadgen::Rng;

use super::udp::{Conn, Transport};

/// The operations of SFS 3.0's NFSv3 mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Lookup,
    Read,
    Write,
    Getattr,
    Readlink,
    Readdir,
    Create,
    Remove,
    Fsstat,
    Setattr,
    Readdirplus,
    Access,
    Commit,
}

/// SPEC SFS 3.0 (SFS97_R1, the paper's version) NFSv3 mix, in percent (they add up to
/// 99 as published; choices are made in proportion), each with its name in the results.
pub const MIX: [(Op, &str, f64); 13] = [
    (Op::Lookup, "lookup", 27.0),
    (Op::Read, "read", 18.0),
    (Op::Write, "write", 9.0),
    (Op::Getattr, "getattr", 11.0),
    (Op::Readlink, "readlink", 7.0),
    (Op::Readdir, "readdir", 2.0),
    (Op::Create, "create", 1.0),
    (Op::Remove, "remove", 1.0),
    (Op::Fsstat, "fsstat", 1.0),
    (Op::Setattr, "setattr", 1.0),
    (Op::Readdirplus, "readdirplus", 9.0),
    (Op::Access, "access", 7.0),
    (Op::Commit, "commit", 5.0),
];

/// SFS97's transfer size for reads and writes.
pub const TRANSFER_BYTES: u32 = 8192;
/// Files each client's own directory starts with, for removes to take.
const STOCK: u32 = 8;

impl Op {
    pub fn name(self) -> &'static str {
        MIX[self.index()].1
    }

    /// Its place in [`MIX`] (and in [`LoadResult::latencies_ns`]).
    pub fn index(self) -> usize {
        MIX.iter().position(|(o, ..)| *o == self).unwrap_or(0)
    }
}

/// The byte at offset `o` of file `j` of directory `i`.
pub fn pattern(i: u32, j: u32, o: u64) -> u8 {
    (o.wrapping_mul(31) ^ u64::from(i).wrapping_mul(131) ^ u64::from(j).wrapping_mul(7)) as u8
}

/// Where the server is and how big the file set is.
#[derive(Debug, Clone)]
pub struct Target {
    pub ip: IpAddr,
    /// The portmapper's port (111 for a kernel server).
    pub portmap_port: u16,
    /// Known ports skip the portmapper (servers that answer MOUNT and NFS on one port).
    pub mount_port: Option<u16>,
    pub nfs_port: Option<u16>,
    pub export: String,
    /// Connect from a port under 1024 (what a kernel server wants from root).
    pub privileged: bool,
    /// TCP, or UDP as SFS97 ran (MOUNT and NFS alike).
    pub transport: Transport,
}

/// The file set's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub dirs: u32,
    pub files_per_dir: u32,
    pub file_bytes: u32,
    pub clients: u32,
}

/// Why a load could not run; one line.
pub type LoadError = String;

type Client = Nfs3Client<Conn>;

async fn connect(t: &Target) -> Result<(Client, nfs_fh3), LoadError> {
    // AUTH_UNIX, as SFS's load processes send: the kernel server refuses AUTH_NULL on
    // an export whose security flavour is sys (NFS3ERR_ACCES).
    let cred = opaque_auth::auth_unix(&auth_unix {
        machinename: Opaque::borrowed(b"smtlab"),
        // SAFETY: geteuid() and getegid() take nothing and cannot fail.
        uid: unsafe { libc::geteuid() },
        // SAFETY: as above.
        gid: unsafe { libc::getegid() },
        ..auth_unix::default()
    });
    let mut b = Nfs3ConnectionBuilder::new(t.transport.clone(), t.ip.to_string(), t.export.clone())
        .credential(cred)
        .connect_from_privileged_port(t.privileged)
        .portmapper_port(t.portmap_port);
    if let Some(p) = t.mount_port {
        b = b.mount_port(p);
    }
    if let Some(p) = t.nfs_port {
        b = b.nfs3_port(p);
    }
    let conn = b
        .mount()
        .await
        .map_err(|e| format!("mount {}:{}: {e}", t.ip, t.export))?;
    let root = conn.root_nfs_fh3();
    Ok((conn.into_nfs3_client(), root))
}

/// Name `n` in directory `dir`, as the calls that take one name it.
fn entry(dir: &nfs_fh3, n: &str) -> diropargs3<'static> {
    diropargs3 {
        dir: dir.clone(),
        name: filename3::from(n.as_bytes().to_vec()),
    }
}

fn status<T, E>(what: &str, r: Nfs3Result<T, E>) -> Result<T, LoadError> {
    match r {
        Nfs3Result::Ok(v) => Ok(v),
        Nfs3Result::Err((s, _)) => Err(format!("{what}: {s:?}")),
    }
}

async fn lookup(c: &mut Client, dir: &nfs_fh3, n: &str) -> Result<Option<nfs_fh3>, LoadError> {
    let r = c
        .lookup(&LOOKUP3args {
            what: entry(dir, n),
        })
        .await
        .map_err(|e| format!("LOOKUP {n}: {e}"))?;
    Ok(match r {
        Nfs3Result::Ok(ok) => Some(ok.object),
        Nfs3Result::Err((n::nfsstat3::NFS3ERR_NOENT, _)) => None,
        Nfs3Result::Err((s, _)) => return Err(format!("LOOKUP {n}: {s:?}")),
    })
}

async fn mkdir(c: &mut Client, dir: &nfs_fh3, n: &str) -> Result<nfs_fh3, LoadError> {
    let r = c
        .mkdir(&MKDIR3args {
            where_: entry(dir, n),
            attributes: sattr3::default(),
        })
        .await
        .map_err(|e| format!("MKDIR {n}: {e}"))?;
    let what = format!("MKDIR {n}");
    match status(&what, r)?.obj {
        Nfs3Option::Some(h) => Ok(h),
        Nfs3Option::None => Err(format!("{what}: the server returned no file handle")),
    }
}

/// Directory `n` of `dir`, made if it is not there.
async fn lookup_or_mkdir(c: &mut Client, dir: &nfs_fh3, n: &str) -> Result<nfs_fh3, LoadError> {
    match lookup(c, dir, n).await? {
        Some(h) => Ok(h),
        None => mkdir(c, dir, n).await,
    }
}

async fn create(c: &mut Client, dir: &nfs_fh3, n: &str) -> Result<nfs_fh3, LoadError> {
    let r = c
        .create(&CREATE3args {
            where_: entry(dir, n),
            how: createhow3::UNCHECKED(sattr3::default()),
        })
        .await
        .map_err(|e| format!("CREATE {n}: {e}"))?;
    let what = format!("CREATE {n}");
    let ok = status(&what, r)?;
    match ok.obj {
        Nfs3Option::Some(h) => Ok(h),
        // A server may leave the handle out: look it up.
        Nfs3Option::None => lookup(c, dir, n)
            .await?
            .ok_or_else(|| format!("{what}: created but not found")),
    }
}

async fn write_at(
    c: &mut Client,
    file: &nfs_fh3,
    data: &[u8],
    offset: u64,
    stable: stable_how,
) -> Result<(), LoadError> {
    let r = c
        .write(&WRITE3args {
            file: file.clone(),
            offset,
            count: data.len() as u32,
            stable,
            data: Opaque::borrowed(data),
        })
        .await
        .map_err(|e| format!("WRITE: {e}"))?;
    let ok = status("WRITE", r)?;
    if ok.count as usize != data.len() {
        return Err(format!(
            "WRITE: {} of {} bytes written",
            ok.count,
            data.len()
        ));
    }
    Ok(())
}

/// The file handles the load uses, found (or made) by [`setup`].
#[derive(Debug, Clone)]
pub struct Handles {
    pub root: nfs_fh3,
    /// Per directory: its handle, its files' handles, its symlink's handle (`None`
    /// where the server makes no symlinks: readlinks then leave the mix, and the
    /// others keep their proportions).
    pub dirs: Vec<(nfs_fh3, Vec<nfs_fh3>, Option<nfs_fh3>)>,
    /// Per client: its own directory.
    pub client_dirs: Vec<nfs_fh3>,
}

fn runtime() -> Result<tokio::runtime::Runtime, LoadError> {
    // One thread: each client is one thread of the client side, as each SFS load
    // process is one process.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("start a client runtime: {e}"))
}

/// Makes the file set on the export (an existing `sfs` directory is used as it is when
/// its files are there) and returns the handles.
pub fn setup(t: &Target, shape: Shape) -> Result<Handles, LoadError> {
    runtime()?.block_on(async {
        let (mut c, root) = connect(t).await?;
        let top = lookup_or_mkdir(&mut c, &root, "sfs").await?;
        let mut dirs = Vec::new();
        for i in 0..shape.dirs {
            let d = lookup_or_mkdir(&mut c, &top, &format!("d{i}")).await?;
            let mut files = Vec::new();
            for j in 0..shape.files_per_dir {
                let f = create(&mut c, &d, &format!("f{j}")).await?;
                let mut off = 0u64;
                while off < u64::from(shape.file_bytes) {
                    let n = (u64::from(shape.file_bytes) - off).min(u64::from(TRANSFER_BYTES));
                    let data: Vec<u8> = (off..off + n).map(|o| pattern(i, j, o)).collect();
                    write_at(&mut c, &f, &data, off, stable_how::FILE_SYNC).await?;
                    off += n;
                }
                files.push(f);
            }
            let link = match lookup(&mut c, &d, "l").await? {
                None => {
                    let r = c
                        .symlink(&SYMLINK3args {
                            where_: entry(&d, "l"),
                            symlink: symlinkdata3 {
                                symlink_attributes: sattr3::default(),
                                symlink_data: nfspath3::from(b"f0".to_vec()),
                            },
                        })
                        .await
                        .map_err(|e| format!("SYMLINK d{i}/l: {e}"))?;
                    let what = format!("SYMLINK d{i}/l");
                    match r {
                        Nfs3Result::Err((n::nfsstat3::NFS3ERR_NOTSUPP, _)) => None,
                        r => match status(&what, r)?.obj {
                            Nfs3Option::Some(h) => Some(h),
                            Nfs3Option::None => Some(
                                lookup(&mut c, &d, "l")
                                    .await?
                                    .ok_or_else(|| format!("{what}: made but not found"))?,
                            ),
                        },
                    }
                }
                Some(h) => Some(h),
            };
            dirs.push((d, files, link));
        }
        let mut client_dirs = Vec::new();
        for k in 0..shape.clients {
            let w = lookup_or_mkdir(&mut c, &top, &format!("w{k}")).await?;
            for s in 0..STOCK {
                create(&mut c, &w, &format!("s{s}")).await?;
            }
            client_dirs.push(w);
        }
        Ok(Handles {
            root,
            dirs,
            client_dirs,
        })
    })
}

/// What one load counted.
#[derive(Debug, Clone, Default)]
pub struct LoadResult {
    pub window_ns: u64,
    /// Per operation (in [`MIX`] order): latencies in nanoseconds, sorted.
    pub latencies_ns: Vec<Vec<u64>>,
    /// Failed operations, with the first failure's words.
    pub errors: u64,
    pub first_error: Option<String>,
    pub content_mismatches: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// A paced load's scheduled operations dropped because a client was a whole
    /// interval behind ([`Pacer::missed`]).
    pub missed: u64,
}

impl LoadResult {
    pub fn ops(&self) -> u64 {
        self.latencies_ns.iter().map(|v| v.len() as u64).sum()
    }

    /// Operations per second over the window (0 for an empty one).
    pub fn ops_per_s(&self) -> f64 {
        if self.window_ns == 0 {
            return 0.0;
        }
        self.ops() as f64 / (self.window_ns as f64 / 1e9)
    }

    /// Every operation's response time, sorted, in nanoseconds.
    pub fn all_sorted_ns(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .latencies_ns
            .iter()
            .flatten()
            .map(|&x| x as f64)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }

    pub fn mean_response_ns(&self) -> f64 {
        let n = self.ops();
        if n == 0 {
            return 0.0;
        }
        self.latencies_ns
            .iter()
            .flatten()
            .map(|&v| v as f64)
            .sum::<f64>()
            / n as f64
    }

    fn merge(&mut self, o: LoadResult) {
        self.window_ns = self.window_ns.max(o.window_ns);
        if self.latencies_ns.is_empty() {
            self.latencies_ns = vec![Vec::new(); MIX.len()];
        }
        for (a, b) in self.latencies_ns.iter_mut().zip(o.latencies_ns) {
            a.extend(b);
        }
        self.errors += o.errors;
        self.first_error = self.first_error.take().or(o.first_error);
        self.content_mismatches += o.content_mismatches;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.missed += o.missed;
    }
}

/// When a paced client starts its operations: SPEC SFS's load process, one operation
/// outstanding, each started at its scheduled time. Operation `i` is due at
/// `phase + i * interval` after the load's start and never starts before it, so a
/// client is never ahead of its schedule. Slots that come due while the client waits
/// for an answer are made up back to back (still one operation outstanding) up to
/// [`CATCH_UP_SLOTS`] of them, as SFS's load processes shorten their sleeps to keep
/// their rate through a slow answer; older ones are dropped (counted in
/// [`Pacer::missed`]), so after a stall a client never bursts more than that, and a
/// requested rate the server cannot serve shows as an achieved rate below it.
#[derive(Debug, Clone)]
pub struct Pacer {
    interval: Duration,
    next: Duration,
    missed: u64,
}

/// The most overdue slots a paced client makes up after a slow answer.
pub const CATCH_UP_SLOTS: u64 = 4;

impl Pacer {
    /// `interval` between operations (at least 1 ns), the first due at `phase`.
    pub fn new(interval: Duration, phase: Duration) -> Pacer {
        Pacer {
            interval: interval.max(Duration::from_nanos(1)),
            next: phase,
            missed: 0,
        }
    }

    /// The start of the next operation, as an offset from the load's start, for a
    /// client free to start at `now`; moves the schedule on past it.
    pub fn start_at(&mut self, now: Duration) -> Duration {
        if self.next > now {
            let at = self.next;
            self.next += self.interval;
            return at;
        }
        // Slots due by now, this one included; beyond the catch-up, the oldest go.
        let owed = ((now - self.next).as_nanos() / self.interval.as_nanos()) as u64 + 1;
        if owed > CATCH_UP_SLOTS {
            let dropped = owed - CATCH_UP_SLOTS;
            self.missed += dropped;
            self.next += self
                .interval
                .saturating_mul(dropped.min(u64::from(u32::MAX)) as u32);
        }
        self.next += self.interval;
        now
    }

    /// Scheduled operations dropped because the client was too far behind to make them
    /// up.
    pub fn missed(&self) -> u64 {
        self.missed
    }
}

/// The next operation of the mix, by its weights.
fn next_op(rng: &mut Rng) -> Op {
    let total: f64 = MIX.iter().map(|(.., w)| w).sum();
    let mut u = rng.next_f64() * total;
    for (op, _, w) in MIX {
        if u < w {
            return op;
        }
        u -= w;
    }
    Op::Lookup
}

/// One client's state across its operations.
struct ClientState {
    k: u32,
    seed: u64,
    created: Vec<String>,
    next_name: u64,
    rng: Rng,
}

/// Runs one operation; `Ok(false)` when its answer was wrong (content), `Err` when it
/// failed.
async fn one_op(
    c: &mut Client,
    op: Op,
    h: &Handles,
    shape: Shape,
    st: &mut ClientState,
    r: &mut LoadResult,
) -> Result<bool, LoadError> {
    let i = st.rng.below(u64::from(shape.dirs)) as u32;
    let j = st.rng.below(u64::from(shape.files_per_dir)) as u32;
    let (dir, files, link) = &h.dirs[i as usize];
    let chunks = u64::from(shape.file_bytes.div_ceil(TRANSFER_BYTES)).max(1);
    let offset = st.rng.below(chunks) * u64::from(TRANSFER_BYTES);
    let count = (u64::from(shape.file_bytes).saturating_sub(offset)).min(u64::from(TRANSFER_BYTES));
    let p = Pick {
        i,
        j,
        dir,
        file: &files[j as usize],
        link: link.as_ref(),
        offset,
        count,
    };
    answered_op(c, op, h, shape, &p, st, r).await
}

/// What one operation acts on: directory `i`, its file `j`, and a transfer's range.
struct Pick<'a> {
    i: u32,
    j: u32,
    dir: &'a nfs_fh3,
    file: &'a nfs_fh3,
    link: Option<&'a nfs_fh3>,
    offset: u64,
    count: u64,
}

/// The text of a failed call of `what`.
fn rpc_err(what: &'static str) -> impl FnOnce(nfs3_client::RpcError) -> LoadError {
    move |err| format!("{what}: {err}")
}

/// The answer of RPC `$call` of procedure `$what`, returning its failure or a status
/// other than OK as the text of a failed `$what`.
macro_rules! call {
    ($what:literal, $call:expr) => {
        status($what, $call.await.map_err(rpc_err($what))?)?
    };
}

/// The operations whose answer is checked; the others go to [`status_op`].
async fn answered_op(
    c: &mut Client,
    op: Op,
    h: &Handles,
    shape: Shape,
    p: &Pick<'_>,
    st: &mut ClientState,
    r: &mut LoadResult,
) -> Result<bool, LoadError> {
    match op {
        Op::Read => {
            let ok = call!(
                "READ",
                c.read(&READ3args {
                    file: p.file.clone(),
                    offset: p.offset,
                    count: p.count as u32,
                })
            );
            r.bytes_read += ok.data.len() as u64;
            let want: Vec<u8> = (p.offset..p.offset + p.count)
                .map(|o| pattern(p.i, p.j, o))
                .collect();
            Ok(ok.data.as_ref() == want.as_slice())
        }
        Op::Getattr => {
            let ok = call!(
                "GETATTR",
                c.getattr(&GETATTR3args {
                    object: p.file.clone(),
                })
            );
            Ok(ok.obj_attributes.size == u64::from(shape.file_bytes))
        }
        Op::Readlink => {
            let Some(link) = p.link else {
                return Err("READLINK chosen without a symlink".into());
            };
            let ok = call!(
                "READLINK",
                c.readlink(&READLINK3args {
                    symlink: link.clone(),
                })
            );
            Ok(ok.data.as_ref() == b"f0")
        }
        Op::Readdir => {
            let ok = call!(
                "READDIR",
                c.readdir(&READDIR3args {
                    dir: p.dir.clone(),
                    cookie: 0,
                    cookieverf: n::cookieverf3::default(),
                    count: 4096,
                })
            );
            Ok(!ok.reply.entries.0.is_empty())
        }
        Op::Readdirplus => {
            let ok = call!(
                "READDIRPLUS",
                c.readdirplus(&READDIRPLUS3args {
                    dir: p.dir.clone(),
                    cookie: 0,
                    cookieverf: n::cookieverf3::default(),
                    dircount: 4096,
                    maxcount: 16384,
                })
            );
            Ok(!ok.reply.entries.0.is_empty())
        }
        _ => {
            status_op(c, op, h, p, st, r).await?;
            Ok(true)
        }
    }
}

/// The operations that only have to succeed.
async fn status_op(
    c: &mut Client,
    op: Op,
    h: &Handles,
    p: &Pick<'_>,
    st: &mut ClientState,
    r: &mut LoadResult,
) -> Result<(), LoadError> {
    match op {
        Op::Lookup => {
            let (i, j) = (p.i, p.j);
            lookup(c, p.dir, &format!("f{j}"))
                .await?
                .ok_or_else(|| format!("LOOKUP d{i}/f{j}: not found"))?;
        }
        Op::Write => {
            let data: Vec<u8> = (p.offset..p.offset + p.count)
                .map(|o| pattern(p.i, p.j, o))
                .collect();
            write_at(c, p.file, &data, p.offset, stable_how::UNSTABLE).await?;
            r.bytes_written += p.count;
        }
        Op::Create => {
            let w = &h.client_dirs[st.k as usize];
            // Unique across loads (each load has its own seed): names a load made stay.
            let n = format!("c{}-{}", st.seed, st.next_name);
            st.next_name += 1;
            create(c, w, &n).await?;
            st.created.push(n);
        }
        Op::Remove => remove_one(c, &h.client_dirs[st.k as usize], st).await?,
        Op::Fsstat => {
            call!(
                "FSSTAT",
                c.fsstat(&FSSTAT3args {
                    fsroot: h.root.clone(),
                })
            );
        }
        Op::Setattr => {
            call!(
                "SETATTR",
                c.setattr(&SETATTR3args {
                    object: p.file.clone(),
                    new_attributes: sattr3 {
                        mtime: n::set_mtime::SET_TO_SERVER_TIME,
                        ..sattr3::default()
                    },
                    guard: Nfs3Option::None,
                })
            );
        }
        Op::Access => {
            call!(
                "ACCESS",
                c.access(&ACCESS3args {
                    object: p.file.clone(),
                    access: 0x1 | 0x4,
                })
            );
        }
        Op::Commit => {
            call!(
                "COMMIT",
                c.commit(&COMMIT3args {
                    file: p.file.clone(),
                    offset: 0,
                    count: 0,
                })
            );
        }
        Op::Read | Op::Getattr | Op::Readlink | Op::Readdir | Op::Readdirplus => {
            return Err(format!(
                "{op:?}: its answer is checked, not only its status"
            ));
        }
    }
    Ok(())
}

/// Removes a name from the client's directory `w`.
async fn remove_one(c: &mut Client, w: &nfs_fh3, st: &mut ClientState) -> Result<(), LoadError> {
    // The stock first, then what this client created; none left: nothing to do
    // but count it as a lookup of the directory's first name.
    let n = st.created.pop().unwrap_or_else(|| "s0".into());
    let r = c
        .remove(&REMOVE3args {
            object: entry(w, &n),
        })
        .await
        .map_err(rpc_err("REMOVE"))?;
    match r {
        Nfs3Result::Ok(_) => Ok(()),
        // The stock's s0 already went: the directory has no such name, as asked.
        Nfs3Result::Err((n::nfsstat3::NFS3ERR_NOENT, _)) if n == "s0" => Ok(()),
        Nfs3Result::Err((s, _)) => Err(format!("REMOVE {n}: {s:?}")),
    }
}

/// One client's load: connects, waits on `start` with the others, then runs the mix
/// for `duration` (one operation outstanding at a time, as an SFS load process), back
/// to back or, with `pace`, at the times its [`Pacer`] gives.
#[allow(clippy::too_many_arguments)]
pub fn client_load(
    t: &Target,
    h: &Handles,
    shape: Shape,
    k: u32,
    seed: u64,
    duration: Duration,
    mut pace: Option<Pacer>,
    start: &Barrier,
) -> LoadResult {
    let mut r = LoadResult {
        latencies_ns: vec![Vec::new(); MIX.len()],
        ..LoadResult::default()
    };
    // Connected, and the stock of files to remove put back where a previous load
    // removed it, before the clock starts.
    let connected = runtime().and_then(|rt| {
        let c = rt.block_on(async {
            let (mut c, _) = connect(t).await?;
            let w = &h.client_dirs[k as usize];
            for s in 0..STOCK {
                let n = format!("s{s}");
                if lookup(&mut c, w, &n).await?.is_none() {
                    create(&mut c, w, &n).await?;
                }
            }
            Ok::<_, LoadError>(c)
        })?;
        Ok((rt, c))
    });
    start.wait();
    let (rt, mut c) = match connected {
        Ok(connected) => connected,
        Err(e) => {
            r.errors = 1;
            r.first_error = Some(e);
            return r;
        }
    };
    let mut st = ClientState {
        k,
        seed,
        created: Vec::new(),
        next_name: 0,
        rng: Rng::new(seed.wrapping_add(u64::from(k) * 7919)),
    };
    // The stock, for removes.
    st.created.extend((0..STOCK).map(|s| format!("s{s}")));
    let links = h.dirs.iter().all(|d| d.2.is_some());
    let t0 = Instant::now();
    rt.block_on(async {
        while t0.elapsed() < duration {
            if let Some(p) = pace.as_mut() {
                let at = p.start_at(t0.elapsed());
                if at >= duration {
                    break;
                }
                // Nothing else runs on this client's runtime while no operation is
                // outstanding, so a plain sleep (finer than tokio's millisecond timer)
                // waits for the slot.
                std::thread::sleep(at.saturating_sub(t0.elapsed()));
            }
            let mut op = next_op(&mut st.rng);
            while op == Op::Readlink && !links {
                op = next_op(&mut st.rng);
            }
            let started = Instant::now();
            match one_op(&mut c, op, h, shape, &mut st, &mut r).await {
                Ok(good) => {
                    r.latencies_ns[op.index()].push(started.elapsed().as_nanos() as u64);
                    if !good {
                        r.content_mismatches += 1;
                    }
                }
                Err(e) => {
                    r.errors += 1;
                    r.first_error.get_or_insert(e);
                    // A broken connection fails every later call: stop.
                    break;
                }
            }
        }
    });
    r.window_ns = t0.elapsed().as_nanos() as u64;
    r.missed = pace.map_or(0, |p| p.missed());
    r
}

/// Merges the clients' results, each latency list sorted.
pub fn merge(parts: Vec<LoadResult>) -> LoadResult {
    let mut all = LoadResult {
        latencies_ns: vec![Vec::new(); MIX.len()],
        ..LoadResult::default()
    };
    for p in parts {
        all.merge(p);
    }
    for v in &mut all.latencies_ns {
        v.sort_unstable();
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_sfs_3_0s_and_choices_follow_it() {
        let total: f64 = MIX.iter().map(|(.., w)| w).sum();
        assert_eq!(total, 99.0);
        let mut rng = Rng::new(12345);
        let mut counts = [0u32; 13];
        let n = 200_000;
        for _ in 0..n {
            counts[next_op(&mut rng).index()] += 1;
        }
        for (k, (op, _, w)) in MIX.iter().enumerate() {
            let got = f64::from(counts[k]) / f64::from(n) * 100.0;
            let want = w / total * 100.0;
            assert!(
                (got - want).abs() < 0.5,
                "{}: {got:.2}% vs {want:.2}%",
                op.name()
            );
        }
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_pacer_keeps_its_schedule_when_answers_are_quick() {
        let mut p = Pacer::new(ms(10), ms(3));
        // Each answer takes 1 ms: every start is on its slot.
        let mut now = Duration::ZERO;
        for i in 0..50u64 {
            let at = p.start_at(now);
            assert_eq!(at, ms(3 + 10 * i));
            now = at + ms(1);
        }
        assert_eq!(p.missed(), 0);
    }

    #[test]
    fn a_late_client_makes_up_a_few_slots_and_drops_the_rest() {
        let mut p = Pacer::new(ms(10), Duration::ZERO);
        assert_eq!(p.start_at(Duration::ZERO), Duration::ZERO);
        // An answer 4 ms late for the next slot (due at 10): it starts at once and the
        // schedule is kept (the one after is due at 20).
        assert_eq!(p.start_at(ms(14)), ms(14));
        assert_eq!(p.start_at(ms(15)), ms(20));
        // A stall: free at 75, the slots at 30, 40, 50, 60 and 70 are due. The oldest
        // beyond the catch-up (30) is dropped; the other four go back to back, one
        // outstanding at a time; then the client is on its schedule again (80), never
        // ahead of it.
        assert_eq!(p.start_at(ms(75)), ms(75));
        assert_eq!(p.missed(), 5 - CATCH_UP_SLOTS);
        assert_eq!(p.start_at(ms(76)), ms(76));
        assert_eq!(p.start_at(ms(77)), ms(77));
        assert_eq!(p.start_at(ms(78)), ms(78));
        assert_eq!(p.start_at(ms(79)), ms(80));
        assert_eq!(p.missed(), 1);
    }

    #[test]
    fn a_paced_client_is_never_ahead_of_its_schedule() {
        // Answers of varied lengths, some far longer than the interval: every start is
        // at or after the client is free, and by any time the starts are at most the
        // slots due by then.
        let mut rng = Rng::new(99);
        let interval = ms(10);
        let mut p = Pacer::new(interval, ms(5));
        let mut now = Duration::ZERO;
        let mut starts = 0u64;
        while now < ms(10_000) {
            let at = p.start_at(now);
            assert!(at >= now);
            starts += 1;
            let due_by_then =
                (at.saturating_sub(ms(5)).as_nanos() / interval.as_nanos()) as u64 + 1;
            assert!(starts <= due_by_then, "{starts} starts by {at:?}");
            now = at + Duration::from_micros(rng.below(60_000));
        }
        // Answers of 30 ms on average against a 10 ms interval: well under the rate,
        // with slots dropped.
        assert!(starts < 500 && p.missed() > 0, "{starts} starts");
    }

    #[test]
    fn the_pattern_differs_by_file_and_offset() {
        let a: Vec<u8> = (0..64).map(|o| pattern(0, 0, o)).collect();
        let b: Vec<u8> = (0..64).map(|o| pattern(0, 1, o)).collect();
        let c: Vec<u8> = (0..64).map(|o| pattern(1, 0, o)).collect();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().collect::<std::collections::HashSet<_>>().len() > 16);
    }
}
