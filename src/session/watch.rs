//! `watch`, `rwatch`, `awatch`: an lvalue's bytes in a debug register
//! (`Target::claim_watch`, which the guardian and the SIGTRAP handler
//! cover as every debug register: `docs/safety.md`), numbered with the
//! breakpoints, their hits judged as gdb judges them and shown in gdb's
//! words; and `set var`, a write into the backend's data.
use super::*;
use crate::arch::debugregs::{self, Kind};
use crate::breakpoints::{Scope, Watch, WatchKind, WatchSeen, watch_seen};
use crate::debuginfo::types::{Encoding, Type, strip};

impl Session {
    /// `watch EXPR` (and `rwatch`, `awatch`): EXPR's bytes watched in a
    /// free debug register; gdb's "Hardware watchpoint N: EXPR".
    pub fn add_watchpoint(
        &mut self,
        expr: &str,
        kind: WatchKind,
        condition: Option<&str>,
    ) -> Result<String> {
        let cmd = kind.command();
        if let Some(c) = condition {
            let di = self.di.clone();
            parse::parse_in(c, &di)
                .map_err(|e| anyhow!("condition '{c}': {e:#}", c = crate::shown::shown(c)))?;
        }
        let v = self.eval_expr(expr)?;
        let ValLoc::Memory(addr) = v.loc else {
            // gdb's words for a literal; a register or a computed value
            // said as such (gdb would watch it in software)
            if expr
                .chars()
                .all(|c| c.is_ascii_hexdigit() || " +-*/().xXuUlL".contains(c))
            {
                bail!("Cannot watch constant value `{expr}'.");
            }
            bail!(
                "{cmd} {expr}: its value is not in the backend's memory (a computed value or a register): pgdbg watches memory only"
            );
        };
        let len = size_of(self, &v.ty);
        if len == 0 {
            bail!("{cmd} {expr}: its type has no size: nothing to watch");
        }
        // as gdb: aligned pieces of 1, 2, 4 or 8 bytes, one register each
        let need = debugregs::pieces(addr, len).len();
        if need > debugregs::SLOTS {
            bail!(
                "{cmd} {expr}: its {len} bytes at {addr:#x} need {need} debug registers (aligned pieces of 1, 2, 4 or 8 bytes), and x86-64 has {}; watch a member of it",
                debugregs::SLOTS
            );
        }
        let head = format!("{cmd} {expr}");
        let on_stack = self.check_data_range(&head, addr, len, "")?;
        // a frame's local: watched until that frame returns, as gdb does
        let scope = if on_stack {
            Some(self.local_scope(&head, addr, len)?)
        } else {
            None
        };
        let mut old = vec![0u8; len as usize];
        self.target.read(addr, &mut old)?;
        self.drop_stale_probe_watch();
        let id = self.bps.last_id().unwrap_or(0) + 1;
        let hw = match kind {
            WatchKind::Write => Kind::Write,
            // x86-64 has no read-only debug register: gdb's way, reads and
            // writes, a hit that changed the value taken for a write
            WatchKind::Read | WatchKind::Access => Kind::ReadWrite,
        };
        let slots = self.claim_pieces(id, addr, len, hw, scope.is_some())?;
        let scope = match scope {
            Some(mut sc) => {
                // the int3 where the frame returns; without it the
                // registers go back
                if let Err(e) = self.insert_int3(sc.ret) {
                    for s in slots {
                        let _ = self.target.release_watch(s);
                    }
                    return Err(e.context(format!(
                        "{head}: no breakpoint could be put where its frame ({}) returns",
                        sc.function
                    )));
                }
                sc.armed = true;
                Some(sc)
            }
            None => None,
        };
        let bp = self.bps.add_watch(
            expr.to_string(),
            Watch {
                kind,
                addr,
                len,
                ty: v.ty,
                old,
                slots,
                scope,
            },
        );
        debug_assert_eq!(bp.id, id);
        if let Some(b) = self.bps.get_mut(id) {
            b.condition = condition.map(str::to_string);
        }
        self.emit(Event::Breakpoint {
            id,
            locations: Vec::new(),
            spec: format!("{cmd} {expr}"),
        });
        Ok(format!("{} {id}: {expr}", kind.label()))
    }

    /// Take watchpoint `id` out of its debug registers (nothing for a
    /// breakpoint or a disabled watchpoint).
    pub(crate) fn disarm_watch(&mut self, id: u32) -> Result<()> {
        let slots = self
            .bps
            .get_mut(id)
            .and_then(|b| b.watch.as_mut())
            .map(|w| std::mem::take(&mut w.slots))
            .unwrap_or_default();
        let mut first = None;
        let mut kept = Vec::new();
        for s in slots {
            if let Err(e) = self.target.release_watch(s) {
                if self
                    .target
                    .watch_owners()
                    .get(s)
                    .is_some_and(Option::is_some)
                {
                    // still armed (its DR7 bits not written away): still its own
                    kept.push(s);
                }
                first.get_or_insert(e);
            }
        }
        if !kept.is_empty()
            && let Some(w) = self.bps.get_mut(id).and_then(|b| b.watch.as_mut())
        {
            w.slots = kept;
        }
        // a local's: the int3 where its frame returns comes out too (kept
        // while a piece is still armed: it still ends the watchpoint)
        let ret = self
            .bps
            .get_mut(id)
            .and_then(|b| b.watch.as_mut())
            .filter(|w| w.slots.is_empty())
            .and_then(|w| w.scope.as_mut())
            .filter(|sc| sc.armed)
            .map(|sc| {
                sc.armed = false;
                sc.ret
            });
        if let Some(ret) = ret
            && let Err(e) = self.release_int3(ret)
        {
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }

    /// The debug registers of watchpoint `id`'s pieces (`len` bytes at
    /// `addr` split as `debugregs::pieces`), all or none: refused in one
    /// line naming the holders when too few are free; a claim that fails
    /// gives back those taken before it.
    fn claim_pieces(
        &mut self,
        id: u32,
        addr: u64,
        len: u64,
        hw: Kind,
        local: bool,
    ) -> Result<Vec<usize>> {
        let pieces = debugregs::pieces(addr, len);
        if local {
            // a frame's local: perf breakpoints, which go with pgdbg's
            // files (inferior/perfwatch.rs)
            let owner = format!("watchpoint {id}");
            let pid = self.pid;
            let rw = hw == Kind::ReadWrite;
            let mut slots = Vec::new();
            for (a, n) in pieces {
                let open = |sig_data| {
                    crate::perf::open_trap_watch(pid, a, n, rw, sig_data).map_err(|e| {
                        if e.raw_os_error() == Some(libc::ENOSPC) {
                            anyhow!(
                                "no hardware breakpoint left in backend {pid} for {owner}: the kernel keeps the debug registers a ptrace watch has used (a watchpoint on a global, waits trace --ptrace, gdb) reserved until the backend exits"
                            )
                        } else {
                            anyhow!(crate::perf::refused_line(
                                &format!("{owner}'s breakpoint"),
                                pid,
                                &e
                            ))
                        }
                    })
                };
                match self.target.claim_perf_watch(&owner, open) {
                    Ok(s) => slots.push(s),
                    Err(e) => {
                        for s in slots {
                            let _ = self.target.release_watch(s);
                        }
                        return Err(e);
                    }
                }
            }
            return Ok(slots);
        }
        let owners = self.target.watch_owners();
        let free = owners.iter().filter(|o| o.is_none()).count();
        if pieces.len() > free && free > 0 {
            // (none free: claim_watch's own words)
            let mut users: Vec<&str> = Vec::new();
            for o in owners.iter().flatten() {
                if !users.contains(&o.as_str()) {
                    users.push(o);
                }
            }
            bail!(
                "not enough hardware debug registers left: watchpoint {id} needs {} for its {len} bytes, {free} free; {} in use by {}",
                pieces.len(),
                debugregs::SLOTS - free,
                users.join(", ")
            );
        }
        let owner = format!("watchpoint {id}");
        let mut slots = Vec::new();
        for (a, n) in pieces {
            match self.target.claim_watch(&owner, a, hw, n) {
                Ok(s) => slots.push(s),
                Err(e) => {
                    for s in slots.into_iter().rev() {
                        let _ = self.target.release_watch(s);
                    }
                    return Err(e);
                }
            }
        }
        Ok(slots)
    }

    /// Put watchpoint `id` back in a debug register (`enable`): its value
    /// read again, as gdb does.
    pub(crate) fn arm_watch(&mut self, id: u32) -> Result<()> {
        let Some(w) = self.bps.get_mut(id).and_then(|b| b.watch.clone()) else {
            return Ok(());
        };
        if !w.slots.is_empty() {
            return Ok(());
        }
        if let Some(sc) = &w.scope
            && !self.scope_alive(sc)?
        {
            bail!(
                "the frame of its local ({}) has returned: delete it and watch the local again in a live frame",
                sc.function
            );
        }
        let mut now = vec![0u8; w.len as usize];
        self.target.read(w.addr, &mut now)?;
        self.drop_stale_probe_watch();
        let hw = match w.kind {
            WatchKind::Write => Kind::Write,
            _ => Kind::ReadWrite,
        };
        if let Some(sc) = &w.scope {
            self.check_goals(&[sc.ret])?;
        }
        let slots = self.claim_pieces(id, w.addr, w.len, hw, w.scope.is_some())?;
        if let Some(sc) = &w.scope
            && let Err(e) = self.insert_int3(sc.ret)
        {
            for s in slots {
                let _ = self.target.release_watch(s);
            }
            return Err(e);
        }
        if let Some(w) = self.bps.get_mut(id).and_then(|b| b.watch.as_mut()) {
            w.slots = slots;
            w.old = now;
            if let Some(sc) = w.scope.as_mut() {
                sc.armed = true;
            }
        }
        Ok(())
    }

    /// The frame of the backend's stack that holds the `len` bytes at
    /// `addr` (a local), as a watchpoint's scope: the physical frame
    /// whose stack pointer and CFA enclose them (the innermost frame's
    /// red zone included).  Refused in one line when no frame pgdbg
    /// unwinds holds them (below the stack pointer, or above the frames).
    fn local_scope(&mut self, head: &str, addr: u64, len: u64) -> Result<Scope> {
        let frames = self.frames()?.clone();
        let end = addr.saturating_add(len);
        let mut phys: Vec<&Frame> = Vec::new();
        for f in &frames {
            if phys.last().is_none_or(|p| p.phys != f.phys) {
                phys.push(f);
            }
        }
        for (k, f) in phys.iter().enumerate() {
            let (Some(sp), Some(cfa)) = (f.regs.get(7), f.cfa) else {
                break;
            };
            // the innermost frame's locals may lie in its red zone
            let low = if k == 0 { sp.saturating_sub(128) } else { sp };
            if !(low <= addr && end <= cfa) {
                continue;
            }
            let ret = self.target.read_u64(cfa - 8)?;
            let function = f.function.clone().unwrap_or_else(|| "??".into());
            let Some(caller) = phys.get(k + 1) else {
                bail!(
                    "{head}: {addr:#x} is a local of the outermost frame pgdbg unwinds ({function}), which has no caller to return to: not watched"
                );
            };
            if caller.pc != ret || !self.follows_a_call(ret) {
                bail!(
                    "{head}: the word below {function}'s frame ({ret:#x}) is not a return address (no call ends there): its frame may be unwound wrongly; not watched"
                );
            }
            self.check_goals(&[ret])?;
            return Ok(Scope {
                cfa,
                ret,
                function,
                armed: false,
            });
        }
        bail!(
            "{head}: {addr:#x} is on the backend's stack but in no frame pgdbg unwinds (below the stack pointer, or past the frames it finds): not watched"
        )
    }

    /// A call instruction ends at `ret` (2 to 7 bytes before it: `call
    /// rel32`, `call reg`, `call [mem]`): a true return address, where an
    /// int3 lies on an instruction's first byte.
    fn follows_a_call(&self, ret: u64) -> bool {
        let mut buf = [0u8; 7];
        if self.target.read(ret - 7, &mut buf).is_err() {
            return false;
        }
        (2..=7usize).any(|k| {
            let mut d = iced_x86::Decoder::with_ip(
                64,
                &buf[7 - k..],
                ret - k as u64,
                iced_x86::DecoderOptions::NONE,
            );
            let i = d.decode();
            !i.is_invalid()
                && i.len() == k
                && matches!(
                    i.flow_control(),
                    iced_x86::FlowControl::Call | iced_x86::FlowControl::IndirectCall
                )
        })
    }

    /// The frame of a watched local is still there: the stack pointer
    /// below its CFA, its return address in place.
    pub(crate) fn scope_alive(&self, sc: &Scope) -> Result<bool> {
        let rsp = self.target.regs()?.rsp;
        Ok(rsp < sc.cfa && self.target.read_u64(sc.cfa - 8).ok() == Some(sc.ret))
    }

    /// The watchpoints on locals whose frame is gone (returned, or left
    /// by an ERROR's longjmp): deleted, as gdb deletes them; Some: gdb's
    /// words for each, then where the backend is (the stop's text) unless
    /// `said_where` (a step's own text has just said it).
    pub(crate) fn end_left_scopes(&mut self, said_where: bool) -> Result<Option<String>> {
        let scoped = self.bps.scoped_watches();
        if scoped.is_empty() || self.target.is_gone() {
            return Ok(None);
        }
        let mut left = Vec::new();
        for (id, sc) in scoped {
            if !self.scope_alive(&sc)? {
                left.push(id);
            }
        }
        if left.is_empty() {
            return Ok(None);
        }
        self.delete_breakpoints(&left)?;
        self.hit = None;
        let mut text = String::new();
        for id in &left {
            text.push_str(&format!(
                "\nWatchpoint {id} deleted because the program has left the block in\nwhich its expression is valid.\n"
            ));
        }
        if said_where {
            return Ok(Some(text));
        }
        let at = self.stop_where("watchpoint-scope", Some(left))?;
        Ok(Some(format!("{text}{at}")))
    }

    /// A probe's debug register outside the probe loop (its arming failed
    /// after the register was taken): given back.  The probe loop gives
    /// its register back itself; a user command never runs inside it.
    fn drop_stale_probe_watch(&mut self) {
        if let Some(slot) = self.probe_watch.take() {
            let _ = self.target.release_watch(slot);
        }
    }

    /// One line per debug register given back because pgdbg's SIGTRAP
    /// handler was removed while it was armed (its table of armed
    /// addresses full): the watchpoints (and a probe's word) that held one
    /// no longer do.
    pub(crate) fn say_dropped_watches(&mut self) {
        let mut dropped = self.target.take_dropped_watches();
        if dropped.is_empty() {
            return;
        }
        let mut seen: Vec<String> = Vec::new();
        dropped.retain(|d| {
            let new = !seen.contains(d);
            seen.push(d.clone());
            new
        });
        let armed = self.target.armed_watch_slots();
        let free = |s: usize| !armed.contains(&s);
        // a watchpoint with a piece given back is watched no more: its
        // other pieces given back too
        let mut rest = Vec::new();
        for b in self.bps.list.iter_mut() {
            if let Some(w) = b.watch.as_mut()
                && w.slots.iter().any(|&s| free(s))
            {
                rest.extend(w.slots.drain(..).filter(|&s| !free(s)));
            }
        }
        for s in rest {
            let _ = self.target.release_watch(s);
        }
        if self.probe_watch.is_some_and(free) {
            self.probe_watch = None;
        }
        for who in dropped {
            self.say(&format!(
                "pgdbg: {who} is no longer watched: pgdbg's SIGTRAP handler in the backend was removed (its table of armed addresses is full), and a debug register left without it would kill the backend if pgdbg and its guardian died"
            ));
        }
    }

    /// After a single step: the user watchpoints the stepped instruction
    /// fired (its SIGTRAP is the step's: `Target::take_step_watch`),
    /// judged as any hit (Some: the stop's report, as gdb reports a
    /// watchpoint that triggers during `stepi`/`next`/`step`).
    pub(crate) fn step_watch_hit(&mut self) -> Result<Option<Ran>> {
        let stepped = self.target.stepped();
        let dr6 = self.target.take_step_watch();
        let dr6 = if stepped {
            dr6 | self.locals_changed_in_step()?
        } else {
            dr6
        };
        if dr6 == 0 || !self.fired_user_watch(dr6) {
            return Ok(None);
        }
        self.last_stop = Some(Stop::HardwareBreak { dr6 });
        self.judge_watch(dr6, false)
    }

    /// The slots of the watchpoints on locals (perf breakpoints) whose
    /// bytes a single step changed: a perf breakpoint's SIGTRAP during a
    /// step is merged into the step's (inferior/perfwatch.rs), so its
    /// writes are told by the value (a read in a step is not seen).
    fn locals_changed_in_step(&mut self) -> Result<u64> {
        let mut bits = 0;
        let watched: Vec<(u64, u64, Vec<u8>, Vec<usize>)> = self
            .bps
            .list
            .iter()
            .filter(|b| b.enabled)
            .filter_map(|b| b.watch.as_ref())
            .filter(|w| w.scope.is_some() && !w.slots.is_empty() && w.kind != WatchKind::Read)
            .map(|w| (w.addr, w.len, w.old.clone(), w.slots.clone()))
            .collect();
        for (addr, len, old, slots) in watched {
            let mut now = vec![0u8; len as usize];
            if self.target.read(addr, &mut now).is_ok() && now != old {
                for s in slots {
                    bits |= 1u64 << s;
                }
            }
        }
        Ok(bits)
    }

    /// `step_watch_hit` as the end of a step command: the stop's
    /// `commands` block run, its `continue` continuing.
    pub(crate) fn step_watch_stop(&mut self) -> Result<Option<Outcome>> {
        let Some(ran) = self.step_watch_hit()? else {
            return Ok(None);
        };
        Ok(Some(match self.after_stop(ran)? {
            Some(done) => done,
            None => self.continue_running()?,
        }))
    }

    /// A slot of a user watchpoint fired.
    pub(crate) fn fired_user_watch(&self, dr6: u64) -> bool {
        !self.bps.watches_fired(dr6).is_empty()
    }

    /// The watchpoints whose slot fired: the stop's report (Some) when one
    /// of them stops, as gdb judges (a write that left the value as it was
    /// is no stop for `watch`, a change is none for `rwatch`; conditions,
    /// ignore counts), else None: the backend goes on.  `always`: the
    /// stop is reported all the same (a step that ended on it).
    pub(crate) fn judge_watch(&mut self, dr6: u64, always: bool) -> Result<Option<Ran>> {
        self.hit = None;
        // a local's frame left by a longjmp: its bytes are another frame's
        if let Some(text) = self.end_left_scopes(false)? {
            return Ok(Some(Ran::new(ProbeEnd::Stopped, text)));
        }
        let mut seen = Vec::new();
        for id in self.bps.watches_fired(dr6) {
            let Some(w) = self.bps.get_mut(id).and_then(|b| b.watch.clone()) else {
                continue;
            };
            let mut new = vec![0u8; w.len as usize];
            self.target.read(w.addr, &mut new)?;
            let s = match watch_seen(w.kind, &w.old, &new) {
                WatchSeen::Nothing if always => WatchSeen::Changed,
                s => s,
            };
            if let Some(w) = self.bps.get_mut(id).and_then(|b| b.watch.as_mut()) {
                w.old = new.clone();
            }
            if s != WatchSeen::Nothing {
                seen.push((id, s, w.old, new, w.ty));
            }
        }
        if seen.is_empty() {
            return Ok(None);
        }
        let conds: Vec<(u32, Option<String>)> = seen
            .iter()
            .filter_map(|(id, ..)| self.bps.get_mut(*id).map(|b| (*id, b.condition.clone())))
            .collect();
        let (passing, note) = self.conditions_of(conds);
        if passing.is_empty() && !always {
            return Ok(None);
        }
        self.set_passing(passing.clone());
        let mut text = String::new();
        for (id, s, old, new, ty) in &seen {
            if !passing.contains(id) && !always {
                continue;
            }
            let Some(b) = self.bps.get_mut(*id) else {
                continue;
            };
            b.hits += 1;
            let kind = b.watch.as_ref().map_or(WatchKind::Write, |w| w.kind);
            let spec = b.spec.clone();
            let show = |bytes: &Vec<u8>, me: &Session| {
                let v = Value {
                    ty: ty.clone(),
                    loc: ValLoc::Bytes(bytes.clone()),
                };
                format_value(me, &v, Radix::Natural)
            };
            text.push_str(&format!("\n{} {id}: {spec}\n\n", kind.label()));
            match s {
                WatchSeen::Changed => text.push_str(&format!(
                    "Old value = {}\nNew value = {}\n",
                    show(old, self),
                    show(new, self)
                )),
                _ => text.push_str(&format!("Value = {}\n", show(new, self))),
            }
        }
        let at = self.stop_where("watchpoint", Some(passing))?;
        Ok(Some(Ran::new(
            ProbeEnd::Stopped,
            format!("{text}{at}{note}"),
        )))
    }

    /// Where a watchpoint's stop (`reason`) is, as gdb shows it: the frame
    /// line and the source line, then the displays; the stop's event
    /// emitted.
    fn stop_where(&mut self, reason: &str, breakpoints: Option<Vec<u32>>) -> Result<String> {
        // where: gdb shows the address unless an is_stmt row of the line
        // table starts at the pc (a data breakpoint traps after the
        // instruction that did it, mostly inside a line)
        let pc = self.target.regs()?.rip;
        let line_start = self
            .line_sequence_at(pc)
            .is_some_and(|(seq, bias)| seq.stmt_start(pc - bias).is_some());
        self.stop_state().line_start = line_start;
        // gdb (skip_inline_frames) leaves out the inlined calls that begin
        // at the pc: the stop is shown at their call site
        let frames = self.frames()?.clone();
        let hide = frames
            .iter()
            .take_while(|f| {
                f.inlined
                    && f.phys == 0
                    && f.die.is_some_and(|d| {
                        self.inline_entry_at(pc, d) == Some(pc) || self.enters_inline_at(pc, d)
                    })
            })
            .count();
        if hide > 0 {
            let st = self.stop_state();
            st.hide_inline = hide;
            st.frames = None;
        }
        let head = self.frame_line(0, true)?;
        let src = self
            .source_line(0)
            .map(|s| format!("\n{s}"))
            .unwrap_or_default();
        let frame = self.frames()?.first().cloned();
        self.emit(Event::Stop {
            address: Some(format!("{pc:#x}")),
            breakpoints,
            file: Some(
                frame
                    .as_ref()
                    .and_then(|f| f.file.as_deref().map(|p| basename(p).to_string())),
            ),
            function: Some(frame.as_ref().and_then(|f| f.function.clone())),
            line: Some(frame.as_ref().and_then(|f| f.line)),
            reason: reason.into(),
            signal: None,
        });
        let displays = self.display_lines();
        Ok(format!("{head}{src}{displays}"))
    }

    /// `set var LVALUE = EXPR`: EXPR converted to LVALUE's type and
    /// written over it; nothing said on success, as gdb.  Refused, nothing
    /// written, where LVALUE is not in a writable data mapping (code,
    /// read-only data) or EXPR cannot be converted.
    pub fn set_var(&mut self, lhs: &str, rhs: &str) -> Result<String> {
        let target = self.eval_expr(lhs)?;
        let ValLoc::Memory(addr) = target.loc else {
            bail!("Left operand of assignment is not an lvalue.");
        };
        let len = size_of(self, &target.ty);
        if matches!(&*strip(self, &target.ty), Type::Function { .. }) {
            bail!("set var {lhs}: {addr:#x} is a function (code): nothing written");
        }
        let bytes = self.converted(&target.ty, len, rhs)?;
        let end = addr.saturating_add(len);
        self.check_data_range(&format!("set var {lhs}"), addr, len, ": nothing written")?;
        let mut old = vec![0u8; len as usize];
        self.target.read(addr, &mut old)?;
        // a write that failed partway (word by word): what is there now
        // read back and said, the event emitted with it
        let failed = self.target.write(addr, &bytes).err().map(|e| {
            let mut now = vec![0u8; len as usize];
            let back = self.target.read(addr, &mut now).is_ok();
            (e, back.then_some(now))
        });
        let written = match &failed {
            None => bytes.clone(),
            Some((e, None)) => bail!(
                "set var {lhs}: {e:#}; {addr:#x} cannot be read back: possibly partially written"
            ),
            Some((e, Some(now))) if *now == old => bail!("set var {lhs}: {e:#}: nothing written"),
            Some((_, Some(now))) => now.clone(),
        };
        // a watchpoint over those bytes: ptrace's write is no hit
        for b in self.bps.list.iter_mut() {
            if let Some(w) = b.watch.as_mut()
                && w.addr < end
                && addr < w.addr + w.len
            {
                let _ = self.target.read(w.addr, &mut w.old);
            }
        }
        self.stop.forget();
        let show = |bytes: Vec<u8>, me: &Session| {
            let v = Value {
                ty: target.ty.clone(),
                loc: ValLoc::Bytes(bytes),
            };
            format_value(me, &v, Radix::Natural)
        };
        let (old_text, new_text) = (show(old, self), show(written, self));
        self.emit(Event::SetVar {
            address: format!("{addr:#x}"),
            lvalue: lhs.to_string(),
            new: new_text.clone(),
            old: old_text,
            size: len,
        });
        if let Some((e, _)) = failed {
            bail!("set var {lhs}: partially written ({e:#}): it now holds {new_text}");
        }
        Ok(String::new())
    }

    /// Refused in one line (`head`: the command and its operand; `tail`
    /// after the reason) unless the `len` bytes at `addr` lie in one
    /// writable, non-executable mapping of the backend's data, none of
    /// pgdbg's own pages (its SIGTRAP handler's table and call record, a
    /// detour's ring).  Ok(true): they are on the backend's stack (a
    /// frame's local).
    fn check_data_range(&self, head: &str, addr: u64, len: u64, tail: &str) -> Result<bool> {
        let maps = procfs::maps(self.pid)?;
        let end = addr.saturating_add(len);
        let Some(m) = maps.iter().find(|m| m.start <= addr && end <= m.end) else {
            bail!("{head}: {addr:#x} ({len} bytes) is not inside one mapping of the backend{tail}");
        };
        let rsp = self.target.regs().map(|r| r.rsp).unwrap_or(0);
        let on_stack = m
            .special
            .as_deref()
            .is_some_and(|s| s.starts_with("[stack"))
            || (m.start..m.end).contains(&rsp);
        if self
            .target
            .own_pages()
            .iter()
            .any(|&(s, e)| s < end && addr < e)
        {
            bail!(
                "{head}: {addr:#x} is in pgdbg's own pages in the backend (its SIGTRAP handler's or a probe's), not the backend's data{tail}"
            );
        }
        let what = m
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .or_else(|| m.special.clone())
            .unwrap_or_else(|| "anonymous".into());
        if m.perms.as_bytes().get(2) == Some(&b'x') {
            bail!("{head}: {addr:#x} is in code (an executable mapping of {what}){tail}");
        }
        if !m.perms.starts_with("rw") {
            bail!(
                "{head}: {addr:#x} is in a read-only mapping of {what} ({}){tail}",
                m.perms
            );
        }
        Ok(on_stack)
    }

    /// `rhs` as the `len` bytes of a `ty` (integers, enums, bools,
    /// pointers, floats; a string literal into a char array).
    fn converted(&mut self, ty: &TypeRef, len: u64, rhs: &str) -> Result<Vec<u8>> {
        let t = strip(self, ty);
        let tname = crate::debuginfo::types::type_name(self, ty);
        if let Type::Array { elem, count } = &*t {
            let is_char = matches!(&*strip(self, elem), Type::Base { size: 1, enc, .. }
                if matches!(enc, Encoding::SignedChar | Encoding::UnsignedChar));
            let Some(s) = string_literal(rhs) else {
                bail!("set var: a {tname} is set from a string literal (\"...\") only");
            };
            if !is_char {
                bail!("set var: cannot assign a string to a {tname}");
            }
            let n = count.unwrap_or(0) as usize;
            if s.len() + 1 > n {
                bail!(
                    "set var: the string's {} bytes and its NUL do not fit a {tname}: nothing written",
                    s.len()
                );
            }
            let mut out = s;
            out.resize(n, 0);
            return Ok(out);
        }
        let v = self.eval_expr(rhs)?;
        let vt = strip(self, &v.ty);
        if matches!(&*vt, Type::Struct { .. } | Type::Void) {
            bail!(
                "set var: cannot convert a {} to {tname}",
                crate::debuginfo::types::type_name(self, &v.ty)
            );
        }
        let sc = scalar(self, &v)?;
        let is_float = matches!(sc, crate::expr::eval::Scalar::F(_));
        let int = |sc: crate::expr::eval::Scalar| -> i64 {
            match sc {
                crate::expr::eval::Scalar::F(f) => f as i64,
                s => s.as_i64(),
            }
        };
        let le = |v: i64, n: u64| v.to_le_bytes()[..n as usize].to_vec();
        Ok(match &*t {
            Type::Base {
                enc: Encoding::Float,
                size,
                ..
            } => match size {
                4 => (sc.as_f64() as f32).to_le_bytes().to_vec(),
                8 => sc.as_f64().to_le_bytes().to_vec(),
                _ => bail!("set var: a {size}-byte float ({tname}) is not supported"),
            },
            Type::Base {
                enc: Encoding::Bool,
                size,
                ..
            } => le(sc.truthy() as i64, *size),
            Type::Base { size, .. } | Type::Enum { size, .. } if matches!(size, 1 | 2 | 4 | 8) => {
                le(int(sc), *size)
            }
            Type::Pointer { .. } if !is_float => le(int(sc), 8),
            Type::Pointer { .. } => bail!("set var: cannot convert a floating value to {tname}"),
            _ => bail!(
                "set var: cannot assign to a {tname} ({len} bytes): integers, enums, bools, pointers, floats and char arrays (from a string) only"
            ),
        })
    }
}

/// `"..."` as bytes, C's simple escapes read; None when `s` is not one
/// string literal.
fn string_literal(s: &str) -> Option<Vec<u8>> {
    let inner = s.trim().strip_prefix('"')?.strip_suffix('"')?;
    let mut out = Vec::new();
    let mut it = inner.bytes();
    while let Some(c) = it.next() {
        match c {
            b'"' => return None,
            b'\\' => out.push(match it.next()? {
                b'n' => b'\n',
                b't' => b'\t',
                b'r' => b'\r',
                b'0' => 0,
                b'\\' => b'\\',
                b'"' => b'"',
                b'\'' => b'\'',
                _ => return None,
            }),
            c => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_literals_with_escapes() {
        assert_eq!(string_literal("\"ab\\n\""), Some(b"ab\n".to_vec()));
        assert_eq!(string_literal("\"a\"b\""), None);
        assert_eq!(string_literal("abc"), None);
    }
}
