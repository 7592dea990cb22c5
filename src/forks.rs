//! `pgdbg attach --cluster`: a new backend taken at its fork.
//!
//! The supervisor (multi.rs) keeps workers started ahead ("spares",
//! `--next-backend`): each has loaded the debug info and checked the
//! script, listens to the kernel's process events itself
//! (inferior/procevents.rs) and, at a fork of the postmaster, attaches to
//! the child at once, as any worker attaches to its backend.  The first
//! spare to seize it wins (a process has one tracer; the others are
//! refused and wait for the next fork).  The winner keeps it only when
//! its parent is still the postmaster (not a reused PID), its title says
//! it has not reached its first command (the postmaster's, or
//! initializing, authentication, startup: one another spare let go is
//! not taken again) and it holds a
//! connection accepted on one of the postmaster's listening sockets
//! (inferior/newchild.rs); otherwise it detaches at once and waits again.
//! A client backend it got to only after its startup (it waited for a
//! CPU) is let go as well, found by looking, and counted in a warning at
//! the end: its first statements may have run unobserved.
//! A replication connection passes that too: it is let go once its title
//! says walsender, at its first command (attach.rs), and not counted.  Then the backend runs on until it is ready for its
//! first command (session/firstcommand.rs: an execute breakpoint in a
//! debug register, nothing written into it), where it stays stopped while
//! the script is armed: the new connection waits for that, as any backend
//! waits while a worker attaches.  The supervisor hears "attached PID" and
//! starts another spare.
//!
//! The stop at the fork is a ptrace stop of the spare: the kernel ends it
//! if the spare dies, and no backend is handed from one tracer to another.
//! The run to the first command uses a debug register, with what that
//! brings (the guardian, the SIGTRAP handler, the group stop of hold.rs:
//! docs/safety.md).  The spare and its guardian killed together there:
//! the backend releases itself and runs on untraced, keeping the handlers,
//! the pipe and the execute debug register on ReadyForQuery (each hit
//! passes through the SIGTRAP handler) until `pgdbg rescue` or the next
//! attach; it stays stopped only when killed inside an injected set-up
//! call or while signals are held back.  A
//! new backend is stopped only when a spare is ready (else it is found by
//! looking, every 100 ms, as without process events).  A backend killed
//! while it is stopped is waited for by its worker (its parent, the
//! postmaster, can reap it only then).
//!
//! So that a spare never gets to a new backend late for want of a CPU,
//! it waits for the fork and seizes the child at a real-time priority (SCHED_FIFO 1, `Urgency`):
//! the kernel sends the fork event (`proc_fork_connector`, in
//! `copy_process`) before it makes the child runnable
//! (`wake_up_new_task`, in `kernel_clone`), and wakes a real-time
//! waiter ahead of every normal process, so the seize comes
//! microseconds after the fork, long before the new backend can have
//! read its client's startup packet, whatever the load.  Only the wait
//! and the two requests of the seize (PTRACE_SEIZE, PTRACE_INTERRUPT) run
//! real-time: the spare is normal again right after them, succeeded or
//! not (`Target::attach_then`), before it builds any message, reads any
//! file, writes to its supervisor, logs or waits for the child's stop: a
//! spare refused the seize (another took the child) explains the refusal
//! at the normal priority;
//! a classic BPF filter on the events' socket lets only the postmaster's
//! forks wake it.  Where real-time is refused (no CAP_SYS_NICE, a
//! container's policy), or the filter cannot be set (every fork of the
//! machine would wake it), the spare waits at nice -10 if it may, as
//! before, and the supervisor says so once.  A spare killed at that priority
//! leaves nothing stopped: the child's ptrace stop ends with its tracer.
//! (Measured under 4 busy loops and `pgbench -C -c 4 -S`, load 10-16 on
//! 2 CPUs: 16-19 of 92-102 sessions per 30 s were not attached at their
//! fork before, none of 216 in three runs since.)  A backend forked while no spare is ready (all
//! taken, the next not started yet) is still found by looking.

use crate::inferior::Target;
use crate::inferior::newchild;
use crate::inferior::procevents::ProcEvents;
use crate::runtime;
use anyhow::Result;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::AtomicI32;
use std::time::{Duration, Instant};

/// The descriptor a spare says "ready" (or "ready normal WHY" when it
/// waits at the normal priority, real-time refused), then "attached PID US AT" on (US:
/// microseconds from the kernel's word of the fork to the stop, AT the
/// kernel's time of the fork: one fork heard by every spare has one, a
/// PID reused by a later fork another), "missed PID AT" for a new client
/// backend it got to only after its startup, or "refused WHY" when it
/// cannot hear of forks.
pub const STATUS_FD: i32 = 3;

/// The exit status of a spare whose new child turned out not to be a
/// client backend once ready for its first command (a walsender): let
/// go, not counted.
pub const NOT_A_CLIENT_EXIT: i32 = 4;

/// Whether this process may hear of forks: None, or why not (said once
/// by the caller, who then looks every 100 ms instead).
pub fn events_refused() -> Option<String> {
    if crate::config::get().no_proc_events {
        return Some("PGDBG_NO_PROC_EVENTS is set".into());
    }
    ProcEvents::open().err().map(|e| format!("{e:#}"))
}

/// A spare, in the worker: wait for the postmaster's next client
/// backend and attach to it at its fork.  None when there is nothing to
/// take: the supervisor closed our standard input (done, or dead), pgdbg
/// was told to stop, or `until` passed.  The backend is returned stopped,
/// with the time from the kernel's word of its fork to the stop.
pub fn take_next_backend(
    postmaster: i32,
    until: Option<Instant>,
) -> Result<Option<(Target, i32, Duration)>> {
    // SAFETY: the pipe the supervisor gave us as this descriptor (multi.rs)
    let mut status = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(STATUS_FD) };
    // what a client's connection is accepted on: a child holding a
    // connection on none of these is not a client backend
    let listen = match newchild::listening(postmaster) {
        Ok(l) if !l.is_empty() => l,
        Ok(_) => {
            let _ = writeln!(
                status,
                "refused the postmaster {postmaster} has no listening socket pgdbg can see"
            );
            return Ok(None);
        }
        Err(e) => {
            let _ = writeln!(
                status,
                "refused cannot read the listening sockets of the postmaster {postmaster} ({e:#})"
            );
            return Ok(None);
        }
    };
    // a child's title until it runs as a backend (read once: the
    // postmaster keeps it)
    let title = crate::inferior::procfs::cmdline(postmaster);
    let mut events = match ProcEvents::open() {
        Ok(e) => e,
        Err(e) => {
            let _ = writeln!(status, "refused {e:#}");
            return Ok(None);
        }
    };
    // the wait for the fork and the seize at a real-time priority: the
    // stop of a session of a few milliseconds must not wait for a CPU
    let mut urgency = Urgency::new();
    // only the forks of the postmaster wake us (a spare at a real-time
    // priority is woken by no other fork on the machine); without the
    // filter every fork is read and those of others skipped, never at a
    // real-time priority (nice -10 then, and the supervisor says why once)
    if let Err(e) = events.only_forks_of(postmaster) {
        urgency.refuse(format!("{e:#}: no real-time without it"));
    }
    match urgency.raise() {
        Ok(()) => {
            // (said at the normal priority: raised again in the loop)
            urgency.lower();
            let _ = status.write_all(b"ready\n");
        }
        Err(why) => {
            // refused: woken before the workers' loading and scripts at
            // least, where that is allowed (it then competes as it is)
            // SAFETY: setpriority(2) of this thread
            unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10) };
            let _ = writeln!(status, "ready normal {why}");
        }
    }
    let mut said_lost = false;
    // wakes in a row with no event read
    let mut idle_wakes = 0;
    // the kernel's time of the fork taken: with the PID, which fork it was
    let mut fork_at = 0;
    let taken = loop {
        // (again after a seize that was not kept)
        let _ = urgency.raise();
        if runtime::must_stop()
            || until.is_some_and(|u| Instant::now() >= u)
            || UNREAPED.load(std::sync::atomic::Ordering::Relaxed)
        {
            break None;
        }
        let mut fds = [
            libc::pollfd {
                fd: events.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: poll(2) over two pollfds we own
        unsafe { libc::poll(fds.as_mut_ptr(), 2, 100) };
        if fds[1].revents != 0 {
            // the supervisor says nothing on it: EOF (or anything) ends us
            let mut b = [0u8; 16];
            let _ = std::io::stdin().read(&mut b);
            break None;
        }
        let mut got = None;
        let forks = events.forks();
        if fds[0].revents != 0 && forks.is_empty() {
            // woken for nothing to read (an error state of the socket):
            // never a loop at a real-time priority
            idle_wakes += 1;
            if idle_wakes > MAX_IDLE_WAKES {
                urgency.give_up();
            }
        } else {
            idle_wakes = 0;
        }
        if events.lost > 0 && !said_lost {
            // the supervisor says it once for all spares (written at the
            // normal priority: raised again before a seize)
            urgency.lower();
            let _ = status.write_all(b"lost\n");
            said_lost = true;
        }
        for f in forks {
            if f.parent != postmaster || got.is_some() {
                continue;
            }
            // a fork heard late (this spare waited for a CPU): another
            // spare has taken it, and may have let it go since: not new.
            // Said missed when it is past its startup (unless another
            // spare took it at its fork): if every spare heard it late,
            // nothing else would say so
            let late_test = crate::config::get().spare_late.as_deref();
            if late_test.is_some() {
                urgency.lower();
                late_for_tests(f.child, &title);
            }
            let late = ProcEvents::now_ns().saturating_sub(f.at_ns);
            // (PGDBG_SPARE_LATE: late on purpose, stale only if asked)
            let stale = match late_test {
                None => late > STALE_FORK_NS,
                Some(t) => t == "stale",
            };
            if stale {
                urgency.lower();
                if client_past_startup(f.child, postmaster, &title, &listen) {
                    let _ = writeln!(status, "missed {} {}", f.child, f.at_ns);
                }
                continue;
            }
            let _ = urgency.raise();
            match take(f.child, postmaster, &title, &listen, &mut urgency) {
                Taken::Yes(t) => {
                    let took = Duration::from_nanos(ProcEvents::now_ns().saturating_sub(f.at_ns));
                    got = Some((*t, f.child, took));
                    fork_at = f.at_ns;
                }
                Taken::TooLate => {
                    let _ = writeln!(status, "missed {} {}", f.child, f.at_ns);
                }
                Taken::No => {}
            }
            // (said after the seize: nothing but the seize on its way)
            crate::inferior::log::debug(&format!(
                "[{}] fork heard {} us after it",
                f.child,
                late / 1000
            ));
        }
        if got.is_some() {
            break got;
        }
    };
    urgency.lower();
    if urgency.refused {
        // SAFETY: setpriority(2) of this thread, back to the usual
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 0) };
    }
    if let Some((_, pid, took)) = &taken {
        let _ = writeln!(status, "attached {pid} {} {fork_at}", took.as_micros());
    }
    Ok(taken)
}

/// The real-time priority (SCHED_FIFO) a spare waits for a fork at and
/// seizes the new child at: the lowest, above every normal process, below
/// the kernel's own real-time threads.
const URGENT_PRIORITY: i32 = 1;

/// This thread's scheduling while it waits for a fork and seizes the new
/// child: real-time (`raise`) only while it is blocked in its wait or
/// making the two ptrace requests of the seize, normal (`lower`) for the
/// rest, so that no loop of pgdbg's ever runs real-time; the kernel's
/// real-time throttling (`kernel.sched_rt_runtime_us`) bounds it anyway.
/// A thread or process started meanwhile starts normal
/// (SCHED_RESET_ON_FORK).  Dropped: normal again.
struct Urgency {
    raised: bool,
    /// Real-time priority was refused (no CAP_SYS_NICE, no RLIMIT_RTPRIO,
    /// a container's or cgroup's policy): never asked again.
    refused: bool,
    /// Why, when not asked at all (`refuse`).
    why_refused: Option<String>,
}

impl Urgency {
    fn new() -> Urgency {
        Urgency {
            raised: false,
            refused: false,
            why_refused: None,
        }
    }

    /// Real-time now: Err(why) when refused (then never again).
    fn raise(&mut self) -> Result<(), String> {
        if self.raised {
            return Ok(());
        }
        if self.refused {
            return Err(self
                .why_refused
                .clone()
                .unwrap_or_else(|| "refused before".into()));
        }
        let p = libc::sched_param {
            sched_priority: URGENT_PRIORITY,
        };
        // SAFETY: sched_setscheduler(2) of this thread with a param we own
        let r = unsafe {
            libc::sched_setscheduler(
                libc::gettid(),
                libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK,
                &p,
            )
        };
        if r != 0 {
            self.refused = true;
            return Err(format!(
                "sched_setscheduler SCHED_FIFO: {}",
                std::io::Error::last_os_error()
            ));
        }
        self.raised = true;
        Ok(())
    }

    /// Normal from now on.
    fn give_up(&mut self) {
        self.lower();
        if !self.refused {
            crate::inferior::log::debug("woken again and again for nothing: real-time given up");
        }
        self.refused = true;
    }

    /// Never real-time (`raise` says `why`).
    fn refuse(&mut self, why: String) {
        self.lower();
        self.refused = true;
        self.why_refused = Some(why);
    }

    /// Normal again (always allowed: the flag is kept, which an
    /// unprivileged thread may not clear).  Should the kernel refuse it
    /// all the same, the spare ends here, saying so in one line: it never
    /// runs on real-time (a backend it seized is let go by the kernel).
    fn lower(&mut self) {
        if !self.raised {
            return;
        }
        let p = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_setscheduler(2) of this thread with a param we own
        let r = unsafe {
            libc::sched_setscheduler(
                libc::gettid(),
                libc::SCHED_OTHER | libc::SCHED_RESET_ON_FORK,
                &p,
            )
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            crate::runtime::sink().warn(format_args!(
                "pgdbg: a worker started ahead cannot return to the normal priority (sched_setscheduler SCHED_OTHER: {e}) and ends; report this"
            ));
            // no destructor: nothing of this process runs on
            std::process::exit(1);
        }
        self.raised = false;
    }
}

impl Drop for Urgency {
    fn drop(&mut self) {
        self.lower();
    }
}

/// Wakes in a row with nothing read after which a spare waits at the
/// normal priority (a socket that stays readable would make a loop).
const MAX_IDLE_WAKES: u32 = 100;

/// What became of a new child of the postmaster a spare heard of.
enum Taken {
    /// Ours, stopped before its first command.
    Yes(Box<Target>),
    /// A client backend past its startup when this spare got to it (it
    /// waited for a CPU): let go, found by looking; its first statements
    /// may have run unobserved.
    TooLate,
    /// Another spare's, ended first, or not a client backend.
    No,
}

/// A fork heard this long after it is left alone.
const STALE_FORK_NS: u64 = 50_000_000;

/// Attach to a new child of the postmaster; kept only when it has not run
/// to its first command yet (`not_run_yet`: a walsender or backend another
/// spare let go, heard late here, is never taken again)
/// and holds a connection accepted on one of the postmaster's `listen`
/// sockets (else detached at once: a child that merely inherited a
/// connection).  No as well when another spare took it first, or it
/// ended first.
fn take(
    pid: i32,
    postmaster: i32,
    pm_title: &str,
    listen: &[newchild::Listen],
    urgency: &mut Urgency,
) -> Taken {
    // seized and asked to stop at the real-time priority, the rest at the
    // usual one: lowered right after the two requests, whether they
    // succeeded or not, before anything else (the explanation of a
    // refused seize reads /proc, the wait for its stop, the checks)
    let seized = Target::attach_then(pid, || {
        urgency.lower();
        crate::config::pause_for_tests("spare-seized");
    });
    let mut t = match seized {
        Ok(t) => t,
        Err(e) => {
            crate::inferior::log::debug(&format!("[{pid}] new child not taken: {e:#}"));
            return Taken::No;
        }
    };
    // checked once it is ours and stopped: its parent cannot change but
    // by the postmaster's death, its descriptors are the ones it was
    // forked with
    let parent = crate::inferior::procfs::status(pid).map(|s| s.ppid).ok();
    let title = crate::inferior::procfs::cmdline(pid);
    let fresh = not_run_yet(&title, pm_title);
    let conns = newchild::client_connections(pid, listen);
    let client = parent == Some(postmaster) && conns.as_ref().is_ok_and(|n| *n > 0);
    if client && fresh {
        return Taken::Yes(Box::new(t));
    }
    crate::inferior::log::debug(&format!(
        "[{pid}] new child let go: parent {parent:?}, title {title:?}, connections {conns:?}"
    ));
    let _ = t.detach();
    reap_if_ours(pid);
    if client && !title.contains("walsender") {
        Taken::TooLate
    } else {
        Taken::No
    }
}

/// Whether a child of the postmaster with this title has not yet reached
/// its first command: its title is still the postmaster's, or it says one
/// of the steps a backend takes before that (`initializing`,
/// `authentication`, `startup`: PostgreSQL 13-18 set these before the
/// first "idle", the title a spare lets a walsender go at).  A spare that
/// waited for a CPU attaches after the client sent its startup packet.
/// With update_process_title off only the postmaster's title counts.
fn not_run_yet(title: &str, pm_title: &str) -> bool {
    title == pm_title
        || [" initializing", " authentication", " startup"]
            .iter()
            .any(|s| title.ends_with(s))
}

/// Whether the postmaster's child `pid`, looked at from outside, is a
/// client backend past its startup.  Said missed by a spare that heard
/// its fork late: the supervisor leaves out those a spare took at their
/// fork (ForkTimes), another spare's or its own.
fn client_past_startup(
    pid: i32,
    postmaster: i32,
    pm_title: &str,
    listen: &[newchild::Listen],
) -> bool {
    let Ok(st) = crate::inferior::procfs::status(pid) else {
        return false;
    };
    let title = crate::inferior::procfs::cmdline(pid);
    st.ppid == postmaster
        && !not_run_yet(&title, pm_title)
        && !title.contains("walsender")
        && newchild::client_connections(pid, listen).is_ok_and(|n| n > 0)
}

/// A child killed while it was ours (its detach failed, ESRCH) stays our
/// tracee until waited for: the postmaster reaps it only then.  Waited
/// for up to a second; after that this spare ends, and the kernel hands
/// the zombie to the postmaster.
fn reap_if_ours(pid: i32) {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let p = nix::unistd::Pid::from_raw(pid);
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        match waitpid(p, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(1)),
            // not ours any more (detached), or reaped now
            _ => return,
        }
    }
    UNREAPED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// A child this spare could not wait for: it ends (take_next_backend).
static UNREAPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Tests only (PGDBG_HOLD_NEW_MS): keep a new backend stopped this long
/// after its fork (at most `HOLD_CAP_MS`), so that a test can kill it, or
/// pgdbg, meanwhile.  Its end is waited for at once (as the script's own
/// waits would).  The supervisor says so when it is set (`held_for_tests`).
pub fn hold_for_tests(t: &mut Target) {
    let Some(ms) = held_for_tests() else {
        return;
    };
    let until = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < until && !runtime::must_stop() && !t.reap_if_killed() {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The longest PGDBG_HOLD_NEW_MS honoured: a variable left set must not
/// hold connections for longer than a client's usual patience.
pub const HOLD_CAP_MS: u64 = 120_000;

/// PGDBG_HOLD_NEW_MS, capped: how long each new backend is held after its
/// fork, for tests.
pub fn held_for_tests() -> Option<u64> {
    crate::config::get()
        .hold_new_ms
        .map(|ms| ms.min(HOLD_CAP_MS))
}

/// PGDBG_SPARE_LATE (for tests): a spare gets to a new child only once
/// it is past its startup (at most 5 s), as on a machine too
/// busy to give the spares a CPU in time.
fn late_for_tests(pid: i32, pm_title: &str) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5)
        && crate::inferior::procfs::exists(pid)
        && not_run_yet(&crate::inferior::procfs::cmdline(pid), pm_title)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A spare as the supervisor sees it.
pub struct Spare {
    pub child: crate::forkserver::Proc,
    pub threads: Vec<std::thread::JoinHandle<()>>,
    /// Closed to dismiss it.
    stdin: Option<std::fs::File>,
    status: std::fs::File,
    said: String,
    /// The PID its output lines are prefixed with, once it has one.
    pub prefix: Arc<AtomicI32>,
    ready: bool,
    /// It waits for forks at the normal priority: why real-time was
    /// refused (the supervisor says it once).
    pub normal_priority: Option<String>,
}

/// What a spare said since the last look.
pub enum Said {
    Nothing,
    Ready,
    Attached {
        pid: i32,
        took: Duration,
        at: u64,
    },
    Refused(String),
    /// It heard that fork events were lost (the kernel's buffer was full).
    Lost,
    /// A new client backend was past its startup when it got to it.
    Missed {
        pid: i32,
        at: u64,
    },
}

impl Spare {
    pub fn new(
        child: crate::forkserver::Proc,
        threads: Vec<std::thread::JoinHandle<()>>,
        stdin: std::fs::File,
        status: std::fs::File,
        prefix: Arc<AtomicI32>,
    ) -> Spare {
        Spare {
            child,
            threads,
            stdin: Some(stdin),
            status,
            said: String::new(),
            prefix,
            ready: false,
            normal_priority: None,
        }
    }

    pub fn status_fd(&self) -> i32 {
        self.status.as_raw_fd()
    }

    /// The next whole line it said (the pipe is non-blocking).
    pub fn poll(&mut self) -> Said {
        let mut buf = [0u8; 256];
        loop {
            match self.status.read(&mut buf) {
                Ok(n) if n > 0 => self.said.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => break,
            }
        }
        let Some(end) = self.said.find('\n') else {
            return Said::Nothing;
        };
        let line: String = self.said.drain(..=end).collect();
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["ready", rest @ ..] => {
                self.ready = true;
                if let ["normal", ..] = rest {
                    let why = line.trim_end().splitn(3, ' ').nth(2).unwrap_or_default();
                    self.normal_priority = Some(why.to_string());
                }
                Said::Ready
            }
            ["attached", pid, us, at] => match (pid.parse(), us.parse(), at.parse()) {
                (Ok(pid), Ok(us), Ok(at)) => Said::Attached {
                    pid,
                    took: Duration::from_micros(us),
                    at,
                },
                _ => Said::Nothing,
            },
            ["lost"] => Said::Lost,
            ["missed", pid, at] => match (pid.parse(), at.parse()) {
                (Ok(pid), Ok(at)) => Said::Missed { pid, at },
                _ => Said::Nothing,
            },
            ["refused", ..] => Said::Refused(line["refused".len()..].trim().to_string()),
            _ => Said::Nothing,
        }
    }

    /// Let it end (EOF on its standard input) if it has taken nothing.
    pub fn dismiss(&mut self) {
        self.stdin = None;
    }
}

/// Wait at most `d` for each spare to be ready (or to end): Some(why)
/// when one says it cannot hear of forks.  Lines after "ready" are left
/// for the supervisor's loop.
pub fn await_ready(spares: &mut [Spare], d: Duration) -> Option<String> {
    let until = Instant::now() + d;
    while Instant::now() < until && !runtime::must_stop() {
        let mut waiting = Vec::new();
        for sp in spares.iter_mut() {
            while !sp.ready {
                match sp.poll() {
                    Said::Refused(why) => return Some(why),
                    Said::Nothing => break,
                    _ => {}
                }
            }
            if !sp.ready && !matches!(sp.child.try_wait(), Ok(Some(_))) {
                waiting.push(libc::pollfd {
                    fd: sp.status_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
        }
        if waiting.is_empty() {
            break;
        }
        // SAFETY: poll(2) over pollfds we own
        unsafe { libc::poll(waiting.as_mut_ptr(), waiting.len() as libc::nfds_t, 100) };
    }
    None
}

/// Times from the kernel's word of a fork to the stop of the new backend,
/// and the new backends no spare got to before the end of their startup.
/// A fork is its child's PID and its time (PIDs are reused: 32768 of them
/// by default).
#[derive(Default)]
pub struct ForkTimes {
    times: Vec<Duration>,
    taken: std::collections::HashSet<(i32, u64)>,
    missed: std::collections::HashSet<(i32, u64)>,
}

impl ForkTimes {
    pub fn push(&mut self, d: Duration) {
        self.times.push(d);
    }

    /// A spare took `pid` at its fork at `at`.
    pub fn taken(&mut self, pid: i32, at: u64) {
        self.taken.insert((pid, at));
    }

    /// A spare got to the client backend `pid`, forked at `at`, only
    /// after its startup.
    pub fn missed(&mut self, pid: i32, at: u64) {
        self.missed.insert((pid, at));
    }

    /// How many new backends no spare got to before their startup ended
    /// (none taken by another spare), said when there were any.
    pub fn missed_summary(&self) -> Option<String> {
        let n = self.missed.difference(&self.taken).count();
        (n > 0).then(|| {
            format!(
                "new backends a worker got to only after their startup (the workers waited for a CPU): {n}; each was let go and is found by looking, every 100 ms, if it lived that long: its first statements may have run unobserved"
            )
        })
    }

    pub fn summary(&self) -> Option<String> {
        if self.times.is_empty() {
            return None;
        }
        let mut v = self.times.clone();
        v.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Some(format!(
            "{} new backend{} attached at their fork, {:.2} ms after it (median), {:.2} ms at most; each stopped before its first command while its worker armed the script",
            v.len(),
            if v.len() == 1 { "" } else { "s" },
            ms(v[v.len() / 2]),
            ms(v[v.len() - 1]),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{ForkTimes, Urgency, not_run_yet};

    /// Real-time on the thread that raises it alone, reset on fork, and
    /// normal again once lowered or dropped; or refused with a reason.
    #[test]
    fn urgency_raised_and_lowered_on_one_thread() {
        let policy = || {
            // SAFETY: sched_getscheduler(2) of this thread
            unsafe { libc::sched_getscheduler(libc::gettid()) }
        };
        std::thread::spawn(move || {
            let mut u = Urgency::new();
            match u.raise() {
                Ok(()) => {
                    assert_eq!(policy(), libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK);
                    let other = std::thread::spawn(policy).join().unwrap();
                    assert_eq!(other & !libc::SCHED_RESET_ON_FORK, libc::SCHED_OTHER);
                    u.lower();
                    assert_eq!(policy() & !libc::SCHED_RESET_ON_FORK, libc::SCHED_OTHER);
                    u.raise().unwrap();
                    drop(u);
                    assert_eq!(policy() & !libc::SCHED_RESET_ON_FORK, libc::SCHED_OTHER);
                }
                Err(why) => {
                    assert!(why.contains("SCHED_FIFO"), "{why}");
                    assert_eq!(policy(), libc::SCHED_OTHER);
                    assert!(u.raise().is_err());
                }
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn missed_backends_counted_once_unless_another_spare_took_them() {
        let mut f = ForkTimes::default();
        assert_eq!(f.missed_summary(), None);
        // two spares late for 10, one late for 11 that another took
        f.missed(10, 1_000);
        f.missed(10, 1_000);
        f.missed(11, 2_000);
        f.taken(11, 2_000);
        let s = f.missed_summary().unwrap();
        assert!(
            s.contains("after their startup (the workers waited for a CPU): 1;"),
            "{s}"
        );
        f.missed(12, 3_000);
        let s = f.missed_summary().unwrap();
        assert!(s.contains("CPU): 2;"), "{s}");
        // PIDs 10 and 11 again, of later forks: other backends
        f.missed(10, 4_000);
        f.missed(11, 5_000);
        let s = f.missed_summary().unwrap();
        assert!(s.contains("CPU): 4;"), "{s}");
    }

    #[test]
    fn titles_before_the_first_command() {
        let pm = "/usr/lib/postgresql/18/bin/postgres -D /srv/pg";
        assert!(not_run_yet(pm, pm));
        for t in [
            "postgres: alice shop [local] initializing",
            "postgres: alice shop 10.0.0.7(51234) authentication",
            "postgres: main: alice shop [local] startup",
        ] {
            assert!(not_run_yet(t, pm), "{t}");
        }
        for t in [
            "postgres: alice shop [local] idle",
            "postgres: walsender repl 10.0.0.7(51234) idle",
            "postgres: alice shop [local] SELECT",
            "postgres: alice shop [local] idle in transaction",
            "postgres: alice shop [local]",
        ] {
            assert!(!not_run_yet(t, pm), "{t}");
        }
    }
}
