//! The measurement process of the os benchmarks for this crate's integration tests and
//! other callers of the library (the smtlab package ships its own, `smtlab-os-child`):
//! register this binary's path with `smtlab_bench::os::lean::set_program`. It only runs
//! when started with the argument `smtlab_bench::os::lean::CHILD_ARG`.

use std::process::ExitCode;

fn main() -> ExitCode {
    if smtlab_bench::os::lean::is_child_invocation() {
        return ExitCode::from(smtlab_bench::os::lean::child_main());
    }
    eprintln!(
        "smtlab-bench-os-child: expected the single argument {}; this program is started by the \
         os benchmarks, not by hand",
        smtlab_bench::os::lean::CHILD_ARG
    );
    ExitCode::from(2)
}
