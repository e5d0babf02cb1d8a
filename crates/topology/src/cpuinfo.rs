//! /proc/cpuinfo: the architecture, the CPU model and vendor, and the ARM core parts.
//!
//! The parser follows hwloc's: `key : value` lines; `processor : N` opens a block that
//! a blank line closes; lines before any block (old ARM's `Processor`, ppc's `platform`,
//! s390's whole file) are global. It never fails: cpuinfo only informs, and its formats
//! differ by architecture and kernel version.

use std::path::Path;

use crate::sysfs;

/// The architecture, which decides how cpuinfo is read and which quirks apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arch {
    X86,
    Ia64,
    Arm,
    Power,
    S390,
    Loong,
    Unknown,
}

impl Arch {
    /// From a `uname -m` style machine name.
    pub(crate) fn from_machine(m: &str) -> Arch {
        let m = m.trim();
        let is_ix86 = m.len() == 4 && m.starts_with('i') && m.ends_with("86");
        if m == "x86_64" || m == "x86" || m == "k1om" || is_ix86 {
            Arch::X86
        } else if m == "aarch64" || m.starts_with("arm") {
            Arch::Arm
        } else if m.starts_with("ppc") || m.starts_with("power") {
            Arch::Power
        } else if m.starts_with("s390") {
            Arch::S390
        } else if m.starts_with("loongarch") {
            Arch::Loong
        } else if m == "ia64" {
            Arch::Ia64
        } else {
            Arch::Unknown
        }
    }
}

/// One `processor : N` block.
#[derive(Debug, Clone, Default)]
pub(crate) struct Proc {
    pub(crate) number: u32,
    pub(crate) fields: Vec<(String, String)>,
}

impl Proc {
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        lookup(&self.fields, key)
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct CpuInfo {
    pub(crate) global: Vec<(String, String)>,
    pub(crate) procs: Vec<Proc>,
}

fn lookup<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, v)| k == key && !v.is_empty())
        .map(|(_, v)| v.as_str())
}

impl CpuInfo {
    pub(crate) fn read(root: &Path) -> Option<CpuInfo> {
        let text = sysfs::read_opt(&root.join("proc/cpuinfo"), sysfs::CPUINFO_LIMIT)
            .ok()
            .flatten()?;
        Some(CpuInfo::parse(&text))
    }

    pub(crate) fn parse(text: &str) -> CpuInfo {
        let mut info = CpuInfo::default();
        let mut current: Option<usize> = None;
        for line in text.lines() {
            let line = line.trim_end_matches(['\r', '\0']);
            if line.is_empty() {
                current = None;
                continue;
            }
            let Some((prefix, value)) = line.split_once(':') else {
                continue;
            };
            if !line.starts_with(|c: char| c.is_ascii_alphabetic()) {
                continue;
            }
            let key = prefix.trim_end_matches([' ', '\t']);
            let value = value.trim();
            if key == "processor" {
                // hwloc drops the whole file on a bad processor number; skipping the
                // line keeps the rest of the information.
                if let Some(n) = sysfs::parse_u64(value).and_then(|n| u32::try_from(n).ok()) {
                    info.procs.push(Proc {
                        number: n,
                        fields: Vec::new(),
                    });
                    current = Some(info.procs.len() - 1);
                }
                continue;
            }
            let entry = (key.to_owned(), value.to_owned());
            match current {
                Some(i) => info.procs[i].fields.push(entry),
                None => info.global.push(entry),
            }
        }
        info
    }

    /// A key's value in the first processor block, else among the global lines.
    pub(crate) fn first(&self, key: &str) -> Option<&str> {
        self.procs
            .first()
            .and_then(|p| p.get(key))
            .or_else(|| lookup(&self.global, key))
    }

    /// Guesses the architecture from the fields only one architecture writes; used for
    /// saved trees that carry no `hwloc-nofile-info`.
    pub(crate) fn guess_arch(&self) -> Arch {
        if self
            .first("vendor_id")
            .is_some_and(|v| v.starts_with("IBM/S390"))
        {
            Arch::S390
        } else if self.first("vendor_id").is_some() && self.first("cpu family").is_some() {
            Arch::X86
        } else if self.first("arch").is_some_and(|a| a.contains("IA-64")) {
            Arch::Ia64
        } else if self.first("CPU implementer").is_some() {
            Arch::Arm
        } else if self.first("revision").is_some_and(|r| r.contains("(pvr ")) {
            Arch::Power
        } else if self.first("Model Name").is_some() && self.first("CPU Family").is_some() {
            Arch::Loong
        } else {
            Arch::Unknown
        }
    }

    /// hwloc's `is_amd_with_CU`: Bulldozer-family AMD (families 0x15 and 0x16) whose
    /// sysfs thread siblings pair the two cores of a compute unit.
    pub(crate) fn is_amd_with_compute_units(&self) -> bool {
        let Some(p) = self.procs.first() else {
            return false;
        };
        p.get("vendor_id") == Some("AuthenticAMD")
            && matches!(p.get("cpu family"), Some("21") | Some("22"))
    }

    /// The CPU model as the kernel names it for this architecture.
    pub(crate) fn model(&self, arch: Arch) -> Option<String> {
        let keys: &[&str] = match arch {
            Arch::X86 | Arch::Ia64 => &["model name"],
            Arch::Arm => &["model name", "Processor"],
            Arch::Power => &["cpu"],
            Arch::Loong => &["Model Name"],
            Arch::S390 => return self.s390_model(),
            Arch::Unknown => &["model name", "Processor", "chip type", "cpu model", "cpu"],
        };
        keys.iter()
            .find_map(|k| self.first(k))
            .map(str::to_owned)
            .or_else(|| (arch == Arch::Arm).then(|| self.arm_model()).flatten())
            .or_else(|| (arch == Arch::Unknown).then(|| self.s390_model()).flatten())
    }

    /// The vendor: x86's `vendor_id`, ia64's `vendor`, the ARM implementer's name.
    pub(crate) fn vendor(&self, arch: Arch) -> Option<String> {
        match arch {
            Arch::Arm => {
                let implementer = self.first("CPU implementer")?;
                let code = sysfs::parse_u64(implementer)?;
                Some(arm_implementer_name(code))
            }
            Arch::Power => self.first("vendor").map(str::to_owned).or_else(|| {
                self.first("cpu")
                    .filter(|c| c.starts_with("POWER"))
                    .map(|_| "IBM".to_owned())
            }),
            _ => self
                .first("vendor_id")
                .or_else(|| self.first("vendor"))
                .map(str::to_owned),
        }
    }

    /// ARM's `(implementer, part)` per processor number, from the `CPU implementer` and
    /// `CPU part` lines (which old 32-bit kernels write once, globally).
    pub(crate) fn arm_parts(&self) -> Vec<(u32, ArmPart)> {
        let global_impl = lookup(&self.global, "CPU implementer").and_then(sysfs::parse_u64);
        let global_part = lookup(&self.global, "CPU part").and_then(sysfs::parse_u64);
        self.procs
            .iter()
            .filter_map(|p| {
                let implementer = p
                    .get("CPU implementer")
                    .and_then(sysfs::parse_u64)
                    .or(global_impl)?;
                let part = p
                    .get("CPU part")
                    .and_then(sysfs::parse_u64)
                    .or(global_part)?;
                Some((
                    p.number,
                    ArmPart {
                        implementer: implementer as u32 & 0xff,
                        part: part as u32 & 0xfff,
                    },
                ))
            })
            .collect()
    }

    fn arm_model(&self) -> Option<String> {
        let mut names: Vec<String> = Vec::new();
        for (_, part) in self.arm_parts() {
            let name = part.display_name();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        (!names.is_empty()).then(|| names.join(" + "))
    }

    /// s390 writes `processor 0: version = 00,  identification = ...,  machine = 2817`
    /// (old kernels) or a `machine : 2817` line per CPU (newer ones).
    fn s390_model(&self) -> Option<String> {
        let machine = self.first("machine").map(str::to_owned).or_else(|| {
            self.global
                .iter()
                .filter(|(k, _)| k.starts_with("processor "))
                .find_map(|(_, v)| {
                    v.split(',')
                        .find_map(|f| f.trim().strip_prefix("machine"))
                        .map(|m| m.trim_start_matches([' ', '=']).trim().to_owned())
                })
        })?;
        if machine.is_empty() || !machine.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        Some(match s390_machine_name(&machine) {
            Some(name) => format!("IBM {name} (machine type {machine})"),
            None => format!("IBM Z machine type {machine}"),
        })
    }
}

/// An ARM core design, from MIDR or cpuinfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ArmPart {
    pub(crate) implementer: u32,
    pub(crate) part: u32,
}

impl ArmPart {
    /// Decodes the MIDR_EL1 register as sysfs exposes it (`regs/identification/midr_el1`).
    pub(crate) fn from_midr(midr: u64) -> ArmPart {
        ArmPart {
            implementer: ((midr >> 24) & 0xff) as u32,
            part: ((midr >> 4) & 0xfff) as u32,
        }
    }

    /// Short lowercase name for a core kind (`cortex-x925`), or one built from the codes.
    pub(crate) fn kind_name(&self) -> String {
        match arm_part_name(self.implementer, self.part) {
            Some(n) => n.to_owned(),
            None => format!(
                "{}-part-{:#05x}",
                arm_implementer_name(u64::from(self.implementer)).to_lowercase(),
                self.part
            ),
        }
    }

    /// Human name for the CPU model line (`Cortex-X925`).
    fn display_name(&self) -> String {
        match arm_part_name(self.implementer, self.part) {
            Some(n) => {
                let mut out = String::new();
                for (i, word) in n.split('-').enumerate() {
                    if i > 0 {
                        out.push('-');
                    }
                    let mut chars = word.chars();
                    if let Some(c) = chars.next() {
                        out.extend(c.to_uppercase());
                        out.push_str(chars.as_str());
                    }
                }
                out
            }
            None => format!(
                "{} part {:#05x}",
                arm_implementer_name(u64::from(self.implementer)),
                self.part
            ),
        }
    }
}

fn arm_implementer_name(code: u64) -> String {
    let name = match code {
        0x41 => "ARM",
        0x42 => "Broadcom",
        0x43 => "Cavium",
        0x44 => "DEC",
        0x46 => "Fujitsu",
        0x48 => "HiSilicon",
        0x49 => "Infineon",
        0x4d => "Motorola",
        0x4e => "NVIDIA",
        0x50 => "APM",
        0x51 => "Qualcomm",
        0x53 => "Samsung",
        0x56 => "Marvell",
        0x61 => "Apple",
        0x66 => "Faraday",
        0x69 => "Intel",
        0x6d => "Microsoft",
        0x70 => "Phytium",
        0xc0 => "Ampere",
        _ => return format!("ARM implementer {code:#04x}"),
    };
    name.to_owned()
}

fn arm_part_name(implementer: u32, part: u32) -> Option<&'static str> {
    Some(match (implementer, part) {
        (0x41, 0xc05) => "cortex-a5",
        (0x41, 0xc07) => "cortex-a7",
        (0x41, 0xc08) => "cortex-a8",
        (0x41, 0xc09) => "cortex-a9",
        (0x41, 0xc0d) => "cortex-a12",
        (0x41, 0xc0e) => "cortex-a17",
        (0x41, 0xc0f) => "cortex-a15",
        (0x41, 0xd01) => "cortex-a32",
        (0x41, 0xd03) => "cortex-a53",
        (0x41, 0xd04) => "cortex-a35",
        (0x41, 0xd05) => "cortex-a55",
        (0x41, 0xd06) => "cortex-a65",
        (0x41, 0xd07) => "cortex-a57",
        (0x41, 0xd08) => "cortex-a72",
        (0x41, 0xd09) => "cortex-a73",
        (0x41, 0xd0a) => "cortex-a75",
        (0x41, 0xd0b) => "cortex-a76",
        (0x41, 0xd0c) => "neoverse-n1",
        (0x41, 0xd0d) => "cortex-a77",
        (0x41, 0xd0e) => "cortex-a76ae",
        (0x41, 0xd40) => "neoverse-v1",
        (0x41, 0xd41) => "cortex-a78",
        (0x41, 0xd42) => "cortex-a78ae",
        (0x41, 0xd43) => "cortex-a65ae",
        (0x41, 0xd44) => "cortex-x1",
        (0x41, 0xd46) => "cortex-a510",
        (0x41, 0xd47) => "cortex-a710",
        (0x41, 0xd48) => "cortex-x2",
        (0x41, 0xd49) => "neoverse-n2",
        (0x41, 0xd4a) => "neoverse-e1",
        (0x41, 0xd4b) => "cortex-a78c",
        (0x41, 0xd4c) => "cortex-x1c",
        (0x41, 0xd4d) => "cortex-a715",
        (0x41, 0xd4e) => "cortex-x3",
        (0x41, 0xd4f) => "neoverse-v2",
        (0x41, 0xd80) => "cortex-a520",
        (0x41, 0xd81) => "cortex-a720",
        (0x41, 0xd82) => "cortex-x4",
        (0x41, 0xd84) => "neoverse-v3",
        (0x41, 0xd85) => "cortex-x925",
        (0x41, 0xd87) => "cortex-a725",
        (0x41, 0xd8e) => "neoverse-n3",
        (0x43, 0x0af) => "thunderx2",
        (0x46, 0x001) => "a64fx",
        (0x48, 0xd01) => "tsv110",
        (0x4e, 0x004) => "carmel",
        (0x51, 0x001) => "oryon",
        (0x51, 0x800) => "kryo-gold",
        (0x51, 0x801) => "kryo-silver",
        (0x51, 0x802) => "kryo-3xx-gold",
        (0x51, 0x803) => "kryo-3xx-silver",
        (0x51, 0x804) => "kryo-4xx-gold",
        (0x51, 0x805) => "kryo-4xx-silver",
        (0x61, 0x022) => "icestorm",
        (0x61, 0x023) => "firestorm",
        (0x61, 0x032) => "blizzard",
        (0x61, 0x033) => "avalanche",
        (0xc0, 0xac3) => "ampere-1",
        (0xc0, 0xac4) => "ampere-1a",
        _ => return None,
    })
}

fn s390_machine_name(machine: &str) -> Option<&'static str> {
    Some(match machine {
        "2064" => "z900",
        "2066" => "z800",
        "2084" => "z990",
        "2086" => "z890",
        "2094" => "z9 EC",
        "2096" => "z9 BC",
        "2097" => "z10 EC",
        "2098" => "z10 BC",
        "2817" => "z196",
        "2818" => "z114",
        "2827" => "zEC12",
        "2828" => "zBC12",
        "2964" => "z13",
        "2965" => "z13s",
        "3906" => "z14",
        "3907" => "z14 ZR1",
        "8561" => "z15",
        "8562" => "z15 T02",
        "3931" => "z16",
        "3932" => "z16 A02",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 21\n\
model name\t: AMD Opteron(TM) Processor 6272\nflags\t\t: fpu hypervisor\n\n\
processor\t: 1\nvendor_id\t: AuthenticAMD\n";

    #[test]
    fn x86_blocks_model_vendor_and_bulldozer() {
        let c = CpuInfo::parse(X86);
        assert_eq!(c.procs.len(), 2);
        assert_eq!(c.guess_arch(), Arch::X86);
        assert_eq!(
            c.model(Arch::X86).as_deref(),
            Some("AMD Opteron(TM) Processor 6272")
        );
        assert_eq!(c.vendor(Arch::X86).as_deref(), Some("AuthenticAMD"));
        assert!(c.is_amd_with_compute_units());
        let zen = CpuInfo::parse("processor : 0\nvendor_id : AuthenticAMD\ncpu family : 25\n");
        assert!(!zen.is_amd_with_compute_units());
    }

    #[test]
    fn old_arm_has_global_processor_and_parts() {
        let text = "Processor\t: ARMv7 Processor rev 1 (v7l)\nprocessor\t: 0\nBogoMIPS\t: 1595.80\n\n\
processor\t: 1\nBogoMIPS\t: 1595.80\n\nCPU implementer\t: 0x41\nCPU part\t: 0xc09\nHardware\t: ST-Ericsson\n";
        let c = CpuInfo::parse(text);
        assert_eq!(c.guess_arch(), Arch::Arm);
        assert_eq!(
            c.model(Arch::Arm).as_deref(),
            Some("ARMv7 Processor rev 1 (v7l)")
        );
        assert_eq!(c.vendor(Arch::Arm).as_deref(), Some("ARM"));
        let parts = c.arm_parts();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].1.kind_name(), "cortex-a9");
    }

    #[test]
    fn arm64_model_comes_from_the_parts() {
        let text = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd87\n\n\
processor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd85\n\n\
processor\t: 2\nCPU implementer\t: 0x41\nCPU part\t: 0xd99\n";
        let c = CpuInfo::parse(text);
        assert_eq!(
            c.model(Arch::Arm).as_deref(),
            Some("Cortex-A725 + Cortex-X925 + ARM part 0xd99")
        );
        assert_eq!(c.arm_parts()[2].1.kind_name(), "arm-part-0xd99");
        assert_eq!(
            ArmPart::from_midr(0x0000_0000_410f_d851),
            ArmPart {
                implementer: 0x41,
                part: 0xd85
            }
        );
    }

    #[test]
    fn powerpc_and_s390_formats() {
        let ppc = CpuInfo::parse(
            "processor\t: 0\ncpu\t\t: POWER7 (architected), altivec supported\nrevision\t: 2.1 (pvr 003f 0201)\n\n\
timebase\t: 512000000\nplatform\t: pSeries\n",
        );
        assert_eq!(ppc.guess_arch(), Arch::Power);
        assert_eq!(
            ppc.model(Arch::Power).as_deref(),
            Some("POWER7 (architected), altivec supported")
        );
        assert_eq!(ppc.vendor(Arch::Power).as_deref(), Some("IBM"));

        let s390 = CpuInfo::parse(
            "vendor_id       : IBM/S390\n# processors    : 20\n\
processor 0: version = 00,  identification = 279F25,  machine = 2817\n",
        );
        assert!(s390.procs.is_empty());
        assert_eq!(s390.guess_arch(), Arch::S390);
        assert_eq!(
            s390.model(Arch::S390).as_deref(),
            Some("IBM z196 (machine type 2817)")
        );
        assert_eq!(s390.vendor(Arch::S390).as_deref(), Some("IBM/S390"));
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "",
            ":",
            "processor : x\n",
            "processor : 99999999999999999999\n",
            "\0\0\0",
            "processor:\nmodel name:\n",
            "é:ü\n",
        ] {
            let c = CpuInfo::parse(text);
            let _ = c.model(Arch::Unknown);
            let _ = c.vendor(Arch::Arm);
            let _ = c.guess_arch();
            let _ = c.arm_parts();
        }
    }

    #[test]
    fn machine_names() {
        assert_eq!(Arch::from_machine("x86_64"), Arch::X86);
        assert_eq!(Arch::from_machine("i686"), Arch::X86);
        assert_eq!(Arch::from_machine("aarch64"), Arch::Arm);
        assert_eq!(Arch::from_machine("ppc64le"), Arch::Power);
        assert_eq!(Arch::from_machine("s390x"), Arch::S390);
        assert_eq!(Arch::from_machine("ia64"), Arch::Ia64);
        assert_eq!(Arch::from_machine("riscv64"), Arch::Unknown);
    }
}
