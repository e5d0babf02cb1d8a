//! AIM9's library-routine rows (`*_rtns`): numeric and trigonometric functions, point
//! transformations, linear systems, string manipulations, dynamic and block memory
//! operations and auxiliary loops; operations per second, each result checked.
//!
//! | benchmark | AIM9 row | one operation |
//! |---|---|---|
//! | `aim-num` | num_rtns_1 | one of `sqrt`, `ln`, `exp`, `powf` (four per step, checked: `exp(ln x) = x`, `sqrt(x)^2 = x`) |
//! | `aim-trig` | trig_rtns | one of `sin`, `cos`, `tan`, `atan` (checked: `sin^2 + cos^2 = 1`, `atan(tan x) = x`) |
//! | `aim-matrix` | matrix_rtns | a 3-D point through a 4x4 homogeneous rotation and translation (checked by the inverse) |
//! | `aim-array` | array_rtns | an `n`x`n` linear system solved by Gaussian elimination with partial pivoting (checked against the known solution) |
//! | `aim-string` | string_rtns | build a sentence by concatenation, find a word, compare, upper-case, reverse (results checked) |
//! | `aim-mem-dyn` | mem_rtns_1 | a heap allocation of a size between 16 B and 4 KiB, written, freed |
//! | `aim-mem-block` | mem_rtns_2 | fill, copy and compare of a `block`-byte block |
//! | `aim-misc` | misc_rtns_1 | a table-driven CRC-32 loop over 1 KiB (checked against a bitwise CRC) |
//!
//! AIM9's own routines are not reproduced: each row does the kind of work its name and
//! unit describe, and says here what that is.

use smtlab_model::BenchInfo;

use super::{bad, check, info, param, timed};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample};

smtlab_model::named_enum! {
    enum Kind {
        Num = "aim-num",
        Trig = "aim-trig",
        Matrix = "aim-matrix",
        Array = "aim-array",
        Str = "aim-string",
        MemDyn = "aim-mem-dyn",
        MemBlock = "aim-mem-block",
        Misc = "aim-misc",
    }
}

/// The library-routine rows.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    crate::boxed(Kind::ALL.map(|kind| Rtns { kind }))
}

struct Rtns {
    kind: Kind,
}

impl Benchmark for Rtns {
    fn info(&self) -> BenchInfo {
        let name = self.kind.name();
        let (unit, row, what, params) = match self.kind {
            Kind::Num => (
                "fns/s",
                "num_rtns_1",
                "sqrt, ln, exp and powf on arguments that change every step; numeric \
                 function calls per second, exp(ln x) and sqrt(x)^2 checked against x",
                vec![],
            ),
            Kind::Trig => (
                "fns/s",
                "trig_rtns",
                "sin, cos, tan and atan on angles that change every step; trigonometric \
                 function calls per second, sin^2 + cos^2 = 1 and atan(tan x) = x checked",
                vec![],
            ),
            Kind::Matrix => (
                "points/s",
                "matrix_rtns",
                "a 3-D point transformed by a 4x4 homogeneous matrix (rotation and \
                 translation); point transformations per second, the inverse checked to \
                 bring every point back",
                vec![],
            ),
            Kind::Array => (
                "solves/s",
                "array_rtns",
                "an n x n linear system solved by Gaussian elimination with partial \
                 pivoting; systems per second, the solution checked against the one the \
                 right-hand side was built from",
                vec![param("n", "16", None, "unknowns per system")],
            ),
            Kind::Str => (
                "strings/s",
                "string_rtns",
                "a sentence built by concatenating words, searched for a word, compared, \
                 upper-cased and reversed; manipulations per second, every result checked",
                vec![],
            ),
            Kind::MemDyn => (
                "allocs/s",
                "mem_rtns_1",
                "a heap allocation (sizes cycling from 16 B to 4 KiB), a write to its \
                 first and last byte, and its release; allocations per second, the bytes \
                 read back",
                vec![],
            ),
            Kind::MemBlock => (
                "blocks/s",
                "mem_rtns_2",
                "a `block`-byte block filled, copied to another and compared with it; \
                 block operations per second, the comparison checked",
                vec![param("block", "1KiB", None, "bytes per block")],
            ),
            Kind::Misc => (
                "loops/s",
                "misc_rtns_1",
                "a table-driven CRC-32 over 1 KiB (a loop of loads, shifts, xors and table \
                 lookups); loops per second, the CRC checked against a bitwise one",
                vec![],
            ),
        };
        info(name, unit, row, &format!("AIM9 {row}: {what}."), params)
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let p = ctx.params;
        let mut n = 0;
        let mut block = 0;
        match self.kind {
            Kind::Array => {
                n = p.get_u64_in("n", 2..=512, "2 to 512")? as usize;
            }
            Kind::MemBlock => {
                block = p.get_bytes("block")? as usize;
                if !(1..=(64 << 20)).contains(&block) {
                    return Err(bad("block", p.get_str("block")?, "1 B to 64 MiB"));
                }
            }
            _ => {}
        }
        let data: Vec<u8> = (0..1024u32).map(|i| (i * 7 + 3) as u8).collect();
        Ok(Box::new(RtnsInstance {
            kind: self.kind,
            cpu: ctx.placement.cpu_for_thread(0),
            n,
            a: vec![0.0; n * n],
            b: vec![0.0; n],
            src: vec![0; block],
            dst: vec![0; block],
            crc_table: crc_table(),
            crc_want: crc_bitwise(&data),
            data,
        }))
    }
}

struct RtnsInstance {
    kind: Kind,
    cpu: Option<u32>,
    n: usize,
    a: Vec<f64>,
    b: Vec<f64>,
    src: Vec<u8>,
    dst: Vec<u8>,
    data: Vec<u8>,
    crc_table: [u32; 256],
    crc_want: u32,
}

/// Eight steps of the bitwise CRC-32 (reflected polynomial 0xEDB88320) on `c`.
fn crc_byte(mut c: u32) -> u32 {
    for _ in 0..8 {
        c = if c & 1 == 1 {
            0xEDB8_8320 ^ (c >> 1)
        } else {
            c >> 1
        };
    }
    c
}

fn crc_table() -> [u32; 256] {
    std::array::from_fn(|i| crc_byte(i as u32))
}

/// CRC-32 one bit at a time: the reference for the table-driven loop.
fn crc_bitwise(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |c, &b| crc_byte(c ^ u32::from(b)))
}

/// Rotation about z by `t` and a translation, and its inverse.
fn transform(t: f64, inverse: bool) -> [[f64; 4]; 4] {
    let (s, c) = t.sin_cos();
    let (tx, ty, tz) = (1.5, -2.0, 0.25);
    if inverse {
        // R^T and -R^T t.
        [
            [c, s, 0.0, -(c * tx + s * ty)],
            [-s, c, 0.0, -(-s * tx + c * ty)],
            [0.0, 0.0, 1.0, -tz],
            [0.0, 0.0, 0.0, 1.0],
        ]
    } else {
        [
            [c, -s, 0.0, tx],
            [s, c, 0.0, ty],
            [0.0, 0.0, 1.0, tz],
            [0.0, 0.0, 0.0, 1.0],
        ]
    }
}

fn apply(m: &[[f64; 4]; 4], p: [f64; 3]) -> [f64; 3] {
    let v = [p[0], p[1], p[2], 1.0];
    let row = |r: &[f64; 4]| r[0] * v[0] + r[1] * v[1] + r[2] * v[2] + r[3] * v[3];
    let w = row(&m[3]);
    [row(&m[0]) / w, row(&m[1]) / w, row(&m[2]) / w]
}

/// Solves `a x = b` in place (Gaussian elimination, partial pivoting); `b` becomes `x`.
/// `false` when the matrix is singular.
fn solve(a: &mut [f64], b: &mut [f64], n: usize) -> bool {
    for k in 0..n {
        let piv = (k..n)
            .max_by(|&i, &j| a[i * n + k].abs().total_cmp(&a[j * n + k].abs()))
            .unwrap_or(k);
        if a[piv * n + k] == 0.0 {
            return false;
        }
        if piv != k {
            for j in 0..n {
                a.swap(k * n + j, piv * n + j);
            }
            b.swap(k, piv);
        }
        for i in k + 1..n {
            let f = a[i * n + k] / a[k * n + k];
            for j in k..n {
                a[i * n + j] -= f * a[k * n + j];
            }
            b[i] -= f * b[k];
        }
    }
    for k in (0..n).rev() {
        let mut s = b[k];
        for j in k + 1..n {
            s -= a[k * n + j] * b[j];
        }
        b[k] = s / a[k * n + k];
    }
    true
}

const WORDS: [&str; 8] = [
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs",
];

impl RtnsInstance {
    /// One operation (or step of four function calls); returns the units of work and
    /// the worst error seen, for the rows checked by tolerance.
    fn op(&mut self, i: u64, worst: &mut f64) -> Result<f64, String> {
        match self.kind {
            Kind::Num => {
                let x = std::hint::black_box(0.5 + (i % 1000) as f64 * 0.01);
                let r = x.sqrt();
                let l = x.ln();
                let e = l.exp();
                let p = x.powf(1.5);
                let err = ((r * r - x).abs() + (e - x).abs() + (p - x * r).abs()) / x;
                *worst = worst.max(err);
                Ok(4.0)
            }
            Kind::Trig => {
                let x = std::hint::black_box(-1.5 + (i % 3000) as f64 * 0.001);
                let (s, c) = (x.sin(), x.cos());
                let t = x.tan();
                let a = t.atan();
                *worst = worst.max((s * s + c * c - 1.0).abs() + (a - x).abs());
                Ok(4.0)
            }
            Kind::Matrix => {
                let t = std::hint::black_box((i % 628) as f64 * 0.01);
                let p = [1.0 + (i % 7) as f64, -2.0, 0.5 * (i % 3) as f64];
                let m = transform(t, false);
                let q = apply(&m, p);
                // The check's inverse transform is also a point transformation.
                let back = apply(&transform(t, true), q);
                let err = (0..3).map(|k| (back[k] - p[k]).abs()).sum::<f64>();
                *worst = worst.max(err);
                Ok(2.0)
            }
            Kind::Array => {
                let n = self.n;
                // A diagonally dominant system with solution x_j = j + 1.
                for r in 0..n {
                    let mut sum = 0.0;
                    for c in 0..n {
                        let v = if r == c {
                            (2 * n) as f64 + (i % 5) as f64
                        } else {
                            ((r * 31 + c * 17 + i as usize) % 13) as f64 / 13.0
                        };
                        self.a[r * n + c] = v;
                        sum += v * (c + 1) as f64;
                    }
                    self.b[r] = sum;
                }
                if !solve(&mut self.a, &mut self.b, n) {
                    return Err("a singular system".into());
                }
                let err = (0..n)
                    .map(|j| (self.b[j] - (j + 1) as f64).abs())
                    .fold(0.0, f64::max);
                *worst = worst.max(err / n as f64);
                Ok(1.0)
            }
            Kind::Str => {
                let k = (i % WORDS.len() as u64) as usize;
                let mut s = String::with_capacity(64);
                for j in 0..WORDS.len() {
                    s.push_str(WORDS[(j + k) % WORDS.len()]);
                    s.push(' ');
                }
                let s = std::hint::black_box(s);
                let at = s.find("fox").ok_or("fox not found")?;
                let before: usize = (0..WORDS.len())
                    .map(|j| WORDS[(j + k) % WORDS.len()])
                    .take_while(|w| *w != "fox")
                    .map(|w| w.len() + 1)
                    .sum();
                let upper = s.to_uppercase();
                let rev: String = upper.chars().rev().collect();
                let back: String = rev.chars().rev().collect();
                if at != before
                    || !upper.eq_ignore_ascii_case(&s)
                    || back != upper
                    || s.len() != WORDS.iter().map(|w| w.len() + 1).sum::<usize>()
                {
                    return Err(format!("string results wrong for {s:?}"));
                }
                Ok(1.0)
            }
            Kind::MemDyn => {
                let size = 16usize << (i % 9);
                let mut v: Vec<u8> = Vec::with_capacity(std::hint::black_box(size));
                v.resize(size, 0);
                v[0] = i as u8;
                v[size - 1] = (i >> 8) as u8;
                let v = std::hint::black_box(v);
                if v[0] != i as u8 || v[size - 1] != (i >> 8) as u8 {
                    return Err("an allocation lost what was written".into());
                }
                Ok(1.0)
            }
            Kind::MemBlock => {
                self.src.fill(i as u8);
                self.dst.copy_from_slice(std::hint::black_box(&self.src));
                if std::hint::black_box(&self.dst) != &self.src {
                    return Err("the copied block differs".into());
                }
                Ok(1.0)
            }
            Kind::Misc => {
                let mut c = !0u32;
                for &b in std::hint::black_box(&self.data) {
                    c = self.crc_table[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
                }
                if !c != self.crc_want {
                    return Err(format!(
                        "CRC {:08x}, the bitwise CRC is {:08x}",
                        !c, self.crc_want
                    ));
                }
                Ok(1.0)
            }
        }
    }
}

impl Instance for RtnsInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let name = self.kind.name();
        let mut worst = 0.0f64;
        let s = timed(self.cpu, iterations, |i| {
            self.op(i, &mut worst).map_err(|r| check(name, r))
        })?;
        // Relative errors of a few ulps of f64 pass; a wrong function does not.
        if worst.is_nan() || worst >= 1e-9 {
            return Err(check(name, format!("worst error {worst:e}")));
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;
    use crate::workers::tests::{context, placement, topology};

    #[test]
    fn every_routine_row_runs_and_checks() {
        for b in benchmarks() {
            let params = Params::resolve(&b.info(), &[], true).unwrap();
            let pl = placement(&[0]);
            let topo = topology(None);
            let mut inst = b.prepare(&context(&params, &pl, &topo)).unwrap();
            let s = inst
                .sample(50)
                .unwrap_or_else(|e| panic!("{}: {e}", b.info().name));
            assert!(s.work >= 50.0, "{}", b.info().name);
        }
    }

    #[test]
    fn the_references_are_right() {
        // The CRC-32 of "123456789" is cbf43926.
        assert_eq!(crc_bitwise(b"123456789"), 0xcbf4_3926);
        let (mut a, mut b) = (vec![2.0, 1.0, 1.0, 3.0], vec![3.0, 5.0]);
        assert!(solve(&mut a, &mut b, 2));
        assert!((b[0] - 0.8).abs() < 1e-12 && (b[1] - 1.4).abs() < 1e-12);
        let p = apply(&transform(0.3, false), [1.0, 2.0, 3.0]);
        let q = apply(&transform(0.3, true), p);
        assert!((q[0] - 1.0).abs() < 1e-12 && (q[2] - 3.0).abs() < 1e-12);
    }
}
