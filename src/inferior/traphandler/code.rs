//! The SIGTRAP handler's machine code (traphandler.rs says what it does
//! at each kind of trap), made with the assembler (`crate::arch::asm`)
//! for a mapping at a given base, with the call repair's code
//! (callrepair.rs) appended and the restorer at its fixed offset.

use super::{
    ACT_DFL, CAP, EFLAGS_TF, ENTRY, RESTORER, SEL, SIGINFO_CODE, SYS_GETPID, SYS_GETTID,
    SYS_MPROTECT, SYS_RT_SIGACTION, SYS_RT_SIGRETURN, SYS_TGKILL, UCONTEXT_EFLAGS, UCONTEXT_RIP,
};
use crate::arch::asm::*;
use crate::inferior::callrepair;
use crate::inferior::signals::{SI_KERNEL, TRAP_BRKPT, TRAP_TRACE};

/// The code is fixed: the assembler refusing it is a bug of this file.
const FIXED: &str = "the SIGTRAP handler's code (fixed) does not assemble";

/// The handler's machine code, for a mapping at `base`.
pub fn emit(base: u64) -> Vec<u8> {
    assemble(base).expect(FIXED).bytes
}

/// Where the call repair (callrepair.rs `emit`) starts in the handler's
/// code: the SIGCONT handler calls it as a subroutine (selfrelease.rs).
/// The same for every base: only immediates depend on it, and the
/// addresses are always 64-bit immediates (`mov r64, imm64`).
pub(super) fn repair_offset() -> u64 {
    let c = assemble(0).expect(FIXED);
    c.at("repair").expect("the repair's label") as u64
}

/// The handler's code for `base`: its body, `hlt`s up to `RESTORER`,
/// the restorer; the body's labels, and "restorer".
pub(super) fn assemble(base: u64) -> Result<Code, AsmError> {
    let mut a = Asm::new();
    body(&mut a, base)?;
    let mut code = a.assemble(base)?;
    assert!(
        code.bytes.len() as u64 <= RESTORER,
        "the SIGTRAP handler's code ({} bytes) runs into its restorer",
        code.bytes.len()
    );
    let body_len = code.bytes.len();
    // hlt up to the restorer: never reached
    let mut h = Asm::new();
    h.hlt()?;
    let hlt = h.assemble(base)?.bytes;
    while (code.bytes.len() as u64) < RESTORER {
        code.bytes.extend_from_slice(&hlt);
    }
    assert_eq!(code.bytes.len() as u64, RESTORER);
    let mut r = Asm::new();
    r.mov(eax, SYS_RT_SIGRETURN)?; // restorer
    r.syscall()?;
    r.ud2()?; // rt_sigreturn does not return
    code.bytes.extend(r.assemble(base + RESTORER)?.bytes);
    code.labels.push(("padding", body_len));
    code.labels.push(("restorer", RESTORER as usize));
    Ok(code)
}

/// How many bytes at `base` [`holds_our_code`] reads.
pub fn code_len(base: u64) -> usize {
    emit(base).len()
}

/// Where the call repair starts in `mem` (read at `base`, [`code_len`]
/// bytes, holding the handler: [`holds_our_code`]): this pgdbg's offset,
/// or in another version's encodings the offset of the same instruction.
pub fn repair_offset_in(mem: &[u8], base: u64) -> Option<u64> {
    let c = assemble(base).ok()?;
    let repair = c.at("repair")?;
    if mem.get(..c.bytes.len()) == Some(&c.bytes[..]) {
        return Some(repair as u64);
    }
    // the repair's index in this pgdbg's body is its index in theirs
    let k = iced_x86::Decoder::with_ip(64, &c.bytes[..repair], base, 0)
        .into_iter()
        .count();
    let theirs = iced_x86::Decoder::with_ip(
        64,
        mem.get(..c.at("restorer")?)?,
        base,
        iced_x86::DecoderOptions::NONE,
    )
    .into_iter()
    .nth(k)?;
    Some(theirs.ip() - base)
}

/// Whether `mem`, read at `base` ([`code_len`] bytes), holds the
/// handler's code: this pgdbg's bytes, or the same program in another
/// version's encodings (an older pgdbg wrote the pages of a backend it was
/// killed on: the guardian or `pgdbg rescue` of this one reads them): the
/// body from `base`, the restorer at `RESTORER`.
pub fn holds_our_code(mem: &[u8], base: u64) -> bool {
    let Ok(c) = assemble(base) else {
        return false;
    };
    if mem.get(..c.bytes.len()) == Some(&c.bytes[..]) {
        return true;
    }
    let (Some(pad), Some(r)) = (c.at("padding"), c.at("restorer")) else {
        return false;
    };
    mem.len() > r
        && begins_with_program(&mem[..r], base, &c.bytes[..pad], base)
        && begins_with_program(&mem[r..], base + r as u64, &c.bytes[r..], base + r as u64)
}

/// The handler up to its restorer, the call repair included.
fn body(a: &mut Asm, base: u64) -> Result<(), AsmError> {
    use callrepair as cr;
    // the call record's words, from r11 = base+DATA (callrepair.rs)
    let rec = |w: u64| w - cr::DATA;
    let trace = a.label("trace");
    let int3 = a.label("int3");
    let done = a.label("done");
    let search = a.label("search");
    let at_return = a.label("at_return");
    let at_error = a.label("at_error");
    let traps = a.label("traps");
    let lp = a.label("loop");
    let missing = a.label("missing");
    let found = a.label("found");
    let next_fix = a.label("next_fix");
    let die = a.label("die");
    let store = a.label("store");
    let rewind = a.label("rewind");
    // rdi = signal, rsi = siginfo, rdx = ucontext
    a.xor(r15d, r15d)?; // not repairing a call
    a.mov(eax, dword_ptr(rsi + SIGINFO_CODE))?; // si_code
    a.cmp(eax, TRAP_TRACE)?;
    a.je(trace)?;
    a.cmp(eax, SI_KERNEL)?;
    a.je(int3)?;
    a.cmp(eax, TRAP_BRKPT)?;
    a.jne(done)?;
    a.set("int3")?;
    a.mov(r8, qword_ptr(rdx + UCONTEXT_RIP))?;
    a.lea(r9, qword_ptr(r8 - 1))?;
    // a call in flight (MARK > 1): is this its return trap or an error trap?
    a.mov(r11, base + cr::DATA)?;
    a.mov(rax, qword_ptr(r11 + rec(cr::MARK)))?;
    a.cmp(rax, 1)?;
    a.jbe(search)?; // no call, or repaired
    a.cmp(rax, r9)?;
    a.je(at_return)?;
    a.lea(rcx, qword_ptr(r11 + (rec(cr::INT3S) + 8)))?; // the error traps
    a.set("traps")?;
    a.mov(r10, qword_ptr(rcx))?;
    a.test(r10, r10)?;
    a.jz(search)?; // the list ends with a zero word
    a.cmp(r10, r9)?;
    a.je(at_error)?;
    a.add(rcx, 8)?;
    a.jmp(traps)?;
    a.set("search")?;
    a.mov(rax, base + SEL)?;
    a.mov(rax, qword_ptr(rax))?; // active half
    a.mov(ecx, CAP as u32)?;
    a.set("loop")?;
    a.mov(r10, qword_ptr(rax))?;
    a.test(r10, r10)?;
    a.jz(missing)?; // end of table
    a.mov(r11, r10)?;
    a.shl(r11, 16)?;
    a.shr(r11, 16)?; // address
    a.cmp(r11, r9)?;
    a.je(found)?;
    a.add(rax, 8)?;
    a.dec(ecx)?;
    a.jnz(lp)?;
    // missing: an int3 not in the table.  Repairing a call: the next of
    // its int3s.  Else still an int3 there (not ours, or ours and missing),
    // or the one behind an injected system call at AT_ENTRY: the code
    // around it cannot go on, die as without us
    a.set("missing")?;
    a.test(r15, r15)?;
    a.jnz(next_fix)?;
    a.cmp(byte_ptr(r9), 0xcc)?;
    a.je(die)?;
    a.mov(rax, base + ENTRY)?;
    a.mov(rax, qword_ptr(rax))?; // AT_ENTRY
    a.add(rax, 3)?;
    a.cmp(rax, r8)?;
    a.je(die)?;
    a.set("done")?;
    a.ret()?;
    // trace: a single-step of pgdbg's: TF off in the context, or it traps
    // on every instruction after the return
    a.set("trace")?;
    a.and(dword_ptr(rdx + UCONTEXT_EFLAGS), !EFLAGS_TF)?;
    a.ret()?;
    a.set("found")?;
    a.mov(r12, rdx)?; // ucontext
    a.mov(r13, r9)?; // int3 address
    a.mov(r14, r10)?; // entry
    a.cmp(byte_ptr(r13), 0xcc)?;
    a.jne(rewind)?; // already restored
    a.bt(r14, 48)?;
    a.jc(store)?; // writable page
    let mprotect = |a: &mut Asm, prot: i32| -> Result<(), AsmError> {
        a.mov(rdi, r13)?;
        a.and(rdi, -4096)?;
        a.mov(esi, 4096)?;
        a.mov(edx, prot)?;
        a.mov(eax, SYS_MPROTECT)?;
        a.syscall()?;
        Ok(())
    };
    mprotect(a, libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC)?;
    // a failed mprotect leaves the int3: rewinding would loop on it
    // forever, going on after it runs from the middle of code: die
    // (repairing a call: the int3 stays, the next one is tried)
    a.test(rax, rax)?;
    a.jnz(die)?;
    a.set("store")?;
    a.mov(rax, r14)?;
    a.shr(rax, 56)?; // original byte
    a.mov(byte_ptr(r13), al)?;
    a.bt(r14, 48)?;
    a.jc(rewind)?;
    // (a failure here leaves the page writable: the byte is back)
    mprotect(a, libc::PROT_READ | libc::PROT_EXEC)?;
    // repairing a call: the context holds the saved registers, no rewind
    a.set("rewind")?;
    a.test(r15, r15)?;
    a.jnz(next_fix)?;
    a.mov(qword_ptr(r12 + UCONTEXT_RIP), r13)?;
    a.ret()?;
    // die: the default action back, and the SIGTRAP again for this thread,
    // delivered as the tgkill returns (SIGTRAP is not blocked in the
    // handler): the process dies of it, as it did without us
    a.set("die")?;
    a.test(r15, r15)?;
    a.jnz(next_fix)?; // repairing: never die
    a.mov(edi, libc::SIGTRAP)?;
    a.mov(rsi, base + ACT_DFL)?;
    a.xor(edx, edx)?;
    a.mov(r10d, 8)?;
    a.mov(eax, SYS_RT_SIGACTION)?;
    a.syscall()?;
    a.mov(eax, SYS_GETPID)?;
    a.syscall()?;
    a.mov(r15, rax)?;
    a.mov(eax, SYS_GETTID)?;
    a.syscall()?;
    a.mov(esi, eax)?;
    a.mov(edi, r15d)?;
    a.mov(edx, libc::SIGTRAP)?;
    a.mov(eax, SYS_TGKILL)?;
    a.syscall()?;
    a.ret()?;
    cr::emit(a, base)
}
