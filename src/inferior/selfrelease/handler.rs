//! The SIGCONT handler's machine code (what it does: the module comment
//! of selfrelease.rs), made with the assembler of crate::arch.

use super::*;
use crate::arch::asm::*;
use crate::inferior::{INT3, sigframe};

/// The SIGCONT handler's machine code, for a mapping at `base`; it goes at
/// `base + CODE` and returns through the SIGTRAP handler's restorer.
pub fn emit(base: u64, l: &Layout) -> Result<Vec<u8>, AsmError> {
    let mut a = Asm::new();
    // displacement from r11 = base + 4096 (the data page)
    let dp = |at: u64| at as i64 - 4096;
    let page = base + 4096;
    let done = a.label("done");
    let calls = a.label("calls");
    let restop = a.label("restop");
    let unmarked = a.label("unmarked");
    let not_slot = a.label("not_slot");
    let own_rsp = a.label("own_rsp");
    let repair = a.label("repair");
    let go = a.label("go");
    let table = a.label("table");
    let int3 = a.label("int3");
    let traps = a.label("traps");
    let lp = a.label("loop");
    let other = a.label("other");
    let rewind = a.label("rewind");
    let data = a.label("data");
    let slots = a.label("slots");
    let changed = a.label("changed");
    let putback = a.label("putback");
    let pb_own = a.label("pb_own");
    let pb_slot = a.label("pb_slot");
    let pb_byte = a.label("pb_byte");
    let pb_empty = a.label("pb_empty");
    let pb_next = a.label("pb_next");
    let count = a.label("count");
    let raise = a.label("raise");
    let raise_next = a.label("raise_next");
    // rdi = signal, rsi = siginfo, rdx = ucontext
    a.cmp(dword_ptr(rsi + SIGINFO_CODE), POLL_IN)?;
    a.jne(done)?;
    a.mov(r11, page)?; // movabs: the data page
    a.mov(eax, dword_ptr(rsi + SIGINFO_FD))?; // si_fd
    a.inc(rax)?;
    a.cmp(rax, qword_ptr(r11 + dp(FD)))?;
    a.jne(done)?;
    // ours: every writer of the pipe is gone
    a.mov(r8, qword_ptr(rdx + l.uc_rip))?; // rip
    a.lea(r9, qword_ptr(r8 - 1))?; // rip - 1
    // registers not the backend's own: only a call's (`NOT_OWN` 1, no
    // system call, a record that repairs) are dealt with here: running or
    // at its return trap (`MARK` > 1, rsp at most its return slot + 8) it
    // is repaired by the SIGTRAP handler at that trap, or was already
    // (`MARK` 1: its SIGTRAP is taken before this SIGCONT); being set up
    // or put back, or not running with the saved rsp, the repair runs
    // here; the rest stops again
    a.mov(rax, qword_ptr(r11 + dp(NOT_OWN)))?;
    a.test(rax, rax)?;
    a.je(calls)?;
    a.cmp(rax, 1)?;
    a.jne(restop)?;
    a.mov(rax, qword_ptr(r11 + dp(l.mark)))?;
    a.test(rax, rax)?;
    a.je(unmarked)?;
    a.cmp(rax, 1)?;
    a.je(calls)?;
    a.mov(rax, qword_ptr(rdx + l.uc_rsp))?;
    a.sub(rax, 8)?;
    a.cmp(rax, qword_ptr(r11 + dp(l.sp)))?;
    a.ja(own_rsp)?;
    a.jmp(calls)?;
    // unmarked: a call's registers being written (the call not started:
    // rsp its return slot) or put back (rsp just above it, or the saved
    // registers' own rsp)
    a.set("unmarked")?;
    a.mov(rax, qword_ptr(rdx + l.uc_rsp))?;
    a.cmp(rax, qword_ptr(r11 + dp(l.sp)))?;
    a.jne(not_slot)?;
    // at the slot: it holds the call's return address (another handler's
    // frame there would hold its restorer)
    a.mov(rcx, qword_ptr(rax))?;
    a.cmp(rcx, qword_ptr(r11 + dp(l.int3s)))?; // the return address
    a.je(repair)?;
    a.jmp(restop)?;
    a.set("not_slot")?;
    a.sub(rax, 8)?;
    a.cmp(rax, qword_ptr(r11 + dp(l.sp)))?;
    a.je(repair)?;
    // own_rsp: only the saved registers' own rsp is theirs (another
    // handler's frame, delivered before this one, is below it)
    a.set("own_rsp")?;
    a.mov(rax, qword_ptr(rdx + l.uc_rsp))?;
    a.cmp(rax, qword_ptr(r11 + dp(l.gregs_rsp)))?;
    a.jne(restop)?;
    // repair: the SIGTRAP handler's call repair, as at the call's return
    // trap: the saved registers and XSAVE image into this context, the
    // data words and the call's int3s back; then on (its system calls
    // take r11: the base again)
    a.set("repair")?;
    a.call(base + l.repair)?;
    a.mov(r11, page)?;
    a.jmp(go)?;
    // a call's int3s: its return address, then its error traps
    a.set("calls")?;
    a.mov(rax, qword_ptr(r11 + dp(l.mark)))?;
    a.cmp(rax, 1)?;
    a.jbe(table)?;
    a.cmp(rax, r9)?;
    a.je(int3)?;
    a.lea(rcx, qword_ptr(r11 + (dp(l.int3s) + 8)))?;
    a.set("traps")?;
    a.mov(r10, qword_ptr(rcx))?;
    a.test(r10, r10)?;
    a.je(table)?;
    a.cmp(r10, r9)?;
    a.je(int3)?;
    a.add(rcx, 8)?;
    a.jmp(traps)?;
    // the table's active half
    a.set("table")?;
    a.mov(rax, qword_ptr(r11 + dp(l.sel)))?;
    a.mov(ecx, l.cap)?;
    a.set("loop")?;
    a.mov(r10, qword_ptr(rax))?;
    a.test(r10, r10)?;
    a.je(other)?;
    a.shl(r10, 16)?;
    a.shr(r10, 16)?; // address
    a.cmp(r10, r9)?;
    a.je(int3)?;
    a.add(rax, 8)?;
    a.dec(ecx)?;
    a.jne(lp)?;
    a.jmp(other)?;
    // rip - 1 is an int3 address of ours (mapped code): still an int3,
    // and not a resume of pgdbg's there?
    a.set("int3")?;
    a.cmp(byte_ptr(r9), i32::from(INT3))?;
    a.jne(other)?;
    a.cmp(r8, qword_ptr(r11 + dp(RES_RIP)))?;
    a.jne(rewind)?;
    a.mov(rax, qword_ptr(rdx + l.uc_rsp))?;
    a.cmp(rax, qword_ptr(r11 + dp(RES_RSP)))?;
    a.je(other)?;
    a.set("rewind")?;
    a.mov(qword_ptr(rdx + l.uc_rip), r9)?;
    a.jmp(data)?;
    // other: inside an injected system call (`syscall; int3` at
    // AT_ENTRY)?  A call's return int3 there, rewound, is not one
    a.set("other")?;
    a.mov(rax, qword_ptr(r11 + dp(l.entry)))?;
    a.test(rax, rax)?;
    a.je(data)?;
    a.mov(rcx, r8)?;
    a.sub(rcx, rax)?;
    a.cmp(rcx, 3)?;
    a.ja(data)?;
    // a system call injected with its signal frame (sigframe.rs): the
    // trailer's eight bytes at AT_ENTRY (no other code there runs again,
    // and `syscall; int3` differs in its third byte).  Its context
    // restores itself (the call finishes, `rt_sigreturn` returns to the
    // backend's own): it runs on like the backend's own.  Reached only
    // when the call's blocked mask is not in place (pgdbg died before its
    // PTRACE_SETSIGMASK, or it failed): with it, SIGCONT waits for the
    // trailer's `rt_sigreturn`.  Beyond 3 it went to `data` above
    // already, as any rip past `syscall; int3`
    a.mov(r10, u64::from_le_bytes(*sigframe::trailer()))?; // movabs: its bytes
    a.cmp(qword_ptr(rax), r10)?;
    a.je(data)?;
    a.test(rcx, rcx)?;
    a.jne(restop)?;
    a.cmp(byte_ptr(rax), i32::from(INT3))?;
    a.jne(restop)?;
    // data words changed around calls: a call running (rsp at or below
    // its return slot) or at its return trap (rsp just above it) puts
    // them back at that trap; with no call record they are put back here
    a.set("data")?;
    a.lea(rcx, qword_ptr(r11 + dp(l.dataw)))?;
    a.mov(r10d, l.data_slots)?;
    a.set("slots")?;
    a.cmp(qword_ptr(rcx), 0)?;
    a.jne(changed)?;
    a.add(rcx, 24)?;
    a.dec(r10d)?;
    a.jne(slots)?;
    a.jmp(go)?;
    // (a call the SIGTRAP handler repaired, `mark` 1, had them put back:
    // its trap can come first, SIGTRAP being taken before SIGCONT; no
    // call record, `mark` 0, means `NOT_OWN` 0 here: the registers are
    // the backend's own, a series before its first call; put back only
    // where rsp is still the one the series saved: a backend that ran on
    // since with slots left over stops again rather than take old values)
    a.set("changed")?;
    a.mov(rax, qword_ptr(r11 + dp(l.mark)))?;
    a.test(rax, rax)?;
    a.je(putback)?;
    a.cmp(rax, 1)?;
    a.je(go)?;
    a.mov(rax, qword_ptr(rdx + l.uc_rsp))?;
    a.sub(rax, 8)?;
    a.cmp(rax, qword_ptr(r11 + dp(l.sp)))?;
    a.jbe(go)?;
    a.jmp(restop)?;
    // putback: each used slot's value (1-8 bytes) written back to its
    // address, the slot emptied; a length over 8 is not written
    a.set("putback")?;
    a.mov(rax, qword_ptr(rdx + l.uc_rsp))?;
    a.cmp(rax, qword_ptr(r11 + dp(l.gregs_rsp)))?;
    a.je(pb_own)?;
    // or the entry of another handler of the backend's, whose signal came
    // while it was stopped and was delivered just before this one (a
    // lower number: a statement_timeout's SIGALRM, a SIGUSR1): its frame
    // (`rt_sigframe`: the return address, then its ucontext) at rax holds
    // the saved registers' own rsp, and their rip (or 2 past it: a
    // system call the saved registers restart that returned EINTR to that
    // handler).  Read only when rax is below the saved rsp by a frame's
    // words at least and 64 KiB at most: the words read lie between this
    // context's rsp and the saved one, in the stack the kernel has just
    // written that frame and this one into
    a.mov(rcx, qword_ptr(r11 + dp(l.gregs_rsp)))?;
    a.sub(rcx, rax)?; // unsigned: above it wraps
    a.cmp(rcx, nest_min(l) as i32)?;
    a.jb(restop)?;
    a.cmp(rcx, NEST_MAX)?;
    a.ja(restop)?;
    // a handler's entry: rax is 8 past a multiple of 16 (the kernel's
    // align_sigframe puts the frame there, as a call would) and holds the
    // return address into the restorer (never 0)
    a.mov(ecx, eax)?;
    a.and(ecx, 15)?;
    a.cmp(ecx, 8)?;
    a.jne(restop)?;
    a.cmp(qword_ptr(rax), 0)?;
    a.je(restop)?;
    a.mov(rcx, qword_ptr(rax + (8 + l.uc_rsp)))?;
    a.cmp(rcx, qword_ptr(r11 + dp(l.gregs_rsp)))?;
    a.jne(restop)?;
    // its rip the saved one, or 2 past it (the length of `syscall`: the
    // saved rip at a call they restart, the frame's past it): never 1
    a.mov(rcx, qword_ptr(rax + (8 + l.uc_rip)))?;
    a.sub(rcx, qword_ptr(r11 + dp(l.gregs_rip)))?;
    a.je(pb_own)?; // equal (sub sets ZF)
    a.cmp(rcx, 2)?;
    a.jne(restop)?;
    a.set("pb_own")?;
    a.lea(rcx, qword_ptr(r11 + dp(l.dataw)))?;
    a.mov(r10d, l.data_slots)?;
    a.set("pb_slot")?;
    a.mov(rdi, qword_ptr(rcx))?; // address + 1
    a.test(rdi, rdi)?;
    a.je(pb_next)?;
    a.dec(rdi)?;
    a.mov(r8, qword_ptr(rcx + 8))?; // length
    a.cmp(r8, 8)?;
    a.ja(pb_empty)?;
    a.lea(rsi, qword_ptr(rcx + 16))?; // value
    a.set("pb_byte")?;
    a.test(r8, r8)?;
    a.je(pb_empty)?;
    a.mov(al, byte_ptr(rsi))?;
    a.mov(byte_ptr(rdi), al)?;
    a.inc(rsi)?;
    a.inc(rdi)?;
    a.dec(r8)?;
    a.jmp(pb_byte)?;
    a.set("pb_empty")?;
    a.mov(qword_ptr(rcx), 0)?;
    a.set("pb_next")?;
    a.add(rcx, 24)?;
    a.dec(r10d)?;
    a.jne(pb_slot)?;
    // go: the backend runs on, counted (the records are old from now on),
    // with the signals pgdbg held back for it: sent to itself here (every
    // signal is blocked in this handler: they are delivered after it, as
    // the interrupted context's mask allows), the word emptied.  A system
    // call takes rcx and r11: the base is kept in r13 (rt_sigreturn puts
    // every register back)
    a.set("go")?;
    a.mov(r12, qword_ptr(r11 + dp(SIGS)))?;
    a.test(r12, r12)?;
    a.je(count)?;
    // never SIGCONT or a stop signal (pgdbg's own group stop, or someone's
    // held back at an event stop: the backend would stop with nobody left)
    a.mov(rax, !NOT_SENT)?; // movabs (a u64)
    a.and(r12, rax)?;
    a.mov(qword_ptr(r11 + dp(SIGS)), 0)?;
    a.mov(r13, r11)?;
    a.mov(eax, libc::SYS_getpid as u32)?;
    a.syscall()?;
    a.mov(r14d, eax)?;
    a.xor(r15d, r15d)?; // bit N-1: signal N
    a.set("raise")?;
    a.bt(r12, r15)?;
    a.jae(raise_next)?;
    a.mov(edi, r14d)?;
    a.lea(esi, qword_ptr(r15 + 1))?;
    a.mov(eax, libc::SYS_kill as u32)?;
    a.syscall()?;
    a.set("raise_next")?;
    a.inc(r15d)?;
    a.cmp(r15d, 64)?;
    a.jb(raise)?;
    a.mov(r11, r13)?;
    a.set("count")?;
    a.inc(qword_ptr(r11 + dp(RELEASED)))?;
    a.ret()?;
    // restop: stopped again as before (SIGSTOP cannot be blocked: the stop
    // takes hold as the kill returns, inside this handler)
    a.set("restop")?;
    a.mov(eax, libc::SYS_getpid as u32)?;
    a.syscall()?;
    a.mov(edi, eax)?;
    a.mov(esi, libc::SIGSTOP as u32)?;
    a.mov(eax, libc::SYS_kill as u32)?;
    a.syscall()?;
    a.set("done")?;
    a.ret()?;
    Ok(a.assemble(base + CODE)?.bytes)
}

/// Whether `mem`, read at `base + CODE` up to the end of the page, begins
/// with the SIGCONT handler's code for `l`: this pgdbg's bytes, or the
/// same program in another version's encodings (pages an older pgdbg
/// wrote, read by this one's guardian or `pgdbg rescue`).
pub fn holds_our_code(mem: &[u8], base: u64, l: &Layout) -> bool {
    let Ok(code) = emit(base, l) else {
        return false;
    };
    mem.get(..code.len()) == Some(&code[..])
        || begins_with_program(mem, base + CODE, &code, base + CODE)
}
