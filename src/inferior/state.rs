//! The traced process's ptrace state, and every change of it.
//!
//! `Target` holds one [`TraceState`]; the wait loops, the resumes, the
//! detach and the end of the process change it only through the methods
//! here.  Each one names the event (a stop seen, a resume, the detach, the
//! end) and refuses one that cannot happen in the state it finds with a
//! [`BadTransition`], leaving the state as it was: the ptrace request
//! that went with it was made (or failed) already, so the caller does not
//! stop on it (resume.rs logs it); nothing here makes a request.
//!
//! What is not this state: the interrupts in flight (counters in
//! `Target`), pgdbg's group stop (hold.rs), someone else's job-control
//! stop and pgdbg listening in it (outside.rs: `Running` here), and the
//! time spent stopped (resume.rs).

use super::Stop;

/// Where the traced process is, as far as ptrace goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TraceState {
    /// Seized and let run (or listening in someone else's group stop,
    /// outside.rs): its next stop comes by a wait.
    Running,
    /// In a ptrace stop pgdbg has taken (or only seen: `Delivery`'s
    /// `unreaped`).
    Stopped(StopKind),
    /// Let go by pgdbg's detach: alive, no longer traced.
    Detached,
    /// Exited, killed or lost to `waitpid`: nothing to resume or restore.
    /// `end`: the end found when a seen stop was taken (a SIGKILL came
    /// after it was seen, wait.rs `reap_seen_stop`), not yet reported.
    Gone { end: Option<Stop> },
}

/// Which ptrace stop the process is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopKind {
    /// A signal-delivery stop, a trap, a system call stop: a resume can
    /// carry a signal.  `unreaped`: a signal's delivery stop only seen
    /// (`WNOWAIT`), not taken from the kernel, which still holds the
    /// signal (wait.rs `take_status`).
    Delivery { unreaped: bool },
    /// An event stop (PTRACE_EVENT_STOP: an interrupt, a group stop):
    /// the kernel ignores a signal given with the resume.
    Event,
    /// The exit stop (PTRACE_EVENT_EXIT, exiting.rs): an event stop too;
    /// only the exit goes on from it.
    Exit,
}

/// What happened to the process, as told to the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// A stop was taken (`on_stop_seen`).
    StopSeen,
    /// A signal's delivery stop was seen and left to the kernel
    /// (`on_stop_left_unreaped`).
    StopLeftUnreaped,
    /// An event stop was taken (`on_event_stop`).
    EventStop,
    /// The exit stop was taken (`on_exit_stop`).
    ExitStop,
    /// The process was let run (`on_resumed`).
    Resumed,
    /// pgdbg detached (`on_detached`).
    Detached,
}

/// A change of state that cannot happen from the state it was asked in;
/// refused, the state left as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ptrace state: {event:?} refused while {from:?}")]
pub(crate) struct BadTransition {
    pub from: TraceState,
    pub event: Change,
}

impl TraceState {
    fn refuse(&self, event: Change) -> Result<(), BadTransition> {
        Err(BadTransition {
            from: self.clone(),
            event,
        })
    }

    /// A stop was taken (a wait reported one): stopped, as a stop a
    /// resume can give a signal with.  Already stopped (a second status
    /// of the same stop, e.g. the end of one only seen), the kind is kept.
    pub(crate) fn on_stop_seen(&mut self) -> Result<(), BadTransition> {
        match self {
            TraceState::Running => {
                *self = TraceState::Stopped(StopKind::Delivery { unreaped: false });
                Ok(())
            }
            TraceState::Stopped(_) => Ok(()),
            TraceState::Detached | TraceState::Gone { .. } => self.refuse(Change::StopSeen),
        }
    }

    /// A signal's delivery stop was seen, not taken: the kernel holds
    /// the signal until the resume (or delivers it if pgdbg dies first).
    pub(crate) fn on_stop_left_unreaped(&mut self) -> Result<(), BadTransition> {
        match self {
            TraceState::Running | TraceState::Stopped(StopKind::Delivery { .. }) => {
                *self = TraceState::Stopped(StopKind::Delivery { unreaped: true });
                Ok(())
            }
            _ => self.refuse(Change::StopLeftUnreaped),
        }
    }

    /// The stop only seen is taken now (or forgotten before the next
    /// wait): true when there was one.
    pub(crate) fn take_unreaped(&mut self) -> bool {
        match self {
            TraceState::Stopped(StopKind::Delivery { unreaped }) => std::mem::take(unreaped),
            _ => false,
        }
    }

    /// An event stop was taken (an interrupt's, a group stop).  From a
    /// delivery stop only seen (`unreaped`), that mark goes: every caller
    /// takes or reaps the status first (wait.rs `take_status`,
    /// `take_unreaped`), which clears it (the old flags would have kept
    /// both; review of 314de40, not reachable).
    pub(crate) fn on_event_stop(&mut self) -> Result<(), BadTransition> {
        match self {
            TraceState::Running | TraceState::Stopped(_) => {
                *self = TraceState::Stopped(StopKind::Event);
                Ok(())
            }
            _ => self.refuse(Change::EventStop),
        }
    }

    /// The exit stop was taken.
    pub(crate) fn on_exit_stop(&mut self) -> Result<(), BadTransition> {
        match self {
            TraceState::Running | TraceState::Stopped(_) => {
                *self = TraceState::Stopped(StopKind::Exit);
                Ok(())
            }
            _ => self.refuse(Change::ExitStop),
        }
    }

    /// The process was let run (PTRACE_CONT, a single-step, a system
    /// call run, PTRACE_LISTEN).  Only from a stop.
    pub(crate) fn on_resumed(&mut self) -> Result<(), BadTransition> {
        match self {
            TraceState::Stopped(_) => {
                *self = TraceState::Running;
                Ok(())
            }
            _ => self.refuse(Change::Resumed),
        }
    }

    /// pgdbg let go of it (PTRACE_DETACH, or a detach with nothing to
    /// restore).  Not of a process that is gone.
    pub(crate) fn on_detached(&mut self) -> Result<(), BadTransition> {
        match self {
            TraceState::Running | TraceState::Stopped(_) | TraceState::Detached => {
                *self = TraceState::Detached;
                Ok(())
            }
            TraceState::Gone { .. } => self.refuse(Change::Detached),
        }
    }

    /// The process is gone (exited, killed, lost to `waitpid`): possible
    /// in every state.  `end`, when given, is its end found at a reap, to
    /// be reported (`take_end`); an end kept already stays when none is
    /// given.
    pub(crate) fn on_gone(&mut self, end: Option<Stop>) {
        let kept = match self {
            TraceState::Gone { end } => end.take(),
            _ => None,
        };
        *self = TraceState::Gone { end: end.or(kept) };
    }

    /// The end found at a reap, once.
    pub(crate) fn take_end(&mut self) -> Option<Stop> {
        match self {
            TraceState::Gone { end } => end.take(),
            _ => None,
        }
    }

    pub(crate) fn is_stopped(&self) -> bool {
        matches!(self, TraceState::Stopped(_))
    }

    pub(crate) fn is_gone(&self) -> bool {
        matches!(self, TraceState::Gone { .. })
    }

    /// Traced by pgdbg (running or stopped).
    pub(crate) fn is_attached(&self) -> bool {
        matches!(self, TraceState::Running | TraceState::Stopped(_))
    }

    /// In an event stop (the exit stop included): no signal can be given
    /// with the resume.
    pub(crate) fn in_event_stop(&self) -> bool {
        matches!(self, TraceState::Stopped(StopKind::Event | StopKind::Exit))
    }

    pub(crate) fn in_exit_stop(&self) -> bool {
        matches!(self, TraceState::Stopped(StopKind::Exit))
    }

    /// In a signal's delivery stop only seen, not taken.
    pub(crate) fn is_unreaped(&self) -> bool {
        matches!(
            self,
            TraceState::Stopped(StopKind::Delivery { unreaped: true })
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;

    const DELIVERY: TraceState = TraceState::Stopped(StopKind::Delivery { unreaped: false });
    const UNREAPED: TraceState = TraceState::Stopped(StopKind::Delivery { unreaped: true });
    const EVENT: TraceState = TraceState::Stopped(StopKind::Event);
    const EXIT: TraceState = TraceState::Stopped(StopKind::Exit);
    const GONE: TraceState = TraceState::Gone { end: None };

    fn all() -> Vec<TraceState> {
        vec![
            TraceState::Running,
            DELIVERY,
            UNREAPED,
            EVENT,
            EXIT,
            TraceState::Detached,
            GONE,
            TraceState::Gone {
                end: Some(Stop::Killed(Signal::SIGKILL)),
            },
        ]
    }

    /// `event` applied to every state: the state after it, or the refusal
    /// (with the state left as it was).
    fn table(
        f: fn(&mut TraceState) -> Result<(), BadTransition>,
        event: Change,
        expect: fn(&TraceState) -> Option<TraceState>,
    ) {
        for from in all() {
            let mut s = from.clone();
            let r = f(&mut s);
            match expect(&from) {
                Some(to) => {
                    assert_eq!(r, Ok(()), "{event:?} from {from:?}");
                    assert_eq!(s, to, "{event:?} from {from:?}");
                }
                None => {
                    assert_eq!(
                        r,
                        Err(BadTransition {
                            from: from.clone(),
                            event
                        }),
                        "{event:?} from {from:?}"
                    );
                    assert_eq!(s, from, "a refused {event:?} changed nothing");
                }
            }
        }
    }

    #[test]
    fn a_stop_seen_stops_a_running_process_and_keeps_a_stops_kind() {
        table(
            TraceState::on_stop_seen,
            Change::StopSeen,
            |from| match from {
                TraceState::Running => Some(DELIVERY),
                TraceState::Stopped(_) => Some(from.clone()),
                _ => None,
            },
        );
    }

    #[test]
    fn a_stop_left_unreaped_is_a_delivery_stop_only() {
        table(
            TraceState::on_stop_left_unreaped,
            Change::StopLeftUnreaped,
            |from| match from {
                TraceState::Running | TraceState::Stopped(StopKind::Delivery { .. }) => {
                    Some(UNREAPED)
                }
                _ => None,
            },
        );
    }

    #[test]
    fn event_and_exit_stops_come_to_a_traced_process_only() {
        table(TraceState::on_event_stop, Change::EventStop, |from| {
            from.is_attached().then_some(EVENT)
        });
        table(TraceState::on_exit_stop, Change::ExitStop, |from| {
            from.is_attached().then_some(EXIT)
        });
    }

    #[test]
    fn only_a_stopped_process_is_resumed() {
        table(TraceState::on_resumed, Change::Resumed, |from| {
            from.is_stopped().then_some(TraceState::Running)
        });
    }

    #[test]
    fn a_process_gone_is_never_detached() {
        table(TraceState::on_detached, Change::Detached, |from| {
            (!from.is_gone()).then_some(TraceState::Detached)
        });
    }

    #[test]
    fn gone_from_anywhere_and_its_end_reported_once() {
        for from in all() {
            let mut s = from.clone();
            s.on_gone(None);
            assert!(s.is_gone() && !s.is_attached() && !s.is_stopped());
            // an end kept before stays
            let kept = match from {
                TraceState::Gone { end } => end,
                _ => None,
            };
            assert_eq!(s.take_end(), kept);
            assert_eq!(s.take_end(), None);
        }
        let mut s = UNREAPED;
        s.on_gone(Some(Stop::Exited(3)));
        s.on_gone(None);
        assert_eq!(s.take_end(), Some(Stop::Exited(3)));
        // a later end found replaces one not reported
        s.on_gone(Some(Stop::Exited(4)));
        s.on_gone(Some(Stop::Killed(Signal::SIGKILL)));
        assert_eq!(s.take_end(), Some(Stop::Killed(Signal::SIGKILL)));
        let mut running = TraceState::Running;
        assert_eq!(running.take_end(), None);
    }

    #[test]
    fn a_stop_only_seen_is_taken_once_and_never_outlives_its_stop() {
        let mut s = TraceState::Running;
        assert!(!s.take_unreaped());
        s.on_stop_left_unreaped().unwrap();
        assert!(s.is_unreaped() && s.is_stopped() && !s.in_event_stop());
        // the wait loop's own mark of the same stop keeps it unreaped
        s.on_stop_seen().unwrap();
        assert!(s.is_unreaped());
        assert!(s.take_unreaped());
        assert_eq!(s, DELIVERY);
        assert!(!s.take_unreaped());
        // a resume ends it
        s.on_stop_left_unreaped().unwrap();
        s.on_resumed().unwrap();
        assert!(!s.is_unreaped() && !s.take_unreaped());
        // an event stop or the exit stop replaces it
        for next in [TraceState::on_event_stop, TraceState::on_exit_stop] {
            let mut s = UNREAPED;
            next(&mut s).unwrap();
            assert!(!s.is_unreaped() && s.in_event_stop());
        }
        for mut s in [EVENT, EXIT, TraceState::Detached, GONE] {
            assert!(!s.take_unreaped());
        }
    }

    #[test]
    fn what_each_state_answers() {
        for s in all() {
            let attached = matches!(s, TraceState::Running | TraceState::Stopped(_));
            assert_eq!(s.is_attached(), attached, "{s:?}");
            assert_eq!(s.is_stopped(), matches!(s, TraceState::Stopped(_)), "{s:?}");
            assert_eq!(s.is_gone(), matches!(s, TraceState::Gone { .. }), "{s:?}");
            assert_eq!(s.in_event_stop(), s == EVENT || s == EXIT, "{s:?}");
            assert_eq!(s.in_exit_stop(), s == EXIT, "{s:?}");
            assert_eq!(s.is_unreaped(), s == UNREAPED, "{s:?}");
        }
    }

    #[test]
    fn a_life_seize_stop_run_exit_stop_gone() {
        let mut s = TraceState::Running;
        s.on_event_stop().unwrap(); // the attach's interrupt
        s.on_resumed().unwrap();
        s.on_stop_seen().unwrap(); // a breakpoint
        s.on_resumed().unwrap();
        s.on_exit_stop().unwrap();
        assert!(s.in_exit_stop());
        s.on_resumed().unwrap(); // let exit
        s.on_gone(None);
        assert!(s.on_resumed().is_err());
        assert!(s.on_stop_seen().is_err());
        assert!(s.on_detached().is_err());
        assert!(s.is_gone());
        let mut d = TraceState::Running;
        d.on_detached().unwrap();
        assert!(d.on_resumed().is_err() && d.on_stop_seen().is_err());
        // a wait after the detach finds no such child
        d.on_gone(None);
        assert!(d.is_gone());
    }
}
