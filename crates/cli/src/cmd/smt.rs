//! `smtlab smt`: the SMT and CPU hotplug state, and switching SMT off and on (the
//! uniprocessor state the measuring commands enter around a `1c1t-up` cell is in
//! [`crate::settings`]).

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use smtlab_control::coresched::CookiedTask;
use smtlab_control::{SmtSnapshot, SmtSwitch, Sysfs};

use crate::args::{SmtArgs, SmtWord};
use crate::output::{emit, json_text};
use crate::render::smt::{control_word, cores_line, describe, list};

#[derive(Serialize)]
struct StateJson<'a> {
    schema: &'static str,
    #[serde(flatten)]
    state: &'a SmtSnapshot,
    offline: Vec<u32>,
}

pub fn run(args: &SmtArgs, machine: &dyn smtlab_runner::machine::Machine) -> Result<()> {
    let sysfs = match &args.sysfs.sysfs {
        Some(dir) => Sysfs::at(dir),
        None => machine.sysfs(),
    };
    if args.cookies {
        return cookies(machine, args.json);
    }
    let Some(word) = args.switch else {
        let state = smtlab_control::state::read(&sysfs)?;
        if args.json {
            let offline = state.offline();
            return emit(&json_text(&StateJson {
                schema: "smtlab.smt/1",
                state: &state,
                offline,
            })?);
        }
        return emit(&describe(&state));
    };
    let on = word == SmtWord::On;
    let holds = args.hold.is_some() || !args.command.is_empty();
    let mut switch = if holds {
        SmtSwitch::new(sysfs)?
    } else {
        // The user's own lasting change: nothing to guard.
        let none = smtlab_control::guard::Protection {
            guardian: false,
            signals: false,
        };
        SmtSwitch::with_protection(sysfs, none)?
    };
    let was = control_word(switch.original()).to_string();
    switch.set(on)?;
    let now = switch.state()?;
    let summary = format!(
        "SMT {} (was {was}): CPUs online {}; {}",
        if on { "on" } else { "off" },
        list(&now.online),
        cores_line(&now)
    );
    if let Some(secs) = args.hold {
        if !(secs.is_finite() && secs >= 0.0) {
            bail!("--hold {secs}: expected a number of seconds, 0 or more");
        }
        crate::term::stderr_line(&format!(
            "{summary}\nholding for {secs} s, then back to {was} (Ctrl-C puts it back now)"
        ));
        std::thread::sleep(Duration::from_secs_f64(secs));
        switch.finish()?;
        crate::term::stderr_line(&format!("SMT back to {was}"));
        return Ok(());
    }
    if let Some((program, rest)) = args.command.split_first() {
        crate::term::stderr_line(&format!("{summary}; running `{}`", args.command.join(" ")));
        let status = std::process::Command::new(program)
            .args(rest)
            .status()
            .with_context(|| format!("cannot run {program:?}"));
        // Restore before reporting how the command ended.
        switch.finish()?;
        crate::term::stderr_line(&format!("SMT back to {was}"));
        let status = status?;
        if !status.success() {
            bail!("command `{}` ended with {status}", args.command.join(" "));
        }
        return Ok(());
    }
    switch.keep();
    emit(&format!("{summary}\n"))
}

#[derive(Serialize)]
struct CookiesJson<'a> {
    schema: &'static str,
    available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    refusal: Option<String>,
    tasks: &'a [CookiedTask],
    /// Tasks that could not be asked (gone meanwhile, or not ours to trace).
    unasked: usize,
}

/// `smtlab smt --cookies`: the tasks holding a core-scheduling cookie, so that what a
/// `coresched` cell gave out can be seen to end with it.
fn cookies(machine: &dyn smtlab_runner::machine::Machine, json: bool) -> Result<()> {
    let found = smtlab_control::coresched::cookied_tasks(&machine.root().join("proc"));
    let (tasks, unasked, refusal) = match found {
        Ok((tasks, unasked)) => (tasks, unasked, None),
        Err(why) => (Vec::new(), 0, Some(why.to_string())),
    };
    if json {
        return emit(&json_text(&CookiesJson {
            schema: "smtlab.cookies/1",
            available: refusal.is_none(),
            refusal,
            tasks: &tasks,
            unasked,
        })?);
    }
    emit(&render_cookies(&tasks, unasked, refusal.as_deref()))
}

fn render_cookies(tasks: &[CookiedTask], unasked: usize, refusal: Option<&str>) -> String {
    if let Some(why) = refusal {
        return format!("core scheduling: unavailable: {why}\n");
    }
    let mut distinct: Vec<u64> = tasks.iter().map(|t| t.cookie).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let mut out = match tasks.len() {
        0 => "core scheduling: no task holds a cookie".to_string(),
        n => format!(
            "core scheduling: {} hold{} {}",
            smtlab_model::unit::plural(n, "task"),
            if n == 1 { "s" } else { "" },
            smtlab_model::unit::plural(distinct.len(), "cookie")
        ),
    };
    if unasked > 0 {
        out.push_str(&format!(
            " ({unasked} tasks not asked: gone, or not ours to trace)"
        ));
    }
    out.push('\n');
    if !tasks.is_empty() {
        out.push_str(&format!(
            "{:>8} {:>8} {:>20}  COMM\n",
            "PID", "TID", "COOKIE"
        ));
    }
    for t in tasks {
        out.push_str(&format!(
            "{:>8} {:>8} {:>20}  {}\n",
            t.pid, t.tid, t.cookie, t.comm
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(tid: u32, cookie: u64) -> CookiedTask {
        CookiedTask {
            pid: 10,
            tid,
            comm: "smtlab".into(),
            cookie,
        }
    }

    #[test]
    fn cookies_are_counted_by_task_and_by_cookie() {
        let text = render_cookies(&[task(10, 7), task(11, 7), task(12, 9)], 0, None);
        assert!(
            text.starts_with("core scheduling: 3 tasks hold 2 cookies\n"),
            "{text}"
        );
        assert!(
            text.contains("      10       12                    9  smtlab"),
            "{text}"
        );
        let text = render_cookies(&[], 2, None);
        assert!(
            text.starts_with("core scheduling: no task holds a cookie (2 tasks not asked"),
            "{text}"
        );
        let text = render_cookies(&[], 0, Some("no core scheduling here: x"));
        assert_eq!(
            text,
            "core scheduling: unavailable: no core scheduling here: x\n"
        );
    }
}
