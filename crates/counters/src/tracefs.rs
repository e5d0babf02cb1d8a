//! Finding tracefs and reading tracepoint ids and field offsets from it.
//!
//! tracefs is normally at /sys/kernel/tracing; older setups only have it under
//! debugfs at /sys/kernel/debug/tracing. Where it is mounted is read from
//! /proc/self/mounts first, so a non-standard mount point works too.

use std::path::{Path, PathBuf};

/// The tracefs directories tried, in order, after the mount table.
const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Why tracefs or a tracepoint in it cannot be read; each message is one line. The I/O
/// and parse errors are part of the messages, not `source`s, so they print once.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TracefsError {
    #[error("tracefs at {} is not readable: permission denied; run as root", .dir.display())]
    NotReadable { dir: PathBuf },
    #[error(
        "tracefs is not mounted (no events/ under {}); as root: `mount -t tracefs nodev /sys/kernel/tracing`",
        CANDIDATES.join(" or ")
    )]
    NotMounted,
    #[error("cannot read {}: {error}", .path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a number: {error}", .path.display())]
    NotANumber {
        path: PathBuf,
        error: std::num::ParseIntError,
    },
}

/// The directory holding `events/`, or a one-line reason why there is none.
pub(crate) fn find_tracefs() -> Result<PathBuf, TracefsError> {
    let mut tried: Vec<PathBuf> = Vec::new();
    if let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") {
        for line in mounts.lines() {
            let mut f = line.split_whitespace();
            let (_, Some(dir), Some(fstype)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if fstype == "tracefs" {
                tried.push(PathBuf::from(dir));
            }
        }
    }
    tried.extend(CANDIDATES.iter().map(PathBuf::from));
    for dir in &tried {
        match std::fs::metadata(dir.join("events")) {
            Ok(m) if m.is_dir() => return Ok(dir.clone()),
            // tracefs is root-only (mode 0700): it is there, we may not look.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(TracefsError::NotReadable { dir: dir.clone() });
            }
            _ => {}
        }
    }
    Err(TracefsError::NotMounted)
}

/// A tracepoint's id and the byte offsets of named fields in its raw record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tracepoint {
    pub id: u64,
    /// `(field name, offset, size)` from the `format` file.
    pub fields: Vec<(String, usize, usize)>,
}

impl Tracepoint {
    pub fn field(&self, name: &str) -> Option<(usize, usize)> {
        self.fields
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|&(_, o, s)| (o, s))
    }
}

/// Reads `events/<system>/<name>/{id,format}` under `root`.
pub(crate) fn tracepoint(
    root: &Path,
    system: &str,
    name: &str,
) -> Result<Tracepoint, TracefsError> {
    let dir = root.join("events").join(system).join(name);
    let read = |file: &str| {
        let path = dir.join(file);
        std::fs::read_to_string(&path).map_err(|error| TracefsError::Read { path, error })
    };
    let id = read("id")?
        .trim()
        .parse::<u64>()
        .map_err(|error| TracefsError::NotANumber {
            path: dir.join("id"),
            error,
        })?;
    Ok(Tracepoint {
        id,
        fields: parse_format(&read("format")?),
    })
}

/// Parses `field:long id;\toffset:8;\tsize:8;\tsigned:1;` lines.
pub(crate) fn parse_format(text: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = rest.split(';').map(str::trim);
        let Some(decl) = parts.next() else { continue };
        // The name is the last word of the declaration, without any array suffix.
        let Some(name) = decl.split_whitespace().last() else {
            continue;
        };
        let name = name.split('[').next().unwrap_or(name).to_string();
        let mut offset = None;
        let mut size = None;
        for p in parts {
            if let Some(v) = p.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = p.strip_prefix("size:") {
                size = v.parse().ok();
            }
        }
        if let (Some(o), Some(s)) = (offset, size) {
            out.push((name, o, s));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sys_enter_format() {
        let text = "name: sys_enter\nID: 443\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n";
        let tp = Tracepoint {
            id: 443,
            fields: parse_format(text),
        };
        assert_eq!(tp.field("common_type"), Some((0, 2)));
        assert_eq!(tp.field("id"), Some((8, 8)));
        assert_eq!(tp.field("args"), Some((16, 48)));
    }
}
