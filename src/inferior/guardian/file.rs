//! Where the guardian's table lives: a file on tmpfs, `/dev/shm/
//! pgdbg-backend-PID-START` (START: the backend's start time in clock
//! ticks since boot, so a reused PID never matches), mode 0600.  It
//! outlives pgdbg and the guardian together (`pkill -9 -f pgdbg`, a cgroup
//! kill): then `pgdbg rescue PID`, `pgdbg ps` and the next `pgdbg attach`
//! find it and restore the backend from it as the guardian would have.
//! Removed when pgdbg detaches clean or a restore succeeds.  Where /dev/shm
//! cannot be used (missing, not writable) the table is an anonymous memory
//! file as before: then only the guardian can use it.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

pub const DIR: &str = "/dev/shm";
const PREFIX: &str = "pgdbg-backend-";

/// The table's path for the backend `pid` started at `start`.
pub fn path(pid: i32, start: u64) -> PathBuf {
    PathBuf::from(format!("{DIR}/{PREFIX}{pid}-{start}"))
}

/// Create the table file (it must not exist).  `Err(EEXIST)` means a table
/// of an earlier pgdbg is still there: that backend needs a restore first.
pub fn create(pid: i32, start: u64) -> std::io::Result<OwnedFd> {
    let c = CString::new(path(pid, start).into_os_string().into_encoded_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: open(2) with a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o600,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor we just opened.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Open an existing table file for reading and writing, only when it is a
/// regular file owned by this user, or (for root) by `backend_uid`, with
/// no access for others (a file someone else put there is never trusted:
/// it names addresses to write).
pub fn open(p: &std::path::Path, backend_uid: Option<u32>) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(p)?;
    let m = f.metadata()?;
    // SAFETY: geteuid(2) cannot fail.
    let me = unsafe { libc::geteuid() };
    let owner_ok = m.uid() == me || (me == 0 && Some(m.uid()) == backend_uid);
    if !m.file_type().is_file() || !owner_ok || m.mode() & 0o077 != 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EPERM));
    }
    Ok(OwnedFd::from(f))
}

/// Every table file there: (backend PID, start time, path).
pub fn all() -> Vec<(i32, u64, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(DIR) else {
        return Vec::new();
    };
    let mut v: Vec<(i32, u64, PathBuf)> = rd
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            let (pid, start) = name.strip_prefix(PREFIX)?.split_once('-')?;
            Some((pid.parse().ok()?, start.parse().ok()?, e.path()))
        })
        .collect();
    v.sort();
    v
}

pub fn remove(pid: i32, start: u64) {
    let _ = std::fs::remove_file(path(pid, start));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_names_pid_and_start() {
        assert_eq!(
            path(4711, 123456).to_str(),
            Some("/dev/shm/pgdbg-backend-4711-123456")
        );
    }
}
