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
pub(super) const TRAP_UNK: i32 = 5;
