//! `pgdbg attach --cluster DIR` with a script that is one `waits trace`
//! line: the statements' starts and ends are marked by uprobes on the
//! executor opened once on the postmaster and inherited by every process
//! it forks (`perf/inherited.rs`, as `count` does: cluster_count.rs), not
//! by uprobes each worker opens and closes for its own backend.  Closing a
//! uprobe event is slow (the kernel waits for an RCU grace period under a
//! global lock, about 80 ms per event here) and the next worker's opens
//! wait behind it: a stream of short sessions was delayed 185 ms per
//! connection with per-backend uprobes, 28 ms without statements.
//!
//! This process (the leader) reads the records, copied by the kernel at
//! each hit (the statement's text as a fetch argument), and keeps those of
//! the backends whose workers asked for them.  A worker, in the same
//! process group and user, reaches it on a Unix socket in the abstract
//! namespace (named in its hidden `--statements-from` option): it
//! registers its backend before its watch starts and takes the backend's
//! marks once its watch has ended (waits_perf.rs).  Every record written
//! before the take is read first: the kernel writes a hit's record before
//! the hit returns to the backend.

use crate::debuginfo::DebugInfo;
use crate::perf::inherited::{Inherited, Record};
use crate::perf::tracefs::Field;
use crate::perf::watch::{Mark, TextFrom, define_mark, mark_from_raw};
use crate::postgres::commands::waits_perf::{END, START, mark_place};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// A request: register a backend (answered with one byte once its hits
/// are kept), or take its marks (answered with them; it is forgotten).
const REGISTER: u8 = b'R';
const TAKE: u8 = b'T';
/// How long either side waits for the other.
const TIMEOUT: Duration = Duration::from_secs(5);
/// How long the marks of a registered backend that exited are kept for a
/// worker that has not taken them (it died).
const KEEP_EXITED: Duration = Duration::from_secs(60);

/// The marks served to the workers of a cluster; stopped when dropped.
pub struct Service {
    name: String,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

/// A definition's mark: its kind, where its text is, its record's fields.
struct Kind {
    kind: u8,
    text: TextFrom,
    fields: HashMap<String, Field>,
}

/// A registered backend's marks so far.
#[derive(Default)]
struct Kept {
    marks: Vec<Mark>,
    exited: Option<Instant>,
}

impl Service {
    /// Define the executor's uprobes in `postmaster`'s binary (debug info
    /// `di`), open them on it (inherited) and on its children, and listen
    /// for workers.  The error says why, in words.
    pub fn start(postmaster: i32, di: &DebugInfo) -> Result<Service, String> {
        let (root, _) = crate::perf::tracefs::root()?;
        let text = crate::debuginfo::layout::Layout::of(di, "QueryDesc")
            .ok()
            .and_then(|l| l.offset("sourceText").ok())
            .map(TextFrom::FieldOfRdi)
            .ok_or("the debug info has no QueryDesc.sourceText (the statement's text)")?;
        let bias = crate::session::compute_bias(postmaster, di).map_err(|e| format!("{e:#}"))?;
        let mut defs = Vec::new();
        let mut kinds = Vec::new();
        for (f, kind, text) in [
            ("standard_ExecutorStart", START, text),
            ("standard_ExecutorEnd", END, TextFrom::None),
        ] {
            let copies: Vec<u64> = di
                .function_locations(f)
                .iter()
                .filter(|l| !l.inlined)
                .map(|l| l.addr + bias)
                .collect();
            if copies.is_empty() {
                return Err(format!("no code for {f}"));
            }
            for a in copies {
                let (_, path, offset) = mark_place(di, bias, postmaster, f, a)?;
                let d = define_mark(&root, &path, offset, text).map_err(|e| {
                    format!(
                        "cannot define a uprobe in {}/uprobe_events ({e}): run pgdbg as root",
                        root.display()
                    )
                })?;
                kinds.push(Kind {
                    kind,
                    text,
                    fields: d.fields.clone(),
                });
                defs.push((kinds.len() - 1, d));
            }
        }
        let name = format!(
            "pgdbg-statements-{}-{}",
            std::process::id(),
            crate::perf::monotonic_ns()
        );
        let addr = SocketAddr::from_abstract_name(name.as_bytes())
            .map_err(|e| format!("a socket for the workers: {e}"))?;
        let listener =
            UnixListener::bind_addr(&addr).map_err(|e| format!("a socket for the workers: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("a socket for the workers: {e}"))?;
        // hits of unregistered processes are not kept
        let existing = || crate::inferior::procfs::children_of(postmaster);
        let events = Inherited::start(postmaster, defs, true, existing, |_| {})?;
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            crate::runtime::block_in_this_thread();
            serve(events, kinds, listener, &st)
        });
        Ok(Service {
            name,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket's name, for the workers' `--statements-from`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stop serving; how many hits the kernel could not record (a ring
    /// was full).
    pub fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or(0)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The leader's thread: read the rings, answer the workers, until `stop`.
fn serve(
    mut events: Inherited,
    kinds: Vec<Kind>,
    listener: UnixListener,
    stop: &AtomicBool,
) -> u64 {
    let mut kept: HashMap<u32, Kept> = HashMap::new();
    let mut last_sweep = Instant::now();
    let mut fds = events.ring_fds();
    fds.push(listener.as_raw_fd());
    while !stop.load(Ordering::Relaxed) {
        let mut p: Vec<libc::pollfd> = fds
            .iter()
            .map(|&fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: an array of pollfds of its length.
        unsafe {
            libc::poll(
                p.as_mut_ptr(),
                p.len() as libc::nfds_t,
                crate::perf::POLL_MS,
            )
        };
        drain(&mut events, &kinds, &mut kept);
        // requests after the records written before them were read
        while let Ok((conn, _)) = listener.accept() {
            answer(conn, &mut events, &kinds, &mut kept);
        }
        if last_sweep.elapsed() > Duration::from_secs(1) {
            last_sweep = Instant::now();
            kept.retain(|_, k| k.exited.is_none_or(|t| t.elapsed() < KEEP_EXITED));
        }
    }
    events.disable();
    events.lost()
}

/// Read every ring into the registered backends' marks.
fn drain(events: &mut Inherited, kinds: &[Kind], kept: &mut HashMap<u32, Kept>) {
    events.drain(|r| match r {
        Record::Hit {
            pid,
            time,
            index,
            raw,
        } => {
            if let (Some(k), Some(to)) = (kinds.get(index), kept.get_mut(&pid)) {
                to.marks.extend(mark_from_raw(
                    k.kind, k.text, &k.fields, time, raw, pid as i32,
                ));
            }
        }
        Record::Exit(pid) => {
            if let Some(k) = kept.get_mut(&pid) {
                k.exited = Some(Instant::now());
            }
        }
        Record::Fork(_) => {}
    });
}

/// Whether the process at the other end runs as this one's user (a
/// worker of this pgdbg's; nobody else is told statements).
fn same_user(conn: &UnixStream) -> bool {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED writes one ucred of the length given.
    let r = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut libc::ucred as *mut libc::c_void,
            &mut len,
        )
    };
    // SAFETY: geteuid(2) cannot fail.
    r == 0 && cred.uid == unsafe { libc::geteuid() }
}

/// One worker's request, answered.  A request that does not come in time
/// or does not parse is dropped (the worker says so).
fn answer(
    mut conn: UnixStream,
    events: &mut Inherited,
    kinds: &[Kind],
    kept: &mut HashMap<u32, Kept>,
) {
    if !same_user(&conn) {
        return;
    }
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(TIMEOUT));
    let _ = conn.set_write_timeout(Some(TIMEOUT));
    let mut req = [0u8; 5];
    if conn.read_exact(&mut req).is_err() {
        return;
    }
    let pid = u32::from_le_bytes(req[1..5].try_into().unwrap());
    match req[0] {
        REGISTER => {
            // a PID reused: the ended process's marks are not the new one's
            kept.insert(pid, Kept::default());
            let _ = conn.write_all(&[1]);
        }
        TAKE => {
            drain(events, kinds, kept);
            let marks = kept.remove(&pid).map(|k| k.marks).unwrap_or_default();
            let _ = conn.write_all(&encode(&marks));
        }
        _ => {}
    }
}

/// Marks as bytes: their number, then each one's kind, time, argument and
/// text (its length, u32::MAX for none, and its bytes).
fn encode(marks: &[Mark]) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + marks.len() * 64);
    b.extend((marks.len() as u32).to_le_bytes());
    for m in marks {
        b.push(m.kind);
        b.extend(m.time.to_le_bytes());
        b.extend(m.arg.to_le_bytes());
        match &m.text {
            Some(t) => {
                b.extend((t.len() as u32).to_le_bytes());
                b.extend(t.as_bytes());
            }
            None => b.extend(u32::MAX.to_le_bytes()),
        }
    }
    b
}

fn decode(r: &mut impl Read) -> std::io::Result<Vec<Mark>> {
    let mut n = [0u8; 4];
    r.read_exact(&mut n)?;
    let n = u32::from_le_bytes(n);
    let mut out = Vec::new();
    for _ in 0..n {
        let mut h = [0u8; 21];
        r.read_exact(&mut h)?;
        let len = u32::from_le_bytes(h[17..21].try_into().unwrap());
        let text = if len == u32::MAX {
            None
        } else {
            let mut t = vec![0u8; len as usize];
            r.read_exact(&mut t)?;
            Some(String::from_utf8_lossy(&t).into_owned())
        };
        out.push(Mark {
            kind: h[0],
            time: u64::from_le_bytes(h[1..9].try_into().unwrap()),
            arg: u64::from_le_bytes(h[9..17].try_into().unwrap()),
            text,
        });
    }
    Ok(out)
}

/// In a worker: the leader's socket (`--statements-from`), when the
/// statements come from it.
static FEED: OnceLock<String> = OnceLock::new();

/// Called by a worker started with `--statements-from NAME`.
pub fn set_feed(name: &str) {
    let _ = FEED.set(name.to_string());
}

/// The leader's socket, in a worker whose statements come from it.
pub fn feed() -> Option<&'static str> {
    FEED.get().map(String::as_str)
}

fn request(feed: &str, op: u8, pid: i32) -> std::io::Result<UnixStream> {
    let addr = SocketAddr::from_abstract_name(feed.as_bytes())?;
    let mut c = UnixStream::connect_addr(&addr)?;
    c.set_read_timeout(Some(TIMEOUT))?;
    c.set_write_timeout(Some(TIMEOUT))?;
    let mut req = vec![op];
    req.extend((pid as u32).to_le_bytes());
    c.write_all(&req)?;
    Ok(c)
}

/// In a worker: have the leader keep backend `pid`'s marks from now on.
pub fn register(feed: &str, pid: i32) -> std::io::Result<()> {
    let mut c = request(feed, REGISTER, pid)?;
    let mut ack = [0u8; 1];
    c.read_exact(&mut ack)
}

/// In a worker: backend `pid`'s marks since it was registered (every one
/// recorded up to now); the leader forgets them.
pub fn take(feed: &str, pid: i32) -> std::io::Result<Vec<Mark>> {
    let mut c = request(feed, TAKE, pid)?;
    decode(&mut c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_encode_and_decode() {
        let marks = vec![
            Mark {
                kind: START,
                time: 7,
                arg: 0xdead,
                text: Some("select 1".into()),
            },
            Mark {
                kind: END,
                time: 9,
                arg: 0xdead,
                text: None,
            },
            Mark {
                kind: START,
                time: 10,
                arg: 1,
                text: Some(String::new()),
            },
        ];
        let got = decode(&mut &encode(&marks)[..]).unwrap();
        assert_eq!(got.len(), 3);
        for (a, b) in marks.iter().zip(&got) {
            assert_eq!(
                (a.kind, a.time, a.arg, &a.text),
                (b.kind, b.time, b.arg, &b.text)
            );
        }
        assert!(decode(&mut &encode(&marks)[..20]).is_err());
    }
}
