//! The SPECweb96-like file set: directories of 36 files in four size classes, generated
//! into a temporary directory once per cell and read once so they sit in the page cache.
//!
//! Class c holds 9 files of k x 1024 x 10^c / 10 bytes (k = 1..9): class 0 is 102-921
//! bytes, class 1 1-9 KiB, class 2 10-90 KiB, class 3 100-900 KiB, about 5 MB a
//! directory. Requests go 35/50/14/1% to the classes, within a class peaked at the
//! middle sizes as SPECweb96's file mix is, and over directories by a Zipf law (s = 1),
//! so a few directories are hot and the rest are touched now and then.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use smtlab_loadgen::RequestSpec;

/// Share of requests per class (SPECweb96).
pub const CLASS_SHARE: [f64; 4] = [0.35, 0.50, 0.14, 0.01];
/// Relative popularity of the 9 files within a class, peaked at the middle.
pub const FILE_SHARE: [f64; 9] = [
    0.039, 0.059, 0.088, 0.177, 0.353, 0.118, 0.074, 0.059, 0.033,
];
pub const FILES_PER_CLASS: u32 = 9;

/// One file of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// URL path, `/dir00003/class1_4`.
    pub url: String,
    pub path: PathBuf,
    pub size: u64,
    pub class: u32,
    /// The file's number within its class, 1..=9.
    pub k: u32,
    pub dir: u32,
}

/// Prefix of the file sets' directories under the temporary directory.
pub const DIR_PREFIX: &str = "smtlab-web-";

/// A generated file set in its own temporary directory, removed when dropped.
#[derive(Debug)]
pub struct FileSet {
    pub root: crate::scratch::ScratchDir,
    pub files: Vec<FileEntry>,
}

pub fn file_size(class: u32, k: u32) -> u64 {
    k as u64 * 1024 * 10u64.pow(class) / 10
}

/// Bytes of one directory.
pub fn dir_bytes() -> u64 {
    (0..4)
        .flat_map(|c| (1..=FILES_PER_CLASS).map(move |k| file_size(c, k)))
        .sum()
}

/// Directories for a data set of about `bytes` (at least one).
pub fn dirs_for(bytes: u64) -> u32 {
    (bytes / dir_bytes()).clamp(1, 100_000) as u32
}

/// Deterministic contents: text lines, so a curl of a file is readable, different per
/// file so a server that mixes them up is caught.
fn fill(buf: &mut Vec<u8>, size: u64, seed: u64) {
    buf.clear();
    let mut x = seed | 1;
    while (buf.len() as u64) < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let line = format!("{x:016x} smtlab web file set\n");
        buf.extend_from_slice(line.as_bytes());
    }
    buf.truncate(size as usize);
}

impl FileSet {
    /// Generates `dirs` directories under a new temporary directory (in `$TMPDIR`).
    pub fn generate(dirs: u32) -> io::Result<FileSet> {
        let root = crate::scratch::ScratchDir::make(&std::env::temp_dir(), DIR_PREFIX).map_err(
            |(what, dir, e)| {
                io::Error::new(
                    e.kind(),
                    format!("cannot {what} {}: {e}", smtlab_model::quote::path(&dir)),
                )
            },
        )?;
        let mut files = Vec::new();
        let mut buf = Vec::new();
        for d in 0..dirs {
            let dname = format!("dir{d:05}");
            std::fs::create_dir(root.path().join(&dname))?;
            for c in 0..4 {
                for k in 1..=FILES_PER_CLASS {
                    let name = format!("class{c}_{k}");
                    let size = file_size(c, k);
                    fill(
                        &mut buf,
                        size,
                        (d as u64) << 16 | (c as u64) << 8 | k as u64,
                    );
                    let path = root.path().join(&dname).join(&name);
                    std::fs::File::create(&path)?.write_all(&buf)?;
                    files.push(FileEntry {
                        url: format!("/{dname}/{name}"),
                        path,
                        size,
                        class: c,
                        k,
                        dir: d,
                    });
                }
            }
        }
        Ok(FileSet { root, files })
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Reads every file once so the measured load finds them in the page cache.
    pub fn warm(&self) -> io::Result<u64> {
        let mut total = 0;
        for f in &self.files {
            total += io::copy(&mut std::fs::File::open(&f.path)?, &mut io::sink())?;
        }
        Ok(total)
    }

    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// Every file as a request that expects its size, with the SPECweb96 weights.
    pub fn requests(&self) -> (Vec<RequestSpec>, Vec<f64>) {
        let dirs = self.files.iter().map(|f| f.dir).max().map_or(1, |d| d + 1);
        let harmonic: f64 = (1..=dirs).map(|r| 1.0 / r as f64).sum();
        let specs = self
            .files
            .iter()
            .map(|f| RequestSpec::get(f.url.clone()).expect_len(f.size))
            .collect();
        let weights = self
            .files
            .iter()
            .map(|f| {
                let k = f.k as usize;
                let dir_share = 1.0 / (f.dir as f64 + 1.0) / harmonic;
                dir_share * CLASS_SHARE[f.class as usize] * FILE_SHARE[k - 1]
            })
            .collect();
        (specs, weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_shares() {
        assert_eq!(file_size(0, 1), 102);
        assert_eq!(file_size(3, 9), 921_600);
        assert!((CLASS_SHARE.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!((FILE_SHARE.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert_eq!(dirs_for(1), 1);
        assert_eq!(dirs_for(10 * dir_bytes() + 5), 10);
    }

    #[test]
    fn generated_files_match_their_entries() {
        let fs = FileSet::generate(2).unwrap();
        assert_eq!(fs.files.len(), 72);
        for f in &fs.files {
            let data = std::fs::read(&f.path).unwrap();
            assert_eq!(data.len() as u64, f.size);
            let mut want = Vec::new();
            let seed = u64::from(f.dir) << 16 | u64::from(f.class) << 8 | u64::from(f.k);
            fill(&mut want, f.size, seed);
            assert!(data == want, "{}", f.url);
        }
        assert_eq!(fs.warm().unwrap(), fs.total_bytes());
        let (specs, weights) = fs.requests();
        assert_eq!(specs.len(), 72);
        assert!((weights.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        // Directory 0 is twice as popular as directory 1 (Zipf, s = 1).
        let w0: f64 = fs
            .files
            .iter()
            .zip(&weights)
            .filter(|(f, _)| f.dir == 0)
            .map(|(_, w)| w)
            .sum();
        assert!((w0 - 2.0 / 3.0).abs() < 1e-9, "{w0}");
        let root = fs.root().to_path_buf();
        drop(fs);
        assert!(!root.exists());
    }
}
