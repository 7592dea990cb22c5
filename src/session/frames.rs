//! The frames of the current stop: unwinding (CFI, inlined frames), `bt`,
//! `frame`, and the frame context DWARF locations are evaluated in.
use super::*;
use crate::capture::events::BacktraceFrame;

impl Session {
    pub fn frames(&mut self) -> Result<&Vec<Frame>> {
        if self.stop_state().frames.is_none() {
            let mut f = self.unwind(256)?;
            self.hide_inline_entry_frames(&mut f);
            self.hide_stepped_inline_frames(&mut f);
            self.stop_state().frames = Some(f);
        }
        Ok(self.stop.frames.as_ref().expect("set above"))
    }

    /// At a breakpoint on FUNCTION whose first instruction also starts an
    /// inlined call inside it, show FUNCTION as frame 0 (as gdb does), not
    /// the inlined callee that begins at the same address.
    pub(crate) fn hide_inline_entry_frames(&self, frames: &mut Vec<Frame>) {
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

    /// A step that stopped at an inlined call's site (`stepping.rs`):
    /// the inlined frames it did not enter are left out.
    fn hide_stepped_inline_frames(&mut self, frames: &mut Vec<Frame>) {
        let n = self.stop_state().hide_inline;
        let mut dropped = false;
        for _ in 0..n {
            if frames.len() > 1 && frames[0].inlined && frames[0].phys == 0 {
                frames.remove(0);
                dropped = true;
            }
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
    pub(crate) fn top_frames(&mut self) -> Result<Vec<Frame>> {
        let mut f = self.unwind(1)?;
        self.hide_inline_entry_frames(&mut f);
        self.hide_stepped_inline_frames(&mut f);
        Ok(f)
    }

    pub(crate) fn unwind(&mut self, max: usize) -> Result<Vec<Frame>> {
        if self.target.is_gone() {
            return Err(crate::inferior::Gone::Backend.into());
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
            // a library with DWARF: its lines, inlined calls and scopes
            let lib = if main {
                None
            } else {
                self.library_at(lookup).filter(|(_, di, _)| di.has_dwarf())
            };
            let source: Vec<SourceFrame> = match &lib {
                _ if main => self.di.frames_at(lookup - self.bias),
                Some((_, di, bias)) => di.frames_at(lookup - bias),
                None => Vec::new(),
            };
            let lib = lib.map(|(i, _, _)| i);
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
                    lib,
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
                        module: module_name.clone(),
                        lib,
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

    pub(crate) fn frame_ctx<'a>(&'a self, f: &'a Frame) -> SessionFrameCtx<'a> {
        SessionFrameCtx { s: self, f }
    }

    /// Variables (params first) visible in frame `f`.
    pub(crate) fn frame_vars(&self, f: &Frame) -> Vec<VarInfo> {
        let (di, bias, tag) = self.frame_di(f);
        match f.die {
            Some(d) => di
                .scope_vars(d, f.lookup - bias)
                .map(|(v, _)| v.into_iter().map(|v| Self::tagged_var(v, tag)).collect())
                .unwrap_or_default(),
            None => Vec::new(),
        }
    }

    pub(crate) fn var_value(&self, f: &Frame, v: &VarInfo) -> Value {
        let ty =
            v.ty.clone()
                .unwrap_or_else(crate::debuginfo::types::Type::int);
        if let crate::debuginfo::LocDesc::Const(b) = &v.loc {
            return Value {
                ty,
                loc: ValLoc::Bytes(b.clone()),
            };
        }
        let (di, bias, _) = self.frame_di(f);
        let expr = match di.var_expression(v, f.lookup - bias) {
            Ok(Some(e)) => e,
            _ => {
                return Value {
                    ty,
                    loc: ValLoc::Unavailable("optimized out".into()),
                };
            }
        };
        let unit = match di.unit_for_offset(v.unit) {
            Ok(u) => u,
            Err(_) => {
                return Value {
                    ty,
                    loc: ValLoc::Unavailable("optimized out".into()),
                };
            }
        };
        let size = size_of(self, &ty);
        let ctx = self.frame_ctx(f);
        let loc = match eval_location(expr, unit.encoding(), size, &ctx, &di.dwarf, &unit) {
            Ok(Place::Memory(a)) => ValLoc::Memory(a),
            Ok(Place::Bytes(b)) => ValLoc::Bytes(b),
            Ok(Place::OptimizedOut) => ValLoc::Unavailable("optimized out".into()),
            Ok(Place::NotSaved(_)) => ValLoc::Unavailable("optimized out".into()),
            Err(_) => ValLoc::Unavailable("optimized out".into()),
        };
        Value { ty, loc }
    }

    pub(crate) fn frame_args(&self, f: &Frame) -> String {
        let vars = self.frame_vars(f);
        let mut parts = Vec::new();
        for v in vars.iter().filter(|v| v.is_param) {
            let val = self.var_value(f, v);
            parts.push(format!("{}={}", v.name, short_value(self, &val)));
        }
        parts.join(", ")
    }

    /// `choose_custom_plan (plansource=0x..., boundParams=0x0) at plancache.c:1028`
    pub(crate) fn frame_line(&mut self, level: usize, with_addr: bool) -> Result<String> {
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

    pub(crate) fn at_line_start(&self, f: &Frame) -> bool {
        f.phys == 0
            && (self.stop_state_ref().is_some_and(|s| s.line_start)
                || matches!(self.last_stop, Some(Stop::Breakpoint { .. }))
                    && self.bps.all_addresses().contains(&f.pc))
    }

    pub(crate) fn source_line(&mut self, level: usize) -> Option<String> {
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
            json_frames.push(BacktraceFrame {
                file: f.file.as_deref().map(|p| basename(p).to_string()),
                function: f.function.clone(),
                inlined: f.inlined,
                level: i,
                line: f.line,
                pc: format!("{:#x}", f.pc),
            });
        }
        if shown < n {
            lines.push("(More stack frames follow...)".into());
        }
        self.emit(Event::Backtrace {
            frames: json_frames,
        });
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
        self.stop_state().selected = n;
        let line = self.frame_line(n, true)?;
        let src = self
            .source_line(n)
            .map(|s| format!("\n{s}"))
            .unwrap_or_default();
        Ok(format!("#{n:<2} {line}{src}"))
    }

    pub(crate) fn selected_frame(&self) -> Option<&Frame> {
        let st = self.stop_state_ref()?;
        st.frames.as_ref().and_then(|f| f.get(st.selected))
    }
}

/// Short form of a value for frame lines: scalars and pointers as they
/// are, aggregates as "...".
pub(crate) fn short_value(env: &dyn EvalEnv, v: &Value) -> String {
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

pub(crate) struct SessionFrameCtx<'a> {
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
        let (di, bias, _) = self.s.frame_di(self.f);
        let (_, fb) = di.scope_vars(die, self.f.lookup - bias).ok()?;
        let fb = fb?;
        let unit = di.unit_for_offset(die).ok()?;
        // Frame bases are simple (DW_OP_call_frame_cfa): evaluate without a
        // frame base of their own.
        let ctx = SessionFrameCtx {
            s: self.s,
            f: self.f,
        };
        match eval_location(fb, unit.encoding(), 8, &NoFrameBase(&ctx), &di.dwarf, &unit).ok()? {
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
        self.s.frame_di(self.f).1
    }
}

pub(crate) struct NoFrameBase<'a>(&'a SessionFrameCtx<'a>);

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
