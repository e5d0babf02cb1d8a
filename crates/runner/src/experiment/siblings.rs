//! Hidden siblings: paper 002's pair probing (section 3: two threads, one on processor
//! 0 and one on each other processor in turn, show which processors share a core's
//! units whatever the numbering says). A thread on CPU 0 and one on CPU k run the same
//! contended kernel (independent integer chains that keep a core's ALUs busy) at once;
//! the slowdown of CPU 0's thread against running alone is the pair's figure. SMT
//! siblings share those units and slow each other markedly; separate cores do not.
//! A virtual machine often hides siblings (every vCPU its own "core"), and a pair that
//! behaves as siblings where the topology says separate cores is reported, as is the
//! converse.
//!
//! The decision ([`findings`]) is a pure function of the figures, tested with seeded
//! ones; [`probe`] measures them on this machine's CPUs.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use smtlab_model::Topology;
use smtlab_placement::pin::{PinError, pin_current_thread_to};

/// A slowdown at or above this behaves as sharing a core: SMT siblings running this
/// kernel together slow each other by 1.5-2x, separate cores by a few percent.
pub const SIBLING_SLOWDOWN: f64 = 1.25;
/// Repetitions of each measurement: the smallest slowdown is kept, since other load on
/// a shared machine only ever adds to it.
const REPEATS: usize = 3;

/// One pair's figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairFigure {
    /// The CPU paired with CPU 0 (the first probed CPU).
    pub cpu: u32,
    /// CPU 0's kernel time paired over alone: 1.0 is no interference.
    pub slowdown: f64,
    /// The topology puts the two CPUs in one core.
    pub same_core_in_topology: bool,
}

impl PairFigure {
    /// The pair behaves as sharing a core.
    pub fn behaves_as_siblings(&self) -> bool {
        self.slowdown >= SIBLING_SLOWDOWN
    }
}

/// A pair whose behaviour contradicts the topology.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finding {
    pub figure: PairFigure,
    /// `true`: behaves as siblings, the topology says separate cores (hidden siblings);
    /// `false`: the topology says siblings, they behave as separate cores.
    pub hidden_sibling: bool,
}

/// The pairs whose behaviour contradicts the topology, in the order given.
pub fn findings(figures: &[PairFigure]) -> Vec<Finding> {
    figures
        .iter()
        .filter(|f| f.behaves_as_siblings() != f.same_core_in_topology)
        .map(|f| Finding {
            figure: *f,
            hidden_sibling: f.behaves_as_siblings(),
        })
        .collect()
}

/// Why a probe could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("pair probing needs at least two CPUs; this machine has {0}")]
    TooFewCpus(usize),
    #[error("cannot pin a probe thread: {0}")]
    Pin(#[from] PinError),
}

/// Kernel operations done in `window` on the calling thread: four independent
/// multiply-add chains, so the core's integer units, not one chain's latency, bound it.
fn kernel_ops(window: Duration) -> u64 {
    let mut x = [1u64, 2, 3, 4];
    let start = Instant::now();
    let mut ops = 0u64;
    while start.elapsed() < window {
        for _ in 0..4096 {
            for v in &mut x {
                *v = v
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
            }
        }
        x = std::hint::black_box(x);
        ops += 4096 * 4;
    }
    ops
}

/// Operations on `first` in `window`, alone or with `second` running the same kernel.
fn ops_on(first: u32, second: Option<u32>, window: Duration) -> Result<u64, ProbeError> {
    let barrier = Arc::new(Barrier::new(1 + usize::from(second.is_some())));
    let run = |cpu: u32| {
        let b = barrier.clone();
        std::thread::spawn(move || -> Result<u64, PinError> {
            pin_current_thread_to(cpu)?;
            b.wait();
            Ok(kernel_ops(window))
        })
    };
    let partner = second.map(run);
    let ops = run(first)
        .join()
        .expect("the probe thread does not panic")?;
    if let Some(p) = partner {
        p.join().expect("the probe thread does not panic")?;
    }
    Ok(ops)
}

/// The window of each measurement of [`start_note`]'s quick probe.
pub const QUICK_WINDOW: Duration = Duration::from_millis(10);
/// The most CPUs [`start_note`] pairs with the first (a second or so in all).
pub const QUICK_PAIRS: usize = 16;
/// The window with which [`start_note`] measures again a pair the quick probe found
/// behaving as siblings (`topo --probe-siblings`'s default), before saying so: the
/// host's own load can halve a vCPU's speed for the few tens of milliseconds the quick
/// probe takes.
pub const CONFIRM_WINDOW: Duration = Duration::from_millis(100);

/// The line a run starts with on a virtual machine that shows no SMT but has CPUs that
/// behave as siblings (a quick probe of the first CPU with up to [`QUICK_PAIRS`]
/// others), or `None`: on bare metal (its topology is the hardware's), where SMT is
/// visible, where the CPUs cannot be probed, or where every pair behaves as the
/// topology says.
pub fn start_note(machine: &dyn crate::machine::Machine, topo: &Topology) -> Option<String> {
    if topo.virtualization.is_none() || topo.smt_visible() || !machine.cpus_can_be_probed() {
        return None;
    }
    let mut probed = topo.clone();
    probed.cpus = topo.cpus.iter().take(QUICK_PAIRS + 1).collect();
    let figures = probe(&probed, QUICK_WINDOW).ok()?;
    let first = topo.cpus.iter().next()?;
    let again = |cpu: u32| {
        let mut pair = topo.clone();
        pair.cpus = [first, cpu].into_iter().collect();
        probe(&pair, CONFIRM_WINDOW).ok()?.first().copied()
    };
    hidden_note(&confirmed(findings(&figures), again), first)
}

/// The hidden siblings of `found` that a second, longer measurement of the pair
/// (`again`, `None` where it could not run) still finds behaving as siblings, with that
/// measurement's figure; the other findings as they are.
pub fn confirmed(found: Vec<Finding>, again: impl Fn(u32) -> Option<PairFigure>) -> Vec<Finding> {
    found
        .into_iter()
        .filter_map(|f| {
            if !f.hidden_sibling {
                return Some(f);
            }
            let figure = again(f.figure.cpu)?;
            figure
                .behaves_as_siblings()
                .then_some(Finding { figure, ..f })
        })
        .collect()
}

/// One line naming the pairs of `findings` that behave as siblings the topology hides.
pub fn hidden_note(findings: &[Finding], first: u32) -> Option<String> {
    let hidden: Vec<String> = findings
        .iter()
        .filter(|f| f.hidden_sibling)
        .map(|f| format!("{} ({:.2}x)", f.figure.cpu, f.figure.slowdown))
        .collect();
    (!hidden.is_empty()).then(|| {
        format!(
            "CPU {first} and CPU {} slow each other as SMT siblings do, though this virtual \
             machine's topology shows separate cores: placements by the topology may share \
             cores (`smtlab topo --probe-siblings` probes every pair)",
            hidden.join(", ")
        )
    })
}

/// Pairs the first of the topology's CPUs with every other, `window` per measurement.
pub fn probe(topo: &Topology, window: Duration) -> Result<Vec<PairFigure>, ProbeError> {
    let cpus: Vec<u32> = topo.cpus.iter().collect();
    let [first, rest @ ..] = cpus.as_slice() else {
        return Err(ProbeError::TooFewCpus(0));
    };
    if rest.is_empty() {
        return Err(ProbeError::TooFewCpus(1));
    }
    let mut out = Vec::new();
    for &k in rest {
        let mut best = f64::INFINITY;
        for _ in 0..REPEATS {
            let alone = ops_on(*first, None, window)? as f64;
            let paired = ops_on(*first, Some(k), window)?.max(1) as f64;
            best = best.min(alone / paired);
        }
        out.push(PairFigure {
            cpu: k,
            slowdown: best,
            same_core_in_topology: topo.core_of(*first).is_some_and(|c| c.cpus.contains(k)),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(cpu: u32, slowdown: f64, same: bool) -> PairFigure {
        PairFigure {
            cpu,
            slowdown,
            same_core_in_topology: same,
        }
    }

    /// A VM of four vCPUs each its "own core", where vCPUs 0 and 2 share a physical
    /// core: CPU 2 is found as a hidden sibling, the others are as the topology says.
    #[test]
    fn a_pair_that_slows_like_siblings_across_cores_is_a_hidden_sibling() {
        let figures = [
            fig(1, 1.03, false),
            fig(2, 1.71, false),
            fig(3, 0.99, false),
        ];
        let f = findings(&figures);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].figure.cpu, 2);
        assert!(f[0].hidden_sibling);
    }

    #[test]
    fn siblings_that_do_not_interfere_and_agreeing_pairs() {
        // The topology's own siblings behaving as such: nothing to report.
        assert!(findings(&[fig(1, 1.8, true), fig(2, 1.02, false)]).is_empty());
        // Siblings in the topology that run as separate cores (the fake machine's CPUs
        // on a host without SMT): reported the other way round.
        let f = findings(&[fig(1, 1.01, true)]);
        assert_eq!(f.len(), 1);
        assert!(!f[0].hidden_sibling);
        // The threshold itself counts as sharing.
        assert!(fig(1, SIBLING_SLOWDOWN, false).behaves_as_siblings());
        assert!(!fig(1, SIBLING_SLOWDOWN - 0.01, false).behaves_as_siblings());
    }

    #[test]
    fn the_start_note_names_hidden_siblings_only() {
        let found = findings(&[fig(1, 1.05, false), fig(2, 1.8, false), fig(3, 1.02, true)]);
        let note = hidden_note(&found, 0).unwrap();
        assert!(
            note.starts_with("CPU 0 and CPU 2 (1.80x) slow each other"),
            "{note}"
        );
        assert!(!note.contains("CPU 3") && !note.contains(", 3"), "{note}");
        assert_eq!(hidden_note(&findings(&[fig(1, 1.0, false)]), 0), None);
    }

    /// A quick probe's hidden sibling is said only when the longer measurement of the
    /// pair agrees, with the longer one's figure.
    #[test]
    fn a_hidden_sibling_is_said_only_once_measured_again() {
        let found = findings(&[fig(1, 2.11, false), fig(2, 1.8, false), fig(3, 1.01, true)]);
        let again = |cpu| match cpu {
            1 => Some(fig(1, 0.99, false)),
            2 => Some(fig(2, 1.74, false)),
            _ => None,
        };
        let kept = confirmed(found.clone(), again);
        let hidden: Vec<(u32, f64)> = kept
            .iter()
            .filter(|f| f.hidden_sibling)
            .map(|f| (f.figure.cpu, f.figure.slowdown))
            .collect();
        assert_eq!(hidden, vec![(2, 1.74)]);
        // The topology's siblings that ran apart are kept as found.
        assert!(kept.iter().any(|f| !f.hidden_sibling && f.figure.cpu == 3));
        // A pair that cannot be measured again is not said.
        assert!(confirmed(found, |_| None).iter().all(|f| !f.hidden_sibling));
        let note = hidden_note(&kept, 0).unwrap();
        assert!(note.starts_with("CPU 0 and CPU 2 (1.74x)"), "{note}");
    }

    #[test]
    fn no_probe_on_bare_metal_or_a_machine_of_files() {
        let mut topo = smtlab_fixtures::build::one_cpu_per_core(&[0, 1, 2, 3]);
        // Bare metal: the topology is the hardware's, and nothing is probed.
        topo.virtualization = None;
        assert_eq!(start_note(&crate::machine::RealMachine, &topo), None);
        // A virtual machine described by files cannot be probed.
        topo.virtualization = Some("kvm".into());
        let dir = tempfile::tempdir().unwrap();
        let fake = crate::machine::FakeMachine::at(dir.path()).unwrap();
        assert_eq!(start_note(&fake, &topo), None);
    }
}
