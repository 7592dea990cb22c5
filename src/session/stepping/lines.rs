//! `next`/`step`/`until` by source lines: single steps until another
//! line, inlined frames and an ERROR's longjmp followed.

use super::*;

impl Session {
    /// `next [N]`, `step [N]`, `until`: by source lines.
    pub fn step_lines(&mut self, mode: LineStep, count: u64) -> Result<Outcome> {
        let name = match mode {
            LineStep::Next => "next",
            LineStep::Step => "step",
            LineStep::Until => "until",
        };
        self.check_can_step(name)?;
        let start = self.function_key()?;
        let mut line_start = false;
        let mut hide = 0;
        let mut n = count.max(1);
        let hidden = self.stop_state().hide_inline;
        if mode == LineStep::Step && hidden > 0 {
            // stopped at an inlined call's site: `step` goes into it
            // without running (gdb: "behaves like down")
            hide = hidden - 1;
            self.stop_state().hide_inline = hide;
            line_start = true;
            n -= 1;
        }
        for _ in 0..n {
            match self.one_line(mode)? {
                LineEnd::Line(at_start, h) => {
                    line_start = at_start;
                    hide = h;
                    self.stop_state().hide_inline = h;
                }
                LineEnd::Stop(done) => return Ok(done),
                LineEnd::Note(note) => {
                    let at = self.step_stop_text(true, false)?;
                    return Ok(Outcome::shows(format!("{note}\n{at}")));
                }
            }
        }
        self.stop_state().hide_inline = hide;
        let changed = self.function_key()? != start;
        Ok(Outcome::shows(self.step_stop_text(changed, line_start)?))
    }

    /// One source line (gdb's step range): single steps while in the
    /// line, calls and inlined calls run through for `next`.
    fn one_line(&mut self, mode: LineStep) -> Result<LineEnd> {
        let regs = self.target.regs()?;
        let pc0 = regs.rip;
        let Some((mut seq, mut bias)) = self.line_sequence_at(pc0) else {
            // gdb: no line info here, run until the function returns
            return self.step_out_no_lines();
        };
        // stopped at an inlined call's site: that line, in the caller
        let hidden = self.stop_state().hide_inline;
        let frames0 = self.source_frames_at(pc0);
        let mut cur = match frames0.get(hidden).and_then(|f| f.line) {
            Some(l) if hidden > 0 => Some((ANY_FILE, l)),
            _ => seq.line_of(pc0 - bias),
        };
        let mut depth = frames0.len().saturating_sub(hidden);
        let mut cfa = self
            .top_frames()?
            .first()
            .and_then(|f| f.cfa)
            .unwrap_or(regs.rsp + 8);
        for _ in 0..LINE_STEPS {
            if let Some(text) = self.cut_short()? {
                return Ok(LineEnd::Stop(Outcome::shows(text)));
            }
            let regs = self.target.regs()?;
            let insn = self.insn_at(regs.rip)?;
            let call = matches!(insn.flow, FlowControl::Call | FlowControl::IndirectCall);
            let ret = insn.flow == FlowControl::Return;
            let from = regs.rip;
            if call && mode == LineStep::Step {
                if let Some(r) = self.one_instruction(false)? {
                    return Ok(LineEnd::Stop(r));
                }
                let now = self.target.regs()?;
                let Some((s, b)) = self
                    .line_sequence_at(now.rip)
                    .filter(|(s, b)| s.line_of(now.rip - b).is_some_and(|(_, l)| l != 0))
                else {
                    // no line info there (a PLT stub, libc): back out to
                    // the return address and go on with the line
                    let goal = Goal {
                        addr: self.target.read_u64(now.rsp)?,
                        min_sp: Some(now.rsp + 8),
                    };
                    match self.run_to(&[goal], Some(now.rsp + 8))? {
                        Arrival::At => continue,
                        Arrival::Other(done) => return Ok(LineEnd::Stop(done)),
                        Arrival::Longjmp(n) => return Ok(LineEnd::Note(n)),
                    }
                };
                // into a function with lines: its first line after the
                // prologue is where the step ends
                seq = s;
                bias = b;
                cur = seq.line_of(now.rip - bias);
                depth = self.source_frames_at(now.rip).len();
                cfa = now.rsp + 8;
                continue;
            }
            if let Some(r) = self.one_instruction(mode != LineStep::Step)? {
                return Ok(LineEnd::Stop(r));
            }
            let now = self.target.regs()?;
            let pc = now.rip;
            if !pc.checked_sub(bias).is_some_and(|a| seq.covers(a)) {
                match self.line_sequence_at(pc) {
                    Some((s, b)) => {
                        seq = s;
                        bias = b;
                    }
                    None => {
                        if ret || now.rsp >= cfa {
                            // returned into code without lines: gdb goes on
                            // until a function with lines; pgdbg stops
                            return Ok(LineEnd::Line(false, 0));
                        }
                        continue;
                    }
                }
            }
            if ret && now.rsp >= cfa {
                // back in the caller, in the middle of its line: on to
                // the next line's start there
                cfa = self
                    .top_frames()?
                    .first()
                    .and_then(|f| f.cfa)
                    .unwrap_or(now.rsp + 8);
                depth = self.source_frames_at(pc).len();
                cur = seq.line_of(pc - bias);
                continue;
            }
            let frames = self.source_frames_at(pc);
            let d = frames.len();
            // inlined calls that start here (gdb's test: their first
            // range's start): the stop shows their call site, when that
            // is another line; on the same line `step` goes in and `next`
            // runs through
            let mut k = 0;
            while k + 1 < d
                && frames[k].die.and_then(|die| self.inline_entry_at(pc, die)) == Some(pc)
            {
                k += 1;
            }
            if k > 0 {
                let site = frames[k].line;
                if site.is_some_and(|l| !same_line(cur, (ANY_FILE, l))) {
                    return Ok(LineEnd::Line(true, k));
                }
                if mode == LineStep::Step {
                    return Ok(LineEnd::Line(true, k - 1));
                }
                continue;
            }
            if d > depth {
                // inside an inlined call made from the stepping frame:
                // `next` runs through it, `step` stops in it
                if mode == LineStep::Step {
                    return Ok(LineEnd::Line(seq.stmt_start(pc - bias).is_some(), 0));
                }
                continue;
            }
            if d < depth {
                // the inlined call being stepped ended: the step ends in
                // its caller, even in the middle of a line (as gdb's)
                return Ok(LineEnd::Line(seq.row_start(pc - bias), 0));
            }
            let here = seq.line_of(pc - bias);
            if here.is_some_and(|(_, l)| l == 0) {
                continue;
            }
            if let Some(l) = seq.stmt_start(pc - bias)
                && !same_line(cur, l)
            {
                if mode == LineStep::Until && pc <= from && pc < pc0 {
                    // a jump back: `until` goes on
                    cur = Some(l);
                    continue;
                }
                return Ok(LineEnd::Line(true, 0));
            }
            if here.is_some_and(|h| !same_line(cur, h)) && !seq.row_start(pc - bias) {
                // the middle of another line: that line is stepped now
                // (a row of another line that is no statement: gdb goes
                // on with the line it had)
                cur = here;
            }
        }
        Ok(LineEnd::Note(format!(
            "pgdbg single-stepped {LINE_STEPS} instructions without reaching another line and stopped here."
        )))
    }

    /// `next`/`step` where the pc has no line info: run until the
    /// function returns (gdb's "Single stepping until exit").
    fn step_out_no_lines(&mut self) -> Result<LineEnd> {
        let frames = self.top_frames()?;
        let f = frames.first().cloned().ok_or_else(|| anyhow!("no frame"))?;
        let name = f.function.clone().unwrap_or_else(|| format!("{:#x}", f.pc));
        let Some(cfa) = f.cfa else {
            bail!(
                "no line number information at {name}, and no CFI to find its return: use 'stepi'"
            );
        };
        let ret = self.target.read_u64(cfa - 8)?;
        let goal = Goal {
            addr: ret,
            min_sp: Some(cfa),
        };
        self.say(&format!(
            "Single stepping until exit from function {name},\nwhich has no line number information."
        ));
        Ok(match self.run_to(&[goal], Some(cfa))? {
            Arrival::At => LineEnd::Line(false, 0),
            Arrival::Other(done) => LineEnd::Stop(done),
            Arrival::Longjmp(n) => LineEnd::Note(n),
        })
    }
}

/// How one line of `next`/`step` ended.
enum LineEnd {
    /// At the next line (true: at the start of a line-table row), with
    /// this many inlined frames left out (stopped at their call site).
    Line(bool, usize),
    /// Another stop, reported.
    Stop(Outcome),
    /// Stopped elsewhere for a reason to say (an ERROR's longjmp).
    Note(String),
}

/// A line of the caller known by number only (an inlined call's site):
/// any file index matches it.
const ANY_FILE: u64 = u64::MAX;

/// The line being stepped (`cur`) is line `l` (file index and number).
fn same_line(cur: Option<(u64, u32)>, l: (u64, u32)) -> bool {
    match cur {
        Some((f, n)) => n == l.1 && (f == l.0 || f == ANY_FILE || l.0 == ANY_FILE),
        None => false,
    }
}
