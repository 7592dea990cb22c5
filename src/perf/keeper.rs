//! The keeper: a small process that opens pgdbg's kernel uprobes (the
//! `uprobe` PMU's events and tracefs-defined ones) and holds a copy of
//! each until pgdbg closes it or dies.
//!
//! Why: the kernel writes a uprobe's int3 into the backend while the
//! process that opens the event is inside `perf_event_open`, and takes it
//! out when the last copy of the event is closed.  Both writes go through
//! the kernel's "get user pages", which gives up when the calling process
//! has a SIGKILL pending; the kernel then keeps the uprobe registered for
//! good ("uprobe: pgdbg:PID failed to unregister, leaking uprobe"), and a
//! later debugger's breakpoint at that address in a backend that has had a
//! uprobe hit sees no hit.  A kill of pgdbg during an open leaked about
//! one time in two (a C loop of open and close, 54 leaks in 100 kills on
//! a 6.18 kernel); with the opens made by a process that was not being
//! killed, none.  So every uprobe event is opened here, in a process that
//! ignores SIGINT/SIGTERM/SIGHUP in its own session and is not killed with
//! pgdbg, and its last copy is closed here: pgdbg closes its own copy (and
//! its ring) first, then asks the keeper to close its one and waits (at
//! most 5 s: a keeper that does not answer is given up, never waited on
//! for ever).
//!
//! One socket pair (`SOCK_SEQPACKET`) joins them; the keeper's end is its
//! standard input.  Requests: open (`O`, the thread, the CPU, the attribute block,
//! the uprobe's file, by path or by a descriptor sent with it) answered
//! with the event's descriptor (`SCM_RIGHTS`)
//! and an id, or an errno; close (`C`, the id) answered once closed.  When
//! the socket closes (pgdbg ended or was killed) the keeper waits until
//! pgdbg's exit is through (it is a zombie or gone: its own copies are
//! closed), closes every event it still holds, removes pgdbg's tracefs
//! definitions (group `pgdbg_<pid>_<start time>`) and exits.
//!
//! Not covered: a SIGKILL of the keeper itself while it opens or closes an
//! event.  When the keeper cannot be started, pgdbg opens the events
//! itself and says so once.

use super::Attr;
use std::collections::HashMap;
use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Mutex, OnceLock};

/// The hidden command line that runs a keeper.
pub const ARG: &str = "__pgdbg_keeper";

/// Set by pgdbg's `main`: this executable can run a keeper (a program
/// using the library, a test, opens its events itself).
static CAN_START: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Called by pgdbg's `main`, which runs [`main`] for [`ARG`].
pub fn enable() {
    CAN_START.store(true, std::sync::atomic::Ordering::Relaxed);
}

const ATTR: usize = std::mem::size_of::<Attr>();
/// The longest path sent (the kernel takes at most PATH_MAX, 4096).
const MAX_PATH: usize = 8192;
/// A request's largest size: kind, thread, CPU, attribute block, a path.
const MAX_MSG: usize = 1 + 8 + ATTR + MAX_PATH;
/// How long pgdbg waits for an answer of the keeper.
const ANSWER_MS: i32 = 5000;

/// A perf event's descriptor; when the keeper holds a copy, dropping this
/// closes pgdbg's copy first and then has the keeper close its own.
///
/// Closing an event that placed a uprobe is slow: the kernel removes the
/// probe under one global lock and waits for an RCU grace period each
/// time (about 80 ms per event on a 6.18 kernel, not faster when closed
/// from several threads), so `latency` of 200 functions would take half a
/// minute to end.  Nothing of that needs the backend stopped, nor pgdbg's
/// command to wait: such an event is disabled at once (no more records)
/// and its last copy is closed by a thread of pgdbg's in the background
/// ([`settle`] waits for it before pgdbg writes into the backend's code).
pub struct PerfFd {
    fd: Option<OwnedFd>,
    kept: Option<u64>,
    /// a uprobe's event: closed in the background
    uprobe: bool,
}

impl AsRawFd for PerfFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }
}

impl Drop for PerfFd {
    fn drop(&mut self) {
        let fd = self.fd.take();
        if !self.uprobe {
            drop(fd);
            if let Some(id) = self.kept {
                release(id);
            }
            return;
        }
        if let Some(f) = &fd {
            // no more hits counted or recorded from now on (cheap: the
            // probe stays placed until the event is freed)
            // SAFETY: an ioctl without argument on our descriptor.
            unsafe { libc::ioctl(f.as_raw_fd(), super::IOC_DISABLE, 0) };
        }
        match self.kept {
            // pgdbg's copy is not the last one: closing it is quick
            Some(id) => {
                drop(fd);
                closer::queue(closer::Closing::Kept(id));
            }
            None => {
                if let Some(f) = fd {
                    closer::queue(closer::Closing::Own(f));
                }
            }
        }
    }
}

pub(crate) use closer::{Closing, queue as queue_closing};
pub use closer::{finish, settle};

/// The thread that closes the last copies of uprobe events in the
/// background, one after the other (see [`PerfFd`]).
mod closer {
    use std::os::fd::OwnedFd;
    use std::sync::mpsc::{Sender, channel};
    use std::sync::{Condvar, Mutex};
    use std::time::{Duration, Instant};

    pub enum Closing {
        /// the keeper's copy of event `id` (pgdbg's is closed)
        Kept(u64),
        /// pgdbg's own, last copy (no keeper)
        Own(OwnedFd),
        /// a tracefs definition to remove (`-:group/name` appended to
        /// `uprobe_events` under root): queued after its events, whose
        /// close is still under way when the definition is dropped (the
        /// kernel refuses to remove a definition in use, and it would be
        /// left behind)
        Definition(std::path::PathBuf, String),
    }

    /// Done in pgdbg's thread or the closer's.  When pgdbg ends (`ending`)
    /// the keeper's copies are left to the keeper (it closes what it holds
    /// once pgdbg has exited, and removes pgdbg's definitions); pgdbg's
    /// own copies are still closed here, not forgotten: nobody else would
    /// close them before pgdbg's exit, nor remove their definitions after
    /// it.
    fn close(c: Closing, ending: bool) {
        match c {
            Closing::Kept(id) if !ending => super::release(id),
            Closing::Kept(_) => {}
            Closing::Own(fd) => drop(fd),
            Closing::Definition(root, ev) => super::super::uprobe_events::remove(&root, &ev),
        }
    }

    struct State {
        /// events queued or being closed
        pending: usize,
        /// of which pgdbg's own copies (no keeper)
        own: usize,
        /// pgdbg ends: what is still queued for the keeper is left to it
        ending: bool,
    }

    static STATE: Mutex<State> = Mutex::new(State {
        pending: 0,
        own: 0,
        ending: false,
    });
    static DONE: Condvar = Condvar::new();
    static QUEUE: Mutex<Option<Sender<Closing>>> = Mutex::new(None);

    fn state() -> std::sync::MutexGuard<'static, State> {
        STATE.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn done(own: bool) {
        let mut st = state();
        st.pending -= 1;
        st.own -= usize::from(own);
        DONE.notify_all();
    }

    pub fn queue(c: Closing) {
        let own = matches!(c, Closing::Own(_));
        {
            let mut st = state();
            st.pending += 1;
            st.own += usize::from(own);
        }
        let mut q = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
        if q.is_none() {
            let (tx, rx) = channel::<Closing>();
            let spawned = std::thread::Builder::new()
                .name("pgdbg-uprobe-closer".into())
                .spawn(move || {
                    crate::runtime::block_in_this_thread();
                    for c in rx {
                        let own = matches!(c, Closing::Own(_));
                        let ending = state().ending;
                        close(c, ending);
                        done(own);
                    }
                });
            match spawned {
                Ok(_) => *q = Some(tx),
                Err(e) => {
                    // no thread (out of resources): closed here, slowly,
                    // as before there was a thread; never a panic
                    crate::inferior::log::debug(&format!("no thread to close uprobes ({e})"));
                }
            }
        }
        let c = match q.as_ref() {
            Some(tx) => match tx.send(c) {
                Ok(()) => return,
                // the thread is gone (it never ends while pgdbg runs)
                Err(e) => e.0,
            },
            None => c,
        };
        drop(q);
        let ending = state().ending;
        close(c, ending);
        done(own);
    }

    /// Wait until every uprobe pgdbg has closed is out of the backend (its
    /// code is the file's again where they were), or `stop` says to give
    /// up.  Says so in one line when it is long.  Returns whether none is
    /// left.
    pub fn settle(stop: &dyn Fn() -> bool) -> bool {
        wait(stop, None)
    }

    /// How long pgdbg's exit waits for the kernel to remove its uprobes
    /// (the backend is detached and runs meanwhile); the rest is left to
    /// the keeper, which removes them once pgdbg has exited.
    const AT_EXIT: Duration = Duration::from_secs(10);

    /// pgdbg ends: its uprobes are removed before it exits, so that its
    /// end means the backend's code is the file's again, within
    /// [`AT_EXIT`]; what the keeper holds is left then to the keeper (a
    /// keeper that does not answer is given up as usual, within 5 s);
    /// pgdbg's own copies are closed before it exits all the same.
    pub fn finish() {
        if !wait(&|| false, Some(AT_EXIT)) {
            let n = {
                let mut st = state();
                st.ending = true;
                st.pending - st.own
            };
            if n > 0 {
                crate::runtime::sink().warn(format_args!(
                    "pgdbg: {n} uprobe{} of pgdbg's are still being removed; the process that \
                     holds them removes them after pgdbg's exit (about 80 ms each; the backend \
                     runs)",
                    if n == 1 { "" } else { "s" }
                ));
            }
            // the keeper's left to it, pgdbg's own closed
            wait(&|| false, None);
        }
    }

    fn wait(stop: &dyn Fn() -> bool, limit: Option<Duration>) -> bool {
        let t0 = Instant::now();
        let mut said = false;
        let mut st = state();
        while st.pending > 0 {
            if stop() || limit.is_some_and(|l| t0.elapsed() >= l) {
                return false;
            }
            if !said && !st.ending && t0.elapsed() > Duration::from_secs(1) {
                said = true;
                crate::runtime::sink().warn(format_args!(
                    "pgdbg: waiting for the kernel to remove {} uprobe{} of pgdbg's (about 80 ms \
                     each; the backend runs meanwhile)",
                    st.pending,
                    if st.pending == 1 { "" } else { "s" }
                ));
            }
            st = DONE
                .wait_timeout(st, Duration::from_millis(20))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }
}

/// The uprobe PMU's type, if this kernel has it.
fn uprobe_kind() -> Option<u32> {
    static KIND: OnceLock<Option<u32>> = OnceLock::new();
    *KIND.get_or_init(|| super::pmu::pmu_type().ok())
}

/// Events that write an int3 into the traced process: tracefs-defined
/// uprobes (tracepoints) and the uprobe PMU's.
fn places_uprobe(kind: u32) -> bool {
    kind == super::pmu::PERF_TYPE_TRACEPOINT || Some(kind) == uprobe_kind()
}

fn sys_open(attr: &Attr, tid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: a perf_event_attr of `attr.size` bytes; for a uprobe its
    // config1 points to a NUL-terminated path that outlives the call (set
    // by `open` and the keeper from a CStr they hold), else is 0.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const Attr,
            tid,
            cpu,
            -1i32,
            super::PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Open `attr` on thread `tid`: through the keeper when the event places
/// a uprobe, else here.  A uprobe PMU event names its file by `path`
/// (config1 points to it, as the kernel expects).
pub fn open(attr: &Attr, path: Option<&CStr>, tid: i32) -> std::io::Result<PerfFd> {
    open_on(attr, path, tid, -1)
}

/// [`open`] on CPU `cpu` only (-1: any), as `perf_event_open` takes it.
pub fn open_on(attr: &Attr, path: Option<&CStr>, tid: i32, cpu: i32) -> std::io::Result<PerfFd> {
    let mut attr = *attr;
    attr.bp_addr = match path {
        Some(p) => p.as_ptr() as u64,
        None if Some(attr.kind) == uprobe_kind() => 0,
        None => attr.bp_addr,
    };
    let attr = &attr;
    // PGDBG_NO_KEEPER=1 opens them here (to show what the keeper is for)
    if !places_uprobe(attr.kind)
        || !CAN_START.load(std::sync::atomic::Ordering::Relaxed)
        || crate::config::get().no_keeper
    {
        return sys_open(attr, tid, cpu).map(|fd| PerfFd {
            fd: Some(fd),
            kept: None,
            uprobe: places_uprobe(attr.kind),
        });
    }
    let path: &[u8] = path.map_or(&[], |p| p.to_bytes());
    // a file pgdbg opened and verified (`mappedfile::VerifiedFile`): the
    // keeper is sent the descriptor itself, which names that file however
    // late the keeper reads the request (a number of pgdbg's may be
    // another file's by then, and pgdbg's /proc may be closed to it)
    let passed: Option<RawFd> =
        match path.strip_prefix(crate::inferior::mappedfile::FD_LINK.as_bytes()) {
            Some(n) => Some(
                std::str::from_utf8(n)
                    .ok()
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EBADF))?,
            ),
            None => None,
        };
    if path.len() > MAX_PATH {
        return Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    let mut guard = KEEPER.lock().unwrap_or_else(|e| e.into_inner());
    if guard.is_none() {
        *guard = Some(Conn::start().map_err(|e| {
            crate::runtime::sink().warn(format_args!(
                "pgdbg: the process that holds kernel uprobes could not be started ({e}): pgdbg \
                 opens them itself, and a kill of pgdbg while it opens or closes one can leave \
                 the uprobe in the kernel until reboot"
            ));
        }));
    }
    if let Some(Ok(conn)) = guard.as_mut() {
        match conn.open(attr, tid, cpu, path, passed) {
            Ok(Ok((fd, id))) => {
                return Ok(PerfFd {
                    fd: Some(fd),
                    kept: Some(id),
                    uprobe: true,
                });
            }
            Ok(Err(e)) => return Err(e),
            Err(e) => {
                gone(&e);
                *guard = Some(Err(()));
            }
        }
    }
    drop(guard);
    sys_open(attr, tid, cpu).map(|fd| PerfFd {
        fd: Some(fd),
        kept: None,
        uprobe: true,
    })
}

/// The keeper is given up: said once, when it happens.
fn gone(e: &std::io::Error) {
    crate::runtime::sink().warn(format_args!(
        "pgdbg: the process that holds kernel uprobes is gone ({e}): pgdbg opens and closes \
         them itself from now on (a stopped keeper closes its copies once it runs again)"
    ));
}

/// Have the keeper close its copy of event `id` (pgdbg's is closed).
fn release(id: u64) {
    let mut guard = KEEPER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(Ok(conn)) = guard.as_mut() {
        let mut req = vec![b'C'];
        req.extend_from_slice(&id.to_le_bytes());
        if let Err(e) = conn.request(&req) {
            gone(&e);
            *guard = Some(Err(()));
        }
    }
}

/// pgdbg's end of the socket: None until the first uprobe is opened,
/// Err once the keeper could not be had.
static KEEPER: Mutex<Option<Result<Conn, ()>>> = Mutex::new(None);

struct Conn {
    sock: OwnedFd,
    _child: std::process::Child,
}

impl Conn {
    fn start() -> std::io::Result<Conn> {
        let mut fds = [0i32; 2];
        // SAFETY: socketpair(2) into a two-element array.
        if unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        } < 0
        {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: two descriptors the kernel just gave us.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let start = crate::inferior::procfs::start_time(std::process::id() as i32).unwrap_or(0);
        let mut cmd = std::process::Command::new("/proc/self/exe");
        cmd.arg(ARG)
            .arg(std::process::id().to_string())
            .arg(start.to_string())
            .stdin(std::process::Stdio::from(theirs))
            // never holds pgdbg's output open
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid(2) only, between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        Ok(Conn {
            sock: ours,
            _child: child,
        })
    }

    /// Send `req` and read the answer (with a descriptor, if one came).
    /// A keeper that does not answer within [`ANSWER_MS`] (stopped, or
    /// stuck in the kernel) is given up: pgdbg never hangs on it.
    fn request(&mut self, req: &[u8]) -> std::io::Result<(Vec<u8>, Option<OwnedFd>)> {
        self.request_passing(req, None)
    }

    /// [`Self::request`], sending descriptor `fd` with it.
    fn request_passing(
        &mut self,
        req: &[u8],
        fd: Option<RawFd>,
    ) -> std::io::Result<(Vec<u8>, Option<OwnedFd>)> {
        send(self.sock.as_raw_fd(), req, fd)?;
        let mut p = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let t0 = std::time::Instant::now();
        loop {
            let left = ANSWER_MS - t0.elapsed().as_millis().min(ANSWER_MS as u128) as i32;
            // SAFETY: one pollfd.
            let n = unsafe { libc::poll(&mut p, 1, left) };
            if n > 0 {
                break;
            }
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {} s", ANSWER_MS / 1000),
                ));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        let (answer, fd) = recv(self.sock.as_raw_fd())?;
        if answer.is_empty() {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        Ok((answer, fd))
    }

    /// The outer error: the keeper is gone; the inner one: the kernel's.
    fn open(
        &mut self,
        attr: &Attr,
        tid: i32,
        cpu: i32,
        path: &[u8],
        passed: Option<RawFd>,
    ) -> std::io::Result<std::io::Result<(OwnedFd, u64)>> {
        let mut req = Vec::with_capacity(9 + ATTR + path.len());
        req.push(b'O');
        req.extend_from_slice(&tid.to_le_bytes());
        req.extend_from_slice(&cpu.to_le_bytes());
        // SAFETY: Attr is plain data (repr(C), no padding: u32/u64 pairs).
        req.extend_from_slice(unsafe {
            std::slice::from_raw_parts(attr as *const Attr as *const u8, ATTR)
        });
        req.extend_from_slice(path);
        let (a, fd) = self.request_passing(&req, passed)?;
        match (a[0], fd) {
            (b'K', Some(fd)) if a.len() == 9 => {
                Ok(Ok((fd, u64::from_le_bytes(a[1..9].try_into().unwrap()))))
            }
            (b'K', None) if a.len() == 9 => {
                // opened, but the copy could not be received (pgdbg is at
                // its limit of open files): the keeper closes its own
                let mut c = vec![b'C'];
                c.extend_from_slice(&a[1..9]);
                self.request(&c)?;
                Ok(Err(std::io::Error::from_raw_os_error(libc::EMFILE)))
            }
            (b'E', _) if a.len() == 5 => Ok(Err(std::io::Error::from_raw_os_error(
                i32::from_le_bytes(a[1..5].try_into().unwrap()),
            ))),
            _ => Err(std::io::Error::other("a malformed answer")),
        }
    }
}

fn send(sock: RawFd, data: &[u8], fd: Option<RawFd>) -> std::io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // room for one descriptor, aligned for cmsghdr
    let mut cbuf = [0u64; 4];
    // SAFETY: an all-zero msghdr is valid; the pointers set below live
    // until sendmsg returns.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_* on a buffer of CMSG_SPACE(4) bytes at least.
        unsafe {
            let space = libc::CMSG_SPACE(4) as usize;
            msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = space;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut i32, fd);
        }
    }
    loop {
        // SAFETY: msg is filled in above.
        let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One message (empty at the peer's end) and the descriptor it carried.
fn recv(sock: RawFd) -> std::io::Result<(Vec<u8>, Option<OwnedFd>)> {
    let mut buf = vec![0u8; MAX_MSG];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; 4];
    // SAFETY: as in send.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    let n = loop {
        // SAFETY: msg is filled in above.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    if msg.msg_flags & libc::MSG_TRUNC != 0 {
        return Err(std::io::Error::other("a message longer than any request"));
    }
    let mut fd = None;
    // SAFETY: the control buffer as recvmsg filled it in (a descriptor cut
    // off by MSG_CTRUNC is not there: the answer then carries none).
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if !c.is_null() && (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS
        {
            let raw = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const i32);
            fd = Some(OwnedFd::from_raw_fd(raw));
        }
    }
    buf.truncate(n);
    Ok((buf, fd))
}

/// The keeper process (`pgdbg __pgdbg_keeper PID START`, its socket on
/// standard input).
pub fn main(args: &[String]) -> i32 {
    // SAFETY: prctl(2) with a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"pgdbg-keeper".as_ptr()) };
    crate::runtime::ignore_session_signals();
    let (Some(pid), Some(start)) = (
        args.first().and_then(|s| s.parse::<u32>().ok()),
        args.get(1).and_then(|s| s.parse::<u64>().ok()),
    ) else {
        eprintln!("pgdbg: internal command line; not for use by hand");
        return 2;
    };
    // nothing of pgdbg's but the socket: not its other descriptors (a
    // pipe someone waits on), not its working directory
    // SAFETY: close_range(2) of descriptors this process does not use;
    // chdir(2) with a NUL-terminated path.
    unsafe {
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
        libc::chdir(c"/".as_ptr());
    }
    let mut held: HashMap<u64, OwnedFd> = HashMap::new();
    let mut next = 1u64;
    loop {
        let Ok((req, passed)) = recv(0) else { break };
        let answer = match req.first() {
            Some(b'O') if req.len() >= 9 + ATTR => {
                let tid = i32::from_le_bytes(req[1..5].try_into().unwrap());
                let cpu = i32::from_le_bytes(req[5..9].try_into().unwrap());
                // SAFETY: ATTR bytes of a repr(C) plain-data struct.
                let mut attr: Attr =
                    unsafe { std::ptr::read_unaligned(req[9..].as_ptr() as *const Attr) };
                // config1 of a uprobe: the path received (a pointer of
                // pgdbg's means nothing here), or the file sent with it
                // (closed once the event is open); a tracepoint has none
                let named = &req[9 + ATTR..];
                let fd_link = crate::inferior::mappedfile::FD_LINK.as_bytes();
                let path = match &passed {
                    Some(f) => std::ffi::CString::new(format!(
                        "{}{}",
                        crate::inferior::mappedfile::FD_LINK,
                        f.as_raw_fd()
                    ))
                    .ok(),
                    // a file pgdbg meant to send that did not come (the
                    // kernel dropped it: this process at its limit of
                    // descriptors): its number here is another file
                    None if named.starts_with(fd_link) => {
                        let mut a = vec![b'E'];
                        a.extend_from_slice(&libc::EBADF.to_le_bytes());
                        if send(0, &a, None).is_err() {
                            break;
                        }
                        continue;
                    }
                    None => std::ffi::CString::new(named).ok(),
                };
                attr.bp_addr = match path.as_ref().filter(|p| !p.as_bytes().is_empty()) {
                    Some(p) => p.as_ptr() as u64,
                    None => 0,
                };
                match sys_open(&attr, tid, cpu) {
                    Ok(fd) => {
                        let id = next;
                        next += 1;
                        let mut a = vec![b'K'];
                        a.extend_from_slice(&id.to_le_bytes());
                        let sent = send(0, &a, Some(fd.as_raw_fd()));
                        held.insert(id, fd);
                        if sent.is_err() {
                            break;
                        }
                        continue;
                    }
                    Err(e) => {
                        let mut a = vec![b'E'];
                        a.extend_from_slice(&e.raw_os_error().unwrap_or(libc::EIO).to_le_bytes());
                        a
                    }
                }
            }
            Some(b'C') if req.len() == 9 => {
                let id = u64::from_le_bytes(req[1..9].try_into().unwrap());
                drop(held.remove(&id));
                vec![b'D']
            }
            // the end of the socket: pgdbg ended or was killed
            None => break,
            Some(_) => vec![b'?'],
        };
        if send(0, &answer, None).is_err() {
            break;
        }
    }
    // pgdbg ended (or gave the keeper up): once its own exit has closed
    // its copies (it is a zombie or gone; a second at most), close ours,
    // the last ones; its definitions go only if it is gone
    let t0 = std::time::Instant::now();
    while !ended(pid, start) && t0.elapsed() < std::time::Duration::from_secs(1) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    drop(held);
    if ended(pid, start) {
        super::uprobe_events::remove_group_of(pid, start);
    }
    0
}

/// Whether process `pid` started at `start` has exited (a zombie, gone, or
/// the pid reused).
fn ended(pid: u32, start: u64) -> bool {
    use crate::inferior::procfs;
    let pid = pid as i32;
    procfs::start_time(pid) != Some(start) || matches!(procfs::state(pid), None | Some('Z' | 'X'))
}
