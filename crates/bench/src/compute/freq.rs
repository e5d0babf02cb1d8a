//! The clock frequency of the CPUs a compute sample ran on, for operations per cycle.
//!
//! Sources, best first: cpufreq `scaling_cur_freq` (the kernel's current estimate),
//! `/proc/cpuinfo` `cpu MHz` (on x86 with APERF/MPERF the recent average; in a VM often the
//! host's nominal TSC rate), cpufreq `cpuinfo_max_freq` (an upper bound: ops per cycle
//! computed from it are a lower bound). When none says, there is no frequency and no
//! operations-per-cycle figure: a number we did not measure is never printed.

use std::path::Path;

/// Where a frequency came from: cpufreq `scaling_cur_freq`, `/proc/cpuinfo` `cpu MHz`,
/// cpufreq `cpuinfo_max_freq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreqSource {
    ScalingCur,
    CpuInfo,
    CpuInfoMax,
}

fn read_khz(root: &Path, cpu: u32, file: &str) -> Option<f64> {
    let p = root.join(format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/{file}"));
    let khz: f64 = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
    (khz > 0.0).then_some(khz * 1e3)
}

/// `cpu MHz` of each processor in a `/proc/cpuinfo` text, by processor number.
fn cpuinfo_mhz(text: &str) -> Vec<(u32, f64)> {
    let mut out = Vec::new();
    let mut processor: Option<u32> = None;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "processor" => processor = v.trim().parse().ok(),
            "cpu MHz" => match (processor, v.trim().parse::<f64>()) {
                (Some(p), Ok(mhz)) if mhz > 0.0 => out.push((p, mhz)),
                _ => {}
            },
            _ => {}
        }
    }
    out
}

/// Mean frequency in Hz of `cpus` under `root` (`/` for this machine), with its source;
/// `None` when no source gives a value for any of them. The first source that knows at
/// least one of the CPUs wins, so the mean never mixes sources.
pub fn mean_freq_hz(root: &Path, cpus: &[u32]) -> Option<(f64, FreqSource)> {
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let cur: Vec<f64> = cpus
        .iter()
        .filter_map(|&c| read_khz(root, c, "scaling_cur_freq"))
        .collect();
    if let Some(hz) = mean(cur) {
        return Some((hz, FreqSource::ScalingCur));
    }
    if let Ok(text) = std::fs::read_to_string(root.join("proc/cpuinfo")) {
        let all = cpuinfo_mhz(&text);
        let found: Vec<f64> = cpus
            .iter()
            .filter_map(|c| all.iter().find(|(p, _)| p == c).map(|(_, mhz)| mhz * 1e6))
            .collect();
        if let Some(hz) = mean(found) {
            return Some((hz, FreqSource::CpuInfo));
        }
    }
    let max: Vec<f64> = cpus
        .iter()
        .filter_map(|&c| read_khz(root, c, "cpuinfo_max_freq"))
        .collect();
    mean(max).map(|hz| (hz, FreqSource::CpuInfoMax))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn prefers_scaling_cur_then_cpuinfo_then_max() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(mean_freq_hz(root, &[0]), None);
        write(
            root,
            "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",
            "3000000\n",
        );
        assert_eq!(
            mean_freq_hz(root, &[0]),
            Some((3e9, FreqSource::CpuInfoMax))
        );
        write(
            root,
            "proc/cpuinfo",
            "processor\t: 0\ncpu MHz\t\t: 2500.000\n\nprocessor\t: 1\ncpu MHz\t\t: 2700.000\n",
        );
        assert_eq!(
            mean_freq_hz(root, &[0, 1]),
            Some((2.6e9, FreqSource::CpuInfo))
        );
        assert_eq!(mean_freq_hz(root, &[5]), None);
        write(
            root,
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq",
            "1000000",
        );
        assert_eq!(
            mean_freq_hz(root, &[0, 1]),
            Some((1e9, FreqSource::ScalingCur))
        );
    }

    #[test]
    fn ignores_garbage() {
        assert!(cpuinfo_mhz("processor: x\ncpu MHz: 1\nnonsense\ncpu MHz: -3").is_empty());
    }
}
