//! `attach --cluster`: workers started ahead ("spares", forks.rs) forked
//! from one process that has loaded the debug info and checked the script
//! once, instead of each one executed anew (about 0.1 s of CPU each: with
//! a stream of new connections, that was most of what each one cost).
//!
//! The supervisor (multi.rs) starts `pgdbg attach POSTMASTER --worker
//! --next-backend --fork-server`, which loads what a spare loads and then
//! serves on a socket at descriptor 3 (a spare's status pipe's): each request
//! carries the four descriptors a spare needs (standard input, output and
//! error, its status pipe) and the time left of `--for`; the server forks,
//! the child puts them in place and goes on as a spare
//! ([`serve`] returns in it), the server answers with the child's PID and
//! later with its exit status (it is the child's parent and reaps it).
//!
//! The server forks only while it is one thread (checked each time:
//! nothing of another thread may be left half-done in the child).  It
//! dies with the supervisor (a parent-death signal), and its children
//! with it, as executed workers die with the supervisor: each restores
//! its backend on that SIGTERM.  Told to end (its socket closed), it
//! forks no more and ends once every child has ended.

use anyhow::{Result, anyhow, bail};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The descriptors a forked spare gets, in this order, as 0, 1, 2 and 3.
const FDS: usize = 4;
/// The longest message either side sends.
const MSG: usize = 128;

// ---- messages with descriptors (SOCK_SEQPACKET, SCM_RIGHTS) ---------------

fn send(sock: RawFd, text: &str, fds: &[RawFd]) -> std::io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: text.as_ptr() as *mut libc::c_void,
        iov_len: text.len(),
    };
    let mut cbuf = [0u64; 8]; // room for CMSG_SPACE of 4 descriptors
    // SAFETY: msghdr over buffers that outlive the call; CMSG_* on the
    // control buffer sized above (checked against CMSG_SPACE).
    unsafe {
        let mut m: libc::msghdr = std::mem::zeroed();
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        if !fds.is_empty() {
            let bytes = std::mem::size_of_val(fds) as u32;
            let space = libc::CMSG_SPACE(bytes) as usize;
            assert!(space <= std::mem::size_of_val(&cbuf));
            m.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
            m.msg_controllen = space;
            let c = libc::CMSG_FIRSTHDR(&m);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(bytes) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr() as *const u8,
                libc::CMSG_DATA(c),
                bytes as usize,
            );
        }
        loop {
            if libc::sendmsg(sock, &m, libc::MSG_NOSIGNAL) >= 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// One message: Ok(None) when the other end is closed, Err(WouldBlock)
/// when `nonblock` and there is none.
fn recv(sock: RawFd, nonblock: bool) -> std::io::Result<Option<(String, Vec<OwnedFd>)>> {
    let mut buf = [0u8; MSG];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: as in `send`; each descriptor the kernel gave us is owned
    // once, by the OwnedFd made of it.
    unsafe {
        let mut m: libc::msghdr = std::mem::zeroed();
        m.msg_iov = &mut iov;
        m.msg_iovlen = 1;
        m.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        m.msg_controllen = std::mem::size_of_val(&cbuf);
        let flags = libc::MSG_CMSG_CLOEXEC | if nonblock { libc::MSG_DONTWAIT } else { 0 };
        let n = loop {
            let n = libc::recvmsg(sock, &mut m, flags);
            if n >= 0 {
                break n as usize;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        let mut fds = Vec::new();
        let mut c = libc::CMSG_FIRSTHDR(&m);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const RawFd;
                let count = ((*c).cmsg_len - libc::CMSG_LEN(0) as usize) / 4;
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            c = libc::CMSG_NXTHDR(&m, c);
        }
        if n == 0 && fds.is_empty() {
            return Ok(None);
        }
        Ok(Some((String::from_utf8_lossy(&buf[..n]).into_owned(), fds)))
    }
}

fn poll_in(fd: RawFd, d: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) over one pollfd we own.
    unsafe { libc::poll(&mut p, 1, d.as_millis().min(i32::MAX as u128) as i32) > 0 }
}

// ---- the server ---------------------------------------------------------------

/// The number of threads of this process.
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// In the server (`--fork-server`, with the debug info loaded and the
/// script checked): serve fork requests on `sock` (descriptor 3) until it is
/// closed and every child has ended (then None).  Returns
/// `Some(time left of --for)` in each forked child, which goes on as a
/// spare with its descriptors in place.
pub fn serve(sock: RawFd) -> Result<Option<Option<Duration>>> {
    let me = std::process::id() as i32;
    let mut children: Vec<i32> = Vec::new();
    let mut closing = false;
    send(sock, "ready", &[])?;
    loop {
        // reap, and say so
        loop {
            let mut st = 0;
            // SAFETY: waitpid(2) for any child of ours, not blocking.
            let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::__WALL) };
            if pid <= 0 {
                break;
            }
            children.retain(|&c| c != pid);
            // (the supervisor may be gone: nothing to do then)
            let _ = send(sock, &format!("exit {pid} {st}"), &[]);
        }
        if closing && children.is_empty() {
            return Ok(None);
        }
        if closing || !poll_in(sock, Duration::from_millis(50)) {
            if closing {
                std::thread::sleep(Duration::from_millis(20));
            }
            continue;
        }
        let (text, fds) = match recv(sock, true) {
            Ok(Some(m)) => m,
            Ok(None) => {
                closing = true;
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => {
                closing = true;
                continue;
            }
        };
        // "spare SEQ MS|-": answered "forked SEQ PID" or "error SEQ WHY"
        let w: Vec<&str> = text.split_whitespace().collect();
        let (seq, remaining) = match w.as_slice() {
            ["spare", seq, "-"] => (*seq, Ok(None)),
            ["spare", seq, ms] => (*seq, ms.parse().map(|ms| Some(Duration::from_millis(ms)))),
            _ => ("0", Ok(None)),
        };
        let refuse = |why: &str| {
            let _ = send(sock, &format!("error {seq} {why}"), &[]);
        };
        let Ok(remaining) = remaining else {
            refuse("a request this server does not know");
            continue;
        };
        if w.first() != Some(&"spare") {
            refuse("a request this server does not know");
            continue;
        }
        if fds.len() != FDS {
            refuse("a request without its four descriptors");
            continue;
        }
        let n = threads();
        if n != 1 {
            refuse(&format!(
                "the fork server runs {n} threads (it forks only with one)"
            ));
            continue;
        }
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: fork(2) of a process of one thread (checked just above):
        // the child is a whole copy, no lock is held by a thread it lacks.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            refuse(&format!("fork: {}", std::io::Error::last_os_error()));
            continue;
        }
        if pid == 0 {
            become_spare(me, &fds);
            return Ok(Some(remaining));
        }
        drop(fds);
        children.push(pid);
        let _ = send(sock, &format!("forked {seq} {pid}"), &[]);
    }
}

/// In the forked child: die with the server (as it dies with the
/// supervisor), its own process group (as an executed worker's), the
/// four descriptors as 0-3 (3 replaces the server's socket).
fn become_spare(server: i32, fds: &[OwnedFd]) {
    // SAFETY: prctl, getppid, setpgid and dup2 on descriptors we own; on
    // failure the child ends at once (the server reports its status).
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        if libc::getppid() != server {
            libc::_exit(1);
        }
        libc::setpgid(0, 0);
        for (to, fd) in fds.iter().enumerate() {
            // (each received descriptor is above 3: 0-3 were open)
            if libc::dup2(fd.as_raw_fd(), to as RawFd) < 0 {
                libc::_exit(1);
            }
        }
    }
    // the received copies close with `fds` in the caller (close-on-exec
    // was set on them; the dup2 copies are not)
}

// ---- the supervisor's side ------------------------------------------------------

/// The fork server as the supervisor sees it.
pub struct ForkServer {
    child: RefCell<Child>,
    sock: OwnedFd,
    threads: RefCell<Vec<std::thread::JoinHandle<()>>>,
    /// exit statuses it reported, by PID, not yet taken
    exits: RefCell<HashMap<i32, i32>>,
    /// its socket is closed (it ended)
    gone: std::cell::Cell<bool>,
    /// the last request's number
    seq: std::cell::Cell<u64>,
}

impl ForkServer {
    /// Wrap a started server (its socket's other end is its descriptor
    /// 3) and wait at most `d` for its word that it is ready.
    pub fn new(
        child: Child,
        threads: Vec<std::thread::JoinHandle<()>>,
        sock: OwnedFd,
        d: Duration,
    ) -> Result<ForkServer> {
        let s = ForkServer {
            child: RefCell::new(child),
            sock,
            threads: RefCell::new(threads),
            exits: RefCell::new(HashMap::new()),
            gone: std::cell::Cell::new(false),
            seq: std::cell::Cell::new(0),
        };
        let until = Instant::now() + d;
        loop {
            if crate::runtime::must_stop() {
                bail!("told to stop");
            }
            if poll_in(s.sock.as_raw_fd(), Duration::from_millis(100)) {
                match recv(s.sock.as_raw_fd(), true) {
                    Ok(Some((t, _))) if t == "ready" => return Ok(s),
                    Ok(Some((t, _))) => bail!("the fork server said {t:?} before it was ready"),
                    Ok(None) => bail!("the fork server ended before it was ready"),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => bail!("the fork server's socket: {e}"),
                }
            }
            if Instant::now() >= until {
                bail!("the fork server was not ready within {} s", d.as_secs());
            }
        }
    }

    /// The server's PID.
    pub fn pid(&self) -> i32 {
        self.child.borrow().id() as i32
    }

    /// Take what it said since the last look (exit statuses).
    fn pump(&self) {
        while !self.gone.get() {
            match recv(self.sock.as_raw_fd(), true) {
                Ok(Some((t, _))) => self.note(&t),
                Ok(None) => self.gone.set(true),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => self.gone.set(true),
            }
        }
    }

    fn note(&self, text: &str) {
        if let ["exit", pid, st] = text.split_whitespace().collect::<Vec<_>>().as_slice()
            && let (Ok(pid), Ok(st)) = (pid.parse(), st.parse())
        {
            self.exits.borrow_mut().insert(pid, st);
        }
    }

    /// Fork a spare with these descriptors as its 0-3 and `remaining`
    /// of `--for`: its PID.
    pub fn fork(&self, fds: [RawFd; FDS], remaining: Option<Duration>) -> Result<i32> {
        self.pump();
        if self.gone.get() {
            bail!("the fork server has ended");
        }
        // numbered: the answer to an earlier request that timed out is
        // never taken for this one's
        let seq = self.seq.get() + 1;
        self.seq.set(seq);
        let req = match remaining {
            Some(r) => format!("spare {seq} {}", r.as_millis().max(1)),
            None => format!("spare {seq} -"),
        };
        send(self.sock.as_raw_fd(), &req, &fds)?;
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            // (a frozen server must not keep the supervisor from passing
            // Ctrl-C or SIGTERM on to its workers)
            if crate::runtime::must_stop() || crate::runtime::sigint_seen() {
                bail!("told to stop while the fork server forked");
            }
            if !poll_in(self.sock.as_raw_fd(), Duration::from_millis(100)) {
                continue;
            }
            match recv(self.sock.as_raw_fd(), true) {
                Ok(Some((t, _))) => {
                    let w: Vec<&str> = t.splitn(3, ' ').collect();
                    match w.as_slice() {
                        ["forked", s, pid] if s.parse() == Ok(seq) => {
                            return pid
                                .trim()
                                .parse()
                                .map_err(|_| anyhow!("the fork server said {t:?}"));
                        }
                        ["error", s, why] if s.parse() == Ok(seq) => bail!("{why}"),
                        _ => self.note(&t),
                    }
                }
                Ok(None) => {
                    self.gone.set(true);
                    bail!("the fork server has ended");
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => bail!("the fork server's socket: {e}"),
            }
        }
        bail!("the fork server did not answer within 10 s")
    }

    /// The exit status of a child of the server, once it ended.  A child
    /// whose server ended first (it was killed: its children, told by
    /// their parent-death signal, restore their backends and end) is
    /// judged by /proc once it is gone or a zombie (status unknown: 1),
    /// not while it still detaches.
    fn status_of(&self, pid: i32) -> Option<ExitStatus> {
        self.pump();
        if let Some(st) = self.exits.borrow_mut().remove(&pid) {
            return Some(ExitStatus::from_raw(st));
        }
        (self.ended() && ended(pid)).then(|| ExitStatus::from_raw(1 << 8))
    }

    /// The server has ended (reaped here, or its socket closed).
    pub fn ended(&self) -> bool {
        // (reaped first: a killed server is no zombie of ours for long)
        let reaped = matches!(self.child.borrow_mut().try_wait(), Ok(Some(_)));
        reaped || self.gone.get()
    }

    /// End it: no more forks; it ends once its children have (at most
    /// `d`, then it is killed).
    pub fn end(self, d: Duration) {
        let ForkServer {
            child,
            sock,
            threads,
            ..
        } = self;
        drop(sock);
        let mut child = child.into_inner();
        let until = Instant::now() + d;
        while Instant::now() < until {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        for t in threads.into_inner() {
            let _ = t.join();
        }
    }
}

/// A worker's process: executed by the supervisor, or forked by the
/// fork server (not the supervisor's child: the server reports its end).
pub enum Proc {
    Exec(Child),
    Forked {
        pid: i32,
        server: Rc<ForkServer>,
        status: Option<ExitStatus>,
    },
}

impl Proc {
    /// Forked by a fork server that has ended since (its children end
    /// with it: not a failure of theirs).
    pub fn orphaned(&self) -> bool {
        matches!(self, Proc::Forked { server, .. } if server.ended())
    }

    pub fn id(&self) -> u32 {
        match self {
            Proc::Exec(c) => c.id(),
            Proc::Forked { pid, .. } => *pid as u32,
        }
    }

    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match self {
            Proc::Exec(c) => c.try_wait(),
            Proc::Forked {
                pid,
                server,
                status,
            } => {
                if status.is_none() {
                    *status = server.status_of(*pid);
                }
                Ok(*status)
            }
        }
    }

    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Proc::Exec(c) = self {
            return c.wait();
        }
        // a child gone from /proc whose status the server does not report
        // (a frozen server) is taken as ended after a second
        let mut gone_since: Option<Instant> = None;
        loop {
            if let Some(st) = self.try_wait()? {
                return Ok(st);
            }
            if ended(self.id() as i32) {
                let t = *gone_since.get_or_insert_with(Instant::now);
                if t.elapsed() > Duration::from_secs(1) {
                    return Ok(ExitStatus::from_raw(1 << 8));
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Process `pid` has ended: gone, or a zombie.
fn ended(pid: i32) -> bool {
    crate::inferior::procfs::status(pid).map_or(true, |s| s.state.starts_with('Z'))
}

/// A pipe as (read end, write end), both close-on-exec.
pub fn pipe() -> Result<(File, File)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    Ok((File::from(r), File::from(w)))
}

/// A connected pair of sequenced-packet sockets, close-on-exec.
pub fn socketpair() -> Result<(OwnedFd, OwnedFd)> {
    let mut sv = [0; 2];
    // SAFETY: socketpair(2) into an array of two.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: two new descriptors, owned here only.
    Ok(unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_their_descriptors() {
        let (a, b) = socketpair().unwrap();
        let (r, mut w) = pipe().unwrap();
        send(a.as_raw_fd(), "spare 1500", &[r.as_raw_fd()]).unwrap();
        let (t, fds) = recv(b.as_raw_fd(), false).unwrap().unwrap();
        assert_eq!(t, "spare 1500");
        assert_eq!(fds.len(), 1);
        // the descriptor received reads what the pipe's writer writes
        w.write_all(b"x").unwrap();
        let mut got = [0u8; 1];
        let mut f = File::from(fds.into_iter().next().unwrap());
        std::io::Read::read_exact(&mut f, &mut got).unwrap();
        assert_eq!(&got, b"x");
        assert!(matches!(
            recv(b.as_raw_fd(), true),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        ));
        drop(a);
        assert!(recv(b.as_raw_fd(), false).unwrap().is_none());
    }
}
