//! What the wait loop (`inferior/`) asks while the target runs, defined
//! here so that the loop reads pgdbg's flags without this room knowing it;
//! the hooks below answer from the signals, deadlines and ticker.

use super::deadlines::{deadline_hit, innermost_deadline_hit};
use super::signals::{interrupt_pending, set_in_wait, take_interrupt};
use super::ticker::take_poll_due;

/// Outcome of checking for a pending tool signal while waiting.
pub trait WaitHooks {
    /// The user pressed Ctrl-C: the wait should interrupt the target.
    fn user_interrupt(&self) -> bool;
    /// pgdbg received SIGTERM/SIGHUP: stop the target and return.
    fn terminate(&self) -> bool;
    /// Called with true before blocking in waitpid and false after.
    fn waiting(&self, _blocked: bool) {}
    /// The target's exit stop (`inferior::Stop::Exiting`) is reported,
    /// not let go at once.
    fn exit_stop(&self) -> bool {
        false
    }
}

/// Wait-loop hooks of a probe with a `Ticker`: like `Hooks`, and the
/// target is also interrupted when a poll is due; `user` tells whether an
/// interrupt was the user's (Ctrl-C) rather than the ticker's.
/// `exit`: the target's exit stop is reported (a probe reads its memory
/// one last time there).
#[derive(Default)]
pub struct PollHooks {
    pub user: std::cell::Cell<bool>,
    pub exit: bool,
}

impl WaitHooks for PollHooks {
    fn user_interrupt(&self) -> bool {
        if take_interrupt() {
            self.user.set(true);
            return true;
        }
        deadline_hit() || take_poll_due()
    }
    fn terminate(&self) -> bool {
        super::must_stop()
    }
    fn waiting(&self, blocked: bool) {
        set_in_wait(blocked);
    }
    fn exit_stop(&self) -> bool {
        self.exit
    }
}

/// Wait-loop hooks backed by the flags above.
pub struct Hooks;

impl WaitHooks for Hooks {
    fn user_interrupt(&self) -> bool {
        take_interrupt() || deadline_hit()
    }
    fn terminate(&self) -> bool {
        super::must_stop()
    }
    fn waiting(&self, blocked: bool) {
        set_in_wait(blocked);
    }
}

/// `Hooks`, and the target's exit is a stop (a probe with no polls that
/// reads at the exit: the in-process counters).
pub struct ExitHooks;

impl WaitHooks for ExitHooks {
    fn user_interrupt(&self) -> bool {
        Hooks.user_interrupt()
    }
    fn terminate(&self) -> bool {
        Hooks.terminate()
    }
    fn waiting(&self, blocked: bool) {
        Hooks.waiting(blocked)
    }
    fn exit_stop(&self) -> bool {
        true
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
        super::must_stop()
    }
    fn waiting(&self, blocked: bool) {
        set_in_wait(blocked);
    }
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
