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
//! pgdbg's own SIGSTOPs (hold.rs) are told apart by their sender.  A
//! resume from an event stop while the outsider's stop holds listens
//! again instead of running the backend, and a detach then sends no
//! SIGCONT (hold.rs: `release_hold`): the backend stays stopped until
//! its SIGCONT, as it would without pgdbg.

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
}

fn is_stop_signal(sig: Signal) -> bool {
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
        if sig == Signal::SIGCONT {
            self.end_outside_stop();
            return;
        }
        if !is_stop_signal(sig) {
            return;
        }
        // the sender, when a process sent it (si_code SI_USER, SI_TKILL,
        // SI_QUEUE: zero or below); none for the kernel's own
        let sender = ptrace::getsiginfo(self.pid)
            .ok()
            .filter(|si| si.si_code <= 0)
            // SAFETY: si_pid of a siginfo of a signal a process sent.
            .map(|si| unsafe { si.si_pid() });
        if sender == Some(std::process::id() as i32) {
            // pgdbg's own (the group stop of hold.rs)
            return;
        }
        self.outside.pending = Some((sig, sender));
    }

    /// At a PTRACE_EVENT_STOP: true when it was the outsider's (the group
    /// stop of their signal, or the SIGCONT that ended it) and is dealt
    /// with here: the caller waits on.  False: the usual handling (one
    /// of pgdbg's interrupts is in it, or it is none of this).
    pub(super) fn outside_event_stop(&mut self) -> Result<bool> {
        let was_listening = std::mem::take(&mut self.outside.listening);
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
            if self.interrupts_outstanding > 0 {
                return Ok(false);
            }
            self.listen()?;
            return Ok(true);
        }
        if was_listening
            && self.outside.current.is_some()
            && self.interrupts_outstanding == 0
            && self.stale_interrupts == 0
        {
            // woken without an interrupt of ours: a SIGCONT (its own
            // signal-delivery stop follows once the target runs)
            self.end_outside_stop();
            self.cont_raw(None)?;
            return Ok(true);
        }
        Ok(false)
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
    pub(super) fn resume_into_outside_stop(&mut self, sig: Option<Signal>) -> Result<bool> {
        if sig.is_some() || !self.event_stop || self.outside.current.is_none() {
            return Ok(false);
        }
        self.listen()?;
        Ok(true)
    }

    fn end_outside_stop(&mut self) {
        if let Some(mut o) = self.outside.current.take() {
            o.lasted = Some(o.since.elapsed());
            self.outside.ended.push(o);
        }
    }

    /// Whether someone else's stop holds the target now.
    pub(super) fn stopped_from_outside(&self) -> bool {
        self.outside.current.is_some()
    }

    /// The outside stops that ended since the last call, and the one in
    /// effect (its `lasted` None).
    pub fn take_outside_stops(&mut self) -> Vec<OutsideStop> {
        let mut v = std::mem::take(&mut self.outside.ended);
        v.extend(self.outside.current.clone());
        v
    }
}
