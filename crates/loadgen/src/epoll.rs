//! The epoll call both sides of an HTTP exchange make on every state change: the
//! load generator's connections here and the built-in web server's in the workloads.

use std::os::fd::RawFd;

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
