//! Replaying a load file's operations on POSIX calls, one client in its own directory.
//!
//! | operation | call |
//! |---|---|
//! | `NTCreateX` | `open(O_RDWR)`; disposition create/open-if add `O_CREAT`, overwrite and supersede `O_CREAT|O_TRUNC`; the directory option `mkdir` + `open(O_DIRECTORY)` |
//! | `Close` | `close` |
//! | `ReadX`, `WriteX` | `pread`, `pwrite` of the given size at the given offset |
//! | `Unlink`, `Rename`, `Mkdir`, `Rmdir` | `unlink`, `rename`, `mkdir`, `rmdir` |
//! | `Deltree` | recursive removal |
//! | `QUERY_PATH_INFORMATION` | `stat` |
//! | `QUERY_FILE_INFORMATION` | `fstat` |
//! | `QUERY_FS_INFORMATION` | `statvfs` of the client's directory |
//! | `SET_FILE_INFORMATION` | `futimens` (modification time now) |
//! | `FIND_FIRST` | read the pattern's directory (up to the max count) and match names |
//! | `Flush` | `fsync` |
//! | `LockX`, `UnlockX` | `fcntl(F_SETLK)` byte-range write lock and unlock |
//!
//! Handles are the load file's numbers, mapped per client to open files. An operation
//! whose outcome (success or failure) differs from the recorded NTSTATUS is counted as a
//! status mismatch, and the first one is kept for the report; the replay goes on, as
//! dbench's does for most operations. Bytes are counted as dbench counts them: the
//! requested size of every `ReadX` and `WriteX`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::load::{KINDS, Line, LoadFile, Op};

/// What a client did over one stretch of load.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub ops: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Operations whose outcome differed from the recorded status.
    pub mismatches: u64,
    pub first_mismatch: Option<String>,
    /// Operations the recording had succeed that failed here (a full disk, a lost
    /// permission): failed work, which no figure may hide.
    pub failures: u64,
    /// The first of them, with the system's reason.
    pub first_failure: Option<String>,
    /// Times the client reached the end of the load and started again.
    pub wraps: u64,
    /// Latencies in nanoseconds per operation kind (index of [`KINDS`]).
    pub latency_ns: Vec<Vec<f64>>,
}

impl Stats {
    pub fn new() -> Stats {
        Stats {
            latency_ns: vec![Vec::new(); KINDS.len()],
            ..Stats::default()
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes_read + self.bytes_written
    }

    pub fn merge(&mut self, other: Stats) {
        self.ops += other.ops;
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.mismatches += other.mismatches;
        self.first_mismatch = self.first_mismatch.take().or(other.first_mismatch);
        self.failures += other.failures;
        self.first_failure = self.first_failure.take().or(other.first_failure);
        self.wraps += other.wraps;
        for (mine, mut theirs) in self.latency_ns.iter_mut().zip(other.latency_ns) {
            mine.append(&mut theirs);
        }
    }
}

/// One dbench client: its directory, its open handles and its place in the load.
pub struct Client {
    root: PathBuf,
    handles: HashMap<u32, File>,
    position: usize,
    buf: Vec<u8>,
}

impl Client {
    pub fn new(root: PathBuf) -> Client {
        Client {
            root,
            handles: HashMap::new(),
            position: 0,
            buf: Vec::new(),
        }
    }

    /// The client's path for a load-file path (`\a\b` under the client's directory);
    /// `.` and `..` are dropped so nothing resolves outside it.
    pub fn local(&self, path: &str) -> PathBuf {
        let mut p = self.root.clone();
        for part in path.split(['\\', '/']) {
            if !part.is_empty() && part != "." && part != ".." {
                p.push(part);
            }
        }
        p
    }

    /// Replays operations until `now()` passes `end_ns` (checked between operations).
    pub fn run_until(
        &mut self,
        load: &LoadFile,
        end_ns: u64,
        now: &dyn Fn() -> u64,
        stats: &mut Stats,
    ) {
        loop {
            let t0 = now();
            if t0 >= end_ns {
                return;
            }
            self.step(load, stats, now, t0);
        }
    }

    fn step(&mut self, load: &LoadFile, stats: &mut Stats, now: &dyn Fn() -> u64, t0: u64) {
        let line = &load.lines[self.position];
        // errno cleared before and read right after, so a failure names its own cause
        // (a missing handle sets none).
        // SAFETY: errno is this thread's own variable.
        unsafe { *libc::__errno_location() = 0 };
        let ok = self.exec(line, stats);
        let errno = std::io::Error::last_os_error();
        stats.latency_ns[line.op.kind()].push(now().saturating_sub(t0) as f64);
        stats.ops += 1;
        if line.expect_ok && !ok {
            stats.failures += 1;
            if stats.first_failure.is_none() {
                let why = match errno.raw_os_error() {
                    Some(0) | None => String::new(),
                    Some(_) => format!(": {errno}"),
                };
                stats.first_failure = Some(format!(
                    "{}:{}: {} failed{why}",
                    load.name,
                    line.number,
                    KINDS[line.op.kind()],
                ));
            }
        }
        if ok != line.expect_ok {
            stats.mismatches += 1;
            if stats.first_mismatch.is_none() {
                let said = |ok: bool| if ok { "succeeded" } else { "failed" };
                stats.first_mismatch = Some(format!(
                    "{}:{}: {} {} where the recording {}",
                    load.name,
                    line.number,
                    KINDS[line.op.kind()],
                    said(ok),
                    said(line.expect_ok)
                ));
            }
        }
        self.position += 1;
        if self.position == load.lines.len() {
            self.position = 0;
            self.handles.clear();
            stats.wraps += 1;
        }
    }

    fn file(&self, handle: u32) -> Option<&File> {
        self.handles.get(&handle)
    }

    /// Runs one operation; returns whether it succeeded.
    fn exec(&mut self, line: &Line, stats: &mut Stats) -> bool {
        match &line.op {
            Op::NtCreateX {
                path,
                options,
                disposition,
                handle,
            } => {
                let p = self.local(path);
                let opened = open(&p, *options, *disposition);
                match opened {
                    Some(f) if line.expect_ok => {
                        self.handles.insert(*handle, f);
                        true
                    }
                    // A file the recording could not open is closed again at once.
                    Some(_) => true,
                    None => false,
                }
            }
            Op::Close { handle } => self.handles.remove(handle).is_some(),
            Op::ReadX(t) | Op::WriteX(t) => {
                let write = matches!(line.op, Op::WriteX(_));
                let size = t.size as usize;
                if self.buf.len() < size {
                    self.buf.resize(size, 0);
                }
                if write {
                    stats.bytes_written += size as u64;
                } else {
                    stats.bytes_read += size as u64;
                }
                let Some(f) = self.handles.get(&t.handle) else {
                    return false;
                };
                let buf = &mut self.buf[..size];
                if write {
                    f.write_all_at(buf, t.offset).is_ok()
                } else {
                    f.read_at(buf, t.offset).is_ok()
                }
            }
            Op::Unlink { path } => std::fs::remove_file(self.local(path)).is_ok(),
            Op::Rename { from, to } => std::fs::rename(self.local(from), self.local(to)).is_ok(),
            Op::Mkdir { path } => {
                let p = self.local(path);
                std::fs::create_dir(&p).is_ok() || p.is_dir()
            }
            Op::Rmdir { path } => std::fs::remove_dir(self.local(path)).is_ok(),
            Op::Deltree { path } => {
                let p = self.local(path);
                match std::fs::remove_dir_all(&p) {
                    Ok(()) => true,
                    Err(e) => e.kind() == std::io::ErrorKind::NotFound,
                }
            }
            Op::QueryPath { path } => std::fs::metadata(self.local(path)).is_ok(),
            Op::QueryFile { handle } => self.file(*handle).is_some_and(|f| f.metadata().is_ok()),
            Op::QueryFs => statvfs(&self.root),
            Op::SetFileInfo { handle } => self
                .file(*handle)
                .is_some_and(|f| f.set_modified(std::time::SystemTime::now()).is_ok()),
            Op::FindFirst { pattern, max, .. } => self.find_first(pattern, *max),
            Op::Flush { handle } => self.file(*handle).is_some_and(|f| f.sync_all().is_ok()),
            Op::LockX(r) => self
                .file(r.handle)
                .is_some_and(|f| lock(f, libc::F_WRLCK, r.offset, r.size)),
            Op::UnlockX(r) => self
                .file(r.handle)
                .is_some_and(|f| lock(f, libc::F_UNLCK, r.offset, r.size)),
        }
    }

    fn find_first(&self, pattern: &str, max: u32) -> bool {
        let p = self.local(pattern);
        let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else {
            return false;
        };
        let name = name.to_string_lossy().to_lowercase();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        let mut found = false;
        for e in entries.take(max.max(1) as usize).flatten() {
            if glob(&name, &e.file_name().to_string_lossy().to_lowercase()) {
                found = true;
            }
        }
        found
    }
}

fn open(p: &Path, options: u32, disposition: u32) -> Option<File> {
    const DIRECTORY: u32 = 0x1;
    let creates = matches!(disposition, 0 | 2 | 3 | 5);
    if options & DIRECTORY != 0 {
        if creates {
            let _ = std::fs::create_dir(p);
        }
        return open_dir(p);
    }
    let mut o = OpenOptions::new();
    o.read(true).write(true).mode(0o600);
    match disposition {
        2 | 3 => {
            o.create(true);
        }
        0 | 5 => {
            o.create(true).truncate(true);
        }
        4 => {
            o.truncate(true);
        }
        _ => {}
    }
    match o.open(p) {
        Ok(f) => Some(f),
        Err(e) if e.raw_os_error() == Some(libc::EISDIR) => open_dir(p),
        Err(_) => None,
    }
}

fn open_dir(p: &Path) -> Option<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(p)
        .ok()
}

fn statvfs(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string and an out-struct of the right type.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        libc::statvfs(c.as_ptr(), &mut st) == 0
    }
}

fn lock(f: &File, kind: i32, offset: u64, size: u64) -> bool {
    // SAFETY: fcntl with a zeroed, filled flock struct on a descriptor we own.
    unsafe {
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = kind as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = offset as libc::off_t;
        fl.l_len = size as libc::off_t;
        libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) == 0
    }
}

/// Case-folded DOS wildcard match: `*` and `<` any run, `?` and `>` one character,
/// `"` a dot.
pub fn glob(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern
        .chars()
        .map(|c| match c {
            '<' => '*',
            '>' => '?',
            '"' => '.',
            c => c,
        })
        .collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dbench::load::parse;
    use smtlab_bench::clock::now_ns;

    impl Client {
        /// Replays exactly `n` operations.
        fn run_ops(&mut self, load: &LoadFile, n: usize, now: &dyn Fn() -> u64, stats: &mut Stats) {
            for _ in 0..n {
                let t0 = now();
                self.step(load, stats, now, t0);
            }
        }
    }

    #[test]
    fn wildcards() {
        assert!(glob("*", "x"));
        assert!(glob("filler.*", "filler.000"));
        assert!(!glob("filler.*", "other"));
        assert!(glob("a?c", "abc"));
        assert!(glob("<.jnk", "x.jnk"));
    }

    #[test]
    fn replay_respects_statuses_and_counts_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"
Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 1 NT_STATUS_OK
Close 1 NT_STATUS_OK
NTCreateX "\clients\client1\missing" 0x40 0x1 2 NT_STATUS_OBJECT_NAME_NOT_FOUND
NTCreateX "\clients\client1\f" 0x40 0x5 3 NT_STATUS_OK
WriteX 3 0 1000 1000 NT_STATUS_OK
ReadX 3 0 500 500 NT_STATUS_OK
LockX 3 0 1 NT_STATUS_OK
UnlockX 3 0 1 NT_STATUS_OK
QUERY_FILE_INFORMATION 3 1005 NT_STATUS_OK
SET_FILE_INFORMATION 3 1004 NT_STATUS_OK
Flush 3 NT_STATUS_OK
Close 3 NT_STATUS_OK
FIND_FIRST "\clients\client1\F*" 260 10 1 NT_STATUS_OK
FIND_FIRST "\clients\client1\zz*" 260 10 0 NT_STATUS_NO_SUCH_FILE
QUERY_PATH_INFORMATION "\clients\client1\f" 1004 NT_STATUS_OK
QUERY_FS_INFORMATION 1 NT_STATUS_OK
Rename "\clients\client1\f" "\clients\client1\g" NT_STATUS_OK
Unlink "\clients\client1\f" 0x6 NT_STATUS_OBJECT_NAME_NOT_FOUND
Unlink "\clients\client1\g" 0x6 NT_STATUS_OK
"#;
        let load = parse("t", text).unwrap();
        let mut c = Client::new(dir.path().join("c0"));
        std::fs::create_dir(dir.path().join("c0")).unwrap();
        let mut stats = Stats::new();
        c.run_ops(&load, load.lines.len(), &now_ns, &mut stats);
        assert_eq!(stats.first_mismatch, None);
        assert_eq!(stats.mismatches, 0);
        assert_eq!(stats.bytes_written, 1000);
        assert_eq!(stats.bytes_read, 500);
        assert_eq!(stats.ops, load.lines.len() as u64);
        assert_eq!(stats.wraps, 1);
        // A status the replay does not reproduce is counted and named.
        let bad = parse("bad.txt", "Unlink \"\\nothere\" 0x6 NT_STATUS_OK\n").unwrap();
        let mut stats = Stats::new();
        c.run_ops(&bad, 1, &now_ns, &mut stats);
        assert_eq!(stats.mismatches, 1);
        assert!(
            stats
                .first_mismatch
                .unwrap()
                .starts_with("bad.txt:1: Unlink failed")
        );
    }

    #[test]
    fn paths_stay_inside_the_client_directory() {
        let c = Client::new(PathBuf::from("/r/c0"));
        assert_eq!(c.local(r"\a\..\..\b"), PathBuf::from("/r/c0/a/b"));
    }
}
