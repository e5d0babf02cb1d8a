//! `sdet`: an SDET-like multi-user shell-script load (paper 004 s4, "SPEC SDM SDET").
//!
//! `users` concurrent users, each a `sh` process pinned to the placement's CPUs, run
//! shell scripts one after another; every script runs the same ordinary commands in its
//! own random order (`ls`, `cat`, `grep`, `sort`, `wc`, `cp`, `mkdir`, `rm`, `sed`,
//! `tar`, and `cc` on a small C file when a compiler exists), each script in a fresh
//! `sh`, each user in a private directory of its own. The value is scripts per hour
//! over all users, as SDET reports it; one iteration is one script per user.
//!
//! At prepare time smtlab looks for every command on `PATH`. Commands that are missing
//! are left out of the scripts; every sample records which were used (`uses_<command>`
//! = 1 or 0, `commands` in all), so results of machines with different tool sets are
//! not mixed up unknowingly. `sh` itself is required.
//!
//! Checks: every script runs under `set -e` and appends a line to its user's log when
//! it completes, the sorted output is compared with the input's line count, and after
//! the sample every user must have exited 0 with one log line per script.
//!
//! Everything lives in a private temporary directory removed when the cell ends (and
//! swept, like the database workloads' directories, if smtlab was killed).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use smtlab_bench::clock::now_ns;
use smtlab_bench::process::ChildGroup;
use smtlab_bench::{BenchContext, BenchError, Benchmark, Instance, RawSample, Suite, SweepCell};
use smtlab_model::{BenchInfo, CpuSet, Direction, ParamInfo, Topology, ValueKind};
use smtlab_placement::pin::CommandPinExt;

use crate::scratch::ScratchDir;

pub const NAME: &str = "sdet";
const DIR_PREFIX: &str = "smtlab-sdet-";
/// Distinct random orders; users start at different ones.
const SCRIPTS: usize = 16;

/// This group's workloads.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    vec![Box::new(Sdet)]
}

/// The one line to show where this machine lacks some of the scripts' commands
/// (`sdet: left out (not installed): cc, tar`), or `None` when it has them all.
pub fn missing_commands_line() -> Option<String> {
    Found::on_path(&path_dirs()).missing_line()
}

/// One command of the scripts: the programs it needs and its shell line (`$S` is the
/// shared source tree, `$W` the user's work directory).
struct Step {
    name: &'static str,
    needs: &'static [&'static str],
    line: &'static str,
}

const fn step(name: &'static str, needs: &'static [&'static str], line: &'static str) -> Step {
    Step { name, needs, line }
}

const STEPS: &[Step] = &[
    step("ls", &["ls"], "ls -lR \"$S\" > /dev/null"),
    step("cat", &["cat"], "cat \"$S\"/doc/*.txt > \"$W/cat.out\""),
    step(
        "grep",
        &["grep"],
        "grep -c -i 'the' \"$S\"/doc/*.txt > \"$W/grep.out\"",
    ),
    step(
        "sort",
        &["sort", "wc"],
        "sort \"$S/doc/words.txt\" > \"$W/sorted.out\"; \
               test \"$(wc -l < \"$W/sorted.out\")\" -eq \"$(wc -l < \"$S/doc/words.txt\")\"",
    ),
    step("wc", &["wc"], "wc \"$S\"/doc/*.txt > \"$W/wc.out\""),
    step(
        "cp",
        &["cp", "rm"],
        "cp -R \"$S/doc\" \"$W/copy\"; rm -rf \"$W/copy\"",
    ),
    step(
        "mkdir",
        &["mkdir", "rm"],
        "mkdir -p \"$W/a/b/c/d\"; rm -rf \"$W/a\"",
    ),
    step(
        "sed",
        &["sed"],
        "sed -e 's/the/THE/g' -e 's/[0-9]/#/g' \"$S/doc/words.txt\" > \"$W/sed.out\"",
    ),
    step(
        "tar",
        &["tar", "rm"],
        "tar -cf \"$W/src.tar\" -C \"$S\" doc; tar -tf \"$W/src.tar\" > /dev/null; rm -f \"$W/src.tar\"",
    ),
    step(
        "cc",
        &["$CC"],
        "\"$CC\" -O1 -c -o \"$W/prog.o\" \"$S/src/prog.c\"",
    ),
    step("rm", &["rm"], "rm -f \"$W\"/*.out \"$W/prog.o\""),
];

/// Compilers tried for the `cc` step, in order.
const COMPILERS: &[&str] = &["cc", "gcc", "clang", "tcc"];

pub struct Sdet;

impl Benchmark for Sdet {
    fn notes(&self) -> Vec<String> {
        missing_commands_line().into_iter().collect()
    }

    fn info(&self) -> BenchInfo {
        BenchInfo {
            name: NAME.into(),
            group: "sdet".into(),
            unit: "scripts/h".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate {
                scale: 1.0 / 3600.0,
            },
            description: "SDET-like multi-user load: concurrent users (sh processes on the \
                          placement) each run shell scripts of ordinary commands (ls, cat, \
                          grep, sort, wc, cp, mkdir, rm, sed, tar, cc) in random order: \
                          scripts per hour."
                .into(),
            origin: "paper 004 s4 (SDET)".into(),
            params: vec![ParamInfo {
                departs: Vec::new(),
                name: "users".into(),
                default: "auto".into(),
                quick: Some("2".into()),
                help: "concurrent users; auto: 4 per placement CPU".into(),
            }],
            main_param: Some("users".into()),
            report: smtlab_model::ReportSection::Oltp,
        }
    }

    fn sweep(&self, suite: Suite, _topo: &Topology) -> Vec<SweepCell> {
        crate::sweep_values(suite, "users", &[1, 16], &[1, 2, 4, 8, 16, 32, 64])
    }

    /// One iteration is a script per user, about 0.1 s of work each (a few dozen
    /// short processes) shared by the placement's CPUs: longer than the target, so the
    /// cell takes the minimum for long samples; writing the users' scripts and starting
    /// them takes about 0.4 s a cell. A rough figure for the run's estimate.
    fn cost(&self, ctx: &BenchContext<'_>) -> Result<smtlab_bench::CellCost, BenchError> {
        let width = ctx.placement.width().max(1);
        let users = match ctx.params.get_str("users")? {
            "auto" => 4 * width,
            v => v.parse::<usize>().unwrap_or(1).max(1),
        };
        let rounds = users.div_ceil(width) as f64;
        Ok(crate::load_cost(0.1 * rounds, 0.4))
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let users = match ctx.params.get_str("users")? {
            "auto" => 4 * ctx.placement.width().max(1),
            v => match v.parse::<usize>() {
                Ok(n) if (1..=1024).contains(&n) => n,
                _ => return Err(crate::bad_param("users", v, "auto or 1 to 1024")),
            },
        };
        let found = Found::on_path(&path_dirs());
        if found.sh.is_none() {
            return Err(BenchError::unsupported(NAME, "no sh on PATH"));
        }
        let dir = ScratchDir::create(NAME, &std::env::temp_dir(), DIR_PREFIX)?;
        let setup = write_tree(dir.path(), &found, users, now_ns())
            .map_err(|e| io_err("write the scripts and files", e))?;
        Ok(Box::new(SdetInstance {
            cpus: ctx.placement.pinned().then(|| ctx.placement.cpu_set()),
            users,
            found,
            setup,
            dir,
        }))
    }
}

fn io_err(what: &str, e: std::io::Error) -> BenchError {
    BenchError::io(NAME, what, e)
}

fn path_dirs() -> Vec<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_else(|| vec!["/usr/bin".into(), "/bin".into()])
}

fn find_in(dirs: &[PathBuf], prog: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    dirs.iter()
        .map(|d| d.join(prog))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Which programs exist.
#[derive(Debug, Clone)]
struct Found {
    sh: Option<PathBuf>,
    cc: Option<PathBuf>,
    /// Steps whose programs all exist.
    used: Vec<&'static str>,
    missing: Vec<&'static str>,
}

impl Found {
    fn on_path(dirs: &[PathBuf]) -> Found {
        let cc = COMPILERS.iter().find_map(|c| find_in(dirs, c));
        let (mut used, mut missing) = (Vec::new(), Vec::new());
        for s in STEPS {
            let ok = s.needs.iter().all(|p| {
                if *p == "$CC" {
                    cc.is_some()
                } else {
                    find_in(dirs, p).is_some()
                }
            });
            if ok {
                used.push(s.name);
            } else {
                missing.push(s.name);
            }
        }
        Found {
            sh: find_in(dirs, "sh"),
            cc,
            used,
            missing,
        }
    }

    /// One line on what the scripts leave out, or `None` when nothing is missing.
    fn missing_line(&self) -> Option<String> {
        (!self.missing.is_empty()).then(|| {
            format!(
                "sdet: left out (not installed): {}",
                self.missing.join(", ")
            )
        })
    }
}

struct Setup {
    user_script: PathBuf,
}

/// The shared source tree, `SCRIPTS` scripts each with every used step once in a
/// random order, and the user loop.
fn write_tree(root: &Path, found: &Found, users: usize, seed: u64) -> std::io::Result<Setup> {
    let src = root.join("src");
    fs::create_dir_all(src.join("doc"))?;
    fs::create_dir_all(src.join("src"))?;
    let mut rng = seed | 1;
    let mut next = move |bound: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % bound as u64) as usize
    };
    // Text files of a few hundred lines of pseudo-words.
    const SYLLABLES: &[&str] = &[
        "the", "ka", "lo", "mi", "ne", "su", "ra", "to", "vi", "pe", "do", "an", "or", "el",
    ];
    let mut words = String::new();
    for i in 0..2000 {
        let n = 1 + next(3);
        for _ in 0..n {
            words.push_str(SYLLABLES[next(SYLLABLES.len())]);
        }
        let _ = writeln!(words, " {i}");
    }
    fs::write(src.join("doc/words.txt"), &words)?;
    for k in 0..4 {
        let mut t = String::new();
        for _ in 0..300 {
            for _ in 0..8 {
                t.push_str(SYLLABLES[next(SYLLABLES.len())]);
                t.push(' ');
            }
            t.push('\n');
        }
        fs::write(src.join(format!("doc/chapter{k}.txt")), t)?;
    }
    fs::write(
        src.join("src/prog.c"),
        "#include <stdio.h>\n\
         static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n\
         int main(int argc, char **argv) {\n\
         \tint s = 0;\n\
         \tfor (int i = 0; i < argc * 20; i++) s += fib(i % 20);\n\
         \tprintf(\"%d %s\\n\", s, argv[0]);\n\
         \treturn 0;\n}\n",
    )?;
    let scripts = root.join("scripts");
    fs::create_dir_all(&scripts)?;
    let steps: Vec<&Step> = STEPS
        .iter()
        .filter(|s| found.used.contains(&s.name))
        .collect();
    for k in 0..SCRIPTS {
        let mut order: Vec<usize> = (0..steps.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, next(i + 1));
        }
        let mut text = String::from("set -e\n");
        for i in order {
            text.push_str(steps[i].line);
            text.push('\n');
        }
        text.push_str("echo \"$K\" >> \"$W/log\"\n");
        fs::write(scripts.join(format!("s{k}.sh")), text)?;
    }
    for u in 0..users {
        fs::create_dir_all(root.join(format!("users/u{u}")))?;
    }
    // $1: scripts to run, $2: first script, $3: the user's directory.
    let user_script = root.join("user.sh");
    fs::write(
        &user_script,
        format!(
            "set -e\nn=$1; k=$2; W=$3; export W\nS='{}'; export S\nCC='{}'; export CC\n\
             : > \"$W/log\"\n\
             i=0\nwhile [ $i -lt $n ]; do\n  K=$i sh '{}'/s$(( (k + i) % {SCRIPTS} )).sh\n  i=$((i + 1))\ndone\n",
            src.display(),
            found
                .cc
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            scripts.display(),
        ),
    )?;
    Ok(Setup { user_script })
}

struct SdetInstance {
    cpus: Option<CpuSet>,
    users: usize,
    found: Found,
    setup: Setup,
    dir: ScratchDir,
}

impl Instance for SdetInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let n = iterations.max(1);
        let sh = self.found.sh.clone().expect("checked at prepare");
        let start = now_ns();
        let mut groups = Vec::with_capacity(self.users);
        for u in 0..self.users {
            let err_file = fs::File::create(self.dir.path().join(format!("users/u{u}.err")))
                .map_err(|e| io_err("create a user's error file", e))?;
            let mut cmd = Command::new(&sh);
            cmd.arg(&self.setup.user_script)
                .arg(n.to_string())
                .arg(((u * 5) % SCRIPTS).to_string())
                .arg(self.dir.path().join(format!("users/u{u}")))
                .current_dir(self.dir.path())
                // The compilers' temporary files (`cc*.s`) go with the scratch
                // directory, also when a killed smtlab leaves it to the next one's sweep.
                .env("TMPDIR", self.dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(err_file);
            if let Some(c) = &self.cpus {
                cmd.pin_to(c).map_err(BenchError::Pin)?;
            }
            groups.push(ChildGroup::spawn(&mut cmd).map_err(|e| io_err("start a user", e))?);
        }
        let mut failures = Vec::new();
        for (u, g) in groups.iter_mut().enumerate() {
            let out = g
                .child_mut()
                .wait()
                .map_err(|e| io_err("wait for a user", e))?;
            if !out.success() {
                let err = fs::read_to_string(self.dir.path().join(format!("users/u{u}.err")))
                    .unwrap_or_default();
                let line = err.lines().last().unwrap_or("no message").to_string();
                failures.push(format!("user {u} ({out}): {line}"));
            }
        }
        let end = now_ns();
        drop(groups);
        if let Some(f) = failures.first() {
            return Err(BenchError::check(NAME, format!("a script failed: {f}")));
        }
        for u in 0..self.users {
            let log = fs::read_to_string(self.dir.path().join(format!("users/u{u}/log")))
                .unwrap_or_default();
            if log.lines().count() as u64 != n {
                return Err(BenchError::check(
                    NAME,
                    format!("user {u} completed {} of {n} scripts", log.lines().count()),
                ));
            }
        }
        let mut s = RawSample {
            elapsed_ns: end.saturating_sub(start).max(1),
            work: (n * self.users as u64) as f64,
            ..RawSample::default()
        };
        s.metrics.insert("users".into(), self.users as f64);
        s.metrics
            .insert("commands".into(), self.found.used.len() as f64);
        for st in STEPS {
            s.metrics.insert(
                format!("uses_{}", st.name),
                f64::from(u8::from(self.found.used.contains(&st.name))),
            );
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testutil;

    #[test]
    fn users_run_their_scripts_and_nothing_stays() {
        let pl = testutil::placement_first_cpu();
        let mut inst = testutil::prepare(&Sdet, &[("users", "3")], &pl, None).unwrap();
        let s = inst.sample(2).unwrap();
        assert_eq!(s.work, 6.0);
        assert_eq!(s.metrics["users"], 3.0);
        assert!(s.metrics["commands"] >= 8.0, "{:?}", s.metrics);
        assert_eq!(s.metrics["uses_ls"], 1.0);
        let s = inst.sample(1).unwrap();
        assert_eq!(s.work, 3.0);
        // A script that fails fails the sample, with the user and its message.
        let dir = crate::scratch::mine(DIR_PREFIX).pop().unwrap();
        fs::remove_file(dir.join("src/doc/words.txt")).unwrap();
        let e = inst.sample(1).unwrap_err().to_string();
        assert!(e.contains("a script failed: user 0"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        drop(inst);
        assert!(crate::scratch::mine(DIR_PREFIX).is_empty());
    }

    #[test]
    fn missing_commands_are_left_out_and_named() {
        let t = tempfile::tempdir().unwrap();
        // A PATH with only sh, ls and rm.
        for p in ["sh", "ls", "rm"] {
            if let Some(real) = find_in(&path_dirs(), p) {
                std::os::unix::fs::symlink(real, t.path().join(p)).unwrap();
            }
        }
        let f = Found::on_path(&[t.path().to_path_buf()]);
        assert!(f.sh.is_some());
        assert_eq!(f.used, ["ls", "rm"]);
        assert!(f.missing.contains(&"cc") && f.missing.contains(&"tar"));
        let line = f.missing_line().unwrap();
        assert!(
            line.starts_with("sdet: left out (not installed): cat, grep"),
            "{line}"
        );
        // Scripts from that set only hold the two steps.
        let root = tempfile::tempdir().unwrap();
        write_tree(root.path(), &f, 1, 7).unwrap();
        let s0 = fs::read_to_string(root.path().join("scripts/s0.sh")).unwrap();
        assert!(s0.contains("ls -lR") && !s0.contains("tar"));
    }

    #[test]
    fn a_bad_user_count_is_a_one_line_error() {
        let pl = testutil::placement_first_cpu();
        let e = testutil::prepare(&Sdet, &[("users", "0")], &pl, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("users") && e.contains("1 to 1024"), "{e}");
    }
}
