//! The socket and epoll system calls of smtlab's own network code, in one place: the
//! load generator's connections here, and in the workloads the built-in web servers, the
//! netperf-style listener and their tests. Each `unsafe` call is made once, here, with
//! the reason it is sound; callers get safe functions that return `io::Result`.
//!
//! Descriptors are passed as `RawFd` where the caller keeps them in its own tables (an
//! epoll loop's connections): a stale or closed descriptor makes a call fail with
//! `EBADF`, nothing worse. New descriptors come back as `OwnedFd`, so one that is not
//! kept is closed on every error path.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The backlog of smtlab's listeners: std's 128 makes a burst of a thousand connects
/// wait for SYN retransmissions.
pub const BACKLOG: libc::c_int = 4096;

/// `Ok` for a system call's result of 0 or more, else the error it set.
fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A new TCP socket for `addr`'s family, closed on exec; non-blocking if asked.
pub fn tcp_socket(addr: &SocketAddr, nonblocking: bool) -> io::Result<OwnedFd> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let mut kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    if nonblocking {
        kind |= libc::SOCK_NONBLOCK;
    }
    // SAFETY: socket() takes no pointers; a negative result is checked.
    let fd = check(unsafe { libc::socket(domain, kind, 0) })?;
    // SAFETY: `fd` is the descriptor just created, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets socket option `name` at `level` to `value`, a plain C value (an int, a
/// `linger`, a `timeval`).
pub fn set_option<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: T,
) -> io::Result<()> {
    // SAFETY: the option value points at a live `T` whose size is passed with it, and
    // the kernel only reads it; a bad `fd` makes the call fail.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            std::ptr::from_ref(&value).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Reads socket option `name` at `level` into `value`, a plain C value (an int, a byte
/// buffer) that any bytes the kernel writes leave valid; returns it with the length the
/// kernel wrote.
pub fn get_option<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    mut value: T,
) -> io::Result<(T, usize)> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the option value points at a live `T` and `len` holds its size, so the
    // kernel writes at most that many bytes; `T` is plain data that any bytes leave
    // valid (the callers' ints and byte arrays).
    check(unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            std::ptr::from_mut(&mut value).cast::<libc::c_void>(),
            &mut len,
        )
    })?;
    Ok((value, len as usize))
}

/// The pending error of a socket (`SO_ERROR`, cleared by reading it): 0 for none, the
/// errno of a failed non-blocking connect; `EIO` when it cannot be read.
pub fn socket_error(fd: RawFd) -> i32 {
    let none: libc::c_int = 0;
    match get_option(fd, libc::SOL_SOCKET, libc::SO_ERROR, none) {
        Ok((err, _)) => err,
        Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
    }
}

/// Turns Nagle's algorithm off: small requests and responses go out at once.
pub fn set_nodelay(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    set_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, one)
}

/// Makes the coming `close` of `fd` a reset (`SO_LINGER` 0): the peer learns at once,
/// what it did not read is dropped instead of waiting in the kernel, and no TIME_WAIT
/// entry is left.
pub fn reset_on_close(fd: RawFd) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    set_option(fd, libc::SOL_SOCKET, libc::SO_LINGER, linger)
}

/// Sets a socket timeout (`SO_SNDTIMEO` or `SO_RCVTIMEO`) to `d`, at least 1 us (a
/// zero timeout would mean none).
pub fn set_timeout(fd: RawFd, opt: libc::c_int, d: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros().max(1) as libc::suseconds_t,
    };
    set_option(fd, libc::SOL_SOCKET, opt, tv)
}

/// Makes `fd`'s reads and writes blocking or not (`O_NONBLOCK`).
pub fn set_nonblocking(fd: RawFd, nonblocking: bool) -> io::Result<()> {
    // SAFETY: fcntl with F_GETFL takes no pointer; a bad `fd` makes it fail.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    let flags = if nonblocking {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above, F_SETFL with an int.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) }).map(drop)
}

/// Connects `fd` to `addr`. A non-blocking socket gives `EINPROGRESS`, which the caller
/// takes as the start of the connect.
pub fn connect(fd: RawFd, addr: &SocketAddr) -> io::Result<()> {
    let a = socket2::SockAddr::from(*addr);
    // SAFETY: `a` holds the address and `a.len()` is the size of the part filled in; the
    // kernel only reads it.
    check(unsafe { libc::connect(fd, a.as_ptr().cast::<libc::sockaddr>(), a.len()) }).map(drop)
}

/// A listening TCP socket on `addr` with a backlog of [`BACKLOG`], closed on exec; with
/// `reuse_port`, several of them (one per event loop) may listen on one port.
pub fn tcp_listener(
    addr: &SocketAddr,
    reuse_port: bool,
    nonblocking: bool,
) -> io::Result<TcpListener> {
    let fd = tcp_socket(addr, nonblocking)?;
    if reuse_port {
        let one: libc::c_int = 1;
        for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
            set_option(fd.as_raw_fd(), libc::SOL_SOCKET, opt, one)?;
        }
    }
    let a = socket2::SockAddr::from(*addr);
    // SAFETY: as in `connect`.
    check(unsafe { libc::bind(fd.as_raw_fd(), a.as_ptr().cast::<libc::sockaddr>(), a.len()) })?;
    // SAFETY: listen() takes no pointers.
    check(unsafe { libc::listen(fd.as_raw_fd(), BACKLOG) })?;
    Ok(TcpListener::from(fd))
}

/// The next connection waiting on listener `lfd`, closed on exec and non-blocking; an
/// error (`EAGAIN` when none waits).
pub fn accept(lfd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: accept4() allows null address pointers; a negative result is checked.
    let fd = check(unsafe {
        libc::accept4(
            lfd,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` is the descriptor just accepted, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `Ok` of a byte count for a result of 0 or more, else the error it set (`errno` is
/// left as it was, for callers that read it again).
fn check_len(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Reads what `fd` has into `buf`: `Ok(0)` at end of file, `WouldBlock` when a
/// non-blocking descriptor has nothing now.
#[inline]
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live buffer of `buf.len()` bytes the kernel writes into; a bad
    // `fd` makes the call fail.
    check_len(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

/// Sends bytes of `data` on socket `fd` with `flags` (`MSG_MORE`, ...); a peer that
/// went away gives `EPIPE`, never SIGPIPE (`MSG_NOSIGNAL`). Returns how many went.
#[inline]
pub fn send(fd: RawFd, data: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: `data` is a live slice of `data.len()` bytes the kernel only reads; a bad
    // `fd` makes the call fail.
    check_len(unsafe {
        libc::send(
            fd,
            data.as_ptr().cast(),
            data.len(),
            libc::MSG_NOSIGNAL | flags,
        )
    })
}

/// Sends up to `count` bytes of `file` from `*offset` on socket `fd`, moving `*offset`
/// past them; `Ok(0)` when the file ends early.
#[inline]
pub fn sendfile(
    fd: RawFd,
    file: RawFd,
    offset: &mut libc::off_t,
    count: usize,
) -> io::Result<usize> {
    // SAFETY: `offset` is a live off_t the kernel updates; bad descriptors make the
    // call fail.
    check_len(unsafe { libc::sendfile(fd, file, offset, count) })
}

/// Waits at most `timeout` for socket `fd` to have room to send; whether it has (an
/// error or a hang-up counts as room: the send that follows says what it is).
pub fn wait_writable(fd: RawFd, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
    // SAFETY: `pfd` is a live pollfd and one entry is passed.
    unsafe { libc::poll(&mut pfd, 1, ms) > 0 }
}

/// Waits at most `timeout_ms` for `fd` to have something to read (or a connection to
/// accept); whether it has.
pub fn wait_readable(fd: RawFd, timeout_ms: libc::c_int) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is a live pollfd and one entry is passed.
    unsafe { libc::poll(&mut pfd, 1, timeout_ms) > 0 }
}

/// What a wait on a connected socket saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// Nothing within the wait.
    Quiet,
    /// Bytes to read, the other end still open.
    Readable,
    /// The other end closed (its writing half at least) or reset the connection.
    HungUp,
}

/// Waits at most `timeout` (to the nanosecond) for the other end of socket `fd` to send
/// or hang up. A close is seen even behind unread bytes (`POLLRDHUP`), which a `peek`
/// is not.
pub fn wait_peer(fd: RawFd, timeout: Duration) -> io::Result<PeerState> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `pfd` and `ts` are live for the call, one entry is passed, no signal mask.
    let n = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(PeerState::Quiet)
        } else {
            Err(e)
        };
    }
    Ok(
        if pfd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            PeerState::HungUp
        } else if pfd.revents & libc::POLLIN != 0 {
            PeerState::Readable
        } else {
            PeerState::Quiet
        },
    )
}

/// Raises this process's soft limit of open files to its hard limit; the soft limit
/// after.
pub fn raise_open_file_limit() -> io::Result<u64> {
    let mut lim = open_file_limits()?;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a live rlimit the kernel reads; raising the soft limit up
        // to the hard one needs no privilege.
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    }
    Ok(lim.rlim_cur)
}

/// This process's soft and hard limits of open files.
pub fn open_file_limits() -> io::Result<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live rlimit the kernel fills.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    Ok(lim)
}

/// How many files this process has open now.
pub fn open_files() -> io::Result<u64> {
    Ok(std::fs::read_dir("/proc/self/fd")?.count() as u64)
}

/// Shuts both directions of socket `fd` down: a thread blocked reading or writing on it
/// (or accepting, for a listener) wakes with an error or end of file.
pub fn shutdown(fd: RawFd) {
    // SAFETY: shutdown() takes no pointers; a bad `fd` makes it fail, which changes
    // nothing on the way out.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

/// A new epoll instance, closed on exec.
pub fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1() takes no pointers; a negative result is checked.
    let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: `fd` is the descriptor just created, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One `epoll_ctl` call: `op` (`EPOLL_CTL_ADD`, `_MOD`, `_DEL`) for `fd` with `events`,
/// reported as `token`.
pub fn epoll_ctl(
    epfd: RawFd,
    op: libc::c_int,
    fd: RawFd,
    events: libc::c_int,
    token: u64,
) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: events as u32,
        u64: token,
    };
    // SAFETY: `ev` is a live epoll_event the kernel only reads (and ignores for
    // EPOLL_CTL_DEL); stale descriptors make the call fail, nothing worse.
    check(unsafe { libc::epoll_ctl(epfd, op, fd, &mut ev) }).map(drop)
}

/// Makes `epfd` report `fd` as `token` when readable or closed by the peer, and also
/// when writable if `out`: callers ask for writability only while they have bytes
/// waiting, so an idle socket does not wake the loop on every turn.
pub fn set_interest(epfd: RawFd, fd: RawFd, token: usize, out: bool) {
    let mut flags = libc::EPOLLIN | libc::EPOLLRDHUP;
    if out {
        flags |= libc::EPOLLOUT;
    }
    // A stale `fd` gives EBADF/ENOENT, which the callers' next read or write reports.
    let _ = epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, flags, token as u64);
}

/// Set once `epoll_pwait2` (Linux 5.11) turned out to be missing or forbidden.
static NO_PWAIT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The kernel's `struct __kernel_timespec` (64-bit fields on every architecture).
#[repr(C)]
struct KernelTimespec {
    tv_sec: i64,
    tv_nsec: i64,
}

/// `epoll_wait`'s millisecond timeout for `wait_ns`: rounded up, so the loop never wakes
/// before its timer only to sleep again.
pub(crate) fn timeout_ms(wait_ns: u64) -> libc::c_int {
    wait_ns.div_ceil(1_000_000).min(libc::c_int::MAX as u64) as libc::c_int
}

/// Waits at most `wait_ns` for events on `epfd`; returns how many are in `events` (0 on
/// a timeout or a signal). The timeout is exact to the nanosecond where the kernel has
/// `epoll_pwait2`: `epoll_wait` counts in milliseconds, and an open loop that rounds its
/// timer up sends each request up to 1 ms after it was due, lateness that then counts in
/// the request's latency as if the server had caused it.
pub fn wait(epfd: RawFd, events: &mut [libc::epoll_event], wait_ns: u64) -> std::io::Result<usize> {
    use std::sync::atomic::Ordering;
    let max = events.len().min(libc::c_int::MAX as usize) as libc::c_int;
    let mut n = -1;
    if !NO_PWAIT2.load(Ordering::Relaxed) {
        let ts = KernelTimespec {
            tv_sec: (wait_ns / 1_000_000_000) as i64,
            tv_nsec: (wait_ns % 1_000_000_000) as i64,
        };
        // SAFETY: `events` holds `max` entries and `ts` lives across the call; a null
        // signal mask keeps the thread's own.
        n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                epfd,
                events.as_mut_ptr(),
                max,
                std::ptr::from_ref(&ts),
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        } as libc::c_int;
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOSYS | libc::EPERM) => NO_PWAIT2.store(true, Ordering::Relaxed),
                Some(libc::EINTR) => return Ok(0),
                _ => return Err(e),
            }
        }
    }
    if n < 0 {
        // SAFETY: as above.
        n = unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), max, timeout_ms(wait_ns)) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            };
        }
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_connection_carries_bytes_both_ways_and_a_reset_reaches_the_peer() {
        let l = tcp_listener(&"127.0.0.1:0".parse().unwrap(), true, true).unwrap();
        let addr = l.local_addr().unwrap();
        // A second listener on the same port: what the event server's loops do.
        drop(tcp_listener(&addr, true, true).unwrap());
        let c = tcp_socket(&addr, false).unwrap();
        connect(c.as_raw_fd(), &addr).unwrap();
        set_nodelay(c.as_raw_fd()).unwrap();
        assert!(
            wait_readable(l.as_raw_fd(), 2_000),
            "no connection to accept"
        );
        let s = accept(l.as_raw_fd()).unwrap();
        assert_eq!(send(c.as_raw_fd(), b"ping", 0).unwrap(), 4);
        assert!(wait_readable(s.as_raw_fd(), 2_000));
        let mut buf = [0u8; 16];
        assert_eq!(read(s.as_raw_fd(), &mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"ping");
        // Nothing more: the accepted socket is non-blocking.
        let e = read(s.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(socket_error(s.as_raw_fd()), 0);
        reset_on_close(s.as_raw_fd()).unwrap();
        drop(s);
        assert!(wait_readable(c.as_raw_fd(), 2_000));
        let e = read(c.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ECONNRESET), "{e}");
    }

    #[test]
    fn a_short_wait_ends_on_time_not_a_millisecond_later() {
        let ep = epoll_create().unwrap();
        let epfd = ep.as_raw_fd();
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 4];
        // The shortest of many 200 us waits: a scheduler may stretch any one of them,
        // but with millisecond rounding none could end before 1 ms.
        let shortest = (0..20)
            .map(|_| {
                let t = std::time::Instant::now();
                assert_eq!(wait(epfd, &mut events, 200_000).unwrap(), 0);
                t.elapsed()
            })
            .min()
            .unwrap();
        drop(ep);
        assert_eq!(timeout_ms(1), 1);
        assert_eq!(timeout_ms(2_000_000), 2);
        if NO_PWAIT2.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!("epoll_pwait2 is not available here: waits are rounded up to 1 ms");
            return;
        }
        assert!(
            shortest >= std::time::Duration::from_micros(200),
            "{shortest:?}"
        );
        assert!(
            shortest < std::time::Duration::from_micros(900),
            "{shortest:?}"
        );
    }
}
