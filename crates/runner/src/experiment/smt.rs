//! SMT turns: groups of cells measured in each SMT state asked for, the states taking
//! turns group by group, so a drift of the machine's speed falls on both states rather
//! than on one whole pass. One function does the switching for every command
//! ([`in_states`]; [`measure_groups`] for groups of session cells): it switches through
//! the machine's guard ([`Machine::smt_switch`], with the control crate's guardian),
//! rediscovers the topology after each switch (with SMT off the siblings are offline),
//! re-resolves the placements on it (`1c2t` with SMT off is skipped with the reason),
//! skips a state's cells with the reason when SMT cannot be switched here, and puts the
//! state found back at the end, on error and on a stop.
//!
//! Which state a cell was measured in is its key's `conditions.smt`; [`state_of`] reads
//! it with the state found as the default.

use std::ops::ControlFlow;

use smtlab_control::guard::Protection;
use smtlab_model::{CellKey, SkippedCell, Topology};

use super::{Engine, ExperimentError};
use crate::machine::Machine;
use crate::session::{CellPlan, Ended, Group, SessionObserver, Unplaced};

/// The one SMT state of a cell (on, off, or as found), from the model.
pub use smtlab_model::keys::SmtState;

/// The states `--smt` asks for, in the order given (`both` is `off,on`; a list may be
/// one argument or several).
pub fn parse_states(given: &[String]) -> Result<Vec<SmtState>, ExperimentError> {
    let mut out = Vec::new();
    for s in given.iter().flat_map(|g| g.split(',')) {
        let add: &[SmtState] = match s.trim() {
            "off" => &[SmtState::Off],
            "on" => &[SmtState::On],
            "both" => &[SmtState::Off, SmtState::On],
            other => {
                return Err(ExperimentError::input(format!(
                    "--smt {other:?}: expected off, on, both, off,on or on,off"
                )));
            }
        };
        for &state in add {
            if out.contains(&state) {
                return Err(ExperimentError::input(format!(
                    "--smt {}: SMT {} given twice",
                    given.join(","),
                    state.name()
                )));
            }
            out.push(state);
        }
    }
    Ok(out)
}

/// The SMT state `key` was measured in (as found where its key names none).
pub fn state_of(key: &CellKey) -> SmtState {
    key.conditions.smt.unwrap_or(SmtState::AsFound)
}

/// `cell` keyed with the SMT state `state`, its placement not yet resolved in that state.
pub fn cell_in<'a>(cell: &CellPlan<'a>, state: SmtState) -> CellPlan<'a> {
    let mut cell = cell.clone();
    cell.key.conditions.smt = Some(state);
    cell
}

/// Every group once per state in `states`, the states taking turns group by group
/// (`states` empty: the groups as they are, measured in the state found).
pub fn turns<'a>(groups: Vec<Group<'a>>, states: &[SmtState]) -> Vec<Group<'a>> {
    if states.is_empty() {
        return groups;
    }
    let mut out = Vec::new();
    for group in &groups {
        for &state in states {
            out.push(group.iter().map(|c| cell_in(c, state)).collect());
        }
    }
    out
}

/// The SMT states of `states` that can be measured here, or why none can be.
pub fn switchable(
    machine: &dyn Machine,
    states: &[SmtState],
) -> Result<Vec<SmtState>, NotSwitchable> {
    match (states.is_empty(), machine.switch_refusal()) {
        (false, Some(why)) => Err(NotSwitchable(why)),
        _ => Ok(states.to_vec()),
    }
}

/// Runs `turn` for each item of `items` in its SMT state (`state`): SMT switched
/// (refused with the reason when it cannot be), the topology rediscovered, then `turn`
/// with the item, its state and the topology in that state or why it cannot be entered.
/// Stops at the first turn that ends early; puts the SMT state found back at the end,
/// on error and on a stop (and the guardian should smtlab be killed).
pub fn in_states<T>(
    machine: &dyn Machine,
    protection: Protection,
    found: &Topology,
    items: Vec<T>,
    state: impl Fn(&T) -> SmtState,
    mut turn: impl FnMut(T, SmtState, Result<&Topology, NotEntered>) -> Result<Ended, ExperimentError>,
) -> Result<Ended, ExperimentError> {
    let mut switch = None;
    let mut refusal: Option<String> = None;
    let mut ended = Ended::Complete;
    for item in items {
        let st = state(&item);
        let Some(on) = st.is_on() else {
            ended = turn(item, st, Ok(found))?;
            if ended == Ended::Stopped {
                break;
            }
            continue;
        };
        if switch.is_none() && refusal.is_none() {
            refusal = machine.switch_refusal();
            if refusal.is_none() {
                match machine.smt_switch(protection) {
                    Ok(s) => switch = Some(s),
                    Err(e) => refusal = Some(e.to_string()),
                }
            }
        }
        let entered = match (&mut switch, &refusal) {
            (Some(sw), _) => sw
                .set(on)
                .map_err(|e| NotEntered::Switch {
                    state: st.name(),
                    why: e.to_string(),
                })
                .and_then(|()| {
                    machine
                        .topology()
                        .map_err(|e| NotEntered::Topology(e.to_string()))
                }),
            (None, why) => Err(NotEntered::Refused(why.clone().unwrap_or_default())),
        };
        ended = turn(item, st, entered.as_ref().map_err(Clone::clone))?;
        if ended == Ended::Stopped {
            break;
        }
    }
    if let Some(sw) = switch {
        sw.finish()
            .map_err(|e| ExperimentError::input(format!("cannot put the SMT state back: {e}")))?;
    }
    Ok(ended)
}

/// Why a turn's SMT state could not be entered; one line each, the machine's or the
/// kernel's own words in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotEntered {
    /// This machine cannot switch SMT (no root, no writable smt/control, ...).
    #[error("{0}")]
    Refused(String),
    #[error("cannot switch SMT {state}: {why}")]
    Switch { state: &'static str, why: String },
    /// The topology in the new state could not be read.
    #[error("{0}")]
    Topology(String),
}

/// Measures `groups` through the engine's sessions, each in the SMT state its keys say
/// ([`state_of`]; none: the state found, on `found`), with [`in_states`]: a group whose
/// state cannot be entered is skipped with the reason, and its placements are resolved
/// anew in the state it is measured in.
pub fn measure_groups(
    engine: &Engine<'_>,
    protection: Protection,
    found: &Topology,
    groups: Vec<Group<'_>>,
    sink: &mut dyn SessionObserver,
) -> Result<Ended, ExperimentError> {
    let state = |g: &Group<'_>| g.first().map_or(SmtState::AsFound, |c| state_of(&c.key));
    in_states(
        engine.machine,
        protection,
        found,
        groups,
        state,
        |group, st, topo| {
            let topo = match topo {
                Ok(t) => t,
                Err(why) => return Ok(skip_all(&group, st, &why.to_string(), sink)),
            };
            let group = match st {
                SmtState::AsFound => group,
                SmtState::On | SmtState::Off => resolve_in(group, st, topo),
            };
            Ok(engine.run(topo, vec![group], sink))
        },
    )
}

/// `group` with its placements resolved on `topo`, the topology of state `st`; a
/// co-run cell keeps the CPUs its plan gave it.
pub fn resolve_in<'a>(group: Group<'a>, st: SmtState, topo: &Topology) -> Group<'a> {
    group
        .into_iter()
        .map(|mut c| {
            if c.key.conditions.form.is_some() {
                return c;
            }
            c.placement =
                crate::plan::placed(&c.key.placement, topo).map_err(|error| Unplaced::InState {
                    state: st.name(),
                    error,
                });
            c
        })
        .collect()
}

fn skip_all(group: &Group<'_>, st: SmtState, why: &str, sink: &mut dyn SessionObserver) -> Ended {
    for c in group {
        let skipped = SkippedCell {
            key: c.key.clone(),
            reason: format!("with SMT {}: {why}", st.name()),
        };
        if sink.skipped(&skipped) == ControlFlow::Break(()) {
            return Ended::Stopped;
        }
    }
    Ended::Complete
}

/// Why SMT cannot be switched on this machine (not root, no smt/control, ...).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct NotSwitchable(pub String);

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::machine::FakeMachine;

    fn quiet() -> Protection {
        Protection {
            guardian: false,
            signals: false,
        }
    }

    fn control(m: &FakeMachine) -> String {
        fs::read_to_string(m.sysfs().control_path())
            .unwrap()
            .trim()
            .to_string()
    }

    struct Dir(std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn machine(name: &str) -> (Dir, FakeMachine) {
        let dir = std::env::temp_dir().join(format!("smtlab-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let m = FakeMachine::at(&dir).unwrap();
        (Dir(dir), m)
    }

    #[test]
    fn states_take_turns_per_item_with_the_topology_of_each_and_the_state_is_restored() {
        let (_d, m) = machine("turns");
        let found = m.topology().unwrap();
        let items = vec![
            ("a", SmtState::Off),
            ("a", SmtState::On),
            ("b", SmtState::AsFound),
        ];
        let mut seen = Vec::new();
        let ended = in_states(
            &m,
            quiet(),
            &found,
            items,
            |i| i.1,
            |i, st, topo| {
                seen.push((i.0, st, control(&m), topo.unwrap().cpus.len()));
                Ok(Ended::Complete)
            },
        )
        .unwrap();
        assert_eq!(ended, Ended::Complete);
        assert_eq!(
            seen,
            [
                ("a", SmtState::Off, "off".to_string(), 1),
                ("a", SmtState::On, "on".to_string(), 2),
                ("b", SmtState::AsFound, "on".to_string(), 2),
            ]
        );
        assert_eq!(control(&m), "on");
    }

    #[test]
    fn an_error_or_a_stop_mid_run_restores_the_state() {
        let (_d, m) = machine("stop");
        let found = m.topology().unwrap();
        let items = vec![SmtState::Off, SmtState::On];
        let err = in_states(
            &m,
            quiet(),
            &found,
            items.clone(),
            |s| *s,
            |_, _, _| Err(ExperimentError::input("benchmark failed")),
        );
        assert!(err.is_err());
        assert_eq!(control(&m), "on");
        let mut n = 0;
        let ended = in_states(
            &m,
            quiet(),
            &found,
            items,
            |s| *s,
            |_, _, _| {
                n += 1;
                assert_eq!(control(&m), "off");
                Ok(Ended::Stopped)
            },
        )
        .unwrap();
        assert_eq!((ended, n), (Ended::Stopped, 1));
        assert_eq!(control(&m), "on");
    }

    #[test]
    fn a_state_that_cannot_be_entered_reaches_the_turn_with_the_reason() {
        let (_d, m) = machine("refused");
        fs::write(m.sysfs().control_path(), "notsupported\n").unwrap();
        let found = m.topology().unwrap();
        let mut reasons = Vec::new();
        in_states(
            &m,
            quiet(),
            &found,
            vec![SmtState::Off],
            |s| *s,
            |_, _, topo| {
                reasons.push(topo.unwrap_err());
                Ok(Ended::Complete)
            },
        )
        .unwrap();
        assert!(
            matches!(&reasons[0], NotEntered::Refused(why) if why.contains("notsupported")),
            "{reasons:?}"
        );
    }

    #[test]
    fn states_parse_in_order_and_refuse_repeats_and_typos() {
        let s = |v: &[&str]| parse_states(&v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["both"]).unwrap(), vec![SmtState::Off, SmtState::On]);
        assert_eq!(
            s(&["on", " off"]).unwrap(),
            vec![SmtState::On, SmtState::Off]
        );
        assert_eq!(s(&["on,off"]).unwrap(), vec![SmtState::On, SmtState::Off]);
        assert!(
            s(&["both", "on"])
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        assert!(
            s(&["maybe"])
                .unwrap_err()
                .to_string()
                .contains("expected off")
        );
    }

    #[test]
    fn keys_carry_their_state_apart_from_the_bench_params() {
        let mut key = CellKey {
            benchmark: "spin".into(),
            params: [("n".to_string(), "1".to_string())].into_iter().collect(),
            conditions: Default::default(),
            placement: "1c1t".into(),
        };
        assert_eq!(state_of(&key), SmtState::AsFound);
        key.conditions.smt = Some(SmtState::Off);
        assert_eq!(state_of(&key), SmtState::Off);
        assert_eq!(key.params.len(), 1);
        key.conditions.smt = Some(SmtState::AsFound);
        assert_eq!(state_of(&key), SmtState::AsFound);
    }
}
