//! `smtlab advise`'s answer on the terminal: [`smtlab_report::advice::text`] fitted to
//! the terminal (80 columns when it has no width).

use smtlab_report::advice::{self, Advice};

use super::table::Layout;

/// Width used when the output is not a terminal.
const DEFAULT_WIDTH: usize = 80;

/// A blank line, then each workload's answer, why, and its figures.
pub fn summary(answers: &[Advice], layout: Layout) -> String {
    let width = layout.width.unwrap_or(DEFAULT_WIDTH);
    format!("\n{}", advice::text(answers, width))
}
