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
