//! Co-running two workloads: the interference of one hardware thread's work on another's
//! (paper 003's inter-thread conflicts and constructive sharing, measured instead of
//! simulated; paper 000's question of which loads pair well on a core).
//!
//! A cell of `smtlab corun` measures workload A on one CPU while workload B, the
//! *partner*, runs on another (or on several: `predict`'s `dram-wide` ruler). [`CoRun`] is
//! an ordinary [`Benchmark`] whose samples are A's: its `prepare` prepares A on the
//! placement's first CPU and starts a [`Partner`] thread that prepares B on the
//! placement's other CPUs (a benchmark of `threads=auto` runs a worker on each) and
//! samples it in a loop (a server workload as the partner drives its load from a
//! [`ClientSide`] of its own on the cell's client CPUs). The partner only runs while A
//! samples ([`Partner::begin`] .. [`Partner::end`]), so cells of the same workload in
//! different [`Form`](smtlab_model::keys::Form)s can be interleaved
//! (`smtlab_runner::session`) without one cell's partner disturbing another cell's samples:
//!
//! 1. `begin`: the partner is released and A waits until it has started a sample, so A
//!    never runs its first nanoseconds alone;
//! 2. A's sample runs;
//! 3. `end`: the partner finishes its current sample and parks; A's sample returns only
//!    then, so the next cell starts on a quiet partner CPU.
//!
//! The partner's samples that both start and end inside A's sample are its throughput
//! while co-running; they go into A's sample as metrics ([`PARTNER_VALUE`] in B's unit),
//! so one cell gives both sides of the pair. With [`CoRun::partner_reference`] the
//! partner then runs alone (A idle) for as long as A's sample took, which gives its
//! reference on its own CPU, interleaved with its co-run windows
//! ([`PARTNER_ALONE_VALUE`]). Partner samples are calibrated to about
//! [`PARTNER_SAMPLE_NS`], a tenth of the runner's sample length, so several fit in each
//! of A's samples.
//!
//! The statistics of the cells (slowdowns, the symbiosis matrix, the penalty) are in
//! `smtlab_report::corun`, which reads the metrics and series named here.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use smtlab_bench::client::ClientSide;
use smtlab_bench::{
    BenchContext, BenchError, Benchmark, CellCost, Holding, Instance, Params, RawSample,
};
use smtlab_model::stats;
use smtlab_model::{BenchInfo, ResolvedPlacement, Topology};

use smtlab_bench::value::sample_value;

pub mod command;

/// Length a partner sample is calibrated to.
pub const PARTNER_SAMPLE_NS: u64 = 1_000_000;
/// The metric and series names a co-run writes (`PARTNER_ALONE_VALUE` only with
/// [`CoRun::partner_reference`]); the report reads them by the same constants.
pub use smtlab_model::metrics::corun::{
    PARTNER_ALONE_VALUE, PARTNER_SAMPLES, PARTNER_VALUE, RUN_NS,
};
/// Longest a partner may take to prepare and calibrate, or to finish a sample.
const PARTNER_WAIT: Duration = Duration::from_secs(60);

/// The CPUs a co-run uses: the measured CPU, its SMT sibling, a CPU of another core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPair {
    pub cpu: u32,
    /// The sibling of `cpu`, or why there is none.
    pub sibling: Result<u32, NoPartnerCpu>,
    /// A CPU of another core (of the same package where there is one), or why there is none.
    pub other_core: Result<u32, NoPartnerCpu>,
}

/// Why a co-run form has no CPU for the partner; one line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoPartnerCpu {
    #[error(
        "no SMT sibling of CPU {cpu} (smt/control: {control}): the sibling form needs two \
         hardware threads on one core"
    )]
    NoSibling { cpu: u32, control: String },
    #[error("only one core: the two-core form needs a second core")]
    OneCore,
}

/// Picks the CPUs of the forms: the first CPU of the first core, its first sibling and
/// the first CPU of the next core.
pub fn cpu_pair(topo: &Topology) -> Result<CpuPair, NoCpuPair> {
    let mut cores = topo.cores();
    let first = cores
        .next()
        .ok_or_else(|| NoCpuPair("the topology has no cores".into()))?;
    let cpu = first
        .cpus
        .first()
        .ok_or_else(|| NoCpuPair("the first core has no online CPU".into()))?;
    let sibling = first
        .cpus
        .iter()
        .find(|&c| c != cpu)
        .ok_or_else(|| NoPartnerCpu::NoSibling {
            cpu,
            control: topo.smt.control.as_deref().unwrap_or("absent").to_string(),
        });
    let package = topo.package_index_of(cpu);
    let others: Vec<u32> = topo
        .cores()
        .skip(1)
        .filter_map(|c| c.cpus.first())
        .collect();
    let other_core = others
        .iter()
        .copied()
        .find(|&c| topo.package_index_of(c) == package)
        .or_else(|| others.first().copied())
        .ok_or(NoPartnerCpu::OneCore);
    Ok(CpuPair {
        cpu,
        sibling,
        other_core,
    })
}

/// A placement of exactly the given CPUs (the measured CPU first).
pub fn placement_of(name: &str, cpus: &[u32], topo: &Topology) -> ResolvedPlacement {
    let cores = {
        let mut ids: Vec<_> = cpus
            .iter()
            .filter_map(|&c| topo.core_of(c).map(|core| core.cpus.first()))
            .collect();
        ids.sort();
        ids.dedup();
        ids.len().max(1) as u32
    };
    let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
    ResolvedPlacement {
        name: name.to_string(),
        spec: format!("cpus:{}", list.join(",")),
        cpus: cpus.to_vec(),
        cores,
        threads_per_core: (cpus.len() as u32).div_ceil(cores),
        packages: 1,
        core_order: Default::default(),
        cpu_order: Default::default(),
        core_kinds: Vec::new(),
    }
}

/// The placement one side of a co-run is prepared on: exactly `cpus` (`cpu3` for one,
/// `cpu2,3` for several), with the base placement's orders and core kinds.
fn side(cpus: &[u32], base: &ResolvedPlacement, topo: &Topology) -> ResolvedPlacement {
    let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
    ResolvedPlacement {
        core_order: base.core_order,
        cpu_order: base.cpu_order,
        core_kinds: base.core_kinds.clone(),
        ..placement_of(&format!("cpu{}", list.join(",")), cpus, topo)
    }
}

/// What the partner did during one of A's samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartnerWindow {
    /// Values (in the partner's unit) of the partner samples wholly inside A's sample.
    pub values: Vec<f64>,
    /// The work those samples did, and when the first began and the last ended: the
    /// partner's throughput over the window with the time it waited between samples
    /// (descheduled, say) included, which the samples' own values leave out.
    pub work: f64,
    pub first_start_ns: Option<u64>,
    pub last_end_ns: u64,
}

#[derive(Default)]
struct State {
    ready: bool,
    run: bool,
    quit: bool,
    busy: bool,
    a_active: bool,
    a_gen: u64,
    window: PartnerWindow,
    error: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until `done` holds or the partner failed; a timeout is an error too.
    fn wait_for<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        what: &str,
        done: impl Fn(&State) -> bool,
    ) -> Result<MutexGuard<'a, State>, String> {
        let deadline = Instant::now() + PARTNER_WAIT;
        while !done(&st) {
            if let Some(e) = &st.error {
                return Err(e.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("timed out waiting for the partner to {what}"));
            }
            st = self
                .cv
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(st)
    }
}

/// A workload sampled in a loop on its own thread while another is measured.
pub struct Partner {
    name: String,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    iterations: u64,
    /// How long one of its samples took, timed once after its calibration.
    sample_ns: u64,
}

/// What a partner's thread does with the instance it prepared: tests give fakes.
pub type Prepare = Box<dyn FnOnce() -> Result<Box<dyn Instance>, BenchError> + Send>;

impl Partner {
    /// Starts `bench` prepared on a placement of exactly `cpus` (its thread pinned to
    /// them too: a benchmark of `threads=auto` runs a worker on each), calibrates its
    /// sample length and parks it until [`Partner::begin`]. A server workload drives
    /// its load from `client`, which lives as long as its instance.
    pub fn start(
        bench: Arc<dyn Benchmark>,
        params: Params,
        cpus: &[u32],
        base: &ResolvedPlacement,
        topo: &Topology,
        client: Option<ClientSide>,
    ) -> Result<Partner, BenchError> {
        let info = bench.info();
        let placement = side(cpus, base, topo);
        let topo = topo.clone();
        let prepare: Prepare = Box::new(move || {
            match placement.cpus.as_slice() {
                &[cpu] => smtlab_placement::pin::pin_current_thread_to(cpu)?,
                cpus => smtlab_placement::pin::pin_current_thread(&cpus.iter().copied().collect())?,
            }
            let ctx = BenchContext {
                params: &params,
                placement: &placement,
                topology: &topo,
                client: client.as_ref(),
            };
            let instance = bench.prepare(&ctx)?;
            // The instance (which stops its load) goes before the client side (whose
            // spawner ties the load's processes to it).
            Ok(match client {
                Some(held) => Box::new(Holding { instance, held }),
                None => instance,
            })
        });
        Partner::spawn(info, prepare)
    }

    /// Starts a partner whose instance `prepare` makes, on a new thread.
    pub fn spawn(info: BenchInfo, prepare: Prepare) -> Result<Partner, BenchError> {
        let name = info.name.clone();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        });
        let iterations = Arc::new(Mutex::new((0u64, 0u64)));
        let thread = {
            let shared = Arc::clone(&shared);
            let iterations = Arc::clone(&iterations);
            std::thread::Builder::new()
                .name(format!("partner-{name}"))
                .spawn(move || partner_loop(&shared, &info, prepare, &iterations))
                .map_err(|source| {
                    BenchError::io(&name, "cannot start the partner thread", source)
                })?
        };
        let mut partner = Partner {
            name,
            shared,
            thread: Some(thread),
            iterations: 0,
            sample_ns: 0,
        };
        let ready = {
            let st = partner.shared.lock();
            partner
                .shared
                .wait_for(st, "prepare", |s| s.ready)
                .map(drop)
        };
        if let Err(reason) = ready {
            return Err(partner.failure(reason)); // dropping it joins the thread
        }
        (partner.iterations, partner.sample_ns) =
            *iterations.lock().unwrap_or_else(|p| p.into_inner());
        Ok(partner)
    }

    fn failure(&self, reason: String) -> BenchError {
        BenchError::unsupported(&self.name, format!("as the partner: {reason}"))
    }

    /// Iterations per partner sample, from its calibration.
    pub fn iterations(&self) -> u64 {
        self.iterations
    }

    /// How long one of its samples takes (timed once, alone, after its calibration).
    pub fn sample_ns(&self) -> u64 {
        self.sample_ns
    }

    /// Releases the partner and returns once it is inside a sample.
    pub fn begin(&self) -> Result<(), BenchError> {
        let mut st = self.shared.lock();
        st.run = true;
        st.window = PartnerWindow::default();
        self.shared.cv.notify_all();
        let mut st = self
            .shared
            .wait_for(st, "start a sample", |s| s.busy)
            .map_err(|r| self.failure(r))?;
        st.a_active = true;
        st.a_gen += 1;
        Ok(())
    }

    /// Samples the partner finished wholly since [`Partner::begin`], so far.
    pub fn samples_so_far(&self) -> usize {
        self.shared.lock().window.values.len()
    }

    /// Parks the partner (waiting for its current sample to end) and returns what it did
    /// since [`Partner::begin`].
    pub fn end(&self) -> Result<PartnerWindow, BenchError> {
        let mut st = self.shared.lock();
        st.a_active = false;
        st.run = false;
        let window = std::mem::take(&mut st.window);
        self.shared.cv.notify_all();
        drop(
            self.shared
                .wait_for(st, "finish its sample", |s| !s.busy)
                .map_err(|r| self.failure(r))?,
        );
        Ok(window)
    }
}

impl Drop for Partner {
    fn drop(&mut self) {
        {
            let mut st = self.shared.lock();
            st.quit = true;
            st.run = false;
            self.shared.cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The partner's thread: prepare, calibrate and time one sample (stored in
/// `calibrated`: iterations and nanoseconds), then sample whenever released.
fn partner_loop(
    shared: &Shared,
    info: &BenchInfo,
    prepare: Prepare,
    calibrated: &Mutex<(u64, u64)>,
) {
    let started = || -> Result<_, BenchError> {
        let mut instance = prepare()?;
        let n = calibrate(instance.as_mut(), PARTNER_SAMPLE_NS)?;
        // A pass over a large buffer is one sample whatever the calibration asks: its
        // length tells A how long its own samples must be to hold several.
        let sample_ns = instance.sample(n)?.elapsed_ns;
        Ok((instance, n, sample_ns))
    };
    let (mut instance, n, sample_ns) = match started() {
        Ok(started) => started,
        Err(e) => {
            let mut st = shared.lock();
            st.error = Some(e.to_string());
            st.busy = false;
            shared.cv.notify_all();
            return;
        }
    };
    *calibrated.lock().unwrap_or_else(|p| p.into_inner()) = (n, sample_ns);
    {
        let mut st = shared.lock();
        st.ready = true;
        shared.cv.notify_all();
    }
    loop {
        let generation = {
            let mut st = shared.lock();
            while !st.run && !st.quit {
                st = shared.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.quit {
                break;
            }
            st.busy = true;
            shared.cv.notify_all();
            st.a_active.then_some(st.a_gen)
        };
        let started_ns = smtlab_bench::clock::now_ns();
        let sample = instance.sample(n);
        let ended_ns = smtlab_bench::clock::now_ns();
        let mut st = shared.lock();
        st.busy = false;
        match sample {
            Ok(raw) => {
                let inside = generation.is_some_and(|g| st.a_active && st.a_gen == g);
                if inside && let Ok(v) = sample_value(info.value_kind, &raw) {
                    let w = &mut st.window;
                    w.values.push(v.value);
                    w.work += raw.work;
                    w.first_start_ns.get_or_insert(started_ns);
                    w.last_end_ns = ended_ns;
                }
            }
            Err(e) => {
                st.error = Some(e.to_string());
                shared.cv.notify_all();
                break;
            }
        }
        shared.cv.notify_all();
    }
    // The instance (and any workers it started) is dropped here, on the partner's
    // thread, before the thread ends and `Drop for Partner` returns.
    drop(instance);
}

/// Iterations for a sample of at least `target_ns` (the instance's own count when it
/// fixes one): partner samples, and the fixed piece of work of the single-thread penalty.
pub fn calibrate(instance: &mut dyn Instance, target_ns: u64) -> Result<u64, BenchError> {
    if let Some(n) = instance.fixed_iterations() {
        return Ok(n.max(1));
    }
    let mut n: u64 = 1;
    loop {
        let raw = instance.sample(n)?;
        if raw.elapsed_ns >= target_ns || n >= 1 << 40 {
            return Ok(n);
        }
        let grow = target_ns
            .checked_div(raw.elapsed_ns)
            .map_or(16, |g| g.clamp(2, 16));
        n = n.saturating_mul(grow);
    }
}

/// The partner of a [`CoRun`]: which benchmark, with which parameters.
#[derive(Clone)]
pub struct PartnerSpec {
    pub bench: Arc<dyn Benchmark>,
    pub params: Params,
}

/// Workload A measured with an optional partner on the placement's other CPUs (see the
/// module documentation). The placement is `[A's CPU]` alone, `[A's CPU, partner CPUs..]`
/// otherwise: a partner on several CPUs is prepared on all of them.
pub struct CoRun {
    pub a: Arc<dyn Benchmark>,
    pub partner: Option<PartnerSpec>,
    /// Iterations every sample of A runs (a fixed piece of work for the single-thread
    /// penalty), instead of the runner's calibration.
    pub fixed_iterations: Option<u64>,
    /// After each of A's samples, let the partner run alone for as long as A's sample
    /// took ([`PARTNER_ALONE_VALUE`]): the partner's own reference, on its CPU and
    /// interleaved. Doubles the cell's time.
    pub partner_reference: bool,
}

impl Benchmark for CoRun {
    fn info(&self) -> BenchInfo {
        self.a.info()
    }

    /// A server workload keeps its client side, as A or as the partner: the session
    /// places and starts it, and `prepare` hands it to A or a copy on the same CPUs to
    /// the partner. Two server workloads in one co-run are not measured.
    fn client_side(&self) -> bool {
        self.a.client_side() || self.partner_is_server()
    }

    /// Whether the server workload's client side may run on other hosts.
    fn remote_clients(&self) -> bool {
        match &self.partner {
            Some(p) if p.bench.client_side() => p.bench.remote_clients(),
            _ => self.a.remote_clients(),
        }
    }

    /// A's cost on its CPU and the partner's on its own: memory and setup of both (a
    /// partner of fixed samples times one when prepared), and A's sample as [`held`]
    /// makes it beside a partner of long samples. With [`CoRun::partner_reference`] a
    /// sample of known length lasts twice as long: the partner then runs alone as long.
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<CellCost, BenchError> {
        let cpus = &ctx.placement.cpus;
        let a_side = side(&cpus[..cpus.len().min(1)], ctx.placement, ctx.topology);
        let a = self.a.cost(&BenchContext {
            placement: &a_side,
            ..*ctx
        })?;
        let (Some(p), Some(others)) = (&self.partner, cpus.get(1..).filter(|o| !o.is_empty()))
        else {
            return Ok(a);
        };
        let b = p.bench.cost(&BenchContext {
            params: &p.params,
            placement: &side(others, ctx.placement, ctx.topology),
            topology: ctx.topology,
            client: None,
        })?;
        let held = b
            .sample_ns
            .filter(|&s| s >= LONG_PARTNER_NS)
            .filter(|_| self.fixed_iterations.is_none() && !self.a.client_side())
            .map(|s| s.saturating_mul(PARTNER_SAMPLES_PER_SAMPLE));
        let reference = if self.partner_reference { 2 } else { 1 };
        Ok(CellCost {
            memory_bytes: a.memory_bytes.saturating_add(b.memory_bytes),
            sample_ns: held.or(a.sample_ns).map(|s| s.saturating_mul(reference)),
            longest_sample_ns: match held {
                Some(_) => None,
                None => a.longest_sample_ns.map(|s| s.saturating_mul(reference)),
            },
            setup_ns: a.setup_ns + b.setup_ns + b.sample_ns.unwrap_or(0),
        })
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let bench = self.a.info().name;
        let unsupported = |reason: String| BenchError::unsupported(&bench, reason);
        let &cpu = ctx
            .placement
            .cpus
            .first()
            .ok_or_else(|| unsupported("a co-run needs a pinned placement".into()))?;
        // The partner first: a workload that cannot be a partner fails before A allocates.
        let partner = match &self.partner {
            None => None,
            Some(p) => {
                let others = &ctx.placement.cpus[1..];
                if others.is_empty() {
                    return Err(unsupported(
                        "a co-run with a partner needs a placement of two CPUs or more".into(),
                    ));
                }
                Some(Partner::start(
                    Arc::clone(&p.bench),
                    p.params.clone(),
                    others,
                    ctx.placement,
                    ctx.topology,
                    self.partner_client(ctx)?,
                )?)
            }
        };
        let placement = side(&[cpu], ctx.placement, ctx.topology);
        let mut a = self.a.prepare(&BenchContext {
            placement: &placement,
            ..*ctx
        })?;
        let fixed = match (&partner, self.fixed_iterations) {
            (Some(p), None) if !self.a.client_side() => held(a.as_mut(), p)?,
            (_, fixed) => fixed,
        };
        Ok(Box::new(CoRunInstance {
            a,
            partner,
            fixed,
            partner_reference: self.partner_reference,
        }))
    }
}

impl CoRun {
    fn partner_is_server(&self) -> bool {
        self.partner.as_ref().is_some_and(|p| p.bench.client_side())
    }

    /// A server partner's own client side, on the CPUs the session placed for the cell.
    fn partner_client(&self, ctx: &BenchContext<'_>) -> Result<Option<ClientSide>, BenchError> {
        let Some(p) = self.partner.as_ref().filter(|p| p.bench.client_side()) else {
            return Ok(None);
        };
        let partner = p.bench.info().name;
        if self.a.client_side() {
            return Err(BenchError::unsupported(
                self.a.info().name,
                format!(
                    "beside {partner}: two server workloads in one co-run would need two client sides"
                ),
            ));
        }
        let like = ctx.client_side(&partner)?.like();
        like.map(Some)
            .map_err(|e| BenchError::io(&partner, "cannot start its client side as the partner", e))
    }
}

/// Partner samples at least this long could not be cut to [`PARTNER_SAMPLE_NS`] (one
/// is a pass over a large buffer, or a pass over it on every CPU of a wide partner).
const LONG_PARTNER_NS: u64 = 2 * PARTNER_SAMPLE_NS;
/// A's samples beside such a partner last this many of the partner's samples, so that
/// whole ones fall inside each (the partner's figure counts only those).
const PARTNER_SAMPLES_PER_SAMPLE: u64 = 5;

/// The iterations of A's samples beside a partner whose samples are long (`None`: the
/// runner's calibration, which makes them longer than a short partner sample already).
/// An A of fixed iterations (a command's run, a pass) runs a whole multiple of them.
fn held(a: &mut dyn Instance, partner: &Partner) -> Result<Option<u64>, BenchError> {
    if partner.sample_ns() < LONG_PARTNER_NS {
        return Ok(None);
    }
    let target = partner
        .sample_ns()
        .saturating_mul(PARTNER_SAMPLES_PER_SAMPLE);
    let Some(n) = a.fixed_iterations() else {
        return calibrate(a, target).map(Some);
    };
    let one = a.sample(n)?.elapsed_ns.max(1);
    Ok(Some(n.saturating_mul(target.div_ceil(one))))
}

/// A prepared [`CoRun`]; also usable directly with a fake A and a fake partner.
pub struct CoRunInstance {
    pub a: Box<dyn Instance>,
    pub partner: Option<Partner>,
    pub fixed: Option<u64>,
    /// See [`CoRun::partner_reference`].
    pub partner_reference: bool,
}

/// Runs `f`, adding the time it took to `waited`.
fn waiting<T>(waited: &mut Duration, f: impl FnOnce() -> T) -> T {
    let t0 = Instant::now();
    let out = f();
    *waited += t0.elapsed();
    out
}

impl Instance for CoRunInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        // Time spent waiting for the partner to start or finish a sample, which the
        // runner keeps out of the cell's budget (`RawSample::waited_ns`).
        let mut waited = Duration::ZERO;
        if let Some(p) = &self.partner {
            waiting(&mut waited, || p.begin())?;
        }
        let sampled = self.a.sample(iterations);
        let window = match &self.partner {
            Some(p) => Some(waiting(&mut waited, || p.end())?),
            None => None,
        };
        let mut raw = sampled?;
        raw.series
            .entry(RUN_NS.into())
            .or_default()
            .push(raw.elapsed_ns as f64);
        if let Some(w) = window {
            raw.metrics
                .insert(PARTNER_SAMPLES.into(), w.values.len() as f64);
            if let Some(m) = stats::mean(&w.values) {
                raw.metrics.insert(PARTNER_VALUE.into(), m);
            }
        }
        if let (Some(p), true) = (&self.partner, self.partner_reference) {
            waiting(&mut waited, || p.begin())?;
            std::thread::sleep(Duration::from_nanos(raw.elapsed_ns));
            let solo = waiting(&mut waited, || p.end())?;
            if let Some(m) = stats::mean(&solo.values) {
                raw.metrics.insert(PARTNER_ALONE_VALUE.into(), m);
            }
        }
        raw.waited_ns = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        Ok(raw)
    }

    fn fixed_iterations(&self) -> Option<u64> {
        self.fixed.or_else(|| self.a.fixed_iterations())
    }
}

/// Why this machine has no CPU to measure a co-run on (one CPU, none online).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct NoCpuPair(pub String);

#[cfg(test)]
mod tests;
