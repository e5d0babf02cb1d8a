//! `server=user`: a user-space NFSv3 server (the `nfs3_server` crate) exporting a
//! scratch directory on disk, for kernels without nfsd (this project's CI and QEMU
//! guest among them). It is not the kernel's nfsd, which paper 004 measured: the
//! protocol and the client's mix are the same, the server's code and where its time goes
//! (user space, tokio, the file system through system calls) are not.
//!
//! * [`DirFs`]: the crate's file-system interface over a real directory, each file
//!   handle an index into a table of paths (ids never reused within a run; a removed
//!   file's handle answers `NFS3ERR_STALE`, as nfsd's does). Calls are plain blocking
//!   system calls on the worker that serves the request, as an nfsd thread makes them,
//!   so all the server's work stays on the placement's CPUs (tokio's `fs` would hand it
//!   to a blocking pool).
//! * [`UserNfs`]: a multi-threaded tokio runtime, one worker per placement CPU, worker
//!   *i* pinned to CPU *i*, listening on 127.0.0.1 (MOUNT and NFS on one port, no
//!   portmapper). Its threads are smtlab's own, so nothing outlives smtlab, even a
//!   `kill -9`.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use nfs3_server::fs_util::{metadata_to_fattr3, path_setattr};
use nfs3_server::nfs3_types::nfs3::{
    createverf3, fattr3, filename3, nfspath3, nfsstat3, sattr3, stable_how,
};
use nfs3_server::tcp::{NFSTcp, NFSTcpListener};
use nfs3_server::vfs::{
    DirEntryPlus, FileHandleU64, NextResult, NfsFileSystem, NfsReadFileSystem, ReadDirPlusIterator,
};
use smtlab_placement::runtime::PinnedRuntime;

/// The root's id; 0 is reserved by the crate.
const ROOT: u64 = 1;

/// The paths handed out, by id (`ids[id - 1]`), and the way back.
#[derive(Default)]
struct Table {
    paths: Vec<Option<PathBuf>>,
    ids: HashMap<PathBuf, u64>,
}

impl Table {
    fn intern(&mut self, p: PathBuf) -> u64 {
        if let Some(&id) = self.ids.get(&p) {
            return id;
        }
        self.paths.push(Some(p.clone()));
        let id = self.paths.len() as u64;
        self.ids.insert(p, id);
        id
    }

    fn forget(&mut self, p: &Path) {
        if let Some(id) = self.ids.remove(p) {
            self.paths[(id - 1) as usize] = None;
        }
    }
}

fn attr_of(id: u64, p: &Path) -> Result<fattr3, nfsstat3> {
    let m = std::fs::symlink_metadata(p).map_err(|e| io_status(&e))?;
    Ok(metadata_to_fattr3(id, &m))
}

/// A directory on disk served over NFSv3.
pub struct DirFs {
    table: RwLock<Table>,
}

fn io_status(e: &std::io::Error) -> nfsstat3 {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => nfsstat3::NFS3ERR_NOENT,
        K::PermissionDenied => nfsstat3::NFS3ERR_ACCES,
        K::AlreadyExists => nfsstat3::NFS3ERR_EXIST,
        K::DirectoryNotEmpty => nfsstat3::NFS3ERR_NOTEMPTY,
        K::NotADirectory => nfsstat3::NFS3ERR_NOTDIR,
        K::IsADirectory => nfsstat3::NFS3ERR_ISDIR,
        K::StorageFull => nfsstat3::NFS3ERR_NOSPC,
        K::InvalidFilename => nfsstat3::NFS3ERR_NAMETOOLONG,
        _ => nfsstat3::NFS3ERR_IO,
    }
}

impl DirFs {
    pub fn new(root: &Path) -> DirFs {
        let mut t = Table::default();
        t.intern(root.to_path_buf());
        DirFs {
            table: RwLock::new(t),
        }
    }

    fn table(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn table_mut(&self) -> std::sync::RwLockWriteGuard<'_, Table> {
        self.table
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn path(&self, id: &FileHandleU64) -> Result<PathBuf, nfsstat3> {
        let id = u64::from(*id);
        self.table()
            .paths
            .get((id.max(1) - 1) as usize)
            .cloned()
            .flatten()
            .ok_or(nfsstat3::NFS3ERR_STALE)
    }

    /// `dir/name`, refusing names that would leave the directory.
    fn child(&self, dir: &FileHandleU64, name: &filename3<'_>) -> Result<PathBuf, nfsstat3> {
        let n = name.as_ref();
        if n.is_empty() || n == b"." || n == b".." || n.contains(&b'/') || n.contains(&0) {
            return Err(nfsstat3::NFS3ERR_INVAL);
        }
        Ok(self.path(dir)?.join(std::ffi::OsStr::from_bytes(n)))
    }

    /// The file behind `id`, open for writing.
    fn open_for_write(&self, id: &FileHandleU64) -> Result<std::fs::File, nfsstat3> {
        let p = self.path(id)?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .map_err(|e| io_status(&e))
    }

    /// The id of an existing `p` and its attributes.
    fn found(&self, p: PathBuf) -> Result<(FileHandleU64, fattr3), nfsstat3> {
        let m = std::fs::symlink_metadata(&p).map_err(|e| io_status(&e))?;
        let id = self.table_mut().intern(p);
        Ok((id.into(), metadata_to_fattr3(id, &m)))
    }
}

impl NfsReadFileSystem for DirFs {
    type Handle = FileHandleU64;

    fn root_dir(&self) -> FileHandleU64 {
        ROOT.into()
    }

    async fn lookup(
        &self,
        dirid: &FileHandleU64,
        filename: &filename3<'_>,
    ) -> Result<FileHandleU64, nfsstat3> {
        match filename.as_ref() {
            b"." => return Ok(*dirid),
            b".." => {
                let p = self.path(dirid)?;
                if u64::from(*dirid) == ROOT {
                    return Ok(*dirid);
                }
                let parent = p.parent().ok_or(nfsstat3::NFS3ERR_NOENT)?.to_path_buf();
                return self.found(parent).map(|(h, _)| h);
            }
            _ => {}
        }
        let p = self.child(dirid, filename)?;
        self.found(p).map(|(h, _)| h)
    }

    async fn getattr(&self, id: &FileHandleU64) -> Result<fattr3, nfsstat3> {
        let p = self.path(id)?;
        attr_of(u64::from(*id), &p).map_err(|s| match s {
            // Gone from under its handle.
            nfsstat3::NFS3ERR_NOENT => nfsstat3::NFS3ERR_STALE,
            s => s,
        })
    }

    async fn read(
        &self,
        id: &FileHandleU64,
        offset: u64,
        count: u32,
    ) -> Result<(Vec<u8>, bool), nfsstat3> {
        let p = self.path(id)?;
        let f = std::fs::File::open(&p).map_err(|e| io_status(&e))?;
        let len = f.metadata().map_err(|e| io_status(&e))?.len();
        let want = len.saturating_sub(offset).min(u64::from(count)) as usize;
        let mut buf = vec![0u8; want];
        let mut got = 0;
        while got < want {
            match f.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_status(&e)),
            }
        }
        buf.truncate(got);
        Ok((buf, offset + got as u64 >= len))
    }

    async fn readdirplus(
        &self,
        dirid: &FileHandleU64,
        cookie: u64,
    ) -> Result<impl ReadDirPlusIterator<FileHandleU64>, nfsstat3> {
        let dir = self.path(dirid)?;
        let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(&dir)
            .map_err(|e| io_status(&e))?
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        // Deterministic order, so a cookie (the entry's place, from 1) means the same
        // entry on the next call.
        names.sort();
        let mut entries = Vec::new();
        for (k, n) in names.into_iter().enumerate().skip(cookie as usize) {
            let p = dir.join(&n);
            let Ok((h, attr)) = self.found(p) else {
                continue; // removed meanwhile
            };
            entries.push(DirEntryPlus {
                fileid: u64::from(h),
                name: filename3::from(n.as_bytes().to_vec()),
                cookie: k as u64 + 1,
                name_attributes: Some(attr),
                name_handle: Some(h),
            });
        }
        entries.reverse();
        Ok(Entries(entries))
    }

    async fn readlink(&self, id: &FileHandleU64) -> Result<nfspath3<'_>, nfsstat3> {
        let p = self.path(id)?;
        let t = std::fs::read_link(&p).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidInput => nfsstat3::NFS3ERR_INVAL,
            _ => io_status(&e),
        })?;
        Ok(nfspath3::from(t.as_os_str().as_bytes().to_vec()))
    }
}

/// A directory's entries, last first (taken from the end).
struct Entries(Vec<DirEntryPlus<FileHandleU64>>);

impl ReadDirPlusIterator<FileHandleU64> for Entries {
    async fn next(&mut self) -> NextResult<DirEntryPlus<FileHandleU64>> {
        match self.0.pop() {
            Some(e) => NextResult::Ok(e),
            None => NextResult::Eof,
        }
    }
}

impl NfsFileSystem for DirFs {
    async fn setattr(&self, id: &FileHandleU64, setattr: sattr3) -> Result<fattr3, nfsstat3> {
        let p = self.path(id)?;
        path_setattr(&p, &setattr).await?;
        attr_of(u64::from(*id), &p)
    }

    async fn write(
        &self,
        id: &FileHandleU64,
        offset: u64,
        data: &[u8],
        stable: stable_how,
    ) -> Result<(fattr3, stable_how), nfsstat3> {
        let f = self.open_for_write(id)?;
        f.write_all_at(data, offset).map_err(|e| io_status(&e))?;
        // What the client asked for, as nfsd gives it: unstable writes stay in the page
        // cache until a COMMIT.
        if !matches!(stable, stable_how::UNSTABLE) {
            f.sync_data().map_err(|e| io_status(&e))?;
        }
        let m = f.metadata().map_err(|e| io_status(&e))?;
        Ok((metadata_to_fattr3(u64::from(*id), &m), stable))
    }

    async fn create(
        &self,
        dirid: &FileHandleU64,
        filename: &filename3<'_>,
        attr: sattr3,
    ) -> Result<(FileHandleU64, fattr3), nfsstat3> {
        let p = self.child(dirid, filename)?;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&p)
            .map_err(|e| io_status(&e))?;
        path_setattr(&p, &attr).await?;
        self.found(p)
    }

    async fn create_exclusive(
        &self,
        dirid: &FileHandleU64,
        filename: &filename3<'_>,
        _createverf: createverf3,
    ) -> Result<FileHandleU64, nfsstat3> {
        let p = self.child(dirid, filename)?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
            .map_err(|e| io_status(&e))?;
        self.found(p).map(|(h, _)| h)
    }

    async fn mkdir(
        &self,
        dirid: &FileHandleU64,
        dirname: &filename3<'_>,
    ) -> Result<(FileHandleU64, fattr3), nfsstat3> {
        let p = self.child(dirid, dirname)?;
        std::fs::create_dir(&p).map_err(|e| io_status(&e))?;
        self.found(p)
    }

    async fn remove(
        &self,
        dirid: &FileHandleU64,
        filename: &filename3<'_>,
    ) -> Result<(), nfsstat3> {
        let p = self.child(dirid, filename)?;
        let m = std::fs::symlink_metadata(&p).map_err(|e| io_status(&e))?;
        if m.is_dir() {
            std::fs::remove_dir(&p)
        } else {
            std::fs::remove_file(&p)
        }
        .map_err(|e| io_status(&e))?;
        self.table_mut().forget(&p);
        Ok(())
    }

    async fn rename<'a>(
        &self,
        from_dirid: &FileHandleU64,
        from_filename: &filename3<'a>,
        to_dirid: &FileHandleU64,
        to_filename: &filename3<'a>,
    ) -> Result<(), nfsstat3> {
        let from = self.child(from_dirid, from_filename)?;
        let to = self.child(to_dirid, to_filename)?;
        std::fs::rename(&from, &to).map_err(|e| io_status(&e))?;
        // Handles follow what they name: the renamed entry and, for a directory,
        // everything under it; what `to` replaced is gone.
        let mut t = self.table_mut();
        t.forget(&to);
        let moved: Vec<(PathBuf, u64)> = t
            .ids
            .iter()
            .filter(|(p, _)| p.starts_with(&from))
            .map(|(p, id)| (p.clone(), *id))
            .collect();
        for (old, id) in moved {
            let new = to.join(old.strip_prefix(&from).unwrap_or(Path::new("")));
            t.ids.remove(&old);
            t.ids.insert(new.clone(), id);
            t.paths[(id - 1) as usize] = Some(new);
        }
        Ok(())
    }

    async fn symlink<'a>(
        &self,
        dirid: &FileHandleU64,
        linkname: &filename3<'a>,
        symlink: &nfspath3<'a>,
        _attr: &sattr3,
    ) -> Result<(FileHandleU64, fattr3), nfsstat3> {
        let p = self.child(dirid, linkname)?;
        std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(symlink.as_ref()), &p)
            .map_err(|e| io_status(&e))?;
        self.found(p)
    }

    async fn commit(&self, id: &FileHandleU64, _offset: u64, _count: u32) -> Result<(), nfsstat3> {
        let f = self.open_for_write(id)?;
        f.sync_data().map_err(|e| io_status(&e))
    }
}

/// The running user-space server; dropping it stops it (open connections end with its
/// runtime).
pub struct UserNfs {
    port: u16,
    runtime: PinnedRuntime,
}

impl UserNfs {
    /// Serves `dir` on 127.0.0.1 (a free port) from `workers` threads, thread *i*
    /// pinned to `cpus[i % len]` (empty `cpus`: unpinned).
    pub fn start(dir: &Path, cpus: &[u32], workers: usize) -> std::io::Result<UserNfs> {
        let runtime = PinnedRuntime::start("smtlab-nfsu", cpus, workers)
            .map_err(|e| std::io::Error::other(format!("the NFS server: {e}")))?;
        let fs = DirFs::new(dir);
        let listener = runtime
            .runtime()
            .block_on(NFSTcpListener::bind("127.0.0.1:0", fs))
            .map_err(|e| std::io::Error::new(e.kind(), format!("listen on 127.0.0.1: {e}")))?;
        let port = listener.get_listen_port();
        runtime.runtime().spawn(async move {
            let _ = listener.handle_forever().await;
        });
        Ok(UserNfs { port, runtime })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn thread_ids(&self) -> Vec<i32> {
        self.runtime.thread_ids()
    }

    /// CPU time of the server's threads so far, in nanoseconds (the scheduler's count).
    pub fn cpu_ns(&self) -> u64 {
        self.runtime.cpu_ns()
    }
}
