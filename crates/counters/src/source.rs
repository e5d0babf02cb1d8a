//! The hardware boundary: anything that can count events around a piece of work. The
//! runner and the report are tested against [`FakeSource`], so their arithmetic does
//! not depend on the machine's PMU.

use std::collections::VecDeque;

use smtlab_model::counters::{CountMode, CounterEvent, CounterTarget, CounterValues, Reading};

use crate::error::CounterError;

/// Counts events between `start` and `stop`.
pub trait CounterSource: Send {
    /// Zeroes the counts and starts counting.
    fn start(&mut self) -> Result<(), CounterError>;
    /// Stops counting; the counts stay readable.
    fn stop(&mut self) -> Result<(), CounterError>;
    /// Counts on from where [`stop`](Self::stop) left the counts (no zeroing), so a
    /// window can be made of several stretches (interleaved cells count their own
    /// samples only).
    fn resume(&mut self) -> Result<(), CounterError>;
    /// The counts so far (also while running).
    fn read(&mut self) -> Result<CounterValues, CounterError>;
}

/// Runs `work` between `start` and `stop` and returns its result with the counts.
pub fn measure<S, R>(
    source: &mut S,
    work: impl FnOnce() -> R,
) -> Result<(R, CounterValues), CounterError>
where
    S: CounterSource + ?Sized,
{
    source.start()?;
    let out = work();
    source.stop()?;
    Ok((out, source.read()?))
}

/// A scripted counter source: each `read` after a `start` returns the next scripted
/// [`CounterValues`] (the last one repeats).
#[derive(Debug, Clone)]
pub struct FakeSource {
    script: VecDeque<CounterValues>,
    last: CounterValues,
    ever_started: bool,
    /// How often `start`, `stop` and `resume` were called, for tests of callers.
    pub starts: u32,
    pub stops: u32,
    pub resumes: u32,
    /// Whether the source counts right now (between `start`/`resume` and `stop`).
    pub running: bool,
}

impl FakeSource {
    /// A source that always reads `values`.
    pub fn new(values: CounterValues) -> FakeSource {
        FakeSource::sequence(vec![values])
    }

    /// A source whose successive reads return `values` in order (the last repeats).
    /// An empty script reads as "nothing counted".
    pub fn sequence(values: Vec<CounterValues>) -> FakeSource {
        let mut script: VecDeque<CounterValues> = values.into();
        let last = script
            .pop_front()
            .unwrap_or_else(|| CounterValues::new(fake_target()));
        FakeSource {
            script,
            last,
            ever_started: false,
            starts: 0,
            stops: 0,
            resumes: 0,
            running: false,
        }
    }
}

/// The target fakes report: the calling thread.
pub fn fake_target() -> CounterTarget {
    CounterTarget::Thread {
        tid: 0,
        inherit: false,
    }
}

/// [`CounterValues`] with exact counts in [`CountMode::All`].
pub fn fake_values(counts: &[(CounterEvent, u64)]) -> CounterValues {
    let mut v = CounterValues::new(fake_target());
    for &(e, c) in counts {
        v.set(e, CountMode::All, Reading::exact(c));
    }
    v
}

impl CounterSource for FakeSource {
    fn start(&mut self) -> Result<(), CounterError> {
        if self.running {
            return Err(CounterError::State("start while already started".into()));
        }
        self.ever_started = true;
        self.starts += 1;
        self.running = true;
        Ok(())
    }

    fn resume(&mut self) -> Result<(), CounterError> {
        if !self.ever_started {
            return Err(CounterError::State("resume before start".into()));
        }
        if self.running {
            return Err(CounterError::State("resume while counting".into()));
        }
        self.resumes += 1;
        self.running = true;
        Ok(())
    }

    fn stop(&mut self) -> Result<(), CounterError> {
        if !self.running {
            return Err(CounterError::State("stop before start".into()));
        }
        self.stops += 1;
        self.running = false;
        Ok(())
    }

    fn read(&mut self) -> Result<CounterValues, CounterError> {
        if !self.ever_started {
            return Err(CounterError::State("read before start".into()));
        }
        let out = self.last.clone();
        if let Some(next) = self.script.pop_front() {
            self.last = next;
        }
        Ok(out)
    }
}
