//! AIM9's computing rows and its shell row: sieve, sort, series, memory copy, shell
//! scripts. Each is a small kernel whose result is checked after the sample.

use std::process::{Command, Stdio};

use smtlab_model::BenchInfo;

use super::{bad, check, info, io, param, timed};
use crate::{BenchContext, BenchError, Benchmark, Instance, sampled};

/// The computing rows.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    let shell = |name, row| -> Box<dyn Benchmark> { Box::new(Shell { name, row }) };
    vec![
        shell("aim-shell", "shell_rtns_1"),
        shell("aim-shell-2", "shell_rtns_2"),
        shell("aim-shell-3", "shell_rtns_3"),
        Box::new(Sieve),
        Box::new(Sort),
        Box::new(Series),
        Box::new(RamCopy),
    ]
}

/// Primes up to `limit` by trial division: the sieve's reference.
fn primes_by_division(limit: u64) -> u64 {
    (2..=limit)
        .filter(|&n| (2..).take_while(|d| d * d <= n).all(|d| n % d != 0))
        .count() as u64
}

/// `aim-sieve`.
pub struct Sieve;

impl Benchmark for Sieve {
    fn info(&self) -> BenchInfo {
        info(
            "aim-sieve",
            "sieves/s",
            "sieve",
            "AIM9 sieve: a sieve of Eratosthenes over `limit` integers; sieves per second, \
             the prime count checked against trial division.",
            vec![param("limit", "100000", Some("20000"), "integers sieved")],
        )
    }
    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let limit = ctx
            .params
            .get_u64_in("limit", 2..=100_000_000, "2 to 100000000")?;
        let (cpu, want) = (ctx.placement.cpu_for_thread(0), primes_by_division(limit));
        let limit = limit as usize;
        let mut flags = vec![true; limit + 1];
        Ok(sampled(move |iterations| {
            let limit = std::hint::black_box(limit);
            let mut count = 0;
            let s = timed(cpu, iterations, |_| {
                flags.fill(true);
                let mut i = 2;
                while i * i <= limit {
                    if flags[i] {
                        let mut j = i * i;
                        while j <= limit {
                            flags[j] = false;
                            j += i;
                        }
                    }
                    i += 1;
                }
                count = flags[2..=limit].iter().filter(|&&f| f).count() as u64;
                Ok(1.0)
            })?;
            if count != want {
                return Err(check(
                    "aim-sieve",
                    format!("{count} primes up to {limit}, trial division finds {want}"),
                ));
            }
            Ok(s)
        }))
    }
}

/// `aim-sort`.
pub struct Sort;

impl Benchmark for Sort {
    fn info(&self) -> BenchInfo {
        info(
            "aim-sort",
            "sorts/s",
            "sort_rtns_1",
            "AIM9 sort_rtns_1: sort a fresh copy of `n` random 64-bit integers; sorts per \
             second, the result checked sorted and with the input's sum.",
            vec![param("n", "10000", Some("2000"), "integers per sort")],
        )
    }
    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let n = ctx
            .params
            .get_u64_in("n", 1..=100_000_000, "1 to 100000000")?;
        let mut r = crate::clock::now_ns() | 1;
        let input: Vec<u64> = (0..n)
            .map(|_| {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                r
            })
            .collect();
        let sum = input.iter().fold(0u64, |a, &b| a.wrapping_add(b));
        let (cpu, mut work) = (ctx.placement.cpu_for_thread(0), input.clone());
        Ok(sampled(move |iterations| {
            let s = timed(cpu, iterations, |_| {
                work.copy_from_slice(&input);
                work.sort_unstable();
                Ok(1.0)
            })?;
            let sorted = work.windows(2).all(|w| w[0] <= w[1]);
            if !sorted || work.iter().fold(0u64, |a, &b| a.wrapping_add(b)) != sum {
                return Err(check(
                    "aim-sort",
                    "the sorted array is out of order or lost values",
                ));
            }
            Ok(s)
        }))
    }
}

/// `aim-series`.
pub struct Series;

impl Benchmark for Series {
    fn info(&self) -> BenchInfo {
        info(
            "aim-series",
            "series/s",
            "series_1",
            "AIM9 series_1: sum the Taylor series of exp(x) term by term until a term no \
             longer changes the sum, for x stepping over [-2, 2]; evaluations per second, \
             each checked against exp.",
            vec![],
        )
    }
    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let cpu = ctx.placement.cpu_for_thread(0);
        Ok(sampled(move |iterations| {
            let mut worst = 0.0f64;
            let mut at = 0.0;
            let s = timed(cpu, iterations, |i| {
                let x = std::hint::black_box(-2.0 + (i % 4001) as f64 / 1000.0);
                let v = exp_series(x);
                let err = ((v - x.exp()) / x.exp()).abs();
                if err > worst {
                    worst = err;
                    at = x;
                }
                Ok(1.0)
            })?;
            if worst > 1e-13 {
                return Err(check(
                    "aim-series",
                    format!("exp({at}) by series is off by {worst:e} (relative)"),
                ));
            }
            Ok(s)
        }))
    }
}

fn exp_series(x: f64) -> f64 {
    let (mut sum, mut term, mut k) = (1.0f64, 1.0f64, 1.0f64);
    loop {
        term *= x / k;
        let next = sum + term;
        if next == sum {
            return sum;
        }
        sum = next;
        k += 1.0;
    }
}

/// `aim-ram-copy`.
pub struct RamCopy;

impl Benchmark for RamCopy {
    fn info(&self) -> BenchInfo {
        info(
            "aim-ram-copy",
            "GB/s",
            "ram_copy",
            "AIM9 ram_copy: copy a `size` block to another block (cache-resident at the \
             default size, unlike mem-copy); bytes copied per second, the copy checked.",
            vec![param("size", "64KiB", None, "bytes per copy")],
        )
    }
    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let size = ctx.params.get_bytes("size")?;
        if !(8..=(1 << 30)).contains(&size) {
            return Err(bad("size", ctx.params.get_str("size")?, "8 B to 1 GiB"));
        }
        let mut src: Vec<u8> = (0..size).map(|i| (i * 31 + 7) as u8).collect();
        let (cpu, mut dst) = (ctx.placement.cpu_for_thread(0), vec![0; size as usize]);
        Ok(sampled(move |iterations| {
            let n = src.len();
            let s = timed(cpu, iterations, |i| {
                // A byte that changes every copy, so no copy can be skipped.
                src[0] = i as u8;
                dst.copy_from_slice(std::hint::black_box(&src[..]));
                std::hint::black_box(&dst[..]);
                Ok(n as f64)
            })?;
            if dst != src {
                return Err(check("aim-ram-copy", "the copy differs from its source"));
            }
            Ok(s)
        }))
    }
}

/// `aim-shell`, `aim-shell-2`, `aim-shell-3`: AIM9 lists its shell test three times
/// (`shell_rtns_1` to `_3`, the same script), and so does the table here.
pub struct Shell {
    name: &'static str,
    row: &'static str,
}

/// The script each iteration runs: arithmetic in a loop, a pipe through `cat` and `wc`,
/// and a directory listing. It prints the loop's sum and the line count, checked.
const SCRIPT: &str = "s=0; for i in 1 2 3 4 5 6 7 8 9 10; do s=$((s + i)); done\n\
                      n=$(printf 'a\\nb\\nc\\n' | cat | wc -l)\n\
                      ls / > /dev/null\n\
                      echo \"$s $n\"\n";

impl Benchmark for Shell {
    fn info(&self) -> BenchInfo {
        info(
            self.name,
            "scripts/s",
            self.row,
            &format!(
                "AIM9 {}: `sh` runs a small script (a loop, a pipe through cat and wc, \
                 ls), the same script as the other shell_rtns rows; scripts per second, \
                 each script's output checked.",
                self.row
            ),
            vec![],
        )
    }
    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let (name, cpu) = (self.name, ctx.placement.cpu_for_thread(0));
        Ok(sampled(move |iterations| {
            timed(cpu, iterations, |_| {
                // The child inherits the measuring thread's pin.
                let out = Command::new("sh")
                    .arg("-c")
                    .arg(SCRIPT)
                    .stdin(Stdio::null())
                    .stderr(Stdio::null())
                    .output()
                    .map_err(|e| io(name, "run sh", e))?;
                let text = String::from_utf8_lossy(&out.stdout);
                if !out.status.success() || text.trim() != "55 3" {
                    return Err(check(
                        name,
                        format!("the script printed {:?} ({})", text.trim(), out.status),
                    ));
                }
                Ok(1.0)
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workers::tests::{context, placement, topology};
    use crate::{Params, RawSample};

    fn run(b: &dyn Benchmark, iterations: u64) -> RawSample {
        let params = Params::resolve(&b.info(), &[], true).unwrap();
        let pl = placement(&[0]);
        let topo = topology(None);
        let mut inst = b.prepare(&context(&params, &pl, &topo)).unwrap();
        inst.sample(iterations).unwrap()
    }

    #[test]
    fn kernels_run_and_check() {
        for b in benchmarks() {
            let s = run(&*b, 3);
            assert!(s.work > 0.0 && s.elapsed_ns > 0, "{}", b.info().name);
            assert_eq!(s.cpus, vec![0]);
        }
    }

    #[test]
    fn references_are_right() {
        assert_eq!(primes_by_division(100), 25);
        assert_eq!(primes_by_division(2), 1);
        assert!((exp_series(1.0) - std::f64::consts::E).abs() < 1e-15);
        assert!((exp_series(-2.0) - (-2.0f64).exp()).abs() < 1e-15);
    }
}
