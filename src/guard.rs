//! pgdbg's own signals.  Ctrl-C (SIGINT) while the backend runs asks the
//! wait loop to stop it with PTRACE_INTERRUPT; SIGTERM/SIGHUP (a kill, a
//! closed terminal) make pgdbg stop the backend, restore it and detach
//! before exiting.  Handlers only set flags: all ptrace work stays on the
//! thread that attached.

use crate::target::WaitHooks;
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static INTERRUPT: AtomicBool = AtomicBool::new(false);
/// Sticky: a SIGINT arrived (scripts stop at the next command boundary).
static SIGINT_SEEN: AtomicBool = AtomicBool::new(false);
static TERMINATE: AtomicI32 = AtomicI32::new(0);
/// A `--for DURATION` limit expired (set by the timer thread).
static DEADLINE: AtomicBool = AtomicBool::new(false);
/// pthread_t of the tracer thread, for the timer's wake-up signal.
static MAIN_THREAD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGALRM {
        // only wakes a blocking waitpid (EINTR); DEADLINE is already set
    } else if sig == libc::SIGINT {
        INTERRUPT.store(true, Ordering::SeqCst);
        SIGINT_SEEN.store(true, Ordering::SeqCst);
    } else {
        TERMINATE.store(sig, Ordering::SeqCst);
    }
}

/// Install the handlers (without SA_RESTART, so a blocking waitpid returns
/// EINTR) and ignore SIGPIPE (a closed pipe must not kill us before we
/// clean up).
pub fn install() {
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    MAIN_THREAD.store(unsafe { libc::pthread_self() } as u64, Ordering::SeqCst);
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

pub fn deadline_hit() -> bool {
    DEADLINE.load(Ordering::SeqCst)
}

/// A running `--for` timer; dropping it cancels the timer.
pub struct Deadline {
    cancel: std::sync::Arc<AtomicBool>,
}

impl Deadline {
    /// After `d`, set the deadline flag and wake the tracer thread.
    pub fn arm(d: std::time::Duration) -> Deadline {
        DEADLINE.store(false, Ordering::SeqCst);
        let cancel = std::sync::Arc::new(AtomicBool::new(false));
        let c = cancel.clone();
        std::thread::spawn(move || {
            block_in_this_thread();
            let t0 = std::time::Instant::now();
            while t0.elapsed() < d {
                if c.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep((d - t0.elapsed()).min(std::time::Duration::from_millis(20)));
            }
            if c.load(Ordering::SeqCst) {
                return;
            }
            DEADLINE.store(true, Ordering::SeqCst);
            let main = MAIN_THREAD.load(Ordering::SeqCst);
            if main != 0 {
                unsafe {
                    libc::pthread_kill(main as libc::pthread_t, libc::SIGALRM);
                }
            }
        });
        Deadline { cancel }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
        DEADLINE.store(false, Ordering::SeqCst);
    }
}

/// Wait-loop hooks backed by the flags above.
pub struct Hooks;

impl WaitHooks for Hooks {
    fn user_interrupt(&self) -> bool {
        take_interrupt() || deadline_hit()
    }
    fn terminate(&self) -> bool {
        terminating().is_some()
    }
}

pub fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| format!("{s:?}"))
        .unwrap_or_else(|_| format!("signal {sig}"))
}
