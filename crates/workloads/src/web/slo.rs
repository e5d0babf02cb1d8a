//! `web-slo`: a web server's capacity at a latency target, the figure an operator
//! sizes a service by: the highest open-loop request rate at which the target
//! percentile of the latency stays within the target (`slo=p99=5ms`), with no errors
//! and the offered load really sent and served. Found by [`super::capacity::search`]
//! over the rate: doubling from a low rate until a step misses the target, then
//! bisection to 5%. Each step is a fresh open-loop load with its own warm-up, so the
//! latency counts the waiting a request does when the server falls behind (wrk2's
//! coordinated-omission rule).
//!
//! The requests are `web-static`'s file set (four size classes, popularity skew) on the
//! built-in servers, nginx/Apache, or your own server (`server=cmd`, as `web-static`'s). A sample's value is the capacity in requests per
//! second; its series `p_by_rate` keeps every step (offered rate, measured percentile
//! in ns), so the search can be checked.
//!
//! `rate=R` measures one step at R requests per second instead of searching: the
//! latency at that offered load, the sample's value the rate served, with `web-static
//! rate=R`'s figures ([`super::open_loop_sample`]); `smtlab advise --slo` sweeps it
//! below the capacity it found.
//!
//! With `--client-hosts` the load comes from smtlab agents on other hosts: each step
//! is one load of all of them (the rate shared out, their histograms merged), and the
//! sample carries each agent's requests per second over the search.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use smtlab_bench::params::declare as p;
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_loadgen::{LoadConfig, LoadReport};
use smtlab_model::slo::Slo;
use smtlab_model::{BenchInfo, Direction, ValueKind};

use super::capacity::{search, step_seconds};
use super::{AgentTally, Custom, Loaded, Served};

const NAME: &str = "web-slo";
/// The search's rate unit: rates are multiples of it.
const RATE_UNIT_PER_S: f64 = 50.0;
/// The first rate tried.
const START_PER_S: f64 = 400.0;

/// Whether one step's load met `slo`: every request answered without error, at least
/// 95% of the offered rate served, and the percentile within the target.
fn met(slo: &Slo, offered_per_s: f64, r: &LoadReport) -> bool {
    if r.error_count() > 0 || r.requests == 0 {
        return false;
    }
    if r.requests_per_s() < 0.95 * offered_per_s {
        return false;
    }
    percentile_ns(r, slo.pct) <= slo.max_ns
}
fn percentile_ns(r: &LoadReport, pct: f64) -> u64 {
    r.latency.value_at_quantile(pct / 100.0)
}

pub struct WebSlo;

impl Benchmark for WebSlo {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "web".into(),
            unit: "req/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1.0 },
            description: "Capacity at a latency target: the highest open-loop rate of \
                          web-static requests whose latency percentile stays within the \
                          target (slo=p99=5ms), without errors"
                .into(),
            origin: "smtlab (PerfKitBenchmarker-style latency-bounded search)".into(),
            params: vec![
                p(
                    "server",
                    "event",
                    None,
                    "event | threads | processes | seda | nginx | apache-prefork | apache-event | cmd (your own, as web-static's)",
                ),
                p(
                    "cmd",
                    "",
                    None,
                    "server=cmd: your server's command, run by sh on the placement; {port} and {root} (the file set) are filled in",
                ),
                super::cmd_port_param(),
                p("slo", "p99=5ms", None, "the latency target: pNN=TIME"),
                p("dataset", "64MiB", Some("8MiB"), "file set size"),
                p(
                    "step",
                    "2",
                    Some("0.3"),
                    "measured seconds per search step (plus a quarter of it as warm-up)",
                ),
                p(
                    "conns",
                    "64",
                    Some("16"),
                    "connections carrying the open-loop load",
                ),
                p(
                    "max_rate",
                    "200000",
                    Some("20000"),
                    "the search's upper bound, requests per second",
                ),
                p(
                    smtlab_model::metrics::web::RATE_PARAM,
                    "0",
                    None,
                    "no search: one open-loop step at this many requests per second, its latency percentiles (0: search the capacity)",
                ),
                crate::irq_param(),
            ],
            main_param: Some("server".into()),
            report: Default::default(),
        }
    }

    fn client_side(&self) -> bool {
        true
    }

    fn remote_clients(&self) -> bool {
        true
    }

    /// A search per sample is long: `run` measures it in the full suite only; `smtlab
    /// advise web-slo --slo p99=5ms` measures it on its own.
    fn in_suite(&self, suite: smtlab_bench::Suite) -> bool {
        suite == smtlab_bench::Suite::Full
    }

    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let step = ctx.params.get_f64("step")?;
        let max = ctx.params.get_f64("max_rate")?.max(START_PER_S);
        let steps = (max / START_PER_S).log2().ceil() + 1.0 + 5.0;
        Ok(crate::load_cost(steps * step * 1.25, 0.2))
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let prm = ctx.params;
        let server = prm.get_str("server")?.to_string();
        let text = prm.get_str("slo")?;
        let slo = Slo::parse(text)
            .map_err(|_| crate::bad_param("slo", text, "pNN=TIME, e.g. p99=5ms"))?;
        let dataset = prm.get_bytes("dataset")?;
        let step = step_seconds(prm)?;
        let conns = crate::bounded(prm, "conns", 1, 10_000)? as usize;
        let max_rate = prm.get_f64("max_rate")?;
        if !(START_PER_S..=10_000_000.0).contains(&max_rate) {
            return Err(crate::bad_param(
                "max_rate",
                max_rate,
                "400 to 10000000 requests per second",
            ));
        }
        let rate = prm.get_f64(smtlab_model::metrics::web::RATE_PARAM)?;
        if !(rate == 0.0 || (1.0..=10_000_000.0).contains(&rate)) {
            return Err(crate::bad_param(
                smtlab_model::metrics::web::RATE_PARAM,
                rate,
                "0 (search) or 1 to 10000000 requests per second",
            ));
        }
        let custom = Custom {
            cmd: prm.get_str("cmd")?.to_string(),
            port: crate::cmd_port(prm)?,
            ..Custom::default()
        };
        let client = ctx.client_side(NAME)?;
        let threads = client.cpus().len();
        let served = super::serve(ctx, NAME, &server, &custom, dataset, threads, true, false)?;
        let mut cfg = LoadConfig::new(served.addr, conns, Duration::from_secs_f64(step));
        cfg.warmup = Duration::from_secs_f64(step / 4.0);
        // Agents: 0, one thread per agent CPU.
        cfg.threads = served.driver.threads().min(conns);
        Ok(Box::new(SloInstance {
            cfg,
            served,
            slo,
            max_units: (max_rate / RATE_UNIT_PER_S) as usize,
            rate: (rate > 0.0).then_some(rate),
            seed: 0,
        }))
    }
}

struct SloInstance {
    cfg: LoadConfig,
    served: Served,
    slo: Slo,
    max_units: usize,
    /// One open-loop step at this rate instead of the search.
    rate: Option<f64>,
    seed: u64,
}

impl SloInstance {
    /// One open-loop load at `rate` with `seed`: its settings and what it counted.
    fn open_loop(&mut self, rate: f64, seed: u64) -> Result<(LoadConfig, Loaded), BenchError> {
        let mut cfg = self.cfg.clone();
        cfg.rate_per_s = Some(rate);
        cfg.seed = seed;
        let loaded = self
            .served
            .driver
            .run(&cfg)
            .map_err(|reason| BenchError::check(NAME, reason))?;
        Ok((cfg, loaded))
    }

    /// One open-loop step at `rate`: its latency figures, the value the rate served.
    fn one_step(&mut self, rate: f64) -> Result<RawSample, BenchError> {
        self.seed += 1;
        let (cfg, loaded) = self.open_loop(rate, self.seed)?;
        let r = loaded.report();
        let mut s = super::open_loop_sample(rate, &cfg, r);
        // The value is requests per second served (req/s, as the capacity is).
        s.work = r.requests as f64;
        Ok(s)
    }
}

impl Instance for SloInstance {
    fn sample(&mut self, _iterations: u64) -> Result<RawSample, BenchError> {
        if let Some(rate) = self.rate {
            return self.one_step(rate);
        }
        let started = Instant::now();
        let mut steps: Vec<f64> = Vec::new();
        let mut errors = 0u64;
        // The first step, to say why the search found nothing.
        let mut first: Option<String> = None;
        let mut tally = AgentTally::default();
        let start = (START_PER_S / RATE_UNIT_PER_S) as usize;
        let result = search(start, self.max_units, 1.0, |units| {
            let rate = units as f64 * RATE_UNIT_PER_S;
            let (_, loaded) = self.open_loop(rate, units as u64)?;
            let r = loaded.tallied(&mut tally);
            errors += r.error_count();
            if first.is_none() {
                first = Some(format!(
                    "p{} {:.2} ms, {:.0} of {rate:.0} requests/s served, {} errors, {} unsent",
                    self.slo.pct,
                    percentile_ns(r, self.slo.pct) as f64 / 1e6,
                    r.requests_per_s(),
                    r.error_count(),
                    r.unsent
                ));
            }
            steps.extend([rate, percentile_ns(r, self.slo.pct) as f64]);
            Ok::<f64, BenchError>(if met(&self.slo, rate, r) { 1.0 } else { 0.0 })
        })?;
        let elapsed_ns = started.elapsed().as_nanos().max(1) as u64;
        let mut metrics = result.metrics(NAME, || {
            format!(
                "even {START_PER_S} requests/s missed the target: {}",
                first.unwrap_or_default()
            )
        })?;
        let capacity = result.capacity as f64 * RATE_UNIT_PER_S;
        if result.capped {
            // `max_rate` met the target: the search's range ended, not the server.
            metrics.insert(smtlab_model::metrics::limit::RANGE_END.into(), capacity);
        }
        metrics.insert("errors".into(), errors as f64);
        metrics.insert("slo_ns".into(), self.slo.max_ns as f64);
        if let Some(remote) = self.served.driver.remote() {
            tally.insert_into(remote, &mut metrics);
        }
        let mut series = BTreeMap::new();
        series.insert("p_by_rate".into(), steps);
        Ok(RawSample {
            elapsed_ns,
            work: capacity * elapsed_ns as f64 / 1e9,
            metrics,
            series,
            ..RawSample::default()
        })
    }

    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }
}
