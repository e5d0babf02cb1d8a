//! `--events LIST`: events named the way `perf stat -e` takes them, resolved against
//! the machine's PMUs ([`PmuTree`]) and the built-in table ([`crate::model_events`]).
//!
//! An item of the comma-separated list is one of:
//!
//! * a perf generic event (`cycles`, `L1-dcache-load-misses`): counted as usual;
//! * a sysfs alias of a PMU (`topdown-fe-bound`, `cas_count_read`), taken from the
//!   core PMU first, else from every PMU that has it (`cas_count_read` is summed over
//!   `uncore_imc_0..N`), with the alias's `.scale` and `.unit`;
//! * `PMU/terms/` with raw terms encoded through `PMU/format/`
//!   (`cpu/event=0x3c,umask=0x1,cmask=1/`, `uncore_imc/cas_count_read/`: a PMU name
//!   without its `_N` suffix means every instance, summed);
//! * a built-in model-specific event (`l2-misses`, `machine-clears`, or the vendor's
//!   name such as `l2_rqsts.miss`), picked for this CPU's family and model;
//! * a keyword: `topdown` (level-1 events for this CPU, one group), `dram` (memory
//!   controller CAS counts), `model` (the papers' built-in events for this CPU), `mix`
//!   (the instruction mix: loads, stores, branches by kind), `smt` (the
//!   clocks of the share of time both SMT threads ran), `kernel` (kernel work by cause,
//!   [`crate::kernel_causes`]);
//! * a tracepoint `system:name` (`lock:contention_end`), counted on the tasks;
//! * a group `{a,b,c}`, opened together so the kernel schedules its events at once.
//!
//! Modifiers after `:` (or after the closing `/`): `u` (user only), `k` (kernel only).
//!
//! Syntax errors are errors (one line naming the item). An event this machine lacks
//! is not: it becomes a [`NamedUnavailable`] with its one-line reason, and the rest
//! is counted. The grammar is small (perf's own parser is a yacc grammar inside the
//! perf tool, not a library), so it is parsed here in a few lines.

use smtlab_model::counters::named::{EventEncoding, NamedUnavailable};
use smtlab_model::counters::topdown::{
    AMD_MEMORY_BOUND, INTEL_MEMORY_BOUND, INTEL_PERF_METRICS, INTEL_SLOT_FORMULA,
    TOPDOWN_CORRECTIONS,
};
use smtlab_model::counters::{CountMode, CounterEvent};

use crate::kernel_causes::Unavailable;
use crate::model_events::{self, MIX_EVENTS, PAPER_EVENTS, Uarch};
pub use crate::perf::ResolvedEvent;
use crate::pmu::{Pmu, PmuTree};

/// What `--events smt` counts: the time this thread ran alone and the core's reference
/// clocks, whose ratio is the share of time both SMT threads ran (Intel).
const SMT_EVENTS: [&str; 2] = ["one-thread-active", "core-ref-clocks"];

/// The pseudo-PMU name a `system:name` tracepoint spec is parsed under.
const TRACEPOINT: &str = "tracepoint";

/// A malformed `--events` list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--events: {0}")]
pub struct EventListError(pub String);

/// What a list resolved to on one machine.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Resolved {
    pub events: Vec<ResolvedEvent>,
    /// Generic events named in the list (counted by the default set anyway).
    pub generic: Vec<CounterEvent>,
    /// What this machine lacks, one line each.
    pub unavailable: Vec<NamedUnavailable>,
}

/// One parsed item before resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    text: String,
    pmu: Option<String>,
    body: String,
    mode: CountMode,
}

/// Splits at commas outside `/.../` and `{...}`.
fn split_top(list: &str) -> Result<Vec<String>, EventListError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut slash, mut brace) = (false, 0u32);
    for ch in list.chars() {
        match ch {
            '/' => slash = !slash,
            '{' if !slash => brace += 1,
            '}' if !slash => {
                brace = brace
                    .checked_sub(1)
                    .ok_or_else(|| EventListError(format!("unbalanced `}}` in `{list}`")))?;
            }
            ',' if !slash && brace == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if slash {
        return Err(EventListError(format!(
            "unterminated `PMU/terms/` in `{list}` (expected a closing `/`)"
        )));
    }
    if brace != 0 {
        return Err(EventListError(format!("unbalanced `{{` in `{list}`")));
    }
    out.push(cur);
    Ok(out
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect())
}

fn modifiers(text: &str, mods: &str) -> Result<CountMode, EventListError> {
    if let Some(c) = mods.chars().find(|c| !"uk".contains(*c)) {
        return Err(EventListError(format!(
            "`{text}`: modifier `{c}` not supported (expected u or k)"
        )));
    }
    Ok(mode_of(mods))
}

/// The privilege mode perf's modifier letters ask for: `u` alone user, `k` alone
/// kernel, else both.
pub(crate) fn mode_of(mods: &str) -> CountMode {
    match (mods.contains('u'), mods.contains('k')) {
        (true, false) => CountMode::User,
        (false, true) => CountMode::Kernel,
        _ => CountMode::All,
    }
}

fn parse_spec(text: &str, group_mode: Option<CountMode>) -> Result<Spec, EventListError> {
    let (pmu, body, mods) = if let Some((pmu, rest)) = text.split_once('/') {
        let (body, after) = rest.rsplit_once('/').ok_or_else(|| {
            EventListError(format!("`{text}`: expected PMU/terms/ with a closing `/`"))
        })?;
        let mods = after.strip_prefix(':').unwrap_or(after);
        if pmu.is_empty() || body.trim().is_empty() {
            return Err(EventListError(format!(
                "`{text}`: expected PMU/terms/ with a PMU name and terms"
            )));
        }
        (Some(pmu.to_string()), body.to_string(), mods)
    } else if crate::kernel_causes::is_tracepoint(text) {
        (Some(TRACEPOINT.to_string()), text.to_string(), "")
    } else {
        match text.split_once(':') {
            Some((name, mods)) => (None, name.to_string(), mods),
            None => (None, text.to_string(), ""),
        }
    };
    let mode = match (modifiers(text, mods)?, group_mode) {
        (CountMode::All, Some(g)) => g,
        (m, _) => m,
    };
    if pmu.is_none()
        && !body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(EventListError(format!(
            "`{text}`: expected an event name, PMU/terms/ or {{group}}"
        )));
    }
    Ok(Spec {
        text: text.to_string(),
        pmu,
        body,
        mode,
    })
}

/// Parses the list into groups of specs (one group per item; `{...}` is one group).
fn parse(list: &str) -> Result<Vec<Vec<Spec>>, EventListError> {
    let items = split_top(list)?;
    if items.is_empty() {
        return Err(EventListError(
            "empty list (expected events such as l2-misses,topdown,cpu/event=0x3c/)".into(),
        ));
    }
    let mut out = Vec::new();
    for item in items {
        if let Some(rest) = item.strip_prefix('{') {
            let (inner, after) = rest
                .rsplit_once('}')
                .ok_or_else(|| EventListError(format!("`{item}`: expected a group `{{a,b}}`")))?;
            let mode = modifiers(&item, after.strip_prefix(':').unwrap_or(after))?;
            let specs = split_top(inner)?
                .iter()
                .map(|s| parse_spec(s, Some(mode)))
                .collect::<Result<Vec<_>, _>>()?;
            if specs.is_empty() {
                return Err(EventListError(format!("`{item}`: empty group")));
            }
            out.push(specs);
        } else {
            out.push(vec![parse_spec(&item, None)?]);
        }
    }
    Ok(out)
}

/// Resolves `list` on the machine `tree` describes.
pub fn resolve(list: &str, tree: &PmuTree) -> Result<Resolved, EventListError> {
    let mut r = Resolved::default();
    for (g, specs) in parse(list)?.into_iter().enumerate() {
        let group = g as u32;
        for spec in specs {
            resolve_spec(&spec, tree, group, &mut r)?;
        }
    }
    Ok(r)
}

/// A group number of its own for the `i`th event an item expands to, apart from
/// every item's own number (items are numbered from 0 in list order).
fn solo_group(item: u32, i: usize) -> u32 {
    (1 << 20) + item * 256 + u32::try_from(i).unwrap_or(255).min(255)
}

fn lack(r: &mut Resolved, name: &str, reason: String) {
    if !r.unavailable.iter().any(|u| u.name == name) {
        r.unavailable.push(NamedUnavailable {
            name: name.to_string(),
            reason,
        });
    }
}

/// `e` counted, or lacked under `name` with its reason.
fn add(r: &mut Resolved, name: &str, e: Result<ResolvedEvent, impl ToString>) {
    match e {
        Ok(e) => push(r, e),
        Err(why) => lack(r, name, why.to_string()),
    }
}

fn push(r: &mut Resolved, e: ResolvedEvent) {
    if !r
        .events
        .iter()
        .any(|x| x.name == e.name && x.mode == e.mode)
    {
        r.events.push(e);
    }
}

fn no_core_pmu() -> String {
    smtlab_model::counters::named::NO_CORE_PMU.into()
}

fn resolve_spec(
    spec: &Spec,
    tree: &PmuTree,
    group: u32,
    r: &mut Resolved,
) -> Result<(), EventListError> {
    if spec.pmu.as_deref() == Some(TRACEPOINT) {
        let e = crate::kernel_causes::tracepoint(&spec.text, &spec.body, None, group);
        add(r, &spec.text, e);
        return Ok(());
    }
    if let Some(pmu) = &spec.pmu {
        add(r, &spec.text, raw_event(spec, pmu, tree, group)?);
        return Ok(());
    }
    let name = spec.body.as_str();
    match name.to_ascii_lowercase().as_str() {
        "topdown" => return resolve_topdown(spec, tree, group, r),
        "dram" => return resolve_dram(spec, tree, group, r),
        "smt" => {
            // One group: the share is a ratio of the two over the same time.
            for n in SMT_EVENTS {
                resolve_spec(&named_spec(n, spec), tree, group, r)?;
            }
            return Ok(());
        }
        "kernel" => {
            // Each alone: a software counter cannot lead a group of tracepoints.
            for (name, resolved) in crate::kernel_causes::all(|i| solo_group(group, i)) {
                add(r, name, resolved);
            }
            return Ok(());
        }
        "model" | "mix" => {
            // Each alone: six events in one group would need six free counters at once,
            // and a group that never fits is never counted.
            let names: &[&str] = if name.eq_ignore_ascii_case("mix") {
                &MIX_EVENTS
            } else {
                &PAPER_EVENTS
            };
            for (i, n) in names.iter().enumerate() {
                resolve_spec(&named_spec(n, spec), tree, solo_group(group, i), r)?;
            }
            return Ok(());
        }
        _ => {}
    }
    if let Ok(e) = name.parse::<CounterEvent>() {
        if !r.generic.contains(&e) {
            r.generic.push(e);
        }
        return Ok(());
    }
    // A kernel alias: the core PMU first, else every PMU that has it.
    let has = |p: &&Pmu| p.alias(name).is_some();
    let with: Vec<&Pmu> = match tree.core_pmus().into_iter().find(has) {
        Some(p) => vec![p],
        None => tree.pmus.iter().filter(has).collect(),
    };
    if !with.is_empty() {
        push(r, alias_event(spec, name, &with, group)?);
        return Ok(());
    }
    if model_events::known(name) {
        add(r, &spec.text, model_event(spec, name, tree, group)?);
        return Ok(());
    }
    lack(
        r,
        &spec.text,
        "unknown event: not a perf generic event, not a sysfs alias of this machine's PMUs, \
         not in the built-in table"
            .into(),
    );
    Ok(())
}

/// An alias on one or more PMUs (instances of one uncore PMU are summed).
fn alias_event(
    spec: &Spec,
    name: &str,
    pmus: &[&Pmu],
    group: u32,
) -> Result<ResolvedEvent, EventListError> {
    let first = pmus[0];
    let alias = first.alias(name).expect("caller checked the alias");
    let encodings = pmus
        .iter()
        .map(|p| {
            let a = p.alias(name).expect("caller checked the alias");
            p.encode(&a.terms)
                .map_err(|e| EventListError(format!("`{}`: {e}", spec.text)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ResolvedEvent {
        name: alias.name.clone(),
        source: if pmus.len() > 1 {
            format!("sysfs alias on {} PMUs ({}...)", pmus.len(), first.name)
        } else {
            format!("sysfs alias of {}", first.name)
        },
        encodings,
        mode: spec.mode,
        scale: alias.scale,
        unit: alias.unit.clone(),
        cpus: first.cpumask.clone(),
        group,
        filter: None,
    })
}

/// `terms` encoded on each of `pmus`; an error starts with `what` (the item).
fn encode_all(
    pmus: &[&Pmu],
    terms: &str,
    what: &str,
) -> Result<Vec<EventEncoding>, EventListError> {
    pmus.iter()
        .map(|p| {
            p.encode(terms)
                .map_err(|e| EventListError(format!("{what}: {e}")))
        })
        .collect()
}

/// `PMU/terms/` encoded on the PMU's instances, or why this machine has no such event.
fn raw_event(
    spec: &Spec,
    pmu: &str,
    tree: &PmuTree,
    group: u32,
) -> Result<Result<ResolvedEvent, Unavailable>, EventListError> {
    let instances = tree.instances(pmu);
    if instances.is_empty() {
        return Ok(Err(Unavailable(format!("no PMU `{pmu}` on this machine"))));
    }
    let body = spec.body.trim();
    // A bare name inside the slashes is an alias of that PMU (perf's `cpu/cycles/`).
    let bare = !body.contains('=') && !body.contains(',');
    if bare
        && instances[0].format(body).is_none()
        && instances.iter().all(|p| p.alias(body).is_none())
    {
        let why = format!("PMU `{pmu}` has no event `{body}` here");
        return Ok(Err(Unavailable(why)));
    }
    let encodings = encode_all(&instances, body, &format!("`{}`", spec.text))?;
    let alias = bare.then(|| instances[0].alias(body)).flatten();
    Ok(Ok(ResolvedEvent {
        name: spec.text.clone(),
        source: if alias.is_some() {
            format!("sysfs alias of {pmu}")
        } else {
            format!("raw terms on {pmu}")
        },
        encodings,
        mode: spec.mode,
        scale: alias.and_then(|a| a.scale),
        unit: alias.and_then(|a| a.unit.clone()),
        cpus: instances[0].cpumask.clone(),
        group,
        filter: None,
    }))
}

/// The built-in table's row for `name` on this CPU, or why there is none.
fn model_event(
    spec: &Spec,
    name: &str,
    tree: &PmuTree,
    group: u32,
) -> Result<Result<ResolvedEvent, Unavailable>, EventListError> {
    if let Some(why) = model_events::nowhere(name) {
        return Ok(Err(Unavailable(why.to_string())));
    }
    let Some(cpu) = tree.cpu else {
        let why = "this CPU's vendor, family and model are unknown";
        return Ok(Err(Unavailable(why.into())));
    };
    let Some(uarch) = Uarch::of(cpu) else {
        let why = format!("the built-in table has no events for this CPU ({cpu})");
        return Ok(Err(Unavailable(why)));
    };
    let Some(row) = model_events::lookup(name, uarch) else {
        let on: Vec<&str> = model_events::uarchs_with(name)
            .into_iter()
            .map(Uarch::label)
            .collect();
        return Ok(Err(Unavailable(format!(
            "not offered on {} ({cpu}); the built-in table has it for {}",
            uarch.label(),
            on.join(", ")
        ))));
    };
    let core = tree.core_pmus();
    let Some(pmu) = core.first() else {
        return Ok(Err(Unavailable(no_core_pmu())));
    };
    let enc = pmu
        .encode(row.terms)
        .map_err(|e| EventListError(format!("`{}` ({}): {e}", spec.text, row.vendor_name)))?;
    let source = format!("built-in table ({}: {})", uarch.label(), row.vendor_name);
    let mut e = ResolvedEvent::new(row.name, source, vec![enc], spec.mode, group);
    e.scale = row.scale;
    Ok(Ok(e))
}

fn resolve_topdown(
    spec: &Spec,
    tree: &PmuTree,
    group: u32,
    r: &mut Resolved,
) -> Result<(), EventListError> {
    let core = tree.core_pmus();
    let Some(pmu) = core.first() else {
        lack(r, "topdown", no_core_pmu());
        return Ok(());
    };
    let names: Vec<&str> = if pmu.alias(INTEL_PERF_METRICS[1]).is_some() {
        INTEL_PERF_METRICS.to_vec()
    } else if pmu.alias(INTEL_SLOT_FORMULA[0]).is_some() {
        INTEL_SLOT_FORMULA.to_vec()
    } else if tree
        .cpu
        .and_then(Uarch::of)
        .is_some_and(|u| model_events::lookup("total_dispatch_slots", u).is_some())
    {
        smtlab_model::counters::topdown::AMD_DISPATCH_SLOTS.to_vec()
    } else {
        let cpu = tree.cpu.map_or("this CPU".to_string(), |c| c.to_string());
        lack(
            r,
            "topdown",
            format!(
                "no top-down events for {cpu}: the kernel offers no topdown-* aliases and \
                 the built-in table has no dispatch-slot events for it (AMD: Zen 4 and later)"
            ),
        );
        return Ok(());
    };
    let perf_metrics = names[0] == INTEL_PERF_METRICS[0];
    // Level 2 where the PMU has its perf metrics (Sapphire Rapids and later): in the
    // slots group, as the kernel requires.
    let level2: Vec<&str> = TOPDOWN_LEVEL2_METRICS
        .into_iter()
        .filter(|n| perf_metrics && pmu.alias(n).is_some())
        .collect();
    for n in names.iter().chain(&level2) {
        resolve_spec(&named_spec(n, spec), tree, group, r)?;
    }
    // The perf-metric corrections, and the events of memory bound where the PMU has no
    // metric for it, each alone: the slots group holds only topdown events.
    let uarch = tree.cpu.and_then(Uarch::of);
    let mut alone: Vec<&str> = Vec::new();
    if perf_metrics {
        alone.extend(TOPDOWN_CORRECTIONS);
    }
    if !level2.contains(&"topdown-mem-bound") {
        alone.extend(INTEL_MEMORY_BOUND);
        alone.extend(AMD_MEMORY_BOUND);
    }
    let offered = alone
        .into_iter()
        .filter(|n| uarch.is_some_and(|u| model_events::lookup(n, u).is_some()));
    for (i, n) in offered.enumerate() {
        resolve_spec(&named_spec(n, spec), tree, solo_group(group, i), r)?;
    }
    Ok(())
}

/// Level-2 perf metrics counted with level 1 where the PMU offers them: back-end memory
/// bound, and branch mispredicts' share of bad speculation (the CPI stack's split).
const TOPDOWN_LEVEL2_METRICS: [&str; 2] = ["topdown-mem-bound", "topdown-br-mispredict"];

fn named_spec(name: &str, like: &Spec) -> Spec {
    Spec {
        text: name.into(),
        pmu: None,
        body: name.into(),
        mode: like.mode,
    }
}

/// The memory controllers' CAS counts: Intel's (every `uncore_imc*` PMU's
/// `cas_count_read` and `cas_count_write`, each summed over the controllers), else AMD's
/// UMCs' ([`resolve_umc`]).
fn resolve_dram(
    spec: &Spec,
    tree: &PmuTree,
    group: u32,
    r: &mut Resolved,
) -> Result<(), EventListError> {
    let imcs: Vec<&Pmu> = tree
        .pmus
        .iter()
        .filter(|p| p.name.starts_with("uncore_imc"))
        .collect();
    let mut found = false;
    for name in ["cas_count_read", "cas_count_write"] {
        let with: Vec<&Pmu> = imcs
            .iter()
            .copied()
            .filter(|p| p.alias(name).is_some())
            .collect();
        if with.is_empty() {
            continue;
        }
        found = true;
        // Uncore PMUs count CPU-wide; never a group with the per-task events.
        let nth = if name.ends_with("write") { 101 } else { 100 };
        let e = alias_event(spec, name, &with, solo_group(group, nth))?;
        push(r, e);
    }
    if !found {
        found = resolve_umc(spec, tree, group, r)?;
    }
    if !found {
        let why = if tree
            .pmus
            .iter()
            .any(|p| p.name.starts_with("amd_df") || p.name.starts_with("amd_umc"))
        {
            "the kernel's amd_df PMU has no byte aliases and this CPU has no amd_umc PMU \
             (Zen 4 and later); pass amd_df's raw terms (amd_df/event=...,umask=.../) with \
             a scale"
        } else {
            "no memory-controller PMU (uncore_imc*) on this machine"
        };
        lack(r, "dram", format!("DRAM bandwidth not measured: {why}"));
    }
    Ok(())
}

/// AMD Zen 4 and later: CAS commands of every `amd_umc_N` PMU, reads and writes, as the
/// kernel's `umc_cas_cmd.rd` and `.wr` (event 0x0a, read/write mask 1 and 2; 64 bytes
/// each). `false` without such PMUs.
fn resolve_umc(
    spec: &Spec,
    tree: &PmuTree,
    group: u32,
    r: &mut Resolved,
) -> Result<bool, EventListError> {
    let umcs = tree.instances("amd_umc");
    let Some(first) = umcs.first() else {
        return Ok(false);
    };
    for (nth, (name, terms)) in [
        ("umc_cas_cmd.rd", "event=0x0a,rdwrmask=1"),
        ("umc_cas_cmd.wr", "event=0x0a,rdwrmask=2"),
    ]
    .into_iter()
    .enumerate()
    {
        let encodings = encode_all(&umcs, terms, &format!("`{}` ({name})", spec.text))?;
        let source = format!(
            "{terms} on {} amd_umc PMUs (the kernel's {name})",
            umcs.len()
        );
        // Uncore PMUs count CPU-wide; never a group with the per-task events.
        let group = solo_group(group, 100 + nth);
        let mut e = ResolvedEvent::new(name, source, encodings, spec.mode, group);
        e.cpus = first.cpumask.clone();
        push(r, e);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commas_inside_slashes_and_braces_stay() {
        assert_eq!(
            split_top("cycles,cpu/event=0x3c,umask=0x1/u,{a,b}:k").unwrap(),
            vec!["cycles", "cpu/event=0x3c,umask=0x1/u", "{a,b}:k"]
        );
        assert!(
            split_top("cpu/event=0x3c")
                .unwrap_err()
                .0
                .contains("closing `/`")
        );
        assert!(split_top("{a,b").unwrap_err().0.contains("unbalanced"));
    }

    #[test]
    fn specs_and_modifiers() {
        let s = parse_spec("cpu/event=0x3c/u", None).unwrap();
        assert_eq!(
            (s.pmu.as_deref(), s.body.as_str(), s.mode),
            (Some("cpu"), "event=0x3c", CountMode::User)
        );
        let s = parse_spec("l2-misses:k", None).unwrap();
        assert_eq!((s.body.as_str(), s.mode), ("l2-misses", CountMode::Kernel));
        assert!(
            parse_spec("cycles:p", None)
                .unwrap_err()
                .0
                .contains("modifier `p`")
        );
        assert!(parse_spec("a b", None).is_err());
        let groups = parse("{slots,topdown-retiring}:u,cycles").unwrap();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0][1].mode, CountMode::User);
        assert!(parse(" , ").unwrap_err().0.contains("empty list"));
    }

    #[test]
    fn an_empty_machine_lacks_everything_in_one_line_each() {
        let tree = PmuTree::default();
        let r = resolve("cycles,l2-misses,topdown,dram,cpu/event=0x3c/,bogus", &tree).unwrap();
        assert_eq!(r.generic, vec![CounterEvent::Cycles]);
        assert!(r.events.is_empty());
        let names: Vec<&str> = r.unavailable.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(
            names,
            ["l2-misses", "topdown", "dram", "cpu/event=0x3c/", "bogus"]
        );
        for u in &r.unavailable {
            assert!(!u.reason.contains('\n') && !u.reason.is_empty());
        }
    }
}
