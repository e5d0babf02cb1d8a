//! `smtlab advise WORKLOAD` / `smtlab advise -- CMD`: should SMT be on for this
//! workload on this machine? Settings ([`crate::settings::advise`]), then the throughput
//! cells in each SMT state, the single-thread cost or partners and the headroom through
//! the experiment layer, each cell saved as it is measured ([`crate::sink`], a run of
//! suite `advise`), then the decision ([`smtlab_report::advice`]) rendered as text, JSON
//! or Markdown ([`crate::render::advice`]). With `--security`, the security modes in
//! place of the throughput cells, and their answer ([`smtlab_report::security`]).

use std::process::ExitCode;

use anyhow::{Result, bail};
use smtlab_report::advice;
use smtlab_runner::experiment::utilisation::Curve;
use smtlab_runner::experiment::{advise as exp, corun, smt};
use smtlab_runner::machine::Machine;
use smtlab_runner::session::{Ended, Group};

use crate::args::AdviseArgs;
use crate::output::emit;
use crate::render;
use crate::settings::advise::{Advise, PENALTY_SAMPLES, headroom_curve};
use crate::sink::{MeasuringSetup, StoreSink};

pub fn run(args: &AdviseArgs, machine: &dyn Machine) -> Result<ExitCode> {
    let text = crate::output::check_stdout_owner(args.json, args.export_markdown.as_deref())?;
    let s = crate::settings::advise::advise(args, machine)?;
    crate::term::notes(&s.notes);
    let headroom = args.headroom.then(|| headroom_curve(args.quick));
    if text {
        header(args, &s)?;
    }
    let mut measuring = MeasuringSetup::new(machine, s.cfg.clone(), args.json)?;
    measuring.how.client_rule = crate::settings::client_rule(&args.client_cpus);
    let plan = s.plan(headroom);
    let run = crate::settings::fresh_run("advise", machine, &s.topo, &s.cfg, s.notes.clone(), plan);
    measuring.handoff_at_start = run.environment.cpu_handoff.clone();
    // The plan and its time first, then each cell's line and the time left as it ends
    // (a latency sweep's cells, planned from the capacity measured, come on top).
    let catalog = smtlab_runner::catalog::all();
    let how = measuring.how.clone();
    let estimate = smtlab_runner::plan::estimate(&run.plan, &catalog, &s.topo, &s.cfg, how);
    crate::term::note_fit(&format!("plan: {} cells", estimate.cells()));
    for line in render::plan::summary(&estimate) {
        crate::term::note_fit(&line);
    }
    // The cells' table starts under the plan, not between the title and it.
    if text && s.security.is_none() {
        emit(&render::bench::header_line(crate::term::term_layout()))?;
    }
    let mut progress = crate::live::progress::Progress::new(&estimate);
    let printer = move |shown: crate::sink::Shown<'_>| {
        progress.cell_done(&shown);
        match render::advice::cell_line(shown) {
            Some(line) if text => emit(&line),
            _ => Ok(()),
        }
    };
    let mut sink = StoreSink::begin(&s.db, run, printer)?;
    let ended = measure(args, &s, &mut measuring, headroom, &mut sink)?;
    answer(args, &s, &measuring, ended, sink)
}

/// What the command measures, above its plan.
fn header(args: &AdviseArgs, s: &Advise) -> Result<()> {
    if let Some(sec) = &s.security {
        let (on, off) = (&sec.specs.0, &sec.specs.1);
        let scope = sec.scope.name();
        let tenants = sec.tenants.is_some();
        let header = render::advice::security_header(&s.subject.name(), scope, (on, off), tenants);
        return emit(&header);
    }
    let penalty = s.penalty.as_ref().map(|_| args.partners);
    let (name, states) = (s.subject.name(), !s.states.is_empty());
    emit(&render::advice::header(
        &name,
        &s.specs,
        states,
        s.sweep.as_deref(),
        penalty,
    ))
}

/// Measures the throughput cells, then (each only while nothing stopped) the latency
/// sweep, the single-thread cost or partners, and the headroom.
fn measure(
    args: &AdviseArgs,
    s: &Advise,
    measuring: &mut MeasuringSetup<'_>,
    headroom: Option<Curve>,
    sink: &mut StoreSink<'_>,
) -> Result<Ended> {
    if let Some(sec) = &s.security {
        return measure_security(s, sec, measuring, sink);
    }
    let groups = s.throughput_groups();
    let engine = measuring.engine();
    let measure = |groups, sink: &mut StoreSink<'_>| {
        smt::measure_groups(
            &engine,
            crate::settings::Stop::protection(),
            &s.topo,
            groups,
            sink,
        )
    };
    let mut ended = measure(groups, sink)?;
    if let (Ended::Complete, Some(pct)) = (ended, &s.sweep) {
        let groups = sweep_groups(s, &sink.cells, pct);
        ended = measure(groups, sink)?;
    }
    if let (Ended::Complete, Some(plan)) = (ended, &s.penalty) {
        if args.penalty {
            // Every sample of the cost is the same fixed piece of work: a fixed count.
            measuring.cfg.min_samples = PENALTY_SAMPLES;
            measuring.cfg.max_samples = PENALTY_SAMPLES;
        }
        ended = corun::measure(&measuring.engine(), &s.topo, plan, sink);
    }
    if let (Ended::Complete, Some(curve)) = (ended, headroom) {
        (measuring.cfg.min_samples, measuring.cfg.max_samples) = (3, 3);
        measuring.cfg.warmup_ns = 0;
        ended = exp::measure_headroom(&measuring.engine(), &s.topo, curve, sink)?;
    }
    Ok(ended)
}

/// The security modes at full load, then (a server with an open loop, while nothing
/// stopped) at a light load; the `coresched` cells skipped with the one reason where
/// the kernel cannot run them.
fn measure_security(
    s: &Advise,
    sec: &crate::settings::advise::Security,
    measuring: &mut MeasuringSetup<'_>,
    sink: &mut StoreSink<'_>,
) -> Result<Ended> {
    use smtlab_runner::session::SessionObserver;
    // The kernel counts forced idle only with schedstats on: on for every mode's cells
    // alike (it costs the scheduler a little), put back after.
    // A cookie per cgroup needs the measuring process of the os rows in smtlab's
    // cgroup: there in every mode, so that none pays the cgroup's cost alone.
    if sec.scope == smtlab_model::keys::CookieScope::Cgroup {
        smtlab_bench::process::measuring_processes_in_cgroup();
    }
    let _schedstats = match sec.refusal {
        Some(_) => None,
        None => forced_idle_counted(measuring.machine),
    };
    let engine = measuring.engine();
    let measure = |groups: Vec<Group<'_>>, sink: &mut StoreSink<'_>| -> Result<Ended> {
        let groups = match &sec.refusal {
            Some(why) => {
                let (kept, skipped) =
                    smtlab_runner::experiment::security::without_coresched(groups, why);
                for x in &skipped {
                    if sink.skipped(x).is_break() {
                        return Ok(Ended::Stopped);
                    }
                }
                kept
            }
            None => groups,
        };
        let protection = crate::settings::Stop::protection();
        Ok(smt::measure_groups(
            &engine, protection, &s.topo, groups, sink,
        )?)
    };
    let mut ended = measure(s.throughput_groups(), sink)?;
    if ended == Ended::Complete && s.subject.sweepable() {
        match smtlab_runner::experiment::security::light_rate(&sink.cells, &s.subject) {
            Some(rate) => ended = measure(s.security_groups(sec, Some(rate)), sink)?,
            None => crate::term::note_fit(
                "note: no light load: SMT off served no requests to take a share of",
            ),
        }
    }
    if let (Ended::Complete, Some(plan)) = (ended, &sec.tenants) {
        ended = measure(corun::cell_plans(plan), sink)?;
    }
    Ok(ended)
}

/// schedstats on for the run, so the kernel counts forced idle (the guard puts them
/// back); where they stay off, one note says why and the cells carry no such figure.
fn forced_idle_counted(machine: &dyn Machine) -> Option<smtlab_control::FileWrites> {
    let why = match machine.count_forced_idle() {
        Ok(Some(guard)) => return Some(guard),
        Err(e) => e.to_string(),
        // On already, or a kernel without them.
        Ok(None) if smtlab_control::coresched::schedstats_on(&machine.root().join("proc")) => {
            return None;
        }
        Ok(None) => "this kernel has no kernel.sched_schedstats (CONFIG_SCHEDSTATS)".into(),
    };
    crate::term::note_fit(&format!("note: forced idle not counted: {why}"));
    None
}

/// The latency sweep's cells, at rates from the capacity just measured on each base
/// (so they are not in the run's plan).
fn sweep_groups<'a>(
    s: &'a Advise,
    cells: &[smtlab_model::CellRecord],
    pct: &[f64],
) -> Vec<Group<'a>> {
    let mut groups = Vec::new();
    for (base, other) in exp::sweep_sides(&s.specs) {
        match exp::capacity_per_s(cells, &s.subject, &base) {
            Some(cap) => {
                let rates = exp::sweep_rates(cap, pct);
                groups.extend(exp::sweep_groups(
                    &s.subject,
                    (&base, &other),
                    &rates,
                    &s.topo,
                ));
            }
            None => crate::term::note_fit(&format!(
                "note: no latency sweep on {base} and {other}: no capacity was measured on {base}"
            )),
        }
    }
    // With SMT switched, the sweep is SMT on's (both sides need the siblings).
    let on: &[smt::SmtState] = if s.states.is_empty() {
        &[]
    } else {
        &[smt::SmtState::On]
    };
    smt::turns(groups, on)
}

/// Closes the run and renders the answers, or the command's failure, or the stop.
fn answer(
    args: &AdviseArgs,
    s: &Advise,
    measuring: &MeasuringSetup<'_>,
    ended: Ended,
    sink: StoreSink<'_>,
) -> Result<ExitCode> {
    let stopped = measuring.stopped(ended);
    // A command that cannot run at all is an error of the command, not an answer.
    let command = matches!(
        s.subject,
        exp::Subject::Command(_) | exp::Subject::Served(_)
    );
    if command && let Some(x) = sink.skipped.iter().find(|x| x.reason.contains("exec")) {
        let reason = x.reason.clone();
        let _ = sink.finish(false, args.db.db.as_deref());
        bail!("{}", reason.strip_prefix("exec: ").unwrap_or(&reason));
    }
    let sink = sink.finish(stopped.is_some(), args.db.db.as_deref())?;
    if let Some(code) = stopped {
        return Ok(code);
    }
    if s.security.is_some() {
        return security_answer(args, &sink);
    }
    let mut evidence = advice::evidence(&sink.cells, s.smt());
    advice::add_unmeasured(&mut evidence, &sink.skipped);
    if args.partners {
        predicted_partners(s, sink.run_id, &mut evidence)?;
    }
    let answers: Vec<advice::Advice> = evidence.iter().map(advice::decide).collect();
    if answers.is_empty() {
        bail!("nothing measured to advise on: every placement was skipped");
    }
    let scaling = advice::scaling(&sink.cells, s.smt(), s.topo.cpus.len());
    render::advice::answers(args, sink.run_id, &s.notes, &answers, &scaling)?;
    Ok(ExitCode::SUCCESS)
}

/// `--partners`: the partners this run did not measure (no SMT sibling here, a pair
/// skipped or held back), predicted by the latest finished `predict` run of this CPU
/// model in the database, marked as predicted; one note for those neither measured nor
/// predicted.
fn predicted_partners(s: &Advise, run_id: i64, evidence: &mut [advice::Evidence]) -> Result<()> {
    let names: Vec<String> = exp::default_partners()?.iter().map(|w| w.name()).collect();
    let measured = |e: &advice::Evidence| {
        names
            .iter()
            .all(|n| e.partners.iter().any(|p| &p.partner == n))
    };
    if evidence.is_empty() || evidence.iter().all(measured) {
        return Ok(());
    }
    let store = smtlab_store::Store::open_read_only(&s.db)?;
    let runs = store.list_runs()?;
    let model = runs
        .iter()
        .find(|r| r.id == run_id)
        .and_then(|r| r.cpu_model.clone());
    let latest = runs
        .iter()
        .filter(|r| r.suite.as_deref() == Some(smtlab_report::predict::stored::SUITE))
        .filter(|r| r.status == smtlab_model::RunStatus::Finished && r.cpu_model == model)
        .max_by_key(|r| (r.started_unix_s, r.id));
    let missing = match latest {
        Some(r) => match smtlab_report::predict::stored::analyse_run(&store.load_run(r.id)?) {
            Some(doc) => advice::add_predicted_partners(evidence, &doc, &names),
            None => names,
        },
        None => names,
    };
    let missing: Vec<String> = missing
        .into_iter()
        .filter(|n| {
            evidence
                .iter()
                .any(|e| !e.partners.iter().any(|p| &p.partner == n))
        })
        .collect();
    if !missing.is_empty() {
        crate::term::note_fit(&format!(
            "note: partners neither measured nor predicted: {} (no finished `smtlab predict` run of this CPU model profiles them in the sibling form)",
            missing.join(", ")
        ));
    }
    Ok(())
}

/// `--security`'s answer: per workload and load, each mode's figures and the choice.
fn security_answer(args: &AdviseArgs, sink: &StoreSink<'_>) -> Result<ExitCode> {
    use smtlab_report::security;
    let answers = security::security(&sink.cells, &sink.skipped);
    if answers.is_empty() {
        bail!("nothing measured to advise on: every security mode was skipped");
    }
    if let Some(path) = &args.export_markdown
        && crate::output::export(path, security::markdown(&answers).as_bytes())?
    {
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        let doc = serde_json::json!({
            "schema": security::SECURITY_SCHEMA,
            "run_id": sink.run_id,
            "answers": answers,
        });
        emit(&crate::output::json_text(&doc)?)?;
    } else {
        emit(&render::advice::security_answer(&answers))?;
    }
    Ok(ExitCode::SUCCESS)
}
