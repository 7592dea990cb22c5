//! Stepping: `finish`, `stepi`/`nexti`, `next`/`step`, `until`/`advance`.
//!
//! What is written into the backend: only int3s through the session's
//! internal breakpoints (`arm_internal`, which records each with the
//! guardian before it is written), at the return address a run goes to
//! and at `pg_re_throw` (an ERROR's longjmp), each disarmed again on every
//! way out of `run_to` (arrival, another stop, Ctrl-C, an error, the
//! backend's exit); pgdbg killed meanwhile: the guardian restores them as
//! any breakpoint; taken out too while a breakpoint's `commands` block
//! runs meanwhile (`run_to_armed`).  Every goal must be code of a file the
//! backend maps (`check_goals`).  Single steps write nothing
//! (PTRACE_SINGLESTEP; over an int3 of ours, `Target::step_over_breakpoint`
//! puts it back) but the word a stepped `pushf`/`pushfq` pushes: its trap
//! flag, the step's own, is cleared (`Target::single_step_user`).
use super::*;
use crate::command::LineStep;
use crate::debuginfo::LineSequence;
use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic};

/// Single steps after `pg_re_throw` before pgdbg gives up following the
/// longjmp (glibc's `siglongjmp` takes a few dozen).
const LONGJMP_STEPS: usize = 20_000;

/// Instructions one `next`/`step` may single-step before it stops and
/// says so (a line that loops for long).
const LINE_STEPS: usize = 1_000_000;

/// Where a run to temporary breakpoints ended.
enum Arrival {
    /// At a goal, its frame check held.
    At,
    /// Another stop the user sees (a breakpoint of theirs, a signal, the
    /// exit, Ctrl-C): its text and how the session goes on.
    Other(String, Flow),
    /// An ERROR's longjmp left the frame: the backend is stopped where
    /// control landed; the line that says so.
    Longjmp(String),
}

/// A place to run to: `addr`, accepted when `rsp >= min_sp` there (the
/// frame that returns to it, not a deeper recursion's).
#[derive(Clone, Copy)]
struct Goal {
    addr: u64,
    min_sp: Option<u64>,
}

/// The instruction at a pc, as stepping needs it.
struct Insn {
    len: u64,
    flow: FlowControl,
    syscall: bool,
}

impl Session {
    /// Stepping needs a stopped, living backend.
    fn check_can_step(&self, what: &str) -> Result<()> {
        if self.target.is_gone() {
            bail!("the backend is gone; nothing to {what}");
        }
        if self.background {
            bail!(
                "the backend is running: stop it first ('interrupt', Ctrl-C or a breakpoint), then '{what}'"
            );
        }
        Ok(())
    }

    fn pg_re_throw_addr(&self) -> Option<u64> {
        self.di
            .function_locations("pg_re_throw")
            .iter()
            .find(|l| !l.inlined)
            .map(|l| l.addr + self.bias)
    }

    /// The instruction at `pc` (original bytes under our int3s).
    fn insn_at(&self, pc: u64) -> Result<Insn> {
        let mut buf = [0u8; 16];
        let mut n = buf.len();
        while self.target.read(pc, &mut buf[..n]).is_err() {
            n /= 2;
            if n == 0 {
                bail!("cannot read the code at {pc:#x}");
            }
        }
        let mut d = Decoder::with_ip(64, &buf[..n], pc, DecoderOptions::NONE);
        let i = d.decode();
        if i.is_invalid() {
            bail!("no valid instruction at {pc:#x}");
        }
        Ok(Insn {
            len: i.len() as u64,
            flow: i.flow_control(),
            syscall: matches!(i.mnemonic(), Mnemonic::Syscall | Mnemonic::Sysenter),
        })
    }

    /// Run the backend until one of `goals` (temporary internal int3s,
    /// each removed again on every way out).  `frame_sp`: the CFA of the
    /// frame being left; an ERROR (`pg_re_throw`) whose longjmp lands at
    /// or above it ends the run where it lands (below it, inside the
    /// frame, the run goes on).
    fn run_to(&mut self, goals: &[Goal], frame_sp: Option<u64>) -> Result<Arrival> {
        let rethrow = frame_sp.and_then(|_| self.pg_re_throw_addr());
        let mut armed: Vec<u64> = Vec::new();
        let res = self.run_to_armed(goals, rethrow, frame_sp, &mut armed);
        // every int3 this run wrote comes out, whatever happened
        let mut undo = Ok(());
        for a in armed {
            if let Err(e) = self.disarm_internal(a) {
                undo = Err(e);
            }
        }
        let r = res?;
        undo?;
        Ok(r)
    }

    fn run_to_armed(
        &mut self,
        goals: &[Goal],
        rethrow: Option<u64>,
        frame_sp: Option<u64>,
        armed: &mut Vec<u64>,
    ) -> Result<Arrival> {
        let addrs: Vec<u64> = goals.iter().map(|g| g.addr).chain(rethrow).collect();
        self.check_goals(&addrs)?;
        self.arm_goals(&addrs, armed)?;
        loop {
            if self.target.is_gone() {
                bail!("the backend is gone");
            }
            self.hit = None;
            if let Some((text, flow)) = self.step_over_here_reported()? {
                return Ok(Arrival::Other(text, flow));
            }
            let stop = self.target.cont_and_wait(&runtime::Hooks)?;
            if let Stop::Breakpoint { addr } = stop {
                let regs = self.target.regs()?;
                if goals
                    .iter()
                    .any(|g| g.addr == addr && g.min_sp.is_none_or(|m| regs.rsp >= m))
                {
                    self.last_stop = Some(stop);
                    return Ok(Arrival::At);
                }
                if Some(addr) == rethrow && !self.bps.uses(addr) {
                    self.last_stop = Some(stop);
                    match self.follow_longjmp(frame_sp)? {
                        None => continue,
                        Some(a) => return Ok(a),
                    }
                }
                if armed.contains(&addr) && !self.bps.uses(addr) && !self.is_library_hook(addr) {
                    // a goal reached by a deeper frame (recursion): on
                    self.last_stop = Some(stop);
                    continue;
                }
            }
            let Some((outcome, text)) = self.judge_stop(stop, true)? else {
                continue;
            };
            // a breakpoint's `commands` block may run now: this run's
            // int3s are out while it runs (a probe in it would take their
            // hits for its own, and its end removes every internal int3;
            // a nested step arms its own)
            // (the backend gone: nothing runs, `run_to` cleans up)
            let at = if self.target.is_gone() {
                None
            } else {
                let r = self.target.regs()?;
                // every one out, the first failure reported after (one
                // that failed stays listed: its int3 stays known to the
                // target and goes at the detach)
                let mut first = None;
                for a in std::mem::take(armed) {
                    if let Err(e) = self.disarm_internal(a) {
                        armed.push(a);
                        first.get_or_insert(e);
                    }
                }
                if let Some(e) = first {
                    return Err(e);
                }
                Some((r.rip, r.rsp))
            };
            match self.after_stop(outcome, text)? {
                run::AfterStop::Done(text, flow) => return Ok(Arrival::Other(text, flow)),
                run::AfterStop::Resume => {
                    if self.target.is_gone() {
                        bail!("the backend is gone");
                    }
                    let now = self.target.regs()?;
                    if Some((now.rip, now.rsp)) != at {
                        // the block ran the backend (a probe, a step): the
                        // frame this run was in may be gone; as gdb, the
                        // step ends and the block's `continue` is one
                        self.say(
                            "The breakpoint's commands ran the backend (a probe or a step): \
                             the step ends here, and their 'continue' continues.",
                        );
                        let (text, flow) = self.continue_running()?;
                        return Ok(Arrival::Other(text, flow));
                    }
                    // only printed or evaluated: the run goes on
                    self.check_goals(&addrs)?;
                    self.arm_goals(&addrs, armed)?;
                }
            }
        }
    }

    /// Every goal of a run must be code: in a module the backend maps
    /// (`module_for`) and in an executable mapping of its file (a return
    /// address read from the stack may be anything, and an int3 written
    /// into data would corrupt it).
    fn check_goals(&mut self, addrs: &[u64]) -> Result<()> {
        let maps = procfs::maps(self.pid)?;
        for &a in addrs {
            if self.module_for(a).is_none() || !in_file_code(&maps, a) {
                bail!(
                    "{a:#x} is not code of the backend or a library it maps: not run there; use 'stepi'"
                );
            }
        }
        Ok(())
    }

    /// The int3s of a run, each once (`armed` holds those written).
    fn arm_goals(&mut self, addrs: &[u64], armed: &mut Vec<u64>) -> Result<()> {
        for &a in addrs {
            if !armed.contains(&a) {
                self.arm_internal(a)?;
                armed.push(a);
            }
        }
        Ok(())
    }

    /// Ctrl-C, SIGTERM (or a failed write of the output) or a deadline
    /// (`--for`) during single steps: the command ends here, the backend
    /// stopped; what to show (where it stopped).
    fn cut_short(&mut self) -> Result<Option<String>> {
        if !(runtime::sigint_seen() || runtime::must_stop() || runtime::deadline_hit()) {
            return Ok(None);
        }
        runtime::take_interrupt();
        let mut text = self.interrupted_text()?;
        if runtime::deadline_hit() {
            text.push_str("\n(the time limit was reached while stepping)");
        }
        Ok(Some(text))
    }

    /// Before resuming: past an int3 of ours at `rip`; Some when the
    /// backend ended or faulted meanwhile (the stop's text).
    fn step_over_here_reported(&mut self) -> Result<Option<(String, Flow)>> {
        let rip = self.target.regs()?.rip;
        if self.target.breakpoint_inserted(rip)
            && let Some(stop) = self.target.step_over_breakpoint(rip)?
        {
            let (o, t) = self.report_stop(stop)?;
            return Ok(Some((t, o.into())));
        }
        Ok(None)
    }

    /// At `pg_re_throw`'s int3: single-step its `siglongjmp` until the
    /// stack pointer rises above `pg_re_throw`'s and an indirect jump is
    /// taken (where the longjmp lands).  None: it landed inside the frame
    /// being left (below `frame_sp`: a PG_TRY there), the run goes on.
    fn follow_longjmp(&mut self, frame_sp: Option<u64>) -> Result<Option<Arrival>> {
        let entry_sp = self.target.regs()?.rsp;
        let mut risen = false;
        for _ in 0..LONGJMP_STEPS {
            if let Some(text) = self.cut_short()? {
                return Ok(Some(Arrival::Other(text, Flow::Continue)));
            }
            let pc = self.target.regs()?.rip;
            let jump = self
                .insn_at(pc)
                .is_ok_and(|i| i.flow == FlowControl::IndirectBranch);
            if let Some(stop) = self.target.step_instruction()? {
                let (o, t) = self.report_stop(stop)?;
                return Ok(Some(Arrival::Other(t, o.into())));
            }
            let r = self.target.regs()?;
            risen |= r.rsp > entry_sp;
            if risen && jump {
                if frame_sp.is_some_and(|f| r.rsp < f) {
                    return Ok(None);
                }
                self.last_stop = Some(Stop::Interrupted);
                return Ok(Some(Arrival::Longjmp(
                    "An ERROR was raised (pg_re_throw): its longjmp left the frame; the backend is \
                     stopped where control landed ('continue' lets PostgreSQL handle the error)."
                        .into(),
                )));
            }
        }
        self.last_stop = Some(Stop::Interrupted);
        Ok(Some(Arrival::Longjmp(format!(
            "An ERROR was raised (pg_re_throw); pgdbg stepped {LONGJMP_STEPS} instructions of its \
             longjmp without seeing it land and stopped here."
        ))))
    }

    /// The text of a stop a step ended at: gdb's source line alone in
    /// the same function at a line's start, with the address in its
    /// middle, with the frame line when the function changed.
    fn step_stop_text(&mut self, frame_changed: bool, line_start: bool) -> Result<String> {
        // gdb leaves the address out where a line-table row starts (a
        // return address often is one)
        let pc = self.target.regs()?.rip;
        let line_start = line_start
            || self
                .line_sequence_at(pc)
                .is_some_and(|(seq, bias)| seq.row_start(pc - bias));
        self.last_stop = Some(Stop::Interrupted);
        self.stop_state().line_start = line_start;
        self.stop_state().frames = None;
        let frame = self.frames()?.first().cloned();
        let Some(f) = frame else {
            return Ok(String::new());
        };
        self.emit(Event::Stop {
            address: Some(format!("{:#x}", f.pc)),
            breakpoints: None,
            file: Some(f.file.as_deref().map(|p| basename(p).to_string())),
            function: Some(f.function.clone()),
            line: Some(f.line),
            reason: "step".into(),
            signal: None,
        });
        let src = self.source_line(0).or_else(|| {
            let (file, line) = (f.file.as_deref()?, f.line?);
            Some(format!("{line}\tin {file}"))
        });
        let mut text = match (frame_changed || f.line.is_none(), src) {
            (false, Some(s)) if line_start => s,
            (false, Some(s)) => format!("{:#018x}\t{s}", f.pc),
            (_, src) => {
                let head = self.frame_line(0, true)?;
                match src {
                    Some(s) => format!("{head}\n{s}"),
                    None => head,
                }
            }
        };
        text.push_str(&self.display_lines());
        Ok(text)
    }

    /// `finish`: run until the selected frame returns; its caller's
    /// place and the value returned.
    pub fn finish(&mut self) -> Result<(String, Flow)> {
        self.check_can_step("finish")?;
        let frames = self.frames()?.clone();
        let sel = self.selected();
        let f = frames
            .get(sel)
            .cloned()
            .ok_or_else(|| anyhow!("no frame selected"))?;
        if f.inlined {
            let into = frames
                .iter()
                .skip(sel + 1)
                .find(|c| !c.inlined || c.phys != f.phys)
                .and_then(|c| c.function.clone())
                .unwrap_or_else(|| "its caller".into());
            bail!(
                "'finish' out of an inlined frame ({} inlined into {into}) is not supported yet: \
                 use 'next' or 'until', or 'up' to {into} and 'finish' out of that",
                f.function.as_deref().unwrap_or("??")
            );
        }
        let Some(caller) = frames.iter().find(|c| c.phys == f.phys + 1) else {
            bail!("\"finish\" not meaningful in the outermost frame.");
        };
        let ret = caller.pc;
        let Some(cfa) = f.cfa else {
            bail!(
                "cannot finish frame #{sel}: its call frame address is not known (no CFI at {:#x})",
                f.pc
            );
        };
        let head = format!("Run till exit from #{sel}  {}", self.frame_line(sel, true)?);
        let ret_ty = if f.lib.is_none() {
            f.die.and_then(|d| self.di.die_type(d))
        } else {
            None
        };
        let goal = Goal {
            addr: ret,
            min_sp: Some(cfa),
        };
        // said before the backend runs (it may run long), as gdb does
        self.say(&head);
        match self.run_to(&[goal], Some(cfa))? {
            Arrival::Other(text, flow) => Ok((text, flow)),
            Arrival::Longjmp(note) => {
                let at = self.step_stop_text(true, false)?;
                Ok((format!("{note}\n{at}"), Flow::Continue))
            }
            Arrival::At => {
                let at = self.step_stop_text(true, false)?;
                let value = match ret_ty {
                    Some(ty) => self.returned_value(ty)?,
                    None => String::new(),
                };
                Ok((format!("{at}{value}"), Flow::Continue))
            }
        }
    }

    /// "\nValue returned is $N = ..." from rax (rdx), xmm0 or the memory
    /// rax points to, by the DWARF return type (the amd64 ABI).
    fn returned_value(&mut self, ty: crate::debuginfo::types::TypeRef) -> Result<String> {
        use crate::debuginfo::types::{Encoding, Type, strip};
        let regs = self.target.regs()?;
        let stripped = strip(&*self.di, &ty);
        let size = size_of(&*self.di, &ty) as usize;
        let loc = match &*stripped {
            Type::Base {
                enc: Encoding::Float,
                ..
            } => {
                let fp = self.target.fpregs()?;
                let lo = fp.xmm_space[0] as u64 | ((fp.xmm_space[1] as u64) << 32);
                ValLoc::Bytes(lo.to_le_bytes()[..size.clamp(1, 8)].to_vec())
            }
            Type::Struct { .. } if size > 16 => ValLoc::Memory(regs.rax),
            Type::Struct { .. } if size > 8 => {
                if self.has_float_member(&stripped) {
                    return Ok(
                        "\nValue returned: a struct in SSE registers, not shown by pgdbg".into(),
                    );
                }
                let mut b = regs.rax.to_le_bytes().to_vec();
                b.extend_from_slice(&regs.rdx.to_le_bytes());
                b.truncate(size);
                ValLoc::Bytes(b)
            }
            _ if size == 0 => return Ok(String::new()),
            _ => ValLoc::Bytes(regs.rax.to_le_bytes()[..size.clamp(1, 8)].to_vec()),
        };
        let v = Value { ty, loc };
        let (n, text, _) = crate::postgres::Backend::keep_value(self, v);
        Ok(format!("\nValue returned is ${n} = {text}"))
    }

    fn has_float_member(&self, t: &crate::debuginfo::types::Type) -> bool {
        use crate::debuginfo::types::{Encoding, Type, strip};
        match t {
            Type::Struct { members, .. } => members.iter().any(|m| {
                let s = strip(&*self.di, &m.ty);
                matches!(
                    &*s,
                    Type::Base {
                        enc: Encoding::Float,
                        ..
                    }
                ) || self.has_float_member(&s)
            }),
            _ => false,
        }
    }

    /// `stepi [N]` (`over`: `nexti`, calls run through to their return).
    pub fn step_instructions(&mut self, over: bool, count: u64) -> Result<(String, Flow)> {
        self.check_can_step(if over { "nexti" } else { "stepi" })?;
        let start = self.function_key()?;
        for _ in 0..count.max(1) {
            if let Some(r) = self.one_instruction(over)? {
                return Ok(r);
            }
        }
        let changed = self.function_key()? != start;
        let pc = self.target.regs()?.rip;
        let line_start = self
            .line_sequence_at(pc)
            .is_some_and(|(seq, bias)| seq.stmt_start(pc - bias).is_some());
        Ok((self.step_stop_text(changed, line_start)?, Flow::Continue))
    }

    /// The function of the innermost frame and its CFA (a new frame of
    /// the same function differs too).
    fn function_key(&mut self) -> Result<(Option<String>, Option<u64>)> {
        let f = self.top_frames()?.into_iter().next();
        Ok(f.map(|f| (f.function, f.cfa)).unwrap_or_default())
    }

    /// One instruction; over a call (`over`) or a system call (which may
    /// block, and a single step could not be interrupted) to the next
    /// instruction with a temporary int3.  Some: a stop that ends the
    /// command.
    fn one_instruction(&mut self, over: bool) -> Result<Option<(String, Flow)>> {
        if let Some(text) = self.cut_short()? {
            return Ok(Some((text, Flow::Continue)));
        }
        let regs = self.target.regs()?;
        let insn = self.insn_at(regs.rip)?;
        let call = matches!(insn.flow, FlowControl::Call | FlowControl::IndirectCall);
        if insn.syscall || (over && call) {
            let goal = Goal {
                addr: regs.rip + insn.len,
                min_sp: Some(regs.rsp),
            };
            return Ok(match self.run_to(&[goal], Some(regs.rsp))? {
                Arrival::At => None,
                Arrival::Other(t, f) => Some((t, f)),
                Arrival::Longjmp(note) => {
                    let at = self.step_stop_text(true, false)?;
                    Some((format!("{note}\n{at}"), Flow::Continue))
                }
            });
        }
        // stepping through the dynamic linker's hook: a library was
        // loaded or unloaded, as when a run stops there (its int3 stays)
        let hook = self.is_library_hook(regs.rip);
        if let Some(stop) = self.target.step_instruction()? {
            let (o, t) = self.report_stop(stop)?;
            return Ok(Some((t, o.into())));
        }
        if hook {
            self.on_library_event()?;
        }
        Ok(None)
    }

    /// The line-table sequence at runtime `pc` (the postgres binary or a
    /// library with DWARF) and the load bias to subtract.
    fn line_sequence_at(&self, pc: u64) -> Option<(LineSequence, u64)> {
        if self.in_main(pc) {
            return self
                .di
                .line_sequence(pc - self.bias)
                .map(|s| (s, self.bias));
        }
        let (_, di, bias) = self.library_at(pc)?;
        if !di.has_dwarf() {
            return None;
        }
        di.line_sequence(pc - bias).map(|s| (s, bias))
    }

    /// The source frames at runtime `pc`, innermost first (inlined calls
    /// and their physical function).
    fn source_frames_at(&self, pc: u64) -> Vec<SourceFrame> {
        if self.in_main(pc) {
            return self.di.frames_at(pc - self.bias);
        }
        match self.library_at(pc) {
            Some((_, di, bias)) if di.has_dwarf() => di.frames_at(pc - bias),
            _ => Vec::new(),
        }
    }

    /// The runtime start of the inlined call `die` (of the debug info
    /// that describes runtime `pc`).
    fn inline_entry_at(&self, pc: u64, die: u64) -> Option<u64> {
        if self.in_main(pc) {
            return self.di.inline_entry(die).map(|a| a + self.bias);
        }
        let (_, di, bias) = self.library_at(pc)?;
        di.inline_entry(die).map(|a| a + bias)
    }

    /// `next [N]`, `step [N]`, `until`: by source lines.
    pub fn step_lines(&mut self, mode: LineStep, count: u64) -> Result<(String, Flow)> {
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
                LineEnd::Stop(text, flow) => return Ok((text, flow)),
                LineEnd::Note(note) => {
                    let at = self.step_stop_text(true, false)?;
                    return Ok((format!("{note}\n{at}"), Flow::Continue));
                }
            }
        }
        self.stop_state().hide_inline = hide;
        let changed = self.function_key()? != start;
        Ok((self.step_stop_text(changed, line_start)?, Flow::Continue))
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
                return Ok(LineEnd::Stop(text, Flow::Continue));
            }
            let regs = self.target.regs()?;
            let insn = self.insn_at(regs.rip)?;
            let call = matches!(insn.flow, FlowControl::Call | FlowControl::IndirectCall);
            let ret = insn.flow == FlowControl::Return;
            let from = regs.rip;
            if call && mode == LineStep::Step {
                if let Some(r) = self.one_instruction(false)? {
                    return Ok(LineEnd::Stop(r.0, r.1));
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
                        Arrival::Other(t, f) => return Ok(LineEnd::Stop(t, f)),
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
                return Ok(LineEnd::Stop(r.0, r.1));
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
            Arrival::Other(t, f) => LineEnd::Stop(t, f),
            Arrival::Longjmp(n) => LineEnd::Note(n),
        })
    }

    /// `advance LOCATION` (`until LOCATION` with `until`: only in this
    /// frame or an outer one): run until LOCATION or until the current
    /// frame returns.
    pub fn advance(&mut self, spec: &str, until: bool) -> Result<(String, Flow)> {
        self.check_can_step(if until { "until" } else { "advance" })?;
        let locs = locations::resolve(&self.di, self.bias, spec, true)?;
        let regs = self.target.regs()?;
        let frames = self.frames()?.clone();
        let sel = self.selected();
        let min_sp = until.then_some(regs.rsp);
        let mut goals: Vec<Goal> = locs
            .iter()
            .map(|l| Goal {
                addr: l.addr,
                min_sp,
            })
            .collect();
        let f = frames.get(sel).cloned();
        let cfa = f.as_ref().and_then(|f| f.cfa);
        if let (Some(f), Some(cfa)) = (&f, cfa)
            && let Some(caller) = frames.iter().find(|c| c.phys == f.phys + 1)
        {
            goals.push(Goal {
                addr: caller.pc,
                min_sp: Some(cfa),
            });
        }
        let start = self.function_key()?;
        match self.run_to(&goals, cfa)? {
            Arrival::Other(t, f) => Ok((t, f)),
            Arrival::Longjmp(note) => {
                let at = self.step_stop_text(true, false)?;
                Ok((format!("{note}\n{at}"), Flow::Continue))
            }
            Arrival::At => {
                let pc = self.target.regs()?.rip;
                let changed = self.function_key()? != start;
                let line_start = self
                    .line_sequence_at(pc)
                    .is_some_and(|(seq, bias)| seq.stmt_start(pc - bias).is_some());
                Ok((self.step_stop_text(changed, line_start)?, Flow::Continue))
            }
        }
    }
}

/// How one line of `next`/`step` ended.
enum LineEnd {
    /// At the next line (true: at the start of a line-table row), with
    /// this many inlined frames left out (stopped at their call site).
    Line(bool, usize),
    /// Another stop, reported.
    Stop(String, Flow),
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

/// Whether `addr` lies in an executable mapping of a file (`maps`: the
/// process's `/proc/PID/maps`).
fn in_file_code(maps: &[procfs::Mapping], addr: u64) -> bool {
    maps.iter()
        .any(|m| m.path.is_some() && m.perms.contains('x') && addr >= m.start && addr < m.end)
}

#[cfg(test)]
mod tests {
    use super::in_file_code;
    use crate::inferior::procfs;

    static DATA: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(7);

    /// A run's goal is accepted in code only: this test process's own
    /// code is, its data, stack, heap and a low address are not.
    #[test]
    fn goals_must_be_code() {
        let maps = procfs::maps(std::process::id() as i32).unwrap();
        let code = goals_must_be_code as fn() as usize as u64;
        assert!(in_file_code(&maps, code), "own code at {code:#x}");
        let data = &DATA as *const _ as u64;
        assert!(!in_file_code(&maps, data), "static data at {data:#x}");
        let local = 5u64;
        let stack = &local as *const u64 as u64;
        assert!(!in_file_code(&maps, stack), "stack at {stack:#x}");
        let boxed = Box::new(9u64);
        let heap = &*boxed as *const u64 as u64;
        assert!(!in_file_code(&maps, heap), "heap at {heap:#x}");
        assert!(!in_file_code(&maps, 0x1));
        assert!(!in_file_code(&maps, u64::MAX - 7));
    }
}
