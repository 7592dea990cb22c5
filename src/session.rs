//! A debugging session on one backend: the target, its debug info, the
//! breakpoints, the frames of the current stop, and the commands.

use crate::breakpoints::{BpLocation, Breakpoints};
use crate::capture::Capture;
use crate::command::{Command, help_text};
use crate::debuginfo::location::{FrameContext, Place, eval_location};
use crate::debuginfo::types::{TypeRef, TypeSource, size_of};
use crate::debuginfo::unwind::{FileKey, Module};
use crate::debuginfo::{DebugInfo, SourceFrame, VarInfo};
use crate::expr::eval::{EvalEnv, ValLoc, Value, eval, scalar};
use crate::expr::format::{Radix, format_value, to_json};
use crate::expr::parse;
use crate::guard;
use crate::postgres;
use crate::target::regs::FrameRegs;
use crate::target::{Stop, Target, procfs};
use anyhow::{Result, anyhow, bail};
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

/// One frame of a backtrace: physical frames, with inlined calls expanded.
#[derive(Clone, Debug)]
pub struct Frame {
    pub level: usize,
    /// Runtime pc of the physical frame.
    pub pc: u64,
    /// Runtime address used for lookups (pc, or pc-1 above frame 0).
    pub lookup: u64,
    pub regs: FrameRegs,
    pub cfa: Option<u64>,
    pub phys: usize,
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub die: Option<u64>,
    /// This frame is an inlined call inside the next one.
    pub inlined: bool,
    /// DIE of the physical (out-of-line) function, for the frame base.
    pub phys_die: Option<u64>,
    /// Module name for frames outside the postgres binary.
    pub module: Option<String>,
    /// ELF symbol and offset of pc.
    pub symbol: Option<(String, u64)>,
}

/// What happened after `continue`.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    Stopped,
    TargetGone,
    Terminating,
}

pub struct Session {
    pub pid: i32,
    pub target: Target,
    pub di: Rc<DebugInfo>,
    pub bias: u64,
    pub exe_path: PathBuf,
    pub pg_version: Option<String>,
    pub kind: postgres::ProcessKind,
    modules: Modules,
    pub bps: Breakpoints,
    /// pgdbg's own breakpoints (probes), with a use count.
    internal: std::collections::BTreeMap<u64, u32>,
    frames: Option<Vec<Frame>>,
    selected: usize,
    history: RefCell<Vec<Value>>,
    pub capture: Option<Capture>,
    pub last_stop: Option<Stop>,
    /// How long an inferior call may take before it is abandoned.
    pub call_timeout: std::time::Duration,
    /// At a breakpoint stop: the breakpoints whose condition held, with
    /// their `commands` blocks (taken before a temporary breakpoint is
    /// deleted by its stop).  None: not known, all breakpoints there count.
    hit: Option<Vec<(u32, Vec<Command>)>>,
    /// `--count N` of a script: stop after N breakpoint hits.
    pub hit_limit: Option<u64>,
    /// Breakpoint hits counted against `hit_limit`.
    pub hits_total: u64,
}

/// `plan --next` said once that it waits (and how to end the wait).
static PLAN_NEXT_SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Session {
    pub fn new(
        pid: i32,
        target: Target,
        di: Rc<DebugInfo>,
        exe_path: PathBuf,
        kind: postgres::ProcessKind,
        capture: Option<Capture>,
    ) -> Result<Session> {
        let pg_version = postgres::version_string(di.binary.data);
        let bias = compute_bias(pid, &di)?;
        let mut s = Session {
            pid,
            target,
            di,
            bias,
            exe_path,
            pg_version,
            kind,
            modules: Modules::new(pid, bias),
            bps: Breakpoints::default(),
            internal: std::collections::BTreeMap::new(),
            frames: None,
            selected: 0,
            history: RefCell::new(Vec::new()),
            capture,
            last_stop: Some(Stop::Interrupted),
            call_timeout: std::time::Duration::from_secs(5),
            hit: None,
            hit_limit: None,
            hits_total: 0,
        };
        s.modules.refresh();
        s.emit(
            "attach",
            serde_json::json!({"version": s.pg_version, "binary": s.exe_path.display().to_string(), "build_id": s.di.build_id}),
        );
        Ok(s)
    }

    fn emit(&mut self, event: &str, fields: serde_json::Value) {
        if let Some(c) = &mut self.capture {
            c.event(event, self.pid, fields);
        }
    }

    fn module_for(&self, addr: u64) -> Option<&Module> {
        self.modules.find(addr)
    }

    fn in_main(&self, addr: u64) -> bool {
        self.module_for(addr)
            .is_some_and(|m| m.main && m.bias == self.bias)
    }

    // --------------------------------------------------------- breakpoints

    /// Resolve a location spec to runtime addresses.
    pub fn resolve_location(&self, spec: &str) -> Result<Vec<BpLocation>> {
        resolve(&self.di, self.bias, spec, true)
    }

    pub fn add_breakpoint(
        &mut self,
        spec: &str,
        temporary: bool,
        condition: Option<&str>,
    ) -> Result<String> {
        let locs = self.resolve_location(spec)?;
        if let Some(c) = condition {
            let di = self.di.clone();
            parse::parse_in(c, &di).map_err(|e| anyhow!("condition '{c}': {e}"))?;
        }
        let mut inserted = Vec::new();
        for l in &locs {
            if let Err(e) = self.target.insert_breakpoint(l.addr) {
                for a in inserted {
                    let _ = self.target.remove_breakpoint(a);
                }
                return Err(e);
            }
            inserted.push(l.addr);
        }
        let bp = self.bps.add(
            spec.to_string(),
            locs,
            temporary,
            condition.map(str::to_string),
        );
        let first = &bp.locations[0];
        let where_ = match &first.file_line {
            Some((f, l)) => format!(" ({}:{l})", basename(f)),
            None => String::new(),
        };
        let n = bp.locations.len();
        let inl = bp.locations.iter().filter(|l| l.inlined).count();
        let detail = if inl > 0 {
            format!(", {inl} inlined")
        } else {
            String::new()
        };
        let msg = format!(
            "{} {} at {}{where_}, {n} location{}{detail}{}",
            if temporary {
                "Temporary breakpoint"
            } else {
                "Breakpoint"
            },
            bp.id,
            first.function,
            if n == 1 { "" } else { "s" },
            bp.condition
                .as_deref()
                .map(|c| format!(", stops only if {c}"))
                .unwrap_or_default()
        );
        let id = bp.id;
        let locs_json: Vec<serde_json::Value> = bp
            .locations
            .iter()
            .map(|l| serde_json::json!({"address": format!("{:#x}", l.addr), "function": l.function, "inlined": l.inlined}))
            .collect();
        self.emit(
            "breakpoint",
            serde_json::json!({"id": id, "spec": spec, "locations": locs_json}),
        );
        Ok(msg)
    }

    pub fn delete_breakpoints(&mut self, ids: &[u32]) -> Result<String> {
        let ids: Vec<u32> = if ids.is_empty() {
            self.bps.ids()
        } else {
            ids.to_vec()
        };
        let mut msgs = Vec::new();
        for id in ids {
            match self.bps.remove(id) {
                Some(addrs) => {
                    for a in addrs {
                        self.target.remove_breakpoint(a)?;
                    }
                }
                None => msgs.push(format!("No breakpoint number {id}.")),
            }
        }
        Ok(msgs.join("\n"))
    }

    pub fn info_breakpoints(&self) -> String {
        if self.bps.list.is_empty() {
            return "No breakpoints.".into();
        }
        let mut s = String::from("Num     Type           Disp Enb Address            What\n");
        for b in &self.bps.list {
            let disp = if b.temporary { "del " } else { "keep" };
            if b.locations.len() == 1 {
                let l = &b.locations[0];
                s.push_str(&format!(
                    "{:<7} breakpoint     {disp} y   {:#018x} {}\n",
                    b.id,
                    l.addr,
                    describe_loc(l)
                ));
            } else {
                s.push_str(&format!(
                    "{:<7} breakpoint     {disp} y   <MULTIPLE>         {}\n",
                    b.id, b.spec
                ));
                for (i, l) in b.locations.iter().enumerate() {
                    s.push_str(&format!(
                        "{:<7} {:<22}  y   {:#018x} {}\n",
                        format!("{}.{}", b.id, i + 1),
                        "",
                        l.addr,
                        describe_loc(l)
                    ));
                }
            }
            if let Some(c) = &b.condition {
                s.push_str(&format!("\tstop only if {c}\n"));
            }
            for c in &b.commands_text {
                s.push_str(&format!("\t  {c}\n"));
            }
            if b.hits > 0 {
                s.push_str(&format!(
                    "\tbreakpoint already hit {} time{}\n",
                    b.hits,
                    if b.hits == 1 { "" } else { "s" }
                ));
            }
        }
        s.trim_end().to_string()
    }

    // -------------------------------------------------------------- running

    /// Continue until the next stop.  Handles stepping over the breakpoint
    /// at the current pc.
    pub fn cont(&mut self) -> Result<(RunOutcome, String)> {
        if self.target.is_gone() {
            bail!("the backend is gone; nothing to continue");
        }
        loop {
            self.frames = None;
            self.selected = 0;
            self.hit = None;
            let regs = self.target.regs()?;
            if self.target.breakpoint_inserted(regs.rip)
                && let Some(stop) = self.target.step_over_breakpoint(regs.rip)?
            {
                return self.report_stop(stop);
            }
            let stop = self.target.cont_and_wait(&guard::Hooks)?;
            if let Stop::Breakpoint { addr } = stop
                && self.bps.uses(addr)
            {
                self.last_stop = Some(stop.clone());
                let (passing, note) = self.conditions_at(addr);
                if passing.is_empty() {
                    // No condition held: not a stop, unless Ctrl-C or a
                    // deadline came meanwhile (its interrupt may have lost
                    // the race against this hit and been dropped).
                    if guard::sigint_seen() || guard::deadline_hit() {
                        guard::take_interrupt();
                        return self.report_stop(Stop::Interrupted);
                    }
                    continue;
                }
                self.set_passing(passing);
                let (o, text) = self.report_stop(stop)?;
                return Ok((o, format!("{text}{note}")));
            }
            return self.report_stop(stop);
        }
    }

    /// Record the breakpoints hit at this stop and their commands.
    fn set_passing(&mut self, passing: Vec<u32>) {
        self.hit = Some(
            self.bps
                .list
                .iter()
                .filter(|b| passing.contains(&b.id))
                .map(|b| (b.id, b.commands.clone()))
                .collect(),
        );
    }

    /// The breakpoints at `addr` whose condition holds (or that have none);
    /// a condition that cannot be evaluated counts as held, with a note
    /// (as gdb does).
    fn conditions_at(&mut self, addr: u64) -> (Vec<u32>, String) {
        let bps: Vec<(u32, Option<String>)> = self
            .bps
            .at(addr)
            .iter()
            .map(|b| (b.id, b.condition.clone()))
            .collect();
        let mut passing = Vec::new();
        let mut note = String::new();
        if bps.iter().any(|(_, c)| c.is_some()) {
            // a condition is evaluated in frame 0: unwinding the innermost
            // function is enough (not a whole backtrace at every hit)
            self.selected = 0;
            self.frames = self.top_frames().ok();
        }
        for (id, cond) in bps {
            let Some(c) = cond else {
                passing.push(id);
                continue;
            };
            match self
                .eval_expr(&c)
                .and_then(|v| Ok(scalar(self, &v)?.truthy()))
            {
                Ok(true) => passing.push(id),
                Ok(false) => {}
                Err(e) => {
                    note.push_str(&format!(
                        "\nError in testing condition for breakpoint {id}: {e}"
                    ));
                    passing.push(id);
                }
            }
        }
        self.frames = None;
        self.selected = 0;
        (passing, note)
    }

    /// Evaluate an expression in the selected frame of the current stop.
    pub fn eval_expr(&mut self, expr: &str) -> Result<Value> {
        let di = self.di.clone();
        let e = parse::parse_in(expr, &di)?;
        if self.target.is_gone() {
            bail!("the backend is gone");
        }
        let _ = self.frames()?;
        eval(self, &e)
    }

    /// `continue` in a script or at the prompt: run until a stop; at a
    /// breakpoint with a `commands` block, run the block, and go on while
    /// it ends with `continue`.
    fn continue_running(&mut self) -> Result<(String, Flow)> {
        // Breakpoints that are passed over without stopping the user (a
        // condition, a block ending in `continue`) may be hit thousands of
        // times a second: run on the backend's CPU meanwhile, as probes do.
        let busy = self
            .bps
            .list
            .iter()
            .any(|b| b.condition.is_some() || b.commands.last() == Some(&Command::Continue));
        let pinned = if busy && std::env::var_os("PGDBG_NO_PIN").is_none() {
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

    fn continue_loop(&mut self) -> Result<(String, Flow)> {
        loop {
            let (outcome, text) = self.cont()?;
            match outcome {
                RunOutcome::Stopped => {}
                RunOutcome::TargetGone => return Ok((text, Flow::TargetGone)),
                RunOutcome::Terminating => return Ok((text, Flow::Terminate)),
            }
            let Some(hit) = self.hit.take() else {
                // not a breakpoint: an interrupt (Ctrl-C, --for) or a signal
                if guard::deadline_hit() {
                    return Ok((String::new(), Flow::Continue));
                }
                return Ok((text, Flow::Continue));
            };
            self.hits_total += 1;
            let limit_hit = self.hit_limit.is_some_and(|n| self.hits_total >= n);
            let ids: Vec<u32> = hit.iter().map(|(id, _)| *id).collect();
            let body: Vec<Command> = hit.into_iter().flat_map(|(_, c)| c).collect();
            if body.is_empty() {
                return Ok((text, Flow::Continue));
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
                        Ok((t, flow)) => {
                            if !t.is_empty() {
                                self.say(t.strip_prefix('\n').unwrap_or(&t));
                            }
                            if flow != Flow::Continue {
                                return Ok((String::new(), flow));
                            }
                        }
                        Err(e) => {
                            let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
                            self.say(&format!(
                                "Error in commands of breakpoint {}: {}",
                                ids.join(", "),
                                e.to_string().replace('\n', " ")
                            ));
                            break;
                        }
                    },
                }
            }
            if !resume || limit_hit || guard::deadline_hit() {
                return Ok((String::new(), Flow::Continue));
            }
            if guard::sigint_seen() {
                // Ctrl-C while the block ran (or its interrupt lost the
                // race against this hit): stop here, and say where
                guard::take_interrupt();
                return Ok((self.interrupted_text()?, Flow::Continue));
            }
        }
    }

    /// `printf "FORMAT", EXPR...`
    pub fn printf(&mut self, format: &str, args: &[String]) -> Result<String> {
        let mut values = Vec::new();
        for a in args {
            values.push(self.eval_expr(a)?);
        }
        let text = crate::expr::printf::printf(self, format, &values)?;
        self.emit("printf", serde_json::json!({"text": text}));
        // output is line based: the format's own final newline ends the
        // line; the leading newline (which every caller strips) keeps a
        // text that is only "\n", or starts with one, from being lost
        if text.is_empty() {
            return Ok(text);
        }
        Ok(format!("\n{}", text.strip_suffix('\n').unwrap_or(&text)))
    }

    /// What an interrupted stop shows: the frame where the backend is.
    fn interrupted_text(&mut self) -> Result<String> {
        let head = self.frame_line(0, true)?;
        self.emit("stop", serde_json::json!({"reason": "interrupted"}));
        Ok(format!(
            "\nProgram stopped (interrupted; the backend got no signal).\n{head}"
        ))
    }

    fn report_stop(&mut self, stop: Stop) -> Result<(RunOutcome, String)> {
        self.last_stop = Some(stop.clone());
        self.frames = None;
        self.selected = 0;
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
                self.emit(
                    "stop",
                    serde_json::json!({
                        "reason": "breakpoint",
                        "breakpoints": ids,
                        "address": format!("{addr:#x}"),
                        "function": frame.as_ref().and_then(|f| f.function.clone()),
                        "file": frame.as_ref().and_then(|f| f.file.as_deref().map(basename)),
                        "line": frame.as_ref().and_then(|f| f.line),
                    }),
                );
                let label = if temp.is_empty() {
                    "Breakpoint"
                } else {
                    "Temporary breakpoint"
                };
                if !temp.is_empty() {
                    self.delete_breakpoints(&temp)?;
                }
                let ids_s: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
                Ok((
                    RunOutcome::Stopped,
                    format!("\n{label} {}, {head}{src}", ids_s.join(", ")),
                ))
            }
            Stop::Interrupted => Ok((RunOutcome::Stopped, self.interrupted_text()?)),
            Stop::Signal(sig) => {
                let head = self.frame_line(0, true).unwrap_or_default();
                self.emit(
                    "stop",
                    serde_json::json!({"reason": "signal", "signal": format!("{sig:?}")}),
                );
                Ok((
                    RunOutcome::Stopped,
                    format!(
                        "\nProgram received signal {sig:?}; it will be delivered when you continue or detach.\n{head}"
                    ),
                ))
            }
            Stop::HardwareBreak { dr6 } => Ok((
                RunOutcome::Stopped,
                format!("\nHardware breakpoint (dr6={dr6:#x})"),
            )),
            Stop::Exited(code) => {
                self.emit("exit", serde_json::json!({"status": code}));
                Ok((
                    RunOutcome::TargetGone,
                    format!("\nBackend {} exited with status {code}.", self.pid),
                ))
            }
            Stop::Killed(sig) => {
                self.emit("exit", serde_json::json!({"signal": format!("{sig:?}")}));
                Ok((
                    RunOutcome::TargetGone,
                    format!("\nBackend {} was killed by signal {sig:?}.", self.pid),
                ))
            }
            Stop::ToolTerminating => Ok((RunOutcome::Terminating, String::new())),
        }
    }

    // ------------------------------------------------------------- probes

    /// With a layout pack instead of DWARF: check it against live data
    /// (`MyProc->pid` must be this PID) before trusting any answer.
    pub fn check_pack(&self) -> Result<()> {
        let Some(pack) = &self.di.pack else {
            return Ok(());
        };
        let l = crate::debuginfo::layout::Layout::of(&*self.di, "PGPROC")?;
        let (myproc, _) = self.di.global("MyProc").ok_or_else(|| {
            anyhow!("MyProc is not exported by this binary: the layout pack cannot be checked")
        })?;
        let p = self.target.read_u64(myproc + self.bias)?;
        let mut b = [0u8; 4];
        self.target.read(p + l.offset("pid")?, &mut b)?;
        let got = i32::from_le_bytes(b);
        if got != self.pid {
            bail!(
                "the layout pack for PostgreSQL {} does not match this binary (MyProc->pid reads {got}, expected {}): give the pack of this exact major with --symbols, or the debug info",
                pack.major,
                self.pid
            );
        }
        Ok(())
    }

    /// Arm one of pgdbg's own breakpoints (used by probes such as
    /// `plancache`); counted, so nested users share an address.
    pub fn arm_internal(&mut self, addr: u64) -> Result<()> {
        let n = self.internal.entry(addr).or_insert(0);
        if *n == 0 {
            self.target.insert_breakpoint(addr)?;
        }
        *n += 1;
        Ok(())
    }

    pub fn disarm_internal(&mut self, addr: u64) -> Result<()> {
        if let Some(n) = self.internal.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                self.internal.remove(&addr);
                if !self.bps.uses(addr) {
                    self.target.remove_breakpoint(addr)?;
                }
            }
        }
        Ok(())
    }

    pub fn is_internal(&self, addr: u64) -> bool {
        self.internal.contains_key(&addr)
    }

    fn disarm_all_internal(&mut self) -> Result<()> {
        let addrs: Vec<u64> = self.internal.keys().copied().collect();
        self.internal.clear();
        for a in addrs {
            if !self.bps.uses(a) {
                self.target.remove_breakpoint(a)?;
            }
        }
        Ok(())
    }

    /// Arm a 4-byte write watchpoint (debug register slot 0) at `addr`.
    pub fn watch_word(&mut self, addr: u64) -> Result<()> {
        self.target.set_write_watchpoint(0, addr, 4)
    }

    /// Physical frames as `function+offset` (ELF symbols only, no DWARF):
    /// cheap enough to take at every traced wait.
    pub fn quick_stack(&mut self, n: usize) -> Vec<String> {
        let Ok(regs) = self.target.regs() else {
            return Vec::new();
        };
        let mut cur = FrameRegs::from_regs(&regs);
        let mut out = Vec::new();
        for i in 0..n {
            let pc = cur.pc();
            if pc == 0 {
                break;
            }
            let lookup = if i == 0 { pc } else { pc - 1 };
            self.modules.cover(lookup);
            let Some(m) = self.module_for(lookup) else {
                out.push(format!("{pc:#x}"));
                break;
            };
            let name = if m.bias == self.bias {
                self.di
                    .symbol_at(lookup - self.bias)
                    .map(|(s, off)| format!("{}+{}", s.name, off + (pc - lookup)))
            } else {
                m.symbol(lookup)
                    .map(|(s, off)| format!("{s}+{}", off + (pc - lookup)))
            };
            out.push(name.unwrap_or_else(|| format!("{pc:#x}")));
            match self.unwind_one(&cur, lookup) {
                Some(caller) => cur = caller,
                None => break,
            }
        }
        out
    }

    /// The caller's registers of a physical frame (CFI only), or None at
    /// the outermost frame.
    fn unwind_one(&self, cur: &FrameRegs, lookup: u64) -> Option<FrameRegs> {
        let m = self.module_for(lookup)?;
        let tables = if m.bias == self.bias {
            Some(&self.di.main_unwind)
        } else {
            m.tables()
        };
        let target = &self.target;
        let read_u64 = |a: u64| target.read_u64(a).ok();
        let (caller, _) = tables?.step(cur, lookup - m.bias, &read_u64)?;
        (caller.pc() != 0 && caller.sp() > cur.sp()).then_some(caller)
    }

    /// Where the physical function of the current stop returns to: (return
    /// address, stack pointer after the return, i.e. its CFA).  While the
    /// function runs, the stack pointer stays below that.
    pub fn return_point(&self) -> Option<(u64, u64)> {
        let regs = self.target.regs().ok()?;
        let cur = FrameRegs::from_regs(&regs);
        let caller = self.unwind_one(&cur, cur.pc())?;
        // only ever a code address of a mapped module gets an int3
        self.module_for(caller.pc())?;
        Some((caller.pc(), caller.sp()))
    }

    /// Frames of the current stop with the innermost frame of `function`
    /// selected (an inlined callee starting at the same address is skipped).
    /// Only the innermost few frames are unwound (probes run this at every
    /// hit).
    pub fn select_function_frame(&mut self, function: &str) -> Result<()> {
        let frames = self.unwind(4)?;
        let i = frames
            .iter()
            .position(|f| f.function.as_deref() == Some(function))
            .unwrap_or(0);
        self.frames = Some(frames);
        self.selected = i;
        Ok(())
    }

    /// Several target memory ranges in one system call.
    pub fn read_many(&self, ranges: &mut [(u64, &mut [u8])]) -> Result<()> {
        self.target.read_many(ranges)
    }

    /// Registers at the current stop.
    pub fn registers(&self) -> Result<crate::target::Registers> {
        self.target.regs()
    }

    /// Write a line of probe output now (not buffered until the command ends).
    pub fn say(&mut self, line: &str) {
        guard::out_line(line);
    }

    pub fn emit_event(&mut self, event: &str, fields: serde_json::Value) {
        self.emit(event, fields);
    }

    /// Run the target, calling `h` at each stop on an internal breakpoint,
    /// until `h` is done, `limit` passes, Ctrl-C, a user breakpoint, or the
    /// target's end.  Internal breakpoints are all removed afterwards.
    pub fn run_probes(
        &mut self,
        h: &mut dyn ProbeHandler,
        limit: Option<std::time::Duration>,
    ) -> Result<(ProbeEnd, String)> {
        let deadline = limit.map(guard::Deadline::arm);
        // Run on the backend's CPU while probing: a stopped backend and
        // pgdbg never compete for it, and every stop/resume becomes a local
        // context switch instead of a cross-CPU wake-up (about 5x cheaper
        // per stop on the 2-CPU machines measured; PGDBG_NO_PIN=1 disables).
        // A polling probe (the in-process recorder) stops the backend only
        // 50 times a second: its work is better done on another CPU.
        let pinned = if std::env::var_os("PGDBG_NO_PIN").is_none() && h.poll_every().is_none() {
            procfs::last_cpu(self.pid).and_then(procfs::pin_to_cpu)
        } else {
            None
        };
        let res = self.probe_loop(h);
        if let Some(old) = &pinned {
            procfs::restore_affinity(old);
        }
        drop(deadline);
        let cleanup = if self.target.is_gone() {
            self.internal.clear();
            Ok(())
        } else {
            // both, even when the first fails
            let a = self.disarm_all_internal();
            let b = self.target.clear_watchpoints();
            a.and(b)
        };
        // frames a probe cached (a few, for its arguments) are not the stop's
        self.frames = None;
        self.selected = 0;
        let r = res?;
        cleanup?;
        Ok(r)
    }

    fn probe_loop(&mut self, h: &mut dyn ProbeHandler) -> Result<(ProbeEnd, String)> {
        self.frames = None;
        let ticker = h.poll_every().map(guard::Ticker::start);
        let poll_hooks = guard::PollHooks::default();
        let hooks: &dyn crate::target::WaitHooks = if ticker.is_some() {
            &poll_hooks
        } else {
            &guard::Hooks
        };
        // resumed already (after a poll), the next stop is only waited for
        let mut running = false;
        loop {
            self.hit = None;
            let stop = if running {
                running = false;
                if h.done() || guard::deadline_hit() {
                    self.target.interrupt()?;
                }
                self.target.wait(hooks)?
            } else {
                if h.done() {
                    return Ok((ProbeEnd::Done, String::new()));
                }
                if guard::deadline_hit() {
                    return Ok((ProbeEnd::Deadline, String::new()));
                }
                if guard::sigint_seen() {
                    // Ctrl-C whose interrupt lost the race against a hit
                    guard::take_interrupt();
                    let (_, text) = self.report_stop(Stop::Interrupted)?;
                    return Ok((ProbeEnd::Stopped, text));
                }
                if let Some(gone) = self.step_over_here()? {
                    return Ok(gone);
                }
                self.target.cont_and_wait(hooks)?
            };
            match stop {
                Stop::Interrupted
                    if ticker.is_some() && !poll_hooks.user.get() && !guard::deadline_hit() =>
                {
                    self.last_stop = Some(stop);
                    h.on_poll(self)?;
                    if h.done() {
                        continue;
                    }
                    if let Some(gone) = self.step_over_here()? {
                        return Ok(gone);
                    }
                    self.target.resume()?;
                    running = true;
                    if let Err(e) = h.after_poll(self) {
                        // callers expect a stopped target
                        let _ = self.target.ensure_stopped();
                        return Err(e);
                    }
                }
                Stop::Breakpoint { addr }
                    if self.internal.contains_key(&addr) && !self.bps.uses(addr) =>
                {
                    self.last_stop = Some(stop);
                    self.frames = None;
                    h.on_stop(self, addr)?;
                }
                Stop::HardwareBreak { dr6 } => {
                    self.last_stop = Some(stop);
                    self.frames = None;
                    h.on_watch(self, dr6)?;
                }
                Stop::Interrupted if guard::deadline_hit() => {
                    self.last_stop = Some(stop);
                    return Ok((ProbeEnd::Deadline, String::new()));
                }
                Stop::Breakpoint { addr } if self.bps.uses(addr) => {
                    // a user breakpoint ends the probe only if its condition holds
                    self.last_stop = Some(stop.clone());
                    self.frames = None;
                    let (passing, note) = self.conditions_at(addr);
                    if passing.is_empty() {
                        if self.internal.contains_key(&addr) {
                            h.on_stop(self, addr)?;
                        }
                        continue;
                    }
                    self.set_passing(passing);
                    let (_, text) = self.report_stop(stop)?;
                    return Ok((ProbeEnd::Stopped, format!("{text}{note}")));
                }
                other => {
                    let (outcome, text) = self.report_stop(other)?;
                    let end = match outcome {
                        RunOutcome::Stopped => ProbeEnd::Stopped,
                        RunOutcome::TargetGone => ProbeEnd::TargetGone,
                        RunOutcome::Terminating => ProbeEnd::Terminating,
                    };
                    return Ok((end, text));
                }
            }
        }
    }

    /// Step over the breakpoint rip sits on, if any, before resuming; the
    /// probe's end if the target died meanwhile.
    fn step_over_here(&mut self) -> Result<Option<(ProbeEnd, String)>> {
        let rip = self.target.regs()?.rip;
        if self.target.breakpoint_inserted(rip)
            && let Some(stop) = self.target.step_over_breakpoint(rip)?
        {
            let (_, text) = self.report_stop(stop)?;
            return Ok(Some((ProbeEnd::TargetGone, text)));
        }
        Ok(None)
    }

    /// `call FUNC(ARGS)`: run a function inside the backend, gdb style.
    fn call_function(&mut self, text: &str) -> Result<String> {
        use crate::expr::eval::Scalar;
        use crate::infcall::Arg;
        use crate::postgres::call::{
            BackendCalls, Called, Given, HARMLESS_IN_ANY_TRANSACTION, Prepared,
        };
        let open = text
            .find('(')
            .ok_or_else(|| anyhow!("call needs FUNC(ARGS)"))?;
        let name = text[..open].trim();
        let inner = text[open + 1..text.len() - 1].trim();
        let addr = crate::postgres::call::function_address(self, name)?;
        let _ = self.frames()?;
        // Values now; string literals are copied into the backend once the
        // call frame exists.
        let mut given = Vec::new();
        for a in crate::command::split_args(inner) {
            let di = self.di.clone();
            let is_type = |n: &str| di.type_by_name(n).is_some();
            let e = parse::parse(&a, &is_type)?;
            if let crate::expr::parse::Expr::Str(text) = e {
                given.push(Given::Str(text));
                continue;
            }
            let v = eval(self, &e)?;
            let is_ptr = matches!(
                &*crate::debuginfo::types::strip(&*self.di, &v.ty),
                crate::debuginfo::types::Type::Pointer { .. }
                    | crate::debuginfo::types::Type::Array { .. }
                    | crate::debuginfo::types::Type::Function { .. }
            );
            given.push(match crate::expr::eval::scalar(self, &v)? {
                Scalar::F(f) => Given::Float(f),
                Scalar::I(i) if is_ptr => Given::Ptr(i as u64),
                Scalar::U(u) if is_ptr => Given::Ptr(u),
                Scalar::I(i) => Given::Int(i as u64),
                Scalar::U(u) => Given::Int(u),
            });
        }
        // count and types against the DWARF prototype, before anything is
        // changed in the backend
        let specs = crate::postgres::call::prepare_args(self, name, given)?;
        crate::postgres::call::check_outside_transaction(self, name)?;
        let ret_ty = self
            .di
            .function_locations(name)
            .iter()
            .find(|l| !l.inlined && l.die != 0)
            .and_then(|l| self.di.die_type(l.die));
        let timeout = self.call_timeout;
        // Functions harmless in any transaction state skip that check (an
        // aborted transaction refuses every other call).
        let mut calls = if HARMLESS_IN_ANY_TRANSACTION.contains(&name) {
            BackendCalls::open_harmless(self, timeout)?
        } else {
            BackendCalls::open(self, timeout, false)?
        };
        let mut args = Vec::new();
        for sp in specs {
            args.push(match sp {
                Prepared::Arg(a) => a,
                Prepared::Str(text) => Arg::Int(calls.push_cstr(&text)?),
            });
        }
        let res = calls.call_addr(addr, &args);
        let close = calls.close();
        let res = res?;
        close?;
        self.frames = None;
        let r = match res {
            Called::Value(r) => r,
            Called::Error(e) => {
                self.emit("call", serde_json::json!({"function": name, "error": e}));
                bail!(
                    "ERROR inside the backend: {e} (the call was unwound; the backend's state is restored)"
                )
            }
        };
        let Some(ty) = ret_ty else {
            return Ok(String::new()); // void
        };
        let is_float = matches!(
            &*crate::debuginfo::types::strip(&*self.di, &ty),
            crate::debuginfo::types::Type::Base {
                enc: crate::debuginfo::types::Encoding::Float,
                ..
            }
        );
        let bytes = if is_float {
            r.xmm0.to_le_bytes()
        } else {
            r.rax.to_le_bytes()
        };
        let size = size_of(&*self.di, &ty).clamp(1, 8) as usize;
        let v = Value {
            ty,
            loc: ValLoc::Bytes(bytes[..size].to_vec()),
        };
        let text = format_value(self, &v, Radix::Natural);
        let json = to_json(self, &v);
        self.history.borrow_mut().push(v);
        let n = self.history.borrow().len();
        self.emit(
            "call",
            serde_json::json!({"function": name, "value": json, "text": text}),
        );
        Ok(format!("${n} = {text}"))
    }

    /// `plan`: EXPLAIN the running query (or, with --next, the next one).
    fn plan(
        &mut self,
        next: bool,
        opts: &crate::postgres::explain::ExplainOpts,
    ) -> Result<(String, Flow)> {
        use crate::postgres::explain;
        // a parallel worker stopped at its executor's entry (a breakpoint)
        // can show its part of the plan; otherwise it names its leader
        let at_entry = !next && self.query_desc_at_executor_entry()?.is_some();
        self.plan_applies(at_entry)?;
        if next && !PLAN_NEXT_SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
            crate::errln!(
                "plan --next: waiting for the next statement of backend {} to start (Ctrl-C ends the wait)",
                self.pid
            );
        }
        let (qd, nested) = if next {
            let entries: Vec<u64> = self
                .di
                .function_locations("standard_ExecutorRun")
                .iter()
                .filter(|l| !l.inlined)
                .map(|l| l.addr + self.bias)
                .collect();
            if entries.is_empty() {
                bail!("standard_ExecutorRun is not in this binary");
            }
            for &a in &entries {
                self.arm_internal(a)?;
            }
            let mut probe = OneStop::default();
            let (end, text) = self.run_probes(&mut probe, None)?;
            match end {
                ProbeEnd::Done => {}
                ProbeEnd::TargetGone => return Ok((text, Flow::TargetGone)),
                ProbeEnd::Terminating => return Ok((String::new(), Flow::Terminate)),
                _ => {
                    return Ok((
                        format!("plan --next: stopped before a statement started{text}"),
                        Flow::Continue,
                    ));
                }
            }
            let qd = self.target.regs()?.rdi;
            let nested = explain::active_query_desc(self)?
                .map(|(_, a)| a != qd)
                .unwrap_or(true);
            (qd, nested)
        } else if let Some(qd) = self.query_desc_at_executor_entry()? {
            // stopped by a breakpoint at standard_ExecutorRun (e.g. a
            // `commands` block): explain the statement it is about to run
            let nested = explain::active_query_desc(self)?
                .map(|(_, a)| a != qd)
                .unwrap_or(true);
            (qd, nested)
        } else {
            let (portal_qd, qd) = self.safe_running_query()?;
            let nested = !portal_qd
                || self
                    .frames()?
                    .iter()
                    .filter(|f| f.function.as_deref() == Some("standard_ExecutorRun"))
                    .count()
                    > 1;
            (qd, nested)
        };
        let query = explain::source_text(self, qd);
        let timeout = self.call_timeout;
        let text = explain::explain(self, qd, opts, timeout)?;
        self.frames = None;
        self.emit(
            "plan",
            serde_json::json!({"query": query, "format": opts.format, "text": text, "nested": nested}),
        );
        let head = if nested {
            format!("-- nested statement (SPI/plpgsql): {}\n", one_line(&query))
        } else {
            format!("-- {}\n", one_line(&query))
        };
        Ok((format!("{head}{text}"), Flow::Continue))
    }

    /// At the entry of standard_ExecutorRun/Finish/End (a breakpoint stop):
    /// their first argument, the QueryDesc with its plan state built.
    fn query_desc_at_executor_entry(&mut self) -> Result<Option<u64>> {
        let Some(Stop::Breakpoint { addr }) = self.last_stop else {
            return Ok(None);
        };
        let at_entry = [
            "standard_ExecutorRun",
            "standard_ExecutorFinish",
            "standard_ExecutorEnd",
        ]
        .iter()
        .flat_map(|f| self.di.function_locations(f))
        .any(|l| !l.inlined && l.addr + self.bias == addr);
        Ok(if at_entry {
            Some(self.target.regs()?.rdi)
        } else {
            None
        })
    }

    /// `plan` on a process that never runs a query of its own: one line
    /// saying what it is and where to look instead.
    fn plan_applies(&mut self, at_executor_entry: bool) -> Result<()> {
        if let Some(role) = self.kind.never_runs_queries() {
            bail!(
                "process {} is the {role}, which never runs queries: plan has nothing to show there; attach to a client backend (select pid, query from pg_stat_activity)",
                self.pid
            );
        }
        if self.kind.is_parallel_worker() && !at_executor_entry {
            let leader = crate::postgres::parallel_leader_from_title(self.pid).or_else(|| {
                let (a, _) = self.di.global("ParallelLeaderPid")?;
                let mut b = [0u8; 4];
                self.target.read(a + self.bias, &mut b).ok()?;
                Some(i32::from_le_bytes(b)).filter(|p| *p > 0)
            });
            match leader {
                Some(l) => bail!(
                    "process {} is a parallel worker of leader PID {l}: it runs part of the leader's plan; attach to the leader for the whole plan (pgdbg attach {l} --ex plan)",
                    self.pid
                ),
                None => bail!(
                    "process {} is a parallel worker: it runs part of its leader's plan; attach to the leader for the whole plan (pg_stat_activity.leader_pid)",
                    self.pid
                ),
            }
        }
        Ok(())
    }

    /// The statement the backend runs: (whether it is the active portal's,
    /// its QueryDesc), or why there is none (and whether waiting a little
    /// may find one: a utility statement such as DO or CALL between its
    /// nested statements).
    fn running_query_desc(&mut self) -> Result<std::result::Result<(bool, u64), (String, bool)>> {
        use crate::postgres::explain;
        if let Some((_, qd)) = explain::active_query_desc(self)? {
            return Ok(Ok((true, qd)));
        }
        // no QueryDesc in the portal: a utility statement (DO, CALL, ...)
        // may be running a nested statement through SPI; its QueryDesc is
        // the executor's argument on the stack
        let frames = self.frames()?.clone();
        let mut unreadable = None;
        for f in &frames {
            let func = f.function.as_deref().unwrap_or("");
            if !["standard_ExecutorRun", "ExecutorRun", "_SPI_pquery"].contains(&func) {
                continue;
            }
            let vars = self.frame_vars(f);
            let Some(v) = vars.iter().find(|v| v.is_param && v.name == "queryDesc") else {
                continue;
            };
            let val = self.var_value(f, v);
            match crate::expr::eval::scalar(self, &val) {
                Ok(sc) if sc.as_i64() != 0 => return Ok(Ok((false, sc.as_i64() as u64))),
                Ok(_) => {}
                Err(_) => {
                    unreadable.get_or_insert((f.level, func.to_string()));
                }
            }
        }
        if let Some((level, func)) = unreadable {
            return Ok(Err((
                format!(
                    "backend {} runs a nested statement (frame #{level}, {func}) whose queryDesc the debug info cannot locate at this point (optimized out): use plan --next to catch the next nested statement",
                    self.pid
                ),
                true,
            )));
        }
        let portal = self
            .di
            .global("ActivePortal")
            .and_then(|(a, _)| {
                let mut b = [0u8; 8];
                self.target.read(a + self.bias, &mut b).ok()?;
                Some(u64::from_le_bytes(b))
            })
            .unwrap_or(0);
        if portal != 0 {
            let text = self
                .di
                .global("debug_query_string")
                .and_then(|(a, _)| {
                    let mut b = [0u8; 8];
                    self.target.read(a + self.bias, &mut b).ok()?;
                    let p = u64::from_le_bytes(b);
                    if p == 0 {
                        return None;
                    }
                    let (t, _) = self.target.read_cstr(p, 200).ok()?;
                    Some(String::from_utf8_lossy(&t).into_owned())
                })
                .map(|t| format!(" ({})", one_line(&t)))
                .unwrap_or_default();
            return Ok(Err((
                format!(
                    "backend {} runs a utility statement{text}, which has no plan of its own, and no nested statement is executing at this moment (a DO block or procedure between statements): use plan --next to catch its next nested statement",
                    self.pid
                ),
                true,
            )));
        }
        Ok(Err((
            format!(
                "backend {} is not running a query (no active portal): use plan --next to catch the next one",
                self.pid
            ),
            false,
        )))
    }

    /// Interrupt the running query at a point where calling into the
    /// backend is safe (retrying a few times); returns (whether the
    /// statement is the active portal's, its queryDesc).
    fn safe_running_query(&mut self) -> Result<(bool, u64)> {
        use crate::postgres::call;
        for attempt in 0..200 {
            self.frames = None;
            match self.running_query_desc()? {
                Err((why, retry)) if !retry || attempt == 199 => bail!("{why}"),
                Err(_) => {}
                Ok(found) => match call::unsafe_reason(self)? {
                    None => return Ok(found),
                    Some(why) if attempt == 199 => {
                        bail!("no safe point found in the running query: {why}")
                    }
                    Some(_) => {}
                },
            }
            // let it run a little, then look again
            let deadline = guard::Deadline::arm(std::time::Duration::from_millis(2 + attempt % 7));
            let regs = self.target.regs()?;
            if self.target.breakpoint_inserted(regs.rip) {
                self.target.step_over_breakpoint(regs.rip)?;
            }
            let stop = self.target.cont_and_wait(&guard::Hooks)?;
            drop(deadline);
            match stop {
                Stop::Interrupted | Stop::Breakpoint { .. } => {}
                other => {
                    let (_, text) = self.report_stop(other)?;
                    bail!("the backend stopped while looking for a safe point:{text}");
                }
            }
        }
        unreachable!()
    }

    /// `wait`: the wait event now.
    fn wait_now(&mut self) -> Result<String> {
        use crate::postgres::waits::{WaitNames, read_word, word_address};
        let addr = word_address(self)?;
        let info = read_word(self, addr)?;
        let mut names = WaitNames::load(&self.di.build_id);
        let mut note = String::new();
        if info != 0
            && !names.map.contains_key(&info)
            && let Some(e) = names.try_resolve(self, &[info])
        {
            note = format!(" (name not resolved: {e})");
        }
        self.frames = None;
        self.emit(
            "wait_now",
            serde_json::Value::Object(names.event_fields(info)),
        );
        Ok(format!("{}  [{info:#010x}]{note}", names.label(info)))
    }

    /// `waits sample`: let the backend run and sample its wait-event word.
    fn waits_sample(
        &mut self,
        hz: f64,
        duration: Option<std::time::Duration>,
    ) -> Result<(String, Flow)> {
        use crate::postgres::waits::{Sampler, WaitNames, word_address};
        let addr = word_address(self)?;
        self.say(&format!(
            "waits: sampling backend {} at {hz} Hz{}",
            self.pid,
            match duration {
                Some(d) => format!(" for {:.1}s", d.as_secs_f64()),
                None => "; Ctrl-C stops".into(),
            }
        ));
        let t0 = std::time::Instant::now();
        let sampler = Sampler::start(self.pid, addr, hz);
        let mut probe = NoStop;
        let res = self.run_probes(&mut probe, duration);
        let (counts, total) = sampler.finish();
        let elapsed = t0.elapsed().as_secs_f64();
        let (end, text) = res?;
        let flow = match end {
            ProbeEnd::TargetGone => Flow::TargetGone,
            ProbeEnd::Terminating => Flow::Terminate,
            _ => Flow::Continue,
        };
        let mut names = WaitNames::load(&self.di.build_id);
        let keys: Vec<u32> = counts.keys().copied().collect();
        let mut note = String::new();
        if flow == Flow::Continue
            && let Some(e) = names.try_resolve(self, &keys)
        {
            note = format!("\n(names not resolved here: {e})");
        }
        self.frames = None;
        let mut rows: Vec<(u32, u64)> = counts.into_iter().collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut out = format!(
            "{:<16} {:<32} {:>9} {:>7}\n",
            "wait_event_type", "wait_event", "samples", "share"
        );
        let mut profile = Vec::new();
        for (info, n) in &rows {
            let (t, e) = names.describe(*info);
            let share = if total > 0 {
                *n as f64 * 100.0 / total as f64
            } else {
                0.0
            };
            out.push_str(&format!(
                "{:<16} {:<32} {:>9} {:>6.1}%\n",
                t.clone().unwrap_or_else(|| if *info == 0 {
                    "(on CPU)".into()
                } else {
                    "unresolved".into()
                }),
                e.clone().unwrap_or_default(),
                n,
                share
            ));
            let mut m = names.event_fields(*info);
            m.insert("samples".into(), (*n).into());
            m.insert("share".into(), (share / 100.0).into());
            profile.push(serde_json::Value::Object(m));
        }
        out.push_str(&format!(
            "{total} samples in {elapsed:.1}s ({:.0}/s){note}{text}",
            total as f64 / elapsed.max(1e-9)
        ));
        self.emit(
            "wait_samples",
            serde_json::json!({"hz": hz, "duration_s": elapsed, "samples": total, "profile": profile}),
        );
        Ok((out, flow))
    }

    /// `waits trace`: every wait, via a hardware watchpoint on the word.
    fn waits_trace(
        &mut self,
        duration: Option<std::time::Duration>,
        stacks: usize,
        quiet: bool,
    ) -> Result<(String, Flow)> {
        use crate::postgres::waits::TraceProbe;
        let mut probe = TraceProbe::new(self, stacks, quiet)?;
        self.say(&format!(
            "waits: tracing backend {} (hardware watchpoint on its wait-event word){}",
            self.pid,
            match duration {
                Some(d) => format!(" for {:.1}s", d.as_secs_f64()),
                None => "; Ctrl-C stops".into(),
            }
        ));
        // run_probes disarms the breakpoints and clears the debug registers
        let res = self.run_probes(&mut probe, duration);
        let (end, text) = res?;
        let flow = match end {
            ProbeEnd::TargetGone => Flow::TargetGone,
            ProbeEnd::Terminating => Flow::Terminate,
            _ => Flow::Continue,
        };
        if flow == Flow::Continue {
            probe.close(self);
        } else if flow == Flow::Terminate {
            probe.abandon(self);
        }
        self.frames = None;
        Ok((format!("{}{text}", probe.summary()), flow))
    }

    /// `plancache`: report plan choices until a limit, Ctrl-C or a stop.
    fn plancache(
        &mut self,
        duration: Option<std::time::Duration>,
        count: Option<u64>,
        fast: Option<crate::command::Fast>,
    ) -> Result<(String, Flow)> {
        use crate::command::Fast;
        use crate::postgres::plancache::{PlanCacheLayouts, PlanCacheProbe};
        let layouts = PlanCacheLayouts::new(self)?;
        let mut probe = PlanCacheProbe::new(
            layouts,
            count,
            fast.is_some(),
            fast == Some(Fast::InProcess),
        )?;
        probe.arm(self)?;
        let limit = match (duration, count) {
            (Some(d), _) => format!(" for {:.1}s", d.as_secs_f64()),
            (None, Some(n)) => format!(" for {n} decisions"),
            _ => "; Ctrl-C stops".into(),
        };
        let how = if probe.in_process() {
            " (recorded in-process, no stops)"
        } else {
            ""
        };
        self.say(&format!(
            "plancache: watching the plan cache of backend {}{limit}{how}",
            self.pid
        ));
        let t0 = std::time::Instant::now();
        let res = self.run_probes(&mut probe, duration);
        // the decisions still unreported, and the recorder out, even after
        // an error (detach would take it out too)
        let finished = probe.finish(self);
        let (end, text) = res?;
        finished?;
        let lost = if probe.lost > 0 {
            format!("; {} not recorded (ring full)", probe.lost)
        } else {
            String::new()
        };
        let summary = format!(
            "plancache: {} decision{} ({} custom, {} generic) in {:.1}s{lost}",
            probe.decisions,
            if probe.decisions == 1 { "" } else { "s" },
            probe.decisions - probe.generic,
            probe.generic,
            t0.elapsed().as_secs_f64()
        );
        self.emit(
            "plancache_end",
            serde_json::json!({"decisions": probe.decisions, "generic": probe.generic, "lost": probe.lost}),
        );
        Ok(self.probe_outcome(end, summary, text))
    }

    /// What a probe command shows and how the session goes on, from how
    /// its `run_probes` ended.
    pub fn probe_outcome(&self, end: ProbeEnd, summary: String, text: String) -> (String, Flow) {
        match end {
            ProbeEnd::Done | ProbeEnd::Deadline => (summary, Flow::Continue),
            ProbeEnd::Stopped => {
                if matches!(self.last_stop, Some(Stop::Interrupted)) {
                    (summary, Flow::Continue)
                } else {
                    (format!("{summary}{text}"), Flow::Continue)
                }
            }
            ProbeEnd::TargetGone => (format!("{summary}{text}"), Flow::TargetGone),
            ProbeEnd::Terminating => (summary, Flow::Terminate),
        }
    }

    /// Restore the backend and detach.
    pub fn detach(&mut self) -> Result<String> {
        self.internal.clear();
        let n = self.bps.all_addresses().len();
        self.bps = Breakpoints::default();
        self.frames = None;
        let gone = self.target.is_gone();
        self.target.detach()?;
        self.emit("detach", serde_json::json!({}));
        if let Some(c) = &mut self.capture {
            c.flush();
        }
        if gone {
            Ok(format!("Backend {} is gone.", self.pid))
        } else {
            let removed = if n > 0 {
                format!(
                    " ({n} breakpoint location{} removed)",
                    if n == 1 { "" } else { "s" }
                )
            } else {
                String::new()
            };
            Ok(format!(
                "Detached from backend {}{removed}; it runs as before.",
                self.pid
            ))
        }
    }

    // --------------------------------------------------------------- frames

    pub fn frames(&mut self) -> Result<&Vec<Frame>> {
        if self.frames.is_none() {
            let mut f = self.unwind(256)?;
            self.hide_inline_entry_frames(&mut f);
            self.frames = Some(f);
        }
        Ok(self.frames.as_ref().expect("set above"))
    }

    /// At a breakpoint on FUNCTION whose first instruction also starts an
    /// inlined call inside it, show FUNCTION as frame 0 (as gdb does), not
    /// the inlined callee that begins at the same address.
    fn hide_inline_entry_frames(&self, frames: &mut Vec<Frame>) {
        let Some(Stop::Breakpoint { addr }) = self.last_stop else {
            return;
        };
        let names: Vec<&str> = self
            .bps
            .list
            .iter()
            .flat_map(|b| b.locations.iter())
            .filter(|l| l.addr == addr)
            .map(|l| l.function.as_str())
            .collect();
        if names.is_empty() {
            return;
        }
        let mut dropped = false;
        while frames.len() > 1
            && frames[0].inlined
            && frames[0].phys == 0
            && frames[0].pc == addr
            && !frames[0]
                .function
                .as_deref()
                .is_some_and(|f| names.contains(&f))
            && frames
                .iter()
                .any(|f| f.phys == 0 && f.function.as_deref().is_some_and(|n| names.contains(&n)))
        {
            let gone = frames.remove(0);
            // the caller's line is where the call happens
            if frames[0].line.is_none() {
                frames[0].line = gone.line;
            }
            dropped = true;
        }
        if dropped {
            for (i, f) in frames.iter_mut().enumerate() {
                f.level = i;
            }
        }
    }

    /// The frames of the innermost physical function only (its inlined
    /// calls included), as `frames` shows them: what an expression in
    /// frame 0 needs, at a fraction of a backtrace's cost.  Not cached as
    /// the stop's frames.
    fn top_frames(&mut self) -> Result<Vec<Frame>> {
        let mut f = self.unwind(1)?;
        self.hide_inline_entry_frames(&mut f);
        Ok(f)
    }

    fn unwind(&mut self, max: usize) -> Result<Vec<Frame>> {
        if self.target.is_gone() {
            bail!("the backend is gone");
        }
        let regs = self.target.regs()?;
        let mut cur = FrameRegs::from_regs(&regs);
        let mut out: Vec<Frame> = Vec::new();
        let target = &self.target;
        let read_u64 = |a: u64| target.read_u64(a).ok();
        let mut phys = 0usize;
        while out.len() < max {
            let pc = cur.pc();
            if pc == 0 {
                break;
            }
            let lookup = if phys == 0 { pc } else { pc - 1 };
            self.modules.cover(lookup);
            let main = self.in_main(lookup);
            let (step, module_name, symbol) = match self.module_for(lookup) {
                Some(m) => {
                    let tables = if main {
                        Some(&self.di.main_unwind)
                    } else {
                        m.tables()
                    };
                    let step = tables.and_then(|t| t.step(&cur, lookup - m.bias, &read_u64));
                    let sym = if main {
                        self.di
                            .symbol_at(lookup - self.bias)
                            .map(|(s, off)| (s.name.clone(), off + (pc - lookup)))
                    } else {
                        m.symbol(lookup).map(|(s, off)| (s, off + (pc - lookup)))
                    };
                    (step, if main { None } else { Some(m.short_name()) }, sym)
                }
                None => (None, None, None),
            };
            let cfa = step.as_ref().map(|s| s.1);
            let source: Vec<SourceFrame> = if main {
                self.di.frames_at(lookup - self.bias)
            } else {
                Vec::new()
            };
            if source.is_empty() {
                out.push(Frame {
                    level: out.len(),
                    pc,
                    lookup,
                    regs: cur.clone(),
                    cfa,
                    phys,
                    function: symbol.as_ref().map(|s| s.0.clone()),
                    file: None,
                    line: None,
                    die: None,
                    inlined: false,
                    phys_die: None,
                    module: module_name.clone(),
                    symbol: symbol.clone(),
                });
            } else {
                let phys_die = source.last().and_then(|f| f.die);
                for sf in &source {
                    out.push(Frame {
                        level: out.len(),
                        pc,
                        lookup,
                        regs: cur.clone(),
                        cfa,
                        phys,
                        function: sf
                            .function
                            .clone()
                            .or_else(|| symbol.as_ref().map(|s| s.0.clone())),
                        file: sf.file.clone(),
                        line: sf.line,
                        die: sf.die,
                        inlined: sf.inlined,
                        phys_die,
                        module: None,
                        symbol: symbol.clone(),
                    });
                }
            }
            let Some((caller, _)) = step else { break };
            if caller.pc() == 0 || caller.sp() <= cur.sp() {
                break;
            }
            cur = caller;
            phys += 1;
        }
        Ok(out)
    }

    fn frame_ctx<'a>(&'a self, f: &'a Frame) -> SessionFrameCtx<'a> {
        SessionFrameCtx { s: self, f }
    }

    /// Variables (params first) visible in frame `f`.
    fn frame_vars(&self, f: &Frame) -> Vec<VarInfo> {
        match f.die {
            Some(d) => self
                .di
                .scope_vars(d, f.lookup - self.bias)
                .map(|(v, _)| v)
                .unwrap_or_default(),
            None => Vec::new(),
        }
    }

    fn var_value(&self, f: &Frame, v: &VarInfo) -> Value {
        let ty =
            v.ty.clone()
                .unwrap_or_else(crate::debuginfo::types::Type::int);
        if let crate::debuginfo::LocDesc::Const(b) = &v.loc {
            return Value {
                ty,
                loc: ValLoc::Bytes(b.clone()),
            };
        }
        let expr = match self.di.var_expression(v, f.lookup - self.bias) {
            Ok(Some(e)) => e,
            _ => {
                return Value {
                    ty,
                    loc: ValLoc::Unavailable("optimized out".into()),
                };
            }
        };
        let unit = match self.di.unit_for_offset(v.unit) {
            Ok(u) => u,
            Err(_) => {
                return Value {
                    ty,
                    loc: ValLoc::Unavailable("optimized out".into()),
                };
            }
        };
        let size = size_of(&*self.di, &ty);
        let ctx = self.frame_ctx(f);
        let loc = match eval_location(expr, unit.encoding(), size, &ctx, &self.di.dwarf, &unit) {
            Ok(Place::Memory(a)) => ValLoc::Memory(a),
            Ok(Place::Bytes(b)) => ValLoc::Bytes(b),
            Ok(Place::OptimizedOut) => ValLoc::Unavailable("optimized out".into()),
            Ok(Place::NotSaved(_)) => ValLoc::Unavailable("optimized out".into()),
            Err(_) => ValLoc::Unavailable("optimized out".into()),
        };
        Value { ty, loc }
    }

    fn frame_args(&self, f: &Frame) -> String {
        let vars = self.frame_vars(f);
        let mut parts = Vec::new();
        for v in vars.iter().filter(|v| v.is_param) {
            let val = self.var_value(f, v);
            parts.push(format!("{}={}", v.name, short_value(self, &val)));
        }
        parts.join(", ")
    }

    /// `choose_custom_plan (plansource=0x..., boundParams=0x0) at plancache.c:1028`
    fn frame_line(&mut self, level: usize, with_addr: bool) -> Result<String> {
        let frames = self.frames()?.clone();
        let f = match frames.get(level) {
            Some(f) => f.clone(),
            None => return Ok(String::new()),
        };
        let first_of_phys = level == 0 || frames[level - 1].phys != f.phys;
        let addr = if (with_addr || f.phys > 0) && first_of_phys && !self.at_line_start(&f) {
            format!("{:#018x} in ", f.pc)
        } else {
            String::new()
        };
        let name = f.function.clone().unwrap_or_else(|| "??".into());
        let off = match (&f.symbol, first_of_phys) {
            (Some((sname, o)), true) if *o > 0 && f.phys > 0 => {
                if *sname == name || crate::debuginfo::is_clone_of(sname, &name) {
                    format!("+{o}")
                } else {
                    String::new()
                }
            }
            _ => String::new(),
        };
        let args = self.frame_args(&f);
        let loc = match (&f.file, f.line) {
            (Some(file), Some(line)) => format!(" at {}:{line}", basename(file)),
            _ => match &f.module {
                Some(m) => format!(" from {m}"),
                None => String::new(),
            },
        };
        Ok(format!("{addr}{name}{off} ({args}){loc}"))
    }

    fn at_line_start(&self, f: &Frame) -> bool {
        f.phys == 0
            && matches!(self.last_stop, Some(Stop::Breakpoint { .. }))
            && self.bps.all_addresses().contains(&f.pc)
    }

    fn source_line(&mut self, level: usize) -> Option<String> {
        let f = self.frames().ok()?.get(level)?.clone();
        let file = f.file?;
        let line = f.line?;
        let text = std::fs::read_to_string(&file).ok()?;
        let l = text.lines().nth(line as usize - 1)?;
        Some(format!("{line}\t{l}"))
    }

    pub fn backtrace(&mut self, limit: Option<usize>) -> Result<String> {
        let n = self.frames()?.len();
        let shown = limit.unwrap_or(n).min(n);
        let mut lines = Vec::new();
        let mut json_frames = Vec::new();
        for i in 0..shown {
            lines.push(format!("#{i:<2} {}", self.frame_line(i, false)?));
            let f = &self.frames()?[i];
            json_frames.push(serde_json::json!({
                "level": i, "function": f.function, "file": f.file.as_deref().map(basename),
                "line": f.line, "pc": format!("{:#x}", f.pc), "inlined": f.inlined,
            }));
        }
        if shown < n {
            lines.push("(More stack frames follow...)".into());
        }
        self.emit("backtrace", serde_json::json!({"frames": json_frames}));
        Ok(lines.join("\n"))
    }

    pub fn select_frame(&mut self, n: usize) -> Result<String> {
        let len = self.frames()?.len();
        if n >= len {
            bail!(
                "no frame {n}: the stack has {len} frames (0-{})",
                len.saturating_sub(1)
            );
        }
        self.selected = n;
        let line = self.frame_line(n, true)?;
        let src = self
            .source_line(n)
            .map(|s| format!("\n{s}"))
            .unwrap_or_default();
        Ok(format!("#{n:<2} {line}{src}"))
    }

    // ---------------------------------------------------------------- print

    pub fn print(&mut self, expr: &str, radix: Radix) -> Result<String> {
        let v = self.eval_expr(expr)?;
        let text = format_value(self, &v, radix);
        let json = to_json(self, &v);
        self.history.borrow_mut().push(v);
        let n = self.history.borrow().len();
        self.emit(
            "print",
            serde_json::json!({"expr": expr, "value": json, "text": text}),
        );
        Ok(format!("${n} = {text}"))
    }

    fn selected_frame(&self) -> Option<&Frame> {
        self.frames.as_ref().and_then(|f| f.get(self.selected))
    }

    pub fn info_vars(&mut self, params: bool) -> Result<String> {
        let _ = self.frames()?;
        let f = match self.selected_frame() {
            Some(f) => f.clone(),
            None => bail!("no frame selected"),
        };
        let vars = self.frame_vars(&f);
        let mut lines = Vec::new();
        for v in vars.iter().filter(|v| v.is_param == params) {
            let val = self.var_value(&f, v);
            lines.push(format!(
                "{} = {}",
                v.name,
                format_value(self, &val, Radix::Natural)
            ));
        }
        if lines.is_empty() {
            return Ok(if params {
                "No arguments.".into()
            } else {
                "No locals.".into()
            });
        }
        Ok(lines.join("\n"))
    }

    pub fn info_registers(&mut self) -> Result<String> {
        let _ = self.frames()?;
        let f = self
            .selected_frame()
            .cloned()
            .ok_or_else(|| anyhow!("no frame"))?;
        let names = [
            (0, "rax"),
            (3, "rbx"),
            (2, "rcx"),
            (1, "rdx"),
            (4, "rsi"),
            (5, "rdi"),
            (6, "rbp"),
            (7, "rsp"),
            (8, "r8"),
            (9, "r9"),
            (10, "r10"),
            (11, "r11"),
            (12, "r12"),
            (13, "r13"),
            (14, "r14"),
            (15, "r15"),
            (16, "rip"),
        ];
        let mut s = Vec::new();
        for (n, name) in names {
            match f.regs.get(n) {
                Some(v) => s.push(format!("{name:<8}{v:#018x}  {}", v as i64)),
                None => s.push(format!("{name:<8}<not saved>")),
            }
        }
        Ok(s.join("\n"))
    }

    pub fn info_address(&self, sym: &str) -> Result<String> {
        let locs = self.di.function_locations(sym);
        if !locs.is_empty() {
            let ool: Vec<String> = locs
                .iter()
                .filter(|l| !l.inlined)
                .map(|l| format!("{:#x}", l.addr + self.bias))
                .collect();
            let inl = locs.iter().filter(|l| l.inlined).count();
            return Ok(format!(
                "Symbol \"{sym}\" is a function at address{} {}{}.",
                if ool.len() > 1 { "es" } else { "" },
                if ool.is_empty() {
                    "(none out of line)".to_string()
                } else {
                    ool.join(", ")
                },
                if inl > 0 {
                    format!(
                        ", and is inlined at {inl} place{}",
                        if inl == 1 { "" } else { "s" }
                    )
                } else {
                    String::new()
                }
            ));
        }
        if let Some((a, _)) = self.di.global(sym) {
            return Ok(format!(
                "Symbol \"{sym}\" is static storage at address {:#x}.",
                a + self.bias
            ));
        }
        bail!("no symbol \"{sym}\" in {}", self.exe_path.display())
    }

    pub fn info(&mut self) -> String {
        let state = if self.target.is_gone() {
            "gone".to_string()
        } else {
            match &self.last_stop {
                Some(Stop::Breakpoint { .. }) => {
                    let f = self.frame_line(0, false).unwrap_or_default();
                    format!("stopped at a breakpoint: {f}")
                }
                Some(Stop::Signal(s)) => format!("stopped by signal {s:?}"),
                _ => "stopped (interrupted)".to_string(),
            }
        };
        let kind = match &self.kind {
            postgres::ProcessKind::ClientBackend { title } => format!("client backend ({title})"),
            postgres::ProcessKind::Auxiliary { role } => format!("{role} (not a client backend)"),
            _ => "?".into(),
        };
        format!(
            "pid:         {}\nprocess:     {kind}\npostgres:    {}\nbinary:      {}\nbuild-id:    {}\ndebug info:  {}{}\nindex:       {} functions, {} globals, {} types ({})\nload bias:   {:#x}\ncpu state:   {}\nbreakpoints: {}\nstate:       {state}",
            self.pid,
            self.pg_version
                .clone()
                .unwrap_or_else(|| "unknown version".into()),
            self.exe_path.display(),
            if self.di.build_id.is_empty() {
                "none"
            } else {
                &self.di.build_id
            },
            self.di.source,
            if self.di.pack.is_some() {
                "\n             without DWARF: no locals/parameters, source lines or inlined frames, no static functions (break on exported ones), no prepared-statement names in plancache, no ERROR messages from calls"
            } else {
                ""
            },
            self.di.index.functions.len(),
            self.di.index.globals.len(),
            self.di.index.types.len(),
            if self.di.index_from_cache {
                "from cache"
            } else {
                "built now"
            },
            self.bias,
            match crate::target::xstate::XState::save(self.pid) {
                Ok(x) => format!("{} saved around each call", x.describe()),
                Err(e) => format!("{e:#}"),
            },
            self.bps.list.len(),
        )
    }

    /// Run one command; returns the text to show and whether the session
    /// should end.
    pub fn execute(&mut self, cmd: &Command) -> Result<(String, Flow)> {
        Ok(match cmd {
            Command::Nothing => (String::new(), Flow::Continue),
            Command::Break {
                location,
                temporary,
                condition,
            } => (
                self.add_breakpoint(location, *temporary, condition.as_deref())?,
                Flow::Continue,
            ),
            Command::Condition { id, expr } => {
                if let Some(e) = expr {
                    let di = self.di.clone();
                    parse::parse_in(e, &di)?;
                }
                let b = self
                    .bps
                    .get_mut(*id)
                    .ok_or_else(|| anyhow!("No breakpoint number {id}."))?;
                b.condition = expr.clone();
                let msg = match expr {
                    Some(_) => String::new(),
                    None => format!("Breakpoint {id} now unconditional."),
                };
                (msg, Flow::Continue)
            }
            Command::Commands { id, body, text } => {
                let id = match id {
                    Some(i) => *i,
                    None => self.bps.list.last().map(|b| b.id).ok_or_else(|| {
                        anyhow!("No breakpoints specified: set one before 'commands'")
                    })?,
                };
                let b = self
                    .bps
                    .get_mut(id)
                    .ok_or_else(|| anyhow!("No breakpoint number {id}."))?;
                b.commands = body.clone();
                b.commands_text = text.clone();
                (String::new(), Flow::Continue)
            }
            Command::End | Command::Silent => {
                bail!("'end' and 'silent' only make sense in a commands block")
            }
            Command::Printf { format, args } => (self.printf(format, args)?, Flow::Continue),
            Command::Trace {
                function,
                args,
                duration,
                count,
                stacks,
                quiet,
            } => {
                let (end, summary, text) =
                    crate::probes::trace(self, function, args, *duration, *count, *stacks, *quiet)?;
                self.probe_outcome(end, summary, text)
            }
            Command::Count {
                functions,
                by_phase,
                duration,
            } => {
                let (end, summary, text) =
                    crate::probes::count(self, functions, *by_phase, *duration)?;
                self.probe_outcome(end, summary, text)
            }
            Command::Delete(ids) => (self.delete_breakpoints(ids)?, Flow::Continue),
            Command::InfoBreakpoints => (self.info_breakpoints(), Flow::Continue),
            Command::Continue => self.continue_running()?,
            Command::Print { radix, expr } => (self.print(expr, *radix)?, Flow::Continue),
            Command::Backtrace(n) => (self.backtrace(*n)?, Flow::Continue),
            Command::Frame(n) => {
                let n = n.unwrap_or(self.selected);
                (self.select_frame(n)?, Flow::Continue)
            }
            Command::Up(n) => {
                let len = self.frames()?.len();
                let t = (self.selected + n).min(len.saturating_sub(1));
                if t == self.selected && *n > 0 {
                    bail!("initial frame selected; you cannot go up");
                }
                (self.select_frame(t)?, Flow::Continue)
            }
            Command::Down(n) => {
                if self.selected == 0 {
                    bail!("bottom (innermost) frame selected; you cannot go down");
                }
                let t = self.selected.saturating_sub(*n);
                (self.select_frame(t)?, Flow::Continue)
            }
            Command::Info => (self.info(), Flow::Continue),
            Command::InfoAddress(s) => (self.info_address(s)?, Flow::Continue),
            Command::InfoLocals => (self.info_vars(false)?, Flow::Continue),
            Command::InfoArgs => (self.info_vars(true)?, Flow::Continue),
            Command::InfoRegisters => (self.info_registers()?, Flow::Continue),
            Command::InfoFrame => {
                let _ = self.frames()?;
                let f = self
                    .selected_frame()
                    .cloned()
                    .ok_or_else(|| anyhow!("no frame"))?;
                (
                    format!(
                        "Stack level {}, frame at {}:\n rip = {:#x} in {}{}\n {}",
                        f.level,
                        f.cfa
                            .map(|c| format!("{c:#x}"))
                            .unwrap_or_else(|| "?".into()),
                        f.pc,
                        f.function.clone().unwrap_or_else(|| "??".into()),
                        match (&f.file, f.line) {
                            (Some(fl), Some(l)) => format!(" ({}:{l})", basename(fl)),
                            _ => String::new(),
                        },
                        if f.inlined {
                            "inlined into the frame above"
                        } else {
                            "physical frame"
                        }
                    ),
                    Flow::Continue,
                )
            }
            Command::Echo(t) => (t.clone(), Flow::Continue),
            Command::PlanCache {
                duration,
                count,
                fast,
            } => self.plancache(*duration, *count, *fast)?,
            Command::Call(text) => (self.call_function(text)?, Flow::Continue),
            Command::Wait => (self.wait_now()?, Flow::Continue),
            Command::WaitsSample { hz, duration } => self.waits_sample(*hz, *duration)?,
            Command::WaitsTrace {
                duration,
                stacks,
                quiet,
            } => self.waits_trace(*duration, *stacks, *quiet)?,
            Command::Plan {
                next,
                format,
                verbose,
                costs,
            } => {
                let opts = crate::postgres::explain::ExplainOpts {
                    format: format.clone(),
                    verbose: *verbose,
                    costs: *costs,
                };
                self.plan(*next, &opts)?
            }
            Command::Detach => (self.detach()?, Flow::Quit),
            Command::Quit => (self.detach()?, Flow::Quit),
            Command::Help(t) => (help_text(t.as_deref()), Flow::Continue),
        })
    }
}

/// A probe with no breakpoints: the target just runs (waits sample).
struct NoStop;

impl ProbeHandler for NoStop {
    fn on_stop(&mut self, _s: &mut dyn crate::postgres::Backend, _addr: u64) -> Result<()> {
        Ok(())
    }
    fn done(&self) -> bool {
        false
    }
}

/// Stop at the first hit of the armed internal breakpoints.
#[derive(Default)]
struct OneStop {
    hit: bool,
}

impl ProbeHandler for OneStop {
    fn on_stop(&mut self, _s: &mut dyn crate::postgres::Backend, _addr: u64) -> Result<()> {
        self.hit = true;
        Ok(())
    }
    fn done(&self) -> bool {
        self.hit
    }
}

fn one_line(s: &str) -> String {
    let t: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.chars().count() > 100 {
        format!("{}...", t.chars().take(100).collect::<String>())
    } else {
        t
    }
}

pub use crate::postgres::backend::{ProbeEnd, ProbeHandler};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
    TargetGone,
    Terminate,
}

fn describe_loc(l: &BpLocation) -> String {
    let mut s = format!("in {}", l.function);
    if let Some((f, line)) = &l.file_line {
        s.push_str(&format!(" at {}:{line}", basename(f)));
    }
    if l.inlined {
        if let Some(into) = &l.inlined_into {
            s.push_str(&format!(" (inlined into {into})"));
        } else {
            s.push_str(" (inlined)");
        }
    }
    s
}

pub fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Resolve FUNCTION, FILE:LINE or *ADDRESS to breakpoint locations
/// (runtime addresses).  Usable before attaching (bias 0) to validate
/// scripts.
pub fn resolve_location(di: &DebugInfo, bias: u64, spec: &str) -> Result<Vec<BpLocation>> {
    resolve(di, bias, spec, false)
}

/// `resolve_location`; `attached`: `bias` is the target's load bias (not
/// a check before attaching), so a numeric *ADDRESS can be checked too.
fn resolve(di: &DebugInfo, bias: u64, spec: &str, attached: bool) -> Result<Vec<BpLocation>> {
    let spec = spec.trim();
    if let Some(a) = spec.strip_prefix('*') {
        let (addr, by_name) = parse_address(di, bias, a.trim())?;
        // before attaching, a name's address is a link-time one: say the name
        let label = if by_name && !attached {
            format!("*{}", a.trim())
        } else {
            format!("{addr:#x}")
        };
        check_instruction_start(di, bias, addr, &label, attached || by_name)?;
        let link = addr.wrapping_sub(bias);
        let fr = di.frames_at(link);
        return Ok(vec![BpLocation {
            addr,
            function: fr
                .first()
                .and_then(|f| f.function.clone())
                .unwrap_or_else(|| format!("{addr:#x}")),
            inlined: false,
            inlined_into: None,
            file_line: di.location_at(link),
        }]);
    }
    if let Some((file, line)) = spec.rsplit_once(':')
        && let Ok(line) = line.parse::<u32>()
    {
        if line == 0 {
            bail!("{file}:0: line numbers start at 1");
        }
        let hits = di.line_addresses(file, line)?;
        if hits.is_empty() {
            bail!(
                "no code at {file}:{line} (is the file name right? try the function name instead)"
            );
        }
        return Ok(hits
            .into_iter()
            .map(|(a, f, l)| {
                let fr = di.frames_at(a);
                BpLocation {
                    addr: a + bias,
                    function: fr
                        .first()
                        .and_then(|x| x.function.clone())
                        .unwrap_or_else(|| "??".into()),
                    inlined: fr.len() > 1,
                    inlined_into: fr
                        .last()
                        .and_then(|x| x.function.clone())
                        .filter(|_| fr.len() > 1),
                    file_line: Some((f, l)),
                }
            })
            .collect());
    }
    if !spec
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        bail!("bad location '{spec}': use FUNCTION, FILE:LINE or *ADDRESS");
    }
    let locs = di.function_locations(spec);
    if locs.is_empty() {
        let close = suggest(di, spec);
        bail!(
            "no function \"{spec}\" in this postgres binary{}",
            close
                .map(|c| format!(" (did you mean {c}?)"))
                .unwrap_or_default()
        );
    }
    Ok(locs
        .into_iter()
        .map(|l| {
            let fr = di.frames_at(l.addr);
            let into = if l.inlined {
                // the outermost frame at that address is the physical caller
                fr.last().and_then(|f| f.function.clone())
            } else {
                None
            };
            BpLocation {
                addr: l.addr + bias,
                function: spec.to_string(),
                inlined: l.inlined,
                inlined_into: into,
                file_line: di.location_at(l.addr),
            }
        })
        .collect())
}

/// The runtime address of `*ADDRESS`: a number (0x... or decimal) or
/// FUNCTION[+OFFSET]; and whether it was given by name.
fn parse_address(di: &DebugInfo, bias: u64, a: &str) -> Result<(u64, bool)> {
    let num = |t: &str| -> Option<u64> {
        let t = t.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => t.parse().ok(),
        }
    };
    if let Some(v) = num(a) {
        return Ok((v, false));
    }
    let bad = || anyhow!("bad address '{a}': use *0xADDRESS or *FUNCTION+OFFSET");
    let (name, off) = match a.split_once('+') {
        Some((n, o)) => (n.trim(), num(o).ok_or_else(bad)?),
        None => (a, 0),
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
    {
        return Err(bad());
    }
    let base = di
        .symbols
        .iter()
        .find(|s| s.is_func && s.name == name)
        .map(|s| s.addr)
        .or_else(|| {
            di.function_locations(name)
                .iter()
                .find(|l| !l.inlined)
                .map(|l| l.addr)
        })
        .ok_or_else(|| anyhow!("no function \"{name}\" in this postgres binary"))?;
    Ok((base.wrapping_add(off).wrapping_add(bias), true))
}

/// An int3 must replace the first byte of an instruction: one written
/// inside an instruction changes what the backend executes (a crash at
/// the hit, or later).  Decodes the containing function from its start and
/// refuses an address that is not an instruction's first byte, naming the
/// nearest starts.  `must_know`: an address in no known function is
/// refused too (before attaching, a numeric address of a position
/// independent binary cannot be checked yet: it is checked at attach).
fn check_instruction_start(
    di: &DebugInfo,
    bias: u64,
    addr: u64,
    label: &str,
    must_know: bool,
) -> Result<()> {
    use iced_x86::{Decoder, DecoderOptions};
    let link = addr.wrapping_sub(bias);
    let Some((name, start, end)) = di.code_range_at(link) else {
        if must_know {
            bail!(
                "{label}: not in a function of the postgres binary that pgdbg knows: break *ADDRESS needs the first byte of an instruction there (or use break FUNCTION or FILE:LINE)"
            );
        }
        return Ok(());
    };
    let Some(code) = di.binary.bytes_at(start, end - start) else {
        bail!(
            "{label} ({name}): the code of {name} is not in the binary's file, so the address cannot be checked: use break {name} or FILE:LINE"
        );
    };
    let mut dec = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    let mut before = start;
    while dec.can_decode() && dec.ip() < link {
        before = dec.ip();
        let _ = dec.decode();
    }
    let after = dec.ip();
    if after == link {
        return Ok(());
    }
    let after_text = if after >= end {
        format!("the end of {name} at +{}", end - start)
    } else {
        format!("+{}", after - start)
    };
    bail!(
        "{label}: not the start of an instruction in {name} ({name}+{}; instructions start at {name}+{} and {after_text})",
        link - start,
        before - start
    )
}

fn suggest(di: &DebugInfo, name: &str) -> Option<String> {
    let lname = name.to_lowercase();
    let mut best: Option<(usize, &String)> = None;
    for k in di.index.functions.keys() {
        let d = edit_distance(&lname, &k.to_lowercase());
        if d <= 3 && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k.clone())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) > 3 {
        return 99;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let c = if a[i - 1] == b[j - 1] { 0 } else { 1 };
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + c);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The files mapped into the target, as of the last look at its
/// /proc/PID/maps: taken at attach, and again when a pc is in none of them
/// (a library loaded since), not at every stop.  Parsed images are cached
/// per file (`unwind::Module`), so a new look maps nothing new.
struct Modules {
    pid: i32,
    bias: u64,
    list: Vec<Module>,
    /// When the list was taken, and the pages found in no module since
    /// (garbage pcs of a stack, code in anonymous memory): not looked up
    /// again before a second has passed.
    taken: std::time::Instant,
    unmapped: std::collections::HashSet<u64>,
}

impl Modules {
    fn new(pid: i32, bias: u64) -> Modules {
        Modules {
            pid,
            bias,
            list: Vec::new(),
            taken: std::time::Instant::now(),
            unmapped: std::collections::HashSet::new(),
        }
    }

    fn refresh(&mut self) {
        self.list = modules_of(self.pid, self.bias);
        self.taken = std::time::Instant::now();
    }

    fn find(&self, addr: u64) -> Option<&Module> {
        self.list.iter().find(|m| addr >= m.start && addr < m.end)
    }

    /// Make sure a module covering `addr` is known if the target has one
    /// (takes a new list when `addr` is in none).
    fn cover(&mut self, addr: u64) {
        if self.find(addr).is_some() {
            return;
        }
        let page = addr >> 12;
        if self.taken.elapsed() >= std::time::Duration::from_secs(1) {
            self.unmapped.clear();
        } else if self.unmapped.contains(&page) {
            return;
        }
        self.refresh();
        if self.find(addr).is_none() {
            self.unmapped.insert(page);
        }
    }
}

/// The files mapped into process `pid` (one module per file, from its
/// mapping at offset 0 to its last mapping); the executable gets
/// `main_bias`.
fn modules_of(pid: i32, main_bias: u64) -> Vec<Module> {
    let maps = procfs::maps(pid).unwrap_or_default();
    let exe = procfs::exe_path(pid).ok();
    let mut mods: Vec<Module> = Vec::new();
    for m in &maps {
        let Some(p) = &m.path else { continue };
        if let Some(existing) = mods.iter_mut().find(|x| &x.path == p) {
            existing.end = existing.end.max(m.end);
            continue;
        }
        if m.offset == 0 {
            let main = exe.as_deref() == Some(p.as_path());
            let bias = if main { main_bias } else { m.start };
            let key = FileKey {
                path: p.clone(),
                dev: m.dev.clone(),
                inode: m.inode,
            };
            mods.push(Module::new(key, m.start, m.end, bias, main));
        }
    }
    mods
}

/// Load bias of the main binary: AT_ENTRY minus the ELF entry point, cross
/// checked against /proc/PID/maps.
fn compute_bias(pid: i32, di: &DebugInfo) -> Result<u64> {
    let entry = di.binary.entry();
    if let Some(at) = procfs::auxv_entry(pid) {
        return Ok(at.wrapping_sub(entry));
    }
    let exe = procfs::exe_path(pid)?;
    for m in procfs::maps(pid)? {
        if m.path.as_deref() == Some(exe.as_path()) && m.offset == 0 {
            return Ok(m.start.wrapping_sub(di.binary.first_load_vaddr()));
        }
    }
    bail!(
        "cannot find where {} is loaded in process {pid}",
        exe.display()
    )
}

/// Short form of a value for frame lines: scalars and pointers as they
/// are, aggregates as "...".
fn short_value(env: &dyn EvalEnv, v: &Value) -> String {
    use crate::debuginfo::types::{Type, strip};
    if let ValLoc::Unavailable(w) = &v.loc {
        return format!("<{w}>");
    }
    match &*strip(env, &v.ty) {
        Type::Struct { .. } | Type::Array { .. } => "...".into(),
        Type::Pointer { .. } => {
            let s = format_value(env, v, Radix::Natural);
            // drop the "(T *) " prefix
            match s.find(") ") {
                Some(i) if s.starts_with('(') => s[i + 2..].to_string(),
                _ => s,
            }
        }
        _ => format_value(env, v, Radix::Natural),
    }
}

struct SessionFrameCtx<'a> {
    s: &'a Session,
    f: &'a Frame,
}

impl FrameContext for SessionFrameCtx<'_> {
    fn reg(&self, n: u16) -> Option<u64> {
        self.f.regs.get(n)
    }
    fn cfa(&self) -> Option<u64> {
        self.f.cfa
    }
    fn frame_base(&self) -> Option<u64> {
        let die = self.f.phys_die?;
        let (_, fb) = self
            .s
            .di
            .scope_vars(die, self.f.lookup - self.s.bias)
            .ok()?;
        let fb = fb?;
        let unit = self.s.di.unit_for_offset(die).ok()?;
        // Frame bases are simple (DW_OP_call_frame_cfa): evaluate without a
        // frame base of their own.
        let ctx = SessionFrameCtx {
            s: self.s,
            f: self.f,
        };
        match eval_location(
            fb,
            unit.encoding(),
            8,
            &NoFrameBase(&ctx),
            &self.s.di.dwarf,
            &unit,
        )
        .ok()?
        {
            Place::Memory(a) => Some(a),
            Place::Bytes(b) => {
                let mut x = [0u8; 8];
                x[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
                Some(u64::from_le_bytes(x))
            }
            _ => None,
        }
    }
    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.s.target.read(addr, buf)
    }
    fn bias(&self) -> u64 {
        self.s.bias
    }
}

struct NoFrameBase<'a>(&'a SessionFrameCtx<'a>);
impl FrameContext for NoFrameBase<'_> {
    fn reg(&self, n: u16) -> Option<u64> {
        self.0.reg(n)
    }
    fn cfa(&self) -> Option<u64> {
        self.0.cfa()
    }
    fn frame_base(&self) -> Option<u64> {
        None
    }
    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.0.read_mem(addr, buf)
    }
    fn bias(&self) -> u64 {
        self.0.bias()
    }
}

impl TypeSource for Session {
    fn resolve(&self, t: &TypeRef) -> Rc<crate::debuginfo::types::Type> {
        self.di.resolve(t)
    }
    fn type_by_name(&self, name: &str) -> Option<TypeRef> {
        self.di.type_by_name(name)
    }
}

impl EvalEnv for Session {
    fn variable(&self, name: &str) -> Result<Option<Value>> {
        if let Some(f) = self.selected_frame() {
            let vars = self.frame_vars(f);
            if let Some(v) = vars.iter().rev().find(|v| v.name == name) {
                return Ok(Some(self.var_value(f, v)));
            }
        }
        if let Some((addr, ty)) = self.di.global(name) {
            let ty = match ty {
                Some(t) => t,
                None => {
                    bail!("'{name}' has no type in the debug info; cast it: print *(int *) &{name}")
                }
            };
            return Ok(Some(Value {
                ty,
                loc: ValLoc::Memory(addr + self.bias),
            }));
        }
        Ok(None)
    }

    fn function_address(&self, name: &str) -> Option<u64> {
        self.di
            .function_locations(name)
            .iter()
            .find(|l| !l.inlined)
            .map(|l| l.addr + self.bias)
    }

    fn register(&self, name: &str) -> Option<u64> {
        let f = self.selected_frame()?;
        let n = match name {
            "rip" | "pc" => 16,
            "rsp" | "sp" => 7,
            "rbp" | "fp" => 6,
            "rax" => 0,
            "rdx" => 1,
            "rcx" => 2,
            "rbx" => 3,
            "rsi" => 4,
            "rdi" => 5,
            "r8" => 8,
            "r9" => 9,
            "r10" => 10,
            "r11" => 11,
            "r12" => 12,
            "r13" => 13,
            "r14" => 14,
            "r15" => 15,
            _ => return None,
        };
        if n == 16 {
            return Some(f.pc);
        }
        f.regs.get(n)
    }

    fn read_mem(&self, addr: u64, buf: &mut [u8]) -> Result<()> {
        self.target.read(addr, buf)
    }

    fn history(&self, n: Option<usize>) -> Option<Value> {
        let h = self.history.borrow();
        match n {
            None => h.last().cloned(),
            Some(0) => None,
            Some(i) => h.get(i - 1).cloned(),
        }
    }

    fn data_symbol_for(&self, addr: u64) -> Option<String> {
        self.di.data_symbol_at(addr.wrapping_sub(self.bias))
    }

    fn symbol_for(&self, addr: u64) -> Option<String> {
        if let Some((s, off)) = self.di.symbol_at(addr.wrapping_sub(self.bias)) {
            return Some(if off == 0 {
                s.name.clone()
            } else {
                format!("{}+{off}", s.name)
            });
        }
        self.module_for(addr)
            .and_then(|m| m.symbol(addr))
            .map(|(s, off)| if off == 0 { s } else { format!("{s}+{off}") })
    }
}
