//! Letting go of the target: the detach that restores every code byte,
//! debug register and detour first, and the one that restores nothing.

use super::*;

impl Target {
    /// Restore every code byte and debug register and detach.  Safe to call
    /// more than once and on a dead target.
    /// Let go without restoring anything (the guardian found another
    /// process under the PID): records dropped, a signal kept at attach
    /// delivered.
    pub(crate) fn detach_untouched(&mut self) -> Result<()> {
        self.inserted.clear();
        self.debugregs_dirty = false;
        self.detours.clear();
        self.undone_jumps.clear();
        self.trap = None;
        if !self.state.is_attached() {
            return Ok(());
        }
        let sig = self.signal_to_deliver();
        self.mark_detached();
        match ptrace::detach(self.pid, sig) {
            Ok(()) | Err(Errno::ESRCH) => {
                self.note_held_signals();
                self.release_hold();
                Ok(())
            }
            Err(e) => Err(anyhow!("cannot detach from process {} ({e})", self.pid)),
        }
    }

    pub fn detach(&mut self) -> Result<()> {
        if !self.state.is_attached() {
            return Ok(());
        }
        if !self.state.is_stopped() {
            self.ensure_stopped()?;
            if self.state.is_gone() {
                return Ok(());
            }
        }
        if self.guardian.is_some() {
            // pgdbg's own detach (the guardian's has no guardian)
            crate::config::pause_for_tests("detach");
        }
        let mut first_err: Option<anyhow::Error> = None;
        // rip put back onto one of our int3s with its SIGTRAP still queued
        // (wait.rs): that SIGTRAP taken as the step over takes it, rip
        // left on the int3, never rewound onto whatever precedes it (an
        // int3 of ours there would have its instruction run twice)
        if let Err(_end) = self.take_queued_trap_here()? {
            return Ok(());
        }
        // A SIGTRAP still queued just after one of our int3s: taken now,
        // while the breakpoint is known, and rip rewound only if its
        // siginfo says that int3 trapped (a watchpoint's trap after a
        // one-byte instruction there is dropped: that instruction ran).
        // Before any injected system call, which would swallow it.
        if self.int3_behind_rip()?.is_some() && self.sigtrap_pending() {
            if self.own_sigtrap_queued() {
                // (an interrupt stop still queued may come first: a few stops)
                self.drain_pending(8, Self::sigtrap_pending, false)?;
            }
            if self.state.is_stopped()
                && self.own_sigtrap_queued()
                && !self.on_int3_with_trap_queued(false)?
                && let Some(bp) = self.int3_behind_rip()?
            {
                // the int3's trap never the next stop: rewound as before
                // (someone's SIGTRAP, or a blocked one, is not an int3's:
                // rip one past it is where the backend is)
                self.rewind_to(bp)?;
            }
            if self.state.is_gone() {
                return Ok(());
            }
        }
        // pgdbg's own detach, its SIGTRAP handler in place: the group stop
        // ends once nothing needs it, before the pipe goes (below).  The
        // guardian's and a rescue's detach (no guardian of their own: no
        // hold would be taken again for a system call whose signal frame is
        // refused) and one without the handler (a single-step's trap flag
        // could still be set) keep the order of before: the pipe first,
        // the stop ended after PTRACE_DETACH
        let leave_early = self.guardian.is_some() && self.trap.is_some();
        if !leave_early && let Err(e) = self.remove_self_release() {
            first_err.get_or_insert(e);
        }
        if let Err(e) = self.remove_all_detours() {
            first_err.get_or_insert(e);
        }
        let addrs: Vec<u64> = self.inserted.keys().copied().collect();
        for a in addrs {
            // an int3 of ours is there, or the code it was in went away (a
            // library unloaded before pgdbg saw it, or pgdbg died first and
            // this is the guardian): then the old byte belongs to nothing
            // mapped now and is not written
            if self.byte_in_target(a) != Some(INT3) {
                log::debug(&format!(
                    "{a:#x}: no int3 there any more (unmapped or replaced); original byte not written"
                ));
                self.forget_breakpoint(a);
                continue;
            }
            if let Err(e) = self.remove_breakpoint(a) {
                first_err.get_or_insert(e);
            }
        }
        if self.debugregs_dirty {
            if let Err(e) = self.set_debugreg(7, 0) {
                first_err.get_or_insert(e);
            }
            // only those that hold an address: writing one never used
            // makes the kernel reserve a breakpoint slot for the thread
            // until it exits (perf breakpoints, pgdbg's on locals too,
            // would find none free)
            for n in 0..4 {
                if self.debugreg(n).is_ok_and(|v| v != 0) {
                    let _ = self.set_debugreg(n, 0);
                }
            }
        }
        // the perf breakpoints on locals (perfwatch.rs): closed, their
        // pending trap drained below
        self.close_perf_watches();
        // so would a SIGILL of a jump a uprobe took over (`jumpover.rs`):
        // taken while the undone jumps are known, and dropped
        if let Err(e) = self.drain_sigill() {
            first_err.get_or_insert(e);
        }
        // a SIGTRAP the kernel still holds would kill the backend after
        // we leave: take it now
        if let Err(e) = self.drain_sigtrap() {
            first_err.get_or_insert(e);
        }
        // Nothing of pgdbg's is left that a backend running untraced could
        // meet (no int3, debug register, detour or call): in pgdbg's own
        // detach (`leave_early`) the group stop ends now, while the SIGCONT
        // pipe (selfrelease.rs) still covers it, not after the pipe is gone.  The system calls of the
        // teardown below then run without it (with their signal frame,
        // detour.rs): a death of every pgdbg process at any instant of it
        // leaves the backend running (before, it left it stopped once the
        // pipe was closed).  When something was not restored, the stop
        // stays for the guardian.
        if leave_early {
            if first_err.is_none() && self.hold == hold::Hold::Ours && !self.hold_needed() {
                self.leave_group_stop();
            }
            // the pipe's read end (selfrelease.rs)
            if let Err(e) = self.remove_self_release() {
                first_err.get_or_insert(e);
            }
        }
        // our SIGTRAP handler last: nothing of ours can trap any more
        if let Err(e) = self.remove_trap_handler() {
            first_err.get_or_insert(e);
        }
        self.deferred.retain(|s| *s != Signal::SIGTRAP);
        self.note_held_signals();
        if self.pending_fault == Some(Signal::SIGTRAP) {
            self.pending_fault = None;
        }
        let sig = self.signal_to_deliver();
        if self.state.is_gone() {
            return Ok(());
        }
        let detached = match ptrace::detach(self.pid, sig) {
            Ok(()) => true,
            Err(Errno::ESRCH) => {
                // not in a ptrace stop any more: killed meanwhile.  Its
                // parent hears of its end only once its tracer has waited
                // for it (a parallel worker's leader waits for that)
                let _ = waitpid(self.pid, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL));
                true
            }
            Err(e) => {
                first_err.get_or_insert(anyhow!("PTRACE_DETACH failed ({e})"));
                false
            }
        };
        self.mark_detached();
        if detached {
            // the detach carried the held-back signal (the others were sent)
            self.note_held_signals();
        }
        // the group stop last, once untraced: the target runs on.  Not when
        // something was not restored: the backend then stays stopped, and
        // the guardian (not told all is clean, its pipe closed by finish
        // below) restores it and sends the SIGCONT
        if detached && first_err.is_none() {
            self.release_hold();
        }
        if let Some(g) = &mut self.guardian {
            // clean when everything was restored; else it tries again
            g.finish();
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
