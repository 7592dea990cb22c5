//! The files a process maps, opened by pgdbg only as the very file mapped.
//!
//! A path is opened once and the open handle is checked (fstat), never a
//! path checked and opened again later: between the two a file can be
//! renamed over the path (a package upgrade under a running server), and
//! pgdbg would read another build's symbols or place a kernel uprobe in
//! another binary, where its int3 can fall inside an instruction of the
//! processes that run that binary.  Whoever needs the file afterwards
//! reads the handle, or opens [`VerifiedFile::path`], `/proc/self/fd/N`:
//! the kernel follows that link to the same inode.  pgdbg's keeper, which
//! opens the uprobes in a process of its own, is sent the descriptor
//! itself with each request (`perf::keeper`), never the link's text.

use super::procfs::{self, Mapping};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// overlayfs's `f_type` (linux/magic.h).
const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;

/// What [`VerifiedFile::path`] starts with, before the descriptor.
pub const FD_LINK: &str = "/proc/self/fd/";

/// `path` opened for reading if it is a regular file: found first without
/// opening it (`O_PATH`), so a FIFO or a device renamed over a library's
/// path is neither waited on nor opened; then that very file opened.
pub(crate) fn open_regular(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let found = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
        .ok()?;
    if !found.metadata().ok()?.is_file() {
        return None;
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY)
        .open(format!("{FD_LINK}{}", found.as_raw_fd()))
        .ok()
}

/// The files verified in this process, by (process, path, device, inode):
/// each reused while one of its values lives (one descriptor per file,
/// however many uprobes are placed in it).
type Verified = Vec<((i32, PathBuf, String, u64), std::sync::Weak<File>, PathBuf)>;
static VERIFIED: std::sync::Mutex<Verified> = std::sync::Mutex::new(Vec::new());

/// A file opened by pgdbg and checked to be the one a process maps; its
/// clones share the open file, which stays open while one of them lives.
#[derive(Debug, Clone)]
pub struct VerifiedFile {
    file: Arc<File>,
    link: PathBuf,
    origin: PathBuf,
}

impl VerifiedFile {
    fn new(file: Arc<File>, origin: PathBuf) -> VerifiedFile {
        let link = PathBuf::from(format!("{FD_LINK}{}", file.as_raw_fd()));
        VerifiedFile { file, link, origin }
    }

    /// `path` opened as named, with no process to check it against (the
    /// library used before a target process is known).
    pub fn open_unchecked(path: &Path) -> Option<VerifiedFile> {
        Some(VerifiedFile::new(
            Arc::new(open_regular(path)?),
            path.to_path_buf(),
        ))
    }

    /// The open file, shared.
    pub fn shared_file(&self) -> Arc<File> {
        self.file.clone()
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// A path to this open file (`/proc/self/fd/N`) for what takes a path,
    /// such as a kernel uprobe, in pgdbg's own process; valid while this
    /// value (or a clone) lives.
    pub fn path(&self) -> &Path {
        &self.link
    }

    /// Where it was opened: the path in the process's root, or
    /// `/proc/PID/map_files/...` (for messages, and a debug file's
    /// neighbours).
    pub fn origin(&self) -> &Path {
        &self.origin
    }
}

/// The file mapped at `path` in process `pid` (device `dev`, inode
/// `inode` from /proc/PID/maps), opened: the path in the process's root
/// when the open file's device and inode are the mapping's, else the
/// mapping itself (`/proc/PID/map_files/START-END`, readable with
/// CAP_SYS_ADMIN), else, on overlayfs, the path in the root when the open
/// file has the mapping's inode number and first page.  Err: why no file
/// could be verified (then pgdbg must not use any, lest it read another
/// file of the same name).
pub fn verified_mapped_file(
    pid: i32,
    path: &Path,
    dev: &str,
    inode: u64,
) -> std::result::Result<VerifiedFile, String> {
    let key = (pid, path.to_path_buf(), dev.to_string(), inode);
    let mut verified = VERIFIED.lock().unwrap_or_else(|e| e.into_inner());
    verified.retain(|(_, w, _)| w.strong_count() > 0);
    if let Some((_, w, origin)) = verified.iter().find(|(k, _, _)| *k == key)
        && let Some(f) = w.upgrade()
    {
        return Ok(VerifiedFile::new(f, origin.clone()));
    }
    let v = verify(pid, path, dev, inode)?;
    verified.push((key, Arc::downgrade(&v.file), v.origin.clone()));
    Ok(v)
}

fn verify(
    pid: i32,
    path: &Path,
    dev: &str,
    inode: u64,
) -> std::result::Result<VerifiedFile, String> {
    let want = procfs::parse_dev(dev).map(|d| (d, inode));
    let cand = procfs::in_root_of(pid, path);
    let mut opened = open_regular(&cand);
    let got = opened
        .as_ref()
        .and_then(|f| f.metadata().ok())
        .map(|m| (m.dev(), m.ino()));
    if want.is_some()
        && got == want
        && let Some(f) = opened.take()
    {
        return Ok(VerifiedFile::new(Arc::new(f), cand));
    }
    let mapped = procfs::maps(pid).unwrap_or_default();
    let mine = |m: &&Mapping| m.path.as_deref() == Some(path) && m.inode == inode && m.dev == dev;
    if let Some(m) = mapped.iter().find(mine) {
        let mf = PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end));
        // the kernel's link to the mapping's own file; its inode number
        // checked in case the range was mapped again meanwhile (not its
        // device: btrfs shows a subvolume's in stat, the filesystem's in
        // maps)
        if let Some(f) = open_regular(&mf)
            && f.metadata().is_ok_and(|md| md.ino() == inode)
        {
            return Ok(VerifiedFile::new(Arc::new(f), mf));
        }
    }
    // overlayfs (a container's usual root) maps the layer's inode, but
    // fstat answers with the overlay's device: on overlayfs, the same
    // inode number and the same first page (ELF header, program headers,
    // build-id note) as the mapping at file offset 0 identify the file.
    // (Neither rule sees a file changed in place after it was mapped, past
    // its first page: overlayfs copies a file up when it is written, and
    // keeps its inode number)
    if let Some(f) = opened
        && got.is_some_and(|(_, ino)| ino == inode)
        && on_overlayfs(&f)
        && let Some(m) = mapped.iter().filter(mine).find(|m| m.offset == 0)
        && first_page_matches(pid, m, &f)
    {
        return Ok(VerifiedFile::new(Arc::new(f), cand));
    }
    let deleted = path.to_string_lossy().ends_with(" (deleted)");
    Err(match got {
        // the kernel's mark of a mapped file no longer at its path: a
        // package upgrade renamed another over it, or it was removed
        None if deleted => format!(
            "the file was replaced or removed after process {pid} mapped it (an upgrade?); \
             the mapped copy is readable only through /proc/{pid}/map_files, which needs \
             CAP_SYS_ADMIN"
        ),
        None => format!("{} is not there", cand.display()),
        Some(_) => format!(
            "{} is not the file mapped (another device or inode)",
            cand.display()
        ),
    })
}

/// The open file is on overlayfs.
fn on_overlayfs(f: &File) -> bool {
    // SAFETY: fstatfs fills the zeroed struct for a valid descriptor.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) };
    rc == 0 && st.f_type as i64 == OVERLAYFS_SUPER_MAGIC
}

/// The file's first page equals the process's memory at mapping `m`
/// (file offset 0, read-only: never relocated).
fn first_page_matches(pid: i32, m: &Mapping, file: &File) -> bool {
    let len = (m.end - m.start).min(4096) as usize;
    if m.perms.contains('w') || len == 0 {
        return false;
    }
    let mut a = vec![0u8; len];
    let mut b = vec![0u8; len];
    if file.read_exact_at(&mut a, 0).is_err() {
        return false;
    }
    let Ok(mem) = File::open(format!("/proc/{pid}/mem")) else {
        return false;
    };
    mem.read_exact_at(&mut b, m.start).is_ok() && a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process, its executable and that file's first mapping.
    fn own_exe() -> (i32, PathBuf, Mapping) {
        let me = std::process::id() as i32;
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let m = procfs::maps(me)
            .unwrap()
            .into_iter()
            .find(|m| m.path.as_deref() == Some(exe.as_path()))
            .unwrap();
        (me, exe, m)
    }

    /// pgdbg's own executable, verified against its own mapping: the
    /// handle is that file, and its link opens the same inode.
    #[test]
    fn own_executable() {
        let (me, exe, m) = own_exe();
        let v = verified_mapped_file(me, &exe, &m.dev, m.inode).unwrap();
        assert_eq!(v.file().metadata().unwrap().ino(), m.inode);
        let again = File::open(v.path()).unwrap();
        assert_eq!(again.metadata().unwrap().ino(), m.inode);
        let clone = v.clone();
        drop(v);
        assert!(File::open(clone.path()).is_ok(), "a clone keeps it open");
    }

    /// A FIFO (renamed over a library's path) is neither waited on nor
    /// taken; a regular file is.
    #[test]
    fn only_regular_files_opened() {
        let dir = std::env::temp_dir().join(format!("pgdbg-mf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(open_regular(&fifo).is_none());
        let file = dir.join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(open_regular(&file).is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// One descriptor per file while a value lives: a second lookup of
    /// the same mapping gives the same open file.
    #[test]
    fn reused_while_alive() {
        let (me, exe, m) = own_exe();
        let a = verified_mapped_file(me, &exe, &m.dev, m.inode).unwrap();
        let b = verified_mapped_file(me, &exe, &m.dev, m.inode).unwrap();
        assert_eq!(a.path(), b.path());
        assert!(a.path().starts_with(FD_LINK));
    }

    /// Another file at the mapped path (what a rename over it leaves) is
    /// refused: the inode is checked on the open file.
    #[test]
    fn another_inode_refused() {
        let (me, exe, m) = own_exe();
        let e = verified_mapped_file(me, &exe, &m.dev, m.inode + 1).unwrap_err();
        assert!(e.contains("is not the file mapped"), "{e}");
    }
}
