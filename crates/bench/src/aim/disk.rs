//! AIM9's disk rows: random and sequential block reads and writes and file copies,
//! with the written file opened `O_SYNC` for the sync rows.
//!
//! Files live in a private directory under `dir` (default: the temporary directory)
//! removed when the cell ends. Every block starts with its block number, written at
//! prepare time; a read checks that number, so a read that returned the wrong block (or
//! nothing) fails the sample. After a sample the last block written or copied is read
//! back and compared.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use smtlab_model::BenchInfo;

use super::{bad, check, info, io, param, timed};
use crate::{BenchContext, BenchError, Benchmark, Instance, RawSample};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Write,
    Copy,
}

/// One disk row.
pub struct Disk {
    name: &'static str,
    row: &'static str,
    op: Op,
    random: bool,
    sync: bool,
}

/// The disk rows of paper 001 Table 2.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    let d = |name, row, op, random, sync| -> Box<dyn Benchmark> {
        Box::new(Disk {
            name,
            row,
            op,
            random,
            sync,
        })
    };
    vec![
        d("aim-disk-rr", "disk_rr", Op::Read, true, false),
        d("aim-disk-rw", "disk_rw", Op::Write, true, false),
        d("aim-disk-rd", "disk_rd", Op::Read, false, false),
        d("aim-disk-wrt", "disk_wrt", Op::Write, false, false),
        d("aim-disk-cp", "disk_cp", Op::Copy, false, false),
        d("aim-sync-disk-rw", "sync_disk_rw", Op::Write, true, true),
        d("aim-sync-disk-wrt", "sync_disk_wrt", Op::Write, false, true),
        d("aim-sync-disk-cp", "sync_disk_cp", Op::Copy, false, true),
    ]
}

impl Benchmark for Disk {
    fn info(&self) -> BenchInfo {
        let what = match (self.op, self.random) {
            (Op::Read, true) => "random block reads",
            (Op::Read, false) => "sequential block reads",
            (Op::Write, true) => "random block writes",
            (Op::Write, false) => "sequential block writes",
            (Op::Copy, _) => "block copies from one file to another",
        };
        let sync = if self.sync {
            ", the written file opened O_SYNC"
        } else {
            ""
        };
        info(
            self.name,
            "MB/s",
            self.row,
            &format!("AIM9 {}: {what}{sync}; bytes per second.", self.row),
            vec![
                param("file", "16MiB", Some("4MiB"), "size of each file"),
                param("block", "4KiB", None, "bytes per read or write"),
                dir_param(),
            ],
        )
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let p = ctx.params;
        let block = p.get_bytes("block")?;
        if !(64..=(16 << 20)).contains(&block) || block % 8 != 0 {
            return Err(bad(
                "block",
                p.get_str("block")?,
                "a multiple of 8 from 64 B to 16 MiB",
            ));
        }
        let size = p.get_bytes("file")?;
        if size < block || size > (4 << 30) {
            return Err(bad(
                "file",
                p.get_str("file")?,
                "at least one block and at most 4 GiB",
            ));
        }
        let blocks = size / block;
        let dir = Scratch::in_dir_param(self.name, p)?;
        let name = self.name;
        let fill = |path: &Path, seed: u64| -> Result<File, BenchError> {
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(BenchError::at_path(name, "create", path))?;
            let mut buf = vec![0u8; block as usize];
            for b in 0..blocks {
                stamp(&mut buf, b, seed);
                // Formatted only on failure: a large file has millions of blocks.
                f.write_all_at(&buf, b * block)
                    .map_err(|e| BenchError::at_path(name, "fill", path)(e))?;
            }
            f.sync_all()
                .map_err(BenchError::at_path(name, "sync", path))?;
            Ok(f)
        };
        let src = fill(&dir.0.join("src"), 0)?;
        let dst = if self.op == Op::Read {
            None
        } else {
            let path = dir.0.join("dst");
            drop(fill(&path, 1)?);
            let mut o = OpenOptions::new();
            o.read(true).write(true);
            if self.sync {
                o.custom_flags(libc::O_SYNC);
            }
            Some(
                o.open(&path)
                    .map_err(BenchError::at_path(name, "open", &path))?,
            )
        };
        let tmpfs = is_tmpfs(&dir.0);
        Ok(Box::new(DiskInstance {
            name,
            op: self.op,
            random: self.random,
            cpu: ctx.placement.cpu_for_thread(0),
            block,
            blocks,
            src,
            dst,
            buf: vec![0u8; block as usize],
            next: 0,
            rng: crate::clock::now_ns() | 1,
            generation: 1,
            tmpfs,
            _dir: dir,
        }))
    }
}

/// Writes the block number (and a generation) at the start of `buf` and a pattern
/// after it. Blocks are at least 64 bytes.
fn stamp(buf: &mut [u8], block: u64, generation: u64) {
    buf[..8].copy_from_slice(&block.to_le_bytes());
    buf[8..16].copy_from_slice(&generation.to_le_bytes());
    for (i, b) in buf.iter_mut().enumerate().skip(16) {
        *b = (i as u64 ^ block) as u8;
    }
}

fn tag(buf: &[u8]) -> (u64, u64) {
    let mut a = [0u8; 8];
    let mut g = [0u8; 8];
    a.copy_from_slice(&buf[..8]);
    g.copy_from_slice(&buf[8..16]);
    (u64::from_le_bytes(a), u64::from_le_bytes(g))
}

// `f_type` and `TMPFS_MAGIC` have different integer types on some architectures.
#[allow(trivial_numeric_casts)]
fn is_tmpfs(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs is plain data; all zeroes is valid.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path, `s` a struct we own for the call to fill.
    unsafe { libc::statfs(c.as_ptr(), &mut s) == 0 && s.f_type as i64 == libc::TMPFS_MAGIC }
}

struct DiskInstance {
    name: &'static str,
    op: Op,
    random: bool,
    cpu: Option<u32>,
    block: u64,
    blocks: u64,
    src: File,
    dst: Option<File>,
    buf: Vec<u8>,
    next: u64,
    rng: u64,
    generation: u64,
    tmpfs: bool,
    _dir: Scratch,
}

impl Instance for DiskInstance {
    fn sample(&mut self, iterations: u64) -> Result<RawSample, BenchError> {
        self.generation += 1;
        let (name, op, random, block, blocks, generation) = (
            self.name,
            self.op,
            self.random,
            self.block,
            self.blocks,
            self.generation,
        );
        let (src, dst, buf) = (&self.src, self.dst.as_ref(), &mut self.buf);
        let (next, rng) = (&mut self.next, &mut self.rng);
        let mut last = None;
        let mut s = timed(self.cpu, iterations, |_| {
            let b = if random {
                *rng ^= *rng << 13;
                *rng ^= *rng >> 7;
                *rng ^= *rng << 17;
                *rng % blocks
            } else {
                let b = *next;
                *next = (b + 1) % blocks;
                b
            };
            let at = b * block;
            match op {
                Op::Read => {
                    src.read_exact_at(buf, at)
                        .map_err(|e| io(name, "read a block", e))?;
                    if tag(buf).0 != b {
                        return Err(check(
                            name,
                            format!("block {b} read back as block {}", tag(buf).0),
                        ));
                    }
                }
                Op::Write => {
                    buf[..8].copy_from_slice(&b.to_le_bytes());
                    buf[8..16].copy_from_slice(&generation.to_le_bytes());
                    dst.expect("writes have a file")
                        .write_all_at(buf, at)
                        .map_err(|e| io(name, "write a block", e))?;
                }
                Op::Copy => {
                    src.read_exact_at(buf, at)
                        .map_err(|e| io(name, "read a block", e))?;
                    buf[8..16].copy_from_slice(&generation.to_le_bytes());
                    dst.expect("copies have a file")
                        .write_all_at(buf, at)
                        .map_err(|e| io(name, "write a block", e))?;
                }
            }
            last = Some(b);
            Ok(block as f64)
        })?;
        // The last block written must read back as written.
        if let (Some(b), Some(d), true) = (last, self.dst.as_ref(), op != Op::Read) {
            let mut back = vec![0u8; block as usize];
            d.read_exact_at(&mut back, b * block)
                .map_err(|e| io(name, "read a written block back", e))?;
            if tag(&back) != (b, generation) {
                return Err(check(
                    name,
                    format!(
                        "block {b} reads back as {:?}, wrote {:?}",
                        tag(&back),
                        (b, generation)
                    ),
                ));
            }
        }
        s.metrics.insert("block_bytes".into(), block as f64);
        s.metrics
            .insert("tmpfs".into(), f64::from(u8::from(self.tmpfs)));
        Ok(s)
    }
}

/// The `dir` parameter, read by [`Scratch::in_dir_param`].
pub(super) fn dir_param() -> smtlab_model::ParamInfo {
    param(
        "dir",
        "",
        None,
        "directory for the files (default: the temporary directory)",
    )
}

/// A private directory removed when dropped.
pub(super) struct Scratch(pub(super) PathBuf);

static COUNTER: AtomicU64 = AtomicU64::new(0);

impl Scratch {
    /// A scratch directory in the `dir` parameter's directory (the temporary directory
    /// when it is empty), or the error naming `bench` and the directory.
    pub(super) fn in_dir_param(bench: &str, p: &crate::Params) -> Result<Scratch, BenchError> {
        let parent = match p.get_str("dir")? {
            "" => std::env::temp_dir(),
            d => PathBuf::from(d),
        };
        Scratch::create(&parent).map_err(BenchError::at_path(
            bench,
            "create a directory in",
            &parent,
        ))
    }

    pub(super) fn create(parent: &Path) -> std::io::Result<Scratch> {
        let dir = parent.join(format!(
            "smtlab-aim-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;
    use crate::workers::tests::{context, placement, topology};

    fn run(b: &dyn Benchmark, extra: &[String]) -> Result<RawSample, BenchError> {
        let params = Params::resolve(&b.info(), extra, true)?;
        let pl = placement(&[0]);
        let topo = topology(None);
        let mut inst = b.prepare(&context(&params, &pl, &topo))?;
        inst.sample(10)?;
        inst.sample(300)
    }

    #[test]
    fn every_disk_row_runs_checks_and_cleans_up() {
        let t = tempfile::tempdir().unwrap();
        let args = vec![
            "file=256KiB".to_string(),
            format!("dir={}", t.path().display()),
        ];
        for b in benchmarks() {
            let s = run(&*b, &args).unwrap_or_else(|e| panic!("{}: {e}", b.info().name));
            assert_eq!(s.work, 300.0 * 4096.0, "{}", b.info().name);
        }
        assert_eq!(fs::read_dir(t.path()).unwrap().count(), 0);
    }

    #[test]
    fn bad_sizes_and_directories_are_one_line_errors() {
        let b = &benchmarks()[0];
        for (arg, want) in [
            ("block=3", "block"),
            ("file=1k", "file"),
            ("dir=/nonexistent/x", "/nonexistent/x"),
        ] {
            let e = run(&**b, &[arg.to_string()]).err().unwrap().to_string();
            assert!(e.contains(want), "{arg}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn stamps_round_trip() {
        let mut buf = vec![0u8; 64];
        stamp(&mut buf, 7, 3);
        assert_eq!(tag(&buf), (7, 3));
    }
}
