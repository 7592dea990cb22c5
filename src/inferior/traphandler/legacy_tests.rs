//! The SIGTRAP handler's code as it was hand-assembled byte by byte
//! (traphandler/code.rs and callrepair.rs `emit` before issue 30), kept
//! beside the assembler's version only to show the two are the same
//! program (`same_program`, in the test below).

use super::{
    ACT_DFL, CAP, EFLAGS_TF, ENTRY, RESTORER, SEL, SIGINFO_CODE, SYS_GETPID, SYS_GETTID,
    SYS_MPROTECT, SYS_RT_SIGACTION, SYS_RT_SIGRETURN, SYS_TGKILL, UCONTEXT_EFLAGS, UCONTEXT_RIP,
};
use crate::inferior::callrepair;
use crate::inferior::callrepair::{
    CATCH_AT, CATCH_VAL, DATA, DATA_SLOTS, DATAW, FLUSH, FP_XSTATE_MAGIC1, FX_LEGACY, FX_SW_MAGIC1,
    FX_SW_XSTATE_SIZE, GREGS, GREGS_WORDS, INT3S, MARK, REPAIRED, SP, UC_FPREGS, UC_GREGS, UC_RIP,
    UC_RSP, XLEN, XSAVE_HEADER,
};
use crate::inferior::signals::{SI_KERNEL, TRAP_BRKPT, TRAP_TRACE};

/// The handler's code and where its call repair starts (was
/// traphandler/code.rs `emit_with_repair`).
pub(super) fn legacy_handler(base: u64) -> (Vec<u8>, usize) {
    use callrepair as cr;
    let mut c: Vec<u8> = Vec::with_capacity(RESTORER as usize + 16);
    let d32 = |c: &mut Vec<u8>, v: u32| c.extend_from_slice(&v.to_le_bytes());
    // near conditional jumps (0f 8x rel32) to `die`, patched at the end
    let mut to_die: Vec<usize> = Vec::new();
    // near jumps (rel32 at the position) to a named label, patched at the end
    let mut near: Vec<(usize, &'static str)> = Vec::new();
    let jcc_near = |c: &mut Vec<u8>, near: &mut Vec<(usize, &'static str)>, cc: u8, to| {
        c.extend_from_slice(&[0x0f, cc, 0, 0, 0, 0]);
        near.push((c.len() - 4, to));
    };
    const JE: u8 = 0x84;
    const JNE: u8 = 0x85;
    // the call record's words, from r11 = base+DATA (callrepair.rs)
    let rec = |a: u64| (a - cr::DATA) as u32;
    // rdi = signal, rsi = siginfo, rdx = ucontext
    c.extend_from_slice(&[0x45, 0x31, 0xff]); // xor r15d, r15d   not repairing a call
    c.extend_from_slice(&[0x8b, 0x46, SIGINFO_CODE as u8]); // mov eax, [rsi+8]
    c.extend_from_slice(&[0x83, 0xf8, TRAP_TRACE as u8]); // cmp eax, TRAP_TRACE
    jcc_near(&mut c, &mut near, JE, "trace"); // je trace
    c.extend_from_slice(&[0x3d]); // cmp eax, SI_KERNEL
    d32(&mut c, SI_KERNEL as u32);
    let je_int3 = c.len();
    c.extend_from_slice(&[0x74, 0]); // je int3
    c.extend_from_slice(&[0x83, 0xf8, TRAP_BRKPT as u8]); // cmp eax, TRAP_BRKPT
    jcc_near(&mut c, &mut near, JNE, "done"); // jne done
    let int3 = c.len();
    c.extend_from_slice(&[0x4c, 0x8b, 0x82]); // int3: mov r8, [rdx+UCONTEXT_RIP]
    d32(&mut c, UCONTEXT_RIP);
    c.extend_from_slice(&[0x4d, 0x8d, 0x48, 0xff]); // lea r9, [r8-1]
    // a call in flight (MARK > 1): is this its return trap or an error trap?
    c.extend_from_slice(&[0x49, 0xbb]); // movabs r11, base+DATA
    c.extend_from_slice(&(base + cr::DATA).to_le_bytes());
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // mov rax, [r11+MARK]
    d32(&mut c, rec(cr::MARK));
    c.extend_from_slice(&[0x48, 0x83, 0xf8, 0x01]); // cmp rax, 1
    let jbe_search = c.len();
    c.extend_from_slice(&[0x76, 0]); // jbe search   (no call, or repaired)
    c.extend_from_slice(&[0x4c, 0x39, 0xc8]); // cmp rax, r9
    jcc_near(&mut c, &mut near, JE, "at_return"); // je at_return
    c.extend_from_slice(&[0x49, 0x8d, 0x8b]); // lea rcx, [r11+INT3S+8]   the error traps
    d32(&mut c, rec(cr::INT3S) + 8);
    let tl = c.len();
    c.extend_from_slice(&[0x4c, 0x8b, 0x11]); // traps: mov r10, [rcx]
    c.extend_from_slice(&[0x4d, 0x85, 0xd2]); // test r10, r10
    let jz_search = c.len();
    c.extend_from_slice(&[0x74, 0]); // jz search   (the list ends with a zero word)
    c.extend_from_slice(&[0x4d, 0x39, 0xca]); // cmp r10, r9
    jcc_near(&mut c, &mut near, JE, "at_error"); // je at_error
    c.extend_from_slice(&[0x48, 0x83, 0xc1, 0x08]); // add rcx, 8
    c.push(0xeb); // jmp traps
    c.push((tl as isize - (c.len() as isize + 1)) as i8 as u8);
    let search = c.len();
    c.extend_from_slice(&[0x48, 0xb8]); // search: movabs rax, base+SEL
    c.extend_from_slice(&(base + SEL).to_le_bytes());
    c.extend_from_slice(&[0x48, 0x8b, 0x00]); // mov rax, [rax]    active half
    c.push(0xb9); // mov ecx, CAP
    d32(&mut c, CAP as u32);
    let lp = c.len();
    c.extend_from_slice(&[0x4c, 0x8b, 0x10]); // loop: mov r10, [rax]
    c.extend_from_slice(&[0x4d, 0x85, 0xd2]); // test r10, r10
    let jz_missing = c.len();
    c.extend_from_slice(&[0x74, 0]); // jz missing (end of table)
    c.extend_from_slice(&[0x4d, 0x89, 0xd3]); // mov r11, r10
    c.extend_from_slice(&[0x49, 0xc1, 0xe3, 0x10]); // shl r11, 16
    c.extend_from_slice(&[0x49, 0xc1, 0xeb, 0x10]); // shr r11, 16   address
    c.extend_from_slice(&[0x4d, 0x39, 0xcb]); // cmp r11, r9
    let je_found = c.len();
    c.extend_from_slice(&[0x74, 0]); // je found
    c.extend_from_slice(&[0x48, 0x83, 0xc0, 0x08]); // add rax, 8
    c.extend_from_slice(&[0xff, 0xc9]); // dec ecx
    let jnz = c.len();
    c.extend_from_slice(&[0x75, 0]); // jnz loop
    c[jnz + 1] = (lp as isize - (jnz as isize + 2)) as i8 as u8;
    // missing: an int3 not in the table.  Repairing a call: the next of
    // its int3s.  Else still an int3 there (not ours, or ours and missing),
    // or the one behind an injected system call at AT_ENTRY: the code
    // around it cannot go on, die as without us
    let missing = c.len();
    c.extend_from_slice(&[0x4d, 0x85, 0xff]); // missing: test r15, r15
    jcc_near(&mut c, &mut near, JNE, "next_fix"); // jnz next_fix
    c.extend_from_slice(&[0x41, 0x80, 0x39, 0xcc]); // cmp byte [r9], 0xcc
    to_die.push(c.len());
    c.extend_from_slice(&[0x0f, 0x84, 0, 0, 0, 0]); // je die
    c.extend_from_slice(&[0x48, 0xb8]); // movabs rax, base+ENTRY
    c.extend_from_slice(&(base + ENTRY).to_le_bytes());
    c.extend_from_slice(&[0x48, 0x8b, 0x00]); // mov rax, [rax]    AT_ENTRY
    c.extend_from_slice(&[0x48, 0x83, 0xc0, 0x03]); // add rax, 3
    c.extend_from_slice(&[0x4c, 0x39, 0xc0]); // cmp rax, r8
    to_die.push(c.len());
    c.extend_from_slice(&[0x0f, 0x84, 0, 0, 0, 0]); // je die
    let done = c.len();
    c.push(0xc3); // done: ret
    // trace: a single-step of pgdbg's: TF off in the context, or it traps
    // on every instruction after the return
    let trace = c.len();
    c.extend_from_slice(&[0x81, 0xa2]); // trace: and dword [rdx+UCONTEXT_EFLAGS], ~TF
    d32(&mut c, UCONTEXT_EFLAGS);
    d32(&mut c, !EFLAGS_TF);
    c.push(0xc3); // ret
    let found = c.len();
    c.extend_from_slice(&[0x49, 0x89, 0xd4]); // found: mov r12, rdx   ucontext
    c.extend_from_slice(&[0x4d, 0x89, 0xcd]); // mov r13, r9           int3 address
    c.extend_from_slice(&[0x4d, 0x89, 0xd6]); // mov r14, r10          entry
    c.extend_from_slice(&[0x41, 0x80, 0x7d, 0x00, 0xcc]); // cmp byte [r13], 0xcc
    let jne_rewind0 = c.len();
    c.extend_from_slice(&[0x75, 0]); // jne rewind (already restored)
    c.extend_from_slice(&[0x49, 0x0f, 0xba, 0xe6, 48]); // bt r14, 48
    let jc_store = c.len();
    c.extend_from_slice(&[0x72, 0]); // jc store (writable page)
    let mprotect = |c: &mut Vec<u8>, prot: u8| {
        c.extend_from_slice(&[0x4c, 0x89, 0xef]); // mov rdi, r13
        c.extend_from_slice(&[0x48, 0x81, 0xe7, 0x00, 0xf0, 0xff, 0xff]); // and rdi, -4096
        c.extend_from_slice(&[0xbe, 0x00, 0x10, 0x00, 0x00]); // mov esi, 4096
        c.extend_from_slice(&[0xba, prot, 0, 0, 0]); // mov edx, prot
        c.push(0xb8); // mov eax, SYS_mprotect
        c.extend_from_slice(&SYS_MPROTECT.to_le_bytes());
        c.extend_from_slice(&[0x0f, 0x05]); // syscall
    };
    mprotect(
        &mut c,
        (libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) as u8,
    );
    // a failed mprotect leaves the int3: rewinding would loop on it
    // forever, going on after it runs from the middle of code: die
    // (repairing a call: the int3 stays, the next one is tried)
    c.extend_from_slice(&[0x48, 0x85, 0xc0]); // test rax, rax
    to_die.push(c.len());
    c.extend_from_slice(&[0x0f, 0x85, 0, 0, 0, 0]); // jnz die
    let store = c.len();
    c.extend_from_slice(&[0x4c, 0x89, 0xf0]); // store: mov rax, r14
    c.extend_from_slice(&[0x48, 0xc1, 0xe8, 0x38]); // shr rax, 56   original byte
    c.extend_from_slice(&[0x41, 0x88, 0x45, 0x00]); // mov [r13], al
    c.extend_from_slice(&[0x49, 0x0f, 0xba, 0xe6, 48]); // bt r14, 48
    let jc_rewind = c.len();
    c.extend_from_slice(&[0x72, 0]); // jc rewind
    // (a failure here leaves the page writable: the byte is back)
    mprotect(&mut c, (libc::PROT_READ | libc::PROT_EXEC) as u8);
    let rewind = c.len();
    // repairing a call: the context holds the saved registers, no rewind
    c.extend_from_slice(&[0x4d, 0x85, 0xff]); // rewind: test r15, r15
    jcc_near(&mut c, &mut near, JNE, "next_fix"); // jnz next_fix
    c.extend_from_slice(&[0x4d, 0x89, 0xac, 0x24]); // mov [r12+UCONTEXT_RIP], r13
    d32(&mut c, UCONTEXT_RIP);
    c.push(0xc3); // ret
    // die: the default action back, and the SIGTRAP again for this thread:
    // blocked while the handler runs, delivered (default action: the
    // process dies, as it did without us) as soon as rt_sigreturn unblocks it
    let die = c.len();
    c.extend_from_slice(&[0x4d, 0x85, 0xff]); // die: test r15, r15
    jcc_near(&mut c, &mut near, JNE, "next_fix"); // jnz next_fix   (repairing: never die)
    c.push(0xbf); // mov edi, SIGTRAP
    d32(&mut c, libc::SIGTRAP as u32);
    c.extend_from_slice(&[0x48, 0xbe]); // movabs rsi, base+ACT_DFL
    c.extend_from_slice(&(base + ACT_DFL).to_le_bytes());
    c.extend_from_slice(&[0x31, 0xd2]); // xor edx, edx
    c.extend_from_slice(&[0x41, 0xba, 8, 0, 0, 0]); // mov r10d, 8
    c.push(0xb8); // mov eax, SYS_rt_sigaction
    d32(&mut c, SYS_RT_SIGACTION);
    c.extend_from_slice(&[0x0f, 0x05]); // syscall
    c.push(0xb8); // mov eax, SYS_getpid
    d32(&mut c, SYS_GETPID);
    c.extend_from_slice(&[0x0f, 0x05]); // syscall
    c.extend_from_slice(&[0x49, 0x89, 0xc7]); // mov r15, rax
    c.push(0xb8); // mov eax, SYS_gettid
    d32(&mut c, SYS_GETTID);
    c.extend_from_slice(&[0x0f, 0x05]); // syscall
    c.extend_from_slice(&[0x89, 0xc6]); // mov esi, eax
    c.extend_from_slice(&[0x44, 0x89, 0xff]); // mov edi, r15d
    c.push(0xba); // mov edx, SIGTRAP
    d32(&mut c, libc::SIGTRAP as u32);
    c.push(0xb8); // mov eax, SYS_tgkill
    d32(&mut c, SYS_TGKILL);
    c.extend_from_slice(&[0x0f, 0x05]); // syscall
    c.push(0xc3); // ret
    let mut labels = legacy_repair(&mut c, base, search);
    labels.extend([("trace", trace), ("done", done)]);
    let repair = labels
        .iter()
        .find(|(n, _)| *n == "repair")
        .map(|(_, a)| *a)
        .expect("the repair's label");
    let patch = |c: &mut Vec<u8>, at: usize, to: usize| {
        c[at + 1] = u8::try_from(to - (at + 2))
            .ok()
            .filter(|d| *d < 0x80)
            .expect("short jump");
    };
    patch(&mut c, je_int3, int3);
    patch(&mut c, jbe_search, search);
    patch(&mut c, jz_search, search);
    patch(&mut c, jz_missing, missing);
    patch(&mut c, je_found, found);
    patch(&mut c, jne_rewind0, rewind);
    patch(&mut c, jc_store, store);
    patch(&mut c, jc_rewind, rewind);
    for at in to_die {
        let rel = u32::try_from(die - (at + 6)).expect("near jump");
        c[at + 2..at + 6].copy_from_slice(&rel.to_le_bytes());
    }
    for (at, to) in near {
        let to = labels
            .iter()
            .find(|(n, _)| *n == to)
            .map(|(_, a)| *a)
            .expect("label");
        let rel = i32::try_from(to as isize - (at as isize + 4)).expect("near jump");
        c[at..at + 4].copy_from_slice(&rel.to_le_bytes());
    }
    assert!(c.len() as u64 <= RESTORER);
    c.resize(RESTORER as usize, 0xf4); // hlt: never reached
    c.push(0xb8); // restorer: mov eax, SYS_rt_sigreturn
    c.extend_from_slice(&SYS_RT_SIGRETURN.to_le_bytes());
    c.extend_from_slice(&[0x0f, 0x05]); // syscall
    c.extend_from_slice(&[0x0f, 0x0b]); // ud2 (rt_sigreturn does not return)
    (c, repair)
}

/// The call repair's code (was callrepair.rs `emit`).
pub(super) fn legacy_repair(
    c: &mut Vec<u8>,
    base: u64,
    search: usize,
) -> Vec<(&'static str, usize)> {
    let d32 = |c: &mut Vec<u8>, v: u32| c.extend_from_slice(&v.to_le_bytes());
    let rec = |a: u64| (a - DATA) as u32;
    // local jumps: (position of the displacement, its width, label)
    let mut fix: Vec<(usize, usize, &'static str)> = Vec::new();
    let mut lab: Vec<(&'static str, usize)> = vec![("search", search)];
    let short = |c: &mut Vec<u8>, fix: &mut Vec<(usize, usize, &'static str)>, op: u8, to| {
        c.extend_from_slice(&[op, 0]);
        fix.push((c.len() - 1, 1, to));
    };
    let long = |c: &mut Vec<u8>, fix: &mut Vec<(usize, usize, &'static str)>, cc: u8, to| {
        c.extend_from_slice(&[0x0f, cc, 0, 0, 0, 0]);
        fix.push((c.len() - 4, 4, to));
    };
    const JZ: u8 = 0x74;
    const JNZ: u8 = 0x75;
    const JA: u8 = 0x77;
    const NEAR_JB: u8 = 0x82;
    const NEAR_JAE: u8 = 0x83;
    const NEAR_JZ: u8 = 0x84;
    const NEAR_JNZ: u8 = 0x85;
    const NEAR_JA: u8 = 0x87;

    // at_error: an int3 at an error trap while a call is in flight.  Only
    // inside the call's frames (rsp below its return slot; SP 0: no call
    // started, rsp is never below 0) ...
    lab.push(("at_error", c.len()));
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // at_error: mov rax, [r11+SP]
    d32(c, rec(SP));
    c.extend_from_slice(&[0x48, 0x39, 0x82]); // cmp [rdx+UC_RSP], rax
    d32(c, UC_RSP);
    long(c, &mut fix, NEAR_JAE, "search"); // jae search
    // ... and unless the callee catches the error itself (the catch word
    // changed): then the trap is let through as any int3 in the table
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // mov rax, [r11+CATCH_AT]
    d32(c, rec(CATCH_AT));
    c.extend_from_slice(&[0x48, 0x85, 0xc0]); // test rax, rax
    short(c, &mut fix, JZ, "no_catch"); // jz no_catch
    c.extend_from_slice(&[0x48, 0x8b, 0x00]); // mov rax, [rax]
    c.extend_from_slice(&[0x49, 0x3b, 0x83]); // cmp rax, [r11+CATCH_VAL]
    d32(c, rec(CATCH_VAL));
    long(c, &mut fix, NEAR_JNZ, "search"); // jne search
    // no flush function: repair at once
    lab.push(("no_catch", c.len()));
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // no_catch: mov rax, [r11+FLUSH]
    d32(c, rec(FLUSH));
    c.extend_from_slice(&[0x48, 0x85, 0xc0]); // test rax, rax
    short(c, &mut fix, JZ, "repair"); // jz repair
    // the flush function runs from the call's return slot (16-byte
    // alignment as at the call's entry), which holds the return address
    // again: it returns into the return trap, which repairs.  The slot is
    // above this frame (rsp is below it), so the write changes nothing
    // the interrupted code or the signal frame uses
    c.extend_from_slice(&[0x49, 0x8b, 0x8b]); // mov rcx, [r11+SP]
    d32(c, rec(SP));
    c.extend_from_slice(&[0x49, 0x8b, 0xbb]); // mov rdi, [r11+MARK]   the return address
    d32(c, rec(MARK));
    c.extend_from_slice(&[0x48, 0x89, 0x39]); // mov [rcx], rdi
    c.extend_from_slice(&[0x48, 0x89, 0x8a]); // mov [rdx+UC_RSP], rcx
    d32(c, UC_RSP);
    c.extend_from_slice(&[0x48, 0x89, 0x82]); // mov [rdx+UC_RIP], rax
    d32(c, UC_RIP);
    c.push(0xc3); // ret
    // at_return: the int3 at the return address; the call's own return
    // only when rsp is just above its return slot
    lab.push(("at_return", c.len()));
    c.extend_from_slice(&[0x49, 0x8b, 0x83]); // at_return: mov rax, [r11+SP]
    d32(c, rec(SP));
    c.extend_from_slice(&[0x48, 0x83, 0xc0, 0x08]); // add rax, 8
    c.extend_from_slice(&[0x48, 0x3b, 0x82]); // cmp rax, [rdx+UC_RSP]
    d32(c, UC_RSP);
    long(c, &mut fix, NEAR_JNZ, "search"); // jne search
    // repair: the data words back, byte by byte (slots of 1-8 bytes; a
    // slot whose address word is 0 is free).  Each address is a global
    // of the backend pgdbg changed for the call series, the value the one
    // it held before
    lab.push(("repair", c.len()));
    c.extend_from_slice(&[0x49, 0x8d, 0xb3]); // repair: lea rsi, [r11+DATAW]
    d32(c, rec(DATAW));
    c.extend_from_slice(&[0x41, 0xba]); // mov r10d, DATA_SLOTS
    d32(c, DATA_SLOTS as u32);
    lab.push(("dw", c.len()));
    c.extend_from_slice(&[0x48, 0x8b, 0x3e]); // dw: mov rdi, [rsi]   address + 1
    c.extend_from_slice(&[0x48, 0x85, 0xff]); // test rdi, rdi
    short(c, &mut fix, JZ, "dw_next"); // jz dw_next
    c.extend_from_slice(&[0x48, 0xff, 0xcf]); // dec rdi
    c.extend_from_slice(&[0x48, 0x8b, 0x4e, 0x08]); // mov rcx, [rsi+8]   length
    c.extend_from_slice(&[0x48, 0x8b, 0x46, 0x10]); // mov rax, [rsi+16]  value
    c.extend_from_slice(&[0x48, 0x85, 0xc9]); // test rcx, rcx
    short(c, &mut fix, JZ, "dw_next"); // jz dw_next
    c.extend_from_slice(&[0x48, 0x83, 0xf9, 0x08]); // cmp rcx, 8
    short(c, &mut fix, JA, "dw_next"); // ja dw_next
    lab.push(("db", c.len()));
    c.extend_from_slice(&[0x88, 0x07]); // db: mov [rdi], al
    c.extend_from_slice(&[0x48, 0xff, 0xc7]); // inc rdi
    c.extend_from_slice(&[0x48, 0xc1, 0xe8, 0x08]); // shr rax, 8
    c.extend_from_slice(&[0x48, 0xff, 0xc9]); // dec rcx
    short(c, &mut fix, JNZ, "db"); // jnz db
    lab.push(("dw_next", c.len()));
    c.extend_from_slice(&[0x48, 0x83, 0xc6, 0x18]); // dw_next: add rsi, 24
    c.extend_from_slice(&[0x41, 0xff, 0xca]); // dec r10d
    short(c, &mut fix, JNZ, "dw"); // jnz dw
    // the saved general registers over the context's gregs (r8 ..
    // eflags: rt_sigreturn loads them; it keeps only the user-changeable
    // flags and sets orig_rax to -1)
    c.extend_from_slice(&[0x49, 0x8d, 0xb3]); // lea rsi, [r11+GREGS]
    d32(c, rec(GREGS));
    c.extend_from_slice(&[0x48, 0x8d, 0xba]); // lea rdi, [rdx+UC_GREGS]
    d32(c, UC_GREGS);
    c.push(0xb9); // mov ecx, GREGS_WORDS * 8
    d32(c, GREGS_WORDS as u32 * 8);
    c.extend_from_slice(&[0xf3, 0xa4]); // rep movsb   (DF is clear in a handler)
    // the saved XSAVE image over the frame's: the legacy area always (x87,
    // MXCSR, XMM0-15), the header and extended areas when the frame is an
    // XSAVE image no larger than the saved one, as much as the frame holds
    // (both in the standard layout of the same CPU, every feature at the
    // same offset; a frame is smaller than the ptrace image where AMX tile
    // data are enabled and the backend never asked for them: it has none
    // to lose); its software-reserved bytes (the kernel's description of
    // the frame) are the frame's own
    c.extend_from_slice(&[0x49, 0x8b, 0x8b]); // mov rcx, [r11+XLEN]
    d32(c, rec(XLEN));
    c.extend_from_slice(&[0x48, 0x81, 0xf9]); // cmp rcx, FX_LEGACY
    d32(c, FX_LEGACY);
    long(c, &mut fix, NEAR_JB, "fp_done"); // jb fp_done   (none saved)
    c.extend_from_slice(&[0x4c, 0x8b, 0x92]); // mov r10, [rdx+UC_FPREGS]
    d32(c, UC_FPREGS);
    c.extend_from_slice(&[0x4d, 0x85, 0xd2]); // test r10, r10
    long(c, &mut fix, NEAR_JZ, "fp_done"); // jz fp_done
    c.extend_from_slice(&[0x4c, 0x89, 0xd7]); // mov rdi, r10
    c.extend_from_slice(&[0x48, 0xbe]); // movabs rsi, base+XAREA
    c.extend_from_slice(&(base + super::XAREA).to_le_bytes());
    c.push(0xb9); // mov ecx, FX_LEGACY
    d32(c, FX_LEGACY);
    c.extend_from_slice(&[0xf3, 0xa4]); // rep movsb
    c.extend_from_slice(&[0x41, 0x81, 0xba]); // cmp dword [r10+FX_SW_MAGIC1], FP_XSTATE_MAGIC1
    d32(c, FX_SW_MAGIC1);
    d32(c, FP_XSTATE_MAGIC1);
    long(c, &mut fix, NEAR_JNZ, "fp_done"); // jne fp_done
    c.extend_from_slice(&[0x41, 0x8b, 0x8a]); // mov ecx, [r10+FX_SW_XSTATE_SIZE]
    d32(c, FX_SW_XSTATE_SIZE);
    c.extend_from_slice(&[0x49, 0x3b, 0x8b]); // cmp rcx, [r11+XLEN]
    d32(c, rec(XLEN));
    long(c, &mut fix, NEAR_JA, "fp_done"); // ja fp_done   (frame larger)
    c.extend_from_slice(&[0x48, 0x81, 0xf9]); // cmp rcx, XSAVE_HEADER + 64
    d32(c, XSAVE_HEADER + 64);
    long(c, &mut fix, NEAR_JB, "fp_done"); // jb fp_done   (no XSAVE header: never from the kernel)
    c.extend_from_slice(&[0x49, 0x8d, 0xba]); // lea rdi, [r10+XSAVE_HEADER]
    d32(c, XSAVE_HEADER);
    c.extend_from_slice(&[0x48, 0xbe]); // movabs rsi, base+XAREA+XSAVE_HEADER
    c.extend_from_slice(&(base + super::XAREA + XSAVE_HEADER as u64).to_le_bytes());
    c.extend_from_slice(&[0x48, 0x81, 0xe9]); // sub rcx, XSAVE_HEADER
    d32(c, XSAVE_HEADER);
    c.extend_from_slice(&[0xf3, 0xa4]); // rep movsb
    // the record is used: REPAIRED (readers void pgdbg's records of the
    // call), then each of the call's int3s through the table search,
    // r15 the next in the list, r12 the ucontext
    lab.push(("fp_done", c.len()));
    c.extend_from_slice(&[0x49, 0xc7, 0x83]); // fp_done: mov qword [r11+MARK], REPAIRED
    d32(c, rec(MARK));
    d32(c, REPAIRED as u32);
    c.extend_from_slice(&[0x49, 0x89, 0xd4]); // mov r12, rdx
    c.extend_from_slice(&[0x4d, 0x8d, 0xbb]); // lea r15, [r11+INT3S]
    d32(c, rec(INT3S));
    lab.push(("next_fix", c.len()));
    c.extend_from_slice(&[0x4c, 0x89, 0xe2]); // next_fix: mov rdx, r12
    c.extend_from_slice(&[0x4d, 0x8b, 0x0f]); // mov r9, [r15]
    c.extend_from_slice(&[0x4d, 0x85, 0xc9]); // test r9, r9
    short(c, &mut fix, JZ, "end"); // jz end
    c.extend_from_slice(&[0x49, 0x83, 0xc7, 0x08]); // add r15, 8
    c.extend_from_slice(&[0x4d, 0x8d, 0x41, 0x01]); // lea r8, [r9+1]
    c.push(0xe9); // jmp search
    c.extend_from_slice(&[0, 0, 0, 0]);
    fix.push((c.len() - 4, 4, "search"));
    lab.push(("end", c.len()));
    c.push(0xc3); // end: ret   (rt_sigreturn: the backend as before the call)
    let at = |n: &str| {
        lab.iter()
            .find(|(l, _)| *l == n)
            .map(|(_, a)| *a)
            .expect("label")
    };
    for (pos, width, to) in fix {
        let rel = at(to) as isize - (pos as isize + width as isize);
        if width == 1 {
            c[pos] = i8::try_from(rel).expect("short jump") as u8;
        } else {
            let r = i32::try_from(rel).expect("near jump");
            c[pos..pos + 4].copy_from_slice(&r.to_le_bytes());
        }
    }
    lab
}

/// The instructions of `code` (at `ip`) and the index of the one at
/// offset `at`.
fn index_at(code: &[u8], ip: u64, at: usize) -> usize {
    use iced_x86::{Decoder, DecoderOptions};
    for (k, ins) in Decoder::with_ip(64, code, ip, DecoderOptions::NONE)
        .into_iter()
        .enumerate()
    {
        if ins.ip() - ip == at as u64 {
            return k;
        }
        assert!(
            ins.ip() - ip < at as u64,
            "offset {at:#x} inside an instruction"
        );
    }
    panic!("offset {at:#x} past the code");
}

/// The assembled handler is the hand-assembled one: the same program
/// before the restorer and in it, its call repair at the same instruction.
#[test]
fn the_assembled_handler_is_the_hand_assembled_one() {
    use crate::arch::asm::same_program;
    use iced_x86::{Decoder, DecoderOptions};
    let r = RESTORER as usize;
    for base in [0x7f00_0000_0000u64, 0x5555_5555_0000, 0x1000, 0] {
        let (old, old_repair) = legacy_handler(base);
        let new = super::code::assemble(base).unwrap();
        assert_eq!(new.bytes, super::emit(base));
        let new_repair = new.at("repair").unwrap();
        assert_eq!(new_repair as u64, super::repair_offset());
        // the body: up to the first hlt of the padding in the old code
        // (no 0xf4 byte before it: checked by the decode)
        let ends = |c: &[u8]| {
            let mut end = 0;
            for ins in Decoder::with_ip(64, &c[..r], base, DecoderOptions::NONE) {
                if ins.mnemonic() == iced_x86::Mnemonic::Hlt {
                    break;
                }
                end = (ins.next_ip() - base) as usize;
            }
            end
        };
        let (old_end, new_end) = (ends(&old), ends(&new.bytes));
        let n = Decoder::with_ip(64, &new.bytes[..new_end], base, DecoderOptions::NONE)
            .into_iter()
            .count();
        eprintln!(
            "base {base:#x}: {n} instructions; body {old_end:#x} bytes by hand, \
             {new_end:#x} assembled; repair at +{old_repair:#x} and +{new_repair:#x}"
        );
        // the padding: hlt only
        assert!(old[old_end..r].iter().all(|&b| b == 0xf4));
        assert!(new.bytes[new_end..r].iter().all(|&b| b == 0xf4));
        same_program(&old[..old_end], base, &new.bytes[..new_end], base)
            .unwrap_or_else(|e| panic!("base {base:#x}, before the restorer: {e}"));
        // the restorer, at the same place
        assert_eq!(new.at("restorer"), Some(r));
        assert_eq!((old.len(), new.bytes.len()), (r + 9, r + 9));
        same_program(&old[r..], base + r as u64, &new.bytes[r..], base + r as u64)
            .unwrap_or_else(|e| panic!("base {base:#x}, the restorer: {e}"));
        // the call repair (which the SIGCONT handler calls) at the same
        // instruction
        assert_eq!(
            index_at(&old[..old_end], base, old_repair),
            index_at(&new.bytes[..new_end], base, new_repair)
        );
        // and every label of the call repair's: the old emitter's labels
        // are offsets from where the repair starts (the handler's code
        // before it), which its "repair" label gives
        let rel = legacy_repair(&mut Vec::new(), base, 0);
        let at = |n: &str| rel.iter().find(|(l, _)| *l == n).unwrap().1;
        let start = old_repair - at("repair");
        for (name, o) in rel.iter().filter(|(n, _)| *n != "search") {
            let newo = new.at(name).unwrap_or_else(|| panic!("no label {name}"));
            assert_eq!(
                index_at(&old[..old_end], base, start + o),
                index_at(&new.bytes[..new_end], base, newo),
                "label {name}"
            );
        }
    }
}
