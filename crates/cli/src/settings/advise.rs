//! The settings of `smtlab advise`, settled once before anything is measured: the
//! subject (a catalog workload or your command), the machine and the placements the
//! answer compares, the SMT states to switch through, the single-thread cost or partner
//! plan, the security modes (`--security`), the cells' plan as stored, and the notes on
//! what this machine cannot do.

use anyhow::{Result, bail};
use smtlab_model::keys::Form;
use smtlab_model::placement::Named;
use smtlab_model::{CellKey, RunConfig, Topology};
use smtlab_runner::experiment::advise::{self as exp, PreparedCommand, Subject};
use smtlab_runner::experiment::corun::{self as corun_exp, Workload};
use smtlab_runner::experiment::{security as sec, smt, utilisation as util};
use smtlab_runner::machine::Machine;
use smtlab_runner::session::CellPlan;

use crate::args::AdviseArgs;

/// Length of one piece of work of the single-thread cost, and how many per cell.
const PENALTY_RUN_NS: u64 = 20_000_000;
pub const PENALTY_SAMPLES: usize = 10;

/// Everything `advise` needs, settled.
pub struct Advise {
    pub subject: Subject,
    pub cfg: RunConfig,
    pub warmup: Option<usize>,
    pub topo: Topology,
    pub db: std::path::PathBuf,
    /// The placements compared (`1c1t`, `1c2t`, `2c1t`; with SMT switched, `all` too).
    pub specs: Vec<String>,
    /// SMT states to switch through (empty: the state found).
    pub states: Vec<smtlab_model::keys::SmtState>,
    /// The single-thread cost or the partners, when asked and measurable here.
    pub penalty: Option<corun_exp::CorunPlan>,
    /// A server's latency sweep: the shares of each baseline's capacity offered, in
    /// percent (`None`: not measured: no server under smtlab's load, or `--no-sweep`).
    pub sweep: Option<Vec<f64>>,
    /// The security modes (`--security`), measured in place of the throughput cells.
    pub security: Option<Security>,
    pub notes: Vec<String>,
}

/// What `--security` measures here.
pub struct Security {
    pub scope: smtlab_model::keys::CookieScope,
    /// The placements of the SMT-on modes and of SMT off.
    pub specs: (String, String),
    /// Why core scheduling cannot run here: its cells are skipped with this reason.
    pub refusal: Option<smtlab_control::coresched::CoreSchedError>,
    /// With `--partners`: the workload, one thread, beside each partner as distrusting
    /// tenants, in each mode.
    pub tenants: Option<corun_exp::CorunPlan>,
}

impl Advise {
    /// Whether the answer can speak of SMT (seen, or switched here).
    pub fn smt(&self) -> bool {
        self.topo.smt_visible() || !self.states.is_empty()
    }

    /// The throughput cells, one group per SMT state (with `--security`, the modes'
    /// groups at full load).
    pub fn throughput_groups(&self) -> Vec<Vec<CellPlan<'_>>> {
        if let Some(s) = &self.security {
            return self.security_groups(s, None);
        }
        let group = exp::throughput_group(&self.subject, &self.specs, &self.topo, self.warmup);
        smt::turns(vec![group], &self.states)
    }

    /// The security modes' groups, at the open-loop `rate` where given (light load).
    pub fn security_groups(&self, s: &Security, rate: Option<f64>) -> Vec<Vec<CellPlan<'_>>> {
        let specs = (s.specs.0.as_str(), s.specs.1.as_str());
        sec::groups(&self.subject, s.scope, specs, &self.topo, self.warmup, rate)
    }

    /// Every cell as the run's plan stores it, in measuring order.
    pub fn plan(&self, headroom: Option<util::Curve>) -> Vec<CellKey> {
        let mut plan: Vec<CellKey> = self
            .throughput_groups()
            .iter()
            .flatten()
            .map(|c| c.key.clone())
            .collect();
        let tenants = self.security.as_ref().and_then(|s| s.tenants.as_ref());
        for p in self.penalty.iter().chain(tenants) {
            plan.extend(p.iter().flatten().map(|c| c.key.clone()));
        }
        if let Some(curve) = headroom {
            plan.extend(util::plan(
                curve,
                &[util::SmtState::AsFound],
                None,
                &self.topo,
            ));
        }
        plan
    }
}

pub fn advise(args: &AdviseArgs, machine: &dyn Machine) -> Result<Advise> {
    let (subject, mut cfg, warmup) = subject(args)?;
    smtlab_runner::config::validate(&cfg)?;
    cfg.known_overheads = Some(smtlab_runner::measure_overheads(machine.clock()));
    let topo = machine.topology()?;
    let db = super::db_path(&args.db);
    smtlab_store::Store::check_target(&db)?;
    let (mut specs, no_smt) = exp::placements_for(&topo, subject.server());
    let mut notes: Vec<String> = no_smt.into_iter().collect();
    let resolved: Vec<_> = specs
        .iter()
        .filter_map(|s| super::resolve(s, &topo).ok())
        .collect();
    let states = super::switchable_states(&args.smt, &resolved, &topo, machine)?;
    if !states.is_empty() {
        // SMT can be switched (on, or off as found): the SMT placements, and the whole
        // machine in both states, which is the comparison that matters.
        notes.clear();
        specs = switched_specs(&topo, subject.server(), &mut notes);
    }
    if args.security.is_some() {
        // Its own placements: what the SMT question could not answer here is not its.
        notes.clear();
    }
    let mut security = security(args, machine, &topo, &subject, &mut notes)?;
    if let (Some(sec), true) = (security.as_mut(), args.partners) {
        sec.tenants = tenant_plan(&subject, &topo, &mut notes)?;
    }
    let mut sweep = sweep(args, &subject)?.filter(|_| security.is_none());
    if sweep.is_some() && exp::sweep_sides(&specs).is_empty() {
        // Nothing to compare the latency on: no SMT pair measured.
        if args.sweep.is_some() {
            notes.push(
                "no latency sweep: it compares 1c1t with 1c2t, and there is no 1c2t here".into(),
            );
        }
        sweep = None;
    }
    let pair = smtlab_runner::corun::cpu_pair(&topo).map_err(anyhow::Error::msg)?;
    let pairs = (args.penalty || args.partners) && args.security.is_none();
    let sibling = match (&pair.sibling, pairs) {
        (Ok(cpu), true) => Some(*cpu),
        (Err(why), true) => {
            let what = if args.penalty {
                "single-thread cost"
            } else {
                "partners"
            };
            // One line for everything this machine cannot do.
            match notes.first_mut() {
                Some(n) => n.push_str(&format!("; {what} not measured (no SMT sibling)")),
                None => notes.push(format!("{what} not measured: {why}")),
            }
            None
        }
        (_, false) => None,
    };
    let penalty = match sibling {
        Some(cpu) if args.partners => {
            let task = subject.penalty_task()?;
            let partners = exp::default_partners()?;
            Some(exp::partner_plan(&task, &partners, cpu, &pair, &topo))
        }
        Some(cpu) => Some(penalty_plan(&subject, cpu, &pair, &topo)?),
        None => None,
    };
    Ok(Advise {
        subject,
        cfg,
        warmup,
        topo,
        db,
        specs,
        states,
        penalty,
        sweep,
        security,
        notes,
    })
}

/// `--security`: the cookie's scope, the placements, and why core scheduling cannot run
/// here (one note for all its cells).
fn security(
    args: &AdviseArgs,
    machine: &dyn Machine,
    topo: &Topology,
    subject: &Subject,
    notes: &mut Vec<String>,
) -> Result<Option<Security>> {
    let Some(scope) = args.security else {
        return Ok(None);
    };
    // SMT off as found answers ENODEV; the coresched cells switch it on first.
    let refusal = machine.core_sched_refusal().filter(|e| {
        !(matches!(e, smtlab_control::coresched::CoreSchedError::NoSmt)
            && topo.smt.control.as_deref() == Some("off")
            && machine.switch_refusal().is_none())
    });
    if let Some(why) = &refusal {
        notes.push(format!("coresched cells skipped: {why}"));
    }
    Ok(Some(Security {
        scope,
        specs: sec::specs(topo, subject.server()),
        refusal,
        tenants: None,
    }))
}

/// `--security --partners`: the tenant pairs on this machine's first core and its
/// sibling, or a note on why there are none.
fn tenant_plan(
    subject: &Subject,
    topo: &Topology,
    notes: &mut Vec<String>,
) -> Result<Option<corun_exp::CorunPlan>> {
    let pair = smtlab_runner::corun::cpu_pair(topo).map_err(anyhow::Error::msg)?;
    let sibling = match &pair.sibling {
        Ok(cpu) => *cpu,
        Err(why) => {
            notes.push(format!("distrusting tenants not measured: {why}"));
            return Ok(None);
        }
    };
    let task = subject.penalty_task()?;
    let partners = exp::default_partners()?;
    Ok(Some(sec::tenant_plan(
        &task,
        &partners,
        (pair.cpu, sibling),
        topo,
    )))
}

/// The placements compared with SMT switched off and on: the SMT pairs and the whole
/// machine, which for a server (`server`) is half the cores, one thread each against all
/// their threads (`half-cores-Kt`, K the threads a core has, 2 when SMT is off as
/// found), its clients on the other half; where half the cores are no placement of their
/// own (five cores or fewer), a server's whole machine is left out with a note.
fn switched_specs(topo: &Topology, server: bool, notes: &mut Vec<String>) -> Vec<String> {
    let sides = [Named::OneCore, Named::Siblings, Named::TwoCores];
    let mut specs: Vec<String> = sides.iter().map(Named::to_string).collect();
    if !server {
        specs.push(Named::All.to_string());
        return specs;
    }
    let cpus = |spec: &str| super::resolve(spec, topo).ok().map(|r| r.cpu_set());
    let one = format!("{}1t", smtlab_placement::HALF_CORES_PREFIX);
    let half = cpus(&one);
    let own = half
        .as_ref()
        .is_some_and(|h| specs.iter().all(|s| cpus(s).as_ref() != Some(h)));
    if own {
        let k = topo.smt.threads_per_core_max.max(2);
        specs.push(one);
        specs.push(format!("{}{k}t", smtlab_placement::HALF_CORES_PREFIX));
    } else {
        notes.push(format!(
            "SMT off vs on of a server's whole machine is not measured here ({}): half the cores would be the CPUs of 1c1t or 2c1t (it takes six cores or more), and `all` would leave its clients no CPU",
            smtlab_model::unit::plural(topo.core_count(), "core")
        ));
    }
    specs
}

/// The latency sweep's shares, when it applies: a server under smtlab's load, unless
/// `--no-sweep`; `--sweep` on anything else, or a share out of range, is an error.
fn sweep(args: &AdviseArgs, subject: &Subject) -> Result<Option<Vec<f64>>> {
    if let Subject::Catalog(w) = subject
        && w.params.get_f64(exp::RATE_PARAM).is_ok_and(|r| r != 0.0)
    {
        bail!(
            "--param {}=...: advise measures a closed loop's throughput and sweeps the open loop's rates itself (--sweep PCT,...)",
            exp::RATE_PARAM
        );
    }
    if args.no_sweep {
        return Ok(None);
    }
    if !subject.sweepable() {
        if args.sweep.is_some() {
            bail!(
                "--sweep is for a server under smtlab's HTTP load (web-static, web-slo, or --server CMD without --client)"
            );
        }
        return Ok(None);
    }
    let pct = args
        .sweep
        .clone()
        .unwrap_or_else(|| exp::SWEEP_PCT.to_vec());
    if let Some(bad) = pct
        .iter()
        .find(|p| !(p.is_finite() && **p > 0.0 && **p <= 200.0))
    {
        bail!(
            "--sweep {bad}: expected shares of the measured capacity in percent, above 0 and at most 200, e.g. 25,50,75,90"
        );
    }
    Ok(Some(pct))
}

/// The subject and the settings its cells are measured with.
fn subject(args: &AdviseArgs) -> Result<(Subject, RunConfig, Option<usize>)> {
    if args.runs.reps < 2 {
        bail!(
            "--reps {}: expected at least 2, for an interval on each side",
            args.runs.reps
        );
    }
    if args.runs.throughput.is_some() && args.command.is_empty() && args.client.is_none() {
        bail!("--throughput is for your command (-- CMD) or your client (--client CMD)");
    }
    if let Some(server) = &args.server {
        if server.trim().is_empty() {
            bail!(
                "--server: an empty command; expected your server's command, e.g. --server 'my-server --port {{port}}'"
            );
        }
        if args.port.is_none() && !server.contains("{port}") {
            bail!(
                "--server {server:?}: put {{port}} where the command takes its port, or give --port N"
            );
        }
        let Some(client) = &args.client else {
            // smtlab's HTTP load: web-static's (or web-slo's at a target) own server.
            let name = if args.slo.is_some() {
                "web-slo"
            } else {
                "web-static"
            };
            let mut params = args.params.clone();
            params.push("server=cmd".into());
            params.push(format!("cmd={server}"));
            if let Some(port) = args.port {
                params.push(format!("port={port}"));
            }
            return catalog_subject(name, params, args);
        };
        if args.slo.is_some() {
            bail!("--slo is for --server driven by smtlab's load; your --client's rate is its own");
        }
        if !args.params.is_empty() {
            bail!(
                "--param is for catalog workloads and smtlab's load; your --client takes its own arguments"
            );
        }
        if args.penalty || args.partners {
            bail!(
                "--penalty and --partners are not measured for --client: the server's threads are not one task"
            );
        }
        if client.trim().is_empty() {
            bail!(
                "--client: an empty command; expected your load tool's command, e.g. --client 'pgbench -p {{port}} -t 2000'"
            );
        }
        let argv = ["sh".to_string(), "-c".to_string(), client.clone()];
        let (command, cfg) = args.runs.bench(&argv)?;
        let s = Subject::Served(exp::ServedCommand {
            server: server.clone(),
            port: args.port.unwrap_or(0),
            client: command,
        });
        return Ok((s, cfg, Some(args.runs.warmup as usize)));
    }
    if let Some(name) = &args.workload {
        return catalog_subject(name, args.params.clone(), args);
    }
    command_subject(args)
}

/// Catalog workload `name` with the parameters `params` (and `--slo`'s).
fn catalog_subject(
    name: &str,
    mut params: Vec<String>,
    args: &AdviseArgs,
) -> Result<(Subject, RunConfig, Option<usize>)> {
    if let Some(slo) = &args.slo {
        let declares = smtlab_runner::catalog::find(name).is_some_and(|b| {
            b.info()
                .params
                .iter()
                .any(|p| p.name == smtlab_report::advice::SLO_PARAM)
        });
        if !declares {
            bail!(
                "--slo {slo}: {name} is not measured at a latency target; web-slo is (smtlab advise web-slo --slo {slo})"
            );
        }
        smtlab_model::slo::Slo::parse(slo).map_err(|e| anyhow::anyhow!("--slo {e}"))?;
        params.push(format!("{}={slo}", smtlab_report::advice::SLO_PARAM));
    }
    let s = Subject::catalog(name, &params, args.quick)?;
    Ok((s, super::run_config(args.quick), None))
}

/// The user's command after `--`.
fn command_subject(args: &AdviseArgs) -> Result<(Subject, RunConfig, Option<usize>)> {
    let argv = &args.command;
    if argv.is_empty() || argv[0].is_empty() {
        bail!("no workload given: smtlab advise WORKLOAD, or smtlab advise [OPTIONS] -- CMD ARGS");
    }
    if !args.params.is_empty() {
        bail!("--param is for catalog workloads; your command takes its own arguments");
    }
    if args.slo.is_some() {
        bail!("--slo is for workloads measured at a latency target (web-slo), not a command");
    }
    let (command, cfg) = args.runs.bench(argv)?;
    let s = Subject::Command(PreparedCommand {
        command,
        prepare: args.prepare.clone(),
    });
    Ok((s, cfg, Some(args.runs.warmup as usize)))
}

/// The single-thread cost's plan: the workload, one thread, alone and next to each
/// default hog on its sibling `cpu`.
fn penalty_plan(
    subject: &Subject,
    cpu: u32,
    pair: &smtlab_runner::corun::CpuPair,
    topo: &Topology,
) -> Result<corun_exp::CorunPlan> {
    let task = subject.penalty_task()?;
    let hogs = corun_exp::DEFAULT_HOGS
        .iter()
        .map(|h| Workload::catalog(h, &[], &[("threads", "1")]))
        .collect::<Result<Vec<_>, _>>()?;
    let fixed = match subject {
        Subject::Command(_) | Subject::Served(_) => 1,
        Subject::Catalog(_) => corun_exp::calibrate_task(&task, PENALTY_RUN_NS, pair, topo)?,
    };
    Ok(corun_exp::penalty_plan(
        &task,
        fixed,
        &hogs,
        &[(Form::Sibling, cpu)],
        pair,
        topo,
    ))
}

/// The headroom's curve: four steps (25 to 100% of the maximum), half a second each (a
/// fifth in `--quick`), 200 us jobs.
pub fn headroom_curve(quick: bool) -> util::Curve {
    util::Curve {
        steps: 4,
        step: std::time::Duration::from_millis(if quick { 200 } else { 500 }),
        job: std::time::Duration::from_micros(200),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_switched_off_and_on_compares_half_the_cores_or_says_why_not() {
        let sixteen = smtlab_fixtures::build::intel(1, 16, 2);
        let mut notes = Vec::new();
        assert_eq!(
            switched_specs(&sixteen, true, &mut notes),
            ["1c1t", "1c2t", "2c1t", "half-cores-1t", "half-cores-2t"]
        );
        assert!(notes.is_empty());
        // Not a server: the whole machine is `all`.
        assert_eq!(
            switched_specs(&sixteen, false, &mut notes),
            ["1c1t", "1c2t", "2c1t", "all"]
        );
        // SMT off as found (one thread per core seen): the on side still has siblings.
        let off = smtlab_fixtures::build::one_cpu_per_core(&(0..16).collect::<Vec<_>>());
        assert_eq!(
            switched_specs(&off, true, &mut notes)[3..],
            ["half-cores-1t", "half-cores-2t"]
        );
        // Four cores: half of them is 2c1t; said in one line, and no `all`.
        let four = smtlab_fixtures::build::intel(1, 4, 2);
        assert_eq!(
            switched_specs(&four, true, &mut notes),
            ["1c1t", "1c2t", "2c1t"]
        );
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("(4 cores)"), "{}", notes[0]);
        assert!(notes[0].contains("`all` would leave its clients no CPU"));
    }
}
