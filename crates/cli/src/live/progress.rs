//! Progress of a command whose cells print as lines (`advise`): after each cell, one
//! line on standard error with the cells done and the time left, from the plan and the
//! pace of the cells done so far ([`smtlab_runner::eta::Eta`]).

use std::time::Instant;

use smtlab_runner::eta::Eta;
use smtlab_runner::plan::Estimate;

use crate::render::plan::duration_text;
use crate::sink::Shown;

pub struct Progress {
    eta: Eta,
    started: Instant,
    planned: usize,
    done: usize,
}

impl Progress {
    pub fn new(estimate: &Estimate) -> Self {
        Progress {
            eta: Eta::new(estimate),
            started: Instant::now(),
            planned: estimate.cells(),
            done: 0,
        }
    }

    /// Counts `shown` and says how far the command is.
    pub fn cell_done(&mut self, shown: &Shown<'_>) {
        let key = match shown {
            Shown::Measured(c) => c.key(),
            Shown::Skipped(s) => s.key.clone(),
        };
        let now_ns = self.started.elapsed().as_nanos() as u64;
        self.eta.cell_done(&key, now_ns);
        self.done += 1;
        crate::term::note_fit(&line(
            self.done,
            self.planned,
            self.eta.remaining_ns(now_ns),
        ));
    }
}

/// `[3/8 cells] about 1m 20s left`; past the plan (cells a command adds while it
/// measures), the count alone.
fn line(done: usize, planned: usize, left_ns: u64) -> String {
    if done >= planned {
        format!("[{done} cells done]")
    } else {
        format!(
            "[{done}/{planned} cells] about {} left",
            duration_text(left_ns)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_cells_and_time_left() {
        assert_eq!(line(3, 8, 80_000_000_000), "[3/8 cells] about 1m 20s left");
        assert_eq!(line(9, 8, 0), "[9 cells done]");
    }
}
