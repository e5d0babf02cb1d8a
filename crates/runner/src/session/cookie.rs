//! A cell's core-scheduling cookies (`coresched` cells of `advise --security`) given
//! once its workload is prepared: the workload's processes (per process, process group
//! or cgroup) and a distrusting tenant's partner threads (a cookie each); a cookie per
//! thread is the cell's thread's own, given as the cell is set up. Nothing is put back:
//! a cookie dies with its tasks, which end with the cell.

use smtlab_control::coresched::{self, CoreSchedError};
use smtlab_model::ResolvedPlacement;
use smtlab_model::keys::{CookieScope, Form};

use super::{CellPlan, Session};
use crate::machine::Machine;

/// The machine and the partner's CPU of a co-run cell of distrusting tenants (a cookie
/// on its sibling form): the partner gets a cookie of its own.
pub(super) fn tenant_cpu<'m>(
    session: &Session<'m>,
    plan: &CellPlan<'_>,
    placement: &ResolvedPlacement,
) -> Option<(&'m dyn Machine, u32)> {
    let c = &plan.key.conditions;
    if c.cookie.is_none() || c.form != Some(Form::Sibling) {
        return None;
    }
    Some((session.system?, *placement.cpus.get(1)?))
}

/// Each thread the partner started on its CPU (those pinned there since `before`) gets
/// a cookie of its own, so it never shares the core with the measured tenant; they
/// take that CPU in turn, so one cookie each costs nothing a shared one would not.
pub(super) fn partner_cookies(
    machine: &dyn Machine,
    cpu: u32,
    before: &[u32],
) -> Result<(), CoreSchedError> {
    let started: Vec<u32> = machine
        .own_threads_on(cpu)
        .into_iter()
        .filter(|t| !before.contains(t))
        .collect();
    if started.is_empty() {
        return Err(CoreSchedError::NoPartner { cpu });
    }
    started
        .into_iter()
        .try_for_each(|tid| machine.create_cookie(tid, CookieScope::Thread))
}

/// A cell keyed with a cookie per process, process group or cgroup: once the workload
/// is prepared, each process it started (per process), its first one's group (per
/// group) or each one's cgroup with every process in it (per cgroup) gets a cookie of
/// its own; a workload of smtlab's threads has none to give.
pub(super) fn process_cookies(
    session: &Session<'_>,
    plan: &CellPlan<'_>,
) -> Result<(), CoreSchedError> {
    let (Some(scope), Some(machine)) = (plan.key.conditions.cookie, session.system) else {
        return Ok(());
    };
    if scope == CookieScope::Thread {
        return Ok(());
    }
    let children = machine.own_children();
    if children.is_empty() {
        return Err(CoreSchedError::NoProcess { scope });
    }
    // A group cookie on smtlab's own group would outlive the cell in the shell that
    // started smtlab and in all it starts later; one on smtlab's cgroup would cover it
    // and all that shares the cgroup.
    if scope == CookieScope::ProcessGroup && coresched::in_own_process_group(children[0]) {
        return Err(CoreSchedError::SharedProcessGroup);
    }
    let proc = std::path::Path::new("/proc");
    if let Some(&pid) = children
        .iter()
        .find(|&&p| scope == CookieScope::Cgroup && coresched::in_own_cgroup(proc, p))
    {
        return Err(CoreSchedError::SharedCgroup { pid });
    }
    // One cookie for a group; a cgroup's is given once, to all its processes.
    let take = if scope == CookieScope::ProcessGroup {
        1
    } else {
        children.len()
    };
    for pid in children.into_iter().take(take) {
        machine.create_cookie(pid, scope)?;
    }
    Ok(())
}
