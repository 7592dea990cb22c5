//! Running: `continue`, the stops it ends in and how they are reported.
use super::*;

impl Session {
    /// Continue until the next stop.  Handles stepping over the breakpoint
    /// at the current pc.
    pub fn cont(&mut self) -> Result<Ran> {
        if self.target.is_gone() {
            return Err(crate::inferior::Gone::NothingTo("continue".into()).into());
        }
        loop {
            self.hit = None;
            let regs = self.target.regs()?;
            self.target.take_step_watch();
            if self.target.breakpoint_inserted(regs.rip)
                && let Some(stop) = self.target.step_over_breakpoint(regs.rip)?
            {
                return self.report_stop(stop);
            }
            // the instruction under the int3 hit a watchpoint (gdb stops)
            if let Some(ran) = self.step_watch_hit()? {
                return Ok(ran);
            }
            let stop = self.target.cont_and_wait(&runtime::Hooks)?;
            if let Some(r) = self.judge_stop(stop, true)? {
                return Ok(r);
            }
        }
    }

    /// A stop of the running backend: reported (Some), or None for a
    /// breakpoint none of whose conditions held (the backend goes on).
    /// `foreground`: a Ctrl-C meanwhile (its interrupt may have lost the
    /// race against this hit) makes even such a hit a stop.
    pub(crate) fn judge_stop(&mut self, stop: Stop, foreground: bool) -> Result<Option<Ran>> {
        self.hit = None;
        if let Stop::Breakpoint { addr } = stop
            && self.is_library_hook(addr)
        {
            // a library was loaded or unloaded: not a stop
            self.last_stop = Some(stop);
            self.on_library_event()?;
            if foreground && (runtime::sigint_seen() || runtime::deadline_hit()) {
                runtime::take_interrupt();
                return self.report_stop(Stop::Interrupted).map(Some);
            }
            return Ok(None);
        }
        if let Stop::Breakpoint { addr } = stop
            && self.bps.scope_uses(addr)
        {
            // where a watched local's frame returns: the watchpoint ends
            // there (gdb's stop); a deeper call of it returning there is
            // none (nor a stop unless a breakpoint of the user's is there)
            self.last_stop = Some(stop.clone());
            if let Some(text) = self.end_left_scopes(false)? {
                return Ok(Some(Ran::new(ProbeEnd::Stopped, text)));
            }
            if !self.bps.uses(addr) {
                if foreground && (runtime::sigint_seen() || runtime::deadline_hit()) {
                    runtime::take_interrupt();
                    return self.report_stop(Stop::Interrupted).map(Some);
                }
                return Ok(None);
            }
        }
        if let Stop::Breakpoint { addr } = stop
            && self.bps.uses(addr)
        {
            self.last_stop = Some(stop.clone());
            let (passing, note) = self.conditions_at(addr);
            if passing.is_empty() {
                // No condition held: not a stop, unless Ctrl-C or a
                // deadline came meanwhile.
                if foreground && (runtime::sigint_seen() || runtime::deadline_hit()) {
                    runtime::take_interrupt();
                    return self.report_stop(Stop::Interrupted).map(Some);
                }
                return Ok(None);
            }
            self.set_passing(passing);
            let mut ran = self.report_stop(stop)?;
            ran.text.push_str(&note);
            return Ok(Some(ran));
        }
        if let Stop::HardwareBreak { dr6 } = stop
            && self.fired_user_watch(dr6)
        {
            self.last_stop = Some(stop);
            if let Some(ran) = self.judge_watch(dr6, false)? {
                return Ok(Some(ran));
            }
            if foreground && (runtime::sigint_seen() || runtime::deadline_hit()) {
                runtime::take_interrupt();
                return self.report_stop(Stop::Interrupted).map(Some);
            }
            return Ok(None);
        }
        self.report_stop(stop).map(Some)
    }

    /// `continue` in a script or at the prompt: run until a stop; at a
    /// breakpoint with a `commands` block, run the block, and go on while
    /// it ends with `continue`.
    pub(crate) fn continue_running(&mut self) -> Result<Outcome> {
        // Breakpoints that are passed over without stopping the user (a
        // condition, a block ending in `continue`) may be hit thousands of
        // times a second: run on the backend's CPU meanwhile, as probes do.
        let busy = self
            .bps
            .list
            .iter()
            .any(|b| b.condition.is_some() || b.commands.last() == Some(&Command::Continue));
        let pinned = if busy && !crate::config::get().no_pin {
            procfs::last_cpu(self.pid).and_then(procfs::pin_to_cpu)
        } else {
            None
        };
        let res = self.continue_loop();
        if let Some(old) = &pinned {
            procfs::restore_affinity(old);
        }
        res
    }

    pub(crate) fn continue_loop(&mut self) -> Result<Outcome> {
        loop {
            let ran = self.cont()?;
            if let Some(done) = self.after_stop(ran)? {
                return Ok(done);
            }
        }
    }

    /// What follows a reported stop: the end of the run (Some: the text to
    /// show and the flow), or None when the breakpoints' `commands` block
    /// ended in `continue` (its output is already said): the backend runs
    /// on.
    pub(crate) fn after_stop(&mut self, ran: Ran) -> Result<Option<Outcome>> {
        if ran.end != ProbeEnd::Stopped {
            return Ok(Some(ran.outcome()));
        }
        let text = ran.text;
        let Some(hit) = self.hit.take() else {
            // not a breakpoint: an interrupt (Ctrl-C, --for) or a signal
            if runtime::deadline_hit() {
                return Ok(Some(Outcome::nothing()));
            }
            return Ok(Some(Outcome::shows(text)));
        };
        self.hits_total += 1;
        let limit_hit = self.hit_limit.is_some_and(|n| self.hits_total >= n);
        let ids: Vec<u32> = hit.iter().map(|(id, _)| *id).collect();
        let body: Vec<Command> = hit.into_iter().flat_map(|(_, c)| c).collect();
        if body.is_empty() {
            return Ok(Some(Outcome::shows(text)));
        }
        if body.first() != Some(&Command::Silent) {
            self.say(text.strip_prefix('\n').unwrap_or(&text));
        }
        let mut resume = false;
        for c in &body {
            match c {
                Command::Silent => {}
                Command::Continue => {
                    resume = true;
                    break;
                }
                c => match self.execute(c) {
                    Ok(Outcome { text: t, flow }) => {
                        if !t.is_empty() {
                            self.say(t.strip_prefix('\n').unwrap_or(&t));
                        }
                        if flow != Flow::Continue {
                            return Ok(Some(Outcome::new("", flow)));
                        }
                    }
                    Err(e) => {
                        let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
                        self.say(&format!(
                            "Error in commands of breakpoint {}: {}",
                            ids.join(", "),
                            crate::runtime::one_line(&e)
                        ));
                        break;
                    }
                },
            }
        }
        if !resume || limit_hit || runtime::deadline_hit() {
            return Ok(Some(Outcome::nothing()));
        }
        if runtime::sigint_seen() {
            // Ctrl-C while the block ran (or its interrupt lost the
            // race against this hit): stop here, and say where
            runtime::take_interrupt();
            return Ok(Some(Outcome::shows(self.interrupted_text()?)));
        }
        Ok(None)
    }

    /// What an interrupted stop shows: the frame where the backend is.
    pub(crate) fn interrupted_text(&mut self) -> Result<String> {
        // Ctrl-C during a command at the non-stop prompt: the command ends
        // and the backend runs on (`execute_at_prompt` says so)
        let head = if self.resumes_after {
            None
        } else {
            Some(self.frame_line(0, true)?)
        };
        self.emit(Event::Stop {
            address: None,
            breakpoints: None,
            file: None,
            function: None,
            line: None,
            reason: "interrupted".into(),
            signal: None,
        });
        Ok(match head {
            Some(head) => format!(
                "\nProgram stopped (interrupted; the backend got no signal).\n{head}{}",
                self.display_lines()
            ),
            None => "\nInterrupted.".into(),
        })
    }

    pub(crate) fn report_stop(&mut self, stop: Stop) -> Result<Ran> {
        self.last_stop = Some(stop.clone());
        match stop {
            Stop::Breakpoint { addr } => {
                let mut ids = Vec::new();
                let mut temp = Vec::new();
                let passing: Option<Vec<u32>> = self
                    .hit
                    .as_ref()
                    .map(|h| h.iter().map(|(id, _)| *id).collect());
                for b in self.bps.at(addr) {
                    if passing.as_ref().is_some_and(|p| !p.contains(&b.id)) {
                        continue;
                    }
                    b.hits += 1;
                    ids.push(b.id);
                    if b.temporary {
                        temp.push(b.id);
                    }
                }
                // A `silent` block hides the stop line: then only the
                // innermost frame is needed (for the capture), not a
                // backtrace, frame arguments and the source line.
                let silent = self.hit.as_ref().is_some_and(|h| {
                    h.iter().flat_map(|(_, c)| c).next() == Some(&Command::Silent)
                });
                let (head, src, frame) = if silent {
                    let frame = self.top_frames()?.into_iter().next();
                    (String::new(), String::new(), frame)
                } else {
                    let head = self.frame_line(0, false)?;
                    let src = self
                        .source_line(0)
                        .map(|s| format!("\n{s}"))
                        .unwrap_or_default();
                    (head, src, self.frames()?.first().cloned())
                };
                let file = frame
                    .as_ref()
                    .and_then(|f| f.file.as_deref().map(|p| basename(p).to_string()));
                let function = frame.as_ref().and_then(|f| f.function.clone());
                let line = frame.as_ref().and_then(|f| f.line);
                if silent && !self.capture_hits && self.capturing() {
                    self.silent_hits.add(super::hits::HitAt {
                        address: addr,
                        breakpoints: ids.clone(),
                        file,
                        function,
                        line,
                    });
                    if self.silent_hits.due() {
                        self.write_silent_hits();
                    }
                } else {
                    self.emit(Event::Stop {
                        address: Some(format!("{addr:#x}")),
                        breakpoints: Some(ids.clone()),
                        file: Some(file),
                        function: Some(function),
                        line: Some(line),
                        reason: "breakpoint".into(),
                        signal: None,
                    });
                }
                let label = if temp.is_empty() {
                    "Breakpoint"
                } else {
                    "Temporary breakpoint"
                };
                if !temp.is_empty() {
                    self.delete_breakpoints(&temp)?;
                }
                let ids_s: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
                // gdb shows the displays where it shows the stop
                let displays = if silent {
                    String::new()
                } else {
                    self.display_lines()
                };
                Ok(Ran::new(
                    ProbeEnd::Stopped,
                    format!("\n{label} {}, {head}{src}{displays}", ids_s.join(", ")),
                ))
            }
            Stop::Interrupted => Ok(Ran::new(ProbeEnd::Stopped, self.interrupted_text()?)),
            Stop::Signal(sig) => {
                let head = self.frame_line(0, true).unwrap_or_default();
                self.emit(Event::Stop {
                    address: None,
                    breakpoints: None,
                    file: None,
                    function: None,
                    line: None,
                    reason: "signal".into(),
                    signal: Some(format!("{sig:?}")),
                });
                Ok(Ran::new(
                    ProbeEnd::Stopped,
                    format!(
                        "\nProgram received signal {sig:?}; it will be delivered when you continue or detach.\n{head}{}",
                        self.display_lines()
                    ),
                ))
            }
            Stop::HardwareBreak { dr6 } => match self.judge_watch(dr6, true)? {
                Some(ran) => Ok(ran),
                None => Ok(Ran::new(
                    ProbeEnd::Stopped,
                    format!("\nHardware breakpoint (dr6={dr6:#x})"),
                )),
            },
            Stop::Exited(code) => {
                self.emit(Event::Exit {
                    signal: None,
                    status: Some(code),
                });
                Ok(Ran::new(
                    ProbeEnd::TargetGone,
                    format!("\nBackend {} exited with status {code}.", self.pid),
                ))
            }
            Stop::Killed(sig) => {
                self.emit(Event::Exit {
                    signal: Some(format!("{sig:?}")),
                    status: None,
                });
                Ok(Ran::new(
                    ProbeEnd::TargetGone,
                    format!("\nBackend {} was killed by signal {sig:?}.", self.pid),
                ))
            }
            Stop::ToolTerminating => Ok(Ran::new(ProbeEnd::Terminating, String::new())),
            // only the probe loop asks for it (it ends it itself): let go
            Stop::Exiting => {
                let end = self.target.finish_exit()?;
                self.report_stop(end)
            }
        }
    }

    /// Step over the breakpoint rip sits on, if any, before resuming; the
    /// probe's end if the target died meanwhile.
    pub(crate) fn step_over_here(&mut self) -> Result<Option<Ran>> {
        let rip = self.target.regs()?.rip;
        if self.target.breakpoint_inserted(rip)
            && let Some(stop) = self.target.step_over_breakpoint(rip)?
        {
            let text = self.report_stop(stop)?.text;
            return Ok(Some(Ran::new(ProbeEnd::TargetGone, text)));
        }
        Ok(None)
    }
}
