//! The two task trees: a recursive radix-2 FFT and a recursive block matrix multiply.
//!
//! A tree's nodes are numbered so that a task is just its node id (`u32`): the queue
//! carries ids, and a node's data region follows from its id. An inner node's task
//! pushes its children; a leaf computes. When a node's last child finishes, the worker
//! that finished it runs the node's combine step (no task waits for another), then
//! reports to the node's parent the same way, up to the root.
//!
//! Every node writes its own region of a shared buffer, disjoint from every other
//! node's, and reads its children's regions only after their completion was observed
//! through the node's pending counter (acquire-release), so the raw-pointer accesses
//! below never race.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::workers::WrongResult;

/// One tree of tasks and its data.
pub trait Work: Send + Sync {
    fn root(&self) -> u32;
    /// Nodes of one tree: tasks queued per tree.
    fn nodes(&self) -> usize;
    /// Children of an inner node, none for a leaf.
    fn children(&self, id: u32) -> std::ops::Range<u32>;
    fn parent(&self, id: u32) -> Option<u32>;
    /// A leaf's computation.
    fn leaf(&self, id: u32);
    /// An inner node's step once all its children are done.
    fn combine(&self, id: u32);
    /// Counts a finished child of `parent`; true for the last one (the counter is then
    /// re-armed for the next tree).
    fn child_done(&self, parent: u32) -> bool;
    /// Compares the last tree's result with a reference.
    fn check(&self) -> Result<(), WrongResult>;
}

/// A buffer whose disjoint regions are written by different threads.
struct Shared<T>(UnsafeCell<Box<[T]>>);

// SAFETY: access discipline as in the module notes: regions are disjoint per node and
// handed over through acquire-release counters.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T: Copy> Shared<T> {
    fn new(v: Vec<T>) -> Self {
        Self(UnsafeCell::new(v.into_boxed_slice()))
    }
    #[allow(clippy::mut_from_ref)]
    unsafe fn region(&self, start: usize, len: usize) -> &mut [T] {
        // SAFETY: the caller holds the only access to this region (`region`'s contract:
        // disjoint per node, handed over through acquire-release counters).
        let b = unsafe { &mut *self.0.get() };
        &mut b[start..start + len]
    }
    unsafe fn all(&self) -> &[T] {
        // SAFETY: called only once the tree has finished and no thread writes.
        unsafe { &*self.0.get() }
    }
}

/// A small fast generator for inputs known only at run time.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct C64 {
    pub re: f64,
    pub im: f64,
}

impl C64 {
    fn mul(self, o: C64) -> C64 {
        C64 {
            re: self.re * o.re - self.im * o.im,
            im: self.re * o.im + self.im * o.re,
        }
    }
    fn add(self, o: C64) -> C64 {
        C64 {
            re: self.re + o.re,
            im: self.im + o.im,
        }
    }
    fn sub(self, o: C64) -> C64 {
        C64 {
            re: self.re - o.re,
            im: self.im - o.im,
        }
    }
    fn expi(angle: f64) -> C64 {
        C64 {
            re: angle.cos(),
            im: angle.sin(),
        }
    }
}

/// Direct DFT bin `k` of `x`: the reference the FFT is checked against.
pub fn dft_bin(x: &[C64], k: usize) -> C64 {
    let n = x.len();
    let mut acc = C64::default();
    for (j, v) in x.iter().enumerate() {
        let angle = -2.0 * std::f64::consts::PI * ((j * k) % n) as f64 / n as f64;
        acc = acc.add(v.mul(C64::expi(angle)));
    }
    acc
}

/// Recursive decimation-in-time FFT of `n = 2^log2_n` points. Heap numbering: the root
/// is 1, the children of `i` are `2i` (even samples) and `2i + 1` (odd samples). Node
/// `i` at depth `l` (position `p = i - 2^l`) transforms the `n >> l` samples
/// `x[offset + j * 2^l]`, where `offset` is `p` bit-reversed over `l` bits, into
/// `out[p * len .. (p + 1) * len]`. Leaves hold `leaf` points (a direct DFT).
pub struct Fft {
    n: usize,
    levels: u32,
    x: Vec<C64>,
    out: Shared<C64>,
    twiddle: Vec<C64>,
    pending: Vec<AtomicU8>,
}

impl Fft {
    pub fn new(log2_n: u32, leaf: usize, seed: u64) -> Fft {
        let n = 1usize << log2_n;
        let leaf = leaf.clamp(1, n);
        let levels = (n / leaf).trailing_zeros();
        let mut rng = XorShift(seed | 1);
        let x: Vec<C64> = (0..n)
            .map(|_| C64 {
                re: rng.next_f64(),
                im: rng.next_f64(),
            })
            .collect();
        let twiddle = (0..n)
            .map(|k| C64::expi(-2.0 * std::f64::consts::PI * k as f64 / n as f64))
            .collect();
        let nodes = (2usize << levels) - 1;
        Fft {
            n,
            levels,
            x,
            out: Shared::new(vec![C64::default(); n]),
            twiddle,
            pending: (0..=nodes).map(|_| AtomicU8::new(2)).collect(),
        }
    }

    fn depth(id: u32) -> u32 {
        31 - id.leading_zeros()
    }

    fn span(&self, id: u32) -> (usize, usize, usize, usize) {
        let l = Self::depth(id);
        let p = (id - (1 << l)) as usize;
        let offset = if l == 0 {
            0
        } else {
            p.reverse_bits() >> (usize::BITS - l)
        };
        let len = self.n >> l;
        (p * len, len, offset, 1 << l)
    }
}

impl Work for Fft {
    fn root(&self) -> u32 {
        1
    }
    fn nodes(&self) -> usize {
        (2usize << self.levels) - 1
    }
    fn children(&self, id: u32) -> std::ops::Range<u32> {
        if Self::depth(id) < self.levels {
            2 * id..2 * id + 2
        } else {
            0..0
        }
    }
    fn parent(&self, id: u32) -> Option<u32> {
        (id > 1).then_some(id / 2)
    }
    fn leaf(&self, id: u32) {
        let (start, len, offset, stride) = self.span(id);
        // SAFETY: node `id` is the only writer of its span, and this runs once per node per tree.
        let out = unsafe { self.out.region(start, len) };
        let tw_step = self.n / len;
        for (k, o) in out.iter_mut().enumerate() {
            let mut acc = C64::default();
            for j in 0..len {
                let w = (j * k) % len;
                // w_len^w = w_n^(w * n/len).
                let t = self.twiddle[w * tw_step];
                acc = acc.add(self.x[offset + j * stride].mul(t));
            }
            *o = acc;
        }
    }
    fn combine(&self, id: u32) {
        let (start, len, _, _) = self.span(id);
        // SAFETY: node `id` is the only writer of its span, and this runs once per node per tree.
        let out = unsafe { self.out.region(start, len) };
        let half = len / 2;
        let tw_step = self.n / len;
        for k in 0..half {
            let t = self.twiddle[k * tw_step].mul(out[half + k]);
            let e = out[k];
            out[k] = e.add(t);
            out[half + k] = e.sub(t);
        }
    }
    fn child_done(&self, parent: u32) -> bool {
        let c = &self.pending[parent as usize];
        if c.fetch_sub(1, Ordering::AcqRel) == 1 {
            c.store(2, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
    fn check(&self) -> Result<(), WrongResult> {
        // SAFETY: the tree has finished: no worker writes any more.
        let out = unsafe { self.out.all() };
        // Every bin when cheap, else 64 spread bins, each against a direct DFT.
        let bins: Vec<usize> = if self.n <= 1024 {
            (0..self.n).collect()
        } else {
            (0..64).map(|i| (i * 7919) % self.n).collect()
        };
        let scale = (self.n as f64).sqrt();
        for k in bins {
            let want = dft_bin(&self.x, k);
            let err = ((out[k].re - want.re).powi(2) + (out[k].im - want.im).powi(2)).sqrt();
            let limit = 1e-9 * scale.max(1.0) * (self.n as f64).log2().max(1.0);
            if err.is_nan() || err > limit {
                return Err(WrongResult(format!(
                    "FFT bin {k} is {:?}, the direct DFT gives {want:?}",
                    out[k]
                )));
            }
        }
        Ok(())
    }
}

/// Recursive block matrix multiply `C = A B` of `n x n` matrices, `depth` levels of
/// decomposition into quadrants: eight half-size products per node, whose pairs are
/// added by the node's combine step (8^depth leaf tasks). Numbering: the root is 0,
/// the children of `i` are `8i + 1 ..= 8i + 8`; child `c` multiplies A's block
/// `(q / 2, c % 2)` by B's block `(c % 2, q % 2)` for quadrant `q = c / 2` of the
/// node's result. Each node's result is a contiguous `s x s` block of its own.
pub struct MatMul {
    n: usize,
    depth: u32,
    a: Vec<f64>,
    b: Vec<f64>,
    /// Per level, where that level's results start in `res`.
    level_base: Vec<usize>,
    res: Shared<f64>,
    pending: Vec<AtomicU8>,
}

impl MatMul {
    /// `None` when `n` is not divisible by `2^depth`.
    pub fn new(n: usize, depth: u32, seed: u64) -> Option<MatMul> {
        if n == 0 || depth > 8 || !n.is_multiple_of(1 << depth) {
            return None;
        }
        let mut rng = XorShift(seed | 1);
        let a = (0..n * n).map(|_| rng.next_f64()).collect();
        let b = (0..n * n).map(|_| rng.next_f64()).collect();
        let mut level_base = Vec::new();
        let mut total = 0usize;
        for l in 0..=depth {
            level_base.push(total);
            let s = n >> l;
            total += 8usize.pow(l) * s * s;
        }
        let nodes = Self::level_start(depth + 1) as usize;
        Some(MatMul {
            n,
            depth,
            a,
            b,
            level_base,
            res: Shared::new(vec![0.0; total]),
            pending: (0..nodes).map(|_| AtomicU8::new(8)).collect(),
        })
    }

    /// Bytes of result storage `n` and `depth` need: `n^2 (2^(depth+1) - 1)` doubles.
    pub fn result_bytes(n: usize, depth: u32) -> u128 {
        (n as u128).pow(2) * ((2u128 << depth) - 1) * 8
    }

    fn level_start(l: u32) -> u32 {
        (8u32.pow(l) - 1) / 7
    }

    fn level(id: u32) -> u32 {
        let mut l = 0;
        while Self::level_start(l + 1) <= id {
            l += 1;
        }
        l
    }

    /// Level, position in the level, size, and the origins (row, col) of the A and B
    /// blocks the node multiplies.
    fn node(&self, id: u32) -> (u32, usize, usize, (usize, usize), (usize, usize)) {
        let l = Self::level(id);
        let p = (id - Self::level_start(l)) as usize;
        let (mut ar, mut ac, mut br, mut bc) = (0, 0, 0, 0);
        for step in 0..l {
            let digit = (p >> (3 * (l - 1 - step))) & 7;
            let s = self.n >> (step + 1);
            let (q, kk) = (digit / 2, digit % 2);
            ar += (q / 2) * s;
            ac += kk * s;
            br += kk * s;
            bc += (q % 2) * s;
        }
        (l, p, self.n >> l, (ar, ac), (br, bc))
    }

    fn result_start(&self, l: u32, p: usize, s: usize) -> usize {
        self.level_base[l as usize] + p * s * s
    }
}

impl Work for MatMul {
    fn root(&self) -> u32 {
        0
    }
    fn nodes(&self) -> usize {
        Self::level_start(self.depth + 1) as usize
    }
    fn children(&self, id: u32) -> std::ops::Range<u32> {
        if Self::level(id) < self.depth {
            8 * id + 1..8 * id + 9
        } else {
            0..0
        }
    }
    fn parent(&self, id: u32) -> Option<u32> {
        (id > 0).then(|| (id - 1) / 8)
    }
    fn leaf(&self, id: u32) {
        let (l, p, s, (ar, ac), (br, bc)) = self.node(id);
        // SAFETY: node `id` is the only writer of its result block, once per tree.
        let out = unsafe { self.res.region(self.result_start(l, p, s), s * s) };
        let n = self.n;
        for i in 0..s {
            let row = &mut out[i * s..(i + 1) * s];
            row.fill(0.0);
            for k in 0..s {
                let aik = self.a[(ar + i) * n + ac + k];
                let brow = &self.b[(br + k) * n + bc..(br + k) * n + bc + s];
                for (r, bv) in row.iter_mut().zip(brow) {
                    *r += aik * bv;
                }
            }
        }
    }
    fn combine(&self, id: u32) {
        let (l, p, s, _, _) = self.node(id);
        let h = s / 2;
        // SAFETY: node `id` is the only writer of its result block, once per tree.
        let out = unsafe { self.res.region(self.result_start(l, p, s), s * s) };
        let child_base = self.level_base[l as usize + 1];
        for q in 0..4 {
            let c0 = (8 * id + 1 + 2 * q as u32 - Self::level_start(l + 1)) as usize;
            // SAFETY: both children's blocks are complete (their done counters
            // were observed with acquire) and nobody writes them again in this tree.
            let x = unsafe { self.res.region(child_base + c0 * h * h, h * h) };
            // SAFETY: as for x.
            let y = unsafe { self.res.region(child_base + (c0 + 1) * h * h, h * h) };
            let (qi, qj) = (q / 2, q % 2);
            for i in 0..h {
                for j in 0..h {
                    out[(qi * h + i) * s + qj * h + j] = x[i * h + j] + y[i * h + j];
                }
            }
        }
    }
    fn child_done(&self, parent: u32) -> bool {
        let c = &self.pending[parent as usize];
        if c.fetch_sub(1, Ordering::AcqRel) == 1 {
            c.store(8, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
    fn check(&self) -> Result<(), WrongResult> {
        let n = self.n;
        // SAFETY: the tree has finished: no worker writes any more.
        let c = unsafe { &self.res.all()[..n * n] };
        // Every entry when cheap, else 256 spread entries, each against a naive dot
        // product.
        let cells: Vec<usize> = if n <= 128 {
            (0..n * n).collect()
        } else {
            (0..256).map(|i| (i * 104_729) % (n * n)).collect()
        };
        for idx in cells {
            let (i, j) = (idx / n, idx % n);
            let want: f64 = (0..n).map(|k| self.a[i * n + k] * self.b[k * n + j]).sum();
            if (c[idx] - want).abs() > 1e-9 * (n as f64) {
                return Err(WrongResult(format!(
                    "C[{i}][{j}] is {}, the naive product gives {want}",
                    c[idx]
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a tree on this thread, children in order, as one worker would.
    fn run_serial(w: &dyn Work) -> usize {
        let mut stack = vec![w.root()];
        let mut executed = 0;
        while let Some(id) = stack.pop() {
            executed += 1;
            let kids = w.children(id);
            if !kids.is_empty() {
                stack.extend(kids);
                continue;
            }
            w.leaf(id);
            let mut node = id;
            while let Some(p) = w.parent(node) {
                if !w.child_done(p) {
                    break;
                }
                w.combine(p);
                node = p;
            }
        }
        executed
    }

    #[test]
    fn fft_matches_the_direct_dft() {
        for (log2, leaf) in [(0, 1), (1, 1), (4, 1), (6, 4), (8, 256), (10, 1)] {
            let f = Fft::new(log2, leaf, 42);
            assert_eq!(run_serial(&f), f.nodes());
            f.check()
                .unwrap_or_else(|e| panic!("2^{log2} leaf {leaf}: {e}"));
            // Twice: the pending counters re-arm.
            run_serial(&f);
            f.check().unwrap();
        }
    }

    #[test]
    fn fft_check_catches_a_wrong_result() {
        let f = Fft::new(5, 1, 7);
        run_serial(&f);
        // SAFETY: single-threaded test after the tree finished.
        unsafe { f.out.region(3, 1)[0].re += 1e-3 };
        assert!(f.check().unwrap_err().0.contains("bin 3"));
    }

    #[test]
    fn matmul_matches_the_naive_product() {
        for (n, depth) in [(1, 0), (4, 1), (8, 2), (32, 3), (48, 2)] {
            let m = MatMul::new(n, depth, 9).unwrap();
            assert_eq!(run_serial(&m), (8usize.pow(depth + 1) - 1) / 7);
            m.check()
                .unwrap_or_else(|e| panic!("{n} depth {depth}: {e}"));
            run_serial(&m);
            m.check().unwrap();
        }
        assert!(MatMul::new(6, 2, 1).is_none());
        let m = MatMul::new(8, 1, 3).unwrap();
        run_serial(&m);
        // SAFETY: single-threaded test after the tree finished.
        unsafe { m.res.region(9, 1)[0] += 1.0 };
        assert!(m.check().unwrap_err().0.contains("C[1][1]"));
    }
}
