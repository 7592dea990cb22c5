//! pgdbg's own signals: handlers that only set flags, the tracer thread
//! they wake, and the signals helper threads and processes block or ignore.

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

static INTERRUPT: AtomicBool = AtomicBool::new(false);
/// Sticky: a SIGINT arrived (scripts stop at the next command boundary).
static SIGINT_SEEN: AtomicBool = AtomicBool::new(false);
static TERMINATE: AtomicI32 = AtomicI32::new(0);
/// pthread_t of the tracer thread, for wake-ups.
static MAIN_THREAD: AtomicU64 = AtomicU64::new(0);
/// The tracer thread is blocked in waitpid.
static IN_WAIT: AtomicBool = AtomicBool::new(false);

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

pub(super) fn wake_tracer() {
    let main = MAIN_THREAD.load(Ordering::SeqCst);
    if main != 0 {
        unsafe {
            libc::pthread_kill(main as libc::pthread_t, libc::SIGALRM);
        }
    }
}

/// The calling thread becomes the tracer thread; the handlers are
/// installed (see `runtime::install`).
pub(super) fn install_handlers() {
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
}

/// Mark the tracer thread as blocked in waitpid (for the ticker).
pub fn set_in_wait(w: bool) {
    IN_WAIT.store(w, Ordering::SeqCst);
}

/// Whether the tracer thread is blocked in waitpid.
pub(super) fn in_wait() -> bool {
    IN_WAIT.load(Ordering::SeqCst)
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

/// A Ctrl-C not yet taken by a wait loop.
pub fn interrupt_pending() -> bool {
    INTERRUPT.load(Ordering::SeqCst)
}

pub fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| format!("{s:?}"))
        .unwrap_or_else(|_| format!("signal {sig}"))
}
