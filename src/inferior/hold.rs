//! Holding the target in a job-control group stop while pgdbg traces it,
//! so that it never runs without a tracer when pgdbg dies at a moment its
//! death would leave it unsafe.
//!
//! Held only while such a moment can come (`hold_needed`): an int3 of
//! pgdbg's is written (a trap pgdbg has not rewound yet would resume one
//! byte past it), debug registers are armed, a call, an injected system
//! call without its signal frame or a changed data word is in flight (a
//! system call injected with its frame restores the backend by itself,
//! sigframe.rs: it needs no hold).  Outside those, a tracer's
//! death leaves the backend running as it runs untraced (what pgdbg left,
//! an in-process recorder or the SIGTRAP handler, works without pgdbg, and
//! the guardian or `pgdbg rescue` removes it), so pgdbg and its guardian
//! killed together leave nothing stopped.  Entered before the change (the
//! calls, `hold_for_change`) or at the next resume (int3s, debug
//! registers), left at a resume once nothing needs it: pgdbg sends SIGCONT
//! (which ends the group stop when it is sent) and the guardian is told
//! after.
//!
//! To enter, pgdbg sends a SIGSTOP and lets it be delivered: the group stop
//! completes (reported as PTRACE_EVENT_STOP) and the process's group stays
//! stopped from then on.  pgdbg's PTRACE_CONT runs it all the same.  When the tracer dies, the kernel
//! (`__ptrace_unlink`) re-arms the group stop for a tracee whose group is
//! stopped: the target stops (state T) at its next return to user mode, at
//! a breakpoint stop pgdbg had not handled yet, inside an inferior call,
//! wherever it was (tests/fixtures/group_stop.c), and waits there for the
//! guardian.  The window that remains is the few microseconds between the
//! tracer's end and the kernel's kick reaching a target running in user
//! mode: pgdbg's SIGTRAP handler in the target (traphandler.rs) covers an
//! int3 or a single-step trap met then.
//!
//! pgdbg and its guardian both dead: the backend ends the stop itself
//! (selfrelease.rs).
//!
//! Every detach sends SIGCONT after PTRACE_DETACH (the guardian does when
//! pgdbg ends without its clean flag, even with nothing else to restore).
//! Someone else's SIGCONT while pgdbg traces ends the group stop; pgdbg
//! sees it (a traced process's SIGCONT is reported) and stops the group
//! again before delivering it.  PostgreSQL installs SIGCHLD with
//! SA_NOCLDSTOP and reaps with WNOHANG only: the postmaster never hears of
//! the stop.  Not done for a process with more than one thread (its other
//! threads would stay stopped) nor for one found stopped (never continued).

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Not held: the process runs as it ran before.
    No,
    /// pgdbg stopped the group: SIGCONT after detaching.
    Ours,
    /// The process was stopped when pgdbg attached: left stopped.
    Found,
}

/// The state letter of /proc/PID/stat.
pub(super) fn proc_state(pid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 1..].trim_start().chars().next()
}

fn threads(pid: i32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(1)
}

impl Target {
    /// Put the stopped target into a group stop (see above); a no-op when
    /// it is held already, found stopped, or has other threads.
    pub(super) fn enter_group_stop(&mut self) -> Result<()> {
        if self.hold != Hold::No
            || self.hold_refused
            || self.state.is_gone()
            || !self.state.is_stopped()
        {
            return Ok(());
        }
        if crate::config::get().no_group_stop {
            self.hold_refused = true;
            return Ok(());
        }
        if threads(self.pid()) > 1 {
            log::debug("not held in a group stop: the process has several threads");
            self.hold_refused = true;
            return Ok(());
        }
        // recorded first: the guardian sends the SIGCONT if pgdbg dies
        if let Some(g) = &mut self.guardian {
            g.note_hold(true);
        }
        self.hold = Hold::Ours;
        // (only a group stop the kernel reported: an outsider's stop signal
        // that is pending, or held back by pgdbg, has not stopped the group,
        // and a pgdbg death then would re-arm nothing)
        if self.in_outside_group_stop() {
            // Someone else's stop holds the group stopped already: that
            // is the hold (the kernel re-arms it if pgdbg dies), taken
            // without a SIGSTOP of pgdbg's.  Sending one would hang here:
            // resumed, the backend stays in their group stop and the
            // SIGSTOP is never reported.  Leaving the hold or detaching
            // sends no SIGCONT while their stop holds; a SIGCONT of
            // theirs re-holds as usual (`rehold_before`).  The guardian,
            // if pgdbg dies, does send one: a backend never left stopped
            // comes first.
            log::debug("held: the group is in someone else's stop already");
            return Ok(());
        }
        self.send_sigstop()?;
        self.cont_raw(None)?;
        let mut rounds = 0;
        loop {
            rounds += 1;
            if rounds > 1000 {
                bail!("the process does not take the SIGSTOP pgdbg sent it");
            }
            match self.waitpid_blocking()? {
                WaitStatus::Exited(_, _) | WaitStatus::Signaled(_, _, _) => {
                    self.mark_gone();
                    return Ok(());
                }
                WaitStatus::Stopped(_, Signal::SIGSTOP) => {
                    // delivered: the group stop begins
                    self.mark_stopped();
                    ptrace::cont(self.pid, Some(Signal::SIGSTOP))
                        .map_err(|e| anyhow!("cannot resume process {} ({e})", self.pid))?;
                    self.set_running();
                }
                WaitStatus::PtraceEvent(_, sig, ev)
                    if ev == libc::PTRACE_EVENT_STOP && sig != Signal::SIGTRAP =>
                {
                    // the group stop, reported: done, the target stopped
                    self.mark_event_stop();
                    return Ok(());
                }
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    // a trap queued before: never delivered (rewound if
                    // its siginfo says one of our int3s trapped)
                    self.mark_stopped();
                    if let Some(bp) = self.int3_trapped_behind_rip()? {
                        self.rewind_to(bp)?;
                    }
                    self.cont_raw(None)?;
                }
                WaitStatus::Stopped(_, sig) => {
                    self.mark_stopped();
                    // the SIGILL of a jump a uprobe took over, queued as
                    // pgdbg stopped the backend (`jumpover.rs`): dropped,
                    // never held for later delivery (it would kill it)
                    if !self.fault_in_taken_over_jump(sig)? {
                        self.defer(sig);
                    }
                    if sig == Signal::SIGCONT {
                        // someone's SIGCONT, sent after pgdbg's SIGSTOP
                        // (which discarded any SIGCONT pending before):
                        // it cancelled that SIGSTOP or the group stop it
                        // began, and none would come; stop again
                        self.send_sigstop()?;
                    }
                    self.cont_raw(None)?;
                }
                WaitStatus::PtraceEvent(_, sig, _) => {
                    self.mark_stopped();
                    self.interrupt_stop_seen(sig);
                    self.cont_raw(None)?;
                }
                _ => {
                    self.mark_stopped();
                    self.cont_raw(None)?;
                }
            }
        }
    }

    /// Whether pgdbg's death now, with the target running untraced, could
    /// harm it (see the module comment).
    pub(super) fn hold_needed(&self) -> bool {
        !self.inserted.is_empty()
            || self.debugregs_dirty
            || self.guardian.as_ref().is_some_and(|g| g.in_flight_held())
    }

    /// At a resume: enter the group stop when it is needed, leave it when
    /// it is not (the guardian must exist: it is who ends the stop).
    pub(super) fn update_hold(&mut self) {
        if self.guardian.is_none() || !self.state.is_stopped() {
            return;
        }
        match (self.hold, self.hold_needed()) {
            (Hold::No, true) if !self.hold_refused => {
                if let Err(e) = self.enter_group_stop() {
                    self.hold_refused = true;
                    log::debug(&format!("no group stop: {e:#}"));
                }
            }
            (Hold::Ours, false) => self.leave_group_stop(),
            _ => {}
        }
    }

    /// Before pgdbg changes the registers of a stopped target or a data
    /// word in it (a call, an injected system call): the group stop, so
    /// that its death at any point after leaves the target stopped for the
    /// guardian (or `pgdbg rescue`).  Called before the registers to save
    /// are read: entering lets the stop's pending signals be seen.
    pub fn hold_for_change(&mut self) -> Result<()> {
        if self.guardian()?.is_some()
            && self.hold == Hold::No
            && !self.hold_refused
            && let Err(e) = self.enter_group_stop()
        {
            self.hold_refused = true;
            log::debug(&format!("no group stop: {e:#}"));
        }
        Ok(())
    }

    /// End the group stop while tracing on (nothing needs it now): the
    /// SIGCONT ends it when it is sent, its delivery (reported to pgdbg
    /// later) passes through and changes nothing.  The guardian is told
    /// after: a death between the two makes it send one more SIGCONT.
    pub(super) fn leave_group_stop(&mut self) {
        let pid = self.pid();
        // Not someone else's stop: a SIGCONT now would end it too (or
        // discard their SIGSTOP not delivered yet: one pending while no
        // re-hold SIGSTOP of pgdbg's is, is theirs).  The group stays
        // stopped as they asked; only pgdbg's claim on it goes.
        if self.stopped_from_outside()
            || (self.rehold_pending == 0 && self.signal_pending(Signal::SIGSTOP))
        {
            log::debug("hold left without SIGCONT: the group is in someone else's stop");
            self.hold = Hold::No;
            if let Some(g) = &mut self.guardian {
                g.note_hold(false);
            }
            return;
        }
        // SAFETY: tgkill to the target's main thread.
        let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, pid, libc::SIGCONT) };
        if r < 0 {
            log::debug(&format!(
                "group stop not ended: {}",
                std::io::Error::last_os_error()
            ));
            return;
        }
        self.hold = Hold::No;
        // a SIGSTOP of pgdbg's own re-hold not delivered yet must not stop
        // the group again now (the kernel drops a pending one at SIGCONT;
        // one already taken and deferred is pgdbg's to drop)
        self.rehold_pending = 0;
        let deferred = std::mem::take(&mut self.deferred);
        self.deferred = deferred
            .into_iter()
            .filter(|s| *s != Signal::SIGSTOP || self.held_for_outsider(*s))
            .collect();
        self.note_held_signals();
        if let Some(g) = &mut self.guardian {
            g.note_hold(false);
        }
    }

    fn send_sigstop(&mut self) -> Result<()> {
        let pid = self.pid();
        // SAFETY: tgkill to the target's main thread.
        let r = unsafe { libc::syscall(libc::SYS_tgkill, pid, pid, libc::SIGSTOP) };
        if r < 0 {
            bail!(
                "cannot stop process {pid} ({})",
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }

    /// A SIGCONT is about to be delivered (someone else sent it; it ended
    /// the group stop): stop the group again first.  The SIGSTOP's own
    /// stops are swallowed by the wait loop (`rehold_pending`).
    pub(super) fn rehold_before(&mut self, sig: Option<Signal>) {
        if sig == Some(Signal::SIGCONT) && self.hold == Hold::Ours && !self.state.is_gone() {
            if let Err(e) = self.send_sigstop() {
                log::debug(&format!("group stop not re-established: {e:#}"));
                return;
            }
            self.rehold_pending += 1;
        }
    }

    /// After PTRACE_DETACH: let the group run again if pgdbg stopped it,
    /// then tell the guardian it need not.
    pub(super) fn release_hold(&mut self) {
        if self.hold == Hold::Ours {
            // not when someone else's stop holds it (outside.rs): theirs
            // to end
            if !self.stopped_from_outside() {
                // SAFETY: kill(2) of the target.
                unsafe { libc::kill(self.pid(), libc::SIGCONT) };
            }
            self.hold = Hold::No;
            if let Some(g) = &mut self.guardian {
                g.note_hold(false);
            }
        }
    }

    /// Record, for the guardian, that the target resumes at `rip` with
    /// `rsp` just past one of our int3s on purpose (an emulated one-byte
    /// instruction, a step over it): a stop found there after pgdbg's death
    /// with the same registers is not a trap to rewind.
    pub(super) fn note_resume_point(&mut self) -> Result<()> {
        if self.inserted.is_empty() || self.guardian.is_none() {
            return Ok(());
        }
        let Ok(r) = self.regs() else { return Ok(()) };
        self.note_resume_at(r.rip, r.rsp)
    }

    /// The same for registers about to be written (before the write: if
    /// pgdbg dies just after it, the guardian must know).
    ///
    /// One-byte instructions that leave rsp alone and give the same result
    /// when run twice (nop, cwtl/cltq, cltd/cqto, lahf, sahf, clc, stc,
    /// cld, std) are not recorded but the record cleared: the guardian's
    /// rewind over them is harmless, while a record could match a later,
    /// real trap at the same address with the same rsp (a loop) and keep
    /// the guardian from rewinding it.
    ///
    /// An error: the SIGCONT handler's copy is not written (the caller
    /// does not resume there).
    pub(super) fn note_resume_at(&mut self, rip: u64, rsp: u64) -> Result<()> {
        let Some(&orig) = self.inserted.get(&crate::arch::abi::int3_address(rip)) else {
            return Ok(());
        };
        self.note_resume_over(orig, rip, rsp)
    }

    /// No resume point recorded any more (the registers moved on from the
    /// one recorded: pending.rs `flag_queued_trap`, stepping.rs).
    pub(super) fn forget_resume_point(&mut self) -> Result<()> {
        if let Some(g) = &mut self.guardian {
            g.forget_resume();
        }
        self.note_release_resume(0, 0)
    }

    /// `note_resume_at` for an int3 over the byte `orig`, one before `rip`
    /// (also one about to be written there).
    pub(super) fn note_resume_over(&mut self, orig: u8, rip: u64, rsp: u64) -> Result<()> {
        let harmless = matches!(
            orig,
            0x90 | 0x98 | 0x99 | 0x9e | 0x9f | 0xf8 | 0xf9 | 0xfc | 0xfd
        );
        if let Some(g) = &mut self.guardian {
            if harmless {
                g.forget_resume();
            } else {
                g.note_resume(rip, rsp);
            }
        }
        // the same for the SIGCONT handler (selfrelease.rs)
        if harmless {
            self.note_release_resume(0, 0)
        } else {
            self.note_release_resume(rip, rsp)
        }
    }
}
