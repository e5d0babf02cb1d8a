//! Kernel work by cause, counted without a PMU (paper 003 Figs 2-4 and 6): the
//! software page-fault counters and the kernel's tracepoints, opened as counting events
//! on the measured tasks like any `--events` entry (`--events kernel`, or one by name:
//! `exceptions:page_fault_user`).
//!
//! * `minor-faults`, `major-faults`: the kernel's software counters (a major fault
//!   waited for I/O).
//! * `faults-user`, `faults-kernel`: the `exceptions:page_fault_user` and
//!   `page_fault_kernel` tracepoints (x86): faults taken in user mode, and in kernel mode
//!   (the kernel touching user memory, `copy_to_user`).
//! * `tlb-shootdowns-sent`, `tlb-shootdowns-received`: `tlb:tlb_flush` with the reason
//!   the kernel gives (`TLB_REMOTE_SEND_IPI`, 4: this task asked other CPUs to flush;
//!   `TLB_REMOTE_SHOOTDOWN`, 1: a flush another CPU asked for, done while this task ran).
//! * `lock-contentions`: `lock:contention_begin` (Linux 5.19 and later), each time a
//!   kernel lock was found held and the task spun or slept for it.
//!
//! These are counts; the time each cause took is not measured (the kernel has no
//! tracepoint where a fault ends), so the figures are per operation, never a share of
//! CPU time.

use smtlab_model::counters::CountMode;
use smtlab_model::counters::named::EventEncoding;

use crate::perf::ResolvedEvent;
use crate::tracefs;

/// Why a cause (or any named event) cannot be counted here, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Unavailable(pub String);

/// `perf_event_attr.type` of the kernel's software counters and of tracepoints.
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_COUNT_SW_PAGE_FAULTS_MIN` and `_MAJ`.
const SW_MINOR_FAULTS: u64 = 5;
const SW_MAJOR_FAULTS: u64 = 6;

/// Where one cause is counted.
enum Source {
    Software(u64),
    /// `system:name` and an optional tracepoint filter.
    Tracepoint(&'static str, Option<&'static str>),
}

/// The causes `--events kernel` expands to: smtlab's name, where it is counted.
const CAUSES: [(&str, Source); 7] = [
    ("minor-faults", Source::Software(SW_MINOR_FAULTS)),
    ("major-faults", Source::Software(SW_MAJOR_FAULTS)),
    (
        "faults-user",
        Source::Tracepoint("exceptions:page_fault_user", None),
    ),
    (
        "faults-kernel",
        Source::Tracepoint("exceptions:page_fault_kernel", None),
    ),
    (
        "tlb-shootdowns-sent",
        Source::Tracepoint("tlb:tlb_flush", Some("reason == 4")),
    ),
    (
        "tlb-shootdowns-received",
        Source::Tracepoint("tlb:tlb_flush", Some("reason == 1")),
    ),
    (
        "lock-contentions",
        Source::Tracepoint("lock:contention_begin", None),
    ),
];

/// Whether `text` names a tracepoint (`system:name`, not an event with `:u`/`:k`).
pub(crate) fn is_tracepoint(text: &str) -> bool {
    text.split_once(':').is_some_and(|(system, name)| {
        !system.is_empty()
            && !name.is_empty()
            // perf's modifier letters (`:u`, `:pp`) are modifiers, not an event.
            && !name.chars().all(|c| "ukhHGpPSDIWe".contains(c))
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_:".contains(c))
    })
}

/// A tracepoint counted on the measured tasks, or the one-line reason it cannot be.
pub(crate) fn tracepoint(
    name: &str,
    tracepoint: &str,
    filter: Option<&str>,
    group: u32,
) -> Result<ResolvedEvent, Unavailable> {
    let (system, event) = tracepoint
        .split_once(':')
        .ok_or_else(|| Unavailable(format!("expected system:name, found {tracepoint}")))?;
    let root = tracefs::find_tracefs().map_err(|e| Unavailable(e.to_string()))?;
    let tp = tracefs::tracepoint(&root, system, event).map_err(|e| {
        Unavailable(match e {
            tracefs::TracefsError::Read { .. } => {
                format!("this kernel has no tracepoint {tracepoint}")
            }
            other => other.to_string(),
        })
    })?;
    let source = match filter {
        Some(f) => format!("tracepoint {tracepoint} if {f}"),
        None => format!("tracepoint {tracepoint}"),
    };
    let encoding = encoding("tracepoint", PERF_TYPE_TRACEPOINT, tp.id);
    let mut e = ResolvedEvent::new(name, source, vec![encoding], CountMode::All, group);
    e.filter = filter.map(str::to_string);
    Ok(e)
}

fn encoding(pmu: &str, type_: u32, config: u64) -> EventEncoding {
    EventEncoding {
        pmu: pmu.to_string(),
        type_,
        config,
        config1: 0,
        config2: 0,
    }
}

/// Every cause, each in a group of its own (`group(i)`), or its reason.
pub(crate) fn all(
    group: impl Fn(usize) -> u32,
) -> Vec<(&'static str, Result<ResolvedEvent, Unavailable>)> {
    CAUSES
        .iter()
        .enumerate()
        .map(|(i, (name, source))| {
            let resolved = match source {
                Source::Software(config) => Ok(ResolvedEvent::new(
                    *name,
                    "software counter".into(),
                    vec![encoding("software", PERF_TYPE_SOFTWARE, *config)],
                    CountMode::All,
                    group(i),
                )),
                Source::Tracepoint(tp, filter) => tracepoint(name, tp, *filter, group(i)),
            };
            (*name, resolved)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracepoints_are_told_from_modifiers() {
        assert!(is_tracepoint("exceptions:page_fault_user"));
        assert!(is_tracepoint("lock:contention_begin"));
        assert!(!is_tracepoint("cycles:u"));
        assert!(!is_tracepoint("cycles:uk"));
        assert!(!is_tracepoint("cycles:p"));
        assert!(!is_tracepoint("cpu/event=0x3c/:u"));
        assert!(!is_tracepoint("plain"));
    }

    #[test]
    fn causes_resolve_or_say_why() {
        let all = all(|i| 100 + i as u32);
        assert_eq!(all.len(), 7);
        let (name, minor) = &all[0];
        assert_eq!(*name, "minor-faults");
        let minor = minor.as_ref().unwrap();
        assert_eq!(
            (minor.encodings[0].type_, minor.encodings[0].config),
            (1, 5)
        );
        assert_eq!(minor.group, 100);
        for (name, r) in &all[2..] {
            match r {
                Ok(e) => {
                    assert_eq!(e.encodings[0].type_, 2, "{name}");
                    assert!(e.encodings[0].config > 0, "{name}");
                }
                // Without tracefs (not root, not mounted) or the tracepoint: one line.
                Err(why) => assert!(!why.0.contains('\n') && !why.0.is_empty(), "{name}: {why}"),
            }
        }
        let shootdowns = all
            .iter()
            .find(|(n, _)| *n == "tlb-shootdowns-sent")
            .unwrap();
        if let Ok(e) = &shootdowns.1 {
            assert_eq!(e.filter.as_deref(), Some("reason == 4"));
        }
    }
}
