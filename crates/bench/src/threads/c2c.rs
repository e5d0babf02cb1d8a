//! `c2c-latency` [paper 002 s6-7, after nviennot/core-to-core-latency]: how long a cache
//! line takes to travel from one CPU to another, for every ordered pair of the
//! placement's CPUs.
//!
//! Per pair (a, b) two threads are pinned, *ping* to a and *pong* to b, and bounce one
//! 128-byte-aligned word: ping writes the odd number 2k+1 and spins until it reads 2k+2;
//! pong spins until it reads 2k+1 and writes 2k+2. One round trip moves the line twice,
//! so the one-way latency is the timed round trips' duration / (2 x round trips). Each
//! pair first does [`WARM_UP`] untimed round trips (thread start, first-touch misses).
//! The waits spin without yielding: the two threads always have CPUs of their own, and a
//! yield would add a system call to every leg.
//!
//! The value is the one-way latency averaged over all pairs. Metrics: each pair as
//! `cpuA-cpuB` (ns one way), and, where the topology tells, the mean per class:
//! `siblings_ns_mean` (SMT siblings of one core), `cores_ns_mean` (different cores of one
//! package) and `packages_ns_mean` (different packages). `iterations` is the number of
//! timed round trips per pair. Needs a pinned placement of at least two CPUs.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use smtlab_model::{BenchInfo, Topology};

use super::{Rendezvous, bench_info, clock_cost_ns, mean, now_ns, pin_and_arrive, run_pair};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample, sampled};

const NAME: &str = "c2c-latency";

/// Untimed round trips before each pair's timed ones.
pub const WARM_UP: u64 = 100;

/// The `c2c-latency` benchmark.
pub struct C2cLatency;

/// What two CPUs share, from the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    Siblings,
    Cores,
    Packages,
    Unknown,
}

fn relation(topology: &Topology, a: u32, b: u32) -> Relation {
    match (topology.core_of(a), topology.core_of(b)) {
        (Some(ca), Some(cb)) if std::ptr::eq(ca, cb) => Relation::Siblings,
        (Some(_), Some(_)) => match (topology.package_index_of(a), topology.package_index_of(b)) {
            (Some(pa), Some(pb)) if pa == pb => Relation::Cores,
            (Some(_), Some(_)) => Relation::Packages,
            _ => Relation::Unknown,
        },
        _ => Relation::Unknown,
    }
}

impl Benchmark for C2cLatency {
    fn info(&self) -> BenchInfo {
        bench_info(
            NAME,
            "Core-to-core latency: one-way ns for a cache line bounced between two \
             pinned threads, for every ordered pair of placement CPUs, averaged; per-pair \
             metrics (cpuA-cpuB) and means for SMT siblings, cores of one package and \
             different packages. Needs 2+ pinned CPUs.",
            "paper 002 s6-7",
            vec![],
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let p = ctx.placement;
        if !p.pinned() {
            return Err(BenchError::unsupported(
                NAME,
                "needs pinned CPUs to name the pairs; the os placement pins \
                         nothing (use e.g. all or cores)",
            ));
        }
        if p.width() < 2 {
            return Err(BenchError::unsupported(
                NAME,
                format!(
                    "needs at least 2 CPUs to measure between, but placement {} has only \
                     CPU {}; use e.g. 2c1t, 1c2t or all",
                    p.name, p.cpus[0]
                ),
            ));
        }
        let mut pairs = Vec::new();
        for &a in &p.cpus {
            for &b in &p.cpus {
                if a != b {
                    pairs.push((a, b, relation(ctx.topology, a, b)));
                }
            }
        }
        let (cpus, clock_ns) = (p.cpus.clone(), clock_cost_ns());
        Ok(sampled(move |iterations| {
            let n = iterations.max(1);
            let mut elapsed = 0u64;
            let mut seen: Vec<Option<u32>> = vec![None; cpus.len()];
            let mut s = RawSample::default();
            let mut by_class: [Vec<f64>; 3] = Default::default();
            for &(a, b, rel) in &pairs {
                let (ns, ran) = bounce(a, b, n)?;
                if ran != [a, b] {
                    return Err(BenchError::check(
                        NAME,
                        format!(
                            "threads pinned to CPUs {a} and {b} ran on {} and {}",
                            ran[0], ran[1]
                        ),
                    ));
                }
                for (slot, &cpu) in seen.iter_mut().zip(&cpus) {
                    if cpu == a || cpu == b {
                        *slot = Some(cpu);
                    }
                }
                elapsed += ns;
                let one_way = ns as f64 / (2 * n) as f64;
                s.metrics.insert(format!("cpu{a}-cpu{b}"), one_way);
                match rel {
                    Relation::Siblings => by_class[0].push(one_way),
                    Relation::Cores => by_class[1].push(one_way),
                    Relation::Packages => by_class[2].push(one_way),
                    Relation::Unknown => {}
                }
            }
            for (name, v) in ["siblings_ns_mean", "cores_ns_mean", "packages_ns_mean"]
                .iter()
                .zip(&by_class)
            {
                if !v.is_empty() {
                    s.metrics.insert((*name).into(), mean(v));
                }
            }
            s.metrics.insert("clock_read_ns".into(), clock_ns);
            s.elapsed_ns = elapsed;
            s.work = (2 * n * pairs.len() as u64) as f64;
            s.overhead_ns = (clock_ns * pairs.len() as f64).round() as u64;
            s.cpus = seen.into_iter().map(|c| c.unwrap_or(u32::MAX)).collect();
            Ok(s)
        }))
    }
}

/// Timed round trips of each of [`handoff_ns`]'s batches (after [`WARM_UP`]): about 15
/// microseconds a batch between cores of one die, 150 across sockets.
pub const HANDOFF_ROUND_TRIPS: u64 = 200;
/// Batches [`handoff_ns`] keeps the quickest of: other load only ever slows a batch.
const HANDOFF_BATCHES: usize = 3;

/// The one-way time, in nanoseconds, a cache line takes from CPU `a` to CPU `b` and
/// back, halved: the quickest of a few short batches. It tells what the two CPUs really
/// share (a core, a die's last-level cache, nothing but the socket interconnect) where
/// the topology cannot (a virtual machine's vCPUs, which its host may move between
/// runs). `None` when the threads cannot be pinned to `a` and `b` or ran elsewhere.
pub fn handoff_ns(a: u32, b: u32) -> Option<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..HANDOFF_BATCHES {
        let (ns, ran) = bounce(a, b, HANDOFF_ROUND_TRIPS).ok()?;
        if ran != [a, b] {
            return None;
        }
        best = best.min(ns as f64 / (2 * HANDOFF_ROUND_TRIPS) as f64);
    }
    (best.is_finite() && best > 0.0).then_some(best)
}

/// Times `n` round trips between CPUs `a` (ping) and `b` (pong): total ns and the CPUs
/// the two threads ran on.
fn bounce(a: u32, b: u32, n: u64) -> Result<(u64, [u32; 2]), BenchError> {
    let line = CachePadded::new(AtomicU64::new(0));
    let start = Rendezvous::new(2);
    let (line, start_ref) = (&line, &start);
    let rounds = WARM_UP + n;
    let ((ns, cpu_a), cpu_b) = run_pair(
        NAME,
        &start,
        ["ping", "pong"],
        move || {
            pin_and_arrive(NAME, Some(a), start_ref)?;
            let mut t0 = now_ns();
            for k in 0..rounds {
                if k == WARM_UP {
                    t0 = now_ns();
                }
                line.store(2 * k + 1, Ordering::Release);
                while line.load(Ordering::Acquire) != 2 * k + 2 {
                    std::hint::spin_loop();
                }
            }
            let t1 = now_ns();
            Ok((t1.saturating_sub(t0), super::this_cpu()))
        },
        move || {
            pin_and_arrive(NAME, Some(b), start_ref)?;
            for k in 0..rounds {
                while line.load(Ordering::Acquire) != 2 * k + 1 {
                    std::hint::spin_loop();
                }
                line.store(2 * k + 2, Ordering::Release);
            }
            Ok(super::this_cpu())
        },
    )?;
    Ok((ns, [cpu_a, cpu_b]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::testutil::{prepare, topology, two_cpus};

    #[test]
    fn two_cpus_give_both_directions_and_a_class() {
        let Some([a, b]) = two_cpus() else { return };
        let mut inst = prepare(&C2cLatency, &[], &[a, b]).unwrap();
        let s = inst.sample(200).unwrap();
        assert_eq!(s.cpus, vec![a, b]);
        assert_eq!(s.work, 2.0 * 200.0 * 2.0);
        let ab = s.metrics[&format!("cpu{a}-cpu{b}")];
        let ba = s.metrics[&format!("cpu{b}-cpu{a}")];
        assert!(ab.is_finite() && ab > 0.0 && ba.is_finite() && ba > 0.0);
        // The hand-built topology puts each CPU in a core of its own, one package.
        assert!(s.metrics["cores_ns_mean"] > 0.0);
        assert!(!s.metrics.contains_key("siblings_ns_mean"));
        let value = s.elapsed_ns as f64 / s.work;
        assert!(value.is_finite() && value > 0.0);
    }

    #[test]
    fn a_handoff_between_two_cpus_is_timed() {
        let Some([a, b]) = two_cpus() else { return };
        let ns = handoff_ns(a, b).unwrap();
        // A cache line crosses between two CPUs in tens to hundreds of nanoseconds;
        // under a microsecond-scale host hiccup the quickest batch still stays well
        // below a millisecond.
        assert!(ns.is_finite() && ns > 0.0 && ns < 1e6, "{ns} ns");
        assert_eq!(handoff_ns(a, u32::MAX - 1), None);
    }

    #[test]
    fn one_cpu_and_os_are_refused_clearly() {
        let Some([a, _]) = two_cpus() else { return };
        let e = prepare(&C2cLatency, &[], &[a]).err().unwrap();
        assert!(matches!(e, BenchError::Unsupported { .. }));
        let e = e.to_string();
        assert!(e.starts_with("c2c-latency: needs at least 2 CPUs"), "{e}");
        let e = prepare(&C2cLatency, &[], &[]).err().unwrap().to_string();
        assert!(e.contains("os placement"), "{e}");
    }

    #[test]
    fn pairs_are_classified_by_the_topology() {
        let mut t = topology(&[0, 1, 2, 3]);
        // Core 0 holds CPUs 0 and 1 (siblings); CPU 3 moves to a second package.
        let pkg = &mut t.packages[0];
        pkg.cores[0].cpus = [0, 1].into_iter().collect();
        pkg.cores.retain(|c| c.id != 1 && c.id != 3);
        pkg.cpus = [0, 1, 2].into_iter().collect();
        t.packages.push(smtlab_model::Package {
            id: Some(1),
            cpus: std::iter::once(3).collect(),
            cores: vec![smtlab_model::Core {
                id: 3,
                cpus: std::iter::once(3).collect(),
                die_id: None,
                cluster_id: None,
                kind: None,
            }],
        });
        assert_eq!(relation(&t, 0, 1), Relation::Siblings);
        assert_eq!(relation(&t, 1, 2), Relation::Cores);
        assert_eq!(relation(&t, 2, 3), Relation::Packages);
        assert_eq!(relation(&t, 2, 9), Relation::Unknown);
    }
}
