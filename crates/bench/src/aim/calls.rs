//! AIM9's function-call rows: calls of a function taking no argument, one, two and
//! fifteen, in calls per second.
//!
//! The callees are `#[inline(never)]` and read their result through `black_box`, so
//! each call stays a real call; the arguments change with the loop counter, so no call
//! can be hoisted or merged. Every callee returns a value derived from its arguments and
//! the sum over a sample is checked against its closed form.

use smtlab_model::BenchInfo;

use super::{check, info, timed};
use crate::{BenchContext, BenchError, Benchmark, Instance, sampled};

/// One function-call row: the number of arguments.
pub struct Calls {
    pub args: u32,
}

/// The four function-call rows.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    crate::boxed([0, 1, 2, 15].map(|args| Calls { args }))
}

impl Calls {
    fn name(&self) -> String {
        match self.args {
            0 => "aim-fun-cal".into(),
            n => format!("aim-fun-cal{n}"),
        }
    }
}

impl Benchmark for Calls {
    fn info(&self) -> BenchInfo {
        let row = match self.args {
            0 => "fun_cal".to_string(),
            n => format!("fun_cal{n}"),
        };
        let what = match self.args {
            0 => "no arguments".to_string(),
            1 => "1 argument".to_string(),
            n => format!("{n} arguments"),
        };
        info(
            &self.name(),
            "calls/s",
            &row,
            &format!(
                "AIM9 {row}: calls of a function that is never inlined, taking {what}; \
                 calls per second, the sum of what the calls returned checked."
            ),
            vec![],
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let (name, args) = (self.name(), self.args);
        let cpu = ctx.placement.cpu_for_thread(0);
        Ok(sampled(move |iterations| {
            let (hidden, mut got) = (std::hint::black_box(args), 0);
            let s = timed(cpu, 1, |_| {
                got = calls(hidden, iterations);
                Ok(iterations as f64)
            })?;
            let want = expected(args, iterations);
            if got != want {
                return Err(check(
                    &name,
                    format!("{iterations} calls returned {got} in all, expected {want}"),
                ));
            }
            Ok(s)
        }))
    }
}

#[inline(never)]
fn f0() -> u64 {
    std::hint::black_box(1)
}

#[inline(never)]
fn f1(a: u64) -> u64 {
    std::hint::black_box(a)
}

#[inline(never)]
fn f2(a: u64, b: u64) -> u64 {
    std::hint::black_box(a.wrapping_add(b))
}

#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn f15(
    a: u64,
    b: u64,
    c: u64,
    d: u64,
    e: u64,
    f: u64,
    g: u64,
    h: u64,
    i: u64,
    j: u64,
    k: u64,
    l: u64,
    m: u64,
    n: u64,
    o: u64,
) -> u64 {
    std::hint::black_box(
        a.wrapping_add(b ^ c)
            .wrapping_add(d ^ e)
            .wrapping_add(f ^ g)
            .wrapping_add(h ^ i)
            .wrapping_add(j ^ k)
            .wrapping_add(l ^ m)
            .wrapping_add(n ^ o),
    )
}

/// Runs `n` calls with `args` arguments; returns the sum of the results.
fn calls(args: u32, n: u64) -> u64 {
    let mut sum: u64 = 0;
    for i in 0..n {
        let r = match args {
            0 => f0(),
            1 => f1(i),
            2 => f2(i, 1),
            // b^c .. n^o pair i with i: each pair is 0.
            _ => f15(i, i, i, i, i, i, i, i, i, i, i, i, i, i, i),
        };
        sum = sum.wrapping_add(r);
    }
    std::hint::black_box(sum)
}

/// What [`calls`] must return.
fn expected(args: u32, n: u64) -> u64 {
    let triangle = if n == 0 { 0 } else { n * (n - 1) / 2 };
    match args {
        0 => n,
        1 => triangle,
        2 => triangle + n,
        _ => triangle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_calls_and_checks() {
        for args in [0, 1, 2, 15] {
            for n in [0, 1, 10, 12345] {
                assert_eq!(calls(args, n), expected(args, n), "{args} args, n={n}");
            }
        }
        let b = Calls { args: 15 };
        let params = crate::Params::resolve(&b.info(), &[], true).unwrap();
        let pl = crate::workers::tests::placement(&[0]);
        let topo = crate::workers::tests::topology(None);
        let mut inst = b
            .prepare(&crate::workers::tests::context(&params, &pl, &topo))
            .unwrap();
        assert_eq!(inst.sample(1000).unwrap().work, 1000.0);
        assert_eq!(b.info().name, "aim-fun-cal15");
    }
}
