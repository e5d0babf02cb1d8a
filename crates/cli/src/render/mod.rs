//! Text rendering: pure functions from data to `String`, so output formats are tested
//! with snapshots and the commands stay thin.

pub mod bench;
pub mod compare;
pub mod placements;
pub mod report;
pub mod run;
pub mod table;
pub mod topo;

pub use smtlab_report::fmt::bytes;

/// `1 thread`, `2 threads`.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}
