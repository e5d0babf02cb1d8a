//! The paper 002 arithmetic kernel and an independent closed-form reference for it.
//!
//! A thread holds 128 input elements `(x, y)` and four multipliers `m0..m3`. For every
//! element it runs 8 operations, each on the result of the previous one:
//!
//! ```text
//! r = ((((((r + x) * m0 - y) * m1 + x) * m2 - y) * m3      2 add, 2 sub, 4 mul
//! ```
//!
//! One *pass* is 128 elements, 1024 operations; an iteration of the benchmark is a pass.
//! Nothing in the chain can be computed ahead: each operation needs the previous result,
//! so a thread runs at the latency of its operations and the SMT sibling finds idle
//! execution ports (the effect paper 002 measures).
//!
//! ## Why the compiler cannot fold it, and how we would notice
//!
//! * Inputs and multipliers are derived at run time from a seed parameter and the thread
//!   index, and reach the kernel through `black_box`; the kernel is `#[inline(never)]`.
//!   Integer `(r + x) * m` is rewritten to `r*m + x*m` (taking work off the chain) only for
//!   constant operands, and floating-point arithmetic is never reassociated without
//!   fast-math, which Rust does not have.
//! * The result goes through `black_box` and is checked after every sample against a
//!   closed form that does not run the loop: each element is an affine map
//!   `r -> M*r + c` (mod 2^64 for integers), a pass is their composition and `n` passes its
//!   `n`th power by repeated squaring. A kernel that skipped or merged operations would get
//!   a different value.
//! * The floating-point inputs are chosen so the arithmetic is exact: multipliers
//!   2, 1/2, 4, 1/4 (product exactly 1, so values neither grow geometrically nor decay to
//!   denormals), integer `x` and `y` a multiple of 4. A pass then adds an exact non-zero
//!   integer `C` to `r`, and `r0 + n*C` is the bit-exact expected result; skipping even one
//!   pass shows. The multiplier values are unknown to the compiler, so `* 2.0` cannot
//!   become `r + r`.

use std::hint::black_box;

/// Elements in a thread's input.
pub const ELEMENTS: usize = 128;
/// Dependent operations per element: 2 add, 2 sub, 4 mul.
pub const OPS_PER_ELEMENT: u64 = 8;
/// Operations per pass (one benchmark iteration).
pub const OPS_PER_PASS: u64 = OPS_PER_ELEMENT * ELEMENTS as u64;

/// A SplitMix64 step: a tiny, well-mixed generator, so inputs depend on the seed without
/// pulling in a random-number crate.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn generator(seed: u64, thread: usize) -> u64 {
    let mut s = seed ^ (thread as u64).wrapping_mul(0xD605_BBB5_8C8A_BDE5);
    splitmix64(&mut s)
}

/// Input of the integer kernel (wrapping `u64`).
#[derive(Debug, Clone, PartialEq)]
pub struct IntInput {
    pub xy: [[u64; 2]; ELEMENTS],
    pub m: [u64; 4],
    pub r0: u64,
}

/// Input of the floating-point kernel (`f64`).
#[derive(Debug, Clone, PartialEq)]
pub struct FpInput {
    pub xy: [[f64; 2]; ELEMENTS],
    pub m: [f64; 4],
    pub r0: f64,
}

impl IntInput {
    pub fn new(seed: u64, thread: usize) -> Self {
        let mut g = generator(seed, thread);
        let mut xy = [[0; 2]; ELEMENTS];
        for e in &mut xy {
            *e = [splitmix64(&mut g), splitmix64(&mut g)];
        }
        // Odd multipliers are invertible mod 2^64, so no information is lost and the
        // chain cannot collapse to zero.
        let m = [(); 4].map(|_| splitmix64(&mut g) | 1);
        Self {
            xy,
            m,
            r0: splitmix64(&mut g),
        }
    }

    /// The value [`int_chain`] must return after `passes` passes, computed without the loop.
    pub fn expected(&self, passes: u64) -> u64 {
        let [m0, m1, m2, m3] = self.m;
        let big_m = m0.wrapping_mul(m1).wrapping_mul(m2).wrapping_mul(m3);
        let mut pass = Affine::IDENTITY;
        for &[x, y] in &self.xy {
            // r' = M r + M x - m1 m2 m3 y + m2 m3 x - m3 y
            let c = big_m
                .wrapping_mul(x)
                .wrapping_sub(m1.wrapping_mul(m2).wrapping_mul(m3).wrapping_mul(y))
                .wrapping_add(m2.wrapping_mul(m3).wrapping_mul(x))
                .wrapping_sub(m3.wrapping_mul(y));
            pass = Affine { a: big_m, b: c }.after(pass);
        }
        pass.pow(passes).apply(self.r0)
    }
}

impl FpInput {
    pub fn new(seed: u64, thread: usize) -> Self {
        let mut g = generator(seed, thread);
        let mut xy = [[0.0; 2]; ELEMENTS];
        let mut c = 0i64;
        for e in &mut xy {
            let x = 1 + (splitmix64(&mut g) % 64) as i64;
            let k = 1 + (splitmix64(&mut g) % 43) as i64;
            *e = [x as f64, (4 * k) as f64];
            c += 2 * x - 3 * k;
        }
        if c == 0 {
            // A pass must change r, or skipped passes would go unnoticed.
            xy[0][0] += 1.0;
        }
        Self {
            xy,
            m: [2.0, 0.5, 4.0, 0.25],
            r0: (splitmix64(&mut g) % 1024) as f64,
        }
    }

    /// What one pass adds to `r` (exact: see the module notes).
    pub fn pass_increment(&self) -> f64 {
        let [m0, m1, m2, m3] = self.m;
        self.xy
            .iter()
            .map(|&[x, y]| m3 * m2 * m1 * m0 * x - m3 * m2 * m1 * y + m3 * m2 * x - m3 * y)
            .sum()
    }

    /// Passes one sample may run and still be checked exactly: intermediates stay below
    /// 2^53 while `|r| <= 2^46`.
    pub fn max_passes(&self) -> u64 {
        let c = self.pass_increment().abs().max(1.0);
        ((1u64 << 46) as f64 / c) as u64
    }

    /// The value [`fp_chain`] must return after `passes` passes, or `None` when so many
    /// passes would leave exact arithmetic.
    pub fn expected(&self, passes: u64) -> Option<f64> {
        let [m0, m1, m2, m3] = self.m;
        if m0 * m1 * m2 * m3 != 1.0 || passes > self.max_passes() {
            return None;
        }
        Some(self.r0 + passes as f64 * self.pass_increment())
    }
}

/// `r -> a*r + b` over wrapping `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Affine {
    a: u64,
    b: u64,
}

impl Affine {
    const IDENTITY: Affine = Affine { a: 1, b: 0 };

    fn apply(self, r: u64) -> u64 {
        self.a.wrapping_mul(r).wrapping_add(self.b)
    }

    /// `self` applied after `first`.
    fn after(self, first: Affine) -> Affine {
        Affine {
            a: self.a.wrapping_mul(first.a),
            b: self.a.wrapping_mul(first.b).wrapping_add(self.b),
        }
    }

    fn pow(self, mut n: u64) -> Affine {
        let mut result = Affine::IDENTITY;
        let mut base = self;
        while n > 0 {
            if n & 1 == 1 {
                result = base.after(result);
            }
            base = base.after(base);
            n >>= 1;
        }
        result
    }
}

/// The integer chain: `passes` passes over the input from `r0`.
#[inline(never)]
pub fn int_chain(input: &IntInput, r0: u64, passes: u64) -> u64 {
    let [m0, m1, m2, m3] = input.m;
    let mut r = r0;
    for _ in 0..passes {
        for &[x, y] in &input.xy {
            r = r
                .wrapping_add(x)
                .wrapping_mul(m0)
                .wrapping_sub(y)
                .wrapping_mul(m1)
                .wrapping_add(x)
                .wrapping_mul(m2)
                .wrapping_sub(y)
                .wrapping_mul(m3);
        }
    }
    r
}

/// The floating-point chain: `passes` passes over the input from `r0`.
#[inline(never)]
pub fn fp_chain(input: &FpInput, r0: f64, passes: u64) -> f64 {
    let [m0, m1, m2, m3] = input.m;
    let mut r = r0;
    for _ in 0..passes {
        for &[x, y] in &input.xy {
            let a = (r + x) * m0;
            let b = (a - y) * m1;
            let c = (b + x) * m2;
            r = (c - y) * m3;
        }
    }
    r
}

/// Runs the integer chain with every input hidden from the optimiser.
pub fn run_int(input: &IntInput, passes: u64) -> u64 {
    black_box(int_chain(
        black_box(input),
        black_box(input.r0),
        black_box(passes),
    ))
}

/// Runs the floating-point chain with every input hidden from the optimiser.
pub fn run_fp(input: &FpInput, passes: u64) -> f64 {
    black_box(fp_chain(
        black_box(input),
        black_box(input.r0),
        black_box(passes),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loop, step by step, one operation at a time: the reference of the reference.
    fn int_by_hand(input: &IntInput, passes: u64) -> u64 {
        let mut r = input.r0;
        for _ in 0..passes {
            for &[x, y] in &input.xy {
                let ops: [(char, u64); 8] = [
                    ('+', x),
                    ('*', input.m[0]),
                    ('-', y),
                    ('*', input.m[1]),
                    ('+', x),
                    ('*', input.m[2]),
                    ('-', y),
                    ('*', input.m[3]),
                ];
                for (op, v) in ops {
                    r = match op {
                        '+' => r.wrapping_add(v),
                        '-' => r.wrapping_sub(v),
                        _ => r.wrapping_mul(v),
                    };
                }
            }
        }
        r
    }

    #[test]
    fn integer_closed_form_matches_the_loop() {
        for (seed, thread) in [(1, 0), (1, 1), (42, 7)] {
            let input = IntInput::new(seed, thread);
            for passes in [0, 1, 2, 3, 17, 100] {
                let want = input.expected(passes);
                assert_eq!(int_by_hand(&input, passes), want, "passes {passes}");
                assert_eq!(run_int(&input, passes), want, "passes {passes}");
            }
        }
    }

    #[test]
    fn integer_results_depend_on_the_pass_count() {
        let input = IntInput::new(1, 0);
        let r: Vec<u64> = (0..50).map(|n| input.expected(n)).collect();
        let mut dedup = r.clone();
        dedup.sort_unstable();
        dedup.dedup();
        assert_eq!(dedup.len(), r.len());
    }

    #[test]
    fn fp_closed_form_is_exact_and_counts_passes() {
        for (seed, thread) in [(1, 0), (1, 1), (9, 3)] {
            let input = FpInput::new(seed, thread);
            assert_ne!(input.pass_increment(), 0.0);
            for passes in [0, 1, 2, 5, 333] {
                let want = input.expected(passes).unwrap();
                assert_eq!(run_fp(&input, passes), want, "passes {passes}");
            }
            assert!(input.expected(input.max_passes() + 1).is_none());
        }
    }

    #[test]
    fn inputs_differ_by_thread_and_seed() {
        assert_ne!(IntInput::new(1, 0), IntInput::new(1, 1));
        assert_ne!(IntInput::new(1, 0), IntInput::new(2, 0));
        assert_ne!(FpInput::new(1, 0).xy, FpInput::new(1, 1).xy);
    }

    #[test]
    fn affine_power_is_repeated_composition() {
        let f = Affine { a: 3, b: 5 };
        let mut g = Affine::IDENTITY;
        for n in 0..20u64 {
            assert_eq!(f.pow(n), g, "n={n}");
            g = f.after(g);
        }
    }
}
