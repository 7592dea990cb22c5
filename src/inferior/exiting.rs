//! The exit stop (`PTRACE_O_TRACEEXIT`): a backend that ends stops once
//! more, in the kernel's `do_exit`, before its memory is released, so that
//! what a recorder of pgdbg's holds in it can be read one last time
//! (`Stop::Exiting`).  Set only while a probe asks for it
//! (`set_exit_stops`), reported only to a wait whose hooks ask for it
//! (`WaitHooks::exit_stop`: the probe loop's), and let go at once by every
//! other wait (nothing else can use it).  Only pgdbg ends the stop: its
//! `let_exit`, its detach or its death (the option is the tracer's; the
//! kernel lets the backend go).  A SIGKILL does not: one sent there is
//! dropped (the process is ending already), and a backend SIGKILLed while
//! it runs stops there too (6.18).  Nothing is written for it.

use super::*;

impl Target {
    /// Ask for an exit stop (`on`) or no more; the target must be stopped.
    pub fn set_exit_stops(&mut self, on: bool) -> Result<()> {
        if self.state.is_gone() || self.exit_stops == on {
            return Ok(());
        }
        ptrace::setoptions(self.pid, Self::options(on, false))
            .map_err(|e| anyhow!("PTRACE_SETOPTIONS on process {} ({e})", self.pid))?;
        self.exit_stops = on;
        Ok(())
    }

    /// The ptrace options pgdbg sets, all of them at once (the kernel
    /// replaces the whole set): the exit stop while asked for, and system
    /// call stops told from traps (`sysgood`) while an injected system
    /// call runs (detour.rs), which must not clear the exit stop.
    pub(super) fn ptrace_options(&self, sysgood: bool) -> ptrace::Options {
        Self::options(self.exit_stops, sysgood)
    }

    fn options(exit: bool, sysgood: bool) -> ptrace::Options {
        let mut o = ptrace::Options::empty();
        if exit {
            o |= ptrace::Options::PTRACE_O_TRACEEXIT;
        }
        if sysgood {
            o |= ptrace::Options::PTRACE_O_TRACESYSGOOD;
        }
        o
    }

    /// In its exit stop: the exit goes on (nothing else ends the stop; a
    /// failed resume is of a process no longer there to resume).
    fn let_exit(&mut self) {
        let _ = ptrace::cont(self.pid, None);
        self.set_running();
    }

    /// Let a target in its exit stop (`Stop::Exiting`) end, and wait
    /// (blocking) for its end (`Stop::Exited` or `Stop::Killed`): taken at
    /// once, so that its parent (the postmaster) hears of it.  Every wait
    /// that meets an exit stop it does not report ends it here.
    pub fn finish_exit(&mut self) -> Result<Stop> {
        if !self.state.in_exit_stop() {
            // let go and waited for all the same, as before: said only
            log::debug(&format!(
                "finish_exit outside the exit stop ({:?})",
                self.state
            ));
        }
        self.let_exit();
        loop {
            let status = match self.waitpid_blocking() {
                Ok(s) => s,
                // reaped by someone else (never by the postmaster, whose
                // wait comes after ours): gone all the same, as `wait` says
                Err(_) if self.state.is_gone() => return Ok(Stop::Exited(-1)),
                Err(e) => return Err(e),
            };
            if let Some(end) = self.ended(&status) {
                return Ok(end);
            }
            // nothing else comes after the exit stop; resumed all the same
            self.mark_stopped();
            self.let_exit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_injected_system_call_keeps_the_exit_stop() {
        let both = Target::options(true, true);
        assert!(both.contains(ptrace::Options::PTRACE_O_TRACEEXIT));
        assert!(both.contains(ptrace::Options::PTRACE_O_TRACESYSGOOD));
        assert_eq!(
            Target::options(true, false),
            ptrace::Options::PTRACE_O_TRACEEXIT
        );
        assert_eq!(Target::options(false, false), ptrace::Options::empty());
    }
}
