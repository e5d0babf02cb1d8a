//! The runner's clock and the fixed costs of timing (measurement rule 1).
//!
//! Benchmarks time their own samples (they know where the timed section starts and
//! ends); the runner's [`Clock`] keeps the cell's time budget and measures what a
//! clock read and an empty loop iteration cost on this machine. The trait, the real
//! clock ([`Monotonic`], `CLOCK_MONOTONIC`, what the benchmarks time themselves with)
//! and the fake ([`FakeClock`], which moves only by a fixed step per read and when
//! told to) are the bench crate's, so there is one clock abstraction in the project.

use std::hint::black_box;

pub use smtlab_bench::clock::{Clock, FakeClock, Monotonic};

pub use smtlab_model::result::Overheads;

/// Measures both overheads; takes about a millisecond with the real clock. Cells of one
/// run can share the result through `RunConfig::known_overheads`.
pub fn measure_overheads(clock: &dyn Clock) -> Overheads {
    let clock_cost_ns = measure_clock_cost_ns(clock);
    Overheads {
        clock_cost_ns,
        loop_cost_ns_per_iter: measure_loop_cost_ns_per_iter(clock, clock_cost_ns),
    }
}

/// Median over batches of back-to-back reads of the per-read cost. Batches rather than
/// single pairs because a single pair is below the clock's resolution on some machines
/// (and then reads as 0 or one tick); the median rejects batches hit by an interrupt.
pub fn measure_clock_cost_ns(clock: &dyn Clock) -> f64 {
    const BATCHES: usize = 31;
    const READS: usize = 64;
    let mut costs: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let first = clock.now_ns();
            let mut last = first;
            for _ in 1..READS {
                last = black_box(clock.now_ns());
            }
            last.saturating_sub(first) as f64 / (READS - 1) as f64
        })
        .collect();
    costs.sort_by(f64::total_cmp);
    costs[BATCHES / 2]
}

/// Per-iteration cost of an empty counted loop, with the loop length grown until one
/// run lasts at least 200 µs (or 2^20 iterations, so a clock that does not move, like
/// [`FakeClock`], still ends quickly); median of five runs, minus one clock read.
pub fn measure_loop_cost_ns_per_iter(clock: &dyn Clock, clock_cost_ns: f64) -> f64 {
    const MIN_RUN_NS: u64 = 200_000;
    const MAX_ITERS: u64 = 1 << 20;
    let time = |n: u64| {
        let start = clock.now_ns();
        empty_loop(black_box(n));
        clock.now_ns().saturating_sub(start)
    };
    let mut n = 1 << 10;
    while n < MAX_ITERS && time(n) < MIN_RUN_NS {
        n *= 8;
    }
    let mut per_iter: Vec<f64> = (0..5)
        .map(|_| ((time(n) as f64 - clock_cost_ns) / n as f64).max(0.0))
        .collect();
    per_iter.sort_by(f64::total_cmp);
    per_iter[2]
}

#[inline(never)]
fn empty_loop(n: u64) {
    for i in 0..n {
        black_box(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_cost_is_its_read_step() {
        assert_eq!(measure_clock_cost_ns(&FakeClock::new(0, 25)), 25.0);
        let o = measure_overheads(&FakeClock::new(0, 25));
        assert_eq!(o.clock_cost_ns, 25.0);
        // The fake moves only on reads, so the loop looks free.
        assert_eq!(o.loop_cost_ns_per_iter, 0.0);
    }

    #[test]
    fn real_costs_are_plausible() {
        let o = measure_overheads(&Monotonic);
        assert!(
            o.clock_cost_ns > 0.0 && o.clock_cost_ns < 100_000.0,
            "{o:?}"
        );
        assert!(o.loop_cost_ns_per_iter >= 0.0 && o.loop_cost_ns_per_iter < 1_000.0);
    }
}
