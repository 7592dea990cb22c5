//! Signals held back for the target: deferred to the next resume,
//! taken away for a call and given back, recorded for the guardian and
//! the SIGCONT handler; a SIGTRAP the kernel still holds drained.

use super::*;

impl Target {
    /// Take the signals waiting for delivery (a call must not receive
    /// them); give them back with `restore_pending_signals`.
    pub fn take_pending_signals(&mut self) -> (Option<Signal>, VecDeque<Signal>) {
        // still held back while the caller keeps them: still recorded
        self.taken_signals = signal_mask(&self.deferred);
        (
            self.pending_fault.take(),
            std::mem::take(&mut self.deferred),
        )
    }

    pub fn restore_pending_signals(&mut self, p: (Option<Signal>, VecDeque<Signal>)) {
        self.pending_fault = p.0;
        let mut d = p.1;
        d.extend(self.deferred.drain(..));
        self.deferred = d;
        self.taken_signals = 0;
        self.note_held_signals();
    }

    /// Hold `sig` back for the next resume; recorded for the guardian
    /// first, which sends it again if pgdbg dies before delivering it.
    pub(super) fn defer(&mut self, sig: Signal) {
        self.outside_deferred(sig);
        // as the kernel does when they are sent: a SIGCONT discards the
        // stop signals not delivered yet, a stop signal the SIGCONTs;
        // delivered later in the other order, the backend would end
        // stopped although continued last (or the reverse)
        if sig == Signal::SIGCONT {
            self.deferred.retain(|s| !outside::is_stop_signal(*s));
        } else if outside::is_stop_signal(sig) {
            self.deferred.retain(|s| *s != Signal::SIGCONT);
        }
        self.deferred.push_back(sig);
        self.note_held_signals();
        // recorded: now the kernel's copy may go (wait.rs `take_status`)
        self.reap_seen_stop();
    }

    /// The signals held back now, with those a killed pgdbg held back
    /// (the guardian's record) until they are sent.
    pub(super) fn held_signal_mask(&self) -> u64 {
        let before = self.signal_word.as_ref().map_or(0, |w| w.before);
        signal_mask(&self.deferred) | self.taken_signals | self.delivering | before
    }

    pub(super) fn note_held_signals(&mut self) {
        let mask = signal_mask(&self.deferred) | self.taken_signals | self.delivering;
        // the handler's page first (selfrelease.rs: never released
        // without them); if that fails, the pipe no longer releases the
        // backend at all (a signal already held cannot be refused)
        if let Err(e) = self.note_release_signals(self.held_signal_mask())
            && let Err(e) = self.disarm_self_release(e)
        {
            log::debug(&format!("{e:#}"));
        }
        if let Some(g) = &mut self.guardian {
            g.note_signals(mask);
        }
        if let Some(w) = &self.signal_word {
            w.note(mask);
        }
    }

    /// Hold every signal back from now on (`on`), each recorded when it
    /// is deferred, or let them go again: the next resume or the detach
    /// delivers them (the first with it, the others sent with kill(2)).
    pub(crate) fn hold_signals_back(&mut self, on: bool) {
        self.holding_signals = on;
    }

    /// The signals held back now, named (for a message).
    pub(crate) fn held_signals(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for s in &self.deferred {
            if !v.iter().any(|n| n == s.as_str()) {
                v.push(s.as_str().to_string());
            }
        }
        v
    }

    /// Discard a fault signal instead of delivering it.
    pub fn discard_pending_fault(&mut self) {
        self.pending_fault = None;
    }

    /// Whether the kernel holds a SIGTRAP for the target that it has not
    /// delivered yet (/proc/PID/status SigPnd/ShdPnd).
    pub(super) fn sigtrap_pending(&self) -> bool {
        self.signal_pending(Signal::SIGTRAP)
    }

    /// Whether a SIGTRAP the kernel holds for the target's own thread
    /// (SigPnd, not the process's shared set), not blocked: what an int3
    /// leaves queued, which a resume turns into the next stop before any
    /// instruction runs.  (A SIGTRAP someone sent with kill(2) is shared;
    /// a blocked one would let the backend run on.)
    pub(super) fn own_sigtrap_queued(&self) -> bool {
        let Ok(st) = std::fs::read_to_string(format!("/proc/{}/status", self.pid)) else {
            return false;
        };
        let bit = 1u64 << (Signal::SIGTRAP as i32 - 1);
        let mask = |key: &str| {
            st.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                .unwrap_or(0)
        };
        mask("SigPnd:") & bit != 0 && mask("SigBlk:") & bit == 0
    }

    /// At a SIGTRAP stop: the int3 of ours that trapped, one before rip,
    /// when the stop's siginfo says an int3 did (a watchpoint's or a single
    /// step's trap just after one of our int3s over a one-byte instruction
    /// is not one: that instruction ran, rewinding would run it twice).
    pub(super) fn int3_trapped_behind_rip(&self) -> Result<Option<u64>> {
        Ok(self.int3_behind_rip()?.filter(|_| {
            matches!(
                self.siginfo_code().unwrap_or(signals::TRAP_BRKPT),
                signals::SI_KERNEL | signals::TRAP_BRKPT
            )
        }))
    }

    /// Whether the kernel holds `sig` for the target, not delivered yet.
    pub(super) fn signal_pending(&self, sig: Signal) -> bool {
        let Ok(st) = std::fs::read_to_string(format!("/proc/{}/status", self.pid)) else {
            return false;
        };
        let bit = 1u64 << (sig as i32 - 1);
        st.lines().any(|l| {
            (l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
                && u64::from_str_radix(l.split_whitespace().nth(1).unwrap_or("0"), 16).unwrap_or(0)
                    & bit
                    != 0
        })
    }

    /// Consume a SIGTRAP the kernel still holds for the target (a
    /// watchpoint that fired as we stopped it): let it be reported to us
    /// and drop it, so it is not delivered after we detach.
    pub fn drain_sigtrap(&mut self) -> Result<()> {
        self.drain_pending(8, Self::sigtrap_pending, false)
    }

    /// At a stop on an int3 of ours that rip was put back onto while its
    /// SIGTRAP stayed queued for the thread (`trap_queued_on_int3`, wait.rs):
    /// that SIGTRAP taken and dropped (`take_queued_int3_trap`), before the
    /// step over the int3 or a probe's reads and calls there.  Ok(true):
    /// it is still queued (stop after stop came first); Err: the backend
    /// ended.
    pub(crate) fn take_queued_trap_here(&mut self) -> Result<std::result::Result<bool, Stop>> {
        // (a stale flag: its trap was delivered since)
        let fresh = self.queued_trap_flag(false).is_some();
        let Some(addr) = self.trap_queued_on_int3.take().filter(|_| fresh) else {
            return Ok(Ok(false));
        };
        if !self.state.is_stopped()
            || self.regs()?.rip != addr
            || !self.inserted.contains_key(&addr)
            || !self.own_sigtrap_queued()
        {
            return Ok(Ok(false));
        }
        if let Some(end) = self.take_queued_int3_trap(addr)? {
            return Ok(Err(end));
        }
        let queued = self.state.is_stopped() && self.own_sigtrap_queued();
        if queued {
            // (for the step over, which then steps without emulating)
            self.flag_queued_trap(addr);
        }
        Ok(Ok(queued))
    }

    /// rip was put back onto our int3 at `addr` with that int3's SIGTRAP
    /// still queued (wait.rs): the step over, a drain and the detach take
    /// it there (`take_queued_trap_here`).  Recorded for the guardian and
    /// the SIGCONT handler too, as a resume point (hold.rs): rip on that
    /// int3 is not one past an int3 of ours just before it, which they
    /// would rewind onto, running its instruction twice, should pgdbg die
    /// now.
    pub(super) fn flag_queued_trap(&mut self, addr: u64) {
        self.trap_queued_on_int3 = Some(addr);
        self.trap_queued_since = self.sigtrap_stops;
        self.record_point_on_int3();
    }

    /// rip on an int3 of ours, the instruction before it run (its
    /// SIGTRAP queued, or taken without running anything): where an int3
    /// of ours is just before it, rip is recorded as a resume point for
    /// the guardian and the SIGCONT handler (`note_resume_at`), which
    /// would otherwise take it for that int3's trap and rewind onto it,
    /// running its instruction twice, should pgdbg die now.  Forgotten
    /// once the step over leaves it (stepping.rs `left_flagged_int3`).
    fn record_point_on_int3(&mut self) {
        let Ok(r) = self.regs() else {
            return;
        };
        match self.note_resume_at(r.rip, r.rsp) {
            Ok(()) => {
                let behind = crate::arch::abi::int3_address(r.rip);
                if self.inserted.contains_key(&behind) {
                    self.resume_point_on_int3 = Some(r.rip);
                }
            }
            Err(e) => log::debug(&format!("{e:#}")),
        }
    }

    /// The int3 whose SIGTRAP was left queued (`trap_queued_on_int3`),
    /// while the flag holds: no SIGTRAP stop seen since it was set (every
    /// resume that runs an instruction delivers that trap first, a SIGTRAP
    /// stop), or, `at_its_trap`, the one stop seen since is the one now,
    /// that trap's delivery.  A later SIGTRAP at the same place is another
    /// trap (the int3 before it, hit again), never taken for that one.
    pub(super) fn queued_trap_flag(&self, at_its_trap: bool) -> Option<u64> {
        let since = self.sigtrap_stops.wrapping_sub(self.trap_queued_since);
        self.trap_queued_on_int3
            .filter(|_| since == u64::from(at_its_trap))
    }

    /// Whether rip is on the int3 of ours that wait.rs put it back onto
    /// with that int3's SIGTRAP still queued, the flag holding
    /// (`queued_trap_flag`).
    pub(super) fn on_int3_with_trap_queued(&self, at_its_trap: bool) -> Result<bool> {
        let Some(addr) = self.queued_trap_flag(at_its_trap) else {
            return Ok(false);
        };
        Ok(
            self.state.is_stopped()
                && self.inserted.contains_key(&addr)
                && self.regs()?.rip == addr,
        )
    }

    /// `take_queued_trap_here` at `addr` (rip there).  Left queued, a step
    /// over that emulates a one-byte instruction there (`push %rbx`) would
    /// resume one past the int3 with it pending: it would be the next
    /// stop, taken for a new hit of that int3 and rewound, and the
    /// instruction would run twice.  Resumed, the kernel delivers the
    /// queued synchronous signal before any instruction runs (only
    /// job-control stops come first).  Resumed with rip one past the int3,
    /// not on it: a death of pgdbg while the trap is taken (delivered to
    /// the backend's SIGTRAP handler, or seen by the guardian) then looks
    /// like that int3's trap, and is rewound onto it, as it must be (the
    /// instruction there has not run); rip on the int3 would be taken for
    /// a trap of whatever precedes it.  The stop that comes is rewound
    /// onto the int3 and dropped.  An interrupt's stop or another signal
    /// may come first (held for the next resume, as `drain_pending`), a
    /// few times at most; rip is back on the int3 in the end whatever
    /// came.  Some: the backend ended.
    fn take_queued_int3_trap(&mut self, addr: u64) -> Result<Option<Stop>> {
        let mut r = self.regs()?;
        r.rip = addr + 1;
        self.set_regs(&r)?;
        let mut taken = false;
        for _ in 0..8 {
            if !self.state.is_stopped() || !self.own_sigtrap_queued() {
                break;
            }
            self.cont_raw(None)?;
            match self.waitpid_blocking()? {
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    self.mark_stopped();
                    // (the queued trap: nothing ran, rip one past the int3)
                    taken = true;
                    break;
                }
                other => {
                    if let Some(end) = self.not_the_trap(other)? {
                        return Ok(Some(end));
                    }
                }
            }
        }
        if self.state.is_stopped() {
            if self.regs()?.rip != addr + 1 {
                log::debug(&format!(
                    "after the queued SIGTRAP at {addr:#x}: rip {:#x}",
                    self.regs()?.rip
                ));
            }
            // (re-labelled by the rewind only at that trap's own stop: an
            // interrupt's or another signal's stop keeps its siginfo)
            self.int3_sigtrap_live = taken;
            self.rewind_to(addr)?;
            // (the rewind forgot any resume point)
            self.record_point_on_int3();
        }
        Ok(None)
    }

    /// `drain_sigtrap` and `drain_sigill` (jumpover/target.rs): while
    /// `pending` says the kernel still holds the signal, at most `tries`
    /// times, resume the target and take the stop that comes: a SIGTRAP
    /// of one of our int3s rewound, another SIGTRAP held to be delivered
    /// (`keep_sigtrap`) or dropped, a jump's SIGILL dropped, any other
    /// signal held.
    pub(super) fn drain_pending(
        &mut self,
        tries: usize,
        pending: fn(&Target) -> bool,
        keep_sigtrap: bool,
    ) -> Result<()> {
        for _ in 0..tries {
            if !self.state.is_stopped() || !pending(self) {
                return Ok(());
            }
            self.cont_raw(None)?;
            match self.waitpid_blocking()? {
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    self.mark_stopped();
                    if self.on_int3_with_trap_queued(true)? {
                        // the SIGTRAP of the int3 rip was put back onto
                        // (wait.rs): rip is where it must be, on that
                        // int3 (the instruction there has not run);
                        // rewound by rip-1 it would go onto an int3 of
                        // ours just before, and run that instruction twice
                        // (kept while still queued: this one was
                        // someone's SIGTRAP)
                        if !self.own_sigtrap_queued() {
                            self.trap_queued_on_int3 = None;
                        }
                        // delivered after a death of pgdbg at this stop,
                        // the handler would do the same (traphandler.rs)
                        self.defuse_pending_trap()?;
                        continue;
                    }
                    // rewind if it was one of our int3s after all
                    if let Some(bp) = self.int3_trapped_behind_rip()? {
                        self.int3_sigtrap_live = true;
                        self.rewind_to(bp)?;
                    } else if keep_sigtrap {
                        self.defer(Signal::SIGTRAP);
                    }
                }
                other => {
                    if self.not_the_trap(other)?.is_some() {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// In a loop that resumes the target to take a signal the kernel
    /// holds (`drain_pending`, `take_queued_int3_trap`), a stop that is
    /// not a SIGTRAP's: the process's end (Some; at its exit stop let go,
    /// its end waited for, exiting.rs), an interrupt's or group stop
    /// noted, a jump's SIGILL (`jumpover.rs`) dropped, any other signal
    /// held for the next resume.
    fn not_the_trap(&mut self, status: WaitStatus) -> Result<Option<Stop>> {
        if let Some(end) = self.ended(&status) {
            return Ok(Some(end));
        }
        match status {
            WaitStatus::Stopped(_, sig) => {
                self.mark_stopped();
                if !self.fault_in_taken_over_jump(sig)? {
                    self.defer(sig);
                }
            }
            WaitStatus::PtraceEvent(_, _, ev) if ev == libc::PTRACE_EVENT_EXIT => {
                self.mark_exit_stop();
                return self.finish_exit().map(Some);
            }
            WaitStatus::PtraceEvent(_, sig, _) => {
                self.mark_event_stop();
                self.interrupt_stop_seen(sig);
            }
            _ => self.mark_stopped(),
        }
        Ok(None)
    }
}

/// Bit N-1 for each signal N.
fn signal_mask(sigs: &VecDeque<Signal>) -> u64 {
    sigs.iter().fold(0, |m, s| m | 1u64 << (*s as i32 - 1))
}
