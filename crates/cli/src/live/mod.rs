//! What the measuring commands show and save while their cells are measured (the
//! session's observers: tables, lines, the progress bar, per-cell saving) and the
//! summaries they print once the cells are in.

pub mod bench;
pub mod exec;
pub mod progress;
pub mod run;
