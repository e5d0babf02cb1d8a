//! The security modes of `smtlab advise --security`: the workload on the whole machine
//! (a server: half of it, or one core, its clients apart) with SMT on and nothing
//! between the siblings (`smt-on`), with SMT on and its tasks in a core-scheduling
//! cookie of their own (`coresched`), and with SMT off (`smt-off`). The two SMT-on modes
//! are one group, their samples taken in turn; SMT off is the next group, switched by
//! [`super::smt::measure_groups`]. Each cell records the forced idle of its samples
//! (the session's cell worker). A server with an open-loop rate is also measured at a
//! light load: a share of the capacity SMT off served ([`light_rate`]).
//!
//! Distrusting tenants ([`tenant_plan`]): the workload, one thread, beside each partner
//! on its SMT sibling with nothing between them (`smt-on`), each in a cookie of its own
//! (`coresched`: the cell's thread gets one before the workload starts, the partner's
//! threads theirs once started), and with SMT off, the two sharing the one CPU left of
//! the core (`smt-off`, placement `corun-shared`).
//!
//! Where the kernel has no core scheduling, the `coresched` cells are not measured:
//! [`without_coresched`] takes them out with one reason for all.

use smtlab_control::coresched::CoreSchedError;
use smtlab_model::keys::{Conditions, CookieScope, Form, SecurityMode};
use smtlab_model::placement::Named;
use smtlab_model::{CellRecord, SkippedCell, Topology};
use smtlab_placement::HALF_CORES_PREFIX;

use super::advise::{RATE_PARAM, Subject, served, throughput_group};
use super::corun::{CorunPlan, Workload};
use crate::corun::placement_of;
use crate::session::{CellPlan, Group};

/// The placement of a tenant pair with SMT off: both on the core's one CPU left.
pub const SHARED: &str = "corun-shared";

/// The share of SMT off's capacity a light load offers, in percent.
pub const LIGHT_PCT: f64 = 25.0;

/// The placements of the SMT-on modes and of SMT off: `all` in both for a workload
/// without a client side; for a server, half the cores (`half-cores-Kt`, then
/// `half-cores-1t`) where that is a placement of its own, else one core (`1c2t`, then
/// `1c1t`), its clients on the rest.
pub fn specs(topo: &Topology, server: bool) -> (String, String) {
    if !server {
        return (Named::All.to_string(), Named::All.to_string());
    }
    let resolves = |spec: &str| crate::plan::placed(spec, topo).ok().map(|r| r.cpu_set());
    let one = format!("{HALF_CORES_PREFIX}1t");
    let half = resolves(&one);
    let own = half.is_some()
        && half != resolves(Named::OneCore.name())
        && half != resolves(Named::TwoCores.name());
    if own {
        let k = topo.smt.threads_per_core_max.max(2);
        (format!("{HALF_CORES_PREFIX}{k}t"), one)
    } else {
        (Named::Siblings.to_string(), Named::OneCore.to_string())
    }
}

/// The modes' groups: `smt-on` and `coresched` (its cookie per `scope`) on `on`, then
/// `smt-off` on `off`; at the open-loop `rate` where given (a light load).
pub fn groups<'a>(
    subject: &'a Subject,
    scope: CookieScope,
    (on, off): (&str, &str),
    topo: &Topology,
    warmup: Option<usize>,
    rate: Option<f64>,
) -> Vec<Group<'a>> {
    let cell = |mode: SecurityMode, spec: &str| {
        let mut c = throughput_group(subject, &[spec.to_string()], topo, warmup).remove(0);
        c.key.conditions = mode.conditions(scope);
        if let Some(r) = rate {
            c.key.params.insert(RATE_PARAM.into(), format!("{r:.0}"));
            c.params = smtlab_bench::Params::from_pairs(c.key.params.clone());
        }
        c
    };
    vec![
        vec![
            cell(SecurityMode::SmtOn, on),
            cell(SecurityMode::CoreSched, on),
        ],
        vec![cell(SecurityMode::SmtOff, off)],
    ]
}

/// `groups` without their `coresched` cells, which come back skipped with `why`: one
/// reason for every cell (a kernel without `CONFIG_SCHED_CORE`, no SMT).
pub fn without_coresched<'a>(
    groups: Vec<Group<'a>>,
    why: &CoreSchedError,
) -> (Vec<Group<'a>>, Vec<SkippedCell>) {
    let mut skipped = Vec::new();
    let kept = groups
        .into_iter()
        .map(|g| {
            let (cs, rest): (Vec<CellPlan<'a>>, _) = g
                .into_iter()
                .partition(|c| c.key.conditions.security() == Some(SecurityMode::CoreSched));
            skipped.extend(cs.into_iter().map(|c| SkippedCell {
                key: c.key,
                reason: why.to_string(),
            }));
            rest
        })
        .filter(|g: &Group<'a>| !g.is_empty())
        .collect();
    (kept, skipped)
}

/// The light load's rate: [`LIGHT_PCT`] of what `subject` served with SMT off among
/// `cells` (the lowest capacity of the three, so every mode can carry it), whole
/// requests per second; `None` where no SMT-off cell served any.
pub fn light_rate(cells: &[CellRecord], subject: &Subject) -> Option<f64> {
    let cell = cells.iter().find(|c| {
        c.benchmark == subject.name()
            && c.conditions.security() == Some(SecurityMode::SmtOff)
            // The closed loop's cell (`rate=0`), not a light load's.
            && c.params.get(RATE_PARAM).is_none_or(|r| r == "0")
    })?;
    let capacity =
        smtlab_model::stats::mean(&served(cell)).filter(|m| m.is_finite() && *m > 0.0)?;
    Some((capacity * LIGHT_PCT / 100.0).round().max(1.0))
}

/// The tenant pairs: for each of `partners`, `task` on `cpu` beside it on `sibling` as
/// `smt-on` and `coresched` (a cookie each), one group, then both on `cpu` with SMT off.
pub fn tenant_plan(
    task: &Workload,
    partners: &[Workload],
    (cpu, sibling): (u32, u32),
    topo: &Topology,
) -> CorunPlan {
    let mut plan = Vec::new();
    for b in partners {
        let name = b.name();
        let pair = |mode: SecurityMode, cpus: Vec<u32>| {
            let mut c = super::corun::cell(task, Some(b), &name, Form::Sibling, cpus, None, topo);
            // A tenant's cookie is its cell thread's, inherited by what it starts.
            c.key.conditions = Conditions {
                form: Some(Form::Sibling),
                partner: Some(name.clone()),
                ..mode.conditions(CookieScope::Thread)
            };
            c.corun.partner_reference = false;
            c
        };
        plan.push(vec![
            pair(SecurityMode::SmtOn, vec![cpu, sibling]),
            pair(SecurityMode::CoreSched, vec![cpu, sibling]),
        ]);
        let mut off = pair(SecurityMode::SmtOff, vec![cpu, cpu]);
        off.key.placement = SHARED.into();
        off.placement = placement_of(SHARED, &[cpu, cpu], topo);
        plan.push(vec![off]);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_model::metrics::web::REQUESTS_PER_S;

    #[test]
    fn the_modes_are_two_groups_keyed_by_smt_state_and_cookie() {
        let topo = smtlab_fixtures::build::intel(1, 2, 2);
        let subject = Subject::catalog("int-ops", &[], true).unwrap();
        let (on, off) = specs(&topo, false);
        assert_eq!((on.as_str(), off.as_str()), ("all", "all"));
        let g = groups(
            &subject,
            CookieScope::Process,
            (&on, &off),
            &topo,
            None,
            None,
        );
        let modes: Vec<Vec<_>> = g
            .iter()
            .map(|g| {
                g.iter()
                    .map(|c| c.key.conditions.security().unwrap())
                    .collect()
            })
            .collect();
        assert_eq!(
            modes,
            [
                vec![SecurityMode::SmtOn, SecurityMode::CoreSched],
                vec![SecurityMode::SmtOff]
            ]
        );
        assert_eq!(g[0][1].key.conditions.cookie, Some(CookieScope::Process));
        let light = groups(
            &subject,
            CookieScope::Thread,
            (&on, &off),
            &topo,
            None,
            Some(250.0),
        );
        assert_eq!(light[1][0].key.params[RATE_PARAM], "250");
        assert_eq!(light[1][0].params.get_str(RATE_PARAM).unwrap(), "250");
    }

    #[test]
    fn a_kernel_without_core_scheduling_skips_those_cells_with_its_one_reason() {
        let topo = smtlab_fixtures::build::intel(1, 2, 2);
        let subject = Subject::catalog("int-ops", &[], true).unwrap();
        let g = groups(
            &subject,
            CookieScope::Thread,
            ("all", "all"),
            &topo,
            None,
            None,
        );
        let (kept, skipped) = without_coresched(g, &CoreSchedError::NoKernelSupport);
        assert_eq!(kept.iter().map(Vec::len).collect::<Vec<_>>(), [1, 1]);
        assert_eq!(skipped.len(), 1);
        assert!(
            skipped[0].reason.contains("CONFIG_SCHED_CORE"),
            "{}",
            skipped[0].reason
        );
        assert_eq!(
            skipped[0].key.conditions.security(),
            Some(SecurityMode::CoreSched)
        );
    }

    #[test]
    fn tenants_are_the_pair_on_siblings_with_and_without_cookies_then_on_one_cpu() {
        let topo = smtlab_fixtures::build::intel(1, 2, 2);
        let task = Workload::catalog("int-ops", &[], &[("threads", "1")]).unwrap();
        let b = Workload::catalog("mem-read", &[], &[("threads", "1")]).unwrap();
        let plan = tenant_plan(&task, &[b], (0, 1), &topo);
        assert_eq!(plan.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1]);
        let on = &plan[0][1];
        assert_eq!(on.key.conditions.security(), Some(SecurityMode::CoreSched));
        assert_eq!(on.key.conditions.form, Some(Form::Sibling));
        assert_eq!(on.key.conditions.partner.as_deref(), Some("mem-read"));
        assert_eq!(on.placement.cpus, [0, 1]);
        let off = &plan[1][0];
        assert_eq!(off.key.conditions.security(), Some(SecurityMode::SmtOff));
        assert_eq!(
            (off.key.placement.as_str(), off.placement.cpus.as_slice()),
            (SHARED, &[0, 0][..])
        );
    }

    #[test]
    fn the_light_load_is_a_quarter_of_what_smt_off_served() {
        let subject = Subject::catalog("web-static", &[], true).unwrap();
        let (_, params) = (
            0,
            throughput_group(
                &subject,
                &["1c1t".into()],
                &smtlab_fixtures::build::intel(1, 2, 2),
                None,
            )[0]
            .key
            .params
            .clone(),
        );
        let served = |mode: SecurityMode, per_s: f64| {
            let mut c = smtlab_fixtures::build::cell_of(
                "web-static",
                params.clone(),
                mode.conditions(CookieScope::Thread),
                "1c1t",
                (1, 1),
                &[1.0, 1.0],
            );
            c.result.samples = [per_s, per_s + 2.0]
                .iter()
                .map(|r| smtlab_model::SampleRecord {
                    value: 1.0,
                    iterations: 1,
                    elapsed_ns: 1,
                    work: 1.0,
                    cpu_ns: None,
                    start_spread_ns: None,
                    cpus: vec![0],
                    metrics: [(REQUESTS_PER_S.to_string(), *r)].into(),
                })
                .collect();
            c
        };
        let cells = [
            served(SecurityMode::SmtOn, 4000.0),
            served(SecurityMode::SmtOff, 999.0),
        ];
        assert_eq!(light_rate(&cells, &subject), Some(250.0));
        assert_eq!(light_rate(&cells[..1], &subject), None);
    }

    #[test]
    fn a_server_keeps_cpus_for_its_clients() {
        let sixteen = smtlab_fixtures::build::intel(1, 16, 2);
        assert_eq!(
            specs(&sixteen, true),
            ("half-cores-2t".to_string(), "half-cores-1t".to_string())
        );
        let two = smtlab_fixtures::build::intel(1, 2, 2);
        assert_eq!(specs(&two, true), ("1c2t".to_string(), "1c1t".to_string()));
    }
}
