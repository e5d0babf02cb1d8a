//! `frontend`: pressure on the instruction-supply side of a core, the part an SMT sibling
//! shares that neither the arithmetic chains nor the memory kernels touch.
//!
//! The binary holds [`FUNCTIONS`] distinct small functions (one generic function made
//! distinct by a constant, so each is its own machine code). Each worker thread walks a
//! private, seed-shuffled order of `funcs` of them, calling each through a table, with
//! the value passed from call to call. So every call is:
//!
//! * an indirect call whose target changes every time (the indirect-branch predictor and
//!   the branch target buffer hold `funcs` targets),
//! * into code that is elsewhere in the binary (`funcs` functions of about 100 bytes:
//!   1024 of them are several times a typical 32 KiB L1 instruction cache and the
//!   decoded-micro-op cache),
//! * with a branch on the running value inside, taken or not at random.
//!
//! One iteration is one walk of `funcs` calls; the value is calls per second. The code
//! bytes the walk spans (from the lowest to the highest function address it uses, plus
//! one function) are reported as `code_bytes`, so the footprint is measured, not assumed,
//! beside the L1 instruction cache's size as `l1i_bytes` where the topology gives it.
//!
//! The result is checked after every sample: the last walk is recomputed with the same
//! formula evaluated with the constant as a run-time value, so a walk that skipped a call
//! or a function compiled to something else would show.

use std::hint::black_box;

use smtlab_model::metrics::frontend::{CODE_BYTES, L1I_BYTES};
use smtlab_model::{BenchInfo, CacheType, Direction, ParamInfo, ValueKind};

use super::kernel::splitmix64;
use crate::workers::{WorkerPool, WorkerState, WrongResult, threads_param};
use crate::{BenchContext, BenchError, Benchmark, Instance, Suite, sampled};

/// Distinct functions in the binary, the most one walk can call.
pub const FUNCTIONS: usize = 1024;

const NAME: &str = "frontend";

/// The formula every function computes, with `k` its constant. Four dependent rounds of
/// multiply, rotate and xor, then a branch on the value: taken or not at random.
#[inline(always)]
fn formula(k: u64, x: u64) -> u64 {
    let m = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut y = x;
    for round in 0..4u32 {
        y = (y ^ k)
            .wrapping_mul(m)
            .rotate_left(((k as u32) + round * 7) % 63 + 1);
    }
    if y & 1 == 0 {
        y ^ (k << 17)
    } else {
        y.wrapping_add(k.wrapping_mul(0xBF58_476D_1CE4_E5B9))
    }
}

/// One function of the table: `formula` with its constant compiled in.
#[inline(never)]
fn step<const K: u64>(x: u64) -> u64 {
    formula(K, x)
}

type Step = fn(u64) -> u64;

/// 256 functions of the table from `$b`: sixteen rows of sixteen `step::<{ $b + i }>`.
macro_rules! steps256 {
    ($b:expr) => {
        steps256!(@rows $b; 0 16 32 48 64 80 96 112 128 144 160 176 192 208 224 240)
    };
    (@rows $b:expr; $($r:literal)*) => {
        [$(steps256!(@row $b + $r; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)),*]
    };
    (@row $b:expr; $($i:literal)*) => {
        [$(step::<{ $b + $i }>),*]
    };
}

/// Function `k` of the table computes `formula(k, x)`.
static TABLE: [[[Step; 16]; 16]; 4] =
    [steps256!(0), steps256!(256), steps256!(512), steps256!(768)];

fn table() -> &'static [Step] {
    TABLE.as_flattened().as_flattened()
}

/// The `frontend` benchmark.
pub struct Frontend;

fn params() -> Vec<ParamInfo> {
    vec![
        crate::params::declare(
            "funcs",
            "1024",
            None,
            "distinct functions one walk calls, 1 to 1024 (the instruction footprint and \
             the number of indirect-call targets)",
        ),
        crate::workers::threads_info(),
        crate::params::declare(
            "seed",
            "1",
            None,
            "seed of each thread's call order and starting value",
        ),
    ]
}

impl Benchmark for Frontend {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "compute".into(),
            unit: "Mcalls/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1e6 },
            description: "Instruction supply: each thread calls `funcs` distinct functions \
                          (about 100 bytes of code each) through a table in a shuffled \
                          order, a random branch inside each; 10^6 calls per second"
                .into(),
            origin: "smtlab (the frontend ruler of predict)".into(),
            params: params(),
            main_param: Some("funcs".into()),
            report: Default::default(),
        }
    }

    /// Only in `full`: it stresses a resource the papers do not measure, and `predict`
    /// uses it as a ruler.
    fn in_suite(&self, suite: Suite) -> bool {
        suite == Suite::Full
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let threads = threads_param(NAME, ctx)?;
        let funcs = ctx
            .params
            .get_u64_in("funcs", 1..=FUNCTIONS as u64, "1 to 1024 functions")?
            as usize;
        let seed = ctx.params.get_u64("seed")?;
        let mut pool = WorkerPool::start(NAME, ctx.placement, Some(threads), move |i| {
            Ok(Walker::new(funcs, seed, i))
        })?;
        let cpu = ctx.placement.cpus.first().copied();
        let l1i = ctx.topology.caches.iter().find(|c| {
            c.level == 1
                && c.cache_type == CacheType::Instruction
                && cpu.is_some_and(|cpu| c.cpus.contains(cpu))
        });
        let code_bytes = code_span(&Walker::new(funcs, seed, 0).order) as f64;
        let l1i_bytes = l1i.and_then(|c| c.size_bytes).map(|b| b as f64);
        Ok(sampled(move |walks| {
            let mut s = pool.run(walks)?;
            s.metrics.insert(CODE_BYTES.into(), code_bytes);
            if let Some(b) = l1i_bytes {
                s.metrics.insert(L1I_BYTES.into(), b);
            }
            Ok(s)
        }))
    }
}

/// The bytes of code a walk over `order` spans: lowest to highest function address,
/// plus the mean spacing of one function.
fn code_span(order: &[u16]) -> u64 {
    let addrs: Vec<u64> = order
        .iter()
        .map(|&k| table()[k as usize] as usize as u64)
        .collect();
    let (lo, hi) = (addrs.iter().min(), addrs.iter().max());
    match (lo, hi) {
        (Some(&lo), Some(&hi)) if addrs.len() > 1 => {
            let span = hi - lo;
            span + span / (addrs.len() as u64 - 1)
        }
        _ => 0,
    }
}

/// One thread's walk: its call order, its running value and the value before and after
/// the last walk (for the check).
struct Walker {
    order: Vec<u16>,
    value: u64,
    before_last: u64,
}

impl Walker {
    /// `funcs` of the table's functions in an order shuffled by `seed` and `thread`.
    fn new(funcs: usize, seed: u64, thread: usize) -> Walker {
        let mut state = seed ^ (thread as u64).wrapping_mul(0xD605_BBB5_8C8A_BDE5);
        let mut all: Vec<u16> = (0..FUNCTIONS as u16).collect();
        for i in (1..all.len()).rev() {
            let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
            all.swap(i, j);
        }
        all.truncate(funcs);
        Walker {
            order: all,
            value: splitmix64(&mut state),
            before_last: 0,
        }
    }
}

/// One walk over `order` from `x`, through the table.
#[inline(never)]
fn walk(order: &[u16], mut x: u64) -> u64 {
    let table = black_box(table());
    for &k in order {
        x = table[k as usize](x);
    }
    x
}

impl WorkerState for Walker {
    fn run(&mut self, walks: u64) -> f64 {
        for _ in 0..walks {
            self.before_last = self.value;
            self.value = walk(&self.order, black_box(self.value));
        }
        (walks * self.order.len() as u64) as f64
    }

    fn check(&mut self, walks: u64) -> Result<(), WrongResult> {
        if walks == 0 {
            return Ok(());
        }
        let want = self
            .order
            .iter()
            .fold(self.before_last, |x, &k| formula(k as u64, x));
        if want == self.value {
            Ok(())
        } else {
            Err(format!(
                "the last walk of {} calls gave {:#x}, the formula says {want:#x}",
                self.order.len(),
                self.value
            )
            .into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_a_rate_of_calls_measured_in_the_full_suite_only() {
        let i = Frontend.info();
        assert_eq!(
            (i.unit.to_string().as_str(), i.direction),
            ("Mcalls/s", Direction::Higher)
        );
        assert_eq!(i.value_kind, ValueKind::Rate { scale: 1e6 });
        assert!(
            i.params
                .iter()
                .any(|p| p.name == "funcs" && p.default == "1024")
        );
        assert!(Frontend.in_suite(Suite::Full));
        assert!(!Frontend.in_suite(Suite::Quick) && !Frontend.in_suite(Suite::Default));
    }

    #[test]
    fn every_function_of_the_table_computes_the_formula_with_its_own_constant() {
        for (k, f) in table().iter().enumerate() {
            for x in [0, 1, 0xDEAD_BEEF, u64::MAX] {
                assert_eq!(f(x), formula(k as u64, x), "function {k} at {x:#x}");
            }
        }
    }

    #[test]
    fn the_functions_are_distinct_code_and_a_walk_of_all_spans_kilobytes() {
        let mut addrs: Vec<usize> = table().iter().map(|f| *f as usize).collect();
        addrs.sort_unstable();
        addrs.dedup();
        assert_eq!(addrs.len(), FUNCTIONS, "functions merged into one");
        let all = Walker::new(FUNCTIONS, 1, 0);
        let few = Walker::new(16, 1, 0);
        assert!(
            code_span(&all.order) >= 32 * 1024,
            "{}",
            code_span(&all.order)
        );
        assert!(code_span(&few.order) <= code_span(&all.order));
    }

    #[test]
    fn a_walk_is_a_shuffled_subset_different_per_thread_and_the_check_holds() {
        let a = Walker::new(64, 7, 0);
        let b = Walker::new(64, 7, 1);
        assert_eq!(a.order.len(), 64);
        assert_ne!(a.order, b.order);
        let mut sorted = a.order.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 64, "a function called twice in one walk");
        let mut w = a;
        let done = w.run(3);
        assert_eq!(done, 192.0);
        w.check(3).unwrap();
        w.value ^= 1;
        assert!(w.check(3).is_err(), "a wrong value passed the check");
    }
}
