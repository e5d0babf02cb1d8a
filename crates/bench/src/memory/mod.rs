//! Memory benchmarks (paper 002 s5): `mem-read`, `mem-write`, `mem-copy` bandwidth in GB/s
//! and `mem-latency` in ns per dependent load.
//!
//! All four run on the pinned [`WorkerPool`]: one worker per CPU of the placement by
//! default (`threads` overrides), each with a private buffer allocated and written by the
//! worker after it is pinned. `size` is **per thread**: with 2 threads and `size=128MiB`
//! the test touches 256 MiB. Its default, `auto` ([`auto_size`]), sizes the whole
//! placement as STREAM does: 4x the last-level cache instances its CPUs reach, in total,
//! split over the threads, with a per-thread floor of 4x a thread's share of its private
//! cache (so 16 threads on one socket hold 4x that socket's L3, not 16 times it), or
//! [`FALLBACK_SIZE`] in total when the topology does not say; quick runs use 16 MiB per
//! thread, which may be cache-resident on large-L3 parts. Sizes are rounded down to whole 4 KiB pages (whole
//! 64-byte lines for the latency test). A run that would need more than 90% of
//! `MemAvailable` is refused with the numbers. Buffers ask for transparent huge pages
//! (`pages=huge`, the default; `pages=base` keeps 4 KiB pages): with 4 KiB pages the
//! page walks, and on a virtual machine how the host happens to back each buffer, moved
//! bandwidth by 20% between two buffers of one process.
//!
//! * Bandwidth ([`bandwidth`]): one iteration is one pass over the buffer, so the runner
//!   calibrates passes; bytes are counted as likwid-bench counts them (copy = bytes read +
//!   bytes written, no write-allocate), with AVX2 kernels when the CPU has them
//!   ([`kernels`]).
//! * Latency ([`latency`]): one iteration is one load of a random pointer chase; the value
//!   is nanoseconds per load *per thread* (work = loads of one thread), so several threads
//!   give the latency each sees while the others chase too. Sweep the working set with
//!   [`latency_sweep_sizes`] to see the L1/L2/L3/DRAM steps.

pub mod bandwidth;
pub mod kernels;
pub mod latency;

use smtlab_model::placement::Named;
use smtlab_model::{BenchInfo, Direction, ParamInfo, Topology, ValueKind};

use crate::workers::{WorkerPool, threads_param};
use crate::{BenchContext, BenchError, Benchmark, Instance, sampled};
use bandwidth::{Stream, StreamWorker};
use kernels::{Isa, Pages};
use latency::Chase;

/// Per-thread size when the topology gives no last-level cache size.
pub const FALLBACK_SIZE: u64 = 256 << 20;
/// Page granularity of bandwidth buffers.
const PAGE: u64 = 4096;
/// Smallest working set of the latency sweep.
pub const SWEEP_START: u64 = 4 << 10;

/// The memory benchmarks of the catalog.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    let mut v = crate::boxed(Stream::ALL.map(Bandwidth));
    v.push(Box::new(Latency));
    v
}

/// `auto` size per thread for one thread alone: 4x the last-level cache (one
/// instance), else [`FALLBACK_SIZE`]. The latency sweep ends here.
pub fn default_size(topo: &Topology) -> u64 {
    topo.llc_bytes()
        .filter(|&b| b > 0)
        .map_or(FALLBACK_SIZE, |b| b.saturating_mul(4))
}

/// Smallest `auto` size per thread, whatever the caches say.
pub const MIN_AUTO_PER_THREAD: u64 = 1 << 20;

/// The CPUs `threads` workers run on: worker `i` on the placement's CPU `i mod n`.
fn reached_cpus(cpus: &[u32], threads: usize) -> Vec<u32> {
    cpus.iter().copied().take(threads.max(1)).collect()
}

/// Level of the last-level (largest-level data or unified) cache, if any is known.
fn llc_level(topo: &Topology) -> Option<u8> {
    topo.caches
        .iter()
        .filter(|c| c.cache_type != smtlab_model::CacheType::Instruction)
        .map(|c| c.level)
        .max()
}

/// Bytes of the last-level cache instances that `cpus` reach, each instance once: what
/// the working set of a placement must exceed (one socket's L3 for `1c1t`, both for a
/// placement over two sockets). `None` when the topology gives no cache sizes.
pub fn llc_reached_bytes(topo: &Topology, cpus: &[u32]) -> Option<u64> {
    let level = llc_level(topo)?;
    let sizes: Vec<u64> = topo
        .caches
        .iter()
        .filter(|c| c.level == level && c.cache_type != smtlab_model::CacheType::Instruction)
        .filter(|c| cpus.iter().any(|&cpu| c.cpus.contains(cpu)))
        .filter_map(|c| c.size_bytes)
        .collect();
    (!sizes.is_empty())
        .then(|| sizes.iter().sum::<u64>())
        .filter(|&b| b > 0)
}

/// The per-thread floor of `auto`: 4x a thread's share of the largest private cache it
/// reaches (an L2 shared by two SMT siblings counts half for each), so a thread's
/// buffer never fits its own caches when many threads split the total; at least
/// [`MIN_AUTO_PER_THREAD`].
fn per_thread_floor(topo: &Topology, reached: &[u32]) -> u64 {
    let llc = llc_level(topo);
    topo.caches
        .iter()
        .filter(|c| c.cache_type != smtlab_model::CacheType::Instruction)
        .filter(|c| Some(c.level) != llc)
        .filter_map(|c| {
            let sharing = reached.iter().filter(|&&cpu| c.cpus.contains(cpu)).count() as u64;
            let size = c.size_bytes?;
            (sharing > 0).then(|| size.saturating_mul(4) / sharing)
        })
        .max()
        .unwrap_or(0)
        .max(MIN_AUTO_PER_THREAD)
}

/// `size=auto` per thread for `threads` workers on `cpus` (a placement's CPUs in
/// order): the placement's whole working set is at least 4x the last-level cache it
/// reaches (measurement rule 10, STREAM's rule: 4x the caches in total, not per
/// thread), split over the threads, with a per-thread floor ([`per_thread_floor`]).
/// [`FALLBACK_SIZE`] in total when the topology gives no cache sizes.
pub fn auto_size(topo: &Topology, cpus: &[u32], threads: usize) -> u64 {
    let threads = threads.max(1);
    let reached = reached_cpus(cpus, threads);
    let total = llc_reached_bytes(topo, &reached).map_or(FALLBACK_SIZE, |b| b.saturating_mul(4));
    total
        .div_ceil(threads as u64)
        .max(per_thread_floor(topo, &reached))
}

/// Working sets for a latency sweep: 4 KiB doubling up to [`default_size`] (4x LLC), which
/// is always the last entry, so the steps at L1, L2, L3 and DRAM all show.
pub fn latency_sweep_sizes(topo: &Topology) -> Vec<u64> {
    let top = default_size(topo).max(SWEEP_START);
    let mut v = Vec::new();
    let mut s = SWEEP_START;
    while s < top {
        v.push(s);
        s = s.saturating_mul(2);
    }
    v.push(top);
    v
}

fn size_param(ctx: &BenchContext<'_>, threads: usize) -> Result<u64, BenchError> {
    let v = ctx.params.get_str("size")?;
    if v.eq_ignore_ascii_case("auto") {
        Ok(auto_size(ctx.topology, &ctx.placement.cpus, threads))
    } else {
        Ok(ctx.params.get_bytes("size")?)
    }
}

fn too_small(size: u64, min: u64) -> BenchError {
    let expected = format!("auto or at least {min} bytes per thread");
    crate::params::bad("size", &size.to_string(), &expected)
}

/// `MemAvailable` from /proc/meminfo, in bytes.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn check_memory(bench: &str, threads: usize, per_thread: u64) -> Result<(), BenchError> {
    let total = per_thread.saturating_mul(threads as u64);
    match mem_available() {
        Some(avail) if total as f64 > 0.9 * avail as f64 => Err(BenchError::unsupported(
            bench,
            format!(
                "needs {total} bytes ({threads} threads x {per_thread} bytes) but only \
                 {avail} bytes are available; lower size or threads"
            ),
        )),
        _ => Ok(()),
    }
}

use crate::params::declare as param;

fn pages_info() -> ParamInfo {
    param(
        "pages",
        "huge",
        None,
        "huge (transparent huge pages where the kernel gives them: caches and DRAM \
         without page walks) or base (4 KiB pages, page walks included)",
    )
}

fn pages_param(ctx: &BenchContext<'_>) -> Result<Pages, BenchError> {
    let v = ctx.params.get_str("pages")?;
    Pages::parse(v).ok_or_else(|| crate::ParamError::value("pages", v, "huge or base").into())
}

/// A streaming bandwidth benchmark.
#[derive(Debug, Clone, Copy)]
pub struct Bandwidth(pub Stream);

impl Bandwidth {
    /// Worker threads and the bytes of each one's buffer.
    fn buffers(self, ctx: &BenchContext<'_>) -> Result<(usize, u64), BenchError> {
        let threads = threads_param(self.0.name(), ctx)?;
        let size = size_param(ctx, threads)?;
        // Copy splits the size into two page-aligned halves.
        let unit = if self.0 == Stream::Copy {
            2 * PAGE
        } else {
            PAGE
        };
        let bytes = size / unit * unit;
        if bytes == 0 {
            return Err(too_small(size, unit));
        }
        Ok((threads, bytes))
    }
}

/// Buffers are allocated and written by each worker at once; about 1 GB/s of first
/// touch per thread (page faults, zeroing) is what a loaded server gives.
const FIRST_TOUCH_BYTES_PER_S: u64 = 1_000_000_000;

/// The plan's view of `threads` buffers of `bytes` each.
fn buffers_cost(threads: usize, bytes: u64) -> crate::CellCost {
    crate::CellCost {
        memory_bytes: bytes.saturating_mul(threads as u64),
        sample_ns: None,
        longest_sample_ns: None,
        setup_ns: bytes.saturating_mul(1_000_000_000) / FIRST_TOUCH_BYTES_PER_S,
    }
}

impl Benchmark for Bandwidth {
    fn info(&self) -> BenchInfo {
        let description = match self.0 {
            Stream::Read => {
                "Memory read bandwidth: each thread sums its private, pre-faulted buffer \
                 (256-bit loads, 8 independent accumulators); bytes read per second"
            }
            Stream::Write => {
                "Memory write bandwidth: each thread stores a value over its private, \
                 pre-faulted buffer (256-bit ordinary stores, not non-temporal); bytes \
                 written per second, write-allocate reads not counted"
            }
            Stream::Copy => {
                "Memory copy bandwidth: each thread copies the first half of its private, \
                 pre-faulted buffer to the second half (256-bit loads and ordinary stores, \
                 not non-temporal; not memcpy, which in glibc switches to non-temporal \
                 stores above a size threshold and then copies large buffers much faster); \
                 bytes read plus bytes written per second, as likwid-bench counts copy"
            }
        };
        BenchInfo {
            name: self.0.name().into(),
            group: "memory".into(),
            unit: "GB/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1e9 },
            description: description.into(),
            origin: "paper 002 s5".into(),
            params: vec![
                param(
                    "size",
                    "auto",
                    Some("16MiB"),
                    "bytes per thread (for mem-copy source and destination together); auto = \
                     4 x the last-level caches the placement reaches, in total, split over \
                     the threads (at least 4 x a thread's share of its L2); 256MiB in total \
                     when unknown",
                ),
                crate::workers::threads_info(),
                pages_info(),
            ],
            main_param: None,
            report: Default::default(),
        }
    }

    /// `full`: thread counts 1, 2, 3, 4, 6, 8, ... on `all` (paper 002 Figs 1-6).
    fn sweep(&self, suite: crate::Suite, topo: &smtlab_model::Topology) -> Vec<crate::SweepCell> {
        crate::workers::thread_sweep(suite, topo)
    }

    fn cost(&self, ctx: &BenchContext<'_>) -> Result<crate::CellCost, BenchError> {
        let (threads, bytes) = self.buffers(ctx)?;
        Ok(buffers_cost(threads, bytes))
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let name = self.0.name();
        let pages = pages_param(ctx)?;
        let (threads, bytes) = self.buffers(ctx)?;
        check_memory(name, threads, bytes)?;
        let stream = self.0;
        let isa = Isa::detect();
        let bench = name.to_string();
        let pool = WorkerPool::start(name, ctx.placement, Some(threads), move |i| {
            StreamWorker::new(stream, isa, bytes, pages, 0x00C0_FFEE ^ i as u64).map_err(|reason| {
                BenchError::unsupported(bench.clone(), format!("worker {i}: {reason}"))
            })
        })?;
        Ok(Box::new(pool))
    }
}

/// `mem-latency`.
#[derive(Debug, Clone, Copy)]
pub struct Latency;

impl Benchmark for Latency {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: "mem-latency".into(),
            group: "memory".into(),
            unit: "ns".into(),
            direction: Direction::Lower,
            value_kind: ValueKind::TimePerOp,
            description: "Memory load latency: a dependent pointer chase through one random \
                          cycle over the 64-byte lines of a per-thread working set; \
                          nanoseconds per load as each thread sees it (all threads chase at \
                          once). Sweep size to see L1/L2/L3/DRAM"
                .into(),
            origin: "paper 002 s5 (latency as in lmbench lat_mem_rd)".into(),
            params: vec![
                param(
                    "size",
                    "auto",
                    Some("16MiB"),
                    "working set per thread; auto = 4 x the last-level caches the \
                     placement reaches, in total, split over the threads (DRAM latency); \
                     256MiB in total when unknown",
                ),
                crate::workers::threads_info(),
                param("seed", "1", None, "seed of the random chase order"),
                pages_info(),
            ],
            main_param: None,
            report: Default::default(),
        }
    }

    /// `full`: the working-set sweep on `1c1t`, through the cache levels.
    fn sweep(&self, suite: crate::Suite, topo: &Topology) -> Vec<crate::SweepCell> {
        if suite != crate::Suite::Full {
            return Vec::new();
        }
        latency_sweep_sizes(topo)
            .into_iter()
            .map(|size| crate::SweepCell {
                params: vec![("size".into(), size.to_string())],
                placement: Some(Named::OneCore.to_string()),
            })
            .collect()
    }

    fn cost(&self, ctx: &BenchContext<'_>) -> Result<crate::CellCost, BenchError> {
        let (threads, bytes, lines) = latency_buffers(ctx)?;
        Ok(buffers_cost(threads, bytes + 8 * lines as u64))
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let name = "mem-latency";
        let (threads, bytes, lines) = latency_buffers(ctx)?;
        let seed = ctx.params.get_u64("seed")?;
        let pages = pages_param(ctx)?;
        // Plus 4 bytes per line of ring positions and 4 of the shuffle order.
        check_memory(name, threads, bytes + 8 * lines as u64)?;
        let mut pool = WorkerPool::start(name, ctx.placement, Some(threads), move |i| {
            let seed = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            Chase::with_pages(bytes, seed, pages)
                .map_err(|reason| BenchError::unsupported(name, format!("worker {i}: {reason}")))
        })?;
        // One thread's work (latency per load), not the sum over threads.
        Ok(sampled(move |iterations| {
            let mut s = pool.run(iterations)?;
            s.work = iterations as f64;
            Ok(s)
        }))
    }
}

/// `mem-latency`'s worker threads, the bytes of each one's working set and its lines.
fn latency_buffers(ctx: &BenchContext<'_>) -> Result<(usize, u64, usize), BenchError> {
    let threads = threads_param("mem-latency", ctx)?;
    let size = size_param(ctx, threads)?;
    let lines = latency::lines_for(size).map_err(|_| too_small(size, 128))?;
    Ok((threads, lines as u64 * kernels::LINE_BYTES as u64, lines))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;
    use crate::workers::tests::{context, placement, test_cpus, topology};

    fn prepare(
        b: &dyn Benchmark,
        cpus: &[u32],
        given: &[&str],
    ) -> Result<Box<dyn Instance>, BenchError> {
        let info = b.info();
        let given: Vec<String> = given.iter().map(|s| s.to_string()).collect();
        let params = Params::resolve(&info, &given, false).unwrap();
        let p = placement(cpus);
        let t = topology(Some(8 << 20));
        b.prepare(&context(&params, &p, &t))
    }

    #[test]
    fn every_benchmark_runs_on_one_and_two_cpus() {
        let all = test_cpus();
        for b in benchmarks() {
            let name = b.info().name;
            for n in 1..=all.len() {
                let cpus = &all[..n];
                let mut inst = prepare(&*b, cpus, &["size=64KiB"]).unwrap();
                for iters in [1, 3] {
                    let s = inst.sample(iters).unwrap();
                    assert_eq!(s.cpus, cpus, "{name}");
                    assert!(s.elapsed_ns > 0, "{name}");
                    assert!(s.work.is_finite() && s.work > 0.0, "{name}");
                    let want = if name == "mem-latency" {
                        iters as f64
                    } else {
                        (iters * (64 << 10) * n as u64) as f64
                    };
                    assert_eq!(s.work, want, "{name}");
                }
            }
        }
    }

    #[test]
    fn sizes_round_to_pages_and_tiny_sizes_are_errors() {
        let mut inst = prepare(&Bandwidth(Stream::Copy), &[0], &["size=12KiB"]).unwrap();
        assert_eq!(inst.sample(1).unwrap().work, 8192.0);
        for (b, size) in [
            (&Bandwidth(Stream::Read) as &dyn Benchmark, "100"),
            (&Bandwidth(Stream::Copy), "4KiB"),
            (&Latency, "64"),
        ] {
            let e = prepare(b, &[0], &[&format!("size={size}")]).err().unwrap();
            assert!(e.to_string().contains("size"), "{e}");
        }
        let e = prepare(&Latency, &[0], &["size=lots"]).err().unwrap();
        assert!(e.to_string().contains("size=\"lots\""), "{e}");
        let e = prepare(&Latency, &[0], &["seed=x"]).err().unwrap();
        assert!(e.to_string().contains("seed"), "{e}");
    }

    #[test]
    fn both_page_kinds_measure_and_others_are_refused() {
        for b in benchmarks() {
            let name = b.info().name;
            for pages in ["pages=huge", "pages=base"] {
                // 4 MiB spans at least one whole 2 MiB huge page.
                let mut inst = prepare(&*b, &[0], &["size=4MiB", pages]).unwrap();
                let s = inst.sample(1).unwrap();
                assert!(s.elapsed_ns > 0 && s.work > 0.0, "{name} {pages}");
            }
            let e = prepare(&*b, &[0], &["pages=tiny"]).err().unwrap();
            assert!(e.to_string().contains("huge or base"), "{name}: {e}");
        }
    }

    #[test]
    fn absurd_sizes_are_refused_before_allocating() {
        let e = prepare(&Bandwidth(Stream::Read), &[0], &["size=1000000GiB"])
            .err()
            .unwrap();
        assert!(e.to_string().contains("available"), "{e}");
    }

    #[test]
    fn auto_size_and_sweep_follow_the_last_level_cache() {
        let t = topology(Some(8 << 20));
        assert_eq!(default_size(&t), 32 << 20);
        let sweep = latency_sweep_sizes(&t);
        assert_eq!(sweep.first(), Some(&(4 << 10)));
        assert_eq!(sweep.last(), Some(&(32 << 20)));
        assert_eq!(sweep.len(), 14);
        assert!(sweep.windows(2).all(|w| w[1] == 2 * w[0]));

        let odd = topology(Some(36 << 20));
        let sweep = latency_sweep_sizes(&odd);
        assert_eq!(sweep.last(), Some(&(144 << 20)));
        assert_eq!(sweep[sweep.len() - 2], 128 << 20);

        let none = topology(None);
        assert_eq!(default_size(&none), FALLBACK_SIZE);
        assert_eq!(latency_sweep_sizes(&none).last(), Some(&FALLBACK_SIZE));

        // `auto` resolves against the topology: one thread alone takes 4x the LLC, two
        // threads sharing it take half of that each.
        let info = Latency.info();
        let params = Params::resolve(&info, &[], false).unwrap();
        let p = placement(&[0]);
        assert_eq!(size_param(&context(&params, &p, &t), 1).unwrap(), 32 << 20);
        let p2 = placement(&[0, 1]);
        assert_eq!(size_param(&context(&params, &p2, &t), 2).unwrap(), 16 << 20);
    }

    /// Two packages of `cores` cores with 2 threads each, a 2 MiB L2 per core and a
    /// 32 MiB L3 per package, numbered as Intel firmware does.
    fn two_sockets(cores: u32) -> Topology {
        use smtlab_fixtures::build::{intel, with_caches};
        with_caches(intel(2, cores, 2), 2 << 20, 32 << 20)
    }

    #[test]
    fn auto_sizes_the_whole_placement_against_the_caches_it_reaches() {
        let t = two_sockets(32);
        // One thread: 4x its socket's L3.
        assert_eq!(auto_size(&t, &[0], 1), 128 << 20);
        assert_eq!(llc_reached_bytes(&t, &[0]), Some(32 << 20));
        // Two siblings of one core: 4x one L3 in total, 64 MiB each.
        assert_eq!(auto_size(&t, &[0, 64], 2), 64 << 20);
        // One core of each socket: both L3s reached, 4x 64 MiB over two threads.
        assert_eq!(auto_size(&t, &[0, 32], 2), 128 << 20);
        assert_eq!(llc_reached_bytes(&t, &[0, 32]), Some(64 << 20));
        // All 128 CPUs: 256 MiB in total would be 2 MiB each, below a thread's share
        // of its L2 (2 MiB x 4 / 2 siblings): the floor holds, 4 MiB each.
        let all: Vec<u32> = (0..128).collect();
        assert_eq!(auto_size(&t, &all, 128), 4 << 20);
        // 16 threads on one socket's cores: 128 MiB / 16 = 8 MiB each.
        let cores: Vec<u32> = (0..16).collect();
        assert_eq!(auto_size(&t, &cores, 16), 8 << 20);
        // More threads than CPUs reach no more caches than the CPUs do.
        assert_eq!(auto_size(&t, &[0], 4), 32 << 20);
        // Without cache sizes: 256 MiB in total, at least 1 MiB a thread.
        let bare = smtlab_fixtures::build::intel(2, 32, 2);
        assert_eq!(auto_size(&bare, &[0], 1), FALLBACK_SIZE);
        assert_eq!(auto_size(&bare, &all, 128), 2 << 20);
        assert_eq!(auto_size(&bare, &all[..1], 1024), MIN_AUTO_PER_THREAD);
    }

    #[test]
    fn cost_says_what_prepare_would_hold_without_allocating() {
        let t = two_sockets(32);
        let all: Vec<u32> = (0..128).collect();
        let p = placement(&all);
        for b in benchmarks() {
            let info = b.info();
            let params = Params::resolve(&info, &[], false).unwrap();
            let cost = b.cost(&context(&params, &p, &t)).unwrap();
            let per_thread = 4u64 << 20;
            let want = if info.name == "mem-latency" {
                // Plus 8 bytes of ring and order per 64-byte line.
                128 * (per_thread + per_thread / 8)
            } else {
                128 * per_thread
            };
            assert_eq!(cost.memory_bytes, want, "{}", info.name);
            assert_eq!(cost.sample_ns, None);
            assert!(cost.setup_ns > 0);
            // A size given by hand is taken as it is, per thread.
            let params = Params::resolve(&info, &["size=1GiB".to_string()], false).unwrap();
            let cost = b.cost(&context(&params, &p, &t)).unwrap();
            assert!(cost.memory_bytes >= 128 << 30, "{}", info.name);
        }
    }

    #[test]
    fn info_is_complete() {
        for b in benchmarks() {
            let i = b.info();
            assert_eq!(i.group, "memory");
            let size = i.params.iter().find(|p| p.name == "size").unwrap();
            assert_eq!(size.quick.as_deref(), Some("16MiB"));
            if i.name == "mem-latency" {
                assert_eq!(i.value_kind, ValueKind::TimePerOp);
                assert_eq!(i.direction, Direction::Lower);
            } else {
                assert_eq!(i.unit.to_string(), "GB/s");
                assert_eq!(i.value_kind, ValueKind::Rate { scale: 1e9 });
            }
            // A store kind changes the figure by large factors; whoever compares with
            // memcpy or a non-temporal tool must read which one this is.
            if i.name == "mem-write" || i.name == "mem-copy" {
                assert!(
                    i.description.contains("ordinary stores, not non-temporal"),
                    "{}: {}",
                    i.name,
                    i.description
                );
            }
        }
    }
}

/// Measured figures for a look by eye, not a check: run with
/// `cargo test --release -p smtlab-bench -- --ignored --nocapture figures`.
#[cfg(test)]
mod figures {
    use super::*;
    use crate::Params;
    use crate::RawSample;
    use crate::workers::tests::{context, placement, test_cpus, topology};

    /// Doubles the iterations until a sample lasts 20 ms, then returns 5 samples.
    pub(crate) fn measure(inst: &mut dyn Instance) -> Vec<RawSample> {
        let mut n = 1;
        loop {
            let s = inst.sample(n).unwrap();
            if s.elapsed_ns >= 20_000_000 || n >= 1 << 40 {
                break;
            }
            n *= 2;
        }
        (0..5).map(|_| inst.sample(n).unwrap()).collect()
    }

    fn run(b: &dyn Benchmark, cpus: &[u32], given: &[String]) -> String {
        let info = b.info();
        let params = Params::resolve(&info, given, false).unwrap();
        let p = placement(cpus);
        let t = topology(Some(32 << 20));
        let mut inst = b.prepare(&context(&params, &p, &t)).unwrap();
        let v: Vec<f64> = measure(&mut *inst)
            .iter()
            .map(|s| match info.value_kind {
                ValueKind::Rate { scale } => s.work / (s.elapsed_ns as f64 * 1e-9) / scale,
                ValueKind::TimePerOp => {
                    (s.elapsed_ns.saturating_sub(s.overhead_ns)) as f64 / s.work
                }
            })
            .collect();
        let best = match info.direction {
            Direction::Higher => v.iter().copied().fold(f64::MIN, f64::max),
            Direction::Lower => v.iter().copied().fold(f64::MAX, f64::min),
        };
        format!("{best:.2} {}", info.unit)
    }

    #[test]
    #[ignore = "prints measured figures"]
    fn figures() {
        let size = std::env::var("SMTLAB_FIG_SIZE").unwrap_or_else(|_| "128MiB".into());
        let all = test_cpus();
        for b in benchmarks()
            .iter()
            .filter(|b| b.info().name != "mem-latency")
        {
            for n in 1..=all.len() {
                let r = run(&**b, &all[..n], &[format!("size={size}")]);
                eprintln!("{:10} size={size}/thread threads={n}: {r}", b.info().name);
            }
        }
        for kib in [16u64, 256, 1024, 8192, 16384, 65536, 262144] {
            let r = run(&Latency, &all[..1], &[format!("size={kib}KiB")]);
            eprintln!("mem-latency size={kib}KiB threads=1: {r}");
        }
        for b in crate::compute::benchmarks() {
            for n in 1..=all.len() {
                let info = b.info();
                let params = Params::resolve(&info, &[], false).unwrap();
                let p = placement(&all[..n]);
                let t = topology(None);
                let mut inst = b.prepare(&context(&params, &p, &t)).unwrap();
                let samples = measure(&mut *inst);
                let best = samples
                    .iter()
                    .max_by(|a, b| {
                        (a.work / a.elapsed_ns as f64).total_cmp(&(b.work / b.elapsed_ns as f64))
                    })
                    .unwrap();
                eprintln!(
                    "{:10} threads={n}: {:.3} GOPS, ops/cycle {:?} at {:?} MHz, spread {:?} ns, \
                     cpu {:.3} s/s",
                    info.name,
                    best.work / best.elapsed_ns as f64,
                    best.metrics.get("ops_per_cycle"),
                    best.metrics.get("freq_mhz"),
                    best.start_spread_ns,
                    best.cpu_ns.unwrap() as f64 / best.elapsed_ns as f64,
                );
            }
        }
    }
}
