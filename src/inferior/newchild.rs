//! A new child of the postmaster, just forked: is it to become a client
//! backend?  The postmaster forks one holding the connection it accepted
//! for it; its other children (autovacuum and parallel workers, background
//! workers) hold none.  Nothing is read or written in the process: copies
//! of its descriptors are looked at and closed.

use anyhow::{Result, bail};

/// How many connected stream sockets (a peer on the other end: not a
/// listening one) process `pid` holds, looked at through copies of its
/// descriptors (pidfd_getfd, Linux 5.6; needs ptrace permission).
pub fn connected_stream_sockets(pid: i32) -> Result<usize> {
    // SAFETY: pidfd_open(2) of a PID.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if pidfd < 0 {
        bail!(
            "cannot open process {pid} ({})",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: a descriptor we own from here.
    let _pidfd_owned =
        unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd) };
    let mut n = 0;
    let rd = std::fs::read_dir(format!("/proc/{pid}/fd"))?;
    for e in rd.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        if !target.to_string_lossy().starts_with("socket:") {
            continue;
        }
        let Some(num) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: pidfd_getfd(2): a copy of its descriptor, ours to close.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, num, 0) } as i32;
        if fd < 0 {
            continue;
        }
        // SAFETY: we own the copy.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        if sock_int(&fd, libc::SO_TYPE) == Some(libc::SOCK_STREAM) && has_peer(&fd) {
            n += 1;
        }
    }
    Ok(n)
}

fn sock_int(fd: &std::os::fd::OwnedFd, opt: i32) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt with an int of the right size.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

fn has_peer(fd: &std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed sockaddr_storage is valid.
    let mut sa: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getpeername into a buffer of its size.
    unsafe {
        libc::getpeername(
            fd.as_raw_fd(),
            &mut sa as *mut _ as *mut libc::sockaddr,
            &mut len,
        ) == 0
    }
}
