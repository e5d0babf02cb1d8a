//! DRAM (memory-bus) bandwidth from the memory controllers' CAS counts (paper 000
//! Fig 7 and Eq. 1: bus utilisation = bytes moved / (peak bandwidth x time)).
//!
//! Every column access (CAS) moves one 64-byte cache line. The kernel's aliases for
//! Intel's `uncore_imc_*` PMUs say so themselves: `cas_count_read.scale` is
//! `6.103515625e-5` (= 64 / 2^20) with `.unit` `MiB`. So the bytes come from the
//! named events' own scale and unit where they have one, else 64 bytes per CAS for
//! events named like CAS counts. The window is the events' own enabled time, which is
//! exactly the counted stretches (the counters are paused between samples), or, in a
//! `perf stat` recording that has it, `duration_time` (the wall time perf counted over).
//!
//! AMD Zen 4 and 5 count CAS commands in their UMCs (the kernel's `amd_umc` PMUs,
//! `umc_cas_cmd.rd` and `.wr`, event 0x0a with the read/write mask): 64 bytes each, as
//! the kernel's `umc_mem_read_bandwidth` and `umc_mem_write_bandwidth` compute them. With
//! `umc_data_slot_clks.all` and `umc_mem_clk` the data bus's utilisation is measured
//! too: busy data slots (two per memory clock) over the clocks, as the kernel's
//! `umc_data_bus_utilization`.

use serde::{Deserialize, Serialize};

use super::CounterValues;
use super::named::NamedReading;

/// Bytes per CAS command: one cache line.
pub const BYTES_PER_CAS: f64 = 64.0;

/// Read and write traffic of the memory controllers over the counted window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DramBandwidth {
    pub read_bytes: f64,
    pub write_bytes: f64,
    pub window_s: f64,
    /// (read + write) / window, in 10^9 bytes per second.
    pub gb_per_s: f64,
    /// The machine's peak, when known (channels x transfer rate x 8 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_gb_per_s: Option<f64>,
    /// `gb_per_s / peak_gb_per_s`: bus utilisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_of_peak: Option<f64>,
    /// The events summed, for the reader.
    pub events: Vec<String>,
    /// AMD UMC: the share of the data bus's slots that moved data, measured
    /// (`umc_data_slot_clks.all / 2 / umc_mem_clk`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_utilisation: Option<f64>,
}

/// Whether a named event counts memory reads or writes at the controller.
fn direction(name: &str) -> Option<bool> {
    let n = name.to_ascii_lowercase();
    // The kernel's aliases (cas_count_read/write) and the vendors' names
    // (unc_m_cas_count.rd/.wr) both end in the direction.
    let base = n.rsplit('/').find(|s| !s.is_empty()).unwrap_or(&n);
    // AMD's UMC names (umc_cas_cmd.rd/.wr) too; `.all` is their sum, not a direction.
    if !base.contains("cas_count") && !base.contains("cas_cmd") {
        return None;
    }
    if base.ends_with("read") || base.ends_with(".rd") || base.ends_with(".all_rd") {
        Some(true)
    } else if base.ends_with("write") || base.ends_with(".wr") || base.ends_with(".all_wr") {
        Some(false)
    } else {
        None
    }
}

/// Bytes a CAS-count reading stands for: by its unit when it has one, else 64 per CAS.
fn bytes(r: &NamedReading) -> Option<f64> {
    match r.unit.as_deref() {
        Some("MiB") => Some(r.value()? * 1024.0 * 1024.0),
        Some("KiB") => Some(r.value()? * 1024.0),
        Some("B" | "bytes" | "Bytes") => r.value(),
        Some(_) => None,
        None => Some(r.reading.scaled? * BYTES_PER_CAS),
    }
}

/// DRAM bandwidth of `v`; `Err` is the one-line reason there is none.
pub fn dram_bandwidth(
    v: &CounterValues,
    peak_gb_per_s: Option<f64>,
) -> Result<DramBandwidth, BandwidthUnavailable> {
    bandwidth_text(v, peak_gb_per_s).map_err(BandwidthUnavailable)
}

/// The work of [`dram_bandwidth`], its reason as text.
fn bandwidth_text(v: &CounterValues, peak_gb_per_s: Option<f64>) -> Result<DramBandwidth, String> {
    let mut read = 0.0;
    let mut write = 0.0;
    let mut window: Option<f64> = None;
    let mut events = Vec::new();
    for r in &v.named {
        let Some(is_read) = direction(&r.name) else {
            continue;
        };
        let b = bytes(r).ok_or_else(|| {
            format!(
                "DRAM bandwidth not computed: {} has no count or an unknown unit",
                r.name
            )
        })?;
        if is_read {
            read += b;
        } else {
            write += b;
        }
        if let Some(w) = r.window_s() {
            window = Some(window.map_or(w, |x: f64| x.max(w)));
        }
        events.push(r.name.clone());
    }
    if events.is_empty() {
        let asked = v
            .named_unavailable
            .iter()
            .find(|u| u.name == "dram" || direction(&u.name).is_some());
        return Err(match asked {
            // The `dram` keyword's reason already says what it is about.
            Some(u) if u.reason.starts_with("DRAM bandwidth") => u.reason.clone(),
            Some(u) => format!("DRAM bandwidth not measured: {}: {}", u.name, u.reason),
            None => "DRAM bandwidth not measured (ask with --events dram; needs an uncore \
                     memory-controller PMU and CPU-wide counting)"
                .into(),
        });
    }
    // perf's own wall time where a recording has it: uncore counts cover all of it.
    let window = v.named_value("duration_time").map(|ns| ns / 1e9).or(window);
    let window_s = window
        .filter(|w| *w > 0.0)
        .ok_or("DRAM bandwidth not computed: the CAS counters were never enabled")?;
    let bus_utilisation = v
        .named_value("umc_data_slot_clks.all")
        .zip(v.named_value("umc_mem_clk"))
        .filter(|(_, clk)| *clk > 0.0)
        .map(|(slots, clk)| slots / 2.0 / clk);
    let gb_per_s = (read + write) / window_s / 1e9;
    let peak = peak_gb_per_s.filter(|p| p.is_finite() && *p > 0.0);
    Ok(DramBandwidth {
        read_bytes: read,
        write_bytes: write,
        window_s,
        gb_per_s,
        peak_gb_per_s: peak,
        share_of_peak: peak.map(|p| gb_per_s / p),
        events,
        bus_utilisation,
    })
}

/// Pearson correlation of two equally long series (throughput and bus utilisation
/// across placements, paper 000 s3.5); `None` with fewer than three points or no spread.
pub fn correlation(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 3 {
        return None;
    }
    let n = x.len() as f64;
    let mx = x.iter().sum::<f64>() / n;
    let my = y.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// Why no DRAM bandwidth can be given (no memory-controller counts, not root, ...).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct BandwidthUnavailable(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::named::NamedUnavailable;
    use crate::counters::{CountMode, CounterTarget, Reading};

    fn cas(name: &str, raw: u64, enabled_ns: u64, unit: bool) -> NamedReading {
        NamedReading {
            name: name.into(),
            source: "test".into(),
            encodings: vec![],
            mode: CountMode::All,
            scale: unit.then_some(6.103515625e-5),
            unit: unit.then(|| "MiB".to_string()),
            scope: "cpus 0".into(),
            reading: Reading::new(raw, enabled_ns, enabled_ns),
            parts: 1,
        }
    }

    #[test]
    fn cas_counts_by_hand() {
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: true,
        });
        // 2 s window; 50e6 read CAS x 64 B = 3.2 GB, 25e6 write CAS = 1.6 GB:
        // 4.8 GB / 2 s = 2.4 GB/s; peak 24 GB/s -> 10 %.
        v.named.push(cas(
            "uncore_imc/cas_count_read/",
            50_000_000,
            2_000_000_000,
            true,
        ));
        v.named
            .push(cas("unc_m_cas_count.wr", 25_000_000, 2_000_000_000, false));
        let b = dram_bandwidth(&v, Some(24.0)).unwrap();
        assert!((b.read_bytes - 3.2e9).abs() < 1.0, "{}", b.read_bytes);
        assert_eq!(b.write_bytes, 1.6e9);
        assert_eq!(b.window_s, 2.0);
        assert!((b.gb_per_s - 2.4).abs() < 1e-9);
        assert!((b.share_of_peak.unwrap() - 0.1).abs() < 1e-9);
    }

    /// Zen 4's UMC names as `perf stat` writes them, by hand: 10e6 read and 5e6 write
    /// CAS commands (`.all`, their sum, is not counted twice) over perf's 1.5 s
    /// `duration_time` (not the 1 s the counters ran): 0.96 GB / 1.5 s = 0.64 GB/s; 600e6
    /// busy data slots of 1e9 memory clocks (two slots each): 30% of the bus.
    #[test]
    fn amd_umc_cas_commands_by_hand() {
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: true,
        });
        for (name, raw) in [
            ("umc_cas_cmd.rd", 10_000_000),
            ("umc_cas_cmd.wr", 5_000_000),
            ("umc_cas_cmd.all", 15_000_000),
            ("duration_time", 1_500_000_000),
            ("umc_data_slot_clks.all", 600_000_000),
            ("umc_mem_clk", 1_000_000_000),
        ] {
            v.named.push(cas(name, raw, 1_000_000_000, false));
        }
        let b = dram_bandwidth(&v, None).unwrap();
        assert_eq!((b.read_bytes, b.write_bytes), (640e6, 320e6));
        assert_eq!(b.window_s, 1.5);
        assert!((b.gb_per_s - 0.64).abs() < 1e-12, "{}", b.gb_per_s);
        assert_eq!(b.bus_utilisation, Some(0.3));
        assert_eq!(b.events, ["umc_cas_cmd.rd", "umc_cas_cmd.wr"]);
    }

    #[test]
    fn absent_controllers_say_why() {
        let mut v = CounterValues::new(CounterTarget::Thread {
            tid: 0,
            inherit: true,
        });
        assert!(
            dram_bandwidth(&v, None)
                .unwrap_err()
                .0
                .contains("--events dram")
        );
        v.named_unavailable.push(NamedUnavailable {
            name: "cas_count_read".into(),
            reason: "no PMU offers it here".into(),
        });
        assert_eq!(
            dram_bandwidth(&v, None).unwrap_err().0,
            "DRAM bandwidth not measured: cas_count_read: no PMU offers it here"
        );
        v.named_unavailable[0] = NamedUnavailable {
            name: "dram".into(),
            reason: "DRAM bandwidth not measured: no memory-controller PMU".into(),
        };
        assert_eq!(
            dram_bandwidth(&v, None).unwrap_err().0,
            "DRAM bandwidth not measured: no memory-controller PMU"
        );
    }

    #[test]
    fn correlation_by_hand() {
        assert_eq!(correlation(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]), Some(1.0));
        assert_eq!(correlation(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        assert_eq!(correlation(&[1.0, 2.0], &[1.0, 2.0]), None);
        assert_eq!(correlation(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]), None);
    }
}
