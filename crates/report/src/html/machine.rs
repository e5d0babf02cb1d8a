//! The machine section: the environment, the topology in numbers and in a picture, and
//! the notes a reader must know before trusting a number.

use std::collections::BTreeMap;
use std::fmt::Write;

use maud::{Markup, PreEscaped, html};
use smtlab_model::{CellRecord, Disturbance, HandoffChange, RunResults, RunStatus, Topology};

use crate::fmt::{bytes, short, utc};
use crate::html_parts::Absent;

/// The cells steal or other processes disturbed, each with its figure, those whose CPUs
/// moved in one clause, and the most steal and foreign time any cell saw; `None` when no
/// cell recorded its disturbance.
pub fn disturbed_note(r: &RunResults) -> Option<String> {
    let recorded: Vec<_> = r
        .cells
        .iter()
        .filter_map(|c| c.result.disturbance.as_ref().map(|d| (c, d)))
        .collect();
    if recorded.is_empty() {
        return None;
    }
    let most = |f: &dyn Fn(&Disturbance) -> Option<f64>| {
        recorded
            .iter()
            .filter_map(|(_, d)| f(d))
            .fold(0.0_f64, f64::max)
    };
    let (steal, foreign) = (most(&|d| d.steal_share()), most(&|d| d.foreign_share()));
    let seen = format!(
        "at most {:.1}% steal and {:.1}% other processes' time on a cell's CPUs",
        100.0 * steal,
        100.0 * foreign
    );
    let disturbed = recorded
        .iter()
        .filter(|(_, d)| d.reason().is_some())
        .count();
    if disturbed == 0 {
        return Some(format!("no cell disturbed: {seen}"));
    }
    // Steal and other processes cell by cell; the CPUs moving, often under dozens of
    // cells at once, in one clause.
    let loaded = recorded.iter().filter_map(|(c, d)| {
        let load = Disturbance {
            handoff_changed: Vec::new(),
            ..(*d).clone()
        };
        let why = load.reason()?;
        Some(format!("{} on {}: {why}", c.benchmark, c.placement.name))
    });
    let moved: Vec<&CellRecord> = recorded
        .iter()
        .filter(|(_, d)| !d.handoff_changed.is_empty())
        .map(|(c, _)| *c)
        .collect();
    let parts: Vec<String> = moved_clause(&moved).into_iter().chain(loaded).collect();
    Some(format!(
        "{disturbed} cells disturbed (steal or other processes took more than {:.0}% of their \
         CPUs' time, or their CPUs moved; called neither faster nor slower): {}; {seen}",
        100.0 * smtlab_model::disturbance::DISTURBED_SHARE,
        parts.join("; ")
    ))
}

/// `12 on two CPUs or more measured while their CPUs had moved (CPU 0-1 handoff 23-26
/// ns, 226 ns at the run's start): read, write, stat, fstat, open-close and 3 more`;
/// `None` without such cells.
fn moved_clause(cells: &[&CellRecord]) -> Option<String> {
    let changes: Vec<&HandoffChange> = cells
        .iter()
        .filter_map(|c| c.result.disturbance.as_ref())
        .flat_map(|d| &d.handoff_changed)
        .collect();
    let first = *changes.first()?;
    let pair = (first.from_cpu, first.to_cpu);
    let ns = changes
        .iter()
        .filter(|h| (h.from_cpu, h.to_cpu) == pair)
        .map(|h| h.cell_ns);
    let (lo, hi) = ns.fold((f64::INFINITY, 0.0_f64), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    let range = match (lo.round(), hi.round()) {
        (l, h) if l == h => format!("{l:.0}"),
        (l, h) => format!("{l:.0}-{h:.0}"),
    };
    let names = crate::first_seen(cells.iter().map(|c| c.benchmark.as_str()));
    let mut shown = names.iter().take(5).copied().collect::<Vec<_>>().join(", ");
    if names.len() > 5 {
        let _ = write!(shown, " and {} more", names.len() - 5);
    }
    Some(format!(
        "{} on two CPUs or more measured while their CPUs had moved (CPU {}-{} handoff {range} \
         ns, {:.0} ns at the run's start): {shown}",
        cells.len(),
        pair.0,
        pair.1,
        first.start_ns
    ))
}

/// Things a reader must know before trusting a number, in one line each.
pub fn notes(r: &RunResults) -> Vec<String> {
    let m = &r.run;
    let t = &m.topology;
    let mut out: Vec<String> = m.notes.clone();
    if !t.smt_visible() && !out.iter().any(|n| n.contains("no SMT")) {
        out.push(format!(
            "no SMT visible (smt/control: {}): 1c2t and 2c2t not measured, and all is the \
             same CPUs as cores",
            t.smt.control.as_deref().unwrap_or("absent")
        ));
    }
    if let Some(v) = m
        .environment
        .virtualization
        .as_ref()
        .or(t.virtualization.as_ref())
    {
        out.push(format!(
            "virtual machine ({v}): SMT siblings are as the guest sees them; the host may \
             schedule virtual CPUs elsewhere"
        ));
    }
    if m.config.quick {
        out.push("quick preset: few, short samples; confidence intervals are wide".into());
    }
    let count = |f: fn(&smtlab_model::CellRecord) -> bool| r.cells.iter().filter(|c| f(c)).count();
    let unconverged = count(|c| !c.result.met_target());
    if unconverged > 0 {
        out.push(format!(
            "{unconverged} of {} cells did not reach the CI target ({}% of the mean)",
            r.cells.len(),
            short(m.config.ci_target_rel * 100.0)
        ));
    }
    let unsteady = count(|c| c.result.unsteady().is_some());
    if unsteady > 0 {
        out.push(format!(
            "{unsteady} cells were unsteady: their level moved during the measurement by more \
             than their confidence interval explains, so a repetition may differ by that much"
        ));
    }
    out.extend(disturbed_note(r));
    let nonlinear = count(|c| c.result.calibration.linear == Some(false));
    if nonlinear > 0 {
        out.push(format!(
            "{nonlinear} cells failed the calibration linearity check (time(2n) vs 2 time(n))"
        ));
    }
    let pending = pending_cells(r).len();
    if pending > 0 {
        out.push(format!(
            "run {}: {pending} planned cells not measured",
            match m.status {
                RunStatus::Running => "still running",
                _ => "interrupted",
            }
        ));
    }
    if !t.offline_cpus.is_empty() {
        out.push(format!("CPUs {} are offline", t.offline_cpus));
    }
    if let Some(a) = &t.allowed_cpus
        && a != &t.cpus
    {
        out.push(format!("this process could only use CPUs {a}"));
    }
    out
}

/// Planned cells that were neither measured nor skipped.
pub(super) fn pending_cells(r: &RunResults) -> Vec<&smtlab_model::CellKey> {
    r.run
        .plan
        .iter()
        .filter(|k| {
            !r.cells.iter().any(|c| c.key() == **k) && !r.skipped.iter().any(|s| &s.key == *k)
        })
        .collect()
}

/// One key-value row; an absent or empty value says "unknown".
fn kv(key: &str, value: Option<&str>) -> Markup {
    html! {
        tr {
            th { (key) }
            td {
                @if let Some(v) = value.filter(|v| !v.is_empty()) {
                    (v)
                } @else {
                    span class="muted" { "unknown" }
                }
            }
        }
    }
}

pub(super) fn machine(r: &RunResults) -> Result<Markup, Absent> {
    let t = &r.run.topology;
    let notes = notes(r);
    Ok(html! {
        section id="machine" {
            h2 { "Machine" }
            @if !notes.is_empty() {
                ul class="notes" { @for n in &notes { li { (n) } } }
            }
            div class="charts" {
                div {
                    h3 { "Environment" }
                    (environment(&r.run))
                }
                div {
                    h3 { "Topology" }
                    (topology(t))
                    (caches(t))
                    (tlbs(t))
                }
            }
            details open="open" {
                summary {
                    "Topology picture: packages, NUMA nodes, caches, cores and their CPUs \
                     (SMT siblings shaded)"
                }
                div class="scroll" { (PreEscaped(crate::topo_svg::topology_svg(t))) }
            }
        }
    })
}

/// The machine's environment ([`crate::environment::facts`]) and the run's command,
/// end and sampling, as a key-value table.
fn environment(m: &smtlab_model::RunMeta) -> Markup {
    html! {
        table class="kv" {
            @for f in crate::environment::facts(m) {
                (kv(f.label, f.value.as_deref()))
            }
            tr {
                th { "command line" }
                td { code { (smtlab_model::run::shell_join(&m.command_line)) } }
            }
            (kv("finished", m.finished_unix_s.map(utc).as_deref()))
            (kv("sampling", Some(&sampling(&m.config))))
        }
    }
}

/// How the run sampled: counts, sample length, interval target, warm-up and limits.
fn sampling(c: &smtlab_model::RunConfig) -> String {
    format!(
        "{}-{} samples of ~{} ms, CI target {}% of the mean, warm-up {} ms, {}{}{}",
        c.min_samples,
        c.max_samples,
        short(c.target_sample_ns as f64 / 1e6),
        short(c.ci_target_rel * 100.0),
        short(c.warmup_ns as f64 / 1e6),
        // `exec` takes every run whatever it lasts: its budget is the user's --timeout.
        if c.max_cell_ns == u64::MAX {
            "no time limit per cell".to_string()
        } else {
            format!("at most {} s per cell", short(c.max_cell_ns as f64 / 1e9))
        },
        match c.long_min_samples {
            0 => String::new(),
            n => format!(" (cells with long samples, such as workloads: at least {n})"),
        },
        if c.quick { " (quick preset)" } else { "" }
    )
}

/// The first few SMT sibling sets (`{0,4} {1,5} and 2 more`); none without siblings.
fn sibling_sets(t: &Topology) -> Option<String> {
    let siblings: Vec<String> = t
        .cores()
        .filter(|c| c.cpus.len() > 1)
        .take(4)
        .map(|c| format!("{{{}}}", c.cpus))
        .collect();
    (!siblings.is_empty()).then(|| {
        let more = t.cores().filter(|c| c.cpus.len() > 1).count() - siblings.len();
        let mut s = siblings.join(" ");
        if more > 0 {
            let _ = write!(s, " and {more} more");
        }
        s
    })
}

/// The topology's CPUs (its shape is the environment's `machine`), siblings, core kinds and NUMA nodes, as a key-value table.
fn topology(t: &Topology) -> Markup {
    html! {
        table class="kv" {
            (kv("online CPUs", Some(&t.cpus.to_string())))
            @if !t.offline_cpus.is_empty() {
                (kv("offline CPUs", Some(&t.offline_cpus.to_string())))
            }
            @if let Some(a) = &t.allowed_cpus {
                (kv("allowed CPUs", Some(&a.to_string())))
            }
            @if let Some(s) = &sibling_sets(t) {
                (kv("SMT sibling sets", Some(s)))
            }
            @for k in &t.core_kinds {
                (kv(&format!("core kind {}", k.name),
                    Some(&format!("CPUs {} (from {})", k.cpus, k.source))))
            }
            @for n in &t.numa_nodes {
                (kv(&format!("NUMA node {}", n.id), Some(&format!(
                    "CPUs {}{}",
                    n.cpus,
                    n.memory_bytes.map(|b| format!(", {}", bytes(b))).unwrap_or_default()
                ))))
            }
            @if t.numa_nodes.is_empty() {
                (kv("NUMA", Some("no nodes reported")))
            }
        }
    }
}

/// The TLBs CPUID gave (paper 000 Table 1); nothing where there are none.
fn tlbs(t: &Topology) -> Markup {
    html! {
        @if !t.tlbs.is_empty() {
            table {
                tr { th { "TLB" } th { "pages" } th { "entries" } th { "ways" } }
                @for x in &t.tlbs {
                    tr {
                        td { "L" (x.level) " " (format!("{:?}", x.tlb_type).to_lowercase()) }
                        td { (x.pages) }
                        td class="num" { (x.entries) }
                        td class="num" { (x.ways.map_or("full".to_string(), |w| w.to_string())) }
                    }
                }
            }
        }
    }
}

fn caches(t: &Topology) -> Markup {
    if t.caches.is_empty() {
        return html! { p class="muted" { "no cache information in the topology" } };
    }
    // One row per (level, type, size, sharing): instances of a cache look alike.
    let mut rows: BTreeMap<(u8, String, Option<u64>, usize), usize> = BTreeMap::new();
    for c in &t.caches {
        let ty = format!("{:?}", c.cache_type).to_lowercase();
        *rows
            .entry((c.level, ty, c.size_bytes, c.cpus.len()))
            .or_default() += 1;
    }
    html! {
        table {
            tr { th { "cache" } th { "size" } th { "instances" } th { "shared by" } }
            @for ((level, ty, size, sharing), count) in rows {
                tr {
                    td { "L" (level) " " (ty) }
                    td class="num" { (size.map(bytes).unwrap_or_else(|| "unknown".into())) }
                    td class="num" { (count) }
                    td class="num" { (sharing) " CPU" @if sharing != 1 { "s" } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_sibling_sets_are_named_and_the_rest_counted() {
        let six = smtlab_fixtures::build::intel(1, 6, 2);
        let sets = sibling_sets(&six).expect("siblings");
        assert_eq!(sets.matches('{').count(), 4, "{sets}");
        assert!(sets.ends_with("} and 2 more"), "{sets}");
        let two = smtlab_fixtures::build::intel(1, 2, 2);
        assert!(!sibling_sets(&two).unwrap().contains("more"));
        let none = smtlab_fixtures::build::one_cpu_per_core(&[0, 1]);
        assert_eq!(sibling_sets(&none), None);
    }

    #[test]
    fn sampling_says_the_limits_the_run_had() {
        let h = smtlab_fixtures::fleet::FakeHost::new("h1", "Xeon", 1.2);
        let mut c = smtlab_fixtures::fleet::run(&h).run.config;
        c.max_cell_ns = u64::MAX;
        c.long_min_samples = 0;
        c.quick = true;
        let s = sampling(&c);
        assert!(s.ends_with("no time limit per cell (quick preset)"), "{s}");
        c.max_cell_ns = 30_000_000_000;
        c.long_min_samples = 5;
        c.quick = false;
        let s = sampling(&c);
        assert!(
            s.ends_with(
                "at most 30 s per cell (cells with long samples, such as workloads: at least 5)"
            ),
            "{s}"
        );
    }
}
