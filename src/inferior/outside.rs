//! A job-control stop from outside: someone's `kill -STOP` (or SIGTSTP,
//! SIGTTIN, SIGTTOU) of the traced backend, and the SIGCONT that ends it.
//!
//! A traced process's stop signal is reported to pgdbg first (a
//! signal-delivery stop); delivered, it starts a group stop that is
//! reported as PTRACE_EVENT_STOP, which looks like pgdbg's own interrupt.
//! Taken for one, it ended a command early in silence.  Instead the
//! outsider's stop is kept as they asked: pgdbg lets the backend sit in
//! the group stop with PTRACE_LISTEN (it stays stopped; the kernel
//! reports the SIGCONT, or answers pgdbg's own PTRACE_INTERRUPT, with a
//! new event stop) and goes on waiting, so a command's timer runs on.
//! The time it sat there is recorded for the command to report, and is
//! not counted as a stop of pgdbg's (`stopped_time`).
//!
//! pgdbg's own SIGSTOPs (hold.rs) are told apart by their sender, or, for
//! a re-hold's, by being expected: across PID namespaces the sender reads
//! 0.  A resume from an event stop while the outsider's stop holds listens
//! again instead of running the backend, and a detach or the end of
//! pgdbg's hold then sends no SIGCONT (hold.rs): the backend stays stopped
//! until its SIGCONT, as it would without pgdbg.
//!
//! Only the waits for the backend's own work listen: pgdbg's inner loops
//! (entering the hold, single-steps, an injected system call) and an
//! inferior call run the backend with PTRACE_CONT, which runs a seized
//! tracee in a group stop; the group stays stopped, and the next wait of
//! a command listens again.  Listening there would leave pgdbg waiting
//! for a trap of a backend that does not run until the outsider's SIGCONT.
//!
//! Whether the group is stopped is the kernel's word at each event stop:
//! PTRACE_EVENT_STOP reports the stop signal while a group stop is in
//! effect, SIGTRAP when none is (a SIGCONT ended it, perhaps merged with
//! an interrupt of pgdbg's into one stop).

use super::*;

/// Someone else's job-control stop of the target.
#[derive(Debug, Clone)]
pub struct OutsideStop {
    pub sig: Signal,
    /// The sender (None: the kernel, e.g. a terminal's Ctrl-Z).
    pub by: Option<i32>,
    pub since: std::time::Instant,
    /// How long it lasted, once a SIGCONT ended it.
    pub lasted: Option<std::time::Duration>,
}

/// What the wait loop tracks of outside stops.
#[derive(Default)]
pub(super) struct Outside {
    /// A stop signal of someone's, delivered: its group stop comes next.
    pending: Option<(Signal, Option<i32>)>,
    /// The stop in effect.
    current: Option<OutsideStop>,
    /// The target sits in the group stop under PTRACE_LISTEN.
    listening: bool,
    /// Ended stops not yet reported.
    ended: Vec<OutsideStop>,
    /// Someone's stop signals that a loop of pgdbg's held back (deferred),
    /// with their sender: still theirs when pgdbg delivers them later or
    /// sends them again itself.
    held: Vec<(Signal, Option<i32>)>,
    /// An inferior call runs: never listen (see above).
    in_call: bool,
    /// An interrupt of pgdbg's sent only to bring the target back into
    /// the outsider's group stop (from a stop that is not an event stop,
    /// where PTRACE_LISTEN cannot be used): its stop is listened in.
    relisten: bool,
}

pub(super) fn is_stop_signal(sig: Signal) -> bool {
    matches!(
        sig,
        Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU
    )
}

impl Target {
    /// At the signal-delivery stop of `sig` (about to be passed through):
    /// a stop signal someone else sent is remembered; a SIGCONT ends the
    /// outsider's stop.
    pub(super) fn outside_signal(&mut self, sig: Signal) {
        if let Some(by) = self.outsiders_signal(sig) {
            self.outside.pending = Some((sig, by));
        }
    }

    /// At the signal-delivery stop of `sig`: Some(sender) when it is a stop
    /// signal of someone else's; a SIGCONT ends the outsider's stop (its
    /// sending did, in the kernel).
    fn outsiders_signal(&mut self, sig: Signal) -> Option<Option<i32>> {
        if sig == Signal::SIGCONT {
            self.end_outside_stop();
            self.outside.pending = None;
            self.outside.held.clear();
            return None;
        }
        if !is_stop_signal(sig) {
            return None;
        }
        if sig == Signal::SIGSTOP && self.rehold_pending > 0 {
            // pgdbg's own re-hold (hold.rs), expected: told by that, not
            // by its sender, which reads 0 when pgdbg runs in another PID
            // namespace than the backend (it would be taken for someone
            // else's stop and ridden out instead of swallowed)
            return None;
        }
        // the sender, when a process sent it (si_code SI_USER, SI_TKILL,
        // SI_QUEUE: zero or below); none for the kernel's own
        let sender = ptrace::getsiginfo(self.pid)
            .ok()
            .filter(|si| si.si_code <= 0)
            // SAFETY: si_pid of a siginfo of a signal a process sent.
            .map(|si| unsafe { si.si_pid() });
        if sender == Some(std::process::id() as i32) {
            // pgdbg's own: the group stop of hold.rs, or someone's that a
            // loop of pgdbg's held back and sent again (still theirs)
            let i = self.outside.held.iter().position(|(s, _)| *s == sig)?;
            return Some(self.outside.held.remove(i).1);
        }
        Some(sender)
    }

    /// A loop of pgdbg's holds `sig` back (`defer`, at its signal-delivery
    /// stop): what it means for an outside stop is kept.  A SIGCONT ends
    /// the outsider's stop now, deferred or not (the kernel ended the
    /// group stop when it was sent): else pgdbg would later take the
    /// backend for stopped by someone and leave it stopped at detach.
    pub(super) fn outside_deferred(&mut self, sig: Signal) {
        if let Some(by) = self.outsiders_signal(sig) {
            self.outside.held.push((sig, by));
        }
    }

    /// `sig` is given with a resume: a stop signal of someone's that was
    /// held back starts their group stop now (no signal-delivery stop of
    /// it will be seen).
    pub(super) fn outside_delivered(&mut self, sig: Signal) {
        if let Some(i) = self.outside.held.iter().position(|(s, _)| *s == sig) {
            let (_, by) = self.outside.held.remove(i);
            self.outside.pending = Some((sig, by));
        }
    }

    /// Whether a deferred `sig` is someone else's (kept by `leave_group_stop`,
    /// which drops pgdbg's own re-hold SIGSTOP).
    pub(super) fn held_for_outsider(&self, sig: Signal) -> bool {
        self.outside.held.iter().any(|(s, _)| *s == sig)
    }

    /// An inferior call starts (true) or ends: never listen while it runs.
    pub(super) fn set_in_call(&mut self, running: bool) {
        self.outside.in_call = running;
    }

    /// Whether an inferior call of pgdbg's runs (its registers written,
    /// not yet put back).
    pub(super) fn in_call(&self) -> bool {
        self.outside.in_call
    }

    /// At a PTRACE_EVENT_STOP reporting `sig`: true when it was the
    /// outsider's (the group stop of their signal, or the SIGCONT that
    /// ended it) or the kernel's notice of a SIGCONT, and is dealt with
    /// here: the caller waits on.  False: the usual handling (one of
    /// pgdbg's interrupts is in it, or it is none of this).  `asked`:
    /// pgdbg was asked to stop while waiting (Ctrl-C, SIGTERM): the stop
    /// is reported.
    pub(super) fn outside_event_stop(&mut self, sig: Signal, asked: bool) -> Result<bool> {
        let mut was_listening = std::mem::take(&mut self.outside.listening);
        if std::mem::take(&mut self.outside.relisten) && self.interrupts_outstanding > 0 {
            // the stop of the interrupt `resume_into_outside_stop` sent:
            // not one to report, whatever it says (a SIGCONT may have
            // ended their stop meanwhile: then SIGTRAP, handled below);
            // as if woken while listening
            self.interrupts_outstanding -= 1;
            was_listening = true;
        }
        let ours = asked || self.interrupts_outstanding > 0 || self.stale_interrupts > 0;
        if sig == Signal::SIGTRAP {
            // The one rule for SIGTRAP: no group stop is in effect.  An
            // outsider's stop (and one about to start) is over: a SIGCONT
            // ended it, perhaps in the same stop as an interrupt of ours,
            // whose SIGCONT would otherwise go unseen and the backend be
            // left stopped at detach (`release_hold` sends no SIGCONT
            // while someone's stop holds).
            self.end_outside_stop();
            self.outside.pending = None;
            if !ours {
                // No interrupt of ours in it: the kernel's notice that a
                // SIGCONT ended the group stop (a seized tracee gets one
                // per SIGCONT, pgdbg's own when it leaves its hold
                // included), not a stop anyone asked for.  The SIGCONT
                // itself comes next.
                self.cont_raw(None)?;
                return Ok(true);
            }
            return Ok(false);
        }
        // a stop signal: the group is stopped
        if let Some((sig, by)) = self.outside.pending.take() {
            // a stale interrupt of ours would have stopped it here too:
            // the kernel merged it into this one stop
            if self.stale_interrupts > 0 {
                self.stale_interrupts -= 1;
            }
            self.outside.current = Some(OutsideStop {
                sig,
                by,
                since: std::time::Instant::now(),
                lasted: None,
            });
            log::debug(&format!("stopped from outside by {sig:?} (sender {by:?})"));
            if asked || self.interrupts_outstanding > 0 {
                return Ok(false);
            }
            self.wait_on_in_outside_stop()?;
            return Ok(true);
        }
        if was_listening && self.outside.current.is_some() && !ours {
            // woken while the group is still stopped, not by us (a SIGCONT
            // followed by a new stop before the kernel reported it): the
            // outsider's stop goes on
            self.wait_on_in_outside_stop()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// In the outsider's group stop: listen, or, while an inferior call
    /// runs, run the call on (see the module comment).
    fn wait_on_in_outside_stop(&mut self) -> Result<()> {
        if self.outside.in_call {
            return self.cont_raw(None);
        }
        self.listen()
    }

    /// Leave the target in the outsider's group stop and wait for the
    /// kernel's next word on it.
    fn listen(&mut self) -> Result<()> {
        // SAFETY: PTRACE_LISTEN on our seized tracee, in an event stop.
        let r = unsafe { libc::ptrace(libc::PTRACE_LISTEN, self.pid.as_raw(), 0, 0) };
        if r < 0 {
            bail!(
                "cannot leave process {} stopped (PTRACE_LISTEN: {})",
                self.pid,
                std::io::Error::last_os_error()
            );
        }
        // not a stop of pgdbg's from now on: not counted in stopped_time,
        // and an interrupt of ours (Ctrl-C, a deadline) can end the wait
        self.set_running();
        self.outside.listening = true;
        Ok(())
    }

    /// A resume without a signal from an event stop while the outsider's
    /// stop holds: listen instead of running the target.  True when done.
    /// Never while an inferior call runs; pgdbg's inner loops resume with
    /// `cont_raw`, which never listens (see the module comment).
    pub(super) fn resume_into_outside_stop(&mut self, sig: Option<Signal>) -> Result<bool> {
        if sig.is_some() || self.outside.current.is_none() || self.outside.in_call {
            return Ok(false);
        }
        if !self.state.in_event_stop() {
            // e.g. the trap that ended an inferior call: PTRACE_LISTEN
            // works only in an event stop, and PTRACE_CONT alone would run
            // the backend on in their stop (a seized tracee runs even in a
            // group stop).  An interrupt first: the resumed target stops
            // again at once, before any code of its own, in an event stop
            // that reports their stop signal, and is listened in there
            // (`outside_event_stop`).
            if self.interrupts_outstanding > 0 || self.stale_interrupts > 0 {
                // an interrupt of pgdbg's is in flight already: its stop
                // is reported as usual
                return Ok(false);
            }
            self.interrupt()?;
            self.outside.relisten = true;
            ptrace::cont(self.pid, None)
                .map_err(|e| anyhow!("cannot resume process {} ({e})", self.pid))?;
            // not counted as a stop of pgdbg's (see `listen`)
            self.set_running();
            return Ok(true);
        }
        self.listen()?;
        Ok(true)
    }

    /// The kernel's notice of a SIGCONT (an event stop reporting SIGTRAP)
    /// seen by one of pgdbg's inner loops: no group stop is in effect.
    pub(super) fn outside_continued(&mut self) {
        self.end_outside_stop();
        self.outside.pending = None;
    }

    fn end_outside_stop(&mut self) {
        if let Some(mut o) = self.outside.current.take() {
            o.lasted = Some(o.since.elapsed());
            self.outside.ended.push(o);
        }
    }

    /// Whether someone else's stop holds the target now (or one of their
    /// stop signals was delivered, or held back by pgdbg, and their group
    /// stop comes next).
    /// The group is in someone else's stop now, as the kernel reported it
    /// (not only their stop signal pending or held back).
    pub(super) fn in_outside_group_stop(&self) -> bool {
        self.outside.current.is_some()
    }

    /// An interrupt of ours being adopted by a wait that wants a stop
    /// (`interrupt_or_adopt`): if it is the one sent to listen again in
    /// someone else's stop after a call, its stop is now that wait's, to
    /// be reported, not listened through.
    pub(super) fn adopt_relisten(&mut self) {
        self.outside.relisten = false;
    }

    pub(super) fn stopped_from_outside(&self) -> bool {
        self.outside.current.is_some()
            || self.outside.pending.is_some()
            || !self.outside.held.is_empty()
    }

    /// The outside stops that ended since the last call, and the one in
    /// effect (its `lasted` None).
    pub fn take_outside_stops(&mut self) -> Vec<OutsideStop> {
        let mut v = std::mem::take(&mut self.outside.ended);
        v.extend(self.outside.current.clone());
        v
    }
}
