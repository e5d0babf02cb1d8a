//! The socket plumbing both sides of an HTTP exchange share (the load generator's
//! connections here and the built-in servers' in the workloads): the epoll call made on
//! every state change, the load generator's wait, timed to the nanosecond, and the
//! kernel's form of an IPv4 address.

use std::net::SocketAddrV4;
use std::os::fd::RawFd;

/// `a` as the kernel takes it in `bind` and `connect`: port and address in network
/// byte order.
pub fn sockaddr_in(a: &SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

/// Makes `epfd` report `fd` as `token` when readable or closed by the peer, and also
/// when writable if `out`: callers ask for writability only while they have bytes
/// waiting, so an idle socket does not wake the loop on every turn.
pub fn set_interest(epfd: RawFd, fd: RawFd, token: usize, out: bool) {
    let mut flags = libc::EPOLLIN | libc::EPOLLRDHUP;
    if out {
        flags |= libc::EPOLLOUT;
    }
    let mut ev = libc::epoll_event {
        events: flags as u32,
        u64: token as u64,
    };
    // SAFETY: `ev` lives across the call; a stale `fd` gives EBADF/ENOENT, which the
    // callers' next read or write reports.
    unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, &mut ev) };
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
    fn a_short_wait_ends_on_time_not_a_millisecond_later() {
        // SAFETY: a new epoll instance with nothing in it, closed below.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(epfd >= 0);
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
        // SAFETY: `epfd` was created by this test and is closed once, here.
        unsafe { libc::close(epfd) };
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
