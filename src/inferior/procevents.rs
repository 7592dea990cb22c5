//! The kernel's process events connector (netlink `NETLINK_CONNECTOR`,
//! `CN_IDX_PROC`): a message for every fork on the machine, sent before
//! the new process first runs.  `pgdbg attach --cluster` learns of a new
//! backend from it instead of waiting for the next look at the
//! postmaster's children.  Subscribing needs CAP_NET_ADMIN in the initial
//! user namespace: refused otherwise (the caller falls back to looking).
//! The socket's buffer can overflow when forks come faster than they are
//! read (ENOBUFS): the events in it are lost, counted in `lost`.

use anyhow::{Result, bail};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const NETLINK_CONNECTOR: i32 = 11;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_EVENT_NONE: u32 = 0;
const PROC_EVENT_FORK: u32 = 1;
/// struct nlmsghdr
const NLMSG_HDR: usize = 16;
/// struct cn_msg: id (idx, val), seq, ack, len (u16), flags (u16)
const CN_MSG: usize = 20;
/// struct proc_event up to its union: what, cpu, timestamp_ns
const EV_HDR: usize = 16;

/// A fork seen by the kernel: `child` is a new process (not a thread:
/// those are left out), `parent` the process that forked it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fork {
    pub parent: i32,
    pub child: i32,
    /// When the kernel sent it (CLOCK_MONOTONIC, ns).
    pub at_ns: u64,
}

pub struct ProcEvents {
    fd: OwnedFd,
    /// Receive errors that meant events were dropped (ENOBUFS).
    pub lost: u64,
    /// Forks read while `open` waited for the kernel's acknowledgement:
    /// the first ones `forks` gives.
    early: Vec<Fork>,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}

/// The fork an event of kind `what` with data `d` (its union) says, if
/// it is one of a new process (a new thread is not).
fn fork_of(what: u32, at_ns: u64, d: &[u8]) -> Option<Fork> {
    // fork: parent_pid, parent_tgid, child_pid, child_tgid
    if what != PROC_EVENT_FORK || d.len() < 16 {
        return None;
    }
    let (ptgid, cpid, ctgid) = (u32_at(d, 4), u32_at(d, 8), u32_at(d, 12));
    (cpid == ctgid).then_some(Fork {
        parent: ptgid as i32,
        child: ctgid as i32,
        at_ns,
    })
}

impl ProcEvents {
    /// Subscribe.  The error says why the kernel refused.
    pub fn open() -> Result<ProcEvents> {
        let mut ev = Self::subscribe()?;
        ev.acknowledged()?;
        Ok(ev)
    }

    /// The socket bound to the events' group, the subscription sent (its
    /// acknowledgement not read yet).
    fn subscribe() -> Result<ProcEvents> {
        // SAFETY: socket(2) with constant arguments.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                NETLINK_CONNECTOR,
            )
        };
        if raw < 0 {
            bail!(
                "no process events connector ({})",
                std::io::Error::last_os_error()
            );
        }
        // SAFETY: a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // a large buffer: a burst of forks elsewhere on the machine must
        // not push out the postmaster's (FORCE needs CAP_NET_ADMIN, which
        // the subscription needs anyway)
        let size: libc::c_int = 1 << 20;
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
            // SAFETY: setsockopt with an int of the right size.
            let r = unsafe {
                libc::setsockopt(
                    raw,
                    libc::SOL_SOCKET,
                    opt,
                    &size as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as u32,
                )
            };
            if r == 0 {
                break;
            }
        }
        // SAFETY: a zeroed sockaddr_nl is valid; fields set below.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = CN_IDX_PROC;
        // SAFETY: bind(2) with a sockaddr_nl of its size.
        let r = unsafe {
            libc::bind(
                raw,
                &sa as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            bail!(
                "cannot subscribe to process events ({}; they need root or CAP_NET_ADMIN)",
                std::io::Error::last_os_error()
            );
        }
        // nlmsghdr + cn_msg + the operation
        let total = NLMSG_HDR + CN_MSG + 4;
        let mut msg = vec![0u8; total];
        msg[0..4].copy_from_slice(&(total as u32).to_ne_bytes());
        msg[4..6].copy_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
        msg[12..16].copy_from_slice(&std::process::id().to_ne_bytes());
        let c = NLMSG_HDR;
        msg[c..c + 4].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
        msg[c + 4..c + 8].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
        msg[c + 16..c + 18].copy_from_slice(&4u16.to_ne_bytes());
        msg[c + CN_MSG..].copy_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
        // SAFETY: send(2) of a buffer we own.
        let r = unsafe { libc::send(raw, msg.as_ptr() as *const libc::c_void, total, 0) };
        if r < 0 {
            bail!(
                "cannot subscribe to process events ({})",
                std::io::Error::last_os_error()
            );
        }
        Ok(ProcEvents {
            fd,
            lost: 0,
            early: Vec::new(),
        })
    }

    /// Wait for the kernel's answer to the subscription.
    fn acknowledged(&mut self) -> Result<()> {
        // The kernel answers the subscription with an acknowledgement
        // carrying its error (EPERM without CAP_NET_ADMIN); forks that come
        // before it are kept for the first `forks`: a fork after the
        // bind is heard, however long this process waited for a CPU
        // meanwhile.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        loop {
            if std::time::Instant::now() > deadline {
                bail!("the kernel did not acknowledge the subscription to process events");
            }
            self.wait(std::time::Duration::from_millis(100));
            let mut acked = None;
            let mut early = Vec::new();
            self.read_each(|what, at_ns, data| {
                if what == PROC_EVENT_NONE && data.len() >= 4 {
                    acked = Some(u32_at(data, 0));
                }
                early.extend(fork_of(what, at_ns, data));
            });
            self.early.extend(early);
            match acked {
                Some(0) => return Ok(()),
                Some(e) => bail!(
                    "cannot subscribe to process events ({}; they need root or CAP_NET_ADMIN)",
                    std::io::Error::from_raw_os_error(e as i32)
                ),
                None => {}
            }
        }
    }

    /// Let the kernel drop every event but the forks of `parent` before
    /// it queues them: a classic BPF filter on the socket, so that the
    /// machine's other forks neither wake the reader nor fill its buffer.
    /// The acknowledgements (PROC_EVENT_NONE) are dropped too, those of
    /// other processes' subscriptions, multicast to every listener: `open`
    /// has read its own, and nothing after it needs one.  Events queued
    /// before are still read (`forks` gives every fork it reads).
    pub fn only_forks_of(&self, parent: i32) -> Result<()> {
        // offsets in the datagram: nlmsghdr, cn_msg, then the event
        const WHAT: u32 = (NLMSG_HDR + CN_MSG) as u32;
        // fork: parent_pid, parent_tgid, ...
        const PARENT_TGID: u32 = WHAT + EV_HDR as u32 + 4;
        // a classic BPF load reads a word in network order: the event's
        // host-order words are compared as those bytes read so
        let word = |v: u32| u32::from_be_bytes(v.to_ne_bytes());
        let ins = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
            code: code as u16,
            jt,
            jf,
            k,
        };
        let (ld, jeq, ret) = (
            libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            libc::BPF_RET | libc::BPF_K,
        );
        let prog = [
            ins(ld, 0, 0, WHAT),
            // a fork: to 2, else dropped
            ins(jeq, 0, 3, word(PROC_EVENT_FORK)),
            ins(ld, 0, 0, PARENT_TGID),
            // its parent: kept, else dropped
            ins(jeq, 0, 1, word(parent as u32)),
            ins(ret, 0, 0, u32::MAX),
            ins(ret, 0, 0, 0),
        ];
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: setsockopt with a sock_fprog over `prog`, which outlives
        // the call (the kernel copies it).
        let r = unsafe {
            libc::setsockopt(
                self.fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                &fprog as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::sock_fprog>() as u32,
            )
        };
        if r < 0 {
            bail!(
                "cannot filter the process events ({})",
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }

    /// CLOCK_MONOTONIC now, in ns (the clock of `Fork::at_ns`).
    pub fn now_ns() -> u64 {
        super::tscclock::monotonic_ns()
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Wait at most `d` for an event to read.
    pub fn wait(&self, d: std::time::Duration) {
        let mut p = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) on one pollfd we own.
        unsafe { libc::poll(&mut p, 1, d.as_millis().min(i32::MAX as u128) as i32) };
    }

    /// The forks received since the last call (never blocks).
    pub fn forks(&mut self) -> Vec<Fork> {
        let mut out = std::mem::take(&mut self.early);
        self.read_each(|what, at_ns, d| out.extend(fork_of(what, at_ns, d)));
        out
    }

    /// Each event's kind and data (its union) until none is left.
    fn read_each(&mut self, mut f: impl FnMut(u32, u64, &[u8])) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: recv(2) into a buffer we own.
            let n = unsafe {
                libc::recv(
                    self.fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    0,
                )
            };
            if n < 0 {
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) => {
                        self.lost += 1;
                        continue;
                    }
                    _ => return,
                }
            }
            let b = &buf[..n as usize];
            let mut off = 0;
            // one datagram may hold several netlink messages
            while off + NLMSG_HDR <= b.len() {
                let len = u32_at(b, off) as usize;
                if len < NLMSG_HDR || off + len > b.len() {
                    break;
                }
                let m = &b[off + NLMSG_HDR..off + len];
                if m.len() >= CN_MSG + EV_HDR
                    && u32_at(m, 0) == CN_IDX_PROC
                    && u32_at(m, 4) == CN_VAL_PROC
                {
                    let e = &m[CN_MSG..];
                    let at = u64::from_ne_bytes(e[8..16].try_into().unwrap());
                    f(u32_at(e, 0), at, &e[EV_HDR..]);
                }
                off += (len + 3) & !3;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ProcEvents;

    /// A fork after the bind, before the subscription's acknowledgement
    /// is read (a subscriber that waited for a CPU meanwhile), is given
    /// by the first `forks`, not dropped with the acknowledgement.
    #[test]
    fn a_fork_before_the_acknowledgement_is_heard() {
        let Ok(mut ev) = ProcEvents::subscribe() else {
            eprintln!("process events refused here: not tested");
            return;
        };
        let child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        let _ = child.wait_with_output();
        // the kernel sends the fork's event before the child first runs:
        // queued behind the acknowledgement, or before it
        if ev.acknowledged().is_err() {
            eprintln!("process events refused here: not tested");
            return;
        }
        let me = std::process::id() as i32;
        let heard: Vec<i32> = ev
            .forks()
            .into_iter()
            .filter(|f| f.parent == me)
            .map(|f| f.child)
            .collect();
        assert!(heard.contains(&pid), "our child {pid} not heard: {heard:?}");
    }

    /// Filtered to our own forks, the socket gives no fork of another
    /// parent (here a shell's child), and does give ours.  Skipped where
    /// the subscription is refused (no CAP_NET_ADMIN).
    #[test]
    fn only_the_forks_of_one_parent() {
        let Ok(mut ev) = ProcEvents::open() else {
            eprintln!("process events refused here: not tested");
            return;
        };
        let me = std::process::id() as i32;
        ev.only_forks_of(me).unwrap();
        // queued before the filter
        ev.forks();
        // a child of ours, which forks a grandchild (`true &`)
        let sh = std::process::Command::new("sh")
            .args(["-c", "true & wait"])
            .spawn()
            .unwrap();
        let shell = sh.id() as i32;
        let _ = sh.wait_with_output();
        let mut seen = Vec::new();
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_secs(2) && !seen.contains(&shell) {
            ev.wait(std::time::Duration::from_millis(50));
            seen.extend(ev.forks().into_iter().map(|f| {
                assert_eq!(f.parent, me, "a fork of another parent passed: {f:?}");
                f.child
            }));
        }
        assert!(
            seen.contains(&shell),
            "our child {shell} not heard: {seen:?}"
        );
        // another subscription's acknowledgement, sent to every listener,
        // is dropped too
        let other = ProcEvents::open().unwrap();
        ev.wait(std::time::Duration::from_millis(200));
        let mut kinds = Vec::new();
        ev.read_each(|what, _, _| kinds.push(what));
        assert!(
            !kinds.contains(&super::PROC_EVENT_NONE),
            "an acknowledgement passed the filter: {kinds:?}"
        );
        drop(other);
    }
}
