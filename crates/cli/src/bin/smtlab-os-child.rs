//! The measurement process of smtlab's os benchmarks: smtlab starts it from beside its
//! own executable with the single argument `smtlab_bench::os::lean::CHILD_ARG`. It links
//! only the benchmark code, so its address space stays small, as lmbench's processes'
//! are (`fork-exit` from the whole smtlab binary reads 10-15% higher).

use std::process::ExitCode;

fn main() -> ExitCode {
    if smtlab_bench::os::lean::is_child_invocation() {
        return ExitCode::from(smtlab_bench::os::lean::child_main());
    }
    eprintln!(
        "smtlab-os-child: expected the single argument {}; smtlab starts this program for \
         its os benchmarks, it is not run by hand",
        smtlab_bench::os::lean::CHILD_ARG
    );
    ExitCode::from(2)
}
