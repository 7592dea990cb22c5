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
//! the backends whose workers asked for them.  A worker reaches it on a
//! Unix socket in the abstract namespace (named in its hidden
//! `--statements-from` option; only a process of the same user that
//! descends from the leader is answered): it registers its backend before
//! its watch starts and takes the backend's marks once its watch has ended
//! (waits_perf.rs; the worker's side and the bytes on the socket:
//! perf/feed.rs).  Every record written before the take is read first:
//! the kernel writes a hit's record before the hit returns to the backend.
//! The marks of a backend whose worker is gone, or that exited a minute
//! ago, are forgotten; at most [`MOST_KEPT`] are kept per backend.

use crate::debuginfo::DebugInfo;
use crate::perf::feed::{REGISTER, TAKE, TIMEOUT, Taken, encode};
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
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the marks of a registered backend that exited are kept for a
/// worker that has not taken them.
const KEEP_EXITED: Duration = Duration::from_secs(60);
/// The most marks kept for one backend between its registration and its
/// take (a backend traced for hours); later ones are counted, not kept.
const MOST_KEPT: usize = 1 << 20;

/// The marks served to the workers of a cluster; stopped when dropped.
pub struct Service {
    name: String,
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// A definition's mark: its kind, where its text is, its record's fields.
struct Kind {
    kind: u8,
    text: TextFrom,
    fields: HashMap<String, Field>,
}

/// A registered backend's marks so far.
struct Kept {
    marks: Vec<Mark>,
    /// marks past [`MOST_KEPT`]
    dropped: u64,
    /// the rings' losses when it was registered
    lost_before: u64,
    /// the worker that registered it (its PID and start time): when it is
    /// gone without taking them, they are forgotten
    worker: (i32, Option<u64>),
    exited: Option<Instant>,
}

/// What the leader's threads share: the events, read by whichever needs
/// the records now (the reader every few ms, a take at once).
struct State {
    events: Inherited,
    kinds: Vec<Kind>,
    kept: HashMap<u32, Kept>,
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
                let (at, file, offset) = mark_place(di, bias, postmaster, f, a)?;
                // a backend with a jump of a dead pgdbg's there: each
                // worker places its own instead (after its attach took the
                // jump out)
                if let Some(why) = di
                    .binary
                    .bytes_at(at.wrapping_sub(bias + 4), 5)
                    .and_then(|b| {
                        crate::inferior::detour::stray_jump_in_children(postmaster, f, at, b)
                    })
                {
                    return Err(why);
                }
                let d = define_mark(&root, file.path(), offset, text)
                    .map_err(|e| crate::perf::tracefs::define_error(&root, &e))?;
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
        let state = Arc::new(Mutex::new(State {
            events,
            kinds,
            kept: HashMap::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sh) = (stop.clone(), state.clone());
        let reader = std::thread::spawn(move || {
            crate::runtime::block_in_this_thread();
            read_rings(&sh, &st)
        });
        let (st, sh) = (stop.clone(), state.clone());
        let acceptor = std::thread::spawn(move || {
            crate::runtime::block_in_this_thread();
            accept(&listener, &sh, &st)
        });
        Ok(Service {
            name,
            stop,
            state,
            threads: vec![reader, acceptor],
        })
    }

    /// The socket's name, for the workers' `--statements-from`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stop serving; how many hits the kernel could not record (a ring
    /// was full).
    pub fn finish(mut self) -> u64 {
        self.end();
        let st = lock(&self.state);
        st.events.disable();
        st.events.lost()
    }

    fn end(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.end();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The reader: every few ms (or once a ring's watermark is passed) the
/// rings into the registered backends' marks; once a second, the marks
/// nobody will take are forgotten.
fn read_rings(state: &Mutex<State>, stop: &AtomicBool) {
    let fds = lock(state).events.ring_fds();
    let mut last_sweep = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        crate::perf::poll_in(&fds, crate::perf::POLL_MS);
        let mut st = lock(state);
        st.drain();
        if last_sweep.elapsed() > Duration::from_secs(1) {
            last_sweep = Instant::now();
            st.kept.retain(|_, k| {
                k.exited.is_none_or(|t| t.elapsed() < KEEP_EXITED)
                    && crate::inferior::procfs::start_time(k.worker.0) == k.worker.1
            });
        }
    }
}

impl State {
    /// Read every ring into the registered backends' marks.
    fn drain(&mut self) {
        let (kinds, kept) = (&self.kinds, &mut self.kept);
        self.events.drain(|r| match r {
            Record::Hit {
                pid,
                time,
                index,
                raw,
            } => {
                if let (Some(k), Some(to)) = (kinds.get(index), kept.get_mut(&pid)) {
                    if to.marks.len() >= MOST_KEPT {
                        to.dropped += 1;
                        return;
                    }
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
}

/// The acceptor: each worker's connection answered in a thread of its
/// own (a worker that is slow to send or to read delays no other).
fn accept(listener: &UnixListener, state: &Arc<Mutex<State>>, stop: &AtomicBool) {
    let fd = [listener.as_raw_fd()];
    while !stop.load(Ordering::Relaxed) {
        crate::perf::poll_in(&fd, 50);
        while let Ok((conn, _)) = listener.accept() {
            let state = state.clone();
            std::thread::spawn(move || {
                crate::runtime::block_in_this_thread();
                answer(conn, &state)
            });
        }
    }
}

/// The PID of the process at the other end, if it runs as this one's
/// user and descends from this process (a worker of this pgdbg's, or one
/// forked by its fork server: nobody else is told statements).
fn worker_at(conn: &UnixStream) -> Option<i32> {
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
    if r != 0 || cred.uid != unsafe { libc::geteuid() } {
        return None;
    }
    let me = std::process::id() as i32;
    let mut p = cred.pid;
    // the leader -> a worker, or -> the fork server -> a worker
    for _ in 0..4 {
        p = crate::inferior::procfs::status(p).ok()?.ppid;
        if p == me {
            return Some(cred.pid);
        }
    }
    None
}

/// One worker's request, answered.  A request that does not come in time
/// or does not parse is dropped (the worker says so).
fn answer(mut conn: UnixStream, state: &Mutex<State>) {
    let Some(worker) = worker_at(&conn) else {
        return;
    };
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
            {
                let mut st = lock(state);
                // records of an earlier process of that PID are not its
                st.drain();
                let lost_before = st.events.lost();
                st.kept.insert(
                    pid,
                    Kept {
                        marks: Vec::new(),
                        dropped: 0,
                        lost_before,
                        worker: (worker, crate::inferior::procfs::start_time(worker)),
                        exited: None,
                    },
                );
            }
            let _ = conn.write_all(&[1]);
        }
        TAKE => {
            let bytes = {
                let mut st = lock(state);
                // every record written before the request
                st.drain();
                let lost = st.events.lost();
                let k = st.kept.remove(&pid);
                let (marks, dropped, lost_since) = match k {
                    Some(k) => (k.marks, k.dropped, lost - k.lost_before.min(lost)),
                    None => (Vec::new(), 0, 0),
                };
                encode(&Taken {
                    marks,
                    dropped,
                    lost_since,
                })
            };
            let _ = conn.write_all(&bytes);
        }
        _ => {}
    }
}
