//! Stopping and resuming the target: PTRACE_INTERRUPT and the
//! accounting of its stops, the resume with the signal to deliver, the
//! running state.

use super::*;

impl Target {
    /// A stop was taken (see `state::TraceState::on_stop_seen`).
    pub(super) fn mark_stopped(&mut self) {
        let r = self.state.on_stop_seen();
        self.after_stop(r);
    }

    /// An event stop was taken (an interrupt's, a group stop).
    pub(super) fn mark_event_stop(&mut self) {
        let r = self.state.on_event_stop();
        self.after_stop(r);
    }

    /// The exit stop was taken (exiting.rs).
    pub(super) fn mark_exit_stop(&mut self) {
        let r = self.state.on_exit_stop();
        self.after_stop(r);
    }

    /// A signal's delivery stop was seen and left to the kernel
    /// (wait.rs `take_status`).
    pub(super) fn mark_stop_unreaped(&mut self) {
        let r = self.state.on_stop_left_unreaped();
        self.after_stop(r);
    }

    /// The time stopped counts from the first stop seen.
    fn after_stop(&mut self, r: std::result::Result<(), state::BadTransition>) {
        Self::refused(r);
        if self.state.is_stopped() {
            self.stopped_since
                .get_or_insert_with(std::time::Instant::now);
        }
    }

    /// A change of state that cannot happen was refused (state.rs): the
    /// request that went with it is made already; said, and gone on.
    pub(super) fn refused(r: std::result::Result<(), state::BadTransition>) {
        if let Err(e) = r {
            log::debug(&e.to_string());
        }
    }

    /// Interrupt, unless an interrupt whose stop has not been seen is
    /// already pending (the kernel merges them: a second one would be
    /// counted but never stop the target); then adopt that one.
    pub(super) fn interrupt_or_adopt(&mut self) -> Result<()> {
        if self.stale_interrupts > 0 {
            self.stale_interrupts -= 1;
            self.interrupts_outstanding += 1;
            return Ok(());
        }
        if self.interrupts_outstanding > 0 {
            self.adopt_relisten();
            return Ok(());
        }
        self.interrupt()
    }

    /// The event stop of one of our PTRACE_INTERRUPTs was seen while a
    /// loop of our own was waiting for something else: account for it.
    /// `sig` is what the event stop reports (outside.rs: SIGTRAP when no
    /// group stop is in effect): SIGTRAP with no interrupt of pgdbg's in
    /// flight is the kernel's notice of a SIGCONT, which ended any stop of
    /// someone else's and is no re-hold stop of pgdbg's either.
    pub(super) fn interrupt_stop_seen(&mut self, sig: Signal) {
        if sig == Signal::SIGTRAP {
            self.outside_continued();
            if self.stale_interrupts == 0 && self.interrupts_outstanding == 0 {
                return;
            }
        }
        if self.stale_interrupts > 0 {
            self.stale_interrupts -= 1;
        } else if self.interrupts_outstanding > 0 {
            self.interrupts_outstanding -= 1;
        } else if self.rehold_pending > 0 {
            self.rehold_pending -= 1;
        }
    }

    /// Ask a running target to stop (PTRACE_INTERRUPT).
    pub fn interrupt(&mut self) -> Result<()> {
        if self.state.is_gone() {
            return Ok(());
        }
        ptrace::interrupt(self.pid).context("PTRACE_INTERRUPT")?;
        self.interrupts_outstanding += 1;
        Ok(())
    }

    /// Resume the target (delivering any deferred signal) and wait for the
    /// next stop the user should see.  Breakpoint stepping is the caller's
    /// business: call `step_over_breakpoint` first when `rip` sits on one.
    pub fn cont_and_wait(&mut self, hooks: &dyn WaitHooks) -> Result<Stop> {
        self.resume()?;
        self.wait(hooks)
    }

    /// The signal to deliver with the next resume (a fault the user saw,
    /// else the first deferred one); any further deferred signals are
    /// re-sent to the target with kill(2).
    pub(super) fn signal_to_deliver(&mut self) -> Option<Signal> {
        if self.holding_signals {
            // kept (and recorded) until the holder lets them go
            return None;
        }
        let sig = self
            .pending_fault
            .take()
            .or_else(|| self.deferred.pop_front());
        while let Some(s) = self.deferred.pop_front() {
            if s == Signal::SIGCONT && self.sigcont_to_handler() {
                // its effect came when it was sent (selfrelease.rs)
                continue;
            }
            // (someone's stop signal sent again is known for theirs when
            // it is reported: outside.rs)
            let _ = nix::sys::signal::kill(self.pid, s);
        }
        // (the record is cleared once the resume has carried the signal)
        if self.state.in_event_stop()
            && let Some(s) = sig
        {
            // the kernel ignores a signal given with the resume from an
            // event stop (our interrupt, the group stop): queued again,
            // it is reported and passed through as usual
            if s != Signal::SIGCONT || !self.sigcont_to_handler() {
                let _ = nix::sys::signal::kill(self.pid, s);
            }
            return None;
        }
        if let Some(s) = sig {
            // delivered with the resume: someone's stop signal starts
            // their group stop without a signal-delivery stop of its own
            self.outside_delivered(s);
        }
        sig
    }

    /// Resume the target (delivering any deferred signal) without waiting;
    /// `wait` collects the next stop.
    pub fn resume(&mut self) -> Result<()> {
        self.before_resume();
        let sig = self.signal_to_deliver();
        if self.resume_into_outside_stop(sig)? {
            return Ok(());
        }
        self.cont_raw(sig)
    }

    /// `sig` as it may be delivered: a SIGCONT is not while our SIGCONT
    /// handler is in place (selfrelease.rs: its effect, ending the group
    /// stop, came when it was sent; the re-hold has seen it).
    pub(super) fn deliverable(&self, sig: Option<Signal>) -> Option<Signal> {
        sig.filter(|s| *s != Signal::SIGCONT || !self.sigcont_to_handler())
    }

    /// Before the target runs: the group stop entered or left as what
    /// pgdbg has in the target needs (hold.rs).
    pub(super) fn before_resume(&mut self) {
        self.update_hold();
    }

    pub(super) fn siginfo_code(&self) -> Option<i32> {
        ptrace::getsiginfo(self.pid).ok().map(|si| si.si_code)
    }

    /// The target runs (or is gone): cached registers are stale, and so is
    /// whatever a caller derived from this stop (`run_count` moves on).
    pub(super) fn set_running(&mut self) {
        // (a resume ended the stop `take_status` saw: nothing left to take)
        Self::refused(self.state.on_resumed());
        self.ran();
    }

    /// What a stop ending makes stale (every way out of a stop: a resume,
    /// the detach, the end of the process).
    fn ran(&mut self) {
        self.runs = self.runs.wrapping_add(1);
        if let Some(t) = self.stopped_since.take() {
            self.stopped_before += t.elapsed();
        }
        self.regs_cache.set(None);
        self.int3_sigtrap_live = false;
    }

    /// pgdbg let go of the target (detach.rs).
    pub(super) fn mark_detached(&mut self) {
        Self::refused(self.state.on_detached());
        self.ran();
    }

    pub(super) fn mark_gone(&mut self) {
        self.gone_with(None);
    }

    /// A wait's status that is the process's end (it exited, or a signal
    /// killed it): marked gone, and the end as a stop; None for any other.
    pub(super) fn ended(&mut self, status: &WaitStatus) -> Option<Stop> {
        let end = match *status {
            WaitStatus::Exited(_, code) => Stop::Exited(code),
            WaitStatus::Signaled(_, sig, _) => Stop::Killed(sig),
            _ => return None,
        };
        self.mark_gone();
        Some(end)
    }

    /// Gone, with `end` (when given) its end found at a reap, for the wait
    /// loop to report (`state::TraceState::take_end`).
    pub(super) fn gone_with(&mut self, end: Option<Stop>) {
        self.ran();
        self.state.on_gone(end);
        self.inserted.clear();
        self.trap = None;
        if let Some(g) = &mut self.guardian {
            g.forget_all();
        }
    }

    /// Make sure the target is stopped (interrupting it if it runs).
    pub fn ensure_stopped(&mut self) -> Result<Option<Stop>> {
        if self.state.is_stopped() || self.state.is_gone() {
            return Ok(None);
        }
        // an interrupt still in flight (its stop lost the race against an
        // earlier one) is adopted: the kernel would merge a second one into
        // it, and its stop, swallowed as stale, would leave this wait alone
        self.interrupt_or_adopt()?;
        let s = self.wait(&NoHooks)?;
        Ok(Some(s))
    }
}
