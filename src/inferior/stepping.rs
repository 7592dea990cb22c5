//! Going past one of our int3s without removing it for the target's other
//! threads of control: a `push`, `endbr64`/`nop` or register move at the
//! breakpoint is emulated, anything else single-stepped with the original
//! byte back for that one instruction.

use super::*;
use crate::arch::regs;

impl Target {
    /// Execute one instruction with the original code at `addr` (where an
    /// int3 of ours is inserted and `rip == addr`), then put the int3 back.
    /// Signals arriving meanwhile are deferred to the next resume.
    pub fn step_over_breakpoint(&mut self, addr: u64) -> Result<Option<Stop>> {
        let orig = match self.inserted.get(&addr) {
            Some(&b) => b,
            None => return Ok(None),
        };
        // rip put back onto this int3 with its SIGTRAP still queued
        // (wait.rs): that trap taken first; where it stays queued (stop
        // after stop), nothing is emulated: a single step drops it
        // (`single_step_raw`) before the instruction runs
        // (its place recorded as a resume point: forgotten once left)
        let flagged = self.resume_point_on_int3 == Some(addr);
        let queued = match self.take_queued_trap_here()? {
            Err(end) => return Ok(Some(end)),
            Ok(queued) => {
                self.trap_queued_on_int3 = None;
                queued
            }
        };
        if !queued && self.emulate_at(addr)? {
            self.left_flagged_int3(flagged)?;
            return Ok(None);
        }
        self.write(addr, &[orig])?;
        let res = self.single_step_user(!queued);
        // Re-insert even when the step failed, unless the target is gone;
        // a one-byte instruction leaves rip one past the int3: recorded
        // for the guardian before the int3 is back (hold.rs), by
        // single_step_user when it returned Ok, else here; where neither
        // the record nor the disarm succeeds the int3 stays out (the
        // backend is safe without it)
        if !self.state.is_gone() {
            if res.is_err() {
                self.keep_resume_point()?;
            }
            self.write(addr, &[INT3])?;
        } else {
            self.inserted.clear();
        }
        self.left_flagged_int3(flagged)?;
        res
    }

    /// After the step over an int3 whose own address was recorded as the
    /// resume point (`flagged`, pending.rs `flag_queued_trap`, whether its
    /// SIGTRAP was taken here or before): that point no longer holds once
    /// the backend is past it.  Forgotten unless a new one replaced it
    /// (one past an int3 of ours), so that it cannot match a later, real
    /// trap of the int3 before it (with the same rsp) should pgdbg die
    /// then.  Where the SIGCONT handler's copy cannot be cleared, it no
    /// longer releases the backend by itself.
    fn left_flagged_int3(&mut self, flagged: bool) -> Result<()> {
        if !flagged
            || self.state.is_gone()
            || self.regs()?.rip == self.resume_point_on_int3.unwrap_or(0)
        {
            return Ok(());
        }
        self.resume_point_on_int3 = None;
        if self.int3_behind_rip()?.is_some() {
            return Ok(());
        }
        if let Err(e) = self.forget_resume_point() {
            self.disarm_self_release(e)?;
        }
        Ok(())
    }

    /// One instruction of the target (`stepi`, `next`, `finish`'s
    /// longjmp watch): over one of our int3s at `rip` with the original
    /// byte back for that instruction (`step_over_breakpoint`, the int3
    /// put back), else a plain PTRACE_SINGLESTEP.  A single step leaves the
    /// trap flag set in the backend until the next resume, and a tracer
    /// that dies does not clear it (only PTRACE_DETACH does): the SIGTRAP
    /// handler (which takes such a trap and clears the flag) and the
    /// guardian (whose detach clears it) come first, the backend held.
    /// Signals arriving meanwhile are deferred to the next resume.  Some:
    /// the backend ended, or the instruction faulted.
    pub fn step_instruction(&mut self) -> Result<Option<Stop>> {
        if self.state.is_gone() {
            return Err(super::Gone::Backend.into());
        }
        let rip = self.regs()?.rip;
        if self.breakpoint_inserted(rip) {
            return self.step_over_breakpoint(rip);
        }
        self.ensure_trap_handler();
        self.hold_for_change()?;
        self.single_step_user(true)
    }

    /// A single step of the backend's own code.  A `pushf`/`pushfq` is
    /// emulated instead (the flags word written below `rsp`, then `rsp`
    /// and `rip` moved on): stepped with the trap flag set it would push
    /// that flag, and a later `popf` would set it in the backend (a
    /// SIGTRAP after pgdbg let go; a fix of the pushed word after the step
    /// would leave that window open if pgdbg died in between).  The word
    /// pushed is the flags as the backend has them, RF and VM clear, as
    /// the instruction pushes them.  Where the word cannot be written the
    /// instruction is stepped as any other, and so it is without
    /// `emulate_pushf` (an int3's SIGTRAP still queued: moved on without a
    /// resume, rip would be one past the int3 with it pending, taken for
    /// a new hit and rewound: the `pushf` twice).
    ///
    /// After the step, where `rip - 1` is one of our int3s (a jump onto the
    /// instruction after a one-byte one under an int3), the place is
    /// recorded for the guardian and the SIGCONT handler, which would
    /// otherwise take it for a trap not rewound and run that instruction
    /// twice (hold.rs `note_resume_at`).
    fn single_step_user(&mut self, emulate_pushf: bool) -> Result<Option<Stop>> {
        let before = self.regs()?;
        let mut code = [0u8; 15];
        let n = (0..=code.len())
            .rev()
            .find(|&n| self.read(before.rip, &mut code[..n]).is_ok())
            .unwrap_or(0);
        let pushf = pushed_flags_size(&code[..n]);
        let res = match pushf {
            Some((len, size)) if emulate_pushf && self.emulate_pushf(&before, len, size)? => None,
            _ => {
                let res = self.single_step_raw()?;
                if let (None, Some((len, size))) = (&res, pushf) {
                    // stepped after all: the pushed word's trap flag off
                    // again (a window remains if pgdbg dies just here)
                    self.clear_pushed_trap_flag(&before, len, size)?;
                }
                res
            }
        };
        self.keep_resume_point()?;
        Ok(res)
    }

    /// After a step, unless the target is gone: where it resumes recorded
    /// (`note_resume_point`); where that fails, the SIGCONT handler would
    /// rewind over the instruction just run: it no longer releases the
    /// backend by itself.
    fn keep_resume_point(&mut self) -> Result<()> {
        if !self.state.is_gone()
            && let Err(e) = self.note_resume_point()
        {
            self.disarm_self_release(e)?;
        }
        Ok(())
    }

    /// `pushf` (`size` 2) or `pushfq` (8) of `len` bytes at `r.rip`, done
    /// by pgdbg: false (nothing changed) where the word cannot be written.
    /// `r.eflags` is the backend's own (PTRACE_GETREGS hides a trap flag
    /// the kernel forced for a step).
    /// Not at a stop with a system call to restart (`orig_rax` set: the
    /// kernel would move the new `rip` back by the `syscall`'s length).
    fn emulate_pushf(&mut self, r: &Registers, len: u64, size: u64) -> Result<bool> {
        const RF_VM: u64 = (1 << 16) | (1 << 17);
        if r.orig_rax as i64 >= 0 {
            return Ok(false);
        }
        let flags = r.eflags & !RF_VM;
        let at = r.rsp.wrapping_sub(size);
        // below rsp: the instruction itself would write there
        if self
            .write(at, &flags.to_le_bytes()[..size as usize])
            .is_err()
        {
            return Ok(false);
        }
        let mut moved = *r;
        moved.rsp = at;
        moved.rip = r.rip + len;
        if let Err(e) = self.note_resume_at(moved.rip, moved.rsp) {
            // as in `emulate_at`: the handler no longer releases the
            // backend by itself
            self.disarm_self_release(e)?;
        }
        self.set_regs(&moved)?;
        Ok(true)
    }

    /// After a single step over `pushf`/`pushfq` (`len` bytes, `size`
    /// pushed) from `before`: the word it pushed with the step's trap flag
    /// gets that flag cleared, unless the backend had set it itself.
    fn clear_pushed_trap_flag(&mut self, before: &Registers, len: u64, size: u64) -> Result<()> {
        const TRAP_FLAG: u64 = 1 << 8;
        if before.eflags & TRAP_FLAG != 0 || self.state.is_gone() {
            return Ok(());
        }
        let after = self.regs()?;
        if after.rip != before.rip + len || after.rsp != before.rsp.wrapping_sub(size) {
            return Ok(());
        }
        let mut b = [0u8; 2];
        self.read(after.rsp, &mut b)?;
        let word = u16::from_le_bytes(b);
        if word as u64 & TRAP_FLAG != 0 {
            self.write(
                after.rsp,
                &((word as u64 & !TRAP_FLAG) as u16).to_le_bytes(),
            )?;
        }
        Ok(())
    }

    /// A cheaper place than `entry` for a probe that only reads argument
    /// registers: the first `mov r64, r64` after the `endbr64`/`push`/`nop` run
    /// that starts a function.  Up to there the argument registers hold
    /// what they held at entry (pushes only move rsp), and stepping over a
    /// register move writes no memory.  `entry` itself when the function
    /// starts otherwise.
    pub fn register_only_point(&self, entry: u64) -> u64 {
        let mut code = [0u8; 32];
        if self.read(entry, &mut code).is_err() {
            return entry;
        }
        // someone's uprobe on the entry (an int3 the file does not have):
        // the kernel runs the file's instruction there, so the point past
        // it is found in the file's bytes; the int3 of the stop itself
        // never goes over the foreign one (`insert_breakpoint` refuses)
        let live = code;
        if code.contains(&INT3)
            && let Some(file) = super::foreign::mapped_file_bytes(self.pid(), entry, code.len())
        {
            for (m, f) in code.iter_mut().zip(file) {
                if *m == INT3 {
                    *m = f;
                }
            }
        }
        let mut off = 0usize;
        while off + 4 <= code.len() {
            let Some((len, _)) = regs::decode_push_or_nop(&code[off..]) else {
                break;
            };
            off += len as usize;
        }
        // (a uprobe's int3 on that move itself, `GetCachedPlan+4` after
        // two two-byte pushes: the stop goes at the entry instead, where
        // the argument registers hold the same)
        match regs::decode_mov_reg(&code[off..]) {
            Some((_, dst, _)) if off > 0 && dst != 4 && live[off] != INT3 => entry + off as u64,
            _ => entry,
        }
    }

    /// Step over simple instructions without single-stepping: function
    /// prologues start with `push %reg` or `endbr64`, which are emulated
    /// (the int3 stays in place, no extra stop).  Returns false when the
    /// instruction at `addr` is not one of those.
    pub(super) fn emulate_at(&mut self, addr: u64) -> Result<bool> {
        let code = match self.code_cache.get(&addr) {
            Some(c) => *c,
            None => {
                let mut code = [0u8; 4];
                if self.read(addr, &mut code).is_err() {
                    return Ok(false);
                }
                self.code_cache.insert(addr, code);
                code
            }
        };
        let mut r = self.regs()?;
        if r.rip != addr {
            return Ok(false);
        }
        if let Some((len, dst, src)) = regs::decode_mov_reg(&code) {
            // a register copy: no memory touched (never into rsp here)
            if dst == 4 {
                return Ok(false);
            }
            let v = r.gpr(src);
            *r.gpr_mut(dst) = v;
            r.rip = addr + len;
            if self.note_resume_at(r.rip, r.rsp).is_err() {
                // single-stepped instead
                return Ok(false);
            }
            self.set_regs(&r)?;
            return Ok(true);
        }
        let Some((len, pushed)) = regs::decode_push_or_nop(&code) else {
            return Ok(false);
        };
        if let Some(v) = pushed.map(|n| r.gpr(n)) {
            let sp = r.rsp - 8;
            if self.write(sp, &v.to_le_bytes()).is_err() {
                // e.g. a stack page not grown yet: single-step instead
                return Ok(false);
            }
            r.rsp = sp;
        }
        r.rip = addr + len;
        // before the write: a one-byte push or nop leaves rip one past the
        // int3, which the guardian must not take for a trap (hold.rs);
        // not written: single-stepped instead (the word pushed lies below
        // rsp, which the step writes again)
        if self.note_resume_at(r.rip, r.rsp).is_err() {
            return Ok(false);
        }
        self.set_regs(&r)?;
        Ok(true)
    }

    /// Single-step once; returns Some(stop) only when the target died or a
    /// breakpoint was hit in the single instruction (cannot happen for the
    /// instruction itself).
    pub(super) fn single_step_raw(&mut self) -> Result<Option<Stop>> {
        loop {
            ptrace::step(self.pid, None).map_err(|e| anyhow!("PTRACE_SINGLESTEP failed ({e})"))?;
            self.set_running();
            let status = self.waitpid_blocking()?;
            if let Some(end) = self.ended(&status) {
                return Ok(Some(end));
            }
            match status {
                WaitStatus::Stopped(_, Signal::SIGTRAP) => {
                    self.mark_stopped();
                    let code = self.siginfo_code().unwrap_or(TRAP_TRACE);
                    if code == TRAP_TRACE || code == TRAP_BRKPT || code == TRAP_HWBKPT {
                        self.note_step_dr6();
                        self.stepped = true;
                        return Ok(None);
                    }
                    // Some other trap (a late watchpoint hit): never handed to
                    // the backend (a SIGTRAP kills it); step again.
                }
                WaitStatus::Stopped(_, sig) if signals::pass_through(sig) => {
                    // A signal arrived before the instruction ran: defer it,
                    // step again without it.
                    self.mark_stopped();
                    self.defer(sig);
                }
                WaitStatus::Stopped(_, sig) => {
                    self.mark_stopped();
                    // the SIGILL of a jump a uprobe took over, queued
                    // before this step (`jumpover.rs`): dropped, once per
                    // jump, and the step taken again over original bytes
                    if self.fault_in_taken_over_jump(sig)? {
                        continue;
                    }
                    // The instruction itself faults: report it (stepping
                    // again would fault forever).
                    self.pending_fault = Some(sig);
                    return Ok(Some(Stop::Signal(sig)));
                }
                WaitStatus::PtraceEvent(_, sig, _) => {
                    self.mark_stopped();
                    self.interrupt_stop_seen(sig);
                    // step again
                }
                _ => {
                    self.mark_stopped();
                }
            }
        }
    }
}

impl Target {
    /// After a single step with debug registers armed: the slots that
    /// fired during it (the stepped instruction touched a watched address:
    /// one SIGTRAP for the step and the watchpoint) kept for
    /// `take_step_watch`, and DR6 cleared, so that no stale bit is read
    /// later as a hit (an int3's SIGTRAP does not clear it).
    fn note_step_dr6(&mut self) {
        if !self.debugregs_dirty {
            return;
        }
        let dr6 = self.debugreg(crate::arch::debugregs::DR6).unwrap_or(0);
        if crate::arch::debugregs::fired(dr6) != 0 {
            self.step_dr6 |= crate::arch::debugregs::fired(dr6);
            let _ = self.set_debugreg(crate::arch::debugregs::DR6, 0);
        }
    }

    /// The slots that fired during single steps since the last call (DR6
    /// bits 0-3; 0: none), forgotten.
    pub fn take_step_watch(&mut self) -> u64 {
        self.stepped = false;
        std::mem::take(&mut self.step_dr6)
    }

    /// Whether a single step ran since `take_step_watch`.
    pub fn stepped(&self) -> bool {
        self.stepped
    }
}

/// `code` starts with `pushf` (16-bit) or `pushfq`: its length and the
/// bytes it pushes.
fn pushed_flags_size(code: &[u8]) -> Option<(u64, u64)> {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};
    let i = Decoder::new(64, code, DecoderOptions::NONE).decode();
    match i.mnemonic() {
        Mnemonic::Pushfq => Some((i.len() as u64, 8)),
        Mnemonic::Pushf => Some((i.len() as u64, 2)),
        _ => None,
    }
}

#[cfg(test)]
mod queued_trap_tests;

#[cfg(test)]
mod pushf_tests {
    use super::pushed_flags_size;

    #[test]
    fn pushf_forms() {
        assert_eq!(pushed_flags_size(&[0x9c]), Some((1, 8)));
        assert_eq!(pushed_flags_size(&[0x66, 0x9c]), Some((2, 2)));
        assert_eq!(pushed_flags_size(&[0x48, 0x9c]), Some((2, 8)));
        assert_eq!(pushed_flags_size(&[0x9d]), None); // popfq
        assert_eq!(pushed_flags_size(&[0x55]), None); // push rbp
        assert_eq!(pushed_flags_size(&[]), None);
    }
}
