//! The evidence of the advice: each workload's figures read from a run's cells (the
//! SMT pairs, the whole machine, a capacity at a target, the single-thread cost, the
//! partners, the headroom).

use super::*;
use smtlab_model::placement::Named;

/// What the server placements' names start with (`half-cores-1t`, `half-cores-2t`).
const HALF_CORES: &str = "half-cores-";

/// A workload's name as the advice shows it: `int-ops threads=auto`.
pub fn workload_name(benchmark: &str, params: &BTreeMap<String, String>) -> String {
    if params.is_empty() {
        benchmark.to_string()
    } else {
        format!("{benchmark} {}", params_text(params))
    }
}

/// The headroom of a utilisation curve among `cells` (`smtlab util`, or `advise
/// --headroom`): at the step offering all of the measured maximum, what the OS reports
/// busy on the load's CPUs and the throughput still left (1 - achieved / maximum, with
/// its interval); SMT on where both states were measured.
pub fn headroom(cells: &[CellRecord]) -> Option<Headroom> {
    let points = crate::utilisation::curve(cells);
    let full = |state: &str| {
        points
            .iter()
            .find(|p| p.smt == state && p.offered_pct.is_some_and(|x| (x - 100.0).abs() < 1e-9))
    };
    let p = full("on").or_else(|| full("as found")).or_else(|| {
        points
            .iter()
            .find(|p| p.offered_pct.is_some_and(|x| (x - 100.0).abs() < 1e-9))
    })?;
    let r = p.of_max.as_ref()?;
    let busy = p.busy();
    if !busy.is_finite() {
        return None;
    }
    Some(Headroom {
        reported_busy_pct: busy * 100.0,
        left: Figure::with_ci(
            1.0 - r.ratio,
            r.ci95_high.map(|h| 1.0 - h),
            r.ci95_low.map(|l| 1.0 - l),
        ),
    })
}

/// Adds to each workload's evidence the placements it planned and could not measure,
/// with the reason (`2c1t: no CPU is left for the client side`), so an answer that
/// lacks a side names why rather than guessing.
pub fn add_unmeasured(evidence: &mut [Evidence], skipped: &[smtlab_model::SkippedCell]) {
    for s in skipped {
        let name = workload_name(&s.key.benchmark, &s.key.params);
        if let Some(e) = evidence.iter_mut().find(|e| e.workload == name) {
            e.unmeasured.push(format!(
                "{} was not measured: {}",
                s.key.placement, s.reason
            ));
        }
    }
}

/// The evidence of every workload among `cells` measured on at least two of the
/// placements the advice compares (or co-run), in order of first appearance; `smt`:
/// whether the machine has SMT. Utilisation steps are left out (they have no workload).
pub fn evidence(cells: &[CellRecord], smt: bool) -> Vec<Evidence> {
    let room = headroom(cells);
    let cells: Vec<&CellRecord> = cells
        .iter()
        .filter(|c| c.conditions.rate.is_none())
        .collect();
    let mut out: Vec<Evidence> = Vec::new();
    let mut seen: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    // Each workload's own cells, gathered in one pass (`smtlab fleet` asks this of
    // every host's run): neither co-runs nor points of a latency sweep, which belong
    // to their workload's evidence otherwise.
    let plain = cells
        .iter()
        .copied()
        .filter(|c| crate::corun::form_of(c).is_none() && offered_rate(c).is_none());
    for (key, mine) in crate::grouped(plain, |c| (c.benchmark.as_str(), &c.params)) {
        let mine = Mine { cells: mine };
        let e = workload_evidence(&cells, mine, key.0, key.1, smt);
        seen.push((key.0.to_string(), key.1.clone()));
        if measured(&e) {
            out.push(e);
        }
    }
    // A workload measured on `1c1t` alone is worth a row only when nothing in the run
    // compares (a server whose other placements left no CPU for its client); beside
    // compared workloads it is a sweep's point, not a question.
    if out.iter().any(compared) {
        out.retain(compared);
    }
    for e in &mut out {
        e.headroom.clone_from(&room);
    }
    add_co_run_only(&cells, &mut seen, &mut out, smt);
    out
}

/// Whether `e` answers anything: on `1c1t` alone (no SMT, no second core for it) the
/// answer says what it can.
fn measured(e: &Evidence) -> bool {
    e.single_threaded || compared(e) || (e.baseline.is_some() && !e.smt)
}

/// Whether `e` compares two placements, states or partners.
fn compared(e: &Evidence) -> bool {
    e.second_core.is_some()
        || e.sibling_gain.is_some()
        || e.machine_gain.is_some()
        || e.capacity.is_some()
        || e.penalty.is_some()
        || !e.partners.is_empty()
}

/// Workloads measured only in co-runs (a penalty run) get their answer too.
fn add_co_run_only(
    cells: &[&CellRecord],
    seen: &mut Vec<(String, BTreeMap<String, String>)>,
    out: &mut Vec<Evidence>,
    smt: bool,
) {
    for c in cells {
        if crate::corun::form_of(c).is_none()
            || out
                .iter()
                .any(|e| e.workload.split(' ').next() == Some(&c.benchmark))
        {
            continue;
        }
        if seen.iter().any(|(b, _)| *b == c.benchmark) {
            continue;
        }
        seen.push((c.benchmark.clone(), BTreeMap::new()));
        let e = Evidence {
            workload: workload_name(&c.benchmark, &c.params),
            smt,
            penalty: worst_penalty(cells, &c.benchmark),
            partners: partners(cells, &c.benchmark),
            ..Evidence::default()
        };
        if e.penalty.is_some() || !e.partners.is_empty() {
            out.push(e);
        }
    }
}

/// A workload's own cells: neither co-runs nor points of a latency sweep.
struct Mine<'c> {
    cells: Vec<&'c CellRecord>,
}

impl<'c> Mine<'c> {
    /// The cell on placement `name` in SMT `state` (`None`: any but off).
    fn find(&self, name: &str, state: Option<&str>) -> Option<&'c CellRecord> {
        self.cells.iter().copied().find(|o| {
            o.placement_spec == name
                && match state {
                    Some(s) => o.smt().map(|x| x.name()) == Some(s),
                    None => o.smt().is_none_or(|x| x.name() != "off"),
                }
        })
    }

    /// The first cell on half the cores with two or more threads each that `state` admits.
    fn half_smt(&self, state: impl Fn(&CellRecord) -> bool) -> Option<&'c CellRecord> {
        self.cells.iter().copied().find(|o| {
            o.placement_spec.starts_with(HALF_CORES)
                && o.placement.threads_per_core >= 2
                && state(o)
        })
    }

    /// The speed-up of a pair of placements on different CPUs, and its other cell.
    fn pair(&self, kind: PairKind) -> Option<(Figure, &'c CellRecord)> {
        let (b, o) = kind.placements();
        let (base, other) = (self.find(b, None)?, self.find(o, None)?);
        if base.placement.cpu_set() == other.placement.cpu_set() {
            return None;
        }
        verdict(base, other).map(|v| (Figure::from_verdict(&v), other))
    }
}

/// The evidence of workload `bench` with `params` among `cells`; `mine`: its own cells.
fn workload_evidence(
    cells: &[&CellRecord],
    mine: Mine<'_>,
    bench: &str,
    params: &BTreeMap<String, String>,
    smt: bool,
) -> Evidence {
    let mut e = Evidence {
        workload: workload_name(bench, params),
        smt,
        ..Evidence::default()
    };
    add_core_pairs(&mut e, &mine);
    add_machine_gain(&mut e, &mine);
    if e.machine_gain.is_some() && !e.smt {
        // Switched on for the run: the machine has SMT, even if off as found.
        e.smt = true;
    }
    let base = mine
        .find(Named::OneCore.name(), Some("off"))
        .or_else(|| mine.find(Named::OneCore.name(), None));
    e.baseline = base.map(baseline);
    if let (Some(b), Some(o)) = (base, mine.find(Named::Siblings.name(), None)) {
        e.latency = latency_at_load(b, o);
    }
    e.latency_sweeps = latency_sweeps(cells, bench, params);
    if let Some(slo) = params.get(SLO_PARAM) {
        add_capacity(&mut e, slo);
    }
    e.penalty = worst_penalty(cells, bench);
    e.partners = partners(cells, bench);
    e
}

/// What the sibling adds, what a second core adds, and the one against the other.
fn add_core_pairs(e: &mut Evidence, mine: &Mine<'_>) {
    if let Some((f, smt_cell)) = mine.pair(PairKind::SmtYield) {
        e.idle_sibling = idle_sibling(smt_cell);
        e.sibling_gain = Some(f);
    }
    match mine.pair(PairKind::SecondCore) {
        // One thread ran on the two cores: the second had nothing to do, so the
        // ratio is no measure of what a core adds.
        Some((_, two)) if two.result.cpus_used() == Some(1) => e.single_threaded = true,
        other => e.second_core = other.map(|(f, _)| f),
    }
    let (two_cores, siblings) = (Named::TwoCores.name(), Named::Siblings.name());
    if let (Some(core2), Some(sib)) = (mine.find(two_cores, None), mine.find(siblings, None))
        && sib.placement.threads_per_core >= 2
    {
        e.sibling_vs_core = verdict(core2, sib).map(|v| Figure::from_verdict(&v));
    }
}

/// The whole machine: SMT on over off on `all`, else half the cores switched (a
/// server's), else `all` over `cores`, else half the cores with one thread against all
/// of theirs.
fn add_machine_gain(e: &mut Evidence, mine: &Mine<'_>) {
    let one = Named::HalfCores.name();
    let states = mine
        .find(Named::All.name(), Some("off"))
        .zip(mine.find(Named::All.name(), Some("on")));
    // A server's, switched: half the cores, one thread each with SMT off against
    // all their threads with it on (`all` would leave its clients no CPU).
    let half_states = || {
        let off = mine.find(one, Some("off"))?;
        let on = mine.half_smt(|o| o.smt().map(|x| x.name()) == Some("on"))?;
        Some((off, on))
    };
    let states = match states {
        Some(s) => Some(s),
        None => half_states().inspect(|(_, on)| {
            e.machine_half = Some(on.placement_spec.clone());
        }),
    };
    e.machine_switched = states.is_some();
    e.machine_gain = match states {
        Some((off, on)) => verdict(off, on).map(|v| Figure::from_verdict(&v)),
        None => mine.pair(PairKind::MachineSmtGain).map(|(f, _)| f),
    };
    if e.machine_gain.is_some() || e.machine_switched {
        return;
    }
    // A server's whole-machine question: half the cores with one thread and with all
    // of them, its clients on the other half.
    let half = mine.find(one, None).zip(
        mine.half_smt(|o| o.placement_spec != one && o.smt().is_none_or(|x| x.name() != "off")),
    );
    if let Some((base, other)) = half
        && let Some(v) = verdict(base, other)
    {
        e.machine_gain = Some(Figure::from_verdict(&v));
        e.machine_half = Some(other.placement_spec.clone());
    }
}

/// The workload's own figure on `c`, for scale.
fn baseline(c: &CellRecord) -> Baseline {
    Baseline {
        placement: c.placement_spec.clone(),
        figure: Figure::of_mean(&c.result.summary, c.result.hold_back_reason()),
        unit: c.unit.clone(),
    }
}

/// A capacity at a latency target (`slo`): its SMT comparison is the capacity's, in
/// place of the throughput.
fn add_capacity(e: &mut Evidence, slo: &str) {
    let switched = e.machine_switched && e.machine_gain.is_some();
    let on_over_off = e
        .machine_gain
        .take()
        .or_else(|| (!e.idle_sibling).then(|| e.sibling_gain.clone()).flatten());
    e.sibling_gain = None;
    if let Some(f) = on_over_off {
        e.capacity = Some(Capacity {
            target: slo_words(slo),
            on_over_off: f,
            switched,
        });
    }
}

/// The p99 latencies of a server's samples on `base` and `other` (every sample of both
/// carries one), as [`LatencyAtLoad`].
fn latency_at_load(base: &CellRecord, other: &CellRecord) -> Option<LatencyAtLoad> {
    let p99 = |c: &CellRecord| {
        let xs = crate::html_workloads::cells::metric_values(
            c,
            smtlab_model::metrics::web::LATENCY_P99_NS,
        );
        if xs.is_empty() || xs.len() != c.result.samples.len() {
            return None;
        }
        smtlab_model::stats::summarize(&xs)
    };
    let (b, o) = (p99(base)?, p99(other)?);
    Some(LatencyAtLoad {
        placements: (base.placement_spec.clone(), other.placement_spec.clone()),
        base_ms: ms_figure(&b),
        ratio: smtlab_model::stats::ratio(&o, &b).map(|r| Figure::from_ratio(&r)),
    })
}

/// The offered rate of an open-loop cell (`rate=R` with R above 0), requests per second.
pub fn offered_rate(c: &CellRecord) -> Option<f64> {
    c.params
        .get(RATE_PARAM)?
        .parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r > 0.0)
}

/// `params` without the offered rate: the workload a sweep point belongs to.
fn without_rate(params: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut p = params.clone();
    p.remove(RATE_PARAM);
    p
}

/// The mean of `xs` (nanoseconds) in milliseconds with its 95% interval, never below 0.
fn mean_ms(xs: &[f64]) -> Option<Figure> {
    smtlab_model::stats::summarize(xs).map(|s| ms_figure(&s))
}

/// A summary of nanoseconds in milliseconds with its 95% interval: a latency is never
/// below zero, whatever a wide interval of three samples says.
fn ms_figure(s: &smtlab_model::Summary) -> Figure {
    let ms = 1e6;
    Figure::with_ci(
        s.mean / ms,
        (s.n > 1).then_some((s.mean - s.ci95_half_width).max(0.0) / ms),
        (s.n > 1).then_some((s.mean + s.ci95_half_width) / ms),
    )
}

/// One side of a sweep at `offered` requests per second: what `c`'s samples served and,
/// where every sample kept up, their percentiles.
pub fn sweep_side(c: &CellRecord, offered: f64) -> SweepSide {
    use smtlab_model::metrics::web as m;
    let samples = &c.result.samples;
    let metric = |s: &smtlab_model::SampleRecord, k: &str| s.metrics.get(k).copied();
    let total = |k: &str| -> u64 {
        samples
            .iter()
            .map(|s| metric(s, k).unwrap_or(0.0).max(0.0) as u64)
            .sum()
    };
    let served: Vec<f64> = samples
        .iter()
        .map(|s| metric(s, m::REQUESTS_PER_S).unwrap_or(0.0))
        .collect();
    let behind = served
        .iter()
        .filter(|x| **x < KEPT_UP_SHARE * offered)
        .count();
    let kept_up = !samples.is_empty()
        && behind == 0
        && samples.iter().all(|s| {
            metric(s, m::ERRORS).unwrap_or(0.0) == 0.0 && s.metrics.contains_key(m::LATENCY_P99_NS)
        });
    let pct = |k: &str| {
        if !kept_up {
            return None;
        }
        mean_ms(&crate::html_workloads::cells::metric_values(c, k))
    };
    SweepSide {
        placement: c.placement_spec.clone(),
        achieved_per_s: served.iter().sum::<f64>() / served.len().max(1) as f64,
        kept_up,
        errors: total(m::ERRORS),
        unsent: total(m::UNSENT),
        n: samples.len(),
        behind_samples: behind,
        p50_ms: pct(m::LATENCY_P50_NS),
        p99_ms: pct(m::LATENCY_P99_NS),
        p999_ms: pct(m::LATENCY_P999_NS),
    }
}

/// The latency sweeps of workload `bench` `params` among `cells`: its open-loop cells
/// (`rate=R`) on `1c1t` against `1c2t`, and on `half-cores-1t` against `half-cores-Kt`,
/// each rate with the sides measured at it.
fn latency_sweeps(
    cells: &[&CellRecord],
    bench: &str,
    params: &BTreeMap<String, String>,
) -> Vec<LatencySweep> {
    let base = without_rate(params);
    let points: Vec<&CellRecord> = cells
        .iter()
        .copied()
        .filter(|c| {
            c.benchmark == bench
                && offered_rate(c).is_some()
                && without_rate(&c.params) == base
                && crate::corun::form_of(c).is_none()
                && c.smt().is_none_or(|x| x.name() != "off")
        })
        .collect();
    let one = Named::HalfCores.name();
    let smt_side = |spec: &str| -> Option<String> {
        let other = if *spec == Named::OneCore {
            points.iter().find(|c| c.placement_spec == Named::Siblings)
        } else {
            points.iter().find(|c| {
                c.placement_spec.starts_with(HALF_CORES)
                    && c.placement_spec != one
                    && c.placement.threads_per_core >= 2
            })
        };
        other.map(|c| c.placement_spec.clone())
    };
    let mut out = Vec::new();
    for spec in [Named::OneCore.name(), one] {
        let Some(other) = smt_side(spec) else {
            continue;
        };
        let mut rates: Vec<f64> = points
            .iter()
            .filter(|c| c.placement_spec == spec)
            .filter_map(|c| offered_rate(c))
            .collect();
        rates.sort_by(f64::total_cmp);
        rates.dedup();
        let at = |p: &str, r: f64| {
            points
                .iter()
                .find(|c| c.placement_spec == p && offered_rate(c) == Some(r))
                .map(|c| sweep_side(c, r))
        };
        let pts: Vec<SweepPoint> = rates
            .into_iter()
            .map(|r| SweepPoint {
                offered_per_s: r,
                sides: [at(spec, r), at(&other, r)].into_iter().flatten().collect(),
            })
            .collect();
        if pts.iter().any(|p| p.sides.len() == 2) {
            out.push(LatencySweep {
                placements: (spec.to_string(), other),
                points: pts,
            });
        }
    }
    out
}

/// `p99=5ms` as `p99 <= 5ms`.
fn slo_words(slo: &str) -> String {
    match slo.split_once('=') {
        Some((p, t)) => format!("{} <= {}", p.trim(), t.trim()),
        None => slo.to_string(),
    }
}

/// The largest single-thread penalty of `task` next to a busy sibling.
fn worst_penalty(cells: &[&CellRecord], task: &str) -> Option<Partnered> {
    let owned: Vec<CellRecord> = cells
        .iter()
        .filter(|c| c.benchmark == task && crate::corun::form_of(c).is_some())
        .map(|c| (*c).clone())
        .collect();
    // A matrix cell names its partner even when alone; a penalty's alone cell names none.
    let is_penalty = owned
        .iter()
        .any(|c| crate::corun::form_of(c).is_some_and(|(f, p)| f == Form::Alone && p == "-"));
    if !is_penalty {
        return None;
    }
    crate::corun::penalties(&owned, task)
        .into_iter()
        .filter(|p| p.form == Form::Sibling)
        .filter_map(|p| p.ratio.map(|r| (p.hog, r)))
        .max_by(|a, b| a.1.ratio.total_cmp(&b.1.ratio))
        .map(|(hog, r)| Partnered {
            partner: hog,
            figure: Figure::from_ratio(&r),
            predicted_by_run: None,
        })
}

/// The co-run matrix's sibling entries of `a`: the pair's combined speed on one core.
fn partners(cells: &[&CellRecord], a: &str) -> Vec<Partnered> {
    let owned: Vec<CellRecord> = cells
        .iter()
        .filter(|c| crate::corun::form_of(c).is_some())
        .map(|c| (*c).clone())
        .collect();
    crate::corun::matrix(&owned)
        .into_iter()
        .filter(|en| en.a == a && en.form == Form::Sibling)
        .filter_map(|en| {
            let (sa, sb) = (en.slowdown?, en.partner_slowdown?);
            // 1/sA + 1/sB with the interval of each end: conservative bounds.
            let speed = |x: f64| 1.0 / x;
            let value = speed(sa.ratio) + speed(sb.ratio);
            let low = sa
                .ci95_high
                .zip(sb.ci95_high)
                .map(|(x, y)| speed(x) + speed(y));
            let high = sa
                .ci95_low
                .zip(sb.ci95_low)
                .map(|(x, y)| speed(x) + speed(y));
            Some(Partnered {
                partner: en.b,
                figure: Figure::with_ci(value, low, high),
                predicted_by_run: None,
            })
        })
        .collect()
}

/// Adds to each workload of `evidence` its partners among `names` that have no measured
/// figure, predicted by `doc` (a stored `predict` run) in the sibling form: the pair's
/// combined speed with its prediction interval, marked as predicted. Returns the
/// partners neither measured nor predicted.
pub fn add_predicted_partners(
    evidence: &mut [Evidence],
    doc: &crate::predict::ProfileDoc,
    names: &[String],
) -> Vec<String> {
    let mut missing = Vec::new();
    for e in evidence.iter_mut() {
        let bench = e.workload.split(' ').next().unwrap_or_default().to_string();
        for b in names {
            if e.partners.iter().any(|p| &p.partner == b) {
                continue;
            }
            let found = doc
                .predictions
                .iter()
                .find(|p| p.a == bench && &p.b == b && p.form == Form::Sibling)
                .and_then(|p| p.combined_speed.as_ref());
            match found {
                Some(c) => e.partners.push(Partnered {
                    partner: b.clone(),
                    figure: Figure::with_ci(c.value, c.low, c.high),
                    predicted_by_run: Some(doc.run),
                }),
                None if !missing.contains(b) => missing.push(b.clone()),
                None => {}
            }
        }
    }
    missing
}

/// Every workload's advice among a run's cells.
pub fn advise_run(r: &RunResults) -> Vec<Advice> {
    let mut e = evidence(&r.cells, r.run.topology.smt_visible());
    add_unmeasured(&mut e, &r.skipped);
    e.iter().map(decide).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(value: f64) -> Figure {
        Figure::new(value, value - 0.05, value + 0.05)
    }

    #[test]
    fn a_latency_target_takes_the_machine_gain_else_the_siblings_as_its_capacity() {
        let mut e = Evidence {
            machine_gain: Some(fig(1.2)),
            machine_switched: true,
            sibling_gain: Some(fig(1.1)),
            ..Evidence::default()
        };
        add_capacity(&mut e, "p99=5ms");
        let c = e.capacity.as_ref().expect("a capacity");
        assert_eq!(c.on_over_off, fig(1.2));
        assert!(c.switched);
        assert_eq!((e.machine_gain, e.sibling_gain), (None, None));
        let mut e = Evidence {
            sibling_gain: Some(fig(1.1)),
            ..Evidence::default()
        };
        add_capacity(&mut e, "p99=5ms");
        let c = e.capacity.as_ref().expect("a capacity");
        assert_eq!((c.on_over_off.value, c.switched), (1.1, false));
        // A sibling left idle measures no capacity with SMT.
        let mut e = Evidence {
            sibling_gain: Some(fig(1.1)),
            idle_sibling: true,
            ..Evidence::default()
        };
        add_capacity(&mut e, "p99=5ms");
        assert_eq!((e.capacity, e.sibling_gain), (None, None));
    }

    #[test]
    fn one_placement_alone_answers_only_without_smt() {
        let baseline = Some(Baseline {
            placement: "1c1t".into(),
            figure: fig(10.0),
            unit: "op/s".into(),
        });
        let mut e = Evidence {
            baseline,
            ..Evidence::default()
        };
        assert!(measured(&e) && !compared(&e));
        e.smt = true;
        assert!(!measured(&e));
        e.partners.push(Partnered {
            partner: "int-ops".into(),
            figure: fig(1.3),
            predicted_by_run: None,
        });
        assert!(measured(&e) && compared(&e));
    }
}
