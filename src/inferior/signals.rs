//! Which signals a backend lives on (passed straight through while pgdbg
//! runs it) and which are faults the user must see.

use nix::sys::signal::Signal;

/// Signals delivered to the target without stopping the user.  A backend
/// gets SIGUSR1 (latch / procsignal) and SIGALRM (timeouts) constantly;
/// SIGINT is a query cancel, SIGTERM a termination request, SIGHUP a config
/// reload, SIGURG the latch wake-up of 15+.
pub fn pass_through(sig: Signal) -> bool {
    use Signal::*;
    matches!(
        sig,
        SIGUSR1
            | SIGUSR2
            | SIGALRM
            | SIGINT
            | SIGTERM
            | SIGHUP
            | SIGURG
            | SIGPIPE
            | SIGCHLD
            | SIGQUIT
            | SIGWINCH
            | SIGIO
            | SIGPROF
            | SIGVTALRM
            | SIGXFSZ
            | SIGCONT
            | SIGTTIN
            | SIGTTOU
            | SIGTSTP
            | SIGSTOP
    )
}

/// `si_code` values of a SIGTRAP (the kernel's siginfo.h), one place for
/// the wait loop and the handler pgdbg puts in the target: an int3 is
/// SI_KERNEL (do_int3 sends the signal without details), or TRAP_BRKPT on
/// kernels that give one; a single-step TRAP_TRACE; a debug register
/// TRAP_HWBKPT; TRAP_UNK is what pgdbg writes into a SIGTRAP it has dealt
/// with (the handler leaves it alone).
pub(super) const SI_KERNEL: i32 = 0x80;
pub(super) const TRAP_BRKPT: i32 = 1;
pub(super) const TRAP_TRACE: i32 = 2;
pub(super) const TRAP_HWBKPT: i32 = 4;

/// The signals blocked while pgdbg's handlers in the backend run (the
/// SIGTRAP handler's, traphandler.rs, and the SIGCONT handler's,
/// selfrelease.rs): every one but SIGTRAP.  A debug register
/// armed on a stack word the handler's frame reuses (by a debugger that
/// died without clearing it, or a tool beside pgdbg; pgdbg's own watches
/// on locals are perf breakpoints that end with it: perfwatch.rs) traps
/// inside the handler; the kernel forces a blocked synchronous SIGTRAP to
/// its default action (`force_sig_info_to_task`), which would kill the
/// backend, while an unblocked one comes to the SIGTRAP handler again, one
/// frame deeper, which returns at once for a debug register's trap.
pub const BLOCKED_IN_HANDLERS: u64 = !(1 << (libc::SIGTRAP - 1));
pub(super) const TRAP_UNK: i32 = 5;

/// Signals never held back during a call: SIGCONT and the stop signals
/// (the kernel acts on them, PostgreSQL installs no handler for them, and
/// the group stop's re-hold and someone else's stop rely on seeing them go
/// through: hold.rs, outside.rs), and SIGQUIT (the postmaster's crash
/// restart or immediate shutdown: its handler only exits the process, and
/// a backend still alive 5 s later is SIGKILLed by the postmaster).
pub(super) fn never_held(sig: Signal) -> bool {
    sig == Signal::SIGCONT || sig == Signal::SIGQUIT || super::outside::is_stop_signal(sig)
}

/// What the wait loop does with a signal the backend receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Disposition {
    /// The backend stays stopped and the user is told (until continue).
    pub stops: bool,
    /// The backend gets it: at once, or with the resume after the stop.
    pub passed: bool,
    /// Held back while the guardian finishes a call a killed pgdbg left in
    /// flight (guardian/inflight.rs), and sent after it.
    pub held_in_call: bool,
}

/// `sig`'s disposition, from `pass_through` and `never_held`: SIGTRAP is
/// pgdbg's own (its breakpoints and watchpoints; handed to the backend it
/// would kill it), SIGKILL nobody can catch, a fault stops the user and is
/// delivered with the next resume.
pub fn disposition(sig: Signal) -> Disposition {
    let (stops, passed, held_in_call) = match sig {
        Signal::SIGTRAP => (true, false, false),
        Signal::SIGKILL => (false, true, false),
        s if pass_through(s) => (false, true, !never_held(s)),
        _ => (true, true, false),
    };
    Disposition {
        stops,
        passed,
        held_in_call,
    }
}

/// `info signals [SIGNAL]`: gdb's table (Signal, Stop, Print, Pass to
/// program, Description) for every signal, or for `only`.
pub fn table(only: Option<Signal>) -> String {
    let yes = |b: bool| if b { "Yes" } else { "No" };
    let mut s = String::from("Signal        Stop\tPrint\tPass to program\tDescription\n");
    if only.is_none() {
        s.push('\n');
    }
    for sig in Signal::iterator().filter(|s| only.is_none_or(|o| o == *s)) {
        let d = disposition(sig);
        let mut what = description(sig);
        if sig == Signal::SIGTRAP {
            what.push_str(" (pgdbg's breakpoints)");
        } else if sig == Signal::SIGKILL {
            what.push_str(" (cannot be caught)");
        } else if d.held_in_call {
            what.push_str(", held back by the guardian");
        }
        s.push_str(&format!(
            "{:<13} {}\t{}\t{}\t\t{what}\n",
            sig.as_str(),
            yes(d.stops),
            yes(d.stops),
            yes(d.passed)
        ));
    }
    if only.is_none() {
        s.push_str(
            "\nHeld back by the guardian: while it finishes a call a killed pgdbg left; sent after.\n",
        );
    }
    // (the prompt ends the output's last line)
    s.pop();
    s
}

/// The C library's description of `sig` ("Hangup", "Interrupt", ...).
fn description(sig: Signal) -> String {
    // SAFETY: strsignal(3) returns a NUL-terminated string (glibc: a
    // constant one for a known signal), copied before any other call.
    let p = unsafe { libc::strsignal(sig as libc::c_int) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: p is non-null and NUL-terminated (above).
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_what_the_wait_loop_does() {
        let t = table(None);
        let row = |name: &str| -> Vec<String> {
            let l = t
                .lines()
                .find(|l| l.split_whitespace().next() == Some(name))
                .unwrap_or_else(|| panic!("no {name} in\n{t}"));
            l.split('\t')
                .filter(|c| !c.is_empty())
                .map(|c| c.trim().to_string())
                .collect()
        };
        // SIGTRAP is pgdbg's: stops, never passed
        let trap = row("SIGTRAP");
        assert_eq!(trap[..3], ["SIGTRAP       Yes", "Yes", "No"], "{t}");
        // a backend lives on SIGUSR1: passed, not a stop, held by the guardian
        let usr1 = row("SIGUSR1");
        assert_eq!(usr1[..3], ["SIGUSR1       No", "No", "Yes"], "{t}");
        assert!(usr1[3].ends_with("held back by the guardian"), "{t}");
        // SIGQUIT is never held back: the postmaster would SIGKILL the backend
        assert!(!row("SIGQUIT")[3].contains("held back"), "{t}");
        // a fault: the user sees it, the backend gets it after
        assert_eq!(row("SIGSEGV")[..3], ["SIGSEGV       Yes", "Yes", "Yes"]);
        assert!(row("SIGSEGV")[3].contains("Segmentation"), "{t}");
        // within 100 columns, tabs to 8
        for l in t.lines() {
            let mut col = 0;
            for c in l.chars() {
                col = if c == '\t' { col / 8 * 8 + 8 } else { col + 1 };
            }
            assert!(col <= 100, "{col} columns: {l}");
        }
        let one = table(Some(Signal::SIGALRM));
        assert_eq!(one.lines().count(), 2, "{one}");
        assert!(one.lines().nth(1).unwrap().starts_with("SIGALRM "), "{one}");
    }
}
