//! The machine as nested boxes, in the manner of hwloc's `lstopo`: packages holding
//! NUMA nodes, shared caches, cores, the caches private to a core, and each core's
//! CPUs (SMT siblings side by side in one core box). One `<svg>` element that is also
//! a valid stand-alone SVG file (`smtlab topo --svg FILE`) and sits inline in the
//! report.
//!
//! Drawing rules:
//! * Cores of a package are laid out in rows of at most [`MAX_ROW_PX`] pixels; a
//!   package with more cores wraps, its cores shared evenly between the rows.
//! * A cache or NUMA node shared by more than one core is a bar above the cores it
//!   covers, one bar per row it reaches (dashed and labelled "continued" after the
//!   first), highest level on top; a cache within one core is a bar inside the core
//!   box. Bars are labelled with their level and size.
//! * Offline CPUs and cores outside any package are said in words below the boxes.

use maud::{Markup, html};
use smtlab_model::{Cache, CacheType, Core, CpuSet, Topology};

use crate::fmt::Esc;
use crate::units::size;

/// The widest row of cores, in pixels, before a package wraps.
pub const MAX_ROW_PX: f64 = 1040.0;

const PU_W: f64 = 52.0;
const PU_H: f64 = 22.0;
const GAP: f64 = 6.0;
const PAD: f64 = 6.0;
const BAR_H: f64 = 18.0;
const HEAD: f64 = 18.0;

const C_MACHINE: &str = "#f4f4f4";
const C_PACKAGE: &str = "#dde3ea";
const C_NUMA: &str = "#cfe8cf";
const C_CACHE: &str = "#ffffff";
const C_CORE: &str = "#bcc7d4";
const C_PU: &str = "#ffffff";
const C_PU_SMT: &str = "#fbe3c8";

/// A cache or NUMA node drawn as a bar: label and the CPUs it covers.
struct Bar {
    label: String,
    cpus: CpuSet,
    fill: &'static str,
}

/// `L1d 32 KiB`, `L2 1 MiB`: a cache's level, type and size.
pub(crate) fn cache_label(c: &Cache) -> String {
    let ty = match c.cache_type {
        CacheType::Data => "d",
        CacheType::Instruction => "i",
        CacheType::Unified => "",
    };
    match c.size_bytes {
        Some(b) => format!("L{}{ty} {}", c.level, size(b as f64)),
        None => format!("L{}{ty}", c.level),
    }
}

fn core_width(c: &Core) -> f64 {
    let n = c.cpus.len().max(1) as f64;
    // Wide enough for a cache label (`L1d 32 KiB`) even with one CPU.
    (n * PU_W + (n - 1.0) * 4.0 + 2.0 * PAD).max(84.0)
}

/// Caches that lie within one core, largest level first (L2, L1d, L1i).
fn private_caches<'a>(t: &'a Topology, core: &Core) -> Vec<&'a Cache> {
    let mut v: Vec<&Cache> = t
        .caches
        .iter()
        .filter(|c| !c.cpus.is_empty() && c.cpus.is_subset(&core.cpus))
        .collect();
    v.sort_by_key(|c| (std::cmp::Reverse(c.level), c.cache_type as u8));
    v
}

/// Bars spanning more than one core of `cores`, grouped in levels (NUMA first, then
/// caches from the highest level down); each inner vector is one horizontal band.
fn shared_bands(t: &Topology, cores: &[&Core]) -> Vec<Vec<Bar>> {
    let all: CpuSet = cores
        .iter()
        .fold(CpuSet::new(), |acc, c| acc.union(&c.cpus));
    let mut bands: Vec<Vec<Bar>> = Vec::new();
    if t.numa_nodes.len() > 1 || t.numa_nodes.iter().any(|n| n.memory_bytes.is_some()) {
        let band: Vec<Bar> = t
            .numa_nodes
            .iter()
            .filter(|n| !n.cpus.intersection(&all).is_empty())
            .map(|n| Bar {
                label: match n.memory_bytes {
                    Some(b) => format!("NUMA node {} ({})", n.id, size(b as f64)),
                    None => format!("NUMA node {}", n.id),
                },
                cpus: n.cpus.clone(),
                fill: C_NUMA,
            })
            .collect();
        if !band.is_empty() {
            bands.push(band);
        }
    }
    // Caches over more than one of these cores, a band per level and type, highest first.
    let shared = t.caches.iter().filter(|c| {
        !cores.iter().any(|k| c.cpus.is_subset(&k.cpus)) && !c.cpus.intersection(&all).is_empty()
    });
    let mut levels = crate::grouped(shared, |c| std::cmp::Reverse((c.level, c.cache_type as u8)));
    levels.sort_by_key(|(level, _)| *level);
    let bar = |c: &Cache| Bar {
        label: cache_label(c),
        cpus: c.cpus.clone(),
        fill: C_CACHE,
    };
    bands.extend(
        levels
            .into_iter()
            .map(|(_, caches)| caches.into_iter().map(bar).collect()),
    );
    bands
}

/// A box of cores (a package, or the cores in no package), laid out and drawn at
/// `(x, y)`; returns the markup and the box's size.
fn group_box(t: &Topology, title: &str, cores: &[&Core], x: f64, y: f64) -> (Markup, f64, f64) {
    let rows = core_rows(cores);
    let private_n = cores
        .iter()
        .map(|c| private_caches(t, c).len())
        .max()
        .unwrap_or(0) as f64;
    let core_h = HEAD + private_n * (BAR_H + 3.0) + PU_H + PAD;
    let mut inner: Vec<Markup> = Vec::new();
    let mut cy = y + HEAD + 4.0;
    let mut width: f64 = 0.0;
    // Bars already drawn on an earlier row: one cache or node that reaches several rows
    // is drawn on each, but labelled as continued (dashed) after the first, so that two
    // rows never read as two nodes.
    let mut drawn: Vec<String> = Vec::new();
    for row in &rows {
        // Core x positions in this row.
        let mut xs = Vec::new();
        let mut cx = x + PAD;
        for c in row {
            xs.push(cx);
            cx += core_width(c) + GAP;
        }
        width = width.max(cx - GAP - x + PAD);
        for band in &shared_bands(t, row) {
            inner.extend(
                band.iter()
                    .filter_map(|bar| shared_bar(row, &xs, bar, cy, &mut drawn)),
            );
            cy += BAR_H + 4.0;
        }
        inner.extend((row.iter().zip(&xs)).map(|(c, &kx)| core_box(t, c, kx, cy, core_h)));
        cy += core_h + GAP;
    }
    let h = cy - y + PAD - GAP;
    let markup = html! {
        rect x=(x) y=(y) width=(width) height=(h) fill=(C_PACKAGE) stroke="#4a5561" {}
        text x=(x + 5.0) y=(y + 14.0) font-weight="bold" { (Esc(title)) }
        @for m in &inner { (m) }
    };
    (markup, width, h)
}

/// `cores` in rows no wider than [`MAX_ROW_PX`].
fn core_rows<'a>(cores: &[&'a Core]) -> Vec<Vec<&'a Core>> {
    let mut rows: Vec<Vec<&Core>> = vec![Vec::new()];
    let mut row_w = 0.0;
    for c in cores {
        let w = core_width(c);
        if row_w > 0.0 && row_w + GAP + w > MAX_ROW_PX {
            rows.push(Vec::new());
            row_w = 0.0;
        }
        row_w += if row_w > 0.0 { GAP + w } else { w };
        rows.last_mut().unwrap().push(c);
    }
    // Cores of one width are shared evenly between the rows (12 cores: 6 + 6, not 8 + 4).
    if rows.len() > 1 && cores.iter().all(|c| core_width(c) == core_width(cores[0])) {
        let per_row = cores.len().div_ceil(rows.len());
        rows = cores.chunks(per_row).map(<[&Core]>::to_vec).collect();
    }
    rows
}

/// One shared cache or node over the cores of `row` it covers (at `xs`), at height `cy`;
/// `None` where it covers none of them.
fn shared_bar(
    row: &[&Core],
    xs: &[f64],
    bar: &Bar,
    cy: f64,
    drawn: &mut Vec<String>,
) -> Option<Markup> {
    let covered: Vec<usize> = row
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.cpus.intersection(&bar.cpus).is_empty())
        .map(|(i, _)| i)
        .collect();
    let (&a, &b) = (covered.first()?, covered.last()?);
    let (bx, bw) = (xs[a], xs[b] + core_width(row[b]) - xs[a]);
    let id = format!("{} {}", bar.label, bar.cpus.to_list_string());
    let (label, dash) = if drawn.contains(&id) {
        (format!("{} (continued)", bar.label), Some("4 3"))
    } else {
        drawn.push(id);
        (bar.label.clone(), None)
    };
    Some(html! {
        rect x=(bx) y=(cy) width=(bw) height=(BAR_H) fill=(bar.fill) stroke="#7b8794"
            stroke-dasharray=[dash] {}
        text x=(bx + 4.0) y=(cy + 13.0) { (Esc(&label)) }
    })
}

/// One core at `(kx, cy)`: its private caches and its CPUs.
fn core_box(t: &Topology, c: &Core, kx: f64, cy: f64, core_h: f64) -> Markup {
    let w = core_width(c);
    // Kind names (`base-1900MHz`) do not fit a core box: they go in the hover
    // title and in a note below the picture.
    let kind = c
        .kind
        .as_deref()
        .map(|k| format!(", {k}"))
        .unwrap_or_default();
    let caches = private_caches(t, c);
    let cache_y = |i: usize| cy + HEAD + i as f64 * (BAR_H + 3.0);
    let py = cy + core_h - PAD - PU_H;
    let smt = c.cpus.len() > 1;
    let sibling_of = if smt {
        format!(", SMT sibling of CPUs {}", c.cpus.to_list_string())
    } else {
        String::new()
    };
    html! {
        rect x=(kx) y=(cy) width=(w) height=(core_h) fill=(C_CORE) stroke="#6b7785" {
            title { "Core " (c.id) (Esc(&kind)) }
        }
        text x=(kx + 4.0) y=(cy + 13.0) { "Core " (c.id) }
        @for (i, cache) in caches.iter().enumerate() {
            rect x=(kx + PAD) y=(cache_y(i)) width=(w - 2.0 * PAD) height=(BAR_H) fill=(C_CACHE)
                stroke="#7b8794" {}
            text x=(kx + PAD + 4.0) y=(cache_y(i) + 13.0) { (Esc(&cache_label(cache))) }
        }
        @for (i, cpu) in c.cpus.iter().enumerate() {
            @let px = kx + PAD + i as f64 * (PU_W + 4.0);
            rect x=(px) y=(py) width=(PU_W) height=(PU_H) fill=(if smt { C_PU_SMT } else { C_PU })
                stroke="#555555" {
                title { "CPU " (cpu) (sibling_of) }
            }
            text x=(px + PU_W / 2.0) y=(py + 15.0) text-anchor="middle" { "CPU " (cpu) }
        }
    }
}

/// The whole machine as one `<svg>` element.
pub fn topology_svg(t: &Topology) -> String {
    let margin = 10.0;
    let mut body: Vec<Markup> = Vec::new();
    let mut y = margin + 26.0;
    let mut width: f64 = 360.0;
    let x = margin + PAD;
    // Packages flow left to right and wrap, so that 64 one-core packages make a grid
    // rather than a strip.
    let mut boxes: Vec<(String, Vec<&Core>)> = t
        .packages
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let title = match p.id {
                Some(id) => format!("Package {id}"),
                None => format!("Package (no id, #{i})"),
            };
            (title, p.cores.iter().collect())
        })
        .collect();
    if !t.cores_without_package.is_empty() {
        boxes.push((
            "Cores in no package".into(),
            t.cores_without_package.iter().collect(),
        ));
    }
    let (mut bx, mut row_h) = (x, 0.0f64);
    for (title, cores) in &boxes {
        // Measure first (drawn off-page), then place.
        let (_, w, _) = group_box(t, title, cores, 0.0, 0.0);
        if bx > x && bx + w > x + MAX_ROW_PX + 2.0 * PAD {
            bx = x;
            y += row_h + GAP;
            row_h = 0.0;
        }
        let (m, w, h) = group_box(t, title, cores, bx, y);
        body.push(m);
        width = width.max(bx + w - x);
        row_h = row_h.max(h);
        bx += w + GAP;
    }
    y += row_h + GAP;
    let mut notes = Vec::new();
    if !t.offline_cpus.is_empty() {
        notes.push(format!(
            "offline CPUs (not drawn): {}",
            t.offline_cpus.to_list_string()
        ));
    }
    for k in &t.core_kinds {
        notes.push(format!(
            "{} cores: CPUs {}",
            k.name,
            k.cpus.to_list_string()
        ));
    }
    if t.numa_nodes.len() == 1
        && let Some(n) = t.numa_nodes.first()
        && n.memory_bytes.is_none()
    {
        notes.push("one NUMA node, memory size unknown".into());
    }
    let notes_y = y;
    y += 16.0 * notes.len() as f64;
    let threads = if t.smt.threads_per_core_max > 1 {
        format!(
            "{} threads per core (SMT siblings shaded)",
            t.smt.threads_per_core_max
        )
    } else {
        "1 thread per core (no SMT visible)".into()
    };
    let title = format!(
        "{}: {} CPUs, {} cores, {}",
        t.cpu_model.as_deref().unwrap_or("Machine"),
        t.cpus.len(),
        t.core_count(),
        threads
    );
    // Text is about 7 px a character at 13 px bold, 6 px at 11 px: the picture must
    // hold its title and notes, not only the boxes.
    let text_w = notes
        .iter()
        .map(|n| n.chars().count() as f64 * 6.0)
        .fold(title.chars().count() as f64 * 6.8, f64::max);
    let width = width.max(text_w);
    let total_w = (width + 2.0 * (margin + PAD)).ceil();
    let total_h = (y + PAD + margin).ceil();
    html! {
        svg xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {total_w} {total_h}"))
            width=(total_w) height=(total_h) role="img" aria-label=(Esc(&title))
            font-family="sans-serif" font-size="11" class="topo" {
            rect x="0" y="0" width=(total_w) height=(total_h) fill="#ffffff" {}
            rect x=(margin) y=(margin) width=(total_w - 2.0 * margin)
                height=(total_h - 2.0 * margin) fill=(C_MACHINE) stroke="#333333" {}
            text x=(margin + 6.0) y=(margin + 17.0) font-size="13" font-weight="bold" {
                (Esc(&title))
            }
            @for m in &body { (m) }
            @for (i, n) in notes.iter().enumerate() {
                text x=(x) y=(notes_y + 16.0 * i as f64 + 12.0) fill="#555555" { (Esc(n)) }
            }
        }
    }
    .into_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_model::{NumaNode, Package, SmtInfo, TOPOLOGY_SCHEMA};

    fn set(v: &[u32]) -> CpuSet {
        v.iter().copied().collect()
    }

    fn machine(packages: u32, cores: u32) -> Topology {
        let mut caches = Vec::new();
        let mut pk = Vec::new();
        let n = packages * cores;
        for p in 0..packages {
            let mut cs = Vec::new();
            for c in 0..cores {
                let i = p * cores + c;
                let cpus = set(&[i, i + n]);
                caches.push(Cache {
                    level: 2,
                    cache_type: CacheType::Unified,
                    size_bytes: Some(1 << 20),
                    line_bytes: None,
                    ways: None,
                    cpus: cpus.clone(),
                });
                cs.push(Core {
                    id: c,
                    cpus,
                    die_id: None,
                    cluster_id: None,
                    kind: None,
                });
            }
            let all: CpuSet = cs.iter().fold(CpuSet::new(), |a, c| a.union(&c.cpus));
            caches.push(Cache {
                level: 3,
                cache_type: CacheType::Unified,
                size_bytes: Some(11 << 20),
                line_bytes: None,
                ways: None,
                cpus: all.clone(),
            });
            pk.push(Package {
                id: Some(p),
                cpus: all,
                cores: cs,
            });
        }
        Topology {
            schema: TOPOLOGY_SCHEMA.into(),
            root: "/".into(),
            cpus: (0..2 * n).collect(),
            offline_cpus: CpuSet::new(),
            allowed_cpus: None,
            numa_nodes: pk
                .iter()
                .map(|p| NumaNode {
                    id: p.id.unwrap(),
                    cpus: p.cpus.clone(),
                    memory_bytes: Some(8 << 30),
                })
                .collect(),
            packages: pk,
            cores_without_package: vec![],
            smt: SmtInfo {
                threads_per_core_min: 2,
                threads_per_core_max: 2,
                control: Some("on".into()),
                active: Some(true),
            },
            caches,
            tlbs: vec![],
            core_kinds: vec![],
            cpu_model: Some("Test <CPU>".into()),
            vendor: None,
            virtualization: None,
            uniprocessor_kernel: false,
        }
    }

    #[test]
    fn every_cpu_core_package_and_cache_is_drawn() {
        let t = machine(2, 3);
        let s = topology_svg(&t);
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(s.ends_with("</svg>"));
        for cpu in 0..12 {
            assert!(s.contains(&format!(">CPU {cpu}</text>")), "CPU {cpu}");
        }
        assert_eq!(s.matches("<title>Core ").count(), 6);
        assert_eq!(s.matches(">Package ").count(), 2);
        assert_eq!(s.matches(">L2 1 MiB<").count(), 6);
        assert_eq!(s.matches(">L3 11 MiB<").count(), 2);
        assert_eq!(s.matches(">NUMA node ").count(), 2);
        assert!(s.contains("Test &lt;CPU&gt;"));
        assert!(s.contains("SMT sibling of CPUs 0,6"));
    }

    #[test]
    fn wide_packages_wrap_and_shared_caches_follow_each_row() {
        let t = machine(1, 24);
        let s = topology_svg(&t);
        let w: f64 = s
            .split("width=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert!(w <= MAX_ROW_PX + 60.0, "{w}");
        // The package's L3 is named once, and continued on the next rows.
        assert_eq!(s.matches(">L3 11 MiB<").count(), 1, "{s}");
        assert!(s.matches(">L3 11 MiB (continued)<").count() >= 1, "{s}");
        assert_eq!(s.matches("<title>Core ").count(), 24);
    }
}
