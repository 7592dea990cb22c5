//! How a command ends: `Outcome`, the text it shows and how the session
//! goes on (`Flow`); and why running the backend ended (`ProbeEnd`), the
//! reason the probe loop, `continue` and a stop's report give, which a
//! command turns into its `Outcome`.

/// Why running the backend ended: `run_probes` (any of these), or
/// `continue` and the report of a stop (`Stopped`, `TargetGone`,
/// `Terminating`).  The raw event the wait loop saw is
/// `inferior::Stop`; how the session goes on after a command is `Flow`
/// (`From<ProbeEnd>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeEnd {
    /// The probe has seen enough (`--count`).
    Done,
    /// `--for` ran out.
    Deadline,
    /// Ctrl-C, a user breakpoint or a signal: the target is stopped.
    Stopped,
    /// The backend exited or was killed.
    TargetGone,
    /// pgdbg itself was told to end (SIGTERM, SIGHUP, a failed write).
    Terminating,
}

/// How running the backend ended (`run_probes`, `continue`, a stop's
/// report): why, and the report of the stop it ended in (empty when there
/// is nothing to show).  A command turns it into its `Outcome`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Ran {
    pub end: ProbeEnd,
    pub text: String,
}

impl Ran {
    pub fn new(end: ProbeEnd, text: impl Into<String>) -> Ran {
        Ran {
            end,
            text: text.into(),
        }
    }

    /// As a command's end: the stop's report, and how the session goes on
    /// after such an end.
    pub fn outcome(self) -> Outcome {
        Outcome::new(self.text, Flow::from(self.end))
    }
}

/// How a session goes on after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
    TargetGone,
    Terminate,
}

impl From<ProbeEnd> for Flow {
    fn from(end: ProbeEnd) -> Flow {
        match end {
            ProbeEnd::Done | ProbeEnd::Deadline | ProbeEnd::Stopped => Flow::Continue,
            ProbeEnd::TargetGone => Flow::TargetGone,
            ProbeEnd::Terminating => Flow::Terminate,
        }
    }
}

/// How a command ended: the text it shows (may be empty; a leading
/// newline is the front end's to strip) and how the session goes on.
/// Every command, a stop's report and the prompt's background stops end
/// in one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Outcome {
    pub text: String,
    pub flow: Flow,
}

impl Outcome {
    pub fn new(text: impl Into<String>, flow: Flow) -> Outcome {
        Outcome {
            text: text.into(),
            flow,
        }
    }

    /// The session goes on, showing `text`.
    pub fn shows(text: impl Into<String>) -> Outcome {
        Outcome::new(text, Flow::Continue)
    }

    /// The session goes on, showing nothing.
    pub fn nothing() -> Outcome {
        Outcome::shows(String::new())
    }

    /// The session ends (`detach`, `quit`), showing `text`.
    pub fn quit(text: impl Into<String>) -> Outcome {
        Outcome::new(text, Flow::Quit)
    }

    /// The backend is gone, showing `text` (how it ended).
    pub fn gone(text: impl Into<String>) -> Outcome {
        Outcome::new(text, Flow::TargetGone)
    }

    /// pgdbg itself is told to end (SIGTERM, SIGHUP, a failed write).
    pub fn terminate() -> Outcome {
        Outcome::new(String::new(), Flow::Terminate)
    }

    /// Whether the session goes on after it.
    pub fn goes_on(&self) -> bool {
        self.flow == Flow::Continue
    }

    /// This text, then `later`'s as it is, and `later`'s flow (what came
    /// after this one decides how the session goes on).
    pub fn followed_by(self, later: Outcome) -> Outcome {
        Outcome {
            text: self.text + &later.text,
            flow: later.flow,
        }
    }

    /// This text, then `later`'s on the next line (one newline between
    /// them, whether or not `later`'s starts with one), and `later`'s flow.
    pub fn then_line(self, later: Outcome) -> Outcome {
        let t = later.text.strip_prefix('\n').unwrap_or(&later.text);
        Outcome {
            text: format!("{}\n{t}", self.text),
            flow: later.flow,
        }
    }

    /// What a probe command shows and how the session goes on, from how
    /// its `run_probes` ended (`end`, and the stop's report `text`): the
    /// report is left out when an interrupt (Ctrl-C) ended the probe
    /// (`interrupted`: the last stop was one), and after
    /// `--for`/`--count`.
    pub fn of_probe(end: ProbeEnd, interrupted: bool, summary: String, text: String) -> Outcome {
        match end {
            ProbeEnd::Done | ProbeEnd::Deadline => Outcome::shows(summary),
            ProbeEnd::Stopped if interrupted => Outcome::shows(summary),
            ProbeEnd::Stopped => Outcome::shows(summary + &text),
            ProbeEnd::TargetGone => Outcome::gone(summary + &text),
            ProbeEnd::Terminating => Outcome::new(summary, Flow::Terminate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_from_probe_end() {
        for (end, flow) in [
            (ProbeEnd::Done, Flow::Continue),
            (ProbeEnd::Deadline, Flow::Continue),
            (ProbeEnd::Stopped, Flow::Continue),
            (ProbeEnd::TargetGone, Flow::TargetGone),
            (ProbeEnd::Terminating, Flow::Terminate),
        ] {
            assert_eq!(Flow::from(end), flow);
            // a probe command's outcome goes on as the end says, whether
            // an interrupt ended it or not
            for interrupted in [false, true] {
                let o = Outcome::of_probe(end, interrupted, "s".into(), "t".into());
                assert_eq!(o.flow, flow, "{end:?}");
            }
        }
    }

    #[test]
    fn a_probe_commands_text() {
        let o = |end, interrupted| {
            Outcome::of_probe(end, interrupted, "sum".into(), "\nstop".into()).text
        };
        assert_eq!(o(ProbeEnd::Done, false), "sum");
        assert_eq!(o(ProbeEnd::Deadline, false), "sum");
        assert_eq!(o(ProbeEnd::Stopped, false), "sum\nstop");
        assert_eq!(o(ProbeEnd::Stopped, true), "sum");
        assert_eq!(o(ProbeEnd::TargetGone, false), "sum\nstop");
        assert_eq!(o(ProbeEnd::TargetGone, true), "sum\nstop");
        assert_eq!(o(ProbeEnd::Terminating, false), "sum");
    }

    #[test]
    fn a_run_as_a_commands_end() {
        assert_eq!(
            Ran::new(ProbeEnd::Stopped, "\nstop").outcome(),
            Outcome::shows("\nstop")
        );
        assert_eq!(
            Ran::new(ProbeEnd::TargetGone, "exited").outcome(),
            Outcome::gone("exited")
        );
        assert_eq!(
            Ran::new(ProbeEnd::Terminating, "").outcome(),
            Outcome::terminate()
        );
        assert_eq!(
            Ran::new(ProbeEnd::Deadline, "").outcome(),
            Outcome::nothing()
        );
    }

    #[test]
    fn constructors() {
        assert_eq!(Outcome::shows("a"), Outcome::new("a", Flow::Continue));
        assert_eq!(Outcome::nothing(), Outcome::new("", Flow::Continue));
        assert_eq!(Outcome::quit("q").flow, Flow::Quit);
        assert_eq!(Outcome::gone("g").flow, Flow::TargetGone);
        assert_eq!(Outcome::terminate(), Outcome::new("", Flow::Terminate));
        assert!(Outcome::shows("a").goes_on());
        assert!(!Outcome::quit("a").goes_on());
        assert!(!Outcome::gone("").goes_on());
        assert!(!Outcome::terminate().goes_on());
    }

    #[test]
    fn texts_combine() {
        // the later outcome's flow wins
        let o = Outcome::shows("stop").followed_by(Outcome::gone("\nexited"));
        assert_eq!(o, Outcome::gone("stop\nexited"));
        assert_eq!(
            Outcome::shows("a").followed_by(Outcome::nothing()),
            Outcome::shows("a")
        );
        // one newline between, the later one's leading newline dropped
        assert_eq!(
            Outcome::shows("\nstop").then_line(Outcome::quit("\nbt")),
            Outcome::quit("\nstop\nbt")
        );
        assert_eq!(
            Outcome::shows("stop").then_line(Outcome::shows("bt")),
            Outcome::shows("stop\nbt")
        );
        assert_eq!(
            Outcome::shows("stop").then_line(Outcome::nothing()),
            Outcome::shows("stop\n")
        );
    }
}
