//! Where the CPU files live, and reading and writing them with errors that name the file.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{ControlError, write_error};

/// Most bytes read of one attribute: sysfs files are at most a page; the margin covers
/// huge CPU masks, and a stray big file in a saved tree is not slurped.
pub const READ_LIMIT: u64 = 1 << 20;

/// A sysfs root: `/` for this machine, or a directory holding a fake or saved tree
/// (`DIR/sys/devices/system/cpu/...`).
#[derive(Debug, Clone)]
pub struct Sysfs {
    root: PathBuf,
    /// Effective user id, to tell "not root" from other refusals; tests set it.
    euid: u32,
    /// Whether writes need root (this machine's sysfs; not a fake tree).
    root_required: bool,
    /// A fake machine's kernel, which writes go through ([`Sysfs::emulating_kernel`]).
    writer: Option<Writer>,
}

/// A write of `value` to `path` in the tree, with whatever it does besides.
pub(crate) type Writer = fn(&Sysfs, &Path, &str) -> io::Result<()>;

impl Sysfs {
    /// This machine.
    pub fn system() -> Self {
        Sysfs {
            root_required: true,
            ..Self::at("/")
        }
    }

    /// The tree under `root`.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Sysfs {
            root: root.into(),
            // SAFETY: geteuid has no preconditions and cannot fail.
            euid: unsafe { libc::geteuid() },
            root_required: false,
            writer: None,
        }
    }

    /// The same tree with each write going through `writer`.
    pub(crate) fn writing_with(mut self, writer: Writer) -> Self {
        self.writer = Some(writer);
        self
    }

    /// The same tree as seen by user `euid` (tests of the not-root path).
    pub fn as_user(mut self, euid: u32) -> Self {
        self.euid = euid;
        self.root_required = true;
        self
    }

    /// Refuses before any write when the writes need root and we are not.
    pub fn check_root(&self, what: &str, path: &Path) -> Result<(), ControlError> {
        if self.root_required && self.euid != 0 {
            return Err(ControlError::NotRoot {
                what: what.to_string(),
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn euid(&self) -> u32 {
        self.euid
    }

    pub fn cpu_dir(&self) -> PathBuf {
        self.root.join("sys/devices/system/cpu")
    }

    pub fn control_path(&self) -> PathBuf {
        self.cpu_dir().join("smt/control")
    }

    pub fn active_path(&self) -> PathBuf {
        self.cpu_dir().join("smt/active")
    }

    pub fn online_path(&self, cpu: u32) -> PathBuf {
        self.cpu_dir().join(format!("cpu{cpu}/online"))
    }

    /// The file's content without surrounding whitespace and NULs; `None` if it does not
    /// exist. Only regular files are read, without blocking (a FIFO in a saved tree is
    /// refused, not waited on), and at most [`READ_LIMIT`] bytes of them.
    pub fn read(&self, path: &Path) -> Result<Option<String>, ControlError> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let read_err = |error| ControlError::Read {
            path: path.to_path_buf(),
            error,
        };
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(read_err(source)),
        };
        if !file.metadata().map_err(read_err)?.is_file() {
            return Err(ControlError::Parse {
                path: path.to_path_buf(),
                reason: "is not a regular file (expected a sysfs attribute)".into(),
            });
        }
        let mut bytes = Vec::new();
        file.take(READ_LIMIT)
            .read_to_end(&mut bytes)
            .map_err(read_err)?;
        let s = String::from_utf8_lossy(&bytes);
        Ok(Some(
            s.trim_matches(|c: char| c.is_whitespace() || c == '\0')
                .to_string(),
        ))
    }

    /// Writes `value` the way `echo value > path` does (one write of the whole value).
    /// `what` says what the write is for, in errors.
    pub fn write(&self, what: &str, path: &Path, value: &str) -> Result<(), ControlError> {
        let result = match self.writer {
            Some(writer) => writer(self, path, value),
            None => write_file(path, value),
        };
        result.map_err(|e| write_error(what, path.to_path_buf(), value, e, self.euid))
    }

    /// The CPU numbers of the `cpuN` directories, ascending.
    pub fn cpu_numbers(&self) -> Result<Vec<u32>, ControlError> {
        let dir = self.cpu_dir();
        let entries = std::fs::read_dir(&dir).map_err(|error| ControlError::Read {
            path: dir.clone(),
            error,
        })?;
        let mut cpus: Vec<u32> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name();
                let n = name.to_str()?.strip_prefix("cpu")?;
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                n.parse().ok()
            })
            .collect();
        cpus.sort_unstable();
        Ok(cpus)
    }
}

/// Writes `value` to the file alone, in one write of the whole value.
pub(crate) fn write_file(path: &Path, value: &str) -> io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?
        .write_all(value.as_bytes())
}
