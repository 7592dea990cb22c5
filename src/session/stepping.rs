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
mod lines;
mod runto;

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
    Other(Outcome),
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
            return Err(crate::inferior::Gone::NothingTo(what.into()).into());
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
                return Err(crate::inferior::Gone::Backend.into());
            }
            self.hit = None;
            if let Some(done) = self.step_over_here_reported()? {
                return Ok(Arrival::Other(done));
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
                    // a goal reached by a deeper frame (recursion): on,
                    // unless a watched local's frame returned there
                    self.last_stop = Some(stop);
                    if self.bps.scope_uses(addr)
                        && let Some(text) = self.end_left_scopes(false)?
                    {
                        return Ok(Arrival::Other(Outcome::shows(text)));
                    }
                    continue;
                }
            }
            let Some(ran) = self.judge_stop(stop, true)? else {
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
            match self.after_stop(ran)? {
                Some(done) => return Ok(Arrival::Other(done)),
                None => {
                    if self.target.is_gone() {
                        return Err(crate::inferior::Gone::Backend.into());
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
                        return Ok(Arrival::Other(self.continue_running()?));
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
    pub(crate) fn check_goals(&mut self, addrs: &[u64]) -> Result<()> {
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
    fn step_over_here_reported(&mut self) -> Result<Option<Outcome>> {
        let rip = self.target.regs()?.rip;
        self.target.take_step_watch();
        if self.target.breakpoint_inserted(rip)
            && let Some(stop) = self.target.step_over_breakpoint(rip)?
        {
            return Ok(Some(self.report_stop(stop)?.outcome()));
        }
        // a watchpoint hit by the instruction under the int3: reported,
        // its `commands` block not run (this run's int3s are in)
        Ok(self.step_watch_hit()?.map(Ran::outcome))
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
                return Ok(Some(Arrival::Other(Outcome::shows(text))));
            }
            let pc = self.target.regs()?.rip;
            let jump = self
                .insn_at(pc)
                .is_ok_and(|i| i.flow == FlowControl::IndirectBranch);
            if let Some(stop) = self.target.step_instruction()? {
                return Ok(Some(Arrival::Other(self.report_stop(stop)?.outcome())));
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

    /// `stepi [N]` (`over`: `nexti`, calls run through to their return).
    pub fn step_instructions(&mut self, over: bool, count: u64) -> Result<Outcome> {
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
        Ok(Outcome::shows(self.step_stop_text(changed, line_start)?))
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
    fn one_instruction(&mut self, over: bool) -> Result<Option<Outcome>> {
        if let Some(text) = self.cut_short()? {
            return Ok(Some(Outcome::shows(text)));
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
                Arrival::Other(done) => Some(done),
                Arrival::Longjmp(note) => {
                    let at = self.step_stop_text(true, false)?;
                    Some(Outcome::shows(format!("{note}\n{at}")))
                }
            });
        }
        // stepping through the dynamic linker's hook: a library was
        // loaded or unloaded, as when a run stops there (its int3 stays)
        let hook = self.is_library_hook(regs.rip);
        self.target.take_step_watch();
        if let Some(stop) = self.target.step_instruction()? {
            return Ok(Some(self.report_stop(stop)?.outcome()));
        }
        if hook {
            self.on_library_event()?;
        }
        // the instruction wrote (or read) a watched address: the step
        // ends with the watchpoint's stop, as gdb's
        self.step_watch_stop()
    }

    /// The line-table sequence at runtime `pc` (the postgres binary or a
    /// library with DWARF) and the load bias to subtract.
    pub(crate) fn line_sequence_at(&self, pc: u64) -> Option<(LineSequence, u64)> {
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

    /// Runtime `pc` enters the inlined call `die` (`enters_inline`).
    pub(crate) fn enters_inline_at(&self, pc: u64, die: u64) -> bool {
        if self.in_main(pc) {
            return self.di.enters_inline(die, pc - self.bias);
        }
        self.library_at(pc)
            .is_some_and(|(_, di, bias)| di.enters_inline(die, pc - bias))
    }

    /// The runtime start of the inlined call `die` (of the debug info
    /// that describes runtime `pc`).
    pub(crate) fn inline_entry_at(&self, pc: u64, die: u64) -> Option<u64> {
        if self.in_main(pc) {
            return self.di.inline_entry(die).map(|a| a + self.bias);
        }
        let (_, di, bias) = self.library_at(pc)?;
        di.inline_entry(die).map(|a| a + bias)
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
