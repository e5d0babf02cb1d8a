//! What can be measured on this machine, probed by opening (and closing) one event of
//! each kind, with one line saying why something is missing.

use smtlab_model::counters::{
    ClassStatus, CountMode, CounterAvailability, CounterEvent, EventClass, EventStatus,
};

use crate::error::{Needs, classify, perf_event_paranoid};
use crate::perf::open_counting;

/// Opens `event` on the calling thread (`cpu` -1) or CPU-wide (`pid` -1) the way
/// [`crate::PerfCounters`] would, and closes it.
fn try_open(event: CounterEvent, mode: CountMode, pid: i32, cpu: i32) -> Result<(), i32> {
    open_counting(event, mode, pid, cpu, false, None).map(drop)
}

/// Probes every event class. Takes a few milliseconds: a handful of
/// `perf_event_open` calls and a read of tracefs.
pub fn availability() -> CounterAvailability {
    let paranoid = perf_event_paranoid();

    let mut events = Vec::new();
    for event in CounterEvent::ALL {
        // The mode each event is counted in by default: user mode where the split
        // applies (allowed at every paranoid level), else everything.
        let (mode, needs) = if event.splits_by_privilege() {
            (CountMode::User, Needs::User)
        } else {
            (CountMode::All, Needs::Kernel)
        };
        let reason = try_open(event, mode, 0, -1)
            .err()
            .map(|errno| classify(errno, needs));
        events.push(EventStatus {
            event,
            available: reason.is_none(),
            reason,
        });
    }

    let software = class_status(
        &events,
        EventClass::Software,
        CounterEvent::TaskClock,
        |_, r| format!("software events unavailable: {r}"),
    );
    let software_ok = software.available;
    let hardware = class_status(
        &events,
        EventClass::Hardware,
        CounterEvent::Cycles,
        |errno, r| hardware_reason(errno, &r, software_ok),
    );

    // Kernel-mode counting: page faults with exclude_user, so the permission check for
    // kernel counting applies (task-clock would not tell: it ignores the exclude bits).
    let kernel_mode = match try_open(CounterEvent::PageFaults, CountMode::Kernel, 0, -1) {
        Ok(()) => ClassStatus::yes(),
        Err(errno) => ClassStatus::no(format!(
            "kernel-mode counting: {}",
            classify(errno, Needs::Kernel)
        )),
    };
    let cpu_wide = match try_open(CounterEvent::TaskClock, CountMode::All, -1, 0) {
        Ok(()) => ClassStatus::yes(),
        Err(errno) => ClassStatus::no(format!(
            "CPU-wide counting: {}",
            classify(errno, Needs::CpuWide)
        )),
    };
    let syscall_tracing = match crate::syscalls::probe() {
        Ok(()) => ClassStatus::yes(),
        Err(e) => ClassStatus::no(e.to_string()),
    };

    CounterAvailability {
        perf_event_paranoid: paranoid,
        hardware,
        software,
        kernel_mode,
        cpu_wide,
        syscall_tracing,
        events,
    }
}

/// Available when any event of `class` opened; otherwise the reason of `lead` (or of
/// the first event of the class) worded by `word(errno_text, reason)`.
fn class_status(
    events: &[EventStatus],
    class: EventClass,
    lead: CounterEvent,
    word: impl Fn(&str, String) -> String,
) -> ClassStatus {
    let of_class: Vec<&EventStatus> = events.iter().filter(|s| s.event.class() == class).collect();
    if of_class.iter().any(|s| s.available) {
        return ClassStatus::yes();
    }
    let first = of_class
        .iter()
        .find(|s| s.event == lead)
        .or(of_class.first())
        .copied();
    match first {
        Some(s) => {
            let reason = s.reason.clone().unwrap_or_default();
            ClassStatus::no(word(s.event.name(), reason))
        }
        None => ClassStatus::no("no events of this class requested"),
    }
}

/// One line: why there are no hardware counters and what would give them, e.g.
/// "hardware counters not supported: this KVM guest exposes no PMU (cycles: ENOENT);
/// its hypervisor must pass a virtual PMU through; software events only".
fn hardware_reason(event: &str, reason: &str, software_ok: bool) -> String {
    let tail = if software_ok {
        "; software events only"
    } else {
        ""
    };
    // The classified reason ends in "(ENAME)"; keep the errno for the short form.
    let errno = reason
        .rsplit_once('(')
        .map(|(_, e)| e.trim_end_matches(')').to_string())
        .unwrap_or_default();
    if !reason.starts_with("not supported") {
        return format!("hardware counters unavailable: {event}: {reason}{tail}");
    }
    let (vendor, pmu) = (hypervisor_vendor(), has_cpu_pmu());
    // What would give this machine counters, where smtlab can tell.
    let fix = match (&vendor, pmu) {
        (Some(_), false) => "; its hypervisor must pass a virtual PMU through",
        _ => "",
    };
    let why = match (vendor, pmu) {
        (Some(v), false) => format!("this {v} guest exposes no PMU"),
        (Some(v), true) => format!("this {v} guest's PMU does not provide the generic events"),
        (None, false) => {
            "the kernel has no CPU PMU driver (no /sys/bus/event_source/devices/cpu)".to_string()
        }
        (None, true) => "the CPU's PMU does not provide the generic events".to_string(),
    };
    format!("hardware counters not supported: {why} ({event}: {errno}){fix}{tail}")
}

/// Whether sysfs lists a CPU PMU (`cpu`, or `cpu_core`/`cpu_atom` on hybrid Intel,
/// `armv8_pmuv3*` on Arm). A guest without a virtual PMU has none.
fn has_cpu_pmu() -> bool {
    let Ok(dir) = std::fs::read_dir("/sys/bus/event_source/devices") else {
        return false;
    };
    dir.flatten().any(|e| {
        let n = e.file_name();
        let n = n.to_string_lossy();
        n == "cpu" || n.starts_with("cpu_") || n.starts_with("armv") || n.ends_with("_pmu")
    })
}

/// The hypervisor's name when running in a virtual machine (`KVM`, `Hyper-V`, ...),
/// from CPUID leaf 0x40000000 on x86, else from the `hypervisor` CPU flag.
pub fn hypervisor_vendor() -> Option<String> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        // Bit 31 of ECX in leaf 1 is reserved for hypervisors to say they are there.
        let leaf1 = __cpuid(1);
        if leaf1.ecx & (1 << 31) == 0 {
            return None;
        }
        let l = __cpuid(0x4000_0000);
        let mut sig = Vec::with_capacity(12);
        for r in [l.ebx, l.ecx, l.edx] {
            sig.extend_from_slice(&r.to_le_bytes());
        }
        let sig = String::from_utf8_lossy(&sig)
            .trim_matches(|c: char| c == '\0' || c.is_whitespace())
            .to_string();
        let name = match sig.as_str() {
            "KVMKVMKVM" => "KVM",
            "Microsoft Hv" => "Hyper-V",
            "VMwareVMware" => "VMware",
            "XenVMMXenVMM" => "Xen",
            "TCGTCGTCGTCG" => "QEMU (TCG)",
            "bhyve bhyve" => "bhyve",
            "ACRNACRNACRN" => "ACRN",
            "" => "virtual machine",
            other => other,
        };
        Some(name.to_string())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        cpuinfo
            .split_whitespace()
            .any(|w| w == "hypervisor")
            .then(|| "virtual machine".to_string())
    }
}
