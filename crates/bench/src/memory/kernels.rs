//! Streaming kernels over 64-byte-aligned buffers: sum (read), fill (write) and copy.
//!
//! On x86-64 with AVX2 (checked at run time) the kernels use 256-bit loads and stores,
//! eight per loop step (256 bytes), like likwid-bench's `load_avx`, `store_avx` and
//! `copy_avx`: the read sums into eight independent accumulators so no add waits for
//! another; stores are ordinary (not non-temporal) stores, so a write also reads the line
//! first (write-allocate), as in `store_avx`. Elsewhere, portable Rust that the compiler
//! vectorises for the baseline target.
//!
//! Copy (and the AVX2 write) use volatile stores. Without that, the compiler is free to
//! turn a copy loop into a `memcpy` call (and glibc switches to non-temporal stores above
//! a size threshold, silently changing what is measured) or to drop a pass whose stores a
//! later pass overwrites. The portable fallbacks are for correctness on other CPUs; their
//! speed in cache is not tuned.

use std::ptr::write_volatile;

/// Bytes in a cache line and in one [`Line`].
pub const LINE_BYTES: usize = 64;

/// One cache line of 64-bit words, aligned so that vector loads never split lines.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line(pub [u64; 8]);

/// Which instruction set the kernels use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// 256-bit AVX2 loads and stores.
    Avx2,
    /// Portable Rust (SSE2 on x86-64).
    Portable,
}

impl Isa {
    /// The best this CPU supports.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }
}

smtlab_model::named_enum! {
    /// How a buffer's memory is backed: the `pages` parameter of the memory benchmarks.
    pub enum Pages {
        /// Transparent huge pages requested (`MADV_HUGEPAGE`) where the kernel has them:
        /// far fewer TLB misses and page walks, so the result measures caches and DRAM. On
        /// a virtual machine the page walks of 4 KiB pages also depend on how the host
        /// backs each buffer, which made two buffers of one process differ by 20% here.
        Huge = "huge",
        /// Ordinary 4 KiB pages (page walks included, as lmbench and STREAM measure).
        Base = "base",
    }
}

/// Why a memory benchmark's working set cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    #[error("cannot allocate {bytes} bytes")]
    Alloc { bytes: u128 },
    #[error("cannot allocate a {bytes}-byte pointer chase")]
    ChaseAlloc { bytes: u64 },
    #[error("{bytes} bytes is less than two {LINE_BYTES}-byte lines")]
    TooFewLines { bytes: u64 },
    #[error("{bytes} bytes is more than 2^32 lines")]
    TooManyLines { bytes: u64 },
    #[error("{bytes} bytes do not fit in this address space")]
    AddressSpace { bytes: u64 },
}

/// Allocates `n` lines and writes each one (`init(i)` for line `i`), so every page is
/// faulted in by the calling thread (first touch decides the NUMA node).
pub fn alloc_lines(
    n: usize,
    pages: Pages,
    mut init: impl FnMut(usize) -> Line,
) -> Result<Vec<Line>, MemoryError> {
    let mut v: Vec<Line> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| MemoryError::Alloc {
        bytes: (n as u128) * LINE_BYTES as u128,
    })?;
    if pages == Pages::Huge {
        advise_huge_pages(v.as_ptr().cast(), n * LINE_BYTES);
    }
    v.extend((0..n).map(&mut init));
    Ok(v)
}

/// Asks for transparent huge pages over the 2 MiB-aligned part of `[ptr, ptr + bytes)`,
/// before the pages are touched. Best effort: where the kernel has no transparent huge
/// pages (or none free), the buffer simply keeps 4 KiB pages.
pub fn advise_huge_pages(ptr: *const u8, bytes: usize) {
    const HUGE: usize = 2 << 20;
    let start = (ptr as usize).next_multiple_of(HUGE);
    let end = (ptr as usize + bytes) / HUGE * HUGE;
    if end > start {
        // SAFETY: the range lies inside an allocation this Vec owns; MADV_HUGEPAGE only
        // changes how its not yet touched pages are backed, never their contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

/// Wrapping sum of every word.
pub fn sum(isa: Isa, lines: &[Line]) -> u64 {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: Avx2 is only chosen when the CPU has AVX2 (`Isa::detect`).
        Isa::Avx2 => unsafe { x86::sum_avx2(lines) },
        _ => sum_portable(lines),
    }
}

/// Stores `value` into every word.
pub fn fill(isa: Isa, lines: &mut [Line], value: u64) {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `sum`.
        Isa::Avx2 => unsafe { x86::fill_avx2(lines, value) },
        _ => fill_portable(lines, value),
    }
}

/// Copies `src` into `dst` (the first `min(len)` lines).
pub fn copy(isa: Isa, src: &[Line], dst: &mut [Line]) {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `sum`.
        Isa::Avx2 => unsafe { x86::copy_avx2(src, dst) },
        _ => copy_portable(src, dst),
    }
}

#[inline(never)]
fn sum_portable(lines: &[Line]) -> u64 {
    let mut acc = [0u64; 8];
    for l in lines {
        for (a, w) in acc.iter_mut().zip(l.0) {
            *a = a.wrapping_add(w);
        }
    }
    acc.iter().fold(0, |s, &a| s.wrapping_add(a))
}

#[inline(never)]
fn fill_portable(lines: &mut [Line], value: u64) {
    // Plain stores vectorise; they cannot become `memset` (the value is not one repeated
    // byte as far as the compiler knows) and, in a function that is never inlined, cannot
    // be dropped.
    for l in lines {
        *l = Line([value; 8]);
    }
}

#[inline(never)]
fn copy_portable(src: &[Line], dst: &mut [Line]) {
    // Word by word: a volatile store of a whole line goes through a stack temporary,
    // and a plain copy loop becomes `memcpy`.
    for (s, d) in src.iter().zip(dst) {
        for (sw, dw) in s.0.iter().zip(d.0.iter_mut()) {
            // SAFETY: `dw` is a valid, exclusive reference.
            unsafe { write_volatile(dw, *sw) };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Line;
    use std::arch::x86_64::*;
    use std::ptr::write_volatile;

    /// Vectors per loop step: 8 x 32 bytes, four lines.
    const STEP: usize = 8;

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    #[inline(never)]
    pub unsafe fn sum_avx2(lines: &[Line]) -> u64 {
        let p = lines.as_ptr().cast::<__m256i>();
        let n = lines.len() * 2;
        // SAFETY: every index is below `n`, the number of 32-byte vectors in `lines`, and
        // lines are 64-byte aligned, so aligned loads are in bounds and aligned.
        unsafe {
            let z = _mm256_setzero_si256();
            let (mut a0, mut a1, mut a2, mut a3) = (z, z, z, z);
            let (mut a4, mut a5, mut a6, mut a7) = (z, z, z, z);
            let mut i = 0;
            while i + STEP <= n {
                a0 = _mm256_add_epi64(a0, _mm256_load_si256(p.add(i)));
                a1 = _mm256_add_epi64(a1, _mm256_load_si256(p.add(i + 1)));
                a2 = _mm256_add_epi64(a2, _mm256_load_si256(p.add(i + 2)));
                a3 = _mm256_add_epi64(a3, _mm256_load_si256(p.add(i + 3)));
                a4 = _mm256_add_epi64(a4, _mm256_load_si256(p.add(i + 4)));
                a5 = _mm256_add_epi64(a5, _mm256_load_si256(p.add(i + 5)));
                a6 = _mm256_add_epi64(a6, _mm256_load_si256(p.add(i + 6)));
                a7 = _mm256_add_epi64(a7, _mm256_load_si256(p.add(i + 7)));
                i += STEP;
            }
            while i < n {
                a0 = _mm256_add_epi64(a0, _mm256_load_si256(p.add(i)));
                i += 1;
            }
            let s = _mm256_add_epi64(
                _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)),
                _mm256_add_epi64(_mm256_add_epi64(a4, a5), _mm256_add_epi64(a6, a7)),
            );
            let mut out = [0u64; 4];
            _mm256_storeu_si256(out.as_mut_ptr().cast(), s);
            out.iter().fold(0, |t, &w| t.wrapping_add(w))
        }
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    #[inline(never)]
    pub unsafe fn fill_avx2(lines: &mut [Line], value: u64) {
        let p = lines.as_mut_ptr().cast::<__m256i>();
        let n = lines.len() * 2;
        // SAFETY: as in `sum_avx2`, for stores into an exclusive slice.
        unsafe {
            let v = _mm256_set1_epi64x(value as i64);
            let mut i = 0;
            while i + STEP <= n {
                for k in 0..STEP {
                    write_volatile(p.add(i + k), v);
                }
                i += STEP;
            }
            while i < n {
                write_volatile(p.add(i), v);
                i += 1;
            }
        }
    }

    /// # Safety
    /// The CPU must support AVX2; `src` and `dst` have the same length.
    #[target_feature(enable = "avx2")]
    #[inline(never)]
    pub unsafe fn copy_avx2(src: &[Line], dst: &mut [Line]) {
        let s = src.as_ptr().cast::<__m256i>();
        let d = dst.as_mut_ptr().cast::<__m256i>();
        let n = src.len().min(dst.len()) * 2;
        // SAFETY: as in `sum_avx2`; `dst` is exclusive, so it cannot overlap `src`.
        unsafe {
            let mut i = 0;
            while i + STEP <= n {
                let v0 = _mm256_load_si256(s.add(i));
                let v1 = _mm256_load_si256(s.add(i + 1));
                let v2 = _mm256_load_si256(s.add(i + 2));
                let v3 = _mm256_load_si256(s.add(i + 3));
                let v4 = _mm256_load_si256(s.add(i + 4));
                let v5 = _mm256_load_si256(s.add(i + 5));
                let v6 = _mm256_load_si256(s.add(i + 6));
                let v7 = _mm256_load_si256(s.add(i + 7));
                write_volatile(d.add(i), v0);
                write_volatile(d.add(i + 1), v1);
                write_volatile(d.add(i + 2), v2);
                write_volatile(d.add(i + 3), v3);
                write_volatile(d.add(i + 4), v4);
                write_volatile(d.add(i + 5), v5);
                write_volatile(d.add(i + 6), v6);
                write_volatile(d.add(i + 7), v7);
                i += STEP;
            }
            while i < n {
                write_volatile(d.add(i), _mm256_load_si256(s.add(i)));
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn isas() -> Vec<Isa> {
        let mut v = vec![Isa::Portable];
        if Isa::detect() == Isa::Avx2 {
            v.push(Isa::Avx2);
        }
        v
    }

    fn pattern(n: usize) -> Vec<Line> {
        alloc_lines(n, Pages::Base, |i| {
            Line(std::array::from_fn(|k| (i * 8 + k) as u64 * 3 + 1))
        })
        .unwrap()
    }

    #[test]
    fn kernels_agree_with_plain_loops_for_every_length() {
        for isa in isas() {
            // Lengths around the 4-line step, to cover the remainder loops.
            for n in [0, 1, 3, 4, 5, 9, 64] {
                let src = pattern(n);
                let want = src
                    .iter()
                    .flat_map(|l| l.0)
                    .fold(0u64, |s, w| s.wrapping_add(w));
                assert_eq!(sum(isa, &src), want, "{isa:?} n={n}");

                let mut dst = alloc_lines(n, Pages::Base, |_| Line([0; 8])).unwrap();
                copy(isa, &src, &mut dst);
                assert_eq!(dst, src, "{isa:?} n={n}");

                fill(isa, &mut dst, 0xDEAD_BEEF_0123_4567);
                assert!(dst.iter().all(|l| l.0 == [0xDEAD_BEEF_0123_4567; 8]));
            }
        }
    }

    #[test]
    fn lines_are_cache_line_aligned() {
        let v = alloc_lines(3, Pages::Base, |_| Line([0; 8])).unwrap();
        assert_eq!(v.as_ptr() as usize % LINE_BYTES, 0);
        assert_eq!(std::mem::size_of::<Line>(), LINE_BYTES);
    }

    #[test]
    fn impossible_allocations_are_errors() {
        let e = alloc_lines(usize::MAX / 2, Pages::Base, |_| Line([0; 8])).unwrap_err();
        assert!(e.to_string().contains("cannot allocate"), "{e}");
    }
}
