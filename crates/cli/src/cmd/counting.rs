//! `--counters` wiring shared by `bench`, `run` and `exec`: what is said once. The
//! counting itself is `smtlab_runner::counting` (it explains why the process is
//! followed with `inherit`), driven by `smtlab_runner::session`.

use smtlab_runner::counting::CountingSetup;

/// The notes said once per command: what cannot be measured here, one line each.
pub fn notes(setup: &CountingSetup) -> Vec<String> {
    setup.missing_lines()
}
