//! `pgdbg attach --cluster`: a new backend, from its fork to its worker.
//! The supervisor (multi.rs) hears of every fork of the postmaster from
//! the kernel (inferior/procevents.rs), stops the child at once
//! (inferior/seized.rs), and, when it holds a client connection, starts a
//! worker for it with `--held`: the worker loads the debug info and the
//! script, says "ready", is handed the child and seizes it, so that the
//! script is armed before the backend has read its startup packet, let
//! alone run its first statement.  Other children (autovacuum and
//! parallel workers, background workers) are let go at once, as the
//! looking at the postmaster's children every 100 ms left them alone.
//!
//! A child is never left stopped: its worker failing to start, exiting
//! or being killed before it took the child, the supervisor ending
//! (`release_all`) or dying (the kernel detaches its tracees; a worker
//! that was told nothing sends the SIGCONT itself) all let it run.

use crate::inferior::procevents::{Fork, ProcEvents};
use crate::inferior::seized::{self, Seized};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::ChildStdin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A worker started ahead of any fork (`--held`): it loads the debug
/// info and the script, says "ready" on its descriptor 3 and waits for
/// "go PID MS" on its standard input (the backend to take, the time left
/// of `--for` in ms or "-"; "next PID" before it is stopped for the
/// worker).  EOF there ends it.
pub struct Spare {
    pub child: std::process::Child,
    pub threads: Vec<std::thread::JoinHandle<()>>,
    go: Option<ChildStdin>,
    status: std::fs::File,
    said: String,
    /// The PID its output lines are prefixed with, once it has one.
    pub prefix: Arc<AtomicI32>,
}

/// A spare that took a backend: its process, its output threads, and
/// what it says.
pub type Assigned = (
    std::process::Child,
    Vec<std::thread::JoinHandle<()>>,
    Handover,
);

/// The supervisor's view of a worker that was handed a backend.
pub struct Handover {
    status: std::fs::File,
    said: String,
    pub attached: bool,
    since: Instant,
    /// When it was handed over.
    handed: Instant,
}

fn read_into(f: &mut std::fs::File, said: &mut String) {
    let mut buf = [0u8; 64];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => said.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

impl Spare {
    pub fn new(
        child: std::process::Child,
        threads: Vec<std::thread::JoinHandle<()>>,
        go: ChildStdin,
        status: std::fs::File,
        prefix: Arc<AtomicI32>,
    ) -> Spare {
        Spare {
            child,
            threads,
            go: Some(go),
            status,
            said: String::new(),
            prefix,
        }
    }

    pub fn status_fd(&self) -> Option<i32> {
        use std::os::fd::AsRawFd;
        (!self.ready()).then(|| self.status.as_raw_fd())
    }

    pub fn poll(&mut self) {
        read_into(&mut self.status, &mut self.said);
    }

    pub fn ready(&self) -> bool {
        self.said.contains("ready") && self.go.is_some()
    }

    /// Let it end (EOF on its standard input).
    pub fn dismiss(&mut self) {
        self.go = None;
    }

    /// Hand it `held`: stopped for it, then told to take it.  Err gives
    /// the spare back (still ready) when the backend could not be handed
    /// over (it ended; it then runs on or is gone).
    pub fn assign(
        mut self,
        (pid, since): (i32, Instant),
        seizer: &Seizer,
        remaining: Option<Duration>,
    ) -> Result<Assigned, Spare> {
        // named first: if we die once it is stopped for the worker, the
        // worker lets it run (attach.rs take_over)
        let named = self
            .go
            .as_mut()
            .is_some_and(|g| g.write_all(format!("next {pid}\n").as_bytes()).is_ok());
        if !named {
            seizer.release(pid);
            return Err(self);
        }
        if let Err(e) = seizer.hand_over(pid) {
            crate::inferior::log::debug(&format!("[{pid}] not handed over: {e:#}"));
            return Err(self);
        }
        self.prefix.store(pid, Ordering::Relaxed);
        let line = format!(
            "go {pid} {}\n",
            remaining
                .map(|r| r.as_millis().max(1).to_string())
                .unwrap_or_else(|| "-".into())
        );
        let ok = self
            .go
            .take()
            .is_some_and(|mut g| g.write_all(line.as_bytes()).is_ok());
        if !ok {
            seized::let_run_if_stopped_untraced(pid);
            return Err(self);
        }
        let Spare {
            child,
            threads,
            status,
            ..
        } = self;
        Ok((
            child,
            threads,
            Handover {
                status,
                said: String::new(),
                attached: false,
                since,
                handed: Instant::now(),
            },
        ))
    }
}

/// Times from the stop at a fork to the worker's seize.
#[derive(Default)]
pub struct HoldTimes(Vec<(Duration, Duration)>);

impl HoldTimes {
    pub fn summary(&self) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let ms = |mut v: Vec<Duration>| -> (f64, f64) {
            v.sort();
            (
                v[v.len() / 2].as_secs_f64() * 1e3,
                v[v.len() - 1].as_secs_f64() * 1e3,
            )
        };
        let (med, max) = ms(self.0.iter().map(|t| t.0).collect());
        let (tmed, tmax) = ms(self.0.iter().map(|t| t.1).collect());
        Some(format!(
            "{} new backend{} held stopped from just after their fork until their worker seized them: {med:.1} ms (median), {max:.1} ms at most, of which the worker's taking it over {tmed:.1} ms (median), {tmax:.1} ms at most; each stays stopped while its worker arms the script",
            self.0.len(),
            if self.0.len() == 1 { "" } else { "s" },
        ))
    }
}

impl Handover {
    pub fn status_fd(&self) -> Option<i32> {
        use std::os::fd::AsRawFd;
        (!self.attached).then(|| self.status.as_raw_fd())
    }

    /// Read what the worker said ("attached").
    pub fn poll(&mut self, times: &mut HoldTimes) {
        read_into(&mut self.status, &mut self.said);
        if !self.attached && self.said.contains("attached") {
            self.attached = true;
            times.0.push((self.since.elapsed(), self.handed.elapsed()));
        }
    }

    /// The worker ended: if it never took its backend, let that run.
    pub fn worker_ended(&mut self, pid: i32, times: &mut HoldTimes) {
        self.poll(times);
        if !self.attached {
            seized::let_run_if_stopped_untraced(pid);
        }
    }
}

/// The thread that hears of the postmaster's forks and holds the new
/// backends: nothing else to do, so that it stops a new child within
/// microseconds of the kernel's word whatever the supervisor is busy
/// with.  ptrace binds a tracee to the thread that seized it: this thread
/// also hands the children over and lets them go, when asked.
pub struct Seizer {
    req: mpsc::Sender<Req>,
    /// A byte here wakes the thread for a request.
    kick: std::fs::File,
    /// New backends held: (PID, when stopped).
    pub held: mpsc::Receiver<(i32, Instant)>,
    /// Readable when `held` has something (for the supervisor's poll).
    pub wake_fd: OwnedFd,
    thread: Option<std::thread::JoinHandle<()>>,
}

enum Req {
    HandOver(i32, mpsc::Sender<Result<(), String>>),
    Release(i32),
}

impl Seizer {
    /// Subscribe to the kernel's forks and start the thread; the error
    /// says why not (said once by the caller, who then looks instead).
    pub fn start(postmaster: i32) -> Result<Seizer, String> {
        if std::env::var_os("PGDBG_NO_PROC_EVENTS").is_some() {
            return Err("PGDBG_NO_PROC_EVENTS is set".into());
        }
        let mut events = ProcEvents::open().map_err(|e| format!("{e:#}"))?;
        let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string());
        let (kick_r, kick_w) = pipe()?;
        let (wake_r, wake_w) = pipe()?;
        nix::fcntl::fcntl(
            &wake_r,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(|e| e.to_string())?;
        let (req_tx, req_rx) = mpsc::channel::<Req>();
        let (held_tx, held_rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            crate::guard::block_in_this_thread();
            // This thread only waits, stops a new child and lets it go: it
            // asks to be woken first (a higher priority, for itself only;
            // refused without CAP_SYS_NICE, then it competes as it is), so
            // that the workers' loading does not delay the stop of a
            // session that lasts a few milliseconds.
            // SAFETY: setpriority(2) of this thread (gettid).
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10);
            }
            let mut kick_r = std::fs::File::from(kick_r);
            let mut wake_w = std::fs::File::from(wake_w);
            let mut held: HashMap<i32, Seized> = HashMap::new();
            loop {
                let mut fds = [
                    libc::pollfd {
                        fd: events.fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: kick_r.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                // SAFETY: poll(2) over two pollfds we own.
                unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
                for f in new_children(&mut events, postmaster) {
                    let pid = f.child;
                    let s = seize_if_backend(pid);
                    crate::inferior::log::debug(&format!(
                        "[{pid}] fork of the postmaster: {}, {:.3} ms after it",
                        if s.is_some() { "held" } else { "let go" },
                        (ProcEvents::now_ns().saturating_sub(f.at_ns)) as f64 / 1e6
                    ));
                    if let Some(s) = s {
                        let since = s.since;
                        held.insert(pid, s);
                        if held_tx.send((pid, since)).is_err() {
                            return;
                        }
                        let _ = wake_w.write_all(b"+");
                    }
                }
                if fds[1].revents != 0 {
                    let mut b = [0u8; 64];
                    // EOF: the supervisor is done (every held one let go
                    // as `held` drops)
                    if matches!(kick_r.read(&mut b), Ok(0) | Err(_)) {
                        return;
                    }
                }
                while let Ok(r) = req_rx.try_recv() {
                    match r {
                        Req::HandOver(pid, reply) => {
                            let r = match held.remove(&pid) {
                                Some(s) => s.hand_over().map_err(|e| format!("{e:#}")),
                                None => Err(format!("process {pid} is not held")),
                            };
                            let _ = reply.send(r);
                        }
                        Req::Release(pid) => {
                            if let Some(s) = held.remove(&pid) {
                                s.release();
                            }
                        }
                    }
                }
            }
        });
        Ok(Seizer {
            req: req_tx,
            kick: std::fs::File::from(kick_w),
            held: held_rx,
            wake_fd: wake_r,
            thread: Some(thread),
        })
    }

    fn ask(&self, r: Req) -> bool {
        self.req.send(r).is_ok() && (&self.kick).write_all(b"!").is_ok()
    }

    /// New backends held since the last call.
    pub fn new_held(&self) -> Vec<(i32, Instant)> {
        let mut b = [0u8; 256];
        while matches!(nix::unistd::read(&self.wake_fd, &mut b), Ok(n) if n > 0) {}
        self.held.try_iter().collect()
    }

    /// Hand `pid` over (seized.rs); Err: it runs on, or has exited.
    pub fn hand_over(&self, pid: i32) -> Result<(), String> {
        let (tx, rx) = mpsc::channel();
        if !self.ask(Req::HandOver(pid, tx)) {
            return Err("the thread holding new backends is gone".into());
        }
        rx.recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| Err("no answer from the thread holding new backends".into()))
    }

    /// Let `pid` run on.
    pub fn release(&self, pid: i32) {
        self.ask(Req::Release(pid));
    }

    /// Let every held one run and end the thread.
    pub fn stop(&mut self) {
        if let Some(t) = self.thread.take() {
            // EOF on its kick pipe: it ends, dropping (releasing) the held
            let (_, w) = match nix::unistd::pipe() {
                Ok(p) => p,
                Err(_) => return,
            };
            self.kick = std::fs::File::from(w);
            let _ = t.join();
        }
    }
}

impl Drop for Seizer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Wait at most `d` for a held backend or a worker's word.
pub fn wait(seizer: Option<&Seizer>, status: &[i32], d: Duration) {
    let mut fds: Vec<libc::pollfd> = seizer
        .map(|s| s.wake_fd.as_raw_fd())
        .into_iter()
        .chain(status.iter().copied())
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    if fds.is_empty() {
        std::thread::sleep(d);
        return;
    }
    // SAFETY: poll(2) over pollfds we own.
    unsafe {
        libc::poll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            d.as_millis().clamp(1, 1000) as i32,
        )
    };
}

/// The postmaster's new children since the last call.
fn new_children(events: &mut ProcEvents, postmaster: i32) -> Vec<Fork> {
    events
        .forks()
        .into_iter()
        .filter(|Fork { parent, .. }| *parent == postmaster)
        .collect()
}

/// Stop a new child of the postmaster: held (Some) when it is to become a
/// client backend, let go otherwise (None; also when it ended first or
/// could not be stopped).
fn seize_if_backend(pid: i32) -> Option<Seized> {
    let s = match Seized::seize(pid) {
        Ok(Some(s)) => s,
        Ok(None) => {
            crate::inferior::log::debug(&format!("[{pid}] new child ended first"));
            return None;
        }
        Err(e) => {
            crate::inferior::log::debug(&format!("[{pid}] not held: {e:#}"));
            return None;
        }
    };
    // a client backend is forked holding the connection the postmaster
    // accepted for it; the postmaster's other children hold none
    match seized::connected_stream_sockets(pid) {
        Ok(n) if n > 0 => Some(s),
        r => {
            crate::inferior::log::debug(&format!("[{pid}] no client connection: {r:?}"));
            s.release();
            None
        }
    }
}
