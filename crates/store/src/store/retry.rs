//! Waiting out a shared PostgreSQL that is busy for a moment: a thousand hosts pushing at
//! once meet `too many clients` (SQLSTATE 53300), a server starting or restarting refuses
//! connections, and concurrent transactions can fail to serialize or deadlock. Each is
//! tried again, up to [`ATTEMPTS`] times, after a wait that doubles from [`FIRST_WAIT`]
//! up to [`MAX_WAIT`], each wait drawn at random from its upper half (jitter), so that
//! hosts turned away together do not come back together. Any other error is final at
//! once.

use std::time::Duration;

use postgres::error::SqlState;

/// Tries in all, the first included.
pub(crate) const ATTEMPTS: u32 = 8;
/// The longest wait before the first retry.
const FIRST_WAIT: Duration = Duration::from_millis(100);
/// No wait is longer than this.
const MAX_WAIT: Duration = Duration::from_secs(4);

/// Whether a later attempt may succeed where this one failed: the server refused the
/// connection, had no connection slot left or is starting, or the transaction lost a
/// serialization or deadlock conflict (and was rolled back whole).
pub(crate) fn transient(e: &postgres::Error) -> bool {
    if let Some(code) = e.code() {
        return [
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
        ]
        .contains(code);
    }
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        cause = c.source();
    }
    false
}

/// The wait before retry `n` (1 for the first): the upper half of
/// `FIRST_WAIT x 2^(n-1)`, at most [`MAX_WAIT`].
pub(crate) fn backoff(n: u32) -> Duration {
    let cap = FIRST_WAIT
        .saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(MAX_WAIT);
    let cap_ms = cap.as_millis() as u64;
    Duration::from_millis(fastrand::u64(cap_ms / 2..=cap_ms))
}

/// `f` until it succeeds, fails for good, or has been tried [`ATTEMPTS`] times.
pub(crate) fn retrying<T, E>(
    mut f: impl FnMut() -> Result<T, E>,
    transient: impl Fn(&E) -> bool,
) -> Result<T, E> {
    let mut n = 0;
    loop {
        match f() {
            Err(e) if transient(&e) && n + 1 < ATTEMPTS => {
                n += 1;
                std::thread::sleep(backoff(n));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_within_their_upper_half_and_stop_growing() {
        for n in 1..=10 {
            let cap = FIRST_WAIT.saturating_mul(1 << (n - 1)).min(MAX_WAIT);
            for _ in 0..50 {
                let w = backoff(n);
                assert!(
                    w <= cap && w >= cap / 2 - Duration::from_millis(1),
                    "{n}: {w:?}"
                );
            }
        }
    }

    #[test]
    fn only_transient_failures_are_tried_again() {
        let mut tries = 0;
        let r: Result<(), &str> = retrying(
            || {
                tries += 1;
                Err("final")
            },
            |e| *e == "busy",
        );
        assert_eq!((r, tries), (Err("final"), 1));
        let mut tries = 0;
        let r: Result<u32, &str> = retrying(
            || {
                tries += 1;
                if tries < 3 { Err("busy") } else { Ok(tries) }
            },
            |e| *e == "busy",
        );
        assert_eq!(r, Ok(3));
    }
}
