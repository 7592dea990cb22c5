//! A call in flight that repairs itself when pgdbg and its guardian are
//! both gone: the record of it in the SIGTRAP handler's data page
//! (traphandler.rs), in the backend's own memory.
//!
//! pgdbg and its guardian killed together while an inferior call runs
//! leave the backend held (state T) with the call's registers.  Whoever
//! sends it SIGCONT then lets the call run to its return int3 at the ELF
//! entry point.  Without a record the handler could only let it die there.
//! With one, the handler puts the backend back as pgdbg would have after
//! the call, and the backend goes on exactly as before it:
//!
//! * before the call's registers are first written, pgdbg writes into the
//!   data page the registers to put back (in `ucontext` order, as the
//!   backend would resume with them: see `as_resumed`), the saved XSAVE
//!   image, the call's int3s (its return address, then its error traps) and
//!   zeroes the data-word slots (once per series, at its start); the series
//!   writes the data words it changes (`note_data_word`) and what the error
//!   trap needs (`note_call_error_repair`); then `MARK` = the return
//!   address: a call is in flight.  `SP` (the call's return-address slot) is written before
//!   the first call's registers.
//! * the handler, at an int3 at the return address with `rsp` = `SP` + 8
//!   (the call's own return, never the backend's code): puts the data words
//!   back, copies the registers into the interrupted context's `gregs` and
//!   the XSAVE image into its `fpstate`, sets `MARK` to `REPAIRED`, puts the
//!   original bytes of the call's int3s back (the table's entries), and
//!   returns: `rt_sigreturn` loads that context.
//! * at an int3 at an error trap (`pg_re_throw`) with `rsp` below `SP`
//!   (inside the call's frames) and the catch word unchanged (the callee set
//!   up no handler of its own): the context is pointed at the flush function
//!   (`FlushErrorState`) on the call's stack, its return slot holding the
//!   return address: the error state is flushed, then the return trap
//!   repairs as above.  Without a flush function it repairs at once (the
//!   error stays on PostgreSQL's error stack until the next error flushes
//!   it).
//! * pgdbg clears `MARK` once it has put the registers back itself (one
//!   word, no stop); the guardian and `pgdbg rescue` do the same after
//!   theirs, and treat the call and data records as void when they find
//!   `REPAIRED` (the backend ran on since: its registers and data words are
//!   its own again).
//!
//! A record that went stale (pgdbg died after putting the registers back,
//! before clearing `MARK`) repairs nothing: the backend never executes the
//! return address, and its own frames are above `SP`.
//!
//! Layout: `LAYOUT` holds `LAYOUT_MAGIC` (a new layout gets a new value);
//! a reader (`call_repaired`) trusts the page only when that word is this
//! pgdbg's and the page holds the handler's program (this pgdbg's bytes, or
//! the same program in another version's encodings:
//! `traphandler::holds_our_code`).

use super::{Registers, Target, traphandler, xstate::XState};
use crate::arch::asm::{Asm, AsmError};
use anyhow::Result;

// Offsets in the handler's mapping (its data page is the second page).
pub(super) const DATA: u64 = 4096;
/// The layout of this page, for readers.
pub(super) const LAYOUT: u64 = DATA + 0x18;
pub(super) const LAYOUT_MAGIC: u64 = u64::from_le_bytes(*b"pgdbgTH2");
/// 0: no call; `REPAIRED`; else the return address of the call in flight.
pub(super) const MARK: u64 = DATA + 0x100;
pub(super) const REPAIRED: u64 = 1;
/// The call's return-address slot (its `rsp` at entry).
pub(super) const SP: u64 = DATA + 0x108;
/// The function run at an error trap before the repair (0: none).
pub(super) const FLUSH: u64 = DATA + 0x110;
/// A word whose value changes when the callee catches errors itself
/// (`PG_exception_stack`), and its value before the call (address 0: none).
pub(super) const CATCH_AT: u64 = DATA + 0x118;
pub(super) const CATCH_VAL: u64 = DATA + 0x120;
/// The call's int3s: the return address, then up to `MAX_TRAPS` error
/// traps, then a zero word (always: 6 words).
pub(super) const INT3S: u64 = DATA + 0x128;
pub(super) const MAX_TRAPS: usize = 4;
/// Data words to put back: `DATA_SLOTS` × (address + 1, length 1-8,
/// value); address word 0: a free slot.
pub(super) const DATAW: u64 = DATA + 0x160;
pub(super) const DATA_SLOTS: u64 = 8;
/// The registers to put back, in `ucontext` `gregs` order (r8 .. eflags).
pub(super) const GREGS: u64 = DATAW + DATA_SLOTS * 24;
pub(super) const GREGS_WORDS: u64 = 18;
/// `rsp`'s and `rip`'s words among them.
pub(super) const GREGS_RSP: u64 = 15;
pub(super) const GREGS_RIP: u64 = 16;
/// Bytes of the XSAVE image in `XAREA` (0: none saved).
pub(super) const XLEN: u64 = GREGS + GREGS_WORDS * 8;
/// The XSAVE image (after the two halves of the int3 table).
pub(super) const XAREA_LEN: u64 = 64 * 1024;
// the record fits the data page after what traphandler.rs keeps there
// (up to 0xe0), and the words written together are adjacent
const _: () = assert!(LAYOUT + 8 <= MARK && XLEN + 8 <= 2 * DATA);
const _: () = assert!(INT3S + 8 * (MAX_TRAPS as u64 + 2) <= DATAW);
const _: () = assert!(SP + 8 == FLUSH && FLUSH + 8 == CATCH_AT && CATCH_AT + 8 == CATCH_VAL);

/// The registers as the backend resumes with them when pgdbg puts `r`
/// back and continues it: stopped inside a system call that is to be
/// restarted (`orig_rax` ≥ 0, `rax` one of the kernel's restart codes),
/// the kernel restarts it at the resume (arch_do_signal_or_restart:
/// `rax` = `orig_rax`, `rip` -= 2, the length of `syscall`;
/// ERESTART_RESTARTBLOCK: `rax` = restart_syscall).  `rt_sigreturn` sets
/// `orig_rax` to -1 (no restart), so the handler is given the result.
pub(super) fn as_resumed(r: &Registers) -> Registers {
    const ERESTARTSYS: i64 = 512;
    const ERESTARTNOINTR: i64 = 513;
    const ERESTARTNOHAND: i64 = 514;
    const ERESTART_RESTARTBLOCK: i64 = 516;
    let mut r = *r;
    if (r.orig_rax as i64) >= 0 {
        match -(r.rax as i64) {
            ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND => {
                r.rax = r.orig_rax;
                r.rip -= crate::arch::abi::SYSCALL_LEN;
            }
            ERESTART_RESTARTBLOCK => {
                r.rax = libc::SYS_restart_syscall as u64;
                r.rip -= crate::arch::abi::SYSCALL_LEN;
            }
            _ => {}
        }
    }
    r
}

/// `r` as the 18 first words of `mcontext_t.gregs` (glibc's REG_R8 ..
/// REG_EFL, the kernel's `struct sigcontext_64` r8 .. flags).
pub(super) fn gregs_words(r: &Registers) -> [u64; GREGS_WORDS as usize] {
    let mut g = [0u64; GREGS_WORDS as usize];
    let idx = |i: libc::c_int| i as usize;
    g[idx(libc::REG_R8)] = r.r8;
    g[idx(libc::REG_R9)] = r.r9;
    g[idx(libc::REG_R10)] = r.r10;
    g[idx(libc::REG_R11)] = r.r11;
    g[idx(libc::REG_R12)] = r.r12;
    g[idx(libc::REG_R13)] = r.r13;
    g[idx(libc::REG_R14)] = r.r14;
    g[idx(libc::REG_R15)] = r.r15;
    g[idx(libc::REG_RDI)] = r.rdi;
    g[idx(libc::REG_RSI)] = r.rsi;
    g[idx(libc::REG_RBP)] = r.rbp;
    g[idx(libc::REG_RBX)] = r.rbx;
    g[idx(libc::REG_RDX)] = r.rdx;
    g[idx(libc::REG_RAX)] = r.rax;
    g[idx(libc::REG_RCX)] = r.rcx;
    g[idx(libc::REG_RSP)] = r.rsp;
    g[idx(libc::REG_RIP)] = r.rip;
    g[idx(libc::REG_EFL)] = r.eflags;
    g
}

fn words(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

// Kernel ABI (x86-64), fixed by the kernel's user-space ABI:
/// `ucontext_t.uc_mcontext.gregs`: after `uc_flags`, `uc_link` and the
/// 24-byte `uc_stack` (arch/x86/include/uapi/asm/ucontext.h); the kernel's
/// `struct sigcontext_64` starts with r8 .. r15, rdi, rsi, rbp, rbx, rdx,
/// rax, rcx, rsp, rip, eflags (glibc's REG_R8 = 0 .. REG_EFL = 17).
pub(super) const UC_GREGS: u32 = 40;
// the same ABI as the signal frame of an injected system call
const _: () = assert!(super::sigframe::UC_GREGS_IN_UCONTEXT == UC_GREGS as usize);
pub(super) const UC_RSP: u32 = UC_GREGS + 15 * 8;
pub(super) const UC_RIP: u32 = UC_GREGS + 16 * 8;
/// `uc_mcontext.fpregs` (`sigcontext_64.fpstate`): after the 23 words
/// r8 .. cr2; the signal frame's XSAVE image (NULL: no FP state saved).
pub(super) const UC_FPREGS: u32 = UC_GREGS + 23 * 8;
/// In the XSAVE image (both the signal frame's and NT_X86_XSTATE's: the
/// standard, uncompacted format): FCW .. MXCSR_MASK, ST0-7, XMM0-15, the
/// legacy area every x86-64 CPU lays out alike (Intel SDM vol. 1, 10.5.1).
pub(super) const FX_LEGACY: u32 = 416;
/// The kernel's `struct _fpx_sw_bytes` in the image's software-reserved
/// bytes at 464 (arch/x86/include/uapi/asm/sigcontext.h): `magic1` (u32)
/// at 464, `xstate_size` (u32) at 464 + 16; FP_XSTATE_MAGIC1 says the
/// frame holds an XSAVE image of `xstate_size` bytes, not FXSAVE only.
pub(super) const FX_SW_MAGIC1: u32 = 464;
pub(super) const FX_SW_XSTATE_SIZE: u32 = 464 + 16;
pub(super) const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
/// The XSAVE header (XSTATE_BV, XCOMP_BV) and the extended areas.
pub(super) const XSAVE_HEADER: u32 = 512;

/// The handler's call repair (module comment), assembled after the
/// handler's code by `traphandler::emit` into the same assembler; entered
/// by jumps to its labels `at_error`, `at_return` and `next_fix` (and
/// called at `repair` by the SIGCONT handler, selfrelease.rs), with
/// r8 = the context's rip, r9 = the int3's address, r11 = base+DATA,
/// rdx = the ucontext, r15 = 0.  The handler's label `search` is the
/// table search, which the repair goes through (r15 set) to put each
/// int3's byte back.
pub(super) fn emit(a: &mut Asm, base: u64) -> Result<(), AsmError> {
    use crate::arch::asm::*;
    let rec = |w: u64| w - DATA;
    let search = a.label("search");
    let no_catch = a.label("no_catch");
    let repair = a.label("repair");
    let dw = a.label("dw");
    let db = a.label("db");
    let dw_next = a.label("dw_next");
    let fp_done = a.label("fp_done");
    let end = a.label("end");

    // at_error: an int3 at an error trap while a call is in flight.  Only
    // inside the call's frames (rsp below its return slot; SP 0: no call
    // started, rsp is never below 0) ...
    a.set("at_error")?;
    a.mov(rax, qword_ptr(r11 + rec(SP)))?;
    a.cmp(qword_ptr(rdx + UC_RSP), rax)?;
    a.jae(search)?;
    // ... and unless the callee catches the error itself (the catch word
    // changed): then the trap is let through as any int3 in the table
    a.mov(rax, qword_ptr(r11 + rec(CATCH_AT)))?;
    a.test(rax, rax)?;
    a.jz(no_catch)?;
    a.mov(rax, qword_ptr(rax))?;
    a.cmp(rax, qword_ptr(r11 + rec(CATCH_VAL)))?;
    a.jne(search)?;
    // no flush function: repair at once
    a.set("no_catch")?;
    a.mov(rax, qword_ptr(r11 + rec(FLUSH)))?;
    a.test(rax, rax)?;
    a.jz(repair)?;
    // the flush function runs from the call's return slot (16-byte
    // alignment as at the call's entry), which holds the return address
    // again: it returns into the return trap, which repairs.  The slot is
    // above this frame (rsp is below it), so the write changes nothing
    // the interrupted code or the signal frame uses
    a.mov(rcx, qword_ptr(r11 + rec(SP)))?;
    a.mov(rdi, qword_ptr(r11 + rec(MARK)))?; // the return address
    a.mov(qword_ptr(rcx), rdi)?;
    a.mov(qword_ptr(rdx + UC_RSP), rcx)?;
    a.mov(qword_ptr(rdx + UC_RIP), rax)?;
    a.ret()?;
    // at_return: the int3 at the return address; the call's own return
    // only when rsp is just above its return slot
    a.set("at_return")?;
    a.mov(rax, qword_ptr(r11 + rec(SP)))?;
    a.add(rax, 8)?;
    a.cmp(rax, qword_ptr(rdx + UC_RSP))?;
    a.jne(search)?;
    // repair: the data words back, byte by byte (slots of 1-8 bytes; a
    // slot whose address word is 0 is free).  Each address is a global
    // of the backend pgdbg changed for the call series, the value the one
    // it held before
    a.set("repair")?;
    a.lea(rsi, qword_ptr(r11 + rec(DATAW)))?;
    a.mov(r10d, DATA_SLOTS as u32)?;
    a.set("dw")?;
    a.mov(rdi, qword_ptr(rsi))?; // address + 1
    a.test(rdi, rdi)?;
    a.jz(dw_next)?;
    a.dec(rdi)?;
    a.mov(rcx, qword_ptr(rsi + 8))?; // length
    a.mov(rax, qword_ptr(rsi + 16))?; // value
    a.test(rcx, rcx)?;
    a.jz(dw_next)?;
    a.cmp(rcx, 8)?;
    a.ja(dw_next)?;
    a.set("db")?;
    a.mov(byte_ptr(rdi), al)?;
    a.inc(rdi)?;
    a.shr(rax, 8)?;
    a.dec(rcx)?;
    a.jnz(db)?;
    a.set("dw_next")?;
    a.add(rsi, 24)?;
    a.dec(r10d)?;
    a.jnz(dw)?;
    // the saved general registers over the context's gregs (r8 ..
    // eflags: rt_sigreturn loads them; it keeps only the user-changeable
    // flags and sets orig_rax to -1)
    a.lea(rsi, qword_ptr(r11 + rec(GREGS)))?;
    a.lea(rdi, qword_ptr(rdx + UC_GREGS))?;
    a.mov(ecx, GREGS_WORDS as u32 * 8)?;
    a.rep().movsb()?; // (DF is clear in a handler)
    // the saved XSAVE image over the frame's: the legacy area always (x87,
    // MXCSR, XMM0-15), the header and extended areas when the frame is an
    // XSAVE image no larger than the saved one, as much as the frame holds
    // (both in the standard layout of the same CPU, every feature at the
    // same offset; a frame is smaller than the ptrace image where AMX tile
    // data are enabled and the backend never asked for them: it has none
    // to lose); its software-reserved bytes (the kernel's description of
    // the frame) are the frame's own
    a.mov(rcx, qword_ptr(r11 + rec(XLEN)))?;
    a.cmp(rcx, FX_LEGACY as i32)?;
    a.jb(fp_done)?; // none saved
    a.mov(r10, qword_ptr(rdx + UC_FPREGS))?;
    a.test(r10, r10)?;
    a.jz(fp_done)?;
    a.mov(rdi, r10)?;
    a.mov(rsi, base + traphandler::XAREA)?;
    a.mov(ecx, FX_LEGACY)?;
    a.rep().movsb()?;
    a.cmp(dword_ptr(r10 + FX_SW_MAGIC1), FP_XSTATE_MAGIC1)?;
    a.jne(fp_done)?;
    a.mov(ecx, dword_ptr(r10 + FX_SW_XSTATE_SIZE))?;
    a.cmp(rcx, qword_ptr(r11 + rec(XLEN)))?;
    a.ja(fp_done)?; // frame larger
    a.cmp(rcx, (XSAVE_HEADER + 64) as i32)?;
    a.jb(fp_done)?; // no XSAVE header: never from the kernel
    a.lea(rdi, qword_ptr(r10 + XSAVE_HEADER))?;
    a.mov(rsi, base + traphandler::XAREA + XSAVE_HEADER as u64)?;
    a.sub(rcx, XSAVE_HEADER as i32)?;
    a.rep().movsb()?;
    // the record is used: REPAIRED (readers void pgdbg's records of the
    // call), then each of the call's int3s through the table search,
    // r15 the next in the list, r12 the ucontext
    a.set("fp_done")?;
    a.mov(qword_ptr(r11 + rec(MARK)), REPAIRED as i32)?;
    a.mov(r12, rdx)?;
    a.lea(r15, qword_ptr(r11 + rec(INT3S)))?;
    a.set("next_fix")?;
    a.mov(rdx, r12)?;
    a.mov(r9, qword_ptr(r15))?;
    a.test(r9, r9)?;
    a.jz(end)?;
    a.add(r15, 8)?;
    a.lea(r8, qword_ptr(r9 + 1))?;
    a.jmp(search)?;
    a.set("end")?;
    a.ret()?; // (rt_sigreturn: the backend as before the call)
    Ok(())
}

impl Target {
    /// The handler's base when its page can hold a call's record (a
    /// handler of this pgdbg, installed).
    fn repair_page(&self) -> Option<u64> {
        self.trap
            .as_ref()
            .filter(|h| h.old.is_some())
            .map(|h| h.base)
    }

    /// Install the SIGTRAP handler if it is not there yet (before a call
    /// saves the registers: the install injects system calls).
    pub fn prepare_call_repair(&mut self) {
        self.ensure_trap_handler();
    }

    /// Write the record of a call about to start (module comment), `MARK`
    /// still 0.  Every write goes into the handler's own data page and
    /// XSAVE area (mapped by pgdbg, read only by the handler), never into
    /// memory of the backend's; a failure only costs the repair (logged).
    pub(super) fn write_call_repair(
        &mut self,
        regs: &Registers,
        xstate: &XState,
        ret: u64,
        traps: &[u64],
    ) {
        let Some(base) = self.repair_page() else {
            return;
        };
        self.trap_repair_off = false;
        self.trap_repair_sp = 0;
        self.trap_repair_data.clear();
        // With AMX (XCR0 bits 17, 18: TILECFG, TILEDATA) the ptrace image
        // is larger than a signal frame of a process that never asked for
        // the tiles (the kernel leaves the tile data out): the handler
        // puts back as much of it as the frame holds, which is all of the
        // state such a process has (its tile data are always initial)
        let res = (|| -> Result<()> {
            // MARK first, so that a half-written record is never used
            self.write(base + MARK, &0u64.to_le_bytes())?;
            self.write(base + GREGS, &words(&gregs_words(&as_resumed(regs))))?;
            let x = xstate.bytes();
            let xlen = if (x.len() as u64) <= XAREA_LEN {
                self.write(base + traphandler::XAREA, x)?;
                x.len() as u64
            } else {
                0 // larger than the area: the FP/SSE state is not put back
            };
            self.write(base + XLEN, &xlen.to_le_bytes())?;
            let mut list = vec![ret];
            list.extend(traps.iter().take(MAX_TRAPS));
            list.resize(MAX_TRAPS + 2, 0);
            self.write(base + INT3S, &words(&list))?;
            // SP, FLUSH, CATCH_AT, CATCH_VAL: none yet
            self.write(base + SP, &[0u8; 32])?;
            self.write(base + DATAW, &vec![0u8; DATA_SLOTS as usize * 24])?;
            if traps.len() > MAX_TRAPS {
                super::log::debug("more error traps than the SIGTRAP handler's record holds");
            }
            Ok(())
        })();
        if let Err(e) = res {
            super::log::debug(&format!("no self-repair record for the call: {e:#}"));
            self.repair_record_off();
        }
    }

    /// The record cannot repair this call: neither handler uses it (the
    /// SIGCONT handler, seeing `NOT_OWN` bit 3, stops the backend again
    /// for `pgdbg rescue` instead of putting back registers from it).
    fn repair_record_off(&mut self) {
        self.trap_repair_off = true;
        if let Err(e) = self.note_release_not_own(8, true)
            && let Err(e) = self.disarm_self_release(e)
        {
            super::log::debug(&format!("{e:#}"));
        }
    }

    /// The call's registers have been written: `MARK` = `ret`, one word in
    /// the data page, written once per series.  Not before: a record
    /// marked while the backend still has its own registers would, after
    /// pgdbg and the guardian died there and the backend ran on, turn a
    /// later ERROR deeper than the call's stack slot into a roll-back to
    /// this stop.
    pub(super) fn mark_call_repair(&mut self, ret: u64) {
        let Some(base) = self.repair_page() else {
            return;
        };
        if self.trap_repair_off || self.trap_repair_data_off || self.trap_repair_mark == ret {
            return;
        }
        if self.write(base + MARK, &ret.to_le_bytes()).is_ok() {
            self.trap_repair_mark = ret;
        }
    }

    /// The call's return-address slot (its `rsp` at entry), written before
    /// its registers: one word, once per series (every call of a series
    /// uses the same slot).
    pub fn note_call_return_slot(&mut self, sp: u64) {
        // the guardian's table too: its flush after an error runs from
        // there (guardian/inflight.rs)
        if let Some(g) = &mut self.guardian {
            g.note_ret_slot(sp);
        }
        if let Some(base) = self.repair_page()
            && self.trap_repair_sp != sp
            && self.write(base + SP, &sp.to_le_bytes()).is_ok()
        {
            self.trap_repair_sp = sp;
        }
    }

    /// What the handler does at an error trap: run `flush` first (0: none)
    /// unless the word at `catch.0` no longer holds `catch.1` (the callee
    /// catches the error itself: the trap is let through).
    pub fn note_call_error_repair(&mut self, flush: Option<u64>, catch: Option<(u64, u64)>) {
        // the guardian runs the flush too when it abandons a call at its
        // error trap (guardian/inflight.rs)
        if let Some(g) = &mut self.guardian {
            g.note_flush(flush.unwrap_or(0));
        }
        let Some(base) = self.repair_page() else {
            return;
        };
        let (at, val) = catch.unwrap_or((0, 0));
        let w = words(&[flush.unwrap_or(0), at, val]);
        if self.write(base + FLUSH, &w).is_err() {
            self.repair_record_off();
        }
    }

    /// A data word the series changes, in the handler's record too (slot
    /// by slot, value before address).
    pub(super) fn note_repair_data_word(&mut self, addr: u64, orig: &[u8]) {
        let Some(base) = self.repair_page() else {
            return;
        };
        if self.trap_repair_data_off {
            return;
        }
        let n = orig.len().min(8);
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&orig[..n]);
        let slot = match self.trap_repair_data.iter().position(|a| *a == addr) {
            Some(s) => s,
            None if (self.trap_repair_data.len() as u64) < DATA_SLOTS && orig.len() <= 8 => {
                self.trap_repair_data.push(addr);
                self.trap_repair_data.len() - 1
            }
            None => {
                // not put back by the handler: no repair rather than half a one
                self.repair_data_incomplete();
                return;
            }
        };
        let at = base + DATAW + 24 * slot as u64;
        let ok = self.write(at, &0u64.to_le_bytes()).is_ok()
            && self
                .write(at + 8, &words(&[n as u64, u64::from_le_bytes(b)]))
                .is_ok()
            && self.write(at, &(addr + 1).to_le_bytes()).is_ok();
        if !ok {
            self.repair_data_incomplete();
        }
    }

    /// The page's slots do not hold every data word the series changes:
    /// neither handler puts a part of them back (no call repair; the
    /// SIGCONT handler, seeing `NOT_OWN` bit 2, stops the backend again
    /// for `pgdbg rescue`, which has them all from the guardian's table).
    fn repair_data_incomplete(&mut self) {
        self.trap_repair_data_off = true;
        if let Err(e) = self.note_release_not_own(4, true)
            && let Err(e) = self.disarm_self_release(e)
        {
            super::log::debug(&format!("{e:#}"));
        }
    }

    /// The page's data-word slots emptied, whoever put the words back
    /// (the guardian; a failed restore that lets the backend go): old
    /// values a handler must never write.  Best effort: a page that cannot
    /// be written is logged.
    pub(super) fn clear_repair_data_slots(&mut self) {
        let Some(base) = self.trap.as_ref().map(|h| h.base) else {
            return;
        };
        if let Err(e) = self.write(base + DATAW, &[0u8; DATA_SLOTS as usize * 24]) {
            super::log::debug(&format!("data words' slots not emptied: {e:#}"));
        }
    }

    /// The same where no call still runs whose return trap puts the words
    /// back (`MARK` 0 or REPAIRED).
    pub(super) fn clear_repair_data_slots_unless_in_call(&mut self) {
        let Some(base) = self.trap.as_ref().map(|h| h.base) else {
            return;
        };
        let mut m = [0u8; 8];
        if self.read(base + MARK, &mut m).is_ok() && u64::from_le_bytes(m) <= REPAIRED {
            self.clear_repair_data_slots();
        }
    }

    /// The data words are back: their slots emptied.
    /// Slots left set while the backend runs on would have the SIGCONT
    /// handler put back old values one day: if they cannot be emptied,
    /// the backend no longer releases itself.
    pub(super) fn forget_repair_data_words(&mut self) {
        if !self.trap_repair_data.is_empty() {
            self.trap_repair_data.clear();
            if let Some(base) = self.repair_page()
                && let Err(e) = self.write(base + DATAW, &vec![0u8; DATA_SLOTS as usize * 24])
                && let Err(e) = self.disarm_self_release(e)
            {
                super::log::debug(&format!("data words' slots not emptied: {e:#}"));
            }
        }
        // (after the slots: a part of them is never put back)
        if self.trap_repair_data_off {
            self.trap_repair_data_off = false;
            if let Err(e) = self.note_release_not_own(4, false) {
                super::log::debug(&format!("{e:#}"));
            }
        }
    }

    /// The saved registers are about to be put back: `MARK` = 0 first (the
    /// same reason as in [`Target::mark_call_repair`]; dying between the
    /// two leaves the call's return trap, which kills the backend as
    /// without a record, never a roll-back).
    pub(super) fn disarm_call_repair(&mut self) {
        if self.trap_repair_mark == 0 {
            return;
        }
        self.clear_mark();
        self.trap_repair_mark = 0;
    }

    /// `MARK` = 0; where it cannot be written the backend no longer
    /// releases itself (a mark left over would have the SIGCONT handler
    /// repair from an old record).
    fn clear_mark(&mut self) {
        if let Some(base) = self.repair_page()
            && let Err(e) = self.write(base + MARK, &0u64.to_le_bytes())
            && let Err(e) = self.disarm_self_release(e)
        {
            super::log::debug(&format!("the call's mark not cleared: {e:#}"));
        }
    }

    /// The call is over: nothing in flight for the handler any more.
    pub(super) fn end_call_repair(&mut self) {
        self.clear_mark();
        self.trap_repair_mark = 0;
        self.trap_repair_sp = 0;
        if std::mem::take(&mut self.trap_repair_off)
            && let Err(e) = self.note_release_not_own(8, false)
        {
            super::log::debug(&format!("{e:#}"));
        }
    }

    /// Whether the handler repaired a call since pgdbg or the guardian
    /// wrote the record (`MARK` = `REPAIRED`, in a page of this layout).
    pub(super) fn call_repaired(&self) -> bool {
        self.call_mark() == Some(REPAIRED)
    }

    /// Whether a call is in flight by the handler's page (`MARK` = its
    /// return address: running, or at its return or error trap), in a
    /// page of this layout holding our code.
    pub(super) fn call_running_by_page(&self) -> bool {
        self.call_mark().is_some_and(|m| m > REPAIRED)
    }

    /// `MARK`, read from pages that hold our code in this layout.
    fn call_mark(&self) -> Option<u64> {
        let base = self.trap.as_ref().map(|h| h.base)?;
        let word = |a: u64| {
            let mut b = [0u8; 8];
            self.read(base + a, &mut b)
                .ok()
                .map(|_| u64::from_le_bytes(b))
        };
        if word(LAYOUT) != Some(LAYOUT_MAGIC) {
            return None;
        }
        let mut now = vec![0u8; traphandler::code_len(base)];
        if self.read(base, &mut now).is_err() || !traphandler::holds_our_code(&now, base) {
            return None;
        }
        word(MARK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarted_system_call_resumes_at_its_syscall_instruction() {
        let r = Registers {
            orig_rax: 7, // poll
            rax: (-514i64) as u64,
            rip: 0x1002,
            ..Default::default()
        };
        let s = as_resumed(&r);
        assert_eq!((s.rax, s.rip), (7, 0x1000));
        let r = Registers {
            orig_rax: 35,
            rax: (-516i64) as u64,
            rip: 0x1002,
            ..Default::default()
        };
        assert_eq!(as_resumed(&r).rax, libc::SYS_restart_syscall as u64);
        // not in a system call, or one that ended: as is
        let r = Registers {
            orig_rax: u64::MAX,
            rax: (-514i64) as u64,
            rip: 0x1002,
            ..Default::default()
        };
        assert_eq!(as_resumed(&r), r);
        let r = Registers {
            orig_rax: 232,
            rax: (-4i64) as u64, // EINTR: returned as is
            rip: 0x1002,
            ..Default::default()
        };
        assert_eq!(as_resumed(&r), r);
    }

    #[test]
    fn gregs_follow_the_ucontext_order() {
        let r = Registers {
            r8: 8,
            rdi: 100,
            rsp: 7,
            rip: 16,
            eflags: 17,
            ..Default::default()
        };
        let g = gregs_words(&r);
        assert_eq!(g[0], 8);
        assert_eq!(g[8], 100);
        assert_eq!(g[GREGS_RSP as usize], 7);
        assert_eq!(g[GREGS_RIP as usize], 16);
        assert_eq!(g[17], 17);
    }
}
