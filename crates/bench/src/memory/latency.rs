//! `mem-latency`: load-to-use latency by a randomised pointer chase (lmbench `lat_mem_rd`,
//! tinymembench), over a working set of `size` bytes per thread.
//!
//! The buffer is cut into 64-byte lines; the first word of each line points to the next
//! line of one random cyclic permutation of all lines (a random order, linked end to
//! start), so every load depends on the previous one and no prefetcher can guess the next
//! address. One iteration is one load. The working set decides where the lines live (L1,
//! L2, L3, DRAM: see [`super::latency_sweep_sizes`]); with 4 KiB pages, sets larger than
//! the TLB reach also pay page walks, as a random access of real code would.
//!
//! The chase continues across samples. After each sample the line reached is checked to be
//! exactly `loads` steps further along the cycle (each line's position in the cycle is
//! kept aside), so the loads cannot have been skipped or cut short.

use std::hint::black_box;

use super::kernels::{LINE_BYTES, MemoryError, Pages};
use crate::compute::kernel::splitmix64;
use crate::workers::{WorkerState, WrongResult};

#[repr(C, align(64))]
struct ChaseLine {
    next: *const ChaseLine,
    _pad: [u64; 7],
}

/// One thread's pointer-chase ring.
pub struct Chase {
    lines: Vec<ChaseLine>,
    /// Position of each line in the cycle.
    pos: Vec<u32>,
    cur: *const ChaseLine,
    cur_pos: u64,
}

/// Lines in a working set of `bytes`, or why it cannot be chased.
pub fn lines_for(bytes: u64) -> Result<usize, MemoryError> {
    let n = bytes / LINE_BYTES as u64;
    if n < 2 {
        return Err(MemoryError::TooFewLines { bytes });
    }
    if n > u32::MAX as u64 {
        return Err(MemoryError::TooManyLines { bytes });
    }
    usize::try_from(n).map_err(|_| MemoryError::AddressSpace { bytes })
}

impl Chase {
    /// Builds a random ring over `bytes` (whole lines) from `seed`, writing every line,
    /// on memory backed as `pages` says.
    pub fn with_pages(bytes: u64, seed: u64, pages: Pages) -> Result<Self, MemoryError> {
        let n = lines_for(bytes)?;
        let oom = || MemoryError::ChaseAlloc { bytes };
        let mut lines: Vec<ChaseLine> = Vec::new();
        lines.try_reserve_exact(n).map_err(|_| oom())?;
        if pages == Pages::Huge {
            super::kernels::advise_huge_pages(lines.as_ptr().cast(), n * LINE_BYTES);
        }
        lines.extend((0..n).map(|_| ChaseLine {
            next: std::ptr::null(),
            _pad: [0; 7],
        }));
        let mut order: Vec<u32> = Vec::new();
        order.try_reserve_exact(n).map_err(|_| oom())?;
        order.extend(0..n as u32);
        let mut g = seed ^ 0x5EED_CAFE_F00D_D00D;
        for i in (1..n).rev() {
            // Multiply-shift maps a 64-bit draw onto 0..=i without modulo bias.
            let j = ((splitmix64(&mut g) as u128 * (i as u128 + 1)) >> 64) as usize;
            order.swap(i, j);
        }
        let base = lines.as_mut_ptr();
        for k in 0..n {
            let from = order[k] as usize;
            let to = order[(k + 1) % n] as usize;
            // SAFETY: `from` and `to` are below n, the length of `lines`.
            unsafe { (*base.add(from)).next = base.add(to) };
        }
        let mut pos: Vec<u32> = Vec::new();
        pos.try_reserve_exact(n).map_err(|_| oom())?;
        pos.resize(n, 0);
        for (k, &line) in order.iter().enumerate() {
            pos[line as usize] = k as u32;
        }
        let first = order[0] as usize;
        Ok(Chase {
            cur: lines.as_ptr().wrapping_add(first),
            lines,
            pos,
            cur_pos: 0,
        })
    }

    fn index_of(&self, p: *const ChaseLine) -> Option<usize> {
        let off = (p as usize).checked_sub(self.lines.as_ptr() as usize)?;
        let i = off / LINE_BYTES;
        (off % LINE_BYTES == 0 && i < self.lines.len()).then_some(i)
    }
}

/// Follows `n` pointers from `p`.
///
/// # Safety
/// `p` must point into a ring of `ChaseLine`s whose `next` pointers all point into the
/// same live ring.
#[inline(never)]
unsafe fn chase(mut p: *const ChaseLine, n: u64) -> *const ChaseLine {
    // SAFETY: the caller guarantees every `next` in the ring is valid.
    unsafe {
        // Unrolled so the loop counter is even less of the time than it already is (it
        // runs in parallel with the loads anyway).
        for _ in 0..n / 8 {
            p = (*p).next;
            p = (*p).next;
            p = (*p).next;
            p = (*p).next;
            p = (*p).next;
            p = (*p).next;
            p = (*p).next;
            p = (*p).next;
        }
        for _ in 0..n % 8 {
            p = (*p).next;
        }
    }
    p
}

impl WorkerState for Chase {
    fn run(&mut self, loads: u64) -> f64 {
        // SAFETY: `cur` points into `self.lines`, whose links all point into it; the
        // vector is never resized after `new`.
        self.cur = black_box(unsafe { chase(black_box(self.cur), black_box(loads)) });
        loads as f64
    }

    fn check(&mut self, loads: u64) -> Result<(), WrongResult> {
        let n = self.lines.len() as u64;
        let want = (self.cur_pos + loads % n) % n;
        let Some(i) = self.index_of(self.cur) else {
            return Err("the chase left its buffer".into());
        };
        let got = u64::from(self.pos[i]);
        self.cur_pos = got;
        if got == want {
            Ok(())
        } else {
            Err(
                format!("after {loads} loads the chase is at ring position {got}, expected {want}")
                    .into(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_is_one_cycle_through_every_line() {
        for (bytes, seed) in [(128, 1), (4096, 2), (64 << 10, 3)] {
            let c = Chase::with_pages(bytes, seed, Pages::Base).unwrap();
            let n = c.lines.len();
            let mut seen = vec![false; n];
            let mut p = c.cur;
            for _ in 0..n {
                let i = c.index_of(p).unwrap();
                assert!(!seen[i], "line {i} visited twice");
                seen[i] = true;
                // SAFETY: `p` points into the chase's own ring (index_of found it there).
                p = unsafe { (*p).next };
            }
            assert_eq!(p, c.cur, "ring does not close after {n} steps");
        }
    }

    #[test]
    fn checks_count_loads_across_samples() {
        let mut c = Chase::with_pages(8 << 10, 9, Pages::Base).unwrap();
        for loads in [1, 7, 128, 1000, 0] {
            assert_eq!(c.run(loads), loads as f64);
            c.check(loads).unwrap();
        }
        c.run(5);
        assert!(c.check(4).unwrap_err().0.contains("expected"));
    }

    #[test]
    fn the_order_is_random() {
        let c = Chase::with_pages(4096, 1, Pages::Base).unwrap();
        // A sequential ring would step to the next line; a random one rarely does.
        let mut p = c.cur;
        let mut sequential = 0;
        for _ in 0..c.lines.len() {
            // SAFETY: every pointer of the ring points at one of `c`'s own lines.
            let next = unsafe { (*p).next };
            if next as usize == p as usize + LINE_BYTES {
                sequential += 1;
            }
            p = next;
        }
        assert!(sequential < 8, "{sequential} sequential steps of 64");
        assert_ne!(
            Chase::with_pages(4096, 1, Pages::Base).unwrap().pos,
            Chase::with_pages(4096, 2, Pages::Base).unwrap().pos
        );
    }

    #[test]
    fn tiny_sizes_are_errors() {
        assert!(
            Chase::with_pages(64, 1, Pages::Base)
                .err()
                .unwrap()
                .to_string()
                .contains("two 64-byte lines")
        );
        assert_eq!(lines_for(1 << 37), Ok(1 << 31));
        assert!(
            lines_for(1 << 38)
                .unwrap_err()
                .to_string()
                .contains("2^32 lines")
        );
        assert!(lines_for(u64::MAX).is_err());
    }
}
