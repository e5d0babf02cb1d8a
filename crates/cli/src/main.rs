//! The `smtlab` command: argument parsing and wiring. Each subcommand lives in
//! `cmd/`; this file only dispatches and turns errors into one line and an exit code.

use std::process::ExitCode;

use clap::Parser;

mod args;
mod cmd;
mod live;
mod output;
mod render;
mod settings;
mod sink;
mod term;
mod verdict;

fn main() -> ExitCode {
    // The os benchmarks' measurement process, when smtlab-os-child is not installed beside
    // this binary: it must stay single-threaded, so it branches off before anything else.
    if smtlab_bench::os::lean::is_child_invocation() {
        return ExitCode::from(smtlab_bench::os::lean::child_main());
    }
    if let Ok(exe) = std::env::current_exe() {
        smtlab_bench::os::lean::set_program_beside(&exe);
    }
    let cli = args::Cli::parse();
    let code = match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("smtlab: error: {}", one_line(e.chain()));
            ExitCode::FAILURE
        }
    };
    // The guardian and the cgroup of the processes smtlab started go before smtlab
    // does, so that nothing of smtlab's is left once it has exited.
    smtlab_bench::process::finish();
    code
}

/// The chain of causes joined with `: `, as users paste it into tickets. A cause whose
/// text its wrapper already printed is left out: some error types in the dependency
/// tree (and in older crates of this workspace) both show their source in their message
/// and return it as `source()`, which would print it twice.
fn one_line<'a>(chain: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>) -> String {
    let mut out = String::new();
    for cause in chain {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[derive(Debug)]
    struct Both(std::io::Error);
    impl std::fmt::Display for Both {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot read x: {}", self.0)
        }
    }
    impl std::error::Error for Both {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_in_its_wrapper_is_printed_once() {
        let io = std::io::Error::from_raw_os_error(libc::EISDIR);
        let io_text = io.to_string();
        let e = anyhow::Error::new(Both(io)).context("opening the results database");
        let line = one_line(e.chain());
        assert_eq!(line.matches(&io_text).count(), 1, "{line}");
        assert!(line.starts_with("opening the results database: cannot read x: "));
    }

    #[test]
    fn distinct_causes_are_all_kept_in_order() {
        let e = anyhow::anyhow!("inner").context("middle").context("outer");
        assert_eq!(one_line(e.chain()), "outer: middle: inner");
    }
}
