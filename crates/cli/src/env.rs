//! Reads the environment a measurement runs in (DESIGN rule 11) from /proc and /sys.
//! Every field is read, never guessed; what cannot be read is `None`.

use std::path::Path;

use smtlab_model::{Environment, Topology};

fn read(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(Path::new(path)).ok()?;
    let t = s.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    (!t.is_empty()).then(|| t.to_string())
}

fn cpuinfo_field(name: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim().to_string())
    })
}

pub fn capture(topo: &Topology) -> Environment {
    let boost = read("/sys/devices/system/cpu/cpufreq/boost").or_else(|| {
        read("/sys/devices/system/cpu/intel_pstate/no_turbo").map(|v| {
            if v == "1" {
                "0 (intel_pstate no_turbo)".to_string()
            } else {
                "1 (intel_pstate)".to_string()
            }
        })
    });
    Environment {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: option_env!("SMTLAB_GIT_COMMIT").map(str::to_string),
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpu_model: topo.cpu_model.clone(),
        microcode: cpuinfo_field("microcode"),
        smt_control: topo.smt.control.clone(),
        virtualization: topo.virtualization.clone(),
        governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        boost,
        clocksource: read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        perf_event_paranoid: read("/proc/sys/kernel/perf_event_paranoid")
            .and_then(|s| s.parse().ok()),
        online_cpus: topo.cpus.to_list_string(),
    }
}
