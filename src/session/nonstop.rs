//! The prompt's non-stop mode.  After `attach` the backend runs while the
//! prompt waits: a backend that holds a row lock, a relation lock or a
//! buffer pin never freezes the sessions that need them while a person
//! reads.  Each command takes the stop it needs (PTRACE_INTERRUPT, the
//! work, resume) or none (memory reads with process_vm_readv); a
//! breakpoint hit, Ctrl-C or `interrupt` stops the backend, as in gdb,
//! until `continue`.  Scripts do not use this mode: they run from one stop.
use super::run::AfterStop;
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
    pub(super) fn say_outside_stops(
        &mut self,
        res: Result<(String, Flow)>,
    ) -> Result<(String, Flow)> {
        let stops = self.target.take_outside_stops();
        if stops.is_empty() {
            return res;
        }
        let lines: Vec<String> = stops.iter().map(outside_stop_line).collect();
        let Ok((mut text, flow)) = res else {
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
        Ok((text, flow))
    }

    /// Switch to non-stop mode (the prompt): the backend, stopped by the
    /// attach, runs from now on.  Some: it stopped or ended at once.
    pub fn start_nonstop(&mut self) -> Result<Option<(String, Flow)>> {
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
    fn resume_background(&mut self) -> Result<Option<(String, Flow)>> {
        if self.target.is_gone() {
            return Ok(Some((String::new(), Flow::TargetGone)));
        }
        self.hit = None;
        let rip = self.target.regs()?.rip;
        if self.target.breakpoint_inserted(rip)
            && let Some(stop) = self.target.step_over_breakpoint(rip)?
        {
            let (outcome, text) = self.report_stop(stop)?;
            return Ok(Some((text, outcome.into())));
        }
        self.target.resume()?;
        self.background = true;
        Ok(None)
    }

    /// A stop that came while the backend ran in the background: the
    /// user's stop (Some), or None when it runs on (a breakpoint whose
    /// condition failed, a `commands` block that ends in `continue`).
    fn background_stop(&mut self, stop: Stop) -> Result<Option<(String, Flow)>> {
        self.background = false;
        let Some((outcome, text)) = self.judge_stop(stop, false)? else {
            return self.resume_background();
        };
        match self.after_stop(outcome, text)? {
            AfterStop::Done(text, flow) => Ok(Some((text, flow))),
            AfterStop::Resume => self.resume_background(),
        }
    }

    /// While the prompt waits: the stop the backend came to by itself, if
    /// any (a breakpoint hit, a fault, its exit).  Never blocks.
    pub fn poll_background(&mut self) -> Result<Option<(String, Flow)>> {
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
    fn take_stop(&mut self) -> Result<Option<(String, Flow)>> {
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
                        return Ok(Some((String::new(), Flow::TargetGone)));
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
    pub fn interrupt(&mut self) -> Result<(String, Flow)> {
        if self.target.is_gone() {
            return Err(crate::inferior::Gone::Backend.into());
        }
        if !self.background {
            return Ok(("The backend is stopped already.".into(), Flow::Continue));
        }
        match self.take_stop()? {
            Some(r) => Ok(r),
            None => Ok((self.interrupted_text()?, Flow::Continue)),
        }
    }

    /// One command at the prompt.  In non-stop mode with the backend
    /// running: a command that needs no stop runs as it is; any other takes
    /// a stop, runs, and lets the backend go on (saying so when the stop
    /// was long).  `continue` lets a stopped backend run in the background
    /// again (the prompt comes back at once); `interrupt` stops it.
    pub fn execute_at_prompt(&mut self, cmd: &Command) -> Result<(String, Flow)> {
        if !self.nonstop {
            return self.execute(cmd);
        }
        if *cmd == Command::Continue {
            // the backend runs in the background, the prompt comes back
            if self.target.is_gone() {
                return Err(crate::inferior::Gone::NothingTo("continue".into()).into());
            }
            if self.background {
                return Ok((
                    "The backend runs already ('interrupt' or Ctrl-C stops it).".into(),
                    Flow::Continue,
                ));
            }
            return Ok(self
                .resume_background()?
                .unwrap_or_else(|| ("Continuing.".into(), Flow::Continue)));
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
        // the cost of the stop: the time the backend did none of its own
        // work (stopped, or running pgdbg's calls); a probe's backend does
        // its own work between the stops it is probed in
        let before = self.target.lost_time();
        if let Some((text, flow)) = self.take_stop()? {
            // it stopped by itself first: that stop is shown, the command
            // runs on it, and the backend stays stopped (until `continue`)
            if flow != Flow::Continue {
                return Ok((text, flow));
            }
            let (t, flow) = self.execute(cmd)?;
            return Ok((
                format!("{text}\n{}", t.strip_prefix('\n').unwrap_or(&t)),
                flow,
            ));
        }
        self.resumes_after = true;
        let res = self.execute(cmd);
        self.resumes_after = false;
        if matches!(
            res,
            Ok((_, Flow::TargetGone | Flow::Terminate | Flow::Quit))
        ) || runtime::must_stop()
            || self.target.is_gone()
        {
            return res;
        }
        // back to running, the command's error or not
        let resumed = self.resume_background();
        let (text, flow) = res?;
        if let Some((t, f)) = resumed? {
            return Ok((format!("{text}{t}"), f));
        }
        let cost = self.target.lost_time().saturating_sub(before);
        let mut text = text;
        if text.contains("Program stopped") || cost > LONG_STOP {
            text.push_str(&format!(
                "\n(the backend was stopped for {:.2} s; it runs again)",
                cost.as_secs_f64()
            ));
        }
        Ok((text, flow))
    }
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
    use crate::command::{Needs, parse};

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
