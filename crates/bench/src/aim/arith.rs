//! AIM9's arithmetic rows: additions, multiplications and divisions of `double`,
//! `float`, `long`, `int` and `short` operands, in thousands of operations per second
//! as AIM9 counts them. `long` is 64 bits here (LP64 Linux; the paper's 32-bit Linux had
//! 32), `int` 32 and `short` 16.
//!
//! Each sample runs four independent lanes (the operations of one lane depend on each
//! other, the lanes do not), every operand read through `black_box` at the start so the
//! compiler can neither fold constants nor turn divisions into multiplications, and
//! checks the lanes' results by another route:
//!
//! * integer additions: each lane steps a Fibonacci pair `(a, b) -> (b, a + b)`
//!   (wrapping); the result is checked against the closed form by fast doubling;
//! * integer multiplications: `x = x * m` with `m` odd (wrapping); checked against
//!   `x0 * m^n` by square-and-multiply;
//! * integer divisions: `acc += v / d` with `v` counting up through the type's
//!   non-negative values; checked against the closed form of the floor sum;
//! * floating point: each lane adds `d` then `-d`, multiplies by 2 then 0.5, or divides
//!   by 2 then 0.5, all exact, so every lane must end where it started.

use smtlab_model::BenchInfo;

use super::{check, info, timed};
use crate::{BenchContext, BenchError, Benchmark, Instance, sampled};

smtlab_model::named_enum! {
    fn word;
    /// The operation of a row.
    pub enum Op {
        Add = "add",
        Mul = "mul",
        Div = "div",
    }
}

smtlab_model::named_enum! {
    fn word;
    /// The operand type of a row.
    pub enum Ty {
        Double = "double",
        Float = "float",
        Long = "long",
        Int = "int",
        Short = "short",
    }
}

impl Ty {
    fn what(self) -> &'static str {
        match self {
            Ty::Double => "double precision (f64)",
            Ty::Float => "single precision (f32)",
            Ty::Long => "long integer (64-bit)",
            Ty::Int => "integer (32-bit)",
            Ty::Short => "short integer (16-bit)",
        }
    }
}

/// One arithmetic row.
pub struct Arith {
    pub op: Op,
    pub ty: Ty,
}

/// The fifteen arithmetic rows.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    crate::boxed(
        Op::ALL
            .into_iter()
            .flat_map(|op| Ty::ALL.map(|ty| Arith { op, ty })),
    )
}

/// Lanes per sample.
const LANES: usize = 4;

impl Arith {
    fn name(&self) -> String {
        format!("aim-{}-{}", self.op.word(), self.ty.word())
    }
}

impl Benchmark for Arith {
    fn info(&self) -> BenchInfo {
        let row = format!("{}_{}", self.op.word(), self.ty.word());
        let (unit, how) = match (self.op, self.ty) {
            (Op::Add, Ty::Double | Ty::Float) => ("Kadds/s", "adding d then -d"),
            (Op::Add, _) => (
                "Kadds/s",
                "stepping a Fibonacci pair, checked by fast doubling",
            ),
            (Op::Mul, Ty::Double | Ty::Float) => ("Kmuls/s", "multiplying by 2 then 0.5"),
            (Op::Mul, _) => (
                "Kmuls/s",
                "multiplying by an odd factor, checked by powering",
            ),
            (Op::Div, Ty::Double | Ty::Float) => ("Kdivs/s", "dividing by 2 then 0.5"),
            (Op::Div, _) => (
                "Kdivs/s",
                "summing v / d over counting v, checked by the floor sum's closed form",
            ),
        };
        let verb = match self.op {
            Op::Add => "additions",
            Op::Mul => "multiplications",
            Op::Div => "divisions",
        };
        info(
            &self.name(),
            unit,
            &row,
            &format!(
                "AIM9 {row}: {} {verb} in four independent dependent chains ({how}); \
                 thousands of operations per second.",
                self.ty.what()
            ),
            vec![],
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let (name, op, ty) = (self.name(), self.op, self.ty);
        let cpu = ctx.placement.cpu_for_thread(0);
        Ok(sampled(move |iterations| {
            let mut outcome: Result<(), String> = Ok(());
            let s = timed(cpu, 1, |_| {
                let (ops, result) = run(op, ty, iterations);
                outcome = result;
                Ok(ops as f64)
            })?;
            outcome.map_err(|reason| check(&name, reason))?;
            Ok(s)
        }))
    }
}

/// Runs `n` steps of every lane and checks the lanes; returns the operations done.
fn run(op: Op, ty: Ty, n: u64) -> (u64, Result<(), String>) {
    match (op, ty) {
        (Op::Add, Ty::Double) => float_run::<f64>(n, Pair::PlusMinus, |x, c| x + c),
        (Op::Add, Ty::Float) => float_run::<f32>(n, Pair::PlusMinus, |x, c| x + c),
        (Op::Mul, Ty::Double) => float_run::<f64>(n, Pair::TwoHalf, |x, c| x * c),
        (Op::Mul, Ty::Float) => float_run::<f32>(n, Pair::TwoHalf, |x, c| x * c),
        (Op::Div, Ty::Double) => float_run::<f64>(n, Pair::TwoHalf, |x, c| x / c),
        (Op::Div, Ty::Float) => float_run::<f32>(n, Pair::TwoHalf, |x, c| x / c),
        (Op::Add, Ty::Long) => add_i64(n),
        (Op::Add, Ty::Int) => add_i32(n),
        (Op::Add, Ty::Short) => add_i16(n),
        (Op::Mul, Ty::Long) => mul_i64(n),
        (Op::Mul, Ty::Int) => mul_i32(n),
        (Op::Mul, Ty::Short) => mul_i16(n),
        (Op::Div, Ty::Long) => div_i64(n),
        (Op::Div, Ty::Int) => div_i32(n),
        (Op::Div, Ty::Short) => div_i16(n),
    }
}

/// A float type with exact small constants.
trait Float: Copy + PartialEq + std::fmt::Debug {
    fn from_f64(x: f64) -> Self;
}
impl Float for f64 {
    fn from_f64(x: f64) -> f64 {
        x
    }
}
impl Float for f32 {
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
}

/// The two constants a float lane applies in turn: `d` and `-d` (each lane its own
/// `d`), or 2 and 0.5.
#[derive(Clone, Copy)]
enum Pair {
    PlusMinus,
    TwoHalf,
}

/// The operation applied twice per lane per step, with constants whose composition is
/// exact identity, so each lane must end where it started. The constants pass through
/// `black_box`, so no operation is folded or turned into another (a division by a known
/// 2 into a multiplication, say).
fn float_run<T: Float>(n: u64, pair: Pair, op: impl Fn(T, T) -> T) -> (u64, Result<(), String>) {
    let start: [T; LANES] = std::array::from_fn(|j| T::from_f64(1.5 + j as f64));
    let consts = |j: usize| match pair {
        Pair::PlusMinus => (0.25 * (j + 1) as f64, -0.25 * (j + 1) as f64),
        Pair::TwoHalf => (2.0, 0.5),
    };
    let c1: [T; LANES] = std::hint::black_box(std::array::from_fn(|j| T::from_f64(consts(j).0)));
    let c2: [T; LANES] = std::hint::black_box(std::array::from_fn(|j| T::from_f64(consts(j).1)));
    let mut x = std::hint::black_box(start);
    for _ in 0..n {
        for j in 0..LANES {
            x[j] = op(op(x[j], c1[j]), c2[j]);
        }
    }
    let x = std::hint::black_box(x);
    let ok = if x == start {
        Ok(())
    } else {
        Err(format!("lanes ended at {x:?}, started at {start:?}"))
    };
    (n * 2 * LANES as u64, ok)
}

/// Fibonacci numbers `(F(k), F(k+1))` modulo 2^64 by fast doubling.
fn fib_pair(k: u64) -> (u64, u64) {
    if k == 0 {
        return (0, 1);
    }
    let (a, b) = fib_pair(k / 2);
    let c = a.wrapping_mul(b.wrapping_mul(2).wrapping_sub(a));
    let d = a.wrapping_mul(a).wrapping_add(b.wrapping_mul(b));
    if k.is_multiple_of(2) {
        (c, d)
    } else {
        (d, c.wrapping_add(d))
    }
}

/// `x^k` modulo 2^64.
fn pow_mod(mut x: u64, mut k: u64) -> u64 {
    let mut r: u64 = 1;
    while k > 0 {
        if k & 1 == 1 {
            r = r.wrapping_mul(x);
        }
        x = x.wrapping_mul(x);
        k >>= 1;
    }
    r
}

/// `sum_{x=0}^{m-1} floor(x / d)` modulo 2^64 (m, d >= 1, m up to 2^63).
fn floor_prefix(m: u128, d: u128) -> u128 {
    let (q, r) = (m / d, m % d);
    d * q * q.saturating_sub(1) / 2 + r * q
}

/// `sum floor(v / d)` for `n` values of `v` counting up from `v0` through `0..period`
/// (wrapping to 0), modulo 2^64.
fn floor_sum(v0: u128, n: u128, d: u128, period: u128) -> u64 {
    let seg = |a: u128, len: u128| floor_prefix(a + len, d) - floor_prefix(a, d);
    let first = n.min(period - v0);
    let mut total = seg(v0, first);
    let rest = n - first;
    let (cycles, tail) = (rest / period, rest % period);
    total = total.wrapping_add(cycles.wrapping_mul(floor_prefix(period, d)));
    total = total.wrapping_add(seg(0, tail));
    total as u64
}

macro_rules! int_rows {
    ($add:ident, $mul:ident, $div:ident, $t:ty, $u:ty) => {
        fn $add(n: u64) -> (u64, Result<(), String>) {
            let a0: [$t; LANES] = std::array::from_fn(|j| (3 + 2 * j) as $t);
            let b0: [$t; LANES] = std::array::from_fn(|j| (7 + 5 * j) as $t);
            let (mut a, mut b) = std::hint::black_box((a0, b0));
            for _ in 0..n {
                for j in 0..LANES {
                    let t = a[j].wrapping_add(b[j]);
                    a[j] = b[j];
                    b[j] = t;
                }
            }
            let (a, b) = std::hint::black_box((a, b));
            // (a_n, b_n) = (a0 F(n-1) + b0 F(n), a0 F(n) + b0 F(n+1)).
            let (f, f1) = fib_pair(n);
            let fm1 = f1.wrapping_sub(f);
            for j in 0..LANES {
                let (x, y) = (u64::from(a0[j] as $u), u64::from(b0[j] as $u));
                let wa = x.wrapping_mul(fm1).wrapping_add(y.wrapping_mul(f)) as $t;
                let wb = x.wrapping_mul(f).wrapping_add(y.wrapping_mul(f1)) as $t;
                if (a[j], b[j]) != (wa, wb) {
                    return (
                        n * LANES as u64,
                        Err(format!(
                            "lane {j} after {n} steps is ({}, {}), fast doubling says ({wa}, {wb})",
                            a[j], b[j]
                        )),
                    );
                }
            }
            (n * LANES as u64, Ok(()))
        }

        fn $mul(n: u64) -> (u64, Result<(), String>) {
            let x0: [$t; LANES] = std::array::from_fn(|j| (1 + 2 * j) as $t);
            let m: [$t; LANES] = std::hint::black_box(std::array::from_fn(|j| (3 + 4 * j) as $t));
            let mut x = std::hint::black_box(x0);
            for _ in 0..n {
                for j in 0..LANES {
                    x[j] = x[j].wrapping_mul(m[j]);
                }
            }
            let x = std::hint::black_box(x);
            for j in 0..LANES {
                let want = (u64::from(x0[j] as $u)).wrapping_mul(pow_mod(u64::from(m[j] as $u), n)) as $t;
                if x[j] != want {
                    return (
                        n * LANES as u64,
                        Err(format!("lane {j} after {n} steps is {}, powering says {want}", x[j])),
                    );
                }
            }
            (n * LANES as u64, Ok(()))
        }

        fn $div(n: u64) -> (u64, Result<(), String>) {
            let v0: [$t; LANES] = std::array::from_fn(|j| (1000 * j as u64 % <$t>::MAX as u64) as $t);
            let d: [$t; LANES] = std::hint::black_box([3, 5, 7, 11]);
            let mut v = std::hint::black_box(v0);
            let mut acc: [$t; LANES] = [0; LANES];
            for _ in 0..n {
                for j in 0..LANES {
                    acc[j] = acc[j].wrapping_add(v[j] / d[j]);
                    // Counting through the non-negative values: MAX + 1 wraps to MIN,
                    // whose sign bit the mask clears.
                    v[j] = v[j].wrapping_add(1) & <$t>::MAX;
                }
            }
            let acc = std::hint::black_box(acc);
            let period = <$t>::MAX as u128 + 1;
            for j in 0..LANES {
                let want = floor_sum(v0[j] as u128, n as u128, d[j] as u128, period) as $t;
                if acc[j] != want {
                    return (
                        n * LANES as u64,
                        Err(format!(
                            "lane {j}'s quotients sum to {} after {n} steps, the closed form says {want}",
                            acc[j]
                        )),
                    );
                }
            }
            (n * LANES as u64, Ok(()))
        }
    };
}

int_rows!(add_i64, mul_i64, div_i64, i64, u64);
int_rows!(add_i32, mul_i32, div_i32, i32, u32);
int_rows!(add_i16, mul_i16, div_i16, i16, u16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_checks_out_at_small_and_wrapping_sizes() {
        for op in [Op::Add, Op::Mul, Op::Div] {
            for ty in [Ty::Double, Ty::Float, Ty::Long, Ty::Int, Ty::Short] {
                // 70000 steps wrap the 16-bit rows' counters and sums.
                for n in [0, 1, 7, 1000, 70_000] {
                    let (ops, ok) = run(op, ty, n);
                    assert!(ok.is_ok(), "{op:?} {ty:?} n={n}: {ok:?}");
                    assert!(ops >= n * LANES as u64);
                }
            }
        }
    }

    #[test]
    fn the_references_are_right() {
        assert_eq!(fib_pair(10), (55, 89));
        assert_eq!(fib_pair(1), (1, 1));
        assert_eq!(pow_mod(3, 5), 243);
        // floor(x/3) for x = 0..10: 0 0 0 1 1 1 2 2 2 3 -> 12
        assert_eq!(floor_prefix(10, 3), 12);
        // 5,6,7,0,1 with period 8, d = 2: 2+3+3+0+0 = 8
        assert_eq!(floor_sum(5, 5, 2, 8), 8);
    }

    #[test]
    fn the_closed_forms_agree_with_plain_loops() {
        // Fibonacci pairs and powers modulo 2^64 against stepping them.
        let (mut a, mut b) = (0u64, 1u64);
        let mut x = 1u64;
        for k in 0..300u64 {
            assert_eq!(fib_pair(k), (a, b), "F({k})");
            assert_eq!(pow_mod(7, k), x, "7^{k}");
            (a, b) = (b, a.wrapping_add(b));
            x = x.wrapping_mul(7);
        }
        // Floor sums against adding the quotients, wrapping through a small period.
        for (v0, n, d, period) in [
            (0u64, 50u64, 3u64, 16u64),
            (13, 100, 5, 16),
            (7, 1000, 7, 32),
        ] {
            let mut v = v0;
            let mut sum = 0u64;
            for _ in 0..n {
                sum += v / d;
                v = (v + 1) % period;
            }
            assert_eq!(floor_sum(v0.into(), n.into(), d.into(), period.into()), sum);
        }
    }

    #[test]
    fn a_sample_counts_thousands_of_operations() {
        let b = Arith {
            op: Op::Mul,
            ty: Ty::Int,
        };
        let params = crate::Params::resolve(&b.info(), &[], true).unwrap();
        let pl = crate::workers::tests::placement(&[0]);
        let topo = crate::workers::tests::topology(None);
        let mut inst = b
            .prepare(&crate::workers::tests::context(&params, &pl, &topo))
            .unwrap();
        let s = inst.sample(500).unwrap();
        assert_eq!(s.work, 2000.0);
        assert_eq!(b.info().unit.to_string(), "Kmuls/s");
    }
}
