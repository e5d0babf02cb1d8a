//! The clocks benchmarks time themselves with, and what reading them costs.
//!
//! * [`now_ns`]: `CLOCK_MONOTONIC` in nanoseconds. It is system-wide, so timestamps taken
//!   by workers on different CPUs can be compared (first start, last finish, start
//!   spread), and on Linux x86 it is answered by the vDSO from the TSC without a system
//!   call. Reading the TSC directly would save a few nanoseconds but needs the invariant
//!   TSC flags and a calibration against this clock anyway; for samples of milliseconds
//!   the difference is noise.
//! * [`thread_cpu_ns`]: `CLOCK_THREAD_CPUTIME_ID`, the CPU time of the calling thread, for
//!   the work-per-CPU-second rate (a system call on most kernels: read it outside the
//!   timed section).
//! * [`clock_cost_ns`]: the cost of one [`now_ns`] call, measured, so that a time per
//!   operation can have it subtracted and say how much was subtracted.
//! * [`Clock`]: the same monotonic clock behind a trait, with [`FakeClock`] for tests of
//!   code that schedules by time.

use std::sync::atomic::{AtomicU64, Ordering};

fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec; both clocks exist on every Linux since 2.6.12,
    // so the call cannot fail with a valid pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Nanoseconds of `CLOCK_MONOTONIC` (since boot, not counting suspend).
#[inline]
pub fn now_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used, in nanoseconds.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Measured cost of one [`now_ns`] call in nanoseconds: the smallest mean over a few
/// batches of back-to-back reads, since interrupts and preemption only ever add time.
/// Takes well under a millisecond.
pub fn clock_cost_ns() -> f64 {
    const BATCHES: usize = 7;
    const READS: u64 = 256;
    let mut best = f64::INFINITY;
    for _ in 0..BATCHES {
        let t0 = now_ns();
        let mut last = t0;
        for _ in 0..READS {
            last = std::hint::black_box(now_ns());
        }
        let per = last.saturating_sub(t0) as f64 / READS as f64;
        best = best.min(per);
    }
    best
}

/// The fastest core clock [`core_clock_ghz`] believes, in GHz: no core runs a chain of
/// dependent additions faster, so a reading above it means the chain did not wait on
/// itself (a core that learnt a new way to skip work) and is no clock at all.
const MAX_PLAUSIBLE_GHZ: f64 = 8.0;

/// The core clock in GHz, measured: a chain of dependent integer additions retires
/// one per cycle on every x86-64 and AArch64 core (each waits for the previous result,
/// so nothing overlaps), so additions per nanosecond are cycles per nanosecond. The
/// fastest of a few batches is kept (interrupts and preemption only slow a batch
/// down). It is the clock the core ran at while measured (turbo included), not the
/// nominal one; about 20 ms. `None` on other architectures, and when the chain ran
/// faster than any core clock ([`MAX_PLAUSIBLE_GHZ`]).
pub fn core_clock_ghz() -> Option<f64> {
    const BATCHES: usize = 9;
    const LOOPS: u64 = 20_000;
    let mut best: f64 = 0.0;
    for _ in 0..BATCHES {
        let t0 = now_ns();
        let adds = add_chain(LOOPS)?;
        let ns = now_ns().saturating_sub(t0);
        if ns > 0 {
            best = best.max(adds as f64 / ns as f64);
        }
    }
    (best > 0.0 && best <= MAX_PLAUSIBLE_GHZ).then_some(best)
}

/// Runs `loops` (at least 1) x 64 dependent additions; returns how many ran. The loop
/// is inside the assembly so that its counter, a second chain that runs beside the
/// first, is all the overhead there is, whatever the build's optimisation.
///
/// The addend is a register, never an immediate: recent Intel cores (Golden Cove and
/// later, Sapphire Rapids among them) fold an addition of a small constant into the
/// register renamer, so a chain of `add x, 1` retires several a cycle and read 22 "GHz"
/// on a 3.8 GHz core, where `add x, one` read 3.8.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn add_chain(loops: u64) -> Option<u64> {
    let loops = loops.max(1);
    let mut x: u64 = 0;
    // Opaque to the compiler, so it stays a register the renamer has no value for.
    let one: u64 = std::hint::black_box(1);
    // SAFETY: arithmetic and a backward branch on three registers the block owns or
    // only reads; no memory, no stack; the flags are clobbered (the default without
    // `preserves_flags`). `n` starts at 1 or more, so the loop ends.
    unsafe {
        #[cfg(target_arch = "x86_64")]
        std::arch::asm!(
            "2:", ".rept 64", "add {x}, {one}", ".endr", "dec {n}", "jnz 2b",
            x = inout(reg) x, n = inout(reg) loops => _, one = in(reg) one,
            options(nomem, nostack),
        );
        #[cfg(target_arch = "aarch64")]
        std::arch::asm!(
            "2:", ".rept 64", "add {x}, {x}, {one}", ".endr", "subs {n}, {n}, #1", "b.ne 2b",
            x = inout(reg) x, n = inout(reg) loops => _, one = in(reg) one,
            options(nomem, nostack),
        );
    }
    std::hint::black_box(x);
    Some(loops * 64)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn add_chain(_loops: u64) -> Option<u64> {
    None
}

/// A monotonic nanosecond clock.
pub trait Clock: Send + Sync {
    fn now_ns(&self) -> u64;
}

/// The real clock: [`now_ns`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Monotonic;

impl Clock for Monotonic {
    fn now_ns(&self) -> u64 {
        now_ns()
    }
}

/// A clock that advances by a fixed step on every read, for deterministic tests.
#[derive(Debug, Default)]
pub struct FakeClock {
    now: AtomicU64,
    step: u64,
}

impl FakeClock {
    pub fn new(start_ns: u64, step_ns: u64) -> Self {
        Self {
            now: AtomicU64::new(start_ns),
            step: step_ns,
        }
    }

    /// Moves the clock forward without a read.
    pub fn advance(&self, ns: u64) {
        self.now.fetch_add(ns, Ordering::Relaxed);
    }
}

impl Clock for FakeClock {
    fn now_ns(&self) -> u64 {
        self.now.fetch_add(self.step, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_advances_and_is_cheap() {
        let a = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(1));
        let b = now_ns();
        assert!(b - a >= 1_000_000, "{a} -> {b}");
        let cost = clock_cost_ns();
        // Generous: even an unoptimised build with a syscall clock stays far below 50 us.
        assert!(cost > 0.0 && cost < 50_000.0, "clock cost {cost} ns");
    }

    #[test]
    fn thread_cpu_time_counts_only_work() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        let t0 = now_ns();
        while now_ns() - t0 < 2_000_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let b = thread_cpu_ns();
        assert!(b > a);
        let c = thread_cpu_ns();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let d = thread_cpu_ns();
        assert!(d - c < 4_000_000, "sleeping used {} ns of CPU", d - c);
    }

    #[test]
    fn fake_clock_steps() {
        let c = FakeClock::new(100, 10);
        assert_eq!(c.now_ns(), 100);
        assert_eq!(c.now_ns(), 110);
        c.advance(5);
        assert_eq!(c.now_ns(), 125);
        assert!(Monotonic.now_ns() > 0);
    }

    /// The measured clock is a plausible core clock (0.4 to 7 GHz), measured twice.
    /// How much two measurements agree is the host's to say (a virtual machine's CPU
    /// runs at the speed its host gives it, which moves under load), so no test holds
    /// them to each other.
    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn core_clock_is_plausible() {
        for _ in 0..2 {
            let ghz = core_clock_ghz().unwrap();
            assert!((0.4..7.0).contains(&ghz), "{ghz} GHz");
        }
    }
}
