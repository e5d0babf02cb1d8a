//! `smtlab topo` output: the per-CPU table, caches, NUMA nodes, an lstopo-like box view,
//! and the one-line verdict.

use std::collections::BTreeMap;

use smtlab_model::unit::plural;
use smtlab_model::{Cache, CacheType, CpuSet, Topology};
use smtlab_report::fmt::bytes;
use smtlab_report::table::Table;

use crate::term::term_layout;

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn numa_of(topo: &Topology, cpu: u32) -> Option<u32> {
    topo.numa_nodes
        .iter()
        .find(|n| n.cpus.contains(cpu))
        .map(|n| n.id)
}

/// `L1d`, `L1i`, `L2`: the names likwid and lstopo use.
fn cache_name(c: &Cache) -> String {
    match c.cache_type {
        CacheType::Data => format!("L{}d", c.level),
        CacheType::Instruction => format!("L{}i", c.level),
        CacheType::Unified => format!("L{}", c.level),
    }
}

pub fn tables(topo: &Topology) -> String {
    let mut out = header(topo);
    out.push('\n');

    let mut t = Table::new([
        "CPU", "Package", "Die", "Cluster", "Core", "NUMA", "Siblings", "Kind",
    ]);
    let mut rows: Vec<(u32, Vec<String>)> = Vec::new();
    let packaged = topo
        .packages
        .iter()
        .flat_map(|p| p.cores.iter().map(move |c| (opt(p.id), c)));
    let loose = topo
        .cores_without_package
        .iter()
        .map(|c| ("-".to_string(), c));
    for (pkg, core) in packaged.chain(loose) {
        for cpu in &core.cpus {
            rows.push((
                cpu,
                vec![
                    cpu.to_string(),
                    pkg.clone(),
                    opt(core.die_id),
                    opt(core.cluster_id),
                    core.id.to_string(),
                    opt(numa_of(topo, cpu)),
                    core.cpus.to_list_string(),
                    opt(core.kind.as_ref()),
                ],
            ));
        }
    }
    rows.sort_by_key(|(cpu, _)| *cpu);
    for (_, r) in rows {
        t.row(r);
    }
    out.push_str(&t.render_to(term_layout()));

    if !topo.caches.is_empty() {
        out.push('\n');
        out.push_str(&caches(topo));
    }
    if !topo.tlbs.is_empty() {
        out.push('\n');
        let mut t = Table::new(["TLB", "Pages", "Entries", "Ways"]);
        for x in &topo.tlbs {
            let kind = format!("{:?}", x.tlb_type).to_lowercase();
            let ways = x.ways.map_or("full".to_string(), |w| w.to_string());
            t.row([
                format!("L{} {kind}", x.level),
                x.pages.clone(),
                x.entries.to_string(),
                ways,
            ]);
        }
        out.push_str(&t.render_to(term_layout()));
    }
    if !topo.numa_nodes.is_empty() {
        out.push('\n');
        let mut t = Table::new(["NUMA node", "CPUs", "Memory"]);
        for n in &topo.numa_nodes {
            let cpus = if n.cpus.is_empty() {
                "(none)".to_string()
            } else {
                n.cpus.to_list_string()
            };
            t.row([n.id.to_string(), cpus, opt(n.memory_bytes.map(bytes))]);
        }
        out.push_str(&t.render_to(term_layout()));
    }
    if !topo.core_kinds.is_empty() {
        out.push('\n');
        let mut t = Table::new(["Core kind", "CPUs", "Known from"]);
        for k in &topo.core_kinds {
            t.row([k.name.clone(), k.cpus.to_list_string(), k.source.clone()]);
        }
        out.push_str(&t.render_to(term_layout()));
    }
    out.push('\n');
    out
}

fn header(topo: &Topology) -> String {
    let mut t = Table::new(["", ""]);
    let mut machine = topo
        .cpu_model
        .clone()
        .unwrap_or_else(|| "unknown CPU model".into());
    if let Some(v) = &topo.vendor {
        machine.push_str(&format!(" ({v})"));
    }
    if let Some(h) = &topo.virtualization {
        machine.push_str(&format!(", {h} guest"));
    }
    t.row(["Machine", &machine]);
    t.row(["Read from", &topo.root]);
    let mut cpus = format!("{} online", topo.cpus.to_list_string());
    if topo.offline_cpus.is_empty() {
        cpus.push_str(", none offline");
    } else {
        cpus.push_str(&format!(", {} offline", topo.offline_cpus.to_list_string()));
    }
    t.row(["CPUs", &cpus]);
    if let Some(a) = &topo.allowed_cpus {
        t.row(["Allowed", &format!("{a} (this process's cpuset/affinity)")]);
    }
    t.row(["SMT", &smt_phrase(topo)]);
    // The empty header row of a key/value table is dropped.
    t.render_to(term_layout())
        .lines()
        .skip(1)
        .map(|l| format!("{l}\n"))
        .collect()
}

fn smt_phrase(topo: &Topology) -> String {
    let s = &topo.smt;
    let threads = if s.threads_per_core_min == s.threads_per_core_max {
        format!(
            "{} per core",
            plural(s.threads_per_core_max as usize, "thread")
        )
    } else {
        format!(
            "{}-{} threads per core",
            s.threads_per_core_min, s.threads_per_core_max
        )
    };
    match &s.control {
        Some(c) => format!("{threads}; control: {c}"),
        None => format!("{threads}; control: not exposed by this kernel"),
    }
}

/// One row per cache kind (level, type, size): how many instances and which CPUs share each.
fn caches(topo: &Topology) -> String {
    let mut groups: BTreeMap<(u8, CacheType, Option<u64>), Vec<&Cache>> = BTreeMap::new();
    for c in &topo.caches {
        // `CacheType`'s order: data, instruction, unified.
        groups
            .entry((c.level, c.cache_type, c.size_bytes))
            .or_default()
            .push(c);
    }
    let mut t = Table::new(["Cache", "Size", "Count", "CPUs per instance", "Instances"]);
    for list in groups.values() {
        let first = list[0];
        let widths: Vec<usize> = list.iter().map(|c| c.cpus.len()).collect();
        let per = if widths.iter().all(|w| *w == widths[0]) {
            widths[0].to_string()
        } else {
            format!(
                "{}-{}",
                widths.iter().min().unwrap_or(&0),
                widths.iter().max().unwrap_or(&0)
            )
        };
        const SHOWN: usize = 6;
        let mut inst: Vec<String> = list
            .iter()
            .take(SHOWN)
            .map(|c| format!("({})", c.cpus.to_list_string()))
            .collect();
        if list.len() > SHOWN {
            inst.push(format!("... +{} more", list.len() - SHOWN));
        }
        t.row([
            cache_name(first),
            opt(first.size_bytes.map(bytes)),
            list.len().to_string(),
            per,
            inst.join(" "),
        ]);
    }
    t.render_to(term_layout())
}

/// lstopo-like nesting drawn in ASCII: a box per package, cores as `[cpu,cpu]` inside.
pub fn boxes(topo: &Topology) -> String {
    const WIDTH: usize = 72;
    let mut out = String::new();
    let draw = |title: String, cores: Vec<String>, out: &mut String| {
        let inner = WIDTH - 4;
        let title = format!("- {title} ");
        out.push('+');
        out.push_str(&title);
        out.push_str(&"-".repeat(WIDTH.saturating_sub(2 + title.chars().count())));
        out.push_str("+\n");
        let mut line = String::new();
        for c in cores {
            if !line.is_empty() && line.len() + 1 + c.len() > inner {
                out.push_str(&format!("| {line:<inner$} |\n"));
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(&c);
        }
        if !line.is_empty() {
            out.push_str(&format!("| {line:<inner$} |\n"));
        }
        out.push('+');
        out.push_str(&"-".repeat(WIDTH - 2));
        out.push_str("+\n");
    };
    let core_token = |cpus: &CpuSet| format!("[{}]", super::cpus_in_order(cpus.iter()));
    for p in &topo.packages {
        let mut title = format!("Package {}", opt(p.id));
        let l3: Vec<String> = topo
            .caches
            .iter()
            .filter(|c| c.level >= 3 && c.cpus.is_subset(&p.cpus))
            .filter_map(|c| c.size_bytes.map(|s| format!("L{} {}", c.level, bytes(s))))
            .collect();
        if let Some(first) = l3.first() {
            if l3.len() == 1 {
                title.push_str(&format!(" - {first}"));
            } else {
                title.push_str(&format!(" - {} x {first}", l3.len()));
            }
        }
        title.push_str(&format!(" - {}", plural(p.cores.len(), "core")));
        draw(
            title,
            p.cores.iter().map(|c| core_token(&c.cpus)).collect(),
            &mut out,
        );
    }
    if !topo.cores_without_package.is_empty() {
        draw(
            "no package".into(),
            topo.cores_without_package
                .iter()
                .map(|c| core_token(&c.cpus))
                .collect(),
            &mut out,
        );
    }
    out
}

/// `smtlab topo --svg FILE`: the report's topology picture as a stand-alone SVG file.
pub fn svg(topo: &Topology) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}\n",
        smtlab_report::topo_svg::topology_svg(topo)
    )
}

/// The closing one-liner, e.g. `2 packages x 8 cores x 2 threads = 32 CPUs; SMT on
/// (control: on)` or `2 cores x 1 thread = 2 CPUs; no SMT visible (KVM guest)`.
pub fn verdict(topo: &Topology) -> String {
    let npk = topo.packages.len();
    let ncores = topo.core_count();
    let ncpus = topo.cpus.len();
    let tmin = topo.smt.threads_per_core_min as usize;
    let tmax = topo.smt.threads_per_core_max as usize;
    let cores_per_pkg: Vec<usize> = topo.packages.iter().map(|p| p.cores.len()).collect();
    let uniform_pkgs = cores_per_pkg.windows(2).all(|w| w[0] == w[1]);

    let mut shape = String::new();
    if npk > 1 && uniform_pkgs && topo.cores_without_package.is_empty() {
        shape.push_str(&format!(
            "{} x {}",
            plural(npk, "package"),
            plural(cores_per_pkg[0], "core")
        ));
    } else if npk > 1 {
        shape.push_str(&format!(
            "{}, {}",
            plural(npk, "package"),
            plural(ncores, "core")
        ));
    } else {
        shape.push_str(&plural(ncores, "core"));
    }
    if tmin == tmax {
        shape.push_str(&format!(" x {}", plural(tmax, "thread")));
    } else {
        // Hybrid machines: say how many cores have how many threads.
        let mut by_threads: BTreeMap<usize, usize> = BTreeMap::new();
        for c in topo.cores() {
            *by_threads.entry(c.cpus.len()).or_default() += 1;
        }
        let parts: Vec<String> = by_threads
            .iter()
            .rev()
            .map(|(t, n)| format!("{n} x {}", plural(*t, "thread")))
            .collect();
        shape.push_str(&format!(" ({})", parts.join(" + ")));
    }
    shape.push_str(&format!(" = {}", plural(ncpus, "CPU")));
    if !topo.offline_cpus.is_empty() {
        shape.push_str(&format!(" ({} offline)", topo.offline_cpus.len()));
    }

    let mut notes: Vec<String> = Vec::new();
    if let Some(h) = &topo.virtualization {
        notes.push(format!("{h} guest"));
    }
    if let Some(c) = &topo.smt.control {
        notes.push(format!("control: {c}"));
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join("; "))
    };
    let smt = if tmax > 1 {
        if tmin < tmax {
            "SMT on some cores"
        } else {
            "SMT on"
        }
    } else if matches!(topo.smt.control.as_deref(), Some("off" | "forceoff")) {
        "SMT off"
    } else {
        "no SMT visible"
    };
    format!("{shape}; {smt}{notes}")
}

/// `topo --probe-siblings`: one line per pair with its slowdown and what the topology
/// says, then the pairs that contradict it (or that none does); or the same as JSON.
pub fn sibling_probe(
    topo: &Topology,
    figures: &[smtlab_runner::experiment::siblings::PairFigure],
    json: bool,
) -> String {
    use smtlab_runner::experiment::siblings::{SIBLING_SLOWDOWN, findings};
    let first = topo.cpus.iter().next().unwrap_or(0);
    let found = findings(figures);
    if json {
        let pairs: Vec<serde_json::Value> = figures
            .iter()
            .map(|f| {
                serde_json::json!({
                    "cpus": [first, f.cpu],
                    "slowdown": f.slowdown,
                    "same_core_in_topology": f.same_core_in_topology,
                    "behaves_as_siblings": f.behaves_as_siblings(),
                })
            })
            .collect();
        let v = serde_json::json!({
            "sibling_slowdown": SIBLING_SLOWDOWN,
            "pairs": pairs,
            "hidden_siblings": found.iter().filter(|f| f.hidden_sibling).map(|f| f.figure.cpu).collect::<Vec<_>>(),
            "siblings_not_sharing": found.iter().filter(|f| !f.hidden_sibling).map(|f| f.figure.cpu).collect::<Vec<_>>(),
        });
        return format!("{v:#}\n");
    }
    let mut out = format!(
        "pair probing: CPU {first} with each other CPU; slowdown = CPU {first}'s kernel time paired / alone (siblings from {SIBLING_SLOWDOWN:.2}x)\n"
    );
    for f in figures {
        out.push_str(&format!(
            "  CPU {first} + CPU {:<4} {:.2}x  {}, topology: {}\n",
            f.cpu,
            f.slowdown,
            if f.behaves_as_siblings() {
                "behaves as siblings"
            } else {
                "behaves as separate cores"
            },
            if f.same_core_in_topology {
                "same core"
            } else {
                "separate cores"
            }
        ));
    }
    if found.is_empty() {
        out.push_str("every pair behaves as the topology says\n");
    }
    for f in &found {
        out.push_str(&if f.hidden_sibling {
            format!(
                "hidden siblings: CPUs {first} and {} behave as sharing a core ({:.2}x) where the topology says separate cores\n",
                f.figure.cpu, f.figure.slowdown
            )
        } else {
            format!(
                "CPUs {first} and {} are siblings in the topology but behave as separate cores ({:.2}x)\n",
                f.figure.cpu, f.figure.slowdown
            )
        });
    }
    out
}
