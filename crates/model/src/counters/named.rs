//! Events counted by name (`--events`): what was asked for, how the kernel was told to
//! count it (PMU type and config words), the sysfs `.scale` and `.unit` that turn the
//! count into a quantity, and the reading.
//!
//! The name is kept as the user or the built-in table wrote it (`topdown-fe-bound`,
//! `l2_rqsts.miss`, `cpu/event=0x3c,umask=0x1/`), so top-down and bandwidth look their
//! inputs up by the names the kernel and the vendors' event lists use.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{CountMode, Reading};

/// How the kernel was asked to count an event: `perf_event_attr.type` and the three
/// config words, plus the PMU's name for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventEncoding {
    /// The PMU (`cpu`, `uncore_imc_0`, `amd_df`), as under `/sys/bus/event_source/devices`.
    pub pmu: String,
    /// `perf_event_attr.type` (the PMU's `type` file).
    pub type_: u32,
    pub config: u64,
    #[serde(default)]
    pub config1: u64,
    #[serde(default)]
    pub config2: u64,
}

impl fmt::Display for EventEncoding {
    /// `cpu (type 4) config=0x1003c`, with config1/config2 only when set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (type {}) config={:#x}",
            self.pmu, self.type_, self.config
        )?;
        if self.config1 != 0 {
            write!(f, ",config1={:#x}", self.config1)?;
        }
        if self.config2 != 0 {
            write!(f, ",config2={:#x}", self.config2)?;
        }
        Ok(())
    }
}

/// One named event as counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedReading {
    /// The name asked for (or the alias or table entry it resolved to).
    pub name: String,
    /// Where the encoding came from: `sysfs alias`, `raw terms`, `built-in table
    /// (Sapphire Rapids)`.
    pub source: String,
    /// One encoding per PMU instance counted (several for `uncore_imc/...`, summed).
    pub encodings: Vec<EventEncoding>,
    /// Privilege mode (`:u`, `:k`; all otherwise).
    pub mode: CountMode,
    /// The sysfs `.scale` (e.g. `6.103515625e-5` for CAS counts in MiB); 1 if none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// The sysfs `.unit` (`MiB`, `Joules`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// What was counted: `thread` (smtlab's process tree) or `cpus 0,28` (a per-socket
    /// uncore PMU counted CPU-wide on its `cpumask`).
    pub scope: String,
    /// The raw count summed over the PMU instances and CPUs, with enabled/running times.
    pub reading: Reading,
    /// How many file descriptors were summed into `reading` (times add up too, so the
    /// counted window is `time_enabled_ns / parts`).
    #[serde(default = "one")]
    pub parts: u32,
}

fn one() -> u32 {
    1
}

impl NamedReading {
    /// `count` of `name`, counted all the time on the thread, with no encoding or
    /// scale: a count given rather than read from a PMU (tests, worked examples).
    pub fn counted(name: &str, count: u64) -> NamedReading {
        NamedReading {
            name: name.into(),
            source: "given".into(),
            encodings: Vec::new(),
            mode: CountMode::All,
            scale: None,
            unit: None,
            scope: "thread".into(),
            reading: Reading::exact(count),
            parts: 1,
        }
    }

    /// The count scaled for multiplexing and by `.scale`; `None` when it never ran.
    pub fn value(&self) -> Option<f64> {
        Some(self.reading.scaled? * self.scale.unwrap_or(1.0))
    }

    /// The length of the counted window in seconds (enabled time of one part).
    pub fn window_s(&self) -> Option<f64> {
        let parts = self.parts.max(1);
        let ns = self.reading.time_enabled_ns / u64::from(parts);
        (ns > 0).then(|| ns as f64 / 1e9)
    }
}

/// A named event that was asked for and not counted, with the one-line reason
/// (`not offered by this CPU (AMD family 0x19 model 0x11)`, `ENOENT`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedUnavailable {
    pub name: String,
    pub reason: String,
}

/// Why a hardware event is not counted where the kernel lists no core PMU.
pub const NO_CORE_PMU: &str = "no core PMU (`cpu`) among the kernel's PMUs: this machine \
     exposes no hardware counters (a VM needs its hypervisor to pass a virtual PMU through)";

/// What was not counted, each cause said once: the machine's line for its hardware
/// counters (`hardware`, where it has none) with the events asked for that needed the
/// core PMU named in it, and a line for each other event (`event l2-misses not
/// counted: ...`), each event once.
pub fn unavailable_lines<'a>(
    hardware: Option<&str>,
    events: impl IntoIterator<Item = &'a NamedUnavailable>,
) -> (Option<String>, Vec<String>) {
    let mut seen: Vec<&NamedUnavailable> = Vec::new();
    for e in events {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    let (no_pmu, others): (Vec<_>, Vec<_>) = seen
        .into_iter()
        .partition(|e| hardware.is_some() && e.reason == NO_CORE_PMU);
    let hardware = hardware.map(|h| match no_pmu.as_slice() {
        [] => h.to_string(),
        _ => {
            let names: Vec<&str> = no_pmu.iter().map(|e| e.name.as_str()).collect();
            format!("{h}; --events {} not counted", names.join(","))
        }
    });
    let others = others
        .into_iter()
        .map(|e| format!("event {} not counted: {}", e.name, e.reason))
        .collect();
    (hardware, others)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_the_missing_pmu_explains_join_the_hardware_line() {
        let e = |name: &str, reason: &str| NamedUnavailable {
            name: name.into(),
            reason: reason.into(),
        };
        let events = [
            e("topdown", NO_CORE_PMU),
            e("l2-misses", "not offered by this CPU"),
            e("topdown", NO_CORE_PMU),
            e("smt", NO_CORE_PMU),
        ];
        let (hardware, others) = unavailable_lines(Some("no PMU here"), &events);
        assert_eq!(
            hardware.as_deref(),
            Some("no PMU here; --events topdown,smt not counted")
        );
        assert_eq!(
            others,
            ["event l2-misses not counted: not offered by this CPU"]
        );
        // With hardware counters, each event has its own line.
        let (hardware, others) = unavailable_lines(None, &events[..2]);
        assert_eq!(hardware, None);
        assert_eq!(others.len(), 2);
        assert!(others[0].starts_with("event topdown not counted: no core PMU"));
    }

    #[test]
    fn value_applies_multiplexing_then_scale() {
        let r = NamedReading {
            name: "cas_count_read".into(),
            source: "sysfs alias".into(),
            encodings: vec![],
            mode: CountMode::All,
            scale: Some(6.103515625e-5),
            unit: Some("MiB".into()),
            scope: "cpus 0".into(),
            reading: Reading::new(1_000_000, 2_000_000_000, 1_000_000_000),
            parts: 2,
        };
        // 1e6 raw, on the counter half the time: 2e6 CAS, each 64 B = 2^-14 MiB.
        assert_eq!(r.value(), Some(2_000_000.0 * 6.103515625e-5));
        assert_eq!(r.window_s(), Some(1.0));
        let json = serde_json::to_string(&r).unwrap();
        let back: NamedReading = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn encoding_prints_only_the_words_set() {
        let e = EventEncoding {
            pmu: "cpu".into(),
            type_: 4,
            config: 0x1003c,
            config1: 0,
            config2: 0,
        };
        assert_eq!(e.to_string(), "cpu (type 4) config=0x1003c");
    }
}
