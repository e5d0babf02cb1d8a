//! `mem-read`, `mem-write`, `mem-copy`: per-thread streaming bandwidth (paper 002 s5).
//!
//! Each worker allocates its own buffer after it is pinned and writes all of it before the
//! first sample (pre-faulted, first-touched on its NUMA node; paper 002 did the same with
//! `memset`). One iteration is one pass over the thread's buffer; work is bytes, counted
//! as likwid-bench counts them: a read or write pass moves `size` bytes, a copy pass reads
//! `size/2` and writes `size/2` (source and destination together make up `size`), i.e. no
//! write-allocate traffic is added. `size` is per thread, so
//! `likwid-bench -t load_avx -w S0:<threads*size>:<threads>` is the like-for-like run.
//!
//! Checks after every sample (not timed): the read's sum equals passes x the buffer's sum
//! (computed while filling); the write's buffer holds the last pass's value (every pass
//! stores a different value); the copy's destination matches the source, and a few
//! destination words are then spoiled so the next sample must copy them again.

use std::hint::black_box;

use super::kernels::{self, Isa, LINE_BYTES, Line, MemoryError, Pages};
use crate::workers::{WorkerState, WrongResult};

smtlab_model::named_enum! {
    /// Which stream a bandwidth benchmark runs, by the benchmark's name.
    pub enum Stream {
        Read = "mem-read",
        Write = "mem-write",
        Copy = "mem-copy",
    }
}

/// Value of word `w` of a buffer filled with `seed`.
fn word(seed: u64, w: usize) -> u64 {
    (w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed
}

fn pattern_line(seed: u64, line: usize) -> Line {
    Line(std::array::from_fn(|k| word(seed, line * 8 + k)))
}

/// Value every word holds after write pass `pass`: different for every pass, and not one
/// byte repeated (which a compiler could turn into `memset`).
fn pass_value(seed: u64, pass: u64) -> u64 {
    let mut s = seed ^ pass.wrapping_mul(0xA24B_AED4_963E_E407);
    crate::compute::kernel::splitmix64(&mut s)
}

/// Word indices the checks look at: first, last and about a thousand in between.
fn probes(words: usize) -> impl Iterator<Item = usize> {
    let step = (words / 1024).max(1);
    (0..words)
        .step_by(step)
        .chain(words.checked_sub(1))
        .filter(move |_| words > 0)
}

fn get(lines: &[Line], w: usize) -> u64 {
    lines[w / 8].0[w % 8]
}

/// The state of one bandwidth worker.
pub struct StreamWorker {
    stream: Stream,
    isa: Isa,
    seed: u64,
    /// Read: the buffer. Write: the buffer. Copy: the source.
    a: Vec<Line>,
    /// Copy: the destination; empty otherwise.
    b: Vec<Line>,
    /// Read: wrapping sum of one pass over `a`.
    pass_sum: u64,
    /// Read: what the last sample summed.
    sum: u64,
    /// Write: passes done so far.
    passes: u64,
}

impl StreamWorker {
    /// Allocates and pre-faults `bytes` (rounded down to whole lines; the caller rounds to
    /// pages) for `stream`, filled from `seed`.
    pub fn new(
        stream: Stream,
        isa: Isa,
        bytes: u64,
        pages: Pages,
        seed: u64,
    ) -> Result<Self, MemoryError> {
        let lines = usize::try_from(bytes / LINE_BYTES as u64)
            .map_err(|_| MemoryError::AddressSpace { bytes })?;
        let mut w = StreamWorker {
            stream,
            isa,
            seed,
            a: Vec::new(),
            b: Vec::new(),
            pass_sum: 0,
            sum: 0,
            passes: 0,
        };
        match stream {
            Stream::Read => {
                let mut s = 0u64;
                w.a = kernels::alloc_lines(lines, pages, |i| {
                    let l = pattern_line(seed, i);
                    s = l.0.iter().fold(s, |t, &x| t.wrapping_add(x));
                    l
                })?;
                w.pass_sum = s;
            }
            Stream::Write => w.a = kernels::alloc_lines(lines, pages, |_| Line([0; 8]))?,
            Stream::Copy => {
                w.a = kernels::alloc_lines(lines / 2, pages, |i| pattern_line(seed, i))?;
                w.b = kernels::alloc_lines(lines / 2, pages, |_| Line([0; 8]))?;
            }
        }
        Ok(w)
    }

    /// Bytes one pass moves, as likwid-bench counts them.
    pub fn bytes_per_pass(&self) -> u64 {
        ((self.a.len() + self.b.len()) * LINE_BYTES) as u64
    }
}

impl WorkerState for StreamWorker {
    fn run(&mut self, passes: u64) -> f64 {
        let isa = self.isa;
        match self.stream {
            Stream::Read => {
                let mut s = 0u64;
                for _ in 0..passes {
                    // black_box: the buffer might have changed, so every pass is summed.
                    s = s.wrapping_add(kernels::sum(isa, black_box(&self.a)));
                }
                self.sum = black_box(s);
            }
            Stream::Write => {
                for _ in 0..passes {
                    let v = pass_value(self.seed, self.passes);
                    kernels::fill(isa, black_box(&mut self.a), v);
                    self.passes += 1;
                }
            }
            Stream::Copy => {
                for _ in 0..passes {
                    kernels::copy(isa, black_box(&self.a), black_box(&mut self.b));
                }
            }
        }
        (self.bytes_per_pass() * passes) as f64
    }

    fn check(&mut self, passes: u64) -> Result<(), WrongResult> {
        if passes == 0 {
            return Ok(());
        }
        match self.stream {
            Stream::Read => {
                let want = self.pass_sum.wrapping_mul(passes);
                if self.sum != want {
                    return Err(format!(
                        "sum of {passes} read passes is {:#x}, expected {want:#x}",
                        self.sum
                    )
                    .into());
                }
            }
            Stream::Write => {
                let want = pass_value(self.seed, self.passes - 1);
                if let Some(w) = probes(self.a.len() * 8).find(|&w| get(&self.a, w) != want) {
                    return Err(format!(
                        "word {w} holds {:#x} after the write passes, expected {want:#x}",
                        get(&self.a, w)
                    )
                    .into());
                }
            }
            Stream::Copy => {
                let words = self.b.len() * 8;
                if let Some(w) = probes(words).find(|&w| get(&self.b, w) != get(&self.a, w)) {
                    return Err(format!(
                        "copied word {w} is {:#x}, the source holds {:#x}",
                        get(&self.b, w),
                        get(&self.a, w)
                    )
                    .into());
                }
                for w in probes(words) {
                    self.b[w / 8].0[w % 8] = !get(&self.a, w);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stream_checks_out_and_counts_bytes_like_likwid() {
        for isa in [Isa::Portable, Isa::detect()] {
            for stream in [Stream::Read, Stream::Write, Stream::Copy] {
                let mut w = StreamWorker::new(stream, isa, 16 << 10, Pages::Base, 5).unwrap();
                assert_eq!(w.bytes_per_pass(), 16 << 10);
                for passes in [1, 3, 0, 2] {
                    assert_eq!(w.run(passes), (passes * (16 << 10)) as f64);
                    w.check(passes).unwrap();
                }
            }
        }
    }

    #[test]
    fn checks_catch_missing_work() {
        let isa = Isa::detect();
        let mut r = StreamWorker::new(Stream::Read, isa, 8 << 10, Pages::Base, 1).unwrap();
        r.run(2);
        assert!(r.check(3).unwrap_err().0.contains("3 read passes"));

        let mut w = StreamWorker::new(Stream::Write, isa, 8 << 10, Pages::Base, 1).unwrap();
        w.run(2);
        w.a[5].0[3] ^= 1;
        w.a.last_mut().unwrap().0[7] ^= 1;
        assert!(w.check(2).unwrap_err().0.contains("after the write passes"));

        let mut c = StreamWorker::new(Stream::Copy, isa, 8 << 10, Pages::Base, 1).unwrap();
        c.run(1);
        c.check(1).unwrap();
        // The check spoiled some destination words: skipping the copy is caught.
        assert!(c.check(1).unwrap_err().0.contains("copied word 0"));
    }

    #[test]
    fn probes_cover_both_ends() {
        let p: Vec<usize> = probes(10).collect();
        assert_eq!(p.first(), Some(&0));
        assert_eq!(p.last(), Some(&9));
        assert_eq!(probes(0).count(), 0);
        assert!(probes(1 << 20).count() <= 1026);
    }
}
