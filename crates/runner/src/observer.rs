//! Events the runner pushes while it measures a cell (ripgrep's `Sink` idea): the CLI's
//! progress bar, the store and a live table each implement [`Observer`], and the runner
//! never prints. An observer can stop the cell (e.g. on Ctrl-C) by returning
//! `ControlFlow::Break`; `measure` then returns `RunError::Stopped`.

use std::ops::ControlFlow;

use smtlab_model::{BenchInfo, SampleRecord};

use crate::config::RunConfig;
use smtlab_model::result::{Calibration, CellResult};

/// One step of measuring a cell, in the order they happen.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    CellStarted {
        info: &'a BenchInfo,
        config: &'a RunConfig,
        /// The instance's fixed iteration count, if it has one (no calibration then).
        fixed_iterations: Option<u64>,
    },
    Calibrated {
        iterations: u64,
        /// `None`: not checked.
        linear: Option<bool>,
        calibration: &'a Calibration,
    },
    WarmupDone {
        samples: usize,
        elapsed_ns: u64,
    },
    Sample {
        /// Counted from 0.
        index: usize,
        value: f64,
        record: &'a SampleRecord,
        /// Relative CI half-width so far, once there are two samples.
        ci95_rel: Option<f64>,
    },
    /// The cell is done; its `Break` is ignored.
    CellFinished {
        result: &'a CellResult,
    },
}

/// Receives the runner's events.
pub trait Observer {
    fn event(&mut self, event: &Event<'_>) -> ControlFlow<()>;
}

/// Ignores every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopObserver;

impl Observer for NoopObserver {
    fn event(&mut self, _: &Event<'_>) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

/// Wraps a closure as an observer: `measure(.., &mut from_fn(|e| { ..; ControlFlow::Continue(()) }))`.
pub fn from_fn<F: FnMut(&Event<'_>) -> ControlFlow<()>>(f: F) -> FnObserver<F> {
    FnObserver(f)
}

/// A closure as an observer; see [`from_fn`].
#[derive(Debug, Clone, Copy)]
pub struct FnObserver<F>(pub F);

impl<F: FnMut(&Event<'_>) -> ControlFlow<()>> Observer for FnObserver<F> {
    fn event(&mut self, event: &Event<'_>) -> ControlFlow<()> {
        (self.0)(event)
    }
}

/// A pair sends every event to both (the first one first); either can stop the cell.
/// Nest pairs, or pass `(&mut a, &mut b)`, for more.
impl<A: Observer, B: Observer> Observer for (A, B) {
    fn event(&mut self, event: &Event<'_>) -> ControlFlow<()> {
        let a = self.0.event(event);
        let b = self.1.event(event);
        if a.is_break() || b.is_break() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

impl<T: Observer + ?Sized> Observer for &mut T {
    fn event(&mut self, event: &Event<'_>) -> ControlFlow<()> {
        (**self).event(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_forward_to_both_and_either_can_stop() {
        let mut a = 0;
        let mut b = 0;
        {
            let mut count_a = from_fn(|_: &Event<'_>| {
                a += 1;
                ControlFlow::Continue(())
            });
            let mut stop_b = from_fn(|_: &Event<'_>| {
                b += 1;
                ControlFlow::Break(())
            });
            let mut pair = (&mut count_a, (&mut stop_b, NoopObserver));
            let event = Event::WarmupDone {
                samples: 1,
                elapsed_ns: 5,
            };
            assert!(pair.event(&event).is_break());
            let dynamic: &mut dyn Observer = &mut pair;
            assert!(dynamic.event(&event).is_break());
        }
        assert_eq!((a, b), (2, 2));
    }
}
