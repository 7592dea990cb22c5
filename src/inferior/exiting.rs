//! The exit stop (`PTRACE_O_TRACEEXIT`): a backend that ends stops once
//! more, in the kernel's `do_exit`, before its memory is released, so that
//! what a recorder of pgdbg's holds in it can be read one last time
//! (`Stop::Exiting`).  Set only while a probe asks for it
//! (`set_exit_stops`), reported only to a wait whose hooks ask for it
//! (`WaitHooks::exit_stop`: the probe loop's), and let go at once by every
//! other wait (nothing else can use it).  What cannot hold a backend there:
//! a SIGKILL ends the stop (and on recent kernels there is no exit stop at
//! all after one); the kernel lets it go when pgdbg dies or detaches (the
//! option is the tracer's); nothing is written for it.

use super::*;

impl Target {
    /// Ask for an exit stop (`on`) or no more; the target must be stopped.
    pub fn set_exit_stops(&mut self, on: bool) -> Result<()> {
        if self.gone || self.exit_stops == on {
            return Ok(());
        }
        let opts = if on {
            ptrace::Options::PTRACE_O_TRACEEXIT
        } else {
            ptrace::Options::empty()
        };
        ptrace::setoptions(self.pid, opts)
            .map_err(|e| anyhow!("PTRACE_SETOPTIONS on process {} ({e})", self.pid))?;
        self.exit_stops = on;
        Ok(())
    }

    /// In its exit stop: the exit goes on (a SIGKILL may have ended the
    /// stop already: nothing to resume then).
    pub(super) fn let_exit(&mut self) {
        let _ = ptrace::cont(self.pid, None);
        self.set_running();
    }

    /// Let a target in its exit stop (`Stop::Exiting`) end, and wait for
    /// its end (`Stop::Exited` or `Stop::Killed`): waited for at once, so
    /// that its parent (the postmaster) hears of it.
    pub fn finish_exit(&mut self) -> Result<Stop> {
        self.let_exit();
        self.wait(&NoHooks)
    }
}
