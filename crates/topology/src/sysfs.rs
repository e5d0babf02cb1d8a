//! Reading single sysfs and procfs files.
//!
//! Two kinds of reads: *structural* ones (CPU lists, masks, the `online` files) whose
//! garbage becomes a [`TopologyError`] naming the file, and *informational* ones (ids,
//! sizes, frequencies) that yield `None` when a value is missing or unreadable, as
//! hwloc does, so that one odd attribute never hides the whole topology.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use smtlab_model::CpuSet;

use crate::TopologyError;

/// Sysfs attributes are at most a page; the margin covers masks of huge NR_CPUS kernels
/// while keeping a stray multi-gigabyte file in a saved tree from being slurped.
pub(crate) const SYSFS_LIMIT: u64 = 1 << 20;

/// /proc/cpuinfo grows with the CPU count (about 1.5 KiB per CPU on x86).
pub(crate) const CPUINFO_LIMIT: u64 = 64 << 20;

/// Reads `path` as text (invalid UTF-8 replaced), or `None` when it does not exist.
///
/// Only regular files are read. The open does not block, so a FIFO or a device left in a
/// saved tree (or planted there) is refused instead of hanging the discovery on a
/// writer that never comes.
pub(crate) fn read_opt(path: &Path, limit: u64) -> Result<Option<String>, TopologyError> {
    let opened = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    let io = |error| TopologyError::Io {
        path: path.to_path_buf(),
        error,
    };
    let file = match opened {
        Ok(f) => f,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let file_type = file.metadata().map_err(io)?.file_type();
    if !file_type.is_file() {
        return Err(TopologyError::Invalid {
            path: path.to_path_buf(),
            reason: format!(
                "is a {}, not a regular file (expected a sysfs or procfs attribute)",
                describe(file_type)
            ),
        });
    }
    let mut bytes = Vec::new();
    match file.take(limit).read_to_end(&mut bytes) {
        Ok(_) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if is_absent(&e) => Ok(None),
        Err(e) => Err(io(e)),
    }
}

fn describe(t: fs::FileType) -> &'static str {
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() || t.is_block_device() {
        "device"
    } else {
        "special file"
    }
}

/// Like [`read_opt`] for values that only inform: any failure is "not known".
pub(crate) fn read_info(path: &Path) -> Option<String> {
    read_opt(path, SYSFS_LIMIT).ok().flatten()
}

/// The trimmed content of an informational file, `None` when absent or blank.
pub(crate) fn read_trimmed(path: &Path) -> Option<String> {
    let s = read_info(path)?;
    let t = trim(&s);
    (!t.is_empty()).then(|| t.to_owned())
}

fn is_absent(e: &io::Error) -> bool {
    // A file standing where a directory was expected (ENOTDIR) says the same as a
    // missing file in a saved tree.
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// Strips what sysfs puts around a value: whitespace and NUL padding.
pub(crate) fn trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\0')
}

/// Reads a decimal integer attribute such as `core_id`; `None` if absent or not a number.
pub(crate) fn read_i64(path: &Path) -> Option<i64> {
    trim(&read_info(path)?).parse().ok()
}

/// Reads an unsigned attribute, accepting `0x` hex as the kernel prints some registers.
pub(crate) fn read_u64(path: &Path) -> Option<u64> {
    parse_u64(trim(&read_info(path)?))
}

pub(crate) fn parse_u64(t: &str) -> Option<u64> {
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// An OS index (`physical_package_id`, `core_id`, `die_id`, ...): negative values are
/// the kernel's "unknown".
pub(crate) fn read_id(path: &Path) -> Option<u32> {
    read_i64(path).and_then(|v| u32::try_from(v).ok())
}

/// Reads a CPU set from `dir/list_name` (list form) or, when that file is missing as on
/// old kernels, from `dir/mask_name` (hex mask form). `None` when neither exists.
pub(crate) fn read_cpuset(
    dir: &Path,
    list_name: &str,
    mask_name: &str,
) -> Result<Option<CpuSet>, TopologyError> {
    if let Some(set) = read_list(&dir.join(list_name))? {
        return Ok(Some(set));
    }
    let mask_path = dir.join(mask_name);
    let text = read_opt(&mask_path, SYSFS_LIMIT)?;
    text.map(|t| parse_set(&mask_path, &t, CpuSet::parse_mask))
        .transpose()
}

/// Reads a file that holds a CPU list (`cpu/online`, `cpu_core/cpus`).
pub(crate) fn read_list(path: &Path) -> Result<Option<CpuSet>, TopologyError> {
    let text = read_opt(path, SYSFS_LIMIT)?;
    text.map(|t| parse_set(path, &t, CpuSet::parse_list))
        .transpose()
}

fn parse_set(
    path: &Path,
    text: &str,
    parse: fn(&str) -> Result<CpuSet, smtlab_model::CpuListError>,
) -> Result<CpuSet, TopologyError> {
    // An empty file is an empty set in either form (a mask file of an unpopulated
    // node on some kernels); the mask parser alone would call it malformed.
    if trim(text).is_empty() {
        return Ok(CpuSet::new());
    }
    parse(text).map_err(|e| TopologyError::Invalid {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// `N` of a directory entry named `{prefix}N` (`cpu3`, `index2`, `node1`): digits only.
pub(crate) fn numbered(name: &std::ffi::OsStr, prefix: &str) -> Option<u32> {
    let digits = name.to_str()?.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Parses a cache size as sysfs writes it (`32K`, `8192K`) and as some architectures or
/// hand-made trees do (`1M`, `2G`, a bare number of KiB as hwloc assumes).
pub(crate) fn parse_size_bytes(s: &str) -> Option<u64> {
    let t = trim(s);
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits_end == 0 {
        return None;
    }
    let n: u64 = t[..digits_end].parse().ok()?;
    let unit = t[digits_end..].trim();
    let shift = match unit {
        "" | "K" | "k" | "KB" | "kB" | "KiB" => 10,
        "M" | "MB" | "MiB" => 20,
        "G" | "GB" | "GiB" => 30,
        "B" => 0,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_in_every_spelling() {
        assert_eq!(parse_size_bytes("32K\n"), Some(32 << 10));
        assert_eq!(parse_size_bytes("8192K"), Some(8 << 20));
        assert_eq!(parse_size_bytes("1M"), Some(1 << 20));
        assert_eq!(parse_size_bytes("2G"), Some(2 << 30));
        assert_eq!(parse_size_bytes("48\0\0"), Some(48 << 10));
        assert_eq!(parse_size_bytes("64 KiB"), Some(64 << 10));
        for bad in ["", "K", "12Q", "-4K", "99999999999999999999K"] {
            assert_eq!(parse_size_bytes(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn numbers_accept_hex_and_reject_garbage() {
        assert_eq!(parse_u64("0x00000000410fd851"), Some(0x410f_d851));
        assert_eq!(parse_u64("1024"), Some(1024));
        assert_eq!(parse_u64("ten"), None);
    }

    #[test]
    fn cpusets_prefer_the_list_file_and_name_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("core_cpus"), "00000003\n").unwrap();
        let set = read_cpuset(dir.path(), "core_cpus_list", "core_cpus")
            .unwrap()
            .unwrap();
        assert_eq!(set.to_vec(), vec![0, 1]);
        std::fs::write(dir.path().join("core_cpus_list"), "4-5\0\0").unwrap();
        let set = read_cpuset(dir.path(), "core_cpus_list", "core_cpus")
            .unwrap()
            .unwrap();
        assert_eq!(set.to_vec(), vec![4, 5]);
        std::fs::write(dir.path().join("core_cpus_list"), "banana").unwrap();
        let err = read_cpuset(dir.path(), "core_cpus_list", "core_cpus").unwrap_err();
        assert!(err.to_string().contains("core_cpus_list"), "{err}");
        assert!(
            read_cpuset(dir.path(), "nope_list", "nope")
                .unwrap()
                .is_none()
        );
    }
}
