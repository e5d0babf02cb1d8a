//! `cas-contention` [paper 002 s6-7: the lock-free task pool's compare-and-swap]: every
//! CPU of the placement increments one shared 64-bit word with compare-exchange loops.
//!
//! Each thread (one per placement CPU, pinned) performs `iterations` successful
//! increments: load once, then `compare_exchange(v, v + 1)`; a failure returns the
//! current value, which is the next attempt's expectation. The value is successful
//! increments per second over all threads (first start to last finish), in Mops/s; the
//! `failed_per_success` metric counts the attempts lost to other threads. The word sits
//! alone on a 128-byte-aligned line, so only true sharing is measured. One CPU gives the
//! uncontended cost as a baseline; two SMT siblings contend inside one core's L1, two
//! cores through the shared cache.
//!
//! With the `os` placement, one unpinned thread runs per CPU the process may use.
//! The final value of the word is checked against the number of successes.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use smtlab_model::{BenchInfo, Direction, ValueKind};

use super::{Rendezvous, bench_info, first_error, joined, now_ns, pin_and_arrive, this_cpu};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample, sampled};

const NAME: &str = "cas-contention";

/// The `cas-contention` benchmark.
pub struct CasContention;

impl Benchmark for CasContention {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            unit: "Mops/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1e6 },
            ..bench_info(
                NAME,
                "All placement CPUs increment one cache-line-padded 64-bit word with \
                 compare-exchange loops: successful CAS per second (Mops/s), with failed \
                 attempts per success as a metric.",
                "paper 002 s6-7 (lock-free pool)",
                vec![],
            )
        }
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let cpus: Vec<Option<u32>> = if ctx.placement.pinned() {
            ctx.placement.cpus.iter().map(|&c| Some(c)).collect()
        } else {
            let usable = ctx
                .topology
                .allowed_cpus
                .as_ref()
                .unwrap_or(&ctx.topology.cpus)
                .len();
            vec![None; usable.max(1)]
        };
        Ok(sampled(move |iterations| {
            let n = iterations.max(1);
            let threads = cpus.len();
            let word = CachePadded::new(AtomicU64::new(0));
            let start = Rendezvous::new(threads);
            let (word, start) = (&word, &start);
            let results = std::thread::scope(|s| {
                let mut handles = Vec::with_capacity(threads);
                for (i, &cpu) in cpus.iter().enumerate() {
                    match std::thread::Builder::new()
                        .name(format!("smtlab-cas{i}"))
                        .spawn_scoped(s, move || hammer(word, start, cpu, n))
                    {
                        Ok(h) => handles.push(h),
                        Err(e) => {
                            start.abort();
                            for h in handles {
                                let _ = h.join();
                            }
                            return Err(super::spawn_error(NAME, &format!("cas{i}"), e));
                        }
                    }
                }
                Ok(handles
                    .into_iter()
                    .map(|h| joined(NAME, "cas", h.join()))
                    .collect::<Vec<_>>())
            })?;
            let outs = first_error(results, NAME)?;
            let total = n * threads as u64;
            let got = word.load(Ordering::Relaxed);
            if got != total {
                return Err(BenchError::check(
                    NAME,
                    format!("the shared word reached {got}, expected {total}"),
                ));
            }
            let first_start = outs.iter().map(|o| o.start).min().unwrap_or(0);
            let last_start = outs.iter().map(|o| o.start).max().unwrap_or(0);
            let last_end = outs.iter().map(|o| o.end).max().unwrap_or(0);
            let failed: u64 = outs.iter().map(|o| o.failed).sum();
            let mut s = RawSample {
                elapsed_ns: last_end.saturating_sub(first_start),
                work: total as f64,
                cpu_ns: Some(outs.iter().map(|o| o.cpu_ns).sum()),
                start_spread_ns: Some(last_start - first_start),
                cpus: outs.iter().map(|o| o.cpu).collect(),
                ..RawSample::default()
            };
            s.metrics
                .insert("failed_per_success".into(), failed as f64 / total as f64);
            s.metrics.insert("threads".into(), threads as f64);
            Ok(s)
        }))
    }
}

/// What one thread reports.
struct ThreadOut {
    start: u64,
    end: u64,
    failed: u64,
    cpu_ns: u64,
    cpu: u32,
}

fn hammer(
    word: &AtomicU64,
    start: &Rendezvous,
    cpu: Option<u32>,
    n: u64,
) -> Result<ThreadOut, Option<BenchError>> {
    pin_and_arrive(NAME, cpu, start)?;
    let c0 = super::thread_cpu_ns();
    let t0 = now_ns();
    let mut failed = 0u64;
    let mut done = 0u64;
    let mut cur = word.load(Ordering::Relaxed);
    while done < n {
        // AcqRel on success: the ordering a lock-free pool's pop/push needs, so the cost
        // is that of a real synchronising CAS on weakly ordered machines too.
        match word.compare_exchange(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => {
                done += 1;
                cur += 1;
            }
            Err(actual) => {
                failed += 1;
                cur = actual;
            }
        }
    }
    let t1 = now_ns();
    let c1 = super::thread_cpu_ns();
    Ok(ThreadOut {
        start: t0,
        end: t1,
        failed,
        cpu_ns: c1.saturating_sub(c0),
        cpu: this_cpu(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::testutil::{prepare, two_cpus};

    #[test]
    fn two_cpus_contend_and_count_failures() {
        let Some(cpus) = two_cpus() else { return };
        let mut inst = prepare(&CasContention, &[], &cpus).unwrap();
        let s = inst.sample(10_000).unwrap();
        assert_eq!(s.work, 20_000.0);
        assert_eq!(s.cpus, cpus.to_vec());
        assert!(s.elapsed_ns > 0);
        let mops = s.work / s.elapsed_ns as f64 * 1e3;
        assert!(mops.is_finite() && mops > 0.0, "{mops}");
        let f = s.metrics["failed_per_success"];
        assert!(f.is_finite() && f >= 0.0);
        assert!(s.cpu_ns.unwrap() > 0);
    }

    #[test]
    fn one_cpu_is_the_uncontended_baseline() {
        let Some([a, _]) = two_cpus() else { return };
        let mut inst = prepare(&CasContention, &[], &[a]).unwrap();
        let s = inst.sample(1000).unwrap();
        assert_eq!(s.metrics["failed_per_success"], 0.0);
        assert_eq!(s.cpus, vec![a]);
    }
}
