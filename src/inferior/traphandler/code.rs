//! The SIGTRAP handler's machine code (traphandler.rs says what it does
//! at each kind of trap), hand-assembled for a mapping at a given base,
//! with the call repair's code (callrepair.rs) appended and the
//! restorer at its fixed offset.

use super::{
    ACT_DFL, CAP, EFLAGS_TF, ENTRY, RESTORER, SEL, SIGINFO_CODE, SYS_GETPID, SYS_GETTID,
    SYS_MPROTECT, SYS_RT_SIGACTION, SYS_RT_SIGRETURN, SYS_TGKILL, UCONTEXT_EFLAGS, UCONTEXT_RIP,
};
use crate::inferior::callrepair;
use crate::inferior::signals::{SI_KERNEL, TRAP_BRKPT, TRAP_TRACE};

/// The handler's machine code, for a mapping at `base`.
pub fn emit(base: u64) -> Vec<u8> {
    emit_with_repair(base).0
}

/// Where the call repair (callrepair.rs `emit`) starts in the handler's
/// code: the SIGCONT handler calls it as a subroutine (selfrelease.rs).
/// The same for every base (only immediates depend on it).
pub(super) fn repair_offset() -> u64 {
    emit_with_repair(0).1 as u64
}

/// The handler's code and where its call repair starts.
fn emit_with_repair(base: u64) -> (Vec<u8>, usize) {
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
    let mut labels = cr::emit(&mut c, base, search);
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
