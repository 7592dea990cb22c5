//! pgdbg's runtime: its own signals, deadlines, the poll ticker and the
//! queue of probe output, process-wide and below every other room (it
//! imports nothing of pgdbg's).  Ctrl-C (SIGINT) while the backend runs
//! asks the wait loop to stop it with PTRACE_INTERRUPT; SIGTERM/SIGHUP (a
//! kill, a closed terminal) make pgdbg stop the backend, restore it and
//! detach before exiting.  Handlers only set flags: all ptrace work stays
//! on the thread that attached.
//!
//! A flag set just before the tracer thread blocks in `waitpid` would be
//! missed until the next stop; a timer thread closes that window by
//! waking the tracer (SIGALRM, EINTR) while a flag is pending and it waits.
//!
//! The wait loop (`inferior/`) reads these flags through [`WaitHooks`],
//! the trait this room defines and its hooks implement.

mod capture;
mod deadlines;
mod hooks;
mod output;
mod signals;
mod sink;
mod ticker;

pub use deadlines::{Deadline, DeadlineTrigger, deadline_hit, innermost_deadline_hit, limit_text};
pub use hooks::{CallHooks, ExitHooks, Hooks, PeekHooks, PollHooks, WaitHooks};
pub use output::{OUTPUT_FAILED_EXIT, output_failed, output_failure};
pub use signals::{
    block_in_this_thread, clear_interrupt, ignore_session_signals, interrupt_pending, set_in_wait,
    sigint_seen, signal_name, take_interrupt, terminating,
};
pub use sink::{Installed, PromptPrinter, Sink, sink};
pub use ticker::Ticker;

/// Install the handlers (without SA_RESTART, so a blocking waitpid returns
/// EINTR), ignore SIGPIPE (a closed pipe must not kill us before we clean
/// up), and start the timer thread that writes queued output and wakes the
/// tracer while a flag is pending.
pub fn install() {
    signals::install_handlers();
    std::thread::spawn(|| {
        block_in_this_thread();
        loop {
            std::thread::sleep(std::time::Duration::from_millis(50));
            if output::queued() {
                flush_out();
            }
            let pending = signals::interrupt_pending()
                || terminating().is_some()
                || output::failed()
                || deadline_hit();
            if pending && signals::in_wait() {
                signals::wake_tracer();
            }
        }
    });
}

/// Write the queued lines now (before any other output, and at exit),
/// through the current sink (above the prompt while it is shown).
pub fn flush_out() {
    sink().flush();
}

/// The session must end now: a terminating signal or a failed write.
pub fn must_stop() -> bool {
    terminating().is_some() || output::failed()
}

/// An error as one line (what every failure of pgdbg prints), its causes
/// after it (`context: cause`): the message alone would hide why (`cannot
/// open FILE` without the OS's reason, `plan --analyze stopped` without
/// what stopped it).
pub fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_line_keeps_the_cause() {
        let e = anyhow::anyhow!("No such file or directory (os error 2)")
            .context("cannot open /x/y.gdb");
        assert_eq!(
            super::one_line(&e),
            "cannot open /x/y.gdb: No such file or directory (os error 2)"
        );
        let e = anyhow::anyhow!("line one\nline two");
        assert_eq!(super::one_line(&e), "line one line two");
    }
}
