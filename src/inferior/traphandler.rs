//! A SIGTRAP handler of ours inside the target, for as long as int3s or
//! debug registers of ours are armed there.  While pgdbg traces the target
//! it never runs: ptrace reports every SIGTRAP to pgdbg first, and pgdbg
//! never delivers one.  It runs only when pgdbg is gone (SIGKILL, the OOM
//! killer, a crash of pgdbg) and the target traps before the guardian
//! (guardian.rs) has restored it: without it the SIGTRAP kills the backend
//! and the postmaster restarts the cluster.  The SIGTRAP of a stop pgdbg
//! was holding when it died never reaches it: the kernel drops it (Linux
//! 6.18, tests/fixtures/tracer_death.c), which is why pgdbg puts `rip`
//! back on the int3 first thing at every hit (the int3 then traps again,
//! untraced, and comes here).
//!
//! The handler (raw machine code, no libc, no stack use beyond its return
//! address, all signals blocked while it runs):
//! * an int3 at the return address or an error trap of an inferior call
//!   whose record pgdbg wrote into the data page (callrepair.rs), when it
//!   is that call's: the backend is put back as before the call (or first
//!   sent through the flush function, at an error trap);
//! * an int3 (`si_code` SI_KERNEL or TRAP_BRKPT) whose address (`rip - 1`
//!   in the interrupted context) is in our table: when the byte there is
//!   still 0xcc, the page is made writable (`mprotect`, page-aligned,
//!   read/write/exec), the original byte stored, the page made read/exec
//!   again; then the context's `rip` is set back to the int3's address and
//!   the handler returns (`rt_sigreturn` through our restorer): the
//!   original instruction runs as if the int3 had never been there; when
//!   the mprotect fails it dies as below (rewinding would loop on the int3);
//! * an int3 not in the table whose byte is still 0xcc (not ours, or ours
//!   and missing from the table), or the one behind an injected system call
//!   (`rip` = AT_ENTRY + 3): the code cannot go on there, so it dies as it
//!   would without us: SIGTRAP's action back to the default, and a SIGTRAP
//!   to its own thread (blocked while the handler runs, delivered at
//!   `rt_sigreturn`);
//! * a single-step (`si_code` TRAP_TRACE): the trap flag is cleared in the
//!   interrupted context (else it traps on every instruction after);
//! * anything else (a watchpoint: `rip` is already past the writing
//!   instruction, nothing to undo; a SIGTRAP pgdbg had dealt with, whose
//!   `si_code` it set to TRAP_UNK when it wrote `rip`): it returns,
//!   changing nothing.
//!
//! The table holds every address pgdbg has armed since the handler was
//! installed, with its original byte (code does not change, so an entry
//! stays true after its int3 is removed): an address costs one 8-byte write
//! into the target the first time it is armed, none after (internal
//! one-shot breakpoints are armed thousands of times a second).  When it is
//! full, the addresses still armed are written into the other half of the
//! table and one word switches the handler to it.
//!
//! Installed with an injected `rt_sigaction` only where the target's
//! SIGTRAP action is the default one; the action found is recorded in the
//! guardian's table first and put back at detach (by pgdbg or the
//! guardian), then the pages are unmapped unless the target is still
//! inside the handler (it calls nothing, so only `rip` can point there).

use super::{Target, callrepair, procfs, selfrelease};
use anyhow::{Result, anyhow, bail};
use std::collections::HashSet;

const PAGE: u64 = 4096;
/// Entries in each half of the table.
pub const CAP: u64 = 16384;
/// A table entry that matches no int3: address 1 (page zero is never
/// code), not zero (a zero entry ends the table).
const INERT: u64 = 1;
/// Mapping: code page, data page (selector, sigaction scratch, the record
/// of a call in flight: callrepair.rs), two halves, the call's XSAVE image.
const TABLE_BYTES: u64 = CAP * 8;
pub(super) const XAREA: u64 = 2 * PAGE + 2 * TABLE_BYTES;
pub const MAP_LEN: u64 = XAREA + callrepair::XAREA_LEN;
const DATA: u64 = PAGE;
/// In the data page: the address of the active half.
const SEL: u64 = DATA;
/// In the data page: the target's AT_ENTRY (where inject_syscall runs
/// `syscall; int3`).
pub(super) const ENTRY: u64 = DATA + 0x10;
/// In the data page: kernel sigaction structs for rt_sigaction; ACT_DFL
/// stays all zeros (SIG_DFL), for the handler itself.
const ACT_NEW: u64 = DATA + 0x40;
const ACT_OLD: u64 = DATA + 0x80;
const ACT_DFL: u64 = DATA + 0xc0;
const HALF0: u64 = 2 * PAGE;
// the call record (callrepair.rs) shares the data page: its words lie
// between and after these
const _: () = assert!(
    DATA == callrepair::DATA
        && ENTRY + 8 <= callrepair::LAYOUT
        && callrepair::LAYOUT + 8 <= ACT_NEW
        && ACT_DFL + 8 * SA_WORDS as u64 <= callrepair::MARK
);
/// The restorer's offset in the code page.
pub(super) const RESTORER: u64 = 0x400;
// selfrelease.rs's words lie after the call record in the data page
const _: () = assert!(callrepair::XLEN + 8 <= selfrelease::FD && selfrelease::END <= 2 * PAGE);
const _: () = assert!(RESTORER + 16 <= selfrelease::CODE);

// Kernel ABI constants (x86-64), fixed by the kernel's user-space ABI:
/// `siginfo_t.si_code`: after `int si_signo; int si_errno;`
/// (include/uapi/asm-generic/siginfo.h).
const SIGINFO_CODE: u32 = 8;
/// `ucontext_t.uc_mcontext.rip`: `struct ucontext { unsigned long
/// uc_flags; struct ucontext *uc_link; stack_t uc_stack (24 bytes);
/// struct sigcontext uc_mcontext; ... }` (arch/x86/include/uapi/asm/
/// ucontext.h), and in `struct sigcontext_64` rip follows r8-r15, rdi,
/// rsi, rbp, rbx, rdx, rax, rcx, rsp: 16 words (arch/x86/include/uapi/
/// asm/sigcontext.h; glibc's REG_RIP = 16).  40 + 16 * 8.
const UCONTEXT_RIP: u32 = 40 + 16 * 8;
/// `ucontext_t.uc_mcontext.eflags`: the word after rip (glibc's REG_EFL
/// = 17), and its trap flag (bit 8).
const UCONTEXT_EFLAGS: u32 = 40 + 17 * 8;
const EFLAGS_TF: u32 = 1 << 8;
use super::signals::{SI_KERNEL, TRAP_BRKPT, TRAP_TRACE, TRAP_UNK};
const SYS_MPROTECT: u32 = 10;
const SYS_RT_SIGRETURN: u32 = 15;
const SYS_RT_SIGACTION: u32 = 13;
const SYS_GETPID: u32 = 39;
const SYS_GETTID: u32 = 186;
const SYS_TGKILL: u32 = 234;
/// `struct sigaction` as the kernel takes it (kernel_sigaction): handler,
/// flags, restorer, mask (8 bytes): 4 words.
pub const SA_WORDS: usize = 4;
const SA_SIGINFO: u64 = 4;
const SA_RESTART: u64 = 0x1000_0000;
const SA_RESTORER: u64 = 0x0400_0000;
/// Entry: bits 0-47 the address, bit 48 the page is writable already (no
/// mprotect), bits 56-63 the original byte.
const ADDR_MASK: u64 = (1 << 48) - 1;
const F_WRITABLE: u64 = 1 << 48;

/// The handler's machine code, for a mapping at `base`.
pub fn emit(base: u64) -> Vec<u8> {
    emit_with_repair(base).0
}

/// Where the call repair (callrepair.rs `emit`) starts in the handler's
/// code: the SIGCONT handler calls it as a subroutine (selfrelease.rs).
/// The same for every base (only immediates depend on it).
fn repair_offset() -> u64 {
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

/// Where the SIGCONT handler (selfrelease.rs) finds the words it reads.
fn release_layout() -> selfrelease::Layout {
    use callrepair as cr;
    selfrelease::Layout {
        sel: SEL,
        entry: ENTRY,
        cap: CAP as u32,
        mark: cr::MARK,
        sp: cr::SP,
        int3s: cr::INT3S,
        dataw: cr::DATAW,
        data_slots: cr::DATA_SLOTS as u32,
        uc_rip: cr::UC_RIP,
        uc_rsp: cr::UC_RSP,
        gregs_rsp: cr::GREGS + 8 * cr::GREGS_RSP,
        gregs_rip: cr::GREGS + 8 * cr::GREGS_RIP,
        repair: repair_offset(),
        restorer: RESTORER,
    }
}

/// A handler installed in the target.
#[derive(Debug, Clone)]
pub struct TrapHandler {
    pub base: u64,
    /// The SIGTRAP action found at install (kernel sigaction), put back at
    /// detach; None while it has not been read (nothing changed yet).
    pub old: Option<[u64; SA_WORDS]>,
    /// Whether our action is (or may be) in place.
    installed: bool,
    /// Addresses in the active half, in order.
    entries: Vec<u64>,
    known: HashSet<u64>,
    half: u64,
    /// Executable mappings (start, end, writable), refreshed on a miss.
    exec: Vec<(u64, u64, bool)>,
    /// The pipe and SIGCONT handler that end the stop when every pgdbg
    /// process is gone (selfrelease.rs).
    pub release: Option<selfrelease::Release>,
}

impl TrapHandler {
    /// Taken over by the guardian from pgdbg's record.
    pub fn adopted(base: u64, old: Option<[u64; SA_WORDS]>) -> TrapHandler {
        TrapHandler {
            base,
            old,
            installed: old.is_some(),
            entries: Vec::new(),
            known: HashSet::new(),
            half: 0,
            exec: Vec::new(),
            release: None,
        }
    }

    fn half_addr(&self, h: u64) -> u64 {
        self.base + HALF0 + h * TABLE_BYTES
    }

    fn entry(&mut self, pid: i32, addr: u64, orig: u8) -> u64 {
        let find = |e: &[(u64, u64, bool)]| {
            e.iter()
                .find(|(s, en, _)| *s <= addr && addr < *en)
                .map(|x| x.2)
        };
        let writable = match find(&self.exec) {
            Some(w) => w,
            None => {
                self.exec = procfs::maps(pid)
                    .unwrap_or_default()
                    .iter()
                    .filter(|m| m.perms.contains('x'))
                    .map(|m| (m.start, m.end, m.perms.contains('w')))
                    .collect();
                find(&self.exec).unwrap_or(false)
            }
        };
        (addr & ADDR_MASK) | if writable { F_WRITABLE } else { 0 } | ((orig as u64) << 56)
    }
}

fn sa_bytes(sa: &[u64; SA_WORDS]) -> Vec<u8> {
    sa.iter().flat_map(|w| w.to_le_bytes()).collect()
}

impl Target {
    /// The disarm's own `fcntl`, injected at `at`: the handler stops the
    /// backend again inside code injected there when the page records
    /// that address, so this one system call needs no NOT_OWN bit (whose
    /// write may be what just failed).
    pub(super) fn disarm_in_injected_code(&mut self, at: u64) -> bool {
        let Some(base) = self
            .trap
            .as_ref()
            .filter(|h| h.release.as_ref().is_some_and(|r| r.disarming()))
            .map(|h| h.base)
        else {
            return false;
        };
        let mut b = [0u8; 8];
        at != 0 && self.read(base + ENTRY, &mut b).is_ok() && u64::from_le_bytes(b) == at
    }

    /// Install the handler if it is not there yet (before the first int3 or
    /// debug register).  The target must be stopped; a failure leaves the
    /// target as it was and is only logged (the guardian still restores
    /// the target, only the window before it acts stays open).
    pub(super) fn ensure_trap_handler(&mut self) {
        if self.trap.is_some() || self.trap_refused || self.gone || !self.stopped {
            return;
        }
        if crate::config::get().no_trap_handler {
            self.trap_refused = true;
            return;
        }
        if let Err(e) = self.install_trap_handler() {
            self.trap_refused = true;
            super::log::debug(&format!("no SIGTRAP handler in the target: {e:#}"));
            return;
        }
        if let Some(base) = self.trap.as_ref().map(|h| h.base) {
            self.install_self_release(base, &release_layout());
        }
    }

    fn install_trap_handler(&mut self) -> Result<()> {
        if self.guardian()?.is_none() {
            // the guardian itself never installs one
            bail!("in the guardian");
        }
        let base = self.map_pages(None, MAP_LEN, libc::PROT_READ | libc::PROT_WRITE)?;
        let mut h = TrapHandler::adopted(base, None);
        if let Some(g) = &mut self.guardian {
            g.note_trap(base, None);
        }
        let res = (|| -> Result<()> {
            let code = emit(base);
            self.write(base, &code)?;
            self.write(base + SEL, &h.half_addr(0).to_le_bytes())?;
            let entry = procfs::auxv_entry(self.pid()).unwrap_or(0);
            self.write(base + ENTRY, &entry.to_le_bytes())?;
            self.write(base + ACT_DFL, &[0u8; SA_WORDS * 8])?;
            // the layout of the data page, for a later reader of the call
            // record (callrepair.rs); the record itself stays zero: no call
            self.write(
                base + callrepair::LAYOUT,
                &callrepair::LAYOUT_MAGIC.to_le_bytes(),
            )?;
            let r = self.inject_syscall(
                libc::SYS_mprotect,
                [
                    base,
                    PAGE,
                    (libc::PROT_READ | libc::PROT_EXEC) as u64,
                    0,
                    0,
                    0,
                ],
            )?;
            if r < 0 {
                bail!("mprotect in the target failed (errno {})", -r);
            }
            // the action now in place, read first and recorded for the
            // guardian before ours replaces it
            let r = self.inject_syscall(
                libc::SYS_rt_sigaction,
                [libc::SIGTRAP as u64, 0, base + ACT_OLD, 8, 0, 0],
            )?;
            if r < 0 {
                bail!("rt_sigaction in the target failed (errno {})", -r);
            }
            let mut b = [0u8; SA_WORDS * 8];
            self.read(base + ACT_OLD, &mut b)?;
            let mut old = [0u64; SA_WORDS];
            for (i, w) in old.iter_mut().enumerate() {
                *w = u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
            }
            if old[0] != libc::SIG_DFL as u64 {
                bail!("the target has a SIGTRAP action of its own ({:#x})", old[0]);
            }
            h.old = Some(old);
            if let Some(g) = &mut self.guardian {
                g.note_trap(base, Some(&old));
            }
            let new: [u64; SA_WORDS] = [
                base,
                SA_SIGINFO | SA_RESTART | SA_RESTORER,
                base + RESTORER,
                u64::MAX, // every signal blocked while it runs
            ];
            self.write(base + ACT_NEW, &sa_bytes(&new))?;
            h.installed = true;
            let r = self.inject_syscall(
                libc::SYS_rt_sigaction,
                [libc::SIGTRAP as u64, base + ACT_NEW, 0, 8, 0, 0],
            )?;
            if r < 0 {
                bail!("rt_sigaction in the target failed (errno {})", -r);
            }
            Ok(())
        })();
        self.trap = Some(h);
        if let Err(e) = res {
            let _ = self.remove_trap_handler();
            return Err(e);
        }
        // addresses already armed (none normally)
        let armed: Vec<(u64, u8)> = self.inserted.iter().map(|(a, b)| (*a, *b)).collect();
        for (a, b) in armed {
            self.note_trap_address(a, b)?;
        }
        Ok(())
    }

    /// Make sure the handler knows `addr` (an int3 about to be written over
    /// `orig`): one 8-byte write the first time, none after.
    pub(super) fn note_trap_address(&mut self, addr: u64, orig: u8) -> Result<()> {
        let pid = self.pid();
        let Some(h) = &mut self.trap else {
            return Ok(());
        };
        if h.known.contains(&addr) || orig == 0xcc {
            return Ok(());
        }
        let e = h.entry(pid, addr, orig);
        if (h.entries.len() as u64) < CAP {
            let at = h.half_addr(h.half) + 8 * h.entries.len() as u64;
            h.entries.push(addr);
            h.known.insert(addr);
            return self.write(at, &e.to_le_bytes());
        }
        // full: this address, the one of the current stop (its int3 may
        // be removed already, its SIGTRAP still pending) and the addresses
        // armed now into the other half, zeros after them, then the switch
        let stop_at = if self.stopped {
            self.regs().ok().map(|r| r.rip.wrapping_sub(1))
        } else {
            None
        };
        let h = self.trap.as_ref().expect("handler");
        let mut list: Vec<(u64, u8)> = vec![(addr, orig)];
        if let Some(s) = stop_at
            && s != addr
            && h.known.contains(&s)
        {
            let b = self
                .inserted
                .get(&s)
                .copied()
                .or_else(|| self.original_byte_in_table(s));
            if let Some(b) = b {
                list.push((s, b));
            }
        }
        for (&a, &b) in &self.inserted {
            if !list.iter().any(|(x, _)| *x == a) {
                list.push((a, b));
            }
        }
        if list.len() >= CAP as usize {
            // an armed int3 would be missing from the table: no handler
            // rather than one that lets the backend run past an int3
            super::log::debug(&format!(
                "SIGTRAP handler removed: {} addresses armed, its table holds {}",
                list.len(),
                CAP - 1
            ));
            self.trap_refused = true;
            return self.remove_trap_handler();
        }
        let h = self.trap.as_mut().expect("handler");
        let other = 1 - h.half;
        let mut bytes = vec![0u8; TABLE_BYTES as usize];
        let mut entries = Vec::new();
        for (i, &(a, b)) in list.iter().enumerate() {
            let e = h.entry(pid, a, b);
            bytes[i * 8..i * 8 + 8].copy_from_slice(&e.to_le_bytes());
            entries.push(a);
        }
        let (half_at, sel) = (h.half_addr(other), h.base + SEL);
        self.write(half_at, &bytes)?;
        self.write(sel, &half_at.to_le_bytes())?;
        let h = self.trap.as_mut().expect("handler");
        h.half = other;
        h.known = entries.iter().copied().collect();
        h.entries = entries;
        Ok(())
    }

    /// `addr`'s code was unmapped (a library unloaded): its entry, whose
    /// byte is that code's, becomes one that matches no int3 (address 1,
    /// never a code address; a zero would end the table there), and the
    /// address is new to the handler should other code be mapped there and
    /// armed later (else that code would get the old byte back).
    pub(super) fn forget_trap_address(&mut self, addr: u64) -> Result<()> {
        let Some(h) = &mut self.trap else {
            return Ok(());
        };
        if !h.known.remove(&addr) {
            return Ok(());
        }
        // the mappings changed: the writable flags are looked up again
        h.exec.clear();
        let Some(i) = h.entries.iter().position(|a| *a == addr) else {
            return Ok(());
        };
        h.entries[i] = INERT;
        let at = h.half_addr(h.half) + 8 * i as u64;
        self.write(at, &INERT.to_le_bytes())
    }

    /// Whether `rip` is in the handler's code.
    pub(super) fn in_trap_handler(&self) -> bool {
        match (&self.trap, self.regs()) {
            (Some(h), Ok(r)) => r.rip >= h.base && r.rip < h.base + PAGE,
            _ => false,
        }
    }

    /// The target is inside our handler (a SIGTRAP delivered to it as
    /// pgdbg died, before the group stop took hold): let it run to its
    /// return, whose `rt_sigreturn` puts back the interrupted code's
    /// registers, FP state and signal mask.  With `quiet_entry` the
    /// handler's copy of AT_ENTRY is cleared first: the trap behind an
    /// injected system call (whose code the caller has put back) then makes
    /// it return instead of dying.
    pub(super) fn step_out_of_trap_handler(&mut self, quiet_entry: bool) -> Result<()> {
        let Some((base, release)) = self.trap.as_ref().map(|h| (h.base, h.release.is_some()))
        else {
            return Ok(());
        };
        if !self.in_trap_handler() {
            return Ok(());
        }
        if quiet_entry {
            self.write(base + ENTRY, &0u64.to_le_bytes())?;
        }
        let mut steps = 0u32;
        while self.in_trap_handler() {
            if steps == 200_000 {
                bail!("the target does not leave the SIGTRAP handler");
            }
            if let Some(stop) = self.single_step_raw()? {
                if self.gone {
                    return Ok(());
                }
                return Err(anyhow!(
                    "the target stopped in the SIGTRAP handler: {stop:?}"
                ));
            }
            steps += 1;
        }
        if quiet_entry
            && release
            && let Some(entry) = procfs::auxv_entry(self.pid())
        {
            // the SIGCONT handler reads it too (selfrelease.rs)
            self.write(base + ENTRY, &entry.to_le_bytes())?;
        }
        Ok(())
    }

    /// Put the SIGTRAP action found back and unmap the pages unless the
    /// target is still inside the handler (only possible after pgdbg died:
    /// the guardian steps the target out of it first).
    pub(super) fn remove_trap_handler(&mut self) -> Result<()> {
        let Some(h) = self.trap.clone() else {
            return Ok(());
        };
        if self.gone {
            self.trap = None;
            return Ok(());
        }
        if !self.stopped {
            self.ensure_stopped()?;
            if self.gone {
                self.trap = None;
                return Ok(());
            }
        }
        // the pipe and the SIGCONT action first: they need the pages
        self.remove_self_release()?;
        let base = h.base;
        if let (true, Some(old)) = (h.installed, h.old) {
            let old: [u8; SA_WORDS * 8] = sa_bytes(&old).try_into().expect("sigaction");
            self.restore_action(libc::SIGTRAP, &old, base, base + ACT_NEW, base + ACT_OLD)?;
        }
        if let Some(t) = &mut self.trap {
            t.installed = false;
        }
        if let Some(g) = &mut self.guardian {
            g.note_trap(base, None);
        }
        // inside the handler (the guardian seized the target while it ran):
        // step it out; it is straight-line code and one bounded loop
        self.step_out_of_trap_handler(false)?;
        if self.gone {
            self.trap = None;
            return Ok(());
        }
        // The handler calls nothing and runs with every signal blocked, so
        // once the target is out of it nothing refers to the pages: a word
        // on the stack that points into them is a stale return address of
        // a handler that has returned (scanning the stack for such words
        // kept the pages mapped for nothing).  Only `rip` is checked.
        let rip = self.regs()?.rip;
        let in_use = rip >= base && rip < base + MAP_LEN;
        // our code still there: the pages are ours (read before the
        // record goes)
        let code = emit(base);
        let mut now = vec![0u8; code.len()];
        let ours = self.read(base, &mut now).is_ok() && now == code;
        // the record goes first: if pgdbg dies (or unmapping fails) after
        // this, the pages leak, but nobody unmaps memory the backend may
        // use by then
        self.trap = None;
        if let Some(g) = &mut self.guardian {
            g.forget_trap();
        }
        if in_use || !ours {
            super::log::debug(&format!(
                "SIGTRAP handler pages left mapped: {}",
                if in_use {
                    "the stack points into them"
                } else {
                    "they no longer hold our code"
                }
            ));
            return Ok(());
        }
        self.unmap_pages(base, MAP_LEN)
    }

    /// Put `old` (a kernel sigaction) back as `signal`'s action, unless
    /// the target replaced ours (whose handler is at `ours`) meanwhile:
    /// then its own is kept.  `new` and `cur` are scratch words of the
    /// pages (the action to set, the one replaced).
    pub(super) fn restore_action(
        &mut self,
        signal: i32,
        old: &[u8; SA_WORDS * 8],
        ours: u64,
        new: u64,
        cur: u64,
    ) -> Result<()> {
        let name = nix::sys::signal::Signal::try_from(signal).map_or("a signal", |s| s.as_str());
        self.write(new, old)?;
        let r = self.inject_syscall(libc::SYS_rt_sigaction, [signal as u64, new, cur, 8, 0, 0])?;
        if r < 0 {
            bail!("cannot restore the {name} action (errno {})", -r);
        }
        let mut theirs = [0u8; SA_WORDS * 8];
        self.read(cur, &mut theirs)?;
        if u64::from_le_bytes(theirs[..8].try_into().expect("8")) != ours {
            // the target replaced our action meanwhile: keep its own
            self.write(new, &theirs)?;
            let _ =
                self.inject_syscall(libc::SYS_rt_sigaction, [signal as u64, new, 0, 8, 0, 0])?;
        }
        Ok(())
    }

    /// Whether the SIGCONT handler has let the backend run on since pgdbg
    /// and its guardian were gone (selfrelease.rs): the guardian's records
    /// of registers, data words and held-back signals are old then.  Only
    /// from pages that hold our code.
    pub(super) fn released_by_handler(&self) -> bool {
        let Some(base) = self.trap.as_ref().map(|h| h.base) else {
            return false;
        };
        let code = selfrelease::emit(base, &release_layout());
        let mut now = vec![0u8; code.len()];
        if self.read(base + selfrelease::CODE, &mut now).is_err() || now != code {
            return false;
        }
        let mut b = [0u8; 8];
        self.read(base + selfrelease::RELEASED, &mut b).is_ok() && u64::from_le_bytes(b) != 0
    }

    /// The original byte recorded in the active half of the table for
    /// `addr` (known, no longer armed).
    fn original_byte_in_table(&self, addr: u64) -> Option<u8> {
        let h = self.trap.as_ref()?;
        let i = h.entries.iter().position(|a| *a == addr)?;
        let mut w = [0u8; 8];
        self.read(h.half_addr(h.half) + 8 * i as u64, &mut w).ok()?;
        let e = u64::from_le_bytes(w);
        (e & ADDR_MASK == addr).then_some((e >> 56) as u8)
    }

    /// pgdbg wrote `rip` at an int3's signal-delivery stop: mark that
    /// SIGTRAP dealt with (`si_code` TRAP_UNK), or, on a kernel that
    /// delivers it when pgdbg dies at this stop (Linux 6.18 drops it), the
    /// handler would take it for a fresh hit and rewind `rip` once more (a
    /// push emulated at an int3 would run twice).
    pub(super) fn defuse_pending_trap(&self) -> Result<()> {
        if self.trap.is_none() || self.gone || !self.stopped {
            return Ok(());
        }
        // called only at the signal-delivery stop of one of our int3s
        // (`int3_sigtrap_live`), once: its siginfo is known, no read first;
        // the handler looks at nothing but si_code
        // SAFETY: an all-zero siginfo_t is a valid value.
        let mut si: libc::siginfo_t = unsafe { std::mem::zeroed() };
        si.si_signo = libc::SIGTRAP;
        si.si_code = TRAP_UNK;
        nix::sys::ptrace::setsiginfo(self.pid, &si)
            .map_err(|e| anyhow!("cannot mark the pending SIGTRAP as handled ({e})"))
    }
}

#[cfg(test)]
mod release_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Formatter, NasmFormatter};

    #[test]
    fn kernel_abi_offsets_match_the_c_structs() {
        // glibc's ucontext_t starts like the kernel's struct ucontext
        let uc = std::mem::offset_of!(libc::ucontext_t, uc_mcontext)
            + std::mem::offset_of!(libc::mcontext_t, gregs)
            + 8 * libc::REG_RIP as usize;
        assert_eq!(uc, UCONTEXT_RIP as usize);
        let efl = std::mem::offset_of!(libc::ucontext_t, uc_mcontext)
            + std::mem::offset_of!(libc::mcontext_t, gregs)
            + 8 * libc::REG_EFL as usize;
        assert_eq!(efl, UCONTEXT_EFLAGS as usize);
        let gregs = std::mem::offset_of!(libc::ucontext_t, uc_mcontext)
            + std::mem::offset_of!(libc::mcontext_t, gregs);
        assert_eq!(gregs, callrepair::UC_GREGS as usize);
        assert_eq!(
            gregs + 8 * libc::REG_RSP as usize,
            callrepair::UC_RSP as usize
        );
        assert_eq!(
            gregs + 8 * libc::REG_RIP as usize,
            callrepair::UC_RIP as usize
        );
        let fp = std::mem::offset_of!(libc::ucontext_t, uc_mcontext)
            + std::mem::offset_of!(libc::mcontext_t, fpregs);
        assert_eq!(fp, callrepair::UC_FPREGS as usize);
        assert_eq!(callrepair::UC_RIP, UCONTEXT_RIP);
        let si: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let code = std::ptr::addr_of!(si.si_code) as usize - std::ptr::addr_of!(si) as usize;
        assert_eq!(code, SIGINFO_CODE as usize);
        assert_eq!(SA_SIGINFO, libc::SA_SIGINFO as u64);
        assert_eq!(SA_RESTART, libc::SA_RESTART as u64);
        // SA_RESTORER (0x04000000) is not exported by libc: arch/x86/include/uapi/asm/signal.h
        assert_eq!(SYS_MPROTECT as i64, libc::SYS_mprotect);
        assert_eq!(SYS_RT_SIGRETURN as i64, libc::SYS_rt_sigreturn);
        assert_eq!(SYS_RT_SIGACTION as i64, libc::SYS_rt_sigaction);
        assert_eq!(SYS_GETPID as i64, libc::SYS_getpid);
        assert_eq!(SYS_GETTID as i64, libc::SYS_gettid);
        assert_eq!(SYS_TGKILL as i64, libc::SYS_tgkill);
    }

    fn disasm(code: &[u8], ip: u64) -> Vec<String> {
        let mut dec = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
        let mut f = NasmFormatter::new();
        let mut out = Vec::new();
        for ins in &mut dec {
            assert!(!ins.is_invalid(), "invalid at {:#x}", ins.ip());
            let mut s = String::new();
            f.format(&ins, &mut s);
            out.push(s);
        }
        out
    }

    /// The emitted code decodes to the instructions its comments name,
    /// with every branch landing where it should.
    #[test]
    fn handler_code_decodes_as_written() {
        let base = 0x7f00_0000_0000u64;
        let code = emit(base);
        let end = code.iter().position(|&b| b == 0xf4).unwrap();
        let text = disasm(&code[..end], base);
        let want = [
            "xor r15d,r15d",
            "mov eax,[rsi+8]",
            "cmp eax,2",
            "je near 00007F00000000C8h",
            "cmp eax,80h",
            "je short 00007F000000001Fh",
            "cmp eax,1",
            "jne near 00007F00000000C7h",
            "mov r8,[rdx+0A8h]",
            "lea r9,[r8-1]",
            "mov r11,7F0000001000h",
            "mov rax,[r11+100h]",
            "cmp rax,1",
            "jbe short 00007F0000000068h",
            "cmp rax,r9",
            "je near 00007F00000001F3h",
            "lea rcx,[r11+130h]",
            "mov r10,[rcx]",
            "test r10,r10",
            "je short 00007F0000000068h",
            "cmp r10,r9",
            "je near 00007F0000000197h",
            "add rcx,8",
            "jmp short 00007F0000000051h",
            "mov rax,7F0000001000h",
            "mov rax,[rax]",
            "mov ecx,4000h",
            "mov r10,[rax]",
            "test r10,r10",
            "je short 00007F000000009Ah",
            "mov r11,r10",
            "shl r11,10h",
            "shr r11,10h",
            "cmp r11,r9",
            "je short 00007F00000000D3h",
            "add rax,8",
            "dec ecx",
            "jne short 00007F000000007Ah",
            "test r15,r15",
            "jne near 00007F00000002EEh",
            "cmp byte [r9],0CCh",
            "je near 00007F000000014Dh",
            "mov rax,7F0000001010h",
            "mov rax,[rax]",
            "add rax,3",
            "cmp rax,r8",
            "je near 00007F000000014Dh",
            "ret",
            "and dword [rdx+0B0h],0FFFFFEFFh",
            "ret",
            "mov r12,rdx",
            "mov r13,r9",
            "mov r14,r10",
            "cmp byte [r13],0CCh",
            "jne short 00007F000000013Bh",
            "bt r14,30h",
            "jb short 00007F000000010Eh",
            "mov rdi,r13",
            "and rdi,0FFFFFFFFFFFFF000h",
            "mov esi,1000h",
            "mov edx,7",
            "mov eax,0Ah",
            "syscall",
            "test rax,rax",
            "jne near 00007F000000014Dh",
            "mov rax,r14",
            "shr rax,38h",
            "mov [r13],al",
            "bt r14,30h",
            "jb short 00007F000000013Bh",
            "mov rdi,r13",
            "and rdi,0FFFFFFFFFFFFF000h",
            "mov esi,1000h",
            "mov edx,5",
            "mov eax,0Ah",
            "syscall",
            "test r15,r15",
            "jne near 00007F00000002EEh",
            "mov [r12+0A8h],r13",
            "ret",
            "test r15,r15",
            "jne near 00007F00000002EEh",
            "mov edi,5",
            "mov rsi,7F00000010C0h",
            "xor edx,edx",
            "mov r10d,8",
            "mov eax,0Dh",
            "syscall",
            "mov eax,27h",
            "syscall",
            "mov r15,rax",
            "mov eax,0BAh",
            "syscall",
            "mov esi,eax",
            "mov edi,r15d",
            "mov edx,5",
            "mov eax,0EAh",
            "syscall",
            "ret",
            "mov rax,[r11+108h]",
            "cmp [rdx+0A0h],rax",
            "jae near 00007F0000000068h",
            "mov rax,[r11+118h]",
            "test rax,rax",
            "je short 00007F00000001C7h",
            "mov rax,[rax]",
            "cmp rax,[r11+120h]",
            "jne near 00007F0000000068h",
            "mov rax,[r11+110h]",
            "test rax,rax",
            "je short 00007F000000020Bh",
            "mov rcx,[r11+108h]",
            "mov rdi,[r11+100h]",
            "mov [rcx],rdi",
            "mov [rdx+0A0h],rcx",
            "mov [rdx+0A8h],rax",
            "ret",
            "mov rax,[r11+108h]",
            "add rax,8",
            "cmp rax,[rdx+0A0h]",
            "jne near 00007F0000000068h",
            "lea rsi,[r11+160h]",
            "mov r10d,8",
            "mov rdi,[rsi]",
            "test rdi,rdi",
            "je short 00007F0000000244h",
            "dec rdi",
            "mov rcx,[rsi+8]",
            "mov rax,[rsi+10h]",
            "test rcx,rcx",
            "je short 00007F0000000244h",
            "cmp rcx,8",
            "ja short 00007F0000000244h",
            "mov [rdi],al",
            "inc rdi",
            "shr rax,8",
            "dec rcx",
            "jne short 00007F0000000236h",
            "add rsi,18h",
            "dec r10d",
            "jne short 00007F0000000218h",
            "lea rsi,[r11+220h]",
            "lea rdi,[rdx+28h]",
            "mov ecx,90h",
            "rep movsb",
            "mov rcx,[r11+2B0h]",
            "cmp rcx,1A0h",
            "jb near 00007F00000002D9h",
            "mov r10,[rdx+0E0h]",
            "test r10,r10",
            "je near 00007F00000002D9h",
            "mov rdi,r10",
            "mov rsi,7F0000042000h",
            "mov ecx,1A0h",
            "rep movsb",
            "cmp dword [r10+1D0h],46505853h",
            "jne near 00007F00000002D9h",
            "mov ecx,[r10+1E0h]",
            "cmp rcx,[r11+2B0h]",
            "jne near 00007F00000002D9h",
            "lea rdi,[r10+200h]",
            "mov rsi,7F0000042200h",
            "sub rcx,200h",
            "rep movsb",
            "mov qword [r11+100h],1",
            "mov r12,rdx",
            "lea r15,[r11+128h]",
            "mov rdx,r12",
            "mov r9,[r15]",
            "test r9,r9",
            "je short 00007F0000000306h",
            "add r15,8",
            "lea r8,[r9+1]",
            "jmp 00007F0000000068h",
            "ret",
        ];
        assert_eq!(text, want, "{text:#?}");
        let r = disasm(&code[RESTORER as usize..], base + RESTORER);
        assert_eq!(r, ["mov eax,0Fh", "syscall", "ud2"]);
        let pos = |s: &str| {
            let mut dec = Decoder::with_ip(64, &code[..end], base, DecoderOptions::NONE);
            let mut f = NasmFormatter::new();
            for ins in &mut dec {
                let mut t = String::new();
                f.format(&ins, &mut t);
                if t == s {
                    return ins.ip();
                }
            }
            panic!("{s} not found");
        };
        // labels: int3, the loop head, missing, done, trace, found, store,
        // rewind (its store), die (its first own instruction), and the call
        // repair's: at_error, at_return, repair, fp_done, next_fix
        assert_eq!(pos("mov r8,[rdx+0A8h]"), base + 0x1f);
        assert_eq!(pos("mov r10,[rax]"), base + 0x7a);
        assert_eq!(pos("test r15,r15"), base + 0x9a);
        assert_eq!(pos("ret"), base + 0xc7);
        assert_eq!(pos("and dword [rdx+0B0h],0FFFFFEFFh"), base + 0xc8);
        assert_eq!(pos("mov r12,rdx"), base + 0xd3);
        assert_eq!(pos("mov rax,r14"), base + 0x10e);
        assert_eq!(pos("mov [r12+0A8h],r13"), base + 0x13b + 9);
        assert_eq!(pos("mov edi,5"), base + 0x14d + 9);
        assert_eq!(pos("mov rax,[r11+108h]"), base + 0x197);
        assert_eq!(pos("cmp rax,[rdx+0A0h]"), base + 0x1f3 + 11);
        assert_eq!(pos("lea rsi,[r11+160h]"), base + 0x20b);
        assert_eq!(pos("mov qword [r11+100h],1"), base + 0x2d9);
        assert_eq!(pos("mov rdx,r12"), base + 0x2ee);
        // the data words the code reads
        assert_eq!(base + SEL, 0x7f00_0000_1000);
        assert_eq!(base + ENTRY, 0x7f00_0000_1010);
        assert_eq!(base + ACT_DFL, 0x7f00_0000_10c0);
        assert!(ACT_DFL >= ACT_OLD + 8 * SA_WORDS as u64);
    }

    /// In a forked child: the emitted handler installed for real, then
    /// `body` run; returns the child's wait status.
    fn run_with_handler(body: fn(u64) -> i32) -> i32 {
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                let base = libc::mmap(
                    std::ptr::null_mut(),
                    MAP_LEN as usize,
                    libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if base == libc::MAP_FAILED {
                    libc::_exit(90);
                }
                let base = base as u64;
                let code = emit(base);
                std::ptr::copy_nonoverlapping(code.as_ptr(), base as *mut u8, code.len());
                *((base + SEL) as *mut u64) = base + HALF0;
                let act: [u64; SA_WORDS] = [
                    base,
                    SA_SIGINFO | SA_RESTART | SA_RESTORER,
                    base + RESTORER,
                    u64::MAX,
                ];
                let r = libc::syscall(
                    libc::SYS_rt_sigaction,
                    libc::SIGTRAP,
                    act.as_ptr(),
                    0usize,
                    8usize,
                );
                if r != 0 {
                    libc::_exit(91);
                }
                libc::_exit(body(base));
            }
            let mut st = 0;
            assert_eq!(libc::waitpid(pid, &mut st, 0), pid);
            st
        }
    }

    /// An int3 not in the table: the handler re-raises SIGTRAP with the
    /// default action, the process dies of it as it would without us.
    #[test]
    fn foreign_int3_dies_as_without_handler() {
        let st = run_with_handler(|_| {
            unsafe { std::arch::asm!("int3") };
            0
        });
        assert!(
            libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGTRAP,
            "status {st:#x}"
        );
    }

    /// An int3 in the table (writable page): the byte comes back, rip is
    /// rewound, the original instruction runs.
    #[test]
    fn int3_in_table_is_restored_and_rewound() {
        let st = run_with_handler(|base| unsafe {
            // a function in the handler's own (writable) mapping: mov eax, 7; ret
            let f = base + HALF0 + TABLE_BYTES;
            let code = [0xb8u8, 7, 0, 0, 0, 0xc3];
            std::ptr::copy_nonoverlapping(code.as_ptr(), f as *mut u8, code.len());
            *(f as *mut u8) = 0xcc;
            *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xb8u64 << 56);
            let g: extern "C" fn() -> i32 = std::mem::transmute(f as usize);
            if g() != 7 || *(f as *const u8) != 0xb8 {
                return 1;
            }
            0
        });
        assert!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
            "status {st:#x}"
        );
    }

    /// A single-step trap: the handler clears TF in the context, so the
    /// code after it runs without trapping on every instruction.
    #[test]
    fn single_step_trap_clears_tf() {
        let st = run_with_handler(|_| {
            let flags: u64;
            unsafe {
                std::arch::asm!(
                    "pushfq",
                    "or qword ptr [rsp], 0x100",
                    "popfq",
                    "nop",
                    "nop",
                    "pushfq",
                    "pop {f}",
                    f = out(reg) flags,
                )
            };
            if flags & 0x100 != 0 { 1 } else { 0 }
        });
        assert!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
            "status {st:#x}"
        );
    }

    /// A call in flight repaired by the handler alone: the "call" returns
    /// to its return int3 with `rsp` just above its return slot; the
    /// handler puts a data word, the registers and the XSAVE image (XMM0
    /// changed in it) back, and the int3's byte; the code it resumes at
    /// exits with a status that sums what it finds.
    #[test]
    fn call_return_trap_restores_the_saved_state() {
        use callrepair as cr;
        static mut WORD: u32 = 5;
        let st = run_with_handler(|base| unsafe {
            let w = |a: u64, v: u64| *((base + a) as *mut u64) = v;
            // the return int3 (original byte: nop) and, after it, the code
            // the saved registers resume at:
            //   mov eax,[rbx]; add eax,r12d; movzx ecx,byte [r13];
            //   add eax,ecx; movd edx,xmm0; add eax,edx; mov edi,eax;
            //   mov eax,231 (exit_group); syscall
            let f = base + HALF0 + TABLE_BYTES;
            let stub = f + 16;
            let code = [
                0x8b, 0x03, 0x44, 0x01, 0xe0, 0x41, 0x0f, 0xb6, 0x4d, 0x00, 0x01, 0xc8, 0x66, 0x0f,
                0x7e, 0xc2, 0x01, 0xd0, 0x89, 0xc7, 0xb8, 0xe7, 0, 0, 0, 0x0f, 0x05,
            ];
            std::ptr::copy_nonoverlapping(code.as_ptr(), stub as *mut u8, code.len());
            *(f as *mut u8) = 0xcc;
            *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0x90u64 << 56);
            // the saved XSAVE image: this thread's own, XMM0 = 60
            let Some((size, _)) = super::super::xstate::cpuid_xsave_sizes() else {
                return 80;
            };
            let x = base + XAREA;
            std::arch::asm!("xsave64 [{0}]", in(reg) x, in("eax") u32::MAX, in("edx") u32::MAX);
            *((x + 160) as *mut u32) = 60;
            w(cr::XLEN, size as u64);
            // the data word the "series" changed, to be put back
            let word = std::ptr::addr_of_mut!(WORD);
            w(cr::DATAW, word as u64 + 1);
            w(cr::DATAW + 8, 4);
            w(cr::DATAW + 16, 5);
            *word = 99;
            let regs = super::super::Registers {
                rbx: word as u64,
                r12: 37,
                r13: f,
                rip: stub,
                rsp: (x - 4096) & !0xf,
                eflags: 0x202,
                ..Default::default()
            };
            for (i, v) in cr::gregs_words(&regs).iter().enumerate() {
                w(cr::GREGS + 8 * i as u64, *v);
            }
            w(cr::INT3S, f);
            w(cr::MARK, f);
            // the "call" returns to f: its return slot is rsp - 8 here
            std::arch::asm!(
                "lea rax, [rsp - 8]",
                "mov [rcx], rax",
                "push rdx",
                "ret",
                in("rcx") base + cr::SP,
                in("rdx") f,
                options(noreturn),
            )
        });
        // 5 (the word) + 37 (r12) + 0x90 (the byte) + 60 (XMM0)
        assert!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 246,
            "status {st:#x}"
        );
    }

    /// An error trap inside the call (rsp below its return slot, the catch
    /// word unchanged): the handler runs the flush function on the call's
    /// stack, which returns into the return trap, which repairs; both
    /// int3s get their bytes back.
    #[test]
    fn call_error_trap_flushes_then_repairs() {
        use callrepair as cr;
        static mut WORD: u32 = 5;
        static mut FLAG: u32 = 0;
        static mut CATCHW: u64 = 3;
        let st = run_with_handler(|base| unsafe {
            let w = |a: u64, v: u64| *((base + a) as *mut u64) = v;
            // f: the return int3 (original byte nop), e: the error trap
            // (original byte 0); the code the saved registers resume at:
            //   mov eax,[rbx]; add eax,r12d; add eax,[r14];
            //   movzx ecx,byte [r13+8]; add eax,ecx; mov edi,eax;
            //   mov eax,231 (exit_group); syscall
            // and the "flush function": mov dword [rsi],20; ret
            let f = base + HALF0 + TABLE_BYTES;
            let e = f + 8;
            let stub = f + 16;
            let flush = f + 48;
            let code = [
                0x8b, 0x03, 0x44, 0x01, 0xe0, 0x41, 0x03, 0x06, 0x41, 0x0f, 0xb6, 0x4d, 0x08, 0x01,
                0xc8, 0x89, 0xc7, 0xb8, 0xe7, 0, 0, 0, 0x0f, 0x05,
            ];
            std::ptr::copy_nonoverlapping(code.as_ptr(), stub as *mut u8, code.len());
            let fl = [0xc7u8, 0x06, 20, 0, 0, 0, 0xc3];
            std::ptr::copy_nonoverlapping(fl.as_ptr(), flush as *mut u8, fl.len());
            *(f as *mut u8) = 0xcc;
            *(e as *mut u8) = 0xcc;
            *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0x90u64 << 56);
            *((base + HALF0 + 8) as *mut u64) = e | F_WRITABLE;
            let word = std::ptr::addr_of_mut!(WORD);
            w(cr::DATAW, word as u64 + 1);
            w(cr::DATAW + 8, 4);
            w(cr::DATAW + 16, 5);
            *word = 99;
            let flag = std::ptr::addr_of_mut!(FLAG);
            let regs = super::super::Registers {
                rbx: word as u64,
                r12: 17,
                r13: f,
                r14: flag as u64,
                rip: stub,
                rsp: (base + XAREA - 4096) & !0xf,
                eflags: 0x202,
                ..Default::default()
            };
            for (i, v) in cr::gregs_words(&regs).iter().enumerate() {
                w(cr::GREGS + 8 * i as u64, *v);
            }
            w(cr::INT3S, f);
            w(cr::INT3S + 8, e);
            w(cr::FLUSH, flush);
            w(cr::CATCH_AT, std::ptr::addr_of!(CATCHW) as u64);
            w(cr::CATCH_VAL, 3);
            w(cr::MARK, f);
            // the "call" raises its error below its return slot
            std::arch::asm!(
                "lea rax, [rsp - 8]",
                "mov [rcx], rax",
                "sub rsp, 256",
                "jmp rdx",
                in("rcx") base + cr::SP,
                in("rdx") e,
                in("rsi") flag,
                options(noreturn),
            )
        });
        // 5 (the word) + 17 (r12) + 20 (the flush ran) + 0 (e's byte back)
        assert!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 42,
            "status {st:#x}"
        );
    }

    /// A stale record (no call's return: rsp elsewhere) repairs nothing:
    /// the int3 in the table is rewound as usual.
    #[test]
    fn a_stale_call_record_is_ignored() {
        let st = run_with_handler(|base| unsafe {
            use callrepair as cr;
            let f = base + HALF0 + TABLE_BYTES;
            let code = [0xb8u8, 7, 0, 0, 0, 0xc3];
            std::ptr::copy_nonoverlapping(code.as_ptr(), f as *mut u8, code.len());
            *(f as *mut u8) = 0xcc;
            *((base + HALF0) as *mut u64) = f | F_WRITABLE | (0xb8u64 << 56);
            *((base + cr::MARK) as *mut u64) = f;
            *((base + cr::SP) as *mut u64) = 0x1000;
            *((base + cr::INT3S) as *mut u64) = f;
            let g: extern "C" fn() -> i32 = std::mem::transmute(f as usize);
            if g() != 7 || *(f as *const u8) != 0xb8 || *((base + cr::MARK) as *const u64) != f {
                return 1;
            }
            0
        });
        assert!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
            "status {st:#x}"
        );
    }

    #[test]
    fn entries_pack_address_flag_and_byte() {
        let mut h = TrapHandler::adopted(0x1000, None);
        h.exec = vec![(0x400000, 0x500000, false), (0x600000, 0x601000, true)];
        assert_eq!(h.entry(0, 0x400123, 0x55), 0x5500_0000_0040_0123);
        assert_eq!(h.entry(0, 0x600010, 0xf3), 0xf301_0000_0060_0010);
    }
}
