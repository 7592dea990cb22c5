//! pgdbg's own signals.  Ctrl-C (SIGINT) while the backend runs asks the
//! wait loop to stop it with PTRACE_INTERRUPT; SIGTERM/SIGHUP (a kill, a
//! closed terminal) make pgdbg stop the backend, restore it and detach
//! before exiting.  Handlers only set flags: all ptrace work stays on the
//! thread that attached.
//!
//! A flag set just before the tracer thread blocks in `waitpid` would be
//! missed until the next stop; a ticker thread closes that window by
//! waking the tracer (SIGALRM, EINTR) while a flag is pending and it waits.

use crate::inferior::WaitHooks;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

static INTERRUPT: AtomicBool = AtomicBool::new(false);
/// Sticky: a SIGINT arrived (scripts stop at the next command boundary).
static SIGINT_SEEN: AtomicBool = AtomicBool::new(false);
static TERMINATE: AtomicI32 = AtomicI32::new(0);
/// pthread_t of the tracer thread, for wake-ups.
static MAIN_THREAD: AtomicU64 = AtomicU64::new(0);
/// The tracer thread is blocked in waitpid.
static IN_WAIT: AtomicBool = AtomicBool::new(false);
/// Lines of probe output not written yet (see `out_line`).
static OUT_BUF: Mutex<Vec<u8>> = Mutex::new(Vec::new());
/// Serializes writers of OUT_BUF's contents, so chunks keep their order.
static OUT_WRITE: Mutex<()> = Mutex::new(());
static OUT_DROPPED: AtomicU64 = AtomicU64::new(0);
/// Past this much unwritten output, lines are dropped (and counted) rather
/// than stopping the tracer, which may hold the backend at a breakpoint.
const OUT_CAP: usize = 64 << 20;

/// A write of probe output or of the capture file failed: the running
/// command stops as on SIGTERM (the backend is restored and detached) and
/// pgdbg exits with [`OUTPUT_FAILED_EXIT`].  The first failure's text.
static OUTPUT_FAILED: AtomicBool = AtomicBool::new(false);
static OUTPUT_ERROR: Mutex<Option<String>> = Mutex::new(None);
/// Standard output failed: queued lines are discarded, not written again.
static STDOUT_BROKEN: AtomicBool = AtomicBool::new(false);

/// Exit status after a failed write of output or capture (sysexits'
/// EX_IOERR); the supervisor of a multi-backend attach stops every worker
/// when one exits with it (they share the capture file).
pub const OUTPUT_FAILED_EXIT: i32 = 74;

/// A probe's periodic poll is due (see `Ticker`).
static POLL_DUE: AtomicBool = AtomicBool::new(false);
/// The ticker's period, in microseconds (the probe may change it).
static POLL_US: AtomicU64 = AtomicU64::new(20_000);

/// Change the period of a running `Ticker` (from its next tick).
pub fn set_poll_interval(d: std::time::Duration) {
    POLL_US.store(d.as_micros().max(1000) as u64, Ordering::SeqCst);
}

/// Active deadlines, innermost last (a call's timeout inside a `--for`).
static DEADLINES: Mutex<Vec<Arc<AtomicBool>>> = Mutex::new(Vec::new());

/// For pgdbg's helper processes (the guardian, the keeper), which must
/// outlive a Ctrl-C, a closed terminal or a job-control stop of pgdbg:
/// ignore SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP and SIGPIPE.
pub fn ignore_session_signals() {
    for s in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGTSTP,
        libc::SIGPIPE,
    ] {
        // SAFETY: ignoring a signal.
        unsafe { libc::signal(s, libc::SIG_IGN) };
    }
}

/// Write to stderr without ever panicking (a closed pipe must not turn
/// into a panic while the backend is attached).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `eprint!` that never panics.
#[macro_export]
macro_rules! errp {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGALRM {
        // only wakes a blocking waitpid (EINTR)
    } else if sig == libc::SIGINT {
        INTERRUPT.store(true, Ordering::SeqCst);
        SIGINT_SEEN.store(true, Ordering::SeqCst);
    } else {
        TERMINATE.store(sig, Ordering::SeqCst);
    }
}

fn wake_tracer() {
    let main = MAIN_THREAD.load(Ordering::SeqCst);
    if main != 0 {
        unsafe {
            libc::pthread_kill(main as libc::pthread_t, libc::SIGALRM);
        }
    }
}

/// Install the handlers (without SA_RESTART, so a blocking waitpid returns
/// EINTR), ignore SIGPIPE (a closed pipe must not kill us before we clean
/// up), and start the ticker.
pub fn install() {
    MAIN_THREAD.store(unsafe { libc::pthread_self() } as u64, Ordering::SeqCst);
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGALRM,
    ] {
        // SAFETY: the handler only stores to atomics.
        let _ = unsafe { sigaction(s, &act) };
    }
    let ign = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    let _ = unsafe { sigaction(Signal::SIGPIPE, &ign) };
    std::thread::spawn(|| {
        block_in_this_thread();
        loop {
            std::thread::sleep(std::time::Duration::from_millis(50));
            if OUT_BUF.lock().is_ok_and(|b| !b.is_empty()) {
                flush_out();
            }
            let pending = INTERRUPT.load(Ordering::SeqCst)
                || TERMINATE.load(Ordering::SeqCst) != 0
                || OUTPUT_FAILED.load(Ordering::SeqCst)
                || deadline_hit();
            if pending && IN_WAIT.load(Ordering::SeqCst) {
                wake_tracer();
            }
        }
    });
}

/// Mark the tracer thread as blocked in waitpid (for the ticker).
pub fn set_in_wait(w: bool) {
    IN_WAIT.store(w, Ordering::SeqCst);
}

/// Block our signals in the calling thread (helper threads), so that they
/// are delivered to the tracer thread.
pub fn block_in_this_thread() {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    set.add(Signal::SIGALRM);
    let _ = set.thread_block();
}

/// The signal that asked pgdbg to terminate, if any.
pub fn terminating() -> Option<i32> {
    match TERMINATE.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Record a failed write (`what`: "writing capture FILE failed: OS
/// error"; only the first one is kept) and make the running command stop
/// like on SIGTERM: the wait loop interrupts the backend, the probe or
/// `continue` ends, the session detaches.
pub fn output_failed(what: String) {
    if let Ok(mut e) = OUTPUT_ERROR.lock()
        && e.is_none()
    {
        *e = Some(what);
    }
    OUTPUT_FAILED.store(true, Ordering::SeqCst);
    if IN_WAIT.load(Ordering::SeqCst) {
        wake_tracer();
    }
}

/// The first failed write, if any (see `output_failed`).
pub fn output_failure() -> Option<String> {
    if !OUTPUT_FAILED.load(Ordering::SeqCst) {
        return None;
    }
    OUTPUT_ERROR.lock().ok().and_then(|e| e.clone())
}

/// The session must end now: a terminating signal or a failed write.
pub fn must_stop() -> bool {
    terminating().is_some() || OUTPUT_FAILED.load(Ordering::SeqCst)
}

pub fn take_interrupt() -> bool {
    INTERRUPT.swap(false, Ordering::SeqCst)
}

pub fn clear_interrupt() {
    INTERRUPT.store(false, Ordering::SeqCst);
    SIGINT_SEEN.store(false, Ordering::SeqCst);
}

/// Whether SIGINT arrived since the last `clear_interrupt`.
pub fn sigint_seen() -> bool {
    SIGINT_SEEN.load(Ordering::SeqCst)
}

/// Whether any active deadline has passed: a probe's `--for` or the
/// whole script's `--for` around it.
pub fn deadline_hit() -> bool {
    DEADLINES
        .lock()
        .map(|d| d.iter().any(|f| f.load(Ordering::SeqCst)))
        .unwrap_or(false)
}

/// Whether the innermost active deadline has passed (an inferior call's
/// timeout: an outer `--for` must not abandon a call half-way).
pub fn innermost_deadline_hit() -> bool {
    DEADLINES
        .lock()
        .map(|d| d.last().is_some_and(|f| f.load(Ordering::SeqCst)))
        .unwrap_or(false)
}

/// A running timer (`--for`, a call's timeout).  Deadlines nest: probes
/// stop at any of them, inferior calls only at the innermost (their own).  Dropping it cancels it.
pub struct Deadline {
    flag: Arc<AtomicBool>,
    cancel: Arc<AtomicBool>,
}

impl Deadline {
    /// After `d`, set this deadline's flag and wake the tracer thread.
    pub fn arm(d: std::time::Duration) -> Deadline {
        let flag = Arc::new(AtomicBool::new(false));
        if let Ok(mut v) = DEADLINES.lock() {
            v.push(flag.clone());
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let (f, c) = (flag.clone(), cancel.clone());
        std::thread::spawn(move || {
            block_in_this_thread();
            let t0 = std::time::Instant::now();
            while t0.elapsed() < d {
                if c.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(
                    d.saturating_sub(t0.elapsed())
                        .min(std::time::Duration::from_millis(20)),
                );
            }
            if !c.load(Ordering::SeqCst) {
                f.store(true, Ordering::SeqCst);
                wake_tracer();
            }
        });
        Deadline { flag, cancel }
    }
}

impl Deadline {
    /// A deadline that passes when another thread says so (a reader of
    /// kernel probe records that has seen `--count N` calls).
    pub fn on_demand() -> (Deadline, DeadlineTrigger) {
        let flag = Arc::new(AtomicBool::new(false));
        if let Ok(mut v) = DEADLINES.lock() {
            v.push(flag.clone());
        }
        let d = Deadline {
            flag: flag.clone(),
            cancel: Arc::new(AtomicBool::new(false)),
        };
        (d, DeadlineTrigger(flag))
    }
}

/// Passes an on-demand [`Deadline`] from any thread.
#[derive(Clone)]
pub struct DeadlineTrigger(Arc<AtomicBool>);

impl DeadlineTrigger {
    pub fn fire(&self) {
        if !self.0.swap(true, Ordering::SeqCst) {
            wake_tracer();
        }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
        if let Ok(mut v) = DEADLINES.lock() {
            v.retain(|f| !Arc::ptr_eq(f, &self.flag));
        }
    }
}

/// A periodic tick for probes that read the target now and then (an
/// in-process recorder's ring): every `every`, the running target is
/// interrupted so the probe can read it while it is stopped.  Dropping it
/// stops the ticks.
pub struct Ticker {
    cancel: Arc<AtomicBool>,
}

impl Ticker {
    pub fn start(every: std::time::Duration) -> Ticker {
        let cancel = Arc::new(AtomicBool::new(false));
        let c = cancel.clone();
        POLL_DUE.store(false, Ordering::SeqCst);
        set_poll_interval(every);
        std::thread::spawn(move || {
            block_in_this_thread();
            loop {
                std::thread::sleep(std::time::Duration::from_micros(
                    POLL_US.load(Ordering::SeqCst),
                ));
                if c.load(Ordering::SeqCst) {
                    return;
                }
                POLL_DUE.store(true, Ordering::SeqCst);
                if IN_WAIT.load(Ordering::SeqCst) {
                    wake_tracer();
                }
            }
        });
        Ticker { cancel }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
        POLL_DUE.store(false, Ordering::SeqCst);
    }
}

/// Wait-loop hooks of a probe with a `Ticker`: like `Hooks`, and the
/// target is also interrupted when a poll is due; `user` tells whether an
/// interrupt was the user's (Ctrl-C) rather than the ticker's.
#[derive(Default)]
pub struct PollHooks {
    pub user: std::cell::Cell<bool>,
}

impl WaitHooks for PollHooks {
    fn user_interrupt(&self) -> bool {
        if take_interrupt() {
            self.user.set(true);
            return true;
        }
        deadline_hit() || POLL_DUE.swap(false, Ordering::SeqCst)
    }
    fn terminate(&self) -> bool {
        must_stop()
    }
    fn waiting(&self, blocked: bool) {
        set_in_wait(blocked);
    }
}

/// Wait-loop hooks backed by the flags above.
pub struct Hooks;

impl WaitHooks for Hooks {
    fn user_interrupt(&self) -> bool {
        take_interrupt() || deadline_hit()
    }
    fn terminate(&self) -> bool {
        must_stop()
    }
    fn waiting(&self, blocked: bool) {
        set_in_wait(blocked);
    }
}

/// Hooks for a second process pgdbg attaches for a while inside a command
/// (a parallel worker during `plan --progress`): Ctrl-C and a deadline end
/// its wait without being taken, so that the command's own loop on its
/// backend still sees them.
pub struct PeekHooks;

impl WaitHooks for PeekHooks {
    fn user_interrupt(&self) -> bool {
        interrupt_pending() || deadline_hit()
    }
    fn terminate(&self) -> bool {
        must_stop()
    }
    fn waiting(&self, blocked: bool) {
        set_in_wait(blocked);
    }
}

/// A Ctrl-C not yet taken by a wait loop.
pub fn interrupt_pending() -> bool {
    INTERRUPT.load(Ordering::SeqCst)
}

/// Hooks while a function runs inside the backend: only the call's own
/// timeout interrupts it.  Ctrl-C and SIGTERM wait for the call to return
/// (abandoning a call mid-way could leave a lock held or the allocator
/// half-updated); they are acted on right after.
pub struct CallHooks;

impl WaitHooks for CallHooks {
    fn user_interrupt(&self) -> bool {
        innermost_deadline_hit()
    }
    fn terminate(&self) -> bool {
        false
    }
    fn waiting(&self, blocked: bool) {
        set_in_wait(blocked);
    }
}

pub fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| format!("{s:?}"))
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// Queue a line for standard output: written by the timer thread within
/// 50 ms, or by `flush_out`.  Probes print a line per event without a write
/// system call each, and a reader that stalls never blocks the tracer.
pub fn out_line(line: &str) {
    let Ok(mut b) = OUT_BUF.lock() else {
        return;
    };
    if b.len() + line.len() + 1 > OUT_CAP {
        OUT_DROPPED.fetch_add(1, Ordering::SeqCst);
        return;
    }
    b.extend_from_slice(line.as_bytes());
    b.push(b'\n');
}

/// Write the queued lines now (before any other output, and at exit).
pub fn flush_out() {
    use std::io::Write;
    let Ok(_w) = OUT_WRITE.lock() else {
        return;
    };
    let data = match OUT_BUF.lock() {
        Ok(mut b) => std::mem::take(&mut *b),
        Err(_) => return,
    };
    if !data.is_empty() && !STDOUT_BROKEN.load(Ordering::SeqCst) {
        let mut o = std::io::stdout().lock();
        // (SIGPIPE is ignored: a closed pipe is EPIPE here)
        if let Err(e) = o.write_all(&data).and_then(|_| o.flush()) {
            STDOUT_BROKEN.store(true, Ordering::SeqCst);
            output_failed(format!("writing standard output failed: {e}"));
        }
    }
    let dropped = OUT_DROPPED.swap(0, Ordering::SeqCst);
    if dropped > 0 {
        crate::errln!(
            "pgdbg: {dropped} output lines dropped: standard output was not read fast enough"
        );
    }
}
