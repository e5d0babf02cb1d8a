//! AIM9's message rows: FIFO, unix stream and datagram socket pairs, loopback TCP and
//! UDP, and System V shared memory. The measuring thread sends a `size`-byte message,
//! an echo thread (on the placement's second CPU, or its first when it has one) sends
//! it back; one iteration is that round trip, counted as two messages. Every echoed
//! message is compared with the one sent (each carries its sequence number).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::Duration;

use smtlab_model::BenchInfo;
use smtlab_placement::pin;

use super::disk::Scratch;
use super::{bad, check, info, io as io_err, param, timed};
use crate::os::last_os_error;
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pipe,
    Fifo,
    Stream,
    Dgram,
    Tcp,
    Udp,
    Shm,
}

/// One message row.
pub struct Msg {
    name: &'static str,
    row: &'static str,
    kind: Kind,
}

/// The message rows of paper 001 Table 2.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    let m = |name, row, kind| -> Box<dyn Benchmark> { Box::new(Msg { name, row, kind }) };
    vec![
        m("aim-shm", "shared_memory", Kind::Shm),
        m("aim-fifo", "fifo_test", Kind::Fifo),
        m("aim-stream-pipe", "stream_pipe", Kind::Stream),
        m("aim-dgram-pipe", "dgram_pipe", Kind::Dgram),
        m("aim-tcp", "tcp_test", Kind::Tcp),
        m("aim-udp", "udp_test", Kind::Udp),
        m("aim-pipe", "pipe_cpy", Kind::Pipe),
    ]
}

/// First word of the message that tells the echo thread to stop.
const QUIT: u64 = u64::MAX;
/// No reply within this long is an error, not a hang.
const TIMEOUT: Duration = Duration::from_secs(10);

impl Benchmark for Msg {
    fn info(&self) -> BenchInfo {
        let what = match self.kind {
            Kind::Pipe => "a message through an anonymous pipe to an echo thread and back",
            Kind::Fifo => "a message through a named pipe (FIFO) to an echo thread and back",
            Kind::Stream => "a message through a unix stream socket pair and back",
            Kind::Dgram => "a message through a unix datagram socket pair and back",
            Kind::Tcp => "a message over a loopback TCP connection (TCP_NODELAY) and back",
            Kind::Udp => "a datagram over loopback UDP and back",
            Kind::Shm => {
                "a value handed to an echo thread and back through a System V shared memory \
                 segment, with process-shared semaphores in the segment"
            }
        };
        let params = if self.kind == Kind::Shm {
            vec![]
        } else {
            vec![param("size", "128", None, "bytes per message")]
        };
        info(
            self.name,
            "msgs/s",
            self.row,
            &format!(
                "AIM9 {}: {what}; messages per second, a round trip counting two.",
                self.row
            ),
            params,
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let name = self.name;
        let cpu = ctx.placement.cpu_for_thread(0);
        let echo_cpu = ctx.placement.cpu_for_thread(1);
        if self.kind == Kind::Shm {
            return Ok(Box::new(ShmInstance::start(name, cpu, echo_cpu)?));
        }
        let size = ctx.params.get_bytes("size")?;
        let max = if matches!(self.kind, Kind::Dgram | Kind::Udp) {
            60_000
        } else {
            1 << 20
        };
        if !(8..=max).contains(&size) {
            return Err(bad(
                "size",
                ctx.params.get_str("size")?,
                &format!("8 to {max} bytes"),
            ));
        }
        let (mine, theirs, fifo_dir) = endpoints(name, self.kind)?;
        let size = size as usize;
        let echo = pin::spawn_pinned(echo_cpu, "smtlab-aim-echo", move || {
            let mut theirs = theirs;
            let mut buf = vec![0u8; size];
            loop {
                if theirs.recv(&mut buf).is_err() || word(&buf) == QUIT {
                    return;
                }
                if theirs.send(&buf).is_err() {
                    return;
                }
            }
        })
        .map_err(on_err(name, "start the echo thread"))?;
        Ok(Box::new(MsgInstance {
            name,
            cpu,
            mine,
            echo: Some(echo),
            out: vec![0x5a; size],
            back: vec![0; size],
            seq: 0,
            _fifo_dir: fifo_dir,
        }))
    }
}

/// The error of benchmark `name` failing to `what`.
fn on_err(name: &'static str, what: &'static str) -> impl FnOnce(io::Error) -> BenchError {
    move |err| io_err(name, what, err)
}

/// The two ends of a `kind` channel, this thread's and the echo thread's, and the
/// directory of a FIFO pair (removed when dropped).
fn endpoints(
    name: &'static str,
    kind: Kind,
) -> Result<(Endpoint, Endpoint, Option<Scratch>), BenchError> {
    let e = |what: &'static str| on_err(name, what);
    let (mine, theirs) = match kind {
        Kind::Pipe => pipe_ends(name)?,
        Kind::Fifo => {
            let (mine, theirs, dir) = fifo_ends(name)?;
            return Ok((mine, theirs, Some(dir)));
        }
        Kind::Stream => {
            let (a, b) = UnixStream::pair().map_err(e("socketpair"))?;
            a.set_read_timeout(Some(TIMEOUT))
                .map_err(e("set a timeout"))?;
            (
                Endpoint::stream(Box::new(a.try_clone().map_err(e("dup"))?), Box::new(a)),
                Endpoint::stream(Box::new(b.try_clone().map_err(e("dup"))?), Box::new(b)),
            )
        }
        Kind::Dgram => {
            let (a, b) = UnixDatagram::pair().map_err(e("socketpair"))?;
            a.set_read_timeout(Some(TIMEOUT))
                .map_err(e("set a timeout"))?;
            (Endpoint::Dgram(Box::new(a)), Endpoint::Dgram(Box::new(b)))
        }
        Kind::Tcp => tcp_ends(name)?,
        Kind::Udp => udp_ends(name)?,
        Kind::Shm => unreachable!("shared memory has no endpoints"),
    };
    Ok((mine, theirs, None))
}

/// Two pipes, one each way.
fn pipe_ends(name: &'static str) -> Result<(Endpoint, Endpoint), BenchError> {
    let pipe = || -> Result<(File, File), BenchError> {
        let (r, w) = smtlab_control::fork::pipe().map_err(on_err(name, "pipe"))?;
        Ok((r.into(), w.into()))
    };
    let (to_r, to_w) = pipe()?;
    let (from_r, from_w) = pipe()?;
    Ok((
        Endpoint::stream(Box::new(from_r), Box::new(to_w)),
        Endpoint::stream(Box::new(to_r), Box::new(from_w)),
    ))
}

/// Two FIFOs, one each way, in a fresh temporary directory.
fn fifo_ends(name: &'static str) -> Result<(Endpoint, Endpoint, Scratch), BenchError> {
    let e = |what: &'static str| on_err(name, what);
    let fifo_dir =
        Scratch::create(&std::env::temp_dir()).map_err(e("create the FIFO directory"))?;
    let dir = &fifo_dir.0;
    let open = |p: &PathBuf| -> Result<File, BenchError> {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .expect("no NUL in a temporary path");
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            return Err(last_os_error(name, "mkfifo"));
        }
        // Read-write, so opening does not wait for the other end.
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(p)
            .map_err(|err| io_err(name, "open a FIFO", err))
    };
    let (to_echo, from_echo) = (dir.join("to"), dir.join("from"));
    let (a, b) = (open(&to_echo)?, open(&from_echo)?);
    let (a2, b2) = (
        a.try_clone().map_err(e("dup"))?,
        b.try_clone().map_err(e("dup"))?,
    );
    Ok((
        Endpoint::stream(Box::new(b), Box::new(a)),
        Endpoint::stream(Box::new(a2), Box::new(b2)),
        fifo_dir,
    ))
}

/// Both ends of one TCP connection over loopback.
fn tcp_ends(name: &'static str) -> Result<(Endpoint, Endpoint), BenchError> {
    let e = |what: &'static str| on_err(name, what);
    let l = TcpListener::bind(("127.0.0.1", 0)).map_err(e("listen on loopback"))?;
    let a = TcpStream::connect(l.local_addr().map_err(e("local address"))?)
        .map_err(e("connect over loopback"))?;
    let (b, _) = l.accept().map_err(e("accept"))?;
    for s in [&a, &b] {
        s.set_nodelay(true).map_err(e("set TCP_NODELAY"))?;
    }
    a.set_read_timeout(Some(TIMEOUT))
        .map_err(e("set a timeout"))?;
    Ok((
        Endpoint::stream(Box::new(a.try_clone().map_err(e("dup"))?), Box::new(a)),
        Endpoint::stream(Box::new(b.try_clone().map_err(e("dup"))?), Box::new(b)),
    ))
}

/// Two UDP sockets on loopback, connected to each other.
fn udp_ends(name: &'static str) -> Result<(Endpoint, Endpoint), BenchError> {
    let e = |what: &'static str| on_err(name, what);
    let a = UdpSocket::bind(("127.0.0.1", 0)).map_err(e("bind UDP"))?;
    let b = UdpSocket::bind(("127.0.0.1", 0)).map_err(e("bind UDP"))?;
    a.connect(b.local_addr().map_err(e("local address"))?)
        .map_err(e("connect UDP"))?;
    b.connect(a.local_addr().map_err(e("local address"))?)
        .map_err(e("connect UDP"))?;
    a.set_read_timeout(Some(TIMEOUT))
        .map_err(e("set a timeout"))?;
    Ok((Endpoint::Dgram(Box::new(a)), Endpoint::Dgram(Box::new(b))))
}

fn word(buf: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&buf[..8]);
    u64::from_le_bytes(w)
}

/// A datagram socket as send/recv of whole messages.
trait Datagram: Send {
    fn send(&self, buf: &[u8]) -> io::Result<usize>;
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize>;
}

/// [`Datagram`] through the socket type's own `send` and `recv`.
macro_rules! datagram {
    ($($t:ty),*) => {$(
        impl Datagram for $t {
            fn send(&self, buf: &[u8]) -> io::Result<usize> {
                <$t>::send(self, buf)
            }
            fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
                <$t>::recv(self, buf)
            }
        }
    )*};
}

datagram!(UnixDatagram, UdpSocket);

/// One side of a message link.
enum Endpoint {
    Stream {
        rx: Box<dyn Read + Send>,
        tx: Box<dyn Write + Send>,
    },
    Dgram(Box<dyn Datagram>),
}

impl Endpoint {
    fn stream(rx: Box<dyn Read + Send>, tx: Box<dyn Write + Send>) -> Endpoint {
        Endpoint::Stream { rx, tx }
    }

    fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Endpoint::Stream { tx, .. } => tx.write_all(buf),
            Endpoint::Dgram(d) => {
                let n = d.send(buf)?;
                if n == buf.len() {
                    Ok(())
                } else {
                    Err(io::Error::other(format!("sent {n} of {} bytes", buf.len())))
                }
            }
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<()> {
        match self {
            Endpoint::Stream { rx, .. } => rx.read_exact(buf),
            Endpoint::Dgram(d) => {
                let n = d.recv(buf)?;
                if n == buf.len() {
                    Ok(())
                } else {
                    Err(io::Error::other(format!(
                        "received {n} of {} bytes",
                        buf.len()
                    )))
                }
            }
        }
    }
}

struct MsgInstance {
    name: &'static str,
    cpu: Option<u32>,
    mine: Endpoint,
    echo: Option<JoinHandle<()>>,
    out: Vec<u8>,
    back: Vec<u8>,
    seq: u64,
    _fifo_dir: Option<Scratch>,
}

impl Instance for MsgInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let name = self.name;
        let (mine, out, back, seq) = (&mut self.mine, &mut self.out, &mut self.back, &mut self.seq);
        let mut s = timed(self.cpu, iterations, |_| {
            *seq += 1;
            out[..8].copy_from_slice(&seq.to_le_bytes());
            mine.send(out)
                .map_err(|e| io_err(name, "send a message", e))?;
            mine.recv(back)
                .map_err(|e| io_err(name, "receive the echo", e))?;
            if back != out {
                return Err(check(
                    name,
                    format!("message {} came back as message {}", seq, word(back)),
                ));
            }
            Ok(2.0)
        })?;
        s.metrics
            .insert("message_bytes".into(), self.out.len() as f64);
        Ok(s)
    }
}

impl Drop for MsgInstance {
    fn drop(&mut self) {
        self.out[..8].copy_from_slice(&QUIT.to_le_bytes());
        let _ = self.mine.send(&self.out);
        if let Some(t) = self.echo.take() {
            let _ = t.join();
        }
    }
}

/// The shared segment: two process-shared semaphores and the value handed over.
#[repr(C)]
struct ShmArea {
    to_echo: libc::sem_t,
    to_main: libc::sem_t,
    value: u64,
}

/// A pointer to the attached segment that may cross to the echo thread.
#[derive(Clone, Copy)]
struct AreaPtr(*mut ShmArea);
// SAFETY: the segment outlives both threads (detached after the echo thread is
// joined), and every access to `value` is ordered by the semaphores.
unsafe impl Send for AreaPtr {}

struct ShmInstance {
    name: &'static str,
    cpu: Option<u32>,
    area: AreaPtr,
    echo: Option<JoinHandle<()>>,
    seq: u64,
}

fn sem_wait_timed(s: *mut libc::sem_t) -> io::Result<()> {
    // SAFETY: timespec is plain integers; all zeroes is valid.
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: clock_gettime writes one timespec into the struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    let deadline = libc::timespec {
        tv_sec: now.tv_sec + TIMEOUT.as_secs() as libc::time_t,
        tv_nsec: now.tv_nsec,
    };
    loop {
        // SAFETY: `s` points at a semaphore initialised in the live shared area (the
        // caller's contract), and `deadline` is a valid timespec.
        if unsafe { libc::sem_timedwait(s, &deadline) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

impl ShmInstance {
    fn start(
        name: &'static str,
        cpu: Option<u32>,
        echo_cpu: Option<u32>,
    ) -> Result<ShmInstance, BenchError> {
        // SAFETY: shmget takes plain values and returns an id or -1.
        let id = unsafe {
            libc::shmget(
                libc::IPC_PRIVATE,
                std::mem::size_of::<ShmArea>(),
                libc::IPC_CREAT | 0o600,
            )
        };
        if id < 0 {
            return Err(last_os_error(name, "shmget"));
        }
        // SAFETY: attaching the segment just created, at an address the kernel picks.
        let p = unsafe { libc::shmat(id, std::ptr::null(), 0) };
        // Marked for removal at once: it goes when detached, even if smtlab is killed.
        // SAFETY: IPC_RMID takes no buffer (null is allowed).
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
        if p as isize == -1 {
            return Err(last_os_error(name, "shmat"));
        }
        let area = AreaPtr(p.cast::<ShmArea>());
        // SAFETY: `p` is a fresh attachment of a segment of `size_of::<ShmArea>()` bytes,
        // page-aligned, used by this thread alone until the echo thread starts.
        unsafe {
            if libc::sem_init(&mut (*area.0).to_echo, 1, 0) != 0
                || libc::sem_init(&mut (*area.0).to_main, 1, 0) != 0
            {
                let e = io::Error::last_os_error();
                libc::shmdt(p);
                return Err(io_err(name, "sem_init", e));
            }
            (*area.0).value = 0;
        }
        let mut inst = ShmInstance {
            name,
            cpu,
            area,
            echo: None,
            seq: 0,
        };
        let echo = pin::spawn_pinned(echo_cpu, "smtlab-aim-shm", move || {
            let a = area;
            loop {
                // SAFETY: the area stays attached until Drop has joined this thread.
                if sem_wait_timed(unsafe { &mut (*a.0).to_echo }).is_err() {
                    // No word for a long time: the instance is stuck or gone.
                    continue;
                }
                // SAFETY: attached as above; the semaphore orders this read after the
                // main thread's write.
                let v = unsafe { std::ptr::read_volatile(&(*a.0).value) };
                if v == QUIT {
                    return;
                }
                // SAFETY: attached as above; the main thread waits on to_main and does
                // not touch `value` until this post.
                unsafe {
                    std::ptr::write_volatile(&mut (*a.0).value, v + 1);
                    libc::sem_post(&mut (*a.0).to_main);
                }
            }
        })
        .map_err(|e| io_err(name, "start the echo thread", e))?;
        inst.echo = Some(echo);
        Ok(inst)
    }
}

impl Instance for ShmInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let (name, a, seq) = (self.name, self.area, &mut self.seq);
        timed(self.cpu, iterations, |_| {
            *seq += 2;
            // SAFETY: the area is attached for the instance's life; the echo thread
            // waits on to_echo and does not touch `value` until this post.
            unsafe {
                std::ptr::write_volatile(&mut (*a.0).value, *seq);
                libc::sem_post(&mut (*a.0).to_echo);
            }
            // SAFETY: attached, as above.
            sem_wait_timed(unsafe { &mut (*a.0).to_main })
                .map_err(|e| io_err(name, "wait for the echo", e))?;
            // SAFETY: attached; to_main orders this read after the echo's write.
            let got = unsafe { std::ptr::read_volatile(&(*a.0).value) };
            if got != *seq + 1 {
                return Err(check(name, format!("handed {} over, got {got} back", *seq)));
            }
            Ok(2.0)
        })
    }
}

impl Drop for ShmInstance {
    fn drop(&mut self) {
        let a = self.area;
        // SAFETY: still attached; the echo thread reads `value` only after this post.
        unsafe {
            std::ptr::write_volatile(&mut (*a.0).value, QUIT);
            libc::sem_post(&mut (*a.0).to_echo);
        }
        if let Some(t) = self.echo.take() {
            let _ = t.join();
        }
        // SAFETY: the echo thread has been joined: nobody waits on the semaphores, and
        // nothing uses the area after it is detached here.
        unsafe {
            libc::sem_destroy(&mut (*a.0).to_echo);
            libc::sem_destroy(&mut (*a.0).to_main);
            libc::shmdt(a.0.cast());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;
    use crate::workers::tests::{context, placement, test_cpus, topology};

    #[test]
    fn every_message_row_echoes_and_stops() {
        let cpus = test_cpus();
        for b in benchmarks() {
            let params = Params::resolve(&b.info(), &[], true).unwrap();
            let pl = placement(&cpus);
            let topo = topology(None);
            let mut inst = b.prepare(&context(&params, &pl, &topo)).unwrap();
            for n in [1, 50] {
                let s = inst
                    .sample(n)
                    .unwrap_or_else(|e| panic!("{}: {e}", b.info().name));
                assert_eq!(s.work, 2.0 * n as f64);
            }
            drop(inst);
        }
    }

    #[test]
    fn sizes_are_checked() {
        let b = &benchmarks()[3]; // dgram
        let params = Params::resolve(&b.info(), &["size=100000".into()], true).unwrap();
        let pl = placement(&[0]);
        let topo = topology(None);
        let e = b
            .prepare(&context(&params, &pl, &topo))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("size") && e.contains("60000"), "{e}");
    }
}
