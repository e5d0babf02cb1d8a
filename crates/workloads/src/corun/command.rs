//! A user's shell command as a co-run workload (`--cmd NAME='...'`): each iteration runs
//! `sh -c CMD` once, pinned to the cell's CPU between fork and exec, with standard
//! input, output and error on /dev/null, and waits for it; the value is the wall time of
//! one run in nanoseconds. Every run is tied to the thread that starts it and killed with
//! its process group if anything goes wrong, so none outlives the cell.

use std::process::{Command, Stdio};
use std::time::Instant;

use smtlab_bench::process::ChildGroup;
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample};
use smtlab_model::{BenchInfo, Direction, ValueKind};
use smtlab_placement::pin::CommandPinExt;

/// Group of user commands in results.
pub const GROUP: &str = "command";

/// `sh -c CMD` under a name of the user's choosing.
#[derive(Debug, Clone)]
pub struct ShellCommand {
    pub name: String,
    pub command: String,
}

impl ShellCommand {
    /// Parses `NAME=COMMAND`; the name must be a short word (it names matrix rows).
    pub fn parse(text: &str) -> Result<ShellCommand, CommandError> {
        let fail = |why: String| Err(CommandError(format!("--cmd {text:?}: {why}")));
        let Some((name, command)) = text.split_once('=') else {
            return fail("expected NAME='COMMAND'".into());
        };
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return fail(format!(
                "the name {name:?} must be letters, digits, '-', '_' or '.'"
            ));
        }
        if command.trim().is_empty() {
            return fail("the command is empty".into());
        }
        Ok(ShellCommand {
            name: name.to_string(),
            command: command.to_string(),
        })
    }
}

impl Benchmark for ShellCommand {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: self.name.clone(),
            group: GROUP.into(),
            unit: "ns".into(),
            direction: Direction::Lower,
            value_kind: ValueKind::TimePerOp,
            description: format!("wall time of one run of `sh -c {}`", self.command),
            origin: "user command".into(),
            params: Vec::new(),
            main_param: None,
            report: Default::default(),
        }
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        Ok(Box::new(ShellInstance {
            cmd: self.clone(),
            cpus: ctx.placement.cpu_set(),
        }))
    }
}

struct ShellInstance {
    cmd: ShellCommand,
    cpus: smtlab_model::CpuSet,
}

impl ShellInstance {
    fn run_once(&self) -> Result<(), BenchError> {
        let io = |what: &str, source| BenchError::io(&self.cmd.name, what.to_string(), source);
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg(&self.cmd.command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if !self.cpus.is_empty() {
            c.pin_to(&self.cpus)?;
        }
        let mut group = ChildGroup::spawn(&mut c).map_err(|e| io("cannot start sh", e))?;
        let status = group
            .child_mut()
            .wait()
            .map_err(|e| io("cannot wait for the command", e))?;
        if !status.success() {
            return Err(BenchError::check(
                &self.cmd.name,
                format!("`{}` failed ({status})", self.cmd.command),
            ));
        }
        Ok(())
    }
}

impl Instance for ShellInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let t = Instant::now();
        for _ in 0..iterations {
            self.run_once()?;
        }
        Ok(RawSample {
            elapsed_ns: t.elapsed().as_nanos().max(1) as u64,
            work: iterations as f64,
            ..RawSample::default()
        })
    }

    /// One run per sample: a command usually lasts long enough on its own, and the
    /// runner's calibration would otherwise start it dozens of times.
    fn fixed_iterations(&self) -> Option<u64> {
        Some(1)
    }
}

/// A `--cmd NAME=COMMAND` that does not parse; the text says what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct CommandError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_commands_are_checked() {
        let c = ShellCommand::parse("spin=i=0; while [ $i -lt 10 ]; do i=$((i+1)); done").unwrap();
        assert_eq!(c.name, "spin");
        assert!(c.command.starts_with("i=0;"));
        for bad in ["nocommand", "=true", "a b=true", "x=  "] {
            let e = ShellCommand::parse(bad).unwrap_err().0;
            assert!(e.contains("--cmd"), "{e}");
        }
    }

    #[test]
    fn a_failing_command_fails_the_sample() {
        let c = ShellCommand::parse("f=exit 3").unwrap();
        let mut i = ShellInstance {
            cmd: c,
            cpus: smtlab_model::CpuSet::new(),
        };
        let e = i.sample(1).unwrap_err().to_string();
        assert!(e.contains("exit 3") && e.contains("failed"), "{e}");
        let mut ok = ShellInstance {
            cmd: ShellCommand::parse("t=true").unwrap(),
            cpus: smtlab_model::CpuSet::new(),
        };
        let raw = ok.sample(2).unwrap();
        assert_eq!(raw.work, 2.0);
        assert!(raw.elapsed_ns > 0);
    }
}
