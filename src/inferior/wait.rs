//! The wait loop: what a ptrace stop of the target means (one of our
//! int3s, a debug register, our interrupt, a signal to pass through or a
//! fault for the user), with `rip` rewound at once at an int3 hit.

use super::*;

impl Target {
    pub(super) fn waitpid_blocking(&mut self) -> Result<WaitStatus> {
        loop {
            match self.take_status(false, false) {
                Ok(s) => return Ok(s),
                Err(Errno::EINTR) => continue,
                Err(Errno::ECHILD) => {
                    self.mark_gone();
                    return Err(Gone::Lost(self.pid.as_raw()).into());
                }
                Err(e) => bail!("waitpid failed ({e})"),
            }
        }
    }

    /// Wait for the next stop worth reporting.  Pass-through signals are
    /// re-delivered at once; stale interrupt stops are swallowed.  When
    /// pgdbg itself gets Ctrl-C (`hooks.user_interrupt`) or SIGTERM/SIGHUP
    /// (`hooks.terminate`) while waiting, the target is interrupted.
    pub fn wait(&mut self, hooks: &dyn WaitHooks) -> Result<Stop> {
        self.wait_inner(hooks, false)
            .map(|s| s.expect("a blocking wait ends in a stop"))
    }

    /// The stop of a target that runs in the background, if one is
    /// waiting (never blocks): pass-through signals are re-delivered and
    /// the target runs on (None).  None as well while it is stopped.
    pub fn poll(&mut self) -> Result<Option<Stop>> {
        if !matches!(self.state, state::TraceState::Running) {
            return Ok(None);
        }
        self.wait_inner(&NoHooks, true)
    }

    fn wait_inner(&mut self, hooks: &dyn WaitHooks, nohang: bool) -> Result<Option<Stop>> {
        let mut interrupted_for_tool = false;
        let mut interrupted_for_user = false;
        // an interrupt stop's queued SIGTRAP taken (below), and how often
        let mut trap_taken = false;
        let mut takes = 0;
        loop {
            // Checked before every blocking wait, not only on EINTR: the
            // signal may have arrived while we were busy elsewhere.
            if !self.state.is_stopped() {
                if hooks.terminate() && !interrupted_for_tool {
                    interrupted_for_tool = true;
                    if !interrupted_for_user {
                        self.interrupt_or_adopt()?;
                    }
                } else if !interrupted_for_user && !interrupted_for_tool && hooks.user_interrupt() {
                    interrupted_for_user = true;
                    self.interrupt_or_adopt()?;
                }
            }
            hooks.waiting(true);
            // left to the kernel only where its next step is the resume
            // that delivers it, in the backend's own context: held back
            // (the guardian finishing a call) or in a call of pgdbg's,
            // taken first (and recorded) as before
            let own = !self.holding_signals && !self.in_call();
            // (after taking a queued trap its stop is due: waited for)
            let waited = self.take_status(nohang && !trap_taken, own);
            hooks.waiting(false);
            let status = match waited {
                Ok(WaitStatus::StillAlive) if nohang => return Ok(None),
                Ok(s) => s,
                Err(Errno::EINTR) => continue,
                Err(Errno::ECHILD) => {
                    self.mark_gone();
                    return Ok(Some(Stop::Exited(-1)));
                }
                Err(e) => bail!("waitpid failed ({e})"),
            };
            let terminating = interrupted_for_tool || hooks.terminate();
            if let Some(end) = self.ended(&status) {
                return Ok(Some(end));
            }
            match status {
                WaitStatus::PtraceEvent(_, sig, ev) if ev == libc::PTRACE_EVENT_STOP => {
                    self.mark_event_stop();
                    // someone's job-control stop, or its end, or the
                    // kernel's notice of a SIGCONT (outside.rs: the one
                    // rule for the signal an event stop reports)
                    if self.outside_event_stop(sig, interrupted_for_user || terminating)? {
                        continue;
                    }
                    if self.rehold_pending > 0
                        && self.interrupts_outstanding == 0
                        && self.stale_interrupts == 0
                    {
                        // the group stopped again after someone's SIGCONT
                        // (hold.rs): nothing to report
                        self.rehold_pending -= 1;
                        self.cont_waiting(None)?;
                        continue;
                    }
                    if self.stale_interrupts > 0 && !terminating && !interrupted_for_user {
                        // The stop of an interrupt that lost the race against
                        // another stop reported earlier: swallow it.
                        self.stale_interrupts -= 1;
                        self.cont_waiting(None)?;
                        continue;
                    }
                    if self.stale_interrupts > 0 {
                        self.stale_interrupts -= 1;
                    } else if self.interrupts_outstanding > 0 {
                        self.interrupts_outstanding -= 1;
                    }
                    // The interrupt may have landed just after one of our
                    // int3s executed, before its SIGTRAP was taken: rip is
                    // one past the breakpoint and the int3's SIGTRAP is
                    // queued for the thread (the kernel sends it there,
                    // unblocked).  That SIGTRAP is taken now (resumed, a
                    // synchronous signal the kernel queued is the next
                    // stop, before any instruction runs) and the SIGTRAP
                    // branch below decides by its siginfo: an int3's trap
                    // rewound once and reported as the breakpoint, a
                    // watchpoint's as the watchpoint.  Rewinding here,
                    // blind, ran an instruction twice when it was a
                    // watchpoint's trap after a one-byte instruction, or
                    // when two int3s of ours are adjacent (rewound here,
                    // then again when the queued SIGTRAP came).  (DR6
                    // cannot tell: its bits outlive the #DB that set
                    // them, and an int3 does not clear them.)  A few
                    // times at most (another interrupt may land before
                    // it); under someone else's job-control stop
                    // (resumed, the backend would stay in it) or after
                    // those, rewound, the SIGTRAP left for the step over
                    // that int3 to take first (`trap_queued_on_int3`: an
                    // emulated one-byte instruction would otherwise run
                    // twice).  A SIGTRAP not queued for
                    // the thread, or blocked, is not an int3's: rip one
                    // past the int3 is where the backend is (the
                    // instruction there ran), nothing is rewound.  After
                    // the resume, a stop that is not that int3's ends the
                    // wait as the interrupt it was (below): never resumed,
                    // the interrupt is not lost.
                    // (not on an int3 of ours whose SIGTRAP was left
                    // queued, rip put back onto it already: taken by the
                    // step over there, or the detach, never rewound by
                    // rip-1 onto an int3 before it)
                    if self.int3_behind_rip()?.is_some()
                        && self.sigtrap_pending()
                        && self.own_sigtrap_queued()
                        && !self.on_int3_with_trap_queued(false)?
                    {
                        if takes < 4 && !self.in_outside_group_stop() {
                            takes += 1;
                            trap_taken = true;
                            self.cont_waiting(None)?;
                            continue;
                        }
                        if let Some(bp) = self.int3_behind_rip()? {
                            self.rewind_to(bp)?;
                            self.flag_queued_trap(bp);
                        }
                    }
                    if terminating {
                        return self.reported(Stop::ToolTerminating).map(Some);
                    }
                    // Our interrupt (attach, Ctrl-C, an explicit stop) or a
                    // group-stop by someone's SIGSTOP.
                    return self.reported(Stop::Interrupted).map(Some);
                }
                WaitStatus::PtraceEvent(_, _, ev) if ev == libc::PTRACE_EVENT_EXIT => {
                    // its exit stop (exiting.rs): reported where asked,
                    // else let go at once and its end waited for (never
                    // into someone's stop; a poll too: its end, not None)
                    self.mark_exit_stop();
                    if hooks.exit_stop() && !terminating {
                        return self.reported(Stop::Exiting).map(Some);
                    }
                    return self.finish_exit().map(Some);
                }
                WaitStatus::PtraceEvent(_, _, _) => {
                    self.mark_stopped();
                    self.cont_waiting(None)?;
                }
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    self.mark_stopped();
                    // The SIGTRAP left queued of the int3 rip was put back
                    // onto (pending.rs `flag_queued_trap`): rip is on that
                    // int3, whose instruction has not run; rewound by
                    // rip-1 onto an int3 of ours before it, that one's
                    // instruction would run twice.  That int3's hit.
                    let rip = self.regs()?.rip;
                    if self.queued_trap_flag(true) == Some(rip) {
                        if !self.own_sigtrap_queued() {
                            self.trap_queued_on_int3 = None;
                        }
                        self.defuse_pending_trap()?;
                        if terminating {
                            return self.reported(Stop::ToolTerminating).map(Some);
                        }
                        if self.inserted.contains_key(&rip) {
                            return self.reported(Stop::Breakpoint { addr: rip }).map(Some);
                        }
                        if trap_taken {
                            return self.reported(Stop::Interrupted).map(Some);
                        }
                        self.cont_waiting(None)?;
                        continue;
                    }
                    // An int3 of ours just executed?  Its siginfo must say
                    // it was an int3: a watchpoint's trap, or a SIGTRAP
                    // someone sent with kill(2), just after one of our
                    // int3s over a one-byte instruction is not (that
                    // instruction ran; rewinding would run it twice).
                    let ours = match self.int3_behind_rip()? {
                        Some(a) => matches!(
                            self.siginfo_code().unwrap_or(SI_KERNEL),
                            SI_KERNEL | TRAP_BRKPT
                        )
                        .then_some(a),
                        None => None,
                    };
                    if let Some(addr) = ours {
                        self.int3_sigtrap_live = true;
                        self.rewind_to(addr)?;
                        if terminating {
                            return self.reported(Stop::ToolTerminating).map(Some);
                        }
                        return self.reported(Stop::Breakpoint { addr }).map(Some);
                    }
                    let code = self.siginfo_code().unwrap_or(SI_KERNEL);
                    // Anything else is a debug event: a watchpoint hit (its
                    // si_code is not always TRAP_HWBKPT), a late one after
                    // the watchpoint was cleared, or a stray trap.  A SIGTRAP
                    // is never handed to the backend: it would kill it.
                    let dr6 = if self.debugregs_dirty {
                        self.debugreg(crate::arch::debugregs::DR6).unwrap_or(0)
                    } else {
                        0
                    };
                    // a perf breakpoint's trap (a watched local,
                    // perfwatch.rs): its event's stop bit, when still open
                    let perf = super::perfwatch::sigtrap_perf_data(self.pid())
                        .and_then(|d| self.perf_watch_bit(d))
                        .unwrap_or(0);
                    if crate::arch::debugregs::fired(dr6) != 0 || perf != 0 {
                        if crate::arch::debugregs::fired(dr6) != 0 {
                            let _ = self.set_debugreg(crate::arch::debugregs::DR6, 0);
                        }
                        // rip just past one of our int3s (over a one-byte
                        // instruction, which ran and then hit the
                        // watchpoint): recorded as the place to resume,
                        // so that neither the guardian nor the SIGCONT
                        // handler rewinds onto the int3 if pgdbg dies at
                        // this stop (the instruction would run twice)
                        if self.int3_behind_rip()?.is_some() {
                            let r = self.regs()?;
                            if let Err(e) = self.note_resume_at(r.rip, r.rsp) {
                                // as stepping.rs: the handler no longer
                                // releases the backend by itself
                                self.disarm_self_release(e)?;
                            }
                        }
                        if terminating {
                            return self.reported(Stop::ToolTerminating).map(Some);
                        }
                        return self
                            .reported(Stop::HardwareBreak { dr6: dr6 | perf })
                            .map(Some);
                    }
                    log::debug(&format!(
                        "swallowed a SIGTRAP (si_code {code}, dr6 {dr6:#x})"
                    ));
                    if terminating {
                        return self.reported(Stop::ToolTerminating).map(Some);
                    }
                    if trap_taken {
                        // the interrupt's stop, its queued trap dropped
                        return self.reported(Stop::Interrupted).map(Some);
                    }
                    self.cont_waiting(None)?;
                }
                WaitStatus::Stopped(_, sig) => {
                    self.mark_stopped();
                    if signals::pass_through(sig) {
                        if trap_taken && !terminating {
                            // resumed to take an interrupt stop's queued
                            // trap, another signal came first (the
                            // kernel's order says it cannot): the
                            // interrupt's stop, the signal kept for the
                            // next resume, rip put back on an int3 whose
                            // trap is still queued
                            self.interrupt_ends_here()?;
                            self.defer(sig);
                            if let Some(end) = self.state.take_end() {
                                return Ok(Some(end));
                            }
                            return self.reported(Stop::Interrupted).map(Some);
                        }
                        if self.holding_signals && !terminating && !signals::never_held(sig) {
                            // held back (the guardian finishing a call):
                            // recorded by `defer` before this resume
                            // suppresses it, sent again when let go
                            self.defer(sig);
                            self.cont_raw(None)?;
                            continue;
                        }
                        if terminating {
                            // Keep the signal for delivery at detach (what
                            // it means for an outside stop is kept too).
                            self.defer(sig);
                            if let Some(end) = self.state.take_end() {
                                return Ok(Some(end));
                            }
                            return self.reported(Stop::ToolTerminating).map(Some);
                        }
                        self.outside_signal(sig);
                        self.pass_through(sig)?;
                        continue;
                    }
                    // the trap of a resume inside a detour's jump that a
                    // uprobe took over: the jump is undone, the backend
                    // goes on in its original code, the signal dropped
                    if self.fault_in_taken_over_jump(sig)? {
                        if terminating {
                            return self.reported(Stop::ToolTerminating).map(Some);
                        }
                        if trap_taken {
                            self.interrupt_ends_here()?;
                            return self.reported(Stop::Interrupted).map(Some);
                        }
                        self.cont_raw(None)?;
                        continue;
                    }
                    self.pending_fault = Some(sig);
                    return self.reported(Stop::Signal(sig)).map(Some);
                }
                _ => {
                    self.mark_stopped();
                    self.cont_waiting(None)?;
                }
            }
        }
    }

    /// An interrupt's wait ending at a stop that is not the int3 trap it
    /// resumed for: if that int3's SIGTRAP is still queued, rip goes back
    /// onto it (the instruction there has not run), and the step over it
    /// takes that SIGTRAP first (`trap_queued_on_int3`).
    fn interrupt_ends_here(&mut self) -> Result<()> {
        if self.own_sigtrap_queued()
            && let Some(bp) = self.int3_behind_rip()?
        {
            self.rewind_to(bp)?;
            self.flag_queued_trap(bp);
        }
        Ok(())
    }

    /// Resume delivering `sig`, seen at its signal-delivery stop.  Not
    /// taken from the kernel (`take_status`), the kernel keeps it as the
    /// stop's signal until `PTRACE_CONT`, and delivers it itself if pgdbg
    /// dies first.  Taken (during a call of pgdbg's: delivered by the
    /// kernel at pgdbg's death, its frame would hide the call's context
    /// from the SIGCONT handler, which could then not repair the call), it
    /// is recorded as held back until the resume hands it back (the
    /// handler's page, the guardian's table): a death of pgdbg in between
    /// leaves it to the guardian or the SIGCONT handler, which send it;
    /// dying after the resume, before the record is cleared
    /// (microseconds), it may come twice: PostgreSQL's handlers set flags
    /// and a latch.
    fn pass_through(&mut self, sig: Signal) -> Result<()> {
        let record = !self.state.is_unreaped() && !signals::never_held(sig);
        if record {
            self.delivering = 1u64 << (sig as i32 - 1);
            self.note_held_signals();
        }
        if crate::config::get().pause_at.is_some() {
            crate::config::pause_for_tests(&format!("signal-seen-{}", sig.as_str()));
        }
        if !record {
            return self.cont_waiting(Some(sig));
        }
        let res = self.cont_waiting(Some(sig));
        self.delivering = 0;
        self.note_held_signals();
        res
    }

    /// The target's next wait status.  With `leave_signal`, a signal's
    /// delivery stop is only seen (`WNOWAIT`), not taken: taking it
    /// (`wait_task_stopped`) clears the tracee's `exit_code`, the signal
    /// the kernel delivers when the stop ends, and a pgdbg killed before
    /// its resume would lose it (a `statement_timeout`'s SIGALRM that
    /// never comes) where nothing holds the backend to send it again.
    /// Left to the kernel, it is delivered when the tracer dies, and
    /// `PTRACE_CONT(sig)` ends that stop as usual (a resumed stop is never
    /// reported again); deferred after all (pgdbg terminating), it is
    /// taken once recorded (`defer`).  Only where the next step is that
    /// resume in the backend's own context: where the signal is held back
    /// (an injected system call, the guardian finishing a call), a kernel
    /// delivering it at pgdbg's death would build its handler's frame on
    /// registers that are not the backend's, so it is taken first, as is
    /// every other status.  SIGCONT (which `deliverable` may drop) and the
    /// stop signals are always taken first.
    fn take_status(&mut self, nohang: bool, leave_signal: bool) -> nix::Result<WaitStatus> {
        let s = self.take_status_uncounted(nohang, leave_signal)?;
        if matches!(s, WaitStatus::Stopped(_, Signal::SIGTRAP)) {
            self.sigtrap_stops += 1;
        }
        Ok(s)
    }

    fn take_status_uncounted(
        &mut self,
        nohang: bool,
        leave_signal: bool,
    ) -> nix::Result<WaitStatus> {
        // a stop only seen before is over (resumed, or taken)
        self.state.take_unreaped();
        let mut flags = libc::WEXITED | libc::WSTOPPED | libc::__WALL | libc::WNOWAIT;
        if nohang {
            flags |= libc::WNOHANG;
        }
        loop {
            // SAFETY: waitid(2) into a zeroed siginfo_t of ours.
            let si = unsafe {
                let mut si: libc::siginfo_t = std::mem::zeroed();
                Errno::result(libc::waitid(
                    libc::P_PID,
                    self.pid.as_raw() as libc::id_t,
                    &mut si,
                    flags,
                ))?;
                si
            };
            // SAFETY: the SIGCHLD fields of the siginfo waitid(2) filled in.
            let (si_pid, status) = unsafe { (si.si_pid(), si.si_status()) };
            if si_pid == 0 {
                return Ok(WaitStatus::StillAlive);
            }
            if leave_signal
                && si.si_code == libc::CLD_TRAPPED
                && status & !0x7f == 0
                && let Ok(sig) = Signal::try_from(status)
                && signals::pass_through(sig)
                && sig != Signal::SIGCONT
                && !outside::is_stop_signal(sig)
            {
                self.mark_stop_unreaped();
                return Ok(WaitStatus::Stopped(self.pid, sig));
            }
            match waitpid(self.pid, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG))? {
                // the stop seen ended before it could be taken (a SIGKILL
                // in between): wait again for what came of it
                WaitStatus::StillAlive if !nohang => continue,
                s => return Ok(s),
            }
        }
    }

    /// Take the stop `take_status` only saw (its signal is recorded or
    /// dropped now); nothing when there is none.
    pub(super) fn reap_seen_stop(&mut self) {
        if !self.state.take_unreaped() {
            return;
        }
        // killed since the stop was seen: reaped now, its parent told, and
        // its end kept for the wait loop to report
        let end = match waitpid(self.pid, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => Stop::Exited(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => Stop::Killed(sig),
            // its exit stop (exiting.rs), taken here: let go, its end
            // waited for
            Ok(WaitStatus::PtraceEvent(_, _, ev)) if ev == libc::PTRACE_EVENT_EXIT => {
                self.mark_exit_stop();
                match self.finish_exit() {
                    Ok(end) => end,
                    Err(_) => return,
                }
            }
            _ => return,
        };
        self.gone_with(Some(end));
    }

    /// Resume in the wait loop: while someone else's stop holds, a stop
    /// swallowed here leaves the backend in it (outside.rs).
    fn cont_waiting(&mut self, sig: Option<Signal>) -> Result<()> {
        if self.resume_into_outside_stop(sig)? {
            return Ok(());
        }
        self.cont_raw(sig)
    }

    /// Resume with PTRACE_CONT; never listens (pgdbg's inner loops: they
    /// wait for a trap of the backend's, which must run).
    pub(super) fn cont_raw(&mut self, sig: Option<Signal>) -> Result<()> {
        // (no resume record here: rip one past an int3 at a plain resume is
        // a trap not yet taken, e.g. an interrupt's stop; only the emulate
        // and step paths record a resume there on purpose)
        self.rehold_before(sig);
        let sig = self.deliverable(sig);
        ptrace::cont(self.pid, sig)
            .map_err(|e| anyhow!("cannot resume process {} ({e})", self.pid))?;
        self.set_running();
        self.note_held_signals();
        Ok(())
    }

    /// Bookkeeping when a stop is handed to the caller: interrupts still in
    /// flight become stale (their stop will come later and is swallowed).
    pub(super) fn reported(&mut self, stop: Stop) -> Result<Stop> {
        self.stale_interrupts += self.interrupts_outstanding;
        self.interrupts_outstanding = 0;
        Ok(stop)
    }
}
