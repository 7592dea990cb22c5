//! The prompt's non-stop mode.  After `attach` the backend runs while the
//! prompt waits: a backend that holds a row lock, a relation lock or a
//! buffer pin never freezes the sessions that need them while a person
//! reads.  Each command takes the stop it needs (PTRACE_INTERRUPT, the
//! work, resume) or none (memory reads with process_vm_readv); a
//! breakpoint hit, Ctrl-C or `interrupt` stops the backend, as in gdb,
//! until `continue`.  Scripts do not use this mode: they run from one stop.
use super::*;
use crate::command::Needs;
use std::time::Duration;

/// A stop a command took that is longer than this is reported.
const LONG_STOP: Duration = Duration::from_millis(100);

impl Session {
    /// Before a command that may place breakpoints or write code: the
    /// uprobes a finished command closed are out of the backend (the
    /// kernel removes them in the background, `perf::keeper::settle`).
    /// Called before the command's stop is taken: the backend runs
    /// meanwhile.
    pub(super) fn settle_uprobes(&self, cmd: &Command) {
        if matches!(cmd.needs(), Needs::Stop | Needs::Runs | Needs::RunState) {
            crate::perf::keeper::settle(&runtime::must_stop);
        }
    }

    /// Someone else stopped the backend (`kill -STOP`) while the command
    /// ran: it ran on (outside.rs); one line each says so, after the
    /// command's text (on stderr after a JSON document).
    pub(super) fn say_outside_stops(&mut self, res: Result<Outcome>) -> Result<Outcome> {
        let stops = self.target.take_outside_stops();
        if stops.is_empty() {
            return res;
        }
        let lines: Vec<String> = stops.iter().map(outside_stop_line).collect();
        let Ok(Outcome { mut text, flow }) = res else {
            for l in &lines {
                crate::runtime::sink().warn(l);
            }
            return res;
        };
        if text.trim_start().starts_with(['{', '[']) {
            for l in &lines {
                crate::runtime::sink().warn(l);
            }
        } else {
            for l in &lines {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(l);
            }
        }
        Ok(Outcome::new(text, flow))
    }

    /// Switch to non-stop mode (the prompt): the backend, stopped by the
    /// attach, runs from now on.  Some: it stopped or ended at once.
    pub fn start_nonstop(&mut self) -> Result<Option<Outcome>> {
        self.nonstop = true;
        // info's CPU state line needs a stop: read it now
        let _ = self.info();
        self.resume_background()
    }

    /// Whether the backend runs in the background (the prompt's `info`
    /// says so too).
    pub fn running_in_background(&self) -> bool {
        self.background
    }

    /// Let the backend run in the background, after stepping over a
    /// breakpoint at its pc.  Some: it stopped or ended during that step.
    fn resume_background(&mut self) -> Result<Option<Outcome>> {
        if self.target.is_gone() {
            return Ok(Some(Outcome::gone(String::new())));
        }
        self.hit = None;
        let rip = self.target.regs()?.rip;
        if self.target.breakpoint_inserted(rip)
            && let Some(stop) = self.target.step_over_breakpoint(rip)?
        {
            return Ok(Some(self.report_stop(stop)?.outcome()));
        }
        self.target.resume()?;
        self.background = true;
        Ok(None)
    }

    /// A stop that came while the backend ran in the background: the
    /// user's stop (Some), or None when it runs on (a breakpoint whose
    /// condition failed, a `commands` block that ends in `continue`).
    fn background_stop(&mut self, stop: Stop) -> Result<Option<Outcome>> {
        self.background = false;
        let Some(ran) = self.judge_stop(stop, false)? else {
            return self.resume_background();
        };
        match self.after_stop(ran)? {
            Some(done) => Ok(Some(done)),
            None => self.resume_background(),
        }
    }

    /// While the prompt waits: the stop the backend came to by itself, if
    /// any (a breakpoint hit, a fault, its exit).  Never blocks.
    pub fn poll_background(&mut self) -> Result<Option<Outcome>> {
        if !self.background {
            return Ok(None);
        }
        match self.target.poll()? {
            None => Ok(None),
            Some(stop) => self.background_stop(stop),
        }
    }

    /// Stop a backend that runs in the background.  None: it stopped for
    /// us; Some: it stopped by itself first (a breakpoint hit, a signal,
    /// its exit), which is the user's stop now.
    fn take_stop(&mut self) -> Result<Option<Outcome>> {
        while self.background {
            if let Some(stop) = self.target.poll()? {
                if let Some(r) = self.background_stop(stop)? {
                    return Ok(Some(r));
                }
                continue;
            }
            match self.target.ensure_stopped()? {
                None | Some(Stop::Interrupted) => {
                    self.background = false;
                    self.last_stop = Some(Stop::Interrupted);
                    if self.target.is_gone() {
                        return Ok(Some(Outcome::gone(String::new())));
                    }
                    return Ok(None);
                }
                Some(stop) => {
                    if let Some(r) = self.background_stop(stop)? {
                        return Ok(Some(r));
                    }
                }
            }
        }
        Ok(None)
    }

    /// `interrupt` (and Ctrl-C at the prompt): stop the backend until
    /// `continue`.
    pub fn interrupt(&mut self) -> Result<Outcome> {
        if self.target.is_gone() {
            return Err(crate::inferior::Gone::Backend.into());
        }
        if !self.background {
            return Ok(Outcome::shows("The backend is stopped already."));
        }
        match self.take_stop()? {
            Some(r) => Ok(r),
            None => Ok(Outcome::shows(self.interrupted_text()?)),
        }
    }

    /// One command at the prompt.  In non-stop mode with the backend
    /// running: a command that needs no stop runs as it is; any other takes
    /// a stop, runs, and lets the backend go on (saying so when the stop
    /// was long).  `continue` lets a stopped backend run in the background
    /// again (the prompt comes back at once); `interrupt` stops it.
    pub fn execute_at_prompt(&mut self, cmd: &Command) -> Result<Outcome> {
        if !self.nonstop {
            return self.execute(cmd);
        }
        if *cmd == Command::Continue {
            // the backend runs in the background, the prompt comes back
            if self.target.is_gone() {
                return Err(crate::inferior::Gone::NothingTo("continue".into()).into());
            }
            if self.background {
                return Ok(Outcome::shows(
                    "The backend runs already ('interrupt' or Ctrl-C stops it).",
                ));
            }
            return Ok(self
                .resume_background()?
                .unwrap_or_else(|| Outcome::shows("Continuing.")));
        }
        if !self.background {
            return self.execute(cmd);
        }
        // what the command needs, from its registry entry
        let needs = cmd.needs();
        if matches!(needs, Needs::Nothing | Needs::RunState | Needs::Detaches) {
            return self.execute(cmd);
        }
        if needs == Needs::Memory
            && let Ok(r) = self.execute(cmd)
        {
            return Ok(r);
        }
        // the uprobes a finished command closed are out first (while the
        // backend runs)
        self.settle_uprobes(cmd);
        self.with_stop(|s| s.execute(cmd))
    }

    /// Run `work` on a stop of the backend that runs in the background,
    /// and let it run again after, whichever way `work` ends (its outcome
    /// or its error): the stop and the resume are paired here, and only
    /// here.  It is not resumed when the session ends (the outcome's flow
    /// is not `Continue`: `detach`, `quit`, the backend gone, pgdbg told to
    /// end), when pgdbg must stop, or when the backend is gone.  A stop the
    /// backend came to by itself before ours (a breakpoint hit, a signal,
    /// its exit) is the user's: it is shown, `work` runs on it (unless it
    /// ended the session), and the backend stays stopped (until
    /// `continue`).  A stop that comes while resuming (stepping over a
    /// breakpoint at the pc) is shown after the outcome, and its flow is
    /// the one that counts; else a long stop's cost is said.
    fn with_stop(&mut self, work: impl FnOnce(&mut Session) -> Result<Outcome>) -> Result<Outcome> {
        // the cost of the stop: the time the backend did none of its own
        // work (stopped, or running pgdbg's calls); a probe's backend does
        // its own work between the stops it is probed in
        let before = self.target.lost_time();
        if let Some(own) = self.take_stop()? {
            // it stopped by itself first: that stop is shown, the command
            // runs on it, and the backend stays stopped (until `continue`)
            if !own.goes_on() {
                return Ok(own);
            }
            return Ok(own.then_line(work(self)?));
        }
        self.resumes_after = true;
        let res = work(self);
        self.resumes_after = false;
        if matches!(&res, Ok(done) if !done.goes_on())
            || runtime::must_stop()
            || self.target.is_gone()
        {
            return res;
        }
        // back to running, the command's error or not
        let resumed = self.resume_background();
        let done = res?;
        if let Some(stop) = resumed? {
            return Ok(done.followed_by(stop));
        }
        let cost = self.target.lost_time().saturating_sub(before);
        Ok(with_cost(done, cost))
    }
}

/// A command's outcome after the stop it took, the backend running again:
/// the stop's cost is said when it was long, or when the text says the
/// backend stopped (a probe's report of a stop).
fn with_cost(mut done: Outcome, cost: Duration) -> Outcome {
    if done.text.contains("Program stopped") || cost > LONG_STOP {
        done.text.push_str(&format!(
            "\n(the backend was stopped for {:.2} s; it runs again)",
            cost.as_secs_f64()
        ));
    }
    done
}

/// One outside stop, as the user reads it.
fn outside_stop_line(o: &crate::inferior::outside::OutsideStop) -> String {
    let by = match o.by {
        Some(p) => format!("{:?} from process {p}", o.sig),
        None => format!("{:?} from the kernel (a terminal)", o.sig),
    };
    match o.lasted {
        Some(d) => format!(
            "(the backend was stopped by {by} for {:.2} s, not by pgdbg; the command ran on)",
            d.as_secs_f64()
        ),
        None => format!(
            "(the backend is stopped by {by}, for {:.2} s so far, not by pgdbg; it stays stopped until a SIGCONT)",
            o.since.elapsed().as_secs_f64()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{LONG_STOP, with_cost};
    use crate::command::{Needs, parse};
    use crate::postgres::outcome::Outcome;
    use std::time::Duration;

    /// A short stop is not said; a long one is, and so is any stop when
    /// the text says the program stopped; the flow is kept.
    #[test]
    fn a_stops_cost() {
        let short = Duration::from_millis(20);
        assert_eq!(
            with_cost(Outcome::shows("$1 = 1"), short),
            Outcome::shows("$1 = 1")
        );
        assert_eq!(
            with_cost(Outcome::shows("$1 = 1"), Duration::from_millis(2380)),
            Outcome::shows("$1 = 1\n(the backend was stopped for 2.38 s; it runs again)")
        );
        assert_eq!(with_cost(Outcome::nothing(), LONG_STOP), Outcome::nothing());
        assert_eq!(
            with_cost(Outcome::gone("\nProgram stopped at x"), short),
            Outcome::gone(
                "\nProgram stopped at x\n(the backend was stopped for 0.02 s; it runs again)"
            )
        );
    }

    /// Commands that only read memory or nothing run while the backend
    /// runs; probes and samplers let it run while they work; the rest take
    /// a stop (as their registry entries say).
    #[test]
    fn what_commands_need() {
        let n = |l: &str| parse(l).unwrap().needs();
        assert_eq!(n("help"), Needs::Nothing);
        assert_eq!(n("info"), Needs::Nothing);
        assert_eq!(n("info breakpoints"), Needs::Nothing);
        assert_eq!(n("print MyProcPid"), Needs::Memory);
        assert_eq!(n("wait"), Needs::Memory);
        // code and source read while the backend runs; a stop only for
        // the frame's pc when no location is given
        assert_eq!(n("disassemble GetCachedPlan"), Needs::Memory);
        assert_eq!(n("disassemble"), Needs::Memory);
        assert_eq!(n("list GetCachedPlan"), Needs::Memory);
        assert_eq!(n("directory /tmp"), Needs::Nothing);
        assert_eq!(n("bt"), Needs::Stop);
        assert_eq!(n("plan"), Needs::Stop);
        assert_eq!(n("break exec_simple_query"), Needs::Stop);
        assert_eq!(n("call pg_backend_pid()"), Needs::Stop);
        for runs in [
            "latency standard_ExecutorRun --for 2s",
            "count standard_ExecutorRun",
            "count ExecScan --ptrace",
            "trace standard_ExecutorRun --perf",
            "profile --for 2s",
            "plan --progress",
            "plan --next",
            "plan --next --analyze",
            "plancache --for 10s",
            "waits sample --for 2s",
            "waits trace",
        ] {
            assert_eq!(n(runs), Needs::Runs, "{runs}");
        }
        assert_eq!(n("continue"), Needs::RunState);
        assert_eq!(n("interrupt"), Needs::RunState);
        assert_eq!(n("detach"), Needs::Detaches);
        assert_eq!(n("quit"), Needs::Detaches);
    }
}
