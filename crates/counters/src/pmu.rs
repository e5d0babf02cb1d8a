//! The kernel's description of its PMUs, read from `/sys/bus/event_source/devices`
//! (Documentation/ABI/testing/sysfs-bus-event_source-devices-*), and the encoding of
//! event terms through it, the way `perf` does:
//!
//! * `<pmu>/type`: the value for `perf_event_attr.type`.
//! * `<pmu>/format/<term>`: which bits of `config`, `config1` or `config2` a term fills,
//!   e.g. `config:0-7,32-35` (AMD's 12-bit event select split in two), `config1:0-63`,
//!   `config:21` (one bit).
//! * `<pmu>/events/<alias>`: terms for a named event (`event=0x3c,umask=0x0,any=1`),
//!   with optional `<alias>.scale` (a factor) and `<alias>.unit` (`MiB`, `Joules`).
//! * `<pmu>/cpumask`: for uncore PMUs, the CPUs to open the event on (one per socket
//!   or die); such events count CPU-wide, not per task.
//!
//! A tree can be read from any directory, so tests read saved trees of real machines.

use std::fs;
use std::path::Path;

use smtlab_model::counters::named::EventEncoding;

/// Where the kernel lists its PMUs.
pub const SYSFS_PMUS: &str = "/sys/bus/event_source/devices";

smtlab_model::named_enum! {
    /// One of `perf_event_attr`'s config words, in order (`as usize` indexes them).
    pub enum ConfigWord {
        Config = "config",
        Config1 = "config1",
        Config2 = "config2",
    }
}

/// Bits `lo..=hi` of one config word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitRange {
    pub word: ConfigWord,
    pub lo: u32,
    pub hi: u32,
}

/// A format term: the bit ranges it fills, low bits of the value first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatField {
    pub name: String,
    pub ranges: Vec<BitRange>,
}

impl FormatField {
    /// Parses a format file's content (`config:0-7,32-35`, `config1:0-63`, `config:21`).
    pub fn parse(name: &str, text: &str) -> Result<FormatField, PmuError> {
        let bad = || {
            PmuError(format!(
                "format `{name}`: expected `config[12]:LO-HI,...`, found `{}`",
                text.trim()
            ))
        };
        let (word, bits) = text.trim().split_once(':').ok_or_else(bad)?;
        let word = ConfigWord::parse(word).ok_or_else(bad)?;
        let mut ranges = Vec::new();
        for part in bits.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a, b),
                None => (part, part),
            };
            let lo: u32 = lo.trim().parse().map_err(|_| bad())?;
            let hi: u32 = hi.trim().parse().map_err(|_| bad())?;
            if lo > hi || hi > 63 {
                return Err(bad());
            }
            ranges.push(BitRange { word, lo, hi });
        }
        Ok(FormatField {
            name: name.to_string(),
            ranges,
        })
    }

    /// How many bits the term holds.
    pub fn width(&self) -> u32 {
        self.ranges.iter().map(|r| r.hi - r.lo + 1).sum()
    }

    /// Writes `value` into `words` (config, config1, config2), spreading its low bits
    /// over the ranges in order; `Err` when it does not fit.
    fn apply(&self, value: u64, words: &mut [u64; 3]) -> Result<(), PmuError> {
        let width = self.width();
        if width < 64 && value >> width != 0 {
            return Err(PmuError(format!(
                "value {value:#x} of `{}` does not fit its {width} bits",
                self.name
            )));
        }
        let mut v = value;
        for r in &self.ranges {
            let n = r.hi - r.lo + 1;
            let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            let idx = r.word as usize;
            words[idx] = (words[idx] & !(mask << r.lo)) | ((v & mask) << r.lo);
            v = if n == 64 { 0 } else { v >> n };
        }
        Ok(())
    }
}

/// A named event the kernel offers on a PMU.
#[derive(Debug, Clone, PartialEq)]
pub struct Alias {
    pub name: String,
    /// The terms, e.g. `event=0x04,umask=0x03`.
    pub terms: String,
    pub scale: Option<f64>,
    pub unit: Option<String>,
}

/// One PMU as sysfs describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pmu {
    pub name: String,
    pub type_: u32,
    pub formats: Vec<FormatField>,
    pub aliases: Vec<Alias>,
    /// CPUs to count on for a PMU that counts per socket or die (uncore); `None` for a
    /// PMU that counts per task (the core PMU, software, tracepoints).
    pub cpumask: Option<Vec<u32>>,
}

/// A number in a term: hex with `0x`, else decimal.
pub fn parse_number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

impl Pmu {
    /// Reads one PMU directory. `Err` names the file that is missing or malformed.
    pub fn read(dir: &Path) -> Result<Pmu, PmuError> {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let type_path = dir.join("type");
        let type_text = fs::read_to_string(&type_path)
            .map_err(|e| PmuError(format!("{}: {e}", type_path.display())))?;
        let type_: u32 = type_text.trim().parse().map_err(|_| {
            PmuError(format!(
                "{}: expected a number, found `{}`",
                type_path.display(),
                type_text.trim()
            ))
        })?;
        let mut formats = Vec::new();
        for (fname, text) in files(&dir.join("format")) {
            formats.push(
                FormatField::parse(&fname, &text)
                    .map_err(|e| PmuError(format!("{}: {e}", dir.join("format").display())))?,
            );
        }
        let event_files = files(&dir.join("events"));
        let mut aliases = Vec::new();
        for (ename, text) in &event_files {
            if ename.contains('.') {
                continue; // .scale, .unit, .per-pkg, .snapshot
            }
            let extra = |suffix: &str| {
                event_files
                    .iter()
                    .find(|(n, _)| *n == format!("{ename}.{suffix}"))
                    .map(|(_, t)| t.trim().to_string())
            };
            aliases.push(Alias {
                name: ename.clone(),
                terms: text.trim().to_string(),
                scale: extra("scale").and_then(|s| s.parse().ok()),
                unit: extra("unit").filter(|u| !u.is_empty()),
            });
        }
        let cpumask = fs::read_to_string(dir.join("cpumask"))
            .ok()
            .and_then(|t| smtlab_model::CpuSet::parse_list(&t).ok())
            .map(|c| c.to_vec())
            .filter(|c| !c.is_empty());
        Ok(Pmu {
            name,
            type_,
            formats,
            aliases,
            cpumask,
        })
    }

    pub fn alias(&self, name: &str) -> Option<&Alias> {
        self.aliases
            .iter()
            .find(|a| a.name.eq_ignore_ascii_case(name))
    }

    pub fn format(&self, name: &str) -> Option<&FormatField> {
        self.formats.iter().find(|f| f.name == name)
    }

    /// Encodes perf-style terms (`event=0x3c,umask=0x1,cmask=1`, `cycles`,
    /// `config=0x1234`) through this PMU's format files. A term without a value is 1
    /// (`edge`, `any`), or the PMU's alias of that name. `Err` is one line naming the term.
    pub fn encode(&self, terms: &str) -> Result<EventEncoding, PmuError> {
        let mut words = [0u64; 3];
        self.encode_into(terms, &mut words, 0)?;
        Ok(EventEncoding {
            pmu: self.name.clone(),
            type_: self.type_,
            config: words[0],
            config1: words[1],
            config2: words[2],
        })
    }

    fn encode_into(&self, terms: &str, words: &mut [u64; 3], depth: u32) -> Result<(), PmuError> {
        for term in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (key, value) = match term.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (term, None),
            };
            if value.is_none()
                && self.format(key).is_none()
                && let Some(a) = self.alias(key)
                && depth == 0
            {
                self.encode_into(&a.terms, words, depth + 1)?;
                continue;
            }
            let value = match value {
                None => 1,
                Some("?") => {
                    return Err(PmuError(format!(
                        "term `{key}` of {} needs a value (the alias leaves it as `?`)",
                        self.name
                    )));
                }
                Some(v) => parse_number(v).ok_or_else(|| {
                    PmuError(format!(
                        "term `{term}`: expected a number (decimal or 0x hex)"
                    ))
                })?,
            };
            if let Some(word) = ConfigWord::parse(key)
                && self.format(key).is_none()
            {
                words[word as usize] = value;
                continue;
            }
            match self.format(key) {
                Some(f) => f.apply(value, words)?,
                None => {
                    let known: Vec<&str> = self.formats.iter().map(|f| f.name.as_str()).collect();
                    return Err(PmuError(format!(
                        "unknown term `{key}` for PMU {} (its format has: {})",
                        self.name,
                        if known.is_empty() {
                            "nothing".to_string()
                        } else {
                            known.join(", ")
                        }
                    )));
                }
            }
        }
        Ok(())
    }
}

/// `(name, content)` of the regular files in `dir`, sorted; empty when it is absent.
fn files(dir: &Path) -> Vec<(String, String)> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let text = fs::read_to_string(e.path()).ok()?;
            Some((name, text))
        })
        .collect();
    out.sort();
    out
}

/// The CPU's vendor, family and model (from `/proc/cpuinfo`), which pick the built-in
/// model-specific events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuId {
    pub vendor: Vendor,
    pub family: u32,
    pub model: u32,
}

smtlab_model::named_enum! {
    /// The CPU's vendor, named as [`CpuId`] prints it.
    pub enum Vendor {
        Intel = "Intel",
        Amd = "AMD",
        Other = "x86",
    }
}

impl CpuId {
    /// From the first processor block of `/proc/cpuinfo` text; `None` where it has no
    /// x86 vendor, family and model (other architectures).
    pub fn from_cpuinfo(text: &str) -> Option<CpuId> {
        let field = |key: &str| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        let vendor = match field("vendor_id")?.as_str() {
            "GenuineIntel" => Vendor::Intel,
            "AuthenticAMD" | "HygonGenuine" => Vendor::Amd,
            _ => Vendor::Other,
        };
        Some(CpuId {
            vendor,
            family: field("cpu family")?.parse().ok()?,
            model: field("model")?.parse().ok()?,
        })
    }
}

impl std::fmt::Display for CpuId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.vendor;
        write!(f, "{v} family {:#x} model {:#x}", self.family, self.model)
    }
}

/// Every PMU of a machine, and its CPU.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PmuTree {
    pub pmus: Vec<Pmu>,
    pub cpu: Option<CpuId>,
}

impl PmuTree {
    /// This machine's PMUs and CPU. A PMU directory that cannot be read is left out
    /// (perf does the same); no directory at all is an empty tree.
    pub fn system() -> PmuTree {
        let cpu = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| CpuId::from_cpuinfo(&t));
        PmuTree::read(Path::new(SYSFS_PMUS), cpu)
    }

    /// The PMUs under `devices` (a saved tree in tests).
    pub fn read(devices: &Path, cpu: Option<CpuId>) -> PmuTree {
        let mut pmus: Vec<Pmu> = fs::read_dir(devices)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| Pmu::read(&e.path()).ok())
                    .collect()
            })
            .unwrap_or_default();
        pmus.sort_by(|a, b| a.name.cmp(&b.name));
        PmuTree { pmus, cpu }
    }

    pub fn pmu(&self, name: &str) -> Option<&Pmu> {
        self.pmus.iter().find(|p| p.name == name)
    }

    /// `name` itself, or else every numbered instance `name_0`, `name_1`, ... (perf's
    /// uncore wildcard: `uncore_imc/cas_count_read/` counts every memory channel).
    pub fn instances(&self, name: &str) -> Vec<&Pmu> {
        if let Some(p) = self.pmu(name) {
            return vec![p];
        }
        let prefix = format!("{name}_");
        self.pmus
            .iter()
            .filter(|p| {
                p.name
                    .strip_prefix(&prefix)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .collect()
    }

    /// The core PMUs, big cores first (`cpu`; `cpu_core` then `cpu_atom` on hybrid
    /// parts, whose small cores lack `slots` and the model table's encodings).
    pub fn core_pmus(&self) -> Vec<&Pmu> {
        ["cpu", "cpu_core", "cpu_atom"]
            .iter()
            .filter_map(|n| self.pmu(n))
            .collect()
    }
}

/// A PMU file or an event's terms that cannot be read or encoded; the text names the
/// file or the term and what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct PmuError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    fn pmu(formats: &[(&str, &str)]) -> Pmu {
        Pmu {
            name: "cpu".into(),
            type_: 4,
            formats: formats
                .iter()
                .map(|(n, t)| FormatField::parse(n, t).unwrap())
                .collect(),
            aliases: vec![Alias {
                name: "cycles".into(),
                terms: "event=0x3c".into(),
                scale: None,
                unit: None,
            }],
            cpumask: None,
        }
    }

    #[test]
    fn split_ranges_take_the_low_bits_first() {
        let p = pmu(&[("event", "config:0-7,32-35"), ("umask", "config:8-15")]);
        // AMD PMCx1A0 umask 0x1: 0xa0 in bits 0-7, 0x1 in bits 32-35.
        let e = p.encode("event=0x1a0,umask=0x1").unwrap();
        assert_eq!(e.config, 0x1_0000_01a0);
        assert!(
            p.encode("event=0x1000")
                .unwrap_err()
                .0
                .contains("does not fit its 12 bits")
        );
    }

    #[test]
    fn bare_terms_are_one_or_an_alias() {
        let p = pmu(&[
            ("event", "config:0-7"),
            ("umask", "config:8-15"),
            ("edge", "config:18"),
            ("cmask", "config:24-31"),
            ("ldlat", "config1:0-15"),
        ]);
        let e = p
            .encode("event=0xc3,umask=0x01,edge,cmask=1,ldlat=3")
            .unwrap();
        assert_eq!(e.config, 0x0104_01c3);
        assert_eq!(e.config1, 3);
        assert_eq!(p.encode("cycles").unwrap().config, 0x3c);
        assert_eq!(p.encode("config=0x1234").unwrap().config, 0x1234);
        let err = p.encode("event=0x3c,foo=1").unwrap_err().0;
        assert!(
            err.contains("unknown term `foo`") && err.contains("umask"),
            "{err}"
        );
        assert!(
            p.encode("event=zz")
                .unwrap_err()
                .0
                .contains("expected a number")
        );
        assert!(p.encode("event=?").unwrap_err().0.contains("needs a value"));
    }

    #[test]
    fn hybrid_parts_list_the_big_cores_first() {
        let mut atom = pmu(&[]);
        atom.name = "cpu_atom".into();
        let mut core = pmu(&[]);
        core.name = "cpu_core".into();
        let tree = PmuTree {
            pmus: vec![atom, core],
            cpu: None,
        };
        let names: Vec<&str> = tree.core_pmus().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["cpu_core", "cpu_atom"]);
    }

    #[test]
    fn cpuinfo() {
        let id =
            CpuId::from_cpuinfo("vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n")
                .unwrap();
        assert_eq!(id.vendor, Vendor::Amd);
        assert_eq!((id.family, id.model), (0x19, 0x11));
        assert_eq!(id.to_string(), "AMD family 0x19 model 0x11");
    }
}
