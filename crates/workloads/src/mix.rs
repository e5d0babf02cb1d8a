//! A multiprogrammed mix (paper 003 section 2.3, which ran all eight SPECint95 programs
//! together on one SMT core): K different single-threaded programs running at once on a
//! placement, each program's progress in the mix against alone, and the mix's total,
//! the *weighted speedup* (the sum of the progresses) that the symbiosis literature uses.
//! Where `corun` shows pairs, a mix shows what sharing a core does with more than two.
//!
//! `programs` lists the programs, comma-separated: catalog benchmarks (`int-ops`,
//! `mem-read:size=64MiB`, parameters after colons, one thread each) and shell commands
//! (`cmd:gzip -c /tmp/big`, or `cmd:gz=gzip -c /tmp/big` to name it; a command cannot hold
//! a comma). Program *i* runs on the placement's CPU *i mod n*, so a mix of four on
//! `1c2t` puts two on each sibling, as an OS would time-share them.
//!
//! Each program is a [`Partner`](crate::corun::Partner): a thread pinned to its CPU that
//! prepares the program and samples it in a loop only while released, its samples
//! calibrated to a millisecond (a command's sample is one run). One sample of the mix:
//!
//! 1. every program runs for `window` together; each one's throughput in the mix is the
//!    work of its samples wholly inside the window over the time from the first one's
//!    start to the last one's end (so the time it waited for its CPU counts);
//! 2. then each program runs alone for `window` on its CPU (the others parked): its
//!    reference, measured in the same stretch of time as the mix;
//! 3. progress = in-mix / alone work per second (whatever the program's unit), and the
//!    sample's value is the sum over the programs: K when the mix slows nobody, 1 when
//!    the programs only take turns on one CPU.
//!
//! Each program's own checks run on every one of its samples (a kernel's result, a
//! command's exit status). A window stretches until every program in it has finished a
//! sample (a busy machine, a long command); one that finished none in twenty windows
//! fails the sample with a line that says to lengthen the window.

use std::sync::Arc;
use std::time::Duration;

use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, Params, RawSample};
use smtlab_model::metrics::mix as keys;
use smtlab_model::{BenchInfo, Direction, ReportSection, ValueKind};

use crate::corun::Partner;
use crate::corun::command::ShellCommand;

pub const NAME: &str = "mix";

pub struct Mix;

/// One program of a mix, parsed from `programs`.
pub struct Program {
    pub name: String,
    pub bench: Arc<dyn Benchmark>,
    pub params: Params,
}

fn bad(value: &str, expected: &str) -> BenchError {
    BenchError::Param(smtlab_bench::ParamError::value("programs", value, expected))
}

/// Parses `programs`: catalog names with `:k=v` parameters, and `cmd:` commands.
pub fn parse_programs(text: &str) -> Result<Vec<Program>, BenchError> {
    let mut out: Vec<Program> = Vec::new();
    let mut commands = 0;
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(bad(text, "a comma-separated list of programs, none empty"));
        }
        let program = if let Some(cmd) = item.strip_prefix("cmd:") {
            commands += 1;
            let c = ShellCommand::parse(cmd).unwrap_or(ShellCommand {
                name: format!("cmd{commands}"),
                command: cmd.to_string(),
            });
            if c.command.trim().is_empty() {
                return Err(bad(item, "cmd:COMMAND with a command"));
            }
            Program {
                name: c.name.clone(),
                params: Params::default(),
                bench: Arc::new(c),
            }
        } else {
            let mut parts = item.split(':');
            let name = parts.next().unwrap_or_default().trim();
            let Some(bench) = smtlab_bench::catalog::find(name) else {
                return Err(bad(
                    name,
                    "a single-thread benchmark of `smtlab list` (compute, memory, os, aim) \
                     or cmd:COMMAND",
                ));
            };
            let info = bench.info();
            let given: Vec<String> = parts.map(|p| p.trim().to_string()).collect();
            let mut list: Vec<String> = Vec::new();
            if info.params.iter().any(|p| p.name == "threads") {
                list.push("threads=1".into());
            }
            list.extend(given);
            let params = Params::resolve(&info, &list, false).map_err(BenchError::Param)?;
            Program {
                name: info.name.clone(),
                bench: Arc::from(bench),
                params,
            }
        };
        if out.iter().any(|p| p.name == program.name) {
            return Err(bad(
                &program.name,
                "programs named once each (name commands: cmd:NAME=COMMAND)",
            ));
        }
        out.push(program);
    }
    if out.len() < 2 {
        return Err(bad(text, "at least two programs"));
    }
    Ok(out)
}

/// One program's progress: its throughput in the mix over its throughput alone (work
/// per second both, whatever its unit: a time per operation is turned the same way).
pub fn progress(in_mix: f64, alone: f64) -> Option<f64> {
    let p = in_mix / alone;
    (p.is_finite() && p >= 0.0).then_some(p)
}

impl Benchmark for Mix {
    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "mix".into(),
            unit: "x".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1.0 },
            description: "A multiprogrammed mix (paper 003 s2.3): K single-thread programs \
                          run together on the placement (program i on its CPU i mod n), then \
                          each alone for as long; each program's progress (in-mix / alone \
                          throughput) and their sum, the weighted speedup."
                .into(),
            origin: "paper 003 s2.3 (multiprogrammed SPECint95)".into(),
            params: vec![
                smtlab_bench::params::declare(
                    "programs",
                    "int-ops,fp-ops,mem-read:size=64MiB,mem-latency:size=8MiB",
                    Some("int-ops,fp-ops"),
                    "programs run together, comma-separated: catalog benchmarks \
                     (NAME or NAME:k=v:k=v, one thread each) and commands (cmd:COMMAND or \
                     cmd:NAME=COMMAND)",
                ),
                smtlab_bench::params::declare(
                    "window",
                    "200ms",
                    Some("50ms"),
                    "how long the programs run together, and each alone, per sample",
                ),
            ],
            main_param: Some("programs".into()),
            report: ReportSection::Mix,
        }
    }

    fn in_suite(&self, suite: smtlab_bench::Suite) -> bool {
        // A sample is K + 1 windows long: quick and full runs, not the default suite's
        // every placement.
        suite != smtlab_bench::Suite::Default
    }

    /// A sample is K + 1 windows: the programs together, then each alone.
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let k = ctx.params.get_str("programs")?.split(',').count() as f64;
        let window_s = ctx
            .params
            .get_duration_in("window", Duration::ZERO..=Duration::from_secs(366 * 86_400))?
            .as_secs_f64();
        Ok(crate::load_cost((k + 1.0) * window_s, 0.05))
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let unsupported = |reason: String| BenchError::unsupported(NAME, reason);
        if ctx.placement.cpus.is_empty() {
            return Err(unsupported(
                "a mix needs a pinned placement (each program on its CPU)".into(),
            ));
        }
        let programs = parse_programs(ctx.params.get_str("programs")?)?;
        let window = ctx
            .params
            .get_duration_in("window", Duration::from_millis(5)..=Duration::from_secs(60))?;
        for p in &programs {
            if p.bench.client_side() {
                return Err(bad(
                    &p.name,
                    "single-CPU programs (a server workload has a client side)",
                ));
            }
        }
        let mut running = Vec::new();
        for (i, p) in programs.iter().enumerate() {
            let cpu = ctx
                .placement
                .cpu_for_thread(i)
                .expect("a pinned placement has CPUs");
            let partner = Partner::start(
                Arc::clone(&p.bench),
                p.params.clone(),
                &[cpu],
                ctx.placement,
                ctx.topology,
                None,
            )?;
            running.push(Running {
                name: p.name.clone(),
                kind: p.bench.info().value_kind,
                cpu,
                partner,
            });
        }
        Ok(Box::new(MixInstance {
            programs: running,
            window,
        }))
    }
}

struct Running {
    name: String,
    kind: ValueKind,
    cpu: u32,
    partner: Partner,
}

struct MixInstance {
    programs: Vec<Running>,
    window: Duration,
}

impl MixInstance {
    /// The throughput (work per second, waits between samples included) of each of
    /// `which` over one window with those running.
    fn window(&self, which: &[usize]) -> Result<Vec<f64>, BenchError> {
        for &i in which {
            self.programs[i].partner.begin()?;
        }
        std::thread::sleep(self.window);
        // On a busy machine a program may not finish a whole sample in the window: the
        // window then stretches, in tenths, until each has one (its throughput is over
        // its own samples' span), up to twenty windows.
        let mut waited = 0;
        while waited < 200
            && which
                .iter()
                .any(|&i| self.programs[i].partner.samples_so_far() == 0)
        {
            std::thread::sleep(self.window / 10);
            waited += 1;
        }
        let mut out = Vec::new();
        for &i in which {
            let w = self.programs[i].partner.end()?;
            // From the first counted sample's start to the last one's end.
            let span = w
                .first_start_ns
                .map_or(0, |s| w.last_end_ns.saturating_sub(s));
            if w.values.is_empty() || span == 0 || w.work.is_nan() || w.work <= 0.0 {
                return Err(BenchError::unsupported(
                    NAME,
                    format!(
                        "{} finished no sample in 20 windows of {:?}: give a longer window=",
                        self.programs[i].name, self.window
                    ),
                ));
            }
            out.push(w.work / (span as f64 / 1e9));
        }
        Ok(out)
    }
}

/// A throughput (work per second) in the program's unit: a rate, or a time per unit
/// of work.
fn in_unit(kind: ValueKind, work_per_s: f64) -> f64 {
    match kind {
        ValueKind::Rate { scale } => work_per_s / scale,
        ValueKind::TimePerOp => 1e9 / work_per_s,
    }
}

impl Instance for MixInstance {
    fn sample(&mut self, _iterations: u64) -> Result<RawSample, BenchError> {
        let t0 = smtlab_bench::clock::now_ns();
        let all: Vec<usize> = (0..self.programs.len()).collect();
        let in_mix = self.window(&all)?;
        let mix_ns = smtlab_bench::clock::now_ns().saturating_sub(t0);
        let mut alone = Vec::new();
        for i in &all {
            alone.push(self.window(&[*i])?[0]);
        }
        let mut raw = RawSample {
            elapsed_ns: mix_ns.max(1),
            work: 1.0,
            cpus: self.programs.iter().map(|p| p.cpu).collect(),
            ..RawSample::default()
        };
        let mut total = 0.0;
        for (i, p) in self.programs.iter().enumerate() {
            let Some(pr) = progress(in_mix[i], alone[i]) else {
                return Err(BenchError::check(
                    NAME,
                    format!(
                        "{}: no progress from {} in the mix and {} alone",
                        p.name, in_mix[i], alone[i]
                    ),
                ));
            };
            total += pr;
            let m = &mut raw.metrics;
            m.insert(
                keys::key(i, &p.name, keys::IN_MIX),
                in_unit(p.kind, in_mix[i]),
            );
            m.insert(
                keys::key(i, &p.name, keys::ALONE),
                in_unit(p.kind, alone[i]),
            );
            m.insert(keys::key(i, &p.name, keys::PROGRESS), pr);
            m.insert(keys::key(i, &p.name, keys::CPU), f64::from(p.cpu));
        }
        raw.metrics
            .insert(smtlab_bench::value::OWN_VALUE.into(), total);
        Ok(raw)
    }

    fn fixed_iterations(&self) -> Option<u64> {
        // One sample is one mix window and its references, whatever the calibration.
        Some(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Up to two CPUs this process may run on.
    fn usable_cpus() -> Vec<u32> {
        let set = smtlab_placement::pin::get_affinity(0).unwrap();
        set.iter().take(2).collect()
    }

    #[test]
    fn programs_parse_with_parameters_and_commands() {
        let p = parse_programs("int-ops, mem-read:size=1MiB,cmd:true,cmd:z=echo a").unwrap();
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["int-ops", "mem-read", "cmd1", "z"]);
        assert_eq!(p[1].params.get_str("size").unwrap(), "1MiB");
        assert_eq!(p[0].params.get_str("threads").unwrap(), "1");
        for (text, want) in [
            ("int-ops", "at least two"),
            ("int-ops,int-ops", "named once"),
            ("int-ops,nope", "nope"),
            ("int-ops,,fp-ops", "none empty"),
            ("int-ops,mem-read:bogus=1", "bogus"),
        ] {
            let e = parse_programs(text).err().unwrap().to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn progress_is_a_throughput_ratio_in_any_unit() {
        assert_eq!(progress(5.0, 10.0), Some(0.5));
        assert_eq!(progress(1.0, 0.0), None);
        // 2 runs/s is 0.5 s per run.
        assert_eq!(in_unit(ValueKind::TimePerOp, 2.0), 5e8);
        assert_eq!(in_unit(ValueKind::Rate { scale: 1e3 }, 2000.0), 2.0);
    }

    #[test]
    fn a_mix_of_a_kernel_and_a_command_runs_and_reports_each_program() {
        let info = Mix.info();
        let params = Params::resolve(
            &info,
            &[
                "programs=int-ops,cmd:echo=echo hi".into(),
                "window=300ms".into(),
            ],
            true,
        )
        .unwrap();
        let cpus = usable_cpus();
        let pl = smtlab_fixtures::build::placement_on(&cpus);
        let topo = smtlab_fixtures::build::one_cpu_per_core(&cpus);
        let mut inst = Mix
            .prepare(&BenchContext {
                params: &params,
                placement: &pl,
                topology: &topo,
                client: None,
            })
            .unwrap();
        assert_eq!(inst.fixed_iterations(), Some(1));
        let s = inst.sample(1).unwrap();
        let ws = s.metrics[smtlab_bench::value::OWN_VALUE];
        let mut sum = 0.0;
        for (i, name) in ["int-ops", "echo"].iter().enumerate() {
            let pr = s.metrics[&keys::key(i, name, keys::PROGRESS)];
            let (m, a) = (
                s.metrics[&keys::key(i, name, keys::IN_MIX)],
                s.metrics[&keys::key(i, name, keys::ALONE)],
            );
            assert!(m > 0.0 && a > 0.0, "{name}: {m} {a}");
            assert!(pr > 0.0, "{name}: {pr}");
            sum += pr;
        }
        assert!((ws - sum).abs() < 1e-12);
        assert_eq!(s.cpus, [cpus[0], cpus[1 % cpus.len()]]);
    }

    #[test]
    fn a_failing_program_fails_the_mix_with_its_name() {
        let info = Mix.info();
        let params = Params::resolve(
            &info,
            &[
                "programs=int-ops,cmd:bad=exit 3".into(),
                "window=20ms".into(),
            ],
            true,
        )
        .unwrap();
        let cpus = usable_cpus();
        let pl = smtlab_fixtures::build::placement_on(&cpus[..1]);
        let topo = smtlab_fixtures::build::one_cpu_per_core(&cpus[..1]);
        let r = Mix.prepare(&BenchContext {
            params: &params,
            placement: &pl,
            topology: &topo,
            client: None,
        });
        let e = match r {
            Err(e) => e.to_string(),
            Ok(mut i) => i.sample(1).err().unwrap().to_string(),
        };
        assert!(e.contains("bad"), "{e}");
    }
}
