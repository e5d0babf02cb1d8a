//! One blocking connection, served by a thread of the threads server or a worker of the
//! processes server, within its deadline however the client trickles its bytes.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use smtlab_loadgen::sys;

use super::super::request;
use super::{Docs, ServerOpts, error_response, owes_continue, reply};

/// Most bytes one `sendfile` call is asked for.
const SENDFILE_PIECE_BYTES: usize = 64 * 1024;

/// Sends all of `data` on a blocking socket by `deadline`: each call may block only
/// for what is left of it (`SO_SNDTIMEO` alone would start again with every partial
/// send, so a client reading a byte now and then could hold the connection for ever).
fn write_all(fd: RawFd, mut data: &[u8], flags: i32, deadline: Instant) -> bool {
    while !data.is_empty() {
        if !time_left(fd, deadline) {
            return false;
        }
        match sys::send(fd, data, flags) {
            Ok(n) if n > 0 => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            _ => {
                abort_if_timed_out(fd);
                return false;
            }
        }
    }
    true
}

/// Sends `size` bytes of `file` by `deadline`. A blocking `sendfile` waits with the
/// whole send timeout each time the client's kernel opens its window a little (it
/// squeezes its queue now and then), so a client that stops reading could hold it for
/// several timeouts; here the socket is non-blocking for the file, and each piece waits
/// for room for at most what is left until the deadline.
fn send_file(fd: RawFd, file: RawFd, size: u64, deadline: Instant) -> bool {
    if sys::set_nonblocking(fd, true).is_err() {
        return false;
    }
    let sent = send_file_by(fd, file, size, deadline);
    let _ = sys::set_nonblocking(fd, false);
    sent
}

fn send_file_by(fd: RawFd, file: RawFd, size: u64, deadline: Instant) -> bool {
    let mut off: libc::off_t = 0;
    while (off as u64) < size {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !sys::wait_writable(fd, left) {
            abort_on_close(fd);
            return false;
        }
        let piece = ((size - off as u64) as usize).min(SENDFILE_PIECE_BYTES);
        match sys::sendfile(fd, file, &mut off, piece) {
            Ok(1..) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            _ => return false,
        }
    }
    true
}

/// Makes the coming `close` of a connection past its deadline a reset: the client
/// learns at once, and what it did not read is dropped instead of waiting in the
/// kernel for it.
pub(super) fn abort_on_close(fd: RawFd) {
    let _ = sys::reset_on_close(fd);
}

/// Whether bytes sent on the connection still wait in the kernel for the client to
/// take them (a response it has not read).
pub(super) fn unsent(fd: RawFd) -> bool {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ for sockets) writes one int.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    r == 0 && n > 0
}

/// After a blocking call that failed: one that ran into its socket timeout (`EAGAIN`)
/// ended at the deadline, and the close is made a reset.
fn abort_if_timed_out(fd: RawFd) {
    if io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
        abort_on_close(fd);
    }
}

/// Sets the send timeout to what is left until `deadline`; `false` (and the close to
/// come made a reset) when nothing is.
fn time_left(fd: RawFd, deadline: Instant) -> bool {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        abort_on_close(fd);
        return false;
    }
    let _ = sys::set_timeout(fd, libc::SO_SNDTIMEO, left);
    true
}

/// When the client must have taken every byte sent to it. A response's deadline starts
/// anew only when the client has taken all of the previous ones; a client that
/// pipelines requests and stops reading would otherwise get a fresh deadline with each
/// response the kernel still finds room for (the receiver squeezes its queue to open
/// its window a little now and then), and hold the connection for many of them.
#[derive(Debug, Default)]
struct Owed {
    by: Option<Instant>,
}

impl Owed {
    /// The deadline of the response about to start.
    fn response_deadline(&mut self, fd: RawFd, opts: ServerOpts) -> Instant {
        let by = match self.by {
            Some(by) if unsent(fd) => by,
            _ => Instant::now() + opts.idle_timeout,
        };
        self.by = Some(by);
        by
    }

    /// `deadline`, or sooner if bytes sent are still unread and owed by then.
    fn cap(&self, fd: RawFd, deadline: Instant) -> Instant {
        match self.by {
            Some(by) if unsent(fd) => deadline.min(by),
            _ => deadline,
        }
    }
}

/// One connection of the threaded server; the fd is closed by the caller. The
/// connection's deadline: each request head must arrive, and each response go out,
/// within the idle timeout, however the client trickles its bytes or reads ours.
pub(super) fn serve_blocking(fd: RawFd, docs: &Docs, opts: ServerOpts) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut owed = Owed::default();
    loop {
        // The whole head must arrive within the idle timeout, however it trickles in,
        // and no later than the client owes us the taking of what we sent.
        let deadline = owed.cap(fd, Instant::now() + opts.idle_timeout);
        let req = loop {
            match request::parse(&buf) {
                Ok(Some(r)) if buf.len() >= r.head_len + r.content_length as usize => break Ok(r),
                Ok(Some(r)) if owes_continue(&r, buf.len()) => {
                    if !write_all(fd, request::CONTINUE, 0, deadline) {
                        return;
                    }
                }
                Ok(_) => {}
                Err(rej) => break Err(rej),
            }
            // An idle kept-alive connection is closed as usual at its deadline; one
            // with part of a head (slowloris) is reset.
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if !buf.is_empty() || unsent(fd) {
                    abort_on_close(fd);
                }
                return;
            }
            let _ = sys::set_timeout(fd, libc::SO_RCVTIMEO, left);
            let Ok(n @ 1..) = sys::read(fd, &mut chunk) else {
                if !buf.is_empty() || unsent(fd) {
                    abort_if_timed_out(fd);
                }
                return;
            };
            buf.extend_from_slice(&chunk[..n]);
        };
        let req = match req {
            Ok(r) => r,
            Err(rej) => {
                write_all(
                    fd,
                    &error_response(rej),
                    0,
                    Instant::now() + opts.idle_timeout,
                );
                return;
            }
        };
        let used = req.head_len + req.content_length as usize;
        let r = reply(docs, &req, &buf[req.head_len..used]);
        buf.drain(..used);
        let deadline = owed.response_deadline(fd, opts);
        let more = if r.file.is_some() { libc::MSG_MORE } else { 0 };
        if !write_all(fd, &r.head, more, deadline) {
            return;
        }
        if let Some((f, size)) = &r.file
            && !send_file(fd, f.as_raw_fd(), *size, deadline)
        {
            return;
        }
        if !r.keep_alive {
            return;
        }
    }
}
