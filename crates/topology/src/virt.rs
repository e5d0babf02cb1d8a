//! Which hypervisor, if any, the machine runs under.
//!
//! Evidence, most direct first: on the running x86 system the CPUID hypervisor leaf
//! (`KVMKVMKVM`, `Microsoft Hv`, ...), which names the hypervisor even when the firmware
//! strings say QEMU or nothing; `/sys/hypervisor/type` (Xen); the DMI strings under
//! `/sys/class/dmi/id`; the device tree of ARM and POWER guests. When only the
//! `hypervisor` CPU flag says "virtual" the answer is `unknown`, so that a guest is never
//! reported as bare metal.

use std::path::Path;

use crate::cpuinfo::CpuInfo;
use crate::sysfs;

pub(crate) fn detect(root: &Path, live: bool, cpuinfo: Option<&CpuInfo>) -> Option<String> {
    if live && let Some(name) = cpuid_hypervisor() {
        return Some(name);
    }
    if let Some(t) = sysfs::read_trimmed(&root.join("sys/hypervisor/type")) {
        return Some(match t.as_str() {
            "xen" => "Xen".into(),
            other => other.into(),
        });
    }
    if let Some(name) = from_dmi(root) {
        return Some(name);
    }
    if let Some(name) = from_device_tree(root) {
        return Some(name);
    }
    let flagged = cpuinfo
        .and_then(|c| c.first("flags"))
        .is_some_and(|f| f.split_whitespace().any(|w| w == "hypervisor"));
    flagged.then(|| "unknown".into())
}

/// Names a hypervisor from its CPUID leaf 0x40000000 signature.
pub(crate) fn name_from_signature(sig: &[u8]) -> Option<&'static str> {
    let s = String::from_utf8_lossy(sig);
    let s = s.trim_matches(|c: char| c == '\0' || c == ' ');
    Some(match s {
        "KVMKVMKVM" => "KVM",
        "Microsoft Hv" => "Microsoft Hyper-V",
        "VMwareVMware" => "VMware",
        "XenVMMXenVMM" => "Xen",
        "TCGTCGTCGTCG" => "QEMU",
        "VBoxVBoxVBox" => "VirtualBox",
        "lrpepyh  vr" | "prl hyperv" => "Parallels",
        "bhyve bhyve" => "bhyve",
        "ACRNACRNACRN" => "ACRN",
        "QNXQVMBSQG" => "QNX",
        "Linux KVM Hv" => "KVM",
        "SRESRESRESRE" => "SRE",
        "EVMMEVMMEVMM" => "Intel EVMM",
        _ => return None,
    })
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
fn cpuid_hypervisor() -> Option<String> {
    #[cfg(target_arch = "x86")]
    use std::arch::x86::__cpuid;
    #[cfg(target_arch = "x86_64")]
    use std::arch::x86_64::__cpuid;

    // Leaf 1 ECX bit 31 is reserved as zero on real hardware and set by every
    // hypervisor; only then is leaf 0x40000000 defined.
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86_64 CPU and on every x86 CPU Rust targets.
    let leaf1 = unsafe { __cpuid(1) };
    if leaf1.ecx & (1 << 31) == 0 {
        return None;
    }
    #[allow(unused_unsafe)]
    // SAFETY: as above.
    let leaf = unsafe { __cpuid(0x4000_0000) };
    let mut sig = Vec::with_capacity(12);
    for reg in [leaf.ebx, leaf.ecx, leaf.edx] {
        sig.extend_from_slice(&reg.to_le_bytes());
    }
    name_from_signature(&sig).map(str::to_owned)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "x86")))]
fn cpuid_hypervisor() -> Option<String> {
    None
}

fn from_dmi(root: &Path) -> Option<String> {
    let dmi = root.join("sys/class/dmi/id");
    let read = |f: &str| sysfs::read_trimmed(&dmi.join(f)).unwrap_or_default();
    let vendor = read("sys_vendor");
    let product = read("product_name");
    let board = read("board_vendor");
    let bios = read("bios_vendor");
    let all = [&vendor, &product, &board, &bios];
    let any = |needle: &str| all.iter().any(|s| s.contains(needle));
    Some(
        if any("KVM") {
            "KVM"
        } else if any("QEMU") {
            "QEMU"
        } else if any("VMware") {
            "VMware"
        } else if any("VirtualBox") || any("innotek") {
            "VirtualBox"
        } else if vendor.starts_with("Xen") || product.contains("HVM domU") {
            "Xen"
        } else if vendor == "Microsoft Corporation" && product == "Virtual Machine" {
            "Microsoft Hyper-V"
        } else if any("Amazon EC2") {
            "Amazon EC2"
        } else if any("Google Compute Engine") {
            "Google Compute Engine"
        } else if any("Parallels") {
            "Parallels"
        } else if any("BHYVE") {
            "bhyve"
        } else if any("OpenStack") {
            "OpenStack"
        } else if any("Bochs") {
            "Bochs"
        } else {
            return None;
        }
        .into(),
    )
}

fn from_device_tree(root: &Path) -> Option<String> {
    let dt = root.join("proc/device-tree");
    if let Some(compat) = sysfs::read_info(&dt.join("hypervisor/compatible")) {
        for (needle, name) in [("linux,kvm", "KVM"), ("xen", "Xen"), ("vmware", "VMware")] {
            if compat.contains(needle) {
                return Some(name.into());
            }
        }
    }
    // A POWER logical partition; QEMU's pseries machines also name a partition but set
    // their own graphics properties.
    if dt.join("ibm,partition-name").exists() && !dt.join("chosen/qemu,graphic-width").exists() {
        return Some("PowerVM".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures() {
        assert_eq!(name_from_signature(b"KVMKVMKVM\0\0\0"), Some("KVM"));
        assert_eq!(
            name_from_signature(b"Microsoft Hv"),
            Some("Microsoft Hyper-V")
        );
        assert_eq!(name_from_signature(b"\0\0\0\0\0\0\0\0\0\0\0\0"), None);
    }

    #[test]
    fn dmi_and_flag_evidence() {
        let dir = tempfile::tempdir().unwrap();
        let dmi = dir.path().join("sys/class/dmi/id");
        std::fs::create_dir_all(&dmi).unwrap();
        assert_eq!(detect(dir.path(), false, None), None);
        let flagged = CpuInfo::parse("processor : 0\nflags : fpu hypervisor sse\n");
        assert_eq!(
            detect(dir.path(), false, Some(&flagged)).as_deref(),
            Some("unknown")
        );
        std::fs::write(dmi.join("sys_vendor"), "Apache Software Foundation\n").unwrap();
        std::fs::write(dmi.join("product_name"), "CloudStack KVM Hypervisor\n").unwrap();
        assert_eq!(detect(dir.path(), false, None).as_deref(), Some("KVM"));
    }
}
