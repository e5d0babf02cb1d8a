//! AIM9's system rows: file creation, memory allocation, non-local gotos, signals,
//! process creation and loading, links, directory searches and lookups; operations per
//! second.
//!
//! | benchmark | AIM9 row | one operation |
//! |---|---|---|
//! | `aim-creat-clo` | creat-clo | `openat(O_CREAT\|O_TRUNC\|O_WRONLY)` + `close` of one of 16 names |
//! | `aim-page` | page_test | `mmap` of `pages` anonymous pages, a write to each, `munmap` |
//! | `aim-brk` | brk_test | `mmap` + `munmap` of `size` bytes, untouched |
//! | `aim-jmp` | jmp_test | an unwind from `depth` nested calls to the catching frame |
//! | `aim-signal` | signal_test | the `sig-handler` row of Table 1: SIGUSR1 sent to the thread itself and caught |
//! | `aim-exec` | exec_test | the `fork-exec` row: `fork` + `execve("/bin/true")` + `wait4` |
//! | `aim-fork` | fork_test | the `fork-exit` row: `fork` + `_exit` + `wait4` |
//! | `aim-link` | link_test | `linkat` of a file to a new name + `unlinkat` of that name |
//! | `aim-disk-src` | disk_src | a scan of a directory of `files` entries for one name |
//! | `aim-dir` | dir_rtns_1 | an `fstatat` lookup of one name in that directory |
//!
//! Where this departs from AIM9: `brk_test` moves the program break with `sbrk`; in
//! smtlab's multithreaded process the allocator of the other threads shares the break,
//! so moving it down could free their memory: the row maps and unmaps instead. AIM9's
//! `jmp_test` uses C's `setjmp`/`longjmp`, which Rust cannot call soundly (a function
//! that returns twice); the row unwinds instead (`resume_unwind`, which runs no panic
//! hook), a heavier goto: compare placements with it, not the paper's figure. The
//! signal, exec and fork rows are the os group's benchmarks, measured in their lean
//! child process as Table 1's rows are, counted as operations per second.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;

use smtlab_model::BenchInfo;

use super::disk::{Scratch, dir_param};
use super::{bad, check, info, io, param, timed};
use crate::os::last_os_error;
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample};

/// The system rows.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    let mut v = crate::boxed(Kind::ALL.map(|kind| Sys { kind }));
    v.extend(crate::boxed(OS_ROWS.map(|row| OsRow { row, lean: true })));
    v
}

smtlab_model::named_enum! {
    enum Kind {
        CreatClose = "aim-creat-clo",
        Page = "aim-page",
        Brk = "aim-brk",
        Jmp = "aim-jmp",
        Link = "aim-link",
        DirSearch = "aim-disk-src",
        DirLookup = "aim-dir",
    }
}

/// One system row measured here.
struct Sys {
    kind: Kind,
}

impl Benchmark for Sys {
    fn info(&self) -> BenchInfo {
        let dir_files = || {
            vec![
                param("files", "64", None, "entries in the directory"),
                dir_param(),
            ]
        };
        let (unit, row, what, params) = match self.kind {
            Kind::CreatClose => (
                "files/s",
                "creat-clo",
                "create (O_CREAT|O_TRUNC) and close one of 16 files in a private directory; \
                 creations and closes per second, every file checked present and empty",
                vec![dir_param()],
            ),
            Kind::Page => (
                "allocs/s",
                "page_test",
                "map `pages` anonymous pages, write to each (a page fault each), unmap; \
                 allocations per second, the values written read back",
                vec![param("pages", "4", None, "pages per allocation")],
            ),
            Kind::Brk => (
                "allocs/s",
                "brk_test",
                "a system memory allocation and release of `size` bytes (mmap and munmap, \
                 untouched: the program break is shared with the other threads' allocator); \
                 allocations per second",
                vec![param("size", "64KiB", None, "bytes per allocation")],
            ),
            Kind::Jmp => (
                "gotos/s",
                "jmp_test",
                "a non-local goto from `depth` nested calls back to the catching frame (Rust \
                 unwinding with resume_unwind, where AIM9 uses longjmp); gotos per second, \
                 each goto's value checked",
                vec![param("depth", "4", None, "nested calls the goto leaves")],
            ),
            Kind::Link => (
                "links/s",
                "link_test",
                "link a file to a new name and unlink that name; pairs per second, the \
                 file's link count checked",
                vec![dir_param()],
            ),
            Kind::DirSearch => (
                "searches/s",
                "disk_src",
                "read a directory of `files` entries until one name is found, the name \
                 changing each search; searches per second, each search checked to find its \
                 name",
                dir_files(),
            ),
            Kind::DirLookup => (
                "lookups/s",
                "dir_rtns_1",
                "look a name up in a directory of `files` entries (fstatat); directory \
                 operations per second, each file's size checked",
                dir_files(),
            ),
        };
        info(
            self.kind.name(),
            unit,
            row,
            &format!("AIM9 {row}: {what}."),
            params,
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let name = self.kind.name();
        let p = ctx.params;
        let declared = |k: &str| self.info().params.iter().any(|i| i.name == k);
        let scratch = declared("dir")
            .then(|| Scratch::in_dir_param(name, p))
            .transpose()?;
        let files = if declared("files") {
            p.get_u64_in("files", 1..=100_000, "1 to 100000")?
        } else {
            16
        };
        let dirfd = scratch.as_ref().map(|s| File::open(&s.0));
        let dirfd = dirfd
            .transpose()
            .map_err(|e| io(name, "open the directory", e))?;
        let names: Vec<CString> = (0..files)
            .map(|i| CString::new(format!("f{i}")).expect("no NUL"))
            .collect();
        // Files for the directory rows (file i holds i bytes) and the link row.
        if let Some(s) = &scratch {
            match self.kind {
                Kind::DirSearch | Kind::DirLookup => {
                    for i in 0..files {
                        std::fs::write(s.0.join(format!("f{i}")), vec![b'x'; i as usize % 512])
                            .map_err(|e| io(name, "create the directory's files", e))?;
                    }
                }
                Kind::Link => {
                    std::fs::write(s.0.join("file"), b"linked")
                        .map_err(|e| io(name, "create the file to link", e))?;
                }
                _ => {}
            }
        }
        let (pages, size, depth) = match self.kind {
            Kind::Page => (p.get_u64_in("pages", 1..=65_536, "1 to 65536")?, 0, 0),
            Kind::Brk => {
                let n = p.get_bytes("size")?;
                if !(1..=(1 << 30)).contains(&n) {
                    return Err(bad("size", p.get_str("size")?, "1 B to 1 GiB"));
                }
                (0, n, 0)
            }
            Kind::Jmp => (0, 0, p.get_u64_in("depth", 1..=1000, "1 to 1000")?),
            _ => (0, 0, 0),
        };
        // SAFETY: sysconf takes a constant and returns a value.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        Ok(Box::new(SysInstance {
            kind: self.kind,
            cpu: ctx.placement.cpu_for_thread(0),
            names,
            dirfd,
            pages,
            size,
            depth,
            page,
            _scratch: scratch,
        }))
    }
}

struct SysInstance {
    kind: Kind,
    cpu: Option<u32>,
    names: Vec<CString>,
    dirfd: Option<File>,
    pages: u64,
    size: u64,
    depth: u64,
    page: u64,
    _scratch: Option<Scratch>,
}

/// The unwinding goto's payload: which goto it is.
struct Goto(u64);

/// Calls itself `depth` times, then leaves all the frames at once with `value`.
#[inline(never)]
fn dive(depth: u64, value: u64) -> u64 {
    if depth == 0 {
        std::panic::resume_unwind(Box::new(Goto(value)));
    }
    // The addition after the call keeps each frame a real frame (no tail call).
    std::hint::black_box(dive(depth - 1, value)) + 1
}

impl SysInstance {
    fn dirfd(&self) -> libc::c_int {
        self.dirfd.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    /// Maps `bytes` anonymous bytes.
    fn map(name: &str, bytes: u64) -> Result<*mut u8, BenchError> {
        // SAFETY: a fresh private anonymous mapping at an address the kernel picks.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(last_os_error(name, "mmap"));
        }
        Ok(p.cast())
    }

    fn unmap(name: &str, p: *mut u8, bytes: u64) -> Result<(), BenchError> {
        // SAFETY: `p` is a mapping of `bytes` bytes made by `map` and not used after.
        if unsafe { libc::munmap(p.cast(), bytes as usize) } != 0 {
            return Err(last_os_error(name, "munmap"));
        }
        Ok(())
    }

    fn op(&self, i: u64) -> Result<f64, BenchError> {
        match self.kind {
            Kind::CreatClose => self.creat_close(i)?,
            Kind::Page => self.touch_pages()?,
            Kind::Brk => self.brk()?,
            Kind::Jmp => self.jmp(i)?,
            Kind::Link => self.link()?,
            Kind::DirSearch => self.dir_search(i)?,
            Kind::DirLookup => self.dir_lookup(i)?,
        }
        Ok(1.0)
    }

    /// Name `i` of the directory's, round the list.
    fn pick(&self, i: u64) -> &std::ffi::CString {
        &self.names[(i % self.names.len() as u64) as usize]
    }

    /// Creates (truncates) one of the names and closes it.
    fn creat_close(&self, i: u64) -> Result<(), BenchError> {
        let name = self.kind.name();
        let dirfd = self.dirfd();
        // SAFETY: a NUL-terminated name relative to our open directory.
        let fd = unsafe {
            libc::openat(
                dirfd,
                self.pick(i).as_ptr(),
                libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(last_os_error(name, "creat"));
        }
        // SAFETY: closing the descriptor just opened, used nowhere else.
        unsafe { libc::close(fd) };
        Ok(())
    }

    /// Maps pages, touches each once, reads them back and unmaps them.
    fn touch_pages(&self) -> Result<(), BenchError> {
        let name = self.kind.name();
        let bytes = self.pages * self.page;
        let p = Self::map(name, bytes)?;
        let mut sum = 0u64;
        for k in 0..self.pages {
            // SAFETY: `k * page` is inside the mapping of `pages` pages.
            unsafe {
                let at = p.add((k * self.page) as usize);
                std::ptr::write_volatile(at, (k + 1) as u8);
                sum += u64::from(std::ptr::read_volatile(at));
            }
        }
        Self::unmap(name, p, bytes)?;
        let want: u64 = (1..=self.pages).map(|k| k % 256).sum();
        if sum != want {
            return Err(check(name, format!("pages read back {sum}, wrote {want}")));
        }
        Ok(())
    }

    /// Maps and unmaps `size` bytes (what `brk` growth and shrink cost).
    fn brk(&self) -> Result<(), BenchError> {
        let name = self.kind.name();
        let p = Self::map(name, self.size)?;
        Self::unmap(name, std::hint::black_box(p), self.size)?;
        Ok(())
    }

    /// Unwinds `depth` frames at once, carrying `i` (a long jump).
    fn jmp(&self, i: u64) -> Result<(), BenchError> {
        let name = self.kind.name();
        let depth = std::hint::black_box(self.depth);
        let r = std::panic::catch_unwind(|| dive(depth, i));
        match r {
            Err(payload) => match payload.downcast::<Goto>() {
                Ok(g) if g.0 == i => {}
                Ok(g) => {
                    return Err(check(name, format!("goto {i} arrived as goto {}", g.0)));
                }
                Err(_) => return Err(check(name, "a foreign panic arrived")),
            },
            Ok(v) => return Err(check(name, format!("the dive returned {v}"))),
        }
        Ok(())
    }

    /// Links a name to the file and unlinks it.
    fn link(&self) -> Result<(), BenchError> {
        let name = self.kind.name();
        let dirfd = self.dirfd();
        let (file, link) = (c"file", c"link");
        // SAFETY: NUL-terminated names relative to our open directory.
        if unsafe { libc::linkat(dirfd, file.as_ptr(), dirfd, link.as_ptr(), 0) } != 0 {
            return Err(last_os_error(name, "link"));
        }
        // SAFETY: as above.
        if unsafe { libc::unlinkat(dirfd, link.as_ptr(), 0) } != 0 {
            return Err(last_os_error(name, "unlink"));
        }
        Ok(())
    }

    /// Reads the directory from its start until a name turns up.
    fn dir_search(&self, i: u64) -> Result<(), BenchError> {
        let name = self.kind.name();
        let dirfd = self.dirfd();
        let want = self.pick(i.wrapping_mul(7919)).to_bytes();
        // A fresh descriptor per search: reading the directory from its start.
        // SAFETY: "." relative to our open directory, a NUL-terminated name.
        let fd = unsafe { libc::openat(dirfd, c".".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
        if fd < 0 {
            return Err(last_os_error(name, "open the directory"));
        }
        // SAFETY: `fd` is an open directory descriptor; fdopendir takes it over.
        let d = unsafe { libc::fdopendir(fd) };
        if d.is_null() {
            // SAFETY: fdopendir failed, so `fd` is still ours to close.
            unsafe { libc::close(fd) };
            return Err(last_os_error(name, "fdopendir"));
        }
        let mut found = false;
        loop {
            // SAFETY: `d` is an open directory stream.
            let e = unsafe { libc::readdir(d) };
            if e.is_null() {
                break;
            }
            // SAFETY: readdir returns an entry with a NUL-terminated name, valid
            // until the next readdir on `d`.
            let n = unsafe { std::ffi::CStr::from_ptr((*e).d_name.as_ptr()) };
            if n.to_bytes() == want {
                found = true;
                break;
            }
        }
        // SAFETY: closing the stream opened above (and its descriptor).
        unsafe { libc::closedir(d) };
        if !found {
            return Err(check(
                name,
                format!(
                    "{} not found in the directory",
                    String::from_utf8_lossy(want)
                ),
            ));
        }
        Ok(())
    }

    /// Looks one name up and checks its size.
    fn dir_lookup(&self, i: u64) -> Result<(), BenchError> {
        let name = self.kind.name();
        let dirfd = self.dirfd();
        let k = i % self.names.len() as u64;
        // SAFETY: stat is plain data; all zeroes is valid.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated name relative to our directory; `st` ours.
        if unsafe { libc::fstatat(dirfd, self.pick(k).as_ptr(), &mut st, 0) } != 0 {
            return Err(last_os_error(name, "fstatat"));
        }
        if st.st_size as u64 != k % 512 {
            return Err(check(
                name,
                format!("f{k} has {} bytes, expected {}", st.st_size, k % 512),
            ));
        }
        Ok(())
    }

    /// What a sample leaves behind, checked.
    fn after(&self, iterations: u64) -> Result<(), BenchError> {
        let name = self.kind.name();
        match self.kind {
            Kind::CreatClose => {
                let dir = &self._scratch.as_ref().expect("a directory").0;
                for n in self.names.iter().take(iterations as usize) {
                    let path = dir.join(n.to_str().expect("ascii"));
                    let meta = std::fs::metadata(&path)
                        .map_err(BenchError::at_path(name, "stat", &path))?;
                    if meta.len() != 0 {
                        return Err(check(
                            name,
                            format!("{} is not empty", smtlab_model::quote::path(&path)),
                        ));
                    }
                }
            }
            Kind::Link => {
                let dir = &self._scratch.as_ref().expect("a directory").0;
                let meta = std::fs::metadata(dir.join("file"))
                    .map_err(|e| io(name, "stat the linked file", e))?;
                use std::os::unix::fs::MetadataExt;
                if meta.nlink() != 1 || dir.join("link").exists() {
                    return Err(check(
                        name,
                        format!("the file has {} links after the unlinks", meta.nlink()),
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl Instance for SysInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        let this = &*self;
        let s = timed(self.cpu, iterations, |i| this.op(i))?;
        self.after(iterations)?;
        Ok(s)
    }
}

/// An AIM9 row that is the same operation as a row of Table 1: the os benchmark, counted
/// as operations per second.
#[derive(Debug, Clone, Copy)]
struct OsRowSpec {
    name: &'static str,
    row: &'static str,
    unit: &'static str,
    os: &'static str,
    what: &'static str,
}

const OS_ROWS: [OsRowSpec; 3] = [
    OsRowSpec {
        name: "aim-signal",
        row: "signal_test",
        unit: "traps/s",
        os: "sig-handler",
        what: "SIGUSR1 sent to the measuring thread and caught by a handler (the sending \
               included); signal traps per second, every catch counted",
    },
    OsRowSpec {
        name: "aim-exec",
        row: "exec_test",
        unit: "loads/s",
        os: "fork-exec",
        what: "fork + execve(\"/bin/true\") + wait4, the child on the placement's second CPU \
               when it has one; program loads per second",
    },
    OsRowSpec {
        name: "aim-fork",
        row: "fork_test",
        unit: "tasks/s",
        os: "fork-exit",
        what: "fork + _exit + wait4, the child on the placement's second CPU when it has \
               one; task creations per second",
    },
];

/// An os benchmark under an AIM9 row's name and unit.
struct OsRow {
    row: OsRowSpec,
    /// Measured in the os group's lean child process (the catalog), or on the calling
    /// thread (this crate's tests, which have no child program registered).
    lean: bool,
}

impl OsRow {
    fn os(&self) -> Result<Box<dyn Benchmark>, BenchError> {
        let all = if self.lean {
            crate::os::benchmarks()
        } else {
            crate::os::in_process_benchmarks()
        };
        all.into_iter()
            .find(|b| b.info().name == self.row.os)
            .ok_or_else(|| {
                BenchError::unsupported(
                    self.row.name,
                    format!("the os benchmark {} is missing", self.row.os),
                )
            })
    }
}

impl Benchmark for OsRow {
    fn info(&self) -> BenchInfo {
        let r = self.row;
        let params = self.os().map(|b| b.info().params).unwrap_or_default();
        info(
            r.name,
            r.unit,
            r.row,
            &format!(
                "AIM9 {}: {} (the `{}` benchmark of Table 1, in its lean process).",
                r.row, r.what, r.os
            ),
            params,
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        // The os benchmark's own sample: `work` is its operations, `elapsed_ns` their
        // whole time, which as a rate is operations per second.
        self.os()?.prepare(ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;
    use crate::workers::tests::{context, placement, topology};

    fn sample(b: &dyn Benchmark, extra: &[String], n: u64) -> Result<RawSample, BenchError> {
        let params = Params::resolve(&b.info(), extra, true)?;
        let pl = placement(&[0]);
        let topo = topology(None);
        let mut inst = b.prepare(&context(&params, &pl, &topo))?;
        inst.sample(n)
    }

    #[test]
    fn every_system_row_runs_checks_and_cleans_up() {
        let t = tempfile::tempdir().unwrap();
        let dir = format!("dir={}", t.path().display());
        for kind in [
            Kind::CreatClose,
            Kind::Page,
            Kind::Brk,
            Kind::Jmp,
            Kind::Link,
            Kind::DirSearch,
            Kind::DirLookup,
        ] {
            let b = Sys { kind };
            let extra: Vec<String> = if b.info().params.iter().any(|p| p.name == "dir") {
                vec![dir.clone(), "files=8".into()]
                    .into_iter()
                    .filter(|a| b.info().params.iter().any(|p| a.starts_with(&p.name)))
                    .collect()
            } else {
                vec![]
            };
            let s = sample(&b, &extra, 40).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            assert_eq!(s.work, 40.0, "{kind:?}");
        }
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_os_rows_count_operations_per_second() {
        for row in OS_ROWS {
            let b = OsRow { row, lean: false };
            let s = sample(&b, &[], 5).unwrap_or_else(|e| panic!("{}: {e}", row.name));
            assert_eq!(s.work, 5.0, "{}", row.name);
            assert!(s.elapsed_ns > 0);
        }
    }

    #[test]
    fn a_goto_leaves_every_frame_and_carries_its_value() {
        let r = std::panic::catch_unwind(|| dive(10, 42)).unwrap_err();
        assert_eq!(r.downcast::<Goto>().unwrap().0, 42);
    }
}
