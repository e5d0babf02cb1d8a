//! The utilisation experiment (`smtlab util`): an open-loop load
//! ([`crate::utilisation::OpenLoop`]) offered at fixed shares of its measured maximum on
//! a placement, in each SMT state asked for.
//!
//! In each state the job is calibrated alone on the placement's first CPU, the maximum
//! is measured once to set the rates, then the maximum and every rate are measured again
//! as one interleaved group, so a slow spell of the host falls on all steps alike and
//! the shares of the maximum stay honest. The cells are keyed by their conditions, the
//! offered rate (`max` or a percentage) and the SMT state, and by the parameter `job_us`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use smtlab_bench::{BenchContext, Benchmark, Params};
use smtlab_control::guard::Protection;
use smtlab_model::keys::{Conditions, OfferedRate};
use smtlab_model::placement::Named;
use smtlab_model::{CellKey, ResolvedPlacement, Topology};

use super::{Engine, ExperimentError};
use crate::observer::NoopObserver;
use crate::session::{CellPlan, Ended, SessionObserver};
use crate::utilisation::{OpenLoop, ProcStat, TickSource, calibrate_job};

/// The shape of a curve.
#[derive(Debug, Clone, Copy)]
pub struct Curve {
    /// Steps from 1/N of the maximum to all of it.
    pub steps: u32,
    /// Length of one step (one sample).
    pub step: Duration,
    /// CPU time of one job.
    pub job: Duration,
}

/// The placement of one SMT state: the one asked for, else 1c2t (1c1t with SMT off, the
/// same core's first thread), else 2c1t on a machine without SMT. The load needs pinned
/// CPUs.
pub fn placement(
    asked: Option<&str>,
    topo: &Topology,
) -> Result<(String, ResolvedPlacement), ExperimentError> {
    let spec = match asked {
        Some(s) => s.to_string(),
        None if topo.smt_visible() => Named::Siblings.to_string(),
        None if topo.smt.control.as_deref() == Some("off") => Named::OneCore.to_string(),
        None => Named::TwoCores.to_string(),
    };
    let bad = |e: String| ExperimentError::input(format!("--placement {spec}: {e}"));
    let resolved = crate::plan::placed(&spec, topo).map_err(|e| bad(e.to_string()))?;
    if !resolved.pinned() {
        return Err(bad(
            "the load needs pinned CPUs (their /proc/stat time is the point)".into(),
        ));
    }
    Ok((spec, resolved))
}

/// Measures the curve in the current SMT state (`smt` goes in the keys) on
/// `placement`, pushing the maximum and every rate to `sink` as they are done.
pub fn measure_curve(
    engine: &Engine<'_>,
    curve: Curve,
    smt: SmtState,
    topo: &Topology,
    (spec, placement): (&str, &ResolvedPlacement),
    sink: &mut dyn SessionObserver,
) -> Result<Ended, ExperimentError> {
    if engine.stop.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(Ended::Stopped);
    }
    let first = placement.cpus[0];
    let job_iterations = std::thread::scope(|s| {
        s.spawn(|| {
            smtlab_placement::pin::pin_current_thread_to(first)
                .map_err(|e| ExperimentError::input(format!("cannot pin to CPU {first}: {e}")))?;
            Ok::<u64, ExperimentError>(calibrate_job(curve.job))
        })
        .join()
        .map_err(|_| ExperimentError::input("job calibration panicked"))?
    })?;
    let ticks: Arc<Mutex<dyn TickSource>> = Arc::new(Mutex::new(ProcStat));
    let load = |rate: Option<f64>| OpenLoop {
        job_iterations,
        rate_per_s: rate,
        step: curve.step,
        ticks: Arc::clone(&ticks),
    };
    let info = OpenLoop::info();
    // The maximum, to set the rates.
    let params = Params::default();
    let mut probe = load(None).prepare(&BenchContext {
        params: &params,
        placement,
        topology: topo,
        client: None,
    })?;
    let first_max = crate::measure(
        probe.as_mut(),
        &info,
        engine.cfg,
        engine.clock,
        &mut NoopObserver,
    )
    .map_err(|e| ExperimentError::input(format!("measuring the maximum: {e}")))?
    .summary
    .max; // the fastest step: a slow spell of the host should not lower every rate
    drop(probe);
    if first_max.is_nan() || first_max <= 0.0 {
        return Err(ExperimentError::input(format!(
            "no job finished in a {} ms step at full speed; try a larger --step-ms",
            curve.step.as_millis()
        )));
    }
    let steps: Vec<(OfferedRate, OpenLoop)> = step_labels(curve.steps)
        .into_iter()
        .map(|(label, share)| {
            let rate = share.map(|pct| first_max * pct / 100.0);
            (label, load(rate))
        })
        .collect();
    let group = steps
        .iter()
        .map(|(label, bench)| {
            CellPlan::new(
                bench,
                Params::default(),
                step_key(*label, smt, curve, spec),
                Ok(placement.clone()),
            )
        })
        .collect();
    Ok(engine.run(topo, vec![group], sink))
}

/// The steps of a curve: `max`, then each share of it in percent (rate, share).
fn step_labels(steps: u32) -> Vec<(OfferedRate, Option<f64>)> {
    let mut out = vec![(OfferedRate::Max, None)];
    for i in 1..=steps {
        let pct = 100.0 * f64::from(i) / f64::from(steps);
        // Rounded as the keys have always been written (`{:.0}`), so a step of a curve
        // measured before keeps its key; 0 < pct <= 100 always parses.
        let whole = format!("{pct:.0}").parse().unwrap_or(0);
        out.push((OfferedRate::Percent(whole), Some(pct)));
    }
    out
}

/// The key of one step: the rate and the SMT state are its conditions, the job length
/// its parameter.
fn step_key(rate: OfferedRate, smt: SmtState, curve: Curve, spec: &str) -> CellKey {
    CellKey {
        benchmark: crate::utilisation::NAME.to_string(),
        params: [("job_us".to_string(), curve.job.as_micros().to_string())].into(),
        conditions: Conditions {
            rate: Some(rate),
            smt: Some(smt),
            ..Conditions::default()
        },
        placement: spec.to_string(),
    }
}

/// The cells a curve plans in each state, as they will be keyed: the placement asked
/// for, else the default of the state (that of `found` for the state found, 1c2t with
/// SMT on, 1c1t with it off).
pub fn plan(
    curve: Curve,
    states: &[SmtState],
    asked: Option<&str>,
    found: &Topology,
) -> Vec<CellKey> {
    let mut keys = Vec::new();
    for &state in states {
        let spec = match (asked, state) {
            (Some(s), _) => s.to_string(),
            (None, SmtState::On) => Named::Siblings.to_string(),
            (None, SmtState::Off) => Named::OneCore.to_string(),
            (None, SmtState::AsFound) => placement(None, found).map(|(s, _)| s).unwrap_or_default(),
        };
        for (label, _) in step_labels(curve.steps) {
            keys.push(step_key(label, state, curve, &spec));
        }
    }
    keys
}

pub use super::smt::{SmtState, parse_states};

/// Measures the curve in each state, switched in turn ([`super::smt::in_states`]: SMT
/// put back however it ends); `started` hears of each state before it is measured with
/// its placement. Stops at the first state that ends early.
pub fn measure_states(
    engine: &Engine<'_>,
    curve: Curve,
    asked_placement: Option<&str>,
    found: &Topology,
    states: &[SmtState],
    started: &mut dyn FnMut(SmtState, &ResolvedPlacement) -> Result<(), ExperimentError>,
    sink: &mut dyn SessionObserver,
) -> Result<Ended, ExperimentError> {
    // The stop flag ends the session and the switch restores the state found then; its
    // guardian restores it should smtlab be killed.
    let protection = Protection {
        guardian: true,
        signals: false,
    };
    let items = states.to_vec();
    super::smt::in_states(
        engine.machine,
        protection,
        found,
        items,
        |s| *s,
        |state, _, topo| {
            let label = state.name();
            let topo =
                topo.map_err(|why| ExperimentError::input(format!("with SMT {label}: {why}")))?;
            let (spec, placed) = placement(asked_placement, topo)
                .map_err(|e| ExperimentError::input(format!("with SMT {label}: {e}")))?;
            started(state, &placed)?;
            measure_curve(engine, curve, state, topo, (&spec, &placed), sink)
        },
    )
}

#[cfg(test)]
mod tests {
    use smtlab_model::keys::SmtState as Smt;

    use super::*;
    use crate::config::RunConfig;

    #[test]
    fn states_parse_in_order_and_refuse_repeats_and_typos() {
        let s = |v: &[&str]| parse_states(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["off", " on"]).unwrap(), vec![Smt::Off, Smt::On]);
        assert!(s(&["on", "on"]).unwrap_err().to_string().contains("twice"));
        assert!(
            s(&["maybe"])
                .unwrap_err()
                .to_string()
                .contains("expected off")
        );
        assert_eq!(Smt::AsFound.name(), "as found");
    }

    #[test]
    fn the_plan_keys_every_step_of_every_state_as_measured() {
        let topo = smtlab_fixtures::build::intel(1, 2, 2);
        let curve = Curve {
            steps: 4,
            step: Duration::from_millis(50),
            job: Duration::from_micros(200),
        };
        let keys = plan(curve, &[Smt::Off, Smt::On], None, &topo);
        assert_eq!(keys.len(), 10);
        let rates: Vec<String> = keys[..5]
            .iter()
            .map(|k| k.conditions.rate.unwrap().to_string())
            .collect();
        assert_eq!(rates, ["max", "25", "50", "75", "100"]);
        assert_eq!(
            (keys[0].placement.as_str(), keys[5].placement.as_str()),
            ("1c1t", "1c2t")
        );
        assert_eq!(keys[7].conditions.smt, Some(Smt::On));
        assert_eq!(keys[7].params["job_us"], "200");
        assert_eq!(keys[0], step_key(OfferedRate::Max, Smt::Off, curve, "1c1t"));
        let found = plan(curve, &[Smt::AsFound], None, &topo);
        assert_eq!(found[0].placement, "1c2t");
        assert_eq!(found[0].conditions.smt, Some(Smt::AsFound));
        assert_eq!(found[0].params.len(), 1, "only job_us is a parameter");
    }

    #[test]
    fn placements_default_by_smt_and_must_be_pinned() {
        let topo = smtlab_fixtures::build::intel(1, 2, 2);
        let (spec, p) = placement(None, &topo).unwrap();
        assert_eq!((spec.as_str(), p.cpus.len()), ("1c2t", 2));
        assert!(
            placement(Some("9c9t"), &topo)
                .unwrap_err()
                .to_string()
                .contains("--placement 9c9t")
        );
        assert!(placement(Some("os"), &topo).is_err());
    }

    /// Keeps what the session hands over.
    #[derive(Default)]
    struct Kept(Vec<CellKey>, Vec<String>);
    impl SessionObserver for Kept {
        fn measured(&mut self, m: crate::session::Measured<'_>) -> std::ops::ControlFlow<()> {
            self.0.push(m.record.key());
            std::ops::ControlFlow::Continue(())
        }
        fn skipped(&mut self, s: &smtlab_model::SkippedCell) -> std::ops::ControlFlow<()> {
            self.1.push(s.reason.clone());
            std::ops::ControlFlow::Continue(())
        }
    }

    use crate::machine::Machine;

    #[test]
    fn each_state_is_entered_then_measured_as_planned_and_the_stop_flag_ends_it() {
        use std::sync::atomic::{AtomicBool, Ordering};
        // The fake machine's CPUs are 0 and 1, which every host has: the load really
        // runs there, briefly, while its tree is switched.
        let dir = std::env::temp_dir().join(format!("smtlab-util-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let machine = crate::machine::FakeMachine::at(&dir).unwrap();
        let topo = machine.topology().unwrap();
        let cfg = RunConfig {
            min_samples: 2,
            max_samples: 2,
            warmup_ns: 0,
            ..RunConfig::default()
        };
        let stop = AtomicBool::new(false);
        let engine = Engine::new(&machine, &cfg, None, &stop);
        let curve = Curve {
            steps: 1,
            step: Duration::from_millis(50),
            job: Duration::from_micros(50),
        };
        let states = [Smt::Off, Smt::On];
        let mut started = Vec::new();
        let mut kept = Kept::default();
        let control = || {
            std::fs::read_to_string(machine.sysfs().control_path())
                .unwrap()
                .trim()
                .to_string()
        };
        let ended = measure_states(
            &engine,
            curve,
            Some("1c1t"),
            &topo,
            &states,
            &mut |s, p| {
                started.push((s, p.cpus.clone(), control()));
                Ok(())
            },
            &mut kept,
        )
        .unwrap();
        assert_eq!(ended, Ended::Complete);
        assert_eq!(
            started,
            [
                (Smt::Off, vec![0], "off".to_string()),
                (Smt::On, vec![0], "on".to_string())
            ]
        );
        assert!(kept.1.is_empty(), "{:?}", kept.1);
        assert_eq!(kept.0, plan(curve, &states, Some("1c1t"), &topo));
        assert_eq!(control(), "on");

        // Stopped: the first state's curve is not recorded and the next is not entered.
        stop.store(true, Ordering::Relaxed);
        let (mut entered, mut kept) = (0, Kept::default());
        let ended = measure_states(
            &engine,
            curve,
            Some("1c1t"),
            &topo,
            &states,
            &mut |_, _| {
                entered += 1;
                Ok(())
            },
            &mut kept,
        )
        .unwrap();
        assert_eq!((ended, entered), (Ended::Stopped, 1));
        assert!(kept.0.is_empty() && kept.1.is_empty());
        assert_eq!(control(), "on");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
