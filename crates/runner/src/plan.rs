//! Which cells a run measures: benchmarks x parameter sets x placements, in order.
//!
//! Suites:
//! * `quick`: every benchmark once per placement with its quick parameters (small
//!   buffers, few events), measured with `RunConfig::quick()`: a smoke test in seconds.
//! * `default`: every benchmark once per placement with default parameters.
//! * `full`: `default` plus the sweeps of the papers' figures, which each benchmark
//!   names itself ([`Benchmark::sweep`]): compute and memory bandwidth over thread
//!   counts 1, 2, 3, 4, 6, 8, ... on `all` (paper 002 Figs 1-6), the memory latency
//!   working-set sweep on `1c1t` (cache levels), and detached thread creation beside
//!   joinable (paper 002 Fig 9).
//!
//! The plan only names cells; whether a placement fits the machine and whether a
//! benchmark can run on it is found out when the cell is measured, and recorded.

use std::collections::BTreeMap;

use smtlab_bench::Benchmark;
use smtlab_model::{CellKey, Topology};

pub use smtlab_bench::Suite;

/// The parameter values of `bench` for `suite` (defaults or quick values).
fn base_params(bench: &dyn Benchmark, suite: Suite) -> BTreeMap<String, String> {
    bench
        .info()
        .params
        .into_iter()
        .map(|p| {
            let v = match (suite, p.quick) {
                (Suite::Quick, Some(q)) => q,
                _ => p.default,
            };
            (p.name, v)
        })
        .collect()
}

fn key(bench: &str, params: &BTreeMap<String, String>, placement: &str) -> CellKey {
    CellKey {
        benchmark: bench.to_string(),
        params: params.clone(),
        placement: placement.to_string(),
    }
}

/// `threads=auto` on `all` already is the full width: a sweep point at that width on
/// `all` measures the same thing again when the run has `all`.
fn duplicates_all_at_full_width(
    base: &BTreeMap<String, String>,
    params: &BTreeMap<String, String>,
    placement: Option<&str>,
    placements: &[String],
    topo: &Topology,
) -> bool {
    placement == Some("all")
        && placements.iter().any(|p| p == "all")
        && base.get("threads").map(String::as_str) == Some("auto")
        && params.get("threads") == Some(&topo.cpus.len().to_string())
        && params
            .iter()
            .all(|(k, v)| k == "threads" || base.get(k) == Some(v))
}

/// The cells of a run, in measuring order: benchmark by benchmark (catalog order), and
/// within one benchmark every parameter set on every placement, so a benchmark's
/// placements are measured close together in time.
pub fn plan(
    suite: Suite,
    benches: &[Box<dyn Benchmark>],
    placements: &[String],
    topo: &Topology,
) -> Vec<CellKey> {
    let mut cells = Vec::new();
    for bench in benches {
        if !bench.in_suite(suite) {
            continue;
        }
        let name = bench.info().name;
        let base = base_params(bench.as_ref(), suite);
        for placement in placements {
            cells.push(key(&name, &base, placement));
        }
        for extra in bench.sweep(suite, topo) {
            let mut p = base.clone();
            p.extend(extra.params.iter().cloned());
            if duplicates_all_at_full_width(&base, &p, extra.placement.as_deref(), placements, topo)
            {
                continue;
            }
            match &extra.placement {
                Some(on) => cells.push(key(&name, &p, on)),
                None => {
                    for placement in placements {
                        cells.push(key(&name, &p, placement));
                    }
                }
            }
        }
    }
    // A sweep point can coincide with a base cell (the latency sweep ends at the default size).
    let mut seen = std::collections::BTreeSet::new();
    cells.retain(|c| seen.insert(c.clone()));
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topology {
        smtlab_fixtures::build::cpus_only(0..4)
    }

    fn benches(names: &[&str]) -> Vec<Box<dyn Benchmark>> {
        names
            .iter()
            .map(|n| crate::catalog::find(n).expect("in the catalog"))
            .collect()
    }

    #[test]
    fn suites_parse_and_name_themselves() {
        assert_eq!("full".parse::<Suite>().unwrap(), Suite::Full);
        assert!(
            "fast"
                .parse::<Suite>()
                .unwrap_err()
                .contains("quick, default or full")
        );
        assert_eq!(Suite::Quick.to_string(), "quick");
    }

    #[test]
    fn default_plan_is_benchmarks_times_placements_in_order() {
        let p = plan(
            Suite::Default,
            &benches(&["null-syscall", "mem-read"]),
            &["1c1t".into(), "2c1t".into()],
            &topo(),
        );
        let names: Vec<(String, String)> = p
            .iter()
            .map(|c| (c.benchmark.clone(), c.placement.clone()))
            .collect();
        assert_eq!(
            names,
            [
                ("null-syscall", "1c1t"),
                ("null-syscall", "2c1t"),
                ("mem-read", "1c1t"),
                ("mem-read", "2c1t")
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        assert_eq!(p[2].params["size"], "auto");
    }

    #[test]
    fn quick_plan_uses_quick_values() {
        let p = plan(
            Suite::Quick,
            &benches(&["mem-read"]),
            &["1c1t".into()],
            &topo(),
        );
        assert_eq!(p.len(), 1);
        assert_ne!(p[0].params["size"], "auto");
    }

    #[test]
    fn full_plan_adds_thread_and_size_sweeps_without_duplicates() {
        let p = plan(
            Suite::Full,
            &benches(&["int-ops", "mem-latency", "pthread-create"]),
            &["1c1t".into(), "all".into()],
            &topo(),
        );
        let threads: Vec<&str> = p
            .iter()
            .filter(|c| c.benchmark == "int-ops" && c.placement == "all")
            .map(|c| c.params["threads"].as_str())
            .collect();
        assert_eq!(threads, ["auto", "1", "2", "3"]);
        let sizes = p
            .iter()
            .filter(|c| c.benchmark == "mem-latency" && c.params["size"] != "auto")
            .count();
        assert!(sizes >= 8, "a working-set sweep from 4 KiB: {sizes}");
        assert!(
            p.iter()
                .any(|c| c.params.get("mode").map(String::as_str) == Some("detached"))
        );
        let unique: std::collections::BTreeSet<_> = p.iter().collect();
        assert_eq!(unique.len(), p.len());
    }
}
