//! A process held by pgdbg just after it was forked, until a worker can
//! take it (`pgdbg attach --cluster`): seized and stopped with
//! PTRACE_SEIZE + PTRACE_INTERRUPT, nothing read or written in it.
//!
//! While held it is a ptrace stop of this process: if pgdbg dies, the
//! kernel detaches it and it runs on.  `release` lets it run now.
//! `hand_over` passes it to another tracer: a process can have one tracer
//! only, so it is detached into a job-control stop (a SIGSTOP queued while
//! it is held, taken the moment it is let go: it runs no instruction of
//! its own in between) that the next tracer seizes and ends with a
//! SIGCONT (`Target::end_hand_over`).  The postmaster never hears of
//! either stop (SA_NOCLDSTOP, reaped with WNOHANG: hold.rs).  Every thread
//! of pgdbg may call these, but all on one process's thread: ptrace binds
//! a tracee to the thread that seized it (the supervisor's main thread).

use super::hold::proc_state;
use anyhow::{Result, anyhow, bail};
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

pub struct Seized {
    pid: Pid,
    /// Still ours to let go (false once released or handed over).
    held: bool,
    pub since: Instant,
}

impl Seized {
    /// Seize `pid` and wait for it to stop.  None when it exited first.
    pub fn seize(pid: i32) -> Result<Option<Seized>> {
        let since = Instant::now();
        let p = Pid::from_raw(pid);
        match ptrace::seize(p, ptrace::Options::empty()) {
            Ok(()) => {}
            Err(Errno::ESRCH) => return Ok(None),
            Err(e) => bail!("cannot seize new process {pid} ({e})"),
        }
        let mut s = Seized {
            pid: p,
            held: true,
            since,
        };
        ptrace::interrupt(p).map_err(|e| anyhow!("cannot stop new process {pid} ({e})"))?;
        // a signal sent to it meanwhile is reported first: passed on, and
        // the interrupt's stop still comes
        for _ in 0..1000 {
            match waitpid(p, Some(WaitPidFlag::__WALL)) {
                Ok(WaitStatus::PtraceEvent(_, _, ev)) if ev == libc::PTRACE_EVENT_STOP => {
                    return Ok(Some(s));
                }
                Ok(WaitStatus::Stopped(_, sig)) => {
                    let _ = ptrace::cont(p, Some(sig));
                }
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => {
                    s.held = false;
                    return Ok(None);
                }
                Err(Errno::EINTR) => {}
                Ok(_) => {
                    let _ = ptrace::cont(p, None);
                }
                Err(e) => bail!("waiting for new process {pid} failed ({e})"),
            }
        }
        bail!("new process {pid} did not stop")
    }

    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Let it run on, untouched.
    pub fn release(mut self) {
        self.let_go();
    }

    fn let_go(&mut self) {
        if std::mem::take(&mut self.held) {
            let _ = ptrace::detach(self.pid, None);
        }
    }

    /// Detach it into a job-control stop for another tracer (see the
    /// module comment); back when it is stopped with no tracer.  On an
    /// error it runs on (or has exited).
    pub fn hand_over(mut self) -> Result<()> {
        let pid = self.pid();
        // SAFETY: tgkill to the held process's only thread.
        let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, pid, libc::SIGSTOP) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            self.let_go();
            bail!("cannot stop new process {pid} ({e})");
        }
        self.held = false;
        // from its interrupt stop: the SIGSTOP is taken as it leaves it
        if let Err(e) = ptrace::detach(self.pid, None) {
            // SAFETY: kill(2): it must not stay stopped
            unsafe { libc::kill(pid, libc::SIGCONT) };
            bail!("cannot let go of new process {pid} ({e})");
        }
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            match proc_state(pid) {
                Some('T') => return Ok(()),
                None | Some('Z' | 'X') => bail!("new process {pid} exited"),
                _ if Instant::now() > until => {
                    // SAFETY: kill(2): never leave it stopped later
                    unsafe { libc::kill(pid, libc::SIGCONT) };
                    bail!("new process {pid} did not stop for its worker");
                }
                _ => std::thread::sleep(Duration::from_micros(50)),
            }
        }
    }
}

impl Drop for Seized {
    fn drop(&mut self) {
        self.let_go();
    }
}

/// Let a process that was handed over (stopped, no tracer) run, when the
/// tracer it was meant for never took it.  Only a stopped, untraced
/// process is sent the SIGCONT.
pub fn let_run_if_stopped_untraced(pid: i32) {
    let untraced = super::procfs::status(pid).is_ok_and(|s| s.tracer_pid == 0);
    if untraced && proc_state(pid) == Some('T') {
        // SAFETY: kill(2)
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
}

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
